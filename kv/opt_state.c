/* opt_state.c - optimizer state companions ("T#adam_m"): their names,
 * records and creation, and writes to them (restoring a checkpoint). */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "kv/kv_int.h"

/* State companions per optimizer: suffix, and whether it is the per-row
 * step count (i64, one per row) rather than a row-shaped tensor. */
static const struct { const char *suffix; int is_step; } adagrad_state[] = {
    {"#adagrad_s", 0}
}, adam_state[] = {
    {"#adam_m", 0}, {"#adam_v", 0}, {"#adam_t", 1}
};

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
    struct kv_write_arg w;       /* name = the companion */
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
    if (!kv__dtype_is_float(r->dtype))
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
        return kv__write_check(s, sname, want, a->w.a, a->w.b, a->w.rows_len);
    return kv__push_check(s, &a->p, want);
}

struct state_info_arg {
    const char *name, *base;
    enum kv_hkind k;
    size_t idx;
    gkv_tensor_desc *out;
    int *exists;
};

/* gkv_opt_state_info's reads, under a guard (kv__guarded). */
static gkv_err
state_info_fn(gkv_store *s, MDB_txn *txn, void *arg)
{
    struct state_info_arg *a = arg;
    kv_rec r, st;
    gkv_err rc;

    if ((rc = state_base(s, txn, a->name, a->base, &r)) != GKV_OK)
        return rc;
    if ((rc = kv__rec_get(s, txn, a->name, &st)) == GKV_OK) {
        *a->exists = 1;
    } else if (rc == GKV_ENOTFOUND) {
        /* what it gets when created; none when it never can be */
        kv__clear(s);
        kv__state_rec(&r, kv__state_is_step(a->k, a->idx), &st);
        rc = kv__state_fits(s, a->base, a->name, &st);
    }
    if (rc == GKV_OK)
        kv__rec_to_desc(a->name, &st, a->out);
    return rc;
}

gkv_err
gkv_opt_state_info(gkv_store *s, gkv_txn *tx, const char *name,
                   gkv_tensor_desc *out, int *exists)
{
    char base[GKV_NAME_MAX + 1];
    enum kv_hkind k;
    size_t idx;
    kv_snap sn;
    gkv_err rc;

    kv__clear(s);
    *exists = 0;
    if ((rc = kv__state_parse(s, name, base, &k, &idx)) != GKV_OK ||
        (rc = kv__snap_begin(s, tx, &sn)) != GKV_OK)
        return rc;
    rc = kv__guarded(s, sn.txn, state_info_fn,
                     &(struct state_info_arg){name, base, k, idx, out,
                                              exists});
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
    return a->range ? kv__write_fn(s, txn, &a->w) : kv__push_fn(s, txn, &a->p);
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
            kv__mirror_touch(s, m, a->p.ids, a->p.n);
        for (size_t i = 0; i < a->p.n; i++)   /* the last of an ID wins */
            memcpy(m->rows + (a->p.ids[i] - m->r.lo) * rb, a->p.rows + i * rb,
                   rb);
        kv__mirror_dirty(m, a->p.ids, a->p.n);
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

    if (gkv_tensor_info(s, NULL, base, &d) != GKV_OK || !kv__dtype_is_float(d.dtype)) {
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

gkv_err
kv__state_write(gkv_store *s, const char *name, int range, const uint64_t *ids,
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
        if (kv__direct_lock(s, base))   /* the tensor: no write-back start now */
            break;
    }
    rc = kv__write_named(s, base, NULL, state_write_fn, &sw);
    pthread_rwlock_unlock(&s->st_wb_lock);
    return rc;
}
