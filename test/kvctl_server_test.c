/* kvctl_server_test.c - kvctl --server against a real gkv-server
 * process: every command through the server, writes and partial imports,
 * a token, export through the server (with --orig-ids) byte for byte;
 * kvctl (an observer) must never stop the server by leaving; a port that
 * accepts a connection from itself is refused. kvctl on a store:
 * kvctl_test.c. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/mount.h>
#include <sys/select.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <jansson.h>
#include "gkvt.h"
#include "gkvt_kvctl.h"
#include "gkv.h"
#include "util.h"

#define N 3000          /* rows of the f32 test tensor */

/* kvctl with the arguments that follow (NULL-terminated); f->out and
 * f->err get what it wrote; returns its exit status. */
#define kv gkvt_kvctl

/* DIR/NAME of the test's directory (gkvt_path). */
static char *
path(struct gkvt_kvctl_fx *f, const char *name)
{
    return gkvt_path(f->dir, name);
}

/* tools__port_accepts (gkv-launch's and kvctl's look for a running server)
 * on a local port nobody listens on. Linux hands connects to one port
 * successive ephemeral ports, so some thousands of connects to an even
 * port of the ephemeral range are given that port as their own, and the
 * socket connects to itself: that is not a server (it made gkv-launch
 * report a free port as in use, and a test see a stopped server). On
 * 'host' of 'family' (loopback), over twice the range [lo, hi]; 0 when the
 * family has no loopback here (IPv6 off), else 1. */
static int
self_connect_refused(int family, const char *host, unsigned lo, unsigned hi)
{
    struct sockaddr_storage ss;
    struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
    socklen_t len = family == AF_INET ? sizeof *a4 : sizeof *a6;
    unsigned port = 0;
    int one = 1;

    memset(&ss, 0, sizeof ss);
    ss.ss_family = (sa_family_t)family;
    if (family == AF_INET)
        a4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    else
        a6->sin6_addr = in6addr_loopback;
    /* an even port in the ephemeral range that is free */
    for (unsigned k = 0; k < 200 && port == 0; k++) {
        unsigned p = (lo + (((unsigned)getpid() * 2654435761u + 77u * family +
                             k * 7919u) % (hi - lo))) & ~1u;
        int s = socket(family, SOCK_STREAM, 0);

        if (s < 0)
            return 0;
        if (p < lo)
            p += 2;
        if (family == AF_INET)
            a4->sin_port = htons((uint16_t)p);
        else
            a6->sin6_port = htons((uint16_t)p);
        setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(s, (struct sockaddr *)&ss, len) == 0)
            port = p;
        close(s);
    }
    if (port == 0)
        return 0;
    for (unsigned i = 0; i < 2 * (hi - lo + 1); i++)
        if (tools__port_accepts(host, port, 1000))
            fail_msg("%s port %u accepts after %u tries, with nothing "
                     "listening", host, port, i);
    return 1;
}

static void
test_port_accepts_self_connect(void **state)
{
    unsigned lo = 32768, hi = 60999;
    char *r = gkvt_slurp("/proc/sys/net/ipv4/ip_local_port_range");
    int ls;
    struct sockaddr_in a;
    socklen_t al;

    (void)state;
    if (r != NULL)
        sscanf(r, "%u %u", &lo, &hi);
    free(r);
    assert_int_equal(self_connect_refused(AF_INET, "127.0.0.1", lo, hi), 1);
    (void)self_connect_refused(AF_INET6, "::1", lo, hi);   /* where there is one */

    /* and a port something listens on does accept (another port: the one
     * above may still be held by the closed self-connection) */
    ls = socket(AF_INET, SOCK_STREAM, 0);
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(ls, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(ls, 4), 0);
    al = sizeof a;
    assert_int_equal(getsockname(ls, (struct sockaddr *)&a, &al), 0);
    assert_int_equal(tools__port_accepts("127.0.0.1", ntohs(a.sin_port), 1000), 1);
    close(ls);
}

/* ---- kvctl --server -------------------------------------------------------- */

/* Starts gkv-server on f->st (extra: NULL-terminated arguments), listening
 * on a free port; returns the port. */
static int
server_start(struct gkvt_kvctl_fx *f, const char *const *extra)
{
    char cfg[4200], log[4200], text[64];
    static unsigned seq;

    snprintf(cfg, sizeof cfg, "%s/ip.cfg", f->dir);
    snprintf(log, sizeof log, "%s/server.log", f->dir);
    for (int attempt = 0; attempt < 50; attempt++) {
        int port = gkvt_port_candidate(seq++ + 3333u, 1, 1);
        char *argv[20];
        int n = 0;
        FILE *fp;
        pid_t pid;

        if (!gkvt_port_free(port))
            continue;
        snprintf(text, sizeof text, "127.0.0.1 %d\n", port);
        fp = fopen(cfg, "w");
        assert_non_null(fp);
        fputs(text, fp);
        fclose(fp);
        argv[n++] = (char *)gkvt_prog("gkv-server");
        argv[n++] = "--store";
        argv[n++] = f->st;
        argv[n++] = "--ip-config";
        argv[n++] = cfg;
        argv[n++] = "--machine";
        argv[n++] = "0";
        for (int i = 0; extra != NULL && extra[i] != NULL; i++)
            argv[n++] = (char *)extra[i];
        argv[n] = NULL;
        unlink(log);
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            int fe = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
            dup2(fe, 2);
            execv(argv[0], argv);
            _exit(127);
        }
        f->srv = pid;
        for (int i = 0; i < 2000; i++) {
            char *t = NULL;
            int st;
            FILE *lf = fopen(log, "r");
            if (lf != NULL) {
                t = calloc(1, 1 << 16);
                if (fread(t, 1, (1 << 16) - 1, lf) == 0)
                    t[0] = '\0';
                fclose(lf);
            }
            if (t != NULL && strstr(t, "listening on") != NULL) {
                free(t);
                return port;
            }
            free(t);
            if (waitpid(pid, &st, WNOHANG) == pid) {
                f->srv = 0;
                break;              /* the port was taken: another one */
            }
            usleep(10000);
        }
        if (f->srv > 0)
            fail_msg("gkv-server did not start");
    }
    fail_msg("no free port for gkv-server");
    return -1;
}

/* Whether the server still runs after ms milliseconds. */
static int
server_alive_after(struct gkvt_kvctl_fx *f, int ms)
{
    int st;

    for (int i = 0; i < ms / 10; i++) {
        if (waitpid(f->srv, &st, WNOHANG) == f->srv) {
            f->srv = 0;
            return 0;
        }
        usleep(10000);
    }
    return 1;
}

static void
test_server_commands(void **state)
{
    struct gkvt_kvctl_fx *f = *state;
    char addr[64], cfg[4200], *local;
    const char *none[] = {NULL};
    gkv_client *member;
    gkv_client_opts o = {0};
    json_t *j;
    int port, st;

    assert_int_equal(kv(f, f->st, "create", "feat", "--dtype", "f32",
                        "--range", "10:110", "--shape", "3", "--init",
                        "uniform:0,1", NULL), 0);
    assert_int_equal(kv(f, f->st, "get", "feat", "10,50:53,109", NULL), 0);
    local = strdup(f->out);
    port = server_start(f, none);
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);

    /* the same rows as from the store itself */
    assert_int_equal(kv(f, "--server", addr, "get", "feat", "10,50:53,109", NULL), 0);
    assert_string_equal(f->out, local);
    free(local);
    assert_int_equal(kv(f, "--server", addr, "ls", NULL), 0);
    assert_non_null(strstr(f->out, "feat"));
    assert_non_null(strstr(f->out, "[10,110)"));
    assert_int_equal(kv(f, "--json", "--server", addr, "info", "feat", NULL), 0);
    j = gkvt_json_parse(f->out);
    assert_int_equal(json_integer_value(json_object_get(j, "lo")), 10);
    assert_int_equal(json_integer_value(json_object_get(j, "hi")), 110);
    /* a server's schema has no chunk count or id: null, not 0 */
    assert_true(json_is_null(json_object_get(j, "nchunks")));
    assert_true(json_is_null(json_object_get(j, "id")));
    json_decref(j);
    assert_int_equal(kv(f, "--server", addr, "info", "feat", NULL), 0);
    assert_non_null(strstr(f->out, "chunks:      -\n"));
    assert_non_null(strstr(f->out, "id:          -\n"));
    assert_int_equal(kv(f, "--server", addr, "--group", "ops", "stat", NULL), 0);
    assert_non_null(strstr(f->out, "keep-alive:   no"));
    assert_non_null(strstr(f->out, "pulls:        1 (5 rows)"));
    /* errors: an ID outside, a missing tensor, a command that writes */
    assert_int_equal(kv(f, "--server", addr, "get", "feat", "5", NULL), 1);
    assert_non_null(strstr(f->err, "ID 5"));
    assert_int_equal(kv(f, "--server", addr, "info", "nope", NULL), 1);
    assert_non_null(strstr(f->err, "nope"));
    assert_int_equal(kv(f, "--server", addr, "verify", NULL), 2);
    assert_non_null(strstr(f->err, "not available with --server"));
    /* a name that does not resolve, a port nothing listens on: named at
     * once, not after the handshake's 10 s */
    assert_int_equal(kv(f, "--server", "nosuchhost.invalid:30050", "ls", NULL), 1);
    assert_non_null(strstr(f->err, "cannot resolve host 'nosuchhost.invalid'"));
    {
        char down[64];
        int dp = gkvt_port_base(1);
        double t0 = tools__now_s();

        snprintf(down, sizeof down, "127.0.0.1:%d", dp);
        assert_int_equal(kv(f, "--server", down, "get", "feat", "10", NULL), 1);
        assert_true(tools__now_s() - t0 < 5);
        assert_non_null(strstr(f->err, "is down: nothing accepts connections"));
        assert_non_null(strstr(f->err, down));
        /* a usage error is one before any server is asked */
        assert_int_equal(kv(f, "--server", down, "put", "feat", "10", "x", NULL), 2);
        assert_non_null(strstr(f->err, "'x' is not a number"));
        assert_int_equal(kv(f, "--server", down, "create", "c", "--dtype", "f32",
                            "--range", "0:4", "--init", "uniform:1,0", NULL), 2);
    }
    assert_int_equal(kv(f, "--server", "nocolon", "ls", NULL), 1);
    assert_non_null(strstr(f->err, "HOST:PORT"));
    assert_int_equal(kv(f, f->st, "ls", "--group", "g", NULL), 2);
    assert_non_null(strstr(f->err, "--group goes with --server"));

    /* kvctl joined and left several times: a server without --keep-alive
     * still runs (an observer never stops it) */
    assert_true(server_alive_after(f, 300));
    /* a job's member joins; kvctl comes and goes meanwhile; the member's
     * leaving stops the server */
    snprintf(cfg, sizeof cfg, "%s/ip.cfg", f->dir);
    o.timeout_ms = 5000;
    if (gkv_client_connect(&member, cfg, NULL, "job", 0, &o) != GKV_OK)
        fail_msg("connect: %s", gkv_net_errmsg());
    assert_int_equal(kv(f, "--server", addr, "stat", NULL), 0);
    assert_non_null(strstr(f->out, "sessions:     2"));
    assert_true(server_alive_after(f, 200));
    assert_int_equal(gkv_client_close(member), GKV_OK);
    for (int i = 0; i < 500 && f->srv > 0; i++) {
        if (waitpid(f->srv, &st, WNOHANG) == f->srv) {
            f->srv = 0;
            assert_true(WIFEXITED(st));
            assert_int_equal(WEXITSTATUS(st), 0);
        }
        usleep(10000);
    }
    assert_int_equal(f->srv, 0);
}

/* Writes through one server: put, and import over a write-back tensor
 * (the server's RAM copy, read back through it and, after its flush at
 * SIGTERM, from the store); an optimizer-state restore that a bad step
 * count stops in its second batch keeps the first batch, leaves the rest
 * as it was, and says which rows are which. */
static void
test_server_writes(void **state)
{
    struct gkvt_kvctl_fx *f = *state;
    const char *wb[] = {"--writeback", "emb", "--nosync", NULL};
    enum { BIG = 1200000, BATCH = 1 << 20 };   /* i64 rows per batch */
    char addr[64], shape[64];
    float *v;
    int64_t *t;
    unsigned char *b;
    size_t hl;
    int port, st;

    assert_int_equal(kv(f, f->st, "create", "emb", "--dtype", "f32",
                        "--range", "0:40", "--shape", "4", NULL), 0);
    assert_int_equal(kv(f, f->st, "create", "big", "--dtype", "f32",
                        "--range", "0:1200000", NULL), 0);
    v = gkvt_npy_f32(path(f, "v.npy"), 40, 4, 3);
    port = server_start(f, wb);
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);

    assert_int_equal(kv(f, "--server", addr, "put", "emb", "2", "1,2,3,4.5", NULL), 0);
    assert_int_equal(kv(f, "--server", addr, "get", "emb", "2", NULL), 0);
    assert_string_equal(f->out, "2: 1 2 3 4.5\n");
    assert_int_equal(kv(f, "--server", addr, "put", "emb", "2", "1,2", NULL), 2);
    assert_non_null(strstr(f->err, "rows hold 4 values, got 2"));
    assert_int_equal(kv(f, "--server", addr, "import", "emb", path(f, "v.npy"),
                        "--replace", NULL), 0);
    assert_int_equal(kv(f, "--server", addr, "export", "emb", path(f, "back.npy"),
                        "--raw", NULL), 0);
    b = gkvt_read_file(path(f, "back.npy"), &hl);
    assert_int_equal(hl, 40 * 4 * 4);
    assert_memory_equal(b, v, hl);
    free(b);

    /* big#adam_t: 5 everywhere, but -1 at a row of the second batch */
    t = malloc((size_t)BIG * 8 + 128);
    b = (unsigned char *)t;
    snprintf(shape, sizeof shape, "(%d,)", BIG);
    hl = gkvt_npy_header(b, "<i8", shape);
    for (size_t i = 0; i < BIG; i++) {
        int64_t x = i == BATCH + 5000 ? -1 : 5;
        memcpy(b + hl + i * 8, &x, 8);
    }
    gkvt_write_file(path(f, "t.npy"), b, hl + (size_t)BIG * 8);
    free(t);
    /* what the server's store would refuse is refused before the first
     * batch (a store's own restore refuses it in one transaction) */
    assert_int_equal(kv(f, "--server", addr, "import", "big#adam_t",
                        path(f, "t.npy"), NULL), 1);
    assert_non_null(strstr(f->err, "row 1053576 holds step count -1"));
    assert_int_equal(kv(f, "--server", addr, "get", "big#adam_t",
                        "0,1048575,1048576,1199999", NULL), 0);
    assert_string_equal(f->out, "0: 0\n1048575: 0\n1048576: 0\n1199999: 0\n");

    /* SIGTERM: the write-back server writes its RAM copy to the store */
    assert_int_equal(kill(f->srv, SIGTERM), 0);
    assert_int_equal(waitpid(f->srv, &st, 0), f->srv);
    f->srv = 0;
    assert_int_equal(kv(f, f->st, "export", "emb", path(f, "st.npy"), "--raw",
                        NULL), 0);
    b = gkvt_read_file(path(f, "st.npy"), &hl);
    assert_int_equal(hl, 40 * 4 * 4);
    assert_memory_equal(b, v, hl);
    free(b);
    free(v);
}

/* An import through a server that fails midway (its store's disk fills
 * in the second batch) says which rows it wrote and which it may have
 * written in part; those it wrote hold the file's rows, the rest are as
 * they were. Root only (the store on a 12 MB tmpfs). */
static void
test_server_import_partial(void **state)
{
    struct gkvt_kvctl_fx *f = *state;
    const char *none[] = {NULL};
    enum { ROWS = 4000000 };            /* 16 MB of f32: batches of 2 Mi */
    char addr[64], mnt[3000], shape[64];
    unsigned char *b;
    size_t hl;
    int port;

    snprintf(mnt, sizeof mnt, "%s/mnt", f->dir);
    assert_int_equal(mkdir(mnt, 0755), 0);
    if (mount("gkvt", mnt, "tmpfs", 0, "size=12m") != 0)
        skip();                         /* needs CAP_SYS_ADMIN */
    snprintf(f->st, sizeof f->st, "%s/st", mnt);
    assert_int_equal(kv(f, f->st, "create", "big", "--dtype", "f32", "--range",
                        "0:4000000", NULL), 0);
    b = malloc((size_t)ROWS * 4 + 128);
    snprintf(shape, sizeof shape, "(%d,)", ROWS);
    hl = gkvt_npy_header(b, "<f4", shape);
    for (size_t i = 0; i < ROWS; i++) {
        float x = (float)i + 0.5f;
        memcpy(b + hl + i * 4, &x, 4);
    }
    gkvt_write_file(path(f, "big.npy"), b, hl + (size_t)ROWS * 4);
    free(b);
    port = server_start(f, none);
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    assert_int_equal(kv(f, "--server", addr, "import", "big", path(f, "big.npy"),
                        "--replace", NULL), 1);
    {
        /* which batch the disk refuses depends on LMDB's page overhead */
        const char *m = strstr(f->err, "import: rows [0, ");
        unsigned long long x = 0, y = 0;
        char ids[128], want2[160];

        if (m == NULL || sscanf(m, "import: rows [0, %llu) of 'big' were "
                                "written, rows [%llu, ", &x, &y) != 2 ||
            x != y || x == 0 || x >= ROWS)
            fail_msg("stderr: %s", f->err);
        assert_non_null(strstr(f->err, "store is full"));
        assert_non_null(strstr(f->err, "may be in part, the rest are as they "
                                       "were: import again to finish"));
        /* written: the file's rows; past the failed batch: zeros */
        snprintf(ids, sizeof ids, "0,%llu,%d", x - 1, ROWS - 1);
        assert_int_equal(kv(f, "--server", addr, "get", "big", ids, NULL), 0);
        snprintf(want2, sizeof want2, "0: 0.5\n%llu: %.9g\n%d: 0\n", x - 1,
                 (double)((float)(x - 1) + 0.5f), ROWS - 1);
        assert_string_equal(f->out, want2);
    }
    kill(f->srv, SIGKILL);
    waitpid(f->srv, NULL, 0);
    f->srv = 0;
    umount(mnt);
}

static void
test_server_token(void **state)
{
    struct gkvt_kvctl_fx *f = *state;
    char tok[4200], addr[64];
    const char *extra[] = {"--token-file", tok, NULL};
    int port, fd;

    snprintf(tok, sizeof tok, "%s/token", f->dir);
    fd = open(tok, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "s3cret-s3cret-s3cret\n", 21), 21);
    close(fd);
    assert_int_equal(kv(f, f->st, "create", "t", "--dtype", "i64", "--range",
                        "0:4", "--init", "const:7", NULL), 0);
    port = server_start(f, extra);
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    assert_int_equal(kv(f, "--server", addr, "ls", NULL), 1);
    assert_non_null(strstr(f->err, "requires a token"));
    assert_int_equal(kv(f, "--server", addr, "--token-file", tok, "get", "t",
                        "0:4", NULL), 0);
    assert_string_equal(f->out, "0: 7\n1: 7\n2: 7\n3: 7\n");
    assert_true(server_alive_after(f, 200));
}

/* No FILE.tmp-* (nor anything else named after 'base') in f->dir but the
 * names in 'allowed' (NULL-terminated). */
static void
no_leftovers(struct gkvt_kvctl_fx *f, const char *base,
             const char *const *allowed)
{
    DIR *dp = opendir(f->dir);
    struct dirent *de;

    assert_non_null(dp);
    while ((de = readdir(dp)) != NULL) {
        int ok = 0;
        if (strncmp(de->d_name, base, strlen(base)) != 0)
            continue;
        for (int i = 0; allowed != NULL && allowed[i] != NULL; i++)
            ok |= strcmp(de->d_name, allowed[i]) == 0;
        if (!ok)
            fail_msg("'%s' left in %s", de->d_name, f->dir);
    }
    closedir(dp);
}

/* kvctl --server ADDR export: the file holds every row as the server
 * serves it (after a push the store's copy may lag; the pull does not),
 * byte for byte what a local export writes and what a client pulls;
 * --orig-ids puts row i at new ID MAPPING[i]; bad input fails with a
 * clear message and leaves no file, not even a temporary one. */
static void
test_server_export(void **state)
{
    struct gkvt_kvctl_fx *f = *state;
    const char *none[] = {NULL}, *only_keep[] = {"out.npy", NULL};
    char addr[64], *errs;
    unsigned char *local, *remote, *want;
    size_t llen, rlen, hl;
    uint64_t ids[100], shape[2] = {100, 3};
    int64_t map[100], bad[100];
    float rows[300], push[6] = {1, 2, 3, -4, -5, -6};
    gkv_client *cl;
    gkv_client_opts o = {0};
    unsigned char hdr[256];
    int port;

    assert_int_equal(kv(f, f->st, "create", "emb", "--dtype", "f32",
                        "--range", "10:110", "--shape", "3", "--init",
                        "uniform:-1,1", "--seed", "5", NULL), 0);
    assert_int_equal(kv(f, f->st, "export", "emb", path(f, "local.npy"), NULL), 0);
    port = server_start(f, none);
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);

    /* the same file as a local export */
    assert_int_equal(kv(f, "--server", addr, "export", "emb", path(f, "out.npy"),
                        NULL), 0);
    assert_string_equal(f->err, "");
    local = gkvt_read_file(path(f, "local.npy"), &llen);
    remote = gkvt_read_file(path(f, "out.npy"), &rlen);
    assert_int_equal(llen, rlen);
    assert_memory_equal(local, remote, llen);
    free(remote);

    /* after a push, the rows a client pulls: the pushed ones included */
    o.timeout_ms = 5000;
    o.flags = GKV_CLIENT_OBSERVER | GKV_CLIENT_NO_HEARTBEAT;
    if (gkv_client_connect_addr(&cl, addr, NULL, "test", 1, &o) != GKV_OK)
        fail_msg("connect: %s", gkv_net_errmsg());
    ids[0] = 10;
    ids[1] = 109;
    GKVT_OK(gkv_client_push(cl, "emb", ids, 2, push, sizeof push, NULL));
    for (int i = 0; i < 100; i++)
        ids[i] = 10 + (uint64_t)i;
    GKVT_OK(gkv_client_pull(cl, "emb", ids, 100, rows, sizeof rows));
    assert_memory_equal(rows, push, 3 * sizeof(float));
    assert_memory_equal(rows + 297, push + 3, 3 * sizeof(float));
    assert_int_equal(kv(f, "--server", addr, "export", "emb", path(f, "out.npy"),
                        NULL), 0);
    remote = gkvt_read_file(path(f, "out.npy"), &rlen);
    GKVT_OK(gkv_npy_header_format(GKV_F32, 2, shape, hdr, sizeof hdr, &hl,
                                  NULL, 0));
    assert_int_equal(rlen, hl + sizeof rows);
    assert_memory_equal(remote, hdr, hl);
    assert_memory_equal(remote + hl, rows, sizeof rows);
    assert_int_equal(hl, 128);
    /* the header is the local export's; the rows differ only where pushed */
    assert_memory_equal(remote, local, hl);
    assert_memory_equal(remote + hl + 12, local + hl + 12, sizeof rows - 24);
    free(remote);
    free(local);
    /* --range and --raw as locally */
    assert_int_equal(kv(f, "--server", addr, "export", "emb", path(f, "out.raw"),
                        "--raw", "--range", "100:110", NULL), 0);
    remote = gkvt_read_file(path(f, "out.raw"), &rlen);
    assert_int_equal(rlen, 10 * 12);
    assert_memory_equal(remote, rows + 90 * 3, rlen);
    free(remote);

    /* --orig-ids: original ID i -> new ID 10 + (37 i + 11) mod 100 */
    for (int i = 0; i < 100; i++)
        map[i] = 10 + (37 * i + 11) % 100;
    gkvt_npy_i64(path(f, "node-_N.npy"), map, 100, 0);
    assert_int_equal(kv(f, "--server", addr, "export", "emb", path(f, "out.npy"),
                        "--orig-ids", path(f, "node-_N.npy"), NULL), 0);
    for (int i = 0; i < 100; i++)
        ids[i] = (uint64_t)map[i];
    want = malloc(sizeof rows);
    GKVT_OK(gkv_client_pull(cl, "emb", ids, 100, want, sizeof rows));
    for (int i = 0; i < 100; i++)        /* the same as reordering by hand */
        assert_memory_equal(want + i * 12, rows + (map[i] - 10) * 3, 12);
    remote = gkvt_read_file(path(f, "out.npy"), &rlen);
    assert_int_equal(rlen, hl + sizeof rows);
    assert_memory_equal(remote, hdr, hl);
    assert_memory_equal(remote + hl, want, sizeof rows);
    free(remote);
    /* an N x 1 mapping is the same; so is a local export with it (the
     * store is shared with the running server, read-only) */
    gkvt_npy_i64(path(f, "col.npy"), map, 100, 1);
    assert_int_equal(kv(f, "--server", addr, "export", "emb", path(f, "col.npy.out"),
                        "--orig-ids", path(f, "col.npy"), NULL), 0);
    remote = gkvt_read_file(path(f, "col.npy.out"), &rlen);
    assert_int_equal(rlen, hl + sizeof rows);
    assert_memory_equal(remote + hl, want, sizeof rows);
    free(remote);
    assert_int_equal(kv(f, f->st, "export", "emb", path(f, "loc-orig.npy"),
                        "--orig-ids", path(f, "node-_N.npy"), NULL), 0);
    remote = gkvt_read_file(path(f, "loc-orig.npy"), &rlen);
    assert_int_equal(rlen, hl + sizeof rows);
    assert_memory_equal(remote, hdr, hl);
    assert_memory_equal(remote + hl, want, sizeof rows);
    free(remote);
    free(want);
    GKVT_OK(gkv_client_close(cl));

    /* several batches: 100 rows of 256 KiB (8 MiB a pull), created before
     * the server listed its tensors, so it is found by a refresh */
    assert_int_equal(kv(f, f->st, "create", "wide", "--dtype", "f32",
                        "--range", "0:100", "--shape", "65536", "--init",
                        "uniform:0,1", NULL), 0);
    assert_int_equal(kv(f, f->st, "export", "wide", path(f, "wl.npy"), NULL), 0);
    assert_int_equal(kv(f, "--server", addr, "export", "wide", path(f, "wr.npy"),
                        NULL), 0);
    local = gkvt_read_file(path(f, "wl.npy"), &llen);
    remote = gkvt_read_file(path(f, "wr.npy"), &rlen);
    assert_int_equal(llen, 128 + (size_t)100 * 65536 * 4);
    assert_int_equal(llen, rlen);
    assert_memory_equal(local, remote, llen);
    free(remote);
    for (int i = 0; i < 100; i++)
        map[i] = 99 - i;
    gkvt_npy_i64(path(f, "rev.npy"), map, 100, 0);
    assert_int_equal(kv(f, "--server", addr, "export", "wide", path(f, "wr.npy"),
                        "--orig-ids", path(f, "rev.npy"), NULL), 0);
    remote = gkvt_read_file(path(f, "wr.npy"), &rlen);
    assert_int_equal(rlen, llen);
    assert_memory_equal(remote, local, 128);
    for (int i = 0; i < 100; i++)
        if (memcmp(remote + 128 + (size_t)i * 262144,
                   local + 128 + (size_t)(99 - i) * 262144, 262144) != 0)
            fail_msg("row %d of the --orig-ids export is not row %d", i, 99 - i);
    free(remote);
    free(local);
    unlink(path(f, "wl.npy"));
    unlink(path(f, "wr.npy"));

    /* ---- bad input: exit 1, a message, out.npy as it was, nothing else */
    gkvt_write_file(path(f, "out.npy"), "keep", 4);
    assert_int_equal(kv(f, "--server", addr, "export", "nope", path(f, "out.npy"),
                        NULL), 1);
    assert_non_null(strstr(f->err, "tensor 'nope'"));
    assert_non_null(strstr(f->err, "no such tensor"));
    no_leftovers(f, "out.npy", only_keep);
    /* mapping files: missing, not .npy, float, 2 columns, an ID outside */
    assert_int_equal(kv(f, "--server", addr, "export", "emb", path(f, "out.npy"),
                        "--orig-ids", path(f, "missing.npy"), NULL), 1);
    assert_non_null(strstr(f->err, "missing.npy"));
    assert_non_null(strstr(f->err, "No such file"));
    gkvt_write_file(path(f, "junk.npy"), "not a numpy file at all", 23);
    assert_int_equal(kv(f, "--server", addr, "export", "emb", path(f, "out.npy"),
                        "--orig-ids", path(f, "junk.npy"), NULL), 1);
    assert_non_null(strstr(f->err, "junk.npy"));
    assert_non_null(strstr(f->err, "bad magic"));
    free(gkvt_npy_f32(path(f, "f.npy"), 100, 1, 0));
    assert_int_equal(kv(f, "--server", addr, "export", "emb", path(f, "out.npy"),
                        "--orig-ids", path(f, "f.npy"), NULL), 1);
    assert_non_null(strstr(f->err, "expected an int64 array"));
    assert_non_null(strstr(f->err, "f32"));
    gkvt_npy_i64(path(f, "two.npy"), map, 100, 2);
    assert_int_equal(kv(f, "--server", addr, "export", "emb", path(f, "out.npy"),
                        "--orig-ids", path(f, "two.npy"), NULL), 1);
    assert_non_null(strstr(f->err, "expected an int64 array"));
    memcpy(bad, map, sizeof bad);
    bad[57] = 110;
    gkvt_npy_i64(path(f, "bad.npy"), bad, 100, 0);
    assert_int_equal(kv(f, "--server", addr, "export", "emb", path(f, "out.npy"),
                        "--orig-ids", path(f, "bad.npy"), NULL), 1);
    assert_non_null(strstr(f->err, "original ID 57 maps to 110, which is not a "
                                   "row of tensor 'emb' [10, 110)"));
    bad[57] = -1;
    gkvt_npy_i64(path(f, "bad.npy"), bad, 100, 0);
    assert_int_equal(kv(f, "--server", addr, "export", "emb", path(f, "out.npy"),
                        "--orig-ids", path(f, "bad.npy"), NULL), 1);
    assert_non_null(strstr(f->err, "original ID 57 maps to -1"));
    no_leftovers(f, "out.npy", only_keep);
    errs = (char *)gkvt_read_file(path(f, "out.npy"), &rlen);
    assert_int_equal(rlen, 4);
    assert_memory_equal(errs, "keep", 4);
    free(errs);
    /* where the file cannot go */
    assert_int_equal(kv(f, "--server", addr, "export", "emb",
                        path(f, "no/such/dir/out.npy"), NULL), 1);
    assert_non_null(strstr(f->err, "cannot create"));
    assert_non_null(strstr(f->err, "No such file or directory"));
    assert_false(gkvt_exists(path(f, "no")));
    assert_int_equal(mkdir(path(f, "adir"), 0755), 0);
    assert_int_equal(kv(f, "--server", addr, "export", "emb", path(f, "adir"),
                        NULL), 1);
    assert_non_null(strstr(f->err, "not a regular file"));
    no_leftovers(f, "adir", (const char *const[]){"adir", NULL});
    /* usage */
    assert_int_equal(kv(f, "--server", addr, "export", "emb", path(f, "out.npy"),
                        "--orig-ids", path(f, "node-_N.npy"), "--range", "10:20",
                        NULL), 2);
    assert_int_equal(kv(f, "--server", addr, "get", "emb", "10",
                        "--orig-ids", path(f, "node-_N.npy"), NULL), 0);
    /* the observer's runs never stopped the server */
    assert_true(server_alive_after(f, 100));
}

/* Parses "ID: v0 v1 ..." lines of f32 rows of width w into rows (as many
 * as 'n'), their IDs into ids; fails the test on anything else. */
static void
parse_rows(const char *text, size_t n, size_t w, uint64_t *ids, float *rows)
{
    const char *p = text;

    for (size_t i = 0; i < n; i++) {
        char *end;

        ids[i] = strtoull(p, &end, 10);
        if (end == p || *end != ':')
            fail_msg("line %zu of the output is not 'ID: ...':\n%s", i, text);
        p = end + 1;
        for (size_t c = 0; c < w; c++) {
            rows[i * w + c] = strtof(p, &end);
            if (end == p)
                fail_msg("line %zu: value %zu missing:\n%s", i, c, text);
            p = end;
        }
        if (*p != '\n')
            fail_msg("line %zu: more than %zu values:\n%s", i, w, text);
        p++;
    }
    if (*p != '\0')
        fail_msg("more than %zu lines:\n%s", n, text);
}

/* get and put by original ID (--orig-ids) on a graph partitioned by
 * gkv-partition: the row is the input row of that node, byte for byte
 * (without it, the same number is another node's row); the output says
 * which IDs it prints ("id_space" in JSON, a note on stderr); an ID that
 * partition 0's store or server does not hold names where it is: through
 * a server of the job, the partition that owns it, from the partition
 * book, and --ip-config. */
static void
test_get_by_original_id(void **state)
{
    struct gkvt_kvctl_fx *f = *state;
    enum { NN = 120, FW = 4 };
    float *feat, got[2 * FW];
    uint64_t ids[2];
    int64_t lo0, hi0, o0 = -1, o1 = -1, n0 = -1, n1 = -1;
    char json[4200], part0[4200], map[4200], cfg[4200], ids_s[64], addr[64];
    gkv_npy_map mm;
    gkv_pbook *b;
    json_t *j;
    int port = 0;

    /* a random graph of NN nodes with feature rows gkvt_npy_val(i, c), 2 random
     * partitions */
    feat = gkvt_npy_f32(path(f, "feat.npy"), NN, FW, 0);
    gkvt_partition_random(f->dir, NN, 3 * NN, 5, path(f, "feat.npy"));
    snprintf(json, sizeof json, "%s/g/graph.json", f->dir);
    snprintf(part0, sizeof part0, "%s/g/part-0", f->dir);
    snprintf(map, sizeof map, "%s/g/mapping/node-_N.npy", f->dir);
    GKVT_OK(gkv_pbook_open(&b, json));
    GKVT_OK(gkv_pbook_node_range(b, 0, 0, &lo0, &hi0));
    gkv_pbook_close(b);
    /* o0: an original ID partition 0 holds under another number; o1: one
     * partition 1 holds */
    GKVT_OK(gkv_npy_map_open(&mm, map, NULL, 0));
    for (int64_t i = 0; i < NN; i++) {
        int64_t v = ((const int64_t *)mm.data)[i];
        if (o0 < 0 && v >= lo0 && v < hi0 && v != i && i >= lo0 && i < hi0)
            o0 = i, n0 = v;
        if (o1 < 0 && (v < lo0 || v >= hi0))
            o1 = i, n1 = v;
    }
    gkv_npy_map_close(&mm);
    assert_true(o0 >= 0 && o1 >= 0);

    /* by original ID: the input's row of that node, byte for byte */
    snprintf(ids_s, sizeof ids_s, "%lld", (long long)o0);
    assert_int_equal(kv(f, part0, "get", "node/_N/feat", ids_s, "--orig-ids",
                        map, NULL), 0);
    parse_rows(f->out, 1, FW, ids, got);
    assert_int_equal(ids[0], (uint64_t)o0);
    assert_memory_equal(got, feat + o0 * FW, FW * sizeof(float));
    assert_non_null(strstr(f->err, "the IDs are original IDs"));
    /* the same number without it: a partitioned ID, another node's row,
     * and the note says so */
    assert_int_equal(kv(f, part0, "get", "node/_N/feat", ids_s, NULL), 0);
    parse_rows(f->out, 1, FW, ids, got);
    assert_true(memcmp(got, feat + o0 * FW, FW * sizeof(float)) != 0);
    assert_non_null(strstr(f->err, "the IDs are the partitioned IDs"));
    assert_non_null(strstr(f->err, "--orig-ids"));
    /* --json: "id_space", and with --orig-ids the stored IDs too */
    assert_int_equal(kv(f, "--json", part0, "get", "node/_N/feat", ids_s,
                        "--orig-ids", map, NULL), 0);
    assert_string_equal(f->err, "");
    {
        j = gkvt_json_parse(f->out);
        assert_string_equal(json_string_value(json_object_get(j, "id_space")),
                            "original");
        assert_int_equal(json_integer_value(json_array_get(
            json_object_get(j, "ids"), 0)), o0);
        assert_int_equal(json_integer_value(json_array_get(
            json_object_get(j, "new_ids"), 0)), n0);
        for (int c = 0; c < FW; c++)
            assert_true((float)json_real_value(json_array_get(json_array_get(
                json_object_get(j, "rows"), 0), (size_t)c)) ==
                feat[o0 * FW + c]);
        json_decref(j);
        assert_int_equal(kv(f, "--json", part0, "get", "node/_N/feat", ids_s,
                            NULL), 0);
        j = gkvt_json_parse(f->out);
        assert_string_equal(json_string_value(json_object_get(j, "id_space")),
                            "partitioned");
        assert_null(json_object_get(j, "new_ids"));
        json_decref(j);
    }
    /* put by original ID lands on that node's row */
    assert_int_equal(kv(f, part0, "put", "node/_N/feat", ids_s, "1,2,3,4.5",
                        "--orig-ids", map, NULL), 0);
    assert_int_equal(kv(f, part0, "get", "node/_N/feat", ids_s, "--orig-ids",
                        map, NULL), 0);
    assert_string_equal(f->out + strlen(ids_s), ": 1 2 3 4.5\n");
    snprintf(ids_s, sizeof ids_s, "%lld", (long long)n0);
    assert_int_equal(kv(f, part0, "get", "node/_N/feat", ids_s, NULL), 0);
    assert_string_equal(f->out + strlen(ids_s), ": 1 2 3 4.5\n");

    /* partition 1's node from partition 0's store: where it is */
    snprintf(ids_s, sizeof ids_s, "%lld", (long long)o1);
    assert_int_equal(kv(f, part0, "get", "node/_N/feat", ids_s, "--orig-ids",
                        map, NULL), 1);
    {
        char want[128];
        snprintf(want, sizeof want, "original ID %lld is new ID %lld, which "
                 "is outside its range [%lld, %lld)", (long long)o1,
                 (long long)n1, (long long)lo0, (long long)hi0);
        if (strstr(f->err, want) == NULL ||
            strstr(f->err, "only the rows its partition owns") == NULL)
            fail_msg("stderr: %s", f->err);
    }
    assert_string_equal(f->out, "");
    /* an original ID the mapping does not have */
    snprintf(ids_s, sizeof ids_s, "%lld,120", (long long)o0);
    assert_int_equal(kv(f, part0, "get", "node/_N/feat", ids_s, "--orig-ids",
                        map, NULL), 1);
    assert_non_null(strstr(f->err, "original ID 120 is not in the mapping: it "
                                   "has 120 entries"));
    assert_string_equal(f->out, "");
    /* a mapping of the wrong kind (the edges') or length is refused,
     * naming what the tensor needs: without the check its new IDs are
     * another node's row */
    {
        char emap[4200], cmd_ids[64];
        int64_t idm[60];

        snprintf(emap, sizeof emap, "%s/g/mapping/edge-_N:_E:_N.npy", f->dir);
        snprintf(cmd_ids, sizeof cmd_ids, "%lld", (long long)o0);
        assert_int_equal(kv(f, part0, "get", "node/_N/feat", cmd_ids,
                            "--orig-ids", emap, NULL), 1);
        if (strstr(f->err, "it is the mapping of edges of type '_N:_E:_N'") ==
            NULL || strstr(f->err, "tensor 'node/_N/feat' needs the mapping "
                           "of nodes of type '_N' (mapping/node-_N.npy)") ==
            NULL)
            fail_msg("stderr: %s", f->err);
        assert_string_equal(f->out, "");
        assert_int_equal(kv(f, part0, "put", "node/_N/feat", cmd_ids,
                            "9,9,9,9", "--orig-ids", emap, NULL), 1);
        assert_non_null(strstr(f->err, "needs the mapping of nodes"));
        assert_int_equal(kv(f, part0, "export", "node/_N/feat",
                            path(f, "wrong.npy"), "--orig-ids", emap, NULL), 1);
        assert_non_null(strstr(f->err, "needs the mapping of nodes"));
        assert_int_equal(access(path(f, "wrong.npy"), F_OK), -1);
        /* import: a file of as many rows as the edge mapping has entries */
        {
            gkv_npy_map em;
            float *ef;

            GKVT_OK(gkv_npy_map_open(&em, emap, NULL, 0));
            ef = gkvt_npy_f32(path(f, "efeat.npy"), em.hdr.shape[0], FW, 0);
            gkv_npy_map_close(&em);
            free(ef);
        }
        assert_int_equal(kv(f, part0, "import", "node/_N/feat",
                            path(f, "efeat.npy"), "--replace", "--orig-ids",
                            emap, NULL), 1);
        assert_non_null(strstr(f->err, "import: --orig-ids"));
        assert_non_null(strstr(f->err, "needs the mapping of nodes"));
        /* the node mapping under another name: its kind is the config's */
        {
            gkv_npy_map nm;
            GKVT_OK(gkv_npy_map_open(&nm, map, NULL, 0));
            gkvt_npy_i64(path(f, "mine.npy"), nm.data, NN, 1);
            gkv_npy_map_close(&nm);
        }
        assert_int_equal(kv(f, part0, "get", "node/_N/feat", cmd_ids,
                            "--orig-ids", path(f, "mine.npy"), NULL), 0);
        assert_string_equal(f->out + strlen(cmd_ids), ": 1 2 3 4.5\n");
        /* one of the wrong length: the config says 120 nodes */
        for (int i = 0; i < 60; i++)
            idm[i] = i;
        gkvt_npy_i64(path(f, "short.npy"), idm, 60, 1);
        assert_int_equal(kv(f, part0, "get", "node/_N/feat", "3",
                            "--orig-ids", path(f, "short.npy"), NULL), 1);
        assert_non_null(strstr(f->err, "it has 60 entries, but the graph has "
                                       "120 nodes of type '_N'"));
        assert_string_equal(f->out, "");
    }
    /* a plain tensor's IDs are its own: no note */
    assert_int_equal(kv(f, f->st, "create", "t", "--dtype", "i64", "--range",
                        "0:4", NULL), 0);
    assert_int_equal(kv(f, f->st, "get", "t", "1", NULL), 0);
    assert_string_equal(f->err, "");
    assert_int_equal(kv(f, "--json", f->st, "get", "t", "1", NULL), 0);
    assert_non_null(strstr(f->out, "\"id_space\": \"stored\""));

    /* partition 0's server of a two-machine job (machine 1 not started):
     * o0 through it, o1 names partition 1 and --ip-config */
    snprintf(cfg, sizeof cfg, "%s/ip2.cfg", f->dir);
    for (int attempt = 0; attempt < 20 && port == 0; attempt++) {
        struct gkvt_proc p;
        char text[128];
        char *argv[] = {(char *)gkvt_prog("gkv-server"), "--part-config", json,
                        "--part-id", "0", "--ip-config", cfg, "--nosync", NULL};

        port = gkvt_port_base(16);
        snprintf(text, sizeof text, "127.0.0.1 %d\n127.0.0.1 %d\n", port,
                 port + 8);
        gkvt_write_text(cfg, text, 0644);
        memset(&p, 0, sizeof p);
        snprintf(p.log, sizeof p.log, "%s/part-server-%d.log", f->dir, attempt);
        gkvt_proc_start(&p, argv);
        f->srv = p.pid;
        if (!gkvt_server_listening(&p)) {
            f->srv = 0;
            port = 0;
        }
    }
    assert_true(port > 0);
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    snprintf(ids_s, sizeof ids_s, "%lld", (long long)o0);
    assert_int_equal(kv(f, "--server", addr, "get", "node/_N/feat", ids_s,
                        "--orig-ids", map, NULL), 0);
    assert_string_equal(f->out + strlen(ids_s), ": 1 2 3 4.5\n");
    snprintf(ids_s, sizeof ids_s, "%lld", (long long)o1);
    assert_int_equal(kv(f, "--server", addr, "get", "node/_N/feat", ids_s,
                        "--orig-ids", map, NULL), 1);
    if (strstr(f->err, "partition 1 owns it, served by machine 1 of the job") ==
        NULL || strstr(f->err, "--ip-config") == NULL)
        fail_msg("stderr: %s", f->err);
    snprintf(ids_s, sizeof ids_s, "%lld", (long long)n1);
    assert_int_equal(kv(f, "--server", addr, "get", "node/_N/feat", ids_s,
                        NULL), 1);
    assert_non_null(strstr(f->err, "partition 1 owns it"));
    assert_int_equal(kv(f, "--server", addr, "get", "node/_N/feat", "3",
                        "--orig-ids", path(f, "g/mapping/edge-_N:_E:_N.npy"),
                        NULL), 1);
    assert_non_null(strstr(f->err, "needs the mapping of nodes of type '_N'"));
    assert_int_equal(kv(f, "--server", addr, "put", "node/_N/feat", ids_s,
                        "1,2,3,4", NULL), 1);
    assert_non_null(strstr(f->err, "partition 1 owns it"));
    assert_int_equal(kv(f, "--server", addr, "get", "node/_N/feat", "1000",
                        NULL), 1);
    assert_non_null(strstr(f->err, "no partition owns it: the graph has 120 "
                                   "nodes of type '_N'"));
    assert_int_equal(kv(f, "--json", "--server", addr, "get", "node/_N/feat",
                        "0", NULL), 0);
    assert_non_null(strstr(f->out, "\"id_space\": \"partitioned\""));
    free(feat);
}


#define T(name) \
    cmocka_unit_test_setup_teardown(name, gkvt_kvctl_setup, gkvt_kvctl_teardown)

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_port_accepts_self_connect),
        T(test_server_commands),
        T(test_server_writes),
        T(test_server_import_partial),
        T(test_server_token),
        T(test_server_export),
        T(test_get_by_original_id),
    };
    return cmocka_run_group_tests_name("kvctl_server", tests, NULL, NULL);
}
