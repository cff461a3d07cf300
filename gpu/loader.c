/* loader.c - gkv_gpu_loader: a trainer's mini-batch (blocks and input
 * features, from a gkv_loader or sampled through the graph servers) on its
 * GPU in one call. The host half and the device half are described in
 * loader_int.h. Host C:
 * the device work goes through the gkv_gpu_* calls and one private gather
 * (gpu__feat_gather_mixed). */
#include <stdio.h>
#include <string.h>
#include "base/base.h"
#include "gpu/gpu_c.h"
#include "gpu/loader_int.h"

#define ALIGN16(n) (((n) + 15) & ~(size_t)15)

/* Frees memory of one kind: host pinned ('dev' 0) or device ('dev' 1), or
 * malloc'd in a host-mode loader. */
static void
buf_free(const gkv_gpu_loader *l, int dev, void *p)
{
    if (p == NULL)
        return;
    if (l->host)
        gkv__free(p);
    else if (dev)
        gkv_gpu_free(p);
    else
        gkv_gpu_host_free(p);
}

/* Grows *p (of *cap bytes) to hold 'need' bytes; the contents are not
 * kept. */
static gkv_err
buf_grow(gkv_gpu_loader *l, int dev, void *p_, size_t *cap, size_t need,
         const char *what)
{
    void **p = (void **)p_, *q = NULL;
    size_t n;
    gkv_err rc = GKV_OK;
    char why[256];

    if (need <= *cap && *p != NULL)
        return GKV_OK;
    n = need + need / 2 + 256;
    if (l->host)
        q = gkv__malloc(n);
    else if (dev)
        rc = gkv_gpu_alloc(l->device, n, &q);
    else
        rc = gkv_gpu_host_alloc(n, &q);
    if (q == NULL) {
        snprintf(why, sizeof why, "%s", l->host ? "out of memory"
                 : gkv_gpu_errmsg());
        return gpu__fail(rc != GKV_OK ? rc : GKV_ENOMEM, "gkv_gpu_loader: "
                         "%zu bytes of %s memory for %s: %s", n,
                         dev ? "device" : "pinned host", what, why);
    }
    buf_free(l, dev, *p);
    *p = q;
    *cap = n;
    return GKV_OK;
}

/* A client call failed: the step and the client's detail. */
static gkv_err
net_fail(gkv_err rc, const char *step)
{
    return gpu__fail(rc, "gkv_gpu_loader_next: %s: %s", step,
                     gkv_net_errmsg());
}

void
gkv_gpu_loader_stop(gkv_gpu_loader *l)
{
    if (l == NULL)
        return;
    gkv_batch_release(l->held);
    l->held = NULL;
    gkv_loader_free(l->src);
    l->src = NULL;
}

void
gkv_gpu_loader_free(gkv_gpu_loader *l)
{
    if (l == NULL)
        return;
    gkv_gpu_loader_stop(l);
    for (int t = 0; l->t != NULL && t < l->nt; t++) {
        gkv__free(l->t[t].tensor);
        buf_free(l, 1, l->t[t].feat_dev);
    }
    buf_free(l, 0, l->pack);
    buf_free(l, 0, l->stage);
    buf_free(l, 1, l->dev);
    gkv__free(l->t);
    gkv__free(l->miss);
    gkv__free(l->nodes);
    gkv__free(l->edges);
    gkv__free(l->offs);
    gkv__free(l->feat_out);
    gkv__free(l->rb_out);
    gkv__free(l);
}

/* Type t's feature tensor and cache, from opts or the host-mode ranges. */
static gkv_err
type_init(gkv_gpu_loader *l, const gkv_pbook *b, int t,
          const gkv_gpu_loader_opts *o, const int64_t *ranges)
{
    struct gpu_ldr_type *T = &l->t[t];
    const char *tn = gkv_pbook_ntype_name(b, t);
    gkv_tensor_desc d;
    gkv_gpu_feat_info fi;
    size_t len;
    gkv_err rc;

    if (o->feat == NULL)
        return GKV_OK;
    len = strlen(tn) + strlen(o->feat) + 8;
    if ((T->tensor = gkv__malloc(len)) == NULL)
        return gpu__fail(GKV_ENOMEM, "gkv_gpu_loader_new: out of memory");
    snprintf(T->tensor, len, "node/%s/%s", tn, o->feat);
    rc = gkv_client_tensor_info(l->c, T->tensor, &d);
    if (rc == GKV_ENOTFOUND && ranges == NULL && o->cache != NULL &&
        o->cache[t] != NULL)
        return gpu__fail(GKV_EINVAL, "gkv_gpu_loader_new: cache[%d] given, "
                         "but the servers have no tensor '%s'", t,
                         T->tensor);
    if (rc == GKV_ENOTFOUND) {
        gkv__free(T->tensor);
        T->tensor = NULL;
        return GKV_OK;
    }
    if (rc != GKV_OK)
        return gpu__fail(rc, "gkv_gpu_loader_new: tensor '%s': %s",
                         T->tensor, gkv_net_errmsg());
    T->rb = d.row_bytes;
    if (ranges != NULL) {
        T->clo = ranges[2 * t];
        T->chi = ranges[2 * t + 1] > T->clo ? ranges[2 * t + 1] : T->clo;
        return GKV_OK;
    }
    if (o->cache == NULL || o->cache[t] == NULL)
        return GKV_OK;
    if ((rc = gkv_gpu_feat_info_get(o->cache[t], &fi)) != GKV_OK)
        return rc;
    if (fi.device != o->device)
        return gpu__fail(GKV_EINVAL, "gkv_gpu_loader_new: cache[%d] (node "
                         "type '%s') is on device %d, the loader on %d", t,
                         tn, fi.device, o->device);
    if (fi.row_bytes != T->rb)
        return gpu__fail(GKV_EINVAL, "gkv_gpu_loader_new: cache[%d] has "
                         "rows of %zu bytes, '%s' on the servers of %zu", t,
                         fi.row_bytes, T->tensor, T->rb);
    T->cache = o->cache[t];
    T->clo = fi.lo;
    T->chi = fi.hi;
    return GKV_OK;
}

/* opts.batches: the gkv_loader the batches come from, collecting the
 * feature of every type that has one (fidx: its index in a batch). */
static gkv_err
src_new(gkv_gpu_loader *l, gkv_client *c, const gkv_loader_opts *bo)
{
    gkv_loader_opts lo = *bo;
    gkv_typed_tensor *ft;
    char why[512];
    int k = 0;
    gkv_err rc;

    if (bo->feats != NULL || bo->nfeats != 0)
        return gpu__fail(GKV_EINVAL, "gkv_gpu_loader_new: opts.batches has "
                         "feats of its own (nfeats %d): leave them empty, the "
                         "GPU loader collects opts.feat of every node type",
                         bo->nfeats);
    if (bo->edge_seeds)
        return gpu__fail(GKV_ENOTSUP, "gkv_gpu_loader_new: opts.batches has "
                         "edge seeds: the GPU loader uploads node batches "
                         "only (no edge pairs); use the gkv_loader itself");
    if ((ft = gkv__calloc((size_t)l->nt + 1, sizeof *ft)) == NULL)
        return gpu__fail(GKV_ENOMEM, "gkv_gpu_loader_new: out of memory");
    for (int t = 0; t < l->nt; t++) {
        l->t[t].fidx = -1;
        if (l->t[t].rb == 0)
            continue;
        ft[k].type = t;
        ft[k].name = l->t[t].tensor;
        l->t[t].fidx = k++;
    }
    lo.feats = k > 0 ? ft : NULL;
    lo.nfeats = k;
    if (lo.client == NULL && lo.where != GKV_LOADER_LOCAL)
        lo.client = c;
    rc = gkv_loader_new(&l->src, &lo);
    gkv__free(ft);                 /* the loader copied the names */
    if (rc != GKV_OK) {
        snprintf(why, sizeof why, "%s", gkv_errmsg());
        return gpu__fail(rc, "gkv_gpu_loader_new: the host loader "
                         "(opts.batches): %s", why);
    }
    return GKV_OK;
}

gkv_err
gpu__ldr_new(gkv_gpu_loader **out, gkv_client *c,
             const gkv_gpu_loader_opts *opts, const int64_t *ranges)
{
    gkv_gpu_loader_opts o;
    gkv_gpu_loader *l;
    const gkv_pbook *b;
    size_t L = GPU_LDR_MAX_LAYERS;
    int any = 0;
    gkv_err rc;

    gpu__clear();
    if (out == NULL)
        return gpu__fail(GKV_EINVAL, "gkv_gpu_loader_new: out is NULL");
    *out = NULL;
    if (c == NULL)
        return gpu__fail(GKV_EINVAL, "gkv_gpu_loader_new: NULL client");
    if (opts != NULL)
        o = *opts;
    else
        memset(&o, 0, sizeof o);
    if (o.device < 0)
        return gpu__fail(GKV_EINVAL, "gkv_gpu_loader_new: device %d is "
                         "negative", o.device);
    if (o.feat != NULL && (o.feat[0] == '\0' || strchr(o.feat, '/')))
        return gpu__fail(GKV_EINVAL, "gkv_gpu_loader_new: feature name "
                         "'%s' is empty or has a '/' (give the name, e.g. "
                         "'feat', not the tensor)", o.feat);
    if ((b = gkv_client_pbook(c)) == NULL)
        return gpu__fail(GKV_ENOTSUP, "gkv_gpu_loader_new: the servers "
                         "serve a plain store, not a partitioned graph");
    if (ranges == NULL &&
        (rc = gpu__device(o.device, "gkv_gpu_loader_new")) != GKV_OK)
        return rc;
    if ((l = gkv__calloc(1, sizeof *l)) == NULL)
        return gpu__fail(GKV_ENOMEM, "gkv_gpu_loader_new: out of memory");
    l->c = c;
    l->device = o.device;
    l->host = ranges != NULL;
    l->nt = gkv_pbook_num_ntypes(b);
    l->ne = gkv_pbook_num_etypes(b);
    l->t = gkv__calloc((size_t)l->nt, sizeof *l->t);
    l->nodes = gkv__calloc(L * (size_t)l->nt, sizeof *l->nodes);
    l->edges = gkv__calloc(L * (size_t)l->ne + 1, sizeof *l->edges);
    l->offs = gkv__calloc(L * ((size_t)l->nt + 3 * (size_t)l->ne),
                          sizeof *l->offs);
    l->feat_out = gkv__calloc((size_t)l->nt, sizeof *l->feat_out);
    l->rb_out = gkv__calloc((size_t)l->nt, sizeof *l->rb_out);
    if (l->t == NULL || l->nodes == NULL || l->edges == NULL ||
        l->offs == NULL || l->feat_out == NULL || l->rb_out == NULL) {
        gkv_gpu_loader_free(l);
        return gpu__fail(GKV_ENOMEM, "gkv_gpu_loader_new: out of memory");
    }
    for (int t = 0; t < l->nt; t++) {
        if ((rc = type_init(l, b, t, &o, ranges)) != GKV_OK) {
            gkv_gpu_loader_free(l);
            return rc;
        }
        l->rb_out[t] = l->t[t].rb;
        any |= l->t[t].rb > 0;
    }
    if (o.cache != NULL && o.feat == NULL) {
        gkv_gpu_loader_free(l);
        return gpu__fail(GKV_EINVAL, "gkv_gpu_loader_new: caches given "
                         "without a feature name");
    }
    if (o.feat != NULL && !any) {
        gkv_gpu_loader_free(l);
        return gpu__fail(GKV_ENOTFOUND, "gkv_gpu_loader_new: no node type "
                         "has a tensor 'node/<ntype>/%s' on the servers",
                         o.feat);
    }
    if (o.batches != NULL && (rc = src_new(l, c, o.batches)) != GKV_OK) {
        gkv_gpu_loader_free(l);
        return rc;
    }
    *out = l;
    return GKV_OK;
}

gkv_err
gkv_gpu_loader_new(gkv_gpu_loader **out, gkv_client *c,
                   const gkv_gpu_loader_opts *opts)
{
    return gpu__ldr_new(out, c, opts, NULL);
}

/* Lays the block arrays out in pack and copies them in. */
static gkv_err
pack_blocks(gkv_gpu_loader *l, const gkv_block *hb, int nlayers)
{
    size_t len = 0, k = 0;
    gkv_err rc;

    for (int i = 0; i < nlayers; i++) {
        if (hb[i].num_ntypes != l->nt || hb[i].num_etypes != l->ne)
            return gpu__fail(GKV_EPROTO, "gkv_gpu_loader_next: block %d has "
                             "%d node and %d edge types, the graph %d and %d",
                             i, hb[i].num_ntypes, hb[i].num_etypes, l->nt,
                             l->ne);
        for (int t = 0; t < l->nt; t++) {
            gkv_block_nodes *bn = &l->nodes[i * l->nt + t];
            bn->num_src = hb[i].nodes[t].num_src;
            bn->num_dst = hb[i].nodes[t].num_dst;
            l->offs[k++] = len;
            len += ALIGN16(bn->num_src * sizeof(int64_t));
        }
        for (int e = 0; e < l->ne; e++) {
            l->edges[i * l->ne + e].n = hb[i].edges[e].n;
            for (int a = 0; a < 3; a++) {
                l->offs[k++] = len;
                len += ALIGN16(hb[i].edges[e].n * sizeof(int64_t));
            }
        }
    }
    for (int t = 0; t < l->nt; t++) {
        struct gpu_ldr_type *T = &l->t[t];
        T->ids_off = l->offs[t];
        T->n = T->rb > 0 ? hb[0].nodes[t].num_src : 0;
        T->miss_off = len;
        if (T->n > 0 && T->chi > T->clo)
            len += ALIGN16(T->n * sizeof(int64_t));
    }
    if ((rc = buf_grow(l, 0, &l->pack, &l->pack_cap, len,
                       "the blocks")) != GKV_OK)
        return rc;
    l->pack_len = len;
    k = 0;
    for (int i = 0; i < nlayers; i++) {
        for (int t = 0; t < l->nt; t++)
            memcpy(l->pack + l->offs[k++], hb[i].nodes[t].ids,
                   hb[i].nodes[t].num_src * sizeof(int64_t));
        for (int e = 0; e < l->ne; e++) {
            const gkv_sample_edges *se = &hb[i].edges[e];
            size_t m = se->n * sizeof(int64_t);
            if (m > 0) {
                memcpy(l->pack + l->offs[k], se->src, m);
                memcpy(l->pack + l->offs[k + 1], se->dst, m);
                memcpy(l->pack + l->offs[k + 2], se->eid, m);
            }
            k += 3;
        }
    }
    return GKV_OK;
}

/* Splits each type's input nodes between its cache and the rest (l->miss
 * their IDs, type by type) and lays the rest's rows out in stage. */
static gkv_err
split_inputs(gkv_gpu_loader *l)
{
    size_t total = 0, at = 0;

    l->stage_len = 0;
    for (int t = 0; t < l->nt; t++) {
        l->t[t].nmiss = 0;
        total += l->t[t].n;
    }
    if (total == 0)
        return GKV_OK;
    if (l->miss_cap < total) {
        uint64_t *m = gkv__malloc(total * sizeof *m);
        if (m == NULL)
            return gpu__fail(GKV_ENOMEM, "gkv_gpu_loader_next: out of "
                             "memory");
        gkv__free(l->miss);
        l->miss = m;
        l->miss_cap = total;
    }
    l->stage_len = 0;
    for (int t = 0; t < l->nt; t++) {
        struct gpu_ldr_type *T = &l->t[t];
        const int64_t *ids = (const int64_t *)(l->pack + T->ids_off);
        T->nmiss = 0;
        if (T->n == 0)
            continue;
        if (T->chi > T->clo) {
            int64_t *mi = (int64_t *)(l->pack + T->miss_off);
            for (size_t i = 0; i < T->n; i++) {
                if (ids[i] >= T->clo && ids[i] < T->chi) {
                    mi[i] = -1;
                } else {
                    mi[i] = (int64_t)T->nmiss;
                    l->miss[at + T->nmiss++] = (uint64_t)ids[i];
                }
            }
        } else {
            for (size_t i = 0; i < T->n; i++)
                l->miss[at + i] = (uint64_t)ids[i];
            T->nmiss = T->n;
        }
        at += T->nmiss;
        T->stage_off = l->stage_len;
        l->stage_len += ALIGN16(T->nmiss * T->rb);
        l->rows_cached += T->n - T->nmiss;
        l->rows_pulled += T->nmiss;
    }
    return buf_grow(l, 0, &l->stage, &l->stage_cap, l->stage_len,
                    "the input rows");
}

/* Pulls the rows split_inputs() left out of the caches into stage. */
static gkv_err
pull_inputs(gkv_gpu_loader *l)
{
    size_t at = 0;
    gkv_err rc;
    char step[256];

    if ((rc = split_inputs(l)) != GKV_OK)
        return rc;
    for (int t = 0; t < l->nt; t++) {
        struct gpu_ldr_type *T = &l->t[t];
        if (T->nmiss == 0)
            continue;
        rc = gkv_client_pull(l->c, T->tensor, l->miss + at, T->nmiss,
                             l->stage + T->stage_off, T->nmiss * T->rb);
        if (rc != GKV_OK) {
            snprintf(step, sizeof step, "pulling %zu rows of '%s'",
                     T->nmiss, T->tensor);
            return net_fail(rc, step);
        }
        at += T->nmiss;
    }
    return GKV_OK;
}

/* Copies the batch's rows that split_inputs() left out of the caches into
 * stage. */
static gkv_err
copy_inputs(gkv_gpu_loader *l, const gkv_batch *b)
{
    gkv_err rc;

    if ((rc = split_inputs(l)) != GKV_OK)
        return rc;
    for (int t = 0; t < l->nt; t++) {
        struct gpu_ldr_type *T = &l->t[t];
        const char *rows;
        char *dst = l->stage + T->stage_off;

        if (T->nmiss == 0)
            continue;
        if (T->fidx < 0 || T->fidx >= b->nfeats ||
            b->feat_bytes[T->fidx] != T->n * T->rb)
            return gpu__fail(GKV_EPROTO, "gkv_gpu_loader_next_batch: batch "
                             "%llu holds %zu bytes of '%s', not %zu input "
                             "rows of %zu", (unsigned long long)b->index,
                             T->fidx >= 0 && T->fidx < b->nfeats ?
                             b->feat_bytes[T->fidx] : 0, T->tensor, T->n,
                             T->rb);
        rows = b->feat[T->fidx];
        if (T->nmiss == T->n) {            /* no cache: all of them */
            memcpy(dst, rows, T->n * T->rb);
            continue;
        }
        {
            const int64_t *mi = (const int64_t *)(l->pack + T->miss_off);
            for (size_t i = 0; i < T->n; i++)
                if (mi[i] >= 0)
                    memcpy(dst + (size_t)mi[i] * T->rb, rows + i * T->rb,
                           T->rb);
        }
    }
    return GKV_OK;
}

gkv_err
gpu__ldr_take(gkv_gpu_loader *l)
{
    gkv_batch *b = NULL;
    char why[512];
    gkv_err rc;

    gkv_batch_release(l->held);
    l->held = NULL;
    l->nlayers = 0;
    l->rows_cached = l->rows_pulled = 0;
    if ((rc = gkv_loader_next(l->src, &b)) != GKV_OK) {
        snprintf(why, sizeof why, "%s", gkv_errmsg());
        return gpu__fail(rc, "gkv_gpu_loader_next_batch: the host loader: %s",
                         why);
    }
    if (b == NULL)                         /* the end of the epoch */
        return GKV_OK;
    l->held = b;
    if (b->nlayers < 1 || b->nlayers > GPU_LDR_MAX_LAYERS)
        return gpu__fail(GKV_EINVAL, "gkv_gpu_loader_next_batch: %d layers "
                         "(1 to %d)", b->nlayers, GPU_LDR_MAX_LAYERS);
    if ((rc = pack_blocks(l, b->blocks, b->nlayers)) != GKV_OK ||
        (rc = copy_inputs(l, b)) != GKV_OK)
        return rc;
    l->nlayers = b->nlayers;
    return GKV_OK;
}

gkv_err
gpu__ldr_stage(gkv_gpu_loader *l, const int64_t *const *seeds,
               const size_t *nseeds, const int *fanouts, int nfan,
               int nlayers, const gkv_sample_opts *opts)
{
    gkv_block hb[GPU_LDR_MAX_LAYERS];
    gkv_err rc;

    l->nlayers = 0;
    l->rows_cached = l->rows_pulled = 0;
    if (nlayers < 1 || nlayers > GPU_LDR_MAX_LAYERS)
        return gpu__fail(GKV_EINVAL, "gkv_gpu_loader_next: %d layers (1 to "
                         "%d)", nlayers, GPU_LDR_MAX_LAYERS);
    rc = gkv_client_sample_blocks(l->c, seeds, nseeds, fanouts, nfan,
                                  nlayers, opts, hb);
    if (rc != GKV_OK)
        return net_fail(rc, "sampling blocks through the servers");
    if ((rc = pack_blocks(l, hb, nlayers)) != GKV_OK ||
        (rc = pull_inputs(l)) != GKV_OK)
        return rc;
    l->nlayers = nlayers;
    return GKV_OK;
}

void
gpu__ldr_point(gkv_gpu_loader *l, char *base)
{
    size_t k = 0;

    for (int i = 0; i < l->nlayers; i++) {
        for (int t = 0; t < l->nt; t++)
            l->nodes[i * l->nt + t].ids = (const int64_t *)(base +
                                                            l->offs[k++]);
        for (int e = 0; e < l->ne; e++) {
            gkv_sample_edges *se = &l->edges[i * l->ne + e];
            se->src = (const int64_t *)(base + l->offs[k++]);
            se->dst = (const int64_t *)(base + l->offs[k++]);
            se->eid = (const int64_t *)(base + l->offs[k++]);
        }
        l->blocks[i].num_ntypes = l->nt;
        l->blocks[i].num_etypes = l->ne;
        l->blocks[i].nodes = &l->nodes[i * l->nt];
        l->blocks[i].edges = &l->edges[i * l->ne];
    }
}

/* The device half: one transfer of the blocks, one gather or copy per
 * type, then waits. */
static gkv_err
to_device(gkv_gpu_loader *l, void *stream)
{
    gkv_err rc;

    /* the loader's device, current: the copies below go to its default
     * stream (stream NULL), ordered with the gathers launched there */
    if ((rc = gpu__device(l->device, "gkv_gpu_loader_next")) != GKV_OK ||
        (rc = buf_grow(l, 1, &l->dev, &l->dev_cap, l->pack_len,
                       "the blocks")) != GKV_OK ||
        (l->pack_len > 0 &&
         (rc = gkv_gpu_copy(l->dev, l->pack, l->pack_len, stream)) != GKV_OK))
        return rc;
    gpu__ldr_point(l, l->dev);
    for (int t = 0; t < l->nt; t++) {
        struct gpu_ldr_type *T = &l->t[t];
        l->feat_out[t] = NULL;
        if (T->n == 0)
            continue;
        if ((rc = buf_grow(l, 1, &T->feat_dev, &T->feat_cap, T->n * T->rb,
                           "input features")) != GKV_OK)
            return rc;
        if (T->chi > T->clo)
            rc = gpu__feat_gather_mixed(T->cache,
                                        (const int64_t *)(l->dev + T->ids_off),
                                        T->n,
                                        (const int64_t *)(l->dev + T->miss_off),
                                        T->nmiss > 0 ? l->stage : NULL,
                                        T->stage_off, T->feat_dev, stream);
        else
            rc = gkv_gpu_copy(T->feat_dev, l->stage + T->stage_off,
                              T->n * T->rb, stream);
        if (rc != GKV_OK)
            return rc;
        l->feat_out[t] = T->feat_dev;
    }
    if ((rc = gkv_gpu_sync(stream)) != GKV_OK)
        return rc;
    for (int t = 0; t < l->nt; t++)
        if (l->t[t].cache != NULL && l->t[t].n > 0 &&
            (rc = gkv_gpu_feat_sync(l->t[t].cache, stream)) != GKV_OK)
            return rc;
    return GKV_OK;
}

/* The device half of a staged batch, then *out (host: the batch it came
 * from, or NULL). */
static gkv_err
hand_out(gkv_gpu_loader *l, gkv_gpu_batch *out, void *stream)
{
    gkv_err rc;

    if ((rc = to_device(l, stream)) != GKV_OK) {
        char why[512];
        /* A copy or gather queued before the failure may still read pack,
         * stage and dev: wait for it, so the next call may rewrite them. */
        snprintf(why, sizeof why, "%s", gkv_gpu_errmsg());
        (void)gkv_gpu_sync(stream);
        l->nlayers = 0;
        return gpu__fail(rc, "%s", why);
    }
    out->nlayers = l->nlayers;
    out->blocks = l->blocks;
    out->feat_dev = l->feat_out;
    out->row_bytes = l->rb_out;
    out->rows_cached = l->rows_cached;
    out->rows_pulled = l->rows_pulled;
    out->host = l->held;
    return GKV_OK;
}

/* The checks both calls start with; 'src': whether the call is the one
 * of a loader with opts.batches. */
static gkv_err
next_check(gkv_gpu_loader *l, gkv_gpu_batch *out, int src, const char *fn)
{
    gpu__clear();
    if (out != NULL)
        memset(out, 0, sizeof *out);
    if (l == NULL || out == NULL)
        return gpu__fail(GKV_EINVAL, "%s: NULL %s", fn,
                         l == NULL ? "loader" : "out");
    if (l->host)
        return gpu__fail(GKV_EINVAL, "%s: a host-mode loader has no device",
                         fn);
    if (src && l->src == NULL)
        return gpu__fail(GKV_EINVAL, "%s: this loader was made without "
                         "opts.batches: give each batch's seeds to "
                         "gkv_gpu_loader_next()", fn);
    if (!src && l->src != NULL)
        return gpu__fail(GKV_EINVAL, "%s: this loader takes its batches from "
                         "its gkv_loader (opts.batches): call "
                         "gkv_gpu_loader_next_batch()", fn);
    return GKV_OK;
}

gkv_err
gkv_gpu_loader_next(gkv_gpu_loader *l, const int64_t *const *seeds,
                    const size_t *nseeds, const int *fanouts, int nfan,
                    int nlayers, const gkv_sample_opts *opts,
                    gkv_gpu_batch *out, void *stream)
{
    gkv_err rc;

    if ((rc = next_check(l, out, 0, "gkv_gpu_loader_next")) != GKV_OK)
        return rc;
    if ((rc = gpu__ldr_stage(l, seeds, nseeds, fanouts, nfan, nlayers,
                             opts)) != GKV_OK) {
        l->nlayers = 0;
        return rc;
    }
    return hand_out(l, out, stream);
}

gkv_err
gkv_gpu_loader_next_batch(gkv_gpu_loader *l, gkv_gpu_batch *out,
                          void *stream)
{
    gkv_err rc;

    if ((rc = next_check(l, out, 1, "gkv_gpu_loader_next_batch")) != GKV_OK)
        return rc;
    if ((rc = gpu__ldr_take(l)) != GKV_OK) {
        l->nlayers = 0;
        return rc;
    }
    if (l->nlayers == 0)                   /* the end of the epoch */
        return GKV_OK;
    return hand_out(l, out, stream);
}

gkv_err
gkv_gpu_loader_epoch(gkv_gpu_loader *l, uint64_t epoch)
{
    gkv_err rc;
    char why[512];

    gpu__clear();
    if (l == NULL || l->src == NULL)
        return gpu__fail(GKV_EINVAL, "gkv_gpu_loader_epoch: %s",
                         l == NULL ? "NULL loader" : "this loader was made "
                         "without opts.batches");
    gkv_batch_release(l->held);
    l->held = NULL;
    l->nlayers = 0;
    if ((rc = gkv_loader_epoch(l->src, epoch)) != GKV_OK) {
        snprintf(why, sizeof why, "%s", gkv_errmsg());
        return gpu__fail(rc, "gkv_gpu_loader_epoch: %s", why);
    }
    return GKV_OK;
}
