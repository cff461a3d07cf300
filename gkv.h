/* gkv.h - umbrella header: include this to use all of gkv. */
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
