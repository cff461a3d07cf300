/* netns_test.c - three hosts in network namespaces, real TCP between them.
 *
 * Topology (names carry this run's PID, so parallel runs do not meet):
 *
 *     ns h1 (10.77.0.1) --veth--+
 *     ns h2 (10.77.0.2) --veth--+-- bridge br0 in ns sw
 *     ns h3 (10.77.0.3) --veth--+
 *
 * A 2-partition R-MAT graph (with a node feature) is served from h1
 * (partition 0) and h2 (partition 1) by persistent gkv-server processes;
 * the trainer side runs in h3. The test process itself stays in the
 * root namespace: client checks run in a forked child that enters h3 with
 * setns(2), and programs run through `ip netns exec NS` (which execs, so
 * the PID we hold is the program's).
 *
 * Tests:
 *   - serve: distributed sampling and feature pulls from h3 equal what the
 *     owning partition computes locally, and the example trainer runs an
 *     epoch from h3;
 *   - cut: h2's link goes down mid-job: a call fails with GKV_ETIMEDOUT
 *     within the timeout, naming h2's server; the example trainer exits 1
 *     naming it;
 *   - launch: gkv-launch runs in h3 and starts the servers and a trainer
 *     in h1 and h2 through an ssh stand-in that enters the host's
 *     namespace (`ip netns exec`, in place of sshd); h2's link goes down
 *     mid-job: a trainer fails naming a server, the launcher stops every
 *     process of the job and exits 1, and no process of the job is left;
 *   - restart: h1's server is killed (-9) and started again in h1: a new
 *     job connects and reads the same rows.
 * Without root or without `ip netns` every test is skipped with a message.
 * Every process started is killed and reaped by PID, and the namespaces
 * are deleted, also when a check fails.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "gkvt.h"

#define NH        3              /* hosts h1..h3 */
#define MAXPROC   16
#define PORT      30050
#define SCALE     "12"

struct proc {
    pid_t pid;
    int reaped, status;
    char log[4200];
};

struct fx {
    char *dir;
    char ns[NH + 1][32];         /* [0] = the switch, [1..3] = hosts */
    int nsmade[NH + 1];
    char cfg[4400], json[4400];
    struct proc p[MAXPROC];
    int np;
};

static char g_server[4200], g_train[4200], g_launch[4200]; /* programs */
static int g_skip;               /* namespaces cannot be made here */
static char g_skip_why[256];

/* ---- small helpers ------------------------------------------------------------ */

/* Runs a command line through sh; returns its exit status. Output goes to
 * the test's stderr only when it fails. */
static int
sh(const char *fmt, ...)
{
    char cmd[8192], *argv[4], *out = NULL, *err = NULL;
    va_list ap;
    int rc;

    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    argv[0] = "/bin/sh";
    argv[1] = "-c";
    argv[2] = cmd;
    argv[3] = NULL;
    rc = gkvt_run(argv, NULL, 0, &out, &err, 60);
    if (rc != 0)
        fprintf(stderr, "netns_test: '%s' exited %d: %s%s\n", cmd, rc, out, err);
    free(out);
    free(err);
    return rc;
}

#define SH_OK(...) assert_int_equal(sh(__VA_ARGS__), 0)

/* Starts argv in namespace 'ns' (NULL: here) with its output in a log of
 * its own. */
static struct proc *
spawn_in(struct fx *f, const char *ns, char *const argv[], const char *logname)
{
    struct proc *p;
    char *full[64];
    int n = 0;
    pid_t pid;

    assert_true(f->np < MAXPROC);
    p = &f->p[f->np++];
    memset(p, 0, sizeof *p);
    snprintf(p->log, sizeof p->log, "%s/%d-%s.log", f->dir, f->np, logname);
    if (ns != NULL) {
        full[n++] = "ip";
        full[n++] = "netns";
        full[n++] = "exec";
        full[n++] = (char *)ns;
    }
    for (int i = 0; argv[i] != NULL && n < 63; i++)
        full[n++] = argv[i];
    full[n] = NULL;
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open(p->log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        setpgid(0, 0);
        execvp(full[0], full);
        _exit(127);
    }
    p->pid = pid;
    return p;
}

static void
proc_kill(struct proc *p)
{
    if (p->pid > 0 && !p->reaped) {
        kill(p->pid, SIGKILL);
        waitpid(p->pid, &p->status, 0);
        p->reaped = 1;
    }
}

/* Waits up to 'secs' for p to exit; returns its exit code (-signal), or
 * -1000 on timeout. */
static int
proc_wait(struct proc *p, double secs)
{
    double end = tools__now_s() + secs;

    while (!p->reaped) {
        pid_t r = waitpid(p->pid, &p->status, WNOHANG);
        if (r == p->pid) {
            p->reaped = 1;
            break;
        }
        if (tools__now_s() > end)
            return -1000;
        usleep(20000);
    }
    return WIFEXITED(p->status) ? WEXITSTATUS(p->status) : -WTERMSIG(p->status);
}

static int
log_has(const struct proc *p, const char *needle)
{
    char *t = gkvt_slurp(p->log);
    int yes = strstr(t, needle) != NULL;

    free(t);
    return yes;
}

/* ---- namespaces ------------------------------------------------------------------ */

static int
probe_netns(void)
{
    char name[64];

    if (geteuid() != 0) {
        snprintf(g_skip_why, sizeof g_skip_why, "not root");
        return 0;
    }
    snprintf(name, sizeof name, "gkvt%dprobe", (int)getpid());
    if (sh("ip netns add %s 2>/dev/null", name) != 0) {
        snprintf(g_skip_why, sizeof g_skip_why, "'ip netns add' failed");
        return 0;
    }
    sh("ip netns del %s", name);
    return 1;
}

/* Makes the switch namespace with a bridge, and hosts h1..h3, each joined
 * to the bridge by a veth pair, address 10.77.0.<i>/24, loopback up. */
static void
net_up(struct fx *f)
{
    int id = (int)getpid() % 100000;

    for (int i = 0; i <= NH; i++) {
        if (i == 0)
            snprintf(f->ns[i], sizeof f->ns[i], "gkvt%dsw", id);
        else
            snprintf(f->ns[i], sizeof f->ns[i], "gkvt%dh%d", id, i);
        SH_OK("ip netns add %s", f->ns[i]);
        f->nsmade[i] = 1;
        SH_OK("ip -n %s link set lo up", f->ns[i]);
    }
    SH_OK("ip -n %s link add br0 type bridge && ip -n %s link set br0 up",
          f->ns[0], f->ns[0]);
    for (int i = 1; i <= NH; i++) {
        /* created in the host's namespace, the peer moved to the switch */
        SH_OK("ip -n %s link add eth0 type veth peer name p%d && "
              "ip -n %s link set p%d netns %s && "
              "ip -n %s link set p%d master br0 && ip -n %s link set p%d up && "
              "ip -n %s addr add 10.77.0.%d/24 dev eth0 && "
              "ip -n %s link set eth0 up",
              f->ns[i], i, f->ns[i], i, f->ns[0], f->ns[0], i, f->ns[0], i,
              f->ns[i], i, f->ns[i]);
    }
}

static void
net_down(struct fx *f)
{
    for (int i = NH; i >= 0; i--)
        if (f->nsmade[i]) {
            sh("ip netns del %s", f->ns[i]);
            f->nsmade[i] = 0;
        }
}

/* ---- the graph and its servers ------------------------------------------------- */

static void
make_graph(struct fx *f)
{
    char st[4300], npy[4300], out[4300];

    snprintf(st, sizeof st, "%s/featsrc", f->dir);
    snprintf(npy, sizeof npy, "%s/feat.npy", f->dir);
    snprintf(out, sizeof out, "%s/g", f->dir);
    SH_OK("%s %s create f --dtype f32 --shape 8 --range 0:4096 "
          "--init normal:0,1 --seed 3 >/dev/null && %s %s export f %s",
          gkvt_prog("kvctl"), st, gkvt_prog("kvctl"), st, npy);
    SH_OK("%s --rmat " SCALE " --parts 2 --method random --csr "
          "--node-feat feat=%s %s 2>/dev/null", gkvt_prog("gkv-partition"),
          npy, out);
    snprintf(f->json, sizeof f->json, "%s/graph.json", out);
    snprintf(f->cfg, sizeof f->cfg, "%s/ip.txt", f->dir);
    SH_OK("printf '10.77.0.1 %d\\n10.77.0.2 %d\\n' > %s", PORT, PORT, f->cfg);
}

/* Starts partition m's server in host m + 1 (persistent) and waits until
 * it listens. */
static struct proc *
server_start(struct fx *f, int m)
{
    char mach[8], part[8], name[16];
    char *argv[] = {g_server, "--part-config", f->json,
                    "--part-id", part, "--ip-config", f->cfg, "--machine",
                    mach, "--keep-alive", "--server-name", "netns",
                    "--insecure-no-token", NULL};
    struct proc *p;
    double end = tools__now_s() + 30;

    snprintf(mach, sizeof mach, "%d", m);
    snprintf(part, sizeof part, "%d", m);
    snprintf(name, sizeof name, "server-h%d", m + 1);
    p = spawn_in(f, f->ns[m + 1], argv, name);
    while (!log_has(p, "listening on")) {
        if (proc_wait(p, 0) != -1000) {
            char *t = gkvt_slurp(p->log);
            fail_msg("server in %s exited before listening:\n%s", f->ns[m + 1], t);
        }
        if (tools__now_s() > end)
            fail_msg("server in %s did not listen within 30 s", f->ns[m + 1]);
        usleep(20000);
    }
    return p;
}

static int
setup(void **state)
{
    struct fx *f;

    if (g_skip)
        return 0;
    f = calloc(1, sizeof *f);
    if (f == NULL || (f->dir = gkvt_mkdtemp("netns")) == NULL)
        return -1;
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fx *f = *state;

    if (f == NULL)
        return 0;
    for (int i = 0; i < f->np; i++)
        proc_kill(&f->p[i]);
    net_down(f);
    gkvt_rmtree(f->dir);
    free(f);
    return 0;
}

#define SKIP_IF_NO_NETNS()                                                   \
    do {                                                                     \
        if (g_skip) {                                                        \
            fprintf(stderr, "netns_test: skipped: network namespaces cannot "\
                    "be made here (%s)\n", g_skip_why);                      \
            skip();                                                          \
        }                                                                    \
    } while (0)

/* ---- client checks in h3 ---------------------------------------------------------- */

/* Runs fn in a child that has entered namespace 'ns'; the child's cmocka
 * failures become its exit status. Returns that status. */
static int
in_ns(const char *ns, int (*fn)(struct fx *), struct fx *f)
{
    char path[128];
    pid_t pid;
    int st;

    snprintf(path, sizeof path, "/var/run/netns/%s", ns);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) {
            fprintf(stderr, "setns %s: %s\n", path, strerror(errno));
            _exit(90);
        }
        close(fd);
        _exit(fn(f));
    }
    assert_int_equal(waitpid(pid, &st, 0), pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

#define CHECK(cond, ...)                                                     \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "netns_test: check failed at line %d: ",         \
                    __LINE__);                                               \
            fprintf(stderr, __VA_ARGS__);                                    \
            fputc('\n', stderr);                                             \
            return 1;                                                        \
        }                                                                    \
    } while (0)

/* From h3: one hop and 2-layer blocks through the servers equal the owning
 * partitions' local answers; features pulled equal the partition stores'. */
static int
check_remote(struct fx *f)
{
    gkv_client *c;
    gkv_client_opts co = {.timeout_ms = 10000};
    gkv_part *part[2];
    gkv_sgraph *sg[2];
    gkv_sampler *sm[2];
    const gkv_pbook *b;
    int64_t seeds[256];
    uint64_t ids[256];
    float got[256 * 8], want[8];
    gkv_sample_opts so = {.seed = 99};
    gkv_sample_edges re, le;
    int fan = 5;
    gkv_err rc;
    int64_t n;

    rc = gkv_client_connect(&c, f->cfg, NULL, "netns-check", 0, &co);
    CHECK(rc == GKV_OK, "connect: %s", gkv_net_errmsg());
    CHECK((b = gkv_client_pbook(c)) != NULL, "no partition book");
    CHECK(gkv_pbook_num_parts(b) == 2, "parts %d", gkv_pbook_num_parts(b));
    n = gkv_pbook_num_nodes(b, 0);
    for (int p = 0; p < 2; p++) {
        CHECK(gkv_part_open(&part[p], f->json, p, 0) == GKV_OK, "open part %d: %s",
              p, gkv_part_errmsg(NULL));
        CHECK(gkv_part_sgraph(part[p], &sg[p]) == GKV_OK, "sgraph %d", p);
        CHECK(gkv_sampler_new(&sm[p], sg[p], 1) == GKV_OK, "sampler %d", p);
    }
    for (int i = 0; i < 256; i++) {
        seeds[i] = (int64_t)(((uint64_t)i * 2654435761u) % (uint64_t)n);
        ids[i] = (uint64_t)seeds[i];
    }
    /* one hop, seed by seed against the owner's local sampler */
    {
        const int64_t *sv[1] = {seeds};
        size_t nv[1] = {256};
        size_t at = 0;
        rc = gkv_client_sample_neighbors(c, sv, nv, &fan, 1, 0, &so, &re);
        CHECK(rc == GKV_OK, "remote sample: %s", gkv_net_errmsg());
        for (int i = 0; i < 256; i++) {
            int32_t owner;
            const int64_t *one[1] = {&seeds[i]};
            size_t none[1] = {1};
            CHECK(gkv_pbook_node_owner(b, 0, &seeds[i], 1, &owner) == GKV_OK,
                  "owner");
            CHECK(gkv_sample_neighbors(sm[owner], one, none, &fan, 1, 0, &so,
                                       &le) == GKV_OK, "local sample");
            CHECK(at + le.n <= re.n, "remote has too few edges at seed %d", i);
            for (size_t k = 0; k < le.n; k++, at++)
                CHECK(re.src[at] == le.src[k] && re.dst[at] == le.dst[k] &&
                      re.eid[at] == le.eid[k], "seed %d pick %zu differs", i, k);
        }
        CHECK(at == re.n, "remote has %zu edges, local %zu", re.n, at);
    }
    /* features */
    rc = gkv_client_pull(c, "node/_N/feat", ids, 256, got, sizeof got);
    CHECK(rc == GKV_OK, "pull: %s", gkv_net_errmsg());
    for (int i = 0; i < 256; i++) {
        int32_t owner;
        CHECK(gkv_pbook_node_owner(b, 0, &seeds[i], 1, &owner) == GKV_OK, "owner");
        CHECK(gkv_tensor_pull(gkv_part_store(part[owner]), NULL, "node/_N/feat",
                              &ids[i], 1, want, sizeof want) == GKV_OK,
              "local pull");
        CHECK(memcmp(want, got + i * 8, sizeof want) == 0, "row %llu differs",
              (unsigned long long)ids[i]);
    }
    for (int p = 0; p < 2; p++) {
        gkv_sampler_free(sm[p]);
        gkv_sgraph_free(sg[p]);
        gkv_part_close(part[p]);
    }
    gkv_client_close(c);
    return 0;
}

/* From h3 while h2's link is down: a pull of rows on both partitions fails
 * within the timeout with GKV_ETIMEDOUT naming h2's server. */
static int
check_cut(struct fx *f)
{
    gkv_client *c;
    gkv_client_opts co = {.timeout_ms = 1500, .flags = GKV_CLIENT_NO_HEARTBEAT};
    uint64_t ids[2] = {0, 0};
    float rows[16];
    const gkv_pbook *b;
    int64_t lo, hi;
    double t0, took;
    gkv_err rc;
    char want[64];

    rc = gkv_client_connect(&c, f->cfg, NULL, "netns-cut", 0, &co);
    CHECK(rc == GKV_OK, "connect: %s", gkv_net_errmsg());
    b = gkv_client_pbook(c);
    CHECK(b != NULL, "no book");
    CHECK(gkv_pbook_node_range(b, 0, 1, &lo, &hi) == GKV_OK, "range");
    ids[1] = (uint64_t)lo;                  /* a node partition 1 owns */
    rc = gkv_client_pull(c, "node/_N/feat", ids, 2, rows, sizeof rows);
    CHECK(rc == GKV_OK, "pull before the cut: %s", gkv_net_errmsg());
    /* the parent cuts the link when it reads our byte on stdout */
    if (write(1, "c", 1) != 1)
        return 1;
    {
        char ack;
        if (read(0, &ack, 1) != 1)
            return 1;
    }
    t0 = tools__now_s();
    rc = gkv_client_pull(c, "node/_N/feat", ids, 2, rows, sizeof rows);
    took = tools__now_s() - t0;
    CHECK(rc == GKV_ETIMEDOUT, "pull after the cut: %s (%s)", gkv_err_name(rc),
          gkv_net_errmsg());
    snprintf(want, sizeof want, "10.77.0.2:%d", PORT);
    CHECK(strstr(gkv_net_errmsg(), want) != NULL, "error '%s' does not name %s",
          gkv_net_errmsg(), want);
    CHECK(took < 5.0, "the error took %.1f s (timeout 1.5 s)", took);
    gkv_client_close(c);
    return 0;
}

/* ---- tests --------------------------------------------------------------------------- */

static void
test_serve_across_hosts(void **state)
{
    struct fx *f = *state;
    char *argv[] = {g_train, "--epochs", "1",
                    "--batch", "256", "--max-batches", "4", NULL};
    struct proc *tr;
    char env[4500];

    SKIP_IF_NO_NETNS();
    net_up(f);
    make_graph(f);
    server_start(f, 0);
    server_start(f, 1);
    assert_int_equal(in_ns(f->ns[3], check_remote, f), 0);
    /* the example trainer, in h3, as gkv-launch would start it */
    snprintf(env, sizeof env, "GKV_IP_CONFIG=%s", f->cfg);
    putenv(env);
    tr = spawn_in(f, f->ns[3], argv, "trainer-h3");
    {
        int code = proc_wait(tr, 60);
        char *t = gkvt_slurp(tr->log);
        if (code != 0)
            fail_msg("the trainer in h3 exited %d:\n%s", code, t);
        assert_non_null(strstr(t, "epoch 0: 4 batches"));
        assert_non_null(strstr(t, "M sampled edges/s"));
        free(t);
    }
    unsetenv("GKV_IP_CONFIG");
}

static void
test_cut_link(void **state)
{
    struct fx *f = *state;
    int to_child[2], from_child[2];
    pid_t pid;
    char b;
    int st;

    SKIP_IF_NO_NETNS();
    net_up(f);
    make_graph(f);
    server_start(f, 0);
    server_start(f, 1);
    assert_int_equal(pipe(to_child), 0);
    assert_int_equal(pipe(from_child), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char path[128];
        int fd;
        dup2(to_child[0], 0);
        dup2(from_child[1], 1);
        close(to_child[1]);
        close(from_child[0]);
        snprintf(path, sizeof path, "/var/run/netns/%s", f->ns[3]);
        fd = open(path, O_RDONLY);
        if (fd < 0 || setns(fd, CLONE_NEWNET) != 0)
            _exit(90);
        _exit(check_cut(f));
    }
    close(to_child[0]);
    close(from_child[1]);
    assert_int_equal(read(from_child[0], &b, 1), 1);
    SH_OK("ip -n %s link set eth0 down", f->ns[2]);
    assert_int_equal(write(to_child[1], "g", 1), 1);
    assert_int_equal(waitpid(pid, &st, 0), pid);
    close(to_child[1]);
    close(from_child[0]);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);

    /* the example trainer started while the link is down fails, naming h2 */
    {
        char *argv[] = {g_train,
                        "--timeout-ms", "1500", NULL};
        char env[4500], want[64];
        struct proc *tr;
        int code;
        snprintf(env, sizeof env, "GKV_IP_CONFIG=%s", f->cfg);
        putenv(env);
        tr = spawn_in(f, f->ns[3], argv, "trainer-cut");
        code = proc_wait(tr, 30);
        unsetenv("GKV_IP_CONFIG");
        assert_int_equal(code, 1);
        snprintf(want, sizeof want, "10.77.0.2:%d", PORT);
        if (!log_has(tr, want)) {
            char *t = gkvt_slurp(tr->log);
            fail_msg("trainer output does not name %s:\n%s", want, t);
        }
    }
}

/* Processes whose command line mentions the test's directory (every
 * process of the job does: the config, the workspace). */
static int
job_procs(struct fx *f)
{
    char cmd[4400], *argv[4], *out = NULL;
    int n = 0;

    snprintf(cmd, sizeof cmd, "pgrep -f -- '%s/' | grep -v \"^$$\\$\" || true",
             f->dir);
    argv[0] = "/bin/sh";
    argv[1] = "-c";
    argv[2] = cmd;
    argv[3] = NULL;
    assert_int_equal(gkvt_run(argv, NULL, 0, &out, NULL, 30), 0);
    for (char *c = out; *c; c++)
        n += *c == '\n';
    free(out);
    return n;
}

static void
test_launch_cut(void **state)
{
    struct fx *f = *state;
    char ssh[4400], ws[4000], text[8192], logs[4100];
    char *argv[] = {g_launch, "--ip-config", f->cfg, "--part-config", f->json,
                    "--num-servers", "1", "--num-trainers", "1",
                    "--workspace", ws, "--ssh-cmd", ssh, "--timeout", "30",
                    "--", g_train, "--epochs", "100000", "--batch", "64",
                    "--timeout-ms", "1500", NULL};
    struct proc *la;
    double end;
    int code;
    char *t;

    SKIP_IF_NO_NETNS();
    net_up(f);
    make_graph(f);
    /* the ssh stand-in: "ssh [options] [user@]10.77.0.N COMMAND" runs
     * COMMAND with sh -c in host N's namespace, in a fresh environment */
    snprintf(ssh, sizeof ssh, "%s/netns-ssh", f->dir);
    snprintf(ws, sizeof ws, "%s/ws", f->dir);
    snprintf(text, sizeof text,
             "#!/bin/sh\n"
             "n=$#; i=0; host=\n"
             "for a; do i=$((i + 1)); [ $i -eq $((n - 1)) ] && host=$a; "
             "last=$a; done\n"
             "host=${host#*@}\n"
             "exec ip netns exec gkvt%dh${host##*.} env -i PATH=\"$PATH\" "
             "HOME=/nonexistent sh -c \"$last\"\n", (int)getpid() % 100000);
    {
        FILE *fp = fopen(ssh, "w");
        assert_non_null(fp);
        fputs(text, fp);
        fclose(fp);
        assert_int_equal(chmod(ssh, 0755), 0);
    }
    la = spawn_in(f, f->ns[3], argv, "launch-h3");
    /* wait until both trainers are training */
    snprintf(logs, sizeof logs, "%s/logs", ws);
    end = tools__now_s() + 60;
    for (;;) {
        char p0[4200], p1[4200];
        struct proc t0 = {0}, t1 = {0};
        snprintf(p0, sizeof p0, "%s/trainer-0-0.log", logs);
        snprintf(p1, sizeof p1, "%s/trainer-1-0.log", logs);
        snprintf(t0.log, sizeof t0.log, "%s", p0);
        snprintf(t1.log, sizeof t1.log, "%s", p1);
        if (log_has(&t0, "at the start") && log_has(&t1, "at the start"))
            break;
        if (proc_wait(la, 0) != -1000) {
            t = gkvt_slurp(la->log);
            fail_msg("the launcher exited before training:\n%s", t);
        }
        if (tools__now_s() > end) {
            t = gkvt_slurp(la->log);
            fail_msg("the trainers did not start within 60 s:\n%s", t);
        }
        usleep(50000);
    }
    SH_OK("ip -n %s link set eth0 down", f->ns[2]);
    code = proc_wait(la, 60);
    t = gkvt_slurp(la->log);
    if (code != 1)
        fail_msg("the launcher exited %d, expected 1:\n%s", code, t);
    /* it names the failed trainer, shows its log tail with the timeout
     * naming a server, and stopped the rest */
    if (strstr(t, "trainer") == NULL || strstr(t, "last ") == NULL ||
        strstr(t, "timed out") == NULL || strstr(t, "10.77.0.") == NULL)
    {
        fprintf(stderr, "%s\n", t);
        fail_msg("the launcher's output (above) does not name the failure");
    }
    free(t);
    end = tools__now_s() + 15;
    while (job_procs(f) > 0) {
        if (tools__now_s() > end) {
            sh("ps -ef | grep -- '%s/' | grep -v grep >&2", f->dir);
            fail_msg("processes of the job are left after the launcher exited");
        }
        usleep(100000);
    }
}

static void
test_restart_server(void **state)
{
    struct fx *f = *state;
    struct proc *s0;

    SKIP_IF_NO_NETNS();
    net_up(f);
    make_graph(f);
    s0 = server_start(f, 0);
    server_start(f, 1);
    assert_int_equal(in_ns(f->ns[3], check_remote, f), 0);
    proc_kill(s0);                      /* kill -9 of h1's server */
    server_start(f, 0);                 /* and again, in h1 */
    assert_int_equal(in_ns(f->ns[3], check_remote, f), 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_serve_across_hosts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cut_link, setup, teardown),
        cmocka_unit_test_setup_teardown(test_launch_cut, setup, teardown),
        cmocka_unit_test_setup_teardown(test_restart_server, setup, teardown),
    };

    snprintf(g_server, sizeof g_server, "%s", gkvt_prog("gkv-server"));
    snprintf(g_train, sizeof g_train, "%s", gkvt_prog("gkv-example-train"));
    snprintf(g_launch, sizeof g_launch, "%s", gkvt_prog("gkv-launch"));
    g_skip = !probe_netns();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
