/* sample.cu - GPU neighbour sampling (gkv_gpu_sample_blocks): the picks of
 * gkv_sample.h's generator (gen.h, shared with the tests) and the CPU's
 * relabel order, computed on the device.
 *
 * One hop over a frontier of n_dst nodes (the block's destination nodes):
 *   count    per node: its number of picks (gkv_gen_npicks), or a range
 *            error; then an exclusive scan gives each node its edge offset
 *            and the total E (read back: the only host wait besides the
 *            node count);
 *   pick     per node: its picks as column offsets (gen.h), turned into
 *            global neighbour and edge IDs, dst = the node's local ID;
 *   relabel  an open-addressing hash table from global ID to (first
 *            appearance, label). Destination nodes go in with first
 *            appearance i (their index); every edge j offers n_dst + j with
 *            atomicMin, so a source's entry ends up holding its first edge
 *            position (or its destination index). The edges whose position
 *            is their source's first appearance are the new nodes, in edge
 *            order; a scan of those flags numbers them n_dst, n_dst + 1, ..
 *            which is the CPU order (destination nodes in order, then new
 *            sources in order of first appearance in the edge list).
 * The next hop's frontier is this block's node list. */
#include "gpu/gpu_int.h"     /* first: its pragmas cover everything after */
#include <stdio.h>
#include <string.h>
#include <math.h>
#include "base/gen.h"

#define THREADS     256
#define SCAN_B      512           /* elements per scan block */
#define LAYERS_MAX  16
#define EMPTY       0xffffffffffffffffULL

enum { ERR_NONE = 0, ERR_RANGE = 1, ERR_DUP = 2 };

struct gerr {                     /* the first device-side error */
    unsigned int code;
    long long    val;             /* the node */
    long long    idx;             /* its index in the frontier */
};

struct gkv_gpu_sgraph {
    int      device, on_dev;
    int64_t  col_lo, col_hi, num_nodes, nnz, eid_lo;
    const int64_t *indptr_dev, *indices_dev, *eids_dev;   /* eids: or NULL */
    const float   *w_dev;                                 /* or NULL */
    void    *mem_dev;             /* the arrays, in device memory, or */
    void    *mem_host;            /* in mapped pinned host memory */
};

/* A device array of int64 that grows and is kept. */
struct darr {
    int64_t *p;
    size_t   cap;
};

struct gkv_gpu_sampler {
    const gkv_gpu_sgraph *g;
    struct darr ids[LAYERS_MAX], src[LAYERS_MAX], dst[LAYERS_MAX],
                eid[LAYERS_MAX];
    struct darr seeds, cnt, gsrc, slot, flag, scan;
    struct darr hkey, hval, hlab;
    struct gerr *err_dev;
    int64_t     *pin;             /* pinned host words read back */
    void        *feat_dev;        /* input features (sample_blocks_feat) */
    size_t       feat_cap;        /* bytes */
};

/* ---- device helpers ------------------------------------------------------- */

__device__ static void
err_set(struct gerr *e, unsigned code, int64_t val, int64_t idx)
{
    if (atomicCAS(&e->code, 0u, code) == 0u) {
        e->val = (long long)val;
        e->idx = (long long)idx;
    }
}

/* The slot of 'key' in the table (inserted when missing). */
__device__ static size_t
ht_slot(unsigned long long *keys, unsigned bits, int64_t key)
{
    size_t mask = ((size_t)1 << bits) - 1;
    size_t i = (size_t)(((uint64_t)key * GKV_GEN_G) >> (64 - bits));

    for (;; i = (i + 1) & mask) {
        unsigned long long k = *(volatile unsigned long long *)&keys[i];
        if (k == (unsigned long long)key)
            return i;
        if (k == EMPTY) {
            k = atomicCAS(&keys[i], EMPTY, (unsigned long long)key);
            if (k == EMPTY || k == (unsigned long long)key)
                return i;
        }
    }
}

/* ---- kernels -------------------------------------------------------------- */

struct hop {                      /* what the per-node kernels need */
    const int64_t *indptr, *indices, *eids;
    const float   *w;
    int64_t  col_lo, ncols, eid_lo;
    int64_t  k;
    int      replace, weighted;
    uint64_t key;
};

#ifdef GKV_GPU_EMU
/* The emulator's check of a launch's arguments, for the pointers in a
 * hop (gkv_emu_args in gpu/emu/cuda_runtime.h). */
static inline void
gkv_emu_arg(const char *kernel, int i, const struct hop &h)
{
    gkv_emu_check_arg(kernel, i, h.indptr);
    gkv_emu_check_arg(kernel, i, h.indices);
    gkv_emu_check_arg(kernel, i, h.eids);
    gkv_emu_check_arg(kernel, i, h.w);
}
#endif

__global__ static void
count_k(struct hop h, const int64_t *front, size_t n, int64_t *cnt,
        struct gerr *err)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;

    if (i > n)
        return;
    if (i == n) {
        cnt[n] = 0;
        return;
    }
    {
        int64_t v = front[i], c = v - h.col_lo, b, d, z = 0;
        if (h.k == 0) {           /* not sampled: the CPU skips the column */
            cnt[i] = 0;
            return;
        }
        if (c < 0 || c >= h.ncols) {
            err_set(err, ERR_RANGE, v, (int64_t)i);
            cnt[i] = 0;
            return;
        }
        b = h.indptr[c];
        d = h.indptr[c + 1] - b;
        if (h.weighted)
            z = gkv_gen_positive(h.w + b, d);
        cnt[i] = gkv_gen_npicks(d, z, h.k, h.replace, h.weighted);
    }
}

__global__ static void
pick_k(struct hop h, const int64_t *front, size_t n, const int64_t *off,
       int64_t *gsrc, int64_t *dstl, int64_t *eid)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    int64_t v, c, b, d, o, np;
    uint64_t bv;

    if (i >= n)
        return;
    v = front[i];
    c = v - h.col_lo;
    o = off[i];
    np = off[i + 1] - o;
    if (np == 0)
        return;
    b = h.indptr[c];
    d = h.indptr[c + 1] - b;
    bv = gkv_gen_node(h.key, v);
    if (h.weighted)
        gkv_gen_weighted(bv, h.w + b, d, gkv_gen_positive(h.w + b, d), h.k,
                         h.replace, gsrc + o);
    else
        gkv_gen_uniform(bv, d, h.k, h.replace, gsrc + o);
    for (int64_t q = 0; q < np; q++) {
        int64_t p = b + gsrc[o + q];
        gsrc[o + q] = h.indices[p];
        eid[o + q] = h.eids != NULL ? h.eids[p] : h.eid_lo + p;
        dstl[o + q] = (int64_t)i;
    }
}

__global__ static void
ins_dst_k(const int64_t *front, size_t n, unsigned long long *keys,
          unsigned long long *val, int64_t *lab, unsigned bits, int64_t *ids,
          struct gerr *err)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t s;

    if (i >= n)
        return;
    s = ht_slot(keys, bits, front[i]);
    if (atomicMin(&val[s], (unsigned long long)i) != EMPTY)
        err_set(err, ERR_DUP, front[i], (int64_t)i);
    lab[s] = (int64_t)i;
    ids[i] = front[i];
}

__global__ static void
ins_edge_k(const int64_t *gsrc, size_t ne, size_t ndst,
           unsigned long long *keys, unsigned long long *val, unsigned bits,
           int64_t *slot)
{
    size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t s;

    if (j >= ne)
        return;
    s = ht_slot(keys, bits, gsrc[j]);
    slot[j] = (int64_t)s;
    atomicMin(&val[s], (unsigned long long)(ndst + j));
}

__global__ static void
flag_k(const int64_t *slot, size_t ne, size_t ndst,
       const unsigned long long *val, int64_t *flag)
{
    size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x;

    if (j > ne)
        return;
    flag[j] = j < ne && val[slot[j]] == (unsigned long long)(ndst + j);
}

/* flag[] now holds the exclusive scan: the rank of each new node. */
__global__ static void
newlab_k(const int64_t *slot, const int64_t *gsrc, const int64_t *rank,
         size_t ne, size_t ndst, const unsigned long long *val, int64_t *lab,
         int64_t *ids)
{
    size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x;

    if (j >= ne || val[slot[j]] != (unsigned long long)(ndst + j))
        return;
    lab[slot[j]] = (int64_t)ndst + rank[j];
    ids[ndst + (size_t)rank[j]] = gsrc[j];
}

__global__ static void
local_k(const int64_t *slot, size_t ne, const int64_t *lab, int64_t *srcl)
{
    size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x;

    if (j < ne)
        srcl[j] = lab[slot[j]];
}

/* ---- exclusive scan of int64, in place -------------------------------------- */

__global__ static void
scan_block_k(int64_t *a, size_t n, int64_t *sums)
{
    __shared__ int64_t sh[SCAN_B];
    size_t i = (size_t)blockIdx.x * SCAN_B + threadIdx.x;
    int64_t x = i < n ? a[i] : 0;

    sh[threadIdx.x] = x;
    __syncthreads();
    for (unsigned o = 1; o < SCAN_B; o <<= 1) {
        int64_t t = threadIdx.x >= o ? sh[threadIdx.x - o] : 0;
        __syncthreads();
        sh[threadIdx.x] += t;
        __syncthreads();
    }
    if (i < n)
        a[i] = sh[threadIdx.x] - x;
    if (threadIdx.x == SCAN_B - 1)
        sums[blockIdx.x] = sh[SCAN_B - 1];
}

__global__ static void
scan_add_k(int64_t *a, size_t n, const int64_t *sums)
{
    size_t i = (size_t)blockIdx.x * SCAN_B + threadIdx.x;

    if (i < n)
        a[i] += sums[blockIdx.x];
}

/* Scratch words a scan of n needs: the block sums of every level. */
static size_t
scan_need(size_t n)
{
    size_t t = 0;

    do {
        n = (n + SCAN_B - 1) / SCAN_B;
        t += n;
    } while (n > 1);
    return t;
}

static void
scan(int64_t *a, size_t n, int64_t *tmp, cudaStream_t st)
{
    size_t nb = (n + SCAN_B - 1) / SCAN_B;

    GPU_LAUNCH_SYNC(scan_block_k, (unsigned)nb, SCAN_B, st, a, n, tmp);
    if (nb > 1) {
        scan(tmp, nb, tmp + nb, st);
        GPU_LAUNCH(scan_add_k, (unsigned)nb, SCAN_B, st, a, n, tmp);
    }
}

/* ---- the sgraph ------------------------------------------------------------- */

static size_t
up256(size_t x)
{
    return (x + 255) & ~(size_t)255;
}

void
gkv_gpu_sgraph_free(gkv_gpu_sgraph *g)
{
    if (g == NULL)
        return;
    if (cudaSetDevice(g->device) == cudaSuccess)
        (void)cudaDeviceSynchronize();
    (void)cudaFree(g->mem_dev);
    if (g->mem_host != NULL)
        (void)cudaFreeHost(g->mem_host);
    (void)cudaGetLastError();
    gkv__free(g);
}

int
gkv_gpu_sgraph_on_device(const gkv_gpu_sgraph *g)
{
    return g != NULL && g->on_dev;
}

/* The checks gkv_sgraph_set_adj() makes, and the weights'. */
static gkv_err
adj_check(const gkv_adj *a, int64_t num_nodes)
{
    int64_t nc, nnz;

    if (a->indptr == NULL)
        return gpu__fail(GKV_EINVAL, "gkv_gpu_sgraph_new: indptr is NULL");
    if (a->col_lo < 0 || a->col_lo > a->col_hi || a->col_hi > num_nodes)
        return gpu__fail(GKV_EINVAL, "gkv_gpu_sgraph_new: columns [%lld, "
                         "%lld) are not within the %lld nodes",
                         (long long)a->col_lo, (long long)a->col_hi,
                         (long long)num_nodes);
    nc = a->col_hi - a->col_lo;
    if (a->indptr[0] != 0)
        return gpu__fail(GKV_EINVAL, "gkv_gpu_sgraph_new: indptr[0] = %lld, "
                         "not 0", (long long)a->indptr[0]);
    for (int64_t c = 0; c < nc; c++)
        if (a->indptr[c + 1] < a->indptr[c])
            return gpu__fail(GKV_EINVAL, "gkv_gpu_sgraph_new: indptr "
                             "decreases at column %lld (%lld after %lld)",
                             (long long)(a->col_lo + c),
                             (long long)a->indptr[c + 1],
                             (long long)a->indptr[c]);
    nnz = a->indptr[nc];
    if (nnz > 0 && a->indices == NULL)
        return gpu__fail(GKV_EINVAL, "gkv_gpu_sgraph_new: indices is NULL");
    for (int64_t p = 0; p < nnz; p++) {
        if (a->indices[p] < 0 || a->indices[p] >= num_nodes)
            return gpu__fail(GKV_ERANGE, "gkv_gpu_sgraph_new: indices[%lld] "
                             "= %lld is not a node ID (%lld nodes)",
                             (long long)p, (long long)a->indices[p],
                             (long long)num_nodes);
        if (a->eids != NULL && a->eids[p] < 0)
            return gpu__fail(GKV_ERANGE, "gkv_gpu_sgraph_new: eids[%lld] = "
                             "%lld is negative", (long long)p,
                             (long long)a->eids[p]);
        if (a->w != NULL && (!(a->w[p] >= 0.0f) || isinf(a->w[p])))
            return gpu__fail(GKV_EINVAL, "gkv_gpu_sgraph_new: edge at "
                             "position %lld (ID %lld) has weight %g; "
                             "weights must be finite and >= 0", (long long)p,
                             (long long)(a->eids != NULL ? a->eids[p]
                                         : a->eid_lo + p), (double)a->w[p]);
    }
    if (a->eids == NULL && a->eid_lo < 0)
        return gpu__fail(GKV_ERANGE, "gkv_gpu_sgraph_new: eid_lo %lld is "
                         "negative", (long long)a->eid_lo);
    return GKV_OK;
}

gkv_err
gkv_gpu_sgraph_new(gkv_gpu_sgraph **out, const gkv_adj *a, int64_t num_nodes,
                   int device, size_t budget_bytes)
{
    gkv_gpu_sgraph *g;
    size_t nc, nnz, bi, bx, be, bw, total;
    char *stage = NULL, *base;
    gkv_err rc;

    gpu__clear();
    if (out == NULL)
        return gpu__fail(GKV_EINVAL, "gkv_gpu_sgraph_new: out is NULL");
    *out = NULL;
    if (a == NULL)
        return gpu__fail(GKV_EINVAL, "gkv_gpu_sgraph_new: adjacency is NULL");
    if (num_nodes < 0 || device < 0)
        return gpu__fail(GKV_EINVAL, "gkv_gpu_sgraph_new: %s %lld is "
                         "negative", num_nodes < 0 ? "num_nodes" : "device",
                         (long long)(num_nodes < 0 ? num_nodes : device));
    if ((rc = adj_check(a, num_nodes)) != GKV_OK)
        return rc;
    if ((rc = gpu__device(device, "gkv_gpu_sgraph_new")) != GKV_OK)
        return rc;
    nc = (size_t)(a->col_hi - a->col_lo);
    nnz = (size_t)a->indptr[nc];
    bi = up256((nc + 1) * sizeof(int64_t));
    bx = up256(nnz * sizeof(int64_t));
    be = a->eids != NULL ? up256(nnz * sizeof(int64_t)) : 0;
    bw = a->w != NULL ? up256(nnz * sizeof(float)) : 0;
    total = bi + bx + be + bw;
    if ((g = (gkv_gpu_sgraph *)gkv__calloc(1, sizeof *g)) == NULL)
        return gpu__fail(GKV_ENOMEM, "gkv_gpu_sgraph_new: out of memory");
    g->device = device;
    g->col_lo = a->col_lo;
    g->col_hi = a->col_hi;
    g->num_nodes = num_nodes;
    g->nnz = (int64_t)nnz;
    g->eid_lo = a->eid_lo;
    g->on_dev = budget_bytes == 0 || total <= budget_bytes;
    if (g->on_dev) {
        if ((rc = gpu__cuda(cudaMalloc(&g->mem_dev, total),
                            "cudaMalloc (adjacency)")) != GKV_OK)
            goto fail;
        base = (char *)g->mem_dev;
    } else {
        void *p;
        if ((rc = gpu__cuda(cudaHostAlloc(&g->mem_host, total,
                            cudaHostAllocMapped | cudaHostAllocPortable),
                            "cudaHostAlloc (adjacency)")) != GKV_OK ||
            (rc = gpu__cuda(cudaHostGetDevicePointer(&p, g->mem_host, 0),
                            "cudaHostGetDevicePointer")) != GKV_OK)
            goto fail;
        base = (char *)p;
        stage = (char *)g->mem_host;
    }
    g->indptr_dev = (const int64_t *)base;
    g->indices_dev = (const int64_t *)(base + bi);
    g->eids_dev = be ? (const int64_t *)(base + bi + bx) : NULL;
    g->w_dev = bw ? (const float *)(base + bi + bx + be) : NULL;
    if (stage != NULL) {
        memcpy(stage, a->indptr, (nc + 1) * sizeof(int64_t));
        if (nnz > 0)
            memcpy(stage + bi, a->indices, nnz * sizeof(int64_t));
        if (be)
            memcpy(stage + bi + bx, a->eids, nnz * sizeof(int64_t));
        if (bw)
            memcpy(stage + bi + bx + be, a->w, nnz * sizeof(float));
    } else if ((rc = gpu__cuda(cudaMemcpy(base, a->indptr, (nc + 1) *
                               sizeof(int64_t), cudaMemcpyHostToDevice),
                               "cudaMemcpy (indptr)")) != GKV_OK ||
               (nnz > 0 && (rc = gpu__cuda(cudaMemcpy(base + bi, a->indices,
                               nnz * sizeof(int64_t), cudaMemcpyHostToDevice),
                               "cudaMemcpy (indices)")) != GKV_OK) ||
               (be && (rc = gpu__cuda(cudaMemcpy(base + bi + bx, a->eids,
                               nnz * sizeof(int64_t), cudaMemcpyHostToDevice),
                               "cudaMemcpy (eids)")) != GKV_OK) ||
               (bw && (rc = gpu__cuda(cudaMemcpy(base + bi + bx + be, a->w,
                               nnz * sizeof(float), cudaMemcpyHostToDevice),
                               "cudaMemcpy (weights)")) != GKV_OK)) {
        goto fail;
    }
    /* a copy from pageable memory may return before its DMA lands, and a
     * non-blocking stream's first sample is not ordered after it */
    if ((rc = gpu__cuda(cudaDeviceSynchronize(), "gkv_gpu_sgraph_new: "
                        "cudaDeviceSynchronize")) != GKV_OK)
        goto fail;
    *out = g;
    return GKV_OK;
fail:
    gkv_gpu_sgraph_free(g);
    return rc;
}

/* ---- the sampler ------------------------------------------------------------ */

static void
darr_free(struct darr *d)
{
    (void)cudaFree(d->p);
    d->p = NULL;
    d->cap = 0;
}

/* Makes room for n words (contents not kept). */
static gkv_err
darr_need(struct darr *d, size_t n, const char *what)
{
    size_t cap;

    if (n <= d->cap)
        return GKV_OK;
    cap = d->cap * 2 > n ? d->cap * 2 : n;
    if (cap < 1024)
        cap = 1024;
    darr_free(d);
    if (cudaMalloc((void **)&d->p, cap * sizeof(int64_t)) != cudaSuccess) {
        (void)cudaGetLastError();
        d->p = NULL;
        return gpu__fail(GKV_ENOMEM, "gkv_gpu_sample_blocks: out of device "
                         "memory for %zu %s", n, what);
    }
    d->cap = cap;
    return GKV_OK;
}

void
gkv_gpu_sampler_free(gkv_gpu_sampler *s)
{
    if (s == NULL)
        return;
    if (cudaSetDevice(s->g->device) == cudaSuccess)
        (void)cudaDeviceSynchronize();
    for (int l = 0; l < LAYERS_MAX; l++) {
        darr_free(&s->ids[l]);
        darr_free(&s->src[l]);
        darr_free(&s->dst[l]);
        darr_free(&s->eid[l]);
    }
    darr_free(&s->seeds);
    darr_free(&s->cnt);
    darr_free(&s->gsrc);
    darr_free(&s->slot);
    darr_free(&s->flag);
    darr_free(&s->scan);
    darr_free(&s->hkey);
    darr_free(&s->hval);
    darr_free(&s->hlab);
    (void)cudaFree(s->err_dev);
    (void)cudaFree(s->feat_dev);
    if (s->pin != NULL)
        (void)cudaFreeHost(s->pin);
    (void)cudaGetLastError();
    gkv__free(s);
}

gkv_err
gkv_gpu_sampler_new(gkv_gpu_sampler **out, const gkv_gpu_sgraph *g)
{
    gkv_gpu_sampler *s;
    gkv_err rc;

    gpu__clear();
    if (out != NULL)
        *out = NULL;
    if (out == NULL || g == NULL)
        return gpu__fail(GKV_EINVAL, "gkv_gpu_sampler_new: NULL argument");
    if ((rc = gpu__device(g->device, "gkv_gpu_sampler_new")) != GKV_OK)
        return rc;
    if ((s = (gkv_gpu_sampler *)gkv__calloc(1, sizeof *s)) == NULL)
        return gpu__fail(GKV_ENOMEM, "gkv_gpu_sampler_new: out of memory");
    s->g = g;
    if ((rc = gpu__cuda(cudaMalloc((void **)&s->err_dev, sizeof *s->err_dev),
                        "cudaMalloc")) != GKV_OK ||
        (rc = gpu__cuda(cudaHostAlloc((void **)&s->pin, 4 * sizeof *s->pin,
                                      cudaHostAllocDefault),
                        "cudaHostAlloc")) != GKV_OK) {
        gkv_gpu_sampler_free(s);
        return rc;
    }
    *out = s;
    return GKV_OK;
}

static unsigned
grid(size_t n)
{
    return (unsigned)((n + THREADS - 1) / THREADS);
}

/* Reads back the error word and 'n' words at 'src' (device) into s->pin;
 * waits for the stream. */
static gkv_err
readback(gkv_gpu_sampler *s, const int64_t *src, cudaStream_t st,
         struct gerr *e)
{
    gkv_err rc;

    /* a kernel that did not launch wrote nothing: never read its output */
    if ((rc = gpu__cuda(cudaGetLastError(), "gkv_gpu_sample_blocks: "
                        "launch")) != GKV_OK ||
        (rc = gpu__cuda(cudaMemcpyAsync(s->pin, src, sizeof *s->pin,
                                        cudaMemcpyDeviceToHost, st),
                        "cudaMemcpyAsync")) != GKV_OK ||
        (rc = gpu__cuda(cudaMemcpyAsync(e, s->err_dev, sizeof *e,
                                        cudaMemcpyDeviceToHost, st),
                        "cudaMemcpyAsync")) != GKV_OK ||
        (rc = gpu__cuda(cudaStreamSynchronize(st),
                        "gkv_gpu_sample_blocks: a kernel failed")) != GKV_OK)
        return rc;
    return GKV_OK;
}

static gkv_err
dev_error(const gkv_gpu_sgraph *g, const struct gerr *e, int hop)
{
    if (e->code == ERR_DUP)
        return gpu__fail(GKV_EINVAL, "gkv_gpu_sample_blocks: seed %lld is "
                         "given twice (seeds[%lld])", e->val, e->idx);
    return gpu__fail(GKV_ERANGE, "gkv_gpu_sample_blocks: node %lld (hop %d, "
                     "frontier index %lld) is outside the columns [%lld, "
                     "%lld) that the adjacency covers", e->val, hop, e->idx,
                     (long long)g->col_lo, (long long)g->col_hi);
}

/* One hop: frontier front[0..nd) -> block arrays of layer slot l. */
static gkv_err
hop_run(gkv_gpu_sampler *s, const struct hop *h, const int64_t *front,
        size_t nd, int l, int hopi, gkv_gpu_block *b, cudaStream_t st)
{
    struct gerr e;
    size_t ne, nn, cap;
    unsigned bits = 4;
    gkv_err rc;
    struct darr *ids = &s->ids[l];

    if ((rc = darr_need(&s->cnt, nd + 1, "counts")) != GKV_OK ||
        (rc = darr_need(&s->scan, scan_need(nd + 1), "scan sums")) != GKV_OK)
        return rc;
    GPU_LAUNCH(count_k, grid(nd + 1), THREADS, st, *h, front, nd, s->cnt.p,
               s->err_dev);
    scan(s->cnt.p, nd + 1, s->scan.p, st);
    if ((rc = readback(s, s->cnt.p + nd, st, &e)) != GKV_OK)
        return rc;
    if (e.code != ERR_NONE)
        return dev_error(s->g, &e, hopi);
    ne = (size_t)s->pin[0];
    while (((size_t)1 << bits) < 2 * (nd + ne))
        bits++;
    cap = (size_t)1 << bits;
    if ((rc = darr_need(&s->gsrc, ne, "picks")) != GKV_OK ||
        (rc = darr_need(&s->slot, ne, "picks")) != GKV_OK ||
        (rc = darr_need(&s->flag, ne + 1, "picks")) != GKV_OK ||
        (rc = darr_need(&s->scan, scan_need(ne + 1), "scan sums")) != GKV_OK ||
        (rc = darr_need(&s->src[l], ne, "edges")) != GKV_OK ||
        (rc = darr_need(&s->dst[l], ne, "edges")) != GKV_OK ||
        (rc = darr_need(&s->eid[l], ne, "edges")) != GKV_OK ||
        (rc = darr_need(&s->hkey, cap, "hash slots")) != GKV_OK ||
        (rc = darr_need(&s->hval, cap, "hash slots")) != GKV_OK ||
        (rc = darr_need(&s->hlab, cap, "hash slots")) != GKV_OK ||
        (rc = darr_need(ids, nd + ne, "nodes")) != GKV_OK)
        return rc;
    if (nd > 0)
        GPU_LAUNCH(pick_k, grid(nd), THREADS, st, *h, front, nd, s->cnt.p,
                   s->gsrc.p, s->dst[l].p, s->eid[l].p);
    if ((rc = gpu__cuda(cudaMemsetAsync(s->hkey.p, 0xff, cap * 8, st),
                        "cudaMemsetAsync")) != GKV_OK ||
        (rc = gpu__cuda(cudaMemsetAsync(s->hval.p, 0xff, cap * 8, st),
                        "cudaMemsetAsync")) != GKV_OK)
        return rc;
    {
        unsigned long long *hk = (unsigned long long *)s->hkey.p,
                           *hv = (unsigned long long *)s->hval.p;
        if (nd > 0)
            GPU_LAUNCH(ins_dst_k, grid(nd), THREADS, st, front, nd, hk, hv,
                       s->hlab.p, bits, ids->p, s->err_dev);
        if (ne > 0)
            GPU_LAUNCH(ins_edge_k, grid(ne), THREADS, st, s->gsrc.p, ne, nd,
                       hk, hv, bits, s->slot.p);
        GPU_LAUNCH(flag_k, grid(ne + 1), THREADS, st, s->slot.p, ne, nd, hv,
                   s->flag.p);
        scan(s->flag.p, ne + 1, s->scan.p, st);
        if (ne > 0) {
            GPU_LAUNCH(newlab_k, grid(ne), THREADS, st, s->slot.p, s->gsrc.p,
                       s->flag.p, ne, nd, hv, s->hlab.p, ids->p);
            GPU_LAUNCH(local_k, grid(ne), THREADS, st, s->slot.p, ne,
                       s->hlab.p, s->src[l].p);
        }
    }
    if ((rc = readback(s, s->flag.p + ne, st, &e)) != GKV_OK)
        return rc;
    if (e.code != ERR_NONE)
        return dev_error(s->g, &e, hopi);
    nn = (size_t)s->pin[0];
    b->ids_dev = ids->p;
    b->num_dst = nd;
    b->num_src = nd + nn;
    b->src_dev = s->src[l].p;
    b->dst_dev = s->dst[l].p;
    b->eid_dev = s->eid[l].p;
    b->num_edges = ne;
    return GKV_OK;
}

/* 1 when a hop of the call samples (some fanout != 0). */
static int
fan_any(const int *fanouts, int nlayers)
{
    for (int i = 0; i < nlayers; i++)
        if (fanouts[i] != 0)
            return 1;
    return 0;
}

static int
pos_cmp(const void *a, const void *b)
{
    const int64_t *x = (const int64_t *)a, *y = (const int64_t *)b;

    if (x[0] != y[0])
        return x[0] < y[0] ? -1 : 1;
    return x[1] < y[1] ? -1 : x[1] > y[1];
}

/* 1, with the message set as the CPU words it, when a seed is given twice;
 * 0 when none is (or when there is no memory to look: the device's check
 * still catches it). Only run on the way to another error, so that a call
 * whose seeds fail two checks answers what the CPU sampler answers. */
static int
seeds_twice(const int64_t *seeds, size_t n)
{
    int64_t *p = (int64_t *)gkv__malloc(n * 2 * sizeof *p);
    size_t first = SIZE_MAX, at = 0;

    if (p == NULL)
        return 0;
    for (size_t i = 0; i < n; i++) {
        p[2 * i] = seeds[i];
        p[2 * i + 1] = (int64_t)i;
    }
    qsort(p, n, 2 * sizeof *p, pos_cmp);
    /* the CPU names the earliest repeat: the least index that is not the
     * first of its value, and the first index of that value */
    for (size_t i = 1; i < n; i++)
        if (p[2 * i] == p[2 * i - 2] && (size_t)p[2 * i + 1] < first) {
            first = (size_t)p[2 * i + 1];
            at = i;
        }
    if (first != SIZE_MAX) {
        size_t j = at;
        while (j > 0 && p[2 * j - 2] == p[2 * at])
            j--;
        gpu__fail(GKV_EINVAL, "gkv_gpu_sample_blocks: seeds[%zu] = %lld is "
                  "given twice (first at index %lld)", first,
                  (long long)p[2 * at], (long long)p[2 * j + 1]);
    }
    gkv__free(p);
    return first != SIZE_MAX;
}

gkv_err
gkv_gpu_sample_blocks(gkv_gpu_sampler *s, const int64_t *seeds,
                      size_t nseeds, const int *fanouts, int nlayers,
                      const gkv_sample_opts *opts, gkv_gpu_block *blocks,
                      void *stream)
{
    static const gkv_sample_opts zero = {};
    const gkv_sample_opts *o = opts != NULL ? opts : &zero;
    cudaStream_t st = (cudaStream_t)stream;
    const gkv_gpu_sgraph *g;
    const int64_t *front;
    size_t nd;
    struct hop h;
    gkv_err rc;

    gpu__clear();
    if (s == NULL || fanouts == NULL || blocks == NULL ||
        (seeds == NULL && nseeds > 0))
        return gpu__fail(GKV_EINVAL, "gkv_gpu_sample_blocks: NULL argument");
    g = s->g;
    if (nlayers < 1 || nlayers > LAYERS_MAX)
        return gpu__fail(GKV_EINVAL, "gkv_gpu_sample_blocks: nlayers %d is "
                         "not in [1, %d]", nlayers, LAYERS_MAX);
    memset(blocks, 0, (size_t)nlayers * sizeof *blocks);
    for (int i = 0; i < nlayers; i++)
        if (fanouts[i] < -1)
            return gpu__fail(GKV_EINVAL, "gkv_gpu_sample_blocks: fanout[%d] "
                             "= %d: a fanout is -1 (all) or >= 0", i,
                             fanouts[i]);
    if (o->dir != GKV_DIR_IN)
        return gpu__fail(GKV_ENOTSUP, "gkv_gpu_sample_blocks: only "
                         "GKV_DIR_IN (the CSC) is sampled on the GPU");
    if (o->edge_w != NULL || o->exclude != NULL)
        return gpu__fail(GKV_ENOTSUP, "gkv_gpu_sample_blocks: edge_w and "
                         "exclude are not supported on the GPU");
    if (o->edge_w_feat != NULL && o->edge_w_feat[0] != NULL)
        return gpu__fail(GKV_ENOTSUP, "gkv_gpu_sample_blocks: edge_w_feat "
                         "('%s') names an edge feature of a partition store; "
                         "the GPU sampler has no store (sample through the "
                         "servers)", o->edge_w_feat[0]);
    /* The CPU's order of checks, so that one input gets one error code:
     * every seed a node, then the options, then no seed twice, then the
     * columns, which matter only to a hop that samples (fanout != 0) and
     * which count_k checks for later hops. */
    for (size_t i = 0; i < nseeds; i++)
        if (seeds[i] < 0 || seeds[i] >= g->num_nodes)
            return gpu__fail(GKV_ERANGE, "gkv_gpu_sample_blocks: seeds[%zu] "
                             "= %lld is not a node (%lld nodes)", i,
                             (long long)seeds[i], (long long)g->num_nodes);
    if (o->flags & ~(GKV_SAMPLE_REPLACE | GKV_SAMPLE_WEIGHTED))
        return gpu__fail(GKV_EINVAL, "gkv_gpu_sample_blocks: opts->flags "
                         "0x%x has unknown bits", o->flags);
    if ((o->flags & GKV_SAMPLE_WEIGHTED) && g->w_dev == NULL &&
        fan_any(fanouts, nlayers))
        return gpu__fail(GKV_EINVAL, "gkv_gpu_sample_blocks: "
                         "GKV_SAMPLE_WEIGHTED but the sgraph has no weights");
    for (size_t i = 0; fanouts[nlayers - 1] != 0 && i < nseeds; i++)
        if (seeds[i] < g->col_lo || seeds[i] >= g->col_hi)
            return seeds_twice(seeds, nseeds) ? GKV_EINVAL :
                   gpu__fail(GKV_ERANGE, "gkv_gpu_sample_blocks: seeds[%zu] "
                             "= %lld is outside the columns [%lld, %lld) "
                             "that the adjacency covers", i,
                             (long long)seeds[i], (long long)g->col_lo,
                             (long long)g->col_hi);
    if ((rc = gpu__device(g->device, "gkv_gpu_sample_blocks")) != GKV_OK ||
        (rc = darr_need(&s->seeds, nseeds, "seeds")) != GKV_OK ||
        (rc = gpu__cuda(cudaMemsetAsync(s->err_dev, 0, sizeof *s->err_dev,
                                        st), "cudaMemsetAsync")) != GKV_OK)
        return rc;
    if (nseeds > 0 &&
        (rc = gpu__cuda(cudaMemcpyAsync(s->seeds.p, seeds, nseeds *
                                        sizeof *seeds, cudaMemcpyHostToDevice,
                                        st), "cudaMemcpyAsync (seeds)"))
        != GKV_OK)
        return rc;
    h.indptr = g->indptr_dev;
    h.indices = g->indices_dev;
    h.eids = g->eids_dev;
    h.w = g->w_dev;
    h.col_lo = g->col_lo;
    h.ncols = g->col_hi - g->col_lo;
    h.eid_lo = g->eid_lo;
    h.replace = (o->flags & GKV_SAMPLE_REPLACE) != 0;
    h.weighted = (o->flags & GKV_SAMPLE_WEIGHTED) != 0 && h.w != NULL;
    front = s->seeds.p;
    nd = nseeds;
    for (int hop = 0; hop < nlayers; hop++) {
        int l = nlayers - 1 - hop;
        h.k = fanouts[l];
        h.key = gkv_gen_key(o->seed, hop, 0);
        if ((rc = hop_run(s, &h, front, nd, l, hop, &blocks[l], st)) !=
            GKV_OK) {
            memset(blocks, 0, (size_t)nlayers * sizeof *blocks);
            return rc;
        }
        front = blocks[l].ids_dev;
        nd = blocks[l].num_src;
    }
    return GKV_OK;
}

gkv_err
gkv_gpu_sample_blocks_feat(gkv_gpu_sampler *s, gkv_gpu_feat *f,
                           const int64_t *seeds, size_t nseeds,
                           const int *fanouts, int nlayers,
                           const gkv_sample_opts *opts, gkv_gpu_block *blocks,
                           void **feat_dev, void *stream)
{
    gkv_gpu_feat_info fi;
    size_t bytes;
    gkv_err rc;

    gpu__clear();
    if (feat_dev != NULL)
        *feat_dev = NULL;
    if (s == NULL || f == NULL || feat_dev == NULL)
        return gpu__fail(GKV_EINVAL, "gkv_gpu_sample_blocks_feat: NULL "
                         "%s", s == NULL ? "sampler" : f == NULL ? "cache"
                         : "feat_dev");
    if ((rc = gkv_gpu_feat_info_get(f, &fi)) != GKV_OK)
        return rc;
    if (fi.device != s->g->device)
        return gpu__fail(GKV_EINVAL, "gkv_gpu_sample_blocks_feat: the cache "
                         "is on device %d, the sampler on device %d",
                         fi.device, s->g->device);
    if ((rc = gkv_gpu_sample_blocks(s, seeds, nseeds, fanouts, nlayers, opts,
                                    blocks, stream)) != GKV_OK)
        return rc;
    bytes = blocks[0].num_src * fi.row_bytes;
    if (bytes > s->feat_cap) {
        size_t cap = bytes + bytes / 2;
        (void)cudaFree(s->feat_dev);
        s->feat_dev = NULL;
        s->feat_cap = 0;
        if (cudaMalloc(&s->feat_dev, cap) != cudaSuccess) {
            (void)cudaGetLastError();
            s->feat_dev = NULL;
            rc = gpu__fail(GKV_ENOMEM, "gkv_gpu_sample_blocks_feat: out of "
                           "device memory for %zu bytes of features", bytes);
            goto fail;
        }
        s->feat_cap = cap;
    }
    if ((rc = gkv_gpu_feat_gather(f, blocks[0].ids_dev, blocks[0].num_src,
                                  s->feat_dev, stream)) != GKV_OK ||
        (rc = gkv_gpu_feat_sync(f, stream)) != GKV_OK)
        goto fail;
    *feat_dev = s->feat_dev;
    return GKV_OK;
fail:
    memset(blocks, 0, (size_t)nlayers * sizeof *blocks);
    return rc;
}
