/* kv_store_test.c - the store itself (kv/gkv_kv.h): the error list,
 * dtypes and halves; open (missing, not a store, a newer format, read-only,
 * a second handle, fork during open, inherited handles, lock file and
 * data file damage); snapshots that do not stall writers; stat; verify.
 * Tensors: kv_tensor_test.c; rows: kv_rows_test.c; space and full disks:
 * kv_space_test.c; write-back: kv_wb_test.c. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <pthread.h>
#include <unistd.h>
#include <lmdb.h>
#include "gkvt.h"
#include "kv/kv_test.h"

struct fx {
    char *dir;
    gkv_store *s;
};

static int
setup(void **state)
{
    return gkvt_store_setup(state, sizeof(struct fx), "store");
}

static int
teardown(void **state)
{
    return gkvt_store_teardown(state);
}

/* ---- error list, dtypes, halves ---------------------------------------- */

static void
test_error_list_is_complete(void **state)
{
    int codes[] = {
#define X(name, val, text) val,
        GKV_ERRORS(X)
#undef X
    };
    size_t n = sizeof codes / sizeof *codes;

    (void)state;
    for (size_t i = 0; i < n; i++) {
        assert_string_not_equal(gkv_strerror(codes[i]), "unknown error");
        assert_memory_equal(gkv_err_name(codes[i]), "GKV_", 4);
        for (size_t j = 0; j < i; j++) {
            assert_int_not_equal(codes[i], codes[j]);
            assert_string_not_equal(gkv_err_name(codes[i]), gkv_err_name(codes[j]));
        }
    }
    assert_string_equal(gkv_err_name(GKV_ESHAPE), "GKV_ESHAPE");
    assert_string_equal(gkv_strerror(12345), "unknown error");
    assert_string_equal(gkv_err_name(-999), "GKV_E?");
}

static void
test_dtypes_and_halves(void **state)
{
    gkv_dtype dt;

    (void)state;
    assert_int_equal(gkv_dtype_size(GKV_BF16), 2);
    assert_int_equal(gkv_dtype_size(GKV_I64), 8);
    assert_int_equal(gkv_dtype_size((gkv_dtype)99), 0);
    GKVT_OK(gkv_dtype_parse("float32", &dt));
    assert_int_equal(dt, GKV_F32);
    GKVT_OK(gkv_dtype_parse("bf16", &dt));
    assert_int_equal(dt, GKV_BF16);
    assert_int_equal(gkv_dtype_parse("complex64", &dt), GKV_EINVAL);
    assert_string_equal(gkv_dtype_name(GKV_U8), "u8");
    /* f16: exact values, rounding to even, overflow, subnormals */
    assert_int_equal(gkv_f32_to_f16(1.0f), 0x3c00);
    assert_int_equal(gkv_f32_to_f16(-2.0f), 0xc000);
    assert_int_equal(gkv_f32_to_f16(65504.0f), 0x7bff);
    assert_int_equal(gkv_f32_to_f16(65520.0f), 0x7c00);
    assert_int_equal(gkv_f32_to_f16(0x1.0p-24f), 0x0001);
    assert_int_equal(gkv_f32_to_f16(1.0f + 0x1.0p-11f), 0x3c00);   /* tie: even */
    assert_int_equal(gkv_f32_to_f16(1.0f + 0x1.8p-11f), 0x3c01);
    assert_true(isnan(gkv_f16_to_f32(gkv_f32_to_f16(NAN))));
    for (uint32_t h = 0; h < 0x7c00; h++)          /* every finite positive */
        assert_int_equal(gkv_f32_to_f16(gkv_f16_to_f32((uint16_t)h)), h);
    /* bf16 */
    assert_int_equal(gkv_f32_to_bf16(1.0f), 0x3f80);
    assert_true(gkv_bf16_to_f32(0x4049) == 3.140625f);
    assert_int_equal(gkv_f32_to_bf16(1.0f + 0x1.0p-8f), 0x3f80);    /* tie: even */
}

/* ---- open ------------------------------------------------------------ */

static void
test_open_missing_and_not_a_store(void **state)
{
    char *dir = gkvt_mkdtemp("open");
    char path[4096], file[4096];
    gkv_store *s = (gkv_store *)1;
    int fd;

    (void)state;
    snprintf(path, sizeof path, "%s/nope", dir);
    assert_int_equal(gkv_store_open(&s, path, 0, NULL), GKV_ENOENT);
    assert_null(s);
    assert_non_null(strstr(gkv_store_errmsg(NULL), "nope"));
    assert_int_equal(gkv_store_open(&s, path, GKV_RDONLY, NULL), GKV_ENOENT);
    /* an empty directory without GKV_CREATE holds no store */
    assert_int_equal(gkv_store_open(&s, dir, 0, NULL), GKV_ENOENT);
    /* a plain file is not a store */
    snprintf(file, sizeof file, "%s/file", dir);
    fd = open(file, O_CREAT | O_WRONLY, 0644);
    close(fd);
    assert_int_equal(gkv_store_open(&s, file, GKV_CREATE, NULL), GKV_ENOENT);
    assert_int_equal(gkv_store_open(&s, "", 0, NULL), GKV_EINVAL);
    assert_int_equal(gkv_store_open(&s, dir, GKV_CREATE | GKV_RDONLY, NULL), GKV_EINVAL);
    assert_int_equal(gkv_store_open(&s, dir, GKV_CREATE | 0x100, NULL), GKV_EINVAL);
    assert_non_null(strstr(gkv_store_errmsg(NULL), "unknown open flags 0x100"));
    assert_null(s);
    /* a directory holding an empty data.mdb (what a failed create leaves)
     * or another program's LMDB files: a plain open made a gkv store of
     * it; it is no store, and stays untouched, until GKV_CREATE */
    {
        char lmdb[4096], data[4200];
        struct stat sb;
        snprintf(lmdb, sizeof lmdb, "%s/lmdb", dir);
        assert_int_equal(mkdir(lmdb, 0755), 0);
        snprintf(data, sizeof data, "%s/data.mdb", lmdb);
        fd = open(data, O_CREAT | O_WRONLY, 0644);
        close(fd);
        assert_int_equal(gkv_store_open(&s, lmdb, 0, NULL), GKV_ENOENT);
        assert_null(s);
        assert_non_null(strstr(gkv_store_errmsg(NULL), "holds no gkv store"));
        assert_int_equal(gkv_store_open(&s, lmdb, GKV_RDONLY, NULL),
                         GKV_ENOENT);
        GKVT_OK(gkv_store_open(&s, lmdb, GKV_CREATE, NULL));
        gkv_store_close(s);
        GKVT_OK(gkv_store_open(&s, lmdb, 0, NULL));
        gkv_store_close(s);
        assert_int_equal(stat(data, &sb), 0);
    }
    /* create, close, reopen read-only */
    GKVT_OK(gkv_store_open(&s, path, GKV_CREATE, NULL));
    gkv_store_close(s);
    GKVT_OK(gkv_store_open(&s, path, GKV_RDONLY, NULL));
    assert_string_equal(gkv_store_path(s), path);
    gkv_store_close(s);
    gkv_store_close(NULL);
    gkvt_rmtree(dir);
}

static void
test_newer_format_is_eversion(void **state)
{
    char *dir = gkvt_mkdtemp("fmt");
    gkv_store *s;
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    uint32_t v = KV_FORMAT + 1;
    MDB_val k = {6, "format"}, d = {4, &v};
    gkv_tensor_spec sp = gkvt_spec(GKV_F32, 4, 0, 10);

    (void)state;
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE, NULL));
    GKVT_OK(gkv_tensor_create(s, "t", &sp));
    gkv_store_close(s);
    /* write a newer format number with raw LMDB, as a newer gkv would */
    assert_int_equal(mdb_env_create(&env), 0);
    mdb_env_set_maxdbs(env, 4);
    assert_int_equal(mdb_env_open(env, dir, 0, 0644), 0);
    assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
    assert_int_equal(mdb_dbi_open(txn, "meta", 0, &dbi), 0);
    assert_int_equal(mdb_put(txn, dbi, &k, &d, 0), 0);
    assert_int_equal(mdb_txn_commit(txn), 0);
    mdb_env_close(env);
    assert_int_equal(gkv_store_open(&s, dir, 0, NULL), GKV_EVERSION);
    assert_non_null(strstr(gkv_store_errmsg(NULL), "format 2"));
    assert_int_equal(gkv_store_open(&s, dir, GKV_RDONLY, NULL), GKV_EVERSION);
    gkvt_rmtree(dir);
}

/* ---- read-only, map growth, corruption -------------------------------- */

static void
test_read_only_store_refuses_writes(void **state)
{
    struct fx *f = *state;
    gkv_tensor_spec sp = gkvt_spec(GKV_F32, 4, 0, 10);
    gkv_store *ro;
    uint64_t id = 1;
    float row[4] = {1, 2, 3, 4}, got[4];

    GKVT_OK(gkv_tensor_create(f->s, "t", &sp));
    GKVT_OK(gkv_tensor_push(f->s, "t", &id, 1, row, sizeof row, NULL));
    gkv_store_close(f->s);      /* one handle per store and process */
    f->s = NULL;
    GKVT_OK(gkv_store_open(&ro, f->dir, GKV_RDONLY, NULL));
    assert_int_equal(gkv_tensor_create(ro, "u", &sp), GKV_ERDONLY);
    assert_non_null(strstr(gkv_store_errmsg(ro), "read-only"));
    assert_int_equal(gkv_tensor_push(ro, "t", &id, 1, row, sizeof row, NULL), GKV_ERDONLY);
    assert_int_equal(gkv_tensor_write(ro, "t", 0, 1, row, sizeof row), GKV_ERDONLY);
    assert_int_equal(gkv_tensor_delete(ro, "t"), GKV_ERDONLY);
    assert_int_equal(gkv_tensor_rename(ro, "t", "u"), GKV_ERDONLY);
    GKVT_OK(gkv_tensor_pull(ro, NULL, "t", &id, 1, got, sizeof got));
    assert_memory_equal(got, row, sizeof row);
    GKVT_OK(gkv_store_verify(ro, NULL, NULL));
    gkv_store_close(ro);
}

/* Every descriptor an open store holds is close-on-exec (LMDB opened
 * data.mdb without it: a program a service started kept the file open),
 * writable and read-only opens, with write-back on. */
static void
test_store_fds_close_on_exec(void **state)
{
    char *dir = gkvt_mkdtemp("cloexec");
    gkv_tensor_spec sp = gkvt_spec(GKV_F32, 4, 0, 100);

    (void)state;
    for (int ro = 0; ro < 2; ro++) {
        gkv_store *s;
        DIR *d;
        struct dirent *e;
        int seen = 0;

        GKVT_OK(gkv_store_open(&s, dir, ro ? GKV_RDONLY : GKV_CREATE, NULL));
        if (!ro) {
            GKVT_OK(gkv_tensor_create(s, "t", &sp));
            GKVT_OK(gkv_writeback_start(s, "t", 1000));
        }
        d = opendir("/proc/self/fd");
        assert_non_null(d);
        while ((e = readdir(d)) != NULL) {
            char link[300], target[4300];
            ssize_t n;
            int fd = atoi(e->d_name);

            snprintf(link, sizeof link, "/proc/self/fd/%s", e->d_name);
            if ((n = readlink(link, target, sizeof target - 1)) <= 0)
                continue;
            target[n] = '\0';
            if (strncmp(target, dir, strlen(dir)) != 0)
                continue;
            seen++;
            if (!(fcntl(fd, F_GETFD) & FD_CLOEXEC))
                fail_msg("%s open: fd %d (%s) is not close-on-exec",
                         ro ? "read-only" : "writable", fd, target);
        }
        closedir(d);
        assert_true(seen >= 2);                 /* data.mdb and lock.mdb */
        gkv_store_close(s);
    }
    gkvt_rmtree(dir);
}

/* A second handle on one store in one process would reset LMDB's reader
 * table (its locks are per process) and let writes reuse the pages the
 * first handle's snapshot reads: refused with GKV_EBUSY, by any path to
 * the directory, while the snapshot reads what it read; after a close
 * the directory opens again, and a forked child opens its own. */
static void
test_second_handle_refused(void **state)
{
    char *dir = gkvt_mkdtemp("twice"), p[4200];
    gkv_tensor_spec sp = gkvt_spec(GKV_F32, 64, 0, 4096);
    gkv_store *s, *s2 = NULL;
    gkv_txn *tx;
    unsigned char *b0, *b1, *row;
    size_t len = (size_t)4096 * 256;
    pid_t pid;
    int st;

    (void)state;
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE | GKV_NOSYNC, NULL));
    sp.init = GKV_INIT_CONST;
    sp.a = 1;
    GKVT_OK(gkv_tensor_create(s, "t", &sp));
    GKVT_OK(gkv_txn_begin(s, &tx));
    b0 = malloc(len);
    b1 = malloc(len);
    row = malloc(len);
    GKVT_OK(gkv_tensor_read(s, tx, "t", 0, 4096, b0, len));
    snprintf(p, sizeof p, "%s/.", dir);
    assert_int_equal(gkv_store_open(&s2, dir, 0, NULL), GKV_EBUSY);
    assert_null(s2);
    assert_non_null(strstr(gkv_store_errmsg(NULL), "open already in this "
                           "process"));
    assert_int_equal(gkv_store_open(&s2, p, GKV_RDONLY, NULL), GKV_EBUSY);
    /* writes that would reuse the snapshot's pages, had its slot gone */
    memset(row, 0x55, len);
    for (int i = 0; i < 4; i++)
        GKVT_OK(gkv_tensor_write(s, "t", 0, 4096, row, len));
    GKVT_OK(gkv_tensor_read(s, tx, "t", 0, 4096, b1, len));
    assert_memory_equal(b0, b1, len);
    gkv_txn_end(tx);
    /* a forked child is another process: it opens the store itself */
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        gkv_store *c;
        _exit(gkv_store_open(&c, dir, GKV_RDONLY, NULL) == GKV_OK &&
              gkv_tensor_read(c, NULL, "t", 0, 4096, b1, len) == GKV_OK &&
              memcmp(b1, row, len) == 0 ? 0 : 1);
    }
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    gkv_store_close(s);
    GKVT_OK(gkv_store_open(&s2, p, GKV_RDONLY, NULL));
    GKVT_OK(gkv_tensor_read(s2, NULL, "t", 0, 4096, b1, len));
    assert_memory_equal(b1, row, len);
    gkv_store_close(s2);
    free(b0);
    free(b1);
    free(row);
    gkvt_rmtree(dir);
}

/* fork() while another thread is inside gkv_store_open (holding the
 * lock of the list of open stores) left that lock held in the child for
 * good: the child's own open hung. Now the fork waits for it. */
struct hold_arg {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int held;
};

__attribute__((unused)) static void *
hold_list(void *p)
{
    struct hold_arg *h = p;

    kv__open_list_hold(1);
    pthread_mutex_lock(&h->mu);
    h->held = 1;
    pthread_cond_signal(&h->cv);
    pthread_mutex_unlock(&h->mu);
    tools__sleep_ms(300);
    kv__open_list_hold(0);
    return NULL;
}

static void
test_fork_during_open(void **state)
{
#if defined(__SANITIZE_THREAD__)
    (void)state;
    skip();                 /* TSan reports a fork with threads running */
#else
    char *dir = gkvt_mkdtemp("forkopen");
    struct hold_arg h = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    pthread_t t;
    pid_t pid;
    int st;

    (void)state;
    assert_int_equal(pthread_create(&t, NULL, hold_list, &h), 0);
    pthread_mutex_lock(&h.mu);
    while (!h.held)
        pthread_cond_wait(&h.cv, &h.mu);
    pthread_mutex_unlock(&h.mu);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        gkv_store *c;
        alarm(30);                     /* a hang ends as SIGALRM */
        _exit(gkv_store_open(&c, dir, GKV_CREATE, NULL) == GKV_OK ? 0 : 1);
    }
    assert_int_equal(waitpid(pid, &st, 0), pid);
    pthread_join(t, NULL);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fail_msg("the child's open: %s %d", WIFEXITED(st) ? "exit" : "signal",
                 WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
    gkvt_rmtree(dir);
#endif
}

/* A forked child that closes (or uses) the parent's handle: its close
 * wrote the write-back copy as of the fork over the parent's newer
 * commit, and its calls went to the parent's LMDB environment. Now the
 * close only frees memory and the calls are refused, naming the fork. */
static void
test_inherited_handle_after_fork(void **state)
{
#if defined(__SANITIZE_THREAD__)
    (void)state;
    skip();                 /* TSan reports a fork with threads running */
#else
    char *dir = gkvt_mkdtemp("forkinh");
    gkv_tensor_spec sp = gkvt_spec(GKV_F32, 4, 0, 16);
    gkv_store *s;
    uint64_t id = 3;
    float v7[4] = {7, 7, 7, 7}, v9[4] = {9, 9, 9, 9}, got[4];
    int go[2], done[2], st;
    pid_t pid;
    char c;

    (void)state;
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE | GKV_NOSYNC, NULL));
    GKVT_OK(gkv_tensor_create(s, "t", &sp));
    GKVT_OK(gkv_tensor_create(s, "plain", &sp));
    GKVT_OK(gkv_writeback_start(s, "t", 100000));
    GKVT_OK(gkv_tensor_push(s, "t", &id, 1, v7, sizeof v7, NULL));
    assert_int_equal(pipe(go), 0);
    assert_int_equal(pipe(done), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        gkv_err prc;
        alarm(10);
        close(done[0]);
        if (read(go[0], &c, 1) != 1)
            _exit(2);
        prc = gkv_tensor_pull(s, NULL, "plain", &id, 1, got, sizeof got);
        if (prc != GKV_EINVAL || strstr(gkv_store_errmsg(s), "before a fork()") == NULL) {
            fprintf(stderr, "child: pull %s: %s\n", gkv_err_name(prc),
                    gkv_store_errmsg(s));
            _exit(3);
        }
        /* the write-back tensor too (its RAM copy is the fork's) */
        if (gkv_tensor_push(s, "t", &id, 1, v7, sizeof v7, NULL) != GKV_EINVAL ||
            gkv_tensor_write(s, "t", 0, 1, v7, sizeof v7) != GKV_EINVAL ||
            gkv_tensor_pull(s, NULL, "t", &id, 1, got, sizeof got) != GKV_EINVAL ||
            gkv_writeback_flush(s) != GKV_EINVAL)
            _exit(5);
        gkv_store_close(s);            /* must not write 7 over 9 */
        _exit(write(done[1], "x", 1) == 1 ? 0 : 4);
    }
    close(done[1]);
    GKVT_OK(gkv_tensor_push(s, "t", &id, 1, v9, sizeof v9, NULL));
    GKVT_OK(gkv_writeback_flush(s));
    assert_int_equal(write(go[1], "x", 1), 1);
    (void)!read(done[0], &c, 1);       /* EOF too, should the child fail */
    assert_int_equal(waitpid(pid, &st, 0), pid);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fail_msg("child: status %d", st);
    gkv_store_close(s);
    GKVT_OK(gkv_store_open(&s, dir, GKV_RDONLY, NULL));
    GKVT_OK(gkv_tensor_pull(s, NULL, "t", &id, 1, got, sizeof got));
    assert_memory_equal(got, v9, sizeof v9);
    gkv_store_close(s);
    close(go[0]);
    close(go[1]);
    close(done[0]);
    gkvt_rmtree(dir);
#endif
}

/* A thread that holds a snapshot while another thread's write needs the
 * map to grow: its next read waited out the grower's 10 s (the grower
 * waits for its snapshot); now it goes on at once. Its own write needing
 * growth fails at once (waiting would wait for itself). */
struct grow_arg {
    gkv_store *s;
    gkv_err rc;
};

static void *
grow_writer(void *p)
{
    struct grow_arg *g = p;
    gkv_tensor_spec sp = gkvt_spec(GKV_F32, 128, 0, 400000);   /* 200 MB */

    sp.init = GKV_INIT_CONST;
    sp.a = 1;
    g->rc = gkv_tensor_create(g->s, "big", &sp);
    return NULL;
}

static void *
end_txn(void *tx)
{
    gkv_txn_end(tx);
    return NULL;
}

static void
test_snapshot_holder_not_stalled(void **state)
{
    char *dir = gkvt_mkdtemp("growsnap");
    gkv_open_opts o = {1u << 20, 0};
    gkv_tensor_spec sp = gkvt_spec(GKV_F32, 4, 0, 16);
    struct grow_arg g;
    gkv_tensor_desc d;
    gkv_txn *tx;
    pthread_t t;
    double t0;

    (void)state;
    /* the grower must still be waiting when the snapshot ends below, and
     * reads that waited it out would take far longer than the bounds */
    kv__grow_wait_ms = 20000;
    GKVT_OK(gkv_store_open(&g.s, dir, GKV_CREATE | GKV_NOSYNC, &o));
    GKVT_OK(gkv_tensor_create(g.s, "small", &sp));
    GKVT_OK(gkv_txn_begin(g.s, &tx));
    assert_int_equal(pthread_create(&t, NULL, grow_writer, &g), 0);
    tools__sleep_ms(300);                 /* the writer is waiting to grow */
    t0 = tools__now_s();
    for (int i = 0; i < 20; i++)
        GKVT_OK(gkv_tensor_info(g.s, NULL, "small", &d));
    assert_true(tools__now_s() - t0 < 5);
    /* this thread's own write that needs growth: at once */
    t0 = tools__now_s();
    sp.hi = 400000;
    sp.shape[0] = 128;
    sp.init = GKV_INIT_CONST;
    sp.a = 2;
    assert_int_equal(gkv_tensor_create(g.s, "mine", &sp), GKV_EMAPFULL);
    assert_true(tools__now_s() - t0 < 5);
    gkv_txn_end(tx);
    pthread_join(t, NULL);
    GKVT_OK(g.rc);              /* it grew once the snapshot ended */
    /* a snapshot this thread began and another thread ended: this
     * thread's next growth is not refused as if it still held it */
    {
        pthread_t e;
        GKVT_OK(gkv_txn_begin(g.s, &tx));
        assert_int_equal(pthread_create(&e, NULL, end_txn, tx), 0);
        pthread_join(e, NULL);
        sp.hi = 800000;
        GKVT_OK(gkv_tensor_create(g.s, "mine", &sp));
    }
    kv__grow_wait_ms = 10000;
    gkv_store_close(g.s);
    gkvt_rmtree(dir);
}

/* A read-only open whose lock.mdb the process cannot write (a store on
 * read-only storage, another user's store): the message names the lock
 * file and why a reader needs it, not only "Permission denied". Root
 * only: the open runs in a child as user nobody. */
static void
test_lock_file_not_writable(void **state)
{
    char *dir = gkvt_mkdtemp("rolock"), p[4200], msg[1024] = "";
    gkv_tensor_spec sp = gkvt_spec(GKV_F32, 4, 0, 16);
    gkv_store *s;
    int fd[2], st;
    ssize_t n;
    pid_t pid;

    (void)state;
    if (geteuid() != 0) {
        gkvt_rmtree(dir);
        skip();
    }
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE, NULL));
    GKVT_OK(gkv_tensor_create(s, "t", &sp));
    gkv_store_close(s);
    snprintf(p, sizeof p, "%s/lock.mdb", dir);
    assert_int_equal(chmod(p, 0444), 0);
    assert_int_equal(chmod(dir, 0555), 0);
    assert_int_equal(pipe(fd), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        gkv_err rc;
        close(fd[0]);
        if (setgid(65534) != 0 || setuid(65534) != 0)
            _exit(3);
        rc = gkv_store_open(&s, dir, GKV_RDONLY, NULL);
        (void)!write(fd[1], gkv_store_errmsg(NULL),
                     strlen(gkv_store_errmsg(NULL)));
        _exit(rc == GKV_EPERM ? 0 : 1);
    }
    close(fd[1]);
    n = read(fd[0], msg, sizeof msg - 1);
    msg[n > 0 ? n : 0] = '\0';
    close(fd[0]);
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_int_equal(chmod(dir, 0700), 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 ||
        strstr(msg, "its lock file lock.mdb cannot be made or written") == NULL)
        fail_msg("status %d: %s", st, msg);
    gkvt_rmtree(dir);
}

/* An empty data.mdb (what a create that failed early leaves) holds no
 * store: said so by every open without GKV_CREATE, read-only ones making
 * no lock file; GKV_CREATE makes a store of it. */
static void
test_empty_data_mdb(void **state)
{
    char *dir = gkvt_mkdtemp("emptydb"), p[4200];
    gkv_store *s = NULL;
    int fd;

    (void)state;
    snprintf(p, sizeof p, "%s/data.mdb", dir);
    fd = open(p, O_WRONLY | O_CREAT, 0644);
    assert_true(fd >= 0);
    close(fd);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(gkv_store_open(&s, dir, i ? 0 : GKV_RDONLY, NULL),
                         GKV_ENOENT);
        assert_null(s);
        if (strstr(gkv_store_errmsg(NULL), "holds no gkv store (data.mdb is "
                   "empty)") == NULL)
            fail_msg("message: %s", gkv_store_errmsg(NULL));
    }
    snprintf(p, sizeof p, "%s/lock.mdb", dir);
    assert_int_equal(access(p, F_OK), -1);
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE, NULL));
    GKVT_OK(gkv_tensor_create(s, "t", &(gkv_tensor_spec){.dtype = GKV_F32,
                                                         .lo = 0, .hi = 4}));
    gkv_store_close(s);
    GKVT_OK(gkv_store_open(&s, dir, GKV_RDONLY, NULL));
    gkv_store_close(s);
    gkvt_rmtree(dir);
}

/* Deleting a tensor does not shrink used_bytes (the file keeps its
 * size): free_bytes shows what later writes reuse, and they do. */
static void
test_stat_free_bytes(void **state)
{
    char *dir = gkvt_mkdtemp("freeb");
    gkv_store *s = NULL;
    gkv_tensor_spec sp = {.dtype = GKV_F32, .ndim = 1, .shape = {64},
                          .lo = 0, .hi = 20000, .init = GKV_INIT_UNIFORM,
                          .a = 0, .b = 1, .seed = 3};
    gkv_store_stat a, b, c;
    const uint64_t tb = 20000ull * 64 * 4;       /* the tensor's bytes */

    (void)state;
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE, NULL));
    GKVT_OK(gkv_tensor_create(s, "t", &sp));
    GKVT_OK(gkv_store_stat_get(s, &a));
    assert_true(a.free_bytes < tb / 4);
    GKVT_OK(gkv_tensor_delete(s, "t"));
    GKVT_OK(gkv_store_stat_get(s, &b));
    assert_true(b.used_bytes >= a.used_bytes);
    if (b.free_bytes < tb)
        fail_msg("free %llu bytes after deleting a tensor of %llu",
                 (unsigned long long)b.free_bytes, (unsigned long long)tb);
    assert_true(b.free_bytes <= b.used_bytes);
    /* LMDB reuses pages a transaction freed from the next-but-one on (the
     * previous meta page may still point at them) */
    GKVT_OK(gkv_tensor_create(s, "tiny", &(gkv_tensor_spec){.dtype = GKV_F32,
                                                            .lo = 0, .hi = 4}));
    GKVT_OK(gkv_tensor_create(s, "u", &sp));
    GKVT_OK(gkv_store_stat_get(s, &c));
    assert_true(c.free_bytes < tb / 4);             /* reused */
    assert_true(c.used_bytes < b.used_bytes + tb / 4);
    gkv_store_close(s);
    gkvt_rmtree(dir);
}

/* A new store in dir holding tensor "t" of 'rows' rows of 64 f32
 * (uniform, seeded), closed; the path of its data.mdb to p (4200 bytes)
 * and, when size is not NULL, the file's size to *size. */
static void
cut_store(const char *dir, uint64_t rows, uint64_t seed, char *p,
          off_t *size)
{
    gkv_tensor_spec sp = {.dtype = GKV_F32, .ndim = 1, .shape = {64},
                          .lo = 0, .hi = rows, .init = GKV_INIT_UNIFORM,
                          .a = 0, .b = 1, .seed = seed};
    gkv_store *s = NULL;
    struct stat sb;

    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE | GKV_NOSYNC, NULL));
    GKVT_OK(gkv_tensor_create(s, "t", &sp));
    gkv_store_close(s);
    snprintf(p, 4200, "%s/data.mdb", dir);
    assert_int_equal(stat(p, &sb), 0);
    if (size != NULL)
        *size = sb.st_size;
}

/* A data.mdb cut short (a partial copy of a partition) faulted (SIGBUS)
 * on the first read of a missing page, in verify or a server's start; now
 * every open refuses it, naming both sizes. */
static void
test_truncated_data_mdb(void **state)
{
    char *dir = gkvt_mkdtemp("cutdb"), p[4200];
    gkv_store *s = NULL;
    struct stat sb;

    (void)state;
    cut_store(dir, 20000, 3, p, &sb.st_size);         /* 5 MB of pages */
    assert_true(sb.st_size > (4 << 20));
    /* one page short is as bad as 40 % */
    assert_int_equal(truncate(p, sb.st_size - 4096), 0);
    assert_int_equal(gkv_store_open(&s, dir, GKV_RDONLY, NULL), GKV_ECORRUPT);
    assert_int_equal(truncate(p, sb.st_size * 6 / 10), 0);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(gkv_store_open(&s, dir, i ? 0 : GKV_RDONLY, NULL),
                         GKV_ECORRUPT);
        assert_null(s);
        if (strstr(gkv_store_errmsg(NULL), "was cut short") == NULL ||
            strstr(gkv_store_errmsg(NULL), "data.mdb is") == NULL)
            fail_msg("message: %s", gkv_store_errmsg(NULL));
    }
    gkvt_rmtree(dir);
}

/* A data.mdb cut by more than the 64 MiB a sound file may lack is refused
 * at once, without a walk (the message has no walk's finding after it),
 * under GKV_NOCHECK too; cut by less, the walk names what is missing. */
static void
test_cut_past_slack(void **state)
{
    char *dir = gkvt_mkdtemp("cutbig"), p[4200];
    gkv_store *s = NULL;
    const char *m, *tail = "while copying it)";
    struct stat sb;

    (void)state;
    cut_store(dir, 320000, 5, p, &sb.st_size);        /* 82 MB of pages */
    assert_true(sb.st_size > (72 << 20));
    /* within the slack: walked, and the walk's finding follows */
    assert_int_equal(truncate(p, sb.st_size - (8 << 20)), 0);
    assert_int_equal(gkv_store_open(&s, dir, GKV_NOCHECK, NULL), GKV_ECORRUPT);
    m = gkv_store_errmsg(NULL);
    if (strstr(m, "was cut short") == NULL || strstr(m, "copying it): ") == NULL)
        fail_msg("message: %s", m);
    /* past it: at once */
    assert_int_equal(truncate(p, 1 << 20), 0);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(gkv_store_open(&s, dir, i ? GKV_NOCHECK : GKV_RDONLY,
                                        NULL), GKV_ECORRUPT);
        assert_null(s);
        m = gkv_store_errmsg(NULL);
        if (strstr(m, "was cut short") == NULL ||
            strcmp(m + strlen(m) - strlen(tail), tail) != 0)
            fail_msg("message: %s", m);
    }
    gkvt_rmtree(dir);
}

/* A sound data.mdb may end before its last page: a commit that allocated
 * pages at the end and freed them again leaves them unwritten (here LMDB
 * itself, a value of 8 MiB put and deleted in one transaction while its
 * free list is loaded; gkv's own big writes do it too, kv/store.c
 * slice_poke). A handle open meanwhile (its map smaller than the new last
 * page: it adopts the map another process grew) goes on reading and
 * writing; the store opens, read-only and writable, and verifies; cut
 * short into its pages it is still refused. */
static void
test_short_sound_data_mdb(void **state)
{
    char *dir = gkvt_mkdtemp("shortdb"), p[4200];
    gkv_store *s = NULL, *b = NULL;
    gkv_open_opts o = {.map_size = 8u << 20};
    uint64_t id = 7;
    float row[64], got[64];
    MDB_envinfo ei;
    struct stat sb;
    pid_t pid;
    int st;

    (void)state;
    for (int i = 0; i < 64; i++)
        row[i] = (float)i * 0.25f;
    cut_store(dir, 20000, 3, p, NULL);                /* 5 MB of pages */
    GKVT_OK(gkv_store_open(&b, dir, 0, &o));        /* an 8 MiB map */
    GKVT_OK(gkv_tensor_pull(b, NULL, "t", &id, 1, got, sizeof got));
    if ((pid = fork()) == 0) {
        /* another process: a value put, deleted (its pages freed), one
         * more commit (so those pages may be taken again: LMDB loads its
         * free list only then), and the big value put and deleted in one
         * transaction: its pages go back to the loaded free list,
         * unwritten */
        unsigned char kz = 0;
        MDB_val k = {1, &kz}, d = {8u << 20, NULL}, small = {8000, NULL};
        MDB_env *env;
        MDB_txn *txn;
        MDB_dbi dbi;
        int bad = mdb_env_create(&env) || mdb_env_set_maxdbs(env, 8) ||
                  mdb_env_set_mapsize(env, 64u << 20) ||
                  mdb_env_open(env, dir, 0, 0600);

        for (int t = 0; t < 4 && !bad; t++) {
            bad = mdb_txn_begin(env, NULL, 0, &txn) ||
                  mdb_dbi_open(txn, "data", 0, &dbi) ||
                  (t == 1 ? mdb_del(txn, dbi, &k, NULL)
                          : mdb_put(txn, dbi, &k, t == 3 ? &d : &small,
                                    MDB_RESERVE) ||
                            (t >= 2 && mdb_del(txn, dbi, &k, NULL))) ||
                  mdb_txn_commit(txn);
        }
        bad = bad || mdb_env_info(env, &ei);
        mdb_env_close(env);
        /* exit 2: the file reaches its last page, nothing to test */
        _exit(bad ? 1 : stat(p, &sb) != 0 ? 1 :
              (uint64_t)sb.st_size >= (uint64_t)(ei.me_last_pgno + 1) * 4096 ? 2 : 0);
    }
    assert_true(pid > 0);
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    if (WEXITSTATUS(st) == 2)
        fail_msg("data.mdb reaches its last page: nothing to test");
    assert_int_equal(WEXITSTATUS(st), 0);
    /* the open handle: the map another process grew, adopted */
    GKVT_OK(gkv_tensor_pull(b, NULL, "t", &id, 1, got, sizeof got));
    GKVT_OK(gkv_tensor_push(b, "t", &id, 1, row, sizeof row, NULL));
    GKVT_OK(gkv_tensor_pull(b, NULL, "t", &id, 1, got, sizeof got));
    assert_memory_equal(got, row, sizeof row);
    gkv_store_close(b);
    assert_int_equal(stat(p, &sb), 0);
    for (int i = 0; i < 2; i++) {
        GKVT_OK(gkv_store_open(&s, dir, i ? 0 : GKV_RDONLY, NULL));
        GKVT_OK(gkv_store_verify(s, NULL, NULL));
        GKVT_OK(gkv_tensor_pull(s, NULL, "t", &id, 1, got, sizeof got));
        assert_memory_equal(got, row, sizeof row);
        gkv_store_close(s);
    }
    assert_int_equal(truncate(p, sb.st_size / 2), 0);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(gkv_store_open(&s, dir, i ? GKV_NOCHECK : GKV_RDONLY,
                                        NULL), GKV_ECORRUPT);
        assert_null(s);
        if (strstr(gkv_store_errmsg(NULL), "was cut short") == NULL)
            fail_msg("message: %s", gkv_store_errmsg(NULL));
    }
    gkvt_rmtree(dir);
}

/* Flips one byte of the stored row 'id' in data.mdb, found by its bytes. */
static void
flip_row_byte(const char *dir, const void *pattern, size_t plen)
{
    char path[4096];
    struct stat sb;
    unsigned char *buf, c;
    int fd;

    snprintf(path, sizeof path, "%s/data.mdb", dir);
    fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    fstat(fd, &sb);
    buf = malloc((size_t)sb.st_size);
    assert_int_equal(pread(fd, buf, (size_t)sb.st_size, 0), sb.st_size);
    for (off_t off = 0; off + (off_t)plen <= sb.st_size; off++)
        if (memcmp(buf + off, pattern, plen) == 0) {
            c = buf[off + 3] ^ 0x40;
            assert_int_equal(pwrite(fd, &c, 1, off + 3), 1);
            close(fd);
            free(buf);
            return;
        }
    fail_msg("pattern not found in %s", path);
}

static void
test_verify_finds_flipped_byte(void **state)
{
    struct fx *f = *state;
    gkv_tensor_spec sp = gkvt_spec(GKV_U8, 64, 0, 10000);
    gkv_verify_report rep;
    unsigned char row[64];
    uint64_t id = 5555;

    GKVT_OK(gkv_tensor_create(f->s, "a", &sp));
    GKVT_OK(gkv_tensor_create(f->s, "b", &sp));
    for (int i = 0; i < 64; i++)
        row[i] = (unsigned char)(0xA5 ^ (i * 37));
    GKVT_OK(gkv_tensor_push(f->s, "b", &id, 1, row, sizeof row, NULL));
    GKVT_OK(gkv_store_verify(f->s, NULL, &rep));
    assert_int_equal(rep.bad_chunks, 0);
    assert_true(rep.chunks_checked >= 1);
    gkv_store_close(f->s);
    f->s = NULL;
    flip_row_byte(f->dir, row, sizeof row);
    GKVT_OK(gkv_store_open(&f->s, f->dir, 0, NULL));
    assert_int_equal(gkv_store_verify(f->s, NULL, &rep), GKV_ECORRUPT);
    assert_int_equal(rep.bad_chunks, 1);
    assert_string_equal(rep.first_bad, "b");
    assert_int_equal(rep.first_bad_chunk, id / 4096);
    assert_non_null(strstr(gkv_store_errmsg(f->s), "tensor 'b': chunk 1"));
    GKVT_OK(gkv_store_verify(f->s, "a", NULL));
    assert_int_equal(gkv_store_verify(f->s, "b", NULL), GKV_ECORRUPT);
}

/* Deletes data keys number 'a' and 'b' (in key order) with plain LMDB. */
static void
drop_chunks(const char *dir, int a, int b)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    MDB_cursor *cur;
    MDB_val k, d;
    int i = 0, rc;

    assert_int_equal(mdb_env_create(&env), 0);
    assert_int_equal(mdb_env_set_maxdbs(env, 4), 0);
    assert_int_equal(mdb_env_open(env, dir, 0, 0644), 0);
    assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
    assert_int_equal(mdb_dbi_open(txn, "data", 0, &dbi), 0);
    assert_int_equal(mdb_cursor_open(txn, dbi, &cur), 0);
    for (rc = mdb_cursor_get(cur, &k, &d, MDB_FIRST); rc == 0;
         rc = mdb_cursor_get(cur, &k, &d, MDB_NEXT), i++)
        if (i == a || i == b)
            assert_int_equal(mdb_cursor_del(cur, 0), 0);
    mdb_cursor_close(cur);
    assert_int_equal(mdb_txn_commit(txn), 0);
    mdb_env_close(env);
}

static void
test_verify_finds_missing_chunks(void **state)
{
    struct fx *f = *state;
    gkv_tensor_spec sp = gkvt_spec(GKV_F32, 4, 0, 100);   /* 10 chunks of 10 */
    gkv_tensor_spec zs = gkvt_spec(GKV_F32, 4, 0, 100);
    gkv_verify_report rep;
    float row[4];
    uint64_t id = 25;

    sp.chunk_rows = zs.chunk_rows = 10;
    sp.init = GKV_INIT_CONST;
    sp.a = 1.5;
    GKVT_OK(gkv_tensor_create(f->s, "c", &sp));
    GKVT_OK(gkv_store_verify(f->s, NULL, &rep));
    assert_int_equal(rep.chunks_checked, 10);
    gkv_store_close(f->s);
    f->s = NULL;
    drop_chunks(f->dir, 2, 9);         /* chunk 2 and the last chunk */
    GKVT_OK(gkv_store_open(&f->s, f->dir, 0, NULL));
    assert_int_equal(gkv_store_verify(f->s, "c", &rep), GKV_ECORRUPT);
    assert_int_equal(rep.bad_chunks, 2);
    assert_int_equal(rep.chunks_checked, 8);
    assert_int_equal(rep.first_bad_chunk, 2);
    assert_int_equal(rep.first_bad_row, 20);
    assert_non_null(strstr(gkv_store_errmsg(f->s), "chunk 2 (rows 20..29): chunk is missing"));
    assert_non_null(strstr(gkv_store_errmsg(f->s), "and 1 more"));
    assert_int_equal(gkv_tensor_pull(f->s, NULL, "c", &id, 1, row, sizeof row),
                     GKV_ECORRUPT);
    /* a zeros tensor has no chunks until written: that is not damage */
    GKVT_OK(gkv_tensor_create(f->s, "z", &zs));
    GKVT_OK(gkv_tensor_push(f->s, "z", &id, 1, row, sizeof row, NULL));
    GKVT_OK(gkv_store_verify(f->s, "z", &rep));
    assert_int_equal(rep.chunks_checked, 1);
}

static void
test_stat_prefault_sync(void **state)
{
    struct fx *f = *state;
    gkv_tensor_spec sp = gkvt_spec(GKV_F64, 8, 0, 1000);
    gkv_store_stat st;
    gkv_push_args ad = {"adagrad", 0, 0, 0, 0, 0};
    uint64_t id = 3;
    double row[8] = {1};

    GKVT_OK(gkv_tensor_create(f->s, "d", &sp));
    GKVT_OK(gkv_tensor_push(f->s, "d", &id, 1, row, sizeof row, &ad));
    GKVT_OK(gkv_store_prefault(f->s));
    GKVT_OK(gkv_store_sync(f->s));
    GKVT_OK(gkv_store_stat_get(f->s, &st));
    assert_int_equal(st.format, KV_FORMAT);
    assert_int_equal(st.ntensors, 1);
    assert_int_equal(st.data_bytes, 2 * 1000 * 64);  /* the row and its state */
    assert_int_equal(st.nchunks, 2);
    assert_int_equal(st.page_size, 4096);
    assert_true(st.used_bytes > 0 && st.used_bytes <= st.map_size);
    {   /* f64 tensors keep f64 optimizer state */
        gkv_tensor_desc d;
        GKVT_OK(gkv_tensor_info(f->s, NULL, "d#adagrad_s", &d));
        assert_int_equal(d.dtype, GKV_F64);
        assert_true(d.is_state);
    }
}

/* gkv_tensor_changed: a cache's mark says which chunks changed since the
 * snapshot it was taken at, and nothing else. */
static void
test_tensor_changed_since_snapshot(void **state)
{
    struct fx *f = *state;
    gkv_tensor_spec sp = gkvt_spec(GKV_F32, 2, 0, 1000);
    uint64_t mark[11] = {0}, old[11], ver[1] = {0}, m2[3] = {0};
    uint64_t id = 250, last = 999;
    uint8_t ch[10];
    float row[2] = {1.0f, 2.0f};
    gkv_txn *t0, *tx;
    size_t n = 99;

    sp.chunk_rows = 100;                          /* 10 chunks */
    GKVT_OK(gkv_tensor_create(f->s, "t", &sp));   /* zeros: none stored */
    GKVT_OK(gkv_tensor_create(f->s, "u", &sp));
    GKVT_OK(gkv_txn_begin(f->s, &t0));
    /* a first look: every chunk changed; unwritten chunks stamp 0 */
    GKVT_OK(gkv_tensor_changed(t0, "t", 0, 10, mark, ch, &n));
    assert_int_equal(n, 10);
    for (int i = 0; i < 10; i++) {
        assert_int_equal(ch[i], 1);
        assert_true(mark[1 + i] == 0);
    }
    assert_true(mark[0] > 0);
    /* the same snapshot, or a new one with nothing committed since: no */
    GKVT_OK(gkv_tensor_changed(t0, "t", 0, 10, mark, ch, &n));
    assert_int_equal(n, 0);
    GKVT_OK(gkv_txn_begin(f->s, &tx));
    GKVT_OK(gkv_tensor_changed(tx, "t", 0, 10, mark, ch, &n));
    assert_int_equal(n, 0);
    for (int i = 0; i < 10; i++)
        assert_int_equal(ch[i], 0);
    gkv_txn_end(tx);
    /* a push to row 250: chunk 2 changed, and only it */
    GKVT_OK(gkv_tensor_push(f->s, "t", &id, 1, row, sizeof row, NULL));
    GKVT_OK(gkv_txn_begin(f->s, &tx));
    ver[0] = mark[0];
    GKVT_OK(gkv_tensor_changed(tx, NULL, 0, 0, ver, NULL, &n));
    assert_int_equal(n, 1);                       /* something committed */
    assert_true(ver[0] > mark[0]);
    GKVT_OK(gkv_tensor_changed(tx, "t", 0, 10, mark, ch, &n));
    assert_int_equal(n, 1);
    for (int i = 0; i < 10; i++)
        assert_int_equal(ch[i], i == 2);
    assert_true(mark[3] != 0);
    assert_true(mark[0] == ver[0]);
    /* asked again at the same snapshot: the mark is current */
    GKVT_OK(gkv_tensor_changed(tx, NULL, 0, 0, ver, NULL, &n));
    assert_int_equal(n, 0);
    GKVT_OK(gkv_tensor_changed(tx, "t", 0, 10, mark, ch, &n));
    assert_int_equal(n, 0);
    gkv_txn_end(tx);
    /* a push to another tensor, and the same bytes to t again: commits,
     * so the version moves, but no chunk of t changed */
    GKVT_OK(gkv_tensor_push(f->s, "u", &id, 1, row, sizeof row, NULL));
    GKVT_OK(gkv_tensor_push(f->s, "t", &id, 1, row, sizeof row, NULL));
    GKVT_OK(gkv_txn_begin(f->s, &tx));
    memcpy(old, mark, sizeof mark);
    GKVT_OK(gkv_tensor_changed(tx, "t", 0, 10, mark, ch, &n));
    assert_int_equal(n, 0);
    assert_true(mark[0] > old[0]);
    assert_memory_equal(mark + 1, old + 1, 10 * sizeof *mark);
    /* an older snapshot than the mark's: nothing, the mark stays */
    memcpy(old, mark, sizeof mark);
    GKVT_OK(gkv_tensor_changed(t0, "t", 0, 10, mark, ch, &n));
    assert_int_equal(n, 0);
    assert_memory_equal(mark, old, sizeof mark);
    /* a part of the tensor: chunks [8, 10), then a push to row 999 */
    GKVT_OK(gkv_tensor_changed(tx, "t", 8, 2, m2, ch, &n));
    assert_int_equal(n, 2);
    gkv_txn_end(tx);
    GKVT_OK(gkv_tensor_push(f->s, "t", &last, 1, row, sizeof row, NULL));
    GKVT_OK(gkv_txn_begin(f->s, &tx));
    GKVT_OK(gkv_tensor_changed(tx, "t", 8, 2, m2, ch, &n));
    assert_int_equal(n, 1);
    assert_int_equal(ch[0], 0);
    assert_int_equal(ch[1], 1);
    gkv_txn_end(tx);
    /* t replaced under its name, its rows stored again (const 0): every
     * stored chunk's stamp differs, even chunk 2 with the old bytes */
    GKVT_OK(gkv_tensor_delete(f->s, "t"));
    sp.init = GKV_INIT_CONST;
    GKVT_OK(gkv_tensor_create(f->s, "t", &sp));
    GKVT_OK(gkv_tensor_push(f->s, "t", &id, 1, row, sizeof row, NULL));
    GKVT_OK(gkv_txn_begin(f->s, &tx));
    memcpy(old, mark, sizeof mark);
    GKVT_OK(gkv_tensor_changed(tx, "t", 0, 10, mark, ch, &n));
    assert_int_equal(n, 10);
    assert_true(mark[3] != old[3]);
    /* errors: no tensor, chunks past the end, no snapshot or mark */
    memset(mark, 0, sizeof mark);
    assert_int_equal(gkv_tensor_changed(tx, "nope", 0, 1, mark, ch, &n),
                     GKV_ENOTFOUND);
    assert_int_equal(gkv_tensor_changed(tx, "t", 9, 2, mark, ch, &n),
                     GKV_ERANGE);
    assert_non_null(strstr(gkv_store_errmsg(f->s), "has 10 chunks"));
    assert_int_equal(gkv_tensor_changed(tx, NULL, 0, 1, mark, ch, &n),
                     GKV_EINVAL);
    assert_int_equal(gkv_tensor_changed(tx, "t", 0, 1, NULL, ch, &n),
                     GKV_EINVAL);
    assert_int_equal(gkv_tensor_changed(NULL, "t", 0, 1, mark, ch, &n),
                     GKV_EINVAL);
    gkv_txn_end(tx);
    gkv_txn_end(t0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_error_list_is_complete),
        cmocka_unit_test(test_dtypes_and_halves),
        cmocka_unit_test(test_open_missing_and_not_a_store),
        cmocka_unit_test(test_newer_format_is_eversion),
        cmocka_unit_test(test_store_fds_close_on_exec),
        cmocka_unit_test_setup_teardown(test_read_only_store_refuses_writes, setup, teardown),
        cmocka_unit_test(test_second_handle_refused),
        cmocka_unit_test(test_fork_during_open),
        cmocka_unit_test(test_inherited_handle_after_fork),
        cmocka_unit_test(test_snapshot_holder_not_stalled),
        cmocka_unit_test(test_lock_file_not_writable),
        cmocka_unit_test(test_empty_data_mdb),
        cmocka_unit_test(test_truncated_data_mdb),
        cmocka_unit_test(test_short_sound_data_mdb),
        cmocka_unit_test(test_cut_past_slack),
        cmocka_unit_test(test_stat_free_bytes),
        cmocka_unit_test_setup_teardown(test_verify_finds_flipped_byte, setup, teardown),
        cmocka_unit_test_setup_teardown(test_verify_finds_missing_chunks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stat_prefault_sync, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tensor_changed_since_snapshot, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
