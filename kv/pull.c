/* pull.c - reading rows from the store: pull (the gather by chunk),
 * range read and row views. */
#include <string.h>
#include "kv/kv_int.h"

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
gkv_err
gkv_tensor_pull(gkv_store *s, gkv_txn *tx, const char *name,
                const uint64_t *ids, size_t n, void *dst, size_t dst_len)
{
    const unsigned char *src[PULL_BATCH];
    unsigned char *out = dst;
    ptab pt = {0};
    kv_guard g;
    kv_snap sn;
    kv_rec r;
    gkv_err rc;

    KV_GUARD_INIT(&g);
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
        if ((rc = kv__wb_read(s, name, 0, ids, n, 0, 0, dst, dst_len, &done)) != GKV_OK ||
            done)
            return rc;
    }
    if ((rc = kv__snap_begin(s, tx, &sn)) != GKV_OK)
        return rc;
    KV_GUARD_BEGIN(s, &g, caught);
    if ((rc = kv__rec_get(s, sn.txn, name, &r)) != GKV_OK)
        goto out;
    if (n > SIZE_MAX / (r.row_bytes ? r.row_bytes : 1) || dst_len != n * r.row_bytes) {
        rc = kv__len_error(s, name, &r, n, dst_len);
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
        const kv_chunk_div dv = kv__div_make(r.chunk_rows);
        const unsigned char *zero = s->st_zero;

        for (size_t i = 0; i < n; i += PULL_BATCH) {
            size_t m = n - i < PULL_BATCH ? n - i : PULL_BATCH;

            /* resolve and prefetch a batch, then copy it: the copies'
             * cache misses overlap instead of queueing behind lookups */
            for (size_t j = 0; j < m; j++) {
                uint64_t id = ids[i + j], row, c;
                size_t h;

                if (id < r.lo || id >= r.hi) {
                    rc = kv__range_error(s, name, &r, id, i + j);
                    goto out;
                }
                row = id - r.lo;
                c = kv__div_chunk(dv, row);
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
    KV_GUARD_END(&g);
    ptab_free(&pt);
    kv__snap_end(&sn);
    return rc;
caught:
    rc = kv__guard_caught(&g);
    goto out;
}

/* Copies rows [a, b) of tensor 'name' (record r) to out. */
static gkv_err
read_chunks(gkv_store *s, MDB_txn *txn, const kv_rec *r, const char *name,
            uint64_t a, uint64_t b, unsigned char *out)
{
    gkv_err rc;

    for (uint64_t row = a - r->lo; row < b - r->lo;) {
        uint64_t c = row / r->chunk_rows, off = row - c * r->chunk_rows;
        uint64_t take = kv__chunk_nrows(r, c) - off;
        const unsigned char *v;

        if (take > b - r->lo - row)
            take = b - r->lo - row;
        if ((rc = chunk_get(s, txn, r, name, c, &v)) != GKV_OK)
            return rc;
        if (v == NULL)
            memset(out, 0, take * r->row_bytes);
        else
            memcpy(out, v + KV_CHUNK_HDR + off * r->row_bytes, take * r->row_bytes);
        out += take * r->row_bytes;
        row += take;
    }
    return GKV_OK;
}

gkv_err
gkv_tensor_read(gkv_store *s, gkv_txn *tx, const char *name,
                uint64_t a, uint64_t b, void *dst, size_t dst_len)
{
    kv_guard g;
    kv_snap sn;
    kv_rec r;
    gkv_err rc;

    KV_GUARD_INIT(&g);
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
        if ((rc = kv__wb_read(s, name, 1, NULL, 0, a, b, dst, dst_len, &done)) != GKV_OK ||
            done)
            return rc;
    }
    if ((rc = kv__snap_begin(s, tx, &sn)) != GKV_OK)
        return rc;
    KV_GUARD_BEGIN(s, &g, caught);
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
        rc = kv__len_error(s, name, &r, b - a, dst_len);
        goto out;
    }
    rc = read_chunks(s, sn.txn, &r, name, a, b, dst);
out:
    KV_GUARD_END(&g);
    kv__snap_end(&sn);
    return rc;
caught:
    rc = kv__guard_caught(&g);
    goto out;
}

/* gkv_row_view's lookups, under a guard (kv__guarded). */
struct view_arg { const char *name; uint64_t id; const void **row; };

static gkv_err
view_fn(gkv_store *s, MDB_txn *txn, void *arg)
{
    struct view_arg *a = arg;
    const unsigned char *v;
    kv_rec r;
    gkv_err rc;
    uint64_t c;

    if ((rc = kv__rec_get(s, txn, a->name, &r)) != GKV_OK)
        return rc;
    if (a->id < r.lo || a->id >= r.hi)
        return kv__range_error(s, a->name, &r, a->id, 0);
    c = (a->id - r.lo) / r.chunk_rows;
    if ((rc = chunk_get(s, txn, &r, a->name, c, &v)) != GKV_OK)
        return rc;
    *a->row = v == NULL ? s->st_zero
                        : v + KV_CHUNK_HDR +
                          (a->id - r.lo - c * r.chunk_rows) * r.row_bytes;
    return GKV_OK;
}

gkv_err
gkv_row_view(gkv_txn *tx, const char *name, uint64_t id, const void **row)
{
    gkv_store *s;
    gkv_err rc;

    *row = NULL;
    if (tx == NULL)
        return kv__fail(NULL, GKV_EINVAL, "gkv_row_view: no snapshot (a "
                        "borrowed row lives as long as its gkv_txn)");
    s = tx->tx_store;
    kv__clear(s);
    if ((rc = kv__name_check(s, name, 1)) != GKV_OK ||
        (rc = kv__guard_held(tx)) != GKV_OK)
        return rc;
    rc = kv__guarded(s, tx->tx_txn, view_fn,
                     &(struct view_arg){name, id, row});
    if (rc != GKV_OK)
        *row = NULL;
    return rc;
}
