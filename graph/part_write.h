/* part_write.h - private declarations shared by the files of the
 * partitioner (part_write.c, part_write_metis.c). Not installed. */
#ifndef PART_WRITE_H
#define PART_WRITE_H

#include <stddef.h>
#include <stdint.h>
#include "graph/gkv_partition.h"
#include "graph/graph_int.h"

/* Assigns every node of 'g' to one of 'nparts' partitions with METIS k-way
 * on the homogeneous view: all node types in one ID space (type 0 first),
 * the edges of all types made symmetric, without self-loops or duplicates.
 * Vertex weights (multi-constraint): 1 per node; with 'balance_edges' the
 * node's in-degree (all edge types); with a non-NULL mask[t] for some type,
 * 1 per training node. A constraint whose total is 0 is left out.
 * owner[t] (gkv_graph_num_nodes(g, t) entries each) receives the partition
 * of every node. *objval (may be NULL) gets METIS's edge cut of the
 * symmetric graph. Runs on the calling thread (libmetis is serial).
 * Errors, with the detail in msg: GKV_ERANGE (the graph or a weight total
 * exceeds METIS's idx_t), GKV_ENOMEM, GKV_EINVAL / GKV_EIO (METIS failed). */
gkv_err pw__metis(const gkv_graph *g, int nparts, uint64_t seed,
                  int balance_edges, uint8_t *const *mask, uint16_t *const *owner,
                  int64_t *objval, char *msg, size_t msglen);

/* Refuses (GKV_ERANGE, with msg) a graph whose node count alone exceeds
 * METIS's idx_t, before anything is allocated for it. */
gkv_err pw__metis_check(const gkv_graph *g, char *msg, size_t msglen);

/* Formats into msg (NULL is fine) and returns rc. */
gkv_err pw__msg(char *msg, size_t msglen, gkv_err rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif /* PART_WRITE_H */
