/* part_load.c - the partitioner's inputs beyond the graph, read and
 * checked before anything is written (step 1 of part_write.c): features
 * (in memory or mapped .npy files), reverse edge-type pairs and training
 * masks. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "graph/part_write.h"

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

gkv_err
pw__load_feats(struct pw *w)
{
    const gkv_part_spec *sp = w->sp;
    char why[512];
    gkv_err rc;

    if (sp->nfeats == 0 && sp->nreverse == 0)
        return GKV_OK;
    if (sp->feats == NULL && sp->nfeats > 0)
        return pw__fail(w, GKV_EINVAL, "%zu features but no feature array",
                        sp->nfeats);
    if (sp->reverse == NULL && sp->nreverse > 0)
        return pw__fail(w, GKV_EINVAL, "%zu reverse pairs but no array",
                        sp->nreverse);
    if (sp->nreverse > (size_t)GKV_GRAPH_TYPES_MAX)
        return pw__fail(w, GKV_EINVAL, "%zu reverse pairs: more than there "
                        "are edge types", sp->nreverse);
    /* room for two reverse_eid features a pair */
    if ((w->feats = gkv__calloc(sp->nfeats + 2 * sp->nreverse,
                                sizeof *w->feats)) == NULL)
        return pw__fail(w, GKV_ENOMEM, "out of memory");
    for (size_t i = 0; i < sp->nfeats; i++) {
        const gkv_part_feat *f = &sp->feats[i];
        struct pw_feat *pf = &w->feats[w->nfeats];
        const char *kind = f->is_edge ? "edge" : "node", *tname, *bad;
        uint64_t want;
        int n;

        pf->f = f;
        pf->rev_et = -1;
        if (f->type == NULL)
            return pw__fail(w, GKV_EINVAL, "feature %zu: no %s type", i, kind);
        if (!pw__name_ok(f->name, &bad))
            return pw__fail(w, GKV_EINVAL, "%s feature name '%s' %s", kind,
                            f->name != NULL ? f->name : "(null)", bad);
        if (f->is_edge) {
            rc = gkv_graph_etype_find(w->g, f->type, &pf->type);
            if (rc == GKV_EINVAL)
                return pw__fail(w, GKV_EINVAL, "edge feature '%s': relation "
                                "'%s' names several edge types; use the "
                                "canonical name", f->name, f->type);
            if (rc != GKV_OK)
                return pw__fail(w, GKV_ENOTFOUND, "edge feature '%s': unknown "
                                "edge type '%s'", f->name, f->type);
            tname = w->einfo[pf->type].canonical;
            want = (uint64_t)w->einfo[pf->type].num_edges;
        } else {
            if (gkv_graph_ntype_find(w->g, f->type, &pf->type) != GKV_OK)
                return pw__fail(w, GKV_ENOTFOUND, "node feature '%s': unknown "
                                "node type '%s'", f->name, f->type);
            tname = gkv_graph_ntype_name(w->g, pf->type);
            want = (uint64_t)w->ncount[pf->type];
        }
        n = snprintf(pf->tname, sizeof pf->tname, "%s/%s/%s", kind, tname,
                     f->name);
        if (n < 0 || (size_t)n >= sizeof pf->tname)
            return pw__fail(w, GKV_EINVAL, "tensor name '%s/%s/%s' is longer "
                            "than %d bytes", kind, tname, f->name,
                            GKV_NAME_MAX);
        snprintf(pf->name, sizeof pf->name, "%s", f->name);
        for (size_t k = 0; k < w->nfeats; k++)
            if (strcmp(w->feats[k].tname, pf->tname) == 0)
                return pw__fail(w, GKV_EINVAL, "feature '%s' is given twice",
                                pf->tname);
        w->nfeats++;           /* from here on, closed with the others */
        if (f->path != NULL) {
            why[0] = '\0';
            if ((rc = map_npy(&pf->map, f->path, 0, why, sizeof why)) != GKV_OK)
                return pw__fail(w, rc, "feature '%s' (%s): %s", pf->tname,
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
                return pw__fail(w, GKV_EINVAL, "feature '%s': bad in-memory "
                                "array (dtype %d, %u dims%s)", pf->tname,
                                (int)f->dtype, f->ndim,
                                f->data == NULL ? ", NULL data" : "");
            pf->rows = f->data;
            pf->dtype = f->dtype;
            pf->ndim = f->ndim;
            for (unsigned d = 0; d < pf->ndim; d++) {
                if (f->shape[d] == 0)
                    return pw__fail(w, GKV_EINVAL, "feature '%s': dim %u of "
                                    "its row shape is 0", pf->tname, d);
                pf->shape[d] = f->shape[d];
            }
            pf->nrows = f->nrows;
        }
        pf->row_bytes = gkv_dtype_size(pf->dtype);
        for (unsigned d = 0; d < pf->ndim; d++)
            pf->row_bytes *= (size_t)pf->shape[d];
        if (pf->nrows != want)
            return pw__fail(w, GKV_ESHAPE, "feature '%s'%s%s%s has %llu rows, "
                            "but %s type '%s' has %llu %s", pf->tname,
                            f->path ? " (" : "", f->path ? f->path : "",
                            f->path ? ")" : "", (unsigned long long)pf->nrows,
                            kind, tname, (unsigned long long)want,
                            f->is_edge ? "edges" : "nodes");
        if (pf->row_bytes == 0)
            return pw__fail(w, GKV_EINVAL, "feature '%s': empty rows",
                            pf->tname);
    }
    return GKV_OK;
}

/* Edge type 'name' of a reverse pair, into *et. */
static gkv_err
rev_type(struct pw *w, const char *name, int *et)
{
    gkv_err rc;

    if (name == NULL)
        return pw__fail(w, GKV_EINVAL, "reverse pair: an edge type is NULL");
    rc = gkv_graph_etype_find(w->g, name, et);
    if (rc == GKV_EINVAL)
        return pw__fail(w, GKV_EINVAL, "reverse pair: relation '%s' names "
                        "several edge types; use the canonical name", name);
    if (rc != GKV_OK)
        return pw__fail(w, GKV_ENOTFOUND, "reverse pair: unknown edge type "
                        "'%s'", name);
    return GKV_OK;
}

/* The reverse pairs: checked (edge k of each type joins the same nodes as
 * edge k of the other, the other way), and a "reverse_eid" feature for
 * each type, whose rows (the other type's emap) are set once the edges are
 * numbered. Appended to w->feats, which pw__load_feats sized for them. */
gkv_err
pw__load_reverse(struct pw *w)
{
    const gkv_part_spec *sp = w->sp;
    int *paired = NULL;
    gkv_err rc = GKV_OK;

    if (sp->nreverse == 0)
        return GKV_OK;
    if ((w->revf = gkv__calloc(2 * sp->nreverse, sizeof *w->revf)) == NULL ||
        (paired = gkv__calloc((size_t)w->net, sizeof *paired)) == NULL) {
        gkv__free(paired);
        return pw__fail(w, GKV_ENOMEM, "out of memory");
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
            pw__fail(w, rc, "reverse pair '%s' and '%s': the same edge type "
                     "(edge k cannot be its own reverse)", ea->canonical,
                     eb->canonical);
            goto out;
        }
        for (int k = 0; k < 2; k++)
            if (paired[et[k]]) {
                pw__fail(w, rc, "edge type '%s' is in two reverse pairs",
                         w->einfo[et[k]].canonical);
                goto out;
            }
        if (ea->src_ntype != eb->dst_ntype || ea->dst_ntype != eb->src_ntype) {
            pw__fail(w, rc, "reverse pair '%s' and '%s': the node types are "
                     "not swapped", ea->canonical, eb->canonical);
            goto out;
        }
        if (ea->num_edges != eb->num_edges) {
            pw__fail(w, rc, "reverse pair '%s' (%lld edges) and '%s' (%lld "
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
                pw__fail(w, rc, "reverse pair '%s' and '%s': edge %lld of "
                         "'%s' is %lld -> %lld, but edge %lld of '%s' is %lld "
                         "-> %lld, not %lld -> %lld (edge k of one type must "
                         "be the reverse of edge k of the other, in input "
                         "order)", ea->canonical, eb->canonical, (long long)k,
                         ea->canonical, (long long)a.src[k],
                         (long long)a.dst[k], (long long)k, eb->canonical,
                         (long long)b.src[k], (long long)b.dst[k],
                         (long long)a.dst[k], (long long)a.src[k]);
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
                pw__fail(w, rc, "tensor name 'edge/%s/%s' is longer than %d "
                         "bytes", canon, f->name, GKV_NAME_MAX);
                goto out;
            }
            for (size_t j = 0; j < w->nfeats; j++)
                if (strcmp(w->feats[j].tname, pf->tname) == 0) {
                    pw__fail(w, rc, "feature '%s' is given, and is also what "
                             "the reverse pair of '%s' writes", pf->tname,
                             canon);
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

gkv_err
pw__load_masks(struct pw *w)
{
    const gkv_part_spec *sp = w->sp;
    char why[512];
    gkv_err rc;

    if (sp->nmasks == 0)
        return GKV_OK;
    if (sp->masks == NULL)
        return pw__fail(w, GKV_EINVAL, "%zu masks but no mask array",
                        sp->nmasks);
    if ((w->mask = gkv__calloc((size_t)w->nnt, sizeof *w->mask)) == NULL)
        return pw__fail(w, GKV_ENOMEM, "out of memory");
    for (size_t i = 0; i < sp->nmasks; i++) {
        const gkv_part_mask *m = &sp->masks[i];
        gkv_npy_map map;
        uint64_t rows, want;
        size_t esz;
        int t;

        if (m->ntype == NULL || gkv_graph_ntype_find(w->g, m->ntype, &t) != GKV_OK)
            return pw__fail(w, GKV_ENOTFOUND, "training mask: unknown node "
                            "type '%s'",
                            m->ntype != NULL ? m->ntype : "(null)");
        if (w->mask[t] != NULL)
            return pw__fail(w, GKV_EINVAL, "training mask of node type '%s' "
                            "is given twice", m->ntype);
        want = (uint64_t)w->ncount[t];
        if ((w->mask[t] = gkv__malloc(want ? (size_t)want : 1)) == NULL)
            return pw__fail(w, GKV_ENOMEM, "out of memory");
        if (m->path == NULL) {
            if (m->nrows != want || (m->data == NULL && want > 0))
                return pw__fail(w, GKV_ESHAPE, "training mask of '%s' has "
                                "%llu rows, but node type '%s' has %llu nodes",
                                m->ntype, (unsigned long long)m->nrows,
                                m->ntype, (unsigned long long)want);
            for (uint64_t v = 0; v < want; v++)
                w->mask[t][v] = m->data[v] != 0;
            continue;
        }
        why[0] = '\0';
        if ((rc = map_npy(&map, m->path, 1, why, sizeof why)) != GKV_OK)
            return pw__fail(w, rc, "training mask '%s': %s", m->path,
                            why[0] ? why : gkv_strerror(rc));
        rows = map.hdr.shape[0];
        esz = gkv_dtype_size(map.hdr.dtype);
        if (map.hdr.ndim > 2 || (map.hdr.ndim == 2 && map.hdr.shape[1] != 1)) {
            unsigned nd = map.hdr.ndim;
            uint64_t cols = map.hdr.shape[1];
            gkv_npy_map_close(&map);
            return pw__fail(w, GKV_ESHAPE, "training mask '%s': expected one "
                            "value per node (N or N x 1), not %u dims (%llu x "
                            "%llu ...)", m->path, nd, (unsigned long long)rows,
                            (unsigned long long)cols);
        }
        if (rows != want) {
            gkv_npy_map_close(&map);
            return pw__fail(w, GKV_ESHAPE, "training mask '%s' has %llu rows, "
                            "but node type '%s' has %llu nodes", m->path,
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
