/* gkvpy.h - what the files of the extension module gkv._gkv share.
 *
 *   module.c  the module, the gkv.Error hierarchy, dtype tables
 *   array.c   gkv.Array (owned memory; __dlpack__, buffer protocol) and
 *             the parsing of input arrays (buffer protocol, __dlpack__)
 *   store.c   gkv.Store (the embedded store)
 *   client.c  gkv.Client (the network client)
 *   server.c  gkv._Server (a server run on a thread of this process)
 *   part.c    gkv.Partition (a partition opened in process, its sampler)
 *   partition.c  gkv._partition (gkv_partition_write on arrays)
 *   loader.c  gkv._Loader and the memory of its batches
 *   nnshim.c  nanomsg through a table of its functions, a fresh copy of
 *             the library loaded in each child after fork()
 *
 * Every call that can block releases the interpreter lock around the C
 * call. An object whose C call runs without the lock counts it in
 * 'inflight' (changed only with the lock held), and close() refuses while
 * it is non-zero, so no call ever runs on a freed handle. */
#ifndef GKVPY_H
#define GKVPY_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <sys/types.h>
#include "gkv.h"

#define GKVPY_MAXDIM 8          /* dims of an array (1 + GKV_MAX_DIMS rows) */
#define GKVPY_U64    100        /* a pseudo-dtype: uint64 input (IDs) */
#define GKVPY_U16    101        /* a pseudo-dtype: uint16 input (bf16 bits) */
#define GKVPY_BOOL   102        /* a pseudo-dtype: bool input (as u8) */

/* ---- module.c ---- */
extern PyObject *gkvpy_error;              /* gkv.Error */
/* Raises the gkv.Error subclass of 'rc' with gkv_errmsg() (or the
 * strerror text when empty); returns NULL. Call with the GIL held, right
 * after the failing call (same thread). */
PyObject *gkvpy_raise(gkv_err rc);
/* Raises the subclass of 'rc' with a message of the caller's. */
PyObject *gkvpy_raisef(gkv_err rc, const char *fmt, ...);
/* "float32", ...; NULL for an unknown dtype. */
const char *gkvpy_dtype_name(int dt);
/* Parses a dtype given as a gkv name ("f32"), a numpy-style name
 * ("float32"), or an object with a 'name' or 'str' attribute naming one
 * (numpy dtypes, torch dtypes: "torch.float32"). -1 with an exception. */
int gkvpy_dtype_parse(PyObject *o);

/* ---- array.c ---- */
typedef struct {
    PyObject_HEAD
    void       *data;           /* the first byte */
    size_t      nbytes;
    int         dtype;          /* gkv_dtype */
    int         ndim;
    Py_ssize_t  shape[GKVPY_MAXDIM];
    Py_ssize_t  strides[GKVPY_MAXDIM];  /* bytes, C order */
    PyObject   *owner;          /* keeps 'data' alive; NULL: data is ours
                                 * (malloc'd) */
    int         cuda;           /* -1: CPU memory; else the CUDA device
                                 * holding data (a GPU batch's view) */
    Py_ssize_t  exports;        /* buffer views handed out */
} gkvpy_array;

extern PyTypeObject gkvpy_array_type;
int gkvpy_array_ready(PyObject *m);
/* A new array of 'dtype' and shape, memory malloc'd (not zeroed) and owned
 * by the array. NULL with an exception. */
gkvpy_array *gkvpy_array_new(int dtype, int ndim, const Py_ssize_t *shape);
/* An array over memory 'owner' keeps alive (a batch): no copy. When owner
 * is a GPU batch's (_GpuBatchMem), data is device memory: the array then
 * exports only through __dlpack__, as a CUDA tensor. */
gkvpy_array *gkvpy_array_view(PyObject *owner, void *data, int dtype, int ndim,
                              const Py_ssize_t *shape);
/* A new int64 array holding a copy of p[0 .. n). */
PyObject *gkvpy_array_i64(const int64_t *p, size_t n);

/* An input array: borrowed bytes of an object, held until gkvpy_in_release. */
typedef struct {
    const char *what;           /* "ids", "rows", ... for messages */
    void       *ptr;
    size_t      nbytes;
    int         dtype;          /* gkv_dtype or GKVPY_* */
    int         ndim;
    int64_t     shape[GKVPY_MAXDIM];
    size_t      n;              /* elements */
    Py_buffer   view;
    int         have_view;
    void       *dlm;            /* DLManagedTensor(Versioned) consumed */
    int         dlm_versioned;
    void       *tmp;            /* converted from a Python sequence */
} gkvpy_in;

#define GKVPY_IN_WRITABLE 0x1u  /* the caller writes into it (out=) */
#define GKVPY_IN_SEQ      0x2u  /* a list or tuple of ints is accepted */

/* Borrows the bytes of 'o' without a copy: the buffer protocol (numpy,
 * bytes, array.array, memoryview) or __dlpack__ (torch, jax, cupy on the
 * CPU ...), C-contiguous only. 0, or -1 with gkv.InvalidArgumentError
 * naming in->what. */
int  gkvpy_in_get(PyObject *o, gkvpy_in *in, const char *what, unsigned flags);
void gkvpy_in_release(gkvpy_in *in);
/* Borrows 'o' as IDs: int64 or uint64, any shape, contiguous. */
int  gkvpy_in_ids(PyObject *o, gkvpy_in *in, const char *what);
/* Rows for a tensor of desc 'd': dtype equal, shape (n, *row shape) with n
 * = nrows (or any n when nrows is (size_t)-1). */
int  gkvpy_in_rows(PyObject *o, gkvpy_in *in, const char *what,
                   const gkv_tensor_desc *d, size_t nrows, unsigned flags);

/* The shape (n, *row shape) of n rows of d into sh; returns its ndim. */
int  gkvpy_rows_shape(const gkv_tensor_desc *d, size_t n, Py_ssize_t *sh);
/* Where n rows of d go: 'out' checked and borrowed into *in (writable,
 * the tensor's dtype, shape (n, *row shape)), or when out is NULL or None
 * a new Array (*arr, in zeroed). NULL with an exception. */
void *gkvpy_rows_dst(PyObject *out, gkvpy_in *in, gkvpy_array **arr,
                     const gkv_tensor_desc *d, size_t n);

/* ---- store.c, client.c, server.c, part.c ---- */
extern PyTypeObject gkvpy_store_type, gkvpy_client_type, gkvpy_server_type,
                    gkvpy_part_type;
/* Parses handler keyword arguments into *a (handler points into o). */
int gkvpy_push_args(PyObject *handler, double lr, double eps, double beta1,
                    double beta2, int dups_sum, gkv_push_args *a);
/* A dict describing a tensor. */
PyObject *gkvpy_desc_dict(const gkv_tensor_desc *d);
/* A list of such dicts; frees v (gkv_free) either way. */
PyObject *gkvpy_desc_list(gkv_tensor_desc *v, size_t n);
/* Fills a spec from create()'s arguments. 0, or -1 with an exception. */
int gkvpy_spec(PyObject *dtype, PyObject *row_shape, unsigned long long lo,
               PyObject *hi, const char *init, double a, double b,
               unsigned long long seed, unsigned chunk_rows, int hot,
               gkv_tensor_spec *sp);
/* Sampling arguments shared by the client and the in-process partition:
 * seeds (an array: node type 0; or a dict type -> array), fanouts, and
 * the edge weights: prob (opts.edge_w_feat: a feature name for every
 * edge type, or per edge type a list or dict {etype: name or None}) and
 * edge_w (opts.edge_w: float32 arrays by edge ID, one for a graph of one
 * edge type, or per edge type a list or dict). Dict keys are edge type
 * indices, canonical names ('src:rel:dst' or a tuple) or a relation name
 * only one edge type has, resolved by 'book' (NULL: indices only). */
typedef struct {
    int         nt;                  /* node types */
    gkvpy_in    in[64];
    const int64_t *seeds[64];
    size_t      nseeds[64];
    int        *fan;
    int         nfan, nlayers;
    gkv_sample_opts opts;
    PyObject   *wref[64];            /* prob's str per etype (held) */
    const char *wfeat[64];
    gkvpy_in    win[64];             /* edge_w's arrays per etype */
    const float *ew[64];
    int64_t     ewlen[64];
} gkvpy_sargs;
int  gkvpy_sargs_get(gkvpy_sargs *s, int num_ntypes, int num_etypes,
                     PyObject *seeds, PyObject *fanouts, int layers,
                     unsigned long long seed, const char *dir, int replace,
                     int weighted, PyObject *prob, PyObject *edge_w,
                     const gkv_pbook *book);
void gkvpy_sargs_release(gkvpy_sargs *s);
/* prob alone (as gkvpy_sargs_get takes it) into s->wfeat, s->wref and
 * s->opts.edge_w_feat (left NULL when no edge type has a name), for a
 * zeroed s (release it with gkvpy_sargs_release): the loader's prob=. */
int  gkvpy_prob_get(gkvpy_sargs *s, int num_etypes, PyObject *prob,
                    const gkv_pbook *book);
/* A tuple of blocks (each (nodes, num_src, num_dst, edges)): copies the
 * Arrays own (owner NULL), or views that keep owner (a batch) alive. */
PyObject *gkvpy_blocks_tuple(PyObject *owner, const gkv_block *b, int nl);
/* A per-ID query of a graph handle h ('type' a node or edge type): out1
 * (and out2 when nout is 2) get n int64 values. */
typedef gkv_err (*gkvpy_query_fn)(void *h, int type, const int64_t *ids,
                                  size_t n, int64_t *out1, int64_t *out2);
/* Runs fn on args (type, ids) without the interpreter lock: one int64
 * Array, or a tuple of two when nout is 2. */
PyObject *gkvpy_query(void *h, gkvpy_query_fn fn, int nout, PyObject *args);
/* The partition book's basics as a dict (names, counts, ranges). */
PyObject *gkvpy_pbook_dict(const gkv_pbook *b);
/* _split(edge, type, mask=None, ids=None, num_trainers=1, rank=0):
 * gkv_pbook_node_split / gkv_pbook_edge_split of b as an int64 Array. */
PyObject *gkvpy_pbook_split(const gkv_pbook *b, PyObject *args, PyObject *kw);
/* A list per etype of (src, dst, eid), copies or views as above. */
PyObject *gkvpy_edges_list(PyObject *owner, const gkv_sample_edges *e, int ne);

/* gkv._partition(outdir, ntypes, etypes, feats, masks, reverse, ...):
 * partition.c says what the lists hold; returns the report as a dict. */
PyObject *gkvpy_partition(PyObject *self, PyObject *args, PyObject *kw);

/* A Client's handle for a call of another object (client_begin: checked,
 * locked; NULL with an exception), and its end. */
gkv_client *gkvpy_client_hold(PyObject *o);
void gkvpy_client_unhold(PyObject *o);
/* A Partition's handle (NULL with an exception: not one, or closed). */
gkv_part *gkvpy_part_get(PyObject *o);
/* Counts a Loader borrowing the handle (+1) or done with it (-1): close()
 * refuses while one does. */
void gkvpy_client_use(PyObject *o, int delta);
void gkvpy_part_use(PyObject *o, int delta);
extern PyTypeObject gkvpy_loader_type, gkvpy_batchmem_type;
int gkvpy_loader_ready(PyObject *m);

int gkvpy_store_ready(PyObject *m);
int gkvpy_client_ready(PyObject *m);
int gkvpy_server_ready(PyObject *m);
int gkvpy_part_ready(PyObject *m);

/* The CUDA device of the memory 'owner' (an Array's) keeps, -1 for CPU
 * memory (any other owner). For a GPU batch no longer current (the loader
 * moved on, its memory is reused) -1 with *stale set. (loader.c) */
int gkvpy_owner_cuda(PyObject *owner, int *stale);
/* Marks the GPU loader whose batch memory 'owner' is (a _GpuBatchMem)
 * busy (delta +1) or done (-1) while a copy reads that memory without the
 * interpreter lock: its next() and close() refuse meanwhile (GKV_EBUSY),
 * as for a call of another thread. Nothing for other owners. */
void gkvpy_owner_hold(PyObject *owner, int delta);

/* ---- nnshim.c ---- */
/* Loads nanomsg (module init): 0, or -1 with ImportError naming what is
 * missing. */
int gkvpy_nn_load(void);
/* Before any call that may reach nanomsg (connect, a server): in a child
 * after fork(), loads the child's own copy of the library first. 0, or -1
 * with NotSupportedError saying why. Any thread; idempotent. */
int gkvpy_nn_ready(void);
/* _gkv._nn_loaded_by(): the process that loaded the nanomsg in use, 0
 * while a forked child has not loaded its own yet (for the tests). */
PyObject *gkvpy_nn_loaded_by(PyObject *self, PyObject *unused);

#endif
