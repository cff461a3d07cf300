/* tools_faults_test.c - operator-facing faults of the command-line tools:
 * bad arguments must be usage errors (exit 2) that name what was wrong and
 * start nothing, and a failed export must leave what was at FILE alone. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "gkvt.h"

struct fx {
    char *dir;
    char *out, *err;
};

static int
setup(void **state)
{
    return gkvt_dir_setup(state, sizeof(struct fx), "toolsf");
}

static int
teardown(void **state)
{
    struct fx *f = *state;

    free(f->out);
    free(f->err);
    return gkvt_dir_teardown(state);
}

/* Runs argv (argv[0] a program name) with cwd-independent paths; keeps
 * stdout and stderr in f. */
static int
run(struct fx *f, char **argv)
{
    free(f->out);
    free(f->err);
    f->out = f->err = NULL;
    return gkvt_run(argv, NULL, 0, &f->out, &f->err, 20);
}

static void
path(char *buf, size_t len, const struct fx *f, const char *name)
{
    snprintf(buf, len, "%s/%s", f->dir, name);
}

/* export onto an existing FIFO (or directory) must fail and leave it as it
 * was, not rename a regular file over it */
static void
test_export_onto_non_regular_file(void **state)
{
    struct fx *f = *state;
    char st[4096], fifo[4096], d[4096];
    struct stat sb;

    path(st, sizeof st, f, "st");
    path(fifo, sizeof fifo, f, "fifo");
    path(d, sizeof d, f, "adir");
    {
        char *a[] = {(char *)gkvt_prog("kvctl"), st, "create", "t", "--dtype",
                     "f32", "--range", "0:8", "--shape", "2", NULL};
        assert_int_equal(run(f, a), 0);
    }
    assert_int_equal(mkfifo(fifo, 0644), 0);
    {
        char *a[] = {(char *)gkvt_prog("kvctl"), st, "export", "t", fifo, NULL};
        assert_int_equal(run(f, a), 1);
        assert_non_null(strstr(f->err, "is not a regular file"));
        assert_non_null(strstr(f->err, fifo));
    }
    assert_int_equal(lstat(fifo, &sb), 0);
    assert_true(S_ISFIFO(sb.st_mode));
    assert_int_equal(mkdir(d, 0755), 0);
    {
        char *a[] = {(char *)gkvt_prog("kvctl"), st, "export", "t", d, NULL};
        assert_int_equal(run(f, a), 1);
        assert_non_null(strstr(f->err, "is not a regular file"));
    }
    assert_int_equal(lstat(d, &sb), 0);
    assert_true(S_ISDIR(sb.st_mode));
    {
        /* no FILE.tmp-PID left in the directory */
        char *a[] = {"/bin/sh", "-c", "ls \"$0\" | grep -c tmp-", f->dir, NULL};
        run(f, a);
        assert_string_equal(f->out, "0\n");
    }
}

/* an empty OUTDIR ("$OUT" unset) is a usage error that says so */
static void
test_partition_empty_outdir(void **state)
{
    struct fx *f = *state;
    char *a[] = {(char *)gkvt_prog("gkv-partition"), "--rmat", "4", "--parts",
                 "2", "--method", "random", "", NULL};

    assert_int_equal(run(f, a), 2);
    assert_non_null(strstr(f->err, "empty output directory"));
    assert_null(strstr(f->err, "NULL graph"));
}

/* gkv-server: an empty path value is bad usage (2), not a start failure */
static void
test_server_empty_values(void **state)
{
    struct fx *f = *state;
    char ipc[4096];

    path(ipc, sizeof ipc, f, "ip.txt");
    gkvt_write_text(ipc, "127.0.0.1 39999\n", 0644);
    {
        char *a[] = {(char *)gkvt_prog("gkv-server"), "--store", "",
                     "--ip-config", ipc, "-q", NULL};
        assert_int_equal(run(f, a), 2);
        assert_non_null(strstr(f->err, "option '--store' needs a non-empty value"));
    }
    {
        char *a[] = {(char *)gkvt_prog("gkv-server"), "--store", f->dir,
                     "--ip-config=", "-q", NULL};
        assert_int_equal(run(f, a), 2);
        assert_non_null(strstr(f->err, "option '--ip-config' needs a non-empty value"));
    }
}

/* gkv-server without --machine: an ip_config with two lines of this host,
 * or none, names the problem and --machine. The message was formatted
 * into the buffer it quoted ("ip.txt: ip.txt: g: 2 machines ..."), and
 * "no machine is this host" came as "no such tensor, key or row". */
static void
test_server_which_machine(void **state)
{
    struct fx *f = *state;
    char ipc[4096], st[4096];
    static const struct { const char *cfg, *want; } c[] = {
        {"127.0.0.1 39997\n127.0.0.1 39998\n",
         "invalid argument: %s: 2 machines are this host (lines 1 and 2 at "
         "least); name this machine's line with --machine N (from 0)"},
        {"192.0.2.7 39997\n",
         "invalid argument: %s: no machine listed is this host (no address "
         "matches an interface); name this machine's line with --machine N"},
    };

    path(ipc, sizeof ipc, f, "ip.txt");
    path(st, sizeof st, f, "st");
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        char *a[] = {(char *)gkvt_prog("gkv-server"), "--store", st, "--create",
                     "--ip-config", ipc, "-q", NULL};
        char want[8192];
        gkvt_write_text(ipc, c[i].cfg, 0644);
        snprintf(want, sizeof want, c[i].want, ipc);
        assert_int_equal(run(f, a), 1);
        if (strstr(f->err, want) == NULL)
            fail_msg("case %zu: stderr is '%s'; want '%s'", i, f->err, want);
    }
}

/* gkv-server with a missing ip_config or token file, gkv-launch with a
 * missing ip_config and kvctl with a missing token file said "no store at
 * that path" (GKV_ENOENT's text) before naming the file. */
static void
test_server_missing_files(void **state)
{
    struct fx *f = *state;
    char ipc[4096], st[4096], none[4096], want[8192];

    path(ipc, sizeof ipc, f, "ip.txt");
    path(st, sizeof st, f, "st");
    path(none, sizeof none, f, "none");
    gkvt_write_text(ipc, "127.0.0.1 39997\n", 0644);
    {
        char *a[] = {(char *)gkvt_prog("gkv-server"), "--store", st, "--create",
                     "--ip-config", none, "-q", NULL};
        assert_int_equal(run(f, a), 1);
        snprintf(want, sizeof want, "gkv-server: ip_config %s: No such file",
                 none);
        if (strstr(f->err, want) == NULL)
            fail_msg("stderr is '%s'; want '%s'", f->err, want);
    }
    {
        char *a[] = {(char *)gkvt_prog("gkv-server"), "--store", st, "--create",
                     "--ip-config", ipc, "--token-file", none, "-q", NULL};
        assert_int_equal(run(f, a), 1);
        snprintf(want, sizeof want, "gkv-server: token file %s: No such file",
                 none);
        if (strstr(f->err, want) == NULL)
            fail_msg("stderr is '%s'; want '%s'", f->err, want);
    }
    {
        char *a[] = {(char *)gkvt_prog("gkv-launch"), "--ip-config", none,
                     "--store", st, "--num-servers", "1", "--num-trainers",
                     "1", "--", "true", NULL};
        assert_int_equal(run(f, a), 2);          /* nothing was started */
        snprintf(want, sizeof want, "gkv-launch: ip_config %s: No such file",
                 none);
        if (strstr(f->err, want) == NULL)
            fail_msg("stderr is '%s'; want '%s'", f->err, want);
        assert_null(strstr(f->err, "no store at that path"));
    }
    {
        char *a[] = {(char *)gkvt_prog("kvctl"), "--server", "127.0.0.1:1",
                     "--token-file", none, "ls", NULL};
        assert_int_equal(run(f, a), 1);
        snprintf(want, sizeof want, "token file %s: No such file", none);
        if (strstr(f->err, want) == NULL)
            fail_msg("stderr is '%s'; want '%s'", f->err, want);
        assert_null(strstr(f->err, "no store at that path"));
    }
    {
        char *a[] = {(char *)gkvt_prog("gkv-server"), "--store", none,
                     "--ip-config", ipc, "-q", NULL};
        assert_int_equal(run(f, a), 1);
        snprintf(want, sizeof want, "gkv-server: store '%s': No such file",
                 none);
        if (strstr(f->err, want) == NULL)
            fail_msg("stderr is '%s'; want '%s'", f->err, want);
    }
}

/* gkv-launch: --store "" must not start a server on the current directory;
 * exit 2 means nothing was started */
static void
test_launch_empty_store(void **state)
{
    struct fx *f = *state;
    char ipc[4096], ws[4096], logs[4200];
    struct stat sb;

    path(ipc, sizeof ipc, f, "ip.txt");
    path(ws, sizeof ws, f, "ws");
    gkvt_write_text(ipc, "127.0.0.1 39998\n", 0644);
    {
        char *a[] = {(char *)gkvt_prog("gkv-launch"), "--ip-config", ipc,
                     "--store", "", "--num-servers", "1", "--num-trainers", "1",
                     "--workspace", ws, "--timeout", "3", "--", "true", NULL};
        assert_int_equal(run(f, a), 2);
        assert_non_null(strstr(f->err, "option '--store' needs a non-empty value"));
        assert_null(strstr(f->err, "started server"));
    }
    snprintf(logs, sizeof logs, "%s/logs", ws);
    assert_int_not_equal(stat(logs, &sb), 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_export_onto_non_regular_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_partition_empty_outdir, setup, teardown),
        cmocka_unit_test_setup_teardown(test_server_empty_values, setup, teardown),
        cmocka_unit_test_setup_teardown(test_server_which_machine, setup, teardown),
        cmocka_unit_test_setup_teardown(test_server_missing_files, setup, teardown),
        cmocka_unit_test_setup_teardown(test_launch_empty_store, setup, teardown),
    };

    return cmocka_run_group_tests_name("tools_faults", tests, NULL, NULL);
}
