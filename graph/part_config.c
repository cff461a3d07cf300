/* part_config.c - the partitioner's step 5 (see part_write.c): the
 * mapping files (.npy of the new IDs) and the JSON config (doc/FORMAT.md,
 * "Partitions"). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <jansson.h>
#include "graph/part_write.h"

/* ---- mapping files ------------------------------------------------------ */

/* Writes int64[n] to 'rel' under the temporary directory as .npy: the
 * array 'v', or the identity 0..n-1 when v is NULL. */
static gkv_err
write_npy_i64(struct pw *w, const char *rel, const int64_t *v, int64_t n)
{
    char *path = pw__path_join(w->tmp, rel), why[256];
    int64_t *buf = NULL;
    uint64_t shape[1] = {(uint64_t)n};
    size_t hl = 0;
    gkv_err rc = GKV_OK;
    int fd = -1;

    if (path == NULL)
        return pw__fail(w, GKV_ENOMEM, "out of memory");
    if ((fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644)) < 0) {
        rc = pw__fail(w, pw__from_errno(errno), "creating '%s': %s", path,
                      strerror(errno));
        goto out;
    }
    why[0] = '\0';
    if ((rc = gkv_npy_write_header(fd, GKV_I64, 1, shape, &hl, why,
                                   sizeof why)) != GKV_OK) {
        rc = pw__fail(w, rc, "writing '%s': %s", path, why);
        goto out;
    }
    if (v == NULL && n > 0 &&
        (buf = gkv__malloc(SLICE_BYTES / 8 * sizeof *buf)) == NULL) {
        rc = pw__fail(w, GKV_ENOMEM, "out of memory");
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
        if (pw__write_all(fd, src, (size_t)(b - a) * sizeof *src) != 0) {
            rc = pw__fail(w, pw__from_errno(errno), "writing '%s': %s", path,
                          strerror(errno));
            goto out;
        }
        if ((rc = pw__wrote(w, (uint64_t)(b - a) * 8)) != GKV_OK)
            goto out;
        a = b;
    }
    if (close(fd) != 0) {
        fd = -1;
        rc = pw__fail(w, pw__from_errno(errno), "writing '%s': %s", path,
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

gkv_err
pw__write_mappings(struct pw *w)
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

/* ---- the JSON config --------------------------------------------------- */

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

int64_t
pw__ecount(const struct pw *w, int et, int p)
{
    int d = w->einfo[et].dst_ntype;

    return w->eptr[et][nlo(w, d, p + 1)] - w->eptr[et][nlo(w, d, p)];
}

gkv_err
pw__write_json(struct pw *w, const gkv_part_report *r)
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
            int64_t n = pw__ecount(w, e, p);
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
        rc = pw__fail(w, GKV_ENOMEM, "out of memory building the JSON config");
        goto out;
    }
    snprintf(key, sizeof key, "%s.json", w->name);
    if ((path = pw__path_join(w->tmp, key)) == NULL) {
        rc = pw__fail(w, GKV_ENOMEM, "out of memory");
        goto out;
    }
    if ((fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644)) < 0 ||
        pw__write_all(fd, text, strlen(text)) != 0 ||
        pw__write_all(fd, "\n", 1) != 0 ||
        fsync(fd) != 0) {
        rc = pw__fail(w, pw__from_errno(errno), "writing '%s': %s", path,
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
