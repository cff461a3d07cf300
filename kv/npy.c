/* npy.c - NumPy .npy headers: parse, format, and map files for import.
 *
 * The header is untrusted input: its length is bounded before anything is
 * read, every token is checked against the end of the text, and sizes are
 * computed with overflow checks before the data is compared with the file. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "gkv_npy.h"
#include "kv/kv_int.h"

static const unsigned char MAGIC[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

/* Numpy pads so data starts on this boundary, and leaves room for shape[0]
 * to grow to this many digits (numpy/lib/format.py, ARRAY_ALIGN and
 * GROWTH_AXIS_MAX_DIGITS). */
#define ARRAY_ALIGN 64u
#define GROWTH_DIGITS 21u

static const struct {
    gkv_dtype dt;
    char kind;      /* numpy kind character */
    unsigned size;  /* bytes */
} npy_types[] = {
    {GKV_F32, 'f', 4}, {GKV_F16, 'f', 2}, {GKV_F64, 'f', 8},
    {GKV_I8, 'i', 1},  {GKV_U8, 'u', 1},  {GKV_I32, 'i', 4}, {GKV_I64, 'i', 8},
    /* numpy bool: one byte, 0 or 1, stored as u8 (gkv has no bool dtype) */
    {GKV_U8, 'b', 1},
};
#define NTYPES (sizeof npy_types / sizeof npy_types[0])

static gkv_err
fail(char *msg, size_t msg_len, gkv_err rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static gkv_err
fail(char *msg, size_t msg_len, gkv_err rc, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    gkv__vfail(NULL, rc, fmt, ap);   /* gkv_errmsg(), and a copy in msg */
    va_end(ap);
    if (msg != NULL && msg_len > 0)
        snprintf(msg, msg_len, "%s", gkv_errmsg());
    return rc;
}

int
gkv_npy_is_npy(const void *buf, size_t len)
{
    return buf != NULL && len >= sizeof MAGIC && memcmp(buf, MAGIC, sizeof MAGIC) == 0;
}

const char *
gkv_npy_descr(gkv_dtype dt)
{
    switch (dt) {
    case GKV_F32: return "<f4";
    case GKV_F16: return "<f2";
    case GKV_F64: return "<f8";
    case GKV_I8:  return "|i1";
    case GKV_U8:  return "|u1";
    case GKV_I32: return "<i4";
    case GKV_I64: return "<i8";
    default:      return NULL;
    }
}

/* ---- the header dict ------------------------------------------------------ */

/* A cursor over the header text, which is Python literal syntax. */
typedef struct lex {
    const char *p, *end;
} lex;

static void
skip_ws(lex *x)
{
    while (x->p < x->end && (*x->p == ' ' || *x->p == '\t' || *x->p == '\n' ||
                             *x->p == '\r'))
        x->p++;
}

static int
eat(lex *x, char c)
{
    skip_ws(x);
    if (x->p < x->end && *x->p == c) {
        x->p++;
        return 1;
    }
    return 0;
}

/* A quoted string ('...' or "..."), without escapes (no descr or key gkv
 * accepts has any), into out; 0 when there is none, or when it is longer
 * than cap - 1 bytes (no descr or key gkv accepts is: a cut one could read
 * as another, '<f4' from '<f4' and junk). */
static int
lex_string(lex *x, char *out, size_t cap)
{
    char q;
    size_t n = 0;

    skip_ws(x);
    if (x->p >= x->end || (*x->p != '\'' && *x->p != '"'))
        return 0;
    q = *x->p++;
    while (x->p < x->end && *x->p != q) {
        if (*x->p == '\\')
            return 0;
        if (n + 1 >= cap)
            return 0;
        out[n++] = *x->p++;
    }
    if (x->p >= x->end)
        return 0;
    x->p++;
    out[n] = '\0';
    return 1;
}

static int
lex_word(lex *x, const char *w)
{
    size_t n = strlen(w);

    skip_ws(x);
    if ((size_t)(x->end - x->p) >= n && memcmp(x->p, w, n) == 0) {
        x->p += n;
        return 1;
    }
    return 0;
}

/* A non-negative integer (Python 2 wrote a trailing 'L'). -1: none, -2:
 * over 2^64. */
static int
lex_uint(lex *x, uint64_t *v)
{
    uint64_t r = 0;
    int any = 0;

    skip_ws(x);
    while (x->p < x->end && *x->p >= '0' && *x->p <= '9') {
        unsigned d = (unsigned)(*x->p - '0');
        if (r > (UINT64_MAX - d) / 10)
            return -2;
        r = r * 10 + d;
        any = 1;
        x->p++;
    }
    if (!any)
        return -1;
    if (x->p < x->end && *x->p == 'L')
        x->p++;
    *v = r;
    return 0;
}

/* Maps a descr string to a dtype (*is_bool: it was numpy's bool), or says
 * what is wrong with it. */
static gkv_err
descr_parse(const char *d, gkv_dtype *out, int *is_bool, char *msg,
            size_t msg_len)
{
    char order = d[0], kind;
    unsigned size = 0;
    const char *s;

    if (order != '<' && order != '>' && order != '|' && order != '=') {
        order = '=';
        s = d;
    } else {
        s = d + 1;
    }
    kind = *s;
    if (kind == 'O')
        return fail(msg, msg_len, GKV_EFORMAT, "object arrays (dtype '%s') "
                    "are not supported: they hold Python objects, not numbers", d);
    if (kind == '\0')
        return fail(msg, msg_len, GKV_EFORMAT, "empty dtype '%s'", d);
    for (s++; *s >= '0' && *s <= '9' && size < 1000; s++)
        size = size * 10 + (unsigned)(*s - '0');
    for (size_t i = 0; i < NTYPES; i++) {
        if (npy_types[i].kind != kind || npy_types[i].size != size || *s != '\0')
            continue;
        /* one-byte types have no byte order, whatever the character says */
        if (order == '>' && size > 1)
            return fail(msg, msg_len, GKV_EFORMAT, "big-endian dtype '%s' is "
                        "not supported (convert it: a.astype('<%c%u'))", d,
                        kind, size);
        if (order == '|' && size > 1)
            return fail(msg, msg_len, GKV_EFORMAT, "dtype '%s' has no byte "
                        "order", d);
        *out = npy_types[i].dt;
        *is_bool = kind == 'b';
        return GKV_OK;
    }
    if (order == '>')
        return fail(msg, msg_len, GKV_EFORMAT, "big-endian dtype '%s' is not "
                    "supported (nor is its type)", d);
    return fail(msg, msg_len, GKV_EFORMAT, "unsupported dtype '%s' (supported: "
                "<f4 <f2 <f8 |i1 |u1 |b1 <i4 <i8)", d);
}

/* Parses the dict text [p, end) into h (dtype, ndim, shape). */
static gkv_err
dict_parse(const char *p, const char *end, gkv_npy_header *h,
           char *msg, size_t msg_len)
{
    lex x = {p, end};
    char key[32], descr[64];
    int have_descr = 0, have_order = 0, have_shape = 0, fortran = 0;
    gkv_err rc;

    if (!eat(&x, '{'))
        return fail(msg, msg_len, GKV_EFORMAT, "malformed header: it is not "
                    "a dict");
    while (!eat(&x, '}')) {
        if (!lex_string(&x, key, sizeof key))
            return fail(msg, msg_len, GKV_EFORMAT, "malformed header at byte "
                        "%td: expected a quoted key of at most %zu "
                        "characters", x.p - p, sizeof key - 1);
        if (!eat(&x, ':'))
            return fail(msg, msg_len, GKV_EFORMAT, "malformed header: no ':' "
                        "after key '%s'", key);
        if (strcmp(key, "descr") == 0) {
            skip_ws(&x);
            if (x.p < x.end && *x.p == '[')
                return fail(msg, msg_len, GKV_EFORMAT, "structured (record) "
                            "dtypes are not supported");
            if (!lex_string(&x, descr, sizeof descr))
                return fail(msg, msg_len, GKV_EFORMAT, "malformed header: "
                            "'descr' is not a string of at most %zu "
                            "characters", sizeof descr - 1);
            have_descr = 1;
        } else if (strcmp(key, "fortran_order") == 0) {
            if (lex_word(&x, "True"))
                fortran = 1;
            else if (lex_word(&x, "False"))
                fortran = 0;
            else
                return fail(msg, msg_len, GKV_EFORMAT, "malformed header: "
                            "'fortran_order' is not True or False");
            have_order = 1;
        } else if (strcmp(key, "shape") == 0) {
            if (!eat(&x, '('))
                return fail(msg, msg_len, GKV_EFORMAT, "malformed header: "
                            "'shape' is not a tuple");
            h->ndim = 0;
            while (!eat(&x, ')')) {
                uint64_t v;
                int r = lex_uint(&x, &v);

                if (r == -2)
                    return fail(msg, msg_len, GKV_EFORMAT, "shape dim %u is "
                                "over 2^64", h->ndim);
                if (r < 0)
                    return fail(msg, msg_len, GKV_EFORMAT, "malformed header: "
                                "'shape' holds something other than "
                                "non-negative integers");
                if (h->ndim == GKV_NPY_MAX_DIMS)
                    return fail(msg, msg_len, GKV_EFORMAT, "shape has more than "
                                "%d dims (at most rows + %d row dims)",
                                GKV_NPY_MAX_DIMS, GKV_MAX_DIMS);
                h->shape[h->ndim++] = v;
                if (!eat(&x, ',')) {
                    if (!eat(&x, ')'))
                        return fail(msg, msg_len, GKV_EFORMAT, "malformed "
                                    "header: 'shape' tuple is not closed");
                    break;
                }
            }
            have_shape = 1;
        } else {
            return fail(msg, msg_len, GKV_EFORMAT, "unexpected header key "
                        "'%s'", key);
        }
        if (!eat(&x, ',')) {
            if (!eat(&x, '}'))
                return fail(msg, msg_len, GKV_EFORMAT, "malformed header at "
                            "byte %td: expected ',' or '}'", x.p - p);
            break;
        }
    }
    skip_ws(&x);
    if (x.p != x.end)
        return fail(msg, msg_len, GKV_EFORMAT, "malformed header: text after "
                    "the dict");
    if (!have_descr || !have_order || !have_shape)
        return fail(msg, msg_len, GKV_EFORMAT, "header lacks '%s'",
                    !have_descr ? "descr" : !have_order ? "fortran_order" : "shape");
    if ((rc = descr_parse(descr, &h->dtype, &h->is_bool, msg, msg_len)) != GKV_OK)
        return rc;
    if (h->ndim == 0)
        return fail(msg, msg_len, GKV_EFORMAT, "0-d array (a single scalar): "
                    "a tensor needs at least one dim of rows");
    if (fortran) {
        /* Fortran and C order lay out the same bytes when at most one dim
         * is longer than 1; numpy writes such arrays as C order anyway. */
        unsigned big = 0;
        for (unsigned i = 0; i < h->ndim; i++)
            big += h->shape[i] > 1;
        if (big > 1)
            return fail(msg, msg_len, GKV_EFORMAT, "Fortran-order (column-"
                        "major) arrays are not supported; save a C-order "
                        "copy: np.save(f, np.ascontiguousarray(a))");
    }
    return GKV_OK;
}

gkv_err
gkv_npy_parse(const void *buf, size_t len, uint64_t file_size,
              gkv_npy_header *out, char *msg, size_t msg_len)
{
    const unsigned char *b = buf;
    gkv_npy_header h;
    uint64_t hlen, pre, need;
    gkv_err rc;

    if (out != NULL)
        memset(out, 0, sizeof *out);
    if (msg != NULL && msg_len > 0)
        msg[0] = '\0';
    if (buf == NULL || out == NULL)
        return fail(msg, msg_len, GKV_EINVAL, "no buffer or no header to fill");
    if (len > file_size)
        len = (size_t)file_size;
    memset(&h, 0, sizeof h);
    if (len < sizeof MAGIC || memcmp(b, MAGIC, sizeof MAGIC) != 0)
        return fail(msg, msg_len, GKV_EFORMAT, "not a .npy file (bad magic; "
                    "expected \\x93NUMPY)");
    if (len < 8)
        return fail(msg, msg_len, GKV_EFORMAT, "truncated header: %zu bytes, "
                    "no version", len);
    if ((b[6] != 1 && b[6] != 2 && b[6] != 3) || b[7] != 0)
        return fail(msg, msg_len, GKV_EFORMAT, "unsupported .npy version "
                    "%u.%u (supported: 1.0, 2.0, 3.0)", b[6], b[7]);
    h.version = b[6];
    pre = h.version == 1 ? 10 : 12;
    if (len < pre)
        return fail(msg, msg_len, GKV_EFORMAT, "truncated header: %zu bytes, "
                    "no header length", len);
    hlen = h.version == 1 ? (uint64_t)b[8] | (uint64_t)b[9] << 8
                          : (uint64_t)b[8] | (uint64_t)b[9] << 8 |
                            (uint64_t)b[10] << 16 | (uint64_t)b[11] << 24;
    if (hlen > GKV_NPY_HEADER_MAX)
        return fail(msg, msg_len, GKV_EFORMAT, "header of %llu bytes is over "
                    "the %u accepted", (unsigned long long)hlen,
                    GKV_NPY_HEADER_MAX);
    if (pre + hlen > len)
        return fail(msg, msg_len, GKV_EFORMAT, "truncated header: it says "
                    "%llu bytes, the file holds %llu", (unsigned long long)hlen,
                    (unsigned long long)(len - pre));
    if ((rc = dict_parse((const char *)b + pre, (const char *)b + pre + hlen,
                         &h, msg, msg_len)) != GKV_OK)
        return rc;
    /* a row's bytes first: with no rows (shape[0] = 0) they must still
     * fit, for a caller sizes rows from the trailing dims */
    need = gkv_dtype_size(h.dtype);
    for (unsigned i = h.ndim; i-- > 0; ) {
        if (h.shape[i] != 0 && need > UINT64_MAX / h.shape[i])
            return fail(msg, msg_len, GKV_EFORMAT, "shape holds more than "
                        "2^64 bytes%s", i > 0 ? " a row" : "");
        need *= h.shape[i];
    }
    h.data_offset = pre + hlen;
    h.data_bytes = need;
    if (need > file_size - h.data_offset) {
        char shp[160];
        size_t o = 0;
        for (unsigned i = 0; i < h.ndim && o < sizeof shp; i++)
            o += (size_t)snprintf(shp + o, sizeof shp - o, "%s%llu",
                                  i ? ", " : "", (unsigned long long)h.shape[i]);
        return fail(msg, msg_len, GKV_EFORMAT, "truncated data: shape (%s) of "
                    "%s needs %llu bytes after the header, the file has %llu",
                    shp, gkv_dtype_name(h.dtype), (unsigned long long)need,
                    (unsigned long long)(file_size - h.data_offset));
    }
    *out = h;
    return GKV_OK;
}

gkv_err
gkv_npy_read_header_fd(int fd, gkv_npy_header *out, char *msg, size_t msg_len)
{
    size_t cap = 12 + GKV_NPY_HEADER_MAX, got = 0;
    unsigned char *buf;
    struct stat sb;
    gkv_err rc;

    if (out != NULL)
        memset(out, 0, sizeof *out);
    if (out == NULL)
        return fail(msg, msg_len, GKV_EINVAL, "no header to fill");
    if (fstat(fd, &sb) != 0)
        return fail(msg, msg_len, kv__from_mdb(errno), "fstat: %s", strerror(errno));
    if (!S_ISREG(sb.st_mode))
        return fail(msg, msg_len, GKV_EFORMAT, "not a regular file");
    if ((uint64_t)sb.st_size < cap)
        cap = (size_t)sb.st_size;
    if ((buf = gkv__malloc(cap)) == NULL)
        return fail(msg, msg_len, GKV_ENOMEM, "out of memory");
    while (got < cap) {
        ssize_t r = pread(fd, buf + got, cap - got, (off_t)got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            rc = fail(msg, msg_len, kv__from_mdb(errno), "read: %s", strerror(errno));
            gkv__free(buf);
            return rc;
        }
        if (r == 0)
            break;
        got += (size_t)r;
    }
    rc = gkv_npy_parse(buf, got, got < cap ? got : (uint64_t)sb.st_size, out,
                       msg, msg_len);
    gkv__free(buf);
    return rc;
}

gkv_err
gkv_npy_read_header(const char *path, gkv_npy_header *out, char *msg,
                    size_t msg_len)
{
    int fd;
    gkv_err rc;

    if (out != NULL)
        memset(out, 0, sizeof *out);
    if (path == NULL)
        return fail(msg, msg_len, GKV_EINVAL, "no path");
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
        return fail(msg, msg_len, kv__from_mdb(errno), "%s", strerror(errno));
    rc = gkv_npy_read_header_fd(fd, out, msg, msg_len);
    close(fd);
    return rc;
}

/* ---- writing -------------------------------------------------------------- */

gkv_err
gkv_npy_header_format(gkv_dtype dt, unsigned ndim, const uint64_t *shape,
                      void *buf, size_t cap, size_t *len, char *msg,
                      size_t msg_len)
{
    const char *descr = gkv_npy_descr(dt);
    char text[512], first[24];
    unsigned char *o = buf;
    size_t n, pre, hlen, pad;
    uint64_t bytes;
    int k;

    if (len != NULL)
        *len = 0;
    if (descr == NULL)
        return fail(msg, msg_len, GKV_EINVAL, "dtype %s has no .npy "
                    "equivalent", gkv_dtype_name(dt));
    if (ndim < 1 || ndim > GKV_NPY_MAX_DIMS || shape == NULL)
        return fail(msg, msg_len, GKV_EINVAL, "%u dims: a .npy for gkv has "
                    "1 to %d", ndim, GKV_NPY_MAX_DIMS);
    if (buf == NULL || len == NULL)
        return fail(msg, msg_len, GKV_EINVAL, "no buffer");
    bytes = gkv_dtype_size(dt);
    for (unsigned i = 0; i < ndim; i++) {
        if (shape[i] != 0 && bytes > UINT64_MAX / shape[i])
            return fail(msg, msg_len, GKV_EINVAL, "shape holds more than "
                        "2^64 bytes");
        bytes *= shape[i];
    }
    /* "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }" as
     * numpy's _write_array_header builds it (sorted keys, repr values) */
    n = (size_t)snprintf(text, sizeof text, "{'descr': '%s', 'fortran_order': "
                         "False, 'shape': (", descr);
    for (unsigned i = 0; i < ndim; i++)
        n += (size_t)snprintf(text + n, sizeof text - n, "%s%llu",
                              i ? ", " : "", (unsigned long long)shape[i]);
    n += (size_t)snprintf(text + n, sizeof text - n, "%s), }",
                          ndim == 1 ? "," : "");
    /* room for shape[0] to grow in place */
    k = snprintf(first, sizeof first, "%llu", (unsigned long long)shape[0]);
    for (int i = k; i < (int)GROWTH_DIGITS && n < sizeof text; i++)
        text[n++] = ' ';
    /* _wrap_header: spaces then '\n' so the data starts at a multiple of
     * ARRAY_ALIGN; an aligned header still gets ARRAY_ALIGN spaces */
    pre = 10;
    hlen = n + 1;
    pad = ARRAY_ALIGN - (pre + hlen) % ARRAY_ALIGN;
    if (hlen + pad > 0xffff) {
        pre = 12;
        pad = ARRAY_ALIGN - (pre + hlen) % ARRAY_ALIGN;
    }
    if (pre + hlen + pad > cap)
        return fail(msg, msg_len, GKV_EINVAL, "header needs %zu bytes, buffer "
                    "has %zu", pre + hlen + pad, cap);
    memcpy(o, MAGIC, sizeof MAGIC);
    o[6] = pre == 10 ? 1 : 2;
    o[7] = 0;
    hlen += pad;
    o[8] = (unsigned char)hlen;
    o[9] = (unsigned char)(hlen >> 8);
    if (pre == 12) {
        o[10] = (unsigned char)(hlen >> 16);
        o[11] = (unsigned char)(hlen >> 24);
    }
    memcpy(o + pre, text, n);
    memset(o + pre + n, ' ', pad);
    o[pre + n + pad] = '\n';
    *len = pre + hlen;
    return GKV_OK;
}

gkv_err
gkv_npy_write_header(int fd, gkv_dtype dt, unsigned ndim, const uint64_t *shape,
                     size_t *header_len, char *msg, size_t msg_len)
{
    unsigned char buf[640];
    size_t len, off = 0;
    gkv_err rc;

    if (header_len != NULL)
        *header_len = 0;
    if ((rc = gkv_npy_header_format(dt, ndim, shape, buf, sizeof buf, &len,
                                    msg, msg_len)) != GKV_OK)
        return rc;
    while (off < len) {
        ssize_t w = write(fd, buf + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return fail(msg, msg_len, GKV_EIO, "write: %s", strerror(errno));
        off += (size_t)w;
    }
    if (header_len != NULL)
        *header_len = len;
    return GKV_OK;
}

/* ---- mapping -------------------------------------------------------------- */

/* Maps [0, len) of fd read-only; data = base + off. An empty range maps
 * nothing and points data at a static empty string. */
static gkv_err
map_fd(gkv_npy_map *m, int fd, uint64_t off, uint64_t len, char *msg,
       size_t msg_len)
{
    static const char empty[1];
    void *p;

    if (len == 0) {
        m->data = empty;
        return GKV_OK;
    }
    if (off + len > SIZE_MAX)
        return fail(msg, msg_len, GKV_ENOMEM, "file too large to map");
    p = mmap(NULL, (size_t)(off + len), PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        return fail(msg, msg_len, kv__from_mdb(errno), "mmap: %s", strerror(errno));
    madvise(p, (size_t)(off + len), MADV_SEQUENTIAL);
    m->map_base = p;
    m->map_len = (size_t)(off + len);
    m->data = (const unsigned char *)p + off;
    return GKV_OK;
}

/* A numpy bool is one byte, 0 or 1: anything else was not written by
 * numpy, and storing it as u8 would hand a model a "bool" of 2 or 255.
 * Names the first bad row (and the element within a row of several). */
static gkv_err
check_bool(const gkv_npy_header *h, const unsigned char *p, char *msg,
           size_t msg_len)
{
    uint64_t per = 1, n = h->data_bytes, i = 0;

    for (unsigned d = 1; d < h->ndim; d++)
        per *= h->shape[d];              /* no overflow: data_bytes did not */
    /* eight bytes at a time while all of them are 0 or 1 */
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        if (w & 0xfefefefefefefefeull)
            break;
    }
    for (; i < n; i++) {
        if (p[i] <= 1)
            continue;
        if (per == 1)
            return fail(msg, msg_len, GKV_EFORMAT, "bool (|b1) data: row "
                        "%llu holds byte %u; a bool is 0 or 1",
                        (unsigned long long)i, p[i]);
        return fail(msg, msg_len, GKV_EFORMAT, "bool (|b1) data: row %llu "
                    "holds byte %u (element %llu of the row); a bool is 0 "
                    "or 1", (unsigned long long)(i / per), p[i],
                    (unsigned long long)(i % per));
    }
    return GKV_OK;
}

gkv_err
gkv_npy_map_open(gkv_npy_map *m, const char *path, char *msg, size_t msg_len)
{
    gkv_npy_header h;
    gkv_err rc;
    int fd;

    if (m == NULL || path == NULL)
        return fail(msg, msg_len, GKV_EINVAL, "no map or no path");
    memset(m, 0, sizeof *m);
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
        return fail(msg, msg_len, kv__from_mdb(errno), "%s", strerror(errno));
    if ((rc = gkv_npy_read_header_fd(fd, &h, msg, msg_len)) == GKV_OK &&
        (rc = map_fd(m, fd, h.data_offset, h.data_bytes, msg, msg_len)) == GKV_OK &&
        (!h.is_bool || (rc = check_bool(&h, m->data, msg, msg_len)) == GKV_OK))
        m->hdr = h;
    close(fd);
    if (rc != GKV_OK)
        gkv_npy_map_close(m);
    return rc;
}

gkv_err
gkv_npy_map_raw(gkv_npy_map *m, const char *path, gkv_dtype dt,
                unsigned row_ndim, const uint64_t *row_shape, char *msg,
                size_t msg_len)
{
    uint64_t row_bytes = gkv_dtype_size(dt);
    struct stat sb;
    gkv_err rc;
    int fd;

    if (m == NULL || path == NULL)
        return fail(msg, msg_len, GKV_EINVAL, "no map or no path");
    memset(m, 0, sizeof *m);
    if (row_bytes == 0)
        return fail(msg, msg_len, GKV_EINVAL, "unknown dtype %d", (int)dt);
    if (row_ndim > GKV_MAX_DIMS || (row_ndim > 0 && row_shape == NULL))
        return fail(msg, msg_len, GKV_EINVAL, "%u row dims, at most %d",
                    row_ndim, GKV_MAX_DIMS);
    for (unsigned i = 0; i < row_ndim; i++) {
        if (row_shape[i] == 0)
            return fail(msg, msg_len, GKV_EINVAL, "row dim %u is 0", i);
        if (row_bytes > UINT64_MAX / row_shape[i])
            return fail(msg, msg_len, GKV_EINVAL, "rows over 2^64 bytes");
        row_bytes *= row_shape[i];
    }
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
        return fail(msg, msg_len, kv__from_mdb(errno), "%s", strerror(errno));
    if (fstat(fd, &sb) != 0) {
        rc = fail(msg, msg_len, kv__from_mdb(errno), "fstat: %s", strerror(errno));
    } else if (!S_ISREG(sb.st_mode)) {
        rc = fail(msg, msg_len, GKV_EFORMAT, "not a regular file");
    } else if (sb.st_size == 0 || (uint64_t)sb.st_size % row_bytes != 0) {
        rc = fail(msg, msg_len, GKV_EFORMAT, "file of %llu bytes is not a "
                  "whole number of %llu-byte rows of %s",
                  (unsigned long long)sb.st_size, (unsigned long long)row_bytes,
                  gkv_dtype_name(dt));
    } else {
        m->hdr.dtype = dt;
        m->hdr.ndim = row_ndim + 1;
        m->hdr.shape[0] = (uint64_t)sb.st_size / row_bytes;
        for (unsigned i = 0; i < row_ndim; i++)
            m->hdr.shape[i + 1] = row_shape[i];
        m->hdr.data_offset = 0;
        m->hdr.data_bytes = (uint64_t)sb.st_size;
        m->hdr.version = 0;
        rc = map_fd(m, fd, 0, (uint64_t)sb.st_size, msg, msg_len);
    }
    close(fd);
    if (rc != GKV_OK)
        gkv_npy_map_close(m);
    return rc;
}

void
gkv_npy_map_close(gkv_npy_map *m)
{
    if (m == NULL)
        return;
    if (m->map_base != NULL)
        munmap(m->map_base, m->map_len);
    memset(m, 0, sizeof *m);
}
