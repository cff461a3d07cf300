/* kv_limits_test.c - kv/ at its limits (regression tests): verify reports
 * orphan data keys; ID ranges near 2^64; byte counts that overflow size_t;
 * corrupt catalog records; an optimizer push larger than LMDB's dirty-page
 * limit; write-back larger than memory. Each test failed before its fix
 * (write-back's start and stop under concurrent calls:
 * kv_wb_start_stop_test.c). Calls that crashed or hung before the fix
 * run in a child process, so a regression fails the test instead of
 * killing the run. */
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
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
    return gkvt_store_setup(state, sizeof(struct fx), "kvlimits");
}

static int
teardown(void **state)
{
    return gkvt_store_teardown(state);
}

static gkv_tensor_spec
spec(gkv_dtype dt, uint64_t width, uint64_t lo, uint64_t hi, uint32_t cr)
{
    gkv_tensor_spec sp = gkvt_spec(dt, width, lo, hi);

    sp.chunk_rows = cr;
    return sp;
}

/* ---- raw LMDB access (the gkv handle must be closed) -------------------- */

static void
raw_open(const char *dir, const char *db, MDB_env **env, MDB_txn **txn,
         MDB_dbi *dbi)
{
    assert_int_equal(mdb_env_create(env), 0);
    assert_int_equal(mdb_env_set_maxdbs(*env, 4), 0);
    assert_int_equal(mdb_env_open(*env, dir, 0, 0644), 0);
    assert_int_equal(mdb_txn_begin(*env, NULL, 0, txn), 0);
    assert_int_equal(mdb_dbi_open(*txn, db, 0, dbi), 0);
}

static void
raw_close(MDB_env *env, MDB_txn *txn)
{
    assert_int_equal(mdb_txn_commit(txn), 0);
    mdb_env_close(env);
}

/* Puts key -> val into database 'db' of the store in 'dir'. */
static void
raw_put(const char *dir, const char *db, const void *key, size_t klen,
        const void *val, size_t vlen)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    MDB_val k = {klen, (void *)key}, d = {vlen, (void *)val};

    raw_open(dir, db, &env, &txn, &dbi);
    assert_int_equal(mdb_put(txn, dbi, &k, &d, 0), 0);
    raw_close(env, txn);
}

/* Deletes a key of 'db'. */
static void
raw_del(const char *dir, const char *db, const void *key, size_t klen)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    MDB_val k = {klen, (void *)key};

    raw_open(dir, db, &env, &txn, &dbi);
    assert_int_equal(mdb_del(txn, dbi, &k, NULL), 0);
    raw_close(env, txn);
}

/* Number of keys in 'db'. */
static size_t
raw_count(const char *dir, const char *db)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    MDB_stat ms;

    raw_open(dir, db, &env, &txn, &dbi);
    assert_int_equal(mdb_stat(txn, dbi, &ms), 0);
    raw_close(env, txn);
    return ms.ms_entries;
}

/* ---- running a call in a child process ---------------------------------- */

/* What a child reports back through shared memory. */
struct child_out {
    int done;                 /* 1 once fn returned */
    int rc;                   /* fn's gkv_err */
    char msg[GKV__MSG_MAX];     /* gkv_store_errmsg after fn */
    unsigned char data[4096]; /* whatever fn wants to hand back */
};

typedef gkv_err (*child_fn)(gkv_store *s, void *arg, struct child_out *o);

/* Opens the store in 'dir' in a child process and runs fn there, killed
 * after 'secs' (a hang). The parent's handle must be closed: LMDB handles
 * do not survive fork. Returns the shared result (munmap it); o->done is 0
 * when the child crashed or hung, and *status says how it ended. */
static struct child_out *
in_child(const char *dir, child_fn fn, void *arg, unsigned secs, int *status)
{
    struct child_out *o = mmap(NULL, sizeof *o, PROT_READ | PROT_WRITE,
                               MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    pid_t pid;

    assert_true(o != MAP_FAILED);
    memset(o, 0, sizeof *o);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        gkv_store *s;
        gkv_err rc;

        /* cmocka's handlers would carry on with the test run in here */
        signal(SIGSEGV, SIG_DFL);
        signal(SIGBUS, SIG_DFL);
        signal(SIGFPE, SIG_DFL);
        signal(SIGILL, SIG_DFL);
        signal(SIGABRT, SIG_DFL);
        alarm(secs);
        if ((rc = gkv_store_open(&s, dir, 0, NULL)) != GKV_OK)
            _exit(2);
        o->rc = fn(s, arg, o);
        snprintf(o->msg, sizeof o->msg, "%s", gkv_store_errmsg(s));
        o->done = 1;
        gkv_store_close(s);
        _exit(0);
    }
    assert_int_equal(waitpid(pid, status, 0), pid);
    if (!o->done)
        print_message("  child %s %d\n", WIFSIGNALED(*status) ? "died of signal"
                      : "exited with", WIFSIGNALED(*status) ? WTERMSIG(*status)
                      : WEXITSTATUS(*status));
    return o;
}

/* A buffer of 'len' bytes whose next byte is the first of a page that
 * cannot be touched: running past the end faults at once. Leaks (children
 * only). */
static unsigned char *
guarded(size_t len)
{
    size_t ps = (size_t)sysconf(_SC_PAGESIZE), span = (len + ps - 1) / ps * ps;
    unsigned char *m = mmap(NULL, span + ps, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

    if (m == MAP_FAILED || mprotect(m + span, ps, PROT_NONE) != 0)
        return NULL;
    return m + span - len;
}

/* ---- verify: orphan data keys ------------------------------------------- */

static void
test_verify_reports_orphan_keys(void **state)
{
    struct fx *f = *state;
    gkv_tensor_spec cs = spec(GKV_F32, 4, 0, 40, 10), zs = spec(GKV_F32, 4, 0, 40, 10);
    gkv_verify_report rep;
    unsigned char k99[KV_KEY_LEN], ka[KV_KEY_LEN], val[20] = {0};
    float row[4] = {1, 2, 3, 4};
    uint64_t id = 15;
    gkv_tensor_desc d;

    cs.init = GKV_INIT_CONST;
    cs.a = 2;
    GKVT_OK(gkv_tensor_create(f->s, "a", &cs));         /* 4 chunks */
    GKVT_OK(gkv_tensor_create(f->s, "z", &zs));         /* none yet */
    GKVT_OK(gkv_tensor_push(f->s, "z", &id, 1, row, sizeof row, NULL));
    GKVT_OK(gkv_tensor_info(f->s, NULL, "a", &d));
    /* a clean store: nothing to report */
    GKVT_OK(gkv_store_verify(f->s, NULL, &rep));
    assert_int_equal(rep.chunks_checked, 5);
    assert_int_equal(rep.bad_chunks, 0);
    assert_int_equal(rep.orphan_keys, 0);
    assert_string_equal(gkv_store_errmsg(f->s), "");
    gkv_store_close(f->s);
    f->s = NULL;

    /* a chunk key of a tensor id no record has, and a 5-byte key */
    kv__key(k99, 99, 0);
    raw_put(f->dir, "data", k99, sizeof k99, val, sizeof val);
    raw_put(f->dir, "data", "abcde", 5, "x", 1);
    GKVT_OK(gkv_store_open(&f->s, f->dir, GKV_RDONLY, NULL));
    assert_int_equal(gkv_store_verify(f->s, NULL, &rep), GKV_ECORRUPT);
    assert_int_equal(rep.orphan_keys, 2);
    assert_int_equal(rep.bad_chunks, 0);
    assert_int_equal(rep.chunks_checked, 5);
    assert_string_equal(rep.first_bad, "");
    /* the first in key order is named: tid 99 sorts before "abcde" */
    assert_string_equal(gkv_store_errmsg(f->s), "2 orphan data keys; first: "
                        "tensor id 99, chunk 0: no tensor has that id");
    /* orphans belong to no tensor: a named verify does not look for them */
    GKVT_OK(gkv_store_verify(f->s, "a", &rep));
    assert_int_equal(rep.orphan_keys, 0);
    /* kvctl says so: exit 1, the count on stdout (text and JSON), the
     * first orphan on stderr */
    {
        char *argv[] = {(char *)gkvt_prog("kvctl"), f->dir, "verify", NULL};
        char *jargv[] = {(char *)gkvt_prog("kvctl"), "--json", f->dir,
                         "verify", NULL};
        char *out = NULL, *err = NULL;

        assert_int_equal(gkvt_run(argv, NULL, 0, &out, &err, 30), 1);
        assert_non_null(strstr(out, "CORRUPT: 2 orphan data keys; 5 chunks "
                                    "checked, all good"));
        assert_non_null(strstr(err, "tensor id 99, chunk 0: no tensor has "
                                    "that id"));
        free(out);
        free(err);
        assert_int_equal(gkvt_run(jargv, NULL, 0, &out, &err, 30), 1);
        assert_non_null(strstr(out, "\"orphan_keys\": 2"));
        assert_non_null(strstr(out, "\"bad_chunks\": 0"));
        free(out);
        free(err);
    }
    gkv_store_close(f->s);
    f->s = NULL;

    /* the short key alone */
    raw_del(f->dir, "data", k99, sizeof k99);
    GKVT_OK(gkv_store_open(&f->s, f->dir, GKV_RDONLY, NULL));
    assert_int_equal(gkv_store_verify(f->s, NULL, &rep), GKV_ECORRUPT);
    assert_int_equal(rep.orphan_keys, 1);
    assert_string_equal(gkv_store_errmsg(f->s), "orphan data key: key of 5 "
                        "bytes 61 62 63 64 65: not a 12-byte chunk key");
    gkv_store_close(f->s);
    f->s = NULL;

    /* with a bad chunk too: the chunk comes first, the orphans after */
    kv__key(ka, d.id, 1);
    raw_del(f->dir, "data", ka, sizeof ka);
    GKVT_OK(gkv_store_open(&f->s, f->dir, GKV_RDONLY, NULL));
    assert_int_equal(gkv_store_verify(f->s, NULL, &rep), GKV_ECORRUPT);
    assert_int_equal(rep.bad_chunks, 1);
    assert_int_equal(rep.orphan_keys, 1);
    assert_string_equal(rep.first_bad, "a");
    assert_string_equal(gkv_store_errmsg(f->s), "tensor 'a': chunk 1 (rows "
                        "10..19): chunk is missing; orphan data key: key of 5 "
                        "bytes 61 62 63 64 65: not a 12-byte chunk key");
    gkv_store_close(f->s);
    f->s = NULL;

    /* repaired: clean again */
    raw_del(f->dir, "data", "abcde", 5);
    GKVT_OK(gkv_store_open(&f->s, f->dir, 0, NULL));
    GKVT_OK(gkv_tensor_delete(f->s, "a"));
    GKVT_OK(gkv_store_verify(f->s, NULL, &rep));
    assert_int_equal(rep.orphan_keys, 0);
    assert_int_equal(rep.chunks_checked, 1);
}

/* A key of the wrong length that sorts among a tensor's chunk keys used to
 * end verify's walk (the later chunks were then reported missing, or never
 * checked) and delete's (the later chunks stayed behind as orphans). */
static void
test_key_of_wrong_length_among_chunks(void **state)
{
    struct fx *f = *state;
    gkv_tensor_spec cs = spec(GKV_F32, 4, 0, 100, 10);
    gkv_verify_report rep;
    unsigned char k13[KV_KEY_LEN + 1];
    gkv_tensor_desc d;

    cs.init = GKV_INIT_CONST;
    cs.a = 1.5;
    GKVT_OK(gkv_tensor_create(f->s, "c", &cs));          /* 10 chunks */
    GKVT_OK(gkv_tensor_info(f->s, NULL, "c", &d));
    gkv_store_close(f->s);
    f->s = NULL;
    kv__key(k13, d.id, 3);           /* sorts between chunks 3 and 4 */
    k13[KV_KEY_LEN] = 0;
    raw_put(f->dir, "data", k13, sizeof k13, "junk", 4);
    GKVT_OK(gkv_store_open(&f->s, f->dir, 0, NULL));
    assert_int_equal(gkv_store_verify(f->s, NULL, &rep), GKV_ECORRUPT);
    assert_int_equal(rep.chunks_checked, 10);
    assert_int_equal(rep.bad_chunks, 0);
    assert_int_equal(rep.orphan_keys, 1);
    assert_non_null(strstr(gkv_store_errmsg(f->s), "key of 13 bytes 00 00 00 01 "
                           "00 00 00 00 00 00 00 03 00: not a 12-byte chunk key"));
    GKVT_OK(gkv_store_verify(f->s, "c", &rep));
    assert_int_equal(rep.chunks_checked, 10);
    /* delete removes every key of the tensor, the stray one included */
    GKVT_OK(gkv_tensor_delete(f->s, "c"));
    gkv_store_close(f->s);
    f->s = NULL;
    assert_int_equal(raw_count(f->dir, "data"), 0);
    GKVT_OK(gkv_store_open(&f->s, f->dir, 0, NULL));
    GKVT_OK(gkv_store_verify(f->s, NULL, &rep));
}

/* ---- ID ranges near 2^64 ------------------------------------------------ */

#define FULL_HI UINT64_MAX

static gkv_err
pull_spread(gkv_store *s, void *arg, struct child_out *o)
{
    uint64_t ids[40];

    (void)arg;
    /* 40 IDs in 40 different chunks: more than a 16-slot table holds */
    for (int i = 0; i < 40; i++)
        ids[i] = (uint64_t)i * 16 * 1000003 + 5;
    ids[39] = FULL_HI - 1;
    return gkv_tensor_pull(s, NULL, "wide", ids, 40, o->data, 40 * 16);
}

/* [0, UINT64_MAX) is the natural range of a hashed-ID embedding. Its chunk
 * count, ceil((hi - lo) / chunk_rows), overflowed to 0: verify called every
 * written chunk "past the end", and a pull sized its chunk table from it
 * and spun forever once the table was full. */
static void
test_full_id_range(void **state)
{
    struct fx *f = *state;
    gkv_tensor_spec sp = spec(GKV_F32, 4, 0, FULL_HI, 16);
    gkv_verify_report rep;
    gkv_tensor_desc d;
    uint64_t ids[2] = {5, FULL_HI - 1};
    float rows[2][4] = {{1, 2, 3, 4}, {5, 6, 7, 8}}, got[3][4];
    struct child_out *o;
    int status;

    GKVT_OK(gkv_tensor_create(f->s, "wide", &sp));
    GKVT_OK(gkv_tensor_info(f->s, NULL, "wide", &d));
    assert_int_equal(d.nchunks, 1ull << 60);  /* ceil((2^64 - 1) / 16) */
    GKVT_OK(gkv_tensor_push(f->s, "wide", ids, 2, rows, sizeof rows, NULL));
    GKVT_OK(gkv_store_verify(f->s, NULL, &rep));
    assert_int_equal(rep.chunks_checked, 2);
    GKVT_OK(gkv_tensor_read(f->s, NULL, "wide", FULL_HI - 3, FULL_HI, got,
                            sizeof got));
    assert_memory_equal(got[2], rows[1], sizeof rows[1]);
    assert_true(got[0][0] == 0 && got[1][3] == 0);
    gkv_store_close(f->s);
    f->s = NULL;

    o = in_child(f->dir, pull_spread, NULL, 20, &status);
    assert_int_equal(o->done, 1);
    assert_int_equal(o->rc, GKV_OK);
    assert_memory_equal(o->data, rows[0], 16);              /* ID 5 */
    assert_memory_equal(o->data + 39 * 16, rows[1], 16);    /* ID 2^64 - 2 */
    for (int i = 1; i < 39; i++)
        assert_true(o->data[i * 16] == 0 && o->data[i * 16 + 15] == 0);
    munmap(o, sizeof *o);
    GKVT_OK(gkv_store_open(&f->s, f->dir, 0, NULL));
}

/* ---- byte counts that overflow ------------------------------------------ */

#define HUGE_ROWS ((1ull << 62) + 1)   /* x 4 bytes = 2^64 + 4: wraps to 4 */

static gkv_err
read_huge(gkv_store *s, void *arg, struct child_out *o)
{
    unsigned char *dst = guarded(4);

    (void)arg;
    (void)o;
    return gkv_tensor_read(s, NULL, "huge", 0, HUGE_ROWS, dst, 4);
}

static gkv_err
write_huge(gkv_store *s, void *arg, struct child_out *o)
{
    unsigned char *src = guarded(4);

    (void)arg;
    (void)o;
    memset(src, 0x5a, 4);
    return gkv_tensor_write(s, "huge", 0, HUGE_ROWS, src, 4);
}

/* gkv_writeback_start of the tensor named by arg */
static gkv_err
writeback_arg(gkv_store *s, void *arg, struct child_out *o)
{
    (void)o;
    return gkv_writeback_start(s, (const char *)arg, 0);
}

/* rows x row_bytes was compared with the caller's length without an
 * overflow check: a range of 2^62 + 1 f32 rows "needed" 4 bytes, and the
 * read wrote (the write read) 256 KiB past a 4-byte buffer. A write-back
 * copy of such a tensor was allocated at the wrapped size and read into. */
static void
test_row_bytes_overflow(void **state)
{
    struct fx *f = *state;
    gkv_tensor_spec sp = spec(GKV_F32, 1, 0, HUGE_ROWS, 0);
    struct child_out *o;
    int status;

    sp.ndim = 0;
    GKVT_OK(gkv_tensor_create(f->s, "huge", &sp));
    gkv_store_close(f->s);
    f->s = NULL;

    o = in_child(f->dir, read_huge, NULL, 20, &status);
    assert_int_equal(o->done, 1);
    assert_int_equal(o->rc, GKV_ESHAPE);
    assert_non_null(strstr(o->msg, "tensor 'huge': 4 bytes for"));
    munmap(o, sizeof *o);

    o = in_child(f->dir, write_huge, NULL, 20, &status);
    assert_int_equal(o->done, 1);
    assert_int_equal(o->rc, GKV_ESHAPE);
    munmap(o, sizeof *o);

    o = in_child(f->dir, writeback_arg, "huge", 20, &status);
    assert_int_equal(o->done, 1);
    assert_int_equal(o->rc, GKV_ENOMEM);
    assert_non_null(strstr(o->msg, "write-back copy"));
    munmap(o, sizeof *o);

    GKVT_OK(gkv_store_open(&f->s, f->dir, 0, NULL));
    GKVT_OK(gkv_store_verify(f->s, NULL, NULL));
    assert_int_equal(raw_count(f->dir, "data"), 0);   /* nothing was written */
}

/* A write-back copy larger than the machine's memory is refused before
 * anything is mapped. Where the kernel overcommits (vm.overcommit_memory=1,
 * as on the lent GPU machine) the mapping succeeded and the server filled
 * it for minutes, answering nothing, instead of saying no. The tensor, its
 * rows and the store are as they were. */
static void
test_writeback_larger_than_memory(void **state)
{
    struct fx *f = *state;
    uint64_t phys = (uint64_t)sysconf(_SC_PHYS_PAGES) *
                    (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t rows = phys / 4096 * 2 + 1;      /* 4 KiB rows: twice RAM */
    gkv_tensor_spec sp = spec(GKV_F32, 1024, 0, rows, 0);
    float a[1024], b[1024], got[1024];
    struct child_out *o;
    int status;

    for (int i = 0; i < 1024; i++) {
        a[i] = (float)i;
        b[i] = (float)-i;
    }
    GKVT_OK(gkv_tensor_create(f->s, "big", &sp));
    GKVT_OK(gkv_tensor_write(f->s, "big", 0, 1, a, sizeof a));
    GKVT_OK(gkv_tensor_write(f->s, "big", rows - 1, rows, b, sizeof b));
    gkv_store_close(f->s);
    f->s = NULL;

    o = in_child(f->dir, writeback_arg, "big", 20, &status);
    assert_int_equal(o->done, 1);
    assert_int_equal(o->rc, GKV_ENOMEM);
    if (strstr(o->msg, "tensor 'big': a write-back copy of") == NULL ||
        strstr(o->msg, "is larger than this machine's memory") == NULL)
        fail_msg("message: %s", o->msg);
    munmap(o, sizeof *o);

    GKVT_OK(gkv_store_open(&f->s, f->dir, 0, NULL));
    GKVT_OK(gkv_store_verify(f->s, NULL, NULL));
    GKVT_OK(gkv_tensor_read(f->s, NULL, "big", 0, 1, got, sizeof got));
    assert_memory_equal(got, a, sizeof a);
    GKVT_OK(gkv_tensor_read(f->s, NULL, "big", rows - 1, rows, got,
                            sizeof got));
    assert_memory_equal(got, b, sizeof b);
}

/* stat's data_bytes, the sum of (hi - lo) x row_bytes, wrapped: 2^62 + 1
 * f32 rows counted as 4 bytes, [0, 2^64 - 1) of f64 rows as 2^64 - 8, and
 * two tensors of 2^63 bytes as 0. It saturates at UINT64_MAX instead. */
static void
test_stat_data_bytes_saturates(void **state)
{
    struct fx *f = *state;
    gkv_tensor_spec huge = spec(GKV_F32, 1, 0, HUGE_ROWS, 0);
    gkv_tensor_spec full = spec(GKV_F64, 1, 0, FULL_HI, 0);
    gkv_tensor_spec half = spec(GKV_F64, 1, 0, 1ull << 60, 0);
    gkv_store_stat st;

    huge.ndim = 0;
    full.ndim = 0;
    half.ndim = 0;
    GKVT_OK(gkv_tensor_create(f->s, "huge", &huge));
    GKVT_OK(gkv_store_stat_get(f->s, &st));
    assert_int_equal(st.ntensors, 1);
    assert_int_equal(st.data_bytes, UINT64_MAX);
    GKVT_OK(gkv_tensor_delete(f->s, "huge"));

    GKVT_OK(gkv_tensor_create(f->s, "full", &full));
    GKVT_OK(gkv_store_stat_get(f->s, &st));
    assert_int_equal(st.data_bytes, UINT64_MAX);
    GKVT_OK(gkv_tensor_delete(f->s, "full"));

    GKVT_OK(gkv_tensor_create(f->s, "h1", &half));
    GKVT_OK(gkv_store_stat_get(f->s, &st));
    assert_int_equal(st.data_bytes, 1ull << 63);  /* exact below the cap */
    GKVT_OK(gkv_tensor_create(f->s, "h2", &half));
    GKVT_OK(gkv_store_stat_get(f->s, &st));
    assert_int_equal(st.ntensors, 2);
    assert_int_equal(st.data_bytes, UINT64_MAX);
    GKVT_OK(gkv_tensor_create(f->s, "h3", &half));  /* stays at the cap */
    GKVT_OK(gkv_store_stat_get(f->s, &st));
    assert_int_equal(st.data_bytes, UINT64_MAX);
}

/* ---- corrupt catalog records ------------------------------------------- */

/* A record whose row shape multiplies past 2^64 decoded to row_bytes 0:
 * info described it, the length checks divided by it, a push of one row
 * of 0 bytes succeeded and wrote a chunk, and verify passed. It must read
 * as a corrupt record. */
static void
test_catalog_record_with_overflowing_shape(void **state)
{
    struct fx *f = *state;
    gkv_tensor_spec sp = spec(GKV_F32, 4, 0, 10, 0);
    unsigned char rec[104];
    uint64_t big = 1ull << 62;      /* x 4 bytes = 2^64: row_bytes wraps to 0 */
    uint64_t id = 1;
    float row[4] = {1, 2, 3, 4};
    gkv_tensor_desc d;
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    MDB_val k = {1, "t"}, v;

    GKVT_OK(gkv_tensor_create(f->s, "t", &sp));
    gkv_store_close(f->s);
    f->s = NULL;
    raw_open(f->dir, "catalog", &env, &txn, &dbi);
    assert_int_equal(mdb_get(txn, dbi, &k, &v), 0);
    assert_int_equal(v.mv_size, sizeof rec);
    memcpy(rec, v.mv_data, sizeof rec);
    raw_close(env, txn);
    memcpy(rec + 32, &big, 8);                           /* shape[0] */
    raw_put(f->dir, "catalog", "t", 1, rec, sizeof rec);

    GKVT_OK(gkv_store_open(&f->s, f->dir, 0, NULL));
    assert_int_equal(gkv_tensor_info(f->s, NULL, "t", &d), GKV_ECORRUPT);
    assert_string_equal(gkv_store_errmsg(f->s), "tensor 't': catalog record "
                        "is corrupt or from a newer gkv");
    assert_int_equal(gkv_tensor_push(f->s, "t", &id, 1, row, 0, NULL),
                     GKV_ECORRUPT);
    assert_int_equal(gkv_store_verify(f->s, NULL, NULL), GKV_ECORRUPT);
    gkv_store_close(f->s);
    f->s = NULL;
    assert_int_equal(raw_count(f->dir, "data"), 0);
    GKVT_OK(gkv_store_open(&f->s, f->dir, 0, NULL));
}

/* KiB of this process's mappings that asked for huge pages (VmFlags "hg"
 * in smaps): write-back's mirrors and flush stage (big_alloc), and nothing
 * of malloc's, so a sanitizer's allocator does not blur it. */
static long
hugepage_kib(void)
{
    char *sm = gkvt_slurp("/proc/self/smaps"), *line, *save = NULL;
    unsigned long lo, hi, len = 0;
    long kib = 0;

    for (line = strtok_r(sm, "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save)) {
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2)
            len = hi - lo;
        else if (strncmp(line, "VmFlags:", 8) == 0 && strstr(line, " hg") != NULL)
            kib += (long)(len >> 10);
    }
    free(sm);
    return kib;
}

/* A flush copies the dirty rows into a staging area (mapped memory) kept
 * for the next flush. Closing the store did not unmap it when no tensor was
 * in write-back mode any more: each open, write-back, stop, close leaked as
 * much memory as the largest flush. */
static void
test_close_frees_the_flush_stage(void **state)
{
    struct fx *f = *state;
    const uint64_t rows = 4u << 20;                 /* 16 MiB of f32 */
    gkv_tensor_spec sp = spec(GKV_F32, 1, 0, rows, 0);
    float *v = malloc(rows * sizeof *v);
    long before, after;

    sp.ndim = 0;
    for (uint64_t i = 0; i < rows; i++)
        v[i] = (float)i;
    GKVT_OK(gkv_tensor_create(f->s, "t", &sp));
    gkv_store_close(f->s);
    f->s = NULL;
    before = hugepage_kib();
    for (int round = 0; round < 3; round++) {
        GKVT_OK(gkv_store_open(&f->s, f->dir, GKV_NOSYNC, NULL));
        GKVT_OK(gkv_writeback_start(f->s, "t", 60000));
        GKVT_OK(gkv_tensor_write(f->s, "t", 0, rows, v, rows * sizeof *v));
        GKVT_OK(gkv_writeback_stop(f->s, "t"));   /* flushes 16 MiB */
        gkv_store_close(f->s);
        f->s = NULL;
    }
    after = hugepage_kib();
    free(v);
    if (after != before)
        fail_msg("huge-page mappings: %ld KiB before, %ld KiB after three "
                 "rounds of 16 MiB", before, after);
    GKVT_OK(gkv_store_open(&f->s, f->dir, 0, NULL));
}

/* Regression: an optimizer push touching more pages than LMDB keeps dirty
 * in one transaction (131071) made LMDB spill pages, and a chunk pointer
 * taken before the state chunks were written went stale (wrong rows, NaN).
 * Adagrad on a HOT tensor, every row pushed once, checked against the rule
 * computed here. */
static void
test_big_adagrad_push(void **state)
{
    const uint64_t n = 480000, w = 128;       /* 2 x 68,572 chunk pages */
    char *dir = gkvt_mkdtemp("bigpush");
    gkv_tensor_spec sp = gkvt_spec_init(GKV_F32, w, 100, 100 + n,
                                        GKV_INIT_UNIFORM);
    uint64_t *ids = malloc(n * sizeof *ids), rs = gkvt_seed() ^ 5;
    float *g = malloc(n * w * sizeof *g), *w0, *w1;
    gkv_push_args pa = {"adagrad", 0.1, 1e-10, 0, 0, 0};
    gkv_store *s;
    size_t len;

    (void)state;
    sp.flags = GKV_TENSOR_HOT;
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE | GKV_NOSYNC, NULL));
    GKVT_OK(gkv_tensor_create(s, "e", &sp));
    for (uint64_t i = 0; i < n; i++)
        ids[i] = 100 + i;
    for (uint64_t i = n - 1; i > 0; i--) {           /* shuffle */
        uint64_t j = tools__splitmix64(&rs) % (i + 1), t = ids[i];
        ids[i] = ids[j];
        ids[j] = t;
    }
    for (uint64_t i = 0; i < n * w; i++)
        g[i] = (float)((int)(tools__splitmix64(&rs) % 2001) - 1000) / 500.0f;
    w0 = (float *)gkvt_tensor_dump(s, NULL, "e", &len);
    assert_int_equal(len, n * w * sizeof *w0);
    GKVT_OK(gkv_tensor_push(s, "e", ids, n, g, n * w * sizeof *g, &pa));
    w1 = (float *)gkvt_tensor_dump(s, NULL, "e", &len);
    assert_int_equal(len, n * w * sizeof *w1);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t r = ids[i] - 100;
        for (uint64_t j = 0; j < w; j++) {
            float gg = g[i * w + j], ss = gg * gg;
            float want = (float)((double)w0[r * w + j] -
                                 0.1 * gg / (sqrt((double)ss) + 1e-10));
            if (w1[r * w + j] != want) {
                fprintf(stderr, "row %llu col %llu: %.9g, expected %.9g\n",
                        (unsigned long long)ids[i], (unsigned long long)j,
                        w1[r * w + j], want);
                fail();
            }
        }
    }
    GKVT_OK(gkv_store_verify(s, NULL, NULL));
    free(ids);
    free(g);
    free(w0);
    free(w1);
    gkv_store_close(s);
    gkvt_rmtree(dir);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_verify_reports_orphan_keys, setup, teardown),
        cmocka_unit_test_setup_teardown(test_key_of_wrong_length_among_chunks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_full_id_range, setup, teardown),
        cmocka_unit_test_setup_teardown(test_row_bytes_overflow, setup, teardown),
        cmocka_unit_test_setup_teardown(test_writeback_larger_than_memory, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stat_data_bytes_saturates, setup, teardown),
        cmocka_unit_test_setup_teardown(test_catalog_record_with_overflowing_shape, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_frees_the_flush_stage, setup, teardown),
        cmocka_unit_test(test_big_adagrad_push),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
