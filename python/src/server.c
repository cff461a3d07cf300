/* server.c - gkv._Server: a gkv server (gkv_server_open / _run) in this
 * process, for tests and notebooks; gkv.Server runs it on a thread.
 *
 * In a child made by fork() a parent's server is not there (its thread
 * and nanomsg's are not copied): run() raises, stop() and close() only
 * forget it, and it is never freed there (that would call into the
 * parent's nanomsg, nnshim.c). */
#include "gkvpy.h"
#include <string.h>
#include <unistd.h>

typedef struct {
    PyObject_HEAD
    gkv_server *s;
    pid_t       pid;             /* the process that opened s */
    int         running;
    PyObject   *keep;            /* strings the options point into */
    const char *wb[65];
} server_obj;

static const char *
opt_str(PyObject *o, PyObject *keep)
{
    PyObject *b;

    if (o == NULL || o == Py_None)
        return NULL;
    if (!PyUnicode_FSConverter(o, &b))
        return NULL;
    PyList_Append(keep, b);
    Py_DECREF(b);
    return PyBytes_AS_STRING(b);
}

static int
server_init(server_obj *o, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"ip_config", "store", "part_config", "part_id",
                             "machine", "server_id", "num_servers", "threads",
                             "token_file", "keep_alive", "create", "nosync",
                             "quiet", "prefault", "lease_ms", "num_clients",
                             "writeback", "flush_ms", NULL};
    PyObject *ipc, *store = Py_None, *pc = Py_None, *tf = Py_None,
             *wb = Py_None;
    int part_id = 0, machine = 0, keep_alive = 1, create = 0, nosync = 1,
        quiet = 1, prefault = 0;
    unsigned server_id = 0, num_servers = 1, threads = 0, lease_ms = 0,
             num_clients = 0, flush_ms = 0;
    gkv_server_opts so;
    gkv_err rc;

    if (o->s != NULL) {
        gkvpy_raisef(GKV_EINVAL, "Server.__init__ called twice");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|$OOiiIIIOpppppIIOI", kwlist,
                                     &ipc, &store, &pc, &part_id, &machine,
                                     &server_id, &num_servers, &threads, &tf,
                                     &keep_alive, &create, &nosync, &quiet,
                                     &prefault, &lease_ms, &num_clients, &wb,
                                     &flush_ms))
        return -1;
    Py_XSETREF(o->keep, PyList_New(0));
    if (o->keep == NULL)
        return -1;
    memset(&so, 0, sizeof so);
    if ((so.ip_config = opt_str(ipc, o->keep)) == NULL) {
        if (!PyErr_Occurred())
            gkvpy_raisef(GKV_EINVAL, "ip_config is required");
        return -1;
    }
    so.store = opt_str(store, o->keep);
    so.part_config = opt_str(pc, o->keep);
    so.token_file = opt_str(tf, o->keep);
    if (PyErr_Occurred())
        return -1;
    if (wb != Py_None) {
        PyObject *f = PySequence_Fast(wb, "writeback: expected a list of names");
        Py_ssize_t n;

        if (f == NULL)
            return -1;
        n = PySequence_Fast_GET_SIZE(f);
        if (n > 64) {
            Py_DECREF(f);
            gkvpy_raisef(GKV_EINVAL, "writeback: at most 64 names");
            return -1;
        }
        for (Py_ssize_t i = 0; i < n; i++)
            if ((o->wb[i] = opt_str(PySequence_Fast_GET_ITEM(f, i), o->keep)) == NULL) {
                Py_DECREF(f);
                return -1;
            }
        o->wb[n] = NULL;
        Py_DECREF(f);
        so.writeback = o->wb;
    }
    so.part_id = part_id;
    so.machine = machine;
    so.server_id = server_id;
    so.num_servers = num_servers;
    so.threads = threads;
    so.lease_ms = lease_ms;
    so.num_clients = num_clients;
    so.flush_ms = flush_ms;
    so.flags = (keep_alive ? GKV_SERVER_KEEP_ALIVE : 0) |
               (create ? GKV_SERVER_CREATE : 0) |
               (nosync ? GKV_SERVER_NOSYNC : 0) |
               (quiet ? GKV_SERVER_QUIET : 0) |
               (prefault ? 0 : GKV_SERVER_NO_PREFAULT);
    if (gkvpy_nn_ready() < 0)
        return -1;
    Py_BEGIN_ALLOW_THREADS
    rc = gkv_server_open(&o->s, &so);
    Py_END_ALLOW_THREADS
    if (rc != GKV_OK) {
        gkvpy_raise(rc);
        return -1;
    }
    o->pid = getpid();
    return 0;
}

/* Serves until stopped; the caller's thread (gkv.Server's) blocks here. */
static PyObject *
server_run(server_obj *o, PyObject *unused)
{
    gkv_err rc;

    if (o->s == NULL)
        return gkvpy_raisef(GKV_EINVAL, "the server is closed");
    if (o->pid != getpid())
        return gkvpy_raisef(GKV_ENOTSUP, "this server was opened by process "
                            "%ld: it serves there, not in this forked child",
                            (long)o->pid);
    if (o->running)
        return gkvpy_raisef(GKV_EBUSY, "the server is running already");
    o->running = 1;
    Py_BEGIN_ALLOW_THREADS
    rc = gkv_server_run(o->s);
    Py_END_ALLOW_THREADS
    o->running = 0;
    if (rc != GKV_OK)
        return gkvpy_raise(rc);
    Py_RETURN_NONE;
}

static PyObject *
server_stop(server_obj *o, PyObject *unused)
{
    if (o->s != NULL && o->pid != getpid())
        o->s = NULL;                    /* the parent's: forget it here */
    if (o->s != NULL)
        gkv_server_stop(o->s);
    Py_RETURN_NONE;
}

static PyObject *
server_close(server_obj *o, PyObject *unused)
{
    if (o->s != NULL && o->pid != getpid())
        o->s = NULL;                    /* the parent's: forget it here */
    if (o->running && o->s != NULL)
        return gkvpy_raisef(GKV_EBUSY, "the server is running: stop() it and "
                            "wait for run() to return first");
    if (o->s != NULL) {
        gkv_server *s = o->s;

        o->s = NULL;
        Py_BEGIN_ALLOW_THREADS
        gkv_server_close(s);
        Py_END_ALLOW_THREADS
    }
    Py_RETURN_NONE;
}

static PyObject *
server_url(server_obj *o, void *unused)
{
    if (o->s == NULL)
        Py_RETURN_NONE;
    return PyUnicode_FromString(gkv_server_url(o->s));
}

static void
server_dealloc(server_obj *o)
{
    if (o->s != NULL && !o->running && o->pid == getpid())
        gkv_server_close(o->s);
    Py_XDECREF(o->keep);
    Py_TYPE(o)->tp_free((PyObject *)o);
}

static PyMethodDef server_methods[] = {
    {"run", (PyCFunction)server_run, METH_NOARGS,
     "run(): serve until stopped (blocks; the GIL is released)"},
    {"stop", (PyCFunction)server_stop, METH_NOARGS, "stop(): ask run() to return"},
    {"close", (PyCFunction)server_close, METH_NOARGS, "close(): after run()"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef server_getset[] = {
    {"url", (getter)server_url, NULL, "where it listens", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject gkvpy_server_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "gkv._Server",
    .tp_basicsize = sizeof(server_obj),
    .tp_dealloc = (destructor)server_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The C server; use gkv.Server.",
    .tp_methods = server_methods,
    .tp_getset = server_getset,
    .tp_init = (initproc)server_init,
    .tp_new = PyType_GenericNew,
};

int
gkvpy_server_ready(PyObject *m)
{
    if (PyType_Ready(&gkvpy_server_type) < 0)
        return -1;
    return PyModule_AddObjectRef(m, "_Server", (PyObject *)&gkvpy_server_type);
}
