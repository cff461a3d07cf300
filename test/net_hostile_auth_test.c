/* net_hostile_auth_test.c - handshakes a hostile or broken client makes:
 * Real gkv-server processes on loopback (killed and reaped by PID in the
 * teardown, also after a failed assertion), spoken to with raw nanomsg REQ
 * sockets in the wire format of net/wire.h (gkvt_net.h's gkvt_rawfx and
 * gkvt_r*). Each test asserts what comes back (status, message, flags),
 * what the store holds afterwards and that the server still answers. The
 * other hostile-client programs: net_hostile_{resend,bounds,auth,drop}.
 *
 *   - --num-clients N: the server stops on the last leave only once N
 *     distinct members have joined (a member twice or an observer does not
 *     count); two clients joining as one (group, rank): the refusal and
 *     the log name the cause;
 *   - nonces: a HELLO flood does not make a waiting handshake fail; a
 *     nonce is good once, for its TTL, and only from the server that made
 *     it;
 *   - an observer's handshake with a member's group and rank is refused:
 *     it made the member's session an observer's, so the server ran on
 *     with no member, or stopped while a member was still there;
 *   - handshakes as one group and rank over and over: their log lines are
 *     rationed.
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

/* ---- observers ----------------------------------------------------------------- */

/* LEAVE of 'sess' on s: the reply's status; *stopping is its byte that
 * says whether the server now stops. */
static int32_t
rleave(int s, uint64_t sess, uint64_t req, uint8_t *stopping)
{
    struct gkvt_rep r = {0};
    int32_t st;

    assert_int_equal(gkvt_rcall(s, NET_LEAVE, sess, req, NULL, 0, &r), 0);
    st = r.h.status;
    *stopping = st == 0 && r.plen == 1 ? r.pl[0] : 0xff;
    free(r.pl);
    return st;
}

/* A server without --keep-alive stopped when the members joined so far
 * had left, so a trainer that connected later (slow to load its data)
 * found no server. With --num-clients N it stops on the last leave only
 * once N distinct members (group, rank) have joined; a member joining
 * twice, or an observer, does not count twice or at all. */
static void
test_num_clients(void **state)
{
    struct gkvt_rawfx *f = *state;
    const char *extra[] = {"--num-clients", "3", NULL};
    struct gkvt_rep r = {0};
    struct gkvt_proc *srv;
    uint64_t a, b, o;
    uint8_t stopping;
    int s;

    gkvt_make_f32(f->st, "feat", 4, 0, 100);
    srv = gkvt_rawfx_serve(f, extra);
    s = gkvt_raw_socket(f->base, 5000);
    /* rank 0 joins and leaves, twice; an observer comes and goes */
    for (int k = 0; k < 2; k++) {
        a = gkvt_rhandshake(s, "job", 0);
        assert_int_equal(rleave(s, a, 3, &stopping), 0);
        assert_int_equal(stopping, 0);
    }
    o = gkvt_rjoin(s, "tools", 0, NET_HS_OBSERVER, &r);
    assert_true(o != 0);
    assert_int_equal(rleave(s, o, 4, &stopping), 0);
    assert_int_equal(stopping, 0);
    usleep(200 * 1000);
    assert_true(gkvt_proc_alive(srv));
    assert_true(gkvt_file_has(srv->log, "1 of the 3 clients (--num-clients) "
                              "have joined: waiting for the others"));
    /* ranks 1 and 2 (another group's rank 0 counts too): the last leave
     * stops it */
    a = gkvt_rhandshake(s, "job", 1);
    b = gkvt_rhandshake(s, "other", 0);
    assert_true(gkvt_file_has(srv->log, "all 3 clients (--num-clients) have joined"));
    assert_int_equal(rleave(s, a, 5, &stopping), 0);
    assert_int_equal(stopping, 0);
    assert_int_equal(rleave(s, b, 6, &stopping), 0);
    assert_int_equal(stopping, 1);
    if (!gkvt_proc_wait(srv, 5000))
        fail_msg("every client left and the server runs on:\n%s",
                 gkvt_slurp(srv->log));
    assert_int_equal(gkvt_proc_code(srv), 0);
    assert_true(gkvt_file_has(srv->log, "the last client left (group 'other' rank 0)"));
    free(r.pl);
    nn_close(s);
}

/* Two clients joining as one (group, rank) take each other's session.
 * The refusal said "unknown session ... the server restarted, the lease
 * expired, or it was never granted"; it now names the cause, and the
 * server's log says so at the second handshake. */
static void
test_same_identity_named(void **state)
{
    struct gkvt_rawfx *f = *state;
    const char *extra[] = {"--keep-alive", NULL};
    struct gkvt_rep r = {0};
    uint64_t a, b;
    int s1, s2;

    gkvt_make_f32(f->st, "feat", 4, 0, 100);
    gkvt_rawfx_serve(f, extra);
    s1 = gkvt_raw_socket(f->base, 5000);
    s2 = gkvt_raw_socket(f->base, 5000);
    a = gkvt_rhandshake(s1, "p", 0);
    b = gkvt_rhandshake(s2, "p", 0);
    assert_true(a != b);
    assert_int_equal(gkvt_rcall(s1, NET_HEARTBEAT, a, 3, NULL, 0, &r), 0);
    assert_int_equal(r.h.status, GKV_EPERM);
    assert_true(r.h.flags & NET_F_SESSION);
    if (strstr(r.msg, "of group 'p' rank 0: a newer handshake as the same "
               "group and rank replaced it") == NULL ||
        strstr(r.msg, "each client of a group needs its own rank") == NULL)
        fail_msg("the refusal says: %s", r.msg);
    /* the new session works; a never-granted one gets the old text */
    assert_int_equal(gkvt_rcall(s2, NET_HEARTBEAT, b, 4, NULL, 0, &r), 0);
    assert_int_equal(r.h.status, 0);
    assert_int_equal(gkvt_rcall(s2, NET_HEARTBEAT, 0x1234, 5, NULL, 0, &r), 0);
    assert_int_equal(r.h.status, GKV_EPERM);
    assert_non_null(strstr(r.msg, "unknown session 0x0000000000001234: hand-shake first"));
    assert_true(gkvt_file_has(f->p[0].log, "two clients with one group and rank?"));
    free(r.pl);
    nn_close(s1);
    nn_close(s2);
}

/* ---- nonces -------------------------------------------------------------- */

/* Expects a refused handshake with nonce n: 'st', and 'text' in the reply. */
static void
rhs_refused(int s, const unsigned char *n, const char *token, gkv_err st,
            const char *text)
{
    struct gkvt_rep r = {0};

    assert_int_equal(gkvt_rhs(s, n, token, "job", 9, 0, &r), 0);
    assert_int_equal(r.h.status, st);
    if (strstr(r.msg, text) == NULL)
        fail_msg("the refusal says '%s', not '%s'", r.msg, text);
    free(r.pl);
}

/* The server kept its last 1,024 nonces, so 1,024 HELLOs from anyone (no
 * token needed) between a client's HELLO and its HANDSHAKE made the
 * handshake fail. Nonces now prove themselves (a tag under a key of the
 * server's); the server keeps only the nonces accepted handshakes spent.
 * A nonce is good once, for the TTL, and only from the server that made
 * it; a refused proof does not spend it. */
static void
test_hello_flood(void **state)
{
    struct gkvt_rawfx *f = *state;
    char tok[4300];
    const char *extra[] = {"--token-file", tok, "--keep-alive", NULL};
    enum { K = 16, FLOOD = 4096 };
    unsigned char n0[NET_NONCE_LEN], n1[NET_NONCE_LEN], bad[NET_NONCE_LEN];
    struct gkvt_rep r = {0};
    struct gkvt_proc *srv;
    int s, fl[K];
    long before;

    gkvt_make_f32(f->st, "feat", 4, 0, 100);
    snprintf(tok, sizeof tok, "%s/token", f->dir);
    gkvt_write_text(tok, "correct horse staple\n", 0600);
    srv = gkvt_rawfx_serve(f, extra);
    s = gkvt_raw_socket(f->base, 5000);
    gkvt_rhello(s, n0);
    /* FLOOD HELLOs, K in flight at a time */
    for (int i = 0; i < K; i++)
        fl[i] = gkvt_raw_socket(f->base, 5000);
    before = gkvt_peak_kib(srv->pid);
    for (int sent = 0; sent < FLOOD; sent += K) {
        for (int i = 0; i < K; i++)
            gkvt_rsend(fl[i], NET_HELLO, 0, 1, NULL, 0);
        for (int i = 0; i < K; i++) {
            assert_int_equal(gkvt_rrecv(fl[i], &r), 0);
            assert_int_equal(r.h.status, 0);
        }
    }
    for (int i = 0; i < K; i++)
        nn_close(fl[i]);
    if (gkvt_rhs(s, n0, "correct horse staple", "job", 0, 0, &r) == 0)
        fail_msg("a handshake after %d HELLOs from others: %s", FLOOD, r.msg);
    assert_true(gkvt_peak_kib(srv->pid) - before < 4 * 1024);
    /* spent: a replay is refused */
    rhs_refused(s, n0, "correct horse staple", GKV_EPERM, "nonce already used");
    /* a wrong proof does not spend a nonce */
    gkvt_rhello(s, n1);
    rhs_refused(s, n1, "battery staple horse", GKV_EPERM, "wrong token");
    if (gkvt_rhs(s, n1, "correct horse staple", "job", 1, 0, &r) == 0)
        fail_msg("a handshake after a wrong proof with its nonce: %s", r.msg);
    /* many spent nonces (the set grows and rehashes): each one refused
     * again, the first ones after the last */
    {
        enum { M = 600 };
        unsigned char (*ns)[NET_NONCE_LEN] = malloc(M * sizeof *ns);
        for (uint32_t i = 0; i < M; i++) {
            gkvt_rhello(s, ns[i]);
            if (gkvt_rhs(s, ns[i], "correct horse staple", "many", i, 0, &r) == 0)
                fail_msg("handshake %u: %s", i, r.msg);
        }
        for (uint32_t i = 0; i < M; i += 7)
            rhs_refused(s, ns[i], "correct horse staple", GKV_EPERM, "nonce already used");
        free(ns);
    }
    /* nonces the server did not make, or changed in any byte */
    for (unsigned i = 0; i < NET_NONCE_LEN; i++) {
        gkvt_rhello(s, bad);
        bad[i] ^= 0x10;
        rhs_refused(s, bad, "correct horse staple", GKV_EPERM, "nonce not from this server");
    }
    memset(bad, 0, sizeof bad);
    rhs_refused(s, bad, "correct horse staple", GKV_EPERM, "nonce not from this server");
    free(r.pl);
    nn_close(s);
    assert_true(gkvt_file_has(srv->log, "nonce already used"));
    assert_true(gkvt_proc_alive(srv));
}

/* A nonce is good for the TTL only; another server's (or an earlier run
 * of this one's) never. GKV_SERVER_NONCE_TTL_MS shortens the TTL (to 3 s:
 * the handshakes that must pass come well within it also on a machine that
 * stalls the test for a second). */
static void
test_nonce_expiry_and_origin(void **state)
{
    struct gkvt_rawfx *f = *state;
    const char *extra[] = {"--keep-alive", NULL};
    unsigned char n0[NET_NONCE_LEN], n1[NET_NONCE_LEN];
    struct gkvt_rep r = {0};
    struct gkvt_proc *srv;
    int s;

    gkvt_make_f32(f->st, "feat", 4, 0, 100);
    setenv("GKV_SERVER_NONCE_TTL_MS", "3000", 1);
    srv = gkvt_rawfx_serve(f, extra);
    unsetenv("GKV_SERVER_NONCE_TTL_MS");
    s = gkvt_raw_socket(f->base, 5000);
    gkvt_rhello(s, n0);
    gkvt_rhello(s, n1);
    /* without a token, a nonce within its TTL may serve again */
    assert_true(gkvt_rhs(s, n1, NULL, "job", 0, 0, &r) != 0);
    assert_true(gkvt_rhs(s, n1, NULL, "job", 1, 0, &r) != 0);
    usleep(3500 * 1000);
    rhs_refused(s, n0, NULL, GKV_EPERM, "older than 3000 ms");
    gkvt_rhello(s, n0);
    assert_true(gkvt_rhs(s, n0, NULL, "job", 2, 0, &r) != 0);
    nn_close(s);
    /* a restarted server does not take its earlier run's nonces */
    gkvt_rhello(s = gkvt_raw_socket(f->base, 5000), n0);
    nn_close(s);
    kill(srv->pid, SIGTERM);
    assert_true(gkvt_proc_wait(srv, 10000));
    srv = gkvt_rawfx_serve(f, extra);
    s = gkvt_raw_socket(f->base, 5000);
    rhs_refused(s, n0, NULL, GKV_EPERM, "nonce not from this server");
    free(r.pl);
    nn_close(s);
    assert_true(gkvt_proc_alive(srv));
}

/* A member that hand-shook again as an observer (same group and rank)
 * became one: when the clients left, none was a member's, so the server
 * (no --keep-alive: it stops when its last member leaves) ran on with no
 * client at all. That handshake is refused; the member keeps its session. */
static void
test_observer_handshake_keeps_a_member(void **state)
{
    struct gkvt_rawfx *f = *state;
    struct gkvt_proc *srv;
    struct gkvt_rep rh = {0};
    uint64_t a0, ao;
    uint8_t stopping;
    int32_t st;
    int s0, so;

    gkvt_make_f32(f->st, "feat", 4, 0, 100);
    srv = gkvt_rawfx_serve(f, NULL);
    s0 = gkvt_raw_socket(f->base, 5000);
    so = gkvt_raw_socket(f->base, 5000);
    a0 = gkvt_rhandshake(s0, "job", 0);
    ao = gkvt_rjoin(so, "job", 0, NET_HS_OBSERVER, &rh);
    /* every client leaves with the session it holds */
    if (ao != 0) {
        assert_int_equal(rleave(so, ao, 3, &stopping), 0);
        assert_int_equal(stopping, 0);       /* an observer never stops it */
    }
    st = rleave(s0, a0, 4, &stopping);
    if (!gkvt_proc_wait(srv, 5000))
        fail_msg("every client left (member: %s) and the server runs on:\n%s",
                 gkv_err_name(st), gkvt_slurp(srv->log));
    assert_int_equal(gkvt_proc_code(srv), 0);
    assert_true(gkvt_file_has(srv->log, "the last client left (group 'job' rank 0)"));
    assert_int_equal(st, 0);
    assert_int_equal(stopping, 1);
    assert_int_equal(ao, 0);
    assert_int_equal(rh.h.status, GKV_EPERM);
    assert_non_null(strstr(rh.msg, "rank 0 is a member's"));
    free(rh.pl);
    nn_close(s0);
    nn_close(so);
}

/* An observer that hand-shook as a second member's rank made that rank an
 * observer's: the first member's leaving then stopped the server while
 * the second had not left. */
static void
test_observer_handshake_keeps_the_count(void **state)
{
    struct gkvt_rawfx *f = *state;
    unsigned char b[256];
    net_wr w = {b, sizeof b, 0};
    struct gkvt_proc *srv;
    struct gkvt_rep r = {0}, rh = {0};
    uint64_t a0, a1, ao, id = 42;
    uint8_t stopping;
    float *was, row[4];
    int s0, s1, so;

    gkvt_make_f32(f->st, "feat", 4, 0, 100);
    was = gkvt_read_all(f->st, "feat", 100, 16);
    srv = gkvt_rawfx_serve(f, NULL);
    s0 = gkvt_raw_socket(f->base, 5000);
    s1 = gkvt_raw_socket(f->base, 5000);
    so = gkvt_raw_socket(f->base, 5000);
    a0 = gkvt_rhandshake(s0, "job", 0);
    a1 = gkvt_rhandshake(s1, "job", 1);
    ao = gkvt_rjoin(so, "job", 1, NET_HS_OBSERVER, &rh);
    assert_int_equal(rleave(s0, a0, 3, &stopping), 0);
    if (stopping != 0)
        fail_msg("rank 0 left and the server stops, but rank 1 has not "
                 "left:\n%s", gkvt_slurp(srv->log));
    /* rank 1 goes on with its session */
    net__enc_pull_req(&w, "feat", &id, NULL, 1);
    assert_int_equal(gkvt_rcall(s1, NET_PULL, a1, 4, b, w.off, &r), 0);
    if (r.h.status != 0)
        fail_msg("rank 1's pull: %s: %s", gkv_err_name(r.h.status), r.msg);
    assert_int_equal(r.plen, 16 + 16);
    memcpy(row, r.pl + 16, 16);
    assert_memory_equal(row, was + id * 4, 16);
    assert_int_equal(ao, 0);
    assert_int_equal(rh.h.status, GKV_EPERM);
    assert_non_null(strstr(rh.msg, "rank 1 is a member's"));
    /* the last member leaves: now it stops */
    assert_int_equal(rleave(s1, a1, 5, &stopping), 0);
    assert_int_equal(stopping, 1);
    assert_true(gkvt_proc_wait(srv, 5000));
    assert_int_equal(gkvt_proc_code(srv), 0);
    assert_true(gkvt_file_has(srv->log, "the last client left (group 'job' rank 1)"));
    free(r.pl);
    free(rh.pl);
    free(was);
    nn_close(s0);
    nn_close(s1);
    nn_close(so);
}

/* Handshakes as one group and rank, over and over (anyone may, to a
 * server without a token): each wrote a "rejoin" line, so the log grew
 * without bound. They are rationed like rejections (50 per 10 s). */
static void
test_rejoin_flood_rationed(void **state)
{
    struct gkvt_rawfx *f = *state;
    const char *extra[] = {"--keep-alive", NULL};
    char *log, *p;
    int s, lines = 0;

    gkvt_make_f32(f->st, "feat", 4, 0, 100);
    gkvt_rawfx_serve(f, extra);
    s = gkvt_raw_socket(f->base, 5000);
    for (int i = 0; i < 300; i++)
        (void)gkvt_rhandshake(s, "flood", 0);
    nn_close(s);
    /* at the stop, the rejoins not logged are counted in the log too (the
     * count waited for a next rejoin, which a flood that stopped never
     * sends) */
    kill(f->p[0].pid, SIGTERM);
    assert_true(gkvt_proc_wait(&f->p[0], 10000));
    log = gkvt_slurp(f->p[0].log);
    for (p = log; (p = strstr(p, "rejoin: group 'flood' rank 0")) != NULL;
         p++)
        lines++;
    {
        unsigned long long n, unlogged = 0;
        for (p = log; (p = strstr(p, "] m0/s0: ")) != NULL; p++)
            if (sscanf(p, "] m0/s0: %llu more rejoins were not logged", &n) == 1)
                unlogged += n;
        if ((unsigned long long)lines + unlogged != 299)
            fail_msg("%d rejoin lines and %llu not logged, for 299 rejoins",
                     lines, unlogged);
    }
    free(log);
    /* 50 a window; a slow machine may see a second window begin */
    if (lines < 1 || lines > 100)
        fail_msg("%d rejoin lines for 299 rejoins", lines);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_num_clients, setup, gkvt_rawfx_teardown),
        cmocka_unit_test_setup_teardown(test_same_identity_named, setup, gkvt_rawfx_teardown),
        cmocka_unit_test_setup_teardown(test_hello_flood, setup, gkvt_rawfx_teardown),
        cmocka_unit_test_setup_teardown(test_nonce_expiry_and_origin, setup, gkvt_rawfx_teardown),
        cmocka_unit_test_setup_teardown(test_observer_handshake_keeps_a_member, setup, gkvt_rawfx_teardown),
        cmocka_unit_test_setup_teardown(test_observer_handshake_keeps_the_count, setup, gkvt_rawfx_teardown),
        cmocka_unit_test_setup_teardown(test_rejoin_flood_rationed, setup, gkvt_rawfx_teardown),
    };

    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests_name("net_hostile_auth", tests, NULL, NULL);
}
