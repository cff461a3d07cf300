/* fixed.c - the two small graphs with hand-checked answers. Their tables
 * (edges, CSC, CSR, degrees) are drawn in gkv_graph.h; a change here must
 * change them there, and the expected arrays in test/graph_input_test.c. */
#include "graph/graph_int.h"

#define N_OF(a) (sizeof (a) / sizeof (a)[0])

gkv_err
gkv_graph_fixed_hetero(gkv_graph **out)
{
    static const int64_t fs[] = {0, 0, 1, 2, 3, 3};
    static const int64_t fd[] = {1, 2, 2, 0, 0, 2};
    static const int64_t bs[] = {0, 0, 1, 1, 2, 2, 3};
    static const int64_t bd[] = {0, 1, 1, 3, 1, 4, 1};
    static const float   bw[] = {1, 2, 1, 3, 1, 2, 4};
    static const int64_t ss[] = {0, 1, 1, 3, 4};
    static const int64_t sd[] = {1, 0, 2, 4, 3};
    gkv_graph *g = NULL;
    gkv_err rc;

    if (out == NULL)
        return GKV_EINVAL;
    *out = NULL;
    if ((rc = gkv_graph_new(&g)) != GKV_OK ||
        (rc = gkv_graph_add_ntype(g, "user", 4, NULL)) != GKV_OK ||
        (rc = gkv_graph_add_ntype(g, "item", 5, NULL)) != GKV_OK ||
        (rc = gkv_graph_add_etype(g, "user", "follows", "user", NULL)) ||
        (rc = gkv_graph_add_etype(g, "user", "buys", "item", NULL)) ||
        (rc = gkv_graph_add_etype(g, "item", "similar", "item", NULL)) ||
        (rc = gkv_graph_add_edges(g, 0, fs, fd, NULL, N_OF(fs))) ||
        (rc = gkv_graph_add_edges(g, 1, bs, bd, bw, N_OF(bs))) ||
        (rc = gkv_graph_add_edges(g, 2, ss, sd, NULL, N_OF(ss)))) {
        gkv_graph_free(g);
        return rc;
    }
    *out = g;
    return GKV_OK;
}

gkv_err
gkv_graph_fixed_homo(gkv_graph **out)
{
    static const int64_t s[] = {0, 0, 1, 2, 3, 2, 4, 5, 6, 1, 3, 6, 4, 0};
    static const int64_t d[] = {1, 2, 2, 3, 0, 3, 3, 5, 0, 4, 4, 5, 1, 3};
    static const float   w[] = {1.0f, 2.0f, 1.0f, 0.5f, 1.0f, 0.5f, 3.0f,
                                1.0f, 2.0f, 1.0f, 1.0f, 4.0f, 0.0f, 2.0f};
    gkv_graph *g = NULL;
    gkv_err rc;

    if (out == NULL)
        return GKV_EINVAL;
    *out = NULL;
    if ((rc = gkv_graph_new_homo(&g, 8)) != GKV_OK ||
        (rc = gkv_graph_add_edges(g, 0, s, d, w, N_OF(s))) != GKV_OK) {
        gkv_graph_free(g);
        return rc;
    }
    *out = g;
    return GKV_OK;
}
