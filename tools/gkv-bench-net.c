/* gkv-bench-net - the network benchmark: gkv-server processes on loopback
 * TCP, driven by the client library, against references measured in the
 * same run.
 *
 *   (a) pull of 100,000 random 512-byte rows (f32 x 128) of a 200,000-row
 *       tensor from one server, against a plain TCP stream of the same
 *       bytes between two processes of this program (a 64-byte request,
 *       then the bytes in 1 MiB writes, TCP_NODELAY: what
 *       bench/anchors/tcp_raw.c "stream" measures); the two alternate
 *       rep by rep, so both see the same machine. Target >= 0.8x.
 *       Beside the times, the CPU seconds per GB of both ends of each
 *       (/proc/PID/task/TID/schedstat, every thread): what the pull costs
 *       the machine against the stream, whatever else runs beside them.
 *   (b) the same rows from Redis: a redis-server this program starts
 *       (no persistence), loaded with pipelined SETs of "feat:<id>", read
 *       with pipelined MGETs of 1,000 keys (as bench/anchors/redis_mget
 *       does; RESP is written and parsed here, so no hiredis is needed).
 *       Skipped with a note when redis-server is missing. Target >= 8x.
 *   (c) the same pull from 2 servers (two machine lines on 127.0.0.1, each
 *       holding half the rows).
 *   (d) distributed sampling: an R-MAT graph (scale 20, edge factor 16) in
 *       2 partitions (range: node IDs kept, so the blocks can be checked
 *       against the in-process ones), one server each; batches of 1,024
 *       seeds, fanouts 15,10 counted from the seeds (passed as [10, 15] in
 *       DGL's block order), gkv_client_sample_blocks against in-process
 *       gkv_sample_blocks (1 thread) on the whole graph. Sampled edges/s.
 *       Target >= 0.5x. Also the same batches through the servers weighed
 *       by an f32 edge feature "w" (DGL's prob=, edge_w_feat), against the
 *       uniform ones: what the feature weights cost.
 *   (e) push: gkv_client_push (assign) of as many distinct random rows
 *       into a tensor 10x larger on one server (--nosync), directly (one
 *       LMDB transaction per push) and with --writeback feat (RAM, flushed
 *       every 10 ms); write-back over direct.
 * Every figure is the median of --reps (default 5) timed reps after one
 * warm-up; every result is verified (rows against the store, blocks
 * against in-process sampling). Servers and redis-server are child
 * processes started and killed by PID on every exit path (normal, error,
 * SIGINT/SIGTERM; tools/common/benchproc.c), which also remove the work directory in /tmp; they die
 * with this program even when it is killed with -9 (PR_SET_PDEATHSIG).
 *
 * usage: gkv-bench-net [--quick] [--reps N] [--scale N] [--rows N]
 *                      [--no-redis] [--no-sample] [--no-pull] [--pull-only]
 * stdout: "RESULT name key=value ..." lines, then a table. Exit status 0,
 * 1 when a check failed or something could not run, 2 on bad usage.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gkv.h"
#include "benchproc.h"
#include "opt.h"
#include "util.h"

#define PROG    "gkv-bench-net"
#define D       128                 /* floats per row: 512 bytes */
#define RB      (D * sizeof(float))
#define BATCH   1024                /* seeds per sampling batch */

static int reps = 5;

/* ---- the rows ------------------------------------------------------------------- */

/* A store at path holding rows [lo, hi) of tensor "feat" (uniform). */
static void
make_store(const char *path, uint64_t lo, uint64_t hi)
{
    gkv_tensor_spec sp = {0};
    gkv_store *s;
    gkv_err rc;

    sp.dtype = GKV_F32;
    sp.ndim = 1;
    sp.shape[0] = D;
    sp.lo = lo;
    sp.hi = hi;
    sp.init = GKV_INIT_UNIFORM;
    sp.a = -1;
    sp.b = 1;
    sp.seed = 5;
    if ((rc = gkv_store_open(&s, path, GKV_CREATE | GKV_NOSYNC, NULL)) != GKV_OK ||
        (rc = gkv_tensor_create(s, "feat", &sp)) != GKV_OK)
        tools__die("store %s: %s", path, gkv_store_errmsg(s));
    gkv_store_sync(s);
    gkv_store_close(s);
}

/* The expected rows of ids from the stores (rows [lo_k, hi_k) in store k). */
static void
expect_rows(char st[][PATH_MAX], const uint64_t *split, int nst,
            const uint64_t *ids, size_t n, float *out)
{
    for (int k = 0; k < nst; k++) {
        gkv_store *s;
        if (gkv_store_open(&s, st[k], GKV_RDONLY, NULL) != GKV_OK)
            tools__die("store %s: %s", st[k], gkv_store_errmsg(NULL));
        for (size_t i = 0; i < n; i++)
            if (ids[i] >= split[k] && ids[i] < split[k + 1] &&
                gkv_tensor_pull(s, NULL, "feat", &ids[i], 1, out + i * D,
                                RB) != GKV_OK)
                tools__die("read: %s", gkv_store_errmsg(s));
        gkv_store_close(s);
    }
}

struct tcpref;
static double tcp_rep(struct tcpref *t, unsigned char *dst);
static pid_t tcp_pid(const struct tcpref *t);

/* CPU seconds that every thread of process pid (0: this one) has run so
 * far, from /proc/PID/task/TID/schedstat (nanoseconds on the CPU); 0 when
 * /proc cannot be read. */
static double
proc_cpu_s(pid_t pid)
{
    char dir[64], path[PATH_MAX];
    unsigned long long ns, sum = 0;
    struct dirent *e;
    DIR *d;

    if (pid == 0)
        snprintf(dir, sizeof dir, "/proc/self/task");
    else
        snprintf(dir, sizeof dir, "/proc/%d/task", (int)pid);
    if ((d = opendir(dir)) == NULL)
        return 0;
    while ((e = readdir(d)) != NULL) {
        FILE *f;
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s/schedstat", dir, e->d_name);
        if ((f = fopen(path, "r")) == NULL)
            continue;
        if (fscanf(f, "%llu", &ns) == 1)
            sum += ns;
        fclose(f);
    }
    closedir(d);
    return (double)sum * 1e-9;
}

/* CPU seconds of the timed reps: the pull's client (this process, its
 * nanomsg threads included) and server, the TCP reference's receiver
 * (this process) and sender (its child). */
struct cpu_use {
    pid_t server;
    double pull_client, pull_server, tcp_recv, tcp_send;
};

/* Where the vCPUs were during the pulls with a TCP reference: a cache
 * line's round trip before each rep (tools__roundtrip_ns), and pull / TCP
 * stream over the reps whose round trip was under twice the shortest. */
struct placement {
    double rt_min, rt_med, near;
    int far;
};
static double rt_base;       /* the shortest of 5 round trips at the start */

/* Median seconds of reps pulls (after a warm-up), checked. With tr, each
 * pull is preceded by a plain TCP transfer of the same bytes (*ttcp: their
 * median), so both see the same conditions, and *pl is filled. With cu,
 * the CPU time of both ends of both is added up over the timed reps. */
static double
time_pull(gkv_client *c, const uint64_t *ids, size_t n, float *dst,
          const float *want, const char *what, struct tcpref *tr,
          double *ttcp, struct placement *pl, struct cpu_use *cu)
{
    double *t = tools__xmalloc(sizeof *t * (size_t)reps), med;
    double *tt = tools__xmalloc(sizeof *tt * (size_t)reps);
    double *rt = tools__xmalloc(sizeof *rt * (size_t)reps);
    double c0 = 0, s0 = 0;
    gkv_err rc;

    for (int r = -1; r < reps; r++) {
        double t0;
        if (tr != NULL) {
            double x;
            if (r >= 0)
                rt[r] = tools__roundtrip_ns();
            if (cu != NULL) {
                c0 = proc_cpu_s(0);
                s0 = proc_cpu_s(tcp_pid(tr));
            }
            x = tcp_rep(tr, (unsigned char *)dst);
            if (r >= 0)
                tt[r] = x;
            if (cu != NULL && r >= 0) {
                cu->tcp_recv += proc_cpu_s(0) - c0;
                cu->tcp_send += proc_cpu_s(tcp_pid(tr)) - s0;
            }
        }
        memset(dst, 0, n * RB);
        if (cu != NULL) {
            c0 = proc_cpu_s(0);
            s0 = proc_cpu_s(cu->server);
        }
        t0 = tools__now_s();
        rc = gkv_client_pull(c, "feat", ids, n, dst, n * RB);
        if (r >= 0)
            t[r] = tools__now_s() - t0;
        if (cu != NULL && r >= 0) {
            cu->pull_client += proc_cpu_s(0) - c0;
            cu->pull_server += proc_cpu_s(cu->server) - s0;
        }
        if (rc != GKV_OK)
            tools__die("%s: pull: %s: %s", what, gkv_strerror(rc),
                       gkv_net_errmsg());
        if (memcmp(dst, want, n * RB) != 0)
            tools__check_failed("%s: pulled rows differ from the store's",
                                what);
    }
    med = tools__median(t, reps);
    if (tr != NULL) {
        int nn;
        *ttcp = tools__median(tt, reps);
        pl->rt_med = tools__median(rt, reps);
        pl->near = tools__near_ratio(rt, reps, tt, t, rt_base, &pl->rt_min,
                                     &nn);
        pl->far = reps - nn;
    }
    free(t);
    free(tt);
    free(rt);
    return med;
}

/* Median seconds of reps pushes (assign) of n rows to "feat" through a
 * server (after a warm-up); then the rows are pulled back through it and
 * checked against the last push. */
static double
time_push(gkv_client *c, const uint64_t *ids, size_t n, float *rows,
          float *dst, const char *what)
{
    double *t = tools__xmalloc(sizeof *t * (size_t)reps), med;
    gkv_err rc;

    for (int r = -1; r < reps; r++) {
        double t0;

        for (size_t i = 0; i < n * D; i += 97)
            rows[i] = (float)(r + 2) * 0.5f;
        t0 = tools__now_s();
        rc = gkv_client_push(c, "feat", ids, n, rows, n * RB, NULL);
        if (r >= 0)
            t[r] = tools__now_s() - t0;
        if (rc != GKV_OK)
            tools__die("%s: push: %s: %s", what, gkv_strerror(rc),
                       gkv_net_errmsg());
    }
    if ((rc = gkv_client_pull(c, "feat", ids, n, dst, n * RB)) != GKV_OK)
        tools__die("%s: pull: %s: %s", what, gkv_strerror(rc),
                   gkv_net_errmsg());
    if (memcmp(dst, rows, n * RB) != 0)
        tools__check_failed(
            "%s: rows pulled after the pushes differ from the last push",
            what);
    med = tools__median(t, reps);
    free(t);
    return med;
}

/* ---- the TCP reference ------------------------------------------------------------ */

static void
xfer(int fd, void *p, size_t n, int wr)
{
    char *c = p;

    while (n > 0) {
        ssize_t k = wr ? send(fd, c, n, MSG_NOSIGNAL) : recv(fd, c, n, 0);
        if (k <= 0) {
            if (k < 0 && errno == EINTR)
                continue;
            tools__die("tcp reference: %s failed", wr ? "send" : "recv");
        }
        c += k;
        n -= (size_t)k;
    }
}

/* The plain TCP reference: a child process that, per request (64 bytes),
 * sends 'bytes' in 1 MiB writes over loopback TCP (TCP_NODELAY). */
struct tcpref {
    int fd;
    pid_t pid;
    size_t bytes;
};

static void
tcp_open(struct tcpref *t, size_t bytes)
{
    struct sockaddr_in a = {0};
    socklen_t al = sizeof a;
    int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;

    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(ls, (struct sockaddr *)&a, sizeof a) != 0 || listen(ls, 1) != 0 ||
        getsockname(ls, (struct sockaddr *)&a, &al) != 0)
        tools__die("tcp reference: bind: %s", strerror(errno));
    if ((t->pid = fork()) < 0)
        tools__die("fork: %s", strerror(errno));
    if (t->pid == 0) {
        unsigned char *buf = malloc(1 << 20), req[64];
        int c;

        tools__bench_die_with_parent();
        c = accept(ls, NULL, NULL);
        if (buf == NULL || c < 0)
            _exit(1);
        setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        for (size_t i = 0; i < (1u << 20); i++)
            buf[i] = (unsigned char)(i * 31 + 7);
        for (;;) {
            size_t left = bytes, got = 0;
            ssize_t k;
            while (got < 64 && (k = recv(c, req + got, 64 - got, 0)) > 0)
                got += (size_t)k;
            if (got < 64)
                _exit(0);                 /* the parent closed: done */
            while (left > 0) {
                size_t m = left < (1u << 20) ? left : (1u << 20);
                xfer(c, buf, m, 1);
                left -= m;
            }
        }
    }
    tools__bench_adopt(t->pid);
    close(ls);
    if ((t->fd = tools__bench_tcp_connect(ntohs(a.sin_port))) < 0)
        tools__die("tcp reference: connect: %s", strerror(errno));
    t->bytes = bytes;
}

/* Seconds of one transfer into dst. */
static double
tcp_rep(struct tcpref *t, unsigned char *dst)
{
    unsigned char req[64] = {0};
    double t0 = tools__now_s();
    size_t at = 12345 % t->bytes;

    xfer(t->fd, req, 64, 1);
    xfer(t->fd, dst, t->bytes, 0);
    t0 = tools__now_s() - t0;
    if (dst[at] != (unsigned char)((at % (1u << 20)) * 31 + 7))
        tools__check_failed("tcp reference: payload differs");
    return t0;
}

static pid_t
tcp_pid(const struct tcpref *t)
{
    return t->pid;
}

static void
tcp_close(struct tcpref *t)
{
    close(t->fd);
    tools__bench_stop(t->pid);
}

/* ---- Redis over RESP ------------------------------------------------------------------ */

struct resp {
    int fd;
    unsigned char *b;
    size_t cap, lo, hi;
};

static void
resp_fill(struct resp *r)
{
    ssize_t k;

    if (r->lo > 0 && r->lo == r->hi)
        r->lo = r->hi = 0;
    if (r->hi == r->cap) {
        memmove(r->b, r->b + r->lo, r->hi - r->lo);
        r->hi -= r->lo;
        r->lo = 0;
    }
    do
        k = recv(r->fd, r->b + r->hi, r->cap - r->hi, 0);
    while (k < 0 && errno == EINTR);
    if (k <= 0)
        tools__die("redis: connection lost");
    r->hi += (size_t)k;
}

/* A line ("+OK", "*1000", "$512") without its CRLF, into line. */
static void
resp_line(struct resp *r, char *line, size_t cap)
{
    for (;;) {
        unsigned char *e = memchr(r->b + r->lo, '\n', r->hi - r->lo);
        if (e != NULL) {
            size_t n = (size_t)(e - (r->b + r->lo));
            if (n == 0 || n > cap)
                tools__die("redis: malformed reply");
            memcpy(line, r->b + r->lo, n - 1);
            line[n - 1] = '\0';
            r->lo += n + 1;
            return;
        }
        resp_fill(r);
    }
}

static void
resp_bytes(struct resp *r, void *dst, size_t n)
{
    unsigned char *d = dst;

    while (n > 0) {
        size_t k;
        if (r->lo == r->hi)
            resp_fill(r);
        k = r->hi - r->lo < n ? r->hi - r->lo : n;
        memcpy(d, r->b + r->lo, k);
        r->lo += k;
        d += k;
        n -= k;
    }
}

/* Appends one command (argc strings, lens) in RESP to buf. */
static size_t
resp_cmd(char *buf, int argc, const char *const *argv, const size_t *lens)
{
    char h[32];
    size_t o = (size_t)snprintf(h, sizeof h, "*%d\r\n", argc);

    memcpy(buf, h, o);
    for (int i = 0; i < argc; i++) {
        size_t k = (size_t)snprintf(h, sizeof h, "$%zu\r\n", lens[i]);
        memcpy(buf + o, h, k);
        o += k;
        memcpy(buf + o, argv[i], lens[i]);
        o += lens[i];
        buf[o++] = '\r';
        buf[o++] = '\n';
    }
    return o;
}

static int redis_port;
static pid_t redis_pid;

static int
redis_start(void)
{
    char port[16];
    char *argv[] = {"redis-server", "--port", port, "--bind", "127.0.0.1",
                    "--save", "", "--appendonly", "no", "--daemonize", "no",
                    "--dir", tools__bench_dir, NULL};

    if (system("command -v redis-server >/dev/null 2>&1") != 0) {
        tools__note("redis-server is not installed: the Redis reference is "
                    "skipped (tools/deps.sh --bench installs it)");
        return -1;
    }
    redis_port = tools__bench_ports(1);
    snprintf(port, sizeof port, "%d", redis_port);
    redis_pid = tools__bench_spawn(argv, NULL);
    tools__bench_wait_listen(redis_pid, redis_port, "redis-server", NULL);
    return tools__bench_tcp_connect(redis_port);
}

/* Loads rows [0, nrows) as feat:<id> with pipelined SETs. */
static void
redis_load(struct resp *r, const float *rows, size_t nrows)
{
    char *buf = tools__xmalloc(1000 * (RB + 64));
    char key[32], line[64];

    for (size_t lo = 0; lo < nrows; lo += 1000) {
        size_t k = nrows - lo < 1000 ? nrows - lo : 1000, o = 0;
        for (size_t j = 0; j < k; j++) {
            const char *av[3];
            size_t ln[3];
            av[0] = "SET";
            ln[0] = 3;
            ln[1] = (size_t)snprintf(key, sizeof key, "feat:%zu", lo + j);
            av[1] = key;
            av[2] = (const char *)(rows + (lo + j) * D);
            ln[2] = RB;
            o += resp_cmd(buf + o, 3, av, ln);
        }
        xfer(r->fd, buf, o, 1);
        for (size_t j = 0; j < k; j++) {
            resp_line(r, line, sizeof line);
            if (strcmp(line, "+OK") != 0)
                tools__die("redis: SET answered '%s'", line);
        }
    }
    free(buf);
}

/* Fetches rows ids[0..n) into dst with MGETs of 1,000 keys: all sent,
 * then all replies read ('pipelined'), or one MGET and its reply at a
 * time. Returns the seconds taken. */
static double
redis_fetch(struct resp *r, const uint64_t *ids, size_t n, float *dst,
            int pipelined, char *buf, char (*keys)[32], const char **av,
            size_t *ln)
{
    double t0 = tools__now_s();
    char line[64];

    for (size_t lo0 = 0; lo0 < n;) {
        size_t o = 0, hi0 = lo0;
        /* send: every MGET, or the next one */
        do {
            size_t k = n - hi0 < 1000 ? n - hi0 : 1000;
            av[0] = "MGET";
            ln[0] = 4;
            for (size_t j = 0; j < k; j++) {
                ln[j + 1] = (size_t)snprintf(keys[j], sizeof keys[j],
                                             "feat:%llu",
                                             (unsigned long long)ids[hi0 + j]);
                av[j + 1] = keys[j];
            }
            o += resp_cmd(buf + o, (int)k + 1, av, ln);
            hi0 += k;
        } while (pipelined && hi0 < n);
        xfer(r->fd, buf, o, 1);
        for (size_t lo = lo0; lo < hi0; lo += 1000) {
            size_t k = hi0 - lo < 1000 ? hi0 - lo : 1000;
            resp_line(r, line, sizeof line);
            if (line[0] != '*' || (size_t)atol(line + 1) != k)
                tools__die("redis: MGET answered '%s'", line);
            for (size_t j = 0; j < k; j++) {
                char crlf[2];
                resp_line(r, line, sizeof line);
                if (line[0] != '$' || (size_t)atol(line + 1) != RB)
                    tools__die("redis: value '%s'", line);
                resp_bytes(r, dst + (lo + j) * D, RB);
                resp_bytes(r, crlf, 2);
            }
        }
        lo0 = hi0;
    }
    return tools__now_s() - t0;
}

/* Median seconds to fetch rows ids[0..n) with MGETs of 1,000, in the
 * faster of the two ways the anchor redis_mget measures (all MGETs pipelined,
 * or one at a time, which hiredis users write and which was 2x faster
 * there); both are timed rep by rep, alternating. *how names the one
 * kept; each[0], each[1]: the pipelined and the one-at-a-time medians. */
static double
time_redis(struct resp *r, const uint64_t *ids, size_t n, float *dst,
           const float *want, const char **how, double each[2])
{
    size_t nb = (n + 999) / 1000;
    char *buf = tools__xmalloc(nb * 1000 * 40 + 64), (*keys)[32];
    const char **av = tools__xmalloc(1001 * sizeof *av);
    size_t *ln = tools__xmalloc(1001 * sizeof *ln);
    double *t[2], med[2];

    keys = tools__xmalloc(1000 * sizeof *keys);
    for (int m = 0; m < 2; m++)
        t[m] = tools__xmalloc(sizeof *t[m] * (size_t)reps);
    for (int rep = -1; rep < reps; rep++)
        for (int m = 0; m < 2; m++) {
            double s;
            memset(dst, 0, n * RB);
            s = redis_fetch(r, ids, n, dst, m == 0, buf, keys, av, ln);
            if (rep >= 0)
                t[m][rep] = s;
            if (memcmp(dst, want, n * RB) != 0)
                tools__check_failed("redis: fetched rows differ");
        }
    for (int m = 0; m < 2; m++) {
        each[m] = med[m] = tools__median(t[m], reps);
        free(t[m]);
    }
    *how = med[0] <= med[1] ? "all MGETs pipelined" : "one MGET at a time";
    free(buf);
    free(keys);
    free(av);
    free(ln);
    return med[0] <= med[1] ? med[0] : med[1];
}

/* ---- sampling ---------------------------------------------------------------------- */

struct sres {
    double inproc_eps, net_eps, inproc_s, net_s;
    double prob_eps, prob_s;     /* through the servers, weighted by 'w' */
    double wip_eps, wip_s;       /* in-process, weighted by an edge_w array */
    double out_eps, oprob_eps;   /* out-edges through the servers: uniform,
                                  * weighted by 'w' (pulled by the client) */
    size_t edges, pedges, wedges, oedges, opedges;
    int ok;
};

/* Gives every partition an f32 edge feature "w" (uniform in [0.5, 1.5): all
 * positive, so a weighted hop without replacement takes as many edges as
 * a uniform one) for the prob= figure. */
static void
add_edge_weights(const char *json)
{
    gkv_pbook *b;
    gkv_err rc;

    if ((rc = gkv_pbook_open(&b, json)) != GKV_OK)
        tools__die("%s: %s", json, gkv_pbook_errmsg(NULL));
    for (int p = 0; p < gkv_pbook_num_parts(b); p++) {
        gkv_tensor_spec sp = {0};
        gkv_store *st;
        char name[GKV_NAME_MAX + 1];
        int64_t lo, hi;

        if ((rc = gkv_pbook_edge_range(b, 0, p, &lo, &hi)) != GKV_OK)
            tools__die("edge range: %s", gkv_pbook_errmsg(b));
        if (hi <= lo)
            continue;
        snprintf(name, sizeof name, "edge/%s/w", gkv_pbook_etype_name(b, 0));
        sp.dtype = GKV_F32;
        sp.lo = (uint64_t)lo;
        sp.hi = (uint64_t)hi;
        sp.init = GKV_INIT_UNIFORM;
        sp.a = 0.5;
        sp.b = 1.5;
        sp.seed = 9;
        if ((rc = gkv_store_open(&st, gkv_pbook_part_path(b, p), GKV_NOSYNC,
                                 NULL)) != GKV_OK ||
            (rc = gkv_tensor_create(st, name, &sp)) != GKV_OK)
            tools__die("partition %d: %s: %s", p, name,
                       gkv_store_errmsg(st));
        gkv_store_close(st);
    }
    gkv_pbook_close(b);
}

/* Edges of blocks[0..nl). */
static size_t
block_edges(const gkv_block *b, int nl)
{
    size_t e = 0;

    for (int i = 0; i < nl; i++)
        for (int k = 0; k < b[i].num_etypes; k++)
            e += b[i].edges[k].n;
    return e;
}

/* One pass over the batches, sampled (k) 0 in-process, 1 through the
 * servers, 2 through the servers weighed by edge feature "w", 3 in-process
 * weighed by the edge_w array ew (ne weights), 4 and 5 as 1 and 2 along
 * out-edges; *edges gets the edges of all blocks, *seed_hop those of the
 * hop from the seeds. */
static void
sample_pass(int k, gkv_sampler *sm, gkv_client *c, const int64_t *perm,
            int nbatch, const int *fan, const float *ew, int64_t ne,
            size_t *edges, size_t *seed_hop)
{
    static const char *const wfeat[1] = {"w"};
    const float *ewv[1] = {ew};
    int64_t ewn[1] = {ne};

    *edges = *seed_hop = 0;
    for (int b = 0; b < nbatch; b++) {
        const int64_t *sv[1] = {perm + (size_t)b * BATCH};
        size_t sn[1] = {BATCH};
        gkv_sample_opts o = {0};
        gkv_block blk[2];
        gkv_err rc;

        o.seed = (uint64_t)b;
        if (k == 2 || k == 5)
            o.edge_w_feat = wfeat;
        if (k >= 4)
            o.dir = GKV_DIR_OUT;
        if (k == 3) {
            o.edge_w = ewv;
            o.edge_w_len = ewn;
        }
        if (k == 0 || k == 3) {
            if ((rc = gkv_sample_blocks(sm, sv, sn, fan, 1, 2, &o, blk)) != GKV_OK)
                tools__die("sample_blocks (pass %d): %s", k,
                           gkv_sampler_errmsg(sm));
        } else if ((rc = gkv_client_sample_blocks(c, sv, sn, fan, 1, 2, &o,
                                                  blk)) != GKV_OK) {
            tools__die("client sample_blocks (pass %d): %s: %s", k,
                       gkv_strerror(rc), gkv_net_errmsg());
        }
        *edges += block_edges(blk, 2);
        *seed_hop += block_edges(blk + 1, 1);
    }
}

static void
bench_sample(int scale, int nbatch, struct sres *out)
{
    gkv_graph *g;
    gkv_sgraph *sg;
    gkv_sampler *sm;
    gkv_client *c;
    char json[PATH_MAX + 32], cfg[PATH_MAX + 16];
    int64_t n, *perm;
    int fan[2] = {10, 15};
    double *ti = tools__xmalloc(sizeof *ti * (size_t)reps);
    double *tn = tools__xmalloc(sizeof *tn * (size_t)reps);
    double *tp = tools__xmalloc(sizeof *tp * (size_t)reps);
    double *tw = tools__xmalloc(sizeof *tw * (size_t)reps);
    double *to = tools__xmalloc(sizeof *to * (size_t)reps);
    double *tq = tools__xmalloc(sizeof *tq * (size_t)reps);
    float *ew;
    int64_t ne;
    pid_t srv[2];
    uint64_t x = 77;
    gkv_err rc;

    memset(out, 0, sizeof *out);
    tools__note("sampling: R-MAT scale %d, edge factor 16; partitioning "
                "into 2 ...", scale);
    /* CSR too, for the out-edge passes */
    g = tools__bench_rmat_parts(scale, GKV_PART_CSR, json, sizeof json);
    if ((rc = gkv_sgraph_from_graph(&sg, g, 0, 2)) != GKV_OK ||
        (rc = gkv_sampler_new(&sm, sg, 1)) != GKV_OK)
        tools__die("sgraph: %s", gkv_strerror(rc));
    n = gkv_sgraph_num_nodes(sg, 0);
    /* in-process weights of the same law, by the unpartitioned edge IDs */
    ne = gkv_graph_num_edges(g, 0);
    ew = tools__xmalloc((size_t)ne * sizeof *ew + 4);
    for (int64_t i = 0; i < ne; i++)
        ew[i] = 0.5f + (float)(tools__splitmix64(&x) >> 40) / (float)(1 << 24);
    gkv_graph_free(g);
    snprintf(cfg, sizeof cfg, "%s/ip-sample.cfg", tools__bench_dir);
    add_edge_weights(json);
    tools__bench_part_servers(json, cfg, srv);
    c = tools__bench_connect(cfg);
    /* the batches: consecutive slices of a random permutation */
    perm = tools__bench_perm(n, &x);
    if ((int64_t)nbatch * BATCH > n)
        nbatch = (int)(n / BATCH);
    out->ok = 1;
    for (int r = -1; r < reps; r++) {
        size_t e[6], e0[6];
        double *tt[6] = {ti, tn, tp, tw, to, tq};

        for (int k = 0; k < 6; k++) {
            double t0 = tools__now_s();
            sample_pass(k, sm, c, perm, nbatch, fan, ew, ne, &e[k], &e0[k]);
            if (r >= 0)
                tt[k][r] = tools__now_s() - t0;
        }
        /* every weight is > 0, so a weighted seed hop takes as many edges
         * as a uniform one (the next hop's frontier differs) */
        if (e[0] != e[1] || e0[2] != e0[1] || e0[5] != e0[4]) {
            tools__check_failed(
                "sampling: %zu edges in-process, %zu through the servers; "
                "seed hop %zu uniform, %zu weighted by 'w'; out-edges %zu "
                "uniform, %zu weighted",
                e[0], e[1], e0[1], e0[2], e0[4], e0[5]);
            out->ok = 0;
        }
        out->edges = e[0];
        out->pedges = e[2];
        out->wedges = e[3];
        out->oedges = e[4];
        out->opedges = e[5];
    }
    /* one batch compared node list by node list (range partitioning keeps
     * node IDs; edge IDs are renumbered) */
    {
        const int64_t *sv[1] = {perm};
        size_t sn[1] = {BATCH};
        gkv_sample_opts o = {0};
        gkv_block wb[2], cb[2];
        int64_t *keep[2];
        size_t kn[2];

        if (gkv_sample_blocks(sm, sv, sn, fan, 1, 2, &o, wb) != GKV_OK)
            tools__die("sample_blocks: %s", gkv_sampler_errmsg(sm));
        for (int i = 0; i < 2; i++) {
            kn[i] = wb[i].nodes[0].num_src;
            keep[i] = tools__xmalloc(kn[i] * 8 + 8);
            memcpy(keep[i], wb[i].nodes[0].ids, kn[i] * 8);
        }
        if (gkv_client_sample_blocks(c, sv, sn, fan, 1, 2, &o, cb) != GKV_OK)
            tools__die("client sample_blocks: %s", gkv_net_errmsg());
        for (int i = 0; i < 2; i++) {
            if (cb[i].nodes[0].num_src != kn[i] ||
                memcmp(cb[i].nodes[0].ids, keep[i], kn[i] * 8) != 0) {
                tools__check_failed(
                    "sampling: block %d's nodes differ from in-process", i);
                out->ok = 0;
            }
            free(keep[i]);
        }
    }
    out->inproc_s = tools__median(ti, reps);
    out->net_s = tools__median(tn, reps);
    out->inproc_eps = (double)out->edges / out->inproc_s;
    out->net_eps = (double)out->edges / out->net_s;
    out->prob_s = tools__median(tp, reps);
    out->prob_eps = (double)out->pedges / out->prob_s;
    out->wip_s = tools__median(tw, reps);
    out->wip_eps = (double)out->wedges / out->wip_s;
    out->out_eps = (double)out->oedges / tools__median(to, reps);
    out->oprob_eps = (double)out->opedges / tools__median(tq, reps);
    gkv_client_close(c);
    tools__bench_stop(srv[0]);
    tools__bench_stop(srv[1]);
    gkv_sampler_free(sm);
    gkv_sgraph_free(sg);
    free(perm);
    free(ti);
    free(tn);
    free(tp);
    free(tw);
    free(to);
    free(tq);
    free(ew);
}

static void
print_sample(const struct sres *sr, int scale, int nbatch)
{
    printf("RESULT net_sample scale=%d parts=2 servers=2 batch=%d "
           "fanouts=15,10 batches=%d reps=%d edges=%zu "
           "inproc_edges_s=%.3g net_edges_s=%.3g ratio=%.2f "
           "target=0.5 verify=%s\n", scale, BATCH, nbatch, reps,
           sr->edges, sr->inproc_eps, sr->net_eps,
           sr->net_eps / sr->inproc_eps, sr->ok ? "ok" : "FAIL");
    printf("RESULT net_sample_prob scale=%d batch=%d fanouts=15,10 "
           "feature=f32 net_prob_edges_s=%.3g inproc_weighted_edges_s=%.3g "
           "ratio=%.2f net_uniform_edges_s=%.3g ratio_to_uniform=%.2f "
           "verify=%s\n", scale, BATCH, sr->prob_eps, sr->wip_eps,
           sr->prob_eps / sr->wip_eps, sr->net_eps, sr->prob_eps / sr->net_eps,
           sr->ok ? "ok" : "FAIL");
    printf("RESULT net_sample_out scale=%d batch=%d fanouts=15,10 "
           "net_out_edges_s=%.3g net_out_prob_edges_s=%.3g "
           "prob_ratio_to_uniform=%.2f prob_out_ratio_to_prob_in=%.2f "
           "verify=%s\n", scale, BATCH, sr->out_eps, sr->oprob_eps,
           sr->oprob_eps / sr->out_eps, sr->oprob_eps / sr->prob_eps,
           sr->ok ? "ok" : "FAIL");
}

/* ---- main ------------------------------------------------------------------------------ */

static void
usage(FILE *f)
{
    fputs("usage: " PROG " [--quick] [--reps N] [--scale N] [--rows N] "
          "[--no-redis] [--no-sample] [--no-pull] [--pull-only]\n"
          "  --quick      20,000 rows, scale 16 (a smoke run)\n"
          "  --reps N     timed reps per figure (median; default 5)\n"
          "  --scale N    R-MAT scale of the sampling graph (default 20)\n"
          "  --rows N     rows pulled (default 100000; the tensor has 2x)\n"
          "  --no-pull    only the sampling figure (part d)\n"
          "  --pull-only  only the 1-server pull and its references (parts "
          "a, b)\n"
          "stdout: RESULT lines and a table; stderr: progress.\n", f);
}

int
main(int argc, char **argv)
{
    size_t n = 100000, nrows;
    int scale = 20, nbatch = 64, no_redis = 0, no_sample = 0, no_pull = 0;
    int pull_only = 0;
    char st[2][PATH_MAX], cfg[PATH_MAX + 16], text[128];
    uint64_t split1[2], split2[3], x = 12345;
    uint64_t *ids;
    float *dst, *want, *all;
    double t1, t2 = 0, ttcp, tred = 0, tpush[2] = {0, 0};
    struct placement plc = {0};
    const char *redis_how = "";
    double tred2[2] = {0, 0};
    struct sres sr = {0};
    struct cpu_use cpu = {0};
    struct tcpref tr;
    gkv_client *c;
    pid_t p0, p1;
    int base, rfd;
    uint64_t rows_arg = 0;
    int quick = 0, rc;
    const struct tools_opt opts[] = {
        {"--quick", OPT_FLAG, .dst = &quick},
        {"--reps", OPT_INT, .dst = &reps, .lo = 1, .hi = 1000000},
        {"--scale", OPT_INT, .dst = &scale, .lo = 12, .hi = 26},
        {"--rows", OPT_U64, .dst = &rows_arg, .lo = 1000, .hi = 1ull << 40},
        {"--no-redis", OPT_FLAG, .dst = &no_redis},
        {"--no-sample", OPT_FLAG, .dst = &no_sample},
        {"--no-pull", OPT_FLAG, .dst = &no_pull},
        {"--pull-only", OPT_FLAG, .dst = &pull_only},
        {NULL},
    };
    const struct tools_opt_parser parser = {
        .prog = PROG, .opts = opts, .usage = usage,
    };

    tools__prog = PROG;
    if ((rc = tools__opt_parse(&parser, argc, argv)) != 0)
        return rc;
    if (quick) {
        n = 20000;
        scale = 16;
        nbatch = 16;
    }
    n = rows_arg != 0 ? (size_t)rows_arg : n;
    if (pull_only)
        no_sample = 1;
    if (no_pull && (no_sample || pull_only))
        return tools__usage_error(PROG, "--no-pull with --no-sample or "
                                  "--pull-only leaves nothing to measure");
    nrows = 2 * n;
    tools__bench_init("gkv-bench-net");

    if (no_pull) {
        bench_sample(scale, nbatch, &sr);
        print_sample(&sr, scale, nbatch);
        return tools__checks_failed ? 1 : 0;
    }
    rt_base = tools__roundtrip_base();
    /* the stores: one with every row, two with half each */
    snprintf(st[0], sizeof st[0], "%s/one", tools__bench_dir);
    make_store(st[0], 0, nrows);
    ids = tools__xmalloc(n * sizeof *ids);
    {
        uint64_t *perm = tools__xmalloc(nrows * sizeof *perm);
        for (size_t i = 0; i < nrows; i++)
            perm[i] = i;
        for (size_t i = nrows - 1; i > 0; i--) {
            size_t j = (size_t)(tools__splitmix64(&x) % (i + 1));
            uint64_t v = perm[i];
            perm[i] = perm[j];
            perm[j] = v;
        }
        memcpy(ids, perm, n * sizeof *ids);
        free(perm);
    }
    dst = tools__xmalloc(n * RB);
    want = tools__xmalloc(n * RB);
    split1[0] = 0;
    split1[1] = nrows;
    expect_rows(st, split1, 1, ids, n, want);

    /* (a) one server */
    tools__note("pull: %zu random rows of %zu bytes from one server ...", n,
                (size_t)RB);
    base = tools__bench_ports(8);
    snprintf(cfg, sizeof cfg, "%s/ip1.cfg", tools__bench_dir);
    snprintf(text, sizeof text, "127.0.0.1 %d\n", base);
    tools__bench_write_file(cfg, text);
    p0 = tools__bench_server(cfg, 0, base, st[0], NULL, NULL);
    c = tools__bench_connect(cfg);
    tcp_open(&tr, n * RB);
    cpu.server = p0;
    t1 = time_pull(c, ids, n, dst, want, "one server", &tr, &ttcp, &plc,
                   &cpu);
    tcp_close(&tr);
    gkv_client_close(c);
    tools__bench_stop(p0);

    /* (b) Redis */
    if (!no_redis && (rfd = redis_start()) >= 0) {
        struct resp r = {rfd, tools__xmalloc(8u << 20), 8u << 20, 0, 0};
        gkv_store *s;

        tools__note("redis: loading %zu rows ...", nrows);
        all = tools__xmalloc(nrows * RB);
        if (gkv_store_open(&s, st[0], GKV_RDONLY, NULL) != GKV_OK)
            tools__die("store: %s", gkv_store_errmsg(NULL));
        for (uint64_t lo = 0; lo < nrows; lo += 10000) {
            uint64_t rid[10000];
            size_t kk = nrows - lo < 10000 ? nrows - lo : 10000;
            for (size_t j = 0; j < kk; j++)
                rid[j] = lo + j;
            if (gkv_tensor_pull(s, NULL, "feat", rid, kk, all + lo * D,
                                kk * RB) != GKV_OK)
                tools__die("read: %s", gkv_store_errmsg(s));
        }
        gkv_store_close(s);
        redis_load(&r, all, nrows);
        free(all);
        tred = time_redis(&r, ids, n, dst, want, &redis_how, tred2);
        close(rfd);
        free(r.b);
        tools__bench_stop(redis_pid);
    }

    /* (c) two servers, half the rows each */
    if (!pull_only) {
        tools__note("pull: the same rows from 2 servers ...");
        snprintf(st[0], sizeof st[0], "%s/half0", tools__bench_dir);
        snprintf(st[1], sizeof st[1], "%s/half1", tools__bench_dir);
        make_store(st[0], 0, n);
        make_store(st[1], n, nrows);
        split2[0] = 0;
        split2[1] = n;
        split2[2] = nrows;
        expect_rows(st, split2, 2, ids, n, want);
        base = tools__bench_ports(16);
        snprintf(cfg, sizeof cfg, "%s/ip2.cfg", tools__bench_dir);
        snprintf(text, sizeof text, "127.0.0.1 %d\n127.0.0.1 %d\n", base,
                 base + 8);
        tools__bench_write_file(cfg, text);
        p0 = tools__bench_server(cfg, 0, base, st[0], NULL, NULL);
        p1 = tools__bench_server(cfg, 1, base + 8, st[1], NULL, NULL);
        c = tools__bench_connect(cfg);
        t2 = time_pull(c, ids, n, dst, want, "two servers", NULL, NULL, NULL,
                       NULL);
        gkv_client_close(c);
        tools__bench_stop(p0);
        tools__bench_stop(p1);
    }

    /* (e) pushes to one server, direct and in write-back mode; the IDs
     * are distinct (a push's duplicate IDs would make the check ambiguous) */
    if (!pull_only) {
        static const char *const direct[] = {"--nosync", NULL};
        static const char *const wback[] = {"--nosync", "--writeback", "feat",
                                            NULL};
        float *rows = tools__xmalloc(n * RB);
        uint64_t *pids = tools__xmalloc(n * sizeof *pids);

        /* a tensor 10x the pushed rows (1 GB at the default 100,000), as
         * in gkv-bench's push: a direct push rewrites the chunks it
         * touches, so its cost grows with the tensor */
        for (size_t i = 0; i < n; i++)
            pids[i] = ids[i] * 5 + (tools__splitmix64(&x) % 5);   /* distinct */
        memcpy(rows, want, n * RB);
        snprintf(st[0], sizeof st[0], "%s/push", tools__bench_dir);
        make_store(st[0], 0, 10 * (uint64_t)n);
        base = tools__bench_ports(8);
        snprintf(cfg, sizeof cfg, "%s/ip3.cfg", tools__bench_dir);
        snprintf(text, sizeof text, "127.0.0.1 %d\n", base);
        tools__bench_write_file(cfg, text);
        for (int w = 0; w < 2; w++) {
            tools__note("push: %zu random rows to one server%s ...", n,
                        w ? " in write-back mode" : "");
            p0 = tools__bench_server(cfg, 0, base, st[0], NULL, w ? wback : direct);
            c = tools__bench_connect(cfg);
            tpush[w] = time_push(c, pids, n, rows, dst,
                                 w ? "write-back push" : "direct push");
            gkv_client_close(c);
            tools__bench_stop(p0);
        }
        free(rows);
        free(pids);
        tools__bench_rmtree(st[0]);
    }

    /* (d) sampling */
    if (!no_sample)
        bench_sample(scale, nbatch, &sr);

    {
        double bytes = (double)n * RB;
        printf("RESULT net_pull servers=1 rows=%zu row_bytes=%zu reps=%d "
               "GBs=%.3f rows_s=%.3g verify=%s\n",
               n, (size_t)RB, reps, bytes / t1 / 1e9, (double)n / t1,
               tools__checks_failed ? "FAIL" : "ok");
        printf("RESULT tcp_stream bytes=%.0f reps=%d GBs=%.3f\n", bytes, reps,
               bytes / ttcp / 1e9);
        printf("RESULT net_pull_vs_tcp ratio=%.2f target=0.8\n", ttcp / t1);
        printf("RESULT net_pull_placement roundtrip_ns_min=%.0f "
               "roundtrip_ns_median=%.0f far_reps=%d reps=%d "
               "pull_vs_tcp_near=%.2f\n", plc.rt_min, plc.rt_med, plc.far,
               reps, plc.near);
        {
            double gb = bytes * reps / 1e9;
            printf("RESULT net_pull_cpu client_s_per_GB=%.3f "
                   "server_s_per_GB=%.3f tcp_recv_s_per_GB=%.3f "
                   "tcp_send_s_per_GB=%.3f pull_over_tcp=%.2f\n",
                   cpu.pull_client / gb, cpu.pull_server / gb,
                   cpu.tcp_recv / gb, cpu.tcp_send / gb,
                   (cpu.pull_client + cpu.pull_server) /
                       (cpu.tcp_recv + cpu.tcp_send + 1e-12));
        }
        if (tred > 0) {
            printf("RESULT redis_mget rows=%zu batch=1000 mode='%s' reps=%d "
                   "GBs=%.3f rows_s=%.3g pipelined_GBs=%.3f "
                   "one_at_a_time_GBs=%.3f\n", n, redis_how, reps,
                   bytes / tred / 1e9, (double)n / tred,
                   bytes / tred2[0] / 1e9, bytes / tred2[1] / 1e9);
            printf("RESULT net_pull_vs_redis ratio=%.2f target=8\n", tred / t1);
        } else {
            printf("RESULT redis_mget skipped=%s\n", no_redis ? "--no-redis" :
                   "redis-server-missing");
        }
        if (!pull_only) {
            printf("RESULT net_pull servers=2 rows=%zu row_bytes=%zu reps=%d "
                   "GBs=%.3f rows_s=%.3g ratio_to_1=%.2f\n", n, (size_t)RB,
                   reps, bytes / t2 / 1e9, (double)n / t2, t1 / t2);
            printf("RESULT net_push mode=direct sync=nosync rows=%zu "
                   "row_bytes=%zu tensor_rows=%zu reps=%d rows_s=%.3g "
                   "GBs=%.3f\n", n, (size_t)RB, 10 * n, reps,
                   (double)n / tpush[0], bytes / tpush[0] / 1e9);
            printf("RESULT net_push mode=writeback sync=nosync rows=%zu "
                   "row_bytes=%zu tensor_rows=%zu reps=%d rows_s=%.3g GBs=%.3f "
                   "x_direct=%.2f\n", n, (size_t)RB, 10 * n, reps,
                   (double)n / tpush[1], bytes / tpush[1] / 1e9,
                   tpush[0] / tpush[1]);
            if (!no_sample)
                print_sample(&sr, scale, nbatch);
        }
        printf("\n%-40s %14s %10s\n", "figure", "value", "ratio");
        printf("%-40s %11.3f GB/s %10s\n", "pull, 1 server", bytes / t1 / 1e9, "");
        printf("%-40s %11.3f GB/s %9.2fx\n", "plain TCP stream (same bytes)",
               bytes / ttcp / 1e9, ttcp / t1);
        if (tred > 0)
            printf("%-40s %11.3f GB/s %9.2fx\n", "Redis MGET of 1000 (faster "
                   "mode)", bytes / tred / 1e9, tred / t1);
        if (!pull_only) {
            printf("%-40s %11.3f GB/s %9.2fx\n", "pull, 2 servers",
                   bytes / t2 / 1e9, t1 / t2);
            printf("%-40s %9.3g rows/s %10s\n", "push (assign), 1 server, "
                   "direct", (double)n / tpush[0], "");
            printf("%-40s %9.3g rows/s %9.2fx\n", "push, 1 server, "
                   "--writeback", (double)n / tpush[1], tpush[0] / tpush[1]);
        }
        if (!no_sample) {
            printf("%-40s %9.3g edges/s %10s\n", "sampling in-process (1 thread)",
                   sr.inproc_eps, "");
            printf("%-40s %9.3g edges/s %9.2fx\n", "sampling via 2 servers",
                   sr.net_eps, sr.net_eps / sr.inproc_eps);
        }
        printf("(ratios: gkv over the reference for TCP and Redis, 2 servers "
               "over 1, write-back over direct pushes, distributed over "
               "in-process)\n");
    }
    free(ids);
    free(dst);
    free(want);
    return tools__checks_failed ? 1 : 0;
}
