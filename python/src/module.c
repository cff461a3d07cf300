/* module.c - the module gkv._gkv: the error hierarchy and dtype names. */
#include <stdarg.h>
#include "gkvpy.h"

PyObject *gkvpy_error;

/* One Python class per gkv error code, named for what went wrong; each
 * also derives from the built-in exception a Python user would catch. */
static const struct {
    gkv_err     code;
    const char *cls;
    PyObject  **base;            /* a built-in base besides gkv.Error */
} err_classes[] = {
    {GKV_ENOTFOUND, "NotFoundError",        &PyExc_LookupError},
    {GKV_ESHAPE,    "ShapeError",           &PyExc_ValueError},
    {GKV_EMAPFULL,  "MapFullError",         NULL},
    {GKV_EPROTO,    "ProtocolError",        NULL},
    {GKV_ENOMEM,    "NoMemoryError",        &PyExc_MemoryError},
    {GKV_EIO,       "IOFailedError",        NULL},
    {GKV_ENOENT,    "NoStoreError",         NULL},
    {GKV_EVERSION,  "VersionError",         NULL},
    {GKV_EINVAL,    "InvalidArgumentError", &PyExc_ValueError},
    {GKV_ERANGE,    "RangeError",           &PyExc_IndexError},
    {GKV_EEXIST,    "ExistsError",          NULL},
    {GKV_ERDONLY,   "ReadOnlyError",        NULL},
    {GKV_ECORRUPT,  "CorruptError",         NULL},
    {GKV_EFORMAT,   "FormatError",          NULL},
    {GKV_EHANDLER,  "HandlerError",         NULL},
    {GKV_EBUSY,     "BusyError",            NULL},
    {GKV_ETIMEDOUT, "TimedOutError",        NULL},
    {GKV_EINTR,     "InterruptedCallError", NULL},
    {GKV_EPERM,     "PermissionDeniedError", NULL},
    {GKV_ENOTSUP,   "NotSupportedError",    NULL},
};
#define NCLASSES (sizeof err_classes / sizeof err_classes[0])
static PyObject *err_objs[NCLASSES];

static PyObject *
class_of(gkv_err rc)
{
    for (size_t i = 0; i < NCLASSES; i++)
        if (err_classes[i].code == rc)
            return err_objs[i];
    return gkvpy_error;
}

/* Sets attribute 'name' of o to v, which it consumes (NULL: failed). */
static int
set_attr(PyObject *o, const char *name, PyObject *v)
{
    int r;

    if (v == NULL)
        return -1;
    r = PyObject_SetAttrString(o, name, v);
    Py_DECREF(v);
    return r;
}

static PyObject *
raise_msg(gkv_err rc, const char *msg)
{
    PyObject *cls = class_of(rc), *text, *exc;

    if (msg == NULL || *msg == '\0')
        msg = gkv_strerror(rc);
    text = PyUnicode_FromFormat("%s (%s)", msg, gkv_err_name(rc));
    if (text == NULL)
        return NULL;
    exc = PyObject_CallOneArg(cls, text);
    Py_DECREF(text);
    if (exc == NULL)
        return NULL;
    if (set_attr(exc, "code", PyLong_FromLong(rc)) < 0 ||
        set_attr(exc, "name", PyUnicode_FromString(gkv_err_name(rc))) < 0 ||
        set_attr(exc, "message", PyUnicode_FromString(msg)) < 0) {
        Py_DECREF(exc);
        return NULL;
    }
    PyErr_SetObject(cls, exc);
    Py_DECREF(exc);
    return NULL;
}

PyObject *
gkvpy_raise(gkv_err rc)
{
    return raise_msg(rc, gkv_errmsg());
}

PyObject *
gkvpy_raisef(gkv_err rc, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return raise_msg(rc, buf);
}

/* ---- dtypes ---- */

static const struct {
    int         dt;
    const char *name;
} dt_names[] = {
    {GKV_F32, "float32"}, {GKV_F16, "float16"}, {GKV_BF16, "bfloat16"},
    {GKV_F64, "float64"}, {GKV_I8, "int8"}, {GKV_U8, "uint8"},
    {GKV_I32, "int32"}, {GKV_I64, "int64"},
    {GKVPY_U64, "uint64"}, {GKVPY_U16, "uint16"}, {GKVPY_BOOL, "bool"},
};

const char *
gkvpy_dtype_name(int dt)
{
    for (size_t i = 0; i < sizeof dt_names / sizeof dt_names[0]; i++)
        if (dt_names[i].dt == dt)
            return dt_names[i].name;
    return NULL;
}

int
gkvpy_dtype_parse(PyObject *o)
{
    PyObject *s = NULL;
    const char *txt;
    gkv_dtype dt;
    int ret = -1;

    if (PyUnicode_Check(o)) {
        s = Py_NewRef(o);
    } else if (PyObject_HasAttrString(o, "is_floating_point")) {
        s = PyObject_Str(o);             /* torch.float32 */
    } else if (PyObject_HasAttrString(o, "name")) {
        s = PyObject_GetAttrString(o, "name");   /* numpy dtype */
    } else if (PyType_Check(o) && PyObject_HasAttrString(o, "__name__")) {
        s = PyObject_GetAttrString(o, "__name__");  /* np.float32 */
    }
    if (s == NULL || !PyUnicode_Check(s)) {
        if (!PyErr_Occurred())
            gkvpy_raisef(GKV_EINVAL, "dtype: expected a name such as "
                         "'float32' or a numpy or torch dtype");
        goto out;
    }
    txt = PyUnicode_AsUTF8(s);
    if (txt == NULL)
        goto out;
    if (strncmp(txt, "torch.", 6) == 0)
        txt += 6;
    if (strcmp(txt, "half") == 0)
        txt = "float16";
    else if (strcmp(txt, "float") == 0)
        txt = "float32";
    else if (strcmp(txt, "double") == 0)
        txt = "float64";
    else if (strcmp(txt, "long") == 0)
        txt = "int64";
    else if (strcmp(txt, "int") == 0)
        txt = "int32";
    if (gkv_dtype_parse(txt, &dt) != GKV_OK) {
        gkvpy_raisef(GKV_EINVAL, "dtype '%s': gkv stores float32, float16, "
                     "bfloat16, float64, int8, uint8, int32 and int64", txt);
        goto out;
    }
    ret = (int)dt;
out:
    Py_XDECREF(s);
    return ret;
}

/* ---- the module ---- */

static PyObject *
py_strerror(PyObject *self, PyObject *arg)
{
    long e = PyLong_AsLong(arg);

    if (e == -1 && PyErr_Occurred())
        return NULL;
    return PyUnicode_FromString(gkv_strerror((int)e));
}

static PyObject *
py_dtype_code(PyObject *self, PyObject *arg)
{
    int dt = gkvpy_dtype_parse(arg);

    return dt < 0 ? NULL : PyLong_FromLong(dt);
}

static PyObject *
py_observer_rank(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyLong_FromUnsignedLong(gkv_client_observer_rank());
}

static PyMethodDef methods[] = {
    {"_observer_rank", py_observer_rank, METH_NOARGS,
     "_observer_rank() -> a fresh rank for an observer "
     "(gkv_client_observer_rank: 2^31 plus 31 random bits)"},
    {"_dtype_code", py_dtype_code, METH_O,
     "_dtype_code(dtype) -> the gkv_dtype value of a dtype name"},
    {"strerror", py_strerror, METH_O, "strerror(code) -> the text of a gkv error code"},
    {"_nn_loaded_by", gkvpy_nn_loaded_by, METH_NOARGS,
     "_nn_loaded_by() -> the PID that loaded the nanomsg copy in use (0: "
     "a forked child that has not loaded its own yet)"},
    {"_partition", (PyCFunction)(void (*)(void))gkvpy_partition,
     METH_VARARGS | METH_KEYWORDS, "gkv_partition_write(); use gkv.partition()"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moddef = {
    PyModuleDef_HEAD_INIT, "gkv._gkv",
    "The C extension of gkv: the store, the client, servers and arrays.",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__gkv(void)
{
    PyObject *m = PyModule_Create(&moddef);
    PyObject *codes;

    if (m == NULL)
        return NULL;
    if (gkvpy_nn_load() < 0)
        goto fail;
    gkvpy_error = PyErr_NewExceptionWithDoc("gkv.Error",
        "A gkv call failed. Attributes: code (the gkv_err value), name "
        "('GKV_EINVAL') and message (the detail, gkv_errmsg()).", NULL, NULL);
    if (gkvpy_error == NULL || PyModule_AddObjectRef(m, "Error", gkvpy_error) < 0)
        goto fail;
    if ((codes = PyDict_New()) == NULL)
        goto fail;
    for (size_t i = 0; i < NCLASSES; i++) {
        char qual[96];
        PyObject *bases;

        snprintf(qual, sizeof qual, "gkv.%s", err_classes[i].cls);
        bases = err_classes[i].base != NULL
            ? PyTuple_Pack(2, gkvpy_error, *err_classes[i].base)
            : PyTuple_Pack(1, gkvpy_error);
        if (bases == NULL)
            goto fail_codes;
        err_objs[i] = PyErr_NewException(qual, bases, NULL);
        Py_DECREF(bases);
        if (err_objs[i] == NULL ||
            PyModule_AddObjectRef(m, err_classes[i].cls, err_objs[i]) < 0 ||
            PyDict_SetItemString(codes, gkv_err_name(err_classes[i].code),
                                 err_objs[i]) < 0)
            goto fail_codes;
    }
    if (PyModule_AddObject(m, "error_classes", codes) < 0)
        goto fail_codes;
    if (PyModule_AddStringConstant(m, "__c_version__", GKV_VERSION_STRING) < 0 ||
        gkvpy_array_ready(m) < 0 || gkvpy_store_ready(m) < 0 ||
        gkvpy_client_ready(m) < 0 || gkvpy_server_ready(m) < 0 ||
        gkvpy_part_ready(m) < 0 || gkvpy_loader_ready(m) < 0)
        goto fail;
    return m;
fail_codes:
    Py_DECREF(codes);
fail:
    Py_DECREF(m);
    return NULL;
}
