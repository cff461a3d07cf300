/* chunk.c - chunk values: sealing and stamping their header, a
 * writable copy inside a write transaction, and the messages for IDs
 * outside a tensor or lengths that do not fit its rows. */
#include <stdio.h>
#include <string.h>
#include "kv/kv_int.h"

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
kv__range_error(gkv_store *s, const char *name, const kv_rec *r, uint64_t id, size_t i)
{
    return kv__fail(s, GKV_ERANGE, "tensor '%s': ID %llu (index %zu) is outside "
                    "[%llu, %llu)", name, (unsigned long long)id, i,
                    (unsigned long long)r->lo, (unsigned long long)r->hi);
}

gkv_err
kv__len_error(gkv_store *s, const char *name, const kv_rec *r, uint64_t n, size_t len)
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

/* ---- writable chunks ----------------------------------------------------- */

/* Makes chunk c of r writable in 'txn' and returns its value in *val, with
 * the current rows in place (zeros for an unwritten chunk). LMDB copies
 * on write: the rows are copied once from the old pages; pointers into the
 * map obtained earlier in this txn stay valid until commit. */
gkv_err
kv__chunk_cow(gkv_store *s, MDB_cursor *cur, const kv_rec *r, const char *name,
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
