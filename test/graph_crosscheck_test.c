/* graph_crosscheck_test.c - graph/ at its limits and against a second
 * implementation: readers fed extreme IDs and weights, edge lookups and the
 * partition reader fed extreme IDs and counts, and the sampler checked pick
 * by pick against an independent implementation of the generator written
 * from gkv_sample.h (single hops, blocks and edge batches; exclusions,
 * weights with zeros, replacement, fanouts -1 / 0 / above the degree,
 * duplicate seeds, both directions, 1 and 3 threads). Random parts print
 * their seed and take GKVT_SEED. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "gkvt.h"
#include "graph/gkv_graph.h"
#include "graph/gkv_sample.h"
#include "graph/gkv_part.h"
#include "graph/gkv_partition.h"

#define N_OF(a) (sizeof (a) / sizeof (a)[0])

/* ---- fixtures ----------------------------------------------------------- */

struct fx {
    char *dir;
};

static int
setup(void **state)
{
    return gkvt_dir_setup(state, sizeof(struct fx), "graph_xcheck");
}

static int
teardown(void **state)
{
    return gkvt_dir_teardown(state);
}

static char *
fpath(const struct fx *f, const char *name)
{
    size_t n = strlen(f->dir) + strlen(name) + 2;
    char *p = malloc(n);

    snprintf(p, n, "%s/%s", f->dir, name);
    return p;
}

static void
write_bytes(const char *path, const void *b, size_t n)
{
    FILE *fp = fopen(path, "wb");

    assert_non_null(fp);
    assert_int_equal(fwrite(b, 1, n, fp), n);
    assert_int_equal(fclose(fp), 0);
}

/* ---- readers: the largest ID on a growing node type --------------------- */

/* An ID of 2^63 - 1 is a valid ID on a fixed type only if the type has
 * 2^63 nodes, which an int64 count cannot hold; on a growing type it would
 * make the count 2^63. Accepting it wrapped the count to INT64_MIN, and the
 * next smaller ID then "grew" it back to a small number: the graph kept an
 * edge whose source is far outside its node count, which the CSC and the
 * sampler index with. It must be refused, leaving the graph as it was. */
static void
test_text_max_id_on_growing_type(void **state)
{
    static const char txt[] = "0 1\n9223372036854775807 0\n";
    gkv_graph *g;
    gkv_coo c;

    (void)state;
    GKVT_OK(gkv_graph_new_homo(&g, GKV_GRAPH_GROW));
    assert_int_equal(gkv_graph_read_text_mem(g, "e.txt", txt, strlen(txt), 0,
                                             0), GKV_ERANGE);
    gkvt_expect_msg(gkv_graph_errmsg(g), "e.txt:2: src 9223372036854775807");
    assert_int_equal(gkv_graph_num_nodes(g, 0), 0);
    assert_int_equal(gkv_graph_num_edges(g, 0), 0);
    /* the largest ID that fits a count is fine */
    {
        static const char ok[] = "9223372036854775806 0\n";
        GKVT_OK(gkv_graph_read_text_mem(g, "e.txt", ok, strlen(ok), 0, 0));
        assert_true(gkv_graph_num_nodes(g, 0) == INT64_MAX);
        GKVT_OK(gkv_graph_edges(g, 0, &c));
        assert_int_equal(c.n, 1);
        assert_true(c.src[0] == INT64_MAX - 1);
    }
    gkv_graph_free(g);
}

static void
test_add_edges_max_id_on_growing_type(void **state)
{
    int64_t src[2] = {3, 0}, dst[2] = {1, INT64_MAX};
    gkv_graph *g;

    (void)state;
    GKVT_OK(gkv_graph_new_homo(&g, GKV_GRAPH_GROW));
    assert_int_equal(gkv_graph_add_edges(g, 0, src, dst, NULL, 2),
                     GKV_ERANGE);
    gkvt_expect_msg(gkv_graph_errmsg(g), "edge 1: dst 9223372036854775807");
    assert_int_equal(gkv_graph_num_nodes(g, 0), 0);
    assert_int_equal(gkv_graph_num_edges(g, 0), 0);
    gkv_graph_free(g);
}

static void
test_binary_max_id_on_growing_type(void **state)
{
    struct fx *f = *state;
    unsigned char b[32] = {0};
    char *p = fpath(f, "e.bin");
    gkv_graph *g;

    /* edge 0: 2 -> 0; edge 1: INT64_MAX -> 1 (little-endian) */
    b[0] = 2;
    memset(b + 16, 0xff, 7);
    b[23] = 0x7f;
    b[24] = 1;
    write_bytes(p, b, sizeof b);
    GKVT_OK(gkv_graph_new_homo(&g, GKV_GRAPH_GROW));
    assert_int_equal(gkv_graph_read_binary(g, 0, p, NULL), GKV_ERANGE);
    gkvt_expect_msg(gkv_graph_errmsg(g), "edge 1 (byte 16): src "
                    "9223372036854775807");
    assert_int_equal(gkv_graph_num_nodes(g, 0), 0);
    assert_int_equal(gkv_graph_num_edges(g, 0), 0);
    gkv_graph_free(g);
    free(p);
}

/* ---- readers: subnormal weights ----------------------------------------- */

/* "1e-40" is a finite decimal float (a subnormal float32); the text reader
 * called it "not a finite number" (strtof reports ERANGE for it) while it
 * took "1e-50" (which rounds to 0), and the binary reader and
 * gkv_graph_add_edges take the same float. */
static void
test_text_subnormal_weight(void **state)
{
    static const char txt[] = "0 1 1e-40\n1 2 1e-50\n2 3 -0\n3 0 0.5\n";
    gkv_graph *g;
    gkv_coo c;

    (void)state;
    GKVT_OK(gkv_graph_new_homo(&g, 4));
    GKVT_OK(gkv_graph_read_text_mem(g, "w.txt", txt, strlen(txt), 0,
                                    GKV_TEXT_WEIGHT));
    GKVT_OK(gkv_graph_edges(g, 0, &c));
    assert_int_equal(c.n, 4);
    assert_true(c.w[0] == strtof("1e-40", NULL));
    assert_true(c.w[0] > 0.0f && !isnormal(c.w[0]));
    assert_true(c.w[1] == 0.0f);
    assert_true(c.w[2] == 0.0f && signbit(c.w[2]));   /* -0 is 0 */
    assert_true(c.w[3] == 0.5f);
    /* a negative subnormal is negative: refused like -1 */
    {
        static const char neg[] = "0 1 -1e-40\n";
        assert_int_equal(gkv_graph_read_text_mem(g, "w.txt", neg,
                                                 strlen(neg), 0,
                                                 GKV_TEXT_WEIGHT),
                         GKV_EFORMAT);
        gkvt_expect_msg(gkv_graph_errmsg(g), "w.txt:1: weight '-1e-40' is negative");
    }
    /* overflow is still refused */
    {
        static const char big[] = "0 1 1e39\n";
        assert_int_equal(gkv_graph_read_text_mem(g, "w.txt", big,
                                                 strlen(big), 0,
                                                 GKV_TEXT_WEIGHT),
                         GKV_EFORMAT);
        gkvt_expect_msg(gkv_graph_errmsg(g), "w.txt:1: weight '1e39' is not a "
                        "finite number");
        assert_int_equal(gkv_graph_num_edges(g, 0), 4);
    }
    gkv_graph_free(g);
}

/* ---- the sampler against a reference written from gkv_sample.h ---------- */

static uint64_t
ref_m(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t
ref_a(uint64_t x, uint64_t v)
{
    return ref_m(x ^ ref_m(v + 0x9e3779b97f4a7c15ULL));
}

static uint64_t
ref_below(uint64_t r, uint64_t n)
{
    __extension__ unsigned __int128 p = (unsigned __int128)r * n;
    return (uint64_t)(p >> 64);
}

static double
ref_unit(uint64_t r)
{
    return (double)(r >> 11) * 0x1.0p-53;
}

/* A graph and what the reference needs of it: per etype and direction the
 * CSC / CSR (the same arrays gkv_sgraph_from_graph lays out) and the
 * weights by edge ID. */
#define RT 3                       /* edge types */
struct rgraph {
    gkv_graph *g;
    int64_t nn[2];
    int snt[RT], dnt[RT];
    gkv_csc adj[RT][2];
    const float *w[RT];            /* by edge ID, or NULL */
    int64_t ne[RT];
};

static void
rgraph_make(struct rgraph *r, uint64_t *st, int weighted)
{
    static const float wv[] = {0.0f, 0.5f, 1.0f, 2.0f, 3.0f, 1e-30f, 7.0f};
    static const int pairs[RT][2] = {{0, 0}, {0, 1}, {1, 0}};

    memset(r, 0, sizeof *r);
    r->nn[0] = 20 + (int64_t)(tools__splitmix64(st) % 40);
    r->nn[1] = 1 + (int64_t)(tools__splitmix64(st) % 30);
    GKVT_OK(gkv_graph_new(&r->g));
    GKVT_OK(gkv_graph_add_ntype(r->g, "a", r->nn[0], NULL));
    GKVT_OK(gkv_graph_add_ntype(r->g, "b", r->nn[1], NULL));
    for (int e = 0; e < RT; e++) {
        char rel[8];
        size_t n = (size_t)(tools__splitmix64(st) % 400);
        int64_t *src = malloc((n + 1) * sizeof *src);
        int64_t *dst = malloc((n + 1) * sizeof *dst);
        float *w = malloc((n + 1) * sizeof *w);
        int64_t hub;
        snprintf(rel, sizeof rel, "r%d", e);
        r->snt[e] = pairs[e][0];
        r->dnt[e] = pairs[e][1];
        GKVT_OK(gkv_graph_add_etype(r->g, pairs[e][0] ? "b" : "a", rel,
                                    pairs[e][1] ? "b" : "a", NULL));
        /* skewed: a hub with many in-edges (k above 64 takes other paths),
         * parallel edges and self-loops come by chance; node nn - 1 of
         * each type has no edges at all */
        hub = (int64_t)(tools__splitmix64(st) % (uint64_t)(r->nn[r->dnt[e]] - 1 > 0 ?
                                                    r->nn[r->dnt[e]] - 1 : 1));
        for (size_t i = 0; i < n; i++) {
            int64_t ns = r->nn[r->snt[e]] - 1, nd = r->nn[r->dnt[e]] - 1;
            src[i] = ns > 0 ? (int64_t)(tools__splitmix64(st) % (uint64_t)ns) : 0;
            dst[i] = tools__splitmix64(st) % 3 == 0 ? hub :
                     nd > 0 ? (int64_t)(tools__splitmix64(st) % (uint64_t)nd) : 0;
            w[i] = wv[tools__splitmix64(st) % N_OF(wv)];
        }
        GKVT_OK(gkv_graph_add_edges(r->g, e, src, dst, weighted ? w : NULL,
                                    n));
        free(src);
        free(dst);
        free(w);
    }
    for (int e = 0; e < RT; e++) {
        gkv_coo c;
        GKVT_OK(gkv_graph_edges(r->g, e, &c));
        r->w[e] = c.w;
        r->ne[e] = c.n;
        GKVT_OK(gkv_graph_csc(r->g, e, 1, &r->adj[e][GKV_DIR_IN]));
        GKVT_OK(gkv_graph_csr(r->g, e, 1, &r->adj[e][GKV_DIR_OUT]));
    }
}

static void
rgraph_free(struct rgraph *r)
{
    for (int e = 0; e < RT; e++) {
        gkv_csc_free(&r->adj[e][0]);
        gkv_csc_free(&r->adj[e][1]);
    }
    gkv_graph_free(r->g);
}

/* A round of a cross-check: a random graph, room for its edge weights
 * (ewbuf[e]: etype e's) and samplers of 1 and 3 threads over its CSR. */
struct round {
    struct rgraph r;
    gkv_sgraph *sg;
    gkv_sampler *s1, *s3;
    float *ewbuf[RT];
};

static void
round_begin(struct round *w, uint64_t *st, int weighted)
{
    rgraph_make(&w->r, st, weighted);
    for (int e = 0; e < RT; e++)
        w->ewbuf[e] = malloc((size_t)(w->r.ne[e] + 1) * sizeof *w->ewbuf[e]);
    GKVT_OK(gkv_sgraph_from_graph(&w->sg, w->r.g, GKV_SG_CSR, 1));
    GKVT_OK(gkv_sampler_new(&w->s1, w->sg, 1));
    GKVT_OK(gkv_sampler_new(&w->s3, w->sg, 3));
}

static void
round_end(struct round *w)
{
    gkv_sampler_free(w->s1);
    gkv_sampler_free(w->s3);
    gkv_sgraph_free(w->sg);
    for (int e = 0; e < RT; e++)
        free(w->ewbuf[e]);
    rgraph_free(&w->r);
}

/* What one call asks for, as the reference sees it. */
struct rreq {
    uint64_t seed;
    int dir, replace;
    int wmode;                     /* 0 uniform, 1 adjacency w, 2 edge_w */
    const float *ew[RT];           /* wmode 2: per etype or NULL */
    int64_t ewlen[RT];
    const int64_t *ex[RT];         /* excluded edge IDs */
    size_t nex[RT];
};

static int
excluded(const struct rreq *q, int e, int64_t eid)
{
    for (size_t i = 0; i < q->nex[e]; i++)
        if (q->ex[e][i] == eid)
            return 1;
    return 0;
}

/* Node v's picks (as CSC / CSR positions) for etype e at 'layer' with
 * fanout k, by the rules of gkv_sample.h; returns how many. */
static size_t
ref_pick(const struct rgraph *r, const struct rreq *q, int e, int layer,
         int64_t v, int k, int64_t *out)
{
    const gkv_csc *a = &r->adj[e][q->dir];
    int64_t b = a->indptr[v], d = a->indptr[v + 1] - b, m = 0, z = 0;
    int64_t *allow = malloc((size_t)(d + 1) * sizeof *allow);
    double *S = malloc((size_t)(d + 2) * sizeof *S);
    float *w = malloc((size_t)(d + 1) * sizeof *w);
    int64_t *ch = malloc((size_t)(k > 0 ? k : 1) * sizeof *ch);
    uint64_t K = ref_a(ref_a(ref_a(0x474b5653414d504cULL, q->seed),
                             (uint64_t)layer), (uint64_t)e);
    uint64_t bv = ref_a(K, (uint64_t)v);
    int wt = q->wmode == 1 || (q->wmode == 2 && q->ew[e] != NULL);
    size_t n = 0;

#define R_(t) ref_m(bv + ((uint64_t)(t) + 1) * 0x9e3779b97f4a7c15ULL)
    S[0] = 0;
    for (int64_t p = b; p < b + d; p++) {
        int64_t eid = a->eids[p];
        if (excluded(q, e, eid))
            continue;
        allow[m] = p;
        w[m] = !wt ? 1.0f : q->wmode == 1 ? r->w[e][eid] : q->ew[e][eid];
        S[m + 1] = S[m] + (double)w[m];
        z += w[m] > 0;
        m++;
    }
    if (!wt) {
        if (k < 0 || (!q->replace && m <= k)) {
            for (int64_t i = 0; i < m; i++)
                out[n++] = allow[i];
        } else if (q->replace) {
            for (int t = 0; m > 0 && t < k; t++)
                out[n++] = allow[ref_below(R_(t), (uint64_t)m)];
        } else {
            for (int64_t j = m - k, t = 0; j < m; j++, t++) {
                int64_t x = (int64_t)ref_below(R_(t), (uint64_t)j + 1);
                for (int64_t c = 0; c < t; c++)
                    if (ch[c] == x)
                        x = j;
                ch[t] = x;
                out[n++] = allow[x];
            }
        }
    } else {
        /* first i with S[i+1] > u * T, else the last positive weight */
#define WS(T_, u_) ({                                                   \
            double t_ = (u_) * (T_);                                    \
            int64_t i_ = 0;                                             \
            while (i_ < m && !(S[i_ + 1] > t_))                         \
                i_++;                                                   \
            if (i_ == m)                                                \
                for (i_ = m - 1; i_ > 0 && !(w[i_] > 0); i_--)          \
                    ;                                                   \
            i_; })
        if (k < 0 || (!q->replace && z <= k)) {
            for (int64_t i = 0; i < m; i++)
                if (w[i] > 0)
                    out[n++] = allow[i];
        } else if (q->replace) {
            for (int t = 0; z > 0 && t < k; t++)
                out[n++] = allow[WS(S[m], ref_unit(R_(t)))];
        } else {
            int64_t nch = 0, t = 0;
            while (nch < k && t < 8 * (int64_t)k + 32) {
                int64_t i = WS(S[m], ref_unit(R_(t))), dup = 0;
                t++;
                for (int64_t c = 0; c < nch; c++)
                    dup |= ch[c] == i;
                if (!dup)
                    ch[nch++] = i;
            }
            if (nch < k) {
                for (int64_t c = 0; c < nch; c++)
                    w[ch[c]] = 0.0f;
                while (nch < k) {
                    int64_t i;
                    for (int64_t j = 0; j < m; j++)
                        S[j + 1] = S[j] + (double)w[j];
                    i = WS(S[m], ref_unit(R_(t)));
                    t++;
                    ch[nch++] = i;
                    w[i] = 0.0f;
                }
            }
            for (int64_t c = 0; c < k; c++)
                out[n++] = allow[ch[c]];
        }
#undef WS
    }
#undef R_
    free(allow);
    free(S);
    free(w);
    free(ch);
    return n;
}

/* Growing triples. */
struct trip {
    int64_t *s, *d, *e;
    size_t n, cap;
};

static void
trip_add(struct trip *t, int64_t s, int64_t d, int64_t e)
{
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 64;
        t->s = realloc(t->s, t->cap * sizeof *t->s);
        t->d = realloc(t->d, t->cap * sizeof *t->d);
        t->e = realloc(t->e, t->cap * sizeof *t->e);
    }
    t->s[t->n] = s;
    t->d[t->n] = d;
    t->e[t->n] = e;
    t->n++;
}

static void
trip_free(struct trip *t)
{
    free(t->s);
    free(t->d);
    free(t->e);
    memset(t, 0, sizeof *t);
}

static int
col_nt(const struct rgraph *r, int e, int dir)
{
    return dir == GKV_DIR_IN ? r->dnt[e] : r->snt[e];
}

static int
nbr_nt(const struct rgraph *r, int e, int dir)
{
    return dir == GKV_DIR_IN ? r->snt[e] : r->dnt[e];
}

/* One hop by the reference: per etype the edges in graph orientation. */
static void
ref_hop(const struct rgraph *r, const struct rreq *q, int layer,
        const int *fan, int64_t *const *seeds, const size_t *ns,
        struct trip *out)
{
    int64_t pick[1024];

    for (int e = 0; e < RT; e++) {
        int ct = col_nt(r, e, q->dir);
        const gkv_csc *a = &r->adj[e][q->dir];
        out[e].n = 0;
        if (fan[e] == 0)
            continue;
        for (size_t i = 0; i < ns[ct]; i++) {
            int64_t v = seeds[ct][i];
            size_t np = ref_pick(r, q, e, layer, v, fan[e], pick);
            assert_true(np <= N_OF(pick));
            for (size_t j = 0; j < np; j++) {
                int64_t u = a->indices[pick[j]], eid = a->eids[pick[j]];
                if (q->dir == GKV_DIR_IN)
                    trip_add(&out[e], u, v, eid);
                else
                    trip_add(&out[e], v, u, eid);
            }
        }
    }
}

static void
expect_same_edges(const gkv_sample_edges *got, const struct trip *want,
                  const char *what, int e)
{
    if (got->n != want->n)
        fail_msg("%s, etype %d: %zu edges, the reference gives %zu", what, e,
                 got->n, want->n);
    for (size_t i = 0; i < want->n; i++)
        if (got->src[i] != want->s[i] || got->dst[i] != want->d[i] ||
            got->eid[i] != want->e[i])
            fail_msg("%s, etype %d, edge %zu: (%lld, %lld, e%lld), the "
                     "reference gives (%lld, %lld, e%lld)", what, e, i,
                     (long long)got->src[i], (long long)got->dst[i],
                     (long long)got->eid[i], (long long)want->s[i],
                     (long long)want->d[i], (long long)want->e[i]);
}

/* Random options for one call; the arrays live in 'buf' (RT x 64 IDs) and
 * 'ewbuf' (RT x ne floats). */
static void
rreq_make(struct rreq *q, const struct rgraph *r, uint64_t *st, int weighted,
          int64_t *buf, float **ewbuf)
{
    memset(q, 0, sizeof *q);
    q->seed = tools__splitmix64(st);
    q->dir = (int)(tools__splitmix64(st) % 2);
    q->replace = (int)(tools__splitmix64(st) % 2);
    q->wmode = weighted ? (int)(tools__splitmix64(st) % 3) : 0;
    for (int e = 0; e < RT; e++) {
        if (q->wmode == 2 && tools__splitmix64(st) % 3 != 0) {
            for (int64_t i = 0; i < r->ne[e]; i++)
                ewbuf[e][i] = (float)(tools__splitmix64(st) % 4) * 0.25f;
            q->ew[e] = ewbuf[e];
            q->ewlen[e] = r->ne[e];
        }
        if (tools__splitmix64(st) % 2 && r->ne[e] > 0) {
            size_t n = (size_t)(tools__splitmix64(st) % 64);
            for (size_t i = 0; i < n; i++)   /* some beyond the type */
                buf[e * 64 + (int64_t)i] =
                    (int64_t)(tools__splitmix64(st) % (uint64_t)(r->ne[e] + 5));
            q->ex[e] = buf + e * 64;
            q->nex[e] = n;
        }
    }
}

static void
rreq_opts(const struct rreq *q, gkv_sample_opts *o)
{
    memset(o, 0, sizeof *o);
    o->seed = q->seed;
    o->dir = q->dir;
    o->flags = (q->replace ? GKV_SAMPLE_REPLACE : 0) |
               (q->wmode == 1 ? GKV_SAMPLE_WEIGHTED : 0);
    if (q->wmode == 2) {
        o->edge_w = q->ew;
        o->edge_w_len = q->ewlen;
    }
    o->exclude = q->ex;
    o->exclude_n = q->nex;
}

static int
rand_fan(uint64_t *st)
{
    static const int f[] = {-1, 0, 1, 2, 3, 5, 17, 64, 65, 100};

    return f[tools__splitmix64(st) % N_OF(f)];
}

static void
test_neighbors_vs_reference(void **state)
{
    uint64_t st = gkvt_seed() ^ 0x5a17;
    int64_t exbuf[RT * 64];

    (void)state;
    for (int round = 0; round < 40; round++) {
        struct round w;
        int weighted = round % 2;

        round_begin(&w, &st, weighted);
        for (int call = 0; call < 12; call++) {
            struct rreq q;
            gkv_sample_opts o;
            int fan[RT], layer = (int)(tools__splitmix64(&st) % 4);
            int64_t *seeds[2];
            size_t ns[2];
            struct trip want[RT] = {{0}};
            gkv_sample_edges out[RT];
            char what[96];

            rreq_make(&q, &w.r, &st, weighted, exbuf, w.ewbuf);
            rreq_opts(&q, &o);
            for (int e = 0; e < RT; e++)
                fan[e] = rand_fan(&st);
            for (int t = 0; t < 2; t++) {   /* duplicates allowed here */
                ns[t] = (size_t)(tools__splitmix64(&st) % 300);
                seeds[t] = malloc((ns[t] + 1) * sizeof *seeds[t]);
                for (size_t i = 0; i < ns[t]; i++)
                    seeds[t][i] = (int64_t)(tools__splitmix64(&st) %
                                            (uint64_t)w.r.nn[t]);
            }
            ref_hop(&w.r, &q, layer, fan, seeds, ns, want);
            for (int nt = 1; nt <= 3; nt += 2) {
                snprintf(what, sizeof what, "round %d call %d (%d threads, "
                         "dir %d, replace %d, wmode %d)", round, call, nt,
                         q.dir, q.replace, q.wmode);
                GKVT_OK(gkv_sample_neighbors(nt == 1 ? w.s1 : w.s3,
                                             (const int64_t *const *)seeds,
                                             ns, fan, RT, layer, &o, out));
                for (int e = 0; e < RT; e++)
                    expect_same_edges(&out[e], &want[e], what, e);
            }
            for (int e = 0; e < RT; e++)
                trip_free(&want[e]);
            free(seeds[0]);
            free(seeds[1]);
        }
        round_end(&w);
    }
}

/* Blocks by the reference: per block and type the node list (destination
 * nodes first), per etype the edges in local IDs. */
struct rblk {
    int64_t *ids[2];
    size_t nsrc[2], ndst[2], cap[2];
    struct trip ed[RT];
};

static int64_t
rblk_label(struct rblk *b, int t, int64_t v)
{
    for (size_t i = 0; i < b->nsrc[t]; i++)
        if (b->ids[t][i] == v)
            return (int64_t)i;
    if (b->nsrc[t] == b->cap[t]) {
        b->cap[t] = b->cap[t] ? 2 * b->cap[t] : 64;
        b->ids[t] = realloc(b->ids[t], b->cap[t] * sizeof *b->ids[t]);
    }
    b->ids[t][b->nsrc[t]] = v;
    return (int64_t)b->nsrc[t]++;
}

static void
rblk_free(struct rblk *b)
{
    free(b->ids[0]);
    free(b->ids[1]);
    for (int e = 0; e < RT; e++)
        trip_free(&b->ed[e]);
    memset(b, 0, sizeof *b);
}

/* blk[0 .. nl): blk[nl - 1]'s destination nodes are seeds[t][0 .. ns[t]). */
static void
ref_blocks(const struct rgraph *r, const struct rreq *q, const int *fans,
           int nl, int64_t *const *seeds, const size_t *ns, struct rblk *blk)
{
    int64_t pick[1024];

    memset(blk, 0, (size_t)nl * sizeof *blk);
    for (int t = 0; t < 2; t++)
        for (size_t i = 0; i < ns[t]; i++)
            rblk_label(&blk[nl - 1], t, seeds[t][i]);
    for (int h = 0; h < nl; h++) {
        int bi = nl - 1 - h;
        struct rblk *b = &blk[bi];
        if (h > 0)
            for (int t = 0; t < 2; t++)
                for (size_t i = 0; i < blk[bi + 1].nsrc[t]; i++)
                    rblk_label(b, t, blk[bi + 1].ids[t][i]);
        b->ndst[0] = b->nsrc[0];
        b->ndst[1] = b->nsrc[1];
        for (int e = 0; e < RT; e++) {
            int ct = col_nt(r, e, q->dir), nb = nbr_nt(r, e, q->dir);
            int k = fans[bi * RT + e];
            const gkv_csc *a = &r->adj[e][q->dir];
            if (k == 0)
                continue;
            for (size_t i = 0; i < b->ndst[ct]; i++) {
                size_t np = ref_pick(r, q, e, h, b->ids[ct][i], k, pick);
                for (size_t j = 0; j < np; j++)
                    trip_add(&b->ed[e], rblk_label(b, nb,
                                                   a->indices[pick[j]]),
                             (int64_t)i, a->eids[pick[j]]);
            }
        }
    }
}

static void
expect_same_blocks(const gkv_block *got, const struct rblk *want, int nl,
                   const char *what)
{
    char w2[160];

    for (int i = 0; i < nl; i++) {
        assert_int_equal(got[i].num_ntypes, 2);
        assert_int_equal(got[i].num_etypes, RT);
        for (int t = 0; t < 2; t++) {
            const gkv_block_nodes *bn = &got[i].nodes[t];
            if (bn->num_src != want[i].nsrc[t] ||
                bn->num_dst != want[i].ndst[t])
                fail_msg("%s, block %d, type %d: %zu / %zu nodes, the "
                         "reference gives %zu / %zu", what, i, t,
                         bn->num_src, bn->num_dst, want[i].nsrc[t],
                         want[i].ndst[t]);
            for (size_t j = 0; j < want[i].nsrc[t]; j++)
                if (bn->ids[j] != want[i].ids[t][j])
                    fail_msg("%s, block %d, type %d, node %zu: %lld, the "
                             "reference gives %lld", what, i, t, j,
                             (long long)bn->ids[j],
                             (long long)want[i].ids[t][j]);
        }
        snprintf(w2, sizeof w2, "%s, block %d", what, i);
        for (int e = 0; e < RT; e++)
            expect_same_edges(&got[i].edges[e], &want[i].ed[e], w2, e);
    }
}

static void
test_blocks_vs_reference(void **state)
{
    uint64_t st = gkvt_seed() ^ 0xb10c;
    int64_t exbuf[RT * 64];

    (void)state;
    for (int round = 0; round < 24; round++) {
        struct round w;
        int weighted = round % 2;

        round_begin(&w, &st, weighted);
        for (int call = 0; call < 8; call++) {
            struct rreq q;
            gkv_sample_opts o;
            int nl = 1 + (int)(tools__splitmix64(&st) % 3), fans[3 * RT];
            int64_t *seeds[2];
            size_t ns[2];
            struct rblk want[3];
            gkv_block got[3];
            char what[96];

            rreq_make(&q, &w.r, &st, weighted, exbuf, w.ewbuf);
            rreq_opts(&q, &o);
            for (int i = 0; i < nl * RT; i++)
                fans[i] = rand_fan(&st);
            for (int t = 0; t < 2; t++) {   /* distinct: a shuffled prefix */
                int64_t n = w.r.nn[t];
                seeds[t] = malloc((size_t)n * sizeof *seeds[t]);
                for (int64_t i = 0; i < n; i++)
                    seeds[t][i] = i;
                for (int64_t i = n - 1; i > 0; i--) {
                    int64_t j = (int64_t)(tools__splitmix64(&st) % (uint64_t)(i + 1));
                    int64_t x = seeds[t][i];
                    seeds[t][i] = seeds[t][j];
                    seeds[t][j] = x;
                }
                ns[t] = (size_t)(tools__splitmix64(&st) % (uint64_t)(n + 1));
            }
            ref_blocks(&w.r, &q, fans, nl, seeds, ns, want);
            for (int nt = 1; nt <= 3; nt += 2) {
                snprintf(what, sizeof what, "round %d call %d (%d threads, "
                         "dir %d, replace %d, wmode %d, %d layers)", round,
                         call, nt, q.dir, q.replace, q.wmode, nl);
                GKVT_OK(gkv_sample_blocks(nt == 1 ? w.s1 : w.s3,
                                          (const int64_t *const *)seeds, ns,
                                          fans, RT, nl, &o, got));
                expect_same_blocks(got, want, nl, what);
            }
            for (int i = 0; i < nl; i++)
                rblk_free(&want[i]);
            free(seeds[0]);
            free(seeds[1]);
        }
        round_end(&w);
    }
}

/* Edge mini-batches: pairs, negatives and blocks against the reference,
 * with GKV_EXCLUDE_SELF and GKV_EXCLUDE_REVERSE (by an ID map and by a
 * reverse edge type). */
static void
test_edge_batch_vs_reference(void **state)
{
    uint64_t st = gkvt_seed() ^ 0xeb;
    int64_t exbuf[RT * 64];

    (void)state;
    for (int round = 0; round < 16; round++) {
        struct round w;

        round_begin(&w, &st, round % 2);
        for (int call = 0; call < 8; call++) {
            struct rreq q, q2;
            gkv_sample_opts o;
            gkv_edge_batch_spec sp;
            int nl = 1 + (int)(tools__splitmix64(&st) % 2), fans[2 * RT];
            int64_t eids[40], rev[400], *seeds[2], *allx[RT];
            size_t ns[2] = {0, 0};
            struct rblk want[2];
            gkv_block got[2];
            gkv_edge_batch eb;
            int et = (int)(tools__splitmix64(&st) % RT), st_, dt_;
            int64_t *wps, *wpd, *wns, *wnd;
            char what[96];

            if (w.r.ne[et] == 0)
                continue;
            rreq_make(&q, &w.r, &st, round % 2, exbuf, w.ewbuf);
            rreq_opts(&q, &o);
            for (int i = 0; i < nl * RT; i++)
                fans[i] = rand_fan(&st);
            memset(&sp, 0, sizeof sp);
            sp.etype = et;
            sp.n = (size_t)(tools__splitmix64(&st) % N_OF(eids));
            sp.eids = eids;
            sp.num_neg = (int)(tools__splitmix64(&st) % 4);
            for (size_t i = 0; i < sp.n; i++)
                eids[i] = (int64_t)(tools__splitmix64(&st) % (uint64_t)w.r.ne[et]);
            sp.exclude = (unsigned)(tools__splitmix64(&st) % 4);
            if (sp.exclude & GKV_EXCLUDE_REVERSE) {
                if (tools__splitmix64(&st) % 2) {   /* by map, into any etype */
                    sp.reverse_etype = (int)(tools__splitmix64(&st) % RT);
                    sp.reverse_n = w.r.ne[et];
                    for (int64_t i = 0; i < w.r.ne[et]; i++)
                        rev[i] = (int64_t)(tools__splitmix64(&st) % 500);
                    sp.reverse_eids = rev;
                } else {
                    sp.reverse_etype = (et + 1) % RT;
                }
            }
            /* the reference's view: every exclusion in one list per etype */
            q2 = q;
            for (int e = 0; e < RT; e++) {
                size_t n = 0;
                allx[e] = malloc((q.nex[e] + 2 * sp.n + 1) * sizeof *allx[e]);
                for (size_t i = 0; i < q.nex[e]; i++)
                    allx[e][n++] = q.ex[e][i];
                for (size_t i = 0; i < sp.n; i++) {
                    if ((sp.exclude & GKV_EXCLUDE_SELF) && e == et)
                        allx[e][n++] = eids[i];
                    if ((sp.exclude & GKV_EXCLUDE_REVERSE) &&
                        e == sp.reverse_etype)
                        allx[e][n++] = sp.reverse_eids ?
                                       rev[eids[i]] : eids[i];
                }
                q2.ex[e] = allx[e];
                q2.nex[e] = n;
            }
            /* seeds: src, dst of each positive, then the negatives */
            st_ = w.r.snt[et];
            dt_ = w.r.dnt[et];
            seeds[0] = malloc((3 * sp.n + 4 * sp.n + 1) * sizeof *seeds[0]);
            seeds[1] = malloc((3 * sp.n + 4 * sp.n + 1) * sizeof *seeds[1]);
            wps = malloc((sp.n + 1) * sizeof *wps);
            wpd = malloc((sp.n + 1) * sizeof *wpd);
            wns = malloc((sp.n * 4 + 1) * sizeof *wns);
            wnd = malloc((sp.n * 4 + 1) * sizeof *wnd);
            {
                struct rblk tmp;
                gkv_coo c;
                memset(&tmp, 0, sizeof tmp);
                GKVT_OK(gkv_graph_edges(w.r.g, et, &c));
                for (size_t i = 0; i < sp.n; i++) {
                    wps[i] = rblk_label(&tmp, st_, c.src[eids[i]]);
                    wpd[i] = rblk_label(&tmp, dt_, c.dst[eids[i]]);
                }
                for (size_t i = 0; i < sp.n; i++)
                    for (int j = 0; j < sp.num_neg; j++) {
                        uint64_t bv = ref_a(ref_a(ref_a(ref_a(
                            0x474b564e45474154ULL, q.seed), 0),
                            (uint64_t)et), (uint64_t)eids[i]);
                        uint64_t rj = ref_m(bv + ((uint64_t)j + 1) *
                                            0x9e3779b97f4a7c15ULL);
                        int64_t v = (int64_t)ref_below(rj,
                                                       (uint64_t)w.r.nn[dt_]);
                        wns[i * (size_t)sp.num_neg + (size_t)j] = wps[i];
                        wnd[i * (size_t)sp.num_neg + (size_t)j] =
                            rblk_label(&tmp, dt_, v);
                    }
                for (int t = 0; t < 2; t++) {
                    ns[t] = tmp.nsrc[t];
                    if (ns[t] > 0)
                        memcpy(seeds[t], tmp.ids[t],
                               ns[t] * sizeof *seeds[t]);
                }
                rblk_free(&tmp);
            }
            ref_blocks(&w.r, &q2, fans, nl, seeds, ns, want);
            for (int nt = 1; nt <= 3; nt += 2) {
                snprintf(what, sizeof what, "round %d call %d (%d threads, "
                         "exclude %u, etype %d)", round, call, nt,
                         sp.exclude, et);
                GKVT_OK(gkv_sample_edge_batch(nt == 1 ? w.s1 : w.s3, &sp, fans,
                                              RT, nl, &o, &eb, got));
                assert_int_equal(eb.num_pos, sp.n);
                assert_int_equal(eb.num_neg, sp.n * (size_t)sp.num_neg);
                for (size_t i = 0; i < sp.n; i++) {
                    assert_int_equal(eb.pos_src[i], wps[i]);
                    assert_int_equal(eb.pos_dst[i], wpd[i]);
                }
                for (size_t i = 0; i < eb.num_neg; i++) {
                    assert_int_equal(eb.neg_src[i], wns[i]);
                    assert_int_equal(eb.neg_dst[i], wnd[i]);
                }
                expect_same_blocks(got, want, nl, what);
            }
            for (int i = 0; i < nl; i++)
                rblk_free(&want[i]);
            for (int e = 0; e < RT; e++)
                free(allx[e]);
            free(seeds[0]);
            free(seeds[1]);
            free(wps);
            free(wpd);
            free(wns);
            free(wnd);
        }
        round_end(&w);
    }
}

/* ---- edge lookups with extreme IDs ------------------------------------- */

/* Edge IDs come from clients (net/server.c passes them through), so the
 * most negative int64 must be an ordinary bad ID: GKV_ERANGE naming it.
 * Both lookups computed "eid - eid_lo" before checking the range, a signed
 * overflow for eid near INT64_MIN (UBSan: "signed integer overflow"). */
static void
test_sgraph_find_edges_extreme_ids(void **state)
{
    /* columns 0..2 of 3 nodes; positions 0..3; implicit IDs from 100 */
    static const int64_t indptr[4] = {0, 2, 3, 4};
    static const int64_t indices[4] = {1, 2, 0, 0};
    static const int64_t eids[4] = {7, 5, 6, 4};
    const int64_t nn[1] = {3};
    const int nt[1] = {0};
    int64_t ids[3] = {INT64_MIN, INT64_MIN + 50, INT64_MAX}, s[3], d[3];
    gkv_sgraph *sg;
    gkv_adj a;

    (void)state;
    GKVT_OK(gkv_sgraph_new(&sg, 1, nn, 1, nt, nt));
    memset(&a, 0, sizeof a);
    a.col_lo = 0;
    a.col_hi = 3;
    a.indptr = indptr;
    a.indices = indices;
    a.eid_lo = 100;
    GKVT_OK(gkv_sgraph_set_adj(sg, 0, GKV_DIR_IN, &a));
    for (int i = 0; i < 3; i++) {
        char want[64];
        assert_int_equal(gkv_sgraph_find_edges(sg, 0, &ids[i], 1, s, d),
                         GKV_ERANGE);
        snprintf(want, sizeof want, "eids[0] = %lld is not an edge",
                 (long long)ids[i]);
        gkvt_expect_msg(gkv_sgraph_errmsg(sg), want);
    }
    ids[0] = 103;
    GKVT_OK(gkv_sgraph_find_edges(sg, 0, ids, 1, s, d));
    assert_int_equal(s[0], 0);
    assert_int_equal(d[0], 2);
    /* explicit edge IDs (a dense index from 4) */
    a.eids = eids;
    GKVT_OK(gkv_sgraph_set_adj(sg, 0, GKV_DIR_IN, &a));
    ids[0] = INT64_MIN;
    assert_int_equal(gkv_sgraph_find_edges(sg, 0, ids, 1, s, d), GKV_ERANGE);
    gkvt_expect_msg(gkv_sgraph_errmsg(sg), "eids[0] = -9223372036854775808 is "
                    "not an edge");
    ids[0] = 6;
    GKVT_OK(gkv_sgraph_find_edges(sg, 0, ids, 1, s, d));
    assert_int_equal(s[0], 0);
    assert_int_equal(d[0], 1);
    gkv_sgraph_free(sg);
}

static void
test_part_find_edges_extreme_ids(void **state)
{
    struct fx *f = *state;
    char *out = fpath(f, "p"), *json = fpath(f, "p/graph.json");
    char msg[256];
    gkv_part_spec sp;
    gkv_graph *g;
    gkv_part *p;
    int64_t lo, hi, id, s, d;

    GKVT_OK(gkv_graph_fixed_homo(&g));
    memset(&sp, 0, sizeof sp);
    sp.method = GKV_PART_RANGE;
    sp.num_parts = 2;
    GKVT_OK(gkv_partition_write(g, &sp, out, NULL, msg, sizeof msg));
    GKVT_OK(gkv_part_open(&p, json, 1, 0));
    GKVT_OK(gkv_pbook_edge_range(gkv_part_book(p), 0, 1, &lo, &hi));
    assert_true(lo > 0 && hi > lo);
    id = INT64_MIN;
    assert_int_equal(gkv_part_find_edges(p, 0, &id, 1, &s, &d), GKV_ERANGE);
    gkvt_expect_msg(gkv_part_errmsg(p), "eids[0] = -9223372036854775808 is not "
                    "a '_N:_E:_N' edge ID");
    id = INT64_MAX;
    assert_int_equal(gkv_part_find_edges(p, 0, &id, 1, &s, &d), GKV_ERANGE);
    gkvt_expect_msg(gkv_part_errmsg(p), "eids[0] = 9223372036854775807 is not "
                    "a '_N:_E:_N' edge ID");
    id = lo;
    GKVT_OK(gkv_part_find_edges(p, 0, &id, 1, &s, &d));
    gkv_part_close(p);
    gkv_graph_free(g);
    free(out);
    free(json);
}

/* A config whose partition owns 2^63 - 1 nodes passes the book's checks
 * (the ranges tile), but the CSC's indptr would need 2^63 rows: the reader
 * computed ncols + 1, a signed overflow, and reported the indptr tensor as
 * expected at "IDs [0, -9223372036854775808)". */
static void
test_part_open_huge_node_count(void **state)
{
    struct fx *f = *state;
    char *out = fpath(f, "p"), *json = fpath(f, "p/graph.json");
    char msg[256];
    gkv_part_spec sp;
    gkv_graph *g;
    gkv_part *p = NULL;
    json_t *j;

    GKVT_OK(gkv_graph_fixed_homo(&g));
    memset(&sp, 0, sizeof sp);
    sp.method = GKV_PART_RANGE;
    sp.num_parts = 1;
    sp.flags = GKV_PART_CSR;
    GKVT_OK(gkv_partition_write(g, &sp, out, NULL, msg, sizeof msg));
    assert_non_null(j = json_load_file(json, 0, NULL));
    assert_int_equal(json_object_set_new(j, "num_nodes",
                                         json_integer(INT64_MAX)), 0);
    assert_int_equal(json_array_set_new(json_array_get(json_object_get(
        json_object_get(j, "node_map"), "_N"), 0), 1,
        json_integer(INT64_MAX)), 0);
    assert_int_equal(json_dump_file(j, json, 0), 0);
    json_decref(j);
    assert_int_equal(gkv_part_open(&p, json, 0, 0), GKV_ECORRUPT);
    assert_null(p);
    gkvt_expect_msg(gkv_part_errmsg(NULL), "partition 0: owns 9223372036854775807 "
                    "'_N' nodes, too many for an indptr");
    gkv_graph_free(g);
    free(out);
    free(json);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_text_max_id_on_growing_type),
        cmocka_unit_test(test_add_edges_max_id_on_growing_type),
        cmocka_unit_test_setup_teardown(test_binary_max_id_on_growing_type,
                                        setup, teardown),
        cmocka_unit_test(test_text_subnormal_weight),
        cmocka_unit_test(test_neighbors_vs_reference),
        cmocka_unit_test(test_blocks_vs_reference),
        cmocka_unit_test(test_edge_batch_vs_reference),
        cmocka_unit_test(test_sgraph_find_edges_extreme_ids),
        cmocka_unit_test_setup_teardown(test_part_find_edges_extreme_ids,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_part_open_huge_node_count,
                                        setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
