/* gkv-bench-graph - the graph-sampling benchmark.
 *
 * Builds a Graph500-style R-MAT graph (gkv_rmat_graph: 2^scale nodes, edge
 * factor 16, a=.57 b=.19 c=.19, vertex labels permuted), its CSC through
 * gkv_sgraph_from_graph (timed: CSC build edges/s on 1 and 2 threads), and
 * samples DGL-style blocks with gkv_sample_blocks:
 *
 *   - batches of 1,024 distinct random seeds (consecutive slices of a random
 *     permutation of the nodes), uniform, without replacement, in-edges;
 *   - fanouts "15,10" and "15,10,5" counted from the seeds, as the anchor
 *     bench/anchors/sample_csc counts them: the seed hop takes 15. In
 *     gkv's (DGL's) order, fanouts[i] belongs to blocks[i] and blocks[0] is
 *     the input layer, so they are passed as [10,15] and [5,10,15];
 *   - sampled edges/s = edges emitted over all layers / time; each figure
 *     is the median of 5 reps of 64 batches, three ways in turn rep by
 *     rep: 1 thread; a sampler of 2 threads on each batch ("2 in 1", the
 *     target: >= 1.8x 1 thread); two samplers of 1 thread, each its own
 *     batches ("2 x 1", what the loader's workers do). Beside each, the
 *     process's CPU time per batch (on a shared machine the work, where
 *     the wall clock says little); before each rep, a cache line's round
 *     trip between two threads, which tells the reps where the host ran
 *     the two vCPUs far apart (over twice the shortest round trip, five
 *     of which are taken at the start) from the others (RESULT
 *     graph_sample_placement: the ratios of the others beside the
 *     medians of all);
 *   - the machine's own bound: random 8-byte reads over 256 MiB, 32 in
 *     flight per thread, on 1 thread and on 2 at once.
 *
 * Before timing, a few batches per configuration are verified: node lists
 * unique with destination nodes first, every edge an edge of the graph with
 * its edge ID, min(in-degree, fanout) edges per destination node, no edge
 * twice per node, and the 2-thread blocks identical to the 1-thread ones.
 * Any failure makes the exit status 1.
 *
 * When bench/anchors/sample_csc.c exists (or --anchor-src names it),
 * it is built next to this program (cc -O2 -march=native) and run in the
 * same run with the same scale, fanouts, batch size and reps; its
 * sampled_edges_s and build_edges_s are printed beside ours with the
 * ratios. Targets: >= 1.0x the anchor on 1 thread, >= 1.8x on 2 threads.
 * The anchor works on a deduplicated uint32 CSC and returns no edge IDs;
 * gkv keeps parallel edges, uses int64 IDs and returns edge IDs.
 *
 * usage: gkv-bench-graph [--scale N | --quick] [--reps N] [--batches N]
 *                        [--anchor-src PATH | --no-anchor]
 * stdout: one "RESULT ..." line per figure, then a table. Exit status 0,
 * 1 when a check failed or something could not run, 2 on bad usage.
 */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gkv.h"
#include "gkv_sample.h"
#include "opt.h"
#include "util.h"

#define PROG  "gkv-bench-graph"
#define BATCH 1024

/* ---- the graph and its checks ----------------------------------------- */

static gkv_graph *graph;
static gkv_coo coo;
static gkv_adj csc;          /* the sgraph's CSC, borrowed */
static int64_t nnodes;
static int32_t *mark;        /* verification: node -> local ID, -1 */

/* Checks one batch of blocks (see the header comment). */
static void
verify(const gkv_block *b, int nl, const int *fan, const int64_t *seeds,
       const char *what)
{
    for (int l = nl - 1; l >= 0; l--) {
        const gkv_block_nodes *bn = &b[l].nodes[0];
        const gkv_sample_edges *be = &b[l].edges[0];
        const int64_t *want = l == nl - 1 ? seeds : b[l + 1].nodes[0].ids;
        size_t nwant = l == nl - 1 ? BATCH : b[l + 1].nodes[0].num_src, e = 0;
        if (bn->num_dst != nwant) {
            tools__check_failed("%s layer %d: %zu destination nodes, want %zu",
                                what, l, bn->num_dst, nwant);
            return;
        }
        for (size_t i = 0; i < bn->num_src; i++) {
            int64_t v = bn->ids[i];
            if (v < 0 || v >= nnodes || mark[v] >= 0) {
                tools__check_failed(
                    "%s layer %d: node %lld bad or listed twice", what, l,
                    (long long)v);
                goto reset;
            }
            if (i < nwant && v != want[i]) {
                tools__check_failed(
                    "%s layer %d: destination %zu is %lld, want %lld", what, l,
                    i, (long long)v, (long long)want[i]);
                goto reset;
            }
            mark[v] = (int32_t)i;
        }
        for (size_t i = 0; i < bn->num_dst; i++) {
            int64_t v = bn->ids[i], deg = csc.indptr[v + 1] - csc.indptr[v];
            int64_t k = fan[l], exp = deg < k ? deg : k;
            size_t e0 = e;
            while (e < be->n && be->dst[e] == (int64_t)i) {
                int64_t ls = be->src[e], id = be->eid[e];
                if (ls < 0 || (size_t)ls >= bn->num_src || id < 0 ||
                    id >= coo.n || coo.dst[id] != v ||
                    coo.src[id] != bn->ids[ls]) {
                    tools__check_failed(
                        "%s layer %d: edge %zu (local %lld -> %zu, eid "
                        "%lld) is not an edge of the graph",
                        what, l, e, (long long)ls, i, (long long)id);
                    goto reset;
                }
                for (size_t q = e0; q < e; q++)
                    if (be->eid[q] == id) {
                        tools__check_failed("%s layer %d: edge %lld twice",
                                            what, l, (long long)id);
                        goto reset;
                    }
                e++;
            }
            if ((int64_t)(e - e0) != exp) {
                tools__check_failed(
                    "%s layer %d: node %lld (in-degree %lld) got %zu edges, "
                    "want %lld",
                    what, l, (long long)v, (long long)deg, e - e0,
                    (long long)exp);
                goto reset;
            }
        }
        if (e != be->n)
            tools__check_failed(
                "%s layer %d: %zu edges after the last destination", what, l,
                be->n - e);
reset:
        for (size_t i = 0; i < bn->num_src; i++)
            if (bn->ids[i] >= 0 && bn->ids[i] < nnodes)
                mark[bn->ids[i]] = -1;
    }
}

/* 1 if two batches of blocks are identical. */
static int
same_blocks(const gkv_block *a, const gkv_block *b, int nl)
{
    for (int l = 0; l < nl; l++) {
        const gkv_block_nodes *x = &a[l].nodes[0], *y = &b[l].nodes[0];
        const gkv_sample_edges *p = &a[l].edges[0], *q = &b[l].edges[0];
        if (x->num_src != y->num_src || x->num_dst != y->num_dst ||
            p->n != q->n ||
            memcmp(x->ids, y->ids, x->num_src * 8) != 0 ||
            memcmp(p->src, q->src, p->n * 8) != 0 ||
            memcmp(p->dst, q->dst, p->n * 8) != 0 ||
            memcmp(p->eid, q->eid, p->n * 8) != 0)
            return 0;
    }
    return 1;
}

/* The 1-minute load average (-1 when unknown): other processes on the
 * cores make every figure here lower, the 2-thread ones most. */
static double
loadavg(void)
{
    FILE *fp = fopen("/proc/loadavg", "r");
    double l = -1;

    if (fp != NULL) {
        if (fscanf(fp, "%lf", &l) != 1)
            l = -1;
        fclose(fp);
    }
    return l;
}

/* ---- the anchor --------------------------------------------------------- */

static char anchor_bin[PATH_MAX];
static int anchor_ok;

static void
anchor_build(const char *src)
{
    char self[PATH_MAX], dir[PATH_MAX], cmd[3 * PATH_MAX];
    ssize_t n;
    struct stat st;

    if (src == NULL || stat(src, &st) != 0) {
        tools__note("anchor source %s not found: no anchor figures",
             src ? src : "(none)");
        return;
    }
    n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        tools__die("readlink /proc/self/exe: %s", strerror(errno));
    self[n] = '\0';
    snprintf(dir, sizeof dir, "%s", self);
    snprintf(anchor_bin, sizeof anchor_bin, "%s/sample_csc", dirname(dir));
    snprintf(cmd, sizeof cmd, "cc -O2 -march=native -o '%s' '%s'", anchor_bin,
             src);
    tools__note("building the anchor: %s", cmd);
    if (system(cmd) != 0) {
        tools__check_failed("could not build the anchor (%s)", cmd);
        return;
    }
    anchor_ok = 1;
}

/* Runs the anchor; fills its sampled and build edges/s (0 when missing). */
static void
anchor_run(int scale, const char *fans, int reps, int batches, double *sampled,
           double *build)
{
    char cmd[PATH_MAX + 128], line[4096];
    FILE *fp;
    int got = 0;

    *sampled = *build = 0;
    if (!anchor_ok)
        return;
    snprintf(cmd, sizeof cmd, "'%s' %d %s %d %d %d", anchor_bin, scale, fans,
             BATCH, reps, batches);
    tools__note("running the anchor: %s", cmd);
    if ((fp = popen(cmd, "r")) == NULL) {
        tools__check_failed("could not run the anchor: %s", strerror(errno));
        return;
    }
    while (fgets(line, sizeof line, fp) != NULL) {
        char *p;
        if (strncmp(line, "RESULT sample_csc", 17) != 0)
            continue;
        printf("%s", line);
        if ((p = strstr(line, " sampled_edges_s=")) != NULL)
            *sampled = strtod(p + 17, NULL);
        if ((p = strstr(line, " build_edges_s=")) != NULL)
            *build = strtod(p + 15, NULL);
        got = 1;
    }
    if (pclose(fp) != 0 || !got || *sampled <= 0)
        tools__check_failed("the anchor failed or printed no sampled_edges_s");
}

/* ---- main --------------------------------------------------------------- */

static void
usage(FILE *fp)
{
    fprintf(fp,
            "usage: " PROG " [--scale N | --quick] [--reps N] [--batches N]\n"
            "                       [--anchor-src PATH | --no-anchor]\n"
            "  --scale N       R-MAT scale (default 20; 22 for the large run)\n"
            "  --quick         scale 16 (a smoke run)\n"
            "  --reps N        timed repetitions per figure (default 5)\n"
            "  --batches N     batches of 1024 seeds per rep (default 64)\n"
            "  --anchor-src P  the anchor's source (default "
            "bench/anchors/sample_csc.c)\n"
            "  --no-anchor     do not build or run the anchor\n");
}

/* The ways a figure samples: one thread; a sampler of 2 threads on each
 * batch; 2 threads with a 1-thread sampler each, each its own batches. */
enum { WAY_1T, WAY_2T, WAY_BATCHPAR, NWAY };
static const char *const way_name[NWAY] = {"one", "intra", "batchpar"};
static const char *const way_label[NWAY] = {"1", "2 in 1", "2 x 1"};

struct result {
    const char *fans;
    int way;
    double eps, epb, cpu, anchor;
    double base;                /* the 1-thread figure beside it */
};

/* This process's CPU time, all threads, in seconds. */
static double
cpu_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Batches first, first + step, ... < batches of a rep starting at batch
 * bi, on sampler s; their edges are summed in edges. */
struct bp_arg {
    gkv_sampler *s;
    const int64_t *seeds;
    int64_t nbatch, bi;
    int batches, first, step, nl;
    const int *fan;
    size_t edges;
};

static void *
bp_run(void *p)
{
    struct bp_arg *a = p;

    a->edges = 0;
    for (int k = a->first; k < a->batches; k += a->step) {
        int64_t bi = a->bi + k;
        const int64_t *seeds = a->seeds + (size_t)(bi % a->nbatch) * BATCH;
        size_t n = BATCH;
        gkv_block b[3];
        gkv_sample_opts o;
        memset(&o, 0, sizeof o);
        o.seed = (uint64_t)bi;
        if (gkv_sample_blocks(a->s, &seeds, &n, a->fan, 1, a->nl, &o, b) !=
            GKV_OK)
            tools__die("gkv_sample_blocks: %s", gkv_sampler_errmsg(a->s));
        for (int l = 0; l < a->nl; l++)
            a->edges += b[l].edges[0].n;
    }
    return NULL;
}

/* ---- the machine's own bound: random reads on 1 and 2 threads ---------- */

#define MR_WORDS  ((size_t)32 << 20)      /* 256 MiB of uint64 */
#define MR_READS  ((long)1 << 24)         /* per thread and rep */

static const uint64_t *mr_buf;
static double mr_one, mr_two, mr_ratio;
static double rt_base;       /* the shortest of 5 round trips at the start */

struct mr_arg {
    uint64_t seed, sum;
};

/* MR_READS random 8-byte reads, 32 prefetched ahead in each group, as the
 * sampler's pipeline keeps many misses in flight. */
static void *
mr_run(void *p)
{
    struct mr_arg *a = p;
    uint64_t x = a->seed | 1, sum = 0;
    size_t ix[32];

    for (long i = 0; i < MR_READS; i += 32) {
        for (int k = 0; k < 32; k++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ix[k] = (size_t)(x >> 11) % MR_WORDS;
            __builtin_prefetch(mr_buf + ix[k]);
        }
        for (int k = 0; k < 32; k++)
            sum += mr_buf[ix[k]];
    }
    a->sum = sum;
    return NULL;
}

/* Random-read throughput of 1 thread and of 2 at once (medians of reps,
 * in turn): how far 2 threads can go on this machine's memory, whatever
 * the sampler does. */
static void
memref(int reps)
{
    uint64_t *buf = malloc(MR_WORDS * sizeof *buf);
    double one[1000], two[1000];

    if (buf == NULL) {
        tools__note("no memory for the random-read reference");
        return;
    }
    for (size_t i = 0; i < MR_WORDS; i++)
        buf[i] = i;
    mr_buf = buf;
    for (int r = 0; r < reps; r++) {
        struct mr_arg a[2] = {{.seed = 11 + (uint64_t)r},
                              {.seed = 977 + (uint64_t)r}};
        pthread_t th;
        double t0 = tools__now_s();
        mr_run(&a[0]);
        one[r] = (double)MR_READS / (tools__now_s() - t0);
        t0 = tools__now_s();
        if (pthread_create(&th, NULL, mr_run, &a[1]) != 0)
            tools__die("pthread_create failed");
        mr_run(&a[0]);
        pthread_join(th, NULL);
        two[r] = 2.0 * (double)MR_READS / (tools__now_s() - t0);
        if (a[0].sum == 42)               /* keeps the reads */
            tools__note("(sum)");
    }
    mr_one = tools__median(one, reps);
    mr_two = tools__median(two, reps);
    mr_ratio = mr_two / mr_one;
    printf("RESULT graph_memref reads_s_1thread=%.4g reads_s_2threads=%.4g "
           "ratio=%.3f\n", mr_one, mr_two, mr_ratio);
    free(buf);
}

int
main(int argc, char **argv)
{
    int scale = 20, reps = 5, batches = 64, use_anchor, quick = 0;
    int no_anchor = 0, rc;
    const char *anchor_src = "bench/anchors/sample_csc.c";
    const struct tools_opt opts[] = {
        {"--quick", OPT_FLAG, .dst = &quick},
        {"--scale", OPT_INT, .dst = &scale, .lo = 11, .hi = 30},
        {"--reps", OPT_INT, .dst = &reps, .lo = 1, .hi = 1000},
        {"--batches", OPT_INT, .dst = &batches, .lo = 1, .hi = 100000},
        {"--anchor-src", OPT_STR, .dst = &anchor_src},
        {"--no-anchor", OPT_FLAG, .dst = &no_anchor},
        {NULL},
    };
    const struct tools_opt_parser parser = {
        .prog = PROG, .opts = opts, .usage = usage,
    };
    static const struct {
        const char *name;        /* seed hop first, as the anchor */
        int nl;
        int fan[3];              /* DGL order: fan[i] for blocks[i] */
    } cfg[2] = {{"15,10", 2, {10, 15}}, {"15,10,5", 3, {5, 10, 15}}};
    struct result res[2 * NWAY];
    struct {
        double rt_min, rt_med, near2, nearb;
        int far;
    } plc[2];
    int nres = 0;
    gkv_rmat_spec sp;
    gkv_sgraph *sg = NULL;
    double t0, gen_s, build[2][5], build_med[2], a_build = 0, load0;
    int64_t *perm;
    int64_t nbatch;
    uint64_t rs = 42;

    tools__prog = PROG;
    if ((rc = tools__opt_parse(&parser, argc, argv)) != 0)
        return rc;
    if (quick)
        scale = 16;
    use_anchor = !no_anchor;
    if (use_anchor)
        anchor_build(anchor_src);
    load0 = loadavg();
    rt_base = tools__roundtrip_base();

    memset(&sp, 0, sizeof sp);
    sp.scale = scale;
    sp.seed = 2026;
    t0 = tools__now_s();
    if (gkv_rmat_graph(&graph, &sp, 2) != GKV_OK)
        tools__die("gkv_rmat_graph failed");
    gen_s = tools__now_s() - t0;
    nnodes = gkv_graph_num_nodes(graph, 0);
    gkv_graph_edges(graph, 0, &coo);
    tools__note("R-MAT scale %d: %lld nodes, %lld edges, generated in %.2f s (2 "
         "threads)", scale, (long long)nnodes, (long long)coo.n, gen_s);

    /* CSC build, 1 and 2 threads */
    for (int t = 0; t < 2; t++) {
        int nb = scale >= 22 ? 1 : 3;
        for (int r = 0; r < nb; r++) {
            gkv_sgraph *x;
            t0 = tools__now_s();
            if (gkv_sgraph_from_graph(&x, graph, 0, t + 1) != GKV_OK)
                tools__die("gkv_sgraph_from_graph: %s", gkv_sgraph_errmsg(NULL));
            build[t][r] = (double)coo.n / (tools__now_s() - t0);
            if (sg == NULL)
                sg = x;
            else
                gkv_sgraph_free(x);
        }
        build_med[t] = tools__median(build[t], nb);
        printf("RESULT graph_csc_build scale=%d threads=%d edges=%lld "
               "build_edges_s=%.4g\n", scale, t + 1, (long long)coo.n,
               build_med[t]);
    }
    gkv_sgraph_adj(sg, 0, GKV_DIR_IN, &csc);
    mark = tools__xmalloc((size_t)nnodes * sizeof *mark);
    memset(mark, 0xff, (size_t)nnodes * sizeof *mark);

    /* seeds: a random permutation, cut into batches */
    perm = tools__xmalloc((size_t)nnodes * sizeof *perm);
    for (int64_t i = 0; i < nnodes; i++)
        perm[i] = i;
    for (int64_t i = nnodes - 1; i > 0; i--) {
        int64_t j = (int64_t)(tools__splitmix64(&rs) % (uint64_t)(i + 1));
        int64_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    nbatch = nnodes / BATCH;

    for (int c = 0; c < 2; c++) {
        gkv_sampler *s[2], *sbp;
        double anchor_eps = 0, ab;
        for (int t = 0; t < 2; t++)
            if (gkv_sampler_new(&s[t], sg, t + 1) != GKV_OK)
                tools__die("gkv_sampler_new failed");
        if (gkv_sampler_new(&sbp, sg, 1) != GKV_OK)
            tools__die("gkv_sampler_new failed");
        /* verify: 8 batches on 1 thread, and 2 threads give the same */
        for (int v = 0; v < 8; v++) {
            const int64_t *seeds = perm + (size_t)(v % nbatch) * BATCH;
            size_t n = BATCH;
            gkv_block b1[3], b2[3];
            gkv_sample_opts o;
            char what[64];
            memset(&o, 0, sizeof o);
            o.seed = (uint64_t)v;
            if (gkv_sample_blocks(s[0], &seeds, &n, cfg[c].fan, 1, cfg[c].nl,
                                  &o, b1) != GKV_OK ||
                gkv_sample_blocks(s[1], &seeds, &n, cfg[c].fan, 1, cfg[c].nl,
                                  &o, b2) != GKV_OK) {
                tools__check_failed("gkv_sample_blocks: %s",
                                    gkv_sampler_errmsg(s[0]));
                continue;
            }
            snprintf(what, sizeof what, "fanouts %s batch %d", cfg[c].name,
                     v);
            verify(b1, cfg[c].nl, cfg[c].fan, seeds, what);
            if (!same_blocks(b1, b2, cfg[c].nl))
                tools__check_failed("%s: 2 threads differ from 1", what);
        }
        /* the three ways, rep by rep in turn, so that the machine's load
         * weighs on each alike */
        {
            double eps[NWAY][1000], cpu[NWAY][1000], tot_e[NWAY] = {0};
            double rt[1000];
            int nnear;
            for (int r = 0; r < reps; r++) {
                rt[r] = tools__roundtrip_ns();
                for (int w = 0; w < NWAY; w++) {
                    struct bp_arg a[2];
                    double c0 = cpu_now();
                    size_t edges;
                    t0 = tools__now_s();
                    if (w == WAY_BATCHPAR) {
                        pthread_t th;
                        for (int i = 0; i < 2; i++)
                            a[i] = (struct bp_arg){
                                .s = i == 0 ? s[0] : sbp,
                                .seeds = perm, .nbatch = nbatch,
                                .bi = (int64_t)r * batches, .batches = batches,
                                .first = i, .step = 2, .fan = cfg[c].fan,
                                .nl = cfg[c].nl};
                        if (pthread_create(&th, NULL, bp_run, &a[1]) != 0)
                            tools__die("pthread_create failed");
                        bp_run(&a[0]);
                        pthread_join(th, NULL);
                        edges = a[0].edges + a[1].edges;
                    } else {
                        a[0] = (struct bp_arg){
                            .s = s[w], .seeds = perm, .nbatch = nbatch,
                            .bi = (int64_t)r * batches, .batches = batches,
                            .first = 0, .step = 1, .fan = cfg[c].fan,
                            .nl = cfg[c].nl};
                        bp_run(&a[0]);
                        edges = a[0].edges;
                    }
                    eps[w][r] = (double)edges / (tools__now_s() - t0);
                    cpu[w][r] = (cpu_now() - c0) / batches;
                    tot_e[w] += (double)edges;
                }
            }
            /* the reps whose threads were near each other */
            {
                double lo;
                plc[c].rt_med = tools__median(rt, reps);
                plc[c].near2 = tools__near_ratio(rt, reps, eps[WAY_2T],
                                                 eps[WAY_1T], rt_base, &lo,
                                                 &nnear);
                plc[c].nearb = tools__near_ratio(rt, reps,
                                                 eps[WAY_BATCHPAR],
                                                 eps[WAY_1T], rt_base, &lo,
                                                 &nnear);
                plc[c].rt_min = lo;
                plc[c].far = reps - nnear;
                printf("RESULT graph_sample_placement scale=%d fanouts=%s "
                       "roundtrip_ns_min=%.0f roundtrip_ns_median=%.0f "
                       "far_reps=%d reps=%d vs_1thread_near=%.3f "
                       "batchpar_vs_1thread_near=%.3f\n", scale, cfg[c].name,
                       lo, plc[c].rt_med, plc[c].far, reps, plc[c].near2,
                       plc[c].nearb);
            }
            for (int w = 0; w < NWAY; w++) {
                res[nres].fans = cfg[c].name;
                res[nres].way = w;
                res[nres].eps = tools__median(eps[w], reps);
                res[nres].cpu = tools__median(cpu[w], reps);
                res[nres].epb = tot_e[w] / ((double)reps * batches);
                nres++;
            }
        }
        for (int t = 0; t < 2; t++)
            gkv_sampler_free(s[t]);
        gkv_sampler_free(sbp);
        if (use_anchor) {
            anchor_run(scale, cfg[c].name, reps, batches, &anchor_eps, &ab);
            if (ab > 0)
                a_build = ab;
        }
        for (int w = 0; w < NWAY; w++) {
            struct result *x = &res[nres - NWAY + w];
            x->anchor = anchor_eps;
            x->base = res[nres - NWAY].eps;
            printf("RESULT graph_sample scale=%d fanouts=%s dgl_fanouts=%s "
                   "batch=%d threads=%d way=%s edges_per_batch=%.0f "
                   "sampled_edges_s=%.4g cpu_ms_per_batch=%.3f "
                   "vs_1thread=%.3f anchor_sampled_edges_s=%.4g "
                   "ratio=%.3f\n", scale, cfg[c].name,
                   c == 0 ? "10,15" : "5,10,15", BATCH,
                   w == WAY_1T ? 1 : 2, way_name[w], x->epb, x->eps, x->cpu * 1e3,
                   x->eps / x->base, anchor_eps,
                   anchor_eps > 0 ? x->eps / anchor_eps : 0.0);
        }
    }
    memref(reps);

    printf("\nR-MAT scale %d: %lld nodes, %lld edges; batches of %d distinct "
           "seeds; median of %d reps x %d batches\n", scale,
           (long long)nnodes, (long long)coo.n, BATCH, reps, batches);
    printf("CSC build (gkv_sgraph_from_graph): 1 thread %.1f M edges/s, 2 "
           "threads %.1f M edges/s", build_med[0] / 1e6, build_med[1] / 1e6);
    if (a_build > 0)
        printf("; anchor (counting sort, uint32) %.1f M edges/s",
               a_build / 1e6);
    printf("\n\n%-9s %-9s %-13s %10s %10s %8s %7s %10s %7s %7s\n",
           "fanouts", "DGL", "threads", "edges/bat", "M edges/s", "CPU ms/b",
           "vs 1T", "anchor 1T", "ratio", "target");
    for (int i = 0; i < nres; i++) {
        const struct result *x = &res[i];
        char ratio[16] = "-", an[16] = "-", vs[16];
        if (x->anchor > 0) {
            snprintf(ratio, sizeof ratio, "%.2fx", x->eps / x->anchor);
            snprintf(an, sizeof an, "%.1f", x->anchor / 1e6);
        }
        snprintf(vs, sizeof vs, "%.2fx", x->eps / x->base);
        printf("%-9s %-9s %-13s %10.0f %10.1f %8.3f %7s %10s %7s %7s\n",
               x->fans, strcmp(x->fans, "15,10") == 0 ? "[10,15]" : "[5,10,15]",
               way_label[x->way], x->epb, x->eps / 1e6, x->cpu * 1e3,
               x->way == WAY_1T ? "-" : vs, an, ratio,
               x->way == WAY_1T ? ">=1.0x" : x->way == WAY_2T ? ">=1.8x 1T"
                                                                : "-");
    }
    if (mr_ratio > 0)
        printf("random 8-byte reads over 256 MiB (32 in flight per thread): "
               "1 thread %.1f M/s, 2 threads %.1f M/s, %.2fx\n",
               mr_one / 1e6, mr_two / 1e6, mr_ratio);
    for (int c = 0; c < 2; c++) {
        printf("%s: a cache line's round trip between two threads %.0f ns "
               "(shortest, at the start or before a rep) to %.0f (median of "
               "the reps); %d of %d reps ran with the threads far apart "
               "(over twice the shortest)", cfg[c].name, plc[c].rt_min,
               plc[c].rt_med, plc[c].far, reps);
        if (plc[c].far < reps)
            printf("; in the others 2 in 1 ran %.2fx and 2 x 1 %.2fx one "
                   "thread (medians)", plc[c].near2, plc[c].nearb);
        printf("\n");
    }
    printf("(2 in 1: one sampler of 2 threads, each batch split between "
           "them; 2 x 1: two samplers of 1 thread, each its own batches, as "
           "the loader's workers; CPU ms/b: the process's CPU time per "
           "batch, the workers' waits included)\n");
    printf("(fanouts counted from the seeds: the seed hop takes 15; the DGL "
           "column is what gkv_sample_blocks is given)\n");
    printf("load average at the start %.2f, at the end %.2f (with %ld "
           "cores; other work on them lowers every figure, the 2-thread "
           "ones most)\n", load0, loadavg(), sysconf(_SC_NPROCESSORS_ONLN));
    if (tools__checks_failed > 0)
        printf("\n%d CHECKS FAILED\n", tools__checks_failed);
    gkv_sgraph_free(sg);
    gkv_graph_free(graph);
    free(mark);
    free(perm);
    return tools__checks_failed > 0 ? 1 : 0;
}
