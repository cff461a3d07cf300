/* loader.c - gkv._Loader (loader/gkv_loader.h) and _BatchMem, the memory
 * of one batch.
 *
 * Every array of a batch is a view into the C batch (gkv.Array with
 * owner = the batch's _BatchMem): no copy. The _BatchMem gives the batch
 * back (gkv_batch_release) when the last view of it is gone, which may be
 * after the loader was freed (the header allows it). gkv.Loader and
 * gkv.Batch in Python wrap these.
 *
 * A _Loader made with gpu_device >= 0 is a GPU loader instead
 * (gkv_gpu_loader over the same gkv_loader options, gpu/gkv_gpu.h): each
 * batch's blocks and input features are device memory, viewed as CUDA
 * arrays whose owner is a _GpuBatchMem; the loader reuses that memory at
 * its next call, so such a view stops exporting then (its 'gen' is old). */
#include "gkvpy.h"
#include <string.h>
#include <unistd.h>
#include "gkv_loader.h"
#ifdef GKV_HAVE_CUDA
#include "gkv_gpu.h"
#endif

#define MAXT 64                      /* tensors a batch collects */

/* How to view the rows of one collected tensor. */
typedef struct {
    int        dtype;
    int        ndim;                 /* of a row */
    Py_ssize_t shape[GKV_MAX_DIMS];
    size_t     row_bytes;
} rowfmt;

typedef struct {
    PyObject_HEAD
    gkv_loader *l;
    PyObject   *source;              /* the Partition or Client lent */
    int         is_client;
    pid_t       pid;
    int         inflight;
    int         nfeats, nefeats, has_label, nlayers;
    int         efeat_type[MAXT];
    rowfmt      feat[MAXT], efeat[MAXT], label;
    /* a GPU loader: */
    void       *gpu;                 /* gkv_gpu_loader *, or NULL */
    int         device;
    unsigned long long gen;          /* bumped when its batch memory is reused */
    int         live_mem;            /* _GpuBatchMem objects alive */
    void       *gpu_parked;          /* closed while device views lived:
                                      * freed with the last of them */
    int         ngfeat;
    rowfmt      gfeat[MAXT];         /* per node type: the feature's rows */
} loader_obj;

typedef struct {
    PyObject_HEAD
    loader_obj *l;                   /* a reference */
    unsigned long long gen;
} gpumem_obj;

typedef struct {
    PyObject_HEAD
    gkv_batch *b;
} batchmem_obj;

/* ---- _BatchMem ---- */

static void
batchmem_dealloc(batchmem_obj *o)
{
    gkv_batch_release(o->b);
    PyObject_Free(o);
}

PyTypeObject gkvpy_batchmem_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "gkv._BatchMem",
    .tp_basicsize = sizeof(batchmem_obj),
    .tp_dealloc = (destructor)batchmem_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The memory of one batch; freed when its last Array is gone.",
};

/* ---- _GpuBatchMem ---- */

static void parked_free(loader_obj *o);

/* The last device view of a closed GPU loader gone: its memory (and the
 * loader) can go now. */
static void
gpumem_dealloc(gpumem_obj *o)
{
    loader_obj *l = o->l;

    if (l != NULL && --l->live_mem == 0 && l->gpu_parked != NULL) {
        if (l->pid == getpid())
            parked_free(l);
        else
            l->gpu_parked = NULL;     /* the parent's; its threads are not here */
    }
    Py_XDECREF((PyObject *)l);
    PyObject_Free(o);
}

PyTypeObject gkvpy_gpumem_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "gkv._GpuBatchMem",
    .tp_basicsize = sizeof(gpumem_obj),
    .tp_dealloc = (destructor)gpumem_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The device memory of a GPU loader's current batch.",
};

int
gkvpy_owner_cuda(PyObject *owner, int *stale)
{
    gpumem_obj *m = (gpumem_obj *)owner;

    *stale = 0;
    if (owner == NULL || Py_TYPE(owner) != &gkvpy_gpumem_type)
        return -1;
    *stale = m->l->gpu == NULL || m->gen != m->l->gen;
    return *stale ? -1 : m->l->device;
}

void
gkvpy_owner_hold(PyObject *owner, int delta)
{
    if (owner != NULL && Py_TYPE(owner) == &gkvpy_gpumem_type)
        ((gpumem_obj *)owner)->l->inflight += delta;
}

/* ---- views ---- */

static PyObject *
view_i64(PyObject *mem, const int64_t *p, size_t n)
{
    Py_ssize_t sh = (Py_ssize_t)n;

    return (PyObject *)gkvpy_array_view(mem, (void *)p, GKV_I64, 1, &sh);
}

/* Rows of format f in 'bytes' bytes at p, viewed as (n, *row shape). */
static PyObject *
view_rows(PyObject *mem, const void *p, size_t bytes, const rowfmt *f)
{
    Py_ssize_t sh[GKVPY_MAXDIM];

    sh[0] = (Py_ssize_t)(f->row_bytes ? bytes / f->row_bytes : 0);
    for (int i = 0; i < f->ndim; i++)
        sh[i + 1] = f->shape[i];
    return (PyObject *)gkvpy_array_view(mem, (void *)p, f->dtype, f->ndim + 1, sh);
}

/* ---- _Loader ---- */

/* Describes tensor 'name' (held through the source) into *f. */
static int
row_format(loader_obj *o, const char *name, rowfmt *f)
{
    gkv_tensor_desc d;
    gkv_err rc;

    if (o->is_client) {
        gkv_client *c = gkvpy_client_hold(o->source);

        if (c == NULL)
            return -1;
        Py_BEGIN_ALLOW_THREADS
        rc = gkv_client_tensor_info(c, name, &d);
        Py_END_ALLOW_THREADS
        gkvpy_client_unhold(o->source);
    } else {
        gkv_part *p = gkvpy_part_get(o->source);

        if (p == NULL)
            return -1;
        Py_BEGIN_ALLOW_THREADS
        rc = gkv_tensor_info(gkv_part_store(p), NULL, name, &d);
        Py_END_ALLOW_THREADS
    }
    if (rc != GKV_OK) {
        gkvpy_raise(rc);
        return -1;
    }
    f->dtype = d.dtype;
    f->ndim = (int)d.ndim;
    for (unsigned i = 0; i < d.ndim; i++)
        f->shape[i] = (Py_ssize_t)d.shape[i];
    f->row_bytes = d.row_bytes;
    return 0;
}

/* [(type, name)] into t (names borrowed from the list's strings). */
static int
typed_list(PyObject *l, gkv_typed_tensor *t, int *n, const char *what)
{
    *n = (int)PyList_GET_SIZE(l);
    if (*n > MAXT) {
        gkvpy_raisef(GKV_EINVAL, "%s: at most %d tensors", what, MAXT);
        return -1;
    }
    for (int i = 0; i < *n; i++)
        if (!PyArg_ParseTuple(PyList_GET_ITEM(l, i), "is", &t[i].type,
                              &t[i].name))
            return -1;
    return 0;
}

/* gpu_formats: per node type None or (dtype, row shape) of the feature. */
static int
gpu_formats_get(loader_obj *o, PyObject *l, int where)
{
#ifndef GKV_HAVE_CUDA
    gkvpy_raisef(GKV_ENOTSUP, "gkv was built without CUDA (gpu/ needs nvcc "
                 "at build time): there is no GPU loader");
    return -1;
#endif
    if (where == GKV_LOADER_LOCAL) {
        gkvpy_raisef(GKV_EINVAL, "a GPU loader takes its batches through a "
                     "gkv.Client (where 'server' or 'client')");
        return -1;
    }
    if (l == NULL || PyList_GET_SIZE(l) > MAXT) {
        gkvpy_raisef(GKV_EINVAL, "gpu_formats: a list, one entry per node type");
        return -1;
    }
    o->ngfeat = (int)PyList_GET_SIZE(l);
    for (int t = 0; t < o->ngfeat; t++) {
        PyObject *e = PyList_GET_ITEM(l, t), *sh;
        rowfmt *f = &o->gfeat[t];

        f->row_bytes = 0;
        if (e == Py_None)
            continue;
        if (!PyArg_ParseTuple(e, "iO!", &f->dtype, &PyTuple_Type, &sh))
            return -1;
        f->ndim = (int)PyTuple_GET_SIZE(sh);
        if (f->ndim >= GKVPY_MAXDIM) {
            gkvpy_raisef(GKV_EINVAL, "gpu_formats: too many dimensions");
            return -1;
        }
        for (int i = 0; i < f->ndim; i++)
            if ((f->shape[i] = PyLong_AsSsize_t(PyTuple_GET_ITEM(sh, i))) < 0)
                return -1;
        f->row_bytes = 1;               /* has a feature; set per batch */
    }
    return 0;
}

/* The GPU loader of options lo over client c, into o->gpu. */
static gkv_err
gpu_new(loader_obj *o, gkv_client *c, int device, const char *feat,
        const gkv_loader_opts *lo)
{
#ifdef GKV_HAVE_CUDA
    gkv_gpu_loader_opts go;
    gkv_gpu_loader *g = NULL;
    gkv_err rc;

    memset(&go, 0, sizeof go);
    go.device = device;
    go.feat = feat;
    go.batches = lo;
    Py_BEGIN_ALLOW_THREADS
    rc = gkv_gpu_loader_new(&g, c, &go);
    Py_END_ALLOW_THREADS
    o->gpu = g;
    o->device = device;
    return rc;
#else
    (void)o; (void)c; (void)device; (void)feat; (void)lo;
    return GKV_ENOTSUP;                 /* refused in gpu_formats_get() */
#endif
}

static int
loader_init(loader_obj *o, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"source", "where", "seeds", "seed_ntype",
                             "seed_mask", "num_trainers", "rank", "batch_size",
                             "flags", "shuffle_seed", "fanouts", "nfan",
                             "nlayers", "dir", "sample_flags", "sample_seed",
                             "feats", "label", "efeats", "prefetch", "workers",
                             "sampler_threads", "edge_seeds", "seed_etype",
                             "num_neg", "exclude", "reverse_etype",
                             "gpu_device", "gpu_feat", "gpu_formats", "prob",
                             NULL};
    PyObject *source, *seeds = Py_None, *fanouts = NULL, *feats = NULL,
             *efeats = NULL;
    const char *mask = NULL, *label = NULL, *gpu_feat = NULL;
    PyObject *gpu_formats = NULL, *prob = Py_None;
    int gpu_device = -1;
    int where, seed_ntype = 0, ntr = 1, rank = 0, nfan, nlayers, dir = 0,
        prefetch = 0, workers = 0, sthreads = 0, edge_seeds = 0, seed_etype = 0,
        num_neg = 0, reverse_etype = 0;
    unsigned flags = 0, sflags = 0, exclude = 0;
    unsigned long long bsize = 0, shuffle_seed = 0, sample_seed = 0;
    gkv_typed_tensor ft[MAXT], eft[MAXT];
    gkv_loader_opts lo;
    gkvpy_sargs *pa = NULL;          /* prob's names */
    gkvpy_in sin, fin;
    gkv_client *c = NULL;
    gkv_loader *l = NULL;
    gkv_err rc;
    int ret = -1, have_seeds = 0, have_fan = 0;

    if (o->l != NULL || o->gpu != NULL) {
        gkvpy_raisef(GKV_EINVAL, "Loader.__init__ called twice");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kw,
            "OiOizii|$KIKOiiiIKO!zO!iiipiiIiizO!O", kwlist, &source, &where, &seeds,
            &seed_ntype, &mask, &ntr, &rank, &bsize, &flags, &shuffle_seed,
            &fanouts, &nfan, &nlayers, &dir, &sflags, &sample_seed,
            &PyList_Type, &feats, &label, &PyList_Type, &efeats, &prefetch,
            &workers, &sthreads, &edge_seeds, &seed_etype, &num_neg, &exclude,
            &reverse_etype, &gpu_device, &gpu_feat, &PyList_Type, &gpu_formats,
            &prob))
        return -1;
    if (gpu_device >= 0 && gpu_formats_get(o, gpu_formats, where) < 0)
        return -1;
    if (fanouts == NULL || feats == NULL || efeats == NULL) {
        gkvpy_raisef(GKV_EINVAL, "fanouts, feats and efeats are required");
        return -1;
    }
    memset(&lo, 0, sizeof lo);
    o->is_client = where != GKV_LOADER_LOCAL;
    Py_XSETREF(o->source, Py_NewRef(source));
    if (typed_list(feats, ft, &o->nfeats, "feats") < 0 ||
        typed_list(efeats, eft, &o->nefeats, "efeats") < 0)
        return -1;
    for (int i = 0; i < o->nfeats; i++)
        if (row_format(o, ft[i].name, &o->feat[i]) < 0)
            return -1;
    for (int i = 0; i < o->nefeats; i++) {
        if (row_format(o, eft[i].name, &o->efeat[i]) < 0)
            return -1;
        o->efeat_type[i] = eft[i].type;
    }
    o->has_label = label != NULL;
    if (label != NULL && row_format(o, label, &o->label) < 0)
        return -1;
    if (seeds != Py_None) {
        if (gkvpy_in_ids(seeds, &sin, "seeds") < 0)
            return -1;
        have_seeds = 1;
        if (sin.dtype != GKV_I64) {
            gkvpy_raisef(GKV_EINVAL, "seeds: %s IDs must be int64",
                         edge_seeds ? "edge" : "node");
            goto out;
        }
        lo.seeds = sin.ptr;
        lo.nseeds = sin.n;
    }
    if (gkvpy_in_get(fanouts, &fin, "fanouts", 0) < 0)
        goto out;
    have_fan = 1;
    if (fin.dtype != GKV_I32 || fin.n != (size_t)nfan * (size_t)nlayers) {
        gkvpy_raisef(GKV_EINVAL, "fanouts: int32, nlayers x nfan");
        goto out;
    }
    lo.where = where;
    lo.seed_ntype = seed_ntype;
    lo.seed_mask = mask;
    lo.num_trainers = ntr;
    lo.rank = rank;
    lo.batch_size = (size_t)bsize;
    lo.flags = flags;
    lo.shuffle_seed = shuffle_seed;
    lo.nlayers = nlayers;
    lo.nfan = nfan;
    lo.fanouts = fin.ptr;
    lo.dir = dir;
    lo.sample_flags = sflags;
    lo.sample_seed = sample_seed;
    lo.feats = o->nfeats > 0 ? ft : NULL;
    lo.nfeats = o->nfeats;
    lo.label = label;
    lo.efeats = eft;
    lo.nefeats = o->nefeats;
    lo.prefetch = prefetch;
    lo.workers = workers;
    lo.sampler_threads = sthreads;
    lo.edge_seeds = edge_seeds;
    lo.seed_etype = seed_etype;
    lo.num_neg = num_neg;
    lo.exclude = exclude;
    lo.reverse_etype = reverse_etype;
    if (o->is_client) {
        if ((c = gkvpy_client_hold(source)) == NULL)
            goto out;
        lo.client = c;
    } else if ((lo.part = gkvpy_part_get(source)) == NULL) {
        goto out;
    }
    if (prob != Py_None) {
        const gkv_pbook *b = c != NULL ? gkv_client_pbook(c)
                                       : gkv_part_book(lo.part);

        if ((pa = PyMem_Calloc(1, sizeof *pa)) == NULL) {
            PyErr_NoMemory();
            goto unhold;
        }
        if (b != NULL &&
            gkvpy_prob_get(pa, gkv_pbook_num_etypes(b), prob, b) < 0)
            goto unhold;
        lo.edge_w_feat = pa->opts.edge_w_feat;
    }
    if (gpu_device >= 0) {
        rc = gpu_new(o, c, gpu_device, gpu_feat, &lo);
    } else {
        Py_BEGIN_ALLOW_THREADS
        rc = gkv_loader_new(&l, &lo);
        Py_END_ALLOW_THREADS
    }
    if (c != NULL)
        gkvpy_client_unhold(source);
    c = NULL;
    if (rc != GKV_OK) {
        gkvpy_raise(rc);
        goto out;
    }
    o->l = l;
    o->nlayers = nlayers;
    o->pid = getpid();
    if (o->is_client)
        gkvpy_client_use(source, 1);
    else
        gkvpy_part_use(source, 1);
    ret = 0;
unhold:
    if (c != NULL)
        gkvpy_client_unhold(source);
out:
    if (pa != NULL) {
        gkvpy_sargs_release(pa);
        PyMem_Free(pa);
    }
    if (have_seeds)
        gkvpy_in_release(&sin);
    if (have_fan)
        gkvpy_in_release(&fin);
    return ret;
}

/* 0 when the loader (CPU or GPU) may be used now; else -1 with an
 * exception. */
static int
loader_check(loader_obj *o)
{
    if (o->l == NULL && o->gpu == NULL) {
        gkvpy_raisef(GKV_EINVAL, "the loader is closed");
        return -1;
    }
    if (o->pid != getpid()) {
        gkvpy_raisef(GKV_ENOTSUP, "this loader was made by process %ld: its "
                     "worker threads are not in this forked child; make the "
                     "loader in the worker, over the worker's client",
                     (long)o->pid);
        return -1;
    }
    if (o->inflight > 0) {
        gkvpy_raisef(GKV_EBUSY, "the loader is in use by another thread (a "
                     "loader belongs to one thread)");
        return -1;
    }
    return 0;
}

/* The CPU loader, or NULL with an exception (closed, a GPU loader ...). */
static gkv_loader *
loader_get(loader_obj *o)
{
    if (loader_check(o) < 0)
        return NULL;
    if (o->gpu != NULL) {
        gkvpy_raisef(GKV_ENOTSUP, "not for a GPU loader");
        return NULL;
    }
    return o->l;
}

#ifdef GKV_HAVE_CUDA
/* The GPU loader's next batch: (epoch, index, sample_seed, seeds,
 * seed_ntype, blocks, feats, label, rows_cached, rows_pulled), blocks and
 * feats (per node type, None without the feature) views of device memory,
 * seeds and label host copies; None when the epoch is over. */
static PyObject *
gpu_next(loader_obj *o)
{
    PyObject *blocks = NULL, *feats = NULL, *seeds = NULL, *label = NULL;
    const struct gkv_batch *h;
    gkv_gpu_batch gb;
    gpumem_obj *m;
    gkv_client *c;
    gkv_err rc;

    if ((c = gkvpy_client_hold(o->source)) == NULL)
        return NULL;
    o->inflight++;
    o->gen++;                         /* the last batch's memory is reused */
    Py_BEGIN_ALLOW_THREADS
    rc = gkv_gpu_loader_next_batch(o->gpu, &gb, NULL);
    Py_END_ALLOW_THREADS
    o->inflight--;
    gkvpy_client_unhold(o->source);
    if (rc != GKV_OK)
        return gkvpy_raise(rc);
    if (gb.nlayers == 0)
        Py_RETURN_NONE;
    if ((m = PyObject_New(gpumem_obj, &gkvpy_gpumem_type)) == NULL)
        return NULL;
    m->l = (loader_obj *)Py_NewRef((PyObject *)o);
    m->gen = o->gen;
    o->live_mem++;
    h = gb.host;
    blocks = gkvpy_blocks_tuple((PyObject *)m, gb.blocks, gb.nlayers);
    if ((feats = PyList_New(gb.blocks[0].num_ntypes)) != NULL)
        for (int t = 0; t < gb.blocks[0].num_ntypes; t++) {
            rowfmt f = t < o->ngfeat ? o->gfeat[t] : (rowfmt){0};

            if (gb.feat_dev[t] == NULL || f.row_bytes == 0) {
                PyList_SET_ITEM(feats, t, Py_NewRef(Py_None));
                continue;
            }
            f.row_bytes = gb.row_bytes[t];
            PyList_SET_ITEM(feats, t, view_rows((PyObject *)m, gb.feat_dev[t],
                gb.blocks[0].nodes[t].num_src * gb.row_bytes[t], &f));
        }
    seeds = gkvpy_array_i64(h->seeds, h->nseeds);
    if (h->label != NULL && o->has_label) {
        /* a host copy: the host batch is the loader's until its next call */
        Py_ssize_t sh[GKVPY_MAXDIM];

        sh[0] = (Py_ssize_t)(h->label_bytes / o->label.row_bytes);
        for (int i = 0; i < o->label.ndim; i++)
            sh[i + 1] = o->label.shape[i];
        label = (PyObject *)gkvpy_array_new(o->label.dtype, o->label.ndim + 1, sh);
        if (label != NULL)
            memcpy(((gkvpy_array *)label)->data, h->label, h->label_bytes);
    } else {
        label = Py_NewRef(Py_None);
    }
    Py_DECREF(m);                     /* the views hold it now */
    if (PyErr_Occurred()) {
        Py_XDECREF(blocks);
        Py_XDECREF(feats);
        Py_XDECREF(seeds);
        Py_XDECREF(label);
        return NULL;
    }
    return Py_BuildValue("(KKKNiNNNnn)", (unsigned long long)h->epoch,
                         (unsigned long long)h->index,
                         (unsigned long long)h->sample_seed, seeds,
                         h->seed_ntype, blocks, feats, label,
                         (Py_ssize_t)gb.rows_cached, (Py_ssize_t)gb.rows_pulled);
}
#endif

/* The next batch as a tuple (epoch, index, sample_seed, seeds, seed_ntype,
 * blocks, feats, label, efeats, pos_src, pos_dst, neg_src, neg_dst), every
 * array a view of the batch's memory (the pairs None for node seeds);
 * None when the epoch is over. */
static PyObject *
loader_next(loader_obj *o, PyObject *unused)
{
    gkv_loader *l;
    PyObject *mem, *feats = NULL, *efeats = NULL, *label = NULL, *blocks,
             *seeds, *pairs[4] = {NULL, NULL, NULL, NULL};
    batchmem_obj *bm;
    gkv_batch *b = NULL;
    gkv_err rc;

#ifdef GKV_HAVE_CUDA
    if (o->gpu != NULL && loader_check(o) == 0)
        return gpu_next(o);
#endif
    if ((l = loader_get(o)) == NULL)
        return NULL;
    o->inflight++;
    Py_BEGIN_ALLOW_THREADS
    rc = gkv_loader_next(l, &b);
    Py_END_ALLOW_THREADS
    o->inflight--;
    if (rc != GKV_OK)
        return gkvpy_raise(rc);
    if (b == NULL)
        Py_RETURN_NONE;
    if ((bm = PyObject_New(batchmem_obj, &gkvpy_batchmem_type)) == NULL) {
        gkv_batch_release(b);
        return NULL;
    }
    bm->b = b;
    mem = (PyObject *)bm;
    seeds = view_i64(mem, b->seeds, b->nseeds);
    blocks = gkvpy_blocks_tuple(mem, b->blocks, b->nlayers);
    if ((feats = PyList_New(b->nfeats)) != NULL)
        for (int f = 0; f < b->nfeats; f++)
            PyList_SET_ITEM(feats, f, view_rows(mem, b->feat[f], b->feat_bytes[f],
                                                &o->feat[f]));
    if ((efeats = PyList_New(b->nefeats)) != NULL)
        for (int f = 0; f < b->nefeats; f++) {
            PyObject *per = PyList_New(b->nlayers);

            for (int i = 0; per != NULL && i < b->nlayers; i++) {
                size_t k = (size_t)f * b->nlayers + i;

                PyList_SET_ITEM(per, i, view_rows(mem, b->efeat[k],
                                                  b->efeat_bytes[k], &o->efeat[f]));
            }
            PyList_SET_ITEM(efeats, f, per);
        }
    label = b->label != NULL && o->has_label
        ? view_rows(mem, b->label, b->label_bytes, &o->label)
        : Py_NewRef(Py_None);
    for (int k = 0; k < 4; k++) {
        const int64_t *p[4] = {b->pos_src, b->pos_dst, b->neg_src, b->neg_dst};
        size_t n = k < 2 ? b->num_pos : b->num_neg;

        pairs[k] = b->seed_ntype < 0 ? view_i64(mem, p[k], n)
                                     : Py_NewRef(Py_None);
    }
    Py_DECREF(mem);                   /* the views hold it now */
    if (PyErr_Occurred()) {
        Py_XDECREF(seeds);
        Py_XDECREF(blocks);
        Py_XDECREF(feats);
        Py_XDECREF(efeats);
        Py_XDECREF(label);
        for (int k = 0; k < 4; k++)
            Py_XDECREF(pairs[k]);
        return NULL;
    }
    return Py_BuildValue("(KKKNiNNNNNNNN)", (unsigned long long)b->epoch,
                         (unsigned long long)b->index,
                         (unsigned long long)b->sample_seed, seeds,
                         b->seed_ntype, blocks, feats, label, efeats,
                         pairs[0], pairs[1], pairs[2], pairs[3]);
}

static PyObject *
loader_epoch(loader_obj *o, PyObject *args)
{
    unsigned long long e;
    gkv_err rc;

    if (!PyArg_ParseTuple(args, "K", &e) || loader_check(o) < 0)
        return NULL;
    o->inflight++;
    o->gen++;
    Py_BEGIN_ALLOW_THREADS
#ifdef GKV_HAVE_CUDA
    if (o->gpu != NULL)
        rc = gkv_gpu_loader_epoch(o->gpu, e);
    else
#endif
        rc = gkv_loader_epoch(o->l, e);
    Py_END_ALLOW_THREADS
    o->inflight--;
    if (rc != GKV_OK)
        return gkvpy_raise(rc);
    Py_RETURN_NONE;
}

static PyObject *
loader_num_batches(loader_obj *o, PyObject *unused)
{
    gkv_loader *l = loader_get(o);

    return l == NULL ? NULL : PyLong_FromSize_t(gkv_loader_num_batches(l));
}

static PyObject *
loader_seeds(loader_obj *o, PyObject *unused)
{
    gkv_loader *l = loader_get(o);
    const int64_t *p;
    size_t n = 0;

    if (l == NULL)
        return NULL;
    p = gkv_loader_seeds(l, &n);
    return gkvpy_array_i64(p, n);
}

/* Frees the device memory of a GPU loader parked by loader_free. */
static void
parked_free(loader_obj *o)
{
    void *g = o->gpu_parked;

    o->gpu_parked = NULL;
#ifdef GKV_HAVE_CUDA
    Py_BEGIN_ALLOW_THREADS
    gkv_gpu_loader_free(g);
    Py_END_ALLOW_THREADS
#else
    (void)g;
#endif
}

/* Frees the loader. A GPU loader whose batch memory is still viewed
 * (arrays, or tensors made from their DLPack capsules, which keep a view
 * and so this object alive) is stopped and parked instead: closed to
 * every call, its views no longer exported, its threads gone and its
 * client given back, but its device memory kept until the last view is
 * gone (gpumem_dealloc), so that no tensor ever reads freed memory. */
static void
loader_free(loader_obj *o)
{
    gkv_loader *l = o->l;
    void *g = o->gpu;

    if (l == NULL && g == NULL)
        return;
    o->l = NULL;
    o->gpu = NULL;
    o->gen++;                         /* device views stop exporting */
    if (g != NULL && o->live_mem > 0) {
        o->gpu_parked = g;
        g = NULL;
    }
    Py_BEGIN_ALLOW_THREADS
#ifdef GKV_HAVE_CUDA
    if (g != NULL)
        gkv_gpu_loader_free(g);
    gkv_gpu_loader_stop(o->gpu_parked);   /* its client is given back */
#endif
    gkv_loader_free(l);               /* batches held stay valid */
    Py_END_ALLOW_THREADS
    if (o->is_client)
        gkvpy_client_use(o->source, -1);
    else
        gkvpy_part_use(o->source, -1);
}

static PyObject *
loader_close(loader_obj *o, PyObject *unused)
{
    if (o->inflight > 0)
        return gkvpy_raisef(GKV_EBUSY, "the loader is in use by another thread");
    if ((o->l != NULL || o->gpu != NULL) && o->pid != getpid()) {
        o->l = NULL;                  /* the parent's; its threads are not here */
        o->gpu = NULL;
        Py_RETURN_NONE;
    }
    loader_free(o);
    Py_RETURN_NONE;
}

static void
loader_dealloc(loader_obj *o)
{
    if ((o->l != NULL || o->gpu != NULL) && o->inflight == 0 &&
        o->pid == getpid())
        loader_free(o);
    Py_XDECREF(o->source);
    Py_TYPE(o)->tp_free((PyObject *)o);
}

static PyObject *
py_batch_seed(PyObject *self, PyObject *args)
{
    unsigned long long s, e, i;

    if (!PyArg_ParseTuple(args, "KKK", &s, &e, &i))
        return NULL;
    return PyLong_FromUnsignedLongLong(gkv_loader_batch_seed(s, e, i));
}

static PyObject *
py_epoch_order(PyObject *self, PyObject *args)
{
    unsigned long long s, e;
    unsigned flags;
    Py_ssize_t n;
    gkvpy_array *a;
    size_t *perm;

    if (!PyArg_ParseTuple(args, "KKIn", &s, &e, &flags, &n))
        return NULL;
    if (n < 0)
        return gkvpy_raisef(GKV_EINVAL, "n must be >= 0");
    if ((perm = PyMem_Malloc((size_t)n * sizeof *perm + 1)) == NULL)
        return PyErr_NoMemory();
    gkv_loader_epoch_order(s, e, flags, (size_t)n, perm);
    if ((a = gkvpy_array_new(GKV_I64, 1, &n)) != NULL)
        for (Py_ssize_t i = 0; i < n; i++)
            ((int64_t *)a->data)[i] = (int64_t)perm[i];
    PyMem_Free(perm);
    return (PyObject *)a;
}

static PyMethodDef loader_methods[] = {
    {"_next", (PyCFunction)loader_next, METH_NOARGS, NULL},
    {"set_epoch", (PyCFunction)loader_epoch, METH_VARARGS,
     "set_epoch(epoch): start that epoch (gkv_loader_epoch)"},
    {"num_batches", (PyCFunction)loader_num_batches, METH_NOARGS,
     "num_batches() -> batches in the current epoch"},
    {"seeds", (PyCFunction)loader_seeds, METH_NOARGS,
     "seeds() -> int64 Array: the seeds sampled from, in the order given"},
    {"close", (PyCFunction)loader_close, METH_NOARGS,
     "close(): stop the workers; batches held stay valid"},
    {"batch_seed", (PyCFunction)py_batch_seed, METH_VARARGS | METH_STATIC,
     "batch_seed(sample_seed, epoch, index) -> the generator seed of a batch"},
    {"epoch_order", (PyCFunction)py_epoch_order, METH_VARARGS | METH_STATIC,
     "epoch_order(shuffle_seed, epoch, flags, n) -> int64 Array: the order"},
    {NULL, NULL, 0, NULL},
};

PyTypeObject gkvpy_loader_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "gkv._Loader",
    .tp_basicsize = sizeof(loader_obj),
    .tp_dealloc = (destructor)loader_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "The C loader; use gkv.Loader.",
    .tp_methods = loader_methods,
    .tp_init = (initproc)loader_init,
    .tp_new = PyType_GenericNew,
};

int
gkvpy_loader_ready(PyObject *m)
{
    if (PyType_Ready(&gkvpy_loader_type) < 0 ||
        PyType_Ready(&gkvpy_batchmem_type) < 0 ||
        PyType_Ready(&gkvpy_gpumem_type) < 0)
        return -1;
#ifdef GKV_HAVE_CUDA
    if (PyModule_AddIntConstant(m, "HAVE_CUDA", 1) < 0)
        return -1;
#else
    if (PyModule_AddIntConstant(m, "HAVE_CUDA", 0) < 0)
        return -1;
#endif
    if (PyModule_AddIntConstant(m, "LOADER_DROP_LAST", GKV_LOADER_DROP_LAST) < 0 ||
        PyModule_AddIntConstant(m, "LOADER_NO_SHUFFLE", GKV_LOADER_NO_SHUFFLE) < 0 ||
        PyModule_AddIntConstant(m, "LOADER_PINNED", GKV_LOADER_PINNED) < 0 ||
        PyModule_AddIntConstant(m, "EXCLUDE_SELF", GKV_EXCLUDE_SELF) < 0 ||
        PyModule_AddIntConstant(m, "EXCLUDE_REVERSE", GKV_EXCLUDE_REVERSE) < 0)
        return -1;
    return PyModule_AddObjectRef(m, "_Loader", (PyObject *)&gkvpy_loader_type);
}
