/* net_range_owner_test.c - a partition's server names the owner of an ID
 * it does not hold (issue 26).
 *
 * A pull or push of a graph feature's row that another partition owns was
 * answered by the server with a bare range error ("ID 60 (index 0) is
 * outside [0, 50)"); only kvctl, which has the partition book, said more.
 * Now the server of a partition says which partition owns the ID and
 * suggests the whole job (--ip-config), or that no partition owns it; a
 * plain tensor's range error stays as it was. Spoken to by hand (raw
 * REQ socket) so that no client-side check answers first. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <nanomsg/nn.h>
#include "gkvt.h"
#include "gkvt_kvctl.h"
#include "gkvt_net.h"
#include "wire.h"

enum { NN = 120, FW = 4 };

static int
setup(void **state)
{
    return gkvt_rawfx_setup(state, "range_owner");
}

static int
teardown(void **state)
{
    return gkvt_rawfx_teardown(state);
}

static void
has(const char *s, const char *want)
{
    if (strstr(s, want) == NULL)
        fail_msg("'%s' lacks '%s'", s, want);
}

/* A pull of one ID of 'name' as session sess; the error reply's message
 * into r (the call must fail). */
static void
pull_fails(int s, uint64_t sess, uint64_t req, const char *name, uint64_t id,
           struct gkvt_rep *r)
{
    static unsigned char b[4096];
    net_wr w = {b, sizeof b, 0};

    net__enc_pull_req(&w, name, &id, NULL, 1);
    assert_int_equal(gkvt_rcall(s, NET_PULL, sess, req, b, w.off, r), 0);
    assert_int_not_equal(r->h.status, 0);
}

static void
test_server_names_owner(void **state)
{
    struct gkvt_rawfx *f = *state;
    struct gkvt_rep r = {0};
    struct gkvt_proc *srv;
    int64_t lo0, hi0;
    uint64_t sess, other;
    char want[160];
    gkv_pbook *b;
    float *feat;
    int s;

    feat = gkvt_npy_f32(gkvt_path(f->dir, "feat.npy"), NN, FW, 0);
    free(feat);
    gkvt_partition_random(f->dir, NN, 3 * NN, 5, gkvt_path(f->dir, "feat.npy"));
    snprintf(f->json, sizeof f->json, "%s/g/graph.json", f->dir);
    GKVT_OK(gkv_pbook_open(&b, f->json));
    GKVT_OK(gkv_pbook_node_range(b, 0, 0, &lo0, &hi0));
    gkv_pbook_close(b);
    assert_true(lo0 == 0 && hi0 > 0 && hi0 < NN);
    other = (uint64_t)hi0;                /* partition 1's first node */
    /* partition 0's server of a two-machine job (machine 1 not started) */
    {
        const char *lead[] = {"--part-config", f->json, "--part-id", "0",
                              "--nosync", NULL};

        srv = gkvt_rawfx_start_n(f, 2, lead, NULL);
    }
    assert_non_null(srv);
    s = gkvt_raw_socket(f->base, 20000);
    sess = gkvt_rhandshake(s, "g", 0);

    /* an ID partition 1 owns */
    pull_fails(s, sess, 10, "node/_N/feat", other, &r);
    assert_int_equal(r.h.status, GKV_ERANGE);
    snprintf(want, sizeof want, "partition 1 owns ID %llu; this server serves "
             "partition 0", (unsigned long long)other);
    has(r.msg, want);
    has(r.msg, "--ip-config");
    /* and the same through a push */
    {
        static unsigned char b2[4096];
        net_wr w = {b2, sizeof b2, 0};
        float row[FW] = {1, 2, 3, 4};
        double opt[4] = {0};

        net__enc_push_req(&w, "node/_N/feat", "", 0, opt, sizeof row, &other,
                          row, NULL, 1);
        assert_int_equal(gkvt_rcall(s, NET_PUSH, sess, 11, b2, w.off, &r), 0);
        assert_int_equal(r.h.status, GKV_ERANGE);
        has(r.msg, want);
    }
    /* an ID no partition owns */
    pull_fails(s, sess, 12, "node/_N/feat", 1000, &r);
    assert_int_equal(r.h.status, GKV_ERANGE);
    has(r.msg, "no partition owns ID 1000: the graph has 120 nodes of type "
               "'_N'");
    free(r.pl);
    nn_close(s);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_server_names_owner, setup,
                                        teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
