/* net_batch_test.c - whole mini-batches sampled on the servers
 * (gkv_client_sample_batch, net/server_batch.c) and clones of a client
 * (gkv_client_clone), against real gkv-server processes on loopback
 * serving a partitioned graph (gkvt_ngraph.h), killed by PID in the
 * teardown.
 *
 * Every batch is checked against the calls it stands for, on the same
 * client: its blocks byte for byte against gkv_client_sample_blocks()
 * (itself checked against in-process sampling by net_graph_sample_test),
 * its rows against gkv_client_pull() of the same IDs (the input nodes'
 * features, the seeds' labels, each layer's edges' features):
 *   - homogeneous and heterogeneous graphs, 2 machines with 1 and 2
 *     servers each; several seed sets, in and out, with and without
 *     replacement, weighted;
 *   - batches from several threads (clones) at once hitting both
 *     machines' servers, whose peer requests cross: no deadlock;
 *   - bad input named: an unknown tensor, a label of the wrong row count,
 *     fanouts of the wrong length or below -1, a seed out of range or
 *     given twice, exclusions, edge weights;
 *   - requests the client would not send, by hand: refused, named;
 *   - every batch both ways the rows may come (pulled from their owners
 *     by the client, the default; GKV_BATCH_RELAY: all in the asked
 *     server's reply), each with the rows in the client's memory and in
 *     the caller's (rows_alloc): the same bytes;
 *   - a peer server killed: GKV_ETIMEDOUT naming it within the timeout,
 *     and once it is back, batches go on; the same for the owner of rows
 *     the client pulls after the asked server replied, both ways;
 *   - a feature in write-back mode: a batch's rows see the pushes;
 *   - clones (with a token): a clone and its original both work; closing
 *     the clone stops no server; closing the original (the last member)
 *     stops them all, peer clients or not.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <nanomsg/nn.h>
#include "gkvt_ngraph.h"
#include "base/base.h"
#include "net/wire.h"

#define NL_MAX 3

/* ---- a batch, copied and checked -------------------------------------------- */

/* A batch's results, copied out of the client's arena. */
struct bres {
    struct gkvt_bcopy bc;
    void *feat[4], *label, *ef[4 * NL_MAX];
    size_t fb[4], lb, efb[4 * NL_MAX];
};

static void *
dup_bytes(const void *p, size_t n)
{
    void *d = malloc(n + 1);

    assert_non_null(d);
    if (n > 0)
        memcpy(d, p, n);
    return d;
}

static void
bres_free(struct bres *r)
{
    gkvt_bcopy_free(&r->bc);
    for (int i = 0; i < 4; i++)
        free(r->feat[i]);
    free(r->label);
    for (int i = 0; i < 4 * NL_MAX; i++)
        free(r->ef[i]);
    memset(r, 0, sizeof *r);
}

/* batch_take's modes: spec flags, and ALLOC: the rows into the caller's
 * memory (rows_alloc) */
#define ALLOC 0x10000u
#define MODES 4
static const unsigned modes[MODES] = {0, GKV_BATCH_RELAY, ALLOC,
                                      GKV_BATCH_RELAY | ALLOC};

/* rows_alloc for batch_take: memory recorded straight in the bres, each
 * entry once, poisoned so rows left unwritten show. */
struct ralloc {
    struct bres *r;
    int calls;
};

static void *
ralloc(void *arg, int kind, size_t index, size_t bytes)
{
    struct ralloc *a = arg;
    void *p = malloc(bytes + 1), **at;

    assert_non_null(p);
    memset(p, 0xa5, bytes + 1);
    at = kind == GKV_BATCH_FEAT ? &a->r->feat[index] :
         kind == GKV_BATCH_LABEL ? &a->r->label : &a->r->ef[index];
    assert_true(kind == GKV_BATCH_LABEL ? index == 0 :
                index < (kind == GKV_BATCH_FEAT ? 4u : 4u * NL_MAX));
    assert_null(*at);
    *at = p;
    a->calls++;
    return p;
}

/* gkv_client_sample_batch(c, sp) into *r (copied, or written there with
 * ALLOC), with spec flags 'mode' (less ALLOC). */
static gkv_err
batch_take_mode(gkv_client *c, const gkv_batch_spec *sp, unsigned mode,
                struct bres *r)
{
    gkv_block blocks[NL_MAX];
    const void *feat[4], *ef[4 * NL_MAX];
    size_t fb[4], efb[4 * NL_MAX];
    gkv_batch_out out = {blocks, feat, fb, NULL, 0, ef, efb, NULL, NULL};
    gkv_batch_spec s2 = *sp;
    struct ralloc ra = {r, 0};
    int alloc = (mode & ALLOC) != 0;
    gkv_err rc;

    memset(r, 0, sizeof *r);
    s2.flags = mode & ~ALLOC;
    if (alloc) {
        out.rows_alloc = ralloc;
        out.rows_arg = &ra;
    }
    if ((rc = gkv_client_sample_batch(c, &s2, &out)) != GKV_OK) {
        bres_free(r);           /* rows_alloc's memory is ours anyway */
        return rc;
    }
    if (alloc)
        assert_int_equal(ra.calls, sp->nfeats + (sp->label != NULL) +
                                   sp->nefeats * sp->nlayers);
    gkvt_bcopy_take(&r->bc, blocks, sp->nlayers);
    for (int f = 0; f < sp->nfeats; f++) {
        if (alloc)
            assert_ptr_equal(feat[f], r->feat[f]);
        else
            r->feat[f] = dup_bytes(feat[f], fb[f]);
        r->fb[f] = fb[f];
    }
    if (sp->label != NULL) {
        if (alloc)
            assert_ptr_equal(out.label, r->label);
        else
            r->label = dup_bytes(out.label, out.label_bytes);
        r->lb = out.label_bytes;
    } else {
        assert_null(out.label);
    }
    for (int k = 0; k < sp->nefeats * sp->nlayers; k++) {
        if (alloc)
            assert_ptr_equal(ef[k], r->ef[k]);
        else
            r->ef[k] = dup_bytes(ef[k], efb[k]);
        r->efb[k] = efb[k];
    }
    return GKV_OK;
}

static gkv_err
batch_take(gkv_client *c, const gkv_batch_spec *sp, struct bres *r)
{
    return batch_take_mode(c, sp, 0, r);
}

/* Rows ids[0 .. n) of tensor 'name' pulled by c == the n rows at got
 * (got_bytes in all). */
static void
rows_same(gkv_client *c, const char *name, const int64_t *ids, size_t n,
          const void *got, size_t got_bytes)
{
    gkv_tensor_desc d;
    void *want;

    NET_OK(gkv_client_tensor_info(c, name, &d));
    assert_int_equal(got_bytes, n * d.row_bytes);
    want = malloc(got_bytes + 1);
    assert_non_null(want);
    NET_OK(gkv_client_pull(c, name, (const uint64_t *)ids, n, want,
                           got_bytes));
    if (got_bytes > 0)
        assert_memory_equal(got, want, got_bytes);
    free(want);
}

/* A batch taken in 'mode' == sample_blocks and pulls of the same IDs on
 * c; returns the number of edges of its blocks. */
static size_t
batch_check_mode(gkv_client *c, const gkv_batch_spec *sp, unsigned mode)
{
    gkv_block blocks[NL_MAX];
    struct bres r;
    size_t edges = 0;

    NET_OK(batch_take_mode(c, sp, mode, &r));
    NET_OK(gkv_client_sample_blocks(c, sp->seeds, sp->nseeds, sp->fanouts,
                                    sp->nfan, sp->nlayers, sp->opts, blocks));
    assert_true(gkvt_bcopy_same(&r.bc, blocks));
    for (int f = 0; f < sp->nfeats; f++) {
        int t = sp->feats[f].type;
        rows_same(c, sp->feats[f].name, r.bc.ids[0][t], r.bc.nsrc[0][t],
                  r.feat[f], r.fb[f]);
    }
    if (sp->label != NULL)
        rows_same(c, sp->label->name, sp->seeds[sp->label->type],
                  sp->nseeds[sp->label->type], r.label, r.lb);
    for (int f = 0; f < sp->nefeats; f++)
        for (int i = 0; i < sp->nlayers; i++) {
            int e = sp->efeats[f].type, k = f * sp->nlayers + i;
            rows_same(c, sp->efeats[f].name, r.bc.ee[i][e], r.bc.ne[i][e],
                      r.ef[k], r.efb[k]);
        }
    for (int i = 0; i < sp->nlayers; i++)
        for (int e = 0; e < r.bc.net; e++)
            edges += r.bc.ne[i][e];
    bres_free(&r);
    return edges;
}

/* A batch == sample_blocks and pulls of the same IDs on c, taken in each
 * of the modes; returns the number of edges of its blocks. */
static size_t
batch_check(gkv_client *c, const gkv_batch_spec *sp)
{
    size_t edges = 0;

    for (int m = 0; m < MODES; m++)
        edges = batch_check_mode(c, sp, modes[m]);
    return edges;
}

/* Tensor 'name' of rows [0, hi) with 'width' floats each (0: one i64),
 * values from seed, split by the partition book (machine -1) or on
 * 'machine'. */
static void
tensor_make(gkv_client *c, const char *name, uint64_t hi, unsigned width,
            uint64_t seed, int machine)
{
    gkv_tensor_spec ts = {0};

    ts.dtype = width > 0 ? GKV_F32 : GKV_I64;
    ts.ndim = width > 0 ? 1 : 0;
    ts.shape[0] = width;
    ts.hi = hi;
    ts.init = GKV_INIT_UNIFORM;
    ts.a = 0;
    ts.b = 1000;
    ts.seed = seed;
    NET_OK(gkv_client_create(c, name, &ts, machine));
}

/* ---- the homogeneous graph ---------------------------------------------------- */

#define HOMO_SCALE 10

static char g_efeat[GKV_NAME_MAX + 1];   /* "edge/<canonical>/w" */

/* The homogeneous graph's label and edge feature (g_efeat), made through
 * c beside the partitions' feature. */
static void
homo_tensors(struct gkvt_ng *f, gkv_client *c)
{
    snprintf(g_efeat, sizeof g_efeat, "edge/%s/w",
             gkv_pbook_etype_name(gkv_client_pbook(c), 0));
    tensor_make(c, "node/_N/label", (uint64_t)f->n, 0, 5, -1);
    tensor_make(c, g_efeat, (uint64_t)f->m, 2, 6, -1);
}

/* The R-MAT graph in two partitions, nserv servers a machine, a label
 * and an edge feature beside the partitions' feature; a client of
 * 'group'. */
static gkv_client *
homo_serve(struct gkvt_ng *f, int nserv, const char *group)
{
    gkv_client *c;

    gkvt_ng_graph_make(f, HOMO_SCALE, 2);
    gkvt_ng_serve(f, nserv);
    c = gkvt_ng_client(f, group);
    homo_tensors(f, c);
    return c;
}

static const gkv_typed_tensor h_feat[1] = {{0, "node/_N/feat"}};
static const gkv_typed_tensor h_label = {0, "node/_N/label"};
static gkv_typed_tensor h_efeat[1] = {{0, g_efeat}};

/* A spec over seeds[0 .. n) of the homogeneous graph with everything
 * collected. */
static gkv_batch_spec
homo_spec(const int64_t *const *sv, const size_t *sn, const int *fan, int nl,
          const gkv_sample_opts *o)
{
    gkv_batch_spec sp = {0};

    sp.seeds = sv;
    sp.nseeds = sn;
    sp.fanouts = fan;
    sp.nfan = 1;
    sp.nlayers = nl;
    sp.opts = o;
    sp.feats = h_feat;
    sp.nfeats = 1;
    sp.label = &h_label;
    sp.efeats = h_efeat;
    sp.nefeats = 1;
    return sp;
}

/* Several seed sets, in and out, with and without replacement, weighted;
 * every batch == sample_blocks and pulls. */
static void
homo_batches(struct gkvt_ng *f, gkv_client *c)
{
    static const int fan[4][3] = {{5, 10, 15}, {-1, 3, 4}, {2, 0, 7},
                                  {3, 3, 3}};
    static const unsigned flags[4] = {0, GKV_SAMPLE_REPLACE,
                                      GKV_SAMPLE_WEIGHTED,
                                      GKV_SAMPLE_REPLACE |
                                      GKV_SAMPLE_WEIGHTED};
    uint64_t st = 11;
    int64_t *perm = gkvt_distinct_seeds(f->n, &st);
    size_t edges = 0;

    for (int k = 0; k < 8; k++) {
        size_t n = (size_t[]){1, 40, 200, 7, 0, 333, 64, 128}[k];
        const int64_t *sv[1] = {perm + 37 * k};
        size_t sn[1] = {n};
        gkv_sample_opts o = {0};
        int nl = 1 + k % 3;
        gkv_batch_spec sp;

        o.seed = 1000 + (uint64_t)k;
        o.dir = k % 2 ? GKV_DIR_OUT : GKV_DIR_IN;
        o.flags = flags[k % 4];
        sp = homo_spec(sv, sn, fan[k % 4], nl, &o);
        edges += batch_check(c, &sp);
        /* the seeds fed back from the last batch's results */
        if (k == 2) {
            gkv_block blocks[NL_MAX];
            gkv_batch_out out = {blocks, NULL, NULL, NULL, 0, NULL, NULL, NULL,
                                 NULL};
            gkv_batch_spec s2 = sp;

            s2.nfeats = s2.nefeats = 0;
            s2.label = NULL;
            int64_t *fed;

            NET_OK(gkv_client_sample_batch(c, &s2, &out));
            sv[0] = blocks[0].nodes[0].ids;
            sn[0] = blocks[0].nodes[0].num_dst;
            fed = dup_bytes(sv[0], sn[0] * 8);
            s2.nlayers = 1;
            edges += batch_check_mode(c, &s2, modes[0]);
            /* the arena's seeds last one call: the other modes on a copy */
            sv[0] = fed;
            for (int m = 1; m < MODES; m++)
                batch_check_mode(c, &s2, modes[m]);
            free(fed);
        }
    }
    assert_true(edges > 1000);
    free(perm);
}

static void
test_homo_one_server(void **state)
{
    struct gkvt_ng *f = *state;
    gkv_client *c = homo_serve(f, 1, "homo1");

    homo_batches(f, c);
    NET_OK(gkv_client_close(c));
}

static void
test_homo_two_servers(void **state)
{
    struct gkvt_ng *f = *state;
    gkv_client *c = homo_serve(f, 2, "homo2");

    homo_batches(f, c);
    NET_OK(gkv_client_close(c));
}

/* ---- the heterogeneous graph -------------------------------------------------- */

/* The user/item graph (weighted follows) in two partitions, nserv servers
 * a machine, features of both node types, a user label and a feature of
 * the clicks; a client of 'group'. */
static gkv_client *
hetero_serve(struct gkvt_ng *f, int nserv, const char *group)
{
    gkv_graph *g = gkvt_ui_graph(31, 1);
    gkv_client *c;

    f->j.nmach = 2;
    gkvt_partition(g, f->j.dir, "hparts", "h", 2, 3, NULL, 0, f->j.json,
                   sizeof f->j.json);
    gkv_graph_free(g);
    gkvt_ng_serve(f, nserv);
    c = gkvt_ng_client(f, group);
    tensor_make(c, "node/user/feat", GKVT_UI_USERS, 4, 1, -1);
    tensor_make(c, "node/item/feat", GKVT_UI_ITEMS, 3, 2, -1);
    tensor_make(c, "node/user/label", GKVT_UI_USERS, 0, 3, -1);
    tensor_make(c, "edge/user:clicks:item/w", GKVT_UI_CLICKS, 1, 4, -1);
    tensor_make(c, "edge/user:follows:user/w", GKVT_UI_FOLLOWS, 2, 7, -1);
    return c;
}

static void
hetero_batches(gkv_client *c)
{
    static const gkv_typed_tensor feats[2] = {{0, "node/user/feat"},
                                              {1, "node/item/feat"}};
    static const gkv_typed_tensor label = {0, "node/user/label"};
    static const gkv_typed_tensor efeats[2] = {{1, "edge/user:clicks:item/w"},
                                               {0, "edge/user:follows:user/w"}};
    static const int fan[3 * 3] = {2, 3, 1, 4, -1, 3, 5, 5, 5};
    size_t edges = 0;

    for (int k = 0; k < 6; k++) {
        struct gkvt_ui_seeds sd;
        gkv_sample_opts o = {0};
        gkv_batch_spec sp = {0};

        gkvt_ui_seeds_make(&sd, k);
        if (k == 3)
            sd.ns[1] = 0;          /* users only */
        o.seed = 70 + (uint64_t)k;
        o.dir = k % 2 ? GKV_DIR_OUT : GKV_DIR_IN;
        /* (weighted: the homogeneous graph's; here only follows have
         * weights) */
        o.flags = k % 3 == 1 ? GKV_SAMPLE_REPLACE : 0;
        sp.seeds = sd.sv;
        sp.nseeds = sd.ns;
        sp.fanouts = fan;
        sp.nfan = 3;
        sp.nlayers = 2 + k % 2;
        sp.opts = &o;
        sp.feats = feats;
        sp.nfeats = 2;
        sp.label = &label;
        sp.efeats = efeats;
        sp.nefeats = 2;
        edges += batch_check(c, &sp);
    }
    assert_true(edges > 1000);
}

static void
test_hetero_one_server(void **state)
{
    struct gkvt_ng *f = *state;
    gkv_client *c = hetero_serve(f, 1, "het1");

    hetero_batches(c);
    NET_OK(gkv_client_close(c));
}

static void
test_hetero_two_servers(void **state)
{
    struct gkvt_ng *f = *state;
    gkv_client *c = hetero_serve(f, 2, "het2");

    hetero_batches(c);
    NET_OK(gkv_client_close(c));
}

/* ---- batches at once ------------------------------------------------------------- */

#define NTHR  4
#define NSETS 6

struct conc {
    gkv_client *c;               /* the thread's clone */
    int64_t (*sets)[100];        /* [NSETS] seed sets */
    struct bres *ref;            /* [NSETS], made beforehand */
    int who, bad;
};

static const int conc_fan[2] = {10, 10};

/* 1 when two copies of homogeneous blocks hold the same arrays. */
static int
bcopy_eq(const struct gkvt_bcopy *a, const struct gkvt_bcopy *b)
{
    if (a->nl != b->nl)
        return 0;
    for (int i = 0; i < a->nl; i++) {
        size_t n = a->nsrc[i][0], m = a->ne[i][0];

        if (n != b->nsrc[i][0] || a->ndst[i][0] != b->ndst[i][0] ||
            m != b->ne[i][0] || memcmp(a->ids[i][0], b->ids[i][0], n * 8) ||
            memcmp(a->es[i][0], b->es[i][0], m * 8) ||
            memcmp(a->ed[i][0], b->ed[i][0], m * 8) ||
            memcmp(a->ee[i][0], b->ee[i][0], m * 8))
            return 0;
    }
    return 1;
}

/* Set k: 100 seeds, 70 of machine k % 2's nodes and 30 of the other's,
 * so that half the sets go to each machine and every batch needs both. */
static void
conc_sets(struct gkvt_ng *f, int64_t (*sets)[100])
{
    for (int k = 0; k < NSETS; k++) {
        int n = 0, mine = 0;

        for (int64_t v = 13 * k; v < f->n && n < 100; v += 3) {
            int own = gkvt_ng_owner_of(f, v, 0) == k % 2;
            if (own ? mine < 70 : n - mine < 30) {
                sets[k][n++] = v;
                mine += own;
            }
        }
        assert_int_equal(n, 100);
    }
}

static gkv_batch_spec
conc_spec(const int64_t **sv, size_t *sn, gkv_sample_opts *o,
          int64_t (*sets)[100], int k)
{
    sv[0] = sets[k];
    sn[0] = 100;
    memset(o, 0, sizeof *o);
    o->seed = 500 + (uint64_t)k;
    o->dir = k % 4 < 2 ? GKV_DIR_IN : GKV_DIR_OUT;
    return homo_spec(sv, sn, conc_fan, 2, o);
}

static void *
conc_run(void *arg)
{
    struct conc *x = arg;

    for (int round = 0; round < 5; round++)
        for (int j = 0; j < NSETS; j++) {
            int k = (j + x->who) % NSETS;
            const int64_t *sv[1];
            size_t sn[1];
            gkv_sample_opts o;
            gkv_batch_spec sp = conc_spec(sv, sn, &o, x->sets, k);
            struct bres r;

            if (batch_take(x->c, &sp, &r) != GKV_OK) {
                fprintf(stderr, "thread %d: %s\n", x->who, gkv_net_errmsg());
                x->bad = 1;
                return NULL;
            }
            if (!bcopy_eq(&r.bc, &x->ref[k].bc) ||
                r.fb[0] != x->ref[k].fb[0] ||
                memcmp(r.feat[0], x->ref[k].feat[0], r.fb[0]) != 0 ||
                r.lb != x->ref[k].lb ||
                memcmp(r.label, x->ref[k].label, r.lb) != 0 ||
                r.efb[1] != x->ref[k].efb[1] ||
                memcmp(r.ef[1], x->ref[k].ef[1], r.efb[1]) != 0)
                x->bad = 1;
            bres_free(&r);
        }
    return NULL;
}

/* NTHR threads, each with a clone, batches at once, half of them asked of
 * each machine: the two machines' servers (two each, one batch thread
 * each) sample and pull through each other all the time. Every batch == the one made before,
 * alone; nothing hangs (the program's time limit). */
static void
test_concurrent(void **state)
{
    static const char *const one[] = {"--batch-threads", "1", NULL};
    struct gkvt_ng *f = *state;
    gkv_client *c;
    struct conc x[NTHR];
    struct bres ref[NSETS];
    pthread_t th[NTHR];
    int64_t sets[NSETS][100];

    /* one batch thread a server: batches queue behind each other */
    gkvt_ng_extra = one;
    c = homo_serve(f, 2, "conc");
    gkvt_ng_extra = NULL;
    conc_sets(f, sets);
    for (int k = 0; k < NSETS; k++) {
        const int64_t *sv[1];
        size_t sn[1];
        gkv_sample_opts o;
        gkv_batch_spec sp = conc_spec(sv, sn, &o, sets, k);

        batch_check(c, &sp);
        NET_OK(batch_take(c, &sp, &ref[k]));
    }
    for (int i = 0; i < NTHR; i++) {
        memset(&x[i], 0, sizeof x[i]);
        NET_OK(gkv_client_clone(c, &x[i].c));
        x[i].sets = sets;
        x[i].ref = ref;
        x[i].who = i;
        assert_int_equal(pthread_create(&th[i], NULL, conc_run, &x[i]), 0);
    }
    for (int i = 0; i < NTHR; i++) {
        pthread_join(th[i], NULL);
        assert_false(x[i].bad);
        NET_OK(gkv_client_close(x[i].c));
    }
    for (int k = 0; k < NSETS; k++)
        bres_free(&ref[k]);
    NET_OK(gkv_client_close(c));
}

/* ---- bad input --------------------------------------------------------------------- */

static void *
null_alloc(void *arg, int kind, size_t index, size_t bytes)
{
    (void)arg;
    (void)kind;
    (void)index;
    (void)bytes;
    return NULL;
}

static void
test_bad_input(void **state)
{
    struct gkvt_ng *f = *state;
    gkv_client *c = homo_serve(f, 1, "bad");
    int64_t seeds[4] = {1, 2, 3, 4};
    const int64_t *sv[1] = {seeds};
    size_t sn[1] = {4};
    int fan[4] = {3, 3, 3, 3}, badfan[2] = {3, -2};
    gkv_sample_opts o = {0};
    gkv_batch_spec sp = homo_spec(sv, sn, fan, 2, &o), s2;
    gkv_block blocks[NL_MAX];
    const void *feat[4], *ef[4 * NL_MAX];
    size_t fb[4], efb[4 * NL_MAX];
    gkv_batch_out out = {blocks, feat, fb, NULL, 0, ef, efb, NULL, NULL};
    gkv_typed_tensor t;
    const int64_t *exv[1] = {seeds};
    size_t exn[1] = {1};
    const char *wf[1] = {"w"};

    batch_check(c, &sp);
    /* an unknown feature, label and edge feature: named */
    s2 = sp;
    t = (gkv_typed_tensor){0, "node/_N/nosuch"};
    s2.feats = &t;
    NET_FAILS(gkv_client_sample_batch(c, &s2, &out), GKV_ENOTFOUND,
              "feature tensor 'node/_N/nosuch'");
    assert_null(blocks[0].nodes);
    s2 = sp;
    s2.label = &t;
    NET_FAILS(gkv_client_sample_batch(c, &s2, &out), GKV_ENOTFOUND,
              "label tensor 'node/_N/nosuch'");
    s2 = sp;
    t.name = "edge/x/y";
    s2.efeats = &t;
    NET_FAILS(gkv_client_sample_batch(c, &s2, &out), GKV_ENOTFOUND,
              "edge feature tensor 'edge/x/y'");
    /* a label of half the nodes' rows */
    tensor_make(c, "node/_N/half", (uint64_t)f->n / 2, 0, 9, 0);
    s2 = sp;
    t.name = "node/_N/half";
    s2.label = &t;
    NET_FAILS(gkv_client_sample_batch(c, &s2, &out), GKV_EINVAL,
              "label tensor 'node/_N/half' holds the rows [0, 512)");
    /* a type the graph does not have */
    s2 = sp;
    t = (gkv_typed_tensor){1, "node/_N/feat"};
    s2.feats = &t;
    NET_FAILS(gkv_client_sample_batch(c, &s2, &out), GKV_EINVAL,
              "feats[0] ('node/_N/feat'): node type 1");
    /* fanouts: the wrong length, below -1 */
    s2 = sp;
    s2.nfan = 2;
    NET_FAILS(gkv_client_sample_batch(c, &s2, &out), GKV_EINVAL,
              "nfan 2 is neither 1 nor the number of edge types");
    s2 = sp;
    s2.fanouts = badfan;
    s2.nlayers = 2;
    NET_FAILS(gkv_client_sample_batch(c, &s2, &out), GKV_EINVAL,
              "fanout[1] = -2");
    s2 = sp;
    s2.nlayers = 0;
    NET_FAILS(gkv_client_sample_batch(c, &s2, &out), GKV_EINVAL, "nlayers 0");
    /* seeds: out of range, twice */
    seeds[2] = f->n;
    NET_FAILS(gkv_client_sample_batch(c, &sp, &out), GKV_ERANGE,
              "seeds of node type 0");
    seeds[2] = 1;
    NET_FAILS(gkv_client_sample_batch(c, &sp, &out), GKV_EINVAL,
              "seeds[0][2] = 1 is given twice (first at index 0)");
    seeds[2] = 3;
    /* what a batch on the servers does not take */
    o.exclude = exv;
    o.exclude_n = exn;
    NET_FAILS(gkv_client_sample_batch(c, &sp, &out), GKV_EINVAL,
              "opts->exclude is given");
    o.exclude = NULL;
    o.exclude_n = NULL;
    o.edge_w_feat = wf;
    NET_FAILS(gkv_client_sample_batch(c, &sp, &out), GKV_EINVAL,
              "opts->edge_w_feat is given");
    o.edge_w_feat = NULL;
    /* flags it does not know; a rows_alloc that fails */
    s2 = sp;
    s2.flags = 0x6;
    NET_FAILS(gkv_client_sample_batch(c, &s2, &out), GKV_EINVAL,
              "flags 0x6 have unknown bits");
    out.rows_alloc = null_alloc;
    NET_FAILS(gkv_client_sample_batch(c, &sp, &out), GKV_ENOMEM,
              "rows_alloc returned NULL");
    sp.flags = GKV_BATCH_RELAY;
    NET_FAILS(gkv_client_sample_batch(c, &sp, &out), GKV_ENOMEM,
              "rows_alloc returned NULL");
    sp.flags = 0;
    out.rows_alloc = NULL;
    /* the client goes on */
    batch_check(c, &sp);
    NET_OK(gkv_client_close(c));
}

/* ---- a peer server dies --------------------------------------------------------- */

/* The homogeneous graph on 2 machines of one server each (srv), a client
 * of 'group' with a timeout of 3 s, and up to 64 seeds of machine 0's. */
static gkv_client *
kill_serve(struct gkvt_ng *f, const char *group, struct gkvt_proc *srv[2],
           int64_t seeds[64], size_t sn[1])
{
    gkv_client_opts co = {0};
    gkv_client *c;

    gkvt_ng_graph_make(f, HOMO_SCALE, 2);
    gkvt_serve(&f->j, 2, 1, NULL, srv);
    co.timeout_ms = 3000;
    c = gkvt_connect(f->j.cfg, group, 0, &co);
    snprintf(g_efeat, sizeof g_efeat, "edge/%s/w",
             gkv_pbook_etype_name(gkv_client_pbook(c), 0));
    tensor_make(c, "node/_N/label", (uint64_t)f->n, 0, 5, -1);
    tensor_make(c, g_efeat, (uint64_t)f->m, 2, 6, -1);
    sn[0] = 0;
    for (int64_t v = 0; v < f->n && sn[0] < 64; v++)
        if (gkvt_ng_owner_of(f, v, 0) == 0)
            seeds[sn[0]++] = v;
    return c;
}

/* The server of machine 1 killed: a batch asked of machine 0 (its seeds
 * are) fails with GKV_ETIMEDOUT naming machine 1's server within the
 * client's timeout; restarted, batches go on. */
static void
test_peer_killed(void **state)
{
    struct gkvt_ng *f = *state;
    struct gkvt_proc *srv[2];
    gkv_client *c;
    int64_t seeds[64];
    const int64_t *sv[1] = {seeds};
    size_t sn[1] = {0};
    int fan[2] = {8, 8};
    gkv_sample_opts o = {0};
    gkv_batch_spec sp;
    struct bres r;
    char m1[64];
    uint64_t t0, ms;
    gkv_err rc;

    /* machine 0's nodes: machine 0's server is asked, and needs machine 1
     * for their neighbours */
    c = kill_serve(f, "peer", srv, seeds, sn);
    sp = homo_spec(sv, sn, fan, 2, &o);
    batch_check(c, &sp);
    gkvt_proc_kill(srv[1]);
    snprintf(m1, sizeof m1, "127.0.0.1:%d", f->j.base + 8);
    t0 = gkv__now_ms();
    rc = batch_take(c, &sp, &r);
    ms = gkv__now_ms() - t0;
    assert_int_equal(rc, GKV_ETIMEDOUT);
    assert_non_null(strstr(gkv_net_errmsg(), m1));
    /* answered by machine 0's server, before the client's own deadline */
    assert_non_null(strstr(gkv_net_errmsg(), "through the peer servers"));
    assert_true(ms < 3000);
    /* again: still named, still in time, nothing hangs */
    t0 = gkv__now_ms();
    assert_int_equal(batch_take(c, &sp, &r), GKV_ETIMEDOUT);
    assert_true(gkv__now_ms() - t0 < 3000);
    assert_non_null(strstr(gkv_net_errmsg(), m1));
    /* back on its port: the next batch hand-shakes with it again */
    assert_non_null(srv[1] = gkvt_server_try(&f->j, 1, 0, NULL));
    batch_check(c, &sp);
    NET_OK(gkv_client_close(c));
}

/* The owner of rows the client pulls after the asked server replied
 * killed: machine 0's seeds and one hop (machine 0 samples their columns
 * itself, and its peer client knows the tensors from the first batch), so
 * machine 1 is needed only for the input nodes' rows it holds. By
 * default the client's own pull of them fails with
 * GKV_ETIMEDOUT naming machine 1's server within the client's timeout
 * (the rows_alloc memory the caller's, freed by batch_take_mode); with
 * GKV_BATCH_RELAY the asked server's pull fails, named, before that.
 * Restarted, batches go on every way. */
static void
test_owner_killed(void **state)
{
    static const unsigned kill_modes[3] = {0, ALLOC, GKV_BATCH_RELAY};
    struct gkvt_ng *f = *state;
    struct gkvt_proc *srv[2];
    gkv_client *c;
    int64_t seeds[64];
    const int64_t *sv[1] = {seeds};
    size_t sn[1] = {0}, far = 0;
    int fan[1] = {8};
    gkv_sample_opts o = {0};
    gkv_batch_spec sp;
    struct bres r;
    char m1[64];
    uint64_t t0, ms;
    gkv_err rc;

    c = kill_serve(f, "owner", srv, seeds, sn);
    sp = homo_spec(sv, sn, fan, 1, &o);
    batch_check(c, &sp);
    /* the batch does need machine 1's rows */
    NET_OK(batch_take(c, &sp, &r));
    for (size_t i = 0; i < r.bc.nsrc[0][0]; i++)
        far += gkvt_ng_owner_of(f, r.bc.ids[0][0][i], 0) == 1;
    bres_free(&r);
    assert_true(far > 0);
    gkvt_proc_kill(srv[1]);
    snprintf(m1, sizeof m1, "127.0.0.1:%d", f->j.base + 8);
    for (int k = 0; k < 3; k++) {
        int relay = (kill_modes[k] & GKV_BATCH_RELAY) != 0;

        t0 = gkv__now_ms();
        rc = batch_take_mode(c, &sp, kill_modes[k], &r);
        ms = gkv__now_ms() - t0;
        if (rc != GKV_ETIMEDOUT || strstr(gkv_net_errmsg(), m1) == NULL)
            fail_msg("mode 0x%x: %s: %s", kill_modes[k], gkv_err_name(rc),
                     gkv_net_errmsg());
        /* relayed: the asked server's error; else the client's own */
        assert_true((strstr(gkv_net_errmsg(), "through the peer servers") !=
                     NULL) == relay);
        assert_true(ms < (relay ? 3000u : 3500u));
    }
    assert_non_null(srv[1] = gkvt_server_try(&f->j, 1, 0, NULL));
    batch_check(c, &sp);
    NET_OK(gkv_client_close(c));
}

/* ---- write-back and requests by hand ------------------------------------------ */

static void enc_req(net_wr *w, const void *a);

/* A feature the servers keep in write-back mode (pushes in RAM, flushed
 * later): a batch's rows are what a pull sees, the pushes included. */
static void
test_writeback(void **state)
{
    static const char *const wb[] = {"--writeback", "node/_N/emb", NULL};
    static const gkv_typed_tensor emb = {0, "node/_N/emb"};
    struct gkvt_ng *f = *state;
    gkv_client *c;
    int64_t seeds[50];
    const int64_t *sv[1] = {seeds};
    size_t sn[1] = {50};
    int fan[2] = {6, 6};
    gkv_sample_opts o = {0};
    gkv_batch_spec sp;
    uint64_t *ids = malloc((size_t)1024 * 8);
    float *rows = malloc((size_t)1024 * 4 * 4);

    gkvt_ng_extra = wb;
    c = homo_serve(f, 1, "wb");
    gkvt_ng_extra = NULL;
    tensor_make(c, "node/_N/emb", (uint64_t)f->n, 4, 8, -1);
    for (int i = 0; i < 50; i++)
        seeds[i] = (i * 37 + 11) % f->n;
    sp = homo_spec(sv, sn, fan, 2, &o);
    sp.feats = &emb;
    batch_check(c, &sp);
    /* every row pushed (assign), then batches see the new values */
    assert_non_null(ids);
    assert_non_null(rows);
    for (int64_t v = 0; v < f->n; v++) {
        ids[v] = (uint64_t)v;
        for (int j = 0; j < 4; j++)
            rows[v * 4 + j] = (float)v * 2 + (float)j;
    }
    NET_OK(gkv_client_push(c, "node/_N/emb", ids, (size_t)f->n, rows,
                           (size_t)f->n * 16, NULL));
    {
        struct bres r;
        NET_OK(batch_take(c, &sp, &r));
        for (size_t i = 0; i < r.bc.nsrc[0][0]; i++)
            assert_memory_equal((float *)r.feat[0] + 4 * i,
                                rows + 4 * r.bc.ids[0][0][i], 16);
        bres_free(&r);
    }
    batch_check(c, &sp);
    free(ids);
    free(rows);
    NET_OK(gkv_client_close(c));
}

/* Requests the gkv client would not send, by hand: each refused, naming
 * what was wrong, and the server goes on. */
static void
test_raw_requests(void **state)
{
    struct gkvt_ng *f = *state;
    gkv_client *c = homo_serve(f, 1, "raw");
    int64_t s0[3] = {1, 2, 3};
    const int64_t *sv[2] = {s0, s0};
    size_t sn[2] = {3, 3}, len;
    int fan[2] = {3, 3};
    net_tref ft = {0, "node/_N/feat"};
    net_batch_enc e = {0}, x;
    struct gkvt_rep rep = {0};
    uint64_t sess, req = 1;
    unsigned char *pl;
    int s;
    static const struct {
        const char *what;
        gkv_err rc;
    } want[] = {
        {"the request has 2 node types", GKV_EINVAL},
        {"fanouts[1] = -2", GKV_EINVAL},
        {"flags 0x204 have unknown bits", GKV_EINVAL},
        {"direction 5", GKV_EINVAL},
        {"seeds[0][2] = 1024 is not a node of type 0", GKV_ERANGE},
        {"is given node type 3", GKV_EINVAL},
        {"more than the client takes in a reply (100", GKV_EINVAL},
        {"3 fanouts a layer", GKV_EINVAL},
        /* just above the caps on the tensors (their row entries would
         * overflow the server's 32-bit count with enough of them) */
        {"num_feats: 1025 features, more than 1024", GKV_EPROTO},
        {"num_efeats: 1025 edge features, more than 1024", GKV_EPROTO},
    };
    static net_tref many[NET_BATCH_TENSORS_MAX + 1];

    e.nlayers = 1;
    e.nnt = 1;
    e.net = 1;
    e.nfan = 1;
    e.seed = 3;
    e.timeout_ms = 5000;
    e.max_reply = 1u << 30;
    e.fanout = fan;
    e.seeds = sv;
    e.nseeds = sn;
    e.feats = &ft;
    e.nfeats = 1;
    s = gkvt_raw_socket(f->j.base, 10000);
    sess = gkvt_rjoin(s, "raw", 7, NET_HS_OBSERVER, &rep);
    assert_true(sess != 0);
    for (size_t i = 0; i < sizeof many / sizeof *many; i++)
        many[i] = ft;
    for (size_t k = 0; k < sizeof want / sizeof *want; k++) {
        int64_t big[3] = {1, 2, f->n};
        net_tref bad = {3, "node/_N/feat"};
        int fan3[3] = {1, 1, 1};

        x = e;
        switch (k) {
        case 0: x.nnt = 2; break;
        case 1: x.nlayers = 2; fan[1] = -2; break;
        case 2: x.flags = 0x204; break;
        case 3: x.dir = 5; break;
        case 4: sv[0] = big; break;
        case 5: x.feats = &bad; break;
        case 6: x.max_reply = 100; break;
        case 7: x.nfan = 3; x.fanout = fan3; break;
        case 8: x.feats = many; x.nfeats = NET_BATCH_TENSORS_MAX + 1; break;
        case 9: x.efeats = many; x.nefeats = NET_BATCH_TENSORS_MAX + 1; break;
        }
        pl = gkvt_encode(enc_req, &x, &len);
        assert_int_equal(gkvt_rcall(s, NET_SAMPLE_BATCH, sess, req++, pl, len,
                                    &rep), 0);
        free(pl);
        fan[1] = 3;
        sv[0] = s0;
        if (rep.h.status != (int32_t)want[k].rc ||
            strstr(rep.msg, want[k].what) == NULL)
            fail_msg("case %zu: status %d '%s', expected %s '%s'", k,
                     rep.h.status, rep.msg, gkv_err_name(want[k].rc),
                     want[k].what);
    }
    /* a truncated payload: malformed */
    pl = gkvt_encode(enc_req, &e, &len);
    assert_int_equal(gkvt_rcall(s, NET_SAMPLE_BATCH, sess, req++, pl, len - 3,
                                &rep), 0);
    assert_int_equal(rep.h.status, GKV_EPROTO);
    /* the request as sent: answered */
    assert_int_equal(gkvt_rcall(s, NET_SAMPLE_BATCH, sess, req++, pl, len,
                                &rep), 0);
    assert_int_equal(rep.h.status, 0);
    free(pl);
    free(rep.pl);
    nn_close(s);
    /* a trainer of any rank has clones, each with an observer rank of
     * its own: a clone of a clone, and two clones at once, all answer */
    {
        gkv_client *hi = gkvt_connect(f->j.cfg, "raw", 32768 + 7, NULL);
        gkv_client *cl = NULL, *cl2 = NULL, *cl3 = NULL;
        uint64_t ids[3] = {3, 0, 7};
        int64_t r1[3], r2[3];

        NET_OK(gkv_client_clone(hi, &cl));
        NET_OK(gkv_client_clone(hi, &cl2));
        NET_OK(gkv_client_clone(cl, &cl3));
        NET_OK(gkv_client_pull(c, "node/_N/label", ids, 3, r1, sizeof r1));
        NET_OK(gkv_client_pull(cl3, "node/_N/label", ids, 3, r2, sizeof r2));
        assert_memory_equal(r1, r2, sizeof r1);
        memset(r2, 0, sizeof r2);
        NET_OK(gkv_client_pull(cl2, "node/_N/label", ids, 3, r2, sizeof r2));
        assert_memory_equal(r1, r2, sizeof r1);
        NET_OK(gkv_client_close(cl3));
        NET_OK(gkv_client_close(cl2));
        NET_OK(gkv_client_close(cl));
        NET_OK(gkv_client_close(hi));
    }
    NET_OK(gkv_client_close(c));
}

/* A server whose max_msg is below the client's: a batch's reply is bounded
 * by the smaller, and one too big is refused after the hop that made it
 * so, before the next is sampled. */
static void
test_server_max_msg(void **state)
{
    static const char *const small[] = {"--max-msg", "4096", NULL};
    struct gkvt_ng *f = *state;
    gkv_client *c;
    int64_t s0[50];
    const int64_t *sv[1] = {s0};
    size_t sn[1] = {50}, len;
    int fan[3] = {10, 10, 10};
    net_tref ft = {0, "node/_N/feat"};
    net_batch_enc e = {0};
    struct gkvt_rep rep = {0};
    unsigned char *pl;
    uint64_t sess;
    int s;

    gkvt_ng_extra = small;
    c = homo_serve(f, 1, "maxmsg");
    gkvt_ng_extra = NULL;
    for (int i = 0; i < 50; i++)
        s0[i] = (i * 37 + 11) % f->n;
    e.nlayers = 3;
    e.nnt = 1;
    e.net = 1;
    e.nfan = 1;
    e.seed = 3;
    e.timeout_ms = 5000;
    e.max_reply = 1u << 30;          /* the client's: far above 4096 */
    e.fanout = fan;
    e.seeds = sv;
    e.nseeds = sn;
    e.feats = &ft;
    e.nfeats = 1;
    s = gkvt_raw_socket(f->j.base, 10000);
    sess = gkvt_rjoin(s, "maxmsg", 7, NET_HS_OBSERVER, &rep);
    assert_true(sess != 0);
    pl = gkvt_encode(enc_req, &e, &len);
    assert_int_equal(gkvt_rcall(s, NET_SAMPLE_BATCH, sess, 1, pl, len, &rep),
                     0);
    free(pl);
    /* refused by the blocks of the first hops, not the last */
    if (rep.h.status != GKV_EINVAL ||
        strstr(rep.msg, "the blocks of hops 0..") == NULL ||
        strstr(rep.msg, "hops 0..2") != NULL ||
        strstr(rep.msg, "this server sends in a reply (4096") == NULL)
        fail_msg("status %d '%s'", rep.h.status, rep.msg);
    free(rep.pl);
    nn_close(s);
    NET_OK(gkv_client_close(c));
}

/* ---- stops and queues ------------------------------------------------------------ */

/* Sends (without waiting) a one-layer SAMPLE_BATCH of three seeds that
 * machine 1 owns, so that every such batch needs machine 1 to sample
 * them (after its first batch, machine 0 keeps its link to machine 1 and
 * the routes, and then needs machine 1 for seeds of its own only for the
 * rows of neighbours machine 1 owns: seeds 1, 2 and 3, used before, have
 * no in-neighbours), with 'timeout_ms', to machine m's server over a raw
 * socket joined as ("stopq", rank); the socket, for gkvt_rrecv, into
 * *sock. */
static void
raw_batch_send(struct gkvt_ng *f, int m, uint32_t rank, uint32_t timeout_ms,
               int *sock)
{
    static int64_t s0[3];
    static const int64_t *sv[1] = {s0};
    static size_t sn[1] = {3};
    static int fan[1] = {3};
    static net_tref ft = {0, "node/_N/feat"};
    net_batch_enc e = {0};
    struct gkvt_rep rep = {0};
    unsigned char *pl;
    uint64_t sess;
    size_t len;

    for (int64_t v = 0, k = 0; k < 3; v++) {
        assert_true(v < f->n);
        if (gkvt_ng_owner_of(f, v, 0) == 1)
            s0[k++] = v;
    }
    e.nlayers = 1;
    e.nnt = 1;
    e.net = 1;
    e.nfan = 1;
    e.seed = 3;
    e.timeout_ms = timeout_ms;
    e.max_reply = 1u << 30;
    e.fanout = fan;
    e.seeds = sv;
    e.nseeds = sn;
    e.feats = &ft;
    e.nfeats = 1;
    *sock = gkvt_raw_socket(f->j.base + 8 * m, 30000);
    sess = gkvt_rjoin(*sock, "stopq", rank, NET_HS_OBSERVER, &rep);
    assert_true(sess != 0);
    free(rep.pl);
    pl = gkvt_encode(enc_req, &e, &len);
    gkvt_rsend(*sock, NET_SAMPLE_BATCH, sess, 1, pl, len);
    free(pl);
}

/* A server stopped (SIGTERM) while its batch thread waits on a peer that
 * does not answer (SIGSTOP), and killed 5 s later as gkv-launch does: the
 * write-back pushes made before the stop are in its store all the same
 * (written before the batch threads are waited on, not only after). */
static void
test_stop_writeback(void **state)
{
    static const char *const wb[] = {"--writeback", "node/_N/emb",
                                     "--flush-ms", "600000", NULL};
    struct gkvt_ng *f = *state;
    struct gkvt_proc *srv[2];
    gkv_client *c, *c2;
    uint64_t *ids = malloc((size_t)1024 * 8);
    float *rows = malloc((size_t)1024 * 16), *got = malloc((size_t)1024 * 16);
    int sock;

    assert_non_null(ids);
    assert_non_null(rows);
    assert_non_null(got);
    gkvt_ng_graph_make(f, HOMO_SCALE, 2);
    gkvt_serve(&f->j, 2, 1, wb, srv);
    c = gkvt_ng_client(f, "stopwb");
    tensor_make(c, "node/_N/emb", (uint64_t)f->n, 4, 8, -1);
    for (int64_t v = 0; v < f->n; v++) {
        ids[v] = (uint64_t)v;
        for (int j = 0; j < 4; j++)
            rows[v * 4 + j] = (float)v * 3 + (float)j;
    }
    /* pushed: in the servers' RAM only (the next flush is 10 min away) */
    NET_OK(gkv_client_push(c, "node/_N/emb", ids, (size_t)f->n, rows,
                           (size_t)f->n * 16, NULL));
    /* machine 0's batch thread stuck on machine 1 (its deadline 15 s) */
    assert_int_equal(kill(srv[1]->pid, SIGSTOP), 0);
    raw_batch_send(f, 0, 1, 20000, &sock);
    tools__sleep_ms(500);
    assert_int_equal(kill(srv[0]->pid, SIGTERM), 0);
    if (!gkvt_proc_wait(srv[0], 5000))
        gkvt_proc_kill(srv[0]);          /* gkv-launch's GRACE_S */
    nn_close(sock);
    assert_int_equal(kill(srv[1]->pid, SIGCONT), 0);
    /* machine 0 again, on its store: the rows it owns are the pushed
     * ones (c stays a member: its leave would stop machine 1) */
    assert_non_null(srv[0] = gkvt_server_try(&f->j, 0, 0, NULL));
    c2 = gkvt_ng_client(f, "stopwb2");
    NET_OK(gkv_client_pull(c2, "node/_N/emb", ids, (size_t)f->n, got,
                           (size_t)f->n * 16));
    for (int64_t v = 0; v < f->n; v++)
        if (gkvt_ng_owner_of(f, v, 0) == 0 &&
            memcmp(got + 4 * v, rows + 4 * v, 16) != 0)
            fail_msg("node %lld (machine 0's): %g, pushed %g: the push was "
                     "lost with the stop", (long long)v, got[4 * v],
                     rows[4 * v]);
    NET_OK(gkv_client_close(c2));
    (void)gkv_client_close(c);       /* its session on machine 0 is gone */
    free(ids);
    free(rows);
    free(got);
}

/* One batch thread held by a batch waiting on a peer that does not
 * answer; a second batch, with a short timeout, waits in the queue past
 * its deadline: answered GKV_ETIMEDOUT for its wait as soon as it is
 * taken, not made for a client that gave up. The same batch is made once
 * before the peer stops, so that the held batch is not machine 0's first
 * (which needed machine 1 for its routes whatever the seeds: the test
 * then failed only now and then when the seeds stopped needing machine
 * 1; now it fails every time), and the held batch must come back made. */
static void
test_queue_deadline(void **state)
{
    static const char *const one[] = {"--batch-threads", "1", NULL};
    struct gkvt_ng *f = *state;
    struct gkvt_proc *srv[2];
    struct gkvt_rep rep = {0};
    gkv_client *c;
    int s1, s2;

    gkvt_ng_graph_make(f, HOMO_SCALE, 2);
    gkvt_serve(&f->j, 2, 1, one, srv);
    c = gkvt_ng_client(f, "queue");
    raw_batch_send(f, 0, 3, 20000, &s1);         /* both machines up */
    assert_int_equal(gkvt_rrecv(s1, &rep), 0);
    if (rep.h.status != GKV_OK)
        fail_msg("the batch with both machines up: status %d '%s'",
                 rep.h.status, rep.msg);
    nn_close(s1);
    assert_int_equal(kill(srv[1]->pid, SIGSTOP), 0);
    raw_batch_send(f, 0, 1, 20000, &s1);         /* holds the thread */
    tools__sleep_ms(300);
    raw_batch_send(f, 0, 2, 1000, &s2);          /* 750 ms to go */
    tools__sleep_ms(1500);
    /* the peer answers again: the first batch is made, then the second
     * is taken, its deadline past */
    assert_int_equal(kill(srv[1]->pid, SIGCONT), 0);
    assert_int_equal(gkvt_rrecv(s1, &rep), 0);
    if (rep.h.status != GKV_OK)
        fail_msg("the batch that held the thread: status %d '%s'",
                 rep.h.status, rep.msg);
    assert_int_equal(gkvt_rrecv(s2, &rep), 0);
    if (rep.h.status != GKV_ETIMEDOUT ||
        strstr(rep.msg, "in the batch queue") == NULL)
        fail_msg("the batch queued past its deadline: status %d '%s'",
                 rep.h.status, rep.msg);
    free(rep.pl);
    nn_close(s1);
    nn_close(s2);
    NET_OK(gkv_client_close(c));
}

/* Sends SIGCONT to the pid *arg after 1.5 s (a thread's). */
static void *
cont_later(void *arg)
{
    tools__sleep_ms(1500);
    kill(*(int *)arg, SIGCONT);
    return NULL;
}

/* The batch queue full (one thread held on a peer that does not answer,
 * 256 batches waiting): one more batch is refused at once (GKV_EBUSY);
 * gkv_client_sample_batch, told GKV_EBUSY, asks again within its timeout
 * and gets its batch once the queue drains, as every queued batch is
 * made. */
static void
test_queue_full(void **state)
{
    static const char *const one[] = {"--batch-threads", "1", NULL};
    struct gkvt_ng *f = *state;
    struct gkvt_proc *srv[2];
    struct gkvt_rep rep = {0};
    gkv_client *c;
    int64_t seeds[8];
    const int64_t *sv[1] = {seeds};
    size_t sn[1] = {0};
    int fan[2] = {4, 4}, sk[257], sx, pid;
    gkv_sample_opts o = {0};
    gkv_batch_spec sp;
    struct bres r;
    pthread_t th;

    gkvt_ng_graph_make(f, HOMO_SCALE, 2);
    gkvt_serve(&f->j, 2, 1, one, srv);
    c = gkvt_ng_client(f, "queue");
    homo_tensors(f, c);
    for (int64_t v = 0; v < f->n && sn[0] < 8; v++)
        if (gkvt_ng_owner_of(f, v, 0) == 0)
            seeds[sn[0]++] = v;
    sp = homo_spec(sv, sn, fan, 2, &o);
    assert_int_equal(kill(srv[1]->pid, SIGSTOP), 0);
    for (int i = 0; i < 257; i++) {
        raw_batch_send(f, 0, 10 + (uint32_t)i, 20000, &sk[i]);
        if (i == 0)
            tools__sleep_ms(300);       /* the one in hand */
    }
    tools__sleep_ms(300);
    raw_batch_send(f, 0, 10 + 257, 20000, &sx);
    assert_int_equal(gkvt_rrecv(sx, &rep), 0);
    if (rep.h.status != GKV_EBUSY || strstr(rep.msg, "requests wait") == NULL)
        fail_msg("a batch past the full queue: status %d '%s'", rep.h.status,
                 rep.msg);
    nn_close(sx);
    pid = srv[1]->pid;
    assert_int_equal(pthread_create(&th, NULL, cont_later, &pid), 0);
    NET_OK(batch_take(c, &sp, &r));
    bres_free(&r);
    pthread_join(th, NULL);
    for (int i = 0; i < 257; i++) {
        assert_int_equal(gkvt_rrecv(sk[i], &rep), 0);
        if (rep.h.status != GKV_OK)
            fail_msg("queued batch %d: status %d '%s'", i, rep.h.status,
                     rep.msg);
        nn_close(sk[i]);
    }
    free(rep.pl);
    batch_check(c, &sp);
    NET_OK(gkv_client_close(c));
}

/* A server stopped after its 8 batch threads each made a peer client,
 * a peer dead: the peer clients leave together, so the stop takes about
 * one leave's wait (500 ms), not one a thread. */
static void
test_stop_peer_clients(void **state)
{
    static const char *const eight[] = {"--batch-threads", "8", NULL};
    struct gkvt_ng *f = *state;
    struct gkvt_proc *srv[2];
    struct gkvt_rep rep = {0};
    gkv_client *c;
    int sk[8];
    double t0, t;

    gkvt_ng_graph_make(f, HOMO_SCALE, 2);
    gkvt_serve(&f->j, 2, 1, eight, srv);
    c = gkvt_ng_client(f, "stoppeers");
    /* 8 batches at once (the peer held back until each thread has one) */
    assert_int_equal(kill(srv[1]->pid, SIGSTOP), 0);
    for (int i = 0; i < 8; i++)
        raw_batch_send(f, 0, 40 + (uint32_t)i, 20000, &sk[i]);
    tools__sleep_ms(500);
    assert_int_equal(kill(srv[1]->pid, SIGCONT), 0);
    for (int i = 0; i < 8; i++) {
        assert_int_equal(gkvt_rrecv(sk[i], &rep), 0);
        assert_int_equal(rep.h.status, 0);
        nn_close(sk[i]);
    }
    free(rep.pl);
    gkvt_proc_kill(srv[1]);
    t0 = tools__now_s();
    assert_int_equal(kill(srv[0]->pid, SIGTERM), 0);
    assert_true(gkvt_proc_wait(srv[0], 20000));
    t = tools__now_s() - t0;
    fprintf(stderr, "net_batch_test: stopped in %.2f s\n", t);
    if (t > 2.5)
        fail_msg("the stop took %.2f s with a dead peer and 8 peer clients",
                 t);
    (void)gkv_client_close(c);
}

/* ---- clones --------------------------------------------------------------------- */

/* With a token: a clone and its original both sample batches and pull;
 * closing the clone stops no server; closing the original, the last
 * member, stops every server (their peer clients keep none up). */
static void
test_clone(void **state)
{
    struct gkvt_ng *f = *state;
    static const char tok[] = "0123456789abcdef0123456789abcdef";
    struct gkvt_proc *srv[4];
    char path[4300], arg[4300];
    const char *extra[3] = {"--token-file", arg, NULL};
    gkv_client *c = NULL, *cc = NULL, *c2 = NULL;
    gkv_client_opts co = {0};
    FILE *fp;
    int64_t seeds[30];
    const int64_t *sv[1] = {seeds};
    size_t sn[1] = {30};
    int fan[2] = {5, 5};
    gkv_sample_opts o = {0};
    gkv_batch_spec sp = homo_spec(sv, sn, fan, 2, &o);

    snprintf(path, sizeof path, "%s/tok", f->j.dir);
    snprintf(arg, sizeof arg, "%s", path);
    assert_non_null(fp = fopen(path, "w"));
    fprintf(fp, "%s\n", tok);
    fclose(fp);
    assert_int_equal(chmod(path, 0600), 0);
    gkvt_ng_graph_make(f, HOMO_SCALE, 2);
    gkvt_serve(&f->j, 2, 2, extra, srv);
    co.timeout_ms = 20000;
    NET_OK(gkv_client_connect(&c, f->j.cfg, tok, "cl", 3, &co));
    snprintf(g_efeat, sizeof g_efeat, "edge/%s/w",
             gkv_pbook_etype_name(gkv_client_pbook(c), 0));
    tensor_make(c, "node/_N/label", (uint64_t)f->n, 0, 5, -1);
    tensor_make(c, g_efeat, (uint64_t)f->m, 2, 6, -1);
    for (int i = 0; i < 30; i++)
        seeds[i] = (i * 131 + 7) % f->n;
    NET_OK(gkv_client_clone(c, &cc));
    NET_OK(gkv_client_clone(c, &c2));
    batch_check(cc, &sp);
    batch_check(c, &sp);
    batch_check(c2, &sp);
    NET_OK(gkv_client_close(cc));
    NET_OK(gkv_client_close(c2));
    /* the clones' leaving stopped nothing */
    for (int i = 0; i < 4; i++)
        assert_true(gkvt_proc_alive(srv[i]));
    batch_check(c, &sp);
    assert_int_equal(gkv_client_clone(NULL, &cc), GKV_EINVAL);
    {
        /* observer ranks: above every member's, drawn afresh */
        uint32_t r[64];
        int same = 0;

        for (int i = 0; i < 64; i++) {
            r[i] = gkv_client_observer_rank();
            assert_true(r[i] >= 0x80000000u);
            for (int j = 0; j < i; j++)
                same += r[i] == r[j];
        }
        assert_true(same <= 1);
    }
    NET_OK(gkv_client_close(c));
    for (int i = 0; i < 4; i++) {
        assert_true(gkvt_proc_wait(srv[i], 15000));
        assert_int_equal(gkvt_proc_code(srv[i]), 0);
    }
}

/* ---- the codec ---------------------------------------------------------------- */

static void
enc_req(net_wr *w, const void *a)
{
    net__enc_batch_req(w, a);
}

static void
enc_rep(net_wr *w, const void *a)
{
    net__enc_batch_rep(w, a);
}

/* Request and reply through the codec and back, and every truncation of
 * them refused (under ASan: without a read past the end or a leak). */
static void
test_wire(void **state)
{
    int64_t s0[3] = {5, 1, 9}, s1[1] = {4};
    const int64_t *sv[2] = {s0, s1};
    size_t sn[2] = {3, 1}, len;
    int fan[4] = {2, -1, 0, 3};
    net_tref ft[2] = {{0, "node/a/f"}, {1, "node/b/g"}}, lb = {0, "node/a/l"};
    net_tref ef[1] = {{1, "edge/x:y:z/w"}};
    net_batch_enc e = {0};
    net_batch_req q;
    net_batch_rep rp;
    net_rd rd;
    unsigned char *pl;
    int64_t ids0[3] = {7, (int64_t)1 << 33, 3}, src[2] = {1, 2}, dst[2] = {0};
    int64_t eid[2] = {5, 6};
    gkv_block_nodes bn[2] = {{ids0, 3, 1}, {NULL, 0, 0}};
    gkv_sample_edges be[2] = {{src, dst, eid, 2}, {NULL, NULL, NULL, 0}};
    gkv_block blk = {2, 2, bn, be};
    uint64_t rows_n[3] = {3, 1, 2}, row_bytes[3] = {4, 8, 2};
    unsigned char *slot[3];
    net_batch_renc re = {1, 2, 2, &blk, 1, 1, 1, rows_n, row_bytes, slot};

    (void)state;
    e.nlayers = 2;
    e.dir = 1;
    e.flags = 1;
    e.nnt = 2;
    e.net = 2;
    e.nfan = 2;
    e.seed = 77;
    e.timeout_ms = 1234;
    e.max_reply = 99999;
    e.fanout = fan;
    e.seeds = sv;
    e.nseeds = sn;
    e.feats = ft;
    e.nfeats = 2;
    e.label = &lb;
    e.efeats = ef;
    e.nefeats = 1;
    pl = gkvt_encode(enc_req, &e, &len);
    net__rd_init(&rd, pl, len);
    assert_int_equal(net__dec_batch_req(&rd, &q), 0);
    assert_int_equal(q.nlayers, 2);
    assert_int_equal(q.dir, 1);
    assert_int_equal(q.seed, 77);
    assert_int_equal(q.timeout_ms, 1234);
    assert_int_equal(q.max_reply, 99999);
    assert_int_equal(q.nseeds[0], 3);
    assert_memory_equal(q.seeds[0], s0, 24);
    assert_memory_equal(q.seeds[1], s1, 8);
    assert_int_equal(q.nfeats, 2);
    assert_int_equal(q.has_label, 1);
    assert_int_equal(q.nefeats, 1);
    assert_string_equal(q.tref[1].name, "node/b/g");
    assert_int_equal(q.tref[1].type, 1);
    assert_string_equal(q.tref[2].name, "node/a/l");
    assert_string_equal(q.tref[3].name, "edge/x:y:z/w");
    net__batch_req_free(&q);
    for (size_t cut = 0; cut < len; cut++) {
        net__rd_init(&rd, pl, cut);
        assert_int_equal(net__dec_batch_req(&rd, &q), -1);
    }
    free(pl);

    pl = gkvt_encode(enc_rep, &re, &len);
    memset(slot[0], 0xa1, 12);
    memset(slot[1], 0xb2, 8);
    memset(slot[2], 0xc3, 4);
    net__rd_init(&rd, pl, len);
    assert_int_equal(net__dec_batch_rep(&rd, &rp), 0);
    assert_int_equal(rp.nlayers, 1);
    assert_int_equal(rp.nodes[0].num_src, 3);
    assert_int_equal(rp.nodes[0].num_dst, 1);
    assert_int_equal(rp.nodes[0].wide, NET_BATCH_WIDE);
    assert_memory_equal(rp.nodes[0].ids, ids0, 24);
    assert_int_equal(rp.nodes[1].num_src, 0);
    assert_int_equal(rp.edges[0].n, 2);
    assert_int_equal(rp.edges[0].wide, 0);
    assert_int_equal(rp.edges[1].n, 0);
    assert_int_equal(rp.rows[2].n, 2);
    assert_int_equal(rp.rows[2].row_bytes, 2);
    assert_int_equal(rp.rows[0].p[11], 0xa1);
    assert_int_equal(rp.rows[2].p[0], 0xc3);
    net__batch_rep_free(&rp);
    for (size_t cut = 0; cut < len; cut++) {
        net__rd_init(&rd, pl, cut);
        assert_int_equal(net__dec_batch_rep(&rd, &rp), -1);
    }
    free(pl);
}

#define T(name) cmocka_unit_test_setup_teardown(name, gkvt_ng_setup, \
                                                gkvt_ng_teardown)

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wire),
        T(test_homo_one_server),
        T(test_homo_two_servers),
        T(test_hetero_one_server),
        T(test_hetero_two_servers),
        T(test_concurrent),
        T(test_bad_input),
        T(test_peer_killed),
        T(test_owner_killed),
        T(test_writeback),
        T(test_raw_requests),
        T(test_server_max_msg),
        T(test_stop_writeback),
        T(test_queue_deadline),
        T(test_queue_full),
        T(test_stop_peer_clients),
        T(test_clone),
    };

    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests_name("net_batch", tests, NULL, NULL);
}
