/* net_graph_bad_test.c - bad inputs to graph servers: IDs out of range, a
 * seed another partition owns sent to the wrong server, a missing tensor,
 * a wrong fanout count, hand-made raw requests, and a bad server start-up
 * give clear errors, and the servers keep serving.
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

static char g_server_path[PATH_MAX + 16];

/* A raw session with server (machine m, server 0). */
static int
raw_open(struct gkvt_ng *f, int m, uint64_t *session)
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
bad_start(struct gkvt_ng *f, int64_t *seeds)
{
    gkvt_ng_graph_make(f, 11, 2);
    gkvt_ng_serve(f, 1);
    for (size_t i = 0; i < 40; i++)
        seeds[i] = (int64_t)(i * 37 % (uint64_t)f->n);
    return gkvt_ng_client(f, "bad");
}

/* The servers still serve after the refused requests; closes c. */
static void
bad_done(struct gkvt_ng *f, gkv_client *c, const int64_t *seeds)
{
    gkv_sample_opts o = {0};
    int fan2[2] = {3, 3};

    gkvt_ng_check_hop(f, c, seeds, 40, 3, 0, &o);
    gkvt_ng_check_blocks(f, c, seeds, 40, fan2, 2, &o);
    NET_OK(gkv_client_close(c));
    for (int i = 0; i < f->j.np; i++)
        assert_true(gkvt_proc_alive(&f->j.p[i]) || gkvt_proc_wait(&f->j.p[i], 5000));
}

/* A seed or edge ID out of range: named, nothing sent. */
static void
test_bad_id_out_of_range_is_erange(void **state)
{
    struct gkvt_ng *f = *state;
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
    struct gkvt_ng *f = *state;
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
    struct gkvt_ng *f = *state;
    int64_t seeds[40];
    float row[GKVT_NG_FEAT_W];
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
    struct gkvt_ng *f = *state;
    static unsigned char b[1 << 16];
    int64_t seeds[40], other = -1;
    uint64_t session;
    char msg[NET_ERRMSG_MAX + 1], text[128];
    int s;
    gkv_client *c = bad_start(f, seeds);

    s = raw_open(f, 0, &session);
    for (int64_t v = 0; v < f->n && other < 0; v++)
        if (gkvt_ng_owner_of(f, v, 0) == 1)
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
    struct gkvt_ng *f = *state;
    char *out = NULL, *err = NULL;
    char *noid[] = {g_server_path, "--part-config", f->j.json, "--ip-config",
                    f->j.cfg, NULL};
    char *three[] = {g_server_path, "--part-config", f->j.json, "--part-id", "0",
                     "--ip-config", f->j.cfg, NULL};
    char *mach[] = {g_server_path, "--part-config", f->j.json, "--part-id", "0",
                    "--machine", "1", "--ip-config", f->j.cfg, NULL};
    char *help[] = {g_server_path, "--help", NULL};

    gkvt_ng_graph_make(f, 8, 2);
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

#define T(name) cmocka_unit_test_setup_teardown(name, gkvt_ng_setup, \
                                                gkvt_ng_teardown)

int
main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_server_startup),
        T(test_bad_id_out_of_range_is_erange),
        T(test_bad_etype_fanout_or_twice_is_einval),
        T(test_bad_feature_tensor_or_id_is_refused),
        T(test_bad_raw_requests_are_refused_by_the_server),
    };

    signal(SIGPIPE, SIG_IGN);
    snprintf(g_server_path, sizeof g_server_path, "%s", gkvt_prog("gkv-server"));
    return cmocka_run_group_tests_name("net_graph_bad", tests, NULL, NULL);
}
