/* gkv-bench-gpu - the GPU benchmark (gpu/gkv_gpu.h), each figure beside
 * the reference it is judged against, measured in the same run:
 *
 *   1. device-resident gather: a feature cache holding every row in device
 *      memory gathers n random rows; output bytes/s as a ratio to a
 *      device-to-device cudaMemcpy of the same number of bytes (target
 *      >= 0.85x);
 *   2. zero-copy gather: the same with every row in pinned host memory,
 *      as a ratio to a pinned host-to-device copy of the same bytes
 *      (target >= 0.7x);
 *   3. sampling: R-MAT (Graph500 parameters, edge factor 16) at --scale,
 *      fanouts [15,10] counted from the seeds (DGL order [10,15]), uniform,
 *      without replacement, with relabelling; sampled edges/s on the GPU
 *      (target >= 1e9 on an H100) beside gkv_sample_blocks on 1 and 2 CPU
 *      threads, with batches of --batch seeds; then the GPU alone with
 *      batches 16 times larger (a GPU batch pays a fixed cost of about 20
 *      kernel launches and 4 waits for sizes). The first GPU batch is
 *      checked against the CPU's blocks, and the rows of both gathers
 *      against gkv_tensor_pull().
 *
 * The tensor is created in a temporary store ($TMPDIR) and removed at the
 * end. Each figure is the median of --reps timed runs after one warm-up.
 *
 * usage: gkv-bench-gpu [--scale N] [--rows N] [--row-bytes N] [--n N]
 *                      [--batch N] [--batches N] [--reps N]
 * stdout: "RESULT ..." lines. Without a CUDA device (or built without
 * CUDA) it prints "RESULT gpu skipped=no-device" and exits 0, or 1 when
 * GKV_REQUIRE_GPU=1 (tools/gpu-remote.sh sets it: on the lent GPU machine a
 * missing device is a failure). Exit status 1 when a check or a call
 * failed, 2 on bad usage.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gkv.h"
#include "opt.h"
#include "util.h"
#ifdef GKV_HAVE_CUDA
#include "gpu/gkv_gpu.h"
#endif

#define PROG "gkv-bench-gpu"

static void
usage(FILE *f)
{
    fprintf(f, "usage: %s [--scale N] [--rows N] [--row-bytes N] [--n N]\n"
            "                     [--batch N] [--batches N] [--reps N]\n"
            "  --scale N      R-MAT scale for sampling (default 22)\n"
            "  --rows N       feature rows (default 2097152)\n"
            "  --row-bytes N  bytes per row, a multiple of 4 (default 512)\n"
            "  --n N          rows per gather (default 1048576)\n"
            "  --batch N      seeds per sampling batch (default 1024)\n"
            "  --batches N    batches per timed run (default 64)\n"
            "  --reps N       timed runs per figure, median kept (default 5)\n",
            PROG);
}

#define MAX_REPS 101

struct args {
    int scale, reps, nbatch;
    uint64_t rows, rb, n, batch;
};

/* Fills *a from argv: 0, or 2 after a usage error (its message printed). */
static int
parse_args(int argc, char **argv, struct args *a)
{
    const struct tools_opt opts[] = {
        {"--scale", OPT_INT, .dst = &a->scale, .lo = 4, .hi = 30},
        {"--rows", OPT_U64, .dst = &a->rows, .lo = 1, .hi = 1ull << 40},
        {"--row-bytes", OPT_U64, .dst = &a->rb, .lo = 4, .hi = 1u << 20},
        {"--n", OPT_U64, .dst = &a->n, .lo = 1, .hi = 1ull << 40},
        {"--batch", OPT_U64, .dst = &a->batch, .lo = 1, .hi = 1ull << 30},
        {"--batches", OPT_INT, .dst = &a->nbatch, .lo = 1, .hi = 1 << 20},
        {"--reps", OPT_INT, .dst = &a->reps, .lo = 1, .hi = MAX_REPS},
        {NULL},
    };
    const struct tools_opt_parser parser = {
        .prog = PROG, .opts = opts, .usage = usage,
    };
    int rc;

    a->scale = 22;
    a->reps = 5;
    a->nbatch = 64;
    a->rows = 1ull << 21;
    a->rb = 512;
    a->n = 1ull << 20;
    a->batch = 1024;
    if ((rc = tools__opt_parse(&parser, argc, argv)) != 0)
        return rc;
    if (a->rb % 4 != 0 || a->batch > (1ull << a->scale))
        return tools__usage_error(PROG, "--row-bytes must be a multiple of 4 "
                                  "and --batch at most 2^scale");
    return 0;
}

/* 1 when GKV_REQUIRE_GPU=1: no device is then a failure, not a skip. */
static int
gpu_required(void)
{
    const char *v = getenv("GKV_REQUIRE_GPU");

    return v != NULL && strcmp(v, "1") == 0;
}

#ifndef GKV_HAVE_CUDA

int
main(int argc, char **argv)
{
    struct args a;
    int rc;

    if ((rc = parse_args(argc, argv, &a)) != 0)
        return rc;
    printf("# %s: built without CUDA (make CUDA=no or no nvcc)\n", PROG);
    printf("RESULT gpu skipped=no-device\n");
    if (gpu_required())
        return 1;
    return 0;
}

#else

static void
die(const char *what, gkv_err rc, const char *msg)
{
    fprintf(stderr, "%s: %s: %s%s%s\n", PROG, what, gkv_strerror(rc),
            msg != NULL && msg[0] ? ": " : "", msg != NULL ? msg : "");
    exit(1);
}

#define GPU(call, what)                                                     \
    do {                                                                    \
        gkv_err rc_ = (call);                                               \
        if (rc_ != GKV_OK)                                                  \
            die((what), rc_, gkv_gpu_errmsg());                             \
    } while (0)


/* The median of 'reps' timings of fn(ctx) (each synchronised), after a
 * warm-up. */
static double
median_of(int reps, void (*fn)(void *), void *ctx)
{
    double t[MAX_REPS];

    fn(ctx);
    GPU(gkv_gpu_sync(NULL), "sync");
    for (int r = 0; r < reps; r++) {
        double t0 = tools__now_s();
        fn(ctx);
        GPU(gkv_gpu_sync(NULL), "sync");
        t[r] = tools__now_s() - t0;
    }
    return tools__median(t, reps);
}

struct copy_ctx {
    void *dst;
    const void *src;
    size_t bytes;
};

static void
run_copy(void *p)
{
    struct copy_ctx *c = p;

    GPU(gkv_gpu_copy(c->dst, c->src, c->bytes, NULL), "copy");
}

struct gather_ctx {
    gkv_gpu_feat *f;
    const int64_t *ids_dev;
    size_t n;
    void *out_dev;
};

static void
run_gather(void *p)
{
    struct gather_ctx *g = p;

    GPU(gkv_gpu_feat_gather(g->f, g->ids_dev, g->n, g->out_dev, NULL),
        "gather");
}

/* ---- 1 and 2: gathers -------------------------------------------------- */

/* Exits 1 unless the n rows at out_dev are the store's rows of ids. */
static void
gather_check(gkv_store *st, const int64_t *ids, size_t n, size_t rb,
             const void *out_dev, const char *what)
{
    unsigned char *got = malloc(n * rb), *want = malloc(n * rb);
    gkv_err rc;

    if (got == NULL || want == NULL) {
        fprintf(stderr, "%s: out of memory for the gather check\n", PROG);
        exit(1);
    }
    if ((rc = gkv_tensor_pull(st, NULL, "feat", (const uint64_t *)ids, n,
                              want, n * rb)) != GKV_OK)
        die("gkv_tensor_pull", rc, gkv_store_errmsg(st));
    GPU(gkv_gpu_copy(got, out_dev, n * rb, NULL), "copy");
    GPU(gkv_gpu_sync(NULL), "sync");
    for (size_t i = 0; i < n; i++)
        if (memcmp(got + i * rb, want + i * rb, rb) != 0) {
            fprintf(stderr, "%s: %s gather: row %zu (ID %lld) differs from "
                    "the store's\n", PROG, what, i, (long long)ids[i]);
            exit(1);
        }
    free(got);
    free(want);
}

static void
bench_gather(const char *dev, int64_t rows, size_t rb, size_t n, int reps)
{
    char tmpl[512];
    const char *tmp = getenv("TMPDIR");
    gkv_store *st;
    gkv_tensor_spec sp;
    gkv_open_opts oo;
    gkv_gpu_feat_opts fo;
    gkv_gpu_feat *fd, *fh;
    int64_t *ids = malloc(n * sizeof *ids), *ids_dev;
    void *out_dev, *copy_dev, *pinned;
    uint64_t s = 42;
    double t_copy, t_h2d, t_dev, t_zc;
    double bytes = (double)n * (double)rb;
    char cmd[600];
    gkv_err rc;

    snprintf(tmpl, sizeof tmpl, "%s/gkv-bench-gpu.XXXXXX",
             tmp != NULL && tmp[0] ? tmp : "/tmp");
    if (ids == NULL || mkdtemp(tmpl) == NULL) {
        perror(PROG ": temporary store");
        exit(1);
    }
    memset(&oo, 0, sizeof oo);
    oo.map_size = (uint64_t)rows * rb * 2 + (64u << 20);
    if ((rc = gkv_store_open(&st, tmpl, GKV_CREATE | GKV_NOSYNC, &oo)) !=
        GKV_OK)
        die("gkv_store_open", rc, NULL);
    memset(&sp, 0, sizeof sp);
    sp.dtype = GKV_F32;
    sp.ndim = 1;
    sp.shape[0] = rb / 4;
    sp.lo = 0;
    sp.hi = (uint64_t)rows;
    sp.init = GKV_INIT_UNIFORM;
    sp.a = -1.0;
    sp.b = 1.0;
    if ((rc = gkv_tensor_create(st, "feat", &sp)) != GKV_OK)
        die("gkv_tensor_create", rc, gkv_store_errmsg(st));
    for (size_t i = 0; i < n; i++)
        ids[i] = (int64_t)(tools__splitmix64(&s) % (uint64_t)rows);
    memset(&fo, 0, sizeof fo);
    fo.budget_bytes = (size_t)rows * rb;
    GPU(gkv_gpu_feat_open(&fd, st, "feat", &fo), "gkv_gpu_feat_open (device)");
    fo.budget_bytes = 0;
    GPU(gkv_gpu_feat_open(&fh, st, "feat", &fo), "gkv_gpu_feat_open (host)");
    GPU(gkv_gpu_alloc(0, n * sizeof *ids, (void **)&ids_dev), "alloc");
    GPU(gkv_gpu_alloc(0, n * rb, &out_dev), "alloc");
    GPU(gkv_gpu_alloc(0, n * rb, &copy_dev), "alloc");
    GPU(gkv_gpu_host_alloc(n * rb, &pinned), "host alloc");
    memset(pinned, 1, n * rb);
    GPU(gkv_gpu_copy(ids_dev, ids, n * sizeof *ids, NULL), "copy");
    {
        struct copy_ctx d2d = {copy_dev, out_dev, n * rb};
        struct copy_ctx h2d = {copy_dev, pinned, n * rb};
        struct gather_ctx gd = {fd, ids_dev, n, out_dev};
        struct gather_ctx gh = {fh, ids_dev, n, out_dev};
        t_copy = median_of(reps, run_copy, &d2d);
        t_dev = median_of(reps, run_gather, &gd);
        t_h2d = median_of(reps, run_copy, &h2d);
        t_zc = median_of(reps, run_gather, &gh);
    }
    GPU(gkv_gpu_feat_sync(fd, NULL), "gather check");
    GPU(gkv_gpu_feat_sync(fh, NULL), "gather check");
    /* the rows of the last gather (zero-copy), then of a device one */
    gather_check(st, ids, n, rb, out_dev, "zero-copy");
    GPU(gkv_gpu_copy(out_dev, pinned, n * rb, NULL), "copy");   /* 0x01s */
    run_gather(&(struct gather_ctx){fd, ids_dev, n, out_dev});
    GPU(gkv_gpu_feat_sync(fd, NULL), "gather check");
    gather_check(st, ids, n, rb, out_dev, "device-resident");
    printf("RESULT gpu_gather device=\"%s\" where=device rows=%lld "
           "row_bytes=%zu n=%zu gather_GBps=%.1f d2d_copy_GBps=%.1f "
           "ratio=%.3f target=0.85\n", dev, (long long)rows, rb, n,
           bytes / t_dev * 1e-9, bytes / t_copy * 1e-9, t_copy / t_dev);
    printf("RESULT gpu_gather device=\"%s\" where=zero-copy rows=%lld "
           "row_bytes=%zu n=%zu gather_GBps=%.1f h2d_copy_GBps=%.1f "
           "ratio=%.3f target=0.7\n", dev, (long long)rows, rb, n,
           bytes / t_zc * 1e-9, bytes / t_h2d * 1e-9, t_h2d / t_zc);
    gkv_gpu_host_free(pinned);
    gkv_gpu_free(copy_dev);
    gkv_gpu_free(out_dev);
    gkv_gpu_free(ids_dev);
    gkv_gpu_feat_close(fh);
    gkv_gpu_feat_close(fd);
    gkv_store_close(st);
    free(ids);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpl);
    if (system(cmd) != 0)
        fprintf(stderr, "%s: could not remove %s\n", PROG, tmpl);
}

/* ---- 3: sampling ---------------------------------------------------------- */

static int
same_block(const gkv_gpu_block *g, const gkv_block *c)
{
    size_t ns = g->num_src, ne = g->num_edges;
    int64_t *h = malloc((ns + 4 * ne + 1) * sizeof *h);
    int ok;

    if (h == NULL)
        return 0;
    if (ns != c->nodes[0].num_src || g->num_dst != c->nodes[0].num_dst ||
        ne != c->edges[0].n) {
        free(h);
        return 0;
    }
    GPU(gkv_gpu_copy(h, g->ids_dev, ns * 8, NULL), "copy");
    GPU(gkv_gpu_copy(h + ns, g->src_dev, ne * 8, NULL), "copy");
    GPU(gkv_gpu_copy(h + ns + ne, g->dst_dev, ne * 8, NULL), "copy");
    GPU(gkv_gpu_copy(h + ns + 2 * ne, g->eid_dev, ne * 8, NULL), "copy");
    GPU(gkv_gpu_sync(NULL), "sync");
    ok = (ns == 0 || memcmp(h, c->nodes[0].ids, ns * 8) == 0) &&
         (ne == 0 || (memcmp(h + ns, c->edges[0].src, ne * 8) == 0 &&
                      memcmp(h + ns + ne, c->edges[0].dst, ne * 8) == 0 &&
                      memcmp(h + ns + 2 * ne, c->edges[0].eid, ne * 8) == 0));
    free(h);
    return ok;
}

static void
bench_sample(const char *dev, int scale, size_t batch, int nbatch, int reps)
{
    static const int fan[2] = {10, 15};       /* DGL order: seeds take 15 */
    gkv_rmat_spec rs;
    gkv_graph *g;
    gkv_sgraph *sg;
    gkv_adj a;
    gkv_sampler *cs[2];
    gkv_gpu_sgraph *gg;
    gkv_gpu_sampler *gs;
    int64_t N = (int64_t)1 << scale, *perm;
    uint64_t s = 7;
    double t_gpu[MAX_REPS], t_cpu[2][MAX_REPS], med_gpu, med_cpu[2];
    size_t edges_gpu = 0, edges_cpu[2] = {0, 0};
    gkv_err rc;

    memset(&rs, 0, sizeof rs);
    rs.scale = scale;
    rs.seed = 1;
    if ((rc = gkv_rmat_graph(&g, &rs, 2)) != GKV_OK)
        die("gkv_rmat_graph", rc, NULL);
    if ((rc = gkv_sgraph_from_graph(&sg, g, 0, 2)) != GKV_OK)
        die("gkv_sgraph_from_graph", rc, gkv_sgraph_errmsg(NULL));
    gkv_graph_free(g);
    if ((rc = gkv_sgraph_adj(sg, 0, GKV_DIR_IN, &a)) != GKV_OK)
        die("gkv_sgraph_adj", rc, gkv_sgraph_errmsg(sg));
    GPU(gkv_gpu_sgraph_new(&gg, &a, N, 0, 0), "gkv_gpu_sgraph_new");
    GPU(gkv_gpu_sampler_new(&gs, gg), "gkv_gpu_sampler_new");
    for (int t = 0; t < 2; t++)
        if ((rc = gkv_sampler_new(&cs[t], sg, t + 1)) != GKV_OK)
            die("gkv_sampler_new", rc, NULL);
    if ((perm = malloc((size_t)N * sizeof *perm)) == NULL)
        die("malloc", GKV_ENOMEM, NULL);
    for (int64_t i = 0; i < N; i++)
        perm[i] = i;
    for (int64_t i = N - 1; i > 0; i--) {
        int64_t j = (int64_t)(tools__splitmix64(&s) % (uint64_t)(i + 1));
        int64_t x = perm[i];
        perm[i] = perm[j];
        perm[j] = x;
    }
    if ((size_t)nbatch * batch > (size_t)N)
        nbatch = (int)((size_t)N / batch);
    /* check: the first batch on the GPU equals the CPU's */
    {
        const int64_t *sp[1] = {perm};
        size_t ns[1] = {batch};
        gkv_block cb[2];
        gkv_gpu_block gb[2];
        if ((rc = gkv_sample_blocks(cs[0], sp, ns, fan, 1, 2, NULL, cb)) !=
            GKV_OK)
            die("gkv_sample_blocks", rc, gkv_sampler_errmsg(cs[0]));
        GPU(gkv_gpu_sample_blocks(gs, perm, batch, fan, 2, NULL, gb, NULL),
            "gkv_gpu_sample_blocks");
        if (!same_block(&gb[0], &cb[0]) || !same_block(&gb[1], &cb[1])) {
            fprintf(stderr, "%s: GPU blocks differ from the CPU's\n", PROG);
            exit(1);
        }
    }
    for (int r = 0; r < reps; r++) {
        double t0 = tools__now_s();
        size_t e = 0;
        for (int b = 0; b < nbatch; b++) {
            gkv_gpu_block gb[2];
            GPU(gkv_gpu_sample_blocks(gs, perm + (size_t)b * batch, batch,
                                      fan, 2, NULL, gb, NULL),
                "gkv_gpu_sample_blocks");
            e += gb[0].num_edges + gb[1].num_edges;
        }
        GPU(gkv_gpu_sync(NULL), "sync");
        t_gpu[r] = tools__now_s() - t0;
        edges_gpu = e;
        for (int th = 0; th < 2; th++) {
            t0 = tools__now_s();
            e = 0;
            for (int b = 0; b < nbatch; b++) {
                const int64_t *sp[1] = {perm + (size_t)b * batch};
                size_t ns[1] = {batch};
                gkv_block cb[2];
                if ((rc = gkv_sample_blocks(cs[th], sp, ns, fan, 1, 2, NULL,
                                            cb)) != GKV_OK)
                    die("gkv_sample_blocks", rc, gkv_sampler_errmsg(cs[th]));
                e += cb[0].edges[0].n + cb[1].edges[0].n;
            }
            t_cpu[th][r] = tools__now_s() - t0;
            edges_cpu[th] = e;
        }
    }
    med_gpu = tools__median(t_gpu, reps);
    med_cpu[0] = tools__median(t_cpu[0], reps);
    med_cpu[1] = tools__median(t_cpu[1], reps);
    printf("RESULT gpu_sample device=\"%s\" scale=%d fanouts=15,10 batch=%zu "
           "batches=%d gpu_edges_s=%.4g cpu1_edges_s=%.4g cpu2_edges_s=%.4g "
           "gpu_over_cpu1=%.2f target_edges_s=1e9\n", dev, scale, batch,
           nbatch, (double)edges_gpu / med_gpu,
           (double)edges_cpu[0] / med_cpu[0],
           (double)edges_cpu[1] / med_cpu[1],
           ((double)edges_gpu / med_gpu) /
           ((double)edges_cpu[0] / med_cpu[0]));
    /* the GPU alone with large batches */
    {
        size_t big = batch * 16;
        int nb = (int)((size_t)N / big);
        if (nb > nbatch)
            nb = nbatch;
        if (nb >= 1) {
            double tb[MAX_REPS];
            size_t edges = 0;
            for (int r = 0; r < reps; r++) {
                double t0 = tools__now_s();
                size_t e = 0;
                for (int b = 0; b < nb; b++) {
                    gkv_gpu_block gb[2];
                    GPU(gkv_gpu_sample_blocks(gs, perm + (size_t)b * big, big,
                                              fan, 2, NULL, gb, NULL),
                        "gkv_gpu_sample_blocks");
                    e += gb[0].num_edges + gb[1].num_edges;
                }
                GPU(gkv_gpu_sync(NULL), "sync");
                tb[r] = tools__now_s() - t0;
                edges = e;
            }
            printf("RESULT gpu_sample device=\"%s\" scale=%d fanouts=15,10 "
                   "batch=%zu batches=%d gpu_edges_s=%.4g "
                   "target_edges_s=1e9\n", dev, scale, big, nb,
                   (double)edges / tools__median(tb, reps));
        }
    }
    free(perm);
    gkv_sampler_free(cs[0]);
    gkv_sampler_free(cs[1]);
    gkv_gpu_sampler_free(gs);
    gkv_gpu_sgraph_free(gg);
    gkv_sgraph_free(sg);
}

int
main(int argc, char **argv)
{
    struct args a;
    int ndev = 0, rc;
    char dev[256];

    if ((rc = parse_args(argc, argv, &a)) != 0)
        return rc;
    if (gkv_gpu_available(&ndev, dev, sizeof dev) != GKV_OK) {
        printf("# %s: %s\n", PROG, gkv_gpu_errmsg());
        printf("RESULT gpu skipped=no-device\n");
        return gpu_required();
    }
    printf("# %s: device 0 of %d: %s\n", PROG, ndev, dev);
    bench_gather(dev, (int64_t)a.rows, (size_t)a.rb, (size_t)a.n, a.reps);
    bench_sample(dev, a.scale, (size_t)a.batch, a.nbatch, a.reps);
    return 0;
}

#endif /* GKV_HAVE_CUDA */
