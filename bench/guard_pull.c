/* guard_pull.c - the cost of GKV_GUARD on the pull path (doc/BENCHMARKS.md,
 * "The fault guard on the pull path").
 *
 *   guard_pull STORE MODE ROWS REPS
 *
 * Pulls ROWS random rows per call of a 1,000,000 x 16 f32 tensor "t" in
 * STORE (made on the first run) from a pre-faulted handle, opened with
 * GKV_GUARD when MODE is 1, without when 0; prints the median over REPS
 * reps (each about 0.2 s of calls) of ns per call. Built against any
 * libgkv.a, also one without GKV_GUARD (then MODE 1 is refused), so that
 * the same source measures main and a branch. With GUARD_PULL_HELD=1 in
 * the environment every pull goes through one gkv_txn begun after the
 * pre-fault and held to the end (the check of a read through a held
 * snapshot, kv__guard_held); else each pull begins its own. With
 * GUARD_PULL_CALLS=N in
 * the environment it makes exactly N calls (after the pre-fault) and
 * prints nothing more: for a count of instructions per call that the
 * machine's load does not change,
 *
 *   perf stat -e instructions:u -x, ./guard_pull STORE 1 1 1  (twice: N
 *   and 2N calls; the difference over N is the cost of one call)
 *
 * Built so:
 *
 *   cc -O2 -std=c11 -D_GNU_SOURCE -I. -Ikv -Igraph -Inet -Iloader \
 *      bench/guard_pull.c \
 *      build/libgkv.a $(pkg-config --libs lmdb libxxhash jansson nanomsg \
 *      libsodium) -lmetis -lm -lpthread -o guard_pull */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "gkv.h"

#define NROWS 1000000u
#define DIM   16u

static double
now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int
cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

int
main(int argc, char **argv)
{
    gkv_store *s;
    gkv_txn *tx = NULL;
    unsigned flags = 0;
    size_t rows, reps;
    uint64_t *ids, x = 88172645463325252ull;
    float *dst;
    double *ns;

    if (argc != 5) {
        fprintf(stderr, "usage: guard_pull STORE MODE(0|1) ROWS REPS\n");
        return 2;
    }
    rows = strtoul(argv[3], NULL, 10);
    reps = strtoul(argv[4], NULL, 10);
    if (rows == 0 || reps == 0)
        return 2;
    if (atoi(argv[2]) == 1) {
#ifdef GKV_GUARD
        flags |= GKV_GUARD;
#else
        fprintf(stderr, "guard_pull: this libgkv has no GKV_GUARD\n");
        return 2;
#endif
    }
    if (gkv_store_open(&s, argv[1], GKV_CREATE | flags, NULL) != GKV_OK) {
        fprintf(stderr, "open: %s\n", gkv_store_errmsg(NULL));
        return 1;
    }
    {
        gkv_tensor_desc d;

        if (gkv_tensor_info(s, NULL, "t", &d) != GKV_OK) {
            gkv_tensor_spec sp;

            memset(&sp, 0, sizeof sp);
            sp.dtype = GKV_F32;
            sp.ndim = 1;
            sp.shape[0] = DIM;
            sp.lo = 0;
            sp.hi = NROWS;
            sp.init = GKV_INIT_UNIFORM;
            sp.a = -1;
            sp.b = 1;
            if (gkv_tensor_create(s, "t", &sp) != GKV_OK) {
                fprintf(stderr, "create: %s\n", gkv_store_errmsg(s));
                return 1;
            }
        }
    }
    if (gkv_store_prefault(s) != GKV_OK)
        return 1;
    if (getenv("GUARD_PULL_HELD") != NULL &&
        atoi(getenv("GUARD_PULL_HELD")) != 0 &&
        gkv_txn_begin(s, &tx) != GKV_OK) {
        fprintf(stderr, "txn: %s\n", gkv_store_errmsg(s));
        return 1;
    }
    ids = malloc(rows * sizeof *ids);
    dst = malloc(rows * DIM * sizeof *dst);
    ns = malloc(reps * sizeof *ns);
    if (getenv("GUARD_PULL_CALLS") != NULL) {
        size_t calls = strtoul(getenv("GUARD_PULL_CALLS"), NULL, 10);

        for (size_t c = 0; c < calls; c++) {
            for (size_t i = 0; i < rows; i++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                ids[i] = x % NROWS;
            }
            if (gkv_tensor_pull(s, tx, "t", ids, rows, dst,
                                rows * DIM * sizeof *dst) != GKV_OK)
                return 1;
        }
        gkv_txn_end(tx);
        gkv_store_close(s);
        return 0;
    }
    for (size_t r = 0; r < reps; r++) {
        size_t calls = 0;
        double t0 = now_s(), t;

        do {
            for (int k = 0; k < 64; k++, calls++) {
                for (size_t i = 0; i < rows; i++) {
                    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                    ids[i] = x % NROWS;
                }
                if (gkv_tensor_pull(s, tx, "t", ids, rows, dst,
                                    rows * DIM * sizeof *dst) != GKV_OK) {
                    fprintf(stderr, "pull: %s\n", gkv_store_errmsg(s));
                    return 1;
                }
            }
        } while ((t = now_s()) - t0 < 0.2);
        ns[r] = (t - t0) * 1e9 / (double)calls;
    }
    qsort(ns, reps, sizeof *ns, cmp_d);
    printf("%.0f\n", ns[reps / 2]);
    gkv_txn_end(tx);
    gkv_store_close(s);
    return 0;
}
