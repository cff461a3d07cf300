/* graph_int.h - private declarations shared by the files of graph/ (and by
 * the tests, which link the static library). Not installed. */
#ifndef GRAPH_INT_H
#define GRAPH_INT_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include "gkv_graph.h"
#include "gkv_sample.h"
#include "kv_int.h"     /* gkv__malloc and friends */

#define GRAPH_MSG_MAX 512

struct graph_ntype {
    char    nt_name[GKV_TYPE_NAME_MAX + 1];
    int64_t nt_count;     /* nodes; IDs are [0, nt_count) */
    int     nt_grow;      /* 1: nt_count follows the largest ID seen + 1 */
};

struct graph_etype {
    char     et_rel[GKV_TYPE_NAME_MAX + 1];
    char     et_canon[3 * GKV_TYPE_NAME_MAX + 3];   /* "src:rel:dst" */
    int      et_src, et_dst;     /* node type indices */
    int      et_rel_unique;      /* 1: no other etype has this relation */
    int64_t  et_n;               /* edges in use */
    int64_t  et_cap;             /* edges allocated in each array */
    int64_t *et_srcv, *et_dstv;  /* et_cap each */
    float   *et_w;               /* et_cap, or NULL: unweighted */
};

struct gkv_graph {
    int g_nnt, g_net;                 /* types in use */
    int g_ntcap, g_etcap;             /* types allocated */
    struct graph_ntype *g_nt;
    struct graph_etype *g_et;
    char g_msg[GRAPH_MSG_MAX];        /* detail of the last failed change */
};

/* Records 'fmt' as g's message and returns 'rc'. */
gkv_err graph__fail(gkv_graph *g, gkv_err rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Clears g's message (at the start of every call that changes g). */
void    graph__clear(gkv_graph *g);

/* Makes room for 'extra' more edges in etype 'et' (and for weights when
 * 'weighted', filling the weights of existing edges with 1.0). Grows
 * geometrically, so appending one edge at a time is amortised O(1).
 * No message; GKV_ENOMEM or GKV_EINVAL (count overflow). */
gkv_err graph__reserve(gkv_graph *g, int et, int64_t extra, int weighted);

/* What an append may change, saved so a failed reader can put it back:
 * edge counts, whether each etype had weights, growing node counts. */
typedef struct graph_mark {
    int64_t       *mk_n;       /* g_net */
    unsigned char *mk_hadw;    /* g_net */
    int64_t       *mk_count;   /* g_nnt */
} graph_mark;

gkv_err graph__mark(const gkv_graph *g, graph_mark *m);     /* GKV_ENOMEM */
void    graph__rollback(gkv_graph *g, const graph_mark *m);
void    graph__mark_free(graph_mark *m);                    /* zeroed: fine */

/* Checks a type or relation name (see gkv_graph.h); 0 when good, else
 * sets *why to a constant reason. */
int     graph__name_ok(const char *name, const char **why);

/* 'len' bytes of 's' made printable for a message: at most 40 bytes, other
 * bytes shown as '?', "..." when cut. Writes into buf (64 bytes). */
const char *graph__show(char buf[64], const char *s, size_t len);

/* Runs fn(arg_i) for i in [0, n) on n threads (the caller runs i = 0 and
 * any whose thread could not be started), and waits for all. */
void    graph__parallel(void (*fn)(void *), void *args, size_t arg_size,
                        int n);

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

/* Marks sg as the sgraph of partition p (gkv_part_sgraph): its edge IDs
 * are the partitioner's, and p's store holds its features. */
struct gkv_part;
void    graph__sgraph_set_part(struct gkv_sgraph *sg, const struct gkv_part *p);

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

#endif /* GRAPH_INT_H */
