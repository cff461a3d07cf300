/* array.c - gkv.Array, the arrays gkv hands out, and the parsing of the
 * arrays it is given.
 *
 * An Array owns its memory (malloc'd here, or kept alive through 'owner',
 * e.g. a batch) and lends it without a copy: through the buffer protocol
 * (numpy.asarray, memoryview) and through DLPack (numpy.from_dlpack,
 * torch.from_dlpack), versioned (1.x) or legacy as the consumer asks. A
 * DLPack capsule holds a reference to the Array until its consumer calls
 * the deleter, so the memory outlives the Array object if need be. */
#include <stdlib.h>
#include <string.h>
#include "gkvpy.h"
#include "dlpack.h"
#ifdef GKV_HAVE_CUDA
#include "gkv_gpu.h"
#endif

/* ---- dtypes ---- */

static const struct dtinfo {
    int         dt;
    size_t      size;
    const char *fmt;             /* struct format; NULL: none (bf16) */
    uint8_t     dl_code, dl_bits;
} dtinfo[] = {
    {GKV_F32, 4, "f", kDLFloat, 32},   {GKV_F16, 2, "e", kDLFloat, 16},
    {GKV_BF16, 2, NULL, kDLBfloat, 16}, {GKV_F64, 8, "d", kDLFloat, 64},
    {GKV_I8, 1, "b", kDLInt, 8},       {GKV_U8, 1, "B", kDLUInt, 8},
    {GKV_I32, 4, "i", kDLInt, 32},     {GKV_I64, 8, "q", kDLInt, 64},
    {GKVPY_U64, 8, "Q", kDLUInt, 64},  {GKVPY_U16, 2, "H", kDLUInt, 16},
    {GKVPY_BOOL, 1, "?", kDLBool, 8},
};
#define NDT (sizeof dtinfo / sizeof dtinfo[0])

static const struct dtinfo *
dt_find(int dt)
{
    for (size_t i = 0; i < NDT; i++)
        if (dtinfo[i].dt == dt)
            return &dtinfo[i];
    return NULL;
}

/* The dtype of a struct format ("<f", "=q", "l"), or -1. */
static int
dt_from_format(const char *f, Py_ssize_t itemsize)
{
    if (f == NULL)
        return GKV_U8;           /* plain bytes */
    if (*f == '@' || *f == '=' || *f == '<')
        f++;
    if (f[0] == '\0' || f[1] != '\0')
        return -1;
    switch (*f) {
    case 'f': return GKV_F32;
    case 'd': return GKV_F64;
    case 'e': return GKV_F16;
    case 'b': return GKV_I8;
    case 'B': case 'c': return GKV_U8;
    case '?': return GKVPY_BOOL;
    case 'H': return GKVPY_U16;
    case 'i': case 'l': case 'q': case 'n':
        return itemsize == 8 ? GKV_I64 : itemsize == 4 ? GKV_I32 : -1;
    case 'I': case 'L': case 'Q': case 'N':
        return itemsize == 8 ? GKVPY_U64 : -1;
    default:
        return -1;
    }
}

static int
dt_from_dl(DLDataType t)
{
    if (t.lanes != 1)
        return -1;
    for (size_t i = 0; i < NDT; i++)
        if (dtinfo[i].dl_code == t.code && dtinfo[i].dl_bits == t.bits)
            return dtinfo[i].dt;
    return -1;
}

/* ---- gkv.Array ---- */

static void
array_strides(gkvpy_array *a)
{
    Py_ssize_t st = (Py_ssize_t)dt_find(a->dtype)->size;

    for (int i = a->ndim - 1; i >= 0; i--) {
        a->strides[i] = st;
        st *= a->shape[i];
    }
}

static gkvpy_array *
array_alloc(int dtype, int ndim, const Py_ssize_t *shape)
{
    gkvpy_array *a;
    size_t n = dt_find(dtype)->size;

    if (ndim > GKVPY_MAXDIM) {
        PyErr_SetString(PyExc_ValueError, "too many dimensions");
        return NULL;
    }
    if ((a = PyObject_New(gkvpy_array, &gkvpy_array_type)) == NULL)
        return NULL;
    a->data = NULL;
    a->owner = NULL;
    a->cuda = -1;
    a->exports = 0;
    a->dtype = dtype;
    a->ndim = ndim;
    for (int i = 0; i < ndim; i++) {
        a->shape[i] = shape[i];
        n *= (size_t)shape[i];
    }
    a->nbytes = n;
    array_strides(a);
    return a;
}

gkvpy_array *
gkvpy_array_new(int dtype, int ndim, const Py_ssize_t *shape)
{
    gkvpy_array *a = array_alloc(dtype, ndim, shape);

    if (a == NULL)
        return NULL;
    /* one byte at least, so an empty array still has a distinct,
     * 64-byte aligned address (torch asks alignment of DLPack data) */
    if (posix_memalign(&a->data, 64, a->nbytes ? a->nbytes : 1) != 0) {
        a->data = NULL;
        Py_DECREF(a);
        return (gkvpy_array *)PyErr_NoMemory();
    }
    return a;
}

gkvpy_array *
gkvpy_array_view(PyObject *owner, void *data, int dtype, int ndim,
                 const Py_ssize_t *shape)
{
    gkvpy_array *a = array_alloc(dtype, ndim, shape);

    if (a == NULL)
        return NULL;
    a->data = data;
    a->owner = Py_NewRef(owner);
    a->cuda = gkvpy_owner_cuda(owner, &(int){0});
    return a;
}

/* 0 for CPU memory or a current device batch; -1 with BufferError for a
 * device batch the loader has moved past. */
static int
array_live(gkvpy_array *a)
{
    int stale = 0;

    if (a->cuda >= 0 && (gkvpy_owner_cuda(a->owner, &stale), stale)) {
        PyErr_SetString(PyExc_BufferError, "this device array's batch is "
                        "gone: the GPU loader reuses its memory at its next "
                        "batch (clone a tensor to keep it)");
        return -1;
    }
    return 0;
}

PyObject *
gkvpy_array_i64(const int64_t *p, size_t n)
{
    Py_ssize_t sh = (Py_ssize_t)n;
    gkvpy_array *a = gkvpy_array_new(GKV_I64, 1, &sh);

    if (a != NULL && n > 0)
        memcpy(a->data, p, n * sizeof *p);
    return (PyObject *)a;
}

static void
array_dealloc(gkvpy_array *a)
{
    if (a->owner != NULL)
        Py_DECREF(a->owner);
    else
        free(a->data);
    PyObject_Free(a);
}

static int
array_getbuffer(gkvpy_array *a, Py_buffer *v, int flags)
{
    const struct dtinfo *d = dt_find(a->dtype);

    if (a->cuda >= 0) {
        PyErr_Format(PyExc_BufferError, "this gkv.Array is memory of CUDA "
                     "device %d: use __dlpack__ (torch.from_dlpack)", a->cuda);
        v->obj = NULL;
        return -1;
    }
    if (d->fmt == NULL) {
        PyErr_Format(PyExc_BufferError, "gkv.Array of %s has no buffer "
                     "format (Python has no bfloat16): use __dlpack__ "
                     "(torch.from_dlpack)", gkvpy_dtype_name(a->dtype));
        v->obj = NULL;
        return -1;
    }
    v->buf = a->data;
    v->obj = Py_NewRef((PyObject *)a);
    v->len = (Py_ssize_t)a->nbytes;
    v->readonly = 0;
    v->itemsize = (Py_ssize_t)d->size;
    v->format = (flags & PyBUF_FORMAT) ? (char *)d->fmt : NULL;
    /* without PyBUF_ND the consumer sees plain bytes (PyBuffer_FillInfo) */
    v->ndim = (flags & PyBUF_ND) ? a->ndim : 1;
    v->shape = (flags & PyBUF_ND) ? a->shape : NULL;
    v->strides = (flags & PyBUF_STRIDES) ? a->strides : NULL;
    v->suboffsets = NULL;
    v->internal = NULL;
    a->exports++;
    return 0;
}

static void
array_releasebuffer(gkvpy_array *a, Py_buffer *v)
{
    a->exports--;
}

/* ---- DLPack export ---- */

/* What a capsule carries: the managed tensor, the shape it points to and
 * the Array kept alive. One struct for both ABIs. */
typedef struct {
    union {
        DLManagedTensorVersioned v;
        DLManagedTensor          l;
    } m;
    int64_t   shape[GKVPY_MAXDIM];
    PyObject *arr;
} dl_ctx;

static void
dl_ctx_free(dl_ctx *c)
{
    /* the consumer may call the deleter from any thread, with or without
     * the interpreter lock */
    PyGILState_STATE st = PyGILState_Ensure();

    Py_XDECREF(c->arr);
    PyGILState_Release(st);
    free(c);
}

static void
dl_delete_v(DLManagedTensorVersioned *m)
{
    dl_ctx_free((dl_ctx *)m->manager_ctx);
}

static void
dl_delete_l(DLManagedTensor *m)
{
    dl_ctx_free((dl_ctx *)m->manager_ctx);
}

/* A capsule nobody consumed still owns its tensor. */
static void
capsule_v_destructor(PyObject *cap)
{
    if (PyCapsule_IsValid(cap, "dltensor_versioned")) {
        DLManagedTensorVersioned *m =
            PyCapsule_GetPointer(cap, "dltensor_versioned");
        m->deleter(m);
    }
}

static void
capsule_l_destructor(PyObject *cap)
{
    if (PyCapsule_IsValid(cap, "dltensor")) {
        DLManagedTensor *m = PyCapsule_GetPointer(cap, "dltensor");
        m->deleter(m);
    }
}

static PyObject *
array_dlpack(gkvpy_array *a, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"stream", "max_version", "dl_device", "copy", NULL};
    PyObject *stream = Py_None, *maxv = Py_None, *dev = Py_None,
             *copy = Py_None, *cap;
    const struct dtinfo *d = dt_find(a->dtype);
    int versioned = 0;
    DLTensor *t;
    dl_ctx *c;

    if (!PyArg_ParseTupleAndKeywords(args, kw, "|$OOOO", kwlist, &stream,
                                     &maxv, &dev, &copy))
        return NULL;
    /* a device batch is complete when handed out: any stream may use it */
    if (stream != Py_None && (a->cuda < 0 || !PyLong_Check(stream))) {
        PyErr_SetString(PyExc_BufferError, a->cuda < 0
                        ? "gkv.Array is CPU memory: stream must be None"
                        : "stream: expected None or an int");
        return NULL;
    }
    if (array_live(a) < 0)
        return NULL;
    if (copy != Py_None && PyObject_IsTrue(copy)) {
        PyErr_SetString(PyExc_BufferError, "gkv.Array exports without a "
                        "copy (copy=True is not supported)");
        return NULL;
    }
    if (dev != Py_None) {
        long type, id;

        if (!PyArg_ParseTuple(dev, "ll", &type, &id))
            return NULL;
        if (a->cuda >= 0 && (type != kDLCUDA || id != a->cuda)) {
            PyErr_Format(PyExc_BufferError, "this gkv.Array lives on CUDA "
                         "device %d (dl_device (2, %d)); it is not copied",
                         a->cuda, a->cuda);
            return NULL;
        }
        if (a->cuda < 0 && (type != kDLCPU || id != 0)) {
            PyErr_SetString(PyExc_BufferError, "gkv.Array lives on the CPU "
                            "(dl_device (1, 0)); copy it to a device yourself");
            return NULL;
        }
    }
    if (maxv != Py_None) {
        long major, minor;

        if (!PyArg_ParseTuple(maxv, "ll", &major, &minor))
            return NULL;
        versioned = major >= 1;
    }
    if ((c = calloc(1, sizeof *c)) == NULL)
        return PyErr_NoMemory();
    for (int i = 0; i < a->ndim; i++)
        c->shape[i] = a->shape[i];
    c->arr = Py_NewRef((PyObject *)a);
    t = versioned ? &c->m.v.dl_tensor : &c->m.l.dl_tensor;
    t->data = a->data;
    t->device.device_type = a->cuda >= 0 ? kDLCUDA : kDLCPU;
    t->device.device_id = a->cuda >= 0 ? a->cuda : 0;
    t->ndim = a->ndim;
    t->dtype.code = d->dl_code;
    t->dtype.bits = d->dl_bits;
    t->dtype.lanes = 1;
    t->shape = c->shape;
    t->strides = NULL;                  /* C-contiguous */
    t->byte_offset = 0;
    if (versioned) {
        c->m.v.version.major = DLPACK_MAJOR_VERSION;
        c->m.v.version.minor = DLPACK_MINOR_VERSION;
        c->m.v.manager_ctx = c;
        c->m.v.deleter = dl_delete_v;
        c->m.v.flags = 0;
        cap = PyCapsule_New(&c->m.v, "dltensor_versioned", capsule_v_destructor);
    } else {
        c->m.l.manager_ctx = c;
        c->m.l.deleter = dl_delete_l;
        cap = PyCapsule_New(&c->m.l, "dltensor", capsule_l_destructor);
    }
    if (cap == NULL) {
        Py_DECREF(c->arr);
        free(c);
    }
    return cap;
}

static PyObject *
array_dlpack_device(gkvpy_array *a, PyObject *unused)
{
    if (a->cuda >= 0)
        return Py_BuildValue("(ii)", kDLCUDA, a->cuda);
    return Py_BuildValue("(ii)", kDLCPU, 0);
}

static PyObject *
array_get_shape(gkvpy_array *a, void *unused)
{
    PyObject *t = PyTuple_New(a->ndim);

    for (int i = 0; t != NULL && i < a->ndim; i++)
        PyTuple_SET_ITEM(t, i, PyLong_FromSsize_t(a->shape[i]));
    return t;
}

static PyObject *
array_get_dtype(gkvpy_array *a, void *unused)
{
    return PyUnicode_FromString(gkvpy_dtype_name(a->dtype));
}

static PyObject *
array_get_ndim(gkvpy_array *a, void *unused)
{
    return PyLong_FromLong(a->ndim);
}

static PyObject *
array_get_nbytes(gkvpy_array *a, void *unused)
{
    return PyLong_FromSize_t(a->nbytes);
}

static PyObject *
array_get_ptr(gkvpy_array *a, void *unused)
{
    return PyLong_FromVoidPtr(a->data);
}

static PyObject *
array_get_owner(gkvpy_array *a, void *unused)
{
    return Py_NewRef(a->owner != NULL ? a->owner : Py_None);
}

static Py_ssize_t
array_len(gkvpy_array *a)
{
    if (a->ndim == 0) {
        PyErr_SetString(PyExc_TypeError, "len() of a 0-d gkv.Array");
        return -1;
    }
    return a->shape[0];
}

static PyObject *
array_repr(gkvpy_array *a)
{
    PyObject *sh = array_get_shape(a, NULL), *r;

    if (sh == NULL)
        return NULL;
    r = PyUnicode_FromFormat("gkv.Array(shape=%R, dtype=%s)", sh,
                             gkvpy_dtype_name(a->dtype));
    Py_DECREF(sh);
    return r;
}

/* to_host(): a CPU copy of a device array (gkv_gpu_copy); self for a CPU
 * one. */
static PyObject *
array_to_host(gkvpy_array *a, PyObject *unused)
{
    gkvpy_array *h;
    gkv_err rc = GKV_OK;

    if (a->cuda < 0)
        return Py_NewRef((PyObject *)a);
    if (array_live(a) < 0 ||
        (h = gkvpy_array_new(a->dtype, a->ndim, a->shape)) == NULL)
        return NULL;
#ifdef GKV_HAVE_CUDA
    if (a->nbytes > 0) {
        gkvpy_owner_hold(a->owner, +1);   /* no next() reuses it meanwhile */
        Py_BEGIN_ALLOW_THREADS
        rc = gkv_gpu_copy(h->data, a->data, a->nbytes, NULL);
        if (rc == GKV_OK)
            rc = gkv_gpu_sync(NULL);
        Py_END_ALLOW_THREADS
        gkvpy_owner_hold(a->owner, -1);
    }
#endif
    if (rc != GKV_OK) {
        Py_DECREF(h);
        return gkvpy_raise(rc);
    }
    return (PyObject *)h;
}

static PyMethodDef array_methods[] = {
    {"to_host", (PyCFunction)array_to_host, METH_NOARGS,
     "to_host() -> Array: a CPU copy of device memory (a GpuBatch's arrays); "
     "a CPU Array returns itself"},
    {"__dlpack__", (PyCFunction)(void (*)(void))array_dlpack,
     METH_VARARGS | METH_KEYWORDS,
     "__dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None)\n"
     "A DLPack capsule over this array's memory (no copy): versioned\n"
     "(DLPack 1.0) when max_version >= (1, 0), else the legacy one."},
    {"__dlpack_device__", (PyCFunction)array_dlpack_device, METH_NOARGS,
     "(1, 0): the CPU."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef array_getset[] = {
    {"shape", (getter)array_get_shape, NULL, "the shape, a tuple", NULL},
    {"dtype", (getter)array_get_dtype, NULL, "the dtype's name ('float32')", NULL},
    {"ndim", (getter)array_get_ndim, NULL, "number of dimensions", NULL},
    {"nbytes", (getter)array_get_nbytes, NULL, "bytes of data", NULL},
    {"ptr", (getter)array_get_ptr, NULL, "the data's address", NULL},
    {"owner", (getter)array_get_owner, NULL,
     "the object whose memory this is (a batch), or None: the array's own", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyBufferProcs array_as_buffer = {
    (getbufferproc)array_getbuffer,
    (releasebufferproc)array_releasebuffer,
};

static PySequenceMethods array_as_seq = {
    .sq_length = (lenfunc)array_len,
};

PyTypeObject gkvpy_array_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "gkv.Array",
    .tp_basicsize = sizeof(gkvpy_array),
    .tp_dealloc = (destructor)array_dealloc,
    .tp_repr = (reprfunc)array_repr,
    .tp_as_sequence = &array_as_seq,
    .tp_as_buffer = &array_as_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A C-contiguous CPU array gkv returned, owning its memory.\n"
              "Zero-copy to numpy (numpy.asarray, numpy.from_dlpack) and\n"
              "torch (torch.from_dlpack); attributes shape, dtype, ndim,\n"
              "nbytes, ptr.",
    .tp_methods = array_methods,
    .tp_getset = array_getset,
};

int
gkvpy_array_ready(PyObject *m)
{
    if (PyType_Ready(&gkvpy_array_type) < 0)
        return -1;
    return PyModule_AddObjectRef(m, "Array", (PyObject *)&gkvpy_array_type);
}

/* ---- input arrays ---- */

static int
in_fail(gkvpy_in *in, const char *fmt, const char *arg)
{
    char buf[512];

    snprintf(buf, sizeof buf, fmt, arg);
    gkvpy_in_release(in);
    gkvpy_raisef(GKV_EINVAL, "%s: %s", in->what, buf);
    return -1;
}

static int
in_from_buffer(PyObject *o, gkvpy_in *in, unsigned flags)
{
    int bflags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT;

    if (flags & GKVPY_IN_WRITABLE)
        bflags |= PyBUF_WRITABLE;
    if (PyObject_GetBuffer(o, &in->view, bflags) < 0) {
        PyObject *t, *v, *tb, *s;
        const char *txt;
        int r;

        PyErr_Fetch(&t, &v, &tb);
        s = v != NULL ? PyObject_Str(v) : NULL;
        txt = s != NULL ? PyUnicode_AsUTF8(s) : NULL;
        PyErr_Clear();
        r = in_fail(in, "%s (gkv takes C-contiguous arrays without a copy: "
                    "pass numpy.ascontiguousarray(x))",
                    txt != NULL ? txt : "not a contiguous buffer");
        Py_XDECREF(s);
        Py_XDECREF(t);
        Py_XDECREF(v);
        Py_XDECREF(tb);
        return r;
    }
    in->have_view = 1;
    if (in->view.ndim > GKVPY_MAXDIM)
        return in_fail(in, "%s", "too many dimensions");
    in->dtype = dt_from_format(in->view.format, in->view.itemsize);
    if (in->dtype < 0)
        return in_fail(in, "unsupported element format '%s'",
                       in->view.format);
    in->ptr = in->view.buf;
    in->nbytes = (size_t)in->view.len;
    in->ndim = in->view.ndim;
    in->n = 1;
    for (int i = 0; i < in->ndim; i++) {
        in->shape[i] = in->view.shape[i];
        in->n *= (size_t)in->view.shape[i];
    }
    if (in->ndim == 0 && in->view.shape == NULL && in->view.itemsize > 0 &&
        in->view.format == NULL) {           /* bytes-like without shape */
        in->ndim = 1;
        in->shape[0] = in->view.len;
        in->n = (size_t)in->view.len;
    }
    return 0;
}

static int
in_from_dlpack(PyObject *o, gkvpy_in *in, unsigned flags)
{
    PyObject *fn = NULL, *cap = NULL, *kw = NULL, *empty = NULL;
    DLTensor *t;
    uint64_t dlflags = 0;
    int64_t expect;
    int ret = -1;

    if ((fn = PyObject_GetAttrString(o, "__dlpack__")) == NULL)
        goto out;
    /* ask for the versioned ABI; an older producer rejects the keyword */
    kw = Py_BuildValue("{s(ii)}", "max_version", DLPACK_MAJOR_VERSION,
                       DLPACK_MINOR_VERSION);
    empty = PyTuple_New(0);
    if (kw == NULL || empty == NULL)
        goto out;
    cap = PyObject_Call(fn, empty, kw);
    if (cap == NULL && PyErr_ExceptionMatches(PyExc_TypeError)) {
        PyErr_Clear();
        cap = PyObject_CallNoArgs(fn);
    }
    if (cap == NULL) {
        PyObject *t_, *v, *tb, *s;

        PyErr_Fetch(&t_, &v, &tb);
        s = v != NULL ? PyObject_Str(v) : NULL;
        PyErr_Clear();
        gkvpy_raisef(GKV_EINVAL, "%s: __dlpack__ failed: %s", in->what,
                     s != NULL && PyUnicode_AsUTF8(s) ? PyUnicode_AsUTF8(s) : "?");
        Py_XDECREF(s);
        Py_XDECREF(t_);
        Py_XDECREF(v);
        Py_XDECREF(tb);
        goto out;
    }
    if (PyCapsule_IsValid(cap, "dltensor_versioned")) {
        DLManagedTensorVersioned *m =
            PyCapsule_GetPointer(cap, "dltensor_versioned");

        if (m->version.major != DLPACK_MAJOR_VERSION) {
            if (m->deleter != NULL)
                m->deleter(m);
            PyCapsule_SetName(cap, "used_dltensor_versioned");
            in_fail(in, "DLPack version %s is not 1.x", "?");
            goto out;
        }
        PyCapsule_SetName(cap, "used_dltensor_versioned");
        in->dlm = m;
        in->dlm_versioned = 1;
        t = &m->dl_tensor;
        dlflags = m->flags;
    } else if (PyCapsule_IsValid(cap, "dltensor")) {
        DLManagedTensor *m = PyCapsule_GetPointer(cap, "dltensor");

        PyCapsule_SetName(cap, "used_dltensor");
        in->dlm = m;
        t = &m->dl_tensor;
    } else {
        in_fail(in, "%s", "__dlpack__ did not return a DLPack capsule");
        goto out;
    }
    if (t->device.device_type != kDLCPU &&
        t->device.device_type != kDLCUDAHost) {
        in_fail(in, "%s", "the tensor is not in CPU memory (move it with "
                ".cpu() first)");
        goto out;
    }
    if ((flags & GKVPY_IN_WRITABLE) && (dlflags & DLPACK_FLAG_BITMASK_READ_ONLY)) {
        in_fail(in, "%s", "the tensor is read-only");
        goto out;
    }
    if (t->ndim > GKVPY_MAXDIM || t->ndim < 0) {
        in_fail(in, "%s", "too many dimensions");
        goto out;
    }
    if ((in->dtype = dt_from_dl(t->dtype)) < 0) {
        in_fail(in, "%s", "unsupported dtype (gkv takes float32, float16, "
                "bfloat16, float64, int8, uint8, int32, int64, uint64)");
        goto out;
    }
    in->ndim = t->ndim;
    in->n = 1;
    expect = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        in->shape[i] = t->shape[i];
        in->n *= (size_t)t->shape[i];
        if (t->strides != NULL && t->shape[i] != 1 && t->strides[i] != expect) {
            in_fail(in, "%s", "not C-contiguous (gkv takes contiguous "
                    "tensors without a copy: pass x.contiguous())");
            goto out;
        }
        expect *= t->shape[i];
    }
    in->ptr = (char *)t->data + t->byte_offset;
    in->nbytes = in->n * dt_find(in->dtype)->size;
    ret = 0;
out:
    Py_XDECREF(fn);
    Py_XDECREF(kw);
    Py_XDECREF(empty);
    Py_XDECREF(cap);
    return ret;
}

/* A list or tuple of Python ints, as int64 in tmp. */
static int
in_from_seq(PyObject *o, gkvpy_in *in)
{
    PyObject *f = PySequence_Fast(o, "");
    Py_ssize_t n;
    int64_t *p;

    if (f == NULL)
        return -1;
    n = PySequence_Fast_GET_SIZE(f);
    if ((p = malloc(n > 0 ? (size_t)n * sizeof *p : 1)) == NULL) {
        Py_DECREF(f);
        PyErr_NoMemory();
        return -1;
    }
    in->tmp = p;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *it = PySequence_Fast_GET_ITEM(f, i);
        long long v;

        if (!PyLong_Check(it)) {
            Py_DECREF(f);
            return in_fail(in, "item of type %s is not an int",
                           Py_TYPE(it)->tp_name);
        }
        v = PyLong_AsLongLong(it);
        if (v == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            Py_DECREF(f);
            return in_fail(in, "%s", "an int does not fit int64");
        }
        p[i] = v;
    }
    Py_DECREF(f);
    in->ptr = p;
    in->dtype = GKV_I64;
    in->ndim = 1;
    in->shape[0] = n;
    in->n = (size_t)n;
    in->nbytes = (size_t)n * sizeof *p;
    return 0;
}

int
gkvpy_in_get(PyObject *o, gkvpy_in *in, const char *what, unsigned flags)
{
    memset(in, 0, sizeof *in);
    in->what = what;
    if (PyObject_CheckBuffer(o))
        return in_from_buffer(o, in, flags);
    if (PyObject_HasAttrString(o, "__dlpack__"))
        return in_from_dlpack(o, in, flags);
    if ((flags & GKVPY_IN_SEQ) && (PyList_Check(o) || PyTuple_Check(o)))
        return in_from_seq(o, in);
    return in_fail(in, "expected a numpy array, a torch tensor, or an object "
                   "with __dlpack__ or the buffer protocol, not %s",
                   Py_TYPE(o)->tp_name);
}

void
gkvpy_in_release(gkvpy_in *in)
{
    if (in->have_view) {
        PyBuffer_Release(&in->view);
        in->have_view = 0;
    }
    if (in->dlm != NULL) {
        if (in->dlm_versioned) {
            DLManagedTensorVersioned *m = in->dlm;
            if (m->deleter != NULL)
                m->deleter(m);
        } else {
            DLManagedTensor *m = in->dlm;
            if (m->deleter != NULL)
                m->deleter(m);
        }
        in->dlm = NULL;
    }
    free(in->tmp);
    in->tmp = NULL;
}

int
gkvpy_in_ids(PyObject *o, gkvpy_in *in, const char *what)
{
    if (gkvpy_in_get(o, in, what, GKVPY_IN_SEQ) < 0)
        return -1;
    if (in->dtype != GKV_I64 && in->dtype != GKVPY_U64)
        return in_fail(in, "IDs must be int64 or uint64, not %s",
                       gkvpy_dtype_name(in->dtype));
    if (in->ndim != 1)
        return in_fail(in, "%s", "IDs must be a 1-D array");
    if (in->dtype == GKV_I64) {
        /* an int64 -1 would reach C as 2^64 - 1: name it as given */
        const int64_t *p = in->ptr;

        for (size_t i = 0; i < in->n; i++)
            if (p[i] < 0) {
                long long v = p[i];

                gkvpy_in_release(in);
                gkvpy_raisef(GKV_ERANGE, "%s: ID %lld (index %zu) is negative",
                             what, v, i);
                return -1;
            }
    }
    return 0;
}

int
gkvpy_in_rows(PyObject *o, gkvpy_in *in, const char *what,
              const gkv_tensor_desc *d, size_t nrows, unsigned flags)
{
    char want[512], got[256];
    int n = 0, ok;

    if (gkvpy_in_get(o, in, what, flags) < 0)
        return -1;
    ok = in->dtype == (int)d->dtype ||
         (d->dtype == GKV_U8 && in->dtype == GKVPY_BOOL) ||
         (d->dtype == GKV_BF16 && in->dtype == GKVPY_U16);
    if (!ok) {
        snprintf(want, sizeof want, "%s, expected %s of tensor '%s'",
                 gkvpy_dtype_name(in->dtype), gkvpy_dtype_name(d->dtype),
                 d->name);
        gkvpy_in_release(in);
        gkvpy_raisef(GKV_ESHAPE, "%s: dtype %s", what, want);
        return -1;
    }
    ok = (unsigned)in->ndim == d->ndim + 1 &&
         (nrows == (size_t)-1 || (size_t)in->shape[0] == nrows);
    for (unsigned i = 0; ok && i < d->ndim; i++)
        ok = (uint64_t)in->shape[i + 1] == d->shape[i];
    if (!ok) {
        n = snprintf(want, sizeof want, "(");
        if (nrows == (size_t)-1)
            n += snprintf(want + n, sizeof want - n, "n");
        else
            n += snprintf(want + n, sizeof want - n, "%zu", nrows);
        for (unsigned i = 0; i < d->ndim; i++)
            n += snprintf(want + n, sizeof want - n, ", %llu",
                          (unsigned long long)d->shape[i]);
        snprintf(want + n, sizeof want - n, "%s)", d->ndim == 0 ? "," : "");
        n = snprintf(got, sizeof got, "(");
        for (int i = 0; i < in->ndim; i++)
            n += snprintf(got + n, sizeof got - n, "%s%lld", i ? ", " : "",
                          (long long)in->shape[i]);
        snprintf(got + n, sizeof got - n, "%s)", in->ndim == 1 ? "," : "");
        gkvpy_in_release(in);
        gkvpy_raisef(GKV_ESHAPE, "%s: shape %s, expected %s for tensor '%s'",
                     what, got, want, d->name);
        return -1;
    }
    return 0;
}

/* The shape (n, *row shape) of n rows of d. */
int
gkvpy_rows_shape(const gkv_tensor_desc *d, size_t n, Py_ssize_t *sh)
{
    sh[0] = (Py_ssize_t)n;
    for (unsigned i = 0; i < d->ndim; i++)
        sh[i + 1] = (Py_ssize_t)d->shape[i];
    return (int)d->ndim + 1;
}

/* The destination of n rows of d: 'out' checked (borrowed into *in), or
 * a new Array (*arr). */
void *
gkvpy_rows_dst(PyObject *out, gkvpy_in *in, gkvpy_array **arr,
         const gkv_tensor_desc *d, size_t n)
{
    Py_ssize_t sh[GKVPY_MAXDIM];
    int nd;

    *arr = NULL;
    if (out != NULL && out != Py_None) {
        if (gkvpy_in_rows(out, in, "out", d, n, GKVPY_IN_WRITABLE) < 0)
            return NULL;
        return in->ptr;
    }
    memset(in, 0, sizeof *in);
    nd = gkvpy_rows_shape(d, n, sh);
    if ((*arr = gkvpy_array_new(d->dtype, nd, sh)) == NULL)
        return NULL;
    return (*arr)->data;
}
