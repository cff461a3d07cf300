/* net_prob_test.c - sampling probabilities from stored edge features
 * (gkv_sample_opts.edge_w_feat, DGL's sample_neighbors(prob=, mask=)).
 *
 * A heterogeneous graph (users follow users, users click items, items are
 * clicked by users) with edge features of several dtypes is partitioned in
 * two and served by gkv-server processes on loopback (started and killed
 * by PID). Checked:
 *   - client blocks, hops and edge batches with edge_w_feat equal, byte for
 *     byte, gkv_sample_blocks / _neighbors / _edge_batch in-process on the
 *     whole graph given the same values as edge_w arrays (f32, f64, f16,
 *     i32 and a u8 mask; uniform and weighted etypes mixed; with and
 *     without replacement; several fanouts), and differ from uniform;
 *   - a mask feature: no edge whose mask is 0 is ever sampled, though the
 *     seeds have such edges;
 *   - a push to the feature is seen by the next sample (the server's cache
 *     is invalidated), also for a feature in small chunks changed in a few
 *     of them, for one in the servers' write-back mode, and under
 *     concurrent samplers while pushes go on;
 *   - out-edges (GKV_DIR_OUT), whose weights the client pulls from the
 *     edges' owners and sends with the seeds: blocks, hops with repeated
 *     seeds and edge batches equal in-process edge_w sampling outwards; a
 *     mask holds; one edge another machine owns, given all of a user's
 *     weight by a push, is every pick; a negative weight there is named;
 *   - errors: a missing feature, a negative weight pushed, wide rows, bad
 *     names ('#', too long, empty), GKV_SAMPLE_WEIGHTED with a feature
 *     (in- and out-edges), names in-process;
 *   - edge_w arrays through the client (the in-process options as they
 *     are): blocks, hops and edge batches, in- and out-edges, equal
 *     in-process; beside an in-edge feature; edge_w_lo; an edge without
 *     an entry (GKV_ERANGE), a negative value, no lengths, with
 *     GKV_SAMPLE_WEIGHTED or a feature for the same type (GKV_EINVAL);
 *   - in-process weights by position (graph__sample_hop) equal edge_w,
 *     and a wrong count or a negative weight is refused;
 *   - in-process: edge_w_lo (a partition's weights from its first edge)
 *     equals the whole array, and an edge outside is GKV_ERANGE;
 *   - the SAMPLE codec: names and weights by position round-trip; bad
 *     names, counts that do not sum to the weights and truncation are
 *     refused on decode. */
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "gkvt_graph.h"
#include "gkvt_net.h"
#include "gkv.h"
#include "net/wire.h"
#include "graph/graph_seam.h"       /* graph__sample_hop */

#define MAXPROC 8
#define NU      GKVT_UI_USERS    /* users (type 0) */
#define NI      GKVT_UI_ITEMS    /* items (type 1) */
#define NE0     GKVT_UI_FOLLOWS  /* follows */
#define NE1     GKVT_UI_CLICKS   /* clicks, and their reverses */
#define NFEAT   8

struct fx {
    struct gkvt_job j;        /* first (gkvt_job_setup): the servers, of
                               * partition config j.json */
    int64_t ne[3];
    int64_t *emap[3];         /* original edge ID -> new */
    struct gkvt_efeat ft[NFEAT];
    int nft;
    struct gkvt_ref ref;     /* the whole graph, in new IDs */
    gkv_part *part[2];
};

/* ---- servers (gkvt_net.h) ---------------------------------------------- */

/* Every server: three threads, no syncing. */
static const char *const g_opts[] = {"--threads", "3", "--nosync", NULL};

/* nserv servers on each of the two machines, with extra arguments. */
static void
serve(struct fx *f, int nserv, const char *const *extra)
{
    gkvt_serve(&f->j, 2, nserv, extra, NULL);
}

static gkv_client *
client(struct fx *f, uint32_t rank)
{
    gkv_client_opts o = {0};

    o.timeout_ms = 20000;
    return gkvt_connect(f->j.cfg, "prob", rank, &o);
}

/* ---- the graph and its features --------------------------------------------- */

static uint64_t
hash(uint64_t x)
{
    return tools__splitmix64(&x);
}

/* Adds feature 'name' of etype et (gkvt_efeat_make). */
static struct gkvt_efeat *
feat_add(struct fx *f, const char *name, int et, gkv_dtype dt, unsigned ndim,
         uint64_t shape0)
{
    struct gkvt_efeat *t = &f->ft[f->nft++];

    assert_true(f->nft <= NFEAT);
    gkvt_efeat_make(t, name, et, dt, ndim, shape0, f->ne[et]);
    return t;
}

static const struct gkvt_efeat *
feat_get(const struct fx *f, int et, const char *name)
{
    for (int i = 0; i < f->nft; i++)
        if (f->ft[i].et == et && strcmp(f->ft[i].name, name) == 0)
            return &f->ft[i];
    fail_msg("no feature %s on etype %d", name, et);
    return NULL;
}

/* The user/item graph, its features, two partitions, the references. */
static void
graph_make(struct fx *f)
{
    gkv_graph *g = gkvt_ui_graph(77, 0);

    f->ne[0] = NE0;
    f->ne[1] = NE1;
    f->ne[2] = NE1;
    feat_add(f, "w", 0, GKV_F32, 0, 0);        /* 0 .. 3, a fifth zero */
    feat_add(f, "cnt", 0, GKV_I32, 1, 1);      /* integers 0 .. 3, (E, 1) */
    feat_add(f, "wide", 0, GKV_F32, 1, 2);     /* two floats a row: refused */
    feat_add(f, "mask", 1, GKV_U8, 0, 0);      /* bool, 40 % ones */
    feat_add(f, "h", 1, GKV_F16, 0, 0);        /* f16 */
    feat_add(f, "w64", 2, GKV_F64, 0, 0);      /* thirds, as f64 */
    gkvt_ui_partition_efeats(g, f->j.dir, f->ft, f->nft, f->j.json,
                             sizeof f->j.json, &f->ref, f->emap);
    for (int q = 0; q < 2; q++)
        GKVT_OK(gkv_part_open(&f->part[q], f->j.json, q, 0));
    gkv_graph_free(g);
}

static int
setup(void **state)
{
    /* a port clash forgets the servers it killed: slots for the next */
    return gkvt_job_setup(state, sizeof (struct fx), "netprob", MAXPROC, g_opts,
                          1);
}

static int
teardown(void **state)
{
    struct fx *f = *state;
    int bad = gkvt_job_fini(&f->j);

    for (int q = 0; q < 2; q++)
        gkv_part_close(f->part[q]);
    gkvt_ui_efeats_free(&f->ref, f->emap, f->ft, f->nft);
    free(f);
    return bad;
}

/* ---- comparisons --------------------------------------------------------------- */

/* In-process options with the features' values as edge_w arrays. */
struct wopts {
    gkv_sample_opts o;
    const float *ew[3];
    int64_t len[3];
};

/* Test-only bits beside GKV_SAMPLE_* in 'flags': sample out-edges; give
 * the client the in-process options (edge_w arrays) instead of names. */
#define T_OUT 0x10000u
#define T_ARR 0x20000u

static void
wopts_make(const struct fx *f, struct wopts *w, const char *const *names,
           uint64_t seed, unsigned flags)
{
    memset(w, 0, sizeof *w);
    w->o.seed = seed;
    w->o.flags = flags & ~(T_OUT | T_ARR);
    w->o.dir = (flags & T_OUT) ? GKV_DIR_OUT : GKV_DIR_IN;
    for (int e = 0; e < 3; e++)
        if (names != NULL && names[e] != NULL) {
            w->ew[e] = feat_get(f, e, names[e])->w;
            w->len[e] = f->ne[e];
            w->o.edge_w = w->ew;
            w->o.edge_w_len = w->len;
        }
}

/* The client's options *oc (the features by name, or with T_ARR the
 * in-process options) and the in-process ones in *w (the values as
 * edge_w arrays), for seed and flags (GKV_SAMPLE_*, T_OUT, T_ARR). */
static void
opts_pair(const struct fx *f, gkv_sample_opts *oc, struct wopts *w,
          const char *const *names, uint64_t seed, unsigned flags)
{
    wopts_make(f, w, names, seed, flags);
    memset(oc, 0, sizeof *oc);
    oc->seed = seed;
    oc->flags = flags & ~(T_OUT | T_ARR);
    oc->dir = (flags & T_OUT) ? GKV_DIR_OUT : GKV_DIR_IN;
    oc->edge_w_feat = names;
    if (flags & T_ARR)
        *oc = w->o;
}

/* A deep copy of heterogeneous blocks. */
struct hcopy {
    int nl;
    gkv_block b[4];
    gkv_block_nodes nodes[4][2];
    gkv_sample_edges edges[4][3];
};

static void
hcopy_take(struct hcopy *h, const gkv_block *b, int nl)
{
    memset(h, 0, sizeof *h);
    h->nl = nl;
    for (int i = 0; i < nl; i++) {
        h->b[i] = b[i];
        h->b[i].nodes = h->nodes[i];
        h->b[i].edges = h->edges[i];
        for (int t = 0; t < b[i].num_ntypes; t++) {
            int64_t *ids = malloc(b[i].nodes[t].num_src * 8 + 8);
            h->nodes[i][t] = b[i].nodes[t];
            if (b[i].nodes[t].num_src > 0)
                memcpy(ids, b[i].nodes[t].ids, b[i].nodes[t].num_src * 8);
            h->nodes[i][t].ids = ids;
        }
        for (int e = 0; e < b[i].num_etypes; e++) {
            size_t m = b[i].edges[e].n;
            int64_t *s = malloc(m * 8 + 8), *d = malloc(m * 8 + 8),
                    *x = malloc(m * 8 + 8);
            if (m > 0) {
                memcpy(s, b[i].edges[e].src, m * 8);
                memcpy(d, b[i].edges[e].dst, m * 8);
                memcpy(x, b[i].edges[e].eid, m * 8);
            }
            h->edges[i][e].src = s;
            h->edges[i][e].dst = d;
            h->edges[i][e].eid = x;
            h->edges[i][e].n = m;
        }
    }
}

static void
hcopy_free(struct hcopy *h)
{
    for (int i = 0; i < h->nl; i++) {
        for (int t = 0; t < h->b[i].num_ntypes; t++)
            free((void *)h->nodes[i][t].ids);
        for (int e = 0; e < h->b[i].num_etypes; e++) {
            free((void *)h->edges[i][e].src);
            free((void *)h->edges[i][e].dst);
            free((void *)h->edges[i][e].eid);
        }
    }
}

static size_t
block_edges(const gkv_block *b, int nl)
{
    size_t n = 0;

    for (int i = 0; i < nl; i++)
        for (int e = 0; e < b[i].num_etypes; e++)
            n += b[i].edges[e].n;
    return n;
}

/* Client blocks with options oc == in-process blocks with options ow
 * (left in wb), and some edges. */
static void
same_blocks(struct fx *f, gkv_client *c, const struct gkvt_ui_seeds *sd,
            const gkv_sample_opts *oc, const gkv_sample_opts *ow,
            const int *fan, int nl, gkv_block *wb)
{
    gkv_block cb[4];

    NET_OK(gkv_client_sample_blocks(c, sd->sv, sd->ns, fan, 3, nl, oc, cb));
    GKVT_OK(gkv_sample_blocks(f->ref.ws, sd->sv, sd->ns, fan, 3, nl, ow, wb));
    if (!gkvt_blocks_same(wb, cb, nl))
        fail_msg("client blocks differ from in-process edge_w (dir %d, flags "
                 "0x%x, fanout %d..)", ow->dir, ow->flags, fan[0]);
    assert_true(block_edges(cb, nl) > 0);
}

/* Client blocks with edge_w_feat = names == in-process blocks with the
 * values as edge_w; *differs set when they also differ from uniform. */
static void
check_blocks(struct fx *f, gkv_client *c, const struct gkvt_ui_seeds *sd,
             const char *const *names, const int *fan, int nl, uint64_t seed,
             unsigned flags, int *differs)
{
    gkv_sample_opts oc = {0};
    struct wopts wo;
    gkv_block wb[4];
    struct hcopy ref;

    opts_pair(f, &oc, &wo, names, seed, flags);
    same_blocks(f, c, sd, &oc, &wo.o, fan, nl, wb);
    hcopy_take(&ref, wb, nl);
    wo.o.edge_w = NULL;
    wo.o.edge_w_len = NULL;
    GKVT_OK(gkv_sample_blocks(f->ref.ws, sd->sv, sd->ns, fan, 3, nl, &wo.o,
                              wb));
    if (!gkvt_blocks_same(wb, ref.b, nl))
        *differs = 1;
    hcopy_free(&ref);
}

/* A client hop with edge_w_feat = names over nus users i * umul % umod
 * and nis items i * imul % NI (with repeats) == in-process
 * gkv_sample_neighbors with the values as edge_w, on layer 2 (flags may
 * hold T_OUT and T_ARR). */
static void
check_hop(struct fx *f, gkv_client *c, size_t nus, int64_t umul,
          int64_t umod, size_t nis, int64_t imul, const char *const *names,
          const int *fan, uint64_t seed, unsigned flags)
{
    int64_t us[300], is[100];
    const int64_t *sv[2] = {us, is};
    size_t ns[2] = {nus, nis};
    gkv_sample_opts oc = {0};
    struct wopts wo;
    gkv_sample_edges we[3], ce[3];
    struct hcopy ref;
    gkv_block rb[1];

    assert_true(nus <= 300 && nis <= 100);
    for (size_t i = 0; i < nus; i++)
        us[i] = ((int64_t)i * umul) % umod;
    for (size_t i = 0; i < nis; i++)
        is[i] = ((int64_t)i * imul) % NI;
    opts_pair(f, &oc, &wo, names, seed, flags);
    GKVT_OK(gkv_sample_neighbors(f->ref.ws, sv, ns, fan, 3, 2, &wo.o, we));
    memset(rb, 0, sizeof rb);
    rb[0].num_etypes = 3;
    rb[0].edges = we;
    hcopy_take(&ref, rb, 1);
    NET_OK(gkv_client_sample_neighbors(c, sv, ns, fan, 3, 2, &oc, ce));
    for (int e = 0; e < 3; e++) {
        const gkv_sample_edges *x = &ref.edges[0][e];
        assert_true(x->n > 0);
        assert_int_equal(ce[e].n, x->n);
        assert_memory_equal(ce[e].src, x->src, x->n * 8);
        assert_memory_equal(ce[e].dst, x->dst, x->n * 8);
        assert_memory_equal(ce[e].eid, x->eid, x->n * 8);
    }
    hcopy_free(&ref);
}

/* A client edge batch of 100 clicks (edge IDs i * mul + add, reverses
 * excluded, num_neg negatives each) with edge_w_feat = names == the
 * in-process one with the values as edge_w: pairs and blocks. */
static void
check_edge_batch(struct fx *f, gkv_client *c, const char *const *names,
                 int64_t mul, int64_t add, int num_neg, uint64_t seed,
                 unsigned flags)
{
    gkv_edge_batch_spec sp = {0};
    gkv_edge_batch web, ceb;
    gkv_block wb[2], cb[2];
    gkv_sample_opts oc = {0};
    struct wopts wo;
    int64_t eids[100];
    int fan[6] = {3, 2, 3, 5, 5, 5};

    for (int i = 0; i < 100; i++)
        eids[i] = (i * mul + add) % NE1;
    sp.etype = 1;
    sp.eids = eids;
    sp.n = 100;
    sp.num_neg = num_neg;
    sp.exclude = GKV_EXCLUDE_SELF | GKV_EXCLUDE_REVERSE;
    sp.reverse_etype = 2;
    opts_pair(f, &oc, &wo, names, seed, flags);
    NET_OK(gkv_client_sample_edge_batch(c, &sp, fan, 3, 2, &oc, &ceb, cb));
    sp.reverse_eids = f->ref.rev;       /* what the servers read from storage */
    sp.reverse_n = NE1;
    GKVT_OK(gkv_sample_edge_batch(f->ref.ws, &sp, fan, 3, 2, &wo.o, &web, wb));
    assert_true(gkvt_blocks_same(wb, cb, 2));
    assert_int_equal(ceb.num_neg, web.num_neg);
    assert_memory_equal(ceb.neg_dst, web.neg_dst, web.num_neg * 8);
    assert_true(block_edges(cb, 2) > 0);
}

/* ---- tests ------------------------------------------------------------------------ */

/* Features per edge type for the comparisons: dtypes, a mask, uniform
 * types among weighted ones. */
static const char *const g_cases[][3] = {
    {"w", NULL, "w64"}, {"cnt", "mask", NULL}, {NULL, "h", "w64"},
    {"w", "mask", "w64"}};

/* Client == in-process with the same weights, across dtypes, uniform and
 * weighted etypes mixed, with and without replacement, fanouts. */
static void
test_equals_in_process(void **state)
{
    struct fx *f = *state;
    static const int fans[][9] = {
        {2, 3, 1, 4, 2, 3, 5, 5, 5},
        {10, 10, 10, 3, 3, 3, 1, 1, 1},
        {-1, -1, -1, 2, 0, 2, 4, 4, 4}};
    gkv_client *c;
    struct gkvt_ui_seeds sd;
    int differs = 0, ncase = (int)(sizeof g_cases / sizeof g_cases[0]);

    graph_make(f);
    serve(f, 1, NULL);
    c = client(f, 0);
    gkvt_ui_seeds_make(&sd, 0);
    for (int k = 0; k < ncase; k++)
        for (int fi = 0; fi < 3; fi++)
            for (int rep = 0; rep < 2; rep++) {
                differs = 0;
                check_blocks(f, c, &sd, g_cases[k], fans[fi], 3,
                             (uint64_t)(11 + k + 5 * fi),
                             rep ? GKV_SAMPLE_REPLACE : 0, &differs);
                /* all in-edges (-1) without replacement differ only by the
                 * zero-weight edges left out; any other case differs too */
                assert_true(differs);
            }
    /* single hops, seeds repeated, against gkv_sample_neighbors */
    {
        static const char *const nm[3] = {"cnt", "mask", "w64"};
        int fan[3] = {4, 3, 6};

        check_hop(f, c, 300, 7, 250, 100, 3, nm, fan, 3, 0);
        check_hop(f, c, 300, 7, 250, 100, 3, nm, fan, 3, GKV_SAMPLE_REPLACE);
    }
    /* an edge batch (user -> item clicks, reverses excluded) */
    {
        static const char *const nm[3] = {"w", NULL, "w64"};
        check_edge_batch(f, c, nm, 37, 3, 2, 9, 0);
    }
    NET_OK(gkv_client_close(c));
}

/* A 0/1 mask: its zero edges are never sampled, though the seeds have
 * them; with fanout -1 exactly the one edges come back. */
static void
test_mask(void **state)
{
    struct fx *f = *state;
    static const char *const nm[3] = {NULL, "mask", NULL};
    const float *mask;
    gkv_client *c;
    struct gkvt_ui_seeds sd;
    size_t ones = 0, zeros_seen = 0;

    graph_make(f);
    serve(f, 1, NULL);
    c = client(f, 0);
    mask = feat_get(f, 1, "mask")->w;
    gkvt_ui_seeds_make(&sd, 1);
    for (int fi = 0; fi < 3; fi++)
        for (int rep = 0; rep < 2; rep++) {
            int fan[3 * 2] = {0, fi == 0 ? -1 : 2 + 3 * fi, 0,
                              0, fi == 0 ? -1 : 2 + 3 * fi, 0};
            gkv_sample_opts oc = {0};
            gkv_block cb[2];
            int differs = 0;

            oc.seed = 40 + (uint64_t)fi;
            oc.flags = rep ? GKV_SAMPLE_REPLACE : 0;
            oc.edge_w_feat = nm;
            NET_OK(gkv_client_sample_blocks(c, sd.sv, sd.ns, fan, 3, 2, &oc,
                                            cb));
            for (int i = 0; i < 2; i++)
                for (size_t j = 0; j < cb[i].edges[1].n; j++) {
                    int64_t id = cb[i].edges[1].eid[j];
                    if (mask[id] != 1.0f)
                        fail_msg("edge %lld with mask %g was sampled",
                                 (long long)id, (double)mask[id]);
                    ones++;
                }
            /* and it is the in-process result */
            check_blocks(f, c, &sd, nm, fan, 2, oc.seed, oc.flags, &differs);
            assert_true(differs);
        }
    assert_true(ones > 100);
    /* the seeds' in-edges do hold zero-mask edges (so the mask mattered) */
    {
        int64_t *s, *d, *e;
        size_t m;
        for (int q = 0; q < 2; q++) {
            int64_t lo, hi;
            GKVT_OK(gkv_pbook_node_range(gkv_part_book(f->part[q]), 1, q, &lo,
                                         &hi));
            for (int i = 0; i < 60; i++) {
                if (sd.is[i] < lo || sd.is[i] >= hi)
                    continue;
                GKVT_OK(gkv_part_in_subgraph(f->part[q], 1, &sd.is[i], 1, &s,
                                             &d, &e, &m));
                for (size_t j = 0; j < m; j++)
                    zeros_seen += mask[e[j]] == 0.0f;
                gkv_free(s);
                gkv_free(d);
                gkv_free(e);
            }
        }
    }
    assert_true(zeros_seen > 100);
    NET_OK(gkv_client_close(c));
}

/* Pushes to a feature are seen by the next sample: the server's converted
 * copy is refreshed (all of it, or the chunks that changed). */
static void
test_push_invalidates(void **state)
{
    struct fx *f = *state;
    static const char *const nm[3] = {"w", NULL, NULL};
    static const char *const nc[3] = {"wc", NULL, NULL};
    int fan[9] = {4, 0, 0, 3, 0, 0, 5, 0, 0};
    struct gkvt_efeat *w;
    gkv_client *c;
    struct gkvt_ui_seeds sd;
    gkv_block cb[3], first[3];
    struct hcopy before;
    uint64_t *ids = malloc(NE0 * 8);
    float *rows = malloc(NE0 * 4);
    gkv_sample_opts oc = {0};
    gkv_tensor_spec ts = {0};
    int differs = 0;

    graph_make(f);
    serve(f, 1, NULL);
    c = client(f, 0);
    gkvt_ui_seeds_make(&sd, 2);
    w = (struct gkvt_efeat *)feat_get(f, 0, "w");
    oc.seed = 21;
    oc.edge_w_feat = nm;
    check_blocks(f, c, &sd, nm, fan, 3, 21, 0, &differs);
    NET_OK(gkv_client_sample_blocks(c, sd.sv, sd.ns, fan, 3, 3, &oc, first));
    hcopy_take(&before, first, 3);

    /* new values for every edge (by new ID): the reference follows */
    for (int64_t i = 0; i < NE0; i++) {
        ids[i] = (uint64_t)i;
        w->w[i] = (float)(hash((uint64_t)i + 999) % 4);
        rows[i] = w->w[i];
    }
    NET_OK(gkv_client_push(c, "edge/user:follows:user/w", ids, NE0, rows,
                           NE0 * 4, NULL));
    check_blocks(f, c, &sd, nm, fan, 3, 21, 0, &differs);
    NET_OK(gkv_client_sample_blocks(c, sd.sv, sd.ns, fan, 3, 3, &oc, cb));
    assert_false(gkvt_blocks_same(before.b, cb, 3));
    hcopy_free(&before);

    /* one edge's weight made 0: that edge never comes back */
    {
        int64_t victim = cb[2].edges[0].eid[0];
        float z = 0.0f;
        uint64_t vid = (uint64_t)victim;
        NET_OK(gkv_client_push(c, "edge/user:follows:user/w", &vid, 1, &z, 4,
                               NULL));
        w->w[victim] = 0.0f;
        check_blocks(f, c, &sd, nm, fan, 3, 21, 0, &differs);
        NET_OK(gkv_client_sample_blocks(c, sd.sv, sd.ns, fan, 3, 3, &oc, cb));
        for (int i = 0; i < 3; i++)
            for (size_t j = 0; j < cb[i].edges[0].n; j++)
                assert_true(cb[i].edges[0].eid[j] != victim);
    }

    /* a feature made by the client in small chunks (64 rows): a push to a
     * few rows changes only their chunks, the others are kept */
    ts.dtype = GKV_F32;
    ts.lo = 0;
    ts.hi = NE0;
    ts.chunk_rows = 64;
    ts.init = GKV_INIT_CONST;
    ts.a = 1.0;
    NET_OK(gkv_client_create(c, "edge/user:follows:user/wc", &ts, -1));
    {
        struct gkvt_efeat *t = &f->ft[f->nft++];
        memset(t, 0, sizeof *t);
        t->name = "wc";
        t->et = 0;
        t->dt = GKV_F32;
        t->w = malloc(NE0 * 4);
        t->orig = NULL;
        for (int64_t i = 0; i < NE0; i++)
            t->w[i] = w->w[i];
        NET_OK(gkv_client_push(c, "edge/user:follows:user/wc", ids, NE0,
                               t->w, NE0 * 4, NULL));
        check_blocks(f, c, &sd, nc, fan, 3, 5, 0, &differs);
        check_blocks(f, c, &sd, nc, fan, 3, 6, GKV_SAMPLE_REPLACE, &differs);
        for (int round = 0; round < 4; round++) {
            uint64_t few[40];
            float v[40];
            for (int i = 0; i < 40; i++) {
                few[i] = hash((uint64_t)(round * 100 + i)) % NE0;
                v[i] = (float)((round + i) % 5) * 2.0f;
            }
            for (int i = 0; i < 40; i++)
                t->w[few[i]] = v[i];
            NET_OK(gkv_client_push(c, "edge/user:follows:user/wc", few, 40, v,
                                   sizeof v, NULL));
            check_blocks(f, c, &sd, nc, fan, 3, 7 + (uint64_t)round, 0,
                         &differs);
        }
        /* a push to another tensor (a new snapshot, the feature
         * unchanged) keeps the answer */
        NET_OK(gkv_client_push(c, "edge/user:follows:user/w", ids, 1, rows,
                               4, NULL));
        w->w[0] = rows[0];
        check_blocks(f, c, &sd, nc, fan, 3, 7, 0, &differs);
        /* deleted and made again with other values: a new tensor */
        NET_OK(gkv_client_delete(c, "edge/user:follows:user/wc"));
        ts.a = 2.0;
        ts.init = GKV_INIT_UNIFORM;
        ts.b = 3.0;
        ts.seed = 4;
        NET_OK(gkv_client_create(c, "edge/user:follows:user/wc", &ts, -1));
        NET_OK(gkv_client_pull(c, "edge/user:follows:user/wc", ids, NE0,
                               t->w, NE0 * 4));
        check_blocks(f, c, &sd, nc, fan, 3, 8, 0, &differs);
    }
    free(ids);
    free(rows);
    NET_OK(gkv_client_close(c));
}

/* A feature the servers keep in write-back mode: read from the RAM copy
 * (which the store lags), so a push is still seen by the next sample. */
static void
test_writeback_feature(void **state)
{
    struct fx *f = *state;
    static const char *const nm[3] = {"w", "mask", NULL};
    static const char *const extra[] = {
        "--writeback", "edge/user:follows:user/w", "--flush-ms", "60000",
        NULL};
    int fan[6] = {4, 2, 0, 3, 3, 0}, differs = 0;
    struct gkvt_efeat *w;
    gkv_client *c;
    struct gkvt_ui_seeds sd;
    uint64_t *ids = malloc(NE0 * 8);

    graph_make(f);
    serve(f, 1, extra);
    for (int i = 0; i < f->j.np; i++)         /* the feature is in RAM */
        assert_true(gkvt_file_has(f->j.p[i].log, "write-back: tensor "
                                  "'edge/user:follows:user/w'"));
    c = client(f, 0);
    gkvt_ui_seeds_make(&sd, 5);
    w = (struct gkvt_efeat *)feat_get(f, 0, "w");
    check_blocks(f, c, &sd, nm, fan, 2, 31, 0, &differs);
    for (int round = 0; round < 3; round++) {
        for (int64_t i = 0; i < NE0; i++) {
            ids[i] = (uint64_t)i;
            w->w[i] = (float)(hash((uint64_t)(i + 77 * round)) % 3);
        }
        NET_OK(gkv_client_push(c, "edge/user:follows:user/w", ids, NE0, w->w,
                               NE0 * 4, NULL));
        check_blocks(f, c, &sd, nm, fan, 2, 31, GKV_SAMPLE_REPLACE, &differs);
    }
    free(ids);
    NET_OK(gkv_client_close(c));
}

/* Bad requests get clear errors, and the servers go on serving. */
static void
test_errors(void **state)
{
    struct fx *f = *state;
    gkv_client *c;
    struct gkvt_ui_seeds sd;
    gkv_block cb[2];
    gkv_sample_opts o = {0};
    int fan[3] = {3, 3, 3}, differs = 0;
    char longname[300];
    const char *nm[3] = {NULL, NULL, NULL};
    const char *msg;

    graph_make(f);
    serve(f, 1, NULL);
    c = client(f, 0);
    gkvt_ui_seeds_make(&sd, 3);
    o.edge_w_feat = nm;

    /* a missing feature: names the tensor and the partition */
    nm[0] = "nope";
    assert_int_equal(gkv_client_sample_blocks(c, sd.sv, sd.ns, fan, 3, 1, &o,
                                              cb), GKV_ENOTFOUND);
    msg = gkv_net_errmsg();
    assert_non_null(strstr(msg, "'edge/user:follows:user/nope'"));
    assert_non_null(strstr(msg, "partition"));
    /* fanout 0 for that etype: not looked up */
    {
        int f0[3] = {0, 3, 3};
        NET_OK(gkv_client_sample_blocks(c, sd.sv, sd.ns, f0, 3, 1, &o, cb));
    }
    /* bad names, refused before anything is sent */
    nm[0] = "w#adam_m";
    assert_int_equal(gkv_client_sample_blocks(c, sd.sv, sd.ns, fan, 3, 1, &o,
                                              cb), GKV_EINVAL);
    assert_non_null(strstr(gkv_net_errmsg(), "'#'"));
    memset(longname, 'x', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    nm[0] = longname;
    assert_int_equal(gkv_client_sample_blocks(c, sd.sv, sd.ns, fan, 3, 1, &o,
                                              cb), GKV_EINVAL);
    assert_non_null(strstr(gkv_net_errmsg(), "more bytes than"));
    longname[240] = '\0';                 /* fits alone, not with the prefix */
    assert_int_equal(gkv_client_sample_blocks(c, sd.sv, sd.ns, fan, 3, 1, &o,
                                              cb), GKV_EINVAL);
    assert_non_null(strstr(gkv_net_errmsg(), "edge/user:follows:user/xxx"));
    nm[0] = "";
    assert_int_equal(gkv_client_sample_blocks(c, sd.sv, sd.ns, fan, 3, 1, &o,
                                              cb), GKV_EINVAL);
    assert_non_null(strstr(gkv_net_errmsg(), "empty"));
    nm[0] = "a b";
    assert_int_equal(gkv_client_sample_blocks(c, sd.sv, sd.ns, fan, 3, 1, &o,
                                              cb), GKV_EINVAL);
    /* rows of two elements, and a feature with the stored weights, for in-
     * and out-edges (whose weights the client pulls); a missing feature
     * for out-edges */
    for (int d = 0; d < 2; d++) {
        o.dir = d ? GKV_DIR_OUT : GKV_DIR_IN;
        nm[0] = "wide";
        assert_int_equal(gkv_client_sample_blocks(c, sd.sv, sd.ns, fan, 3, 1,
                                                  &o, cb), GKV_EINVAL);
        assert_non_null(strstr(gkv_net_errmsg(), "rows of 2 elements"));
        nm[0] = d ? "nope" : "w";
        o.flags = d ? 0 : GKV_SAMPLE_WEIGHTED;
        assert_int_equal(gkv_client_sample_blocks(c, sd.sv, sd.ns, fan, 3, 1,
                                                  &o, cb), d ? GKV_ENOTFOUND :
                         GKV_EINVAL);
        assert_non_null(strstr(gkv_net_errmsg(), d ?
                               "'edge/user:follows:user/nope'" :
                               "GKV_SAMPLE_WEIGHTED"));
        nm[0] = "w";
        o.flags = GKV_SAMPLE_WEIGHTED;
        assert_int_equal(gkv_client_sample_blocks(c, sd.sv, sd.ns, fan, 3, 1,
                                                  &o, cb), GKV_EINVAL);
        assert_non_null(strstr(gkv_net_errmsg(), "GKV_SAMPLE_WEIGHTED"));
        o.flags = 0;
    }
    o.dir = GKV_DIR_IN;
    /* names in-process: no store to resolve them in */
    {
        struct wopts wo;
        static const char *const w3[3] = {"w", NULL, NULL};
        wopts_make(f, &wo, w3, 0, 0);
        wo.o.edge_w = NULL;
        wo.o.edge_w_len = NULL;
        wo.o.edge_w_feat = w3;
        assert_int_equal(gkv_sample_blocks(f->ref.ws, sd.sv, sd.ns, fan, 3, 1,
                                           &wo.o, cb), GKV_EINVAL);
        assert_non_null(strstr(gkv_sampler_errmsg(f->ref.ws),
                               "edge_w_feat[0]"));
    }
    /* a negative weight pushed: every sample with it on that partition
     * fails naming the edge, its value and the feature */
    {
        const gkv_pbook *b = gkv_client_pbook(c);
        int64_t lo, hi;
        uint64_t id;
        float neg = -2.0f, ok;
        char want[128];

        GKVT_OK(gkv_pbook_edge_range(b, 0, 1, &lo, &hi));
        id = (uint64_t)(hi - 1);
        ok = feat_get(f, 0, "w")->w[id];
        NET_OK(gkv_client_push(c, "edge/user:follows:user/w", &id, 1, &neg, 4,
                               NULL));
        assert_int_equal(gkv_client_sample_blocks(c, sd.sv, sd.ns, fan, 3, 1,
                                                  &o, cb), GKV_EINVAL);
        msg = gkv_net_errmsg();
        snprintf(want, sizeof want, "edge %llu has weight -2",
                 (unsigned long long)id);
        assert_non_null(strstr(msg, want));
        assert_non_null(strstr(msg, "'edge/user:follows:user/w'"));
        assert_non_null(strstr(msg, "partition 1"));
        neg = NAN;
        NET_OK(gkv_client_push(c, "edge/user:follows:user/w", &id, 1, &neg, 4,
                               NULL));
        assert_int_equal(gkv_client_sample_blocks(c, sd.sv, sd.ns, fan, 3, 1,
                                                  &o, cb), GKV_EINVAL);
        assert_non_null(strstr(gkv_net_errmsg(), "has weight nan"));
        /* repaired: served again, as in-process */
        NET_OK(gkv_client_push(c, "edge/user:follows:user/w", &id, 1, &ok, 4,
                               NULL));
        check_blocks(f, c, &sd, (const char *const *)nm, fan, 1, 3, 0,
                     &differs);
    }
    NET_OK(gkv_client_close(c));
}

/* Out-edges weighed by an edge feature (DGL's sample_neighbors(...,
 * edge_dir='out', prob=)): a node's out-edges are owned by the machines of
 * their destinations, with their feature rows, so the client pulls those
 * rows and sends the weights with the seeds. The blocks, hops and edge
 * batches equal in-process sampling given the same values as edge_w; a
 * weight pushed on another machine decides the pick at once. */
static void
test_out_edges(void **state)
{
    struct fx *f = *state;
    static const int fans[][6] = {{2, 3, 1, 4, 2, 3}, {-1, 5, 0, 3, 3, 3},
                                  {10, 10, 10, 1, 1, 1}};
    const float *mask;
    gkv_client *c;
    struct gkvt_ui_seeds sd;
    size_t ones = 0;

    graph_make(f);
    serve(f, 2, NULL);
    c = client(f, 0);
    gkvt_ui_seeds_make(&sd, 4);
    for (int k = 0; k < 4; k++)
        for (int fi = 0; fi < 3; fi++)
            for (int rep = 0; rep < 2; rep++) {
                int differs = 0;
                check_blocks(f, c, &sd, g_cases[k], fans[fi], 2,
                             (uint64_t)(50 + k + 3 * fi), T_OUT |
                             (rep ? GKV_SAMPLE_REPLACE : 0), &differs);
                assert_true(differs);
            }
    /* a mask on users' clicks: only its one edges leave a user */
    mask = feat_get(f, 1, "mask")->w;
    for (int fi = 0; fi < 2; fi++) {
        static const char *const nm[3] = {NULL, "mask", NULL};
        int fan[3] = {0, fi == 0 ? -1 : 4, 0};
        gkv_sample_opts oc = {0};
        gkv_sample_edges ce[3];

        oc.dir = GKV_DIR_OUT;
        oc.seed = 60;
        oc.edge_w_feat = nm;
        NET_OK(gkv_client_sample_neighbors(c, sd.sv, sd.ns, fan, 3, 0, &oc,
                                           ce));
        assert_true(ce[1].n > 0);
        for (size_t j = 0; j < ce[1].n; j++) {
            if (mask[ce[1].eid[j]] != 1.0f)
                fail_msg("out-edge %lld with mask %g was sampled",
                         (long long)ce[1].eid[j],
                         (double)mask[ce[1].eid[j]]);
            ones++;
        }
    }
    assert_true(ones > 50);
    /* single hops with repeated seeds, against gkv_sample_neighbors */
    {
        static const char *const nm[3] = {"cnt", "h", "w64"};
        int fan[3] = {4, 3, 6};

        check_hop(f, c, 300, 11, 230, 100, 7, nm, fan, 8, T_OUT);
        check_hop(f, c, 300, 11, 230, 100, 7, nm, fan, 8,
                  T_OUT | GKV_SAMPLE_REPLACE);
    }
    /* an edge batch of clicks, reverses excluded, sampled outwards */
    {
        static const char *const nm[3] = {"w", "mask", NULL};
        check_edge_batch(f, c, nm, 41, 7, 1, 19, T_OUT);
    }
    /* one user's follows: all weight on one edge another machine owns
     * decides every pick; a negative weight there is named */
    {
        static const char *const nm[3] = {"w", NULL, NULL};
        const gkv_pbook *b = gkv_client_pbook(c);
        const char *tn = "edge/user:follows:user/w";
        int64_t u = -1, star = -1;
        int32_t uown = -1;
        gkv_sample_edges all[3], ce[3];
        int fall[3] = {-1, 0, 0};
        gkv_sample_opts ou = {0}, oc = {0};
        char want[160];
        float neg = -2.0f;

        ou.dir = GKV_DIR_OUT;
        for (int64_t v = 0; v < NU && star < 0; v++) {
            const int64_t *sv[2] = {&v, NULL};
            size_t ns[2] = {1, 0};
            NET_OK(gkv_client_sample_neighbors(c, sv, ns, fall, 3, 0, &ou,
                                               all));
            GKVT_OK(gkv_pbook_node_owner(b, 0, &v, 1, &uown));
            if (all[0].n < 4)
                continue;
            for (size_t j = 0; j < all[0].n && star < 0; j++) {
                int32_t eo;
                GKVT_OK(gkv_pbook_edge_owner(b, 0, &all[0].eid[j], 1, &eo));
                if (eo != uown) {
                    u = v;
                    star = all[0].eid[j];
                }
            }
            if (star >= 0) {
                uint64_t *ids = malloc(all[0].n * 8);
                float *w = calloc(all[0].n, 4);
                size_t n = all[0].n;
                assert_true(ids != NULL && w != NULL);
                for (size_t j = 0; j < n; j++) {
                    ids[j] = (uint64_t)all[0].eid[j];
                    w[j] = all[0].eid[j] == star ? 3.0f : 0.0f;
                }
                NET_OK(gkv_client_push(c, tn, ids, n, w, n * 4, NULL));
                free(ids);
                free(w);
            }
        }
        assert_true(star >= 0);
        oc.dir = GKV_DIR_OUT;
        oc.edge_w_feat = nm;
        for (int rep = 0; rep < 8; rep++) {
            const int64_t *sv[2] = {&u, NULL};
            size_t ns[2] = {1, 0};
            int fan[3] = {1 + rep % 3, 0, 0};
            oc.seed = (uint64_t)(100 + rep);
            oc.flags = rep % 2 ? GKV_SAMPLE_REPLACE : 0;
            NET_OK(gkv_client_sample_neighbors(c, sv, ns, fan, 3, 0, &oc, ce));
            assert_int_equal(ce[0].n, oc.flags ? (size_t)fan[0] : 1);
            for (size_t j = 0; j < ce[0].n; j++) {
                assert_int_equal(ce[0].src[j], u);
                assert_int_equal(ce[0].eid[j], star);
            }
        }
        {
            uint64_t id = (uint64_t)star;
            const int64_t *sv[2] = {&u, NULL};
            size_t ns[2] = {1, 0};
            int fan[3] = {2, 0, 0};
            int32_t eo;
            NET_OK(gkv_client_push(c, tn, &id, 1, &neg, 4, NULL));
            /* before the failing call: the detail is the last call's */
            GKVT_OK(gkv_pbook_edge_owner(b, 0, &star, 1, &eo));
            assert_int_equal(gkv_client_sample_neighbors(c, sv, ns, fan, 3,
                                                         0, &oc, ce),
                             GKV_EINVAL);
            snprintf(want, sizeof want, "edge %lld (on partition %d) has "
                     "weight -2", (long long)star, eo);
            if (strstr(gkv_net_errmsg(), want) == NULL)
                fail_msg("expected '%s' in '%s'", want, gkv_net_errmsg());
            assert_non_null(strstr(gkv_net_errmsg(), tn));
        }
    }
    NET_OK(gkv_client_close(c));
}

/* edge_w arrays through the client, the very options in-process calls
 * take: the client lists the seeds' edges of those types, reads their
 * weights from the arrays and sends them with the seeds. In- and
 * out-edges; blocks, hops and edge batches; an array beside an in-edge
 * feature; edge_w_lo; bad arrays refused as in-process. */
static void
test_edge_w_client(void **state)
{
    struct fx *f = *state;
    static const char *const all[3] = {"w", "mask", "w64"};
    static const char *const feat0[3] = {"w", NULL, NULL};
    static const int fans[][6] = {{3, 2, 4, 2, 2, 2}, {-1, 6, 0, 3, 3, 3}};
    gkv_client *c;
    struct gkvt_ui_seeds sd;
    struct wopts wo;
    gkv_block wb[4];

    graph_make(f);
    serve(f, 1, NULL);
    c = client(f, 0);
    gkvt_ui_seeds_make(&sd, 7);
    for (int d = 0; d < 2; d++)
        for (int fi = 0; fi < 2; fi++)
            for (int rep = 0; rep < 2; rep++) {
                unsigned fl = (d ? T_OUT : 0) |
                              (rep ? GKV_SAMPLE_REPLACE : 0);
                wopts_make(f, &wo, all, (uint64_t)(80 + 4 * d + fi), fl);
                same_blocks(f, c, &sd, &wo.o, &wo.o, fans[fi], 2, wb);
            }
    {
        int fan[3] = {5, 2, 3};
        check_hop(f, c, 200, 5, 170, 50, 3, all, fan, 4, T_ARR);
        check_hop(f, c, 200, 5, 170, 50, 3, all, fan, 5, T_ARR | T_OUT);
        check_edge_batch(f, c, all, 37, 3, 2, 6, T_ARR);
        check_edge_batch(f, c, all, 41, 7, 1, 7, T_ARR | T_OUT);
    }
    /* an array for etype 2 beside the feature "w" for etype 0 (in-edges:
     * the feature goes by position too), and the arrays' start */
    for (int d = 0; d < 2; d++) {
        gkv_sample_opts oc;
        const float *ew[3];
        int64_t len[3], lo[3] = {0, 0, 0};

        wopts_make(f, &wo, all, 90, d ? T_OUT : 0);
        oc = wo.o;
        ew[0] = NULL;
        ew[1] = NULL;
        ew[2] = wo.ew[2];
        len[0] = len[1] = 0;
        len[2] = wo.len[2];
        oc.edge_w = ew;
        oc.edge_w_len = len;
        oc.edge_w_lo = lo;
        oc.edge_w_feat = feat0;
        wo.ew[1] = NULL;             /* the mask stays off */
        same_blocks(f, c, &sd, &oc, &wo.o, fans[0], 2, wb);
        /* starting at edge 100, the array lacks the edges below */
        lo[2] = 100;
        ew[2] = wo.ew[2] + 100;
        len[2] = wo.len[2] - 100;
        assert_int_equal(gkv_client_sample_blocks(c, sd.sv, sd.ns, fans[1], 3,
                                                  2, &oc, wb), GKV_ERANGE);
        assert_non_null(strstr(gkv_net_errmsg(), "has no entry in edge_w[2] "));
        assert_non_null(strstr(gkv_net_errmsg(), "of edges from 100)"));
    }
    /* bad arrays and mixes */
    {
        float *bad = malloc((size_t)f->ne[0] * 4);
        const float *ew[3] = {bad, NULL, NULL};
        int64_t len[3] = {f->ne[0], 0, 0};
        gkv_sample_opts o = {0};

        assert_non_null(bad);
        memcpy(bad, feat_get(f, 0, "w")->w, (size_t)f->ne[0] * 4);
        for (int64_t i = 0; i < f->ne[0]; i++)
            bad[i] = -1.0f;
        o.edge_w = ew;
        o.edge_w_len = len;
        assert_int_equal(gkv_client_sample_blocks(c, sd.sv, sd.ns, fans[0], 3,
                                                  2, &o, wb), GKV_EINVAL);
        assert_non_null(strstr(gkv_net_errmsg(), "has weight -1 in edge_w"));
        len[0] = f->ne[0] / 4;               /* short */
        memcpy(bad, feat_get(f, 0, "w")->w, (size_t)f->ne[0] * 4);
        assert_int_equal(gkv_client_sample_blocks(c, sd.sv, sd.ns, fans[0], 3,
                                                  2, &o, wb), GKV_ERANGE);
        len[0] = f->ne[0];
        o.edge_w_len = NULL;
        assert_int_equal(gkv_client_sample_blocks(c, sd.sv, sd.ns, fans[0], 3,
                                                  2, &o, wb), GKV_EINVAL);
        assert_non_null(strstr(gkv_net_errmsg(), "without edge_w_len"));
        o.edge_w_len = len;
        o.flags = GKV_SAMPLE_WEIGHTED;
        assert_int_equal(gkv_client_sample_blocks(c, sd.sv, sd.ns, fans[0], 3,
                                                  2, &o, wb), GKV_EINVAL);
        assert_non_null(strstr(gkv_net_errmsg(), "GKV_SAMPLE_WEIGHTED"));
        o.flags = 0;
        o.edge_w_feat = feat0;
        assert_int_equal(gkv_client_sample_blocks(c, sd.sv, sd.ns, fans[0], 3,
                                                  2, &o, wb), GKV_EINVAL);
        assert_non_null(strstr(gkv_net_errmsg(), "both an edge_w array and "
                               "edge_w_feat ('w')"));
        o.edge_w_feat = NULL;
        len[0] = -1;
        assert_int_equal(gkv_client_sample_blocks(c, sd.sv, sd.ns, fans[0], 3,
                                                  2, &o, wb), GKV_EINVAL);
        /* and after all that, a good call */
        len[0] = f->ne[0];
        same_blocks(f, c, &sd, &o, &o, fans[0], 2, wb);
        free(bad);
    }
    NET_OK(gkv_client_close(c));
}

/* Out-edge weights through servers that take small messages (16 KiB):
 * the weights of a machine's seeds are cut into more requests, and the
 * blocks are still the in-process ones. */
static void
test_out_small_msg(void **state)
{
    struct fx *f = *state;
    static const char *const extra[] = {"--max-msg", "16384", NULL};
    static const char *const nm[3] = {"w", "h", "w64"};
    int fan[6] = {-1, -1, 6, 3, 3, 3}, differs = 0;
    gkv_client *c;
    struct gkvt_ui_seeds sd;

    graph_make(f);
    serve(f, 1, extra);
    c = client(f, 0);
    gkvt_ui_seeds_make(&sd, 6);
    check_blocks(f, c, &sd, nm, fan, 2, 71, T_OUT, &differs);
    check_blocks(f, c, &sd, nm, fan, 2, 72, T_OUT | GKV_SAMPLE_REPLACE,
                 &differs);
    assert_true(differs);
    NET_OK(gkv_client_close(c));
}

/* In-process weights by position (graph__sample_hop, what a server runs
 * for out-edges weighed by a feature): equal to edge_w arrays holding the
 * same values; a count that does not match a node's edges and a negative
 * weight are refused, naming the node or the weight. */
static void
test_wpos_inprocess(void **state)
{
    struct fx *f = *state;
    static const char *const nm[3] = {"w", NULL, "w64"};
    int64_t us[80], is[30];
    const int64_t *sv[2] = {us, is};
    size_t ns[2] = {80, 30};
    int fall[3] = {-1, 0, -1}, fan[3] = {3, 2, 4};
    gkv_sample_edges all[3], we[3];
    graph__wpos wp[3];
    int64_t *off[3] = {NULL, NULL, NULL};
    float *w[3] = {NULL, NULL, NULL};
    gkv_sample_opts ou = {0};
    struct wopts wo;
    struct hcopy ref;
    gkv_block rb[1];

    graph_make(f);
    for (int i = 0; i < 80; i++)
        us[i] = (i * 13 + 2) % NU;
    for (int i = 0; i < 30; i++)
        is[i] = (i * 9 + 1) % NI;
    ou.dir = GKV_DIR_OUT;
    ou.exclude = NULL;
    GKVT_OK(gkv_sample_neighbors(f->ref.ws, sv, ns, fall, 3, 0, &ou, all));
    memset(wp, 0, sizeof wp);
    for (int e = 0; e < 3; e++) {
        int ct = e == 2;              /* the source type: user, user, item */
        const float *fw;
        size_t j = 0;
        if (nm[e] == NULL)
            continue;
        fw = feat_get(f, e, nm[e])->w;
        off[e] = malloc((ns[ct] + 1) * 8);
        w[e] = malloc(all[e].n * 4 + 4);
        assert_true(off[e] != NULL && w[e] != NULL);
        for (size_t i = 0; i < ns[ct]; i++) {
            off[e][i] = (int64_t)j;
            while (j < all[e].n && all[e].src[j] == sv[ct][i]) {
                w[e][j] = fw[all[e].eid[j]];
                j++;
            }
        }
        off[e][ns[ct]] = (int64_t)j;
        assert_int_equal(j, all[e].n);
        wp[e].off = off[e];
        wp[e].w = w[e];
    }
    wopts_make(f, &wo, nm, 6, T_OUT | GKV_SAMPLE_REPLACE);
    GKVT_OK(gkv_sample_neighbors(f->ref.ws, sv, ns, fan, 3, 1, &wo.o, we));
    memset(rb, 0, sizeof rb);
    rb[0].num_etypes = 3;
    rb[0].edges = we;
    hcopy_take(&ref, rb, 1);
    wo.o.edge_w = NULL;
    wo.o.edge_w_len = NULL;
    GKVT_OK(graph__sample_hop(f->ref.ws, sv, ns, fan, 3, 1, &wo.o, wp, NULL,
                              we));
    for (int e = 0; e < 3; e++) {
        assert_true(we[e].n > 0);
        assert_int_equal(we[e].n, ref.edges[0][e].n);
        assert_memory_equal(we[e].eid, ref.edges[0][e].eid, we[e].n * 8);
        assert_memory_equal(we[e].dst, ref.edges[0][e].dst, we[e].n * 8);
    }
    hcopy_free(&ref);
    /* both an edge_w array and weights by position for one type */
    {
        struct wopts w2;
        wopts_make(f, &w2, nm, 6, T_OUT);
        assert_int_equal(graph__sample_hop(f->ref.ws, sv, ns, fan, 3, 1, &w2.o,
                                           wp, NULL, we), GKV_EINVAL);
        assert_non_null(strstr(gkv_sampler_errmsg(f->ref.ws), "both"));
    }
    /* a seed with one weight too few (the next one's first moved up) */
    {
        size_t i = 0;
        while (off[0][i + 1] - off[0][i] < 2)
            i++;
        off[0][i + 1]--;
        assert_int_equal(graph__sample_hop(f->ref.ws, sv, ns, fan, 3, 1, &wo.o,
                                           wp, NULL, we), GKV_EINVAL);
        assert_non_null(strstr(gkv_sampler_errmsg(f->ref.ws),
                               "weights were given for it"));
        off[0][i + 1]++;
    }
    /* a negative weight */
    w[2][0] = -1.0f;
    {
        int f1[3] = {0, 0, -1};
        assert_int_equal(graph__sample_hop(f->ref.ws, sv, ns, f1, 3, 1, &wo.o,
                                           wp, NULL, we), GKV_EINVAL);
        assert_non_null(strstr(gkv_sampler_errmsg(f->ref.ws),
                               "in the weights given"));
    }
    for (int e = 0; e < 3; e++) {
        free(off[e]);
        free(w[e]);
    }
}

/* Samplers on several clients at once while the feature is pushed: every
 * answer is the reference of the values before or after some push (the
 * servers' workers refresh and read the cache concurrently). One hop on
 * seeds partition 0 owns, pushes to its edges only: each push is one
 * transaction on the one server that answers. */
struct conc {
    struct fx *f;
    const struct hcopy *ref[2];
    struct gkvt_ui_seeds sd;
    atomic_int bad, done, ran;
    atomic_uint rank;
};

static void *
conc_main(void *arg)
{
    struct conc *k = arg;
    static const char *const nm[3] = {"w", NULL, "w64"};
    int fan[3] = {4, 0, 3};
    gkv_client *c = NULL;
    gkv_client_opts co = {0};
    gkv_sample_opts o = {0};
    uint32_t rank = atomic_fetch_add(&k->rank, 1);

    co.timeout_ms = 20000;
    if (gkv_client_connect(&c, k->f->j.cfg, NULL, "prob", rank, &co) != GKV_OK) {
        atomic_fetch_add(&k->bad, 1);
        return NULL;
    }
    o.seed = 12;
    o.edge_w_feat = nm;
    while (!atomic_load(&k->done)) {
        gkv_block cb[1];
        if (gkv_client_sample_blocks(c, k->sd.sv, k->sd.ns, fan, 3, 1, &o, cb)
            != GKV_OK) {
            fprintf(stderr, "conc: %s\n", gkv_net_errmsg());
            atomic_fetch_add(&k->bad, 1);
            break;
        }
        if (!gkvt_blocks_same(k->ref[0]->b, cb, 1) &&
            !gkvt_blocks_same(k->ref[1]->b, cb, 1)) {
            fprintf(stderr, "conc: blocks match neither reference\n");
            atomic_fetch_add(&k->bad, 1);
        }
        atomic_fetch_add(&k->ran, 1);
    }
    gkv_client_close(c);
    return NULL;
}

static void
test_concurrent(void **state)
{
    struct fx *f = *state;
    static const char *const nm[3] = {"w", NULL, "w64"};
    int fan[3] = {4, 0, 3};
    struct conc k;
    struct hcopy ref[2];
    struct wopts wo;
    gkv_block wb[1];
    float *vals[2];
    uint64_t *ids = malloc(NE0 * 8);
    gkv_client *c;
    pthread_t th[3];
    int64_t ulo, uhi, elo, ehi;
    double t0;

    graph_make(f);
    serve(f, 1, NULL);
    c = client(f, 100);
    memset(&k, 0, sizeof k);
    GKVT_OK(gkv_pbook_node_range(gkv_part_book(f->part[0]), 0, 0, &ulo, &uhi));
    GKVT_OK(gkv_pbook_edge_range(gkv_part_book(f->part[0]), 0, 0, &elo, &ehi));
    assert_true(elo == 0 && ehi > 100 && uhi - ulo > 100);
    for (int i = 0; i < 100; i++)
        k.sd.us[i] = ulo + (i * 7) % (uhi - ulo);
    for (int i = 0; i < 100; i++)           /* distinct */
        for (int j = 0; j < i; j++)
            if (k.sd.us[j] == k.sd.us[i]) {
                k.sd.us[i] = ulo + i;
                j = -1;
            }
    k.sd.sv[0] = k.sd.us;
    k.sd.sv[1] = k.sd.is;
    k.sd.ns[0] = 100;
    k.sd.ns[1] = 0;
    vals[0] = malloc(NE0 * 4);
    vals[1] = malloc(NE0 * 4);
    for (int64_t i = 0; i < NE0; i++) {
        ids[i] = (uint64_t)i;
        vals[0][i] = feat_get(f, 0, "w")->w[i];
        vals[1][i] = (float)(hash((uint64_t)i + 5) % 3);
    }
    for (int v = 0; v < 2; v++) {
        memcpy(feat_get(f, 0, "w")->w, vals[v], NE0 * 4);
        wopts_make(f, &wo, nm, 12, 0);
        GKVT_OK(gkv_sample_blocks(f->ref.ws, k.sd.sv, k.sd.ns, fan, 3, 1, &wo.o,
                                  wb));
        hcopy_take(&ref[v], wb, 1);
    }
    assert_false(gkvt_blocks_same(ref[0].b, ref[1].b, 1));
    k.f = f;
    k.ref[0] = &ref[0];
    k.ref[1] = &ref[1];
    for (int i = 0; i < 3; i++)
        assert_int_equal(pthread_create(&th[i], NULL, conc_main, &k), 0);
    /* 16 pushes, and more while the samplers have not done 4 samples in
     * all (they connect first; a slow machine may hold them back): the
     * samples are taken while the weights change */
    t0 = tools__now_s();
    for (int round = 0; round < 16 || (atomic_load(&k.ran) < 4 &&
                                       atomic_load(&k.bad) == 0 &&
                                       tools__now_s() - t0 < 30); round++) {
        NET_OK(gkv_client_push(c, "edge/user:follows:user/w", ids,
                               (size_t)ehi, vals[(round + 1) % 2],
                               (size_t)ehi * 4, NULL));
        tools__sleep_ms(30);
    }
    atomic_store(&k.done, 1);
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(atomic_load(&k.bad), 0);
    assert_true(atomic_load(&k.ran) > 3);
    for (int v = 0; v < 2; v++)
        hcopy_free(&ref[v]);
    free(vals[0]);
    free(vals[1]);
    free(ids);
    NET_OK(gkv_client_close(c));
}

/* In-process: a partition's sgraph with the weights of its own edges
 * (edge_w_lo = its first edge) samples as the whole graph with the whole
 * array; an edge outside the array is GKV_ERANGE. */
static void
test_edge_w_lo(void **state)
{
    struct fx *f = *state;
    const struct gkvt_efeat *w;
    int fan[3] = {5, 0, 0};

    graph_make(f);
    w = feat_get(f, 0, "w");
    for (int q = 0; q < 2; q++) {
        const gkv_pbook *b = gkv_part_book(f->part[q]);
        gkv_sgraph *psg;
        gkv_sampler *ps;
        int64_t nlo, nhi, elo, ehi, seeds[100], len[3] = {0}, lo[3] = {0};
        const int64_t *sv[2] = {seeds, NULL};
        size_t ns[2] = {0, 0}, m;
        const float *ew[3] = {NULL};
        gkv_sample_opts o = {0};
        gkv_sample_edges we[3], pe[3];
        int64_t *keep;

        GKVT_OK(gkv_pbook_node_range(b, 0, q, &nlo, &nhi));
        GKVT_OK(gkv_pbook_edge_range(b, 0, q, &elo, &ehi));
        assert_true(elo > 0 || q == 0);
        for (int i = 0; i < 100 && nlo + i * 3 < nhi; i++)
            seeds[ns[0]++] = nlo + i * 3;
        o.seed = 17;
        for (int rep = 0; rep < 2; rep++) {
            o.flags = rep ? GKV_SAMPLE_REPLACE : 0;
            ew[0] = w->w;
            len[0] = f->ne[0];
            o.edge_w = ew;
            o.edge_w_len = len;
            o.edge_w_lo = NULL;
            GKVT_OK(gkv_sample_neighbors(f->ref.ws, sv, ns, fan, 3, 0, &o, we));
            m = we[0].n;
            assert_true(m > 0);
            keep = malloc(m * 8);
            memcpy(keep, we[0].eid, m * 8);
            GKVT_OK(gkv_part_sgraph(f->part[q], &psg));
            GKVT_OK(gkv_sampler_new(&ps, psg, 1));
            ew[0] = w->w + elo;
            len[0] = ehi - elo;
            lo[0] = elo;
            o.edge_w_lo = lo;
            GKVT_OK(gkv_sample_neighbors(ps, sv, ns, fan, 3, 0, &o, pe));
            assert_int_equal(pe[0].n, m);
            assert_memory_equal(pe[0].eid, keep, m * 8);
            /* the same array one edge short at either end, where an edge
             * is sampled: GKV_ERANGE naming where the array starts */
            lo[0] = elo + 1;
            ew[0] = w->w + elo + 1;
            len[0] = ehi - elo - 1;
            {
                gkv_err rc = gkv_sample_neighbors(ps, sv, ns, fan, 3, 0, &o,
                                                  pe);
                if (rc != GKV_OK) {
                    assert_int_equal(rc, GKV_ERANGE);
                    assert_non_null(strstr(gkv_sampler_errmsg(ps),
                                           "of edges from"));
                }
            }
            /* the array starting beyond every edge: always GKV_ERANGE */
            lo[0] = ehi;
            len[0] = 0;
            assert_int_equal(gkv_sample_neighbors(ps, sv, ns, fan, 3, 0, &o,
                                                  pe), GKV_ERANGE);
            lo[0] = -1;
            assert_int_equal(gkv_sample_neighbors(ps, sv, ns, fan, 3, 0, &o,
                                                  pe), GKV_EINVAL);
            free(keep);
            gkv_sampler_free(ps);
            gkv_sgraph_free(psg);
        }
    }
}

static void
enc_sample_req(net_wr *w, const void *enc)
{
    net__enc_sample_req(w, enc);
}

/* The SAMPLE codec: names round-trip; bad ones are refused on decode with
 * the reason; the flag without the section is truncated input. */
static void
test_wire(void **state)
{
    static const char *const good[2] = {"prob", NULL};
    int fan[1] = {5};
    int64_t s0[2] = {1, 2};
    const int64_t *seeds[1] = {s0};
    size_t ns[1] = {2};
    net_sample_enc enc = {0};
    net_sample_req q;
    net_rd rd;
    struct { const char *name; const char *why; } bad[] = {
        {"a#b", "'#'"}, {"a b", "printable"}, {"a\tb", "printable"},
        {NULL, "more bytes than"}};
    char big[GKV_NAME_MAX + 2];
    unsigned char *buf;
    size_t len;

    (void)state;
    memset(big, 'y', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    bad[3].name = big;
    enc.dir = GKV_DIR_IN;
    enc.flags = NET_SAMPLE_F_FEAT;
    enc.nnt = 1;
    enc.net = 2;
    enc.nfan = 1;
    enc.seed = 4;
    enc.fanout = fan;
    enc.seeds = seeds;
    enc.nseeds = ns;
    enc.feat = good;
    for (int k = -1; k < (int)(sizeof bad / sizeof bad[0]); k++) {
        const char *names[2] = {k < 0 ? "prob" : bad[k].name, NULL};
        enc.feat = k < 0 ? good : names;
        buf = gkvt_encode(enc_sample_req, &enc, &len);
        net__rd_init(&rd, buf, len);
        if (k < 0) {
            assert_int_equal(net__dec_sample_req(&rd, &q), 0);
            assert_non_null(q.feat);
            assert_string_equal(q.feat[0], "prob");
            assert_null(q.feat[1]);
            net__sample_req_free(&q);
            /* the flag without the names: truncated */
            net__rd_init(&rd, buf, len - 2 - 4 - 2);
            assert_int_not_equal(net__dec_sample_req(&rd, &q), 0);
            /* names without the flag: bytes left over */
            {
                unsigned char *fl = buf + 8;      /* layer, dir, flags */
                uint32_t v = 0;
                memcpy(fl, &v, 4);
                net__rd_init(&rd, buf, len);
                assert_int_not_equal(net__dec_sample_req(&rd, &q), 0);
                assert_non_null(strstr(rd.why, "left over"));
            }
        } else {
            assert_int_not_equal(net__dec_sample_req(&rd, &q), 0);
            if (strstr(rd.why, bad[k].why) == NULL)
                fail_msg("name '%.20s': decoder said '%s', expected '%s'",
                         bad[k].name, rd.why, bad[k].why);
            assert_non_null(strstr(rd.why, "edge_w_feat"));
        }
        free(buf);
    }
    /* weights by position: round trip, counts that do not sum to the
     * weights, truncation */
    for (int k = 0; k < 3; k++) {
        uint32_t c0[2] = {2, 1};
        float w0[3] = {0.5f, 1.0f, 2.0f};
        const uint32_t *wc[2] = {c0, NULL};
        const float *wv[2] = {w0, NULL};
        size_t nwc[2] = {2, 0}, nw[2] = {k == 1 ? 2 : 3, 0};

        enc.flags = NET_SAMPLE_F_WPOS;
        enc.feat = NULL;
        enc.nwc = nwc;
        enc.nw = nw;
        enc.wc = wc;
        enc.w = wv;
        buf = gkvt_encode(enc_sample_req, &enc, &len);
        net__rd_init(&rd, buf, k == 2 ? len - 4 : len);
        if (k == 0) {
            uint32_t got;
            assert_int_equal(net__dec_sample_req(&rd, &q), 0);
            assert_int_equal(q.nwc[0], 2);
            assert_int_equal(q.nw[0], 3);
            assert_int_equal(q.nwc[1], 0);
            assert_int_equal(q.nw[1], 0);
            memcpy(&got, q.wc[0] + 4, 4);
            assert_int_equal(got, 1);
            assert_memory_equal(q.w[0], w0, 12);
            net__sample_req_free(&q);
        } else {
            assert_int_not_equal(net__dec_sample_req(&rd, &q), 0);
            if (k == 1)
                assert_non_null(strstr(rd.why, "the counts sum to 3, and 2 "
                                       "weights follow"));
        }
        free(buf);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wire),
        cmocka_unit_test_setup_teardown(test_edge_w_lo, setup, teardown),
        cmocka_unit_test_setup_teardown(test_equals_in_process, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_mask, setup, teardown),
        cmocka_unit_test_setup_teardown(test_push_invalidates, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_writeback_feature, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_concurrent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_out_edges, setup, teardown),
        cmocka_unit_test_setup_teardown(test_out_small_msg, setup, teardown),
        cmocka_unit_test_setup_teardown(test_edge_w_client, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wpos_inprocess, setup, teardown),
    };

    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests_name("net_prob", tests, NULL, NULL);
}
