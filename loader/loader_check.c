/* loader_check.c - what gkv_loader_new checks and resolves before any
 * worker starts: the source of the mode, the graph's counts, the seeds
 * (node or edge IDs: given, or the node_split / edge_split of a mask),
 * the edge seeds' options, the sampling options and the tensors a batch
 * collects. Every failure names what was wrong. */
#include <stdlib.h>
#include <string.h>
#include "loader/loader_int.h"

#define LOADER_FLAGS (GKV_LOADER_DROP_LAST | GKV_LOADER_NO_SHUFFLE | \
                      GKV_LOADER_PINNED)
#define LOADER_SAMPLE_FLAGS (GKV_SAMPLE_REPLACE | GKV_SAMPLE_WEIGHTED)

static const char *const mode_name[] = {"LOCAL", "CLIENT", "SERVER"};

/* The partition book of the mode's source, or NULL (LOCAL with an sg). */
static const gkv_pbook *
book_of(const gkv_loader *l)
{
    if (l->where == GKV_LOADER_LOCAL)
        return l->o.part != NULL ? gkv_part_book(l->o.part) : NULL;
    return gkv_client_pbook(l->client);
}

/* The mode and its source; the counts of node and edge types. */
static gkv_err
check_source(gkv_loader *l, const gkv_loader_opts *o)
{
    const gkv_pbook *b;
    gkv_err rc;

    l->where = o->where;
    if (o->where < GKV_LOADER_LOCAL || o->where > GKV_LOADER_SERVER)
        return gkv__fail(NULL, GKV_EINVAL, "loader: 'where' is %d, not "
                         "GKV_LOADER_LOCAL, _CLIENT or _SERVER", o->where);
    if (o->where == GKV_LOADER_LOCAL) {
        if ((o->part == NULL) == (o->sg == NULL))
            return gkv__fail(NULL, GKV_EINVAL, "loader: LOCAL needs either "
                             "'part' or 'sg' (with 'store'), %s",
                             o->part == NULL ? "neither was given"
                                             : "not both");
        if (o->part != NULL) {
            if (gkv_pbook_num_parts(gkv_part_book(o->part)) != 1)
                return gkv__fail(NULL, GKV_EINVAL, "loader: LOCAL 'part' is "
                                 "partition %d of %d: it needs a "
                                 "one-partition config (or 'sg' and "
                                 "'store' of the whole graph)",
                                 gkv_part_id(o->part),
                                 gkv_pbook_num_parts(gkv_part_book(o->part)));
            if ((rc = gkv_part_sgraph(o->part, &l->own_sg)) != GKV_OK)
                return gkv__fail(NULL, rc, "loader: %s", gkv_errmsg());
            l->sg = l->own_sg;
            l->store = gkv_part_store(o->part);
        } else {
            l->sg = o->sg;
            l->store = o->store;
        }
    } else {
        if (o->client == NULL)
            return gkv__fail(NULL, GKV_EINVAL, "loader: %s needs 'client'",
                             mode_name[o->where]);
        l->client = o->client;
        if (gkv_client_pbook(o->client) == NULL)
            return gkv__fail(NULL, GKV_ENOTSUP, "loader: the client's "
                             "servers serve no partitioned graph");
    }
    if ((b = book_of(l)) != NULL) {
        l->num_ntypes = gkv_pbook_num_ntypes(b);
        l->num_etypes = gkv_pbook_num_etypes(b);
    } else {
        l->num_ntypes = gkv_sgraph_num_ntypes(l->sg);
        l->num_etypes = gkv_sgraph_num_etypes(l->sg);
    }
    l->nnodes = gkv__calloc((size_t)l->num_ntypes + 1, sizeof *l->nnodes);
    l->nedges = gkv__calloc((size_t)l->num_etypes + 1, sizeof *l->nedges);
    if (l->nnodes == NULL || l->nedges == NULL)
        return gkv__fail(NULL, GKV_ENOMEM, "loader: out of memory");
    for (int t = 0; t < l->num_ntypes; t++)
        l->nnodes[t] = b != NULL ? gkv_pbook_num_nodes(b, t)
                                 : gkv_sgraph_num_nodes(l->sg, t);
    for (int e = 0; e < l->num_etypes; e++)
        l->nedges[e] = b != NULL ? gkv_pbook_num_edges(b, e) : -1;
    return GKV_OK;
}

/* The sizes, flags and fanouts. */
static gkv_err
check_shape(gkv_loader *l, const gkv_loader_opts *o)
{
    size_t nf;

    if (o->batch_size == 0)
        return gkv__fail(NULL, GKV_EINVAL, "loader: batch_size is 0");
    if (o->flags & ~LOADER_FLAGS)
        return gkv__fail(NULL, GKV_EINVAL, "loader: unknown flags 0x%x",
                         o->flags & ~LOADER_FLAGS);
    if (o->flags & GKV_LOADER_PINNED) {
#ifndef GKV_HAVE_CUDA
        return gkv__fail(NULL, GKV_ENOTSUP, "loader: GKV_LOADER_PINNED needs "
                         "a build with CUDA");
#else
        void *probe = NULL;
        int cerr;

        if (cudaHostAlloc == NULL || cudaFreeHost == NULL)
            return gkv__fail(NULL, GKV_ENOTSUP, "loader: GKV_LOADER_PINNED "
                             "needs the CUDA runtime linked in");
        if ((cerr = cudaHostAlloc(&probe, 64, 0)) != 0)
            return gkv__fail(NULL, GKV_ENOTSUP, "loader: GKV_LOADER_PINNED: "
                             "the CUDA runtime gives no page-locked memory "
                             "(cudaHostAlloc: error %d)", cerr);
        (void)cudaFreeHost(probe);
        l->pinned = 1;
#endif
    }
    if (o->prefetch < 0 || o->prefetch > LOADER_PREFETCH_MAX)
        return gkv__fail(NULL, GKV_EINVAL, "loader: prefetch %d is not in "
                         "[0, %d]", o->prefetch, LOADER_PREFETCH_MAX);
    if (o->workers < 0 || o->workers > LOADER_WORKERS_MAX)
        return gkv__fail(NULL, GKV_EINVAL, "loader: workers %d is not in "
                         "[0, %d]", o->workers, LOADER_WORKERS_MAX);
    if (o->sampler_threads < 0 || o->sampler_threads > GKV_SAMPLE_THREADS_MAX)
        return gkv__fail(NULL, GKV_EINVAL, "loader: sampler_threads %d is "
                         "not in [0, %d]", o->sampler_threads,
                         GKV_SAMPLE_THREADS_MAX);
    l->prefetch = o->prefetch == 0 ? 2 : o->prefetch;
    l->nworkers = o->workers == 0 ? 1 : o->workers;
    if (o->nlayers < 1)
        return gkv__fail(NULL, GKV_EINVAL, "loader: nlayers is %d (at least "
                         "1)", o->nlayers);
    if (l->where == GKV_LOADER_SERVER && o->nlayers > LOADER_SERVER_LAYERS)
        return gkv__fail(NULL, GKV_EINVAL, "loader: nlayers is %d: batches "
                         "sampled on the servers (GKV_LOADER_SERVER) have "
                         "at most %d", o->nlayers, LOADER_SERVER_LAYERS);
    if (o->nfan != 1 && o->nfan != l->num_etypes)
        return gkv__fail(NULL, GKV_EINVAL, "loader: nfan is %d: fanouts give "
                         "1 or %d (the edge types) per layer", o->nfan,
                         l->num_etypes);
    if (o->fanouts == NULL)
        return gkv__fail(NULL, GKV_EINVAL, "loader: no fanouts");
    nf = (size_t)o->nlayers * (size_t)o->nfan;
    for (size_t i = 0; i < nf; i++)
        if (o->fanouts[i] < -1)
            return gkv__fail(NULL, GKV_EINVAL, "loader: fanout %d of layer "
                             "%zu (edge type %zu) is below -1",
                             o->fanouts[i], i / (size_t)o->nfan,
                             i % (size_t)o->nfan);
    if ((l->fanouts = gkv__malloc(nf * sizeof *l->fanouts)) == NULL)
        return gkv__fail(NULL, GKV_ENOMEM, "loader: out of memory");
    memcpy(l->fanouts, o->fanouts, nf * sizeof *l->fanouts);
    if (o->dir != GKV_DIR_IN && o->dir != GKV_DIR_OUT)
        return gkv__fail(NULL, GKV_EINVAL, "loader: dir %d is not GKV_DIR_IN "
                         "or GKV_DIR_OUT", o->dir);
    if (o->sample_flags & ~LOADER_SAMPLE_FLAGS)
        return gkv__fail(NULL, GKV_EINVAL, "loader: unknown sample_flags "
                         "0x%x", o->sample_flags & ~LOADER_SAMPLE_FLAGS);
    return GKV_OK;
}

/* The description of tensor 'name' from the mode's source. */
static gkv_err
tensor_desc(gkv_loader *l, const char *what, const char *name,
            gkv_tensor_desc *d)
{
    gkv_err rc;

    if (name == NULL)
        return gkv__fail(NULL, GKV_EINVAL, "loader: %s: no tensor name",
                         what);
    if (l->where == GKV_LOADER_LOCAL) {
        if (l->store == NULL)
            return gkv__fail(NULL, GKV_EINVAL, "loader: %s '%s': LOCAL with "
                             "'sg' reads rows from 'store', which is NULL",
                             what, name);
        rc = gkv_tensor_info(l->store, NULL, name, d);
    } else {
        rc = gkv_client_tensor_info(l->client, name, d);
    }
    if (rc == GKV_ENOTFOUND)
        return gkv__fail(NULL, rc, "loader: %s: no tensor '%s'", what, name);
    if (rc != GKV_OK)
        return gkv__fail(NULL, rc, "loader: %s '%s': %s", what, name,
                         gkv_errmsg());
    return GKV_OK;
}

/* One tensor of a batch: its type in range, its rows covering the type's
 * count (exactly, for a label). */
static gkv_err
tensor_take(gkv_loader *l, const char *what, int edge, int exact, int type,
            const char *name, loader_tensor *t)
{
    gkv_tensor_desc d;
    int ntypes = edge ? l->num_etypes : l->num_ntypes;
    int64_t count;
    gkv_err rc;

    if (type < 0 || type >= ntypes)
        return gkv__fail(NULL, GKV_EINVAL, "loader: %s '%s': %s type %d is "
                         "not one of the graph's %d", what,
                         name ? name : "(null)", edge ? "edge" : "node",
                         type, ntypes);
    if ((rc = tensor_desc(l, what, name, &d)) != GKV_OK)
        return rc;
    count = edge ? l->nedges[type] : l->nnodes[type];
    if (exact && (d.lo != 0 || d.hi != (uint64_t)count))
        return gkv__fail(NULL, GKV_ESHAPE, "loader: %s '%s' has %llu rows "
                         "[%llu, %llu), not one per node of the seed type "
                         "(%lld)", what, name,
                         (unsigned long long)(d.hi - d.lo),
                         (unsigned long long)d.lo, (unsigned long long)d.hi,
                         (long long)count);
    if (count >= 0 && (d.lo > 0 || d.hi < (uint64_t)count))
        return gkv__fail(NULL, GKV_ERANGE, "loader: %s '%s' holds rows "
                         "[%llu, %llu), which do not cover the %lld %s of "
                         "its type %d", what, name, (unsigned long long)d.lo,
                         (unsigned long long)d.hi, (long long)count,
                         edge ? "edges" : "nodes", type);
    t->type = type;
    t->row_bytes = d.row_bytes;
    if ((t->name = gkv__strdup(name)) == NULL)
        return gkv__fail(NULL, GKV_ENOMEM, "loader: out of memory");
    return GKV_OK;
}

static gkv_err
check_tensors(gkv_loader *l, const gkv_loader_opts *o)
{
    char what[64];
    gkv_err rc;

    if (o->nfeats < 0 || (o->nfeats > 0 && o->feats == NULL) ||
        o->nefeats < 0 || (o->nefeats > 0 && o->efeats == NULL))
        return gkv__fail(NULL, GKV_EINVAL, "loader: bad %s (count %d)",
                         o->nfeats < 0 || (o->nfeats > 0 && o->feats == NULL)
                         ? "feats" : "efeats",
                         o->nfeats < 0 || (o->nfeats > 0 && o->feats == NULL)
                         ? o->nfeats : o->nefeats);
    l->feats = gkv__calloc((size_t)o->nfeats + 1, sizeof *l->feats);
    l->efeats = gkv__calloc((size_t)o->nefeats + 1, sizeof *l->efeats);
    if (l->feats == NULL || l->efeats == NULL)
        return gkv__fail(NULL, GKV_ENOMEM, "loader: out of memory");
    for (int f = 0; f < o->nfeats; f++) {
        snprintf(what, sizeof what, "feats[%d]", f);
        if ((rc = tensor_take(l, what, 0, 0, o->feats[f].type,
                              o->feats[f].name, &l->feats[f])) != GKV_OK)
            return rc;
    }
    if (o->label != NULL &&
        (rc = tensor_take(l, "label", 0, 1, o->seed_ntype, o->label,
                          &l->label)) != GKV_OK)
        return rc;
    for (int f = 0; f < o->nefeats; f++) {
        snprintf(what, sizeof what, "efeats[%d]", f);
        if ((rc = tensor_take(l, what, 1, 0, o->efeats[f].type,
                              o->efeats[f].name, &l->efeats[f])) != GKV_OK)
            return rc;
    }
    return GKV_OK;
}

/* Edge type e's tensor 'name' of edge_w_feat[e] in the mode's source:
 * one element a row, rows covering the type's edges. LOCAL (a partition
 * of the whole graph): read and converted to floats into l->ew[e], each
 * value finite and >= 0, as the servers keep them. */
static gkv_err
wfeat_tensor(gkv_loader *l, int e, const char *name)
{
    gkv_tensor_desc d;
    char what[64];
    int64_t n = l->nedges[e], bad;
    unsigned char *buf = NULL;
    float *w;
    size_t es;
    gkv_err rc;

    snprintf(what, sizeof what, "edge_w_feat[%d]", e);
    if ((rc = tensor_desc(l, what, name, &d)) != GKV_OK)
        return rc;
    if (d.row_elems != 1)
        return gkv__fail(NULL, GKV_EINVAL, "loader: edge_w_feat[%d]: edge "
                         "feature '%s' has rows of %llu elements; a sampling "
                         "weight needs one per edge (row shape () or (1))",
                         e, name, (unsigned long long)d.row_elems);
    if (d.lo > 0 || d.hi < (uint64_t)n)
        return gkv__fail(NULL, GKV_EINVAL, "loader: edge_w_feat[%d]: edge "
                         "feature '%s' holds edges [%llu, %llu), and edge "
                         "type %d has %lld", e, name, (unsigned long long)d.lo,
                         (unsigned long long)d.hi, e, (long long)n);
    if (l->where != GKV_LOADER_LOCAL)
        return GKV_OK;
    if ((es = gkv_dtype_size(d.dtype)) == 0)
        return gkv__fail(NULL, GKV_ECORRUPT, "loader: edge_w_feat[%d]: edge "
                         "feature '%s' has an unknown dtype (%d)", e, name,
                         (int)d.dtype);
    if ((w = l->ew[e] = gkv__malloc(((size_t)n + 1) * sizeof *w)) == NULL ||
        (buf = gkv__malloc((size_t)n * es + 1)) == NULL)
        return gkv__fail(NULL, GKV_ENOMEM, "loader: out of memory for the "
                         "%lld weights of '%s'", (long long)n, name);
    l->ewlen[e] = n;
    rc = n == 0 ? GKV_OK : gkv_tensor_read(l->store, NULL, name, 0,
                                           (uint64_t)n, buf, (size_t)n * es);
    if (rc != GKV_OK) {
        rc = gkv__fail(NULL, rc, "loader: edge_w_feat[%d]: edge feature "
                       "'%s': %s", e, name, gkv_errmsg());
        goto out;
    }
    if ((bad = gkv_sample_weights_from(buf, d.dtype, (size_t)n, w)) >= 0)
        rc = gkv__fail(NULL, GKV_EINVAL, "loader: edge_w_feat[%d]: edge "
                       "feature '%s': edge %lld has weight %g; sampling "
                       "weights must be finite and >= 0", e, name,
                       (long long)bad, (double)w[bad]);
out:
    gkv__free(buf);
    return rc;
}

/* Sampling by edge features (o->edge_w_feat): not SERVER; LOCAL needs a
 * partition (its book names the edge types). Every name is checked as the
 * client's sampling calls check them (gkv_edge_feat_name_bad, the tensor
 * name's length, not with GKV_SAMPLE_WEIGHTED), without a sampling call:
 * the caller's client holds its own borrowed results. Then the tensors of
 * the types some layer samples. Copies the names. */
static gkv_err
check_wfeat(gkv_loader *l, const gkv_loader_opts *o)
{
    int ne = l->num_etypes, first = -1;
    char name[GKV_NAME_MAX + 2];
    gkv_err rc = GKV_OK;

    for (int e = 0; o->edge_w_feat != NULL && e < ne && first < 0; e++)
        if (o->edge_w_feat[e] != NULL)
            first = e;
    if (first < 0)
        return GKV_OK;
    if (l->where == GKV_LOADER_SERVER)
        return gkv__fail(NULL, GKV_ENOTSUP, "loader: edge_w_feat[%d] ('%s') "
                         "with GKV_LOADER_SERVER: a batch request to the "
                         "servers (SAMPLE_BATCH) cannot carry edge-feature "
                         "names; use GKV_LOADER_CLIENT", first,
                         o->edge_w_feat[first]);
    if (l->where == GKV_LOADER_LOCAL && o->part == NULL)
        return gkv__fail(NULL, GKV_EINVAL, "loader: edge_w_feat[%d] ('%s') "
                         "with GKV_LOADER_LOCAL needs 'part': 'sg' has no "
                         "edge type names to find the feature by", first,
                         o->edge_w_feat[first]);
    if (o->sample_flags & GKV_SAMPLE_WEIGHTED)
        return gkv__fail(NULL, GKV_EINVAL, "loader: edge_w_feat[%d] ('%s') "
                         "and GKV_SAMPLE_WEIGHTED both give weights; choose "
                         "one source of weights", first,
                         o->edge_w_feat[first]);
    for (int e = 0; e < ne; e++) {
        const char *fn = o->edge_w_feat[e], *why;

        if (fn == NULL)
            continue;
        if ((why = gkv_edge_feat_name_bad(fn)) != NULL)
            return gkv__fail(NULL, GKV_EINVAL, "loader: edge_w_feat[%d] "
                             "('%.300s', %zu bytes) has %s: a feature name is "
                             "1 to %d bytes of printable ASCII without spaces "
                             "or '#'", e, fn, strlen(fn), why, GKV_NAME_MAX);
        if (strlen("edge//") + strlen(gkv_pbook_etype_name(book_of(l), e)) +
            strlen(fn) > GKV_NAME_MAX)
            return gkv__fail(NULL, GKV_EINVAL, "loader: edge_w_feat[%d]: "
                             "tensor 'edge/%s/%.300s' would be longer than a "
                             "tensor name may be (%d bytes)", e,
                             gkv_pbook_etype_name(book_of(l), e), fn,
                             GKV_NAME_MAX);
    }
    if ((l->wfeat = gkv__calloc((size_t)ne + 1, sizeof *l->wfeat)) == NULL ||
        (l->ew = gkv__calloc((size_t)ne + 1, sizeof *l->ew)) == NULL ||
        (l->ewlen = gkv__calloc((size_t)ne + 1, sizeof *l->ewlen)) == NULL)
        return gkv__fail(NULL, GKV_ENOMEM, "loader: out of memory");
    for (int e = 0; e < ne; e++)
        if (o->edge_w_feat[e] != NULL &&
            (l->wfeat[e] = gkv__strdup(o->edge_w_feat[e])) == NULL)
            return gkv__fail(NULL, GKV_ENOMEM, "loader: out of memory");
    for (int e = 0; e < ne && rc == GKV_OK; e++) {
        const char *canon = gkv_pbook_etype_name(book_of(l), e);
        int used = 0;

        for (int i = 0; i < o->nlayers; i++)
            used |= l->fanouts[(size_t)i * o->nfan +
                               (o->nfan == 1 ? 0 : e)] != 0;
        if (l->wfeat[e] == NULL || !used)
            continue;       /* as the servers: fanout 0 is not looked up */
        snprintf(name, sizeof name, "edge/%s/%s", canon, l->wfeat[e]);
        rc = wfeat_tensor(l, e, name);
    }
    return rc;
}

/* The seeds' type and kind, and their count (-1: unknown, edges of an
 * 'sg'). */
static int
seed_type(const gkv_loader *l)
{
    return l->o.edge_seeds ? l->o.seed_etype : l->o.seed_ntype;
}

static const char *
seed_kind(const gkv_loader *l)
{
    return l->o.edge_seeds ? "an edge" : "a node";
}

static int64_t
seed_count(const gkv_loader *l)
{
    return l->o.edge_seeds ? l->nedges[l->o.seed_etype]
                           : l->nnodes[l->o.seed_ntype];
}

/* LOCAL with an 'sg' (no edge counts): every edge seed held by it. */
static gkv_err
edges_held(gkv_loader *l, const gkv_loader_opts *o)
{
    int64_t s, d;

    for (size_t i = 0; i < o->nseeds; i++)
        if (gkv_sgraph_find_edges(l->sg, o->seed_etype, &o->seeds[i], 1, &s,
                                  &d) != GKV_OK)
            return gkv__fail(NULL, GKV_ERANGE, "loader: seeds[%zu] = %lld is "
                             "not an edge of type %d that 'sg' holds", i,
                             (long long)o->seeds[i], o->seed_etype);
    return GKV_OK;
}

/* Edge seeds: their options (gkv_edge_batch_spec's), and no SERVER mode
 * or label. */
static gkv_err
check_edge(gkv_loader *l, const gkv_loader_opts *o)
{
    if (o->edge_seeds != 1)
        return gkv__fail(NULL, GKV_EINVAL, "loader: edge_seeds is %d (0: "
                         "node seeds, 1: edge seeds)", o->edge_seeds);
    if (l->where == GKV_LOADER_SERVER)
        return gkv__fail(NULL, GKV_ENOTSUP, "loader: edge seeds are not "
                         "sampled on the servers (a GKV_LOADER_SERVER "
                         "request cannot carry the batch's excluded edges): "
                         "use GKV_LOADER_CLIENT");
    if (o->seed_etype < 0 || o->seed_etype >= l->num_etypes)
        return gkv__fail(NULL, GKV_EINVAL, "loader: seed_etype %d is not one "
                         "of the graph's %d edge types", o->seed_etype,
                         l->num_etypes);
    if (o->num_neg < 0)
        return gkv__fail(NULL, GKV_EINVAL, "loader: num_neg is %d (negatives "
                         "per edge seed, >= 0)", o->num_neg);
    if (o->exclude & ~(GKV_EXCLUDE_SELF | GKV_EXCLUDE_REVERSE))
        return gkv__fail(NULL, GKV_EINVAL, "loader: unknown exclude bits "
                         "0x%x", o->exclude &
                         ~(GKV_EXCLUDE_SELF | GKV_EXCLUDE_REVERSE));
    if ((o->exclude & GKV_EXCLUDE_REVERSE) &&
        (o->reverse_etype < 0 || o->reverse_etype >= l->num_etypes ||
         o->reverse_etype == o->seed_etype))
        return gkv__fail(NULL, GKV_EINVAL, "loader: GKV_EXCLUDE_REVERSE: "
                         "reverse_etype %d is not one of the graph's %d edge "
                         "types other than seed_etype %d", o->reverse_etype,
                         l->num_etypes, o->seed_etype);
    if (o->label != NULL)
        return gkv__fail(NULL, GKV_EINVAL, "loader: label '%s' with edge "
                         "seeds: an edge batch's labels are its positive and "
                         "negative pairs (set label NULL)", o->label);
    return GKV_OK;
}

/* seeds[i] before seeds[j] by value, then position. */
static int
cmp_pos(const void *a, const void *b, void *arg)
{
    const int64_t *s = arg;
    size_t i = *(const size_t *)a, j = *(const size_t *)b;

    if (s[i] != s[j])
        return s[i] < s[j] ? -1 : 1;
    return i < j ? -1 : i > j;
}

/* Explicit seeds: each in range, none twice. */
static gkv_err
seeds_given(gkv_loader *l, const gkv_loader_opts *o)
{
    int64_t n = seed_count(l);
    size_t *pos;
    gkv_err rc;

    for (size_t i = 0; n >= 0 && i < o->nseeds; i++)
        if (o->seeds[i] < 0 || o->seeds[i] >= n)
            return gkv__fail(NULL, GKV_ERANGE, "loader: seeds[%zu] = %lld is "
                             "not %s of type %d [0, %lld)", i,
                             (long long)o->seeds[i], seed_kind(l),
                             seed_type(l), (long long)n);
    if (n < 0 && (rc = edges_held(l, o)) != GKV_OK)
        return rc;
    l->seeds = gkv__malloc((o->nseeds + 1) * sizeof *l->seeds);
    pos = gkv__malloc((o->nseeds + 1) * sizeof *pos);
    if (l->seeds == NULL || pos == NULL) {
        gkv__free(pos);
        return gkv__fail(NULL, GKV_ENOMEM, "loader: out of memory");
    }
    memcpy(l->seeds, o->seeds, o->nseeds * sizeof *l->seeds);
    l->nseeds = o->nseeds;
    for (size_t i = 0; i < o->nseeds; i++)
        pos[i] = i;
    qsort_r(pos, o->nseeds, sizeof *pos, cmp_pos, l->seeds);
    for (size_t i = 1; i < o->nseeds; i++)
        if (l->seeds[pos[i]] == l->seeds[pos[i - 1]]) {
            rc = gkv__fail(NULL, GKV_EINVAL, "loader: seed %lld is given "
                           "twice (seeds[%zu] and seeds[%zu])",
                           (long long)l->seeds[pos[i]], pos[i - 1], pos[i]);
            gkv__free(pos);
            return rc;
        }
    gkv__free(pos);
    return GKV_OK;
}

/* The seeds from a mask: one u8 per node, split among the trainers. */
static gkv_err
seeds_split(gkv_loader *l, const gkv_loader_opts *o)
{
    const gkv_pbook *b = book_of(l);
    int64_t n = seed_count(l);
    gkv_tensor_desc d;
    uint8_t *mask = NULL;
    uint64_t *ids = NULL;
    int64_t *out = NULL;
    size_t nout = 0;
    gkv_err rc;

    if (b == NULL)
        return gkv__fail(NULL, GKV_EINVAL, "loader: seed_mask '%s' needs a "
                         "partition book to split by (LOCAL with 'sg' has "
                         "none): give the seeds", o->seed_mask);
    if ((rc = tensor_desc(l, "seed_mask", o->seed_mask, &d)) != GKV_OK)
        return rc;
    if (d.dtype != GKV_U8 || d.row_elems != 1 || d.lo != 0 ||
        d.hi != (uint64_t)n)
        return gkv__fail(NULL, GKV_ESHAPE, "loader: seed_mask '%s' is %s with "
                         "%llu elements a row and rows [%llu, %llu): a mask "
                         "is u8, one element per %s of type %d [0, %lld)",
                         o->seed_mask, gkv_dtype_name(d.dtype),
                         (unsigned long long)d.row_elems,
                         (unsigned long long)d.lo, (unsigned long long)d.hi,
                         o->edge_seeds ? "edge" : "node", seed_type(l),
                         (long long)n);
    if ((mask = gkv__malloc((size_t)n + 1)) == NULL) {
        rc = gkv__fail(NULL, GKV_ENOMEM, "loader: out of memory");
        goto out;
    }
    if (l->where == GKV_LOADER_LOCAL) {
        rc = n == 0 ? GKV_OK : gkv_tensor_read(l->store, NULL, o->seed_mask,
                                               0, (uint64_t)n, mask,
                                               (size_t)n);
    } else {
        if ((ids = gkv__malloc(((size_t)n + 1) * sizeof *ids)) == NULL) {
            rc = gkv__fail(NULL, GKV_ENOMEM, "loader: out of memory");
            goto out;
        }
        for (int64_t i = 0; i < n; i++)
            ids[i] = (uint64_t)i;
        rc = n == 0 ? GKV_OK : gkv_client_pull(l->client, o->seed_mask, ids,
                                               (size_t)n, mask, (size_t)n);
    }
    if (rc != GKV_OK) {
        rc = gkv__fail(NULL, rc, "loader: seed_mask '%s': %s", o->seed_mask,
                       gkv_errmsg());
        goto out;
    }
    if (o->edge_seeds)
        rc = gkv_pbook_edge_split(b, o->seed_etype, mask, NULL, (size_t)n,
                                  o->num_trainers, o->rank, &out, &nout);
    else
        rc = gkv_pbook_node_split(b, o->seed_ntype, mask, NULL, (size_t)n,
                                  o->num_trainers, o->rank, &out, &nout);
    if (rc != GKV_OK) {
        rc = gkv__fail(NULL, rc, "loader: seed_mask '%s': %s", o->seed_mask,
                       gkv_errmsg());
        goto out;
    }
    if ((l->seeds = gkv__malloc((nout + 1) * sizeof *l->seeds)) == NULL) {
        rc = gkv__fail(NULL, GKV_ENOMEM, "loader: out of memory");
        goto out;
    }
    if (nout > 0)
        memcpy(l->seeds, out, nout * sizeof *l->seeds);
    l->nseeds = nout;
out:
    gkv_free(out);
    gkv__free(ids);
    gkv__free(mask);
    return rc;
}

gkv_err
loader__check(gkv_loader *l, const gkv_loader_opts *o)
{
    gkv_err rc;

    l->o = *o;
    if ((rc = check_source(l, o)) != GKV_OK ||
        (rc = check_shape(l, o)) != GKV_OK)
        return rc;
    if (o->edge_seeds != 0 && (rc = check_edge(l, o)) != GKV_OK)
        return rc;
    if (o->edge_seeds == 0 &&
        (o->seed_ntype < 0 || o->seed_ntype >= l->num_ntypes))
        return gkv__fail(NULL, GKV_EINVAL, "loader: seed_ntype %d is not one "
                         "of the graph's %d node types", o->seed_ntype,
                         l->num_ntypes);
    if ((rc = check_tensors(l, o)) != GKV_OK ||
        (rc = check_wfeat(l, o)) != GKV_OK)
        return rc;
    if (o->seeds != NULL)
        return seeds_given(l, o);
    if (o->seed_mask != NULL)
        return seeds_split(l, o);
    return gkv__fail(NULL, GKV_EINVAL, "loader: no seeds: give 'seeds' or "
                     "'seed_mask'");
}
