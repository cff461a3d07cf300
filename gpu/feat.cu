/* feat.cu - the feature cache of gkv_gpu.h: every row in pinned host
 * memory (read by the device zero-copy), the hot rows also in device
 * memory, and one gather kernel that reads each row from where it lives
 * (GraphLearn-for-PyTorch's UnifiedTensor idea).
 *
 * The gather gives each row a group of 'tpr' lanes (a power of two up to a
 * warp, enough for the row's vectors) that copy it in 16-, 8-, 4- or 1-byte
 * words: the widest that divides the row and every base address, so
 * typical feature rows (64 f32 = 256 B) move in 16-byte loads. */
#include "gpu/gpu_int.h"     /* first: its pragmas cover everything after */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define GATHER_THREADS 256
/* Bad-ID records per cache: one per stream that gathers (the first
 * BAD_SLOTS - 1 streams seen; any further ones share the last, and a sync
 * of one of those may report another's bad ID). */
#define BAD_SLOTS 64

struct gbad {                  /* the first bad ID a gather met */
    unsigned int       flag;   /* 0: none; claimed with atomicCAS */
    unsigned long long idx;    /* its index in ids */
    long long          id;
};

struct gkv_gpu_feat {
    int      device;
    int64_t  lo, hi;
    size_t   row_bytes;
    int      dtype;
    void    *host;             /* pinned, mapped: all rows */
    const char *host_dev;      /* the same memory as the device sees it */
    char    *hot_dev;          /* n_hot rows, or NULL */
    int     *slot_dev;         /* hi - lo slots (-1: not hot), or NULL */
    size_t   n_hot, dev_bytes, host_bytes;
    struct gbad *bad_dev;      /* [BAD_SLOTS] */
    pthread_mutex_t bad_mu;    /* guards bad_stream, nbad, capbad */
    void   **bad_stream;       /* every stream that gathered, in order:
                                * stream i has slot min(i, BAD_SLOTS - 1) */
    unsigned nbad, capbad;
    int      sms;              /* multiprocessors, for the grid size */
};

template <typename W>
__device__ static inline void
copy_row(char *dst, const char *src, size_t nw, unsigned lane, unsigned tpr)
{
    const W *s = (const W *)src;
    W *d = (W *)dst;

    for (size_t j = lane; j < nw; j += tpr)
        d[j] = s[j];
}

__global__ static void
gather_k(const int64_t *ids, size_t n, int64_t lo, int64_t nrows,
         const int *slot, const char *hot, const char *host,
         const int64_t *miss, const char *mrows, size_t rb,
         char *out, unsigned tpr, unsigned vec, struct gbad *bad)
{
    size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t step = (size_t)gridDim.x * blockDim.x / tpr;
    unsigned lane = (unsigned)(t % tpr);
    size_t nw = rb / vec;

    for (size_t row = t / tpr; row < n; row += step) {
        int64_t id = ids[row], r = id - lo;
        char *dst = out + row * rb;
        const char *src;
        if (miss != NULL && miss[row] >= 0) {
            src = mrows + (size_t)miss[row] * rb;
        } else if (id < lo || r >= nrows) {
            for (size_t j = lane; j < rb; j += tpr)
                dst[j] = 0;
            if (lane == 0 && atomicCAS(&bad->flag, 0u, 1u) == 0u) {
                bad->idx = (unsigned long long)row;
                bad->id = (long long)id;
            }
            continue;
        } else {
            int s = slot != NULL ? slot[r] : -1;
            src = s >= 0 ? hot + (size_t)s * rb : host + (size_t)r * rb;
        }
        switch (vec) {
        case 16: copy_row<uint4>(dst, src, nw, lane, tpr); break;
        case 8:  copy_row<uint2>(dst, src, nw, lane, tpr); break;
        case 4:  copy_row<unsigned>(dst, src, nw, lane, tpr); break;
        default: copy_row<unsigned char>(dst, src, nw, lane, tpr); break;
        }
    }
}

void
gkv_gpu_feat_close(gkv_gpu_feat *f)
{
    if (f == NULL)
        return;
    if (cudaSetDevice(f->device) == cudaSuccess)
        (void)cudaDeviceSynchronize();
    (void)cudaFree(f->hot_dev);
    (void)cudaFree(f->slot_dev);
    (void)cudaFree(f->bad_dev);
    gkv__free(f->bad_stream);
    pthread_mutex_destroy(&f->bad_mu);
    if (f->host != NULL)
        (void)cudaFreeHost(f->host);
    (void)cudaGetLastError();
    gkv__free(f);
}

/* The hot IDs by opts: into *ids (gkv__malloc'd or borrowed: *owned says)
 * and *n, at most 'cap'. */
static gkv_err
hot_choose(const gkv_gpu_feat_opts *o, const gkv_gpu_feat *f, size_t cap,
           const int64_t **ids, size_t *n, int64_t **owned)
{
    *ids = NULL;
    *n = 0;
    *owned = NULL;
    /* the IDs are checked even when none fits the budget */
    for (size_t i = 0; o->hot_ids != NULL && i < o->n_hot; i++)
        if (o->hot_ids[i] < f->lo || o->hot_ids[i] >= f->hi)
            return gpu__fail(GKV_ERANGE, "gkv_gpu_feat_open: hot_ids[%zu] = "
                             "%lld is outside the tensor's rows [%lld, %lld)",
                             i, (long long)o->hot_ids[i], (long long)f->lo,
                             (long long)f->hi);
    if (cap == 0)
        return GKV_OK;
    if (o->hot_ids != NULL) {
        *ids = o->hot_ids;
        *n = o->n_hot;
        return GKV_OK;
    }
    if (o->hot_adj != NULL) {
        gkv_err rc = gkv_gpu_hot_by_degree(o->hot_adj, f->lo, f->hi,
                                           f->row_bytes, cap * f->row_bytes,
                                           owned, n);
        *ids = *owned;
        return rc;
    }
    if ((*owned = (int64_t *)gkv__malloc(cap * sizeof **owned)) == NULL)
        return gpu__fail(GKV_ENOMEM, "gkv_gpu_feat_open: out of memory");
    for (size_t i = 0; i < cap; i++)
        (*owned)[i] = f->lo + (int64_t)i;
    *ids = *owned;
    *n = cap;
    return GKV_OK;
}

/* Puts the hot rows on the device: slots in the order given, duplicates
 * once, at most 'cap'. */
static gkv_err
hot_load(gkv_gpu_feat *f, const int64_t *ids, size_t n, size_t cap)
{
    size_t nrows = (size_t)(f->hi - f->lo), k = 0;
    int *slot = NULL;
    char *stage = NULL;
    gkv_err rc = GKV_OK;

    if (n == 0 || cap == 0)
        return GKV_OK;
    if (nrows > (size_t)INT32_MAX)
        return gpu__fail(GKV_EINVAL, "gkv_gpu_feat_open: %zu rows: a cache "
                         "with hot rows holds at most 2^31 - 1", nrows);
    if ((slot = (int *)gkv__malloc(nrows * sizeof *slot)) == NULL)
        return gpu__fail(GKV_ENOMEM, "gkv_gpu_feat_open: out of memory for "
                         "the slot map");
    memset(slot, 0xff, nrows * sizeof *slot);
    for (size_t i = 0; i < n && k < cap; i++) {
        size_t r = (size_t)(ids[i] - f->lo);
        if (slot[r] < 0)
            slot[r] = (int)k++;
    }
    if ((stage = (char *)gkv__malloc(k * f->row_bytes)) == NULL) {
        rc = gpu__fail(GKV_ENOMEM, "gkv_gpu_feat_open: out of memory for "
                       "%zu staged rows", k);
        goto out;
    }
    for (size_t r = 0; r < nrows; r++)
        if (slot[r] >= 0)
            memcpy(stage + (size_t)slot[r] * f->row_bytes,
                   (const char *)f->host + r * f->row_bytes, f->row_bytes);
    if ((rc = gpu__cuda(cudaMalloc((void **)&f->hot_dev, k * f->row_bytes),
                        "cudaMalloc (hot rows)")) != GKV_OK ||
        (rc = gpu__cuda(cudaMalloc((void **)&f->slot_dev,
                                   nrows * sizeof *slot),
                        "cudaMalloc (slot map)")) != GKV_OK ||
        (rc = gpu__cuda(cudaMemcpy(f->hot_dev, stage, k * f->row_bytes,
                                   cudaMemcpyHostToDevice),
                        "cudaMemcpy (hot rows)")) != GKV_OK ||
        (rc = gpu__cuda(cudaMemcpy(f->slot_dev, slot, nrows * sizeof *slot,
                                   cudaMemcpyHostToDevice),
                        "cudaMemcpy (slot map)")) != GKV_OK)
        goto out;
    f->n_hot = k;
    f->dev_bytes += k * f->row_bytes + nrows * sizeof *slot;
out:
    gkv__free(stage);
    gkv__free(slot);
    return rc;
}

gkv_err
gkv_gpu_feat_open(gkv_gpu_feat **out, gkv_store *s, const char *name,
                  const gkv_gpu_feat_opts *opts)
{
    gkv_gpu_feat_opts o;
    gkv_tensor_desc d;
    gkv_gpu_feat *f = NULL;
    const int64_t *hot = NULL;
    int64_t *owned = NULL;
    size_t nhot = 0, cap, nrows, bytes;
    gkv_err rc;
    void *p = NULL;

    gpu__clear();
    if (out == NULL)
        return gpu__fail(GKV_EINVAL, "gkv_gpu_feat_open: out is NULL");
    *out = NULL;
    if (s == NULL || name == NULL)
        return gpu__fail(GKV_EINVAL, "gkv_gpu_feat_open: NULL %s",
                         s == NULL ? "store" : "tensor name");
    if (opts != NULL)
        o = *opts;
    else
        memset(&o, 0, sizeof o);
    if (o.device < 0)
        return gpu__fail(GKV_EINVAL, "gkv_gpu_feat_open: device %d is "
                         "negative", o.device);
    if (o.hot_ids == NULL && o.n_hot > 0)
        return gpu__fail(GKV_EINVAL, "gkv_gpu_feat_open: hot_ids is NULL "
                         "with n_hot %zu", o.n_hot);
    if (o.hot_adj != NULL && o.hot_adj->indptr == NULL)
        return gpu__fail(GKV_EINVAL, "gkv_gpu_feat_open: hot_adj has no "
                         "indptr");
    if ((rc = gkv_tensor_info(s, NULL, name, &d)) != GKV_OK)
        return gpu__fail(rc, "gkv_gpu_feat_open: tensor '%s': %s", name,
                         gkv_store_errmsg(s)[0] ? gkv_store_errmsg(s)
                         : gkv_strerror(rc));
    if ((rc = gpu__device(o.device, "gkv_gpu_feat_open")) != GKV_OK)
        return rc;
    if ((f = (gkv_gpu_feat *)gkv__calloc(1, sizeof *f)) == NULL)
        return gpu__fail(GKV_ENOMEM, "gkv_gpu_feat_open: out of memory");
    pthread_mutex_init(&f->bad_mu, NULL);
    f->device = o.device;
    f->lo = (int64_t)d.lo;
    f->hi = (int64_t)d.hi;
    f->row_bytes = d.row_bytes;
    f->dtype = (int)d.dtype;
    nrows = (size_t)(d.hi - d.lo);
    bytes = nrows * d.row_bytes;
    if ((rc = gpu__cuda(cudaDeviceGetAttribute(&f->sms,
                        cudaDevAttrMultiProcessorCount, o.device),
                        "cudaDeviceGetAttribute")) != GKV_OK)
        goto fail;
    if ((rc = gpu__cuda(cudaHostAlloc(&f->host, bytes, cudaHostAllocMapped |
                                      cudaHostAllocPortable),
                        "cudaHostAlloc (rows)")) != GKV_OK)
        goto fail;
    f->host_bytes = bytes;
    if ((rc = gpu__cuda(cudaHostGetDevicePointer(&p, f->host, 0),
                        "cudaHostGetDevicePointer")) != GKV_OK)
        goto fail;
    f->host_dev = (const char *)p;
    if ((rc = gkv_tensor_read(s, NULL, name, d.lo, d.hi, f->host,
                              bytes)) != GKV_OK) {
        rc = gpu__fail(rc, "gkv_gpu_feat_open: reading tensor '%s': %s",
                       name, gkv_store_errmsg(s));
        goto fail;
    }
    if ((rc = gpu__cuda(cudaMalloc((void **)&f->bad_dev, BAD_SLOTS *
                                   sizeof *f->bad_dev), "cudaMalloc"))
        != GKV_OK ||
        (rc = gpu__cuda(cudaMemset(f->bad_dev, 0, BAD_SLOTS *
                                   sizeof *f->bad_dev), "cudaMemset"))
        != GKV_OK)
        goto fail;
    f->dev_bytes = BAD_SLOTS * sizeof *f->bad_dev;
    cap = o.budget_bytes / d.row_bytes;
    if (cap > nrows)
        cap = nrows;
    if ((rc = hot_choose(&o, f, cap, &hot, &nhot, &owned)) != GKV_OK ||
        (rc = hot_load(f, hot, nhot, cap)) != GKV_OK)
        goto fail;
    /* the copies and memsets above ran on the legacy default stream, which
     * a non-blocking stream's gathers are not ordered after: done now */
    if ((rc = gpu__cuda(cudaDeviceSynchronize(), "gkv_gpu_feat_open: "
                        "cudaDeviceSynchronize")) != GKV_OK)
        goto fail;
    gkv__free(owned);
    *out = f;
    return GKV_OK;
fail:
    gkv__free(owned);
    gkv_gpu_feat_close(f);
    return rc;
}

gkv_err
gkv_gpu_feat_info_get(const gkv_gpu_feat *f, gkv_gpu_feat_info *out)
{
    gpu__clear();
    if (f == NULL || out == NULL)
        return gpu__fail(GKV_EINVAL, "gkv_gpu_feat_info_get: NULL argument");
    out->device = f->device;
    out->lo = f->lo;
    out->hi = f->hi;
    out->row_bytes = f->row_bytes;
    out->dtype = f->dtype;
    out->n_hot = f->n_hot;
    out->dev_bytes = f->dev_bytes;
    out->host_bytes = f->host_bytes;
    return GKV_OK;
}

static unsigned
word_for(size_t rb, const void *a, const void *b, const void *c,
         const void *d)
{
    uintptr_t m = (uintptr_t)a | (uintptr_t)b | (uintptr_t)c | (uintptr_t)d |
                  (uintptr_t)rb;

    if ((m & 15) == 0)
        return 16;
    if ((m & 7) == 0)
        return 8;
    if ((m & 3) == 0)
        return 4;
    return 1;
}

/* The bad-ID record of 'stream' on f: its own slot, given on its first
 * gather ('make'), so that a sync reports only what that stream's gathers
 * met and cannot clear another stream's report (past BAD_SLOTS - 1
 * streams the last slot is shared); -1 when the stream never gathered
 * (then 'make' 0), or with 'make' when out of memory. */
static int
bad_slot(gkv_gpu_feat *f, void *stream, int make)
{
    int k = -1;

    pthread_mutex_lock(&f->bad_mu);
    for (unsigned i = 0; i < f->nbad; i++)
        if (f->bad_stream[i] == stream) {
            k = (int)i;
            break;
        }
    if (k < 0 && make) {
        if (f->nbad == f->capbad) {
            unsigned nc = f->capbad ? 2 * f->capbad : 16;
            void **ns = (void **)gkv__realloc(f->bad_stream, nc * sizeof *ns);
            if (ns != NULL) {
                f->bad_stream = ns;
                f->capbad = nc;
            }
        }
        if (f->nbad < f->capbad) {
            k = (int)f->nbad++;
            f->bad_stream[k] = stream;
        }
    }
    pthread_mutex_unlock(&f->bad_mu);
    return k < BAD_SLOTS - 1 ? k : BAD_SLOTS - 1;
}

/* Launches the gather of rows ids[0..n) into out_dev; rows with
 * miss[i] >= 0 come from mrows (device-visible) instead. */
static gkv_err
gather_launch(gkv_gpu_feat *f, const int64_t *ids_dev, size_t n,
              const int64_t *miss, const char *mrows, void *out_dev,
              void *stream, const char *what)
{
    unsigned vec, tpr = 1;
    size_t nw, blocks, maxb;
    gkv_err rc;
    int slot;

    if ((rc = gpu__cuda(cudaSetDevice(f->device), "cudaSetDevice")) != GKV_OK)
        return rc;
    if ((slot = bad_slot(f, stream, 1)) < 0)
        return gpu__fail(GKV_ENOMEM, "%s: out of memory", what);
    vec = word_for(f->row_bytes, out_dev, f->host_dev, f->hot_dev, mrows);
    nw = f->row_bytes / vec;
    while (tpr < 32 && tpr < nw)
        tpr *= 2;
    blocks = (n * tpr + GATHER_THREADS - 1) / GATHER_THREADS;
    maxb = (size_t)(f->sms > 0 ? f->sms : 1) * 32;
    if (blocks > maxb)
        blocks = maxb;
    GPU_LAUNCH(gather_k, (unsigned)blocks, GATHER_THREADS,
               (cudaStream_t)stream, ids_dev, n, f->lo, f->hi - f->lo,
               f->slot_dev, f->hot_dev, f->host_dev, miss, mrows,
               f->row_bytes, (char *)out_dev, tpr, vec, f->bad_dev + slot);
    return gpu__cuda(cudaGetLastError(), what);
}

gkv_err
gkv_gpu_feat_gather(gkv_gpu_feat *f, const int64_t *ids_dev, size_t n,
                    void *out_dev, void *stream)
{
    gpu__clear();
    if (f == NULL)
        return gpu__fail(GKV_EINVAL, "gkv_gpu_feat_gather: NULL cache");
    if (n > 0 && (ids_dev == NULL || out_dev == NULL))
        return gpu__fail(GKV_EINVAL, "gkv_gpu_feat_gather: NULL %s with n = "
                         "%zu", ids_dev == NULL ? "ids_dev" : "out_dev", n);
    if (n == 0)
        return GKV_OK;
    return gather_launch(f, ids_dev, n, NULL, NULL, out_dev, stream,
                         "gkv_gpu_feat_gather: launch");
}

gkv_err
gpu__feat_gather_mixed(gkv_gpu_feat *f, const int64_t *ids_dev, size_t n,
                       const int64_t *miss_dev, const void *base, size_t off,
                       void *out_dev, void *stream)
{
    void *base_dev = NULL;
    gkv_err rc;

    if (n == 0)
        return GKV_OK;
    /* the device address of the allocation itself, as the runtime
     * documents it, then the offset */
    if (base != NULL &&
        (rc = gpu__cuda(cudaHostGetDevicePointer(&base_dev, (void *)base, 0),
                        "cudaHostGetDevicePointer (pulled rows)")) != GKV_OK)
        return rc;
    return gather_launch(f, ids_dev, n, miss_dev,
                         base_dev != NULL ? (const char *)base_dev + off
                         : NULL, out_dev, stream, "feature gather: launch");
}

gkv_err
gkv_gpu_feat_sync(gkv_gpu_feat *f, void *stream)
{
    struct gbad b;
    gkv_err rc;
    int k;

    gpu__clear();
    if (f == NULL)
        return gpu__fail(GKV_EINVAL, "gkv_gpu_feat_sync: NULL cache");
    if ((rc = gpu__cuda(cudaSetDevice(f->device), "cudaSetDevice")) !=
        GKV_OK ||
        (rc = gpu__cuda(cudaStreamSynchronize((cudaStream_t)stream),
                        "gkv_gpu_feat_sync: a gather failed")) != GKV_OK)
        return rc;
    if ((k = bad_slot(f, stream, 0)) < 0)   /* it never gathered */
        return GKV_OK;
    /* this stream's gathers are done: its record is final (a shared last
     * slot may still change under other streams' gathers). On the stream
     * itself, so that a non-blocking stream's next gather comes after the
     * clearing, and other threads' streams are not waited for */
    if ((rc = gpu__cuda(cudaMemcpyAsync(&b, f->bad_dev + k, sizeof b,
                                        cudaMemcpyDeviceToHost,
                                        (cudaStream_t)stream),
                        "cudaMemcpyAsync")) != GKV_OK ||
        (rc = gpu__cuda(cudaStreamSynchronize((cudaStream_t)stream),
                        "cudaStreamSynchronize")) != GKV_OK)
        return rc;
    if (b.flag == 0)
        return GKV_OK;
    if ((rc = gpu__cuda(cudaMemsetAsync(f->bad_dev + k, 0, sizeof *f->bad_dev,
                                        (cudaStream_t)stream),
                        "cudaMemsetAsync")) != GKV_OK ||
        (rc = gpu__cuda(cudaStreamSynchronize((cudaStream_t)stream),
                        "cudaStreamSynchronize")) != GKV_OK)
        return rc;
    return gpu__fail(GKV_ERANGE, "gkv_gpu_feat_gather: ids[%llu] = %lld is "
                     "outside the rows [%lld, %lld) of the cache",
                     b.idx, b.id, (long long)f->lo, (long long)f->hi);
}
