/* net_hostile_resend_test.c - sessions under load and pushes sent again,
 * as a hostile or broken client makes them:
 * Real gkv-server processes on loopback (killed and reaped by PID in the
 * teardown, also after a failed assertion), spoken to with raw nanomsg REQ
 * sockets in the wire format of net/wire.h (gkvt_net.h's gkvt_rawfx and
 * gkvt_r*). Each test asserts what comes back (status, message, flags),
 * what the store holds afterwards and that the server still answers. The
 * other hostile-client programs: net_hostile_{resend,bounds,auth,drop}.
 *
 *   - a session that is talking is never taken for a silent one (its lease
 *     stamp was later than the clock the expiry check had read);
 *   - a push nanomsg sends again after a lost connection is applied once,
 *     also when another push of the session completed in between (two
 *     lanes), when the copy comes while the first is being applied, and
 *     when the session is replaced (a rejoin) while the copy waits.
 */
#include <arpa/inet.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <lmdb.h>
#include <nanomsg/nn.h>
#include <nanomsg/reqrep.h>
#include "gkvt.h"
#include "gkvt_net.h"
#include "gkv_net.h"
#include "gkv_part.h"
#include "gkv_partition.h"
#include "gkv_sample.h"
#include "kv/gkv_npy.h"
#include "net/wire.h"

static int
setup(void **state)
{
    return gkvt_rawfx_setup(state, "nethostile");
}

/* ---- sessions under load ------------------------------------------------ */

/* Opens n sessions of 'group' (ranks 0..n-1), hello and handshake
 * pipelined over K sockets. */
static void
flood_sessions(int port, const char *group, int n, uint64_t *sess)
{
    enum { K = 32 };
    int s[K];
    struct gkvt_rep r = {0};

    for (int i = 0; i < K; i++)
        s[i] = gkvt_raw_socket(port, 10000);
    for (int base = 0; base < n; base += K) {
        int k = n - base < K ? n - base : K;
        net_hello_rep hr[K];

        for (int i = 0; i < k; i++)
            gkvt_rsend(s[i], NET_HELLO, 0, 1, NULL, 0);
        for (int i = 0; i < k; i++) {
            net_rd rd;
            assert_int_equal(gkvt_rrecv(s[i], &r), 0);
            net__rd_init(&rd, r.pl, r.plen);
            assert_int_equal(net__dec_hello_rep(&rd, &hr[i]), 0);
        }
        for (int i = 0; i < k; i++) {
            unsigned char b[512];
            net_wr w = {b, sizeof b, 0};
            net_hs_req hs;
            memset(&hs, 0, sizeof hs);
            memcpy(hs.nonce, hr[i].nonce, NET_NONCE_LEN);
            snprintf(hs.group, sizeof hs.group, "%s", group);
            hs.rank = (uint32_t)(base + i);
            net__enc_hs_req(&w, &hs);
            gkvt_rsend(s[i], NET_HANDSHAKE, 0, 2, b, w.off);
        }
        for (int i = 0; i < k; i++) {
            net_hs_rep hp;
            net_rd rd;
            assert_int_equal(gkvt_rrecv(s[i], &r), 0);
            assert_int_equal(r.h.status, 0);
            net__rd_init(&rd, r.pl, r.plen);
            assert_int_equal(net__dec_hs_rep(&rd, &hp), 0);
            net__schema_free(&hp.schema);
            sess[base + i] = hp.session;
        }
    }
    free(r.pl);
    for (int i = 0; i < K; i++)
        nn_close(s[i]);
}

/* Clients that keep talking never lose their session to the lease check.
 * The check read the clock before taking the lock a worker holds while it
 * stamps a session's last request; a stamp a few ms later than that clock
 * made now - last_ms wrap around ("nothing heard for
 * 18446744073709551613 ms"), and a live session was dropped (a server
 * without --keep-alive then stops when it was the last). Many sessions
 * make each request hold the lock longer, so the window opens often.
 * The flood's sessions never heart-beat: the lease (600 s) outlasts the
 * test however slowly the machine runs it; a wrapped difference is ~2^64
 * ms and expires a session under any lease. */
static void
test_lease_not_expired_under_load(void **state)
{
    struct gkvt_rawfx *f = *state;
    /* all 16000 sessions come from 127.0.0.1: past the default cap of
     * sessions per peer address */
    const char *extra[] = {"--keep-alive", "--heartbeat-timeout", "600000",
                           "--threads", "2", "--max-peer-sessions", "16384",
                           NULL};
    enum { NS = 16000, H = 4 };
    uint64_t *sess = calloc(NS, sizeof *sess);
    struct gkvt_rep r = {0};
    int s[H], calls = 0, refused = 0;
    double t0;

    gkvt_make_f32(f->st, "feat", 4, 0, 100);
    gkvt_rawfx_serve(f, extra);
    flood_sessions(f->base, "flood", NS, sess);
    for (int i = 0; i < H; i++)
        s[i] = gkvt_raw_socket(f->base, 5000);
    /* the last sessions of the table heart-beat for 8 s, well under the
     * 600 s lease */
    t0 = tools__now_s();
    while (tools__now_s() - t0 < 8) {
        for (int i = 0; i < H; i++)
            gkvt_rsend(s[i], NET_HEARTBEAT, sess[NS - 1 - i], (uint64_t)calls + i + 10,
                  NULL, 0);
        for (int i = 0; i < H; i++) {
            assert_int_equal(gkvt_rrecv(s[i], &r), 0);
            if (r.h.status != 0 && refused++ == 0)
                fprintf(stderr, "heartbeat %d refused after %.2f s: %s\n",
                        calls + i, tools__now_s() - t0, r.msg);
        }
        calls += H;
    }
    for (int i = 0; i < H; i++)
        nn_close(s[i]);
    free(sess);
    free(r.pl);
    assert_int_equal(refused, 0);
    assert_false(gkvt_file_has(f->p[0].log, "lease expired"));
    assert_true(gkvt_proc_alive(&f->p[0]));
}

/* ---- push dedup ---------------------------------------------------------- */

/* The gkv client keeps two pushes of one session in flight (two lanes).
 * When lane 1 loses its connection, nanomsg sends its request again; by
 * then lane 2's later push may have completed. The server remembered only
 * the last completed request id, so the re-sent push was applied twice. */
static void
test_push_resent_after_a_later_push(void **state)
{
    struct gkvt_rawfx *f = *state;
    const char *extra[] = {"--keep-alive", NULL};
    unsigned char b[4096];
    struct gkvt_rep r = {0};
    float *was, *got;
    uint64_t sess, n = 0;
    size_t len;
    net_rd rd;
    int s1, s2;

    gkvt_make_f32(f->st, "acc", 4, 0, 100);
    was = gkvt_read_all(f->st, "acc", 100, 16);
    gkvt_rawfx_serve(f, extra);
    s1 = gkvt_raw_socket(f->base, 5000);
    s2 = gkvt_raw_socket(f->base, 5000);
    sess = gkvt_rhandshake(s1, "job", 0);
    len = gkvt_enc_add(b, sizeof b, "acc", 3, 1, 4, 1.0f);      /* row 3 */
    assert_int_equal(gkvt_rcall(s1, NET_PUSH, sess, 7, b, len, &r), 0);
    assert_int_equal(r.h.status, 0);
    len = gkvt_enc_add(b, sizeof b, "acc", 4, 1, 4, 1.0f);      /* row 4 */
    assert_int_equal(gkvt_rcall(s2, NET_PUSH, sess, 8, b, len, &r), 0);
    assert_int_equal(r.h.status, 0);
    /* request 7 again: answered as the first time, not applied */
    len = gkvt_enc_add(b, sizeof b, "acc", 3, 1, 4, 1.0f);
    assert_int_equal(gkvt_rcall(s1, NET_PUSH, sess, 7, b, len, &r), 0);
    assert_int_equal(r.h.status, 0);
    assert_int_equal(r.h.req_id, 7);
    net__rd_init(&rd, r.pl, r.plen);
    assert_int_equal(net__dec_u64(&rd, &n, "n"), 0);
    assert_int_equal(n, 1);
    free(r.pl);
    nn_close(s1);
    nn_close(s2);
    kill(f->p[0].pid, SIGTERM);
    assert_true(gkvt_proc_wait(&f->p[0], 5000));
    assert_int_equal(gkvt_proc_code(&f->p[0]), 0);
    got = gkvt_read_all(f->st, "acc", 100, 16);
    gkvt_assert_added(got + 3 * 4, was + 3 * 4, 8, 1.0f);       /* rows 3, 4 */
    assert_memory_equal(got, was, 3 * 16);                 /* the rest */
    assert_memory_equal(got + 5 * 4, was + 5 * 4, 95 * 16);
    assert_true(gkvt_file_has(f->p[0].log, "request 7 (push) arrived again; "
                              "not applied twice"));
    free(was);
    free(got);
}

/* A copy of a push that arrives while the first is still being applied
 * (a re-send after a lost connection, racing the first copy on another
 * worker) found nothing completed yet and was applied as well. */
static void
test_push_resent_while_applied(void **state)
{
    struct gkvt_rawfx *f = *state;
    const char *extra[] = {"--keep-alive", "--threads", "2", NULL};
    enum { NR = 24, W = 65536 };       /* 24 rows of 256 KiB: 6 MiB */
    size_t cap = (size_t)NR * W * 4 + 4096, len;
    unsigned char *b = malloc(cap);
    struct gkvt_rep r1 = {0}, r2 = {0};
    float *was, *got;
    uint64_t sess;
    int s1, s2;

    gkvt_make_f32(f->st, "big", W, 0, NR);
    was = gkvt_read_all(f->st, "big", NR, W * 4);
    gkvt_rawfx_serve(f, extra);
    s1 = gkvt_raw_socket(f->base, 20000);
    s2 = gkvt_raw_socket(f->base, 20000);
    sess = gkvt_rhandshake(s1, "job", 0);
    len = gkvt_enc_add(b, cap, "big", 0, NR, W, 1.0f);
    gkvt_rsend(s1, NET_PUSH, sess, 5, b, len);
    gkvt_rsend(s2, NET_PUSH, sess, 5, b, len);
    assert_int_equal(gkvt_rrecv(s1, &r1), 0);
    assert_int_equal(gkvt_rrecv(s2, &r2), 0);
    assert_int_equal(r1.h.status, 0);
    assert_int_equal(r2.h.status, 0);
    assert_int_equal(r1.h.req_id, 5);
    assert_int_equal(r2.h.req_id, 5);
    nn_close(s1);
    nn_close(s2);
    kill(f->p[0].pid, SIGTERM);
    assert_true(gkvt_proc_wait(&f->p[0], 10000));
    assert_int_equal(gkvt_proc_code(&f->p[0]), 0);
    got = gkvt_read_all(f->st, "big", NR, W * 4);
    gkvt_assert_added(got, was, (size_t)NR * W, 1.0f);
    assert_true(gkvt_file_has(f->p[0].log, "request 5 (push) arrived again; "
                              "not applied twice"));
    free(b);
    free(was);
    free(got);
    free(r1.pl);
    free(r2.pl);
}

/* A copy of a push waiting for the first copy (above) while its session
 * was replaced by a new handshake of the same group and rank (what the
 * client does after a push times out) found no session when the first
 * finished, so nothing recorded the request, and was applied a second
 * time with status 0. The first copy is held up by this process holding
 * LMDB's writer lock. Whatever the timing, every push answered 0 was
 * applied once and every refused one not at all. */
static void
test_push_resent_session_replaced(void **state)
{
    struct gkvt_rawfx *f = *state;
    const char *extra[] = {"--keep-alive", "--threads", "3", NULL};
    unsigned char b[4096];
    struct gkvt_rep r1 = {0}, r2 = {0}, r3 = {0};
    float *was, *got;
    uint64_t sess;
    size_t len;
    int s1, s2, s3, ok;
    MDB_env *env;
    MDB_txn *txn;

    gkvt_make_f32(f->st, "acc", 4, 0, 10);
    was = gkvt_read_all(f->st, "acc", 10, 16);
    gkvt_rawfx_serve(f, extra);
    s1 = gkvt_raw_socket(f->base, 20000);
    s2 = gkvt_raw_socket(f->base, 20000);
    s3 = gkvt_raw_socket(f->base, 20000);
    sess = gkvt_rhandshake(s1, "job", 0);
    assert_int_equal(mdb_env_create(&env), 0);
    assert_int_equal(mdb_env_set_maxdbs(env, 8), 0);
    assert_int_equal(mdb_env_open(env, f->st, 0, 0644), 0);
    assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
    len = gkvt_enc_add(b, sizeof b, "acc", 3, 1, 4, 1.0f);
    gkvt_rsend(s1, NET_PUSH, sess, 5, b, len);     /* blocks on the lock */
    tools__sleep_ms(300);
    gkvt_rsend(s2, NET_PUSH, sess, 5, b, len);     /* waits for the first */
    tools__sleep_ms(300);
    assert_int_not_equal(gkvt_rjoin(s3, "job", 0, 0, &r3), 0);
    assert_int_equal(r3.h.status, 0);
    tools__sleep_ms(100);
    mdb_txn_abort(txn);
    mdb_env_close(env);
    assert_int_equal(gkvt_rrecv(s1, &r1), 0);
    assert_int_equal(gkvt_rrecv(s2, &r2), 0);
    ok = (r1.h.status == 0) + (r2.h.status == 0);
    assert_true(ok <= 1);
    if (r1.h.status != 0 || r2.h.status != 0) {
        const struct gkvt_rep *no = r2.h.status != 0 ? &r2 : &r1;
        assert_int_equal(no->h.status, GKV_EPERM);
        assert_true(no->h.flags & NET_F_SESSION);
    }
    nn_close(s1);
    nn_close(s2);
    nn_close(s3);
    kill(f->p[0].pid, SIGTERM);
    assert_true(gkvt_proc_wait(&f->p[0], 10000));
    assert_int_equal(gkvt_proc_code(&f->p[0]), 0);
    got = gkvt_read_all(f->st, "acc", 10, 16);
    for (int i = 0; i < 40; i++)
        if (got[i] != was[i] + (i / 4 == 3 ? (float)ok : 0.0f))
            fail_msg("element %d is %g, was %g: %d push%s answered 0", i,
                     got[i], was[i], ok, ok == 1 ? "" : "es");
    free(was);
    free(got);
    free(r1.pl);
    free(r2.pl);
    free(r3.pl);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_lease_not_expired_under_load, setup, gkvt_rawfx_teardown),
        cmocka_unit_test_setup_teardown(test_push_resent_after_a_later_push, setup, gkvt_rawfx_teardown),
        cmocka_unit_test_setup_teardown(test_push_resent_while_applied, setup, gkvt_rawfx_teardown),
        cmocka_unit_test_setup_teardown(test_push_resent_session_replaced, setup, gkvt_rawfx_teardown),
    };

    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests_name("net_hostile_resend", tests, NULL, NULL);
}
