/* core.cu - gkv_gpu.h: error detail, device discovery, memory helpers and
 * the hot-set choice (host only). */
#include "gpu/gpu_int.h"     /* first: its pragmas cover everything after */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *
gkv_gpu_errmsg(void)
{
    return gkv_errmsg();
}

gkv_err
gpu__cuda(cudaError_t e, const char *what)
{
    if (e == cudaSuccess)
        return GKV_OK;
    (void)cudaGetLastError();
    return gpu__fail(e == cudaErrorMemoryAllocation ? GKV_ENOMEM : GKV_EIO,
                     "%s: %s (%s)", what, cudaGetErrorName(e),
                     cudaGetErrorString(e));
}

/* The device count, 0 when CUDA reports none or cannot start. */
static int
device_count(cudaError_t *why)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);

    *why = e;
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return n;
}

gkv_err
gpu__device(int device, const char *what)
{
    cudaError_t why;
    int n = device_count(&why);

    if (n <= 0)
        return gpu__fail(GKV_ENOTSUP, "no CUDA device: %s needs one (%s)",
                         what, why != cudaSuccess ? cudaGetErrorName(why)
                         : "no device visible");
    if (device < 0 || device >= n)
        return gpu__fail(GKV_EINVAL, "%s: device %d does not exist (%d "
                         "CUDA device%s)", what, device, n, n == 1 ? "" : "s");
    return gpu__cuda(cudaSetDevice(device), what);
}

gkv_err
gpu__present(const char *what)
{
    cudaError_t why;

    if (device_count(&why) <= 0)
        return gpu__fail(GKV_ENOTSUP, "no CUDA device: %s needs one (%s)",
                         what, why != cudaSuccess ? cudaGetErrorName(why)
                         : "no device visible");
    return GKV_OK;
}

gkv_err
gkv_gpu_available(int *ndev, char *name, size_t cap)
{
    cudaError_t why;
    cudaDeviceProp p;
    int n;

    gpu__clear();
    if (ndev != NULL)
        *ndev = 0;
    if (name != NULL && cap > 0)
        name[0] = '\0';
    n = device_count(&why);
    if (n <= 0)
        return gpu__fail(GKV_ENOTSUP, "no CUDA device (%s)",
                         why != cudaSuccess ? cudaGetErrorName(why)
                         : "no device visible");
    if (ndev != NULL)
        *ndev = n;
    if (name != NULL && cap > 0) {
        gkv_err rc = gpu__cuda(cudaGetDeviceProperties(&p, 0),
                               "cudaGetDeviceProperties");
        if (rc != GKV_OK)
            return rc;
        snprintf(name, cap, "%s", p.name);
    }
    return GKV_OK;
}

gkv_err
gkv_gpu_alloc(int device, size_t bytes, void **out_dev)
{
    gkv_err rc;

    gpu__clear();
    if (out_dev == NULL)
        return gpu__fail(GKV_EINVAL, "gkv_gpu_alloc: out_dev is NULL");
    *out_dev = NULL;
    if (bytes == 0)
        return gpu__fail(GKV_EINVAL, "gkv_gpu_alloc: 0 bytes");
    if ((rc = gpu__device(device, "gkv_gpu_alloc")) != GKV_OK)
        return rc;
    if ((rc = gpu__cuda(cudaMalloc(out_dev, bytes), "cudaMalloc")) != GKV_OK)
        *out_dev = NULL;
    return rc;
}

void
gkv_gpu_free(void *p_dev)
{
    if (p_dev != NULL)
        (void)cudaFree(p_dev);
}

gkv_err
gkv_gpu_host_alloc(size_t bytes, void **out)
{
    gkv_err rc;

    gpu__clear();
    if (out == NULL)
        return gpu__fail(GKV_EINVAL, "gkv_gpu_host_alloc: out is NULL");
    *out = NULL;
    if (bytes == 0)
        return gpu__fail(GKV_EINVAL, "gkv_gpu_host_alloc: 0 bytes");
    if ((rc = gpu__present("gkv_gpu_host_alloc")) != GKV_OK)
        return rc;
    if ((rc = gpu__cuda(cudaHostAlloc(out, bytes, cudaHostAllocMapped |
                                      cudaHostAllocPortable),
                        "cudaHostAlloc")) != GKV_OK)
        *out = NULL;
    return rc;
}

void
gkv_gpu_host_free(void *p)
{
    if (p != NULL)
        (void)cudaFreeHost(p);
}

gkv_err
gkv_gpu_copy(void *dst, const void *src, size_t bytes, void *stream)
{
    gkv_err rc;

    gpu__clear();
    if (bytes > 0 && (dst == NULL || src == NULL))
        return gpu__fail(GKV_EINVAL, "gkv_gpu_copy: NULL %s with %zu bytes",
                         dst == NULL ? "dst" : "src", bytes);
    if ((rc = gpu__present("gkv_gpu_copy")) != GKV_OK)
        return rc;
    if (bytes == 0)
        return GKV_OK;
    return gpu__cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault,
                                     (cudaStream_t)stream), "cudaMemcpyAsync");
}

gkv_err
gkv_gpu_sync(void *stream)
{
    gkv_err rc;

    gpu__clear();
    if ((rc = gpu__present("gkv_gpu_sync")) != GKV_OK)
        return rc;
    return gpu__cuda(cudaStreamSynchronize((cudaStream_t)stream),
                     "cudaStreamSynchronize");
}

/* ---- the hot set ---------------------------------------------------------- */

struct rank {
    int64_t deg, id;
};

static int
rank_cmp(const void *x, const void *y)
{
    const struct rank *a = (const struct rank *)x, *b = (const struct rank *)y;

    if (a->deg != b->deg)
        return a->deg > b->deg ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

gkv_err
gkv_gpu_hot_by_degree(const gkv_adj *a, int64_t lo, int64_t hi,
                      size_t row_bytes, size_t budget_bytes,
                      int64_t **out_ids, size_t *out_n)
{
    struct rank *r;
    int64_t *ids;
    size_t n, want;

    gpu__clear();
    if (out_ids == NULL || out_n == NULL)
        return gpu__fail(GKV_EINVAL, "gkv_gpu_hot_by_degree: NULL output");
    *out_ids = NULL;
    *out_n = 0;
    if (a == NULL || a->indptr == NULL)
        return gpu__fail(GKV_EINVAL, "gkv_gpu_hot_by_degree: NULL adjacency");
    if (row_bytes == 0)
        return gpu__fail(GKV_EINVAL, "gkv_gpu_hot_by_degree: row_bytes is 0");
    if (lo < 0 || lo > hi)
        return gpu__fail(GKV_EINVAL, "gkv_gpu_hot_by_degree: bad rows [%lld, "
                         "%lld)", (long long)lo, (long long)hi);
    if (a->col_lo < 0 || a->col_lo > a->col_hi)
        return gpu__fail(GKV_EINVAL, "gkv_gpu_hot_by_degree: bad columns "
                         "[%lld, %lld)", (long long)a->col_lo,
                         (long long)a->col_hi);
    n = (size_t)(hi - lo);
    want = budget_bytes / row_bytes;
    if (want > n)
        want = n;
    if (want == 0)
        return GKV_OK;
    if ((r = (struct rank *)gkv__malloc(n * sizeof *r)) == NULL)
        return gpu__fail(GKV_ENOMEM, "gkv_gpu_hot_by_degree: out of memory "
                         "for %zu rows", n);
    for (size_t i = 0; i < n; i++) {
        int64_t v = lo + (int64_t)i, deg = 0;
        if (v >= a->col_lo && v < a->col_hi) {
            int64_t c = v - a->col_lo;
            deg = a->indptr[c + 1] - a->indptr[c];
            if (deg < 0) {
                gkv__free(r);
                return gpu__fail(GKV_EINVAL, "gkv_gpu_hot_by_degree: indptr "
                                 "decreases at column %lld", (long long)v);
            }
        }
        r[i].deg = deg;
        r[i].id = v;
    }
    qsort(r, n, sizeof *r, rank_cmp);
    if ((ids = (int64_t *)gkv__malloc(want * sizeof *ids)) == NULL) {
        gkv__free(r);
        return gpu__fail(GKV_ENOMEM, "gkv_gpu_hot_by_degree: out of memory "
                         "for %zu IDs", want);
    }
    for (size_t i = 0; i < want; i++)
        ids[i] = r[i].id;
    gkv__free(r);
    *out_ids = ids;
    *out_n = want;
    return GKV_OK;
}
