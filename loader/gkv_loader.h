/* gkv_loader.h - the mini-batch loader: a trainer's whole batches (seeds,
 * blocks, the input nodes' feature rows, the seeds' labels, the sampled
 * edges' feature rows), made ahead of time by worker threads and handed
 * out in order, each in buffers the batch owns until it is released.
 *
 * It sits above net/ (layers: base <- kv <- graph <- net <- loader <- gpu
 * <- tools) and is what DGL's DistNodeDataLoader (DistEdgeDataLoader with
 * a uniform negative sampler, for edge seeds: opts.edge_seeds) and
 * GraphLearn-for-PyTorch's DistNeighborLoader(collect_features=True,
 * prefetch_size=K) are to their users.
 *
 * Three places to sample, one result (GKV_LOADER_*, opts.where):
 *   GKV_LOADER_LOCAL   in process, on the whole graph (a one-partition
 *                      gkv_part, or an sgraph and a store): no server.
 *   GKV_LOADER_CLIENT  through the servers, hop by hop
 *                      (gkv_client_sample_blocks), the rows pulled after
 *                      (gkv_client_pull): the trainer does the relabelling.
 *   GKV_LOADER_SERVER  on the servers: one request a batch
 *                      (gkv_client_sample_batch) to the server owning most
 *                      of its seeds, which samples every hop (asking its
 *                      peers for the frontier it does not own) and replies
 *                      with the blocks; the worker then pulls every row
 *                      straight from the machine holding it, all machines
 *                      in parallel, into the batch's own buffers
 *                      (gkv_net.h: GKV_BATCH_RELAY has the asked server
 *                      gather and relay the rows instead).
 * For the same seeds, options and seed, the three give byte for byte the
 * same batches, for any number of worker threads and any prefetch depth:
 * batch i of epoch e is sampled with the generator seed
 *   gkv_loader_batch_seed(opts.sample_seed, e, i)
 * (gkv_sample.h says what a seed decides), and the seeds of an epoch are
 * opts.seeds in the order of gkv_loader_epoch_order().
 *
 * Threads. A loader belongs to one user thread. Its 'workers' threads each
 * make whole batches (each with its own sampler, or its own connection to
 * the servers: gkv_client_clone); at most 'prefetch' batches are made or
 * held ahead of the one the caller asked for, so memory stays bounded by
 * prefetch x a batch's size (plus those the caller holds; right after
 * gkv_loader_epoch() up to min(workers, prefetch) batches of the old
 * epoch may still be finishing, then dropped). Batches are handed out in
 * index order whatever thread made them.
 *
 * Errors: calls return GKV_OK or a gkv_err, the detail in gkv_errmsg().
 */
#ifndef GKV_LOADER_H
#define GKV_LOADER_H

#include <stddef.h>
#include <stdint.h>
#include "gkv_err.h"
#include "gkv_kv.h"
#include "gkv_part.h"
#include "gkv_sample.h"
#include "gkv_net.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GKV_LOADER_LOCAL   0
#define GKV_LOADER_CLIENT  1
#define GKV_LOADER_SERVER  2

#define GKV_LOADER_DROP_LAST 0x01u  /* drop a last batch smaller than
                                     * batch_size */
#define GKV_LOADER_NO_SHUFFLE 0x02u /* every epoch in the order given */
#define GKV_LOADER_PINNED    0x04u  /* batch buffers in page-locked host
                                     * memory (a CUDA build; elsewhere
                                     * GKV_ENOTSUP at gkv_loader_new) */

typedef struct gkv_loader gkv_loader;   /* opaque */

/* The tensors a batch collects are gkv_typed_tensor (gkv_net.h): rows of
 * node type 'type' (input nodes) or of edge type 'type' (sampled edges),
 * read by global type-wise ID from the tensor with full name 'name'. */

typedef struct gkv_loader_opts {
    int          where;          /* GKV_LOADER_* */
    /* LOCAL: either 'part' (a partition whose store and adjacency hold
     * every node a batch reaches: a one-partition config, else
     * GKV_EINVAL) or 'sg' with 'store' (a whole-graph sgraph and a store
     * holding the tensors by the same global IDs; 'store' may be NULL
     * when nothing is collected). Borrowed: they outlive the loader. */
    gkv_part    *part;
    const gkv_sgraph *sg;
    gkv_store   *store;
    gkv_client  *client;         /* CLIENT, SERVER: borrowed, outlives the
                                  * loader; the workers use clones of it */
    /* The seeds: node IDs of type seed_ntype (edge IDs with edge_seeds,
     * below). Either 'seeds' (nseeds IDs, distinct, copied at
     * gkv_loader_new) or, with seeds NULL, DGL's
     * node_split of the u8 mask tensor 'seed_mask' (a full name such as
     * "node/paper/train_mask", one row of one element per node of the
     * type) among num_trainers trainers, this one being 'rank'
     * (gkv_pbook_node_split). */
    int              seed_ntype;
    const int64_t   *seeds;
    size_t           nseeds;
    const char      *seed_mask;
    int              num_trainers, rank;
    size_t           batch_size;     /* seeds a batch (>= 1) */
    unsigned         flags;          /* GKV_LOADER_* */
    uint64_t         shuffle_seed;   /* the epochs' orders */
    /* Sampling as gkv_sample_blocks(): nlayers layers, fanouts
     * [nlayers x nfan] (nfan 1 or the number of edge types), direction
     * and GKV_SAMPLE_REPLACE / GKV_SAMPLE_WEIGHTED from these. */
    int              nlayers, nfan;
    const int       *fanouts;
    int              dir;
    unsigned         sample_flags;
    uint64_t         sample_seed;
    /* What a batch collects (copied at gkv_loader_new). */
    const gkv_typed_tensor *feats;  /* per input node type, any number */
    int              nfeats;
    const char      *label;          /* rows of the seeds; NULL: none */
    const gkv_typed_tensor *efeats; /* rows of each layer's sampled edges */
    int              nefeats;
    int              prefetch;       /* batches ahead; 0 = 2; <= 1024 */
    int              workers;        /* worker threads; 0 = 1; <= 64 */
    int              sampler_threads;/* LOCAL: threads of each worker's
                                      * sampler; 0 = 1 */
    /* Edge seeds (link prediction: DGL's EdgeDataLoader with a uniform
     * negative sampler), as gkv_edge_batch_spec (gkv_sample.h) has them.
     * 0 (the default): the seeds are node IDs, as above. 1: the seeds are
     * edge IDs of edge type seed_etype ('seeds': distinct IDs; or with
     * seeds NULL, DGL's edge_split of the u8 edge mask 'seed_mask', such
     * as "edge/user:follows:user/train_mask", one element per edge of
     * the type: gkv_pbook_edge_split), seed_ntype is ignored, and each
     * batch is gkv_sample_edge_batch()'s (LOCAL) or
     * gkv_client_sample_edge_batch()'s (CLIENT) for its edges with
     * num_neg uniform negatives per edge (>= 0), the edges in 'exclude'
     * (GKV_EXCLUDE_SELF: the batch's own edges; GKV_EXCLUDE_REVERSE:
     * their reverses, of edge type reverse_etype, which must differ from
     * seed_etype: through a partition book by the "reverse_eid" edge
     * feature gkv-partition --reverse-etypes writes, with a whole-graph
     * 'sg' edge eid of reverse_etype) left out of every layer. Not with
     * GKV_LOADER_SERVER (GKV_ENOTSUP at gkv_loader_new: a server-side
     * batch request cannot carry the batch's excluded edges; use
     * GKV_LOADER_CLIENT), nor with a 'label' (GKV_EINVAL: the labels of
     * link prediction are the pairs themselves). */
    int              edge_seeds;
    int              seed_etype;
    int              num_neg;
    unsigned         exclude;        /* GKV_EXCLUDE_* */
    int              reverse_etype;
    /* Sampling probabilities from a stored edge feature (DGL's prob= /
     * mask=), as gkv_sample_opts.edge_w_feat has them: NULL, or per edge
     * type NULL (uniform) or a feature name FEAT, the tensor
     * "edge/<canonical etype>/<FEAT>" (copied at gkv_loader_new).
     * GKV_LOADER_CLIENT: every batch is gkv_client_sample_blocks()'s
     * (gkv_client_sample_edge_batch()'s, for edge seeds) with these
     * names, byte for byte. GKV_LOADER_LOCAL with 'part' (whose book
     * names the edge types; with 'sg': GKV_EINVAL): gkv_loader_new reads
     * each feature of a sampled type from the partition's store,
     * converted to float as the servers convert it (4 bytes an edge,
     * shared by the workers), and the samplers take the values as edge_w
     * arrays: the same batches as CLIENT on the same partitions.
     * GKV_LOADER_SERVER refuses them (GKV_ENOTSUP: a SAMPLE_BATCH request
     * cannot carry them). Every name is checked at gkv_loader_new
     * (gkv_edge_feat_name_bad, the tensor name's length; not with
     * GKV_SAMPLE_WEIGHTED: GKV_EINVAL). LOCAL reads the features once, at
     * gkv_loader_new: a later push to one is seen by CLIENT batches (the
     * servers read what changed) and not by LOCAL ones. */
    const char *const *edge_w_feat;
} gkv_loader_opts;

/* One batch, owned by the caller from gkv_loader_next() until
 * gkv_batch_release(). Every array is one contiguous buffer the batch
 * owns (no copy needed to wrap it as a tensor). */
typedef struct gkv_batch {
    uint64_t         epoch, index;   /* which batch */
    uint64_t         sample_seed;    /* the generator seed it was made with */
    int              num_ntypes, num_etypes, nlayers;
    const int64_t   *seeds;          /* nseeds IDs of type seed_ntype */
    size_t           nseeds;
    int              seed_ntype;
    /* blocks[0 .. nlayers), as gkv_sample_blocks() lays them out:
     * blocks[nlayers-1]'s destination nodes are the seeds, blocks[0]'s
     * source nodes (nodes[t].ids[0 .. num_src)) the input nodes. */
    const gkv_block *blocks;
    /* feat[f]: nodes x row bytes of opts.feats[f], row i for input node
     * blocks[0].nodes[type].ids[i]; feat_bytes[f] its size. */
    const void *const *feat;
    const size_t     *feat_bytes;
    int               nfeats;
    const void       *label;         /* nseeds rows of opts.label, or NULL */
    size_t            label_bytes;
    /* efeat[f * nlayers + i]: the rows of opts.efeats[f] for the edges of
     * blocks[i].edges[type] (by their global IDs, eid[]), in edge order. */
    const void *const *efeat;
    const size_t     *efeat_bytes;
    int               nefeats;
    /* Edge seeds (opts.edge_seeds): 'seeds' holds the batch's nseeds edge
     * IDs (of opts.seed_etype, in the epoch's order), seed_ntype is -1,
     * and these are the pairs as gkv_edge_batch has them: local IDs of
     * the last block's destination nodes (pos_src[i] indexes
     * blocks[nlayers-1].nodes[src_ntype(seed_etype)].ids, pos_dst[i] those
     * of dst_ntype), positive i being edge seeds[i], negative j of
     * positive i at i * opts.num_neg + j. Node seeds: all NULL and 0. */
    const int64_t    *pos_src, *pos_dst;
    size_t            num_pos;
    const int64_t    *neg_src, *neg_dst;
    size_t            num_neg;
} gkv_batch;

/* Makes a loader and starts its workers on epoch 0 (CLIENT, SERVER: each
 * with its gkv_client_clone of opts.client, made here). Everything is
 * checked here, each failure naming what was wrong: edge seeds with
 * GKV_LOADER_SERVER (GKV_ENOTSUP), with a label, with num_neg below 0,
 * unknown exclude bits or a bad seed_etype / reverse_etype; unknown
 * tensors (and types out of range), a feature tensor whose rows do not
 * cover its type's nodes (an edge feature's edges: not checked for LOCAL
 * with 'sg', which has no edge counts), a label tensor whose rows are not
 * exactly the seed type's nodes, fanouts of the wrong length or below
 * -1, nlayers below 1, seeds (node or edge IDs) out of range or given
 * twice, a mask that is not one u8 per node (per edge, for edge seeds) of
 * the type (and, LOCAL with 'sg', a mask at all: no partition book to
 * split by, so give the seeds), batch_size 0, a 'where' without its
 * source, unknown flags, GKV_LOADER_PINNED without a CUDA runtime that
 * gives page-locked memory (GKV_ENOTSUP); edge_w_feat with
 * GKV_LOADER_SERVER (GKV_ENOTSUP) or LOCAL with 'sg' (GKV_EINVAL), a bad
 * name or one with GKV_SAMPLE_WEIGHTED (GKV_EINVAL; CLIENT:
 * gkv_client_sample_blocks()'s own check and message), and, for an edge
 * type some layer samples, no such tensor (GKV_ENOTFOUND), rows of more
 * than one element or not covering the type's edges (GKV_EINVAL); LOCAL
 * also a value that is negative, NaN or infinite (GKV_EINVAL naming the
 * edge). CLIENT leaves the values to the servers, which check them when
 * they sample: the batch fails at gkv_loader_next() with
 * gkv_client_sample_blocks()'s message naming the edge.
 * On GKV_OK *out is yours until gkv_loader_free(); on error *out is NULL.
 * Errors: GKV_EINVAL, GKV_ERANGE, GKV_ENOTFOUND, GKV_ESHAPE, GKV_ENOTSUP,
 * GKV_ENOMEM, GKV_EIO (a thread), and the client's errors. */
GKV_API gkv_err gkv_loader_new(gkv_loader **out, const gkv_loader_opts *o);

/* The next batch of the current epoch, in index order: on GKV_OK *out is
 * the batch (yours until gkv_batch_release()), or NULL when the epoch is
 * over (then call gkv_loader_epoch()). A batch that failed (a server
 * killed: GKV_ETIMEDOUT naming it, within the client's timeout) returns
 * its error here; the loader stays usable and the next call tries the
 * batch after it. */
GKV_API gkv_err gkv_loader_next(gkv_loader *l, gkv_batch **out);

/* Starts epoch 'epoch' (a new order of the seeds unless
 * GKV_LOADER_NO_SHUFFLE), dropping what is left of the current one.
 * Batches already handed out stay valid. */
GKV_API gkv_err gkv_loader_epoch(gkv_loader *l, uint64_t epoch);

/* Batches in the current epoch. */
GKV_API size_t  gkv_loader_num_batches(const gkv_loader *l);

/* The seeds this loader samples from (node_split's or edge_split's
 * result, or a copy of opts.seeds), in the order given. Borrowed until gkv_loader_free(). */
GKV_API const int64_t *gkv_loader_seeds(const gkv_loader *l, size_t *n);

/* Gives a batch back. NULL is fine. May be called after
 * gkv_loader_free(). */
GKV_API void    gkv_batch_release(gkv_batch *b);

/* Stops the workers (mid-epoch too: batches in flight are dropped) and
 * frees the loader; batches still held stay valid until released. It
 * waits for the batches being made, each bounded by the client's timeout
 * when a server is dead (the workers' connections leave in parallel, so
 * about one timeout in all). NULL is fine. */
GKV_API void    gkv_loader_free(gkv_loader *l);

/* The generator seed of batch 'index' of epoch 'epoch': with gkv_sample.h's
 * M and A, A(A(A(0x474b564241544348 ("GKVBATCH"), sample_seed), epoch),
 * index). Pure. */
GKV_API uint64_t gkv_loader_batch_seed(uint64_t sample_seed, uint64_t epoch,
                                       uint64_t index);

/* The order of epoch 'epoch': perm[0 .. n) a permutation of 0 .. n-1
 * (identity with GKV_LOADER_NO_SHUFFLE). Fisher-Yates from the end, with
 * gkv_sample.h's generator: K = A(A(0x474b56534855464c ("GKVSHUFL"),
 * shuffle_seed), epoch); perm = identity; for i = n-1 down to 1: swap
 * perm[i] and perm[below(M(K + (i + 1) G), i + 1)]. Pure. */
GKV_API void    gkv_loader_epoch_order(uint64_t shuffle_seed, uint64_t epoch,
                                       unsigned flags, size_t n,
                                       size_t *perm);

#ifdef __cplusplus
}
#endif
#endif /* GKV_LOADER_H */
