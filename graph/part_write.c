/* part_write.c - the partitioner: assigns nodes, renumbers, and writes one
 * store per partition, the mapping files and the JSON config (see
 * gkv_partition.h and doc/FORMAT.md, "Partitions").
 *
 * The work, in order:
 *   1. check everything that can be checked before writing: the spec, the
 *      names, the features and masks (mapped, row counts), the output dir;
 *   2. assign nodes: owner[t][v] = partition of node v of type t (random,
 *      range or METIS), then new IDs: partition by partition, in original
 *      order within one (range keeps the IDs, so newid is not stored);
 *   3. number edges, per edge type, without sorting: a count of in-edges
 *      per new destination ID gives the global CSC offsets eptr (partitions
 *      own consecutive new IDs, so this is every partition's CSC laid end to
 *      end, and a position is the new edge ID); one pass in original edge
 *      order with eptr as the cursors gives emap[i] = new ID of edge i, in
 *      CSC order with ties in original order, which is the contract;
 *   4. partition by partition: open its store, and per edge type scan emap
 *      for the edges inside the partition's range, scattering their new
 *      source IDs (and weights) to their CSC positions; write indptr,
 *      indices, weights, features (gathered at the new IDs) and, if asked,
 *      the CSR; close; free;
 *   5. write the mapping files, sync every store and file, write the JSON, and
 *      rename OUT.tmp-PID to OUT.
 * Memory beyond the graph: emap (8 bytes per edge), eptr, owner and newid
 * (about 18 bytes per node), and one partition's arrays at a time. A graph
 * whose arrays cannot fit in this machine's memory is refused at step 1,
 * saying why (node IDs are dense: one sparse ID of 4000000000 makes four
 * billion nodes). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <jansson.h>
#include "kv/gkv_npy.h"
#include "graph/part_write.h"

#define SLICE_BYTES   (64u << 20)   /* one gkv_tensor_write / file write */
#define MSG_MAX       1024
#define PW_FORMAT     1              /* "gkv_format" of the JSON */

/* ---- state ---------------------------------------------------------------- */

struct pw_feat {
    const gkv_part_feat *f;
    int type;                     /* node or edge type index */
    char tname[GKV_NAME_MAX + 1]; /* node/<type>/<name> or edge/<canon>/<name> */
    char name[GKV_PART_NAME_MAX + 1];
    gkv_npy_map map;              /* when read from a file */
    const unsigned char *rows;
    gkv_dtype dtype;
    unsigned ndim;
    uint64_t shape[GKV_MAX_DIMS];
    size_t row_bytes;
    uint64_t nrows;
    int rev_et;                   /* >= 0: "reverse_eid", the new IDs of
                                   * edge type rev_et (rows: its emap) */
};

struct pw {
    const gkv_graph *g;
    const gkv_part_spec *sp;
    const char *name;             /* graph name */
    int P, nnt, net, nthreads;
    char *msg;
    size_t msglen;
    /* nodes, per type */
    int64_t *ncount;              /* nnt */
    uint16_t **owner;             /* nnt arrays of ncount[t] */
    int64_t **newid;              /* nnt arrays, or all NULL: identity */
    int64_t *nstart;              /* nnt x (P + 1): nlo(t, p) */
    uint8_t **mask;               /* nnt arrays or NULL */
    /* edges, per type */
    gkv_etype_info *einfo;        /* net */
    int64_t **emap;               /* net arrays: original edge -> new ID */
    int64_t **eptr;               /* net arrays of ncount[dst] + 1: the
                                   * global CSC offsets over new dst IDs */
    int64_t *ocnt;                /* net x P: out-edges of the sources each
                                   * partition owns (the CSR's edges) */
    /* features */
    struct pw_feat *feats;
    size_t nfeats;
    gkv_part_feat *revf;          /* 2 x nreverse: the reverse_eid features */
    /* output */
    char *out, *tmp, *old;        /* OUT, OUT.tmp-PID, OUT.old-PID */
    int replace;                  /* OUT holds a partition to replace */
    int tmp_made;
    uint64_t bytes_total, bytes_done;
    int64_t edge_cut;             /* counted while scattering */
    /* scratch kept from partition to partition (no fresh pages each time) */
    int64_t *s_idx, *s_oeid;
    float *s_w;
    size_t s_idx_cap, s_oeid_cap, s_w_cap;   /* elements */
};

/* Records the failure's message (the caller returns at once); returns rc. */
static gkv_err
fail(struct pw *w, gkv_err rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static gkv_err
fail(struct pw *w, gkv_err rc, const char *fmt, ...)
{
    va_list ap;

    if (w->msg != NULL && w->msglen > 0) {
        va_start(ap, fmt);
        vsnprintf(w->msg, w->msglen, fmt, ap);
        va_end(ap);
    }
    return rc;
}

static gkv_err
from_errno(int e)
{
    switch (e) {
    case EEXIST: case ENOTEMPTY: return GKV_EEXIST;
    case ENOSPC: case EDQUOT: return GKV_EMAPFULL;
    default: return gkv__from_errno(e);
    }
}

static gkv_err
progress(struct pw *w, const char *stage, uint64_t done, uint64_t total)
{
    if (w->sp->progress != NULL &&
        w->sp->progress(w->sp->progress_ctx, stage, done, total) != 0)
        return fail(w, GKV_EINTR, "cancelled by the progress callback "
                    "(stage '%s')", stage);
    return GKV_OK;
}

static gkv_err
wrote(struct pw *w, uint64_t bytes)
{
    w->bytes_done += bytes;
    return progress(w, "write", w->bytes_done, w->bytes_total);
}

/* *buf with room for n elements of 'size' bytes (old contents dropped). */
static void *
scratch(void *bufp, size_t *cap, size_t n, size_t size)
{
    void **buf = bufp;

    if (n == 0)
        n = 1;
    if (*cap < n) {
        gkv__free(*buf);
        *cap = 0;
        if ((*buf = gkv__malloc(n * size)) == NULL)
            return NULL;
        *cap = n;
    }
    return *buf;
}

static inline int64_t
nid(const int64_t *map, int64_t v)
{
    return map != NULL ? map[v] : v;
}

static inline int64_t
nlo(const struct pw *w, int t, int p)
{
    return w->nstart[(size_t)t * (size_t)(w->P + 1) + (size_t)p];
}

/* First new ID of type t in partition p, as a slice of count into P:
 * [count * p / P, count * (p + 1) / P). */
static int64_t
slice_lo(int64_t count, int p, int P)
{
    return (int64_t)(((unsigned __int128)count * (unsigned)p) / (unsigned)P);
}

/* ---- names ------------------------------------------------------------------ */

/* 1..GKV_PART_NAME_MAX printable ASCII bytes without blanks, '#' or '/'. */
static int
name_ok(const char *s, const char **why)
{
    size_t n;

    if (s == NULL || (n = strlen(s)) == 0) {
        *why = "is empty";
        return 0;
    }
    if (n > GKV_PART_NAME_MAX) {
        *why = "is longer than 128 bytes";
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c <= ' ' || c >= 127 || c == '#' || c == '/') {
            *why = "holds a blank, '#', '/' or a byte that is not printable "
                   "ASCII";
            return 0;
        }
    }
    if (strcmp(s, ".") == 0 || strcmp(s, "..") == 0) {
        *why = "is '.' or '..'";
        return 0;
    }
    return 1;
}

/* ---- files and directories ------------------------------------------------ */

static char *
path_join(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    char *p = gkv__malloc(la + lb + 2);

    if (p != NULL) {
        memcpy(p, a, la);
        p[la] = '/';
        memcpy(p + la + 1, b, lb + 1);
    }
    return p;
}

static int
rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)ftw;
    if (flag == FTW_DP)
        return rmdir(p) != 0 && errno != ENOENT ? -1 : 0;
    return unlink(p) != 0 && errno != ENOENT ? -1 : 0;
}

/* Removes the tree at 'p' (no symlinks followed). */
static int
rmtree(const char *p)
{
    return nftw(p, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static int
fsync_path(const char *p, int dir)
{
    int fd = open(p, (dir ? O_DIRECTORY : 0) | O_RDONLY | O_CLOEXEC), rc;

    if (fd < 0)
        return -1;
    rc = fsync(fd);
    close(fd);
    return rc;
}

static int
write_all(int fd, const void *buf, size_t len)
{
    const unsigned char *b = buf;

    while (len > 0) {
        ssize_t n = write(fd, b, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        b += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Is 'name' "part-<digits>"? */
static int
is_part_dir(const char *name)
{
    if (strncmp(name, "part-", 5) != 0 || name[5] == '\0')
        return 0;
    for (const char *c = name + 5; *c; c++)
        if (*c < '0' || *c > '9')
            return 0;
    return 1;
}

/* Checks what is at w->out now: nothing, an empty directory, or (with
 * GKV_PART_FORCE) a gkv partition and nothing else. */
static gkv_err
check_outdir(struct pw *w)
{
    char *parent, *slash, *json = NULL, *other = NULL;
    struct stat sb;
    DIR *d;
    struct dirent *de;
    int n = 0;
    gkv_err rc = GKV_OK;

    if ((parent = gkv__strdup(w->out)) == NULL)
        return fail(w, GKV_ENOMEM, "out of memory");
    slash = strrchr(parent, '/');
    if (slash == NULL)
        strcpy(parent, ".");
    else if (slash == parent)
        slash[1] = '\0';
    else
        *slash = '\0';
    if (stat(parent, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        rc = fail(w, stat(parent, &sb) != 0 ? from_errno(errno) : GKV_ENOENT,
                  "output directory '%s': its parent '%s' is not an "
                  "existing directory", w->out, parent);
        gkv__free(parent);
        return rc;
    }
    gkv__free(parent);
    if (lstat(w->out, &sb) != 0) {
        if (errno == ENOENT)
            return GKV_OK;
        return fail(w, from_errno(errno), "output directory '%s': %s",
                    w->out, strerror(errno));
    }
    if (!S_ISDIR(sb.st_mode))
        return fail(w, GKV_EEXIST, "output directory '%s' exists and is not "
                    "a directory", w->out);
    if ((d = opendir(w->out)) == NULL)
        return fail(w, from_errno(errno), "output directory '%s': %s",
                    w->out, strerror(errno));
    while ((de = readdir(d)) != NULL) {
        const char *nm = de->d_name;
        size_t len = strlen(nm);
        if (strcmp(nm, ".") == 0 || strcmp(nm, "..") == 0)
            continue;
        n++;
        if (len > 5 && strcmp(nm + len - 5, ".json") == 0) {
            char *p = path_join(w->out, nm);
            json_t *j = p != NULL ? json_load_file(p, 0, NULL) : NULL;
            if (j != NULL && json_is_object(j) &&
                json_object_get(j, "gkv_format") != NULL && json == NULL)
                json = gkv__strdup(nm);
            else if (other == NULL)
                other = gkv__strdup(nm);
            json_decref(j);
            gkv__free(p);
        } else if (!is_part_dir(nm) && strcmp(nm, "mapping") != 0 &&
                   other == NULL) {
            other = gkv__strdup(nm);
        }
    }
    closedir(d);
    if (n == 0)
        rc = GKV_OK;
    else if (other != NULL)
        rc = fail(w, GKV_EEXIST, "output directory '%s' holds files that are "
                  "not a gkv partition ('%s'); choose another directory",
                  w->out, other);
    else if (json == NULL)
        rc = fail(w, GKV_EEXIST, "output directory '%s' holds partition "
                  "stores (part-N) or a mapping folder but no partition "
                  "config (NAME.json); remove it or choose another "
                  "directory", w->out);
    else if (!(w->sp->flags & GKV_PART_FORCE))
        rc = fail(w, GKV_EEXIST, "output directory '%s' already holds a "
                  "partition ('%s'); replace it with --force "
                  "(GKV_PART_FORCE)", w->out, json);
    else
        w->replace = 1;
    gkv__free(json);
    gkv__free(other);
    return rc;
}

/* ---- features and masks ------------------------------------------------ */

/* Maps a .npy file. The .npy reader takes a bool array ('|b1') as u8 but
 * refuses one holding a byte other than 0 or 1 (a feature must not store a
 * "bool" of 2); a training mask (allow_bool) reads any non-zero byte as
 * true, as it always did, so such a file is read as u8 by parsing its
 * header with the descr patched: the two have the same length, so every
 * offset stays. */
static gkv_err
map_npy(gkv_npy_map *m, const char *path, int allow_bool, char *why,
        size_t whylen)
{
    unsigned char *buf = NULL;
    struct stat sb;
    size_t len, got = 0;
    gkv_err rc;
    char *at;
    int fd;

    rc = gkv_npy_map_open(m, path, why, whylen);
    if (rc != GKV_EFORMAT || !allow_bool)
        return rc;
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
        return rc;
    if (fstat(fd, &sb) != 0)
        goto keep;
    len = (size_t)sb.st_size < 12 + GKV_NPY_HEADER_MAX ?
          (size_t)sb.st_size : 12 + GKV_NPY_HEADER_MAX;
    if ((buf = gkv__malloc(len + 1)) == NULL)
        goto keep;
    while (got < len) {
        ssize_t r = pread(fd, buf + got, len - got, (off_t)got);
        if (r <= 0)
            goto keep;
        got += (size_t)r;
    }
    buf[len] = '\0';
    if (!gkv_npy_is_npy(buf, len) || len < 12 ||
        (at = strstr((char *)buf + 10, "'|b1'")) == NULL)
        goto keep;
    memcpy(at, "'|u1'", 5);
    memset(m, 0, sizeof *m);
    if (gkv_npy_parse(buf, len, (uint64_t)sb.st_size, &m->hdr, NULL, 0) != GKV_OK)
        goto keep;
    if (m->hdr.data_bytes > 0) {
        size_t mlen = (size_t)(m->hdr.data_offset + m->hdr.data_bytes);
        void *base = mmap(NULL, mlen, PROT_READ, MAP_PRIVATE, fd, 0);
        if (base == MAP_FAILED)
            goto keep;
        m->map_base = base;
        m->map_len = mlen;
        m->data = (const unsigned char *)base + m->hdr.data_offset;
    }
    rc = GKV_OK;
keep:
    if (rc != GKV_OK)
        memset(m, 0, sizeof *m);
    gkv__free(buf);
    close(fd);
    return rc;
}

static gkv_err
load_feats(struct pw *w)
{
    const gkv_part_spec *sp = w->sp;
    char why[512];
    gkv_err rc;

    if (sp->nfeats == 0 && sp->nreverse == 0)
        return GKV_OK;
    if (sp->feats == NULL && sp->nfeats > 0)
        return fail(w, GKV_EINVAL, "%zu features but no feature array",
                    sp->nfeats);
    if (sp->reverse == NULL && sp->nreverse > 0)
        return fail(w, GKV_EINVAL, "%zu reverse pairs but no array",
                    sp->nreverse);
    if (sp->nreverse > (size_t)GKV_GRAPH_TYPES_MAX)
        return fail(w, GKV_EINVAL, "%zu reverse pairs: more than there are "
                    "edge types", sp->nreverse);
    /* room for two reverse_eid features a pair */
    if ((w->feats = gkv__calloc(sp->nfeats + 2 * sp->nreverse,
                                sizeof *w->feats)) == NULL)
        return fail(w, GKV_ENOMEM, "out of memory");
    for (size_t i = 0; i < sp->nfeats; i++) {
        const gkv_part_feat *f = &sp->feats[i];
        struct pw_feat *pf = &w->feats[w->nfeats];
        const char *kind = f->is_edge ? "edge" : "node", *tname, *bad;
        uint64_t want;
        int n;

        pf->f = f;
        pf->rev_et = -1;
        if (f->type == NULL)
            return fail(w, GKV_EINVAL, "feature %zu: no %s type", i, kind);
        if (!name_ok(f->name, &bad))
            return fail(w, GKV_EINVAL, "%s feature name '%s' %s", kind,
                        f->name != NULL ? f->name : "(null)", bad);
        if (f->is_edge) {
            rc = gkv_graph_etype_find(w->g, f->type, &pf->type);
            if (rc == GKV_EINVAL)
                return fail(w, GKV_EINVAL, "edge feature '%s': relation '%s' "
                            "names several edge types; use the canonical "
                            "name", f->name, f->type);
            if (rc != GKV_OK)
                return fail(w, GKV_ENOTFOUND, "edge feature '%s': unknown "
                            "edge type '%s'", f->name, f->type);
            tname = w->einfo[pf->type].canonical;
            want = (uint64_t)w->einfo[pf->type].num_edges;
        } else {
            if (gkv_graph_ntype_find(w->g, f->type, &pf->type) != GKV_OK)
                return fail(w, GKV_ENOTFOUND, "node feature '%s': unknown "
                            "node type '%s'", f->name, f->type);
            tname = gkv_graph_ntype_name(w->g, pf->type);
            want = (uint64_t)w->ncount[pf->type];
        }
        n = snprintf(pf->tname, sizeof pf->tname, "%s/%s/%s", kind, tname,
                     f->name);
        if (n < 0 || (size_t)n >= sizeof pf->tname)
            return fail(w, GKV_EINVAL, "tensor name '%s/%s/%s' is longer "
                        "than %d bytes", kind, tname, f->name, GKV_NAME_MAX);
        snprintf(pf->name, sizeof pf->name, "%s", f->name);
        for (size_t k = 0; k < w->nfeats; k++)
            if (strcmp(w->feats[k].tname, pf->tname) == 0)
                return fail(w, GKV_EINVAL, "feature '%s' is given twice",
                            pf->tname);
        w->nfeats++;           /* from here on, closed with the others */
        if (f->path != NULL) {
            why[0] = '\0';
            if ((rc = map_npy(&pf->map, f->path, 0, why, sizeof why)) != GKV_OK)
                return fail(w, rc, "feature '%s' (%s): %s", pf->tname,
                            f->path, why[0] ? why : gkv_strerror(rc));
            pf->rows = pf->map.data;
            pf->dtype = pf->map.hdr.dtype;
            pf->ndim = pf->map.hdr.ndim - 1;
            for (unsigned d = 0; d < pf->ndim; d++)
                pf->shape[d] = pf->map.hdr.shape[d + 1];
            pf->nrows = pf->map.hdr.shape[0];
        } else {
            if (f->ndim > GKV_MAX_DIMS || gkv_dtype_size(f->dtype) == 0 ||
                (f->data == NULL && f->nrows > 0))
                return fail(w, GKV_EINVAL, "feature '%s': bad in-memory "
                            "array (dtype %d, %u dims%s)", pf->tname,
                            (int)f->dtype, f->ndim,
                            f->data == NULL ? ", NULL data" : "");
            pf->rows = f->data;
            pf->dtype = f->dtype;
            pf->ndim = f->ndim;
            for (unsigned d = 0; d < pf->ndim; d++) {
                if (f->shape[d] == 0)
                    return fail(w, GKV_EINVAL, "feature '%s': dim %u of its "
                                "row shape is 0", pf->tname, d);
                pf->shape[d] = f->shape[d];
            }
            pf->nrows = f->nrows;
        }
        pf->row_bytes = gkv_dtype_size(pf->dtype);
        for (unsigned d = 0; d < pf->ndim; d++)
            pf->row_bytes *= (size_t)pf->shape[d];
        if (pf->nrows != want)
            return fail(w, GKV_ESHAPE, "feature '%s'%s%s%s has %llu rows, "
                        "but %s type '%s' has %llu %s", pf->tname,
                        f->path ? " (" : "", f->path ? f->path : "",
                        f->path ? ")" : "", (unsigned long long)pf->nrows,
                        kind, tname, (unsigned long long)want,
                        f->is_edge ? "edges" : "nodes");
        if (pf->row_bytes == 0)
            return fail(w, GKV_EINVAL, "feature '%s': empty rows", pf->tname);
    }
    return GKV_OK;
}

/* Edge type 'name' of a reverse pair, into *et. */
static gkv_err
rev_type(struct pw *w, const char *name, int *et)
{
    gkv_err rc;

    if (name == NULL)
        return fail(w, GKV_EINVAL, "reverse pair: an edge type is NULL");
    rc = gkv_graph_etype_find(w->g, name, et);
    if (rc == GKV_EINVAL)
        return fail(w, GKV_EINVAL, "reverse pair: relation '%s' names "
                    "several edge types; use the canonical name", name);
    if (rc != GKV_OK)
        return fail(w, GKV_ENOTFOUND, "reverse pair: unknown edge type '%s'",
                    name);
    return GKV_OK;
}

/* The reverse pairs: checked (edge k of each type joins the same nodes as
 * edge k of the other, the other way), and a "reverse_eid" feature for
 * each type, whose rows (the other type's emap) are set once the edges are
 * numbered. Appended to w->feats, which load_feats sized for them. */
static gkv_err
load_reverse(struct pw *w)
{
    const gkv_part_spec *sp = w->sp;
    int *paired = NULL;
    gkv_err rc = GKV_OK;

    if (sp->nreverse == 0)
        return GKV_OK;
    if ((w->revf = gkv__calloc(2 * sp->nreverse, sizeof *w->revf)) == NULL ||
        (paired = gkv__calloc((size_t)w->net, sizeof *paired)) == NULL) {
        gkv__free(paired);
        return fail(w, GKV_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < sp->nreverse; i++) {
        const gkv_etype_info *ea, *eb;
        gkv_coo a, b;
        int et[2];

        if ((rc = rev_type(w, sp->reverse[i].etype, &et[0])) != GKV_OK ||
            (rc = rev_type(w, sp->reverse[i].reverse_etype, &et[1])) != GKV_OK)
            goto out;
        ea = &w->einfo[et[0]];
        eb = &w->einfo[et[1]];
        rc = GKV_EINVAL;
        if (et[0] == et[1]) {
            fail(w, rc, "reverse pair '%s' and '%s': the same edge type "
                 "(edge k cannot be its own reverse)", ea->canonical,
                 eb->canonical);
            goto out;
        }
        for (int k = 0; k < 2; k++)
            if (paired[et[k]]) {
                fail(w, rc, "edge type '%s' is in two reverse pairs",
                     w->einfo[et[k]].canonical);
                goto out;
            }
        if (ea->src_ntype != eb->dst_ntype || ea->dst_ntype != eb->src_ntype) {
            fail(w, rc, "reverse pair '%s' and '%s': the node types are not "
                 "swapped", ea->canonical, eb->canonical);
            goto out;
        }
        if (ea->num_edges != eb->num_edges) {
            fail(w, rc, "reverse pair '%s' (%lld edges) and '%s' (%lld "
                 "edges): edge k of one is the reverse of edge k of the "
                 "other, so they need as many edges", ea->canonical,
                 (long long)ea->num_edges, eb->canonical,
                 (long long)eb->num_edges);
            goto out;
        }
        gkv_graph_edges(w->g, et[0], &a);
        gkv_graph_edges(w->g, et[1], &b);
        for (int64_t k = 0; k < a.n; k++)
            if (a.src[k] != b.dst[k] || a.dst[k] != b.src[k]) {
                fail(w, rc, "reverse pair '%s' and '%s': edge %lld of '%s' "
                     "is %lld -> %lld, but edge %lld of '%s' is %lld -> "
                     "%lld, not %lld -> %lld (edge k of one type must be "
                     "the reverse of edge k of the other, in input order)",
                     ea->canonical, eb->canonical, (long long)k,
                     ea->canonical, (long long)a.src[k], (long long)a.dst[k],
                     (long long)k, eb->canonical, (long long)b.src[k],
                     (long long)b.dst[k], (long long)a.dst[k],
                     (long long)a.src[k]);
                goto out;
            }
        for (int k = 0; k < 2; k++) {
            gkv_part_feat *f = &w->revf[2 * i + (size_t)k];
            struct pw_feat *pf = &w->feats[w->nfeats];
            const char *canon = w->einfo[et[k]].canonical;

            paired[et[k]] = 1;
            f->is_edge = 1;
            f->type = canon;
            f->name = GKV_PART_REVERSE_FEAT;
            f->dtype = GKV_I64;
            f->nrows = (uint64_t)w->einfo[et[k]].num_edges;
            pf->f = f;
            pf->type = et[k];
            pf->rev_et = et[1 - k];
            snprintf(pf->name, sizeof pf->name, "%s", f->name);
            if (snprintf(pf->tname, sizeof pf->tname, "edge/%s/%s", canon,
                         f->name) >= (int)sizeof pf->tname) {
                fail(w, rc, "tensor name 'edge/%s/%s' is longer than %d "
                     "bytes", canon, f->name, GKV_NAME_MAX);
                goto out;
            }
            for (size_t j = 0; j < w->nfeats; j++)
                if (strcmp(w->feats[j].tname, pf->tname) == 0) {
                    fail(w, rc, "feature '%s' is given, and is also what "
                         "the reverse pair of '%s' writes", pf->tname, canon);
                    goto out;
                }
            pf->dtype = GKV_I64;
            pf->row_bytes = 8;
            pf->nrows = f->nrows;
            w->nfeats++;
        }
    }
    rc = GKV_OK;
out:
    gkv__free(paired);
    return rc;
}

static gkv_err
load_masks(struct pw *w)
{
    const gkv_part_spec *sp = w->sp;
    char why[512];
    gkv_err rc;

    if (sp->nmasks == 0)
        return GKV_OK;
    if (sp->masks == NULL)
        return fail(w, GKV_EINVAL, "%zu masks but no mask array", sp->nmasks);
    if ((w->mask = gkv__calloc((size_t)w->nnt, sizeof *w->mask)) == NULL)
        return fail(w, GKV_ENOMEM, "out of memory");
    for (size_t i = 0; i < sp->nmasks; i++) {
        const gkv_part_mask *m = &sp->masks[i];
        gkv_npy_map map;
        uint64_t rows, want;
        size_t esz;
        int t;

        if (m->ntype == NULL || gkv_graph_ntype_find(w->g, m->ntype, &t) != GKV_OK)
            return fail(w, GKV_ENOTFOUND, "training mask: unknown node type "
                        "'%s'", m->ntype != NULL ? m->ntype : "(null)");
        if (w->mask[t] != NULL)
            return fail(w, GKV_EINVAL, "training mask of node type '%s' is "
                        "given twice", m->ntype);
        want = (uint64_t)w->ncount[t];
        if ((w->mask[t] = gkv__malloc(want ? (size_t)want : 1)) == NULL)
            return fail(w, GKV_ENOMEM, "out of memory");
        if (m->path == NULL) {
            if (m->nrows != want || (m->data == NULL && want > 0))
                return fail(w, GKV_ESHAPE, "training mask of '%s' has %llu "
                            "rows, but node type '%s' has %llu nodes",
                            m->ntype, (unsigned long long)m->nrows, m->ntype,
                            (unsigned long long)want);
            for (uint64_t v = 0; v < want; v++)
                w->mask[t][v] = m->data[v] != 0;
            continue;
        }
        why[0] = '\0';
        if ((rc = map_npy(&map, m->path, 1, why, sizeof why)) != GKV_OK)
            return fail(w, rc, "training mask '%s': %s", m->path,
                        why[0] ? why : gkv_strerror(rc));
        rows = map.hdr.shape[0];
        esz = gkv_dtype_size(map.hdr.dtype);
        if (map.hdr.ndim > 2 || (map.hdr.ndim == 2 && map.hdr.shape[1] != 1)) {
            unsigned nd = map.hdr.ndim;
            uint64_t cols = map.hdr.shape[1];
            gkv_npy_map_close(&map);
            return fail(w, GKV_ESHAPE, "training mask '%s': expected one "
                        "value per node (N or N x 1), not %u dims (%llu x "
                        "%llu ...)", m->path, nd, (unsigned long long)rows,
                        (unsigned long long)cols);
        }
        if (rows != want) {
            gkv_npy_map_close(&map);
            return fail(w, GKV_ESHAPE, "training mask '%s' has %llu rows, but "
                        "node type '%s' has %llu nodes", m->path,
                        (unsigned long long)rows, m->ntype,
                        (unsigned long long)want);
        }
        for (uint64_t v = 0; v < want; v++) {
            const unsigned char *e = (const unsigned char *)map.data + v * esz;
            int nz = 0;
            /* any non-zero byte: integer or float non-zero (-0.0 counts) */
            for (size_t b = 0; b < esz; b++)
                nz |= e[b] != 0;
            w->mask[t][v] = (uint8_t)nz;
        }
        gkv_npy_map_close(&map);
    }
    return GKV_OK;
}

/* ---- memory: node IDs are dense ------------------------------------------ */

/* "4,000,000,001" */
static const char *
commas(char buf[32], uint64_t v)
{
    char t[24];
    int n = snprintf(t, sizeof t, "%llu", (unsigned long long)v), o = 0;

    for (int i = 0; i < n; i++) {
        if (i > 0 && (n - i) % 3 == 0)
            buf[o++] = ',';
        buf[o++] = t[i];
    }
    buf[o] = '\0';
    return buf;
}

/* "97.0 GiB" (a count that saturated at 2^64 - 1 is "16.0 EiB") */
static const char *
gib(char buf[32], uint64_t bytes)
{
    if (bytes >= (1ull << 60))
        snprintf(buf, 32, "%.1f EiB", (double)bytes / (double)(1ull << 60));
    else if (bytes >= (1ull << 40))
        snprintf(buf, 32, "%.1f TiB", (double)bytes / (double)(1ull << 40));
    else
        snprintf(buf, 32, "%.1f GiB", (double)bytes / (double)(1ull << 30));
    return buf;
}

static uint64_t
sat_add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static uint64_t
sat_mul(uint64_t a, uint64_t b)
{
    return b != 0 && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

/* Bytes of memory this process can have: the physical memory, or its
 * cgroup's limit (v2) when lower; 0 when unknown. */
static uint64_t
mem_avail(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    uint64_t m = pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz : 0;
    unsigned long long lim;
    FILE *fp = fopen("/sys/fs/cgroup/memory.max", "re");

    if (fp != NULL) {
        if (fscanf(fp, "%llu", &lim) == 1 && lim > 0 && (m == 0 || lim < m))
            m = (uint64_t)lim;
        fclose(fp);
    }
    return m;
}

/* Per node of type t, the bytes of the arrays that live at once: owner
 * (2), new ID (8, not for range), a training mask (1), and per edge type
 * into t the global CSC offsets (8) plus, while numbering, a count (8). A
 * lower bound: METIS needs more. */
static uint64_t
node_bytes(const struct pw *w, int t)
{
    uint64_t b = 2 + (w->sp->method != GKV_PART_RANGE ? 8 : 0);
    int into = 0;

    for (size_t i = 0; i < w->sp->nmasks; i++)
        if (w->sp->masks != NULL && w->sp->masks[i].ntype != NULL &&
            strcmp(w->sp->masks[i].ntype, gkv_graph_ntype_name(w->g, t)) == 0)
            b += 1;
    for (int e = 0; e < w->net; e++)
        into += w->einfo[e].dst_ntype == t;
    return b + (into ? 8u * (unsigned)into + 8 : 0);
}

/* When node type t has far more nodes than its edges can touch, explains
 * why into buf (else ""): node IDs are dense, so a large sparse ID makes
 * every smaller one a node. The largest ID is found by a pass over the
 * edges (this runs only to write a message). */
static void
dense_note(const struct pw *w, int t, char *buf, size_t len)
{
    uint64_t ends = 0;
    int64_t max = -1, n = w->ncount[t];
    char c1[32], c2[32], c3[32];
    gkv_coo c;

    buf[0] = '\0';
    for (int e = 0; e < w->net; e++) {
        const gkv_etype_info *ei = &w->einfo[e];
        if (ei->src_ntype != t && ei->dst_ntype != t)
            continue;
        gkv_graph_edges(w->g, e, &c);
        ends = sat_add(ends, (uint64_t)c.n * (uint64_t)((ei->src_ntype == t) +
                                                        (ei->dst_ntype == t)));
        for (int64_t i = 0; i < c.n; i++) {
            if (ei->src_ntype == t && c.src[i] > max)
                max = c.src[i];
            if (ei->dst_ntype == t && c.dst[i] > max)
                max = c.dst[i];
        }
    }
    /* a few isolated nodes are normal; most of them is not */
    if (n < 1024 || (uint64_t)n / 16 < ends)
        return;
    if (max == n - 1)
        snprintf(buf, len, "; node IDs are dense (0 to N-1), so the largest "
                 "'%s' ID in the edges, %lld, implies %s nodes, though the "
                 "edges have at most %s distinct '%s' endpoints: renumber the "
                 "IDs to 0..N-1", gkv_graph_ntype_name(w->g, t),
                 (long long)max, commas(c1, (uint64_t)n), commas(c2, ends),
                 gkv_graph_ntype_name(w->g, t));
    else if (max < 0)
        snprintf(buf, len, "; '%s' is given %s nodes, though no edge "
                 "touches them: is the node count right?",
                 gkv_graph_ntype_name(w->g, t), commas(c1, (uint64_t)n));
    else
        snprintf(buf, len, "; node IDs are dense (0 to N-1), and '%s' is "
                 "given %s nodes, though the edges have at most %s distinct "
                 "'%s' endpoints (the largest ID is %s): is the node count "
                 "right?", gkv_graph_ntype_name(w->g, t),
                 commas(c1, (uint64_t)n), commas(c2, ends),
                 gkv_graph_ntype_name(w->g, t), commas(c3, (uint64_t)max));
}

/* The node type with the most nodes. */
static int
biggest_ntype(const struct pw *w)
{
    int big = 0;

    for (int t = 1; t < w->nnt; t++)
        if (w->ncount[t] > w->ncount[big])
            big = t;
    return big;
}

/* An allocation of 'bytes' for the nodes of type t failed. */
static gkv_err
fail_nodes(struct pw *w, int t, uint64_t bytes, const char *what)
{
    char note[512], c1[32], c2[32];

    dense_note(w, t, note, sizeof note);
    return fail(w, GKV_ENOMEM, "out of memory for %s of %s '%s' nodes (%s)%s",
                what, commas(c1, (uint64_t)w->ncount[t]),
                gkv_graph_ntype_name(w->g, t), gib(c2, bytes), note);
}

/* Refuses, before anything is allocated or written, a graph whose
 * per-node arrays alone cannot fit in this machine's memory: failing
 * there would take minutes (or the OOM killer). */
static gkv_err
check_memory(struct pw *w)
{
    uint64_t need = 0, avail = mem_avail(), most = 0;
    int big = 0;
    char note[512], c1[32], c2[32], c3[32], c4[32];

    for (int t = 0; t < w->nnt; t++) {
        uint64_t b = sat_mul((uint64_t)w->ncount[t], node_bytes(w, t));
        need = sat_add(need, b);
        if (b > most) {
            most = b;
            big = t;
        }
    }
    for (int e = 0; e < w->net; e++)                 /* emap */
        need = sat_add(need, sat_mul((uint64_t)w->einfo[e].num_edges, 8));
    if (avail == 0 || need <= avail)
        return GKV_OK;
    dense_note(w, big, note, sizeof note);
    return fail(w, GKV_ENOMEM, "partitioning needs at least %s for its "
                "per-node and per-edge arrays (%s '%s' nodes take %s), more "
                "than the %s of memory here%s", gib(c1, need),
                commas(c3, (uint64_t)w->ncount[big]),
                gkv_graph_ntype_name(w->g, big), gib(c2, most),
                gib(c4, avail), note);
}

/* ---- node assignment ---------------------------------------------------- */

static uint64_t
splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static gkv_err
assign(struct pw *w, gkv_part_report *rep)
{
    const int P = w->P;
    int64_t objval = 0;
    gkv_err rc;
    uint64_t t0 = gkv__now_ns();

    if ((rc = progress(w, "assign", 0, 0)) != GKV_OK)
        return rc;
    for (int t = 0; t < w->nnt; t++) {
        size_t n = (size_t)w->ncount[t];
        if ((w->owner[t] = gkv__malloc(n ? n * sizeof(uint16_t) : 1)) == NULL)
            return fail_nodes(w, t, (uint64_t)n * sizeof(uint16_t),
                              "the owners");
        if (w->sp->method == GKV_PART_METIS)
            continue;
        /* equal slices: range keeps them, random shuffles them */
        for (int p = 0; p < P; p++) {
            int64_t a = slice_lo((int64_t)n, p, P), b = slice_lo((int64_t)n, p + 1, P);
            for (int64_t v = a; v < b; v++)
                w->owner[t][v] = (uint16_t)p;
        }
        if (w->sp->method == GKV_PART_RANDOM && n > 1) {
            uint64_t s = w->sp->seed ^ (0x5851f42d4c957f2dull * (uint64_t)(t + 1));
            for (size_t v = n - 1; v > 0; v--) {
                size_t j = (size_t)(splitmix(&s) % (v + 1));
                uint16_t x = w->owner[t][v];
                w->owner[t][v] = w->owner[t][j];
                w->owner[t][j] = x;
            }
        }
    }
    if (w->sp->method == GKV_PART_METIS &&
        (rc = pw__metis(w->g, P, w->sp->seed,
                        (w->sp->flags & GKV_PART_BALANCE_EDGES) != 0, w->mask,
                        w->owner, &objval, w->msg, w->msglen)) != GKV_OK)
        return rc;

    /* counts, starts, new IDs */
    for (int t = 0; t < w->nnt; t++) {
        int64_t *st = w->nstart + (size_t)t * (size_t)(P + 1), *cur;
        memset(st, 0, (size_t)(P + 1) * sizeof *st);
        for (int64_t v = 0; v < w->ncount[t]; v++)
            st[w->owner[t][v] + 1]++;
        for (int p = 0; p < P; p++)
            st[p + 1] += st[p];
        if (w->sp->method == GKV_PART_RANGE)
            continue;                     /* new ID = old ID */
        if ((w->newid[t] = gkv__malloc(w->ncount[t] ? (size_t)w->ncount[t] *
                                       sizeof(int64_t) : 1)) == NULL ||
            (cur = gkv__malloc((size_t)P * sizeof *cur)) == NULL)
            return fail_nodes(w, t, (uint64_t)w->ncount[t] * sizeof(int64_t),
                              "the new IDs");
        memcpy(cur, st, (size_t)P * sizeof *cur);
        for (int64_t v = 0; v < w->ncount[t]; v++)
            w->newid[t][v] = cur[w->owner[t][v]]++;
        gkv__free(cur);
    }
    rep->assign_seconds = (double)(gkv__now_ns() - t0) * 1e-9;
    return progress(w, "assign", 1, 1);
}

/* ---- edge numbering ----------------------------------------------------- */

struct scan_job {
    const struct pw *w;
    int et;
    int64_t lo, hi;               /* edge slice */
    int64_t elo, m;               /* partition's new edge IDs [elo, elo + m) */
    int64_t *indices, *oeid;      /* m each (oeid may be NULL) */
    float *wt;                    /* m or NULL */
    int64_t slo, shi;             /* the partition's new source IDs */
    int64_t inner;                /* out: edges whose source it owns too */
};

/* Scatters the edges of one partition to their CSC positions. */
static void
scan_part(void *p)
{
    struct scan_job *j = p;
    const struct pw *w = j->w;
    const gkv_etype_info *ei = &w->einfo[j->et];
    const int64_t *emap = w->emap[j->et];
    const int64_t *sid = w->newid[ei->src_ntype];
    int64_t inner = 0;
    gkv_coo c;

    gkv_graph_edges(w->g, j->et, &c);
    for (int64_t i = j->lo; i < j->hi; i++) {
        uint64_t k = (uint64_t)(emap[i] - j->elo);
        int64_t ns;
        if (k >= (uint64_t)j->m)
            continue;
        j->indices[k] = ns = nid(sid, c.src[i]);
        inner += ns >= j->slo && ns < j->shi;
        if (j->wt != NULL)
            j->wt[k] = c.w[i];
        if (j->oeid != NULL)
            j->oeid[k] = i;
    }
    j->inner = inner;
}

/* Numbering one edge type on T threads, each over a slice of the edges
 * (slices in edge order, so the result is the same for any T). */
struct num_job {
    const struct pw *w;
    int et;
    int64_t lo, hi;               /* edge slice */
    int64_t *cnt;                 /* count: in-edges per new dst; scatter:
                                   * this slice's cursor per new dst */
    int64_t *oc;                  /* P: out-edges per owner of the source */
};

static void
num_count(void *p)
{
    struct num_job *j = p;
    const struct pw *w = j->w;
    const gkv_etype_info *ei = &w->einfo[j->et];
    const int64_t *did = w->newid[ei->dst_ntype];
    const uint16_t *so = w->owner[ei->src_ntype];
    int64_t *cnt = j->cnt, *oc = j->oc;
    gkv_coo c;

    gkv_graph_edges(w->g, j->et, &c);
    for (int64_t i = j->lo; i < j->hi; i++)
        cnt[nid(did, c.dst[i])]++;
    if (w->sp->flags & GKV_PART_CSR)        /* the CSR's edges per owner */
        for (int64_t i = j->lo; i < j->hi; i++)
            oc[so[c.src[i]]]++;
}

static void
num_scatter(void *p)
{
    struct num_job *j = p;
    const struct pw *w = j->w;
    const int64_t *did = w->newid[w->einfo[j->et].dst_ntype];
    int64_t *cur = j->cnt, *emap = w->emap[j->et];
    gkv_coo c;

    gkv_graph_edges(w->g, j->et, &c);
    for (int64_t i = j->lo; i < j->hi; i++)
        emap[i] = cur[nid(did, c.dst[i])]++;
}

/* eptr[et] (nd + 1 global CSC offsets over the new dst IDs: ptr[v] is the
 * first new edge ID into v, ptr[nd] the edge count) and emap[et]; with
 * GKV_PART_CSR also the type's out-edge counts per owner in w->ocnt. */
static gkv_err
number_edges(struct pw *w, int et)
{
    const gkv_etype_info *ei = &w->einfo[et];
    int64_t nd = w->ncount[ei->dst_ntype], *ptr, *cnt = NULL, *oc = NULL, at;
    struct num_job jobs[64];
    int T = w->nthreads;
    gkv_coo c;

    gkv_graph_edges(w->g, et, &c);
    /* a thread needs its own counts: only worth it on many edges per node */
    if (c.n < (int64_t)T * 65536)
        T = 1;
    while (T > 1 && nd * T > c.n)
        T--;
    if ((ptr = w->eptr[et] = gkv__malloc(((size_t)nd + 1) * sizeof *ptr)) == NULL ||
        (w->emap[et] = gkv__malloc(c.n ? (size_t)c.n * sizeof(int64_t) : 1)) == NULL ||
        (cnt = gkv__calloc((size_t)T * (size_t)(nd ? nd : 1), sizeof *cnt)) == NULL ||
        (oc = gkv__calloc((size_t)T * (size_t)w->P, sizeof *oc)) == NULL) {
        gkv__free(cnt);
        /* the arrays per destination node are the large ones, unless the
         * edges outnumber the nodes */
        if (nd >= c.n)
            return fail_nodes(w, ei->dst_ntype, ((uint64_t)nd + 1) * 8 *
                              (uint64_t)(T + 1), "numbering the edges into "
                              "the destination nodes");
        return fail(w, GKV_ENOMEM, "out of memory numbering the %lld edges "
                    "of '%s'", (long long)c.n, ei->canonical);
    }
    for (int i = 0; i < T; i++) {
        jobs[i].w = w;
        jobs[i].et = et;
        jobs[i].lo = slice_lo(c.n, i, T);
        jobs[i].hi = slice_lo(c.n, i + 1, T);
        jobs[i].cnt = cnt + (size_t)i * (size_t)nd;
        jobs[i].oc = oc + (size_t)i * (size_t)w->P;
    }
    graph__parallel(num_count, jobs, sizeof jobs[0], T);
    /* v's edges: slice 0's first, then slice 1's, ...; counts -> cursors */
    at = 0;
    for (int64_t v = 0; v < nd; v++) {
        ptr[v] = at;
        for (int i = 0; i < T; i++) {
            int64_t k = jobs[i].cnt[v];
            jobs[i].cnt[v] = at;
            at += k;
        }
    }
    ptr[nd] = at;
    graph__parallel(num_scatter, jobs, sizeof jobs[0], T);
    for (int i = 0; i < T; i++) {
        for (int p = 0; p < w->P; p++)
            w->ocnt[(size_t)et * (size_t)w->P + (size_t)p] += jobs[i].oc[(size_t)p];
    }
    gkv__free(cnt);
    gkv__free(oc);
    return GKV_OK;
}

/* ---- writing tensors ---------------------------------------------------- */

/* Creates tensor 'name' (zeros: nothing is written yet) for rows [lo, hi).
 * *slice_rows gets the rows of one write: about SLICE_BYTES, a whole number
 * of chunks, so no write rewrites a chunk another one wrote. */
static gkv_err
tensor_begin(struct pw *w, gkv_store *s, int p, const char *name,
             gkv_dtype dt, unsigned ndim, const uint64_t *shape, uint64_t lo,
             uint64_t hi, uint64_t *slice_rows)
{
    gkv_tensor_spec ts;
    gkv_tensor_desc d;
    gkv_err rc;
    uint64_t per;

    memset(&ts, 0, sizeof ts);
    ts.dtype = dt;
    ts.ndim = ndim;
    for (unsigned k = 0; k < ndim; k++)
        ts.shape[k] = shape[k];
    ts.lo = lo;
    ts.hi = hi;
    ts.init = GKV_INIT_ZEROS;
    if ((rc = gkv_tensor_create(s, name, &ts)) != GKV_OK ||
        (rc = gkv_tensor_info(s, NULL, name, &d)) != GKV_OK)
        return fail(w, rc, "partition %d: creating tensor '%s': %s", p, name,
                    gkv_store_errmsg(s));
    per = SLICE_BYTES / d.row_bytes;
    if (per >= d.chunk_rows)
        per -= per % d.chunk_rows;
    *slice_rows = per > 0 ? per : 1;
    return GKV_OK;
}

static gkv_err
tensor_slice(struct pw *w, gkv_store *s, int p, const char *name, uint64_t a,
             uint64_t b, const void *rows, size_t row_bytes)
{
    size_t len = (size_t)(b - a) * row_bytes;
    gkv_err rc;

    if ((rc = gkv_tensor_write(s, name, a, b, rows, len)) != GKV_OK)
        return fail(w, rc, "partition %d: writing tensor '%s' rows "
                    "[%llu, %llu): %s", p, name, (unsigned long long)a,
                    (unsigned long long)b, gkv_store_errmsg(s));
    return wrote(w, len);
}

/* Writes rows [lo, hi) from one contiguous array. */
static gkv_err
put_tensor(struct pw *w, gkv_store *s, int p, const char *name, gkv_dtype dt,
           unsigned ndim, const uint64_t *shape, uint64_t lo, uint64_t hi,
           const void *rows)
{
    size_t rb = gkv_dtype_size(dt);
    uint64_t per;
    gkv_err rc;

    if (hi <= lo)
        return GKV_OK;
    for (unsigned k = 0; k < ndim; k++)
        rb *= (size_t)shape[k];
    if ((rc = tensor_begin(w, s, p, name, dt, ndim, shape, lo, hi, &per)) != GKV_OK)
        return rc;
    for (uint64_t a = lo; a < hi; a += per) {
        uint64_t b = hi - a < per ? hi : a + per;
        if ((rc = tensor_slice(w, s, p, name, a, b,
                               (const unsigned char *)rows + (a - lo) * rb,
                               rb)) != GKV_OK)
            return rc;
    }
    return GKV_OK;
}

/* Writes the rows of feature f for new IDs [lo, lo + n): row k is the
 * feature's row src_of(k) (ids[k], or first + k when ids is NULL). */
static gkv_err
put_feat(struct pw *w, gkv_store *s, int p, const struct pw_feat *f,
         uint64_t lo, uint64_t n, const int64_t *ids, int64_t first)
{
    unsigned char *buf = NULL;
    uint64_t per;
    gkv_err rc;

    if (n == 0)
        return GKV_OK;
    if (ids == NULL)
        return put_tensor(w, s, p, f->tname, f->dtype, f->ndim, f->shape, lo,
                          lo + n, f->rows + (size_t)first * f->row_bytes);
    if ((rc = tensor_begin(w, s, p, f->tname, f->dtype, f->ndim, f->shape, lo,
                           lo + n, &per)) != GKV_OK)
        return rc;
    if (per > n)
        per = n;
    if ((buf = gkv__malloc((size_t)per * f->row_bytes)) == NULL)
        return fail(w, GKV_ENOMEM, "out of memory gathering '%s'", f->tname);
    for (uint64_t a = 0; a < n && rc == GKV_OK; a += per) {
        uint64_t b = n - a < per ? n : a + per;
        for (uint64_t k = a; k < b; k++)
            memcpy(buf + (k - a) * f->row_bytes,
                   f->rows + (size_t)ids[k] * f->row_bytes, f->row_bytes);
        rc = tensor_slice(w, s, p, f->tname, lo + a, lo + b, buf, f->row_bytes);
    }
    gkv__free(buf);
    return rc;
}

/* The CSC (and edge features) of edge type et in partition p. */
static gkv_err
write_csc(struct pw *w, gkv_store *s, int p, int et)
{
    const gkv_etype_info *ei = &w->einfo[et];
    int d = ei->dst_ntype, need_oeid = 0;
    int64_t a = nlo(w, d, p), b = nlo(w, d, p + 1);
    const int64_t *ptr = w->eptr[et];          /* ptr[v] = start of v */
    int64_t elo = ptr[a], m = ptr[b] - elo;
    int64_t *indptr = NULL, *indices = NULL, *oeid = NULL;
    float *wt = NULL;
    struct scan_job jobs[64];
    char name[GKV_NAME_MAX + 1];
    int T = w->nthreads;
    gkv_coo c;
    gkv_err rc = GKV_OK;

    if (b <= a)
        return GKV_OK;                          /* owns no node of type d */
    gkv_graph_edges(w->g, et, &c);
    for (size_t f = 0; f < w->nfeats; f++)
        need_oeid |= w->feats[f].f->is_edge && w->feats[f].type == et;
    if ((indptr = gkv__malloc((size_t)(b - a + 1) * sizeof *indptr)) == NULL ||
        (indices = scratch(&w->s_idx, &w->s_idx_cap, (size_t)m,
                           sizeof *indices)) == NULL ||
        (ei->weighted && (wt = scratch(&w->s_w, &w->s_w_cap, (size_t)m,
                                       sizeof *wt)) == NULL) ||
        (need_oeid && (oeid = scratch(&w->s_oeid, &w->s_oeid_cap, (size_t)m,
                                      sizeof *oeid)) == NULL)) {
        rc = fail(w, GKV_ENOMEM, "partition %d: out of memory for the CSC of "
                  "'%s' (%lld edges)", p, ei->canonical, (long long)m);
        goto out;
    }
    for (int64_t v = a; v <= b; v++)
        indptr[v - a] = ptr[v] - elo;
    if (m > 0) {
        if (c.n < (int64_t)T * 65536)
            T = 1;
        for (int i = 0; i < T; i++) {
            jobs[i].w = w;
            jobs[i].et = et;
            jobs[i].lo = slice_lo(c.n, i, T);
            jobs[i].hi = slice_lo(c.n, i + 1, T);
            jobs[i].elo = elo;
            jobs[i].m = m;
            jobs[i].indices = indices;
            jobs[i].oeid = oeid;
            jobs[i].wt = wt;
            jobs[i].slo = nlo(w, ei->src_ntype, p);
            jobs[i].shi = nlo(w, ei->src_ntype, p + 1);
        }
        graph__parallel(scan_part, jobs, sizeof jobs[0], T);
        w->edge_cut += m;
        for (int i = 0; i < T; i++)
            w->edge_cut -= jobs[i].inner;
    }
    snprintf(name, sizeof name, "csc/%s/indptr", ei->canonical);
    if ((rc = put_tensor(w, s, p, name, GKV_I64, 0, NULL, 0,
                         (uint64_t)(b - a + 1), indptr)) != GKV_OK)
        goto out;
    snprintf(name, sizeof name, "csc/%s/indices", ei->canonical);
    if ((rc = put_tensor(w, s, p, name, GKV_I64, 0, NULL, (uint64_t)elo,
                         (uint64_t)(elo + m), indices)) != GKV_OK)
        goto out;
    if (wt != NULL) {
        snprintf(name, sizeof name, "csc/%s/weight", ei->canonical);
        if ((rc = put_tensor(w, s, p, name, GKV_F32, 0, NULL, (uint64_t)elo,
                             (uint64_t)(elo + m), wt)) != GKV_OK)
            goto out;
    }
    for (size_t f = 0; f < w->nfeats && rc == GKV_OK; f++)
        if (w->feats[f].f->is_edge && w->feats[f].type == et)
            rc = put_feat(w, s, p, &w->feats[f], (uint64_t)elo, (uint64_t)m,
                          oeid, 0);
out:
    gkv__free(indptr);
    return rc;
}

struct csr_item {
    int64_t eid, dst;
    float w;
};

static int
csr_cmp(const void *x, const void *y)
{
    const struct csr_item *a = x, *b = y;

    return (a->eid > b->eid) - (a->eid < b->eid);
}

/* The CSR of the out-edges of the source nodes partition p owns. */
static gkv_err
write_csr(struct pw *w, gkv_store *s, int p, int et)
{
    const gkv_etype_info *ei = &w->einfo[et];
    int st = ei->src_ntype, dt = ei->dst_ntype;
    int64_t a = nlo(w, st, p), b = nlo(w, st, p + 1), n = b - a, m;
    const uint16_t *so = w->owner[st];
    const int64_t *sid = w->newid[st], *did = w->newid[dt], *emap = w->emap[et];
    int64_t *indptr = NULL, *cur = NULL, *idx = NULL, *eid = NULL;
    struct csr_item *it = NULL;
    float *wt = NULL;
    char name[GKV_NAME_MAX + 1];
    gkv_coo c;
    gkv_err rc = GKV_OK;

    if (n <= 0)
        return GKV_OK;
    gkv_graph_edges(w->g, et, &c);
    if ((indptr = gkv__calloc((size_t)n + 1, sizeof *indptr)) == NULL ||
        (cur = gkv__malloc((size_t)n * sizeof *cur)) == NULL)
        goto nomem;
    for (int64_t i = 0; i < c.n; i++)
        if (so[c.src[i]] == p)
            indptr[nid(sid, c.src[i]) - a + 1]++;
    for (int64_t v = 0; v < n; v++)
        indptr[v + 1] += indptr[v];
    m = indptr[n];
    memcpy(cur, indptr, (size_t)n * sizeof *cur);
    if ((it = gkv__malloc(m ? (size_t)m * sizeof *it : 1)) == NULL)
        goto nomem;
    for (int64_t i = 0; i < c.n; i++)
        if (so[c.src[i]] == p) {
            struct csr_item *x = &it[cur[nid(sid, c.src[i]) - a]++];
            x->eid = emap[i];
            x->dst = nid(did, c.dst[i]);
            x->w = c.w != NULL ? c.w[i] : 0.0f;
        }
    gkv__free(cur);
    cur = NULL;
    for (int64_t v = 0; v < n; v++) {
        int64_t lo = indptr[v], len = indptr[v + 1] - lo;
        int sorted = 1;
        for (int64_t k = 1; k < len && sorted; k++)
            sorted = it[lo + k - 1].eid < it[lo + k].eid;
        if (!sorted)
            qsort(it + lo, (size_t)len, sizeof *it, csr_cmp);
    }
    if ((idx = gkv__malloc(m ? (size_t)m * sizeof *idx : 1)) == NULL ||
        (eid = gkv__malloc(m ? (size_t)m * sizeof *eid : 1)) == NULL ||
        (ei->weighted && (wt = gkv__malloc(m ? (size_t)m * sizeof *wt : 1)) == NULL))
        goto nomem;
    for (int64_t k = 0; k < m; k++) {
        idx[k] = it[k].dst;
        eid[k] = it[k].eid;
        if (wt != NULL)
            wt[k] = it[k].w;
    }
    gkv__free(it);
    it = NULL;
    snprintf(name, sizeof name, "csr/%s/indptr", ei->canonical);
    if ((rc = put_tensor(w, s, p, name, GKV_I64, 0, NULL, 0, (uint64_t)n + 1,
                         indptr)) != GKV_OK)
        goto out;
    snprintf(name, sizeof name, "csr/%s/indices", ei->canonical);
    if ((rc = put_tensor(w, s, p, name, GKV_I64, 0, NULL, 0, (uint64_t)m,
                         idx)) != GKV_OK)
        goto out;
    snprintf(name, sizeof name, "csr/%s/eids", ei->canonical);
    if ((rc = put_tensor(w, s, p, name, GKV_I64, 0, NULL, 0, (uint64_t)m,
                         eid)) != GKV_OK)
        goto out;
    if (wt != NULL) {
        snprintf(name, sizeof name, "csr/%s/weight", ei->canonical);
        rc = put_tensor(w, s, p, name, GKV_F32, 0, NULL, 0, (uint64_t)m, wt);
    }
    goto out;
nomem:
    rc = fail(w, GKV_ENOMEM, "partition %d: out of memory for the CSR of "
              "'%s'", p, ei->canonical);
out:
    gkv__free(indptr);
    gkv__free(cur);
    gkv__free(it);
    gkv__free(idx);
    gkv__free(eid);
    gkv__free(wt);
    return rc;
}

/* Node features of partition p. */
static gkv_err
write_node_feats(struct pw *w, gkv_store *s, int p)
{
    gkv_err rc = GKV_OK;

    for (int t = 0; t < w->nnt && rc == GKV_OK; t++) {
        int64_t a = nlo(w, t, p), n = nlo(w, t, p + 1) - a, k = 0;
        int64_t *ids = NULL;
        int any = 0;

        for (size_t f = 0; f < w->nfeats; f++)
            any |= !w->feats[f].f->is_edge && w->feats[f].type == t;
        if (!any || n == 0)
            continue;
        if (w->newid[t] != NULL) {
            /* the original IDs of the nodes p owns, in new-ID order */
            if ((ids = gkv__malloc((size_t)n * sizeof *ids)) == NULL)
                return fail(w, GKV_ENOMEM, "out of memory");
            for (int64_t v = 0; v < w->ncount[t]; v++)
                if (w->owner[t][v] == p)
                    ids[k++] = v;
        }
        for (size_t f = 0; f < w->nfeats && rc == GKV_OK; f++)
            if (!w->feats[f].f->is_edge && w->feats[f].type == t)
                rc = put_feat(w, s, p, &w->feats[f], (uint64_t)a, (uint64_t)n,
                              ids, a);
        gkv__free(ids);
    }
    return rc;
}

static gkv_err
part_path(struct pw *w, int p, char **out)
{
    char sub[32];

    snprintf(sub, sizeof sub, "part-%d", p);
    if ((*out = path_join(w->tmp, sub)) == NULL)
        return fail(w, GKV_ENOMEM, "out of memory");
    return GKV_OK;
}

/* Bytes of partition p's tensors, for the map size and the progress. */
static uint64_t
part_bytes(const struct pw *w, int p)
{
    uint64_t by = 0;

    for (int et = 0; et < w->net; et++) {
        const gkv_etype_info *ei = &w->einfo[et];
        int d = ei->dst_ntype, s = ei->src_ntype;
        int64_t a = nlo(w, d, p), b = nlo(w, d, p + 1);
        uint64_t m = (uint64_t)(w->eptr[et][b] - w->eptr[et][a]);
        if (b > a)
            by += (uint64_t)(b - a + 1) * 8 + m * (8 + (ei->weighted ? 4 : 0));
        for (size_t f = 0; f < w->nfeats; f++)
            if (w->feats[f].f->is_edge && w->feats[f].type == et)
                by += m * w->feats[f].row_bytes;
        if (w->sp->flags & GKV_PART_CSR) {
            int64_t sa = nlo(w, s, p), sb = nlo(w, s, p + 1);
            uint64_t mo = (uint64_t)w->ocnt[(size_t)et * (size_t)w->P + (size_t)p];
            if (sb > sa)
                by += (uint64_t)(sb - sa + 1) * 8 +
                      mo * (16 + (ei->weighted ? 4 : 0));
        }
    }
    for (size_t f = 0; f < w->nfeats; f++)
        if (!w->feats[f].f->is_edge) {
            int t = w->feats[f].type;
            by += (uint64_t)(nlo(w, t, p + 1) - nlo(w, t, p)) *
                  w->feats[f].row_bytes;
        }
    return by;
}

static gkv_err
write_partition(struct pw *w, int p)
{
    gkv_open_opts o;
    gkv_store *s = NULL;
    char *path = NULL;
    gkv_err rc;

    if ((rc = part_path(w, p, &path)) != GKV_OK)
        return rc;
    memset(&o, 0, sizeof o);
    /* room for everything at once: no map growth (which redoes a write) */
    o.map_size = part_bytes(w, p) / 2 * 3 + (64u << 20);
    if ((rc = gkv_store_open(&s, path, GKV_CREATE | GKV_NOSYNC, &o)) != GKV_OK) {
        rc = fail(w, rc, "partition %d: creating store '%s': %s", p, path,
                  gkv_store_errmsg(NULL));
        goto out;
    }
    for (int et = 0; et < w->net && rc == GKV_OK; et++)
        rc = write_csc(w, s, p, et);
    if (rc == GKV_OK)
        rc = write_node_feats(w, s, p);
    for (int et = 0; et < w->net && rc == GKV_OK &&
         (w->sp->flags & GKV_PART_CSR); et++)
        rc = write_csr(w, s, p, et);
out:
    gkv_store_close(s);
    gkv__free(path);
    return rc;
}

/* ---- mapping files, JSON, the end ------------------------------------------ */

/* Writes int64[n] to 'rel' under the temporary directory as .npy: the
 * array 'v', or the identity 0..n-1 when v is NULL. */
static gkv_err
write_npy_i64(struct pw *w, const char *rel, const int64_t *v, int64_t n)
{
    char *path = path_join(w->tmp, rel), why[256];
    int64_t *buf = NULL;
    uint64_t shape[1] = {(uint64_t)n};
    size_t hl = 0;
    gkv_err rc = GKV_OK;
    int fd = -1;

    if (path == NULL)
        return fail(w, GKV_ENOMEM, "out of memory");
    if ((fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644)) < 0) {
        rc = fail(w, from_errno(errno), "creating '%s': %s", path,
                  strerror(errno));
        goto out;
    }
    why[0] = '\0';
    if ((rc = gkv_npy_write_header(fd, GKV_I64, 1, shape, &hl, why,
                                   sizeof why)) != GKV_OK) {
        rc = fail(w, rc, "writing '%s': %s", path, why);
        goto out;
    }
    if (v == NULL && n > 0 &&
        (buf = gkv__malloc(SLICE_BYTES / 8 * sizeof *buf)) == NULL) {
        rc = fail(w, GKV_ENOMEM, "out of memory");
        goto out;
    }
    for (int64_t a = 0; a < n;) {
        int64_t b = n - a < (int64_t)(SLICE_BYTES / 8) ? n : a + SLICE_BYTES / 8;
        const int64_t *src = v + a;
        if (v == NULL) {
            for (int64_t k = a; k < b; k++)
                buf[k - a] = k;
            src = buf;
        }
        if (write_all(fd, src, (size_t)(b - a) * sizeof *src) != 0) {
            rc = fail(w, from_errno(errno), "writing '%s': %s", path,
                      strerror(errno));
            goto out;
        }
        if ((rc = wrote(w, (uint64_t)(b - a) * 8)) != GKV_OK)
            goto out;
        a = b;
    }
    if (close(fd) != 0) {
        fd = -1;
        rc = fail(w, from_errno(errno), "writing '%s': %s", path,
                  strerror(errno));
        goto out;
    }
    fd = -1;
out:
    if (fd >= 0)
        close(fd);
    gkv__free(buf);
    gkv__free(path);
    return rc;
}

static gkv_err
write_mappings(struct pw *w)
{
    char rel[GKV_NAME_MAX + 32];
    gkv_err rc = GKV_OK;

    for (int t = 0; t < w->nnt && rc == GKV_OK; t++) {
        snprintf(rel, sizeof rel, "mapping/node-%s.npy",
                 gkv_graph_ntype_name(w->g, t));
        rc = write_npy_i64(w, rel, w->newid[t], w->ncount[t]);
    }
    for (int et = 0; et < w->net && rc == GKV_OK; et++) {
        snprintf(rel, sizeof rel, "mapping/edge-%s.npy", w->einfo[et].canonical);
        rc = write_npy_i64(w, rel, w->emap[et], w->einfo[et].num_edges);
        gkv__free(w->emap[et]);          /* the last use */
        w->emap[et] = NULL;
    }
    return rc;
}

/* Sets o[k] = v, taking v in every case (as jansson's *_new calls do);
 * *bad on any failure (v or o NULL: out of memory). */
static void
jset(json_t *o, const char *k, json_t *v, int *bad)
{
    if (o == NULL) {
        json_decref(v);
        *bad = 1;
    } else if (v == NULL || json_object_set_new(o, k, v) != 0) {
        *bad = 1;
    }
}

static void
japp(json_t *a, json_t *v, int *bad)
{
    if (a == NULL) {
        json_decref(v);
        *bad = 1;
    } else if (v == NULL || json_array_append_new(a, v) != 0) {
        *bad = 1;
    }
}

static json_t *
jrange(int64_t a, int64_t b, int *bad)
{
    json_t *r = json_array();

    japp(r, json_integer(a), bad);
    japp(r, json_integer(b), bad);
    return r;
}

static int64_t
ecount(const struct pw *w, int et, int p)
{
    int d = w->einfo[et].dst_ntype;

    return w->eptr[et][nlo(w, d, p + 1)] - w->eptr[et][nlo(w, d, p)];
}

static gkv_err
write_json(struct pw *w, const gkv_part_report *r)
{
    json_t *root = json_object(), *nt = json_object(), *et = json_object();
    json_t *nmap = json_object(), *emap = json_object(), *wl = json_array();
    json_t *nf = json_object(), *ef = json_object(), *mp = json_object();
    json_t *mn = json_object(), *me = json_object();
    char key[GKV_NAME_MAX + 32], *text = NULL, *path = NULL;
    int64_t base = 0;
    int bad = 0, fd = -1;
    gkv_err rc = GKV_OK;

    jset(root, "graph_name", json_string(w->name), &bad);
    jset(root, "gkv_format", json_integer(PW_FORMAT), &bad);
    jset(root, "num_nodes", json_integer(r->num_nodes), &bad);
    jset(root, "num_edges", json_integer(r->num_edges), &bad);
    jset(root, "part_method",
         json_string(gkv_part_method_name(w->sp->method)), &bad);
    jset(root, "num_parts", json_integer(w->P), &bad);
    jset(root, "halo_hops", json_integer(0), &bad);
    for (int t = 0; t < w->nnt; t++) {
        const char *tn = gkv_graph_ntype_name(w->g, t);
        json_t *names = NULL;
        jset(nt, tn, json_integer(t), &bad);
        jset(nmap, tn, json_array(), &bad);
        for (size_t f = 0; f < w->nfeats; f++)
            if (!w->feats[f].f->is_edge && w->feats[f].type == t) {
                if (names == NULL && (names = json_array()) == NULL)
                    bad = 1;
                japp(names, json_string(w->feats[f].name), &bad);
            }
        if (names != NULL)
            jset(nf, tn, names, &bad);   /* takes names either way */
        snprintf(key, sizeof key, "mapping/node-%s.npy", tn);
        jset(mn, tn, json_string(key), &bad);
    }
    for (int e = 0; e < w->net; e++) {
        const char *cn = w->einfo[e].canonical;
        json_t *names = NULL;
        jset(et, cn, json_integer(e), &bad);
        jset(emap, cn, json_array(), &bad);
        if (w->einfo[e].weighted)
            japp(wl, json_string(cn), &bad);
        for (size_t f = 0; f < w->nfeats; f++)
            if (w->feats[f].f->is_edge && w->feats[f].type == e) {
                if (names == NULL && (names = json_array()) == NULL)
                    bad = 1;
                japp(names, json_string(w->feats[f].name), &bad);
            }
        if (names != NULL)
            jset(ef, cn, names, &bad);   /* takes names either way */
        snprintf(key, sizeof key, "mapping/edge-%s.npy", cn);
        jset(me, cn, json_string(key), &bad);
    }
    /* homogeneous IDs: partition by partition, type by type within */
    for (int p = 0; p < w->P && !bad; p++)
        for (int t = 0; t < w->nnt; t++) {
            int64_t n = nlo(w, t, p + 1) - nlo(w, t, p);
            japp(json_object_get(nmap, gkv_graph_ntype_name(w->g, t)),
                 jrange(base, base + n, &bad), &bad);
            base += n;
        }
    base = 0;
    for (int p = 0; p < w->P && !bad; p++)
        for (int e = 0; e < w->net; e++) {
            int64_t n = ecount(w, e, p);
            japp(json_object_get(emap, w->einfo[e].canonical),
                 jrange(base, base + n, &bad), &bad);
            base += n;
        }
    jset(root, "ntypes", nt, &bad);
    jset(root, "etypes", et, &bad);
    jset(root, "node_map", nmap, &bad);
    jset(root, "edge_map", emap, &bad);
    jset(root, "weighted", wl, &bad);
    if (w->sp->nreverse > 0) {
        json_t *rv = json_object();

        for (size_t f = 0; f < w->nfeats; f++)
            if (w->feats[f].rev_et >= 0)
                jset(rv, w->einfo[w->feats[f].type].canonical,
                     json_string(w->einfo[w->feats[f].rev_et].canonical), &bad);
        jset(root, "reverse_etypes", rv, &bad);
    }
    jset(root, "csr", json_boolean((w->sp->flags & GKV_PART_CSR) != 0), &bad);
    jset(root, "node_feats", nf, &bad);
    jset(root, "edge_feats", ef, &bad);
    for (int p = 0; p < w->P && !bad; p++) {
        json_t *o = json_object();
        char sub[32];
        snprintf(sub, sizeof sub, "part-%d", p);
        jset(o, "part_graph", json_string(sub), &bad);
        jset(o, "node_feats", json_string(sub), &bad);
        jset(o, "edge_feats", json_string(sub), &bad);
        jset(root, sub, o, &bad);
    }
    jset(mp, "node", mn, &bad);
    jset(mp, "edge", me, &bad);
    jset(root, "mapping", mp, &bad);
    if (bad || (text = json_dumps(root, JSON_INDENT(2))) == NULL) {
        rc = fail(w, GKV_ENOMEM, "out of memory building the JSON config");
        goto out;
    }
    snprintf(key, sizeof key, "%s.json", w->name);
    if ((path = path_join(w->tmp, key)) == NULL) {
        rc = fail(w, GKV_ENOMEM, "out of memory");
        goto out;
    }
    if ((fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644)) < 0 ||
        write_all(fd, text, strlen(text)) != 0 || write_all(fd, "\n", 1) != 0 ||
        fsync(fd) != 0) {
        rc = fail(w, from_errno(errno), "writing '%s': %s", path,
                  strerror(errno));
        goto out;
    }
out:
    if (fd >= 0)
        close(fd);
    gkv__free(path);
    free(text);          /* jansson's allocation */
    json_decref(root);   /* jset gave it, or freed, every part */
    return rc;
}

/* Every store, mapping file and directory of the temporary tree to disk. */
static gkv_err
sync_all(struct pw *w)
{
    char rel[GKV_NAME_MAX + 32], *path = NULL;
    gkv_err rc = GKV_OK;

    if ((rc = progress(w, "sync", 0, 0)) != GKV_OK)
        return rc;
    for (int p = 0; p < w->P && rc == GKV_OK; p++) {
        gkv_store *s = NULL;
        if ((rc = part_path(w, p, &path)) != GKV_OK)
            break;
        if ((rc = gkv_store_open(&s, path, GKV_NOSYNC, NULL)) != GKV_OK ||
            (rc = gkv_store_sync(s)) != GKV_OK)
            rc = fail(w, rc, "partition %d: syncing store '%s': %s", p, path,
                      gkv_store_errmsg(s));
        gkv_store_close(s);
        if (rc == GKV_OK && fsync_path(path, 1) != 0)
            rc = fail(w, from_errno(errno), "syncing '%s': %s", path,
                      strerror(errno));
        gkv__free(path);
        path = NULL;
    }
    for (int i = 0; i < w->nnt + w->net && rc == GKV_OK; i++) {
        if (i < w->nnt)
            snprintf(rel, sizeof rel, "mapping/node-%s.npy",
                     gkv_graph_ntype_name(w->g, i));
        else
            snprintf(rel, sizeof rel, "mapping/edge-%s.npy",
                     w->einfo[i - w->nnt].canonical);
        if ((path = path_join(w->tmp, rel)) == NULL)
            return fail(w, GKV_ENOMEM, "out of memory");
        if (fsync_path(path, 0) != 0)
            rc = fail(w, from_errno(errno), "syncing '%s': %s", path,
                      strerror(errno));
        gkv__free(path);
        path = NULL;
    }
    if (rc == GKV_OK && (path = path_join(w->tmp, "mapping")) != NULL &&
        fsync_path(path, 1) != 0)
        rc = fail(w, from_errno(errno), "syncing '%s': %s", path,
                  strerror(errno));
    gkv__free(path);
    return rc;
}

/* The parent directory of w->out, synced after the rename. */
static void
sync_parent(struct pw *w)
{
    char *parent = gkv__strdup(w->out), *slash;

    if (parent == NULL)
        return;
    slash = strrchr(parent, '/');
    if (slash == NULL)
        strcpy(parent, ".");
    else if (slash == parent)
        slash[1] = '\0';
    else
        *slash = '\0';
    fsync_path(parent, 1);
    gkv__free(parent);
}

/* Moves the complete temporary tree to OUT. */
static gkv_err
publish(struct pw *w)
{
    if (fsync_path(w->tmp, 1) != 0)
        return fail(w, from_errno(errno), "syncing '%s': %s", w->tmp,
                    strerror(errno));
    if (w->replace) {
        /* one step where the file system can: OUT is the old partition or
         * the new one at every moment, and OUT.tmp-PID then holds the old
         * (a crash leaves it behind, as documented) */
        if (renameat2(AT_FDCWD, w->tmp, AT_FDCWD, w->out,
                      RENAME_EXCHANGE) == 0) {
            w->tmp_made = 0;
            sync_parent(w);
            rmtree(w->tmp);
            return GKV_OK;
        }
        if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP)
            return fail(w, from_errno(errno), "swapping '%s' and '%s': %s",
                        w->tmp, w->out, strerror(errno));
        /* a file system without exchange: OUT is missing for a moment */
        if (rename(w->out, w->old) != 0)
            return fail(w, from_errno(errno), "moving the old partition "
                        "'%s' aside: %s", w->out, strerror(errno));
        if (rename(w->tmp, w->out) != 0) {
            int e = errno;
            rename(w->old, w->out);
            return fail(w, from_errno(e), "renaming '%s' to '%s': %s",
                        w->tmp, w->out, strerror(e));
        }
        w->tmp_made = 0;
        sync_parent(w);
        rmtree(w->old);
        return GKV_OK;
    }
    if (rename(w->tmp, w->out) != 0) {
        int e = errno;
        if (e == ENOTEMPTY || e == EEXIST)
            return fail(w, GKV_EEXIST, "output directory '%s' was filled "
                        "by someone else while partitioning", w->out);
        return fail(w, from_errno(e), "renaming '%s' to '%s': %s", w->tmp,
                    w->out, strerror(e));
    }
    w->tmp_made = 0;
    sync_parent(w);
    return GKV_OK;
}

/* ---- the call ------------------------------------------------------------ */

const char *
gkv_part_method_name(gkv_part_method m)
{
    switch (m) {
    case GKV_PART_RANDOM: return "random";
    case GKV_PART_RANGE:  return "range";
    case GKV_PART_METIS:  return "metis";
    default:              return "?";
    }
}

gkv_err
gkv_part_method_parse(const char *s, gkv_part_method *out)
{
    static const gkv_part_method all[] = {GKV_PART_RANDOM, GKV_PART_RANGE,
                                          GKV_PART_METIS};

    for (size_t i = 0; s != NULL && i < sizeof all / sizeof all[0]; i++)
        if (strcmp(s, gkv_part_method_name(all[i])) == 0) {
            if (out != NULL)
                *out = all[i];
            return GKV_OK;
        }
    return GKV_EINVAL;
}

static void
pw_free(struct pw *w)
{
    for (int t = 0; w->owner != NULL && t < w->nnt; t++)
        gkv__free(w->owner[t]);
    for (int t = 0; w->newid != NULL && t < w->nnt; t++)
        gkv__free(w->newid[t]);
    for (int t = 0; w->mask != NULL && t < w->nnt; t++)
        gkv__free(w->mask[t]);
    for (int e = 0; w->emap != NULL && e < w->net; e++)
        gkv__free(w->emap[e]);
    for (int e = 0; w->eptr != NULL && e < w->net; e++)
        gkv__free(w->eptr[e]);
    for (size_t f = 0; f < w->nfeats; f++)
        gkv_npy_map_close(&w->feats[f].map);
    gkv__free(w->feats);
    gkv__free(w->revf);
    gkv__free(w->s_idx);
    gkv__free(w->s_oeid);
    gkv__free(w->s_w);
    gkv__free(w->owner);
    gkv__free(w->newid);
    gkv__free(w->mask);
    gkv__free(w->emap);
    gkv__free(w->eptr);
    gkv__free(w->ocnt);
    gkv__free(w->nstart);
    gkv__free(w->ncount);
    gkv__free(w->einfo);
    gkv__free(w->out);
    gkv__free(w->tmp);
    gkv__free(w->old);
}

/* Fills w from the arguments; checks all that needs no disk. */
static gkv_err
setup(struct pw *w, const char *outdir)
{
    const gkv_part_spec *sp = w->sp;
    int64_t total = 0;
    size_t len;
    const char *why;

    if (gkv_part_method_name(sp->method)[0] == '?')
        return fail(w, GKV_EINVAL, "unknown partition method %d (random, "
                    "range or metis)", (int)sp->method);
    if (sp->num_parts < 1 || sp->num_parts > GKV_PART_MAX)
        return fail(w, GKV_EINVAL, "%d partitions: need 1 to %d",
                    sp->num_parts, GKV_PART_MAX);
    if (sp->flags & ~(GKV_PART_CSR | GKV_PART_FORCE | GKV_PART_BALANCE_EDGES))
        return fail(w, GKV_EINVAL, "unknown flags 0x%x",
                    sp->flags & ~(GKV_PART_CSR | GKV_PART_FORCE |
                                  GKV_PART_BALANCE_EDGES));
    w->name = sp->name != NULL ? sp->name : "graph";
    if (!name_ok(w->name, &why))
        return fail(w, GKV_EINVAL, "graph name '%s' %s", w->name, why);
    w->P = sp->num_parts;
    w->nthreads = sp->nthreads < 1 ? 1 : sp->nthreads > 64 ? 64 : sp->nthreads;
    w->nnt = gkv_graph_num_ntypes(w->g);
    w->net = gkv_graph_num_etypes(w->g);
    if ((w->ncount = gkv__calloc((size_t)w->nnt + 1, sizeof *w->ncount)) == NULL ||
        (w->owner = gkv__calloc((size_t)w->nnt + 1, sizeof *w->owner)) == NULL ||
        (w->newid = gkv__calloc((size_t)w->nnt + 1, sizeof *w->newid)) == NULL ||
        (w->nstart = gkv__calloc(((size_t)w->nnt + 1) * (size_t)(w->P + 1),
                                 sizeof *w->nstart)) == NULL ||
        (w->einfo = gkv__calloc((size_t)w->net + 1, sizeof *w->einfo)) == NULL ||
        (w->emap = gkv__calloc((size_t)w->net + 1, sizeof *w->emap)) == NULL ||
        (w->eptr = gkv__calloc((size_t)w->net + 1, sizeof *w->eptr)) == NULL ||
        (w->ocnt = gkv__calloc(((size_t)w->net + 1) * (size_t)w->P,
                               sizeof *w->ocnt)) == NULL)
        return fail(w, GKV_ENOMEM, "out of memory");
    for (int t = 0; t < w->nnt; t++)
        total += w->ncount[t] = gkv_graph_num_nodes(w->g, t);
    for (int e = 0; e < w->net; e++)
        gkv_graph_etype_info(w->g, e, &w->einfo[e]);
    if (w->P > total)
        return fail(w, GKV_EINVAL, "%d partitions, but the graph has only "
                    "%lld node%s", w->P, (long long)total, total == 1 ? "" : "s");
    if (sp->method == GKV_PART_METIS && w->P > 1 &&
        pw__metis_check(w->g, w->msg, w->msglen) != GKV_OK) {
        /* a sparse ID is the usual reason for billions of nodes */
        size_t k = w->msg != NULL ? strlen(w->msg) : 0;
        if (w->msg != NULL && w->nnt > 0 && k + 1 < w->msglen)
            dense_note(w, biggest_ntype(w), w->msg + k, w->msglen - k);
        return GKV_ERANGE;
    }
    if (check_memory(w) != GKV_OK)
        return GKV_ENOMEM;

    len = strlen(outdir);
    while (len > 1 && outdir[len - 1] == '/')
        len--;
    if ((w->out = gkv__malloc(len + 1)) == NULL ||
        (w->tmp = gkv__malloc(len + 32)) == NULL ||
        (w->old = gkv__malloc(len + 32)) == NULL)
        return fail(w, GKV_ENOMEM, "out of memory");
    memcpy(w->out, outdir, len);
    w->out[len] = '\0';
    if (strcmp(w->out, "/") == 0)
        return fail(w, GKV_EINVAL, "output directory '/' is not allowed");
    {
        /* OUT.tmp-PID and OUT.old-PID must sit beside OUT: with a last
         * component "." or ".." they would land inside it or above, and
         * the final rename fails after all the work */
        const char *last = strrchr(w->out, '/');
        last = last != NULL ? last + 1 : w->out;
        if (strcmp(last, ".") == 0 || strcmp(last, "..") == 0)
            return fail(w, GKV_EINVAL, "output directory '%s' ends in '%s'; "
                        "name the directory itself", w->out, last);
    }
    snprintf(w->tmp, len + 32, "%s.tmp-%ld", w->out, (long)getpid());
    snprintf(w->old, len + 32, "%s.old-%ld", w->out, (long)getpid());
    return GKV_OK;
}

static gkv_err
run(struct pw *w, const char *outdir, gkv_part_report *r)
{
    char *mp = NULL;
    gkv_err rc;

    if ((rc = setup(w, outdir)) != GKV_OK || (rc = load_feats(w)) != GKV_OK ||
        (rc = load_reverse(w)) != GKV_OK || (rc = load_masks(w)) != GKV_OK ||
        (rc = check_outdir(w)) != GKV_OK)
        return rc;
    if (mkdir(w->tmp, 0755) != 0) {
        if (errno == EEXIST)
            return fail(w, GKV_EEXIST, "temporary directory '%s' exists (left "
                        "by a crashed run?); remove it", w->tmp);
        return fail(w, from_errno(errno), "creating '%s': %s", w->tmp,
                    strerror(errno));
    }
    w->tmp_made = 1;
    if ((mp = path_join(w->tmp, "mapping")) == NULL)
        return fail(w, GKV_ENOMEM, "out of memory");
    if (mkdir(mp, 0755) != 0) {
        rc = fail(w, from_errno(errno), "creating '%s': %s", mp,
                  strerror(errno));
        gkv__free(mp);
        return rc;
    }
    gkv__free(mp);

    if ((rc = assign(w, r)) != GKV_OK)
        return rc;
    for (int e = 0; e < w->net; e++)
        if ((rc = number_edges(w, e)) != GKV_OK)
            return rc;
    /* a reverse_eid row k (original edge k) is the new ID of the other
     * type's original edge k */
    for (size_t f = 0; f < w->nfeats; f++)
        if (w->feats[f].rev_et >= 0)
            w->feats[f].rows = (const unsigned char *)w->emap[w->feats[f].rev_et];

    /* the report's counts, and the bytes to write */
    r->min_part_nodes = r->min_part_edges = INT64_MAX;
    for (int p = 0; p < w->P; p++) {
        int64_t n = 0, m = 0;
        for (int t = 0; t < w->nnt; t++)
            n += nlo(w, t, p + 1) - nlo(w, t, p);
        for (int e = 0; e < w->net; e++)
            m += ecount(w, e, p);
        if (n < r->min_part_nodes) r->min_part_nodes = n;
        if (n > r->max_part_nodes) r->max_part_nodes = n;
        if (m < r->min_part_edges) r->min_part_edges = m;
        if (m > r->max_part_edges) r->max_part_edges = m;
        w->bytes_total += part_bytes(w, p);
    }
    for (int t = 0; t < w->nnt; t++) {
        r->num_nodes += w->ncount[t];
        w->bytes_total += (uint64_t)w->ncount[t] * 8;
    }
    for (int e = 0; e < w->net; e++) {
        r->num_edges += w->einfo[e].num_edges;
        w->bytes_total += (uint64_t)w->einfo[e].num_edges * 8;
    }
    if ((rc = progress(w, "write", 0, w->bytes_total)) != GKV_OK)
        return rc;

    for (int p = 0; p < w->P; p++)
        if ((rc = write_partition(w, p)) != GKV_OK)
            return rc;
    r->edge_cut = w->edge_cut;        /* counted while scattering */
    if ((rc = write_mappings(w)) != GKV_OK || (rc = sync_all(w)) != GKV_OK ||
        (rc = write_json(w, r)) != GKV_OK)
        return rc;
    /* the last moment a cancel removes everything: syncing may have been
     * the longest stage */
    if ((rc = progress(w, "sync", 1, 2)) != GKV_OK ||
        (rc = publish(w)) != GKV_OK)
        return rc;
    r->bytes_written = w->bytes_done;
    /* published: a cancel now changes nothing */
    if (w->sp->progress != NULL)
        (void)w->sp->progress(w->sp->progress_ctx, "sync", 1, 1);
    return GKV_OK;
}

gkv_err
gkv_partition_write(const gkv_graph *g, const gkv_part_spec *spec,
                    const char *outdir, gkv_part_report *rep, char *msg,
                    size_t msglen)
{
    struct pw w;
    gkv_part_report r;
    uint64_t t0 = gkv__now_ns();
    char detail[GKV__MSG_MAX] = "";   /* to msg and to gkv_errmsg() */
    gkv_err rc;

    gkv__clear(NULL);
    if (msg != NULL && msglen > 0)
        msg[0] = '\0';
    if (g == NULL || spec == NULL || outdir == NULL || *outdir == '\0') {
        rc = pw__msg(detail, sizeof detail, GKV_EINVAL, "NULL graph, spec or "
                     "output directory");
        goto out;
    }
    memset(&w, 0, sizeof w);
    memset(&r, 0, sizeof r);
    w.g = g;
    w.sp = spec;
    w.msg = detail;
    w.msglen = sizeof detail;
    rc = run(&w, outdir, &r);
    if (rc != GKV_OK && w.tmp_made)
        rmtree(w.tmp);
    pw_free(&w);
    if (rc == GKV_OK && rep != NULL) {
        r.seconds = (double)(gkv__now_ns() - t0) * 1e-9;
        *rep = r;
    }
out:
    if (rc != GKV_OK) {
        if (msg != NULL && msglen > 0)
            snprintf(msg, msglen, "%s", detail);
        gkv__fail(NULL, rc, "%s", detail);
    }
    return rc;
}
