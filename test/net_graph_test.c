/* net_graph_test.c - graph servers on loopback: a weighted R-MAT graph with
 * a node feature is partitioned (gkv_partition_write), one or two
 * gkv-server processes per partition serve it (--part-config), and the
 * client's distributed calls are compared with in-process references:
 *   - sample_blocks (in, out, with replacement, weighted, excluded edges)
 *     and sample_neighbors against gkv_sample_blocks / gkv_sample_neighbors
 *     on the whole renumbered graph, every array compared;
 *   - find_edges, in/out degrees and in_subgraph against gkv_part_* on the
 *     owning partition;
 *   - pulled node features against the feature rows through the mapping;
 *   - a heterogeneous graph (two node types, three edge types): blocks
 *     with per-type fanouts, an edge batch across types and the loader's
 *     split of one type's rows, against the same in-process references;
 *   - edge mini-batches (gkv_client_sample_edge_batch) against
 *     gkv_sample_edge_batch on the whole graph: pairs and blocks, with
 *     negatives, self and reverse exclusion, and the same errors;
 *   - bad inputs (IDs out of range, a seed another partition owns sent to
 *     the wrong server, a missing tensor, a wrong fanout count, a bad
 *     server start-up) give clear errors and the servers keep serving.
 * With CUDA built in, the GPU loader (gpu/loader.c) too: its host half
 * (blocks packed for the device, input nodes split between a cache range
 * and the servers, the pulled rows) on any machine, the whole loader
 * against the same references where a CUDA device is visible.
 * Servers are started and killed by PID (teardown reaps all of them, also
 * after a failed assertion); ports are picked per test as net_test does. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <nanomsg/nn.h>
#include <nanomsg/reqrep.h>
#include "gkvt_graph.h"
#include "gkvt_net.h"
#include "gkv.h"
#include "net/wire.h"
#ifdef GKV_HAVE_CUDA
#include "gpu/gkv_gpu.h"
#include "gpu/loader_int.h"
#endif

#define MAXPROC 12
#define FEAT_W  4            /* floats per node feature row */

struct fx {
    struct gkvt_job j;       /* first (gkvt_job_setup): the servers, of
                              * partition config j.json */
    /* the graph */
    int64_t n, m;
    float *feat;             /* n x FEAT_W, by original ID */
    int64_t *nmap;           /* original node ID -> new */
    struct gkvt_ref ref;     /* the whole graph, in new IDs */
    gkv_part *part[4];       /* opened in-process, read-only */
};

static char g_server_path[PATH_MAX + 16];
static gkv_part_method g_method = GKV_PART_RANDOM;   /* graph_make's */
static const char *const *g_extra;   /* serve()'s extra server arguments */

/* ---- servers (gkvt_net.h) ---------------------------------------------- */

/* Every server: no syncing. */
static const char *const g_opts[] = {"--nosync", NULL};

/* nserv servers on each of the graph's machines, with g_extra. */
static void
serve(struct fx *f, int nserv)
{
    gkvt_serve(&f->j, f->j.nmach, nserv, g_extra, NULL);
}

static gkv_client *
client(struct fx *f, const char *group)
{
    gkv_client_opts o = {0};

    o.timeout_ms = 20000;
    return gkvt_connect(f->j.cfg, group, 0, &o);
}

/* ---- the graph ------------------------------------------------------------ */

/* Builds an R-MAT graph (2^scale nodes, weights, a feature), partitions it
 * into nparts (with the CSR) and opens the references: the whole graph in
 * the new IDs with its sampler, and every partition in-process. */
static void
graph_make(struct fx *f, int scale, int nparts)
{
    gkv_rmat_spec sp = {0};
    gkv_part_spec spec = {0};
    gkv_part_feat ft = {0};
    gkv_graph *g;
    gkv_coo coo;
    const gkv_pbook *b;
    char out[4000], msg[512];
    int64_t *src, *dst, *emap, *S, *D;
    float *w, *W;
    uint64_t r = 99;

    f->n = (int64_t)1 << scale;
    f->m = f->n * 8;
    f->j.nmach = nparts;
    sp.scale = scale;
    sp.edge_factor = 8;
    sp.seed = 2026;
    src = malloc((size_t)f->m * 8);
    dst = malloc((size_t)f->m * 8);
    w = malloc((size_t)f->m * 4);
    f->feat = malloc((size_t)f->n * FEAT_W * 4);
    assert_true(src != NULL && dst != NULL && w != NULL && f->feat != NULL);
    GKVT_OK(gkv_rmat_edges(&sp, 0, f->m, src, dst));
    GKVT_OK(gkv_graph_new_homo(&g, f->n));
    for (int64_t e = 0; e < f->m; e++)   /* weights 0..3, a quarter zero */
        w[e] = (float)(tools__splitmix64(&r) % 4);
    GKVT_OK(gkv_graph_add_edges(g, 0, src, dst, w, (size_t)f->m));
    for (int64_t v = 0; v < f->n; v++)
        for (int j = 0; j < FEAT_W; j++)
            f->feat[v * FEAT_W + j] = (float)v + 0.125f * (float)j;
    ft.type = "_N";
    ft.name = "feat";
    ft.data = f->feat;
    ft.dtype = GKV_F32;
    ft.ndim = 1;
    ft.shape[0] = FEAT_W;
    ft.nrows = (uint64_t)f->n;
    snprintf(out, sizeof out, "%s/parts", f->j.dir);
    spec.name = "g";
    spec.method = g_method;
    spec.num_parts = nparts;
    spec.seed = 7;
    spec.flags = GKV_PART_CSR |
                 (g_method == GKV_PART_METIS ? GKV_PART_BALANCE_EDGES : 0);
    spec.feats = &ft;
    spec.nfeats = 1;
    if (gkv_partition_write(g, &spec, out, NULL, msg, sizeof msg) != GKV_OK)
        fail_msg("partition_write: %s", msg);
    snprintf(f->j.json, sizeof f->j.json, "%s/g.json", out);
    for (int q = 0; q < nparts; q++)
        GKVT_OK(gkv_part_open(&f->part[q], f->j.json, q, 0));
    b = gkv_part_book(f->part[0]);
    f->nmap = gkvt_read_map(gkv_pbook_node_mapping(b, 0), f->n);
    emap = gkvt_read_map(gkv_pbook_edge_mapping(b, 0), f->m);
    GKVT_OK(gkv_graph_edges(g, 0, &coo));
    S = malloc((size_t)f->m * 8);
    D = malloc((size_t)f->m * 8);
    W = malloc((size_t)f->m * 4);
    assert_true(S != NULL && D != NULL && W != NULL);
    for (int64_t e = 0; e < f->m; e++) {
        S[emap[e]] = f->nmap[coo.src[e]];
        D[emap[e]] = f->nmap[coo.dst[e]];
        W[emap[e]] = coo.w[e];
    }
    GKVT_OK(gkv_graph_new_homo(&f->ref.whole, f->n));
    GKVT_OK(gkv_graph_add_edges(f->ref.whole, 0, S, D, W, (size_t)f->m));
    gkvt_ref_sampler(&f->ref);
    gkv_graph_free(g);
    free(src);
    free(dst);
    free(w);
    free(emap);
    free(S);
    free(D);
    free(W);
}

static int
setup(void **state)
{
    /* a port clash forgets the servers it killed: slots for the next */
    return gkvt_job_setup(state, sizeof (struct fx), "netg", MAXPROC, g_opts,
                          1);
}

static int
teardown(void **state)
{
    struct fx *f = *state;
    int bad = gkvt_job_fini(&f->j);

    gkvt_ref_free(&f->ref);
    for (int q = 0; q < 4; q++)
        gkv_part_close(f->part[q]);
    free(f->feat);
    free(f->nmap);
    free(f);
    return bad;
}

/* ---- comparisons ------------------------------------------------------------- */

/* A deep copy of blocks (the sampler reuses its memory). */
struct bcopy {
    int nl;
    size_t nsrc[8], ndst[8], ne[8];
    int64_t *ids[8], *s[8], *d[8], *e[8];
};

static void
bcopy_take(struct bcopy *bc, const gkv_block *b, int nl)
{
    memset(bc, 0, sizeof *bc);
    bc->nl = nl;
    for (int i = 0; i < nl; i++) {
        size_t n = b[i].nodes[0].num_src, m = b[i].edges[0].n;

        assert_int_equal(b[i].num_ntypes, 1);
        assert_int_equal(b[i].num_etypes, 1);
        bc->nsrc[i] = n;
        bc->ndst[i] = b[i].nodes[0].num_dst;
        bc->ne[i] = m;
        bc->ids[i] = malloc(n * 8 + 8);
        bc->s[i] = malloc(m * 8 + 8);
        bc->d[i] = malloc(m * 8 + 8);
        bc->e[i] = malloc(m * 8 + 8);
        memcpy(bc->ids[i], b[i].nodes[0].ids, n * 8);
        memcpy(bc->s[i], b[i].edges[0].src, m * 8);
        memcpy(bc->d[i], b[i].edges[0].dst, m * 8);
        memcpy(bc->e[i], b[i].edges[0].eid, m * 8);
    }
}

static void
bcopy_free(struct bcopy *bc)
{
    for (int i = 0; i < bc->nl; i++) {
        free(bc->ids[i]);
        free(bc->s[i]);
        free(bc->d[i]);
        free(bc->e[i]);
    }
}

/* Array p[0..n) as host memory: p itself, or (dev: p is device memory)
 * copied into tmp. */
static const int64_t *
host_view(const int64_t *p, size_t n, int dev, int64_t *tmp)
{
    if (!dev || n == 0)
        return p;
#ifdef GKV_HAVE_CUDA
    GKVT_OK(gkv_gpu_copy(tmp, p, n * 8, NULL));
    GKVT_OK(gkv_gpu_sync(NULL));
    return tmp;
#else
    fail_msg("device arrays in a build without CUDA");
    return NULL;
#endif
}

/* Blocks cb[0 .. nl) == the copy ref, array by array (the arrays are host
 * memory, or device memory when dev); returns the number of edges
 * compared. */
static size_t
blocks_equal(const struct bcopy *ref, const gkv_block *cb, int nl, int dev)
{
    size_t edges = 0, cap = 0;
    int64_t *tmp = NULL;

    for (int i = 0; i < nl; i++) {
        if (ref->nsrc[i] > cap)
            cap = ref->nsrc[i];
        if (ref->ne[i] > cap)
            cap = ref->ne[i];
    }
    tmp = malloc(cap * 8 + 8);
    assert_non_null(tmp);
    for (int i = 0; i < nl; i++) {
        const gkv_sample_edges *e = &cb[i].edges[0];
        size_t m = ref->ne[i];

        assert_int_equal(cb[i].num_ntypes, 1);
        assert_int_equal(cb[i].num_etypes, 1);
        assert_int_equal(cb[i].nodes[0].num_src, ref->nsrc[i]);
        assert_int_equal(cb[i].nodes[0].num_dst, ref->ndst[i]);
        assert_int_equal(e->n, m);
        assert_memory_equal(host_view(cb[i].nodes[0].ids, ref->nsrc[i], dev,
                                      tmp), ref->ids[i], ref->nsrc[i] * 8);
        if (m > 0) {
            assert_memory_equal(host_view(e->src, m, dev, tmp), ref->s[i],
                                m * 8);
            assert_memory_equal(host_view(e->dst, m, dev, tmp), ref->d[i],
                                m * 8);
            assert_memory_equal(host_view(e->eid, m, dev, tmp), ref->e[i],
                                m * 8);
        }
        edges += m;
    }
    /* blocks chain: destination nodes of block i are block i+1's sources */
    for (int i = 0; i + 1 < nl; i++)
        assert_int_equal(cb[i].nodes[0].num_dst, cb[i + 1].nodes[0].num_src);
    free(tmp);
    return edges;
}

/* The in-process blocks on the whole graph, copied. */
static void
ref_blocks(struct fx *f, struct bcopy *ref, const int64_t *seeds, size_t n,
           const int *fan, int nl, const gkv_sample_opts *o)
{
    gkv_block wb[8];
    const int64_t *sv[1] = {seeds};
    size_t sn[1] = {n};

    GKVT_OK(gkv_sample_blocks(f->ref.ws, sv, sn, fan, 1, nl, o, wb));
    bcopy_take(ref, wb, nl);
}

/* Distributed blocks == in-process blocks, array by array; returns the
 * number of edges compared. */
static size_t
check_blocks(struct fx *f, gkv_client *c, const int64_t *seeds, size_t n,
             const int *fan, int nl, const gkv_sample_opts *o)
{
    gkv_block cb[8];
    struct bcopy ref;
    const int64_t *sv[1] = {seeds};
    size_t sn[1] = {n}, edges;

    ref_blocks(f, &ref, seeds, n, fan, nl, o);
    NET_OK(gkv_client_sample_blocks(c, sv, sn, fan, 1, nl, o, cb));
    edges = blocks_equal(&ref, cb, nl, 0);
    bcopy_free(&ref);
    return edges;
}

/* Distributed one hop == in-process one hop (seeds may repeat). */
static void
check_hop(struct fx *f, gkv_client *c, const int64_t *seeds, size_t n,
          int fan, int layer, const gkv_sample_opts *o)
{
    gkv_sample_edges we, ce;
    const int64_t *sv[1] = {seeds};
    size_t sn[1] = {n};
    int64_t *s, *d, *e;
    size_t m;

    GKVT_OK(gkv_sample_neighbors(f->ref.ws, sv, sn, &fan, 1, layer, o, &we));
    m = we.n;
    s = malloc(m * 8 + 8);
    d = malloc(m * 8 + 8);
    e = malloc(m * 8 + 8);
    memcpy(s, we.src, m * 8);
    memcpy(d, we.dst, m * 8);
    memcpy(e, we.eid, m * 8);
    NET_OK(gkv_client_sample_neighbors(c, sv, sn, &fan, 1, layer, o, &ce));
    assert_int_equal(ce.n, m);
    assert_true(m > 0);
    assert_memory_equal(ce.src, s, m * 8);
    assert_memory_equal(ce.dst, d, m * 8);
    assert_memory_equal(ce.eid, e, m * 8);
    free(s);
    free(d);
    free(e);
}

/* The owner of node v. */
static int
owner_of(struct fx *f, int64_t v, int edge)
{
    int32_t q;
    const gkv_pbook *b = gkv_part_book(f->part[0]);

    if (edge)
        GKVT_OK(gkv_pbook_edge_owner(b, 0, &v, 1, &q));
    else
        GKVT_OK(gkv_pbook_node_owner(b, 0, &v, 1, &q));
    return q;
}

/* find_edges, degrees, in_subgraph == gkv_part_* on the owner. */
static void
check_queries(struct fx *f, gkv_client *c, const int64_t *nodes, size_t n,
              const int64_t *eids, size_t ne)
{
    int64_t *a = malloc(ne * 8 + 8), *b = malloc(ne * 8 + 8);
    int64_t *deg = malloc(n * 8 + 8), *src, *dst, *eid;
    size_t m, at = 0;

    NET_OK(gkv_client_find_edges(c, 0, eids, ne, a, b));
    for (size_t i = 0; i < ne; i++) {
        int64_t s1, d1;
        GKVT_OK(gkv_part_find_edges(f->part[owner_of(f, eids[i], 1)], 0,
                                    &eids[i], 1, &s1, &d1));
        assert_int_equal(a[i], s1);
        assert_int_equal(b[i], d1);
    }
    NET_OK(gkv_client_in_degrees(c, 0, nodes, n, deg));
    for (size_t i = 0; i < n; i++) {
        int64_t d1;
        GKVT_OK(gkv_part_in_degrees(f->part[owner_of(f, nodes[i], 0)], 0,
                                    &nodes[i], 1, &d1));
        assert_int_equal(deg[i], d1);
    }
    NET_OK(gkv_client_out_degrees(c, 0, nodes, n, deg));
    for (size_t i = 0; i < n; i++) {
        int64_t d1;
        GKVT_OK(gkv_part_out_degrees(f->part[owner_of(f, nodes[i], 0)], 0,
                                     &nodes[i], 1, &d1));
        assert_int_equal(deg[i], d1);
    }
    NET_OK(gkv_client_in_subgraph(c, 0, nodes, n, &src, &dst, &eid, &m));
    for (size_t i = 0; i < n; i++) {
        int64_t *s1, *d1, *e1;
        size_t m1;
        GKVT_OK(gkv_part_in_subgraph(f->part[owner_of(f, nodes[i], 0)], 0,
                                     &nodes[i], 1, &s1, &d1, &e1, &m1));
        assert_true(at + m1 <= m);
        if (m1 > 0) {
            assert_memory_equal(src + at, s1, m1 * 8);
            assert_memory_equal(dst + at, d1, m1 * 8);
            assert_memory_equal(eid + at, e1, m1 * 8);
        }
        at += m1;
        gkv_free(s1);
        gkv_free(d1);
        gkv_free(e1);
    }
    assert_int_equal(at, m);
    gkv_free(src);
    gkv_free(dst);
    gkv_free(eid);
    free(a);
    free(b);
    free(deg);
}

/* inv[v]: the original ID of new node v (malloc'd). */
static int64_t *
inverse_map(const struct fx *f)
{
    int64_t *inv = malloc((size_t)f->n * 8);

    assert_non_null(inv);
    for (int64_t u = 0; u < f->n; u++)
        inv[f->nmap[u]] = u;
    return inv;
}

/* Pulled feature rows == the original rows of the nodes' old IDs. */
static void
check_features(struct fx *f, gkv_client *c, const int64_t *nodes, size_t n)
{
    int64_t *inv = inverse_map(f);
    float *rows = malloc(n * FEAT_W * 4 + 4);

    NET_OK(gkv_client_pull(c, "node/_N/feat", (const uint64_t *)nodes, n,
                           rows, n * FEAT_W * 4));
    for (size_t i = 0; i < n; i++)
        assert_memory_equal(rows + i * FEAT_W, f->feat + inv[nodes[i]] * FEAT_W,
                            FEAT_W * 4);
    free(inv);
    free(rows);
}

/* ---- tests ------------------------------------------------------------------ */

static void
test_sampling_three_parts(void **state)
{
    struct fx *f = *state;
    gkv_client *c;
    gkv_sample_opts o = {0};
    int64_t seeds[400], rep[64], eids[300], excl[200];
    const int64_t *ex[1] = {excl};
    size_t exn[1] = {200};
    int fan3[3] = {3, 5, 10}, fan2[2] = {4, 6}, fan1[1] = {-1};
    uint64_t r = 11;
    const gkv_pbook *b;

    graph_make(f, 11, 3);
    serve(f, 1);
    c = client(f, "job");
    b = gkv_client_pbook(c);
    assert_non_null(b);
    assert_int_equal(gkv_pbook_num_parts(b), 3);
    assert_int_equal(gkv_pbook_num_nodes(b, 0), f->n);
    assert_int_equal(gkv_pbook_num_edges(b, 0), f->m);
    for (size_t i = 0; i < 400; i++)        /* distinct, random order */
        seeds[i] = (int64_t)((i * 1597 + 11) % (uint64_t)f->n);
    for (size_t i = 0; i < 64; i++)         /* repeats, some in a row */
        rep[i] = seeds[(i * 7) % 13];
    rep[10] = rep[9];
    rep[11] = rep[9];
    for (size_t i = 0; i < 300; i++)
        eids[i] = (int64_t)(tools__splitmix64(&r) % (uint64_t)f->m);
    for (size_t i = 0; i < 200; i++)
        excl[i] = (int64_t)(tools__splitmix64(&r) % (uint64_t)f->m);

    o.seed = 42;
    assert_true(check_blocks(f, c, seeds, 200, fan3, 3, &o) > 1000);
    o.seed = 43;
    check_blocks(f, c, seeds, 400, fan1, 1, &o);
    o.dir = GKV_DIR_OUT;
    check_blocks(f, c, seeds, 150, fan2, 2, &o);
    o.dir = GKV_DIR_IN;
    o.flags = GKV_SAMPLE_REPLACE;
    check_blocks(f, c, seeds, 150, fan3, 3, &o);
    o.flags = GKV_SAMPLE_WEIGHTED;
    check_blocks(f, c, seeds, 150, fan2, 2, &o);
    o.flags = GKV_SAMPLE_WEIGHTED | GKV_SAMPLE_REPLACE;
    check_blocks(f, c, seeds, 150, fan2, 2, &o);
    o.flags = 0;
    o.exclude = ex;
    o.exclude_n = exn;
    check_blocks(f, c, seeds, 150, fan3, 3, &o);
    o.dir = GKV_DIR_OUT;
    check_blocks(f, c, seeds, 100, fan2, 2, &o);
    o.dir = GKV_DIR_IN;
    /* single hops, seeds repeated (also back to back) */
    check_hop(f, c, seeds, 64, 5, 0, &o);
    check_hop(f, c, rep, 64, 5, 0, &o);
    o.exclude = NULL;
    o.exclude_n = NULL;
    check_hop(f, c, rep, 64, 4, 2, &o);
    o.dir = GKV_DIR_OUT;
    o.flags = GKV_SAMPLE_REPLACE;
    check_hop(f, c, rep, 64, 3, 1, &o);

    /* every node's whole neighbourhood, three hops: about 1.2 MB of
     * results, more than the client's first 1 MiB arena chunk; the second
     * call starts from the chunks merged into one */
    {
        int fanall[3] = {-1, -1, -1};
        int64_t *all = malloc((size_t)f->n * 8);
        for (int64_t v = 0; v < f->n; v++)
            all[v] = (v * 7 + 3) % f->n;
        memset(&o, 0, sizeof o);
        o.seed = 44;
        assert_true(check_blocks(f, c, all, (size_t)f->n, fanall, 3, &o) >
                    (size_t)2 * f->m);
        o.dir = GKV_DIR_OUT;
        check_blocks(f, c, all, (size_t)f->n, fanall, 3, &o);
        free(all);
    }

    check_queries(f, c, seeds, 400, eids, 300);
    check_queries(f, c, rep, 64, eids, 10);
    check_features(f, c, seeds, 400);
    NET_OK(gkv_client_close(c));
}

/* Checks that tensor 'name' lies on partition q's store as the book's
 * range of node type 0 (edge type 0 when is_edge). */
static void
check_book_split(struct fx *f, const char *name, int is_edge)
{
    const gkv_pbook *b = gkv_part_book(f->part[0]);

    for (int q = 0; q < f->j.nmach; q++) {
        /* the partition's own handle: one per store and process */
        gkv_store *st = gkv_part_store(f->part[q]);
        gkv_tensor_desc d;
        int64_t lo, hi;
        GKVT_OK(is_edge ? gkv_pbook_edge_range(b, 0, q, &lo, &hi) :
                          gkv_pbook_node_range(b, 0, q, &lo, &hi));
        GKVT_OK(gkv_tensor_info(st, NULL, name, &d));
        if (d.lo != (uint64_t)lo || d.hi != (uint64_t)hi)
            fail_msg("'%s' on partition %d: [%llu, %llu); the book says "
                     "[%lld, %lld)", name, q, (unsigned long long)d.lo,
                     (unsigned long long)d.hi, (long long)lo, (long long)hi);
    }
}

/* gkv_client_create(machine -1) in a graph job split the rows evenly, so
 * an embedding's rows sat on other machines than their nodes (DGL splits
 * by the partition policy). Now a node/T/ or edge/E/ name, or a range
 * of exactly one type's count, follows the book. */
static void
test_create_follows_book(void **state)
{
    struct fx *f = *state;
    gkv_client *c;
    gkv_tensor_spec sp;
    const gkv_pbook *b;
    int64_t lo, hi;
    uint64_t ids[3];
    float rows[3 * 2], want[3 * 2];
    char ename[300];

    g_method = GKV_PART_METIS;           /* uneven ranges */
    graph_make(f, 10, 3);
    g_method = GKV_PART_RANDOM;
    serve(f, 1);
    c = client(f, "job");
    b = gkv_part_book(f->part[0]);
    GKVT_OK(gkv_pbook_node_range(b, 0, 1, &lo, &hi));
    if (hi - lo == f->n / 3 || hi - lo == f->n / 3 + 1)
        fail_msg("partition 1 holds [%lld, %lld): as an even split",
                 (long long)lo, (long long)hi);
    memset(&sp, 0, sizeof sp);
    sp.dtype = GKV_F32;
    sp.ndim = 1;
    sp.shape[0] = 2;
    sp.hi = (uint64_t)f->n;
    sp.init = GKV_INIT_UNIFORM;
    sp.a = -1;
    sp.b = 1;
    sp.seed = 3;
    NET_OK(gkv_client_create(c, "node/_N/emb", &sp, -1));
    check_book_split(f, "node/_N/emb", 0);
    NET_OK(gkv_client_create(c, "emb", &sp, -1));
    check_book_split(f, "emb", 0);
    /* rows land where the book says and read back through the servers */
    ids[0] = 0;
    ids[1] = (uint64_t)lo;
    ids[2] = (uint64_t)f->n - 1;
    for (int i = 0; i < 6; i++)
        want[i] = (float)i;
    NET_OK(gkv_client_push(c, "emb", ids, 3, want, sizeof want, NULL));
    NET_OK(gkv_client_pull(c, "emb", ids, 3, rows, sizeof rows));
    assert_memory_equal(rows, want, sizeof rows);
    /* edges */
    snprintf(ename, sizeof ename, "edge/%s/w", gkv_pbook_etype_name(b, 0));
    sp.hi = (uint64_t)f->m;
    NET_OK(gkv_client_create(c, ename, &sp, -1));
    check_book_split(f, ename, 1);
    /* a type's name with another range is refused; another count splits
     * evenly */
    sp.hi = (uint64_t)f->n - 1;
    assert_int_equal(gkv_client_create(c, "node/_N/bad", &sp, -1), GKV_EINVAL);
    assert_non_null(strstr(gkv_net_errmsg(), "but node type '_N' has IDs [0, 1024)"));
    /* a mistyped type, or an edge type by its relation alone, is refused
     * (was: split evenly, or by another type of the same count) */
    sp.hi = (uint64_t)f->n;
    assert_int_equal(gkv_client_create(c, "node/_n/emb2", &sp, -1), GKV_EINVAL);
    assert_non_null(strstr(gkv_net_errmsg(), "the graph has no node type '_n'"));
    assert_int_equal(gkv_client_create(c, "edge/nosuch/w2", &sp, -1), GKV_EINVAL);
    assert_non_null(strstr(gkv_net_errmsg(), "no edge type 'nosuch'"));
    sp.hi = (uint64_t)f->m;
    assert_int_equal(gkv_client_create(c, "edge/_E/w2", &sp, -1), GKV_EINVAL);
    if (strstr(gkv_net_errmsg(), "by the canonical type, 'edge/_N:_E:_N/w2'") == NULL)
        fail_msg("message: %s", gkv_net_errmsg());
    sp.hi = (uint64_t)f->n - 1;
    NET_OK(gkv_client_create(c, "other", &sp, -1));
    {
        gkv_tensor_desc d;
        GKVT_OK(gkv_tensor_info(gkv_part_store(f->part[1]), NULL, "other", &d));
        assert_int_equal(d.lo, 341);
        assert_int_equal(d.hi, 682);
    }
    NET_OK(gkv_client_close(c));
}

/* A hop whose answer would exceed a server's message limit failed ("send
 * fewer seeds"), so full-neighbour batches failed on small limits (and
 * large batches at the 1 GiB default). The server now flags such an error
 * and the client samples the hop again in smaller pieces: the blocks
 * equal in-process sampling. A seed whose own answer cannot fit still
 * fails. */
static void
test_sample_split_to_fit(void **state)
{
    struct fx *f = *state;
    const char *extra[] = {"--max-msg", "8192", NULL};
    gkv_client *c;
    gkv_sample_opts o = {0};
    int64_t *seeds;
    int fan[2] = {-1, -1}, big = 4000;
    size_t n = 600, edges;
    gkv_server_stats st0, st1;
    uint64_t before = 0;

    graph_make(f, 10, 2);
    g_extra = extra;
    serve(f, 1);
    g_extra = NULL;
    c = client(f, "job");
    seeds = malloc(n * 8);
    for (size_t i = 0; i < n; i++)
        seeds[i] = (int64_t)((i * 389 + 11) % (size_t)f->n);
    NET_OK(gkv_client_stats(c, 0, &st0));
    NET_OK(gkv_client_stats(c, 1, &st1));
    before = st0.samples + st1.samples;
    o.seed = 5;
    edges = check_blocks(f, c, seeds, n, fan, 2, &o);
    assert_true(edges > 2 * 8192 / 16);          /* more than one reply holds */
    check_hop(f, c, seeds, n, -1, 1, &o);
    o.flags = GKV_SAMPLE_REPLACE;
    fan[0] = fan[1] = 30;
    check_blocks(f, c, seeds, n, fan, 2, &o);
    NET_OK(gkv_client_stats(c, 0, &st0));
    NET_OK(gkv_client_stats(c, 1, &st1));
    /* unsplit: 4 + 2 + 4 requests */
    assert_true(st0.samples + st1.samples - before > 10);
    /* one seed with replacement and a fanout beyond the limit: no split helps */
    o.flags = GKV_SAMPLE_REPLACE;
    {
        const int64_t *sv[1] = {seeds};
        size_t sn[1] = {1};
        gkv_sample_edges out[1];
        assert_int_equal(gkv_client_sample_neighbors(c, sv, sn, &big, 1, 0, &o, out),
                         GKV_EINVAL);
        assert_non_null(strstr(gkv_net_errmsg(), "message limit"));
    }
    free(seeds);
    NET_OK(gkv_client_close(c));
}

static void
test_two_servers_per_machine(void **state)
{
    struct fx *f = *state;
    gkv_client *c;
    gkv_sample_opts o = {0};
    gkv_server_stats st;
    int64_t *all, *seeds;
    int fan[3] = {2, 4, 8};
    size_t n;

    graph_make(f, 12, 2);
    /* these servers send every SAMPLE column as i64 (the wide form a
     * graph past 2^32 IDs needs; the other tests get the u32 form) */
    setenv("GKV_SERVER_WIDE_IDS", "1", 1);
    serve(f, 2);
    unsetenv("GKV_SERVER_WIDE_IDS");
    c = client(f, "job2");
    assert_int_equal(gkv_client_nservers(c), 4);
    n = (size_t)f->n;
    all = malloc(n * 8);
    seeds = malloc(1500 * 8);
    for (size_t i = 0; i < n; i++)
        all[i] = (int64_t)((i * 2749 + 3) % n);
    for (size_t i = 0; i < 1500; i++)
        seeds[i] = all[i];
    o.seed = 7;
    /* 1500 seeds, then most of the graph: each machine's share is spread
     * over both of its servers */
    check_blocks(f, c, seeds, 1500, fan, 3, &o);
    o.flags = GKV_SAMPLE_WEIGHTED;
    check_blocks(f, c, seeds, 1500, fan, 2, &o);
    for (size_t i = 0; i < 4; i++) {
        NET_OK(gkv_client_stats(c, i, &st));
        assert_true(st.samples > 0);
        assert_true(st.sample_edges > 0);
    }
    check_queries(f, c, all, n, all, n);
    check_features(f, c, all, n);
    NET_OK(gkv_client_close(c));
    free(all);
    free(seeds);
}

/* A raw session with server (machine m, server 0). */
static int
raw_open(struct fx *f, int m, uint64_t *session)
{
    static unsigned char b[1 << 16];
    int s = nn_socket(AF_SP, NN_REQ), v = -1, to = 5000;
    char url[64], why[256];
    net_hello_rep hr;
    net_hs_req hs;
    net_hs_rep hp;
    net_hdr h = {0};
    net_wr w = {0};
    net_rd rd;
    void *rep = NULL;
    int n;

    assert_true(s >= 0);
    nn_setsockopt(s, NN_SOL_SOCKET, NN_RCVMAXSIZE, &v, sizeof v);
    nn_setsockopt(s, NN_SOL_SOCKET, NN_RCVTIMEO, &to, sizeof to);
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", f->j.base + 8 * m);
    assert_true(nn_connect(s, url) >= 0);
    h.magic = NET_MAGIC;
    h.version = NET_VERSION;
    h.type = NET_HELLO;
    h.req_id = 1;
    net__hdr_put(b, &h);
    assert_int_equal(nn_send(s, b, NET_HDR_LEN, 0), NET_HDR_LEN);
    assert_true((n = nn_recv(s, &rep, NN_MSG, 0)) > 0);
    assert_int_equal(net__hdr_check(rep, (size_t)n, &h, why, sizeof why), GKV_OK);
    net__rd_init(&rd, (unsigned char *)rep + NET_HDR_LEN, (size_t)h.len);
    assert_int_equal(net__dec_hello_rep(&rd, &hr), 0);
    assert_true(hr.id.flags & NET_ID_GRAPH);
    nn_freemsg(rep);
    memset(&hs, 0, sizeof hs);
    memcpy(hs.nonce, hr.nonce, NET_NONCE_LEN);
    snprintf(hs.group, sizeof hs.group, "raw");
    w.p = b + NET_HDR_LEN;
    w.cap = sizeof b - NET_HDR_LEN;
    net__enc_hs_req(&w, &hs);
    memset(&h, 0, sizeof h);
    h.magic = NET_MAGIC;
    h.version = NET_VERSION;
    h.type = NET_HANDSHAKE;
    h.req_id = 2;
    h.len = w.off;
    net__hdr_put(b, &h);
    assert_int_equal(nn_send(s, b, NET_HDR_LEN + w.off, 0), (int)(NET_HDR_LEN + w.off));
    assert_true((n = nn_recv(s, &rep, NN_MSG, 0)) > 0);
    assert_int_equal(net__hdr_check(rep, (size_t)n, &h, why, sizeof why), GKV_OK);
    assert_int_equal(h.status, 0);
    net__rd_init(&rd, (unsigned char *)rep + NET_HDR_LEN, (size_t)h.len);
    assert_int_equal(net__dec_hs_rep(&rd, &hp), 0);
    assert_int_equal(hp.book.part_id, (uint32_t)m);
    assert_true(hp.book.len > 0);
    net__schema_free(&hp.schema);
    nn_freemsg(rep);
    *session = hp.session;
    return s;
}

/* Sends request 'type' with the payload w wrote (b + NET_HDR_LEN); returns
 * the status and the error message (or "" on success). */
static gkv_err
raw_req(int s, unsigned char *b, uint16_t type, uint64_t session, size_t plen,
        char *msg, size_t cap)
{
    static uint64_t req = 100;
    net_hdr h = {0};
    char why[256];
    void *rep = NULL;
    net_rd rd;
    int n;
    gkv_err st;

    h.magic = NET_MAGIC;
    h.version = NET_VERSION;
    h.type = type;
    h.req_id = ++req;
    h.session = session;
    h.len = plen;
    net__hdr_put(b, &h);
    assert_int_equal(nn_send(s, b, NET_HDR_LEN + plen, 0), (int)(NET_HDR_LEN + plen));
    assert_true((n = nn_recv(s, &rep, NN_MSG, 0)) > 0);
    assert_int_equal(net__hdr_check(rep, (size_t)n, &h, why, sizeof why), GKV_OK);
    st = (gkv_err)h.status;
    msg[0] = '\0';
    if (st != GKV_OK) {
        net__rd_init(&rd, (unsigned char *)rep + NET_HDR_LEN, (size_t)h.len);
        assert_int_equal(net__dec_err(&rd, msg, cap), 0);
    }
    nn_freemsg(rep);
    return st;
}

/* ---- bad inputs: refused with the error named, the servers serve on -- */

/* Two partitions of an R-MAT graph of scale 11 served, a client of group
 * "bad", and 40 seeds of it. */
static gkv_client *
bad_start(struct fx *f, int64_t *seeds)
{
    graph_make(f, 11, 2);
    serve(f, 1);
    for (size_t i = 0; i < 40; i++)
        seeds[i] = (int64_t)(i * 37 % (uint64_t)f->n);
    return client(f, "bad");
}

/* The servers still serve after the refused requests; closes c. */
static void
bad_done(struct fx *f, gkv_client *c, const int64_t *seeds)
{
    gkv_sample_opts o = {0};
    int fan2[2] = {3, 3};

    check_hop(f, c, seeds, 40, 3, 0, &o);
    check_blocks(f, c, seeds, 40, fan2, 2, &o);
    NET_OK(gkv_client_close(c));
    for (int i = 0; i < f->j.np; i++)
        assert_true(gkvt_proc_alive(&f->j.p[i]) || gkvt_proc_wait(&f->j.p[i], 5000));
}

/* A seed or edge ID out of range: named, nothing sent. */
static void
test_bad_id_out_of_range_is_erange(void **state)
{
    struct fx *f = *state;
    gkv_sample_opts o = {0};
    gkv_sample_edges se[1];
    gkv_block blk[2];
    int64_t seeds[40], bad[3], deg[3], s1[3], d1[3];
    const int64_t *bv[1] = {bad};
    size_t bn[1] = {3};
    int fan2[2] = {3, 3}, fan[2] = {3, 3};
    char text[128];
    gkv_client *c = bad_start(f, seeds);

    bad[0] = 1;
    bad[1] = f->n + 5;
    bad[2] = 2;
    assert_int_equal(gkv_client_sample_neighbors(c, bv, bn, fan, 1, 0, &o, se),
                     GKV_ERANGE);
    snprintf(text, sizeof text, "%lld", (long long)(f->n + 5));
    assert_non_null(strstr(gkv_net_errmsg(), text));
    assert_int_equal(gkv_client_sample_blocks(c, bv, bn, fan2, 1, 2, &o, blk),
                     GKV_ERANGE);
    assert_non_null(strstr(gkv_net_errmsg(), "not a node of type 0 '_N'"));
    assert_int_equal(gkv_client_in_degrees(c, 0, bad, 3, deg), GKV_ERANGE);
    assert_non_null(strstr(gkv_net_errmsg(), text));
    bad[1] = -4;
    assert_int_equal(gkv_client_find_edges(c, 0, bad, 3, s1, d1), GKV_ERANGE);
    assert_non_null(strstr(gkv_net_errmsg(), "-4"));
    bad[1] = f->m;
    assert_int_equal(gkv_client_find_edges(c, 0, bad, 3, s1, d1), GKV_ERANGE);
    bad_done(f, c, seeds);
}

/* A bad edge type, a wrong fanout count, a bad fanout, seeds given twice
 * to sample_blocks. */
static void
test_bad_etype_fanout_or_twice_is_einval(void **state)
{
    struct fx *f = *state;
    gkv_sample_opts o = {0};
    gkv_sample_edges se[1];
    gkv_block blk[2];
    int64_t seeds[40], deg[3];
    const int64_t *sv[1] = {seeds};
    size_t sn[1] = {40};
    int fan2[2] = {3, 3}, fan[2] = {3, 3};
    gkv_client *c = bad_start(f, seeds);

    assert_int_equal(gkv_client_in_degrees(c, 3, seeds, 3, deg), GKV_EINVAL);
    assert_non_null(strstr(gkv_net_errmsg(), "edge type 3"));
    assert_int_equal(gkv_client_sample_neighbors(c, sv, sn, fan, 2, 0, &o, se),
                     GKV_EINVAL);
    assert_non_null(strstr(gkv_net_errmsg(), "nfan 2"));
    fan[0] = -2;
    assert_int_equal(gkv_client_sample_neighbors(c, sv, sn, fan, 1, 0, &o, se),
                     GKV_EINVAL);
    fan[0] = 3;
    seeds[5] = seeds[3];
    assert_int_equal(gkv_client_sample_blocks(c, sv, sn, fan2, 1, 2, &o, blk),
                     GKV_EINVAL);
    assert_non_null(strstr(gkv_net_errmsg(), "given twice"));
    seeds[5] = 5 * 37;
    bad_done(f, c, seeds);
}

/* A tensor that does not exist: ENOTFOUND; a feature ID out of range:
 * ERANGE. */
static void
test_bad_feature_tensor_or_id_is_refused(void **state)
{
    struct fx *f = *state;
    int64_t seeds[40];
    float row[FEAT_W];
    uint64_t fid = 1;
    gkv_client *c = bad_start(f, seeds);

    assert_int_equal(gkv_client_pull(c, "node/_N/nope", &fid, 1, row,
                                     sizeof row), GKV_ENOTFOUND);
    assert_non_null(strstr(gkv_net_errmsg(), "node/_N/nope"));
    fid = (uint64_t)f->n;
    assert_int_equal(gkv_client_pull(c, "node/_N/feat", &fid, 1, row,
                                     sizeof row), GKV_ERANGE);
    bad_done(f, c, seeds);
}

/* Raw requests to partition 0's server: a seed partition 1 owns (ERANGE),
 * a wrong fanout count (EINVAL), a truncated sample (EPROTO), in_degrees
 * of partition 1's node (ERANGE), edge_batch (ENOTSUP). */
static void
test_bad_raw_requests_are_refused_by_the_server(void **state)
{
    struct fx *f = *state;
    static unsigned char b[1 << 16];
    int64_t seeds[40], other = -1;
    uint64_t session;
    char msg[NET_ERRMSG_MAX + 1], text[128];
    int s;
    gkv_client *c = bad_start(f, seeds);

    s = raw_open(f, 0, &session);
    for (int64_t v = 0; v < f->n && other < 0; v++)
        if (owner_of(f, v, 0) == 1)
            other = v;
    {
        const int64_t *ov[1] = {&other};
        size_t on[1] = {1};
        int fo[2] = {3, 3};
        net_sample_enc se1 = {0};
        net_wr w = {0};

        se1.nnt = 1;
        se1.net = 1;
        se1.nfan = 1;
        se1.fanout = fo;
        se1.seeds = ov;
        se1.nseeds = on;
        w.p = b + NET_HDR_LEN;
        w.cap = sizeof b - NET_HDR_LEN;
        net__enc_sample_req(&w, &se1);
        assert_int_equal(raw_req(s, b, NET_SAMPLE, session, w.off, msg,
                                 sizeof msg), GKV_ERANGE);
        snprintf(text, sizeof text, "seed %lld", (long long)other);
        assert_non_null(strstr(msg, text));
        assert_non_null(strstr(msg, "owned by partition 1"));
        se1.nfan = 2;
        w.off = 0;
        net__enc_sample_req(&w, &se1);
        assert_int_equal(raw_req(s, b, NET_SAMPLE, session, w.off, msg,
                                 sizeof msg), GKV_EINVAL);
        assert_non_null(strstr(msg, "2 fanouts"));
        /* truncated */
        assert_int_equal(raw_req(s, b, NET_SAMPLE, session, w.off - 9, msg,
                                 sizeof msg), GKV_EPROTO);
        w.off = 0;
        net__enc_ids_req(&w, 0, &other, NULL, 1);
        assert_int_equal(raw_req(s, b, NET_IN_DEGREES, session, w.off, msg,
                                 sizeof msg), GKV_ERANGE);
        assert_non_null(strstr(msg, "partition 1"));
        assert_int_equal(raw_req(s, b, NET_EDGE_BATCH, session, 0, msg,
                                 sizeof msg), GKV_ENOTSUP);
    }
    nn_close(s);
    bad_done(f, c, seeds);
}

/* Start-up errors: an ip_config whose machine count differs from the
 * partition count, a part id beyond it, --machine not the part id. */
static void
test_server_startup(void **state)
{
    struct fx *f = *state;
    char *out = NULL, *err = NULL;
    char *noid[] = {g_server_path, "--part-config", f->j.json, "--ip-config",
                    f->j.cfg, NULL};
    char *three[] = {g_server_path, "--part-config", f->j.json, "--part-id", "0",
                     "--ip-config", f->j.cfg, NULL};
    char *mach[] = {g_server_path, "--part-config", f->j.json, "--part-id", "0",
                    "--machine", "1", "--ip-config", f->j.cfg, NULL};
    char *help[] = {g_server_path, "--help", NULL};

    graph_make(f, 8, 2);
    assert_int_equal(gkvt_run(help, NULL, 0, &out, &err, 30), 0);
    assert_non_null(strstr(out, "--part-config"));
    free(out);
    free(err);
    assert_int_equal(gkvt_run(noid, NULL, 0, NULL, &err, 30), 2);
    assert_non_null(strstr(err, "--part-id"));
    free(err);
    f->j.base = gkvt_port_base(8 * 3);
    gkvt_ipcfg_write(f->j.cfg, NULL, f->j.base, 3);
    assert_int_equal(gkvt_run(three, NULL, 0, NULL, &err, 30), 1);
    assert_non_null(strstr(err, "lists 3 machines but"));
    assert_non_null(strstr(err, "has 2 partitions"));
    free(err);
    gkvt_ipcfg_write(f->j.cfg, NULL, f->j.base, 2);
    assert_int_equal(gkvt_run(mach, NULL, 0, NULL, &err, 30), 1);
    assert_non_null(strstr(err, "machine m of the ip_config serves partition m"));
    free(err);
}

/* ---- edge mini-batches ------------------------------------------------------ */

/* The distributed edge batch == gkv_sample_edge_batch() on the whole
 * graph: the pairs and every block array. */
static void
check_edge_batch(struct fx *f, gkv_client *c, const gkv_edge_batch_spec *sp,
                 const int *fan, int nl, const gkv_sample_opts *o)
{
    gkv_edge_batch wb, cb;
    gkv_block wblk[8], cblk[8];
    struct bcopy ref;
    int64_t *pairs;
    size_t np;

    GKVT_OK(gkv_sample_edge_batch(f->ref.ws, sp, fan, 1, nl, o, &wb, wblk));
    np = 2 * wb.num_pos + 2 * wb.num_neg;
    pairs = malloc(np * 8 + 8);
    if (wb.num_pos > 0) {     /* the arrays may be NULL when empty */
        memcpy(pairs, wb.pos_src, wb.num_pos * 8);
        memcpy(pairs + wb.num_pos, wb.pos_dst, wb.num_pos * 8);
    }
    if (wb.num_neg > 0) {
        memcpy(pairs + 2 * wb.num_pos, wb.neg_src, wb.num_neg * 8);
        memcpy(pairs + 2 * wb.num_pos + wb.num_neg, wb.neg_dst,
               wb.num_neg * 8);
    }
    bcopy_take(&ref, wblk, nl);
    NET_OK(gkv_client_sample_edge_batch(c, sp, fan, 1, nl, o, &cb, cblk));
    assert_int_equal(cb.num_pos, wb.num_pos);
    assert_int_equal(cb.num_neg, wb.num_neg);
    assert_int_equal(cb.num_neg, sp->n * (size_t)sp->num_neg);
    if (cb.num_pos > 0) {
        assert_memory_equal(cb.pos_src, pairs, cb.num_pos * 8);
        assert_memory_equal(cb.pos_dst, pairs + cb.num_pos, cb.num_pos * 8);
    }
    if (cb.num_neg > 0) {
        assert_memory_equal(cb.neg_src, pairs + 2 * cb.num_pos,
                            cb.num_neg * 8);
        assert_memory_equal(cb.neg_dst, pairs + 2 * cb.num_pos + cb.num_neg,
                            cb.num_neg * 8);
    }
    blocks_equal(&ref, cblk, nl, 0);
    bcopy_free(&ref);
    free(pairs);
}

/* A bad spec fails with the same code in-process and through the servers,
 * the message naming the field. */
static void
check_edge_batch_bad(struct fx *f, gkv_client *c,
                     const gkv_edge_batch_spec *sp, const int *fan,
                     gkv_err want, const char *needle)
{
    gkv_edge_batch wb, cb;
    gkv_block wblk[2], cblk[2];

    assert_int_equal(gkv_sample_edge_batch(f->ref.ws, sp, fan, 1, 2, NULL, &wb,
                                           wblk), want);
    assert_int_equal(gkv_client_sample_edge_batch(c, sp, fan, 1, 2, NULL, &cb,
                                                  cblk), want);
    if (strstr(gkv_net_errmsg(), needle) == NULL)
        fail_msg("edge batch error '%s' does not name '%s'", gkv_net_errmsg(),
                 needle);
    assert_int_equal(cb.num_pos, 0);
}

static void
test_edge_batches(void **state)
{
    struct fx *f = *state;
    gkv_client *c;
    gkv_sample_opts o = {0};
    gkv_edge_batch_spec sp = {0};
    int64_t eids[300], *rev, extra[50], bad[2];
    const int64_t *ex[1] = {extra};
    size_t exn[1] = {50};
    int fan2[2] = {4, 8}, fan3[3] = {2, 3, 5};
    uint64_t r = 5;

    graph_make(f, 11, 2);
    serve(f, 1);
    c = client(f, "edges");
    for (size_t i = 0; i < 300; i++)
        eids[i] = (int64_t)(tools__splitmix64(&r) % (uint64_t)f->m);
    for (size_t i = 0; i < 50; i++)
        extra[i] = (int64_t)(tools__splitmix64(&r) % (uint64_t)f->m);
    rev = malloc((size_t)f->m * 8);
    for (int64_t e = 0; e < f->m; e++)       /* any map will do */
        rev[e] = (e * 7 + 3) % f->m;

    o.seed = 77;
    sp.eids = eids;
    sp.n = 200;
    check_edge_batch(f, c, &sp, fan2, 2, &o);               /* positives only */
    sp.num_neg = 3;
    sp.exclude = GKV_EXCLUDE_SELF;
    check_edge_batch(f, c, &sp, fan3, 3, &o);
    sp.n = 300;
    sp.exclude = GKV_EXCLUDE_SELF | GKV_EXCLUDE_REVERSE;
    sp.reverse_eids = rev;
    sp.reverse_n = f->m;
    o.exclude = ex;
    o.exclude_n = exn;
    o.flags = GKV_SAMPLE_WEIGHTED;
    check_edge_batch(f, c, &sp, fan2, 2, &o);
    o.flags = GKV_SAMPLE_REPLACE;
    o.dir = GKV_DIR_OUT;
    sp.num_neg = 1;
    check_edge_batch(f, c, &sp, fan2, 2, &o);
    o.dir = GKV_DIR_IN;
    o.flags = 0;
    o.exclude = NULL;
    o.exclude_n = NULL;
    sp.n = 0;                                          /* an empty batch */
    check_edge_batch(f, c, &sp, fan2, 2, &o);

    /* bad specs: the same codes as in-process, and the client goes on */
    sp.n = 10;
    sp.etype = 1;
    check_edge_batch_bad(f, c, &sp, fan2, GKV_EINVAL, "etype 1");
    sp.etype = 0;
    sp.num_neg = -1;
    check_edge_batch_bad(f, c, &sp, fan2, GKV_EINVAL, "num_neg -1");
    sp.num_neg = 2;
    sp.exclude = 0x10;
    check_edge_batch_bad(f, c, &sp, fan2, GKV_EINVAL, "exclude 0x10");
    sp.exclude = GKV_EXCLUDE_REVERSE;
    sp.reverse_eids = NULL;
    check_edge_batch_bad(f, c, &sp, fan2, GKV_EINVAL, "reverse_eids");
    sp.reverse_eids = rev;
    sp.reverse_n = 5;
    bad[0] = 3;
    bad[1] = 9;
    sp.eids = bad;
    sp.n = 2;
    check_edge_batch_bad(f, c, &sp, fan2, GKV_ERANGE, "beyond reverse_eids");
    sp.exclude = 0;
    bad[1] = f->m;
    check_edge_batch_bad(f, c, &sp, fan2, GKV_ERANGE, "");
    sp.eids = NULL;
    check_edge_batch_bad(f, c, &sp, fan2, GKV_EINVAL, "eids is NULL");
    sp.eids = eids;
    sp.n = 100;
    sp.exclude = GKV_EXCLUDE_SELF;
    check_edge_batch(f, c, &sp, fan2, 2, &o);
    NET_OK(gkv_client_close(c));
    free(rev);
}

#ifdef GKV_HAVE_CUDA
/* ---- the GPU loader ---------------------------------------------------------- */

#define GPU_OK(expr) do { gkv_err rc_ = (expr); \
    if (rc_ != GKV_OK) fail_msg("%s: %s: %s", #expr, gkv_err_name(rc_), gkv_gpu_errmsg()); \
} while (0)

/* Input row i (node ids[i]) == the original feature row of its old ID. */
static void
row_check(const struct fx *f, const int64_t *inv, const void *row, int64_t id)
{
    assert_memory_equal(row, f->feat + inv[id] * FEAT_W, FEAT_W * 4);
}

/* The loader tests' set-up: an R-MAT graph of 'scale' in two partitions
 * served by one server each, a client, the inverse node map, every node
 * in a shuffled order (seeds), and partition 0's node range (rg). */
static gkv_client *
loader_fixture(struct fx *f, int scale, int64_t **inv, int64_t **seeds,
               int64_t *rg)
{
    gkv_client *c;

    graph_make(f, scale, 2);
    serve(f, 1);
    c = client(f, "gpu");
    *inv = inverse_map(f);
    *seeds = malloc((size_t)f->n * 8);
    assert_non_null(*seeds);
    for (int64_t i = 0; i < f->n; i++)
        (*seeds)[i] = (i * 2749 + 3) % f->n;
    GKVT_OK(gkv_pbook_node_range(gkv_client_pbook(c), 0, 0, &rg[0], &rg[1]));
    assert_true(rg[0] < rg[1]);
    return c;
}

/* The host half of a host-mode loader against references: the packed
 * blocks equal the in-process blocks; each input node is marked cached
 * exactly when it lies in [lo, hi); the pulled rows, in input order, are
 * the nodes' feature rows. */
static void
ldr_check_host(struct fx *f, gkv_gpu_loader *l, const int64_t *inv,
               const int64_t *seeds, size_t n, const int *fan, int nl,
               const gkv_sample_opts *o, int64_t lo, int64_t hi)
{
    struct gpu_ldr_type *T = &l->t[0];
    const int64_t *sv[1] = {seeds}, *ids, *mi;
    size_t sn[1] = {n}, k = 0;
    struct bcopy ref;

    ref_blocks(f, &ref, seeds, n, fan, nl, o);
    GPU_OK(gpu__ldr_stage(l, sv, sn, fan, 1, nl, o));
    gpu__ldr_point(l, l->pack);
    assert_true(blocks_equal(&ref, l->blocks, nl, 0) > 0);
    if (T->rb == 0) {              /* blocks only */
        assert_int_equal(T->n, 0);
        assert_int_equal(l->rows_cached + l->rows_pulled, 0);
        bcopy_free(&ref);
        return;
    }
    assert_int_equal(T->n, ref.nsrc[0]);
    ids = l->blocks[0].nodes[0].ids;
    mi = hi > lo ? (const int64_t *)(l->pack + T->miss_off) : NULL;
    for (size_t i = 0; i < T->n; i++) {
        int cached = ids[i] >= lo && ids[i] < hi;
        if (mi != NULL)
            assert_int_equal(mi[i], cached ? -1 : (int64_t)k);
        if (!cached)
            row_check(f, inv, l->stage + T->stage_off + k++ * FEAT_W * 4,
                      ids[i]);
    }
    assert_int_equal(T->nmiss, k);
    assert_int_equal(l->rows_pulled, k);
    assert_int_equal(l->rows_cached, T->n - k);
    bcopy_free(&ref);
}

/* The example trainer with --device 0 --gpu-cache-mb 1 against these
 * servers: three batches with some input rows from the GPU cache, or
 * without a device a clean failure saying so. */
static void
trainer_on_gpu(struct fx *f)
{
    char prog[4096];
#ifdef GKVT_GPU_EMU
    snprintf(prog, sizeof prog, "%s", gkvt_prog("emu/gkv-example-train"));
#else
    snprintf(prog, sizeof prog, "%s", gkvt_prog("gkv-example-train"));
#endif
    char *argv[] = {prog, "--device", "0",
                    "--gpu-cache-mb", "1", "--batch", "256", "--max-batches",
                    "3", NULL};
    char *out = NULL, *err = NULL;
    int code;

    setenv("GKV_IP_CONFIG", f->j.cfg, 1);
    setenv("GKV_PART_CONFIG", f->j.json, 1);
    setenv("GKV_MACHINE", "0", 1);
    setenv("GKV_GROUP", "gputrain", 1);
    code = gkvt_run(argv, NULL, 0, &out, &err, 120);
    unsetenv("GKV_IP_CONFIG");
    unsetenv("GKV_PART_CONFIG");
    unsetenv("GKV_MACHINE");
    unsetenv("GKV_GROUP");
    if (gkv_gpu_available(NULL, NULL, 0) != GKV_OK) {
        gkvt_gpu_missing(gkv_gpu_errmsg());
        if (code != 1 || strstr(err, "--device 0: no CUDA device") == NULL)
            fail_msg("trainer without a GPU: exit %d\n%s%s", code, out, err);
    } else if (code != 0 || strstr(out, "input rows from the GPU cache") ==
               NULL || strstr(out, "in device memory") == NULL) {
        fail_msg("trainer on GPU 0: exit %d\n%s%s", code, out, err);
    }
    free(out);
    free(err);
}

static void
test_gpu_loader_host(void **state)
{
    struct fx *f = *state;
    gkv_client *c;
    gkv_gpu_loader *l = NULL;
    gkv_gpu_loader_opts lo = {0};
    gkv_sample_opts o = {0};
    gkv_gpu_batch bt;
    int64_t rg[2], none[2] = {0, 0}, *inv, *seeds, bad = -1;
    const int64_t *bv[1] = {&bad};
    size_t bn[1] = {1};
    int fan2[2] = {5, 10}, fan3[3] = {3, 4, 6}, fan1[1] = {-1};
    gkv_err rc;

    c = loader_fixture(f, 11, &inv, &seeds, rg);

    /* the cache holds partition 0's rows: the rest are pulled */
    lo.feat = "feat";
    GPU_OK(gpu__ldr_new(&l, c, &lo, rg));
    assert_int_equal(l->t[0].rb, FEAT_W * 4);
    o.seed = 5;
    ldr_check_host(f, l, inv, seeds, 256, fan2, 2, &o, rg[0], rg[1]);
    assert_true(l->rows_cached > 0);
    assert_true(l->rows_pulled > 0);
    /* bigger, then smaller batches: the buffers grow and are reused */
    ldr_check_host(f, l, inv, seeds, 1500, fan3, 3, &o, rg[0], rg[1]);
    ldr_check_host(f, l, inv, seeds + 7, 16, fan1, 1, &o, rg[0], rg[1]);
    o.flags = GKV_SAMPLE_WEIGHTED | GKV_SAMPLE_REPLACE;
    ldr_check_host(f, l, inv, seeds, 300, fan2, 2, &o, rg[0], rg[1]);
    o.flags = 0;
    /* bad calls fail with the step named and leave the loader usable */
    assert_int_equal(gpu__ldr_stage(l, bv, bn, fan1, 1, 0, &o), GKV_EINVAL);
    assert_non_null(strstr(gkv_gpu_errmsg(), "0 layers"));
    assert_int_equal(gpu__ldr_stage(l, bv, bn, fan1, 1, 17, &o), GKV_EINVAL);
    bad = f->n;
    assert_int_equal(gpu__ldr_stage(l, bv, bn, fan1, 1, 1, &o), GKV_ERANGE);
    assert_non_null(strstr(gkv_gpu_errmsg(), "sampling blocks through the "
                           "servers"));
    bad = -3;
    assert_int_equal(gpu__ldr_stage(l, bv, bn, fan1, 1, 1, &o), GKV_ERANGE);
    ldr_check_host(f, l, inv, seeds + 3, 200, fan2, 2, &o, rg[0], rg[1]);
    /* a host-mode loader has no device half */
    assert_int_equal(gkv_gpu_loader_next(l, bv, bn, fan1, 1, 1, &o, &bt,
                                         NULL), GKV_EINVAL);
    gkv_gpu_loader_free(l);

    /* no cache: every input row is pulled */
    GPU_OK(gpu__ldr_new(&l, c, &lo, none));
    ldr_check_host(f, l, inv, seeds, 500, fan2, 2, &o, 0, 0);
    assert_int_equal(l->rows_cached, 0);
    gkv_gpu_loader_free(l);
    /* no feature: blocks only */
    lo.feat = NULL;
    GPU_OK(gpu__ldr_new(&l, c, &lo, none));
    ldr_check_host(f, l, inv, seeds, 100, fan3, 3, &o, 0, 0);
    gkv_gpu_loader_free(l);

    /* bad loaders */
    lo.feat = "nosuch";
    l = (gkv_gpu_loader *)&lo;
    assert_int_equal(gpu__ldr_new(&l, c, &lo, rg), GKV_ENOTFOUND);
    assert_null(l);
    assert_non_null(strstr(gkv_gpu_errmsg(), "node/<ntype>/nosuch"));
    lo.feat = "node/_N/feat";
    assert_int_equal(gpu__ldr_new(&l, c, &lo, rg), GKV_EINVAL);
    assert_non_null(strstr(gkv_gpu_errmsg(), "'node/_N/feat'"));
    lo.feat = "";
    assert_int_equal(gpu__ldr_new(&l, c, &lo, rg), GKV_EINVAL);
    lo.feat = "feat";
    lo.device = -1;
    assert_int_equal(gkv_gpu_loader_new(&l, c, &lo), GKV_EINVAL);
    lo.device = 0;
    assert_int_equal(gkv_gpu_loader_new(NULL, c, &lo), GKV_EINVAL);
    assert_int_equal(gkv_gpu_loader_new(&l, NULL, &lo), GKV_EINVAL);
    assert_null(l);
    assert_int_equal(gkv_gpu_loader_next(NULL, bv, bn, fan1, 1, 1, &o, &bt,
                                         NULL), GKV_EINVAL);
    rc = gkv_gpu_loader_new(&l, c, &lo);
    if (gkv_gpu_available(NULL, NULL, 0) != GKV_OK) {
        gkvt_gpu_missing(gkv_gpu_errmsg());
        assert_int_equal(rc, GKV_ENOTSUP);
        assert_null(l);
        assert_non_null(strstr(gkv_gpu_errmsg(), "no CUDA device"));
    } else {
        GPU_OK(rc);
        gkv_gpu_loader_free(l);
    }
    trainer_on_gpu(f);
    NET_OK(gkv_client_close(c));
    free(seeds);
    free(inv);
}

/* One batch through a device loader against the references: the blocks
 * array by array (copied back), every input row byte for byte. */
static void
ldr_check_dev(struct fx *f, gkv_gpu_loader *l, const int64_t *inv,
              const int64_t *seeds, size_t n, const int *fan, int nl,
              const gkv_sample_opts *o, int cached)
{
    const int64_t *sv[1] = {seeds};
    size_t sn[1] = {n}, ni;
    struct bcopy ref;
    gkv_gpu_batch bt;
    char *rows;

    ref_blocks(f, &ref, seeds, n, fan, nl, o);
    GPU_OK(gkv_gpu_loader_next(l, sv, sn, fan, 1, nl, o, &bt, NULL));
    assert_int_equal(bt.nlayers, nl);
    assert_true(blocks_equal(&ref, bt.blocks, nl, 1) > 0);
    ni = ref.nsrc[0];
    assert_int_equal(bt.row_bytes[0], FEAT_W * 4);
    assert_non_null(bt.feat_dev[0]);
    assert_int_equal(bt.rows_cached + bt.rows_pulled, ni);
    if (cached)
        assert_true(bt.rows_cached > 0 && bt.rows_pulled > 0);
    else
        assert_int_equal(bt.rows_cached, 0);
    rows = malloc(ni * FEAT_W * 4);
    GPU_OK(gkv_gpu_copy(rows, bt.feat_dev[0], ni * FEAT_W * 4, NULL));
    GPU_OK(gkv_gpu_sync(NULL));
    for (size_t i = 0; i < ni; i++)
        row_check(f, inv, rows + i * FEAT_W * 4, ref.ids[0][i]);
    free(rows);
    bcopy_free(&ref);
}

static void
test_gpu_loader_device(void **state)
{
    struct fx *f = *state;
    gkv_client *c;
    gkv_gpu_loader *l = NULL;
    gkv_gpu_loader_opts lo = {0};
    gkv_gpu_feat_opts fo = {0};
    gkv_gpu_feat *fc = NULL;
    gkv_gpu_feat *caches[1];
    gkv_sample_opts o = {0};
    int64_t *inv, *seeds, rg[2];
    int fan2[2] = {10, 15}, fan3[3] = {5, 10, 15};

    if (gkv_gpu_available(NULL, NULL, 0) != GKV_OK)
        gkvt_gpu_skip(gkv_gpu_errmsg());
    c = loader_fixture(f, 12, &inv, &seeds, rg);
    /* partition 0's rows, half of them in device memory */
    fo.budget_bytes = (size_t)(rg[1] - rg[0]) / 2 * FEAT_W * 4;
    GPU_OK(gkv_gpu_feat_open(&fc, gkv_part_store(f->part[0]), "node/_N/feat",
                             &fo));
    caches[0] = fc;
    lo.feat = "feat";
    lo.cache = caches;
    GPU_OK(gkv_gpu_loader_new(&l, c, &lo));
    o.seed = 9;
    ldr_check_dev(f, l, inv, seeds, 512, fan2, 2, &o, 1);
    ldr_check_dev(f, l, inv, seeds + 100, 2000, fan3, 3, &o, 1);
    ldr_check_dev(f, l, inv, seeds + 5, 64, fan2, 2, &o, 1);
    o.flags = GKV_SAMPLE_WEIGHTED;
    ldr_check_dev(f, l, inv, seeds, 700, fan2, 2, &o, 1);
#ifdef GKVT_GPU_EMU
    {
        /* a new loader's first batch finds the device out of memory
         * (GKV_GPU_EMU_MEM caps the emulated one): the call fails naming
         * its step, and the loader works once there is room */
        const int64_t *sv[1] = {seeds};
        size_t sn[1] = {300};
        gkv_gpu_batch bt;
        gkv_gpu_loader *l2;
        GPU_OK(gkv_gpu_loader_new(&l2, c, &lo));
        setenv("GKV_GPU_EMU_MEM", "1", 1);
        assert_int_equal(gkv_gpu_loader_next(l2, sv, sn, fan2, 1, 2, &o, &bt,
                                             NULL), GKV_ENOMEM);
        print_message("out of device memory: %s\n", gkv_gpu_errmsg());
        assert_non_null(strstr(gkv_gpu_errmsg(), "device"));
        unsetenv("GKV_GPU_EMU_MEM");
        ldr_check_dev(f, l2, inv, seeds, 300, fan2, 2, &o, 1);
        gkv_gpu_loader_free(l2);
    }
#endif
    gkv_gpu_loader_free(l);
    /* without a cache */
    lo.cache = NULL;
    GPU_OK(gkv_gpu_loader_new(&l, c, &lo));
    ldr_check_dev(f, l, inv, seeds, 900, fan2, 2, &o, 0);
    gkv_gpu_loader_free(l);
    gkv_gpu_feat_close(fc);
    NET_OK(gkv_client_close(c));
    free(seeds);
    free(inv);
}
#endif /* GKV_HAVE_CUDA */

/* ---- a heterogeneous graph ----------------------------------------------------- */

#define HN_USER GKVT_UI_USERS  /* users (type 0, with the feature) */
#define HN_ITEM GKVT_UI_ITEMS  /* items (type 1, no feature) */

/* users follow users, users click items, items are clicked by users (the
 * reverses of the clicks, edge i of each); user features as f->feat with
 * f->n users. Partitioned in two (random, with the CSR), served, and the
 * whole graph rebuilt in the new IDs for the references. */
static void
hetero_make(struct fx *f)
{
    gkv_graph *g = gkvt_ui_graph(31, 0);
    gkv_part_feat ft = {0};
    int64_t *nmap[2];

    f->n = HN_USER;
    f->j.nmach = 2;
    f->feat = malloc((size_t)HN_USER * FEAT_W * 4);
    assert_non_null(f->feat);
    for (int64_t v = 0; v < HN_USER; v++)
        for (int j = 0; j < FEAT_W; j++)
            f->feat[v * FEAT_W + j] = (float)v - 0.25f * (float)j;
    ft.type = "user";
    ft.name = "feat";
    ft.data = f->feat;
    ft.dtype = GKV_F32;
    ft.ndim = 1;
    ft.shape[0] = FEAT_W;
    ft.nrows = HN_USER;
    gkvt_partition(g, f->j.dir, "hparts", "h", 2, 3, &ft, 1, f->j.json,
                   sizeof f->j.json);
    for (int q = 0; q < 2; q++)
        GKVT_OK(gkv_part_open(&f->part[q], f->j.json, q, 0));
    /* the whole graph in the new IDs, for the references */
    f->ref.whole = gkvt_graph_renumber(g, gkv_part_book(f->part[0]), NULL,
                                       nmap);
    f->ref.rev = gkvt_ui_reverse(gkv_part_book(f->part[0]));
    f->nmap = nmap[0];
    gkvt_ref_sampler(&f->ref);
    gkv_graph_free(g);
    free(nmap[1]);
}

/* Blocks a and b (host memory) hold the same arrays, type by type. */
static void
hblocks_equal(const gkv_block *a, const gkv_block *b, int nl, int dev)
{
    size_t cap = 1;
    int64_t *tmp;

    for (int i = 0; i < nl; i++) {
        for (int t = 0; t < a[i].num_ntypes; t++)
            if (a[i].nodes[t].num_src > cap)
                cap = a[i].nodes[t].num_src;
        for (int e = 0; e < a[i].num_etypes; e++)
            if (a[i].edges[e].n > cap)
                cap = a[i].edges[e].n;
    }
    tmp = malloc(cap * 8);
    assert_non_null(tmp);
    for (int i = 0; i < nl; i++) {
        assert_int_equal(a[i].num_ntypes, b[i].num_ntypes);
        assert_int_equal(a[i].num_etypes, b[i].num_etypes);
        for (int t = 0; t < a[i].num_ntypes; t++) {
            const gkv_block_nodes *x = &a[i].nodes[t], *y = &b[i].nodes[t];
            assert_int_equal(x->num_src, y->num_src);
            assert_int_equal(x->num_dst, y->num_dst);
            if (x->num_src > 0)
                assert_memory_equal(x->ids, host_view(y->ids, x->num_src,
                                                      dev, tmp),
                                    x->num_src * 8);
        }
        for (int e = 0; e < a[i].num_etypes; e++) {
            const gkv_sample_edges *x = &a[i].edges[e], *y = &b[i].edges[e];
            assert_int_equal(x->n, y->n);
            if (x->n > 0) {
                assert_memory_equal(x->src, host_view(y->src, x->n, dev, tmp),
                                    x->n * 8);
                assert_memory_equal(x->dst, host_view(y->dst, x->n, dev, tmp),
                                    x->n * 8);
                assert_memory_equal(x->eid, host_view(y->eid, x->n, dev, tmp),
                                    x->n * 8);
            }
        }
    }
    free(tmp);
}

static void
test_hetero(void **state)
{
    struct fx *f = *state;
    gkv_client *c;
    gkv_sample_opts o = {0};
    gkv_block wb[3], cb[3];
    gkv_edge_batch web, ceb;
    gkv_edge_batch_spec sp = {0};
    int64_t us[200], is[60], eids[150];
    const int64_t *seeds[2] = {us, is};
    size_t ns[2] = {200, 60}, edges = 0;
    int fan[3 * 3] = {2, 3, 1, 4, 2, 3, 5, 5, 5};
    uint64_t r = 17;

    hetero_make(f);
    serve(f, 1);
    c = client(f, "hetero");
    assert_int_equal(gkv_pbook_num_ntypes(gkv_client_pbook(c)), 2);
    assert_int_equal(gkv_pbook_num_etypes(gkv_client_pbook(c)), 3);
    {   /* a plain name whose row count two types share (clicks and
         * clicked_by): no book to follow, an even split */
        gkv_tensor_spec as = {.dtype = GKV_F32, .ndim = 1, .shape = {2},
                              .lo = 0, .hi = GKVT_UI_CLICKS};
        gkv_tensor_desc d;

        NET_OK(gkv_client_create(c, "amb", &as, -1));
        for (int q = 0; q < 2; q++) {
            GKVT_OK(gkv_tensor_info(gkv_part_store(f->part[q]), NULL, "amb",
                                    &d));
            assert_int_equal(d.lo, (uint64_t)q * GKVT_UI_CLICKS / 2);
            assert_int_equal(d.hi, (uint64_t)(q + 1) * GKVT_UI_CLICKS / 2);
        }
        NET_OK(gkv_client_delete(c, "amb"));
    }
    for (int i = 0; i < 200; i++)
        us[i] = (i * 389 + 5) % HN_USER;
    for (int i = 0; i < 60; i++)
        is[i] = (i * 97 + 1) % HN_ITEM;
    for (int i = 0; i < 150; i++)
        eids[i] = (int64_t)(tools__splitmix64(&r) % (uint64_t)(4 * HN_USER));

    /* blocks, per-etype fanouts, in and out */
    o.seed = 8;
    NET_OK(gkv_client_sample_blocks(c, seeds, ns, fan, 3, 3, &o, cb));
    GKVT_OK(gkv_sample_blocks(f->ref.ws, seeds, ns, fan, 3, 3, &o, wb));
    hblocks_equal(wb, cb, 3, 0);
    for (int e = 0; e < 3; e++)
        edges += cb[0].edges[e].n;
    assert_true(edges > 0);
    o.dir = GKV_DIR_OUT;
    NET_OK(gkv_client_sample_blocks(c, seeds, ns, fan, 3, 2, &o, cb));
    GKVT_OK(gkv_sample_blocks(f->ref.ws, seeds, ns, fan, 3, 2, &o, wb));
    hblocks_equal(wb, cb, 2, 0);
    o.dir = GKV_DIR_IN;

    /* an edge batch across types (user -> item), reverses excluded */
    sp.etype = 1;
    sp.eids = eids;
    sp.n = 150;
    sp.num_neg = 2;
    sp.exclude = GKV_EXCLUDE_SELF | GKV_EXCLUDE_REVERSE;
    sp.reverse_etype = 2;
    /* the servers read each click's reverse from the partitions' stored
     * reverse_eid (partitioning renumbered clicks and clicked_by apart:
     * click k's reverse is no longer clicked_by k); the reference on the
     * whole graph is given them */
    NET_OK(gkv_client_sample_edge_batch(c, &sp, fan, 3, 2, &o, &ceb, cb));
    sp.reverse_eids = f->ref.rev;
    sp.reverse_n = GKVT_UI_CLICKS;
    GKVT_OK(gkv_sample_edge_batch(f->ref.ws, &sp, fan, 3, 2, &o, &web, wb));
    hblocks_equal(wb, cb, 2, 0);
    /* no block holds a positive click's reverse */
    for (int l = 0; l < 2; l++)
        for (size_t k = 0; k < cb[l].edges[2].n; k++)
            for (int i = 0; i < 150; i++)
                assert_true(cb[l].edges[2].eid[k] != f->ref.rev[eids[i]]);
    /* the stored reverses are clicked_by's: another reverse type is
     * refused, not excluded by the wrong IDs */
    sp.reverse_eids = NULL;
    sp.reverse_etype = 0;
    assert_int_equal(gkv_client_sample_edge_batch(c, &sp, fan, 3, 2, &o, &ceb,
                                                  cb), GKV_EINVAL);
    assert_non_null(strstr(gkv_net_errmsg(), "was partitioned with "
                           "'item:clicked_by:user' as its reverse type"));
    sp.reverse_etype = 2;
    NET_OK(gkv_client_sample_edge_batch(c, &sp, fan, 3, 2, &o, &ceb, cb));
    hblocks_equal(wb, cb, 2, 0);
    assert_int_equal(ceb.num_pos, 150);
    assert_int_equal(ceb.num_neg, 300);
    assert_memory_equal(ceb.pos_src, web.pos_src, 150 * 8);
    assert_memory_equal(ceb.pos_dst, web.pos_dst, 150 * 8);
    assert_memory_equal(ceb.neg_src, web.neg_src, 300 * 8);
    assert_memory_equal(ceb.neg_dst, web.neg_dst, 300 * 8);
    /* the seeds: users then items, first appearance */
    assert_int_equal(cb[1].nodes[0].num_dst, wb[1].nodes[0].num_dst);
    assert_true(cb[1].nodes[1].num_dst > 0);
#ifdef GKV_HAVE_CUDA
    {
        /* the loader's host half: user rows (the only type with the
         * feature), the cache holding partition 0's users */
        gkv_gpu_loader *l;
        gkv_gpu_loader_opts lo = {0};
        int64_t rg[4] = {0, 0, 0, 0}, *inv = inverse_map(f);
        const int64_t *ids, *mi;
        size_t k = 0;

        GKVT_OK(gkv_pbook_node_range(gkv_client_pbook(c), 0, 0, &rg[0],
                                     &rg[1]));
        lo.feat = "feat";
        GPU_OK(gpu__ldr_new(&l, c, &lo, rg));
        assert_int_equal(l->t[0].rb, FEAT_W * 4);
        assert_int_equal(l->t[1].rb, 0);
        GPU_OK(gpu__ldr_stage(l, seeds, ns, fan, 3, 2, &o));
        gpu__ldr_point(l, l->pack);
        GKVT_OK(gkv_sample_blocks(f->ref.ws, seeds, ns, fan, 3, 2, &o, wb));
        hblocks_equal(wb, l->blocks, 2, 0);
        assert_int_equal(l->t[0].n, wb[0].nodes[0].num_src);
        assert_int_equal(l->t[1].n, 0);
        ids = l->blocks[0].nodes[0].ids;
        mi = (const int64_t *)(l->pack + l->t[0].miss_off);
        for (size_t i = 0; i < l->t[0].n; i++) {
            if (ids[i] >= rg[0] && ids[i] < rg[1]) {
                assert_int_equal(mi[i], -1);
            } else {
                assert_int_equal(mi[i], (int64_t)k);
                row_check(f, inv, l->stage + l->t[0].stage_off +
                          k++ * FEAT_W * 4, ids[i]);
            }
        }
        assert_true(k > 0 && k < l->t[0].n);
        gkv_gpu_loader_free(l);
        /* the device half, where there is a device: the same blocks in
         * device memory, every user row pulled, no rows for items */
        if (gkv_gpu_available(NULL, NULL, 0) == GKV_OK) {
            gkv_gpu_batch bt;
            size_t nu = wb[0].nodes[0].num_src;
            char *rows = malloc(nu * FEAT_W * 4 + 1);
            GPU_OK(gkv_gpu_loader_new(&l, c, &lo));
            GPU_OK(gkv_gpu_loader_next(l, seeds, ns, fan, 3, 2, &o, &bt,
                                       NULL));
            hblocks_equal(wb, bt.blocks, 2, 1);
            assert_int_equal(bt.rows_pulled, nu);
            assert_int_equal(bt.rows_cached, 0);
            assert_int_equal(bt.row_bytes[0], FEAT_W * 4);
            assert_null(bt.feat_dev[1]);
            GPU_OK(gkv_gpu_copy(rows, bt.feat_dev[0], nu * FEAT_W * 4, NULL));
            GPU_OK(gkv_gpu_sync(NULL));
            for (size_t i = 0; i < nu; i++)
                row_check(f, inv, rows + i * FEAT_W * 4,
                          wb[0].nodes[0].ids[i]);
            free(rows);
            gkv_gpu_loader_free(l);
        }
        free(inv);
    }
#endif
    NET_OK(gkv_client_close(c));
}

static void
find_programs(void)
{
    snprintf(g_server_path, sizeof g_server_path, "%s", gkvt_prog("gkv-server"));
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int
main(void)
{
    const struct CMUnitTest tests[] = {
#ifndef GKVT_GPU_EMU     /* the emulated-GPU build runs the GPU tests only */
        T(test_server_startup),
        T(test_sampling_three_parts),
        T(test_two_servers_per_machine),
        T(test_create_follows_book),
        T(test_sample_split_to_fit),
        T(test_bad_id_out_of_range_is_erange),
        T(test_bad_etype_fanout_or_twice_is_einval),
        T(test_bad_feature_tensor_or_id_is_refused),
        T(test_bad_raw_requests_are_refused_by_the_server),
        T(test_edge_batches),
#endif
        /* in the emulated-GPU build too: its end checks the GPU loader on
         * two node types */
        T(test_hetero),
#ifdef GKV_HAVE_CUDA
        T(test_gpu_loader_host),
        T(test_gpu_loader_device),
#endif
    };

    int rc;

    signal(SIGPIPE, SIG_IGN);
    find_programs();
    rc = cmocka_run_group_tests_name("net_graph", tests, NULL, NULL);
#ifdef GKVT_GPU_EMU
    rc = gkvt_emu_exit("net_graph_emu_test", rc);  /* nothing left allocated */
#endif
    return rc;
}
