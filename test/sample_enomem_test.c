/* sample_enomem_test.c - a sampler that ran out of memory in a parallel
 * relabel samples right on its next call.
 *
 * Each allocation of a 3-thread gkv_sample_blocks() is failed in turn
 * (gkvt_alloc_fail_at); after each failed call the same sampler samples
 * the same seeds again, and its blocks must equal the one-thread blocks.
 * The caller's prefix of a parallel hop writes a node's marker before it
 * may fail to log a worker's key; a review found that path leaving those
 * markers set, so the next call took the nodes for labelled, with stale
 * local IDs (wrong blocks, or "given twice" for a seed). Which path a
 * failure meets depends on how the threads meet, so the sweep runs
 * REPS times. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "gkvt.h"
#include "gkvt_graph.h"
#include "graph/gkv_sample.h"

#define SCALE   15
#define NSEEDS  3000
#define REPS    8

static void
test_next_call_after_enomem(void **state)
{
    gkv_graph *g = gkvt_rmat(SCALE, 3);
    int64_t n = gkv_graph_num_nodes(g, 0);
    uint64_t st = 7;
    int64_t *seeds = gkvt_distinct_seeds(n, &st);
    struct gkvt_seeds1 sd = gkvt_one(seeds, NSEEDS);
    int fan[2] = {10, 10}, bad = 0, fails = 0;
    struct gkvt_bcopy ref;
    gkv_block b[2];
    gkv_sgraph *sg;
    char first[400] = "";

    (void)state;
    GKVT_OK(gkv_sgraph_from_graph(&sg, g, 0, 2));
    {
        gkv_sampler *s = gkvt_sampler(sg, 1);
        GKVT_OK(gkv_sample_blocks(s, sd.p, sd.n, fan, 1, 2, NULL, b));
        gkvt_bcopy_take(&ref, b, 2);
        gkv_sampler_free(s);
    }
    for (int rep = 0; rep < REPS; rep++) {
        for (int k = 0; k < 4000; k++) {
            gkv_sampler *s = gkvt_sampler(sg, 3);
            gkv_err rc;

            gkvt_alloc_fail_at(k);
            rc = gkv_sample_blocks(s, sd.p, sd.n, fan, 1, 2, NULL, b);
            gkvt_alloc_fail_at(-1);
            if (rc == GKV_OK) {
                gkv_sampler_free(s);
                break;
            }
            assert_int_equal(rc, GKV_ENOMEM);
            fails++;
            rc = gkv_sample_blocks(s, sd.p, sd.n, fan, 1, 2, NULL, b);
            if ((rc != GKV_OK || !gkvt_bcopy_same(&ref, b)) && bad++ == 0)
                snprintf(first, sizeof first, "rep %d, allocation %d failed:"
                         " the next call %s (%s)", rep, k, rc == GKV_OK ?
                         "gave other blocks" : "failed",
                         gkv_sampler_errmsg(s));
            gkv_sampler_free(s);
        }
    }
    print_message("%d failed calls, %d wrong next calls\n", fails, bad);
    if (bad > 0)
        fail_msg("%d wrong next calls; first: %s", bad, first);
    assert_true(fails > 0);
    gkvt_bcopy_free(&ref);
    gkv_sgraph_free(sg);
    gkv_graph_free(g);
    free(seeds);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_next_call_after_enomem),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
