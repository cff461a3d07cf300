/* net_graph_batch_test.c - edge mini-batches through graph servers
 * (gkv_client_sample_edge_batch) against gkv_sample_edge_batch on the
 * whole graph: pairs and blocks, with negatives, self and reverse
 * exclusion, and the same errors.
 *
 * A weighted R-MAT graph with a node feature is partitioned
 * (gkv_partition_write), one or two gkv-server processes per partition
 * serve it (--part-config), and the client's distributed calls are
 * compared with in-process references (the fixture: gkvt_ngraph.h).
 * Servers are started and killed by PID (teardown reaps all of them, also
 * after a failed assertion); ports are picked per test as net_test does.
 * The programs on graph servers: net_graph_test (a heterogeneous graph,
 * the GPU loader), net_graph_sample_test, net_graph_bad_test,
 * net_graph_batch_test.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <nanomsg/nn.h>
#include <nanomsg/reqrep.h>
#include "gkvt_graph.h"
#include "gkvt_net.h"
#include "gkvt_ngraph.h"
#include "gkv.h"
#include "net/wire.h"

/* ---- edge mini-batches ------------------------------------------------------ */

/* The distributed edge batch == gkv_sample_edge_batch() on the whole
 * graph: the pairs and every block array. */
static void
check_edge_batch(struct gkvt_ng *f, gkv_client *c, const gkv_edge_batch_spec *sp,
                 const int *fan, int nl, const gkv_sample_opts *o)
{
    gkv_edge_batch wb, cb;
    gkv_block wblk[8], cblk[8];
    struct gkvt_ng_bcopy ref;
    int64_t *pairs;
    size_t np;

    GKVT_OK(gkv_sample_edge_batch(f->ref.ws, sp, fan, 1, nl, o, &wb, wblk));
    np = 2 * wb.num_pos + 2 * wb.num_neg;
    pairs = malloc(np * 8 + 8);
    if (wb.num_pos > 0) {     /* the arrays may be NULL when empty */
        memcpy(pairs, wb.pos_src, wb.num_pos * 8);
        memcpy(pairs + wb.num_pos, wb.pos_dst, wb.num_pos * 8);
    }
    if (wb.num_neg > 0) {
        memcpy(pairs + 2 * wb.num_pos, wb.neg_src, wb.num_neg * 8);
        memcpy(pairs + 2 * wb.num_pos + wb.num_neg, wb.neg_dst,
               wb.num_neg * 8);
    }
    gkvt_ng_bcopy_take(&ref, wblk, nl);
    NET_OK(gkv_client_sample_edge_batch(c, sp, fan, 1, nl, o, &cb, cblk));
    assert_int_equal(cb.num_pos, wb.num_pos);
    assert_int_equal(cb.num_neg, wb.num_neg);
    assert_int_equal(cb.num_neg, sp->n * (size_t)sp->num_neg);
    if (cb.num_pos > 0) {
        assert_memory_equal(cb.pos_src, pairs, cb.num_pos * 8);
        assert_memory_equal(cb.pos_dst, pairs + cb.num_pos, cb.num_pos * 8);
    }
    if (cb.num_neg > 0) {
        assert_memory_equal(cb.neg_src, pairs + 2 * cb.num_pos,
                            cb.num_neg * 8);
        assert_memory_equal(cb.neg_dst, pairs + 2 * cb.num_pos + cb.num_neg,
                            cb.num_neg * 8);
    }
    gkvt_ng_blocks_equal(&ref, cblk, nl, 0);
    gkvt_ng_bcopy_free(&ref);
    free(pairs);
}

/* A bad spec fails with the same code in-process and through the servers,
 * the message naming the field. */
static void
check_edge_batch_bad(struct gkvt_ng *f, gkv_client *c,
                     const gkv_edge_batch_spec *sp, const int *fan,
                     gkv_err want, const char *needle)
{
    gkv_edge_batch wb, cb;
    gkv_block wblk[2], cblk[2];

    assert_int_equal(gkv_sample_edge_batch(f->ref.ws, sp, fan, 1, 2, NULL, &wb,
                                           wblk), want);
    assert_int_equal(gkv_client_sample_edge_batch(c, sp, fan, 1, 2, NULL, &cb,
                                                  cblk), want);
    if (strstr(gkv_net_errmsg(), needle) == NULL)
        fail_msg("edge batch error '%s' does not name '%s'", gkv_net_errmsg(),
                 needle);
    assert_int_equal(cb.num_pos, 0);
}

static void
test_edge_batches(void **state)
{
    struct gkvt_ng *f = *state;
    gkv_client *c;
    gkv_sample_opts o = {0};
    gkv_edge_batch_spec sp = {0};
    int64_t eids[300], *rev, extra[50], bad[2];
    const int64_t *ex[1] = {extra};
    size_t exn[1] = {50};
    int fan2[2] = {4, 8}, fan3[3] = {2, 3, 5};
    uint64_t r = 5;

    gkvt_ng_graph_make(f, 11, 2);
    gkvt_ng_serve(f, 1);
    c = gkvt_ng_client(f, "edges");
    for (size_t i = 0; i < 300; i++)
        eids[i] = (int64_t)(tools__splitmix64(&r) % (uint64_t)f->m);
    for (size_t i = 0; i < 50; i++)
        extra[i] = (int64_t)(tools__splitmix64(&r) % (uint64_t)f->m);
    rev = malloc((size_t)f->m * 8);
    for (int64_t e = 0; e < f->m; e++)       /* any map will do */
        rev[e] = (e * 7 + 3) % f->m;

    o.seed = 77;
    sp.eids = eids;
    sp.n = 200;
    check_edge_batch(f, c, &sp, fan2, 2, &o);               /* positives only */
    sp.num_neg = 3;
    sp.exclude = GKV_EXCLUDE_SELF;
    check_edge_batch(f, c, &sp, fan3, 3, &o);
    sp.n = 300;
    sp.exclude = GKV_EXCLUDE_SELF | GKV_EXCLUDE_REVERSE;
    sp.reverse_eids = rev;
    sp.reverse_n = f->m;
    o.exclude = ex;
    o.exclude_n = exn;
    o.flags = GKV_SAMPLE_WEIGHTED;
    check_edge_batch(f, c, &sp, fan2, 2, &o);
    o.flags = GKV_SAMPLE_REPLACE;
    o.dir = GKV_DIR_OUT;
    sp.num_neg = 1;
    check_edge_batch(f, c, &sp, fan2, 2, &o);
    o.dir = GKV_DIR_IN;
    o.flags = 0;
    o.exclude = NULL;
    o.exclude_n = NULL;
    sp.n = 0;                                          /* an empty batch */
    check_edge_batch(f, c, &sp, fan2, 2, &o);

    /* bad specs: the same codes as in-process, and the client goes on */
    sp.n = 10;
    sp.etype = 1;
    check_edge_batch_bad(f, c, &sp, fan2, GKV_EINVAL, "etype 1");
    sp.etype = 0;
    sp.num_neg = -1;
    check_edge_batch_bad(f, c, &sp, fan2, GKV_EINVAL, "num_neg -1");
    sp.num_neg = 2;
    sp.exclude = 0x10;
    check_edge_batch_bad(f, c, &sp, fan2, GKV_EINVAL, "exclude 0x10");
    sp.exclude = GKV_EXCLUDE_REVERSE;
    sp.reverse_eids = NULL;
    check_edge_batch_bad(f, c, &sp, fan2, GKV_EINVAL, "reverse_eids");
    sp.reverse_eids = rev;
    sp.reverse_n = 5;
    bad[0] = 3;
    bad[1] = 9;
    sp.eids = bad;
    sp.n = 2;
    check_edge_batch_bad(f, c, &sp, fan2, GKV_ERANGE, "beyond reverse_eids");
    sp.exclude = 0;
    bad[1] = f->m;
    check_edge_batch_bad(f, c, &sp, fan2, GKV_ERANGE, "");
    sp.eids = NULL;
    check_edge_batch_bad(f, c, &sp, fan2, GKV_EINVAL, "eids is NULL");
    sp.eids = eids;
    sp.n = 100;
    sp.exclude = GKV_EXCLUDE_SELF;
    check_edge_batch(f, c, &sp, fan2, 2, &o);
    NET_OK(gkv_client_close(c));
    free(rev);
}

#define T(name) cmocka_unit_test_setup_teardown(name, gkvt_ng_setup, \
                                                gkvt_ng_teardown)

int
main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_edge_batches),
    };

    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests_name("net_graph_batch", tests, NULL, NULL);
}
