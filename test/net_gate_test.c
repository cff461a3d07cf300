/* net_gate_test.c - gkv-server's connection gate (tools/gkv-server/gate.c,
 * issue 26): what a peer that never authenticates can make a server hold,
 * how many such connections one address and all may keep, how many
 * sessions one address may take, and a handshake copied onto a second
 * connection. Real gkv-server processes on loopback; the attackers speak
 * SP over TCP by hand (plain sockets, so that they can lie about lengths
 * and stall mid-frame), while a well-behaved client pulls and checks its
 * bytes; its latency is printed, never asserted. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "gkvt.h"
#include "gkvt_net.h"
#include "gkv_net.h"

#define MAXPROC  4
#define BIG      (32u << 20)         /* what an attacker's frame declares */

static int
setup(void **state)
{
    return gkvt_job_setup(state, sizeof (struct gkvt_job), "gate", MAXPROC,
                          NULL, 0);
}

static int
teardown(void **state)
{
    return gkvt_job_teardown(state);
}

/* ---- SP over TCP by hand -------------------------------------------------- */

static void
put_be64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (56 - 8 * i));
}

static void
send_all(int fd, const void *p, size_t n)
{
    const unsigned char *b = p;

    while (n > 0) {
        ssize_t k = send(fd, b, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            fail_msg("send: %s", strerror(errno));
        b += k;
        n -= (size_t)k;
    }
}

/* n bytes within ms; 0, or -1 at the end of the stream or a timeout. */
static int
recv_all(int fd, void *p, size_t n, int ms)
{
    unsigned char *b = p;
    double t0 = tools__now_s();

    while (n > 0) {
        struct pollfd pf = {fd, POLLIN, 0};
        int left = ms - (int)((tools__now_s() - t0) * 1e3);
        ssize_t k;

        if (left <= 0 || poll(&pf, 1, left) <= 0)
            return -1;
        if ((k = recv(fd, b, n, 0)) <= 0)
            return -1;
        b += k;
        n -= (size_t)k;
    }
    return 0;
}

/* A TCP connection to 127.0.0.1:port from source address 'src' (NULL:
 * any), the SP header sent (a REQ peer); -1 when the connect failed. */
static int
tcp_open(int port, const char *src)
{
    static const unsigned char sp[8] = {0, 'S', 'P', 0, 0, 48, 0, 0};
    struct sockaddr_in a = {0};
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    assert_true(fd >= 0);
    if (src != NULL) {
        struct sockaddr_in s = {0};
        s.sin_family = AF_INET;
        assert_int_equal(inet_pton(AF_INET, src, &s.sin_addr), 1);
        assert_int_equal(bind(fd, (struct sockaddr *)&s, sizeof s), 0);
    }
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    send_all(fd, sp, sizeof sp);
    return fd;
}

/* Whether the server still holds connection fd: 1 when its SP header came
 * and then nothing within ms (not closed), 0 when it was closed. */
static int
tcp_held(int fd, int ms)
{
    unsigned char b[64];
    struct pollfd pf = {fd, POLLIN, 0};

    if (recv_all(fd, b, 8, ms) != 0)
        return 0;
    return poll(&pf, 1, ms) == 0;
}

/* Sends frame 'msg' (len bytes) with REQ request id 'rid'. */
static void
tcp_send(int fd, uint32_t rid, const void *msg, size_t len)
{
    unsigned char h[12];

    put_be64(h, 4 + len);
    rid |= 0x80000000u;
    h[8] = (unsigned char)(rid >> 24);
    h[9] = (unsigned char)(rid >> 16);
    h[10] = (unsigned char)(rid >> 8);
    h[11] = (unsigned char)rid;
    send_all(fd, h, sizeof h);
    send_all(fd, msg, len);
}

/* The reply to request 'rid' into r (its payload malloc'd in r->pl; an
 * error's message in r->msg); 0, or -1 when none came within ms. The
 * server's SP header is read first when 'first'. */
static int
tcp_recv(int fd, int first, uint32_t rid, struct gkvt_rep *r, int ms)
{
    unsigned char h[8], id[4];
    uint64_t n;

    if (first && recv_all(fd, h, 8, ms) != 0)
        return -1;
    if (recv_all(fd, h, 8, ms) != 0)
        return -1;
    n = 0;
    for (int i = 0; i < 8; i++)
        n = n << 8 | h[i];
    assert_true(n >= 4 + NET_HDR_LEN && n < (64u << 20));
    if (recv_all(fd, id, 4, ms) != 0)
        return -1;
    assert_int_equal(((uint32_t)id[0] << 24 | (uint32_t)id[1] << 16 |
                      (uint32_t)id[2] << 8 | id[3]), rid | 0x80000000u);
    free(r->pl);
    r->pl = malloc(n - 4);
    assert_non_null(r->pl);
    if (recv_all(fd, r->pl, n - 4, ms) != 0)
        return -1;
    assert_int_equal(net__hdr_get(r->pl, n - 4, &r->h), 0);
    r->plen = n - 4 - NET_HDR_LEN;
    r->msg[0] = '\0';
    if (r->h.status != 0) {
        net_rd rd;
        net__rd_init(&rd, r->pl + NET_HDR_LEN, r->plen);
        assert_int_equal(net__dec_err(&rd, r->msg, sizeof r->msg), 0);
    }
    return 0;
}

/* ---- the well-behaved client ----------------------------------------------- */

/* Seconds one pull of 8 rows of "feat" (width 4) takes client c; the rows
 * are checked against ref, the store's own. */
static double
probe_s(gkv_client *c, const float *ref)
{
    uint64_t ids[8] = {3, 14, 15, 92, 65, 35, 89, 79};
    float got[8 * 4];
    double t0 = tools__now_s(), d;

    NET_OK(gkv_client_pull(c, "feat", ids, 8, got, sizeof got));
    d = tools__now_s() - t0;
    for (int i = 0; i < 8; i++)
        assert_memory_equal(got + 4 * i, ref + 4 * ids[i], 4 * sizeof *got);
    return d;
}

static double
probe_worst(gkv_client *c, const float *ref, int n, double worst)
{
    for (int k = 0; k < n; k++) {
        double d = probe_s(c, ref);
        if (d > worst)
            worst = d;
    }
    return worst;
}

/* ---- 1. frames before a session cost the server nothing ------------------ */

/* 8 peers each send a 32 MiB PULL with a session that does not exist,
 * whole; 8 more declare 32 MiB and stall after 20 bytes of it; 4 declare
 * more than --max-msg. The server answered each whole one as before
 * (GKV_EPERM, NET_F_SESSION, "without a session") but never held it:
 * nanomsg read each message whole before the server saw it, +160 MiB of
 * peak RSS for 8 such peers. Now its peak RSS grows by less than 16 MiB,
 * the stalled ones are held (a few bytes each), the over-limit ones
 * dropped, and the client's pulls stay correct. */
static void
test_big_frames_before_a_session_cost_nothing(void **state)
{
    struct gkvt_job *j = *state;
    const char *extra[] = {"--keep-alive", "--max-msg", "67108864", NULL};
    enum { NFULL = 8, NSTALL = 8, NOVER = 4 };
    struct gkvt_proc *srv;
    struct gkvt_rep r = {0};
    gkv_client *probe;
    unsigned char *m = calloc(1, NET_HDR_LEN + BIG), h[12];
    float *ref;
    int full[NFULL], stall[NSTALL], over[NOVER];
    long rss0, hwm0, rss1, hwm1;
    double worst0, worst = 0;
    net_hdr q;

    assert_non_null(m);
    gkvt_make_f32(j->st[0], "feat", 4, 0, 100);
    ref = gkvt_read_all(j->st[0], "feat", 100, 4 * sizeof (float));
    gkvt_serve(j, 1, 1, extra, &srv);
    probe = gkvt_connect(j->cfg, "probe", 0, NULL);
    worst0 = probe_worst(probe, ref, 20, 0);
    rss0 = gkvt_status_kib(srv->pid, "VmRSS:");
    hwm0 = gkvt_status_kib(srv->pid, "VmHWM:");

    (void)gkvt_raw_msg(m, NET_PULL, 0x1234567, 7, NULL, 0);
    assert_int_equal(net__hdr_get(m, NET_HDR_LEN, &q), 0);
    q.len = BIG;
    net__hdr_put(m, &q);
    /* the stalled ones: the length, the request id and 16 header bytes */
    for (int i = 0; i < NSTALL; i++) {
        assert_true((stall[i] = tcp_open(j->base, NULL)) >= 0);
        put_be64(h, 4 + NET_HDR_LEN + BIG);
        memcpy(h + 8, "\x80\0\0\x07", 4);
        send_all(stall[i], h, sizeof h);
        send_all(stall[i], m, 16);
    }
    /* over the limit: dropped, as nanomsg drops them */
    for (int i = 0; i < NOVER; i++) {
        assert_true((over[i] = tcp_open(j->base, NULL)) >= 0);
        put_be64(h, 4 + NET_HDR_LEN + (128u << 20));
        memcpy(h + 8, "\x80\0\0\x07", 4);
        send_all(over[i], h, sizeof h);
        send_all(over[i], m, NET_HDR_LEN);
    }
    /* whole ones, one after another, the client pulling between */
    for (int i = 0; i < NFULL; i++) {
        assert_true((full[i] = tcp_open(j->base, NULL)) >= 0);
        tcp_send(full[i], 7, m, NET_HDR_LEN + BIG);
        worst = probe_worst(probe, ref, 5, worst);
        assert_int_equal(tcp_recv(full[i], 1, 7, &r, 10000), 0);
        assert_int_equal(r.h.status, GKV_EPERM);
        assert_true(r.h.flags & NET_F_SESSION);
        assert_non_null(strstr(r.msg, "without a session"));
        close(full[i]);
    }
    worst = probe_worst(probe, ref, 20, worst);
    for (int i = 0; i < NSTALL; i++)
        assert_true(tcp_held(stall[i], 200));
    for (int i = 0; i < NOVER; i++)
        assert_false(tcp_held(over[i], 2000));
    rss1 = gkvt_status_kib(srv->pid, "VmRSS:");
    hwm1 = gkvt_status_kib(srv->pid, "VmHWM:");
    print_message("%d peers x %u MiB whole, %d stalled mid-frame, %d over "
                  "--max-msg: server RSS %ld -> %ld KiB, peak +%ld KiB; probe "
                  "pull at worst %.2f ms (%.2f ms before)\n", NFULL, BIG >> 20,
                  NSTALL, NOVER, rss0, rss1, hwm1 - hwm0, worst * 1e3,
                  worst0 * 1e3);
    assert_true(hwm1 - hwm0 < 16 * 1024);
    assert_true(gkvt_file_has(srv->log, "before it authenticated, refused "
                              "unread"));
    assert_true(gkvt_file_has(srv->log, "over the message limit"));
    for (int i = 0; i < NSTALL; i++)
        close(stall[i]);
    for (int i = 0; i < NOVER; i++)
        close(over[i]);
    NET_OK(gkv_client_close(probe));
    assert_true(gkvt_proc_alive(srv));
    free(r.pl);
    free(ref);
    free(m);
}

/* ---- 2. connections that do not authenticate --------------------------- */

/* One address opens 20 connections and never hand-shakes: 8 are kept
 * (--max-unauth-per-peer 8), the rest closed at once; another address
 * finds the total (--max-unauth 12) with 4 left. The client connected
 * before goes on (its connections authenticated), and once the idle ones
 * are older than 5 s a new client takes their place. */
static void
test_unauthenticated_connections_capped(void **state)
{
    struct gkvt_job *j = *state;
    const char *extra[] = {"--keep-alive", "--max-unauth-per-peer", "8",
                           "--max-unauth", "12", NULL};
    enum { N1 = 20, N2 = 8 };
    struct gkvt_proc *srv;
    gkv_client *probe, *late;
    float *ref;
    int a[N1], b[N2], held1 = 0, held2 = 0;
    double worst = 0;

    gkvt_make_f32(j->st[0], "feat", 4, 0, 100);
    ref = gkvt_read_all(j->st[0], "feat", 100, 4 * sizeof (float));
    gkvt_serve(j, 1, 1, extra, &srv);
    probe = gkvt_connect(j->cfg, "probe", 0, NULL);
    worst = probe_worst(probe, ref, 5, worst);
    for (int i = 0; i < N1; i++)
        assert_true((a[i] = tcp_open(j->base, "127.0.0.1")) >= 0);
    for (int i = 0; i < N2; i++)
        assert_true((b[i] = tcp_open(j->base, "127.0.0.2")) >= 0);
    worst = probe_worst(probe, ref, 20, worst);
    for (int i = 0; i < N1; i++)
        held1 += tcp_held(a[i], 300);
    for (int i = 0; i < N2; i++)
        held2 += tcp_held(b[i], 300);
    print_message("20 idle connections from 127.0.0.1: %d kept; 8 from "
                  "127.0.0.2: %d kept; probe pull at worst %.2f ms\n", held1,
                  held2, worst * 1e3);
    assert_int_equal(held1, 8);
    assert_int_equal(held2, 4);
    assert_true(gkvt_file_has(srv->log, "connection from 127.0.0.1 closed at "
                              "once: 8 of its connections have not "
                              "authenticated yet"));
    assert_true(gkvt_file_has(srv->log, "(--max-unauth-per-peer)"));
    assert_true(gkvt_file_has(srv->log, "connection from 127.0.0.2 closed at "
                              "once: 12 connections have not authenticated "
                              "yet, the most the server takes (--max-unauth)"));
    /* the idle ones make room once older than 5 s */
    tools__sleep_ms(5300);
    late = gkvt_connect(j->cfg, "late", 0, NULL);
    (void)probe_s(late, ref);
    assert_true(gkvt_file_has(srv->log, "not authenticated after"));
    NET_OK(gkv_client_close(late));
    (void)probe_s(probe, ref);
    NET_OK(gkv_client_close(probe));
    for (int i = 0; i < N1; i++)
        close(a[i]);
    for (int i = 0; i < N2; i++)
        close(b[i]);
    assert_true(gkvt_proc_alive(srv));
    free(ref);
}

/* ---- 3. sessions per address -------------------------------------------- */

/* One address could take every session the server has. With
 * --max-peer-sessions 3 the fourth client from 127.0.0.1 is refused,
 * naming the option and the address; once one leaves, it joins. The join
 * lines say where each session comes from. */
static void
test_sessions_per_address_capped(void **state)
{
    struct gkvt_job *j = *state;
    const char *extra[] = {"--keep-alive", "--max-peer-sessions", "3", NULL};
    struct gkvt_proc *srv;
    gkv_client *c[3], *extra_c = NULL;
    gkv_client_opts o = {0};
    float *ref;

    gkvt_make_f32(j->st[0], "feat", 4, 0, 100);
    ref = gkvt_read_all(j->st[0], "feat", 100, 4 * sizeof (float));
    gkvt_serve(j, 1, 1, extra, &srv);
    for (int i = 0; i < 3; i++)
        c[i] = gkvt_connect(j->cfg, "job", (uint32_t)i, NULL);
    o.timeout_ms = 5000;
    NET_FAILS(gkv_client_connect(&extra_c, j->cfg, NULL, "other", 0, &o),
              GKV_EBUSY, "handshake of group 'other' rank 0: 127.0.0.1 holds "
              "3 sessions, the most one peer address may "
              "(--max-peer-sessions)");
    assert_null(extra_c);
    for (int i = 0; i < 3; i++)
        (void)probe_s(c[i], ref);
    NET_OK(gkv_client_close(c[2]));
    extra_c = gkvt_connect(j->cfg, "other", 0, NULL);
    (void)probe_s(extra_c, ref);
    assert_true(gkvt_file_has(srv->log, "join: group 'job' rank 0 from "
                              "127.0.0.1 ("));
    assert_true(gkvt_file_has(srv->log, "leave: group 'job' rank 2 from "
                              "127.0.0.1 ("));
    assert_true(gkvt_file_has(srv->log, "from 127.0.0.1 refused: the address "
                              "holds 3 sessions (--max-peer-sessions)"));
    NET_OK(gkv_client_close(extra_c));
    for (int i = 0; i < 2; i++)
        NET_OK(gkv_client_close(c[i]));
    assert_true(gkvt_proc_alive(srv));
    free(ref);
}

/* ---- 4. a handshake copied onto another connection ---------------------- */

/* A HELLO's nonce over connection fd (the server's SP header read first
 * when 'first'). */
static void
tcp_hello(int fd, int first, unsigned char *nonce)
{
    unsigned char b[NET_HDR_LEN];
    struct gkvt_rep r = {0};
    net_hello_rep hr;
    net_rd rd;

    (void)gkvt_raw_msg(b, NET_HELLO, 0, 1, NULL, 0);
    tcp_send(fd, 1, b, sizeof b);
    assert_int_equal(tcp_recv(fd, first, 1, &r, 10000), 0);
    assert_int_equal(r.h.status, 0);
    net__rd_init(&rd, r.pl + NET_HDR_LEN, r.plen);
    assert_int_equal(net__dec_hello_rep(&rd, &hr), 0);
    memcpy(nonce, hr.nonce, NET_NONCE_LEN);
    free(r.pl);
}

/* A handshake of group "job" rank 0 with a token and nonce
 * 'nonce', as bytes (a message of *len bytes into msg). */
static void
hs_msg(const char *token, const unsigned char *nonce, unsigned char *msg,
       size_t *len)
{
    unsigned char pl[512], key[NET_KEY_LEN];
    net_wr w = {pl, sizeof pl, 0};
    net_hs_req hs;

    memset(&hs, 0, sizeof hs);
    memcpy(hs.nonce, nonce, NET_NONCE_LEN);
    snprintf(hs.group, sizeof hs.group, "job");
    net__token_key(token, strlen(token), key);
    net__proof(key, hs.nonce, "job", 0, hs.mac);
    hs.flags = NET_HS_PROOF;
    net__enc_hs_req(&w, &hs);
    *len = gkvt_raw_msg(msg, NET_HANDSHAKE, 0, 2, pl, w.off);
}

/* A handshake with a token, as an eavesdropper saw it, sent again byte
 * for byte on a connection of its own. While both copies are there (the
 * server stopped by SIGSTOP while they arrive), the server cannot tell
 * which connection the client's is: the one it handles first is refused
 * ("came on 2 connections"; or, when the second had not been read yet,
 * accepted: it came first), the other by its spent nonce; at most one
 * session is granted. A copy sent after the first was accepted is refused
 * by its nonce, and its connection is not taken for authenticated: a
 * large request on it is still answered unread. */
static void
test_handshake_replayed_on_another_connection(void **state)
{
    struct gkvt_job *j = *state;
    char tok[4300];
    const char *extra[] = {"--keep-alive", "--token-file", tok, NULL};
    const char *token = "correct horse battery staple";
    unsigned char nonce[NET_NONCE_LEN], msg[600];
    unsigned char *big = calloc(1, NET_HDR_LEN + (1 << 20));
    struct gkvt_rep ra = {0}, rb = {0}, *rr[2] = {&ra, &rb};
    struct gkvt_proc *srv;
    int a, b, c, granted = 0, spent = 0, two = 0;
    net_hdr q;
    size_t len;

    assert_non_null(big);
    snprintf(tok, sizeof tok, "%s/token", j->dir);
    gkvt_write_text(tok, token, 0600);
    gkvt_make_f32(j->st[0], "feat", 4, 0, 100);
    gkvt_serve(j, 1, 1, extra, &srv);
    a = tcp_open(j->base, NULL);
    b = tcp_open(j->base, NULL);
    assert_true(a >= 0 && b >= 0);
    tcp_hello(a, 1, nonce);
    hs_msg(token, nonce, msg, &len);
    assert_int_equal(kill(srv->pid, SIGSTOP), 0);
    tcp_send(a, 2, msg, len);
    tcp_send(b, 2, msg, len);
    tools__sleep_ms(100);
    assert_int_equal(kill(srv->pid, SIGCONT), 0);
    assert_int_equal(tcp_recv(a, 0, 2, &ra, 10000), 0);
    assert_int_equal(tcp_recv(b, 1, 2, &rb, 10000), 0);
    for (int i = 0; i < 2; i++) {
        if (rr[i]->h.status == 0) {
            granted++;
            continue;
        }
        assert_int_equal(rr[i]->h.status, GKV_EPERM);
        if (strstr(rr[i]->msg, "nonce already used") != NULL)
            spent++;
        else if (strstr(rr[i]->msg, "its message came on 2 connections, not "
                        "exactly one") != NULL)
            two++;
        else
            fail_msg("copy %d refused with '%s'", i, rr[i]->msg);
    }
    print_message("two copies at once: %d refused as on 2 connections, %d "
                  "for the spent nonce, %d granted\n", two, spent, granted);
    assert_int_equal(spent, 1);
    assert_int_equal(two + granted, 1);
    if (two)
        assert_true(gkvt_file_has(srv->log, "handshake of group 'job' rank 0 "
                                  "refused: its bytes came on 2 "
                                  "connections"));
    /* afterwards: the client's own handshake is accepted; its copy on a
     * third connection is refused, and that connection is still held to
     * the limit of one that has not authenticated */
    tcp_hello(a, 0, nonce);
    hs_msg(token, nonce, msg, &len);
    tcp_send(a, 3, msg, len);
    assert_int_equal(tcp_recv(a, 0, 3, &ra, 10000), 0);
    assert_int_equal(ra.h.status, 0);
    assert_true((c = tcp_open(j->base, NULL)) >= 0);
    tcp_send(c, 3, msg, len);
    assert_int_equal(tcp_recv(c, 1, 3, &rb, 10000), 0);
    assert_int_equal(rb.h.status, GKV_EPERM);
    assert_non_null(strstr(rb.msg, "nonce already used"));
    (void)gkvt_raw_msg(big, NET_PULL, 0x99, 4, NULL, 0);
    assert_int_equal(net__hdr_get(big, NET_HDR_LEN, &q), 0);
    q.len = 1 << 20;
    net__hdr_put(big, &q);
    tcp_send(c, 4, big, NET_HDR_LEN + (1 << 20));
    assert_int_equal(tcp_recv(c, 0, 4, &rb, 10000), 0);
    assert_int_equal(rb.h.status, GKV_EPERM);
    assert_non_null(strstr(rb.msg, "without a session"));
    close(a);
    close(b);
    close(c);
    assert_true(gkvt_proc_alive(srv));
    free(ra.pl);
    free(rb.pl);
    free(big);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            test_big_frames_before_a_session_cost_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_unauthenticated_connections_capped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sessions_per_address_capped,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_handshake_replayed_on_another_connection, setup, teardown),
    };

    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests_name("net_gate", tests, NULL, NULL);
}
