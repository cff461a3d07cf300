/* part_sample.c - the sgraph of one partition: what a server samples from.
 * The glue between the partition reader (part.c) and the sampler
 * (sgraph.c): the schema comes from the partition book, the adjacency is
 * borrowed from the partition's loaded CSC (and CSR). */
#include <stdint.h>
#include "graph/graph_int.h"
#include "graph/gkv_part.h"
#include "graph/gkv_sample.h"

gkv_err
gkv_part_sgraph(const gkv_part *p, gkv_sgraph **out)
{
    const gkv_pbook *b;
    gkv_sgraph *sg = NULL;
    int64_t *num_nodes = NULL;
    int *src = NULL, *dst = NULL;
    int nnt, net;
    gkv_err rc = GKV_ENOMEM;

    if (out == NULL)
        return GKV_EINVAL;
    *out = NULL;
    if (p == NULL)
        return GKV_EINVAL;
    b = gkv_part_book(p);
    nnt = gkv_pbook_num_ntypes(b);
    net = gkv_pbook_num_etypes(b);
    num_nodes = gkv__malloc(sizeof *num_nodes * (size_t)nnt);
    src = gkv__malloc(sizeof *src * (size_t)(net > 0 ? net : 1));
    dst = gkv__malloc(sizeof *dst * (size_t)(net > 0 ? net : 1));
    if (num_nodes == NULL || src == NULL || dst == NULL)
        goto out;
    for (int t = 0; t < nnt; t++)
        num_nodes[t] = gkv_pbook_num_nodes(b, t);
    for (int e = 0; e < net; e++) {
        gkv_etype_info ei;

        if ((rc = gkv_pbook_etype_info(b, e, &ei)) != GKV_OK)
            goto out;
        src[e] = ei.src_ntype;
        dst[e] = ei.dst_ntype;
    }
    if ((rc = gkv_sgraph_new(&sg, nnt, num_nodes, net, src, dst)) != GKV_OK)
        goto out;
    for (int e = 0; e < net && rc == GKV_OK; e++) {
        gkv_adj a;

        if ((rc = gkv_part_csc(p, e, &a)) == GKV_OK)
            rc = gkv_sgraph_set_adj(sg, e, GKV_DIR_IN, &a);
        if (rc == GKV_OK && gkv_pbook_has_csr(b) &&
            (rc = gkv_part_csr(p, e, &a)) == GKV_OK)
            rc = gkv_sgraph_set_adj(sg, e, GKV_DIR_OUT, &a);
    }
    if (rc == GKV_OK) {
        graph__sgraph_set_part(sg, p);
        *out = sg;
        sg = NULL;
    }
out:
    gkv_sgraph_free(sg);
    gkv__free(num_nodes);
    gkv__free(src);
    gkv__free(dst);
    return rc;
}
