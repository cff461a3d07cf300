/* wb_rows.c - write-back mode, the RAM side: push, pull, range read and
 * range write on a tensor's RAM copy (the flushing is in wb.c). */
#include <string.h>
#include "kv/kv_int.h"

/* A chunk still pending had its rows saved by kv__mirror_touch: it stays
 * pending, so that later pushes save theirs, and the flush marks it dirty
 * when it ends. (kv__mirror_touch is in wb.c, with the flush's stage.) */
void
kv__mirror_dirty(kv_mirror *m, const uint64_t *ids, size_t n)
{
    const kv_chunk_div dv = kv__div_make(m->r.chunk_rows);
    for (size_t i = 0; i < n; i++) {
        uint8_t *d = &m->dirty[kv__div_chunk(dv, ids[i] - m->r.lo)];
        if (*d != KV_WB_PENDING)
            *d = KV_WB_DIRTY;
    }
}

/* The undo log of a push (kv__apply_run), len bytes. A large one is
 * mapped with huge pages, as the mirrors are, and kept for the next push
 * (st_wb_undo) up to UNDO_KEEP bytes, freed when the last tensor leaves
 * write-back mode and with the write-back copies: faulting in the 4 KiB
 * pages of a fresh 100 MB log doubled the time of a push of 100,000 rows
 * of 512 bytes. A log over UNDO_KEEP (one outlier push) is not kept
 * pinned. Caller holds st_wb_lock for writing. */
#define UNDO_BIG  (4u << 20)
#define UNDO_KEEP (256u << 20)

static unsigned char *
undo_get(gkv_store *s, size_t len)
{
    if (len < UNDO_BIG)
        return gkv__malloc(len);
    if (s->st_wb_undo_len < len) {
        kv__wb_undo_drop(s);
        if ((s->st_wb_undo = kv__big_alloc(len)) == NULL)
            return NULL;
        s->st_wb_undo_len = len;
    }
    return s->st_wb_undo;
}

/* Gives back undo log u (from undo_get). Caller holds st_wb_lock for
 * writing: another push may replace st_wb_undo as soon as it is let go. */
static void
undo_put_back(gkv_store *s, unsigned char *u)
{
    if (u == NULL)
        return;
    if (u != s->st_wb_undo) {
        gkv__free(u);
    } else if (s->st_wb_undo_len > UNDO_KEEP) {
        kv__wb_undo_drop(s);
    }
}

/* Push into a write-back tensor's mirrors. *done = 0 when 'name' is not
 * (or no longer) in write-back mode: then nothing was done. */
gkv_err
kv__wb_push(gkv_store *s, const kv_push *a, int *done)
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
    int copy_locked = 0, need_undo;
    size_t ue = 0;                /* an undo entry's bytes */
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
    /* A step can fail part way (a result that is not finite, an adam
     * step count at its limit, a custom handler's error): kv__apply_run
     * then puts back the rows and state it changed, from an undo log of
     * what each step changes. assign cannot fail, nor add on integers. */
    ue = kv__undo_entry_bytes(r, st, nst);
    need_undo = a->kind != KV_H_ASSIGN &&
        (a->kind != KV_H_ADD || kv__dtype_is_float(r->dtype));
    if ((rc = kv__sort_order(a->ids, a->n, r->lo, r->hi - r->lo, &order)) != GKV_OK ||
        (a->kind >= KV_H_SGD && a->kind <= KV_H_ADAM &&
         (g = gkv__malloc(r->row_elems * sizeof *g)) == NULL) ||
        (need_undo && (a->n > SIZE_MAX / ue ||
                       (undo = undo_get(s, a->n * ue)) == NULL))) {
        rc = kv__fail(s, GKV_ENOMEM, "tensor '%s': out of memory for a push "
                      "of %zu rows", a->name, a->n);
        goto out;
    }
    if (s->st_wb_fl != NULL) {
        pthread_mutex_lock(&s->st_wb_copy_mu);
        copy_locked = 1;
        kv__mirror_touch_sorted(s, &w->m[0], a->ids, order, a->n);
        for (size_t k = 0; k < nst; k++)
            kv__mirror_touch_sorted(s, sm[k], a->ids, order, a->n);
    }
    if ((rc = kv__apply_run(s, a, r, &desc, st, nst, order, 0, a->n, r->lo,
                            w->m[0].rows, sbase, g, undo)) != GKV_OK)
        goto out;
    kv__mirror_dirty(&w->m[0], a->ids, a->n);
    for (size_t k = 0; k < nst; k++)
        kv__mirror_dirty(sm[k], a->ids, a->n);
out:
    undo_put_back(s, undo);     /* under the lock: the log is shared */
    if (copy_locked)
        pthread_mutex_unlock(&s->st_wb_copy_mu);
    pthread_rwlock_unlock(&s->st_wb_lock);
    gkv__free(order);
    gkv__free(g);
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
gkv_err
kv__wb_read(gkv_store *s, const char *name, int range, const uint64_t *ids,
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
            rc = kv__len_error(s, name, r, (size_t)(b - a), len);
        else if (len > 0)   /* dst may be NULL for no rows */
            memcpy(dst, m->rows + (a - r->lo) * r->row_bytes, len);
    } else if (n > SIZE_MAX / r->row_bytes || len != n * r->row_bytes) {
        rc = kv__len_error(s, name, r, n, len);
    } else {
        const size_t rb = r->row_bytes;
        for (size_t i = 0; i < n; i++) {
            if (ids[i] < r->lo || ids[i] >= r->hi) {
                rc = kv__range_error(s, name, r, ids[i], i);
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
gkv_err
kv__wb_write(gkv_store *s, const char *name, uint64_t a, uint64_t b,
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
        rc = kv__len_error(s, name, &m->r, (size_t)(b - a), len);
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
int
kv__direct_lock(gkv_store *s, const char *name)
{
    pthread_rwlock_rdlock(&s->st_wb_lock);
    if (kv__wb_find(s, name) == NULL)
        return 1;
    pthread_rwlock_unlock(&s->st_wb_lock);
    return 0;
}
