/* client_edge_batch.c - edge mini-batches (link prediction) composed on
 * the client: the batch's edges (FIND_EDGES), exclusions, negative pairs,
 * then the blocks of the batch's nodes (gkv_client_sample_edge_batch). */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/base.h"
#include "graph/graph_seam.h"   /* graph__eb_* */
#include "graph/gkv_partition.h" /* GKV_PART_REVERSE_FEAT */
#include "net/gkv_net.h"
#include "net/wire.h"
#include "net/client_int.h"

/* ---- edge mini-batches -------------------------------------------------- */

/* The stored reverses of the batch's edges into out[0 .. sp->n): the
 * partitioner's reverse_eid feature of the positive edges' type (the edge
 * IDs here are renumbered per type: edge k of the reverse type is not the
 * reverse of edge k). Called with c->mu held. */
static gkv_err
eb_stored_reverse(gkv_client *c, const gkv_edge_batch_spec *sp, int64_t *out)
{
    const char *canon = gkv_pbook_etype_name(c->book, sp->etype);
    char name[GKV_NAME_MAX + 1], m[512];
    int nf = gkv_pbook_num_edge_feats(c->book, sp->etype), have = 0;
    int paired = gkv_pbook_reverse_etype(c->book, sp->etype);

    for (int i = 0; i < nf && !have; i++)
        have = strcmp(gkv_pbook_edge_feat(c->book, sp->etype, i),
                      GKV_PART_REVERSE_FEAT) == 0;
    if (have && paired < 0)
        return net__fail(GKV_EINVAL, "sample_edge_batch: partition config "
                         "without \"reverse_etypes\": it does not say which "
                         "edge type edge/%s/" GKV_PART_REVERSE_FEAT " holds "
                         "IDs of (a partition written before the field was; "
                         "partition again)", canon);
    if (!have || paired < 0 ||
        graph__eb_stored_name(name, sizeof name, canon) != 0) {
        graph__eb_no_stored(canon,
                            gkv_pbook_etype_name(c->book, sp->reverse_etype),
                            m, sizeof m);
        return net__fail(GKV_EINVAL, "sample_edge_batch: %s", m);
    }
    if (paired != sp->reverse_etype) {
        graph__eb_wrong_pair(canon, gkv_pbook_etype_name(c->book, paired),
                             gkv_pbook_etype_name(c->book, sp->reverse_etype),
                             m, sizeof m);
        return net__fail(GKV_EINVAL, "sample_edge_batch: %s", m);
    }
    return net__pull_locked(c, name, NULL, (const uint64_t *)sp->eids,
                            sp->n, out, sp->n * sizeof *out);
}

/* opts' exclusions plus the batch's edges (GKV_EXCLUDE_SELF) and their
 * reverses (GKV_EXCLUDE_REVERSE) into *ex (one gkv__malloc'd block:
 * pointers, counts, IDs); *ex NULL when nothing is excluded. */
static gkv_err
eb_exclude(gkv_client *c, const gkv_edge_batch_spec *sp,
           const gkv_sample_opts *o, void **ex, const int64_t *const **xv,
           const size_t **xn)
{
    int net_ = gkv_pbook_num_etypes(c->book);
    size_t total = 0, *cnt, at = 0;
    const int64_t **ptr;
    int64_t *ids;
    char *blk;

    *ex = NULL;
    *xv = o->exclude;
    *xn = o->exclude_n;
    if (!(sp->exclude & (GKV_EXCLUDE_SELF | GKV_EXCLUDE_REVERSE)) ||
        sp->n == 0)
        return GKV_OK;
    for (int e = 0; e < net_; e++)
        total += net__ex_count(o, e);
    total += 2 * sp->n;
    blk = gkv__malloc((size_t)net_ * (sizeof *ptr + sizeof *cnt) +
                      total * sizeof *ids);
    if (blk == NULL)
        return net__fail(GKV_ENOMEM, "sample_edge_batch: out of memory for "
                         "%zu excluded edges", total);
    ptr = (const int64_t **)blk;
    cnt = (size_t *)(blk + (size_t)net_ * sizeof *ptr);
    ids = (int64_t *)(blk + (size_t)net_ * (sizeof *ptr + sizeof *cnt));
    for (int e = 0; e < net_; e++) {
        size_t k = net__ex_count(o, e);
        ptr[e] = ids + at;
        if (k > 0)
            memcpy(ids + at, o->exclude[e], k * sizeof *ids);
        at += k;
        if ((sp->exclude & GKV_EXCLUDE_SELF) && e == sp->etype) {
            memcpy(ids + at, sp->eids, sp->n * sizeof *ids);
            at += sp->n, k += sp->n;
        }
        if ((sp->exclude & GKV_EXCLUDE_REVERSE) && e == sp->reverse_etype) {
            char m[256];
            gkv_err rc;

            /* stored ones into place, then checked like given ones */
            if (sp->reverse_eids == NULL &&
                (rc = eb_stored_reverse(c, sp, ids + at)) != GKV_OK) {
                gkv__free(blk);
                return rc;
            }
            rc = graph__eb_reverse(sp, sp->reverse_eids == NULL ? ids + at
                                   : NULL, ids + at, m, sizeof m);
            if (rc != GKV_OK) {
                gkv__free(blk);
                return net__fail(rc, "sample_edge_batch: %s", m);
            }
            at += sp->n, k += sp->n;
        }
        cnt[e] = k;
    }
    *ex = blk;
    *xv = ptr;
    *xn = cnt;
    return GKV_OK;
}

/* The seed set of an edge batch, per node type the endpoints in order of
 * first appearance (positive i's source, then its destination; then the
 * negatives' destinations), and the pairs in those local IDs into c->eb:
 * pos_src, pos_dst (n each), neg_src, neg_dst (n x k each). */
static gkv_err
eb_seeds(gkv_client *c, const gkv_edge_batch_spec *sp, uint64_t seed,
         const int64_t *src, const int64_t *dst, int64_t **uniq, size_t *nu)
{
    gkv_etype_info ei;
    size_t n = sp->n, k = (size_t)sp->num_neg, nneg = n * k, len[2] = {0, 0};
    int64_t *seq[2], nn_dst;
    size_t *map[2] = {NULL, NULL}, need = 2 * n + 2 * nneg;
    int same, st, dt;
    gkv_err rc = GKV_OK;

    gkv_pbook_etype_info(c->book, sp->etype, &ei);
    st = ei.src_ntype;
    dt = ei.dst_ntype;
    same = st == dt;
    nn_dst = gkv_pbook_num_nodes(c->book, dt);
    if (c->ebcap < need) {
        int64_t *p = gkv__malloc(need * sizeof *p + 8);
        if (p == NULL)
            return net__fail(GKV_ENOMEM, "sample_edge_batch: out of memory "
                             "for %zu pairs", n + nneg);
        gkv__free(c->eb);
        c->eb = p;
        c->ebcap = need;
    }
    /* the endpoints of each type in labelling order: seq[0] the source
     * type's, seq[1] the destination type's (one list when they are one
     * type) */
    seq[0] = gkv__malloc((2 * n + nneg) * sizeof *seq[0] + 8);
    seq[1] = same ? seq[0] : gkv__malloc((n + nneg) * sizeof *seq[1] + 8);
    if (seq[0] == NULL || seq[1] == NULL) {
        rc = net__fail(GKV_ENOMEM, "sample_edge_batch: out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        seq[0][len[0]++] = src[i];
        seq[same ? 0 : 1][len[same ? 0 : 1]++] = dst[i];
    }
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < k; j++)
            seq[same ? 0 : 1][len[same ? 0 : 1]++] =
                gkv_sample_negative(seed, sp->etype, sp->eids[i], j, nn_dst);
    for (int q = 0; q < (same ? 1 : 2); q++)
        if ((rc = net__dedup(seq[q], len[q], &uniq[q == 0 ? st : dt],
                             &nu[q == 0 ? st : dt], &map[q])) != GKV_OK)
            goto out;
    /* the pairs in local IDs */
    for (size_t i = 0, a = 0, b = 0; i < n; i++) {
        c->eb[i] = (int64_t)map[0][a++];
        c->eb[n + i] = (int64_t)(same ? map[0][a++] : map[1][b++]);
    }
    for (size_t i = 0, a = same ? 2 * n : n; i < n; i++)
        for (size_t j = 0; j < k; j++, a++) {
            c->eb[2 * n + i * k + j] = c->eb[i];
            c->eb[2 * n + nneg + i * k + j] =
                (int64_t)(same ? map[0][a] : map[1][a]);
        }
out:
    gkv__free(map[0]);
    gkv__free(map[1]);
    gkv__free(seq[0]);
    if (!same)
        gkv__free(seq[1]);
    return rc;
}

gkv_err
gkv_client_sample_edge_batch(gkv_client *c, const gkv_edge_batch_spec *spec,
                             const int *fanouts, int nfan, int nlayers,
                             const gkv_sample_opts *opts,
                             gkv_edge_batch *batch, gkv_block *blocks)
{
    static const gkv_sample_opts zero;
    const gkv_sample_opts *o = opts != NULL ? opts : &zero;
    gkv_sample_opts ox;
    int64_t *src = NULL, **uniq = NULL;
    size_t *nu = NULL, n;
    void *ex = NULL;
    int nnt = 0;
    gkv_err rc;

    net__clear();
    if (batch != NULL)
        memset(batch, 0, sizeof *batch);
    if (c == NULL || spec == NULL || batch == NULL || blocks == NULL)
        return net__fail(GKV_EINVAL, "sample_edge_batch: client, spec, batch "
                         "or blocks is NULL");
    if (nlayers < 1)
        return net__fail(GKV_EINVAL, "sample_edge_batch: nlayers %d: at least "
                         "one layer", nlayers);
    memset(blocks, 0, (size_t)nlayers * sizeof *blocks);
    /* held for the whole call: c->eb and the arena are this call's until
     * it returns (another thread's call would rewrite them) */
    pthread_mutex_lock(&c->mu);
    if ((rc = net__need_book(c, "sample_edge_batch")) != GKV_OK)
        goto out;
    {
        char m[256];
        if ((rc = graph__eb_check(spec, gkv_pbook_num_etypes(c->book), m,
                                  sizeof m)) != GKV_OK) {
            rc = net__fail(rc, "sample_edge_batch: %s", m);
            goto out;
        }
    }
    n = spec->n;
    if (spec->num_neg > 0 && n > SIZE_MAX / 8 / (size_t)spec->num_neg) {
        rc = net__fail(GKV_ENOMEM, "sample_edge_batch: %zu x %d negatives: "
                       "too many", n, spec->num_neg);
        goto out;
    }
    nnt = gkv_pbook_num_ntypes(c->book);
    src = gkv__malloc(2 * n * sizeof *src + 8);
    uniq = gkv__calloc((size_t)nnt, sizeof *uniq);
    nu = gkv__calloc((size_t)nnt, sizeof *nu);
    if (src == NULL || uniq == NULL || nu == NULL) {
        rc = net__fail(GKV_ENOMEM, "sample_edge_batch: out of memory");
        goto out;
    }
    /* fanouts and opts checked before any request (no seeds yet) */
    if ((rc = net__sample_args(c, "sample_edge_batch",
                               (const int64_t *const *)uniq, nu, fanouts, nfan,
                               nlayers, opts)) != GKV_OK)
        goto out;
    /* the positive edges' endpoints from their owners */
    if (n > 0 && (rc = net__find_edges_locked(c, spec->etype, spec->eids, n,
                                              src, src + n)) != GKV_OK)
        goto out;
    ox = *o;
    if ((rc = eb_exclude(c, spec, o, &ex, &ox.exclude, &ox.exclude_n)) !=
        GKV_OK ||
        (rc = eb_seeds(c, spec, o->seed, src, src + n, uniq, nu)) != GKV_OK)
        goto out;
    rc = net__blocks_locked(c, (const int64_t *const *)uniq, nu, fanouts, nfan,
                            nlayers, &ox, blocks);
    if (rc != GKV_OK)
        goto out;
    batch->pos_src = c->eb;
    batch->pos_dst = c->eb + n;
    batch->num_pos = n;
    batch->neg_src = c->eb + 2 * n;
    batch->neg_dst = c->eb + 2 * n + n * (size_t)spec->num_neg;
    batch->num_neg = n * (size_t)spec->num_neg;
out:
    pthread_mutex_unlock(&c->mu);
    for (int t = 0; uniq != NULL && t < nnt; t++)
        gkv__free(uniq[t]);
    gkv__free(uniq);
    gkv__free(nu);
    gkv__free(src);
    gkv__free(ex);
    return rc;
}
