/* write.c - range write (gkv_tensor_write) into the store. */
#include <string.h>
#include "kv/kv_int.h"

/* Checks a range write of rows [a, b), len bytes, against r. */
gkv_err
kv__write_check(gkv_store *s, const char *name, const kv_rec *r, uint64_t a,
                uint64_t b, size_t len)
{
    if (a > b || a < r->lo || b > r->hi)
        return kv__fail(s, GKV_ERANGE, "tensor '%s': rows [%llu, %llu) are not "
                        "inside [%llu, %llu)", name, (unsigned long long)a,
                        (unsigned long long)b, (unsigned long long)r->lo,
                        (unsigned long long)r->hi);
    if (b - a > SIZE_MAX / r->row_bytes || len != (b - a) * r->row_bytes)
        return kv__len_error(s, name, r, b - a, len);
    return GKV_OK;
}

gkv_err
kv__write_fn(gkv_store *s, MDB_txn *txn, void *arg)
{
    struct kv_write_arg *w = arg;
    const unsigned char *in = w->rows;
    MDB_cursor *cur = NULL;
    kv_rec r;
    gkv_err rc;
    int mrc;

    if ((rc = kv__rec_get(s, txn, w->name, &r)) != GKV_OK ||
        (rc = kv__write_check(s, w->name, &r, w->a, w->b, w->rows_len)) != GKV_OK)
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
        } else if ((rc = kv__chunk_cow(s, cur, &r, w->name, c, &val)) != GKV_OK) {
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
    struct kv_write_arg w = {name, a, b, rows, rows_len};
    gkv_err rc;

    kv__clear(s);
    if (kv__forked(s))          /* a parent's handle after fork() */
        return kv__fork_refused(s);
    if (name != NULL && strchr(name, '#') != NULL)   /* a restore */
        return kv__state_write(s, name, 1, NULL, 0, a, b, rows, rows_len, NULL);
    if ((rc = kv__name_check(s, name, 0)) != GKV_OK)
        return rc;
    if (a < b && rows == NULL)
        return kv__fail(s, GKV_EINVAL, "tensor '%s': NULL rows", name);
    for (;;) {
        if (kv__wb_any(s)) {
            int done;
            if ((rc = kv__wb_write(s, name, a, b, rows, rows_len, &done)) != GKV_OK ||
                done)
                return rc;
        }
        if (kv__direct_lock(s, name))
            break;
    }
    rc = kv__write_named(s, name, NULL, kv__write_fn, &w);
    pthread_rwlock_unlock(&s->st_wb_lock);
    return rc;
}
