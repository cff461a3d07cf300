/* push.c - push into the store: the ID order, the write transaction
 * (kv__push_fn: each chunk touched copied once, its state companions beside
 * it) and gkv_tensor_push, which picks the write-back copy or the store. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "kv/kv_int.h"

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

gkv_err
kv__push_fn(gkv_store *s, MDB_txn *txn, void *arg)
{
    kv_push *a = arg;
    kv_rec r, st[3];
    size_t nst = kv__state_n(a->kind);
    uint32_t *order = NULL;
    double *g = NULL;
    unsigned char *sbuf = NULL;   /* nst state chunks, sbuf_one bytes each */
    size_t sbuf_one = 0;
    kv_slice sl = {0};
    uint64_t nc = 0;              /* chunks the push touches */
    gkv_tensor_desc desc;
    gkv_err rc;

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
        uint64_t prev = UINT64_MAX, per = kv__chunk_size(&r, 0), bytes;
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
    if (a->kind == KV_H_CUSTOM) {
        memset(&desc, 0, sizeof desc);
        gkv_tensor_info(s, &(gkv_txn){.tx_store = s, .tx_txn = txn}, a->name, &desc);
    }
    /* a slice per a->slice chunk values written, the state's included
     * (kv__slice_begin): LMDB's sorted dirty list stays short however
     * fragmented its free list is. A push of one slice or less is not
     * nested: that would only cost. */
    if ((rc = kv__slice_begin(s, txn, nc * (1 + nst) > a->slice ? a->slice
                                                                 : 0,
                              &sl)) != GKV_OK)
        goto out;
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
            if ((rc = state_load(s, sl.cur, &st[k], a->name, c, sval[k])) != GKV_OK)
                goto failed;
            sval[k] += KV_CHUNK_HDR;
        }
        if ((rc = kv__chunk_cow(s, sl.cur, &r, a->name, c, &val)) != GKV_OK)
            goto failed;
        if ((rc = kv__apply_run(s, a, &r, &desc, st, nst, order, i, e, c0,
                                val + KV_CHUNK_HDR, sval, g, NULL)) != GKV_OK)
            goto failed;
        kv__chunk_seal(&r, c, val);
        for (size_t k = 0; k < nst; k++) {
            sval[k] -= KV_CHUNK_HDR;
            kv__chunk_seal(&st[k], c, sval[k]);
            if ((rc = chunk_put(s, sl.cur, &st[k], a->name, c, sval[k])) != GKV_OK)
                goto failed;
        }
        if ((rc = kv__slice_step(&sl, e, 1 + nst)) != GKV_OK)
            goto failed;
        i = e;
        continue;
    failed:
        /* a slice that found LMDB's dirty list full: its chunks again,
         * from the first, in the parent (kv__slice_retry) */
        if ((rc = kv__slice_retry(&sl, rc, &i)) != GKV_OK)
            goto out;
    }
out:
    rc = kv__slice_end(&sl, rc);
    gkv__free(order);
    gkv__free(g);
    gkv__free(sbuf);
    return rc;
}
size_t kv__push_slice = 16384;

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
        return kv__state_write(s, name, 0, ids, n, 0, 0, rows, rows_len, h);
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
    if ((rc = kv__handler_find(s, h, &a)) != GKV_OK)
        return rc;
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
            if ((rc = kv__wb_push(s, &a, &done)) != GKV_OK || done)
                return rc;
        }
        if (kv__direct_lock(s, name))
            break;
    }
    a.slice = kv__push_slice;
    rc = kv__write_named_sliced(s, name, NULL, kv__push_fn, &a, &a.slice);
    pthread_rwlock_unlock(&s->st_wb_lock);
    return rc;
}
