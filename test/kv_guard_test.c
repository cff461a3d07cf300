/* kv_guard_test.c - GKV_GUARD's second review (issue 26): what the guard
 * must hold beyond kv_damage_test's sweep.
 *
 * - A fault caught inside a write transaction (in mdb_put, in
 *   mdb_cursor_put) ends in GKV_ECORRUPT with the process alive: the
 *   transaction is left unended (aborting it freed a cursor on the stack
 *   the jump left), this process holds the writer lock (the handle says
 *   so, refuses writes, answers reads, and a reopen here is refused), and
 *   once it exits another process writes again.
 * - Bytes changed in place after the handle's own commits are walked and
 *   refused (a write and a read), not taken as that commit's.
 * - Commits of a thread of this process, read by other threads meanwhile,
 *   cost no structure walk (the guard's count of walks stays).
 * - A SIGBUS handler installed after the guarded open that puts the
 *   previous one back and raise()s (CPython's faulthandler) does not turn
 *   a caught fault into a crash; a guarded open reinstalls the guard's
 *   handler in front of one installed since, which still gets the faults
 *   that are not the guard's.
 *
 * The cases that could kill the process run in a forked child, whose exit
 * status and output say what happened. */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "gkvt.h"
#include "gkvt_mdb.h"
#include "kv/kv_test.h"

#define PSIZE  4096u
#define ROWS   4000u
#define DIM    64u
#define CASE_S 60       /* seconds a child may take (a hang fails) */

/* ---- helpers ------------------------------------------------------------ */

static float
row_val(uint64_t id, unsigned j, int gen)
{
    return (float)(id * 3 + j) + (float)gen * 0.5f;
}

/* A store with tensor "t" (ROWS rows of DIM floats, 8 rows a chunk: a
 * data tree with branch pages), rows of generation 0. */
static void
make_store(const char *dir, unsigned flags)
{
    gkv_store *s;
    gkv_tensor_spec sp = gkvt_spec(GKV_F32, DIM, 0, ROWS);   /* zeros */
    static float rows[ROWS][DIM];
    static uint64_t ids[ROWS];

    sp.chunk_rows = 8;
    for (uint64_t i = 0; i < ROWS; i++) {
        ids[i] = i;
        for (unsigned j = 0; j < DIM; j++)
            rows[i][j] = row_val(i, j, 0);
    }
    assert_int_equal(gkv_store_open(&s, dir, GKV_CREATE | flags, NULL),
                     GKV_OK);
    assert_int_equal(gkv_tensor_create(s, "t", &sp), GKV_OK);
    assert_int_equal(gkv_tensor_push(s, "t", ids, ROWS, rows, sizeof rows,
                                     NULL), GKV_OK);
    gkv_store_close(s);
}

/* Whether row 'id' of "t" reads as generation 'gen'. */
static int
row_is(gkv_store *s, uint64_t id, int gen)
{
    float got[DIM];

    if (gkv_tensor_pull(s, NULL, "t", &id, 1, got, sizeof got) != GKV_OK)
        return 0;
    for (unsigned j = 0; j < DIM; j++)
        if (got[j] != row_val(id, j, gen))
            return 0;
    return 1;
}

static int
push_row(gkv_store *s, uint64_t id, int gen)
{
    float row[DIM];

    for (unsigned j = 0; j < DIM; j++)
        row[j] = row_val(id, j, gen);
    return gkv_tensor_push(s, "t", &id, 1, row, sizeof row, NULL);
}

/* The first leaf page of named database 'name' in data.mdb's newest
 * commit: down the first children from its root. */
static uint64_t
first_leaf_of(const unsigned char *img, const char *name)
{
    uint64_t pg = gkvt_mdb_db_root(img, name);
    uint16_t fl, off;

    memcpy(&fl, img + pg * PSIZE + 10, 2);
    while (fl & 1) {                    /* P_BRANCH: its first child */
        uint16_t lo, hi, f2;

        memcpy(&off, img + pg * PSIZE + 16, 2);
        memcpy(&lo, img + pg * PSIZE + off, 2);
        memcpy(&hi, img + pg * PSIZE + off + 2, 2);
        memcpy(&f2, img + pg * PSIZE + off + 4, 2);
        pg = lo | (uint64_t)hi << 16 | (uint64_t)f2 << 32;
        memcpy(&fl, img + pg * PSIZE + 10, 2);
    }
    return pg;
}

/* Sets fd's atime and mtime a second later than now (so that a read sees
 * a change even within one mtime tick of the last commit); futimens's
 * result. */
static int
mtime_ahead(int fd)
{
    struct timespec ts[2];

    clock_gettime(CLOCK_REALTIME, &ts[1]);
    ts[1].tv_sec += 1;
    ts[0] = ts[1];
    return futimens(fd, ts);
}

/* Sets the first data leaf's mp_lower to 0xfff0 in place, and data.mdb's
 * mtime a second later than now (mtime_ahead). */
static void
damage_data_leaf(const char *dir)
{
    char *p = gkvt_path(dir, "data.mdb");
    size_t len;
    unsigned char *img = gkvt_read_file(p, &len);
    uint64_t pg = first_leaf_of(img, "data");
    uint16_t bad = 0xfff0;
    int fd = open(p, O_RDWR);

    assert_true(pg != 0 && fd >= 0);
    assert_int_equal(pwrite(fd, &bad, 2, (off_t)(pg * PSIZE + 12)), 2);
    assert_int_equal(mtime_ahead(fd), 0);
    close(fd);
    free(img);
}

/* Runs fn(dir, arg) in a child (SIGSEGV and SIGBUS at their defaults, as
 * in a program) under an alarm; its stdout in *out (malloc'd); returns
 * its wait status. */
static int
in_child(void (*fn)(const char *, int), const char *dir, int arg, char **out)
{
    int pfd[2], wst;
    pid_t pid;
    size_t n = 0, cap = 1 << 16;
    ssize_t r;

    assert_int_equal(pipe(pfd), 0);
    fflush(NULL);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(pfd[0]);
        dup2(pfd[1], 1);
        signal(SIGSEGV, SIG_DFL);
        signal(SIGBUS, SIG_DFL);
        alarm(CASE_S);
        fn(dir, arg);
        fflush(stdout);
        _exit(0);
    }
    close(pfd[1]);
    *out = malloc(cap);
    assert_non_null(*out);
    while ((r = read(pfd[0], *out + n, cap - 1 - n)) > 0)
        n += (size_t)r;
    (*out)[n] = 0;
    close(pfd[0]);
    assert_int_equal(waitpid(pid, &wst, 0), pid);
    return wst;
}

static void
expect_exit0(int wst, const char *out, const char *what)
{
    if (WIFSIGNALED(wst))
        fail_msg("%s: died of %s; output:\n%s", what, strsignal(WTERMSIG(wst)),
                 out);
    if (WEXITSTATUS(wst) != 0)
        fail_msg("%s: child exit %d; output:\n%s", what, WEXITSTATUS(wst),
                 out);
}

/* One case: a fresh store, fn(dir, arg) in a child that must exit 0 after
 * printing "alive"; 'what' names the case in a failure. Skipped where the
 * fault handler is not installed (ThreadSanitizer) when 'faults'. */
static void
child_case(void (*fn)(const char *, int), int arg, int faults,
           const char *what)
{
    char *dir, *out;
    int wst;

    if (faults && !KV_GUARD_SIGNALS) {
        skip();
        return;
    }
    dir = gkvt_mkdtemp("guard");
    make_store(dir, 0);
    wst = in_child(fn, dir, arg, &out);
    expect_exit0(wst, out, what);
    assert_non_null(strstr(out, "alive"));
    free(out);
    gkvt_rmtree(dir);
}

/* ---- a fault inside a write transaction --------------------------------- */

static volatile int arm;
static const volatile char *beyond;

/* A compare function that reads past data.mdb's end, inside the map, once
 * armed: SIGBUS inside LMDB's mdb_put, as a changed page would raise. */
static int
faulting_cmp(const MDB_val *a, const MDB_val *b)
{
    size_t n = a->mv_size < b->mv_size ? a->mv_size : b->mv_size;
    int r;

    if (arm) {
        arm = 0;
        (void)*beyond;
    }
    r = memcmp(a->mv_data, b->mv_data, n);
    return r != 0 ? r : (a->mv_size < b->mv_size ? -1 : a->mv_size > b->mv_size);
}

static gkv_err
faulting_put(gkv_store *s, MDB_txn *txn, void *arg)
{
    MDB_val k = {6, "zzzkey"}, d = {4, "abcd"};
    MDB_cursor *c;

    mdb_set_compare(txn, s->st_meta, faulting_cmp);
    arm = 1;
    if (*(int *)arg == 0)
        (void)mdb_put(txn, s->st_meta, &k, &d, 0);
    else if (mdb_cursor_open(txn, s->st_meta, &c) == 0)
        (void)mdb_cursor_put(c, &k, &d, 0);
    printf("not caught\n");
    return GKV_OK;
}

static void
write_fault_child(const char *dir, int how)
{
    gkv_store *s, *s2;
    gkv_err rc;

    if (gkv_store_open(&s, dir, GKV_GUARD, NULL) != GKV_OK)
        _exit(3);
    beyond = (const char *)s->st_map_hi - PSIZE;   /* past the file's end */
    rc = kv__write(s, faulting_put, &how);
    printf("write: %d %s\n", rc, gkv_store_errmsg(s));
    if (rc != GKV_ECORRUPT || s->st_gcaught != 1)
        _exit(4);
    if (!gkv_store_writer_held(s) ||
        strstr(gkv_store_errmsg(s), "writer lock") == NULL)
        _exit(5);
    /* reads answer; writes are refused */
    if (!row_is(s, 7, 0) || !row_is(s, ROWS - 1, 0))
        _exit(6);
    rc = push_row(s, 7, 1);
    printf("push: %d %s\n", rc, gkv_store_errmsg(s));
    if (rc != GKV_ECORRUPT)
        _exit(7);
    gkv_store_close(s);
    rc = gkv_store_open(&s2, dir, GKV_GUARD, NULL);
    printf("reopen: %d %s\n", rc, gkv_store_errmsg(NULL));
    if (rc != GKV_ECORRUPT ||
        strstr(gkv_store_errmsg(NULL), "writer lock") == NULL)
        _exit(8);
    printf("alive\n");
}

static void
test_write_fault_left_unended(void **state)
{
    (void)state;
    if (!KV_GUARD_SIGNALS) {
        skip();                 /* ThreadSanitizer: no fault handler */
        return;
    }
    for (int how = 0; how < 2; how++) {
        char *dir = gkvt_mkdtemp("guardw"), *out;
        gkv_store *s;
        int wst;

        make_store(dir, 0);
        wst = in_child(write_fault_child, dir, how, &out);
        expect_exit0(wst, out, how == 0 ? "a fault inside mdb_put"
                                        : "a fault inside mdb_cursor_put");
        assert_non_null(strstr(out, "alive"));
        free(out);
        /* the child is gone: its writer lock passed on */
        assert_int_equal(gkv_store_open(&s, dir, GKV_GUARD, NULL), GKV_OK);
        assert_int_equal(gkv_store_writer_held(s), 0);
        assert_int_equal(push_row(s, 7, 2), GKV_OK);
        assert_true(row_is(s, 7, 2));
        assert_true(row_is(s, 8, 0));
        gkv_store_close(s);
        gkvt_rmtree(dir);
    }
}

/* After a fault inside a write, a header page claiming a newer commit
 * (the older one's transaction number raised in place) makes a read's
 * snapshot look behind the disk: the repair (a write transaction's begin)
 * must not run, it would wait for ever on the writer lock this process
 * holds. The read ends (a right row or GKV_ECORRUPT). */
static void
lag_after_write_fault_child(const char *dir, int how)
{
    gkv_store *s;
    char *p = gkvt_path(dir, "data.mdb");
    unsigned char hdr[2 * PSIZE];
    uint64_t t0, t1, v;
    off_t at;
    gkv_err rc;
    int fd;

    if (gkv_store_open(&s, dir, GKV_GUARD, NULL) != GKV_OK)
        _exit(3);
    beyond = (const char *)s->st_map_hi - PSIZE;
    if (kv__write(s, faulting_put, &how) != GKV_ECORRUPT ||
        !gkv_store_writer_held(s))
        _exit(4);
    if ((fd = open(p, O_RDWR)) < 0 ||
        pread(fd, hdr, sizeof hdr, 0) != (ssize_t)sizeof hdr)
        _exit(5);
    t0 = gkvt_mdb_u64(hdr, 144);
    t1 = gkvt_mdb_u64(hdr, PSIZE + 144);
    at = t0 < t1 ? 0 : PSIZE;               /* the older header page */
    v = ((t0 > t1 ? t0 : t1) + 1000) | 1;
    v -= at == 0;                           /* its parity kept */
    if (pwrite(fd, &v, 8, at + 144) != 8 || mtime_ahead(fd) != 0)
        _exit(6);
    close(fd);
    {
        uint64_t id = 7;
        float got[DIM];

        rc = gkv_tensor_pull(s, NULL, "t", &id, 1, got, sizeof got);
        printf("pull: %d %s\n", rc, rc != GKV_OK ? gkv_store_errmsg(s) : "");
        if (rc == GKV_OK && got[1] != row_val(7, 1, 0))
            _exit(7);
        if (rc != GKV_OK && rc != GKV_ECORRUPT)
            _exit(8);
    }
    printf("alive\n");
}

static void
test_lag_after_write_fault(void **state)
{
    (void)state;
    child_case(lag_after_write_fault_child, 0, 1, "a read that finds its "
               "snapshot behind after a fault inside a write");
}

/* ---- gkv-server's fail-stop ---------------------------------------------- */

/* A server whose store handle holds the writer lock after a fault inside
 * a write (st_wheld, as kv__guard_caught_write leaves it) stops by itself:
 * gkv_server_run returns GKV_ECORRUPT (gkv-server then exits 1) and the
 * log says why. */
static void
failstop_child(const char *dir, int port)
{
    char cfg[4200], logp[4200], text[64];
    gkv_server_opts o;
    gkv_server *srv;
    FILE *log;
    gkv_err rc;

    snprintf(cfg, sizeof cfg, "%s/ip.cfg", dir);
    snprintf(logp, sizeof logp, "%s/server.log", dir);
    snprintf(text, sizeof text, "127.0.0.1 %d\n", port);
    gkvt_write_text(cfg, text, 0644);
    if ((log = fopen(logp, "w")) == NULL)
        _exit(3);
    memset(&o, 0, sizeof o);
    o.store = dir;
    o.ip_config = cfg;
    o.machine = 0;
    o.flags = GKV_SERVER_KEEP_ALIVE;
    o.log = log;
    if (gkv_server_open(&srv, &o) != GKV_OK) {
        printf("open: %s\n", gkv_net_errmsg());
        _exit(4);
    }
    __atomic_store_n(&gkv_server_store(srv)->st_wheld, 1, __ATOMIC_RELEASE);
    rc = gkv_server_run(srv);
    printf("run: %d %s\n", rc, gkv_net_errmsg());
    fclose(log);
    if (rc != GKV_ECORRUPT || !gkvt_file_has(logp, "stopping: store damaged: "
                                             "a fault inside a write"))
        _exit(5);
    printf("alive\n");
}

static void
test_server_fail_stop(void **state)
{
    (void)state;
    child_case(failstop_child, gkvt_port_base(1), 0, "a server whose store "
               "holds the writer lock");
}

/* ---- a fault in verify's cursor walk ------------------------------------ */

#define VERIFIES 200

/* gkv_store_verify of "t" with the data tree's compare function faulting
 * (in the map) inside its cursor walk, VERIFIES times: each is caught, and
 * the cursor it jumped over is closed (before, each leaked one). Prints
 * the heap's growth over the loop. */
static void
verify_fault_child(const char *dir, int unused)
{
    gkv_store *s;
    MDB_txn *txn;
    size_t before = 0;

    (void)unused;
    if (gkv_store_open(&s, dir, GKV_GUARD, NULL) != GKV_OK)
        _exit(3);
    beyond = (const char *)s->st_map_hi - PSIZE;
    /* a named database's compare function is the environment's */
    if (mdb_txn_begin(s->st_env, NULL, MDB_RDONLY, &txn) != 0)
        _exit(4);
    mdb_set_compare(txn, s->st_data, faulting_cmp);
    mdb_txn_abort(txn);
    for (int i = 0; i < VERIFIES + 5; i++) {
        if (i == 5)
            before = mallinfo2().uordblks;      /* after a warm-up */
        arm = 1;
        if (gkv_store_verify(s, "t", NULL) != GKV_ECORRUPT || arm)
            _exit(5);
    }
    printf("caught %llu, heap grew %zu bytes\n",
           (unsigned long long)s->st_gcaught, mallinfo2().uordblks - before);
    fflush(stdout);
    if (s->st_gcaught != VERIFIES + 5)
        _exit(6);
    if (mallinfo2().uordblks - before > VERIFIES * 32)
        _exit(7);
    printf("alive\n");
}

static void
test_verify_fault_closes_cursor(void **state)
{
    (void)state;
    child_case(verify_fault_child, 0, 1, "verifies that fault inside their "
               "cursor walk");
}

/* ---- damage after this handle's own commits ----------------------------- */

static void
own_commit_child(const char *dir, int read_first)
{
    gkv_store *s;
    uint64_t walks;
    gkv_err rc;

    if (gkv_store_open(&s, dir, GKV_GUARD, NULL) != GKV_OK)
        _exit(3);
    /* no read in between: a read would record the state */
    if (push_row(s, 5, 1) != GKV_OK || push_row(s, 6, 1) != GKV_OK)
        _exit(4);
    walks = __atomic_load_n(&s->st_gwalks, __ATOMIC_RELAXED);
    damage_data_leaf(dir);
    if (read_first) {
        uint64_t id = 5;
        float got[DIM];

        rc = gkv_tensor_pull(s, NULL, "t", &id, 1, got, sizeof got);
        printf("pull: %d %s\n", rc, gkv_store_errmsg(s));
        if (rc != GKV_ECORRUPT || s->st_gwalks != walks + 1)
            _exit(5);
    }
    rc = push_row(s, 5, 2);
    printf("push: %d %s walks %llu\n", rc, gkv_store_errmsg(s),
           (unsigned long long)(s->st_gwalks - walks));
    if (rc != GKV_ECORRUPT || s->st_gwalks != walks + 1 ||
        strstr(gkv_store_errmsg(s), "damaged") == NULL)
        _exit(6);
    printf("alive\n");
    gkv_store_close(s);
}

static void
test_damage_after_own_commit(void **state)
{
    (void)state;
    child_case(own_commit_child, 0, 0, "a write after damage that followed "
               "own commits");
    child_case(own_commit_child, 1, 0, "a read, then a write, after damage "
               "that followed own commits");
}

/* ---- damage written with the file's time set back ----------------------- */

/* rsync --inplace, cp --preserve=timestamps onto the file, touch -r, a
 * clock stepped back: the change's time is older than the state last
 * checked. It is walked all the same (by a read, or by a write). */
static void
time_back_child(const char *dir, int read_first)
{
    char path[4200];
    struct stat st;
    struct timespec ts[2];
    uint64_t walks, id = 5;
    float got[DIM];
    gkv_store *s;
    gkv_err rc;

    if (gkv_store_open(&s, dir, GKV_GUARD, NULL) != GKV_OK)
        _exit(3);
    if (gkv_tensor_pull(s, NULL, "t", &id, 1, got, sizeof got) != GKV_OK)
        _exit(4);
    snprintf(path, sizeof path, "%s/data.mdb", dir);
    if (stat(path, &st) != 0)
        _exit(4);
    walks = __atomic_load_n(&s->st_gwalks, __ATOMIC_RELAXED);
    damage_data_leaf(dir);
    ts[0] = st.st_atim;
    ts[1] = st.st_mtim;
    ts[1].tv_sec -= 10;
    if (utimensat(AT_FDCWD, path, ts, 0) != 0)
        _exit(4);
    if (read_first) {
        rc = gkv_tensor_pull(s, NULL, "t", &id, 1, got, sizeof got);
        printf("pull: %d %s\n", rc, gkv_store_errmsg(s));
        if (rc != GKV_ECORRUPT || s->st_gwalks != walks + 1)
            _exit(5);
    }
    rc = push_row(s, 5, 2);
    printf("push: %d %s walks %llu\n", rc, gkv_store_errmsg(s),
           (unsigned long long)(s->st_gwalks - walks));
    if (rc != GKV_ECORRUPT || s->st_gwalks != walks + 1)
        _exit(6);
    printf("alive\n");
    gkv_store_close(s);
}

static void
test_damage_with_time_set_back(void **state)
{
    (void)state;
    child_case(time_back_child, 0, 0, "a write after damage written with "
               "the file's time set back");
    child_case(time_back_child, 1, 0, "a read, then a write, after damage "
               "written with the file's time set back");
}

/* ---- own commits read meanwhile: no walks ------------------------------- */

#define COMMITS 400
#define PUSH_ROWS 512u

struct race {
    gkv_store *s;
    volatile int done;
    long reads, bad;
};

static void *
pusher(void *arg)
{
    struct race *r = arg;

    static float rows[PUSH_ROWS][DIM];
    static uint64_t ids[PUSH_ROWS];

    /* commits of many pages each: reads meet them in flight */
    for (int i = 1; i <= COMMITS; i++) {
        for (unsigned k = 0; k < PUSH_ROWS; k++) {
            ids[k] = (k * 7 + (unsigned)i) % ROWS;
            if (ids[k] >= 100 && ids[k] < 100 + 64 * 7)
                ids[k] = k % 64;            /* not the rows read */
            for (unsigned j = 0; j < DIM; j++)
                rows[k][j] = row_val(ids[k], j, i);
        }
        if (gkv_tensor_push(r->s, "t", ids, PUSH_ROWS, rows, sizeof rows,
                            NULL) != GKV_OK)
            __atomic_add_fetch(&r->bad, 1, __ATOMIC_RELAXED);
    }
    if (push_row(r->s, COMMITS % 64, COMMITS) != GKV_OK)
        __atomic_add_fetch(&r->bad, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&r->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void *
reader(void *arg)
{
    struct race *r = arg;
    uint64_t ids[64];
    float got[64][DIM];

    for (unsigned i = 0; i < 64; i++)
        ids[i] = 100 + i * 7;
    while (!__atomic_load_n(&r->done, __ATOMIC_ACQUIRE)) {
        if (gkv_tensor_pull(r->s, NULL, "t", ids, 64, got, sizeof got) !=
                GKV_OK || got[3][1] != row_val(ids[3], 1, 0))
            __atomic_add_fetch(&r->bad, 1, __ATOMIC_RELAXED);
        __atomic_add_fetch(&r->reads, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

static void
test_own_commits_no_walk(void **state)
{
    char *dir = gkvt_mkdtemp("guardc");
    struct race r;
    pthread_t t[3];

    (void)state;
    make_store(dir, 0);
    memset(&r, 0, sizeof r);
    assert_int_equal(gkv_store_open(&r.s, dir, GKV_GUARD, NULL), GKV_OK);
    assert_int_equal(pthread_create(&t[1], NULL, reader, &r), 0);
    assert_int_equal(pthread_create(&t[2], NULL, reader, &r), 0);
    assert_int_equal(pthread_create(&t[0], NULL, pusher, &r), 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(pthread_join(t[i], NULL), 0);
    assert_int_equal(r.bad, 0);
    assert_true(r.reads > 0);
    if (r.s->st_gwalks != 0)
        fail_msg("%llu structure walks over %d commits of this process "
                 "(read meanwhile %ld times): none wanted",
                 (unsigned long long)r.s->st_gwalks, COMMITS, r.reads);
    assert_true(row_is(r.s, COMMITS % 64, COMMITS));
    gkv_store_close(r.s);
    gkvt_rmtree(dir);
}

/* ---- handlers installed after the guard's -------------------------------- */

static struct sigaction fh_prev;
static volatile uintptr_t fault_at = 8;   /* not in the map */

/* As CPython's faulthandler on a fatal signal: say so, put the previous
 * handler back, raise the signal again. */
static void
fh_like(int sig)
{
    static const char m[] = "faulthandler-like\n";

    (void)!write(1, m, sizeof m - 1);
    sigaction(sig, &fh_prev, NULL);
    raise(sig);
}

static void
other_handler(int sig)
{
    static const char m[] = "other handler\n";

    (void)sig;
    (void)!write(1, m, sizeof m - 1);
    _exit(9);
}

/* A crash reporter's way: chain by calling the handler it displaced
 * (here the guard's) directly. */
static struct sigaction chained_prev;
static volatile int chained_calls;

static void
chaining_handler(int sig, siginfo_t *si, void *ctx)
{
    static const char m[] = "chaining handler\n";

    (void)!write(1, m, sizeof m - 1);
    if (++chained_calls > 50)
        _exit(8);                       /* handed back and forth */
    if (chained_prev.sa_flags & SA_SIGINFO)
        chained_prev.sa_sigaction(sig, si, ctx);
}

/* The guard's handler is displaced by one that calls it back, then put in
 * front again by a second guarded open: a fault that is not the guard's
 * must kill the process once, not go round between the two. */
static void
chain_back_child(const char *dir, int unused)
{
    gkv_store *s;
    struct sigaction sa;

    (void)unused;
    if (gkv_store_open(&s, dir, GKV_GUARD, NULL) != GKV_OK)
        _exit(3);
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sa.sa_sigaction = chaining_handler;
    sigaction(SIGSEGV, &sa, &chained_prev);
    gkv_store_close(s);
    if (gkv_store_open(&s, dir, GKV_GUARD, NULL) != GKV_OK)
        _exit(3);
    fflush(stdout);
    *(volatile int *)fault_at = 1;      /* not the guard's */
    _exit(6);
}

static void
test_handler_calling_back(void **state)
{
    char *dir, *out, *at;
    int wst, n = 0;

    (void)state;
    if (!KV_GUARD_SIGNALS) {
        skip();                 /* ThreadSanitizer: no fault handler */
        return;
    }
    dir = gkvt_mkdtemp("guardc");
    make_store(dir, 0);
    wst = in_child(chain_back_child, dir, 0, &out);
    for (at = out; (at = strstr(at, "chaining handler")) != NULL; at++)
        n++;
    if (!WIFSIGNALED(wst) || WTERMSIG(wst) != SIGSEGV || n < 1 || n > 2)
        fail_msg("a fault not the guard's with a handler that calls the "
                 "guard's back: status 0x%x, the handler ran %d times; "
                 "output:\n%s", wst, n, out);
    free(out);
    gkvt_rmtree(dir);
}

static void
handler_child(const char *dir, int how)
{
    gkv_store *s;
    gkv_txn *tx;
    struct sigaction sa;
    uint64_t id = 5;
    float got[DIM];
    char *p = gkvt_path(dir, "data.mdb");
    gkv_err rc;

    if (gkv_store_open(&s, dir, GKV_GUARD, NULL) != GKV_OK)
        _exit(3);
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_NODEFER;
    sa.sa_handler = how == 0 ? fh_like : other_handler;
    sigaction(SIGBUS, &sa, &fh_prev);
    if (how == 1) {
        /* a guarded open puts the guard's handler back in front */
        sigaction(SIGSEGV, &sa, NULL);
        gkv_store_close(s);
        if (gkv_store_open(&s, dir, GKV_GUARD, NULL) != GKV_OK)
            _exit(3);
    }
    /* a snapshot held across the cut: no size check before the read */
    if (gkv_txn_begin(s, &tx) != GKV_OK || truncate(p, 2 * PSIZE) != 0)
        _exit(4);
    rc = gkv_tensor_pull(s, tx, "t", &id, 1, got, sizeof got);
    printf("pull: %d %s\n", rc, gkv_store_errmsg(s));
    if (rc != GKV_ECORRUPT)
        _exit(5);
    if (how == 1) {
        /* a fault that is not the guard's reaches the handler installed
         * after it */
        fflush(stdout);
        *(volatile int *)fault_at = 1;
        _exit(6);
    }
    gkv_txn_end(tx);
    printf("alive\n");
}

static void
test_handler_installed_later(void **state)
{
    (void)state;
    if (!KV_GUARD_SIGNALS) {
        skip();                 /* ThreadSanitizer: no fault handler */
        return;
    }
    for (int how = 0; how < 2; how++) {
        char *dir = gkvt_mkdtemp("guardh"), *out;
        int wst;

        make_store(dir, 0);
        wst = in_child(handler_child, dir, how, &out);
        if (how == 0) {
            expect_exit0(wst, out, "a faulthandler-like handler installed "
                         "after the guarded open");
            assert_non_null(strstr(out, "alive"));
        } else {
            if (!WIFEXITED(wst) || WEXITSTATUS(wst) != 9)
                fail_msg("a handler installed before a second guarded open: "
                         "status 0x%x; output:\n%s", wst, out);
            assert_non_null(strstr(out, "pull: -13"));
            assert_non_null(strstr(out, "other handler"));
        }
        free(out);
        gkvt_rmtree(dir);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_write_fault_left_unended),
        cmocka_unit_test(test_lag_after_write_fault),
        cmocka_unit_test(test_verify_fault_closes_cursor),
        cmocka_unit_test(test_server_fail_stop),
        cmocka_unit_test(test_damage_after_own_commit),
        cmocka_unit_test(test_damage_with_time_set_back),
        cmocka_unit_test(test_own_commits_no_walk),
        cmocka_unit_test(test_handler_installed_later),
        cmocka_unit_test(test_handler_calling_back),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
