/* gkv-launch - starts a gkv job: servers and trainers on the machines of an
 * ip_config, watched until the job ends.
 *
 *   gkv-launch --ip-config FILE (--part-config G.json | --store DIR)
 *              --num-servers S --num-trainers T [options] -- COMMAND...
 *
 * Per machine m of the ip_config: S gkv-server processes (server k on the
 * machine's port + k), then, once every server of the job accepts TCP
 * connections, T trainer processes running COMMAND (and K sampler
 * processes per trainer with --num-samplers K). Roles travel in GKV_*
 * environment variables (doc/DEPLOY.md lists them); every trainer and
 * sampler gets a (GKV_GROUP, GKV_RANK) of its own, the identity it joins
 * the servers with (samplers: group GROUP.sampler), and every server
 * --num-clients with their number.
 *
 * Local machines (an address of this host) get plain child processes, each
 * in a process group of its own; remote ones get
 *   ssh -o BatchMode=yes [-p P] [U@]HOST 'cd CWD; exec setsid -w sh -c
 *       '\''echo "@gkv-pgid $$"; exec "$0" "$@"'\'' env VAR=... CMD ARGS'
 * so the remote process runs in a session of its own whose id comes back as
 * the first line of its output; stopping it is `ssh HOST kill -TERM -- -PGID`
 * (then -KILL after the grace period).
 *
 * Under Slurm or an MPI launcher (one task per role, S + T x (1 + K) tasks
 * per node) the task takes its role from its local rank and execs it.
 *
 * Exit status: 0 the job succeeded, 1 it failed (or was stopped by a
 * signal), 2 bad usage or inputs (nothing was started).
 *
 * --ssh-cmd PROG replaces ssh (the tests give a script that runs the
 * remote command string with sh -c, standing in for a real host) and
 * --force-ssh treats every machine as remote.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <sys/random.h>
#include <unistd.h>

#include "gkv.h"
#include "gkv_net.h"
#include "util.h"

#define PROG "gkv-launch"

enum { EX_OK = 0, EX_FAIL = 1, EX_USAGE = 2 };
enum { R_SERVER, R_TRAINER, R_SAMPLER };

#define GRACE_S      5.0     /* SIGTERM -> SIGKILL */
#define SERVER_GONE_GRACE_S 10.0 /* trainers may finish after a server stops */
#define TAIL_LINES   20
#define MAX_SARGS    64
#define MAX_CLIENTS  65536   /* gkv-server --num-clients' bound (sessions) */
/* Samplers join the servers as GROUP.sampler: their ranks (trainer rank x K
 * + j) would otherwise be trainers' identities, and barriers count the
 * members of one group. */
#define SAMPLER_SUFFIX ".sampler"
#define GROUP_MAX_WITH_SAMPLERS \
    (GKV_NET_GROUP_MAX - (int)(sizeof SAMPLER_SUFFIX - 1))

static const char *const role_names[] = {"server", "trainer", "sampler"};

/* Every GKV_* variable this tool sets; inherited copies are dropped. */
static const char *const env_names[] = {
    "GKV_ROLE", "GKV_SERVER_ID", "GKV_MACHINE", "GKV_NUM_MACHINES",
    "GKV_IP_CONFIG", "GKV_PART_CONFIG", "GKV_STORE", "GKV_NUM_SERVERS",
    "GKV_NUM_TRAINERS", "GKV_NUM_SAMPLERS", "GKV_RANK", "GKV_LOCAL_RANK",
    "GKV_WORLD_SIZE", "GKV_GROUP", "GKV_TOKEN_FILE", "GKV_SERVER_NAME",
    "GKV_SAMPLER_ID", "GKV_TRAINER_RANK", "GKV_WORKSPACE", "GKV_JOB_INSTANCE",
    /* trainers: torch.distributed's env:// (as torchrun or DGL's launch
     * give them); dropped for the others, whose inherited copies (an outer
     * launcher's) would be wrong for them */
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
    "MASTER_PORT",
};
#define NENV (sizeof env_names / sizeof env_names[0])

struct proc {
    int role;
    unsigned machine;
    unsigned idx;           /* server k, trainer t, sampler t * K + j */
    unsigned rank;          /* servers: m * S + k; trainers: m * T + t;
                             * samplers: trank * K + j (in the sampler
                             * group: (group, rank) is a client's identity
                             * on the servers, so no two processes share
                             * one) */
    unsigned trank;         /* trainers and samplers: the trainer's rank
                             * m * T + t */
    int remote;
    pid_t pid;              /* the local child: the process or its ssh */
    int started, reaped, status;
    int stopping;           /* we sent it SIGTERM */
    long rpgid;             /* remote session id ("@gkv-pgid" line); 0 unknown */
    off_t log_off;          /* the log's size before this run's output: an
                             * earlier run's "@gkv-pgid" line above it */
    int ready;              /* servers: accepts connections */
    int reused;             /* servers: a persistent one already running */
    unsigned hs_lease_ms;   /* reused servers: their handshake's lease
                             * (--heartbeat-timeout), in ms */
    uint64_t hs_max_msg;    /* and message limit (--max-msg), in bytes */
    char name[64];          /* "server 0/1", "trainer rank 3", ... */
    char log[PATH_MAX + 160];  /* WORKSPACE/logs/ROLE-M-I.log */
};

struct job {
    /* options */
    const char *ip_config, *part_config, *store, *workspace, *server_name;
    const char *token_file, *ssh_user, *server_bin, *ssh_cmd, *group_opt;
    const char *cluster;
    unsigned S, T, K, ssh_port;
    int keep_alive, force_ssh, shutdown;
    double timeout_s;
    int timeout_given;          /* --timeout on the command line */
    const char *sargs[MAX_SARGS];
    int nsargs;
    char **cmd;
    int ncmd;
    /* derived */
    gkv_ipconfig *ipc;
    unsigned M;
    int *local;             /* per machine: 1 when this host */
    char ipc_abs[PATH_MAX], part_abs[PATH_MAX], store_abs[PATH_MAX];
    char tok_abs[PATH_MAX], cwd[PATH_MAX], ws[PATH_MAX + 64];
    char group[GKV_NET_GROUP_MAX + 1];
    char instance[160];             /* GKV_JOB_INSTANCE: this run's */
    char sgroup[GKV_NET_GROUP_MAX + 1];   /* the samplers' group */
    gkv_pbook *book;        /* --part-config's book; NULL with --store */
    char server_bin_buf[PATH_MAX + 16];
    struct proc *p;
    size_t np;
};

static volatile sig_atomic_t g_sig;

static void
on_signal(int sig)
{
    g_sig = sig;
}

/* ---- small helpers ----------------------------------------------------------- */

static double
now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void
sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

static void
say(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    fputs(PROG ": ", stdout);
    vfprintf(stdout, fmt, ap);
    fputc('\n', stdout);
    va_end(ap);
    fflush(stdout);
}

static void
err(const char *fmt, ...)
{
    va_list ap;

    fflush(stdout);
    va_start(ap, fmt);
    fputs(PROG ": ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static int
bad_usage(const char *fmt, ...)
{
    va_list ap;

    fflush(stdout);
    va_start(ap, fmt);
    fputs(PROG ": ", stderr);
    vfprintf(stderr, fmt, ap);
    fputs("\nTry '" PROG " --help'.\n", stderr);
    va_end(ap);
    return EX_USAGE;
}

static void *
xcalloc(size_t n, size_t sz)
{
    void *p = calloc(n ? n : 1, sz);

    if (p == NULL) {
        err("out of memory");
        exit(EX_FAIL);
    }
    return p;
}

static char *
xstrdup(const char *s)
{
    char *d = strdup(s);

    if (d == NULL) {
        err("out of memory");
        exit(EX_FAIL);
    }
    return d;
}

/* Decimal number in [lo, hi]; -1 when it is not one. */
static int
parse_num(const char *s, unsigned long lo, unsigned long hi, unsigned *out)
{
    char *end;
    unsigned long v;

    if (s == NULL || *s < '0' || *s > '9')
        return -1;
    errno = 0;
    v = strtoul(s, &end, 10);
    if (errno || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = (unsigned)v;
    return 0;
}

/* An absolute version of 'path' (made from the working directory; the file
 * need not exist). */
static void
absolute(const char *path, const char *cwd, char *out, size_t cap)
{
    char rp[PATH_MAX];

    if (realpath(path, rp) != NULL)
        snprintf(out, cap, "%s", rp);
    else if (path[0] == '/')
        snprintf(out, cap, "%s", path);
    else
        snprintf(out, cap, "%s/%s", cwd, path);
}

/* Appends 's' quoted for a POSIX shell ('...' with ' as '\''). */
static void
sq_append(char **buf, size_t *len, size_t *cap, const char *s)
{
    size_t need = *len + 4 * strlen(s) + 4;

    if (need > *cap) {
        *cap = need * 2;
        if ((*buf = realloc(*buf, *cap)) == NULL) {
            err("out of memory");
            exit(EX_FAIL);
        }
    }
    (*buf)[(*len)++] = '\'';
    for (; *s; s++) {
        if (*s == '\'') {
            memcpy(*buf + *len, "'\\''", 4);
            *len += 4;
        } else {
            (*buf)[(*len)++] = *s;
        }
    }
    (*buf)[(*len)++] = '\'';
    (*buf)[*len] = '\0';
}

static void
raw_append(char **buf, size_t *len, size_t *cap, const char *s)
{
    size_t n = strlen(s);

    if (*len + n + 1 > *cap) {
        *cap = (*len + n + 1) * 2;
        if ((*buf = realloc(*buf, *cap)) == NULL) {
            err("out of memory");
            exit(EX_FAIL);
        }
    }
    memcpy(*buf + *len, s, n + 1);
    *len += n;
}

/* ---- hosts and ports ------------------------------------------------------------ */

/* Whether 'host' names this host: 127.x, ::1, localhost, or an address of
 * one of its interfaces. */
static int
host_is_local(const char *host, struct ifaddrs *ifs)
{
    struct addrinfo hints, *res = NULL;
    int hit = 0;

    if (strncmp(host, "127.", 4) == 0 || strcmp(host, "::1") == 0 ||
        strcmp(host, "localhost") == 0)
        return 1;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host, NULL, &hints, &res) != 0)
        return 0;
    for (struct addrinfo *a = res; a != NULL && !hit; a = a->ai_next) {
        if (a->ai_family == AF_INET &&
            (ntohl(((struct sockaddr_in *)a->ai_addr)->sin_addr.s_addr) >> 24) == 127)
            hit = 1;
        for (struct ifaddrs *i = ifs; i != NULL && !hit; i = i->ifa_next) {
            if (i->ifa_addr == NULL || i->ifa_addr->sa_family != a->ai_family)
                continue;
            if (a->ai_family == AF_INET)
                hit = ((struct sockaddr_in *)a->ai_addr)->sin_addr.s_addr ==
                      ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr;
            else if (a->ai_family == AF_INET6)
                hit = memcmp(&((struct sockaddr_in6 *)a->ai_addr)->sin6_addr,
                             &((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr,
                             16) == 0;
        }
    }
    freeaddrinfo(res);
    return hit;
}

/* Whether 'host' is an address a server can listen on and clients can
 * reach: an IPv4 or IPv6 address, or a name that resolves to an IPv4
 * address (the servers resolve names to IPv4 only, see net/server.c). 0,
 * or -1 with why in 'why' (getaddrinfo's text). The ip_config format check
 * takes "127.0.0.300" as a host name; only this finds that it is none. */
static int
host_resolves(const char *host, char *why, size_t cap)
{
    struct addrinfo hints, *res = NULL;
    struct in_addr a4;
    struct in6_addr a6;
    int rc;

    if (inet_pton(AF_INET, host, &a4) == 1 || inet_pton(AF_INET6, host, &a6) == 1)
        return 0;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    rc = getaddrinfo(host, NULL, &hints, &res);
    if (rc == 0 && res != NULL) {
        freeaddrinfo(res);
        return 0;
    }
    if (res != NULL)
        freeaddrinfo(res);
    snprintf(why, cap, "%s", rc == EAI_SYSTEM ? strerror(errno) :
             rc != 0 ? gai_strerror(rc) : "no IPv4 address");
    return -1;
}

/* The store of machine m: --store with each '%m' replaced by m. */
static void
store_path(const struct job *j, unsigned m, char *out, size_t cap)
{
    size_t o = 0;

    for (const char *c = j->store_abs; *c && o + 12 < cap; c++) {
        if (c[0] == '%' && c[1] == 'm') {
            o += (size_t)snprintf(out + o, cap - o, "%u", m);
            c++;
        } else {
            out[o++] = *c;
        }
    }
    out[o] = '\0';
}

/* ---- environment ------------------------------------------------------------ */

/* The GKV_* values of process p (NENV strings "NAME=value", malloc'd). */
static char **
proc_env(const struct job *j, const struct proc *p)
{
    char **e = xcalloc(NENV + 1, sizeof *e);
    char v[NENV][PATH_MAX + 128], st[PATH_MAX];
    size_t n = 0;
    unsigned t = p->role == R_SERVER ? 0 :
                 p->role == R_TRAINER ? p->idx : p->idx / (j->K ? j->K : 1);

#define SET(...) snprintf(v[n++], sizeof v[0], __VA_ARGS__)
    SET("GKV_ROLE=%s", role_names[p->role]);
    SET("GKV_SERVER_ID=%u", p->role == R_SERVER ? p->idx : t % j->S);
    SET("GKV_MACHINE=%u", p->machine);
    SET("GKV_NUM_MACHINES=%u", j->M);
    SET("GKV_IP_CONFIG=%s", j->ipc_abs);
    SET("GKV_PART_CONFIG=%s", j->part_abs);
    store_path(j, p->machine, st, sizeof st);
    SET("GKV_STORE=%s", st);
    SET("GKV_NUM_SERVERS=%u", j->S);
    SET("GKV_NUM_TRAINERS=%u", j->T);
    SET("GKV_NUM_SAMPLERS=%u", j->K);
    SET("GKV_RANK=%u", p->rank);
    SET("GKV_LOCAL_RANK=%u", p->role == R_SERVER ? p->idx : t);
    SET("GKV_WORLD_SIZE=%u", j->M * j->T * (p->role == R_SAMPLER ? j->K : 1));
    SET("GKV_GROUP=%s", p->role == R_SAMPLER ? j->sgroup : j->group);
    SET("GKV_TOKEN_FILE=%s", j->tok_abs);
    SET("GKV_SERVER_NAME=%s", j->server_name ? j->server_name : "");
    if (p->role == R_SAMPLER) {
        SET("GKV_SAMPLER_ID=%u", p->idx % j->K);
        SET("GKV_TRAINER_RANK=%u", p->trank);
    }
    SET("GKV_WORKSPACE=%s", j->ws);
    SET("GKV_JOB_INSTANCE=%s", j->instance);
    if (p->role == R_TRAINER) {
        const char *mp = getenv("MASTER_PORT");

        SET("RANK=%u", p->rank);
        SET("LOCAL_RANK=%u", t);
        SET("WORLD_SIZE=%u", j->M * j->T);
        SET("LOCAL_WORLD_SIZE=%u", j->T);
        SET("MASTER_ADDR=%s", gkv_ipconfig_machine(j->ipc, 0)->host);
        SET("MASTER_PORT=%s", mp != NULL && *mp != '\0' ? mp : "29500");
    }
#undef SET
    for (size_t i = 0; i < n; i++)
        e[i] = xstrdup(v[i]);
    return e;
}

static void
strv_free(char **v)
{
    if (v == NULL)
        return;
    for (size_t i = 0; v[i] != NULL; i++)
        free(v[i]);
    free(v);
}

/* environ without the names of env_names, plus 'add'. */
static char **
merged_env(char **add)
{
    extern char **environ;
    size_t ne = 0, na = 0, n = 0;
    char **out;

    while (environ[ne] != NULL)
        ne++;
    while (add[na] != NULL)
        na++;
    out = xcalloc(ne + na + 1, sizeof *out);
    for (size_t i = 0; i < ne; i++) {
        int ours = 0;
        for (size_t k = 0; k < NENV && !ours; k++) {
            size_t l = strlen(env_names[k]);
            ours = strncmp(environ[i], env_names[k], l) == 0 &&
                   environ[i][l] == '=';
        }
        if (!ours)
            out[n++] = environ[i];
    }
    for (size_t i = 0; i < na; i++)
        out[n++] = add[i];
    return out;
}

/* ---- the command lines ----------------------------------------------------------- */

/* argv of server k of machine m (pointers into j, 'num', which holds the
 * formatted numbers, and 'st', the store path). */
static char **
server_argv(const struct job *j, const struct proc *p, char num[4][16],
            char *st, size_t st_cap)
{
    char **a = xcalloc(24 + (size_t)j->nsargs, sizeof *a);
    size_t n = 0;

    snprintf(num[0], 16, "%u", p->machine);
    snprintf(num[1], 16, "%u", p->idx);
    snprintf(num[2], 16, "%u", j->S);
    /* every trainer and sampler of the job is a client of every server: a
     * server without --keep-alive stops when its last client leaves only
     * once all of them have joined (one that connects late still finds
     * it) */
    snprintf(num[3], 16, "%llu",
             (unsigned long long)j->M * j->T * (1ull + j->K));
    a[n++] = (char *)j->server_bin;
    a[n++] = "--ip-config";
    a[n++] = (char *)j->ipc_abs;
    a[n++] = "--machine";
    a[n++] = num[0];
    a[n++] = "--server-id";
    a[n++] = num[1];
    a[n++] = "--num-servers";
    a[n++] = num[2];
    a[n++] = "--num-clients";
    a[n++] = num[3];
    if (j->part_config != NULL) {
        a[n++] = "--part-config";
        a[n++] = (char *)j->part_abs;
        a[n++] = "--part-id";
        a[n++] = num[0];
    } else {
        store_path(j, p->machine, st, st_cap);
        a[n++] = "--store";
        a[n++] = st;
    }
    if (j->token_file != NULL) {
        a[n++] = "--token-file";
        a[n++] = (char *)j->tok_abs;
    }
    if (j->keep_alive)
        a[n++] = "--keep-alive";
    if (j->server_name != NULL) {
        a[n++] = "--server-name";
        a[n++] = (char *)j->server_name;
    }
    for (int i = 0; i < j->nsargs; i++)
        a[n++] = (char *)j->sargs[i];
    a[n] = NULL;
    return a;
}

/* The string a remote shell runs for argv with environment env: a fresh
 * session whose id is printed first, then the program. */
static char *
remote_string(const struct job *j, char **env, char **argv)
{
    char *b = NULL;
    size_t len = 0, cap = 0;

    raw_append(&b, &len, &cap, "cd ");
    sq_append(&b, &len, &cap, j->cwd);
    raw_append(&b, &len, &cap, " 2>/dev/null; exec setsid -w sh -c ");
    sq_append(&b, &len, &cap, "echo \"@gkv-pgid $$\"; exec \"$0\" \"$@\"");
    raw_append(&b, &len, &cap, " env");
    for (size_t i = 0; env[i] != NULL; i++) {
        raw_append(&b, &len, &cap, " ");
        sq_append(&b, &len, &cap, env[i]);
    }
    for (size_t i = 0; argv[i] != NULL; i++) {
        raw_append(&b, &len, &cap, " ");
        sq_append(&b, &len, &cap, argv[i]);
    }
    return b;
}

/* ssh argv running 'remote' on machine m; strings borrowed, port in 'pbuf'. */
static char **
ssh_argv(const struct job *j, unsigned m, const char *remote, char *pbuf,
         char *dest, size_t dest_cap)
{
    char **a = xcalloc(10, sizeof *a);
    size_t n = 0;
    const char *host = gkv_ipconfig_machine(j->ipc, m)->host;

    if (j->ssh_user != NULL)
        snprintf(dest, dest_cap, "%s@%s", j->ssh_user, host);
    else
        snprintf(dest, dest_cap, "%s", host);
    a[n++] = (char *)(j->ssh_cmd ? j->ssh_cmd : "ssh");
    a[n++] = "-o";
    a[n++] = "BatchMode=yes";
    if (j->ssh_port != 0) {
        snprintf(pbuf, 16, "%u", j->ssh_port);
        a[n++] = "-p";
        a[n++] = pbuf;
    }
    a[n++] = dest;
    a[n++] = (char *)remote;
    a[n] = NULL;
    return a;
}

/* Forks argv (PATH lookup) in a process group of its own with envp, its
 * stdout and stderr appended to 'log' (NULL: /dev/null), stdin /dev/null.
 * Returns the pid, or -1 (errno). */
static pid_t
spawn(char **argv, char **envp, const char *log)
{
    int fd = open(log ? log : "/dev/null", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC,
                  0644);
    pid_t pid;

    if (fd < 0)
        return -1;
    pid = fork();
    if (pid == 0) {
        int dn = open("/dev/null", O_RDONLY);
        sigset_t none;

        setpgid(0, 0);
        signal(SIGPIPE, SIG_DFL);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGHUP, SIG_DFL);
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        dup2(dn, 0);
        dup2(fd, 1);
        dup2(fd, 2);
        execvpe(argv[0], argv, envp);
        fprintf(stderr, PROG ": cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    if (pid > 0)
        setpgid(pid, pid);       /* either side may win the race */
    close(fd);
    return pid;
}

/* ---- processes ---------------------------------------------------------------- */

static void
proc_name(const struct job *j, struct proc *p)
{
    if (p->role == R_SERVER)
        snprintf(p->name, sizeof p->name, "server %u/%u", p->machine, p->idx);
    else if (p->role == R_TRAINER)
        snprintf(p->name, sizeof p->name, "trainer rank %u", p->rank);
    else
        snprintf(p->name, sizeof p->name, "sampler %u of trainer rank %u",
                 p->idx % j->K, p->trank);
    snprintf(p->log, sizeof p->log, "%s/logs/%s-%u-%u.log", j->ws,
             role_names[p->role], p->machine, p->idx);
}

static int
proc_start(struct job *j, struct proc *p)
{
    char **genv = proc_env(j, p), **argv, **envp, num[4][16], st[PATH_MAX];
    char *remote = NULL, pbuf[16], dest[512];
    char **sargv = NULL;
    const gkv_machine *mc = gkv_ipconfig_machine(j->ipc, p->machine);

    argv = p->role == R_SERVER ? server_argv(j, p, num, st, sizeof st) : NULL;
    if (p->remote) {
        extern char **environ;
        remote = remote_string(j, genv, argv ? argv : j->cmd);
        struct stat sb;
        sargv = ssh_argv(j, p->machine, remote, pbuf, dest, sizeof dest);
        /* logs are appended to, run after run in one workspace */
        p->log_off = stat(p->log, &sb) == 0 ? sb.st_size : 0;
        p->pid = spawn(sargv, environ, p->log);
    } else {
        envp = merged_env(genv);
        p->pid = spawn(argv ? argv : j->cmd, envp, p->log);
        free(envp);
    }
    if (p->pid < 0) {
        err("cannot start %s: %s", p->name, strerror(errno));
    } else {
        p->started = 1;
        if (p->role == R_SERVER)
            say("started %s on %s:%u (%s pid %ld), log %s", p->name, mc->host,
                mc->port + p->idx, p->remote ? "ssh" : "local", (long)p->pid,
                p->log);
        else
            say("started %s on machine %u (%s pid %ld), log %s", p->name,
                p->machine, p->remote ? "ssh" : "local", (long)p->pid, p->log);
    }
    free(argv);
    free(sargv);
    free(remote);
    strv_free(genv);
    return p->pid < 0 ? -1 : 0;
}

/* Reads the remote session id from the "@gkv-pgid N" line this run's ssh
 * wrote to p's log (after p->log_off: the line of an earlier run in the
 * same workspace would send the kills to whatever has that number now). */
static void
proc_find_rpgid(struct proc *p)
{
    FILE *f;
    char line[256];

    if (!p->remote || p->rpgid > 0 || (f = fopen(p->log, "r")) == NULL)
        return;
    if (fseeko(f, p->log_off, SEEK_SET) != 0) {
        fclose(f);
        return;
    }
    for (int i = 0; i < 50 && fgets(line, sizeof line, f) != NULL; i++) {
        long v;
        if (sscanf(line, "@gkv-pgid %ld", &v) == 1 && v > 1) {
            p->rpgid = v;
            break;
        }
    }
    fclose(f);
}

static int
proc_live(const struct proc *p)
{
    return p->started && !p->reaped;
}

/* Sends sig to p's process group, and for a remote one to the remote
 * session through a fresh ssh (kept in 'killers' to be reaped). */
static void
proc_signal(struct job *j, struct proc *p, int sig, pid_t *killer)
{
    if (!proc_live(p))
        return;
    if (p->remote) {
        proc_find_rpgid(p);
        if (p->rpgid > 0) {
            char cmd[96], pbuf[16], dest[512], **a;
            extern char **environ;

            snprintf(cmd, sizeof cmd, "kill -%s -%ld",
                     sig == SIGKILL ? "KILL" : "TERM", p->rpgid);
            a = ssh_argv(j, p->machine, cmd, pbuf, dest, sizeof dest);
            *killer = spawn(a, environ, NULL);
            free(a);
        }
        /* the ssh client itself only on SIGKILL: its exit is how we learn
         * that the remote process ended */
        if (sig == SIGKILL || p->rpgid <= 0)
            kill(-p->pid, sig);
    } else {
        kill(-p->pid, sig);
    }
}

static void
describe_status(int st, char *b, size_t cap)
{
    if (WIFEXITED(st))
        snprintf(b, cap, "exit status %d", WEXITSTATUS(st));
    else if (WIFSIGNALED(st))
        snprintf(b, cap, "killed by signal %d (%s)", WTERMSIG(st),
                 strsignal(WTERMSIG(st)));
    else
        snprintf(b, cap, "status 0x%x", st);
}

static void
print_tail(const char *path)
{
    FILE *f = fopen(path, "r");
    char *buf = NULL;
    size_t cap = 0, len = 0, start;
    int lines = 0;

    fprintf(stderr, "---- last %d lines of %s ----\n", TAIL_LINES, path);
    if (f == NULL) {
        fprintf(stderr, "(cannot read it: %s)\n", strerror(errno));
        return;
    }
    for (;;) {
        if (len + 65536 > cap) {
            char *nb = realloc(buf, (len + 65536) * 2);
            if (nb == NULL) {
                free(buf);
                fclose(f);
                return;
            }
            buf = nb;
            cap = (len + 65536) * 2;
        }
        size_t r = fread(buf + len, 1, cap - len - 1, f);
        if (r == 0)
            break;
        len += r;
    }
    fclose(f);
    if (buf == NULL)
        return;
    buf[len] = '\0';
    start = len;
    if (start > 0 && buf[start - 1] == '\n')
        start--;
    while (start > 0) {
        if (buf[start - 1] == '\n' && ++lines == TAIL_LINES)
            break;
        start--;
    }
    fputs(buf + start, stderr);
    if (len > 0 && buf[len - 1] != '\n')
        fputc('\n', stderr);
    fprintf(stderr, "---- end of %s ----\n", path);
    free(buf);
}

/* Reaps exited children; returns the first process that failed (exited
 * non-zero or by a signal we did not send), or NULL. */
static struct proc *
reap(struct job *j)
{
    struct proc *bad = NULL;
    int st;
    pid_t pid;

    while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
        for (size_t i = 0; i < j->np; i++) {
            struct proc *p = &j->p[i];
            char how[96];

            if (p->pid != pid || !proc_live(p))
                continue;
            p->reaped = 1;
            p->status = st;
            describe_status(st, how, sizeof how);
            say("%s exited: %s%s", p->name, how,
                p->stopping ? " (stopped by us)" : "");
            if (!p->remote)
                kill(-p->pid, SIGTERM);   /* what it left in its group */
            if (!p->stopping && st != 0 && bad == NULL)
                bad = p;
        }
    }
    return bad;
}

static size_t
count_live(const struct job *j, int role)
{
    size_t n = 0;

    for (size_t i = 0; i < j->np; i++)
        if (proc_live(&j->p[i]) && (role < 0 || j->p[i].role == role))
            n++;
    return n;
}

/* Servers of the job found running (persistent ones reused). */
static size_t
nreused(const struct job *j)
{
    size_t n = 0;

    for (size_t i = 0; i < j->np; i++)
        n += j->p[i].role == R_SERVER && j->p[i].reused;
    return n;
}

/* Stops 'role' processes (-1: all we started): SIGTERM, then SIGKILL after
 * GRACE_S. Returns the number that had to be killed. */
static int
stop_procs(struct job *j, int role)
{
    pid_t *killers = xcalloc(2 * j->np + 1, sizeof *killers);
    size_t nk = 0;
    double end;
    int killed = 0, any = 0;

    for (size_t i = 0; i < j->np; i++) {
        struct proc *p = &j->p[i];
        if (proc_live(p) && (role < 0 || p->role == role)) {
            p->stopping = 1;
            proc_signal(j, p, SIGTERM, &killers[nk]);
            if (killers[nk] > 0)
                nk++;
            any = 1;
        }
    }
    end = now_s() + GRACE_S;
    while (any && now_s() < end) {
        reap(j);
        any = 0;
        for (size_t i = 0; i < j->np; i++)
            if (proc_live(&j->p[i]) && (role < 0 || j->p[i].role == role))
                any = 1;
        if (any)
            sleep_ms(20);
    }
    for (size_t i = 0; i < j->np; i++) {
        struct proc *p = &j->p[i];
        if (proc_live(p) && (role < 0 || p->role == role)) {
            say("%s did not stop within %.0f s: SIGKILL", p->name, GRACE_S);
            proc_signal(j, p, SIGKILL, &killers[nk]);
            if (killers[nk] > 0)
                nk++;
            killed++;
        }
    }
    end = now_s() + GRACE_S;
    while (count_live(j, role) > 0 && now_s() < end) {
        reap(j);
        sleep_ms(20);
    }
    /* the helper ssh processes that sent remote kills */
    for (size_t i = 0; i < nk; i++) {
        int st;
        double e2 = now_s() + 2;
        while (waitpid(killers[i], &st, WNOHANG) == 0 && now_s() < e2)
            sleep_ms(20);
        if (waitpid(killers[i], &st, WNOHANG) == 0) {
            kill(-killers[i], SIGKILL);
            waitpid(killers[i], &st, 0);
        }
    }
    free(killers);
    return killed;
}

/* ---- keep-alive servers -------------------------------------------------------- */

/* Reads the job's token into buf (GKV_TOKEN_MAX + 1 bytes). 0, or -1 after
 * saying why: the net/ message names the file and the problem ("token
 * file F: mode 0644 lets group or others ... chmod 600"), so it is printed
 * without gkv_strerror()'s text, which for a missing file would be GKV_ENOENT's
 * "no store at that path". */
static int
load_token(const struct job *j, char *buf, size_t cap)
{
    gkv_err rc = gkv_token_load(j->tok_abs, buf, cap);

    if (rc == GKV_OK)
        return 0;
    if (rc == GKV_ENOENT)
        err("--token-file %s: the token file does not exist (make one: "
            "umask 077; head -c 32 /dev/urandom | base64 > FILE)", j->tok_abs);
    else
        err("--token-file: %s", gkv_net_errmsg());
    return -1;
}

/* "host:port" of server k of machine m ("[v6]:port" for an IPv6 address),
 * as gkv_client_connect_addr() takes it. */
static void
server_addr(const struct job *j, unsigned m, unsigned k, char *out, size_t cap)
{
    const gkv_machine *mc = gkv_ipconfig_machine(j->ipc, m);

    if (strchr(mc->host, ':') != NULL)
        snprintf(out, cap, "[%s]:%u", mc->host, mc->port + k);
    else
        snprintf(out, cap, "%s:%u", mc->host, mc->port + k);
}

/* gkv_net_errmsg() without the client's own label of the server it talked
 * to: a client of one address (gkv_client_connect_addr) calls every server
 * "ADDR (machine 0, server 0)", whichever it is, so the callers here name
 * it from the ip_config instead. */
static const char *
net_detail(const char *addr)
{
    const char *m = gkv_net_errmsg(), *p;
    size_t n = strlen(addr);

    if (strncmp(m, "server ", 7) == 0 && strncmp(m + 7, addr, n) == 0 &&
        strncmp(m + 7 + n, " (machine ", 10) == 0 &&
        (p = strstr(m + 7 + n, "): ")) != NULL)
        return p + 3;
    return m;
}

/* Server k of machine m as the ip_config places it, for messages:
 * "server 1/0 (machine 1, server 0, 10.0.0.6:30050, ip.txt line 2)". */
static void
server_label(const struct job *j, unsigned m, unsigned k, char *out,
             size_t cap)
{
    char addr[300];

    server_addr(j, m, k, addr, sizeof addr);
    snprintf(out, cap, "server %u/%u (machine %u, server %u, %s, %s line %u)",
             m, k, m, k, addr, j->ip_config,
             gkv_ipconfig_machine(j->ipc, m)->line);
}

/* The store this launch serves on machine m, as a server reports it in its
 * handshake (the realpath, when it resolves here): partition m's store
 * with --part-config, else --store with '%m' replaced. */
static void
expected_store(const struct job *j, unsigned m, char *out, size_t cap)
{
    char path[PATH_MAX], rp[PATH_MAX];

    if (j->book != NULL)
        snprintf(path, sizeof path, "%s", gkv_pbook_part_path(j->book, (int)m));
    else
        store_path(j, m, path, sizeof path);
    snprintf(out, cap, "%s", realpath(path, rp) != NULL ? rp : path);
}

/* Checks with a handshake, one server at a time, that every server of the
 * job found running (p->reused) is a persistent gkv server named
 * j->server_name, in its place (machine m, server k of S per machine), and
 * serving the store this launch would serve there. Runs before anything is
 * started. EX_OK when so; EX_FAIL when a port is held by anything else;
 * EX_USAGE when the persistent servers serve another store (another graph,
 * another --store) than this launch's inputs say. Says why. */
static int
check_reused(struct job *j)
{
    char token[GKV_TOKEN_MAX + 1], group[GKV_NET_GROUP_MAX + 1];
    gkv_client_opts o;
    int held = 0, other_store = 0;

    if (j->token_file != NULL && load_token(j, token, sizeof token) != 0)
        return EX_USAGE;
    memset(&o, 0, sizeof o);
    o.timeout_ms = 3000;
    o.flags = GKV_CLIENT_NO_HEARTBEAT | GKV_CLIENT_OBSERVER;
    snprintf(group, sizeof group, "gkv-launch-probe-%ld", (long)getpid());
    for (size_t i = 0; i < j->np; i++) {
        struct proc *p = &j->p[i];
        char addr[300], want[PATH_MAX];
        gkv_client *c = NULL;
        gkv_server_info in;
        gkv_err rc;

        if (p->role != R_SERVER || !p->reused)
            continue;
        server_addr(j, p->machine, p->idx, addr, sizeof addr);
        rc = gkv_client_connect_addr(&c, addr, j->token_file ? token : NULL,
                                     group, 0, &o);
        if (rc == GKV_OK)
            rc = gkv_client_server_info(c, 0, &in);
        if (rc != GKV_OK) {
            err("port %s is held by something that is not a gkv server of "
                "this job (%s: %s)", addr, gkv_strerror(rc), net_detail(addr));
            gkv_client_close(c);
            held = 1;
            continue;
        }
        gkv_client_close(c);
        p->hs_lease_ms = in.lease_ms;
        p->hs_max_msg = in.max_msg;
        if (strcmp(in.name, j->server_name) != 0 || !in.keep_alive ||
            in.num_servers != j->S) {
            err("port %s is held by gkv server '%s' (pid %u, %u servers per "
                "machine, keep-alive %s), not persistent server '%s' with %u "
                "servers per machine", addr, in.name, (unsigned)in.pid,
                in.num_servers, in.keep_alive ? "on" : "off", j->server_name,
                j->S);
            held = 1;
            continue;
        }
        if (in.machine != p->machine || in.server_id != p->idx) {
            err("port %s is held by persistent server '%s' %u/%u (pid %u), "
                "but %s makes it server %u/%u (a reordered ip_config?)", addr,
                in.name, in.machine, in.server_id, (unsigned)in.pid,
                j->ip_config, p->machine, p->idx);
            held = 1;
            continue;
        }
        expected_store(j, p->machine, want, sizeof want);
        if (strcmp(in.store, want) != 0) {
            err("persistent server '%s' at %s (pid %u) serves the store %s, "
                "but this launch serves %s on machine %u (%s %s): stop the "
                "servers first (" PROG " --ip-config %s --num-servers %u%s%s "
                "--shutdown) or give other ports and another --server-name",
                in.name, addr, (unsigned)in.pid, in.store, want, p->machine,
                j->book != NULL ? "--part-config" : "--store",
                j->book != NULL ? j->part_abs : j->store_abs, j->ipc_abs, j->S,
                j->token_file != NULL ? " --token-file " : "",
                j->token_file != NULL ? j->tok_abs : "");
            other_store = 1;
        }
    }
    memset(token, 0, sizeof token);
    return held ? EX_FAIL : other_store ? EX_USAGE : EX_OK;
}

/* ---- cluster mode (Slurm, MPI) ----------------------------------------------------- */

static const char *
env_get(const char *name)
{
    const char *v = getenv(name);

    return v != NULL && *v != '\0' ? v : NULL;
}

static int
env_num(const char *name, unsigned *out)
{
    const char *v = env_get(name);

    return v != NULL && parse_num(v, 0, 1ul << 30, out) == 0;
}

/* The samplers' group, GROUP.sampler (only with samplers). 0, or -1 after
 * saying that the group name leaves no room for it. */
static int
make_sampler_group(struct job *j)
{
    j->sgroup[0] = '\0';
    if (j->K == 0)
        return 0;
    if (strlen(j->group) > GROUP_MAX_WITH_SAMPLERS) {
        err("group name '%s' is %zu characters, but the samplers join as "
            "group '%s" SAMPLER_SUFFIX "', which must fit in %d: give "
            "--group NAME of at most %d characters", j->group,
            strlen(j->group), j->group, GKV_NET_GROUP_MAX,
            GROUP_MAX_WITH_SAMPLERS);
        return -1;
    }
    snprintf(j->sgroup, sizeof j->sgroup, "%s" SAMPLER_SUFFIX, j->group);
    return 0;
}

/* Waits until every server of the job accepts connections (or the
 * deadline, or a signal). 0 when they all do. */
static int
wait_all_ports(struct job *j)
{
    double end = now_s() + j->timeout_s;

    for (unsigned m = 0; m < j->M; m++) {
        const gkv_machine *mc = gkv_ipconfig_machine(j->ipc, m);
        for (unsigned k = 0; k < j->S; k++)
            while (!tools__port_accepts(mc->host, mc->port + k, 200)) {
                if (g_sig) {
                    err("stopped by signal %d while waiting for servers", (int)g_sig);
                    return -1;
                }
                if (now_s() > end) {
                    err("server %u/%u (%s:%u) did not accept connections "
                        "within %.0f s", m, k, mc->host, mc->port + k,
                        j->timeout_s);
                    return -1;
                }
                sleep_ms(50);
            }
    }
    return 0;
}

/* Whether Slurm's tasks-per-node list ("3(x2)", "4,2", "3(x2),3") gives
 * every node n tasks. */
static int
tasks_per_node_is(const char *v, unsigned n)
{
    while (*v != '\0') {
        char *end;
        unsigned long k = strtoul(v, &end, 10);

        if (end == v || k != n)
            return 0;
        v = end;
        if (strncmp(v, "(x", 2) == 0) {
            strtoul(v + 2, &end, 10);
            if (end == v + 2 || *end != ')')
                return 0;
            v = end + 1;
        }
        if (*v == ',')
            v++;
        else if (*v != '\0')
            return 0;
    }
    return 1;
}

/* Whether every machine of the ip_config is a loopback address. */
static int
all_loopback(const struct job *j)
{
    for (unsigned m = 0; m < j->M; m++) {
        const char *h = gkv_ipconfig_machine(j->ipc, m)->host;

        if (strncmp(h, "127.", 4) != 0 && strcmp(h, "::1") != 0 &&
            strcmp(h, "[::1]") != 0 && strcmp(h, "localhost") != 0)
            return 0;
    }
    return 1;
}

/* Whether PMI_RANK/PMI_SIZE are the srun step's own task numbers (srun
 * --mpi=pmi2 sets both), not those of an mpirun whose proxies srun
 * started. */
static int
pmi_is_slurms(void)
{
    unsigned pr, ps, sr, sn;

    return env_get("SLURM_STEP_ID") != NULL &&
           env_num("PMI_RANK", &pr) && env_num("PMI_SIZE", &ps) &&
           env_num("SLURM_PROCID", &sr) && env_num("SLURM_NTASKS", &sn) &&
           pr == sr && ps == sn;
}

/* Runs this task's one role when started by Slurm or MPI. Returns an exit
 * status, or -1 when no cluster launcher is detected. */
static int
cluster_task(struct job *j)
{
    unsigned L = j->S + j->T * (1 + j->K), rank = 0, size = 0, node, local;
    unsigned nnodes = 0;
    const char *kind = NULL, *mode = j->cluster ? j->cluster : "auto";
    struct proc p;
    char **genv, **envp, **argv, num[4][16], st[PATH_MAX];
    struct ifaddrs *ifs = NULL;
    int is_local;

    if (strcmp(mode, "none") == 0)
        return -1;
    /* Open MPI's launcher first: ranks that mpirun starts inside a Slurm
     * allocation inherit its daemons' SLURM_* too. Slurm only inside an
     * srun step (SLURM_STEP_ID): the batch script of sbatch -N2
     * --ntasks-per-node=3 has SLURM_PROCID 0 and SLURM_NTASKS 6 as well,
     * and gkv-launch run there launches over ssh */
    if (strcmp(mode, "mpi") == 0 || (strcmp(mode, "auto") == 0 &&
        env_get("OMPI_COMM_WORLD_RANK")))
        kind = "mpi";
    else if (strcmp(mode, "auto") == 0 && env_get("PMI_RANK") &&
             !pmi_is_slurms())
        kind = "mpi";       /* MPICH/Intel MPI's mpirun, its proxies
                             * started by srun: their SLURM_* count nodes */
    else if (strcmp(mode, "slurm") == 0 || (strcmp(mode, "auto") == 0 &&
             env_get("SLURM_PROCID") && env_get("SLURM_STEP_ID") &&
             env_num("SLURM_NTASKS", &size) && size > 1))
        kind = "slurm";
    else if (strcmp(mode, "auto") == 0 && env_get("PMI_RANK"))
        kind = "mpi";
    if (kind == NULL)
        return -1;
    if (j->keep_alive) {
        err("%s: --keep-alive does not go with a cluster launcher: the "
            "server tasks would never end, so the step would not either; "
            "start persistent servers in a step of their own, or launch "
            "over ssh (--cluster none)", kind);
        return EX_USAGE;
    }
    if (strcmp(kind, "slurm") == 0) {
        static const char *const need[4] = {"SLURM_PROCID", "SLURM_NTASKS",
                                             "SLURM_NODEID", "SLURM_LOCALID"};
        unsigned *dst[4] = {&rank, &size, &node, &local};
        const char *tpn;

        for (int i = 0; i < 4; i++)
            if (!env_num(need[i], dst[i])) {
                if (env_get(need[i]) != NULL)
                    err("Slurm: %s='%s' is not a number", need[i],
                        env_get(need[i]));
                else
                    err("Slurm: SLURM_PROCID, SLURM_NTASKS, SLURM_NODEID and "
                        "SLURM_LOCALID must all be set (run under srun); %s "
                        "is not", need[i]);
                return EX_USAGE;
            }
        /* the step's tasks per node, the same in every task: a layout
         * that does not fit is refused by all of them, not only by the
         * task past the end (the others would start and wait) */
        if ((tpn = env_get("SLURM_STEP_TASKS_PER_NODE")) != NULL &&
            !tasks_per_node_is(tpn, L)) {
            err("Slurm: the step places tasks %s per node "
                "(SLURM_STEP_TASKS_PER_NODE), but this job needs %u on every "
                "node (S + T x (1 + K) = %u + %u x (1 + %u)): srun "
                "--ntasks-per-node=%u", tpn, L, j->S, j->T, j->K, L);
            return EX_USAGE;
        }
    } else {
        unsigned lr;
        int has_lr = env_num("OMPI_COMM_WORLD_LOCAL_RANK", &lr) ||
                     env_num("MPI_LOCALRANKID", &lr);

        if (!((env_num("OMPI_COMM_WORLD_RANK", &rank) &&
               env_num("OMPI_COMM_WORLD_SIZE", &size)) ||
              (env_num("PMI_RANK", &rank) && env_num("PMI_SIZE", &size)))) {
            err("MPI: need OMPI_COMM_WORLD_RANK and OMPI_COMM_WORLD_SIZE, or "
                "PMI_RANK and PMI_SIZE");
            return EX_USAGE;
        }
        node = rank / L;
        local = rank % L;
        if (has_lr && lr != local) {
            err("MPI: rank %u has local rank %u, but the layout needs ranks "
                "placed in blocks of %u per node (S + T x (1 + K) = %u + %u x "
                "(1 + %u)), so local rank %u (e.g. mpirun --map-by "
                "ppr:%u:node)", rank, lr, L, j->S, j->T, j->K, local, L);
            return EX_USAGE;
        }
    }
    if (size != j->M * L || node >= j->M || local >= L) {
        err("%s layout does not match the job: %u tasks (this one on node %u, "
            "local rank %u), but %u machines in %s x (%u servers + %u trainers "
            "x (1 + %u samplers)) need %u tasks, %u per node (use --cluster "
            "none to launch over ssh instead)", kind, size, node, local, j->M,
            j->ip_config, j->S, j->T, j->K, j->M * L, L);
        return EX_USAGE;
    }
    if (strcmp(kind, "slurm") == 0 && env_num("SLURM_NNODES", &nnodes) &&
        nnodes != j->M) {
        err("Slurm: %u nodes, but %s lists %u machines", nnodes, j->ip_config,
            j->M);
        return EX_USAGE;
    }
    if (strcmp(kind, "slurm") == 0 && nnodes > 1 && all_loopback(j)) {
        /* every node would take itself for every machine: the ordering
         * check below cannot tell, and other nodes' trainers time out */
        err("Slurm: %u nodes, but every machine of %s is a loopback "
            "address: list the nodes' addresses, in node order (scontrol "
            "show hostnames \"$SLURM_JOB_NODELIST\")", nnodes, j->ip_config);
        return EX_USAGE;
    }
    if (getifaddrs(&ifs) == 0) {
        is_local = host_is_local(gkv_ipconfig_machine(j->ipc, node)->host, ifs);
        freeifaddrs(ifs);
        if (!is_local) {
            err("%s node %u runs machine %u of %s (line %u: %s), but that "
                "address is not one of this host's: order the ip_config like "
                "the nodes", kind, node, node, j->ip_config,
                gkv_ipconfig_machine(j->ipc, node)->line,
                gkv_ipconfig_machine(j->ipc, node)->host);
            return EX_USAGE;
        }
    }
    if (j->group_opt == NULL) {
        const char *ns;
        int len;
        if (strcmp(kind, "slurm") == 0)
            len = snprintf(j->group, sizeof j->group, "slurm-%s-%s",
                           env_get("SLURM_JOB_ID") ? env_get("SLURM_JOB_ID") : "0",
                           env_get("SLURM_STEP_ID") ? env_get("SLURM_STEP_ID") : "0");
        else if ((ns = env_get("PMIX_NAMESPACE")) != NULL ||
                 (ns = env_get("OMPI_MCA_ess_base_jobid")) != NULL)
            len = snprintf(j->group, sizeof j->group, "mpi-%s", ns);
        else {
            err("MPI: cannot derive a group name shared by all tasks (no "
                "PMIX_NAMESPACE): give --group NAME");
            return EX_USAGE;
        }
        if (len < 0 || (size_t)len >= sizeof j->group) {
            err("%s: the group name derived from the job's variables is "
                "longer than %d characters: give --group NAME", kind,
                GKV_NET_GROUP_MAX);
            return EX_USAGE;
        }
    }
    if (make_sampler_group(j) != 0)
        return EX_USAGE;
    /* every task of this run, and only of this run, says the same: a
     * requeued Slurm job counts its restarts */
    if (strcmp(kind, "slurm") == 0) {
        snprintf(j->instance, sizeof j->instance, "slurm-%.40s.%.20s.%.20s",
                 env_get("SLURM_JOB_ID") ? env_get("SLURM_JOB_ID") : "0",
                 env_get("SLURM_STEP_ID") ? env_get("SLURM_STEP_ID") : "0",
                 env_get("SLURM_RESTART_COUNT") ?
                 env_get("SLURM_RESTART_COUNT") : "0");
    } else {
        const char *ns = env_get("PMIX_NAMESPACE");
        if (ns == NULL)
            ns = env_get("OMPI_MCA_ess_base_jobid");
        /* none shared by all tasks: no instance (as before it) */
        snprintf(j->instance, sizeof j->instance, "%s%.140s", ns ? "mpi-" : "",
                 ns ? ns : "");
    }
    memset(&p, 0, sizeof p);
    p.machine = node;
    if (local < j->S) {
        p.role = R_SERVER;
        p.idx = local;
        p.rank = node * j->S + local;
    } else if (local < j->S + j->T) {
        p.role = R_TRAINER;
        p.idx = local - j->S;
        p.rank = p.trank = node * j->T + p.idx;
    } else {
        p.role = R_SAMPLER;
        p.idx = local - j->S - j->T;
        p.trank = node * j->T + p.idx / j->K;
        p.rank = p.trank * j->K + p.idx % j->K;
    }
    proc_name(j, &p);
    genv = proc_env(j, &p);
    envp = merged_env(genv);
    argv = p.role == R_SERVER ? server_argv(j, &p, num, st, sizeof st) : j->cmd;
    say("%s task %u of %u: %s on machine %u", kind, rank, size, p.name, node);
    if (p.role != R_SERVER && wait_all_ports(j) != 0)
        return EX_FAIL;
    signal(SIGPIPE, SIG_DFL);          /* ignored here, not in what runs */
    execvpe(argv[0], argv, envp);
    err("cannot run %s: %s", argv[0], strerror(errno));
    return 127;
}

/* ---- options ------------------------------------------------------------------ */

static void
usage(FILE *f)
{
    fputs(
"Usage: gkv-launch --ip-config FILE (--part-config G.json | --store DIR)\n"
"                  --num-servers S --num-trainers T [options] -- COMMAND...\n"
"       gkv-launch --ip-config FILE --num-servers S --shutdown [--token-file F]\n"
"\n"
"Starts S gkv-server processes and T trainer processes running COMMAND on\n"
"every machine of the ip_config (ssh for remote hosts, local processes for\n"
"this host), waits until every server accepts connections before starting\n"
"the trainers, and watches them all: when one fails, all others are\n"
"stopped on every host, the failed one is named with its exit status and\n"
"the end of its log, and the exit status is 1. When every trainer exits 0\n"
"the servers are stopped (kept with --keep-alive) and the exit status is 0.\n"
"Roles and settings reach every process in GKV_* environment variables\n"
"(doc/DEPLOY.md); every trainer and sampler has a (GKV_GROUP, GKV_RANK) of\n"
"its own to connect with (samplers: group GROUP.sampler). Under srun or\n"
"mpirun each task runs one role instead.\n"
"\n"
"Options:\n"
"  --ip-config FILE       the job's machines, one \"IP [PORT]\" per line\n"
"  --part-config G.json   serve partition m of G.json on machine m\n"
"  --store DIR            serve the store DIR (a '%m' in DIR becomes the\n"
"                         machine index)\n"
"  --num-servers S        servers per machine (>= 1)\n"
"  --num-trainers T       trainer processes per machine (>= 1)\n"
"  --num-samplers K       sampler processes per trainer (default 0); they\n"
"                         join as group GROUP.sampler, rank trainer rank x K\n"
"                         + j (GKV_TRAINER_RANK names the trainer)\n"
"  --workspace DIR        logs go to DIR/logs (default ./gkv-launch-PID, or\n"
"                         $TMPDIR/gkv-launch-PID when . is not writable)\n"
"  --keep-alive           leave the servers running after the job, also when\n"
"                         it fails (unless the servers failed); needs\n"
"                         --server-name\n"
"  --server-name N        the persistent servers' name: a later launch with\n"
"                         the same name reuses running servers when they\n"
"                         serve the same store or partition\n"
"  --group NAME           the job's group name (default job-HOST-PID; at\n"
"                         most 63 characters, 55 with samplers)\n"
"  --token-file F         the job's secret (mode 0600), passed to all\n"
"  --ssh-user U           ssh as user U\n"
"  --ssh-port P           ssh port P\n"
"  --ssh-cmd PROG         run PROG instead of ssh, with ssh's arguments\n"
"                         (-o BatchMode=yes [-p P] [U@]HOST COMMAND)\n"
"  --force-ssh            start local machines' processes through ssh too\n"
"  --server-bin PATH      the gkv-server program (default: the one next to\n"
"                         gkv-launch, else gkv-server on PATH)\n"
"  --server-arg ARG       one more argument for every server (repeatable;\n"
"                         not applied to persistent servers a launch reuses:\n"
"                         it says so)\n"
"  --timeout SEC          how long servers may take to accept connections\n"
"                         (default 60); with --shutdown, how long each\n"
"                         server may take to answer (default 5)\n"
"  --cluster MODE         auto (default), slurm, mpi or none: how to read\n"
"                         Slurm or MPI task variables\n"
"  --shutdown             stop the running servers of the ip_config\n"
"                         (persistent ones too), each one that answers;\n"
"                         exit 1 if any did not\n"
"  -h, --help             print this help and exit\n"
"  -V, --version          print the version and exit\n"
"\n"
"Exit status: 0 the job succeeded, 1 it failed or was stopped, 2 bad usage\n"
"or inputs (nothing was started): among them a --part-config whose\n"
"partition count is not the number of machines, and persistent servers\n"
"that serve another store than this launch's.\n", f);
}

enum {
    O_IPC, O_PART, O_STORE, O_NS, O_NT, O_NK, O_WS, O_KEEP, O_NAME, O_GROUP,
    O_TOKEN, O_SUSER, O_SPORT, O_SBIN, O_SARG, O_TIMEOUT, O_CLUSTER,
    O_SHUTDOWN, O_SSHCMD, O_FORCESSH, NOPT
};

static const struct { const char *name; int arg; } optdefs[NOPT] = {
    [O_IPC] = {"--ip-config", 1},     [O_PART] = {"--part-config", 1},
    [O_STORE] = {"--store", 1},       [O_NS] = {"--num-servers", 1},
    [O_NT] = {"--num-trainers", 1},   [O_NK] = {"--num-samplers", 1},
    [O_WS] = {"--workspace", 1},      [O_KEEP] = {"--keep-alive", 0},
    [O_NAME] = {"--server-name", 1},  [O_GROUP] = {"--group", 1},
    [O_TOKEN] = {"--token-file", 1},  [O_SUSER] = {"--ssh-user", 1},
    [O_SPORT] = {"--ssh-port", 1},    [O_SBIN] = {"--server-bin", 1},
    [O_SARG] = {"--server-arg", 1},   [O_TIMEOUT] = {"--timeout", 1},
    [O_CLUSTER] = {"--cluster", 1},   [O_SHUTDOWN] = {"--shutdown", 0},
    [O_SSHCMD] = {"--ssh-cmd", 1},    [O_FORCESSH] = {"--force-ssh", 0},
};

/* Parses argv into j; EX_OK, or an exit status to return (help, usage). */
static int
parse_args(struct job *j, int argc, char **argv, int *done)
{
    int have_s = 0, have_t = 0;
    unsigned v;

    *done = 0;
    j->timeout_s = 60;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = NULL, *eq;
        char name[64];
        int o;

        if (strcmp(a, "--") == 0) {
            j->cmd = argv + i + 1;
            j->ncmd = argc - i - 1;
            break;
        }
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            *done = 1;
            return EX_OK;
        }
        if (strcmp(a, "-V") == 0 || strcmp(a, "--version") == 0) {
            printf(PROG " %s (protocol %d)\n", GKV_VERSION_STRING, GKV_NET_PROTO);
            *done = 1;
            return EX_OK;
        }
        if (strncmp(a, "--", 2) != 0)
            return bad_usage("unexpected argument '%s' (the command to run "
                             "goes after '--')", a);
        eq = strchr(a, '=');
        snprintf(name, sizeof name, "%.*s", eq ? (int)(eq - a) : (int)strlen(a), a);
        for (o = 0; o < NOPT; o++)
            if (strcmp(name, optdefs[o].name) == 0)
                break;
        if (o == NOPT)
            return bad_usage("unknown option '%s'", name);
        if (optdefs[o].arg) {
            if (eq != NULL)
                val = eq + 1;
            else if (i + 1 < argc)
                val = argv[++i];
            else
                return bad_usage("option '%s' needs a value", name);
            if (*val == '\0' && o != O_SARG)
                return bad_usage("option '%s' needs a non-empty value", name);
        } else if (eq != NULL) {
            return bad_usage("option '%s' takes no value", name);
        }
        switch (o) {
        case O_IPC: j->ip_config = val; break;
        case O_PART: j->part_config = val; break;
        case O_STORE: j->store = val; break;
        case O_WS: j->workspace = val; break;
        case O_KEEP: j->keep_alive = 1; break;
        case O_NAME: j->server_name = val; break;
        case O_GROUP: j->group_opt = val; break;
        case O_TOKEN: j->token_file = val; break;
        case O_SUSER: j->ssh_user = val; break;
        case O_SBIN: j->server_bin = val; break;
        case O_SSHCMD: j->ssh_cmd = val; break;
        case O_FORCESSH: j->force_ssh = 1; break;
        case O_SHUTDOWN: j->shutdown = 1; break;
        case O_CLUSTER:
            if (strcmp(val, "auto") && strcmp(val, "slurm") &&
                strcmp(val, "mpi") && strcmp(val, "none"))
                return bad_usage("--cluster: '%s' is not auto, slurm, mpi or "
                                 "none", val);
            j->cluster = val;
            break;
        case O_SARG:
            if (j->nsargs == MAX_SARGS)
                return bad_usage("more than %d --server-arg", MAX_SARGS);
            j->sargs[j->nsargs++] = val;
            break;
        case O_NS:
            if (parse_num(val, 1, 1000, &v))
                return bad_usage("--num-servers: '%s' is not a number in "
                                 "1..1000", val);
            j->S = v;
            have_s = 1;
            break;
        case O_NT:
            if (parse_num(val, 1, 100000, &v))
                return bad_usage("--num-trainers: '%s' is not a number in "
                                 "1..100000", val);
            j->T = v;
            have_t = 1;
            break;
        case O_NK:
            if (parse_num(val, 0, 1000, &v))
                return bad_usage("--num-samplers: '%s' is not a number in "
                                 "0..1000", val);
            j->K = v;
            break;
        case O_SPORT:
            if (parse_num(val, 1, 65535, &v))
                return bad_usage("--ssh-port: '%s' is not a port in 1..65535",
                                 val);
            j->ssh_port = v;
            break;
        case O_TIMEOUT:
            if (parse_num(val, 1, 86400, &v))
                return bad_usage("--timeout: '%s' is not a number of seconds "
                                 "in 1..86400", val);
            j->timeout_s = v;
            j->timeout_given = 1;
            break;
        }
    }
    if (j->ip_config == NULL)
        return bad_usage("--ip-config FILE is required");
    if (!have_s)
        return bad_usage("--num-servers S is required");
    if (j->shutdown)
        return EX_OK;
    if (!have_t)
        return bad_usage("--num-trainers T is required");
    if ((j->part_config == NULL) == (j->store == NULL))
        return bad_usage("give exactly one of --part-config G.json and "
                         "--store DIR");
    if (j->keep_alive && j->server_name == NULL)
        return bad_usage("--keep-alive needs --server-name N (a later launch "
                         "finds the servers by that name)");
    if (j->server_name != NULL &&
        (j->server_name[0] == '\0' || strlen(j->server_name) > 255))
        return bad_usage("--server-name: 1..255 characters");
    if (j->cmd == NULL)
        return bad_usage("no command: put the trainer command after '--'");
    if (j->ncmd == 0)
        return bad_usage("no command after '--'");
    if (j->group_opt != NULL) {
        size_t n = strlen(j->group_opt);
        int ok = n >= 1 && n <= GKV_NET_GROUP_MAX;
        for (size_t i = 0; ok && i < n; i++)
            ok = j->group_opt[i] > ' ' && j->group_opt[i] < 127;
        if (!ok)
            return bad_usage("--group: '%s' is not 1..%d printable characters "
                             "without spaces", j->group_opt, GKV_NET_GROUP_MAX);
        if (j->K > 0 && n > GROUP_MAX_WITH_SAMPLERS)
            return bad_usage("--group: '%s' is %zu characters, but with "
                             "--num-samplers the samplers join as group "
                             "'%s" SAMPLER_SUFFIX "', which must fit in %d: "
                             "give at most %d", j->group_opt, n, j->group_opt,
                             GKV_NET_GROUP_MAX, GROUP_MAX_WITH_SAMPLERS);
    }
    return EX_OK;
}

/* ---- set-up ------------------------------------------------------------------- */

/* Where the workspace goes (j->ws); nothing is made yet. */
static void
workspace_path(struct job *j)
{
    if (j->workspace != NULL) {
        absolute(j->workspace, j->cwd, j->ws, sizeof j->ws);
    } else {
        snprintf(j->ws, sizeof j->ws, "%s/gkv-launch-%ld", j->cwd, (long)getpid());
        if (access(j->cwd, W_OK) != 0) {
            const char *t = env_get("TMPDIR");
            snprintf(j->ws, sizeof j->ws, "%s/gkv-launch-%ld", t ? t : "/tmp",
                     (long)getpid());
        }
    }
}

/* Makes the workspace j->ws and its logs/ folder, checking it can write
 * there. Called once the launch goes ahead (after the checks that refuse
 * it), so that a refused launch leaves no empty workspace behind. 0, or
 * -1 after saying why. */
static int
make_workspace(struct job *j)
{
    char logs[PATH_MAX + 80], probe[PATH_MAX + 120];
    int fd;

    snprintf(logs, sizeof logs, "%s/logs", j->ws);
    if ((mkdir(j->ws, 0755) != 0 && errno != EEXIST) ||
        (mkdir(logs, 0755) != 0 && errno != EEXIST)) {
        err("workspace %s: cannot create it: %s", j->ws, strerror(errno));
        return -1;
    }
    snprintf(probe, sizeof probe, "%s/.probe-%ld", logs, (long)getpid());
    if ((fd = open(probe, O_WRONLY | O_CREAT | O_EXCL, 0600)) < 0) {
        err("workspace %s: not writable: %s", j->ws, strerror(errno));
        return -1;
    }
    close(fd);
    unlink(probe);
    return 0;
}

static void
find_server_bin(struct job *j)
{
    char self[PATH_MAX], *sl;
    ssize_t n;

    if (j->server_bin != NULL)
        return;
    j->server_bin = "gkv-server";
    n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return;
    self[n] = '\0';
    if ((sl = strrchr(self, '/')) == NULL)
        return;
    *sl = '\0';
    snprintf(j->server_bin_buf, sizeof j->server_bin_buf, "%s/gkv-server", self);
    if (access(j->server_bin_buf, X_OK) == 0)
        j->server_bin = j->server_bin_buf;
}

/* Reads the ip_config and token, makes paths absolute, finds the local
 * machines and the server program. 0, or -1 after printing why. */
static int
prepare(struct job *j)
{
    gkv_err rc;
    struct ifaddrs *ifs = NULL;
    char token[GKV_TOKEN_MAX + 1];
    unsigned long long nclients;

    if (getcwd(j->cwd, sizeof j->cwd) == NULL) {
        err("cannot read the working directory: %s", strerror(errno));
        return -1;
    }
    if ((rc = gkv_ipconfig_load(&j->ipc, j->ip_config)) != GKV_OK) {
        /* the message names the file and what is wrong with it; GKV_ENOENT's
         * own text would speak of a store */
        if (gkv_net_errmsg()[0] != '\0')
            err("%s", gkv_net_errmsg());
        else
            err("%s: %s", j->ip_config, gkv_strerror(rc));
        return -1;
    }
    j->M = (unsigned)gkv_ipconfig_count(j->ipc);
    if ((rc = gkv_ipconfig_check(j->ipc, j->S)) != GKV_OK) {
        err("%s: %s: %s", j->ip_config, gkv_strerror(rc), gkv_net_errmsg());
        return -1;
    }
    /* every address resolves, before anything starts: a server on an
     * address that does not would fail at its start ("cannot resolve")
     * after the others had started. --shutdown names such a server among
     * those that did not answer instead, and stops the others. */
    for (unsigned m = 0; m < j->M && !j->shutdown; m++) {
        const gkv_machine *mc = gkv_ipconfig_machine(j->ipc, m);
        char why[256];

        if (host_resolves(mc->host, why, sizeof why) != 0) {
            err("%s:%u: address '%s' (machine %u) does not resolve: %s (give "
                "an IPv4 or IPv6 address, or a host name that resolves to "
                "an IPv4 address); nothing was started", j->ip_config,
                mc->line, mc->host, m, why);
            return -1;
        }
    }
    absolute(j->ip_config, j->cwd, j->ipc_abs, sizeof j->ipc_abs);
    if (j->part_config != NULL) {
        absolute(j->part_config, j->cwd, j->part_abs, sizeof j->part_abs);
        if (access(j->part_abs, R_OK) != 0) {
            err("--part-config %s: %s", j->part_config, strerror(errno));
            return -1;
        }
    }
    if (j->part_config != NULL && !j->shutdown) {
        /* machine m serves partition m: a server of a job with too few or
         * too many machines would fail at its start */
        if ((rc = gkv_pbook_open(&j->book, j->part_abs)) != GKV_OK) {
            err("--part-config: %s: %s", gkv_strerror(rc),
                gkv_pbook_errmsg(NULL));
            return -1;
        }
        if ((unsigned)gkv_pbook_num_parts(j->book) != j->M) {
            err("%s lists %u machine%s but %s has %d partitions: machine m "
                "serves partition m, so the counts must be equal", j->ip_config,
                j->M, j->M == 1 ? "" : "s", j->part_config,
                gkv_pbook_num_parts(j->book));
            return -1;
        }
    }
    nclients = (unsigned long long)j->M * j->T * (1ull + j->K);
    if (!j->shutdown && nclients > MAX_CLIENTS) {
        err("the job has %llu trainer and sampler processes, each a client of "
            "every server, but a server takes at most %d clients", nclients,
            MAX_CLIENTS);
        return -1;
    }
    if (j->store != NULL)
        absolute(j->store, j->cwd, j->store_abs, sizeof j->store_abs);
    if (j->token_file != NULL) {
        absolute(j->token_file, j->cwd, j->tok_abs, sizeof j->tok_abs);
        if (load_token(j, token, sizeof token) != 0)
            return -1;
        memset(token, 0, sizeof token);
    }
    if (j->shutdown)
        return 0;
    j->local = xcalloc(j->M, sizeof *j->local);
    if (getifaddrs(&ifs) != 0)
        ifs = NULL;
    for (unsigned m = 0; m < j->M; m++)
        j->local[m] = !j->force_ssh &&
                      host_is_local(gkv_ipconfig_machine(j->ipc, m)->host, ifs);
    if (ifs != NULL)
        freeifaddrs(ifs);
    if (j->group_opt != NULL) {
        snprintf(j->group, sizeof j->group, "%s", j->group_opt);
    } else {
        char host[256] = "host";
        gethostname(host, sizeof host - 1);
        host[sizeof host - 1] = '\0';
        for (char *c = host; *c; c++)
            if (*c <= ' ' || *c >= 127)
                *c = '_';
        snprintf(j->group, sizeof j->group, "job-%.40s-%ld", host, (long)getpid());
    }
    {
        /* fresh each launch: servers drop the members of an earlier run
         * with this group name (killed, their leases not out yet) */
        unsigned char rb[8] = {0};
        size_t o = 0;

        if (getrandom(rb, sizeof rb, 0) != (ssize_t)sizeof rb) {
            uint64_t t = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
            memcpy(rb, &t, sizeof rb);
        }
        o = (size_t)snprintf(j->instance, sizeof j->instance, "launch-");
        for (size_t i = 0; i < sizeof rb; i++)
            o += (size_t)snprintf(j->instance + o, sizeof j->instance - o,
                                  "%02x", rb[i]);
    }
    if (make_sampler_group(j) != 0)
        return -1;
    find_server_bin(j);
    return 0;
}

/* Asks every server of the ip_config to stop (forced: persistent ones
 * too), one at a time, so that one down does not spare the others. Each
 * that does not answer is named. A machine whose servers say in their
 * handshake that they run more than --num-servers per machine has those
 * stopped too (said on stdout); they are checked to be the servers the
 * handshake promised (this machine's, at their place) before they are
 * asked. EX_OK when all answered. */
static int
do_shutdown(struct job *j)
{
    char token[GKV_TOKEN_MAX + 1], group[GKV_NET_GROUP_MAX + 1];
    gkv_client_opts o;
    unsigned nbad = 0, ntried = 0;

    if (j->token_file != NULL && load_token(j, token, sizeof token) != 0)
        return EX_FAIL;
    memset(&o, 0, sizeof o);
    o.timeout_ms = j->timeout_given ? (int)(j->timeout_s * 1000) : 5000;
    o.flags = GKV_CLIENT_NO_HEARTBEAT | GKV_CLIENT_OBSERVER;
    snprintf(group, sizeof group, "gkv-launch-stop-%ld", (long)getpid());
    for (unsigned m = 0; m < j->M; m++) {
        const gkv_machine *mc = gkv_ipconfig_machine(j->ipc, m);
        unsigned ns = j->S;         /* servers of this machine to stop */
        unsigned said = j->S;       /* the most its servers said they are */
        unsigned refused = 0;       /* a count whose ports do not fit */

        for (unsigned k = 0; k < ns; k++) {
            char addr[300], label[PATH_MAX + 400], why[256];
            gkv_client *c = NULL;
            gkv_server_info in;
            gkv_err rc;
            int have_info;

            ntried++;
            server_addr(j, m, k, addr, sizeof addr);
            server_label(j, m, k, label, sizeof label);
            if (host_resolves(mc->host, why, sizeof why) != 0) {
                err("%s did not answer: its address '%s' does not resolve: "
                    "%s", label, mc->host, why);
                nbad++;
                continue;
            }
            /* a quick look first: a handshake with a port nobody listens
             * on would take the whole timeout */
            if (!tools__port_accepts(mc->host, mc->port + k, 1000)) {
                err("%s did not answer: nothing accepts connections there",
                    label);
                nbad++;
                continue;
            }
            rc = gkv_client_connect_addr(&c, addr, j->token_file ? token : NULL,
                                         group, 0, &o);
            if (rc != GKV_OK) {
                err("%s was not stopped: handshake: %s: %s%s", label,
                    gkv_strerror(rc), net_detail(addr),
                    rc == GKV_EPERM && j->token_file == NULL ?
                    " (give --token-file: the job's token)" : "");
                nbad++;
                continue;
            }
            have_info = gkv_client_server_info(c, 0, &in) == GKV_OK;
            if (k >= j->S && (!have_info || in.machine != m ||
                              in.server_id != k)) {
                /* not the server its machine's handshake spoke of */
                if (have_info)
                    err("%s was not stopped: the port is held by gkv server "
                        "'%s' %u/%u (pid %u)", label, in.name, in.machine,
                        in.server_id, (unsigned)in.pid);
                else
                    err("%s was not stopped: it did not say who it is: %s",
                        label, net_detail(addr));
                gkv_client_close(c);
                nbad++;
                continue;
            }
            if (have_info) {
                say("stopping server %u/%u at %s ('%s', pid %u)", m, k, addr,
                    in.name, (unsigned)in.pid);
                if (in.num_servers > said) {
                    said = in.num_servers;
                    /* their ports must fit and not be another machine's */
                    if (gkv_ipconfig_check(j->ipc, in.num_servers) != GKV_OK) {
                        err("%s says machine %u runs %u servers, more than "
                            "--num-servers %u, but %s has no room for them "
                            "(%s): servers %u/%u..%u/%u were not stopped",
                            label, m, in.num_servers,
                            j->S, j->ip_config, gkv_net_errmsg(), m, ns, m,
                            in.num_servers - 1);
                        refused = in.num_servers;
                    } else {
                        say("server %u/%u at %s says machine %u runs %u "
                            "servers, more than --num-servers %u: stopping "
                            "servers %u/%u..%u/%u as well", m, k, addr, m,
                            in.num_servers, j->S, m, ns, m,
                            in.num_servers - 1);
                        ns = in.num_servers;
                    }
                }
            }
            if ((rc = gkv_client_shutdown(c, 1)) != GKV_OK) {
                err("%s: shutdown: %s: %s", label, gkv_strerror(rc),
                    net_detail(addr));
                nbad++;
            }
            gkv_client_close(c);
        }
        if (refused > ns) {         /* named above, not asked */
            nbad += refused - ns;
            ntried += refused - ns;
        }
    }
    memset(token, 0, sizeof token);
    if (nbad > 0) {
        /* each is named above; say what became of the rest, if any */
        if (nbad == ntried && ntried == 1)
            err("the only server was not stopped (named above, with why)");
        else if (nbad == ntried)
            err("none of the %u servers was stopped (each is named above, "
                "with why)", ntried);
        else if (ntried - nbad == 1)
            err("%u of %u servers did not answer or %s not stopped; the "
                "other one was asked to stop", nbad, ntried,
                nbad == 1 ? "was" : "were");
        else
            err("%u of %u servers did not answer or %s not stopped; the "
                "other %u were asked to stop", nbad, ntried,
                nbad == 1 ? "was" : "were", ntried - nbad);
        return EX_FAIL;
    }
    return EX_OK;
}

/* ---- the job ------------------------------------------------------------------- */

static void
build_procs(struct job *j)
{
    size_t per = j->S + (size_t)j->T * (1 + j->K), n = 0;

    j->p = xcalloc(j->M * per, sizeof *j->p);
    for (unsigned m = 0; m < j->M; m++) {
        for (unsigned k = 0; k < j->S; k++) {
            struct proc *p = &j->p[n++];
            p->role = R_SERVER;
            p->machine = m;
            p->idx = k;
            p->rank = m * j->S + k;
        }
        for (unsigned t = 0; t < j->T; t++) {
            struct proc *p = &j->p[n++];
            p->role = R_TRAINER;
            p->machine = m;
            p->idx = t;
            p->rank = p->trank = m * j->T + t;
        }
        for (unsigned t = 0; t < j->T; t++)
            for (unsigned s = 0; s < j->K; s++) {
                struct proc *p = &j->p[n++];
                p->role = R_SAMPLER;
                p->machine = m;
                p->idx = t * j->K + s;
                p->trank = m * j->T + t;
                p->rank = p->trank * j->K + s;
            }
    }
    j->np = n;
    for (size_t i = 0; i < n; i++) {
        j->p[i].remote = !j->local[j->p[i].machine];
        proc_name(j, &j->p[i]);
    }
}

/* --keep-alive: says that the servers stay and how to stop them. */
static void
say_servers_kept(struct job *j)
{
    say("--keep-alive: leaving the servers running (persistent server "
        "'%s'; stop them with: " PROG " --ip-config %s --num-servers %u "
        "--shutdown%s%s)", j->server_name, j->ipc_abs, j->S,
        j->token_file ? " --token-file " : "", j->token_file ? j->tok_abs : "");
    for (size_t i = 0; i < j->np; i++)
        if (j->p[i].role == R_SERVER && proc_live(&j->p[i]))
            say("%s keeps running (pid %ld)", j->p[i].name, (long)j->p[i].pid);
}

/* Stops the trainers and samplers, then the servers we started, except
 * that with --keep-alive the servers stay (whether this launch started
 * them or reused them) unless they are what failed. */
static void
stop_job(struct job *j, int servers_failed)
{
    stop_procs(j, R_TRAINER);
    stop_procs(j, R_SAMPLER);
    if (j->keep_alive && !servers_failed) {
        if (count_live(j, R_SERVER) > 0 || nreused(j) > 0)
            say_servers_kept(j);
        return;
    }
    stop_procs(j, -1);
}

/* Reports failure of p (or 'why' alone), stops the job (stop_job; a failed
 * server, or servers_failed, stops the servers too), returns EX_FAIL. */
static int
fail_job(struct job *j, struct proc *p, const char *why, int servers_failed)
{
    char how[96];

    if (p != NULL) {
        describe_status(p->status, how, sizeof how);
        err("%s (machine %u) failed: %s%s%s", p->name, p->machine, how,
            why ? ": " : "", why ? why : "");
        servers_failed |= p->role == R_SERVER;
    } else {
        err("%s", why);
    }
    if (count_live(j, -1) > 0)
        say("stopping every other process of the job%s",
            j->keep_alive && !servers_failed ? " but the servers" : "");
    stop_job(j, servers_failed);
    if (p != NULL)
        print_tail(p->log);
    err("job failed; logs in %s/logs", j->ws);
    return EX_FAIL;
}

static int
stopped_by_signal(struct job *j)
{
    err("got %s: stopping every process of the job%s", strsignal((int)g_sig),
        j->keep_alive ? " but the servers" : "");
    stop_job(j, 0);
    err("job stopped; logs in %s/logs", j->ws);
    return EX_FAIL;
}

/* Value of server option 'opt' among the --server-arg words ("--opt V"
 * or "--opt=V"), or NULL; the last one given wins, as in gkv-server. */
static const char *
sarg_value(const struct job *j, const char *opt)
{
    const char *v = NULL;
    size_t n = strlen(opt);

    for (int i = 0; i < j->nsargs; i++) {
        if (strcmp(j->sargs[i], opt) == 0 && i + 1 < j->nsargs)
            v = j->sargs[++i];
        else if (strncmp(j->sargs[i], opt, n) == 0 && j->sargs[i][n] == '=')
            v = j->sargs[i] + n + 1;
    }
    return v;
}

/* A launch that reuses persistent servers and gives --server-arg: the
 * running servers keep the options they were started with (a server
 * takes its options at its start only), so say so, naming the options,
 * rather than let the operator believe they apply. The handshake tells
 * the lease (--heartbeat-timeout) and message limit (--max-msg) of each
 * server, so a difference in those is named per server; the others (e.g.
 * --writeback, --nosync, --threads) it does not tell. */
static void
say_sargs_not_applied(struct job *j, size_t nre)
{
    static const struct { const char *opt; int lease; } shown[] = {
        {"--heartbeat-timeout", 1}, {"--max-msg", 0},
    };
    char *list = NULL, stop[2 * PATH_MAX + 128];
    size_t len = 0, cap = 0, nsrv = (size_t)j->M * j->S;

    if (j->nsargs == 0 || nre == 0)
        return;
    for (int i = 0; i < j->nsargs; i++) {
        const char *a = j->sargs[i];
        int plain = *a != '\0';

        /* quoted for a shell when it holds anything but these */
        for (const char *c = a; *c && plain; c++)
            plain = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                    (*c >= '0' && *c <= '9') || strchr("-_./:=,@+%", *c);
        if (i > 0)
            raw_append(&list, &len, &cap, " ");
        if (plain)
            raw_append(&list, &len, &cap, a);
        else
            sq_append(&list, &len, &cap, a);
    }
    snprintf(stop, sizeof stop, PROG " --ip-config %s --num-servers %u "
             "--shutdown%s%s", j->ipc_abs, j->S,
             j->token_file ? " --token-file " : "",
             j->token_file ? j->tok_abs : "");
    if (nre == nsrv)
        say("note: the %zu reused server%s (persistent server '%s') keep%s "
            "the options %s started with: this launch's --server-arg %s %s "
            "NOT applied (to change server options, stop the servers: %s, "
            "and launch again)", nre, nre == 1 ? "" : "s", j->server_name,
            nre == 1 ? "s" : "", nre == 1 ? "it was" : "they were", list,
            j->nsargs == 1 ? "is" : "are", stop);
    else
        say("note: %zu of the %zu servers %s reused (persistent server "
            "'%s') and keep%s the options %s started with: this launch's "
            "--server-arg %s %s NOT applied to %s, only to the %zu server%s "
            "it starts, so the job's servers may run with different "
            "options (to give them all the same, stop the servers: %s, and "
            "launch again)", nre, nsrv, nre == 1 ? "is" : "are",
            j->server_name, nre == 1 ? "s" : "",
            nre == 1 ? "it was" : "they were", list,
            j->nsargs == 1 ? "is" : "are", nre == 1 ? "it" : "them",
            nsrv - nre, nsrv - nre == 1 ? "" : "s", stop);
    free(list);
    for (size_t o = 0; o < sizeof shown / sizeof shown[0]; o++) {
        const char *v = sarg_value(j, shown[o].opt);
        unsigned long long want;
        char *end;

        if (v == NULL)
            continue;
        errno = 0;
        want = strtoull(v, &end, 10);
        if (errno != 0 || end == v || *end != '\0')
            continue;               /* a server started with it would refuse it */
        for (size_t i = 0; i < j->np; i++) {
            const struct proc *p = &j->p[i];
            unsigned long long have;

            if (p->role != R_SERVER || !p->reused)
                continue;
            have = shown[o].lease ? p->hs_lease_ms : p->hs_max_msg;
            if (have != want)
                say("note: reused %s runs with %s %llu, not %s as given",
                    p->name, shown[o].opt, have, v);
        }
    }
}

static int
run_job(struct job *j)
{
    struct proc *bad;
    int nlisten = 0, nsrv = (int)(j->M * j->S);
    double end, server_gone = 0;

    build_procs(j);
    if (j->K > 0)
        say("job %s: %u machine%s, %u server%s and %u trainer%s each, %u "
            "sampler%s per trainer (group %s)", j->group, j->M,
            j->M == 1 ? "" : "s", j->S, j->S == 1 ? "" : "s", j->T,
            j->T == 1 ? "" : "s", j->K, j->K == 1 ? "" : "s", j->sgroup);
    else
        say("job %s: %u machine%s, %u server%s and %u trainer%s each",
            j->group, j->M, j->M == 1 ? "" : "s", j->S,
            j->S == 1 ? "" : "s", j->T, j->T == 1 ? "" : "s");
    /* which servers are up already */
    for (size_t i = 0; i < j->np; i++) {
        struct proc *p = &j->p[i];
        const gkv_machine *mc = gkv_ipconfig_machine(j->ipc, p->machine);
        if (p->role == R_SERVER && tools__port_accepts(mc->host, mc->port + p->idx, 300)) {
            p->reused = 1;
            p->ready = 1;
            nlisten++;
        }
    }
    if (nlisten > 0 && !j->keep_alive) {
        for (size_t i = 0; i < j->np; i++)
            if (j->p[i].reused) {
                const gkv_machine *mc = gkv_ipconfig_machine(j->ipc, j->p[i].machine);
                err("port %s:%u of %s is already in use (a server left from "
                    "an earlier job? doc/DEPLOY.md says how to find and stop "
                    "it)", mc->host, mc->port + j->p[i].idx, j->p[i].name);
            }
        return EX_FAIL;
    }
    if (nlisten > 0) {
        /* --keep-alive: the running ones must be this job's persistent
         * servers, checked before anything starts */
        int rc = check_reused(j);
        if (rc != EX_OK) {
            err("nothing was started");
            return rc;
        }
        for (size_t i = 0; i < j->np; i++)
            if (j->p[i].reused) {
                const gkv_machine *mc = gkv_ipconfig_machine(j->ipc, j->p[i].machine);
                say("reusing %s on %s:%u (persistent server '%s')",
                    j->p[i].name, mc->host, mc->port + j->p[i].idx,
                    j->server_name);
            }
        say_sargs_not_applied(j, (size_t)nlisten);
    }
    if (make_workspace(j) != 0) {
        err("nothing was started");
        return EX_USAGE;
    }
    say("workspace %s (logs in %s/logs)", j->ws, j->ws);
    for (size_t i = 0; i < j->np; i++) {
        struct proc *p = &j->p[i];
        if (p->role != R_SERVER || p->reused)
            continue;
        if (proc_start(j, p) != 0)
            return fail_job(j, NULL, "could not start every server", 1);
    }
    end = now_s() + j->timeout_s;
    for (;;) {
        int ready = 0;
        if (g_sig)
            return stopped_by_signal(j);
        if ((bad = reap(j)) != NULL)
            return fail_job(j, bad, "it exited before the job started", 1);
        for (size_t i = 0; i < j->np; i++) {
            struct proc *p = &j->p[i];
            const gkv_machine *mc = gkv_ipconfig_machine(j->ipc, p->machine);
            if (p->role != R_SERVER)
                continue;
            if (!p->ready && proc_live(p) &&
                tools__port_accepts(mc->host, mc->port + p->idx, 100))
                p->ready = 1;
            if (!p->reused && p->reaped)
                return fail_job(j, p, "it exited before the job started", 1);
            ready += p->ready;
        }
        if (ready == nsrv)
            break;
        if (now_s() > end) {
            for (size_t i = 0; i < j->np; i++) {
                struct proc *p = &j->p[i];
                if (p->role == R_SERVER && !p->ready) {
                    const gkv_machine *mc = gkv_ipconfig_machine(j->ipc, p->machine);
                    err("%s (%s:%u) did not accept connections within %.0f s",
                        p->name, mc->host, mc->port + p->idx, j->timeout_s);
                    print_tail(p->log);
                }
            }
            return fail_job(j, NULL, "servers did not start in time", 1);
        }
        sleep_ms(30);
    }
    say("all %d servers accept connections", nsrv);
    for (size_t i = 0; i < j->np; i++) {
        if (j->p[i].role == R_SERVER)
            continue;
        if (proc_start(j, &j->p[i]) != 0)
            return fail_job(j, NULL, "could not start every trainer", 0);
    }
    for (;;) {
        size_t workers;
        if (g_sig)
            return stopped_by_signal(j);
        if ((bad = reap(j)) != NULL)
            return fail_job(j, bad, NULL, 0);
        for (size_t i = 0; i < j->np; i++)
            if (j->p[i].remote && j->p[i].rpgid == 0 && proc_live(&j->p[i]))
                proc_find_rpgid(&j->p[i]);
        workers = count_live(j, R_TRAINER) + count_live(j, R_SAMPLER);
        if (workers == 0)
            break;
        /* a server that stopped normally (exit 0) while trainers still run:
         * they may only be finishing; give them a while */
        for (size_t i = 0; i < j->np && server_gone == 0; i++)
            if (j->p[i].role == R_SERVER && j->p[i].started && j->p[i].reaped) {
                server_gone = now_s();
                say("%s stopped while %zu trainer or sampler processes still "
                    "run; they have %.0f s to finish", j->p[i].name, workers,
                    SERVER_GONE_GRACE_S);
            }
        if (server_gone > 0 && now_s() - server_gone > SERVER_GONE_GRACE_S) {
            for (size_t i = 0; i < j->np; i++)
                if (j->p[i].role == R_SERVER && j->p[i].started && j->p[i].reaped)
                    return fail_job(j, &j->p[i], "a server exited while "
                                    "trainers still ran", 1);
        }
        sleep_ms(20);
    }
    say("all trainers exited 0");
    if (j->keep_alive) {
        say_servers_kept(j);
        return EX_OK;
    }
    for (size_t i = 0; i < j->np; i++)
        if (j->p[i].role == R_SERVER && proc_live(&j->p[i]))
            j->p[i].stopping = 1;
    if (stop_procs(j, R_SERVER) > 0) {
        err("some servers had to be killed; logs in %s/logs", j->ws);
        return EX_FAIL;
    }
    for (size_t i = 0; i < j->np; i++)
        if (j->p[i].role == R_SERVER && j->p[i].started && j->p[i].status != 0) {
            char how[96];
            describe_status(j->p[i].status, how, sizeof how);
            err("%s failed while stopping: %s", j->p[i].name, how);
            print_tail(j->p[i].log);
            return EX_FAIL;
        }
    say("job done; logs in %s/logs", j->ws);
    return EX_OK;
}

int
main(int argc, char **argv)
{
    struct job j;
    struct sigaction sa;
    int rc, done;

    memset(&j, 0, sizeof j);
    if ((rc = parse_args(&j, argc, argv, &done)) != EX_OK || done)
        return rc;
    signal(SIGPIPE, SIG_IGN);
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    if (prepare(&j) != 0) {
        rc = EX_USAGE;
        goto out;
    }
    if (j.shutdown) {
        rc = do_shutdown(&j);
        goto out;
    }
    if ((rc = cluster_task(&j)) >= 0)
        goto out;
    workspace_path(&j);
    rc = run_job(&j);
out:
    gkv_ipconfig_free(j.ipc);
    gkv_pbook_close(j.book);
    free(j.local);
    free(j.p);
    return rc;
}
