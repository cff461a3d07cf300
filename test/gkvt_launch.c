/* gkvt_launch.c - the gkv-launch tests' fixture and helpers
 * (gkvt_launch.h). */
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
#include "gkvt_graph.h"
#include "gkv_net.h"
#include "tools/common/util.h"
#include "gkvt_launch.h"

static char g_launch[PATH_MAX + 16], g_server[PATH_MAX + 16];
char gkvt_lt_self[PATH_MAX];

/* ---- small helpers ------------------------------------------------------------ */

/* The value of NAME in a file of "NAME=value" lines; "" when missing. */
const char *
gkvt_lt_env_in(const char *text, const char *name, char *buf, size_t cap)
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

/* Whether pid is gone (no process, or a zombie nobody reaped yet). */
int
gkvt_lt_pid_gone(pid_t pid)
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

int
gkvt_lt_wait_gone(pid_t pid, int ms)
{
    double end = tools__now_s() + ms / 1000.0;

    while (!gkvt_lt_pid_gone(pid)) {
        if (tools__now_s() > end)
            return 0;
        tools__sleep_ms(10);
    }
    return 1;
}

void
gkvt_lt_track(struct gkvt_lt_fx *f, pid_t pid)
{
    if (pid > 0 && f->npids < GKVT_LT_MAXPIDS)
        f->pids[f->npids++] = pid;
}

/* PID in file DIR/NAME (written by a child), or 0. */
pid_t
gkvt_lt_pid_file(const char *dir, const char *name)
{
    char path[2 * PATH_MAX + 200], *t;
    long v = 0;

    snprintf(path, sizeof path, "%s/%s", dir, name);
    t = gkvt_slurp(path);
    v = atol(t);
    free(t);
    return (pid_t)v;
}

pid_t
gkvt_lt_wait_pid_file(const char *dir, const char *name, int ms)
{
    double end = tools__now_s() + ms / 1000.0;
    pid_t p;

    while ((p = gkvt_lt_pid_file(dir, name)) <= 0 && tools__now_s() < end)
        tools__sleep_ms(10);
    return p;
}

/* ---- ports ---------------------------------------------------------------------- */

/* Something listens on the port (the launcher's own look, which does not
 * count a connect that TCP joined to itself: a plain connect to a port
 * nobody listens on does that once in some thousands). */
int
gkvt_lt_port_connects(int port)
{
    return tools__port_accepts("127.0.0.1", (unsigned)port, 2000);
}

/* Nothing listens on the port, within 15 s. A server counts as gone when its
 * first thread has exited, but its sockets close with its last thread,
 * which can be a moment later (one blocked in a disk write). */
int
gkvt_lt_port_closed(int port)
{
    double end = tools__now_s() + 15.0;

    while (gkvt_lt_port_connects(port)) {
        if (tools__now_s() > end)
            return 0;
        tools__sleep_ms(20);
    }
    return 1;
}

/* Free for a launch: bindable (a TIME_WAIT left by the last test is
 * fine) and nothing answers there. */
static int
lt_port_usable(int port)
{
    return gkvt_port_bindable(port, 1) && !gkvt_lt_port_connects(port);
}

void
gkvt_lt_ports(struct gkvt_lt_fx *f)
{
    char text[128];

    f->base = gkvt_port_find(16, 16, 7777u, 1000, lt_port_usable);
    snprintf(text, sizeof text, "# launch_test\n127.0.0.1 %d\n", f->base);
    gkvt_write_text(f->cfg, text, 0644);
}

/* ---- running the launcher --------------------------------------------------------- */

/* Starts gkv-launch with the NULL-terminated arguments after argv[0],
 * stdout and stderr to f->out and f->err; extra environment "N=V" strings
 * in envs (NULL-terminated, may be NULL). */
pid_t
gkvt_lt_start(struct gkvt_lt_fx *f, const char *const *args,
              const char *const *envs)
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
int
gkvt_lt_wait(struct gkvt_lt_fx *f, int timeout_s)
{
    double end = tools__now_s() + timeout_s;
    int st;

    for (;;) {
        pid_t r = waitpid(f->launcher, &st, WNOHANG);
        if (r == f->launcher)
            break;
        if (tools__now_s() > end) {
            char *o = gkvt_slurp(f->out), *e = gkvt_slurp(f->err);
            kill(f->launcher, SIGKILL);
            waitpid(f->launcher, &st, 0);
            f->launcher = 0;
            fail_msg("gkv-launch did not finish in %d s\nstdout:\n%s\nstderr:\n%s",
                     timeout_s, o, e);
        }
        tools__sleep_ms(10);
    }
    f->launcher = 0;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int
gkvt_lt_launch(struct gkvt_lt_fx *f, const char *const *args,
               const char *const *envs, int timeout_s)
{
    gkvt_lt_start(f, args, envs);
    return gkvt_lt_wait(f, timeout_s);
}

int
gkvt_lt_has(struct gkvt_lt_fx *f, const char *needle)
{
    char *o = gkvt_slurp(f->out), *e = gkvt_slurp(f->err);
    int hit = strstr(o, needle) != NULL || strstr(e, needle) != NULL;

    free(o);
    free(e);
    return hit;
}

void
gkvt_lt_dump(struct gkvt_lt_fx *f)
{
    char *o = gkvt_slurp(f->out), *e = gkvt_slurp(f->err);

    fprintf(stderr, "gkv-launch stdout:\n%s\ngkv-launch stderr:\n%s\n", o, e);
    free(o);
    free(e);
}

void
gkvt_lt_expect_ok(struct gkvt_lt_fx *f, int rc, const char *what)
{
    if (rc != 0) {
        gkvt_lt_dump(f);
        fail_msg("%s failed: exit %d", what, rc);
    }
}

/* PIDs of the "started server ... (local pid N)" lines, into pids. */
int
gkvt_lt_server_pids(struct gkvt_lt_fx *f, pid_t *pids, int max)
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

int
gkvt_lt_setup(void **state)
{
    struct gkvt_lt_fx *f = calloc(1, sizeof *f);

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
    /* persistent servers' tokens (gkv-launch keeps them there) */
    setenv("XDG_STATE_HOME", f->dir, 1);
    *state = f;
    return 0;
}

int
gkvt_lt_teardown(void **state)
{
    struct gkvt_lt_fx *f = *state;
    int bad = 0;
    char logs[PATH_MAX + 8], cmd[3 * PATH_MAX + 128];

    if (f->launcher > 0) {
        kill(f->launcher, SIGKILL);
        waitpid(f->launcher, NULL, 0);
    }
    for (int i = 0; i < f->npids; i++)
        if (f->pids[i] > 0 && !gkvt_lt_pid_gone(f->pids[i]))
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
        double end = tools__now_s() + 15;
        while (access(path, F_OK) != 0 && tools__now_s() < end)
            tools__sleep_ms(10);
        tools__sleep_ms(500);          /* a server stopping on it has stopped */
    }
    memset(&o, 0, sizeof o);
    o.timeout_ms = 3000;
    o.group_size = (unsigned)atoi(getenv("GKV_WORLD_SIZE"));
    o.flags = GKV_CLIENT_NO_HEARTBEAT;
    {   /* the job's token, as a trainer reads it */
        const char *tf = getenv("GKV_TOKEN_FILE");
        char tok[GKV_TOKEN_MAX + 1];
        int auth = tf != NULL && *tf != '\0' &&
                   gkv_token_load(tf, tok, sizeof tok) == GKV_OK;

        rc = gkv_client_connect(&c, getenv("GKV_IP_CONFIG"), auth ? tok : NULL,
                                getenv("GKV_GROUP"), (uint32_t)atoi(rank), &o);
    }
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

/* Writes DIR/env-ROLE-RANK (GKV_* lines), args-... (each
 * argument then a NUL), pid-... and ports-... ("ok" when every server of
 * the ip_config accepts connections). */
int
gkvt_lt_child_main(int argc, char **argv)
{
    extern char **environ;
    const char *dir = out_dir(), *mode = argc > 0 ? argv[0] : "env";
    const char *role = getenv("GKV_ROLE"), *rank = getenv("GKV_RANK");
    char tag[128], path[PATH_MAX + 200];
    FILE *fp;
    gkv_ipconfig *ipc = NULL;
    int ok = 1;

    if (dir == NULL || role == NULL || rank == NULL)
        return 90;
    snprintf(tag, sizeof tag, "%s-%s", role, rank);
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
                ok &= gkvt_lt_port_connects(
                    (int)(gkv_ipconfig_machine(ipc, m)->port + k));
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
            double end = tools__now_s() + 30;
            snprintf(path, sizeof path, "%s/pid-trainer-0", dir);
            while (access(path, F_OK) != 0 && tools__now_s() < end)
                tools__sleep_ms(10);
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

char *
gkvt_lt_read_env(struct gkvt_lt_fx *f, const char *tag)
{
    char path[PATH_MAX + 64];

    snprintf(path, sizeof path, "%s/env-%s", f->ws, tag);
    return gkvt_slurp(path);
}

/* ---- graphs ----------------------------------------------------------------------- */

/* An ip_config of two machines on loopback: f->base and f->base + 8. */
void
gkvt_lt_two_machines(struct gkvt_lt_fx *f, char *path, size_t cap)
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
void
gkvt_lt_graph_mask(struct gkvt_lt_fx *f, const char *name, int scale, int parts,
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

void
gkvt_lt_graph(struct gkvt_lt_fx *f, const char *name, int scale, int parts,
              char *json, size_t cap)
{
    gkvt_lt_graph_mask(f, name, scale, parts, NULL, json, cap);
}

/* ---- launching again on a port clash, logs ------------------------------- */

/* Runs a launch, on a fresh port range again when a port was taken. */
int
gkvt_lt_retry(struct gkvt_lt_fx *f, const char *const *args,
              const char *const *envs, int timeout_s)
{
    int rc = 0;

    for (int attempt = 0; attempt < 5; attempt++) {
        rc = gkvt_lt_launch(f, args, envs, timeout_s);
        if (rc == 0 || !(gkvt_lt_has(f, "already in use") ||
                         gkvt_lt_has(f, "Address already in use")))
            return rc;
        gkvt_lt_ports(f);
    }
    return rc;
}

/* gkvt_lt_launch() on a fresh port range again while a port was taken, with the
 * two-machine ip_config of gkvt_lt_two_machines() rewritten for each range. */
int
gkvt_lt_retry2(struct gkvt_lt_fx *f, const char *const *args, char *cfg2,
               size_t cap, int timeout_s)
{
    int rc = 0;

    for (int attempt = 0; attempt < 5; attempt++) {
        gkvt_lt_ports(f);
        gkvt_lt_two_machines(f, cfg2, cap);
        rc = gkvt_lt_launch(f, args, NULL, timeout_s);
        if (rc == 0 || !(gkvt_lt_has(f, "already in use") ||
                         gkvt_lt_has(f, "Address already in use")))
            return rc;
    }
    return rc;
}

void
gkvt_lt_log_has(struct gkvt_lt_fx *f, const char *log, const char *needle)
{
    char path[PATH_MAX + 64], *t;

    snprintf(path, sizeof path, "%s/logs/%s", f->ws, log);
    t = gkvt_slurp(path);
    if (strstr(t, needle) == NULL) {
        gkvt_lt_dump(f);
        fail_msg("'%s' not in %s:\n%s", needle, path, t);
    }
    free(t);
}

void
gkvt_lt_find_programs(void)
{
    snprintf(gkvt_lt_self, sizeof gkvt_lt_self, "%s", gkvt_self());
    snprintf(g_launch, sizeof g_launch, "%s", gkvt_prog("gkv-launch"));
    snprintf(g_server, sizeof g_server, "%s", gkvt_prog("gkv-server"));
}

int
gkvt_lt_prelude(int argc, char **argv)
{
    static const char *const cluster_vars[] = {
        "SLURM_PROCID", "SLURM_NTASKS", "SLURM_NODEID", "SLURM_LOCALID",
        "SLURM_NNODES", "SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_RESTART_COUNT",
        "SLURM_STEP_TASKS_PER_NODE", "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_RANK",
        "PMI_SIZE", "MPI_LOCALRANKID", "PMIX_NAMESPACE",
    };

    if (argc >= 2 && strcmp(argv[1], "--child") == 0)
        return gkvt_lt_child_main(argc - 2, argv + 2);
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--fake-server") == 0)
            return fake_server_main(argc, argv);
    for (size_t i = 0; i < sizeof cluster_vars / sizeof cluster_vars[0]; i++)
        unsetenv(cluster_vars[i]);
    signal(SIGPIPE, SIG_IGN);
    gkvt_lt_find_programs();
    if (access(g_launch, X_OK) != 0 || access(g_server, X_OK) != 0) {
        fprintf(stderr, "%s: %s or %s not built\n", argv[0], g_launch,
                g_server);
        return 1;
    }
    return -1;
}
