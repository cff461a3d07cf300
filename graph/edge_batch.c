/* edge_batch.c - edge mini-batches (gkv_sample_edge_batch): the positive
 * edges' endpoints as seeds, negative destinations from the exact
 * generator (gkv_sample_negative), the batch's edges and their reverses
 * excluded from the blocks sampled around them. */
#include <stdarg.h>
#include <stdio.h>
#include "graph/gkv_partition.h"
#include "graph/sample_int.h"

/* Local ID of node v of type t in list L (appending it when new). */
static inline int64_t
label(gkv_sampler *s, struct blay *L, int t, int64_t v)
{
    amark *mk = s->mk[t];
    uint64_t m = LOAD(&mk[v]);

    if (m == 0) {
        L->ids[t][L->nodes[t].num_src] = v;
        m = ++L->nodes[t].num_src;
        STORE(&mk[v], m);
    }
    return (int64_t)m - 1;
}

/* Records 'fmt' in msg[0 .. cap) and returns rc. */
static gkv_err
eb_fail(char *msg, size_t cap, gkv_err rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static gkv_err
eb_fail(char *msg, size_t cap, gkv_err rc, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, cap, fmt, ap);
    va_end(ap);
    return rc;
}

gkv_err
graph__eb_check(const gkv_edge_batch_spec *sp, int num_etypes, char *msg,
                size_t cap)
{
    if (sp->etype < 0 || sp->etype >= num_etypes)
        return eb_fail(msg, cap, GKV_EINVAL, "spec->etype %d: the graph has "
                       "%d edge types", sp->etype, num_etypes);
    if (sp->n > 0 && sp->eids == NULL)
        return eb_fail(msg, cap, GKV_EINVAL, "spec->eids is NULL");
    if (sp->num_neg < 0)
        return eb_fail(msg, cap, GKV_EINVAL, "spec->num_neg %d is negative",
                       sp->num_neg);
    if (sp->exclude & ~(GKV_EXCLUDE_SELF | GKV_EXCLUDE_REVERSE))
        return eb_fail(msg, cap, GKV_EINVAL, "spec->exclude 0x%x has unknown "
                       "bits", sp->exclude);
    if (!(sp->exclude & GKV_EXCLUDE_REVERSE))
        return GKV_OK;
    if (sp->reverse_etype < 0 || sp->reverse_etype >= num_etypes)
        return eb_fail(msg, cap, GKV_EINVAL, "spec->reverse_etype %d: the "
                       "graph has %d edge types", sp->reverse_etype,
                       num_etypes);
    if (sp->reverse_eids == NULL && sp->reverse_etype == sp->etype)
        return eb_fail(msg, cap, GKV_EINVAL, "GKV_EXCLUDE_REVERSE needs "
                       "reverse_eids, or a reverse_etype other than the "
                       "batch's");
    if (sp->reverse_eids != NULL && sp->reverse_n < 0)
        return eb_fail(msg, cap, GKV_EINVAL, "spec->reverse_n %lld is "
                       "negative", (long long)sp->reverse_n);
    return GKV_OK;
}

int
graph__eb_stored_name(char *buf, size_t cap, const char *canon)
{
    int n = snprintf(buf, cap, "edge/%s/" GKV_PART_REVERSE_FEAT, canon);

    return n < 0 || (size_t)n >= cap ? -1 : 0;
}

gkv_err
graph__eb_no_stored(const char *canon, const char *rev_canon, char *msg,
                    size_t cap)
{
    return eb_fail(msg, cap, GKV_EINVAL, "GKV_EXCLUDE_REVERSE without "
                   "reverse_eids on a partitioned graph needs the edge "
                   "feature 'edge/%s/" GKV_PART_REVERSE_FEAT "' (partition "
                   "with --reverse-etypes %s=%s): partitioning renumbers "
                   "each edge type on its own, so edge k of '%s' is not "
                   "the reverse of edge k of '%s'; or give reverse_eids in "
                   "the new IDs (from mapping/edge-*.npy)", canon, canon,
                   rev_canon, rev_canon, canon);
}

gkv_err
graph__eb_wrong_pair(const char *canon, const char *paired, const char *given,
                     char *msg, size_t cap)
{
    return eb_fail(msg, cap, GKV_EINVAL, "spec->reverse_etype is '%s', but "
                   "'%s' was partitioned with '%s' as its reverse type (its "
                   "reverse_eid holds edge IDs of that type)", given, canon,
                   paired);
}

gkv_err
graph__eb_reverse(const gkv_edge_batch_spec *sp, const int64_t *stored,
                  int64_t *out, char *msg, size_t cap)
{
    for (size_t i = 0; i < sp->n; i++) {
        int64_t id = sp->eids[i], r = stored != NULL ? stored[i] : id;
        if (sp->reverse_eids != NULL) {
            if (id < 0 || id >= sp->reverse_n)
                return eb_fail(msg, cap, GKV_ERANGE, "positive edge eids[%zu] "
                               "= %lld is beyond reverse_eids (%lld entries)",
                               i, (long long)id, (long long)sp->reverse_n);
            r = sp->reverse_eids[id];
        }
        if (r < 0)
            return eb_fail(msg, cap, GKV_ERANGE, "the reverse of edge %lld is "
                           "%lld, not an edge ID", (long long)id,
                           (long long)r);
        out[i] = r;
    }
    return GKV_OK;
}

/* The stored reverses of spec's positive edges (held by this partition)
 * into out[0 .. n): the partitioner's reverse_eid feature. */
static gkv_err
part_reverse(gkv_sampler *s, const gkv_edge_batch_spec *spec, int64_t *out)
{
    const gkv_pbook *b = gkv_part_book(s->sg->part);
    gkv_store *st = gkv_part_store(s->sg->part);
    const char *canon = gkv_pbook_etype_name(b, spec->etype);
    char name[GKV_NAME_MAX + 1];
    gkv_tensor_desc d;
    gkv_err rc;

    int paired = gkv_pbook_reverse_etype(b, spec->etype);

    if (paired < 0 && graph__eb_stored_name(name, sizeof name, canon) == 0 &&
        gkv_tensor_info(st, NULL, name, &d) == GKV_OK)
        return s_fail(s, GKV_EINVAL, "partition config without "
                      "\"reverse_etypes\": it does not say which edge type "
                      "'%s' holds IDs of (a partition written before the "
                      "field was; partition again)", name);
    if (paired < 0 || graph__eb_stored_name(name, sizeof name, canon) != 0 ||
        (rc = gkv_tensor_info(st, NULL, name, &d)) == GKV_ENOTFOUND)
        return graph__s_eb(s, graph__eb_no_stored(canon,
                                  gkv_pbook_etype_name(b, spec->reverse_etype),
                                  s->ebmsg, sizeof s->ebmsg));
    if (rc != GKV_OK)
        return s_fail(s, rc, "reverse edges: %s", gkv_store_errmsg(st));
    if (paired != spec->reverse_etype)
        return graph__s_eb(s, graph__eb_wrong_pair(canon,
                                  gkv_pbook_etype_name(b, paired),
                                  gkv_pbook_etype_name(b, spec->reverse_etype),
                                  s->ebmsg, sizeof s->ebmsg));
    if (d.dtype != GKV_I64 || d.row_bytes != 8)
        return s_fail(s, GKV_ESHAPE, "tensor '%s' is not one int64 per edge",
                      name);
    if ((rc = gkv_tensor_pull(st, NULL, name, (const uint64_t *)spec->eids,
                              spec->n, out, spec->n * 8)) != GKV_OK)
        return s_fail(s, rc, "reverse edges: %s", gkv_store_errmsg(st));
    return GKV_OK;
}

static gkv_err
edge_batch_call(gkv_sampler *s, const gkv_edge_batch_spec *spec,
                const int *fanouts, int nfan, int nlayers,
                const gkv_sample_opts *opts, gkv_edge_batch *batch,
                gkv_block *blocks)
{
    const gkv_sgraph *sg = s->sg;
    size_t n, k, nneg;
    int et, st, dt;
    struct blay *L;
    gkv_err rc;

    if (batch != NULL)
        memset(batch, 0, sizeof *batch);
    if (spec == NULL || batch == NULL || blocks == NULL)
        return s_fail(s, GKV_EINVAL, "spec, batch or blocks is NULL");
    if (nlayers < 1)
        return s_fail(s, GKV_EINVAL, "nlayers %d: at least one layer",
                      nlayers);
    memset(blocks, 0, (size_t)nlayers * sizeof *blocks);
    if ((rc = graph__s_eb(s, graph__eb_check(spec, s->net, s->ebmsg,
                                      sizeof s->ebmsg))) != GKV_OK)
        return rc;
    et = spec->etype;
    n = spec->n;
    if ((rc = graph__fan_check(s, fanouts, nfan, nlayers)) != GKV_OK)
        return rc;
    k = (size_t)spec->num_neg;
    if (k > 0 && n > SIZE_MAX / 4 / k)
        return s_fail(s, GKV_ENOMEM, "%zu x %zu negatives: too many", n, k);
    nneg = n * k;
    if (graph__grow(&s->pb[0], &s->pbcap[0], n, sizeof *s->pb[0]) ||
        graph__grow(&s->pb[1], &s->pbcap[1], n, sizeof *s->pb[1]) ||
        graph__grow(&s->pb[2], &s->pbcap[2], nneg, sizeof *s->pb[2]) ||
        graph__grow(&s->pb[3], &s->pbcap[3], nneg, sizeof *s->pb[3]))
        return s_fail(s, GKV_ENOMEM, "out of memory for %zu pairs",
                      n + nneg);
    if ((rc = gkv_sgraph_find_edges(sg, et, spec->eids, n, s->pb[0],
                                    s->pb[1])) != GKV_OK)
        return s_fail(s, rc, "positive edges: %s", gkv_sgraph_errmsg(sg));
    if ((rc = graph__opts_prep(s, opts, fanouts, nfan, nlayers)) != GKV_OK)
        return rc;
    if ((spec->exclude & GKV_EXCLUDE_SELF) &&
        (rc = graph__ex_add(s, et, spec->eids, n,
                            "the batch's edges")) != GKV_OK)
        return rc;
    if (spec->exclude & GKV_EXCLUDE_REVERSE) {
        if (graph__grow(&s->tmpv, &s->tmpcap, n, sizeof *s->tmpv))
            return s_fail(s, GKV_ENOMEM, "out of memory for %zu reverse "
                          "edges", n);
        if (spec->reverse_eids == NULL && sg->part != NULL &&
            (rc = part_reverse(s, spec, s->tmpv)) != GKV_OK)
            return rc;
        if ((rc = graph__s_eb(s, graph__eb_reverse(spec,
                                  spec->reverse_eids == NULL &&
                                  sg->part != NULL ? s->tmpv : NULL, s->tmpv,
                                  s->ebmsg, sizeof s->ebmsg))) != GKV_OK)
            return rc;
        if ((rc = graph__ex_add(s, spec->reverse_etype, s->tmpv, n,
                                "the reverse edges")) != GKV_OK)
            return rc;
    }
    graph__ex_finish(s);
    if ((rc = graph__markers_alloc(s)) != GKV_OK ||
        (rc = graph__lay_reserve(s, nlayers)) != GKV_OK)
        return rc;
    L = &s->lay[nlayers - 1];
    st = sg->snt[et];
    dt = sg->dnt[et];
    for (int t = 0; t < s->nnt; t++) {
        L->nodes[t].num_src = L->nodes[t].num_dst = 0;
        if ((t == st || t == dt) &&
            graph__grow(&L->ids[t], &L->idcap[t], 2 * n + nneg,
                        sizeof *L->ids[t]))
            return s_fail(s, GKV_ENOMEM, "out of memory for %zu seeds",
                          2 * n + nneg);
    }
    for (size_t i = 0; i < n; i++) {
        s->pb[0][i] = label(s, L, st, s->pb[0][i]);
        s->pb[1][i] = label(s, L, dt, s->pb[1][i]);
    }
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < k; j++) {
            int64_t v = gkv_sample_negative(s->R.seed, et, spec->eids[i], j,
                                            sg->nn[dt]);
            s->pb[2][i * k + j] = s->pb[0][i];
            s->pb[3][i * k + j] = label(s, L, dt, v);
        }
    }
    for (int t = 0; t < s->nnt; t++)
        L->nodes[t].num_dst = L->nodes[t].num_src;
    if ((rc = graph__blocks_run(s, fanouts, nfan, nlayers, blocks)) != GKV_OK)
        return rc;
    batch->pos_src = s->pb[0];
    batch->pos_dst = s->pb[1];
    batch->num_pos = n;
    batch->neg_src = s->pb[2];
    batch->neg_dst = s->pb[3];
    batch->num_neg = nneg;
    return GKV_OK;
}

int64_t
gkv_sample_negative(uint64_t seed, int etype, int64_t eid, uint64_t j,
                    int64_t num_dst_nodes)
{
    uint64_t bv;

    if (num_dst_nodes <= 0)
        return 0;
    bv = absorb(absorb(absorb(absorb(DOM_NEG, seed), 0), (uint64_t)etype),
                (uint64_t)eid);
    return (int64_t)below(draw(bv, j), (uint64_t)num_dst_nodes);
}

gkv_err
gkv_sample_edge_batch(gkv_sampler *s, const gkv_edge_batch_spec *spec,
                      const int *fanouts, int nfan, int nlayers,
                      const gkv_sample_opts *opts, gkv_edge_batch *batch,
                      gkv_block *blocks)
{
    gkv_err rc;

    if (s == NULL)
        return GKV_EINVAL;
    graph__call_begin(s);
    rc = edge_batch_call(s, spec, fanouts, nfan, nlayers, opts, batch,
                         blocks);
    graph__call_end(s, rc);
    return rc;
}
