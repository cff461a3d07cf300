/* net_auth_default_test.c - a server is closed unless its operator opens
 * it: without a token gkv-server listens on loopback only (saying what
 * that means in its log) and refuses any other address unless
 * --insecure-no-token; tokens shorter than GKV_TOKEN_MIN are refused by
 * server, client and gkv-launch; a HELLO tells no host, pid, name or
 * store path (the handshake of a client with the token does); stores,
 * gkv-launch's workspace, logs and the token it makes per job are private.
 * Real gkv-server and gkv-launch processes on loopback. */
#include <errno.h>
#include <ifaddrs.h>
#include <limits.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <nanomsg/nn.h>
#include <nanomsg/reqrep.h>
#include "gkvt_net.h"
#include "wire.h"

#define MAXPROC 8
#define TOKEN16 "0123456789abcdef"

static int
setup(void **state)
{
    return gkvt_job_setup(state, sizeof (struct gkvt_job), "auth", MAXPROC,
                          NULL, 0);
}

static int
teardown(void **state)
{
    return gkvt_job_teardown(state);
}

static unsigned
mode_of(const char *path)
{
    struct stat sb;

    if (stat(path, &sb) != 0)
        fail_msg("stat %s: %s", path, strerror(errno));
    return (unsigned)(sb.st_mode & 07777);
}

static void
make_store(const char *st)
{
    gkv_store *s;
    gkv_tensor_spec sp = gkvt_spec_init(GKV_I64, 1, 0, 8, GKV_INIT_ZEROS);

    GKVT_OK(gkv_store_open(&s, st, GKV_CREATE, NULL));
    GKVT_OK(gkv_tensor_create(s, "t", &sp));
    gkv_store_close(s);
}

/* A fresh ip_config of one machine at 'host' (port from the job's base). */
static void
write_cfg(struct gkvt_job *j, const char *host)
{
    char line[128];

    j->base = gkvt_port_base(8);
    snprintf(line, sizeof line, "%s %d\n", host, j->base);
    gkvt_write_text(j->cfg, line, 0644);
}

/* Runs gkv-server with the store and ip_config of j plus 'extra'; its exit
 * status (it must not start: a timeout kills it), stderr in *err. */
static int
server_run(struct gkvt_job *j, const char *const *extra, char **err)
{
    char *argv[32];
    int n = 0;

    argv[n++] = (char *)gkvt_prog("gkv-server");
    argv[n++] = "--store";
    argv[n++] = j->st[0];
    argv[n++] = "--ip-config";
    argv[n++] = j->cfg;
    argv[n++] = "--machine";
    argv[n++] = "0";
    for (; extra != NULL && *extra != NULL; extra++)
        argv[n++] = (char *)*extra;
    argv[n] = NULL;
    return gkvt_run(argv, NULL, 0, NULL, err, 30);
}

static void
has(const char *s, const char *want)
{
    if (s == NULL || strstr(s, want) == NULL)
        fail_msg("'%s' lacks '%s'", s ? s : "(null)", want);
}

/* ---- without a token ----------------------------------------------------- */

/* Loopback without a token: allowed, and the log says what it means. */
static void
test_loopback_without_token_says_so(void **state)
{
    struct gkvt_job *j = *state;
    struct gkvt_proc *srv;
    char want[128];

    make_store(j->st[0]);
    gkvt_serve(j, 1, 1, NULL, &srv);
    snprintf(want, sizeof want, "auth off: anyone who can reach "
             "127.0.0.1:%d can read, write, delete tensors and stop this "
             "server", j->base);
    assert_true(gkvt_file_has(srv->log, want));
    assert_false(gkvt_file_has(srv->log, "WARNING"));
}

/* --bind-any without a token: refused, naming the flag; with
 * --insecure-no-token it starts and warns loudly. */
static void
test_bind_any_needs_token_or_flag(void **state)
{
    struct gkvt_job *j = *state;
    const char *any[] = {"--bind-any", NULL};
    const char *insecure[] = {"--bind-any", "--insecure-no-token", NULL};
    const char *tok[] = {"--bind-any", "--token-file", NULL, NULL};
    char tf[4300], *err = NULL;
    struct gkvt_proc *srv;

    make_store(j->st[0]);
    write_cfg(j, "127.0.0.1");
    assert_int_equal(server_run(j, any, &err), 1);
    has(err, "refusing to listen on tcp://*:");
    has(err, "without a token");
    has(err, "--insecure-no-token");
    free(err);
    gkvt_serve(j, 1, 1, insecure, &srv);
    assert_true(gkvt_file_has(srv->log, "WARNING: auth off on tcp://*:"));
    assert_true(gkvt_file_has(srv->log, "(--insecure-no-token)"));
    gkvt_proc_kill(srv);
    /* a token makes --bind-any fine, without a warning */
    snprintf(tf, sizeof tf, "%s/token", j->dir);
    gkvt_write_text(tf, TOKEN16 "\n", 0600);
    tok[2] = tf;
    gkvt_serve(j, 1, 1, tok, &srv);
    assert_false(gkvt_file_has(srv->log, "auth off"));
    assert_true(gkvt_file_has(srv->log, "auth on"));
}

/* A non-loopback address of this machine (skipped when it has none):
 * refused without a token. */
static void
test_non_loopback_address_refused(void **state)
{
    struct gkvt_job *j = *state;
    struct ifaddrs *ifs = NULL;
    char ip[INET_ADDRSTRLEN] = "", *err = NULL;

    if (getifaddrs(&ifs) == 0) {
        for (struct ifaddrs *i = ifs; i != NULL && ip[0] == '\0'; i = i->ifa_next) {
            struct sockaddr_in *a = (struct sockaddr_in *)i->ifa_addr;
            if (a == NULL || a->sin_family != AF_INET ||
                (ntohl(a->sin_addr.s_addr) >> 24) == 127)
                continue;
            inet_ntop(AF_INET, &a->sin_addr, ip, sizeof ip);
        }
        freeifaddrs(ifs);
    }
    if (ip[0] == '\0')
        skip();
    make_store(j->st[0]);
    write_cfg(j, ip);
    assert_int_equal(server_run(j, NULL, &err), 1);
    has(err, "refusing to listen on tcp://");
    has(err, ip);
    has(err, "--insecure-no-token");
    free(err);
}

/* ---- short tokens -------------------------------------------------------- */

static void
test_short_tokens_refused(void **state)
{
    struct gkvt_job *j = *state;
    const char *tok[] = {"--token-file", NULL, NULL};
    char tf[4300], *err = NULL, *out = NULL;
    gkv_client *c = NULL;
    gkv_client_opts o;
    struct gkvt_proc *srv;
    char buf[64];

    make_store(j->st[0]);
    write_cfg(j, "127.0.0.1");
    snprintf(tf, sizeof tf, "%s/token", j->dir);
    tok[1] = tf;
    /* the library's reader */
    gkvt_write_text(tf, "0123456789abcde\n", 0600);        /* 15 bytes */
    NET_FAILS(gkv_token_load(tf, buf, sizeof buf), GKV_EINVAL,
              "the token is 15 bytes; a token must be at least 16");
    /* the server */
    assert_int_equal(server_run(j, tok, &err), 1);
    has(err, "at least 16");
    free(err);
    err = NULL;
    /* gkv-launch: nothing started, exit 2 */
    {
        char *argv[] = {(char *)gkvt_prog("gkv-launch"), "--ip-config", j->cfg,
            "--store", j->st[0], "--num-servers", "1", "--num-trainers", "1",
            "--token-file", tf, "--workspace", j->dir, "--", "true", NULL};
        assert_int_equal(gkvt_run(argv, NULL, 0, &out, &err, 60), 2);
        has(err, "at least 16");
        free(out);
        free(err);
        err = NULL;
    }
    /* 16 bytes: the server starts; the client refuses 15 before any
     * connection, and takes 16 (a trailing newline is not counted) */
    gkvt_write_text(tf, TOKEN16 "\n", 0600);
    gkvt_serve(j, 1, 1, tok, &srv);
    memset(&o, 0, sizeof o);
    o.timeout_ms = 5000;
    o.flags = GKV_CLIENT_NO_HEARTBEAT;
    NET_FAILS(gkv_client_connect(&c, j->cfg, "0123456789abcde\n", "g", 0, &o),
              GKV_EINVAL, "a token must be at least 16");
    assert_null(c);
    GKVT_OK(gkv_client_connect(&c, j->cfg, TOKEN16 "\n", "g", 0, &o));
    gkv_client_close(c);
}

/* ---- what a HELLO tells -------------------------------------------------- */

/* A raw HELLO to port: its identity in *hr. */
static void
raw_hello(int port, net_hello_rep *hr)
{
    unsigned char b[NET_HDR_LEN];
    char url[64], why[256];
    void *rep = NULL;
    net_hdr h;
    net_rd rd;
    int s, n, ms = 5000;

    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", port);
    assert_true((s = nn_socket(AF_SP, NN_REQ)) >= 0);
    assert_int_equal(nn_setsockopt(s, NN_SOL_SOCKET, NN_RCVTIMEO, &ms,
                                   sizeof ms), 0);
    assert_true(nn_connect(s, url) >= 0);
    memset(&h, 0, sizeof h);
    h.magic = NET_MAGIC;
    h.version = NET_VERSION;
    h.type = NET_HELLO;
    h.req_id = 1;
    net__hdr_put(b, &h);
    assert_int_equal(nn_send(s, b, NET_HDR_LEN, 0), NET_HDR_LEN);
    assert_true((n = nn_recv(s, &rep, NN_MSG, 0)) > 0);
    assert_int_equal(net__hdr_check(rep, (size_t)n, &h, why, sizeof why),
                     GKV_OK);
    net__rd_init(&rd, (unsigned char *)rep + NET_HDR_LEN, (size_t)h.len);
    assert_int_equal(net__dec_hello_rep(&rd, hr), 0);
    nn_freemsg(rep);
    nn_close(s);
}

/* A HELLO tells what a client needs to hand-shake, not where the server
 * runs: no host, pid, start time, name or store path. The handshake of a
 * client with the token tells them (kvctl --server shows host and pid). */
static void
test_hello_hides_identity(void **state)
{
    struct gkvt_job *j = *state;
    const char *tok[] = {"--token-file", NULL, "--keep-alive",
                         "--server-name", "secret-name", NULL};
    char tf[4300], host[256] = "";
    struct gkvt_proc *srv;
    net_hello_rep hr;
    gkv_client *c = NULL;
    gkv_client_opts o;
    gkv_server_info in;

    make_store(j->st[0]);
    snprintf(tf, sizeof tf, "%s/token", j->dir);
    gkvt_write_text(tf, TOKEN16 "\n", 0600);
    tok[1] = tf;
    gkvt_serve(j, 1, 1, tok, &srv);
    raw_hello(j->base, &hr);
    assert_int_equal(hr.id.proto, NET_VERSION);
    assert_true(hr.id.flags & NET_ID_AUTH);
    assert_true(hr.id.flags & NET_ID_KEEP_ALIVE);
    assert_int_equal(hr.id.num_servers, 1);
    assert_string_equal(hr.id.host, "");
    assert_string_equal(hr.id.store, "");
    assert_string_equal(hr.id.name, "");
    assert_int_equal(hr.id.pid, 0);
    assert_true(hr.id.start_ms == 0);
    /* with the token: all of it */
    memset(&o, 0, sizeof o);
    o.timeout_ms = 5000;
    o.flags = GKV_CLIENT_NO_HEARTBEAT | GKV_CLIENT_OBSERVER;
    GKVT_OK(gkv_client_connect(&c, j->cfg, TOKEN16, "g", 0, &o));
    GKVT_OK(gkv_client_server_info(c, 0, &in));
    gethostname(host, sizeof host - 1);
    assert_string_equal(in.host, host);
    assert_int_equal((pid_t)in.pid, srv->pid);
    assert_string_equal(in.name, "secret-name");
    assert_non_null(strstr(in.store, "st0"));
    gkv_client_close(c);
    /* a wrong token learns none of it from the refusal either */
    NET_FAILS(gkv_client_connect(&c, j->cfg, "wrong-token-wrong-token", "g", 1,
                                 &o), GKV_EPERM, "wrong token");
    assert_null(strstr(gkv_net_errmsg(), "st0"));
    assert_null(strstr(gkv_net_errmsg(), "secret-name"));
}

/* ---- private files ------------------------------------------------------- */

static void
test_store_private_unless_asked(void **state)
{
    struct gkvt_job *j = *state;
    const char *create[] = {"--create", NULL};
    char p[4400], st[4300];
    gkv_store *s;
    struct gkvt_proc *srv;
    mode_t old = umask(022);

    /* the default: 0700 and 0600 */
    GKVT_OK(gkv_store_open(&s, j->st[0], GKV_CREATE, NULL));
    gkv_store_close(s);
    assert_int_equal(mode_of(j->st[0]), 0700);
    snprintf(p, sizeof p, "%s/data.mdb", j->st[0]);
    assert_int_equal(mode_of(p), 0600);
    snprintf(p, sizeof p, "%s/lock.mdb", j->st[0]);
    assert_int_equal(mode_of(p), 0600);
    snprintf(p, sizeof p, "%s/writeback.lock", j->st[0]);
    assert_int_equal(mode_of(p), 0600);
    /* asked otherwise: GKV_SHARE_GROUP */
    snprintf(st, sizeof st, "%s/shared", j->dir);
    GKVT_OK(gkv_store_open(&s, st, GKV_CREATE | GKV_SHARE_GROUP, NULL));
    gkv_store_close(s);
    assert_int_equal(mode_of(st), 0750);
    snprintf(p, sizeof p, "%s/data.mdb", st);
    assert_int_equal(mode_of(p), 0640);
    snprintf(p, sizeof p, "%s/lock.mdb", st);
    assert_int_equal(mode_of(p), 0660);
    /* a store gkv-server --create makes */
    snprintf(j->st[0], sizeof j->st[0], "%s/made-by-server", j->dir);
    gkvt_serve(j, 1, 1, create, &srv);
    assert_int_equal(mode_of(j->st[0]), 0700);
    snprintf(p, sizeof p, "%s/data.mdb", j->st[0]);
    assert_int_equal(mode_of(p), 0600);
    umask(old);
}

/* ---- gkv-launch ---------------------------------------------------------- */

/* Runs gkv-launch with argv (after the program); exit status, output in
 * *out and *err. */
static int
launch(char *const *args, char **out, char **err)
{
    char *argv[48];
    int n = 0;

    argv[n++] = (char *)gkvt_prog("gkv-launch");
    for (; *args != NULL; args++)
        argv[n++] = *args;
    argv[n] = NULL;
    return gkvt_run(argv, NULL, 0, out, err, 120);
}

/* No --token-file: gkv-launch makes a token per job (0600, in the private
 * workspace), gives it to the servers and trainers; logs are private. */
static void
test_launch_makes_job_token(void **state)
{
    struct gkvt_job *j = *state;
    char ws[4300], tf[4400], log[4400], trainer[9000], *out = NULL, *err = NULL;
    char *tok;
    int rc;

    make_store(j->st[0]);
    write_cfg(j, "127.0.0.1");
    snprintf(ws, sizeof ws, "%s/ws", j->dir);
    /* the trainer proves it got the token: the servers require it */
    snprintf(trainer, sizeof trainer, "test -s \"$GKV_TOKEN_FILE\" && exec %s "
             "--ip-config \"$GKV_IP_CONFIG\" --token-file \"$GKV_TOKEN_FILE\" "
             "ls && exit 7", gkvt_prog("kvctl"));
    {
        char *args[] = {"--ip-config", j->cfg, "--store", j->st[0],
            "--num-servers", "1", "--num-trainers", "1", "--workspace", ws,
            "--", "sh", "-c", trainer, NULL};
        rc = launch(args, &out, &err);
    }
    if (rc != 0)
        fail_msg("gkv-launch exit %d\nstdout: %s\nstderr: %s", rc, out, err);
    snprintf(tf, sizeof tf, "%s/token", ws);
    has(out, tf);
    assert_int_equal(mode_of(ws), 0700);
    assert_int_equal(mode_of(tf), 0600);
    tok = gkvt_slurp(tf);
    assert_int_equal(strlen(tok), 45);          /* 32 bytes base64, a newline */
    free(tok);
    snprintf(log, sizeof log, "%s/logs", ws);
    assert_int_equal(mode_of(log), 0700);
    snprintf(log, sizeof log, "%s/logs/server-0-0.log", ws);
    assert_int_equal(mode_of(log), 0600);
    assert_true(gkvt_file_has(log, "auth on"));
    free(out);
    free(err);
}

/* --keep-alive without --token-file: the token lives in
 * $XDG_STATE_HOME/gkv/server-HOST-PORT.token (machine 0's address); the
 * next launch finds it (reusing the servers), and --shutdown stops them
 * with it and removes it. */
static void
test_launch_persistent_token(void **state)
{
    struct gkvt_job *j = *state;
    char ws[4300], state_dir[4300], tf[4400], log[4400], *out = NULL, *err = NULL;
    int rc;

    make_store(j->st[0]);
    write_cfg(j, "127.0.0.1");
    snprintf(state_dir, sizeof state_dir, "%s/state", j->dir);
    setenv("XDG_STATE_HOME", state_dir, 1);
    snprintf(ws, sizeof ws, "%s/ws", j->dir);
    {
        char *args[] = {"--ip-config", j->cfg, "--store", j->st[0],
            "--num-servers", "1", "--num-trainers", "1", "--workspace", ws,
            "--keep-alive", "--server-name", "auth-persist", "--", "true",
            NULL};
        for (int run = 0; run < 2; run++) {
            rc = launch(args, &out, &err);
            if (rc != 0)
                fail_msg("launch %d: exit %d\nstdout: %s\nstderr: %s", run, rc,
                         out, err);
            if (run == 1)
                has(out, "reusing server 0/0");
            free(out);
            free(err);
        }
    }
    snprintf(tf, sizeof tf, "%s/gkv/server-127.0.0.1-%d.token", state_dir,
             j->base);
    snprintf(log, sizeof log, "%s/gkv", state_dir);
    assert_int_equal(mode_of(log), 0700);
    assert_int_equal(mode_of(tf), 0600);
    snprintf(log, sizeof log, "%s/logs/server-0-0.log", ws);
    assert_true(gkvt_file_has(log, "auth on"));
    {
        char *args[] = {"--ip-config", j->cfg, "--num-servers", "1",
            "--shutdown", "--timeout", "30", NULL};
        rc = launch(args, &out, &err);
        if (rc != 0)
            fail_msg("--shutdown: exit %d\nstdout: %s\nstderr: %s", rc, out,
                     err);
        free(out);
        free(err);
    }
    assert_int_equal(access(tf, F_OK), -1);     /* the servers' token went */
    unsetenv("XDG_STATE_HOME");
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_loopback_without_token_says_so,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_bind_any_needs_token_or_flag,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_non_loopback_address_refused,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_short_tokens_refused, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_hello_hides_identity, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_store_private_unless_asked, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_launch_makes_job_token, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_launch_persistent_token, setup,
                                        teardown),
    };

    return cmocka_run_group_tests_name("net auth default", tests, NULL, NULL);
}
