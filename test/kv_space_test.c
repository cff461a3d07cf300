/* kv_space_test.c - a store's space: the map grows from a tiny size; a
 * full disk (a small tmpfs, or a map with room on a full disk) is
 * GKV_EMAPFULL for a create or push, which then changes nothing; a delete
 * makes room again. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <pthread.h>
#include <unistd.h>
#include "gkvt.h"
#include "kv/kv_test.h"

/* A tensor whose initializer would write more than the disk can hold (a
 * mistyped range) is refused at once with GKV_EMAPFULL, before a byte is
 * written: materializing it held every row in RAM until the commit, and
 * such a create ran the process out of memory. On a 12 MiB disk (so that
 * a regression fails at once when the map cannot grow, instead of writing
 * petabytes): 20 MB of rows, and 2^62 rows of 16 bytes (bytes past 2^64:
 * counted as 2^64 - 1, not wrapped); the same range of zeros stores
 * nothing and is fine; and the store's own file counts as room: 7 MB
 * created, deleted, then created again (more than the free disk, less than
 * the file's freed pages plus it) is not refused. */
static void
test_create_beyond_disk_refused(void **state)
{
    char *dir = gkvt_mkdtemp("tmpfs");
    gkv_tensor_spec sp = gkvt_spec(GKV_F32, 128, 0, 40000);   /* 20 MB */
    gkv_tensor_desc d;
    gkv_store *s;
    double t0;

    (void)state;
    gkvt_tmpfs_or_skip(dir, "size=12m");
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE, &(gkv_open_opts){1u << 20, 0}));
    sp.init = GKV_INIT_CONST;
    sp.a = 1;
    t0 = tools__now_s();
    assert_int_equal(gkv_tensor_create(s, "big", &sp), GKV_EMAPFULL);
    assert_non_null(strstr(gkv_store_errmsg(s), "tensor 'big': its "
                           "initializer writes 20480000 bytes"));
    sp = gkvt_spec(GKV_F32, 4, 0, 1ull << 62);
    sp.init = GKV_INIT_CONST;
    sp.a = 1;
    assert_int_equal(gkv_tensor_create(s, "huge", &sp), GKV_EMAPFULL);
    assert_non_null(strstr(gkv_store_errmsg(s), "writes 18446744073709551615 "
                           "bytes"));
    assert_true(tools__now_s() - t0 < 5);
    assert_int_equal(gkv_tensor_info(s, NULL, "huge", &d), GKV_ENOTFOUND);
    sp.init = GKV_INIT_ZEROS;
    GKVT_OK(gkv_tensor_create(s, "huge", &sp));
    sp = gkvt_spec(GKV_F32, 128, 0, 14000);                  /* 7.2 MB */
    sp.init = GKV_INIT_CONST;
    sp.a = 1;
    GKVT_OK(gkv_tensor_create(s, "a", &sp));
    GKVT_OK(gkv_tensor_delete(s, "a"));
    GKVT_OK(gkv_tensor_create(s, "b", &sp));
    GKVT_OK(gkv_store_verify(s, NULL, NULL));
    gkv_store_close(s);
    gkvt_tmpfs_done(dir);
}

static void
test_tiny_map_grows(void **state)
{
    char *dir = gkvt_mkdtemp("grow");
    gkv_open_opts o = {1u << 20, 0};              /* 1 MiB map */
    gkv_tensor_spec sp = gkvt_spec(GKV_F32, 128, 0, 40000);   /* 20 MB */
    gkv_store *s, *s2;
    gkv_store_stat st;
    gkv_txn *tx;
    uint64_t id = 39999;
    float got[128];

    (void)state;
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE, &o));
    GKVT_OK(gkv_store_stat_get(s, &st));
    assert_true(st.map_size <= (2u << 20));
    sp.init = GKV_INIT_CONST;
    sp.a = 3;
    GKVT_OK(gkv_tensor_create(s, "t", &sp));
    GKVT_OK(gkv_store_stat_get(s, &st));
    assert_true(st.map_size >= 20u << 20);
    GKVT_OK(gkv_tensor_pull(s, NULL, "t", &id, 1, got, sizeof got));
    assert_true(got[127] == 3.0f);
    /* another process adopts the grown map and grows it further; this
     * handle adopts what it set */
    {
        pid_t pid = fork();
        int wst;

        assert_true(pid >= 0);
        if (pid == 0)
            _exit(gkv_store_open(&s2, dir, 0, &o) == GKV_OK &&
                  gkv_tensor_create(s2, "u", &sp) == GKV_OK ? 0 : 1);
        assert_int_equal(waitpid(pid, &wst, 0), pid);
        assert_true(WIFEXITED(wst) && WEXITSTATUS(wst) == 0);
    }
    GKVT_OK(gkv_tensor_pull(s, NULL, "u", &id, 1, got, sizeof got));
    assert_true(got[0] == 3.0f);
    /* while a snapshot of this handle stays open, the map cannot grow:
     * the write fails cleanly and changes nothing */
    kv__grow_wait_ms = 200;
    GKVT_OK(gkv_txn_begin(s, &tx));
    sp.hi = 400000;
    assert_int_equal(gkv_tensor_create(s, "v", &sp), GKV_EMAPFULL);
    assert_non_null(strstr(gkv_store_errmsg(s), "snapshots"));
    gkv_txn_end(tx);
    kv__grow_wait_ms = 10000;
    assert_int_equal(gkv_tensor_info(s, NULL, "v", &(gkv_tensor_desc){0}), GKV_ENOTFOUND);
    GKVT_OK(gkv_tensor_create(s, "v", &sp));
    GKVT_OK(gkv_store_verify(s, NULL, NULL));
    gkv_store_close(s);
    gkvt_rmtree(dir);
}

static void
test_disk_full_is_emapfull(void **state)
{
    char *dir = gkvt_mkdtemp("tmpfs");
    gkv_tensor_spec sp = gkvt_spec(GKV_F32, 128, 0, 4000);   /* 2 MB */
    gkv_store *s;
    size_t len, len2;
    unsigned char *b0, *b1;

    (void)state;
    gkvt_tmpfs_or_skip(dir, "size=12m");
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE, &(gkv_open_opts){1u << 20, 0}));
    sp.init = GKV_INIT_CONST;
    sp.a = 1;
    GKVT_OK(gkv_tensor_create(s, "small", &sp));
    b0 = gkvt_tensor_all(s, NULL, "small", &len);
    sp.hi = 40000;                                        /* 20 MB > 12 MB disk */
    assert_int_equal(gkv_tensor_create(s, "huge", &sp), GKV_EMAPFULL);
    assert_non_null(strstr(gkv_store_errmsg(s), "disk"));
    b1 = gkvt_tensor_all(s, NULL, "small", &len2);
    assert_memory_equal(b0, b1, len);
    GKVT_OK(gkv_store_verify(s, NULL, NULL));
    gkv_store_close(s);
    /* and it reopens with exactly the committed data */
    GKVT_OK(gkv_store_open(&s, dir, 0, NULL));
    free(b1);
    b1 = gkvt_tensor_all(s, NULL, "small", &len2);
    assert_memory_equal(b0, b1, len);
    gkv_store_close(s);
    free(b0);
    free(b1);
    gkvt_tmpfs_done(dir);
}

/* A push copies each chunk it touches whole (a missing one is made), so a
 * few thousand IDs spread over a large zero tensor cost a chunk each:
 * 2000 IDs 2^24 apart, 32 KB of rows, needed 512 MB of RAM and disk. On a
 * 12 MiB disk it is GKV_EMAPFULL at once, naming the chunks; nothing
 * changes; a push of IDs in a few chunks goes through. */
static void
test_push_beyond_disk_refused(void **state)
{
    char *dir = gkvt_mkdtemp("tmpfs");
    gkv_tensor_spec sp = gkvt_spec(GKV_F32, 4, 0, 1ull << 40);
    gkv_push_args add = {"add", 0, 0, 0, 0, 0};
    static uint64_t ids[2000];
    static float rows[2000 * 4], got[4];
    gkv_store_stat st0, st1;
    gkv_store *s;

    (void)state;
    gkvt_tmpfs_or_skip(dir, "size=12m");
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE, &(gkv_open_opts){1u << 20, 0}));
    GKVT_OK(gkv_tensor_create(s, "t", &sp));          /* zeros: no chunks */
    for (int i = 0; i < 2000; i++) {
        ids[i] = (uint64_t)i << 24;
        rows[i * 4] = 1;
    }
    GKVT_OK(gkv_store_stat_get(s, &st0));
    assert_int_equal(gkv_tensor_push(s, "t", ids, 2000, rows, sizeof rows, &add),
                     GKV_EMAPFULL);
    assert_non_null(strstr(gkv_store_errmsg(s), "tensor 't': the push touches "
                           "2000 chunks"));
    GKVT_OK(gkv_store_stat_get(s, &st1));
    assert_int_equal(st1.nchunks, st0.nchunks);
    /* IDs 0, 1 and 2 share a chunk */
    ids[1] = 1;
    ids[2] = 2;
    GKVT_OK(gkv_tensor_push(s, "t", ids, 3, rows, 3 * 16, &add));
    GKVT_OK(gkv_tensor_pull(s, NULL, "t", ids + 2, 1, got, sizeof got));
    assert_true(got[0] == 1 && got[1] == 0);
    GKVT_OK(gkv_store_verify(s, NULL, NULL));
    gkv_store_close(s);
    gkvt_tmpfs_done(dir);
}

/* On a full disk, a tensor deleted makes room for the next write at once:
 * LMDB keeps the pages the last commit freed (a torn next commit must find
 * its tree whole), so the create after the delete failed GKV_EMAPFULL
 * until some other write committed; the store now commits once more and
 * retries. The other tensors keep their bytes. */
static void
test_disk_full_delete_makes_room(void **state)
{
    char *dir = gkvt_mkdtemp("tmpfs"), name[16];
    gkv_tensor_spec sp = gkvt_spec(GKV_F32, 256, 0, 1024);   /* 1 MiB */
    gkv_store *s;
    size_t len, len2;
    unsigned char *b0, *b1;
    gkv_err rc = GKV_OK;
    int made = 0;

    (void)state;
    gkvt_tmpfs_or_skip(dir, "size=6m");
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE, NULL));
    sp.init = GKV_INIT_CONST;
    sp.a = 3;
    while (made < 20) {
        snprintf(name, sizeof name, "t%d", made);
        if ((rc = gkv_tensor_create(s, name, &sp)) != GKV_OK)
            break;
        made++;
    }
    assert_int_equal(rc, GKV_EMAPFULL);             /* the disk is full */
    assert_true(made >= 2);
    b0 = gkvt_tensor_all(s, NULL, "t0", &len);
    GKVT_OK(gkv_tensor_delete(s, "t1"));
    GKVT_OK(gkv_tensor_create(s, "again", &sp));
    b1 = gkvt_tensor_all(s, NULL, "t0", &len2);
    assert_memory_equal(b0, b1, len);
    free(b1);
    b1 = gkvt_tensor_all(s, NULL, "again", &len2);
    assert_int_equal(len2, len);
    assert_memory_equal(b0, b1, len);               /* the same const rows */
    GKVT_OK(gkv_store_verify(s, NULL, NULL));
    gkv_store_close(s);
    free(b0);
    free(b1);
    gkvt_tmpfs_done(dir);
}

/* A disk that fills while the map has room (the default 1 GiB map on a
 * 12 MB tmpfs): LMDB's short write comes back as EIO; the commit's error
 * says the disk is full (GKV_EMAPFULL, as when the map cannot grow), and
 * what was committed before is intact. Root only. */
static void
test_disk_full_with_room_in_map(void **state)
{
    char *dir = gkvt_mkdtemp("tmpfs");
    gkv_tensor_spec sp = gkvt_spec(GKV_F32, 128, 0, 4000);   /* 2 MB */
    gkv_store *s;
    unsigned char *b0, *b1, *big;
    size_t len, len2, bl = (size_t)40000 * 512;               /* 20 MB */
    gkv_err rc;

    (void)state;
    gkvt_tmpfs_or_skip(dir, "size=12m");
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE, NULL));
    sp.init = GKV_INIT_CONST;
    sp.a = 1;
    GKVT_OK(gkv_tensor_create(s, "small", &sp));
    b0 = gkvt_tensor_all(s, NULL, "small", &len);
    sp.hi = 40000;
    sp.init = GKV_INIT_ZEROS;
    GKVT_OK(gkv_tensor_create(s, "huge", &sp));  /* zeros: no pages yet */
    big = malloc(bl);
    memset(big, 7, bl);
    rc = gkv_tensor_write(s, "huge", 0, 40000, big, bl);
    if (rc != GKV_EMAPFULL || strstr(gkv_store_errmsg(s), "disk") == NULL)
        fail_msg("rc %d: %s", (int)rc, gkv_store_errmsg(s));
    b1 = gkvt_tensor_all(s, NULL, "small", &len2);
    assert_memory_equal(b0, b1, len);
    GKVT_OK(gkv_store_verify(s, NULL, NULL));
    gkv_store_close(s);
    free(b0);
    free(b1);
    free(big);
    gkvt_tmpfs_done(dir);
}

/* A file system with no free block: creating a store is an error naming
 * the lock file, not SIGBUS when LMDB touches the lock file it could only
 * ftruncate; nothing is left in the directory. Root only (a tmpfs). */
static void
test_full_disk_at_create(void **state)
{
    char *dir = gkvt_mkdtemp("tmpfs"), p[4200], fill[4096];
    gkv_store *s = NULL;
    int fd;

    (void)state;
    gkvt_tmpfs_or_skip(dir, "size=1m");
    snprintf(p, sizeof p, "%s/fill", dir);
    fd = open(p, O_WRONLY | O_CREAT, 0644);
    assert_true(fd >= 0);
    memset(fill, 1, sizeof fill);
    while (write(fd, fill, sizeof fill) == (ssize_t)sizeof fill)
        ;
    close(fd);
    snprintf(p, sizeof p, "%s/st", dir);
    assert_int_equal(gkv_store_open(&s, p, GKV_CREATE, NULL), GKV_EMAPFULL);
    assert_null(s);
    if (strstr(gkv_store_errmsg(NULL), "lock file") == NULL ||
        strstr(gkv_store_errmsg(NULL), "No space left") == NULL)
        fail_msg("message: %s", gkv_store_errmsg(NULL));
    snprintf(p, sizeof p, "%s/st/lock.mdb", dir);
    assert_int_equal(access(p, F_OK), -1);
    gkvt_tmpfs_done(dir);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_beyond_disk_refused),
        cmocka_unit_test(test_disk_full_delete_makes_room),
        cmocka_unit_test(test_push_beyond_disk_refused),
        cmocka_unit_test(test_tiny_map_grows),
        cmocka_unit_test(test_disk_full_is_emapfull),
        cmocka_unit_test(test_full_disk_at_create),
        cmocka_unit_test(test_disk_full_with_room_in_map),
    };
    return cmocka_run_group_tests_name("kv_space", tests, NULL, NULL);
}
