/* kv_wb_process_test.c - write-back mode and other processes: a tensor one
 * process holds in write-back is that process's to write (the write-back
 * lock, kept across fork, released when the owner stops, closes or dies;
 * names matched whole), and a tensor another process deletes or replaces
 * is dropped from the flush, which goes on with the others. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "gkvt.h"
#include "gkvt_wb.h"
#include "kv/kv_test.h"     /* st_wbo_fd */

#define W 8            /* row width (f32) of the small tensors */
#define N 3000         /* rows */

/* Forks a child that opens its own handle on dir, keeps 'name' in
 * write-back on it, closes the handle 'inherited' (not NULL) it got from
 * this process, and waits to be killed (gkvt_kill_child; it dies with this
 * program too); returns once it holds the tensor. */
static pid_t
wb_holder(const char *dir, const char *name, gkv_store *inherited)
{
    int pfd[2];
    pid_t kid;
    char c;

    assert_int_equal(pipe(pfd), 0);
    if ((kid = fork()) == 0) {
        gkv_store *cs;

        gkvt_die_with_parent();
        if (gkv_store_open(&cs, dir, GKV_NOSYNC, NULL) != GKV_OK ||
            gkv_writeback_start(cs, name, 100000) != GKV_OK)
            _exit(1);
        if (inherited != NULL)
            gkv_store_close(inherited);
        if (write(pfd[1], "w", 1) != 1)
            _exit(1);
        for (;;)
            pause();
    }
    assert_true(kid > 0);
    close(pfd[1]);
    assert_int_equal(read(pfd[0], &c, 1), 1);
    close(pfd[0]);
    return kid;
}

/* kvctl on the directory, with args; returns its exit status, its
 * stderr in *err (the caller frees it). */
static int
kvctl_on(const char *dir, char **err, const char *a1, const char *a2,
         const char *a3, const char *a4)
{
    char *argv[] = {(char *)gkvt_prog("kvctl"), (char *)dir, (char *)a1,
                    (char *)a2, (char *)a3, (char *)a4, NULL};

    *err = NULL;
    return gkvt_run(argv, NULL, 0, NULL, err, 60);
}

/* A tensor one process holds in write-back is that process's to write:
 * another process's put, restore of its state, delete or rename of it is
 * refused (GKV_EBUSY naming the process: the owner's next flush would have
 * overwritten the write, or mixed it into a chunk); other tensors are
 * not, and a second process cannot keep the store's tensors in write-back
 * at the same time. Once the owner stops, closes or dies, they are free.
 * Before, `kvctl put` reported success and the next flush undid it. */
static void
test_wb_owned_across_processes(void **state)
{
    char *dir = gkvt_mkdtemp("wbown"), *err, pidtext[64];
    gkv_tensor_spec sp = gkvt_wb_spec(N, W, 0);
    uint64_t id = 150;
    float row[W];
    gkv_store *s;
    int st;
    pid_t kid;

    (void)state;
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE | GKV_NOSYNC, NULL));
    GKVT_OK(gkv_tensor_create(s, "t", &sp));
    GKVT_OK(gkv_tensor_create(s, "u", &sp));
    GKVT_OK(gkv_writeback_start(s, "t", 100000));
    snprintf(pidtext, sizeof pidtext, "by process %ld", (long)getpid());
    assert_int_equal(kvctl_on(dir, &err, "put", "t", "150",
                              "1,2,3,4,5,6,7,8"), 1);
    if (strstr(err, "kept in write-back mode") == NULL ||
        strstr(err, pidtext) == NULL)
        fail_msg("put: %s", err);
    free(err);
    assert_int_equal(kvctl_on(dir, &err, "rm", "t", NULL, NULL), 1);
    assert_non_null(strstr(err, pidtext));
    free(err);
    assert_int_equal(kvctl_on(dir, &err, "rename", "t", "t2", NULL), 1);
    free(err);
    assert_int_equal(kvctl_on(dir, &err, "reset-opt", "t", NULL, NULL), 1);
    free(err);
    /* a tensor not in write-back is anyone's */
    assert_int_equal(kvctl_on(dir, &err, "put", "u", "150",
                              "1,2,3,4,5,6,7,8"), 0);
    free(err);
    GKVT_OK(gkv_tensor_pull(s, NULL, "u", &id, 1, row, sizeof row));
    assert_true(row[0] == 1 && row[7] == 8);
    /* a second process may not keep tensors of the store in write-back */
    if ((kid = fork()) == 0) {
        gkv_store *cs;
        gkv_err rc = GKV_EIO;

        if (gkv_store_open(&cs, dir, GKV_NOSYNC, NULL) == GKV_OK)
            rc = gkv_writeback_start(cs, "u", 100000);
        _exit(rc == GKV_EBUSY &&
              strstr(gkv_store_errmsg(cs), "one process at a time") != NULL
              ? 0 : 1);
    }
    assert_true(kid > 0);
    assert_int_equal(waitpid(kid, &st, 0), kid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    /* stopped: free again */
    GKVT_OK(gkv_writeback_stop(s, "t"));
    assert_int_equal(kvctl_on(dir, &err, "put", "t", "150",
                              "1,2,3,4,5,6,7,8"), 0);
    free(err);
    gkv_store_close(s);
    /* an owner killed with SIGKILL leaves its list, not its lock */
    kid = wb_holder(dir, "u", NULL);
    assert_int_equal(kvctl_on(dir, &err, "rm", "u", NULL, NULL), 1);
    free(err);
    gkvt_kill_child(kid);
    assert_int_equal(kvctl_on(dir, &err, "rm", "u", NULL, NULL), 0);
    free(err);
    gkvt_rmtree(dir);
}

/* ThreadSanitizer ends a child forked from a process with threads when the
 * child starts one (write-back's flusher): the tests whose children start
 * write-back are skipped under it. */
#ifdef __SANITIZE_THREAD__
#define SKIP_UNDER_TSAN() skip()
#else
#define SKIP_UNDER_TSAN() ((void)0)
#endif

/* A forked child's own handle on dir runs 'what' on tensor 'name'
 * ("delete+create" as a writer that does not check the write-back lock:
 * its descriptor of writeback.lock set aside; "push": a checked push of
 * one row; "start": gkv_writeback_start); returns the call's code. */
static gkv_err
child_call(const char *dir, const char *what, const char *name)
{
    int pfd[2], st;
    gkv_err rc = GKV_EIO;
    pid_t kid;

    assert_int_equal(pipe(pfd), 0);
    if ((kid = fork()) == 0) {
        gkv_tensor_spec sp = gkvt_wb_spec(N, W, 0);
        float row[W] = {5, 5, 5, 5, 5, 5, 5, 5};
        uint64_t id = 150;
        gkv_store *cs;

        close(pfd[0]);
        if ((rc = gkv_store_open(&cs, dir, GKV_NOSYNC, NULL)) == GKV_OK) {
            if (strcmp(what, "delete+create") == 0) {
                cs->st_wbo_fd = -1;             /* an unchecked writer */
                if ((rc = gkv_tensor_delete(cs, name)) == GKV_OK)
                    rc = gkv_tensor_create(cs, name, &sp);
            } else if (strcmp(what, "push") == 0) {
                rc = gkv_tensor_push(cs, name, &id, 1, row, sizeof row, NULL);
            } else {
                rc = gkv_writeback_start(cs, name, 100000);
                if (rc == GKV_OK)
                    rc = gkv_writeback_stop(cs, name);
            }
            gkv_store_close(cs);
        }
        if (write(pfd[1], &rc, sizeof rc) != sizeof rc)
            _exit(1);
        _exit(0);
    }
    assert_true(kid > 0);
    close(pfd[1]);
    assert_int_equal(read(pfd[0], &rc, sizeof rc), (ssize_t)sizeof rc);
    close(pfd[0]);
    assert_int_equal(waitpid(kid, &st, 0), kid);
    return rc;
}

/* A flush that drops a copy (its tensor deleted by a writer that does not
 * check) takes it off the write-back list other processes see; once none
 * is left, the store is free for another process's write-back. Before, the
 * name stayed listed (writes to the new tensor of that name refused) and
 * the lock held, for the life of the process. */
static void
test_wb_drop_unlists(void **state)
{
    char *dir = gkvt_mkdtemp("wbunl");
    gkv_tensor_spec sp = gkvt_wb_spec(N, W, 0);
    float row[W] = {1, 2, 3, 4, 5, 6, 7, 8};
    uint64_t id = 160;
    gkv_store *s;

    (void)state;
    SKIP_UNDER_TSAN();
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE | GKV_NOSYNC, NULL));
    GKVT_OK(gkv_tensor_create(s, "t", &sp));
    GKVT_OK(gkv_tensor_create(s, "u", &sp));
    GKVT_OK(gkv_writeback_start(s, "t", 100000));
    GKVT_OK(gkv_writeback_start(s, "u", 100000));
    assert_int_equal(child_call(dir, "push", "t"), GKV_EBUSY);
    /* a companion counts as its tensor (a restore of its state) */
    assert_int_equal(child_call(dir, "push", "t#adagrad_s"), GKV_EBUSY);
    /* pending pushes: the flush finds the tensors gone */
    GKVT_OK(gkv_tensor_push(s, "t", &id, 1, row, sizeof row, NULL));
    GKVT_OK(gkv_tensor_push(s, "u", &id, 1, row, sizeof row, NULL));
    GKVT_OK(child_call(dir, "delete+create", "t"));
    assert_int_equal(gkv_writeback_flush(s), GKV_ENOTFOUND);    /* dropped */
    GKVT_OK(child_call(dir, "push", "t"));      /* the new t: not listed */
    assert_int_equal(child_call(dir, "push", "u"), GKV_EBUSY);
    assert_int_equal(child_call(dir, "start", "t"), GKV_EBUSY);
    GKVT_OK(gkv_tensor_push(s, "u", &id, 1, row, sizeof row, NULL));
    GKVT_OK(child_call(dir, "delete+create", "u"));
    assert_int_equal(gkv_writeback_flush(s), GKV_ENOTFOUND);
    GKVT_OK(child_call(dir, "start", "t"));     /* none left: released */
    gkv_store_close(s);
    gkvt_rmtree(dir);
}

/* A forked child that keeps tensors in write-back on its own handle and
 * closes the handle it inherited keeps its lock (closing any descriptor of
 * a file drops all of a process's fcntl locks on it: the inherited
 * handle's is left open). Before, a third process's push went through. */
static void
test_wb_fork_close_keeps_lock(void **state)
{
    char *dir = gkvt_mkdtemp("wbfork");
    gkv_tensor_spec sp = gkvt_wb_spec(N, W, 0);
    gkv_store *s;
    pid_t kid;

    (void)state;
    SKIP_UNDER_TSAN();
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE | GKV_NOSYNC, NULL));
    GKVT_OK(gkv_tensor_create(s, "t", &sp));
    kid = wb_holder(dir, "t", s);       /* closes the parent's, inherited */
    assert_int_equal(child_call(dir, "push", "t"), GKV_EBUSY);
    gkvt_kill_child(kid);
    GKVT_OK(child_call(dir, "push", "t"));
    gkv_store_close(s);
    gkvt_rmtree(dir);
}

/* Names are matched whole: a process holding "tt" in write-back does not
 * hold "t". */
static void
test_wb_names_whole(void **state)
{
    char *dir = gkvt_mkdtemp("wbwhole");
    gkv_tensor_spec sp = gkvt_wb_spec(N, W, 0);
    gkv_store *s;
    pid_t kid;

    (void)state;
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE | GKV_NOSYNC, NULL));
    GKVT_OK(gkv_tensor_create(s, "t", &sp));
    GKVT_OK(gkv_tensor_create(s, "tt", &sp));
    gkv_store_close(s);
    kid = wb_holder(dir, "tt", NULL);
    GKVT_OK(child_call(dir, "push", "t"));
    assert_int_equal(child_call(dir, "push", "tt"), GKV_EBUSY);
    gkvt_kill_child(kid);
    gkvt_rmtree(dir);
}

/* Another process deletes one of two write-back tensors, or replaces it:
 * the flush still writes the other, drops the copy of the gone one (its
 * pushes have nowhere to go) and says so; later flushes and stops work,
 * and the handle then reads what the store holds under that name. A flush
 * that failed whole on one gone tensor left every other write-back tensor
 * of the handle unwritten, flush after flush. */
static void
test_wb_deleted_tensor_dropped(void **state)
{
    char *dir = gkvt_mkdtemp("wbgone"), *err = NULL;
    gkv_tensor_spec sp = gkvt_wb_spec(N, W, 0);
    uint64_t rs = gkvt_seed() ^ 17, ids[300], id = 150;
    float rows[300 * W], *u, *got, row[W];
    gkv_store *s;
    gkv_txn *tx;

    (void)state;
    GKVT_OK(gkv_store_open(&s, dir, GKV_CREATE | GKV_NOSYNC, NULL));
    GKVT_OK(gkv_tensor_create(s, "t", &sp));
    GKVT_OK(gkv_tensor_create(s, "u", &sp));
    GKVT_OK(gkv_tensor_create(s, "v", &sp));
    GKVT_OK(gkv_writeback_start(s, "t", 100000));
    GKVT_OK(gkv_writeback_start(s, "u", 100000));
    GKVT_OK(gkv_writeback_start(s, "v", 100000));
    gkvt_rand_rows(&rs, ids, rows, 300, 100, N, W);
    GKVT_OK(gkv_tensor_push(s, "t", ids, 300, rows, sizeof rows, NULL));
    GKVT_OK(gkv_tensor_push(s, "u", ids, 300, rows, sizeof rows, NULL));
    GKVT_OK(gkv_tensor_push(s, "v", ids, 300, rows, sizeof rows, NULL));
    u = gkvt_wb_rows(s, NULL, "u", N, W);
    {
        char *rm[] = {(char *)gkvt_prog("kvctl"), dir, "rm", "t", NULL};
        char *rm2[] = {(char *)gkvt_prog("kvctl"), dir, "rm", "v", NULL};
        char *mk[] = {(char *)gkvt_prog("kvctl"), dir, "create", "v",
                      "--dtype", "f32", "--shape", "8", "--range", "100:3100",
                      "--init", "const:5", NULL};
        gkvt_wb_unguard(dir);           /* a writer that does not check */
        assert_int_equal(gkvt_run(rm, NULL, 0, NULL, &err, 60), 0);
        free(err);
        assert_int_equal(gkvt_run(rm2, NULL, 0, NULL, &err, 60), 0);
        free(err);
        assert_int_equal(gkvt_run(mk, NULL, 0, NULL, &err, 60), 0);
        free(err);
    }
    assert_int_equal(gkv_writeback_flush(s), GKV_ENOTFOUND);
    assert_non_null(strstr(gkv_store_errmsg(s), "tensor '"));
    assert_non_null(strstr(gkv_store_errmsg(s), "deleted or replaced by "
                           "another handle; its write-back copy is dropped"));
    /* u was written */
    GKVT_OK(gkv_txn_begin(s, &tx));
    got = gkvt_wb_rows(s, tx, "u", N, W);
    gkv_txn_end(tx);
    assert_memory_equal(got, u, (size_t)N * W * 4);
    free(got);
    /* t is gone, for this handle too; v is the new tensor of the store */
    assert_int_equal(gkv_tensor_pull(s, NULL, "t", &id, 1, row, sizeof row),
                     GKV_ENOTFOUND);
    GKVT_OK(gkv_tensor_pull(s, NULL, "v", &id, 1, row, sizeof row));
    for (int j = 0; j < W; j++)
        assert_true(row[j] == 5.0f);
    assert_int_equal(gkv_writeback_stop(s, "t"), GKV_ENOTFOUND);
    assert_non_null(strstr(gkv_store_errmsg(s), "not in write-back mode"));
    GKVT_OK(gkv_writeback_flush(s));
    GKVT_OK(gkv_tensor_push(s, "u", ids, 10, rows, 10 * W * 4, NULL));
    GKVT_OK(gkv_writeback_stop(s, "u"));
    GKVT_OK(gkv_store_verify(s, NULL, NULL));
    free(u);
    gkv_store_close(s);
    gkvt_rmtree(dir);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wb_owned_across_processes),
        cmocka_unit_test(test_wb_drop_unlists),
        cmocka_unit_test(test_wb_fork_close_keeps_lock),
        cmocka_unit_test(test_wb_names_whole),
        cmocka_unit_test(test_wb_deleted_tensor_dropped),
    };
    return cmocka_run_group_tests_name("kv_wb_process", tests, NULL, NULL);
}
