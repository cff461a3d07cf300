/* gkv_npy.h - NumPy .npy files: header parsing, header writing, mapping.
 *
 * The .npy format (numpy/lib/format.py): the magic "\x93NUMPY", a major and
 * a minor version byte, the length of the header text (2 bytes little-endian
 * in version 1.0, 4 bytes in 2.0 and 3.0), then the header text: a Python
 * dict literal such as
 *
 *     {'descr': '<f4', 'fortran_order': False, 'shape': (1000, 128), }
 *
 * padded with spaces and a newline, and after it the raw elements.
 *
 * gkv reads what a tensor can hold and nothing else: versions 1.0, 2.0 and
 * 3.0; C order; little-endian ('<') or byte-order-free ('|') dtypes
 * <f4 <f2 <f8 |i1 |u1 |b1 <i4 <i8; 1 to GKV_NPY_MAX_DIMS dims, the first
 * being the rows. Anything else (Fortran order, big-endian, object or
 * structured arrays, other dtypes, 0-d arrays, more dims, a bad magic, a
 * header or data shorter than it says) is GKV_EFORMAT with a message that
 * names the problem. bf16 has no .npy dtype: it travels as raw bytes only.
 *
 * numpy's bool ('|b1', DGL's train/val/test masks) reads as GKV_U8 with
 * is_bool set: the bytes are stored as they are, 0 and 1. A byte other
 * than 0 or 1 is not a numpy bool; gkv_npy_map_open() refuses the file
 * (GKV_EFORMAT naming the row). gkv writes u8 tensors back as '|u1'.
 *
 * Messages go to a caller-provided buffer ('msg', 'msg_len'; msg may be
 * NULL) and to the calling thread's gkv_errmsg(), never to a shared one:
 * every function here is thread-safe.
 */
#ifndef GKV_NPY_H
#define GKV_NPY_H

#include <stddef.h>
#include <stdint.h>
#include "gkv_err.h"
#include "gkv_kv.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GKV_NPY_MAX_DIMS   5          /* rows + GKV_MAX_DIMS row dims */
#define GKV_NPY_HEADER_MAX 65536u     /* bytes of header text we accept */

typedef struct gkv_npy_header {
    gkv_dtype dtype;
    unsigned  ndim;                      /* 1..GKV_NPY_MAX_DIMS */
    uint64_t  shape[GKV_NPY_MAX_DIMS];   /* shape[0] is the row count */
    uint64_t  data_offset;               /* bytes from file start to the data */
    uint64_t  data_bytes;                /* product of shape x dtype size */
    unsigned  version;                   /* major format version: 1, 2 or 3 */
    int       is_bool;                   /* descr was '|b1': dtype is GKV_U8,
                                          * each byte must be 0 or 1 */
} gkv_npy_header;

/* 1 when buf (len bytes) starts with the .npy magic, else 0. */
GKV_API int gkv_npy_is_npy(const void *buf, size_t len);

/* The .npy descr of 'dt' ("<f4", "|u1", ...); NULL for a dtype .npy cannot
 * hold (bf16) or an unknown one. Constant string. */
GKV_API const char *gkv_npy_descr(gkv_dtype dt);

/* Parses a .npy header. 'buf' holds the first 'len' bytes of a file of
 * 'file_size' bytes; it must hold the whole header, which is there when
 * len >= min(file_size, 12 + GKV_NPY_HEADER_MAX). The data is checked to fit
 * in file_size (bytes past it are allowed and ignored, as numpy does).
 * On GKV_OK *out is filled; on error *out is zeroed and msg says why.
 * Errors: GKV_EFORMAT, GKV_EINVAL (NULL arguments). */
GKV_API gkv_err gkv_npy_parse(const void *buf, size_t len, uint64_t file_size,
                              gkv_npy_header *out, char *msg, size_t msg_len);

/* Reads and parses the header of the .npy file open on 'fd', from offset 0
 * (pread: the file offset is left alone). Errors: GKV_EFORMAT, GKV_EIO. */
GKV_API gkv_err gkv_npy_read_header_fd(int fd, gkv_npy_header *out,
                                       char *msg, size_t msg_len);

/* The same for the file at 'path'. Errors: GKV_EFORMAT, GKV_ENOENT (no such
 * file), GKV_EPERM, GKV_EIO. */
GKV_API gkv_err gkv_npy_read_header(const char *path, gkv_npy_header *out,
                                    char *msg, size_t msg_len);

/* Formats the header numpy's np.save would write for an array of 'dt' and
 * 'shape' (ndim 1..GKV_NPY_MAX_DIMS), byte for byte: version 1.0 (2.0 when
 * the text is too long for it), the keys in sorted order, the spare room
 * numpy leaves for growing shape[0], padded so the data starts at a
 * multiple of 64. Writes *len bytes into buf (cap bytes; 256 always
 * suffice). Errors: GKV_EINVAL (bf16, unknown dtype, bad ndim, buf too
 * small, byte count over 2^64). */
GKV_API gkv_err gkv_npy_header_format(gkv_dtype dt, unsigned ndim,
                                      const uint64_t *shape, void *buf,
                                      size_t cap, size_t *len,
                                      char *msg, size_t msg_len);

/* Writes that header to 'fd' at its current offset; *header_len (may be
 * NULL) gets its size. Errors: GKV_EINVAL (as above), GKV_EIO. */
GKV_API gkv_err gkv_npy_write_header(int fd, gkv_dtype dt, unsigned ndim,
                                     const uint64_t *shape, size_t *header_len,
                                     char *msg, size_t msg_len);

/* A file mapped read-only for import. 'data' points at hdr.data_bytes bytes
 * of elements, C order; it stays valid until gkv_npy_map_close(). It may be
 * unaligned for the dtype: copy before casting. The file must not shrink
 * while it is mapped (reading a page past its new end raises SIGBUS). */
typedef struct gkv_npy_map {
    gkv_npy_header hdr;
    const void    *data;
    void          *map_base;   /* private: what mmap returned, or NULL */
    size_t         map_len;    /* private */
} gkv_npy_map;

/* Maps the .npy file at 'path'. A bool ('|b1') file has every data byte
 * checked: one other than 0 or 1 is GKV_EFORMAT, the message naming the
 * row (a caller that reads the data itself after gkv_npy_read_header()
 * must check it the same way). On error *m needs no closing (closing it is
 * still fine). Errors: GKV_EFORMAT, GKV_ENOENT, GKV_EPERM, GKV_EIO. */
GKV_API gkv_err gkv_npy_map_open(gkv_npy_map *m, const char *path,
                                 char *msg, size_t msg_len);

/* Maps the headerless file at 'path' as rows of 'dt' with row shape
 * row_shape[0..row_ndim) (row_ndim 0..GKV_MAX_DIMS, 0 = one element per
 * row). m->hdr gets ndim row_ndim + 1, shape[0] = file size / row bytes and
 * data_offset 0. Errors: GKV_EFORMAT (the size is not a whole number of
 * rows, or 0), GKV_EINVAL (dtype or shape), GKV_ENOENT, GKV_EPERM, GKV_EIO. */
GKV_API gkv_err gkv_npy_map_raw(gkv_npy_map *m, const char *path, gkv_dtype dt,
                                unsigned row_ndim, const uint64_t *row_shape,
                                char *msg, size_t msg_len);

/* Unmaps; *m is zeroed. NULL and a zeroed map are fine. */
GKV_API void gkv_npy_map_close(gkv_npy_map *m);

#ifdef __cplusplus
}
#endif
#endif /* GKV_NPY_H */
