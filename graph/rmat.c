/* rmat.c - the Graph500-style R-MAT generator, counter-based.
 *
 * Edge i draws its quadrants from a splitmix64 stream whose start is itself
 * the i-th splitmix64 output of the seed's key: word j of edge i is
 * mix(mix(key + i * G) + (j + 1) * G). Each 64-bit word decides two levels
 * (32 bits each, compared with thresholds a, a+b, a+b+c scaled by 2^32), so
 * scale 20 costs 10 words per edge, and edge i needs nothing but (seed, i).
 *
 * The vertex permutation is a keyed bijection of [0, 2^scale) computed per
 * ID, with no table: four rounds of x = x * m + c (m odd) and
 * x ^= x >> ceil(scale / 2), all mod 2^scale. Each step is invertible on
 * scale-bit integers, so the whole map is; the multiply carries low bits up
 * and the shift carries high bits down, so every output bit depends on
 * every input bit after two rounds. Computing it per ID keeps generation
 * parallel and the memory at the edge arrays alone. */
#include <math.h>
#include <string.h>
#include "graph/graph_int.h"

#define GOLDEN 0x9e3779b97f4a7c15ULL

static inline uint64_t
mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* A spec made ready: thresholds, keys, permutation constants. */
struct rmat {
    int      scale;
    int      permute;
    int64_t  m;                    /* edges */
    uint64_t key;                  /* edge stream key */
    uint64_t t_a, t_ab, t_abc;     /* quadrant thresholds on 32 bits */
    uint64_t mask;                 /* 2^scale - 1 */
    unsigned shift;                /* ceil(scale / 2) */
    uint64_t pm[4], pc[4];         /* permutation rounds: multiplier (odd),
                                    * addend */
};

static gkv_err
prepare(const gkv_rmat_spec *sp, struct rmat *r)
{
    double a, b, c;
    int64_t ef;
    uint64_t pk;

    if (sp == NULL || sp->scale < 0 || sp->scale > GKV_RMAT_SCALE_MAX ||
        sp->edge_factor < 0 || (sp->flags & ~GKV_RMAT_NO_PERMUTE))
        return GKV_EINVAL;
    a = sp->a;
    b = sp->b;
    c = sp->c;
    if (a == 0 && b == 0 && c == 0) {
        a = 0.57;
        b = 0.19;
        c = 0.19;
    }
    if (!(a >= 0 && b >= 0 && c >= 0) || !isfinite(a + b + c) ||
        a + b + c > 1.0 + 1e-12)
        return GKV_EINVAL;
    ef = sp->edge_factor ? sp->edge_factor : 16;
    if (ef > (INT64_C(1) << 62) >> sp->scale)
        return GKV_EINVAL;
    memset(r, 0, sizeof *r);
    r->scale = sp->scale;
    r->permute = !(sp->flags & GKV_RMAT_NO_PERMUTE);
    r->m = ef << sp->scale;
    r->key = mix(sp->seed ^ 0x524d4154454447ULL);       /* "RMATEDG" */
    r->t_a = (uint64_t)(a * 4294967296.0 + 0.5);
    r->t_ab = (uint64_t)((a + b) * 4294967296.0 + 0.5);
    r->t_abc = (uint64_t)((a + b + c) * 4294967296.0 + 0.5);
    r->mask = (UINT64_C(1) << sp->scale) - 1;
    r->shift = (unsigned)(sp->scale + 1) / 2;
    pk = mix(sp->seed ^ 0x524d41545045524dULL);         /* "RMATPERM" */
    for (int i = 0; i < 4; i++) {
        r->pm[i] = mix(pk += GOLDEN) | 1;
        r->pc[i] = mix(pk += GOLDEN);
    }
    return GKV_OK;
}

static inline uint64_t
permute(const struct rmat *r, uint64_t x)
{
    for (int i = 0; i < 4; i++) {
        x = (x * r->pm[i] + r->pc[i]) & r->mask;
        x ^= x >> r->shift;
    }
    return x;
}

/* One level from 32 random bits x: src bit, dst bit. Quadrants in order
 * a (0,0), b (0,1), c (1,0), d (1,1); branch-free. */
#define LEVEL(x) do {                                                   \
        uint64_t x_ = (x);                                              \
        unsigned hi_ = x_ >= t_ab;                                      \
        u = (u << 1) | hi_;                                             \
        v = (v << 1) | ((x_ >= t_a) ^ hi_ ^ (x_ >= t_abc));             \
    } while (0)

static void
fill(const struct rmat *r, int64_t first, int64_t n, int64_t *src,
     int64_t *dst)
{
    const uint64_t t_a = r->t_a, t_ab = r->t_ab, t_abc = r->t_abc;
    const int scale = r->scale;

    for (int64_t i = 0; i < n; i++) {
        uint64_t ctr = mix(r->key + (uint64_t)(first + i) * GOLDEN);
        uint64_t u = 0, v = 0, w;
        int l;

        for (l = scale; l >= 2; l -= 2) {
            w = mix(ctr += GOLDEN);
            LEVEL(w & 0xffffffffu);
            LEVEL(w >> 32);
        }
        if (l == 1) {
            w = mix(ctr += GOLDEN);
            LEVEL(w & 0xffffffffu);
        }
        if (r->permute) {
            u = permute(r, u);
            v = permute(r, v);
        }
        src[i] = (int64_t)u;
        dst[i] = (int64_t)v;
    }
}

gkv_err
gkv_rmat_edges(const gkv_rmat_spec *sp, int64_t first, int64_t n,
               int64_t *src, int64_t *dst)
{
    struct rmat r;
    gkv_err rc;

    if ((rc = prepare(sp, &r)) != GKV_OK)
        return rc;
    if (first < 0 || n < 0 || first > r.m - n)
        return GKV_EINVAL;
    if (n > 0 && (src == NULL || dst == NULL))
        return GKV_EINVAL;
    fill(&r, first, n, src, dst);
    return GKV_OK;
}

int64_t
gkv_rmat_vertex(const gkv_rmat_spec *sp, int64_t v)
{
    struct rmat r;

    if (prepare(sp, &r) != GKV_OK || v < 0 || (uint64_t)v > r.mask)
        return -1;
    return r.permute ? (int64_t)permute(&r, (uint64_t)v) : v;
}

struct fill_job {
    const struct rmat *r;
    int64_t first, n;
    int64_t *src, *dst;
};

static void
fill_job_run(void *p)
{
    struct fill_job *j = p;

    fill(j->r, j->first, j->n, j->src + j->first, j->dst + j->first);
}

gkv_err
gkv_rmat_graph(gkv_graph **out, const gkv_rmat_spec *sp, int nthreads)
{
    struct fill_job jobs[64];
    struct graph_etype *et;
    struct rmat r;
    gkv_graph *g = NULL;
    int64_t per;
    gkv_err rc;
    int t;

    if (out == NULL)
        return GKV_EINVAL;
    *out = NULL;
    if ((rc = prepare(sp, &r)) != GKV_OK)
        return rc;
    if ((rc = gkv_graph_new_homo(&g, (int64_t)r.mask + 1)) != GKV_OK)
        return rc;
    if ((rc = graph__reserve(g, 0, r.m, 0)) != GKV_OK) {
        gkv_graph_free(g);
        return rc;
    }
    et = &g->g_et[0];
    t = nthreads < 1 ? 1 : nthreads > 64 ? 64 : nthreads;
    if (r.m < (int64_t)t * 4096)       /* not worth a thread */
        t = 1;
    per = (r.m + t - 1) / t;
    for (int i = 0; i < t; i++) {
        jobs[i].r = &r;
        jobs[i].first = per * i < r.m ? per * i : r.m;
        jobs[i].n = r.m - jobs[i].first < per ? r.m - jobs[i].first : per;
        jobs[i].src = et->et_srcv;
        jobs[i].dst = et->et_dstv;
    }
    graph__parallel(fill_job_run, jobs, sizeof jobs[0], t);
    et->et_n = r.m;
    *out = g;
    return GKV_OK;
}
