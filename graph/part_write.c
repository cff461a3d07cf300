/* part_write.c - the partitioner: assigns nodes, renumbers, and writes one
 * store per partition, the mapping files and the JSON config (see
 * gkv_partition.h and doc/FORMAT.md, "Partitions").
 *
 * This file checks the spec, estimates the memory and runs the steps; the
 * steps' files are named below (part_write.h lists them all).
 *
 * The work, in order:
 *   1. check everything that can be checked before writing: the spec, the
 *      names, the features and masks (mapped, row counts: part_load.c), the
 *      output dir (part_fs.c);
 *   2. assign nodes (part_assign.c, part_write_metis.c): owner[t][v] =
 *      partition of node v of type t (random, range or METIS), then new
 *      IDs: partition by partition, in original order within one (range
 *      keeps the IDs, so newid is not stored);
 *   3. number edges (part_assign.c), per edge type, without sorting: a
 *      count of in-edges per new destination ID gives the global CSC
 *      offsets eptr (partitions own consecutive new IDs, so this is every
 *      partition's CSC laid end to end, and a position is the new edge ID);
 *      one pass in original edge order with eptr as the cursors gives
 *      emap[i] = new ID of edge i, in CSC order with ties in original
 *      order, which is the contract;
 *   4. partition by partition (part_store.c): open its store, and per edge
 *      type scan emap for the edges inside the partition's range,
 *      scattering their new source IDs (and weights) to their CSC
 *      positions; write indptr, indices, weights, features (gathered at the
 *      new IDs) and, if asked, the CSR; close; free;
 *   5. write the mapping files, sync every store and file, write the JSON
 *      (part_config.c), and rename OUT.tmp-PID to OUT (part_fs.c).
 * Memory beyond the graph: emap (8 bytes per edge), eptr, owner and newid
 * (about 18 bytes per node), and one partition's arrays at a time. A graph
 * whose arrays cannot fit in this machine's memory is refused at step 1,
 * saying why (node IDs are dense: one sparse ID of 4000000000 makes four
 * billion nodes). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "graph/part_write.h"

gkv_err
pw__fail(struct pw *w, gkv_err rc, const char *fmt, ...)
{
    va_list ap;

    if (w->msg != NULL && w->msglen > 0) {
        va_start(ap, fmt);
        vsnprintf(w->msg, w->msglen, fmt, ap);
        va_end(ap);
    }
    return rc;
}

gkv_err
pw__from_errno(int e)
{
    switch (e) {
    case EEXIST: case ENOTEMPTY: return GKV_EEXIST;
    case ENOSPC: case EDQUOT: return GKV_EMAPFULL;
    default: return gkv__from_errno(e);
    }
}

gkv_err
pw__progress(struct pw *w, const char *stage, uint64_t done, uint64_t total)
{
    if (w->sp->progress != NULL &&
        w->sp->progress(w->sp->progress_ctx, stage, done, total) != 0)
        return pw__fail(w, GKV_EINTR, "cancelled by the progress callback "
                        "(stage '%s')", stage);
    return GKV_OK;
}

gkv_err
pw__wrote(struct pw *w, uint64_t bytes)
{
    w->bytes_done += bytes;
    return pw__progress(w, "write", w->bytes_done, w->bytes_total);
}

/* *buf with room for n elements of 'size' bytes (old contents dropped). */
void *
pw__scratch(void *bufp, size_t *cap, size_t n, size_t size)
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

/* ---- names ------------------------------------------------------------------ */

/* 1..GKV_PART_NAME_MAX printable ASCII bytes without blanks, '#' or '/'. */
int
pw__name_ok(const char *s, const char **why)
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
gkv_err
pw__fail_nodes(struct pw *w, int t, uint64_t bytes, const char *what)
{
    char note[512], c1[32], c2[32];

    dense_note(w, t, note, sizeof note);
    return pw__fail(w, GKV_ENOMEM, "out of memory for %s of %s '%s' nodes "
                    "(%s)%s", what, commas(c1, (uint64_t)w->ncount[t]),
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
    return pw__fail(w, GKV_ENOMEM, "partitioning needs at least %s for its "
                    "per-node and per-edge arrays (%s '%s' nodes take %s), "
                    "more than the %s of memory here%s", gib(c1, need),
                    commas(c3, (uint64_t)w->ncount[big]),
                    gkv_graph_ntype_name(w->g, big), gib(c2, most),
                    gib(c4, avail), note);
}

/* ---- the call ------------------------------------------------------------ */

const char *
gkv_part_method_name(gkv_part_method m)
{
    switch (m) {
    case GKV_PART_RANDOM: return "random";
    case GKV_PART_RANGE:  return "range";
    case GKV_PART_METIS:  return "metis";
    case GKV_PART_GIVEN:  return "given";
    default:              return "?";
    }
}

gkv_err
gkv_part_method_parse(const char *s, gkv_part_method *out)
{
    static const gkv_part_method all[] = {GKV_PART_RANDOM, GKV_PART_RANGE,
                                          GKV_PART_METIS, GKV_PART_GIVEN};

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
        return pw__fail(w, GKV_EINVAL, "unknown partition method %d (random, "
                        "range, metis or given)", (int)sp->method);
    if ((sp->method == GKV_PART_GIVEN) != (sp->owners != NULL))
        return pw__fail(w, GKV_EINVAL, sp->owners == NULL ?
                        "method given: the owners of the nodes are missing" :
                        "owners are for method given only");
    if (sp->num_parts < 1 || sp->num_parts > GKV_PART_MAX)
        return pw__fail(w, GKV_EINVAL, "%d partitions: need 1 to %d",
                        sp->num_parts, GKV_PART_MAX);
    if (sp->flags & ~(GKV_PART_CSR | GKV_PART_FORCE | GKV_PART_BALANCE_EDGES |
                      GKV_PART_METIS_KWAY | GKV_PART_METIS_SHEM))
        return pw__fail(w, GKV_EINVAL, "unknown flags 0x%x",
                        sp->flags & ~(GKV_PART_CSR | GKV_PART_FORCE |
                                      GKV_PART_BALANCE_EDGES |
                                      GKV_PART_METIS_KWAY |
                                      GKV_PART_METIS_SHEM));
    if (sp->metis_keep < 0 && sp->metis_keep != GKV_PART_METIS_KEEP_ALL)
        return pw__fail(w, GKV_EINVAL, "metis_keep %d: expected the "
                        "neighbours a node keeps (> 0), 0 (the default) or "
                        "GKV_PART_METIS_KEEP_ALL (%d)", sp->metis_keep,
                        GKV_PART_METIS_KEEP_ALL);
    w->name = sp->name != NULL ? sp->name : "graph";
    if (!pw__name_ok(w->name, &why))
        return pw__fail(w, GKV_EINVAL, "graph name '%s' %s", w->name, why);
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
        return pw__fail(w, GKV_ENOMEM, "out of memory");
    for (int t = 0; t < w->nnt; t++)
        total += w->ncount[t] = gkv_graph_num_nodes(w->g, t);
    for (int e = 0; e < w->net; e++)
        gkv_graph_etype_info(w->g, e, &w->einfo[e]);
    if (w->P > total)
        return pw__fail(w, GKV_EINVAL, "%d partitions, but the graph has only "
                        "%lld node%s", w->P, (long long)total,
                        total == 1 ? "" : "s");
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
        return pw__fail(w, GKV_ENOMEM, "out of memory");
    memcpy(w->out, outdir, len);
    w->out[len] = '\0';
    if (strcmp(w->out, "/") == 0)
        return pw__fail(w, GKV_EINVAL, "output directory '/' is not allowed");
    {
        /* OUT.tmp-PID and OUT.old-PID must sit beside OUT: with a last
         * component "." or ".." they would land inside it or above, and
         * the final rename fails after all the work */
        const char *last = strrchr(w->out, '/');
        last = last != NULL ? last + 1 : w->out;
        if (strcmp(last, ".") == 0 || strcmp(last, "..") == 0)
            return pw__fail(w, GKV_EINVAL, "output directory '%s' ends in "
                            "'%s'; name the directory itself", w->out, last);
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

    if ((rc = setup(w, outdir)) != GKV_OK ||
        (rc = pw__load_feats(w)) != GKV_OK ||
        (rc = pw__load_reverse(w)) != GKV_OK ||
        (rc = pw__load_masks(w)) != GKV_OK ||
        (rc = pw__check_outdir(w)) != GKV_OK)
        return rc;
    if (mkdir(w->tmp, 0755) != 0) {
        if (errno == EEXIST)
            return pw__fail(w, GKV_EEXIST, "temporary directory '%s' exists "
                            "(left by a crashed run?); remove it", w->tmp);
        return pw__fail(w, pw__from_errno(errno), "creating '%s': %s", w->tmp,
                        strerror(errno));
    }
    w->tmp_made = 1;
    if ((mp = pw__path_join(w->tmp, "mapping")) == NULL)
        return pw__fail(w, GKV_ENOMEM, "out of memory");
    if (mkdir(mp, 0755) != 0) {
        rc = pw__fail(w, pw__from_errno(errno), "creating '%s': %s", mp,
                      strerror(errno));
        gkv__free(mp);
        return rc;
    }
    gkv__free(mp);

    if ((rc = pw__assign(w, r)) != GKV_OK)
        return rc;
    for (int e = 0; e < w->net; e++)
        if ((rc = pw__number_edges(w, e)) != GKV_OK)
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
            m += pw__ecount(w, e, p);
        if (n < r->min_part_nodes) r->min_part_nodes = n;
        if (n > r->max_part_nodes) r->max_part_nodes = n;
        if (m < r->min_part_edges) r->min_part_edges = m;
        if (m > r->max_part_edges) r->max_part_edges = m;
        w->bytes_total += pw__part_bytes(w, p);
    }
    for (int t = 0; t < w->nnt; t++) {
        r->num_nodes += w->ncount[t];
        w->bytes_total += (uint64_t)w->ncount[t] * 8;
    }
    for (int e = 0; e < w->net; e++) {
        r->num_edges += w->einfo[e].num_edges;
        w->bytes_total += (uint64_t)w->einfo[e].num_edges * 8;
    }
    if ((rc = pw__progress(w, "write", 0, w->bytes_total)) != GKV_OK)
        return rc;

    for (int p = 0; p < w->P; p++)
        if ((rc = pw__write_partition(w, p)) != GKV_OK)
            return rc;
    r->edge_cut = w->edge_cut;        /* counted while scattering */
    if ((rc = pw__write_mappings(w)) != GKV_OK ||
        (rc = pw__sync_all(w)) != GKV_OK ||
        (rc = pw__write_json(w, r)) != GKV_OK)
        return rc;
    /* the last moment a cancel removes everything: syncing may have been
     * the longest stage */
    if ((rc = pw__progress(w, "sync", 1, 2)) != GKV_OK ||
        (rc = pw__publish(w)) != GKV_OK)
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
        pw__rmtree(w.tmp);
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
