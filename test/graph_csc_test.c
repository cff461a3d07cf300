/* graph_csc_test.c - CSC/CSR construction (gkv_csc_build, graph/
 * gkv_graph.h): hand-written answers on the fixed graphs, a reference sort
 * on random graphs, threads agreeing on R-MAT graphs, bad input. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "gkvt.h"
#include "gkvt_graph.h"
#include "graph/gkv_graph.h"

#define N_OF(a) (sizeof (a) / sizeof (a)[0])

static void
expect_adj(const gkv_csc *a, const int64_t *ptr, size_t ncols,
           const int64_t *ind, const int64_t *eid, size_t n)
{
    assert_int_equal(a->num_cols, ncols);
    assert_int_equal(a->num_edges, n);
    gkvt_expect_i64(a->indptr, ptr, ncols + 1, "element");
    gkvt_expect_i64(a->indices, ind, n, "element");
    gkvt_expect_i64(a->eids, eid, n, "element");
}

/* ---- CSC / CSR ------------------------------------------------------------ */

static void
test_csc_fixed_hetero(void **state)
{
    gkv_graph *g;
    gkv_csc a;

    (void)state;
    GKVT_OK(gkv_graph_fixed_hetero(&g));
    assert_int_equal(gkv_graph_num_nodes(g, 0), 4);
    assert_int_equal(gkv_graph_num_nodes(g, 1), 5);
    {
        const int64_t s[] = {0, 0, 1, 2, 3, 3}, d[] = {1, 2, 2, 0, 0, 2};
        gkvt_expect_coo(g, 0, s, d, NULL, 6);
    }
    {
        const int64_t s[] = {0, 0, 1, 1, 2, 2, 3}, d[] = {0, 1, 1, 3, 1, 4, 1};
        const float w[] = {1, 2, 1, 3, 1, 2, 4};
        gkvt_expect_coo(g, 1, s, d, w, 7);
    }
    {
        const int64_t s[] = {0, 1, 1, 3, 4}, d[] = {1, 0, 2, 4, 3};
        gkvt_expect_coo(g, 2, s, d, NULL, 5);
    }
    {   /* follows */
        const int64_t p[] = {0, 2, 3, 6, 6}, i[] = {2, 3, 0, 0, 1, 3},
                      e[] = {3, 4, 0, 1, 2, 5};
        const int64_t rp[] = {0, 2, 3, 4, 6}, ri[] = {1, 2, 2, 0, 0, 2},
                      re[] = {0, 1, 2, 3, 4, 5};
        GKVT_OK(gkv_graph_csc(g, 0, 1, &a));
        expect_adj(&a, p, 4, i, e, 6);
        gkv_csc_free(&a);
        GKVT_OK(gkv_graph_csr(g, 0, 1, &a));
        expect_adj(&a, rp, 4, ri, re, 6);
        gkv_csc_free(&a);
    }
    {   /* buys: user -> item */
        const int64_t p[] = {0, 1, 5, 5, 6, 7}, i[] = {0, 0, 1, 2, 3, 1, 2},
                      e[] = {0, 1, 2, 4, 6, 3, 5};
        const int64_t rp[] = {0, 2, 4, 6, 7}, ri[] = {0, 1, 1, 3, 1, 4, 1},
                      re[] = {0, 1, 2, 3, 4, 5, 6};
        GKVT_OK(gkv_graph_csc(g, 1, 2, &a));
        expect_adj(&a, p, 5, i, e, 7);
        gkv_csc_free(&a);
        GKVT_OK(gkv_graph_csr(g, 1, 2, &a));
        expect_adj(&a, rp, 4, ri, re, 7);
        gkv_csc_free(&a);
    }
    {   /* similar */
        const int64_t p[] = {0, 1, 2, 3, 4, 5}, i[] = {1, 0, 1, 4, 3},
                      e[] = {1, 0, 2, 4, 3};
        const int64_t rp[] = {0, 1, 3, 3, 4, 5}, ri[] = {1, 0, 2, 4, 3},
                      re[] = {0, 1, 2, 3, 4};
        GKVT_OK(gkv_graph_csc(g, 2, 1, &a));
        expect_adj(&a, p, 5, i, e, 5);
        gkv_csc_free(&a);
        GKVT_OK(gkv_graph_csr(g, 2, 1, &a));
        expect_adj(&a, rp, 5, ri, re, 5);
        gkv_csc_free(&a);
    }
    assert_int_equal(gkv_graph_csc(g, 3, 1, &a), GKV_EINVAL);
    assert_null(a.indptr);
    gkv_graph_free(g);
}

static void
test_csc_fixed_homo(void **state)
{
    const int64_t s[] = {0, 0, 1, 2, 3, 2, 4, 5, 6, 1, 3, 6, 4, 0};
    const int64_t d[] = {1, 2, 2, 3, 0, 3, 3, 5, 0, 4, 4, 5, 1, 3};
    const float w[] = {1, 2, 1, 0.5f, 1, 0.5f, 3, 1, 2, 1, 1, 4, 0, 2};
    const int64_t p[] = {0, 2, 4, 6, 10, 12, 14, 14, 14};
    const int64_t i[] = {3, 6, 0, 4, 0, 1, 2, 2, 4, 0, 1, 3, 5, 6};
    const int64_t e[] = {4, 8, 0, 12, 1, 2, 3, 5, 6, 13, 9, 10, 7, 11};
    const int64_t rp[] = {0, 3, 5, 7, 9, 11, 12, 14, 14};
    const int64_t ri[] = {1, 2, 3, 2, 4, 3, 3, 0, 4, 3, 1, 5, 0, 5};
    const int64_t re[] = {0, 1, 13, 2, 9, 3, 5, 4, 10, 6, 12, 7, 8, 11};
    const int64_t indeg[] = {2, 2, 2, 4, 2, 2, 0, 0};
    const int64_t outdeg[] = {3, 2, 2, 2, 2, 1, 2, 0};
    gkv_graph *g;
    gkv_csc a, b;

    (void)state;
    GKVT_OK(gkv_graph_fixed_homo(&g));
    assert_int_equal(gkv_graph_num_nodes(g, 0), 8);
    gkvt_expect_coo(g, 0, s, d, w, 14);
    GKVT_OK(gkv_graph_csc(g, 0, 1, &a));
    expect_adj(&a, p, 8, i, e, 14);
    GKVT_OK(gkv_graph_csr(g, 0, 4, &b));
    expect_adj(&b, rp, 8, ri, re, 14);
    for (int v = 0; v < 8; v++) {
        assert_int_equal(a.indptr[v + 1] - a.indptr[v], indeg[v]);
        assert_int_equal(b.indptr[v + 1] - b.indptr[v], outdeg[v]);
    }
    gkv_csc_free(&a);
    gkv_csc_free(&b);
    gkv_csc_free(&b);          /* twice is fine: it was zeroed */
    gkv_csc_free(NULL);
    gkv_graph_free(g);
}

static void
test_csc_random_vs_reference(void **state)
{
    struct { int64_t ncols; size_t n; int threads; int skew; int eid; }
    cases[] = {
        {0, 0, 1, 0, 0},       {1, 0, 2, 0, 0},        {5, 0, 1, 0, 1},
        {1, 1000, 1, 0, 0},    {7, 5000, 3, 0, 1},     {1000, 20000, 2, 0, 0},
        {3, 100000, 4, 0, 0},  {20000, 300000, 1, 0, 0},
        {20000, 300000, 2, 0, 1},                      {70001, 400000, 4, 0, 0},
        {65536, 300000, 3, 0, 0},
        {50000, 300000, 2, 1, 0},                      /* skewed: fallback */
        {50000, 300000, 1, 1, 1},
        {1000000, 70000, 2, 0, 0},                     /* more cols than edges */
    };
    uint64_t x = gkvt_seed();

    (void)state;
    for (size_t c = 0; c < N_OF(cases); c++) {
        size_t n = cases[c].n;
        int64_t nc = cases[c].ncols;
        int64_t *col = malloc((n + 1) * 8), *oth = malloc((n + 1) * 8);
        int64_t *eid = cases[c].eid ? malloc((n + 1) * 8) : NULL;
        gkv_csc a, b;

        for (size_t i = 0; i < n; i++) {
            uint64_t r = tools__splitmix64(&x);
            col[i] = (int64_t)(r % (uint64_t)nc);
            if (cases[c].skew && r % 2)
                col[i] = (int64_t)(r % 3);
            oth[i] = (int64_t)(tools__splitmix64(&x) % 1000000);
            if (eid != NULL)
                eid[i] = (int64_t)(tools__splitmix64(&x) >> 2);
        }
        GKVT_OK(gkv_csc_build(&a, col, oth, eid, n, nc, cases[c].threads));
        gkvt_csc_check(&a, col, oth, eid, n, nc);
        /* any thread count gives the same arrays */
        GKVT_OK(gkv_csc_build(&b, col, oth, eid, n, nc,
                              cases[c].threads == 1 ? 3 : 1));
        gkvt_expect_i64(b.indptr, a.indptr, (size_t)nc + 1, "element");
        gkvt_expect_i64(b.indices, a.indices, n, "element");
        gkvt_expect_i64(b.eids, a.eids, n, "element");
        gkv_csc_free(&a);
        gkv_csc_free(&b);
        free(col);
        free(oth);
        free(eid);
    }
}

static void
test_csc_rmat_threads_agree(void **state)
{
    gkv_rmat_spec sp = gkvt_rmat_spec(17, 11, 0);
    gkv_graph *g;
    gkv_csc a, b;
    gkv_coo c;

    (void)state;
    GKVT_OK(gkv_rmat_graph(&g, &sp, 2));
    GKVT_OK(gkv_graph_edges(g, 0, &c));
    GKVT_OK(gkv_graph_csc(g, 0, 1, &a));
    GKVT_OK(gkv_graph_csc(g, 0, 2, &b));
    gkvt_expect_i64(b.indptr, a.indptr, (size_t)a.num_cols + 1, "element");
    gkvt_expect_i64(b.indices, a.indices, (size_t)a.num_edges, "element");
    gkvt_expect_i64(b.eids, a.eids, (size_t)a.num_edges, "element");
    /* every edge once, at its destination, with its source */
    gkvt_csc_check(&a, c.dst, c.src, NULL, (size_t)c.n, 1 << 17);
    gkv_csc_free(&a);
    GKVT_OK(gkv_graph_csr(g, 0, 2, &a));
    gkvt_csc_check(&a, c.src, c.dst, NULL, (size_t)c.n, 1 << 17);
    gkv_csc_free(&a);
    gkv_csc_free(&b);
    gkv_graph_free(g);
}

static void
test_csc_bad_input(void **state)
{
    const int64_t col[] = {0, 1, 5}, oth[] = {1, 2, 3}, neg[] = {0, -1, 1};
    int64_t *big = malloc(200000 * 8);
    gkv_csc a;

    (void)state;
    assert_int_equal(gkv_csc_build(&a, col, oth, NULL, 3, 5, 1), GKV_ERANGE);
    assert_null(a.indptr);
    assert_int_equal(gkv_csc_build(&a, neg, oth, NULL, 3, 5, 1), GKV_ERANGE);
    assert_int_equal(gkv_csc_build(&a, col, oth, NULL, 3, -1, 1), GKV_EINVAL);
    assert_int_equal(gkv_csc_build(&a, NULL, oth, NULL, 3, 6, 1), GKV_EINVAL);
    assert_int_equal(gkv_csc_build(NULL, col, oth, NULL, 3, 6, 1), GKV_EINVAL);
    GKVT_OK(gkv_csc_build(&a, NULL, NULL, NULL, 0, 0, 1));
    assert_int_equal(a.indptr[0], 0);
    gkv_csc_free(&a);
    /* on the threaded path too */
    for (int i = 0; i < 200000; i++)
        big[i] = i % 1000;
    big[150000] = 1000;
    assert_int_equal(gkv_csc_build(&a, big, big, NULL, 200000, 1000, 4),
                     GKV_ERANGE);
    assert_null(a.indptr);
    free(big);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_csc_fixed_hetero),
        cmocka_unit_test(test_csc_fixed_homo),
        cmocka_unit_test(test_csc_random_vs_reference),
        cmocka_unit_test(test_csc_rmat_threads_agree),
        cmocka_unit_test(test_csc_bad_input),
    };
    return cmocka_run_group_tests_name("graph_csc", tests, NULL, NULL);
}
