/* net_client_faults_test.c - the client (net/client*.c) against servers that
 * die, stop, restart or lie: real gkv-server processes on loopback, and a
 * fake server (this program run again as "--fake ...": a nanomsg REP
 * socket speaking the wire format of net/wire.h) whose replies are wrong
 * on purpose. Every process a test starts is killed and reaped by PID in
 * the teardown, also after a failed assertion.
 *
 * Each test asserts what the client returns (error code, the message
 * naming the server), the rows byte for byte, and that the client is
 * usable afterwards:
 *   - a dead machine is named as the one that failed, also on later calls
 *     (the live machine's replies are not thrown away at the deadline);
 *   - gkv_client_close is not held by a heartbeat waiting on a silent
 *     server;
 *   - the heartbeat keeps the shortest lease of the job's servers;
 *   - a server whose identity announces a tiny message bound makes pushes
 *     fail cleanly (no division by zero);
 *   - a push that a server applied before dying unanswered, re-sent by
 *     nanomsg to its restarted successor, fails (GKV_EIO naming it) and is
 *     not sent a third time; one refused because the idle client's lease
 *     lapsed is re-sent and applied exactly once;
 *   - a call re-sent through a new session (lapsed lease, restarted
 *     server) that succeeds leaves gkv_net_errmsg() empty;
 *   - what held: short, mismatched and lying replies, range boundaries
 *     across machines, size arguments, a stopped and a restarted server,
 *     allocation failures, threads sharing one client.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <nanomsg/nn.h>
#include <nanomsg/reqrep.h>
#include "gkvt_net.h"
#include "net/wire.h"

#define MAXPROC 12

static char g_server_path[PATH_MAX + 16];

/* ---- processes and servers ------------------------------------------------ */

/* Waits until p logs "listening on"; NULL when its port was taken. */
static struct gkvt_proc *
wait_listening(struct gkvt_proc *p)
{
    return gkvt_server_listening(p) ? p : NULL;
}

/* Starts the server of machine m (one per machine) with extra arguments. */
static struct gkvt_proc *
server_try(struct gkvt_job *f, int m, const char *const *extra)
{
    char *argv[32], mach[16], logname[32];
    int n = 0;

    snprintf(mach, sizeof mach, "%d", m);
    snprintf(logname, sizeof logname, "server-m%d.log", m);
    argv[n++] = g_server_path;
    argv[n++] = "--store";
    argv[n++] = f->st[m];
    argv[n++] = "--ip-config";
    argv[n++] = f->cfg;
    argv[n++] = "--machine";
    argv[n++] = mach;
    argv[n++] = "--no-prefault";
    for (int i = 0; extra != NULL && extra[i] != NULL && n < 30; i++)
        argv[n++] = (char *)extra[i];
    argv[n] = NULL;
    return wait_listening(gkvt_job_spawn(f, argv, logname));
}

/* Machines 0 .. nmach-1, machine m with extra[m] (may be NULL). */
static void
serve(struct gkvt_job *f, int nmach, const char *const *const *extra,
      struct gkvt_proc **srv)
{
    for (int attempt = 0; attempt < 20; attempt++) {
        int clash = 0;

        f->nmach = nmach;
        f->base = gkvt_port_base(8 * nmach);
        gkvt_ipcfg_write(f->cfg, NULL, f->base, f->nmach);
        for (int m = 0; m < nmach && !clash; m++)
            if ((srv[m] = server_try(f, m, extra ? extra[m] : NULL)) == NULL)
                clash = 1;
        if (!clash)
            return;
        for (int i = 0; i < f->np; i++)
            gkvt_proc_kill(&f->p[i]);
    }
    fail_msg("could not find free ports in 20 tries");
}

/* A fake server on f->base (see fake_main for the arguments); NULL when
 * the port was taken. */
static struct gkvt_proc *
fake_spawn(struct gkvt_job *f, const char *max_msg, const char *pulls,
           const char *pushes, const char *session, const char *pushlog)
{
    char port[16];
    char *argv[] = {(char *)gkvt_self(), "--fake", port, (char *)max_msg,
                    (char *)pulls, (char *)pushes, (char *)session,
                    (char *)pushlog, NULL};

    snprintf(port, sizeof port, "%d", f->base);
    return wait_listening(gkvt_job_spawn(f, argv, "fake.log"));
}

/* A fake server (one machine) announcing max_msg, misbehaving on its
 * k-th PULL as pulls[k] says and on its k-th PUSH as pushes[k]
 * (comma-separated; "ok" or missing: a correct reply). With session
 * (NULL: none) it grants that session and refuses every other one; with
 * pushlog it appends a line there per push it applies. */
static struct gkvt_proc *
fake_start_sess(struct gkvt_job *f, const char *max_msg, const char *pulls,
                const char *pushes, const char *session, const char *pushlog)
{
    for (int attempt = 0; attempt < 20; attempt++) {
        struct gkvt_proc *p;

        f->nmach = 1;
        f->base = gkvt_port_base(8);
        gkvt_ipcfg_write(f->cfg, NULL, f->base, f->nmach);
        if ((p = fake_spawn(f, max_msg, pulls, pushes, session, pushlog)) != NULL)
            return p;
    }
    fail_msg("could not find a free port in 20 tries");
    return NULL;
}

static struct gkvt_proc *
fake_start(struct gkvt_job *f, const char *max_msg, const char *pulls,
           const char *pushes)
{
    return fake_start_sess(f, max_msg, pulls, pushes, NULL, NULL);
}

static gkv_client *
client(struct gkvt_job *f, int timeout_ms, unsigned flags, unsigned hb_ms)
{
    gkv_client *c = NULL;
    gkv_client_opts o = {0};

    o.timeout_ms = timeout_ms;
    o.flags = flags;
    o.heartbeat_ms = hb_ms;
    o.group_size = 1;
    NET_OK(gkv_client_connect(&c, f->cfg, NULL, "job", 0, &o));
    return c;
}

/* Rows of "t" (16 bytes each) as a reference store created with
 * make_tensor's spec over [0, hi) holds them: values are keyed by global
 * ID, so this is what the job's machines hold together. */
static void
ref_rows(struct gkvt_job *f, uint64_t hi, const uint64_t *ids, size_t n,
         void *out)
{
    char path[4300];
    gkv_store *s;

    snprintf(path, sizeof path, "%s/ref", f->dir);
    gkvt_make_f32(path, "t", 4, 0, hi);
    GKVT_OK(gkv_store_open(&s, path, GKV_RDONLY, NULL));
    GKVT_OK(gkv_tensor_pull(s, NULL, "t", ids, n, out, n * 16));
    gkv_store_close(s);
    gkvt_rmtree(strdup(path));
}

static int
setup(void **state)
{
    return gkvt_job_setup(state, sizeof (struct gkvt_job), "netfaults",
                          MAXPROC, NULL, 0);
}

/* Kills and reaps every process the test started; a sanitizer report in
 * any of their logs (SAN= builds) fails the test. */
static int
teardown(void **state)
{
    return gkvt_job_teardown(state);
}

static void
addr_of(struct gkvt_job *f, int m, char *buf, size_t cap)
{
    snprintf(buf, cap, "server 127.0.0.1:%d (machine %d, server 0)",
             f->base + 8 * m, m);
}

/* ---- a dead machine is the one named ------------------------------------- */

static void
test_dead_machine_named(void **state)
{
    struct gkvt_job *f = *state;
    struct gkvt_proc *srv[2];
    gkv_client *c;
    uint64_t ids[4] = {0, 499, 500, 999}, own0[2] = {1, 2};
    uint64_t pids[3] = {1, 2, 600};
    float got[16], want[16], rows[12], back[8];
    char m0[128], m1[128];
    double t0, took;

    gkvt_make_f32(f->st[0], "t", 4, 0, 500);
    gkvt_make_f32(f->st[1], "t", 4, 500, 1000);
    serve(f, 2, NULL, srv);
    addr_of(f, 0, m0, sizeof m0);
    addr_of(f, 1, m1, sizeof m1);
    /* 3 s: the calls that must succeed survive a stalled process (a
     * noisy host); a call that waited out two timeouts one after the
     * other (6 s) is still told from one that waited one (3 s) */
    c = client(f, 3000, GKV_CLIENT_NO_HEARTBEAT, 0);
    NET_OK(gkv_client_pull(c, "t", ids, 4, got, sizeof got));
    ref_rows(f, 1000, ids, 4, want);
    assert_memory_equal(got, want, sizeof got);
    gkvt_proc_kill(srv[1]);
    /* the first call after the kill, and every later one, names machine
     * 1; machine 0 answered in time each time */
    for (int k = 0; k < 2; k++) {
        t0 = tools__now_s();
        NET_FAILS(gkv_client_pull(c, "t", ids, 4, got, sizeof got),
                  GKV_ETIMEDOUT, m1);
        took = tools__now_s() - t0;
        if (took > 5.0)
            fail_msg("call %d took %.2f s with a 3 s timeout", k, took);
    }
    /* a push over both: machine 0's part is applied, the error names
     * machine 1 */
    for (int i = 0; i < 12; i++)
        rows[i] = (float)i + 0.25f;
    NET_FAILS(gkv_client_push(c, "t", pids, 3, rows, sizeof rows, NULL),
              GKV_ETIMEDOUT, m1);
    NET_OK(gkv_client_pull(c, "t", own0, 2, back, sizeof back));
    assert_memory_equal(back, rows, sizeof back);
    gkv_client_close(c);
}

/* ---- close is not held by the heartbeat -------------------------------- */

static void
test_close_not_held_by_heartbeat(void **state)
{
    struct gkvt_job *f = *state;
    struct gkvt_proc *srv[1];
    gkv_client *c;
    uint64_t ids[2] = {3, 4};
    float got[8], want[8];
    char m0[128];
    double t0, took;

    gkvt_make_f32(f->st[0], "t", 4, 0, 100);
    serve(f, 1, NULL, srv);
    addr_of(f, 0, m0, sizeof m0);
    /* a 3 s timeout (connect and pull survive a stalled process on a
     * noisy host), heartbeats every 4 s */
    c = client(f, 3000, 0, 4000);
    NET_OK(gkv_client_pull(c, "t", ids, 2, got, sizeof got));
    ref_rows(f, 100, ids, 2, want);
    assert_memory_equal(got, want, sizeof got);
    /* the server dies; the heartbeat's next round (at 4 s) waits on it
     * until 8 s */
    gkvt_proc_kill(srv[0]);
    tools__sleep_ms(4200);
    /* close's LEAVE waits the 3 s timeout; held by the heartbeat, it
     * would first wait out the rest of that round (some 3.7 s more) */
    t0 = tools__now_s();
    NET_FAILS(gkv_client_close(c), GKV_ETIMEDOUT, m0);
    took = tools__now_s() - t0;
    if (took > 5.0)
        fail_msg("close took %.2f s with a 3 s timeout", took);
}

/* ---- the heartbeat keeps every server's lease ---------------------------- */

static void
test_heartbeat_shortest_lease(void **state)
{
    struct gkvt_job *f = *state;
    struct gkvt_proc *srv[2];
    /* 3 s: heartbeats every 1 s, so a process stalled for up to some 2 s
     * (a noisy host) does not lose the lease */
    const char *short_lease[] = {"--heartbeat-timeout", "3000", NULL};
    const char *const *extra[2] = {NULL, short_lease};
    gkv_client *c;
    gkv_server_stats ss;
    uint64_t ids[2] = {10, 510};
    float got[8], want[8];

    gkvt_make_f32(f->st[0], "t", 4, 0, 500);
    gkvt_make_f32(f->st[1], "t", 4, 500, 1000);
    serve(f, 2, extra, srv);
    c = client(f, 3000, 0, 0);
    /* idle for more than twice machine 1's lease: the heartbeat must keep
     * it (else that server, not keeping alive, stops with its last
     * session gone) */
    tools__sleep_ms(6200);
    if (gkvt_file_has(srv[1]->log, "lease expired"))
        fail_msg("machine 1 dropped the idle client:\n%s",
                 gkvt_slurp(srv[1]->log));
    assert_true(gkvt_proc_alive(srv[1]));
    NET_OK(gkv_client_pull(c, "t", ids, 2, got, sizeof got));
    ref_rows(f, 1000, ids, 2, want);
    assert_memory_equal(got, want, sizeof got);
    NET_OK(gkv_client_stats(c, 1, &ss));
    assert_int_equal(ss.joined, 1);          /* never hand-shaken again */
    NET_OK(gkv_client_close(c));
}

/* ---- replies that lie --------------------------------------------------- */

/* The fake server's rows: row of ID i holds i * 10 + j. */
static void
fake_row(uint64_t id, float *row)
{
    for (int j = 0; j < 4; j++)
        row[j] = (float)id * 10 + (float)j;
}

static void
test_hostile_replies(void **state)
{
    struct gkvt_job *f = *state;
    static const struct { const char *beh; gkv_err rc; const char *text; } bad[] = {
        {"badreq",   GKV_EPROTO,    "does not match the request"},
        {"short",    GKV_EPROTO,    "malformed pull reply"},
        {"count",    GKV_EPROTO,    "holds 2 rows of 16 bytes; asked for 3"},
        /* rows of another size: the tensor may have been replaced, so a
         * shape error, and the next call fetches the schema again */
        {"rowbytes", GKV_ESHAPE,    "has 8-byte rows on this server, 16-byte"},
        {"notreply", GKV_EPROTO,    "does not match the request"},
        {"type",     GKV_EPROTO,    "does not match the request"},
        {"garbage",  GKV_EPROTO,    "bad reply to pull"},
        {"sum",      GKV_EPROTO,    "bad reply to pull"},
        {"status",   GKV_EPROTO,    "reply status 7"},
        {"hang",     GKV_ETIMEDOUT, "no reply to pull within 3000 ms"},
    };
    char pulls[256] = "", m0[128], text[256];
    gkv_client *c;
    uint64_t ids[3] = {99, 0, 42}, pid[2] = {5, 6};
    float got[12], want[12], prow[8] = {0};

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        strcat(pulls, bad[i].beh);
        strcat(pulls, ",ok,");
    }
    fake_start(f, "1073741824", pulls, "count,ok");
    addr_of(f, 0, m0, sizeof m0);
    /* 3 s: the calls that must succeed survive a stalled process (a noisy
     * host) */
    c = client(f, 3000, GKV_CLIENT_NO_HEARTBEAT, 0);
    for (int i = 0; i < 3; i++)
        fake_row(ids[i], want + 4 * i);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        double t0 = tools__now_s();

        memset(got, 0, sizeof got);
        snprintf(text, sizeof text, "%s: ", m0);
        NET_FAILS(gkv_client_pull(c, "t", ids, 3, got, sizeof got), bad[i].rc,
                  text);
        if (strstr(gkv_net_errmsg(), bad[i].text) == NULL)
            fail_msg("%s: '%s' lacks '%s'", bad[i].beh, gkv_net_errmsg(),
                     bad[i].text);
        assert_true(tools__now_s() - t0 < 5.0);
        /* the next call gets correct rows, byte for byte */
        NET_OK(gkv_client_pull(c, "t", ids, 3, got, sizeof got));
        assert_memory_equal(got, want, sizeof got);
    }
    /* a push reply that claims more rows than were sent */
    NET_FAILS(gkv_client_push(c, "t", pid, 2, prow, sizeof prow, NULL),
              GKV_EPROTO, "push reply says 3 rows applied, 2 were sent");
    assert_non_null(strstr(gkv_net_errmsg(), m0));
    NET_OK(gkv_client_push(c, "t", pid, 2, prow, sizeof prow, NULL));
    NET_OK(gkv_client_close(c));
}

static void
test_hostile_tiny_max_msg(void **state)
{
    struct gkvt_job *f = *state;
    gkv_client *c;
    uint64_t id = 7;
    float row[4] = {1, 2, 3, 4};

    /* a server announcing that it accepts 1-byte messages */
    fake_start(f, "1", "", "");
    c = client(f, 3000, GKV_CLIENT_NO_HEARTBEAT, 0);
    NET_FAILS(gkv_client_push(c, "t", &id, 1, row, sizeof row, NULL),
              GKV_EINVAL, "more than a message may carry");
    NET_FAILS(gkv_client_pull(c, "t", &id, 1, row, sizeof row),
              GKV_EINVAL, "more than a message may carry");
    NET_OK(gkv_client_close(c));
}

/* ---- routing at the boundaries, sizes ------------------------------------ */

static void
test_boundaries_and_sizes(void **state)
{
    struct gkvt_job *f = *state;
    struct gkvt_proc *srv[2];
    gkv_client *c;
    uint64_t ids[9] = {500, 499, 0, 999, 500, 0, 998, 1, 501};
    uint64_t bad[3] = {0, 1000, 5}, pids[5] = {999, 0, 499, 500, 500};
    float got[36], want[36], rows[20], back[20], before[36];
    size_t huge = SIZE_MAX / 16 + 1;

    gkvt_make_f32(f->st[0], "t", 4, 0, 500);
    gkvt_make_f32(f->st[1], "t", 4, 500, 1000);
    serve(f, 2, NULL, srv);
    c = client(f, 3000, 0, 0);
    /* unsorted, duplicated, at both ends of both slices */
    NET_OK(gkv_client_pull(c, "t", ids, 9, got, sizeof got));
    ref_rows(f, 1000, ids, 9, want);
    assert_memory_equal(got, want, sizeof got);
    /* one past the end, anywhere in the request */
    NET_FAILS(gkv_client_pull(c, "t", bad, 3, got, 48), GKV_ERANGE,
              "ids[1] = 1000");
    NET_OK(gkv_client_pull(c, "t", NULL, 0, NULL, 0));
    NET_FAILS(gkv_client_pull(c, "t", ids, 9, got, sizeof got - 1), GKV_ESHAPE,
              "into 143 bytes");
    NET_FAILS(gkv_client_pull(c, "t", ids, huge, got, 16), GKV_ESHAPE, "pull of");
    NET_FAILS(gkv_client_push(c, "t", ids, huge, got, 16, NULL), GKV_ESHAPE,
              "push of");
    NET_FAILS(gkv_client_push(c, "t", ids, 9, got, sizeof got + 16, NULL),
              GKV_ESHAPE, "from 160 bytes");
    /* an ID no machine holds: nothing is applied anywhere */
    NET_OK(gkv_client_pull(c, "t", ids, 9, before, sizeof before));
    NET_FAILS(gkv_client_push(c, "t", bad, 3, got, 48, NULL), GKV_ERANGE,
              "ids[1] = 1000");
    NET_OK(gkv_client_pull(c, "t", ids, 9, got, sizeof got));
    assert_memory_equal(got, before, sizeof got);
    /* a push at the boundaries with a duplicate (the last one wins) */
    for (int i = 0; i < 20; i++)
        rows[i] = (float)i * 1.5f;
    NET_OK(gkv_client_push(c, "t", pids, 5, rows, sizeof rows, NULL));
    NET_OK(gkv_client_pull(c, "t", pids, 5, back, sizeof back));
    assert_memory_equal(back, rows, 12 * sizeof(float));        /* 999, 0, 499 */
    assert_memory_equal(back + 12, rows + 16, 4 * sizeof(float)); /* 500 */
    assert_memory_equal(back + 16, rows + 16, 4 * sizeof(float));
    NET_OK(gkv_client_close(c));
}

/* ---- a stopped server, a restarted one ----------------------------------- */

static void
test_stopped_server(void **state)
{
    struct gkvt_job *f = *state;
    struct gkvt_proc *srv[1];
    gkv_client *c;
    uint64_t ids[3] = {7, 8, 7};
    float got[12], want[12], rows[12];
    char m0[128];
    double t0, took;

    gkvt_make_f32(f->st[0], "t", 4, 0, 100);
    serve(f, 1, NULL, srv);
    addr_of(f, 0, m0, sizeof m0);
    /* 3 s: the calls that must succeed survive a stalled process (a noisy
     * host) */
    c = client(f, 3000, 0, 0);
    ref_rows(f, 100, ids, 3, want);
    NET_OK(gkv_client_pull(c, "t", ids, 3, got, sizeof got));
    assert_memory_equal(got, want, sizeof got);
    gkvt_stop_proc(srv[0]->pid);
    t0 = tools__now_s();
    NET_FAILS(gkv_client_pull(c, "t", ids, 3, got, sizeof got), GKV_ETIMEDOUT, m0);
    took = tools__now_s() - t0;
    /* it waited out the timeout, and not much longer */
    if (took < 2.95 || took >= 5.0)
        fail_msg("the pull from a stopped server failed after %.2f s with a "
                 "3 s timeout", took);
    kill(srv[0]->pid, SIGCONT);
    memset(got, 0, sizeof got);
    NET_OK(gkv_client_pull(c, "t", ids, 3, got, sizeof got));
    assert_memory_equal(got, want, sizeof got);
    for (int i = 0; i < 12; i++)
        rows[i] = (float)-i;
    NET_OK(gkv_client_push(c, "t", ids, 2, rows, 32, NULL));
    NET_OK(gkv_client_pull(c, "t", ids, 3, got, sizeof got));
    assert_memory_equal(got, rows, 32);
    assert_memory_equal(got + 8, rows, 16);
    NET_OK(gkv_client_close(c));
}

struct bg_pull {
    gkv_client *c;
    uint64_t ids[3];
    float got[12];
    gkv_err rc;
    char msg[1300];
};

static void *
bg_pull(void *arg)
{
    struct bg_pull *b = arg;

    b->rc = gkv_client_pull(b->c, "t", b->ids, 3, b->got, sizeof b->got);
    snprintf(b->msg, sizeof b->msg, "%s", gkv_net_errmsg());
    return NULL;
}

static void
test_restart_mid_call(void **state)
{
    struct gkvt_job *f = *state;
    struct gkvt_proc *srv[1];
    const char *extra[] = {"--keep-alive", NULL};
    struct bg_pull b = {0};
    float want[12];
    pthread_t th;
    double t0;

    gkvt_make_f32(f->st[0], "t", 4, 0, 100);
    serve(f, 1, (const char *const *const[]){extra}, srv);
    /* 8 s: the restart (a server started, on a loaded host) fits well in
     * one timeout */
    b.c = client(f, 8000, GKV_CLIENT_NO_HEARTBEAT, 0);
    b.ids[0] = 9;
    b.ids[1] = 0;
    b.ids[2] = 99;
    ref_rows(f, 100, b.ids, 3, want);
    /* the pull reaches a stopped server, which is then killed and started
     * again on the same port: the request goes to the new one, which does
     * not know the session; the client hand-shakes and asks again */
    gkvt_stop_proc(srv[0]->pid);
    t0 = tools__now_s();
    assert_int_equal(pthread_create(&th, NULL, bg_pull, &b), 0);
    tools__sleep_ms(300);
    gkvt_proc_kill(srv[0]);
    srv[0] = server_try(f, 0, extra);
    pthread_join(th, NULL);
    if (srv[0] == NULL)
        fail_msg("port %d was taken between the two servers", f->base);
    if (b.rc != GKV_OK)
        fail_msg("pull across a restart: %s: %s", gkv_err_name(b.rc), b.msg);
    assert_memory_equal(b.got, want, sizeof want);
    /* within one timeout (and a little), the restart included */
    assert_true(tools__now_s() - t0 < 8.5);
    assert_true(gkvt_file_has(srv[0]->log, "unknown session"));
    NET_OK(gkv_client_close(b.c));
}

/* ---- a push across a restart is applied at most once ------------------------- */

struct bg_push {
    gkv_client *c;
    uint64_t id;
    float row[4];
    gkv_err rc;
    char msg[1300];
};

static void *
bg_push(void *arg)
{
    struct bg_push *b = arg;
    gkv_push_args pa = {0};

    pa.handler = "add";
    b->rc = gkv_client_push(b->c, "t", &b->id, 1, b->row, sizeof b->row, &pa);
    snprintf(b->msg, sizeof b->msg, "%s", gkv_net_errmsg());
    return NULL;
}

static int
lines_of(const char *path)
{
    char *text = gkvt_slurp(path);
    int n = 0;

    for (const char *q = text; *q != '\0'; q++)
        n += *q == '\n';
    free(text);
    return n;
}

/* Waits (15 s at most) until the server's log holds more "lease expired"
 * lines than 'before': a session's lease lapsed after that count was
 * taken (not one lost earlier, as to a process stalled on a noisy host). */
static void
wait_lease_expired(struct gkvt_proc *srv, int before)
{
    double end = tools__now_s() + 15;

    while (gkvt_file_count(srv->log, "lease expired") <= before) {
        if (tools__now_s() > end)
            fail_msg("the idle client's lease did not expire:\n%s",
                     gkvt_slurp(srv->log));
        tools__sleep_ms(20);
    }
}

/* The server applies a push and dies before it answers; nanomsg's REQ
 * socket sends the request again by itself as soon as it has reconnected
 * (to the restarted server), which answers "unknown session". That push
 * may have been applied: the client must fail it, naming the server, and
 * not send it a third time; the next call works. */
static void
test_push_not_resent_after_restart(void **state)
{
    struct gkvt_job *f = *state;
    struct bg_push b = {0};
    struct gkvt_proc *fk1, *fk2;
    char m0[128], log[4300];
    float row[4] = {1, 1, 1, 1}, got[4], want[4];
    uint64_t id = 6;
    pthread_t th;
    double t0;

    snprintf(log, sizeof log, "%s/pushes", f->dir);
    fk1 = fake_start_sess(f, "1073741824", "", "die", "0x4242", log);
    addr_of(f, 0, m0, sizeof m0);
    /* 8 s: the restart (a fake server started, on a loaded host) fits
     * well in one timeout */
    b.c = client(f, 8000, GKV_CLIENT_NO_HEARTBEAT, 0);
    b.id = 5;
    memcpy(b.row, row, sizeof row);
    t0 = tools__now_s();
    assert_int_equal(pthread_create(&th, NULL, bg_push, &b), 0);
    if (!gkvt_proc_wait(fk1, 3000)) {
        pthread_join(th, NULL);              /* b lives in this frame */
        fail_msg("the fake server did not die on the push:\n%s",
                 gkvt_slurp(fk1->log));
    }
    /* the restarted server: same port, another session */
    fk2 = fake_spawn(f, "1073741824", "", "", "0x4343", log);
    pthread_join(th, NULL);                  /* b lives in this frame */
    if (fk2 == NULL)
        fail_msg("port %d was taken between the two fake servers", f->base);
    if (b.rc != GKV_EIO)
        fail_msg("push across a restart: %s (%s), expected GKV_EIO; pushes "
                 "applied:\n%s", gkv_err_name(b.rc), b.msg, gkvt_slurp(log));
    if (strstr(b.msg, m0) == NULL ||
        strstr(b.msg, "may or may not have been applied") == NULL)
        fail_msg("push across a restart: message '%s'", b.msg);
    /* answered by the restarted server, not waited out (8 s) */
    assert_true(tools__now_s() - t0 < 7.5);
    assert_int_equal(lines_of(log), 1);          /* applied once, by fk1 */
    /* the client hand-shakes with the new server on the next call */
    NET_OK(gkv_client_push(b.c, "t", &id, 1, row, sizeof row, NULL));
    assert_int_equal(lines_of(log), 2);
    assert_true(gkvt_file_has(log, "session 0x4343"));
    NET_OK(gkv_client_pull(b.c, "t", &id, 1, got, sizeof got));
    fake_row(id, want);
    assert_memory_equal(got, want, sizeof got);
    NET_OK(gkv_client_close(b.c));
    assert_true(gkvt_proc_alive(fk2));
}

/* A push answered "unknown session" over the connection it was sent on
 * (the client's lease lapsed; no restart, no re-send by nanomsg) was not
 * executed: the client hand-shakes, sends it again, and it is applied
 * exactly once. */
static void
test_push_resent_after_lease_expired(void **state)
{
    struct gkvt_job *f = *state;
    struct gkvt_proc *srv[1];
    /* a lease of 2 s: one that lapses while the test waits, not between
     * two calls of a process stalled on a noisy host */
    const char *extra[] = {"--keep-alive", "--heartbeat-timeout", "2000", NULL};
    gkv_push_args pa = {0};
    gkv_tensor_spec sp;
    gkv_client *c;
    gkv_server_stats ss;
    uint64_t id = 7;
    float got[4], one[4] = {1, 1, 1, 1};
    int expired;

    gkvt_make_f32(f->st[0], "t", 4, 0, 100);
    serve(f, 1, (const char *const *const[]){extra}, srv);
    c = client(f, 3000, GKV_CLIENT_NO_HEARTBEAT, 0);
    memset(&sp, 0, sizeof sp);                   /* zeros */
    sp.dtype = GKV_F32;
    sp.ndim = 1;
    sp.shape[0] = 4;
    sp.lo = 0;
    sp.hi = 100;
    NET_OK(gkv_client_create(c, "acc", &sp, -1));
    pa.handler = "add";
    /* counted before the push: a lease lapsed after it (the one the push
     * leaves, or, stalled, the one the push found) */
    expired = gkvt_file_count(srv[0]->log, "lease expired");
    NET_OK(gkv_client_push(c, "acc", &id, 1, one, sizeof one, &pa));
    wait_lease_expired(srv[0], expired);
    NET_OK(gkv_client_push(c, "acc", &id, 1, one, sizeof one, &pa));
    if (!gkvt_file_has(srv[0]->log, "push request with unknown session"))
        fail_msg("the push was not refused for its session:\n%s",
                 gkvt_slurp(srv[0]->log));
    NET_OK(gkv_client_pull(c, "acc", &id, 1, got, sizeof got));
    for (int j = 0; j < 4; j++)
        if (got[j] != 2)
            fail_msg("element %d is %g after two adds of 1 to 0", j, got[j]);
    NET_OK(gkv_client_stats(c, 0, &ss));
    assert_int_equal(ss.joined, 2);              /* one hand-shake again */
    assert_int_equal(ss.pushes, 2);              /* each applied once */
    NET_OK(gkv_client_close(c));
}

/* A call refused "unknown session" (lapsed lease, restarted server) and
 * sent again through a new session returns GKV_OK; gkv_net_errmsg() is ""
 * after a success, but it still held the refusal. */
static void
test_resent_call_leaves_no_message(void **state)
{
    struct gkvt_job *f = *state;
    struct gkvt_proc *srv[1];
    /* a lease of 2 s: one that lapses while the test waits, not between
     * two calls of a process stalled on a noisy host */
    const char *extra[] = {"--keep-alive", "--heartbeat-timeout", "2000", NULL};
    gkv_client *c;
    uint64_t ids[3] = {4, 0, 99};
    float got[12], want[12];
    int expired;

    gkvt_make_f32(f->st[0], "t", 4, 0, 100);
    serve(f, 1, (const char *const *const[]){extra}, srv);
    c = client(f, 3000, GKV_CLIENT_NO_HEARTBEAT, 0);
    ref_rows(f, 100, ids, 3, want);
    /* counted before the pull: a lease lapsed after it (the one the pull
     * leaves, or, stalled, the one the pull found) */
    expired = gkvt_file_count(srv[0]->log, "lease expired");
    NET_OK(gkv_client_pull(c, "t", ids, 3, got, sizeof got));
    assert_string_equal(gkv_net_errmsg(), "");
    wait_lease_expired(srv[0], expired);
    memset(got, 0, sizeof got);
    NET_OK(gkv_client_pull(c, "t", ids, 3, got, sizeof got));
    assert_true(gkvt_file_has(srv[0]->log, "pull request with unknown session"));
    assert_memory_equal(got, want, sizeof got);
    assert_string_equal(gkv_net_errmsg(), "");

    gkvt_proc_kill(srv[0]);
    if ((srv[0] = server_try(f, 0, extra)) == NULL)
        fail_msg("port %d was taken between the two servers", f->base);
    memset(got, 0, sizeof got);
    NET_OK(gkv_client_pull(c, "t", ids, 3, got, sizeof got));
    assert_true(gkvt_file_has(srv[0]->log, "unknown session"));
    assert_memory_equal(got, want, sizeof got);
    assert_string_equal(gkv_net_errmsg(), "");
    NET_OK(gkv_client_close(c));
}

/* ---- allocation failures ---------------------------------------------------- */

static void
test_alloc_failures(void **state)
{
    struct gkvt_job *f = *state;
    struct gkvt_proc *srv[2];
    gkv_client *c;
    uint64_t ids[6] = {900, 3, 500, 3, 499, 12};
    float got[24], want[24], rows[24];
    long base;
    int n;
    gkv_err rc;

    gkvt_make_f32(f->st[0], "t", 4, 0, 500);
    gkvt_make_f32(f->st[1], "t", 4, 500, 1000);
    serve(f, 2, NULL, srv);
    ref_rows(f, 1000, ids, 6, want);
    base = gkvt_alloc_live();
    /* connect: every failure leaves nothing allocated */
    for (n = 0;; n++) {
        gkv_client_opts o = {0};
        o.timeout_ms = 3000;
        o.flags = GKV_CLIENT_NO_HEARTBEAT;
        c = NULL;
        gkvt_alloc_fail_at(n);
        rc = gkv_client_connect(&c, f->cfg, NULL, "job", 0, &o);
        gkvt_alloc_fail_at(-1);
        if (rc == GKV_OK)
            break;
        assert_null(c);
        if (rc != GKV_ENOMEM && strstr(gkv_net_errmsg(), "out of memory") == NULL)
            fail_msg("connect, allocation %d failing: %s: %s", n,
                     gkv_err_name(rc), gkv_net_errmsg());
        assert_int_equal(gkvt_alloc_live(), base);
    }
    /* pull and push across both machines, with a warm route */
    NET_OK(gkv_client_pull(c, "t", ids, 6, got, sizeof got));
    base = gkvt_alloc_live();
    for (n = 0;; n++) {
        memset(got, 0, sizeof got);
        gkvt_alloc_fail_at(n);
        rc = gkv_client_pull(c, "t", ids, 6, got, sizeof got);
        gkvt_alloc_fail_at(-1);
        assert_int_equal(gkvt_alloc_live(), base);
        if (rc == GKV_OK)
            break;
        assert_int_equal(rc, GKV_ENOMEM);
    }
    assert_memory_equal(got, want, sizeof got);
    for (int i = 0; i < 24; i++)
        rows[i] = (float)i;
    for (n = 0;; n++) {
        gkvt_alloc_fail_at(n);
        rc = gkv_client_push(c, "t", ids, 6, rows, sizeof rows, NULL);
        gkvt_alloc_fail_at(-1);
        assert_int_equal(gkvt_alloc_live(), base);
        if (rc == GKV_OK)
            break;
        assert_int_equal(rc, GKV_ENOMEM);
    }
    NET_OK(gkv_client_pull(c, "t", ids, 6, got, sizeof got));
    /* ids 3 repeats: its last row (index 3) wins */
    assert_memory_equal(got, rows, 4 * sizeof(float));
    assert_memory_equal(got + 4, rows + 12, 4 * sizeof(float));
    assert_memory_equal(got + 8, rows + 8, 16 * sizeof(float));
    NET_OK(gkv_client_close(c));
}

/* ---- threads sharing one client --------------------------------------------- */

#define NTHR  4
#define NITER 60

struct thr {
    gkv_client *c;
    int t;
    const float *ref;          /* rows 0..999 as created */
    int fail;
    char msg[1400];
};

static void *
thr_main(void *arg)
{
    struct thr *a = arg;
    uint64_t ids[32];
    float got[32 * 4], one[32 * 4];
    gkv_push_args pa = {0};

    pa.handler = "add";
    for (int i = 0; i < 32 * 4; i++)
        one[i] = 1;
    for (int k = 0; k < NITER && !a->fail; k++) {
        gkv_err rc;
        /* read-only rows 200..999 (spread over both machines), checked */
        for (int i = 0; i < 32; i++)
            ids[i] = 200 + (uint64_t)((a->t * 131 + k * 17 + i * 53) % 800);
        if ((rc = gkv_client_pull(a->c, "t", ids, 32, got, sizeof got)) != GKV_OK) {
            snprintf(a->msg, sizeof a->msg, "pull: %s: %s", gkv_err_name(rc),
                     gkv_net_errmsg());
            a->fail = 1;
            break;
        }
        for (int i = 0; i < 32; i++)
            if (memcmp(got + 4 * i, a->ref + 4 * ids[i], 16) != 0) {
                snprintf(a->msg, sizeof a->msg, "thread %d: row %llu differs",
                         a->t, (unsigned long long)ids[i]);
                a->fail = 1;
            }
        /* add 1 to rows 0..31 of "acc" (machine 0) and 500..531 (machine 1) */
        for (int i = 0; i < 32; i++)
            ids[i] = (i % 2 ? 500 : 0) + (uint64_t)(i / 2) * 2 + (uint64_t)(i % 2);
        if ((rc = gkv_client_push(a->c, "acc", ids, 32, one, sizeof one, &pa)) != GKV_OK) {
            snprintf(a->msg, sizeof a->msg, "push: %s: %s", gkv_err_name(rc),
                     gkv_net_errmsg());
            a->fail = 1;
        }
    }
    return NULL;
}

static void
test_threads_share_client(void **state)
{
    struct gkvt_job *f = *state;
    struct gkvt_proc *srv[2];
    struct thr a[NTHR];
    pthread_t th[NTHR];
    gkv_client *c;
    gkv_tensor_spec sp;
    uint64_t all[1000], ids[32];
    float *ref = malloc(1000 * 16), got[32 * 4];

    gkvt_make_f32(f->st[0], "t", 4, 0, 500);
    gkvt_make_f32(f->st[1], "t", 4, 500, 1000);
    serve(f, 2, NULL, srv);
    for (int i = 0; i < 1000; i++)
        all[i] = (uint64_t)i;
    ref_rows(f, 1000, all, 1000, ref);
    c = client(f, 5000, 0, 20);          /* heartbeats between the calls */
    memset(&sp, 0, sizeof sp);
    sp.dtype = GKV_F32;
    sp.ndim = 1;
    sp.shape[0] = 4;
    sp.lo = 0;
    sp.hi = 1000;
    NET_OK(gkv_client_create(c, "acc", &sp, -1));
    for (int t = 0; t < NTHR; t++) {
        memset(&a[t], 0, sizeof a[t]);
        a[t].c = c;
        a[t].t = t;
        a[t].ref = ref;
        assert_int_equal(pthread_create(&th[t], NULL, thr_main, &a[t]), 0);
    }
    for (int t = 0; t < NTHR; t++)
        pthread_join(th[t], NULL);
    for (int t = 0; t < NTHR; t++)
        if (a[t].fail)
            fail_msg("thread %d: %s", t, a[t].msg);
    for (int i = 0; i < 32; i++)
        ids[i] = (i % 2 ? 500 : 0) + (uint64_t)(i / 2) * 2 + (uint64_t)(i % 2);
    NET_OK(gkv_client_pull(c, "acc", ids, 32, got, sizeof got));
    for (int i = 0; i < 32 * 4; i++)
        if (got[i] != (float)(NTHR * NITER))
            fail_msg("acc element %d is %g, expected %d", i, got[i], NTHR * NITER);
    NET_OK(gkv_client_close(c));
    free(ref);
}

/* ---- the fake server ------------------------------------------------------------ */

static unsigned char fk_buf[1 << 20];

/* The k-th entry of a comma-separated list ("ok" when there is none). */
static void
nth_word(const char *list, int k, char *out, size_t cap)
{
    const char *p = list;

    for (int i = 0; i < k && p != NULL; i++)
        if ((p = strchr(p, ',')) != NULL)
            p++;
    if (p == NULL || *p == '\0' || *p == ',') {
        snprintf(out, cap, "ok");
        return;
    }
    snprintf(out, cap, "%.*s", (int)strcspn(p, ","), p);
}

static void
fk_send(int s, const net_hdr *rq, uint16_t type, uint32_t flags, int32_t status,
        uint64_t req_id, const unsigned char *pl, size_t len, int badsum)
{
    unsigned char *m = nn_allocmsg(NET_HDR_LEN + len, 0);
    net_hdr h = {0};

    h.magic = NET_MAGIC;
    h.version = NET_VERSION;
    h.type = type;
    h.flags = flags;
    h.status = status;
    h.req_id = req_id;
    h.session = rq->session;
    h.len = len;
    if (badsum) {
        h.flags |= NET_F_SUM;
        h.sum = net__sum(pl, len) ^ 1;
    }
    net__hdr_put(m, &h);
    memcpy(m + NET_HDR_LEN, pl, len);
    if (nn_send(s, &m, NN_MSG, 0) < 0)
        nn_freemsg(m);
}

/* Appends what a push the fake applied was to 'path' (NULL: nowhere). */
static void
fk_log(const char *path, const net_hdr *h, uint64_t n)
{
    FILE *fp;

    if (path == NULL || (fp = fopen(path, "a")) == NULL)
        return;
    fprintf(fp, "push %llu session 0x%llx rows %llu pid %ld\n",
            (unsigned long long)h->req_id, (unsigned long long)h->session,
            (unsigned long long)n, (long)getpid());
    fclose(fp);
}

/* argv: PORT MAX_MSG PULLS PUSHES [SESSION [PUSHLOG]]. PULLS and PUSHES
 * say how to answer the k-th pull and push (nth_word). A push "die" is
 * applied (logged) and the process exits without answering: a server
 * that dies between its commit and its reply. SESSION ("0": none) is the
 * session the handshake grants; when given, a request with another one
 * gets GKV_EPERM with flag SESSION, as from a restarted server. */
static int
fake_main(int argc, char **argv)
{
    char url[64], beh[32];
    int s = nn_socket(AF_SP, NN_REP), v = -1, npull = 0, npush = 0;
    uint64_t sess = argc >= 5 ? strtoull(argv[4], NULL, 0) : 0;
    const char *pushlog = argc >= 6 ? argv[5] : NULL;
    net_ident id;
    net_tensor t;
    net_wr w;

    if (argc < 4)
        return 2;
    nn_setsockopt(s, NN_SOL_SOCKET, NN_RCVMAXSIZE, &v, sizeof v);
    snprintf(url, sizeof url, "tcp://127.0.0.1:%s", argv[0]);
    if (nn_bind(s, url) < 0) {
        fprintf(stderr, "bind: %s\n", nn_strerror(nn_errno()));
        return 3;
    }
    fprintf(stderr, "fake: listening on %s\n", url);
    memset(&id, 0, sizeof id);
    id.proto = NET_VERSION;
    id.num_servers = 1;
    id.pid = (uint32_t)getpid();
    id.lease_ms = 30000;
    id.max_msg = strtoull(argv[1], NULL, 10);
    snprintf(id.host, sizeof id.host, "fake-host");
    snprintf(id.store, sizeof id.store, "/nonexistent/fake");
    snprintf(id.version, sizeof id.version, "0.1.0");
    memset(&t, 0, sizeof t);
    snprintf(t.name, sizeof t.name, "t");
    t.dtype = GKV_F32;
    t.ndim = 1;
    t.shape[0] = 4;
    t.lo = 0;
    t.hi = 100;
    t.row_bytes = 16;
    t.chunk_rows = 64;
    for (;;) {
        void *m = NULL;
        int n = nn_recv(s, &m, NN_MSG, 0);
        net_hdr h;
        net_rd rd;

        if (n < 0)
            return 1;
        if (net__hdr_get(m, (size_t)n, &h) != 0) {
            nn_freemsg(m);
            continue;
        }
        net__rd_init(&rd, (unsigned char *)m + NET_HDR_LEN, (size_t)n - NET_HDR_LEN);
        w.p = fk_buf;
        w.cap = sizeof fk_buf;
        w.off = 0;
        if (sess != 0 && h.type != NET_HELLO && h.type != NET_HANDSHAKE &&
            h.session != sess) {
            net__enc_err(&w, "unknown session: hand-shake first");
            fk_send(s, &h, h.type, NET_F_REPLY | NET_F_SESSION, GKV_EPERM,
                    h.req_id, fk_buf, w.off, 0);
            goto next;
        }
        switch (h.type) {
        case NET_HELLO: {
            net_hello_rep hr;
            memset(&hr, 0, sizeof hr);
            hr.id = id;
            net__enc_hello_rep(&w, &hr);
            break;
        }
        case NET_HANDSHAKE:
            net__wr_u64(&w, sess != 0 ? sess : 0x4242);
            net__enc_ident(&w, &id);
            net__wr_u32(&w, 1);
            net__enc_tensor(&w, &t);
            break;
        case NET_SCHEMA:
            net__wr_u32(&w, 1);
            net__enc_tensor(&w, &t);
            break;
        case NET_PULL: {
            net_pull_req pq;
            uint64_t k, rb = 16;
            unsigned char *rows;

            net__dec_pull_req(&rd, &pq);
            nth_word(argv[2], npull++, beh, sizeof beh);
            k = pq.n;
            if (strcmp(beh, "hang") == 0)
                goto next;                  /* never answered */
            if (strcmp(beh, "garbage") == 0) {
                unsigned char *g = nn_allocmsg(20, 0);
                memset(g, 0x5a, 20);
                if (nn_send(s, &g, NN_MSG, 0) < 0)
                    nn_freemsg(g);
                goto next;
            }
            if (strcmp(beh, "status") == 0) {
                net__enc_err(&w, "a status no gkv_err has");
                fk_send(s, &h, h.type, NET_F_REPLY, 7, h.req_id, fk_buf, w.off, 0);
                goto next;
            }
            if (strcmp(beh, "count") == 0)
                k--;
            if (strcmp(beh, "rowbytes") == 0)
                rb = 8;
            net__wr_u64(&w, k);
            net__wr_u64(&w, rb);
            rows = net__wr_arr(&w, k * rb);
            for (uint64_t i = 0; i < k; i++) {
                uint64_t gid;
                float row[4];
                memcpy(&gid, pq.ids + 8 * i, 8);
                fake_row(gid, row);
                memcpy(rows + i * rb, row, rb);
            }
            if (strcmp(beh, "short") == 0)
                w.off--;
            fk_send(s, &h, strcmp(beh, "type") == 0 ? NET_PUSH : h.type,
                    strcmp(beh, "notreply") == 0 ? 0 : NET_F_REPLY, 0,
                    strcmp(beh, "badreq") == 0 ? h.req_id + 1000 : h.req_id,
                    fk_buf, w.off, strcmp(beh, "sum") == 0);
            goto next;
        }
        case NET_PUSH: {
            net_push_req pr;
            net__dec_push_req(&rd, &pr);
            nth_word(argv[3], npush++, beh, sizeof beh);
            fk_log(pushlog, &h, pr.n);
            if (strcmp(beh, "die") == 0) {
                fprintf(stderr, "fake: applied push %llu, dying unanswered\n",
                        (unsigned long long)h.req_id);
                _exit(0);
            }
            net__wr_u64(&w, pr.n + (strcmp(beh, "count") == 0));
            break;
        }
        case NET_LEAVE:
            net__wr_u8(&w, 0);
            break;
        case NET_HEARTBEAT:
            net__wr_u32(&w, id.lease_ms);
            break;
        default:
            net__enc_err(&w, "the fake server does not serve this");
            fk_send(s, &h, h.type, NET_F_REPLY, GKV_EPROTO, h.req_id, fk_buf,
                    w.off, 0);
            goto next;
        }
        fk_send(s, &h, h.type, NET_F_REPLY, 0, h.req_id, fk_buf, w.off, 0);
next:
        nn_freemsg(m);
    }
}

/* ---- main ----------------------------------------------------------------------- */

static void
find_programs(void)
{
    snprintf(g_server_path, sizeof g_server_path, "%s", gkvt_prog("gkv-server"));
}

int
main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_dead_machine_named, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_not_held_by_heartbeat, setup, teardown),
        cmocka_unit_test_setup_teardown(test_heartbeat_shortest_lease, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hostile_replies, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hostile_tiny_max_msg, setup, teardown),
        cmocka_unit_test_setup_teardown(test_boundaries_and_sizes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stopped_server, setup, teardown),
        cmocka_unit_test_setup_teardown(test_restart_mid_call, setup, teardown),
        cmocka_unit_test_setup_teardown(test_push_not_resent_after_restart, setup, teardown),
        cmocka_unit_test_setup_teardown(test_push_resent_after_lease_expired, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resent_call_leaves_no_message, setup, teardown),
        cmocka_unit_test_setup_teardown(test_alloc_failures, setup, teardown),
        cmocka_unit_test_setup_teardown(test_threads_share_client, setup, teardown),
    };

    if (argc >= 2 && strcmp(argv[1], "--fake") == 0)
        return fake_main(argc - 2, argv + 2);
    signal(SIGPIPE, SIG_IGN);
    find_programs();
    return cmocka_run_group_tests_name("net_client_faults", tests, NULL, NULL);
}
