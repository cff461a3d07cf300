/* gkv-example-train - the example trainer: what a GNN training process
 * does with gkv, minus the model.
 *
 * Started by gkv-launch (or by hand with the same environment), it
 * connects to the job's graph servers, takes its share of the training
 * nodes (node_split of a training mask over the partitions), and for each
 * epoch and mini-batch of seeds:
 *   - samples DGL-style blocks through the servers (gkv_client_sample_blocks),
 *   - pulls the input nodes' features (gkv_client_pull of node/<ntype>/<feat>),
 *   - pushes a gradient-like update for the input nodes to an embedding
 *     table with Adagrad (gkv_client_push, handler "adagrad"),
 * and reports batches/s, sampled edges/s and pulled MB/s per epoch.
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
 * With --device N (a build with CUDA) the blocks and input features come
 * to GPU N in one call (gkv_gpu_loader_next), optionally reading this
 * machine's partition rows from a GPU feature cache (--gpu-cache-mb); the
 * example has no model on the device, so it copies the input IDs and rows
 * back for its host-side "gradient".
 *
 * The "gradient" of input node v is 0.01 x its feature row (cycled to the
 * embedding width): the point is the traffic, and that a second job sees
 * the embedding the first one left (it prints the embedding's mean
 * absolute value before and after).
 *
 * Environment (set by gkv-launch; doc/DEPLOY.md): GKV_IP_CONFIG (required),
 * GKV_TOKEN_FILE, GKV_GROUP (default "example"), GKV_RANK (default 0),
 * GKV_WORLD_SIZE (default 1).
 *
 * As a sampler (GKV_ROLE=sampler: gkv-launch --num-samplers K) it joins
 * the servers as its own client (the samplers' group and rank gkv-launch
 * gives it, never its trainer's: a second handshake with one (group, rank)
 * would take over the first's session) and samples the blocks of its
 * trainer's mini-batches j, j + K, j + 2K, ... (GKV_TRAINER_RANK,
 * GKV_SAMPLER_ID, GKV_NUM_SAMPLERS): the same seeds and sampling seeds as
 * the trainer's, so the same blocks. It pulls and pushes nothing; the
 * example has no channel to hand the blocks over, so it only reports
 * sampled edges/s.
 */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gkv.h"
#include "opt.h"
#include "util.h"

#define PROG "gkv-example-train"
#define MAX_LAYERS 8

struct opts {
    int epochs, batch, nlayers, fan[MAX_LAYERS], emb_dim, timeout_ms;
    int max_batches, device;
    int gpu_cache_mb;
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
"The example trainer: samples blocks through the graph servers, pulls the\n"
"input features, pushes Adagrad updates to an embedding, and reports\n"
"batches/s, sampled edges/s and pulled MB/s. Run it under gkv-launch, or\n"
"set GKV_IP_CONFIG (and GKV_TOKEN_FILE, GKV_GROUP, GKV_RANK,\n"
"GKV_WORLD_SIZE) yourself. With GKV_ROLE=sampler (gkv-launch\n"
"--num-samplers) it samples its trainer's mini-batches (GKV_TRAINER_RANK,\n"
"GKV_SAMPLER_ID of GKV_NUM_SAMPLERS) and pulls and pushes nothing.\n"
"\n"
"Options:\n"
"  --epochs N         epochs (default 1)\n"
"  --batch N          seeds per mini-batch (default 1024)\n"
"  --fanouts A,B,..   fanouts in DGL's order, input layer first\n"
"                     (default 10,15)\n"
"  --max-batches N    stop an epoch after N batches (default: all)\n"
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
"                     device N through gkv_gpu_loader (a build with CUDA)\n"
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

/* One mini-batch on the host: blocks through the servers, then the input
 * nodes of type t and their pulled rows into ids/rows. */
static void
cpu_batch(gkv_client *c, const int64_t *const *seeds, const size_t *nseeds,
          const struct opts *o, const gkv_sample_opts *so, int t,
          const char *feat, size_t rb, uint64_t *edges, uint64_t **ids,
          float **rows, size_t *n_in)
{
    gkv_block blk[MAX_LAYERS];
    const gkv_block_nodes *in;

    CK(gkv_client_sample_blocks(c, seeds, nseeds, o->fan, 1, o->nlayers, so,
                                blk), "sample blocks");
    for (int l = 0; l < o->nlayers; l++)
        for (int e = 0; e < blk[l].num_etypes; e++)
            *edges += blk[l].edges[e].n;
    in = &blk[0].nodes[t];      /* the input nodes of the seed type */
    *ids = tools__xmalloc(in->num_src * sizeof **ids + 1);
    *rows = tools__xmalloc(in->num_src * rb + 1);
    for (size_t i = 0; i < in->num_src; i++)
        (*ids)[i] = (uint64_t)in->ids[i];
    CK(gkv_client_pull(c, feat, *ids, in->num_src, *rows, in->num_src * rb),
       "pull features");
    *n_in = in->num_src;
}

#ifdef GKV_HAVE_CUDA

/* --device: the loader, and with --gpu-cache-mb a cache of this machine's
 * partition rows of the feature. */
struct gpu {
    gkv_gpu_loader *l;
    gkv_gpu_feat   *cache;
    gkv_part       *part;
    gkv_gpu_feat  **caches;       /* [num_ntypes], only t's set */
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
         const struct opts *o, int t, const char *feat)
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
        g->caches = tools__xmalloc((size_t)gkv_pbook_num_ntypes(b) *
                                   sizeof *g->caches);
        memset(g->caches, 0, (size_t)gkv_pbook_num_ntypes(b) *
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
}

/* One mini-batch on the device; its input nodes of type t and their rows
 * copied back into ids/rows (n_in x row_bytes). */
static void
gpu_batch(struct gpu *g, const int64_t *const *seeds, const size_t *nseeds,
          const struct opts *o, const gkv_sample_opts *so, int t,
          uint64_t *edges, uint64_t *cached, uint64_t **ids, float **rows,
          size_t *n_in)
{
    gkv_gpu_batch bt;
    size_t n, rb;

    GK(gkv_gpu_loader_next(g->l, seeds, nseeds, o->fan, 1, o->nlayers, so,
                           &bt, NULL), "GPU mini-batch");
    for (int l = 0; l < bt.nlayers; l++)
        for (int e = 0; e < bt.blocks[l].num_etypes; e++)
            *edges += bt.blocks[l].edges[e].n;
    *cached += bt.rows_cached;
    n = bt.blocks[0].nodes[t].num_src;
    rb = bt.row_bytes[t];
    *ids = tools__xmalloc(n * sizeof **ids + 1);
    *rows = tools__xmalloc(n * rb + 1);
    if (n > 0) {
        GK(gkv_gpu_copy(*ids, bt.blocks[0].nodes[t].ids, n * sizeof **ids,
                        NULL), "copy the input IDs back");
        GK(gkv_gpu_copy(*rows, bt.feat_dev[t], n * rb, NULL),
           "copy the input rows back");
    }
    *n_in = n;
}
#endif /* GKV_HAVE_CUDA */

int
main(int argc, char **argv)
{
    struct opts o;
    const char *ipc = getenv("GKV_IP_CONFIG"), *tokf = getenv("GKV_TOKEN_FILE");
    const char *group = getenv("GKV_GROUP"), *role = getenv("GKV_ROLE");
    long rank = env_long("GKV_RANK", 0), world = env_long("GKV_WORLD_SIZE", 1);
    /* the trainer whose mini-batches are split (its own, or a sampler's
     * trainer's), and which of them this process does: nb % nsamp == sid */
    long trank = rank, tworld = world, nsamp = 1, sid = 0;
    int sampler = role != NULL && strcmp(role, "sampler") == 0;
    char token[GKV_TOKEN_MAX + 1], feat[GKV_NAME_MAX + 1], emb[GKV_NAME_MAX + 1];
    char who[64];
    gkv_client_opts co;
    gkv_client *c;
    const gkv_pbook *b;
    gkv_tensor_desc fd;
    gkv_tensor_spec es;
    int t, rc;
    int64_t nnodes, *mine;
    size_t nmine;
    uint8_t *mask;
    uint64_t probe[64];
    double before, after;
#ifdef GKV_HAVE_CUDA
    struct gpu g;
#endif

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
    if (sampler) {
        nsamp = env_long("GKV_NUM_SAMPLERS", 0);
        sid = env_long("GKV_SAMPLER_ID", -1);
        trank = env_long("GKV_TRAINER_RANK", -1);
        if (nsamp < 1 || sid < 0 || sid >= nsamp || world % nsamp != 0 ||
            trank < 0 || trank >= world / nsamp)
            tools__die("GKV_ROLE=sampler needs GKV_NUM_SAMPLERS (K >= 1), "
                       "GKV_SAMPLER_ID (below K), GKV_TRAINER_RANK and "
                       "GKV_WORLD_SIZE (trainers x K) as gkv-launch sets them "
                       "(got %ld, %ld, %ld, %ld)", nsamp, sid, trank, world);
        tworld = world / nsamp;
        if (o.device >= 0)
            printf("sampler: --device %d ignored (a sampler samples on the "
                   "host and hands nothing over)\n", o.device);
        o.device = -1;
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
#ifdef GKV_HAVE_CUDA
    if (o.device >= 0)
        gpu_open(&g, c, b, &o, t, feat);
#endif

    /* the embedding, each partition's rows on its machine (as the
     * features are); every trainer asks, and creating an identical one
     * succeeds (a sampler never touches it) */
    memset(&es, 0, sizeof es);
    es.dtype = GKV_F32;
    es.ndim = 1;
    es.shape[0] = (uint64_t)o.emb_dim;
    es.flags = GKV_TENSOR_HOT;
    es.init = GKV_INIT_UNIFORM;
    es.a = -0.1;
    es.b = 0.1;
    es.seed = 7;
    for (int p = 0; !sampler && p < gkv_pbook_num_parts(b); p++) {
        int64_t lo, hi;
        CK(gkv_pbook_node_range(b, t, p, &lo, &hi), "node range");
        if (lo == hi)
            continue;
        es.lo = (uint64_t)lo;
        es.hi = (uint64_t)hi;
        CK(gkv_client_create(c, emb, &es, p), "create the embedding");
    }

    /* the training mask and this trainer's share (a sampler's trainer's) */
    if (sampler)
        snprintf(who, sizeof who, "sampler %ld of trainer rank %ld: ", sid,
                 trank);
    else
        snprintf(who, sizeof who, "rank %ld: ", rank);
    mask = train_mask_get(c, b, t, &o, who);
    CK(gkv_pbook_node_split(b, t, mask, NULL, (size_t)nnodes, (int)tworld,
                            (int)trank, &mine, &nmine), "node_split");
    free(mask);
    if (!sampler) {
        uint64_t sum = 0, h = 0;

        for (size_t i = 0; i < nmine; i++) {
            sum += (uint64_t)mine[i];
            h ^= mix64((uint64_t)mine[i]);
        }
        printf("rank %ld training nodes: n=%zu sum=%llu hash=%016llx\n", rank,
               nmine, (unsigned long long)sum, (unsigned long long)h);
    }
    if (sampler) {
        printf("sampler %ld of trainer rank %ld (rank %ld/%ld of group '%s'): "
               "%zu training nodes of %lld '%s' nodes, partition %d; "
               "its trainer's batches %ld, %ld, %ld, ...\n", sid, trank, rank,
               world, group, nmine, (long long)nnodes,
               gkv_pbook_ntype_name(b, t),
               gkv_pbook_trainer_part(b, (int)tworld, (int)trank), sid,
               sid + nsamp, sid + 2 * nsamp);
    } else {
        for (int i = 0; i < 64; i++)
            probe[i] = nmine > 0 ? (uint64_t)mine[(size_t)i * nmine / 64]
                                 : (uint64_t)i % (uint64_t)nnodes;
        before = emb_mean_abs(c, emb, probe, 64, o.emb_dim);
        printf("rank %ld/%ld: %zu training nodes of %lld '%s' nodes, "
               "partition %d; embedding '%s' mean |x| %.6f at the start\n",
               rank, world, nmine, (long long)nnodes,
               gkv_pbook_ntype_name(b, t),
               gkv_pbook_trainer_part(b, (int)world, (int)rank), emb, before);
    }
    fflush(stdout);
    /* after the probe: no trainer pushes before every one is here, so
     * rank 0 reads the embedding as the last job left it (this trainer
     * created every partition's rows above, so they exist) */
    CK(gkv_client_barrier(c, 10 * o.timeout_ms), "barrier");

    for (int ep = 0; ep < o.epochs; ep++) {
        double t0 = tools__now_s(), dt;
        uint64_t edges = 0, pulled = 0, pushed = 0, cached = 0;
        int nb = 0, ndone = 0;      /* ndone: a sampler's share of nb */
        uint64_t rs = mix64(o.seed ^ ((uint64_t)ep << 32) ^ (uint64_t)trank);

        /* shuffle (Fisher-Yates, seeded by epoch and rank) */
        for (size_t i = nmine; i > 1; i--) {
            size_t j = (size_t)(mix64(rs + i) % i);
            int64_t x = mine[i - 1];
            mine[i - 1] = mine[j];
            mine[j] = x;
        }
        for (size_t at = 0; at < nmine; at += (size_t)o.batch, nb++) {
            size_t n = nmine - at < (size_t)o.batch ? nmine - at : (size_t)o.batch;
            int nt = gkv_pbook_num_ntypes(b);
            const int64_t **seeds = calloc((size_t)nt, sizeof *seeds);
            size_t *nseeds = calloc((size_t)nt, sizeof *nseeds);
            gkv_sample_opts so;
            uint64_t *ids = NULL;
            float *rows = NULL, *grad;
            size_t fw = fd.row_elems, n_in = 0;
            gkv_push_args pa = {.handler = "adagrad", .lr = o.lr};

            if (seeds == NULL || nseeds == NULL)
                tools__die("out of memory");
            if (o.max_batches > 0 && nb == o.max_batches) {
                free(seeds);
                free(nseeds);
                break;
            }
            seeds[t] = mine + at;
            nseeds[t] = n;
            memset(&so, 0, sizeof so);
            so.seed = mix64(o.seed + (uint64_t)ep * 1000003u + (uint64_t)nb);
            if (sampler) {
                gkv_block blk[MAX_LAYERS];

                if (nb % nsamp == sid) {
                    CK(gkv_client_sample_blocks(c, seeds, nseeds, o.fan, 1,
                                                o.nlayers, &so, blk),
                       "sample blocks");
                    for (int l = 0; l < o.nlayers; l++)
                        for (int e = 0; e < blk[l].num_etypes; e++)
                            edges += blk[l].edges[e].n;
                    ndone++;
                }
                free(seeds);
                free(nseeds);
                continue;
            }
#ifdef GKV_HAVE_CUDA
            if (o.device >= 0)
                gpu_batch(&g, seeds, nseeds, &o, &so, t, &edges, &cached,
                          &ids, &rows, &n_in);
            else
#endif
                cpu_batch(c, seeds, nseeds, &o, &so, t, feat, fd.row_bytes,
                          &edges, &ids, &rows, &n_in);
            free(seeds);
            free(nseeds);
            grad = tools__xmalloc(n_in * (size_t)o.emb_dim * sizeof *grad + 1);
            for (size_t i = 0; i < n_in; i++)
                for (int j = 0; j < o.emb_dim; j++)
                    grad[i * (size_t)o.emb_dim + (size_t)j] =
                        0.01f * rows[i * fw + (size_t)j % fw];
            CK(gkv_client_push(c, emb, ids, n_in, grad,
                               n_in * (size_t)o.emb_dim * sizeof *grad,
                               &pa), "push the embedding");
            pulled += n_in * fd.row_bytes;
            pushed += n_in;
            free(ids);
            free(rows);
            free(grad);
        }
        dt = tools__now_s() - t0;
        if (sampler) {
            printf("sampler %ld of trainer rank %ld epoch %d: %d of its "
                   "trainer's %d batches sampled in %.2f s: %.1f batches/s, "
                   "%.2f M sampled edges/s\n", sid, trank, ep, ndone, nb, dt,
                   ndone / dt, (double)edges / dt / 1e6);
            fflush(stdout);
            CK(gkv_client_barrier(c, 10 * o.timeout_ms), "barrier");
            continue;
        }
        printf("rank %ld epoch %d: %d batches in %.2f s: %.1f batches/s, "
               "%.2f M sampled edges/s, %.1f MB/s of input rows, %llu rows "
               "pushed", rank, ep, nb, dt, nb / dt, (double)edges / dt / 1e6,
               (double)pulled / dt / 1e6, (unsigned long long)pushed);
        if (o.device >= 0)
            printf(", on GPU %d: %llu input rows from the GPU cache",
                   o.device, (unsigned long long)cached);
        printf("\n");
        fflush(stdout);
        CK(gkv_client_barrier(c, 10 * o.timeout_ms), "barrier");
    }
    if (!sampler) {
        after = emb_mean_abs(c, emb, probe, 64, o.emb_dim);
        printf("rank %ld: embedding '%s' mean |x| %.6f at the end\n", rank,
               emb, after);
    }
    gkv_free(mine);
#ifdef GKV_HAVE_CUDA
    if (o.device >= 0)
        gpu_close(&g);
#endif
    CK(gkv_client_close(c), "close");
    return 0;
}
