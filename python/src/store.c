/* store.c - gkv.Store: the embedded store (kv/gkv_kv.h) from Python. */
#include <string.h>
#include <unistd.h>
#include "gkvpy.h"

typedef struct {
    PyObject_HEAD
    gkv_store    *s;
    PyObject     *path;          /* str, as given */
    unsigned      flags;         /* GKV_CREATE ... as opened */
    gkv_open_opts opts;
    pid_t         pid;           /* the process that opened s */
    int           inflight;      /* calls running without the GIL */
} store_obj;

/* The C call 'stmt' without the interpreter lock, counted in inflight. */
#define NOGIL(o, stmt) do {                                              \
        (o)->inflight++;                                                  \
        Py_BEGIN_ALLOW_THREADS stmt; Py_END_ALLOW_THREADS                 \
        (o)->inflight--;                                                  \
    } while (0)

/* The handle, reopened first in a child after fork() (the parent's handle
 * is not usable there: gkv_kv.h); NULL with an exception. */
static gkv_store *
store_get(store_obj *o)
{
    gkv_err rc;

    if (o->s == NULL) {
        gkvpy_raisef(GKV_EINVAL, "the store is closed");
        return NULL;
    }
    if (o->pid != getpid()) {
        gkv_store *old = o->s, *s = NULL;
        const char *path = PyUnicode_AsUTF8(o->path);

        o->s = NULL;
        gkv_store_close(old);       /* in a child: frees memory only */
        o->inflight = 0;            /* the parent's threads are not here */
        NOGIL(o, rc = gkv_store_open(&s, path, o->flags & ~GKV_CREATE,
                                     &o->opts));
        if (rc != GKV_OK)
            return (gkv_store *)gkvpy_raise(rc);
        o->s = s;
        o->pid = getpid();
    }
    return o->s;
}

static int
store_init(store_obj *o, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"path", "create", "readonly", "nosync",
                             "map_size", "max_readers", NULL};
    PyObject *path;
    int create = 0, rdonly = 0, nosync = 0;
    unsigned long long map_size = 0;
    unsigned max_readers = 0;
    const char *p;
    gkv_store *s = NULL;
    gkv_err rc;

    if (o->s != NULL) {
        gkvpy_raisef(GKV_EINVAL, "Store.__init__ called twice");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&|$pppKI", kwlist,
                                     PyUnicode_FSDecoder, &path, &create,
                                     &rdonly, &nosync, &map_size, &max_readers))
        return -1;
    Py_XSETREF(o->path, path);
    o->flags = (create ? GKV_CREATE : 0) | (rdonly ? GKV_RDONLY : 0) |
               (nosync ? GKV_NOSYNC : 0);
    o->opts.map_size = map_size;
    o->opts.max_readers = max_readers;
    if ((p = PyUnicode_AsUTF8(path)) == NULL)
        return -1;
    NOGIL(o, rc = gkv_store_open(&s, p, o->flags, &o->opts));
    if (rc != GKV_OK) {
        gkvpy_raise(rc);
        return -1;
    }
    o->s = s;
    o->pid = getpid();
    return 0;
}

static PyObject *
store_close(store_obj *o, PyObject *unused)
{
    gkv_store *s = o->s;

    if (o->inflight > 0)
        return gkvpy_raisef(GKV_EBUSY, "the store has %d calls running in "
                            "other threads", o->inflight);
    o->s = NULL;
    if (s != NULL)
        NOGIL(o, gkv_store_close(s));    /* flushes write-back tensors */
    Py_RETURN_NONE;
}

static void
store_dealloc(store_obj *o)
{
    if (o->s != NULL && o->inflight == 0)
        gkv_store_close(o->s);
    Py_XDECREF(o->path);
    Py_TYPE(o)->tp_free((PyObject *)o);
}

static PyObject *
store_enter(store_obj *o, PyObject *unused)
{
    return Py_NewRef((PyObject *)o);
}

static PyObject *
store_exit(store_obj *o, PyObject *args)
{
    return store_close(o, NULL);
}

/* ---- shared with the client ---- */

PyObject *
gkvpy_desc_dict(const gkv_tensor_desc *d)
{
    PyObject *shape = PyTuple_New(d->ndim);

    if (shape == NULL)
        return NULL;
    for (unsigned i = 0; i < d->ndim; i++)
        PyTuple_SET_ITEM(shape, i, PyLong_FromUnsignedLongLong(d->shape[i]));
    return Py_BuildValue("{s:s,s:s,s:N,s:K,s:K,s:n,s:I,s:K,s:O,s:O}",
        "name", d->name,
        "dtype", gkvpy_dtype_name(d->dtype),
        "row_shape", shape,
        "lo", (unsigned long long)d->lo,
        "hi", (unsigned long long)d->hi,
        "row_bytes", (Py_ssize_t)d->row_bytes,
        "chunk_rows", (unsigned)d->chunk_rows,
        "nchunks", (unsigned long long)d->nchunks,
        "hot", (d->flags & GKV_TENSOR_HOT) ? Py_True : Py_False,
        "is_state", d->is_state ? Py_True : Py_False);
}

int
gkvpy_spec(PyObject *dtype, PyObject *row_shape, unsigned long long lo,
           PyObject *hi, const char *init, double a, double b,
           unsigned long long seed, unsigned chunk_rows, int hot,
           gkv_tensor_spec *sp)
{
    PyObject *f;
    int dt;

    memset(sp, 0, sizeof *sp);
    if (dtype == NULL || dtype == Py_None)
        dt = GKV_F32;
    else if ((dt = gkvpy_dtype_parse(dtype)) < 0)
        return -1;
    sp->dtype = (gkv_dtype)dt;
    if (row_shape == NULL || row_shape == Py_None) {
        sp->ndim = 0;
    } else if (PyLong_Check(row_shape)) {
        sp->ndim = 1;
        sp->shape[0] = PyLong_AsUnsignedLongLong(row_shape);
        if (PyErr_Occurred()) {
            PyErr_Clear();
            gkvpy_raisef(GKV_EINVAL, "row_shape: dims must be >= 1");
            return -1;
        }
    } else {
        if ((f = PySequence_Fast(row_shape, "")) == NULL) {
            PyErr_Clear();
            gkvpy_raisef(GKV_EINVAL, "row_shape: expected a tuple of ints");
            return -1;
        }
        if (PySequence_Fast_GET_SIZE(f) > GKV_MAX_DIMS) {
            Py_DECREF(f);
            gkvpy_raisef(GKV_EINVAL, "row_shape: at most %d dims",
                         GKV_MAX_DIMS);
            return -1;
        }
        sp->ndim = (unsigned)PySequence_Fast_GET_SIZE(f);
        for (unsigned i = 0; i < sp->ndim; i++) {
            sp->shape[i] = PyLong_AsUnsignedLongLong(
                PySequence_Fast_GET_ITEM(f, i));
            if (PyErr_Occurred()) {
                PyErr_Clear();
                Py_DECREF(f);
                gkvpy_raisef(GKV_EINVAL, "row_shape: dims must be ints >= 1");
                return -1;
            }
        }
        Py_DECREF(f);
    }
    sp->lo = lo;
    if (hi == NULL || hi == Py_None) {
        gkvpy_raisef(GKV_EINVAL, "hi: the end of the ID range [lo, hi) is "
                     "required");
        return -1;
    }
    sp->hi = PyLong_AsUnsignedLongLong(hi);
    if (PyErr_Occurred()) {
        PyErr_Clear();
        gkvpy_raisef(GKV_EINVAL, "hi: expected an int >= 0");
        return -1;
    }
    if (strcmp(init, "zeros") == 0)
        sp->init = GKV_INIT_ZEROS;
    else if (strcmp(init, "const") == 0)
        sp->init = GKV_INIT_CONST;
    else if (strcmp(init, "uniform") == 0)
        sp->init = GKV_INIT_UNIFORM;
    else if (strcmp(init, "normal") == 0)
        sp->init = GKV_INIT_NORMAL;
    else {
        gkvpy_raisef(GKV_EINVAL, "init '%s': expected zeros, const, uniform "
                     "or normal", init);
        return -1;
    }
    sp->a = a;
    sp->b = b;
    sp->seed = seed;
    sp->chunk_rows = chunk_rows;
    sp->flags = hot ? GKV_TENSOR_HOT : 0;
    return 0;
}

int
gkvpy_push_args(PyObject *handler, double lr, double eps, double beta1,
                double beta2, int dups_sum, gkv_push_args *a)
{
    memset(a, 0, sizeof *a);
    if (handler != NULL && handler != Py_None) {
        if (!PyUnicode_Check(handler)) {
            gkvpy_raisef(GKV_EINVAL, "handler: expected a name such as "
                         "'assign', 'add', 'sgd', 'adagrad' or 'adam'");
            return -1;
        }
        if ((a->handler = PyUnicode_AsUTF8(handler)) == NULL)
            return -1;
    }
    a->lr = lr;
    a->eps = eps;
    a->beta1 = beta1;
    a->beta2 = beta2;
    a->flags = dups_sum ? GKV_PUSH_DUPS_SUM : 0;
    return 0;
}

/* ---- tensors ---- */

#define CREATE_KWLIST {"name", "dtype", "row_shape", "hi", "lo", "init", "a", \
                       "b", "seed", "chunk_rows", "hot", NULL}

static PyObject *
store_create(store_obj *o, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = CREATE_KWLIST;
    const char *name, *init = "zeros";
    PyObject *dtype = NULL, *row_shape = NULL, *hi = NULL;
    unsigned long long lo = 0, seed = 0;
    double a = 0, b = 0;
    unsigned chunk_rows = 0;
    int hot = 0;
    gkv_tensor_spec sp;
    gkv_tensor_desc d;
    gkv_store *s;
    gkv_err rc;

    if (!PyArg_ParseTupleAndKeywords(args, kw, "s|$OOOKsddKIp", kwlist, &name,
                                     &dtype, &row_shape, &hi, &lo, &init, &a,
                                     &b, &seed, &chunk_rows, &hot))
        return NULL;
    if (gkvpy_spec(dtype, row_shape, lo, hi, init, a, b, seed, chunk_rows, hot, &sp) < 0)
        return NULL;
    if ((s = store_get(o)) == NULL)
        return NULL;
    NOGIL(o, rc = gkv_tensor_create(s, name, &sp);
          if (rc == GKV_OK) rc = gkv_tensor_info(s, NULL, name, &d));
    if (rc != GKV_OK)
        return gkvpy_raise(rc);
    return gkvpy_desc_dict(&d);
}

/* Describes 'name' into *d; -1 with an exception. */
static int
store_desc(store_obj *o, gkv_store *s, const char *name, gkv_tensor_desc *d)
{
    gkv_err rc;

    NOGIL(o, rc = gkv_tensor_info(s, NULL, name, d));
    if (rc != GKV_OK) {
        gkvpy_raise(rc);
        return -1;
    }
    return 0;
}

static PyObject *
store_describe(store_obj *o, PyObject *args)
{
    const char *name;
    gkv_tensor_desc d;
    gkv_store *s;

    if (!PyArg_ParseTuple(args, "s", &name) || (s = store_get(o)) == NULL ||
        store_desc(o, s, name, &d) < 0)
        return NULL;
    return gkvpy_desc_dict(&d);
}

PyObject *
gkvpy_desc_list(gkv_tensor_desc *v, size_t n)
{
    PyObject *l = PyList_New((Py_ssize_t)n);

    for (size_t i = 0; l != NULL && i < n; i++) {
        PyObject *d = gkvpy_desc_dict(&v[i]);

        if (d == NULL) {
            Py_CLEAR(l);
            break;
        }
        PyList_SET_ITEM(l, (Py_ssize_t)i, d);
    }
    gkv_free(v);
    return l;
}

static PyObject *
store_list(store_obj *o, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"with_state", NULL};
    int with_state = 0;
    gkv_tensor_desc *v = NULL;
    size_t n = 0;
    gkv_store *s;
    gkv_err rc;

    if (!PyArg_ParseTupleAndKeywords(args, kw, "|p", kwlist, &with_state) ||
        (s = store_get(o)) == NULL)
        return NULL;
    NOGIL(o, rc = gkv_tensor_list(s, NULL, with_state, &v, &n));
    if (rc != GKV_OK)
        return gkvpy_raise(rc);
    return gkvpy_desc_list(v, n);
}

static PyObject *
store_delete(store_obj *o, PyObject *args)
{
    const char *name;
    gkv_store *s;
    gkv_err rc;

    if (!PyArg_ParseTuple(args, "s", &name) || (s = store_get(o)) == NULL)
        return NULL;
    NOGIL(o, rc = gkv_tensor_delete(s, name));
    if (rc != GKV_OK)
        return gkvpy_raise(rc);
    Py_RETURN_NONE;
}

static PyObject *
store_pull(store_obj *o, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"name", "ids", "out", NULL};
    const char *name;
    PyObject *ids, *out = NULL;
    gkvpy_in iin, oin;
    gkvpy_array *arr = NULL;
    gkv_tensor_desc d;
    gkv_store *s;
    void *dst;
    gkv_err rc;

    if (!PyArg_ParseTupleAndKeywords(args, kw, "sO|O", kwlist, &name, &ids,
                                     &out) ||
        (s = store_get(o)) == NULL || store_desc(o, s, name, &d) < 0 ||
        gkvpy_in_ids(ids, &iin, "ids") < 0)
        return NULL;
    if ((dst = gkvpy_rows_dst(out, &oin, &arr, &d, iin.n)) == NULL) {
        gkvpy_in_release(&iin);
        return NULL;
    }
    NOGIL(o, rc = gkv_tensor_pull(s, NULL, name, iin.ptr, iin.n, dst,
                                  iin.n * d.row_bytes));
    gkvpy_in_release(&iin);
    gkvpy_in_release(&oin);
    if (rc != GKV_OK) {
        Py_XDECREF(arr);
        return gkvpy_raise(rc);
    }
    return arr != NULL ? (PyObject *)arr : Py_NewRef(out);
}

static PyObject *
store_read(store_obj *o, PyObject *args)
{
    const char *name;
    unsigned long long a, b;
    gkvpy_array *arr;
    gkv_tensor_desc d;
    Py_ssize_t sh[GKVPY_MAXDIM];
    gkv_store *s;
    gkv_err rc;

    if (!PyArg_ParseTuple(args, "sKK", &name, &a, &b) ||
        (s = store_get(o)) == NULL || store_desc(o, s, name, &d) < 0)
        return NULL;
    if (b < a)
        return gkvpy_raisef(GKV_EINVAL, "read [%llu, %llu): hi below lo", a, b);
    if ((arr = gkvpy_array_new(d.dtype, gkvpy_rows_shape(&d, b - a, sh), sh)) == NULL)
        return NULL;
    NOGIL(o, rc = gkv_tensor_read(s, NULL, name, a, b, arr->data, arr->nbytes));
    if (rc != GKV_OK) {
        Py_DECREF(arr);
        return gkvpy_raise(rc);
    }
    return (PyObject *)arr;
}

static PyObject *
store_push(store_obj *o, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"name", "ids", "rows", "handler", "lr", "eps",
                             "beta1", "beta2", "dups_sum", NULL};
    const char *name;
    PyObject *ids, *rows, *handler = NULL;
    double lr = 0, eps = 0, b1 = 0, b2 = 0;
    int dups = 0;
    gkv_push_args pa;
    gkvpy_in iin, rin;
    gkv_tensor_desc d;
    gkv_store *s;
    gkv_err rc;

    if (!PyArg_ParseTupleAndKeywords(args, kw, "sOO|O$ddddp", kwlist, &name,
                                     &ids, &rows, &handler, &lr, &eps, &b1,
                                     &b2, &dups) ||
        gkvpy_push_args(handler, lr, eps, b1, b2, dups, &pa) < 0 ||
        (s = store_get(o)) == NULL || store_desc(o, s, name, &d) < 0 ||
        gkvpy_in_ids(ids, &iin, "ids") < 0)
        return NULL;
    if (gkvpy_in_rows(rows, &rin, "rows", &d, iin.n, 0) < 0) {
        gkvpy_in_release(&iin);
        return NULL;
    }
    NOGIL(o, rc = gkv_tensor_push(s, name, iin.ptr, iin.n, rin.ptr,
                                  rin.nbytes, &pa));
    gkvpy_in_release(&iin);
    gkvpy_in_release(&rin);
    if (rc != GKV_OK)
        return gkvpy_raise(rc);
    Py_RETURN_NONE;
}

static PyObject *
store_write(store_obj *o, PyObject *args)
{
    const char *name;
    unsigned long long lo;
    PyObject *rows;
    gkvpy_in rin;
    gkv_tensor_desc d;
    gkv_store *s;
    gkv_err rc;

    if (!PyArg_ParseTuple(args, "sKO", &name, &lo, &rows) ||
        (s = store_get(o)) == NULL || store_desc(o, s, name, &d) < 0 ||
        gkvpy_in_rows(rows, &rin, "rows", &d, (size_t)-1, 0) < 0)
        return NULL;
    NOGIL(o, rc = gkv_tensor_write(s, name, lo, lo + (uint64_t)rin.shape[0],
                                   rin.ptr, rin.nbytes));
    gkvpy_in_release(&rin);
    if (rc != GKV_OK)
        return gkvpy_raise(rc);
    Py_RETURN_NONE;
}

static PyObject *
store_wb_start(store_obj *o, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"name", "interval_ms", NULL};
    const char *name;
    unsigned ms = 0;
    gkv_store *s;
    gkv_err rc;

    if (!PyArg_ParseTupleAndKeywords(args, kw, "s|I", kwlist, &name, &ms) ||
        (s = store_get(o)) == NULL)
        return NULL;
    NOGIL(o, rc = gkv_writeback_start(s, name, ms));
    if (rc != GKV_OK)
        return gkvpy_raise(rc);
    Py_RETURN_NONE;
}

static PyObject *
store_wb_stop(store_obj *o, PyObject *args)
{
    const char *name;
    gkv_store *s;
    gkv_err rc;

    if (!PyArg_ParseTuple(args, "s", &name) || (s = store_get(o)) == NULL)
        return NULL;
    NOGIL(o, rc = gkv_writeback_stop(s, name));
    if (rc != GKV_OK)
        return gkvpy_raise(rc);
    Py_RETURN_NONE;
}

static PyObject *
store_wb_flush(store_obj *o, PyObject *unused)
{
    gkv_store *s;
    gkv_err rc;

    if ((s = store_get(o)) == NULL)
        return NULL;
    NOGIL(o, rc = gkv_writeback_flush(s));
    if (rc != GKV_OK)
        return gkvpy_raise(rc);
    Py_RETURN_NONE;
}

static PyObject *
store_sync(store_obj *o, PyObject *unused)
{
    gkv_store *s;
    gkv_err rc;

    if ((s = store_get(o)) == NULL)
        return NULL;
    NOGIL(o, rc = gkv_store_sync(s));
    if (rc != GKV_OK)
        return gkvpy_raise(rc);
    Py_RETURN_NONE;
}

static PyObject *
store_opt_reset(store_obj *o, PyObject *args)
{
    const char *name, *opt = NULL;
    gkv_store *s;
    gkv_err rc;

    if (!PyArg_ParseTuple(args, "s|z", &name, &opt) ||
        (s = store_get(o)) == NULL)
        return NULL;
    NOGIL(o, rc = gkv_opt_reset(s, name, opt));
    if (rc != GKV_OK)
        return gkvpy_raise(rc);
    Py_RETURN_NONE;
}

static PyObject *
store_verify(store_obj *o, PyObject *args)
{
    const char *name = NULL;
    gkv_verify_report r;
    gkv_store *s;
    gkv_err rc;

    if (!PyArg_ParseTuple(args, "|z", &name) || (s = store_get(o)) == NULL)
        return NULL;
    memset(&r, 0, sizeof r);
    NOGIL(o, rc = gkv_store_verify(s, name, &r));
    if (rc != GKV_OK)
        return gkvpy_raise(rc);
    return Py_BuildValue("{s:K,s:K}", "chunks_checked",
                         (unsigned long long)r.chunks_checked, "bytes_checked",
                         (unsigned long long)r.bytes_checked);
}

static PyObject *
store_stat(store_obj *o, PyObject *unused)
{
    gkv_store_stat st;
    gkv_store *s;
    gkv_err rc;

    if ((s = store_get(o)) == NULL)
        return NULL;
    NOGIL(o, rc = gkv_store_stat_get(s, &st));
    if (rc != GKV_OK)
        return gkvpy_raise(rc);
    return Py_BuildValue("{s:I,s:K,s:K,s:K,s:K,s:K,s:K,s:I,s:I,s:K}",
        "format", (unsigned)st.format,
        "map_size", (unsigned long long)st.map_size,
        "used_bytes", (unsigned long long)st.used_bytes,
        "page_size", (unsigned long long)st.page_size,
        "ntensors", (unsigned long long)st.ntensors,
        "nchunks", (unsigned long long)st.nchunks,
        "data_bytes", (unsigned long long)st.data_bytes,
        "readers", st.readers, "max_readers", st.max_readers,
        "free_bytes", (unsigned long long)st.free_bytes);
}

static PyObject *
store_get_closed(store_obj *o, void *unused)
{
    return PyBool_FromLong(o->s == NULL);
}

static PyObject *
store_get_path(store_obj *o, void *unused)
{
    return Py_NewRef(o->path != NULL ? o->path : Py_None);
}

static PyMethodDef store_methods[] = {
    {"close", (PyCFunction)store_close, METH_NOARGS,
     "close(): flush write-back tensors and close; later calls raise."},
    {"__enter__", (PyCFunction)store_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)store_exit, METH_VARARGS, NULL},
    {"create", (PyCFunction)(void (*)(void))store_create,
     METH_VARARGS | METH_KEYWORDS,
     "create(name, *, dtype='float32', row_shape=(), hi, lo=0, init='zeros',\n"
     "       a=0.0, b=0.0, seed=0, chunk_rows=0, hot=False) -> dict\n"
     "Create tensor 'name' of global row IDs [lo, hi) (gkv_tensor_create)."},
    {"describe", (PyCFunction)store_describe, METH_VARARGS,
     "describe(name) -> dict (gkv_tensor_info)"},
    {"list", (PyCFunction)(void (*)(void))store_list,
     METH_VARARGS | METH_KEYWORDS,
     "list(with_state=False) -> [dict] in name order (gkv_tensor_list)"},
    {"delete", (PyCFunction)store_delete, METH_VARARGS,
     "delete(name): drop the tensor and its optimizer state"},
    {"pull", (PyCFunction)(void (*)(void))store_pull,
     METH_VARARGS | METH_KEYWORDS,
     "pull(name, ids, out=None) -> Array of shape (len(ids), *row_shape);\n"
     "with out (a C-contiguous array of that shape and dtype) fills it."},
    {"read", (PyCFunction)store_read, METH_VARARGS,
     "read(name, lo, hi) -> Array of rows [lo, hi)"},
    {"push", (PyCFunction)(void (*)(void))store_push,
     METH_VARARGS | METH_KEYWORDS,
     "push(name, ids, rows, handler='assign', *, lr=0, eps=0, beta1=0,\n"
     "     beta2=0, dups_sum=False): handlers assign, add, sgd, adagrad,\n"
     "adam (gkv_tensor_push; 0 means the C default)."},
    {"write", (PyCFunction)store_write, METH_VARARGS,
     "write(name, lo, rows): overwrite rows [lo, lo + len(rows))"},
    {"writeback_start", (PyCFunction)(void (*)(void))store_wb_start,
     METH_VARARGS | METH_KEYWORDS,
     "writeback_start(name, interval_ms=0): keep the tensor in RAM"},
    {"writeback_flush", (PyCFunction)store_wb_flush, METH_NOARGS,
     "writeback_flush(): write pending changes now"},
    {"writeback_stop", (PyCFunction)store_wb_stop, METH_VARARGS,
     "writeback_stop(name): flush and leave write-back mode"},
    {"sync", (PyCFunction)store_sync, METH_NOARGS, "sync(): fsync"},
    {"opt_reset", (PyCFunction)store_opt_reset, METH_VARARGS,
     "opt_reset(name, optimizer=None): drop adagrad/adam state (None: both)"},
    {"verify", (PyCFunction)store_verify, METH_VARARGS,
     "verify(name=None) -> dict; CorruptError naming the first bad chunk"},
    {"stat", (PyCFunction)store_stat, METH_NOARGS, "stat() -> dict"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef store_getset[] = {
    {"closed", (getter)store_get_closed, NULL, "True once closed", NULL},
    {"path", (getter)store_get_path, NULL, "the store directory", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject gkvpy_store_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "gkv.Store",
    .tp_basicsize = sizeof(store_obj),
    .tp_dealloc = (destructor)store_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Store(path, *, create=False, readonly=False, nosync=False,\n"
              "      map_size=0, max_readers=0)\n"
              "The embedded tensor store (gkv_store_open). After fork() the\n"
              "child reopens it by itself on its first call.",
    .tp_methods = store_methods,
    .tp_getset = store_getset,
    .tp_init = (initproc)store_init,
    .tp_new = PyType_GenericNew,
};

int
gkvpy_store_ready(PyObject *m)
{
    if (PyType_Ready(&gkvpy_store_type) < 0)
        return -1;
    return PyModule_AddObjectRef(m, "Store", (PyObject *)&gkvpy_store_type);
}
