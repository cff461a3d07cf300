/* net_client_push_test.c - how gkv_client_push splits a push into messages,
 * and what gkv_client_close sends, against real gkv-server processes on
 * loopback (started and stopped by PID; the teardown kills and reaps every
 * process a test started, also after a failed assertion):
 *   - a push too large for one message is cut between the IDs present,
 *     whatever their spread over the tensor's range: clustered IDs are
 *     split too (they were cut by fixed ID buckets over the machine's
 *     span, all of them in one bucket, and the push failed GKV_EINVAL);
 *   - a split push ends exactly as the same push in one gkv_tensor_push:
 *     duplicates (also of an ID with more copies than a piece's share) go
 *     in one message in request order; assign, add and adam compared byte
 *     for byte with an in-process store, over two machines of two servers;
 *   - the copies of one ID that alone pass the message limit fail the push
 *     at once with GKV_EINVAL naming the ID (they went in one unchecked
 *     message, which the server's nanomsg dropped: a GKV_ETIMEDOUT after
 *     the whole timeout), and the connection stays good;
 *   - gkv_client_close sends no LEAVE to a server whose heartbeat was
 *     refused (it restarted): it hand-shook with the new server just to
 *     leave, and a server that does not keep alive then stopped under the
 *     job's other clients.
 *
 * Ports: each test picks a range no one is listening on from a
 * PID-dependent start, and starts over on a fresh range when a server
 * still finds its port taken. GKVT_PORT_BASE fixes the start; GKVT_SEED
 * repeats a run's random pushes.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "gkvt_net.h"

#define MAXPROC 12

/* Every server here makes its store. */
static const char *const g_opts[] = {"--create", "--no-prefault", NULL};

/* ---- servers (gkvt_net.h) ---------------------------------------------- */

static gkv_client *
client(struct gkvt_job *f, uint32_t rank, unsigned flags, uint64_t max_msg)
{
    gkv_client_opts o = {0};

    o.timeout_ms = 20000;
    o.flags = flags;
    o.max_msg = max_msg;
    return gkvt_connect(f->cfg, "job", rank, &o);
}

/* Push messages servers [0, nsrv) applied, and their rows. */
static uint64_t
pushes_of(gkv_client *c, size_t nsrv, uint64_t *rows)
{
    gkv_server_stats ss;
    uint64_t n = 0;

    *rows = 0;
    for (size_t i = 0; i < nsrv; i++) {
        NET_OK(gkv_client_stats(c, i, &ss));
        n += ss.pushes;
        *rows += ss.push_rows;
    }
    return n;
}

static int
setup(void **state)
{
    return gkvt_job_setup(state, sizeof (struct gkvt_job), "netpush", MAXPROC,
                          g_opts, 0);
}

/* Kills and reaps every process the test started; a sanitizer report in
 * any of their logs (SAN= builds) fails the test. */
static int
teardown(void **state)
{
    return gkvt_job_teardown(state);
}

/* ---- clustered IDs are split --------------------------------------------- */

/* IDs packed at the start of a wide range: with the message limit of 64
 * KiB (32 KiB of rows: 2048 rows of 16 bytes) 4096 rows need two messages;
 * by ID range over [0, 1e6) they were all in one. And the same with the
 * default limits (64 MiB a push message): 1.1M rows of 72 bytes into
 * [0, 1e7). */
static void
test_push_clustered_ids(void **state)
{
    struct gkvt_job *f = *state;
    struct gkvt_proc *srv[1];
    const char *extra[] = {"--keep-alive", NULL};
    gkv_tensor_spec sp;
    gkv_client *c, *big;
    size_t n = 4096, nb = 1100000;
    uint64_t *ids = malloc(nb * sizeof *ids), msgs, rows, msgs0, rows0;
    float *in = malloc(nb * 64), *got = malloc(nb * 64);

    assert_non_null(ids);
    assert_non_null(in);
    assert_non_null(got);
    gkvt_serve(f, 1, 1, extra, srv);
    c = client(f, 0, GKV_CLIENT_NO_HEARTBEAT, 65536);
    sp = gkvt_spec_init(GKV_F32, 2, 0, 1000000, GKV_INIT_ZEROS);
    NET_OK(gkv_client_create(c, "t", &sp, -1));
    for (size_t i = 0; i < n; i++) {
        ids[i] = i;
        in[2 * i] = (float)i;
        in[2 * i + 1] = -(float)i;
    }
    NET_OK(gkv_client_push(c, "t", ids, n, in, n * 8, NULL));
    msgs = pushes_of(c, 1, &rows);
    assert_int_equal(msgs, 2);
    assert_int_equal(rows, n);
    NET_OK(gkv_client_pull(c, "t", ids, n, got, n * 8));
    assert_memory_equal(got, in, n * 8);
    /* in reverse order, at the end of the range: the same two messages */
    for (size_t i = 0; i < n; i++)
        ids[i] = 999999 - i;
    NET_OK(gkv_client_push(c, "t", ids, n, in, n * 8, NULL));
    msgs0 = msgs;
    msgs = pushes_of(c, 1, &rows);
    assert_int_equal(msgs - msgs0, 2);
    NET_OK(gkv_client_pull(c, "t", ids, n, got, n * 8));
    assert_memory_equal(got, in, n * 8);

    /* default limits */
    big = client(f, 1, GKV_CLIENT_NO_HEARTBEAT, 0);
    sp = gkvt_spec_init(GKV_F32, 16, 0, 10000000, GKV_INIT_ZEROS);
    NET_OK(gkv_client_create(big, "emb", &sp, -1));
    for (size_t i = 0; i < nb; i++) {
        ids[i] = i;
        for (int j = 0; j < 16; j++)
            in[16 * i + (size_t)j] = (float)(i * 16 + (size_t)j);
    }
    msgs0 = pushes_of(big, 1, &rows0);
    NET_OK(gkv_client_push(big, "emb", ids, nb, in, nb * 64, NULL));
    msgs = pushes_of(big, 1, &rows);
    assert_int_equal(msgs - msgs0, 2);
    assert_int_equal(rows - rows0, nb);
    NET_OK(gkv_client_pull(big, "emb", ids, nb, got, nb * 64));
    assert_memory_equal(got, in, nb * 64);
    NET_OK(gkv_client_close(big));
    NET_OK(gkv_client_close(c));
    free(ids);
    free(in);
    free(got);
}

/* ---- a split push ends as one push --------------------------------------- */

#define SP_HI   200000u      /* two machines: [0, 100000), [100000, 200000) */
#define SP_N    20000u       /* rows a push */
#define SP_HOT  1500u        /* copies of the hot ID: 30000 bytes, fits */

/* ids[0..n): uniform over the range, packed at the start and around the
 * machines' boundary, one hot ID, shuffled; rows random in [-1, 1). */
static void
mixed_push(uint64_t *rng, uint64_t *ids, float *rows, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t r = tools__splitmix64(rng), k = r % 10;
        if (i < SP_HOT)
            ids[i] = 150000;
        else if (k < 4)
            ids[i] = (r >> 8) % SP_HI;
        else if (k < 7)
            ids[i] = SP_HI / 2 - 10 + (r >> 8) % 20;
        else
            ids[i] = (r >> 8) % 3000;
    }
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = (size_t)(tools__splitmix64(rng) % (i + 1));
        uint64_t t = ids[i];
        ids[i] = ids[j];
        ids[j] = t;
    }
    for (size_t i = 0; i < n * 3; i++)
        rows[i] = (float)((double)(tools__splitmix64(rng) >> 11) / 0x1p53 * 2 - 1);
}

/* A push split into many messages (limit 64 KiB: 1638 rows of 20 bytes)
 * over two machines of two servers each, with duplicates in every
 * message: assign, add and adam (duplicates' gradients averaged, and
 * summed with GKV_PUSH_DUPS_SUM: the flag travels) leave every row as the
 * same pushes in one gkv_tensor_push each do in one store, byte for
 * byte. */
static void
test_push_split_same_as_one(void **state)
{
    struct gkvt_job *f = *state;
    struct gkvt_proc *srv[4];
    const char *extra[] = {"--keep-alive", NULL};
    const char *handlers[4] = {"add", NULL, "adam", "adam"};
    uint64_t rng = gkvt_seed(), *ids = malloc(SP_N * sizeof *ids), *all;
    uint64_t msgs, rows;
    float *in = malloc(SP_N * 12), *got = malloc(SP_HI * 12);
    float *want = malloc(SP_HI * 12);
    char ref[4300];
    gkv_tensor_spec sp;
    gkv_store *s;
    gkv_client *c;

    assert_non_null(ids);
    assert_non_null(in);
    assert_non_null(got);
    assert_non_null(want);
    all = malloc(SP_HI * sizeof *all);
    assert_non_null(all);
    for (uint64_t i = 0; i < SP_HI; i++)
        all[i] = i;
    gkvt_serve(f, 2, 2, extra, srv);
    c = client(f, 0, GKV_CLIENT_NO_HEARTBEAT, 65536);
    sp = gkvt_spec_init(GKV_F32, 3, 0, SP_HI, GKV_INIT_UNIFORM);
    NET_OK(gkv_client_create(c, "t", &sp, -1));
    snprintf(ref, sizeof ref, "%s/ref", f->dir);
    GKVT_OK(gkv_store_open(&s, ref, GKV_CREATE, NULL));
    GKVT_OK(gkv_tensor_create(s, "t", &sp));
    for (int round = 0; round < 8; round++) {
        gkv_push_args pa = {0};

        pa.handler = handlers[round % 4];
        pa.lr = 0.1;
        pa.flags = round % 4 == 3 ? GKV_PUSH_DUPS_SUM : 0;
        mixed_push(&rng, ids, in, SP_N);
        NET_OK(gkv_client_push(c, "t", ids, SP_N, in, SP_N * 12, &pa));
        GKVT_OK(gkv_tensor_push(s, "t", ids, SP_N, in, SP_N * 12, &pa));
    }
    /* split: each machine's ~10000 rows in several messages */
    msgs = pushes_of(c, 4, &rows);
    assert_int_equal(rows, 8 * SP_N);
    if (msgs < 8 * 2 * 6)
        fail_msg("8 pushes went in %llu messages", (unsigned long long)msgs);
    NET_OK(gkv_client_pull(c, "t", all, SP_HI, got, SP_HI * 12));
    GKVT_OK(gkv_tensor_pull(s, NULL, "t", all, SP_HI, want, SP_HI * 12));
    for (uint64_t i = 0; i < SP_HI; i++)
        if (memcmp(got + 3 * i, want + 3 * i, 12) != 0)
            fail_msg("row %llu: %.9g %.9g %.9g through the servers, %.9g "
                     "%.9g %.9g in one store", (unsigned long long)i,
                     got[3 * i], got[3 * i + 1], got[3 * i + 2],
                     want[3 * i], want[3 * i + 1], want[3 * i + 2]);
    gkv_store_close(s);
    NET_OK(gkv_client_close(c));
    free(ids);
    free(all);
    free(in);
    free(got);
    free(want);
}

/* Unknown push flags are GKV_EINVAL in the client, before
 * anything is sent (the wire carries 8 bits: 0x100 would go as 0), and
 * nothing changes on the server. */
static void
test_push_unknown_flags(void **state)
{
    struct gkvt_job *f = *state;
    struct gkvt_proc *srv[1];
    const char *extra[] = {"--keep-alive", NULL};
    gkv_push_args pa = {0};
    gkv_tensor_spec sp;
    gkv_client *c;
    uint64_t ids[2] = {1, 1}, msgs, rows;
    float in[4] = {1, 2, 3, 4}, got[2];
    unsigned bad[3] = {0x2, 0x100, 0x101};

    gkvt_serve(f, 1, 1, extra, srv);
    c = client(f, 0, GKV_CLIENT_NO_HEARTBEAT, 0);
    sp = gkvt_spec_init(GKV_F32, 2, 0, 4, GKV_INIT_ZEROS);
    NET_OK(gkv_client_create(c, "t", &sp, -1));
    pa.handler = "sgd";
    pa.lr = 1;
    for (int k = 0; k < 3; k++) {
        pa.flags = bad[k];
        NET_FAILS(gkv_client_push(c, "t", ids, 2, in, sizeof in, &pa),
                  GKV_EINVAL, "unknown push flags");
    }
    msgs = pushes_of(c, 1, &rows);
    assert_int_equal(msgs, 0);
    NET_OK(gkv_client_pull(c, "t", ids, 1, got, sizeof got));
    assert_true(got[0] == 0 && got[1] == 0);
    NET_OK(gkv_client_close(c));
}

/* ---- one ID's copies over the limit -------------------------------------- */

/* The server takes messages of 64 KiB (32 KiB of rows: 2048 rows of 16
 * bytes). 10000 copies of the one row of a one-row tensor cannot be split:
 * GKV_EINVAL at once, naming the ID (they went in one message the
 * server's nanomsg dropped: GKV_ETIMEDOUT after the timeout, and a broken
 * connection). 2000 copies fit, also in a push that is split. */
static void
test_push_one_id_over_limit(void **state)
{
    struct gkvt_job *f = *state;
    struct gkvt_proc *srv[1];
    const char *extra[] = {"--keep-alive", "--max-msg", "65536", NULL};
    gkv_push_args add = {0};
    gkv_tensor_spec sp;
    gkv_client *c;
    size_t n = 10000;
    uint64_t *ids = malloc(n * sizeof *ids), msgs, rows;
    float *in = malloc(n * 8), got[2];
    double t0;

    assert_non_null(ids);
    assert_non_null(in);
    gkvt_serve(f, 1, 1, extra, srv);
    c = client(f, 0, GKV_CLIENT_NO_HEARTBEAT, 0);
    sp = gkvt_spec_init(GKV_F32, 2, 5, 6, GKV_INIT_ZEROS);
    NET_OK(gkv_client_create(c, "one", &sp, -1));
    sp = gkvt_spec_init(GKV_F32, 2, 0, 4000, GKV_INIT_ZEROS);
    NET_OK(gkv_client_create(c, "wide", &sp, -1));
    for (size_t i = 0; i < n; i++) {
        ids[i] = 5;
        in[2 * i] = 1;
        in[2 * i + 1] = 2;
    }
    add.handler = "add";
    t0 = tools__now_s();
    NET_FAILS(gkv_client_push(c, "one", ids, n, in, n * 8, &add), GKV_EINVAL,
              "ID 5 comes 10000 times, 160000 bytes");
    if (tools__now_s() - t0 > 5)
        fail_msg("the refusal took %.1f s", tools__now_s() - t0);
    NET_FAILS(gkv_client_push(c, "wide", ids, n, in, n * 8, &add), GKV_EINVAL,
              "ID 5 comes 10000 times");
    msgs = pushes_of(c, 1, &rows);
    assert_int_equal(msgs, 0);                  /* nothing was sent */
    /* 2000 copies: one message, the connection as good as ever */
    NET_OK(gkv_client_push(c, "one", ids, 2000, in, 2000 * 8, &add));
    NET_OK(gkv_client_pull(c, "one", ids, 1, got, sizeof got));
    assert_true(got[0] == 2000 && got[1] == 4000);
    /* the 2000 copies of ID 5 and every ID of [0, 4000) once: a split
     * push, with ID 5's 2001 copies in one message */
    for (size_t i = 2000; i < 6000; i++)
        ids[i] = (i * 7) % 4000;
    NET_OK(gkv_client_push(c, "wide", ids, 6000, in, 6000 * 8, &add));
    NET_OK(gkv_client_pull(c, "wide", ids, 1, got, sizeof got));
    assert_true(got[0] == 2001 && got[1] == 4002);
    msgs = pushes_of(c, 1, &rows);
    assert_true(msgs >= 3);
    NET_OK(gkv_client_close(c));
    free(ids);
    free(in);
}

/* ---- close after a restart ----------------------------------------------- */

/* A server that does not keep alive restarts under two clients of a job.
 * A's heartbeat is refused by the new server (unknown session); A then
 * closes. It must not hand-shake with the new server just to leave: that
 * server would see every member that joined it gone and stop, and B's
 * next call would find no server. B (no heartbeat) then joins the new
 * server by itself, as the only client it has seen. */
static void
test_close_skips_restarted_server(void **state)
{
    struct gkvt_job *f = *state;
    struct gkvt_proc *srv[1];
    const char *extra[] = {"--heartbeat-timeout", "3000", NULL};
    gkv_server_stats ss;
    gkv_tensor_spec sp;
    gkv_client *a, *b;
    uint64_t id = 3;
    float got[2];
    double end;

    gkvt_serve(f, 1, 1, extra, srv);
    a = client(f, 0, 0, 0);                    /* heartbeat every 1000 ms */
    b = client(f, 1, GKV_CLIENT_NO_HEARTBEAT, 0);
    sp = gkvt_spec_init(GKV_F32, 2, 0, 10, GKV_INIT_ZEROS);
    NET_OK(gkv_client_create(a, "t", &sp, -1));
    gkvt_proc_kill(srv[0]);
    if ((srv[0] = gkvt_server_try(f, 0, 0, extra)) == NULL)
        fail_msg("port %d was taken between the two servers", f->base);
    /* two refused heartbeats: the reply to the first has reached A's
     * heartbeat thread, which marked the connection stale (the thread
     * sends its next round after it has waited up to 1000 ms for that
     * reply, sent at once on loopback) */
    end = tools__now_s() + 15;
    while (gkvt_file_count(srv[0]->log,
                    "heartbeat request with unknown session") < 2) {
        if (tools__now_s() > end)
            fail_msg("A's heartbeat was not refused:\n%s",
                     gkvt_slurp(srv[0]->log));
        tools__sleep_ms(20);
    }
    NET_OK(gkv_client_close(a));
    if (!gkvt_proc_alive(srv[0]))
        fail_msg("the restarted server stopped on A's close:\n%s",
                 gkvt_slurp(srv[0]->log));
    NET_OK(gkv_client_pull(b, "t", &id, 1, got, sizeof got));
    NET_OK(gkv_client_stats(b, 0, &ss));
    assert_int_equal(ss.joined, 1);            /* B only */
    /* B is its last client: B's close stops it */
    NET_OK(gkv_client_close(b));
    if (!gkvt_proc_wait(srv[0], 10000))
        fail_msg("the server did not stop when its last client left:\n%s",
                 gkvt_slurp(srv[0]->log));
}

/* ---- main ---------------------------------------------------------------- */

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_push_clustered_ids, setup, teardown),
        cmocka_unit_test_setup_teardown(test_push_split_same_as_one, setup, teardown),
        cmocka_unit_test_setup_teardown(test_push_one_id_over_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_push_unknown_flags, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_skips_restarted_server, setup, teardown),
    };

    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests_name("net_client_push", tests, NULL, NULL);
}
