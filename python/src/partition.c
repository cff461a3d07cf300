/* partition.c - gkv._partition(): gkv_partition_write() on a graph given
 * as arrays (what gkv-partition does from files). gkv.partition() in
 * Python turns its friendlier arguments into the lists taken here. */
#include <string.h>
#include "gkvpy.h"

#define MAXIN 256                    /* arrays one call borrows */

struct pargs {
    gkvpy_in in[MAXIN];
    int      nin;
};

/* Borrows the next input array; NULL with an exception. */
static gkvpy_in *
take(struct pargs *pa, PyObject *o, const char *what)
{
    gkvpy_in *in;

    if (pa->nin == MAXIN) {
        gkvpy_raisef(GKV_EINVAL, "more than %d arrays", MAXIN);
        return NULL;
    }
    in = &pa->in[pa->nin];
    if (gkvpy_in_get(o, in, what, 0) < 0)
        return NULL;
    pa->nin++;
    return in;
}

/* A 1-D int64 array of n (or any, n = -1) entries. */
static gkvpy_in *
take_i64(struct pargs *pa, PyObject *o, const char *what, Py_ssize_t n)
{
    gkvpy_in *in = take(pa, o, what);

    if (in == NULL)
        return NULL;
    if (in->dtype != GKV_I64 || in->ndim != 1 ||
        (n >= 0 && (Py_ssize_t)in->n != n)) {
        gkvpy_raisef(GKV_EINVAL, "%s: expected a 1-D int64 array%s", what,
                     n >= 0 ? " as long as the source IDs" : "");
        return NULL;
    }
    return in;
}

PyObject *
gkvpy_partition(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"outdir", "ntypes", "etypes", "feats", "masks",
                             "reverse", "method", "num_parts", "seed", "csr",
                             "force", "balance_edges", "threads", "name",
                             "owners", NULL};
    PyObject *outdir, *ntypes, *etypes, *feats, *masks, *reverse, *ret = NULL;
    PyObject *owners = Py_None;
    const int32_t **po = NULL;
    const char *method = "random", *name = NULL;
    int num_parts = 0, csr = 0, force = 0, balance = 0, threads = 0;
    unsigned long long seed = 0;
    struct pargs *pa = NULL;
    gkv_part_feat *pf = NULL;
    gkv_part_mask *pm = NULL;
    gkv_part_reverse *pr = NULL;
    gkv_part_spec spec;
    gkv_part_report rep;
    gkv_graph *g = NULL;
    Py_ssize_t nf = 0, nm = 0, nr = 0;
    char msg[1024] = "";
    gkv_err rc;

    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&O!O!O!O!O!|$siKpppizO", kwlist,
                                     PyUnicode_FSConverter, &outdir,
                                     &PyList_Type, &ntypes, &PyList_Type, &etypes,
                                     &PyList_Type, &feats, &PyList_Type, &masks,
                                     &PyList_Type, &reverse, &method, &num_parts,
                                     &seed, &csr, &force, &balance, &threads,
                                     &name, &owners))
        return NULL;
    memset(&spec, 0, sizeof spec);
    if (gkv_part_method_parse(method, &spec.method) != GKV_OK) {
        gkvpy_raisef(GKV_EINVAL, "method '%s': expected random, range, "
                     "metis or given", method);
        goto out;
    }
    if ((pa = PyMem_Calloc(1, sizeof *pa)) == NULL) {
        PyErr_NoMemory();
        goto out;
    }
    if ((rc = gkv_graph_new(&g)) != GKV_OK) {
        gkvpy_raise(rc);
        goto out;
    }
    /* node types: (name, count) */
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(ntypes); i++) {
        const char *tn;
        long long cnt;

        if (!PyArg_ParseTuple(PyList_GET_ITEM(ntypes, i), "sL", &tn, &cnt))
            goto out;
        if ((rc = gkv_graph_add_ntype(g, tn, cnt, NULL)) != GKV_OK) {
            gkvpy_raise(rc);
            goto out;
        }
    }
    /* edge types: (src type, relation, dst type, src, dst, weights or None) */
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(etypes); i++) {
        const char *st, *rel, *dt;
        PyObject *so, *dobj, *wo;
        gkvpy_in *s, *d, *w = NULL;
        int et;

        if (!PyArg_ParseTuple(PyList_GET_ITEM(etypes, i), "sssOOO", &st, &rel,
                              &dt, &so, &dobj, &wo))
            goto out;
        if ((rc = gkv_graph_add_etype(g, st, rel, dt, &et)) != GKV_OK) {
            gkvpy_raise(rc);
            goto out;
        }
        if ((s = take_i64(pa, so, "src", -1)) == NULL ||
            (d = take_i64(pa, dobj, "dst", (Py_ssize_t)s->n)) == NULL)
            goto out;
        if (wo != Py_None) {
            if ((w = take(pa, wo, "weights")) == NULL)
                goto out;
            if (w->dtype != GKV_F32 || w->ndim != 1 || w->n != s->n) {
                gkvpy_raisef(GKV_EINVAL, "weights: expected a 1-D float32 "
                             "array, one per edge");
                goto out;
            }
        }
        Py_BEGIN_ALLOW_THREADS
        rc = gkv_graph_add_edges(g, et, s->ptr, d->ptr,
                                 w != NULL ? w->ptr : NULL, s->n);
        Py_END_ALLOW_THREADS
        if (rc != GKV_OK) {
            gkvpy_raise(rc);
            goto out;
        }
    }
    /* features: (is_edge, type, name, rows) */
    nf = PyList_GET_SIZE(feats);
    if ((pf = PyMem_Calloc((size_t)nf + 1, sizeof *pf)) == NULL) {
        PyErr_NoMemory();
        goto out;
    }
    for (Py_ssize_t i = 0; i < nf; i++) {
        PyObject *ro;
        gkvpy_in *r;
        int is_edge;

        if (!PyArg_ParseTuple(PyList_GET_ITEM(feats, i), "pssO", &is_edge,
                              &pf[i].type, &pf[i].name, &ro) ||
            (r = take(pa, ro, "feature rows")) == NULL)
            goto out;
        if (r->dtype >= GKVPY_U64 || r->ndim < 1 || r->ndim > GKV_MAX_DIMS + 1) {
            gkvpy_raisef(GKV_EINVAL, "feature '%s': rows of a gkv dtype, "
                         "shape (n, *row_shape) with up to %d row dims",
                         pf[i].name, GKV_MAX_DIMS);
            goto out;
        }
        pf[i].is_edge = is_edge;
        pf[i].data = r->ptr;
        pf[i].dtype = (gkv_dtype)r->dtype;
        pf[i].nrows = (uint64_t)r->shape[0];
        pf[i].ndim = (unsigned)r->ndim - 1;
        for (int k = 1; k < r->ndim; k++)
            pf[i].shape[k - 1] = (uint64_t)r->shape[k];
    }
    /* training masks: (node type, uint8 or bool array) */
    nm = PyList_GET_SIZE(masks);
    if ((pm = PyMem_Calloc((size_t)nm + 1, sizeof *pm)) == NULL) {
        PyErr_NoMemory();
        goto out;
    }
    for (Py_ssize_t i = 0; i < nm; i++) {
        PyObject *mo;
        gkvpy_in *m;

        if (!PyArg_ParseTuple(PyList_GET_ITEM(masks, i), "sO", &pm[i].ntype,
                              &mo) ||
            (m = take(pa, mo, "train mask")) == NULL)
            goto out;
        if ((m->dtype != GKV_U8 && m->dtype != GKVPY_BOOL) || m->ndim != 1) {
            gkvpy_raisef(GKV_EINVAL, "train mask of '%s': expected a 1-D "
                         "bool or uint8 array", pm[i].ntype);
            goto out;
        }
        pm[i].data = m->ptr;
        pm[i].nrows = m->n;
    }
    /* reverse edge type pairs: (etype, reverse etype) */
    nr = PyList_GET_SIZE(reverse);
    if ((pr = PyMem_Calloc((size_t)nr + 1, sizeof *pr)) == NULL) {
        PyErr_NoMemory();
        goto out;
    }
    for (Py_ssize_t i = 0; i < nr; i++)
        if (!PyArg_ParseTuple(PyList_GET_ITEM(reverse, i), "ss", &pr[i].etype,
                              &pr[i].reverse_etype))
            goto out;
    /* owners (method given): one int32 array per node type, in order */
    if (owners != Py_None) {
        Py_ssize_t nt = PyList_GET_SIZE(ntypes);

        if (!PyList_Check(owners) || PyList_GET_SIZE(owners) != nt) {
            gkvpy_raisef(GKV_EINVAL, "owners: expected a list of %zd arrays, "
                         "one per node type", nt);
            goto out;
        }
        if ((po = PyMem_Calloc((size_t)nt + 1, sizeof *po)) == NULL) {
            PyErr_NoMemory();
            goto out;
        }
        for (Py_ssize_t i = 0; i < nt; i++) {
            gkvpy_in *o = take(pa, PyList_GET_ITEM(owners, i), "owners");

            if (o == NULL)
                goto out;
            if (o->dtype != GKV_I32 || o->ndim != 1 ||
                (long long)o->n != gkv_graph_num_nodes(g, (int)i)) {
                gkvpy_raisef(GKV_EINVAL, "owners of node type %zd: expected a "
                             "1-D int32 array, one per node (%lld)", i,
                             (long long)gkv_graph_num_nodes(g, (int)i));
                goto out;
            }
            po[i] = o->ptr;
        }
        spec.owners = po;
    }
    spec.name = name;
    spec.num_parts = num_parts;
    spec.seed = seed;
    spec.flags = (csr ? GKV_PART_CSR : 0) | (force ? GKV_PART_FORCE : 0) |
                 (balance ? GKV_PART_BALANCE_EDGES : 0);
    spec.nthreads = threads;
    spec.feats = pf;
    spec.nfeats = (size_t)nf;
    spec.masks = pm;
    spec.nmasks = (size_t)nm;
    spec.reverse = pr;
    spec.nreverse = (size_t)nr;
    Py_BEGIN_ALLOW_THREADS
    rc = gkv_partition_write(g, &spec, PyBytes_AS_STRING(outdir), &rep, msg,
                             sizeof msg);
    Py_END_ALLOW_THREADS
    if (rc != GKV_OK) {
        gkvpy_raisef(rc, "%s", *msg ? msg : gkv_errmsg());
        goto out;
    }
    ret = Py_BuildValue("{s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:K,s:d,s:d}",
                        "num_nodes", (long long)rep.num_nodes,
                        "num_edges", (long long)rep.num_edges,
                        "edge_cut", (long long)rep.edge_cut,
                        "min_part_nodes", (long long)rep.min_part_nodes,
                        "max_part_nodes", (long long)rep.max_part_nodes,
                        "min_part_edges", (long long)rep.min_part_edges,
                        "max_part_edges", (long long)rep.max_part_edges,
                        "bytes_written", (unsigned long long)rep.bytes_written,
                        "seconds", rep.seconds,
                        "assign_seconds", rep.assign_seconds);
out:
    gkv_graph_free(g);
    if (pa != NULL)
        for (int i = 0; i < pa->nin; i++)
            gkvpy_in_release(&pa->in[i]);
    PyMem_Free(pa);
    PyMem_Free(pf);
    PyMem_Free(pm);
    PyMem_Free(pr);
    PyMem_Free(po);
    Py_DECREF(outdir);
    return ret;
}
