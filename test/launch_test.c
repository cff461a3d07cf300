/* launch_test.c - gkv-launch with real processes on loopback: the
 * environment every role gets, failure and signal handling (nothing left
 * running, no port held), persistent servers reused by a second launch,
 * Slurm and MPI task layouts, the ssh path through a stand-in ssh that runs
 * the remote command string with sh -c, and bad inputs.
 *
 * The trainer COMMAND is this program again ("launch_test --child MODE"):
 * it writes its GKV_* environment, its arguments and its PID to files in
 * $LT_DIR (or $GKV_WORKSPACE: the stand-in ssh clears the environment like
 * a real remote login), checks the servers accept connections, then exits,
 * fails or sleeps as MODE says.
 *
 * Ports: a PID-dependent range nobody listens on (GKVT_PORT_BASE fixes the
 * start); a launch that finds a port taken is repeated on a fresh range.
 */
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
#include "gkvt_graph.h"
#include "gkv_net.h"
#include "util.h"

#define MAXPIDS 64

struct fx {
    char *dir;
    char cfg[PATH_MAX];      /* ip_config */
    char store[PATH_MAX];
    char ws[PATH_MAX];       /* workspace of the launch */
    char out[PATH_MAX], err[PATH_MAX]; /* the launcher's stdout, stderr */
    int base;
    pid_t launcher;
    pid_t pids[MAXPIDS];     /* everything to kill in teardown */
    int npids;
    int lsock;               /* a listening socket a test holds, or -1 */
};

static char g_launch[PATH_MAX + 16], g_server[PATH_MAX + 16];
static char g_self[PATH_MAX];

/* ---- small helpers ------------------------------------------------------------ */

/* The value of NAME in a file of "NAME=value" lines; "" when missing. */
static const char *
env_in(const char *text, const char *name, char *buf, size_t cap)
{
    size_t nl = strlen(name);

    buf[0] = '\0';
    for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
        if (strncmp(l, name, nl) == 0 && l[nl] == '=') {
            const char *e = strchr(l, '\n');
            size_t n = e ? (size_t)(e - l - nl - 1) : strlen(l + nl + 1);
            snprintf(buf, cap, "%.*s", (int)n, l + nl + 1);
            break;
        }
    return buf;
}

#define ENV_EQ(text, name, want) do { char b_[PATH_MAX]; \
    if (strcmp(env_in((text), (name), b_, sizeof b_), (want)) != 0) \
        fail_msg("%s is '%s', expected '%s'", (name), b_, (want)); \
} while (0)

/* Whether pid is gone (no process, or a zombie nobody reaped yet). */
static int
pid_gone(pid_t pid)
{
    char path[64], *t, *p;
    int gone;

    if (kill(pid, 0) != 0)
        return 1;
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    t = gkvt_slurp(path);
    p = strrchr(t, ')');
    gone = t[0] == '\0' || (p != NULL && (p[2] == 'Z' || p[2] == 'X'));
    free(t);
    return gone;
}

static int
wait_gone(pid_t pid, int ms)
{
    double end = gkvt_now_s() + ms / 1000.0;

    while (!pid_gone(pid)) {
        if (gkvt_now_s() > end)
            return 0;
        gkvt_sleep_ms(10);
    }
    return 1;
}

static void
track(struct fx *f, pid_t pid)
{
    if (pid > 0 && f->npids < MAXPIDS)
        f->pids[f->npids++] = pid;
}

/* PID in file DIR/NAME (written by a child), or 0. */
static pid_t
pid_file(const char *dir, const char *name)
{
    char path[2 * PATH_MAX + 200], *t;
    long v = 0;

    snprintf(path, sizeof path, "%s/%s", dir, name);
    t = gkvt_slurp(path);
    v = atol(t);
    free(t);
    return (pid_t)v;
}

static pid_t
wait_pid_file(const char *dir, const char *name, int ms)
{
    double end = gkvt_now_s() + ms / 1000.0;
    pid_t p;

    while ((p = pid_file(dir, name)) <= 0 && gkvt_now_s() < end)
        gkvt_sleep_ms(10);
    return p;
}

/* ---- ports ---------------------------------------------------------------------- */

static int
port_bindable(int port)
{
    struct sockaddr_in a;
    int s = socket(AF_INET, SOCK_STREAM, 0), one = 1, ok;

    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    ok = bind(s, (struct sockaddr *)&a, sizeof a) == 0;
    close(s);
    return ok;
}

/* Something listens on the port (the launcher's own look, which does not
 * count a connect that TCP joined to itself: a plain connect to a port
 * nobody listens on does that once in some thousands). */
static int
port_connects(int port)
{
    return tools__port_accepts("127.0.0.1", (unsigned)port, 2000);
}

/* Nothing listens on the port, within 15 s. A server counts as gone when its
 * first thread has exited, but its sockets close with its last thread,
 * which can be a moment later (one blocked in a disk write). */
static int
port_closed(int port)
{
    double end = gkvt_now_s() + 15.0;

    while (port_connects(port)) {
        if (gkvt_now_s() > end)
            return 0;
        gkvt_sleep_ms(20);
    }
    return 1;
}

static void
pick_ports(struct fx *f)
{
    static unsigned seq;
    const char *e = getenv("GKVT_PORT_BASE");

    for (int attempt = 0; attempt < 500; attempt++) {
        unsigned k = seq++;
        int base, ok = 1;

        if (e != NULL && *e != '\0')
            base = atoi(e) + 1000 + (int)(k * 16);
        else
            base = gkvt_port_candidate(k + 7777u, 16, 16);
        if (base < 1024 || base + 16 > 65535)
            continue;
        for (int i = 0; i < 16 && ok; i++)
            ok = port_bindable(base + i) && !port_connects(base + i);
        if (ok) {
            char text[128];
            f->base = base;
            snprintf(text, sizeof text, "# launch_test\n127.0.0.1 %d\n", base);
            gkvt_write_text(f->cfg, text, 0644);
            return;
        }
    }
    fail_msg("no free port range found");
}

/* ---- running the launcher --------------------------------------------------------- */

/* Starts gkv-launch with the NULL-terminated arguments after argv[0],
 * stdout and stderr to f->out and f->err; extra environment "N=V" strings
 * in envs (NULL-terminated, may be NULL). */
static pid_t
launch_start(struct fx *f, const char *const *args, const char *const *envs)
{
    char *argv[96];
    int n = 0;
    pid_t pid;

    argv[n++] = g_launch;
    for (int i = 0; args[i] != NULL && n < 94; i++)
        argv[n++] = (char *)args[i];
    argv[n] = NULL;
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int dn = open("/dev/null", O_RDONLY);
        int fo = open(f->out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int fe = open(f->err, O_WRONLY | O_CREAT | O_TRUNC, 0644);

        for (int i = 0; envs != NULL && envs[i] != NULL; i++)
            putenv((char *)envs[i]);
        dup2(dn, 0);
        dup2(fo, 1);
        dup2(fe, 2);
        execv(argv[0], argv);
        _exit(127);
    }
    f->launcher = pid;
    return pid;
}

/* Waits for the launcher; returns its exit code (or 128 + signal). Fails
 * the test after timeout_s. *secs gets the time it took when not NULL. */
static int
launch_wait(struct fx *f, int timeout_s)
{
    double end = gkvt_now_s() + timeout_s;
    int st;

    for (;;) {
        pid_t r = waitpid(f->launcher, &st, WNOHANG);
        if (r == f->launcher)
            break;
        if (gkvt_now_s() > end) {
            char *o = gkvt_slurp(f->out), *e = gkvt_slurp(f->err);
            kill(f->launcher, SIGKILL);
            waitpid(f->launcher, &st, 0);
            f->launcher = 0;
            fail_msg("gkv-launch did not finish in %d s\nstdout:\n%s\nstderr:\n%s",
                     timeout_s, o, e);
        }
        gkvt_sleep_ms(10);
    }
    f->launcher = 0;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int
launch(struct fx *f, const char *const *args, const char *const *envs,
       int timeout_s)
{
    launch_start(f, args, envs);
    return launch_wait(f, timeout_s);
}

static int
out_has(struct fx *f, const char *needle)
{
    char *o = gkvt_slurp(f->out), *e = gkvt_slurp(f->err);
    int hit = strstr(o, needle) != NULL || strstr(e, needle) != NULL;

    free(o);
    free(e);
    return hit;
}

static void
dump_output(struct fx *f)
{
    char *o = gkvt_slurp(f->out), *e = gkvt_slurp(f->err);

    fprintf(stderr, "gkv-launch stdout:\n%s\ngkv-launch stderr:\n%s\n", o, e);
    free(o);
    free(e);
}

/* PIDs of the "started server ... (local pid N)" lines, into pids. */
static int
server_pids(struct fx *f, pid_t *pids, int max)
{
    char *o = gkvt_slurp(f->out), *p = o;
    int n = 0;

    while ((p = strstr(p, "started server")) != NULL && n < max) {
        char *q = strstr(p, "pid ");
        if (q == NULL)
            break;
        pids[n++] = (pid_t)atol(q + 4);
        p = q;
    }
    free(o);
    return n;
}

/* ---- fixture ----------------------------------------------------------------------- */

static int
setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);

    if (f == NULL || (f->dir = gkvt_mkdtemp("launch")) == NULL)
        return -1;
    snprintf(f->cfg, sizeof f->cfg, "%s/ip.txt", f->dir);
    snprintf(f->store, sizeof f->store, "%s/st", f->dir);
    snprintf(f->ws, sizeof f->ws, "%s/ws", f->dir);
    snprintf(f->out, sizeof f->out, "%s/launch.out", f->dir);
    snprintf(f->err, sizeof f->err, "%s/launch.err", f->dir);
    f->lsock = -1;
    /* the store exists before the servers start: S servers each creating
     * it at once would race */
    {
        gkv_store *st = NULL;
        if (gkv_store_open(&st, f->store, GKV_CREATE, NULL) != GKV_OK)
            return -1;
        gkv_store_close(st);
    }
    setenv("LT_DIR", f->ws, 1);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fx *f = *state;
    int bad = 0;
    char logs[PATH_MAX + 8], cmd[3 * PATH_MAX + 128];

    if (f->launcher > 0) {
        kill(f->launcher, SIGKILL);
        waitpid(f->launcher, NULL, 0);
    }
    for (int i = 0; i < f->npids; i++)
        if (f->pids[i] > 0 && !pid_gone(f->pids[i]))
            kill(f->pids[i], SIGKILL);
    if (f->lsock >= 0)
        close(f->lsock);
    /* sanitizer reports of the launcher or its processes (SAN= builds) */
    snprintf(logs, sizeof logs, "%s/logs", f->ws);
    snprintf(cmd, sizeof cmd, "grep -l -e Sanitizer -e 'runtime error' -r %s %s "
             "%s >/dev/null 2>&1", logs, f->err, f->out);
    if (system(cmd) == 0) {
        fprintf(stderr, "sanitizer report in the logs of %s\n", f->dir);
        bad = 1;
    }
    unsetenv("LT_DIR");
    if (!bad)
        gkvt_rmtree(f->dir);
    else
        free(f->dir);
    free(f);
    return bad ? -1 : 0;
}

/* ---- the child: what COMMAND runs -------------------------------------------------- */

static const char *
out_dir(void)
{
    const char *d = getenv("LT_DIR");

    if (d == NULL || *d == '\0')
        d = getenv("GKV_WORKSPACE");
    return d;
}

/* Mode "late": a gkv client of the job's servers as (GKV_GROUP, GKV_RANK).
 * Rank 0 connects and leaves at once (then writes DIR/left-0); rank 1
 * connects only after that, so a server that stops when the clients so far
 * have left is gone by then. Exit 4 when the connect fails. */
static int
child_late(const char *dir, const char *rank)
{
    char path[PATH_MAX + 32];
    gkv_client *c = NULL;
    gkv_client_opts o;
    gkv_err rc;
    FILE *fp;

    snprintf(path, sizeof path, "%s/left-0", dir);
    if (strcmp(rank, "0") != 0) {
        double end = gkvt_now_s() + 15;
        while (access(path, F_OK) != 0 && gkvt_now_s() < end)
            gkvt_sleep_ms(10);
        gkvt_sleep_ms(500);          /* a server stopping on it has stopped */
    }
    memset(&o, 0, sizeof o);
    o.timeout_ms = 3000;
    o.group_size = (unsigned)atoi(getenv("GKV_WORLD_SIZE"));
    o.flags = GKV_CLIENT_NO_HEARTBEAT;
    rc = gkv_client_connect(&c, getenv("GKV_IP_CONFIG"), NULL,
                            getenv("GKV_GROUP"), (uint32_t)atoi(rank), &o);
    if (rc != GKV_OK) {
        fprintf(stderr, "rank %s: connect: %s\n", rank, gkv_net_errmsg());
        return 4;
    }
    fprintf(stderr, "rank %s: connected\n", rank);
    gkv_client_close(c);
    if (strcmp(rank, "0") == 0 && (fp = fopen(path, "w")) != NULL)
        fclose(fp);
    return 0;
}

/* Writes DIR/env-ROLE-RANK[-SAMPLER] (GKV_* lines), args-... (each
 * argument then a NUL), pid-... and ports-... ("ok" when every server of
 * the ip_config accepts connections). */
static int
child_main(int argc, char **argv)
{
    extern char **environ;
    const char *dir = out_dir(), *mode = argc > 0 ? argv[0] : "env";
    const char *role = getenv("GKV_ROLE"), *rank = getenv("GKV_RANK");
    const char *sid = getenv("GKV_SAMPLER_ID");
    char tag[128], path[PATH_MAX + 200];
    FILE *fp;
    gkv_ipconfig *ipc = NULL;
    int ok = 1;

    if (dir == NULL || role == NULL || rank == NULL)
        return 90;
    snprintf(tag, sizeof tag, "%s-%s%s%s", role, rank, sid ? "-" : "", sid ? sid : "");
    snprintf(path, sizeof path, "%s/env-%s", dir, tag);
    if ((fp = fopen(path, "w")) == NULL)
        return 91;
    for (char **e = environ; *e; e++) {
        static const char *const torch[] = {"RANK=", "LOCAL_RANK=",
            "WORLD_SIZE=", "LOCAL_WORLD_SIZE=", "MASTER_ADDR=", "MASTER_PORT="};
        int keep = strncmp(*e, "GKV_", 4) == 0;

        for (size_t k = 0; k < sizeof torch / sizeof *torch; k++)
            keep |= strncmp(*e, torch[k], strlen(torch[k])) == 0;
        if (keep)
            fprintf(fp, "%s\n", *e);
    }
    fclose(fp);
    snprintf(path, sizeof path, "%s/args-%s", dir, tag);
    if ((fp = fopen(path, "w")) == NULL)
        return 92;
    for (int i = 1; i < argc; i++)
        fwrite(argv[i], 1, strlen(argv[i]) + 1, fp);
    fclose(fp);
    if (gkv_ipconfig_load(&ipc, getenv("GKV_IP_CONFIG")) == GKV_OK) {
        unsigned S = (unsigned)atoi(getenv("GKV_NUM_SERVERS"));
        for (size_t m = 0; m < gkv_ipconfig_count(ipc); m++)
            for (unsigned k = 0; k < S; k++)
                ok &= port_connects((int)(gkv_ipconfig_machine(ipc, m)->port + k));
        gkv_ipconfig_free(ipc);
    } else {
        ok = 0;
    }
    snprintf(path, sizeof path, "%s/ports-%s", dir, tag);
    if ((fp = fopen(path, "w")) != NULL) {
        fputs(ok ? "ok" : "refused", fp);
        fclose(fp);
    }
    /* the PID last: a test waiting for it finds the other files complete */
    snprintf(path, sizeof path, "%s/pid-%s.tmp", dir, tag);
    if ((fp = fopen(path, "w")) != NULL) {
        char fin[PATH_MAX + 200];

        fprintf(fp, "%ld\n", (long)getpid());
        fclose(fp);
        snprintf(fin, sizeof fin, "%s/pid-%s", dir, tag);
        rename(path, fin);
    }
    if (strcmp(mode, "fail") == 0) {
        if (strcmp(role, "trainer") == 0 && strcmp(rank, "1") == 0) {
            double end = gkvt_now_s() + 30;
            snprintf(path, sizeof path, "%s/pid-trainer-0", dir);
            while (access(path, F_OK) != 0 && gkvt_now_s() < end)
                gkvt_sleep_ms(10);
            fprintf(stderr, "rank 1 failing on purpose\n");
            return 3;
        }
        sleep(60);
        return 0;
    }
    if (strcmp(mode, "sleep") == 0) {
        sleep(60);
        return 0;
    }
    if (strcmp(mode, "late") == 0)
        return child_late(dir, rank);
    return 0;
}

/* --server-bin stand-in for the Slurm test: records argv and env. */
static int
fake_server_main(int argc, char **argv)
{
    extern char **environ;
    const char *dir = getenv("LT_DIR");
    char path[PATH_MAX + 32];
    FILE *fp;

    if (dir == NULL)
        return 90;
    snprintf(path, sizeof path, "%s/fake-server", dir);
    if ((fp = fopen(path, "w")) == NULL)
        return 91;
    for (int i = 0; i < argc; i++)
        fprintf(fp, "arg %s\n", argv[i]);
    for (char **e = environ; *e; e++)
        if (strncmp(*e, "GKV_", 4) == 0)
            fprintf(fp, "%s\n", *e);
    fclose(fp);
    return 0;
}

static char *
read_env(struct fx *f, const char *tag)
{
    char path[PATH_MAX + 64];

    snprintf(path, sizeof path, "%s/env-%s", f->ws, tag);
    return gkvt_slurp(path);
}

/* ---- graphs ----------------------------------------------------------------------- */

/* An ip_config of two machines on loopback: f->base and f->base + 8. */
static void
two_machines(struct fx *f, char *path, size_t cap)
{
    char text[128];

    snprintf(path, cap, "%s/ip2.txt", f->dir);
    snprintf(text, sizeof text, "127.0.0.1 %d\n127.0.0.1 %d\n", f->base,
             f->base + 8);
    gkvt_write_text(path, text, 0644);
}

/* A .npy file (version 1.0) of 'rows' rows of 'row_bytes' bytes at 'data':
 * dtype 'descr', shape (rows, width) or (rows,) when width is 0. */
static void
write_npy(const char *path, const char *descr, size_t rows, size_t width,
          const void *data, size_t row_bytes)
{
    char hdr[160], shape[64];
    size_t hl;
    FILE *fp;

    if (width > 0)
        snprintf(shape, sizeof shape, "(%zu, %zu)", rows, width);
    else
        snprintf(shape, sizeof shape, "(%zu,)", rows);
    /* header: magic, version 1.0, length, the dict padded with spaces to
     * a multiple of 64 bytes in all, ending in a newline */
    hl = (size_t)snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': "
                          "False, 'shape': %s, }", descr, shape);
    while ((10 + hl + 1) % 64 != 0)
        hdr[hl++] = ' ';
    hdr[hl++] = '\n';
    fp = fopen(path, "wb");
    assert_non_null(fp);
    fwrite("\x93NUMPY\x01\x00", 1, 8, fp);
    fputc((int)(hl & 0xff), fp);
    fputc((int)(hl >> 8), fp);
    fwrite(hdr, 1, hl, fp);
    fwrite(data, row_bytes, rows, fp);
    fclose(fp);
}

/* DIR/NAME/graph.json: an R-MAT graph of 2^scale nodes in 'parts'
 * partitions (random), with an 8-wide f32 node feature 'feat' and, when
 * 'mask' is not NULL, the bool node feature 'train_mask' holding it (2^scale
 * bytes, 0 or 1; a NumPy |b1 file, as DGL's g.ndata['train_mask'] is
 * saved). Returns the config's path in json. */
static void
make_graph_mask(struct fx *f, const char *name, int scale, int parts,
                const uint8_t *mask, char *json, size_t cap)
{
    char npy[PATH_MAX + 32], out[PATH_MAX + 32], sc[16], np[16], fa[PATH_MAX + 48];
    char mnpy[PATH_MAX + 32], ma[PATH_MAX + 64], *so = NULL, *se = NULL;
    size_t rows = (size_t)1 << scale;
    float *v = calloc(rows * 8, sizeof *v);
    int code;

    assert_non_null(v);
    snprintf(npy, sizeof npy, "%s/%s-feat.npy", f->dir, name);
    snprintf(out, sizeof out, "%s/%s", f->dir, name);
    snprintf(sc, sizeof sc, "%d", scale);
    snprintf(np, sizeof np, "%d", parts);
    snprintf(fa, sizeof fa, "feat=%s", npy);
    for (size_t i = 0; i < rows * 8; i++)
        v[i] = (float)(i % 97) / 97.0f - 0.5f;
    write_npy(npy, "<f4", rows, 8, v, 8 * sizeof *v);
    free(v);
    snprintf(mnpy, sizeof mnpy, "%s/%s-mask.npy", f->dir, name);
    snprintf(ma, sizeof ma, "train_mask=%s", mnpy);
    if (mask != NULL)
        write_npy(mnpy, "|b1", rows, 0, mask, 1);
    {
        char *argv[] = {(char *)gkvt_prog("gkv-partition"), "--rmat", sc,
                        "--parts", np, "--method", "random", "--node-feat", fa,
                        out, NULL, NULL, NULL};
        if (mask != NULL) {      /* before the output directory */
            argv[9] = "--node-feat";
            argv[10] = ma;
            argv[11] = out;
        }
        code = gkvt_run(argv, NULL, 0, &so, &se, 120);
        if (code != 0)
            fail_msg("gkv-partition: exit %d\n%s%s", code, so, se);
    }
    free(so);
    free(se);
    snprintf(json, cap, "%s/graph.json", out);
    assert_true(access(json, R_OK) == 0);
}

static void
make_graph(struct fx *f, const char *name, int scale, int parts, char *json,
           size_t cap)
{
    make_graph_mask(f, name, scale, parts, NULL, json, cap);
}

/* ---- tests ---------------------------------------------------------------------------- */

/* Runs a launch, on a fresh port range again when a port was taken. */
static int
launch_retry(struct fx *f, const char *const *args, const char *const *envs,
             int timeout_s)
{
    int rc = 0;

    for (int attempt = 0; attempt < 5; attempt++) {
        rc = launch(f, args, envs, timeout_s);
        if (rc == 0 || !(out_has(f, "already in use") ||
                         out_has(f, "Address already in use")))
            return rc;
        pick_ports(f);
    }
    return rc;
}

static void
test_env(void **state)
{
    struct fx *f = *state;
    const char *args[] = {"--ip-config", f->cfg, "--store", f->store,
        "--num-servers", "2", "--num-trainers", "2",
        "--num-samplers", "2", "--workspace", f->ws, "--group", "g-env",
        "--", g_self, "--child", "env", "x y", NULL};
    pid_t sp[8];
    int rc, ns;
    char want[PATH_MAX + 64];
    char ids[6][96];                 /* (group, rank) of every client */
    char inst0[PATH_MAX] = "";
    int nid = 0;

    pick_ports(f);
    rc = launch_retry(f, args, NULL, 20);
    if (rc != 0)
        dump_output(f);
    assert_int_equal(rc, 0);
    ns = server_pids(f, sp, 8);
    assert_int_equal(ns, 2);
    for (int i = 0; i < ns; i++) {
        track(f, sp[i]);
        assert_true(wait_gone(sp[i], 2000));          /* servers stopped */
    }
    for (int k = 0; k < 2; k++) {
        assert_true(port_closed(f->base + k));        /* and no port held */
        assert_true(port_bindable(f->base + k));
    }
    assert_true(out_has(f, "job done"));
    for (int r = 0; r < 2; r++) {
        char tag[32], num[16], *e, *pa, path[PATH_MAX + 64];
        pid_t tp;

        snprintf(tag, sizeof tag, "trainer-%d", r);
        snprintf(num, sizeof num, "%d", r);
        e = read_env(f, tag);
        ENV_EQ(e, "GKV_ROLE", "trainer");
        ENV_EQ(e, "GKV_RANK", num);
        ENV_EQ(e, "GKV_LOCAL_RANK", num);
        ENV_EQ(e, "GKV_SERVER_ID", num);             /* r mod 2 servers */
        ENV_EQ(e, "GKV_MACHINE", "0");
        ENV_EQ(e, "GKV_NUM_MACHINES", "1");
        ENV_EQ(e, "GKV_WORLD_SIZE", "2");
        ENV_EQ(e, "GKV_NUM_SERVERS", "2");
        ENV_EQ(e, "GKV_NUM_TRAINERS", "2");
        ENV_EQ(e, "GKV_NUM_SAMPLERS", "2");
        ENV_EQ(e, "GKV_GROUP", "g-env");
        ENV_EQ(e, "GKV_TRAINER_RANK", "");
        ENV_EQ(e, "GKV_IP_CONFIG", f->cfg);
        ENV_EQ(e, "GKV_STORE", f->store);
        ENV_EQ(e, "GKV_PART_CONFIG", "");
        ENV_EQ(e, "GKV_TOKEN_FILE", "");
        ENV_EQ(e, "GKV_SERVER_NAME", "");
        ENV_EQ(e, "GKV_WORKSPACE", f->ws);
        /* torch.distributed's env:// for the trainers */
        ENV_EQ(e, "RANK", num);
        ENV_EQ(e, "LOCAL_RANK", num);
        ENV_EQ(e, "WORLD_SIZE", "2");
        ENV_EQ(e, "LOCAL_WORLD_SIZE", "2");
        ENV_EQ(e, "MASTER_ADDR", "127.0.0.1");
        ENV_EQ(e, "MASTER_PORT", "29500");
        {   /* one instance for the run: "launch-" and 16 hex digits */
            char in[PATH_MAX];
            env_in(e, "GKV_JOB_INSTANCE", in, sizeof in);
            assert_int_equal(strlen(in), 7 + 16);
            assert_int_equal(strncmp(in, "launch-", 7), 0);
            if (r == 0)
                snprintf(inst0, sizeof inst0, "%s", in);
            else
                assert_string_equal(in, inst0);
        }
        snprintf(ids[nid++], sizeof ids[0], "%s/%s",
                 env_in(e, "GKV_GROUP", path, sizeof path), num);
        free(e);
        snprintf(path, sizeof path, "%s/ports-%s", f->ws, tag);
        pa = gkvt_slurp(path);
        assert_string_equal(pa, "ok");               /* servers listened */
        free(pa);
        snprintf(path, sizeof path, "%s/args-%s", f->ws, tag);
        pa = gkvt_slurp(path);
        assert_string_equal(pa, "x y");
        free(pa);
        snprintf(path, sizeof path, "pid-%s", tag);
        tp = pid_file(f->ws, path);
        assert_true(tp > 0 && pid_gone(tp));
        snprintf(want, sizeof want, "started trainer rank %d", r);
        assert_true(out_has(f, want));
        snprintf(want, sizeof want, "trainer rank %d exited: exit status 0", r);
        assert_true(out_has(f, want));
        snprintf(want, sizeof want, "%s/logs/trainer-0-%d.log", f->ws, r);
        assert_true(access(want, F_OK) == 0);

        /* the samplers of this trainer: a (group, rank) of their own,
         * GROUP.sampler and trainer rank x K + j, in a world of M x T x K */
        for (int s = 0; s < 2; s++) {
            char srank[16], sid[16];

            snprintf(srank, sizeof srank, "%d", r * 2 + s);
            snprintf(sid, sizeof sid, "%d", s);
            snprintf(tag, sizeof tag, "sampler-%d-%d", r * 2 + s, s);
            e = read_env(f, tag);
            if (e[0] == '\0')
                fail_msg("no environment file %s/env-%s", f->ws, tag);
            ENV_EQ(e, "GKV_ROLE", "sampler");
            ENV_EQ(e, "GKV_RANK", srank);
            ENV_EQ(e, "GKV_TRAINER_RANK", num);
            ENV_EQ(e, "GKV_LOCAL_RANK", num);
            ENV_EQ(e, "GKV_SAMPLER_ID", sid);
            ENV_EQ(e, "GKV_WORLD_SIZE", "4");
            ENV_EQ(e, "GKV_GROUP", "g-env.sampler");
            ENV_EQ(e, "RANK", "");       /* torch's variables: trainers' */
            snprintf(ids[nid++], sizeof ids[0], "%s/%s",
                     env_in(e, "GKV_GROUP", path, sizeof path), srank);
            free(e);
            snprintf(want, sizeof want, "started sampler %d of trainer rank %d",
                     s, r);
            assert_true(out_has(f, want));
        }
    }
    /* no two clients share an identity on the servers */
    assert_int_equal(nid, 6);
    for (int a = 0; a < nid; a++)
        for (int b = a + 1; b < nid; b++)
            if (strcmp(ids[a], ids[b]) == 0)
                fail_msg("two processes are (group, rank) %s", ids[a]);
    for (int k = 0; k < 2; k++) {
        char path[PATH_MAX + 64], *t;
        snprintf(path, sizeof path, "%s/logs/server-0-%d.log", f->ws, k);
        t = gkvt_slurp(path);
        assert_non_null(strstr(t, "listening on"));
        assert_non_null(strstr(t, "stopped"));
        free(t);
    }
}

static void
test_failure(void **state)
{
    struct fx *f = *state;
    const char *args[] = {"--ip-config", f->cfg, "--store", f->store,
        "--num-servers", "1", "--num-trainers", "2",
        "--workspace", f->ws, "--", g_self, "--child", "fail", NULL};
    double t0;
    pid_t sp[4], r0;
    int rc;
    char *e;

    pick_ports(f);
    t0 = gkvt_now_s();
    rc = launch_retry(f, args, NULL, 20);
    assert_int_equal(rc, 1);
    /* stopped at the failure, not when trainer 0's sleep of 60 s ends */
    assert_true(gkvt_now_s() - t0 < 45);
    e = gkvt_slurp(f->err);
    assert_non_null(strstr(e, "trainer rank 1 (machine 0) failed: exit status 3"));
    assert_non_null(strstr(e, "rank 1 failing on purpose"));   /* log tail */
    assert_non_null(strstr(e, "last 20 lines of"));
    free(e);
    r0 = pid_file(f->ws, "pid-trainer-0");
    assert_true(r0 > 0);
    track(f, r0);
    assert_true(wait_gone(r0, 2000));
    assert_int_equal(server_pids(f, sp, 4), 1);
    track(f, sp[0]);
    assert_true(wait_gone(sp[0], 2000));
    assert_true(port_closed(f->base));
}

static void
test_sigterm(void **state)
{
    struct fx *f = *state;
    const char *args[] = {"--ip-config", f->cfg, "--store", f->store,
        "--num-servers", "2", "--num-trainers", "2",
        "--workspace", f->ws, "--", g_self, "--child", "sleep", NULL};
    pid_t sp[4], r0, r1;
    int rc;

    pick_ports(f);
    launch_start(f, args, NULL);
    r0 = wait_pid_file(f->ws, "pid-trainer-0", 10000);
    r1 = wait_pid_file(f->ws, "pid-trainer-1", 10000);
    track(f, r0);
    track(f, r1);
    if (r0 <= 0 || r1 <= 0) {
        launch_wait(f, 1);
        dump_output(f);
        fail_msg("trainers did not start");
    }
    assert_int_equal(server_pids(f, sp, 4), 2);
    track(f, sp[0]);
    track(f, sp[1]);
    kill(f->launcher, SIGTERM);
    rc = launch_wait(f, 15);
    assert_int_equal(rc, 1);
    assert_true(out_has(f, "stopping every process"));
    assert_true(wait_gone(r0, 2000));
    assert_true(wait_gone(r1, 2000));
    assert_true(wait_gone(sp[0], 2000));
    assert_true(wait_gone(sp[1], 2000));
    assert_true(port_closed(f->base));
    assert_true(port_closed(f->base + 1));
}

static void
test_keep_alive(void **state)
{
    struct fx *f = *state;
    char ws2[PATH_MAX + 8], path[PATH_MAX + 64];
    const char *args[] = {"--ip-config", f->cfg, "--store", f->store,
        "--num-servers", "2", "--num-trainers", "1",
        "--keep-alive", "--server-name", "lt-persist", "--workspace", f->ws,
        "--", g_self, "--child", "env", NULL};
    const char *stop[] = {"--ip-config", f->cfg, "--num-servers", "2",
        "--shutdown", "--timeout", "30", NULL};
    pid_t sp[4];
    gkv_client *c = NULL;
    gkv_client_opts o;
    gkv_err rc;
    char *e;

    pick_ports(f);
    if (launch_retry(f, args, NULL, 20) != 0) {
        dump_output(f);
        fail_msg("first launch failed");
    }
    assert_int_equal(server_pids(f, sp, 4), 2);
    track(f, sp[0]);
    track(f, sp[1]);
    assert_true(out_has(f, "--keep-alive: leaving the servers running"));
    assert_false(pid_gone(sp[0]));
    assert_false(pid_gone(sp[1]));
    e = read_env(f, "trainer-0");
    ENV_EQ(e, "GKV_SERVER_NAME", "lt-persist");
    free(e);

    /* they are the named persistent servers */
    memset(&o, 0, sizeof o);
    o.timeout_ms = 5000;
    o.flags = GKV_CLIENT_NO_HEARTBEAT;
    rc = gkv_client_connect(&c, f->cfg, NULL, "lt-check", 0, &o);
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
    if (launch(f, args, NULL, 20) != 0) {
        dump_output(f);
        fail_msg("second launch failed");
    }
    assert_true(out_has(f, "reusing server 0/0"));
    assert_true(out_has(f, "reusing server 0/1"));
    assert_false(out_has(f, "started server"));
    snprintf(path, sizeof path, "%s/ports-trainer-0", ws2);
    e = gkvt_slurp(path);
    assert_string_equal(e, "ok");
    free(e);
    assert_false(pid_gone(sp[0]));
    assert_false(pid_gone(sp[1]));

    /* another name on these ports is a clear error */
    args[10] = "other-name";
    assert_int_equal(launch(f, args, NULL, 20), 1);
    assert_true(out_has(f, "not persistent server 'other-name'"));
    assert_true(out_has(f, "lt-persist"));
    assert_false(pid_gone(sp[0]));

    /* --shutdown stops them */
    assert_int_equal(launch(f, stop, NULL, 20), 0);
    assert_true(out_has(f, "stopping server 0/1"));
    assert_true(wait_gone(sp[0], 30000));
    assert_true(wait_gone(sp[1], 30000));
    assert_true(port_closed(f->base));
}

/* A port held by something that is not a gkv server. */
static void
test_port_taken(void **state)
{
    struct fx *f = *state;
    const char *args[] = {"--ip-config", f->cfg, "--store", f->store,
        "--num-servers", "1", "--num-trainers", "1",
        "--workspace", f->ws, "--timeout", "5", "--", g_self, "--child", "env",
        NULL};
    const char *ka[] = {"--ip-config", f->cfg, "--store", f->store,
        "--num-servers", "1", "--num-trainers", "1",
        "--keep-alive", "--server-name", "n1", "--workspace", f->ws,
        "--", g_self, "--child", "env", NULL};
    struct sockaddr_in a;
    char want[64];
    int one = 1;

    pick_ports(f);
    f->lsock = socket(AF_INET, SOCK_STREAM, 0);
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)f->base);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(f->lsock, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    assert_int_equal(bind(f->lsock, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(f->lsock, 16), 0);

    assert_int_equal(launch(f, args, NULL, 20), 1);
    snprintf(want, sizeof want, "port 127.0.0.1:%d of server 0/0 is already "
             "in use", f->base);
    assert_true(out_has(f, want));
    assert_false(out_has(f, "started"));

    assert_int_equal(launch(f, ka, NULL, 20), 1);
    assert_true(out_has(f, "not a gkv server of this job"));
    assert_false(out_has(f, "started trainer"));
}

static void
test_slurm_mpi(void **state)
{
    struct fx *f = *state;
    char fake[PATH_MAX + 64];
    const char *srv[] = {"--ip-config", f->cfg, "--store", f->store,
        "--num-servers", "1", "--num-trainers", "2", "--server-bin", g_self,
        "--server-arg", "--fake-server", "--", g_self, "--child", "env", NULL};
    const char *task_s[] = {"SLURM_PROCID=0", "SLURM_NTASKS=3", "SLURM_NODEID=0",
        "SLURM_LOCALID=0", "SLURM_JOB_ID=77", "SLURM_STEP_ID=1", NULL};
    const char *task_t[] = {"SLURM_PROCID=2", "SLURM_NTASKS=3", "SLURM_NODEID=0",
        "SLURM_LOCALID=2", "SLURM_JOB_ID=77", "SLURM_STEP_ID=1",
        "SLURM_NNODES=1", NULL};
    const char *task_nodes[] = {"SLURM_PROCID=2", "SLURM_NTASKS=3",
        "SLURM_NODEID=0", "SLURM_LOCALID=2", "SLURM_NNODES=2",
        "SLURM_STEP_ID=1", NULL};
    /* the step places 4 and 2 tasks: every task refuses, task 0 too */
    const char *task_uneven[] = {"SLURM_PROCID=0", "SLURM_NTASKS=3",
        "SLURM_NODEID=0", "SLURM_LOCALID=0", "SLURM_STEP_ID=1",
        "SLURM_STEP_TASKS_PER_NODE=2,1", NULL};
    const char *task_even[] = {"SLURM_PROCID=0", "SLURM_NTASKS=3",
        "SLURM_NODEID=0", "SLURM_LOCALID=0", "SLURM_JOB_ID=77",
        "SLURM_STEP_ID=1", "SLURM_STEP_TASKS_PER_NODE=3(x1)", NULL};
    const char *task_nan[] = {"SLURM_PROCID=0", "SLURM_NTASKS=3",
        "SLURM_NODEID=0", "SLURM_LOCALID=abc", "SLURM_STEP_ID=1", NULL};
    /* mpirun inside a Slurm allocation: its ranks carry the daemons'
     * SLURM_* too, which do not describe them */
    const char *mpi_in_slurm[] = {"OMPI_COMM_WORLD_RANK=1",
        "OMPI_COMM_WORLD_SIZE=3", "OMPI_COMM_WORLD_LOCAL_RANK=1",
        "PMIX_NAMESPACE=prte-y-2@1", "SLURM_PROCID=0", "SLURM_NTASKS=1",
        "SLURM_NODEID=0", "SLURM_LOCALID=0", "SLURM_STEP_ID=0", NULL};
    /* MPICH/Intel MPI's mpirun under Slurm: srun starts its proxies, one
     * per node, whose SLURM_* the ranks inherit (counting nodes) */
    const char *hydra[] = {"PMI_RANK=1", "PMI_SIZE=3", "MPI_LOCALRANKID=1",
        "PMIX_NAMESPACE=h-1", "SLURM_PROCID=0", "SLURM_NTASKS=2",
        "SLURM_NODEID=0", "SLURM_LOCALID=0", "SLURM_STEP_ID=0", NULL};
    /* the same, rank 0: PMI_RANK equals SLURM_PROCID, the sizes differ */
    const char *hydra0[] = {"PMI_RANK=0", "PMI_SIZE=3", "MPI_LOCALRANKID=0",
        "PMIX_NAMESPACE=h-1", "SLURM_PROCID=0", "SLURM_NTASKS=2",
        "SLURM_NODEID=0", "SLURM_LOCALID=0", "SLURM_STEP_ID=0", NULL};
    const char *srv_keep[] = {"--ip-config", f->cfg, "--store", f->store,
        "--num-servers", "1", "--num-trainers", "2", "--server-bin", g_self,
        "--keep-alive", "--server-name", "k", "--", g_self, "--child", "env",
        NULL};
    /* with one sampler per trainer: 1 + 2 x 2 = 5 tasks; local rank 4 is
     * the sampler of trainer 1 */
    const char *srvk[] = {"--ip-config", f->cfg, "--store", f->store,
        "--num-servers", "1", "--num-trainers", "2", "--num-samplers", "1",
        "--server-bin", g_self, "--server-arg", "--fake-server", "--", g_self,
        "--child", "env", NULL};
    const char *task_k[] = {"SLURM_PROCID=4", "SLURM_NTASKS=5", "SLURM_NODEID=0",
        "SLURM_LOCALID=4", "SLURM_JOB_ID=77", "SLURM_STEP_ID=1",
        "SLURM_NNODES=1", NULL};
    const char *task_ks[] = {"SLURM_PROCID=0", "SLURM_NTASKS=5", "SLURM_NODEID=0",
        "SLURM_LOCALID=0", "SLURM_JOB_ID=77", "SLURM_STEP_ID=1", NULL};
    const char *task_bad[] = {"SLURM_PROCID=2", "SLURM_NTASKS=4", "SLURM_NODEID=0",
        "SLURM_LOCALID=2", "SLURM_STEP_ID=1", NULL};
    const char *mpi_t[] = {"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=3",
        "OMPI_COMM_WORLD_LOCAL_RANK=1", "PMIX_NAMESPACE=prte-x-1@1", NULL};
    const char *mpi_bad[] = {"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=3",
        "OMPI_COMM_WORLD_LOCAL_RANK=0", NULL};
    struct sockaddr_in a;
    char *t;
    int one = 1;

    pick_ports(f);
    assert_int_equal(mkdir(f->ws, 0755), 0);
    /* server task: execs the (stand-in) server with the right arguments */
    assert_int_equal(launch(f, srv, task_s, 20), 0);
    snprintf(fake, sizeof fake, "%s/fake-server", f->ws);
    t = gkvt_slurp(fake);
    assert_non_null(strstr(t, "arg --fake-server\n"));
    assert_non_null(strstr(t, "arg --machine\narg 0\n"));
    assert_non_null(strstr(t, "arg --server-id\narg 0\narg --num-servers\narg 1\n"));
    /* the job's 2 trainers are the clients a server waits for */
    assert_non_null(strstr(t, "arg --num-clients\narg 2\n"));
    snprintf(fake, sizeof fake, "arg --store\narg %s\n", f->store);
    assert_non_null(strstr(t, fake));
    ENV_EQ(t, "GKV_ROLE", "server");
    ENV_EQ(t, "GKV_SERVER_ID", "0");
    ENV_EQ(t, "GKV_GROUP", "slurm-77-1");
    ENV_EQ(t, "GKV_WORLD_SIZE", "2");
    free(t);

    /* trainer task: waits for the server port (held here), then runs */
    f->lsock = socket(AF_INET, SOCK_STREAM, 0);
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)f->base);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(f->lsock, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    assert_int_equal(bind(f->lsock, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(f->lsock, 16), 0);
    assert_int_equal(launch(f, srv, task_t, 20), 0);
    t = read_env(f, "trainer-1");
    ENV_EQ(t, "GKV_ROLE", "trainer");
    ENV_EQ(t, "GKV_RANK", "1");
    ENV_EQ(t, "GKV_LOCAL_RANK", "1");
    ENV_EQ(t, "GKV_MACHINE", "0");
    ENV_EQ(t, "GKV_WORLD_SIZE", "2");
    ENV_EQ(t, "GKV_GROUP", "slurm-77-1");
    free(t);
    /* the task count, not the node count (SLURM_NNODES=1) */
    assert_true(out_has(f, "slurm task 2 of 3: trainer rank 1 on machine 0"));
    assert_int_equal(launch(f, srv, task_nodes, 20), 2);
    assert_true(out_has(f, "Slurm: 2 nodes, but"));

    /* a sampler task: a (group, rank) of its own; the servers wait for
     * the 2 trainers and 2 samplers */
    assert_int_equal(launch(f, srvk, task_k, 20), 0);
    t = read_env(f, "sampler-1-0");
    ENV_EQ(t, "GKV_ROLE", "sampler");
    ENV_EQ(t, "GKV_RANK", "1");
    ENV_EQ(t, "GKV_TRAINER_RANK", "1");
    ENV_EQ(t, "GKV_SAMPLER_ID", "0");
    ENV_EQ(t, "GKV_WORLD_SIZE", "2");
    ENV_EQ(t, "GKV_GROUP", "slurm-77-1.sampler");
    free(t);
    assert_true(out_has(f, "slurm task 4 of 5: sampler 0 of trainer rank 1 on "
                           "machine 0"));
    assert_int_equal(launch(f, srvk, task_ks, 20), 0);
    snprintf(fake, sizeof fake, "%s/fake-server", f->ws);
    t = gkvt_slurp(fake);
    assert_non_null(strstr(t, "arg --num-clients\narg 4\n"));
    free(t);

    /* a layout that does not fit */
    assert_int_equal(launch(f, srv, task_bad, 20), 2);
    assert_true(out_has(f, "slurm layout does not match the job: 4 tasks"));
    assert_true(out_has(f, "need 3 tasks, 3 per node"));

    /* MPI: rank 1 of 3 is trainer 0 */
    assert_int_equal(launch(f, srv, mpi_t, 20), 0);
    t = read_env(f, "trainer-0");
    ENV_EQ(t, "GKV_ROLE", "trainer");
    ENV_EQ(t, "GKV_LOCAL_RANK", "0");
    ENV_EQ(t, "GKV_GROUP", "mpi-prte-x-1@1");
    free(t);
    assert_int_equal(launch(f, srv, mpi_bad, 20), 2);
    assert_true(out_has(f, "has local rank 0, but the layout needs ranks placed "
                           "in blocks of 3 per node"));
    assert_int_equal(launch(f, srv, mpi_in_slurm, 20), 0);
    t = read_env(f, "trainer-0");
    ENV_EQ(t, "GKV_GROUP", "mpi-prte-y-2@1");
    free(t);
    assert_int_equal(launch(f, srv, hydra, 20), 0);
    t = read_env(f, "trainer-0");
    ENV_EQ(t, "GKV_GROUP", "mpi-h-1");
    free(t);
    assert_int_equal(launch(f, srv, hydra0, 20), 0);
    assert_true(out_has(f, "mpi task 0 of 3: server"));

    /* the step's tasks per node: refused by every task, not only the one
     * past the end; a fitting list runs */
    assert_int_equal(launch(f, srv, task_uneven, 20), 2);
    assert_true(out_has(f, "places tasks 2,1 per node"));
    assert_true(out_has(f, "--ntasks-per-node=3"));
    assert_int_equal(launch(f, srv, task_even, 20), 0);
    assert_int_equal(launch(f, srv, task_nan, 20), 2);
    assert_true(out_has(f, "SLURM_LOCALID='abc' is not a number"));
    /* persistent servers cannot be a step's tasks: they would never end */
    assert_int_equal(launch(f, srv_keep, task_s, 20), 2);
    assert_true(out_has(f, "--keep-alive does not go with a cluster launcher"));
    {   /* a 2-node step with an ip_config of loopback addresses only */
        char cfg2[PATH_MAX + 16];
        const char *srv2[] = {"--ip-config", cfg2, "--store", f->store,
            "--num-servers", "1", "--num-trainers", "2", "--server-bin",
            g_self, "--", g_self, "--child", "env", NULL};
        const char *task2[] = {"SLURM_PROCID=0", "SLURM_NTASKS=6",
            "SLURM_NODEID=0", "SLURM_LOCALID=0", "SLURM_NNODES=2",
            "SLURM_STEP_ID=1", NULL};

        two_machines(f, cfg2, sizeof cfg2);
        assert_int_equal(launch(f, srv2, task2, 20), 2);
        assert_true(out_has(f, "every machine of"));
        assert_true(out_has(f, "is a loopback address"));
    }
}

/* Writes the ssh stand-in: logs its arguments (one per line, then "--"),
 * then runs the remote command string like sshd with a POSIX login shell
 * would: sh -c, with an environment of its own (not the launcher's). */
static void
write_fake_ssh(struct fx *f, char *path, size_t cap)
{
    char text[PATH_MAX * 2];

    snprintf(path, cap, "%s/fake-ssh", f->dir);
    snprintf(text, sizeof text,
             "#!/bin/sh\n"
             "for a; do printf '%%s\\n' \"$a\"; done >> '%s/ssh-args'\n"
             "echo -- >> '%s/ssh-args'\n"
             "for last; do :; done\n"
             "exec env -i PATH=\"$PATH\" HOME=/nonexistent "
             "${LSAN_OPTIONS:+LSAN_OPTIONS=\"$LSAN_OPTIONS\"} sh -c \"$last\"\n",
             f->dir, f->dir);
    gkvt_write_text(path, text, 0755);
}

/* Launches 'args' (a job of one remote trainer) on fresh ports; returns
 * the trainer's PID (tracked) once it runs. */
static pid_t
remote_trainer(struct fx *f, const char *const *args)
{
    pid_t tp;

    pick_ports(f);
    launch_start(f, args, NULL);
    tp = wait_pid_file(f->ws, "pid-trainer-0", 10000);
    track(f, tp);
    if (tp <= 0) {
        launch_wait(f, 1);
        dump_output(f);
        fail_msg("remote trainer did not start");
    }
    return tp;
}

static void
test_remote(void **state)
{
    struct fx *f = *state;
    char ssh[PATH_MAX + 16], path[PATH_MAX + 64], *t, want[PATH_MAX + 64];
    static const char nasty[] = "it's \"q\" $HOME `id` \\ *\nnew line";
    const char *args[] = {"--ip-config", f->cfg, "--store", f->store,
        "--num-servers", "1", "--num-trainers", "2",
        "--workspace", f->ws, "--ssh-cmd", ssh, "--force-ssh", "--ssh-user",
        "alice", "--ssh-port", "2222", "--", g_self, "--child", "env", nasty,
        "", "*", NULL};
    const char *sl[] = {"--ip-config", f->cfg, "--store", f->store,
        "--num-servers", "1", "--num-trainers", "1",
        "--workspace", f->ws, "--ssh-cmd", ssh, "--force-ssh", "--",
        g_self, "--child", "sleep", NULL};
    long spid = 0;
    pid_t tp;
    FILE *fp;

    write_fake_ssh(f, ssh, sizeof ssh);
    pick_ports(f);
    /* the stand-in ssh clears LT_DIR: children write to GKV_WORKSPACE */
    unsetenv("LT_DIR");
    if (launch_retry(f, args, NULL, 20) != 0) {
        dump_output(f);
        fail_msg("remote launch failed");
    }
    assert_true(out_has(f, "(ssh pid"));
    /* arguments survive the remote shell byte for byte */
    snprintf(path, sizeof path, "%s/args-trainer-1", f->ws);
    fp = fopen(path, "rb");
    assert_non_null(fp);
    {
        char buf[512];
        size_t n = fread(buf, 1, sizeof buf, fp);
        size_t want_n = sizeof nasty + 1 + 2;
        fclose(fp);
        assert_int_equal(n, want_n);
        assert_memory_equal(buf, nasty, sizeof nasty);
        assert_memory_equal(buf + sizeof nasty, "\0*\0", 3);
    }
    t = read_env(f, "trainer-1");
    ENV_EQ(t, "GKV_ROLE", "trainer");
    ENV_EQ(t, "GKV_RANK", "1");
    ENV_EQ(t, "GKV_IP_CONFIG", f->cfg);
    free(t);
    snprintf(path, sizeof path, "%s/ports-trainer-0", f->ws);
    t = gkvt_slurp(path);
    assert_string_equal(t, "ok");
    free(t);
    /* ssh options */
    snprintf(path, sizeof path, "%s/ssh-args", f->dir);
    t = gkvt_slurp(path);
    assert_non_null(strstr(t, "-o\nBatchMode=yes\n-p\n2222\nalice@127.0.0.1\ncd '"));
    free(t);
    /* the server ran in a session of its own, whose id is its PID, and is
     * gone */
    snprintf(path, sizeof path, "%s/logs/server-0-0.log", f->ws);
    t = gkvt_slurp(path);
    assert_int_equal(sscanf(t, "@gkv-pgid %ld", &spid), 1);
    assert_non_null(strstr(t, "listening on"));
    free(t);
    track(f, (pid_t)spid);
    assert_true(wait_gone((pid_t)spid, 2000));
    assert_true(port_closed(f->base));

    /* SIGTERM mid-job stops the "remote" trainer through ssh kill */
    gkvt_rmtree(strdup(f->ws));
    tp = remote_trainer(f, sl);
    kill(f->launcher, SIGTERM);
    assert_int_equal(launch_wait(f, 20), 1);
    assert_true(wait_gone(tp, 3000));
    snprintf(path, sizeof path, "%s/ssh-args", f->dir);
    t = gkvt_slurp(path);
    snprintf(want, sizeof want, "kill -TERM -%ld", (long)tp);
    assert_non_null(strstr(t, want));
    free(t);
    snprintf(path, sizeof path, "%s/logs/server-0-0.log", f->ws);
    t = gkvt_slurp(path);
    spid = 0;
    assert_int_equal(sscanf(t, "@gkv-pgid %ld", &spid), 1);
    free(t);
    track(f, (pid_t)spid);
    assert_true(wait_gone((pid_t)spid, 3000));

    /* again in the same workspace, whose logs now begin with the first
     * run's "@gkv-pgid" lines: the kills went to those numbers, and this
     * run's remote trainer and server were left running */
    snprintf(path, sizeof path, "%s/pid-trainer-0", f->ws);
    unlink(path);
    snprintf(path, sizeof path, "%s/ssh-args", f->dir);
    unlink(path);
    tp = remote_trainer(f, sl);
    snprintf(path, sizeof path, "%s/logs/server-0-0.log", f->ws);
    t = gkvt_slurp(path);
    {
        const char *l2 = strstr(t + 1, "@gkv-pgid ");
        long spid2 = 0;
        assert_non_null(l2);
        assert_int_equal(sscanf(l2, "@gkv-pgid %ld", &spid2), 1);
        track(f, (pid_t)spid2);         /* the teardown kills it if left */
        kill(f->launcher, SIGTERM);
        assert_int_equal(launch_wait(f, 20), 1);
        if (!wait_gone(tp, 3000))
            fail_msg("second run: the remote trainer %ld outlived the "
                     "launcher", (long)tp);
        if (!wait_gone((pid_t)spid2, 3000))
            fail_msg("second run: the remote server %ld outlived the "
                     "launcher", spid2);
    }
    free(t);
    snprintf(path, sizeof path, "%s/ssh-args", f->dir);
    t = gkvt_slurp(path);
    snprintf(want, sizeof want, "kill -TERM -%ld", (long)tp);
    assert_non_null(strstr(t, want));
    snprintf(want, sizeof want, "kill -TERM -%ld\n", spid);
    assert_null(strstr(t, want));            /* not the first run's server */
    free(t);
}

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
expect_usage(struct fx *f, const char *const *args, const char *say1,
             const char *say2)
{
    assert_int_equal(launch(f, args, NULL, 10), 2);
    if (!out_has(f, say1) || (say2 != NULL && !out_has(f, say2))) {
        dump_output(f);
        fail_msg("want '%s'%s%s", say1, say2 ? " and " : "",
                 say2 ? say2 : "");
    }
    /* nothing was started: no port of the ip_config is held */
    assert_true(port_closed(f->base));
}

static void
test_bad_no_command(void **state)
{
    struct fx *f = *state;
    const char *nocmd[] = {"--ip-config", f->cfg, "--store", f->store,
        "--num-servers", "1", "--num-trainers", "1", NULL};

    pick_ports(f);
    expect_usage(f, nocmd, "no command: put the trainer command after '--'",
                 NULL);
}

static void
test_bad_empty_command(void **state)
{
    struct fx *f = *state;
    const char *emptycmd[] = {"--ip-config", f->cfg, "--store", f->store,
        "--num-servers", "1", "--num-trainers", "1", "--", NULL};

    pick_ports(f);
    expect_usage(f, emptycmd, "no command after '--'", NULL);
}

static void
test_bad_ip_config_port_is_named_by_line(void **state)
{
    struct fx *f = *state;
    char badcfg[PATH_MAX + 16], want[PATH_MAX + 64];
    const char *badline[] = {"--ip-config", badcfg, "--store", f->store,
        "--num-servers", "1", "--num-trainers", "1", "--", "true", NULL};

    pick_ports(f);
    snprintf(badcfg, sizeof badcfg, "%s/bad.txt", f->dir);
    gkvt_write_text(badcfg, "# two machines\n127.0.0.1 40000\n127.0.0.2 notaport\n", 0644);
    snprintf(want, sizeof want, "%s:3: port 'notaport'", badcfg);
    expect_usage(f, badline, want, NULL);
}

static void
test_bad_zero_servers_or_trainers(void **state)
{
    struct fx *f = *state;
    const char *s0[] = {"--ip-config", f->cfg, "--store", f->store,
        "--num-servers", "0", "--num-trainers", "1", "--", "true", NULL};
    const char *t0[] = {"--ip-config", f->cfg, "--store", f->store,
        "--num-servers", "1", "--num-trainers", "0", "--", "true", NULL};

    pick_ports(f);
    expect_usage(f, s0, "--num-servers: '0' is not a number in 1..1000",
                 NULL);
    expect_usage(f, t0, "--num-trainers: '0'", NULL);
}

static void
test_bad_unknown_option(void **state)
{
    struct fx *f = *state;
    const char *unknown[] = {"--ip-config", f->cfg, "--frobnicate", NULL};

    pick_ports(f);
    expect_usage(f, unknown, "unknown option '--frobnicate'", NULL);
}

static void
test_bad_store_and_part_config(void **state)
{
    struct fx *f = *state;
    const char *both[] = {"--ip-config", f->cfg, "--store", f->store,
        "--part-config", f->cfg, "--num-servers", "1", "--num-trainers", "1",
        "--", "true", NULL};

    pick_ports(f);
    expect_usage(f, both, "exactly one of --part-config", NULL);
}

static void
test_bad_keep_alive_without_server_name(void **state)
{
    struct fx *f = *state;
    const char *kan[] = LAUNCH_ARGS("--keep-alive",);

    pick_ports(f);
    expect_usage(f, kan, "--keep-alive needs --server-name", NULL);
}

static void
test_bad_token_file_readable_by_others(void **state)
{
    struct fx *f = *state;
    char tok[PATH_MAX + 16];
    const char *badtok[] = LAUNCH_ARGS("--token-file", tok,);

    pick_ports(f);
    snprintf(tok, sizeof tok, "%s/token", f->dir);
    gkvt_write_text(tok, "sekrit\n", 0644);
    expect_usage(f, badtok, "chmod 600", NULL);
}

/* A missing token file is called that, not GKV_ENOENT's "no store", both
 * by a launch and by --shutdown. */
static void
test_bad_token_file_missing(void **state)
{
    struct fx *f = *state;
    char notok[PATH_MAX + 16];
    const char *notokl[] = LAUNCH_ARGS("--token-file", notok,);
    const char *notoks[] = {"--ip-config", f->cfg, "--num-servers", "1",
        "--shutdown", "--token-file", notok, "--timeout", "30", NULL};

    pick_ports(f);
    snprintf(notok, sizeof notok, "%s/no-such-token", f->dir);
    for (int i = 0; i < 2; i++) {
        char want[PATH_MAX + 64];

        snprintf(want, sizeof want, "--token-file %s: the token file does not "
                 "exist", notok);
        expect_usage(f, i ? notoks : notokl, want, NULL);
        assert_false(out_has(f, "no store at that path"));
    }
}

/* With samplers the group name must leave room for ".sampler". */
static void
test_bad_group_too_long_for_samplers(void **state)
{
    struct fx *f = *state;
    /* 56 characters: GROUP.sampler would be 64, one too many */
    static const char g56[] =
        "g-56-characters-long-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx";
    const char *longgrp[] = LAUNCH_ARGS("--group", g56, "--num-samplers",
                                        "1",);

    assert_int_equal(strlen(g56), 56);
    pick_ports(f);
    expect_usage(f, longgrp, "samplers join as group", "give at most 55");
}

static void
test_bad_workspace_under_a_file(void **state)
{
    struct fx *f = *state;
    char filews[PATH_MAX + 16];
    const char *badws[] = LAUNCH_ARGS("--workspace", filews,);

    pick_ports(f);
    snprintf(filews, sizeof filews, "%s/ip.txt/ws", f->dir);
    expect_usage(f, badws, "workspace", "cannot create it");
}

static void
test_bad_ip_config_missing(void **state)
{
    struct fx *f = *state;
    const char *nofile[] = {"--ip-config", "/nonexistent/ip.txt", "--store",
        f->store, "--num-servers", "1", "--num-trainers", "1", "--", "true", NULL};

    pick_ports(f);
    expect_usage(f, nofile, "/nonexistent/ip.txt", NULL);
}

static void
test_help_exits_0(void **state)
{
    struct fx *f = *state;
    const char *help[] = {"--help", NULL};
    char *o;

    pick_ports(f);
    assert_int_equal(launch(f, help, NULL, 10), 0);
    o = gkvt_slurp(f->out);
    assert_non_null(strstr(o, "Usage: gkv-launch"));
    free(o);
    /* nothing was started: no port of the ip_config is held */
    assert_true(port_closed(f->base));
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

/* launch() on a fresh port range again while a port was taken, with the
 * two-machine ip_config of two_machines() rewritten for each range. */
static int
launch_retry2(struct fx *f, const char *const *args, char *cfg2, size_t cap,
              int timeout_s)
{
    int rc = 0;

    for (int attempt = 0; attempt < 5; attempt++) {
        pick_ports(f);
        two_machines(f, cfg2, cap);
        rc = launch(f, args, NULL, timeout_s);
        if (rc == 0 || !(out_has(f, "already in use") ||
                         out_has(f, "Address already in use")))
            return rc;
    }
    return rc;
}

static void
log_has(struct fx *f, const char *log, const char *needle)
{
    char path[PATH_MAX + 64], *t;

    snprintf(path, sizeof path, "%s/logs/%s", f->ws, log);
    t = gkvt_slurp(path);
    if (strstr(t, needle) == NULL) {
        dump_output(f);
        fail_msg("'%s' not in %s:\n%s", needle, path, t);
    }
    free(t);
}

/* The example trainer with one sampler per trainer, two machines serving
 * the two partitions of a graph. A sampler used to share its trainer's
 * (group, rank), so each handshake took over the other's session and the
 * job failed; now samplers are clients of their own (GROUP.sampler, rank
 * trainer rank x K + j) and the job succeeds. */
static void
test_samplers_example(void **state)
{
    struct fx *f = *state;
    char json[PATH_MAX + 64], cfg2[PATH_MAX + 16], train[PATH_MAX + 16];
    const char *args[] = {"--ip-config", cfg2, "--part-config", json,
        "--num-servers", "1", "--num-trainers", "1", "--num-samplers", "1",
        "--workspace", f->ws, "--group", "g-samp", "--", train,
        "--max-batches", "50", "--batch", "64", NULL};
    int rc;

    snprintf(train, sizeof train, "%s", gkvt_prog("gkv-example-train"));
    make_graph(f, "g", 10, 2, json, sizeof json);
    rc = launch_retry2(f, args, cfg2, sizeof cfg2, 60);
    if (rc != 0) {
        char path[PATH_MAX + 64], *t;
        dump_output(f);
        snprintf(path, sizeof path, "%s/logs/server-0-0.log", f->ws);
        t = gkvt_slurp(path);
        fprintf(stderr, "server 0/0:\n%s\n", t);
        free(t);
    }
    assert_int_equal(rc, 0);
    assert_true(out_has(f, "job done"));
    for (int m = 0; m < 2; m++) {
        char log[64], want[160];

        snprintf(log, sizeof log, "sampler-%d-0.log", m);
        snprintf(want, sizeof want, "sampler 0 of trainer rank %d (rank %d/2 "
                 "of group 'g-samp.sampler')", m, m);
        log_has(f, log, want);
        snprintf(want, sizeof want, "sampler 0 of trainer rank %d epoch 0: ", m);
        log_has(f, log, want);
        /* no mask in this graph: the trainer says it falls back */
        snprintf(want, sizeof want, "sampler 0 of trainer rank %d: training "
                 "mask: the servers hold no 'node/_N/train_mask'; a random "
                 "0.6 of the nodes (--train-frac)", m);
        log_has(f, log, want);
        snprintf(log, sizeof log, "trainer-%d-0.log", m);
        snprintf(want, sizeof want, "rank %d epoch 0: ", m);
        log_has(f, log, want);
        snprintf(want, sizeof want, "rank %d: embedding 'node/_N/emb' mean |x|", m);
        log_has(f, log, want);
        snprintf(want, sizeof want, "rank %d: training mask: the servers hold "
                 "no 'node/_N/train_mask'; a random 0.6 of the nodes "
                 "(--train-frac)", m);
        log_has(f, log, want);
        /* and no session was taken over */
        {
            char path[PATH_MAX + 64], *t;
            snprintf(path, sizeof path, "%s/logs/server-%d-0.log", f->ws, m);
            t = gkvt_slurp(path);
            assert_non_null(strstr(t, "listening on"));
            if (strstr(t, "rejoin") != NULL)
                fail_msg("a client rejoined on server %d/0:\n%s", m, t);
            free(t);
        }
    }
}

static uint64_t
mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* The example trainer takes the graph's own training mask: the bool
 * node feature 'train_mask' given to gkv-partition (a random third of the
 * nodes here), pulled from the servers. Two machines with 2 trainers each:
 * every trainer names the mask and its count, and its training nodes are
 * exactly its share of gkv_pbook_node_split over that mask (count, sum and
 * hash of the IDs it prints), so all are mask nodes and they add up to the
 * mask's count. It used to draw a mask of its own from --train-frac. */
static void
test_example_train_mask(void **state)
{
    struct fx *f = *state;
    char json[PATH_MAX + 64], cfg2[PATH_MAX + 16], train[PATH_MAX + 16];
    const char *args[] = {"--ip-config", cfg2, "--part-config", json,
        "--num-servers", "1", "--num-trainers", "2", "--workspace", f->ws,
        "--group", "g-mask", "--", train, "--max-batches", "1", "--batch",
        "32", "--fanouts", "2,2", NULL};
    enum { SCALE = 10, N = 1 << SCALE, W = 4 };
    uint8_t mask[N], *newmask = calloc(N, 1);
    int64_t *nmap, *split;
    size_t off[W + 1], nmask = 0, total = 0;
    gkv_pbook *b = NULL;
    int rc;

    assert_non_null(newmask);
    for (int i = 0; i < N; i++) {
        mask[i] = mix64((uint64_t)i * 31 + 5) % 3 == 0;
        nmask += mask[i];
    }
    snprintf(train, sizeof train, "%s", gkvt_prog("gkv-example-train"));
    make_graph_mask(f, "gm", SCALE, 2, mask, json, sizeof json);
    rc = launch_retry2(f, args, cfg2, sizeof cfg2, 60);
    if (rc != 0)
        dump_output(f);
    assert_int_equal(rc, 0);

    /* the split the trainers should have made, in the partitions' IDs */
    GKVT_OK(gkv_pbook_open(&b, json));
    assert_int_equal(gkv_pbook_num_nodes(b, 0), N);
    nmap = gkvt_read_map(gkv_pbook_node_mapping(b, 0), N);
    for (int i = 0; i < N; i++)
        newmask[nmap[i]] = mask[i];
    GKVT_OK(gkv_pbook_node_split_all(b, 0, newmask, NULL, N, W, &split, off));
    for (int r = 0; r < W; r++) {
        char log[64], want[256];
        uint64_t sum = 0, h = 0;

        for (size_t i = off[r]; i < off[r + 1]; i++) {
            assert_true(newmask[split[i]]);          /* a mask node */
            sum += (uint64_t)split[i];
            h ^= mix64((uint64_t)split[i]);
        }
        total += off[r + 1] - off[r];
        snprintf(log, sizeof log, "trainer-%d-%d.log", r / 2, r % 2);
        snprintf(want, sizeof want, "rank %d: training mask: "
                 "'node/_N/train_mask' from the servers: %zu of %d '_N' "
                 "nodes", r, nmask, N);
        log_has(f, log, want);
        snprintf(want, sizeof want, "rank %d training nodes: n=%zu sum=%llu "
                 "hash=%016llx\n", r, off[r + 1] - off[r],
                 (unsigned long long)sum, (unsigned long long)h);
        log_has(f, log, want);
    }
    assert_int_equal(total, nmask);
    gkv_free(split);
    free(nmap);
    free(newmask);
    gkv_pbook_close(b);
}

/* A trainer that connects after the others have come and gone still finds
 * the servers: gkv-launch starts them with --num-clients (every trainer
 * and sampler of the job), so they stop on "last client left" only once
 * all have joined. */
static void
test_late_client(void **state)
{
    struct fx *f = *state;
    const char *args[] = {"--ip-config", f->cfg, "--store", f->store,
        "--num-servers", "1", "--num-trainers", "2", "--workspace", f->ws,
        "--", g_self, "--child", "late", NULL};
    pid_t sp[4];
    int rc;

    pick_ports(f);
    rc = launch_retry(f, args, NULL, 40);
    if (rc != 0)
        dump_output(f);
    assert_int_equal(rc, 0);
    log_has(f, "trainer-0-0.log", "rank 0: connected");
    log_has(f, "trainer-0-1.log", "rank 1: connected");
    assert_int_equal(server_pids(f, sp, 4), 1);
    track(f, sp[0]);
    assert_true(wait_gone(sp[0], 30000));
    assert_true(port_closed(f->base));
}

/* A persistent server found running is reused only when it serves what
 * this launch would serve: another --store or --part-config is refused
 * (exit 2, both paths named) before anything starts; the same store by
 * another path (a symlink) is reused. */
static void
test_keep_alive_other_store(void **state)
{
    struct fx *f = *state;
    char st2[PATH_MAX + 16], link[PATH_MAX + 16], json[PATH_MAX + 64];
    char have[PATH_MAX], want[PATH_MAX], part0[PATH_MAX + 64];
    char wsr[PATH_MAX + 16];
    const char *args[] = {"--ip-config", f->cfg, "--store", f->store,
        "--num-servers", "1", "--num-trainers", "1",
        "--keep-alive", "--server-name", "lt-store", "--workspace", f->ws,
        "--", g_self, "--child", "env", NULL};
    const char *pargs[] = {"--ip-config", f->cfg, "--part-config", json,
        "--num-servers", "1", "--num-trainers", "1",
        "--keep-alive", "--server-name", "lt-store", "--workspace", f->ws,
        "--", g_self, "--child", "env", NULL};
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
    make_graph(f, "g1", 6, 1, json, sizeof json);

    pick_ports(f);
    if (launch_retry(f, args, NULL, 20) != 0) {
        dump_output(f);
        fail_msg("first launch failed");
    }
    assert_int_equal(server_pids(f, sp, 4), 1);
    track(f, sp[0]);
    assert_false(pid_gone(sp[0]));

    /* another store: refused, nothing started, the server untouched, and
     * no workspace made */
    assert_non_null(realpath(f->store, have));
    assert_non_null(realpath(st2, want));
    args[3] = st2;
    snprintf(wsr, sizeof wsr, "%s-refused", f->ws);
    args[12] = wsr;
    pargs[12] = wsr;
    assert_int_equal(launch(f, args, NULL, 20), 2);
    assert_int_not_equal(access(wsr, F_OK), 0);
    assert_false(out_has(f, wsr));      /* no workspace named either */
    assert_true(out_has(f, "persistent server 'lt-store'"));
    assert_true(out_has(f, have));
    assert_true(out_has(f, want));
    assert_true(out_has(f, "nothing was started"));
    assert_false(out_has(f, "started server"));
    assert_false(out_has(f, "started trainer"));
    assert_false(pid_gone(sp[0]));

    /* another graph: partition 0's store is not the one served */
    snprintf(part0, sizeof part0, "%s/g1/part-0", f->dir);
    assert_non_null(realpath(part0, want));
    assert_int_equal(launch(f, pargs, NULL, 20), 2);
    assert_true(out_has(f, have));
    assert_true(out_has(f, want));
    assert_true(out_has(f, "--part-config"));
    assert_false(out_has(f, "started server"));
    assert_false(out_has(f, "started trainer"));
    assert_false(pid_gone(sp[0]));
    assert_int_not_equal(access(wsr, F_OK), 0);

    /* the same store through a symlink is the same store */
    args[3] = link;
    args[12] = f->ws;
    if (launch(f, args, NULL, 20) != 0) {
        dump_output(f);
        fail_msg("launch with the store through a symlink failed");
    }
    assert_true(out_has(f, "reusing server 0/0"));
    e = read_env(f, "trainer-0");
    ENV_EQ(e, "GKV_ROLE", "trainer");
    free(e);

    assert_int_equal(launch(f, stop, NULL, 20), 0);
    assert_true(wait_gone(sp[0], 30000));
}

/* With --keep-alive a failed job leaves the persistent servers running,
 * whether it started them or reused them, and so does a signal to the
 * launcher; the log says how to stop them. */
static void
test_keep_alive_failure(void **state)
{
    struct fx *f = *state;
    char ws2[PATH_MAX + 8], ws3[PATH_MAX + 8];
    const char *args[] = {"--ip-config", f->cfg, "--store", f->store,
        "--num-servers", "1", "--num-trainers", "2",
        "--keep-alive", "--server-name", "lt-fail", "--workspace", f->ws,
        "--", g_self, "--child", "fail", NULL};
    const char *stop[] = {"--ip-config", f->cfg, "--num-servers", "1",
        "--shutdown", "--timeout", "30", NULL};
    pid_t sp[4], t0;

    pick_ports(f);
    /* a job that starts the servers, and whose trainer rank 1 fails */
    assert_int_equal(launch_retry(f, args, NULL, 30), 1);
    assert_true(out_has(f, "trainer rank 1 (machine 0) failed: exit status 3"));
    assert_int_equal(server_pids(f, sp, 4), 1);
    track(f, sp[0]);
    t0 = pid_file(f->ws, "pid-trainer-0");
    track(f, t0);
    assert_true(wait_gone(t0, 3000));
    assert_true(out_has(f, "--keep-alive: leaving the servers running"));
    assert_true(out_has(f, "--shutdown"));
    assert_false(out_has(f, "server 0/0 exited"));
    gkvt_sleep_ms(300);
    assert_false(pid_gone(sp[0]));
    assert_true(port_connects(f->base));

    /* a job that reuses them and fails the same way */
    snprintf(ws2, sizeof ws2, "%s2", f->ws);
    args[12] = ws2;
    setenv("LT_DIR", ws2, 1);
    assert_int_equal(launch(f, args, NULL, 30), 1);
    assert_true(out_has(f, "reusing server 0/0"));
    assert_true(out_has(f, "trainer rank 1 (machine 0) failed"));
    assert_true(out_has(f, "--keep-alive: leaving the servers running"));
    assert_false(pid_gone(sp[0]));

    /* SIGTERM to the launcher: the trainers stop, the servers stay */
    snprintf(ws3, sizeof ws3, "%s3", f->ws);
    args[12] = ws3;
    args[16] = "sleep";
    setenv("LT_DIR", ws3, 1);
    launch_start(f, args, NULL);
    t0 = wait_pid_file(ws3, "pid-trainer-0", 10000);
    track(f, t0);
    if (t0 <= 0) {
        launch_wait(f, 1);
        dump_output(f);
        fail_msg("trainer did not start");
    }
    kill(f->launcher, SIGTERM);
    assert_int_equal(launch_wait(f, 20), 1);
    assert_true(wait_gone(t0, 3000));
    assert_true(out_has(f, "--keep-alive: leaving the servers running"));
    assert_false(pid_gone(sp[0]));
    setenv("LT_DIR", f->ws, 1);

    assert_int_equal(launch(f, stop, NULL, 20), 0);
    assert_true(wait_gone(sp[0], 30000));
}

/* --shutdown with one server down stops the others, names the one that
 * did not answer, and exits 1. */
static void
test_shutdown_partial(void **state)
{
    struct fx *f = *state;
    char cfg2[PATH_MAX + 16], want[2 * PATH_MAX];
    const char *args[] = {"--ip-config", f->cfg, "--store", f->store,
        "--num-servers", "1", "--num-trainers", "1",
        "--keep-alive", "--server-name", "lt-stop", "--workspace", f->ws,
        "--", g_self, "--child", "env", NULL};
    const char *stop[] = {"--ip-config", cfg2, "--num-servers", "1",
        "--shutdown", "--timeout", "30", NULL};
    pid_t sp[4];

    /* a persistent server on machine 0 of a two-machine ip_config only */
    pick_ports(f);
    if (launch_retry(f, args, NULL, 20) != 0) {
        dump_output(f);
        fail_msg("launch failed");
    }
    assert_int_equal(server_pids(f, sp, 4), 1);
    track(f, sp[0]);
    two_machines(f, cfg2, sizeof cfg2);
    assert_true(port_closed(f->base + 8));

    assert_int_equal(launch(f, stop, NULL, 30), 1);
    assert_true(out_has(f, "stopping server 0/0"));
    snprintf(want, sizeof want, "server 1/0 (machine 1, server 0, "
             "127.0.0.1:%d, %s line 2) did not answer", f->base + 8, cfg2);
    assert_true(out_has(f, want));
    assert_true(out_has(f, "1 of 2 servers did not answer"));
    assert_true(wait_gone(sp[0], 30000));
    assert_true(port_closed(f->base));
}

/* Launches 'nserv' persistent servers named 'name' (--keep-alive, one
 * trainer, workspace 'ws') on the picked ports, and tracks their 'want'
 * PIDs in sp. */
static void
start_persistent(struct fx *f, const char *name, const char *nserv,
                 const char *ws, pid_t *sp, int want)
{
    const char *args[] = {"--ip-config", f->cfg, "--store", f->store,
        "--num-servers", nserv, "--num-trainers", "1",
        "--keep-alive", "--server-name", name, "--workspace", ws,
        "--", g_self, "--child", "env", NULL};

    if (launch_retry(f, args, NULL, 30) != 0) {
        dump_output(f);
        fail_msg("launch of persistent servers '%s' failed", name);
    }
    assert_int_equal(server_pids(f, sp, 4), want);
    for (int i = 0; i < want; i++)
        track(f, sp[i]);
}

/* --shutdown with --num-servers below the servers' own count: each
 * handshake says how many run per machine, and those beyond are stopped
 * too, said on stdout (it stopped 0/0 only, exited 0 and said nothing). A
 * server beyond that cannot be stopped is named and the exit status is
 * 1. */
static void
test_shutdown_more_servers(void **state)
{
    struct fx *f = *state;
    char want[2 * PATH_MAX], ws2[PATH_MAX + 8];
    const char *stop[] = {"--ip-config", f->cfg, "--num-servers", "1",
        "--shutdown", "--timeout", "30", NULL};
    pid_t sp[4];

    /* three servers, stopped by a --shutdown that says one */
    pick_ports(f);
    start_persistent(f, "lt-more", "3", f->ws, sp, 3);
    if (launch(f, stop, NULL, 30) != 0) {
        dump_output(f);
        fail_msg("--shutdown --num-servers 1 failed");
    }
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
        if (!wait_gone(sp[i], 30000))
            fail_msg("server 0/%d (pid %ld) still runs", i, (long)sp[i]);
    for (int i = 0; i < 3; i++)
        assert_true(port_closed(f->base + i));

    /* again, with server 0/2 gone before the --shutdown: 0/0 and 0/1 stop,
     * 0/2 is named, exit 1 */
    snprintf(ws2, sizeof ws2, "%s2", f->ws);
    setenv("LT_DIR", ws2, 1);
    start_persistent(f, "lt-more", "3", ws2, sp, 3);
    kill(sp[2], SIGKILL);
    assert_true(wait_gone(sp[2], 30000));
    assert_true(port_closed(f->base + 2));
    assert_int_equal(launch(f, stop, NULL, 30), 1);
    assert_true(out_has(f, "stopping server 0/1"));
    snprintf(want, sizeof want, "server 0/2 (machine 0, server 2, "
             "127.0.0.1:%d, %s line 2) did not answer", f->base + 2, f->cfg);
    if (!out_has(f, want)) {
        dump_output(f);
        fail_msg("want '%s'", want);
    }
    assert_true(out_has(f, "1 of 3 servers did not answer"));
    assert_true(wait_gone(sp[0], 30000));
    assert_true(wait_gone(sp[1], 30000));
    assert_true(port_closed(f->base));
    assert_true(port_closed(f->base + 1));
}

/* --shutdown --timeout S gives each server S seconds to answer (5
 * without it): a server that is stopped (SIGSTOP) is named with the time
 * it had, both ways; once it runs again it is stopped. */
static void
test_shutdown_timeout(void **state)
{
    struct fx *f = *state;
    const char *stop1[] = {"--ip-config", f->cfg, "--num-servers", "1",
        "--shutdown", "--timeout", "1", NULL};
    const char *stop[] = {"--ip-config", f->cfg, "--num-servers", "1",
        "--shutdown", "--timeout", "30", NULL};
    pid_t sp[4];

    pick_ports(f);
    start_persistent(f, "lt-slow", "1", f->ws, sp, 1);
    gkvt_stop_proc(sp[0]);
    assert_int_equal(launch(f, stop1, NULL, 30), 1);
    if (!out_has(f, "no reply to hello within 1000 ms")) {
        dump_output(f);
        fail_msg("the stopped server's 1 s is not named");
    }
    assert_true(out_has(f, "the only server was not stopped"));
    {   /* without --timeout a server has 5 s (the default) */
        const char *stop0[] = {"--ip-config", f->cfg, "--num-servers", "1",
            "--shutdown", NULL};
        assert_int_equal(launch(f, stop0, NULL, 30), 1);
        if (!out_has(f, "no reply to hello within 5000 ms")) {
            dump_output(f);
            fail_msg("the stopped server's default 5 s is not named");
        }
    }
    kill(sp[0], SIGCONT);
    assert_false(pid_gone(sp[0]));
    assert_int_equal(launch(f, stop, NULL, 30), 0);
    assert_true(wait_gone(sp[0], 30000));
    assert_true(port_closed(f->base));
}

/* --shutdown without the --token-file of servers that need one: each
 * failure names the server by its place in the ip_config (it used to say
 * "(machine 0, server 0)" for every one, the label of a client of one
 * address); nothing is stopped, exit 1; with the token they all stop. */
static void
test_shutdown_token(void **state)
{
    struct fx *f = *state;
    char cfg2[PATH_MAX + 16], tok[PATH_MAX + 16], want[2 * PATH_MAX];
    const char *args[] = {"--ip-config", cfg2, "--store", f->store,
        "--num-servers", "2", "--num-trainers", "1", "--token-file", tok,
        "--keep-alive", "--server-name", "lt-tok", "--workspace", f->ws,
        "--", g_self, "--child", "env", NULL};
    const char *stop[] = {"--ip-config", cfg2, "--num-servers", "2",
        "--shutdown", "--timeout", "30", NULL};
    const char *stop_tok[] = {"--ip-config", cfg2, "--num-servers", "2",
        "--shutdown", "--token-file", tok, "--timeout", "30", NULL};
    pid_t sp[8];
    char *o, *e;

    snprintf(tok, sizeof tok, "%s/token", f->dir);
    gkvt_write_text(tok, "lt-shutdown-secret\n", 0600);
    if (launch_retry2(f, args, cfg2, sizeof cfg2, 30) != 0) {
        dump_output(f);
        fail_msg("launch failed");
    }
    assert_int_equal(server_pids(f, sp, 8), 4);
    for (int i = 0; i < 4; i++)
        track(f, sp[i]);

    assert_int_equal(launch(f, stop, NULL, 30), 1);
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
        assert_false(pid_gone(sp[i]));

    if (launch(f, stop_tok, NULL, 30) != 0) {
        dump_output(f);
        fail_msg("--shutdown --token-file failed");
    }
    for (int i = 0; i < 4; i++)
        if (!wait_gone(sp[i], 30000))
            fail_msg("server pid %ld still runs", (long)sp[i]);
}

/* A partitioned graph whose partition count is not the ip_config's
 * machine count is refused before anything starts (exit 2). */
static void
test_part_count(void **state)
{
    struct fx *f = *state;
    char json[PATH_MAX + 64], want[2 * PATH_MAX + 128];
    const char *args[] = {"--ip-config", f->cfg, "--part-config", json,
        "--num-servers", "1", "--num-trainers", "1", "--workspace", f->ws,
        "--", g_self, "--child", "env", NULL};

    make_graph(f, "g2", 6, 2, json, sizeof json);
    pick_ports(f);
    assert_int_equal(launch(f, args, NULL, 20), 2);
    snprintf(want, sizeof want, "%s lists 1 machine but %s has 2 partitions",
             f->cfg, json);
    if (!out_has(f, want)) {
        dump_output(f);
        fail_msg("want '%s'", want);
    }
    assert_false(out_has(f, "started server"));
    assert_true(port_closed(f->base));
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
    struct fx *f = *state;
    char ws2[PATH_MAX + 8];
    const char *args[] = {"--ip-config", f->cfg, "--store", f->store,
        "--num-servers", "1", "--num-trainers", "1",
        "--keep-alive", "--server-name", "lt-sargs", "--workspace", f->ws,
        "--", g_self, "--child", "env", NULL};
    const char *args2[] = {"--ip-config", f->cfg, "--store", f->store,
        "--num-servers", "1", "--num-trainers", "1",
        "--keep-alive", "--server-name", "lt-sargs", "--workspace", ws2,
        "--server-arg", "--nosync", "--server-arg", "--heartbeat-timeout",
        "--server-arg", "5000", "--server-arg", "--writeback",
        "--server-arg", "emb*",
        "--", g_self, "--child", "env", NULL};
    const char *stop[] = {"--ip-config", f->cfg, "--num-servers", "1",
        "--shutdown", "--timeout", "30", NULL};
    pid_t sp[4];
    char *o;

    pick_ports(f);
    if (launch_retry(f, args, NULL, 20) != 0) {
        dump_output(f);
        fail_msg("first launch failed");
    }
    assert_int_equal(server_pids(f, sp, 4), 1);
    track(f, sp[0]);

    snprintf(ws2, sizeof ws2, "%s2", f->ws);
    setenv("LT_DIR", ws2, 1);
    if (launch(f, args2, NULL, 20) != 0) {
        dump_output(f);
        fail_msg("second launch failed");
    }
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
    assert_false(out_has(f, "started server"));
    assert_false(pid_gone(sp[0]));

    assert_int_equal(launch(f, stop, NULL, 20), 0);
    assert_true(wait_gone(sp[0], 30000));
}

/* An ip_config address that does not resolve (127.0.0.300 passes the
 * format check as a host name) is refused before anything starts: exit 2,
 * naming the file, line and address. It used to start the servers, then
 * fail on the one that could not resolve its address. --shutdown names
 * that server among those that did not answer. */
static void
test_ip_config_unresolvable(void **state)
{
    struct fx *f = *state;
    char cfg2[PATH_MAX + 16], text[128], want[2 * PATH_MAX];
    const char *args[] = {"--ip-config", cfg2, "--store", f->store,
        "--num-servers", "1", "--num-trainers", "1", "--workspace", f->ws,
        "--", g_self, "--child", "env", NULL};
    const char *stop[] = {"--ip-config", cfg2, "--num-servers", "1",
        "--shutdown", "--timeout", "30", NULL};

    pick_ports(f);
    snprintf(cfg2, sizeof cfg2, "%s/ip-bad.txt", f->dir);
    snprintf(text, sizeof text, "# machines\n127.0.0.1 %d\n127.0.0.300 %d\n",
             f->base, f->base + 8);
    gkvt_write_text(cfg2, text, 0644);

    assert_int_equal(launch(f, args, NULL, 30), 2);
    snprintf(want, sizeof want, "%s:3: address '127.0.0.300' (machine 1) "
             "does not resolve", cfg2);
    if (!out_has(f, want)) {
        dump_output(f);
        fail_msg("want '%s'", want);
    }
    assert_true(out_has(f, "nothing was started"));
    assert_false(out_has(f, "started server"));
    assert_true(port_closed(f->base));
    assert_int_not_equal(access(f->ws, F_OK), 0);

    assert_int_equal(launch(f, stop, NULL, 30), 1);
    snprintf(want, sizeof want, "server 1/0 (machine 1, server 0, "
             "127.0.0.300:%d, %s line 3) did not answer: its address "
             "'127.0.0.300' does not resolve", f->base + 8, cfg2);
    if (!out_has(f, want)) {
        dump_output(f);
        fail_msg("want '%s'", want);
    }
}

/* --shutdown when no server answers: the closing line says that none was
 * stopped (it said "2 of 2 servers did not answer ...; the others were
 * asked to stop" when there were no others); with one server, "the only
 * server". Exit 1 both times. */
static void
test_shutdown_none_answer(void **state)
{
    struct fx *f = *state;
    char cfg2[PATH_MAX + 16];
    const char *stop2[] = {"--ip-config", cfg2, "--num-servers", "1",
        "--shutdown", "--timeout", "30", NULL};
    const char *stop1[] = {"--ip-config", f->cfg, "--num-servers", "1",
        "--shutdown", "--timeout", "30", NULL};
    char *e;

    pick_ports(f);
    two_machines(f, cfg2, sizeof cfg2);
    assert_int_equal(launch(f, stop2, NULL, 30), 1);
    e = gkvt_slurp(f->err);
    if (strstr(e, "none of the 2 servers was stopped") == NULL ||
        strstr(e, "the others were asked to stop") != NULL ||
        strstr(e, "2 of 2") != NULL)
        fail_msg("stderr:\n%s", e);
    free(e);
    assert_false(out_has(f, "stopping server"));

    assert_int_equal(launch(f, stop1, NULL, 30), 1);
    e = gkvt_slurp(f->err);
    if (strstr(e, "the only server was not stopped") == NULL ||
        strstr(e, "the others") != NULL || strstr(e, "1 of 1") != NULL)
        fail_msg("stderr:\n%s", e);
    free(e);
}

/* A refused launch (a port held, so nothing was started) makes no
 * workspace: it used to leave an empty WORKSPACE/logs behind. */
static void
test_refused_no_workspace(void **state)
{
    struct fx *f = *state;
    const char *args[] = {"--ip-config", f->cfg, "--store", f->store,
        "--num-servers", "1", "--num-trainers", "1",
        "--workspace", f->ws, "--", g_self, "--child", "env", NULL};
    const char *ka[] = {"--ip-config", f->cfg, "--store", f->store,
        "--num-servers", "1", "--num-trainers", "1",
        "--keep-alive", "--server-name", "n1", "--workspace", f->ws,
        "--", g_self, "--child", "env", NULL};
    struct sockaddr_in a;
    int one = 1;

    pick_ports(f);
    f->lsock = socket(AF_INET, SOCK_STREAM, 0);
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)f->base);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(f->lsock, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    assert_int_equal(bind(f->lsock, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(f->lsock, 16), 0);

    assert_int_equal(launch(f, args, NULL, 20), 1);
    assert_true(out_has(f, "is already in use"));
    assert_int_not_equal(access(f->ws, F_OK), 0);

    assert_int_equal(launch(f, ka, NULL, 20), 1);
    assert_true(out_has(f, "nothing was started"));
    assert_int_not_equal(access(f->ws, F_OK), 0);
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

static void
find_programs(void)
{
    ssize_t n = readlink("/proc/self/exe", g_self, sizeof g_self - 1);

    assert_true(n > 0);
    g_self[n] = '\0';
    snprintf(g_launch, sizeof g_launch, "%s", gkvt_prog("gkv-launch"));
    snprintf(g_server, sizeof g_server, "%s", gkvt_prog("gkv-server"));
}

int
main(int argc, char **argv)
{
    static const char *const cluster_vars[] = {
        "SLURM_PROCID", "SLURM_NTASKS", "SLURM_NODEID", "SLURM_LOCALID",
        "SLURM_NNODES", "SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_RESTART_COUNT",
        "SLURM_STEP_TASKS_PER_NODE", "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_RANK",
        "PMI_SIZE", "MPI_LOCALRANKID", "PMIX_NAMESPACE",
    };
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_bad_no_command, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_empty_command, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_ip_config_port_is_named_by_line, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_zero_servers_or_trainers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_unknown_option, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_store_and_part_config, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_keep_alive_without_server_name, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_token_file_readable_by_others, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_token_file_missing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_group_too_long_for_samplers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_workspace_under_a_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_ip_config_missing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_help_exits_0, setup, teardown),
        cmocka_unit_test(test_trainer_usage),
        cmocka_unit_test_setup_teardown(test_env, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failure, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sigterm, setup, teardown),
        cmocka_unit_test_setup_teardown(test_keep_alive, setup, teardown),
        cmocka_unit_test_setup_teardown(test_port_taken, setup, teardown),
        cmocka_unit_test_setup_teardown(test_slurm_mpi, setup, teardown),
        cmocka_unit_test_setup_teardown(test_remote, setup, teardown),
        cmocka_unit_test_setup_teardown(test_samplers_example, setup, teardown),
        cmocka_unit_test_setup_teardown(test_example_train_mask, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_keep_alive_other_store, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_keep_alive_failure, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_shutdown_partial, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shutdown_more_servers, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_shutdown_token, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shutdown_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_part_count, setup, teardown),
        cmocka_unit_test_setup_teardown(test_keep_alive_server_args, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_ip_config_unresolvable, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_shutdown_none_answer, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_refused_no_workspace, setup,
                                        teardown),
        cmocka_unit_test(test_trainer_version),
        /* last: it needs gkv-server --num-clients */
        cmocka_unit_test_setup_teardown(test_late_client, setup, teardown),
    };

    if (argc >= 2 && strcmp(argv[1], "--child") == 0)
        return child_main(argc - 2, argv + 2);
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--fake-server") == 0)
            return fake_server_main(argc, argv);
    for (size_t i = 0; i < sizeof cluster_vars / sizeof cluster_vars[0]; i++)
        unsetenv(cluster_vars[i]);
    signal(SIGPIPE, SIG_IGN);
    find_programs();
    if (access(g_launch, X_OK) != 0 || access(g_server, X_OK) != 0) {
        fprintf(stderr, "launch_test: %s or %s not built\n", g_launch, g_server);
        return 1;
    }
    return cmocka_run_group_tests_name("launch", tests, NULL, NULL);
}
