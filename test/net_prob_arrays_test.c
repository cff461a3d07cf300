/* net_prob_arrays_test.c - sampling probabilities given as arrays and by
 * position: edge_w arrays through the client, weights by position
 * in-process, edge_w_lo, and the SAMPLE codec's names and weights.
 *
 * A heterogeneous graph (users follow users, users click items, items are
 * clicked by users) with edge features of several dtypes is partitioned in
 * two and served by gkv-server processes on loopback (started and killed
 * by PID; the fixture: gkvt_prob.h). The programs on edge-feature
 * probabilities: net_prob_test (by name), net_prob_push_test (pushes to
 * the feature), net_prob_arrays_test (edge_w arrays, weights by
 * position, the codec). Checked:
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
#include "gkvt_prob.h"
#include "gkv.h"
#include "net/wire.h"
#include "graph/graph_seam.h"       /* graph__sample_hop */

#define NU      GKVT_UI_USERS    /* users (type 0) */
#define NI      GKVT_UI_ITEMS    /* items (type 1) */

/* edge_w arrays through the client, the very options in-process calls
 * take: the client lists the seeds' edges of those types, reads their
 * weights from the arrays and sends them with the seeds. In- and
 * out-edges; blocks, hops and edge batches; an array beside an in-edge
 * feature; edge_w_lo; bad arrays refused as in-process. */
static void
test_edge_w_client(void **state)
{
    struct gkvt_prob *f = *state;
    static const char *const all[3] = {"w", "mask", "w64"};
    static const char *const feat0[3] = {"w", NULL, NULL};
    static const int fans[][6] = {{3, 2, 4, 2, 2, 2}, {-1, 6, 0, 3, 3, 3}};
    gkv_client *c;
    struct gkvt_ui_seeds sd;
    struct gkvt_wopts wo;
    gkv_block wb[4];

    gkvt_prob_graph_make(f);
    gkvt_prob_serve(f, 1, NULL);
    c = gkvt_prob_client(f, 0);
    gkvt_ui_seeds_make(&sd, 7);
    for (int d = 0; d < 2; d++)
        for (int fi = 0; fi < 2; fi++)
            for (int rep = 0; rep < 2; rep++) {
                unsigned fl = (d ? GKVT_PROB_OUT : 0) |
                              (rep ? GKV_SAMPLE_REPLACE : 0);
                gkvt_prob_wopts(f, &wo, all, (uint64_t)(80 + 4 * d + fi), fl);
                gkvt_prob_same_blocks(f, c, &sd, &wo.o, &wo.o, fans[fi], 2, wb);
            }
    {
        int fan[3] = {5, 2, 3};
        gkvt_prob_check_hop(f, c, 200, 5, 170, 50, 3, all, fan, 4, GKVT_PROB_ARR);
        gkvt_prob_check_hop(f, c, 200, 5, 170, 50, 3, all, fan, 5, GKVT_PROB_ARR | GKVT_PROB_OUT);
        gkvt_prob_check_edge_batch(f, c, all, 37, 3, 2, 6, GKVT_PROB_ARR);
        gkvt_prob_check_edge_batch(f, c, all, 41, 7, 1, 7, GKVT_PROB_ARR | GKVT_PROB_OUT);
    }
    /* an array for etype 2 beside the feature "w" for etype 0 (in-edges:
     * the feature goes by position too), and the arrays' start */
    for (int d = 0; d < 2; d++) {
        gkv_sample_opts oc;
        const float *ew[3];
        int64_t len[3], lo[3] = {0, 0, 0};

        gkvt_prob_wopts(f, &wo, all, 90, d ? GKVT_PROB_OUT : 0);
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
        gkvt_prob_same_blocks(f, c, &sd, &oc, &wo.o, fans[0], 2, wb);
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
        memcpy(bad, gkvt_prob_feat_get(f, 0, "w")->w, (size_t)f->ne[0] * 4);
        for (int64_t i = 0; i < f->ne[0]; i++)
            bad[i] = -1.0f;
        o.edge_w = ew;
        o.edge_w_len = len;
        assert_int_equal(gkv_client_sample_blocks(c, sd.sv, sd.ns, fans[0], 3,
                                                  2, &o, wb), GKV_EINVAL);
        assert_non_null(strstr(gkv_net_errmsg(), "has weight -1 in edge_w"));
        len[0] = f->ne[0] / 4;               /* short */
        memcpy(bad, gkvt_prob_feat_get(f, 0, "w")->w, (size_t)f->ne[0] * 4);
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
        gkvt_prob_same_blocks(f, c, &sd, &o, &o, fans[0], 2, wb);
        free(bad);
    }
    NET_OK(gkv_client_close(c));
}

/* In-process weights by position (graph__sample_hop, what a server runs
 * for out-edges weighed by a feature): equal to edge_w arrays holding the
 * same values; a count that does not match a node's edges and a negative
 * weight are refused, naming the node or the weight. */
static void
test_wpos_inprocess(void **state)
{
    struct gkvt_prob *f = *state;
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
    struct gkvt_wopts wo;
    struct gkvt_hcopy ref;
    gkv_block rb[1];

    gkvt_prob_graph_make(f);
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
        fw = gkvt_prob_feat_get(f, e, nm[e])->w;
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
    gkvt_prob_wopts(f, &wo, nm, 6, GKVT_PROB_OUT | GKV_SAMPLE_REPLACE);
    GKVT_OK(gkv_sample_neighbors(f->ref.ws, sv, ns, fan, 3, 1, &wo.o, we));
    memset(rb, 0, sizeof rb);
    rb[0].num_etypes = 3;
    rb[0].edges = we;
    gkvt_hcopy_take(&ref, rb, 1);
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
    gkvt_hcopy_free(&ref);
    /* both an edge_w array and weights by position for one type */
    {
        struct gkvt_wopts w2;
        gkvt_prob_wopts(f, &w2, nm, 6, GKVT_PROB_OUT);
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

/* In-process: a partition's sgraph with the weights of its own edges
 * (edge_w_lo = its first edge) samples as the whole graph with the whole
 * array; an edge outside the array is GKV_ERANGE. */
static void
test_edge_w_lo(void **state)
{
    struct gkvt_prob *f = *state;
    const struct gkvt_efeat *w;
    int fan[3] = {5, 0, 0};

    gkvt_prob_graph_make(f);
    w = gkvt_prob_feat_get(f, 0, "w");
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
        cmocka_unit_test_setup_teardown(test_edge_w_lo, gkvt_prob_setup,
                                        gkvt_prob_teardown),
        cmocka_unit_test_setup_teardown(test_edge_w_client, gkvt_prob_setup,
                                        gkvt_prob_teardown),
        cmocka_unit_test_setup_teardown(test_wpos_inprocess, gkvt_prob_setup,
                                        gkvt_prob_teardown),
    };

    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests_name("net_prob_arrays", tests, NULL, NULL);
}
