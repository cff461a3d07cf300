/* gkvt_ngraph.h - the net_graph tests' fixture: a weighted R-MAT graph with
 * a node feature, partitioned (gkv_partition_write) and served by
 * gkv-server processes on loopback (--part-config, gkvt_net.h), and
 * comparisons of the client's distributed calls with in-process references
 * (the whole renumbered graph, each partition opened read-only). Shared by
 * net_graph_test (and its emulated-GPU build), net_graph_sample_test,
 * net_graph_bad_test and net_graph_batch_test. */
#ifndef GKVT_NGRAPH_H
#define GKVT_NGRAPH_H
#include "gkvt.h"
#include "gkvt_graph.h"
#include "gkvt_net.h"

#define GKVT_NG_PROCS  12    /* processes a test may start */
#define GKVT_NG_FEAT_W 4     /* floats per node feature row */

/* One test's servers, graph and references. */
struct gkvt_ng {
    struct gkvt_job j;       /* first (gkvt_job_setup): the servers, of
                              * partition config j.json */
    /* the graph */
    int64_t n, m;
    float *feat;             /* n x GKVT_NG_FEAT_W, by original ID */
    int64_t *nmap;           /* original node ID -> new */
    struct gkvt_ref ref;     /* the whole graph, in new IDs */
    gkv_part *part[4];       /* opened in-process, read-only */
};

/* gkvt_ng_graph_make's partition method (GKV_PART_RANDOM unless a test
 * sets another and back). */
extern gkv_part_method gkvt_ng_method;
/* gkvt_ng_serve's extra server arguments (NULL-terminated; NULL: none). */
extern const char *const *gkvt_ng_extra;

/* A cmocka setup: *state gets a new zeroed gkvt_ng whose servers run with
 * --nosync; a port clash forgets the servers it killed. */
int  gkvt_ng_setup(void **state);
/* Its teardown: kills and reaps the servers (-1 when a log holds a
 * sanitizer report), closes the references and partitions. */
int  gkvt_ng_teardown(void **state);
/* nserv servers on each of the graph's machines, with gkvt_ng_extra. */
void gkvt_ng_serve(struct gkvt_ng *f, int nserv);
/* A client of 'group' as rank 0 with a 20 s timeout. */
gkv_client *gkvt_ng_client(struct gkvt_ng *f, const char *group);
/* Builds an R-MAT graph (2^scale nodes, weights, a feature), partitions it
 * into nparts (with the CSR) and opens the references: the whole graph in
 * the new IDs with its sampler, and every partition in-process. */
void gkvt_ng_graph_make(struct gkvt_ng *f, int scale, int nparts);

/* ---- comparisons ---- */

/* A deep copy of homogeneous blocks (the sampler reuses its memory). */
struct gkvt_ng_bcopy {
    int nl;
    size_t nsrc[8], ndst[8], ne[8];
    int64_t *ids[8], *s[8], *d[8], *e[8];
};

/* Copies the nl blocks b (one node and one edge type) into bc. */
void gkvt_ng_bcopy_take(struct gkvt_ng_bcopy *bc, const gkv_block *b, int nl);
/* Frees what gkvt_ng_bcopy_take allocated. */
void gkvt_ng_bcopy_free(struct gkvt_ng_bcopy *bc);
/* Array p[0..n) as host memory: p itself, or (dev: p is device memory)
 * copied into tmp. */
const int64_t *gkvt_ng_host_view(const int64_t *p, size_t n, int dev,
                                 int64_t *tmp);
/* Blocks cb[0 .. nl) == the copy ref, array by array (the arrays are host
 * memory, or device memory when dev); returns the number of edges
 * compared. */
size_t gkvt_ng_blocks_equal(const struct gkvt_ng_bcopy *ref,
                            const gkv_block *cb, int nl, int dev);
/* The in-process blocks on the whole graph, copied. */
void gkvt_ng_ref_blocks(struct gkvt_ng *f, struct gkvt_ng_bcopy *ref,
                        const int64_t *seeds, size_t n, const int *fan, int nl,
                        const gkv_sample_opts *o);
/* Distributed blocks == in-process blocks, array by array; returns the
 * number of edges compared. */
size_t gkvt_ng_check_blocks(struct gkvt_ng *f, gkv_client *c,
                            const int64_t *seeds, size_t n, const int *fan,
                            int nl, const gkv_sample_opts *o);
/* Distributed one hop == in-process one hop (seeds may repeat). */
void gkvt_ng_check_hop(struct gkvt_ng *f, gkv_client *c, const int64_t *seeds,
                       size_t n, int fan, int layer, const gkv_sample_opts *o);
/* The partition that owns node v (edge v when 'edge'). */
int  gkvt_ng_owner_of(struct gkvt_ng *f, int64_t v, int edge);
/* find_edges, degrees, in_subgraph == gkv_part_* on the owner. */
void gkvt_ng_check_queries(struct gkvt_ng *f, gkv_client *c,
                           const int64_t *nodes, size_t n,
                           const int64_t *eids, size_t ne);
/* inv[v]: the original ID of new node v (malloc'd). */
int64_t *gkvt_ng_inverse_map(const struct gkvt_ng *f);
/* Pulled feature rows == the original rows of the nodes' old IDs. */
void gkvt_ng_check_features(struct gkvt_ng *f, gkv_client *c,
                            const int64_t *nodes, size_t n);

#endif
