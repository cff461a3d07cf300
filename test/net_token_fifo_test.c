/* net_token_fifo_test.c - a token file that is a FIFO is refused at once.
 *
 * gkv_token_load (gkv-server, kvctl, gkv-launch and the Python client
 * share it) opened the file before it checked that it is a regular file:
 * open(2) of a FIFO without a writer waits for one, so --token-file FIFO
 * hung gkv-server for ever. Now the open does not block and the check
 * refuses it with "not a regular file", in the library and in the tools;
 * a regular private file still loads. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "gkvt.h"

#define TOKEN16 "0123456789abcdef"

struct fx {
    char *dir;
    char fifo[4200], tok[4200];
};

static int
setup(void **state)
{
    struct fx *f;

    if (gkvt_dir_setup(state, sizeof *f, "token_fifo") != 0)
        return -1;
    f = *state;
    snprintf(f->fifo, sizeof f->fifo, "%s/fifo", f->dir);
    snprintf(f->tok, sizeof f->tok, "%s/token", f->dir);
    if (mkfifo(f->fifo, 0600) != 0)
        return -1;
    gkvt_write_text(f->tok, TOKEN16 "\n", 0600);
    return 0;
}

/* A hang is a failure: SIGALRM ends the test program. */
static void
test_library_refuses_fifo(void **state)
{
    struct fx *f = *state;
    char buf[GKV_TOKEN_MAX + 1];

    alarm(20);
    assert_int_equal(gkv_token_load(f->fifo, buf, sizeof buf), GKV_EINVAL);
    alarm(0);
    gkvt_expect_has(gkv_net_errmsg(), "not a regular file");
    GKVT_OK(gkv_token_load(f->tok, buf, sizeof buf));
    assert_string_equal(buf, TOKEN16);
}

/* Runs argv (20 s at most): it must end at once (well before that), exit
 * 1, and say why. */
static void
refused_at_once(char *const argv[])
{
    char *err = NULL;
    time_t t0 = time(NULL);
    int code = gkvt_run(argv, NULL, 0, NULL, &err, 20);

    assert_true(time(NULL) - t0 < 15);
    if (code != 1)
        fail_msg("%s: exit %d: %s", argv[0], code, err ? err : "");
    gkvt_expect_has(err, "not a regular file");
    free(err);
}

/* gkv-server and kvctl refuse it too. */
static void
test_tools_refuse_fifo(void **state)
{
    struct fx *f = *state;
    char st[4300], cfg[4300], addr[64], line[64];
    int port = gkvt_port_base(1);
    gkv_store *s;

    snprintf(st, sizeof st, "%s/st", f->dir);
    snprintf(cfg, sizeof cfg, "%s/ip.cfg", f->dir);
    snprintf(line, sizeof line, "127.0.0.1 %d\n", port);
    gkvt_write_text(cfg, line, 0644);
    GKVT_OK(gkv_store_open(&s, st, GKV_CREATE, NULL));
    gkv_store_close(s);
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    {
        /* gkvt_prog's answer lasts until its next call */
        char *srv[] = {(char *)gkvt_prog("gkv-server"), "--store", st,
                       "--ip-config", cfg, "--machine", "0", "--token-file",
                       f->fifo, NULL};
        refused_at_once(srv);
    }
    {
        char *kvctl[] = {(char *)gkvt_prog("kvctl"), "--server", addr,
                         "--token-file", f->fifo, "ls", NULL};
        refused_at_once(kvctl);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_library_refuses_fifo, setup,
                                        gkvt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_tools_refuse_fifo, setup,
                                        gkvt_dir_teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
