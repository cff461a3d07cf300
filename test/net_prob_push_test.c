/* net_prob_push_test.c - sampling by a stored edge feature while the
 * feature is pushed (gkv_sample_opts.edge_w_feat).
 *
 * A heterogeneous graph (users follow users, users click items, items are
 * clicked by users) with edge features of several dtypes is partitioned in
 * two and served by gkv-server processes on loopback (started and killed
 * by PID; the fixture: gkvt_prob.h). The programs on edge-feature
 * probabilities: net_prob_test (by name), net_prob_push_test (pushes to
 * the feature), net_prob_arrays_test (edge_w arrays, weights by
 * position, the codec). Checked:
 *   - a push to the feature is seen by the next sample (the server's cache
 *     is invalidated), also for a feature in small chunks changed in a few
 *     of them, for one in the servers' write-back mode, and under
 *     concurrent samplers while pushes go on. */
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
#include "gkvt_prob.h"
#include "gkv.h"
#include "net/wire.h"
#include "graph/graph_seam.h"       /* graph__sample_hop */

#define NE0     GKVT_UI_FOLLOWS  /* follows */

static uint64_t
hash(uint64_t x)
{
    return tools__splitmix64(&x);
}

/* Pushes to a feature are seen by the next sample: the server's converted
 * copy is refreshed (all of it, or the chunks that changed). */
static void
test_push_invalidates(void **state)
{
    struct gkvt_prob *f = *state;
    static const char *const nm[3] = {"w", NULL, NULL};
    static const char *const nc[3] = {"wc", NULL, NULL};
    int fan[9] = {4, 0, 0, 3, 0, 0, 5, 0, 0};
    struct gkvt_efeat *w;
    gkv_client *c;
    struct gkvt_ui_seeds sd;
    gkv_block cb[3], first[3];
    struct gkvt_hcopy before;
    uint64_t *ids = malloc(NE0 * 8);
    float *rows = malloc(NE0 * 4);
    gkv_sample_opts oc = {0};
    gkv_tensor_spec ts = {0};
    int differs = 0;

    gkvt_prob_graph_make(f);
    gkvt_prob_serve(f, 1, NULL);
    c = gkvt_prob_client(f, 0);
    gkvt_ui_seeds_make(&sd, 2);
    w = (struct gkvt_efeat *)gkvt_prob_feat_get(f, 0, "w");
    oc.seed = 21;
    oc.edge_w_feat = nm;
    gkvt_prob_check_blocks(f, c, &sd, nm, fan, 3, 21, 0, &differs);
    NET_OK(gkv_client_sample_blocks(c, sd.sv, sd.ns, fan, 3, 3, &oc, first));
    gkvt_hcopy_take(&before, first, 3);

    /* new values for every edge (by new ID): the reference follows */
    for (int64_t i = 0; i < NE0; i++) {
        ids[i] = (uint64_t)i;
        w->w[i] = (float)(hash((uint64_t)i + 999) % 4);
        rows[i] = w->w[i];
    }
    NET_OK(gkv_client_push(c, "edge/user:follows:user/w", ids, NE0, rows,
                           NE0 * 4, NULL));
    gkvt_prob_check_blocks(f, c, &sd, nm, fan, 3, 21, 0, &differs);
    NET_OK(gkv_client_sample_blocks(c, sd.sv, sd.ns, fan, 3, 3, &oc, cb));
    assert_false(gkvt_blocks_same(before.b, cb, 3));
    gkvt_hcopy_free(&before);

    /* one edge's weight made 0: that edge never comes back */
    {
        int64_t victim = cb[2].edges[0].eid[0];
        float z = 0.0f;
        uint64_t vid = (uint64_t)victim;
        NET_OK(gkv_client_push(c, "edge/user:follows:user/w", &vid, 1, &z, 4,
                               NULL));
        w->w[victim] = 0.0f;
        gkvt_prob_check_blocks(f, c, &sd, nm, fan, 3, 21, 0, &differs);
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
        gkvt_prob_check_blocks(f, c, &sd, nc, fan, 3, 5, 0, &differs);
        gkvt_prob_check_blocks(f, c, &sd, nc, fan, 3, 6, GKV_SAMPLE_REPLACE, &differs);
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
            gkvt_prob_check_blocks(f, c, &sd, nc, fan, 3, 7 + (uint64_t)round, 0,
                         &differs);
        }
        /* a push to another tensor (a new snapshot, the feature
         * unchanged) keeps the answer */
        NET_OK(gkv_client_push(c, "edge/user:follows:user/w", ids, 1, rows,
                               4, NULL));
        w->w[0] = rows[0];
        gkvt_prob_check_blocks(f, c, &sd, nc, fan, 3, 7, 0, &differs);
        /* deleted and made again with other values: a new tensor */
        NET_OK(gkv_client_delete(c, "edge/user:follows:user/wc"));
        ts.a = 2.0;
        ts.init = GKV_INIT_UNIFORM;
        ts.b = 3.0;
        ts.seed = 4;
        NET_OK(gkv_client_create(c, "edge/user:follows:user/wc", &ts, -1));
        NET_OK(gkv_client_pull(c, "edge/user:follows:user/wc", ids, NE0,
                               t->w, NE0 * 4));
        gkvt_prob_check_blocks(f, c, &sd, nc, fan, 3, 8, 0, &differs);
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
    struct gkvt_prob *f = *state;
    static const char *const nm[3] = {"w", "mask", NULL};
    static const char *const extra[] = {
        "--writeback", "edge/user:follows:user/w", "--flush-ms", "60000",
        NULL};
    int fan[6] = {4, 2, 0, 3, 3, 0}, differs = 0;
    struct gkvt_efeat *w;
    gkv_client *c;
    struct gkvt_ui_seeds sd;
    uint64_t *ids = malloc(NE0 * 8);

    gkvt_prob_graph_make(f);
    gkvt_prob_serve(f, 1, extra);
    for (int i = 0; i < f->j.np; i++)         /* the feature is in RAM */
        assert_true(gkvt_file_has(f->j.p[i].log, "write-back: tensor "
                                  "'edge/user:follows:user/w'"));
    c = gkvt_prob_client(f, 0);
    gkvt_ui_seeds_make(&sd, 5);
    w = (struct gkvt_efeat *)gkvt_prob_feat_get(f, 0, "w");
    gkvt_prob_check_blocks(f, c, &sd, nm, fan, 2, 31, 0, &differs);
    for (int round = 0; round < 3; round++) {
        for (int64_t i = 0; i < NE0; i++) {
            ids[i] = (uint64_t)i;
            w->w[i] = (float)(hash((uint64_t)(i + 77 * round)) % 3);
        }
        NET_OK(gkv_client_push(c, "edge/user:follows:user/w", ids, NE0, w->w,
                               NE0 * 4, NULL));
        gkvt_prob_check_blocks(f, c, &sd, nm, fan, 2, 31, GKV_SAMPLE_REPLACE, &differs);
    }
    free(ids);
    NET_OK(gkv_client_close(c));
}

/* Samplers on several clients at once while the feature is pushed: every
 * answer is the reference of the values before or after some push (the
 * servers' workers refresh and read the cache concurrently). One hop on
 * seeds partition 0 owns, pushes to its edges only: each push is one
 * transaction on the one server that answers. */
struct conc {
    struct gkvt_prob *f;
    const struct gkvt_hcopy *ref[2];
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
    struct gkvt_prob *f = *state;
    static const char *const nm[3] = {"w", NULL, "w64"};
    int fan[3] = {4, 0, 3};
    struct conc k;
    struct gkvt_hcopy ref[2];
    struct gkvt_wopts wo;
    gkv_block wb[1];
    float *vals[2];
    uint64_t *ids = malloc(NE0 * 8);
    gkv_client *c;
    pthread_t th[3];
    int64_t ulo, uhi, elo, ehi;
    double t0;

    gkvt_prob_graph_make(f);
    gkvt_prob_serve(f, 1, NULL);
    c = gkvt_prob_client(f, 100);
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
        vals[0][i] = gkvt_prob_feat_get(f, 0, "w")->w[i];
        vals[1][i] = (float)(hash((uint64_t)i + 5) % 3);
    }
    for (int v = 0; v < 2; v++) {
        memcpy(gkvt_prob_feat_get(f, 0, "w")->w, vals[v], NE0 * 4);
        gkvt_prob_wopts(f, &wo, nm, 12, 0);
        GKVT_OK(gkv_sample_blocks(f->ref.ws, k.sd.sv, k.sd.ns, fan, 3, 1, &wo.o,
                                  wb));
        gkvt_hcopy_take(&ref[v], wb, 1);
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
        gkvt_hcopy_free(&ref[v]);
    free(vals[0]);
    free(vals[1]);
    free(ids);
    NET_OK(gkv_client_close(c));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_push_invalidates, gkvt_prob_setup,
                                        gkvt_prob_teardown),
        cmocka_unit_test_setup_teardown(test_writeback_feature, gkvt_prob_setup,
                                        gkvt_prob_teardown),
        cmocka_unit_test_setup_teardown(test_concurrent, gkvt_prob_setup,
                                        gkvt_prob_teardown),
    };

    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests_name("net_prob_push", tests, NULL, NULL);
}
