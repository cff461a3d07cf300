/* net_graph_sample_test.c - graph servers on loopback answer as the graph
 * in-process does: sample_blocks (in, out, with replacement, weighted,
 * excluded edges) and sample_neighbors against gkv_sample_blocks /
 * gkv_sample_neighbors on the whole renumbered graph, every array
 * compared; find_edges, in/out degrees and in_subgraph against gkv_part_*
 * on the owning partition; pulled node features against the feature rows
 * through the mapping; on three partitions, two servers per machine, a
 * METIS split with uneven ranges (tensors created by the client follow the
 * book) and replies split to fit --max-msg.
 *
 * A weighted R-MAT graph with a node feature is partitioned
 * (gkv_partition_write), one or two gkv-server processes per partition
 * serve it (--part-config), and the client's distributed calls are
 * compared with in-process references (the fixture: gkvt_ngraph.h).
 * Servers are started and killed by PID (teardown reaps all of them, also
 * after a failed assertion); ports are picked per test as net_test does.
 * The programs on graph servers: net_graph_test (a heterogeneous graph,
 * the GPU loader), net_graph_sample_test, net_graph_bad_test,
 * net_graph_batch_test.
 */
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
#include "gkvt_ngraph.h"
#include "gkv.h"
#include "net/wire.h"

static void
test_sampling_three_parts(void **state)
{
    struct gkvt_ng *f = *state;
    gkv_client *c;
    gkv_sample_opts o = {0};
    int64_t seeds[400], rep[64], eids[300], excl[200];
    const int64_t *ex[1] = {excl};
    size_t exn[1] = {200};
    int fan3[3] = {3, 5, 10}, fan2[2] = {4, 6}, fan1[1] = {-1};
    uint64_t r = 11;
    const gkv_pbook *b;

    gkvt_ng_graph_make(f, 11, 3);
    gkvt_ng_serve(f, 1);
    c = gkvt_ng_client(f, "job");
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
    assert_true(gkvt_ng_check_blocks(f, c, seeds, 200, fan3, 3, &o) > 1000);
    o.seed = 43;
    gkvt_ng_check_blocks(f, c, seeds, 400, fan1, 1, &o);
    o.dir = GKV_DIR_OUT;
    gkvt_ng_check_blocks(f, c, seeds, 150, fan2, 2, &o);
    o.dir = GKV_DIR_IN;
    o.flags = GKV_SAMPLE_REPLACE;
    gkvt_ng_check_blocks(f, c, seeds, 150, fan3, 3, &o);
    o.flags = GKV_SAMPLE_WEIGHTED;
    gkvt_ng_check_blocks(f, c, seeds, 150, fan2, 2, &o);
    o.flags = GKV_SAMPLE_WEIGHTED | GKV_SAMPLE_REPLACE;
    gkvt_ng_check_blocks(f, c, seeds, 150, fan2, 2, &o);
    o.flags = 0;
    o.exclude = ex;
    o.exclude_n = exn;
    gkvt_ng_check_blocks(f, c, seeds, 150, fan3, 3, &o);
    o.dir = GKV_DIR_OUT;
    gkvt_ng_check_blocks(f, c, seeds, 100, fan2, 2, &o);
    o.dir = GKV_DIR_IN;
    /* single hops, seeds repeated (also back to back) */
    gkvt_ng_check_hop(f, c, seeds, 64, 5, 0, &o);
    gkvt_ng_check_hop(f, c, rep, 64, 5, 0, &o);
    o.exclude = NULL;
    o.exclude_n = NULL;
    gkvt_ng_check_hop(f, c, rep, 64, 4, 2, &o);
    o.dir = GKV_DIR_OUT;
    o.flags = GKV_SAMPLE_REPLACE;
    gkvt_ng_check_hop(f, c, rep, 64, 3, 1, &o);

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
        assert_true(gkvt_ng_check_blocks(f, c, all, (size_t)f->n, fanall, 3, &o) >
                    (size_t)2 * f->m);
        o.dir = GKV_DIR_OUT;
        gkvt_ng_check_blocks(f, c, all, (size_t)f->n, fanall, 3, &o);
        free(all);
    }

    gkvt_ng_check_queries(f, c, seeds, 400, eids, 300);
    gkvt_ng_check_queries(f, c, rep, 64, eids, 10);
    gkvt_ng_check_features(f, c, seeds, 400);
    NET_OK(gkv_client_close(c));
}

/* Checks that tensor 'name' lies on partition q's store as the book's
 * range of node type 0 (edge type 0 when is_edge). */
static void
check_book_split(struct gkvt_ng *f, const char *name, int is_edge)
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
    struct gkvt_ng *f = *state;
    gkv_client *c;
    gkv_tensor_spec sp;
    const gkv_pbook *b;
    int64_t lo, hi;
    uint64_t ids[3];
    float rows[3 * 2], want[3 * 2];
    char ename[300];

    gkvt_ng_method = GKV_PART_METIS;           /* uneven ranges */
    gkvt_ng_graph_make(f, 10, 3);
    gkvt_ng_method = GKV_PART_RANDOM;
    gkvt_ng_serve(f, 1);
    c = gkvt_ng_client(f, "job");
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
    /* the job's tensor list: every partition holds its own csc/...
     * (local positions, overlapping ranges); they were listed and failed
     * the whole list. Now the job's tensors, with their whole ranges. */
    {
        gkv_tensor_desc *v;
        size_t n, k = 0;
        NET_OK(gkv_client_tensor_list(c, &v, &n));
        for (size_t i = 0; i < n; i++) {
            assert_true(strncmp(v[i].name, "csc/", 4) != 0 &&
                        strncmp(v[i].name, "csr/", 4) != 0);
            if (strcmp(v[i].name, "node/_N/emb") == 0 ||
                strcmp(v[i].name, "emb") == 0) {
                assert_int_equal(v[i].lo, 0);
                assert_int_equal(v[i].hi, f->n);
                k++;
            }
        }
        assert_int_equal(k, 2);
        gkv_free(v);
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
    struct gkvt_ng *f = *state;
    const char *extra[] = {"--max-msg", "8192", NULL};
    gkv_client *c;
    gkv_sample_opts o = {0};
    int64_t *seeds;
    int fan[2] = {-1, -1}, big = 4000;
    size_t n = 600, edges;
    gkv_server_stats st0, st1;
    uint64_t before = 0;

    gkvt_ng_graph_make(f, 10, 2);
    gkvt_ng_extra = extra;
    gkvt_ng_serve(f, 1);
    gkvt_ng_extra = NULL;
    c = gkvt_ng_client(f, "job");
    seeds = malloc(n * 8);
    for (size_t i = 0; i < n; i++)
        seeds[i] = (int64_t)((i * 389 + 11) % (size_t)f->n);
    NET_OK(gkv_client_stats(c, 0, &st0));
    NET_OK(gkv_client_stats(c, 1, &st1));
    before = st0.samples + st1.samples;
    o.seed = 5;
    edges = gkvt_ng_check_blocks(f, c, seeds, n, fan, 2, &o);
    assert_true(edges > 2 * 8192 / 16);          /* more than one reply holds */
    gkvt_ng_check_hop(f, c, seeds, n, -1, 1, &o);
    o.flags = GKV_SAMPLE_REPLACE;
    fan[0] = fan[1] = 30;
    gkvt_ng_check_blocks(f, c, seeds, n, fan, 2, &o);
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
    struct gkvt_ng *f = *state;
    gkv_client *c;
    gkv_sample_opts o = {0};
    gkv_server_stats st;
    int64_t *all, *seeds;
    int fan[3] = {2, 4, 8};
    size_t n;

    gkvt_ng_graph_make(f, 12, 2);
    /* these servers send every SAMPLE column as i64 (the wide form a
     * graph past 2^32 IDs needs; the other tests get the u32 form) */
    setenv("GKV_SERVER_WIDE_IDS", "1", 1);
    gkvt_ng_serve(f, 2);
    unsetenv("GKV_SERVER_WIDE_IDS");
    c = gkvt_ng_client(f, "job2");
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
    gkvt_ng_check_blocks(f, c, seeds, 1500, fan, 3, &o);
    o.flags = GKV_SAMPLE_WEIGHTED;
    gkvt_ng_check_blocks(f, c, seeds, 1500, fan, 2, &o);
    for (size_t i = 0; i < 4; i++) {
        NET_OK(gkv_client_stats(c, i, &st));
        assert_true(st.samples > 0);
        assert_true(st.sample_edges > 0);
    }
    gkvt_ng_check_queries(f, c, all, n, all, n);
    gkvt_ng_check_features(f, c, all, n);
    NET_OK(gkv_client_close(c));
    free(all);
    free(seeds);
}

#define T(name) cmocka_unit_test_setup_teardown(name, gkvt_ng_setup, \
                                                gkvt_ng_teardown)

int
main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_sampling_three_parts),
        T(test_two_servers_per_machine),
        T(test_create_follows_book),
        T(test_sample_split_to_fit),
    };

    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests_name("net_graph_sample", tests, NULL, NULL);
}
