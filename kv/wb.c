/* wb.c - write-back mode: a tensor kept in RAM, flushed in the background.
 *
 * gkv_writeback_start() loads a tensor (and any optimizer state it has)
 * into RAM mirrors. Pushes through this handle change the mirrors and mark
 * their chunks dirty; pulls without a snapshot read the mirrors. A flusher
 * thread, every interval, writes the dirty chunks of every write-back
 * tensor as they were at one push boundary, in one LMDB transaction (see
 * "flushing" below). A crash loses at most the pushes since the last flush
 * that committed; the store always holds the state after some whole push. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "kv/kv_int.h"

#define WB_DEFAULT_MS 10u

static const char *const wb_suffix[5] = {
    "", "#adagrad_s", "#adam_m", "#adam_v", "#adam_t"
};

kv_wb *
kv__wb_find(gkv_store *s, const char *name)
{
    for (kv_wb *w = s->st_wb; w != NULL; w = w->next)
        if (strcmp(w->m[0].name, name) == 0)
            return w;
    return NULL;
}

kv_mirror *
kv__wb_state(kv_wb *w, const char *suffix)
{
    for (int i = 1; i < 5; i++)
        if (strcmp(wb_suffix[i], suffix) == 0)
            return w->m[i].rows != NULL ? &w->m[i] : NULL;
    return NULL;
}

/* The machine's physical memory in bytes (SIZE_MAX when unknown). */
static size_t
phys_bytes(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);

    if (pages <= 0 || psz <= 0 || (unsigned long)pages > SIZE_MAX / (size_t)psz)
        return SIZE_MAX;
    return (size_t)pages * (size_t)psz;
}

/* Big buffers (mirrors, the flush staging area) are mapped directly and
 * asked for huge pages: first touch of fresh memory is what a flush of a
 * freshly malloc'd gigabyte spent most of its time on (page faults).
 * More than the machine's physical memory is refused here: where the
 * kernel overcommits (vm.overcommit_memory=1, common on container hosts)
 * the mapping would succeed and filling it would end in the OOM killer
 * instead of an error. */
static void *
big_alloc(size_t len)
{
    void *p;

    if (len > phys_bytes()) {
        errno = ENOMEM;
        return NULL;
    }
    p = mmap(NULL, len ? len : 1, PROT_READ | PROT_WRITE,
             MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
#ifdef MADV_HUGEPAGE
    madvise(p, len ? len : 1, MADV_HUGEPAGE);
#endif
    return p;
}

static void
big_free(void *p, size_t len)
{
    if (p != NULL)
        munmap(p, len ? len : 1);
}

static size_t
mirror_bytes(const kv_mirror *m)
{
    return (size_t)(m->r.hi - m->r.lo) * m->r.row_bytes;
}

static void
mirror_free(kv_mirror *m)
{
    big_free(m->rows, mirror_bytes(m));
    gkv__free(m->dirty);
    m->rows = NULL;
    m->dirty = NULL;
}

static void
wb_free(kv_wb *w)
{
    for (int i = 0; i < 5; i++)
        mirror_free(&w->m[i]);
    gkv__free(w);
}

void (*kv__wb_load_hook)(gkv_store *s, const char *name);

/* Reads tensor 'name' as snapshot 'txn' sees it into a new mirror m (no
 * lock needed: m is not reachable yet). An explicit snapshot: reads
 * through it do not look at write-back mirrors (whose lock the caller may
 * hold), and a tensor and its state read through one are of one moment.
 * With 'want', 'name' is a state companion of tensor 'base' and must have
 * those rows (GKV_ECORRUPT otherwise). */
static gkv_err
mirror_load(gkv_store *s, MDB_txn *txn, const char *name, const char *base,
            const kv_rec *want, kv_mirror *m)
{
    size_t bytes;
    gkv_err rc;

    if ((rc = kv__rec_get(s, txn, name, &m->r)) != GKV_OK)
        return rc;
    if (want != NULL && !kv__state_rec_same(want, &m->r))
        return kv__state_mismatch(s, name, base, want, &m->r);
    if (kv__wb_load_hook != NULL)
        kv__wb_load_hook(s, name);
    if (m->r.hi - m->r.lo > SIZE_MAX / m->r.row_bytes)
        return kv__fail(s, GKV_ENOMEM, "tensor '%s': a write-back copy of %llu "
                        "rows of %zu bytes is larger than memory can hold", name,
                        (unsigned long long)(m->r.hi - m->r.lo), m->r.row_bytes);
    bytes = (size_t)(m->r.hi - m->r.lo) * m->r.row_bytes;
    snprintf(m->name, sizeof m->name, "%s", name);
    if ((m->rows = big_alloc(bytes)) == NULL ||
        (m->dirty = gkv__calloc(m->r.nchunks ? m->r.nchunks : 1, 1)) == NULL) {
        rc = bytes > phys_bytes()
             ? kv__fail(s, GKV_ENOMEM, "tensor '%s': a write-back copy of %zu "
                        "bytes is larger than this machine's memory (%zu "
                        "bytes)", name, bytes, phys_bytes())
             : kv__fail(s, GKV_ENOMEM, "tensor '%s': out of memory for a %zu "
                        "byte write-back copy", name, bytes);
        goto out;
    }
    rc = gkv_tensor_read(s, &(gkv_txn){.tx_store = s, .tx_txn = txn}, name, m->r.lo, m->r.hi,
                         m->rows, bytes);
out:
    if (rc != GKV_OK)
        mirror_free(m);
    return rc;
}

/* Loads the state companions 'slot' (indexes into wb_suffix; load[i] set)
 * of tensor 'name', whose copy has record 'parent', through snapshot txn
 * into m[i]. The store's 'name' must still be that tensor (GKV_ENOTFOUND
 * otherwise: another handle replaced it); a companion the snapshot lacks
 * is left unloaded (rows NULL). */
static gkv_err
state_mirrors_load(gkv_store *s, MDB_txn *txn, const char *name,
                   const kv_rec *parent, const int *slot, const int *load,
                   size_t n, int missing_ok, kv_mirror *m)
{
    kv_rec now;
    gkv_err rc;

    if ((rc = kv__rec_get(s, txn, name, &now)) != GKV_OK &&
        rc != GKV_ENOTFOUND)
        return rc;
    if (rc == GKV_ENOTFOUND || now.tid != parent->tid)
        return kv__fail(s, GKV_ENOTFOUND, "tensor '%s' was deleted or "
                        "replaced by another handle", name);
    for (size_t i = 0; i < n; i++) {
        char sname[GKV_NAME_MAX + 32];
        kv_rec want, st;

        if (!load[i])
            continue;
        snprintf(sname, sizeof sname, "%s%s", name, wb_suffix[slot[i]]);
        if (strlen(sname) > GKV_NAME_MAX)
            continue;   /* no state can have that name */
        if (missing_ok &&
            (rc = kv__rec_get(s, txn, sname, &st)) == GKV_ENOTFOUND) {
            kv__clear(s);
            continue;
        }
        kv__state_rec(parent, slot[i] == 4, &want);
        if ((rc = mirror_load(s, txn, sname, name, &want, &m[i])) != GKV_OK)
            return rc;
    }
    return GKV_OK;
}

/* ---- flushing ---------------------------------------------------------
 *
 * A flush has two steps. Under st_wb_lock, exclusive (a push boundary), it
 * marks every dirty chunk KV_WB_PENDING and lists it: a scan of one byte
 * per chunk. Then, without that lock, it writes the listed chunks in one
 * LMDB transaction, copying each straight from its mirror into LMDB's
 * page under st_wb_copy_mu (one chunk at a time). A push that meanwhile
 * changes rows of a pending chunk first saves those rows as they were
 * (kv__mirror_touch: each row once a flush, so a push costs the rows it
 * changes, not the chunks they lie in), and the flush overlays them on the
 * chunk it copies; a range write saves the whole chunk (kv__wb_save), and
 * the flush writes that copy instead. A chunk with saved rows stays
 * KV_WB_PENDING, so that later pushes save theirs too, and is dirty once
 * the flush ends.
 * So the store gets the state at the push boundary, pushes never wait for
 * the flush's copy or its write, and no second copy of the dirty data is
 * made unless pushes come during the flush (and then only of the chunks
 * they change). The transaction writes its chunks in slices of
 * kv__wb_slice (nested transactions, kv__slice_begin), so its cost follows
 * the pages it writes, not the state of LMDB's free list. */

void (*kv__wb_flush_hook)(gkv_store *s);

typedef struct wb_piece {       /* one chunk of the flush */
    kv_mirror *m;               /* stable, with its record m->r, while
                                 * st_wb_flush_mu is held */
    kv_mirror *parent;          /* m's tensor (m itself, or w->m[0]) */
    uint64_t c;
    size_t off;                 /* of its saved copy in the stage */
    size_t bit;                 /* of its row bits in the stage's bitmap */
    size_t head;                /* its last saved row (row_ent) in the
                                 * stage, plus 1; 0: none */
    size_t rbytes;              /* stage bytes its saved rows take */
    int saved;                  /* 0: nothing saved; PIECE_WHOLE: saved
                                 * whole: write the copy; PIECE_ROWS: rows
                                 * saved (bits set): overlay them */
} wb_piece;

/* A row a push saved, in the stage: this header, then the row (padded to
 * 8 bytes). */
typedef struct row_ent {
    size_t next;                /* the piece's previous one, plus 1; 0: none */
    size_t k;                   /* its row in the chunk */
} row_ent;

enum { PIECE_WHOLE = 1, PIECE_ROWS = 2 };

typedef struct wb_stage {
    wb_piece *p;
    size_t np;
    unsigned char *buf;         /* s->st_wb_stage */
    size_t used;                /* saved copies fill it from the front, so
                                 * what stays resident is the most one
                                 * flush saved */
    uint64_t *bits;             /* a bit per row of the pieces with saved
                                 * rows (NULL: out of memory, or a stage of
                                 * less than twice the pending bytes; then
                                 * pushes save whole chunks) */
    size_t bits_used;           /* words of it given to pieces */
    size_t slice;               /* chunks per nested transaction (0: one
                                 * transaction, no nesting) */
} wb_stage;

size_t kv__wb_slice = 16384;

static size_t
chunk_len(const kv_rec *r, uint64_t c)
{
    return kv__chunk_nrows(r, c) * r->row_bytes;
}

static unsigned char *
chunk_rows(const kv_mirror *m, uint64_t c)
{
    return m->rows + c * m->r.chunk_rows * m->r.row_bytes;
}

static size_t
bit_words(const kv_rec *r)
{
    return (r->chunk_rows + 63) / 64;
}

static int
bit_get(const uint64_t *b, size_t k)
{
    return (int)((b[k / 64] >> (k % 64)) & 1);
}

/* The piece of pending chunk c of m in the flush in progress. */
static wb_piece *
piece_find(wb_stage *st, const kv_mirror *m, uint64_t c)
{
    size_t lo = m->pend_lo, hi = m->pend_lo + m->pend_n;

    while (lo < hi) {   /* a mirror's pieces are in chunk order */
        size_t mid = lo + (hi - lo) / 2;
        if (st->p[mid].c < c)
            lo = mid + 1;
        else
            hi = mid;
    }
    return &st->p[lo];
}

static size_t
ent_bytes(size_t rb)
{
    return sizeof(row_ent) + ((rb + 7) & ~(size_t)7);
}

/* Puts the rows pushes saved of piece p back into dst, its chunk. */
static void
rows_overlay(const wb_stage *st, const wb_piece *p, unsigned char *dst)
{
    const size_t rb = p->m->r.row_bytes;

    for (size_t h = p->head; h != 0;) {
        row_ent e;
        memcpy(&e, st->buf + h - 1, sizeof e);
        memcpy(dst + e.k * rb, st->buf + h - 1 + sizeof e, rb);
        h = e.next;
    }
}

void
kv__wb_save(gkv_store *s, kv_mirror *m, uint64_t c)
{
    wb_stage *st = s->st_wb_fl;
    wb_piece *p = piece_find(st, m, c);

    p->off = st->used;
    st->used += chunk_len(&m->r, c);
    memcpy(st->buf + p->off, chunk_rows(m, c), chunk_len(&m->r, c));
    if (p->saved == PIECE_ROWS)   /* those hold their old values */
        rows_overlay(st, p, st->buf + p->off);
    p->saved = PIECE_WHOLE;
    m->dirty[c] = KV_WB_DIRTY;
}

/* Saves row x (of m) of pending chunk c, piece p, at its first change in
 * a flush: a piece's rows take at most the chunk's bytes (past that the
 * chunk is saved whole), so a flush's stage holds at most twice the bytes
 * it writes. */
static void
row_save(gkv_store *s, wb_stage *st, kv_mirror *m, wb_piece *p, uint64_t c,
         uint64_t x)
{
    const size_t rb = m->r.row_bytes, eb = ent_bytes(rb);
    const size_t k = (size_t)(x - c * m->r.chunk_rows);
    row_ent e;
    uint64_t *b;

    if (st->bits == NULL || p->rbytes + eb > chunk_len(&m->r, c)) {
        kv__wb_save(s, m, c);
        return;
    }
    if (p->saved == 0) {
        p->bit = st->bits_used;
        st->bits_used += bit_words(&m->r);
        memset(st->bits + p->bit, 0, bit_words(&m->r) * sizeof *st->bits);
        p->saved = PIECE_ROWS;
    }
    b = st->bits + p->bit;
    if (bit_get(b, k))
        return;   /* saved by an earlier push of this flush */
    b[k / 64] |= (uint64_t)1 << (k % 64);
    e.next = p->head;
    e.k = k;
    memcpy(st->buf + st->used, &e, sizeof e);
    memcpy(st->buf + st->used + sizeof e, m->rows + x * rb, rb);
    p->head = st->used + 1;
    st->used += eb;
    p->rbytes += eb;
}

void
kv__mirror_touch(gkv_store *s, kv_mirror *m, const uint64_t *ids, size_t n)
{
    const kv_chunk_div dv = kv__div_make(m->r.chunk_rows);

    for (size_t i = 0; i < n; i++) {
        const uint64_t x = ids[i] - m->r.lo, c = kv__div_chunk(dv, x);

        if (m->dirty[c] == KV_WB_PENDING)
            row_save(s, s->st_wb_fl, m, piece_find(s->st_wb_fl, m, c), c, x);
    }
}

void
kv__mirror_touch_sorted(gkv_store *s, kv_mirror *m, const uint64_t *ids,
                        const uint32_t *order, size_t n)
{
    wb_stage *st = s->st_wb_fl;
    const kv_chunk_div dv = kv__div_make(m->r.chunk_rows);
    const size_t rb = m->r.row_bytes;
    size_t pi = m->pend_lo;

    for (size_t i = 0; i < n; i++) {
        const uint64_t x = ids[order[i]] - m->r.lo, c = kv__div_chunk(dv, x);

        if (i + 8 < n)   /* the rows are far apart: ask for them early */
            __builtin_prefetch(m->rows + (ids[order[i + 8]] - m->r.lo) * rb);
        if (m->dirty[c] != KV_WB_PENDING)
            continue;
        while (st->p[pi].c < c)   /* c is pending: its piece is ahead */
            pi++;
        row_save(s, st, m, &st->p[pi], c, x);
    }
}

/* Sets m->gone when the store no longer holds m's tensor (another handle
 * deleted or replaced it). */
static gkv_err
check_gone(gkv_store *s, MDB_txn *txn, kv_mirror *m)
{
    kv_rec now;
    gkv_err rc = kv__rec_get(s, txn, m->name, &now);

    if (rc == GKV_ENOTFOUND || (rc == GKV_OK && now.tid != m->r.tid)) {
        m->gone = 1;
        kv__clear(s);
        return GKV_OK;
    }
    return rc;
}

/* Copies piece p's chunk as it was when the flush began to dst (len
 * bytes): from the stage when saved whole, else from the mirror, with the
 * rows pushes saved put back. Caller holds st_wb_copy_mu. */
static void
piece_copy(const wb_stage *st, const wb_piece *p, unsigned char *dst,
           size_t len)
{
    memcpy(dst, p->saved == PIECE_WHOLE ? st->buf + p->off
                                        : chunk_rows(p->m, p->c), len);
    if (p->saved == PIECE_ROWS)
        rows_overlay(st, p, dst);
}

static gkv_err
flush_fn(gkv_store *s, MDB_txn *txn, void *arg)
{
    wb_stage *st = arg;
    kv_slice sl;
    gkv_err rc;
    int mrc;

    /* no nesting for a flush of one slice or less: it would only cost */
    if ((rc = kv__slice_begin(s, txn, st->np > st->slice ? st->slice : 0,
                              &sl)) != GKV_OK)
        return kv__slice_end(&sl, rc);
    for (size_t i = 0; i < st->np; i++)   /* a retry looks again */
        st->p[i].m->gone = st->p[i].parent->gone = 0;
    for (size_t i = 0, next; i < st->np; i = next) {
        const wb_piece *p = &st->p[i];
        unsigned char kb[KV_KEY_LEN];
        MDB_val k = {KV_KEY_LEN, kb}, d = {kv__chunk_size(&p->m->r, p->c), NULL};

        next = i + 1;
        /* the tensor and this companion must still be the ones we
         * loaded: another handle may have deleted or replaced them. Then
         * their chunks are skipped (wb_flush drops the copies), and the
         * others still written. A companion of a gone tensor is skipped
         * even when it is the store's: it could be the new tensor's. */
        if (i == 0 || p->m != st->p[i - 1].m) {
            if ((rc = check_gone(s, sl.txn, p->parent)) != GKV_OK ||
                (p->m != p->parent &&
                 (rc = check_gone(s, sl.txn, p->m)) != GKV_OK))
                return kv__slice_end(&sl, rc);
        }
        if (p->m->gone || p->parent->gone)
            continue;
        kv__key(kb, p->m->r.tid, p->c);
        if ((mrc = mdb_cursor_put(sl.cur, &k, &d, MDB_RESERVE)) != 0) {
            rc = kv__fail(s, kv__from_mdb(mrc), "write-back flush: tensor "
                          "'%s' chunk %llu: %s", p->m->name,
                          (unsigned long long)p->c, mdb_strerror(mrc));
        } else {
            /* a retry (after a map resize, or of a slice that found LMDB's
             * dirty list full) runs this again: pending chunks are still
             * unchanged in the mirror, saved ones in the stage */
            pthread_mutex_lock(&s->st_wb_copy_mu);
            piece_copy(st, p, (unsigned char *)d.mv_data + KV_CHUNK_HDR,
                       d.mv_size - KV_CHUNK_HDR);
            pthread_mutex_unlock(&s->st_wb_copy_mu);
            kv__chunk_seal(&p->m->r, p->c, d.mv_data);
            rc = kv__slice_step(&sl, next, 1);
        }
        /* a slice that found the dirty list full: its pieces again, from
         * the first, in the parent */
        if (rc != GKV_OK && (rc = kv__slice_retry(&sl, rc, &next)) != GKV_OK)
            return kv__slice_end(&sl, rc);
    }
    return kv__slice_end(&sl, GKV_OK);
}

/* Runs 'fn' (flush_fn, or one that calls it) in one transaction, in
 * slices of kv__wb_slice chunks (kv__write_sliced). */
static gkv_err
flush_write(gkv_store *s, kv_write_fn fn, void *arg, wb_stage *st)
{
    st->slice = kv__wb_slice;
    return kv__write_sliced(s, fn, arg, &st->slice);
}

/* Counts the dirty chunks of every mirror and their bytes. Caller holds
 * st_wb_lock. */
static void
wb_count(gkv_store *s, size_t *np, size_t *bytes)
{
    *np = *bytes = 0;
    for (kv_wb *w = s->st_wb; w != NULL; w = w->next)
        for (int i = 0; i < 5; i++) {
            const kv_mirror *m = &w->m[i];
            for (uint64_t c = 0; m->rows != NULL && c < m->r.nchunks; c++)
                if (m->dirty[c] == KV_WB_DIRTY) {
                    (*np)++;
                    *bytes += chunk_len(&m->r, c);
                }
        }
}

/* After a flush that committed: drops the mirrors the flush found deleted
 * or replaced by another handle (a tensor with all its state, or one state
 * companion), and notes the first in st_wb_drop for the next flush or stop
 * call to report (the flusher thread reports to no one). Caller holds
 * st_wb_flush_mu and st_wb_lock exclusively; 'dead' collects the entries
 * to free after unlocking. */
static void
drop_gone(gkv_store *s, kv_wb **dead)
{
    kv_wb *before = *dead;

    for (kv_wb **pp = &s->st_wb; *pp != NULL;) {
        kv_wb *w = *pp;

        for (int i = 0; i < 5; i++) {
            /* the tensor, or a companion of a tensor still held */
            if (!w->m[i].gone || (i > 0 && w->m[0].gone))
                continue;
            if (s->st_wb_ndrop++ == 0)
                snprintf(s->st_wb_drop, sizeof s->st_wb_drop, "write-back: "
                         "tensor '%s' was deleted or replaced by another "
                         "handle; its write-back copy is dropped, with the "
                         "pushes this handle made to it", w->m[i].name);
            if (i > 0) {   /* loaded again when next used */
                mirror_free(&w->m[i]);
                memset(&w->m[i], 0, sizeof w->m[i]);
            }
        }
        if (w->m[0].gone) {
            /* lock-free readers load the head (kv__wb_any) */
            __atomic_store_n(pp, w->next, __ATOMIC_RELEASE);
            w->next = *dead;
            *dead = w;
        } else {
            pp = &w->next;
        }
    }
    /* the other processes' view: the list without them (none left: the
     * lock released) */
    if (*dead != before)
        (void)kv__wb_own_publish(s, NULL);
}

/* The drops noted since the last call, as the store's message:
 * GKV_ENOTFOUND, or GKV_OK when there were none. */
static gkv_err
drop_report(gkv_store *s)
{
    char msg[sizeof s->st_wb_drop];
    size_t n;

    pthread_mutex_lock(&s->st_wb_flush_mu);
    n = s->st_wb_ndrop;
    memcpy(msg, s->st_wb_drop, sizeof msg);
    s->st_wb_ndrop = 0;
    pthread_mutex_unlock(&s->st_wb_flush_mu);
    if (n == 0)
        return GKV_OK;
    if (n == 1)
        return kv__fail(s, GKV_ENOTFOUND, "%s", msg);
    return kv__fail(s, GKV_ENOTFOUND, "%s (and %zu more)", msg, n - 1);
}

/* Writes every dirty chunk of every write-back tensor in one transaction.
 * Tensors it finds deleted or replaced by another handle are dropped
 * (drop_gone), the others written. */
static gkv_err
wb_flush(gkv_store *s)
{
    wb_stage st = {NULL, 0, NULL, 0, NULL, 0, 0};
    size_t cap = 0, np, bytes, want, words = 0;
    int small = 0;   /* twice the bytes could not be had */
    kv_wb *dead = NULL;
    gkv_err rc = GKV_OK;


    pthread_mutex_lock(&s->st_wb_flush_mu);
    for (;;) {   /* room for what pushes may save, then mark, exclusive */
        pthread_rwlock_wrlock(&s->st_wb_lock);
        wb_count(s, &np, &bytes);
        want = bytes > SIZE_MAX / 2 ? bytes : 2 * bytes;
        if (np == 0 || (np <= cap && (want <= s->st_wb_stage_len ||
                                      (small && bytes <= s->st_wb_stage_len))))
            break;
        pthread_rwlock_unlock(&s->st_wb_lock);
        if (np > cap) {
            wb_piece *p = gkv__realloc(st.p, np * sizeof *st.p);
            if (p == NULL)
                goto nomem;
            st.p = p;
            cap = np;
        }
        if ((want > s->st_wb_stage_len && !small) ||
            bytes > s->st_wb_stage_len) {
            /* kept between flushes: fresh memory costs a fault per page;
             * only what pushes save is ever touched. Twice the bytes
             * lets pushes save rows (kv__mirror_touch); where that much
             * cannot be had, once lets them save whole chunks. */
            big_free(s->st_wb_stage, s->st_wb_stage_len);
            s->st_wb_stage_len = 0;
            if ((s->st_wb_stage = big_alloc(want)) != NULL)
                s->st_wb_stage_len = want;
            else if ((s->st_wb_stage = big_alloc(bytes)) != NULL)
                s->st_wb_stage_len = bytes;
            else
                goto nomem;
            small = s->st_wb_stage_len < want;
        }
    }
    if (np == 0) {
        pthread_rwlock_unlock(&s->st_wb_lock);
        goto out;
    }
    for (kv_wb *w = s->st_wb; w != NULL; w = w->next)
        for (int i = 0; i < 5; i++) {
            kv_mirror *m = &w->m[i];
            m->pend_lo = st.np;
            for (uint64_t c = 0; m->rows != NULL && c < m->r.nchunks; c++)
                if (m->dirty[c] == KV_WB_DIRTY) {
                    st.p[st.np++] = (wb_piece){m, &w->m[0], c, 0, 0, 0, 0, 0};
                    m->dirty[c] = KV_WB_PENDING;
                }
            m->pend_n = st.np - m->pend_lo;
        }
    for (size_t i = 0; i < st.np; i++)
        words += bit_words(&st.p[i].m->r);
    if (s->st_wb_stage_len / 2 >= bytes)   /* else NULL: whole chunks */
        st.bits = gkv__malloc(words * sizeof *st.bits);
    st.buf = s->st_wb_stage;
    s->st_wb_fl = &st;
    pthread_rwlock_unlock(&s->st_wb_lock);

    if (kv__wb_flush_hook != NULL)
        kv__wb_flush_hook(s);
    rc = flush_write(s, flush_fn, &st, &st);

    /* written: pending chunks are clean (saved ones are dirty already);
     * failed: all of them are dirty again, for the next flush */
    pthread_rwlock_wrlock(&s->st_wb_lock);
    for (size_t i = 0; i < st.np; i++) {
        uint8_t *d = &st.p[i].m->dirty[st.p[i].c];
        if (rc != GKV_OK || st.p[i].saved == PIECE_ROWS)
            *d = KV_WB_DIRTY;   /* rows saved: changed since it began */
        else if (*d == KV_WB_PENDING)
            *d = KV_WB_CLEAN;
    }
    s->st_wb_fl = NULL;
    if (rc == GKV_OK)
        drop_gone(s, &dead);
    for (size_t i = 0; i < st.np; i++)   /* failed: they stay, and retry */
        st.p[i].m->gone = st.p[i].parent->gone = 0;
    pthread_rwlock_unlock(&s->st_wb_lock);
out:
    pthread_mutex_unlock(&s->st_wb_flush_mu);
    gkv__free(st.p);
    gkv__free(st.bits);
    while (dead != NULL) {
        kv_wb *w = dead;
        dead = w->next;
        wb_free(w);
    }
    return rc;
nomem:
    rc = kv__fail(s, GKV_ENOMEM, "write-back flush: out of memory for %zu "
                  "bytes of %zu chunks", bytes, np);
    goto out;
}

static unsigned
wb_interval(gkv_store *s)
{
    unsigned ms = 0;

    pthread_rwlock_rdlock(&s->st_wb_lock);
    for (kv_wb *w = s->st_wb; w != NULL; w = w->next)
        if (ms == 0 || w->interval_ms < ms)
            ms = w->interval_ms;
    pthread_rwlock_unlock(&s->st_wb_lock);
    return ms ? ms : WB_DEFAULT_MS;
}

static void *
flusher(void *arg)
{
    gkv_store *s = arg;

    pthread_mutex_lock(&s->st_wb_mu);
    while (!s->st_wb_stop) {
        struct timespec dl;
        unsigned ms;

        pthread_mutex_unlock(&s->st_wb_mu);
        ms = wb_interval(s);
        /* st_wb_cv waits on CLOCK_MONOTONIC (gkv_store_open): a clock
         * set back does not hold the flush, nor one set ahead rush it */
        gkv__mono_deadline(&dl, ms);
        pthread_mutex_lock(&s->st_wb_mu);
        while (!s->st_wb_stop &&
               pthread_cond_timedwait(&s->st_wb_cv, &s->st_wb_mu, &dl) != ETIMEDOUT)
            ;
        if (s->st_wb_stop)
            break;
        pthread_mutex_unlock(&s->st_wb_mu);
        kv__clear(s);
        wb_flush(s);   /* on error the chunks stay dirty: retried */
        pthread_mutex_lock(&s->st_wb_mu);
    }
    pthread_mutex_unlock(&s->st_wb_mu);
    return NULL;
}

/* Stops the flusher thread. With 'restart', starts a new one when a
 * gkv_writeback_start came meanwhile: it found the thread still running
 * and left it to us. While one caller stops the thread, another returns
 * at once (a thread is joined once). */
static void
flusher_stop(gkv_store *s, int restart)
{
    pthread_t th;

    pthread_mutex_lock(&s->st_wb_mu);
    if (!s->st_wb_running || s->st_wb_stop) {
        pthread_mutex_unlock(&s->st_wb_mu);
        return;
    }
    s->st_wb_stop = 1;
    th = s->st_wb_thread;
    pthread_cond_broadcast(&s->st_wb_cv);
    pthread_mutex_unlock(&s->st_wb_mu);
    pthread_join(th, NULL);
    pthread_mutex_lock(&s->st_wb_mu);
    s->st_wb_stop = 0;
    s->st_wb_running = restart &&
                       __atomic_load_n(&s->st_wb, __ATOMIC_ACQUIRE) != NULL &&
                       pthread_create(&s->st_wb_thread, NULL, flusher, s) == 0;
    pthread_mutex_unlock(&s->st_wb_mu);
}

/* mirror_load of 'first' (unless NULL), then state_mirrors_load, under a
 * guard (kv__guarded): what they loaded is in the mirrors, which the
 * callers free on an error. */
struct load_arg {
    const char *name;
    kv_mirror *first;
    const kv_rec *parent;         /* NULL: first's */
    const int *slot, *load;
    size_t n;
    int missing_ok;
    kv_mirror *m;
};

static gkv_err
load_fn(gkv_store *s, MDB_txn *txn, void *arg)
{
    struct load_arg *a = arg;
    gkv_err rc;

    if (a->first != NULL &&
        (rc = mirror_load(s, txn, a->name, NULL, NULL, a->first)) != GKV_OK)
        return rc;
    return state_mirrors_load(s, txn, a->name, a->first != NULL ?
                              &a->first->r : a->parent, a->slot, a->load,
                              a->n, a->missing_ok, a->m);
}

/* ---- the API ---------------------------------------------------------- */

gkv_err
gkv_writeback_start(gkv_store *s, const char *name, unsigned interval_ms)
{
    kv_snap sn;
    kv_wb *w;
    gkv_err rc;

    kv__clear(s);
    if (kv__forked(s))          /* a parent's handle after fork() */
        return kv__fork_refused(s);
    if ((rc = kv__name_check(s, name, 0)) != GKV_OK)
        return rc;
    if (s->st_flags & GKV_RDONLY)
        return kv__fail(s, GKV_ERDONLY, "store '%s' is open read-only",
                        s->st_path);
    if ((w = gkv__calloc(1, sizeof *w)) == NULL)
        return kv__fail(s, GKV_ENOMEM, "out of memory");
    w->interval_ms = interval_ms ? interval_ms : WB_DEFAULT_MS;
    /* exclusive: no push of this tensor may run between the load and the
     * moment the mirror is visible */
    pthread_rwlock_wrlock(&s->st_wb_lock);
    if (kv__wb_find(s, name) != NULL) {
        pthread_rwlock_unlock(&s->st_wb_lock);
        gkv__free(w);
        return kv__fail(s, GKV_EEXIST, "tensor '%s' is already in write-back "
                        "mode", name);
    }
    /* one process at a time keeps a store's tensors in write-back */
    if ((rc = kv__wb_own_publish(s, name)) != GKV_OK) {
        (void)kv__wb_own_publish(s, NULL);  /* a lock taken, then a failed
                                             * write: released again */
        pthread_rwlock_unlock(&s->st_wb_lock);
        gkv__free(w);
        return rc;
    }
    /* listed now: a write of another process that passed its check before
     * the listing holds LMDB's writer lock until it commits; once we had
     * the lock, it is in the snapshot below */
    if ((rc = kv__writer_barrier(s)) != GKV_OK) {
        (void)kv__wb_own_publish(s, NULL);  /* unlisted; none left: released */
        pthread_rwlock_unlock(&s->st_wb_lock);
        gkv__free(w);
        return rc;
    }
    /* the tensor and its state through one snapshot: another handle may
     * push to it, or delete and recreate it, meanwhile, and a copy must
     * not hold weights of one moment with state of another (nor state of
     * another tensor of that name) */
    if ((rc = kv__snap_begin(s, NULL, &sn)) == GKV_OK) {
        static const int slot[4] = {1, 2, 3, 4}, load[4] = {1, 1, 1, 1};

        struct load_arg a = {name, &w->m[0], NULL, slot, load, 4, 1,
                             &w->m[1]};

        rc = kv__guarded(s, sn.txn, load_fn, &a);
        kv__snap_end(&sn);
    }
    if (rc != GKV_OK) {
        (void)kv__wb_own_publish(s, NULL);  /* unlisted; none left: released */
        pthread_rwlock_unlock(&s->st_wb_lock);
        wb_free(w);
        return rc;
    }
    w->next = s->st_wb;
    __atomic_store_n(&s->st_wb, w, __ATOMIC_RELEASE);
    pthread_rwlock_unlock(&s->st_wb_lock);

    pthread_mutex_lock(&s->st_wb_mu);
    if (!s->st_wb_running) {
        if (pthread_create(&s->st_wb_thread, NULL, flusher, s) != 0) {
            pthread_mutex_unlock(&s->st_wb_mu);
            gkv_writeback_stop(s, name);
            return kv__fail(s, GKV_ENOMEM, "tensor '%s': cannot start the "
                            "write-back thread", name);
        }
        s->st_wb_running = 1;
    }
    pthread_cond_broadcast(&s->st_wb_cv);   /* a shorter interval applies now */
    pthread_mutex_unlock(&s->st_wb_mu);
    return GKV_OK;
}

gkv_err
gkv_writeback_flush(gkv_store *s)
{
    gkv_err rc;

    kv__clear(s);
    if (kv__forked(s))          /* a parent's handle after fork() */
        return kv__fork_refused(s);
    if (__atomic_load_n(&s->st_wb, __ATOMIC_ACQUIRE) != NULL) {
        if ((rc = wb_flush(s)) != GKV_OK)
            return rc;
        if (!(s->st_flags & GKV_NOSYNC) && (rc = kv__env_sync(s)) != GKV_OK)
            return rc;
    }
    return drop_report(s);   /* also those of the background flushes */
}

gkv_err
gkv_writeback_stop(gkv_store *s, const char *name)
{
    kv_wb **pp, *w;
    gkv_err rc;

    kv__clear(s);
    if (kv__forked(s))          /* a parent's handle after fork() */
        return kv__fork_refused(s);
    if ((rc = kv__name_check(s, name, 0)) != GKV_OK)
        return rc;
    pthread_rwlock_rdlock(&s->st_wb_lock);
    w = kv__wb_find(s, name);
    pthread_rwlock_unlock(&s->st_wb_lock);
    if (w == NULL && drop_report(s) != GKV_OK) {  /* dropped by a flush */
        if (__atomic_load_n(&s->st_wb, __ATOMIC_ACQUIRE) == NULL)
            flusher_stop(s, 1);
        return GKV_ENOTFOUND;
    }
    if (w == NULL)
        return kv__fail(s, GKV_ENOTFOUND, "tensor '%s' is not in write-back "
                        "mode", name);
    /* flush and unlink under the flush lock, so no flush still holds w */
    if ((rc = wb_flush(s)) != GKV_OK)
        return rc;
    pthread_mutex_lock(&s->st_wb_flush_mu);
    pthread_rwlock_wrlock(&s->st_wb_lock);
    /* by name again: another thread may have stopped it meanwhile (and a
     * start may have reused the memory of w) */
    for (pp = &s->st_wb; *pp != NULL && strcmp((*pp)->m[0].name, name) != 0;
         pp = &(*pp)->next)
        ;
    if ((w = *pp) == NULL) {
        rc = GKV_ENOTFOUND;
    } else {
        /* a push after the flush above is not lost: flush it too */
        for (int i = 0; i < 5; i++)
            for (uint64_t c = 0; w->m[i].rows && c < w->m[i].r.nchunks; c++)
                if (w->m[i].dirty[c])
                    rc = GKV_EBUSY;
        if (rc == GKV_OK) { /* atomic: kv__wb_any() reads the head */
            __atomic_store_n(pp, w->next, __ATOMIC_RELEASE);
            (void)kv__wb_own_publish(s, NULL);
            if (s->st_wb == NULL) {     /* the last one: no push needs the
                                         * undo log any more */
                kv__wb_undo_drop(s);
            }
        }
    }
    pthread_rwlock_unlock(&s->st_wb_lock);
    pthread_mutex_unlock(&s->st_wb_flush_mu);
    if (rc == GKV_EBUSY)   /* pushes raced with the stop: try again */
        return gkv_writeback_stop(s, name);
    if (rc == GKV_ENOTFOUND && drop_report(s) != GKV_OK) {  /* by that flush */
        if (__atomic_load_n(&s->st_wb, __ATOMIC_ACQUIRE) == NULL)
            flusher_stop(s, 1);
        return GKV_ENOTFOUND;
    }
    if (rc == GKV_ENOTFOUND)
        return kv__fail(s, GKV_ENOTFOUND, "tensor '%s' is not in write-back "
                        "mode", name);
    wb_free(w);
    if (__atomic_load_n(&s->st_wb, __ATOMIC_ACQUIRE) == NULL)
        flusher_stop(s, 1);
    return (s->st_flags & GKV_NOSYNC) ? GKV_OK : kv__env_sync(s);
}

/* The mirror index (into wb_suffix) of state suffix 'suf'. */
static int
wb_slot(const char *suf)
{
    for (int j = 1; j < 5; j++)
        if (strcmp(wb_suffix[j], suf) == 0)
            return j;
    return 0;
}

gkv_err
kv__wb_state_load(gkv_store *s, const char *name, enum kv_hkind k)
{
    const size_t n = kv__state_n(k);

    for (;;) {
        int slot[3], load[3], need = 0, again = 0;
        kv_mirror m[3];
        kv_rec parent;
        uint64_t gen = 0;
        kv_snap sn;
        kv_wb *w;
        gkv_err rc;

        memset(m, 0, sizeof m);
        pthread_rwlock_rdlock(&s->st_wb_lock);
        if ((w = kv__wb_find(s, name)) != NULL) {
            parent = w->m[0].r;
            gen = s->st_wb_gen;
            for (size_t i = 0; i < n; i++) {
                slot[i] = wb_slot(kv__state_suffix(k, i));
                load[i] = w->m[slot[i]].rows == NULL;
                need |= load[i];
            }
        }
        pthread_rwlock_unlock(&s->st_wb_lock);
        if (w == NULL || !need)
            return GKV_OK;
        /* create them in the store (zeros) if missing, then load them
         * through one snapshot; only pushes change state, and they wait
         * for this. Only for the tensor we hold a copy of: another handle
         * may have replaced it (then the flush drops our copy), and a
         * companion of the new one could have other rows */
        if ((rc = kv__state_create(s, name, k, parent.tid)) != GKV_OK)
            return rc;
        if (kv__wb_load_hook != NULL)
            kv__wb_load_hook(s, "");
        if ((rc = kv__snap_begin(s, NULL, &sn)) != GKV_OK)
            return rc;
        rc = kv__guarded(s, sn.txn, load_fn,
                         &(struct load_arg){name, NULL, &parent, slot, load,
                                            n, 0, m});
        kv__snap_end(&sn);
        if (rc == GKV_ENOTFOUND) {
            /* a reset that committed between our create and our snapshot
             * deleted what we created: create again (the tensor itself
             * gone is the flush's business, as below) */
            pthread_rwlock_rdlock(&s->st_wb_lock);
            w = kv__wb_find(s, name);
            again = w != NULL && w->m[0].r.tid == parent.tid &&
                    s->st_wb_gen != gen;
            pthread_rwlock_unlock(&s->st_wb_lock);
            if (again) {
                kv__clear(s);
                for (size_t i = 0; i < n; i++)
                    mirror_free(&m[i]);
                continue;
            }
        }
        if (rc == GKV_OK) {
            /* a reset that committed since we looked may have deleted
             * what we loaded (its transaction came after our create):
             * installing it would stand for state the store no longer
             * has. Then load again. */
            pthread_rwlock_wrlock(&s->st_wb_lock);
            w = kv__wb_find(s, name);
            if (w != NULL && w->m[0].r.tid == parent.tid &&
                s->st_wb_gen == gen) {
                for (size_t i = 0; i < n; i++)
                    if (load[i] && w->m[slot[i]].rows == NULL) {
                        w->m[slot[i]] = m[i];
                        m[i].rows = NULL;
                        m[i].dirty = NULL;
                    }
            } else {
                again = w != NULL;
            }
            pthread_rwlock_unlock(&s->st_wb_lock);
        }
        for (size_t i = 0; i < n; i++)
            mirror_free(&m[i]);
        if (rc == GKV_OK && !again && kv__wb_load_hook != NULL)
            kv__wb_load_hook(s, NULL);
        if (rc != GKV_OK || !again)
            return rc;
    }
}

gkv_err
kv__wb_close(gkv_store *s)
{
    gkv_err rc = GKV_OK;

    /* also with no tensor left: when a flush dropped the last one (another
     * handle deleted it), the thread still runs, and must not outlive s */
    flusher_stop(s, 0);
    if (s->st_wb != NULL)
        rc = wb_flush(s);
    kv__wb_discard(s);
    return rc;
}

void
kv__wb_discard(gkv_store *s)
{
    /* kv__wb_close after its flush; or a forked child: no flusher thread
     * there to stop, and nothing written */
    while (s->st_wb != NULL) {
        kv_wb *w = s->st_wb;
        s->st_wb = w->next;
        wb_free(w);
    }
    /* kept by the last flush even when no tensor is in write-back mode now */
    big_free(s->st_wb_stage, s->st_wb_stage_len);
    s->st_wb_stage = NULL;
    s->st_wb_stage_len = 0;
    kv__wb_undo_drop(s);
}

/* ---- optimizer state reset (gkv_opt_reset) ------------------------------ */

struct wb_reset_arg {
    wb_stage st;            /* every dirty chunk but the reset companions' */
    const char *name;
    unsigned kinds;
    uint32_t tid;           /* of the tensor the copy holds */
};

/* Whether mirror i (1..4) of a tensor holds state of an optimizer in
 * 'kinds'. */
static int
reset_hits(unsigned kinds, int i)
{
    return (i == 1 && (kinds & KV_KIND_BIT(KV_H_ADAGRAD))) ||
           (i >= 2 && (kinds & KV_KIND_BIT(KV_H_ADAM)));
}

static gkv_err
reset_fn(gkv_store *s, MDB_txn *txn, void *arg)
{
    struct wb_reset_arg *a = arg;
    kv_rec r;
    gkv_err rc;

    if ((rc = kv__rec_get(s, txn, a->name, &r)) == GKV_OK && r.tid != a->tid)
        rc = kv__fail(s, GKV_ENOTFOUND, "tensor '%s' was deleted or replaced "
                      "by another handle; its write-back copy is dropped by "
                      "the next flush", a->name);
    if (rc != GKV_OK || (rc = flush_fn(s, txn, &a->st)) != GKV_OK)
        return rc;
    return kv__state_drop(s, txn, a->name, a->kinds);
}

gkv_err
kv__wb_reset(gkv_store *s, const char *name, unsigned kinds, int *done)
{
    struct wb_reset_arg a = {{NULL, 0, NULL, 0, NULL, 0, 0}, name, kinds, 0};
    kv_wb *w, *dead = NULL;
    size_t np, bytes;
    gkv_err rc = GKV_OK;

    *done = 1;
    /* no flush in progress (none holds a pending chunk or a mirror), and
     * no push until the transaction commits: the store goes from the
     * state after one push to that state without the optimizer's */
    pthread_mutex_lock(&s->st_wb_flush_mu);
    pthread_rwlock_wrlock(&s->st_wb_lock);
    if ((w = kv__wb_find(s, name)) == NULL) {
        *done = 0;
        goto out;
    }
    a.tid = w->m[0].r.tid;
    wb_count(s, &np, &bytes);
    if (np > 0 && (a.st.p = gkv__malloc(np * sizeof *a.st.p)) == NULL) {
        rc = kv__fail(s, GKV_ENOMEM, "tensor '%s': out of memory for a reset "
                      "of its optimizer state", name);
        goto out;
    }
    for (kv_wb *x = s->st_wb; x != NULL; x = x->next)
        for (int i = 0; i < 5; i++) {
            kv_mirror *m = &x->m[i];
            if (x == w && i > 0 && reset_hits(kinds, i))
                continue;   /* deleted by the same transaction */
            for (uint64_t c = 0; m->rows != NULL && c < m->r.nchunks; c++)
                if (m->dirty[c] == KV_WB_DIRTY)
                    a.st.p[a.st.np++] = (wb_piece){m, &x->m[0], c, 0, 0, 0, 0, 0};
        }
    rc = flush_write(s, reset_fn, &a, &a.st);
    if (rc == GKV_OK) {
        s->st_wb_gen++;   /* a state load in progress must not install */
        for (size_t i = 0; i < a.st.np; i++)   /* no push came meanwhile */
            a.st.p[i].m->dirty[a.st.p[i].c] = KV_WB_CLEAN;
        for (int i = 1; i < 5; i++)
            if (reset_hits(kinds, i) && w->m[i].rows != NULL) {
                mirror_free(&w->m[i]);   /* loaded again when next used */
                memset(&w->m[i], 0, sizeof w->m[i]);
            }
        drop_gone(s, &dead);
    }
    for (size_t i = 0; i < a.st.np; i++)
        a.st.p[i].m->gone = a.st.p[i].parent->gone = 0;
out:
    pthread_rwlock_unlock(&s->st_wb_lock);
    pthread_mutex_unlock(&s->st_wb_flush_mu);
    gkv__free(a.st.p);
    while (dead != NULL) {
        w = dead;
        dead = w->next;
        wb_free(w);
    }
    return rc;
}

/* big_alloc for the other files of kv/ (a write-back push's undo log,
 * kv/wb_rows.c), and the log's release. */
void *
kv__big_alloc(size_t len)
{
    return big_alloc(len);
}

void
kv__wb_undo_drop(gkv_store *s)
{
    big_free(s->st_wb_undo, s->st_wb_undo_len);
    s->st_wb_undo = NULL;
    s->st_wb_undo_len = 0;
}
