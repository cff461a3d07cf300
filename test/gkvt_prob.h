/* gkvt_prob.h - the net_prob tests' fixture: the user/item graph
 * (gkvt_graph.h) with edge features of several dtypes, partitioned in two
 * and served by gkv-server processes on loopback (gkvt_net.h), and
 * comparisons of client sampling by feature name (edge_w_feat) with
 * in-process sampling given the same values as edge_w arrays. Shared by
 * net_prob_test, net_prob_push_test and net_prob_arrays_test. */
#ifndef GKVT_PROB_H
#define GKVT_PROB_H
#include "gkvt.h"
#include "gkvt_graph.h"
#include "gkvt_net.h"

#define GKVT_PROB_PROCS 8    /* processes a test may start */
#define GKVT_PROB_NFEAT 8    /* features a test may add */

/* One test's servers, graph, features and references. */
struct gkvt_prob {
    struct gkvt_job j;        /* first (gkvt_job_setup): the servers, of
                               * partition config j.json */
    int64_t ne[3];
    int64_t *emap[3];         /* original edge ID -> new */
    struct gkvt_efeat ft[GKVT_PROB_NFEAT];
    int nft;
    struct gkvt_ref ref;     /* the whole graph, in new IDs */
    gkv_part *part[2];
};

/* A cmocka setup: *state gets a new zeroed gkvt_prob whose servers run
 * with three threads and --nosync; a port clash forgets the servers it
 * killed. */
int  gkvt_prob_setup(void **state);
/* Its teardown: kills and reaps the servers (-1 when a log holds a
 * sanitizer report), closes the partitions, frees the features. */
int  gkvt_prob_teardown(void **state);
/* nserv servers on each of the two machines, with extra arguments. */
void gkvt_prob_serve(struct gkvt_prob *f, int nserv, const char *const *extra);
/* A client of group "prob" as 'rank' with a 20 s timeout. */
gkv_client *gkvt_prob_client(struct gkvt_prob *f, uint32_t rank);
/* Adds feature 'name' of etype et (gkvt_efeat_make). */
struct gkvt_efeat *gkvt_prob_feat_add(struct gkvt_prob *f, const char *name,
                                      int et, gkv_dtype dt, unsigned ndim,
                                      uint64_t shape0);
/* Feature 'name' of etype et; a cmocka failure when there is none. */
const struct gkvt_efeat *gkvt_prob_feat_get(const struct gkvt_prob *f, int et,
                                            const char *name);
/* The user/item graph, its features (w, cnt, wide on follows; mask, h on
 * clicks; w64 on their reverses), two partitions, the references. */
void gkvt_prob_graph_make(struct gkvt_prob *f);

/* ---- comparisons ---- */

/* In-process options with the features' values as edge_w arrays. */
struct gkvt_wopts {
    gkv_sample_opts o;
    const float *ew[3];
    int64_t len[3];
};

/* Test-only bits beside GKV_SAMPLE_* in 'flags': sample out-edges; give
 * the client the in-process options (edge_w arrays) instead of names. */
#define GKVT_PROB_OUT 0x10000u
#define GKVT_PROB_ARR 0x20000u

/* The in-process options *w for seed and flags (GKV_SAMPLE_*,
 * GKVT_PROB_OUT), with the values of the features names[e] (NULL, or a
 * NULL entry: uniform) as edge_w arrays. */
void gkvt_prob_wopts(const struct gkvt_prob *f, struct gkvt_wopts *w,
                     const char *const *names, uint64_t seed, unsigned flags);
/* The client's options *oc (the features by name, or with GKVT_PROB_ARR
 * the in-process options) and the in-process ones in *w (the values as
 * edge_w arrays), for seed and flags (GKV_SAMPLE_*, GKVT_PROB_OUT,
 * GKVT_PROB_ARR). */
void gkvt_prob_opts_pair(const struct gkvt_prob *f, gkv_sample_opts *oc,
                         struct gkvt_wopts *w, const char *const *names,
                         uint64_t seed, unsigned flags);

/* A deep copy of heterogeneous blocks (at most 4 layers of 2 node and 3
 * edge types): b[0..nl) are blocks gkvt_blocks_same can compare. */
struct gkvt_hcopy {
    int nl;
    gkv_block b[4];
    gkv_block_nodes nodes[4][2];
    gkv_sample_edges edges[4][3];
};

/* Copies the nl blocks b into h. */
void gkvt_hcopy_take(struct gkvt_hcopy *h, const gkv_block *b, int nl);
/* Frees what gkvt_hcopy_take allocated. */
void gkvt_hcopy_free(struct gkvt_hcopy *h);
/* The edges of the nl blocks b, all edge types. */
size_t gkvt_block_edges(const gkv_block *b, int nl);
/* Client blocks with options oc == in-process blocks with options ow
 * (left in wb), and some edges. */
void gkvt_prob_same_blocks(struct gkvt_prob *f, gkv_client *c,
                           const struct gkvt_ui_seeds *sd,
                           const gkv_sample_opts *oc,
                           const gkv_sample_opts *ow, const int *fan, int nl,
                           gkv_block *wb);
/* Client blocks with edge_w_feat = names == in-process blocks with the
 * values as edge_w; *differs set when they also differ from uniform. */
void gkvt_prob_check_blocks(struct gkvt_prob *f, gkv_client *c,
                            const struct gkvt_ui_seeds *sd,
                            const char *const *names, const int *fan, int nl,
                            uint64_t seed, unsigned flags, int *differs);
/* A client hop with edge_w_feat = names over nus users i * umul % umod
 * and nis items i * imul % GKVT_UI_ITEMS (with repeats) == in-process
 * gkv_sample_neighbors with the values as edge_w, on layer 2 (flags may
 * hold GKVT_PROB_OUT and GKVT_PROB_ARR). */
void gkvt_prob_check_hop(struct gkvt_prob *f, gkv_client *c, size_t nus,
                         int64_t umul, int64_t umod, size_t nis, int64_t imul,
                         const char *const *names, const int *fan,
                         uint64_t seed, unsigned flags);
/* A client edge batch of 100 clicks (edge IDs i * mul + add, reverses
 * excluded, num_neg negatives each) with edge_w_feat = names == the
 * in-process one with the values as edge_w: pairs and blocks. */
void gkvt_prob_check_edge_batch(struct gkvt_prob *f, gkv_client *c,
                                const char *const *names, int64_t mul,
                                int64_t add, int num_neg, uint64_t seed,
                                unsigned flags);

#endif
