/* gkv_part.h - partitions: the partition book, the partition reader and
 * the training-set splits.
 *
 * A partitioned graph is a directory: a partition config OUT/<graph>.json
 * and one gkv store per partition (the format is the partition contract,
 * gkv format 1, written by gkv-partition). After partitioning, node and
 * edge IDs are renumbered so that every partition owns one contiguous range
 * of type-wise IDs per node type and per edge type, in partition order
 * (DGL's RangePartitionBook). An edge belongs to its destination node's
 * partition, and within a partition its edges are numbered in CSC order.
 *
 * IDs. "Type-wise" IDs (0 .. count-1 within one node or edge type) are what
 * every call here takes unless it says "homogeneous". Homogeneous IDs are
 * DGL's single ID space over all types: partition by partition, and within
 * a partition type by type in type order. For a homogeneous graph (type
 * "_N", etype "_N:_E:_N") the two are the same.
 *
 * Vectorised calls take n IDs and fill caller arrays of n results; an
 * output array may be the input array itself. One bad ID fails the call
 * with GKV_ERANGE and a message naming the ID and its index in the array
 * ("ids[3] = 99 is not a 'user' node ID: there are 4"); the outputs are
 * then partly written.
 *
 * Errors: every call returns GKV_OK or a gkv_err; the detail for the calling
 * thread is read back with gkv_errmsg(), or gkv_pbook_errmsg() /
 * gkv_part_errmsg() (with a NULL handle after a failed open).
 *
 * Threads: a book or an open partition is read-only after open: any number
 * of threads may query it at once.
 */
#ifndef GKV_PART_H
#define GKV_PART_H

#include <stddef.h>
#include <stdint.h>
#include "gkv_err.h"
#include "gkv_kv.h"
#include "gkv_graph.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GKV_PART_FORMAT 1      /* newest "gkv_format" this build reads */

typedef struct gkv_pbook gkv_pbook;   /* opaque: the partition config */
typedef struct gkv_part  gkv_part;    /* opaque: one open partition */

/* ---- the partition book ---------------------------------------------- */

/* Reads the partition config 'json_path' and checks all of it: every field
 * of the contract present with its JSON type (only "halo_hops", which must
 * be 0, and "mapping" may be absent), names valid, node_map and edge_map
 * tiling the homogeneous ID spaces in DGL's order and summing to
 * num_nodes / num_edges, a "part-N" entry with a "part_graph" path for
 * every partition (its "node_feats" / "edge_feats", when given, must be
 * the same path: features live in the partition's store), gkv_format 1.
 * Part store paths and mapping paths are resolved relative to the JSON's
 * directory. On GKV_OK *out is yours until gkv_pbook_close(); on
 * error *out is NULL, nothing needs freeing and gkv_pbook_errmsg(NULL)
 * names the file and the field ("g.json: field 'node_map.user[1]':
 * expected an array of 2 integers").
 * Errors: GKV_ENOENT, GKV_EPERM, GKV_EIO (reading the file); GKV_EFORMAT
 * (not JSON, or a missing or malformed field); GKV_EVERSION (gkv_format
 * newer than GKV_PART_FORMAT); GKV_ENOMEM. */
GKV_API gkv_err gkv_pbook_open(gkv_pbook **out, const char *json_path);
/* The same from the config's bytes (e.g. as a server sent them). 'name'
 * stands for the file in messages, and its directory part (if any)
 * resolves relative paths; part store and mapping paths are meaningless
 * when it has none. */
GKV_API gkv_err gkv_pbook_open_mem(gkv_pbook **out, const void *text,
                                   size_t len, const char *name);

/* Frees the book; strings borrowed from it die. NULL is fine. */
GKV_API void    gkv_pbook_close(gkv_pbook *b);

/* gkv_errmsg() when this thread's last gkv call was on 'b' ("" when it
 * succeeded, or was on something else); gkv_pbook_errmsg(NULL) after a
 * failed gkv_pbook_open(). Valid until the thread's next gkv call. */
GKV_API const char *gkv_pbook_errmsg(const gkv_pbook *b);

/* Config fields. Strings are the book's, valid until gkv_pbook_close(). */
GKV_API const char *gkv_pbook_graph_name(const gkv_pbook *b);
GKV_API const char *gkv_pbook_method(const gkv_pbook *b);  /* "random", ... */
GKV_API int         gkv_pbook_num_parts(const gkv_pbook *b);
GKV_API int         gkv_pbook_has_csr(const gkv_pbook *b);  /* 1: CSR stored */
/* The edge type paired with 'etype' by gkv-partition --reverse-etypes
 * (its edge feature "reverse_eid" holds IDs of that type), or -1. */
GKV_API int         gkv_pbook_reverse_etype(const gkv_pbook *b, int etype);
GKV_API int64_t     gkv_pbook_total_nodes(const gkv_pbook *b); /* all types */
GKV_API int64_t     gkv_pbook_total_edges(const gkv_pbook *b);
/* The store directory of partition 'part' ("part_graph", resolved); NULL
 * for a bad 'part'. */
GKV_API const char *gkv_pbook_part_path(const gkv_pbook *b, int part);

/* Schema. Type indices are the config's ("ntypes", "etypes"). Bad indices
 * give NULL, -1 or GKV_EINVAL as stated. */
GKV_API int         gkv_pbook_num_ntypes(const gkv_pbook *b);
GKV_API int         gkv_pbook_num_etypes(const gkv_pbook *b);
GKV_API const char *gkv_pbook_ntype_name(const gkv_pbook *b, int ntype);
/* Canonical name "src:rel:dst" of edge type 'etype'; NULL if none. */
GKV_API const char *gkv_pbook_etype_name(const gkv_pbook *b, int etype);
/* Index of node type 'name'. Errors: GKV_ENOTFOUND. */
GKV_API gkv_err     gkv_pbook_ntype_find(const gkv_pbook *b, const char *name,
                                         int *ntype);
/* Index of an edge type by canonical name, or by relation alone when no
 * other edge type has it. Errors: GKV_ENOTFOUND, GKV_EINVAL (a relation
 * shared by several edge types; the message lists them). */
GKV_API gkv_err     gkv_pbook_etype_find(const gkv_pbook *b, const char *name,
                                         int *etype);
/* Describes edge type 'etype' (num_edges: all partitions). The strings are
 * the book's. Errors: GKV_EINVAL. */
GKV_API gkv_err     gkv_pbook_etype_info(const gkv_pbook *b, int etype,
                                         gkv_etype_info *out);
/* Global counts of one type (all partitions); -1 for a bad type. */
GKV_API int64_t     gkv_pbook_num_nodes(const gkv_pbook *b, int ntype);
GKV_API int64_t     gkv_pbook_num_edges(const gkv_pbook *b, int etype);

/* Feature names listed in "node_feats" / "edge_feats" for a type: the
 * count (0 when none or a bad type) and the i-th name (NULL if none). */
GKV_API int         gkv_pbook_num_node_feats(const gkv_pbook *b, int ntype);
GKV_API const char *gkv_pbook_node_feat(const gkv_pbook *b, int ntype, int i);
GKV_API int         gkv_pbook_num_edge_feats(const gkv_pbook *b, int etype);
GKV_API const char *gkv_pbook_edge_feat(const gkv_pbook *b, int etype, int i);
/* The resolved path of the ID mapping .npy of a type ("mapping" field);
 * NULL when the config has none or the type is bad. */
GKV_API const char *gkv_pbook_node_mapping(const gkv_pbook *b, int ntype);
GKV_API const char *gkv_pbook_edge_mapping(const gkv_pbook *b, int etype);

/* The type-wise IDs [*lo, *hi) of a type that partition 'part' owns, or
 * its range of homogeneous IDs (the node_map / edge_map entry).
 * Errors: GKV_EINVAL (bad type or part). */
GKV_API gkv_err gkv_pbook_node_range(const gkv_pbook *b, int ntype, int part,
                                     int64_t *lo, int64_t *hi);
GKV_API gkv_err gkv_pbook_edge_range(const gkv_pbook *b, int etype, int part,
                                     int64_t *lo, int64_t *hi);
GKV_API gkv_err gkv_pbook_node_homo_range(const gkv_pbook *b, int ntype,
                                          int part, int64_t *lo, int64_t *hi);
GKV_API gkv_err gkv_pbook_edge_homo_range(const gkv_pbook *b, int etype,
                                          int part, int64_t *lo, int64_t *hi);

/* Vectorised lookups, each O(log P) per ID (a binary search over range
 * starts) or O(1). All: GKV_EINVAL (bad type or part, NULL arrays with
 * n > 0), GKV_ERANGE (an ID outside the type or not owned by 'part').
 *
 * *_owner: part[i] = the partition owning type-wise ID ids[i].
 * *_to_local: local[i] = ids[i] - lo, the offset within the range 'part'
 *   owns; an ID 'part' does not own fails and names its owner.
 * *_from_local: ids[i] = lo + local[i].
 * *_to_homo: homo[i] = the homogeneous ID of type-wise ID ids[i].
 * *_from_homo: the type, type-wise ID and partition of homogeneous ID
 *   homo[i]; any of the three outputs may be NULL. */
GKV_API gkv_err gkv_pbook_node_owner(const gkv_pbook *b, int ntype,
                                     const int64_t *ids, size_t n,
                                     int32_t *part);
GKV_API gkv_err gkv_pbook_edge_owner(const gkv_pbook *b, int etype,
                                     const int64_t *ids, size_t n,
                                     int32_t *part);
GKV_API gkv_err gkv_pbook_node_to_local(const gkv_pbook *b, int ntype,
                                        int part, const int64_t *ids,
                                        size_t n, int64_t *local);
GKV_API gkv_err gkv_pbook_edge_to_local(const gkv_pbook *b, int etype,
                                        int part, const int64_t *ids,
                                        size_t n, int64_t *local);
GKV_API gkv_err gkv_pbook_node_from_local(const gkv_pbook *b, int ntype,
                                          int part, const int64_t *local,
                                          size_t n, int64_t *ids);
GKV_API gkv_err gkv_pbook_edge_from_local(const gkv_pbook *b, int etype,
                                          int part, const int64_t *local,
                                          size_t n, int64_t *ids);
GKV_API gkv_err gkv_pbook_node_to_homo(const gkv_pbook *b, int ntype,
                                       const int64_t *ids, size_t n,
                                       int64_t *homo);
GKV_API gkv_err gkv_pbook_edge_to_homo(const gkv_pbook *b, int etype,
                                       const int64_t *ids, size_t n,
                                       int64_t *homo);
GKV_API gkv_err gkv_pbook_node_from_homo(const gkv_pbook *b,
                                         const int64_t *homo, size_t n,
                                         int32_t *ntype, int64_t *ids,
                                         int32_t *part);
GKV_API gkv_err gkv_pbook_edge_from_homo(const gkv_pbook *b,
                                         const int64_t *homo, size_t n,
                                         int32_t *etype, int64_t *ids,
                                         int32_t *part);

/* ---- training-set splits (DGL's node_split / edge_split) --------------- */

/* The partition that trainer 'rank' of 'num_trainers' works for:
 * rank * P / num_trainers (rounded down). When num_trainers is a multiple
 * of P each partition gets num_trainers / P consecutive ranks; with fewer
 * trainers than partitions some partitions have none. -1 for bad args. */
GKV_API int gkv_pbook_trainer_part(const gkv_pbook *b, int num_trainers,
                                   int rank);

/* Splits the selected IDs of one type among 'num_trainers' trainers.
 * The selection is either 'mask' (n = the type's count; ID i is selected
 * when mask[i] != 0) or 'ids' (n type-wise IDs in any order; duplicates
 * count once); pass exactly one of the two.
 *
 * Every trainer gets floor(M / T) or ceil(M / T) IDs (M selected, T
 * trainers), in increasing order. Trainers of one partition take that
 * partition's selected IDs contiguously, in rank order. Where a partition
 * holds more selected IDs than its trainers' share, the surplus goes, in ID
 * order, to the trainers (in rank order) of partitions that hold fewer: so
 * the number of IDs a trainer gets from its own partition is the most
 * that balanced shares allow (sum over partitions of min(selected, share)).
 * The ceil shares go first to trainers whose partition has a surplus.
 * Deterministic: the same input gives the same split.
 *
 * gkv_pbook_node_split: trainer 'rank's IDs; on GKV_OK *out (may be NULL
 * when *nout is 0) is a gkv__malloc'd array the caller frees with
 * gkv_free().
 * gkv_pbook_node_split_all: every trainer's IDs, concatenated in rank
 * order into *out (free with gkv_free()); trainer r's are
 * (*out)[offsets[r] .. offsets[r+1]), 'offsets' the caller's array of
 * num_trainers + 1.
 * Errors: GKV_EINVAL (bad type, both or neither of mask and ids, a mask
 * whose length is not the type's count, num_trainers < 1, bad rank),
 * GKV_ERANGE (an ID in 'ids' outside the type), GKV_ENOMEM. */
GKV_API gkv_err gkv_pbook_node_split(const gkv_pbook *b, int ntype,
                                     const uint8_t *mask, const int64_t *ids,
                                     size_t n, int num_trainers, int rank,
                                     int64_t **out, size_t *nout);
GKV_API gkv_err gkv_pbook_edge_split(const gkv_pbook *b, int etype,
                                     const uint8_t *mask, const int64_t *ids,
                                     size_t n, int num_trainers, int rank,
                                     int64_t **out, size_t *nout);
GKV_API gkv_err gkv_pbook_node_split_all(const gkv_pbook *b, int ntype,
                                         const uint8_t *mask,
                                         const int64_t *ids, size_t n,
                                         int num_trainers, int64_t **out,
                                         size_t *offsets);
GKV_API gkv_err gkv_pbook_edge_split_all(const gkv_pbook *b, int etype,
                                         const uint8_t *mask,
                                         const int64_t *ids, size_t n,
                                         int num_trainers, int64_t **out,
                                         size_t *offsets);

/* ---- the partition reader --------------------------------------------- */

#define GKV_PART_WRITABLE 0x100u   /* open the store for writes (pushes) */

/* Opens partition 'part' of the config 'json_path': reads the book, opens
 * the partition's store (read-only unless GKV_PART_WRITABLE; GKV_NOSYNC and
 * GKV_GUARD are passed through to the store) and loads every edge type's CSC, and the
 * CSR when the config says "csr", into memory, checking it: the tensors
 * have the dtype and ID ranges the config implies, indptr starts at 0, never
 * decreases and ends at the edge count, every source / destination is a
 * node of its type, every CSR edge ID is an edge of its type, weights are
 * finite. A tensor whose range is empty may be missing. On GKV_OK *out is
 * yours until gkv_part_close(); on error *out is NULL, nothing needs
 * freeing and gkv_part_errmsg(NULL) says what was wrong.
 * Errors: the book's (see gkv_pbook_open), GKV_EINVAL (bad part or flags),
 * the store's (GKV_ENOENT, GKV_EVERSION, GKV_EPERM, GKV_EIO), GKV_ECORRUPT
 * (a tensor missing, of the wrong shape or with bad contents: the message
 * names the tensor and the row), GKV_ENOMEM. */
GKV_API gkv_err gkv_part_open(gkv_part **out, const char *json_path,
                              int part, unsigned flags);

/* Closes the store and frees everything; borrowed pointers die. NULL is
 * fine. */
GKV_API void    gkv_part_close(gkv_part *p);

/* As gkv_pbook_errmsg(), for calls on 'p' (NULL: a failed open). */
GKV_API const char *gkv_part_errmsg(const gkv_part *p);

/* The partition's book, store and number. Borrowed until gkv_part_close():
 * the store may be used for feature pulls (and pushes when writable). */
GKV_API const gkv_pbook *gkv_part_book(const gkv_part *p);
GKV_API gkv_store       *gkv_part_store(const gkv_part *p);
GKV_API int              gkv_part_id(const gkv_part *p);

/* Nodes of a type / edges of a type this partition owns; -1 for a bad
 * type. The global totals are gkv_pbook_num_nodes/_edges. */
GKV_API int64_t gkv_part_num_nodes(const gkv_part *p, int ntype);
GKV_API int64_t gkv_part_num_edges(const gkv_part *p, int etype);

/* The in-memory adjacency of edge type 'etype', borrowed until
 * gkv_part_close(). CSC: columns are the owned nodes of the destination
 * type, indices the sources, eids NULL with eid_lo = the first owned edge.
 * CSR: columns are the owned nodes of the source type, indices the
 * destinations, eids the edge IDs (out-edges of owned nodes, including
 * edges other partitions own). w: weights or NULL.
 * Errors: GKV_EINVAL (bad etype), GKV_ENOTSUP (CSR: the partition stores
 * none). */
GKV_API gkv_err gkv_part_csc(const gkv_part *p, int etype, gkv_adj *out);
GKV_API gkv_err gkv_part_csr(const gkv_part *p, int etype, gkv_adj *out);

/* deg[i] = in-degree (edges of 'etype' into nodes[i], a destination-type
 * node this partition owns) or out-degree (out of nodes[i], an owned
 * source-type node; needs the CSR).
 * Errors: GKV_EINVAL (bad etype, NULL arrays with n > 0), GKV_ERANGE (a
 * node outside the type, or owned by another partition: the message names
 * the node and its owner), GKV_ENOTSUP (out-degrees without a CSR). */
GKV_API gkv_err gkv_part_in_degrees(const gkv_part *p, int etype,
                                    const int64_t *nodes, size_t n,
                                    int64_t *deg);
GKV_API gkv_err gkv_part_out_degrees(const gkv_part *p, int etype,
                                     const int64_t *nodes, size_t n,
                                     int64_t *deg);

/* Endpoints of edges this partition owns: src[i], dst[i] of edge eids[i]
 * (type-wise IDs). O(log N) each. Errors: GKV_EINVAL, GKV_ERANGE (an edge
 * outside the type or owned by another partition, named with its owner). */
GKV_API gkv_err gkv_part_find_edges(const gkv_part *p, int etype,
                                    const int64_t *eids, size_t n,
                                    int64_t *src, int64_t *dst);

/* The in-edges of 'etype' into nodes[0..n) (owned destination-type
 * nodes): for each node in the given order, its in-edges in edge-ID order,
 * as three arrays of *m entries (source, destination, edge ID). A node given
 * twice gives its edges twice. On GKV_OK the arrays are gkv__malloc'd
 * (NULL when *m is 0) and the caller frees each with gkv_free(); on error
 * they are NULL. Errors: GKV_EINVAL, GKV_ERANGE (as in_degrees), GKV_ENOMEM. */
GKV_API gkv_err gkv_part_in_subgraph(const gkv_part *p, int etype,
                                     const int64_t *nodes, size_t n,
                                     int64_t **src, int64_t **dst,
                                     int64_t **eid, size_t *m);

/* The sgraph of this partition (gkv_sample.h): the book's schema and
 * global node counts, per edge type the partition's CSC (and CSR when the
 * config has one), borrowed. Sample the nodes this partition owns with a
 * gkv_sampler over it; the partition must outlive the sgraph. On GKV_OK
 * *out is yours until gkv_sgraph_free(); on error it is NULL.
 * Errors: GKV_EINVAL (NULL), GKV_ENOMEM. */
#ifndef GKV_SGRAPH_TYPEDEF
#define GKV_SGRAPH_TYPEDEF
typedef struct gkv_sgraph gkv_sgraph;   /* opaque (gkv_sample.h) */
#endif
GKV_API gkv_err gkv_part_sgraph(const gkv_part *p, gkv_sgraph **out);

#ifdef __cplusplus
}
#endif
#endif /* GKV_PART_H */
