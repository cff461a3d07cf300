/* walk.c - a structural check of a store's LMDB file (data.mdb).
 *
 * LMDB trusts its file: a page number, a node offset, a size or a page's
 * flags that a flipped byte changed send it outside its map (SIGSEGV), to
 * a divide by a zero page size (SIGFPE), or into writing a page it takes
 * for its own dirty copy (SIGSEGV at the first write). No library walks an
 * LMDB file without trusting those pointers (mdb_stat and cursors use
 * them; LMDB's own mdb_env_open checks only the meta pages' magic and
 * version), so this file does, written by hand against LMDB 0.9's on-disk
 * format (mdb.c: MDB_page, MDB_meta, MDB_db, MDB_node; the layout has not
 * changed since 0.9.0 and is frozen by MDB_DATA_VERSION 1).
 *
 * It reads the file with pread, never through LMDB's map, and checks a
 * page before it follows any number in it: page numbers inside the
 * snapshot's last page, page flags one of the kinds stored on disk, lower
 * and upper bounds, node offsets and sizes inside their page, keys in
 * order and inside the range their parent gives them, overflow runs inside
 * the file, every leaf at the tree's depth, the page and entry counts of
 * each database's record, and no page reached twice (a page of two trees,
 * or of a tree and the free list, would be overwritten while in use).
 *
 * Layout (64-bit, little-endian; offsets in bytes):
 *   page header (16): pgno u64 @0, pad u16 @8, flags u16 @10,
 *                     lower u16 @12, upper u16 @14 (overflow: pages u32 @12);
 *                     node offsets u16 from @16, (lower - 16) / 2 of them
 *   meta (pages 0 and 1, after the header): magic u32 @16, version u32
 *                     @20, address u64 @24, mapsize u64 @32, free DB's
 *                     MDB_db @40, main DB's @88, last_pg u64 @136,
 *                     txnid u64 @144; the page size is the free DB's pad
 *   MDB_db (48):      pad u32 @0, flags u16 @4, depth u16 @6, branch_pages
 *                     @8, leaf_pages @16, overflow_pages @24, entries @32,
 *                     root @40 (u64 each; root ~0: empty)
 *   node (8 + key + data): lo u16 @0, hi u16 @2, flags u16 @4, ksize u16
 *                     @6, key @8; a leaf's data size is lo | hi << 16 and
 *                     its data follows the key (F_BIGDATA: a u64 page
 *                     number of an overflow run; F_SUBDATA: an MDB_db); a
 *                     branch node's child is lo | hi << 16 | flags << 32 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "kv/kv_int.h"

#define HDR         16u
#define MAGIC       0xBEEFC0DEu
#define DATA_VER    1u
#define P_BRANCH    0x01u
#define P_LEAF      0x02u
#define P_OVERFLOW  0x04u
#define P_META      0x08u
#define F_BIGDATA   0x01u
#define F_SUBDATA   0x02u
#define NODE        8u
#define DB_LEN      48u
#define MAX_DEPTH   32u       /* LMDB's CURSOR_STACK */
#define NO_PAGE     UINT64_MAX

static uint16_t get16(const unsigned char *p) { uint16_t v; memcpy(&v, p, 2); return v; }
static uint32_t get32(const unsigned char *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t get64(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return v; }

/* An MDB_db record. */
struct db {
    uint32_t pad;
    uint16_t flags, depth;
    uint64_t branch, leaf, overflow, entries, root;
};

static void
db_decode(const unsigned char *p, struct db *d)
{
    d->pad = get32(p);
    d->flags = get16(p + 4);
    d->depth = get16(p + 6);
    d->branch = get64(p + 8);
    d->leaf = get64(p + 16);
    d->overflow = get64(p + 24);
    d->entries = get64(p + 32);
    d->root = get64(p + 40);
}

/* One meta page as read. */
struct meta {
    int ok;                   /* magic, version, flags and page number */
    uint32_t magic, version, psize;
    uint64_t mapsize, last_pg, txnid;
    struct db dbs[2];         /* free, main */
};

/* A tensor id and name from the catalog, to name a damaged data page. */
struct tname {
    uint32_t tid;
    char name[GKV_NAME_MAX + 1];
};

struct walk {
    const char *path;         /* the store, for messages */
    int fd;
    uint32_t psize;
    uint64_t npages;          /* last_pg + 1 of the snapshot walked */
    uint64_t fpages;          /* whole pages in the file: a sound file may
                               * end before npages (a commit does not write
                               * the pages it allocated and freed again) */
    uint64_t txnid;
    uint64_t other_txnid;     /* the other header page's */
    uint64_t other_rec;       /* its tree's KV_TXN_KEY; UINT64_MAX: none */
    uint8_t *seen;            /* a bit per page: reached already */
    /* a page per level being walked: the main tree's, then a named
     * database's below one of its leaves */
    unsigned char *buf[2 * MAX_DEPTH + 2];
    unsigned level;
    /* the database being walked (saved while a named one under the main
     * database is): its name, kind, and what its tree has so far */
    struct dbwalk {
        const char *db;
        int is_free, is_main, is_data, is_cat;
        uint64_t n_branch, n_leaf, n_over, n_entries;
    } d;
    /* the first fault */
    gkv_err rc;
    uint64_t bad_pg;
    char why[400];
    uint32_t bad_tid_lo, bad_tid_hi;  /* data: the tensor ids of the page */
    int bad_has_tid;          /* bit 0: bad_tid_lo known, bit 1: _hi */
    int bad_noted;            /* note_tids ran for the fault: a data page's
                               * (no bound known: its root, any tensor's) */
    struct tname *names;
    size_t nnames, cnames;
    kv_walk_info *info;
};

/* Records the first fault: page 'pg' (NO_PAGE: the database's record) of
 * the database being walked. Returns -1, for "stop". */
static int
bad(struct walk *w, uint64_t pg, const char *fmt, ...)
{
    va_list ap;

    if (w->rc != GKV_OK)
        return -1;
    w->rc = GKV_ECORRUPT;
    w->bad_pg = pg;
    va_start(ap, fmt);
    vsnprintf(w->why, sizeof w->why, fmt, ap);
    va_end(ap);
    return -1;
}

static int
read_at(struct walk *w, void *dst, size_t len, uint64_t off)
{
    size_t got = 0;

    while (got < len) {
        ssize_t n = pread(w->fd, (char *)dst + got, len - got,
                          (off_t)(off + got));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (w->rc == GKV_OK) {
                w->rc = n < 0 ? gkv__from_errno(errno) : GKV_ECORRUPT;
                w->bad_pg = off / w->psize;
                snprintf(w->why, sizeof w->why, "%s", n < 0 ? strerror(errno)
                         : "the file ends before it");
            }
            return -1;
        }
        got += (size_t)n;
    }
    return 0;
}

/* Marks pages [pg, pg + n) reached; a fault if one was already. */
static int
mark(struct walk *w, uint64_t pg, uint64_t n, const char *what)
{
    if (pg < 2 || pg >= w->npages || n > w->npages - pg)
        return bad(w, pg, "%s page number %llu is outside the file's %llu "
                   "pages", what, (unsigned long long)pg,
                   (unsigned long long)w->npages);
    for (uint64_t i = pg; i < pg + n; i++) {
        if (w->seen[i >> 3] & (1u << (i & 7)))
            return bad(w, i, "page reached twice (as %s page %llu)", what,
                       (unsigned long long)pg);
        w->seen[i >> 3] |= (uint8_t)(1u << (i & 7));
    }
    return 0;
}

/* Key order of the database walked: the free DB's keys are native u64
 * (MDB_INTEGERKEY), the others memcmp then length (LMDB's default). */
static int
key_cmp(const struct walk *w, const unsigned char *a, size_t al,
        const unsigned char *b, size_t bl)
{
    if (w->d.is_free) {
        uint64_t x = get64(a), y = get64(b);
        return (x > y) - (x < y);
    }
    int c = memcmp(a, b, al < bl ? al : bl);
    return c != 0 ? c : (al > bl) - (al < bl);
}

struct key { const unsigned char *p; size_t len; int set; };

static void
note_tids(struct walk *w, const struct key *lo, const struct key *hi)
{
    if (!w->d.is_data || w->bad_noted)
        return;
    w->bad_noted = 1;
    w->bad_has_tid = (lo->set && lo->len >= 4) | (hi->set && hi->len >= 4) << 1;
    w->bad_tid_lo = w->bad_has_tid & 1 ? kv__key_tid(lo->p) : 0;
    w->bad_tid_hi = w->bad_has_tid & 2 ? kv__key_tid(hi->p) : UINT32_MAX;
}

static int walk_db(struct walk *w, const char *name, const struct db *d);

/* A catalog record names a tensor id (FORMAT.md: u32 LE at byte 8 of the
 * 104-byte record); kept to name a damaged data page. */
static void
catalog_note(struct walk *w, const unsigned char *k, size_t kl,
             const unsigned char *v, size_t vl)
{
    if (vl < 12 || kl == 0 || kl > GKV_NAME_MAX)
        return;
    if (w->nnames == w->cnames) {
        size_t c = w->cnames ? 2 * w->cnames : 16;
        struct tname *n = gkv__realloc(w->names, c * sizeof *n);
        if (n == NULL) {
            if (w->rc == GKV_OK) {
                w->rc = GKV_ENOMEM;
                snprintf(w->why, sizeof w->why, "out of memory");
            }
            return;
        }
        w->names = n;
        w->cnames = c;
    }
    w->names[w->nnames].tid = get32(v + 8);
    memcpy(w->names[w->nnames].name, k, kl);
    w->names[w->nnames].name[kl] = '\0';
    w->nnames++;
}

/* Checks a leaf node's value: inline, an overflow run, or (main DB) a
 * named database, which is walked. */
static int
leaf_value(struct walk *w, uint64_t pg, unsigned i, const unsigned char *n,
           const unsigned char *key, size_t klen, uint64_t dsize)
{
    unsigned flags = get16(n + 4);
    const unsigned char *dp = n + NODE + klen;

    if (flags & ~(F_BIGDATA | (w->d.is_main ? F_SUBDATA : 0u)))
        return bad(w, pg, "node %u has flags 0x%x", i, flags);
    if (w->d.is_main && !(flags & (F_SUBDATA | F_BIGDATA)) &&
        klen == sizeof KV_TXN_KEY - 1 && memcmp(key, KV_TXN_KEY, klen) == 0) {
        /* the gkv commit that wrote this tree (kv_int.h). Two header
         * pages of consecutive numbers and right parities (checked by
         * kv__walk_meta) can still lie by one byte: the older page (N-1)
         * renumbered N+1, or the newer (N) renumbered N-2. Either way
         * LMDB reads the commit before the last, whose tree is whole, and
         * the other page's tree, gkv's last commit, has the larger record:
         *   older renumbered: ours rec, header rec + 2, other rec + 1;
         *   newer renumbered: ours rec = header, other header rec - 1,
         *   its tree rec + 1.
         * Anything else is let be: commits by another program (no record:
         * the record lags its header), or a compacted copy (mdb_copy -c
         * numbers its one commit 1: the other page's tree is no gkv's) */
        uint64_t rec = dsize == 8 ? get64(dp) : 0, ot = w->other_txnid;

        if (dsize != 8)
            return bad(w, pg, "node %u: a transaction record of %llu bytes",
                       i, (unsigned long long)dsize);
        if ((w->txnid == rec + 2 && ot == rec + 1 && w->other_rec == rec + 1) ||
            (w->txnid == rec && ot > 1 && ot + 1 == rec &&
             w->other_rec == rec + 1))
            return bad(w, pg, "the header pages name transaction %llu the "
                       "newest, whose tree gkv wrote in transaction %llu, but "
                       "the other header page (%llu) holds a later tree (%llu):"
                       " a header page's transaction number is damaged, and "
                       "reading on would silently undo the last commit",
                       (unsigned long long)w->txnid, (unsigned long long)rec,
                       (unsigned long long)ot,
                       (unsigned long long)w->other_rec);
    }
    if (flags & F_BIGDATA) {
        unsigned char oh[HDR];
        uint64_t op = get64(dp), need = (HDR - 1 + dsize) / w->psize + 1;
        uint32_t have;

        if ((flags & F_SUBDATA) || dsize == 0)
            return bad(w, pg, "node %u: bad overflow value", i);
        if (op < 2 || op >= w->npages)
            return bad(w, pg, "node %u: overflow page %llu is outside the "
                       "file's %llu pages", i, (unsigned long long)op,
                       (unsigned long long)w->npages);
        if (read_at(w, oh, HDR, op * w->psize) != 0)
            return -1;
        have = get32(oh + 12);
        if (get16(oh + 10) != P_OVERFLOW || get64(oh) != op)
            return bad(w, op, "overflow page of node %u of page %llu: bad "
                       "header (flags 0x%x, number %llu)", i,
                       (unsigned long long)pg, get16(oh + 10),
                       (unsigned long long)get64(oh));
        if (have < need || have > w->npages - op)
            return bad(w, op, "overflow run of %u pages for a value of %llu "
                       "bytes (needs %llu, file has %llu pages)", have,
                       (unsigned long long)dsize, (unsigned long long)need,
                       (unsigned long long)w->npages);
        if (op + have > w->fpages)
            return bad(w, op, "overflow run of %u pages past the end of the "
                       "file (%llu pages): cut short", have,
                       (unsigned long long)w->fpages);
        if (mark(w, op, have, "overflow") != 0)
            return -1;
        w->d.n_over += have;
        if (w->info != NULL)
            w->info->overflow_pages += have;
        return 0;
    }
    if (flags & F_SUBDATA) {
        struct db sub;
        const char *const known[] = {"catalog", "data", "meta"};
        size_t k;

        if (dsize != DB_LEN)
            return bad(w, pg, "node %u: database record of %llu bytes", i,
                       (unsigned long long)dsize);
        for (k = 0; k < 3; k++)
            if (klen == strlen(known[k]) && memcmp(key, known[k], klen) == 0)
                break;
        if (k == 3)
            return bad(w, pg, "node %u: a database gkv does not make "
                       "(name of %zu bytes)", i, klen);
        db_decode(dp, &sub);
        return walk_db(w, known[k], &sub);
    }
    if (w->d.is_cat) {
        catalog_note(w, key, klen, dp, dsize);
        if (w->rc != GKV_OK)
            return -1;
    }
    if (w->d.is_free) {
        /* an IDL: a count, then that many page numbers, descending */
        uint64_t cnt = dsize >= 8 ? get64(dp) : 0, prev = UINT64_MAX;

        if (dsize < 8 || dsize % 8 != 0 || cnt > dsize / 8 - 1)
            return bad(w, pg, "node %u: free-list entry of %llu bytes "
                       "counts %llu pages", i, (unsigned long long)dsize,
                       (unsigned long long)cnt);
        for (uint64_t j = 0; j < cnt; j++) {
            uint64_t fp = get64(dp + 8 + 8 * j);
            if (fp >= prev)
                return bad(w, pg, "node %u: free-list page numbers out of "
                           "order", i);
            prev = fp;
            if (mark(w, fp, 1, "free") != 0)
                return -1;
        }
        if (w->info != NULL)
            w->info->free_pages += cnt;
    }
    return 0;
}

/* Walks the subtree at page 'pg', at 'depth' (1: the root) of a tree of
 * 'want' levels, whose keys lie in [lo, hi). */
static int walk_nodes(struct walk *w, uint64_t pg, unsigned char *p,
                      unsigned depth, unsigned want, const struct key *lo,
                      const struct key *hi);

static int
walk_page(struct walk *w, uint64_t pg, unsigned depth, unsigned want,
          const struct key *lo, const struct key *hi)
{
    int rc;

    if (w->level >= sizeof w->buf / sizeof w->buf[0] ||
        depth > want || depth > MAX_DEPTH) {
        note_tids(w, lo, hi);
        return bad(w, pg, "the tree is deeper than its record says (%u)", want);
    }
    w->level++;
    rc = walk_nodes(w, pg, w->buf[w->level - 1], depth, want, lo, hi);
    w->level--;
    return rc;
}

/* walk_page's work, in page buffer 'p'. */
static int
walk_nodes(struct walk *w, uint64_t pg, unsigned char *p, unsigned depth,
           unsigned want, const struct key *lo, const struct key *hi)
{
    unsigned flags, lower, upper, nkeys;
    struct key prev = {0};

    if (mark(w, pg, 1, "tree") != 0) {
        note_tids(w, lo, hi);
        return -1;
    }
    if (read_at(w, p, w->psize, pg * w->psize) != 0)
        return -1;
    flags = get16(p + 10);
    lower = get16(p + 12);
    upper = get16(p + 14);
    if (get64(p) != pg || (flags != P_BRANCH && flags != P_LEAF) ||
        lower < HDR || (lower - HDR) % 2 != 0 || lower > upper ||
        upper > w->psize) {
        note_tids(w, lo, hi);
        return bad(w, pg, "bad page header (number %llu, flags 0x%x, lower "
                   "%u, upper %u)", (unsigned long long)get64(p), flags, lower,
                   upper);
    }
    nkeys = (lower - HDR) / 2;
    if ((flags == P_LEAF) != (depth == want) || nkeys == 0) {
        note_tids(w, lo, hi);
        return bad(w, pg, "a %s page with %u keys at level %u of %u",
                   flags == P_LEAF ? "leaf" : "branch", nkeys, depth, want);
    }
    if (flags == P_LEAF)
        w->d.n_leaf++;
    else
        w->d.n_branch++;
    /* every node first: a child's walk reuses deeper buffers only */
    for (unsigned i = 0; i < nkeys; i++) {
        unsigned off = get16(p + HDR + 2 * i), klen;
        uint64_t dsize = 0, room;
        const unsigned char *n = p + off;

        if (off < upper || off % 2 != 0 || off > w->psize - NODE) {
            note_tids(w, lo, hi);
            return bad(w, pg, "node %u at offset %u is outside the page's "
                       "nodes [%u, %u)", i, off, upper, w->psize);
        }
        klen = get16(n + 6);
        room = w->psize - off - NODE;
        if (flags == P_LEAF)
            dsize = get16(n) | (uint64_t)get16(n + 2) << 16;
        if ((uint64_t)klen + (flags == P_BRANCH ? 0 :
                              get16(n + 4) & F_BIGDATA ? 8 : dsize) > room) {
            note_tids(w, lo, hi);
            return bad(w, pg, "node %u: key of %u bytes and value of %llu "
                       "overrun the page", i, klen, (unsigned long long)dsize);
        }
        /* a branch's first key is not used: its child's range is the
         * parent's lower bound */
        if (flags == P_BRANCH && i == 0)
            continue;
        if ((w->d.is_free && klen != 8) || (!w->d.is_free && klen == 0) ||
            klen > 511) {
            note_tids(w, lo, hi);
            return bad(w, pg, "node %u: key of %u bytes", i, klen);
        }
        if ((prev.set && key_cmp(w, prev.p, prev.len, n + NODE, klen) >= 0) ||
            (lo->set && key_cmp(w, lo->p, lo->len, n + NODE, klen) > 0) ||
            (hi->set && key_cmp(w, n + NODE, klen, hi->p, hi->len) >= 0)) {
            note_tids(w, lo, hi);
            return bad(w, pg, "node %u: keys out of order", i);
        }
        if (w->d.is_free && get64(n + NODE) > w->txnid) {
            return bad(w, pg, "node %u: free-list entry of transaction %llu, "
                       "after the last one (%llu)", i,
                       (unsigned long long)get64(n + NODE),
                       (unsigned long long)w->txnid);
        }
        prev = (struct key){n + NODE, klen, 1};
    }
    for (unsigned i = 0; i < nkeys; i++) {
        const unsigned char *n = p + get16(p + HDR + 2 * i);
        unsigned klen = get16(n + 6);

        if (flags == P_LEAF) {
            uint64_t dsize = get16(n) | (uint64_t)get16(n + 2) << 16;
            struct key k = {n + NODE, klen, 1};
            /* asked before: a named database's walk that fails leaves its
             * state in w->d, and a main-tree leaf's key ("data") is no
             * tensor id */
            int data_leaf = w->d.is_data;

            w->d.n_entries++;
            if (leaf_value(w, pg, i, n, n + NODE, klen, dsize) != 0) {
                if (data_leaf)
                    note_tids(w, &k, &k);
                return -1;
            }
        } else {
            uint64_t child = get16(n) | (uint64_t)get16(n + 2) << 16 |
                             (uint64_t)get16(n + 4) << 32;
            struct key clo = i == 0 ? *lo : (struct key){n + NODE, klen, 1};
            struct key chi = *hi;

            if (i + 1 < nkeys) {
                const unsigned char *nn = p + get16(p + HDR + 2 * (i + 1));
                chi = (struct key){nn + NODE, get16(nn + 6), 1};
            }
            if (child < 2 || child >= w->npages) {
                note_tids(w, &clo, &chi);
                return bad(w, pg, "node %u: child page %llu is outside the "
                           "file's %llu pages", i, (unsigned long long)child,
                           (unsigned long long)w->npages);
            }
            if (walk_page(w, child, depth + 1, want, &clo, &chi) != 0)
                return -1;
        }
    }
    return 0;
}

static int
walk_db(struct walk *w, const char *name, const struct db *d)
{
    struct key none = {0};
    struct dbwalk saved = w->d;
    int rc = 0;

    w->d = (struct dbwalk){.db = name};
    w->d.is_free = strcmp(name, "free list") == 0;
    w->d.is_main = strcmp(name, "main") == 0;
    w->d.is_data = strcmp(name, "data") == 0;
    w->d.is_cat = strcmp(name, "catalog") == 0;
    if (!w->d.is_free && d->flags != 0)
        rc = bad(w, NO_PAGE, "database flags 0x%x (gkv's are 0)", d->flags);
    else if (d->root == NO_PAGE) {
        if (d->depth != 0 || d->entries != 0 || d->branch != 0 ||
            d->leaf != 0 || d->overflow != 0)
            rc = bad(w, NO_PAGE, "an empty database with %llu entries",
                     (unsigned long long)d->entries);
    } else if (d->depth == 0 || d->depth > MAX_DEPTH) {
        rc = bad(w, NO_PAGE, "tree depth %u", d->depth);
    } else if (d->root < 2 || d->root >= w->npages) {
        rc = bad(w, NO_PAGE, "root page %llu is outside the file's %llu "
                 "pages", (unsigned long long)d->root,
                 (unsigned long long)w->npages);
    } else if ((rc = walk_page(w, d->root, 1, d->depth, &none, &none)) == 0 &&
               (w->d.n_branch != d->branch || w->d.n_leaf != d->leaf ||
                w->d.n_over != d->overflow || w->d.n_entries != d->entries)) {
        rc = bad(w, NO_PAGE, "its record counts %llu/%llu/%llu pages and "
                 "%llu entries, the tree has %llu/%llu/%llu and %llu",
                 (unsigned long long)d->branch, (unsigned long long)d->leaf,
                 (unsigned long long)d->overflow,
                 (unsigned long long)d->entries,
                 (unsigned long long)w->d.n_branch,
                 (unsigned long long)w->d.n_leaf,
                 (unsigned long long)w->d.n_over,
                 (unsigned long long)w->d.n_entries);
    }
    if (rc != 0)
        return rc;        /* keep the faulty database's name */
    if (w->info != NULL)
        w->info->tree_pages += w->d.n_branch + w->d.n_leaf;
    w->d = saved;
    return 0;
}

/* Reads meta page i (the page size 'psize' places page 1). */
static void
meta_read(int fd, unsigned i, uint32_t psize, struct meta *m)
{
    unsigned char b[152];

    memset(m, 0, sizeof *m);
    if (pread(fd, b, sizeof b, (off_t)i * psize) != (ssize_t)sizeof b)
        return;
    m->magic = get32(b + 16);
    m->version = get32(b + 20);
    m->mapsize = get64(b + 32);
    db_decode(b + 40, &m->dbs[0]);
    db_decode(b + 88, &m->dbs[1]);
    m->psize = m->dbs[0].pad;
    m->last_pg = get64(b + 136);
    m->txnid = get64(b + 144);
    m->ok = m->magic == MAGIC && m->version == DATA_VER &&
            get16(b + 10) == P_META && get64(b) == i;
}

static int
psize_ok(uint32_t ps)
{
    return ps >= 512 && ps <= 65536 && (ps & (ps - 1)) == 0;
}

/* Why meta page m cannot be used, or NULL. */
static const char *
meta_why(const struct meta *m, char *b, size_t bl)
{
    if (!m->ok)
        return "bad magic, version, flags or page number";
    if (!psize_ok(m->psize)) {
        snprintf(b, bl, "page size %u", m->psize);
        return b;
    }
    /* LMDB takes the free list's database flags from here (only its key
     * order is fixed): DUPSORT makes every cursor on it fail an assertion */
    if ((m->dbs[0].flags & 0x7eu) != 0x08u) {
        snprintf(b, bl, "free list flags 0x%x", m->dbs[0].flags);
        return b;
    }
    /* a last page past the end of the file is left to the caller, who
     * says the file was cut short (the newer meta page; the older one
     * must not reach further) */
    if (m->last_pg < 1 || m->last_pg >= (1ull << 50) / m->psize) {
        snprintf(b, bl, "last page %llu", (unsigned long long)m->last_pg);
        return b;
    }
    if (m->mapsize < (m->last_pg + 1) * m->psize || m->mapsize > (1ull << 50)) {
        snprintf(b, bl, "map size %llu", (unsigned long long)m->mapsize);
        return b;
    }
    return NULL;
}

gkv_err
kv__walk_meta(const char *path, int fd)
{
    struct meta m[2];
    struct stat st;
    char b0[120], b1[120];
    const char *w0, *w1;
    uint32_t ps;
    int older;              /* the meta page of the older transaction */

    if (fstat(fd, &st) != 0)
        return kv__fail(NULL, gkv__from_errno(errno), "store '%s': data.mdb: "
                        "%s", path, strerror(errno));
    meta_read(fd, 0, 4096, &m[0]);
    /* LMDB finds page 1 by page 0's page size; a damaged one is found by
     * the other's, or by the usual sizes */
    ps = psize_ok(m[0].psize) ? m[0].psize : 4096;
    meta_read(fd, 1, ps, &m[1]);
    if (!psize_ok(m[0].psize) && psize_ok(m[1].psize) && m[1].psize != ps) {
        ps = m[1].psize;
        meta_read(fd, 1, ps, &m[1]);
    }
    if ((uint64_t)st.st_size < 2ull * ps)
        return kv__fail(NULL, GKV_ECORRUPT, "store '%s' is damaged: its "
                        "data.mdb is %llu bytes, less than its two header "
                        "pages", path, (unsigned long long)st.st_size);
    if (m[0].magic == MAGIC && m[1].magic == MAGIC &&
        m[0].version == m[1].version && m[0].version != DATA_VER)
        return kv__fail(NULL, GKV_EVERSION, "store '%s': its data.mdb is LMDB "
                        "data version %u; this gkv reads version %u", path,
                        m[0].version, DATA_VER);
    w0 = meta_why(&m[0], b0, sizeof b0);
    w1 = meta_why(&m[1], b1, sizeof b1);
    if (w0 != NULL || w1 != NULL)
        return kv__fail(NULL, GKV_ECORRUPT, "store '%s' is damaged: data.mdb "
                        "header page %d: %s", path, w0 != NULL ? 0 : 1,
                        w0 != NULL ? w0 : w1);
    /* each commit writes the meta page of its txnid's parity, so the two
     * hold consecutive transactions (both 0 in a store never written);
     * one damaged into the newer would be read instead of the newest */
    older = m[0].txnid > m[1].txnid;
    if (m[0].psize != m[1].psize || m[older].last_pg > m[!older].last_pg ||
        !((m[0].txnid == 0 && m[1].txnid == 0) ||
          ((m[0].txnid & 1) == 0 && (m[1].txnid & 1) == 1 &&
           (m[0].txnid + 1 == m[1].txnid || m[1].txnid + 1 == m[0].txnid))))
        return kv__fail(NULL, GKV_ECORRUPT, "store '%s' is damaged: data.mdb "
                        "header pages disagree (page size %u and %u, "
                        "transactions %llu and %llu, last pages %llu and "
                        "%llu)", path, m[0].psize, m[1].psize,
                        (unsigned long long)m[0].txnid,
                        (unsigned long long)m[1].txnid,
                        (unsigned long long)m[0].last_pg,
                        (unsigned long long)m[1].last_pg);
    return GKV_OK;
}

/* The KV_TXN_KEY record of the tree header page 'm' points at, when its
 * main database is one sound leaf page (it always is in a gkv store:
 * three database records and this one); UINT64_MAX otherwise. Every
 * number is checked before it is used, as walk_nodes does; the page is
 * read into p (psize bytes). */
static uint64_t
main_record(int fd, const struct meta *m, uint32_t psize, uint64_t fpages,
            unsigned char *p)
{
    uint64_t root = m->dbs[1].root, rec = UINT64_MAX;
    unsigned lower, upper;

    if (m->dbs[1].depth != 1 || root < 2 || root > m->last_pg ||
        root >= fpages)
        return UINT64_MAX;
    if (pread(fd, p, psize, (off_t)(root * psize)) != (ssize_t)psize)
        goto out;
    lower = get16(p + 12);
    upper = get16(p + 14);
    if (get64(p) != root || get16(p + 10) != P_LEAF || lower < HDR ||
        lower > upper || upper > psize)
        goto out;
    for (unsigned i = 0; i < (lower - HDR) / 2; i++) {
        unsigned off = get16(p + HDR + 2 * i), klen;
        const unsigned char *n = p + off;

        if (off < upper || off > psize - NODE)
            goto out;
        klen = get16(n + 6);
        if (get16(n + 4) == 0 && klen == sizeof KV_TXN_KEY - 1 &&
            (get16(n) | (uint64_t)get16(n + 2) << 16) == 8 &&
            (uint64_t)klen + 8 <= psize - off - NODE &&
            memcmp(n + NODE, KV_TXN_KEY, klen) == 0) {
            rec = get64(n + NODE + klen);
            break;
        }
    }
out:
    return rec;
}

gkv_err
kv__walk(gkv_store *s, const char *path, int fd, uint64_t txnid,
         kv_walk_info *info)
{
    struct walk w;
    struct meta m[2];
    const struct meta *cur = NULL;
    unsigned char *block = NULL;
    size_t nbuf;
    gkv_err rc;

    memset(&w, 0, sizeof w);
    if (info != NULL)
        memset(info, 0, sizeof *info);
    if ((rc = kv__walk_meta(path, fd)) != GKV_OK) {
        if (s != NULL) {
            char msg[GKV__MSG_MAX];
            snprintf(msg, sizeof msg, "%s", gkv_store_errmsg(NULL));
            kv__fail(s, rc, "%s", msg);
        }
        return rc;
    }
    meta_read(fd, 0, 4096, &m[0]);
    meta_read(fd, 1, m[0].psize, &m[1]);
    for (int i = 0; i < 2; i++)
        if (txnid == 0 ? (cur == NULL || m[i].txnid > cur->txnid)
                       : m[i].txnid == txnid)
            cur = &m[i];
    if (cur == NULL)
        return kv__fail(s, GKV_EBUSY, "store '%s': transaction %llu was "
                        "overwritten while checking it", path,
                        (unsigned long long)txnid);
    w.path = path;
    w.fd = fd;
    w.psize = cur->psize;
    w.npages = cur->last_pg + 1;
    w.txnid = cur->txnid;
    w.other_txnid = m[cur == &m[0]].txnid;
    {
        struct stat st;
        w.fpages = fstat(fd, &st) == 0 ? (uint64_t)st.st_size / w.psize
                                       : w.npages;
    }
    w.info = info;
    w.rc = GKV_OK;
    w.bad_pg = NO_PAGE;
    /* one block: the page buffers, then the bitmap of pages reached */
    nbuf = sizeof w.buf / sizeof w.buf[0];
    if (w.npages / 8 + 1 > SIZE_MAX - (size_t)nbuf * w.psize ||
        (block = gkv__calloc(1, (size_t)nbuf * w.psize +
                                (size_t)(w.npages / 8 + 1))) == NULL) {
        rc = kv__fail(s, GKV_ENOMEM, "store '%s': out of memory to check "
                      "its structure", path);
        goto out;
    }
    for (size_t i = 0; i < nbuf; i++)
        w.buf[i] = block + i * w.psize;
    w.seen = block + nbuf * w.psize;
    /* the first page buffer, before the walk uses it */
    w.other_rec = main_record(fd, &m[cur == &m[0]], w.psize, w.fpages,
                              w.buf[0]);
    w.seen[0] |= 3;                 /* the meta pages */
    if (walk_db(&w, "main", &cur->dbs[1]) == 0)
        (void)walk_db(&w, "free list", &cur->dbs[0]);
    if (info != NULL) {
        info->pages = w.npages;
        info->page_size = w.psize;
    }
    rc = w.rc;
    if (rc != GKV_OK) {
        char at[64] = "", tn[GKV_NAME_MAX + 96] = "";

        if (w.bad_pg != NO_PAGE)
            snprintf(at, sizeof at, " page %llu", (unsigned long long)w.bad_pg);
        else
            snprintf(at, sizeof at, " record");
        if (w.bad_noted && !w.bad_has_tid) {
            /* the data tree's root: its keys are every tensor's */
            snprintf(tn, sizeof tn, ", any tensor");
        } else if (w.bad_has_tid) {
            const char *nm = NULL;
            uint32_t a = w.bad_tid_lo, b = w.bad_tid_hi;

            for (size_t i = 0; i < w.nnames; i++)
                if (w.names[i].tid == a)
                    nm = w.names[i].name;
            if (!(w.bad_has_tid & 1))
                snprintf(tn, sizeof tn, ", tensors of ids up to %u", b);
            else if (nm != NULL)
                snprintf(tn, sizeof tn, ", tensor '%s' (id %u)%s", nm, a,
                         a == b ? "" : " or later");
            else
                snprintf(tn, sizeof tn, ", tensor id %u%s", a,
                         a == b ? "" : " or later");
        }
        if (info != NULL) {
            info->bad_page = w.bad_pg;
            snprintf(info->bad_db, sizeof info->bad_db, "%s",
                     w.d.db ? w.d.db : "?");
        }
        if (rc != GKV_ECORRUPT)
            rc = kv__fail(s, rc, "store '%s': checking data.mdb: %s", path,
                          w.why);
        else
            rc = kv__fail(s, rc, "store '%s' is damaged: data.mdb %s%s%s: %s",
                          path, w.d.db ? w.d.db : "?", at, tn, w.why);
    }
out:
    gkv__free(block);
    gkv__free(w.names);
    return rc;
}
