/* read.c - edge list readers: text (blank- or comma-separated, comments,
 * optional edge-type and weight columns) and binary (int64 pairs plus an
 * optional float32 weight file). The syntax is in gkv_graph.h.
 *
 * Both append straight into the graph's arrays and, on any error, roll the
 * graph back to the mark taken before the first edge (graph__rollback), so
 * a failed read leaves nothing behind. */
#include <errno.h>
#include <fcntl.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "graph/graph_int.h"

#define TEXT_BUF (256u << 10)   /* bytes read at a time; > GKV_TEXT_LINE_MAX */

/* ---- files (errno is translated by gkv__from_errno) ------------------- */

/* Opens 'path' for reading. Binary files need a size, so 'regular' asks
 * for a regular file; text may also come from a pipe or a device. */
static gkv_err
open_file(gkv_graph *g, const char *path, int regular, int *fd,
          uint64_t *size)
{
    struct stat st;
    int e;

    if ((*fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
        e = errno;
        return graph__fail(g, gkv__from_errno(e), "%s: %s", path, strerror(e));
    }
    if (fstat(*fd, &st) != 0) {
        e = errno;
        close(*fd);
        *fd = -1;
        return graph__fail(g, gkv__from_errno(e), "%s: %s", path, strerror(e));
    }
    if (S_ISDIR(st.st_mode) || (regular && !S_ISREG(st.st_mode))) {
        close(*fd);
        *fd = -1;
        return graph__fail(g, GKV_EINVAL, "%s: %s", path,
                           S_ISDIR(st.st_mode) ? "is a directory"
                                               : "is not a regular file");
    }
    *size = (uint64_t)st.st_size;
    return GKV_OK;
}

/* Reads up to 'len' bytes (fewer only at end of file). */
static ssize_t
read_full(int fd, void *buf, size_t len)
{
    size_t got = 0;

    while (got < len) {
        ssize_t r = read(fd, (char *)buf + got, len - got);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (r == 0)
            break;
        got += (size_t)r;
    }
    return (ssize_t)got;
}

/* ---- text ------------------------------------------------------------- */

struct field {
    const char *p;
    size_t len;
};

struct text_rd {
    gkv_graph *g;
    const char *name;      /* for messages */
    int etype;             /* every edge's type, or GKV_ETYPE_COLUMN */
    unsigned flags;
    int64_t line;          /* number of the line being parsed, from 1 */
    int header_left;       /* 1 until the header line has been skipped */
    int last_et;           /* etype of the previous line (lookup cache) */
};

static int
is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

/* Splits [p, end) into fields (see gkv_graph.h). Returns the number of
 * fields (counting past 'max' without storing them), or -1 for an empty
 * field. */
static int
split(const char *p, const char *end, struct field *f, int max)
{
    int n = 0;

    while (p < end && is_blank(*p))
        p++;
    if (p == end)
        return 0;
    for (;;) {
        const char *s = p;
        while (p < end && !is_blank(*p) && *p != ',')
            p++;
        if (p == s)
            return -1;                   /* a comma where a field belongs */
        if (n < max) {
            f[n].p = s;
            f[n].len = (size_t)(p - s);
        }
        n++;
        while (p < end && is_blank(*p))
            p++;
        if (p < end && *p == ',') {
            p++;
            while (p < end && is_blank(*p))
                p++;
            if (p == end)
                return -1;               /* trailing comma */
        } else if (p == end) {
            return n;
        }
    }
}

/* Parses a node ID: 0 when good, 1 not a number, 2 negative, 3 too big. */
static int
parse_id(const struct field *f, int64_t *out)
{
    const char *p = f->p, *end = f->p + f->len;
    uint64_t v = 0;
    int neg = 0;

    if (p < end && *p == '-') {
        neg = 1;
        p++;
    }
    if (p == end)
        return 1;
    for (; p < end; p++) {
        unsigned d = (unsigned)(unsigned char)*p - '0';
        if (d > 9)
            return 1;
        if (v > ((uint64_t)INT64_MAX - d) / 10)
            v = (uint64_t)INT64_MAX + 1;    /* saturate; keep checking digits */
        else
            v = v * 10 + d;
    }
    if (neg)
        return v == 0 ? (*out = 0, 0) : 2;
    if (v > (uint64_t)INT64_MAX)
        return 3;
    *out = (int64_t)v;
    return 0;
}

/* The C locale, for strtof_l: weights read the same in any locale. */
static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;
static locale_t c_locale;

static void
c_locale_init(void)
{
    c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
}

/* Parses an edge weight: 0 when good, 1 not a finite number, 2 negative
 * (the weighted sampler refuses such a graph; -0 is fine). */
static int
parse_weight(const struct field *f, float *out)
{
    char buf[GKV_TEXT_LINE_MAX + 1], *e;    /* a field is within a line */
    float v;

    if (f->len == 0 || f->len >= sizeof buf)
        return 1;
    memcpy(buf, f->p, f->len);
    buf[f->len] = '\0';
    pthread_once(&c_locale_once, c_locale_init);
    v = c_locale != (locale_t)0 ? strtof_l(buf, &e, c_locale)
                                : strtof(buf, &e);
    /* Overflow gives an infinity; ERANGE also flags subnormal results,
     * which are finite weights like any other. */
    if (e != buf + f->len || !isfinite(v))
        return 1;
    if (v < 0.0f)
        return 2;
    *out = v;
    return 0;
}

/* The etype a field names (canonical or a unique relation). */
static gkv_err
lookup_etype(struct text_rd *r, const struct field *f, int *out)
{
    gkv_graph *g = r->g;
    int canon = memchr(f->p, ':', f->len) != NULL;
    char show[64];

    if (r->last_et >= 0) {
        const struct graph_etype *et = &g->g_et[r->last_et];
        const char *s = canon ? et->et_canon : et->et_rel;
        if (strlen(s) == f->len && memcmp(s, f->p, f->len) == 0 &&
            (canon || et->et_rel_unique)) {
            *out = r->last_et;
            return GKV_OK;
        }
    }
    for (int i = 0; i < g->g_net; i++) {
        const struct graph_etype *et = &g->g_et[i];
        const char *s = canon ? et->et_canon : et->et_rel;
        if (strlen(s) != f->len || memcmp(s, f->p, f->len) != 0)
            continue;
        if (!canon && !et->et_rel_unique)
            return graph__fail(g, GKV_EFORMAT, "%s:%lld: relation '%s' "
                               "belongs to several edge types; write it as "
                               "src:%s:dst", r->name, (long long)r->line,
                               et->et_rel, et->et_rel);
        *out = r->last_et = i;
        return GKV_OK;
    }
    return graph__fail(g, GKV_ENOTFOUND, "%s:%lld: unknown edge type '%s'",
                       r->name, (long long)r->line,
                       graph__show(show, f->p, f->len));
}

static gkv_err
check_node(struct text_rd *r, const struct field *f, const char *which,
           int nt_idx, int64_t *id)
{
    gkv_graph *g = r->g;
    struct graph_ntype *nt = &g->g_nt[nt_idx];
    char show[64];

    switch (parse_id(f, id)) {
    case 1:
        return graph__fail(g, GKV_EFORMAT, "%s:%lld: %s '%s' is not a node "
                           "ID", r->name, (long long)r->line, which,
                           graph__show(show, f->p, f->len));
    case 2:
        return graph__fail(g, GKV_ERANGE, "%s:%lld: %s %s is negative",
                           r->name, (long long)r->line, which,
                           graph__show(show, f->p, f->len));
    case 3:
        return graph__fail(g, GKV_ERANGE, "%s:%lld: %s %s is too large",
                           r->name, (long long)r->line, which,
                           graph__show(show, f->p, f->len));
    }
    if (nt->nt_grow) {
        if (*id == INT64_MAX)           /* the count, *id + 1, won't fit */
            return graph__fail(g, GKV_ERANGE, "%s:%lld: %s %lld is too "
                               "large for the growing node type '%s' (at "
                               "most 2^63 - 1 nodes)", r->name,
                               (long long)r->line, which, (long long)*id,
                               nt->nt_name);
        if (*id >= nt->nt_count)
            nt->nt_count = *id + 1;
    } else if (*id >= nt->nt_count) {
        return graph__fail(g, GKV_ERANGE, "%s:%lld: %s %lld is not below "
                           "%lld, the number of '%s' nodes", r->name,
                           (long long)r->line, which, (long long)*id,
                           (long long)nt->nt_count, nt->nt_name);
    }
    return GKV_OK;
}

/* Parses one line (without its newline) and appends its edge. */
static gkv_err
text_line(struct text_rd *r, const char *p, size_t len)
{
    gkv_graph *g = r->g;
    const char *hash = memchr(p, '#', len);
    const char *end = hash != NULL ? hash : p + len;
    int want = 2 + (r->etype == GKV_ETYPE_COLUMN) +
               ((r->flags & GKV_TEXT_WEIGHT) != 0);
    struct field f[4];
    struct graph_etype *et;
    int64_t s, d;
    float w = 1.0f;
    int nf, wr, e = r->etype;
    gkv_err rc;
    char show[64];

    if (len > GKV_TEXT_LINE_MAX)
        return graph__fail(g, GKV_EFORMAT, "%s:%lld: line is longer than %d "
                           "bytes", r->name, (long long)r->line,
                           GKV_TEXT_LINE_MAX);
    if ((nf = split(p, end, f, 4)) == 0)
        return GKV_OK;                           /* blank or comment */
    if (r->header_left) {
        r->header_left = 0;
        return GKV_OK;
    }
    if (nf < 0)
        return graph__fail(g, GKV_EFORMAT, "%s:%lld: empty field (two commas "
                           "in a row, or a comma at the start or end)",
                           r->name, (long long)r->line);
    if (nf != want)
        return graph__fail(g, GKV_EFORMAT, "%s:%lld: expected %d fields "
                           "(src dst%s%s), found %d", r->name,
                           (long long)r->line, want,
                           r->etype == GKV_ETYPE_COLUMN ? " etype" : "",
                           (r->flags & GKV_TEXT_WEIGHT) ? " weight" : "", nf);
    if (e == GKV_ETYPE_COLUMN && (rc = lookup_etype(r, &f[2], &e)) != GKV_OK)
        return rc;
    et = &g->g_et[e];
    if ((rc = check_node(r, &f[0], "src", et->et_src, &s)) != GKV_OK ||
        (rc = check_node(r, &f[1], "dst", et->et_dst, &d)) != GKV_OK)
        return rc;
    if ((r->flags & GKV_TEXT_WEIGHT) &&
        (wr = parse_weight(&f[want - 1], &w)) != 0)
        return graph__fail(g, GKV_EFORMAT, "%s:%lld: weight '%s' is %s",
                           r->name, (long long)r->line,
                           graph__show(show, f[want - 1].p, f[want - 1].len),
                           wr == 2 ? "negative (weights must be 0 or more)"
                                   : "not a finite number");
    if (et->et_n == et->et_cap ||
        ((r->flags & GKV_TEXT_WEIGHT) && et->et_w == NULL)) {
        rc = graph__reserve(g, e, 1, (r->flags & GKV_TEXT_WEIGHT) != 0);
        if (rc != GKV_OK)
            return graph__fail(g, rc, "%s:%lld: out of memory after %lld "
                               "edges of type '%s'", r->name,
                               (long long)r->line, (long long)et->et_n,
                               et->et_canon);
    }
    et->et_srcv[et->et_n] = s;
    et->et_dstv[et->et_n] = d;
    if (et->et_w != NULL)
        et->et_w[et->et_n] = w;
    et->et_n++;
    return GKV_OK;
}

/* Parses every complete line in [p, p + len); *used gets the bytes taken.
 * At end of input ('eof') the rest is the last line. */
static gkv_err
text_lines(struct text_rd *r, const char *p, size_t len, int eof,
           size_t *used)
{
    const char *s = p, *end = p + len, *nl;
    gkv_err rc;

    *used = 0;
    if (len == 0)
        return GKV_OK;           /* p may be NULL then */
    while ((nl = memchr(s, '\n', (size_t)(end - s))) != NULL) {
        r->line++;
        if ((rc = text_line(r, s, (size_t)(nl - s))) != GKV_OK)
            return rc;
        s = nl + 1;
    }
    if (eof && s < end) {
        r->line++;
        if ((rc = text_line(r, s, (size_t)(end - s))) != GKV_OK)
            return rc;
        s = end;
    }
    *used = (size_t)(s - p);
    return GKV_OK;
}

/* Checks the arguments common to both text readers and takes the mark. */
static gkv_err
text_begin(gkv_graph *g, struct text_rd *r, const char *name, int etype,
           unsigned flags, graph_mark *mk)
{
    memset(r, 0, sizeof *r);
    if (etype != GKV_ETYPE_COLUMN && (etype < 0 || etype >= g->g_net))
        return graph__fail(g, GKV_EINVAL, "%s: no edge type %d", name, etype);
    if (flags & ~(GKV_TEXT_WEIGHT | GKV_TEXT_HEADER))
        return graph__fail(g, GKV_EINVAL, "%s: unknown flags 0x%x", name,
                           flags & ~(GKV_TEXT_WEIGHT | GKV_TEXT_HEADER));
    if (graph__mark(g, mk) != GKV_OK)
        return graph__fail(g, GKV_ENOMEM, "out of memory");
    r->g = g;
    r->name = name;
    r->etype = etype;
    r->flags = flags;
    r->header_left = (flags & GKV_TEXT_HEADER) != 0;
    r->last_et = -1;
    return GKV_OK;
}

gkv_err
gkv_graph_read_text_mem(gkv_graph *g, const char *name, const void *buf,
                        size_t len, int etype, unsigned flags)
{
    struct text_rd r;
    graph_mark mk;
    size_t used;
    gkv_err rc;

    if (g == NULL)
        return GKV_EINVAL;
    graph__clear(g);
    if (name == NULL)
        name = "(memory)";
    if (buf == NULL && len > 0)
        return graph__fail(g, GKV_EINVAL, "%s: NULL buffer", name);
    if ((rc = text_begin(g, &r, name, etype, flags, &mk)) != GKV_OK)
        return rc;
    rc = text_lines(&r, buf, len, 1, &used);
    if (rc != GKV_OK)
        graph__rollback(g, &mk);
    graph__mark_free(&mk);
    return rc;
}

gkv_err
gkv_graph_read_text(gkv_graph *g, const char *path, int etype, unsigned flags)
{
    struct text_rd r;
    graph_mark mk = {0};
    char *buf = NULL;
    size_t have = 0, used;
    uint64_t size;
    int fd = -1, marked = 0;
    gkv_err rc;

    if (g == NULL)
        return GKV_EINVAL;
    graph__clear(g);
    if (path == NULL)
        return graph__fail(g, GKV_EINVAL, "NULL path");
    if ((rc = text_begin(g, &r, path, etype, flags, &mk)) != GKV_OK)
        return rc;
    marked = 1;
    if ((rc = open_file(g, path, 0, &fd, &size)) != GKV_OK)
        goto out;
    if ((buf = gkv__malloc(TEXT_BUF)) == NULL) {
        rc = graph__fail(g, GKV_ENOMEM, "out of memory");
        goto out;
    }
    for (;;) {
        ssize_t got = read(fd, buf + have, TEXT_BUF - have);
        if (got < 0) {
            int e = errno;
            if (e == EINTR)
                continue;
            rc = graph__fail(g, gkv__from_errno(e), "%s: after line %lld: %s",
                             path, (long long)r.line, strerror(e));
            goto out;
        }
        have += (size_t)got;
        if ((rc = text_lines(&r, buf, have, got == 0, &used)) != GKV_OK)
            goto out;
        memmove(buf, buf + used, have - used);
        have -= used;
        if (got == 0)
            break;
        if (have > GKV_TEXT_LINE_MAX) {          /* no newline in sight */
            rc = graph__fail(g, GKV_EFORMAT, "%s:%lld: line is longer than "
                             "%d bytes", path, (long long)r.line + 1,
                             GKV_TEXT_LINE_MAX);
            goto out;
        }
    }
    rc = GKV_OK;
out:
    if (rc != GKV_OK && marked)
        graph__rollback(g, &mk);
    graph__mark_free(&mk);
    gkv__free(buf);
    if (fd >= 0)
        close(fd);
    return rc;
}

/* ---- binary ----------------------------------------------------------- */

static int64_t
le64(const unsigned char *p)
{
    uint64_t v = 0;

    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return (int64_t)v;
}

static float
le32f(const unsigned char *p)
{
    uint32_t v = (uint32_t)p[0] | (uint32_t)p[1] << 8 |
                 (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    float f;

    memcpy(&f, &v, sizeof f);
    return f;
}

#define BIN_EDGES 65536   /* edges read at a time */

gkv_err
gkv_graph_read_binary(gkv_graph *g, int etype, const char *path,
                      const char *weight_path)
{
    struct graph_etype *et;
    struct graph_ntype *ns, *nd;
    graph_mark mk = {0};
    unsigned char *buf = NULL, *wbuf = NULL;
    uint64_t size, wsize, nedges, done = 0;
    int fd = -1, wfd = -1, marked = 0;
    gkv_err rc;

    if (g == NULL)
        return GKV_EINVAL;
    graph__clear(g);
    if (path == NULL)
        return graph__fail(g, GKV_EINVAL, "NULL path");
    if (etype < 0 || etype >= g->g_net)
        return graph__fail(g, GKV_EINVAL, "%s: no edge type %d", path, etype);
    et = &g->g_et[etype];
    ns = &g->g_nt[et->et_src];
    nd = &g->g_nt[et->et_dst];
    if ((rc = open_file(g, path, 1, &fd, &size)) != GKV_OK)
        goto out;
    /* Sizes first: nothing is allocated for a file of the wrong shape. */
    if (size % 8 != 0) {
        rc = graph__fail(g, GKV_EFORMAT, "%s: %llu bytes is not a whole "
                         "number of int64 values (%llu left over)", path,
                         (unsigned long long)size,
                         (unsigned long long)(size % 8));
        goto out;
    }
    if (size % 16 != 0) {
        rc = graph__fail(g, GKV_EFORMAT, "%s: %llu int64 values is an odd "
                         "number: edge %llu has a src but no dst (truncated?)",
                         path, (unsigned long long)(size / 8),
                         (unsigned long long)(size / 16));
        goto out;
    }
    nedges = size / 16;
    if (weight_path != NULL) {
        if ((rc = open_file(g, weight_path, 1, &wfd, &wsize)) != GKV_OK)
            goto out;
        if (wsize != nedges * 4) {
            rc = graph__fail(g, GKV_EFORMAT, "%s: %llu bytes, but %s holds "
                             "%llu edges and needs %llu bytes of float32 "
                             "weights", weight_path,
                             (unsigned long long)wsize, path,
                             (unsigned long long)nedges,
                             (unsigned long long)nedges * 4);
            goto out;
        }
    }
    if ((rc = graph__mark(g, &mk)) != GKV_OK) {
        rc = graph__fail(g, rc, "out of memory");
        goto out;
    }
    marked = 1;
    if (nedges > (uint64_t)INT64_MAX / 2 ||
        (rc = graph__reserve(g, etype, (int64_t)nedges,
                             weight_path != NULL)) != GKV_OK ||
        (buf = gkv__malloc(BIN_EDGES * 16)) == NULL ||
        (weight_path != NULL && (wbuf = gkv__malloc(BIN_EDGES * 4)) == NULL)) {
        rc = graph__fail(g, GKV_ENOMEM, "%s: no memory for %llu edges", path,
                         (unsigned long long)nedges);
        goto out;
    }
    while (done < nedges) {
        size_t k = nedges - done < BIN_EDGES ? (size_t)(nedges - done)
                                             : BIN_EDGES;
        ssize_t got = read_full(fd, buf, k * 16);
        if (got < 0 || (size_t)got != k * 16) {
            int e = got < 0 ? errno : 0;
            rc = graph__fail(g, e ? gkv__from_errno(e) : GKV_EIO, "%s: %s at "
                             "byte %llu", path, e ? strerror(e) :
                             "file shrank while being read",
                             (unsigned long long)done * 16);
            goto out;
        }
        if (wbuf != NULL) {
            got = read_full(wfd, wbuf, k * 4);
            if (got < 0 || (size_t)got != k * 4) {
                int e = got < 0 ? errno : 0;
                rc = graph__fail(g, e ? gkv__from_errno(e) : GKV_EIO, "%s: %s at "
                                 "byte %llu", weight_path, e ? strerror(e) :
                                 "file shrank while being read",
                                 (unsigned long long)done * 4);
                goto out;
            }
        }
        for (size_t i = 0; i < k; i++) {
            uint64_t idx = done + i;
            int64_t s = le64(buf + 16 * i), d = le64(buf + 16 * i + 8);
            const struct graph_ntype *bad = NULL;
            const char *which = NULL;
            int64_t v = 0;

            /* a growing type's count, ID + 1, must fit: ID < INT64_MAX */
            if (s < 0 || s >= (ns->nt_grow ? INT64_MAX : ns->nt_count)) {
                bad = ns; which = "src"; v = s;
            } else if (d < 0 ||
                       d >= (nd->nt_grow ? INT64_MAX : nd->nt_count)) {
                bad = nd; which = "dst"; v = d;
            }
            if (bad != NULL) {
                if (v < 0)
                    rc = graph__fail(g, GKV_ERANGE, "%s: edge %llu (byte "
                                     "%llu): %s %lld is negative", path,
                                     (unsigned long long)idx,
                                     (unsigned long long)idx * 16, which,
                                     (long long)v);
                else if (bad->nt_grow)
                    rc = graph__fail(g, GKV_ERANGE, "%s: edge %llu (byte "
                                     "%llu): %s %lld is too large for the "
                                     "growing node type '%s' (at most "
                                     "2^63 - 1 nodes)", path,
                                     (unsigned long long)idx,
                                     (unsigned long long)idx * 16, which,
                                     (long long)v, bad->nt_name);
                else
                    rc = graph__fail(g, GKV_ERANGE, "%s: edge %llu (byte "
                                     "%llu): %s %lld is not below %lld, the "
                                     "number of '%s' nodes", path,
                                     (unsigned long long)idx,
                                     (unsigned long long)idx * 16, which,
                                     (long long)v, (long long)bad->nt_count,
                                     bad->nt_name);
                goto out;
            }
            if (ns->nt_grow && s >= ns->nt_count)
                ns->nt_count = s + 1;
            if (nd->nt_grow && d >= nd->nt_count)
                nd->nt_count = d + 1;
            et->et_srcv[et->et_n] = s;
            et->et_dstv[et->et_n] = d;
            if (et->et_w != NULL) {
                float w = wbuf != NULL ? le32f(wbuf + 4 * i) : 1.0f;
                if (!isfinite(w) || w < 0.0f) {
                    rc = graph__fail(g, GKV_EFORMAT, "%s: weight %llu (byte "
                                     "%llu) is %g, %s", weight_path,
                                     (unsigned long long)idx,
                                     (unsigned long long)idx * 4, (double)w,
                                     isfinite(w) ? "negative (weights must be "
                                     "0 or more)" : "not a finite number");
                    goto out;
                }
                et->et_w[et->et_n] = w;
            }
            et->et_n++;
        }
        done += k;
    }
    rc = GKV_OK;
out:
    if (rc != GKV_OK && marked)
        graph__rollback(g, &mk);
    graph__mark_free(&mk);
    gkv__free(buf);
    gkv__free(wbuf);
    if (fd >= 0)
        close(fd);
    if (wfd >= 0)
        close(wfd);
    return rc;
}
