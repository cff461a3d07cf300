/* launch_usage_test.c - gkv-launch refusing bad input before it starts
 * anything (exit 2, a message naming what is wrong, no port of the
 * ip_config held): one case per bad option or file; --help; a partition
 * count that is not the machine count; an unresolvable address; and the
 * example trainer's own usage errors and --version. The fixture and
 * helpers: gkvt_launch.c. */
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
#include "gkvt.h"
#include "gkvt_launch.h"

/* ---- bad inputs: exit 2 with a message, nothing started -------------- */

/* The options of a launch of one server and one trainer running "true"
 * on f's ip_config and store, with the options given (each followed by a
 * comma) inserted before "--". */
#define LAUNCH_ARGS(...) {"--ip-config", f->cfg, "--store", f->store, \
    "--num-servers", "1", "--num-trainers", "1", __VA_ARGS__ "--", "true", \
    NULL}

/* gkv-launch with args exits 2 saying say1 (and say2 unless NULL), and
 * holds no port of the ip_config. */
static void
expect_usage(struct gkvt_lt_fx *f, const char *const *args, const char *say1,
             const char *say2)
{
    assert_int_equal(gkvt_lt_launch(f, args, NULL, 10), 2);
    if (!gkvt_lt_has(f, say1) || (say2 != NULL && !gkvt_lt_has(f, say2))) {
        gkvt_lt_dump(f);
        fail_msg("want '%s'%s%s", say1, say2 ? " and " : "",
                 say2 ? say2 : "");
    }
    /* nothing was started: no port of the ip_config is held */
    assert_true(gkvt_lt_port_closed(f->base));
}

static void
test_bad_no_command(void **state)
{
    struct gkvt_lt_fx *f = *state;
    const char *nocmd[] = {"--ip-config", f->cfg, "--store", f->store,
        "--num-servers", "1", "--num-trainers", "1", NULL};

    gkvt_lt_ports(f);
    expect_usage(f, nocmd, "no command: put the trainer command after '--'",
                 NULL);
}

static void
test_bad_empty_command(void **state)
{
    struct gkvt_lt_fx *f = *state;
    const char *emptycmd[] = {"--ip-config", f->cfg, "--store", f->store,
        "--num-servers", "1", "--num-trainers", "1", "--", NULL};

    gkvt_lt_ports(f);
    expect_usage(f, emptycmd, "no command after '--'", NULL);
}

static void
test_bad_ip_config_port_is_named_by_line(void **state)
{
    struct gkvt_lt_fx *f = *state;
    char badcfg[PATH_MAX + 16], want[PATH_MAX + 64];
    const char *badline[] = {"--ip-config", badcfg, "--store", f->store,
        "--num-servers", "1", "--num-trainers", "1", "--", "true", NULL};

    gkvt_lt_ports(f);
    snprintf(badcfg, sizeof badcfg, "%s/bad.txt", f->dir);
    gkvt_write_text(badcfg, "# two machines\n127.0.0.1 40000\n127.0.0.2 notaport\n", 0644);
    snprintf(want, sizeof want, "%s:3: port 'notaport'", badcfg);
    expect_usage(f, badline, want, NULL);
}

static void
test_bad_zero_servers_or_trainers(void **state)
{
    struct gkvt_lt_fx *f = *state;
    const char *s0[] = {"--ip-config", f->cfg, "--store", f->store,
        "--num-servers", "0", "--num-trainers", "1", "--", "true", NULL};
    const char *t0[] = {"--ip-config", f->cfg, "--store", f->store,
        "--num-servers", "1", "--num-trainers", "0", "--", "true", NULL};

    gkvt_lt_ports(f);
    expect_usage(f, s0, "--num-servers: '0' is not a number in 1..1000",
                 NULL);
    expect_usage(f, t0, "--num-trainers: '0'", NULL);
}

static void
test_bad_unknown_option(void **state)
{
    struct gkvt_lt_fx *f = *state;
    const char *unknown[] = {"--ip-config", f->cfg, "--frobnicate", NULL};

    gkvt_lt_ports(f);
    expect_usage(f, unknown, "unknown option '--frobnicate'", NULL);
}

static void
test_bad_store_and_part_config(void **state)
{
    struct gkvt_lt_fx *f = *state;
    const char *both[] = {"--ip-config", f->cfg, "--store", f->store,
        "--part-config", f->cfg, "--num-servers", "1", "--num-trainers", "1",
        "--", "true", NULL};

    gkvt_lt_ports(f);
    expect_usage(f, both, "exactly one of --part-config", NULL);
}

static void
test_bad_keep_alive_without_server_name(void **state)
{
    struct gkvt_lt_fx *f = *state;
    const char *kan[] = LAUNCH_ARGS("--keep-alive",);

    gkvt_lt_ports(f);
    expect_usage(f, kan, "--keep-alive needs --server-name", NULL);
}

static void
test_bad_token_file_readable_by_others(void **state)
{
    struct gkvt_lt_fx *f = *state;
    char tok[PATH_MAX + 16];
    const char *badtok[] = LAUNCH_ARGS("--token-file", tok,);

    gkvt_lt_ports(f);
    snprintf(tok, sizeof tok, "%s/token", f->dir);
    gkvt_write_text(tok, "sekrit\n", 0644);
    expect_usage(f, badtok, "chmod 600", NULL);
}

/* A missing token file is called that, not GKV_ENOENT's "no store", both
 * by a launch and by --shutdown. */
static void
test_bad_token_file_missing(void **state)
{
    struct gkvt_lt_fx *f = *state;
    char notok[PATH_MAX + 16];
    const char *notokl[] = LAUNCH_ARGS("--token-file", notok,);
    const char *notoks[] = {"--ip-config", f->cfg, "--num-servers", "1",
        "--shutdown", "--token-file", notok, "--timeout", "30", NULL};

    gkvt_lt_ports(f);
    snprintf(notok, sizeof notok, "%s/no-such-token", f->dir);
    for (int i = 0; i < 2; i++) {
        char want[PATH_MAX + 64];

        snprintf(want, sizeof want, "--token-file %s: the token file does not "
                 "exist", notok);
        expect_usage(f, i ? notoks : notokl, want, NULL);
        assert_false(gkvt_lt_has(f, "no store at that path"));
    }
}

/* --num-samplers (deprecated: the trainers' loader threads) takes 0..64,
 * the loader's bound, and says so. */
static void
test_bad_num_samplers(void **state)
{
    struct gkvt_lt_fx *f = *state;
    const char *many[] = LAUNCH_ARGS("--num-samplers", "65",);
    const char *word[] = LAUNCH_ARGS("--num-samplers", "two",);

    gkvt_lt_ports(f);
    expect_usage(f, many, "--num-samplers", "loader threads in 0..64");
    expect_usage(f, word, "--num-samplers", "loader threads in 0..64");
}

static void
test_bad_workspace_under_a_file(void **state)
{
    struct gkvt_lt_fx *f = *state;
    char filews[PATH_MAX + 16];
    const char *badws[] = LAUNCH_ARGS("--workspace", filews,);

    gkvt_lt_ports(f);
    snprintf(filews, sizeof filews, "%s/ip.txt/ws", f->dir);
    expect_usage(f, badws, "workspace", "cannot create it");
}

static void
test_bad_ip_config_missing(void **state)
{
    struct gkvt_lt_fx *f = *state;
    const char *nofile[] = {"--ip-config", "/nonexistent/ip.txt", "--store",
        f->store, "--num-servers", "1", "--num-trainers", "1", "--", "true", NULL};

    gkvt_lt_ports(f);
    expect_usage(f, nofile, "/nonexistent/ip.txt", NULL);
}

static void
test_help_exits_0(void **state)
{
    struct gkvt_lt_fx *f = *state;
    const char *help[] = {"--help", NULL};
    char *o;

    gkvt_lt_ports(f);
    assert_int_equal(gkvt_lt_launch(f, help, NULL, 10), 0);
    o = gkvt_slurp(f->out);
    assert_non_null(strstr(o, "Usage: gkv-launch"));
    /* no sampler processes any more: the flag is the loader's threads */
    assert_non_null(strstr(o, "--num-samplers K       deprecated: starts no "
                           "processes; sets each\n                         "
                           "trainer's GKV_LOADER_WORKERS=K"));
    free(o);
    /* nothing was started: no port of the ip_config is held */
    assert_true(gkvt_lt_port_closed(f->base));
}

/* The example trainer's usage errors: exit 2 and a message naming the
 * option or value, before it connects anywhere (no GKV_IP_CONFIG set). */
static void
test_trainer_usage(void **state)
{
    static const struct {
        const char *args[6];
        const char *want;
    } cases[] = {
        {{"--frobnicate", NULL}, "unknown option '--frobnicate'"},
        {{"--frobnicate", "3", NULL}, "unknown option '--frobnicate'"},
        {{"--epochs", NULL}, "option '--epochs' needs a value"},
        {{"--epochs", "0", NULL}, "'0' is not a positive integer"},
        {{"--fanouts", "10,0", NULL}, "each must be -1 or a positive integer"},
        {{"--train-frac", "1.5", NULL}, "'1.5' is out of range"},
        {{"--gpu-cache-mb", "4", NULL}, "--gpu-cache-mb needs --device"},
        {{"--train-mask", "m", "--train-frac", "0.5", NULL},
         "--train-mask with --train-frac: give a mask or a fraction"},
        {{"--train-mask", "node/_N/m", NULL}, "--train-mask 'node/_N/m': a "
         "feature name, without '/' or '#'"},
        {{"stray", NULL}, "unexpected argument 'stray'"},
        {{"--sample-on", "gpu", NULL}, "--sample-on 'gpu': server, client or "
         "local"},
        {{"--loader-workers", "0", NULL}, "'0' is not a number of threads in "
         "1..64"},
        {{"--prefetch", "0", NULL}, "'0' is not a number of batches in "
         "1..1024"},
    };
    char prog[PATH_MAX];
    char *out = NULL, *err = NULL;

    (void)state;
    snprintf(prog, sizeof prog, "%s", gkvt_prog("gkv-example-train"));
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *argv[8] = {prog};
        for (int k = 0; cases[i].args[k] != NULL; k++)
            argv[k + 1] = (char *)cases[i].args[k];
        assert_int_equal(gkvt_run(argv, NULL, 0, &out, &err, 30), 2);
        if (strstr(err, cases[i].want) == NULL)
            fail_msg("case %zu: want '%s' in:\n%s", i, cases[i].want, err);
        free(out);
        free(err);
    }
    {
        char *argv[] = {prog, "--help", NULL};
        assert_int_equal(gkvt_run(argv, NULL, 0, &out, &err, 30), 0);
        assert_non_null(strstr(out, "Usage: gkv-example-train"));
        free(out);
        free(err);
    }
}

/* A partitioned graph whose partition count is not the ip_config's
 * machine count is refused before anything starts (exit 2). */
static void
test_part_count(void **state)
{
    struct gkvt_lt_fx *f = *state;
    char json[PATH_MAX + 64], want[2 * PATH_MAX + 128];
    const char *args[] = {"--ip-config", f->cfg, "--part-config", json,
        "--num-servers", "1", "--num-trainers", "1", "--workspace", f->ws,
        "--", gkvt_lt_self, "--child", "env", NULL};

    gkvt_lt_graph(f, "g2", 6, 2, json, sizeof json);
    gkvt_lt_ports(f);
    assert_int_equal(gkvt_lt_launch(f, args, NULL, 20), 2);
    snprintf(want, sizeof want, "%s lists 1 machine but %s has 2 partitions",
             f->cfg, json);
    if (!gkvt_lt_has(f, want)) {
        gkvt_lt_dump(f);
        fail_msg("want '%s'", want);
    }
    assert_false(gkvt_lt_has(f, "started server"));
    assert_true(gkvt_lt_port_closed(f->base));
}

/* An ip_config address that does not resolve (127.0.0.300 passes the
 * format check as a host name) is refused before anything starts: exit 2,
 * naming the file, line and address. It used to start the servers, then
 * fail on the one that could not resolve its address. --shutdown names
 * that server among those that did not answer. */
static void
test_ip_config_unresolvable(void **state)
{
    struct gkvt_lt_fx *f = *state;
    char cfg2[PATH_MAX + 16], text[128], want[2 * PATH_MAX];
    const char *args[] = {"--ip-config", cfg2, "--store", f->store,
        "--num-servers", "1", "--num-trainers", "1", "--workspace", f->ws,
        "--", gkvt_lt_self, "--child", "env", NULL};
    const char *stop[] = {"--ip-config", cfg2, "--num-servers", "1",
        "--shutdown", "--timeout", "30", NULL};

    gkvt_lt_ports(f);
    snprintf(cfg2, sizeof cfg2, "%s/ip-bad.txt", f->dir);
    snprintf(text, sizeof text, "# machines\n127.0.0.1 %d\n127.0.0.300 %d\n",
             f->base, f->base + 8);
    gkvt_write_text(cfg2, text, 0644);

    assert_int_equal(gkvt_lt_launch(f, args, NULL, 30), 2);
    snprintf(want, sizeof want, "%s:3: address '127.0.0.300' (machine 1) "
             "does not resolve", cfg2);
    if (!gkvt_lt_has(f, want)) {
        gkvt_lt_dump(f);
        fail_msg("want '%s'", want);
    }
    assert_true(gkvt_lt_has(f, "nothing was started"));
    assert_false(gkvt_lt_has(f, "started server"));
    assert_true(gkvt_lt_port_closed(f->base));
    assert_int_not_equal(access(f->ws, F_OK), 0);

    assert_int_equal(gkvt_lt_launch(f, stop, NULL, 30), 1);
    snprintf(want, sizeof want, "server 1/0 (machine 1, server 0, "
             "127.0.0.300:%d, %s line 3) did not answer: its address "
             "'127.0.0.300' does not resolve", f->base + 8, cfg2);
    if (!gkvt_lt_has(f, want)) {
        gkvt_lt_dump(f);
        fail_msg("want '%s'", want);
    }
}

/* gkv-example-train -V and --version print "NAME (gkv) VERSION" on stdout
 * and exit 0, as kvctl does (they were unknown options: exit 2). */
static void
test_trainer_version(void **state)
{
    static const char *const opts[] = {"-V", "--version"};
    char prog[PATH_MAX];
    char *out = NULL, *err = NULL;

    (void)state;
    snprintf(prog, sizeof prog, "%s", gkvt_prog("gkv-example-train"));
    for (size_t i = 0; i < 2; i++) {
        char *argv[] = {prog, (char *)opts[i], NULL};
        int rc = gkvt_run(argv, NULL, 0, &out, &err, 30);

        if (rc != 0 || strcmp(out, "gkv-example-train (gkv) "
                              GKV_VERSION_STRING "\n") != 0)
            fail_msg("%s: exit %d, stdout '%s', stderr '%s'", opts[i], rc,
                     out, err);
        free(out);
        free(err);
    }
}

#define T(name) cmocka_unit_test_setup_teardown(name, gkvt_lt_setup, \
                                                gkvt_lt_teardown)

int
main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        T(test_bad_no_command),
        T(test_bad_empty_command),
        T(test_bad_ip_config_port_is_named_by_line),
        T(test_bad_zero_servers_or_trainers),
        T(test_bad_unknown_option),
        T(test_bad_store_and_part_config),
        T(test_bad_keep_alive_without_server_name),
        T(test_bad_token_file_readable_by_others),
        T(test_bad_token_file_missing),
        T(test_bad_num_samplers),
        T(test_bad_workspace_under_a_file),
        T(test_bad_ip_config_missing),
        T(test_help_exits_0),
        cmocka_unit_test(test_trainer_usage),
        T(test_part_count),
        T(test_ip_config_unresolvable),
        cmocka_unit_test(test_trainer_version),
    };
    int rc = gkvt_lt_prelude(argc, argv);

    if (rc >= 0)
        return rc;
    return cmocka_run_group_tests_name("launch_usage", tests, NULL, NULL);
}
