/* mapping.c - import's and export's --orig-ids MAPPING.npy (row i of FILE
 * is the row of new ID MAPPING[i]), and the check that a file's rows are
 * rows of a tensor. */
#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kvctl.h"
#include "ops.h"

uint64_t
kvctl__origmap_at(const struct origmap *o, uint64_t i)
{
    int64_t v;

    memcpy(&v, (const unsigned char *)o->m.data + i * 8, 8);
    return (uint64_t)v;
}

int
kvctl__u64_cmp(const void *a, const void *b)
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
    qsort(sorted, o->n, sizeof *sorted, kvctl__u64_cmp);
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

/* ---- which mapping a graph tensor needs ---------------------------------- */

/* The partition book that describes c's tensors: the job's (through
 * servers), or for a store directory the config in its parent directory
 * (gkv-partition writes OUTDIR/NAME.json beside OUTDIR/part-N) whose
 * partition list names that store; opened into *own (close it). NULL
 * when there is none. */
static const gkv_pbook *
ctx_pbook(const struct ctx *c, gkv_pbook **own)
{
    char dir[4200], cfg[4400], *st = NULL, *pp;
    struct dirent *e;
    DIR *dp = NULL;
    size_t len;

    *own = NULL;
    if (c->cl != NULL)
        return gkv_client_pbook(c->cl);
    if (c->remote || c->path == NULL ||
        (len = strlen(c->path)) >= sizeof dir ||
        (st = realpath(c->path, NULL)) == NULL)
        goto out;
    memcpy(dir, c->path, len + 1);
    while (len > 1 && dir[len - 1] == '/')
        dir[--len] = '\0';
    if ((pp = strrchr(dir, '/')) == NULL)
        strcpy(dir, ".");
    else
        pp[pp == dir ? 1 : 0] = '\0';
    if ((dp = opendir(dir)) == NULL)
        goto out;
    while (*own == NULL && (e = readdir(dp)) != NULL) {
        size_t n = strlen(e->d_name);
        gkv_pbook *b;

        if (n < 6 || strcmp(e->d_name + n - 5, ".json") != 0 ||
            (size_t)snprintf(cfg, sizeof cfg, "%s/%s", dir, e->d_name) >=
            sizeof cfg || gkv_pbook_open(&b, cfg) != GKV_OK)
            continue;
        for (int k = 0; k < gkv_pbook_num_parts(b) && *own == NULL; k++) {
            const char *p = gkv_pbook_part_path(b, k);
            char *rp = p != NULL ? realpath(p, NULL) : NULL;

            if (rp != NULL && strcmp(rp, st) == 0)
                *own = b;
            free(rp);
        }
        if (*own == NULL)
            gkv_pbook_close(b);
    }
out:
    if (dp != NULL)
        closedir(dp);
    free(st);
    return *own;
}

/* Whether two paths name one file (both exist). */
static int
same_file(const char *a, const char *b)
{
    struct stat x, y;

    return a != NULL && b != NULL && stat(a, &x) == 0 && stat(b, &y) == 0 &&
           x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

/* The kind of mapping file 'map': from the partition book (the file its
 * "mapping" field names for a type), else from its name as gkv-partition
 * writes it (mapping/node-NTYPE.npy, mapping/edge-SRC:REL:DST.npy). 1 with
 * *node and type (GKV_NAME_MAX + 1 bytes) set; 0 when not known. */
static int
map_kind(const gkv_pbook *b, const char *map, int *node, char *type)
{
    const char *base = strrchr(map, '/'), *name;
    size_t n;

    for (int k = 1; b != NULL && k >= 0; k--) {      /* nodes, then edges */
        int nt = k ? gkv_pbook_num_ntypes(b) : gkv_pbook_num_etypes(b);

        for (int t = 0; t < nt; t++)
            if (same_file(k ? gkv_pbook_node_mapping(b, t) :
                              gkv_pbook_edge_mapping(b, t), map) &&
                (name = k ? gkv_pbook_ntype_name(b, t) :
                            gkv_pbook_etype_name(b, t)) != NULL &&
                strlen(name) <= GKV_NAME_MAX) {
                *node = k;
                strcpy(type, name);
                return 1;
            }
    }
    base = base != NULL ? base + 1 : map;
    n = strlen(base);
    if (n < 10 || strcmp(base + n - 4, ".npy") != 0)
        return 0;
    if (strncmp(base, "node-", 5) == 0)
        *node = 1;
    else if (strncmp(base, "edge-", 5) == 0)
        *node = 0;
    else
        return 0;
    if (n - 9 > GKV_NAME_MAX)
        return 0;
    memcpy(type, base + 5, n - 9);
    type[n - 9] = '\0';
    return 1;
}

/* Whether type names a and b are one type of b's kind: equal, or for
 * edges the same type by its relation or its canonical SRC:REL:DST. */
static int
same_type(const gkv_pbook *b, int node, const char *x, const char *y)
{
    int tx, ty;

    if (strcmp(x, y) == 0)
        return 1;
    if (b == NULL)
        return 0;
    if (node)
        return gkv_pbook_ntype_find(b, x, &tx) == GKV_OK &&
               gkv_pbook_ntype_find(b, y, &ty) == GKV_OK && tx == ty;
    return gkv_pbook_etype_find(b, x, &tx) == GKV_OK &&
           gkv_pbook_etype_find(b, y, &ty) == GKV_OK && tx == ty;
}

int
kvctl__origmap_fits(const struct ctx *c, const struct origmap *o,
                    const char *verb, const char *map,
                    const gkv_tensor_desc *d)
{
    char need[GKV_NAME_MAX + 1], have[GKV_NAME_MAX + 1];
    const char *name = d->name;
    int node, hnode, ex = EX_OK;
    gkv_pbook *own;
    const gkv_pbook *b;
    int64_t k;

    /* only a graph's feature (node/NTYPE/F, edge/SRC:REL:DST/F) names its
     * ID space */
    if (!kvctl__graph_type(name, &node, need))
        return EX_OK;
    b = ctx_pbook(c, &own);
    if (map_kind(b, map, &hnode, have) &&
        (hnode != node || !same_type(b, node, need, have))) {
        ex = kvctl__fail("%s: --orig-ids '%s': %s: it is the mapping of %s of "
                         "type '%s' (mapping/%s-%s.npy), but tensor '%s' "
                         "needs the mapping of %s of type '%s' "
                         "(mapping/%s-%s.npy)", verb, map,
                         gkv_strerror(GKV_EINVAL), hnode ? "nodes" : "edges",
                         have, hnode ? "node" : "edge", have, name,
                         node ? "nodes" : "edges", need,
                         node ? "node" : "edge", need);
        goto out;
    }
    /* its length is the type's count, where the config says it */
    k = kvctl__type_count(b, node, need);
    if (k >= 0 && o->n != (uint64_t)k)
        ex = kvctl__fail("%s: --orig-ids '%s': %s: it has %" PRIu64 " "
                         "entries, but the graph has %" PRId64 " %s of type "
                         "'%s' (tensor '%s'): the mapping of another type or "
                         "graph?", verb, map, gkv_strerror(GKV_EINVAL), o->n,
                         k, node ? "nodes" : "edges", need, name);
    /* without a config: the new IDs of the type run from 0, so it has at
     * least as many entries as the tensor's last row + 1 */
    else if (k < 0 && o->n < d->hi)
        ex = kvctl__fail("%s: --orig-ids '%s': %s: it has %" PRIu64 " "
                         "entries, too few for tensor '%s' (rows to %" PRIu64
                         "): the mapping of another type or graph?", verb,
                         map, gkv_strerror(GKV_EINVAL), o->n, name, d->hi);
out:
    if (own != NULL)
        gkv_pbook_close(own);
    return ex;
}
