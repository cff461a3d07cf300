/* kv_test.h - kv/'s internals for the tests, which link the static
 * library: the store's struct (st_env, st_swept_ms, st_wb_running ...),
 * the write-back mirrors (kv_mirror, kv__wb_find) and the hooks a test
 * sets to run another call at an exact moment (kv__wb_flush_hook,
 * kv__wb_load_hook, kv__open_list_hold, kv__grow_wait_ms), with base/'s
 * allocation hooks (gkv__alloc_fail_at, gkv__alloc_live).
 *
 * The tests include this, never kv/kv_int.h, so that a grep for kv_int.h
 * finds kv/ alone; what the library's other layers need from kv/ is in
 * kv/gkv_kv.h and base/base.h. Not installed. */
#ifndef KV_TEST_H
#define KV_TEST_H

#include "kv/kv_int.h"

#endif /* KV_TEST_H */
