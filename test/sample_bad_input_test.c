/* sample_bad_input_test.c - the sampler's (graph/gkv_sample.h) answers to
 * bad input, one case each: seeds, fanouts, NULL arguments, options,
 * weights, set_adj and sgraph_new arguments, edge batch specs. Each case
 * samples on the fixed homogeneous graph (8 nodes, 14 edges) with two
 * threads, and names the error it expects. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "gkvt.h"
#include "gkvt_graph.h"
#include "graph/gkv_graph.h"
#include "graph/gkv_sample.h"

struct fx {
    gkv_sgraph *sg;
    gkv_sampler *s;
    gkv_sample_edges out[1];
    gkv_block b[2];
    gkv_sample_opts o;          /* zero */
    int64_t v;                  /* 3: a node with four in-edges */
    struct gkvt_seeds1 sd;      /* {v} */
    int k;                      /* fanout 2 */
    float w[14];                /* edge weights, for o.edge_w */
    const float *ew[1];
    int64_t ew_len;
};

static int
setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);

    if (f == NULL)
        return -1;
    f->sg = gkvt_sg_fixed(0, 0);
    f->s = gkvt_sampler(f->sg, 2);
    f->v = 3;
    f->sd = gkvt_one(&f->v, 1);
    f->k = 2;
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fx *f = *state;

    gkv_sampler_free(f->s);
    gkv_sgraph_free(f->sg);
    free(f);
    return 0;
}

/* The sampler still gives blocks after a refused call. */
static void
expect_still_works(struct fx *f)
{
    int two[2] = {2, 2};

    GKVT_OK(gkv_sample_blocks(f->s, f->sd.p, f->sd.n, two, 1, 2, NULL, f->b));
}

/* ---- seeds ---------------------------------------------------------------- */

static void
test_sample_seed_beyond_nodes_is_erange(void **state)
{
    struct fx *f = *state;
    int64_t big = 8, negv = -1;
    struct gkvt_seeds1 sd;

    sd = gkvt_one(&big, 1);
    assert_int_equal(gkv_sample_neighbors(f->s, sd.p, sd.n, &f->k, 1, 0, NULL,
                                          f->out), GKV_ERANGE);
    assert_non_null(strstr(gkv_sampler_errmsg(f->s), "= 8 is not a node"));
    sd = gkvt_one(&negv, 1);
    assert_int_equal(gkv_sample_blocks(f->s, sd.p, sd.n, &f->k, 1, 1, NULL,
                                       f->b), GKV_ERANGE);
    expect_still_works(f);
}

static void
test_sample_seed_twice_is_einval(void **state)
{
    struct fx *f = *state;
    int64_t dup[2] = {2, 2};
    struct gkvt_seeds1 sd = gkvt_one(dup, 2);

    assert_int_equal(gkv_sample_blocks(f->s, sd.p, sd.n, &f->k, 1, 1, NULL,
                                       f->b), GKV_EINVAL);
    assert_non_null(strstr(gkv_sampler_errmsg(f->s), "twice"));
    expect_still_works(f);
}

/* ---- fanouts and layers ------------------------------------------------ */

static void
test_sample_fanout_negative_is_einval(void **state)
{
    struct fx *f = *state;
    int kbad = -2;

    assert_int_equal(gkv_sample_neighbors(f->s, f->sd.p, f->sd.n, &kbad, 1, 0,
                                          NULL, f->out), GKV_EINVAL);
    assert_non_null(strstr(gkv_sampler_errmsg(f->s), "-2"));
}

static void
test_sample_fanout_count_not_etypes_is_einval(void **state)
{
    struct fx *f = *state;
    int two[2] = {2, 2};

    assert_int_equal(gkv_sample_neighbors(f->s, f->sd.p, f->sd.n, two, 2, 0,
                                          NULL, f->out), GKV_EINVAL);
    assert_non_null(strstr(gkv_sampler_errmsg(f->s), "nfan"));
}

static void
test_sample_fanout_null_is_einval(void **state)
{
    struct fx *f = *state;

    assert_int_equal(gkv_sample_neighbors(f->s, f->sd.p, f->sd.n, NULL, 1, 0,
                                          NULL, f->out), GKV_EINVAL);
}

static void
test_sample_layer_negative_or_no_layers_is_einval(void **state)
{
    struct fx *f = *state;

    assert_int_equal(gkv_sample_neighbors(f->s, f->sd.p, f->sd.n, &f->k, 1, -1,
                                          NULL, f->out), GKV_EINVAL);
    assert_int_equal(gkv_sample_blocks(f->s, f->sd.p, f->sd.n, &f->k, 1, 0,
                                       NULL, f->b), GKV_EINVAL);
}

/* ---- NULL arguments ------------------------------------------------------ */

static void
test_sample_null_sampler_seeds_or_out_is_einval(void **state)
{
    struct fx *f = *state;

    assert_int_equal(gkv_sample_neighbors(NULL, f->sd.p, f->sd.n, &f->k, 1, 0,
                                          NULL, f->out), GKV_EINVAL);
    assert_int_equal(gkv_sample_neighbors(f->s, NULL, f->sd.n, &f->k, 1, 0,
                                          NULL, f->out), GKV_EINVAL);
    assert_int_equal(gkv_sample_neighbors(f->s, f->sd.p, f->sd.n, &f->k, 1, 0,
                                          NULL, NULL), GKV_EINVAL);
    assert_int_equal(gkv_sample_blocks(f->s, f->sd.p, f->sd.n, &f->k, 1, 1,
                                       NULL, NULL), GKV_EINVAL);
}

static void
test_sampler_new_null_or_65_threads_is_einval(void **state)
{
    struct fx *f = *state;
    gkv_sampler *x = (gkv_sampler *)1;

    assert_int_equal(gkv_sampler_new(NULL, f->sg, 1), GKV_EINVAL);
    assert_int_equal(gkv_sampler_new(&x, NULL, 1), GKV_EINVAL);
    assert_null(x);
    assert_int_equal(gkv_sampler_new(&x, f->sg, 65), GKV_EINVAL);
}

/* ---- options ------------------------------------------------------------- */

static void
test_sample_dir_out_without_csr_is_einval(void **state)
{
    struct fx *f = *state;

    f->o.dir = GKV_DIR_OUT;
    assert_int_equal(gkv_sample_neighbors(f->s, f->sd.p, f->sd.n, &f->k, 1, 0,
                                          &f->o, f->out), GKV_EINVAL);
    assert_non_null(strstr(gkv_sampler_errmsg(f->s), "CSR"));
}

static void
test_sample_unknown_dir_or_flag_is_einval(void **state)
{
    struct fx *f = *state;

    f->o.dir = 2;
    assert_int_equal(gkv_sample_neighbors(f->s, f->sd.p, f->sd.n, &f->k, 1, 0,
                                          &f->o, f->out), GKV_EINVAL);
    f->o.dir = 0;
    f->o.flags = 0x80;
    assert_int_equal(gkv_sample_neighbors(f->s, f->sd.p, f->sd.n, &f->k, 1, 0,
                                          &f->o, f->out), GKV_EINVAL);
}

static void
test_sample_exclude_negative_is_erange(void **state)
{
    struct fx *f = *state;
    int64_t negex = -5;
    size_t n1 = 1;
    const int64_t *exp[1] = {&negex};

    f->o.exclude = exp;
    f->o.exclude_n = &n1;
    assert_int_equal(gkv_sample_neighbors(f->s, f->sd.p, f->sd.n, &f->k, 1, 0,
                                          &f->o, f->out), GKV_ERANGE);
}

static void
test_sample_exclude_without_counts_is_einval(void **state)
{
    struct fx *f = *state;
    int64_t one_ex = 1;
    const int64_t *exp[1] = {&one_ex};

    f->o.exclude = exp;
    f->o.exclude_n = NULL;
    assert_int_equal(gkv_sample_neighbors(f->s, f->sd.p, f->sd.n, &f->k, 1, 0,
                                          &f->o, f->out), GKV_EINVAL);
}

/* ---- weights ------------------------------------------------------------- */

/* Options with 14 weights of 1 as edge_w, but edge_w_len 3. */
static void
set_short_edge_w(struct fx *f)
{
    for (int i = 0; i < 14; i++)
        f->w[i] = 1;
    f->ew[0] = f->w;
    f->ew_len = 3;
    f->o.edge_w = f->ew;
    f->o.edge_w_len = &f->ew_len;
}

static void
test_sample_edge_w_too_short_is_erange(void **state)
{
    struct fx *f = *state;

    set_short_edge_w(f);
    /* node 3's in-edges have IDs 3, 5, 6, 13: beyond 3 weights */
    assert_int_equal(gkv_sample_neighbors(f->s, f->sd.p, f->sd.n, &f->k, 1, 0,
                                          &f->o, f->out), GKV_ERANGE);
    assert_non_null(strstr(gkv_sampler_errmsg(f->s), "edge_w"));
}

static void
test_sample_edge_w_and_weighted_is_einval(void **state)
{
    struct fx *f = *state;

    set_short_edge_w(f);
    f->o.flags = GKV_SAMPLE_WEIGHTED;
    assert_int_equal(gkv_sample_neighbors(f->s, f->sd.p, f->sd.n, &f->k, 1, 0,
                                          &f->o, f->out), GKV_EINVAL);
}

/* A sampling graph of the fixed graph's in-adjacency with weights w
 * (NULL: none); *a gets that adjacency. */
static gkv_sgraph *
sg_with_weights(struct fx *f, const float *w, gkv_adj *a)
{
    gkv_sgraph *sg2;
    int64_t N = 8;
    int z = 0;

    memset(a, 0, sizeof *a);
    GKVT_OK(gkv_sgraph_adj(f->sg, 0, GKV_DIR_IN, a));
    a->w = w;
    GKVT_OK(gkv_sgraph_new(&sg2, 1, &N, 1, &z, &z));
    GKVT_OK(gkv_sgraph_set_adj(sg2, 0, GKV_DIR_IN, a));
    return sg2;
}

/* A negative and a NaN weight, met while sampling: the node with it is
 * refused, other nodes and unweighted sampling are fine. */
static void
test_sample_weight_negative_or_nan_is_einval(void **state)
{
    struct fx *f = *state;
    float wbad[14];
    gkv_adj a;

    for (int bad = 0; bad < 2; bad++) {
        gkv_sgraph *sg2;
        gkv_sampler *s2;
        int64_t v0 = 0;
        struct gkvt_seeds1 s0 = gkvt_one(&v0, 1);

        memset(&a, 0, sizeof a);
        GKVT_OK(gkv_sgraph_adj(f->sg, 0, GKV_DIR_IN, &a));
        for (int i = 0; i < 14; i++)
            wbad[i] = 1;
        wbad[a.indptr[3] + 2] = bad ? NAN : -0.5f;
        sg2 = sg_with_weights(f, wbad, &a);
        s2 = gkvt_sampler(sg2, 1);
        f->o.flags = GKV_SAMPLE_WEIGHTED;
        assert_int_equal(gkv_sample_neighbors(s2, f->sd.p, f->sd.n, &f->k, 1,
                                              0, &f->o, f->out), GKV_EINVAL);
        assert_non_null(strstr(gkv_sampler_errmsg(s2), "weight"));
        /* other nodes are fine; unweighted sampling is fine */
        GKVT_OK(gkv_sample_neighbors(s2, s0.p, s0.n, &f->k, 1, 0, &f->o,
                                     f->out));
        f->o.flags = 0;
        GKVT_OK(gkv_sample_neighbors(s2, f->sd.p, f->sd.n, &f->k, 1, 0, &f->o,
                                     f->out));
        gkv_sampler_free(s2);
        gkv_sgraph_free(sg2);
    }
}

static void
test_sample_weighted_without_weights_is_einval(void **state)
{
    struct fx *f = *state;
    gkv_adj a;
    gkv_sgraph *sg2 = sg_with_weights(f, NULL, &a);
    gkv_sampler *s2 = gkvt_sampler(sg2, 1);

    f->o.flags = GKV_SAMPLE_WEIGHTED;
    assert_int_equal(gkv_sample_neighbors(s2, f->sd.p, f->sd.n, &f->k, 1, 0,
                                          &f->o, f->out), GKV_EINVAL);
    assert_non_null(strstr(gkv_sampler_errmsg(s2), "no weights"));
    gkv_sampler_free(s2);
    gkv_sgraph_free(sg2);
}

/* ---- set_adj and sgraph_new arguments ------------------------------------ */

/* A refused set_adj leaves the old adjacency in place. */
static void
test_sgraph_set_adj_bad_is_refused_and_keeps_the_old(void **state)
{
    struct fx *f = *state;
    gkv_adj a, x;
    gkv_sgraph *sg2 = sg_with_weights(f, NULL, &a);
    int64_t ip[3] = {0, 2, 1}, ix[2] = {0, 9}, ip2[3] = {0, 1, 2};

    memset(&x, 0, sizeof x);
    x.col_lo = 0;
    x.col_hi = 2;
    x.indptr = ip;
    x.indices = ix;
    assert_int_equal(gkv_sgraph_set_adj(sg2, 0, GKV_DIR_IN, &x), GKV_EINVAL);
    assert_non_null(strstr(gkv_sgraph_errmsg(sg2), "decreases"));
    x.indptr = ip2;
    assert_int_equal(gkv_sgraph_set_adj(sg2, 0, GKV_DIR_IN, &x), GKV_ERANGE);
    assert_non_null(strstr(gkv_sgraph_errmsg(sg2), "indices[1] = 9"));
    ix[1] = 1;
    x.col_hi = 9;
    assert_int_equal(gkv_sgraph_set_adj(sg2, 0, GKV_DIR_IN, &x), GKV_EINVAL);
    x.col_hi = 2;
    assert_int_equal(gkv_sgraph_set_adj(sg2, 1, GKV_DIR_IN, &x), GKV_EINVAL);
    assert_int_equal(gkv_sgraph_set_adj(sg2, 0, 5, &x), GKV_EINVAL);
    /* the old adjacency is still there */
    GKVT_OK(gkv_sgraph_adj(sg2, 0, GKV_DIR_IN, &x));
    assert_int_equal(x.col_hi, 8);
    GKVT_OK(gkv_sgraph_set_adj(sg2, 0, GKV_DIR_IN, &(gkv_adj){
        .col_lo = 0, .col_hi = 2, .indptr = ip2, .indices = ix}));
    assert_int_equal(gkv_sgraph_adj(sg2, 0, GKV_DIR_OUT, &x), GKV_ENOTFOUND);
    gkv_sgraph_free(sg2);
}

static void
test_sgraph_new_bad_counts_or_null_is_einval(void **state)
{
    gkv_sgraph *x = (gkv_sgraph *)1;
    int bad_nt = 3, z = 0;
    int64_t negn = -1, N = 8;

    (void)state;
    assert_int_equal(gkv_sgraph_new(&x, 0, &N, 1, &z, &z), GKV_EINVAL);
    assert_null(x);
    assert_int_equal(gkv_sgraph_new(&x, 1, &N, 1, &bad_nt, &z), GKV_EINVAL);
    assert_int_equal(gkv_sgraph_new(&x, 1, &negn, 1, &z, &z), GKV_EINVAL);
    assert_int_equal(gkv_sgraph_new(&x, 1, NULL, 1, &z, &z), GKV_EINVAL);
    assert_int_equal(gkv_sgraph_from_graph(&x, NULL, 0, 1), GKV_EINVAL);
}

/* ---- edge batches -------------------------------------------------------- */

/* A spec of one positive edge, *eid of edge type 0. */
static gkv_edge_batch_spec
one_edge(const int64_t *eid)
{
    gkv_edge_batch_spec sp = {0};

    sp.eids = eid;
    sp.n = 1;
    return sp;
}

/* An edge batch of sp, fanout 2, one layer. */
static gkv_err
edge_batch(struct fx *f, const gkv_edge_batch_spec *sp)
{
    gkv_edge_batch eb;

    return gkv_sample_edge_batch(f->s, sp, &f->k, 1, 1, NULL, &eb, f->b);
}

static void
test_edge_batch_bad_etype_is_einval(void **state)
{
    struct fx *f = *state;
    int64_t e1 = 1;
    gkv_edge_batch_spec sp = one_edge(&e1);

    sp.etype = 3;
    assert_int_equal(edge_batch(f, &sp), GKV_EINVAL);
    assert_non_null(strstr(gkv_sampler_errmsg(f->s), "etype 3"));
}

static void
test_edge_batch_eid_beyond_edges_is_erange(void **state)
{
    struct fx *f = *state;
    int64_t e99 = 99;
    gkv_edge_batch_spec sp = one_edge(&e99);

    assert_int_equal(edge_batch(f, &sp), GKV_ERANGE);
    assert_non_null(strstr(gkv_sampler_errmsg(f->s), "99"));
}

static void
test_edge_batch_num_neg_negative_is_einval(void **state)
{
    struct fx *f = *state;
    int64_t e1 = 1;
    gkv_edge_batch_spec sp = one_edge(&e1);

    sp.num_neg = -1;
    assert_int_equal(edge_batch(f, &sp), GKV_EINVAL);
}

/* GKV_EXCLUDE_REVERSE without reverse IDs: EINVAL; with one beyond the
 * edges: ERANGE. Then the same spec without the exclusion is fine, and a
 * NULL batch is EINVAL. */
static void
test_edge_batch_bad_reverse_or_null_out_is_refused(void **state)
{
    struct fx *f = *state;
    gkv_edge_batch eb;
    int64_t e1 = 1;
    gkv_edge_batch_spec sp = one_edge(&e1);

    sp.num_neg = 1;
    sp.exclude = GKV_EXCLUDE_REVERSE;
    assert_int_equal(edge_batch(f, &sp), GKV_EINVAL);
    sp.reverse_eids = &e1;
    sp.reverse_n = 1;
    assert_int_equal(edge_batch(f, &sp), GKV_ERANGE);
    sp.exclude = 0;
    GKVT_OK(gkv_sample_edge_batch(f->s, &sp, &f->k, 1, 1, NULL, &eb, f->b));
    assert_int_equal(eb.num_pos, 1);
    assert_int_equal(gkv_sample_edge_batch(f->s, &sp, &f->k, 1, 1, NULL, NULL,
                                           f->b), GKV_EINVAL);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int
main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_sample_seed_beyond_nodes_is_erange),
        T(test_sample_seed_twice_is_einval),
        T(test_sample_fanout_negative_is_einval),
        T(test_sample_fanout_count_not_etypes_is_einval),
        T(test_sample_fanout_null_is_einval),
        T(test_sample_layer_negative_or_no_layers_is_einval),
        T(test_sample_null_sampler_seeds_or_out_is_einval),
        T(test_sampler_new_null_or_65_threads_is_einval),
        T(test_sample_dir_out_without_csr_is_einval),
        T(test_sample_unknown_dir_or_flag_is_einval),
        T(test_sample_exclude_negative_is_erange),
        T(test_sample_exclude_without_counts_is_einval),
        T(test_sample_edge_w_too_short_is_erange),
        T(test_sample_edge_w_and_weighted_is_einval),
        T(test_sample_weight_negative_or_nan_is_einval),
        T(test_sample_weighted_without_weights_is_einval),
        T(test_sgraph_set_adj_bad_is_refused_and_keeps_the_old),
        cmocka_unit_test(test_sgraph_new_bad_counts_or_null_is_einval),
        T(test_edge_batch_bad_etype_is_einval),
        T(test_edge_batch_eid_beyond_edges_is_erange),
        T(test_edge_batch_num_neg_negative_is_einval),
        T(test_edge_batch_bad_reverse_or_null_out_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
