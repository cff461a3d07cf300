/* benchproc.c - see benchproc.h. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "benchproc.h"
#include "util.h"

#define MAXKIDS 8

char tools__bench_dir[256];
static pid_t kids[MAXKIDS];
static int nkids;
static pid_t owner;                 /* clean-up runs in this process only */
static char server_path[PATH_MAX + 16];
static char rm_arg[300];

/* ---- children and clean-up ---------------------------------------------- */

void
tools__bench_adopt(pid_t pid)
{
    if (nkids == MAXKIDS)
        tools__die("too many child processes");
    kids[nkids++] = pid;
}

void
tools__bench_stop(pid_t pid)
{
    for (int i = 0; i < nkids; i++)
        if (kids[i] == pid) {
            int st;
            kill(pid, SIGTERM);
            for (int k = 0; k < 200 && waitpid(pid, &st, WNOHANG) == 0; k++)
                usleep(10000);
            if (waitpid(pid, &st, WNOHANG) == 0) {
                kill(pid, SIGKILL);
                waitpid(pid, &st, 0);
            }
            kids[i] = kids[--nkids];
            return;
        }
}

void
tools__bench_rmtree(const char *dir)
{
    char cmd[PATH_MAX + 32];

    if (dir[0] == '\0' || strncmp(dir, "/tmp/", 5) != 0)
        return;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        tools__note("could not remove %s", dir);
}

static void
cleanup(void)
{
    if (getpid() != owner)
        return;
    while (nkids > 0)
        tools__bench_stop(kids[nkids - 1]);
    tools__bench_rmtree(tools__bench_dir);
    tools__bench_dir[0] = '\0';
}

/* SIGINT, SIGTERM: kill the children, remove the work directory (rm in a
 * child: fork, execv and waitpid are async-signal-safe), leave with
 * 128 + sig. */
static void
on_signal(int sig)
{
    pid_t pid = -1;

    for (int i = 0; i < nkids; i++)
        kill(kids[i], SIGKILL);
    if (getpid() == owner && rm_arg[0] != '\0' && (pid = fork()) == 0) {
        char *argv[] = {"/bin/rm", "-rf", rm_arg, NULL};
        execv(argv[0], argv);
        _exit(127);
    } else if (pid > 0) {
        waitpid(pid, NULL, 0);
    }
    _exit(128 + sig);
}

void
tools__bench_die_with_parent(void)
{
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != owner)
        _exit(1);                       /* the parent is already gone */
}

pid_t
tools__bench_spawn(char *const argv[], const char *log)
{
    pid_t pid;

    if (nkids == MAXKIDS)
        tools__die("too many child processes");
    if ((pid = fork()) < 0)
        tools__die("fork: %s", strerror(errno));
    if (pid == 0) {
        int dn = open("/dev/null", O_RDWR);
        int fe = log != NULL ? open(log, O_WRONLY | O_CREAT | O_APPEND, 0644)
                             : dn;
        tools__bench_die_with_parent();
        dup2(dn, 0);
        dup2(dn, 1);
        dup2(fe, 2);
        execvp(argv[0], argv);
        _exit(127);
    }
    kids[nkids++] = pid;
    return pid;
}

void
tools__bench_init(const char *tag)
{
    char self[PATH_MAX], *sl;
    struct sigaction sa;
    ssize_t k;

    owner = getpid();
    /* gkv-server sits next to this program */
    if ((k = readlink("/proc/self/exe", self, sizeof self - 1)) <= 0)
        tools__die("cannot find myself");
    self[k] = '\0';
    if ((sl = strrchr(self, '/')) != NULL)
        *sl = '\0';
    snprintf(server_path, sizeof server_path, "%s/gkv-server", self);
    if (access(server_path, X_OK) != 0)
        tools__die("%s: not found (build it first)", server_path);
    /* mkdtemp's template: six X */
    snprintf(tools__bench_dir, sizeof tools__bench_dir,
             "/tmp/%s-" "XX" "XX" "XX", tag);
    if (mkdtemp(tools__bench_dir) == NULL)
        tools__die("mkdtemp: %s", strerror(errno));
    snprintf(rm_arg, sizeof rm_arg, "%s", tools__bench_dir);
    atexit(cleanup);
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigfillset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

/* ---- ports and servers -------------------------------------------------- */

static int
port_free(int port)
{
    struct sockaddr_in a = {0};
    int s = socket(AF_INET, SOCK_STREAM, 0), ok;

    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ok = bind(s, (struct sockaddr *)&a, sizeof a) == 0;
    close(s);
    return ok;
}

int
tools__bench_ports(int n)
{
    static unsigned seq;

    for (int attempt = 0; attempt < 200; attempt++) {
        int base = 21000 + (int)(((unsigned)getpid() * 40503u + seq++ * 613u) %
                                 28000u), ok = 1;
        for (int i = 0; i < n && ok; i++)
            ok = port_free(base + i);
        if (ok)
            return base;
    }
    tools__die("no free port range found");
    return -1;
}

int
tools__bench_tcp_connect(int port)
{
    struct sockaddr_in a = {0};
    int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;

    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(s, (struct sockaddr *)&a, sizeof a) != 0) {
        close(s);
        return -1;
    }
    setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return s;
}

void
tools__bench_wait_listen(pid_t pid, int port, const char *what,
                         const char *log)
{
    for (int i = 0; i < 6000; i++) {
        int s, st;

        if (waitpid(pid, &st, WNOHANG) == pid) {
            for (int k = 0; k < nkids; k++)
                if (kids[k] == pid)
                    kids[k] = kids[--nkids];
            tools__die("%s exited before listening%s%s", what,
                       log ? "; see " : "", log ? log : "");
        }
        if ((s = tools__bench_tcp_connect(port)) >= 0) {
            close(s);
            return;
        }
        usleep(10000);
    }
    tools__die("%s did not listen within 60 s", what);
}

pid_t
tools__bench_server(const char *cfg, int m, int port, const char *store,
                    const char *part_config, const char *const *extra)
{
    char mach[16], log[PATH_MAX + 32];
    char *argv[24];
    int n = 0;
    pid_t pid;

    snprintf(mach, sizeof mach, "%d", m);
    snprintf(log, sizeof log, "%s/server-%d-%d.log", tools__bench_dir, port, m);
    argv[n++] = server_path;
    if (part_config != NULL) {
        argv[n++] = "--part-config";
        argv[n++] = (char *)part_config;
        argv[n++] = "--part-id";
    } else {
        argv[n++] = "--store";
        argv[n++] = (char *)store;
        argv[n++] = "--machine";
    }
    argv[n++] = mach;
    argv[n++] = "--ip-config";
    argv[n++] = (char *)cfg;
    argv[n++] = "--threads";
    argv[n++] = "2";
    for (int i = 0; extra != NULL && extra[i] != NULL && n < 23; i++)
        argv[n++] = (char *)extra[i];
    argv[n] = NULL;
    pid = tools__bench_spawn(argv, log);
    tools__bench_wait_listen(pid, port, "gkv-server", log);
    return pid;
}

void
tools__bench_write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");

    if (f == NULL || fputs(text, f) < 0 || fclose(f) != 0)
        tools__die("%s: %s", path, strerror(errno));
}

gkv_client *
tools__bench_connect(const char *cfg)
{
    gkv_client_opts o = {0};
    gkv_client *c;
    gkv_err rc;

    o.timeout_ms = 120000;
    if ((rc = gkv_client_connect(&c, cfg, NULL, "bench", 0, &o)) != GKV_OK)
        tools__die("connect: %s: %s", gkv_strerror(rc), gkv_net_errmsg());
    return c;
}

/* ---- the sampling benchmarks' graph ------------------------------------- */

gkv_graph *
tools__bench_rmat_parts(int scale, unsigned part_flags, char *json, size_t len)
{
    gkv_rmat_spec sp = {0};
    gkv_part_spec ps = {0};
    char dir[PATH_MAX], msg[512];
    gkv_graph *g;
    gkv_err rc;

    sp.scale = scale;
    sp.edge_factor = 16;
    sp.seed = 1;
    if ((rc = gkv_rmat_graph(&g, &sp, 2)) != GKV_OK)
        tools__die("rmat: %s", gkv_strerror(rc));
    snprintf(dir, sizeof dir, "%s/g", tools__bench_dir);
    ps.name = "g";
    ps.method = GKV_PART_RANGE;
    ps.num_parts = 2;
    ps.nthreads = 2;
    ps.flags = part_flags;
    if ((rc = gkv_partition_write(g, &ps, dir, NULL, msg, sizeof msg)) !=
        GKV_OK)
        tools__die("partition: %s", msg);
    snprintf(json, len, "%s/g.json", dir);
    return g;
}

void
tools__bench_part_servers(const char *json, const char *cfg, pid_t pids[2])
{
    char text[128];
    int base = tools__bench_ports(16);

    snprintf(text, sizeof text, "127.0.0.1 %d\n127.0.0.1 %d\n", base, base + 8);
    tools__bench_write_file(cfg, text);
    pids[0] = tools__bench_server(cfg, 0, base, NULL, json, NULL);
    pids[1] = tools__bench_server(cfg, 1, base + 8, NULL, json, NULL);
}

int64_t *
tools__bench_perm(int64_t n, uint64_t *x)
{
    int64_t *perm = tools__xmalloc((size_t)n * sizeof *perm);

    for (int64_t i = 0; i < n; i++)
        perm[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)(tools__splitmix64(x) % (uint64_t)(i + 1));
        int64_t v = perm[i];
        perm[i] = perm[j];
        perm[j] = v;
    }
    return perm;
}
