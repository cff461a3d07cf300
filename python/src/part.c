/* part.c - gkv.Partition: one partition of a partitioned graph opened in
 * this process (gkv_part_open) with a sampler over it: the in-process
 * reference of what servers sample (a one-partition config holds the
 * whole graph). Also the sampling arguments and results shared with the
 * client, and the partition book as a dict. */
#include <string.h>
#include "gkvpy.h"

/* ---- sampling arguments ---- */

/* A fanout row: an int (nfan 1) or a sequence of num_etypes ints. Fills
 * fan[0 .. *nfan); 0 or -1 with an exception. */
static int
fan_row(PyObject *o, int num_etypes, int *fan, int *nfan)
{
    PyObject *f;

    if (PyLong_Check(o)) {
        fan[0] = (int)PyLong_AsLong(o);
        *nfan = 1;
        return PyErr_Occurred() ? -1 : 0;
    }
    if ((f = PySequence_Fast(o, "")) == NULL) {
        PyErr_Clear();
        gkvpy_raisef(GKV_EINVAL, "fanout: expected an int or a list of one "
                     "int per edge type");
        return -1;
    }
    if (PySequence_Fast_GET_SIZE(f) != num_etypes) {
        gkvpy_raisef(GKV_EINVAL, "fanout: %zd values, expected one per edge "
                     "type (%d)", PySequence_Fast_GET_SIZE(f), num_etypes);
        Py_DECREF(f);
        return -1;
    }
    for (int e = 0; e < num_etypes; e++) {
        fan[e] = (int)PyLong_AsLong(PySequence_Fast_GET_ITEM(f, e));
        if (PyErr_Occurred()) {
            PyErr_Clear();
            Py_DECREF(f);
            gkvpy_raisef(GKV_EINVAL, "fanout: expected ints");
            return -1;
        }
    }
    Py_DECREF(f);
    *nfan = num_etypes;
    return 0;
}

/* The edge type a key of a per-etype dict names: an int index, a
 * canonical name ('src:rel:dst', or a tuple of three str) or a relation
 * name only one edge type has (names need the book). -1 with an
 * exception naming 'what'. */
static int
etype_key(PyObject *k, int ne, const gkv_pbook *b, const char *what)
{
    PyObject *str = NULL, *sep;
    const char *name;
    Py_ssize_t len = 0;
    int hit = -1, nhit = 0;

    if (PyLong_Check(k)) {
        long t = PyLong_AsLong(k);

        if (t < 0 || t >= ne) {
            PyErr_Clear();
            gkvpy_raisef(GKV_EINVAL, "%s: edge type %ld is not an index "
                         "(0 .. %d)", what, t, ne - 1);
            return -1;
        }
        return (int)t;
    }
    if (PyTuple_Check(k) && (sep = PyUnicode_FromString(":")) != NULL) {
        str = PyUnicode_Join(sep, k);
        Py_DECREF(sep);
    } else if (PyUnicode_Check(k)) {
        str = Py_NewRef(k);
    }
    if (str == NULL || (name = PyUnicode_AsUTF8AndSize(str, &len)) == NULL) {
        PyErr_Clear();
        Py_XDECREF(str);
        gkvpy_raisef(GKV_EINVAL, "%s: a key of type %s: expected an edge "
                     "type (an index, a canonical name or a relation name)",
                     what, Py_TYPE(k)->tp_name);
        return -1;
    }
    if (strlen(name) != (size_t)len) {
        gkvpy_raisef(GKV_EINVAL, "%s: edge type '%s...' holds a NUL "
                     "character", what, name);
        Py_DECREF(str);
        return -1;
    }
    for (int e = 0; b != NULL && e < ne; e++) {
        const char *en = gkv_pbook_etype_name(b, e);
        const char *r = strchr(en, ':'), *r2 = r ? strchr(r + 1, ':') : NULL;

        if (strcmp(en, name) == 0) {
            hit = e;
            nhit = 1;
            break;
        }
        if (r2 != NULL && strlen(name) == (size_t)(r2 - r - 1) &&
            strncmp(r + 1, name, (size_t)(r2 - r - 1)) == 0) {
            hit = e;
            nhit++;
        }
    }
    if (nhit != 1)
        gkvpy_raisef(GKV_EINVAL, "%s: edge type '%s' %s", what, name,
                     nhit > 1 ? "is ambiguous: give its canonical name"
                              : "is not one of the graph's");
    Py_DECREF(str);
    return nhit == 1 ? hit : -1;
}

/* Spreads a per-etype argument over v[0 .. ne) (borrowed; NULL where not
 * given): a dict by etype_key, a list or tuple of ne values, or one value
 * ('one'): for every edge type when 'all', else only on a graph of one
 * edge type. -1 with an exception. */
static int
per_etype(PyObject *o, int ne, const gkv_pbook *b, const char *what,
          int one, int all, PyObject **v)
{
    memset(v, 0, (size_t)ne * sizeof *v);
    if (PyDict_Check(o)) {
        PyObject *k, *x;
        Py_ssize_t pos = 0;

        while (PyDict_Next(o, &pos, &k, &x)) {
            int e = etype_key(k, ne, b, what);

            if (e < 0)
                return -1;
            if (v[e] != NULL) {
                gkvpy_raisef(GKV_EINVAL, "%s: edge type %d given twice",
                             what, e);
                return -1;
            }
            v[e] = x;
        }
        return 0;
    }
    if (!one && (PyList_Check(o) || PyTuple_Check(o))) {
        if (PySequence_Fast_GET_SIZE(o) != ne) {
            gkvpy_raisef(GKV_EINVAL, "%s: %zd values, expected one per edge "
                         "type (%d)", what, PySequence_Fast_GET_SIZE(o), ne);
            return -1;
        }
        for (int e = 0; e < ne; e++)
            v[e] = PySequence_Fast_GET_ITEM(o, e);
        return 0;
    }
    if (!all && ne != 1) {
        gkvpy_raisef(GKV_EINVAL, "%s: the graph has %d edge types: give a "
                     "list or a dict {edge type: value}", what, ne);
        return -1;
    }
    for (int e = 0; e < ne; e++)
        v[e] = o;
    return 0;
}

/* in's shape as Python writes a tuple, "(400, 2)", into buf. */
static const char *
shape_str(const gkvpy_in *in, char *buf, size_t cap)
{
    size_t at = 0;

    buf[0] = '\0';
    for (int i = 0; i < in->ndim && at < cap; i++)
        at += (size_t)snprintf(buf + at, cap - at, "%s%lld", i ? ", " : "(",
                               (long long)in->shape[i]);
    if (at < cap)
        snprintf(buf + at, cap - at, "%s", in->ndim == 0 ? "()" : ")");
    return buf;
}

int
gkvpy_prob_get(gkvpy_sargs *s, int ne, PyObject *prob, const gkv_pbook *b)
{
    PyObject *v[64];
    Py_ssize_t len;
    int any = 0;

    if (prob != NULL && prob != Py_None) {
        if (ne > 64) {              /* v, s->wfeat and s->wref hold 64 */
            gkvpy_raisef(GKV_ENOTSUP, "prob: more than 64 edge types (%d)",
                         ne);
            return -1;
        }
        if (per_etype(prob, ne, b, "prob", PyUnicode_Check(prob), 1, v) < 0)
            return -1;
        for (int e = 0; e < ne; e++) {
            if (v[e] == NULL || v[e] == Py_None)
                continue;
            if (!PyUnicode_Check(v[e])) {
                gkvpy_raisef(GKV_EINVAL, "prob: edge type %d: expected an "
                             "edge feature's name (str), not %s", e,
                             Py_TYPE(v[e])->tp_name);
                return -1;
            }
            if ((s->wfeat[e] = PyUnicode_AsUTF8AndSize(v[e], &len)) == NULL)
                return -1;
            if (strlen(s->wfeat[e]) != (size_t)len) {
                gkvpy_raisef(GKV_EINVAL, "prob: edge type %d: the feature "
                             "name holds a NUL character", e);
                return -1;
            }
            s->wref[e] = Py_NewRef(v[e]);
            any = 1;
        }
        if (any)
            s->opts.edge_w_feat = s->wfeat;
    }
    return 0;
}

/* prob and edge_w into s->opts (gkvpy_sargs_get). */
static int
weights_get(gkvpy_sargs *s, int ne, PyObject *prob, PyObject *edge_w,
            const gkv_pbook *b)
{
    PyObject *v[64];
    char buf[128];
    int any = 0;

    if (gkvpy_prob_get(s, ne, prob, b) < 0)
        return -1;
    if (edge_w == NULL || edge_w == Py_None)
        return 0;
    if (per_etype(edge_w, ne, b, "edge_w", 0, 0, v) < 0)
        return -1;
    any = 0;
    for (int e = 0; e < ne; e++) {
        if (v[e] == NULL || v[e] == Py_None)
            continue;
        if (gkvpy_in_get(v[e], &s->win[e], "edge_w", 0) < 0)
            return -1;
        if (s->win[e].ndim != 1 &&
            (s->win[e].ndim != 2 || s->win[e].shape[1] != 1)) {
            gkvpy_raisef(GKV_EINVAL, "edge_w: edge type %d: one weight per "
                         "edge (shape (E,) or (E, 1)), got shape %s", e,
                         shape_str(&s->win[e], buf, sizeof buf));
            return -1;
        }
        if (s->win[e].dtype != GKV_F32) {
            gkvpy_raisef(GKV_EINVAL, "edge_w: edge type %d: expected float32 "
                         "weights by edge ID, got %s", e,
                         gkvpy_dtype_name(s->win[e].dtype)
                         ? gkvpy_dtype_name(s->win[e].dtype) : "another dtype");
            return -1;
        }
        s->ew[e] = s->win[e].ptr;
        s->ewlen[e] = (int64_t)s->win[e].n;
        any = 1;
    }
    if (any) {
        s->opts.edge_w = s->ew;
        s->opts.edge_w_len = s->ewlen;
    }
    return 0;
}

int
gkvpy_sargs_get(gkvpy_sargs *s, int num_ntypes, int num_etypes,
                PyObject *seeds, PyObject *fanouts, int layers,
                unsigned long long seed, const char *dir, int replace,
                int weighted, PyObject *prob, PyObject *edge_w,
                const gkv_pbook *book)
{
    memset(s, 0, sizeof *s);
    if (num_ntypes > 64 || num_etypes > 64) {
        gkvpy_raisef(GKV_ENOTSUP, "more than 64 node or edge types");
        return -1;
    }
    s->nt = num_ntypes;
    if (PyDict_Check(seeds)) {
        PyObject *k, *v;
        Py_ssize_t pos = 0;

        while (PyDict_Next(seeds, &pos, &k, &v)) {
            long t = PyLong_Check(k) ? PyLong_AsLong(k) : -1;

            if (t < 0 || t >= num_ntypes) {
                PyErr_Clear();
                gkvpy_raisef(GKV_EINVAL, "seeds: a key (%s %ld) is not a node "
                             "type index (0 .. %d)", Py_TYPE(k)->tp_name, t,
                             num_ntypes - 1);
                goto fail;
            }
            if (s->in[t].what != NULL) {
                gkvpy_raisef(GKV_EINVAL, "seeds: node type %ld twice", t);
                goto fail;
            }
            if (gkvpy_in_ids(v, &s->in[t], "seeds") < 0)
                goto fail;
            if (s->in[t].dtype != GKV_I64) {
                gkvpy_raisef(GKV_EINVAL, "seeds: node IDs must be int64");
                goto fail;
            }
            s->seeds[t] = s->in[t].ptr;
            s->nseeds[t] = s->in[t].n;
        }
    } else {
        if (num_ntypes != 1) {
            gkvpy_raisef(GKV_EINVAL, "seeds: the graph has %d node types: "
                         "give a dict {node type: IDs}", num_ntypes);
            goto fail;
        }
        if (gkvpy_in_ids(seeds, &s->in[0], "seeds") < 0)
            goto fail;
        if (s->in[0].dtype != GKV_I64) {
            gkvpy_raisef(GKV_EINVAL, "seeds: node IDs must be int64");
            goto fail;
        }
        s->seeds[0] = s->in[0].ptr;
        s->nseeds[0] = s->in[0].n;
    }
    if (layers) {
        PyObject *f = PySequence_Fast(fanouts, "");
        int nf;

        if (f == NULL) {
            PyErr_Clear();
            gkvpy_raisef(GKV_EINVAL, "fanouts: expected a list, one fanout "
                         "per layer");
            goto fail;
        }
        s->nlayers = (int)PySequence_Fast_GET_SIZE(f);
        if (s->nlayers < 1 || s->nlayers > 64) {
            Py_DECREF(f);
            gkvpy_raisef(GKV_EINVAL, "fanouts: 1 to 64 layers, not %d",
                         s->nlayers);
            goto fail;
        }
        s->fan = PyMem_Calloc((size_t)s->nlayers * (num_etypes + 1), sizeof(int));
        if (s->fan == NULL) {
            Py_DECREF(f);
            PyErr_NoMemory();
            goto fail;
        }
        /* rows of one int each, or of num_etypes each: not mixed */
        for (int i = 0; i < s->nlayers; i++) {
            int row[64];

            if (fan_row(PySequence_Fast_GET_ITEM(f, i), num_etypes, row,
                        &nf) < 0) {
                Py_DECREF(f);
                goto fail;
            }
            if (i > 0 && nf != s->nfan) {
                Py_DECREF(f);
                gkvpy_raisef(GKV_EINVAL, "fanouts: give every layer an int, "
                             "or every layer a list per edge type");
                goto fail;
            }
            s->nfan = nf;
            memcpy(s->fan + (size_t)i * nf, row, (size_t)nf * sizeof(int));
        }
        Py_DECREF(f);
    } else {
        if ((s->fan = PyMem_Calloc((size_t)num_etypes + 1, sizeof(int))) == NULL) {
            PyErr_NoMemory();
            goto fail;
        }
        if (fan_row(fanouts, num_etypes, s->fan, &s->nfan) < 0)
            goto fail;
        s->nlayers = 1;
    }
    s->opts.seed = seed;
    if (strcmp(dir, "in") == 0) {
        s->opts.dir = GKV_DIR_IN;
    } else if (strcmp(dir, "out") == 0) {
        s->opts.dir = GKV_DIR_OUT;
    } else {
        gkvpy_raisef(GKV_EINVAL, "dir '%s': expected 'in' or 'out'", dir);
        goto fail;
    }
    s->opts.flags = (replace ? GKV_SAMPLE_REPLACE : 0) |
                    (weighted ? GKV_SAMPLE_WEIGHTED : 0);
    if (weights_get(s, num_etypes, prob, edge_w, book) < 0)
        goto fail;
    return 0;
fail:
    gkvpy_sargs_release(s);
    return -1;
}

void
gkvpy_sargs_release(gkvpy_sargs *s)
{
    for (int t = 0; t < 64; t++) {
        if (s->in[t].what != NULL)
            gkvpy_in_release(&s->in[t]);
        if (s->win[t].what != NULL)
            gkvpy_in_release(&s->win[t]);
        Py_CLEAR(s->wref[t]);
    }
    PyMem_Free(s->fan);
    s->fan = NULL;
}

/* ---- results, copied out of the sampler's or client's memory ---- */

/* n int64 values at p: a copy the Array owns (owner NULL), or a view that
 * keeps 'owner' alive. */
static PyObject *
ids_array(PyObject *owner, const int64_t *p, size_t n)
{
    Py_ssize_t sh = (Py_ssize_t)n;

    if (owner == NULL)
        return gkvpy_array_i64(p, n);
    return (PyObject *)gkvpy_array_view(owner, (void *)p, GKV_I64, 1, &sh);
}

static PyObject *
edges_tuple(PyObject *owner, const gkv_sample_edges *e)
{
    return Py_BuildValue("(NNN)", ids_array(owner, e->src, e->n),
                         ids_array(owner, e->dst, e->n),
                         ids_array(owner, e->eid, e->n));
}

PyObject *
gkvpy_edges_list(PyObject *owner, const gkv_sample_edges *e, int ne)
{
    PyObject *l = PyList_New(ne);

    for (int i = 0; l != NULL && i < ne; i++) {
        PyObject *t = edges_tuple(owner, &e[i]);

        if (t == NULL) {
            Py_CLEAR(l);
            break;
        }
        PyList_SET_ITEM(l, i, t);
    }
    return l;
}

PyObject *
gkvpy_blocks_tuple(PyObject *owner, const gkv_block *b, int nl)
{
    PyObject *r = PyTuple_New(nl);

    for (int i = 0; r != NULL && i < nl; i++) {
        PyObject *nodes = PyTuple_New(b[i].num_ntypes),
                 *nsrc = PyTuple_New(b[i].num_ntypes),
                 *ndst = PyTuple_New(b[i].num_ntypes),
                 *edges = NULL, *blk;

        if (nodes == NULL || nsrc == NULL || ndst == NULL)
            goto fail_block;
        for (int t = 0; t < b[i].num_ntypes; t++) {
            const gkv_block_nodes *bn = &b[i].nodes[t];
            PyObject *a = ids_array(owner, bn->ids, bn->num_src);

            if (a == NULL)
                goto fail_block;
            PyTuple_SET_ITEM(nodes, t, a);
            PyTuple_SET_ITEM(nsrc, t, PyLong_FromSize_t(bn->num_src));
            PyTuple_SET_ITEM(ndst, t, PyLong_FromSize_t(bn->num_dst));
        }
        if ((edges = gkvpy_edges_list(owner, b[i].edges, b[i].num_etypes)) == NULL)
            goto fail_block;
        if ((blk = Py_BuildValue("(NNNN)", nodes, nsrc, ndst, edges)) == NULL) {
            Py_CLEAR(r);
            break;
        }
        PyTuple_SET_ITEM(r, i, blk);
        continue;
fail_block:
        Py_XDECREF(nodes);
        Py_XDECREF(nsrc);
        Py_XDECREF(ndst);
        Py_XDECREF(edges);
        Py_CLEAR(r);
    }
    return r;
}

/* ---- per-ID queries (degrees, find_edges) ---- */

PyObject *
gkvpy_query(void *h, gkvpy_query_fn fn, int nout, PyObject *args)
{
    PyObject *ids;
    gkvpy_array *a = NULL, *b = NULL;
    gkvpy_in in;
    Py_ssize_t n;
    int type;
    gkv_err rc;

    if (!PyArg_ParseTuple(args, "iO", &type, &ids) ||
        gkvpy_in_ids(ids, &in, "ids") < 0)
        return NULL;
    n = (Py_ssize_t)in.n;
    if ((a = gkvpy_array_new(GKV_I64, 1, &n)) == NULL ||
        (nout == 2 && (b = gkvpy_array_new(GKV_I64, 1, &n)) == NULL)) {
        gkvpy_in_release(&in);
        Py_XDECREF(a);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    rc = fn(h, type, in.ptr, in.n, a->data, b != NULL ? b->data : NULL);
    Py_END_ALLOW_THREADS
    gkvpy_in_release(&in);
    if (rc != GKV_OK) {
        Py_DECREF(a);
        Py_XDECREF(b);
        return gkvpy_raise(rc);
    }
    if (nout == 1)
        return (PyObject *)a;
    return Py_BuildValue("(NN)", a, b);
}

/* ---- the partition book ---- */

/* [(lo, hi)] per partition of type 'type', by 'range' (the node or the
 * edge ranges of the book). */
static PyObject *
ranges(const gkv_pbook *b,
       gkv_err (*range)(const gkv_pbook *, int, int, int64_t *, int64_t *),
       int type, int np)
{
    PyObject *rs = PyList_New(np);

    for (int p = 0; rs != NULL && p < np; p++) {
        int64_t lo = 0, hi = 0;
        PyObject *t;

        range(b, type, p, &lo, &hi);
        if ((t = Py_BuildValue("(LL)", (long long)lo, (long long)hi)) == NULL) {
            Py_CLEAR(rs);
            break;
        }
        PyList_SET_ITEM(rs, p, t);
    }
    return rs;
}

PyObject *
gkvpy_pbook_dict(const gkv_pbook *b)
{
    int nt = gkv_pbook_num_ntypes(b), ne = gkv_pbook_num_etypes(b),
        np = gkv_pbook_num_parts(b);
    PyObject *ntypes = PyList_New(nt), *etypes = PyList_New(ne),
             *nn = PyList_New(nt), *nedge = PyList_New(ne),
             *nrange = PyList_New(nt), *erange = PyList_New(ne),
             *rev = PyDict_New();

    if (!ntypes || !etypes || !nn || !nedge || !nrange || !erange || !rev)
        goto fail;
    for (int t = 0; t < nt; t++) {
        PyObject *rs = ranges(b, gkv_pbook_node_range, t, np);

        if (rs == NULL)
            goto fail;
        PyList_SET_ITEM(ntypes, t, PyUnicode_FromString(gkv_pbook_ntype_name(b, t)));
        PyList_SET_ITEM(nn, t, PyLong_FromLongLong(gkv_pbook_num_nodes(b, t)));
        PyList_SET_ITEM(nrange, t, rs);
    }
    for (int e = 0; e < ne; e++) {
        PyObject *rs = ranges(b, gkv_pbook_edge_range, e, np);

        if (rs == NULL)
            goto fail;
        PyList_SET_ITEM(etypes, e, PyUnicode_FromString(gkv_pbook_etype_name(b, e)));
        PyList_SET_ITEM(nedge, e, PyLong_FromLongLong(gkv_pbook_num_edges(b, e)));
        PyList_SET_ITEM(erange, e, rs);
    }
    for (int e = 0; e < ne; e++) {          /* --reverse-etypes pairs */
        int r = gkv_pbook_reverse_etype(b, e);
        PyObject *v;

        if (r < 0)
            continue;
        v = PyUnicode_FromString(gkv_pbook_etype_name(b, r));
        if (v == NULL ||
            PyDict_SetItemString(rev, gkv_pbook_etype_name(b, e), v) < 0) {
            Py_XDECREF(v);
            goto fail;
        }
        Py_DECREF(v);
    }
    return Py_BuildValue("{s:s,s:s,s:i,s:N,s:N,s:N,s:N,s:N,s:N,s:N}",
        "graph_name", gkv_pbook_graph_name(b),
        "method", gkv_pbook_method(b),
        "num_parts", np,
        "ntypes", ntypes, "etypes", etypes,
        "num_nodes", nn, "num_edges", nedge,
        "node_ranges", nrange, "edge_ranges", erange,
        "reverse_etypes", rev);
fail:
    Py_XDECREF(rev);
    Py_XDECREF(ntypes);
    Py_XDECREF(etypes);
    Py_XDECREF(nn);
    Py_XDECREF(nedge);
    Py_XDECREF(nrange);
    Py_XDECREF(erange);
    return NULL;
}

PyObject *
gkvpy_pbook_split(const gkv_pbook *b, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"edge", "type", "mask", "ids", "num_trainers",
                             "rank", NULL};
    int edge, type, nt = 1, rank = 0;
    PyObject *mask = Py_None, *ids = Py_None, *ret = NULL;
    gkvpy_in in;
    int64_t *out = NULL;
    size_t nout = 0;
    gkv_err rc;

    if (!PyArg_ParseTupleAndKeywords(args, kw, "pi|OOii", kwlist, &edge, &type,
                                     &mask, &ids, &nt, &rank))
        return NULL;
    if ((mask == Py_None) == (ids == Py_None))
        return gkvpy_raisef(GKV_EINVAL, "split: pass exactly one of mask and ids");
    if (mask != Py_None) {
        if (gkvpy_in_get(mask, &in, "mask", 0) < 0)
            return NULL;
        if ((in.dtype != GKV_U8 && in.dtype != GKVPY_BOOL) || in.ndim != 1) {
            gkvpy_in_release(&in);
            return gkvpy_raisef(GKV_EINVAL, "mask: expected a 1-d uint8 or bool "
                                "array");
        }
    } else if (gkvpy_in_ids(ids, &in, "ids") < 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    rc = (edge ? gkv_pbook_edge_split : gkv_pbook_node_split)(
        b, type, mask != Py_None ? in.ptr : NULL,
        mask != Py_None ? NULL : in.ptr, in.n, nt, rank, &out, &nout);
    Py_END_ALLOW_THREADS
    gkvpy_in_release(&in);
    if (rc != GKV_OK)
        return gkvpy_raise(rc);
    ret = gkvpy_array_i64(out, nout);
    gkv_free(out);
    return ret;
}

/* ---- gkv.Partition ---- */

typedef struct {
    PyObject_HEAD
    gkv_part    *p;
    gkv_sgraph  *sg;
    gkv_sampler *sp;
    int          inflight;
    int          users;          /* Loaders borrowing p */
} part_obj;

static void
part_free(part_obj *o)
{
    gkv_sampler_free(o->sp);
    gkv_sgraph_free(o->sg);
    gkv_part_close(o->p);
    o->sp = NULL;
    o->sg = NULL;
    o->p = NULL;
}

static int
part_init(part_obj *o, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"config", "part", "threads", NULL};
    PyObject *path;
    int part = 0, threads = 1;
    gkv_err rc;

    if (o->p != NULL) {
        gkvpy_raisef(GKV_EINVAL, "Partition.__init__ called twice");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&|ii", kwlist,
                                     PyUnicode_FSDecoder, &path, &part,
                                     &threads))
        return -1;
    Py_BEGIN_ALLOW_THREADS
    rc = gkv_part_open(&o->p, PyUnicode_AsUTF8(path), part, 0);
    if (rc == GKV_OK)
        rc = gkv_part_sgraph(o->p, &o->sg);
    if (rc == GKV_OK)
        rc = gkv_sampler_new(&o->sp, o->sg, threads);
    Py_END_ALLOW_THREADS
    Py_DECREF(path);
    if (rc != GKV_OK) {
        gkvpy_raise(rc);
        part_free(o);
        return -1;
    }
    return 0;
}

static PyObject *
part_close(part_obj *o, PyObject *unused)
{
    if (o->inflight > 0)
        return gkvpy_raisef(GKV_EBUSY, "the partition has calls running");
    if (o->users > 0)
        return gkvpy_raisef(GKV_EBUSY, "%d loaders use the partition: close "
                            "them first", o->users);
    part_free(o);
    Py_RETURN_NONE;
}

static void
part_dealloc(part_obj *o)
{
    if (o->inflight == 0)
        part_free(o);
    Py_TYPE(o)->tp_free((PyObject *)o);
}

static PyObject *
part_pbook(part_obj *o, PyObject *unused)
{
    if (o->p == NULL)
        return gkvpy_raisef(GKV_EINVAL, "the partition is closed");
    return gkvpy_pbook_dict(gkv_part_book(o->p));
}

static PyObject *
part_split(part_obj *o, PyObject *args, PyObject *kw)
{
    if (o->p == NULL)
        return gkvpy_raisef(GKV_EINVAL, "the partition is closed");
    return gkvpy_pbook_split(gkv_part_book(o->p), args, kw);
}

/* The sampler serialises nothing: one call at a time per Partition (the
 * GIL is released, so the inflight count refuses a second). */
static PyObject *
part_sample(part_obj *o, PyObject *args, PyObject *kw, int blocks)
{
    static char *kwn[] = {"seeds", "fanout", "seed", "dir", "replace",
                          "weighted", "prob", "edge_w", NULL};
    static char *kwb[] = {"seeds", "fanouts", "seed", "dir", "replace",
                          "weighted", "prob", "edge_w", NULL};
    PyObject *seeds, *fan, *ret, *prob = Py_None, *edge_w = Py_None;
    unsigned long long seed = 0;
    const char *dir = "in";
    int replace = 0, weighted = 0;
    gkvpy_sargs *s;
    gkv_err rc;

    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|$KsppOO",
                                     blocks ? kwb : kwn, &seeds, &fan, &seed,
                                     &dir, &replace, &weighted, &prob, &edge_w))
        return NULL;
    if (o->p == NULL)
        return gkvpy_raisef(GKV_EINVAL, "the partition is closed");
    if (prob != Py_None)
        return gkvpy_raisef(GKV_ENOTSUP, "prob: a Partition samples in this "
                            "process, with no server to read the edge "
                            "feature: pass its values as edge_w (float32 by "
                            "edge ID), or sample through a gkv.Client");
    if (o->inflight > 0)
        return gkvpy_raisef(GKV_EBUSY, "the partition's sampler is in use "
                            "by another thread");
    if ((s = PyMem_Calloc(1, sizeof *s)) == NULL)
        return PyErr_NoMemory();
    if (gkvpy_sargs_get(s, gkv_sgraph_num_ntypes(o->sg),
                        gkv_sgraph_num_etypes(o->sg), seeds, fan, blocks, seed,
                        dir, replace, weighted, Py_None, edge_w,
                        gkv_part_book(o->p)) < 0) {
        PyMem_Free(s);
        return NULL;
    }
    o->inflight++;
    if (blocks) {
        gkv_block bl[64];

        Py_BEGIN_ALLOW_THREADS
        rc = gkv_sample_blocks(o->sp, s->seeds, s->nseeds, s->fan, s->nfan,
                               s->nlayers, &s->opts, bl);
        Py_END_ALLOW_THREADS
        ret = rc != GKV_OK ? gkvpy_raise(rc) : gkvpy_blocks_tuple(NULL, bl, s->nlayers);
    } else {
        gkv_sample_edges e[64];

        Py_BEGIN_ALLOW_THREADS
        rc = gkv_sample_neighbors(o->sp, s->seeds, s->nseeds, s->fan, s->nfan,
                                  0, &s->opts, e);
        Py_END_ALLOW_THREADS
        ret = rc != GKV_OK ? gkvpy_raise(rc)
                           : gkvpy_edges_list(NULL, e, gkv_sgraph_num_etypes(o->sg));
    }
    o->inflight--;
    gkvpy_sargs_release(s);
    PyMem_Free(s);
    return ret;
}

static PyObject *
part_sample_neighbors(part_obj *o, PyObject *args, PyObject *kw)
{
    return part_sample(o, args, kw, 0);
}

static PyObject *
part_sample_blocks(part_obj *o, PyObject *args, PyObject *kw)
{
    return part_sample(o, args, kw, 1);
}

static gkv_err
q_in_deg(void *h, int t, const int64_t *ids, size_t n, int64_t *a, int64_t *b)
{
    return gkv_part_in_degrees(h, t, ids, n, a);
}

static gkv_err
q_out_deg(void *h, int t, const int64_t *ids, size_t n, int64_t *a, int64_t *b)
{
    return gkv_part_out_degrees(h, t, ids, n, a);
}

static gkv_err
q_find_edges(void *h, int t, const int64_t *ids, size_t n, int64_t *a,
             int64_t *b)
{
    return gkv_part_find_edges(h, t, ids, n, a, b);
}

/* One query at a time, like sampling. */
static PyObject *
part_query(part_obj *o, gkvpy_query_fn fn, int nout, PyObject *args)
{
    PyObject *r;

    if (o->p == NULL)
        return gkvpy_raisef(GKV_EINVAL, "the partition is closed");
    if (o->inflight > 0)
        return gkvpy_raisef(GKV_EBUSY, "the partition is in use by another "
                            "thread");
    o->inflight++;
    r = gkvpy_query(o->p, fn, nout, args);
    o->inflight--;
    return r;
}

static PyObject *
part_in_degrees(part_obj *o, PyObject *args)
{
    return part_query(o, q_in_deg, 1, args);
}

static PyObject *
part_out_degrees(part_obj *o, PyObject *args)
{
    return part_query(o, q_out_deg, 1, args);
}

static PyObject *
part_find_edges(part_obj *o, PyObject *args)
{
    return part_query(o, q_find_edges, 2, args);
}

static PyMethodDef part_methods[] = {
    {"in_degrees", (PyCFunction)part_in_degrees, METH_VARARGS,
     "in_degrees(etype, nodes) -> int64 Array (owned nodes)"},
    {"out_degrees", (PyCFunction)part_out_degrees, METH_VARARGS,
     "out_degrees(etype, nodes) -> int64 Array (needs the CSR)"},
    {"find_edges", (PyCFunction)part_find_edges, METH_VARARGS,
     "find_edges(etype, eids) -> (src, dst) int64 Arrays"},
    {"close", (PyCFunction)part_close, METH_NOARGS, "close()"},
    {"pbook", (PyCFunction)part_pbook, METH_NOARGS,
     "pbook() -> dict: the partition book's basics (graph_name, method, "
     "num_parts, ntypes, etypes, num_nodes, num_edges, node_ranges, "
     "edge_ranges, reverse_etypes {etype: its reverse etype})"},
    {"_split", (PyCFunction)(void (*)(void))part_split,
     METH_VARARGS | METH_KEYWORDS, NULL},
    {"_sample_neighbors", (PyCFunction)(void (*)(void))part_sample_neighbors,
     METH_VARARGS | METH_KEYWORDS, NULL},
    {"_sample_blocks", (PyCFunction)(void (*)(void))part_sample_blocks,
     METH_VARARGS | METH_KEYWORDS, NULL},
    {NULL, NULL, 0, NULL},
};

PyTypeObject gkvpy_part_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "gkv._Partition",
    .tp_basicsize = sizeof(part_obj),
    .tp_dealloc = (destructor)part_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "The C partition; use gkv.Partition.",
    .tp_methods = part_methods,
    .tp_init = (initproc)part_init,
    .tp_new = PyType_GenericNew,
};

gkv_part *
gkvpy_part_get(PyObject *o)
{
    if (!PyObject_TypeCheck(o, &gkvpy_part_type)) {
        gkvpy_raisef(GKV_EINVAL, "expected a gkv.Partition, not %s",
                     Py_TYPE(o)->tp_name);
        return NULL;
    }
    if (((part_obj *)o)->p == NULL) {
        gkvpy_raisef(GKV_EINVAL, "the partition is closed");
        return NULL;
    }
    return ((part_obj *)o)->p;
}

void
gkvpy_part_use(PyObject *o, int delta)
{
    ((part_obj *)o)->users += delta;
}

int
gkvpy_part_ready(PyObject *m)
{
    if (PyType_Ready(&gkvpy_part_type) < 0)
        return -1;
    return PyModule_AddObjectRef(m, "_Partition", (PyObject *)&gkvpy_part_type);
}
