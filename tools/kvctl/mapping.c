/* mapping.c - import's and export's --orig-ids MAPPING.npy (row i of FILE
 * is the row of new ID MAPPING[i]), and the check that a file's rows are
 * rows of a tensor. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvctl.h"
#include "ops.h"

uint64_t
kvctl__origmap_at(const struct origmap *o, uint64_t i)
{
    int64_t v;

    memcpy(&v, (const unsigned char *)o->m.data + i * 8, 8);
    return (uint64_t)v;
}

static int
u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

/* Maps --orig-ids MAPPING for 'verb' (import, export): an int64 array of
 * N or N x 1; o->n gets N. */
int
kvctl__origmap_load(struct origmap *o, const char *verb, const char *map)
{
    char msg[512];
    gkv_err rc;

    if ((rc = gkv_npy_map_open(&o->m, map, msg, sizeof msg)) == GKV_EFORMAT)
        return kvctl__fail("%s: --orig-ids '%s': %s: %s", verb, map,
                           gkv_strerror(rc), msg);
    if (rc != GKV_OK)
        return kvctl__fail("%s: --orig-ids '%s': %s", verb, map, msg);
    if (o->m.hdr.dtype != GKV_I64 || o->m.hdr.is_bool || o->m.hdr.ndim > 2 ||
        (o->m.hdr.ndim == 2 && o->m.hdr.shape[1] != 1))
        return kvctl__fail("%s: --orig-ids '%s': %s: expected an int64 array "
                           "with one new ID per original ID (N or N x 1, as "
                           "gkv-partition writes mapping/node-NTYPE.npy), not "
                           "%u dims of %s", verb, map,
                           gkv_strerror(GKV_EFORMAT), o->m.hdr.ndim,
                           o->m.hdr.is_bool ? "bool" :
                           gkv_dtype_name(o->m.hdr.dtype));
    o->n = o->m.hdr.shape[0];
    return EX_OK;
}

/* The new ID of original ID 'orig': an entry of the mapping, not negative. */
int
kvctl__origmap_id(const struct origmap *o, const char *verb, const char *map,
                  uint64_t orig, uint64_t *id)
{
    if (orig >= o->n)
        return kvctl__fail("%s: --orig-ids '%s': %s: original ID %" PRIu64
                           " is not in the mapping: it has %" PRIu64
                           " entries, original IDs 0 to %" PRIu64 " (the "
                           "mapping of another node type?)", verb, map,
                           gkv_strerror(GKV_ERANGE), orig, o->n,
                           o->n > 0 ? o->n - 1 : 0);
    *id = kvctl__origmap_at(o, orig);
    if ((int64_t)*id < 0)
        return kvctl__fail("%s: --orig-ids '%s': %s: original ID %" PRIu64
                           " maps to %" PRId64 ", not a new ID", verb, map,
                           gkv_strerror(GKV_ERANGE), orig, (int64_t)*id);
    return EX_OK;
}

/* Maps MAPPING and checks it against a FILE of 'rows' rows: int64, N or
 * N x 1, N = rows, every new ID >= 0 and none twice. */
int
kvctl__origmap_open(struct origmap *o, const char *map, const char *file,
                    uint64_t rows)
{
    uint64_t *sorted;
    int ex;

    if ((ex = kvctl__origmap_load(o, "import", map)) != EX_OK)
        return ex;
    if (o->n != rows)
        return kvctl__fail("import: --orig-ids '%s' has %" PRIu64 " entries, "
                           "but '%s' has %" PRIu64 " rows: the mapping of "
                           "another type or graph?", map, o->n, file, rows);
    if ((sorted = malloc(o->n * sizeof *sorted)) == NULL)
        return kvctl__fail("out of memory");
    for (uint64_t i = 0; i < o->n; i++) {
        sorted[i] = kvctl__origmap_at(o, i);
        if ((int64_t)sorted[i] < 0) {
            free(sorted);
            return kvctl__fail("import: --orig-ids '%s': %s: original ID %"
                               PRIu64 " maps to %" PRId64 ", not a new ID", map,
                               gkv_strerror(GKV_ERANGE), i,
                               (int64_t)kvctl__origmap_at(o, i));
        }
    }
    qsort(sorted, o->n, sizeof *sorted, u64_cmp);
    for (uint64_t i = 1; i < o->n; i++)
        if (sorted[i] == sorted[i - 1]) {
            uint64_t dup = sorted[i];
            free(sorted);
            return kvctl__fail("import: --orig-ids '%s': new ID %" PRIu64 " "
                               "comes twice: not a mapping", map, dup);
        }
    o->min = sorted[0];
    o->max = sorted[o->n - 1];
    free(sorted);
    return EX_OK;
}

/* The new IDs must be exactly [lo, lo + n): fills o->inv. */
int
kvctl__origmap_perm(struct origmap *o, const char *map, uint64_t lo,
                    const char *what)
{
    /* n distinct IDs from lo to lo + n - 1 are each of them once */
    if (o->min != lo || o->max - o->min != o->n - 1)
        return kvctl__fail("import: --orig-ids '%s': %s: the new IDs run from %"
                           PRIu64 " to %" PRIu64 "; %s of %" PRIu64 " rows "
                           "needs each of [%" PRIu64 ", %" PRIu64 ") (a store "
                           "is written in one transaction of consecutive rows)",
                           map, gkv_strerror(GKV_ERANGE), o->min, o->max, what,
                           o->n, lo, lo + o->n);
    if ((o->inv = malloc(o->n * sizeof *o->inv)) == NULL)
        return kvctl__fail("out of memory");
    for (uint64_t i = 0; i < o->n; i++)
        o->inv[kvctl__origmap_at(o, i) - lo] = i;
    return EX_OK;
}

void
kvctl__origmap_close(struct origmap *o)
{
    gkv_npy_map_close(&o->m);
    free(o->inv);
    o->inv = NULL;
}

/* Rows [at, at + n) of the tensor being imported from 'data': the file's
 * own rows, or (o->inv) the file rows they map from, gathered into buf. */
const unsigned char *
kvctl__origmap_rows(const struct origmap *o, const unsigned char *data,
                    size_t row_bytes, uint64_t at, uint64_t n,
                    unsigned char *buf)
{
    if (o == NULL || o->inv == NULL)
        return data + at * row_bytes;
    for (uint64_t k = 0; k < n; k++)
        memcpy(buf + k * row_bytes, data + o->inv[at + k] * row_bytes,
               row_bytes);
    return buf;
}

/* Whether the mapped file's rows are rows of d (dtype and row shape) and
 * fit [lo, lo + rows) inside d's range; EX_FAIL, printed, when not.
 * 'note' follows the row shape in the message. */
int
kvctl__rows_fit(const char *file, const gkv_npy_map *m,
                const gkv_tensor_desc *d, uint64_t lo, const char *note)
{
    uint64_t rows = m->hdr.shape[0];
    const char *what = strchr(d->name, '#') ? "optimizer state" : "tensor";
    char want[160], got[160];
    /* numpy's bool is u8 0/1, as import stores it */
    int same = m->hdr.dtype == d->dtype && m->hdr.ndim - 1 == d->ndim;

    for (unsigned i = 0; same && i < d->ndim; i++)
        same = m->hdr.shape[i + 1] == d->shape[i];
    if (!same) {
        kvctl__rows_str(d->dtype, d->ndim, d->shape, want, sizeof want);
        kvctl__rows_str(m->hdr.dtype, m->hdr.ndim - 1, m->hdr.shape + 1, got,
                        sizeof got);
        return kvctl__fail("import '%s': %s: %s '%s' has rows of %s; the "
                           "file's rows are %s%s", file,
                           gkv_strerror(GKV_ESHAPE), what, d->name, want,
                           m->hdr.is_bool ? "bool" : got, note);
    }
    if (lo < d->lo || lo > d->hi || rows > d->hi - lo)
        return kvctl__fail("import '%s': %s: %" PRIu64 " rows from ID %" PRIu64
                           " are not inside %s '%s' [%" PRIu64 ", %" PRIu64 ")",
                           file, gkv_strerror(GKV_ERANGE), rows, lo, what,
                           d->name, d->lo, d->hi);
    return EX_OK;
}
