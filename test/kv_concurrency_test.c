/* kv_concurrency_test.c - readers and a writer at once, as separate
 * processes (each opening the store itself) and as threads sharing one
 * handle. The writer sets every row of tensor 'gen' to generation g in one
 * call, g = 1..N; every reader snapshot must see one generation across all
 * rows (no torn reads: a pull of random rows, a read of the whole range and
 * row views taken in one snapshot agree), and the generations a reader sees
 * never go back. Row i holds {i, g, g, ...}, so a row at the wrong place
 * shows too. The store starts with a 1 MiB map, so it grows while readers
 * run (in another process, or under the feet of this one's threads).
 * Last, a store is opened while another process grows its map. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "gkvt.h"

#define LO      1000u
#define HI      21000u     /* IDs [LO, HI): 20,000 rows */
#define NROWS   (HI - LO)
#define W       16u
#define CHUNK   64u        /* rows per chunk: 313 chunks */
#define PULL_MAX 3000u

static const gkv_open_opts small_map = {1u << 20, 0};

/* make soak (GKVT_SOAK=1) runs ten times the generations */
static int
soak(void)
{
    const char *e = getenv("GKVT_SOAK");
    return e != NULL && *e != '\0' && strcmp(e, "0") != 0;
}

#define WORK_MS  (soak() ? 200000.0 : 45000.0)   /* a role's time limit */

/* ---- what a reader checks ----------------------------------------------- */

struct result {
    int ok;
    uint32_t snaps;        /* snapshots taken */
    uint32_t calls;        /* pulls in a one-call snapshot (tx NULL) */
    uint32_t distinct;     /* generation changes seen */
    uint32_t first_g, last_g;
    char err[384];
};

/* Checks rows[0..n) (row k has global ID ids[k], or a + k when ids is
 * NULL): each is {id, g, ..., g} with the same g. Returns 0 and sets *g, or
 * -1 with the first bad row described in err. */
static int
rows_check(const float *rows, const uint64_t *ids, uint64_t a, size_t n,
           uint32_t *g, char *err, size_t errlen)
{
    for (size_t k = 0; k < n; k++) {
        const float *r = rows + k * W;
        uint64_t id = ids ? ids[k] : a + k;

        if (k == 0)
            *g = (uint32_t)r[1];
        if (r[0] != (float)id) {
            snprintf(err, errlen, "row %zu should be ID %llu, holds ID %g", k,
                     (unsigned long long)id, r[0]);
            return -1;
        }
        for (size_t j = 1; j < W; j++)
            if (r[j] != (float)*g) {
                snprintf(err, errlen, "torn read: row %zu (ID %llu) element "
                         "%zu is generation %g, row 0 is %u", k,
                         (unsigned long long)id, j, r[j], *g);
                return -1;
            }
    }
    return 0;
}

#define RFAIL(...) do { snprintf(res->err, sizeof res->err, __VA_ARGS__); \
                        goto out; } while (0)

/* Takes snapshots until one shows generation final_g, or the deadline. */
static void
reader_run(gkv_store *s, uint64_t seed, uint32_t final_g, double deadline,
           struct result *res)
{
    uint64_t *ids = malloc(PULL_MAX * sizeof *ids);
    float *pulled = malloc(PULL_MAX * W * sizeof *pulled);
    float *all = malloc(NROWS * W * sizeof *all);
    char why[256];
    gkv_txn *tx = NULL;
    uint32_t last = 0, g0, g1, g2;
    gkv_err rc;

    memset(res, 0, sizeof *res);
    while (last < final_g) {
        size_t m = 1 + tools__splitmix64(&seed) % PULL_MAX;

        if (tools__now_s() * 1e3 > deadline)
            RFAIL("timed out at generation %u of %u", last, final_g);
        for (size_t k = 0; k < m; k++)
            ids[k] = LO + tools__splitmix64(&seed) % NROWS;
        if ((rc = gkv_txn_begin(s, &tx)) != GKV_OK)
            RFAIL("txn_begin: %s (%s)", gkv_err_name(rc), gkv_store_errmsg(s));
        if ((rc = gkv_tensor_pull(s, tx, "gen", ids, m, pulled,
                                  m * W * sizeof *pulled)) != GKV_OK)
            RFAIL("pull: %s (%s)", gkv_err_name(rc), gkv_store_errmsg(s));
        if (rows_check(pulled, ids, 0, m, &g0, why, sizeof why) != 0)
            RFAIL("snapshot %u, pull of %zu rows: %s", res->snaps, m, why);
        if ((rc = gkv_tensor_read(s, tx, "gen", LO, HI, all,
                                  NROWS * W * sizeof *all)) != GKV_OK)
            RFAIL("read: %s (%s)", gkv_err_name(rc), gkv_store_errmsg(s));
        if (rows_check(all, NULL, LO, NROWS, &g1, why, sizeof why) != 0)
            RFAIL("snapshot %u, read of all rows: %s", res->snaps, why);
        if (g1 != g0)
            RFAIL("snapshot %u: the pull saw generation %u, the read of the "
                  "same snapshot %u", res->snaps, g0, g1);
        for (int k = 0; k < 4; k++) {
            uint64_t id = LO + tools__splitmix64(&seed) % NROWS;
            const void *view;
            float row[W];

            if ((rc = gkv_row_view(tx, "gen", id, &view)) != GKV_OK)
                RFAIL("row_view: %s (%s)", gkv_err_name(rc), gkv_store_errmsg(s));
            memcpy(row, view, sizeof row);
            if (rows_check(row, &id, 0, 1, &g2, why, sizeof why) != 0 || g2 != g0)
                RFAIL("snapshot %u: row view of ID %llu: generation %u, the "
                      "snapshot's %u %s", res->snaps, (unsigned long long)id,
                      g2, g0, why);
        }
        gkv_txn_end(tx);
        tx = NULL;
        if (g0 < last)
            RFAIL("snapshot %u went back from generation %u to %u", res->snaps,
                  last, g0);
        if (res->snaps == 0)
            res->first_g = g0;
        res->distinct += g0 != last || res->snaps == 0;
        last = g0;
        res->snaps++;
        if (res->snaps % 3 == 0) {
            /* a pull without a txn is a snapshot of its own */
            if ((rc = gkv_tensor_pull(s, NULL, "gen", ids, m, pulled,
                                      m * W * sizeof *pulled)) != GKV_OK)
                RFAIL("pull: %s (%s)", gkv_err_name(rc), gkv_store_errmsg(s));
            if (rows_check(pulled, ids, 0, m, &g2, why, sizeof why) != 0)
                RFAIL("one-call pull of %zu rows: %s", m, why);
            if (g2 < last)
                RFAIL("one-call pull went back from generation %u to %u",
                      last, g2);
            res->distinct += g2 != last;
            last = g2;
            res->calls++;
        }
    }
    res->ok = 1;
out:
    gkv_txn_end(tx);
    res->last_g = last;
    free(ids);
    free(pulled);
    free(all);
}

/* Sets every row to generation g for g = 1..final_g, one call each: a push
 * of all IDs in a shuffled order, or (every third) a range write. */
static void
writer_run(gkv_store *s, uint64_t seed, uint32_t final_g, double deadline,
           struct result *res)
{
    uint64_t *perm = malloc(NROWS * sizeof *perm);
    float *rows = malloc(NROWS * W * sizeof *rows);
    gkv_err rc;

    memset(res, 0, sizeof *res);
    for (uint64_t k = 0; k < NROWS; k++)
        perm[k] = LO + k;
    for (uint32_t g = 1; g <= final_g; g++) {
        int ranged = g % 3 == 0;

        if (tools__now_s() * 1e3 > deadline)
            RFAIL("timed out at generation %u of %u", g, final_g);
        if (!ranged)
            for (uint64_t k = NROWS - 1; k > 0; k--) {
                uint64_t j = tools__splitmix64(&seed) % (k + 1), t = perm[k];
                perm[k] = perm[j];
                perm[j] = t;
            }
        for (uint64_t k = 0; k < NROWS; k++) {
            rows[k * W] = (float)(ranged ? LO + k : perm[k]);
            for (size_t j = 1; j < W; j++)
                rows[k * W + j] = (float)g;
        }
        rc = ranged ? gkv_tensor_write(s, "gen", LO, HI, rows, NROWS * W * 4)
                    : gkv_tensor_push(s, "gen", perm, NROWS, rows, NROWS * W * 4,
                                      NULL);
        if (rc != GKV_OK)
            RFAIL("generation %u: %s (%s)", g, gkv_err_name(rc),
                  gkv_store_errmsg(s));
        res->last_g = g;
    }
    if ((rc = gkv_store_verify(s, NULL, NULL)) != GKV_OK)
        RFAIL("verify: %s (%s)", gkv_err_name(rc), gkv_store_errmsg(s));
    res->ok = 1;
out:
    free(perm);
    free(rows);
}

/* ---- fixture ---------------------------------------------------------------- */

#define MAXKIDS 4

struct fx {
    char *dir;
    char *dir2;            /* a second store, for a test that needs one */
    pid_t kids[MAXKIDS];   /* live children, killed and reaped by teardown */
    int hung;              /* a thread never came back: leave the store be */
};

static int teardown(void **state);

static int
setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    float *rows = malloc(NROWS * W * sizeof *rows);
    gkv_tensor_spec sp;
    gkv_store *s;
    int rc = -1;

    (void)gkvt_seed();
    memset(&sp, 0, sizeof sp);
    sp.dtype = GKV_F32;
    sp.ndim = 1;
    sp.shape[0] = W;
    sp.lo = LO;
    sp.hi = HI;
    sp.chunk_rows = CHUNK;
    for (uint64_t k = 0; k < NROWS; k++) {
        rows[k * W] = (float)(LO + k);
        for (size_t j = 1; j < W; j++)
            rows[k * W + j] = 0.0f;                /* generation 0 */
    }
    f->dir = gkvt_mkdtemp("conc");
    if (f->dir != NULL &&
        gkv_store_open(&s, f->dir, GKV_CREATE, &small_map) == GKV_OK) {
        if (gkv_tensor_create(s, "gen", &sp) == GKV_OK &&
            gkv_tensor_write(s, "gen", LO, HI, rows, NROWS * W * 4) == GKV_OK)
            rc = 0;
        gkv_store_close(s);
    }
    free(rows);
    *state = f;
    if (rc != 0)
        teardown(state);          /* cmocka runs no teardown after a failed setup */
    return rc;
}

static int
teardown(void **state)
{
    struct fx *f = *state;

    for (int k = 0; k < MAXKIDS; k++)
        if (f->kids[k] > 0) {
            kill(f->kids[k], SIGKILL);
            while (waitpid(f->kids[k], NULL, 0) < 0 && errno == EINTR)
                ;
        }
    if (!f->hung) {
        gkvt_rmtree(f->dir);
        gkvt_rmtree(f->dir2);
        free(f);
    }
    return 0;
}

/* ---- processes ----------------------------------------------------------------- */

enum role { WRITER, READER };

/* Runs in a child: opens the store itself, says so on 'ready', waits for
 * the start signal (EOF on 'go'), runs its role and sends its result on
 * 'out'. (Opening before the start keeps the opens out of the writer's map
 * growth: test_open_while_the_map_grows covers that race.) */
static void
child_main(const char *dir, enum role role, uint64_t seed, uint32_t final_g,
           int ready, int go, int out)
{
    struct result res;
    gkv_store *s;
    gkv_err rc;
    char c = 'r';

    memset(&res, 0, sizeof res);
    if ((rc = gkv_store_open(&s, dir, 0, &small_map)) != GKV_OK) {
        snprintf(res.err, sizeof res.err, "open: %s (%s)", gkv_err_name(rc),
                 gkv_store_errmsg(NULL));
        s = NULL;
    }
    if (write(ready, &c, 1) != 1)
        _exit(2);
    while (read(go, &c, 1) < 0 && errno == EINTR)
        ;
    if (s != NULL) {
        double deadline = tools__now_s() * 1e3 + WORK_MS;
        if (role == WRITER)
            writer_run(s, seed, final_g, deadline, &res);
        else
            reader_run(s, seed, final_g, deadline, &res);
        gkv_store_close(s);
    }
    if (write(out, &res, sizeof res) != (ssize_t)sizeof res)
        _exit(2);
    _exit(res.ok ? 0 : 1);
}

static void
test_processes_two_readers_one_writer(void **state)
{
    struct fx *f = *state;
    const uint32_t final_g = soak() ? 1500 : 150;
    const enum role roles[3] = {WRITER, READER, READER};
    const char *names[3] = {"writer", "reader 1", "reader 2"};
    struct result res[3];
    int go[2], ready[2], out[3][2], status[3], left = 3;
    uint64_t seed = gkvt_seed();
    double t0 = tools__now_s() * 1e3, deadline = t0 + WORK_MS + 15000;

    assert_int_equal(pipe(go), 0);
    assert_int_equal(pipe(ready), 0);
    fflush(NULL);
    for (int k = 0; k < 3; k++) {
        assert_int_equal(pipe(out[k]), 0);
        f->kids[k] = fork();
        assert_true(f->kids[k] >= 0);
        if (f->kids[k] == 0) {
            close(go[1]);
            close(ready[0]);
            close(out[k][0]);
            child_main(f->dir, roles[k], seed + 0x1000 * (uint64_t)k, final_g,
                       ready[1], go[0], out[k][1]);
        }
        close(out[k][1]);
    }
    close(go[0]);
    close(ready[1]);
    for (int k = 0; k < 3; k++) {       /* all have opened the store */
        struct pollfd pf = {ready[0], POLLIN, 0};
        char c;

        if (poll(&pf, 1, 30000) != 1 || read(ready[0], &c, 1) != 1)
            break;                      /* a child died: seen below */
    }
    close(ready[0]);
    close(go[1]);                       /* all start together */
    /* reap them all; past the deadline kill what is left */
    while (left > 0) {
        int st;
        pid_t p = waitpid(-1, &st, WNOHANG);

        if (p > 0) {
            for (int k = 0; k < 3; k++)
                if (f->kids[k] == p) {
                    status[k] = st;
                    f->kids[k] = 0;
                    left--;
                }
            continue;
        }
        if (p < 0 && errno != EINTR)
            break;
        if (tools__now_s() * 1e3 > deadline) {
            for (int k = 0; k < 3; k++)
                if (f->kids[k] > 0)
                    kill(f->kids[k], SIGKILL);
            /* once; the loop reaps them */
            deadline = tools__now_s() * 1e3 + 1e9;
            continue;
        }
        usleep(5000);
    }
    for (int k = 0; k < 3; k++) {
        ssize_t r = read(out[k][0], &res[k], sizeof res[k]);

        close(out[k][0]);
        if (r != (ssize_t)sizeof res[k])
            fail_msg("%s sent no result (status 0x%x; killed at the deadline?) "
                     "(seed %llu)", names[k], status[k], (unsigned long long)seed);
        if (!res[k].ok)
            fail_msg("%s: %s (seed %llu)", names[k], res[k].err,
                     (unsigned long long)seed);
        assert_true(WIFEXITED(status[k]) && WEXITSTATUS(status[k]) == 0);
        assert_int_equal(res[k].last_g, final_g);
    }
    for (int k = 1; k < 3; k++) {
        print_message("  %s: %u snapshots, %u one-call pulls, %u generation "
                      "changes, from %u to %u\n", names[k], res[k].snaps,
                      res[k].calls, res[k].distinct, res[k].first_g,
                      res[k].last_g);
        /* it ran while the writer did, not only after */
        assert_true(res[k].distinct >= 2);
        assert_true(res[k].first_g < final_g);
    }
    print_message("  %.1f s\n", (tools__now_s() * 1e3 - t0) / 1e3);
}

/* ---- opening while another process grows the map ----------------------------
 *
 * LMDB is linked as a shared library and maps the store with mmap() from
 * the C library; defining mmap here puts this version first. Armed, it
 * calls 'mmap_hook' right after the data file is mapped (inside
 * mdb_env_open, read-only and shared; the lock file is mapped writable),
 * which lets another process commit at exactly that moment. Unarmed it is
 * the plain system call. (Exported by hand: the build hides symbols.) */

static void (*mmap_hook)(void *);
static void *mmap_hook_arg;

__attribute__((visibility("default"))) void *
mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    void *p = (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
    void (*hook)(void *) = mmap_hook;

    if (hook != NULL && p != MAP_FAILED && fd >= 0 && prot == PROT_READ &&
        (flags & MAP_SHARED)) {
        mmap_hook = NULL;
        hook(mmap_hook_arg);
    }
    return p;
}

struct grower { int go, done; };

/* In the opener, between mapping and its first transaction: lets the
 * grower commit, and waits for it. */
static void
let_grower_commit(void *arg)
{
    struct grower *g = arg;
    struct pollfd pf = {g->done, POLLIN, 0};
    char c = 'g';

    if (write(g->go, &c, 1) == 1 && poll(&pf, 1, 10000) == 1)
        (void)!read(g->done, &c, 1);
}

/* Opening a store while another process grows its map must work: the
 * opener maps the size the store had, and its first transaction finds
 * pages past that map (it once failed with GKV_EIO, "MDB_MAP_RESIZED":
 * store_init() did not adopt the new size). */
static void
test_open_while_the_map_grows(void **state)
{
    struct fx *f = *state;
    char *dir = f->dir2 = gkvt_mkdtemp("opengrow");
    gkv_tensor_spec sp;
    gkv_store *s;
    struct grower g;
    int go[2], done[2], status;
    gkv_err rc, grc = GKV_OK;
    char msg[512];

    assert_non_null(dir);
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE, &small_map));   /* 1 MiB map */
    gkv_store_close(s);
    assert_int_equal(pipe(go), 0);
    assert_int_equal(pipe(done), 0);
    fflush(NULL);
    f->kids[0] = fork();
    assert_true(f->kids[0] >= 0);
    if (f->kids[0] == 0) {
        /* the grower: opens the store (so the opener below is not the
         * first, which would hold it exclusively while it maps), says 'r';
         * on 'g' writes 4 MB (the map grows) and says 'd' */
        char c;

        close(go[1]);
        close(done[0]);
        memset(&sp, 0, sizeof sp);
        sp.dtype = GKV_F32;
        sp.ndim = 1;
        sp.shape[0] = 64;
        sp.hi = 16384;
        sp.init = GKV_INIT_CONST;
        sp.a = 7;
        if (gkv_store_open(&s, dir, 0, &small_map) != GKV_OK)
            _exit(3);
        if (write(done[1], "r", 1) != 1 || read(go[0], &c, 1) != 1)
            _exit(2);
        if (gkv_tensor_create(s, "big", &sp) != GKV_OK)
            _exit(3);
        gkv_store_close(s);
        _exit(write(done[1], "d", 1) == 1 ? 0 : 2);
    }
    close(go[0]);
    close(done[1]);
    {
        struct pollfd pf = {done[0], POLLIN, 0};
        char c = 0;

        if (poll(&pf, 1, 30000) != 1 || read(done[0], &c, 1) != 1 || c != 'r') {
            kill(f->kids[0], SIGKILL);
            fail_msg("the grower did not open the store");
        }
    }
    g.go = go[1];
    g.done = done[0];
    mmap_hook_arg = &g;
    mmap_hook = let_grower_commit;
    rc = gkv_store_open(&s, dir, 0, &small_map);
    mmap_hook = NULL;
    snprintf(msg, sizeof msg, "%s", gkv_store_errmsg(NULL));
    close(go[1]);
    close(done[0]);
    while (waitpid(f->kids[0], &status, 0) < 0 && errno == EINTR)
        ;
    f->kids[0] = 0;
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    if (rc == GKV_OK) {
        gkv_tensor_desc d;
        float row[64];
        uint64_t id = 16383;

        grc = gkv_tensor_info(s, NULL, "big", &d);
        if (grc == GKV_OK)
            grc = gkv_tensor_pull(s, NULL, "big", &id, 1, row, sizeof row);
        if (grc == GKV_OK && row[63] != 7.0f)
            grc = GKV_ECORRUPT;
        gkv_store_close(s);
    }
    GKVT_OK(grc);
    if (rc != GKV_OK)
        fail_msg("gkv_store_open while another process grew the map: %s (%s)",
                 gkv_err_name(rc), msg);
}

/* ---- threads sharing one handle --------------------------------------------------- */

#define NREADERS 3

struct targ {
    gkv_store *s;
    enum role role;
    uint64_t seed;
    uint32_t final_g;
    double deadline;
    struct result res;
};

static void *
thread_main(void *p)
{
    struct targ *a = p;

    if (a->role == WRITER)
        writer_run(a->s, a->seed, a->final_g, a->deadline, &a->res);
    else
        reader_run(a->s, a->seed, a->final_g, a->deadline, &a->res);
    return NULL;
}

static void
test_threads_share_one_handle(void **state)
{
    struct fx *f = *state;
    struct targ a[1 + NREADERS];
    pthread_t th[1 + NREADERS];
    uint64_t seed = gkvt_seed() ^ 0x7472;
    const uint32_t final_g = soak() ? 1200 : 120;
    double t0 = tools__now_s() * 1e3;
    gkv_store *s;

    GKVT_OK(gkv_store_open(&s, f->dir, 0, &small_map));
    for (int k = 0; k <= NREADERS; k++) {
        a[k] = (struct targ){s, k == 0 ? WRITER : READER,
                             seed + 0x1000 * (uint64_t)k, final_g, t0 + WORK_MS,
                             {0, 0, 0, 0, 0, 0, ""}};
        assert_int_equal(pthread_create(&th[k], NULL, thread_main, &a[k]), 0);
    }
    for (int k = 0; k <= NREADERS; k++) {
        struct timespec dl;

        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_sec += (time_t)(WORK_MS / 1000) + 15;
        if (pthread_timedjoin_np(th[k], NULL, &dl) != 0) {
            f->hung = 1;      /* the store stays open under a stuck thread */
            fail_msg("thread %d did not finish in time (seed %llu)", k,
                     (unsigned long long)seed);
        }
    }
    for (int k = 0; k <= NREADERS; k++) {
        if (!a[k].res.ok)
            fail_msg("%s thread %d: %s (seed %llu)", k ? "reader" : "writer", k,
                     a[k].res.err, (unsigned long long)seed);
        assert_int_equal(a[k].res.last_g, final_g);
        if (k > 0) {
            print_message("  reader thread %d: %u snapshots, %u one-call pulls, "
                          "%u generation changes, from %u\n", k, a[k].res.snaps,
                          a[k].res.calls, a[k].res.distinct, a[k].res.first_g);
            assert_true(a[k].res.distinct >= 2);
        }
    }
    {   /* the map grew while snapshots came and went */
        gkv_store_stat st;
        GKVT_OK(gkv_store_stat_get(s, &st));
        assert_true(st.map_size > (1u << 20));
    }
    GKVT_OK(gkv_store_verify(s, NULL, NULL));
    gkv_store_close(s);
    print_message("  %.1f s\n", (tools__now_s() * 1e3 - t0) / 1e3);
}

/* Several processes create the same new store at once (as the servers of
 * one machine do when started with --create): every one succeeds, and
 * they all see one store. Repeated so the race is really run. */
static void
test_processes_create_one_store(void **state)
{
    enum { KIDS = 6, ROUNDS = 20 };
    char *base = gkvt_mkdtemp("create-race");

    (void)state;
    for (int r = 0; r < ROUNDS; r++) {
        char path[4200];
        pid_t kid[KIDS];
        int go[2], bad = 0;
        gkv_store *s;
        gkv_tensor_desc *list;
        size_t n;

        snprintf(path, sizeof path, "%s/s%d", base, r);
        assert_int_equal(pipe(go), 0);
        for (int k = 0; k < KIDS; k++) {
            kid[k] = fork();
            assert_true(kid[k] >= 0);
            if (kid[k] == 0) {
                char b;
                gkv_tensor_spec sp;
                char name[32];
                close(go[1]);
                if (read(go[0], &b, 1) != 0)
                    _exit(5);
                if (gkv_store_open(&s, path, GKV_CREATE | GKV_NOSYNC, NULL) != GKV_OK) {
                    fprintf(stderr, "kid %d: %s\n", k, gkv_store_errmsg(NULL));
                    _exit(1);
                }
                memset(&sp, 0, sizeof sp);
                sp.dtype = GKV_I32;
                sp.lo = 0;
                sp.hi = 10;
                sp.init = GKV_INIT_CONST;
                sp.a = k;
                snprintf(name, sizeof name, "t%d", k);
                if (gkv_tensor_create(s, name, &sp) != GKV_OK)
                    _exit(2);
                gkv_store_close(s);
                _exit(0);
            }
        }
        close(go[0]);
        close(go[1]);                   /* all start together */
        for (int k = 0; k < KIDS; k++) {
            int st;
            assert_int_equal(waitpid(kid[k], &st, 0), kid[k]);
            bad += !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        }
        assert_int_equal(bad, 0);
        GKVT_OK(gkv_store_open(&s, path, GKV_RDONLY, NULL));
        GKVT_OK(gkv_tensor_list(s, NULL, 0, &list, &n));
        assert_int_equal(n, KIDS);      /* one store holds every kid's tensor */
        for (int k = 0; k < KIDS; k++) {
            int32_t v;
            uint64_t id = 3;
            char name[32];
            snprintf(name, sizeof name, "t%d", k);
            GKVT_OK(gkv_tensor_pull(s, NULL, name, &id, 1, &v, sizeof v));
            assert_int_equal(v, k);
        }
        gkv_free(list);
        gkv_store_close(s);
    }
    gkvt_rmtree(base);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_processes_two_readers_one_writer,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_threads_share_one_handle,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_open_while_the_map_grows,
                                        setup, teardown),
        cmocka_unit_test(test_processes_create_one_store),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
