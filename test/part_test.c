/* part_test.c - the partition reader and its queries.
 *
 * The test writes partitions itself (tp_write below, a small writer that
 * follows the partition contract: renumbering, CSC order, tensors, JSON)
 * so it does not depend on gkv-partition. Graphs: the fixed hetero graph
 * by range (hand-checked adjacency), the same with a scrambled assignment,
 * the fixed homogeneous graph and an R-MAT scale-10 graph range-partitioned
 * with an empty partition. Every query is checked against a reference
 * computed from the original gkv_graph (CSC/CSR columns, COO endpoints,
 * weights) through the test's own ID mappings. Then corrupt partitions
 * (indptr not monotone, indices out of range, missing or mistyped tensors,
 * bad weights and edge IDs) must fail cleanly, and allocation failures
 * must leak nothing. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <jansson.h>
#include "gkvt.h"
#include "graph/gkv_part.h"

#define N_OF(a) (sizeof (a) / sizeof (a)[0])
#define MAXT 4

struct fx {
    char *dir;
};

static int
setup(void **state)
{
    return gkvt_dir_setup(state, sizeof(struct fx), "part");
}

static int
teardown(void **state)
{
    return gkvt_dir_teardown(state);
}

/* ---- a small partition writer, per the contract ----------------------- */

/* A partitioned graph: the original, the ID maps, the ranges. */
struct tp {
    const gkv_graph *g;
    int P, nnt, net, csr;
    int64_t *nmap[MAXT], *ninv[MAXT];   /* old -> new, new -> old node */
    int64_t *emap[MAXT], *einv[MAXT];   /* old -> new, new -> old edge */
    int64_t *nlo[MAXT], *elo[MAXT];     /* P + 1 type-wise range starts */
    char json[4200];
    char dir[4096];
};

static void
put_i64(gkv_store *s, const char *name, int64_t lo, int64_t hi,
        const int64_t *v)
{
    gkv_tensor_spec sp = {0};

    sp.dtype = GKV_I64;
    sp.lo = (uint64_t)lo;
    sp.hi = (uint64_t)hi;
    GKVT_OK(gkv_tensor_create(s, name, &sp));
    GKVT_OK(gkv_tensor_write(s, name, (uint64_t)lo, (uint64_t)hi, v,
                             (size_t)(hi - lo) * 8));
}

static void
put_f32(gkv_store *s, const char *name, int64_t lo, int64_t hi,
        const float *v)
{
    gkv_tensor_spec sp = {0};

    sp.dtype = GKV_F32;
    sp.lo = (uint64_t)lo;
    sp.hi = (uint64_t)hi;
    GKVT_OK(gkv_tensor_create(s, name, &sp));
    GKVT_OK(gkv_tensor_write(s, name, (uint64_t)lo, (uint64_t)hi, v,
                             (size_t)(hi - lo) * 4));
}

/* One direction of one edge type of partition p: columns [c0, c1) of 'a'
 * (built on the renumbered edges), tensors DIR/CANON/... */
static void
put_adj(gkv_store *s, const char *dir, const char *canon, const gkv_csc *a,
        int64_t c0, int64_t c1, const float *w_new, int csr)
{
    int64_t base = a->indptr[c0], m = a->indptr[c1] - base;
    int64_t lo = csr ? 0 : base;            /* CSC rows are edge IDs */
    int64_t *ptr = malloc(((size_t)(c1 - c0) + 1) * 8);
    float *w = malloc(((size_t)m + 1) * 4);
    char name[300];

    for (int64_t c = c0; c <= c1; c++)
        ptr[c - c0] = a->indptr[c] - base;
    if (c1 > c0) {
        snprintf(name, sizeof name, "%s/%s/indptr", dir, canon);
        put_i64(s, name, 0, c1 - c0 + 1, ptr);
    }
    if (m > 0) {
        snprintf(name, sizeof name, "%s/%s/indices", dir, canon);
        put_i64(s, name, lo, lo + m, a->indices + base);
        if (csr) {
            snprintf(name, sizeof name, "%s/%s/eids", dir, canon);
            put_i64(s, name, 0, m, a->eids + base);
        } else {
            for (int64_t k = 0; k < m; k++)     /* CSC order = new IDs */
                assert_int_equal(a->eids[base + k], base + k);
        }
        if (w_new != NULL) {
            for (int64_t k = 0; k < m; k++)
                w[k] = w_new[a->eids[base + k]];
            snprintf(name, sizeof name, "%s/%s/weight", dir, canon);
            put_f32(s, name, lo, lo + m, w);
        }
    }
    free(ptr);
    free(w);
}

static json_t *
ranges_json(const struct tp *t, int edge, int ty)
{
    json_t *a = json_array();

    for (int p = 0; p < t->P; p++) {
        int64_t s = 0;
        for (int q = 0; q <= p; q++)
            for (int u = 0; u < (edge ? t->net : t->nnt); u++) {
                const int64_t *lo = edge ? t->elo[u] : t->nlo[u];
                if (q == p && u == ty)
                    break;
                s += lo[q + 1] - lo[q];
            }
        {
            const int64_t *lo = edge ? t->elo[ty] : t->nlo[ty];
            json_array_append_new(a, json_pack("[I, I]", (json_int_t)s,
                (json_int_t)(s + lo[p + 1] - lo[p])));
        }
    }
    return a;
}

/* Partitions g into P parts: node v of type ty goes to assign[ty][v].
 * Writes DIR/g.json and DIR/part-N stores. */
static void
tp_write(struct tp *t, const char *dir, const gkv_graph *g, int P,
         int *const assign[], int csr)
{
    json_t *j = json_object(), *nt = json_object(), *et = json_object();
    json_t *nm = json_object(), *em = json_object(), *wl = json_array();
    json_t *mn = json_object(), *me = json_object();
    gkv_graph *ng;
    gkv_store *st[8];
    char path[4300];

    memset(t, 0, sizeof *t);
    t->g = g;
    t->P = P;
    t->csr = csr;
    t->nnt = gkv_graph_num_ntypes(g);
    t->net = gkv_graph_num_etypes(g);
    assert_true(t->nnt <= MAXT && t->net <= MAXT && P <= 8);
    snprintf(t->dir, sizeof t->dir, "%s", dir);
    snprintf(t->json, sizeof t->json, "%s/g.json", dir);
    GKVT_OK(gkv_graph_new(&ng));
    /* nodes: by partition, then increasing old ID */
    for (int ty = 0; ty < t->nnt; ty++) {
        int64_t n = gkv_graph_num_nodes(g, ty), *cur = calloc(P + 1, 8);
        t->nmap[ty] = malloc((size_t)n * 8 + 8);
        t->ninv[ty] = malloc((size_t)n * 8 + 8);
        t->nlo[ty] = calloc((size_t)P + 1, 8);
        for (int64_t v = 0; v < n; v++)
            t->nlo[ty][assign[ty][v] + 1]++;
        for (int p = 0; p < P; p++)
            t->nlo[ty][p + 1] += t->nlo[ty][p];
        for (int64_t v = 0; v < n; v++) {
            int p = assign[ty][v];
            t->nmap[ty][v] = t->nlo[ty][p] + cur[p]++;
            t->ninv[ty][t->nmap[ty][v]] = v;
        }
        free(cur);
        GKVT_OK(gkv_graph_add_ntype(ng, gkv_graph_ntype_name(g, ty), n,
                                    NULL));
        json_object_set_new(nt, gkv_graph_ntype_name(g, ty),
                            json_integer(ty));
    }
    /* edges: stable by new dst, which is partition order too */
    for (int e = 0; e < t->net; e++) {
        gkv_etype_info ei;
        gkv_coo c;
        gkv_csc a;
        int64_t *ns, *nd;
        float *nw = NULL;

        GKVT_OK(gkv_graph_etype_info(g, e, &ei));
        GKVT_OK(gkv_graph_edges(g, e, &c));
        ns = malloc((size_t)c.n * 8 + 8);
        nd = malloc((size_t)c.n * 8 + 8);
        for (int64_t i = 0; i < c.n; i++) {
            ns[i] = t->nmap[ei.src_ntype][c.src[i]];
            nd[i] = t->nmap[ei.dst_ntype][c.dst[i]];
        }
        GKVT_OK(gkv_csc_build(&a, nd, ns, NULL, (size_t)c.n,
                              gkv_graph_num_nodes(g, ei.dst_ntype), 1));
        t->emap[e] = malloc((size_t)c.n * 8 + 8);
        t->einv[e] = malloc((size_t)c.n * 8 + 8);
        t->elo[e] = malloc(((size_t)P + 1) * 8);
        for (int64_t k = 0; k < c.n; k++) {
            t->einv[e][k] = a.eids[k];
            t->emap[e][a.eids[k]] = k;
        }
        for (int p = 0; p <= P; p++)
            t->elo[e][p] = a.indptr[t->nlo[ei.dst_ntype][p]];
        GKVT_OK(gkv_graph_add_etype(ng, ei.src_type, ei.relation,
                                    ei.dst_type, NULL));
        if (c.w != NULL) {
            nw = malloc((size_t)c.n * 4 + 4);
            for (int64_t k = 0; k < c.n; k++)
                nw[k] = c.w[a.eids[k]];
            json_array_append_new(wl, json_string(ei.canonical));
        }
        for (int64_t k = 0; k < c.n; k++) {
            ns[k] = t->nmap[ei.src_ntype][c.src[a.eids[k]]];
            nd[k] = t->nmap[ei.dst_ntype][c.dst[a.eids[k]]];
        }
        GKVT_OK(gkv_graph_add_edges(ng, e, ns, nd, nw, (size_t)c.n));
        json_object_set_new(et, ei.canonical, json_integer(e));
        snprintf(path, sizeof path, "mapping/edge-%s.npy", ei.canonical);
        json_object_set_new(me, ei.canonical, json_string(path));
        gkv_csc_free(&a);
        free(ns);
        free(nd);
        free(nw);
    }
    for (int ty = 0; ty < t->nnt; ty++) {
        json_object_set_new(nm, gkv_graph_ntype_name(g, ty),
                            ranges_json(t, 0, ty));
        snprintf(path, sizeof path, "mapping/node-%s.npy",
                 gkv_graph_ntype_name(g, ty));
        json_object_set_new(mn, gkv_graph_ntype_name(g, ty),
                            json_string(path));
    }
    for (int e = 0; e < t->net; e++) {
        gkv_etype_info ei;
        GKVT_OK(gkv_graph_etype_info(g, e, &ei));
        json_object_set_new(em, ei.canonical, ranges_json(t, 1, e));
    }
    {
        int64_t nn = 0, ne = 0;
        for (int ty = 0; ty < t->nnt; ty++)
            nn += gkv_graph_num_nodes(g, ty);
        for (int e = 0; e < t->net; e++)
            ne += gkv_graph_num_edges(g, e);
        json_object_set_new(j, "graph_name", json_string("g"));
        json_object_set_new(j, "gkv_format", json_integer(1));
        json_object_set_new(j, "num_nodes", json_integer(nn));
        json_object_set_new(j, "num_edges", json_integer(ne));
    }
    json_object_set_new(j, "part_method", json_string("range"));
    json_object_set_new(j, "num_parts", json_integer(P));
    json_object_set_new(j, "halo_hops", json_integer(0));
    json_object_set_new(j, "ntypes", nt);
    json_object_set_new(j, "etypes", et);
    json_object_set_new(j, "node_map", nm);
    json_object_set_new(j, "edge_map", em);
    json_object_set_new(j, "weighted", wl);
    json_object_set_new(j, "csr", json_boolean(csr));
    json_object_set_new(j, "node_feats", json_object());
    json_object_set_new(j, "edge_feats", json_object());
    json_object_set_new(j, "mapping", json_pack("{s:o, s:o}", "node", mn,
                                                "edge", me));
    for (int p = 0; p < P; p++) {
        char key[32], rel[32];
        snprintf(key, sizeof key, "part-%d", p);
        snprintf(rel, sizeof rel, "part-%d", p);
        json_object_set_new(j, key, json_pack("{s:s, s:s, s:s}",
                                              "part_graph", rel,
                                              "node_feats", rel,
                                              "edge_feats", rel));
        snprintf(path, sizeof path, "%s/part-%d", dir, p);
        GKVT_OK(gkv_store_open(&st[p], path, GKV_CREATE | GKV_NOSYNC,
                               NULL));
    }
    assert_int_equal(json_dump_file(j, t->json, JSON_INDENT(1)), 0);
    json_decref(j);
    /* tensors, from the renumbered graph's CSC and CSR */
    for (int e = 0; e < t->net; e++) {
        gkv_etype_info ei;
        gkv_coo c;
        gkv_csc in, out;

        GKVT_OK(gkv_graph_etype_info(ng, e, &ei));
        GKVT_OK(gkv_graph_edges(ng, e, &c));
        GKVT_OK(gkv_graph_csc(ng, e, 1, &in));
        GKVT_OK(gkv_graph_csr(ng, e, 1, &out));
        for (int p = 0; p < P; p++) {
            put_adj(st[p], "csc", ei.canonical, &in,
                    t->nlo[ei.dst_ntype][p], t->nlo[ei.dst_ntype][p + 1],
                    c.w, 0);
            if (csr)
                put_adj(st[p], "csr", ei.canonical, &out,
                        t->nlo[ei.src_ntype][p],
                        t->nlo[ei.src_ntype][p + 1], c.w, 1);
        }
        gkv_csc_free(&in);
        gkv_csc_free(&out);
    }
    for (int p = 0; p < P; p++)
        gkv_store_close(st[p]);
    gkv_graph_free(ng);
}

static void
tp_free(struct tp *t)
{
    for (int i = 0; i < MAXT; i++) {
        free(t->nmap[i]);
        free(t->ninv[i]);
        free(t->nlo[i]);
        free(t->emap[i]);
        free(t->einv[i]);
        free(t->elo[i]);
    }
}

/* ---- checking a partition against the original graph -------------------- */

struct pair { int64_t other, eid; };

static int
cmp_pair(const void *a, const void *b)
{
    const struct pair *x = a, *y = b;
    return (x->eid > y->eid) - (x->eid < y->eid);
}

static void
check_etype(const struct tp *t, gkv_part *pt, int p, int e)
{
    const gkv_graph *g = t->g;
    gkv_etype_info ei;
    gkv_coo c;
    gkv_csc in, out;
    gkv_adj a;
    int s, d;
    int64_t c0, c1, m, *ids, *deg, *src, *dst, *eid;
    size_t nsub;

    GKVT_OK(gkv_graph_etype_info(g, e, &ei));
    GKVT_OK(gkv_graph_edges(g, e, &c));
    GKVT_OK(gkv_graph_csc(g, e, 1, &in));
    GKVT_OK(gkv_graph_csr(g, e, 1, &out));
    s = ei.src_ntype;
    d = ei.dst_ntype;
    m = t->elo[e][p + 1] - t->elo[e][p];
    assert_int_equal(gkv_part_num_edges(pt, e), m);

    /* CSC */
    GKVT_OK(gkv_part_csc(pt, e, &a));
    c0 = t->nlo[d][p];
    c1 = t->nlo[d][p + 1];
    assert_int_equal(a.col_lo, c0);
    assert_int_equal(a.col_hi, c1);
    assert_null(a.eids);
    assert_int_equal(a.eid_lo, t->elo[e][p]);
    assert_int_equal(a.w == NULL, c.w == NULL);
    assert_int_equal(a.indptr[0], 0);
    assert_int_equal(a.indptr[c1 - c0], m);
    ids = malloc((size_t)(gkv_graph_num_nodes(g, s) +
                          gkv_graph_num_nodes(g, d) + 2) * 8);
    deg = malloc((size_t)(gkv_graph_num_nodes(g, s) +
                          gkv_graph_num_nodes(g, d) + 2) * 8);
    for (int64_t v = c0; v < c1; v++) {
        int64_t old = t->ninv[d][v], pos = a.indptr[v - c0];
        ids[c1 - 1 - v] = v;              /* reversed, for in_subgraph */
        assert_int_equal(a.indptr[v - c0 + 1] - pos,
                         in.indptr[old + 1] - in.indptr[old]);
        for (int64_t k = in.indptr[old]; k < in.indptr[old + 1]; k++, pos++) {
            assert_int_equal(a.indices[pos], t->nmap[s][in.indices[k]]);
            assert_int_equal(a.eid_lo + pos, t->emap[e][in.eids[k]]);
            if (c.w != NULL)
                assert_true(a.w[pos] == c.w[in.eids[k]]);
        }
    }
    GKVT_OK(gkv_part_in_degrees(pt, e, ids, (size_t)(c1 - c0), deg));
    for (int64_t i = 0; i < c1 - c0; i++) {
        int64_t old = t->ninv[d][ids[i]];
        assert_int_equal(deg[i], in.indptr[old + 1] - in.indptr[old]);
    }
    /* in_subgraph of every owned node (reversed) plus the first again */
    if (c1 > c0)
        ids[c1 - c0] = ids[0];
    GKVT_OK(gkv_part_in_subgraph(pt, e, ids, (size_t)(c1 - c0 + (c1 > c0)),
                                 &src, &dst, &eid, &nsub));
    {
        size_t j = 0;
        for (int64_t i = 0; i < c1 - c0 + (c1 > c0); i++) {
            int64_t old = t->ninv[d][ids[i]];
            for (int64_t k = in.indptr[old]; k < in.indptr[old + 1]; k++) {
                assert_true(j < nsub);
                assert_int_equal(src[j], t->nmap[s][in.indices[k]]);
                assert_int_equal(dst[j], ids[i]);
                assert_int_equal(eid[j], t->emap[e][in.eids[k]]);
                j++;
            }
        }
        assert_int_equal(j, nsub);
    }
    gkv_free(src);
    gkv_free(dst);
    gkv_free(eid);

    /* find_edges of every owned edge, against the COO */
    {
        int64_t *ev = malloc((size_t)m * 8 + 8), *fs = malloc((size_t)m * 8 + 8);
        int64_t *fd = malloc((size_t)m * 8 + 8);
        for (int64_t k = 0; k < m; k++)
            ev[k] = t->elo[e][p] + (k * 7919) % m;     /* scrambled order */
        GKVT_OK(gkv_part_find_edges(pt, e, ev, (size_t)m, fs, fd));
        for (int64_t k = 0; k < m; k++) {
            int64_t old = t->einv[e][ev[k]];
            assert_int_equal(fs[k], t->nmap[s][c.src[old]]);
            assert_int_equal(fd[k], t->nmap[d][c.dst[old]]);
        }
        free(ev);
        free(fs);
        free(fd);
    }

    /* CSR */
    c0 = t->nlo[s][p];
    c1 = t->nlo[s][p + 1];
    if (!t->csr) {
        assert_int_equal(gkv_part_csr(pt, e, &a), GKV_ENOTSUP);
        assert_int_equal(gkv_part_out_degrees(pt, e, &c0, c1 > c0, deg),
                         GKV_ENOTSUP);
        gkvt_expect_msg(gkv_part_errmsg(pt), "no CSR");
    } else {
        GKVT_OK(gkv_part_csr(pt, e, &a));
        assert_int_equal(a.col_lo, c0);
        assert_int_equal(a.col_hi, c1);
        assert_non_null(a.eids);
        assert_int_equal(a.w == NULL, c.w == NULL);
        for (int64_t u = c0; u < c1; u++) {
            int64_t old = t->ninv[s][u], pos = a.indptr[u - c0];
            int64_t n = out.indptr[old + 1] - out.indptr[old];
            struct pair *want = malloc((size_t)n * sizeof *want + 1);

            for (int64_t k = 0; k < n; k++) {
                int64_t q = out.indptr[old] + k;
                want[k].other = t->nmap[d][out.indices[q]];
                want[k].eid = t->emap[e][out.eids[q]];
            }
            qsort(want, (size_t)n, sizeof *want, cmp_pair);
            assert_int_equal(a.indptr[u - c0 + 1] - pos, n);
            for (int64_t k = 0; k < n; k++, pos++) {
                assert_int_equal(a.indices[pos], want[k].other);
                assert_int_equal(a.eids[pos], want[k].eid);
                if (c.w != NULL)
                    assert_true(a.w[pos] == c.w[t->einv[e][want[k].eid]]);
            }
            free(want);
            ids[u - c0] = u;
        }
        GKVT_OK(gkv_part_out_degrees(pt, e, ids, (size_t)(c1 - c0), deg));
        for (int64_t i = 0; i < c1 - c0; i++) {
            int64_t old = t->ninv[s][ids[i]];
            assert_int_equal(deg[i], out.indptr[old + 1] - out.indptr[old]);
        }
    }

    /* IDs other partitions own name their owner */
    for (int q = 0; q < t->P; q++) {
        char want[64];
        if (q == p || t->nlo[d][q + 1] == t->nlo[d][q])
            continue;
        snprintf(want, sizeof want, "owned by partition %d, not %d", q, p);
        assert_int_equal(gkv_part_in_degrees(pt, e, &t->nlo[d][q], 1, deg),
                         GKV_ERANGE);
        gkvt_expect_msg(gkv_part_errmsg(pt), want);
        assert_int_equal(gkv_part_in_subgraph(pt, e, &t->nlo[d][q], 1, &src,
                                              &dst, &eid, &nsub), GKV_ERANGE);
        assert_null(src);
        break;
    }
    for (int q = 0; q < t->P; q++) {
        char want[64];
        int64_t x[2] = {t->elo[e][p], t->elo[e][q]}, fs[2], fd[2];
        if (q == p || t->elo[e][q + 1] == t->elo[e][q] || m == 0)
            continue;
        snprintf(want, sizeof want, "eids[1] = %lld: '%s' edge owned by "
                 "partition %d", (long long)x[1], ei.canonical, q);
        assert_int_equal(gkv_part_find_edges(pt, e, x, 2, fs, fd),
                         GKV_ERANGE);
        gkvt_expect_msg(gkv_part_errmsg(pt), want);
        break;
    }
    {
        int64_t bad = gkv_graph_num_nodes(g, d), fs, fd;
        int64_t nege = -1;
        char want[64];
        snprintf(want, sizeof want, "nodes[0] = %lld is not a '%s' node",
                 (long long)bad, ei.dst_type);
        assert_int_equal(gkv_part_in_degrees(pt, e, &bad, 1, deg), GKV_ERANGE);
        gkvt_expect_msg(gkv_part_errmsg(pt), want);
        assert_int_equal(gkv_part_find_edges(pt, e, &nege, 1, &fs, &fd),
                         GKV_ERANGE);
        gkvt_expect_msg(gkv_part_errmsg(pt), "eids[0] = -1");
    }
    free(ids);
    free(deg);
    gkv_csc_free(&in);
    gkv_csc_free(&out);
}

static void
check_all(const struct tp *t)
{
    for (int p = 0; p < t->P; p++) {
        gkv_part *pt;
        int64_t lo, hi;

        if (gkv_part_open(&pt, t->json, p, 0) != GKV_OK)
            fail_msg("partition %d: %s", p, gkv_part_errmsg(NULL));
        assert_int_equal(gkv_part_id(pt), p);
        assert_non_null(gkv_part_store(pt));
        for (int ty = 0; ty < t->nnt; ty++) {
            assert_int_equal(gkv_part_num_nodes(pt, ty),
                             t->nlo[ty][p + 1] - t->nlo[ty][p]);
            GKVT_OK(gkv_pbook_node_range(gkv_part_book(pt), ty, p, &lo, &hi));
            assert_int_equal(lo, t->nlo[ty][p]);
        }
        assert_int_equal(gkv_part_num_nodes(pt, t->nnt), -1);
        assert_int_equal(gkv_part_num_edges(pt, -1), -1);
        for (int e = 0; e < t->net; e++)
            check_etype(t, pt, p, e);
        {
            gkv_adj a;
            int64_t x = 0, dg;
            assert_int_equal(gkv_part_csc(pt, t->net, &a), GKV_EINVAL);
            assert_int_equal(gkv_part_in_degrees(pt, -1, &x, 1, &dg),
                             GKV_EINVAL);
            assert_int_equal(gkv_part_find_edges(pt, t->net, &x, 1, &dg, &dg),
                             GKV_EINVAL);
        }
        gkv_part_close(pt);
    }
}

/* ---- the tests ---------------------------------------------------------------- */

static int hetero_user_range[4] = {0, 0, 1, 1};
static int hetero_item_range[5] = {0, 0, 0, 1, 1};

static void
write_hetero_range(struct tp *t, const char *dir, gkv_graph **g, int csr)
{
    int *assign[2] = {hetero_user_range, hetero_item_range};

    GKVT_OK(gkv_graph_fixed_hetero(g));
    tp_write(t, dir, *g, 2, assign, csr);
}

/* The range partition of the fixed hetero graph keeps every ID; the buys
 * adjacency by hand from the table in gkv_graph.h. */
static void
test_hetero_range_by_hand(void **state)
{
    struct fx *f = *state;
    static const int64_t ptr0[4] = {0, 1, 5, 5}, ind0[5] = {0, 0, 1, 2, 3};
    static const float w0[5] = {1, 2, 1, 1, 4};
    static const int64_t ptr1[3] = {0, 1, 2}, ind1[2] = {1, 2};
    static const float w1[2] = {3, 2};
    gkv_graph *g;
    gkv_part *p0, *p1;
    gkv_adj a;
    struct tp t;
    int64_t e[3] = {3, 0, 4}, src[3], dst[3], deg[3];
    int64_t nodes[2] = {1, 0}, *s, *d, *id;
    size_t m;

    write_hetero_range(&t, f->dir, &g, 1);
    GKVT_OK(gkv_part_open(&p0, t.json, 0, 0));
    GKVT_OK(gkv_part_open(&p1, t.json, 1, 0));
    assert_string_equal(gkv_part_errmsg(p0), "");
    GKVT_OK(gkv_part_csc(p0, 1, &a));
    assert_int_equal(a.col_lo, 0);
    assert_int_equal(a.col_hi, 3);
    assert_int_equal(a.eid_lo, 0);
    assert_memory_equal(a.indptr, ptr0, sizeof ptr0);
    assert_memory_equal(a.indices, ind0, sizeof ind0);
    assert_memory_equal(a.w, w0, sizeof w0);
    GKVT_OK(gkv_part_csc(p1, 1, &a));
    assert_int_equal(a.col_lo, 3);
    assert_int_equal(a.col_hi, 5);
    assert_int_equal(a.eid_lo, 5);
    assert_memory_equal(a.indptr, ptr1, sizeof ptr1);
    assert_memory_equal(a.indices, ind1, sizeof ind1);
    assert_memory_equal(a.w, w1, sizeof w1);
    /* buys renumbered: 0 1 2 4 6 | 3 5 -> new 3 is old e4 = u2 -> i1 */
    GKVT_OK(gkv_part_find_edges(p0, 1, e, 3, src, dst));
    assert_int_equal(src[0], 2);
    assert_int_equal(dst[0], 1);
    assert_int_equal(src[1], 0);
    assert_int_equal(dst[1], 0);
    assert_int_equal(src[2], 3);
    assert_int_equal(dst[2], 1);
    /* follows into users 0 and 1 (partition 0): u0 <- u2, u3; u1 <- u0 */
    GKVT_OK(gkv_part_in_degrees(p0, 0, nodes, 2, deg));
    assert_int_equal(deg[0], 1);
    assert_int_equal(deg[1], 2);
    GKVT_OK(gkv_part_in_subgraph(p0, 0, nodes, 2, &s, &d, &id, &m));
    assert_int_equal(m, 3);
    assert_int_equal(s[0], 0);
    assert_int_equal(d[0], 1);
    assert_int_equal(id[0], 2);
    assert_int_equal(s[1], 2);
    assert_int_equal(s[2], 3);
    assert_int_equal(d[2], 0);
    assert_int_equal(id[1], 0);
    assert_int_equal(id[2], 1);
    gkv_free(s);
    gkv_free(d);
    gkv_free(id);
    /* out-degrees of users 0, 1 (buys): 2, 2; user 2 is partition 1's */
    GKVT_OK(gkv_part_out_degrees(p0, 1, nodes, 2, deg));
    assert_int_equal(deg[0], 2);
    assert_int_equal(deg[1], 2);
    nodes[1] = 2;
    assert_int_equal(gkv_part_out_degrees(p0, 1, nodes, 2, deg), GKV_ERANGE);
    gkvt_expect_msg(gkv_part_errmsg(p0),
                    "nodes[1] = 2: 'user' node owned by partition 1, not 0");
    /* user 3 has no in-edges; item 2 no buyers */
    nodes[0] = 3;
    GKVT_OK(gkv_part_in_degrees(p1, 0, nodes, 1, deg));
    assert_int_equal(deg[0], 0);
    nodes[0] = 2;
    GKVT_OK(gkv_part_in_subgraph(p0, 1, nodes, 1, &s, &d, &id, &m));
    assert_int_equal(m, 0);
    assert_null(s);
    assert_null(d);
    assert_null(id);
    /* the partition's global view */
    assert_int_equal(gkv_pbook_num_nodes(gkv_part_book(p0), 1), 5);
    assert_int_equal(gkv_part_num_nodes(p0, 1), 3);
    assert_int_equal(gkv_part_num_edges(p1, 1), 2);
    gkv_part_close(p0);
    gkv_part_close(p1);
    gkv_part_close(NULL);
    check_all(&t);
    tp_free(&t);
    gkv_graph_free(g);
}

static void
test_hetero_scrambled(void **state)
{
    struct fx *f = *state;
    int user[4] = {1, 0, 2, 0}, item[5] = {2, 1, 1, 0, 2};
    int *assign[2] = {user, item};
    gkv_graph *g;
    struct tp t;

    GKVT_OK(gkv_graph_fixed_hetero(&g));
    tp_write(&t, f->dir, g, 3, assign, 1);
    check_all(&t);
    tp_free(&t);
    gkv_graph_free(g);
}

static void
test_homo_random_assign(void **state)
{
    struct fx *f = *state;
    uint64_t rng = gkvt_seed();
    int nodes[8], *assign[1] = {nodes};
    gkv_graph *g;

    GKVT_OK(gkv_graph_fixed_homo(&g));
    for (int round = 0; round < 3; round++) {
        char sub[4200];
        struct tp t;

        for (int v = 0; v < 8; v++)
            nodes[v] = (int)(tools__splitmix64(&rng) % 3);
        snprintf(sub, sizeof sub, "%s/r%d", f->dir, round);
        assert_int_equal(mkdir(sub, 0755), 0);
        tp_write(&t, sub, g, 3, assign, round != 1);
        check_all(&t);
        tp_free(&t);
    }
    gkv_graph_free(g);
}

/* R-MAT scale 10, range partitioned into 5 with an empty partition: node
 * IDs stay the same. */
static const int64_t rmat_bounds[6] = {0, 100, 500, 500, 520, 1024};

static void
write_rmat(struct tp *t, const char *dir, gkv_graph **g, int csr)
{
    gkv_rmat_spec sp = {0};
    int *nodes = malloc(1024 * sizeof *nodes), *assign[1] = {nodes};

    sp.scale = 10;
    sp.edge_factor = 8;
    sp.seed = 42;
    GKVT_OK(gkv_rmat_graph(g, &sp, 1));
    for (int p = 0; p < 5; p++)
        for (int64_t v = rmat_bounds[p]; v < rmat_bounds[p + 1]; v++)
            nodes[v] = p;
    tp_write(t, dir, *g, 5, assign, csr);
    free(nodes);
}

static void
test_rmat_range(void **state)
{
    struct fx *f = *state;
    gkv_graph *g;
    struct tp t;
    gkv_part *pt;
    int64_t x = 10, deg;

    write_rmat(&t, f->dir, &g, 1);
    for (int64_t v = 0; v < 1024; v++)
        assert_int_equal(t.nmap[0][v], v);
    check_all(&t);
    /* the empty partition: no tensors, nothing owned */
    GKVT_OK(gkv_part_open(&pt, t.json, 2, 0));
    assert_int_equal(gkv_part_num_nodes(pt, 0), 0);
    assert_int_equal(gkv_part_num_edges(pt, 0), 0);
    assert_int_equal(gkv_part_in_degrees(pt, 0, &x, 1, &deg), GKV_ERANGE);
    gkvt_expect_msg(gkv_part_errmsg(pt), "owned by partition 0, not 2");
    gkv_part_close(pt);
    tp_free(&t);
    gkv_graph_free(g);
}

static void
test_open_errors(void **state)
{
    struct fx *f = *state;
    gkv_graph *g;
    gkv_part *pt = (gkv_part *)&pt;
    struct tp t;
    char path[4300];

    write_hetero_range(&t, f->dir, &g, 0);
    assert_int_equal(gkv_part_open(&pt, t.json, 2, 0), GKV_EINVAL);
    assert_null(pt);
    gkvt_expect_msg(gkv_part_errmsg(NULL), "no partition 2");
    assert_int_equal(gkv_part_open(&pt, t.json, -1, 0), GKV_EINVAL);
    assert_int_equal(gkv_part_open(&pt, t.json, 0, 0x8000u), GKV_EINVAL);
    snprintf(path, sizeof path, "%s/nope.json", f->dir);
    assert_int_equal(gkv_part_open(&pt, path, 0, 0), GKV_ENOENT);
    gkvt_expect_msg(gkv_part_errmsg(NULL), "nope.json");
    /* a store that is not there */
    snprintf(path, sizeof path, "%s/part-1", f->dir);
    {
        char moved[4300];
        snprintf(moved, sizeof moved, "%s/moved", f->dir);
        assert_int_equal(rename(path, moved), 0);
        assert_int_equal(gkv_part_open(&pt, t.json, 1, 0), GKV_ENOENT);
        gkvt_expect_msg(gkv_part_errmsg(NULL), "part-1");
        assert_int_equal(rename(moved, path), 0);
    }
    /* read-only by default; writable on request */
    {
        gkv_tensor_spec sp = {0};
        sp.dtype = GKV_F32;
        sp.lo = 0;
        sp.hi = 2;
        GKVT_OK(gkv_part_open(&pt, t.json, 0, 0));
        assert_int_equal(gkv_tensor_create(gkv_part_store(pt), "node/user/x",
                                           &sp), GKV_ERDONLY);
        gkv_part_close(pt);
        GKVT_OK(gkv_part_open(&pt, t.json, 0, GKV_PART_WRITABLE | GKV_NOSYNC));
        GKVT_OK(gkv_tensor_create(gkv_part_store(pt), "node/user/x", &sp));
        gkv_part_close(pt);
    }
    tp_free(&t);
    gkv_graph_free(g);
}

/* ---- corrupt partitions ------------------------------------------------------- */

enum { SET, DEL, RETYPE, RERANGE };

struct corrupt {
    const char *tensor;
    int op;
    int64_t row;          /* SET: the row; RERANGE: the new lo */
    double val;           /* SET: the value (as the tensor's dtype) */
    const char *msg;
};

static const struct corrupt corrupts[] = {
    {"csc/user:buys:item/indptr", SET, 2, 0,
     "'csc/user:buys:item/indptr': row 2 is 0, below row 1 (1)"},
    {"csc/user:buys:item/indptr", SET, 0, 1, "row 0 is 1, expected 0"},
    {"csc/user:buys:item/indptr", SET, 3, 6,
     "last row 3 is 6, but the partition owns 5 edges"},
    {"csc/user:buys:item/indptr", SET, 3, 1e15,
     "last row 3 is 1000000000000000"},
    {"csc/user:buys:item/indices", SET, 2, 4,
     "'csc/user:buys:item/indices': row 2 is 4, not a 'user' node ID"},
    {"csc/item:similar:item/indices", SET, 0, -1, "row 0 is -1"},
    {"csc/user:follows:user/indices", DEL, 0, 0,
     "tensor 'csc/user:follows:user/indices' is missing"},
    {"csc/item:similar:item/indptr", DEL, 0, 0,
     "'csc/item:similar:item/indptr' is missing"},
    {"csc/user:buys:item/weight", DEL, 0, 0,
     "'csc/user:buys:item/weight' is missing"},
    {"csc/user:buys:item/weight", RETYPE, 0, 0, "is f64"},
    {"csc/user:buys:item/indices", RERANGE, 1, 0,
     "IDs [1, 6); expected i64 scalars, IDs [0, 5)"},
    {"csc/user:buys:item/weight", SET, 1, NAN, "row 1 is not a weight (finite, "
     "0 or more): nan"},
    {"csc/user:buys:item/weight", SET, 3, -2, "row 3 is not a weight (finite, "
     "0 or more): -2"},
    {"csr/user:buys:item/eids", SET, 0, 7,
     "'csr/user:buys:item/eids': row 0 is 7, not a 'user:buys:item' edge"},
    {"csr/user:buys:item/eids", SET, 1, 0, "row 1 (0) is not above row 0"},
    {"csr/user:buys:item/indptr", SET, 2, 99, "more than the 7 edges"},
    {"csr/item:similar:item/indices", SET, 0, 5, "not a 'item' node ID"},
    {"csr/user:follows:user/indptr", DEL, 0, 0, "is missing"},
    {"csr/user:buys:item/weight", DEL, 0, 0, "is missing"},
};

static void
apply(const char *store, const struct corrupt *c)
{
    gkv_store *s;
    gkv_tensor_desc d;

    GKVT_OK(gkv_store_open(&s, store, GKV_NOSYNC, NULL));
    GKVT_OK(gkv_tensor_info(s, NULL, c->tensor, &d));
    if (c->op == SET) {
        if (d.dtype == GKV_F32) {
            float v = (float)c->val;
            GKVT_OK(gkv_tensor_write(s, c->tensor, (uint64_t)c->row,
                                     (uint64_t)c->row + 1, &v, 4));
        } else {
            int64_t v = (int64_t)c->val;
            GKVT_OK(gkv_tensor_write(s, c->tensor, (uint64_t)c->row,
                                     (uint64_t)c->row + 1, &v, 8));
        }
    } else {
        GKVT_OK(gkv_tensor_delete(s, c->tensor));
        if (c->op != DEL) {
            gkv_tensor_spec sp = {0};
            sp.dtype = c->op == RETYPE ? GKV_F64 : d.dtype;
            sp.lo = c->op == RERANGE ? (uint64_t)c->row : d.lo;
            sp.hi = sp.lo + (d.hi - d.lo);
            GKVT_OK(gkv_tensor_create(s, c->tensor, &sp));
        }
    }
    gkv_store_close(s);
}

static void
test_corrupt_partitions(void **state)
{
    struct fx *f = *state;

    for (size_t i = 0; i < N_OF(corrupts); i++) {
        char sub[4200], store[4300];
        gkv_graph *g;
        gkv_part *pt;
        struct tp t;
        gkv_err rc;

        snprintf(sub, sizeof sub, "%s/c%zu", f->dir, i);
        assert_int_equal(mkdir(sub, 0755), 0);
        write_hetero_range(&t, sub, &g, 1);
        GKVT_OK(gkv_part_open(&pt, t.json, 0, 0));     /* good before */
        gkv_part_close(pt);
        snprintf(store, sizeof store, "%s/part-0", sub);
        apply(store, &corrupts[i]);
        rc = gkv_part_open(&pt, t.json, 0, 0);
        if (rc != GKV_ECORRUPT)
            fail_msg("%s op %d: got %s (%s)", corrupts[i].tensor,
                     corrupts[i].op, gkv_err_name(rc), gkv_part_errmsg(NULL));
        assert_null(pt);
        gkvt_expect_msg(gkv_part_errmsg(NULL), corrupts[i].msg);
        gkvt_expect_msg(gkv_part_errmsg(NULL), "partition 0");
        GKVT_OK(gkv_part_open(&pt, t.json, 1, 0));     /* the other is fine */
        gkv_part_close(pt);
        tp_free(&t);
        gkv_graph_free(g);
    }
}

/* A tensor the config says is empty must not be there. */
static void
test_corrupt_unexpected_tensor(void **state)
{
    struct fx *f = *state;
    gkv_graph *g;
    gkv_part *pt;
    gkv_store *s;
    struct tp t;
    char store[4300];
    const int64_t zero = 0;

    write_rmat(&t, f->dir, &g, 0);
    snprintf(store, sizeof store, "%s/part-2", f->dir);
    /* an indptr of one row 0 for no nodes is harmless */
    GKVT_OK(gkv_store_open(&s, store, GKV_NOSYNC, NULL));
    put_i64(s, "csc/_N:_E:_N/indptr", 0, 1, &zero);
    gkv_store_close(s);
    GKVT_OK(gkv_part_open(&pt, t.json, 2, 0));
    gkv_part_close(pt);
    GKVT_OK(gkv_store_open(&s, store, GKV_NOSYNC, NULL));
    put_i64(s, "csc/_N:_E:_N/indices", 0, 1, &zero);
    gkv_store_close(s);
    assert_int_equal(gkv_part_open(&pt, t.json, 2, 0), GKV_ECORRUPT);
    gkvt_expect_msg(gkv_part_errmsg(NULL), "csc/_N:_E:_N/indices");
    tp_free(&t);
    gkv_graph_free(g);
}

static void
test_alloc_failures(void **state)
{
    struct fx *f = *state;
    gkv_graph *g;
    gkv_part *pt = NULL;
    struct tp t;
    gkv_err rc;
    long base;
    int n;

    write_hetero_range(&t, f->dir, &g, 1);
    base = gkvt_alloc_live();
    for (n = 0;; n++) {
        gkvt_alloc_fail_at(n);
        rc = gkv_part_open(&pt, t.json, 0, 0);
        gkvt_alloc_fail_at(-1);
        if (rc == GKV_OK)
            break;
        if (rc != GKV_ENOMEM)
            fail_msg("allocation %d: %s (%s)", n, gkv_err_name(rc),
                     gkv_part_errmsg(NULL));
        assert_null(pt);
        assert_int_equal(gkvt_alloc_live(), base);
    }
    assert_true(n > 20);
    base = gkvt_alloc_live();
    for (n = 0;; n++) {
        int64_t nodes[2] = {1, 0}, *s, *d, *id;
        size_t m;
        gkvt_alloc_fail_at(n);
        rc = gkv_part_in_subgraph(pt, 0, nodes, 2, &s, &d, &id, &m);
        gkvt_alloc_fail_at(-1);
        if (rc == GKV_OK) {
            gkv_free(s);
            gkv_free(d);
            gkv_free(id);
            break;
        }
        assert_int_equal(rc, GKV_ENOMEM);
        assert_null(s);
        assert_int_equal(gkvt_alloc_live(), base);
    }
    assert_int_equal(n, 3);
    gkv_part_close(pt);
    tp_free(&t);
    gkv_graph_free(g);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_hetero_range_by_hand, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hetero_scrambled, setup, teardown),
        cmocka_unit_test_setup_teardown(test_homo_random_assign, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rmat_range, setup, teardown),
        cmocka_unit_test_setup_teardown(test_open_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_partitions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_unexpected_tensor, setup, teardown),
        cmocka_unit_test_setup_teardown(test_alloc_failures, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
