/* job.c - kvctl --ip-config FILE: the whole job's view of its tensors,
 * machine by machine. ops_server.c reads what each machine's store holds
 * from the machine's server 0 (the servers of a machine share one store)
 * into c->jm; from that this file says which machine holds which rows,
 * which rows no machine holds, and lists every tensor once for ls. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvctl.h"
#include "ops.h"
#include "util.h"

static const gkv_tensor_desc *
jm_find(const struct jobmach *j, const char *name)
{
    for (size_t i = 0; i < j->nt; i++)
        if (strcmp(j->t[i].name, name) == 0)
            return &j->t[i];
    return NULL;
}

/* One machine's rows of a tensor. */
struct jspan {
    uint64_t lo, hi;
    size_t m;
};

/* The machines' ranges of tensor 'name', sorted by lo (the job's client
 * has checked that they are disjoint): a malloc'd array of *n, NULL when
 * no machine holds it. *rows gets the rows they hold together. */
static struct jspan *
job_spans(const struct ctx *c, const char *name, size_t *n, uint64_t *rows)
{
    struct jspan *sp = malloc((c->nmach ? c->nmach : 1) * sizeof *sp);

    *n = 0;
    *rows = 0;
    if (sp == NULL)
        return NULL;
    for (size_t m = 0; m < c->nmach; m++) {
        const gkv_tensor_desc *d = jm_find(&c->jm[m], name);
        size_t i;

        if (d == NULL)
            continue;
        for (i = *n; i > 0 && sp[i - 1].lo > d->lo; i--)
            sp[i] = sp[i - 1];
        sp[i] = (struct jspan){d->lo, d->hi, m};
        (*n)++;
        *rows += d->hi - d->lo;
    }
    if (*n == 0) {
        free(sp);
        return NULL;
    }
    return sp;
}

/* "machine 0 at ADDR [0, 50), machine 1 at ADDR none" */
void
kvctl__job_holders_str(const struct ctx *c, const char *name, char *buf,
                       size_t len)
{
    size_t o = 0;

    buf[0] = '\0';
    for (size_t m = 0; m < c->nmach && o < len; m++) {
        const gkv_tensor_desc *d = jm_find(&c->jm[m], name);

        if (d != NULL)
            o += (size_t)snprintf(buf + o, len - o, "%smachine %zu at %s [%"
                                  PRIu64 ", %" PRIu64 ")", m ? ", " : "", m,
                                  c->jm[m].addr, d->lo, d->hi);
        else
            o += (size_t)snprintf(buf + o, len - o, "%smachine %zu at %s "
                                  "none", m ? ", " : "", m, c->jm[m].addr);
    }
}

/* The type count a graph job's feature must span: node/NTYPE/NAME holds
 * [0, nodes of NTYPE), edge/SRC:REL:DST/NAME [0, edges of the type).
 * 1 with *count and *what ("nodes of type '_N'") set; 0 for any other
 * tensor or a job without a partitioned graph. */
static int
graph_span(const struct ctx *c, const char *name, uint64_t *count, char *what,
           size_t len)
{
    const gkv_pbook *b = gkv_client_pbook(c->cl);
    char type[GKV_NAME_MAX + 1];
    int node;
    int64_t k;

    if (b == NULL || !kvctl__graph_type(name, &node, type) ||
        (k = kvctl__type_count(b, node, type)) < 0)
        return 0;
    *count = (uint64_t)k;
    snprintf(what, len, "%s of type '%s'", node ? "nodes" : "edges", type);
    return 1;
}

/* Before an export of rows [a, b) of tensor d from the whole job: fails,
 * naming every machine and what it holds, when some of those rows are held
 * by no machine, or when a partitioned graph's feature does not span its
 * type (a machine whose partition should hold some of it does not); notes
 * on stderr that some machines hold none of a tensor others split. */
int
kvctl__job_check(struct ctx *c, const char *verb, const gkv_tensor_desc *d,
                 uint64_t a, uint64_t b)
{
    char holders[2048], what[GKV_NAME_MAX + 32];
    uint64_t rows, count;
    struct jspan *sp;
    size_t n;
    int ex = EX_OK;

    if ((sp = job_spans(c, d->name, &n, &rows)) == NULL)
        return kvctl__fail("%s: tensor '%s': %s: no machine of '%s' holds it",
                           verb, d->name, gkv_strerror(GKV_ENOTFOUND), c->ipc);
    kvctl__job_holders_str(c, d->name, holders, sizeof holders);
    if (graph_span(c, d->name, &count, what, sizeof what) &&
        (d->lo != 0 || d->hi != count || rows != count)) {
        ex = kvctl__fail("%s: tensor '%s' is inconsistent across the job: the %"
                         PRIu64 " %s need rows [0, %" PRIu64 "), but the "
                         "machines hold %" PRIu64 " rows: %s", verb, d->name,
                         count, what, count, rows, holders);
        goto out;
    }
    for (size_t i = 1; i < n; i++) {
        uint64_t g0 = sp[i - 1].hi, g1 = sp[i].lo;

        if (g0 < g1 && g0 < b && g1 > a) {
            ex = kvctl__fail("%s: tensor '%s' is inconsistent across the job: "
                             "no machine holds rows [%" PRIu64 ", %" PRIu64
                             "): %s", verb, d->name, g0, g1, holders);
            goto out;
        }
    }
    if (n < c->nmach && n > 1)
        tools__note("note: tensor '%s' is held by %zu of the %zu machines: %s",
                    d->name, n, c->nmach, holders);
out:
    free(sp);
    return ex;
}

/* The tensor 'name' names: itself, or for a state companion (T#adam_m)
 * its tensor, whose rows it has on every machine (the machines' lists
 * hold no companions). Into buf (GKV_NAME_MAX + 1 bytes). */
const char *
kvctl__base_name(const char *name, char *buf)
{
    snprintf(buf, GKV_NAME_MAX + 1, "%s", name);
    buf[strcspn(buf, "#")] = '\0';
    return buf;
}

/* With --ip-config: the rows the machines hold of tensor d and how many
 * machines hold it; else hi - lo (and 0). */
uint64_t
kvctl__job_rows(const struct ctx *c, const gkv_tensor_desc *d, size_t *holders)
{
    uint64_t rows = d->hi - d->lo, held;
    char base[GKV_NAME_MAX + 1];
    struct jspan *sp;

    *holders = 0;
    if (c->ipc != NULL &&
        (sp = job_spans(c, kvctl__base_name(d->name, base), holders, &held)) !=
        NULL) {
        rows = held;
        free(sp);
    }
    return rows;
}

static int
name_cmp(const void *a, const void *b)
{
    return strcmp(((const gkv_tensor_desc *)a)->name,
                  ((const gkv_tensor_desc *)b)->name);
}

/* ls with --ip-config: every tensor of every machine's list, once, with
 * the range from the lowest to the highest ID a machine holds (lo, hi) and
 * the rows they hold together. Built from the machines' lists rather than
 * the job client's, which refuses the whole list for one tensor the
 * machines disagree on, such as a partition's own graph structure
 * (csc/...: each partition's local IDs, so the machines' ranges overlap);
 * such a tensor is listed with what is wrong in 'why' ("" when whole).
 * *out: a malloc'd array of *n sorted by name. */
int
kvctl__job_list(struct ctx *c, struct kvctl_lsrow **out, size_t *n)
{
    gkv_tensor_desc *all;
    struct kvctl_lsrow *v;
    size_t total = 0, k = 0;

    *out = NULL;
    *n = 0;
    for (size_t m = 0; m < c->nmach; m++)
        total += c->jm[m].nt;
    if ((all = malloc((total ? total : 1) * sizeof *all)) == NULL ||
        (v = calloc(total ? total : 1, sizeof *v)) == NULL) {
        free(all);
        return kvctl__fail("out of memory");
    }
    total = 0;
    for (size_t m = 0; m < c->nmach; m++)
        for (size_t i = 0; i < c->jm[m].nt; i++)
            all[total++] = c->jm[m].t[i];
    qsort(all, total, sizeof *all, name_cmp);
    for (size_t i = 0; i < total; i++) {
        struct kvctl_lsrow *t;
        struct jspan *sp;
        size_t ns;

        if (i > 0 && strcmp(all[i].name, all[i - 1].name) == 0) {
            t = &v[k - 1];
            if (all[i].dtype != t->d.dtype || all[i].ndim != t->d.ndim ||
                all[i].row_bytes != t->d.row_bytes ||
                memcmp(all[i].shape, t->d.shape,
                       all[i].ndim * sizeof all[i].shape[0]) != 0)
                t->why = "rows differ";
            continue;
        }
        t = &v[k++];
        t->d = all[i];
        t->why = "";
        if ((sp = job_spans(c, t->d.name, &ns, &t->rows)) == NULL)
            continue;
        t->held = ns;
        t->d.lo = sp[0].lo;
        t->d.hi = sp[0].hi;
        for (size_t j = 1; j < ns; j++) {
            if (sp[j].lo < sp[j - 1].hi)
                t->why = "overlapping ranges";
            if (sp[j].hi > t->d.hi)
                t->d.hi = sp[j].hi;
        }
        free(sp);
    }
    free(all);
    *out = v;
    *n = k;
    return EX_OK;
}

/* info with --ip-config: what each machine holds, and any IDs of [lo, hi)
 * that none holds. */
void
kvctl__job_info(const struct ctx *c, const gkv_tensor_desc *d, json_t *o)
{
    json_t *a = o != NULL ? json_array() : NULL;
    uint64_t rows;
    size_t n;
    char base[GKV_NAME_MAX + 1];
    struct jspan *sp = job_spans(c, kvctl__base_name(d->name, base), &n, &rows);

    if (o == NULL)
        printf("machines:    %zu of %zu hold it\n", n, c->nmach);
    for (size_t m = 0; m < c->nmach; m++) {
        const gkv_tensor_desc *t = jm_find(&c->jm[m], base);

        if (o != NULL) {
            json_t *e = json_object();
            json_object_set_new(e, "machine", kvctl__json_u64(m));
            json_object_set_new(e, "server", json_string(c->jm[m].addr));
            json_object_set_new(e, "lo",
                                t ? kvctl__json_u64(t->lo) : json_null());
            json_object_set_new(e, "hi",
                                t ? kvctl__json_u64(t->hi) : json_null());
            json_object_set_new(e, "rows",
                                kvctl__json_u64(t ? t->hi - t->lo : 0));
            json_array_append_new(a, e);
        } else if (t != NULL) {
            printf("  machine %zu: %s [%" PRIu64 ", %" PRIu64 ") %" PRIu64
                   " rows\n", m, c->jm[m].addr, t->lo, t->hi, t->hi - t->lo);
        } else {
            printf("  machine %zu: %s -\n", m, c->jm[m].addr);
        }
    }
    if (o != NULL) {
        json_t *g = json_array();
        for (size_t i = 1; i < n; i++)
            if (sp[i - 1].hi < sp[i].lo) {
                json_t *r = json_array();
                json_array_append_new(r, kvctl__json_u64(sp[i - 1].hi));
                json_array_append_new(r, kvctl__json_u64(sp[i].lo));
                json_array_append_new(g, r);
            }
        json_object_set_new(o, "machines", a);
        json_object_set_new(o, "gaps", g);
    } else {
        for (size_t i = 1; i < n; i++)
            if (sp[i - 1].hi < sp[i].lo)
                printf("  no machine holds [%" PRIu64 ", %" PRIu64 ")\n",
                       sp[i - 1].hi, sp[i].lo);
    }
    free(sp);
}

/* --ip-config, --orig-ids into an existing tensor d: every mapped ID is
 * held by some machine (the IDs may skip the rows no machine holds). */
int
kvctl__job_ids_held(const struct ctx *c, const gkv_tensor_desc *d,
                    const struct origmap *om)
{
    char holders[2048];
    struct jspan *sp;
    uint64_t rows;
    size_t n;

    if ((sp = job_spans(c, d->name, &n, &rows)) == NULL)
        return kvctl__fail("import: tensor '%s': no machine of '%s' holds it",
                           d->name, c->ipc);
    for (uint64_t i = 0; i < om->n; i++) {
        uint64_t id = kvctl__origmap_at(om, i);
        size_t lo = 0, hi = n;

        while (lo < hi) {                /* the last span starting <= id */
            size_t mid = (lo + hi) / 2;
            if (sp[mid].lo <= id)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo == 0 || id >= sp[lo - 1].hi) {
            free(sp);
            kvctl__job_holders_str(c, d->name, holders, sizeof holders);
            return kvctl__fail("import: --orig-ids '%s': %s: new ID %" PRIu64
                               " (of the file's row %" PRIu64 ") is held by no "
                               "machine: %s", c->opt[O_ORIG_IDS],
                               gkv_strerror(GKV_ERANGE), id, i, holders);
        }
    }
    free(sp);
    return EX_OK;
}
