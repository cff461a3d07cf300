/* gkv.h - umbrella header: include this to use all of gkv.
 *
 * Every call returns GKV_OK or a gkv_err (gkv_strerror() names it); the
 * detail of a failure is read from the function of the header the call
 * belongs to, in the calling thread, before its next call there:
 *
 *   gkv_store_*, gkv_tensor_*, gkv_opt_*, gkv_txn_* (gkv_kv.h)
 *                                       gkv_store_errmsg(s); NULL: a failed open
 *   gkv_graph_* (gkv_graph.h)           gkv_graph_errmsg(g)
 *   gkv_pbook_* / gkv_part_* (gkv_part.h)
 *                                       gkv_pbook_errmsg(b) / gkv_part_errmsg(p)
 *   gkv_partition_write (gkv_partition.h)  its msg argument
 *   gkv_sgraph_* / gkv_sampler_* (gkv_sample.h)
 *                                       gkv_sgraph_errmsg / gkv_sampler_errmsg
 *   gkv_client_*, gkv_server_*, gkv_ipconfig_*, gkv_token_* (gkv_net.h)
 *                                       gkv_net_errmsg()
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
#endif
