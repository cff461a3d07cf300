/* gkv-bench-pypull - the C side of bench/python_bench.py: the same pulls
 * and loader epochs as the Python package does, run on command, so the
 * benchmark can alternate C and Python rep by rep on the same machine.
 *
 * Opens one source: a job's servers (--ip-config FILE) or an embedded
 * store (--store DIR, read-only). Then reads commands from stdin, one a
 * line, and answers each with one line on stdout:
 *   pull           pulls the IDs of --ids (a file of little-endian
 *                  uint64) from tensor --tensor into one buffer made at
 *                  start (gkv_client_pull, or gkv_tensor_pull with no
 *                  transaction); answers "<seconds> <xxh64 of the rows>"
 *   pullnew        the same into a buffer malloc'ed for it (the old one
 *                  freed first), timed with the malloc: what a pull that
 *                  returns new memory, as Python's pull() does, costs in C
 *   dump FILE      writes the last pull's rows to FILE (the benchmark
 *                  compares them with Python's); answers "ok"
 *   epoch E        (with --loader) one epoch of the loader: starts epoch E
 *                  (unless it is 0, where the loader starts), takes every
 *                  batch with gkv_loader_next and releases it; answers
 *                  "<seconds> <batches> <feature bytes>"
 *   quit           exits
 * The loader (GKV_LOADER_SERVER over the client): seeds from --seeds (a
 * file of little-endian int64), --batch-size, --fanouts (comma separated,
 * blocks[0] first, as gkv.Loader takes them), --feat NAME (node type 0),
 * --label NAME, --workers, --prefetch, --shuffle-seed, --sample-seed: the
 * options gkv.Loader passes to gkv_loader_new for the same arguments.
 *
 * usage: gkv-bench-pypull (--ip-config FILE | --store DIR) [--tensor NAME]
 *          [--ids FILE] [--loader --seeds FILE --fanouts LIST ...]
 * Exit status 0, 1 on an error (named on stderr), 2 on bad usage.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "gkv.h"
#include "opt.h"
#include "util.h"

#define PROG "gkv-bench-pypull"

static const char *ip_config, *store_dir, *tensor = "feat", *ids_file;
static const char *seeds_file, *fanouts_arg, *feat, *label;
static const char *group = "pybench";
static int loader_on;
static uint64_t batch_size = 1024, shuffle_seed, sample_seed;
static unsigned workers, prefetch;

/* The whole of a binary file: *len bytes, a multiple of 8. */
static void *
read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    void *buf;
    long n;

    if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 ||
        fseek(f, 0, SEEK_SET) != 0)
        tools__die("%s: cannot read", path);
    if (n % 8 != 0)
        tools__die("%s: %ld bytes, not a whole number of 8-byte IDs", path, n);
    buf = tools__xmalloc(n ? (size_t)n : 1);
    if (n && fread(buf, 1, (size_t)n, f) != (size_t)n)
        tools__die("%s: short read", path);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static void
usage(FILE *f)
{
    fprintf(f, "usage: " PROG " (--ip-config FILE | --store DIR) [--tensor NAME]\n"
               "         [--ids FILE] [--group NAME] [--loader --seeds FILE\n"
               "         --fanouts LIST [--batch-size N] [--feat NAME] [--label NAME]\n"
               "         [--workers W] [--prefetch K] [--shuffle-seed S]\n"
               "         [--sample-seed S]]\n"
               "Commands on stdin: pull | pullnew | dump FILE | epoch E | quit (see the source).\n");
}

/* One epoch of l; answers its line. */
static void
run_epoch(gkv_loader *l, uint64_t e)
{
    double t0 = tools__now_s();
    size_t nb = 0, bytes = 0;
    gkv_batch *b;
    gkv_err rc;

    if (e != 0 && (rc = gkv_loader_epoch(l, e)) != GKV_OK)
        tools__die("epoch %llu: %s", (unsigned long long)e, gkv_strerror(rc));
    for (;;) {
        if ((rc = gkv_loader_next(l, &b)) != GKV_OK)
            tools__die("loader: %s: %s", gkv_strerror(rc), gkv_net_errmsg());
        if (b == NULL)
            break;
        for (int f = 0; f < b->nfeats; f++)
            bytes += b->feat_bytes[f];
        nb++;
        gkv_batch_release(b);
    }
    printf("%.9f %zu %zu\n", tools__now_s() - t0, nb, bytes);
}

int
main(int argc, char **argv)
{
    static const struct tools_opt opts[] = {
        {"--ip-config", OPT_STR, .dst = &ip_config},
        {"--store", OPT_STR, .dst = &store_dir},
        {"--tensor", OPT_STR, .dst = &tensor},
        {"--ids", OPT_STR, .dst = &ids_file},
        {"--group", OPT_STR, .dst = &group},
        {"--loader", OPT_FLAG, .dst = &loader_on},
        {"--seeds", OPT_STR, .dst = &seeds_file},
        {"--fanouts", OPT_STR, .dst = &fanouts_arg},
        {"--batch-size", OPT_U64, .dst = &batch_size, .lo = 1, .hi = 1u << 30},
        {"--feat", OPT_STR, .dst = &feat},
        {"--label", OPT_STR, .dst = &label},
        {"--workers", OPT_UINT, .dst = &workers, .lo = 0, .hi = 64},
        {"--prefetch", OPT_UINT, .dst = &prefetch, .lo = 0, .hi = 1024},
        {"--shuffle-seed", OPT_U64, .dst = &shuffle_seed, .lo = 0, .hi = UINT64_MAX},
        {"--sample-seed", OPT_U64, .dst = &sample_seed, .lo = 0, .hi = UINT64_MAX},
        {NULL},
    };
    static const struct tools_opt_parser parser = {
        .prog = PROG, .opts = opts, .usage = usage,
    };
    gkv_client *c = NULL;
    gkv_store *s = NULL;
    gkv_loader *l = NULL;
    uint64_t *ids = NULL;
    int64_t *seeds = NULL;
    size_t nids = 0, nseeds = 0, rowb = 0, len;
    void *dst = NULL;
    int fan[16], nlayers = 0, rc;
    char line[256];

    tools__prog = PROG;
    if ((rc = tools__opt_parse(&parser, argc, argv)) != 0)
        return rc;
    if ((ip_config == NULL) == (store_dir == NULL))
        return tools__usage_error(PROG, "give one of --ip-config and --store");
    if (loader_on && (ip_config == NULL || seeds_file == NULL || fanouts_arg == NULL))
        return tools__usage_error(PROG, "--loader needs --ip-config, --seeds "
                                  "and --fanouts");
    if (ip_config != NULL) {
        gkv_client_opts co = {.timeout_ms = 60000};
        if (gkv_client_connect(&c, ip_config, NULL, group, 0, &co) != GKV_OK)
            tools__die("connect %s: %s", ip_config, gkv_net_errmsg());
    } else if (gkv_store_open(&s, store_dir, GKV_RDONLY, NULL) != GKV_OK)
        tools__die("store %s: %s", store_dir, gkv_store_errmsg(NULL));

    if (ids_file != NULL) {
        gkv_tensor_desc ti;
        gkv_err e = c ? gkv_client_tensor_info(c, tensor, &ti)
                      : gkv_tensor_info(s, NULL, tensor, &ti);
        if (e != GKV_OK)
            tools__die("tensor %s: %s", tensor, gkv_strerror(e));
        rowb = ti.row_bytes;
        ids = read_file(ids_file, &len);
        nids = len / 8;
        dst = tools__xmalloc(nids * rowb + 1);
    }
    if (loader_on) {
        gkv_loader_opts lo = {0};
        gkv_typed_tensor ft = {0, feat};
        char *dup = tools__xstrdup(fanouts_arg), *tok, *save;
        for (tok = strtok_r(dup, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            if (nlayers == 16)
                return tools__usage_error(PROG, "--fanouts: at most 16 layers");
            fan[nlayers++] = atoi(tok);
        }
        free(dup);
        seeds = read_file(seeds_file, &len);
        nseeds = len / 8;
        lo.where = GKV_LOADER_SERVER;
        lo.client = c;
        lo.seeds = seeds;
        lo.nseeds = nseeds;
        lo.batch_size = batch_size;
        lo.shuffle_seed = shuffle_seed;
        lo.nlayers = nlayers;
        lo.nfan = 1;
        lo.fanouts = fan;
        lo.sample_seed = sample_seed;
        lo.feats = feat ? &ft : NULL;
        lo.nfeats = feat ? 1 : 0;
        lo.label = label;
        lo.prefetch = (int)prefetch;
        lo.workers = (int)workers;
        if ((rc = gkv_loader_new(&l, &lo)) != GKV_OK)
            tools__die("loader: %s: %s", gkv_strerror(rc), gkv_net_errmsg());
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("ready\n");
    while (fgets(line, sizeof line, stdin) != NULL) {
        unsigned long long e;
        if (strncmp(line, "quit", 4) == 0)
            break;
        if (strncmp(line, "pull", 4) == 0 && ids != NULL) {
            int fresh = strncmp(line, "pullnew", 7) == 0;
            double t0 = tools__now_s(), t;
            gkv_err r;
            if (fresh) {
                free(dst);
                dst = tools__xmalloc(nids * rowb + 1);
            }
            r = c ? gkv_client_pull(c, tensor, ids, nids, dst, nids * rowb)
                  : gkv_tensor_pull(s, NULL, tensor, ids, nids, dst, nids * rowb);
            t = tools__now_s() - t0;
            if (r != GKV_OK)
                tools__die("pull: %s", gkv_strerror(r));
            printf("%.9f %016llx\n", t,
                   (unsigned long long)XXH64(dst, nids * rowb, 0));
        } else if (strncmp(line, "dump ", 5) == 0 && ids != NULL) {
            FILE *f;
            line[strcspn(line, "\n")] = '\0';
            if ((f = fopen(line + 5, "wb")) == NULL ||
                fwrite(dst, 1, nids * rowb, f) != nids * rowb || fclose(f) != 0)
                tools__die("%s: cannot write", line + 5);
            printf("ok\n");
        } else if (sscanf(line, "epoch %llu", &e) == 1 && l != NULL) {
            run_epoch(l, e);
        } else {
            tools__die("unknown command: %s", line);
        }
    }
    gkv_loader_free(l);
    free(seeds);
    free(ids);
    free(dst);
    if (c)
        gkv_client_close(c);
    if (s)
        gkv_store_close(s);
    return 0;
}
