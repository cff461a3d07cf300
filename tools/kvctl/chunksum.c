/* chunksum.c - a store's rows checked as kvctl reads them.
 *
 * Pulls and range reads through the library trust the rows they find
 * (the fast path; `verify` is what checks). kvctl is an offline tool, and
 * a value it prints or exports must be what was written: each chunk that
 * get or export reads from a store directory is checked once against the
 * checksum in its header, as verify checks it (doc/FORMAT.md: XXH3 of the
 * chunk's rows, seeded by tensor id << 40 ^ chunk index). The stored
 * checksum comes from gkv_tensor_changed() (a chunk's stamp), the rows from
 * the read itself where it covers the whole chunk, else from a read of
 * that chunk: one more chunk per get of a few rows, nothing more for an
 * export by range. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "kvctl.h"
#include "ops.h"

#define MEMO_MAX_CHUNKS (1ull << 27)   /* a 16 MiB bitmap at most */

struct kvctl_sums {
    char name[GKV_NAME_MAX + 1];
    gkv_tensor_desc d;
    int none;                    /* nothing stored to check (T#opt absent) */
    uint8_t *done;               /* a bit per chunk checked, or NULL */
    unsigned char *rows;         /* one chunk's rows */
    uint64_t *idx;               /* chunk indexes of a batch of IDs */
    size_t cap_idx;
    char msg[600];
};

void
kvctl__sums_free(struct ctx *c)
{
    if (c->sums == NULL)
        return;
    free(c->sums->done);
    free(c->sums->rows);
    free(c->sums->idx);
    free(c->sums);
    c->sums = NULL;
}

const char *
kvctl__sums_msg(struct ctx *c)
{
    return c->sums != NULL && c->sums->msg[0] != '\0' ? c->sums->msg : NULL;
}

/* The checker for tensor 'name' in c's snapshot, made or reset. */
static gkv_err
sums_for(struct ctx *c, const char *name, struct kvctl_sums **out)
{
    struct kvctl_sums *k = c->sums;
    int exists = 1;
    gkv_err rc;

    if (k == NULL && (k = c->sums = calloc(1, sizeof *k)) == NULL)
        return GKV_ENOMEM;
    *out = k;
    k->msg[0] = '\0';
    if (strcmp(k->name, name) == 0)
        return GKV_OK;
    free(k->done);
    free(k->rows);
    k->done = NULL;
    k->rows = NULL;
    k->name[0] = '\0';
    rc = strchr(name, '#') != NULL ?
         gkv_opt_state_info(c->s, c->tx, name, &k->d, &exists) :
         gkv_tensor_info(c->s, c->tx, name, &k->d);
    if (rc != GKV_OK)
        return rc;
    k->none = !exists || k->d.nchunks == 0;
    if (!k->none && k->d.nchunks <= MEMO_MAX_CHUNKS &&
        (k->done = calloc(k->d.nchunks / 8 + 1, 1)) == NULL)
        return GKV_ENOMEM;
    snprintf(k->name, sizeof k->name, "%s", name);
    return GKV_OK;
}

/* Rows [*lo, *hi) of chunk ci of d. */
static void
chunk_rows(const gkv_tensor_desc *d, uint64_t ci, uint64_t *lo, uint64_t *hi)
{
    *lo = d->lo + ci * d->chunk_rows;
    *hi = d->hi - *lo > d->chunk_rows ? *lo + d->chunk_rows : d->hi;
}

/* Checks chunk ci, whose rows are 'rows' (NULL: read them here). */
static gkv_err
check_chunk(struct ctx *c, struct kvctl_sums *k, uint64_t ci,
            const unsigned char *rows)
{
    const gkv_tensor_desc *d = &k->d;
    uint64_t mark[2] = {0, 0}, lo, hi, sum;
    size_t len;
    gkv_err rc;

    if (k->done != NULL && (k->done[ci >> 3] & (1u << (ci & 7))))
        return GKV_OK;
    if ((rc = gkv_tensor_changed(c->tx, k->name, ci, 1, mark, NULL, NULL)) !=
        GKV_OK)
        return rc;
    chunk_rows(d, ci, &lo, &hi);
    len = (size_t)(hi - lo) * d->row_bytes;
    /* stamp 0: never written, its rows are the initializer's zeros */
    if (mark[1] != 0) {
        if (rows == NULL) {
            if (k->rows == NULL &&
                (k->rows = malloc((size_t)d->chunk_rows * d->row_bytes)) ==
                NULL)
                return GKV_ENOMEM;
            if ((rc = gkv_tensor_read(c->s, c->tx, k->name, lo, hi, k->rows,
                                      len)) != GKV_OK)
                return rc;
            rows = k->rows;
        }
        sum = XXH3_64bits_withSeed(rows, len, (uint64_t)d->id << 40 ^ ci);
        if ((sum != 0 ? sum : 1) != mark[1]) {
            snprintf(k->msg, sizeof k->msg, "chunk %" PRIu64 " (rows %" PRIu64
                     "..%" PRIu64 ") fails its checksum: its rows are not "
                     "what was written ('kvctl %s verify' checks every "
                     "chunk)", ci, lo, hi - 1, c->path);
            return GKV_ECORRUPT;
        }
    }
    if (k->done != NULL)
        k->done[ci >> 3] |= (uint8_t)(1u << (ci & 7));
    return GKV_OK;
}

gkv_err
kvctl__sums_range(struct ctx *c, const char *name, uint64_t a, size_t n,
                  const void *buf)
{
    struct kvctl_sums *k;
    uint64_t first, last;
    gkv_err rc;

    if (n == 0)
        return GKV_OK;
    if ((rc = sums_for(c, name, &k)) != GKV_OK || k->none)
        return rc;
    first = (a - k->d.lo) / k->d.chunk_rows;
    last = (a + n - 1 - k->d.lo) / k->d.chunk_rows;
    for (uint64_t ci = first; ci <= last; ci++) {
        uint64_t lo, hi;

        chunk_rows(&k->d, ci, &lo, &hi);
        /* a chunk the read holds whole is checked in its buffer */
        if ((rc = check_chunk(c, k, ci, lo >= a && hi <= a + n ?
                              (const unsigned char *)buf +
                              (lo - a) * k->d.row_bytes : NULL)) != GKV_OK)
            return rc;
    }
    return GKV_OK;
}

gkv_err
kvctl__sums_ids(struct ctx *c, const char *name, const uint64_t *ids,
                size_t n)
{
    struct kvctl_sums *k;
    gkv_err rc;

    if (n == 0)
        return GKV_OK;
    if ((rc = sums_for(c, name, &k)) != GKV_OK || k->none)
        return rc;
    if (n > k->cap_idx) {
        uint64_t *p = realloc(k->idx, n * sizeof *p);

        if (p == NULL)
            return GKV_ENOMEM;
        k->idx = p;
        k->cap_idx = n;
    }
    /* the pull succeeded: every ID is a row of the tensor */
    for (size_t i = 0; i < n; i++)
        k->idx[i] = (ids[i] - k->d.lo) / k->d.chunk_rows;
    qsort(k->idx, n, sizeof *k->idx, kvctl__u64_cmp);
    for (size_t i = 0; i < n; i++)
        if ((i == 0 || k->idx[i] != k->idx[i - 1]) &&
            (rc = check_chunk(c, k, k->idx[i], NULL)) != GKV_OK)
            return rc;
    return GKV_OK;
}
