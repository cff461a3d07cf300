/* gkv-example-train - the example trainer: what a GNN training process
 * does with gkv, minus the model.
 *
 * Started by gkv-launch (or by hand with the same environment), it
 * connects to the job's graph servers, takes its share of the training
 * nodes (node_split of a training mask over the partitions), and for each
 * epoch takes its mini-batches from a gkv_loader (loader/gkv_loader.h):
 * blocks and the input nodes' feature rows (node/<ntype>/<feat>), made
 * ahead of time by the loader's worker threads (--loader-workers, default
 * GKV_LOADER_WORKERS or 2; --prefetch batches ahead), sampled where
 * --sample-on says: on the servers (default: one request a batch), through
 * them hop by hop (client), or in this process (local: a graph of one
 * partition). For each batch it computes a gradient-like update of the
 * input nodes and pushes it to an embedding table with Adagrad
 * (gkv_client_push, handler "adagrad") on a thread of its own, with a
 * client of its own (gkv_client_clone): the push of batch i runs while the
 * loader hands over batch i + 1 and its gradient is computed; at most one
 * push is outstanding (two gradient buffers in all), so memory stays
 * bounded, and the pushes reach the servers in batch order. It reports
 * batches/s, sampled edges/s and input MB/s per epoch, and how long a
 * batch waited for the loader and for the previous push.
 *
 * The training mask is the graph's own, as DGL's node_split(g.ndata[
 * 'train_mask']) takes it: tensor node/<ntype>/train_mask (gkv-partition
 * --node-feat train_mask=FILE.npy stores a bool mask as u8 0/1 in each
 * partition), pulled from the servers for every node of the type; --train-
 * mask NAME picks another node/<ntype>/NAME. Only when the servers hold no
 * node/<ntype>/train_mask (or with --train-frac) is it a random fraction
 * of the nodes. The log says which, and each trainer prints its share as
 * "rank R training nodes: n=N sum=S hash=H" (S the sum of the IDs, H the
 * xor of mix64(ID)) for scripts and tests to check.
 *
 * With --device N (a build with CUDA) the batches come to GPU N through
 * gkv_gpu_loader, which uploads the gkv_loader's batches (blocks and
 * rows), optionally reading this machine's partition rows from a GPU
 * feature cache (--gpu-cache-mb) instead of uploading them; the example
 * has no model on the device, so it copies the input IDs and rows back
 * for its host-side "gradient".
 *
 * The "gradient" of input node v is 0.01 x its feature row (cycled to the
 * embedding width): the point is the traffic, and that a second job sees
 * the embedding the first one left (it prints the embedding's mean
 * absolute value before and after). Where the embedding lives is the
 * servers' choice: with gkv-server --writeback node/<ntype>/emb (as make
 * demo starts them) its rows and Adagrad state stay in the servers'
 * RAM and reach their stores every --flush-ms; else every push is a
 * transaction of the store.
 *
 * Environment (set by gkv-launch; doc/DEPLOY.md): GKV_IP_CONFIG (required),
 * GKV_TOKEN_FILE, GKV_GROUP (default "example"), GKV_RANK (default 0),
 * GKV_WORLD_SIZE (default 1), GKV_LOADER_WORKERS (the default of
 * --loader-workers; gkv-launch --num-samplers K sets it), GKV_PART_CONFIG
 * (--sample-on local, --gpu-cache-mb), GKV_MACHINE (--gpu-cache-mb).
 */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gkv.h"
#include "loader/gkv_loader.h"
#include "opt.h"
#include "util.h"

#define PROG "gkv-example-train"
#define MAX_LAYERS 8

struct opts {
    int epochs, batch, nlayers, fan[MAX_LAYERS], emb_dim, timeout_ms;
    int max_batches, device;
    int gpu_cache_mb;
    int where, workers, prefetch;   /* GKV_LOADER_*, --loader-workers,
                                     * --prefetch */
    double lr, train_frac;
    int train_frac_set;          /* --train-frac given */
    uint64_t seed;
    const char *ntype, *feat, *emb, *train_mask;
};

static void
usage(FILE *f)
{
    fprintf(f,
"Usage: " PROG " [options]\n"
"\n"
"The example trainer: takes its mini-batches (blocks and the input nodes'\n"
"feature rows) from a gkv_loader, pushes Adagrad updates of the input\n"
"nodes to an embedding on a thread of its own (overlapping the next\n"
"batch), and reports batches/s, sampled edges/s and input MB/s. Run it\n"
"under gkv-launch, or set GKV_IP_CONFIG (and GKV_TOKEN_FILE, GKV_GROUP,\n"
"GKV_RANK, GKV_WORLD_SIZE) yourself.\n"
"\n"
"Options:\n"
"  --epochs N         epochs (default 1)\n"
"  --batch N          seeds per mini-batch (default 1024)\n"
"  --fanouts A,B,..   fanouts in DGL's order, input layer first\n"
"                     (default 10,15)\n"
"  --max-batches N    stop an epoch after N batches (default: all)\n"
"  --sample-on WHERE  where the loader samples: server (default: each\n"
"                     batch sampled and gathered on the servers in one\n"
"                     request), client (hop by hop through the servers,\n"
"                     rows pulled after) or local (in this process, on a\n"
"                     graph of one partition: needs GKV_PART_CONFIG)\n"
"  --loader-workers N the loader's worker threads (default\n"
"                     GKV_LOADER_WORKERS, which gkv-launch --num-samplers\n"
"                     sets, or 2)\n"
"  --prefetch K       batches made ahead of the one in use (default 4)\n"
"  --ntype NAME       node type of the seeds (default: the first)\n"
"  --feat NAME        feature pulled: node/<ntype>/NAME (default feat)\n"
"  --emb NAME         embedding pushed: node/<ntype>/NAME (default emb;\n"
"                     created when missing)\n"
"  --emb-dim N        its width (default 16)\n"
"  --lr X             Adagrad learning rate (default 0.05)\n"
"  --train-mask NAME  the training mask: node/<ntype>/NAME pulled from the\n"
"                     servers (non-zero: a training node), as gkv-partition\n"
"                     --node-feat NAME=FILE.npy stored it (default\n"
"                     train_mask, when the servers hold it)\n"
"  --train-frac X     a random fraction X of the nodes trains, not a mask\n"
"                     from the servers (without it: 0.6, only when the\n"
"                     servers hold no node/<ntype>/train_mask)\n"
"  --seed N           sampling and shuffling seed (default 1)\n"
"  --timeout-ms N     per-call timeout (default 30000)\n"
"  --device N         mini-batches (blocks and input features) on CUDA\n"
"                     device N: gkv_gpu_loader uploads the loader's\n"
"                     batches (a build with CUDA)\n"
"  --gpu-cache-mb M   with --device: keep this machine's partition rows of\n"
"                     the feature in a GPU cache, M MiB of them in device\n"
"                     memory (the rest zero-copy from pinned host memory);\n"
"                     needs GKV_PART_CONFIG and GKV_MACHINE (gkv-launch sets\n"
"                     them)\n"
"  -h, --help         this help\n"
"  -V, --version      print the version and exit\n"
"\n"
"Exit status: 0 done, 1 failed (the message names what), 2 bad usage.\n");
}

static int
parse_int(const char *s, long lo, long hi, long *out)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static int
opt_fanouts(void *ctx, const char *v)
{
    struct opts *o = ctx;
    char buf[256], *tok, *save;
    long x;

    snprintf(buf, sizeof buf, "%s", v);
    o->nlayers = 0;
    for (tok = strtok_r(buf, ",", &save); tok != NULL;
         tok = strtok_r(NULL, ",", &save)) {
        if (o->nlayers == MAX_LAYERS)
            return tools__usage_error(PROG, "fanouts '%s': at most 8 layers",
                                      v);
        if (parse_int(tok, -1, 1 << 20, &x) != 0 || x == 0)
            return tools__usage_error(PROG, "fanouts '%s': each must be -1 "
                                      "or a positive integer", v);
        o->fan[o->nlayers++] = (int)x;
    }
    if (o->nlayers == 0)
        return tools__usage_error(PROG, "fanouts '%s' is empty", v);
    return 0;
}

static int
opt_where(void *ctx, const char *v)
{
    struct opts *o = ctx;

    if (strcmp(v, "server") == 0)
        o->where = GKV_LOADER_SERVER;
    else if (strcmp(v, "client") == 0)
        o->where = GKV_LOADER_CLIENT;
    else if (strcmp(v, "local") == 0)
        o->where = GKV_LOADER_LOCAL;
    else
        return tools__usage_error(PROG, "--sample-on '%s': server, client or "
                                  "local", v);
    return 0;
}

static int
opt_train_mask(void *ctx, const char *v)
{
    struct opts *o = ctx;

    if (*v == '\0' || strchr(v, '/') != NULL || strchr(v, '#') != NULL)
        return tools__usage_error(PROG, "--train-mask '%s': a feature name, "
                                  "without '/' or '#' (node/<ntype>/ is "
                                  "added)", v);
    o->train_mask = v;
    return 0;
}

/* Fills *o from argv: 0, or 2 after a usage error (its message printed). */
static int
parse_args(int argc, char **argv, struct opts *o)
{
#define POSITIVE .lo = 1, .hi = 1 << 30, .bad = "is not a positive integer"
#define NATURAL .lo = 0, .hi = 1 << 30, .bad = "is not a non-negative integer"
    const struct tools_opt opts[] = {
        {"--epochs", OPT_INT, .dst = &o->epochs, POSITIVE},
        {"--batch", OPT_INT, .dst = &o->batch, POSITIVE},
        {"--emb-dim", OPT_INT, .dst = &o->emb_dim, POSITIVE},
        {"--timeout-ms", OPT_INT, .dst = &o->timeout_ms, POSITIVE},
        {"--max-batches", OPT_INT, .dst = &o->max_batches, POSITIVE},
        {"--loader-workers", OPT_INT, .dst = &o->workers, .lo = 1, .hi = 64,
         .bad = "is not a number of threads in 1..64"},
        {"--prefetch", OPT_INT, .dst = &o->prefetch, .lo = 1, .hi = 1024,
         .bad = "is not a number of batches in 1..1024"},
        {"--sample-on", OPT_FN, .fn = opt_where},
        {"--seed", OPT_U64, .dst = &o->seed, .lo = 0, .hi = 1ull << 62,
         .bad = "is not a non-negative integer"},
        {"--fanouts", OPT_FN, .fn = opt_fanouts, .flags = OPT_EMPTY_OK},
        {"--lr", OPT_DOUBLE, .dst = &o->lr, .dlo = DBL_MIN, .dhi = DBL_MAX,
         .bad = "is out of range (above 0)"},
        {"--train-frac", OPT_DOUBLE, .dst = &o->train_frac, .dlo = DBL_MIN,
         .dhi = 1, .bad = "is out of range (above 0, at most 1)"},
        {"--device", OPT_INT, .dst = &o->device, NATURAL},
        {"--gpu-cache-mb", OPT_INT, .dst = &o->gpu_cache_mb, NATURAL},
        {"--ntype", OPT_STR, .dst = &o->ntype, .flags = OPT_EMPTY_OK},
        {"--feat", OPT_STR, .dst = &o->feat, .flags = OPT_EMPTY_OK},
        {"--emb", OPT_STR, .dst = &o->emb, .flags = OPT_EMPTY_OK},
        {"--train-mask", OPT_FN, .fn = opt_train_mask, .flags = OPT_EMPTY_OK},
        {NULL},
    };
#undef POSITIVE
#undef NATURAL
    const struct tools_opt_parser parser = {
        .prog = PROG, .opts = opts, .usage = usage, .ctx = o,
        .version = PROG " (gkv) " GKV_VERSION_STRING,
    };
    int rc;

    memset(o, 0, sizeof *o);
    o->epochs = 1;
    o->batch = 1024;
    o->nlayers = 2;
    o->fan[0] = 10;
    o->fan[1] = 15;
    o->emb_dim = 16;
    o->timeout_ms = 30000;
    o->lr = 0.05;
    o->seed = 1;
    o->feat = "feat";
    o->emb = "emb";
    o->device = -1;
    o->gpu_cache_mb = -1;
    o->where = GKV_LOADER_SERVER;
    o->prefetch = 4;
    if ((rc = tools__opt_parse(&parser, argc, argv)) != 0)
        return rc;
    o->train_frac_set = o->train_frac != 0;   /* a given one is above 0 */
    if (!o->train_frac_set)
        o->train_frac = 0.6;
    if (o->train_mask != NULL && o->train_frac_set)
        return tools__usage_error(PROG, "--train-mask with --train-frac: give "
                                  "a mask or a fraction, not both");
    if (o->gpu_cache_mb >= 0 && o->device < 0)
        return tools__usage_error(PROG, "--gpu-cache-mb needs --device");
#ifndef GKV_HAVE_CUDA
    if (o->device >= 0)
        return tools__usage_error(PROG, "--device: this gkv was built without "
                                  "CUDA (make CUDA=yes)");
#endif
    return 0;
}

static uint64_t
mix64(uint64_t z)
{
    return tools__splitmix64(&z);
}

static long
env_long(const char *name, long dflt)
{
    const char *v = getenv(name);
    long x;

    if (v == NULL || *v == '\0')
        return dflt;
    if (parse_int(v, 0, 1L << 30, &x) != 0)
        tools__die("%s='%s' is not a non-negative integer", name, v);
    return x;
}

/* Mean |x| over rows ids[0..n) of the f32 embedding. */
static double
emb_mean_abs(gkv_client *c, const char *name, const uint64_t *ids, size_t n,
             int dim)
{
    float *rows = tools__xmalloc(n * (size_t)dim * sizeof *rows);
    double s = 0;
    gkv_err rc;

    rc = gkv_client_pull(c, name, ids, n, rows, n * (size_t)dim * sizeof *rows);
    if (rc != GKV_OK)
        tools__die("pull %s: %s: %s", name, gkv_strerror(rc), gkv_net_errmsg());
    for (size_t i = 0; i < n * (size_t)dim; i++)
        s += fabs((double)rows[i]);
    free(rows);
    return s / (double)(n * (size_t)dim);
}

#define CK(call, what)                                                       \
    do {                                                                     \
        gkv_err rc_ = (call);                                                \
        if (rc_ != GKV_OK)                                                   \
            tools__die("%s: %s: %s", (what), gkv_strerror(rc_),              \
                       gkv_net_errmsg());                                    \
    } while (0)

#ifdef GKV_HAVE_CUDA
#include "gpu/gkv_gpu.h"
#endif

/* The training mask of node type t, one byte per node (1: it trains),
 * for gkv_pbook_node_split: node/<ntype>/<--train-mask> pulled from the
 * servers for IDs 0..n-1 (by default node/<ntype>/train_mask when they
 * hold it), else (or with --train-frac) a random --train-frac of the
 * nodes. Says which on stdout, prefixed by 'who'. The caller frees it. */
static uint8_t *
train_mask_get(gkv_client *c, const gkv_pbook *b, int t, const struct opts *o,
               const char *who)
{
    const char *nt = gkv_pbook_ntype_name(b, t);
    int64_t n = gkv_pbook_num_nodes(b, t);
    uint8_t *mask = tools__xmalloc((size_t)n + 1), *rows;
    uint64_t *ids;
    char name[GKV_NAME_MAX + 1];
    gkv_tensor_desc d;
    size_t step = (size_t)1 << 20, cnt = 0;
    gkv_err rc = GKV_ENOTFOUND;

    snprintf(name, sizeof name, "node/%s/%s", nt,
             o->train_mask != NULL ? o->train_mask : "train_mask");
    if (!o->train_frac_set)
        rc = gkv_client_tensor_info(c, name, &d);
    if (rc != GKV_OK) {
        if (rc != GKV_ENOTFOUND)
            tools__die("training mask '%s': %s: %s", name, gkv_strerror(rc),
                       gkv_net_errmsg());
        if (o->train_mask != NULL)
            tools__die("--train-mask %s: the servers hold no tensor '%s' "
                       "(gkv-partition --node-feat %s=FILE.npy stores one)",
                       o->train_mask, name, o->train_mask);
        for (int64_t i = 0; i < n; i++) {
            mask[i] = (double)(mix64((uint64_t)i ^ 0x5eed) >> 11) * 0x1p-53 <
                      o->train_frac;
            cnt += mask[i];
        }
        if (o->train_frac_set)
            printf("%straining mask: a random %g of the nodes (--train-frac): "
                   "%zu of %lld '%s' nodes\n", who, o->train_frac, cnt,
                   (long long)n, nt);
        else
            printf("%straining mask: the servers hold no '%s'; a random %g of "
                   "the nodes (--train-frac): %zu of %lld '%s' nodes\n", who,
                   name, o->train_frac, cnt, (long long)n, nt);
        return mask;
    }
    if (d.row_elems != 1)
        tools__die("training mask '%s' has %llu values per node, not one",
                   name, (unsigned long long)d.row_elems);
    if (n > 0 && (d.lo != 0 || d.hi != (uint64_t)n))
        tools__die("training mask '%s' covers IDs [%llu, %llu), not the %lld "
                   "'%s' nodes", name, (unsigned long long)d.lo,
                   (unsigned long long)d.hi, (long long)n, nt);
    ids = tools__xmalloc(step * sizeof *ids);
    rows = tools__xmalloc(step * d.row_bytes);
    for (int64_t at = 0; at < n; at += (int64_t)step) {
        size_t k = (size_t)(n - at) < step ? (size_t)(n - at) : step;

        for (size_t i = 0; i < k; i++)
            ids[i] = (uint64_t)at + i;
        rc = gkv_client_pull(c, name, ids, k, rows, k * d.row_bytes);
        if (rc != GKV_OK)
            tools__die("pull the training mask '%s': %s: %s", name,
                       gkv_strerror(rc), gkv_net_errmsg());
        for (size_t i = 0; i < k; i++) {
            const uint8_t *r = rows + i * d.row_bytes;
            uint8_t nz = 0;

            for (size_t j = 0; j < d.row_bytes; j++)   /* non-zero: trains */
                nz |= r[j];
            mask[at + (int64_t)i] = nz != 0;
            cnt += nz != 0;
        }
    }
    free(ids);
    free(rows);
    printf("%straining mask: '%s' from the servers: %zu of %lld '%s' nodes\n",
           who, name, cnt, (long long)n, nt);
    return mask;
}

/* ---- the push thread ------------------------------------------------- *
 *
 * The Adagrad push of batch i runs on this thread, with a client of its
 * own (gkv_client_clone: a client belongs to one thread), while the main
 * thread takes batch i + 1 from the loader and computes its gradient into
 * the other buffer. pusher_hand() waits for the push before, so at most
 * one is outstanding and the pushes reach the servers in batch order (the
 * embedding ends as a serial loop leaves it). */
struct pusher {
    gkv_client     *c;
    pthread_t       th;
    pthread_mutex_t mu;
    pthread_cond_t  cv;
    int             busy, stop, failed;
    char            err[512];
    const char     *emb;
    gkv_push_args   pa;
    size_t          dim;
    /* the buffers: 'job' the thread pushes, 'next' the main thread fills */
    uint64_t       *job_ids, *next_ids;
    float          *job_grad, *next_grad;
    size_t          job_n, cap;
    double          push_s;          /* time spent pushing */
};

static void *
pusher_main(void *arg)
{
    struct pusher *p = arg;

    pthread_mutex_lock(&p->mu);
    for (;;) {
        double t0;
        gkv_err rc;

        while (!p->busy && !p->stop)
            pthread_cond_wait(&p->cv, &p->mu);
        if (!p->busy)
            break;
        pthread_mutex_unlock(&p->mu);
        t0 = tools__now_s();
        rc = gkv_client_push(p->c, p->emb, p->job_ids, p->job_n, p->job_grad,
                             p->job_n * p->dim * sizeof(float), &p->pa);
        pthread_mutex_lock(&p->mu);
        p->push_s += tools__now_s() - t0;
        if (rc != GKV_OK && !p->failed) {
            p->failed = 1;
            snprintf(p->err, sizeof p->err, "push the embedding '%s': %s: %s",
                     p->emb, gkv_strerror(rc), gkv_net_errmsg());
        }
        p->busy = 0;
        pthread_cond_broadcast(&p->cv);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static void
pusher_start(struct pusher *p, gkv_client *c, const char *emb, int dim,
             double lr)
{
    gkv_err rc;

    memset(p, 0, sizeof *p);
    p->emb = emb;
    p->dim = (size_t)dim;
    p->pa.handler = "adagrad";
    p->pa.lr = lr;
    if ((rc = gkv_client_clone(c, &p->c)) != GKV_OK)
        tools__die("a client for the push thread (gkv_client_clone): %s: %s",
                   gkv_strerror(rc), gkv_net_errmsg());
    if (pthread_mutex_init(&p->mu, NULL) != 0 ||
        pthread_cond_init(&p->cv, NULL) != 0 ||
        pthread_create(&p->th, NULL, pusher_main, p) != 0)
        tools__die("starting the push thread failed");
}

/* Waits until no push is outstanding; dies naming a failed one. Holds
 * p->mu on return. */
static void
pusher_wait_locked(struct pusher *p, double *waited)
{
    double t0 = tools__now_s();

    pthread_mutex_lock(&p->mu);
    while (p->busy)
        pthread_cond_wait(&p->cv, &p->mu);
    *waited += tools__now_s() - t0;
    if (p->failed)
        tools__die("%s", p->err);
}

/* Room for n rows in the buffer the main thread fills (p->next_*): only
 * the main thread touches 'next', so no lock. */
static void
pusher_reserve(struct pusher *p, size_t n)
{
    if (n <= p->cap)
        return;
    pthread_mutex_lock(&p->mu);          /* the job buffers too: same cap */
    while (p->busy)
        pthread_cond_wait(&p->cv, &p->mu);
    free(p->job_ids);
    free(p->job_grad);
    free(p->next_ids);
    free(p->next_grad);
    p->cap = n + n / 4 + 64;
    p->job_ids = tools__xmalloc(p->cap * sizeof *p->job_ids);
    p->next_ids = tools__xmalloc(p->cap * sizeof *p->next_ids);
    p->job_grad = tools__xmalloc(p->cap * p->dim * sizeof *p->job_grad);
    p->next_grad = tools__xmalloc(p->cap * p->dim * sizeof *p->next_grad);
    pthread_mutex_unlock(&p->mu);
}

/* Hands the n rows in p->next_* to the thread, after the push before
 * (the time waited for it added to *waited). */
static void
pusher_hand(struct pusher *p, size_t n, double *waited)
{
    uint64_t *ids;
    float *grad;

    pusher_wait_locked(p, waited);
    ids = p->job_ids;
    grad = p->job_grad;
    p->job_ids = p->next_ids;
    p->job_grad = p->next_grad;
    p->next_ids = ids;
    p->next_grad = grad;
    p->job_n = n;
    p->busy = 1;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

/* Waits for the outstanding push (dies naming a failed one). */
static void
pusher_drain(struct pusher *p, double *waited)
{
    pusher_wait_locked(p, waited);
    pthread_mutex_unlock(&p->mu);
}

static void
pusher_stop(struct pusher *p)
{
    double w = 0;

    pusher_drain(p, &w);
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->th, NULL);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    CK(gkv_client_close(p->c), "close the push thread's client");
    free(p->job_ids);
    free(p->job_grad);
    free(p->next_ids);
    free(p->next_grad);
}

/* ---- where the batches come from ------------------------------------- */

/* One batch as the main thread uses it: the input nodes of the seed type
 * and their feature rows (fw floats each), host memory valid until the
 * next call; the sampled edges. */
struct view {
    size_t         n_in;
    const int64_t *ids;
    const float   *rows;
    uint64_t       edges, cached;
};

static uint64_t
blocks_edges(const gkv_block *blk, int nlayers)
{
    uint64_t e = 0;

    for (int l = 0; l < nlayers; l++)
        for (int k = 0; k < blk[l].num_etypes; k++)
            e += blk[l].edges[k].n;
    return e;
}

#ifdef GKV_HAVE_CUDA

/* --device: the GPU loader (uploading the gkv_loader's batches it makes
 * from the host loader's options), and with --gpu-cache-mb a cache of
 * this machine's partition rows of the feature. */
struct gpu {
    gkv_gpu_loader *l;
    gkv_gpu_feat   *cache;
    gkv_part       *part;
    gkv_gpu_feat  **caches;       /* [num_ntypes], only t's set */
    int64_t        *ids;          /* the batch copied back */
    float          *rows;
    size_t          cap, rb;
};

#define GK(call, what)                                                       \
    do {                                                                     \
        gkv_err rc_ = (call);                                                \
        if (rc_ != GKV_OK)                                                   \
            tools__die("%s: %s: %s", (what), gkv_strerror(rc_),              \
                       gkv_gpu_errmsg());                                    \
    } while (0)

static void
gpu_open(struct gpu *g, gkv_client *c, const gkv_pbook *b,
         const struct opts *o, int t, const char *feat,
         const gkv_loader_opts *hlo)
{
    gkv_gpu_loader_opts lo;
    gkv_gpu_feat_opts fo;
    gkv_gpu_feat_info fi;
    gkv_adj adj;
    char name[64];

    memset(g, 0, sizeof *g);
    memset(&lo, 0, sizeof lo);
    if (gkv_gpu_available(NULL, name, sizeof name) != GKV_OK)
        tools__die("--device %d: %s", o->device, gkv_gpu_errmsg());
    lo.device = o->device;
    lo.feat = o->feat;
    lo.batches = hlo;
    if (o->gpu_cache_mb >= 0) {
        const char *pc = getenv("GKV_PART_CONFIG");
        long m = env_long("GKV_MACHINE", -1);

        if (pc == NULL || *pc == '\0' || m < 0)
            tools__die("--gpu-cache-mb needs GKV_PART_CONFIG and GKV_MACHINE "
                       "(the partition this machine serves); gkv-launch "
                       "sets them");
        if (gkv_part_open(&g->part, pc, (int)m, 0) != GKV_OK)
            tools__die("--gpu-cache-mb: partition %ld of %s: %s", m, pc,
                       gkv_part_errmsg(NULL));
        memset(&fo, 0, sizeof fo);
        fo.device = o->device;
        fo.budget_bytes = (size_t)o->gpu_cache_mb << 20;
        /* hot rows by in-degree on a graph of one edge type */
        if (gkv_pbook_num_etypes(b) == 1 &&
            gkv_part_csc(g->part, 0, &adj) == GKV_OK)
            fo.hot_adj = &adj;
        GK(gkv_gpu_feat_open(&g->cache, gkv_part_store(g->part), feat, &fo),
           "GPU feature cache");
        GK(gkv_gpu_feat_info_get(g->cache, &fi), "GPU feature cache");
        g->caches = tools__xcalloc((size_t)gkv_pbook_num_ntypes(b),
                                   sizeof *g->caches);
        g->caches[t] = g->cache;
        lo.cache = g->caches;
        printf("GPU %d (%s): cache of '%s' rows [%lld, %lld), %zu in device "
               "memory (%.1f MiB)\n", o->device, name, feat,
               (long long)fi.lo, (long long)fi.hi, fi.n_hot,
               (double)fi.dev_bytes / 1048576.0);
    }
    GK(gkv_gpu_loader_new(&g->l, c, &lo), "GPU loader");
}

static void
gpu_close(struct gpu *g)
{
    gkv_gpu_loader_free(g->l);
    gkv_gpu_feat_close(g->cache);
    gkv_part_close(g->part);
    free(g->caches);
    free(g->ids);
    free(g->rows);
}

/* The next batch on the device, its input nodes of type t and their rows
 * copied back into *v; 0 at the end of the epoch. */
static int
gpu_next(struct gpu *g, int t, struct view *v)
{
    gkv_gpu_batch bt;
    size_t n, rb;

    GK(gkv_gpu_loader_next_batch(g->l, &bt, NULL), "GPU mini-batch");
    if (bt.nlayers == 0)
        return 0;
    v->edges = blocks_edges(bt.blocks, bt.nlayers);
    v->cached = bt.rows_cached;
    n = bt.blocks[0].nodes[t].num_src;
    rb = bt.row_bytes[t];
    if (n > g->cap || g->ids == NULL) {
        free(g->ids);
        free(g->rows);
        g->cap = n + n / 4 + 64;
        g->ids = tools__xmalloc(g->cap * sizeof *g->ids);
        g->rows = tools__xmalloc(g->cap * rb);
    }
    if (n > 0) {
        GK(gkv_gpu_copy(g->ids, bt.blocks[0].nodes[t].ids, n * sizeof *g->ids,
                        NULL), "copy the input IDs back");
        GK(gkv_gpu_copy(g->rows, bt.feat_dev[t], n * rb, NULL),
           "copy the input rows back");
    }
    v->n_in = n;
    v->ids = g->ids;
    v->rows = g->rows;
    return 1;
}
#endif /* GKV_HAVE_CUDA */

/* The batches of this trainer: a gkv_loader, or on --device the GPU
 * loader over one. */
struct source {
    gkv_loader *l;
    gkv_batch  *held;            /* the host batch in use */
    gkv_part   *part;            /* --sample-on local */
    int         t, gpu;
#ifdef GKV_HAVE_CUDA
    struct gpu  g;
#endif
};

static const char *const where_names[] = {"local", "client", "server"};

static void
source_open(struct source *S, gkv_client *c, const gkv_pbook *b,
            const struct opts *o, int t, const char *feat, long rank,
            const int64_t *mine, size_t nmine)
{
    gkv_loader_opts lo;
    gkv_typed_tensor ft = {.type = t, .name = feat};
    gkv_err rc;

    memset(S, 0, sizeof *S);
    S->t = t;
    memset(&lo, 0, sizeof lo);
    lo.where = o->where;
    lo.client = c;
    if (o->where == GKV_LOADER_LOCAL) {
        const char *pc = getenv("GKV_PART_CONFIG");

        if (gkv_pbook_num_parts(b) != 1)
            tools__die("--sample-on local samples in this process on the "
                       "whole graph: it needs a graph of one partition, this "
                       "one has %d (use --sample-on server or client)",
                       gkv_pbook_num_parts(b));
        if (pc == NULL || *pc == '\0')
            tools__die("--sample-on local needs GKV_PART_CONFIG (the graph's "
                       "partition config; gkv-launch sets it)");
        if (gkv_part_open(&S->part, pc, 0, 0) != GKV_OK)
            tools__die("--sample-on local: partition 0 of %s: %s", pc,
                       gkv_part_errmsg(NULL));
        lo.part = S->part;
        lo.client = NULL;
    }
    lo.seed_ntype = t;
    lo.seeds = mine;
    lo.nseeds = nmine;
    lo.batch_size = (size_t)o->batch;
    lo.shuffle_seed = mix64(o->seed ^ ((uint64_t)rank << 20));
    lo.nlayers = o->nlayers;
    lo.nfan = 1;
    lo.fanouts = o->fan;
    lo.dir = GKV_DIR_IN;
    lo.sample_seed = o->seed;
    lo.feats = &ft;
    lo.nfeats = 1;
    lo.prefetch = o->prefetch;
    lo.workers = o->workers;
    if (nmine == 0)              /* no batches: no loader */
        return;
#ifdef GKV_HAVE_CUDA
    if (o->device >= 0) {
        S->gpu = 1;
        lo.feats = NULL;         /* the GPU loader names them */
        lo.nfeats = 0;
        gpu_open(&S->g, c, b, o, t, feat, &lo);
        return;
    }
#endif
    if ((rc = gkv_loader_new(&S->l, &lo)) != GKV_OK)
        tools__die("the loader (--sample-on %s): %s: %s",
                   where_names[o->where], gkv_strerror(rc), gkv_errmsg());
}

/* Starts epoch ep (the loader is on epoch 0 when opened). */
static void
source_epoch(struct source *S, uint64_t ep)
{
    gkv_batch_release(S->held);
    S->held = NULL;
#ifdef GKV_HAVE_CUDA
    if (S->gpu) {
        GK(gkv_gpu_loader_epoch(S->g.l, ep), "GPU loader epoch");
        return;
    }
#endif
    if (S->l != NULL)
        CK(gkv_loader_epoch(S->l, ep), "loader epoch");
}

/* The next batch into *v (valid until the next call); 0 at the end of
 * the epoch. */
static int
source_next(struct source *S, struct view *v)
{
    gkv_batch *bt;
    gkv_err rc;

    memset(v, 0, sizeof *v);
    gkv_batch_release(S->held);
    S->held = NULL;
#ifdef GKV_HAVE_CUDA
    if (S->gpu)
        return gpu_next(&S->g, S->t, v);
#endif
    if (S->l == NULL)
        return 0;
    if ((rc = gkv_loader_next(S->l, &bt)) != GKV_OK)
        tools__die("the next batch: %s: %s", gkv_strerror(rc), gkv_errmsg());
    if (bt == NULL)
        return 0;
    S->held = bt;
    v->edges = blocks_edges(bt->blocks, bt->nlayers);
    v->n_in = bt->blocks[0].nodes[S->t].num_src;
    v->ids = bt->blocks[0].nodes[S->t].ids;
    v->rows = bt->feat[0];
    return 1;
}

static void
source_close(struct source *S)
{
    gkv_batch_release(S->held);
    gkv_loader_free(S->l);
#ifdef GKV_HAVE_CUDA
    if (S->gpu)
        gpu_close(&S->g);
#endif
    gkv_part_close(S->part);
}

int
main(int argc, char **argv)
{
    struct opts o;
    const char *ipc = getenv("GKV_IP_CONFIG"), *tokf = getenv("GKV_TOKEN_FILE");
    const char *group = getenv("GKV_GROUP");
    long rank = env_long("GKV_RANK", 0), world = env_long("GKV_WORLD_SIZE", 1);
    char token[GKV_TOKEN_MAX + 1], feat[GKV_NAME_MAX + 1], emb[GKV_NAME_MAX + 1];
    char who[64];
    gkv_client_opts co;
    gkv_client *c;
    const gkv_pbook *b;
    gkv_tensor_desc fd;
    gkv_tensor_spec es;
    int t, rc;
    int64_t nnodes, *mine;
    size_t nmine, fw;
    uint8_t *mask;
    uint64_t probe[64];
    double before, after;
    struct source src;
    struct pusher push;

    tools__prog = PROG;
    if ((rc = parse_args(argc, argv, &o)) != 0)
        return rc;
    if (ipc == NULL || *ipc == '\0')
        tools__die("GKV_IP_CONFIG is not set: run under gkv-launch, or set "
                   "it to the job's ip_config file");
    if (group == NULL || *group == '\0')
        group = "example";
    if (world < 1 || rank >= world)
        tools__die("GKV_RANK=%ld with GKV_WORLD_SIZE=%ld: the rank must be "
                   "below the world size", rank, world);
    if (o.workers == 0) {
        long w = env_long("GKV_LOADER_WORKERS", 2);

        if (w < 1 || w > 64)
            tools__die("GKV_LOADER_WORKERS=%ld: the loader's worker threads "
                       "must be 1..64", w);
        o.workers = (int)w;
    }
    if (tokf != NULL && *tokf != '\0' &&
        gkv_token_load(tokf, token, sizeof token) != GKV_OK)
        tools__die("token: %s", gkv_net_errmsg());

    memset(&co, 0, sizeof co);
    co.timeout_ms = o.timeout_ms;
    co.group_size = (unsigned)world;
    CK(gkv_client_connect(&c, ipc, tokf != NULL && *tokf != '\0' ? token : NULL,
                          group, (uint32_t)rank, &co), "connect");
    if ((b = gkv_client_pbook(c)) == NULL)
        tools__die("the servers of %s serve a plain store, not a partitioned "
                   "graph (start them with --part-config)", ipc);
    if (o.ntype == NULL) {
        t = 0;
    } else if (gkv_pbook_ntype_find(b, o.ntype, &t) != GKV_OK) {
        tools__die("--ntype '%s': the graph has no such node type", o.ntype);
    }
    nnodes = gkv_pbook_num_nodes(b, t);
    snprintf(feat, sizeof feat, "node/%s/%s", gkv_pbook_ntype_name(b, t), o.feat);
    snprintf(emb, sizeof emb, "node/%s/%s", gkv_pbook_ntype_name(b, t), o.emb);
    if (gkv_client_tensor_info(c, feat, &fd) != GKV_OK)
        tools__die("the servers hold no feature tensor '%s' (--feat)", feat);
    if (fd.dtype != GKV_F32)
        tools__die("feature tensor '%s' is not f32", feat);
    fw = fd.row_elems;

    /* the embedding, each partition's rows on its machine (as the
     * features are); every trainer asks, and creating an identical one
     * succeeds */
    memset(&es, 0, sizeof es);
    es.dtype = GKV_F32;
    es.ndim = 1;
    es.shape[0] = (uint64_t)o.emb_dim;
    es.flags = GKV_TENSOR_HOT;
    es.init = GKV_INIT_UNIFORM;
    es.a = -0.1;
    es.b = 0.1;
    es.seed = 7;
    for (int p = 0; p < gkv_pbook_num_parts(b); p++) {
        int64_t lo, hi;
        CK(gkv_pbook_node_range(b, t, p, &lo, &hi), "node range");
        if (lo == hi)
            continue;
        es.lo = (uint64_t)lo;
        es.hi = (uint64_t)hi;
        CK(gkv_client_create(c, emb, &es, p), "create the embedding");
    }

    /* the training mask and this trainer's share */
    snprintf(who, sizeof who, "rank %ld: ", rank);
    mask = train_mask_get(c, b, t, &o, who);
    CK(gkv_pbook_node_split(b, t, mask, NULL, (size_t)nnodes, (int)world,
                            (int)rank, &mine, &nmine), "node_split");
    free(mask);
    {
        uint64_t sum = 0, h = 0;

        for (size_t i = 0; i < nmine; i++) {
            sum += (uint64_t)mine[i];
            h ^= mix64((uint64_t)mine[i]);
        }
        printf("rank %ld training nodes: n=%zu sum=%llu hash=%016llx\n", rank,
               nmine, (unsigned long long)sum, (unsigned long long)h);
    }
    for (int i = 0; i < 64; i++)
        probe[i] = nmine > 0 ? (uint64_t)mine[(size_t)i * nmine / 64]
                             : (uint64_t)i % (uint64_t)nnodes;
    before = emb_mean_abs(c, emb, probe, 64, o.emb_dim);
    printf("rank %ld/%ld: %zu training nodes of %lld '%s' nodes, "
           "partition %d; embedding '%s' mean |x| %.6f at the start\n",
           rank, world, nmine, (long long)nnodes, gkv_pbook_ntype_name(b, t),
           gkv_pbook_trainer_part(b, (int)world, (int)rank), emb, before);
    source_open(&src, c, b, &o, t, feat, rank, mine, nmine);
    printf("rank %ld: batches from gkv_loader, sampled %s (--sample-on %s), "
           "%d worker threads, %d batches ahead%s; Adagrad pushes on a "
           "thread of their own, one outstanding\n", rank,
           o.where == GKV_LOADER_SERVER ? "and gathered on the servers" :
           o.where == GKV_LOADER_CLIENT ? "through the servers hop by hop" :
           "in this process", where_names[o.where], o.workers, o.prefetch,
           o.device >= 0 ? ", uploaded by the GPU loader" : "");
    fflush(stdout);
    pusher_start(&push, c, emb, o.emb_dim, o.lr);
    /* after the probe: no trainer pushes before every one is here, so
     * rank 0 reads the embedding as the last job left it (this trainer
     * created every partition's rows above, so they exist) */
    CK(gkv_client_barrier(c, 10 * o.timeout_ms), "barrier");

    for (int ep = 0; ep < o.epochs; ep++) {
        double t0 = tools__now_s(), dt, wait_load = 0, wait_push = 0, p0;
        uint64_t edges = 0, pulled = 0, pushed = 0, cached = 0;
        int nb = 0;
        struct view v;

        if (ep > 0)
            source_epoch(&src, (uint64_t)ep);
        p0 = push.push_s;
        for (;;) {
            double w0 = tools__now_s();
            float *grad;

            if (o.max_batches > 0 && nb == o.max_batches)
                break;
            if (!source_next(&src, &v))
                break;
            wait_load += tools__now_s() - w0;
            pusher_reserve(&push, v.n_in);
            grad = push.next_grad;
            for (size_t i = 0; i < v.n_in; i++) {
                push.next_ids[i] = (uint64_t)v.ids[i];
                for (int j = 0; j < o.emb_dim; j++)
                    grad[i * (size_t)o.emb_dim + (size_t)j] =
                        0.01f * v.rows[i * fw + (size_t)j % fw];
            }
            if (v.n_in > 0)
                pusher_hand(&push, v.n_in, &wait_push);
            edges += v.edges;
            cached += v.cached;
            pulled += v.n_in * fd.row_bytes;
            pushed += v.n_in;
            nb++;
        }
        pusher_drain(&push, &wait_push);
        dt = tools__now_s() - t0;
        printf("rank %ld epoch %d: %d batches in %.2f s: %.1f batches/s, "
               "%.2f M sampled edges/s, %.1f MB/s of input rows, %llu rows "
               "pushed", rank, ep, nb, dt, nb / dt, (double)edges / dt / 1e6,
               (double)pulled / dt / 1e6, (unsigned long long)pushed);
        if (o.device >= 0)
            printf(", on GPU %d: %llu input rows from the GPU cache",
                   o.device, (unsigned long long)cached);
        printf("; a batch waited %.2f ms for the loader and %.2f ms for the "
               "push before it (a push took %.2f ms)\n",
               nb > 0 ? wait_load * 1e3 / nb : 0.0,
               nb > 0 ? wait_push * 1e3 / nb : 0.0,
               nb > 0 ? (push.push_s - p0) * 1e3 / nb : 0.0);
        fflush(stdout);
        CK(gkv_client_barrier(c, 10 * o.timeout_ms), "barrier");
    }
    pusher_stop(&push);
    source_close(&src);
    after = emb_mean_abs(c, emb, probe, 64, o.emb_dim);
    printf("rank %ld: embedding '%s' mean |x| %.6f at the end\n", rank, emb,
           after);
    gkv_free(mine);
    CK(gkv_client_close(c), "close");
    return 0;
}
