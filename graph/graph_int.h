/* graph_int.h - private declarations shared by the files of graph/. Not
 * installed, and no other layer includes it: what net/ uses of graph/'s
 * internals is in graph/graph_seam.h. */
#ifndef GRAPH_INT_H
#define GRAPH_INT_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include "base/base.h"
#include "kv/gkv_kv.h"
#include "graph/gkv_graph.h"
#include "graph/gkv_sample.h"
#include "graph/graph_seam.h"

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
};

/* gkv__fail() and gkv__clear() about g (a changing call clears at its
 * start): graph__fail(g, rc, fmt, ...) records fmt as this thread's message
 * and returns rc. */
static inline const void *graph__about(const gkv_graph *g) { return g; }
#define graph__fail(g, rc, ...) gkv__fail(graph__about(g), (rc), __VA_ARGS__)
#define graph__clear(g)         gkv__clear(graph__about(g))

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

/* Marks sg as the sgraph of partition p (gkv_part_sgraph): its edge IDs
 * are the partitioner's, and p's store holds its features. */
struct gkv_part;
void    graph__sgraph_set_part(struct gkv_sgraph *sg, const struct gkv_part *p);

#endif /* GRAPH_INT_H */
