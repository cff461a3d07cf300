/* adam_push.c - direct (transactional) Adam pushes past LMDB's dirty list
 * (doc/BENCHMARKS.md, "Slices and pokes counted in chunk values").
 *
 *   adam_push STORE REPS IDS
 *
 * Creates a HOT 2,000,000 x 128 f32 tensor "emb" in STORE (an empty
 * directory: a fresh store each run), opened with GKV_NOSYNC and an 8 GiB
 * map, then makes REPS pushes of IDS uniform random IDs with the adam
 * handler (lr 0.01), each its own transaction. Prints per push the
 * seconds, the slices run again in the parent and the writes run again
 * unsliced (kv__slice_retries, kv__slice_reruns), and the bytes the
 * process wrote (/proc/self/io wchar). 200,000 IDs touch about 150,000
 * chunks: 600,000 chunk values with the state, past LMDB's 131,072.
 * Built against any libgkv.a (before and after a change, alternated run
 * by run, as the section says):
 *
 *   cc -O2 -std=c11 -D_GNU_SOURCE -I. -Ikv -Igraph -Inet -Iloader \
 *      bench/adam_push.c build/libgkv.a \
 *      $(pkg-config --libs lmdb libxxhash jansson nanomsg libsodium) \
 *      -lmetis -lm -lpthread -o adam_push
 *   for i in 1 2; do rm -rf /tmp/ap && mkdir /tmp/ap && \
 *      ./adam_push /tmp/ap 3 200000; done */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "gkv.h"
#include "kv/kv_test.h"             /* kv__slice_retries, kv__slice_reruns */

#define NROWS 2000000u
#define DIM   128u

static double
now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Bytes this process has written (write and pwrite calls), or 0. */
static unsigned long long
written(void)
{
    unsigned long long v = 0;
    char line[256];
    FILE *f = fopen("/proc/self/io", "r");

    while (f != NULL && fgets(line, sizeof line, f) != NULL)
        if (sscanf(line, "wchar: %llu", &v) == 1)
            break;
    if (f != NULL)
        fclose(f);
    return v;
}

int
main(int argc, char **argv)
{
    gkv_open_opts o = {.map_size = 8ull << 30};
    gkv_push_args adam = {"adam", 0.01, 0, 0, 0, 0};
    gkv_tensor_spec sp;
    uint64_t *ids, x = 7;
    float *rows;
    gkv_store *s;
    size_t b;
    long reps;

    if (argc != 4 || (reps = strtol(argv[2], NULL, 10)) <= 0 ||
        (b = strtoul(argv[3], NULL, 10)) == 0) {
        fprintf(stderr, "usage: adam_push STORE REPS IDS\n");
        return 2;
    }
    ids = malloc(b * sizeof *ids);
    rows = malloc(b * DIM * sizeof *rows);
    if (ids == NULL || rows == NULL) {
        fprintf(stderr, "adam_push: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < b * DIM; i++)
        rows[i] = (float)(i % 1000) * 0.001f;
    memset(&sp, 0, sizeof sp);
    sp.dtype = GKV_F32;
    sp.ndim = 1;
    sp.shape[0] = DIM;
    sp.hi = NROWS;
    sp.flags = GKV_TENSOR_HOT;
    if (gkv_store_open(&s, argv[1], GKV_CREATE | GKV_NOSYNC, &o) != GKV_OK ||
        gkv_tensor_create(s, "emb", &sp) != GKV_OK) {
        fprintf(stderr, "adam_push: %s\n", gkv_store_errmsg(s));
        return 1;
    }
    for (long r = 0; r < reps; r++) {
        unsigned long r0 = kv__slice_retries, r1 = kv__slice_reruns;
        unsigned long long w0;
        double t0;

        for (size_t i = 0; i < b; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            ids[i] = (x >> 11) % NROWS;
        }
        w0 = written();
        t0 = now_s();
        if (gkv_tensor_push(s, "emb", ids, b, rows, b * DIM * sizeof *rows,
                            &adam) != GKV_OK) {
            fprintf(stderr, "adam_push: %s\n", gkv_store_errmsg(s));
            return 1;
        }
        printf("rep %ld: %.3f s, slices retried %lu, reruns %lu, "
               "written %.2f GB\n", r, now_s() - t0, kv__slice_retries - r0,
               kv__slice_reruns - r1, (written() - w0) / 1e9);
        fflush(stdout);
    }
    gkv_store_close(s);
    free(ids);
    free(rows);
    return 0;
}
