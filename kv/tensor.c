/* tensor.c - the catalog: tensor records, create, describe, list, delete,
 * rename, and checksum verification. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#include "kv/kv_int.h"

#define REC_MAGIC   0x54564b47u    /* "GKVT" */
#define REC_VERSION 1u
#define REC_LEN     104u
#define MAX_CHUNK_BYTES KV_MAX_CHUNK_BYTES
#define MAX_ROW_BYTES   KV_MAX_ROW_BYTES
#define READ_CHUNK_TARGET (256u << 10)

/* ---- names ------------------------------------------------------------- */

gkv_err
kv__name_check(gkv_store *s, const char *name, int allow_state)
{
    size_t n;

    if (name == NULL || *name == '\0')
        return kv__fail(s, GKV_EINVAL, "empty tensor name");
    n = strlen(name);
    if (n > GKV_NAME_MAX)
        return kv__fail(s, GKV_EINVAL, "tensor name of %zu bytes is too long "
                        "(at most %d)", n, GKV_NAME_MAX);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)name[i];
        if (c < 0x21 || c > 0x7e)
            return kv__fail(s, GKV_EINVAL, "tensor name '%.64s': byte %zu is "
                            "not printable ASCII (spaces are not allowed)",
                            name, i);
        if (c == '#' && !allow_state)
            return kv__fail(s, GKV_EINVAL, "tensor name '%.64s': '#' is "
                            "reserved for optimizer state", name);
    }
    return GKV_OK;
}

/* ---- records ----------------------------------------------------------- */

void
kv__rec_derive(kv_rec *r)
{
    r->row_elems = 1;
    for (unsigned i = 0; i < r->ndim; i++)
        r->row_elems *= r->shape[i];
    r->row_bytes = (size_t)(r->row_elems * gkv_dtype_size(r->dtype));
    /* not (hi - lo + chunk_rows - 1) / chunk_rows: hi - lo may be near 2^64 */
    r->nchunks = (r->hi - r->lo) / r->chunk_rows +
                 ((r->hi - r->lo) % r->chunk_rows != 0);
}

static void
rec_encode(const kv_rec *r, unsigned char b[REC_LEN])
{
    uint32_t w[8] = {REC_MAGIC, REC_VERSION, r->tid, (uint32_t)r->dtype,
                     r->ndim, r->flags, r->chunk_rows, (uint32_t)r->init};

    memcpy(b, w, 32);
    memcpy(b + 32, r->shape, 32);
    memcpy(b + 64, &r->lo, 8);
    memcpy(b + 72, &r->hi, 8);
    memcpy(b + 80, &r->a, 8);
    memcpy(b + 88, &r->b, 8);
    memcpy(b + 96, &r->seed, 8);
}

static int
rec_decode(const void *data, size_t len, kv_rec *r)
{
    const unsigned char *b = data;
    uint32_t w[8];
    uint64_t row;

    if (len < REC_LEN)
        return -1;
    memcpy(w, b, 32);
    if (w[0] != REC_MAGIC || w[1] > REC_VERSION)
        return -1;
    memset(r, 0, sizeof *r);
    r->tid = w[2];
    r->dtype = (gkv_dtype)w[3];
    r->ndim = w[4];
    r->flags = w[5];
    r->chunk_rows = w[6];
    r->init = (gkv_init)w[7];
    memcpy(r->shape, b + 32, 32);
    memcpy(&r->lo, b + 64, 8);
    memcpy(&r->hi, b + 72, 8);
    memcpy(&r->a, b + 80, 8);
    memcpy(&r->b, b + 88, 8);
    memcpy(&r->seed, b + 96, 8);
    if (gkv_dtype_size(r->dtype) == 0 || r->ndim > GKV_MAX_DIMS ||
        r->chunk_rows == 0 || r->hi <= r->lo)
        return -1;
    /* bounded dim by dim, so that a shape whose product wraps cannot pass
     * for a small row (spec_check never writes a row over MAX_ROW_BYTES) */
    row = gkv_dtype_size(r->dtype);
    for (unsigned i = 0; i < r->ndim; i++) {
        if (r->shape[i] == 0 || r->shape[i] > MAX_ROW_BYTES / row)
            return -1;
        row *= r->shape[i];
    }
    kv__rec_derive(r);
    return 0;
}

gkv_err
kv__rec_get(gkv_store *s, MDB_txn *txn, const char *name, kv_rec *r)
{
    MDB_val k = {strlen(name), (void *)name}, d;
    int mrc = mdb_get(txn, s->st_cat, &k, &d);

    if (mrc == MDB_NOTFOUND)
        return kv__fail(s, GKV_ENOTFOUND, "no tensor '%s' in store '%s'",
                        name, s->st_path);
    if (mrc != 0)
        return kv__fail(s, kv__from_mdb(mrc), "tensor '%s': %s", name,
                        mdb_strerror(mrc));
    if (rec_decode(d.mv_data, d.mv_size, r) != 0)
        return kv__fail(s, GKV_ECORRUPT, "tensor '%s': catalog record is "
                        "corrupt or from a newer gkv", name);
    return GKV_OK;
}

void
kv__rec_to_desc(const char *name, const kv_rec *r, gkv_tensor_desc *d)
{
    memset(d, 0, sizeof *d);
    snprintf(d->name, sizeof d->name, "%s", name);
    d->dtype = r->dtype;
    d->ndim = r->ndim;
    memcpy(d->shape, r->shape, sizeof d->shape);
    d->lo = r->lo;
    d->hi = r->hi;
    d->row_elems = r->row_elems;
    d->row_bytes = r->row_bytes;
    d->chunk_rows = r->chunk_rows;
    d->nchunks = r->nchunks;
    d->flags = r->flags;
    d->id = r->tid;
    d->is_state = strchr(name, '#') != NULL;
}

/* Validates a spec and fills r (without tid). */
static gkv_err
spec_check(gkv_store *s, const char *name, const gkv_tensor_spec *sp, kv_rec *r)
{
    size_t es = gkv_dtype_size(sp->dtype);
    uint64_t elems = 1;

    memset(r, 0, sizeof *r);
    if (es == 0)
        return kv__fail(s, GKV_EINVAL, "tensor '%s': unknown dtype %d", name,
                        (int)sp->dtype);
    if (sp->ndim > GKV_MAX_DIMS)
        return kv__fail(s, GKV_EINVAL, "tensor '%s': %u row dims, at most %d",
                        name, sp->ndim, GKV_MAX_DIMS);
    for (unsigned i = 0; i < sp->ndim; i++) {
        if (sp->shape[i] == 0)
            return kv__fail(s, GKV_EINVAL, "tensor '%s': row dim %u is 0", name, i);
        if (sp->shape[i] > MAX_ROW_BYTES || elems * sp->shape[i] * es > MAX_ROW_BYTES)
            return kv__fail(s, GKV_EINVAL, "tensor '%s': rows over %llu MiB",
                            name, (unsigned long long)(MAX_ROW_BYTES >> 20));
        elems *= sp->shape[i];
    }
    if (sp->hi <= sp->lo)
        return kv__fail(s, GKV_EINVAL, "tensor '%s': empty ID range [%llu, %llu)",
                        name, (unsigned long long)sp->lo,
                        (unsigned long long)sp->hi);
    if (sp->flags & ~GKV_TENSOR_HOT)
        return kv__fail(s, GKV_EINVAL, "tensor '%s': unknown flags 0x%x", name,
                        sp->flags & ~GKV_TENSOR_HOT);
    switch (sp->init) {
    case GKV_INIT_ZEROS:
        break;
    case GKV_INIT_CONST:
        if (isnan(sp->a))
            return kv__fail(s, GKV_EINVAL, "tensor '%s': constant is NaN", name);
        break;
    case GKV_INIT_UNIFORM:
        if (!(isfinite(sp->a) && isfinite(sp->b) && sp->a < sp->b))
            return kv__fail(s, GKV_EINVAL, "tensor '%s': uniform needs finite "
                            "a < b, got [%g, %g)", name, sp->a, sp->b);
        break;
    case GKV_INIT_NORMAL:
        if (!(isfinite(sp->a) && isfinite(sp->b) && sp->b >= 0))
            return kv__fail(s, GKV_EINVAL, "tensor '%s': normal needs a finite "
                            "mean and std >= 0, got (%g, %g)", name, sp->a, sp->b);
        break;
    default:
        return kv__fail(s, GKV_EINVAL, "tensor '%s': unknown initializer %d",
                        name, (int)sp->init);
    }
    r->dtype = sp->dtype;
    r->ndim = sp->ndim;
    memcpy(r->shape, sp->shape, sizeof r->shape);
    for (unsigned i = sp->ndim; i < GKV_MAX_DIMS; i++)
        r->shape[i] = 0;
    r->lo = sp->lo;
    r->hi = sp->hi;
    r->flags = sp->flags;
    r->init = sp->init;
    r->a = sp->a;
    r->b = sp->b;
    r->seed = sp->seed;
    r->chunk_rows = 1;
    kv__rec_derive(r);
    if (sp->chunk_rows != 0) {
        if ((uint64_t)sp->chunk_rows * r->row_bytes > MAX_CHUNK_BYTES)
            return kv__fail(s, GKV_EINVAL, "tensor '%s': chunks of %u rows "
                            "exceed %llu MiB", name, sp->chunk_rows,
                            (unsigned long long)(MAX_CHUNK_BYTES >> 20));
        r->chunk_rows = sp->chunk_rows;
    } else if (sp->flags & GKV_TENSOR_HOT) {
        /* one page: value + LMDB's overflow header + ours fit 4 KiB */
        size_t room = s->st_psize - 16 - KV_CHUNK_HDR;
        r->chunk_rows = r->row_bytes <= room ? (uint32_t)(room / r->row_bytes) : 1;
    } else {
        uint32_t cr = 1;
        while ((uint64_t)cr * 2 * r->row_bytes <= READ_CHUNK_TARGET)
            cr *= 2;
        r->chunk_rows = cr;
    }
    kv__rec_derive(r);
    return GKV_OK;
}

/* A damaged meta/next_tid would hand out an id that stored chunks have:
 * the new tensor would read, and verify would check, another's rows. One
 * cursor step finds a chunk of id 'tid' (ids start at 1). */
static gkv_err
tid_unused(gkv_store *s, MDB_txn *txn, uint32_t tid)
{
    unsigned char kb[KV_KEY_LEN];
    MDB_cursor *cur;
    MDB_val k = {KV_KEY_LEN, kb}, d;
    int mrc, used;

    if (tid == 0)
        return kv__fail(s, GKV_ECORRUPT, "store '%s' is damaged: its "
                        "meta/next_tid is 0", s->st_path);
    if ((mrc = mdb_cursor_open(txn, s->st_data, &cur)) != 0)
        return kv__fail(s, kv__from_mdb(mrc), "data: %s", mdb_strerror(mrc));
    kv__key(kb, tid, 0);
    mrc = mdb_cursor_get(cur, &k, &d, MDB_SET_RANGE);
    used = mrc == 0 && k.mv_size >= 4 && kv__key_tid(k.mv_data) == tid;
    mdb_cursor_close(cur);
    if (mrc != 0 && mrc != MDB_NOTFOUND)
        return kv__fail(s, kv__from_mdb(mrc), "data: %s", mdb_strerror(mrc));
    if (used)
        return kv__fail(s, GKV_ECORRUPT, "store '%s' is damaged: its "
                        "meta/next_tid (%u) is an id stored chunks have",
                        s->st_path, tid);
    return GKV_OK;
}

gkv_err
kv__rec_create(gkv_store *s, MDB_txn *txn, const char *name,
               const gkv_tensor_spec *spec, kv_rec *out)
{
    unsigned char buf[REC_LEN];
    MDB_val k = {strlen(name), (void *)name}, d, mk = {8, "next_tid"};
    uint32_t tid;
    kv_rec r;
    gkv_err rc;
    int mrc;

    if ((rc = spec_check(s, name, spec, &r)) != GKV_OK)
        return rc;
    if ((mrc = mdb_get(txn, s->st_cat, &k, &d)) == 0)
        return kv__fail(s, GKV_EEXIST, "tensor '%s' already exists", name);
    if (mrc != MDB_NOTFOUND)
        return kv__fail(s, kv__from_mdb(mrc), "tensor '%s': %s", name,
                        mdb_strerror(mrc));
    if ((mrc = mdb_get(txn, s->st_meta, &mk, &d)) != 0 || d.mv_size != 4)
        return kv__fail(s, GKV_ECORRUPT, "store '%s': no tensor id counter",
                        s->st_path);
    memcpy(&tid, d.mv_data, 4);
    if (tid == UINT32_MAX)
        return kv__fail(s, GKV_EINVAL, "store '%s': tensor ids exhausted",
                        s->st_path);
    if ((rc = tid_unused(s, txn, tid)) != GKV_OK)
        return rc;
    r.tid = tid++;
    d.mv_size = 4;
    d.mv_data = &tid;
    if ((mrc = mdb_put(txn, s->st_meta, &mk, &d, 0)) != 0)
        goto mdb_fail;
    rec_encode(&r, buf);
    d.mv_size = REC_LEN;
    d.mv_data = buf;
    if ((mrc = mdb_put(txn, s->st_cat, &k, &d, MDB_NOOVERWRITE)) != 0)
        goto mdb_fail;
    if (r.init != GKV_INIT_ZEROS) {
        /* every row is written now, in this transaction (and held in RAM
         * until the commit): refuse at once what the disk cannot take */
        uint64_t rows = r.hi - r.lo, bound = kv__room_bound(s);
        uint64_t bytes = rows > UINT64_MAX / r.row_bytes ? UINT64_MAX
                                                          : rows * r.row_bytes;
        if (bytes > bound)
            return kv__fail(s, KV_EMAPFULL_FINAL, "tensor '%s': its initializer "
                            "writes %llu bytes (%llu rows), more than the "
                            "disk holding the store can take (%llu bytes, "
                            "the store's file included); create it with GKV_INIT_ZEROS "
                            "(no rows stored) or a smaller range", name,
                            (unsigned long long)bytes, (unsigned long long)rows,
                            (unsigned long long)bound);
        if ((rc = kv__materialize(s, txn, &r)) != GKV_OK)
            return rc;
    }
    if (out != NULL)
        *out = r;
    return GKV_OK;
mdb_fail:
    return kv__fail(s, kv__from_mdb(mrc), "tensor '%s': %s", name,
                    mdb_strerror(mrc));
}

/* ---- create, info, list ------------------------------------------------ */

struct create_arg {
    const char *name;
    const gkv_tensor_spec *spec;
    gkv_tensor_desc *out;     /* gkv_tensor_ensure: what has the name */
    int *created;             /* ... and whether this call made it */
};

static gkv_err
create_fn(gkv_store *s, MDB_txn *txn, void *arg)
{
    struct create_arg *a = arg;
    kv_rec r;
    gkv_err rc = kv__rec_create(s, txn, a->name, a->spec, &r);

    if (a->out == NULL)
        return rc;
    *a->created = rc == GKV_OK;
    if (rc == GKV_EEXIST) {   /* describe the one there, in this txn */
        kv__clear(s);
        rc = kv__rec_get(s, txn, a->name, &r);
    }
    if (rc == GKV_OK)
        kv__rec_to_desc(a->name, &r, a->out);
    return rc;
}

/* Tensor a->name's record, as a description in a->out (NULL: whether it
 * exists only), under a guard (kv__guarded). */
struct info_arg { const char *name; gkv_tensor_desc *out; };

static gkv_err
info_fn(gkv_store *s, MDB_txn *txn, void *arg)
{
    struct info_arg *a = arg;
    kv_rec r;
    gkv_err rc;

    if ((rc = kv__rec_get(s, txn, a->name, &r)) == GKV_OK && a->out != NULL)
        kv__rec_to_desc(a->name, &r, a->out);
    return rc;
}

/* Before a create of a name this handle holds in write-back mode. While
 * the store has that tensor, GKV_OK: the create fails as any other would
 * (GKV_EEXIST). When another handle deleted it, the copy stays here until
 * a flush drops it, and this handle's pulls and pushes of the name would
 * go to that copy, not to the new tensor, and be dropped with it: then
 * GKV_EBUSY. Caller holds st_wb_lock (the snapshot reads no mirror). */
static gkv_err
create_wb_check(gkv_store *s, const char *name)
{
    kv_snap sn;
    gkv_err rc;

    if ((rc = kv__snap_begin(s, NULL, &sn)) != GKV_OK)
        return rc;
    rc = kv__guarded(s, sn.txn, info_fn, &(struct info_arg){name, NULL});
    kv__snap_end(&sn);
    if (rc != GKV_ENOTFOUND) {
        if (rc == GKV_OK)
            kv__clear(s);
        return rc;
    }
    return kv__fail(s, GKV_EBUSY, "tensor '%s' is in write-back mode on this "
                    "handle, as a copy of a tensor another handle deleted; "
                    "gkv_writeback_stop() it (it answers GKV_ENOTFOUND and "
                    "drops the copy) before creating it again", name);
}

static gkv_err
create_call(gkv_store *s, struct create_arg *a)
{
    const char *name = a->name;
    const gkv_tensor_spec *spec = a->spec;
    gkv_err rc;

    kv__clear(s);
    if (kv__forked(s))          /* a parent's handle after fork() */
        return kv__fork_refused(s);
    if ((rc = kv__name_check(s, name, 0)) != GKV_OK)
        return rc;
    if (spec == NULL)
        return kv__fail(s, GKV_EINVAL, "tensor '%s': no spec", name);
    /* The lock is not held during the create (an initializer may write
     * gigabytes while write-back pushes wait): a start of 'name' meanwhile
     * finds no tensor until the create commits. */
    pthread_rwlock_rdlock(&s->st_wb_lock);
    rc = kv__wb_find(s, name) != NULL ? create_wb_check(s, name) : GKV_OK;
    pthread_rwlock_unlock(&s->st_wb_lock);
    if (rc != GKV_OK)
        return rc;
    return kv__write(s, create_fn, a);
}

gkv_err
gkv_tensor_create(gkv_store *s, const char *name, const gkv_tensor_spec *spec)
{
    struct create_arg a = {name, spec, NULL, NULL};

    return create_call(s, &a);
}

gkv_err
gkv_tensor_ensure(gkv_store *s, const char *name, const gkv_tensor_spec *spec,
                  gkv_tensor_desc *out, int *created)
{
    struct create_arg a = {name, spec, out, created};

    if (out == NULL || created == NULL) {
        kv__clear(s);
        return kv__fail(s, GKV_EINVAL, "tensor '%s': gkv_tensor_ensure "
                        "without out or created", name != NULL ? name : "(null)");
    }
    *created = 0;
    return create_call(s, &a);
}

gkv_err
gkv_tensor_info(gkv_store *s, gkv_txn *tx, const char *name, gkv_tensor_desc *out)
{
    kv_snap sn;
    gkv_err rc;

    kv__clear(s);
    if ((rc = kv__name_check(s, name, 1)) != GKV_OK)
        return rc;
    if ((rc = kv__snap_begin(s, tx, &sn)) != GKV_OK)
        return rc;
    rc = kv__guarded(s, sn.txn, info_fn, &(struct info_arg){name, out});
    kv__snap_end(&sn);
    return rc;
}

/* The catalog's records, into a->v (the caller frees it). */
struct list_arg {
    int with_state;
    gkv_tensor_desc *v;
    size_t cnt, cap;
    MDB_cursor *cur;              /* the caller closes it */
};

static gkv_err
list_fn(gkv_store *s, MDB_txn *txn, void *arg)
{
    struct list_arg *a = arg;
    gkv_tensor_desc *nv;
    MDB_val k, d;
    int mrc;

    if ((mrc = mdb_cursor_open(txn, s->st_cat, &a->cur)) != 0) {
        a->cur = NULL;
        return kv__fail(s, kv__from_mdb(mrc), "catalog: %s", mdb_strerror(mrc));
    }
    while ((mrc = mdb_cursor_get(a->cur, &k, &d, MDB_NEXT)) == 0) {
        char name[GKV_NAME_MAX + 1];
        kv_rec r;

        if (k.mv_size == 0 || k.mv_size > GKV_NAME_MAX)
            continue;
        memcpy(name, k.mv_data, k.mv_size);
        name[k.mv_size] = '\0';
        if (!a->with_state && strchr(name, '#') != NULL)
            continue;
        if (rec_decode(d.mv_data, d.mv_size, &r) != 0)
            return kv__fail(s, GKV_ECORRUPT, "tensor '%s': catalog record is "
                            "corrupt or from a newer gkv", name);
        if (a->cnt == a->cap) {
            size_t cap = a->cap ? a->cap * 2 : 16;

            if ((nv = gkv__realloc(a->v, cap * sizeof *nv)) == NULL)
                return kv__fail(s, GKV_ENOMEM, "out of memory listing tensors");
            a->v = nv;
            a->cap = cap;
        }
        kv__rec_to_desc(name, &r, &a->v[a->cnt++]);
    }
    if (mrc != MDB_NOTFOUND)
        return kv__fail(s, kv__from_mdb(mrc), "catalog: %s", mdb_strerror(mrc));
    return GKV_OK;
}

gkv_err
gkv_tensor_list(gkv_store *s, gkv_txn *tx, int with_state,
                gkv_tensor_desc **out, size_t *n)
{
    struct list_arg a = {.with_state = with_state};
    kv_snap sn;
    gkv_err rc;

    kv__clear(s);
    *out = NULL;
    *n = 0;
    if ((rc = kv__snap_begin(s, tx, &sn)) != GKV_OK)
        return rc;
    if ((rc = kv__guarded(s, sn.txn, list_fn, &a)) != GKV_OK)
        goto out;
    if (a.cnt == 0 && a.v == NULL && (a.v = gkv__malloc(sizeof *a.v)) == NULL) {
        rc = kv__fail(s, GKV_ENOMEM, "out of memory listing tensors");
        goto out;
    }
    *out = a.v;
    *n = a.cnt;
    a.v = NULL;
out:
    gkv__free(a.v);
    if (a.cur != NULL)
        mdb_cursor_close(a.cur);
    kv__snap_end(&sn);
    return rc;
}

/* ---- delete and rename ------------------------------------------------- */

gkv_err
kv__chunks_delete(gkv_store *s, MDB_txn *txn, uint32_t tid)
{
    unsigned char kb[KV_KEY_LEN];
    MDB_cursor *cur;
    MDB_val k, d;
    int mrc;

    if ((mrc = mdb_cursor_open(txn, s->st_data, &cur)) != 0)
        goto fail;
    for (;;) {
        /* from the bare tid: every key that starts with it, a stray one of
         * the wrong length too, so that none stays behind as an orphan */
        kv__key(kb, tid, 0);
        k.mv_size = 4;
        k.mv_data = kb;
        mrc = mdb_cursor_get(cur, &k, &d, MDB_SET_RANGE);
        if (mrc == MDB_NOTFOUND || (mrc == 0 && (k.mv_size < 4 ||
                                    kv__key_tid(k.mv_data) != tid))) {
            mrc = 0;
            break;
        }
        if (mrc != 0 || (mrc = mdb_cursor_del(cur, 0)) != 0)
            break;
    }
    mdb_cursor_close(cur);
    if (mrc == 0)
        return GKV_OK;
fail:
    return kv__fail(s, kv__from_mdb(mrc), "deleting rows of tensor id %u: %s",
                    tid, mdb_strerror(mrc));
}

/* Collects the names of tensor 'name' and its state companions
 * ("name#..."), at most 'max'. A cursor error is returned, never taken for
 * the end of the names: a delete or rename of part of a family would
 * leave companions behind for a later tensor of that name. */
static gkv_err
family(gkv_store *s, MDB_txn *txn, const char *name,
       char names[][GKV_NAME_MAX + 1], size_t max, size_t *n)
{
    char prefix[GKV_NAME_MAX + 2];
    size_t pl;
    MDB_cursor *cur;
    MDB_val k, d;
    int mrc;

    *n = 0;
    pl = (size_t)snprintf(prefix, sizeof prefix, "%s#", name);
    if ((mrc = mdb_cursor_open(txn, s->st_cat, &cur)) != 0)
        return kv__fail(s, kv__from_mdb(mrc), "catalog: %s", mdb_strerror(mrc));
    snprintf(names[(*n)++], GKV_NAME_MAX + 1, "%s", name);
    k.mv_size = pl;
    k.mv_data = prefix;
    for (mrc = mdb_cursor_get(cur, &k, &d, MDB_SET_RANGE);
         mrc == 0 && *n < max; mrc = mdb_cursor_get(cur, &k, &d, MDB_NEXT)) {
        if (k.mv_size < pl || k.mv_size > GKV_NAME_MAX ||
            memcmp(k.mv_data, prefix, pl) != 0)
            break;
        memcpy(names[*n], k.mv_data, k.mv_size);
        names[(*n)++][k.mv_size] = '\0';
    }
    mdb_cursor_close(cur);
    if (mrc != 0 && mrc != MDB_NOTFOUND)
        return kv__fail(s, kv__from_mdb(mrc), "tensor '%s': reading the names "
                        "of its optimizer state from the catalog: %s", name,
                        mdb_strerror(mrc));
    return GKV_OK;
}

#define FAMILY_MAX 8

static gkv_err
delete_fn(gkv_store *s, MDB_txn *txn, void *arg)
{
    const char *name = arg;
    char names[FAMILY_MAX][GKV_NAME_MAX + 1];
    size_t n;
    kv_rec r;
    gkv_err rc;
    int mrc;

    if ((rc = kv__rec_get(s, txn, name, &r)) != GKV_OK)
        return rc;
    if ((rc = family(s, txn, name, names, FAMILY_MAX, &n)) != GKV_OK)
        return rc;
    for (size_t i = 0; i < n; i++) {
        MDB_val k = {strlen(names[i]), names[i]};

        if ((rc = kv__rec_get(s, txn, names[i], &r)) != GKV_OK ||
            (rc = kv__chunks_delete(s, txn, r.tid)) != GKV_OK)
            return rc;
        if ((mrc = mdb_del(txn, s->st_cat, &k, NULL)) != 0)
            return kv__fail(s, kv__from_mdb(mrc), "tensor '%s': %s", names[i],
                            mdb_strerror(mrc));
    }
    return GKV_OK;
}

static gkv_err
wb_busy(gkv_store *s, const char *name)
{
    return kv__fail(s, GKV_EBUSY, "tensor '%s' is in write-back mode on this "
                    "handle; gkv_writeback_stop() it first", name);
}

gkv_err
gkv_tensor_delete(gkv_store *s, const char *name)
{
    gkv_err rc;

    kv__clear(s);
    if (kv__forked(s))          /* a parent's handle after fork() */
        return kv__fork_refused(s);
    if ((rc = kv__name_check(s, name, 0)) != GKV_OK)
        return rc;
    pthread_rwlock_rdlock(&s->st_wb_lock);
    rc = kv__wb_find(s, name) != NULL ? wb_busy(s, name)
                                      : kv__write_named(s, name, NULL, delete_fn,
                                                        (void *)name);
    pthread_rwlock_unlock(&s->st_wb_lock);
    return rc;
}

struct rename_arg { const char *from, *to; int replace; };

static gkv_err
rename_fn(gkv_store *s, MDB_txn *txn, void *arg)
{
    struct rename_arg *a = arg;
    char names[FAMILY_MAX][GKV_NAME_MAX + 1];
    size_t n, fl = strlen(a->from);
    kv_rec r;
    gkv_err rc;
    int mrc;

    if ((rc = kv__rec_get(s, txn, a->from, &r)) != GKV_OK)
        return rc;
    if ((rc = family(s, txn, a->from, names, FAMILY_MAX, &n)) != GKV_OK)
        return rc;
    /* replace: 'to' and its state go in the same transaction */
    if (a->replace && (rc = kv__rec_get(s, txn, a->to, &r)) == GKV_OK &&
        (rc = delete_fn(s, txn, (void *)a->to)) != GKV_OK)
        return rc;
    if (a->replace && rc == GKV_ENOTFOUND)
        kv__clear(s);
    else if (a->replace && rc != GKV_OK)
        return rc;
    for (size_t i = 0; i < n; i++) {
        char to[GKV_NAME_MAX + 2];
        MDB_val ko = {strlen(names[i]), names[i]}, kn, d;

        if ((size_t)snprintf(to, sizeof to, "%s%s", a->to, names[i] + fl) >
            GKV_NAME_MAX)
            return kv__fail(s, GKV_EINVAL, "renaming '%s' to '%s': name of its "
                            "state '%s' would be too long", a->from, a->to,
                            names[i]);
        kn.mv_size = strlen(to);
        kn.mv_data = to;
        if ((mrc = mdb_get(txn, s->st_cat, &ko, &d)) != 0)
            goto fail;
        if ((mrc = mdb_put(txn, s->st_cat, &kn, &d, MDB_NOOVERWRITE)) != 0) {
            if (mrc == MDB_KEYEXIST)
                return kv__fail(s, GKV_EEXIST, "cannot rename '%s': tensor '%s' "
                                "already exists", a->from, to);
            goto fail;
        }
        if ((mrc = mdb_del(txn, s->st_cat, &ko, NULL)) != 0)
            goto fail;
    }
    return GKV_OK;
fail:
    return kv__fail(s, kv__from_mdb(mrc), "renaming '%s': %s", a->from,
                    mdb_strerror(mrc));
}

static gkv_err
rename_call(gkv_store *s, const char *from, const char *to, int replace)
{
    struct rename_arg a = {from, to, replace};
    gkv_err rc;

    kv__clear(s);
    if ((rc = kv__name_check(s, from, 0)) != GKV_OK ||
        (rc = kv__name_check(s, to, 0)) != GKV_OK)
        return rc;
    if (strcmp(from, to) == 0)
        return kv__fail(s, GKV_EEXIST, "cannot rename '%s' to itself", from);
    pthread_rwlock_rdlock(&s->st_wb_lock);
    rc = kv__wb_find(s, from) != NULL ? wb_busy(s, from)
       : kv__wb_find(s, to) != NULL   ? wb_busy(s, to)
                                      : kv__write_named(s, from, to, rename_fn,
                                                        &a);
    pthread_rwlock_unlock(&s->st_wb_lock);
    return rc;
}

gkv_err
gkv_tensor_rename(gkv_store *s, const char *from, const char *to)
{
    return rename_call(s, from, to, 0);
}

gkv_err
gkv_tensor_replace(gkv_store *s, const char *from, const char *to)
{
    return rename_call(s, from, to, 1);
}

/* ---- checksums and verify --------------------------------------------- */

uint64_t
kv__chunk_sum(uint32_t tid, uint64_t c, const void *rows, size_t len)
{
    return XXH3_64bits_withSeed(rows, len, ((uint64_t)tid << 40) ^ c);
}

/* gkv_tensor_changed's reads of the catalog and the stamps, under a
 * guard (kv__guarded). */
struct changed_arg {
    const char *name;
    uint64_t c0, *mark;
    size_t nc, n;
    uint8_t *changed;
};

static gkv_err
changed_fn(gkv_store *s, MDB_txn *txn, void *arg)
{
    struct changed_arg *a = arg;
    const char *name = a->name;
    kv_rec r;
    gkv_err rc;

    if ((rc = kv__rec_get(s, txn, name, &r)) != GKV_OK)
        return rc;
    if (a->c0 > r.nchunks || a->nc > r.nchunks - a->c0)
        return kv__fail(s, GKV_ERANGE, "tensor '%s' has %llu chunks; asked "
                        "about chunks [%llu, %llu)", name,
                        (unsigned long long)r.nchunks,
                        (unsigned long long)a->c0,
                        (unsigned long long)a->c0 + a->nc);
    for (size_t i = 0; i < a->nc; i++) {
        uint64_t sum;
        int have;

        if ((rc = kv__chunk_stamp(s, txn, r.tid, a->c0 + i, &sum,
                                  &have)) != GKV_OK)
            return kv__fail(s, rc, "tensor '%s': chunk %llu: %s", name,
                            (unsigned long long)(a->c0 + i),
                            gkv_strerror(rc));
        sum = !have ? 0 : sum != 0 ? sum : 1;
        if (a->mark[0] == 0 || sum != a->mark[1 + i]) {
            if (a->changed != NULL)
                a->changed[i] = 1;
            a->n++;
        }
        a->mark[1 + i] = sum;
    }
    return GKV_OK;
}

/* The version is LMDB's txn id (a read txn's is its snapshot's); a stamp
 * is the checksum in the chunk's header, which covers the tensor id. */
gkv_err
gkv_tensor_changed(gkv_txn *tx, const char *name, uint64_t c0, size_t nc,
                   uint64_t *mark, uint8_t *changed, size_t *nchanged)
{
    struct changed_arg a = {name, c0, mark, nc, 0, changed};
    gkv_store *s;
    uint64_t ver;
    gkv_err rc = GKV_OK;

    if (nchanged != NULL)
        *nchanged = 0;
    if (changed != NULL && nc > 0)
        memset(changed, 0, nc);
    if (tx == NULL || mark == NULL || (name == NULL && nc > 0))
        return kv__fail(tx != NULL ? tx->tx_store : NULL, GKV_EINVAL,
                        "gkv_tensor_changed: %s", tx == NULL ?
                        "no snapshot" : mark == NULL ? "no mark" :
                        "no tensor name");
    s = tx->tx_store;
    kv__clear(s);
    ver = (uint64_t)mdb_txn_id(tx->tx_txn);
    if (ver <= mark[0])
        return GKV_OK;
    if (nc == 0) {
        a.n = 1;
        goto out;
    }
    if ((rc = kv__name_check(s, name, 1)) != GKV_OK ||
        (rc = kv__guard_held(tx)) != GKV_OK ||
        (rc = kv__guarded(s, tx->tx_txn, changed_fn, &a)) != GKV_OK)
        return rc;
out:
    mark[0] = ver;
    if (nchanged != NULL)
        *nchanged = a.n;
    return rc;
}

/* Checks one stored chunk value; 0 when good. */
static int
chunk_bad(const kv_rec *r, uint64_t c, const MDB_val *d, const char **why)
{
    const unsigned char *p = d->mv_data;
    uint64_t sum;
    uint32_t nrows, magic;

    if (c >= r->nchunks) {
        *why = "chunk index past the end of the tensor";
        return 1;
    }
    if (d->mv_size != KV_CHUNK_HDR + kv__chunk_nrows(r, c) * r->row_bytes) {
        *why = "wrong chunk size";
        return 1;
    }
    memcpy(&sum, p, 8);
    memcpy(&nrows, p + 8, 4);
    memcpy(&magic, p + 12, 4);
    if (magic != KV_CHUNK_MAGIC || nrows != kv__chunk_nrows(r, c)) {
        *why = "bad chunk header";
        return 1;
    }
    if (sum != kv__chunk_sum(r->tid, c, p + KV_CHUNK_HDR, d->mv_size - KV_CHUNK_HDR)) {
        *why = "checksum mismatch";
        return 1;
    }
    return 0;
}

/* Counts a bad chunk; the first one is named in *rep and in the message. */
static void
verify_bad(gkv_store *s, const kv_rec *r, const char *name, uint64_t c,
           const char *why, gkv_verify_report *rep)
{
    uint64_t first = r->lo + c * r->chunk_rows;

    if (rep->bad_chunks++ != 0)
        return;
    snprintf(rep->first_bad, sizeof rep->first_bad, "%s", name);
    rep->first_bad_chunk = c;
    rep->first_bad_row = first;
    kv__fail(s, GKV_ECORRUPT, "tensor '%s': chunk %llu (rows %llu..%llu): %s",
             name, (unsigned long long)c, (unsigned long long)first,
             (unsigned long long)(first + kv__chunk_nrows(r, c < r->nchunks ? c : 0) - 1),
             why);
}

/* Chunks [from, to) are absent: damage unless the tensor is all zeros
 * until written (FORMAT.md, "Missing chunks and zeros"). */
static void
verify_gap(gkv_store *s, const kv_rec *r, const char *name, uint64_t from,
           uint64_t to, gkv_verify_report *rep)
{
    if (r->init == GKV_INIT_ZEROS || from >= to)
        return;
    verify_bad(s, r, name, from, "chunk is missing", rep);
    rep->bad_chunks += to - from - 1;
}

/* *curp: the cursor while open (a fault caught meanwhile leaves it to
 * gkv_store_verify to close: a read transaction's cursors are not its
 * own, and would leak). */
static gkv_err
verify_one(gkv_store *s, MDB_txn *txn, const char *name, gkv_verify_report *rep,
           MDB_cursor **curp)
{
    unsigned char kb[KV_KEY_LEN];
    MDB_cursor *cur;
    MDB_val k, d;
    kv_rec r;
    gkv_err rc;
    uint64_t next = 0;   /* the chunk index expected next */
    int mrc;

    if ((rc = kv__rec_get(s, txn, name, &r)) != GKV_OK)
        return rc;
    if ((mrc = mdb_cursor_open(txn, s->st_data, curp)) != 0)
        return kv__fail(s, kv__from_mdb(mrc), "data: %s", mdb_strerror(mrc));
    cur = *curp;
    kv__key(kb, r.tid, 0);
    k.mv_size = KV_KEY_LEN;
    k.mv_data = kb;
    for (mrc = mdb_cursor_get(cur, &k, &d, MDB_SET_RANGE); mrc == 0;
         mrc = mdb_cursor_get(cur, &k, &d, MDB_NEXT)) {
        const char *why;
        uint64_t c;

        if (k.mv_size < 4 || kv__key_tid(k.mv_data) != r.tid)
            break;
        if (k.mv_size != KV_KEY_LEN)
            continue;   /* not a chunk: an orphan (verify_orphans) */
        c = kv__key_chunk(k.mv_data);
        if (c < r.nchunks) {
            verify_gap(s, &r, name, next, c, rep);
            next = c + 1;
        }
        rep->chunks_checked++;
        rep->bytes_checked += d.mv_size;
        if (chunk_bad(&r, c, &d, &why))
            verify_bad(s, &r, name, c, why, rep);
    }
    mdb_cursor_close(cur);
    *curp = NULL;
    if (mrc != 0 && mrc != MDB_NOTFOUND)
        return kv__fail(s, kv__from_mdb(mrc), "tensor '%s': %s", name,
                        mdb_strerror(mrc));
    verify_gap(s, &r, name, next, r.nchunks, rep);
    return GKV_OK;
}

static int
tid_cmp(const void *a, const void *b)
{
    uint32_t x = ((const gkv_tensor_desc *)a)->id;
    uint32_t y = ((const gkv_tensor_desc *)b)->id;

    return (x > y) - (x < y);
}

/* Counts the data keys no tensor owns: a 12-byte key whose tid no record
 * has, or a key of another length. v[0..n) is every catalog record (sorted
 * by tid here). The per-tensor walks met rep->chunks_checked keys: when
 * that is every key, one mdb_stat shows there is nothing to find, so a
 * sound store pays no second walk. The first orphan is described in
 * 'first'. */
static gkv_err
verify_orphans(gkv_store *s, MDB_txn *txn, gkv_tensor_desc *v, size_t n,
               gkv_verify_report *rep, char *first, size_t first_len,
               MDB_cursor **curp)
{
    MDB_cursor *cur;
    MDB_stat ms;
    MDB_val k, d;
    int mrc;

    if ((mrc = mdb_stat(txn, s->st_data, &ms)) != 0)
        return kv__fail(s, kv__from_mdb(mrc), "data: %s", mdb_strerror(mrc));
    if (ms.ms_entries == rep->chunks_checked)
        return GKV_OK;
    qsort(v, n, sizeof *v, tid_cmp);
    if ((mrc = mdb_cursor_open(txn, s->st_data, curp)) != 0)
        return kv__fail(s, kv__from_mdb(mrc), "data: %s", mdb_strerror(mrc));
    cur = *curp;
    for (mrc = mdb_cursor_get(cur, &k, &d, MDB_FIRST); mrc == 0;
         mrc = mdb_cursor_get(cur, &k, &d, MDB_NEXT)) {
        const unsigned char *kp = k.mv_data;
        gkv_tensor_desc key;

        if (k.mv_size == KV_KEY_LEN) {
            key.id = kv__key_tid(kp);
            if (bsearch(&key, v, n, sizeof *v, tid_cmp) != NULL)
                continue;
            if (rep->orphan_keys++ == 0)
                snprintf(first, first_len, "tensor id %u, chunk %llu: no "
                         "tensor has that id", key.id,
                         (unsigned long long)kv__key_chunk(kp));
        } else if (rep->orphan_keys++ == 0) {
            size_t o = (size_t)snprintf(first, first_len, "key of %zu bytes",
                                        k.mv_size);
            for (size_t i = 0; i < k.mv_size && i < 16 && o < first_len; i++)
                o += (size_t)snprintf(first + o, first_len - o, " %02x", kp[i]);
            if (o < first_len)
                snprintf(first + o, first_len - o, "%s: not a 12-byte chunk "
                         "key", k.mv_size > 16 ? " ..." : "");
        }
    }
    mdb_cursor_close(cur);
    *curp = NULL;
    if (mrc != MDB_NOTFOUND)
        return kv__fail(s, kv__from_mdb(mrc), "data: %s", mdb_strerror(mrc));
    return GKV_OK;
}

/* meta/next_tid is above every id a record has (else the next create
 * would take a used id). v[0..n): every catalog record. */
static gkv_err
verify_next_tid(gkv_store *s, MDB_txn *txn, const gkv_tensor_desc *v,
                size_t n)
{
    MDB_val k = {8, "next_tid"}, d;
    uint32_t next;
    int mrc;

    if ((mrc = mdb_get(txn, s->st_meta, &k, &d)) != 0 || d.mv_size != 4)
        return kv__fail(s, GKV_ECORRUPT, "store '%s': no tensor id counter",
                        s->st_path);
    memcpy(&next, d.mv_data, 4);
    for (size_t i = 0; i < n; i++)
        if (v[i].id >= next || next == 0)
            return kv__fail(s, GKV_ECORRUPT, "store '%s' is damaged: its "
                            "meta/next_tid (%u) is not above the id of "
                            "tensor '%s' (%u)", s->st_path, next, v[i].name,
                            v[i].id);
    return GKV_OK;
}

/* Begins snapshot *sn and walks the structure of data.mdb in it (walk.c)
 * before anything follows a pointer of it. The walk needs the snapshot's
 * meta page, which two commits since it began overwrite: then it tries a
 * newer snapshot. On an error no snapshot is left open. */
static gkv_err
verify_structure(gkv_store *s, kv_snap *sn)
{
    mdb_filehandle_t fd;
    gkv_err rc = GKV_OK;

    for (int i = 0; i < 16; i++) {
        if ((rc = kv__snap_begin(s, NULL, sn)) != GKV_OK)
            return rc;
        if (mdb_env_get_fd(s->st_env, &fd) != 0 ||
            (rc = kv__walk(s, s->st_path, fd, mdb_txn_id(sn->txn),
                           NULL)) == GKV_OK)
            return GKV_OK;
        kv__snap_end(sn);
        if (rc == GKV_ECORRUPT)
            kv__damaged(s);       /* no write may follow its pointers */
        if (rc != GKV_EBUSY)
            break;
    }
    return rc;
}

/* What verify checks through the map, under a guard. */
struct verify_arg {
    const char *name;             /* NULL: every tensor */
    gkv_verify_report *rep;
    gkv_tensor_desc *v;           /* the caller frees it */
    size_t n;
    char orphan[160];
    MDB_cursor *cur;              /* open: closed by gkv_store_verify */
};

static gkv_err
verify_fn(gkv_store *s, MDB_txn *txn, void *arg)
{
    struct verify_arg *a = arg;
    gkv_txn tx = {.tx_store = s, .tx_txn = txn};
    gkv_err rc;

    if (a->name != NULL)
        return verify_one(s, txn, a->name, a->rep, &a->cur);
    if ((rc = gkv_tensor_list(s, &tx, 1, &a->v, &a->n)) == GKV_OK)
        for (size_t i = 0; i < a->n && rc == GKV_OK; i++)
            rc = verify_one(s, txn, a->v[i].name, a->rep, &a->cur);
    if (rc == GKV_OK)
        rc = verify_next_tid(s, txn, a->v, a->n);
    if (rc == GKV_OK)
        rc = verify_orphans(s, txn, a->v, a->n, a->rep, a->orphan,
                            sizeof a->orphan, &a->cur);
    return rc;
}

gkv_err
gkv_store_verify(gkv_store *s, const char *name, gkv_verify_report *rep)
{
    gkv_verify_report local;
    struct verify_arg a = {.v = NULL};
    kv_snap sn;
    gkv_err rc;

    kv__clear(s);
    if (rep == NULL)
        rep = &local;
    memset(rep, 0, sizeof *rep);
    if (name != NULL && (rc = kv__name_check(s, name, 1)) != GKV_OK)
        return rc;
    if ((rc = verify_structure(s, &sn)) != GKV_OK)
        return rc;
    /* the structure was whole when walked; a guard still covers a change
     * since */
    a.name = name;
    a.rep = rep;
    rc = kv__guarded(s, sn.txn, verify_fn, &a);
    if (a.cur != NULL)              /* a fault jumped over its close */
        mdb_cursor_close(a.cur);
    gkv__free(a.v);
    kv__snap_end(&sn);
    if (rc == GKV_OK && (rep->bad_chunks > 0 || rep->orphan_keys > 0)) {
        /* the message about the first bad chunk was recorded by verify_one;
         * keep it, and add the count of the others and the orphans */
        char first[GKV__MSG_MAX] = "", more[64] = "", orph[256] = "";

        if (rep->bad_chunks > 0)
            snprintf(first, sizeof first, "%s", gkv_store_errmsg(s));
        if (rep->bad_chunks > 1)
            snprintf(more, sizeof more, " (and %llu more bad chunks)",
                     (unsigned long long)(rep->bad_chunks - 1));
        if (rep->orphan_keys == 1)
            snprintf(orph, sizeof orph, "%sorphan data key: %s",
                     rep->bad_chunks ? "; " : "", a.orphan);
        else if (rep->orphan_keys > 1)
            snprintf(orph, sizeof orph, "%s%llu orphan data keys; first: %s",
                     rep->bad_chunks ? "; " : "",
                     (unsigned long long)rep->orphan_keys, a.orphan);
        kv__fail(s, GKV_ECORRUPT, "%.400s%s%s", first, more, orph);
        return GKV_ECORRUPT;
    }
    return rc;
}


/* ---- optimizer state reset -------------------------------------------- */

gkv_err
kv__state_drop(gkv_store *s, MDB_txn *txn, const char *name, unsigned kinds)
{
    for (int k = KV_H_ADAGRAD; k <= KV_H_ADAM; k++) {
        if (!(kinds & KV_KIND_BIT(k)))
            continue;
        for (size_t i = 0; i < kv__state_n((enum kv_hkind)k); i++) {
            char sname[GKV_NAME_MAX + 32];
            MDB_val key;
            kv_rec r;
            gkv_err rc;
            int mrc;

            snprintf(sname, sizeof sname, "%s%s", name,
                     kv__state_suffix((enum kv_hkind)k, i));
            if (strlen(sname) > GKV_NAME_MAX)
                continue;   /* no state can have that name */
            if ((rc = kv__rec_get(s, txn, sname, &r)) == GKV_ENOTFOUND) {
                kv__clear(s);
                continue;
            }
            if (rc != GKV_OK || (rc = kv__chunks_delete(s, txn, r.tid)) != GKV_OK)
                return rc;
            key.mv_size = strlen(sname);
            key.mv_data = sname;
            if ((mrc = mdb_del(txn, s->st_cat, &key, NULL)) != 0)
                return kv__fail(s, kv__from_mdb(mrc), "tensor '%s': %s",
                                sname, mdb_strerror(mrc));
        }
    }
    return GKV_OK;
}

struct reset_arg { const char *name; unsigned kinds; };

static gkv_err
reset_fn(gkv_store *s, MDB_txn *txn, void *arg)
{
    struct reset_arg *a = arg;
    kv_rec r;
    gkv_err rc;

    if ((rc = kv__rec_get(s, txn, a->name, &r)) != GKV_OK)
        return rc;
    return kv__state_drop(s, txn, a->name, a->kinds);
}

gkv_err
gkv_opt_reset(gkv_store *s, const char *name, const char *optimizer)
{
    struct reset_arg a = {name, 0};
    gkv_err rc;

    kv__clear(s);
    if (kv__forked(s))          /* a parent's handle after fork() */
        return kv__fork_refused(s);
    if ((rc = kv__name_check(s, name, 0)) != GKV_OK)
        return rc;
    if (optimizer == NULL)
        a.kinds = KV_KIND_BIT(KV_H_ADAGRAD) | KV_KIND_BIT(KV_H_ADAM);
    else if (strcmp(optimizer, "adagrad") == 0)
        a.kinds = KV_KIND_BIT(KV_H_ADAGRAD);
    else if (strcmp(optimizer, "adam") == 0)
        a.kinds = KV_KIND_BIT(KV_H_ADAM);
    else
        return kv__fail(s, GKV_EINVAL, "tensor '%s': no optimizer state of "
                        "'%.64s' to reset (optimizers with state: adagrad, "
                        "adam; NULL for both)", name, optimizer);
    for (;;) {
        if (kv__wb_any(s)) {
            int done;
            if ((rc = kv__wb_reset(s, name, a.kinds, &done)) != GKV_OK || done)
                return rc;
        }
        /* shared: no write-back start of 'name' until the reset commits */
        pthread_rwlock_rdlock(&s->st_wb_lock);
        if (kv__wb_find(s, name) == NULL)
            break;
        pthread_rwlock_unlock(&s->st_wb_lock);
    }
    rc = kv__write_named(s, name, NULL, reset_fn, &a);
    pthread_rwlock_unlock(&s->st_wb_lock);
    return rc;
}
