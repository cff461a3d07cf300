/* gkv.h - umbrella header: include this to use all of gkv.
 *
 * Errors. Every call returns GKV_OK or a gkv_err (gkv_strerror() names it;
 * library codes and errno never mix). The detail of a failure ("tensor
 * 'feat': row width 64, expected 128", "edges.txt:17: dst 9 is not below
 * 5", "server 127.0.0.1:30051: ...") is read with gkv_errmsg()
 * (gkv_err.h, so every layer's header has it) in the calling thread:
 * every layer's calls (store, graph, partition book, sampler, client and
 * server, GPU, .npy files) fill the same per-thread slot before they fail,
 * and calls clear it as they start (plain getters may leave it), so after
 * a failure it tells of that call until the thread's next one.
 *
 * The per-module getters of the layer headers are one-line aliases of it:
 *   gkv_net_errmsg(), gkv_gpu_errmsg()      gkv_errmsg()
 *   gkv_sgraph_errmsg(sg)                   gkv_errmsg()
 *   gkv_store_errmsg(s), gkv_graph_errmsg(g), gkv_pbook_errmsg(b),
 *   gkv_part_errmsg(p), gkv_sampler_errmsg(sp)
 *                                           gkv_errmsg() when the thread's
 *       last call was on that handle (NULL: a failed open, or a call on no
 *       handle), else ""
 * gkv_partition_write() and the gkv_npy_* calls also copy the detail into
 * their msg argument.
 *
 * IDs: the sampling and partition-book calls give int64_t node and edge
 * IDs (DGL's); the store's and the client's pulls and pushes take
 * uint64_t IDs. An ID a sampler returned is never negative, so a trainer
 * passes its arrays to gkv_client_pull() as (const uint64_t *). */
#ifndef GKV_H
#define GKV_H
#include "gkv_err.h"
#include "gkv_kv.h"
#include "gkv_npy.h"
#include "gkv_graph.h"
#include "gkv_part.h"
#include "gkv_partition.h"
#include "gkv_sample.h"
#include "gkv_net.h"
#include "gkv_loader.h"
#endif
