/* gkv_kv.h - the embedded tensor store.
 *
 * A store is one directory holding one LMDB environment. It holds named
 * tensors: 2-D (and up to 5-D) arrays whose first axis is a global row ID in
 * [lo, hi) and whose trailing "row shape" has up to 4 dims. Rows live in
 * fixed-size chunks; reads are zero-copy from the memory map.
 *
 * Concurrency: a gkv_store may be shared by all threads of a process, and
 * many processes may open the same directory; one process opens a
 * directory once (LMDB's locks are per process: a second handle would
 * break the first's snapshots), so a second open while the first is open
 * is GKV_EBUSY. A handle is its opening process's: after fork() the
 * child opens the store itself (calls on the inherited handle fail with
 * GKV_EINVAL; closing it there only frees memory, and leaves the
 * inherited descriptors of the store's files open in the child: a child
 * that execs loses them, as they are close-on-exec). Readers never block
 * on writers, with one exception: while a write grows the map (each time
 * the store doubles) and waits, up to 10 s, for read snapshots that other
 * threads of this process hold (gkv_txn_begin), other calls of this
 * process wait too and may fail GKV_EBUSY ("map resize in progress"); the
 * write fails GKV_EMAPFULL if the snapshots stay. Keep snapshots short.
 * Writers
 * (create, push, delete, rename, import) are serialised by LMDB's write lock.
 * A write transaction holds the pages it changes in RAM until its commit:
 * the chunks it touches, whole (a push of IDs spread over a large tensor
 * copies a chunk per ID), so write a large tensor in slices.
 * Every call that changes the store is one transaction: it has all its
 * effect or none, also after kill -9 at any moment.
 *
 * Errors: every call returns GKV_OK or a gkv_err. On error the store holds
 * exactly what it held before the call, and gkv_store_errmsg() gives the
 * detail for the calling thread ("tensor 'feat': row width 64, expected 128").
 * Handles and output pointers must not be NULL unless a call says they may
 * be (names, IDs and row buffers are checked: GKV_EINVAL).
 */
#ifndef GKV_KV_H
#define GKV_KV_H

#include <stddef.h>
#include <stdint.h>
#include "gkv_err.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GKV_VERSION_MAJOR 0
#define GKV_VERSION_MINOR 1
#define GKV_VERSION_PATCH 0
#define GKV_VERSION_STRING "0.1.0"

#define GKV_NAME_MAX  255   /* bytes in a tensor name, excluding the NUL */
#define GKV_MAX_DIMS  4     /* dims of a row (the trailing shape) */

typedef struct gkv_store gkv_store;  /* opaque; one per open directory */
typedef struct gkv_txn   gkv_txn;    /* opaque; a read snapshot */

/* ---- dtypes ---------------------------------------------------------- */

typedef enum gkv_dtype {
    GKV_F32 = 1, GKV_F16 = 2, GKV_BF16 = 3, GKV_F64 = 4,
    GKV_I8 = 5,  GKV_U8 = 6,  GKV_I32 = 7,  GKV_I64 = 8
} gkv_dtype;

/* Bytes per element of 'dt'; 0 for an unknown dtype. */
GKV_API size_t      gkv_dtype_size(gkv_dtype dt);
/* "f32", "bf16", ...; "?" for an unknown dtype. Constant string. */
GKV_API const char *gkv_dtype_name(gkv_dtype dt);
/* Parses "f32", "float32", "int64", ...; GKV_EINVAL if unknown. */
GKV_API gkv_err     gkv_dtype_parse(const char *s, gkv_dtype *out);

/* Half-precision helpers (round to nearest even), used by the store for
 * initializers and optimizers; exported for tools and tests. */
GKV_API float    gkv_f16_to_f32(uint16_t h);
GKV_API uint16_t gkv_f32_to_f16(float f);
GKV_API float    gkv_bf16_to_f32(uint16_t h);
GKV_API uint16_t gkv_f32_to_bf16(float f);
/* The index of the first of the n elements of dtype dt at 'rows' (any
 * alignment) that is a NaN or an infinity, *what (may be NULL) saying
 * which ("NaN", "+inf", "-inf": constant strings); SIZE_MAX when every one
 * is finite, and always for an integer dtype. What a push through add or
 * an optimizer is checked with (gkv_tensor_push); about a memory read's
 * cost. */
GKV_API size_t   gkv_dtype_nonfinite(gkv_dtype dt, const void *rows, size_t n,
                                     const char **what);

/* ---- the store ------------------------------------------------------- */

#define GKV_CREATE  0x01u  /* create the directory and store if missing */
#define GKV_RDONLY  0x02u  /* no writes; any number of processes may share */
#define GKV_NOSYNC  0x04u  /* skip fsync at commit: a process crash (kill -9)
                            * still loses nothing committed, an OS crash or
                            * power loss may lose the last commits */
#define GKV_SHARE_GROUP 0x08u /* with GKV_CREATE: a store this open makes may
                            * be read by the owner's group (directory 0750,
                            * data.mdb 0640 less the umask, lock.mdb 0660
                            * whatever the umask: LMDB readers record
                            * themselves there). Without it a new store is
                            * private: directory 0700, files 0600 */
#define GKV_NOCHECK 0x10u  /* skip the structure check of the open: every
                            * page of every B-tree and the free list are
                            * read (pread) and checked before LMDB follows
                            * a pointer in them, and a damaged store is
                            * refused with GKV_ECORRUPT. It reads the tree
                            * pages and one page per stored chunk. (The two
                            * header pages are checked still: LMDB divides
                            * by their page size; and a data.mdb that ends
                            * before its last page is walked still, as a
                            * sound one may: see doc/FORMAT.md.) */
#define GKV_GUARD   0x20u  /* guard the map: when data.mdb is overwritten
                            * or cut short under this handle (a stray dd,
                            * another program writing it), a pull, read,
                            * write (push, create, ...) or prefault that
                            * meets a changed page fails with GKV_ECORRUPT
                            * ("store 'S' is damaged: ...") instead of
                            * killing the process by SIGSEGV, SIGBUS or
                            * LMDB's abort(), and the handle refuses writes
                            * from then on, until the store is repaired and
                            * reopened. For it, the first such open
                            * installs a SIGSEGV and a SIGBUS handler for
                            * the whole process, which catches, while a
                            * guarded call runs on the faulting thread,
                            * faults in the store's map or in liblmdb's
                            * code; any other fault goes on to the handler
                            * that was there, or kills the process as
                            * before. It also sets LMDB's assertion
                            * callback. Costs two sigsetjmp (no system
                            * call) per call. A transaction that begins
                            * after data.mdb changed other than by commits
                            * (a read: its mtime; a write: an inotify
                            * watch, one descriptor per handle) first
                            * checks the structure of its snapshot, as the
                            * open does; newer commits (this or another
                            * process's) cost a read of the two header
                            * pages, and a read that begins inside another
                            * process's commit waits for its header page
                            * (up to 20 ms). A state found damaged fails
                            * every read that begins on it, at once. A
                            * fault inside a write transaction leaves it
                            * unended and this process holding the store's
                            * writer lock until it exits
                            * (gkv_store_writer_held). A SIGSEGV/SIGBUS
                            * handler installed later must chain to the
                            * one it displaced or re-raise (as Python's
                            * faulthandler does); each guarded open puts
                            * the guard's back in front of it. Needs
                            * /proc/self/maps. Memory returned by
                            * gkv_row_view is read outside any guard.
                            * gkv-server and kvctl set it */

typedef struct gkv_open_opts {
    uint64_t map_size;    /* initial map size in bytes; 0 = 1 GiB (address
                           * space only: the file grows as pages are used).
                           * The map grows by itself while the disk has room. */
    unsigned max_readers; /* concurrent read snapshots; 0 = 512 */
} gkv_open_opts;

/* Opens the store in directory 'path'. With GKV_CREATE the directory and
 * the store are created if missing. 'opts' may be NULL. On GKV_OK, *out is
 * yours until gkv_store_close(); on any error *out is NULL and nothing needs
 * freeing. Thread-safe: yes.
 * Errors: GKV_ENOENT (no store there and no GKV_CREATE), GKV_EVERSION (a
 * newer on-disk format), GKV_EBUSY (this process has the directory open
 * already, by whatever path; share that handle), GKV_EMAPFULL (no room on
 * the disk), GKV_EINVAL (an empty path, unknown flags, GKV_CREATE with
 * GKV_RDONLY), GKV_ECORRUPT (a damaged data.mdb, or one cut short: the
 * message names the first bad page), GKV_EPERM, GKV_EIO, GKV_ENOMEM.
 * Unless GKV_NOCHECK, the structure of the store's file is checked first
 * (GKV_NOCHECK above). opts->max_readers takes
 * effect when the store's lock file is made (its first open).
 * Without GKV_GUARD, bytes of data.mdb overwritten while the handle is open
 * can kill the process at the next call that reads them (LMDB trusts its
 * pages); with it, such a call fails with GKV_ECORRUPT and the handle
 * refuses writes until the store is reopened (GKV_GUARD above). A file cut
 * short while open fails calls either way. */
GKV_API gkv_err gkv_store_open(gkv_store **out, const char *path,
                               unsigned flags, const gkv_open_opts *opts);

/* Closes the store. Every gkv_txn of it must have ended. NULL is fine. */
GKV_API void    gkv_store_close(gkv_store *s);

/* Flushes committed data to disk (useful with GKV_NOSYNC). */
GKV_API gkv_err gkv_store_sync(gkv_store *s);

/* Touches every page of the map so later reads do not pay first-touch page
 * faults (a fresh map is 3-9x slower on first touch). Servers call it at
 * start. */
GKV_API gkv_err gkv_store_prefault(gkv_store *s);

/* gkv_errmsg() when this thread's last gkv call was on 's' (NULL: a
 * failed gkv_store_open()), else "". Valid until the thread's next gkv
 * call. */
GKV_API const char *gkv_store_errmsg(const gkv_store *s);

/* The store's directory, as given to gkv_store_open(). Valid until close. */
GKV_API const char *gkv_store_path(const gkv_store *s);

/* Whether this process holds the store's writer lock until it exits: 1
 * once a handle opened with GKV_GUARD caught a fault inside one of its
 * write transactions (a push, create, delete, flush that met a page
 * changed under it). That transaction is left unended (aborting it would
 * free memory LMDB linked from the stack the fault jumped over), so its
 * writer lock stays taken: writers of every other process wait until this
 * one exits (LMDB's lock is a robust mutex, which then passes on), this
 * handle refuses writes (GKV_ECORRUPT), reads go on as GKV_GUARD says,
 * and after gkv_store_close a reopen in this process fails with
 * GKV_ECORRUPT. A server should answer, then exit (gkv-server does).
 * 0 otherwise, and for NULL. Thread-safe: yes. */
GKV_API int gkv_store_writer_held(const gkv_store *s);

typedef struct gkv_store_stat {
    uint32_t format;       /* on-disk format version */
    uint64_t map_size;     /* bytes the map may use now */
    uint64_t used_bytes;   /* bytes of pages in use (last page number x page size) */
    uint64_t page_size;
    uint64_t ntensors;     /* user tensors, not counting optimizer state */
    uint64_t nchunks;      /* all chunks of all tensors */
    uint64_t data_bytes;   /* (hi - lo) x row bytes, summed over all tensors
                            * and their state; UINT64_MAX when the true sum
                            * is that or more (ranges near 2^64) */
    unsigned readers;      /* reader slots used so far (LMDB's count: a
                            * slot freed at a snapshot's end still counts
                            * until reused) */
    unsigned max_readers;
    uint64_t free_bytes;   /* of used_bytes, pages on LMDB's free list
                            * (deleted tensors, old copies): later writes
                            * reuse them, once no reader older than their
                            * release remains (on a full disk a write
                            * that fails commits once more, which makes
                            * the last commit's freed pages usable, and
                            * tries again); the file does not shrink */
} gkv_store_stat;

/* Fills *st. Thread-safe: yes. */
GKV_API gkv_err gkv_store_stat_get(gkv_store *s, gkv_store_stat *st);

/* ---- read snapshots -------------------------------------------------- */

/* Begins a read snapshot: every read through it sees the store as of this
 * moment, and borrowed row pointers stay valid until gkv_txn_end(). A txn is
 * used by one thread at a time (any thread). Keep it short: an open snapshot
 * pins old pages, and the map cannot grow while one is open in this process.
 * On error *out is NULL. */
GKV_API gkv_err gkv_txn_begin(gkv_store *s, gkv_txn **out);
/* Ends the snapshot; borrowed pointers die with it. NULL is fine. */
GKV_API void    gkv_txn_end(gkv_txn *tx);

/* ---- tensors --------------------------------------------------------- */

typedef enum gkv_init {
    GKV_INIT_ZEROS = 0,
    GKV_INIT_CONST,     /* every element = a */
    GKV_INIT_UNIFORM,   /* uniform in [a, b), b never reached in the
                         * tensor's dtype */
    GKV_INIT_NORMAL     /* normal, mean a, standard deviation b */
} gkv_init;

/* What gkv_tensor_create() needs. Zero-initialise it, then set the fields.
 * The initializer draws element (row, col) from a counter-based generator
 * keyed by (seed, global row ID, col): the same spec gives the same values
 * whatever the chunk size or partitioning. Integer dtypes round toward 0
 * (const, normal) or down (uniform, so that [a, b) holds). */
typedef struct gkv_tensor_spec {
    gkv_dtype dtype;
    unsigned  ndim;                  /* 0..GKV_MAX_DIMS; 0 = one scalar per row */
    uint64_t  shape[GKV_MAX_DIMS];   /* row shape; every used dim >= 1 */
    uint64_t  lo, hi;                /* global ID range [lo, hi), hi > lo */
    uint32_t  chunk_rows;            /* rows per chunk; 0 = choose (see below) */
    unsigned  flags;                 /* GKV_TENSOR_* */
    gkv_init  init;
    double    a, b;                  /* initializer parameters */
    uint64_t  seed;
} gkv_tensor_spec;

/* Chunking: a pull costs one lookup per distinct chunk touched, and a push
 * rewrites every chunk it touches (LMDB never writes in place). By default a
 * chunk holds about 256 KiB of rows (fast pulls); GKV_TENSOR_HOT asks for
 * chunks that fit one 4 KiB page, for embeddings pushed every step. */
#define GKV_TENSOR_HOT  0x01u

/* What gkv_tensor_info() tells. */
typedef struct gkv_tensor_desc {
    char      name[GKV_NAME_MAX + 1];
    gkv_dtype dtype;
    unsigned  ndim;
    uint64_t  shape[GKV_MAX_DIMS];
    uint64_t  lo, hi;
    uint64_t  row_elems;     /* product of the row shape (1 when ndim = 0) */
    size_t    row_bytes;     /* bytes per row, row_elems x dtype size */
    uint32_t  chunk_rows;
    uint64_t  nchunks;
    unsigned  flags;         /* GKV_TENSOR_* */
    uint32_t  id;            /* internal tensor id; never reused */
    int       is_state;      /* 1 for an optimizer-state companion */
} gkv_tensor_desc;

/* Names: 1..GKV_NAME_MAX bytes of printable ASCII without spaces or '#'
 * ('#' marks optimizer-state companions, "feat#adam_m": they are read like
 * tensors and written only as "optimizer state" below says). Slashes are
 * plain characters: "node/paper/feat". */

/* Creates tensor 'name' and writes all its rows with the initializer, in
 * one transaction (RAM about the tensor's bytes until it commits; a range
 * whose rows the disk cannot hold is GKV_EMAPFULL at once; GKV_INIT_ZEROS
 * stores no rows). Integer initializer values round and clamp to the
 * dtype (i8 const 1000 stores 127).
 * Errors: GKV_EEXIST, GKV_EINVAL (bad name or spec, with the reason in
 * gkv_store_errmsg), GKV_EBUSY (see write-back mode), GKV_ERDONLY,
 * GKV_EMAPFULL, GKV_ENOMEM, GKV_EIO. */
GKV_API gkv_err gkv_tensor_create(gkv_store *s, const char *name,
                                  const gkv_tensor_spec *spec);
/* gkv_tensor_create(), or, when tensor 'name' exists, nothing; either way
 * *out describes, from the same transaction, the tensor that then has the
 * name: the one this call made (*created 1) or the one already there
 * (*created 0; compare it with spec). So *out describes what this call did
 * whatever creates and deletes of the name race with it, as a separate
 * gkv_tensor_info() cannot. Errors: as gkv_tensor_create() but GKV_EEXIST,
 * and GKV_EINVAL (out or created NULL). */
GKV_API gkv_err gkv_tensor_ensure(gkv_store *s, const char *name,
                                  const gkv_tensor_spec *spec,
                                  gkv_tensor_desc *out, int *created);

/* Describes tensor 'name'. 'tx' may be NULL (a fresh snapshot).
 * Errors: GKV_ENOTFOUND. */
GKV_API gkv_err gkv_tensor_info(gkv_store *s, gkv_txn *tx, const char *name,
                                gkv_tensor_desc *out);

/* Lists tensors in name order. On GKV_OK *out is an array of *n descs that
 * the caller frees with gkv_free(). State companions are listed only when
 * 'with_state' is non-zero. 'tx' may be NULL. */
GKV_API gkv_err gkv_tensor_list(gkv_store *s, gkv_txn *tx, int with_state,
                                gkv_tensor_desc **out, size_t *n);

/* Deletes tensor 'name', its optimizer state and all their rows; the pages
 * are reused by later writes. Errors: GKV_ENOTFOUND, GKV_EINVAL (a
 * companion's "T#..." name: delete T), GKV_EBUSY (in write-back mode on
 * this handle, or in another process), GKV_ERDONLY. */
GKV_API gkv_err gkv_tensor_delete(gkv_store *s, const char *name);

/* Renames 'from' to 'to' (and its optimizer state with it).
 * Errors: GKV_ENOTFOUND, GKV_EEXIST, GKV_EINVAL, GKV_EBUSY ('from' in
 * write-back mode on this handle; either in another process), GKV_ERDONLY. */
GKV_API gkv_err gkv_tensor_rename(gkv_store *s, const char *from,
                                  const char *to);

/* gkv_tensor_rename() that first deletes tensor 'to' and its optimizer
 * state when they exist, in the same transaction: a reader sees the old
 * 'to' or the new one, never neither, and a crash leaves one of the two
 * (what kvctl import --replace does with the tensor it wrote aside).
 * Errors: GKV_ENOTFOUND ('from'), GKV_EEXIST (from = to), GKV_EINVAL,
 * GKV_EBUSY (either in write-back mode on this handle), GKV_ERDONLY. */
GKV_API gkv_err gkv_tensor_replace(gkv_store *s, const char *from,
                                   const char *to);

/* ---- reads ----------------------------------------------------------- */

/* Gathers the rows with global IDs ids[0..n) into dst, row i at
 * dst + i * row_bytes. IDs in any order, duplicates allowed. 'dst_len' must
 * be exactly n * row_bytes. 'tx' may be NULL (a fresh snapshot). Reads are
 * grouped by chunk: one lookup per distinct chunk, then one memcpy per row
 * straight from the map. Thread-safe: yes (one txn per thread).
 * Errors: GKV_ENOTFOUND, GKV_ERANGE (names the first bad ID), GKV_ESHAPE
 * (dst_len), GKV_EINVAL (ids or dst NULL with n > 0), GKV_ENOMEM. On error
 * dst may be partly written. */
GKV_API gkv_err gkv_tensor_pull(gkv_store *s, gkv_txn *tx, const char *name,
                                const uint64_t *ids, size_t n,
                                void *dst, size_t dst_len);

/* Reads rows [a, b) into dst (dst_len = (b - a) x row_bytes). Errors as
 * gkv_tensor_pull; GKV_EINVAL for dst NULL with a < b. */
GKV_API gkv_err gkv_tensor_read(gkv_store *s, gkv_txn *tx, const char *name,
                                uint64_t a, uint64_t b,
                                void *dst, size_t dst_len);

/* Borrowed view of row 'id': *row points into the map and stays valid until
 * gkv_txn_end(tx); never write through it or free it. 'tx' is required.
 * With GKV_GUARD, the lookup is guarded, but the caller reads *row after
 * the call, outside any guard: when data.mdb is cut short or overwritten
 * under the handle meanwhile, that read can fault (SIGBUS, SIGSEGV) and
 * kill the process, or see changed bytes. Copy rows out with
 * gkv_tensor_pull instead where the store may be damaged while open.
 * A chunk of 2 KiB or more (the default chunking gives such chunks, but
 * a tensor's last chunk holds only the rows left and may be smaller)
 * starts 16-byte aligned, so its row 'id' is aligned to the largest power
 * of two up to 16 that divides row_bytes (12-byte rows: to 4; 64-byte
 * rows: to 16). Rows of a smaller chunk are only 2-byte aligned: copy
 * before casting to a type that needs more. */
GKV_API gkv_err gkv_row_view(gkv_txn *tx, const char *name, uint64_t id,
                             const void **row);

/* Has tensor 'name' changed since an earlier snapshot? For a cache of
 * rows derived from a tensor (a server keeps an edge feature converted to
 * sampling weights), asked chunk by chunk: chunk c holds rows
 * [lo + c * chunk_rows, lo + (c + 1) * chunk_rows) of gkv_tensor_info().
 *
 * 'mark' is the caller's memory, nc + 1 values kept beside its copy:
 * mark[0] the version of the snapshot the copy was read at, mark[1 + i]
 * the stamp of chunk c0 + i. Zero it before the first call. The call
 * compares the mark with snapshot 'tx' and brings it up to tx; *nchanged
 * (may be NULL) counts the chunks that changed, and changed[i] (nc bytes,
 * may be NULL) says which (1) and which not (0).
 *  - Versions number the store's commits, by any process: two snapshots
 *    of one version see the same store, and a later commit gives later
 *    snapshots a larger one. When tx's version is not above mark[0],
 *    nothing was committed between the mark's snapshot and tx (or tx is
 *    the older): nothing is read, the mark stays, and no chunk changed.
 *  - Otherwise mark[0] becomes tx's version and each chunk's stamp is
 *    read (one lookup a chunk, no rows): a 64-bit checksum of the chunk
 *    as stored, with the tensor's id in it, never 0; 0 for a chunk never
 *    written (its rows are the initializer's zeros). A chunk changed when
 *    its stamp differs from the mark's, or always on a first call
 *    (mark[0] 0). Two different contents share a stamp with probability
 *    2^-64.
 *  - With nc = 0 nothing is read ('name' may be NULL): the call only says
 *    whether something was committed since mark[0] (*nchanged 1: the
 *    tensor may have changed; 0: it has not) and brings mark[0] up to tx.
 *    Ask this on every use of the cache; it costs one comparison.
 * Stamps say nothing of the tensor's shape: compare gkv_tensor_info()'s
 * id, range, dtype and chunk_rows to see a tensor replaced or recreated
 * under the same name. A tensor in write-back mode on this handle changes
 * in RAM first: snapshots, and so its stamps, see its pushes once flushed.
 * Thread-safe: as 'tx' (one thread at a time); the mark is the caller's.
 * Errors: GKV_EINVAL (tx or mark NULL, or name NULL with nc > 0),
 * GKV_ENOTFOUND (no tensor 'name' in tx), GKV_ERANGE (chunks past the
 * tensor's last), GKV_ECORRUPT, GKV_EIO. After an error the mark may be
 * half updated: zero it, and drop what the copy held, before the next
 * call. */
GKV_API gkv_err gkv_tensor_changed(gkv_txn *tx, const char *name,
                                   uint64_t c0, size_t nc, uint64_t *mark,
                                   uint8_t *changed, size_t *nchanged);

/* ---- writes ---------------------------------------------------------- */

/* A push handler updates one stored row from one incoming row. 'row' is the
 * stored row (writable, desc->row_bytes), 'in' the incoming one. It runs
 * inside the write transaction, once per incoming row, in request order for
 * one ID; it must not call into the same store. A non-GKV_OK return aborts
 * the whole push, which then has no effect. When the map fills mid-push, the
 * map grows and the transaction is retried from the start, and when a push
 * of very many chunks finds LMDB's list of pages to write full, a chunk's
 * rows may be applied again: the handler then sees the same rows again
 * (their effect on the store still happens once, but side effects on 'ctx'
 * repeat, so keep them idempotent). */
typedef gkv_err (*gkv_push_fn)(void *ctx, const gkv_tensor_desc *desc,
                               uint64_t id, void *row, const void *in);

/* Registers handler 'name' (1..63 chars, not a built-in name) on this
 * store handle, for pushes by this process. Registering a name again
 * replaces it. Errors: GKV_EINVAL, GKV_ENOMEM. */
GKV_API gkv_err gkv_handler_register(gkv_store *s, const char *name,
                                     gkv_push_fn fn, void *ctx);

/* How a push combines incoming rows with stored ones.
 *   "assign"  row = in; duplicate IDs in one push: the last one wins.
 *   "add"     row += in; duplicates are summed. On integer dtypes the
 *             sum is exact and saturates at the dtype's limits (INT64_MAX
 *             + 1 stays INT64_MAX), as every integer store clamps; the
 *             same in write-back mode.
 *   "sgd"     row -= lr * g
 *   "adagrad" s += g*g; row -= lr * g / (sqrt(s) + eps)
 *   "adam"    t += 1; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g*g;
 *             row -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)
 * For the optimizers, 'in' is the gradient g. The copies of an ID in one
 * push have their gradients averaged and the row takes one step, as DGL's
 * sparse optimizers do (dgl.distributed.optim and dgl.optim: unique IDs,
 * index_add_, divide by the count); with flag GKV_PUSH_DUPS_SUM they are
 * summed instead (a coalesced PyTorch sparse gradient, as
 * torch.optim.SparseAdam takes). Each push is one step: two pushes of an ID
 * (two trainers each pushing their gradient of it) take two steps, where
 * DGL's distributed optimizers exchange the trainers' gradients and step
 * once on their mean. Adagrad's eps is outside the square root, as in
 * dgl.distributed.optim.SparseAdagrad (dgl.optim.SparseAdagrad divides by
 * sqrt(s + eps)). Optimizers need a
 * floating dtype (f32, f64, f16, bf16; math in f32 or f64). Their state lives
 * in companion tensors NAME#adagrad_s, NAME#adam_m, NAME#adam_v and
 * NAME#adam_t (i64, the per-row step count; the others are f32, or f64 for
 * an f64 tensor), created on first use and updated in
 * the same transaction as the rows. Defaults when 0: lr 0.01, eps 1e-10
 * (adagrad) or 1e-8 (adam), beta1 0.9, beta2 0.999 (so beta1 0 cannot be
 * asked for: give 1e-300). Unknown flags: GKV_EINVAL. */
#define GKV_PUSH_DUPS_SUM 0x1u   /* optimizers: sum the copies' gradients */
typedef struct gkv_push_args {
    const char *handler;  /* NULL = "assign" */
    double lr, eps, beta1, beta2;
    unsigned flags;       /* GKV_PUSH_*; 0: DGL's behaviour */
} gkv_push_args;

/* Scatters rows[i] (row_bytes each) to global IDs ids[i] with the handler.
 * 'rows_len' must be exactly n * row_bytes. 'args' may be NULL (assign).
 * IDs are checked before anything is written: one bad ID fails the call
 * and nothing changes. So are the values pushed through add, sgd, adagrad
 * or adam to a float tensor: a NaN or an infinity would stay in the row
 * and the optimizer state for good, so it fails the call (GKV_EINVAL
 * naming the row ID and column) and nothing changes; assign stores any
 * value. The results of add and the optimizers are checked too, in the
 * dtype they are stored in (the tensor's; the state's f32, or f64 for an
 * f64 tensor): finite values whose result is not finite there (adagrad's
 * sum of squares of a gradient of 3e38 in f32, 60000 + 60000 in f16, lr
 * 1e30 times a gradient of 1e30 in an f32 row; or NaN) fail the whole
 * call the same way, GKV_EINVAL naming the row ID, the column, where (the
 * row, or its state companion by name) and why, and nothing changes:
 * neither the rows nor the state, in write-back mode neither (there a
 * refused first optimizer push of a tensor leaves its state companion
 * created, all zeros: what a missing one reads as). A result that is the
 * largest finite value is applied (f16 and bf16 results are rounded
 * through f32, so one within half an f32 ulp above the f16 maximum may be
 * refused); only a
 * value the push turns from finite to not finite counts (a row already
 * holding an assigned NaN still takes add and optimizer pushes). (The
 * gradients of an ID's copies are summed before they are averaged: copies
 * of an f64 gradient whose sum passes f64 are refused.) A registered
 * handler's results are its own. Errors: GKV_ENOTFOUND, GKV_ERANGE,
 * GKV_ESHAPE, GKV_EHANDLER, GKV_EINVAL (optimizer on an integer dtype, a
 * NaN or an infinity pushed or resulting), GKV_ERDONLY,
 * GKV_EBUSY (in write-back mode in another process), GKV_EMAPFULL,
 * GKV_ENOMEM, GKV_EIO. */
GKV_API gkv_err gkv_tensor_push(gkv_store *s, const char *name,
                                const uint64_t *ids, size_t n,
                                const void *rows, size_t rows_len,
                                const gkv_push_args *args);

/* Overwrites rows [a, b) with 'rows' ((b - a) x row_bytes) in one
 * transaction: the bulk path of import (RAM about the bytes written until
 * the commit: write a large range in slices). Errors: GKV_ENOTFOUND,
 * GKV_ERANGE ([a, b) outside the tensor's range), GKV_ESHAPE (rows_len),
 * GKV_EINVAL (NULL rows), GKV_ERDONLY, GKV_EBUSY (write-back in another
 * process), GKV_EMAPFULL, GKV_ENOMEM, GKV_EIO. */
GKV_API gkv_err gkv_tensor_write(gkv_store *s, const char *name,
                                 uint64_t a, uint64_t b,
                                 const void *rows, size_t rows_len);

/* ---- optimizer state: checkpoint, restore, reset ----------------------
 *
 * A tensor's optimizer state is its companions (see gkv_push_args): each
 * has the tensor's ID range and chunking; NAME#adagrad_s, NAME#adam_m and
 * NAME#adam_v have its row shape in f32 (f64 for an f64 tensor), and
 * NAME#adam_t one i64 per row (steps taken by that row). A missing
 * companion is the same as one of zeros: a fresh optimizer.
 *
 * Checkpoint (DGL's SparseAdam.save): read them like any tensor
 * (gkv_tensor_list with_state, gkv_tensor_info, gkv_tensor_read/pull),
 * together with the tensor, through one gkv_txn for a consistent set.
 *
 * Restore (SparseAdam.load): gkv_tensor_write() of rows [a, b), or
 * gkv_tensor_push() with handler assign (NULL args) by ID, to the
 * companion's name. Only those two write one, and only when:
 *   - the name is T#adagrad_s, T#adam_m, T#adam_v or T#adam_t (else
 *     GKV_EINVAL), and tensor T exists (else GKV_ENOTFOUND) with a
 *     floating dtype (else GKV_EINVAL);
 *   - lengths and IDs fit the companion's rows as above (GKV_ESHAPE,
 *     GKV_ERANGE), every step count is 0 to INT64_MAX - 1, every
 *     adagrad_s and adam_v value finite and >= 0, every adam_m value
 *     finite (GKV_EINVAL, naming the row's ID and the value);
 *   - a companion already stored has those rows (GKV_ECORRUPT otherwise:
 *     a leftover or damage, which gkv_opt_reset drops).
 * Step counts do not saturate: INT64_MAX is refused, and an adam push to
 * a row whose count is INT64_MAX - 1 is refused too (GKV_EINVAL, nothing
 * changes), so t + 1 never overflows and every count a checkpoint holds
 * restores. An optimizer push meeting a stored companion without the
 * tensor's rows fails the same way as a restore (GKV_ECORRUPT).
 * A missing companion is created zero-filled by the write, in the same
 * transaction. Each write is one transaction: all of it or none. In
 * write-back mode (T in write-back on this handle) it changes the RAM copy
 * of the companion, which the flusher writes with T's rows, at one push
 * boundary. Any other handler, delete, rename, create and write-back start
 * of a '#' name stay GKV_EINVAL. Pushes with an optimizer then go on from
 * the restored state, bit for bit as if never interrupted. */

/* Describes optimizer-state companion 'name' ("T#adam_m") as 'tx' (NULL: a
 * fresh snapshot) sees it: as stored (*exists 1), or, when T has none yet
 * (*exists 0), as the first optimizer push or restore will create it, id 0
 * and nchunks those it will have (its state is all zeros meanwhile, but a
 * pull of it is GKV_ENOTFOUND until it exists: a saver writes zeros for
 * *exists 0, as kvctl export does). For tools
 * that save or restore state without knowing whether T was ever pushed
 * with that optimizer. Errors: GKV_EINVAL (not a companion name; T not
 * floating), GKV_ENOTFOUND (no tensor T). */
GKV_API gkv_err gkv_opt_state_info(gkv_store *s, gkv_txn *tx, const char *name,
                                   gkv_tensor_desc *out, int *exists);

/* Splits optimizer-state companion name 'name' ("T#adam_m") into its
 * tensor's name T, written to base (GKV_NAME_MAX + 1 bytes), and
 * *is_step: 1 for the per-row step count T#adam_t (i64, one a row), 0 for
 * the companions with T's row shape (f32, or f64 for an f64 T). Needs no
 * store, so a client can describe a companion from its tensor. Thread-safe.
 * Errors: GKV_EINVAL for any other name (T empty or too long, or an
 * unknown suffix), with gkv_errmsg(). */
GKV_API gkv_err gkv_opt_state_split(const char *name, char *base, int *is_step);

/* Drops the optimizer state of tensor 'name': the companions of
 * 'optimizer' ("adagrad" or "adam"; NULL: both), in one transaction; the
 * next push with that optimizer starts fresh (adam at step 1). No state
 * to drop is GKV_OK. In write-back mode on this handle the RAM copies of
 * those companions are dropped too, and the same transaction writes every
 * pending change of this handle's write-back tensors (as a flush), so the
 * store goes from the state after one push to that state without the
 * optimizer's; pushes on this handle wait for it.
 * Errors: GKV_EINVAL (a '#' name, an unknown optimizer), GKV_ENOTFOUND,
 * GKV_ERDONLY, GKV_EMAPFULL, GKV_ENOMEM, GKV_EIO. */
GKV_API gkv_err gkv_opt_reset(gkv_store *s, const char *name,
                              const char *optimizer);

/* ---- write-back mode ------------------------------------------------- */

/* Write-back mode is for embeddings pushed every step, where a durable
 * transaction per push costs too much (LMDB rewrites every page a push
 * touches: a 512 B row costs a 4 KiB page at least). It is opt-in, per
 * tensor and per handle.
 *
 * gkv_writeback_start() copies tensor 'name' and its optimizer state into
 * RAM (it needs that much memory: a copy larger than the machine's
 * physical memory is refused with GKV_ENOMEM, also where the kernel would
 * overcommit). From then on, on this handle:
 *   - pushes and gkv_tensor_write() change the RAM copy (memory speed) and
 *     mark its chunks dirty;
 *   - pulls and range reads without a snapshot (tx NULL) read the RAM copy,
 *     so they see every push; reads through a gkv_txn see the store as
 *     last flushed;
 *   - a background thread writes the dirty chunks every 'interval_ms'
 *     (0 = 10 ms) in one transaction, as they were between two pushes, so
 *     the store always holds the state after some whole push; pushes do
 *     not wait for it to copy or write.
 * Loss window: a crash (kill -9) loses the pushes since the last flush that
 * committed: about interval_ms plus the time of one flush. With GKV_NOSYNC
 * an OS crash may also lose committed flushes, as for any write.
 * While the tensor is in write-back mode on a handle, other processes see
 * flushed data, and their writes of it (push, write, delete, rename,
 * gkv_opt_reset, its state) fail with GKV_EBUSY naming this process, as
 * the next flush would overwrite them; one process at a time may keep a
 * store's tensors in write-back (the store's writeback.lock, doc/FORMAT.md;
 * a writer that does not use gkv is not stopped). On this handle every call that changes
 * its rows goes to the RAM copy (push with any handler, write) or fails
 * and changes nothing: delete and rename (from or to its name) fail with
 * GKV_EBUSY, and so does create of its name once another handle deleted
 * it (the copy would stand for the new tensor on this handle until a
 * flush drops it; stop first). A push is checked before any optimizer
 * state is created, as a direct one. Its state companions change only
 * through optimizer pushes to it, restores (assign push or write of a
 * companion) and gkv_opt_reset(), all of which go to the RAM copy too;
 * other pushes, delete and rename of a '#' name fail with GKV_EINVAL, so
 * no direct write to one can be lost to a flush. If a writer that does not
 * check (not gkv, or an older gkv) deletes or replaces it anyway, the next
 * flush drops this handle's copy
 * (and the pushes not yet written) and writes the other tensors.
 * gkv_store_close() flushes (stop first to see errors).
 * The tensor and its state are copied through one read snapshot, so the
 * copy holds them as of one moment even while another process pushes to
 * (or replaces) the tensor.
 * Errors: GKV_ENOTFOUND, GKV_EEXIST (already on), GKV_ERDONLY, GKV_ENOMEM,
 * GKV_EBUSY (another process keeps tensors of this store in write-back),
 * GKV_ECORRUPT (a stored state companion without the tensor's rows; the
 * message names it, gkv_opt_reset drops it), GKV_EMAPFULL (the disk is
 * full: writeback.lock cannot list the tensor), GKV_EIO. */
GKV_API gkv_err gkv_writeback_start(gkv_store *s, const char *name,
                                    unsigned interval_ms);

/* Writes every pending change of this handle's write-back tensors now, in
 * one transaction, and syncs it (unless GKV_NOSYNC). When a flush fails (in
 * the background or here) the changes stay in RAM and the next one retries
 * them; this call is how to learn that writing works. GKV_ENOTFOUND: the
 * others were written, but a tensor was deleted or replaced by another
 * handle, and its copy dropped, by this flush or a background one since
 * the last call (the message names it). Reads of a state companion
 * ("t#adagrad_s") without a snapshot read its RAM copy too. */
GKV_API gkv_err gkv_writeback_flush(gkv_store *s);

/* Flushes 'name' and leaves write-back mode; its RAM copy is freed.
 * Errors: GKV_ENOTFOUND (not in write-back mode), and flush errors (then it
 * stays in write-back mode). */
GKV_API gkv_err gkv_writeback_stop(gkv_store *s, const char *name);

/* ---- integrity ------------------------------------------------------- */

typedef struct gkv_verify_report {
    uint64_t chunks_checked;
    uint64_t bytes_checked;
    uint64_t bad_chunks;
    char     first_bad[GKV_NAME_MAX + 1];  /* tensor of the first bad chunk */
    uint64_t first_bad_chunk;              /* its chunk index */
    uint64_t first_bad_row;                /* global ID of its first row */
    uint64_t orphan_keys;   /* data keys of no tensor: a tensor id without a
                             * catalog record, or not 12 bytes (verify of
                             * the whole store only) */
} gkv_verify_report;

/* First checks the structure of the store's file (data.mdb: every page of
 * every B-tree and of the free list, as gkv_store_open does unless
 * GKV_NOCHECK): when it is damaged, GKV_ECORRUPT with nothing counted in
 * *rep, the first bad page (and its tensor) named in gkv_store_errmsg(),
 * and the handle refuses writes until the store is reopened. Then
 * recomputes the XXH3 checksum of every chunk of tensor 'name' (NULL: all
 * tensors) and checks every chunk is present with the right size. With
 * 'name' NULL it also counts orphans: data keys that belong to no tensor.
 * Returns GKV_ECORRUPT when any chunk is bad or any key an orphan; the
 * first bad chunk is named in *rep and in gkv_store_errmsg(), the first
 * orphan in gkv_store_errmsg(). 'rep' may be NULL. */
GKV_API gkv_err gkv_store_verify(gkv_store *s, const char *name,
                                 gkv_verify_report *rep);

/* ---- memory ---------------------------------------------------------- */

/* Frees memory that a gkv call returned to the caller. NULL is fine. */
GKV_API void gkv_free(void *p);

#ifdef __cplusplus
}
#endif
#endif /* GKV_KV_H */
