/* sample.c - neighbour sampling, blocks and edge mini-batches (see
 * gkv_sample.h for the contract and the exact generator).
 *
 * Sampling is bound by memory latency: per pick, one random cache line for
 * the neighbour and its edge ID (side by side in sgraphs built here, see
 * struct sg_adj) and one for the neighbour's relabel marker; per frontier
 * node, one for its column start. The large arrays sit on 2 MiB pages
 * (huge_alloc), so those misses are rarely TLB misses too.
 *
 * How a hop runs. The frontier (the destination nodes of the hop) of each
 * edge type is cut into sub-blocks of SUB nodes, each sampled in three
 * passes:
 *   P1  per node: its column's start (indptr, prefetched PF nodes ahead)
 *       and its picks as absolute positions, prefetching the picks;
 *   P2  per pick: the neighbour and the edge ID, prefetching the
 *       neighbour's marker;
 *   P3  relabel: a neighbour seen for the first time in the batch gets the
 *       next local ID of its type (dense markers per node type hold
 *       local ID + 1; 0 = unseen).
 * The passes are software-pipelined (pipe_range): step j runs P1 of
 * sub-block j, P2 of j - 1 and P3 of j - 2, so each prefetch has a
 * sub-block's time to land.
 *
 * On one thread P3 writes the block directly. On several, the frontier is
 * cut into chunks that the threads take in any order, and the relabel is
 * made deterministic:
 *   A   P1 + P2 into the thread's buffers, and as P3 an atomic minimum of
 *       KEY(chunk, index) on each neighbour's marker (a marker already
 *       holding a local ID, always below KEYBIT, stays); the pick notes
 *       whether its key went in. Afterwards a new node's marker names its
 *       first appearance in chunk order, which is edge-list order;
 *   C   per chunk, the picks that are their node's first appearance (only
 *       those whose key went in can be);
 *   -   (serial) each chunk's first local ID and edge offset: prefix sums
 *       in chunk order;
 *   D1  the first appearances write the node list and turn their key into
 *       local ID + 1;
 *   D2  every pick's local source, read from its marker, into the block.
 * The result is the one-thread result, for any thread count. Markers are
 * not reset between hops: the next hop's destination nodes are this hop's
 * node list in the same order, so the local IDs stay right. They are reset
 * once at the end of a batch (every node labelled is in the last list).
 */
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include "base/gen.h"
#include "graph/graph_int.h"
#include "graph/gkv_part.h"
#include "graph/gkv_partition.h"
#include "graph/gkv_sample.h"

#define G64         GKV_GEN_G
#define DOM_NEG     0x474b564e45474154ULL   /* "GKVNEGAT" */

#define SUB          32       /* nodes per P1/P2/P3 sub-block */
#define PF           8        /* indptr prefetch distance, nodes */
#define FLOYD_SMALL  64       /* above: Floyd checks picks in a hash set */
#define PAR_MIN      128      /* frontier nodes below which one thread runs */
#define MSG_MAX      512      /* a worker's message (tbuf) */

#define KEYBIT       (UINT64_C(1) << 62)
#define KEY_CH_BITS  22
#define KEY_IX_BITS  40
#define KEY(ci, j)   (KEYBIT | ((uint64_t)(ci) << KEY_IX_BITS) | (uint64_t)(j))

typedef _Atomic uint64_t amark;

/* ---- the generator: M, A, r_t, below and unit of gkv_sample.h are
 * base/gen.h's, the one copy that the GPU sampler runs too; short names
 * here keep the pick loops readable. ----------------------------------- */

#define mix(z)        gkv_gen_mix(z)
#define absorb(x, v)  gkv_gen_absorb((x), (v))
#define draw(bv, t)   gkv_gen_draw((bv), (t))
#define below(r, n)   gkv_gen_below((r), (n))
#define unit(r)       gkv_gen_unit(r)

static inline void
cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

#define LOAD(p)      atomic_load_explicit((p), memory_order_relaxed)
#define STORE(p, v)  atomic_store_explicit((p), (v), memory_order_relaxed)

/* Grows the array whose pointer is at 'pp' (*cap elements of 'elem'
 * bytes) to hold 'need', at least doubling. The pointer is read and written
 * with memcpy, so any object pointer type may be passed. 0, or -1 when out
 * of memory (the array is then unchanged). */
static int
grow(void *pp, size_t *cap, size_t need, size_t elem)
{
    void *p, *q;
    size_t n;

    if (need <= *cap)
        return 0;
    n = *cap * 2 > need ? *cap * 2 : need;
    if (n < 64)
        n = 64;
    if (n > SIZE_MAX / elem)
        return -1;
    memcpy(&p, pp, sizeof p);
    if ((q = gkv__realloc(p, n * elem)) == NULL)
        return -1;
    memcpy(pp, &q, sizeof q);
    *cap = n;
    return 0;
}

/* Three arrays that share one capacity *cap, grown together to hold
 * 'need' entries; *cap is what all three hold. -1: out of memory (*cap
 * unchanged). */
static int
grow3(void *a, size_t ea, void *b, size_t eb, void *c, size_t ec,
      size_t *cap, size_t need)
{
    size_t c1 = *cap, c2 = *cap, c3 = *cap;

    if (need <= *cap)
        return 0;
    if (grow(a, &c1, need, ea) || grow(b, &c2, need, eb) ||
        grow(c, &c3, need, ec))
        return -1;
    *cap = c1 < c2 ? (c1 < c3 ? c1 : c3) : (c2 < c3 ? c2 : c3);
    return 0;
}

/* Large arrays that are read at random (adjacency, markers) go on 2 MiB
 * pages where the kernel allows it (transparent huge pages in "madvise"
 * mode): a random access then costs a cache miss but rarely a TLB miss.
 * The block is gkv__malloc'd 2 MiB larger and aligned inside; *raw keeps
 * the pointer to free. Below 4 MiB it is a plain allocation. */
#define HUGE_SZ ((size_t)2 << 20)

static void *
huge_alloc(size_t bytes, void **raw)
{
    uintptr_t a;
    char *p;

    if (bytes < 2 * HUGE_SZ) {
        *raw = gkv__malloc(bytes ? bytes : 1);
        return *raw;
    }
    if (bytes > SIZE_MAX - HUGE_SZ ||
        (p = gkv__malloc(bytes + HUGE_SZ)) == NULL) {
        *raw = NULL;
        return NULL;
    }
    *raw = p;
    a = ((uintptr_t)p + HUGE_SZ - 1) & ~(uintptr_t)(HUGE_SZ - 1);
#ifdef MADV_HUGEPAGE
    /* [a, a + bytes) lies inside the block; advice only, so a kernel
     * without THP (EINVAL) changes nothing */
    (void)madvise((void *)a, bytes, MADV_HUGEPAGE);
#endif
    return (void *)a;
}

/* ---- the sgraph ------------------------------------------------------- */

/* sgraph calls are about no handle (NULL): the sgraph is made by them. */
#define sg_fail(rc, ...) gkv__fail(NULL, (rc), __VA_ARGS__)

/* Edge ID -> position: a dense table over [lo, lo + span) or sorted pairs. */
struct sg_inv {
    int64_t  lo, span;
    int64_t *pos;           /* dense: pos[eid - lo], -1 where absent */
    int64_t *keys, *vals;   /* sparse: n pairs sorted by key */
    size_t   n;
};

/* An adjacency. Set with gkv_sgraph_set_adj: a's arrays, borrowed. Built
 * by gkv_sgraph_from_graph: owned, and the neighbour and edge ID of
 * position p sit side by side in pk[2p], pk[2p + 1] (one cache line per
 * random pick instead of two); a.indices and a.eids are then NULL until
 * gkv_sgraph_adj asks for them (soa). */
struct sg_adj {
    int      set;
    gkv_adj  a;
    int64_t  ncols, nnz;
    const int64_t *pk;               /* packed (neighbour, edge ID) or NULL */
    _Atomic(struct sg_inv *) inv;    /* built on first need, under sg_mu */
    _Atomic int soa;                 /* pk: a.indices/a.eids made */
    void    *raw[5];                 /* owned blocks: indptr, pk, w, and
                                      * the indices and eids soa made */
};

static inline int64_t
at_idx(const struct sg_adj *sa, int64_t p)
{
    return sa->pk != NULL ? sa->pk[2 * p] : sa->a.indices[p];
}

static inline int
has_eids(const struct sg_adj *sa)
{
    return sa->pk != NULL || sa->a.eids != NULL;
}

static inline int64_t
at_eid(const struct sg_adj *sa, int64_t p)
{
    return sa->pk != NULL ? sa->pk[2 * p + 1]
           : sa->a.eids != NULL ? sa->a.eids[p] : sa->a.eid_lo + p;
}

struct gkv_sgraph {
    int            nnt, net;
    int64_t       *nn;               /* nodes per node type */
    int           *snt, *dnt;        /* per etype */
    struct sg_adj *adj;              /* [etype * 2 + dir] */
    pthread_mutex_t mu;              /* builds edge-ID indexes */
    const gkv_part *part;            /* a partition's sgraph: its partition */
};

void
graph__sgraph_set_part(gkv_sgraph *sg, const gkv_part *p)
{
    sg->part = p;
}

static inline int
col_ntype(const gkv_sgraph *sg, int et, int dir)
{
    return dir == GKV_DIR_IN ? sg->dnt[et] : sg->snt[et];
}

static inline int
nbr_ntype(const gkv_sgraph *sg, int et, int dir)
{
    return dir == GKV_DIR_IN ? sg->snt[et] : sg->dnt[et];
}

static const char *
dir_name(int dir)
{
    return dir == GKV_DIR_IN ? "in-edge (CSC)" : "out-edge (CSR)";
}

static void
inv_free(struct sg_inv *iv)
{
    if (iv == NULL)
        return;
    gkv__free(iv->pos);
    gkv__free(iv->keys);
    gkv__free(iv->vals);
    gkv__free(iv);
}

static void
adj_clear(struct sg_adj *sa)
{
    inv_free(atomic_load(&sa->inv));
    atomic_store(&sa->inv, NULL);
    for (int i = 0; i < 5; i++) {
        gkv__free(sa->raw[i]);
        sa->raw[i] = NULL;
    }
    sa->pk = NULL;
    atomic_store(&sa->soa, 0);
    sa->set = 0;
    memset(&sa->a, 0, sizeof sa->a);
    sa->ncols = sa->nnz = 0;
}

gkv_err
gkv_sgraph_new(gkv_sgraph **out, int num_ntypes, const int64_t *num_nodes,
               int num_etypes, const int *src_ntype, const int *dst_ntype)
{
    gkv_sgraph *sg;

    gkv__clear(NULL);
    if (out == NULL)
        return sg_fail(GKV_EINVAL, "out is NULL");
    *out = NULL;
    if (num_ntypes < 1 || num_ntypes > GKV_GRAPH_TYPES_MAX)
        return sg_fail(GKV_EINVAL, "num_ntypes %d is not in 1..%d",
                       num_ntypes, GKV_GRAPH_TYPES_MAX);
    if (num_etypes < 0 || num_etypes > GKV_GRAPH_TYPES_MAX)
        return sg_fail(GKV_EINVAL, "num_etypes %d is not in 0..%d",
                       num_etypes, GKV_GRAPH_TYPES_MAX);
    if (num_nodes == NULL ||
        (num_etypes > 0 && (src_ntype == NULL || dst_ntype == NULL)))
        return sg_fail(GKV_EINVAL, "num_nodes, src_ntype or dst_ntype is NULL");
    for (int t = 0; t < num_ntypes; t++)
        if (num_nodes[t] < 0 || num_nodes[t] >= (INT64_C(1) << 61))
            return sg_fail(GKV_EINVAL, "num_nodes[%d] = %lld is not a node "
                           "count", t, (long long)num_nodes[t]);
    for (int e = 0; e < num_etypes; e++)
        if (src_ntype[e] < 0 || src_ntype[e] >= num_ntypes ||
            dst_ntype[e] < 0 || dst_ntype[e] >= num_ntypes)
            return sg_fail(GKV_EINVAL, "edge type %d joins node types %d "
                           "and %d; there are %d", e, src_ntype[e],
                           dst_ntype[e], num_ntypes);
    if ((sg = gkv__calloc(1, sizeof *sg)) == NULL)
        return sg_fail(GKV_ENOMEM, "out of memory for the sgraph");
    sg->nnt = num_ntypes;
    sg->net = num_etypes;
    sg->nn = gkv__malloc((size_t)num_ntypes * sizeof *sg->nn);
    sg->snt = gkv__malloc(((size_t)num_etypes + 1) * sizeof *sg->snt);
    sg->dnt = gkv__malloc(((size_t)num_etypes + 1) * sizeof *sg->dnt);
    sg->adj = gkv__calloc(2 * (size_t)num_etypes + 1, sizeof *sg->adj);
    if (sg->nn == NULL || sg->snt == NULL || sg->dnt == NULL ||
        sg->adj == NULL || pthread_mutex_init(&sg->mu, NULL) != 0) {
        gkv__free(sg->nn);
        gkv__free(sg->snt);
        gkv__free(sg->dnt);
        gkv__free(sg->adj);
        gkv__free(sg);
        return sg_fail(GKV_ENOMEM, "out of memory for the sgraph");
    }
    memcpy(sg->nn, num_nodes, (size_t)num_ntypes * sizeof *sg->nn);
    if (num_etypes > 0) {
        memcpy(sg->snt, src_ntype, (size_t)num_etypes * sizeof *sg->snt);
        memcpy(sg->dnt, dst_ntype, (size_t)num_etypes * sizeof *sg->dnt);
    }
    *out = sg;
    return GKV_OK;
}

void
gkv_sgraph_free(gkv_sgraph *sg)
{
    if (sg == NULL)
        return;
    for (int i = 0; i < 2 * sg->net; i++)
        adj_clear(&sg->adj[i]);
    pthread_mutex_destroy(&sg->mu);
    gkv__free(sg->nn);
    gkv__free(sg->snt);
    gkv__free(sg->dnt);
    gkv__free(sg->adj);
    gkv__free(sg);
}

const char *
gkv_sgraph_errmsg(const gkv_sgraph *sg)
{
    (void)sg;
    return gkv_errmsg();
}

int
gkv_sgraph_num_ntypes(const gkv_sgraph *sg)
{
    return sg != NULL ? sg->nnt : -1;
}

int
gkv_sgraph_num_etypes(const gkv_sgraph *sg)
{
    return sg != NULL ? sg->net : -1;
}

int64_t
gkv_sgraph_num_nodes(const gkv_sgraph *sg, int ntype)
{
    return sg != NULL && ntype >= 0 && ntype < sg->nnt ? sg->nn[ntype] : -1;
}

int
gkv_sgraph_src_ntype(const gkv_sgraph *sg, int etype)
{
    return sg != NULL && etype >= 0 && etype < sg->net ? sg->snt[etype] : -1;
}

int
gkv_sgraph_dst_ntype(const gkv_sgraph *sg, int etype)
{
    return sg != NULL && etype >= 0 && etype < sg->net ? sg->dnt[etype] : -1;
}

gkv_err
gkv_sgraph_adj(const gkv_sgraph *sg, int etype, int dir, gkv_adj *out)
{
    struct sg_adj *sa;

    gkv__clear(NULL);
    if (out != NULL)
        memset(out, 0, sizeof *out);
    if (sg == NULL || out == NULL)
        return sg_fail(GKV_EINVAL, "sgraph or out is NULL");
    if (etype < 0 || etype >= sg->net || (dir != GKV_DIR_IN &&
                                          dir != GKV_DIR_OUT))
        return sg_fail(GKV_EINVAL, "no edge type %d / direction %d", etype,
                       dir);
    if (!sg->adj[2 * etype + dir].set)
        return sg_fail(GKV_ENOTFOUND, "edge type %d has no %s adjacency",
                       etype, dir_name(dir));
    sa = (struct sg_adj *)&sg->adj[2 * etype + dir];
    if (sa->pk != NULL && !atomic_load_explicit(&sa->soa,
                                                memory_order_acquire)) {
        pthread_mutex_lock(&((gkv_sgraph *)sg)->mu);
        if (!atomic_load_explicit(&sa->soa, memory_order_relaxed)) {
            size_t m = (size_t)sa->nnz;
            int64_t *ix = huge_alloc(m * sizeof *ix, &sa->raw[3]);
            int64_t *ei = huge_alloc(m * sizeof *ei, &sa->raw[4]);
            if (ix == NULL || ei == NULL) {
                gkv__free(sa->raw[3]);
                gkv__free(sa->raw[4]);
                sa->raw[3] = sa->raw[4] = NULL;
                pthread_mutex_unlock(&((gkv_sgraph *)sg)->mu);
                return sg_fail(GKV_ENOMEM, "out of memory for the indices "
                               "and eids of edge type %d", etype);
            }
            for (size_t p = 0; p < m; p++) {
                ix[p] = sa->pk[2 * p];
                ei[p] = sa->pk[2 * p + 1];
            }
            sa->a.indices = ix;
            sa->a.eids = ei;
            atomic_store_explicit(&sa->soa, 1, memory_order_release);
        }
        pthread_mutex_unlock(&((gkv_sgraph *)sg)->mu);
    }
    *out = sa->a;
    return GKV_OK;
}

/* Checks 'a' as the (etype, dir) adjacency of 'sg'. */
static gkv_err
adj_check(const gkv_sgraph *sg, int et, int dir, const gkv_adj *a,
          int64_t *ncols, int64_t *nnz)
{
    int cnt = col_ntype(sg, et, dir), oth = nbr_ntype(sg, et, dir);
    int64_t nc, ne, on = sg->nn[oth];

    if (a->col_lo < 0 || a->col_hi < a->col_lo || a->col_hi > sg->nn[cnt])
        return sg_fail(GKV_EINVAL, "edge type %d %s: columns [%lld, %lld) "
                       "are not within the %lld nodes of type %d", et,
                       dir_name(dir), (long long)a->col_lo,
                       (long long)a->col_hi, (long long)sg->nn[cnt], cnt);
    nc = a->col_hi - a->col_lo;
    if (a->indptr == NULL)
        return sg_fail(GKV_EINVAL, "edge type %d %s: indptr is NULL", et,
                       dir_name(dir));
    if (a->indptr[0] != 0)
        return sg_fail(GKV_EINVAL, "edge type %d %s: indptr[0] is %lld, "
                       "not 0", et, dir_name(dir), (long long)a->indptr[0]);
    for (int64_t c = 0; c < nc; c++)
        if (a->indptr[c + 1] < a->indptr[c])
            return sg_fail(GKV_EINVAL, "edge type %d %s: indptr decreases "
                           "at column %lld (node %lld)", et, dir_name(dir),
                           (long long)c + 1, (long long)(a->col_lo + c));
    ne = a->indptr[nc];
    if (ne > 0 && a->indices == NULL)
        return sg_fail(GKV_EINVAL, "edge type %d %s: indices is NULL", et,
                       dir_name(dir));
    for (int64_t p = 0; p < ne; p++)
        if ((uint64_t)a->indices[p] >= (uint64_t)on)
            return sg_fail(GKV_ERANGE, "edge type %d %s: indices[%lld] = "
                           "%lld is not a node of type %d (%lld nodes)", et,
                           dir_name(dir), (long long)p,
                           (long long)a->indices[p], oth, (long long)on);
    if (a->eids != NULL) {
        for (int64_t p = 0; p < ne; p++)
            if (a->eids[p] < 0)
                return sg_fail(GKV_ERANGE, "edge type %d %s: eids[%lld] = "
                               "%lld is negative", et, dir_name(dir),
                               (long long)p, (long long)a->eids[p]);
    } else if (a->eid_lo < 0 || a->eid_lo > INT64_MAX - ne) {
        return sg_fail(GKV_ERANGE, "edge type %d %s: eid_lo %lld is not a "
                       "valid first edge ID", et, dir_name(dir),
                       (long long)a->eid_lo);
    }
    *ncols = nc;
    *nnz = ne;
    return GKV_OK;
}

gkv_err
gkv_sgraph_set_adj(gkv_sgraph *sg, int etype, int dir, const gkv_adj *a)
{
    struct sg_adj *sa;
    int64_t nc = 0, ne = 0;
    gkv_err rc;

    gkv__clear(NULL);
    if (sg == NULL || a == NULL)
        return sg_fail(GKV_EINVAL, "sgraph or adjacency is NULL");
    if (etype < 0 || etype >= sg->net)
        return sg_fail(GKV_EINVAL, "edge type %d: the sgraph has %d", etype,
                       sg->net);
    if (dir != GKV_DIR_IN && dir != GKV_DIR_OUT)
        return sg_fail(GKV_EINVAL, "direction %d is neither GKV_DIR_IN nor "
                       "GKV_DIR_OUT", dir);
    if ((rc = adj_check(sg, etype, dir, a, &nc, &ne)) != GKV_OK)
        return rc;
    sa = &sg->adj[2 * etype + dir];
    adj_clear(sa);
    sa->a = *a;
    sa->ncols = nc;
    sa->nnz = ne;
    sa->set = 1;
    return GKV_OK;
}

/* from_graph: packs [lo, hi) of a CSC into (neighbour, edge ID) pairs and
 * puts the weights in CSC order. */
struct pack_job {
    const gkv_csc *c;
    const float   *w;          /* COO weights by edge ID, or NULL */
    int64_t       *pk;
    float         *cw;
    size_t         lo, hi;
};

static void
pack_run(void *p)
{
    struct pack_job *j = p;
    const int64_t *ix = j->c->indices, *ei = j->c->eids;

    for (size_t q = j->lo; q < j->hi; q++) {
        j->pk[2 * q] = ix[q];
        j->pk[2 * q + 1] = ei[q];
    }
    if (j->w != NULL)
        for (size_t q = j->lo; q < j->hi; q++)
            j->cw[q] = j->w[ei[q]];
}

static void
pack(const gkv_csc *c, const float *w, int64_t *pk, float *cw, int nthreads)
{
    struct pack_job jobs[8];
    size_t m = (size_t)c->num_edges;
    int t = nthreads < 1 ? 1 : nthreads > 8 ? 8 : nthreads;

    if (m < ((size_t)1 << 20))
        t = 1;
    for (int i = 0; i < t; i++) {
        jobs[i].c = c;
        jobs[i].w = w;
        jobs[i].pk = pk;
        jobs[i].cw = cw;
        jobs[i].lo = m * (size_t)i / (size_t)t;
        jobs[i].hi = m * ((size_t)i + 1) / (size_t)t;
    }
    graph__parallel(pack_run, jobs, sizeof jobs[0], t);
}

gkv_err
gkv_sgraph_from_graph(gkv_sgraph **out, const gkv_graph *g, unsigned flags,
                      int nthreads)
{
    gkv_sgraph *sg = NULL;
    int64_t *nn = NULL;
    int *snt = NULL, *dnt = NULL, nnt, net;
    gkv_err rc;

    gkv__clear(NULL);
    if (out == NULL || g == NULL)
        return sg_fail(GKV_EINVAL, "out or graph is NULL");
    *out = NULL;
    if (flags & ~GKV_SG_CSR)
        return sg_fail(GKV_EINVAL, "unknown flags 0x%x", flags);
    nnt = gkv_graph_num_ntypes(g);
    net = gkv_graph_num_etypes(g);
    if (nnt < 1)
        return sg_fail(GKV_EINVAL, "the graph has no node types");
    nn = gkv__malloc((size_t)nnt * sizeof *nn);
    snt = gkv__malloc(((size_t)net + 1) * sizeof *snt);
    dnt = gkv__malloc(((size_t)net + 1) * sizeof *dnt);
    if (nn == NULL || snt == NULL || dnt == NULL) {
        rc = sg_fail(GKV_ENOMEM, "out of memory for the schema");
        goto out;
    }
    for (int t = 0; t < nnt; t++)
        nn[t] = gkv_graph_num_nodes(g, t);
    for (int e = 0; e < net; e++) {
        gkv_etype_info ei;
        gkv_graph_etype_info(g, e, &ei);
        snt[e] = ei.src_ntype;
        dnt[e] = ei.dst_ntype;
    }
    if ((rc = gkv_sgraph_new(&sg, nnt, nn, net, snt, dnt)) != GKV_OK)
        goto out;
    for (int e = 0; e < net; e++) {
        gkv_coo coo;
        gkv_graph_edges(g, e, &coo);
        for (int dir = 0; dir < 2; dir++) {
            struct sg_adj *sa = &sg->adj[2 * e + dir];
            gkv_csc c;
            int64_t *ip, *pk;
            float *w = NULL;
            size_t m, nc;
            if (dir == GKV_DIR_OUT && !(flags & GKV_SG_CSR))
                continue;
            rc = dir == GKV_DIR_IN ? gkv_graph_csc(g, e, nthreads, &c)
                                   : gkv_graph_csr(g, e, nthreads, &c);
            if (rc != GKV_OK) {
                rc = sg_fail(rc, "building the %s adjacency of edge type "
                             "%d: %s", dir_name(dir), e, gkv_strerror(rc));
                goto out;
            }
            m = (size_t)c.num_edges;
            nc = (size_t)c.num_cols;
            /* the arrays move to huge-page memory (see huge_alloc) */
            ip = huge_alloc((nc + 1) * sizeof *ip, &sa->raw[0]);
            pk = m <= SIZE_MAX / 16 ? huge_alloc(m * 16, &sa->raw[1]) : NULL;
            if (coo.w != NULL)
                w = huge_alloc(m * sizeof *w, &sa->raw[2]);
            if (ip == NULL || pk == NULL || (coo.w != NULL && w == NULL)) {
                gkv_csc_free(&c);
                rc = sg_fail(GKV_ENOMEM, "out of memory for the %s "
                             "adjacency of edge type %d", dir_name(dir), e);
                goto out;
            }
            memcpy(ip, c.indptr, (nc + 1) * sizeof *ip);
            pack(&c, coo.w, pk, w, nthreads);
            gkv_csc_free(&c);
            sa->a.col_lo = 0;
            sa->a.col_hi = (int64_t)nc;
            sa->a.indptr = ip;
            sa->pk = pk;
            sa->a.indices = NULL;
            sa->a.eids = NULL;
            sa->a.eid_lo = 0;
            sa->a.w = w;
            sa->ncols = (int64_t)nc;
            sa->nnz = (int64_t)m;
            sa->set = 1;
        }
    }
    *out = sg;
    sg = NULL;
    rc = GKV_OK;
out:
    gkv_sgraph_free(sg);
    gkv__free(nn);
    gkv__free(snt);
    gkv__free(dnt);
    return rc;
}

struct pair { int64_t k, v; };

static int
pair_cmp(const void *x, const void *y)
{
    const struct pair *a = x, *b = y;

    return (a->k > b->k) - (a->k < b->k);
}

static gkv_err
inv_build(const struct sg_adj *sa, struct sg_inv **out)
{
    int64_t n = sa->nnz, lo = INT64_MAX, hi = -1;
    struct sg_inv *iv;

    if ((iv = gkv__calloc(1, sizeof *iv)) == NULL)
        return GKV_ENOMEM;
    for (int64_t p = 0; p < n; p++) {
        int64_t x = at_eid(sa, p);
        if (x < lo)
            lo = x;
        if (x > hi)
            hi = x;
    }
    if (n == 0) {
        *out = iv;
        return GKV_OK;
    }
    if ((uint64_t)(hi - lo) < 2 * (uint64_t)n + 64) {
        iv->lo = lo;
        iv->span = hi - lo + 1;
        if ((iv->pos = gkv__malloc((size_t)iv->span * sizeof *iv->pos)) ==
            NULL) {
            inv_free(iv);
            return GKV_ENOMEM;
        }
        memset(iv->pos, 0xff, (size_t)iv->span * sizeof *iv->pos);
        for (int64_t p = 0; p < n; p++)
            iv->pos[at_eid(sa, p) - lo] = p;
    } else {
        struct pair *pr = gkv__malloc((size_t)n * sizeof *pr);
        iv->keys = gkv__malloc((size_t)n * sizeof *iv->keys);
        iv->vals = gkv__malloc((size_t)n * sizeof *iv->vals);
        if (pr == NULL || iv->keys == NULL || iv->vals == NULL) {
            gkv__free(pr);
            inv_free(iv);
            return GKV_ENOMEM;
        }
        for (int64_t p = 0; p < n; p++) {
            pr[p].k = at_eid(sa, p);
            pr[p].v = p;
        }
        qsort(pr, (size_t)n, sizeof *pr, pair_cmp);
        for (int64_t p = 0; p < n; p++) {
            iv->keys[p] = pr[p].k;
            iv->vals[p] = pr[p].v;
        }
        iv->n = (size_t)n;
        gkv__free(pr);
    }
    *out = iv;
    return GKV_OK;
}

/* The edge-ID index of an adjacency with explicit eids, built once. */
static gkv_err
inv_get(const gkv_sgraph *sg, const struct sg_adj *sac,
        const struct sg_inv **out)
{
    struct sg_adj *sa = (struct sg_adj *)sac;
    struct sg_inv *iv = atomic_load_explicit(&sa->inv, memory_order_acquire);
    gkv_err rc = GKV_OK;

    if (iv == NULL) {
        pthread_mutex_lock(&((gkv_sgraph *)sg)->mu);
        iv = atomic_load_explicit(&sa->inv, memory_order_relaxed);
        if (iv == NULL && (rc = inv_build(sa, &iv)) == GKV_OK)
            atomic_store_explicit(&sa->inv, iv, memory_order_release);
        pthread_mutex_unlock(&((gkv_sgraph *)sg)->mu);
    }
    *out = iv;
    return rc;
}

/* Position of edge 'eid' in sa, or -1. */
static inline int64_t
eid_pos(const struct sg_adj *sa, const struct sg_inv *iv, int64_t eid)
{
    /* Subtract only once eid >= the base (>= 0), so that a client's
     * eid near INT64_MIN cannot overflow. */
    if (!has_eids(sa))
        return eid >= sa->a.eid_lo && eid - sa->a.eid_lo < sa->nnz ?
               eid - sa->a.eid_lo : -1;
    if (iv->pos != NULL)
        return eid >= iv->lo && eid - iv->lo < iv->span ?
               iv->pos[eid - iv->lo] : -1;
    {
        size_t lo = 0, hi = iv->n;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (iv->keys[mid] < eid)
                lo = mid + 1;
            else
                hi = mid;
        }
        return lo < iv->n && iv->keys[lo] == eid ? iv->vals[lo] : -1;
    }
}

/* The column (offset from col_lo) holding position p. */
static inline int64_t
pos_col(const gkv_adj *a, int64_t ncols, int64_t p)
{
    int64_t lo = 0, hi = ncols;      /* last c with indptr[c] <= p */

    while (hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        if (a->indptr[mid] <= p)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

gkv_err
gkv_sgraph_find_edges(const gkv_sgraph *sg, int etype, const int64_t *eids,
                      size_t n, int64_t *src, int64_t *dst)
{
    const struct sg_adj *sa;
    const struct sg_inv *iv = NULL;
    int dir;
    gkv_err rc;

    gkv__clear(NULL);
    if (sg == NULL || (n > 0 && (eids == NULL || src == NULL || dst == NULL)))
        return sg_fail(GKV_EINVAL, "sgraph or an array is NULL");
    if (etype < 0 || etype >= sg->net)
        return sg_fail(GKV_EINVAL, "edge type %d: the sgraph has %d", etype,
                       sg->net);
    dir = sg->adj[2 * etype].set ? GKV_DIR_IN : GKV_DIR_OUT;
    sa = &sg->adj[2 * etype + dir];
    if (!sa->set)
        return sg_fail(GKV_EINVAL, "edge type %d has no adjacency set",
                       etype);
    if (has_eids(sa) && (rc = inv_get(sg, sa, &iv)) != GKV_OK)
        return sg_fail(rc, "out of memory for the edge-ID index of edge "
                       "type %d", etype);
    for (size_t i = 0; i < n; i++) {
        int64_t p = eid_pos(sa, iv, eids[i]), c, node, other;
        if (p < 0)
            return sg_fail(GKV_ERANGE, "eids[%zu] = %lld is not an edge of "
                           "type %d held here", i, (long long)eids[i],
                           etype);
        c = pos_col(&sa->a, sa->ncols, p);
        node = sa->a.col_lo + c;
        other = at_idx(sa, p);
        src[i] = dir == GKV_DIR_IN ? other : node;
        dst[i] = dir == GKV_DIR_IN ? node : other;
    }
    return GKV_OK;
}

/* ---- the sampler: types ------------------------------------------------ */

struct tbuf {                 /* one thread's scratch */
    int64_t *pos;             /* P1: picks of one sub-block, as positions */
    size_t   pos_cap;
    int64_t *spos[2];         /* the two P1 slots of the pipeline */
    size_t   scap[2];
    int64_t *u, *e;           /* P2: neighbour and edge ID of each pick */
    int64_t *rank;            /* parallel: after A, 1 where the pick's key
                               * went in; after C, the indices of the
                               * chunk's first appearances, in order */
    size_t   ue_cap, ue_len;
    int64_t *cnt;             /* picks per frontier node */
    size_t   cnt_cap, cnt_len;
    int64_t *allow;           /* general columns: allowed positions */
    double  *S;               /* weighted: prefix sums */
    float   *wv;              /* weighted: weights of allowed positions */
    int64_t *pick;            /* general: chosen indices */
    size_t   w_cap;
    int64_t *hset;            /* chosen-index hash set (large k) */
    size_t   hset_cap;
    long     err_ci;          /* chunk of the first error, or -1 */
    gkv_err  err;
    char     msg[MSG_MAX];
    char     pad[64];         /* keeps threads' hot fields apart */
};

struct chunk {
    int     et;
    int64_t lo, hi;           /* frontier indices */
    int     tid;
    size_t  uoff, coff;       /* into tb[tid].u / .cnt */
    size_t  n;                /* picks */
    size_t  nnew;             /* first appearances (relabel) */
    int64_t base;             /* local ID of the first of them */
    size_t  eoff;             /* offset in the etype's output */
};

struct earr {
    int64_t *s, *d, *e;
    size_t   cap;
};

struct blay {                 /* one block's storage */
    int64_t         **ids;    /* [nnt] */
    size_t           *idcap;  /* [nnt] */
    gkv_block_nodes  *nodes;  /* [nnt] */
    struct earr      *ea;     /* [net] */
    gkv_sample_edges *edges;  /* [net] */
};

struct run {                  /* the current call and hop */
    int       dir;
    unsigned  flags;
    uint64_t  seed;
    int       relabel;        /* 1: blocks; 0: single hop, global IDs */
    int      *fan;            /* [net] this hop's fanouts */
    uint64_t *key;            /* [net] this hop's generator keys */
    int      *fast;           /* [net] 1: plain uniform Floyd path */
    int      *wmode;          /* [net] 0 uniform, 1 adj w, 2 edge_w,
                               * 3 weights by position (graph__wpos) */
    const float *const *ew;
    const int64_t *ewlen;
    const int64_t *ewlo;      /* NULL: every edge_w array starts at 0 */
    const graph__wpos *wp;    /* wmode 3: [net] */
    const int64_t **f;        /* [nnt] frontier */
    size_t   *nf;             /* [nnt] */
    struct blay *L;           /* relabel: the block being built */
    struct earr *out;         /* single hop: per etype */
    size_t   *olen;           /* single hop: per etype */
};

/* Workers join a job only while it is open: the caller closes it once it
 * has run out of chunks itself and then waits only for the workers inside,
 * so a worker the OS has descheduled never holds a batch up. Every phase
 * takes its work in chunks from a shared counter, so who does what cannot
 * change the result. */
struct pool {
    pthread_t       th[GKV_SAMPLE_THREADS_MAX];
    int             started;
    _Atomic uint64_t job;     /* generation << 1 | 1 when closed */
    _Atomic int     active, sleepers, stop;
    void          (*fn)(gkv_sampler *, int);
    pthread_mutex_t mu;
    pthread_cond_t  cv;
    int             sync_ok;  /* mu and cv initialised */
};

struct warg {
    gkv_sampler *s;
    int          tid;
};

struct gkv_sampler {
    const gkv_sgraph *sg;
    int          nt;                  /* threads, the caller included */
    int          nnt, net;
    struct pool  pool;
    struct warg  wa[GKV_SAMPLE_THREADS_MAX];
    struct tbuf *tb;                  /* [nt] */
    amark      **mk;                  /* [nnt]: local ID + 1, a key, or 0 */
    void       **mkraw;               /* [nnt]: the blocks mk live in */
    struct run   R;
    struct chunk *ch;
    size_t       nch, chcap;
    _Atomic size_t next;              /* next chunk to take */
    _Atomic long fail_ci;             /* lowest chunk with an error */
    /* per etype */
    int         *fanv, *fastv, *wmodev;
    uint64_t    *keyv;
    int64_t    **ex;                  /* sorted excluded positions */
    size_t      *nex, *excap;
    struct earr *nea;                 /* single-hop results */
    size_t      *nlen;
    /* per node type */
    const int64_t **fv;
    size_t      *nfv;
    size_t      *ntot;                /* parallel relabel: nodes per type */
    /* blocks */
    struct blay *lay;
    int          nlay;
    /* edge batches */
    int64_t     *pb[4];               /* pos_src, pos_dst, neg_src, neg_dst */
    size_t       pbcap[4];
    int64_t     *tmpv;                /* gathered excluded IDs */
    size_t       tmpcap;
    const graph__wpos *wpv;           /* graph__sample_hop: [net] */
    int64_t *const *cntv;             /* graph__sample_hop: [net] or NULL */
    /* Choosing between the workers and the caller alone (call_begin): the
     * caller's share of a CPU during parallel calls (moving average), this
     * call's way, its start (wall and thread CPU clocks), the call count */
    double       share_par, t0, c0;
    int          solo;
    unsigned     ncalls;
    char         ebmsg[MSG_MAX];   /* a graph__eb_* call's detail */
};

/* gkv__fail() about sampler s. */
static inline const void *s_about(const gkv_sampler *s) { return s; }
#define s_fail(s, rc, ...) gkv__fail(s_about(s), (rc), __VA_ARGS__)

/* rc of a graph__eb_* call that wrote its detail to s->ebmsg: recorded as
 * s's message when it is an error. */
static gkv_err
s_eb(gkv_sampler *s, gkv_err rc)
{
    return rc == GKV_OK ? rc : s_fail(s, rc, "%s", s->ebmsg);
}

static gkv_err tb_fail(gkv_sampler *s, struct tbuf *tb, long ci, gkv_err rc,
                       const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Records the first error of this thread (its lowest chunk) and lowers
 * the sampler's failing-chunk mark. */
static gkv_err
tb_fail(gkv_sampler *s, struct tbuf *tb, long ci, gkv_err rc,
        const char *fmt, ...)
{
    va_list ap;
    long cur;

    if (tb->err_ci < 0 || ci < tb->err_ci) {
        tb->err_ci = ci;
        tb->err = rc;
        va_start(ap, fmt);
        vsnprintf(tb->msg, sizeof tb->msg, fmt, ap);
        va_end(ap);
    }
    cur = atomic_load(&s->fail_ci);
    while (ci < cur && !atomic_compare_exchange_weak(&s->fail_ci, &cur, ci))
        ;
    return rc;
}

/* ---- the worker pool ---------------------------------------------------- */

#define SPIN_ITERS 4096

/* A job word the worker has not run yet and that is still open. */
static inline int
runnable(uint64_t w, uint64_t done)
{
    return !(w & 1) && w != done;
}

static void *
worker_main(void *p)
{
    struct warg *wa = p;
    gkv_sampler *s = wa->s;
    struct pool *pl = &s->pool;
    uint64_t done = 1;

    for (;;) {
        uint64_t w;
        int spins = 0;
        while (!runnable(w = atomic_load(&pl->job), done) &&
               !atomic_load_explicit(&pl->stop, memory_order_relaxed)) {
            if (++spins < SPIN_ITERS) {
                cpu_relax();
                continue;
            }
            pthread_mutex_lock(&pl->mu);
            atomic_fetch_add(&pl->sleepers, 1);
            while (!runnable(atomic_load(&pl->job), done) &&
                   !atomic_load(&pl->stop))
                pthread_cond_wait(&pl->cv, &pl->mu);
            atomic_fetch_sub(&pl->sleepers, 1);
            pthread_mutex_unlock(&pl->mu);
            spins = 0;
        }
        if (atomic_load(&pl->stop))
            break;
        atomic_fetch_add(&pl->active, 1);
        if (atomic_load(&pl->job) == w)
            pl->fn(s, wa->tid);
        atomic_fetch_sub_explicit(&pl->active, 1, memory_order_release);
        done = w;
    }
    return NULL;
}

static void
pool_wake(struct pool *pl)
{
    if (atomic_load(&pl->sleepers) > 0) {
        pthread_mutex_lock(&pl->mu);
        pthread_cond_broadcast(&pl->cv);
        pthread_mutex_unlock(&pl->mu);
    }
}

/* Runs fn(s, tid) on the caller (tid 0) and on the workers that join
 * while there is work, and returns when all of them are done. */
static void
pool_run(gkv_sampler *s, void (*fn)(gkv_sampler *, int))
{
    struct pool *pl = &s->pool;
    uint64_t w;
    long spins = 0;

    if (s->nt == 1) {
        fn(s, 0);
        return;
    }
    pl->fn = fn;
    w = (atomic_load_explicit(&pl->job, memory_order_relaxed) | 1) + 1;
    atomic_store(&pl->job, w);
    pool_wake(pl);
    fn(s, 0);
    atomic_store(&pl->job, w | 1);
    /* seq_cst, not acquire: with the workers' fetch_add(active) then
     * load(job) this is a Dekker handshake, and only seq_cst on both
     * sides forbids a late worker seeing job == w (so running fn) while
     * this load sees active == 0 (so the next phase starts beside it) */
    while (atomic_load(&pl->active) > 0) {
        if (++spins < SPIN_ITERS)
            cpu_relax();
        else
            sched_yield();
    }
}

/* Around each sampling call: parallel or the caller alone? On cores the
 * sampler has to itself the workers win. On oversubscribed cores (other
 * processes, or more sampler threads than cores) the workers take CPU
 * from the caller and wait on it, and a call can take twice as long as on
 * the caller alone. That shows directly in the caller's share of a CPU
 * during a parallel call: near 1 when it runs undisturbed (waiting spins),
 * 0.5 when it shares its core. Below SHARE_MIN the next calls run on the
 * caller alone, and every EXPLORE-th call tries the workers again. The
 * result is the same either way. */
#define EXPLORE    32
#define SHARE_MIN  0.8

static double
cpu_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void
call_begin(gkv_sampler *s)
{
    gkv__clear(s_about(s));
    if (s->nt == 1)
        return;
    s->ncalls++;
    s->solo = s->share_par < SHARE_MIN && s->ncalls % EXPLORE != 0;
    if (!s->solo) {
        s->t0 = (double)gkv__now_ns() * 1e-9;
        s->c0 = cpu_s();
    }
}

static void
call_end(gkv_sampler *s, gkv_err rc)
{
    double wall;

    if (s->nt == 1 || s->solo || rc != GKV_OK)
        return;
    wall = (double)gkv__now_ns() * 1e-9 - s->t0;
    if (wall < 200e-6)          /* too short to tell */
        return;
    s->share_par = 0.5 * s->share_par + 0.5 * ((cpu_s() - s->c0) / wall);
}

static void
pool_stop(gkv_sampler *s)
{
    struct pool *pl = &s->pool;

    if (pl->started > 0) {
        atomic_store(&pl->stop, 1);
        pthread_mutex_lock(&pl->mu);
        pthread_cond_broadcast(&pl->cv);
        pthread_mutex_unlock(&pl->mu);
        for (int i = 0; i < pl->started; i++)
            pthread_join(pl->th[i], NULL);
    }
    if (pl->sync_ok) {
        pthread_mutex_destroy(&pl->mu);
        pthread_cond_destroy(&pl->cv);
    }
}

/* ---- the sampler: life cycle -------------------------------------------- */

static void
earr_free(struct earr *a)
{
    gkv__free(a->s);
    gkv__free(a->d);
    gkv__free(a->e);
    memset(a, 0, sizeof *a);
}

static int
earr_grow(struct earr *a, size_t need)
{
    return grow3(&a->s, sizeof *a->s, &a->d, sizeof *a->d, &a->e,
                 sizeof *a->e, &a->cap, need);
}

static void
blay_free(gkv_sampler *s, struct blay *L)
{
    if (L->ids != NULL)
        for (int t = 0; t < s->nnt; t++)
            gkv__free(L->ids[t]);
    if (L->ea != NULL)
        for (int e = 0; e < s->net; e++)
            earr_free(&L->ea[e]);
    gkv__free(L->ids);
    gkv__free(L->idcap);
    gkv__free(L->nodes);
    gkv__free(L->ea);
    gkv__free(L->edges);
}

static void
tb_free(struct tbuf *tb)
{
    gkv__free(tb->spos[0]);
    gkv__free(tb->spos[1]);
    gkv__free(tb->u);
    gkv__free(tb->e);
    gkv__free(tb->rank);
    gkv__free(tb->cnt);
    gkv__free(tb->allow);
    gkv__free(tb->S);
    gkv__free(tb->wv);
    gkv__free(tb->pick);
    gkv__free(tb->hset);
}

void
gkv_sampler_free(gkv_sampler *s)
{
    if (s == NULL)
        return;
    pool_stop(s);
    if (s->tb != NULL)
        for (int i = 0; i < s->nt; i++)
            tb_free(&s->tb[i]);
    gkv__free(s->tb);
    if (s->mkraw != NULL)
        for (int t = 0; t < s->nnt; t++)
            gkv__free(s->mkraw[t]);
    gkv__free(s->mk);
    gkv__free(s->mkraw);
    gkv__free(s->ch);
    if (s->ex != NULL)
        for (int e = 0; e < s->net; e++)
            gkv__free(s->ex[e]);
    gkv__free(s->ex);
    gkv__free(s->nex);
    gkv__free(s->excap);
    if (s->nea != NULL)
        for (int e = 0; e < s->net; e++)
            earr_free(&s->nea[e]);
    gkv__free(s->nea);
    gkv__free(s->nlen);
    gkv__free(s->fanv);
    gkv__free(s->fastv);
    gkv__free(s->wmodev);
    gkv__free(s->keyv);
    gkv__free(s->fv);
    gkv__free(s->nfv);
    gkv__free(s->ntot);
    for (int i = 0; i < s->nlay; i++)
        blay_free(s, &s->lay[i]);
    gkv__free(s->lay);
    for (int i = 0; i < 4; i++)
        gkv__free(s->pb[i]);
    gkv__free(s->tmpv);
    gkv__free(s);
}

const char *
gkv_sampler_errmsg(const gkv_sampler *s)
{
    return s != NULL ? gkv__errmsg_about(s) : "";
}

gkv_err
gkv_sampler_new(gkv_sampler **out, const gkv_sgraph *sg, int nthreads)
{
    gkv_sampler *s;
    size_t net1, nnt;

    if (out == NULL)
        return GKV_EINVAL;
    *out = NULL;
    if (sg == NULL || nthreads < 0 || nthreads > GKV_SAMPLE_THREADS_MAX)
        return GKV_EINVAL;
    if ((s = gkv__calloc(1, sizeof *s)) == NULL)
        return GKV_ENOMEM;
    s->sg = sg;
    s->nt = nthreads < 1 ? 1 : nthreads;
    s->share_par = 1.0;
    s->nnt = sg->nnt;
    s->net = sg->net;
    nnt = (size_t)s->nnt;
    net1 = (size_t)s->net + 1;
    atomic_init(&s->pool.job, 1);
    atomic_init(&s->pool.active, 0);
    atomic_init(&s->pool.sleepers, 0);
    atomic_init(&s->pool.stop, 0);
    s->tb = gkv__calloc((size_t)s->nt, sizeof *s->tb);
    s->mk = gkv__calloc(nnt, sizeof *s->mk);
    s->mkraw = gkv__calloc(nnt, sizeof *s->mkraw);
    s->ex = gkv__calloc(net1, sizeof *s->ex);
    s->nex = gkv__calloc(net1, sizeof *s->nex);
    s->excap = gkv__calloc(net1, sizeof *s->excap);
    s->nea = gkv__calloc(net1, sizeof *s->nea);
    s->nlen = gkv__calloc(net1, sizeof *s->nlen);
    s->fanv = gkv__calloc(net1, sizeof *s->fanv);
    s->fastv = gkv__calloc(net1, sizeof *s->fastv);
    s->wmodev = gkv__calloc(net1, sizeof *s->wmodev);
    s->keyv = gkv__calloc(net1, sizeof *s->keyv);
    s->fv = gkv__calloc(nnt, sizeof *s->fv);
    s->nfv = gkv__calloc(nnt, sizeof *s->nfv);
    s->ntot = gkv__calloc(nnt, sizeof *s->ntot);
    if (s->tb == NULL || s->mk == NULL || s->mkraw == NULL ||
        s->ex == NULL || s->nex == NULL || s->excap == NULL ||
        s->nea == NULL || s->nlen == NULL || s->fanv == NULL ||
        s->fastv == NULL || s->wmodev == NULL || s->keyv == NULL ||
        s->fv == NULL || s->nfv == NULL || s->ntot == NULL) {
        gkv_sampler_free(s);
        return GKV_ENOMEM;
    }
    if (s->nt > 1) {
        struct pool *pl = &s->pool;
        if (pthread_mutex_init(&pl->mu, NULL) != 0) {
            gkv_sampler_free(s);
            return GKV_ENOMEM;
        }
        if (pthread_cond_init(&pl->cv, NULL) != 0) {
            pthread_mutex_destroy(&pl->mu);
            gkv_sampler_free(s);
            return GKV_ENOMEM;
        }
        pl->sync_ok = 1;
        for (int i = 1; i < s->nt; i++) {
            s->wa[i].s = s;
            s->wa[i].tid = i;
            if (pthread_create(&pl->th[i - 1], NULL, worker_main,
                               &s->wa[i]) != 0) {
                gkv_sampler_free(s);
                return GKV_EIO;
            }
            pl->started++;
        }
    }
    *out = s;
    return GKV_OK;
}

/* ---- picking ------------------------------------------------------------ */

/* First element of sorted a[0..n) that is >= x. */
static inline const int64_t *
lower(const int64_t *a, size_t n, int64_t x)
{
    size_t lo = 0, hi = n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (a[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return a + lo;
}

/* The xi-th position of [b, ...) that is not in E[0..x) (sorted, unique,
 * all >= b). Before E[q] lie E[q] - b - q allowed positions, which never
 * decreases with q; the answer is b + xi + the number of q with
 * E[q] - q <= b + xi (the excluded positions below it). O(log x). */
static inline int64_t
nth_allowed(int64_t b, int64_t xi, const int64_t *E, size_t x)
{
    size_t lo = 0, hi = x;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (E[mid] - (int64_t)mid <= b + xi)
            lo = mid + 1;
        else
            hi = mid;
    }
    return b + xi + (int64_t)lo;
}

/* A set of indices for Floyd and weighted rejection with large k. */
static int
hset_init(struct tbuf *tb, int64_t k, unsigned *bits)
{
    unsigned b = 4;

    while ((UINT64_C(1) << b) < 2 * (uint64_t)k)
        b++;
    if (grow(&tb->hset, &tb->hset_cap, (size_t)1 << b, sizeof *tb->hset))
        return -1;
    memset(tb->hset, 0xff, ((size_t)1 << b) * sizeof *tb->hset);
    *bits = b;
    return 0;
}

/* Adds x; returns 1 if it was there already. */
static inline int
hset_add(int64_t *h, unsigned bits, int64_t x)
{
    size_t mask = ((size_t)1 << bits) - 1;
    size_t i = (size_t)(((uint64_t)x * G64) >> (64 - bits));

    for (;; i = (i + 1) & mask) {
        if (h[i] == x)
            return 1;
        if (h[i] < 0) {
            h[i] = x;
            return 0;
        }
    }
}

/* Floyd: k distinct indices of [0, m) (k < m) into out, in order chosen. */
static int
floyd(struct tbuf *tb, uint64_t bv, int64_t m, int64_t k, int64_t *out)
{
    int64_t t = 0;

    if (k <= FLOYD_SMALL) {
        gkv_gen_floyd(bv, m, k, out);
        return 0;
    }
    {
        unsigned bits;
        if (hset_init(tb, k, &bits))
            return -1;
        for (int64_t j = m - k; j < m; j++, t++) {
            int64_t x = (int64_t)below(draw(bv, (uint64_t)t),
                                       (uint64_t)j + 1);
            if (hset_add(tb->hset, bits, x)) {
                x = j;
                hset_add(tb->hset, bits, x);
            }
            out[t] = x;
        }
    }
    return 0;
}

/* First i with S[i+1] > t; when none, the last i with wv[i] > 0. */
static inline int64_t
wsearch(const double *S, const float *wv, int64_t m, double t)
{
    int64_t lo = 0, hi = m;

    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (S[mid + 1] > t)
            hi = mid;
        else
            lo = mid + 1;
    }
    if (lo < m)
        return lo;
    for (int64_t i = m - 1; i > 0; i--)
        if (wv[i] > 0)
            return i;
    return 0;
}

/* Makes room for 'need' entries in tb->u, tb->e and tb->rank. */
static int
ue_room(struct tbuf *tb, size_t need)
{
    return grow3(&tb->u, sizeof *tb->u, &tb->e, sizeof *tb->e, &tb->rank,
                 sizeof *tb->rank, &tb->ue_cap, need);
}

/* Makes room for 'need' more positions after the first np. */
static inline int
pos_room(struct tbuf *tb, size_t np, size_t need)
{
    return grow(&tb->pos, &tb->pos_cap, np + need, sizeof *tb->pos);
}

/* The general column: exclusions, weights, replacement, any k. Appends
 * the picks of node v (frontier entry fi, column positions [b, b + d)) to
 * tb->pos at *np. */
static gkv_err
pick_general(gkv_sampler *s, struct tbuf *tb, long ci, int et, int64_t v,
             int64_t fi, int64_t b, int64_t d, size_t *np)
{
    const struct run *R = &s->R;
    const struct sg_adj *sa = &s->sg->adj[2 * et + R->dir];
    const int64_t k = R->fan[et];
    const int replace = (R->flags & GKV_SAMPLE_REPLACE) != 0;
    const int wmode = R->wmode[et];
    const int64_t *E = NULL;
    size_t x = 0, n = *np;
    uint64_t bv = absorb(R->key[et], (uint64_t)v);

    if (s->nex[et] > 0) {
        const int64_t *ex = s->ex[et], *end = ex + s->nex[et];
        E = lower(ex, s->nex[et], b);
        x = (size_t)(lower(E, (size_t)(end - E), b + d) - E);
    }
    if (wmode == 0) {
        int64_t m = d - (int64_t)x;
        if (k < 0 || (!replace && m <= k)) {
            size_t q = 0;
            if (pos_room(tb, n, (size_t)m))
                goto nomem;
            for (int64_t p = b; p < b + d; p++) {
                if (q < x && E[q] == p) {
                    q++;
                    continue;
                }
                tb->pos[n++] = p;
            }
        } else if (replace) {
            if (m > 0) {
                if (pos_room(tb, n, (size_t)k))
                    goto nomem;
                for (int64_t t = 0; t < k; t++)
                    tb->pos[n++] = nth_allowed(b, (int64_t)below(
                        draw(bv, (uint64_t)t), (uint64_t)m), E, x);
            }
        } else {
            if (pos_room(tb, n, (size_t)k) || floyd(tb, bv, m, k, tb->pos + n))
                goto nomem;
            for (int64_t t = 0; t < k; t++, n++)
                tb->pos[n] = nth_allowed(b, tb->pos[n], E, x);
        }
        *np = n;
        return GKV_OK;
    }

    /* weighted */
    {
        const float *ew = wmode == 2 ? R->ew[et] : NULL;
        int64_t ewlen = wmode == 2 ? R->ewlen[et] : 0, m = 0, z = 0;
        int64_t ewlo = wmode == 2 && R->ewlo != NULL ? R->ewlo[et] : 0;
        const float *wp = NULL;
        int64_t nwp = 0;
        const gkv_adj *a = &sa->a;
        double T;
        size_t q = 0;

        if (d >= (int64_t)tb->w_cap) {
            size_t c1 = tb->w_cap, c2 = tb->w_cap, c3 = tb->w_cap,
                   c4 = tb->w_cap;
            if (grow(&tb->allow, &c1, (size_t)d + 1, sizeof *tb->allow) ||
                grow(&tb->S, &c2, (size_t)d + 1, sizeof *tb->S) ||
                grow(&tb->wv, &c3, (size_t)d + 1, sizeof *tb->wv) ||
                grow(&tb->pick, &c4, (size_t)d + 1, sizeof *tb->pick))
                goto nomem;
            tb->w_cap = c1 < c2 ? c1 : c2;
            tb->w_cap = tb->w_cap < c3 ? tb->w_cap : c3;
            tb->w_cap = tb->w_cap < c4 ? tb->w_cap : c4;
        }
        if (wmode == 3) {
            const int64_t *off = R->wp[et].off;
            wp = R->wp[et].w + off[fi];
            nwp = off[fi + 1] - off[fi];
            if (nwp != d - (int64_t)x)
                return tb_fail(s, tb, ci, GKV_EINVAL, "edge type %d: node "
                               "%lld has %lld %s edges to sample from, and "
                               "%lld weights were given for it", et,
                               (long long)v, (long long)(d - (int64_t)x),
                               R->dir == GKV_DIR_IN ? "in" : "out",
                               (long long)nwp);
        }
        tb->S[0] = 0.0;
        for (int64_t p = b; p < b + d; p++) {
            float w;
            if (q < x && E[q] == p) {
                q++;
                continue;
            }
            if (wp != NULL) {
                w = wp[m];
            } else if (ew != NULL) {
                int64_t id = at_eid(sa, p);
                if (id < ewlo || id - ewlo >= ewlen)
                    return tb_fail(s, tb, ci, GKV_ERANGE, "edge type %d: "
                                   "edge %lld has no entry in edge_w[%d] "
                                   "(%lld weights, of edges from %lld)", et,
                                   (long long)id, et, (long long)ewlen,
                                   (long long)ewlo);
                w = ew[id - ewlo];
            } else {
                w = a->w[p];
            }
            if (!(w >= 0.0f) || isinf(w)) {
                int64_t id = at_eid(sa, p);
                return tb_fail(s, tb, ci, GKV_EINVAL, "edge type %d: edge "
                               "%lld (%s node %lld) has weight %g in %s; "
                               "weights must be finite and >= 0", et,
                               (long long)id, R->dir == GKV_DIR_IN ? "into"
                               : "out of", (long long)v, (double)w,
                               wp != NULL ? "the weights given" : ew != NULL
                               ? "edge_w" : "the adjacency's w");
            }
            tb->allow[m] = p;
            tb->wv[m] = w;
            tb->S[m + 1] = tb->S[m] + (double)w;
            z += w > 0.0f;
            m++;
        }
        T = tb->S[m];
        if (k < 0 || (!replace && z <= k)) {
            if (pos_room(tb, n, (size_t)z))
                goto nomem;
            for (int64_t i = 0; i < m; i++)
                if (tb->wv[i] > 0.0f)
                    tb->pos[n++] = tb->allow[i];
        } else if (replace) {
            if (z > 0) {
                if (pos_room(tb, n, (size_t)k))
                    goto nomem;
                for (int64_t t = 0; t < k; t++)
                    tb->pos[n++] = tb->allow[wsearch(tb->S, tb->wv, m,
                        unit(draw(bv, (uint64_t)t)) * T)];
            }
        } else {
            int64_t nch = 0, t = 0, lim = 8 * k + 32;
            unsigned bits = 0;
            if (pos_room(tb, n, (size_t)k) ||
                (k > FLOYD_SMALL && hset_init(tb, k, &bits)))
                goto nomem;
            while (nch < k && t < lim) {
                int64_t i = wsearch(tb->S, tb->wv, m,
                                    unit(draw(bv, (uint64_t)t++)) * T), dup = 0;
                if (k > FLOYD_SMALL) {
                    dup = hset_add(tb->hset, bits, i);
                } else {
                    for (int64_t c = 0; c < nch; c++)
                        if (tb->pick[c] == i) {
                            dup = 1;
                            break;
                        }
                }
                if (!dup)
                    tb->pick[nch++] = i;
            }
            if (nch < k) {
                for (int64_t c = 0; c < nch; c++)
                    tb->wv[tb->pick[c]] = 0.0f;
                while (nch < k) {
                    int64_t i;
                    for (int64_t j = 0; j < m; j++)
                        tb->S[j + 1] = tb->S[j] + (double)tb->wv[j];
                    i = wsearch(tb->S, tb->wv, m,
                                unit(draw(bv, (uint64_t)t++)) * tb->S[m]);
                    tb->pick[nch++] = i;
                    tb->wv[i] = 0.0f;
                }
            }
            for (int64_t c = 0; c < k; c++)
                tb->pos[n++] = tb->allow[tb->pick[c]];
        }
        *np = n;
        return GKV_OK;
    }
nomem:
    return tb_fail(s, tb, ci, GKV_ENOMEM, "out of memory for the picks of "
                   "node %lld (edge type %d)", (long long)v, et);
}

/* P1 for frontier nodes [lo, hi) of edge type et: their picks as column
 * positions into tb->pos (*np of them), their counts appended to tb->cnt;
 * prefetches the picks' indices and edge IDs. */
static gkv_err
p1(gkv_sampler *s, struct tbuf *tb, long ci, int et, int64_t lo, int64_t hi,
   size_t *npo)
{
    const struct run *R = &s->R;
    const struct sg_adj *sa = &s->sg->adj[2 * et + R->dir];
    /* with the packed pairs (pk), a.indices and a.eids are not read: a
     * concurrent gkv_sgraph_adj() may be filling them in */
    const int64_t *pk = sa->pk, *ip = sa->a.indptr,
                  *ix = pk == NULL ? sa->a.indices : NULL,
                  *ei = pk == NULL ? sa->a.eids : NULL;
    const int64_t clo = sa->a.col_lo;
    const uint64_t ncols = (uint64_t)sa->ncols;
    const int cnt_nt = col_ntype(s->sg, et, R->dir);
    const int64_t *f = R->f[cnt_nt];
    const int64_t fend = (int64_t)R->nf[cnt_nt];
    const int64_t k = R->fan[et];
    const uint64_t K = R->key[et];
    const int fast = R->fast[et];
    size_t ns = (size_t)(hi - lo), np = 0;
    int64_t *cnt, *pos;
    gkv_err rc;

    if (grow(&tb->cnt, &tb->cnt_cap, tb->cnt_len + ns, sizeof *tb->cnt) ||
        (fast && pos_room(tb, 0, ns * (size_t)k)))
        return tb_fail(s, tb, ci, GKV_ENOMEM, "out of memory for the "
                       "picks of edge type %d", et);
    cnt = tb->cnt + tb->cnt_len;
    for (int64_t i = lo; i < hi; i++) {
        int64_t c = f[i] - clo, b, d;
        size_t st = np;
        if (i + PF < fend) {
            uint64_t c2 = (uint64_t)(f[i + PF] - clo);
            if (c2 < ncols)
                __builtin_prefetch(ip + c2);
        }
        if ((uint64_t)c >= ncols)
            return tb_fail(s, tb, ci, GKV_ERANGE, "node %lld (type %d) is "
                           "outside the columns [%lld, %lld) that the %s "
                           "adjacency of edge type %d covers", (long long)f[i],
                           cnt_nt, (long long)clo, (long long)sa->a.col_hi,
                           dir_name(R->dir), et);
        b = ip[c];
        d = ip[c + 1] - b;
        if (fast) {
            pos = tb->pos;
            if (d <= k) {
                for (int64_t j = 0; j < d; j++)
                    pos[np++] = b + j;
            } else {
                uint64_t bv = absorb(K, (uint64_t)f[i]);
                int64_t t = 0;
                for (int64_t j = d - k; j < d; j++, t++) {
                    int64_t x = b + (int64_t)below(draw(bv, (uint64_t)t),
                                                   (uint64_t)j + 1);
                    for (size_t q = st; q < np; q++)
                        if (pos[q] == x) {
                            x = b + j;
                            break;
                        }
                    pos[np++] = x;
                }
            }
        } else if ((rc = pick_general(s, tb, ci, et, f[i], i, b, d, &np)) !=
                   GKV_OK) {
            return rc;
        }
        pos = tb->pos;
        cnt[i - lo] = (int64_t)(np - st);
        if (np - st > 16)
            continue;
        if (pk != NULL) {
            for (size_t q = st; q < np; q++)
                __builtin_prefetch(pk + 2 * pos[q]);
        } else {
            for (size_t q = st; q < np; q++) {
                __builtin_prefetch(ix + pos[q]);
                if (ei != NULL)
                    __builtin_prefetch(ei + pos[q]);
            }
        }
    }
    tb->cnt_len += ns;
    *npo = np;
    return GKV_OK;
}

/* P2: the neighbour and edge ID of the np positions at pos, appended to
 * tb->u / tb->e; prefetches the neighbours' markers 'mkpf' (may be NULL). */
static gkv_err
p2(gkv_sampler *s, struct tbuf *tb, long ci, int et, const int64_t *pos,
   size_t np, amark *mkpf)
{
    const struct sg_adj *sa = &s->sg->adj[2 * et + s->R.dir];
    const int64_t *pk = sa->pk, *ix = pk == NULL ? sa->a.indices : NULL,
                  *ei = pk == NULL ? sa->a.eids : NULL;      /* as in p1 */
    const int64_t elo = sa->a.eid_lo;
    int64_t *u, *e;

    if (ue_room(tb, tb->ue_len + np))
        return tb_fail(s, tb, ci, GKV_ENOMEM, "out of memory for the "
                       "picks of edge type %d", et);
    u = tb->u + tb->ue_len;
    e = tb->e + tb->ue_len;
    if (pk != NULL) {
        for (size_t q = 0; q < np; q++) {
            const int64_t *x = pk + 2 * pos[q];
            u[q] = x[0];
            e[q] = x[1];
            if (mkpf != NULL)
                __builtin_prefetch((const void *)(mkpf + x[0]), 1);
        }
    } else if (ei != NULL) {
        for (size_t q = 0; q < np; q++) {
            int64_t p = pos[q], x = ix[p];
            u[q] = x;
            e[q] = ei[p];
            if (mkpf != NULL)
                __builtin_prefetch((const void *)(mkpf + x), 1);
        }
    } else {
        for (size_t q = 0; q < np; q++) {
            int64_t p = pos[q], x = ix[p];
            u[q] = x;
            e[q] = elo + p;
            if (mkpf != NULL)
                __builtin_prefetch((const void *)(mkpf + x), 1);
        }
    }
    tb->ue_len += np;
    return GKV_OK;
}

/* What P3 does with a sub-block's picks. */
enum { P3_NONE, P3_LABEL, P3_COPY, P3_KEYS };

struct sbk {                  /* one sub-block in the pipeline */
    int64_t lo, hi;           /* frontier nodes */
    size_t  coff, uoff, np;   /* its counts, picks in tb's buffers */
};

/* P3, one thread, relabel: new neighbours get the next local IDs; the
 * edges go straight into the block. */
static gkv_err
p3_label(gkv_sampler *s, struct tbuf *tb, int et, const struct sbk *d)
{
    struct run *R = &s->R;
    struct blay *L = R->L;
    struct earr *ea = &L->ea[et];
    int nb = nbr_ntype(s->sg, et, R->dir);
    amark *mk = s->mk[nb];
    size_t nn = L->nodes[nb].num_src, o = L->edges[et].n, j = d->uoff;
    const int64_t *cnt = tb->cnt + d->coff, *u = tb->u, *e = tb->e;
    int64_t *ids, *es, *ed, *ee;

    if (earr_grow(ea, o + d->np) ||
        grow(&L->ids[nb], &L->idcap[nb], nn + d->np, sizeof *L->ids[nb]))
        return tb_fail(s, tb, 0, GKV_ENOMEM, "out of memory for a block "
                       "of %zu edges", o + d->np);
    R->f[nb] = L->ids[nb];
    ids = L->ids[nb];
    es = ea->s;
    ed = ea->d;
    ee = ea->e;
    for (int64_t i = d->lo; i < d->hi; i++) {
        for (int64_t c = cnt[i - d->lo]; c > 0; c--, j++, o++) {
            int64_t x = u[j];
            uint64_t m = LOAD(&mk[x]);
            if (m == 0) {
                ids[nn] = x;
                m = ++nn;
                STORE(&mk[x], m);
            }
            es[o] = (int64_t)m - 1;
            ed[o] = i;
            ee[o] = e[j];
        }
    }
    L->nodes[nb].num_src = nn;
    L->edges[et].n = o;
    return GKV_OK;
}

/* A single hop's per-seed pick counts of frontier nodes [lo, hi) of edge
 * type et, for graph__sample_hop's caller. */
static inline void
counts_out(gkv_sampler *s, int et, int64_t lo, int64_t hi,
           const int64_t *cnt)
{
    if (s->cntv != NULL && s->cntv[et] != NULL)
        memcpy(s->cntv[et] + lo, cnt, (size_t)(hi - lo) * sizeof *cnt);
}

/* P3, one thread, single hop: the edges in global IDs. */
static gkv_err
p3_copy(gkv_sampler *s, struct tbuf *tb, int et, const struct sbk *d)
{
    struct run *R = &s->R;
    struct earr *ea = &R->out[et];
    const int64_t *f = R->f[col_ntype(s->sg, et, R->dir)];
    const int64_t *cnt = tb->cnt + d->coff;
    size_t o = R->olen[et], j = d->uoff;
    int64_t *os, *od;

    if (earr_grow(ea, o + d->np))
        return tb_fail(s, tb, 0, GKV_ENOMEM, "out of memory for %zu "
                       "sampled edges", o + d->np);
    os = R->dir == GKV_DIR_IN ? ea->s : ea->d;
    od = R->dir == GKV_DIR_IN ? ea->d : ea->s;
    counts_out(s, et, d->lo, d->hi, cnt);
    for (int64_t i = d->lo; i < d->hi; i++)
        for (int64_t c = cnt[i - d->lo]; c > 0; c--, j++, o++) {
            os[o] = tb->u[j];
            od[o] = f[i];
            ea->e[o] = tb->e[j];
        }
    R->olen[et] = o;
    return GKV_OK;
}

/* P3, parallel phase A: each pick's key (chunk ci, index from the chunk's
 * start 'cbase' in tb->u) as an atomic minimum on its neighbour's marker;
 * tb->rank[j] = 1 where this pick's key went in (only those can be first
 * appearances). */
static void
p3_keys(gkv_sampler *s, struct tbuf *tb, int et, const struct sbk *d,
        long ci, size_t cbase)
{
    amark *mk = s->mk[nbr_ntype(s->sg, et, s->R.dir)];

    for (size_t j = d->uoff; j < d->uoff + d->np; j++) {
        uint64_t key = KEY(ci, j - cbase);
        amark *p = &mk[tb->u[j]];
        uint64_t m = LOAD(p);
        int64_t in = 0;
        while (m == 0 || m > key) {
            if (atomic_compare_exchange_weak_explicit(
                    p, &m, key, memory_order_relaxed, memory_order_relaxed)) {
                in = 1;
                break;
            }
        }
        tb->rank[j] = in;
    }
}

/* Samples frontier nodes [lo, hi) of edge type et in sub-blocks of SUB,
 * software-pipelined so that every prefetch has a sub-block's time to
 * land: step j runs P1 of sub-block j, P2 of j - 1 and P3 of j - 2. Counts
 * and picks are appended to tb's buffers; 'cbase' is where chunk ci's
 * picks start there (P3_KEYS). */
static gkv_err
pipe_range(gkv_sampler *s, struct tbuf *tb, long ci, int et, int64_t lo,
           int64_t hi, int mode, size_t cbase)
{
    const int nb = nbr_ntype(s->sg, et, s->R.dir);
    amark *mk = mode == P3_LABEL || mode == P3_KEYS ? s->mk[nb] : NULL;
    int64_t nsub = (hi - lo + SUB - 1) / SUB;
    struct sbk q[3];
    gkv_err rc;

    for (int64_t j = 0; j < nsub + 2; j++) {
        if (j < nsub) {
            struct sbk *d = &q[j % 3];
            d->lo = lo + j * SUB;
            d->hi = d->lo + SUB < hi ? d->lo + SUB : hi;
            d->coff = tb->cnt_len;
            tb->pos = tb->spos[j & 1];
            tb->pos_cap = tb->scap[j & 1];
            rc = p1(s, tb, ci, et, d->lo, d->hi, &d->np);
            tb->spos[j & 1] = tb->pos;
            tb->scap[j & 1] = tb->pos_cap;
            if (rc != GKV_OK)
                return rc;
        }
        if (j >= 1 && j - 1 < nsub) {
            struct sbk *d = &q[(j - 1) % 3];
            d->uoff = tb->ue_len;
            if ((rc = p2(s, tb, ci, et, tb->spos[(j - 1) & 1], d->np, mk)) !=
                GKV_OK)
                return rc;
        }
        if (j >= 2 && mode != P3_NONE) {
            const struct sbk *d = &q[(j - 2) % 3];
            if (mode == P3_KEYS)
                p3_keys(s, tb, et, d, ci, cbase);
            else if ((rc = mode == P3_LABEL ? p3_label(s, tb, et, d)
                           : p3_copy(s, tb, et, d)) != GKV_OK)
                return rc;
        }
    }
    return GKV_OK;
}

/* ---- hops --------------------------------------------------------------- */

/* Records the message of the lowest failing chunk as s's. */
static gkv_err
hop_error(gkv_sampler *s)
{
    struct tbuf *best = NULL;

    for (int i = 0; i < s->nt; i++)
        if (s->tb[i].err_ci >= 0 &&
            (best == NULL || s->tb[i].err_ci < best->err_ci))
            best = &s->tb[i];
    if (best == NULL)
        return s_fail(s, GKV_EINVAL, "sampling failed");
    return s_fail(s, best->err, "%s", best->msg);
}

#define FUSE_CHUNK 4096   /* one-thread hops: frontier nodes per pipeline */

/* One thread: the pipeline writes the block (or the single-hop result)
 * directly. */
static gkv_err
hop_serial(gkv_sampler *s)
{
    struct run *R = &s->R;
    struct tbuf *tb = &s->tb[0];

    for (int et = 0; et < s->net; et++) {
        size_t nf;
        if (R->fan[et] == 0)
            continue;
        nf = R->nf[col_ntype(s->sg, et, R->dir)];
        for (size_t lo = 0; lo < nf; lo += FUSE_CHUNK) {
            size_t hi = lo + FUSE_CHUNK < nf ? lo + FUSE_CHUNK : nf;
            tb->ue_len = tb->cnt_len = 0;
            if (pipe_range(s, tb, 0, et, (int64_t)lo, (int64_t)hi,
                           R->relabel ? P3_LABEL : P3_COPY, 0) != GKV_OK)
                return GKV_EINVAL;
        }
    }
    return GKV_OK;
}

/* Phase A: picks into the thread's buffers; with relabel, the atomic
 * minimum of each pick's key on its neighbour's marker. */
static void
ph_pick(gkv_sampler *s, int tid)
{
    struct tbuf *tb = &s->tb[tid];
    const struct run *R = &s->R;

    for (;;) {
        size_t ci = atomic_fetch_add_explicit(&s->next, 1,
                                              memory_order_relaxed);
        struct chunk *c;
        if (ci >= s->nch)
            break;
        c = &s->ch[ci];
        c->tid = tid;
        c->uoff = tb->ue_len;
        c->coff = tb->cnt_len;
        c->n = 0;
        if ((long)ci > atomic_load_explicit(&s->fail_ci, memory_order_relaxed))
            continue;
        if (R->relabel) {
            pipe_range(s, tb, (long)ci, c->et, c->lo, c->hi, P3_KEYS,
                       c->uoff);
        } else {
            /* P1 and P2 only: the copy waits for the offsets */
            pipe_range(s, tb, (long)ci, c->et, c->lo, c->hi, P3_NONE, 0);
        }
        c->n = tb->ue_len - c->uoff;
        if (c->n >= (UINT64_C(1) << KEY_IX_BITS))
            tb_fail(s, tb, (long)ci, GKV_ENOMEM, "%zu picks in one chunk "
                    "of edge type %d: too many", c->n, c->et);
    }
}

/* Phase C: the chunk's first appearances (picks whose key is still on the
 * marker), their indices compacted in order into the front of its rank
 * array. */
static void
ph_first(gkv_sampler *s, int tid)
{
    (void)tid;
    for (;;) {
        size_t ci = atomic_fetch_add_explicit(&s->next, 1,
                                              memory_order_relaxed);
        struct chunk *c;
        struct tbuf *tb;
        amark *mk;
        const int64_t *u;
        int64_t *rank;
        size_t nnew = 0;
        if (ci >= s->nch)
            break;
        c = &s->ch[ci];
        tb = &s->tb[c->tid];
        mk = s->mk[nbr_ntype(s->sg, c->et, s->R.dir)];
        u = tb->u + c->uoff;
        rank = tb->rank + c->uoff;
        for (size_t j = 0; j < c->n; j++)
            if (rank[j] && LOAD(&mk[u[j]]) == KEY(ci, j))
                rank[nnew++] = (int64_t)j;
        c->nnew = nnew;
    }
}

/* Phase D1: the first appearances get their local IDs (marker = local ID
 * + 1) and their place in the node list. */
static void
ph_newlab(gkv_sampler *s, int tid)
{
    struct blay *L = s->R.L;

    (void)tid;
    for (;;) {
        size_t ci = atomic_fetch_add_explicit(&s->next, 1,
                                              memory_order_relaxed);
        const struct chunk *c;
        const struct tbuf *tb;
        const int64_t *u, *rank;
        int64_t *ids;
        amark *mk;
        int nb;
        if (ci >= s->nch)
            break;
        c = &s->ch[ci];
        tb = &s->tb[c->tid];
        nb = nbr_ntype(s->sg, c->et, s->R.dir);
        mk = s->mk[nb];
        ids = L->ids[nb] + c->base;
        u = tb->u + c->uoff;
        rank = tb->rank + c->uoff;
        for (size_t r = 0; r < c->nnew; r++) {
            int64_t x = u[rank[r]];
            ids[r] = x;
            STORE(&mk[x], (uint64_t)(c->base + (int64_t)r) + 1);
        }
    }
}

/* Phase D2: every pick's local source from its marker, into the block. */
static void
ph_label(gkv_sampler *s, int tid)
{
    struct blay *L = s->R.L;

    (void)tid;
    for (;;) {
        size_t ci = atomic_fetch_add_explicit(&s->next, 1,
                                              memory_order_relaxed);
        const struct chunk *c;
        const struct tbuf *tb;
        const int64_t *u, *e, *cnt;
        struct earr *ea;
        amark *mk;
        size_t j = 0, o;
        if (ci >= s->nch)
            break;
        c = &s->ch[ci];
        tb = &s->tb[c->tid];
        mk = s->mk[nbr_ntype(s->sg, c->et, s->R.dir)];
        ea = &L->ea[c->et];
        u = tb->u + c->uoff;
        e = tb->e + c->uoff;
        cnt = tb->cnt + c->coff;
        o = c->eoff;
        for (int64_t i = c->lo; i < c->hi; i++) {
            for (int64_t k = cnt[i - c->lo]; k > 0; k--, j++, o++) {
                ea->s[o] = (int64_t)LOAD(&mk[u[j]]) - 1;
                ea->d[o] = i;
                ea->e[o] = e[j];
            }
        }
    }
}

/* Phase D of a single hop: the picks in global IDs at their offsets. */
static void
ph_copy(gkv_sampler *s, int tid)
{
    const struct run *R = &s->R;

    (void)tid;
    for (;;) {
        size_t ci = atomic_fetch_add_explicit(&s->next, 1,
                                              memory_order_relaxed);
        const struct chunk *c;
        const struct tbuf *tb;
        const int64_t *u, *e, *cnt, *f;
        struct earr *ea;
        int64_t *os, *od;
        size_t j = 0, o;
        if (ci >= s->nch)
            break;
        c = &s->ch[ci];
        tb = &s->tb[c->tid];
        ea = &R->out[c->et];
        f = R->f[col_ntype(s->sg, c->et, R->dir)];
        u = tb->u + c->uoff;
        e = tb->e + c->uoff;
        cnt = tb->cnt + c->coff;
        os = R->dir == GKV_DIR_IN ? ea->s : ea->d;
        od = R->dir == GKV_DIR_IN ? ea->d : ea->s;
        o = c->eoff;
        counts_out(s, c->et, c->lo, c->hi, cnt);
        for (int64_t i = c->lo; i < c->hi; i++)
            for (int64_t k = cnt[i - c->lo]; k > 0; k--, j++, o++) {
                os[o] = u[j];
                od[o] = f[i];
                ea->e[o] = e[j];
            }
    }
}

/* After a failed parallel hop: markers still holding a key go back to 0. */
static void
keys_clear(gkv_sampler *s)
{
    for (size_t ci = 0; ci < s->nch; ci++) {
        const struct chunk *c = &s->ch[ci];
        const int64_t *u = s->tb[c->tid].u + c->uoff;
        amark *mk = s->mk[nbr_ntype(s->sg, c->et, s->R.dir)];
        for (size_t j = 0; j < c->n; j++)
            if (LOAD(&mk[u[j]]) >= KEYBIT)
                STORE(&mk[u[j]], 0);
    }
}

static gkv_err
hop_parallel(gkv_sampler *s, size_t total)
{
    struct run *R = &s->R;
    struct tbuf *tb0 = &s->tb[0];
    size_t chs = total / ((size_t)s->nt * 8), maxch;

    if (chs < SUB)
        chs = SUB;
    if (chs > 1024)
        chs = 1024;
    /* a key holds the chunk index in KEY_CH_BITS bits */
    maxch = ((size_t)1 << KEY_CH_BITS) - 1;
    for (;;) {
        size_t n = 0;
        for (int et = 0; et < s->net; et++)
            if (R->fan[et] != 0)
                n += (R->nf[col_ntype(s->sg, et, R->dir)] + chs - 1) / chs;
        if (n <= maxch)
            break;
        chs *= 2;
    }
    s->nch = 0;
    for (int et = 0; et < s->net; et++) {
        size_t nf;
        if (R->fan[et] == 0)
            continue;
        nf = R->nf[col_ntype(s->sg, et, R->dir)];
        for (size_t lo = 0; lo < nf; lo += chs) {
            struct chunk *c;
            if (grow(&s->ch, &s->chcap, s->nch + 1, sizeof *s->ch)) {
                tb_fail(s, tb0, 0, GKV_ENOMEM, "out of memory for the "
                        "work list");
                return GKV_ENOMEM;
            }
            c = &s->ch[s->nch++];
            memset(c, 0, sizeof *c);
            c->et = et;
            c->lo = (int64_t)lo;
            c->hi = (int64_t)(lo + chs < nf ? lo + chs : nf);
        }
    }
    for (int i = 0; i < s->nt; i++)
        s->tb[i].ue_len = s->tb[i].cnt_len = 0;
    atomic_store(&s->next, 0);
    pool_run(s, ph_pick);
    if (atomic_load(&s->fail_ci) != LONG_MAX) {
        if (R->relabel)
            keys_clear(s);
        return GKV_EINVAL;
    }
    if (R->relabel) {
        struct blay *L = R->L;
        size_t *ntot = s->ntot, *etot = s->nlen;
        atomic_store(&s->next, 0);
        pool_run(s, ph_first);
        for (int t = 0; t < s->nnt; t++)
            ntot[t] = L->nodes[t].num_src;
        for (int e = 0; e < s->net; e++)
            etot[e] = L->edges[e].n;
        for (size_t ci = 0; ci < s->nch; ci++) {
            struct chunk *c = &s->ch[ci];
            int nb = nbr_ntype(s->sg, c->et, R->dir);
            c->base = (int64_t)ntot[nb];
            ntot[nb] += c->nnew;
            c->eoff = etot[c->et];
            etot[c->et] += c->n;
        }
        for (int t = 0; t < s->nnt; t++)
            if (grow(&L->ids[t], &L->idcap[t], ntot[t], sizeof *L->ids[t]))
                goto nomem;
        for (int e = 0; e < s->net; e++)
            if (earr_grow(&L->ea[e], etot[e]))
                goto nomem;
        atomic_store(&s->next, 0);
        pool_run(s, ph_newlab);
        atomic_store(&s->next, 0);
        pool_run(s, ph_label);
        for (int t = 0; t < s->nnt; t++) {
            L->nodes[t].num_src = ntot[t];
            R->f[t] = L->ids[t];
        }
        for (int e = 0; e < s->net; e++)
            L->edges[e].n = etot[e];
    } else {
        for (size_t ci = 0; ci < s->nch; ci++) {
            struct chunk *c = &s->ch[ci];
            c->eoff = R->olen[c->et];
            R->olen[c->et] += c->n;
        }
        for (int e = 0; e < s->net; e++)
            if (earr_grow(&R->out[e], R->olen[e]))
                goto nomem;
        atomic_store(&s->next, 0);
        pool_run(s, ph_copy);
    }
    return GKV_OK;
nomem:
    if (R->relabel)
        keys_clear(s);
    tb_fail(s, tb0, 0, GKV_ENOMEM, "out of memory for the sampled edges");
    return GKV_ENOMEM;
}

/* Runs the hop described by s->R (fan, key, fast, f, nf, and L or out). */
static gkv_err
hop_run(gkv_sampler *s)
{
    struct run *R = &s->R;
    size_t total = 0;
    gkv_err rc;

    for (int et = 0; et < s->net; et++)
        if (R->fan[et] != 0)
            total += R->nf[col_ntype(s->sg, et, R->dir)];
    for (int i = 0; i < s->nt; i++)
        s->tb[i].err_ci = -1;
    atomic_store(&s->fail_ci, LONG_MAX);
    if (s->nt > 1 && s->solo == 0 && total >= PAR_MIN)
        rc = hop_parallel(s, total);
    else
        rc = hop_serial(s);
    if (rc != GKV_OK)
        return hop_error(s);
    return GKV_OK;
}

#define RESET_CHUNK 4096

/* Markers of the nodes in L's lists back to 0, in chunks of RESET_CHUNK
 * nodes taken from s->next. */
static void
ph_reset(gkv_sampler *s, int tid)
{
    const struct blay *L = s->R.L;

    (void)tid;
    for (;;) {
        size_t ci = atomic_fetch_add_explicit(&s->next, 1,
                                              memory_order_relaxed);
        size_t lo = ci * RESET_CHUNK;
        int t;
        for (t = 0; t < s->nnt; t++) {
            size_t n = L->nodes[t].num_src;
            if (lo < n)
                break;
            lo -= (n + RESET_CHUNK - 1) / RESET_CHUNK * RESET_CHUNK;
        }
        if (t == s->nnt)
            break;
        {
            size_t n = L->nodes[t].num_src;
            size_t hi = lo + RESET_CHUNK < n ? lo + RESET_CHUNK : n;
            const int64_t *ids = L->ids[t];
            amark *mk = s->mk[t];
            for (size_t i = lo; i < hi; i++)
                STORE(&mk[ids[i]], 0);
        }
    }
}

static void
markers_reset(gkv_sampler *s, struct blay *L)
{
    size_t n = 0;

    for (int t = 0; t < s->nnt; t++)
        n += L->nodes[t].num_src;
    s->R.L = L;
    atomic_store(&s->next, 0);
    if (n >= 2 * RESET_CHUNK && s->solo == 0)
        pool_run(s, ph_reset);
    else
        ph_reset(s, 0);
}

/* ---- call set-up -------------------------------------------------------- */

static const gkv_sample_opts opts_zero;

static gkv_err
fan_check(gkv_sampler *s, const int *fan, int nfan, int nlayers)
{
    if (fan == NULL)
        return s_fail(s, GKV_EINVAL, "fanouts is NULL");
    if (nfan != 1 && nfan != s->net)
        return s_fail(s, GKV_EINVAL, "nfan %d is neither 1 nor the number "
                      "of edge types (%d)", nfan, s->net);
    for (int i = 0; i < nlayers * nfan; i++)
        if (fan[i] < -1)
            return s_fail(s, GKV_EINVAL, "fanout[%d] = %d: a fanout is -1 "
                          "(all) or >= 0", i, fan[i]);
    return GKV_OK;
}

/* Is edge type e sampled in any of the layers? */
static int
fan_used(const int *fan, int nfan, int nlayers, int e)
{
    for (int i = 0; i < nlayers; i++)
        if (fan[i * nfan + (nfan == 1 ? 0 : e)] != 0)
            return 1;
    return 0;
}

/* Appends the positions of the edges ids[0..n) of type e (those the
 * adjacency holds) to the exclusion list of e. */
static gkv_err
ex_add(gkv_sampler *s, int e, const int64_t *ids, size_t n, const char *what)
{
    const struct sg_adj *sa = &s->sg->adj[2 * e + s->R.dir];
    const struct sg_inv *iv = NULL;

    if (!sa->set || n == 0)
        return GKV_OK;
    if (ids == NULL)
        return s_fail(s, GKV_EINVAL, "%s of edge type %d is NULL", what, e);
    if (has_eids(sa) && inv_get(s->sg, sa, &iv) != GKV_OK)
        return s_fail(s, GKV_ENOMEM, "out of memory for the edge-ID index "
                      "of edge type %d", e);
    if (grow(&s->ex[e], &s->excap[e], s->nex[e] + n, sizeof *s->ex[e]))
        return s_fail(s, GKV_ENOMEM, "out of memory for %zu excluded edges",
                      s->nex[e] + n);
    for (size_t i = 0; i < n; i++) {
        int64_t p;
        if (ids[i] < 0)
            return s_fail(s, GKV_ERANGE, "%s of edge type %d: [%zu] = %lld "
                          "is not an edge ID", what, e, i, (long long)ids[i]);
        if ((p = eid_pos(sa, iv, ids[i])) >= 0)
            s->ex[e][s->nex[e]++] = p;
    }
    return GKV_OK;
}

static int
i64_cmp(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;

    return (a > b) - (a < b);
}

static void
ex_finish(gkv_sampler *s)
{
    for (int e = 0; e < s->net; e++) {
        size_t n = s->nex[e], m = 0;
        int64_t *x = s->ex[e];
        if (n < 2)
            continue;
        qsort(x, n, sizeof *x, i64_cmp);
        for (size_t i = 0; i < n; i++)
            if (m == 0 || x[i] != x[m - 1])
                x[m++] = x[i];
        s->nex[e] = m;
    }
}

/* Checks the options against the edge types sampled, and fills s->R's
 * direction, flags and weight modes and the exclusion lists from o. */
static gkv_err
opts_prep(gkv_sampler *s, const gkv_sample_opts *o, const int *fan, int nfan,
          int nlayers)
{
    struct run *R = &s->R;

    if (o == NULL)
        o = &opts_zero;
    if (o->dir != GKV_DIR_IN && o->dir != GKV_DIR_OUT)
        return s_fail(s, GKV_EINVAL, "opts->dir %d is neither GKV_DIR_IN "
                      "nor GKV_DIR_OUT", o->dir);
    if (o->flags & ~(GKV_SAMPLE_REPLACE | GKV_SAMPLE_WEIGHTED))
        return s_fail(s, GKV_EINVAL, "opts->flags 0x%x has unknown bits",
                      o->flags);
    if ((o->flags & GKV_SAMPLE_WEIGHTED) && o->edge_w != NULL)
        return s_fail(s, GKV_EINVAL, "GKV_SAMPLE_WEIGHTED and edge_w are "
                      "both given; choose one source of weights");
    if (o->edge_w != NULL && o->edge_w_len == NULL)
        return s_fail(s, GKV_EINVAL, "edge_w is given without edge_w_len");
    if (o->exclude != NULL && o->exclude_n == NULL)
        return s_fail(s, GKV_EINVAL, "exclude is given without exclude_n");
    for (int e = 0; o->edge_w_feat != NULL && e < s->net; e++)
        if (o->edge_w_feat[e] != NULL)
            return s_fail(s, GKV_EINVAL, "opts->edge_w_feat[%d] names the "
                          "edge feature '%s': only graph servers resolve "
                          "feature names (gkv_client_sample_*); in-process, "
                          "pass the values as edge_w", e, o->edge_w_feat[e]);
    memset(R, 0, sizeof *R);
    R->dir = o->dir;
    R->flags = o->flags;
    R->seed = o->seed;
    R->ew = o->edge_w;
    R->ewlen = o->edge_w_len;
    R->ewlo = o->edge_w != NULL ? o->edge_w_lo : NULL;
    R->wp = s->wpv;
    R->fan = s->fanv;
    R->key = s->keyv;
    R->fast = s->fastv;
    R->wmode = s->wmodev;
    R->f = s->fv;
    R->nf = s->nfv;
    for (int e = 0; e < s->net; e++) {
        const struct sg_adj *sa = &s->sg->adj[2 * e + o->dir];
        int used = fan_used(fan, nfan, nlayers, e);
        s->nex[e] = 0;
        s->wmodev[e] = 0;
        if (used && !sa->set)
            return s_fail(s, GKV_EINVAL, "edge type %d is sampled but has "
                          "no %s adjacency set", e, dir_name(o->dir));
        if (o->edge_w != NULL && o->edge_w[e] != NULL) {
            if (o->edge_w_len[e] < 0)
                return s_fail(s, GKV_EINVAL, "edge_w_len[%d] = %lld is "
                              "negative", e, (long long)o->edge_w_len[e]);
            if (o->edge_w_lo != NULL && o->edge_w_lo[e] < 0)
                return s_fail(s, GKV_EINVAL, "edge_w_lo[%d] = %lld is "
                              "negative", e, (long long)o->edge_w_lo[e]);
            s->wmodev[e] = 2;
        } else if (s->wpv != NULL && s->wpv[e].off != NULL) {
            if (o->flags & GKV_SAMPLE_WEIGHTED)
                return s_fail(s, GKV_EINVAL, "GKV_SAMPLE_WEIGHTED and "
                              "weights by position for edge type %d are "
                              "both given; choose one source of weights", e);
            s->wmodev[e] = 3;
        } else if (o->flags & GKV_SAMPLE_WEIGHTED) {
            if (used && sa->a.w == NULL)
                return s_fail(s, GKV_EINVAL, "GKV_SAMPLE_WEIGHTED: edge type "
                              "%d has no weights in its %s adjacency", e,
                              dir_name(o->dir));
            s->wmodev[e] = 1;
        }
    }
    if (o->exclude != NULL)
        for (int e = 0; e < s->net; e++) {
            gkv_err rc;
            if (o->exclude[e] == NULL || o->exclude_n[e] == 0)
                continue;
            if ((rc = ex_add(s, e, o->exclude[e], o->exclude_n[e],
                             "opts->exclude")) != GKV_OK)
                return rc;
        }
    return GKV_OK;
}

/* Fanouts, keys and fast-path flags of one hop. */
static void
hop_set(gkv_sampler *s, const int *fan, int nfan, int row, int layer)
{
    struct run *R = &s->R;
    uint64_t kl = absorb(absorb(GKV_GEN_DOM_SAMPLE, R->seed), (uint64_t)layer);

    for (int e = 0; e < s->net; e++) {
        int k = fan[row * nfan + (nfan == 1 ? 0 : e)];
        s->fanv[e] = k;
        s->keyv[e] = absorb(kl, (uint64_t)e);
        s->fastv[e] = s->wmodev[e] == 0 && s->nex[e] == 0 &&
                      !(R->flags & GKV_SAMPLE_REPLACE) && k >= 1 &&
                      k <= FLOYD_SMALL;
    }
}

static gkv_err
markers_alloc(gkv_sampler *s)
{
    for (int t = 0; t < s->nnt; t++) {
        int64_t n = s->sg->nn[t];
        if (s->mk[t] != NULL)
            continue;
        if ((s->mk[t] = huge_alloc((size_t)n * sizeof *s->mk[t],
                                   &s->mkraw[t])) == NULL)
            return s_fail(s, GKV_ENOMEM, "out of memory for the relabel "
                          "markers of node type %d (%lld nodes)", t,
                          (long long)n);
        memset((void *)s->mk[t], 0, (size_t)n * sizeof *s->mk[t]);
    }
    return GKV_OK;
}

static gkv_err
lay_reserve(gkv_sampler *s, int nlayers)
{
    struct blay *nl;

    if (nlayers <= s->nlay)
        return GKV_OK;
    if ((nl = gkv__realloc(s->lay, (size_t)nlayers * sizeof *nl)) == NULL)
        return s_fail(s, GKV_ENOMEM, "out of memory for %d blocks", nlayers);
    s->lay = nl;
    while (s->nlay < nlayers) {
        struct blay *L = &s->lay[s->nlay];
        memset(L, 0, sizeof *L);
        L->ids = gkv__calloc((size_t)s->nnt, sizeof *L->ids);
        L->idcap = gkv__calloc((size_t)s->nnt, sizeof *L->idcap);
        L->nodes = gkv__calloc((size_t)s->nnt, sizeof *L->nodes);
        L->ea = gkv__calloc((size_t)s->net + 1, sizeof *L->ea);
        L->edges = gkv__calloc((size_t)s->net + 1, sizeof *L->edges);
        if (L->ids == NULL || L->idcap == NULL || L->nodes == NULL ||
            L->ea == NULL || L->edges == NULL) {
            blay_free(s, L);
            return s_fail(s, GKV_ENOMEM, "out of memory for %d blocks",
                          nlayers);
        }
        s->nlay++;
    }
    return GKV_OK;
}

/* The hops of a block sample. The seeds are in s->lay[nlayers - 1]'s lists
 * (num_dst = num_src) and labelled in the markers. Resets the markers. */
static gkv_err
blocks_run(gkv_sampler *s, const int *fan, int nfan, int nlayers,
           gkv_block *blocks)
{
    struct run *R = &s->R;
    struct blay *L = NULL;
    gkv_err rc = GKV_OK;

    R->relabel = 1;
    for (int h = 0; h < nlayers; h++) {
        int bi = nlayers - 1 - h;
        L = &s->lay[bi];
        if (h > 0) {
            const struct blay *P = &s->lay[bi + 1];
            for (int t = 0; t < s->nnt; t++) {
                size_t n = P->nodes[t].num_src;
                if (grow(&L->ids[t], &L->idcap[t], n, sizeof *L->ids[t])) {
                    L = &s->lay[bi + 1];
                    rc = s_fail(s, GKV_ENOMEM, "out of memory for block %d "
                                "(%zu nodes)", bi, n);
                    goto out;
                }
                if (n > 0)
                    memcpy(L->ids[t], P->ids[t], n * sizeof *L->ids[t]);
            }
            for (int t = 0; t < s->nnt; t++)
                L->nodes[t].num_dst = L->nodes[t].num_src =
                    P->nodes[t].num_src;
        }
        for (int e = 0; e < s->net; e++)
            L->edges[e].n = 0;
        R->L = L;
        for (int t = 0; t < s->nnt; t++) {
            s->fv[t] = L->ids[t];
            s->nfv[t] = L->nodes[t].num_dst;
        }
        hop_set(s, fan, nfan, bi, h);
        if ((rc = hop_run(s)) != GKV_OK)
            goto out;
    }
out:
    markers_reset(s, L);
    if (rc != GKV_OK)
        return rc;
    for (int i = 0; i < nlayers; i++) {
        struct blay *B = &s->lay[i];
        for (int t = 0; t < s->nnt; t++)
            B->nodes[t].ids = B->ids[t];
        for (int e = 0; e < s->net; e++) {
            B->edges[e].src = B->ea[e].s;
            B->edges[e].dst = B->ea[e].d;
            B->edges[e].eid = B->ea[e].e;
        }
        blocks[i].num_ntypes = s->nnt;
        blocks[i].num_etypes = s->net;
        blocks[i].nodes = B->nodes;
        blocks[i].edges = B->edges;
    }
    return GKV_OK;
}

/* ---- the calls ---------------------------------------------------------- */

static gkv_err
seeds_check(gkv_sampler *s, const int64_t *const *seeds, const size_t *nseeds)
{
    if (seeds == NULL || nseeds == NULL)
        return s_fail(s, GKV_EINVAL, "seeds or nseeds is NULL");
    for (int t = 0; t < s->nnt; t++) {
        int64_t nn = s->sg->nn[t];
        if (nseeds[t] > 0 && seeds[t] == NULL)
            return s_fail(s, GKV_EINVAL, "seeds[%d] is NULL with nseeds[%d] "
                          "= %zu", t, t, nseeds[t]);
        for (size_t i = 0; i < nseeds[t]; i++)
            if ((uint64_t)seeds[t][i] >= (uint64_t)nn)
                return s_fail(s, GKV_ERANGE, "seeds[%d][%zu] = %lld is not "
                              "a node of type %d (%lld nodes)", t, i,
                              (long long)seeds[t][i], t, (long long)nn);
    }
    return GKV_OK;
}

static gkv_err
neighbors_call(gkv_sampler *s, const int64_t *const *seeds,
               const size_t *nseeds, const int *fanout, int nfan, int layer,
               const gkv_sample_opts *opts, gkv_sample_edges *out)
{
    struct run *R;
    gkv_err rc;

    if (out == NULL)
        return s_fail(s, GKV_EINVAL, "out is NULL");
    memset(out, 0, (size_t)s->net * sizeof *out);
    if ((rc = fan_check(s, fanout, nfan, 1)) != GKV_OK ||
        (rc = seeds_check(s, seeds, nseeds)) != GKV_OK)
        return rc;
    if (layer < 0)
        return s_fail(s, GKV_EINVAL, "layer %d is negative", layer);
    if ((rc = opts_prep(s, opts, fanout, nfan, 1)) != GKV_OK)
        return rc;
    ex_finish(s);
    R = &s->R;
    R->relabel = 0;
    R->out = s->nea;
    R->olen = s->nlen;
    for (int e = 0; e < s->net; e++)
        s->nlen[e] = 0;
    for (int t = 0; t < s->nnt; t++) {
        s->fv[t] = seeds[t];
        s->nfv[t] = nseeds[t];
    }
    hop_set(s, fanout, nfan, 0, layer);
    if ((rc = hop_run(s)) != GKV_OK)
        return rc;
    for (int e = 0; e < s->net; e++) {
        out[e].src = s->nea[e].s;
        out[e].dst = s->nea[e].d;
        out[e].eid = s->nea[e].e;
        out[e].n = s->nlen[e];
    }
    return GKV_OK;
}

static gkv_err
blocks_call(gkv_sampler *s, const int64_t *const *seeds,
            const size_t *nseeds, const int *fanouts, int nfan, int nlayers,
            const gkv_sample_opts *opts, gkv_block *blocks)
{
    struct blay *L;
    gkv_err rc;

    if (blocks == NULL)
        return s_fail(s, GKV_EINVAL, "blocks is NULL");
    if (nlayers < 1)
        return s_fail(s, GKV_EINVAL, "nlayers %d: at least one layer",
                      nlayers);
    memset(blocks, 0, (size_t)nlayers * sizeof *blocks);
    if ((rc = fan_check(s, fanouts, nfan, nlayers)) != GKV_OK ||
        (rc = seeds_check(s, seeds, nseeds)) != GKV_OK ||
        (rc = opts_prep(s, opts, fanouts, nfan, nlayers)) != GKV_OK ||
        (rc = markers_alloc(s)) != GKV_OK ||
        (rc = lay_reserve(s, nlayers)) != GKV_OK)
        return rc;
    ex_finish(s);
    L = &s->lay[nlayers - 1];
    for (int t = 0; t < s->nnt; t++) {
        L->nodes[t].num_src = L->nodes[t].num_dst = 0;
        if (grow(&L->ids[t], &L->idcap[t], nseeds[t], sizeof *L->ids[t]))
            return s_fail(s, GKV_ENOMEM, "out of memory for %zu seeds",
                          nseeds[t]);
    }
    for (int t = 0; t < s->nnt; t++) {
        amark *mk = s->mk[t];
        for (size_t i = 0; i < nseeds[t]; i++) {
            int64_t v = seeds[t][i];
            uint64_t m = LOAD(&mk[v]);
            if (m != 0) {
                rc = s_fail(s, GKV_EINVAL, "seeds[%d][%zu] = %lld is given "
                            "twice (first at index %llu)", t, i, (long long)v,
                            (unsigned long long)(m - 1));
                markers_reset(s, L);
                return rc;
            }
            L->ids[t][i] = v;
            STORE(&mk[v], i + 1);
            L->nodes[t].num_src = L->nodes[t].num_dst = i + 1;
        }
    }
    return blocks_run(s, fanouts, nfan, nlayers, blocks);
}

/* Local ID of node v of type t in list L (appending it when new). */
static inline int64_t
label(gkv_sampler *s, struct blay *L, int t, int64_t v)
{
    amark *mk = s->mk[t];
    uint64_t m = LOAD(&mk[v]);

    if (m == 0) {
        L->ids[t][L->nodes[t].num_src] = v;
        m = ++L->nodes[t].num_src;
        STORE(&mk[v], m);
    }
    return (int64_t)m - 1;
}

/* Records 'fmt' in msg[0 .. cap) and returns rc. */
static gkv_err
eb_fail(char *msg, size_t cap, gkv_err rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static gkv_err
eb_fail(char *msg, size_t cap, gkv_err rc, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, cap, fmt, ap);
    va_end(ap);
    return rc;
}

gkv_err
graph__eb_check(const gkv_edge_batch_spec *sp, int num_etypes, char *msg,
                size_t cap)
{
    if (sp->etype < 0 || sp->etype >= num_etypes)
        return eb_fail(msg, cap, GKV_EINVAL, "spec->etype %d: the graph has "
                       "%d edge types", sp->etype, num_etypes);
    if (sp->n > 0 && sp->eids == NULL)
        return eb_fail(msg, cap, GKV_EINVAL, "spec->eids is NULL");
    if (sp->num_neg < 0)
        return eb_fail(msg, cap, GKV_EINVAL, "spec->num_neg %d is negative",
                       sp->num_neg);
    if (sp->exclude & ~(GKV_EXCLUDE_SELF | GKV_EXCLUDE_REVERSE))
        return eb_fail(msg, cap, GKV_EINVAL, "spec->exclude 0x%x has unknown "
                       "bits", sp->exclude);
    if (!(sp->exclude & GKV_EXCLUDE_REVERSE))
        return GKV_OK;
    if (sp->reverse_etype < 0 || sp->reverse_etype >= num_etypes)
        return eb_fail(msg, cap, GKV_EINVAL, "spec->reverse_etype %d: the "
                       "graph has %d edge types", sp->reverse_etype,
                       num_etypes);
    if (sp->reverse_eids == NULL && sp->reverse_etype == sp->etype)
        return eb_fail(msg, cap, GKV_EINVAL, "GKV_EXCLUDE_REVERSE needs "
                       "reverse_eids, or a reverse_etype other than the "
                       "batch's");
    if (sp->reverse_eids != NULL && sp->reverse_n < 0)
        return eb_fail(msg, cap, GKV_EINVAL, "spec->reverse_n %lld is "
                       "negative", (long long)sp->reverse_n);
    return GKV_OK;
}

int
graph__eb_stored_name(char *buf, size_t cap, const char *canon)
{
    int n = snprintf(buf, cap, "edge/%s/" GKV_PART_REVERSE_FEAT, canon);

    return n < 0 || (size_t)n >= cap ? -1 : 0;
}

gkv_err
graph__eb_no_stored(const char *canon, const char *rev_canon, char *msg,
                    size_t cap)
{
    return eb_fail(msg, cap, GKV_EINVAL, "GKV_EXCLUDE_REVERSE without "
                   "reverse_eids on a partitioned graph needs the edge "
                   "feature 'edge/%s/" GKV_PART_REVERSE_FEAT "' (partition "
                   "with --reverse-etypes %s=%s): partitioning renumbers "
                   "each edge type on its own, so edge k of '%s' is not "
                   "the reverse of edge k of '%s'; or give reverse_eids in "
                   "the new IDs (from mapping/edge-*.npy)", canon, canon,
                   rev_canon, rev_canon, canon);
}

gkv_err
graph__eb_wrong_pair(const char *canon, const char *paired, const char *given,
                     char *msg, size_t cap)
{
    return eb_fail(msg, cap, GKV_EINVAL, "spec->reverse_etype is '%s', but "
                   "'%s' was partitioned with '%s' as its reverse type (its "
                   "reverse_eid holds edge IDs of that type)", given, canon,
                   paired);
}

gkv_err
graph__eb_reverse(const gkv_edge_batch_spec *sp, const int64_t *stored,
                  int64_t *out, char *msg, size_t cap)
{
    for (size_t i = 0; i < sp->n; i++) {
        int64_t id = sp->eids[i], r = stored != NULL ? stored[i] : id;
        if (sp->reverse_eids != NULL) {
            if (id < 0 || id >= sp->reverse_n)
                return eb_fail(msg, cap, GKV_ERANGE, "positive edge eids[%zu] "
                               "= %lld is beyond reverse_eids (%lld entries)",
                               i, (long long)id, (long long)sp->reverse_n);
            r = sp->reverse_eids[id];
        }
        if (r < 0)
            return eb_fail(msg, cap, GKV_ERANGE, "the reverse of edge %lld is "
                           "%lld, not an edge ID", (long long)id,
                           (long long)r);
        out[i] = r;
    }
    return GKV_OK;
}

/* The stored reverses of spec's positive edges (held by this partition)
 * into out[0 .. n): the partitioner's reverse_eid feature. */
static gkv_err
part_reverse(gkv_sampler *s, const gkv_edge_batch_spec *spec, int64_t *out)
{
    const gkv_pbook *b = gkv_part_book(s->sg->part);
    gkv_store *st = gkv_part_store(s->sg->part);
    const char *canon = gkv_pbook_etype_name(b, spec->etype);
    char name[GKV_NAME_MAX + 1];
    gkv_tensor_desc d;
    gkv_err rc;

    int paired = gkv_pbook_reverse_etype(b, spec->etype);

    if (paired < 0 && graph__eb_stored_name(name, sizeof name, canon) == 0 &&
        gkv_tensor_info(st, NULL, name, &d) == GKV_OK)
        return s_fail(s, GKV_EINVAL, "partition config without "
                      "\"reverse_etypes\": it does not say which edge type "
                      "'%s' holds IDs of (a partition written before the "
                      "field was; partition again)", name);
    if (paired < 0 || graph__eb_stored_name(name, sizeof name, canon) != 0 ||
        (rc = gkv_tensor_info(st, NULL, name, &d)) == GKV_ENOTFOUND)
        return s_eb(s, graph__eb_no_stored(canon,
                                   gkv_pbook_etype_name(b, spec->reverse_etype),
                                   s->ebmsg, sizeof s->ebmsg));
    if (rc != GKV_OK)
        return s_fail(s, rc, "reverse edges: %s", gkv_store_errmsg(st));
    if (paired != spec->reverse_etype)
        return s_eb(s, graph__eb_wrong_pair(canon,
                                   gkv_pbook_etype_name(b, paired),
                                   gkv_pbook_etype_name(b, spec->reverse_etype),
                                   s->ebmsg, sizeof s->ebmsg));
    if (d.dtype != GKV_I64 || d.row_bytes != 8)
        return s_fail(s, GKV_ESHAPE, "tensor '%s' is not one int64 per edge",
                      name);
    if ((rc = gkv_tensor_pull(st, NULL, name, (const uint64_t *)spec->eids,
                              spec->n, out, spec->n * 8)) != GKV_OK)
        return s_fail(s, rc, "reverse edges: %s", gkv_store_errmsg(st));
    return GKV_OK;
}

static gkv_err
edge_batch_call(gkv_sampler *s, const gkv_edge_batch_spec *spec,
                const int *fanouts, int nfan, int nlayers,
                const gkv_sample_opts *opts, gkv_edge_batch *batch,
                gkv_block *blocks)
{
    const gkv_sgraph *sg = s->sg;
    size_t n, k, nneg;
    int et, st, dt;
    struct blay *L;
    gkv_err rc;

    if (batch != NULL)
        memset(batch, 0, sizeof *batch);
    if (spec == NULL || batch == NULL || blocks == NULL)
        return s_fail(s, GKV_EINVAL, "spec, batch or blocks is NULL");
    if (nlayers < 1)
        return s_fail(s, GKV_EINVAL, "nlayers %d: at least one layer",
                      nlayers);
    memset(blocks, 0, (size_t)nlayers * sizeof *blocks);
    if ((rc = s_eb(s, graph__eb_check(spec, s->net, s->ebmsg,
                                      sizeof s->ebmsg))) != GKV_OK)
        return rc;
    et = spec->etype;
    n = spec->n;
    if ((rc = fan_check(s, fanouts, nfan, nlayers)) != GKV_OK)
        return rc;
    k = (size_t)spec->num_neg;
    if (k > 0 && n > SIZE_MAX / 4 / k)
        return s_fail(s, GKV_ENOMEM, "%zu x %zu negatives: too many", n, k);
    nneg = n * k;
    if (grow(&s->pb[0], &s->pbcap[0], n, sizeof *s->pb[0]) ||
        grow(&s->pb[1], &s->pbcap[1], n, sizeof *s->pb[1]) ||
        grow(&s->pb[2], &s->pbcap[2], nneg, sizeof *s->pb[2]) ||
        grow(&s->pb[3], &s->pbcap[3], nneg, sizeof *s->pb[3]))
        return s_fail(s, GKV_ENOMEM, "out of memory for %zu pairs",
                      n + nneg);
    if ((rc = gkv_sgraph_find_edges(sg, et, spec->eids, n, s->pb[0],
                                    s->pb[1])) != GKV_OK)
        return s_fail(s, rc, "positive edges: %s", gkv_sgraph_errmsg(sg));
    if ((rc = opts_prep(s, opts, fanouts, nfan, nlayers)) != GKV_OK)
        return rc;
    if ((spec->exclude & GKV_EXCLUDE_SELF) &&
        (rc = ex_add(s, et, spec->eids, n, "the batch's edges")) != GKV_OK)
        return rc;
    if (spec->exclude & GKV_EXCLUDE_REVERSE) {
        if (grow(&s->tmpv, &s->tmpcap, n, sizeof *s->tmpv))
            return s_fail(s, GKV_ENOMEM, "out of memory for %zu reverse "
                          "edges", n);
        if (spec->reverse_eids == NULL && sg->part != NULL &&
            (rc = part_reverse(s, spec, s->tmpv)) != GKV_OK)
            return rc;
        if ((rc = s_eb(s, graph__eb_reverse(spec, spec->reverse_eids == NULL
                                            && sg->part != NULL ? s->tmpv
                                            : NULL, s->tmpv, s->ebmsg,
                                            sizeof s->ebmsg))) != GKV_OK)
            return rc;
        if ((rc = ex_add(s, spec->reverse_etype, s->tmpv, n,
                         "the reverse edges")) != GKV_OK)
            return rc;
    }
    ex_finish(s);
    if ((rc = markers_alloc(s)) != GKV_OK ||
        (rc = lay_reserve(s, nlayers)) != GKV_OK)
        return rc;
    L = &s->lay[nlayers - 1];
    st = sg->snt[et];
    dt = sg->dnt[et];
    for (int t = 0; t < s->nnt; t++) {
        L->nodes[t].num_src = L->nodes[t].num_dst = 0;
        if ((t == st || t == dt) &&
            grow(&L->ids[t], &L->idcap[t], 2 * n + nneg, sizeof *L->ids[t]))
            return s_fail(s, GKV_ENOMEM, "out of memory for %zu seeds",
                          2 * n + nneg);
    }
    for (size_t i = 0; i < n; i++) {
        s->pb[0][i] = label(s, L, st, s->pb[0][i]);
        s->pb[1][i] = label(s, L, dt, s->pb[1][i]);
    }
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < k; j++) {
            int64_t v = gkv_sample_negative(s->R.seed, et, spec->eids[i], j,
                                            sg->nn[dt]);
            s->pb[2][i * k + j] = s->pb[0][i];
            s->pb[3][i * k + j] = label(s, L, dt, v);
        }
    }
    for (int t = 0; t < s->nnt; t++)
        L->nodes[t].num_dst = L->nodes[t].num_src;
    if ((rc = blocks_run(s, fanouts, nfan, nlayers, blocks)) != GKV_OK)
        return rc;
    batch->pos_src = s->pb[0];
    batch->pos_dst = s->pb[1];
    batch->num_pos = n;
    batch->neg_src = s->pb[2];
    batch->neg_dst = s->pb[3];
    batch->num_neg = nneg;
    return GKV_OK;
}

gkv_err
gkv_sample_neighbors(gkv_sampler *s, const int64_t *const *seeds,
                     const size_t *nseeds, const int *fanout, int nfan,
                     int layer, const gkv_sample_opts *opts,
                     gkv_sample_edges *out)
{
    gkv_err rc;

    if (s == NULL)
        return GKV_EINVAL;
    call_begin(s);
    rc = neighbors_call(s, seeds, nseeds, fanout, nfan, layer, opts, out);
    call_end(s, rc);
    return rc;
}

gkv_err
graph__sample_hop(gkv_sampler *s, const int64_t *const *seeds,
                  const size_t *nseeds, const int *fanout, int nfan,
                  int layer, const gkv_sample_opts *opts,
                  const graph__wpos *wp, int64_t *const *cnt,
                  gkv_sample_edges *out)
{
    gkv_err rc = GKV_OK;

    if (s == NULL)
        return GKV_EINVAL;
    call_begin(s);
    /* zero first: an edge type the hop does not sample has no picks */
    for (int e = 0; cnt != NULL && seeds != NULL && nseeds != NULL &&
         e < s->net; e++) {
        int t = col_ntype(s->sg, e, opts != NULL ? opts->dir : GKV_DIR_IN);
        if (cnt[e] != NULL && nseeds[t] > 0)
            memset(cnt[e], 0, nseeds[t] * sizeof *cnt[e]);
    }
    for (int e = 0; wp != NULL && opts != NULL && opts->edge_w != NULL &&
         e < s->net; e++)
        if (wp[e].off != NULL && opts->edge_w[e] != NULL)
            rc = s_fail(s, GKV_EINVAL, "edge type %d has both an edge_w "
                        "array and weights by position", e);
    if (rc == GKV_OK) {
        s->wpv = wp;
        s->cntv = cnt;
        rc = neighbors_call(s, seeds, nseeds, fanout, nfan, layer, opts, out);
        s->wpv = NULL;
        s->cntv = NULL;
    }
    call_end(s, rc);
    return rc;
}

gkv_err
gkv_sample_blocks(gkv_sampler *s, const int64_t *const *seeds,
                  const size_t *nseeds, const int *fanouts, int nfan,
                  int nlayers, const gkv_sample_opts *opts, gkv_block *blocks)
{
    gkv_err rc;

    if (s == NULL)
        return GKV_EINVAL;
    call_begin(s);
    rc = blocks_call(s, seeds, nseeds, fanouts, nfan, nlayers, opts, blocks);
    call_end(s, rc);
    return rc;
}

int64_t
gkv_sample_negative(uint64_t seed, int etype, int64_t eid, uint64_t j,
                    int64_t num_dst_nodes)
{
    uint64_t bv;

    if (num_dst_nodes <= 0)
        return 0;
    bv = absorb(absorb(absorb(absorb(DOM_NEG, seed), 0), (uint64_t)etype),
                (uint64_t)eid);
    return (int64_t)below(draw(bv, j), (uint64_t)num_dst_nodes);
}

gkv_err
gkv_sample_edge_batch(gkv_sampler *s, const gkv_edge_batch_spec *spec,
                      const int *fanouts, int nfan, int nlayers,
                      const gkv_sample_opts *opts, gkv_edge_batch *batch,
                      gkv_block *blocks)
{
    gkv_err rc;

    if (s == NULL)
        return GKV_EINVAL;
    call_begin(s);
    rc = edge_batch_call(s, spec, fanouts, nfan, nlayers, opts, batch,
                         blocks);
    call_end(s, rc);
    return rc;
}
