/* gkv_err.h - the one error space of gkv, generated from one list.
 *
 * Every gkv call that can fail returns a gkv_err: GKV_OK (0) or a negative
 * code below. gkv_strerror() gives the human text, gkv_err_name() the
 * symbol ("GKV_ESHAPE") for logs and scripts. Both return constant strings
 * that live forever; an unknown code gives "unknown error" / "GKV_E?".
 * Errors from LMDB, the C library and (later) nanomsg are translated once,
 * at the boundary, into this space; they are never mixed with errno.
 */
#ifndef GKV_ERR_H
#define GKV_ERR_H

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define GKV_API __attribute__((visibility("default")))
#else
#define GKV_API
#endif

#define GKV_ERRORS(X)                                                        \
    X(OK,        0,   "success")                                             \
    X(ENOTFOUND, -1,  "no such tensor, key or row")                          \
    X(ESHAPE,    -2,  "shape or dtype does not match the tensor")            \
    X(EMAPFULL,  -3,  "store is full and could not grow (disk full?)")       \
    X(EPROTO,    -4,  "malformed or oversized message from peer")            \
    X(ENOMEM,    -5,  "out of memory")                                       \
    X(EIO,       -6,  "storage or network I/O failed")                       \
    X(ENOENT,    -7,  "no store at that path")                               \
    X(EVERSION,  -8,  "store was written by an incompatible version")        \
    X(EINVAL,    -9,  "invalid argument")                                    \
    X(ERANGE,    -10, "ID outside the tensor's range")                       \
    X(EEXIST,    -11, "a tensor of that name already exists")                \
    X(ERDONLY,   -12, "store is open read-only")                             \
    X(ECORRUPT,  -13, "stored data is corrupt or inconsistent")             \
    X(EFORMAT,   -14, "input file is malformed or of an unsupported kind")   \
    X(EHANDLER,  -15, "unknown or failed push handler")                      \
    X(EBUSY,     -16, "resource busy")                                       \
    X(ETIMEDOUT, -17, "operation timed out")                                 \
    X(EINTR,     -18, "interrupted")                                         \
    X(EPERM,     -19, "permission denied")                                   \
    X(ENOTSUP,   -20, "not supported")

typedef enum gkv_err {
#define GKV_X_ENUM(name, val, text) GKV_##name = val,
    GKV_ERRORS(GKV_X_ENUM)
#undef GKV_X_ENUM
} gkv_err;

/* Human text for 'e'; constant, never NULL. Thread-safe. */
GKV_API const char *gkv_strerror(int e);
/* Symbolic name for 'e' ("GKV_ESHAPE"); constant, never NULL. Thread-safe. */
GKV_API const char *gkv_err_name(int e);

/* The detail of the calling thread's last failed gkv call ("tensor 'feat':
 * row width 64, expected 128"), or "" when that call succeeded. Owned by
 * the library and valid until the thread's next gkv call: copy it to keep
 * it. Never NULL. Thread-safe: each thread has its own. The layers'
 * getters (gkv_store_errmsg() ...) are aliases of it; gkv.h lists them. */
GKV_API const char *gkv_errmsg(void);

#ifdef __cplusplus
}
#endif
#endif /* GKV_ERR_H */
