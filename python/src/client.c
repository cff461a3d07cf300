/* client.c - gkv.Client: the network client (net/gkv_net.h) from Python.
 *
 * The C client serialises its calls; here a lock per client is taken
 * (without the interpreter lock) around each call and the copying out of
 * what it lent, so a sampling result is copied before another thread's
 * call reuses its memory.
 *
 * fork(): a client used in a child made by fork() reconnects there by
 * itself at its first call, with its saved connect parameters, as an
 * observer of the same group (rank gkv_client_observer_rank(), no
 * barriers; its leaving never stops a server): the same as a Client
 * pickled to a 'spawn' worker (gkv/__init__.py). The child's nanomsg is a
 * fresh copy of the library (nnshim.c); the parent's gkv_client, whose
 * sockets belong to the parent's copy and whose threads are not in the
 * child, is abandoned there, never freed nor closed: closing it would
 * call into the parent's copy, whose threads are gone, and leave the
 * group in the parent's name. Its socket descriptors stay open in the
 * child, so a server sees the parent's connections end only once the
 * child has exited too. */
#include "gkvpy.h"
#include <pythread.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    PyObject_HEAD
    gkv_client       *c;
    PyThread_type_lock lock;
    pid_t             pid;       /* the process that connected c */
    int               refork;    /* c is a parent's: connect before use */
    int               inflight;  /* calls running (holding 'lock') */
    int               users;     /* Loaders borrowing c */
    /* how it connected */
    PyObject         *ip_config; /* str, or NULL with addr */
    PyObject         *addr;
    char             *token;     /* malloc'd, or NULL */
    PyObject         *group;
    PyObject         *instance;
    uint32_t          rank;
    gkv_client_opts   opts;
} client_obj;

static gkv_err
do_connect(client_obj *o, gkv_client **out)
{
    const char *group = PyUnicode_AsUTF8(o->group);
    gkv_client_opts opts = o->opts;
    gkv_err rc;

    opts.instance = o->instance != NULL ? PyUnicode_AsUTF8(o->instance) : NULL;
    Py_BEGIN_ALLOW_THREADS
    if (o->ip_config != NULL)
        rc = gkv_client_connect(out, PyUnicode_AsUTF8(o->ip_config), o->token,
                                group, o->rank, &opts);
    else
        rc = gkv_client_connect_addr(out, PyUnicode_AsUTF8(o->addr), o->token,
                                     group, o->rank, &opts);
    Py_END_ALLOW_THREADS
    return rc;
}

/* In a child after fork(): leaves the parent's c, lock and loaders
 * behind (never freed: see the top) and marks c to be replaced by an
 * observer connection of this process's own. -1 with an exception. */
static int
client_refork(client_obj *o)
{
    PyThread_type_lock lock = PyThread_allocate_lock();

    if (lock == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    o->lock = lock;                     /* a parent's thread may hold the old */
    o->inflight = 0;
    o->users = 0;                       /* the parent's loaders are not here */
    o->pid = getpid();
    o->refork = 1;
    return 0;
}

/* Takes the client for one call: checks it is open, reconnects in a child
 * after fork(), takes the lock. NULL with an exception; else call
 * client_end() after. */
static gkv_client *
client_begin(client_obj *o)
{
    if (o->c == NULL) {
        gkvpy_raisef(GKV_EINVAL, "the client is closed");
        return NULL;
    }
    if (o->pid != getpid() && client_refork(o) < 0)
        return NULL;
    if (!PyThread_acquire_lock(o->lock, NOWAIT_LOCK)) {
        Py_BEGIN_ALLOW_THREADS
        PyThread_acquire_lock(o->lock, WAIT_LOCK);
        Py_END_ALLOW_THREADS
    }
    if (o->c == NULL) {                  /* closed while we waited */
        PyThread_release_lock(o->lock);
        gkvpy_raisef(GKV_EINVAL, "the client is closed");
        return NULL;
    }
    if (o->refork) {                     /* first use in this forked child */
        gkv_client *c = NULL;
        uint32_t rank = o->rank;
        gkv_client_opts opts = o->opts;
        gkv_err rc;

        if (gkvpy_nn_ready() < 0) {
            PyThread_release_lock(o->lock);
            return NULL;
        }
        o->rank = gkv_client_observer_rank();
        o->opts.flags |= GKV_CLIENT_OBSERVER;
        o->opts.group_size = 0;
        o->inflight++;                   /* close() waits for the connect */
        rc = do_connect(o, &c);
        o->inflight--;
        if (rc != GKV_OK) {
            o->rank = rank;              /* the next call tries again */
            o->opts = opts;
            PyThread_release_lock(o->lock);
            gkvpy_raise(rc);
            return NULL;
        }
        o->c = c;                        /* the parent's is left behind */
        o->refork = 0;
    }
    o->inflight++;
    return o->c;
}

static void
client_end(client_obj *o)
{
    o->inflight--;
    PyThread_release_lock(o->lock);
}

#define NOGIL(stmt) do { Py_BEGIN_ALLOW_THREADS stmt; Py_END_ALLOW_THREADS } while (0)

static int
client_init(client_obj *o, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"ip_config", "addr", "token", "token_file",
                             "group", "rank", "group_size", "timeout_ms",
                             "num_servers", "observer", "checksum",
                             "local_read", "heartbeat", "instance", NULL};
    PyObject *ipc = Py_None, *addr = Py_None, *tfile = Py_None,
             *inst = Py_None;
    const char *token = NULL, *group = "gkv";
    unsigned rank = 0, group_size = 0, num_servers = 0;
    int timeout_ms = 0, observer = 0, checksum = 0, local_read = 0,
        heartbeat = 1;
    gkv_client *c = NULL;
    gkv_err rc;

    if (o->c != NULL || o->lock != NULL) {
        gkvpy_raisef(GKV_EINVAL, "Client.__init__ called twice");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O$OzOsIIiIppppO", kwlist,
                                     &ipc, &addr, &token, &tfile, &group,
                                     &rank, &group_size, &timeout_ms,
                                     &num_servers, &observer, &checksum,
                                     &local_read, &heartbeat, &inst))
        return -1;
    if ((ipc == Py_None) == (addr == Py_None)) {
        gkvpy_raisef(GKV_EINVAL, "give ip_config (a job's servers) or addr "
                     "('HOST:PORT', one server), not both nor neither");
        return -1;
    }
    if (ipc != Py_None && !PyUnicode_FSDecoder(ipc, &o->ip_config))
        return -1;
    if (addr != Py_None) {
        if (!PyUnicode_Check(addr)) {
            gkvpy_raisef(GKV_EINVAL, "addr: expected 'HOST:PORT'");
            return -1;
        }
        o->addr = Py_NewRef(addr);
    }
    if (inst != Py_None) {
        if (!PyUnicode_Check(inst)) {
            gkvpy_raisef(GKV_EINVAL, "instance: expected a str");
            return -1;
        }
        o->instance = Py_NewRef(inst);
    }
    if (tfile != Py_None) {
        PyObject *p;
        char buf[GKV_TOKEN_MAX + 1];

        if (token != NULL) {
            gkvpy_raisef(GKV_EINVAL, "give token or token_file, not both");
            return -1;
        }
        if (!PyUnicode_FSDecoder(tfile, &p))
            return -1;
        NOGIL(rc = gkv_token_load(PyUnicode_AsUTF8(p), buf, sizeof buf));
        Py_DECREF(p);
        if (rc != GKV_OK) {
            gkvpy_raise(rc);
            return -1;
        }
        o->token = strdup(buf);
        memset(buf, 0, sizeof buf);
    } else if (token != NULL) {
        o->token = strdup(token);
    }
    if ((tfile != Py_None || token != NULL) && o->token == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if ((o->group = PyUnicode_FromString(group)) == NULL)
        return -1;
    o->rank = rank;
    o->opts.timeout_ms = timeout_ms;
    o->opts.num_servers = num_servers;
    o->opts.group_size = group_size;
    o->opts.flags = (observer ? GKV_CLIENT_OBSERVER : 0) |
                    (checksum ? GKV_CLIENT_CHECKSUM : 0) |
                    (local_read ? GKV_CLIENT_LOCAL_READ : 0) |
                    (heartbeat ? 0 : GKV_CLIENT_NO_HEARTBEAT);
    if ((o->lock = PyThread_allocate_lock()) == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if (gkvpy_nn_ready() < 0)
        return -1;
    if ((rc = do_connect(o, &c)) != GKV_OK) {
        gkvpy_raise(rc);
        return -1;
    }
    o->c = c;
    o->pid = getpid();
    return 0;
}

static PyObject *
client_close(client_obj *o, PyObject *unused)
{
    gkv_client *c = o->c;
    gkv_err rc = GKV_OK;

    if (c != NULL && o->pid != getpid()) {
        o->c = NULL;                    /* a parent's, never used here */
        Py_RETURN_NONE;
    }
    if (o->inflight > 0)
        return gkvpy_raisef(GKV_EBUSY, "the client has %d calls running in "
                            "other threads", o->inflight);
    if (o->users > 0)
        return gkvpy_raisef(GKV_EBUSY, "%d loaders use the client: close "
                            "them first", o->users);
    o->c = NULL;
    if (c != NULL && o->pid == getpid() && !o->refork)
        NOGIL(rc = gkv_client_close(c));
    if (rc != GKV_OK)
        return gkvpy_raise(rc);
    Py_RETURN_NONE;
}

static void
client_dealloc(client_obj *o)
{
    if (o->c != NULL && o->inflight == 0 && o->pid == getpid() && !o->refork)
        gkv_client_close(o->c);
    if (o->lock != NULL && o->pid == getpid())
        PyThread_free_lock(o->lock);
    if (o->token != NULL) {
        memset(o->token, 0, strlen(o->token));
        free(o->token);
    }
    Py_XDECREF(o->ip_config);
    Py_XDECREF(o->addr);
    Py_XDECREF(o->group);
    Py_XDECREF(o->instance);
    Py_TYPE(o)->tp_free((PyObject *)o);
}

static PyObject *
client_enter(client_obj *o, PyObject *unused)
{
    return Py_NewRef((PyObject *)o);
}

static PyObject *
client_exit(client_obj *o, PyObject *args)
{
    return client_close(o, NULL);
}

/* ---- tensors ---- */

static int
client_desc(gkv_client *c, const char *name, gkv_tensor_desc *d)
{
    gkv_err rc;

    NOGIL(rc = gkv_client_tensor_info(c, name, d));
    if (rc == GKV_ENOTFOUND)            /* created by another client? */
        NOGIL(rc = gkv_client_refresh(c);
              if (rc == GKV_OK) rc = gkv_client_tensor_info(c, name, d));
    if (rc != GKV_OK) {
        gkvpy_raise(rc);
        return -1;
    }
    return 0;
}

static PyObject *
client_pull(client_obj *o, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"name", "ids", "out", NULL};
    const char *name;
    PyObject *ids, *out = NULL, *ret = NULL;
    gkvpy_in iin, oin;
    gkv_tensor_desc d;
    gkvpy_array *arr = NULL;
    gkv_client *c;
    void *dst;
    gkv_err rc;

    if (!PyArg_ParseTupleAndKeywords(args, kw, "sO|O", kwlist, &name, &ids,
                                     &out) ||
        (c = client_begin(o)) == NULL)
        return NULL;
    if (client_desc(c, name, &d) < 0 || gkvpy_in_ids(ids, &iin, "ids") < 0)
        goto out;
    if ((dst = gkvpy_rows_dst(out, &oin, &arr, &d, iin.n)) == NULL) {
        gkvpy_in_release(&iin);
        goto out;
    }
    NOGIL(rc = gkv_client_pull(c, name, iin.ptr, iin.n, dst,
                               iin.n * d.row_bytes));
    gkvpy_in_release(&iin);
    gkvpy_in_release(&oin);
    if (rc != GKV_OK) {
        Py_XDECREF(arr);
        gkvpy_raise(rc);
        goto out;
    }
    ret = arr != NULL ? (PyObject *)arr : Py_NewRef(out);
out:
    client_end(o);
    return ret;
}

static PyObject *
client_push(client_obj *o, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"name", "ids", "rows", "handler", "lr", "eps",
                             "beta1", "beta2", "dups_sum", NULL};
    const char *name;
    PyObject *ids, *rows, *handler = NULL, *ret = NULL;
    double lr = 0, eps = 0, b1 = 0, b2 = 0;
    int dups = 0;
    gkv_push_args pa;
    gkvpy_in iin, rin;
    gkv_tensor_desc d;
    gkv_client *c;
    gkv_err rc;

    if (!PyArg_ParseTupleAndKeywords(args, kw, "sOO|O$ddddp", kwlist, &name,
                                     &ids, &rows, &handler, &lr, &eps, &b1,
                                     &b2, &dups) ||
        gkvpy_push_args(handler, lr, eps, b1, b2, dups, &pa) < 0 ||
        (c = client_begin(o)) == NULL)
        return NULL;
    if (client_desc(c, name, &d) < 0 || gkvpy_in_ids(ids, &iin, "ids") < 0)
        goto out;
    if (gkvpy_in_rows(rows, &rin, "rows", &d, iin.n, 0) < 0) {
        gkvpy_in_release(&iin);
        goto out;
    }
    NOGIL(rc = gkv_client_push(c, name, iin.ptr, iin.n, rin.ptr, rin.nbytes,
                               &pa));
    gkvpy_in_release(&iin);
    gkvpy_in_release(&rin);
    if (rc != GKV_OK)
        gkvpy_raise(rc);
    else
        ret = Py_NewRef(Py_None);
out:
    client_end(o);
    return ret;
}

static PyObject *
client_create(client_obj *o, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"name", "dtype", "row_shape", "hi", "lo", "init",
                             "a", "b", "seed", "chunk_rows", "hot", "machine",
                             NULL};
    const char *name, *init = "zeros";
    PyObject *dtype = NULL, *row_shape = NULL, *hi = NULL, *ret = NULL;
    unsigned long long lo = 0, seed = 0;
    double a = 0, b = 0;
    unsigned chunk_rows = 0;
    int hot = 0, machine = -1;
    gkv_tensor_spec sp;
    gkv_tensor_desc d;
    gkv_client *c;
    gkv_err rc;

    if (!PyArg_ParseTupleAndKeywords(args, kw, "s|$OOOKsddKIpi", kwlist, &name,
                                     &dtype, &row_shape, &hi, &lo, &init, &a,
                                     &b, &seed, &chunk_rows, &hot, &machine) ||
        gkvpy_spec(dtype, row_shape, lo, hi, init, a, b, seed, chunk_rows, hot,
                   &sp) < 0 ||
        (c = client_begin(o)) == NULL)
        return NULL;
    NOGIL(rc = gkv_client_create(c, name, &sp, machine);
          if (rc == GKV_OK) rc = gkv_client_tensor_info(c, name, &d));
    if (rc != GKV_OK)
        gkvpy_raise(rc);
    else
        ret = gkvpy_desc_dict(&d);
    client_end(o);
    return ret;
}

static PyObject *
client_delete(client_obj *o, PyObject *args)
{
    const char *name;
    gkv_client *c;
    gkv_err rc;

    if (!PyArg_ParseTuple(args, "s", &name) || (c = client_begin(o)) == NULL)
        return NULL;
    NOGIL(rc = gkv_client_delete(c, name));
    client_end(o);
    if (rc != GKV_OK)
        return gkvpy_raise(rc);
    Py_RETURN_NONE;
}

static PyObject *
client_describe(client_obj *o, PyObject *args)
{
    const char *name;
    gkv_tensor_desc d;
    gkv_client *c;
    int r;

    if (!PyArg_ParseTuple(args, "s", &name) || (c = client_begin(o)) == NULL)
        return NULL;
    r = client_desc(c, name, &d);
    client_end(o);
    return r < 0 ? NULL : gkvpy_desc_dict(&d);
}

static PyObject *
client_list(client_obj *o, PyObject *unused)
{
    gkv_tensor_desc *v = NULL;
    size_t n = 0;
    gkv_client *c;
    gkv_err rc;

    if ((c = client_begin(o)) == NULL)
        return NULL;
    NOGIL(rc = gkv_client_refresh(c);
          if (rc == GKV_OK) rc = gkv_client_tensor_list(c, &v, &n));
    client_end(o);
    if (rc != GKV_OK)
        return gkvpy_raise(rc);
    return gkvpy_desc_list(v, n);
}

static PyObject *
client_barrier(client_obj *o, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"timeout_ms", NULL};
    int ms = 0;
    gkv_client *c;
    gkv_err rc;

    if (!PyArg_ParseTupleAndKeywords(args, kw, "|i", kwlist, &ms) ||
        (c = client_begin(o)) == NULL)
        return NULL;
    NOGIL(rc = gkv_client_barrier(c, ms));
    client_end(o);
    if (rc != GKV_OK)
        return gkvpy_raise(rc);
    Py_RETURN_NONE;
}

static PyObject *
client_shutdown(client_obj *o, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"force", NULL};
    int force = 0;
    gkv_client *c;
    gkv_err rc;

    if (!PyArg_ParseTupleAndKeywords(args, kw, "|p", kwlist, &force) ||
        (c = client_begin(o)) == NULL)
        return NULL;
    NOGIL(rc = gkv_client_shutdown(c, force));
    client_end(o);
    if (rc != GKV_OK)
        return gkvpy_raise(rc);
    Py_RETURN_NONE;
}

static PyObject *
client_nservers(client_obj *o, PyObject *unused)
{
    gkv_client *c;
    size_t n;

    if ((c = client_begin(o)) == NULL)
        return NULL;
    n = gkv_client_nservers(c);
    client_end(o);
    return PyLong_FromSize_t(n);
}

/* ---- graph ---- */

/* pbook() (args NULL: the book as a dict, or None for a plain store) or
 * _split(args, kw) on the client's partition book. */
static PyObject *
client_book(client_obj *o, PyObject *args, PyObject *kw)
{
    const gkv_pbook *b;
    gkv_client *c;
    PyObject *r;

    if ((c = client_begin(o)) == NULL)
        return NULL;
    b = gkv_client_pbook(c);
    if (args == NULL)
        r = b != NULL ? gkvpy_pbook_dict(b) : Py_NewRef(Py_None);
    else
        r = b != NULL ? gkvpy_pbook_split(b, args, kw)
                      : gkvpy_raisef(GKV_ENOTSUP, "the servers serve a plain "
                                     "store: there is no partition book");
    client_end(o);
    return r;
}

static PyObject *
client_pbook(client_obj *o, PyObject *unused)
{
    return client_book(o, NULL, NULL);
}

static PyObject *
client_split(client_obj *o, PyObject *args, PyObject *kw)
{
    return client_book(o, args, kw);
}

static PyObject *
client_node_owner(client_obj *o, PyObject *args)
{
    int ntype;
    PyObject *ids, *ret = NULL;
    gkvpy_in in;
    const gkv_pbook *b;
    gkvpy_array *arr;
    gkv_client *c;
    gkv_err rc;

    if (!PyArg_ParseTuple(args, "iO", &ntype, &ids) ||
        (c = client_begin(o)) == NULL)
        return NULL;
    if ((b = gkv_client_pbook(c)) == NULL) {
        gkvpy_raisef(GKV_ENOTSUP, "the servers serve a plain store, not "
                     "partitions: there is no partition book");
        goto out;
    }
    if (gkvpy_in_ids(ids, &in, "ids") < 0)
        goto out;
    {
        Py_ssize_t n = (Py_ssize_t)in.n;

        if ((arr = gkvpy_array_new(GKV_I32, 1, &n)) == NULL) {
            gkvpy_in_release(&in);
            goto out;
        }
    }
    rc = gkv_pbook_node_owner(b, ntype, in.ptr, in.n, arr->data);
    gkvpy_in_release(&in);
    if (rc != GKV_OK) {
        Py_DECREF(arr);
        gkvpy_raise(rc);
        goto out;
    }
    ret = (PyObject *)arr;
out:
    client_end(o);
    return ret;
}

static gkv_err
q_in_deg(void *h, int t, const int64_t *ids, size_t n, int64_t *a, int64_t *b)
{
    return gkv_client_in_degrees(h, t, ids, n, a);
}

static gkv_err
q_out_deg(void *h, int t, const int64_t *ids, size_t n, int64_t *a, int64_t *b)
{
    return gkv_client_out_degrees(h, t, ids, n, a);
}

static gkv_err
q_find_edges(void *h, int t, const int64_t *ids, size_t n, int64_t *a,
             int64_t *b)
{
    return gkv_client_find_edges(h, t, ids, n, a, b);
}

static PyObject *
client_query(client_obj *o, gkvpy_query_fn fn, int nout, PyObject *args)
{
    gkv_client *c;
    PyObject *r;

    if ((c = client_begin(o)) == NULL)
        return NULL;
    r = gkvpy_query(c, fn, nout, args);
    client_end(o);
    return r;
}

static PyObject *
client_in_degrees(client_obj *o, PyObject *args)
{
    return client_query(o, q_in_deg, 1, args);
}

static PyObject *
client_out_degrees(client_obj *o, PyObject *args)
{
    return client_query(o, q_out_deg, 1, args);
}

static PyObject *
client_find_edges(client_obj *o, PyObject *args)
{
    return client_query(o, q_find_edges, 2, args);
}

static PyObject *
client_opt_reset(client_obj *o, PyObject *args)
{
    const char *name, *opt = NULL;
    gkv_client *c;
    gkv_err rc;

    if (!PyArg_ParseTuple(args, "s|z", &name, &opt) ||
        (c = client_begin(o)) == NULL)
        return NULL;
    NOGIL(rc = gkv_client_opt_reset(c, name, opt));
    client_end(o);
    if (rc != GKV_OK)
        return gkvpy_raise(rc);
    Py_RETURN_NONE;
}

#define SAMPLE_KWLIST(first) {"seeds", first, "seed", "dir", "replace", \
                              "weighted", "prob", "edge_w", NULL}

static PyObject *
client_sample(client_obj *o, PyObject *args, PyObject *kw, int blocks)
{
    static char *kwn[] = SAMPLE_KWLIST("fanout");
    static char *kwb[] = SAMPLE_KWLIST("fanouts");
    PyObject *seeds, *fan, *ret = NULL, *prob = Py_None, *edge_w = Py_None;
    unsigned long long seed = 0;
    const char *dir = "in";
    int replace = 0, weighted = 0, layer = 0;
    gkvpy_sargs *s;
    const gkv_pbook *b;
    gkv_client *c;
    gkv_err rc;

    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|$KsppOO",
                                     blocks ? kwb : kwn, &seeds, &fan, &seed,
                                     &dir, &replace, &weighted, &prob, &edge_w))
        return NULL;
    if ((c = client_begin(o)) == NULL)
        return NULL;
    if ((b = gkv_client_pbook(c)) == NULL) {
        gkvpy_raisef(GKV_ENOTSUP, "the servers serve a plain store, not "
                     "partitions: nothing to sample");
        goto out;
    }
    if ((s = PyMem_Calloc(1, sizeof *s)) == NULL) {
        PyErr_NoMemory();
        goto out;
    }
    if (gkvpy_sargs_get(s, gkv_pbook_num_ntypes(b), gkv_pbook_num_etypes(b),
                        seeds, fan, blocks, seed, dir, replace, weighted,
                        prob, edge_w, b) < 0) {
        PyMem_Free(s);
        goto out;
    }
    if (blocks) {
        gkv_block bl[64];

        NOGIL(rc = gkv_client_sample_blocks(c, s->seeds, s->nseeds, s->fan,
                                            s->nfan, s->nlayers, &s->opts, bl));
        ret = rc != GKV_OK ? gkvpy_raise(rc) : gkvpy_blocks_tuple(NULL, bl, s->nlayers);
    } else {
        gkv_sample_edges e[64];

        NOGIL(rc = gkv_client_sample_neighbors(c, s->seeds, s->nseeds, s->fan,
                                               s->nfan, layer, &s->opts, e));
        ret = rc != GKV_OK ? gkvpy_raise(rc)
                           : gkvpy_edges_list(NULL, e, gkv_pbook_num_etypes(b));
    }
    gkvpy_sargs_release(s);
    PyMem_Free(s);
out:
    client_end(o);
    return ret;
}

static PyObject *
client_sample_neighbors(client_obj *o, PyObject *args, PyObject *kw)
{
    return client_sample(o, args, kw, 0);
}

static PyObject *
client_sample_blocks(client_obj *o, PyObject *args, PyObject *kw)
{
    return client_sample(o, args, kw, 1);
}

static PyObject *
client_get_closed(client_obj *o, void *unused)
{
    return PyBool_FromLong(o->c == NULL);
}

static PyMethodDef client_methods[] = {
    {"close", (PyCFunction)client_close, METH_NOARGS,
     "close(): leave the group (gkv_client_close); later calls raise."},
    {"__enter__", (PyCFunction)client_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)client_exit, METH_VARARGS, NULL},
    {"pull", (PyCFunction)(void (*)(void))client_pull,
     METH_VARARGS | METH_KEYWORDS,
     "pull(name, ids, out=None) -> Array (gkv_client_pull)"},
    {"push", (PyCFunction)(void (*)(void))client_push,
     METH_VARARGS | METH_KEYWORDS,
     "push(name, ids, rows, handler='assign', *, lr=0, eps=0, beta1=0,\n"
     "     beta2=0, dups_sum=False) (gkv_client_push)"},
    {"create", (PyCFunction)(void (*)(void))client_create,
     METH_VARARGS | METH_KEYWORDS,
     "create(name, *, dtype='float32', row_shape=(), hi, lo=0, init='zeros',\n"
     "       a=0, b=0, seed=0, chunk_rows=0, hot=False, machine=-1) -> dict"},
    {"delete", (PyCFunction)client_delete, METH_VARARGS,
     "delete(name) (idempotent)"},
    {"describe", (PyCFunction)client_describe, METH_VARARGS,
     "describe(name) -> dict: the tensor as the whole job sees it"},
    {"tensors", (PyCFunction)client_list, METH_NOARGS,
     "tensors() -> [dict]: every tensor of the job, in name order"},
    {"barrier", (PyCFunction)(void (*)(void))client_barrier,
     METH_VARARGS | METH_KEYWORDS,
     "barrier(timeout_ms=0): wait for the group (needs group_size)"},
    {"shutdown", (PyCFunction)(void (*)(void))client_shutdown,
     METH_VARARGS | METH_KEYWORDS,
     "shutdown(force=False): ask every server to stop"},
    {"nservers", (PyCFunction)client_nservers, METH_NOARGS,
     "nservers() -> servers known (machines x servers each)"},
    {"pbook", (PyCFunction)client_pbook, METH_NOARGS,
     "pbook() -> dict (the partition book's basics) or None (a plain store)"},
    {"_split", (PyCFunction)(void (*)(void))client_split,
     METH_VARARGS | METH_KEYWORDS, NULL},
    {"node_owner", (PyCFunction)client_node_owner, METH_VARARGS,
     "node_owner(ntype, ids) -> int32 Array: the partition owning each ID"},
    {"in_degrees", (PyCFunction)client_in_degrees, METH_VARARGS,
     "in_degrees(etype, nodes) -> int64 Array"},
    {"out_degrees", (PyCFunction)client_out_degrees, METH_VARARGS,
     "out_degrees(etype, nodes) -> int64 Array (needs the CSR)"},
    {"find_edges", (PyCFunction)client_find_edges, METH_VARARGS,
     "find_edges(etype, eids) -> (src, dst) int64 Arrays"},
    {"opt_reset", (PyCFunction)client_opt_reset, METH_VARARGS,
     "opt_reset(name, optimizer=None): drop adagrad/adam state (None: both)"},
    {"_sample_neighbors", (PyCFunction)(void (*)(void))client_sample_neighbors,
     METH_VARARGS | METH_KEYWORDS, NULL},
    {"_sample_blocks", (PyCFunction)(void (*)(void))client_sample_blocks,
     METH_VARARGS | METH_KEYWORDS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef client_getset[] = {
    {"closed", (getter)client_get_closed, NULL, "True once closed", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject gkvpy_client_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "gkv._Client",
    .tp_basicsize = sizeof(client_obj),
    .tp_dealloc = (destructor)client_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "The C client; use gkv.Client.",
    .tp_methods = client_methods,
    .tp_getset = client_getset,
    .tp_init = (initproc)client_init,
    .tp_new = PyType_GenericNew,
};

gkv_client *
gkvpy_client_hold(PyObject *o)
{
    if (!PyObject_TypeCheck(o, &gkvpy_client_type)) {
        gkvpy_raisef(GKV_EINVAL, "expected a gkv.Client, not %s",
                     Py_TYPE(o)->tp_name);
        return NULL;
    }
    return client_begin((client_obj *)o);
}

void
gkvpy_client_unhold(PyObject *o)
{
    client_end((client_obj *)o);
}

void
gkvpy_client_use(PyObject *o, int delta)
{
    ((client_obj *)o)->users += delta;
}

int
gkvpy_client_ready(PyObject *m)
{
    if (PyType_Ready(&gkvpy_client_type) < 0)
        return -1;
    return PyModule_AddObjectRef(m, "_Client", (PyObject *)&gkvpy_client_type);
}
