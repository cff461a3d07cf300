/* net_client_mem_test.c - the client's sampling calls (net/client*.c) at
 * their edges: out of memory, shared by threads, requests larger than a
 * server takes, options at the edge of the rules, results fed back.
 *
 * A heterogeneous graph (users follow users, users click items, items are
 * clicked by users) with two edge features is partitioned in two and
 * served by gkv-server processes on loopback (started and killed by PID,
 * as in net_prob_test.c); every client result is compared with in-process
 * sampling on the whole graph. Checked:
 *   - allocation failures (every gkv__malloc of a call failed in turn):
 *     hops with repeated seeds, hops weighed by edge_w arrays along
 *     out-edges, blocks weighed by out-edge features, edge batches; each
 *     failure is GKV_ENOMEM (never a crash, never GKV_EPROTO blaming a
 *     server for the client's own shortage), nothing leaks, and the next
 *     call equals in-process;
 *   - a failure while the relabelling markers are first allocated leaves
 *     the client able to sample blocks;
 *   - the SAMPLE reply decoder tells out of memory from malformed;
 *   - two threads sharing one client for edge batches (run under ASan or
 *     TSan to see the race the lock prevents);
 *   - servers with a small --max-msg: seeds cut into requests that fit,
 *     with and without exclusions, weights by position too; exclusions
 *     that alone exceed the limit are GKV_EINVAL at once, naming them;
 *   - the in-process option rules: out cleared when the checks fail,
 *     exclude_n without exclude, a NULL exclude[e] with a count,
 *     GKV_SAMPLE_WEIGHTED beside an edge_w array of NULL entries;
 *   - the previous call's results (out[e].src, blocks[0]'s node IDs,
 *     out[e].eid as exclusions) fed back as the next call's inputs. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "gkvt_graph.h"
#include "gkvt_net.h"
#include "gkv.h"
#include "net/wire.h"

#define MAXPROC 8
#define NU      GKVT_UI_USERS    /* users (type 0) */
#define NI      GKVT_UI_ITEMS    /* items (type 1) */
#define NE0     GKVT_UI_FOLLOWS  /* follows */
#define NE1     GKVT_UI_CLICKS   /* clicks, and their reverses */
#define NFEAT   2

struct fx {
    struct gkvt_job j;        /* first (gkvt_job_setup): the servers, of
                               * partition config j.json */
    int64_t ne[3];
    int64_t *emap[3];         /* original edge ID -> new */
    struct gkvt_efeat ft[NFEAT];   /* "w" (f32), "mask" (u8) */
    struct gkvt_ref ref;     /* the whole graph, in new IDs */
};

/* ---- servers and clients ------------------------------------------------ */

/* Every server: two threads, no syncing. */
static const char *const g_opts[] = {"--threads", "2", "--nosync", NULL};

/* A client without a heartbeat thread: the allocation countdown then
 * counts this thread's allocations only. */
static gkv_client *
client(struct fx *f, int timeout_ms)
{
    gkv_client_opts o = {0};

    o.timeout_ms = timeout_ms;
    o.flags = GKV_CLIENT_NO_HEARTBEAT;
    return gkvt_connect(f->j.cfg, "mem", 0, &o);
}

/* ---- the graph ------------------------------------------------------------ */

/* The user/item graph (follows carry stored weights, for
 * GKV_SAMPLE_WEIGHTED) with its features, f32 weights 0, 0.75, .. 3 ("w"
 * on follows) and a 0/1 mask ("mask" on clicks), two partitions, the
 * references. */
static void
graph_make(struct fx *f)
{
    gkv_graph *g = gkvt_ui_graph(77, 1);

    f->ne[0] = NE0;
    f->ne[1] = NE1;
    f->ne[2] = NE1;
    gkvt_efeat_make(&f->ft[0], "w", 0, GKV_F32, 0, 0, NE0);
    gkvt_efeat_make(&f->ft[1], "mask", 1, GKV_U8, 0, 0, NE1);
    gkvt_ui_partition_efeats(g, f->j.dir, f->ft, NFEAT, f->j.json,
                             sizeof f->j.json, &f->ref, f->emap);
    gkv_graph_free(g);
}

static int
setup(void **state)
{
    /* a port clash forgets the servers it killed: slots for the next */
    return gkvt_job_setup(state, sizeof (struct fx), "netmem", MAXPROC, g_opts,
                          1);
}

static int
teardown(void **state)
{
    struct fx *f = *state;
    int bad = gkvt_job_fini(&f->j);

    gkvt_alloc_fail_at(-1);
    gkvt_ui_efeats_free(&f->ref, f->emap, f->ft, NFEAT);
    free(f);
    return bad;
}

/* ---- comparisons ------------------------------------------------------------ */

/* Weights of the features as in-process edge_w arrays (and through the
 * client, the same arrays, or the features by name). */
struct wopts {
    gkv_sample_opts o;
    const float *ew[3];
    int64_t len[3];
};

static void
wopts_make(const struct fx *f, struct wopts *w, uint64_t seed, int dir)
{
    memset(w, 0, sizeof *w);
    w->o.seed = seed;
    w->o.dir = dir;
    for (int i = 0; i < NFEAT; i++) {
        w->ew[f->ft[i].et] = f->ft[i].w;
        w->len[f->ft[i].et] = f->ne[f->ft[i].et];
    }
    w->o.edge_w = w->ew;
    w->o.edge_w_len = w->len;
}

static size_t
edge_count(const gkv_sample_edges *e, int net)
{
    size_t n = 0;

    for (int i = 0; i < net; i++)
        n += e[i].n;
    return n;
}

/* A deep copy of one hop's edges (in-process results are borrowed). */
struct ecopy {
    gkv_sample_edges e[3];
};

static void
ecopy_take(struct ecopy *c, const gkv_sample_edges *e)
{
    for (int i = 0; i < 3; i++) {
        size_t n = e[i].n;
        int64_t *a = malloc(3 * n * 8 + 8);

        assert_non_null(a);
        if (n > 0) {
            memcpy(a, e[i].src, n * 8);
            memcpy(a + n, e[i].dst, n * 8);
            memcpy(a + 2 * n, e[i].eid, n * 8);
        }
        c->e[i].src = a;
        c->e[i].dst = a + n;
        c->e[i].eid = a + 2 * n;
        c->e[i].n = n;
    }
}

static void
ecopy_free(struct ecopy *c)
{
    for (int i = 0; i < 3; i++)
        free((void *)c->e[i].src);
}

/* ---- the SAMPLE reply decoder out of memory -------------------------------- */

static void
test_dec_sample_rep_oom(void **state)
{
    static const uint32_t cnt[2] = {1, 2};
    static const int64_t nbr[3] = {4, 5, 6}, eid[3] = {7, 8, 9};
    unsigned char buf[512];
    net_sample_renc_et et[3];
    net_sample_rep rep;
    net_wr w = {buf, sizeof buf, 0};
    net_rd rd;

    (void)state;
    memset(et, 0, sizeof et);
    et[1].n = 3;
    et[1].nc = 2;
    et[1].cnt = cnt;
    et[1].nbr = nbr;
    et[1].eid = eid;
    net__enc_sample_rep(&w, 3, et);
    net__rd_init(&rd, buf, w.off);
    assert_int_equal(net__dec_sample_rep(&rd, &rep), 0);
    assert_int_equal(rep.e[1].n, 3);
    net__sample_rep_free(&rep);
    /* the decoder's allocation fails: out of memory, not malformed */
    net__rd_init(&rd, buf, w.off);
    gkvt_alloc_fail_at(0);
    assert_int_equal(net__dec_sample_rep(&rd, &rep), NET_DEC_NOMEM);
    gkvt_alloc_fail_at(-1);
    assert_non_null(strstr(rd.why, "out of memory"));
    assert_null(rep.e);
    /* malformed stays -1 */
    net__rd_init(&rd, buf, w.off - 1);
    assert_int_equal(net__dec_sample_rep(&rd, &rep), -1);
}

/* ---- allocation failures ------------------------------------------------------ */

enum { K_HOP, K_HOP_W, K_BLOCKS_F, K_EB, K_N };
static const char *const g_kname[K_N] = {
    "hop, repeated seeds", "hop, out-edge edge_w arrays, repeated seeds",
    "blocks, out-edge features", "edge batch, out-edge edge_w arrays"};

/* One client call of kind k; with check, its result must equal
 * in-process (the reference is computed after the client's call, so its
 * allocations are not counted). */
static gkv_err
kind_call(struct fx *f, gkv_client *c, int k, int check)
{
    static const char *const nm[3] = {"w", "mask", NULL};
    int fan[6] = {3, 2, 3, 5, 5, 5};
    int64_t us[50], is[20];
    const int64_t *sv[2] = {us, is};
    size_t ns[2] = {50, 20};
    struct gkvt_ui_seeds sd;
    struct wopts wo;
    gkv_sample_opts oc = {0};
    gkv_sample_edges ce[3], we[3];
    gkv_block cb[2], wb[2];
    gkv_err rc = GKV_EINVAL;

    for (int i = 0; i < 50; i++)
        us[i] = (i * 11) % 37;               /* repeats */
    for (int i = 0; i < 20; i++)
        is[i] = (i * 7) % 13;
    gkvt_ui_seeds_make(&sd, 1);
    oc.seed = 5;
    switch (k) {
    case K_HOP:
        rc = gkv_client_sample_neighbors(c, sv, ns, fan, 3, 1, &oc, ce);
        if (check && rc == GKV_OK) {
            GKVT_OK(gkv_sample_neighbors(f->ref.ws, sv, ns, fan, 3, 1, &oc,
                                         we));
            assert_true(gkvt_edges_same(ce, we, 3));
            assert_true(edge_count(ce, 3) > 0);
        }
        break;
    case K_HOP_W:
        wopts_make(f, &wo, 5, GKV_DIR_OUT);
        rc = gkv_client_sample_neighbors(c, sv, ns, fan, 3, 1, &wo.o, ce);
        if (check && rc == GKV_OK) {
            GKVT_OK(gkv_sample_neighbors(f->ref.ws, sv, ns, fan, 3, 1, &wo.o,
                                         we));
            assert_true(gkvt_edges_same(ce, we, 3));
            assert_true(edge_count(ce, 3) > 0);
        }
        break;
    case K_BLOCKS_F:
        wopts_make(f, &wo, 5, GKV_DIR_OUT);
        oc.dir = GKV_DIR_OUT;
        oc.edge_w_feat = nm;
        rc = gkv_client_sample_blocks(c, sd.sv, sd.ns, fan, 3, 2, &oc, cb);
        if (check && rc == GKV_OK) {
            GKVT_OK(gkv_sample_blocks(f->ref.ws, sd.sv, sd.ns, fan, 3, 2, &wo.o,
                                      wb));
            assert_true(gkvt_blocks_same(cb, wb, 2));
        }
        break;
    case K_EB: {
        gkv_edge_batch_spec sp = {0};
        gkv_edge_batch ceb, web;
        int64_t eids[40];

        for (int i = 0; i < 40; i++)
            eids[i] = (i * 41 + 7) % NE1;
        sp.etype = 1;
        sp.eids = eids;
        sp.n = 40;
        sp.num_neg = 2;
        sp.exclude = GKV_EXCLUDE_SELF | GKV_EXCLUDE_REVERSE;
        sp.reverse_etype = 2;
        wopts_make(f, &wo, 5, GKV_DIR_OUT);
        rc = gkv_client_sample_edge_batch(c, &sp, fan, 3, 2, &wo.o, &ceb, cb);
        if (check && rc == GKV_OK) {
            /* the servers read the stored reverses; the reference on the
             * whole graph is given them */
            sp.reverse_eids = f->ref.rev;
            sp.reverse_n = NE1;
            GKVT_OK(gkv_sample_edge_batch(f->ref.ws, &sp, fan, 3, 2, &wo.o,
                                          &web, wb));
            assert_true(gkvt_blocks_same(cb, wb, 2));
            assert_int_equal(ceb.num_neg, web.num_neg);
            assert_memory_equal(ceb.pos_src, web.pos_src, 40 * 8);
            assert_memory_equal(ceb.neg_dst, web.neg_dst, web.num_neg * 8);
        }
        break;
    }
    }
    return rc;
}

/* Fails the n-th allocation of a call of kind k, for n = 0, 1, .. until
 * calls succeed: each failure must be GKV_ENOMEM (an allocation of the
 * client's is never a server's malformed reply), the next call must
 * equal in-process and nothing may leak. */
static void
alloc_sweep(struct fx *f, gkv_client *c, int k)
{
    long base;
    int oks = 0, fails = 0;

    /* twice: the arena, the markers and the routes reach their size */
    assert_int_equal(kind_call(f, c, k, 1), GKV_OK);
    assert_int_equal(kind_call(f, c, k, 1), GKV_OK);
    base = gkvt_alloc_live();
    for (long n = 0; n < 5000 && oks < 3; n++) {
        gkv_err rc;

        gkvt_alloc_fail_at(n);
        rc = kind_call(f, c, k, 0);
        gkvt_alloc_fail_at(-1);
        if (rc == GKV_OK) {
            oks++;
        } else {
            oks = 0;
            fails++;
            if (rc != GKV_ENOMEM)
                fail_msg("%s, allocation %ld failing: %s: %s", g_kname[k], n,
                         gkv_err_name(rc), gkv_net_errmsg());
        }
        if (kind_call(f, c, k, 1) != GKV_OK)
            fail_msg("%s, after allocation %ld failed: %s", g_kname[k], n,
                     gkv_net_errmsg());
        if (gkvt_alloc_live() != base)
            fail_msg("%s, allocation %ld failing: %ld blocks leaked",
                     g_kname[k], n, gkvt_alloc_live() - base);
    }
    assert_int_equal(oks, 3);
    assert_true(fails > 20);
    fprintf(stderr, "%s: %d allocations failed in turn\n", g_kname[k], fails);
}

/* alloc_sweep of kinds k[0..n), in turn, on one client of two servers a
 * machine. */
static void
alloc_sweeps(struct fx *f, const int *k, int n)
{
    gkv_client *c;

    graph_make(f);
    gkvt_serve(&f->j, 2, 2, NULL, NULL);
    c = client(f, 20000);
    for (int i = 0; i < n; i++)
        alloc_sweep(f, c, k[i]);
    NET_OK(gkv_client_close(c));
}

/* Hops with repeated seeds: among them the failure of the seed map after
 * the distinct seeds' allocation (hop_once cleaned up through a NULL
 * map). */
static void
test_alloc_hop(void **state)
{
    static const int k[] = {K_HOP};

    alloc_sweeps(*state, k, 1);
}

/* Hops weighed by position (sample_hop's own seed map; piece_wpos, whose
 * pieces were freed through a NULL weight table when its last allocation
 * failed), blocks by out-edge features, edge batches. */
static void
test_alloc_weights(void **state)
{
    static const int k[] = {K_HOP_W, K_BLOCKS_F, K_EB};

    alloc_sweeps(*state, k, 3);
}

/* The relabelling markers are allocated by a client's first
 * sample_blocks: a failure part-way must not leave a half-built table
 * that the next call takes for a whole one. */
static void
test_alloc_markers(void **state)
{
    struct fx *f = *state;
    static const char *const extra[] = {"--keep-alive", NULL};
    int fan[2] = {2, 2};
    struct gkvt_ui_seeds sd;
    gkv_block cb[2], wb[2];
    long base;
    int failed = 0;

    graph_make(f);
    gkvt_serve(&f->j, 2, 1, extra, NULL);    /* a client a round */
    gkvt_ui_seeds_make(&sd, 0);
    /* the in-process sampler's buffers take their size */
    GKVT_OK(gkv_sample_blocks(f->ref.ws, sd.sv, sd.ns, fan, 1, 2, NULL, wb));
    for (long n = 0; n < 8; n++) {
        gkv_client *c;
        gkv_err rc;

        base = gkvt_alloc_live();
        c = client(f, 20000);
        gkvt_alloc_fail_at(n);
        rc = gkv_client_sample_blocks(c, sd.sv, sd.ns, fan, 1, 2, NULL, cb);
        gkvt_alloc_fail_at(-1);
        if (rc != GKV_OK) {
            assert_int_equal(rc, GKV_ENOMEM);
            failed++;
        }
        NET_OK(gkv_client_sample_blocks(c, sd.sv, sd.ns, fan, 1, 2, NULL,
                                        cb));
        GKVT_OK(gkv_sample_blocks(f->ref.ws, sd.sv, sd.ns, fan, 1, 2, NULL,
                                  wb));
        assert_true(gkvt_blocks_same(cb, wb, 2));
        NET_OK(gkv_client_close(c));
        assert_int_equal(gkvt_alloc_live(), base);
    }
    assert_true(failed >= 3);        /* the table, both node types' */
}

/* ---- threads ------------------------------------------------------------------ */

struct eb_arg {
    gkv_client *c;
    int id, iters;
    int errs;
    char msg[256];
};

static void *
eb_thread(void *a)
{
    struct eb_arg *t = a;
    int64_t *eids = malloc(2000 * sizeof *eids);
    int fan[3] = {1, 0, 0};    /* short hops: more time in the pairs */

    if (eids == NULL) {
        t->errs++;
        return NULL;
    }
    for (int i = 0; i < 2000; i++)
        eids[i] = (i * 41 + 7 + t->id) % NE1;
    for (int it = 0; it < t->iters; it++) {
        gkv_edge_batch_spec sp = {0};
        gkv_edge_batch b;
        gkv_block blk[1];
        gkv_err rc;

        sp.etype = 1;
        sp.eids = eids;
        sp.n = 2000;
        sp.num_neg = 3 * it + t->id + 1;   /* grows: the pairs' buffer is
                                            * reallocated */
        rc = gkv_client_sample_edge_batch(t->c, &sp, fan, 3, 1, NULL, &b,
                                          blk);
        if (rc != GKV_OK && t->errs++ == 0)
            snprintf(t->msg, sizeof t->msg, "%s: %s", gkv_err_name(rc),
                     gkv_net_errmsg());
    }
    free(eids);
    return NULL;
}

/* Two threads share one client for edge batches (gkv_net.h: calls are
 * serialised): the batch's pairs must be written under the client's lock,
 * or one thread's reallocation frees the buffer the other is filling
 * (heap-use-after-free under ASan, a race under TSan). */
static void
test_edge_batch_threads(void **state)
{
    struct fx *f = *state;
    struct eb_arg ta = {0}, tb = {0};
    pthread_t a, b;
    gkv_client *c;

    graph_make(f);
    gkvt_serve(&f->j, 2, 1, NULL, NULL);
    c = client(f, 20000);
    ta.c = tb.c = c;
    ta.id = 0;
    tb.id = 1;
    ta.iters = tb.iters = 80;
    assert_int_equal(pthread_create(&a, NULL, eb_thread, &ta), 0);
    assert_int_equal(pthread_create(&b, NULL, eb_thread, &tb), 0);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    if (ta.errs || tb.errs)
        fail_msg("edge batches failed: %d (%s), %d (%s)", ta.errs, ta.msg,
                 tb.errs, tb.msg);
    NET_OK(gkv_client_close(c));
}

/* ---- request sizes -------------------------------------------------------------- */

/* Servers that take 4 KiB: the client's requests (2 KiB of payload a
 * message, part_cap) are cut to fit and the results equal in-process;
 * unfixed, a request over the limit was dropped by nanomsg and the call
 * timed out. Exclusions go whole with every piece: more than a message
 * holds is GKV_EINVAL at once, naming them (not a timeout, nor a word
 * about weights). */
static void
test_request_size(void **state)
{
    struct fx *f = *state;
    static const char *const extra[] = {"--max-msg", "4096", NULL};
    static int64_t us[3000], ex[3000];
    const int64_t *xv[3] = {ex, NULL, NULL};
    size_t xn[3] = {0, 0, 0};
    gkv_client *c;
    gkv_sample_edges ce[3], we[3];
    gkv_block cb[2], wb[2];
    gkv_sample_opts o = {0};
    struct wopts wo;
    struct ecopy all;
    double t0;

    graph_make(f);
    gkvt_serve(&f->j, 2, 1, extra, NULL);
    c = client(f, 4000);
    /* a hop of 3000 seeds (1024 distinct, asked once): about 4 KiB of
     * seeds a machine, 2 KiB a message */
    {
        int fan[3] = {1, 0, 0};
        const int64_t *sv[2] = {us, NULL};
        size_t ns[2] = {3000, 0};

        for (int i = 0; i < 3000; i++)
            us[i] = (i * 7) % NU;
        NET_OK(gkv_client_sample_neighbors(c, sv, ns, fan, 3, 0, NULL, ce));
        GKVT_OK(gkv_sample_neighbors(f->ref.ws, sv, ns, fan, 3, 0, NULL, we));
        assert_true(gkvt_edges_same(ce, we, 3));
        assert_true(ce[0].n > 1000);
    }
    /* blocks of 1024 users and 300 items */
    {
        int fan[2] = {2, 2};
        const int64_t *sv[2] = {us, us};
        size_t ns[2] = {NU, NI};

        for (int i = 0; i < NU; i++)
            us[i] = i;
        NET_OK(gkv_client_sample_blocks(c, sv, ns, fan, 1, 2, NULL, cb));
        GKVT_OK(gkv_sample_blocks(f->ref.ws, sv, ns, fan, 1, 2, NULL, wb));
        assert_true(gkvt_blocks_same(cb, wb, 2));
    }
    /* 200 users with 150 of their edges excluded (1.2 KiB that every
     * piece repeats): fewer seeds a piece */
    {
        int fan[3] = {4, 0, 0}, fall[3] = {-1, 0, 0};
        const int64_t *sv[2] = {us, NULL};
        size_t ns[2] = {200, 0};

        for (int i = 0; i < 200; i++)
            us[i] = (i * 389 + 5) % NU;
        GKVT_OK(gkv_sample_neighbors(f->ref.ws, sv, ns, fall, 3, 0, NULL, we));
        ecopy_take(&all, we);
        assert_true(all.e[0].n > 300);
        for (int i = 0; i < 150; i++)
            ex[i] = all.e[0].eid[2 * i];
        ecopy_free(&all);
        xn[0] = 150;
        o.exclude = xv;
        o.exclude_n = xn;
        NET_OK(gkv_client_sample_neighbors(c, sv, ns, fan, 3, 0, &o, ce));
        GKVT_OK(gkv_sample_neighbors(f->ref.ws, sv, ns, fan, 3, 0, &o, we));
        assert_true(gkvt_edges_same(ce, we, 3));
        assert_true(ce[0].n > 0);
        /* and weights by position (edge_w along out-edges) beside them */
        wopts_make(f, &wo, 3, GKV_DIR_OUT);
        wo.o.exclude = xv;
        wo.o.exclude_n = xn;
        NET_OK(gkv_client_sample_neighbors(c, sv, ns, fan, 3, 0, &wo.o, ce));
        GKVT_OK(gkv_sample_neighbors(f->ref.ws, sv, ns, fan, 3, 0, &wo.o, we));
        assert_true(gkvt_edges_same(ce, we, 3));
        assert_true(ce[0].n > 0);
    }
    /* 3000 excluded edges with 10 seeds: 24 KB in every request */
    {
        int fan[2] = {1, 1};
        const int64_t *sv[2] = {us, NULL};
        size_t ns[2] = {10, 0};

        for (int i = 0; i < 3000; i++)
            ex[i] = i;
        xn[0] = 3000;
        t0 = tools__now_s();
        assert_int_equal(gkv_client_sample_blocks(c, sv, ns, fan, 1, 1, &o,
                                                  cb), GKV_EINVAL);
        assert_true(tools__now_s() - t0 < 2.0);
        if (strstr(gkv_net_errmsg(), "3000 excluded edges (24000 bytes)") ==
            NULL)
            fail_msg("the message does not name the exclusions: %s",
                     gkv_net_errmsg());
        /* out-edges weighed by a feature: the exclusions are named, not
         * the weights */
        {
            static const char *const nm[3] = {"w", NULL, NULL};
            gkv_sample_opts of = o;
            of.dir = GKV_DIR_OUT;
            of.edge_w_feat = nm;
            xn[0] = 300;
            t0 = tools__now_s();
            assert_int_equal(gkv_client_sample_blocks(c, sv, ns, fan, 1, 1,
                                                      &of, cb), GKV_EINVAL);
            assert_true(tools__now_s() - t0 < 2.0);
            if (strstr(gkv_net_errmsg(), "300 excluded edges") == NULL ||
                strstr(gkv_net_errmsg(), "weights") != NULL)
                fail_msg("the message does not name the exclusions: %s",
                         gkv_net_errmsg());
        }
        /* the client still samples */
        xn[0] = 10;
        NET_OK(gkv_client_sample_blocks(c, sv, ns, fan, 1, 1, &o, cb));
        GKVT_OK(gkv_sample_blocks(f->ref.ws, sv, ns, fan, 1, 1, &o, wb));
        assert_true(gkvt_blocks_same(cb, wb, 1));
    }
    NET_OK(gkv_client_close(c));
}

/* ---- the in-process option rules -------------------------------------------- */

static void
test_option_rules(void **state)
{
    struct fx *f = *state;
    gkv_client *c;
    struct gkvt_ui_seeds sd;
    gkv_sample_edges ce[3], we[3];
    gkv_block cb[2], wb[2];
    int fan[3] = {3, 2, 3};

    graph_make(f);
    gkvt_serve(&f->j, 2, 1, NULL, NULL);
    c = client(f, 20000);
    gkvt_ui_seeds_make(&sd, 2);
    /* out is cleared when the checks fail, as in-process */
    for (int k = 0; k < 3; k++) {
        int bad[3] = {3, -2, 3};
        for (int e = 0; e < 3; e++) {
            ce[e].src = ce[e].dst = ce[e].eid = (const int64_t *)&ce;
            ce[e].n = 77;
        }
        assert_int_equal(gkv_client_sample_neighbors(c, sd.sv, sd.ns,
                                                     k == 1 ? bad : fan,
                                                     k == 0 ? 2 : 3,
                                                     k == 2 ? -1 : 0, NULL,
                                                     ce), GKV_EINVAL);
        for (int e = 0; e < 3; e++) {
            assert_null(ce[e].src);
            assert_null(ce[e].eid);
            assert_int_equal(ce[e].n, 0);
        }
    }
    /* exclude_n without exclude, and a NULL exclude[e] with a count:
     * nothing excluded, as in-process */
    {
        size_t xn[3] = {5, 5, 5};
        const int64_t *xv[3] = {NULL, NULL, NULL};
        gkv_sample_opts o = {0};

        o.exclude_n = xn;
        NET_OK(gkv_client_sample_neighbors(c, sd.sv, sd.ns, fan, 3, 0, &o,
                                           ce));
        GKVT_OK(gkv_sample_neighbors(f->ref.ws, sd.sv, sd.ns, fan, 3, 0, &o,
                                     we));
        assert_true(gkvt_edges_same(ce, we, 3));
        o.exclude = xv;
        NET_OK(gkv_client_sample_blocks(c, sd.sv, sd.ns, fan, 1, 2, &o, cb));
        GKVT_OK(gkv_sample_blocks(f->ref.ws, sd.sv, sd.ns, fan, 1, 2, &o, wb));
        assert_true(gkvt_blocks_same(cb, wb, 2));
        /* an edge batch that excludes its own edges beside them */
        {
            gkv_edge_batch_spec sp = {0};
            gkv_edge_batch ceb, web;
            int64_t eids[30];
            int fan6[6] = {3, 2, 3, 2, 2, 2};

            for (int i = 0; i < 30; i++)
                eids[i] = (i * 53 + 1) % NE1;
            sp.etype = 1;
            sp.eids = eids;
            sp.n = 30;
            sp.num_neg = 1;
            sp.exclude = GKV_EXCLUDE_SELF;
            NET_OK(gkv_client_sample_edge_batch(c, &sp, fan6, 3, 2, &o, &ceb,
                                                cb));
            GKVT_OK(gkv_sample_edge_batch(f->ref.ws, &sp, fan6, 3, 2, &o, &web,
                                          wb));
            assert_true(gkvt_blocks_same(cb, wb, 2));
            assert_memory_equal(ceb.neg_dst, web.neg_dst, 30 * 8);
        }
        /* exclude without exclude_n is refused by both */
        o.exclude_n = NULL;
        assert_int_equal(gkv_client_sample_neighbors(c, sd.sv, sd.ns, fan, 3,
                                                     0, &o, ce), GKV_EINVAL);
        assert_int_equal(gkv_sample_neighbors(f->ref.ws, sd.sv, sd.ns, fan, 3,
                                              0, &o, we), GKV_EINVAL);
    }
    /* GKV_SAMPLE_WEIGHTED (follows have stored weights) beside an edge_w
     * array: refused by both, even when every entry is NULL */
    {
        const float *ew[3] = {NULL, NULL, NULL};
        int64_t len[3] = {0, 0, 0};
        int fw[6] = {3, 0, 0, 4, 0, 0};
        gkv_sample_opts o = {0};

        o.flags = GKV_SAMPLE_WEIGHTED;
        NET_OK(gkv_client_sample_blocks(c, sd.sv, sd.ns, fw, 3, 2, &o, cb));
        GKVT_OK(gkv_sample_blocks(f->ref.ws, sd.sv, sd.ns, fw, 3, 2, &o, wb));
        assert_true(gkvt_blocks_same(cb, wb, 2));
        o.edge_w = ew;
        o.edge_w_len = len;
        assert_int_equal(gkv_sample_blocks(f->ref.ws, sd.sv, sd.ns, fw, 3, 2,
                                           &o,
                                           wb), GKV_EINVAL);
        assert_int_equal(gkv_client_sample_blocks(c, sd.sv, sd.ns, fw, 3, 2,
                                                  &o, cb), GKV_EINVAL);
        assert_non_null(strstr(gkv_net_errmsg(), "GKV_SAMPLE_WEIGHTED and "
                               "edge_w are both given"));
    }
    NET_OK(gkv_client_close(c));
}

/* ---- results fed back ------------------------------------------------------------- */

/* A previous call's results as the next call's seeds and exclusions (a
 * manual multi-hop walk): the client copies what points into its own
 * results before reusing their memory. In-process the same is not
 * allowed (gkv_sample.h), so the references get copies. */
static void
test_results_as_inputs(void **state)
{
    struct fx *f = *state;
    gkv_client *c;
    gkv_sample_edges ce[3], we[3];
    int fan[3] = {5, 5, 5};
    int64_t us[100], is[40];
    const int64_t *sv[2] = {us, is};
    size_t ns[2] = {100, 40};
    struct ecopy first;

    graph_make(f);
    gkvt_serve(&f->j, 2, 1, NULL, NULL);
    c = client(f, 20000);
    for (int i = 0; i < 100; i++)
        us[i] = i * 7 % NU;
    for (int i = 0; i < 40; i++)
        is[i] = i * 3 % NI;
    /* hop 2 from hop 1's neighbours, hop 1's follows excluded */
    NET_OK(gkv_client_sample_neighbors(c, sv, ns, fan, 3, 0, NULL, ce));
    GKVT_OK(gkv_sample_neighbors(f->ref.ws, sv, ns, fan, 3, 0, NULL, we));
    assert_true(gkvt_edges_same(ce, we, 3));
    ecopy_take(&first, we);
    {
        const int64_t *sv2[2] = {ce[0].src, ce[2].src};
        const int64_t *rv2[2] = {first.e[0].src, first.e[2].src};
        size_t ns2[2] = {ce[0].n, ce[2].n};
        const int64_t *cx[3] = {ce[0].eid, NULL, NULL};
        const int64_t *rx[3] = {first.e[0].eid, NULL, NULL};
        size_t xn[3] = {ce[0].n, 0, 0};
        gkv_sample_opts oc = {0}, ow = {0};

        oc.exclude = cx;
        oc.exclude_n = xn;
        ow.exclude = rx;
        ow.exclude_n = xn;
        NET_OK(gkv_client_sample_neighbors(c, sv2, ns2, fan, 3, 1, &oc, ce));
        GKVT_OK(gkv_sample_neighbors(f->ref.ws, rv2, ns2, fan, 3, 1, &ow, we));
        assert_true(gkvt_edges_same(ce, we, 3));
        assert_true(edge_count(ce, 3) > 1000);
    }
    ecopy_free(&first);
    /* blocks from the last blocks' input nodes, three rounds */
    {
        gkv_block cb[2], wb[2];
        int fb[2] = {3, 3};
        const int64_t *bs[2] = {us, is};
        size_t bn[2] = {100, 40};
        int64_t *copy[2] = {NULL, NULL};

        for (int i = 0; i < 100; i++)
            us[i] = i;                        /* distinct */
        NET_OK(gkv_client_sample_blocks(c, bs, bn, fb, 1, 2, NULL, cb));
        for (int round = 0; round < 3; round++) {
            const int64_t *sv3[2], *rv3[2];
            size_t ns3[2];

            for (int t = 0; t < 2; t++) {
                sv3[t] = cb[0].nodes[t].ids;
                ns3[t] = cb[0].nodes[t].num_src;
                free(copy[t]);
                copy[t] = malloc(ns3[t] * 8 + 8);
                assert_non_null(copy[t]);
                memcpy(copy[t], sv3[t], ns3[t] * 8);
                rv3[t] = copy[t];
            }
            NET_OK(gkv_client_sample_blocks(c, sv3, ns3, fb, 1, 2, NULL, cb));
            GKVT_OK(gkv_sample_blocks(f->ref.ws, rv3, ns3, fb, 1, 2, NULL, wb));
            assert_true(gkvt_blocks_same(cb, wb, 2));
        }
        free(copy[0]);
        free(copy[1]);
    }
    NET_OK(gkv_client_close(c));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dec_sample_rep_oom),
        cmocka_unit_test_setup_teardown(test_alloc_hop, setup, teardown),
        cmocka_unit_test_setup_teardown(test_alloc_weights, setup, teardown),
        cmocka_unit_test_setup_teardown(test_alloc_markers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_edge_batch_threads, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_request_size, setup, teardown),
        cmocka_unit_test_setup_teardown(test_option_rules, setup, teardown),
        cmocka_unit_test_setup_teardown(test_results_as_inputs, setup,
                                        teardown),
    };

    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests_name("net_client_mem", tests, NULL, NULL);
}
