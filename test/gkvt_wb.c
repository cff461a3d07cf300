/* gkvt_wb.c - fixtures shared by the write-back tests (gkvt_wb.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "gkvt_wb.h"

gkv_tensor_spec
gkvt_wb_spec(uint64_t n, uint64_t w, unsigned flags)
{
    gkv_tensor_spec sp = gkvt_spec_init(GKV_F32, w, 100, 100 + n,
                                        GKV_INIT_UNIFORM);

    sp.flags = flags;
    return sp;
}

float *
gkvt_wb_rows(gkv_store *s, gkv_txn *tx, const char *name, uint64_t n,
             uint64_t w)
{
    float *b = malloc(n * w * sizeof *b);

    assert_non_null(b);
    GKVT_OK(gkv_tensor_read(s, tx, name, 100, 100 + n, b, n * w * sizeof *b));
    return b;
}

gkv_err
gkvt_h_mul(void *ctx, const gkv_tensor_desc *d, uint64_t id, void *row,
           const void *in)
{
    float *r = row;
    const float *x = in;

    (void)ctx;
    (void)id;
    for (uint64_t j = 0; j < d->row_elems; j++)
        r[j] = r[j] * 0.5f + x[j];
    return GKV_OK;
}

gkv_err
gkvt_h_fail40(void *ctx, const gkv_tensor_desc *d, uint64_t id, void *row,
              const void *in)
{
    int *count = ctx;

    (void)id;
    memcpy(row, in, d->row_bytes);   /* changes the row, then fails */
    return ++*count == 40 ? GKV_EINVAL : GKV_OK;
}

void
gkvt_rand_rows(uint64_t *rs, uint64_t *ids, float *rows, size_t n,
               uint64_t lo, uint64_t range, uint64_t w)
{
    for (size_t i = 0; i < n; i++) {
        ids[i] = lo + tools__splitmix64(rs) % range;
        for (uint64_t j = 0; j < w; j++)
            rows[i * w + j] =
                (float)((int)(tools__splitmix64(rs) % 2001) - 1000) / 1000.0f;
    }
}

void
gkvt_wb_unguard(const char *dir)
{
    char p[4200];

    snprintf(p, sizeof p, "%s/writeback.lock", dir);
    if (unlink(p) != 0 && errno != ENOENT)
        fail_msg("unlink %s: %s", p, strerror(errno));
}
