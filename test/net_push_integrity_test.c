/* net_push_integrity_test.c - requests that would poison a server's state
 * are refused, against real gkv-server processes on loopback (started and
 * stopped by PID; the teardown kills and reaps every process a test
 * started, also after a failed assertion), through the client and with
 * raw nanomsg REQ sockets speaking net/wire.h by hand:
 *   - a push through add or an optimizer carrying a NaN or an infinity is
 *     refused whole (GKV_EINVAL naming the tensor, handler, row ID and
 *     column): by gkv_client_push before anything is sent (a push over two
 *     machines would otherwise be applied on the one whose rows are
 *     finite), and by the server for a raw PUSH, directly and in
 *     write-back mode; rows and optimizer state are unchanged, byte for
 *     byte;
 *   - a push of finite values whose result is not finite in the row or
 *     its optimizer state (adagrad's sum of squares of 3e38 in f32, 60000
 *     + 60000 in f16) is refused whole by the server that holds the rows,
 *     with the same message as a local push, through the client and raw,
 *     directly and in write-back mode; nothing changes;
 *   - a push that reuses a session's request id with another payload is
 *     refused (it was acknowledged with the first one's answer and not
 *     applied); a true copy still gets the first answer, applied once;
 *   - many clients creating and deleting one name with different shapes,
 *     through two servers of one store: every CREATE reply describes what
 *     that request did (its own shape when it created or found the
 *     tensor; a clash with another shape otherwise), never "no tensor".
 *
 * Ports: gkvt_port_base() per test, again on a fresh range on a clash.
 * GKVT_PORT_BASE fixes the start.
 */
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <nanomsg/nn.h>
#include <nanomsg/reqrep.h>
#include "gkvt_net.h"
#include "wire.h"

#define MAXPROC 8

static const char *const g_opts[] = {"--create", "--no-prefault",
                                     "--keep-alive", NULL};

static int
setup(void **state)
{
    return gkvt_job_setup(state, sizeof (struct gkvt_job), "netinteg",
                          MAXPROC, g_opts, 0);
}

static int
teardown(void **state)
{
    return gkvt_job_teardown(state);
}

/* ---- the wire, by hand --------------------------------------------------
 * No cmocka assertion here: the race test calls these from threads. Each
 * returns -1 on a transport or format failure, 'why' saying what. */

struct rep {
    net_hdr h;
    unsigned char *pl;       /* payload (malloc'd) */
    size_t plen;
    char msg[1100];          /* an error reply's message */
};

static int
rsock(int port)
{
    int s = nn_socket(AF_SP, NN_REQ), v = -1, to = 20000;
    char url[64];

    if (s < 0)
        return -1;
    nn_setsockopt(s, NN_SOL_SOCKET, NN_RCVMAXSIZE, &v, sizeof v);
    nn_setsockopt(s, NN_SOL_SOCKET, NN_RCVTIMEO, &to, sizeof to);
    v = INT_MAX;
    nn_setsockopt(s, NN_REQ, NN_REQ_RESEND_IVL, &v, sizeof v);
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", port);
    if (nn_connect(s, url) < 0) {
        nn_close(s);
        return -1;
    }
    return s;
}

/* Sends request 'type' and receives its reply into r. */
static int
rcall(int s, uint16_t type, uint64_t session, uint64_t req, const void *pl,
      size_t plen, struct rep *r)
{
    unsigned char *b = malloc(NET_HDR_LEN + plen + 1);
    void *m = NULL;
    char why[256];
    size_t len;
    int n, ok;

    free(r->pl);
    memset(r, 0, sizeof *r);
    if (b == NULL)
        return -1;
    len = gkvt_raw_msg(b, type, session, req, pl, plen);
    ok = nn_send(s, b, len, 0) == (int)len;
    free(b);
    if (!ok || (n = nn_recv(s, &m, NN_MSG, 0)) < 0)
        return -1;
    if (net__hdr_check(m, (size_t)n, &r->h, why, sizeof why) != GKV_OK ||
        !(r->h.flags & NET_F_REPLY) || (r->pl = malloc(r->h.len + 1)) == NULL) {
        nn_freemsg(m);
        return -1;
    }
    r->plen = (size_t)r->h.len;
    memcpy(r->pl, (unsigned char *)m + NET_HDR_LEN, r->plen);
    nn_freemsg(m);
    if (r->h.status != 0) {
        net_rd rd;
        net__rd_init(&rd, r->pl, r->plen);
        if (net__dec_err(&rd, r->msg, sizeof r->msg) != 0)
            return -1;
    }
    return 0;
}

/* HELLO and HANDSHAKE as (group, rank), no token: the session, or 0. */
static uint64_t
rhandshake(int s, const char *group, uint32_t rank)
{
    unsigned char b[512];
    net_wr w = {b, sizeof b, 0};
    struct rep r = {0};
    net_hello_rep hr;
    net_hs_req hs;
    net_hs_rep hp;
    uint64_t sess = 0;
    net_rd rd;

    if (rcall(s, NET_HELLO, 0, 1, NULL, 0, &r) != 0 || r.h.status != 0)
        goto out;
    net__rd_init(&rd, r.pl, r.plen);
    if (net__dec_hello_rep(&rd, &hr) != 0)
        goto out;
    memset(&hs, 0, sizeof hs);
    memcpy(hs.nonce, hr.nonce, NET_NONCE_LEN);
    snprintf(hs.group, sizeof hs.group, "%s", group);
    hs.rank = rank;
    net__enc_hs_req(&w, &hs);
    if (rcall(s, NET_HANDSHAKE, 0, 2, b, w.off, &r) != 0 || r.h.status != 0)
        goto out;
    net__rd_init(&rd, r.pl, r.plen);
    if (net__dec_hs_rep(&rd, &hp) != 0)
        goto out;
    net__schema_free(&hp.schema);
    sess = hp.session;
out:
    free(r.pl);
    return sess;
}

/* A PUSH of n f32 rows of width w with 'handler'; the payload length. */
static size_t
enc_push(unsigned char *b, size_t cap, const char *name, const char *handler,
         const uint64_t *ids, const float *rows, size_t n, size_t w)
{
    static const double opt[4] = {0.1, 0, 0, 0};
    net_wr wr = {b, cap, 0};

    net__enc_push_req(&wr, name, handler, 0, opt, w * sizeof *rows, ids, rows,
                      NULL, n);
    assert_true(wr.off <= cap);
    return wr.off;
}

/* ---- helpers ------------------------------------------------------------ */

/* Every row of 'name' in [0, n) (rb bytes each), pulled through c. */
static unsigned char *
pull_all(gkv_client *c, const char *name, size_t n, size_t rb)
{
    uint64_t *ids = malloc(n * sizeof *ids);
    unsigned char *b = malloc(n * rb);

    assert_non_null(ids);
    assert_non_null(b);
    for (size_t i = 0; i < n; i++)
        ids[i] = i;
    NET_OK(gkv_client_pull(c, name, ids, n, b, n * rb));
    free(ids);
    return b;
}

static gkv_client *
client(struct gkvt_job *j, uint32_t rank)
{
    gkv_client_opts o = {0};

    o.timeout_ms = 20000;
    o.flags = GKV_CLIENT_NO_HEARTBEAT;
    return gkvt_connect(j->cfg, "job", rank, &o);
}

/* ---- NaN and infinity ------------------------------------------------- */

#define NR 20                   /* rows [0, 20): [0, 10) on machine 0 */
#define WD 4

/* The tensor and the companions handler h keeps ("" ends). */
static const char *const fams[4][5] = {
    {"emb", ""}, {"emb", ""}, {"emb", "emb#adagrad_s", ""},
    {"emb", "emb#adam_m", "emb#adam_v", "emb#adam_t", ""},
};

/* Bytes per row of fams[h][k] for a tensor of dtype dt. */
static size_t
fam_rb(gkv_dtype dt, size_t h, size_t k)
{
    if (k == 0)
        return WD * gkv_dtype_size(dt);
    if (h == 3 && k == 3)
        return 8;                                   /* adam_t: i64 */
    return WD * (dt == GKV_F64 ? 8 : 4);
}

/* Fails unless every tensor of fams[h] (dtype dt) still holds what
 * before[] (pulled before a push refused through handler 'hname') holds;
 * frees before[]. */
static void
fam_unchanged(gkv_client *c, gkv_dtype dt, size_t h, const char *hname,
              unsigned char *before[4])
{
    for (size_t k = 0; fams[h][k][0] != '\0'; k++) {
        size_t frb = fam_rb(dt, h, k);
        unsigned char *after = pull_all(c, fams[h][k], NR, frb);

        if (memcmp(before[k], after, NR * frb) != 0)
            fail_msg("%s %s: '%s' changed by a refused push",
                     gkv_dtype_name(dt), hname, fams[h][k]);
        free(before[k]);
        free(after);
    }
}

/* Through gkv_client_push over two machines: every float dtype and
 * handler that does arithmetic; nothing applied on either machine. */
static void
nonfinite_client(struct gkvt_job *j, const char *const *extra)
{
    static const gkv_dtype dts[] = {GKV_F32, GKV_F16, GKV_BF16, GKV_F64};
    static const char *const hs[] = {"add", "sgd", "adagrad", "adam"};
    gkv_client *c;
    uint64_t ids[NR];

    gkvt_serve(j, 2, 1, extra, NULL);
    c = client(j, 0);
    for (size_t i = 0; i < NR; i++)
        ids[i] = i;
    for (size_t di = 0; di < 4; di++) {
        gkv_tensor_spec sp = gkvt_spec_init(dts[di], WD, 0, NR, GKV_INIT_UNIFORM);
        size_t rb = fam_rb(dts[di], 0, 0);
        unsigned char rows[NR * WD * 8];

        NET_OK(gkv_client_create(c, "emb", &sp, -1));
        for (size_t hi = 0; hi < 4; hi++) {
            gkv_push_args pa = {.handler = hs[hi], .lr = 0.1};
            unsigned char *before[4];
            char want[160];

            for (size_t k = 0; k < NR * WD; k++)
                gkvt_elem_set(dts[di], rows, k, 0.25 * (double)(k % 3) - 0.25);
            NET_OK(gkv_client_push(c, "emb", ids, NR, rows, NR * rb, &pa));
            for (size_t k = 0; fams[hi][k][0] != '\0'; k++)
                before[k] = pull_all(c, fams[hi][k], NR, fam_rb(dts[di], hi, k));
            gkvt_elem_set(dts[di], rows, 17 * WD + 3, hi % 2 ? INFINITY : NAN);
            snprintf(want, sizeof want, "tensor 'emb': push '%s': row 17 col 3 "
                     "is %s: refused, nothing applied", hs[hi],
                     hi % 2 ? "+inf" : "NaN");
            NET_FAILS(gkv_client_push(c, "emb", ids, NR, rows, NR * rb, &pa),
                      GKV_EINVAL, want);
            fam_unchanged(c, dts[di], hi, hs[hi], before);
        }
        NET_OK(gkv_client_delete(c, "emb"));
    }
    NET_OK(gkv_client_close(c));
}

static void
test_nonfinite_client(void **state)
{
    nonfinite_client(*state, NULL);
}

static void
test_nonfinite_client_writeback(void **state)
{
    const char *extra[] = {"--writeback", "emb", NULL};

    nonfinite_client(*state, extra);
}

/* One server (machine 0) with extra arguments 'extra', and a client of
 * it that created "emb" (f32, NR x WD); ids[] (NR) set to 0..NR-1 and
 * rows[] (NR x WD) to 0.5. */
static gkv_client *
raw_serve(struct gkvt_job *j, const char *const *extra, uint64_t *ids,
          float *rows)
{
    gkv_tensor_spec sp = gkvt_spec_init(GKV_F32, WD, 0, NR, GKV_INIT_UNIFORM);
    gkv_client *c;

    gkvt_serve(j, 1, 1, extra, NULL);
    c = client(j, 0);
    NET_OK(gkv_client_create(c, "emb", &sp, -1));
    for (size_t i = 0; i < NR; i++)
        ids[i] = i;
    for (size_t k = 0; k < NR * WD; k++)
        rows[k] = 0.5f;
    return c;
}

/* Sends 'rows' (NR x WD f32) as a raw PUSH of "emb" through handler 'h'
 * on socket s (session sess, request id rid); fails unless the server
 * refuses it GKV_EINVAL with "tensor 'emb': push 'h': row 17 col 3 WHY:
 * refused, nothing applied". The reply in *r. */
static void
raw_push_refused(int s, uint64_t sess, uint64_t rid, const char *h,
                 const uint64_t *ids, const float *rows, const char *why,
                 struct rep *r)
{
    unsigned char b[4096];
    char want[256];
    size_t len = enc_push(b, sizeof b, "emb", h, ids, rows, NR, WD);

    assert_int_equal(rcall(s, NET_PUSH, sess, rid, b, len, r), 0);
    assert_int_equal(r->h.status, GKV_EINVAL);
    snprintf(want, sizeof want, "tensor 'emb': push '%s': row 17 col 3 %s: "
             "refused, nothing applied", h, why);
    if (strstr(r->msg, want) == NULL)
        fail_msg("server said \"%s\", expected \"%s\"", r->msg, want);
}

/* A raw PUSH (no client check) is refused by the server itself. */
static void
nonfinite_raw(struct gkvt_job *j, const char *const *extra)
{
    gkv_push_args pa = {.handler = "adagrad", .lr = 0.1};
    unsigned char *was, *was_s, *now, *now_s;
    float rows[NR * WD];
    uint64_t ids[NR], sess;
    struct rep r = {0};
    gkv_client *c;
    int s;

    c = raw_serve(j, extra, ids, rows);
    NET_OK(gkv_client_push(c, "emb", ids, NR, rows, sizeof rows, &pa));
    was = pull_all(c, "emb", NR, WD * 4);
    was_s = pull_all(c, "emb#adagrad_s", NR, WD * 4);
    assert_true((s = rsock(j->base)) >= 0);
    assert_true((sess = rhandshake(s, "raw", 0)) != 0);
    for (int hi = 0; hi < 4; hi++) {
        static const char *const hs[] = {"add", "sgd", "adagrad", "adam"};

        rows[17 * WD + 3] = hi % 2 ? -INFINITY : NAN;
        raw_push_refused(s, sess, 10 + (uint64_t)hi, hs[hi], ids, rows,
                         hi % 2 ? "is -inf" : "is NaN", &r);
    }
    now = pull_all(c, "emb", NR, WD * 4);
    now_s = pull_all(c, "emb#adagrad_s", NR, WD * 4);
    assert_memory_equal(now, was, NR * WD * 4);
    assert_memory_equal(now_s, was_s, NR * WD * 4);
    free(r.pl);
    free(was);
    free(was_s);
    free(now);
    free(now_s);
    nn_close(s);
    NET_OK(gkv_client_close(c));
}

static void
test_nonfinite_raw(void **state)
{
    nonfinite_raw(*state, NULL);
}

static void
test_nonfinite_raw_writeback(void **state)
{
    const char *extra[] = {"--writeback", "emb", NULL};

    nonfinite_raw(*state, extra);
}

/* ---- results that overflow --------------------------------------------- */

/* Finite values whose result overflows, through gkv_client_push to the
 * rows of machine 1 ([10, 20)): refused by that server with the local
 * push's message; the tensor and its state unchanged. */
static void
overflow_client(struct gkvt_job *j, const char *const *extra)
{
    static const struct {
        gkv_dtype dt;
        size_t h;               /* index in fams */
        const char *name;
        double lr, init, val;
        const char *want;
    } cs[] = {
        {GKV_F32, 2, "adagrad", 0.1, 0, 3e38, "row 13 col 2 would become +inf "
         "in its state 'emb#adagrad_s' (gradient 3e+38 overflows f32): "
         "refused, nothing applied"},
        {GKV_F32, 3, "adam", 0.1, 0, 3e38, "row 13 col 2 would become +inf in "
         "its state 'emb#adam_v' (gradient 3e+38 overflows f32): refused, "
         "nothing applied"},
        {GKV_F64, 2, "adagrad", 0.1, 0, 1e200, "row 13 col 2 would become +inf "
         "in its state 'emb#adagrad_s' (gradient 1e+200 overflows f64): "
         "refused, nothing applied"},
        {GKV_F32, 1, "sgd", 1e30, 0, 1e30, "row 13 col 2 would become -inf "
         "(gradient 1e+30 with lr 1e+30 overflows f32): refused, nothing "
         "applied"},
        {GKV_F16, 0, "add", 0, 60000, 60000, "row 13 col 2 would become +inf "
         "(adding 60000 overflows f16): refused, nothing applied"},
    };
    gkv_client *c;
    uint64_t ids[NR / 2];

    gkvt_serve(j, 2, 1, extra, NULL);
    c = client(j, 0);
    for (size_t i = 0; i < NR / 2; i++)
        ids[i] = NR / 2 + i;
    for (size_t ci = 0; ci < sizeof cs / sizeof *cs; ci++) {
        gkv_tensor_spec sp = gkvt_spec_init(cs[ci].dt, WD, 0, NR, GKV_INIT_UNIFORM);
        gkv_push_args good = {.handler = cs[ci].name, .lr = 0.1};
        gkv_push_args pa = {.handler = cs[ci].name, .lr = cs[ci].lr};
        size_t rb = fam_rb(cs[ci].dt, 0, 0), h = cs[ci].h;
        unsigned char rows[NR / 2 * WD * 8], *before[4];
        char want[256];

        NET_OK(gkv_client_create(c, "emb", &sp, -1));
        for (size_t k = 0; k < NR / 2 * WD; k++)
            gkvt_elem_set(cs[ci].dt, rows, k, 0.25 * (double)(k % 3) - 0.25);
        NET_OK(gkv_client_push(c, "emb", ids, NR / 2, rows, NR / 2 * rb, &good));
        if (cs[ci].init != 0) {
            unsigned char one[WD * 8] = {0};
            uint64_t id = 13;

            gkvt_elem_set(cs[ci].dt, one, 2, cs[ci].init);
            NET_OK(gkv_client_push(c, "emb", &id, 1, one, rb, NULL));
        }
        for (size_t k = 0; fams[h][k][0] != '\0'; k++)
            before[k] = pull_all(c, fams[h][k], NR, fam_rb(cs[ci].dt, h, k));
        gkvt_elem_set(cs[ci].dt, rows, 3 * WD + 2, cs[ci].val);
        snprintf(want, sizeof want, "tensor 'emb': push '%s': %s", cs[ci].name,
                 cs[ci].want);
        NET_FAILS(gkv_client_push(c, "emb", ids, NR / 2, rows, NR / 2 * rb, &pa),
                  GKV_EINVAL, want);
        fam_unchanged(c, cs[ci].dt, h, cs[ci].name, before);
        NET_OK(gkv_client_delete(c, "emb"));
    }
    NET_OK(gkv_client_close(c));
}

static void
test_overflow_client(void **state)
{
    overflow_client(*state, NULL);
}

static void
test_overflow_client_writeback(void **state)
{
    const char *extra[] = {"--writeback", "emb", NULL};

    overflow_client(*state, extra);
}

/* A raw PUSH of f32 gradients of 3e38 through adagrad and adam, and of
 * 2^127 through add to a row holding 2^127: the server refuses each. */
static void
overflow_raw(struct gkvt_job *j, const char *const *extra)
{
    static const char *const hs[] = {"add", "adagrad", "adam"};
    static const char *const whys[] = {
        "would become +inf (adding 1.70141e+38 overflows f32)",
        "would become +inf in its state 'emb#adagrad_s' (gradient 3e+38 "
        "overflows f32)",
        "would become +inf in its state 'emb#adam_v' (gradient 3e+38 "
        "overflows f32)",
    };
    static const char *const names[] = {
        "emb", "emb#adagrad_s", "emb#adam_m", "emb#adam_v", "emb#adam_t"
    };
    unsigned char *was[5], *now;
    float rows[NR * WD];
    uint64_t ids[NR], sess;
    struct rep r = {0};
    gkv_client *c;
    int s;

    c = raw_serve(j, extra, ids, rows);
    for (size_t hi = 1; hi < 3; hi++) {      /* the state exists */
        gkv_push_args pa = {.handler = hs[hi], .lr = 0.1};
        NET_OK(gkv_client_push(c, "emb", ids, NR, rows, sizeof rows, &pa));
    }
    rows[17 * WD + 3] = 0x1p127f;
    NET_OK(gkv_client_push(c, "emb", ids, NR, rows, sizeof rows, NULL));
    for (size_t k = 0; k < 5; k++)
        was[k] = pull_all(c, names[k], NR, k == 4 ? 8 : WD * 4);
    assert_true((s = rsock(j->base)) >= 0);
    assert_true((sess = rhandshake(s, "raw", 0)) != 0);
    for (size_t hi = 0; hi < 3; hi++) {
        rows[17 * WD + 3] = hi == 0 ? 0x1p127f : 3e38f;
        raw_push_refused(s, sess, 10 + (uint64_t)hi, hs[hi], ids, rows,
                         whys[hi], &r);
    }
    for (size_t k = 0; k < 5; k++) {
        now = pull_all(c, names[k], NR, k == 4 ? 8 : WD * 4);
        if (memcmp(now, was[k], NR * (k == 4 ? 8 : WD * 4)) != 0)
            fail_msg("'%s' changed by a refused push", names[k]);
        free(now);
        free(was[k]);
    }
    free(r.pl);
    nn_close(s);
    NET_OK(gkv_client_close(c));
}

static void
test_overflow_raw(void **state)
{
    overflow_raw(*state, NULL);
}

static void
test_overflow_raw_writeback(void **state)
{
    const char *extra[] = {"--writeback", "emb", NULL};

    overflow_raw(*state, extra);
}

/* ---- a reused request id ------------------------------------------------ */

static void
test_request_id_reused(void **state)
{
    struct gkvt_job *j = *state;
    gkv_tensor_spec sp = gkvt_spec_init(GKV_F32, WD, 0, NR, GKV_INIT_UNIFORM);
    unsigned char b[4096], b2[4096], *was, *now;
    float one[WD] = {1, 1, 1, 1};
    uint64_t id3 = 3, id4 = 4, sess, n = 0;
    struct rep r = {0};
    gkv_client *c;
    size_t len, len2;
    net_rd rd;
    int s;

    gkvt_serve(j, 1, 1, NULL, NULL);
    c = client(j, 0);
    NET_OK(gkv_client_create(c, "acc", &sp, -1));
    was = pull_all(c, "acc", NR, WD * 4);
    assert_true((s = rsock(j->base)) >= 0);
    assert_true((sess = rhandshake(s, "raw", 0)) != 0);
    len = enc_push(b, sizeof b, "acc", "add", &id3, one, 1, WD);     /* row 3 */
    assert_int_equal(rcall(s, NET_PUSH, sess, 7, b, len, &r), 0);
    assert_int_equal(r.h.status, 0);
    /* another push (row 4) under id 7: refused, not taken for a copy */
    len2 = enc_push(b2, sizeof b2, "acc", "add", &id4, one, 1, WD);
    assert_int_equal(rcall(s, NET_PUSH, sess, 7, b2, len2, &r), 0);
    assert_int_equal(r.h.status, GKV_EINVAL);
    assert_non_null(strstr(r.msg, "request id 7 reused with a different payload"));
    /* the same bytes again: the first answer, not applied again */
    assert_int_equal(rcall(s, NET_PUSH, sess, 7, b, len, &r), 0);
    assert_int_equal(r.h.status, 0);
    net__rd_init(&rd, r.pl, r.plen);
    assert_int_equal(net__dec_u64(&rd, &n, "n"), 0);
    assert_int_equal(n, 1);
    /* a request of another type under id 7 is not answered as the push
     * was (OPT_RESET is not remembered; these bytes are no OPT_RESET) */
    assert_int_equal(rcall(s, NET_OPT_RESET, sess, 7, b, len, &r), 0);
    assert_int_not_equal(r.h.status, 0);
    now = pull_all(c, "acc", NR, WD * 4);
    for (size_t i = 0; i < NR * WD; i++) {
        float w, g;
        memcpy(&w, was + 4 * i, 4);
        memcpy(&g, now + 4 * i, 4);
        if (g != (i / WD == 3 ? w + 1 : w))
            fail_msg("element %zu (row %zu): %g, was %g", i, i / WD, g, w);
    }
    assert_true(gkvt_file_has(j->p[0].log, "reuses the id of another request"));
    free(r.pl);
    free(was);
    free(now);
    nn_close(s);
    NET_OK(gkv_client_close(c));
}

/* ---- create and delete of one name, racing ------------------------------ */

#define RACERS 12
#define ROUNDS 200

struct racer {
    int port, rank;
    uint64_t created, found, clashed, deleted;
    char bad[1400];             /* the first wrong reply, "" when none */
};

/* Checks one CREATE reply against the request (width w): "" or why not. */
static void
create_judge(const struct rep *r, uint64_t w, char *bad, size_t cap,
             uint64_t *created, uint64_t *found, uint64_t *clashed)
{
    net_create_rep cr;
    net_rd rd;
    char mine[64];

    if (r->h.status == GKV_EEXIST) {
        /* "tensor 'race' exists as f32 [W'] ...; asked for f32 [w] ..." */
        const char *as = strstr(r->msg, "exists as f32 [");
        snprintf(mine, sizeof mine, "asked for f32 [%llu]", (unsigned long long)w);
        if (as == NULL || strstr(r->msg, mine) == NULL ||
            strtoull(as + strlen("exists as f32 ["), NULL, 10) == w)
            snprintf(bad, cap, "create of width %llu: clash \"%s\"",
                     (unsigned long long)w, r->msg);
        (*clashed)++;
        return;
    }
    if (r->h.status != 0) {
        snprintf(bad, cap, "create of width %llu: %s: %s", (unsigned long long)w,
                 gkv_err_name((gkv_err)r->h.status), r->msg);
        return;
    }
    net__rd_init(&rd, r->pl, r->plen);
    if (net__dec_create_rep(&rd, &cr) != 0) {
        snprintf(bad, cap, "create: malformed reply: %s", rd.why);
        return;
    }
    if (strcmp(cr.t.name, "race") != 0 || cr.t.dtype != GKV_F32 ||
        cr.t.ndim != 1 || cr.t.shape[0] != w || cr.t.lo != 0 || cr.t.hi != 64 ||
        cr.t.row_bytes != w * 4)
        snprintf(bad, cap, "create of width %llu (%s) answered with tensor "
                 "'%s' width %llu rows [%llu, %llu) row bytes %llu",
                 (unsigned long long)w, cr.created ? "created" : "found",
                 cr.t.name, (unsigned long long)cr.t.shape[0],
                 (unsigned long long)cr.t.lo, (unsigned long long)cr.t.hi,
                 (unsigned long long)cr.t.row_bytes);
    (*(cr.created ? created : found))++;
}

static void *
race_run(void *arg)
{
    struct racer *ra = arg;
    unsigned char b[1024];
    struct rep r = {0};
    net_create_req cq;
    uint64_t sess, req = 10, w = 1 + (uint64_t)ra->rank % 4;
    int s = rsock(ra->port);

    if (s < 0 || (sess = rhandshake(s, "race", (uint32_t)ra->rank)) == 0) {
        snprintf(ra->bad, sizeof ra->bad, "rank %d: no session", ra->rank);
        goto out;
    }
    memset(&cq, 0, sizeof cq);
    snprintf(cq.t.name, sizeof cq.t.name, "race");
    cq.t.dtype = GKV_F32;
    cq.t.ndim = 1;
    cq.t.shape[0] = w;
    cq.t.lo = 0;
    cq.t.hi = 64;
    for (int i = 0; i < ROUNDS && ra->bad[0] == '\0'; i++) {
        net_wr wr = {b, sizeof b, 0};

        if ((i + ra->rank) % 2 == 0) {
            net__enc_create_req(&wr, &cq);
            if (rcall(s, NET_CREATE, sess, req++, b, wr.off, &r) != 0) {
                snprintf(ra->bad, sizeof ra->bad, "create: no reply");
                break;
            }
            create_judge(&r, w, ra->bad, sizeof ra->bad, &ra->created,
                         &ra->found, &ra->clashed);
        } else {
            net__wr_str(&wr, "race");
            if (rcall(s, NET_DELETE, sess, req++, b, wr.off, &r) != 0 ||
                r.h.status != 0) {
                snprintf(ra->bad, sizeof ra->bad, "delete: %s",
                         r.h.status ? r.msg : "no reply");
                break;
            }
            ra->deleted += r.plen == 1 && r.pl[0] == 1;
        }
    }
out:
    free(r.pl);
    if (s >= 0)
        nn_close(s);
    return NULL;
}

static void
test_create_delete_race(void **state)
{
    struct gkvt_job *j = *state;
    const char *extra[] = {"--nosync", NULL};   /* quick deletes */
    struct racer ra[RACERS];
    pthread_t th[RACERS];
    uint64_t created = 0, found = 0, clashed = 0, deleted = 0;

    gkvt_serve(j, 1, 2, extra, NULL);   /* two servers of one store */
    memset(ra, 0, sizeof ra);
    for (int i = 0; i < RACERS; i++) {
        ra[i].port = j->base + i % 2;
        ra[i].rank = i;
        assert_int_equal(pthread_create(&th[i], NULL, race_run, &ra[i]), 0);
    }
    for (int i = 0; i < RACERS; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < RACERS; i++) {
        if (ra[i].bad[0] != '\0')
            fail_msg("racer %d: %s", i, ra[i].bad);
        created += ra[i].created;
        found += ra[i].found;
        clashed += ra[i].clashed;
        deleted += ra[i].deleted;
    }
    fprintf(stderr, "race: %llu created, %llu found, %llu clashed, %llu "
            "deleted\n", (unsigned long long)created, (unsigned long long)found,
            (unsigned long long)clashed, (unsigned long long)deleted);
    assert_true(created > 0 && deleted > 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_nonfinite_client, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nonfinite_client_writeback, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nonfinite_raw, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nonfinite_raw_writeback, setup, teardown),
        cmocka_unit_test_setup_teardown(test_overflow_client, setup, teardown),
        cmocka_unit_test_setup_teardown(test_overflow_client_writeback, setup, teardown),
        cmocka_unit_test_setup_teardown(test_overflow_raw, setup, teardown),
        cmocka_unit_test_setup_teardown(test_overflow_raw_writeback, setup, teardown),
        cmocka_unit_test_setup_teardown(test_request_id_reused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_create_delete_race, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
