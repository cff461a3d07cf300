/* gkv-rmat.c - writes the edge list of an R-MAT graph to a file.
 *
 * The same edges gkv-partition --rmat and the benchmarks generate
 * (gkv_rmat_edges, Graph500 parameters, the vertex permutation), as
 * little-endian int64 pairs (src, dst): the --binary format of
 * gkv-partition and what numpy.fromfile(FILE, '<i8').reshape(-1, 2)
 * reads. It exists so that another system (bench/dgl_metis.py: DGL's
 * METIS) can be measured on exactly the edges gkv partitions. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gkv.h"
#include "opt.h"
#include "util.h"

#define PROG "gkv-rmat"
#define CHUNK (1 << 20)

static void
usage(FILE *f)
{
    fputs(
"Usage: gkv-rmat --scale S [--edge-factor EF] [--seed N] FILE\n"
"\n"
"Writes the R-MAT graph that gkv-partition --rmat S:EF --seed N makes\n"
"(2^S nodes, EF x 2^S edges, self-loops and duplicates kept) to FILE as\n"
"little-endian int64 pairs 'src dst' (gkv-partition's --binary format).\n"
"\n"
"  --scale S            0..40 (required)\n"
"  --edge-factor EF     edges per node (default 16)\n"
"  --seed N             seed (default 0, as gkv-partition's)\n"
"  -h, --help           show this help\n"
"  -V, --version        show the version\n"
"\n"
"Exit status: 0 ok, 1 failed, 2 usage error.\n", f);
}

static const char *path;

static int
operand(void *ctx, const char *arg)
{
    (void)ctx;
    if (path != NULL) {
        fprintf(stderr, PROG ": more than one FILE ('%s')\n"
                "Try '" PROG " --help'.\n", arg);
        return OPT_EXIT_USAGE;
    }
    path = arg;
    return 0;
}

int
main(int argc, char **argv)
{
    unsigned scale = 100, ef = 16;
    uint64_t seed = 0;
    const struct tools_opt opts[] = {
        {"--scale", OPT_UINT, .dst = &scale, .lo = 0, .hi = GKV_RMAT_SCALE_MAX,
         .bad = "is not a scale in 0..40"},
        {"--edge-factor", OPT_UINT, .dst = &ef, .lo = 1, .hi = 1u << 20,
         .bad = "is not an edge factor in 1..1048576"},
        {"--seed", OPT_U64, .dst = &seed, .lo = 0, .hi = UINT64_MAX},
        {NULL},
    };
    const struct tools_opt_parser parser = {
        .prog = PROG, .opts = opts, .usage = usage, .operand = operand,
        .version = PROG " (gkv) " GKV_VERSION_STRING,
    };
    gkv_rmat_spec sp;
    int64_t *src, *dst, *pair, total;
    FILE *f;
    int rc;

    tools__prog = PROG;
    if ((rc = tools__opt_parse(&parser, argc, argv)) != 0)
        return rc;
    if (scale == 100 || path == NULL) {
        fprintf(stderr, PROG ": %s is required\nTry '" PROG " --help'.\n",
                scale == 100 ? "--scale" : "FILE");
        return OPT_EXIT_USAGE;
    }
    memset(&sp, 0, sizeof sp);
    sp.scale = (int)scale;
    sp.edge_factor = ef;
    sp.seed = seed;
    total = (int64_t)ef << scale;
    src = tools__xmalloc(CHUNK * sizeof *src);
    dst = tools__xmalloc(CHUNK * sizeof *dst);
    pair = tools__xmalloc(2 * CHUNK * sizeof *pair);
    if ((f = fopen(path, "wb")) == NULL)
        tools__die("creating '%s': %s", path, strerror(errno));
    for (int64_t first = 0; first < total; first += CHUNK) {
        int64_t n = total - first < CHUNK ? total - first : CHUNK;
        if ((rc = gkv_rmat_edges(&sp, first, n, src, dst)) != GKV_OK)
            tools__die("gkv_rmat_edges: %s", gkv_strerror(rc));
        for (int64_t i = 0; i < n; i++) {      /* little-endian hosts only */
            pair[2 * i] = src[i];
            pair[2 * i + 1] = dst[i];
        }
        if (fwrite(pair, sizeof *pair, (size_t)(2 * n), f) != (size_t)(2 * n))
            tools__die("writing '%s': %s", path, strerror(errno));
    }
    if (fclose(f) != 0)
        tools__die("writing '%s': %s", path, strerror(errno));
    free(src);
    free(dst);
    free(pair);
    return 0;
}
