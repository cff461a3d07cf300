/* gkv_graph.h - the graph layer: schema, edge lists, readers, the R-MAT
 * generator, compressed adjacency (CSC/CSR) and the small fixed graphs.
 *
 * A gkv_graph is an in-memory graph: a schema of node types and canonical
 * edge types, and per edge type a COO edge list. Everything the later parts
 * of graph/ do (partitioning, the CSC stored as kv tensors, sampling) starts
 * from one of these.
 *
 *   - A node type has a name and a count; its nodes have type-wise IDs
 *     0 .. count-1 (int64). A type declared with GKV_GRAPH_GROW has no fixed
 *     count: it grows to the largest ID seen + 1, so its IDs must be below
 *     2^63 - 1 (GKV_ERANGE otherwise).
 *   - An edge type is canonical: (src_type, relation, dst_type), written
 *     "src_type:relation:dst_type" (the form DGL's partition configs use).
 *   - A homogeneous graph is the one-type case, named as DGL names it: node
 *     type "_N", edge type ("_N", "_E", "_N").
 *   - The edges of one type are parallel arrays src[i], dst[i] (type-wise
 *     node IDs) and optional float weights w[i]; the edge ID is the index i
 *     within the type. Self-loops and parallel edges are allowed.
 *
 * Names of node types and relations: 1..GKV_TYPE_NAME_MAX bytes of printable
 * ASCII without blanks, ',', ':', '#' or '/' (they appear inside edge list
 * lines, canonical names and tensor names such as "node/user/feat").
 *
 * Errors: calls that change a graph record the detail of a failure
 * ("edges.txt:17: dst 9 is not below 5, the number of 'item' nodes") for
 * the calling thread, read back with gkv_errmsg() or gkv_graph_errmsg().
 * A failed call leaves the graph exactly as it was. Calls on a const graph
 * record nothing.
 *
 * Threads: a graph may be read (const calls, including the CSC builders)
 * by any number of threads at once; a call that changes it needs the graph
 * to itself.
 */
#ifndef GKV_GRAPH_H
#define GKV_GRAPH_H

#include <stddef.h>
#include <stdint.h>
#include "gkv_err.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GKV_TYPE_NAME_MAX  63       /* bytes in a type or relation name */
#define GKV_GRAPH_TYPES_MAX 65536   /* node types, and edge types, per graph */
#define GKV_GRAPH_GROW     (-1)     /* num_nodes: grow with the IDs seen */

typedef struct gkv_graph gkv_graph;   /* opaque: schema + COO per edge type */

/* ---- schema ---------------------------------------------------------- */

/* Makes an empty graph (no types). On GKV_OK *out is yours until
 * gkv_graph_free(); on error *out is NULL. Errors: GKV_ENOMEM. */
GKV_API gkv_err gkv_graph_new(gkv_graph **out);

/* Makes a homogeneous graph: node type "_N" with 'num_nodes' nodes (or
 * GKV_GRAPH_GROW) and edge type 0 = ("_N", "_E", "_N"), no edges yet.
 * Errors: GKV_EINVAL (num_nodes < -1), GKV_ENOMEM. */
GKV_API gkv_err gkv_graph_new_homo(gkv_graph **out, int64_t num_nodes);

/* Frees the graph and all its arrays; borrowed pointers die. NULL is fine. */
GKV_API void    gkv_graph_free(gkv_graph *g);

/* gkv_errmsg() when this thread's last gkv call was one that changed 'g',
 * else "" (so "" too when that call succeeded, and in another thread).
 * Valid until the thread's next gkv call. */
GKV_API const char *gkv_graph_errmsg(const gkv_graph *g);

/* Adds node type 'name' with 'num_nodes' nodes (>= 0, or GKV_GRAPH_GROW).
 * *ntype (may be NULL) gets its index: types are numbered in the order they
 * are added, from 0. Errors: GKV_EINVAL (bad name or count, or
 * GKV_GRAPH_TYPES_MAX reached), GKV_EEXIST, GKV_ENOMEM. */
GKV_API gkv_err gkv_graph_add_ntype(gkv_graph *g, const char *name,
                                    int64_t num_nodes, int *ntype);

/* Adds the canonical edge type (src_type, relation, dst_type); both node
 * types must exist. *etype (may be NULL) gets its index (in order added,
 * from 0). The same relation may join different type pairs.
 * Errors: GKV_ENOTFOUND (a node type), GKV_EINVAL (bad relation name, or
 * GKV_GRAPH_TYPES_MAX reached), GKV_EEXIST (that triple exists), GKV_ENOMEM. */
GKV_API gkv_err gkv_graph_add_etype(gkv_graph *g, const char *src_type,
                                    const char *relation, const char *dst_type,
                                    int *etype);

/* Fixes the node count of 'ntype' at 'num_nodes' (it no longer grows):
 * for nodes without edges past the largest ID read. 'num_nodes' must be at
 * least the current count. Errors: GKV_EINVAL (no such type), GKV_ERANGE. */
GKV_API gkv_err gkv_graph_set_num_nodes(gkv_graph *g, int ntype,
                                        int64_t num_nodes);

/* Schema queries. Thread-safe: yes. Out-of-range type indices give NULL,
 * -1 or GKV_EINVAL as stated. */
GKV_API int         gkv_graph_num_ntypes(const gkv_graph *g);
GKV_API int         gkv_graph_num_etypes(const gkv_graph *g);
/* Name of node type 'ntype'; valid until gkv_graph_free(). NULL if none. */
GKV_API const char *gkv_graph_ntype_name(const gkv_graph *g, int ntype);
/* Nodes of type 'ntype' (the current count of a growing type); -1 if none. */
GKV_API int64_t     gkv_graph_num_nodes(const gkv_graph *g, int ntype);
/* Edges of type 'etype'; -1 if none. */
GKV_API int64_t     gkv_graph_num_edges(const gkv_graph *g, int etype);
/* Index of node type 'name'. Errors: GKV_ENOTFOUND. */
GKV_API gkv_err     gkv_graph_ntype_find(const gkv_graph *g, const char *name,
                                         int *ntype);
/* Index of an edge type named canonically ("user:buys:item") or by its
 * relation alone ("buys") when no other edge type has that relation.
 * Errors: GKV_ENOTFOUND, GKV_EINVAL (a relation shared by several types). */
GKV_API gkv_err     gkv_graph_etype_find(const gkv_graph *g, const char *name,
                                         int *etype);

typedef struct gkv_etype_info {
    const char *canonical;   /* "src_type:relation:dst_type" */
    const char *relation;
    const char *src_type, *dst_type;
    int         src_ntype, dst_ntype;
    int64_t     num_edges;
    int         weighted;    /* 1 when the type has weights */
} gkv_etype_info;

/* Describes edge type 'etype'. The strings are the graph's: valid until
 * gkv_graph_free(). Errors: GKV_EINVAL (no such type). */
GKV_API gkv_err gkv_graph_etype_info(const gkv_graph *g, int etype,
                                     gkv_etype_info *out);

/* ---- edges ----------------------------------------------------------- */

/* The edges of one type, borrowed from the graph. */
typedef struct gkv_coo {
    const int64_t *src;   /* n type-wise source IDs */
    const int64_t *dst;   /* n type-wise destination IDs */
    const float   *w;     /* n weights, or NULL when the type has none */
    int64_t        n;     /* edges; edge ID i is index i */
} gkv_coo;

/* Borrows the edges of 'etype'. The arrays are valid until the next call
 * that adds edges to the graph, or gkv_graph_free(); never write or free
 * them. Thread-safe: yes. Errors: GKV_EINVAL (no such type). */
GKV_API gkv_err gkv_graph_edges(const gkv_graph *g, int etype, gkv_coo *out);

/* Appends n edges (src[i], dst[i]) to 'etype', copying them; edge IDs
 * continue from the type's current count. 'w' may be NULL. Weights are per
 * edge type: a type gets them when edges with weights are first added, its
 * earlier edges then weigh 1.0, and later edges added without weights also
 * weigh 1.0. Weights are sampling weights: finite and 0 or more (-0.0 is
 * 0). Every ID and weight is checked before anything is added: one bad
 * edge fails the call and nothing changes.
 * Errors: GKV_EINVAL (no such type, NULL arrays with n > 0), GKV_ERANGE (an
 * ID negative or not below a fixed node count; the message names the
 * index), GKV_EFORMAT (a weight NaN, infinite or negative), GKV_ENOMEM. */
GKV_API gkv_err gkv_graph_add_edges(gkv_graph *g, int etype,
                                    const int64_t *src, const int64_t *dst,
                                    const float *w, size_t n);

/* ---- readers --------------------------------------------------------- */

/* Text edge lists. One edge per line, fields in this order:
 *
 *     src dst [etype] [weight]
 *
 *   src, dst  type-wise node IDs: decimal digits, 0 <= ID < 2^63.
 *   etype     present when the caller passes etype = GKV_ETYPE_COLUMN: the
 *             edge type, canonical ("user:buys:item") or by its relation
 *             alone when that is unique ("buys").
 *   weight    present with GKV_TEXT_WEIGHT: a finite decimal float, 0 or
 *             more ("0.5", "1e-3"), read as in the C locale whatever the
 *             process's locale.
 *
 * Fields are separated by blanks (spaces, tabs), by a comma, or by a comma
 * with blanks around it, so "3 4", "3\t4", "3,4" and "3, 4" are all one
 * edge; an empty field (",," or a leading or trailing comma) is an error.
 * Quoted CSV fields are not supported (no name needs quoting). A '#' starts
 * a comment that runs to the end of the line; blank and comment-only lines
 * are skipped. CR before LF is ignored (Windows files). With
 * GKV_TEXT_HEADER the first line that is not blank or a comment is a
 * header ("src,dst") and is skipped unread. The last line needs no newline.
 * A line may hold at most GKV_TEXT_LINE_MAX bytes.
 *
 * Lines are numbered from 1 (every physical line counts). Errors, each with
 * a message "PATH:LINE: what was wrong":
 *   GKV_EFORMAT    wrong number of fields, a field that is not a number, an
 *                  empty field, a bad weight, an ambiguous relation, a line
 *                  too long;
 *   GKV_ERANGE     an ID negative, past 2^63-1, or not below the fixed count
 *                  of its node type;
 *   GKV_ENOTFOUND  an edge type the graph does not have;
 *   GKV_ENOENT, GKV_EPERM, GKV_EIO   opening or reading the file;
 *   GKV_EINVAL     a bad 'etype' or flag, a directory; GKV_ENOMEM.
 * On any error the graph is left exactly as it was: no edge of the file is
 * kept and growing node counts are restored. */
#define GKV_ETYPE_COLUMN   (-1)       /* etype: read it from the third field */
#define GKV_TEXT_WEIGHT    0x01u      /* the last field is a weight */
#define GKV_TEXT_HEADER    0x02u      /* skip the first non-comment line */
#define GKV_TEXT_LINE_MAX  4096       /* bytes in one line, newline excluded */

/* Appends the edges of text file 'path' to 'g' (whose schema must already
 * hold every type the file names). 'etype' is the type of every edge, or
 * GKV_ETYPE_COLUMN. 'path' may also be a pipe ("/dev/stdin"): the file is
 * read once, front to back. Errors: as above. */
GKV_API gkv_err gkv_graph_read_text(gkv_graph *g, const char *path, int etype,
                                    unsigned flags);

/* The same for 'len' bytes at 'buf' (need not be NUL-terminated); 'name'
 * stands for the path in messages. */
GKV_API gkv_err gkv_graph_read_text_mem(gkv_graph *g, const char *name,
                                        const void *buf, size_t len,
                                        int etype, unsigned flags);

/* Binary edge lists: file 'path' holds edges of type 'etype' as
 * little-endian int64 pairs (src, dst), 16 bytes per edge, nothing else.
 * 'weight_path' (may be NULL) holds one little-endian float32 per edge, in
 * the same order. Errors, with a message naming the file and, for a bad
 * edge, its index and byte offset:
 *   GKV_EFORMAT    a size that is not a multiple of 8 (a partial int64), an
 *                  odd number of int64 values (the last edge has no dst), a
 *                  weight file whose size is not 4 per edge, a NaN,
 *                  infinite or negative weight;
 *   GKV_ERANGE     an ID negative or not below a fixed node count;
 *   GKV_ENOENT, GKV_EPERM, GKV_EIO; GKV_EINVAL (no such type, or not a
 *   regular file); GKV_ENOMEM.
 * On any error the graph is left exactly as it was. */
GKV_API gkv_err gkv_graph_read_binary(gkv_graph *g, int etype,
                                      const char *path,
                                      const char *weight_path);

/* ---- R-MAT generator ------------------------------------------------- */

/* Graph500-style R-MAT (Chakrabarti, Zhan, Faloutsos 2004; the Graph500
 * Kronecker generator): 2^scale nodes and edge_factor * 2^scale directed
 * edges. Each edge descends 'scale' levels of the adjacency matrix,
 * choosing the top-left quadrant with probability a, top-right (src bit 0,
 * dst bit 1) b, bottom-left c and bottom-right d = 1 - a - b - c; the first
 * level gives the top bit of the IDs. No noise is added to a, b, c.
 *
 * Counter-based: edge i's endpoints are a pure function of (seed, i, the
 * spec), computed with 64-bit integer arithmetic only, so edges can be made
 * in any chunks, on any number of threads, on any machine, and come out the
 * same. Edges are independent, so their order is already random (Graph500's
 * edge shuffle would change nothing).
 *
 * Unless GKV_RMAT_NO_PERMUTE is set, node IDs are relabelled by a seeded
 * bijection of [0, 2^scale) (Graph500's vertex permutation), so that degree
 * does not correlate with ID. Self-loops and duplicate edges are kept, as
 * Graph500 keeps them; at scale 20 with edge factor 16 about 4% of edges
 * are duplicates or loops.
 *
 * Zero-initialise the spec, then set scale and seed: edge_factor 0 means 16
 * and a = b = c = 0 means 0.57, 0.19, 0.19 (d = 0.05). */
#define GKV_RMAT_NO_PERMUTE  0x01u
#define GKV_RMAT_SCALE_MAX   40

typedef struct gkv_rmat_spec {
    int      scale;        /* 0..GKV_RMAT_SCALE_MAX: 2^scale nodes */
    int64_t  edge_factor;  /* edges per node; 0 = 16 */
    uint64_t seed;
    double   a, b, c;      /* quadrant probabilities; all 0 = Graph500's */
    unsigned flags;        /* GKV_RMAT_* */
} gkv_rmat_spec;

/* Writes edges [first, first + n) of the R-MAT graph to src[0..n) and
 * dst[0..n). Thread-safe: yes (a pure function). Scale 20, edge factor 16
 * (16 M edges) takes about 1.5 s on one core of the 2-core dev VM.
 * Errors: GKV_EINVAL (bad spec: scale out of range, a probability negative,
 * a + b + c > 1, edge_factor < 0, more than 2^62 edges; or a range past the
 * last edge). */
GKV_API gkv_err gkv_rmat_edges(const gkv_rmat_spec *sp, int64_t first,
                               int64_t n, int64_t *src, int64_t *dst);

/* The label that R-MAT node v (0 <= v < 2^scale) gets: the vertex
 * permutation, or v itself with GKV_RMAT_NO_PERMUTE. -1 for a bad spec or
 * v out of range. Thread-safe: yes. */
GKV_API int64_t gkv_rmat_vertex(const gkv_rmat_spec *sp, int64_t v);

/* Makes the homogeneous graph of the spec (2^scale nodes, fixed) on
 * 'nthreads' threads (0 or 1: the calling thread only). The result is the
 * same for any nthreads. On GKV_OK *out is yours until gkv_graph_free(); on
 * error *out is NULL. Errors: GKV_EINVAL (bad spec), GKV_ENOMEM. */
GKV_API gkv_err gkv_rmat_graph(gkv_graph **out, const gkv_rmat_spec *sp,
                               int nthreads);

/* ---- compressed adjacency -------------------------------------------- */

/* Edges grouped by one endpoint. For CSC (in-edges) the columns are the
 * destination nodes and indices holds sources; for CSR (out-edges) the
 * columns are the sources and indices holds destinations. The edges of
 * column v are positions indptr[v] .. indptr[v+1]-1, in input order (the
 * sort is stable). The struct and its arrays are the caller's; free them
 * with gkv_csc_free(). */
typedef struct gkv_csc {
    int64_t  num_cols;   /* nodes indexed: dst nodes (CSC) or src (CSR) */
    int64_t  num_edges;
    int64_t *indptr;     /* num_cols + 1 offsets, indptr[0] = 0 */
    int64_t *indices;    /* num_edges: the other endpoint of each edge */
    int64_t *eids;       /* num_edges: the edge's ID */
} gkv_csc;

/* Groups n edges by col[i] (each in [0, num_cols)): edge i goes to column
 * col[i] with indices = other[i] and eids = eid[i] (or i when 'eid' is
 * NULL). A stable counting sort, O(num_cols + n), on up to 'nthreads'
 * threads (0 or 1: the calling thread; more are used only for large inputs;
 * the result is the same for any number). On error *out is zeroed and
 * nothing needs freeing. Thread-safe: yes.
 * Errors: GKV_EINVAL (num_cols < 0, NULL arrays with n > 0), GKV_ERANGE (a
 * col outside [0, num_cols)), GKV_ENOMEM. */
GKV_API gkv_err gkv_csc_build(gkv_csc *out, const int64_t *col,
                              const int64_t *other, const int64_t *eid,
                              size_t n, int64_t num_cols, int nthreads);

/* CSC (in-edges, columns = dst nodes) and CSR (out-edges, columns = src
 * nodes) of edge type 'etype'; eids are the type's edge IDs. As
 * gkv_csc_build(). Errors: GKV_EINVAL (no such type), GKV_ENOMEM. */
GKV_API gkv_err gkv_graph_csc(const gkv_graph *g, int etype, int nthreads,
                              gkv_csc *out);
GKV_API gkv_err gkv_graph_csr(const gkv_graph *g, int etype, int nthreads,
                              gkv_csc *out);

/* Frees the arrays of 'a' and zeroes it. NULL and a zeroed struct are fine. */
GKV_API void gkv_csc_free(gkv_csc *a);

/* One edge type's adjacency over a range of columns, borrowed: how the
 * sampler and the partition queries read a CSC (or CSR) whether it was built
 * in memory from a whole graph or loaded from one partition's store.
 *   CSC: columns are destination nodes, indices hold source nodes.
 *   CSR: columns are source nodes, indices hold destination nodes.
 * Column c (col_lo <= c < col_hi, a type-wise node ID) owns positions
 * indptr[c - col_lo] .. indptr[c - col_lo + 1] - 1. All IDs are global
 * (type-wise) IDs. 'eids' NULL means position k holds edge eid_lo + k (a
 * partition's CSC, whose edges are numbered in CSC order). */
typedef struct gkv_adj {
    int64_t        col_lo, col_hi;  /* columns covered: [col_lo, col_hi) */
    const int64_t *indptr;          /* col_hi - col_lo + 1 offsets, [0] = 0 */
    const int64_t *indices;         /* indptr[col_hi - col_lo] other ends */
    const int64_t *eids;            /* edge ID per position, or NULL */
    int64_t        eid_lo;          /* with eids NULL: ID of position 0 */
    const float   *w;               /* weight per position, or NULL */
} gkv_adj;

/* ---- the small fixed graphs ------------------------------------------ */

/* Two graphs with hand-checked answers, for tests and examples. Each call
 * makes a new graph: on GKV_OK *out is yours until gkv_graph_free(); on
 * error (GKV_ENOMEM) *out is NULL.
 *
 * gkv_graph_fixed_hetero(): node types 0 "user" (4 nodes), 1 "item" (5).
 *
 *   etype 0 "user:follows:user"      etype 1 "user:buys:item" (weighted)
 *     eid  src -> dst                  eid  src -> dst   w
 *      0    0  ->  1                    0    0  ->  0   1.0
 *      1    0  ->  2                    1    0  ->  1   2.0
 *      2    1  ->  2                    2    1  ->  1   1.0
 *      3    2  ->  0                    3    1  ->  3   3.0
 *      4    3  ->  0                    4    2  ->  1   1.0
 *      5    3  ->  2                    5    2  ->  4   2.0
 *                                       6    3  ->  1   4.0
 *   etype 2 "item:similar:item"
 *     eid  src -> dst            follows:  u0 -> u1, u0 -> u2, u1 -> u2,
 *      0    0  ->  1                       u2 -> u0, u3 -> u0, u3 -> u2
 *      1    1  ->  0             buys:     u0 => i0 i1;  u1 => i1 i3;
 *      2    1  ->  2                       u2 => i1 i4;  u3 => i1
 *      3    3  ->  4             similar:  i0 <-> i1 -> i2,  i3 <-> i4
 *      4    4  ->  3
 *
 *   In-edges (CSC), per dst: (src, eid) in edge-ID order
 *     follows  u0: (2,3) (3,4)   u1: (0,0)   u2: (0,1) (1,2) (3,5)   u3: -
 *     buys     i0: (0,0)   i1: (0,1) (1,2) (2,4) (3,6)   i2: -
 *              i3: (1,3)   i4: (2,5)
 *     similar  i0: (1,1)   i1: (0,0)   i2: (1,2)   i3: (4,4)   i4: (3,3)
 *   So user 3 has no in-edges of any type, item 2 no buyers, and item 1 is
 *   bought by every user, with weights 2, 1, 1, 4.
 *
 * gkv_graph_fixed_homo(): "_N" with 8 nodes, "_N:_E:_N" with 14 weighted
 * edges; e5 is parallel to e3, e7 a self-loop, e12 weighs 0 (never drawn by
 * a weighted sampler), node 7 has no edges at all, node 6 only out-edges.
 *
 *     eid  src -> dst   w           eid  src -> dst   w
 *      0    0  ->  1   1.0            7    5  ->  5   1.0
 *      1    0  ->  2   2.0            8    6  ->  0   2.0
 *      2    1  ->  2   1.0            9    1  ->  4   1.0
 *      3    2  ->  3   0.5           10    3  ->  4   1.0
 *      4    3  ->  0   1.0           11    6  ->  5   4.0
 *      5    2  ->  3   0.5           12    4  ->  1   0.0
 *      6    4  ->  3   3.0           13    0  ->  3   2.0
 *
 *   In-edges (CSC), per dst: (src, eid) in edge-ID order
 *     0: (3,4) (6,8)      1: (0,0) (4,12)     2: (0,1) (1,2)
 *     3: (2,3) (2,5) (4,6) (0,13)             4: (1,9) (3,10)
 *     5: (5,7) (6,11)     6: -                7: -
 *   Out-edges (CSR), per src: (dst, eid)
 *     0: (1,0) (2,1) (3,13)                   1: (2,2) (4,9)
 *     2: (3,3) (3,5)      3: (0,4) (4,10)     4: (3,6) (1,12)
 *     5: (5,7)            6: (0,8) (5,11)     7: -
 *   In-degrees 0..7: 2 2 2 4 2 2 0 0; out-degrees 0..7: 3 2 2 2 2 1 2 0.
 */
GKV_API gkv_err gkv_graph_fixed_hetero(gkv_graph **out);
GKV_API gkv_err gkv_graph_fixed_homo(gkv_graph **out);

#ifdef __cplusplus
}
#endif
#endif /* GKV_GRAPH_H */
