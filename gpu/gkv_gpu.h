/* gkv_gpu.h - CUDA parts of gkv: a feature cache that gathers rows on the
 * device (hot rows in device memory, the rest read zero-copy from pinned
 * host memory) and a GPU neighbour sampler that returns the same blocks as
 * gkv_sample_blocks() for the same seed. Plain C; no CUDA header needed.
 *
 * Built into libgkv when nvcc is present (make CUDA=auto or yes; C files
 * then see GKV_HAVE_CUDA=1). With CUDA=no none of this exists.
 *
 * Pointers. Names ending in _dev are device pointers (cudaMalloc'd, or
 * mapped pinned host memory, valid on the device); everything else is a
 * host pointer. 'stream' is a cudaStream_t passed as void * (NULL: the
 * legacy default stream).
 *
 * No device. When the library is built with CUDA but the process sees no
 * CUDA device (no driver, no GPU, CUDA_VISIBLE_DEVICES empty), every call
 * that needs one checks its arguments first (bad ones: GKV_EINVAL) and then
 * returns GKV_ENOTSUP with the message "no CUDA device: ...". Host-only
 * calls (gkv_gpu_hot_by_degree) work anyway.
 *
 * Errors. Every call returns GKV_OK or a gkv_err; gkv_errmsg() (or its
 * alias gkv_gpu_errmsg()) gives the detail of the calling thread's last
 * failed call. A CUDA failure is GKV_EIO (GKV_ENOMEM for an allocation)
 * with the CUDA error's name in the message.
 *
 * Devices. A call given a device, or an object made on one, makes that
 * device current on the calling thread (cudaSetDevice), as CUDA libraries
 * commonly do; gkv_gpu_copy(), gkv_gpu_sync() and gkv_gpu_host_alloc()
 * leave the current device alone.
 *
 * Threads. A feature cache may be gathered from by any number of threads
 * and streams at once. A GPU sampler belongs to one thread at a time.
 */
#ifndef GKV_GPU_H
#define GKV_GPU_H

#include <stddef.h>
#include <stdint.h>
#include "gkv_err.h"
#include "gkv_kv.h"
#include "gkv_graph.h"
#include "gkv_sample.h"
#include "gkv_net.h"

#ifdef __cplusplus
extern "C" {
#endif

/* gkv_errmsg(): the detail of the calling thread's last failed call, or
 * "" after a success. Valid until the thread's next gkv call. */
GKV_API const char *gkv_gpu_errmsg(void);

/* The number of CUDA devices into *ndev (may be NULL) and device 0's name
 * into name[0 .. cap) (NUL-terminated, cut to fit; name may be NULL).
 * Errors: GKV_ENOTSUP (no device: *ndev = 0, name ""). */
GKV_API gkv_err gkv_gpu_available(int *ndev, char *name, size_t cap);

/* ---- memory helpers (so C code needs no CUDA header) ------------------- */

/* Device memory on 'device': *out_dev is yours until gkv_gpu_free().
 * Errors: GKV_EINVAL (NULL out, bytes 0, bad device), GKV_ENOTSUP,
 * GKV_ENOMEM. */
GKV_API gkv_err gkv_gpu_alloc(int device, size_t bytes, void **out_dev);
GKV_API void    gkv_gpu_free(void *p_dev);          /* NULL is fine */

/* Pinned host memory, mapped into every device's address space: *out is
 * yours until gkv_gpu_host_free(). Errors: as gkv_gpu_alloc(). */
GKV_API gkv_err gkv_gpu_host_alloc(size_t bytes, void **out);
GKV_API void    gkv_gpu_host_free(void *p);         /* NULL is fine */

/* Copies 'bytes' from src to dst, each host or device memory (unified
 * addressing tells which), ordered on 'stream'; returns once queued
 * (pageable host memory: once copied). Errors: GKV_EINVAL, GKV_ENOTSUP,
 * GKV_EIO. */
GKV_API gkv_err gkv_gpu_copy(void *dst, const void *src, size_t bytes,
                             void *stream);

/* Waits for everything queued on 'stream'. Errors: GKV_ENOTSUP, GKV_EIO
 * (a kernel failed). */
GKV_API gkv_err gkv_gpu_sync(void *stream);

/* ---- the hot set ------------------------------------------------------- */

/* The rows worth keeping in device memory: the nodes of [lo, hi) (a
 * tensor's rows) that are columns of 'a', ranked by in-degree (the column's
 * length) from the highest, ties by smaller ID, as many as fit in
 * budget_bytes at row_bytes each (and no more than the candidates). Nodes
 * of [lo, hi) that 'a' does not cover rank last, as degree 0. *out_ids
 * (ascending rank) is yours, freed with gkv_free(); *out_n its length
 * (*out_ids NULL when 0). Host only: needs no device. Thread-safe: yes.
 * Errors: GKV_EINVAL (NULL arguments, row_bytes 0, lo > hi, a bad
 * adjacency range), GKV_ENOMEM. */
GKV_API gkv_err gkv_gpu_hot_by_degree(const gkv_adj *a, int64_t lo,
                                      int64_t hi, size_t row_bytes,
                                      size_t budget_bytes, int64_t **out_ids,
                                      size_t *out_n);

/* ---- the feature cache --------------------------------------------------- */

typedef struct gkv_gpu_feat gkv_gpu_feat;   /* opaque */

/* How the feature cache is laid out. Zero-initialise, then set fields. */
typedef struct gkv_gpu_feat_opts {
    int            device;        /* CUDA device ordinal */
    size_t         budget_bytes;  /* device memory for hot rows; 0: none */
    /* The hot rows, at most budget_bytes / row_bytes of them, taken in
     * this order of preference:
     *   hot_ids: n_hot global IDs (duplicates kept once), or else
     *   hot_adj: the top in-degree nodes (gkv_gpu_hot_by_degree), or else
     *   the rows lo, lo + 1, ... */
    const int64_t *hot_ids;
    size_t         n_hot;
    const gkv_adj *hot_adj;
} gkv_gpu_feat_opts;

/* What a cache holds. */
typedef struct gkv_gpu_feat_info {
    int      device;        /* the CUDA device it lives on */
    int64_t  lo, hi;        /* global IDs of the rows */
    size_t   row_bytes;     /* bytes per row */
    int      dtype;         /* the tensor's gkv_dtype */
    size_t   n_hot;         /* rows in device memory */
    size_t   dev_bytes;     /* device memory used (rows and the ID map) */
    size_t   host_bytes;    /* pinned host memory used */
} gkv_gpu_feat_info;

/* Loads tensor 'name' of store 's' (any dtype and row width; f32, f16 and
 * bf16 features are the use) into a cache on opts->device: every row into
 * pinned host memory, the hot rows also into device memory, with a device
 * map from ID to slot. Reads the store in one snapshot; the cache is a
 * copy and does not follow later pushes. On GKV_OK *out is yours until
 * gkv_gpu_feat_close(); on error *out is NULL.
 * Errors: GKV_EINVAL (NULL, a bad hot adjacency), GKV_ERANGE (a hot ID
 * outside the tensor; the message names it), GKV_ENOTFOUND (no such
 * tensor), GKV_ENOTSUP (no device), GKV_ENOMEM, GKV_EIO. */
GKV_API gkv_err gkv_gpu_feat_open(gkv_gpu_feat **out, gkv_store *s,
                                  const char *name,
                                  const gkv_gpu_feat_opts *opts);

/* Frees the cache (waits for the device first). NULL is fine. */
GKV_API void    gkv_gpu_feat_close(gkv_gpu_feat *f);

GKV_API gkv_err gkv_gpu_feat_info_get(const gkv_gpu_feat *f,
                                      gkv_gpu_feat_info *out);

/* Queues on 'stream' the gather of the rows with global IDs ids_dev[0..n)
 * into out_dev (row i at out_dev + i * row_bytes), each read from device
 * memory when hot, else zero-copy from pinned host memory: one kernel, a
 * group of lanes per row, 16-byte loads when the row and the pointers
 * allow. Returns once queued. An ID outside [lo, hi) gets a row of zeros
 * and is reported by the next gkv_gpu_feat_sync() of the cache on the same
 * stream.
 * Errors: GKV_EINVAL (NULL with n > 0), GKV_EIO (the launch failed). */
GKV_API gkv_err gkv_gpu_feat_gather(gkv_gpu_feat *f, const int64_t *ids_dev,
                                    size_t n, void *out_dev, void *stream);

/* Waits for 'stream', then reports (and clears) a bad ID seen by the
 * gathers queued on that stream since its last sync: GKV_ERANGE, naming
 * the ID and its index. Each stream has its own report, so threads that
 * gather on their own streams see only their own bad IDs (beyond 63
 * streams on one cache, the further ones share one report).
 * Errors: GKV_ERANGE, GKV_EIO. */
GKV_API gkv_err gkv_gpu_feat_sync(gkv_gpu_feat *f, void *stream);

/* ---- GPU sampling ------------------------------------------------------ */

typedef struct gkv_gpu_sgraph  gkv_gpu_sgraph;    /* opaque */
typedef struct gkv_gpu_sampler gkv_gpu_sampler;   /* opaque */

/* Uploads the in-edge adjacency 'a' (a CSC, as gkv_sgraph_set_adj() takes
 * it, weights optional) of a homogeneous graph of num_nodes nodes: into
 * device memory when it fits budget_bytes (0: no limit), else into mapped
 * pinned host memory that the kernels read zero-copy. The arrays are
 * copied and checked as gkv_sgraph_set_adj() checks them, weights too
 * (finite, >= 0). On GKV_OK *out is yours until gkv_gpu_sgraph_free().
 * Errors: GKV_EINVAL (NULL, bad range or indptr, a bad weight: the message
 * names the position), GKV_ERANGE (an index or eid out of range),
 * GKV_ENOTSUP, GKV_ENOMEM, GKV_EIO. */
GKV_API gkv_err gkv_gpu_sgraph_new(gkv_gpu_sgraph **out, const gkv_adj *a,
                                   int64_t num_nodes, int device,
                                   size_t budget_bytes);
GKV_API void    gkv_gpu_sgraph_free(gkv_gpu_sgraph *g);   /* NULL is fine */
/* 1 when the adjacency lives in device memory, 0 when mapped from host. */
GKV_API int     gkv_gpu_sgraph_on_device(const gkv_gpu_sgraph *g);

/* A sampler over 'g' (borrowed: it must outlive the sampler), with its
 * device buffers, which grow to the largest batch and are kept.
 * Errors: GKV_EINVAL, GKV_ENOTSUP, GKV_ENOMEM, GKV_EIO. */
GKV_API gkv_err gkv_gpu_sampler_new(gkv_gpu_sampler **out,
                                    const gkv_gpu_sgraph *g);
GKV_API void    gkv_gpu_sampler_free(gkv_gpu_sampler *s); /* NULL is fine */

/* One block in device memory: ids_dev[0 .. num_src) global node IDs, the
 * first num_dst the destination nodes; num_edges edges (src_dev[i] ->
 * dst_dev[i]) in local IDs with their global edge IDs eid_dev[i]. The
 * same lists, in the same order, as gkv_sample_blocks() gives. */
typedef struct gkv_gpu_block {
    const int64_t *ids_dev;
    size_t         num_src, num_dst;
    const int64_t *src_dev, *dst_dev, *eid_dev;
    size_t         num_edges;
} gkv_gpu_block;

/* gkv_sample_blocks() on the device for the homogeneous graph of the
 * sampler, direction IN: seeds[0..nseeds) (host memory, distinct),
 * fanouts[0..nlayers) in DGL's order (fanouts[i] belongs to blocks[i];
 * blocks[nlayers - 1] holds the seeds and is sampled first, at RNG layer
 * 0), opts->seed and opts->flags (GKV_SAMPLE_REPLACE, GKV_SAMPLE_WEIGHTED
 * with the weights uploaded in the sgraph). edge_w, edge_w_feat and
 * exclude are not supported here (GKV_ENOTSUP); opts->dir must be
 * GKV_DIR_IN. The result
 * equals gkv_sample_blocks() with nfan = 1 on the same graph. Relabelling
 * runs on the device (an open-addressing hash table). Queued on 'stream';
 * returns when the blocks are complete (it waits for the sizes). Block
 * arrays are borrowed from the sampler until its next call.
 * Errors: GKV_EINVAL (NULL, nlayers < 1 or > 16, a fanout < -1, bad opts,
 * a seed given twice), GKV_ERANGE (a seed that is not a node; a node
 * outside the adjacency's columns in a hop whose fanout is not 0, as on the
 * CPU), GKV_ENOTSUP, GKV_ENOMEM, GKV_EIO. */
GKV_API gkv_err gkv_gpu_sample_blocks(gkv_gpu_sampler *s,
                                      const int64_t *seeds, size_t nseeds,
                                      const int *fanouts, int nlayers,
                                      const gkv_sample_opts *opts,
                                      gkv_gpu_block *blocks, void *stream);

/* A trainer's mini-batch in one call: gkv_gpu_sample_blocks(), then the
 * rows of blocks[0]'s source nodes (the input nodes) gathered from 'f'
 * (a cache on the sampler's device whose rows cover them) into
 * *feat_dev: num_src x row_bytes bytes of device memory borrowed from the
 * sampler, like the blocks, until its next call. Returns when the features
 * are complete. Errors: as gkv_gpu_sample_blocks(), GKV_EINVAL (NULL f or
 * feat_dev, a cache on another device), GKV_ERANGE (an input node outside
 * the cache's rows), GKV_ENOMEM. */
GKV_API gkv_err gkv_gpu_sample_blocks_feat(gkv_gpu_sampler *s,
                                           gkv_gpu_feat *f,
                                           const int64_t *seeds,
                                           size_t nseeds, const int *fanouts,
                                           int nlayers,
                                           const gkv_sample_opts *opts,
                                           gkv_gpu_block *blocks,
                                           void **feat_dev, void *stream);

/* ---- mini-batches through graph servers ---------------------------------- *
 *
 * A trainer of a distributed job (gkv_net.h) asks for its blocks and input
 * features on its GPU in one call, as DGL's DistNodeDataLoader followed by
 * .to(device) or GraphLearn-for-PyTorch's server-mode loader give them.
 *
 * With opts.batches (the usual way) the GPU loader makes a gkv_loader
 * (gkv_loader.h) of its own from those options and uploads its batches:
 * they are sampled and gathered where the gkv_loader says (on the servers,
 * through them, or in process), ahead of time by its worker threads, and
 * gkv_gpu_loader_next_batch() puts the next one on the device: the blocks
 * in one transfer, the input rows from the batch, except those a local
 * feature cache holds (typically this machine's partition: see below),
 * which the gather kernel reads on the device instead of uploading them.
 *
 * Without it, gkv_gpu_loader_next() takes the seeds of each batch: the
 * blocks are sampled through the servers (gkv_client_sample_blocks()) and
 * the rows the cache does not hold pulled from their owners
 * (gkv_client_pull()), one step after the other, nothing made ahead. */

typedef struct gkv_gpu_loader gkv_gpu_loader;     /* opaque */
struct gkv_loader_opts;                           /* gkv_loader.h */
struct gkv_batch;

/* Zero-initialise, then set fields. */
typedef struct gkv_gpu_loader_opts {
    int            device;    /* CUDA device ordinal */
    /* The node feature to load: the rows of tensor "node/<ntype>/<feat>"
     * of every node type that has one (at least one must); NULL: blocks
     * only. */
    const char    *feat;
    /* NULL, or one entry per node type (NULL entries allowed): a cache on
     * 'device' of that type's feature tensor with the same row width, e.g.
     * gkv_gpu_feat_open() on this machine's partition store (its rows are
     * the IDs the partition owns). Input nodes inside the cache's rows are
     * read from it; the rest are pulled. Borrowed: the caches must outlive
     * the loader. */
    gkv_gpu_feat *const *cache;
    /* NULL, or the options of the gkv_loader the batches come from
     * (copied, with what they point to, at gkv_gpu_loader_new()): its
     * where, part, sg, store, client (NULL: the loader's 'c'), seeds,
     * batch, sampling, label, efeats, prefetch and workers are used as
     * given; its feats must be empty (nfeats 0): the GPU loader collects
     * tensor "node/<ntype>/<feat>" of every node type that has one. */
    const struct gkv_loader_opts *batches;
} gkv_gpu_loader_opts;

/* One mini-batch on the device. */
typedef struct gkv_gpu_batch {
    int              nlayers;
    /* [nlayers]: what gkv_client_sample_blocks() returns for the same
     * arguments, array for array, except that every ids, src, dst and eid
     * array is device memory (the gkv_block and its nodes/edges structs
     * are host memory). */
    const gkv_block *blocks;
    /* [num_ntypes]: the input rows of each node type, row i of type t for
     * blocks[0].nodes[t].ids[i], row_bytes[t] bytes each, in device
     * memory; NULL for a type without the feature (or with no input
     * nodes). */
    void *const     *feat_dev;
    const size_t    *row_bytes;
    size_t           rows_cached;  /* input rows read from the caches */
    size_t           rows_pulled;  /* input rows pulled from the servers, or
                                    * (opts.batches) uploaded from the
                                    * batch */
    /* opts.batches: the host batch it was made from (its seeds, epoch and
     * index, host copies of the blocks and rows, the labels), borrowed
     * until the loader's next call; else NULL. */
    const struct gkv_batch *host;
} gkv_gpu_batch;

/* A loader over client 'c' (borrowed: it must outlive the loader; a client
 * belongs to one thread at a time, and so does the loader). The servers
 * must serve a partitioned graph. Its buffers (pinned host and device
 * memory) grow to the largest batch and are kept. With opts->batches its
 * gkv_loader is made here, on epoch 0.
 * Errors: GKV_EINVAL (NULL, a cache on another device or of another row
 * width, opts->batches with feats of its own), GKV_ENOTFOUND (no node type
 * has the feature), GKV_ENOTSUP (no device; servers of a plain store),
 * GKV_ENOMEM, and gkv_loader_new()'s (the message says which step). */
GKV_API gkv_err gkv_gpu_loader_new(gkv_gpu_loader **out, gkv_client *c,
                                   const gkv_gpu_loader_opts *opts);
GKV_API void    gkv_gpu_loader_free(gkv_gpu_loader *l);   /* NULL is fine */
/* Stops l's use of its client, for a loader that must outlive it: frees
 * its gkv_loader (opts->batches: the worker threads stop) and the host
 * batch it held, and keeps the device memory of its last batch (blocks and
 * rows) and its caches, for views of them that live on. After it only
 * gkv_gpu_loader_free() may be called on l. NULL is fine. */
GKV_API void    gkv_gpu_loader_stop(gkv_gpu_loader *l);

/* With opts.batches: the next batch of the current epoch on the device,
 * ordered on 'stream'; returns when it is complete. At the end of the
 * epoch it returns GKV_OK with out->nlayers 0 (then call
 * gkv_gpu_loader_epoch()). The batch (and out->host) is borrowed until the
 * loader's next call. A failed batch (gkv_loader_next()'s error, e.g. a
 * server gone) leaves the loader usable; the next call tries the batch
 * after it.
 * Errors: GKV_EINVAL (NULL; a loader without opts.batches),
 * gkv_loader_next()'s, GKV_ENOMEM, GKV_EIO (a CUDA failure). */
GKV_API gkv_err gkv_gpu_loader_next_batch(gkv_gpu_loader *l,
                                          gkv_gpu_batch *out, void *stream);

/* With opts.batches: starts epoch 'epoch' of its gkv_loader
 * (gkv_loader_epoch()); the batch handed out last is released.
 * Errors: GKV_EINVAL (NULL; a loader without opts.batches), the loader's. */
GKV_API gkv_err gkv_gpu_loader_epoch(gkv_gpu_loader *l, uint64_t epoch);

/* Without opts.batches: samples blocks for seeds (per node type, as gkv_client_sample_blocks()
 * takes them: seeds[t][0 .. nseeds[t]), distinct) with fanouts, nfan,
 * nlayers (1 .. 16) and opts through the servers, then puts the blocks and
 * the input rows of blocks[0] on the device, ordered on 'stream'; returns
 * when they are complete. The batch's arrays are borrowed from the loader
 * until its next call. A failed call leaves the loader usable.
 * Errors: as gkv_client_sample_blocks() and gkv_client_pull() (the message
 * says which step failed and carries the client's detail), GKV_EINVAL
 * (NULL, nlayers out of range, a loader with opts.batches), GKV_ENOMEM,
 * GKV_EIO (a CUDA failure). */
GKV_API gkv_err gkv_gpu_loader_next(gkv_gpu_loader *l,
                                    const int64_t *const *seeds,
                                    const size_t *nseeds, const int *fanouts,
                                    int nfan, int nlayers,
                                    const gkv_sample_opts *opts,
                                    gkv_gpu_batch *out, void *stream);

#ifdef __cplusplus
}
#endif
#endif /* GKV_GPU_H */
