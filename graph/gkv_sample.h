/* gkv_sample.h - neighbour sampling: single hops, multi-layer blocks
 * (message-flow graphs, as DGL builds them) and edge mini-batches with
 * negative sampling for link prediction.
 *
 * Two objects:
 *   gkv_sgraph   what is sampled from: the schema (node counts, edge types)
 *                and per edge type a borrowed adjacency (gkv_adj, see
 *                gkv_graph.h) for in-edges (CSC) and/or out-edges (CSR). It
 *                covers the whole graph (gkv_sgraph_from_graph) or only the
 *                columns one partition owns (gkv_sgraph_set_adj with the
 *                partition's arrays).
 *   gkv_sampler  one user thread's sampling engine over an sgraph: worker
 *                threads, scratch, dense relabel markers and the result
 *                arrays, all reused batch after batch, so steady-state
 *                sampling allocates nothing.
 *
 * IDs. Every node and edge ID here is a global type-wise ID (0 .. count-1
 * within its node or edge type), in and out. Block edges are in local IDs
 * (indices into the block's node lists) with the global edge ID alongside.
 *
 * Direction. GKV_DIR_IN samples a node's in-edges from the CSC: the
 * neighbours are sources. GKV_DIR_OUT samples out-edges from the CSR: the
 * neighbours are destinations. A seed must be a column of the adjacency
 * used (a destination-type node for IN, a source-type node for OUT) and lie
 * in the range [col_lo, col_hi) the adjacency covers: a partition samples
 * only the nodes it owns. Anything else is GKV_ERANGE with a message naming
 * the node and the range.
 *
 * ---- The generator (the same sample wherever it is computed) -----------
 *
 * Every random choice is a pure function of 64-bit unsigned integer
 * arithmetic (everything mod 2^64) on (seed, layer, etype, node, draw):
 *
 *   G         = 0x9e3779b97f4a7c15
 *   M(z)      = splitmix64's finaliser:
 *                 z ^= z >> 30;  z *= 0xbf58476d1ce4e5b9;
 *                 z ^= z >> 27;  z *= 0x94d049bb133111eb;  z ^= z >> 31
 *   A(x, v)   = M(x ^ M(v + G))                  absorbs the word v into x
 *   K         = A(A(A(D, seed), layer), etype)   per call layer and etype;
 *               D = 0x474b5653414d504c ("GKVSAMPL") for neighbour sampling,
 *               layer and etype as non-negative integers widened to 64 bits
 *   B(v)      = A(K, v)                          per node v (type-wise ID)
 *   r_t       = M(B(v) + (t + 1) * G)            the node's draw t = 0, 1, ..
 *   below(r, n) = floor(r * n / 2^64)            the high word of the
 *                                                128-bit product, in [0, n)
 *   unit(r)   = (r >> 11) * 2^-53                a double in [0, 1)
 *
 * The layer is the hop counted from the seeds: 0 for the hop that samples
 * the seeds' own neighbours. A node's picks depend only on (seed, layer,
 * etype, node, its column's contents, the exclusions and weights), never on
 * the thread count, the batch around it or which partition computes it.
 *
 * Per column (node v, edge type e): its d positions b .. b+d-1 in the
 * adjacency, minus the excluded ones, are the m "allowed" positions, in
 * position order; index x in [0, m) means the x-th allowed position. With
 * fanout k (k = -1: all):
 *
 *   uniform, without replacement: k = -1 or m <= k: every allowed position,
 *     in order. Else Floyd's algorithm: for j = m-k .. m-1, draw t = j-(m-k):
 *     x = below(r_t, j + 1); if x was already chosen, choose j instead.
 *     Picks come out in the order chosen.
 *   uniform, with replacement: k = -1: every allowed position, in order.
 *     Else m = 0: nothing; else k picks x_t = below(r_t, m), t = 0 .. k-1.
 *   weighted (weights w >= 0 read per allowed position, as float, summed
 *     in double in position order: S_0 = 0, S_{i+1} = S_i + w_i, T = S_m;
 *     z = the number of positive weights). A draw picks index i = the first
 *     with S_{i+1} > unit(r_t) * T (none, by rounding: the last i with
 *     w_i > 0); so a zero weight is never drawn.
 *       without replacement: k = -1 or z <= k: every allowed position of
 *       positive weight, in order. Else draws t = 0, 1, .. : a pick already
 *       chosen is rejected, until k are chosen. If 8k + 32 draws have not
 *       found k, each further pick is made with the next draw from the
 *       unchosen positions alone (S rebuilt over them, chosen weights 0).
 *       with replacement: k = -1: as without. Else z = 0: nothing; else k
 *       draws t = 0 .. k-1.
 *     A weight that is negative, NaN or infinite fails the call (GKV_EINVAL,
 *     naming the edge and the value).
 *
 * Negative destinations of an edge mini-batch use D = 0x474b564e45474154
 * ("GKVNEGAT"), layer 0, the positive edge's etype, and the positive
 * edge's ID in place of the node: negative j of edge eid is
 * below(r_j, number of destination-type nodes).
 *
 * Weighted sums use IEEE double additions and one multiplication in the
 * order stated, without contraction into fused multiply-adds (gkv builds in
 * ISO C mode, where GCC does not contract); a GPU port must do the same
 * (--fmad=false) to reproduce weighted samples bit for bit. Uniform
 * sampling uses integers only.
 *
 * ---- Threads -----------------------------------------------------------
 *
 * An sgraph is read-only once built: any number of samplers (threads) may
 * use it at once, and gkv_sgraph_find_edges() may be called from any
 * thread (the first call that needs an edge-ID index builds it under a
 * lock). gkv_sgraph_set_adj() needs the sgraph to itself. A sampler belongs
 * to one user thread at a time; its 'nthreads' threads (the caller and
 * nthreads - 1 workers) share each call's work, and the result is the same
 * for any nthreads. Workers wait for work by spinning briefly, then
 * sleeping: keep nthreads at or below the cores you can spare. Each call is
 * timed: when the cores are oversubscribed and the workers slow the caller
 * down, later calls run on the caller alone, trying the workers again
 * every 32 calls (the result is the same either way). The parallel path
 * relabels in extra passes, so 2 threads give only 1.0-1.35x one thread;
 * 4 threads about 1.6x, 16 about 4x (doc/BENCHMARKS.md).
 *
 * ---- Errors ------------------------------------------------------------
 *
 * Calls return GKV_OK or a gkv_err; the detail ("seed 17 is outside the
 * columns [0, 10) ...") is read with gkv_errmsg(), or gkv_sgraph_errmsg()
 * or gkv_sampler_errmsg(). A failed sampling call returns no result (the
 * output structs are zeroed) and leaves the sampler ready for the next
 * call.
 */
#ifndef GKV_SAMPLE_H
#define GKV_SAMPLE_H

#include <stddef.h>
#include <stdint.h>
#include "gkv_err.h"
#include "gkv_kv.h"
#include "gkv_graph.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GKV_DIR_IN   0        /* in-edges (CSC): neighbours are sources */
#define GKV_DIR_OUT  1        /* out-edges (CSR): neighbours are destinations */

#define GKV_SAMPLE_THREADS_MAX 64   /* nthreads of one sampler */

/* ---- the graph sampled from -------------------------------------------- */

#ifndef GKV_SGRAPH_TYPEDEF       /* also in gkv_part.h: C99 allows one */
#define GKV_SGRAPH_TYPEDEF
typedef struct gkv_sgraph gkv_sgraph;   /* opaque */
#endif

/* Makes an sgraph with the given schema and no adjacency yet.
 * num_nodes[t]: the global node count of node type t (>= 0);
 * src_ntype[e], dst_ntype[e]: the node types edge type e joins. The arrays
 * are copied. On GKV_OK *out is yours until gkv_sgraph_free(); on error
 * *out is NULL. Errors: GKV_EINVAL (a count below 1 or above
 * GKV_GRAPH_TYPES_MAX, NULL arrays, a negative node count, a node type
 * out of range), GKV_ENOMEM. */
GKV_API gkv_err gkv_sgraph_new(gkv_sgraph **out, int num_ntypes,
                               const int64_t *num_nodes, int num_etypes,
                               const int *src_ntype, const int *dst_ntype);

/* Sets the adjacency of edge type 'etype' for direction 'dir' (GKV_DIR_IN:
 * a CSC whose columns are destination-type nodes; GKV_DIR_OUT: a CSR whose
 * columns are source-type nodes), replacing any set before. The struct is
 * copied but its arrays are borrowed: keep them alive and unchanged until
 * the sgraph is freed or the adjacency replaced. The whole adjacency is
 * checked once, here: [col_lo, col_hi) within the column type's nodes,
 * indptr[0] = 0 and never decreasing, every index a node of the other
 * type, eids (when given) non-negative. Weights are checked as they are
 * sampled. Needs the sgraph to itself (no sampler may be running on it).
 * Errors: GKV_EINVAL (bad etype or dir, NULL arrays, a bad range or
 * indptr), GKV_ERANGE (an index or eid out of range; the message names the
 * position), GKV_ENOMEM. On error the previous adjacency stays. */
GKV_API gkv_err gkv_sgraph_set_adj(gkv_sgraph *sg, int etype, int dir,
                                   const gkv_adj *a);

#define GKV_SG_CSR  0x01u     /* from_graph: also build the CSR (out-edges) */

/* Makes an sgraph of the whole in-memory graph 'g': its schema (a growing
 * node type counts its current nodes), and per edge type the CSC
 * (gkv_graph_csc) with its weights in CSC order, and the CSR too with
 * GKV_SG_CSR. The sgraph owns these arrays, laid out for sampling: each
 * position's neighbour and edge ID side by side (one cache line per random
 * pick), on transparent huge pages where the kernel allows them; 16 bytes
 * per edge and 8 per node (plus 4 per edge with weights) for each
 * direction. 'g' may be freed afterwards. Built on 'nthreads' threads (0
 * or 1: the calling thread). On GKV_OK *out is yours until
 * gkv_sgraph_free(); on error *out is NULL.
 * Errors: GKV_EINVAL (NULL, bad flags, a graph without node types),
 * GKV_ENOMEM. */
GKV_API gkv_err gkv_sgraph_from_graph(gkv_sgraph **out, const gkv_graph *g,
                                      unsigned flags, int nthreads);

/* Frees the sgraph and what it owns (not borrowed arrays). No sampler may
 * still use it. NULL is fine. */
GKV_API void    gkv_sgraph_free(gkv_sgraph *sg);

/* gkv_errmsg(): the detail of the calling thread's last failed call, or
 * "" after a success ('sg' is not looked at). Valid until the thread's
 * next gkv call. */
GKV_API const char *gkv_sgraph_errmsg(const gkv_sgraph *sg);

/* Schema queries. Bad indices give -1. Thread-safe: yes. */
GKV_API int     gkv_sgraph_num_ntypes(const gkv_sgraph *sg);
GKV_API int     gkv_sgraph_num_etypes(const gkv_sgraph *sg);
GKV_API int64_t gkv_sgraph_num_nodes(const gkv_sgraph *sg, int ntype);
GKV_API int     gkv_sgraph_src_ntype(const gkv_sgraph *sg, int etype);
GKV_API int     gkv_sgraph_dst_ntype(const gkv_sgraph *sg, int etype);

/* Copies the adjacency of (etype, dir) into *out (arrays still borrowed
 * from whoever owns them: valid while the sgraph lives and the adjacency
 * is not replaced). For an sgraph made by gkv_sgraph_from_graph the first
 * call for an adjacency makes its separate indices and eids arrays (16
 * bytes per edge, kept until gkv_sgraph_free). Thread-safe: yes.
 * Errors: GKV_EINVAL (bad etype or dir), GKV_ENOTFOUND (none set),
 * GKV_ENOMEM. */
GKV_API gkv_err gkv_sgraph_adj(const gkv_sgraph *sg, int etype, int dir,
                               gkv_adj *out);

/* Endpoints of edges of 'etype': src[i], dst[i] of edge eids[i], read from
 * the CSC (or the CSR when no CSC is set). With implicit eids (eids NULL in
 * the gkv_adj) an edge's position is eid - eid_lo; otherwise the first call
 * (or the first sampling call excluding edges of that type) builds an index
 * from edge ID to position (8 bytes per edge ID in the range covered, under
 * a lock, kept until the sgraph is freed). O(log columns) per edge.
 * Thread-safe: yes. Errors: GKV_EINVAL (bad etype, NULL arrays with
 * n > 0, no adjacency), GKV_ERANGE (an edge that is not in the adjacency:
 * negative, or outside what this partition covers; the message names it and
 * its index), GKV_ENOMEM (building the index). */
GKV_API gkv_err gkv_sgraph_find_edges(const gkv_sgraph *sg, int etype,
                                      const int64_t *eids, size_t n,
                                      int64_t *src, int64_t *dst);

/* ---- the sampler ------------------------------------------------------- */

typedef struct gkv_sampler gkv_sampler;   /* opaque */

/* Makes a sampler over 'sg' (borrowed: it must outlive the sampler) with
 * 'nthreads' threads (0 or 1: the calling thread only; at most
 * GKV_SAMPLE_THREADS_MAX), nthreads - 1 of which it starts now and keeps.
 * The relabel markers (8 bytes per node of every type) are allocated on
 * the first block or edge-batch call; scratch and result arrays grow to the
 * largest call so far and are kept, so a steady stream of batches
 * allocates nothing. A worker the OS has not scheduled in time does not
 * hold a call up: the caller takes its share of the work. The first call
 * always runs on all threads. On GKV_OK *out is yours until
 * gkv_sampler_free(); on error *out is NULL and nothing needs freeing.
 * Errors: GKV_EINVAL (NULL, bad nthreads), GKV_ENOMEM, GKV_EIO (a thread
 * could not be started). */
GKV_API gkv_err gkv_sampler_new(gkv_sampler **out, const gkv_sgraph *sg,
                                int nthreads);

/* Stops the workers and frees everything; results borrowed from the
 * sampler die. NULL is fine. */
GKV_API void    gkv_sampler_free(gkv_sampler *s);

/* gkv_errmsg() when this thread's last gkv call was on 's' ("" after a
 * success, or when it was on something else). Valid until the thread's
 * next gkv call. */
GKV_API const char *gkv_sampler_errmsg(const gkv_sampler *s);

#define GKV_SAMPLE_REPLACE   0x01u  /* with replacement */
#define GKV_SAMPLE_WEIGHTED  0x02u  /* weights: the gkv_adj's w, per position */

/* Options of a sampling call; zero-initialise, then set what you need.
 * Zero means: seed 0, direction IN, uniform, without replacement, nothing
 * excluded. Per-etype arrays have one entry per edge type. */
typedef struct gkv_sample_opts {
    uint64_t seed;                 /* the generator's seed */
    int      dir;                  /* GKV_DIR_IN or GKV_DIR_OUT */
    unsigned flags;                /* GKV_SAMPLE_* */
    /* Edge-weight tensors (instead of GKV_SAMPLE_WEIGHTED): NULL, or per
     * etype NULL (uniform) or an array of edge_w_len[e] floats, the weight
     * of edge ID i at [i]; a sampled edge whose ID is not below the length
     * fails the call with GKV_ERANGE. The client calls (gkv_client_sample_*)
     * take them too, by global edge ID: they send the weights of the
     * seeds' edges with the seeds (gkv_net.h). */
    const float *const *edge_w;
    const int64_t      *edge_w_len;
    /* Excluded edges: NULL, or per etype NULL or exclude_n[e] edge IDs in
     * any order (duplicates allowed). They are never returned, and a
     * column's count is min(non-excluded neighbours, fanout). IDs the
     * adjacency does not hold (another partition's edges) are ignored; a
     * negative ID fails with GKV_ERANGE. */
    const int64_t *const *exclude;
    const size_t         *exclude_n;
    /* Where each edge_w array starts: NULL (every array starts at edge 0),
     * or per etype the edge ID whose weight is edge_w[e][0], so that the
     * weight of edge i is edge_w[e][i - edge_w_lo[e]] and a sampled edge
     * outside [edge_w_lo[e], edge_w_lo[e] + edge_w_len[e]) fails the call
     * with GKV_ERANGE. A partition passes the weights of the edges it owns
     * without padding them to the global edge count. Negative: GKV_EINVAL.
     * Read only for the etypes that have an edge_w array. */
    const int64_t *edge_w_lo;
    /* Sampling probabilities from a stored edge feature, DGL's
     * sample_neighbors(..., prob='w') (and a bool mask such as mask='m'),
     * for the client calls (gkv_client_sample_*): NULL, or per etype NULL
     * (uniform) or a feature name FEAT, meaning the tensor
     * "edge/<canonical etype>/<FEAT>" that each graph server holds for the
     * edges its partition owns (doc/FORMAT.md). The feature's value is the
     * edge's weight, sampled exactly as an edge_w array holding the same
     * values (converted to float) would be: with or without replacement,
     * a zero-weight edge is never picked, so a 0/1 mask keeps only its 1
     * edges. What is accepted:
     *   - dtypes f32, f64, f16, bf16, and the integers i8, u8 (bool masks
     *     are stored as u8 0/1), i32, i64, each converted to float (f64 and
     *     integers above 2^24 are rounded to the nearest float);
     *   - one element per edge: row shape () or any shape of one element,
     *     such as (1) (DGL's (E,) and (E, 1)); wider rows are GKV_EINVAL;
     *   - names of 1 .. GKV_NAME_MAX bytes of printable ASCII without
     *     spaces or '#', and "edge/<canonical>/<FEAT>" at most GKV_NAME_MAX
     *     bytes (else GKV_EINVAL);
     *   - values finite and >= 0: a negative, NaN or infinite value on any
     *     edge a server owns fails every call that samples that etype with
     *     the feature on that server (GKV_EINVAL naming the edge ID, its
     *     value, the tensor and the partition), whether or not that edge
     *     would have been visited.
     * A server without the tensor fails with GKV_ENOTFOUND naming the
     * tensor and the partition (a partition that owns no edge of the type
     * needs none). With GKV_DIR_OUT a node's out-edges include edges other
     * partitions own, with their feature rows, so a hop takes three steps:
     * the seeds' servers list their non-excluded out-edges of the weighted
     * types, the client pulls those edges' rows from their owners, and
     * sends the weights with the seeds; a bad value fails the call only
     * when it is on one of those edges (naming the edge, its value, the
     * tensor and the owning partition), and the rows are read as of each
     * pull, not as of one snapshot. Not with GKV_SAMPLE_WEIGHTED
     * (GKV_EINVAL: one source of weights per call), nor with an edge_w
     * array for the same edge type (which the client calls also take).
     * In-process calls (gkv_sample_neighbors, _blocks, _edge_batch) have no
     * store to resolve names in: a non-NULL name there is GKV_EINVAL (pass
     * the values as edge_w). Etypes with fanout 0 are not looked up. The
     * loader (gkv_loader.h) takes the same names in its CLIENT and LOCAL
     * modes. */
    const char *const *edge_w_feat;
} gkv_sample_opts;

/* Sampling weights from an edge feature's values: dst[0 .. n) = the n
 * values at src, of dtype dt (f32, f64, f16, bf16, i8, u8 (a 0/1 mask),
 * i32, i64), as floats. Returns the index of the first value that is
 * negative, NaN or infinite (any value of another dtype is NaN), or -1.
 * The servers convert the features of the edges they own this way, the
 * clients those of out-edges, the loader a partition's in LOCAL mode. */
GKV_API int64_t gkv_sample_weights_from(const void *src, gkv_dtype dt,
                                        size_t n, float *dst);

/* Edges of one type, borrowed from the sampler until its next sampling
 * call or gkv_sampler_free(). Results are not inputs: passing any of
 * them (these arrays, a block's node IDs, an edge batch's pairs) to the
 * next call on the same sampler, as its seeds, exclusions or edge IDs,
 * makes it read memory it is overwriting or freeing. Copy them first, as
 * a multi-hop walk over out[e].src must. (The client calls,
 * gkv_client_sample_*, copy such inputs themselves: gkv_net.h.) */
typedef struct gkv_sample_edges {
    const int64_t *src;   /* n: global source IDs, or block-local src IDs */
    const int64_t *dst;   /* n: global destination IDs, or block-local */
    const int64_t *eid;   /* n: global edge IDs */
    size_t         n;
} gkv_sample_edges;

/* One hop. For every edge type e with fanout[e] != 0, samples the
 * neighbours of the seeds of its column type (seeds[dst_ntype(e)] for IN,
 * seeds[src_ntype(e)] for OUT) with the rules above at RNG layer 'layer'
 * (>= 0), and writes out[e] (the caller's array of num_etypes): the edges
 * in graph orientation (IN: src = neighbour, dst = seed; OUT: src = seed,
 * dst = neighbour), global IDs, seeds in the order given and each seed's
 * picks in pick order. A seed given twice is sampled twice (the same way).
 * seeds[t] / nseeds[t]: the seeds of node type t (num_ntypes entries each;
 * seeds[t] may be NULL when nseeds[t] is 0). fanout: nfan entries, 1 (one
 * fanout for every etype) or num_etypes; each -1 (all) or >= 0. 'opts' NULL
 * means all defaults. Hop k of gkv_sample_blocks() is reproduced exactly
 * by layer = k, fanout = its fanouts[nlayers - 1 - k] and the same opts on
 * that hop's destination nodes, on any sgraph holding their columns.
 * Errors: GKV_EINVAL (NULL, bad nfan, fanout < -1, layer < 0, bad opts, a
 * needed adjacency not set, a bad weight), GKV_ERANGE (a seed outside its
 * type or the columns covered; an edge ID beyond an edge_w array; a
 * negative excluded ID), GKV_ENOMEM. */
GKV_API gkv_err gkv_sample_neighbors(gkv_sampler *s,
                                     const int64_t *const *seeds,
                                     const size_t *nseeds, const int *fanout,
                                     int nfan, int layer,
                                     const gkv_sample_opts *opts,
                                     gkv_sample_edges *out);

/* The nodes of one type in a block, borrowed like gkv_sample_edges:
 * ids[0 .. num_src) are global IDs, the first num_dst of them the block's
 * destination nodes (so a block's source side includes its destination
 * nodes, as DGL's to_block makes it). */
typedef struct gkv_block_nodes {
    const int64_t *ids;
    size_t         num_src, num_dst;
} gkv_block_nodes;

/* A block (message-flow graph): per node type its nodes, per edge type its
 * edges in local IDs: edges[e].src indexes the source side's ids of the
 * neighbour type, edges[e].dst the destination side of the column type.
 * With GKV_DIR_IN an edge is the graph edge src -> dst; with GKV_DIR_OUT the
 * block holds sampled out-edges reversed (messages flow from the
 * out-neighbour, on the source side, to the seed), so edges[e] goes from
 * dst_ntype(e) nodes to src_ntype(e) nodes. */
typedef struct gkv_block {
    int                     num_ntypes, num_etypes;
    const gkv_block_nodes  *nodes;   /* [num_ntypes] */
    const gkv_sample_edges *edges;   /* [num_etypes] */
} gkv_block;

/* Multi-layer sampling as DGL's MultiLayerNeighborSampler does it, into
 * blocks[0 .. nlayers) (the caller's array; the contents are borrowed from
 * the sampler until its next sampling call, and are no inputs of it: copy
 * blocks[0]'s node IDs before sampling from them).
 *   - fanouts: nlayers * nfan entries; fanouts[i * nfan + e] (or
 *     fanouts[i * nfan] with nfan = 1) belongs to blocks[i], in DGL's order:
 *     blocks[nlayers - 1] has the seeds as destination nodes and is sampled
 *     first, at RNG layer 0, with fanouts of row nlayers - 1; blocks[i] is
 *     sampled at layer nlayers - 1 - i, and its destination nodes are the
 *     source nodes of blocks[i + 1].
 *   - In each block, per node type: the destination nodes in order, then
 *     the new source nodes in order of first appearance in the block's edge
 *     list (edge types in order, then the destination nodes in order, then
 *     each one's picks in pick order).
 *   - Edges per type as gkv_sample_neighbors() gives them for the same
 *     layer, relabelled to local IDs.
 *   - blocks[0]'s source nodes are the input nodes whose features a model
 *     needs.
 * The seeds must be distinct within each type. Runs on the sampler's
 * threads; the result is the same for any number.
 * Errors: as gkv_sample_neighbors(), and GKV_EINVAL (nlayers < 1, a seed
 * given twice). */
GKV_API gkv_err gkv_sample_blocks(gkv_sampler *s,
                                  const int64_t *const *seeds,
                                  const size_t *nseeds, const int *fanouts,
                                  int nfan, int nlayers,
                                  const gkv_sample_opts *opts,
                                  gkv_block *blocks);

#define GKV_EXCLUDE_SELF     0x01u  /* the batch's own edges */
#define GKV_EXCLUDE_REVERSE  0x02u  /* the batch's edges' reverse edges */

/* An edge mini-batch request (DGL's EdgeDataLoader with a uniform negative
 * sampler and exclude='self' / 'reverse_id' / 'reverse_types'). */
typedef struct gkv_edge_batch_spec {
    int            etype;        /* type of the positive edges */
    const int64_t *eids;         /* the positive edges' IDs */
    size_t         n;
    int            num_neg;      /* negatives per positive edge (>= 0) */
    unsigned       exclude;      /* GKV_EXCLUDE_* */
    /* With GKV_EXCLUDE_REVERSE: the reverse of positive edge eid is edge
     * reverse_eids[eid] (reverse_n entries) of edge type reverse_etype.
     * With reverse_eids NULL (reverse_etype must then differ from etype):
     * on a graph of gkv-partition's (a partition's sgraph, or through the
     * servers) the edge that its "reverse_eid" edge feature names, which
     * gkv-partition --reverse-etypes writes (partitioning renumbers each
     * edge type on its own, so edge eid of reverse_etype is not eid's
     * reverse there; without that feature the call fails, GKV_EINVAL);
     * elsewhere edge eid of reverse_etype. */
    int            reverse_etype;
    const int64_t *reverse_eids;
    int64_t        reverse_n;
} gkv_edge_batch_spec;

/* The pairs of an edge mini-batch in local IDs of the seed set: src values
 * index the destination nodes of type src_ntype(etype) in the last block
 * (blocks[nlayers - 1].nodes[src_ntype].ids), dst values those of type
 * dst_ntype(etype). Borrowed from the sampler like the blocks. */
typedef struct gkv_edge_batch {
    const int64_t *pos_src, *pos_dst;   /* num_pos pairs: positive edge i */
    size_t         num_pos;
    const int64_t *neg_src, *neg_dst;   /* num_neg pairs: i * num_neg + j */
    size_t         num_neg;
} gkv_edge_batch;

/* Samples an edge mini-batch: looks up the endpoints of the positive edges
 * (gkv_sgraph_find_edges), draws spec->num_neg uniform negative
 * destinations for each (over all nodes of the destination type; the
 * negative's source is the positive's source), and samples blocks as
 * gkv_sample_blocks() does with the seed set = per node type the union of
 * the endpoints of all pairs, in order of first appearance (positive i's
 * source then destination, for i in order; then the negatives'
 * destinations in order). Excluded at every layer: the edges in
 * opts->exclude, plus with GKV_EXCLUDE_SELF the batch's edges (of
 * spec->etype) and with GKV_EXCLUDE_REVERSE their reverse edges. *batch
 * gets the pairs in local IDs, blocks[0 .. nlayers) the blocks (empty when
 * spec->n is 0). The positive edges must be held by the sgraph (a
 * partition: edges it owns).
 * Errors: as gkv_sample_blocks(), GKV_EINVAL (bad spec: etype, eids NULL
 * with n > 0, num_neg < 0, unknown exclude bits, a reverse option without
 * what it needs), GKV_ERANGE (a positive edge the sgraph does not hold, an
 * ID beyond reverse_eids, a reverse edge that is negative). */
/* Negative j of positive edge 'eid' (of edge type 'etype') in an edge
 * mini-batch sampled with 'seed' (opts->seed): the destination
 * below(r_j, num_dst_nodes) of the generator above, in [0, num_dst_nodes);
 * what gkv_sample_edge_batch() draws, for code that assembles edge batches
 * elsewhere (gkv_client_sample_edge_batch). 0 when num_dst_nodes <= 0.
 * Pure; thread-safe. */
GKV_API int64_t gkv_sample_negative(uint64_t seed, int etype, int64_t eid,
                                    uint64_t j, int64_t num_dst_nodes);

GKV_API gkv_err gkv_sample_edge_batch(gkv_sampler *s,
                                      const gkv_edge_batch_spec *spec,
                                      const int *fanouts, int nfan,
                                      int nlayers,
                                      const gkv_sample_opts *opts,
                                      gkv_edge_batch *batch,
                                      gkv_block *blocks);

#ifdef __cplusplus
}
#endif
#endif /* GKV_SAMPLE_H */
