/* loader_int.h - the inside of gkv_gpu_loader (gpu/loader.c), for the
 * loader and its tests. Not installed.
 *
 * A call has a host half and a device half. The host half takes the
 * blocks and rows of a batch: with opts.batches (gpu__ldr_take) the next
 * batch of the loader's gkv_loader ('src'), made ahead by its workers;
 * without (gpu__ldr_stage) blocks sampled through the servers for the
 * caller's seeds. It packs every block array into one pinned buffer
 * ('pack') with 16-byte aligned offsets, splits each type's input nodes
 * into those the cache holds (miss index -1) and those it does not (miss
 * index k: row k of that type's part of 'stage'), and puts the latter's
 * rows into 'stage': copied from the batch, or pulled from the servers.
 * The device half copies 'pack' to the device in one transfer, points the
 * blocks at that copy (gpu__ldr_point) and runs one gather per type that
 * reads each row from the cache or from 'stage'.
 *
 * A host-mode loader (gpu__ldr_new with ranges) has malloc'd buffers and
 * no device; its tests run the host half, point the blocks at 'pack' and
 * check them and the split against references on any machine. */
#ifndef GPU_LOADER_INT_H
#define GPU_LOADER_INT_H

#include "gpu/gkv_gpu.h"
#include "loader/gkv_loader.h"

#define GPU_LDR_MAX_LAYERS 16

struct gpu_ldr_type {
    char          *tensor;     /* "node/<ntype>/<feat>", or NULL */
    int            fidx;       /* src: its index in the batches' feat[] */
    size_t         rb;         /* row bytes; 0: no feature for this type */
    gkv_gpu_feat  *cache;      /* or NULL */
    int64_t        clo, chi;   /* the cache's rows (clo == chi: none) */
    /* this call */
    size_t         n;          /* input nodes */
    size_t         nmiss;      /* of them pulled */
    size_t         ids_off;    /* blocks[0] ids of this type in pack */
    size_t         miss_off;   /* int64 miss index [n] in pack, if cache */
    size_t         stage_off;  /* pulled rows in stage */
    void          *feat_dev;   /* device rows, feat_cap bytes */
    size_t         feat_cap;
};

struct gkv_gpu_loader {
    gkv_client          *c;
    gkv_loader          *src;         /* opts.batches: the host loader */
    gkv_batch           *held;        /* src: the batch handed out last */
    int                  device;
    int                  host;        /* 1: a host-mode loader (tests) */
    int                  nt, ne;      /* node and edge types */
    struct gpu_ldr_type *t;           /* [nt] */
    char                *pack, *stage, *dev;
    size_t               pack_cap, pack_len, stage_cap, stage_len, dev_cap;
    uint64_t            *miss;        /* host: IDs to pull */
    size_t               miss_cap;
    /* the batch handed out */
    int                  nlayers;
    gkv_block            blocks[GPU_LDR_MAX_LAYERS];
    gkv_block_nodes     *nodes;       /* [GPU_LDR_MAX_LAYERS * nt] */
    gkv_sample_edges    *edges;       /* [GPU_LDR_MAX_LAYERS * ne] */
    size_t              *offs;        /* pack offsets, per layer: nt ids,
                                       * then ne x (src, dst, eid) */
    void               **feat_out;    /* [nt] */
    size_t              *rb_out;      /* [nt] */
    size_t               rows_cached, rows_pulled;
};

/* A loader; ranges == NULL: a device loader (the public call), else a
 * host-mode one whose type t is "cached" for IDs [ranges[2t], ranges[2t+1])
 * (opts->cache and opts->device unused). */
gkv_err gpu__ldr_new(gkv_gpu_loader **out, gkv_client *c,
                     const gkv_gpu_loader_opts *opts, const int64_t *ranges);

/* The host half of gkv_gpu_loader_next(), arguments as it takes them. */
gkv_err gpu__ldr_stage(gkv_gpu_loader *l, const int64_t *const *seeds,
                       const size_t *nseeds, const int *fanouts, int nfan,
                       int nlayers, const gkv_sample_opts *opts);

/* The host half of gkv_gpu_loader_next_batch(): the next batch of l->src
 * (the one held before released), packed and staged; l->nlayers 0 at the
 * end of the epoch. */
gkv_err gpu__ldr_take(gkv_gpu_loader *l);

/* Points l->blocks' arrays at base + their pack offsets. */
void    gpu__ldr_point(gkv_gpu_loader *l, char *base);

#endif /* GPU_LOADER_INT_H */
