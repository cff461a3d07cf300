/* gpu_c.h - private declarations of gpu/ shared by its CUDA files and its
 * C files (the loader), with C linkage. Not installed. */
#ifndef GPU_C_H
#define GPU_C_H

#include <stddef.h>
#include <stdint.h>
#include "base/base.h"
#include "gpu/gkv_gpu.h"

#ifdef __cplusplus
extern "C" {
#endif

/* gkv__fail() and gkv__clear() about no handle (base/base.h): a GPU
 * sampler belongs to one thread at a time anyway. gpu__fail(rc, fmt, ...)
 * records fmt as the calling thread's gkv_errmsg() and returns rc;
 * gpu__clear() at the start of every call. */
#define gpu__fail(rc, ...) gkv__fail(NULL, (rc), __VA_ARGS__)
#define gpu__clear()       gkv__clear(NULL)

/* GKV_OK when 'device' is a usable CUDA device and made current; else
 * GKV_ENOTSUP ("no CUDA device: 'what' needs one") or GKV_EINVAL (no such
 * ordinal), with the message set. */
gkv_err gpu__device(int device, const char *what);

/* GKV_OK when any CUDA device is visible (the current device unchanged);
 * else GKV_ENOTSUP with the message set. */
gkv_err gpu__present(const char *what);

/* gkv_gpu_feat_gather() with a second source: row i with miss_dev[i] >= 0
 * is read from base + off + miss_dev[i] x row_bytes (pinned host memory:
 * 'base' is what gkv_gpu_host_alloc() returned, read zero-copy) instead
 * of the cache; the others come from the cache, an ID outside it reported
 * by the next gkv_gpu_feat_sync(). */
gkv_err gpu__feat_gather_mixed(gkv_gpu_feat *f, const int64_t *ids_dev,
                               size_t n, const int64_t *miss_dev,
                               const void *base, size_t off, void *out_dev,
                               void *stream);

#ifdef __cplusplus
}
#endif
#endif /* GPU_C_H */
