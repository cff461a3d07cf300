/* launch_keep_alive_test.c - gkv-launch's persistent servers: --keep-alive
 * servers reused by a second launch (of another store too), their
 * failures and arguments; --shutdown of some, more or none of them, with a
 * token and a time limit. The fixture and helpers: gkvt_launch.c. */
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

static void
test_keep_alive(void **state)
{
    struct gkvt_lt_fx *f = *state;
    char ws2[PATH_MAX + 8], path[PATH_MAX + 64];
    const char *args[] = {"--ip-config", f->cfg, "--store", f->store,
        "--num-servers", "2", "--num-trainers", "1",
        "--keep-alive", "--server-name", "lt-persist", "--workspace", f->ws,
        "--", gkvt_lt_self, "--child", "env", NULL};
    const char *stop[] = {"--ip-config", f->cfg, "--num-servers", "2",
        "--shutdown", "--timeout", "30", NULL};
    pid_t sp[4];
    gkv_client *c = NULL;
    gkv_client_opts o;
    gkv_err rc;
    char *e;

    gkvt_lt_ports(f);
    gkvt_lt_expect_ok(f, gkvt_lt_retry(f, args, NULL, 20), "first launch");
    assert_int_equal(gkvt_lt_server_pids(f, sp, 4), 2);
    gkvt_lt_track(f, sp[0]);
    gkvt_lt_track(f, sp[1]);
    assert_true(gkvt_lt_has(f, "--keep-alive: leaving the servers running"));
    assert_false(gkvt_lt_pid_gone(sp[0]));
    assert_false(gkvt_lt_pid_gone(sp[1]));
    e = gkvt_lt_read_env(f, "trainer-0");
    GKVT_LT_ENV_EQ(e, "GKV_SERVER_NAME", "lt-persist");
    free(e);

    /* they are the named persistent servers */
    memset(&o, 0, sizeof o);
    o.timeout_ms = 5000;
    o.flags = GKV_CLIENT_NO_HEARTBEAT;
    {   /* the token gkv-launch keeps for them ($XDG_STATE_HOME: setup) */
        char tok[GKV_TOKEN_MAX + 1];

        snprintf(path, sizeof path, "%s/gkv/server-127.0.0.1-%d.token",
                 f->dir, f->base);
        GKVT_OK(gkv_token_load(path, tok, sizeof tok));
        rc = gkv_client_connect(&c, f->cfg, tok, "lt-check", 0, &o);
    }
    if (rc != GKV_OK)
        fail_msg("connect: %s", gkv_net_errmsg());
    assert_int_equal(gkv_client_nservers(c), 2);
    for (size_t i = 0; i < 2; i++) {
        gkv_server_info in;
        GKVT_OK(gkv_client_server_info(c, i, &in));
        assert_string_equal(in.name, "lt-persist");
        assert_int_equal((pid_t)in.pid, sp[i]);
    }
    gkv_client_close(c);

    /* a second launch reuses them */
    snprintf(ws2, sizeof ws2, "%s2", f->ws);
    args[12] = ws2;
    setenv("LT_DIR", ws2, 1);
    gkvt_lt_expect_ok(f, gkvt_lt_launch(f, args, NULL, 20), "second launch");
    assert_true(gkvt_lt_has(f, "reusing server 0/0"));
    assert_true(gkvt_lt_has(f, "reusing server 0/1"));
    assert_false(gkvt_lt_has(f, "started server"));
    snprintf(path, sizeof path, "%s/ports-trainer-0", ws2);
    e = gkvt_slurp(path);
    assert_string_equal(e, "ok");
    free(e);
    assert_false(gkvt_lt_pid_gone(sp[0]));
    assert_false(gkvt_lt_pid_gone(sp[1]));

    /* another name on these ports is a clear error */
    args[10] = "other-name";
    assert_int_equal(gkvt_lt_launch(f, args, NULL, 20), 1);
    assert_true(gkvt_lt_has(f, "not persistent server 'other-name'"));
    assert_true(gkvt_lt_has(f, "lt-persist"));
    assert_false(gkvt_lt_pid_gone(sp[0]));

    /* --shutdown stops them */
    assert_int_equal(gkvt_lt_launch(f, stop, NULL, 20), 0);
    assert_true(gkvt_lt_has(f, "stopping server 0/1"));
    assert_true(gkvt_lt_wait_gone(sp[0], 30000));
    assert_true(gkvt_lt_wait_gone(sp[1], 30000));
    assert_true(gkvt_lt_port_closed(f->base));
}

/* A persistent server found running is reused only when it serves what
 * this launch would serve: another --store or --part-config is refused
 * (exit 2, both paths named) before anything starts; the same store by
 * another path (a symlink) is reused. */
static void
test_keep_alive_other_store(void **state)
{
    struct gkvt_lt_fx *f = *state;
    char st2[PATH_MAX + 16], link[PATH_MAX + 16], json[PATH_MAX + 64];
    char have[PATH_MAX], want[PATH_MAX], part0[PATH_MAX + 64];
    char wsr[PATH_MAX + 16];
    const char *args[] = {"--ip-config", f->cfg, "--store", f->store,
        "--num-servers", "1", "--num-trainers", "1",
        "--keep-alive", "--server-name", "lt-store", "--workspace", f->ws,
        "--", gkvt_lt_self, "--child", "env", NULL};
    const char *pargs[] = {"--ip-config", f->cfg, "--part-config", json,
        "--num-servers", "1", "--num-trainers", "1",
        "--keep-alive", "--server-name", "lt-store", "--workspace", f->ws,
        "--", gkvt_lt_self, "--child", "env", NULL};
    const char *stop[] = {"--ip-config", f->cfg, "--num-servers", "1",
        "--shutdown", "--timeout", "30", NULL};
    gkv_store *st = NULL;
    pid_t sp[4];
    char *e;

    snprintf(st2, sizeof st2, "%s/st2", f->dir);
    GKVT_OK(gkv_store_open(&st, st2, GKV_CREATE, NULL));
    gkv_store_close(st);
    snprintf(link, sizeof link, "%s/stlink", f->dir);
    assert_int_equal(symlink(f->store, link), 0);
    gkvt_lt_graph(f, "g1", 6, 1, json, sizeof json);

    gkvt_lt_ports(f);
    gkvt_lt_expect_ok(f, gkvt_lt_retry(f, args, NULL, 20), "first launch");
    assert_int_equal(gkvt_lt_server_pids(f, sp, 4), 1);
    gkvt_lt_track(f, sp[0]);
    assert_false(gkvt_lt_pid_gone(sp[0]));

    /* another store: refused, nothing started, the server untouched, and
     * no workspace made */
    assert_non_null(realpath(f->store, have));
    assert_non_null(realpath(st2, want));
    args[3] = st2;
    snprintf(wsr, sizeof wsr, "%s-refused", f->ws);
    args[12] = wsr;
    pargs[12] = wsr;
    assert_int_equal(gkvt_lt_launch(f, args, NULL, 20), 2);
    assert_int_not_equal(access(wsr, F_OK), 0);
    assert_false(gkvt_lt_has(f, wsr));      /* no workspace named either */
    assert_true(gkvt_lt_has(f, "persistent server 'lt-store'"));
    assert_true(gkvt_lt_has(f, have));
    assert_true(gkvt_lt_has(f, want));
    assert_true(gkvt_lt_has(f, "nothing was started"));
    assert_false(gkvt_lt_has(f, "started server"));
    assert_false(gkvt_lt_has(f, "started trainer"));
    assert_false(gkvt_lt_pid_gone(sp[0]));

    /* another graph: partition 0's store is not the one served */
    snprintf(part0, sizeof part0, "%s/g1/part-0", f->dir);
    assert_non_null(realpath(part0, want));
    assert_int_equal(gkvt_lt_launch(f, pargs, NULL, 20), 2);
    assert_true(gkvt_lt_has(f, have));
    assert_true(gkvt_lt_has(f, want));
    assert_true(gkvt_lt_has(f, "--part-config"));
    assert_false(gkvt_lt_has(f, "started server"));
    assert_false(gkvt_lt_has(f, "started trainer"));
    assert_false(gkvt_lt_pid_gone(sp[0]));
    assert_int_not_equal(access(wsr, F_OK), 0);

    /* the same store through a symlink is the same store */
    args[3] = link;
    args[12] = f->ws;
    gkvt_lt_expect_ok(f, gkvt_lt_launch(f, args, NULL, 20),
                      "launch with the store through a symlink");
    assert_true(gkvt_lt_has(f, "reusing server 0/0"));
    e = gkvt_lt_read_env(f, "trainer-0");
    GKVT_LT_ENV_EQ(e, "GKV_ROLE", "trainer");
    free(e);

    assert_int_equal(gkvt_lt_launch(f, stop, NULL, 20), 0);
    assert_true(gkvt_lt_wait_gone(sp[0], 30000));
}

/* With --keep-alive a failed job leaves the persistent servers running,
 * whether it started them or reused them, and so does a signal to the
 * launcher; the log says how to stop them. */
static void
test_keep_alive_failure(void **state)
{
    struct gkvt_lt_fx *f = *state;
    char ws2[PATH_MAX + 8], ws3[PATH_MAX + 8];
    const char *args[] = {"--ip-config", f->cfg, "--store", f->store,
        "--num-servers", "1", "--num-trainers", "2",
        "--keep-alive", "--server-name", "lt-fail", "--workspace", f->ws,
        "--", gkvt_lt_self, "--child", "fail", NULL};
    const char *stop[] = {"--ip-config", f->cfg, "--num-servers", "1",
        "--shutdown", "--timeout", "30", NULL};
    pid_t sp[4], t0;

    gkvt_lt_ports(f);
    /* a job that starts the servers, and whose trainer rank 1 fails */
    assert_int_equal(gkvt_lt_retry(f, args, NULL, 30), 1);
    assert_true(gkvt_lt_has(f, "trainer rank 1 (machine 0) failed: exit status 3"));
    assert_int_equal(gkvt_lt_server_pids(f, sp, 4), 1);
    gkvt_lt_track(f, sp[0]);
    t0 = gkvt_lt_pid_file(f->ws, "pid-trainer-0");
    gkvt_lt_track(f, t0);
    assert_true(gkvt_lt_wait_gone(t0, 3000));
    assert_true(gkvt_lt_has(f, "--keep-alive: leaving the servers running"));
    assert_true(gkvt_lt_has(f, "--shutdown"));
    assert_false(gkvt_lt_has(f, "server 0/0 exited"));
    tools__sleep_ms(300);
    assert_false(gkvt_lt_pid_gone(sp[0]));
    assert_true(gkvt_lt_port_connects(f->base));

    /* a job that reuses them and fails the same way */
    snprintf(ws2, sizeof ws2, "%s2", f->ws);
    args[12] = ws2;
    setenv("LT_DIR", ws2, 1);
    assert_int_equal(gkvt_lt_launch(f, args, NULL, 30), 1);
    assert_true(gkvt_lt_has(f, "reusing server 0/0"));
    assert_true(gkvt_lt_has(f, "trainer rank 1 (machine 0) failed"));
    assert_true(gkvt_lt_has(f, "--keep-alive: leaving the servers running"));
    assert_false(gkvt_lt_pid_gone(sp[0]));

    /* SIGTERM to the launcher: the trainers stop, the servers stay */
    snprintf(ws3, sizeof ws3, "%s3", f->ws);
    args[12] = ws3;
    args[16] = "sleep";
    setenv("LT_DIR", ws3, 1);
    gkvt_lt_start(f, args, NULL);
    t0 = gkvt_lt_wait_pid_file(ws3, "pid-trainer-0", 10000);
    gkvt_lt_track(f, t0);
    if (t0 <= 0) {
        gkvt_lt_wait(f, 1);
        gkvt_lt_dump(f);
        fail_msg("trainer did not start");
    }
    kill(f->launcher, SIGTERM);
    assert_int_equal(gkvt_lt_wait(f, 20), 1);
    assert_true(gkvt_lt_wait_gone(t0, 3000));
    assert_true(gkvt_lt_has(f, "--keep-alive: leaving the servers running"));
    assert_false(gkvt_lt_pid_gone(sp[0]));
    setenv("LT_DIR", f->ws, 1);

    assert_int_equal(gkvt_lt_launch(f, stop, NULL, 20), 0);
    assert_true(gkvt_lt_wait_gone(sp[0], 30000));
}

/* --shutdown with one server down stops the others, names the one that
 * did not answer, and exits 1. */
static void
test_shutdown_partial(void **state)
{
    struct gkvt_lt_fx *f = *state;
    char cfg2[PATH_MAX + 16], want[2 * PATH_MAX];
    const char *args[] = {"--ip-config", f->cfg, "--store", f->store,
        "--num-servers", "1", "--num-trainers", "1",
        "--keep-alive", "--server-name", "lt-stop", "--workspace", f->ws,
        "--", gkvt_lt_self, "--child", "env", NULL};
    const char *stop[] = {"--ip-config", cfg2, "--num-servers", "1",
        "--shutdown", "--timeout", "30", NULL};
    pid_t sp[4];

    /* a persistent server on machine 0 of a two-machine ip_config only */
    gkvt_lt_ports(f);
    gkvt_lt_expect_ok(f, gkvt_lt_retry(f, args, NULL, 20), "launch");
    assert_int_equal(gkvt_lt_server_pids(f, sp, 4), 1);
    gkvt_lt_track(f, sp[0]);
    gkvt_lt_two_machines(f, cfg2, sizeof cfg2);
    assert_true(gkvt_lt_port_closed(f->base + 8));

    assert_int_equal(gkvt_lt_launch(f, stop, NULL, 30), 1);
    assert_true(gkvt_lt_has(f, "stopping server 0/0"));
    snprintf(want, sizeof want, "server 1/0 (machine 1, server 0, "
             "127.0.0.1:%d, %s line 2) did not answer", f->base + 8, cfg2);
    assert_true(gkvt_lt_has(f, want));
    assert_true(gkvt_lt_has(f, "1 of 2 servers did not answer"));
    assert_true(gkvt_lt_wait_gone(sp[0], 30000));
    assert_true(gkvt_lt_port_closed(f->base));
}

/* Launches 'nserv' persistent servers named 'name' (--keep-alive, one
 * trainer, workspace 'ws') on the picked ports, and tracks their 'want'
 * PIDs in sp. */
static void
start_persistent(struct gkvt_lt_fx *f, const char *name, const char *nserv,
                 const char *ws, pid_t *sp, int want)
{
    const char *args[] = {"--ip-config", f->cfg, "--store", f->store,
        "--num-servers", nserv, "--num-trainers", "1",
        "--keep-alive", "--server-name", name, "--workspace", ws,
        "--", gkvt_lt_self, "--child", "env", NULL};

    if (gkvt_lt_retry(f, args, NULL, 30) != 0) {
        gkvt_lt_dump(f);
        fail_msg("launch of persistent servers '%s' failed", name);
    }
    assert_int_equal(gkvt_lt_server_pids(f, sp, 4), want);
    for (int i = 0; i < want; i++)
        gkvt_lt_track(f, sp[i]);
}

/* --shutdown with --num-servers below the servers' own count: each
 * handshake says how many run per machine, and those beyond are stopped
 * too, said on stdout (it stopped 0/0 only, exited 0 and said nothing). A
 * server beyond that cannot be stopped is named and the exit status is
 * 1. */
static void
test_shutdown_more_servers(void **state)
{
    struct gkvt_lt_fx *f = *state;
    char want[2 * PATH_MAX], ws2[PATH_MAX + 8];
    const char *stop[] = {"--ip-config", f->cfg, "--num-servers", "1",
        "--shutdown", "--timeout", "30", NULL};
    pid_t sp[4];

    /* three servers, stopped by a --shutdown that says one */
    gkvt_lt_ports(f);
    start_persistent(f, "lt-more", "3", f->ws, sp, 3);
    gkvt_lt_expect_ok(f, gkvt_lt_launch(f, stop, NULL, 30),
                      "--shutdown --num-servers 1");
    {
        char *o = gkvt_slurp(f->out);
        snprintf(want, sizeof want, "server 0/0 at 127.0.0.1:%d says machine "
                 "0 runs 3 servers, more than --num-servers 1: stopping "
                 "servers 0/1..0/2 as well", f->base);
        if (strstr(o, want) == NULL || strstr(o, "stopping server 0/1") ==
            NULL || strstr(o, "stopping server 0/2") == NULL)
            fail_msg("stdout lacks '%s' or a server:\n%s", want, o);
        free(o);
    }
    for (int i = 0; i < 3; i++)
        if (!gkvt_lt_wait_gone(sp[i], 30000))
            fail_msg("server 0/%d (pid %ld) still runs", i, (long)sp[i]);
    for (int i = 0; i < 3; i++)
        assert_true(gkvt_lt_port_closed(f->base + i));

    /* again, with server 0/2 gone before the --shutdown: 0/0 and 0/1 stop,
     * 0/2 is named, exit 1 */
    snprintf(ws2, sizeof ws2, "%s2", f->ws);
    setenv("LT_DIR", ws2, 1);
    start_persistent(f, "lt-more", "3", ws2, sp, 3);
    kill(sp[2], SIGKILL);
    assert_true(gkvt_lt_wait_gone(sp[2], 30000));
    assert_true(gkvt_lt_port_closed(f->base + 2));
    assert_int_equal(gkvt_lt_launch(f, stop, NULL, 30), 1);
    assert_true(gkvt_lt_has(f, "stopping server 0/1"));
    snprintf(want, sizeof want, "server 0/2 (machine 0, server 2, "
             "127.0.0.1:%d, %s line 2) did not answer", f->base + 2, f->cfg);
    if (!gkvt_lt_has(f, want)) {
        gkvt_lt_dump(f);
        fail_msg("want '%s'", want);
    }
    assert_true(gkvt_lt_has(f, "1 of 3 servers did not answer"));
    assert_true(gkvt_lt_wait_gone(sp[0], 30000));
    assert_true(gkvt_lt_wait_gone(sp[1], 30000));
    assert_true(gkvt_lt_port_closed(f->base));
    assert_true(gkvt_lt_port_closed(f->base + 1));
}

/* --shutdown --timeout S gives each server S seconds to answer (5
 * without it): a server that is stopped (SIGSTOP) is named with the time
 * it had, both ways; once it runs again it is stopped. */
static void
test_shutdown_timeout(void **state)
{
    struct gkvt_lt_fx *f = *state;
    const char *stop1[] = {"--ip-config", f->cfg, "--num-servers", "1",
        "--shutdown", "--timeout", "1", NULL};
    const char *stop[] = {"--ip-config", f->cfg, "--num-servers", "1",
        "--shutdown", "--timeout", "30", NULL};
    pid_t sp[4];

    gkvt_lt_ports(f);
    start_persistent(f, "lt-slow", "1", f->ws, sp, 1);
    gkvt_stop_proc(sp[0]);
    assert_int_equal(gkvt_lt_launch(f, stop1, NULL, 30), 1);
    if (!gkvt_lt_has(f, "no reply to hello within 1000 ms")) {
        gkvt_lt_dump(f);
        fail_msg("the stopped server's 1 s is not named");
    }
    assert_true(gkvt_lt_has(f, "the only server was not stopped"));
    {   /* without --timeout a server has 5 s (the default) */
        const char *stop0[] = {"--ip-config", f->cfg, "--num-servers", "1",
            "--shutdown", NULL};
        assert_int_equal(gkvt_lt_launch(f, stop0, NULL, 30), 1);
        if (!gkvt_lt_has(f, "no reply to hello within 5000 ms")) {
            gkvt_lt_dump(f);
            fail_msg("the stopped server's default 5 s is not named");
        }
    }
    kill(sp[0], SIGCONT);
    assert_false(gkvt_lt_pid_gone(sp[0]));
    assert_int_equal(gkvt_lt_launch(f, stop, NULL, 30), 0);
    assert_true(gkvt_lt_wait_gone(sp[0], 30000));
    assert_true(gkvt_lt_port_closed(f->base));
}

/* --shutdown without the --token-file of servers that need one: each
 * failure names the server by its place in the ip_config (it used to say
 * "(machine 0, server 0)" for every one, the label of a client of one
 * address); nothing is stopped, exit 1; with the token they all stop. */
static void
test_shutdown_token(void **state)
{
    struct gkvt_lt_fx *f = *state;
    char cfg2[PATH_MAX + 16], tok[PATH_MAX + 16], want[2 * PATH_MAX];
    const char *args[] = {"--ip-config", cfg2, "--store", f->store,
        "--num-servers", "2", "--num-trainers", "1", "--token-file", tok,
        "--keep-alive", "--server-name", "lt-tok", "--workspace", f->ws,
        "--", gkvt_lt_self, "--child", "env", NULL};
    const char *stop[] = {"--ip-config", cfg2, "--num-servers", "2",
        "--shutdown", "--timeout", "30", NULL};
    const char *stop_tok[] = {"--ip-config", cfg2, "--num-servers", "2",
        "--shutdown", "--token-file", tok, "--timeout", "30", NULL};
    pid_t sp[8];
    char *o, *e;

    snprintf(tok, sizeof tok, "%s/token", f->dir);
    gkvt_write_text(tok, "lt-shutdown-secret\n", 0600);
    gkvt_lt_expect_ok(f, gkvt_lt_retry2(f, args, cfg2, sizeof cfg2, 30),
                      "launch");
    assert_int_equal(gkvt_lt_server_pids(f, sp, 8), 4);
    for (int i = 0; i < 4; i++)
        gkvt_lt_track(f, sp[i]);

    assert_int_equal(gkvt_lt_launch(f, stop, NULL, 30), 1);
    o = gkvt_slurp(f->out);
    e = gkvt_slurp(f->err);
    for (int m = 0; m < 2; m++)
        for (int k = 0; k < 2; k++) {
            snprintf(want, sizeof want, "server %d/%d (machine %d, server %d, "
                     "127.0.0.1:%d, %s line %d) was not stopped: handshake: "
                     "permission denied: it requires a token and this client "
                     "has none (give --token-file", m, k, m, k,
                     f->base + 8 * m + k, cfg2, m + 1);
            if (strstr(e, want) == NULL)
                fail_msg("stderr lacks '%s':\n%s", want, e);
        }
    if (strstr(e, "(machine 0, server 0)") != NULL)
        fail_msg("a server is still called machine 0, server 0:\n%s", e);
    assert_non_null(strstr(e, "none of the 4 servers was stopped"));
    assert_null(strstr(e, "the others were asked to stop"));
    assert_null(strstr(o, "stopping server"));
    free(o);
    free(e);
    for (int i = 0; i < 4; i++)
        assert_false(gkvt_lt_pid_gone(sp[i]));

    gkvt_lt_expect_ok(f, gkvt_lt_launch(f, stop_tok, NULL, 30),
                      "--shutdown --token-file");
    for (int i = 0; i < 4; i++)
        if (!gkvt_lt_wait_gone(sp[i], 30000))
            fail_msg("server pid %ld still runs", (long)sp[i]);
}

/* A launch that reuses persistent servers cannot give them other options:
 * a server takes its options at its start. The --server-arg options of
 * such a launch used to be dropped without a word; now stdout says that
 * the reused servers keep their options and names the ones not applied,
 * and a difference the handshake shows (--heartbeat-timeout, --max-msg)
 * is named per server. The job itself runs (exit 0). */
static void
test_keep_alive_server_args(void **state)
{
    struct gkvt_lt_fx *f = *state;
    char ws2[PATH_MAX + 8];
    const char *args[] = {"--ip-config", f->cfg, "--store", f->store,
        "--num-servers", "1", "--num-trainers", "1",
        "--keep-alive", "--server-name", "lt-sargs", "--workspace", f->ws,
        "--", gkvt_lt_self, "--child", "env", NULL};
    const char *args2[] = {"--ip-config", f->cfg, "--store", f->store,
        "--num-servers", "1", "--num-trainers", "1",
        "--keep-alive", "--server-name", "lt-sargs", "--workspace", ws2,
        "--server-arg", "--nosync", "--server-arg", "--heartbeat-timeout",
        "--server-arg", "5000", "--server-arg", "--writeback",
        "--server-arg", "emb*",
        "--", gkvt_lt_self, "--child", "env", NULL};
    const char *stop[] = {"--ip-config", f->cfg, "--num-servers", "1",
        "--shutdown", "--timeout", "30", NULL};
    pid_t sp[4];
    char *o;

    gkvt_lt_ports(f);
    gkvt_lt_expect_ok(f, gkvt_lt_retry(f, args, NULL, 20), "first launch");
    assert_int_equal(gkvt_lt_server_pids(f, sp, 4), 1);
    gkvt_lt_track(f, sp[0]);

    snprintf(ws2, sizeof ws2, "%s2", f->ws);
    setenv("LT_DIR", ws2, 1);
    gkvt_lt_expect_ok(f, gkvt_lt_launch(f, args2, NULL, 20), "second launch");
    setenv("LT_DIR", f->ws, 1);
    o = gkvt_slurp(f->out);
    if (strstr(o, "reusing server 0/0") == NULL ||
        strstr(o, "note: the 1 reused server (persistent server 'lt-sargs') "
                  "keeps the options it was started with: this launch's "
                  "--server-arg --nosync --heartbeat-timeout 5000 "
                  "--writeback 'emb*' are NOT applied") == NULL ||
        strstr(o, "--shutdown") == NULL ||
        strstr(o, "note: reused server 0/0 runs with --heartbeat-timeout "
                  "30000, not 5000 as given") == NULL)
        fail_msg("stdout lacks the note on --server-arg:\n%s", o);
    free(o);
    assert_false(gkvt_lt_has(f, "started server"));
    assert_false(gkvt_lt_pid_gone(sp[0]));

    assert_int_equal(gkvt_lt_launch(f, stop, NULL, 20), 0);
    assert_true(gkvt_lt_wait_gone(sp[0], 30000));
}

/* --shutdown when no server answers: the closing line says that none was
 * stopped (it said "2 of 2 servers did not answer ...; the others were
 * asked to stop" when there were no others); with one server, "the only
 * server". Exit 1 both times. */
static void
test_shutdown_none_answer(void **state)
{
    struct gkvt_lt_fx *f = *state;
    char cfg2[PATH_MAX + 16];
    const char *stop2[] = {"--ip-config", cfg2, "--num-servers", "1",
        "--shutdown", "--timeout", "30", NULL};
    const char *stop1[] = {"--ip-config", f->cfg, "--num-servers", "1",
        "--shutdown", "--timeout", "30", NULL};
    char *e;

    gkvt_lt_ports(f);
    gkvt_lt_two_machines(f, cfg2, sizeof cfg2);
    assert_int_equal(gkvt_lt_launch(f, stop2, NULL, 30), 1);
    e = gkvt_slurp(f->err);
    if (strstr(e, "none of the 2 servers was stopped") == NULL ||
        strstr(e, "the others were asked to stop") != NULL ||
        strstr(e, "2 of 2") != NULL)
        fail_msg("stderr:\n%s", e);
    free(e);
    assert_false(gkvt_lt_has(f, "stopping server"));

    assert_int_equal(gkvt_lt_launch(f, stop1, NULL, 30), 1);
    e = gkvt_slurp(f->err);
    if (strstr(e, "the only server was not stopped") == NULL ||
        strstr(e, "the others") != NULL || strstr(e, "1 of 1") != NULL)
        fail_msg("stderr:\n%s", e);
    free(e);
}

/* --shutdown returns once the servers it stopped have exited and their
 * ports are free, so a launch right after it on the same ports starts its
 * own servers (it used to return at the servers' reply, while they still
 * held their ports for a moment, and the launch then failed with "port
 * ... is already in use (a server left from an earlier job?)"). */
static void
test_shutdown_then_relaunch(void **state)
{
    struct gkvt_lt_fx *f = *state;
    char ws2[PATH_MAX + 8];
    const char *stop[] = {"--ip-config", f->cfg, "--num-servers", "2",
        "--shutdown", "--timeout", "30", NULL};
    const char *args[] = {"--ip-config", f->cfg, "--store", f->store,
        "--num-servers", "2", "--num-trainers", "1", "--workspace", ws2,
        "--timeout", "30", "--", gkvt_lt_self, "--child", "env", NULL};
    pid_t sp[4], np[4];
    int rc;

    gkvt_lt_ports(f);
    start_persistent(f, "lt-relaunch", "2", f->ws, sp, 2);
    assert_int_equal(gkvt_lt_launch(f, stop, NULL, 60), 0);
    assert_true(gkvt_lt_has(f, "stopping server 0/1"));
    /* at once, without waiting here: gone, ports free */
    for (int i = 0; i < 2; i++) {
        if (!gkvt_lt_pid_gone(sp[i]))
            fail_msg("server 0/%d (pid %ld) still runs after --shutdown "
                     "returned", i, (long)sp[i]);
        assert_false(gkvt_lt_port_connects(f->base + i));
        assert_true(gkvt_port_bindable(f->base + i, 1));
    }
    /* a launch on the same ports, at once */
    snprintf(ws2, sizeof ws2, "%s2", f->ws);
    setenv("LT_DIR", ws2, 1);
    rc = gkvt_lt_launch(f, args, NULL, 60);
    gkvt_lt_expect_ok(f, rc, "the launch right after --shutdown");
    assert_true(gkvt_lt_has(f, "started server 0/0"));
    assert_false(gkvt_lt_has(f, "already in use"));
    assert_int_equal(gkvt_lt_server_pids(f, np, 4), 2);
    for (int i = 0; i < 2; i++) {
        gkvt_lt_track(f, np[i]);
        assert_true(np[i] != sp[i]);
        assert_true(gkvt_lt_wait_gone(np[i], 30000));
    }
}

#define T(name) cmocka_unit_test_setup_teardown(name, gkvt_lt_setup, \
                                                gkvt_lt_teardown)

int
main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        T(test_keep_alive),
        T(test_keep_alive_other_store),
        T(test_keep_alive_failure),
        T(test_shutdown_partial),
        T(test_shutdown_more_servers),
        T(test_shutdown_token),
        T(test_shutdown_timeout),
        T(test_keep_alive_server_args),
        T(test_shutdown_none_answer),
        T(test_shutdown_then_relaunch),
    };
    int rc = gkvt_lt_prelude(argc, argv);

    if (rc >= 0)
        return rc;
    return cmocka_run_group_tests_name("launch_keep_alive", tests, NULL, NULL);
}
