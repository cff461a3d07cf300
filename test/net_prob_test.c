/* net_prob_test.c - sampling probabilities from stored edge features by
 * name (gkv_sample_opts.edge_w_feat, DGL's sample_neighbors(prob=, mask=)).
 *
 * A heterogeneous graph (users follow users, users click items, items are
 * clicked by users) with edge features of several dtypes is partitioned in
 * two and served by gkv-server processes on loopback (started and killed
 * by PID; the fixture: gkvt_prob.h). The programs on edge-feature
 * probabilities: net_prob_test (by name), net_prob_push_test (pushes to
 * the feature), net_prob_arrays_test (edge_w arrays, weights by
 * position, the codec). Checked:
 *   - client blocks, hops and edge batches with edge_w_feat equal, byte for
 *     byte, gkv_sample_blocks / _neighbors / _edge_batch in-process on the
 *     whole graph given the same values as edge_w arrays (f32, f64, f16,
 *     i32 and a u8 mask; uniform and weighted etypes mixed; with and
 *     without replacement; several fanouts), and differ from uniform;
 *   - a mask feature: no edge whose mask is 0 is ever sampled, though the
 *     seeds have such edges;
 *   - out-edges (GKV_DIR_OUT), whose weights the client pulls from the
 *     edges' owners and sends with the seeds: blocks, hops with repeated
 *     seeds and edge batches equal in-process edge_w sampling outwards; a
 *     mask holds; one edge another machine owns, given all of a user's
 *     weight by a push, is every pick; a negative weight there is named;
 *     also through servers that take small messages;
 *   - errors: a missing feature, a negative weight pushed, wide rows, bad
 *     names ('#', too long, empty), GKV_SAMPLE_WEIGHTED with a feature
 *     (in- and out-edges), names in-process. */
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

#define NU      GKVT_UI_USERS    /* users (type 0) */

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
    struct gkvt_prob *f = *state;
    static const int fans[][9] = {
        {2, 3, 1, 4, 2, 3, 5, 5, 5},
        {10, 10, 10, 3, 3, 3, 1, 1, 1},
        {-1, -1, -1, 2, 0, 2, 4, 4, 4}};
    gkv_client *c;
    struct gkvt_ui_seeds sd;
    int differs = 0, ncase = (int)(sizeof g_cases / sizeof g_cases[0]);

    gkvt_prob_graph_make(f);
    gkvt_prob_serve(f, 1, NULL);
    c = gkvt_prob_client(f, 0);
    gkvt_ui_seeds_make(&sd, 0);
    for (int k = 0; k < ncase; k++)
        for (int fi = 0; fi < 3; fi++)
            for (int rep = 0; rep < 2; rep++) {
                differs = 0;
                gkvt_prob_check_blocks(f, c, &sd, g_cases[k], fans[fi], 3,
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

        gkvt_prob_check_hop(f, c, 300, 7, 250, 100, 3, nm, fan, 3, 0);
        gkvt_prob_check_hop(f, c, 300, 7, 250, 100, 3, nm, fan, 3, GKV_SAMPLE_REPLACE);
    }
    /* an edge batch (user -> item clicks, reverses excluded) */
    {
        static const char *const nm[3] = {"w", NULL, "w64"};
        gkvt_prob_check_edge_batch(f, c, nm, 37, 3, 2, 9, 0);
    }
    NET_OK(gkv_client_close(c));
}

/* A 0/1 mask: its zero edges are never sampled, though the seeds have
 * them; with fanout -1 exactly the one edges come back. */
static void
test_mask(void **state)
{
    struct gkvt_prob *f = *state;
    static const char *const nm[3] = {NULL, "mask", NULL};
    const float *mask;
    gkv_client *c;
    struct gkvt_ui_seeds sd;
    size_t ones = 0, zeros_seen = 0;

    gkvt_prob_graph_make(f);
    gkvt_prob_serve(f, 1, NULL);
    c = gkvt_prob_client(f, 0);
    mask = gkvt_prob_feat_get(f, 1, "mask")->w;
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
            gkvt_prob_check_blocks(f, c, &sd, nm, fan, 2, oc.seed, oc.flags, &differs);
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

/* Bad requests get clear errors, and the servers go on serving. */
static void
test_errors(void **state)
{
    struct gkvt_prob *f = *state;
    gkv_client *c;
    struct gkvt_ui_seeds sd;
    gkv_block cb[2];
    gkv_sample_opts o = {0};
    int fan[3] = {3, 3, 3}, differs = 0;
    char longname[300];
    const char *nm[3] = {NULL, NULL, NULL};
    const char *msg;

    gkvt_prob_graph_make(f);
    gkvt_prob_serve(f, 1, NULL);
    c = gkvt_prob_client(f, 0);
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
        struct gkvt_wopts wo;
        static const char *const w3[3] = {"w", NULL, NULL};
        gkvt_prob_wopts(f, &wo, w3, 0, 0);
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
        ok = gkvt_prob_feat_get(f, 0, "w")->w[id];
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
        gkvt_prob_check_blocks(f, c, &sd, (const char *const *)nm, fan, 1, 3, 0,
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
    struct gkvt_prob *f = *state;
    static const int fans[][6] = {{2, 3, 1, 4, 2, 3}, {-1, 5, 0, 3, 3, 3},
                                  {10, 10, 10, 1, 1, 1}};
    const float *mask;
    gkv_client *c;
    struct gkvt_ui_seeds sd;
    size_t ones = 0;

    gkvt_prob_graph_make(f);
    gkvt_prob_serve(f, 2, NULL);
    c = gkvt_prob_client(f, 0);
    gkvt_ui_seeds_make(&sd, 4);
    for (int k = 0; k < 4; k++)
        for (int fi = 0; fi < 3; fi++)
            for (int rep = 0; rep < 2; rep++) {
                int differs = 0;
                gkvt_prob_check_blocks(f, c, &sd, g_cases[k], fans[fi], 2,
                             (uint64_t)(50 + k + 3 * fi), GKVT_PROB_OUT |
                             (rep ? GKV_SAMPLE_REPLACE : 0), &differs);
                assert_true(differs);
            }
    /* a mask on users' clicks: only its one edges leave a user */
    mask = gkvt_prob_feat_get(f, 1, "mask")->w;
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

        gkvt_prob_check_hop(f, c, 300, 11, 230, 100, 7, nm, fan, 8, GKVT_PROB_OUT);
        gkvt_prob_check_hop(f, c, 300, 11, 230, 100, 7, nm, fan, 8,
                  GKVT_PROB_OUT | GKV_SAMPLE_REPLACE);
    }
    /* an edge batch of clicks, reverses excluded, sampled outwards */
    {
        static const char *const nm[3] = {"w", "mask", NULL};
        gkvt_prob_check_edge_batch(f, c, nm, 41, 7, 1, 19, GKVT_PROB_OUT);
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

/* Out-edge weights through servers that take small messages (16 KiB):
 * the weights of a machine's seeds are cut into more requests, and the
 * blocks are still the in-process ones. */
static void
test_out_small_msg(void **state)
{
    struct gkvt_prob *f = *state;
    static const char *const extra[] = {"--max-msg", "16384", NULL};
    static const char *const nm[3] = {"w", "h", "w64"};
    int fan[6] = {-1, -1, 6, 3, 3, 3}, differs = 0;
    gkv_client *c;
    struct gkvt_ui_seeds sd;

    gkvt_prob_graph_make(f);
    gkvt_prob_serve(f, 1, extra);
    c = gkvt_prob_client(f, 0);
    gkvt_ui_seeds_make(&sd, 6);
    gkvt_prob_check_blocks(f, c, &sd, nm, fan, 2, 71, GKVT_PROB_OUT, &differs);
    gkvt_prob_check_blocks(f, c, &sd, nm, fan, 2, 72, GKVT_PROB_OUT | GKV_SAMPLE_REPLACE,
                 &differs);
    assert_true(differs);
    NET_OK(gkv_client_close(c));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_equals_in_process, gkvt_prob_setup,
                                        gkvt_prob_teardown),
        cmocka_unit_test_setup_teardown(test_mask, gkvt_prob_setup,
                                        gkvt_prob_teardown),
        cmocka_unit_test_setup_teardown(test_errors, gkvt_prob_setup,
                                        gkvt_prob_teardown),
        cmocka_unit_test_setup_teardown(test_out_edges, gkvt_prob_setup,
                                        gkvt_prob_teardown),
        cmocka_unit_test_setup_teardown(test_out_small_msg, gkvt_prob_setup,
                                        gkvt_prob_teardown),
    };

    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests_name("net_prob", tests, NULL, NULL);
}
