/* gkvt_wb.h - fixtures shared by the write-back tests (kv_wb_*_test.c
 * and the others that put a tensor in write-back mode): the "mul"
 * handler, random pushes, and a writer that predates the write-back
 * lock. */
#ifndef GKVT_WB_H
#define GKVT_WB_H
#include "gkvt.h"

/* The small write-back test tensor: f32 rows of w, IDs [100, 100 + n),
 * uniform in [-1, 1] (seed 7), with flags (GKV_TENSOR_*). */
gkv_tensor_spec gkvt_wb_spec(uint64_t n, uint64_t w, unsigned flags);
/* Its rows [100, 100 + n) through tx (NULL: the RAM copy of a tensor in
 * write-back mode), malloc'd. */
float *gkvt_wb_rows(gkv_store *s, gkv_txn *tx, const char *name, uint64_t n,
                    uint64_t w);
/* Push handler "mul": row = row * 0.5 + in, element by element (f32). */
gkv_err gkvt_h_mul(void *ctx, const gkv_tensor_desc *d, uint64_t id,
                   void *row, const void *in);
/* Push handler that assigns, then fails (GKV_EINVAL) at its 40th row;
 * ctx: an int counting the rows, set to 0 before the push. */
gkv_err gkvt_h_fail40(void *ctx, const gkv_tensor_desc *d, uint64_t id,
                      void *row, const void *in);
/* n random rows of w f32 values in [-1, 1] (steps of 0.001) to rows, and
 * their IDs, lo + [0, range), to ids. */
void gkvt_rand_rows(uint64_t *rs, uint64_t *ids, float *rows, size_t n,
                    uint64_t lo, uint64_t range, uint64_t w);
/* Unlinks DIR/writeback.lock: a writer started after this plays one that
 * predates the write-back lock (or bypasses gkv, as mdb_drop does), whose
 * writes to a tensor held in write-back by another process are not
 * refused; the tests of what a write-back handle then does use it. */
void gkvt_wb_unguard(const char *dir);

#endif
