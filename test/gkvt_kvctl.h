/* gkvt_kvctl.h - the kvctl tests' fixture (kvctl_test.c,
 * kvctl_server_test.c): a directory with the store path DIR/st, the last
 * run's output, a gkv-server to kill; and .npy files written by hand the
 * way numpy writes them (not by gkv's own writer). */
#ifndef GKVT_KVCTL_H
#define GKVT_KVCTL_H
#include <sys/types.h>
#include <jansson.h>
#include "gkvt.h"

struct gkvt_kvctl_fx {
    char *dir;
    char st[4096];      /* the store: DIR/st */
    char *out, *err;    /* of the last run */
    pid_t srv;          /* a gkv-server this test started, or 0 */
};
/* A cmocka setup: *state gets a new struct gkvt_kvctl_fx. */
int gkvt_kvctl_setup(void **state);
/* Its teardown: kills (SIGKILL) and reaps srv when set, unmounts DIR/mnt
 * (a test's tmpfs, should it have failed with it mounted), removes the
 * directory. */
int gkvt_kvctl_teardown(void **state);
/* kvctl with the arguments that follow (NULL-terminated): its exit
 * status, stdout and stderr in f->out and f->err. */
#define gkvt_kvctl(f, ...) \
    gkvt_tool("kvctl", &(f)->out, &(f)->err, __VA_ARGS__)

/* The JSON document 'text' (kvctl --json output), the caller's reference;
 * a cmocka failure, showing the text, when it does not parse. */
json_t *gkvt_json_parse(const char *text);

/* The header np.save writes, built here by hand the way numpy's format.py
 * does: the dict, spaces, '\n', 128 bytes in all for these shapes; returns
 * 128. */
size_t gkvt_npy_header(unsigned char *b, const char *descr,
                       const char *shape);
/* The value of row r, column c of gkvt_npy_f32's files:
 * r * 1000 + c + 0.25 - (r + c) % 3. */
float  gkvt_npy_val(uint64_t r, uint64_t c);
/* Writes an n x w f32 .npy of gkvt_npy_val(row + seed, col) to path;
 * returns its rows (malloc'd). */
float *gkvt_npy_f32(const char *path, uint64_t n, uint64_t w, uint64_t seed);
/* Writes an int64 .npy of n values v (n / cols rows of cols; cols 0:
 * one dimension) with gkv's own header writer. */
void   gkvt_npy_i64(const char *path, const int64_t *v, uint64_t n,
                    uint64_t cols);

/* gkv-partition of a random graph into 2 random partitions (seed 3) under
 * DIR/g: nn nodes, nedges edges (pairs of splitmix64 draws from 'seed',
 * modulo nn) written to DIR/edges.txt, node feature "feat" from feat_npy.
 * A cmocka failure, showing its output, when gkv-partition fails. */
void   gkvt_partition_random(const char *dir, int nn, int nedges,
                             uint64_t seed, const char *feat_npy);

#endif
