/* graph_seam.h - the seam between graph/ and net/: the few graph/
 * internals that net/'s client and server share with graph/ (and that the
 * tests call), so that both sides of a remote call judge and sample alike.
 * For net/ and the tests only: not installed, not public API, and graph/
 * may change them together with their net/ callers. Everything else of
 * graph/'s is in graph/graph_int.h, which no other layer includes. */
#ifndef GRAPH_SEAM_H
#define GRAPH_SEAM_H

#include <stddef.h>
#include <stdint.h>
#include "kv/gkv_err.h"
#include "graph/gkv_sample.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Edge mini-batches, shared by gkv_sample_edge_batch() and
 * gkv_client_sample_edge_batch() so both judge a spec alike: the checks of
 * a spec on a graph of num_etypes edge types (GKV_EINVAL), and the reverse
 * edge of each positive edge into out[0 .. sp->n) by GKV_EXCLUDE_REVERSE's
 * rules (GKV_ERANGE). A failure's detail goes to msg[0 .. cap). On a
 * partitioned graph (renumbered edge IDs) a spec without reverse_eids takes
 * the reverses from the partitioner's reverse_eid feature: 'stored' holds
 * its rows for sp->eids; NULL elsewhere (edge eid of the reverse type).
 * graph__eb_stored_name() writes that feature's tensor name for the
 * positive edges' canonical type 'canon' (0, or -1 when it does not fit),
 * graph__eb_no_stored() the error for a partitioned graph without it. */
struct gkv_edge_batch_spec;
gkv_err graph__eb_check(const struct gkv_edge_batch_spec *sp, int num_etypes,
                        char *msg, size_t cap);
gkv_err graph__eb_reverse(const struct gkv_edge_batch_spec *sp,
                          const int64_t *stored, int64_t *out, char *msg,
                          size_t cap);
int     graph__eb_stored_name(char *buf, size_t cap, const char *canon);
gkv_err graph__eb_no_stored(const char *canon, const char *rev_canon,
                            char *msg, size_t cap);
/* The error for a spec whose reverse_etype is not the one the stored
 * reverse_eid of 'canon' was made for ('paired'). */
gkv_err graph__eb_wrong_pair(const char *canon, const char *paired,
                             const char *given, char *msg, size_t cap);

/* Sampling weights given by position, for one edge type: the k-th
 * non-excluded edge (in adjacency order) of frontier node i has weight
 * w[off[i] + k]; off has one entry per seed of the type the hop centres
 * on, plus one. off NULL: this type is not weighted this way. */
typedef struct graph__wpos {
    const int64_t *off;
    const float   *w;
} graph__wpos;

/* gkv_sample_neighbors() with wp[e] (per edge type; wp may be NULL) as
 * the weights of the etypes whose off is set. A node whose count of
 * weights differs from its count of non-excluded edges fails with
 * GKV_EINVAL; so do such an etype with GKV_SAMPLE_WEIGHTED or an edge_w
 * array, and weights that are negative, NaN or infinite. A graph server
 * samples out-edges by an edge feature this way: the feature rows live
 * with the edges' owners, so the client fetches them for the edges a
 * fanout -1 hop lists, in that order, and sends them with the seeds.
 * When cnt (per edge type) and cnt[e] are not NULL it also writes each
 * seed's number of picks of edge type e: cnt[e][i] for seed i of the type
 * the hop centres on (0 for a type the hop does not sample). A server
 * packs its reply by these counts: a seed given twice in a row cannot be
 * told apart by the edges alone. */
gkv_err graph__sample_hop(gkv_sampler *s, const int64_t *const *seeds,
                          const size_t *nseeds, const int *fanout, int nfan,
                          int layer, const gkv_sample_opts *opts,
                          const graph__wpos *wp, int64_t *const *cnt,
                          gkv_sample_edges *out);

#ifdef __cplusplus
}
#endif
#endif /* GRAPH_SEAM_H */
