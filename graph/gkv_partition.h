/* gkv_partition.h - the partitioner: splits a gkv_graph into partitions and
 * writes them to disk, one gkv store per partition plus a JSON config that
 * uses DGL's field names (dgl.distributed.partition_graph writes the same
 * kind of directory). The bytes are specified in doc/FORMAT.md
 * ("Partitions"); in brief:
 *
 *   OUT/<name>.json                the partition config
 *   OUT/part-<p>/                  the store of partition p
 *   OUT/mapping/node-<ntype>.npy   int64: original node ID -> new ID
 *   OUT/mapping/edge-<canon>.npy   int64: original edge ID -> new ID
 *
 * What a partition holds. Nodes are assigned to partitions by the method;
 * an edge belongs to its DESTINATION's partition. IDs are renumbered so that
 * partition p owns one contiguous range of new type-wise IDs per node type
 * and per edge type, ranges in partition order. Within a partition, nodes
 * keep their original order, and edges are numbered in CSC order (by new
 * destination ID, ties in original edge order). Partition p's store holds,
 * per edge type, the CSC of the in-edges of the nodes it owns
 * (csc/<canon>/indptr, indices, weight), optionally the CSR of their
 * out-edges (csr/<canon>/...), and the feature rows of the nodes and edges
 * it owns (node/<ntype>/<feat>, edge/<canon>/<feat>) at their new IDs.
 *
 * All or nothing: everything is written under OUT.tmp-PID (beside OUT) and
 * renamed to OUT only when complete and synced to disk. On any error, or
 * when the progress callback cancels, the temporary directory is removed and
 * OUT is as it was. A crash can leave OUT.tmp-PID behind, never a partial
 * OUT. An OUT that already holds a partition is replaced only with
 * GKV_PART_FORCE; the old one stays in place until the new one is complete,
 * then the two are swapped in one step (renameat2 RENAME_EXCHANGE, where
 * the file system has it; doc/FORMAT.md).
 *
 * Memory: the graph itself, plus about 8 bytes per edge (the edge mapping),
 * about 20 bytes per node, and the arrays of one partition at a time (8
 * bytes per owned edge, more with weights, edge features or CSR). R-MAT
 * scale 22 (67 M edges, a 1 GiB edge list) into 4 parts peaks at 1.8x the
 * edge list. METIS needs its symmetric adjacency on top (4 bytes per edge
 * and direction) and libmetis's own working memory, about 10x the edge
 * list in all at that scale.
 */
#ifndef GKV_PARTITION_H
#define GKV_PARTITION_H

#include <stddef.h>
#include <stdint.h>
#include "gkv_err.h"
#include "gkv_kv.h"
#include "gkv_graph.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GKV_PART_MAX       65535    /* partitions per call */
#define GKV_PART_NAME_MAX  128      /* bytes in a graph or feature name */

typedef enum gkv_part_method {
    GKV_PART_RANDOM = 1,  /* each node type shuffled (seeded), then cut into
                           * num_parts equal slices: balanced node counts */
    GKV_PART_RANGE  = 2,  /* each node type cut into num_parts contiguous
                           * equal slices of its IDs: a homogeneous graph
                           * keeps every node ID */
    GKV_PART_METIS  = 3,  /* libmetis k-way on the symmetric, loop-free
                           * homogeneous view of all node and edge types,
                           * minimising the edge cut while balancing nodes
                           * (and in-edges, and training nodes: see flags) */
    GKV_PART_GIVEN  = 4   /* the caller's assignment (spec.owners), e.g. that
                           * of a graph another partitioner split; within a
                           * partition nodes keep their order, so owners
                           * that do not decrease keep every node ID */
} gkv_part_method;

/* "random", "range", "metis", "given"; "?" for anything else. Constant string. */
GKV_API const char *gkv_part_method_name(gkv_part_method m);
/* Parses one of those names. Errors: GKV_EINVAL. */
GKV_API gkv_err     gkv_part_method_parse(const char *s, gkv_part_method *out);

#define GKV_PART_CSR           0x01u  /* also store the CSR of out-edges */
#define GKV_PART_FORCE         0x02u  /* replace a partition already at OUT */
#define GKV_PART_BALANCE_EDGES 0x04u  /* METIS: also balance in-edges per
                                       * partition (vertex weight = in-degree) */
/* METIS runs recursive bisection with random matching by default (on
 * R-MAT 2-3x faster than METIS's own defaults, with half the cut); these
 * choose METIS's defaults (and DGL's): */
#define GKV_PART_METIS_KWAY    0x08u  /* METIS_PartGraphKway */
#define GKV_PART_METIS_SHEM    0x10u  /* heavy-edge matching (CTYPE SHEM) */

/* One feature: rows indexed by the original node IDs of a node type, or
 * the original edge IDs of an edge type, from a .npy file or from memory.
 * It is stored as tensor "node/<type>/<name>" or "edge/<canon>/<name>",
 * each partition holding the rows of what it owns, at the new IDs. */
typedef struct gkv_part_feat {
    int         is_edge;   /* 0: node feature; 1: edge feature */
    const char *type;      /* node type name; or edge type, canonical
                            * ("user:buys:item") or its unique relation */
    const char *name;      /* feature name: 1..GKV_PART_NAME_MAX bytes of
                            * printable ASCII without blanks, '#' or '/' */
    const char *path;      /* a .npy file (see gkv_npy.h for what is read),
                            * or NULL: the rows are 'data' below */
    /* In-memory rows, used when path is NULL: nrows rows of row shape
     * shape[0..ndim) of dtype, C order, nrows x row bytes at 'data'. */
    const void *data;
    gkv_dtype   dtype;
    unsigned    ndim;      /* 0..GKV_MAX_DIMS; 0 = one element per row */
    uint64_t    shape[GKV_MAX_DIMS];
    uint64_t    nrows;
} gkv_part_feat;

/* A training mask for METIS's balance: one value per node of 'ntype', non-
 * zero = a training node. With one or more masks METIS also balances
 * training nodes per partition (DGL's balance_ntypes with a train mask).
 * From a .npy file ('path': 1-D, or N x 1; bool, integer or float dtype)
 * or from memory ('data': 'nrows' bytes, 0 or not; used when path is NULL).
 * Other methods ignore masks (they are still checked). */
typedef struct gkv_part_mask {
    const char    *ntype;  /* node type name */
    const char    *path;
    const uint8_t *data;
    uint64_t       nrows;
} gkv_part_mask;

/* A pair of edge types whose edges are each other's reverses, edge k of
 * one being the reverse of edge k of the other in the input's (original)
 * edge IDs: DGL's reverse_etypes. Partitioning renumbers each edge type on
 * its own (by its destinations' partitions), so that pairing is lost in
 * the new IDs; with a pair given, each of the two types gets an edge
 * feature "reverse_eid" (int64): the NEW ID of its reverse edge in the
 * other type, which edge mini-batches read to exclude reverse edges
 * (gkv_edge_batch_spec, GKV_EXCLUDE_REVERSE). Names as for features. The
 * types must differ, have swapped node types and as many edges, and edge
 * k of each must join the same two nodes the other way (checked). */
#define GKV_PART_REVERSE_FEAT "reverse_eid"
typedef struct gkv_part_reverse {
    const char *etype;
    const char *reverse_etype;
} gkv_part_reverse;

/* Progress: called from the calling thread between steps (never inside
 * libmetis), with a short stage name and units done out of total:
 *   "assign"  0/0 then 1/1    nodes are being assigned (METIS runs here)
 *   "write"   bytes / bytes   tensors and mapping files being written
 *   "sync"    0/0 then 1/1    everything is flushed to disk
 * A non-zero return cancels: the call cleans up and returns GKV_EINTR. */
typedef int (*gkv_part_progress_fn)(void *ctx, const char *stage,
                                    uint64_t done, uint64_t total);

/* What to do. Zero-initialise, then set at least method and num_parts. */
typedef struct gkv_part_spec {
    const char          *name;       /* graph_name: the JSON is <name>.json;
                                      * 1..GKV_PART_NAME_MAX bytes as a
                                      * feature name; NULL = "graph" */
    gkv_part_method      method;
    int                  num_parts;  /* 1..GKV_PART_MAX, at most the number
                                      * of nodes (all types together) */
    uint64_t             seed;       /* random: the shuffle; metis: its seed */
    unsigned             flags;      /* GKV_PART_* */
    int                  nthreads;   /* worker threads; 0 or 1 = the caller */
    const gkv_part_feat *feats;      /* nfeats features (may be NULL if 0) */
    size_t               nfeats;
    const gkv_part_mask *masks;      /* nmasks training masks, one per node
                                      * type at most */
    size_t               nmasks;
    const gkv_part_reverse *reverse; /* nreverse reverse pairs; an edge type
                                      * in one pair at most */
    size_t               nreverse;
    gkv_part_progress_fn progress;   /* may be NULL */
    void                *progress_ctx;
    const int32_t *const *owners;    /* GKV_PART_GIVEN (required; NULL for
                                      * the others): owners[t][v], the
                                      * partition 0..num_parts-1 of node v
                                      * of node type t, types in the
                                      * graph's order */
    int                  metis_keep; /* METIS: thinning (the idea of
                                      * DROPEDGES in DGL's METIS): each
                                      * node of METIS's graph keeps this
                                      * many of its neighbours, the
                                      * heaviest (most input edges between
                                      * the two), an edge staying when
                                      * either end keeps it (so only edges
                                      * between two nodes of more than
                                      * this many go). The cut
                                      * reported still counts every input
                                      * edge. 0: the default, see
                                      * GKV_PART_METIS_KEEP;
                                      * GKV_PART_METIS_KEEP_ALL: every
                                      * edge; other negatives: GKV_EINVAL */
} gkv_part_spec;

/* spec.metis_keep 0 keeps this many neighbours a node in graphs whose
 * symmetric adjacency (each neighbour of each node once) has 2^24 entries
 * or more (R-MAT scale 20 has 31 M), every edge in smaller graphs. On
 * R-MAT (scales 14 to 22) METIS is then 1.1-1.7x faster, the more the
 * larger the graph, and cuts no more (scale 22 into 4 parts: 36 s
 * instead of 61, a cut of 15.8 % of the edges instead of 17.1 %, half
 * the memory); on other graphs compare with GKV_PART_METIS_KEEP_ALL. Only
 * edges between two nodes of more than K neighbours each can go, so on a
 * graph whose nodes mostly have many neighbours and no hubs (dense, or
 * k-nearest-neighbour) use GKV_PART_METIS_KEEP_ALL; a small K costs cut
 * (R-MAT scale 20: K = 8 gave 2.2x the cut of every edge). */
#define GKV_PART_METIS_KEEP      32
#define GKV_PART_METIS_KEEP_ALL  (-1)

/* What was done; filled on GKV_OK. */
typedef struct gkv_part_report {
    int64_t  num_nodes;          /* all node types */
    int64_t  num_edges;          /* all edge types */
    int64_t  edge_cut;           /* edges whose endpoints lie in different
                                  * partitions */
    int64_t  min_part_nodes, max_part_nodes;  /* nodes owned, all types */
    int64_t  min_part_edges, max_part_edges;  /* edges owned, all types */
    uint64_t bytes_written;      /* tensor rows and mapping files */
    double   seconds;            /* wall time of the call */
    double   assign_seconds;     /* of which assigning nodes (METIS) */
} gkv_part_report;

/* Partitions 'g' by 'spec' into directory 'outdir' (see the top of this
 * file). 'outdir' must not exist, be an empty directory, or (with
 * GKV_PART_FORCE) hold a gkv partition and nothing else; its parent must
 * exist. Features and masks are checked (types, names, row counts, files)
 * before anything is written. 'rep' may be NULL. On error 'msg' (msglen
 * bytes; may be NULL) gets the detail, naming what was wrong: the file, the
 * feature, the type, the count ("feature 'node/user/feat' (u.npy) has 3
 * rows, but node type 'user' has 4 nodes").
 *
 * Threads: 'g' is only read, so other threads may read it meanwhile; up to
 * spec->nthreads threads work inside the call. Thread-safe for distinct
 * outdirs. Ownership: nothing passed in is kept after the call returns.
 *
 * Errors: GKV_EINVAL (bad spec: method, num_parts, names, a too-long tensor
 * name, more parts than nodes, a reverse pair whose edges are not each
 * other's reverses, named with the first edge that is not), GKV_ENOTFOUND (an unknown node or edge
 * type), GKV_ESHAPE (a feature or mask whose row count does not match),
 * GKV_EFORMAT (a feature file that is not a readable .npy), GKV_ENOENT (a
 * missing feature file or parent directory), GKV_EEXIST (outdir holds a
 * partition and no GKV_PART_FORCE, or holds other files), GKV_ERANGE (METIS:
 * the graph exceeds its 32-bit idx_t), GKV_EINTR (cancelled), GKV_EPERM,
 * GKV_EIO, GKV_EMAPFULL, GKV_ENOMEM (also before anything is written, when
 * the per-node arrays alone would not fit in this machine's memory: the
 * message gives the bytes and, when a type has far more nodes than its
 * edges touch, says that node IDs are dense and names the largest ID). */
GKV_API gkv_err gkv_partition_write(const gkv_graph *g,
                                    const gkv_part_spec *spec,
                                    const char *outdir, gkv_part_report *rep,
                                    char *msg, size_t msglen);

#ifdef __cplusplus
}
#endif
#endif /* GKV_PARTITION_H */
