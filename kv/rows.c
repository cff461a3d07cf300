/* rows.c - reading and writing rows: initializers, pull, range read, row
 * views, push with handlers and sparse optimizers, range write. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/gen.h"
#include "kv/kv_int.h"

/* ---- element access by dtype ------------------------------------------- */

/* Rows inside an LMDB value are only as aligned as LMDB places the value
 * (2 bytes for a small one): elements are moved with memcpy, which the
 * compiler turns into plain loads and stores. */
#define LD(T) do { T x_; memcpy(&x_, (const unsigned char *)p + i * sizeof x_, \
                               sizeof x_); return (double)x_; } while (0)
static inline double
elem_load(gkv_dtype dt, const void *p, uint64_t i)
{
    uint16_t h;

    switch (dt) {
    case GKV_F32:  LD(float);
    case GKV_F64:  LD(double);
    case GKV_F16:  memcpy(&h, (const unsigned char *)p + 2 * i, 2);
                   return gkv_f16_to_f32(h);
    case GKV_BF16: memcpy(&h, (const unsigned char *)p + 2 * i, 2);
                   return gkv_bf16_to_f32(h);
    case GKV_I8:   LD(int8_t);
    case GKV_U8:   LD(uint8_t);
    case GKV_I32:  LD(int32_t);
    case GKV_I64:  LD(int64_t);
    }
    return 0;
}
#undef LD

static inline double
clampd(double v, double lo, double hi)
{
    if (isnan(v))
        return 0;
    return v < lo ? lo : v > hi ? hi : v;
}

#define ST(T, v) do { T x_ = (v); memcpy((unsigned char *)p + i * sizeof x_, \
                                      &x_, sizeof x_); } while (0)
static inline void
elem_store(gkv_dtype dt, void *p, uint64_t i, double v)
{
    switch (dt) {
    case GKV_F32:  ST(float, (float)v); break;
    case GKV_F64:  ST(double, v); break;
    case GKV_F16:  ST(uint16_t, gkv_f32_to_f16((float)v)); break;
    case GKV_BF16: ST(uint16_t, gkv_f32_to_bf16((float)v)); break;
    case GKV_I8:   ST(int8_t, (int8_t)clampd(trunc(v), -128, 127)); break;
    case GKV_U8:   ST(uint8_t, (uint8_t)clampd(trunc(v), 0, 255)); break;
    case GKV_I32:  ST(int32_t, (int32_t)clampd(trunc(v), -2147483648.0,
                                                2147483647.0)); break;
    case GKV_I64:  ST(int64_t, (int64_t)clampd(trunc(v), -9.2233720368547758e18,
                                                9.2233720368547748e18)); break;
    }
}

static inline int
aligned(const void *a, const void *b, size_t n)
{
    return (((uintptr_t)a | (uintptr_t)b) & (n - 1)) == 0;
}

static inline int
dtype_is_float(gkv_dtype dt)
{
    return dt == GKV_F32 || dt == GKV_F64 || dt == GKV_F16 || dt == GKV_BF16;
}

/* ---- initializers -------------------------------------------------------- */

/* The next 16-bit float (f16 or bf16: sign and magnitude) towards -inf. */
static uint16_t
half_down(uint16_t h)
{
    if (h == 0)
        return 0x8001;                 /* +0 -> the smallest negative */
    return (h & 0x8000) ? (uint16_t)(h + 1) : (uint16_t)(h - 1);
}

/* A uniform element stored as element i of p must be below b: the dtype's
 * rounding (to f32, f16 or bf16 from a double just below b; trunc of a
 * negative integer) can reach b. Steps it down to the dtype's largest
 * value below b. */
static void
elem_below(gkv_dtype dt, void *p, uint64_t i, double b)
{
    double x = elem_load(dt, p, i);
    uint16_t h;

    if (!(x >= b))
        return;
    switch (dt) {
    case GKV_F32: {
        float f = (float)x;
        do
            f = nextafterf(f, -INFINITY);
        while ((double)f >= b);
        ST(float, f);
        break;
    }
    case GKV_F64:
        ST(double, nextafter(b, -INFINITY));
        break;
    case GKV_F16:
    case GKV_BF16:
        memcpy(&h, (unsigned char *)p + 2 * i, 2);
        do
            h = half_down(h);
        while ((dt == GKV_F16 ? gkv_f16_to_f32(h) : gkv_bf16_to_f32(h)) >= b);
        ST(uint16_t, h);
        break;
    default:                           /* integers: x - 1 < b, if x has one */
        if (x > -9.2233720368547758e18)
            elem_store(dt, p, i, x - 1);
        break;
    }
}
#undef ST

void
kv__init_rows(const kv_rec *r, uint64_t first, uint64_t n, void *dst)
{
    uint64_t E = r->row_elems;

    if (r->init == GKV_INIT_ZEROS) {
        memset(dst, 0, n * r->row_bytes);
        return;
    }
    for (uint64_t i = 0; i < n; i++) {
        uint64_t row = first + i;
        void *p = (unsigned char *)dst + i * r->row_bytes;

        for (uint64_t j = 0; j < E; j++) {
            double v = r->a;

            if (r->init == GKV_INIT_UNIFORM) {
                v = r->a + (r->b - r->a) * gkv_gen_unit(kv__mix3(r->seed, row, j));
                if (v >= r->b)       /* rounding can reach b; keep [a, b) */
                    v = nextafter(r->b, r->a);
                if (!dtype_is_float(r->dtype))
                    v = floor(v);    /* not trunc: [-10, -5) is -10 .. -6 */
                elem_store(r->dtype, p, j, v);
                elem_below(r->dtype, p, j, r->b);   /* and the dtype's */
                continue;
            } else if (r->init == GKV_INIT_NORMAL) {
                double u1 = gkv_gen_unit(kv__mix3(r->seed, row, 2 * j));
                double u2 = gkv_gen_unit(kv__mix3(r->seed, row, 2 * j + 1));
                v = r->a + r->b * sqrt(-2.0 * log1p(-u1)) * cos(2 * M_PI * u2);
            }
            elem_store(r->dtype, p, j, v);
        }
    }
}

/* Writes the header of a chunk whose rows are in place. */
void
kv__chunk_seal(const kv_rec *r, uint64_t c, unsigned char *val)
{
    uint32_t nrows = (uint32_t)kv__chunk_nrows(r, c), magic = KV_CHUNK_MAGIC;
    uint64_t sum = kv__chunk_sum(r->tid, c, val + KV_CHUNK_HDR,
                                 nrows * r->row_bytes);

    memcpy(val, &sum, 8);
    memcpy(val + 8, &nrows, 4);
    memcpy(val + 12, &magic, 4);
}

gkv_err
kv__chunk_stamp(gkv_store *s, MDB_txn *txn, uint32_t tid, uint64_t c,
                uint64_t *sum, int *have)
{
    unsigned char kb[KV_KEY_LEN];
    MDB_val k = {KV_KEY_LEN, kb}, v;
    int mrc;

    kv__key(kb, tid, c);
    *sum = 0;
    *have = 0;
    if ((mrc = mdb_get(txn, s->st_data, &k, &v)) == MDB_NOTFOUND)
        return GKV_OK;
    if (mrc != MDB_SUCCESS)
        return kv__from_mdb(mrc);
    if (v.mv_size < KV_CHUNK_HDR)
        return GKV_ECORRUPT;
    memcpy(sum, v.mv_data, 8);
    *have = 1;
    return GKV_OK;
}


gkv_err
kv__materialize(gkv_store *s, MDB_txn *txn, const kv_rec *r)
{
    unsigned char kb[KV_KEY_LEN];

    for (uint64_t c = 0; c < r->nchunks; c++) {
        MDB_val k = {KV_KEY_LEN, kb}, d = {kv__chunk_size(r, c), NULL};
        int mrc;

        kv__key(kb, r->tid, c);
        /* a new tensor has the largest id: its keys sort after all others */
        if ((mrc = mdb_put(txn, s->st_data, &k, &d, MDB_RESERVE | MDB_APPEND)) != 0)
            return kv__fail(s, kv__from_mdb(mrc), "writing chunk %llu of tensor "
                            "id %u: %s", (unsigned long long)c, r->tid,
                            mdb_strerror(mrc));
        kv__init_rows(r, r->lo + c * r->chunk_rows, kv__chunk_nrows(r, c),
                      (unsigned char *)d.mv_data + KV_CHUNK_HDR);
        kv__chunk_seal(r, c, d.mv_data);
    }
    return GKV_OK;
}

/* ---- chunk lookup for reads ---------------------------------------------- */

/* Row r (0-based inside the tensor) -> chunk index, without a division when
 * chunk_rows is a power of two. */
typedef struct chunk_div { uint64_t cr; int shift; } chunk_div;

static inline chunk_div
div_make(uint32_t cr)
{
    chunk_div d = {cr, -1};
    if ((cr & (cr - 1)) == 0)
        d.shift = __builtin_ctz(cr);
    return d;
}

static inline uint64_t
div_chunk(chunk_div d, uint64_t r)
{
    return d.shift >= 0 ? r >> d.shift : r / d.cr;
}

/* Looks up chunk c of r. *val is the chunk value in the map, or NULL for an
 * unwritten chunk of a zeros-initialised tensor. */
static gkv_err
chunk_get(gkv_store *s, MDB_txn *txn, const kv_rec *r, const char *name,
          uint64_t c, const unsigned char **val)
{
    unsigned char kb[KV_KEY_LEN];
    MDB_val k = {KV_KEY_LEN, kb}, d;
    int mrc;

    kv__key(kb, r->tid, c);
    mrc = mdb_get(txn, s->st_data, &k, &d);
    if (mrc == MDB_NOTFOUND && r->init == GKV_INIT_ZEROS) {
        *val = NULL;
        return GKV_OK;
    }
    if (mrc == MDB_NOTFOUND)
        return kv__fail(s, GKV_ECORRUPT, "tensor '%s': chunk %llu is missing",
                        name, (unsigned long long)c);
    if (mrc != 0)
        return kv__fail(s, kv__from_mdb(mrc), "tensor '%s': chunk %llu: %s",
                        name, (unsigned long long)c, mdb_strerror(mrc));
    if (d.mv_size != kv__chunk_size(r, c))
        return kv__fail(s, GKV_ECORRUPT, "tensor '%s': chunk %llu has %zu "
                        "bytes, expected %zu", name, (unsigned long long)c,
                        d.mv_size, kv__chunk_size(r, c));
    *val = d.mv_data;
    return GKV_OK;
}

/* Open-addressing table chunk index -> chunk value, for one pull. Sized to a
 * power of two >= 2 x the chunks it can meet, so with index & mask as the
 * hash a dense tensor has no collisions at all. */
typedef struct ptab {
    uint64_t *keys;
    const unsigned char **vals;
    size_t mask;
} ptab;

#define PT_EMPTY UINT64_MAX
#define PT_ZERO ((const unsigned char *)1)   /* an unwritten zeros chunk */

static gkv_err
ptab_init(ptab *t, uint64_t want)
{
    size_t sz = 16;

    while (sz < 2 * want && sz < ((size_t)1 << 40))
        sz *= 2;
    t->mask = sz - 1;
    t->keys = gkv__malloc(sz * sizeof *t->keys);
    t->vals = gkv__malloc(sz * sizeof *t->vals);
    if (t->keys == NULL || t->vals == NULL) {
        gkv__free(t->keys);
        gkv__free(t->vals);
        t->keys = NULL;
        t->vals = NULL;
        return GKV_ENOMEM;
    }
    memset(t->keys, 0xff, sz * sizeof *t->keys);
    return GKV_OK;
}

static void
ptab_free(ptab *t)
{
    gkv__free(t->keys);
    gkv__free(t->vals);
}

/* ---- pull ------------------------------------------------------------ */

#define PULL_BATCH 16

static gkv_err
range_error(gkv_store *s, const char *name, const kv_rec *r, uint64_t id, size_t i)
{
    return kv__fail(s, GKV_ERANGE, "tensor '%s': ID %llu (index %zu) is outside "
                    "[%llu, %llu)", name, (unsigned long long)id, i,
                    (unsigned long long)r->lo, (unsigned long long)r->hi);
}

static gkv_err
len_error(gkv_store *s, const char *name, const kv_rec *r, uint64_t n, size_t len)
{
    if (n > SIZE_MAX / r->row_bytes)
        return kv__fail(s, GKV_ESHAPE, "tensor '%s': %zu bytes for %llu rows; "
                        "rows are %zu bytes (%llu x %s), so expected more than "
                        "%zu", name, len, (unsigned long long)n, r->row_bytes,
                        (unsigned long long)r->row_elems,
                        gkv_dtype_name(r->dtype), (size_t)SIZE_MAX);
    return kv__fail(s, GKV_ESHAPE, "tensor '%s': %zu bytes for %llu rows; rows "
                    "are %zu bytes (%llu x %s), so expected %zu", name, len,
                    (unsigned long long)n, r->row_bytes,
                    (unsigned long long)r->row_elems, gkv_dtype_name(r->dtype),
                    (size_t)n * r->row_bytes);
}

static gkv_err wb_read(gkv_store *s, const char *name, int range,
                       const uint64_t *ids, size_t n, uint64_t a, uint64_t b,
                       void *dst, size_t len, int *done);

gkv_err
gkv_tensor_pull(gkv_store *s, gkv_txn *tx, const char *name,
                const uint64_t *ids, size_t n, void *dst, size_t dst_len)
{
    const unsigned char *src[PULL_BATCH];
    unsigned char *out = dst;
    ptab pt = {0};
    kv_snap sn;
    kv_rec r;
    gkv_err rc;

    kv__clear(s);
    if (kv__forked(s))          /* a parent's handle after fork() */
        return kv__fork_refused(s);
    if ((rc = kv__name_check(s, name, 1)) != GKV_OK)
        return rc;
    if (n > 0 && (ids == NULL || dst == NULL))
        return kv__fail(s, GKV_EINVAL, "tensor '%s': NULL %s for a pull of "
                        "%zu rows", name, ids == NULL ? "ids" : "dst", n);
    if (tx == NULL && kv__wb_any(s)) {
        int done;
        if ((rc = wb_read(s, name, 0, ids, n, 0, 0, dst, dst_len, &done)) != GKV_OK ||
            done)
            return rc;
    }
    if ((rc = kv__snap_begin(s, tx, &sn)) != GKV_OK)
        return rc;
    if ((rc = kv__rec_get(s, sn.txn, name, &r)) != GKV_OK)
        goto out;
    if (n > SIZE_MAX / (r.row_bytes ? r.row_bytes : 1) || dst_len != n * r.row_bytes) {
        rc = len_error(s, name, &r, n, dst_len);
        goto out;
    }
    if (n == 0)
        goto out;
    if ((rc = ptab_init(&pt, n < r.nchunks ? n : r.nchunks)) != GKV_OK) {
        rc = kv__fail(s, rc, "tensor '%s': out of memory for a pull of %zu "
                      "rows", name, n);
        goto out;
    }
    {
        const size_t rb = r.row_bytes;
        const chunk_div dv = div_make(r.chunk_rows);
        const unsigned char *zero = s->st_zero;

        for (size_t i = 0; i < n; i += PULL_BATCH) {
            size_t m = n - i < PULL_BATCH ? n - i : PULL_BATCH;

            /* resolve and prefetch a batch, then copy it: the copies'
             * cache misses overlap instead of queueing behind lookups */
            for (size_t j = 0; j < m; j++) {
                uint64_t id = ids[i + j], row, c;
                size_t h;

                if (id < r.lo || id >= r.hi) {
                    rc = range_error(s, name, &r, id, i + j);
                    goto out;
                }
                row = id - r.lo;
                c = div_chunk(dv, row);
                for (h = c & pt.mask; pt.keys[h] != c && pt.keys[h] != PT_EMPTY;
                     h = (h + 1) & pt.mask)
                    ;
                if (pt.keys[h] == PT_EMPTY) {
                    const unsigned char *v;
                    if ((rc = chunk_get(s, sn.txn, &r, name, c, &v)) != GKV_OK)
                        goto out;
                    pt.keys[h] = c;
                    pt.vals[h] = v ? v : PT_ZERO;
                }
                if (pt.vals[h] == PT_ZERO) {
                    src[j] = zero;
                } else {
                    src[j] = pt.vals[h] + KV_CHUNK_HDR + (row - c * r.chunk_rows) * rb;
                    __builtin_prefetch(src[j]);
                }
            }
            for (size_t j = 0; j < m; j++)
                memcpy(out + (i + j) * rb, src[j], rb);
        }
    }
out:
    ptab_free(&pt);
    kv__snap_end(&sn);
    return rc;
}

gkv_err
gkv_tensor_read(gkv_store *s, gkv_txn *tx, const char *name,
                uint64_t a, uint64_t b, void *dst, size_t dst_len)
{
    unsigned char *out = dst;
    kv_snap sn;
    kv_rec r;
    gkv_err rc;

    kv__clear(s);
    if (kv__forked(s))          /* a parent's handle after fork() */
        return kv__fork_refused(s);
    if ((rc = kv__name_check(s, name, 1)) != GKV_OK)
        return rc;
    if (a < b && dst == NULL)
        return kv__fail(s, GKV_EINVAL, "tensor '%s': NULL dst for rows [%llu, "
                        "%llu)", name, (unsigned long long)a,
                        (unsigned long long)b);
    if (tx == NULL && kv__wb_any(s)) {
        int done;
        if ((rc = wb_read(s, name, 1, NULL, 0, a, b, dst, dst_len, &done)) != GKV_OK ||
            done)
            return rc;
    }
    if ((rc = kv__snap_begin(s, tx, &sn)) != GKV_OK)
        return rc;
    if ((rc = kv__rec_get(s, sn.txn, name, &r)) != GKV_OK)
        goto out;
    if (a > b || a < r.lo || b > r.hi) {
        rc = kv__fail(s, GKV_ERANGE, "tensor '%s': rows [%llu, %llu) are not "
                      "inside [%llu, %llu)", name, (unsigned long long)a,
                      (unsigned long long)b, (unsigned long long)r.lo,
                      (unsigned long long)r.hi);
        goto out;
    }
    if (b - a > SIZE_MAX / r.row_bytes || dst_len != (b - a) * r.row_bytes) {
        rc = len_error(s, name, &r, b - a, dst_len);
        goto out;
    }
    for (uint64_t row = a - r.lo; row < b - r.lo;) {
        uint64_t c = row / r.chunk_rows, off = row - c * r.chunk_rows;
        uint64_t take = kv__chunk_nrows(&r, c) - off;
        const unsigned char *v;

        if (take > b - r.lo - row)
            take = b - r.lo - row;
        if ((rc = chunk_get(s, sn.txn, &r, name, c, &v)) != GKV_OK)
            goto out;
        if (v == NULL)
            memset(out, 0, take * r.row_bytes);
        else
            memcpy(out, v + KV_CHUNK_HDR + off * r.row_bytes, take * r.row_bytes);
        out += take * r.row_bytes;
        row += take;
    }
out:
    kv__snap_end(&sn);
    return rc;
}

gkv_err
gkv_row_view(gkv_txn *tx, const char *name, uint64_t id, const void **row)
{
    gkv_store *s;
    const unsigned char *v;
    kv_rec r;
    gkv_err rc;
    uint64_t c;

    *row = NULL;
    if (tx == NULL)
        return kv__fail(NULL, GKV_EINVAL, "gkv_row_view: no snapshot (a "
                        "borrowed row lives as long as its gkv_txn)");
    s = tx->tx_store;
    kv__clear(s);
    if ((rc = kv__name_check(s, name, 1)) != GKV_OK)
        return rc;
    if ((rc = kv__rec_get(s, tx->tx_txn, name, &r)) != GKV_OK)
        return rc;
    if (id < r.lo || id >= r.hi)
        return range_error(s, name, &r, id, 0);
    c = (id - r.lo) / r.chunk_rows;
    if ((rc = chunk_get(s, tx->tx_txn, &r, name, c, &v)) != GKV_OK)
        return rc;
    *row = v == NULL ? s->st_zero
                     : v + KV_CHUNK_HDR + (id - r.lo - c * r.chunk_rows) * r.row_bytes;
    return GKV_OK;
}

/* ---- writable chunks ----------------------------------------------------- */

/* Makes chunk c of r writable in 'txn' and returns its value in *val, with
 * the current rows in place (zeros for an unwritten chunk). LMDB copies
 * on write: the rows are copied once from the old pages; pointers into the
 * map obtained earlier in this txn stay valid until commit. */
static gkv_err
chunk_cow(gkv_store *s, MDB_cursor *cur, const kv_rec *r, const char *name,
          uint64_t c, unsigned char **val)
{
    unsigned char kb[KV_KEY_LEN];
    size_t size = kv__chunk_size(r, c);
    MDB_val k = {KV_KEY_LEN, kb}, d, nd = {size, NULL};
    int mrc;

    kv__key(kb, r->tid, c);
    mrc = mdb_cursor_get(cur, &k, &d, MDB_SET_KEY);
    if (mrc == 0) {
        const void *old = d.mv_data;

        if (d.mv_size != size)
            return kv__fail(s, GKV_ECORRUPT, "tensor '%s': chunk %llu has %zu "
                            "bytes, expected %zu", name, (unsigned long long)c,
                            d.mv_size, size);
        /* put with our own key bytes: after MDB_SET_KEY, k points into the
         * page, and replacing an overflow value deletes and re-adds the
         * node, moving those bytes under LMDB's feet */
        k.mv_size = KV_KEY_LEN;
        k.mv_data = kb;
        if ((mrc = mdb_cursor_put(cur, &k, &nd, MDB_CURRENT | MDB_RESERVE)) != 0)
            goto fail;
        if (nd.mv_data != old)
            memcpy(nd.mv_data, old, size);
    } else if (mrc == MDB_NOTFOUND) {
        if (r->init != GKV_INIT_ZEROS)
            return kv__fail(s, GKV_ECORRUPT, "tensor '%s': chunk %llu is "
                            "missing", name, (unsigned long long)c);
        if ((mrc = mdb_cursor_put(cur, &k, &nd, MDB_RESERVE)) != 0)
            goto fail;
        memset(nd.mv_data, 0, size);
    } else {
        goto fail;
    }
    *val = nd.mv_data;
    return GKV_OK;
fail:
    return kv__fail(s, kv__from_mdb(mrc), "tensor '%s': writing chunk %llu: %s",
                    name, (unsigned long long)c, mdb_strerror(mrc));
}

/* Copies chunk c of r into buf (zeros for an unwritten chunk of a zeros
 * tensor), checking its size. */
static gkv_err
state_load(gkv_store *s, MDB_cursor *cur, const kv_rec *r, const char *name,
           uint64_t c, unsigned char *buf)
{
    unsigned char kb[KV_KEY_LEN];
    size_t size = kv__chunk_size(r, c);
    MDB_val k = {KV_KEY_LEN, kb}, d;
    int mrc;

    kv__key(kb, r->tid, c);
    mrc = mdb_cursor_get(cur, &k, &d, MDB_SET_KEY);
    if (mrc == MDB_NOTFOUND && r->init == GKV_INIT_ZEROS) {
        memset(buf, 0, size);
        return GKV_OK;
    }
    if (mrc != 0)
        return kv__fail(s, kv__from_mdb(mrc), "tensor '%s': reading "
                        "optimizer state chunk %llu: %s", name,
                        (unsigned long long)c, mdb_strerror(mrc));
    if (d.mv_size != size)
        return kv__fail(s, GKV_ECORRUPT, "tensor '%s': optimizer state "
                        "chunk %llu has %zu bytes, expected %zu", name,
                        (unsigned long long)c, d.mv_size, size);
    memcpy(buf, d.mv_data, size);
    return GKV_OK;
}

/* Writes the sealed chunk 'buf' as chunk c of r (LMDB copies it). */
static gkv_err
chunk_put(gkv_store *s, MDB_cursor *cur, const kv_rec *r, const char *name,
          uint64_t c, const unsigned char *buf)
{
    unsigned char kb[KV_KEY_LEN];
    MDB_val k = {KV_KEY_LEN, kb}, d = {kv__chunk_size(r, c), (void *)buf};
    int mrc;

    kv__key(kb, r->tid, c);
    if ((mrc = mdb_cursor_put(cur, &k, &d, 0)) != 0)
        return kv__fail(s, kv__from_mdb(mrc), "tensor '%s': writing chunk "
                        "%llu: %s", name, (unsigned long long)c, mdb_strerror(mrc));
    return GKV_OK;
}

/* ---- push ------------------------------------------------------------ */

static const char *const builtin_names[] = {
    "assign", "add", "sgd", "adagrad", "adam"
};

/* State companions per optimizer: suffix, and whether it is the per-row
 * step count (i64, one per row) rather than a row-shaped tensor. */
static const struct { const char *suffix; int is_step; } adagrad_state[] = {
    {"#adagrad_s", 0}
}, adam_state[] = {
    {"#adam_m", 0}, {"#adam_v", 0}, {"#adam_t", 1}
};

/* The largest adam step count a row may hold: a restore refuses more
 * (steps_check), and an adam push refuses a row already there (its t + 1
 * would be INT64_MAX, which no restore takes back), so t + 1 never
 * overflows. */
#define KV_STEP_MAX (INT64_MAX - 1)

size_t
kv__state_n(enum kv_hkind k)
{
    return k == KV_H_ADAGRAD ? 1 : k == KV_H_ADAM ? 3 : 0;
}

const char *
kv__state_suffix(enum kv_hkind k, size_t i)
{
    return k == KV_H_ADAGRAD ? adagrad_state[i].suffix : adam_state[i].suffix;
}

int
kv__state_is_step(enum kv_hkind k, size_t i)
{
    return k == KV_H_ADAGRAD ? adagrad_state[i].is_step : adam_state[i].is_step;
}

/* Splits "T#suffix" into T (base) and its optimizer and companion index;
 * 0 for any other name. */
static int
state_find(const char *name, char *base, enum kv_hkind *k, size_t *idx)
{
    const char *h = strchr(name, '#');

    if (h != NULL && h > name && (size_t)(h - name) <= GKV_NAME_MAX)
        for (int kk = KV_H_ADAGRAD; kk <= KV_H_ADAM; kk++)
            for (size_t i = 0; i < kv__state_n((enum kv_hkind)kk); i++)
                if (strcmp(h, kv__state_suffix((enum kv_hkind)kk, i)) == 0) {
                    memcpy(base, name, (size_t)(h - name));
                    base[h - name] = '\0';
                    *k = (enum kv_hkind)kk;
                    *idx = i;
                    return 1;
                }
    return 0;
}

#define STATE_NAMES "'#' is reserved for it, and a tensor T's state is " \
                    "T#adagrad_s, T#adam_m, T#adam_v or T#adam_t"

gkv_err
kv__state_parse(gkv_store *s, const char *name, char *base,
                enum kv_hkind *k, size_t *idx)
{
    gkv_err rc;

    if ((rc = kv__name_check(s, name, 1)) != GKV_OK)
        return rc;
    if (state_find(name, base, k, idx))
        return GKV_OK;
    return kv__fail(s, GKV_EINVAL, "'%.64s' is not optimizer state: "
                    STATE_NAMES, name);
}

gkv_err
gkv_opt_state_split(const char *name, char *base, int *is_step)
{
    enum kv_hkind k;
    size_t i;

    gkv__clear(NULL);
    if (name == NULL || base == NULL || is_step == NULL)
        return gkv__fail(NULL, GKV_EINVAL, "name, base or is_step is NULL");
    if (!state_find(name, base, &k, &i))
        return gkv__fail(NULL, GKV_EINVAL, "'%.64s' is not optimizer state: "
                         STATE_NAMES, name);
    *is_step = kv__state_is_step(k, i);
    return GKV_OK;
}

/* The record state companion 'is_step' of tensor r has (or gets), but its
 * tid. Keep in step with kv__state_get. */
void
kv__state_rec(const kv_rec *r, int is_step, kv_rec *st)
{
    memset(st, 0, sizeof *st);
    st->dtype = is_step ? GKV_I64 : (r->dtype == GKV_F64 ? GKV_F64 : GKV_F32);
    st->ndim = is_step ? 0 : r->ndim;
    for (unsigned i = 0; i < st->ndim; i++)
        st->shape[i] = r->shape[i];
    st->lo = r->lo;
    st->hi = r->hi;
    st->chunk_rows = r->chunk_rows;
    st->flags = r->flags;
    st->init = GKV_INIT_ZEROS;
    kv__rec_derive(st);
}

gkv_err
kv__state_fits(gkv_store *s, const char *name, const char *sname,
               const kv_rec *st)
{
    if (st->row_bytes <= KV_MAX_ROW_BYTES &&
        (uint64_t)st->chunk_rows * st->row_bytes <= KV_MAX_CHUNK_BYTES)
        return GKV_OK;
    return kv__fail(s, GKV_EINVAL, "tensor '%s' cannot have optimizer state "
                    "'%s': its rows (%llu bytes) in chunks of %u would pass "
                    "the limits of %llu MiB a row and %llu MiB a chunk (%s)",
                    name, sname, (unsigned long long)st->row_bytes,
                    st->chunk_rows, (unsigned long long)(KV_MAX_ROW_BYTES >> 20),
                    (unsigned long long)(KV_MAX_CHUNK_BYTES >> 20),
                    st->row_bytes > KV_MAX_ROW_BYTES ? "its rows are too wide "
                    "for f32 state" : "give the tensor fewer rows per chunk");
}

/* Whether stored companion st has the rows kv__state_rec() says. */
int
kv__state_rec_same(const kv_rec *want, const kv_rec *st)
{
    if (st->dtype != want->dtype || st->ndim != want->ndim ||
        st->lo != want->lo || st->hi != want->hi ||
        st->chunk_rows != want->chunk_rows)
        return 0;
    for (unsigned i = 0; i < want->ndim; i++)
        if (st->shape[i] != want->shape[i])
            return 0;
    return 1;
}

/* "f32 [8]" or "i64 scalar": a record's rows, for messages. */
static void
rows_desc(const kv_rec *r, char *buf, size_t len)
{
    size_t o = (size_t)snprintf(buf, len, "%s ", gkv_dtype_name(r->dtype));

    if (r->ndim == 0 && o < len)
        snprintf(buf + o, len - o, "scalar");
    for (unsigned i = 0; i < r->ndim && o < len; i++)
        o += (size_t)snprintf(buf + o, len - o, "%s%llu%s", i ? "x" : "[",
                              (unsigned long long)r->shape[i],
                              i + 1 == r->ndim ? "]" : "");
}

gkv_err
kv__state_mismatch(gkv_store *s, const char *sname, const char *base,
                   const kv_rec *want, const kv_rec *st)
{
    char have[96], need[96];

    rows_desc(st, have, sizeof have);
    rows_desc(want, need, sizeof need);
    return kv__fail(s, GKV_ECORRUPT, "optimizer state '%s' does not have the "
                    "rows of tensor '%s': it has %s rows [%llu, %llu), %u a "
                    "chunk; the tensor's needs %s rows [%llu, %llu), %u a "
                    "chunk (gkv_opt_reset() of '%s' drops it)", sname, base,
                    have, (unsigned long long)st->lo,
                    (unsigned long long)st->hi, st->chunk_rows, need,
                    (unsigned long long)want->lo, (unsigned long long)want->hi,
                    want->chunk_rows, base);
}

/* Stable order of ids by value: LSD radix sort on (id - lo) with 11-bit
 * digits, or insertion sort for small n. *out is gkv__malloc'd. */
gkv_err
kv__sort_order(const uint64_t *ids, size_t n, uint64_t lo, uint64_t range,
           uint32_t **out)
{
    uint32_t *a, *b = NULL, *t;
    int bits = range > 1 ? 64 - __builtin_clzll(range - 1) : 1;
    size_t *cnt = NULL;
    int sorted = 1;

    *out = NULL;
    if ((a = gkv__malloc(n * sizeof *a)) == NULL)
        return GKV_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        a[i] = (uint32_t)i;
        if (i > 0 && ids[i] < ids[i - 1])
            sorted = 0;
    }
    if (sorted) {
        *out = a;
        return GKV_OK;
    }
    if (n < 64) {
        for (size_t i = 1; i < n; i++) {
            uint32_t x = a[i];
            size_t j = i;
            while (j > 0 && ids[a[j - 1]] > ids[x]) {
                a[j] = a[j - 1];
                j--;
            }
            a[j] = x;
        }
        *out = a;
        return GKV_OK;
    }
    if ((b = gkv__malloc(n * sizeof *b)) == NULL ||
        (cnt = gkv__malloc(2048 * sizeof *cnt)) == NULL) {
        gkv__free(a);
        gkv__free(b);
        return GKV_ENOMEM;
    }
    for (int sh = 0; sh < bits; sh += 11) {
        size_t sum = 0;

        memset(cnt, 0, 2048 * sizeof *cnt);
        for (size_t i = 0; i < n; i++)
            cnt[((ids[a[i]] - lo) >> sh) & 2047]++;
        for (size_t d = 0; d < 2048; d++) {
            size_t c = cnt[d];
            cnt[d] = sum;
            sum += c;
        }
        for (size_t i = 0; i < n; i++)
            b[cnt[((ids[a[i]] - lo) >> sh) & 2047]++] = a[i];
        t = a; a = b; b = t;
    }
    gkv__free(b);
    gkv__free(cnt);
    *out = a;
    return GKV_OK;
}

/* Gets (creating zero-filled if missing) the state companion of 'r'. */
gkv_err
kv__state_get(gkv_store *s, MDB_txn *txn, const char *name, const kv_rec *r,
          const char *suffix, int is_step, kv_rec *st)
{
    char sname[GKV_NAME_MAX + 32];
    gkv_tensor_spec sp;
    gkv_err rc;

    snprintf(sname, sizeof sname, "%s%s", name, suffix);
    if (strlen(sname) > GKV_NAME_MAX)
        return kv__fail(s, GKV_EINVAL, "tensor '%s': name too long for its "
                        "optimizer state '%s'", name, sname);
    rc = kv__rec_get(s, txn, sname, st);
    if (rc != GKV_ENOTFOUND)
        return rc;
    kv__state_rec(r, is_step, st);
    if ((rc = kv__state_fits(s, name, sname, st)) != GKV_OK)
        return rc;
    memset(&sp, 0, sizeof sp);
    sp.dtype = is_step ? GKV_I64 : (r->dtype == GKV_F64 ? GKV_F64 : GKV_F32);
    sp.ndim = is_step ? 0 : r->ndim;
    memcpy(sp.shape, r->shape, sizeof sp.shape);
    sp.lo = r->lo;
    sp.hi = r->hi;
    sp.chunk_rows = r->chunk_rows;    /* same chunk index for the same ID */
    sp.flags = r->flags;
    sp.init = GKV_INIT_ZEROS;
    kv__clear(s);
    return kv__rec_create(s, txn, sname, &sp, st);
}

static void
optim_step(const kv_push *a, const kv_rec *r, unsigned char *w,
           unsigned char *const st[3], gkv_dtype sdt, uint64_t E,
           const double *g)
{
    switch (a->kind) {
    case KV_H_SGD:
        for (uint64_t j = 0; j < E; j++)
            elem_store(r->dtype, w, j, elem_load(r->dtype, w, j) - a->lr * g[j]);
        break;
    case KV_H_ADAGRAD:
        if (r->dtype == GKV_F32 && sdt == GKV_F32 && aligned(w, st[0], 4)) {
            /* the common case, in a loop the compiler can vectorise; the
             * same operations, so the same bits, as the general one */
            float *wv = (float *)w, *sv = (float *)st[0];
            const double lr = a->lr, eps = a->eps;
            for (uint64_t j = 0; j < E; j++) {
                float ss = (float)((double)sv[j] + g[j] * g[j]);
                sv[j] = ss;
                wv[j] = (float)((double)wv[j] - lr * g[j] / (sqrt((double)ss) + eps));
            }
            break;
        }
        for (uint64_t j = 0; j < E; j++) {
            double ss = elem_load(sdt, st[0], j) + g[j] * g[j];
            elem_store(sdt, st[0], j, ss);
            ss = elem_load(sdt, st[0], j);  /* the stored value, as rounded */
            elem_store(r->dtype, w, j, elem_load(r->dtype, w, j) -
                       a->lr * g[j] / (sqrt(ss) + a->eps));
        }
        break;
    case KV_H_ADAM: {
        int64_t t;
        double bc1, bc2;

        memcpy(&t, st[2], 8);
        t++;
        memcpy(st[2], &t, 8);
        bc1 = 1 - pow(a->b1, (double)t);
        bc2 = 1 - pow(a->b2, (double)t);
        for (uint64_t j = 0; j < E; j++) {
            double m = a->b1 * elem_load(sdt, st[0], j) + (1 - a->b1) * g[j];
            double v = a->b2 * elem_load(sdt, st[1], j) + (1 - a->b2) * g[j] * g[j];
            elem_store(sdt, st[0], j, m);
            elem_store(sdt, st[1], j, v);
            m = elem_load(sdt, st[0], j);
            v = elem_load(sdt, st[1], j);
            elem_store(r->dtype, w, j, elem_load(r->dtype, w, j) -
                       a->lr * (m / bc1) / (sqrt(v / bc2) + a->eps));
        }
        break;
    }
    default:
        break;
    }
}

/* Exact integer sum of a and b, saturated to [lo, hi] (which hold the
 * dtype's range; a and b are in it, so a + b cannot overflow int64 unless
 * the dtype is i64). */
static inline int64_t
sat_add(int64_t a, int64_t b, int64_t lo, int64_t hi)
{
    int64_t v;

    if (__builtin_add_overflow(a, b, &v))
        return b < 0 ? INT64_MIN : INT64_MAX;
    return v < lo ? lo : v > hi ? hi : v;
}

/* Integer "add": element by element through memcpy (rows in an LMDB value
 * are only 2-byte aligned, see elem_load), exact in the dtype's own width
 * (never through double, which rounds above 2^53), and saturating at its
 * limits as every integer store does (elem_store clamps). So the result
 * depends neither on where LMDB put the row nor on the path (a write-back
 * copy is aligned, a stored row often not). */
#define ADD_INT(T, lo, hi) do {                                            \
        for (uint64_t j = 0; j < E; j++) {                                  \
            T w_, x_;                                                       \
            memcpy(&w_, (unsigned char *)row + j * sizeof w_, sizeof w_);   \
            memcpy(&x_, (const unsigned char *)in + j * sizeof x_, sizeof x_); \
            w_ = (T)sat_add(w_, x_, (lo), (hi));                            \
            memcpy((unsigned char *)row + j * sizeof w_, &w_, sizeof w_);   \
        }                                                                   \
    } while (0)

static void
row_add(gkv_dtype dt, void *row, const void *in, uint64_t E)
{
    switch (dt) {
    case GKV_I64: ADD_INT(int64_t, INT64_MIN, INT64_MAX); return;
    case GKV_I32: ADD_INT(int32_t, INT32_MIN, INT32_MAX); return;
    case GKV_I8:  ADD_INT(int8_t, INT8_MIN, INT8_MAX); return;
    case GKV_U8:  ADD_INT(uint8_t, 0, UINT8_MAX); return;
    default:      break;
    }
    /* floats: a typed loop only on aligned rows (see elem_load) */
    if (dt == GKV_F32 && aligned(row, in, 4)) {
        float *w = row;
        const float *x = in;
        for (uint64_t j = 0; j < E; j++)
            w[j] += x[j];
    } else {
        for (uint64_t j = 0; j < E; j++)
            elem_store(dt, row, j, elem_load(dt, row, j) + elem_load(dt, in, j));
    }
}
#undef ADD_INT

/* ---- finite inputs ------------------------------------------------------
 *
 * A NaN or an infinity pushed through add or an optimizer stays in the row
 * and, through an optimizer, in its state (adagrad's sum of squares, adam's
 * moments) for good: every later step reads it back. Such a push is
 * refused whole, before anything is applied. assign is not checked: it
 * stores what it is given (a NaN can be data, a missing value), touches no
 * state, and the next assign replaces it all; a registered handler decides
 * for itself. */

/* An element is NaN or infinite when its magnitude bits (all but the
 * sign) are above those of the dtype's largest finite value (f64: of its
 * high word). Signed compares of masked words, through memcpy (rows need
 * not be aligned), which the compiler vectorises over a block of fixed
 * length; the element itself is looked for only from the first block
 * that has one. */
#define SCAN_BLOCK 256
#define SCAN(T, BAD) do {                                                   \
        size_t b_ = 0;                                                      \
        for (; b_ + SCAN_BLOCK <= n; b_ += SCAN_BLOCK) {                    \
            T acc_ = 0;                                                     \
            for (size_t j_ = 0; j_ < SCAN_BLOCK; j_++)                      \
                acc_ |= BAD(p, b_ + j_) ? -1 : 0;                           \
            if (acc_ != 0)                                                  \
                break;                                                      \
        }                                                                   \
        for (j = b_; j < n; j++)                                            \
            if (BAD(p, j))                                                  \
                goto found;                                                 \
    } while (0)

static inline int
bad_f32(const unsigned char *p, size_t j)
{
    int32_t w;
    memcpy(&w, p + 4 * j, 4);
    return (w & 0x7fffffff) > 0x7f7fffff;
}

static inline int
bad_f64(const unsigned char *p, size_t j)
{
    uint64_t w;
    memcpy(&w, p + 8 * j, 8);
    return (int32_t)((w >> 32) & 0x7fffffff) > 0x7fefffff;
}

static inline int
bad_f16(const unsigned char *p, size_t j)
{
    int16_t w;
    memcpy(&w, p + 2 * j, 2);
    return (int16_t)(w & 0x7fff) > 0x7bff;
}

static inline int
bad_bf16(const unsigned char *p, size_t j)
{
    int16_t w;
    memcpy(&w, p + 2 * j, 2);
    return (int16_t)(w & 0x7fff) > 0x7f7f;
}

size_t
gkv_dtype_nonfinite(gkv_dtype dt, const void *rows, size_t n,
                    const char **what)
{
    const unsigned char *p = rows;
    size_t j;
    double x;

    switch (dt) {
    case GKV_F32:  SCAN(int32_t, bad_f32); break;
    case GKV_F64:  SCAN(int32_t, bad_f64); break;
    case GKV_F16:  SCAN(int16_t, bad_f16); break;
    case GKV_BF16: SCAN(int16_t, bad_bf16); break;
    default:       break;
    }
    return SIZE_MAX;
found:
    x = elem_load(dt, p, j);
    if (what != NULL)
        *what = isnan(x) ? "NaN" : x > 0 ? "+inf" : "-inf";
    return j;
}
#undef SCAN
#undef SCAN_BLOCK

/* GKV_EINVAL, naming the row and column, when push a (add or an
 * optimizer, on tensor r) carries a NaN or an infinity; else GKV_OK. */
static gkv_err
push_finite(gkv_store *s, const kv_push *a, const kv_rec *r)
{
    const char *what;
    size_t j;

    if (a->kind < KV_H_ADD || a->kind > KV_H_ADAM || !dtype_is_float(r->dtype) ||
        a->n == 0 || (j = gkv_dtype_nonfinite(r->dtype, a->rows,
                                              a->n * r->row_elems,
                                              &what)) == SIZE_MAX)
        return GKV_OK;
    return kv__fail(s, GKV_EINVAL, "tensor '%s': push '%s': row %llu col %llu "
                    "is %s: refused, nothing applied", a->name,
                    builtin_names[a->kind],
                    (unsigned long long)a->ids[j / r->row_elems],
                    (unsigned long long)(j % r->row_elems), what);
}

gkv_err
kv__push_check(gkv_store *s, const kv_push *a, const kv_rec *r)
{
    if (a->n > SIZE_MAX / r->row_bytes || a->rows_len != a->n * r->row_bytes)
        return len_error(s, a->name, r, a->n, a->rows_len);
    if (a->n > UINT32_MAX)
        return kv__fail(s, GKV_EINVAL, "tensor '%s': push of %zu rows; at most "
                        "%u per call", a->name, a->n, UINT32_MAX);
    for (size_t i = 0; i < a->n; i++)
        if (a->ids[i] < r->lo || a->ids[i] >= r->hi)
            return range_error(s, a->name, r, a->ids[i], i);
    if (a->kind >= KV_H_SGD && a->kind <= KV_H_ADAM && !dtype_is_float(r->dtype))
        return kv__fail(s, GKV_EINVAL, "tensor '%s': optimizer '%s' needs a "
                        "floating dtype, not %s", a->name,
                        builtin_names[a->kind], gkv_dtype_name(r->dtype));
    return push_finite(s, a, r);
}

/* The refusal of an adam push to ID 'id', whose step count t is
 * KV_STEP_MAX or more. */
static gkv_err
step_full(gkv_store *s, const kv_push *a, uint64_t id, int64_t t)
{
    return kv__fail(s, GKV_EINVAL, "tensor '%s': ID %llu has adam step count "
                    "%lld, the most a row may hold (INT64_MAX - 1): the push "
                    "is refused (restore a smaller '%s#adam_t', or "
                    "gkv_opt_reset())", a->name, (unsigned long long)id,
                    (long long)t, a->name);
}

gkv_err
kv__apply_run(gkv_store *s, const kv_push *a, const kv_rec *r,
              const gkv_tensor_desc *desc, const kv_rec *st, size_t nst,
              const uint32_t *order, size_t i, size_t e, uint64_t base_id,
              unsigned char *base, unsigned char *const sbase[3], double *g)
{
    for (; i < e; i++) {
        uint64_t id = a->ids[order[i]];
        unsigned char *row = base + (id - base_id) * r->row_bytes;
        const unsigned char *in = a->rows + (size_t)order[i] * r->row_bytes;
        gkv_err rc;

        switch (a->kind) {
        case KV_H_ASSIGN:
            memcpy(row, in, r->row_bytes);
            break;
        case KV_H_ADD:
            row_add(r->dtype, row, in, r->row_elems);
            break;
        case KV_H_CUSTOM:
            if ((rc = a->fn(a->ctx, desc, id, row, in)) != GKV_OK)
                return kv__fail(s, GKV_EHANDLER, "tensor '%s': push handler "
                                "failed at ID %llu: %s", a->name,
                                (unsigned long long)id, gkv_strerror(rc));
            break;
        default: {
            /* average (or sum) the gradients of every copy of this ID,
             * step once */
            unsigned char *sp[3] = {NULL, NULL, NULL};
            size_t f = i;

            for (uint64_t j = 0; j < r->row_elems; j++)
                g[j] = 0;
            for (; f < e && a->ids[order[f]] == id; f++) {
                const unsigned char *gi = a->rows + (size_t)order[f] * r->row_bytes;
                if (r->dtype == GKV_F32 && aligned(gi, gi, 4)) {
                    const float *gf = (const float *)gi;
                    for (uint64_t j = 0; j < r->row_elems; j++)
                        g[j] += gf[j];
                } else {
                    for (uint64_t j = 0; j < r->row_elems; j++)
                        g[j] += elem_load(r->dtype, gi, j);
                }
            }
            if (f - i > 1 && !a->dups_sum)
                for (uint64_t j = 0; j < r->row_elems; j++)
                    g[j] /= (double)(f - i);
            for (size_t k = 0; k < nst; k++)
                sp[k] = sbase[k] + (id - base_id) * st[k].row_bytes;
            if (a->kind == KV_H_ADAM && nst == 3) {
                /* t + 1 must stay restorable; the direct push's
                 * transaction aborts, wb_push checked before it began */
                int64_t t;
                memcpy(&t, sp[2], 8);
                if (t >= KV_STEP_MAX)
                    return step_full(s, a, id, t);
            }
            optim_step(a, r, row, sp, nst ? st[0].dtype : GKV_F32,
                       r->row_elems, g);
            i = f - 1;
            break;
        }
        }
    }
    return GKV_OK;
}

static gkv_err
push_fn(gkv_store *s, MDB_txn *txn, void *arg)
{
    kv_push *a = arg;
    kv_rec r, st[3];
    size_t nst = kv__state_n(a->kind);
    uint32_t *order = NULL;
    double *g = NULL;
    unsigned char *sbuf = NULL;   /* nst state chunks, sbuf_one bytes each */
    size_t sbuf_one = 0;
    MDB_cursor *cur = NULL;
    gkv_tensor_desc desc;
    gkv_err rc;
    int mrc;

    if ((rc = kv__rec_get(s, txn, a->name, &r)) != GKV_OK ||
        (rc = kv__push_check(s, a, &r)) != GKV_OK || a->n == 0)
        return rc;
    for (size_t k = 0; k < nst; k++) {
        const char *suf = kv__state_suffix(a->kind, k);
        int step = kv__state_is_step(a->kind, k);
        char sname[GKV_NAME_MAX + 32];
        kv_rec want;

        if ((rc = kv__state_get(s, txn, a->name, &r, suf, step, &st[k])) != GKV_OK)
            return rc;
        /* one stored before (a leftover of another tensor of that name,
         * damage) may have other rows: the state chunks and rows below
         * are sized and indexed by the tensor's */
        kv__state_rec(&r, step, &want);
        if (!kv__state_rec_same(&want, &st[k])) {
            snprintf(sname, sizeof sname, "%s%s", a->name, suf);
            return kv__state_mismatch(s, sname, a->name, &want, &st[k]);
        }
        if (kv__chunk_size(&st[k], 0) > sbuf_one)
            sbuf_one = kv__chunk_size(&st[k], 0);
    }
    if ((rc = kv__sort_order(a->ids, a->n, r.lo, r.hi - r.lo, &order)) != GKV_OK)
        return kv__fail(s, rc, "tensor '%s': out of memory sorting %zu IDs",
                        a->name, a->n);
    {
        /* each chunk touched is copied whole (or made, zero-filled) and
         * held in RAM until the commit: IDs spread over a large tensor
         * cost a chunk each. Refuse at once what the disk cannot take
         * (looked up only past 64 MiB: no system call for the usual push) */
        uint64_t nc = 0, prev = UINT64_MAX, per = kv__chunk_size(&r, 0), bytes;
        uint64_t bound = 0;
        for (size_t k = 0; k < nst; k++)
            per += kv__chunk_size(&st[k], 0);
        for (size_t i = 0; i < a->n; i++) {
            uint64_t c = (a->ids[order[i]] - r.lo) / r.chunk_rows;
            nc += c != prev;
            prev = c;
        }
        bytes = nc > UINT64_MAX / per ? UINT64_MAX : nc * per;
        if (bytes > (64ull << 20) && bytes > (bound = kv__room_bound(s))) {
            rc = kv__fail(s, KV_EMAPFULL_FINAL, "tensor '%s': the push "
                          "touches %llu chunks of %llu bytes (each is "
                          "copied whole), more than the disk holding the "
                          "store can take (%llu bytes, the store's file "
                          "included)", a->name, (unsigned long long)nc,
                          (unsigned long long)per, (unsigned long long)bound);
            goto out;
        }
    }
    if ((a->kind >= KV_H_SGD && a->kind <= KV_H_ADAM &&
         (g = gkv__malloc(r.row_elems * sizeof *g)) == NULL) ||
        (nst > 0 && (sbuf = gkv__malloc(nst * sbuf_one)) == NULL)) {
        rc = kv__fail(s, GKV_ENOMEM, "tensor '%s': out of memory", a->name);
        goto out;
    }
    if ((mrc = mdb_cursor_open(txn, s->st_data, &cur)) != 0) {
        rc = kv__fail(s, kv__from_mdb(mrc), "tensor '%s': %s", a->name,
                      mdb_strerror(mrc));
        goto out;
    }
    if (a->kind == KV_H_CUSTOM) {
        memset(&desc, 0, sizeof desc);
        gkv_tensor_info(s, &(gkv_txn){.tx_store = s, .tx_txn = txn}, a->name, &desc);
    }
    for (size_t i = 0; i < a->n;) {
        uint64_t c = (a->ids[order[i]] - r.lo) / r.chunk_rows;
        uint64_t c0 = r.lo + c * r.chunk_rows;   /* first ID of the chunk */
        unsigned char *val, *sval[3] = {NULL, NULL, NULL};
        size_t e;

        for (e = i; e < a->n && a->ids[order[e]] - c0 < r.chunk_rows; e++)
            ;
        /* A pointer LMDB hands out for writing dies at the next write
         * call (it may spill dirty pages or move nodes in a leaf), so the
         * state chunks are copied out first, the row chunk is changed in
         * place and sealed, and only then are the state chunks put back. */
        for (size_t k = 0; k < nst; k++) {
            sval[k] = sbuf + k * sbuf_one;
            if ((rc = state_load(s, cur, &st[k], a->name, c, sval[k])) != GKV_OK)
                goto out;
            sval[k] += KV_CHUNK_HDR;
        }
        if ((rc = chunk_cow(s, cur, &r, a->name, c, &val)) != GKV_OK)
            goto out;
        if ((rc = kv__apply_run(s, a, &r, &desc, st, nst, order, i, e, c0,
                                val + KV_CHUNK_HDR, sval, g)) != GKV_OK)
            goto out;
        kv__chunk_seal(&r, c, val);
        for (size_t k = 0; k < nst; k++) {
            sval[k] -= KV_CHUNK_HDR;
            kv__chunk_seal(&st[k], c, sval[k]);
            if ((rc = chunk_put(s, cur, &st[k], a->name, c, sval[k])) != GKV_OK)
                goto out;
        }
        i = e;
    }
out:
    if (cur != NULL)
        mdb_cursor_close(cur);
    gkv__free(order);
    gkv__free(g);
    gkv__free(sbuf);
    return rc;
}

/* ---- write-back mode: the RAM side (the flushing is in wb.c) ------------- */

struct state_arg { const char *name; enum kv_hkind kind; uint32_t tid; };

static gkv_err
state_create_fn(gkv_store *s, MDB_txn *txn, void *arg)
{
    struct state_arg *a = arg;
    kv_rec r, st;
    gkv_err rc;

    if ((rc = kv__rec_get(s, txn, a->name, &r)) != GKV_OK)
        return rc;
    if (r.tid != a->tid)   /* not the tensor the caller holds a copy of */
        return kv__fail(s, GKV_ENOTFOUND, "tensor '%s' was deleted or "
                        "replaced by another handle", a->name);
    for (size_t i = 0; i < kv__state_n(a->kind); i++)
        if ((rc = kv__state_get(s, txn, a->name, &r,
                                kv__state_suffix(a->kind, i),
                                kv__state_is_step(a->kind, i), &st)) != GKV_OK)
            return rc;
    return GKV_OK;
}

gkv_err
kv__state_create(gkv_store *s, const char *name, enum kv_hkind k,
                 uint32_t tid)
{
    struct state_arg a = {name, k, tid};
    return kv__write(s, state_create_fn, &a);
}

static void
mirror_dirty(kv_mirror *m, const uint64_t *ids, size_t n)
{
    const chunk_div dv = div_make(m->r.chunk_rows);
    for (size_t i = 0; i < n; i++)
        m->dirty[div_chunk(dv, ids[i] - m->r.lo)] = KV_WB_DIRTY;
}

/* Before changing the rows 'ids' of m during a flush: saves the chunks the
 * flush still has to write as they were. */
static void
mirror_touch(gkv_store *s, kv_mirror *m, const uint64_t *ids, size_t n)
{
    const chunk_div dv = div_make(m->r.chunk_rows);
    for (size_t i = 0; i < n; i++)
        kv__wb_touch(s, m, div_chunk(dv, ids[i] - m->r.lo));
}

/* Push into a write-back tensor's mirrors. *done = 0 when 'name' is not
 * (or no longer) in write-back mode: then nothing was done. */
static gkv_err
wb_push(gkv_store *s, const kv_push *a, int *done)
{
    size_t nst = kv__state_n(a->kind);
    uint32_t *order = NULL;
    double *g = NULL;
    unsigned char *undo = NULL;
    gkv_tensor_desc desc;
    kv_rec st[3];
    unsigned char *sbase[3] = {NULL, NULL, NULL};
    kv_mirror *sm[3] = {NULL, NULL, NULL};
    kv_wb *w;
    int copy_locked = 0;
    gkv_err rc;

    *done = 1;
again:
    if (nst > 0) {
        /* Loading the state creates missing companions in the store (a
         * transaction of their own), so check the push first: a bad one
         * changes nothing, as a direct push, whose transaction aborts. */
        int need = 0;

        pthread_rwlock_rdlock(&s->st_wb_lock);
        if ((w = kv__wb_find(s, a->name)) == NULL) {
            pthread_rwlock_unlock(&s->st_wb_lock);
            *done = 0;
            return GKV_OK;
        }
        for (size_t k = 0; k < nst; k++)
            need |= kv__wb_state(w, kv__state_suffix(a->kind, k)) == NULL;
        rc = need ? kv__push_check(s, a, &w->m[0].r) : GKV_OK;
        pthread_rwlock_unlock(&s->st_wb_lock);
        if (rc != GKV_OK || (need && a->n == 0))
            return rc;
        if (need && (rc = kv__wb_state_load(s, a->name, a->kind)) != GKV_OK)
            return rc;
    }
    if (a->kind == KV_H_CUSTOM &&
        (rc = gkv_tensor_info(s, NULL, a->name, &desc)) != GKV_OK)
        return rc;
    pthread_rwlock_wrlock(&s->st_wb_lock);
    if ((w = kv__wb_find(s, a->name)) == NULL) {
        pthread_rwlock_unlock(&s->st_wb_lock);
        *done = 0;
        return GKV_OK;
    }
    const kv_rec *r = &w->m[0].r;
    if ((rc = kv__push_check(s, a, r)) != GKV_OK || a->n == 0)
        goto out;
    for (size_t k = 0; k < nst; k++) {
        if ((sm[k] = kv__wb_state(w, kv__state_suffix(a->kind, k))) == NULL) {
            /* a gkv_opt_reset (or a stop and start) since the load
             * dropped it: load it again */
            pthread_rwlock_unlock(&s->st_wb_lock);
            goto again;
        }
        st[k] = sm[k]->r;
        sbase[k] = sm[k]->rows;
    }
    /* an adam step refused part way would leave the mirrors half pushed:
     * check every row first (kv__apply_run checks again) */
    for (size_t i = 0; a->kind == KV_H_ADAM && i < a->n; i++) {
        int64_t t;
        memcpy(&t, sbase[2] + (a->ids[i] - r->lo) * 8, 8);
        if (t >= KV_STEP_MAX) {
            rc = step_full(s, a, a->ids[i], t);
            goto out;
        }
    }
    if ((rc = kv__sort_order(a->ids, a->n, r->lo, r->hi - r->lo, &order)) != GKV_OK ||
        (a->kind >= KV_H_SGD && a->kind <= KV_H_ADAM &&
         (g = gkv__malloc(r->row_elems * sizeof *g)) == NULL) ||
        (a->kind == KV_H_CUSTOM &&
         (undo = gkv__malloc(a->n * r->row_bytes)) == NULL)) {
        rc = kv__fail(s, GKV_ENOMEM, "tensor '%s': out of memory for a push "
                      "of %zu rows", a->name, a->n);
        goto out;
    }
    if (s->st_wb_fl != NULL) {
        pthread_mutex_lock(&s->st_wb_copy_mu);
        copy_locked = 1;
        mirror_touch(s, &w->m[0], a->ids, a->n);
        for (size_t k = 0; k < nst; k++)
            mirror_touch(s, sm[k], a->ids, a->n);
    }
    /* a custom handler may fail half way: keep the old rows to put back */
    for (size_t i = 0; undo != NULL && i < a->n; i++)
        memcpy(undo + i * r->row_bytes,
               w->m[0].rows + (a->ids[i] - r->lo) * r->row_bytes, r->row_bytes);
    rc = kv__apply_run(s, a, r, &desc, st, nst, order, 0, a->n, r->lo,
                       w->m[0].rows, sbase, g);
    if (rc != GKV_OK) {
        for (size_t i = 0; undo != NULL && i < a->n; i++)
            memcpy(w->m[0].rows + (a->ids[i] - r->lo) * r->row_bytes,
                   undo + i * r->row_bytes, r->row_bytes);
        goto out;
    }
    mirror_dirty(&w->m[0], a->ids, a->n);
    for (size_t k = 0; k < nst; k++)
        mirror_dirty(sm[k], a->ids, a->n);
out:
    if (copy_locked)
        pthread_mutex_unlock(&s->st_wb_copy_mu);
    pthread_rwlock_unlock(&s->st_wb_lock);
    gkv__free(order);
    gkv__free(g);
    gkv__free(undo);
    return rc;
}

/* The RAM copy of 'name' when it is a write-back tensor, or the state
 * companion ("t#adagrad_s") of one that has it loaded; else NULL. Caller
 * holds st_wb_lock. */
static const kv_mirror *
wb_mirror(gkv_store *s, const char *name)
{
    const char *h = strchr(name, '#');
    char base[GKV_NAME_MAX + 1];
    kv_wb *w;

    if ((w = kv__wb_find(s, name)) != NULL)
        return &w->m[0];
    if (h == NULL || (size_t)(h - name) > GKV_NAME_MAX)
        return NULL;
    memcpy(base, name, (size_t)(h - name));
    base[h - name] = '\0';
    return (w = kv__wb_find(s, base)) != NULL ? kv__wb_state(w, h) : NULL;
}

/* Pull (ids != NULL) or range read [a, b) from a write-back mirror.
 * *done = 0 when 'name' is not in write-back mode. */
static gkv_err
wb_read(gkv_store *s, const char *name, int range, const uint64_t *ids,
        size_t n, uint64_t a, uint64_t b, void *dst, size_t len, int *done)
{
    const kv_mirror *m;
    const kv_rec *r;
    gkv_err rc = GKV_OK;

    pthread_rwlock_rdlock(&s->st_wb_lock);
    if ((m = wb_mirror(s, name)) == NULL) {
        pthread_rwlock_unlock(&s->st_wb_lock);
        *done = 0;
        return GKV_OK;
    }
    *done = 1;
    r = &m->r;
    if (range) {
        if (a > b || a < r->lo || b > r->hi)
            rc = kv__fail(s, GKV_ERANGE, "tensor '%s': rows [%llu, %llu) are "
                          "not inside [%llu, %llu)", name, (unsigned long long)a,
                          (unsigned long long)b, (unsigned long long)r->lo,
                          (unsigned long long)r->hi);
        else if (len != (b - a) * r->row_bytes)
            rc = len_error(s, name, r, (size_t)(b - a), len);
        else if (len > 0)   /* dst may be NULL for no rows */
            memcpy(dst, m->rows + (a - r->lo) * r->row_bytes, len);
    } else if (n > SIZE_MAX / r->row_bytes || len != n * r->row_bytes) {
        rc = len_error(s, name, r, n, len);
    } else {
        const size_t rb = r->row_bytes;
        for (size_t i = 0; i < n; i++) {
            if (ids[i] < r->lo || ids[i] >= r->hi) {
                rc = range_error(s, name, r, ids[i], i);
                break;
            }
            memcpy((unsigned char *)dst + i * rb,
                   m->rows + (ids[i] - r->lo) * rb, rb);
        }
    }
    pthread_rwlock_unlock(&s->st_wb_lock);
    return rc;
}

/* Range write into a write-back mirror; *done as above. */
static gkv_err
wb_write(gkv_store *s, const char *name, uint64_t a, uint64_t b,
         const void *rows, size_t len, int *done)
{
    kv_mirror *m;
    kv_wb *w;
    gkv_err rc = GKV_OK;

    pthread_rwlock_wrlock(&s->st_wb_lock);
    if ((w = kv__wb_find(s, name)) == NULL) {
        pthread_rwlock_unlock(&s->st_wb_lock);
        *done = 0;
        return GKV_OK;
    }
    *done = 1;
    m = &w->m[0];
    if (a > b || a < m->r.lo || b > m->r.hi) {
        rc = kv__fail(s, GKV_ERANGE, "tensor '%s': rows [%llu, %llu) are not "
                      "inside [%llu, %llu)", name, (unsigned long long)a,
                      (unsigned long long)b, (unsigned long long)m->r.lo,
                      (unsigned long long)m->r.hi);
    } else if (len != (b - a) * m->r.row_bytes) {
        rc = len_error(s, name, &m->r, (size_t)(b - a), len);
    } else if (a < b) {
        const uint64_t c0 = (a - m->r.lo) / m->r.chunk_rows;
        const uint64_t c1 = (b - 1 - m->r.lo) / m->r.chunk_rows;
        const int fl = s->st_wb_fl != NULL;

        if (fl) {
            pthread_mutex_lock(&s->st_wb_copy_mu);
            for (uint64_t c = c0; c <= c1; c++)
                kv__wb_touch(s, m, c);
        }
        memcpy(m->rows + (a - m->r.lo) * m->r.row_bytes, rows, len);
        for (uint64_t c = c0; c <= c1; c++)
            m->dirty[c] = KV_WB_DIRTY;
        if (fl)
            pthread_mutex_unlock(&s->st_wb_copy_mu);
    }
    pthread_rwlock_unlock(&s->st_wb_lock);
    return rc;
}

/* For a write to the store itself: takes the write-back lock shared when
 * 'name' is not in write-back mode, so that no gkv_writeback_start of it
 * runs until the caller unlocks, and returns 1. Returns 0, holding
 * nothing, when it is in write-back mode (it may have started since the
 * caller looked): then the caller writes into the mirror instead. */
static int
direct_lock(gkv_store *s, const char *name)
{
    pthread_rwlock_rdlock(&s->st_wb_lock);
    if (kv__wb_find(s, name) == NULL)
        return 1;
    pthread_rwlock_unlock(&s->st_wb_lock);
    return 0;
}

static gkv_err state_write(gkv_store *s, const char *name, int range,
                           const uint64_t *ids, size_t n, uint64_t a,
                           uint64_t b, const void *rows, size_t len,
                           const char *handler);

gkv_err
gkv_tensor_push(gkv_store *s, const char *name, const uint64_t *ids, size_t n,
                const void *rows, size_t rows_len, const gkv_push_args *args)
{
    kv_push a;
    const char *h = args && args->handler ? args->handler : "assign";
    gkv_err rc;

    kv__clear(s);
    if (kv__forked(s))          /* a parent's handle after fork() */
        return kv__fork_refused(s);
    if (args != NULL && (args->flags & ~GKV_PUSH_DUPS_SUM) != 0)
        return kv__fail(s, GKV_EINVAL, "tensor '%s': unknown push flags 0x%x",
                        name != NULL ? name : "(null)",
                        args->flags & ~GKV_PUSH_DUPS_SUM);
    if (name != NULL && strchr(name, '#') != NULL)   /* a restore */
        return state_write(s, name, 0, ids, n, 0, 0, rows, rows_len, h);
    if ((rc = kv__name_check(s, name, 0)) != GKV_OK)
        return rc;
    if (n > 0 && (ids == NULL || rows == NULL))
        return kv__fail(s, GKV_EINVAL, "tensor '%s': NULL ids or rows", name);
    memset(&a, 0, sizeof a);
    a.name = name;
    a.ids = ids;
    a.n = n;
    a.rows = rows;
    a.rows_len = rows_len;
    a.kind = KV_H_CUSTOM;
    for (int k = 0; k < (int)(sizeof builtin_names / sizeof *builtin_names); k++)
        if (strcmp(h, builtin_names[k]) == 0)
            a.kind = (enum kv_hkind)k;
    if (a.kind == KV_H_CUSTOM) {
        struct handler *hd;

        pthread_mutex_lock(&s->st_mu);
        for (hd = s->st_handlers; hd != NULL; hd = hd->next)
            if (strcmp(hd->name, h) == 0) {
                a.fn = hd->fn;
                a.ctx = hd->ctx;
                break;
            }
        pthread_mutex_unlock(&s->st_mu);
        if (a.fn == NULL)
            return kv__fail(s, GKV_EHANDLER, "tensor '%s': no push handler "
                            "'%.64s' (built in: assign, add, sgd, adagrad, "
                            "adam; others need gkv_handler_register)", name, h);
    }
    a.lr = args && args->lr != 0 ? args->lr : 0.01;
    a.eps = args && args->eps != 0 ? args->eps : (a.kind == KV_H_ADAM ? 1e-8 : 1e-10);
    a.b1 = args && args->beta1 != 0 ? args->beta1 : 0.9;
    a.b2 = args && args->beta2 != 0 ? args->beta2 : 0.999;
    a.dups_sum = args != NULL && (args->flags & GKV_PUSH_DUPS_SUM) != 0;
    /* only the optimizers read them: assign, add and a registered handler
     * ignore them, whatever they are */
    if ((a.kind == KV_H_SGD || a.kind == KV_H_ADAGRAD || a.kind == KV_H_ADAM) &&
        (!(a.lr > 0 && isfinite(a.lr)) || !(a.eps > 0) ||
         !(a.b1 > 0 && a.b1 < 1) || !(a.b2 > 0 && a.b2 < 1)))
        return kv__fail(s, GKV_EINVAL, "tensor '%s': bad optimizer parameters "
                        "(lr %g, eps %g, beta1 %g, beta2 %g)", name, a.lr, a.eps,
                        a.b1, a.b2);
    for (;;) {
        if (kv__wb_any(s)) {
            int done;
            if ((rc = wb_push(s, &a, &done)) != GKV_OK || done)
                return rc;
        }
        if (direct_lock(s, name))
            break;
    }
    rc = kv__write_named(s, name, NULL, push_fn, &a);
    pthread_rwlock_unlock(&s->st_wb_lock);
    return rc;
}

gkv_err
gkv_handler_register(gkv_store *s, const char *name, gkv_push_fn fn, void *ctx)
{
    struct handler *h;

    kv__clear(s);
    if (name == NULL || *name == '\0' || strlen(name) > 63 || fn == NULL)
        return kv__fail(s, GKV_EINVAL, "handler name must be 1..63 characters "
                        "and the function non-NULL");
    for (size_t k = 0; k < sizeof builtin_names / sizeof *builtin_names; k++)
        if (strcmp(name, builtin_names[k]) == 0)
            return kv__fail(s, GKV_EINVAL, "'%s' is a built-in handler", name);
    pthread_mutex_lock(&s->st_mu);
    for (h = s->st_handlers; h != NULL; h = h->next)
        if (strcmp(h->name, name) == 0)
            break;
    if (h == NULL) {
        if ((h = gkv__calloc(1, sizeof *h)) == NULL) {
            pthread_mutex_unlock(&s->st_mu);
            return kv__fail(s, GKV_ENOMEM, "out of memory registering '%s'", name);
        }
        snprintf(h->name, sizeof h->name, "%s", name);
        h->next = s->st_handlers;
        s->st_handlers = h;
    }
    h->fn = fn;
    h->ctx = ctx;
    pthread_mutex_unlock(&s->st_mu);
    return GKV_OK;
}

/* ---- range write --------------------------------------------------------- */

struct write_arg {
    const char *name;
    uint64_t a, b;
    const unsigned char *rows;
    size_t rows_len;
};

/* Checks a range write of rows [a, b), len bytes, against r. */
static gkv_err
write_check(gkv_store *s, const char *name, const kv_rec *r, uint64_t a,
            uint64_t b, size_t len)
{
    if (a > b || a < r->lo || b > r->hi)
        return kv__fail(s, GKV_ERANGE, "tensor '%s': rows [%llu, %llu) are not "
                        "inside [%llu, %llu)", name, (unsigned long long)a,
                        (unsigned long long)b, (unsigned long long)r->lo,
                        (unsigned long long)r->hi);
    if (b - a > SIZE_MAX / r->row_bytes || len != (b - a) * r->row_bytes)
        return len_error(s, name, r, b - a, len);
    return GKV_OK;
}

static gkv_err
write_fn(gkv_store *s, MDB_txn *txn, void *arg)
{
    struct write_arg *w = arg;
    const unsigned char *in = w->rows;
    MDB_cursor *cur = NULL;
    kv_rec r;
    gkv_err rc;
    int mrc;

    if ((rc = kv__rec_get(s, txn, w->name, &r)) != GKV_OK ||
        (rc = write_check(s, w->name, &r, w->a, w->b, w->rows_len)) != GKV_OK)
        return rc;
    if ((mrc = mdb_cursor_open(txn, s->st_data, &cur)) != 0)
        return kv__fail(s, kv__from_mdb(mrc), "tensor '%s': %s", w->name,
                        mdb_strerror(mrc));
    for (uint64_t row = w->a - r.lo; row < w->b - r.lo;) {
        uint64_t c = row / r.chunk_rows, off = row - c * r.chunk_rows;
        uint64_t nr = kv__chunk_nrows(&r, c), take = nr - off;
        unsigned char *val;

        if (take > w->b - r.lo - row)
            take = w->b - r.lo - row;
        if (off == 0 && take == nr) {
            /* the whole chunk is new: no need to read the old one */
            unsigned char kb[KV_KEY_LEN];
            MDB_val k = {KV_KEY_LEN, kb}, d = {kv__chunk_size(&r, c), NULL};

            kv__key(kb, r.tid, c);
            if ((mrc = mdb_cursor_put(cur, &k, &d, MDB_RESERVE)) != 0) {
                rc = kv__fail(s, kv__from_mdb(mrc), "tensor '%s': writing chunk "
                              "%llu: %s", w->name, (unsigned long long)c,
                              mdb_strerror(mrc));
                break;
            }
            val = d.mv_data;
        } else if ((rc = chunk_cow(s, cur, &r, w->name, c, &val)) != GKV_OK) {
            break;
        }
        memcpy(val + KV_CHUNK_HDR + off * r.row_bytes, in, take * r.row_bytes);
        kv__chunk_seal(&r, c, val);
        in += take * r.row_bytes;
        row += take;
    }
    mdb_cursor_close(cur);
    return rc;
}

gkv_err
gkv_tensor_write(gkv_store *s, const char *name, uint64_t a, uint64_t b,
                 const void *rows, size_t rows_len)
{
    struct write_arg w = {name, a, b, rows, rows_len};
    gkv_err rc;

    kv__clear(s);
    if (kv__forked(s))          /* a parent's handle after fork() */
        return kv__fork_refused(s);
    if (name != NULL && strchr(name, '#') != NULL)   /* a restore */
        return state_write(s, name, 1, NULL, 0, a, b, rows, rows_len, NULL);
    if ((rc = kv__name_check(s, name, 0)) != GKV_OK)
        return rc;
    if (a < b && rows == NULL)
        return kv__fail(s, GKV_EINVAL, "tensor '%s': NULL rows", name);
    for (;;) {
        if (kv__wb_any(s)) {
            int done;
            if ((rc = wb_write(s, name, a, b, rows, rows_len, &done)) != GKV_OK ||
                done)
                return rc;
        }
        if (direct_lock(s, name))
            break;
    }
    rc = kv__write_named(s, name, NULL, write_fn, &w);
    pthread_rwlock_unlock(&s->st_wb_lock);
    return rc;
}

/* ---- writes to optimizer state (restoring a checkpoint) ------------------
 *
 * A state companion ("T#adam_m") takes assign pushes and range writes, so
 * that saved state can be put back. Its tensor T must exist (with a
 * floating dtype); a missing companion is created zero-filled, in the same
 * transaction, with the rows kv__state_rec() gives it. In write-back mode the
 * write goes to the companion's RAM copy (loaded first, as an optimizer
 * push loads it), so no flush can undo it. */

struct state_write_arg {
    const char *base;         /* T */
    enum kv_hkind kind;       /* its optimizer */
    size_t idx;               /* companion index, kv__state_suffix(kind, idx) */
    int range;                /* 1: rows [w.a, w.b); 0: by ID (push) */
    kv_push p;                /* name = the companion, handler assign */
    struct write_arg w;       /* name = the companion */
};

static int
is_step_state(const struct state_write_arg *a)
{
    return kv__state_is_step(a->kind, a->idx);
}

/* GKV_EINVAL unless tensor 'base' (record r) of companion 'sname' is
 * floating: optimizers, and so their state, need it. */
static gkv_err
state_float(gkv_store *s, const char *sname, const char *base,
            const kv_rec *r)
{
    if (!dtype_is_float(r->dtype))
        return kv__fail(s, GKV_EINVAL, "optimizer state '%s': tensor '%s' is "
                        "%s; optimizers, and so their state, need a floating "
                        "dtype", sname, base, gkv_dtype_name(r->dtype));
    return GKV_OK;
}

/* The record of tensor 'base' of companion 'sname' in txn: it must exist
 * (GKV_ENOTFOUND, named) and be floating (GKV_EINVAL). */
static gkv_err
state_base(gkv_store *s, MDB_txn *txn, const char *sname, const char *base,
           kv_rec *r)
{
    gkv_err rc = kv__rec_get(s, txn, base, r);

    if (rc == GKV_ENOTFOUND)
        return kv__fail(s, GKV_ENOTFOUND, "optimizer state '%s': no tensor "
                        "'%s' in store '%s'", sname, base, s->st_path);
    return rc != GKV_OK ? rc : state_float(s, sname, base, r);
}

/* Checks the write against tensor r (the base): its dtype, and lengths and
 * IDs against the companion's rows (*want). */
static gkv_err
state_check(gkv_store *s, const struct state_write_arg *a, const kv_rec *r,
            kv_rec *want)
{
    const char *sname = a->p.name;
    gkv_err rc;

    if ((rc = state_float(s, sname, a->base, r)) != GKV_OK)
        return rc;
    kv__state_rec(r, is_step_state(a), want);
    if (a->range)
        return write_check(s, sname, want, a->w.a, a->w.b, a->w.rows_len);
    return kv__push_check(s, &a->p, want);
}

gkv_err
gkv_opt_state_info(gkv_store *s, gkv_txn *tx, const char *name,
                   gkv_tensor_desc *out, int *exists)
{
    char base[GKV_NAME_MAX + 1];
    enum kv_hkind k;
    size_t idx;
    kv_snap sn;
    kv_rec r, st;
    gkv_err rc;

    kv__clear(s);
    *exists = 0;
    if ((rc = kv__state_parse(s, name, base, &k, &idx)) != GKV_OK ||
        (rc = kv__snap_begin(s, tx, &sn)) != GKV_OK)
        return rc;
    if ((rc = state_base(s, sn.txn, name, base, &r)) == GKV_OK) {
        if ((rc = kv__rec_get(s, sn.txn, name, &st)) == GKV_OK) {
            *exists = 1;
        } else if (rc == GKV_ENOTFOUND) {
            /* what it gets when created; none when it never can be */
            kv__clear(s);
            kv__state_rec(&r, kv__state_is_step(k, idx), &st);
            rc = kv__state_fits(s, base, name, &st);
        }
        if (rc == GKV_OK)
            kv__rec_to_desc(name, &st, out);
    }
    kv__snap_end(&sn);
    return rc;
}

static gkv_err
state_write_fn(gkv_store *s, MDB_txn *txn, void *arg)
{
    struct state_write_arg *a = arg;
    kv_rec r, want, st;
    gkv_err rc;

    if ((rc = state_base(s, txn, a->p.name, a->base, &r)) != GKV_OK ||
        (rc = state_check(s, a, &r, &want)) != GKV_OK)
        return rc;
    if (a->range ? a->w.a == a->w.b : a->p.n == 0)
        return GKV_OK;    /* nothing to write: no companion to create */
    if ((rc = kv__state_get(s, txn, a->base, &r,
                            kv__state_suffix(a->kind, a->idx),
                            is_step_state(a), &st)) != GKV_OK)
        return rc;
    if (!kv__state_rec_same(&want, &st))
        return kv__state_mismatch(s, a->p.name, a->base, &want, &st);
    return a->range ? write_fn(s, txn, &a->w) : push_fn(s, txn, &a->p);
}

/* The write into the companion's RAM copy when a->base is in write-back
 * mode on this handle; *done = 0 (nothing done) when it is not. */
static gkv_err
wb_state_write(gkv_store *s, struct state_write_arg *a, int *done)
{
    const char *suf = kv__state_suffix(a->kind, a->idx);
    kv_rec want;
    kv_mirror *m;
    kv_wb *w;
    int need, fl;
    gkv_err rc;

    *done = 1;
again:
    /* check first: loading the state may create companions in the store */
    pthread_rwlock_rdlock(&s->st_wb_lock);
    if ((w = kv__wb_find(s, a->base)) == NULL) {
        pthread_rwlock_unlock(&s->st_wb_lock);
        *done = 0;
        return GKV_OK;
    }
    rc = state_check(s, a, &w->m[0].r, &want);
    need = kv__wb_state(w, suf) == NULL;
    pthread_rwlock_unlock(&s->st_wb_lock);
    if (rc != GKV_OK || (a->range ? a->w.a == a->w.b : a->p.n == 0))
        return rc;
    if (need && (rc = kv__wb_state_load(s, a->base, a->kind)) != GKV_OK)
        return rc;
    pthread_rwlock_wrlock(&s->st_wb_lock);
    if ((w = kv__wb_find(s, a->base)) == NULL) {
        pthread_rwlock_unlock(&s->st_wb_lock);
        *done = 0;
        return GKV_OK;
    }
    if ((rc = state_check(s, a, &w->m[0].r, &want)) != GKV_OK)
        goto out;
    if ((m = kv__wb_state(w, suf)) == NULL) {
        /* a gkv_opt_reset (or a stop and start) since the load dropped
         * it: load it again */
        pthread_rwlock_unlock(&s->st_wb_lock);
        goto again;
    }
    if (!kv__state_rec_same(&want, &m->r)) {
        rc = kv__state_mismatch(s, a->p.name, a->base, &want, &m->r);
        goto out;
    }
    if ((fl = s->st_wb_fl != NULL))
        pthread_mutex_lock(&s->st_wb_copy_mu);
    if (a->range) {
        const uint64_t c0 = (a->w.a - m->r.lo) / m->r.chunk_rows;
        const uint64_t c1 = (a->w.b - 1 - m->r.lo) / m->r.chunk_rows;

        for (uint64_t c = c0; fl && c <= c1; c++)
            kv__wb_touch(s, m, c);
        memcpy(m->rows + (a->w.a - m->r.lo) * m->r.row_bytes, a->w.rows,
               a->w.rows_len);
        for (uint64_t c = c0; c <= c1; c++)
            m->dirty[c] = KV_WB_DIRTY;
    } else {
        const size_t rb = m->r.row_bytes;

        if (fl)
            mirror_touch(s, m, a->p.ids, a->p.n);
        for (size_t i = 0; i < a->p.n; i++)   /* the last of an ID wins */
            memcpy(m->rows + (a->p.ids[i] - m->r.lo) * rb, a->p.rows + i * rb,
                   rb);
        mirror_dirty(m, a->p.ids, a->p.n);
    }
    if (fl)
        pthread_mutex_unlock(&s->st_wb_copy_mu);
out:
    pthread_rwlock_unlock(&s->st_wb_lock);
    return rc;
}

/* A step count (adam_t) below 0 would make the bias correction divide by
 * zero or flip its sign, and INT64_MAX cannot be stepped (t + 1 would
 * overflow): refused, before anything is written. KV_STEP_MAX bounds what
 * an adam push leaves too (kv__apply_run), so every count a checkpoint
 * can hold restores. */
static gkv_err
steps_check(gkv_store *s, const char *name, const uint64_t *ids, uint64_t a,
            uint64_t count, const void *rows, size_t len)
{
    /* rows past count are for the length check to refuse */
    for (size_t i = 0; i + 8 <= len && i / 8 < count; i += 8) {
        int64_t t;

        memcpy(&t, (const unsigned char *)rows + i, 8);
        if (t < 0 || t > KV_STEP_MAX)
            return kv__fail(s, GKV_EINVAL, "optimizer state '%s': the row of "
                            "ID %llu holds step count %lld; step counts are 0 "
                            "to %lld (INT64_MAX - 1)", name, (unsigned long long)
                            (ids != NULL ? ids[i / 8] : a + i / 8),
                            (long long)t, (long long)KV_STEP_MAX);
    }
    return GKV_OK;
}

/* The values an optimizer's row state may hold: a sum of squares
 * (adagrad_s) or a second moment (adam_v) is finite and >= 0 (a negative
 * one makes the next step's square root NaN), a first moment (adam_m)
 * finite. Refused, naming the row's ID, before anything is written. The
 * rows are f64 for an f64 tensor 'base', else f32; a length that does not
 * fit is left to the length check. */
static gkv_err
moments_check(gkv_store *s, const char *name, const char *base, int nonneg,
              const uint64_t *ids, uint64_t a, uint64_t count,
              const void *rows, size_t len)
{
    gkv_tensor_desc d;
    size_t es;

    if (gkv_tensor_info(s, NULL, base, &d) != GKV_OK || !dtype_is_float(d.dtype)) {
        kv__clear(s);                  /* the write names what is wrong */
        return GKV_OK;
    }
    es = d.dtype == GKV_F64 ? 8 : 4;
    if (len != count * d.row_elems * es)
        return GKV_OK;
    for (uint64_t i = 0; i < count * d.row_elems; i++) {
        double v;

        if (es == 8) {
            memcpy(&v, (const unsigned char *)rows + i * 8, 8);
        } else {
            float f;
            memcpy(&f, (const unsigned char *)rows + i * 4, 4);
            v = f;
        }
        if (!isfinite(v) || (nonneg && v < 0))
            return kv__fail(s, GKV_EINVAL, "optimizer state '%s': the row of "
                            "ID %llu holds %g (element %llu); it must be %s",
                            name, (unsigned long long)(ids != NULL ?
                            ids[i / d.row_elems] : a + i / d.row_elems), v,
                            (unsigned long long)(i % d.row_elems), nonneg ?
                            "finite and 0 or more" : "finite");
    }
    return GKV_OK;
}

static gkv_err
state_write(gkv_store *s, const char *name, int range, const uint64_t *ids,
            size_t n, uint64_t a, uint64_t b, const void *rows, size_t len,
            const char *handler)
{
    struct state_write_arg sw;
    char base[GKV_NAME_MAX + 1];
    gkv_err rc;

    memset(&sw, 0, sizeof sw);
    if ((rc = kv__state_parse(s, name, base, &sw.kind, &sw.idx)) != GKV_OK)
        return rc;
    if (handler != NULL && strcmp(handler, "assign") != 0)
        return kv__fail(s, GKV_EINVAL, "optimizer state '%s': only assign "
                        "writes it (restoring saved state); push handler "
                        "'%.64s' is refused", name, handler);
    if (range ? a < b && rows == NULL : n > 0 && (ids == NULL || rows == NULL))
        return kv__fail(s, GKV_EINVAL, "optimizer state '%s': NULL %s", name,
                        range ? "rows" : "ids or rows");
    if (is_step_state(&sw) && rows != NULL &&
        (rc = steps_check(s, name, range ? NULL : ids, a, range ? b - a : n,
                          rows, len)) != GKV_OK)
        return rc;
    if (!is_step_state(&sw) && rows != NULL &&
        (rc = moments_check(s, name, base, sw.kind == KV_H_ADAGRAD || sw.idx == 1,
                            range ? NULL : ids, a, range ? b - a : n, rows,
                            len)) != GKV_OK)
        return rc;
    sw.base = base;
    sw.range = range;
    sw.p.name = name;
    sw.p.ids = ids;
    sw.p.n = n;
    sw.p.rows = rows;
    sw.p.rows_len = len;
    sw.p.kind = KV_H_ASSIGN;
    sw.w.name = name;
    sw.w.a = a;
    sw.w.b = b;
    sw.w.rows = rows;
    sw.w.rows_len = len;
    for (;;) {
        if (kv__wb_any(s)) {
            int done;
            if ((rc = wb_state_write(s, &sw, &done)) != GKV_OK || done)
                return rc;
        }
        if (direct_lock(s, base))   /* the tensor: no write-back start now */
            break;
    }
    rc = kv__write_named(s, base, NULL, state_write_fn, &sw);
    pthread_rwlock_unlock(&s->st_wb_lock);
    return rc;
}
