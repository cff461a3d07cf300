/* net_test.c - real gkv-server processes on loopback, started and stopped
 * by PID (teardown kills and reaps every process a test started, also
 * after a failed assertion), talked to by the client library, by client
 * processes (this program run again as "net_test --child ROLE ..."), and by
 * a raw nanomsg REQ socket sending malformed messages.
 *
 * Ports: each test picks a range no one is listening on (trying to bind
 * it) from a PID-dependent start, and starts over on a fresh range when a
 * server still finds its port taken (another run got there first).
 * GKVT_PORT_BASE fixes the start.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
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
#include "gkvt_net.h"
#include "net/wire.h"

#define MAXPROC 16

static char g_server_path[PATH_MAX + 16];

/* ---- stores ---------------------------------------------------------------------- */

static void
make_tensor(const char *st, const char *name, gkv_dtype dt, uint64_t width,
            uint64_t lo, uint64_t hi, gkv_init init, unsigned flags)
{
    gkv_tensor_spec sp = gkvt_spec_init(dt, width, lo, hi, init);

    sp.flags = flags;
    gkvt_store_create(st, name, &sp);
}

/* Rows ids[0..n) of tensor name in store st, read in-process. */
static void *
read_rows(const char *st, const char *name, const uint64_t *ids, size_t n,
          size_t rb)
{
    gkv_store *s;
    void *b = malloc(n * rb + 1);

    GKVT_OK(gkv_store_open(&s, st, GKV_RDONLY, NULL));
    GKVT_OK(gkv_tensor_pull(s, NULL, name, ids, n, b, n * rb));
    gkv_store_close(s);
    return b;
}

static int
setup(void **state)
{
    if (gkvt_job_setup(state, sizeof (struct gkvt_job), "net", MAXPROC, NULL,
                       0) != 0)
        return -1;
    ((struct gkvt_job *)*state)->cfg_head = "# test ip_config";
    return 0;
}

/* Kills and reaps every process the test started; a sanitizer report in
 * any of their logs (SAN= builds) fails the test. */
static int
teardown(void **state)
{
    return gkvt_job_teardown(state);
}

static gkv_client *
client(struct gkvt_job *f, const char *group, uint32_t rank, const char *token,
       int timeout_ms, unsigned flags)
{
    gkv_client *c = NULL;
    gkv_client_opts o = {0};
    gkv_err rc;

    o.timeout_ms = timeout_ms;
    o.flags = flags;
    o.group_size = 1;
    rc = gkv_client_connect(&c, f->cfg, token, group, rank, &o);
    if (rc != GKV_OK)
        fail_msg("connect: %s: %s", gkv_err_name(rc), gkv_net_errmsg());
    return c;
}

/* ---- the tool's usage and start-up errors ------------------------------------------- */

static void
test_server_usage(void **state)
{
    struct gkvt_job *f = *state;
    char *out = NULL, *err = NULL, tok[4300];
    char *help[] = {g_server_path, "--help", NULL};
    char *none[] = {g_server_path, NULL};
    char *unknown[] = {g_server_path, "--store", "x", "--ip-config", "y", "--frobnicate", NULL};
    char *sid[] = {g_server_path, "--store", "x", "--ip-config", "y", "--server-id", "2", "--num-servers", "2", NULL};
    char *nostore[] = {g_server_path, "--store", f->st[0], "--ip-config", f->cfg, "--machine", "0", NULL};
    char *badtok[] = {g_server_path, "--store", f->st[0], "--ip-config", f->cfg, "--machine", "0", "--create", "--token-file", tok, NULL};

    assert_int_equal(gkvt_run(help, NULL, 0, &out, &err, 30), 0);
    assert_non_null(strstr(out, "Usage: gkv-server"));
    assert_non_null(strstr(out, "--keep-alive"));
    free(out);
    free(err);
    assert_int_equal(gkvt_run(none, NULL, 0, NULL, &err, 30), 2);
    assert_non_null(strstr(err, "--store DIR or --part-config FILE is required"));
    free(err);
    assert_int_equal(gkvt_run(unknown, NULL, 0, NULL, &err, 30), 2);
    assert_non_null(strstr(err, "unknown option '--frobnicate'"));
    free(err);
    assert_int_equal(gkvt_run(sid, NULL, 0, NULL, &err, 30), 2);
    free(err);
    /* a missing store, a bad ip_config, a readable token file: exit 1 */
    gkvt_write_text(f->cfg, "127.0.0.1 30050\n", 0644);
    assert_int_equal(gkvt_run(nostore, NULL, 0, NULL, &err, 30), 1);
    assert_non_null(strstr(err, f->st[0]));
    free(err);
    gkvt_write_text(f->cfg, "127.0.0.1 30050 9\n", 0644);
    assert_int_equal(gkvt_run(nostore, NULL, 0, NULL, &err, 30), 1);
    assert_non_null(strstr(err, "ip.cfg:1: expected 'IP [PORT]'"));
    free(err);
    gkvt_write_text(f->cfg, "127.0.0.1 30050\n", 0644);
    snprintf(tok, sizeof tok, "%s/token", f->dir);
    gkvt_write_text(tok, "secret\n", 0644);
    assert_int_equal(gkvt_run(badtok, NULL, 0, NULL, &err, 30), 1);
    assert_non_null(strstr(err, "chmod 600"));
    free(err);
}

/* ---- kv requests against one server -------------------------------------------------- */

static float
fval(uint64_t id, int j)
{
    return (float)(id % 1000) + (float)j * 0.25f;
}

static void
test_kv_requests(void **state)
{
    struct gkvt_job *f = *state;
    struct gkvt_proc *srv[1];
    const char *extra[] = {"--heartbeat-timeout", "20000", NULL};
    gkv_client *c, *c2, *c3;
    gkv_server_info si;
    gkv_server_stats ss, ss2;
    gkv_tensor_desc d, *list;
    gkv_tensor_spec sp;
    gkv_store *ref;
    uint64_t seed = gkvt_seed(), x = seed, ids[5000], eid[64];
    size_t n = 5000, nl;
    float *got, *want, erows[64 * 4], eref[64 * 4];
    char path[4300], *real;
    static const char *const handlers[] = {"sgd", "adagrad", "adam"};

    make_tensor(f->st[0], "feat", GKV_F32, 16, 0, 3000, GKV_INIT_UNIFORM, 0);
    make_tensor(f->st[0], "emb", GKV_F32, 4, 100, 1100, GKV_INIT_ZEROS, GKV_TENSOR_HOT);
    gkvt_serve(f, 1, 1, extra, srv);
    c = client(f, "job", 0, NULL, 5000, 0);

    /* who the server is */
    assert_int_equal(gkv_client_nservers(c), 1);
    NET_OK(gkv_client_server_info(c, 0, &si));
    snprintf(path, sizeof path, "127.0.0.1:%d", f->base);
    assert_string_equal(si.addr, path);
    assert_int_equal(si.pid, srv[0]->pid);
    real = realpath(f->st[0], NULL);
    assert_string_equal(si.store, real);
    free(real);
    assert_int_equal(si.num_servers, 1);
    assert_int_equal(si.keep_alive, 0);
    assert_int_equal(si.auth, 0);
    assert_int_equal(si.lease_ms, 20000);

    /* the schema */
    NET_OK(gkv_client_tensor_info(c, "feat", &d));
    assert_int_equal(d.dtype, GKV_F32);
    assert_int_equal(d.row_bytes, 64);
    assert_int_equal(d.lo, 0);
    assert_int_equal(d.hi, 3000);
    NET_OK(gkv_client_tensor_list(c, &list, &nl));
    assert_int_equal(nl, 2);
    assert_string_equal(list[0].name, "emb");
    assert_int_equal(list[0].lo, 100);
    assert_int_equal(list[0].flags, GKV_TENSOR_HOT);
    assert_string_equal(list[1].name, "feat");
    gkv_free(list);
    assert_int_equal(gkv_client_tensor_info(c, "nope", &d), GKV_ENOTFOUND);

    /* pull: random IDs with duplicates, against the store read directly */
    for (size_t i = 0; i < n; i++)
        ids[i] = tools__splitmix64(&x) % 3000;
    ids[7] = ids[8];
    got = malloc(n * 64);
    want = read_rows(f->st[0], "feat", ids, n, 64);
    NET_OK(gkv_client_pull(c, "feat", ids, n, got, n * 64));
    assert_memory_equal(got, want, n * 64);
    NET_OK(gkv_client_pull(c, "feat", ids, 0, got, 0));
    ids[4000] = 3000;
    assert_int_equal(gkv_client_pull(c, "feat", ids, n, got, n * 64), GKV_ERANGE);
    assert_non_null(strstr(gkv_net_errmsg(), "ids[4000] = 3000"));
    ids[4000] = 1;
    assert_int_equal(gkv_client_pull(c, "feat", ids, n, got, n * 64 - 1), GKV_ESHAPE);
    assert_int_equal(gkv_client_pull(c, "nope", ids, 1, got, 64), GKV_ENOTFOUND);

    /* push assign and add; then the optimizers, mirrored on a reference
     * store with the same tensor */
    snprintf(path, sizeof path, "%s/ref", f->dir);
    make_tensor(path, "emb", GKV_F32, 4, 100, 1100, GKV_INIT_ZEROS, GKV_TENSOR_HOT);
    GKVT_OK(gkv_store_open(&ref, path, 0, NULL));
    for (int i = 0; i < 64; i++) {
        eid[i] = 100 + (tools__splitmix64(&x) % 1000);
        for (int j = 0; j < 4; j++)
            erows[i * 4 + j] = fval(eid[i], j);
    }
    eid[5] = eid[6];                     /* a duplicate: the last one wins */
    NET_OK(gkv_client_push(c, "emb", eid, 64, erows, sizeof erows, NULL));
    GKVT_OK(gkv_tensor_push(ref, "emb", eid, 64, erows, sizeof erows, NULL));
    for (int h = -1; h < 3; h++) {
        gkv_push_args pa = {0};
        pa.handler = h < 0 ? "add" : handlers[h];
        pa.lr = 0.1;
        NET_OK(gkv_client_push(c, "emb", eid, 64, erows, sizeof erows, &pa));
        GKVT_OK(gkv_tensor_push(ref, "emb", eid, 64, erows, sizeof erows, &pa));
        NET_OK(gkv_client_pull(c, "emb", eid, 64, erows, sizeof erows));
        GKVT_OK(gkv_tensor_pull(ref, NULL, "emb", eid, 64, eref, sizeof eref));
        if (memcmp(erows, eref, sizeof erows) != 0)
            fail_msg("after a '%s' push the server's rows differ from the "
                     "reference store's", pa.handler);
    }
    gkv_store_close(ref);
    {
        gkv_push_args pa = {0};
        pa.handler = "no-such-handler";
        assert_int_equal(gkv_client_push(c, "emb", eid, 1, erows, 16, &pa),
                         GKV_EHANDLER);
        assert_non_null(strstr(gkv_net_errmsg(), "127.0.0.1"));
    }

    /* create: new, identical again (fine), different (EEXIST); delete twice */
    memset(&sp, 0, sizeof sp);
    sp.dtype = GKV_I64;
    sp.ndim = 1;
    sp.shape[0] = 2;
    sp.lo = 0;
    sp.hi = 50;
    sp.init = GKV_INIT_CONST;
    sp.a = 9;
    NET_OK(gkv_client_create(c, "t2", &sp, -1));
    NET_OK(gkv_client_create(c, "t2", &sp, -1));
    NET_OK(gkv_client_tensor_info(c, "t2", &d));
    assert_int_equal(d.hi, 50);
    {
        int64_t v[2];
        uint64_t id = 49;
        NET_OK(gkv_client_pull(c, "t2", &id, 1, v, sizeof v));
        assert_int_equal(v[1], 9);
    }
    sp.shape[0] = 3;
    assert_int_equal(gkv_client_create(c, "t2", &sp, -1), GKV_EEXIST);
    assert_non_null(strstr(gkv_net_errmsg(), "exists as i64 [2]"));
    assert_non_null(strstr(gkv_net_errmsg(), "asked for i64 [3]"));
    NET_OK(gkv_client_delete(c, "t2"));
    NET_OK(gkv_client_delete(c, "t2"));
    assert_int_equal(gkv_client_tensor_info(c, "t2", &d), GKV_ENOTFOUND);

    /* a second client with checksums, a third reading the store in-process */
    c2 = client(f, "job", 1, NULL, 5000, GKV_CLIENT_CHECKSUM);
    memset(got, 0, n * 64);
    NET_OK(gkv_client_pull(c2, "feat", ids, n, got, n * 64));
    free(want);
    want = read_rows(f->st[0], "feat", ids, n, 64);
    assert_memory_equal(got, want, n * 64);
    NET_OK(gkv_client_stats(c, 0, &ss));
    c3 = client(f, "job", 2, NULL, 5000, GKV_CLIENT_LOCAL_READ);
    memset(got, 0, n * 64);
    NET_OK(gkv_client_pull(c3, "feat", ids, n, got, n * 64));
    assert_memory_equal(got, want, n * 64);
    NET_OK(gkv_client_stats(c, 0, &ss2));
    assert_int_equal(ss2.pulls, ss.pulls);     /* no network pull */
    assert_true(ss2.pulls >= 6);
    assert_true(ss2.pushes >= 5);
    assert_int_equal(ss2.sessions, 3);
    assert_int_equal(ss2.groups, 1);
    assert_int_equal(ss2.tensors, 2);
    /* t2's pages and the pushes' old copies are on the free list */
    assert_true(ss2.store_free_bytes > 0);
    assert_true(ss2.store_free_bytes <= ss2.store_used_bytes);
    NET_OK(gkv_client_close(c3));
    NET_OK(gkv_client_close(c2));
    assert_true(gkvt_proc_alive(srv[0]));
    NET_OK(gkv_client_close(c));
    /* the last client left: a server that does not keep alive stops */
    assert_true(gkvt_proc_wait(srv[0], 5000));
    assert_int_equal(gkvt_proc_code(srv[0]), 0);
    assert_true(gkvt_file_has(srv[0]->log, "the last client left"));
    assert_true(gkvt_file_has(srv[0]->log, "join: group 'job' rank 2"));
    free(got);
    free(want);
}

/* ---- child processes ------------------------------------------------------------------- */

/* Runs this program as "--child ROLE args..." in the background. */
static struct gkvt_proc *
child(struct gkvt_job *f, const char *logname, ...)
{
    char *argv[32];
    int n = 0;
    va_list ap;

    argv[n++] = (char *)gkvt_self();
    argv[n++] = "--child";
    va_start(ap, logname);
    while (n < 31 && (argv[n] = va_arg(ap, char *)) != NULL)
        n++;
    va_end(ap);
    argv[n] = NULL;
    return gkvt_job_spawn(f, argv, logname);
}

static int
child_fail(const char *what, gkv_err rc)
{
    fprintf(stderr, "child %ld: %s: %s: %s\n", (long)getpid(), what,
            gkv_err_name(rc), gkv_net_errmsg());
    return 1;
}

/* The value rank r adds to every row in round k (exact in f32). */
static float
add_val(unsigned r, unsigned k)
{
    return (float)((r + 1) * (k + 1));
}

/* child ROLE CFG GROUP RANK GROUP_SIZE [ARG] */
static int
child_main(int argc, char **argv)
{
    gkv_client *c;
    gkv_client_opts o = {0};
    const char *role, *cfg, *group;
    unsigned rank, gs;
    gkv_err rc;

    if (argc < 5)
        return 2;
    role = argv[0];
    cfg = argv[1];
    group = argv[2];
    rank = (unsigned)atoi(argv[3]);
    gs = (unsigned)atoi(argv[4]);
    o.timeout_ms = 10000;
    o.group_size = gs;
    if ((rc = gkv_client_connect(&c, cfg, NULL, group, rank, &o)) != GKV_OK)
        return child_fail("connect", rc);
    if (strcmp(role, "adder") == 0) {
        /* 30 rounds of add pushes to all 512 rows of "acc" (in a shuffled
         * order, some twice), then a barrier */
        uint64_t ids[600], x = rank * 1000 + 1;
        float *rows = malloc(600 * 8 * sizeof(float));
        for (unsigned k = 0; k < 30; k++) {
            for (int i = 0; i < 512; i++)
                ids[i] = (uint64_t)i;
            for (int i = 511; i > 0; i--) {
                int j = (int)(tools__splitmix64(&x) % (uint64_t)(i + 1));
                uint64_t t = ids[i];
                ids[i] = ids[j];
                ids[j] = t;
            }
            for (int i = 512; i < 600; i++)
                ids[i] = (uint64_t)(i - 512) * 5;    /* rows 0,5,..,435 twice */
            for (int i = 0; i < 600 * 8; i++)
                rows[i] = add_val(rank, k);
            gkv_push_args pa = {0};
            pa.handler = "add";
            if ((rc = gkv_client_push(c, "acc", ids, 600, rows,
                                      600 * 8 * sizeof(float), &pa)) != GKV_OK)
                return child_fail("push", rc);
        }
        free(rows);
        if ((rc = gkv_client_barrier(c, 20000)) != GKV_OK)
            return child_fail("barrier", rc);
    } else if (strcmp(role, "job1") == 0) {
        uint64_t ids[10];
        float rows[10 * 4];
        for (int i = 0; i < 10; i++) {
            ids[i] = (uint64_t)i * 3;
            for (int j = 0; j < 4; j++)
                rows[i * 4 + j] = fval(ids[i], j);
        }
        if ((rc = gkv_client_push(c, "emb", ids, 10, rows, sizeof rows, NULL)) != GKV_OK)
            return child_fail("push", rc);
    } else if (strcmp(role, "barrier") == 0) {
        /* rank r (late by r x 150 ms) sets row r, meets the others, then
         * must see every rank's row */
        uint64_t id = rank, all[8];
        float row[4] = {(float)rank + 1, 0, 0, 0}, got[8 * 4];
        tools__sleep_ms((int)rank * 150);
        if ((rc = gkv_client_push(c, "emb", &id, 1, row, sizeof row, NULL)) != GKV_OK)
            return child_fail("push", rc);
        if ((rc = gkv_client_barrier(c, 20000)) != GKV_OK)
            return child_fail("barrier", rc);
        for (unsigned r = 0; r < gs; r++)
            all[r] = r;
        if ((rc = gkv_client_pull(c, "emb", all, gs, got, gs * 16)) != GKV_OK)
            return child_fail("pull", rc);
        for (unsigned r = 0; r < gs; r++)
            if (got[r * 4] != (float)r + 1) {
                fprintf(stderr, "child rank %u: row %u is %g after the barrier\n",
                        rank, r, got[r * 4]);
                return 1;
            }
    } else if (strcmp(role, "hold") == 0) {
        fprintf(stderr, "holding\n");
        for (;;)
            tools__sleep_ms(1000);
    } else if (strcmp(role, "bigpush") == 0) {
        /* 3 MB pushes and pulls of tensor "wide", over and over, until
         * killed in the middle of one */
        uint64_t ids[30];
        unsigned char *rows = calloc(30, 100000);
        for (int i = 0; i < 30; i++)
            ids[i] = (uint64_t)i;
        fprintf(stderr, "pushing\n");
        for (;;) {
            gkv_client_push(c, "wide", ids, 30, rows, 30 * 100000, NULL);
            gkv_client_pull(c, "wide", ids, 30, rows, 30 * 100000);
        }
    } else {
        return 2;
    }
    if ((rc = gkv_client_close(c)) != GKV_OK)
        return child_fail("close", rc);
    return 0;
}

static int
wait_code(struct gkvt_proc *p, int ms)
{
    if (!gkvt_proc_wait(p, ms)) {
        char *t = gkvt_slurp(p->log);
        fail_msg("process %ld did not exit within %d ms; its log:\n%s",
                 (long)p->pid, ms, t);
    }
    if (gkvt_proc_code(p) != 0) {
        char *t = gkvt_slurp(p->log);
        fail_msg("process %ld exited with %d; its log:\n%s", (long)p->pid,
                 gkvt_proc_code(p), t);
    }
    return 0;
}

/* ---- lifecycle ------------------------------------------------------------------------ */

static void
test_persistent_two_jobs(void **state)
{
    struct gkvt_job *f = *state;
    struct gkvt_proc *srv[1], *j1;
    const char *extra[] = {"--keep-alive", "--server-name", "persist", NULL};
    gkv_client *c;
    gkv_server_info si;
    uint64_t ids[10];
    float got[10 * 4];

    make_tensor(f->st[0], "emb", GKV_F32, 4, 0, 100, GKV_INIT_ZEROS, 0);
    gkvt_serve(f, 1, 1, extra, srv);
    /* job 1: another process pushes, then leaves */
    j1 = child(f, "job1.log", "job1", f->cfg, "job1", "0", "1", NULL);
    wait_code(j1, 20000);
    assert_true(gkvt_file_has(srv[0]->log, "leave: group 'job1' rank 0"));
    tools__sleep_ms(300);
    assert_true(gkvt_proc_alive(srv[0]));      /* persistent: still serving */
    /* job 2, another group, sees what job 1 left */
    c = client(f, "job2", 0, NULL, 5000, 0);
    NET_OK(gkv_client_server_info(c, 0, &si));
    assert_string_equal(si.name, "persist");
    assert_int_equal(si.keep_alive, 1);
    for (int i = 0; i < 10; i++)
        ids[i] = (uint64_t)i * 3;
    NET_OK(gkv_client_pull(c, "emb", ids, 10, got, sizeof got));
    for (int i = 0; i < 10; i++)
        for (int j = 0; j < 4; j++)
            assert_true(got[i * 4 + j] == fval(ids[i], j));
    /* a plain shutdown does not stop it; a forced one does */
    NET_OK(gkv_client_shutdown(c, 0));
    tools__sleep_ms(300);
    assert_true(gkvt_proc_alive(srv[0]));
    assert_true(gkvt_file_has(srv[0]->log, "ignored"));
    NET_OK(gkv_client_shutdown(c, 1));
    assert_true(gkvt_proc_wait(srv[0], 5000));
    assert_int_equal(gkvt_proc_code(srv[0]), 0);
    assert_true(gkvt_file_has(srv[0]->log, "shutdown requested by group 'job2' rank 0 (forced)"));
    NET_OK(gkv_client_close(c));          /* nothing left to leave: quick */
}

/* 4 processes add to every row of one tensor through 2 servers sharing
 * one store; every row must hold the exact sum. */
static void
test_concurrent_add(void **state)
{
    struct gkvt_job *f = *state;
    struct gkvt_proc *srv[2], *kid[4];
    const char *extra[] = {"--threads", "2", "--nosync", NULL};
    gkv_client *c;
    uint64_t ids[512];
    float *got = malloc(512 * 8 * sizeof(float));
    char rank[4][8];
    gkv_server_stats s0, s1;

    make_tensor(f->st[0], "acc", GKV_F32, 8, 0, 512, GKV_INIT_ZEROS, GKV_TENSOR_HOT);
    gkvt_serve(f, 1, 2, extra, srv);
    c = client(f, "watch", 0, NULL, 10000, 0);
    assert_int_equal(gkv_client_nservers(c), 2);
    for (int r = 0; r < 4; r++) {
        snprintf(rank[r], sizeof rank[r], "%d", r);
        kid[r] = child(f, "adder.log", "adder", f->cfg, "adders", rank[r], "4", NULL);
    }
    for (int r = 0; r < 4; r++)
        wait_code(kid[r], 60000);
    for (int i = 0; i < 512; i++)
        ids[i] = (uint64_t)i;
    NET_OK(gkv_client_pull(c, "acc", ids, 512, got, 512 * 8 * sizeof(float)));
    for (int i = 0; i < 512; i++) {
        float want = 0;
        for (unsigned r = 0; r < 4; r++)
            for (unsigned k = 0; k < 30; k++)
                want += add_val(r, k) * ((i % 5 == 0 && i < 440) ? 2 : 1);
        for (int j = 0; j < 8; j++)
            if (got[i * 8 + j] != want)
                fail_msg("row %d col %d is %g, expected %g", i, j,
                         got[i * 8 + j], want);
    }
    /* both servers took pushes */
    NET_OK(gkv_client_stats(c, 0, &s0));
    NET_OK(gkv_client_stats(c, 1, &s1));
    assert_true(s0.pushes > 0 && s1.pushes > 0);
    assert_int_equal(s0.pushes + s1.pushes, 4 * 30);
    NET_OK(gkv_client_close(c));
    assert_true(gkvt_proc_wait(srv[0], 5000));
    assert_true(gkvt_proc_wait(srv[1], 5000));
    assert_int_equal(gkvt_proc_code(srv[0]), 0);
    assert_int_equal(gkvt_proc_code(srv[1]), 0);
    free(got);
}

static void
test_kill9_and_restart(void **state)
{
    struct gkvt_job *f = *state;
    struct gkvt_proc *srv[1];
    const char *extra[] = {"--keep-alive", NULL};
    gkv_client *c;
    uint64_t ids[3] = {1, 2, 3};
    float rows[12], got[12];
    char addr[64];
    double t0, took;
    gkv_err rc;

    make_tensor(f->st[0], "emb", GKV_F32, 4, 0, 100, GKV_INIT_ZEROS, 0);
    gkvt_serve(f, 1, 1, extra, srv);
    /* 3 s: after a restart, reconnecting (nanomsg waits up to 1 s between
     * tries), hand-shaking and pulling fit in it, also with a process
     * stalled on a noisy host */
    c = client(f, "job", 0, NULL, 3000, 0);
    for (int i = 0; i < 12; i++)
        rows[i] = (float)i + 0.5f;
    NET_OK(gkv_client_push(c, "emb", ids, 3, rows, sizeof rows, NULL));
    /* kill -9: the next call fails within the timeout, naming the server */
    gkvt_proc_kill(srv[0]);
    t0 = tools__now_s();
    rc = gkv_client_pull(c, "emb", ids, 3, got, sizeof got);
    took = tools__now_s() - t0;
    assert_int_equal(rc, GKV_ETIMEDOUT);
    snprintf(addr, sizeof addr, "server 127.0.0.1:%d", f->base);
    assert_non_null(strstr(gkv_net_errmsg(), addr));
    if (took < 2.9 || took >= 5.0)
        fail_msg("the pull from a killed server failed after %.2f s with a "
                 "3 s timeout", took);
    /* a restarted server serves the committed rows to the same client */
    srv[0] = gkvt_server_try(f, 0, 0, extra);
    assert_non_null(srv[0]);
    NET_OK(gkv_client_pull(c, "emb", ids, 3, got, sizeof got));
    assert_memory_equal(got, rows, sizeof rows);
    /* killed and restarted between two calls: the old socket reconnects by
     * itself, the new server refuses the old session, the client
     * hand-shakes again and the call succeeds */
    gkvt_proc_kill(srv[0]);
    srv[0] = gkvt_server_try(f, 0, 0, extra);
    assert_non_null(srv[0]);
    memset(got, 0, sizeof got);
    NET_OK(gkv_client_pull(c, "emb", ids, 3, got, sizeof got));
    assert_memory_equal(got, rows, sizeof rows);
    assert_true(gkvt_file_has(srv[0]->log, "unknown session"));
    NET_OK(gkv_client_close(c));
}

static void
test_sigterm_syncs(void **state)
{
    struct gkvt_job *f = *state;
    struct gkvt_proc *srv[1];
    gkv_client *c;
    uint64_t ids[2] = {5, 6};
    float rows[8] = {1, 2, 3, 4, 5, 6, 7, 8}, *got;
    gkv_err rc;

    make_tensor(f->st[0], "emb", GKV_F32, 4, 0, 100, GKV_INIT_ZEROS, 0);
    gkvt_serve(f, 1, 1, NULL, srv);
    c = client(f, "job", 0, NULL, 3000, 0);     /* survives a stalled server */
    NET_OK(gkv_client_push(c, "emb", ids, 2, rows, sizeof rows, NULL));
    kill(srv[0]->pid, SIGTERM);
    assert_true(gkvt_proc_wait(srv[0], 5000));
    assert_int_equal(gkvt_proc_code(srv[0]), 0);
    assert_true(gkvt_file_has(srv[0]->log, "stopping: stop requested (signal)"));
    assert_true(gkvt_file_has(srv[0]->log, "stopped: store synced"));
    got = read_rows(f->st[0], "emb", ids, 2, 16);
    assert_memory_equal(got, rows, sizeof rows);
    free(got);
    rc = gkv_client_pull(c, "emb", ids, 2, rows, sizeof rows);
    assert_int_equal(rc, GKV_ETIMEDOUT);
    gkv_client_close(c);
}

/* A server with --writeback: pushes change the tensor in the server's RAM
 * (the store on disk keeps its old rows until a flush), pulls through the
 * server see them at once (a client asking for local reads is served over
 * the network, since the store lags), tensors created later under a
 * matching prefix are kept the same way and can be deleted, and SIGTERM
 * writes every push: the store then equals the same pushes applied to a
 * plain store. Bad write-back options are refused. */
static void
test_writeback_server(void **state)
{
    struct gkvt_job *f = *state;
    const char *extra[] = {"--writeback", "emb*", "--flush-ms", "86400000",
                           NULL};
    struct gkvt_proc *srv[1];
    gkv_push_args ada = {"adagrad", 0.1, 0, 0, 0, 0};
    uint64_t ids[64], rs = gkvt_seed() ^ 23;
    float rows[64 * 4], got[64 * 4], want[64 * 4], *disk;
    gkv_tensor_spec sp;
    gkv_store *ref;
    gkv_client *c;
    char *err = NULL;

    make_tensor(f->st[0], "emb", GKV_F32, 4, 0, 1000, GKV_INIT_UNIFORM, 0);
    make_tensor(f->st[0], "feat", GKV_F32, 4, 0, 1000, GKV_INIT_UNIFORM, 0);
    make_tensor(f->st[1], "emb", GKV_F32, 4, 0, 1000, GKV_INIT_UNIFORM, 0);
    for (int i = 0; i < 64; i++)
        ids[i] = i * 15 + 1;
    disk = read_rows(f->st[0], "emb", ids, 64, 16);
    gkvt_serve(f, 1, 1, extra, srv);
    assert_true(gkvt_file_has(srv[0]->log, "write-back: tensor 'emb' (1000 "
                              "rows, 0.0 MB) in RAM, written every 86400000 ms"));
    assert_false(gkvt_file_has(srv[0]->log, "write-back: tensor 'feat'"));
    c = client(f, "job", 0, NULL, 5000, GKV_CLIENT_LOCAL_READ);
    GKVT_OK(gkv_store_open(&ref, f->st[1], 0, NULL));
    for (int k = 0; k < 6; k++) {
        for (int i = 0; i < 64 * 4; i++)
            rows[i] = (float)((int)(tools__splitmix64(&rs) % 2001) - 1000) / 1000.0f;
        ids[k] = ids[63 - k];                     /* duplicates */
        NET_OK(gkv_client_push(c, "emb", ids, 64, rows, sizeof rows,
                               k % 2 ? &ada : NULL));
        GKVT_OK(gkv_tensor_push(ref, "emb", ids, 64, rows, sizeof rows,
                                k % 2 ? &ada : NULL));
        NET_OK(gkv_client_pull(c, "emb", ids, 64, got, sizeof got));
        GKVT_OK(gkv_tensor_pull(ref, NULL, "emb", ids, 64, want, sizeof want));
        assert_memory_equal(got, want, sizeof got);
    }
    {   /* the store itself has not been written yet */
        float *now = read_rows(f->st[0], "emb", ids + 6, 58, 16);
        assert_memory_equal(now, disk + 6 * 4, 58 * 16);
        free(now);
    }
    /* a tensor created under the prefix is kept in RAM too, and goes */
    memset(&sp, 0, sizeof sp);
    sp.dtype = GKV_F32;
    sp.ndim = 1;
    sp.shape[0] = 4;
    sp.lo = 0;
    sp.hi = 50;
    NET_OK(gkv_client_create(c, "emb2", &sp, 0));
    assert_true(gkvt_file_has(srv[0]->log, "write-back: tensor 'emb2'"));
    NET_OK(gkv_client_push(c, "emb2", (uint64_t[]){3, 40}, 2, rows, 32, NULL));
    NET_OK(gkv_client_pull(c, "emb2", (uint64_t[]){3, 40}, 2, got, 32));
    assert_memory_equal(got, rows, 32);
    NET_OK(gkv_client_delete(c, "emb2"));
    assert_int_equal(gkv_client_pull(c, "emb2", ids, 1, got, 16), GKV_ENOTFOUND);
    NET_OK(gkv_client_close(c));

    /* SIGHUP (a closed ssh session) as SIGTERM: every push written,
     * weights and optimizer state (it killed the server, losing them) */
    kill(srv[0]->pid, SIGHUP);
    assert_true(gkvt_proc_wait(srv[0], 10000));
    assert_int_equal(gkvt_proc_code(srv[0]), 0);
    assert_true(gkvt_file_has(srv[0]->log, "write-back: last pushes written"));
    assert_true(gkvt_file_has(srv[0]->log, "the signal was SIGHUP"));
    for (int i = 0; i < 64; i++)
        ids[i] = (uint64_t)i * 15 + 1;
    free(disk);
    disk = read_rows(f->st[0], "emb", ids, 64, 16);
    GKVT_OK(gkv_tensor_pull(ref, NULL, "emb", ids, 64, want, sizeof want));
    assert_memory_equal(disk, want, sizeof want);
    free(disk);
    disk = read_rows(f->st[0], "emb#adagrad_s", ids, 64, 16);
    GKVT_OK(gkv_tensor_pull(ref, NULL, "emb#adagrad_s", ids, 64, want,
                            sizeof want));
    assert_memory_equal(disk, want, sizeof want);
    free(disk);
    gkv_store_close(ref);

    /* bad options */
    {
        char *two[] = {g_server_path, "--store", f->st[0], "--ip-config",
                       f->cfg, "--writeback", "emb", "--num-servers", "2",
                       NULL};
        char *lone[] = {g_server_path, "--store", f->st[0], "--ip-config",
                        f->cfg, "--flush-ms", "5", NULL};
        char *star[] = {g_server_path, "--store", f->st[0], "--ip-config",
                        f->cfg, "--machine", "0", "--writeback", "e*b", NULL};
        char *hash[] = {g_server_path, "--store", f->st[0], "--ip-config",
                        f->cfg, "--machine", "0", "--writeback", "emb#adagrad_s",
                        NULL};

        assert_int_equal(gkvt_run(two, NULL, 0, NULL, &err, 30), 2);
        assert_non_null(strstr(err, "--writeback needs one server per machine"));
        free(err);
        assert_int_equal(gkvt_run(lone, NULL, 0, NULL, &err, 30), 2);
        assert_non_null(strstr(err, "--flush-ms needs --writeback"));
        free(err);
        /* bad usage (2), before anything is opened */
        assert_int_equal(gkvt_run(star, NULL, 0, NULL, &err, 30), 2);
        assert_non_null(strstr(err, "--writeback: 'e*b' is not a tensor name"));
        free(err);
        assert_int_equal(gkvt_run(hash, NULL, 0, NULL, &err, 30), 2);
        assert_non_null(strstr(err, "--writeback: 'emb#adagrad_s' is not"));
        free(err);
    }
}

static void
test_barrier_and_lease(void **state)
{
    struct gkvt_job *f = *state;
    struct gkvt_proc *srv[1], *kid[3], *hold;
    /* a lease of 5 s, heartbeats every 1.7 s: a process stalled for a
     * second or so (a noisy host) does not lose it */
    const char *extra[] = {"--heartbeat-timeout", "5000", NULL};
    char rank[3][8];
    double t0;

    make_tensor(f->st[0], "emb", GKV_F32, 4, 0, 100, GKV_INIT_ZEROS, 0);
    gkvt_serve(f, 1, 1, extra, srv);
    /* a client that stays: its heartbeats keep its lease for longer than
     * the lease */
    hold = child(f, "hold.log", "hold", f->cfg, "holders", "0", "1", NULL);
    t0 = tools__now_s();
    while (!gkvt_file_has(hold->log, "holding") && tools__now_s() - t0 < 10)
        tools__sleep_ms(10);
    for (int r = 0; r < 3; r++) {
        snprintf(rank[r], sizeof rank[r], "%d", r);
        kid[r] = child(f, "barrier.log", "barrier", f->cfg, "bar", rank[r], "3", NULL);
    }
    for (int r = 0; r < 3; r++)
        wait_code(kid[r], 20000);
    tools__sleep_ms(6000);                      /* longer than the lease */
    assert_true(gkvt_proc_alive(srv[0]));
    assert_false(gkvt_file_has(srv[0]->log, "lease expired"));
    /* killed, it stops heart-beating: the lease expires, and with it the
     * last client: the server stops */
    gkvt_proc_kill(hold);
    t0 = tools__now_s();
    assert_true(gkvt_proc_wait(srv[0], 15000));
    assert_true(tools__now_s() - t0 >= 1.0);
    assert_int_equal(gkvt_proc_code(srv[0]), 0);
    assert_true(gkvt_file_has(srv[0]->log, "lease expired"));
    assert_true(gkvt_file_has(srv[0]->log, "group 'holders' rank 0"));
}

/* ---- authentication ---------------------------------------------------------------------- */

/* Sends b (len bytes) and returns the reply's header and payload (into
 * pl, cap bytes; *plen its length); -1 when no reply came. */
static int
raw_call(int s, const void *b, size_t len, net_hdr *h, unsigned char *pl,
         size_t cap, size_t *plen)
{
    void *rep = NULL;
    int n;
    char why[256];

    assert_int_equal(nn_send(s, b, len, 0), (int)len);
    n = nn_recv(s, &rep, NN_MSG, 0);
    if (n < 0)
        return -1;
    assert_int_equal(net__hdr_check(rep, (size_t)n, h, why, sizeof why), GKV_OK);
    assert_true(h->flags & NET_F_REPLY);
    *plen = (size_t)h->len < cap ? (size_t)h->len : cap;
    memcpy(pl, (unsigned char *)rep + NET_HDR_LEN, *plen);
    nn_freemsg(rep);
    return 0;
}

static void
raw_error(const unsigned char *pl, size_t plen, char *msg, size_t cap)
{
    net_rd rd;

    net__rd_init(&rd, pl, plen);
    assert_int_equal(net__dec_err(&rd, msg, cap), 0);
}

/* A raw hello + handshake; returns the session, or 0 (status in *st). */
static uint64_t
raw_handshake(int s, const char *token, const char *group, uint32_t rank,
              unsigned char *replay, size_t *replay_len, gkv_err *st)
{
    static unsigned char b[1 << 16], pl[1 << 16];
    net_hello_rep hr;
    net_hs_req hs;
    net_hs_rep hp;
    net_hdr h;
    net_wr w;
    net_rd rd;
    size_t len, plen;

    len = gkvt_raw_msg(b, NET_HELLO, 0, 1, NULL, 0);
    assert_int_equal(raw_call(s, b, len, &h, pl, sizeof pl, &plen), 0);
    net__rd_init(&rd, pl, plen);
    assert_int_equal(net__dec_hello_rep(&rd, &hr), 0);
    memset(&hs, 0, sizeof hs);
    memcpy(hs.nonce, hr.nonce, NET_NONCE_LEN);
    snprintf(hs.group, sizeof hs.group, "%s", group);
    hs.rank = rank;
    if (token != NULL) {
        unsigned char key[NET_KEY_LEN];
        net__token_key(token, strlen(token), key);
        net__proof(key, hs.nonce, group, rank, hs.mac);
        hs.flags = NET_HS_PROOF;
    }
    w.p = b + NET_HDR_LEN;
    w.cap = sizeof b - NET_HDR_LEN;
    w.off = 0;
    net__enc_hs_req(&w, &hs);
    len = gkvt_raw_msg(b, NET_HANDSHAKE, 0, 2, b + NET_HDR_LEN, w.off);
    if (replay != NULL) {
        memcpy(replay, b, len);
        *replay_len = len;
    }
    assert_int_equal(raw_call(s, b, len, &h, pl, sizeof pl, &plen), 0);
    *st = (gkv_err)h.status;
    if (h.status != 0)
        return 0;
    net__rd_init(&rd, pl, plen);
    assert_int_equal(net__dec_hs_rep(&rd, &hp), 0);
    net__schema_free(&hp.schema);
    return hp.session;
}

static void
test_token(void **state)
{
    struct gkvt_job *f = *state;
    struct gkvt_proc *srv[1];
    char tok[4300], extra_tok[4300];
    const char *extra[] = {"--token-file", extra_tok, "--keep-alive", NULL};
    gkv_client *c = NULL;
    gkv_client_opts o = {0};
    unsigned char replay[4096], pl[4096], b[256];
    size_t rlen, plen, len;
    char msg[1100];
    uint64_t sess;
    net_hdr h;
    gkv_err st;
    int s;

    make_tensor(f->st[0], "emb", GKV_F32, 4, 0, 100, GKV_INIT_ZEROS, 0);
    snprintf(tok, sizeof tok, "%s/token", f->dir);
    snprintf(extra_tok, sizeof extra_tok, "%s", tok);
    gkvt_write_text(tok, "correct horse staple\n", 0600);
    gkvt_serve(f, 1, 1, extra, srv);
    o.timeout_ms = 3000;
    /* the right token */
    NET_OK(gkv_client_connect(&c, f->cfg, "correct horse staple", "job", 0, &o));
    NET_OK(gkv_client_close(c));
    /* a wrong one, none */
    assert_int_equal(gkv_client_connect(&c, f->cfg, "battery staple horse", "job", 1, &o),
                     GKV_EPERM);
    assert_null(c);
    assert_non_null(strstr(gkv_net_errmsg(), "wrong token"));
    /* the token as read from a file with its newline: the same secret */
    NET_OK(gkv_client_connect(&c, f->cfg, "correct horse staple\n", "job", 0, &o));
    NET_OK(gkv_client_close(c));
    /* the token file's path instead of its contents: said so */
    assert_int_equal(gkv_client_connect(&c, f->cfg, tok, "job", 1, &o), GKV_EPERM);
    assert_non_null(strstr(gkv_net_errmsg(), "wrong token"));
    assert_non_null(strstr(gkv_net_errmsg(), "the token given is the name of "
                           "a file: pass its contents (gkv_token_load)"));
    assert_int_equal(gkv_client_connect(&c, f->cfg, NULL, "job", 1, &o), GKV_EPERM);
    assert_non_null(strstr(gkv_net_errmsg(), "requires a token"));
    s = gkvt_raw_socket(f->base, 3000);
    sess = raw_handshake(s, NULL, "raw", 0, NULL, NULL, &st);
    assert_int_equal(sess, 0);
    assert_int_equal(st, GKV_EPERM);
    /* a replayed handshake: the nonce is spent */
    sess = raw_handshake(s, "correct horse staple", "raw", 0, replay, &rlen, &st);
    assert_true(sess != 0);
    assert_int_equal(raw_call(s, replay, rlen, &h, pl, sizeof pl, &plen), 0);
    assert_int_equal(h.status, GKV_EPERM);
    raw_error(pl, plen, msg, sizeof msg);
    assert_non_null(strstr(msg, "already used"));
    /* requests need the granted session */
    len = gkvt_raw_msg(b, NET_STATS, 0, 9, NULL, 0);
    assert_int_equal(raw_call(s, b, len, &h, pl, sizeof pl, &plen), 0);
    assert_int_equal(h.status, GKV_EPERM);
    assert_true(h.flags & NET_F_SESSION);
    len = gkvt_raw_msg(b, NET_STATS, sess ^ 1, 10, NULL, 0);
    assert_int_equal(raw_call(s, b, len, &h, pl, sizeof pl, &plen), 0);
    assert_int_equal(h.status, GKV_EPERM);
    len = gkvt_raw_msg(b, NET_STATS, sess, 11, NULL, 0);
    assert_int_equal(raw_call(s, b, len, &h, pl, sizeof pl, &plen), 0);
    assert_int_equal(h.status, GKV_OK);
    nn_close(s);
    assert_true(gkvt_file_has(srv[0]->log, "wrong token"));
    assert_true(gkvt_file_has(srv[0]->log, "requires a token and none was given"));
    assert_true(gkvt_file_has(srv[0]->log, "nonce already used"));
    assert_true(gkvt_proc_alive(srv[0]));
}

/* ---- bad input ------------------------------------------------------------------------------ */

static void
expect_error(int s, const void *b, size_t len, gkv_err status, const char *text)
{
    unsigned char pl[4096];
    char msg[1100];
    size_t plen;
    net_hdr h;

    if (raw_call(s, b, len, &h, pl, sizeof pl, &plen) != 0)
        fail_msg("no reply to a bad message (expected '%s')", text);
    assert_int_equal(h.status, status);
    raw_error(pl, plen, msg, sizeof msg);
    if (strstr(msg, text) == NULL)
        fail_msg("error reply '%s' lacks '%s'", msg, text);
}

/* A normal client still gets correct rows. */
static void
still_serves(struct gkvt_job *f)
{
    gkv_client *c = client(f, "probe", 0, NULL, 5000, 0);
    uint64_t ids[3] = {0, 99, 42};
    float got[3 * 16], *want = read_rows(f->st[0], "feat", ids, 3, 64);

    NET_OK(gkv_client_pull(c, "feat", ids, 3, got, sizeof got));
    assert_memory_equal(got, want, sizeof got);
    free(want);
    NET_OK(gkv_client_close(c));
}

/* ---- bad inputs: each refused with its error named, the server serves on */

/* Tensors "feat" (16 wide, 100 rows), "wide" (25000 x 50) and "huge"
 * (750000 x 3) in store 0, one keep-alive server with a 4 MB message
 * limit on it (*srv), and a TCP peer that connects and never speaks, held
 * open until the caller closes the socket returned. */
static int
bad_serve(struct gkvt_job *f, struct gkvt_proc **srv)
{
    const char *extra[] = {"--keep-alive", "--max-msg", "4000000", NULL};
    struct sockaddr_in a = {0};
    int tcp;

    make_tensor(f->st[0], "feat", GKV_F32, 16, 0, 100, GKV_INIT_UNIFORM, 0);
    make_tensor(f->st[0], "wide", GKV_F32, 25000, 0, 50, GKV_INIT_ZEROS, 0);
    make_tensor(f->st[0], "huge", GKV_F32, 750000, 0, 3, GKV_INIT_ZEROS, 0);
    gkvt_serve(f, 1, 1, extra, srv);
    tcp = socket(AF_INET, SOCK_STREAM, 0);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)f->base);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(tcp, (struct sockaddr *)&a, sizeof a), 0);
    still_serves(f);
    return tcp;
}

/* Malformed frames (EPROTO, EVERSION), unknown and unserved request types
 * (EPROTO, ENOTSUP), a pull of rows not held (ERANGE) or past the message
 * limit (EINVAL), a push of the wrong width (ESHAPE): each answered with
 * its error, counted in the server's stats and logged. */
static void
test_bad_requests_are_answered_counted_and_logged(void **state)
{
    struct gkvt_job *f = *state;
    struct gkvt_proc *srv[1];
    static unsigned char b[1 << 20];
    uint64_t x = gkvt_seed() ^ 0x5151, sess;
    unsigned char pl[4096];
    net_wr w;
    gkv_err st;
    size_t len;
    gkv_server_stats ss;
    gkv_client *c;
    int s, tcp = bad_serve(f, srv);

    s = gkvt_raw_socket(f->base, 3000);
    /* truncated: shorter than a header */
    memcpy(b, "GKVN\x01\x00\x04\x00", 8);
    expect_error(s, b, 10, GKV_EPROTO, "shorter than the 48-byte header");
    /* wrong magic, wrong version, a lying length */
    len = gkvt_raw_msg(b, NET_HELLO, 0, 1, NULL, 0);
    b[0] = 'X';
    expect_error(s, b, len, GKV_EPROTO, "bad magic");
    len = gkvt_raw_msg(b, NET_HELLO, 0, 1, NULL, 0);
    b[4] = 9;
    expect_error(s, b, len, GKV_EVERSION, "protocol version 9");
    len = gkvt_raw_msg(b, NET_HELLO, 0, 1, "abcd", 4);
    expect_error(s, b, len - 1, GKV_EPROTO, "4 payload bytes, 3 arrived");
    /* random bytes */
    for (int i = 0; i < 5000; i++)
        b[i] = (unsigned char)tools__splitmix64(&x);
    expect_error(s, b, 5000, GKV_EPROTO, "bad magic");
    /* a reply sent to the server; trailing bytes after a hello */
    len = gkvt_raw_msg(b, NET_HELLO, 0, 1, NULL, 0);
    b[8] = NET_F_REPLY;
    expect_error(s, b, len, GKV_EPROTO, "reply");
    len = gkvt_raw_msg(b, NET_HELLO, 0, 1, "zz", 2);
    expect_error(s, b, len, GKV_EPROTO, "left over");
    /* unknown types, with a valid session */
    sess = raw_handshake(s, NULL, "raw", 0, NULL, NULL, &st);
    assert_true(sess != 0);
    len = gkvt_raw_msg(b, 77, sess, 3, NULL, 0);
    expect_error(s, b, len, GKV_EPROTO, "unknown request type 77");
    len = gkvt_raw_msg(b, NET_SAMPLE, sess, 4, NULL, 0);
    expect_error(s, b, len, GKV_ENOTSUP, "sample: this server serves a store, "
                 "not a graph partition");
    /* a pull of IDs the server does not hold */
    w.p = pl;
    w.cap = sizeof pl;
    w.off = 0;
    {
        uint64_t ids[2] = {5, 100};
        net__enc_pull_req(&w, "feat", ids, NULL, 2);
    }
    len = gkvt_raw_msg(b, NET_PULL, sess, 5, pl, w.off);
    expect_error(s, b, len, GKV_ERANGE, "100");
    /* a pull whose reply would pass the message limit */
    w.off = 0;
    {
        uint64_t ids[50] = {0};
        net__enc_pull_req(&w, "wide", ids, NULL, 50);
    }
    len = gkvt_raw_msg(b, NET_PULL, sess, 6, pl, w.off);
    expect_error(s, b, len, GKV_EINVAL, "message limit");
    /* a push with the wrong row width */
    w.off = 0;
    {
        uint64_t id = 3;
        float row[3] = {1, 2, 3};
        static const double opt[4] = {0};
        net__enc_push_req(&w, "feat", "", 0, opt, sizeof row, &id, row, NULL, 1);
    }
    len = gkvt_raw_msg(b, NET_PUSH, sess, 7, pl, w.off);
    expect_error(s, b, len, GKV_ESHAPE, "rows of 12 bytes, the tensor's rows are 64 bytes");
    still_serves(f);
    nn_close(s);
    /* the silent TCP peer harmed no one; stats counted the rejections */
    close(tcp);
    c = client(f, "probe", 1, NULL, 5000, 0);
    NET_OK(gkv_client_stats(c, 0, &ss));
    /* the graph request to a store server is GKV_ENOTSUP, not a rejection */
    assert_true(ss.rejected >= 8);
    assert_true(ss.errors >= 11);
    NET_OK(gkv_client_close(c));
    assert_true(gkvt_proc_alive(srv[0]));
    assert_true(gkvt_file_has(srv[0]->log, "rejected malformed message"));
}

/* Oversized: over --max-msg, nanomsg drops that peer; the rest go on. */
static void
test_bad_oversized_message_drops_only_that_peer(void **state)
{
    struct gkvt_job *f = *state;
    struct gkvt_proc *srv[1];
    static unsigned char b[1 << 20];
    unsigned char pl[4096];
    net_hdr h;
    gkv_err st;
    size_t len;
    uint64_t sess;
    int s, tcp = bad_serve(f, srv);

    s = gkvt_raw_socket(f->base, 3000);
    sess = raw_handshake(s, NULL, "raw", 0, NULL, NULL, &st);
    assert_true(sess != 0);
    len = gkvt_raw_msg(b, NET_STATS, sess, 8, NULL, 0);
    {
        unsigned char *huge = calloc(1, 5000000);
        int to = 500;
        memcpy(huge, b, len);
        nn_setsockopt(s, NN_SOL_SOCKET, NN_RCVTIMEO, &to, sizeof to);
        assert_int_equal(raw_call(s, huge, 5000000, &h, pl, sizeof pl, &len), -1);
        free(huge);
    }
    nn_close(s);
    still_serves(f);
    close(tcp);
    assert_true(gkvt_proc_alive(srv[0]));
}

/* A client killed in the middle of big requests harms no one. */
static void
test_bad_client_killed_mid_push_harms_no_one(void **state)
{
    struct gkvt_job *f = *state;
    struct gkvt_proc *srv[1], *big;
    int tcp = bad_serve(f, srv);

    big = child(f, "big.log", "bigpush", f->cfg, "big", "0", "1", NULL);
    {
        double t0 = tools__now_s();
        while (!gkvt_file_has(big->log, "pushing") && tools__now_s() - t0 < 10)
            tools__sleep_ms(10);
        tools__sleep_ms(200);
    }
    gkvt_proc_kill(big);
    still_serves(f);
    close(tcp);
    assert_true(gkvt_proc_alive(srv[0]));
}

/* Rows wider than the client's preferred 2 MiB message go one per
 * message, under the server's 4 MB limit. */
static void
test_rows_wider_than_a_message_go_one_per_message(void **state)
{
    struct gkvt_job *f = *state;
    struct gkvt_proc *srv[1];
    uint64_t hid[3] = {2, 0, 2};
    float *rows = malloc(3 * 3000000), *back = malloc(3 * 3000000);
    gkv_client *cw;
    int tcp = bad_serve(f, srv);

    cw = client(f, "wide", 0, NULL, 10000, 0);
    for (size_t i = 0; i < 3 * 750000; i++)
        rows[i] = (float)(i % 1000) + (i >= 750000 ? 0.5f : 0.0f);
    NET_OK(gkv_client_push(cw, "huge", hid, 2, rows, 2 * 3000000, NULL));
    NET_OK(gkv_client_pull(cw, "huge", hid, 3, back, 3 * 3000000));
    assert_memory_equal(back, rows, 3000000);                     /* id 2 */
    assert_memory_equal(back + 750000, rows + 750000, 3000000);   /* id 0 */
    assert_memory_equal(back + 1500000, rows, 3000000);           /* id 2 */
    NET_OK(gkv_client_close(cw));
    free(rows);
    free(back);
    close(tcp);
    assert_true(gkvt_proc_alive(srv[0]));
}

/* ---- two machines ------------------------------------------------------------------------------ */

/* Creates 'name' through c: f32 rows of 'width', rows 0..99, uniform. */
static void
client_make(gkv_client *c, const char *name, uint64_t width, uint64_t seed)
{
    gkv_tensor_spec sp;

    memset(&sp, 0, sizeof sp);
    sp.dtype = GKV_F32;
    sp.ndim = 1;
    sp.shape[0] = width;
    sp.hi = 100;
    sp.init = GKV_INIT_UNIFORM;
    sp.a = -1;
    sp.b = 1;
    sp.seed = seed;
    NET_OK(gkv_client_create(c, name, &sp, -1));
}

/* Another client replaced a tensor with one of another width. The next
 * pull failed with "malformed or oversized message" (EPROTO) and every
 * later one with ESHAPE against the old schema until an explicit
 * refresh. Now the shape error says what changed and the next call uses
 * the new schema; a push the same. Local reads too. */
static void
test_replaced_tensor_schema(void **state)
{
    struct gkvt_job *f = *state;
    struct gkvt_proc *srv[1];
    const char *extra[] = {"--create", "--keep-alive", NULL};
    gkv_client *a, *b;
    uint64_t ids[3] = {7, 0, 99};
    float r4[3 * 4], r8[3 * 8], w8[3 * 8], one[3 * 4];

    gkvt_serve(f, 1, 1, extra, srv);
    for (unsigned flags = 0; flags < 2; flags++) {
        unsigned fl = flags ? GKV_CLIENT_LOCAL_READ : 0;
        a = client(f, "job", 0, NULL, 5000, fl);
        b = client(f, "job", 1, NULL, 5000, 0);
        client_make(b, "t", 4, 1);
        NET_OK(gkv_client_pull(a, "t", ids, 3, r4, sizeof r4));
        NET_OK(gkv_client_delete(b, "t"));
        client_make(b, "t", 8, 2);
        assert_int_equal(gkv_client_pull(a, "t", ids, 3, r4, sizeof r4), GKV_ESHAPE);
        if (!flags && strstr(gkv_net_errmsg(), "tensor 't' has 32-byte rows on "
                             "this server, 16-byte in this client's schema") == NULL)
            fail_msg("the error says: %s", gkv_net_errmsg());
        NET_OK(gkv_client_pull(a, "t", ids, 3, r8, sizeof r8));
        NET_OK(gkv_client_pull(b, "t", ids, 3, w8, sizeof w8));
        assert_memory_equal(r8, w8, sizeof r8);
        /* and back to 4 wide: a push of 8-wide rows is refused, then a
         * 4-wide one lands */
        NET_OK(gkv_client_delete(b, "t"));
        client_make(b, "t", 4, 3);
        assert_int_equal(gkv_client_push(a, "t", ids, 3, w8, sizeof w8, NULL),
                         GKV_ESHAPE);
        for (int i = 0; i < 12; i++)
            one[i] = (float)i;
        NET_OK(gkv_client_push(a, "t", ids, 3, one, sizeof one, NULL));
        NET_OK(gkv_client_pull(b, "t", ids, 3, r4, sizeof r4));
        assert_memory_equal(r4, one, sizeof r4);
        NET_OK(gkv_client_delete(b, "t"));
        NET_OK(gkv_client_close(a));
        NET_OK(gkv_client_close(b));
    }
}

/* A client with a small max_msg set its receive limit from it, so a
 * handshake reply larger than that (the schema of many tensors, a large
 * partition config) was dropped by nanomsg and the connect timed out.
 * 1,500 tensors of long names make a schema of about 200 KB, more than
 * the 16 KiB limit and the 64 KiB of slack beside it. */
static void
test_small_max_msg_big_schema(void **state)
{
    struct gkvt_job *f = *state;
    struct gkvt_proc *srv[1];
    gkv_client *c = NULL;
    gkv_client_opts o = {0};
    gkv_tensor_desc *d;
    gkv_store *s;
    size_t n;

    GKVT_OK(gkv_store_open(&s, f->st[0], GKV_CREATE, NULL));
    for (int i = 0; i < 1500; i++) {
        gkv_tensor_spec sp;
        char name[128];
        memset(&sp, 0, sizeof sp);
        sp.dtype = GKV_F32;
        sp.ndim = 1;
        sp.shape[0] = 4;
        sp.hi = 10;
        snprintf(name, sizeof name, "node/a_rather_long_node_type_name/"
                 "a_rather_long_feature_name_%04d", i);
        GKVT_OK(gkv_tensor_create(s, name, &sp));
    }
    gkv_store_close(s);
    gkvt_serve(f, 1, 1, NULL, srv);
    o.timeout_ms = 5000;
    o.group_size = 1;
    o.max_msg = 16384;
    if (gkv_client_connect(&c, f->cfg, NULL, "job", 0, &o) != GKV_OK)
        fail_msg("connect with max_msg 16384: %s", gkv_net_errmsg());
    NET_OK(gkv_client_tensor_list(c, &d, &n));
    assert_int_equal(n, 1500);
    gkv_free(d);
    NET_OK(gkv_client_close(c));
}

/* A client of one address (kvctl --server) reported every server as
 * "machine 0, server 0 of 1", and named it so in its errors; it now says
 * what the server said at its handshake. */
static void
test_addr_client_identity(void **state)
{
    struct gkvt_job *f = *state;
    struct gkvt_proc *srv[4];
    gkv_client_opts o = {0};
    gkv_server_info si;
    gkv_client *c = NULL;
    gkv_push_args pa = {0};
    float row[4] = {0};
    uint64_t id = 5;
    char addr[64], want[128];

    for (int m = 0; m < 2; m++)
        make_tensor(f->st[m], "t", GKV_F32, 4, 0, 10, GKV_INIT_ZEROS, 0);
    gkvt_serve(f, 2, 2, NULL, srv);
    o.timeout_ms = 5000;
    o.flags = GKV_CLIENT_OBSERVER;
    snprintf(addr, sizeof addr, "127.0.0.1:%d", f->base + 8 + 1);
    NET_OK(gkv_client_connect_addr(&c, addr, NULL, "tools", 0, &o));
    assert_int_equal(gkv_client_nservers(c), 1);
    NET_OK(gkv_client_server_info(c, 0, &si));
    assert_int_equal(si.machine, 1);
    assert_int_equal(si.server_id, 1);
    assert_int_equal(si.num_servers, 2);
    assert_int_equal(si.pid, (uint32_t)srv[3]->pid);
    /* an error from the server names it as itself */
    pa.handler = "no-such-handler";
    assert_int_equal(gkv_client_push(c, "t", &id, 1, row, sizeof row, &pa),
                     GKV_EHANDLER);
    snprintf(want, sizeof want, "server %s (machine 1, server 1): ", addr);
    if (strstr(gkv_net_errmsg(), want) == NULL)
        fail_msg("the error says '%s'; want '%s'", gkv_net_errmsg(), want);
    NET_OK(gkv_client_close(c));
}

static void
test_two_machines(void **state)
{
    struct gkvt_job *f = *state;
    struct gkvt_proc *srv[2];
    const char *extra[] = {"--create", NULL};
    gkv_client *c;
    gkv_tensor_spec sp;
    gkv_tensor_desc d;
    gkv_store *s, *ref;
    uint64_t x = gkvt_seed() ^ 77, ids[700];
    float got[700 * 4], want[700 * 4], add[700 * 4];
    char refdir[4300];
    gkv_push_args pa = {0};

    gkvt_serve(f, 2, 1, extra, srv);
    c = client(f, "job", 0, NULL, 5000, 0);
    assert_int_equal(gkv_client_nservers(c), 2);
    memset(&sp, 0, sizeof sp);
    sp.dtype = GKV_F32;
    sp.ndim = 1;
    sp.shape[0] = 4;
    sp.lo = 0;
    sp.hi = 1001;
    sp.init = GKV_INIT_UNIFORM;
    sp.a = -1;
    sp.b = 1;
    sp.seed = 11;
    NET_OK(gkv_client_create(c, "split", &sp, -1));
    NET_OK(gkv_client_tensor_info(c, "split", &d));
    assert_int_equal(d.lo, 0);
    assert_int_equal(d.hi, 1001);
    /* each machine holds its slice */
    GKVT_OK(gkv_store_open(&s, f->st[0], GKV_RDONLY, NULL));
    GKVT_OK(gkv_tensor_info(s, NULL, "split", &d));
    assert_int_equal(d.lo, 0);
    assert_int_equal(d.hi, 500);
    gkv_store_close(s);
    GKVT_OK(gkv_store_open(&s, f->st[1], GKV_RDONLY, NULL));
    GKVT_OK(gkv_tensor_info(s, NULL, "split", &d));
    assert_int_equal(d.lo, 500);
    assert_int_equal(d.hi, 1001);
    gkv_store_close(s);
    /* a pull across both equals one store created with the same spec */
    snprintf(refdir, sizeof refdir, "%s/ref", f->dir);
    GKVT_OK(gkv_store_open(&ref, refdir, GKV_CREATE, NULL));
    GKVT_OK(gkv_tensor_create(ref, "split", &sp));
    for (int i = 0; i < 700; i++)
        ids[i] = tools__splitmix64(&x) % 1001;
    NET_OK(gkv_client_pull(c, "split", ids, 700, got, sizeof got));
    GKVT_OK(gkv_tensor_pull(ref, NULL, "split", ids, 700, want, sizeof want));
    assert_memory_equal(got, want, sizeof got);
    /* adds across both */
    for (int i = 0; i < 700 * 4; i++)
        add[i] = (float)(i % 7);
    pa.handler = "add";
    NET_OK(gkv_client_push(c, "split", ids, 700, add, sizeof add, &pa));
    GKVT_OK(gkv_tensor_push(ref, "split", ids, 700, add, sizeof add, &pa));
    NET_OK(gkv_client_pull(c, "split", ids, 700, got, sizeof got));
    GKVT_OK(gkv_tensor_pull(ref, NULL, "split", ids, 700, want, sizeof want));
    assert_memory_equal(got, want, sizeof got);
    /* a client reading both machines' stores in-process (both are on this
     * host): the IDs are mixed, so each machine's rows are scattered back
     * into request order; no pull reaches a server */
    {
        gkv_client *cl = client(f, "job", 1, NULL, 5000, GKV_CLIENT_LOCAL_READ);
        gkv_server_stats before[2], after[2];
        uint64_t bad[2] = {ids[0], 1001};

        for (size_t m = 0; m < 2; m++)
            NET_OK(gkv_client_stats(c, m, &before[m]));
        memset(got, 0, sizeof got);
        NET_OK(gkv_client_pull(cl, "split", ids, 700, got, sizeof got));
        assert_memory_equal(got, want, sizeof got);
        for (size_t m = 0; m < 2; m++) {
            NET_OK(gkv_client_stats(c, m, &after[m]));
            assert_int_equal(after[m].pulls, before[m].pulls);
        }
        /* an ID outside every slice is refused, naming it */
        assert_int_equal(gkv_client_pull(cl, "split", bad, 2, got, 2 * 16),
                         GKV_ERANGE);
        assert_non_null(strstr(gkv_net_errmsg(), "1001"));
        NET_OK(gkv_client_close(cl));
    }
    gkv_store_close(ref);
    /* on one machine only */
    sp.hi = 10;
    NET_OK(gkv_client_create(c, "only1", &sp, 1));
    NET_OK(gkv_client_tensor_info(c, "only1", &d));
    assert_int_equal(d.hi, 10);
    NET_OK(gkv_client_delete(c, "split"));
    assert_int_equal(gkv_client_tensor_info(c, "split", &d), GKV_ENOTFOUND);
    NET_OK(gkv_client_close(c));
    assert_true(gkvt_proc_wait(srv[0], 5000));
    assert_true(gkvt_proc_wait(srv[1], 5000));
}

static void
find_programs(void)
{
    snprintf(g_server_path, sizeof g_server_path, "%s", gkvt_prog("gkv-server"));
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int
main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        T(test_server_usage),
        T(test_kv_requests),
        T(test_persistent_two_jobs),
        T(test_concurrent_add),
        T(test_kill9_and_restart),
        T(test_sigterm_syncs),
        T(test_writeback_server),
        T(test_barrier_and_lease),
        T(test_token),
        T(test_bad_requests_are_answered_counted_and_logged),
        T(test_bad_oversized_message_drops_only_that_peer),
        T(test_bad_client_killed_mid_push_harms_no_one),
        T(test_rows_wider_than_a_message_go_one_per_message),
        T(test_two_machines),
        T(test_small_max_msg_big_schema),
        T(test_addr_client_identity),
        T(test_replaced_tensor_schema),
    };

    if (argc >= 2 && strcmp(argv[1], "--child") == 0)
        return child_main(argc - 2, argv + 2);
    signal(SIGPIPE, SIG_IGN);
    find_programs();
    return cmocka_run_group_tests_name("net", tests, NULL, NULL);
}
