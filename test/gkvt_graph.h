/* gkvt_graph.h - graphs for the sampling tests: the user/item graph,
 * partitioned, the whole graph in the partitions' IDs, and comparisons of
 * sampling results. */
#ifndef GKVT_GRAPH_H
#define GKVT_GRAPH_H
#include "gkvt.h"

/* The user/item graph: node types 0 "user" and 1 "item"; edge types 0
 * user:follows:user (8 per user), 1 user:clicks:item and 2
 * item:clicked_by:user (each 4 per user; the clicks reversed). */
#define GKVT_UI_USERS   1024
#define GKVT_UI_ITEMS   300
#define GKVT_UI_FOLLOWS (8 * GKVT_UI_USERS)
#define GKVT_UI_CLICKS  (4 * GKVT_UI_USERS)
/* gkvt_ui_rel[e]: etype e's source type, relation and destination type. */
extern const char *const gkvt_ui_rel[3][3];
/* gkvt_ui_canon[e]: etype e's canonical name ("user:follows:user"). */
extern const char *const gkvt_ui_canon[3];

/* Seeds of both node types of the user/item graph: 200 distinct users
 * and 60 distinct items, varied by k. */
struct gkvt_ui_seeds {
    int64_t us[200], is[60];
    const int64_t *sv[2];            /* us, is */
    size_t ns[2];                    /* 200, 60 */
};
void gkvt_ui_seeds_make(struct gkvt_ui_seeds *s, int k);

/* The user/item graph from R-MAT edges of scale 10 ('seed'): follows are
 * its edges, clicks the first GKVT_UI_CLICKS of them with the destination
 * taken modulo GKVT_UI_ITEMS. With 'weighted', follow i weighs
 * i % 3 + 0.5. The caller frees it. */
gkv_graph *gkvt_ui_graph(uint64_t seed, int weighted);

/* An int64 mapping file of n entries (a partition book's node or edge
 * mapping) as a malloc'd array. */
int64_t *gkvt_read_map(const char *path, int64_t n);

/* Writes g to DIR/parts_dir as partition config 'name' (random, nparts
 * parts, seed, with the CSR and nfeats features pf); json (cap bytes) gets
 * the config's path. */
void gkvt_partition(const gkv_graph *g, const char *dir, const char *parts_dir,
                    const char *name, int nparts, uint64_t seed,
                    const gkv_part_feat *pf, size_t nfeats, char *json,
                    size_t cap);

/* The user/item graph partitioned by gkvt_partition() (which gives
 * gkv_partition_write() its clicks and clicked_by as a reverse pair): the
 * reverse of click c in the new IDs, rev[c], a clicked_by edge; malloc'd
 * (GKVT_UI_CLICKS entries), from b's mapping files. */
int64_t *gkvt_ui_reverse(const gkv_pbook *b);

/* g in the new IDs of partition book b: every node and edge at its
 * mapped ID, with g's weights. emap[e] (emap may be NULL) gets etype e's
 * edge mapping (original edge ID -> new), nmap[t] (nmap may be NULL) node
 * type t's; malloc'd, the caller frees them and the graph. */
gkv_graph *gkvt_graph_renumber(const gkv_graph *g, const gkv_pbook *b,
                               int64_t **emap, int64_t **nmap);

/* 1 when edges a[0..net) and b[0..net) hold the same arrays, else 0. */
int gkvt_edges_same(const gkv_sample_edges *a, const gkv_sample_edges *b,
                    int net);
/* 1 when blocks a[0..nl) and b[0..nl) (host memory) hold the same arrays,
 * type by type, else 0. */
int gkvt_blocks_same(const gkv_block *a, const gkv_block *b, int nl);

/* ---- samplers on small graphs ---- */
/* The fixed homogeneous (hetero 0) or heterogeneous graph as a sampling
 * graph with 'flags' (GKV_SG_*); the caller frees it. */
gkv_sgraph *gkvt_sg_fixed(int hetero, unsigned flags);
/* A sampler of sg with nt threads; the caller frees it. */
gkv_sampler *gkvt_sampler(const gkv_sgraph *sg, int nt);
/* One-type seeds as the per-type arrays want them. */
struct gkvt_seeds1 {
    const int64_t *p[1];
    size_t n[1];
};
/* The seeds v[0..n) as the only node type's. */
struct gkvt_seeds1 gkvt_one(const int64_t *v, size_t n);
/* An R-MAT spec of 2^scale nodes, seed and flags, every other field 0
 * (the defaults). */
gkv_rmat_spec gkvt_rmat_spec(int scale, uint64_t seed, unsigned flags);
/* An unweighted R-MAT graph of gkvt_rmat_spec(scale, seed, 0); the caller
 * frees it. */
gkv_graph *gkvt_rmat(int scale, uint64_t seed);
/* A random permutation of [0, N) (malloc'd, N entries): its first n are n
 * distinct seeds. */
int64_t *gkvt_distinct_seeds(int64_t N, uint64_t *st);

/* ---- the in-process reference of the graph-server tests ---- */
/* The whole graph a test's partitions were made from, in their new IDs,
 * and an in-process sampler on it: what the servers' answers are compared
 * with (net_graph_test, net_prob_test, net_client_mem_test). */
struct gkvt_ref {
    gkv_graph *whole;
    gkv_sgraph *wsg;         /* of whole, with the CSR too */
    gkv_sampler *ws;         /* one thread on wsg */
    int64_t *rev;            /* hetero: click -> its clicked_by, new IDs */
};
/* Makes r->wsg and r->ws from r->whole. */
void gkvt_ref_sampler(struct gkvt_ref *r);
/* Frees what r holds (NULLs are fine) and zeroes it. */
void gkvt_ref_free(struct gkvt_ref *r);

/* ---- edge features of the user/item graph ---- */
/* A feature of edge type et: its values by original edge ID, and as
 * floats by new edge ID, what the in-process reference gets as edge_w
 * (net_prob_test, net_client_mem_test). */
struct gkvt_efeat {
    const char *name;
    int et;
    gkv_dtype dt;
    unsigned ndim;            /* 0: a value an edge; 1: rows of shape0 */
    uint64_t shape0;
    void *orig;               /* [n] (rows) of dt, by original edge ID */
    float *w;                 /* [n] by new edge ID */
};
/* Makes t for n edges (w zeroed): every element of edge i's row is one
 * value from a hash of i, et and name[0]: F32 (h % 5) * 0.75, F64
 * (h % 7) / 3, F16 (h % 6) * 0.3, I32 h % 4, U8 h % 5 < 2. */
void  gkvt_efeat_make(struct gkvt_efeat *t, const char *name, int et,
                      gkv_dtype dt, unsigned ndim, uint64_t shape0,
                      int64_t n);
/* Element 0 of original edge i's row as a float (as a server makes it). */
float gkvt_efeat_float(const struct gkvt_efeat *t, int64_t i);
/* Frees orig and w (NULLs are fine). */
void  gkvt_efeat_free(struct gkvt_efeat *t);
/* The user/item graph g with edge features ft[0..nft), partitioned by
 * gkvt_partition(g, dir, "parts", "p", 2, 5, ...) (json, cap: the
 * config's path); then from its book: emap[e] (malloc'd, the caller frees
 * them), every ft[i].w, and ref's whole graph, reverse map and sampler. */
void  gkvt_ui_partition_efeats(const gkv_graph *g, const char *dir,
                               struct gkvt_efeat *ft, int nft, char *json,
                               size_t cap, struct gkvt_ref *ref,
                               int64_t *emap[3]);
/* Frees what gkvt_ui_partition_efeats() made, and ft[0..nft). */
void  gkvt_ui_efeats_free(struct gkvt_ref *ref, int64_t *emap[3],
                          struct gkvt_efeat *ft, int nft);

/* ---- checks of graphs and CSC arrays ---- */
/* Edge type et of g holds exactly the edges s[i] -> d[i], i < n, in that
 * order, with weights w (NULL: none). */
void gkvt_expect_coo(const gkv_graph *g, int et, const int64_t *s,
                     const int64_t *d, const float *w, size_t n);
/* CSC a of n edges other[j] in column col[j] (edge ID eid[j], or j when
 * eid is NULL) over ncols columns holds each edge once, the columns in
 * order and each column's edges in their order (a reference qsort). */
void gkvt_csc_check(const gkv_csc *a, const int64_t *col,
                    const int64_t *other, const int64_t *eid, size_t n,
                    int64_t ncols);

/* ---- copies of blocks ---- */
/* A deep copy of blocks (at most 8 layers of 4 node and 4 edge types), to
 * compare results of different calls. */
struct gkvt_bcopy {
    int nl, nnt, net;
    int64_t *ids[8][4];
    size_t nsrc[8][4], ndst[8][4];
    int64_t *es[8][4], *ed[8][4], *ee[8][4];
    size_t ne[8][4];
};

/* A malloc'd copy of p[0..n) (one byte more, so never NULL for n = 0). */
int64_t *gkvt_dup64(const int64_t *p, size_t n);
/* Copies the nl blocks b into c. */
void gkvt_bcopy_take(struct gkvt_bcopy *c, const gkv_block *b, int nl);
/* Frees what gkvt_bcopy_take allocated. */
void gkvt_bcopy_free(struct gkvt_bcopy *c);
/* 1 if the blocks b equal the copy c exactly, else 0. */
int  gkvt_bcopy_same(const struct gkvt_bcopy *c, const gkv_block *b);

#endif
