/* partition_test.c - the partitioner (graph/part_*.c) against the
 * partition format contract: for the fixed heterogeneous and homogeneous
 * graphs and a weighted R-MAT graph, every method and 1..4 parts, reopen
 * every store with the kv API and the JSON with jansson and check that
 * every edge lands exactly once, in its destination's partition, at the
 * CSC position its mapping claims; that node ranges tile; that features
 * land at the new IDs byte for byte; that the CSR holds exactly the
 * out-edges of owned nodes. Then METIS quality on two cliques, METIS
 * balance with a training mask, every bad input (each a clear message,
 * nothing left behind), cancellation at every progress call and allocation
 * failures at every allocation. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <jansson.h>
#include "gkvt.h"
#include "graph/gkv_graph.h"
#include "graph/gkv_partition.h"
#include "graph/gkv_part.h"

/* graph/part_write_metis.c, for tests: METIS's graph is thinned by default
 * from n adjacency entries (n < 0: the default, 2^24). */
void pw__set_thin_min(int64_t n);

#define MAXF 8

struct fx {
    char *dir;
    char out[4096];
    char msg[1024];
};

static int
setup(void **state)
{
    return gkvt_file_setup(state, sizeof(struct fx), "part", "out");
}

/* ---- .npy files ----------------------------------------------------------- */

static void
write_npy(const char *path, gkv_dtype dt, uint64_t rows, unsigned rdim,
          const uint64_t *rshape, const void *data)
{
    uint64_t shape[5] = {rows};
    size_t rb = gkv_dtype_size(dt);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

    assert_true(fd >= 0);
    for (unsigned d = 0; d < rdim; d++) {
        shape[d + 1] = rshape[d];
        rb *= rshape[d];
    }
    GKVT_OK(gkv_npy_write_header(fd, dt, rdim + 1, shape, NULL, NULL, 0));
    if (rows * rb > 0)
        assert_int_equal(write(fd, data, rows * rb), (ssize_t)(rows * rb));
    close(fd);
}

static int64_t *
read_npy_i64(const char *path, int64_t want)
{
    gkv_npy_map m;
    int64_t *v = malloc((size_t)want * 8 + 8);

    if (gkv_npy_map_open(&m, path, NULL, 0) != GKV_OK)
        fail_msg("mapping file '%s' does not open", path);
    assert_int_equal(m.hdr.dtype, GKV_I64);
    assert_int_equal(m.hdr.ndim, 1);
    assert_int_equal(m.hdr.shape[0], (uint64_t)want);
    if (want > 0)
        memcpy(v, m.data, (size_t)want * 8);
    gkv_npy_map_close(&m);
    return v;
}

/* A numpy bool array ('|b1'): the u8 header np.save would write for the
 * same shape, with the descr changed (the same length, so the data offset
 * stays). rdim 0: one bool per row; else rows of rshape[0]. */
static void write_bool_npy(const char *path, uint64_t rows, unsigned rdim,
                           const uint64_t *rshape, const void *data);

/* ---- the directory as a list of names (to see that nothing appeared) ---- */

static void
write_bool_npy(const char *path, uint64_t rows, unsigned rdim,
               const uint64_t *rshape, const void *data)
{
    size_t len;
    unsigned char *b;
    char *at;
    FILE *fp;

    write_npy(path, GKV_U8, rows, rdim, rshape, data);
    b = gkvt_read_file(path, &len);
    at = strstr((char *)b + 10, "'|u1'");
    assert_non_null(at);
    memcpy(at, "'|b1'", 5);
    fp = fopen(path, "wb");
    assert_int_equal(fwrite(b, 1, len, fp), len);
    fclose(fp);
    free(b);
}

/* ---- test graphs and their features ---------------------------------------- */

struct feat_src {
    gkv_part_feat pf;
    unsigned char *rows;          /* what the feature holds, for checking */
    size_t row_bytes;
    char path[4096];
    char type[256], name[64];
};

struct tg {
    gkv_graph *g;
    struct feat_src feats[MAXF];
    int nfeats;
};

static void
add_feat(struct fx *f, struct tg *t, int is_edge, const char *type,
         const char *name, gkv_dtype dt, unsigned rdim, uint64_t cols,
         int in_memory, uint64_t seed)
{
    struct feat_src *s = &t->feats[t->nfeats++];
    uint64_t rows, shape[1] = {cols};
    int idx;

    if (is_edge) {
        assert_int_equal(gkv_graph_etype_find(t->g, type, &idx), GKV_OK);
        rows = (uint64_t)gkv_graph_num_edges(t->g, idx);
    } else {
        assert_int_equal(gkv_graph_ntype_find(t->g, type, &idx), GKV_OK);
        rows = (uint64_t)gkv_graph_num_nodes(t->g, idx);
    }
    s->row_bytes = gkv_dtype_size(dt) * (rdim ? cols : 1);
    s->rows = malloc(rows * s->row_bytes + 1);
    for (uint64_t i = 0; i < rows * s->row_bytes; i++)
        s->rows[i] = (unsigned char)(tools__splitmix64(&seed) >> 13);
    snprintf(s->type, sizeof s->type, "%s", type);
    snprintf(s->name, sizeof s->name, "%s", name);
    memset(&s->pf, 0, sizeof s->pf);
    s->pf.is_edge = is_edge;
    s->pf.type = s->type;
    s->pf.name = s->name;
    if (in_memory) {
        s->pf.data = s->rows;
        s->pf.dtype = dt;
        s->pf.ndim = rdim;
        s->pf.shape[0] = cols;
        s->pf.nrows = rows;
    } else {
        char fn[300];
        snprintf(fn, sizeof fn, "%s-%s-%s.npy", is_edge ? "e" : "n", type, name);
        for (char *c = fn; *c; c++)
            if (*c == ':')
                *c = '_';
        snprintf(s->path, sizeof s->path, "%s/%s", f->dir, fn);
        write_npy(s->path, dt, rows, rdim, shape, s->rows);
        s->pf.path = s->path;
    }
}

static void
tg_free(struct tg *t)
{
    for (int i = 0; i < t->nfeats; i++)
        free(t->feats[i].rows);
    gkv_graph_free(t->g);
    memset(t, 0, sizeof *t);
}

static void
make_hetero(struct fx *f, struct tg *t)
{
    memset(t, 0, sizeof *t);
    GKVT_OK(gkv_graph_fixed_hetero(&t->g));
    add_feat(f, t, 0, "user", "feat", GKV_F32, 1, 3, 0, 1);
    add_feat(f, t, 0, "item", "label", GKV_I64, 0, 1, 1, 2);
    add_feat(f, t, 1, "user:buys:item", "feat", GKV_F64, 1, 2, 0, 3);
    add_feat(f, t, 1, "similar", "kind", GKV_U8, 0, 1, 1, 4);
}

static void
make_homo(struct fx *f, struct tg *t)
{
    memset(t, 0, sizeof *t);
    GKVT_OK(gkv_graph_fixed_homo(&t->g));
    add_feat(f, t, 0, "_N", "feat", GKV_F32, 1, 4, 0, 5);
    add_feat(f, t, 1, "_N:_E:_N", "feat", GKV_I32, 1, 2, 0, 6);
}

/* R-MAT scale 10 with weights (i % 7) / 2 added, so weights travel too. */
static void
make_rmat(struct fx *f, struct tg *t)
{
    gkv_rmat_spec rs = {.scale = 10, .seed = 42};
    gkv_graph *r;
    gkv_coo c;
    float *w;

    memset(t, 0, sizeof *t);
    GKVT_OK(gkv_rmat_graph(&r, &rs, 1));
    GKVT_OK(gkv_graph_edges(r, 0, &c));
    w = malloc((size_t)c.n * sizeof *w);
    for (int64_t i = 0; i < c.n; i++)
        w[i] = (float)(i % 7) / 2;
    GKVT_OK(gkv_graph_new_homo(&t->g, 1024));
    GKVT_OK(gkv_graph_add_edges(t->g, 0, c.src, c.dst, w, (size_t)c.n));
    free(w);
    gkv_graph_free(r);
    add_feat(f, t, 0, "_N", "feat", GKV_F32, 1, 8, 0, 7);
    add_feat(f, t, 1, "_N:_E:_N", "w2", GKV_F16, 0, 1, 1, 8);
}

static void
spec_init(gkv_part_spec *sp, const struct tg *t, gkv_part_feat *pf,
          gkv_part_method m, int P)
{
    memset(sp, 0, sizeof *sp);
    sp->name = "g";
    sp->method = m;
    sp->num_parts = P;
    sp->seed = 7;
    sp->nthreads = 2;
    for (int i = 0; i < t->nfeats; i++)
        pf[i] = t->feats[i].pf;
    sp->feats = pf;
    sp->nfeats = (size_t)t->nfeats;
}

/* ---- the verifier ----------------------------------------------------------- */

struct pv {
    int P, nnt, net;
    int64_t *nst;                 /* nnt x (P + 1) type-wise starts */
    int64_t *est;                 /* net x (P + 1) */
    int64_t **nmap, **emap;
    gkv_store **st;
    size_t *ntensors;             /* per partition, expected */
};

static int64_t
jint(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);

    if (!json_is_integer(v))
        fail_msg("JSON: '%s' is not an integer", k);
    return (int64_t)json_integer_value(v);
}

static int
part_of(const struct pv *v, const int64_t *st, int64_t id)
{
    for (int p = 0; p < v->P; p++)
        if (id >= st[p] && id < st[p + 1])
            return p;
    fail_msg("ID %lld is in no partition", (long long)id);
    return -1;
}

/* All rows of tensor 'name' of partition p, checking its range; NULL (and
 * checking that it is absent) when the range is empty. */
static void *
tensor_all(struct pv *v, int p, const char *name, gkv_dtype dt,
           size_t row_bytes, uint64_t lo, uint64_t hi)
{
    gkv_tensor_desc d;
    gkv_err rc = gkv_tensor_info(v->st[p], NULL, name, &d);
    void *b;

    if (hi <= lo) {
        if (rc != GKV_ENOTFOUND)
            fail_msg("partition %d: tensor '%s' should not exist (empty "
                     "range), got %s", p, name, gkv_err_name(rc));
        return NULL;
    }
    if (rc != GKV_OK)
        fail_msg("partition %d: tensor '%s' missing: %s", p, name,
                 gkv_err_name(rc));
    if (d.lo != lo || d.hi != hi || d.dtype != dt || d.row_bytes != row_bytes)
        fail_msg("partition %d: tensor '%s': range [%llu,%llu) dtype %d row "
                 "%zu, expected [%llu,%llu) dtype %d row %zu", p, name,
                 (unsigned long long)d.lo, (unsigned long long)d.hi, d.dtype,
                 d.row_bytes, (unsigned long long)lo, (unsigned long long)hi,
                 dt, row_bytes);
    b = malloc((size_t)(hi - lo) * row_bytes);
    GKVT_OK(gkv_tensor_read(v->st[p], NULL, name, lo, hi, b,
                            (size_t)(hi - lo) * row_bytes));
    v->ntensors[p]++;
    return b;
}

struct csr_ref {
    int64_t col, eid, dst;
    float w;
};

static int
csr_ref_cmp(const void *x, const void *y)
{
    const struct csr_ref *a = x, *b = y;

    if (a->col != b->col)
        return (a->col > b->col) - (a->col < b->col);
    return (a->eid > b->eid) - (a->eid < b->eid);
}

/* Checks the partition at 'out' against graph t->g written with 'sp';
 * returns the edge cut it finds. */
static int64_t
verify(const char *out, const struct tg *t, const gkv_part_spec *sp)
{
    const gkv_graph *g = t->g;
    struct pv v;
    char path[8192], name[512];
    json_t *j, *o, *a;
    json_error_t je;
    int64_t next, total_n = 0, total_e = 0, cut = 0;
    int csr = (sp->flags & GKV_PART_CSR) != 0;

    memset(&v, 0, sizeof v);
    v.P = sp->num_parts;
    v.nnt = gkv_graph_num_ntypes(g);
    v.net = gkv_graph_num_etypes(g);
    snprintf(path, sizeof path, "%s/%s.json", out, sp->name);
    if ((j = json_load_file(path, 0, &je)) == NULL)
        fail_msg("%s: %s (line %d)", path, je.text, je.line);
    assert_string_equal(json_string_value(json_object_get(j, "graph_name")),
                        sp->name);
    assert_int_equal(jint(j, "gkv_format"), 1);
    assert_int_equal(jint(j, "num_parts"), v.P);
    assert_int_equal(jint(j, "halo_hops"), 0);
    assert_string_equal(json_string_value(json_object_get(j, "part_method")),
                        gkv_part_method_name(sp->method));
    assert_true(json_is_boolean(json_object_get(j, "csr")));
    assert_int_equal(json_is_true(json_object_get(j, "csr")), csr);
    for (int p = 0; p < v.P; p++) {
        char key[32];
        snprintf(key, sizeof key, "part-%d", p);
        o = json_object_get(j, key);
        assert_true(json_is_object(o));
        assert_string_equal(json_string_value(json_object_get(o, "part_graph")), key);
        assert_string_equal(json_string_value(json_object_get(o, "node_feats")), key);
        assert_string_equal(json_string_value(json_object_get(o, "edge_feats")), key);
    }

    /* node ranges: homogeneous IDs tile partition by partition, type by
     * type; type-wise ranges tile [0, count) */
    v.nst = calloc((size_t)v.nnt * (size_t)(v.P + 1), sizeof *v.nst);
    v.est = calloc((size_t)(v.net + 1) * (size_t)(v.P + 1), sizeof *v.est);
    assert_int_equal(json_object_size(json_object_get(j, "ntypes")), v.nnt);
    assert_int_equal(json_object_size(json_object_get(j, "etypes")), v.net);
    for (int tt = 0; tt < v.nnt; tt++) {
        const char *tn = gkv_graph_ntype_name(g, tt);
        assert_int_equal(jint(json_object_get(j, "ntypes"), tn), tt);
        total_n += gkv_graph_num_nodes(g, tt);
    }
    next = 0;
    for (int p = 0; p < v.P; p++)
        for (int tt = 0; tt < v.nnt; tt++) {
            a = json_array_get(json_object_get(json_object_get(j, "node_map"),
                               gkv_graph_ntype_name(g, tt)), (size_t)p);
            assert_int_equal(json_array_size(a), 2);
            assert_int_equal(json_integer_value(json_array_get(a, 0)), next);
            next = json_integer_value(json_array_get(a, 1));
            v.nst[tt * (v.P + 1) + p + 1] = v.nst[tt * (v.P + 1) + p] +
                next - json_integer_value(json_array_get(a, 0));
        }
    assert_int_equal(next, total_n);
    assert_int_equal(jint(j, "num_nodes"), total_n);
    for (int tt = 0; tt < v.nnt; tt++) {
        assert_int_equal(v.nst[tt * (v.P + 1) + v.P], gkv_graph_num_nodes(g, tt));
        if (sp->method != GKV_PART_METIS)        /* equal slices */
            for (int p = 0; p < v.P; p++) {
                int64_t n = v.nst[tt * (v.P + 1) + p + 1] - v.nst[tt * (v.P + 1) + p];
                int64_t c = gkv_graph_num_nodes(g, tt);
                assert_true(n == c / v.P || n == c / v.P + 1);
            }
    }
    next = 0;
    for (int p = 0; p < v.P; p++)
        for (int e = 0; e < v.net; e++) {
            gkv_etype_info ei;
            GKVT_OK(gkv_graph_etype_info(g, e, &ei));
            a = json_array_get(json_object_get(json_object_get(j, "edge_map"),
                               ei.canonical), (size_t)p);
            assert_int_equal(json_array_size(a), 2);
            assert_int_equal(json_integer_value(json_array_get(a, 0)), next);
            next = json_integer_value(json_array_get(a, 1));
            v.est[e * (v.P + 1) + p + 1] = v.est[e * (v.P + 1) + p] +
                next - json_integer_value(json_array_get(a, 0));
        }
    for (int e = 0; e < v.net; e++)
        total_e += gkv_graph_num_edges(g, e);
    assert_int_equal(next, total_e);
    assert_int_equal(jint(j, "num_edges"), total_e);

    /* mappings: permutations, order-preserving within a partition; range
     * keeps every ID */
    v.nmap = calloc((size_t)v.nnt, sizeof *v.nmap);
    v.emap = calloc((size_t)v.net + 1, sizeof *v.emap);
    for (int tt = 0; tt < v.nnt; tt++) {
        int64_t n = gkv_graph_num_nodes(g, tt), *last;
        const int64_t *st = v.nst + tt * (v.P + 1);
        char *seen = calloc((size_t)n + 1, 1);
        const char *rel = json_string_value(json_object_get(json_object_get(
            json_object_get(j, "mapping"), "node"), gkv_graph_ntype_name(g, tt)));
        assert_non_null(rel);
        snprintf(path, sizeof path, "%s/%s", out, rel);
        v.nmap[tt] = read_npy_i64(path, n);
        last = malloc(((size_t)v.P + 1) * sizeof *last);
        for (int p = 0; p < v.P; p++)
            last[p] = -1;
        for (int64_t x = 0; x < n; x++) {
            int64_t y = v.nmap[tt][x];
            int p;
            assert_true(y >= 0 && y < n && !seen[y]);
            seen[y] = 1;
            p = part_of(&v, st, y);
            assert_true(y > last[p]);           /* original order kept */
            last[p] = y;
            if (sp->method == GKV_PART_RANGE)
                assert_int_equal(y, x);
        }
        free(last);
        free(seen);
    }
    v.st = calloc((size_t)v.P, sizeof *v.st);
    v.ntensors = calloc((size_t)v.P, sizeof *v.ntensors);
    for (int p = 0; p < v.P; p++) {
        snprintf(path, sizeof path, "%s/part-%d", out, p);
        GKVT_OK(gkv_store_open(&v.st[p], path, GKV_RDONLY, NULL));
    }

    for (int e = 0; e < v.net; e++) {
        gkv_etype_info ei;
        gkv_coo c;
        const int64_t *nsd, *est = v.est + e * (v.P + 1);
        int64_t *lastd, **indptr, **indices, n;
        float **wt;
        char *seen;
        json_t *wl = json_object_get(j, "weighted");
        int listed = 0;

        GKVT_OK(gkv_graph_etype_info(g, e, &ei));
        GKVT_OK(gkv_graph_edges(g, e, &c));
        for (size_t k = 0; k < json_array_size(wl); k++)
            listed |= strcmp(json_string_value(json_array_get(wl, k)),
                             ei.canonical) == 0;
        assert_int_equal(listed, ei.weighted);
        assert_int_equal(jint(json_object_get(j, "etypes"), ei.canonical), e);
        n = c.n;
        snprintf(path, sizeof path, "%s/mapping/edge-%s.npy", out, ei.canonical);
        v.emap[e] = read_npy_i64(path, n);
        seen = calloc((size_t)n + 1, 1);
        for (int64_t i = 0; i < n; i++) {
            int64_t y = v.emap[e][i];
            assert_true(y >= 0 && y < n && !seen[y]);
            seen[y] = 1;
        }
        free(seen);
        nsd = v.nst + ei.dst_ntype * (v.P + 1);
        indptr = calloc((size_t)v.P, sizeof *indptr);
        indices = calloc((size_t)v.P, sizeof *indices);
        wt = calloc((size_t)v.P, sizeof *wt);
        for (int p = 0; p < v.P; p++) {
            int64_t np = nsd[p + 1] - nsd[p], m = est[p + 1] - est[p];
            snprintf(name, sizeof name, "csc/%s/indptr", ei.canonical);
            indptr[p] = tensor_all(&v, p, name, GKV_I64, 8, 0,
                                   np > 0 ? (uint64_t)np + 1 : 0);
            if (np == 0) {
                assert_int_equal(m, 0);
                continue;
            }
            assert_int_equal(indptr[p][0], 0);
            for (int64_t k = 0; k < np; k++)
                assert_true(indptr[p][k] <= indptr[p][k + 1]);
            assert_int_equal(indptr[p][np], m);
            snprintf(name, sizeof name, "csc/%s/indices", ei.canonical);
            indices[p] = tensor_all(&v, p, name, GKV_I64, 8, (uint64_t)est[p],
                                    (uint64_t)est[p + 1]);
            snprintf(name, sizeof name, "csc/%s/weight", ei.canonical);
            if (ei.weighted)
                wt[p] = tensor_all(&v, p, name, GKV_F32, 4, (uint64_t)est[p],
                                   (uint64_t)est[p + 1]);
            else
                assert_int_equal(gkv_tensor_info(v.st[p], NULL, name, NULL),
                                 GKV_ENOTFOUND);
        }
        /* every edge: in its destination's partition, at the position its
         * new ID names, inside its column, with its new source and weight;
         * ties in original order */
        lastd = malloc(((size_t)gkv_graph_num_nodes(g, ei.dst_ntype) + 1) *
                       sizeof *lastd);
        for (int64_t x = 0; x < gkv_graph_num_nodes(g, ei.dst_ntype); x++)
            lastd[x] = -1;
        for (int64_t i = 0; i < n; i++) {
            int64_t ns = v.nmap[ei.src_ntype][c.src[i]];
            int64_t nd = v.nmap[ei.dst_ntype][c.dst[i]];
            int64_t id = v.emap[e][i], k, col;
            int p = part_of(&v, nsd, nd);
            if (id < est[p] || id >= est[p + 1])
                fail_msg("%s edge %lld (%lld->%lld): new ID %lld is outside "
                         "partition %d's [%lld,%lld)", ei.canonical,
                         (long long)i, (long long)c.src[i], (long long)c.dst[i],
                         (long long)id, p, (long long)est[p],
                         (long long)est[p + 1]);
            k = id - est[p];
            col = nd - nsd[p];
            assert_true(indptr[p][col] <= k && k < indptr[p][col + 1]);
            assert_int_equal(indices[p][k], ns);
            if (ei.weighted)
                assert_true(wt[p][k] == c.w[i]);
            assert_true(id > lastd[nd]);
            lastd[nd] = id;
            cut += part_of(&v, v.nst + ei.src_ntype * (v.P + 1), ns) != p;
        }
        free(lastd);

        /* CSR: exactly the out-edges of owned sources, by new edge ID */
        for (int p = 0; p < v.P; p++) {
            const int64_t *nss = v.nst + ei.src_ntype * (v.P + 1);
            int64_t a0 = nss[p], ns = nss[p + 1] - a0, m = 0;
            struct csr_ref *ref = malloc(((size_t)n + 1) * sizeof *ref);
            int64_t *cp, *ci, *ce;
            float *cw = NULL;

            snprintf(name, sizeof name, "csr/%s/indptr", ei.canonical);
            if (!csr) {
                assert_int_equal(gkv_tensor_info(v.st[p], NULL, name, NULL),
                                 GKV_ENOTFOUND);
                free(ref);
                continue;
            }
            for (int64_t i = 0; i < n; i++) {
                int64_t s = v.nmap[ei.src_ntype][c.src[i]];
                if (s < a0 || s >= a0 + ns)
                    continue;
                ref[m].col = s - a0;
                ref[m].eid = v.emap[e][i];
                ref[m].dst = v.nmap[ei.dst_ntype][c.dst[i]];
                ref[m].w = c.w != NULL ? c.w[i] : 0;
                m++;
            }
            qsort(ref, (size_t)m, sizeof *ref, csr_ref_cmp);
            cp = tensor_all(&v, p, name, GKV_I64, 8, 0,
                            ns > 0 ? (uint64_t)ns + 1 : 0);
            if (ns == 0) {
                assert_int_equal(m, 0);
                free(ref);
                continue;
            }
            snprintf(name, sizeof name, "csr/%s/indices", ei.canonical);
            ci = tensor_all(&v, p, name, GKV_I64, 8, 0, (uint64_t)m);
            snprintf(name, sizeof name, "csr/%s/eids", ei.canonical);
            ce = tensor_all(&v, p, name, GKV_I64, 8, 0, (uint64_t)m);
            snprintf(name, sizeof name, "csr/%s/weight", ei.canonical);
            if (ei.weighted)
                cw = tensor_all(&v, p, name, GKV_F32, 4, 0, (uint64_t)m);
            assert_int_equal(cp[0], 0);
            assert_int_equal(cp[ns], m);
            for (int64_t k = 0, col = 0; k < m; k++) {
                while (cp[col + 1] <= k)
                    col++;
                assert_int_equal(col, ref[k].col);
                assert_int_equal(ci[k], ref[k].dst);
                assert_int_equal(ce[k], ref[k].eid);
                if (cw != NULL)
                    assert_true(cw[k] == ref[k].w);
            }
            free(cp);
            free(ci);
            free(ce);
            free(cw);
            free(ref);
        }
        for (int p = 0; p < v.P; p++) {
            free(indptr[p]);
            free(indices[p]);
            free(wt[p]);
        }
        free(indptr);
        free(indices);
        free(wt);
    }

    /* features: each row exactly once, at the new ID, byte for byte */
    for (int fi = 0; fi < t->nfeats; fi++) {
        const struct feat_src *fs = &t->feats[fi];
        int idx, tcount = 0;
        const int64_t *map, *st;
        int64_t rows;
        const char *key;
        unsigned char **got;
        json_t *names;

        if (fs->pf.is_edge) {
            gkv_etype_info ei;
            GKVT_OK(gkv_graph_etype_find(g, fs->type, &idx));
            GKVT_OK(gkv_graph_etype_info(g, idx, &ei));
            map = v.emap[idx];
            st = v.est + idx * (v.P + 1);
            rows = ei.num_edges;
            key = ei.canonical;
            snprintf(name, sizeof name, "edge/%s/%s", ei.canonical, fs->name);
            names = json_object_get(json_object_get(j, "edge_feats"), key);
        } else {
            GKVT_OK(gkv_graph_ntype_find(g, fs->type, &idx));
            map = v.nmap[idx];
            st = v.nst + idx * (v.P + 1);
            rows = gkv_graph_num_nodes(g, idx);
            key = gkv_graph_ntype_name(g, idx);
            snprintf(name, sizeof name, "node/%s/%s", key, fs->name);
            names = json_object_get(json_object_get(j, "node_feats"), key);
        }
        for (size_t k = 0; k < json_array_size(names); k++)
            tcount += strcmp(json_string_value(json_array_get(names, k)),
                             fs->name) == 0;
        assert_int_equal(tcount, 1);
        got = calloc((size_t)v.P, sizeof *got);
        for (int p = 0; p < v.P; p++) {
            gkv_tensor_desc d;
            if (st[p + 1] > st[p]) {
                GKVT_OK(gkv_tensor_info(v.st[p], NULL, name, &d));
                assert_int_equal(d.row_bytes, fs->row_bytes);
            }
            got[p] = tensor_all(&v, p, name, st[p + 1] > st[p] ? d.dtype : 0,
                                fs->row_bytes, (uint64_t)st[p],
                                (uint64_t)st[p + 1]);
        }
        for (int64_t x = 0; x < rows; x++) {
            int64_t y = map[x];
            int p = part_of(&v, st, y);
            if (memcmp(got[p] + (size_t)(y - st[p]) * fs->row_bytes,
                       fs->rows + (size_t)x * fs->row_bytes, fs->row_bytes) != 0)
                fail_msg("feature '%s': row of original ID %lld differs at "
                         "new ID %lld (partition %d)", name, (long long)x,
                         (long long)y, p);
        }
        for (int p = 0; p < v.P; p++)
            free(got[p]);
        free(got);
    }

    /* nothing else in the stores */
    for (int p = 0; p < v.P; p++) {
        gkv_tensor_desc *d;
        size_t nd;
        GKVT_OK(gkv_tensor_list(v.st[p], NULL, 1, &d, &nd));
        if (nd != v.ntensors[p])
            fail_msg("partition %d holds %zu tensors, %zu checked", p, nd,
                     v.ntensors[p]);
        gkv_free(d);
        gkv_store_close(v.st[p]);
    }
    for (int tt = 0; tt < v.nnt; tt++)
        free(v.nmap[tt]);
    for (int e = 0; e < v.net; e++)
        free(v.emap[e]);
    free(v.nmap);
    free(v.emap);
    free(v.st);
    free(v.ntensors);
    free(v.nst);
    free(v.est);
    json_decref(j);
    return cut;
}

/* The partition reader (graph/part.c) opens every partition, with all its
 * checks, and sees the same adjacency as the mappings say. */
static void
reader_agrees(const char *out, const struct tg *t, const gkv_part_spec *sp)
{
    char path[8192];

    snprintf(path, sizeof path, "%s/%s.json", out, sp->name);
    for (int p = 0; p < sp->num_parts; p++) {
        gkv_part *pt;
        if (gkv_part_open(&pt, path, p, 0) != GKV_OK)
            fail_msg("reader: partition %d: %s", p, gkv_part_errmsg(NULL));
        for (int e = 0; e < gkv_graph_num_etypes(t->g); e++) {
            gkv_adj a;
            int64_t m;
            GKVT_OK(gkv_part_csc(pt, e, &a));
            m = a.indptr[a.col_hi - a.col_lo];
            assert_int_equal(gkv_part_num_edges(pt, e), m);
            assert_null(a.eids);
            if (sp->flags & GKV_PART_CSR)
                GKVT_OK(gkv_part_csr(pt, e, &a));
            else
                assert_int_equal(gkv_part_csr(pt, e, &a), GKV_ENOTSUP);
        }
        gkv_part_close(pt);
    }
}

/* ---- round trips ------------------------------------------------------------- */

static void
round_trips(struct fx *f, struct tg *t)
{
    static const gkv_part_method methods[] = {GKV_PART_RANDOM, GKV_PART_RANGE,
                                              GKV_PART_METIS};
    gkv_part_feat pf[MAXF];
    gkv_part_spec sp;
    gkv_part_report rep;

    for (size_t mi = 0; mi < 3; mi++)
        for (int P = 1; P <= 4; P++) {
            char *before = gkvt_listing(f->dir), *after;
            spec_init(&sp, t, pf, methods[mi], P);
            if (P % 2 == 0)
                sp.flags |= GKV_PART_CSR;
            if (gkv_partition_write(t->g, &sp, f->out, &rep, f->msg,
                                    sizeof f->msg) != GKV_OK)
                fail_msg("%s into %d: %s", gkv_part_method_name(methods[mi]),
                         P, f->msg);
            assert_int_equal(verify(f->out, t, &sp), rep.edge_cut);
            reader_agrees(f->out, t, &sp);
            assert_true(rep.max_part_nodes >= rep.min_part_nodes);
            assert_true(rep.edge_cut >= 0 && rep.edge_cut <= rep.num_edges);
            if (P == 1)
                assert_int_equal(rep.edge_cut, 0);
            /* exactly OUT appeared: no temporary left */
            after = gkvt_listing(f->dir);
            assert_true(strstr(after, "out\n") != NULL);
            assert_null(strstr(after, ".tmp-"));
            assert_int_equal(strlen(after), strlen(before) + 4);
            free(before);
            free(after);
            gkvt_rmtree(strdup(f->out));
        }
}

static void
test_round_trip_hetero(void **state)
{
    struct fx *f = *state;
    struct tg t;

    make_hetero(f, &t);
    round_trips(f, &t);
    tg_free(&t);
}

static void
test_round_trip_homo(void **state)
{
    struct fx *f = *state;
    struct tg t;

    make_homo(f, &t);
    round_trips(f, &t);
    tg_free(&t);
}

static void
test_round_trip_rmat(void **state)
{
    struct fx *f = *state;
    struct tg t;

    make_rmat(f, &t);
    round_trips(f, &t);
    tg_free(&t);
}

/* A node type with no nodes, an edge type with no edges, a node type
 * with fewer nodes than partitions, and a graph without any edge. */
static void
test_empty_types(void **state)
{
    struct fx *f = *state;
    struct tg t;
    int64_t s[3] = {0, 1, 2}, d[3] = {1, 0, 0};

    memset(&t, 0, sizeof t);
    GKVT_OK(gkv_graph_new(&t.g));
    GKVT_OK(gkv_graph_add_ntype(t.g, "a", 6, NULL));
    GKVT_OK(gkv_graph_add_ntype(t.g, "none", 0, NULL));
    GKVT_OK(gkv_graph_add_ntype(t.g, "b", 2, NULL));
    GKVT_OK(gkv_graph_add_etype(t.g, "a", "x", "b", NULL));
    GKVT_OK(gkv_graph_add_etype(t.g, "a", "y", "none", NULL));
    GKVT_OK(gkv_graph_add_etype(t.g, "b", "z", "a", NULL));
    GKVT_OK(gkv_graph_add_edges(t.g, 0, s, d, NULL, 3));
    add_feat(f, &t, 0, "none", "feat", GKV_F32, 1, 2, 0, 9);
    add_feat(f, &t, 0, "b", "feat", GKV_F32, 1, 2, 1, 10);
    add_feat(f, &t, 1, "a:y:none", "feat", GKV_F32, 0, 1, 0, 11);
    round_trips(f, &t);
    tg_free(&t);

    memset(&t, 0, sizeof t);
    GKVT_OK(gkv_graph_new_homo(&t.g, 7));
    round_trips(f, &t);
    tg_free(&t);
}

/* Range on the fixed homogeneous graph into 2: the hand-checked answer. */
static void
test_range_hand_checked(void **state)
{
    struct fx *f = *state;
    gkv_graph *g;
    gkv_part_spec sp;
    gkv_store *s;
    char path[8192];
    int64_t ptr[5], idx[10];
    float w[10];
    /* nodes 4..7 own in-edges 4: (1,9) (3,10); 5: (5,7) (6,11); 6, 7: - */
    static const int64_t want_ptr[5] = {0, 2, 4, 4, 4};
    static const int64_t want_idx[4] = {1, 3, 5, 6};
    static const float want_w[4] = {1.0f, 1.0f, 1.0f, 4.0f};

    GKVT_OK(gkv_graph_fixed_homo(&g));
    memset(&sp, 0, sizeof sp);
    sp.method = GKV_PART_RANGE;
    sp.num_parts = 2;
    GKVT_OK(gkv_partition_write(g, &sp, f->out, NULL, f->msg, sizeof f->msg));
    snprintf(path, sizeof path, "%s/part-1", f->out);
    GKVT_OK(gkv_store_open(&s, path, GKV_RDONLY, NULL));
    /* part 0 owns 0..3 with 2+2+2+4 = 10 in-edges: part 1's start at 10 */
    GKVT_OK(gkv_tensor_read(s, NULL, "csc/_N:_E:_N/indptr", 0, 5, ptr, sizeof ptr));
    GKVT_OK(gkv_tensor_read(s, NULL, "csc/_N:_E:_N/indices", 10, 14, idx, 32));
    GKVT_OK(gkv_tensor_read(s, NULL, "csc/_N:_E:_N/weight", 10, 14, w, 16));
    assert_memory_equal(ptr, want_ptr, sizeof want_ptr);
    assert_memory_equal(idx, want_idx, sizeof want_idx);
    assert_memory_equal(w, want_w, sizeof want_w);
    gkv_store_close(s);
    snprintf(path, sizeof path, "%s/graph.json", f->out);
    {
        json_t *j = json_load_file(path, 0, NULL);
        json_t *em = json_object_get(json_object_get(j, "edge_map"), "_N:_E:_N");
        assert_non_null(j);
        assert_int_equal(json_integer_value(json_array_get(json_array_get(em, 0), 1)), 10);
        assert_int_equal(json_integer_value(json_array_get(json_array_get(em, 1), 1)), 14);
        json_decref(j);
    }
    gkv_graph_free(g);
}

/* ---- METIS ------------------------------------------------------------------ */

static void
test_metis_two_cliques(void **state)
{
    struct fx *f = *state;
    gkv_graph *g;
    gkv_part_spec sp;
    gkv_part_report rm, rr;
    int64_t src[64], dst[64];
    size_t n = 0;
    char rnd[8300];

    /* two 5-cliques (both directions) joined by one edge each way */
    for (int c = 0; c < 2; c++)
        for (int a = 0; a < 5; a++)
            for (int b = a + 1; b < 5; b++) {
                src[n] = 5 * c + a;
                dst[n++] = 5 * c + b;
                src[n] = 5 * c + b;
                dst[n++] = 5 * c + a;
            }
    src[n] = 4; dst[n++] = 5;
    src[n] = 5; dst[n++] = 4;
    GKVT_OK(gkv_graph_new_homo(&g, 10));
    GKVT_OK(gkv_graph_add_edges(g, 0, src, dst, NULL, n));
    memset(&sp, 0, sizeof sp);
    sp.method = GKV_PART_METIS;
    sp.num_parts = 2;
    GKVT_OK(gkv_partition_write(g, &sp, f->out, &rm, f->msg, sizeof f->msg));
    snprintf(rnd, sizeof rnd, "%s/rnd", f->dir);
    sp.method = GKV_PART_RANDOM;
    sp.seed = 3;
    GKVT_OK(gkv_partition_write(g, &sp, rnd, &rr, f->msg, sizeof f->msg));
    print_message("two cliques: METIS cut %lld, random cut %lld\n",
                  (long long)rm.edge_cut, (long long)rr.edge_cut);
    assert_true(rm.edge_cut <= 2);
    assert_true(rm.edge_cut <= rr.edge_cut);
    assert_int_equal(rm.min_part_nodes, 5);
    assert_int_equal(rm.max_part_nodes, 5);
    gkv_graph_free(g);
}

/* A star (a centre and 400 leaves) and one more edge into 11 parts by
 * bisection, its top level by hand: the top bisection leaves a side whose every
 * vertex but one lost its neighbours (the leaves, placed after), fewer
 * vertices than its parts, which libmetis refused with "***Cannot bisect
 * a graph with 0 vertices!" on stdout. Now nothing on stdout, and every
 * node in a part, each within 10 % of 403/11. */
static void metis_owners(const char *out, int64_t n, int P, int *owner);

static void
test_metis_star_sides(void **state)
{
    struct fx *f = *state;
    int64_t src[802], dst[802];
    int owner[403], size[11] = {0};
    char path[8300];
    gkv_part_spec sp;
    gkv_part_report rep;
    gkv_graph *g;
    size_t n = 0;
    struct stat st;
    int fd, saved;

    for (int l = 1; l <= 400; l++) {
        src[n] = 0;
        dst[n++] = l;
    }
    src[n] = 401;
    dst[n++] = 402;
    GKVT_OK(gkv_graph_new_homo(&g, 403));
    GKVT_OK(gkv_graph_add_edges(g, 0, src, dst, NULL, n));
    memset(&sp, 0, sizeof sp);
    sp.name = "g";
    sp.method = GKV_PART_METIS;
    sp.num_parts = 11;
    sp.seed = 1;
    sp.nthreads = 2;
    sp.flags = GKV_PART_FORCE;
    snprintf(path, sizeof path, "%s/stdout", f->dir);
    fflush(stdout);
    saved = dup(1);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(saved >= 0 && fd >= 0 && dup2(fd, 1) == 1);
    close(fd);
    gkv_err rc_keep = gkv_partition_write(g, &sp, f->out, &rep, f->msg, sizeof f->msg);
    fflush(stdout);
    assert_int_equal(dup2(saved, 1), 1);
    close(saved);
    if (rc_keep != GKV_OK)
        fail_msg("%s", f->msg);
    assert_int_equal(stat(path, &st), 0);
    if (st.st_size != 0)
        fail_msg("libmetis wrote %lld bytes on stdout", (long long)st.st_size);
    metis_owners(f->out, 403, 11, owner);
    for (int v = 0; v < 403; v++)
        size[owner[v]]++;
    for (int p = 0; p < 11; p++)              /* 36.6 each, within 10 % */
        assert_true(size[p] >= 33 && size[p] <= 40);
    gkv_graph_free(g);
}

/* The owner of every original node of a homogeneous partition in out:
 * node_map's ranges and mapping/node-_N.npy; each new ID in one range. */
static void
metis_owners(const char *out, int64_t n, int P, int *owner)
{
    char path[8300];
    int64_t *nmap, st[GKV_PART_MAX + 1] = {0};
    json_t *j;

    snprintf(path, sizeof path, "%s/g.json", out);
    j = json_load_file(path, 0, NULL);
    assert_non_null(j);
    for (int p = 0; p < P; p++) {
        json_t *a = json_array_get(json_object_get(json_object_get(j, "node_map"), "_N"), (size_t)p);
        assert_int_equal(json_integer_value(json_array_get(a, 0)), st[p]);
        st[p + 1] = json_integer_value(json_array_get(a, 1));
    }
    json_decref(j);
    assert_int_equal(st[P], n);
    snprintf(path, sizeof path, "%s/mapping/node-_N.npy", out);
    nmap = read_npy_i64(path, n);
    for (int64_t v = 0; v < n; v++) {
        owner[v] = -1;
        for (int p = 0; p < P; p++)
            if (nmap[v] >= st[p] && nmap[v] < st[p + 1])
                owner[v] = p;
        assert_true(owner[v] >= 0);
    }
    free(nmap);
}

/* Partitions t by sp with METIS into f->out and checks the result: the
 * verifier's checks, every one of the nn nodes in one part (owner[] gets
 * them), each part non-empty and balanced within METIS's tolerance (k-way's
 * 3 %, bisection's 0.1 % a level; both round to whole nodes), the largest
 * as reported, and the reported cut the input edges src->dst (ne of them)
 * cut, counted here. 'what' names the run in the log. Returns the cut. */
static int64_t
metis_checked(struct fx *f, const struct tg *t, const gkv_part_spec *sp,
              int64_t nn, const int64_t *src, const int64_t *dst, int64_t ne,
              int *owner, const char *what)
{
    gkv_part_report rep;
    int64_t cut = 0, vcut, size[16] = {0}, big = 0;
    int P = sp->num_parts;

    assert_true(P <= 16);
    if (gkv_partition_write(t->g, sp, f->out, &rep, f->msg,
                            sizeof f->msg) != GKV_OK)
        fail_msg("%s: %s", what, f->msg);
    vcut = verify(f->out, t, sp);
    metis_owners(f->out, nn, P, owner);
    for (int64_t e = 0; e < ne; e++)
        cut += owner[src[e]] != owner[dst[e]];
    for (int64_t v = 0; v < nn; v++)
        size[owner[v]]++;
    print_message("%s, %d parts: cut %lld of %lld, parts %lld %lld %lld "
                  "%lld\n", what, P, (long long)cut, (long long)ne,
                  (long long)size[0], (long long)size[1],
                  (long long)size[2], (long long)size[3]);
    assert_int_equal(rep.edge_cut, cut);
    assert_int_equal(vcut, cut);
    for (int p = 0; p < P; p++) {
        assert_true(size[p] * P <= nn * 103 / 100 + P);
        assert_true(size[p] > 0);
        big = size[p] > big ? size[p] : big;
    }
    assert_int_equal(rep.max_part_nodes, big);
    return cut;
}

/* What METIS is given: each neighbour once, weighing its input edges
 * (duplicates, both directions), no self-loops, and (bisection, one
 * constraint) no node without a neighbour, which fills the parts after.
 * For each choice of routine and matching, on three 8-cliques joined by a
 * bridge taken 3 times and one taken once, with self-loops, duplicates
 * and 12 isolated nodes between them, and on R-MAT scale 10 (~15 % of its
 * nodes isolated; into 3 and 4 parts, which does the top bisection by
 * hand and then cuts its two sides): every node in one part, the parts balanced
 * within METIS's tolerance, the reported cut the input edges cut, counted
 * here, and on the cliques the bridges alone cut by bisection. */
static void
test_metis_graph_given(void **state)
{
    struct fx *f = *state;
    static const unsigned variants[] = {
        0, GKV_PART_METIS_KWAY, GKV_PART_METIS_SHEM,
        GKV_PART_METIS_KWAY | GKV_PART_METIS_SHEM};
    int64_t src[400], dst[400], id[24];
    size_t n = 0;
    int owner[1024];

    for (int i = 0, k = 0; i < 36; i++)    /* every third node isolated */
        if (i % 3 != 2)
            id[k++] = i;
    for (int c = 0; c < 3; c++)
        for (int a = 0; a < 8; a++)
            for (int b = 0; b < 8; b++)
                if (a != b || a == 3) {    /* one self-loop per clique */
                    src[n] = id[8 * c + a];
                    dst[n++] = id[8 * c + b];
                }
    for (int r = 0; r < 4; r++) {          /* duplicates inside a clique */
        src[n] = id[0];
        dst[n++] = id[1];
    }
    for (int r = 0; r < 3; r++) {          /* bridge 0-1, three times */
        src[n] = id[7];
        dst[n++] = id[8];
    }
    src[n] = id[16];                       /* bridge 1-2, once */
    dst[n++] = id[15];
    assert_true(n <= 400);

    for (int graph = 0; graph < 2; graph++) {
        struct tg t;
        gkv_part_feat pf[MAXF];
        gkv_coo c;
        int64_t nn;

        if (graph == 0) {
            memset(&t, 0, sizeof t);
            GKVT_OK(gkv_graph_new_homo(&t.g, 36));
            GKVT_OK(gkv_graph_add_edges(t.g, 0, src, dst, NULL, n));
        } else {
            make_rmat(f, &t);
        }
        nn = gkv_graph_num_nodes(t.g, 0);
        GKVT_OK(gkv_graph_edges(t.g, 0, &c));
        for (size_t i = 0; i < sizeof variants / sizeof *variants; i++) {
            gkv_part_spec sp;
            char what[64];
            int64_t cut;
            /* R-MAT: bisection and k-way each into 3 and 4 parts
             * (bisection's top level by hand: sides of 2 and 1 parts,
             * and of 2 and 2) */
            int P = graph == 0 ? 3 : 3 + (int)(i >= 2);

            spec_init(&sp, &t, pf, GKV_PART_METIS, P);
            sp.flags = variants[i] | GKV_PART_FORCE;
            snprintf(what, sizeof what, "graph %d, flags 0x%x", graph,
                     variants[i]);
            cut = metis_checked(f, &t, &sp, nn, c.src, c.dst, c.n, owner,
                                what);
            if (graph == 0 && !(variants[i] & GKV_PART_METIS_KWAY))
                assert_int_equal(cut, 4);    /* the bridges, as weighed */
        }
        tg_free(&t);
    }
}

/* METIS with a training mask and edge balance on R-MAT: still a valid
 * partition, and the training nodes are balanced. */
static void
test_metis_mask_and_edges(void **state)
{
    struct fx *f = *state;
    struct tg t;
    gkv_part_feat pf[MAXF];
    gkv_part_spec sp;
    gkv_part_mask mk;
    uint8_t mask[1024];
    char path[8300];
    int64_t *nmap, train[4] = {0}, total = 0, st[5] = {0};
    json_t *j;

    make_rmat(f, &t);
    for (int v = 0; v < 1024; v++) {
        mask[v] = (v % 5) == 0;
        total += mask[v];
    }
    /* the mask from a bool .npy, as DGL users have it: write a u8 one and
     * patch its descr to '|b1' */
    {
        uint64_t none[1] = {0};
        size_t len;
        unsigned char *b;
        char *at;
        FILE *fp;
        snprintf(path, sizeof path, "%s/mask.npy", f->dir);
        write_npy(path, GKV_U8, 1024, 0, none, mask);
        b = gkvt_read_file(path, &len);
        at = strstr((char *)b + 10, "'|u1'");
        assert_non_null(at);
        memcpy(at, "'|b1'", 5);
        fp = fopen(path, "wb");
        fwrite(b, 1, len, fp);
        fclose(fp);
        free(b);
    }
    memset(&mk, 0, sizeof mk);
    mk.ntype = "_N";
    mk.path = path;
    spec_init(&sp, &t, pf, GKV_PART_METIS, 4);
    sp.masks = &mk;
    sp.nmasks = 1;
    sp.flags = GKV_PART_BALANCE_EDGES;
    if (gkv_partition_write(t.g, &sp, f->out, NULL, f->msg, sizeof f->msg) != GKV_OK)
        fail_msg("%s", f->msg);
    verify(f->out, &t, &sp);
    snprintf(path, sizeof path, "%s/g.json", f->out);
    j = json_load_file(path, 0, NULL);
    for (int p = 0; p < 4; p++) {
        json_t *a = json_array_get(json_object_get(json_object_get(j, "node_map"), "_N"), (size_t)p);
        st[p + 1] = json_integer_value(json_array_get(a, 1));
    }
    json_decref(j);
    snprintf(path, sizeof path, "%s/mapping/node-_N.npy", f->out);
    nmap = read_npy_i64(path, 1024);
    for (int v = 0; v < 1024; v++)
        for (int p = 0; p < 4; p++)
            if (nmap[v] >= st[p] && nmap[v] < st[p + 1])
                train[p] += mask[v];
    for (int p = 0; p < 4; p++) {
        print_message("partition %d: %lld nodes, %lld training\n", p,
                      (long long)(st[p + 1] - st[p]), (long long)train[p]);
        assert_true(train[p] * 4 <= total * 12 / 10);   /* within 20 % */
        assert_true(train[p] * 4 >= total * 8 / 10);
    }
    free(nmap);
    tg_free(&t);
}

static void expect_fail(struct fx *f, const gkv_graph *g,
                        const gkv_part_spec *sp, const char *out,
                        gkv_err want, ...);

/* DGL's train/val/test masks are numpy bools: as node features they are
 * stored as u8 0/1 at the new IDs, byte for byte (one per node, and rows
 * of several); a byte other than 0 or 1 is refused naming the file and
 * the row, leaving nothing behind. */
static void
test_bool_node_feature(void **state)
{
    struct fx *f = *state;
    struct tg t;
    gkv_part_feat pf[MAXF];
    gkv_part_spec sp;
    uint64_t three[1] = {3};
    int nb = 0;

    make_homo(f, &t);
    add_feat(f, &t, 0, "_N", "train_mask", GKV_U8, 0, 1, 0, 21);
    add_feat(f, &t, 0, "_N", "flags", GKV_U8, 1, 3, 0, 22);
    for (int i = t.nfeats - 2; i < t.nfeats; i++) {
        struct feat_src *fs = &t.feats[i];
        uint64_t rows = (uint64_t)gkv_graph_num_nodes(t.g, 0);
        for (uint64_t k = 0; k < rows * fs->row_bytes; k++) {
            fs->rows[k] = (unsigned char)((k * 5 + (uint64_t)i) % 3 == 0);
            nb += fs->rows[k];
        }
        write_bool_npy(fs->path, rows, i == t.nfeats - 1, three, fs->rows);
    }
    assert_true(nb > 0);
    for (int P = 1; P <= 3; P++) {
        gkv_store *st;
        gkv_tensor_desc d;
        char sp0[8300];
        spec_init(&sp, &t, pf, P == 2 ? GKV_PART_RANGE : GKV_PART_RANDOM, P);
        if (gkv_partition_write(t.g, &sp, f->out, NULL, f->msg,
                                sizeof f->msg) != GKV_OK)
            fail_msg("%d parts: %s", P, f->msg);
        verify(f->out, &t, &sp);
        snprintf(sp0, sizeof sp0, "%s/part-0", f->out);
        GKVT_OK(gkv_store_open(&st, sp0, GKV_RDONLY, NULL));
        GKVT_OK(gkv_tensor_info(st, NULL, "node/_N/train_mask", &d));
        assert_int_equal(d.dtype, GKV_U8);
        assert_int_equal(d.ndim, 0);
        GKVT_OK(gkv_tensor_info(st, NULL, "node/_N/flags", &d));
        assert_int_equal(d.dtype, GKV_U8);
        assert_int_equal(d.ndim, 1);
        assert_int_equal(d.shape[0], 3);
        gkv_store_close(st);
        gkvt_rmtree(strdup(f->out));
    }
    /* a 2 in row 5 of the mask; a 255 in row 6 (element 2) of the flags */
    spec_init(&sp, &t, pf, GKV_PART_RANDOM, 2);
    {
        struct feat_src *m = &t.feats[t.nfeats - 2], *fl = &t.feats[t.nfeats - 1];
        unsigned char keep = m->rows[5];

        m->rows[5] = 2;
        write_bool_npy(m->path, 8, 0, three, m->rows);
        expect_fail(f, t.g, &sp, f->out, GKV_EFORMAT, "node/_N/train_mask",
                    m->path, "row 5 holds byte 2", NULL);
        m->rows[5] = keep;
        write_bool_npy(m->path, 8, 0, three, m->rows);
        fl->rows[6 * 3 + 2] = 255;
        write_bool_npy(fl->path, 8, 1, three, fl->rows);
        expect_fail(f, t.g, &sp, f->out, GKV_EFORMAT, "node/_N/flags",
                    fl->path, "row 6 holds byte 255 (element 2", NULL);
    }
    tg_free(&t);
}

/* ---- bad input ---------------------------------------------------------------- */

/* Runs a call that must fail with 'want' and a message holding every one of
 * the NULL-terminated strings, leaving the directory as it was. */
static void
expect_fail(struct fx *f, const gkv_graph *g, const gkv_part_spec *sp,
            const char *out, gkv_err want, ...)
{
    char *before = gkvt_listing(f->dir), *after;
    gkv_err rc = gkv_partition_write(g, sp, out, NULL, f->msg, sizeof f->msg);
    va_list ap;
    const char *s;

    if (rc != want)
        fail_msg("got %s (%s), expected %s", gkv_err_name(rc), f->msg,
                 gkv_err_name(want));
    va_start(ap, want);
    while ((s = va_arg(ap, const char *)) != NULL)
        if (strstr(f->msg, s) == NULL)
            fail_msg("message '%s' does not mention '%s'", f->msg, s);
    va_end(ap);
    after = gkvt_listing(f->dir);
    if (strcmp(before, after) != 0)
        fail_msg("directory changed:\n%s---\n%s", before, after);
    free(before);
    free(after);
}

static void
test_bad_spec(void **state)
{
    struct fx *f = *state;
    struct tg t;
    gkv_part_feat pf[MAXF];
    gkv_part_spec sp;
    gkv_graph *big;

    make_homo(f, &t);
    spec_init(&sp, &t, pf, GKV_PART_RANGE, 0);
    expect_fail(f, t.g, &sp, f->out, GKV_EINVAL, "0 partitions", NULL);
    sp.num_parts = -1;
    expect_fail(f, t.g, &sp, f->out, GKV_EINVAL, "-1 partitions", NULL);
    sp.num_parts = GKV_PART_MAX + 1;
    expect_fail(f, t.g, &sp, f->out, GKV_EINVAL, "65536 partitions", NULL);
    sp.num_parts = 9;
    expect_fail(f, t.g, &sp, f->out, GKV_EINVAL, "9 partitions",
                "only 8 nodes", NULL);
    sp.num_parts = 2;
    sp.method = (gkv_part_method)0;
    expect_fail(f, t.g, &sp, f->out, GKV_EINVAL, "method", NULL);
    sp.method = (gkv_part_method)9;
    expect_fail(f, t.g, &sp, f->out, GKV_EINVAL, "method", NULL);
    sp.method = GKV_PART_RANGE;
    sp.flags = 0x80;
    expect_fail(f, t.g, &sp, f->out, GKV_EINVAL, "flags", NULL);
    sp.flags = 0;
    sp.name = "a/b";
    expect_fail(f, t.g, &sp, f->out, GKV_EINVAL, "graph name 'a/b'", NULL);
    sp.name = "g";
    expect_fail(f, NULL, &sp, f->out, GKV_EINVAL, "NULL", NULL);
    expect_fail(f, t.g, NULL, f->out, GKV_EINVAL, "NULL", NULL);
    expect_fail(f, t.g, &sp, "", GKV_EINVAL, "NULL", NULL);
    assert_int_equal(gkv_part_method_parse("metis", NULL), GKV_OK);
    assert_int_equal(gkv_part_method_parse("kway", NULL), GKV_EINVAL);
    assert_string_equal(gkv_part_method_name((gkv_part_method)42), "?");

    /* METIS refuses what its 32-bit idx_t cannot hold, before allocating */
    GKVT_OK(gkv_graph_new_homo(&big, (int64_t)1 << 31));
    memset(&sp, 0, sizeof sp);
    sp.method = GKV_PART_METIS;
    sp.num_parts = 2;
    expect_fail(f, big, &sp, f->out, GKV_ERANGE, "too large for METIS",
                "2147483648 nodes", "idx_t", NULL);
    /* msg may be NULL (whatever msglen says) */
    assert_int_equal(gkv_partition_write(big, &sp, f->out, NULL, NULL, 256),
                     GKV_ERANGE);
    gkv_graph_free(big);
    tg_free(&t);
}

/* Method given: the caller's owners. Nodes keep their order within a
 * partition, so partition 0 gets 1, 3, 4, 5 as 0..3 and partition 1 gets
 * 0, 2, 6, 7 as 4..7; owners that do not decrease keep every ID. An owner
 * out of range, owners without the method or the method without owners
 * are refused, leaving nothing. */
static void
test_given_owners(void **state)
{
    struct fx *f = *state;
    gkv_graph *g;
    gkv_part_spec sp;
    char path[8192];
    int64_t *nmap;
    static const int32_t own[8] = {1, 0, 1, 0, 0, 0, 1, 1};
    static const int32_t sorted[8] = {0, 0, 0, 1, 1, 1, 1, 1};
    static const int32_t bad[8] = {0, 0, 0, 1, 1, 2, 1, 1};
    static const int64_t want[8] = {4, 0, 5, 1, 2, 3, 6, 7};
    const int32_t *owners[1] = {own};

    GKVT_OK(gkv_graph_fixed_homo(&g));
    memset(&sp, 0, sizeof sp);
    sp.method = GKV_PART_GIVEN;
    sp.num_parts = 2;
    sp.owners = owners;
    GKVT_OK(gkv_partition_write(g, &sp, f->out, NULL, f->msg, sizeof f->msg));
    snprintf(path, sizeof path, "%s/mapping/node-_N.npy", f->out);
    nmap = read_npy_i64(path, 8);
    assert_memory_equal(nmap, want, sizeof want);
    free(nmap);
    owners[0] = sorted;
    sp.flags = GKV_PART_FORCE;
    GKVT_OK(gkv_partition_write(g, &sp, f->out, NULL, f->msg, sizeof f->msg));
    nmap = read_npy_i64(path, 8);
    for (int64_t v = 0; v < 8; v++)
        assert_int_equal(nmap[v], v);
    free(nmap);
    snprintf(path, sizeof path, "%s/graph.json", f->out);
    {
        json_t *j = json_load_file(path, 0, NULL);
        json_t *nm = json_object_get(json_object_get(j, "node_map"), "_N");
        assert_non_null(j);
        assert_string_equal(json_string_value(json_object_get(j, "part_method")),
                            "given");
        assert_int_equal(json_integer_value(json_array_get(json_array_get(nm, 0), 1)), 3);
        json_decref(j);
    }
    sp.flags = 0;
    owners[0] = bad;
    snprintf(path, sizeof path, "%s/other", f->dir);
    expect_fail(f, g, &sp, path, GKV_EINVAL, "owners[0][5] = 2",
                "expected a partition 0..1", NULL);
    sp.owners = NULL;
    expect_fail(f, g, &sp, path, GKV_EINVAL, "owners of the nodes are missing",
                NULL);
    sp.owners = owners;
    sp.method = GKV_PART_RANGE;
    expect_fail(f, g, &sp, path, GKV_EINVAL, "for method given only", NULL);
    assert_int_equal(gkv_part_method_parse("given", &sp.method), GKV_OK);
    assert_int_equal(sp.method, GKV_PART_GIVEN);
    gkv_graph_free(g);
}

static void
test_bad_features(void **state)
{
    struct fx *f = *state;
    struct tg t;
    gkv_part_feat pf[MAXF], bad;
    gkv_part_spec sp;
    gkv_part_mask mk;
    char p1[8300], p2[8300], longname[200];
    uint64_t sh[1] = {3};
    float rows[64] = {0};
    gkv_graph *lg;

    make_hetero(f, &t);
    spec_init(&sp, &t, pf, GKV_PART_RANDOM, 2);

    /* unknown types */
    pf[0].type = "nosuch";
    expect_fail(f, t.g, &sp, f->out, GKV_ENOTFOUND, "unknown node type 'nosuch'",
                NULL);
    pf[0] = t.feats[0].pf;
    pf[2].type = "user:sells:item";
    expect_fail(f, t.g, &sp, f->out, GKV_ENOTFOUND,
                "unknown edge type 'user:sells:item'", NULL);
    pf[2] = t.feats[2].pf;

    /* row count */
    snprintf(p1, sizeof p1, "%s/three.npy", f->dir);
    write_npy(p1, GKV_F32, 3, 1, sh, rows);
    pf[0].path = p1;
    expect_fail(f, t.g, &sp, f->out, GKV_ESHAPE, "node/user/feat", "three.npy",
                "3 rows", "4 nodes", NULL);
    pf[0] = t.feats[0].pf;
    pf[1].nrows = 4;
    expect_fail(f, t.g, &sp, f->out, GKV_ESHAPE, "node/item/label", "4 rows",
                "5 nodes", NULL);
    pf[1] = t.feats[1].pf;

    /* unreadable files */
    snprintf(p2, sizeof p2, "%s/missing.npy", f->dir);
    pf[2].path = p2;
    expect_fail(f, t.g, &sp, f->out, GKV_ENOENT, "edge/user:buys:item/feat",
                "missing.npy", NULL);
    snprintf(p2, sizeof p2, "%s/garbage.npy", f->dir);
    {
        FILE *fp = fopen(p2, "w");
        fputs("this is not a numpy file at all, not even close", fp);
        fclose(fp);
    }
    expect_fail(f, t.g, &sp, f->out, GKV_EFORMAT, "garbage.npy", NULL);
    pf[2] = t.feats[2].pf;

    /* names */
    pf[0].name = "a b";
    expect_fail(f, t.g, &sp, f->out, GKV_EINVAL, "feature name 'a b'", NULL);
    pf[0] = t.feats[0].pf;
    pf[1] = pf[0];
    expect_fail(f, t.g, &sp, f->out, GKV_EINVAL, "given twice", NULL);
    pf[1] = t.feats[1].pf;
    bad = t.feats[1].pf;
    bad.data = NULL;
    pf[1] = bad;
    expect_fail(f, t.g, &sp, f->out, GKV_EINVAL, "NULL data", NULL);
    pf[1] = t.feats[1].pf;

    /* masks */
    memset(&mk, 0, sizeof mk);
    mk.ntype = "user";
    mk.path = p1;                   /* 3 x 3 */
    sp.masks = &mk;
    sp.nmasks = 1;
    expect_fail(f, t.g, &sp, f->out, GKV_ESHAPE, "training mask",
                "three.npy", "one value per node", NULL);
    snprintf(p2, sizeof p2, "%s/mask3.npy", f->dir);
    write_npy(p2, GKV_I64, 3, 0, sh, rows);
    mk.path = p2;                   /* 3 rows */
    expect_fail(f, t.g, &sp, f->out, GKV_ESHAPE, "training mask", "mask3.npy",
                "3 rows", "4 nodes", NULL);
    mk.path = NULL;
    mk.data = (const uint8_t *)rows;
    mk.nrows = 5;
    expect_fail(f, t.g, &sp, f->out, GKV_ESHAPE, "training mask", "5 rows",
                "4 nodes", NULL);
    mk.ntype = "robot";
    expect_fail(f, t.g, &sp, f->out, GKV_ENOTFOUND, "'robot'", NULL);
    sp.masks = NULL;
    sp.nmasks = 0;

    /* a tensor name over GKV_NAME_MAX: 63-byte type names, 128-byte feature */
    memset(longname, 'x', 63);
    longname[63] = '\0';
    GKVT_OK(gkv_graph_new(&lg));
    GKVT_OK(gkv_graph_add_ntype(lg, longname, 4, NULL));
    GKVT_OK(gkv_graph_add_etype(lg, longname, longname, longname, NULL));
    memset(&bad, 0, sizeof bad);
    bad.is_edge = 1;
    bad.type = longname;
    {
        char fname[129];
        memset(fname, 'f', 128);
        fname[128] = '\0';
        bad.name = fname;
        bad.data = rows;
        bad.dtype = GKV_F32;
        bad.nrows = 0;
        memset(&sp, 0, sizeof sp);
        sp.method = GKV_PART_RANGE;
        sp.num_parts = 1;
        sp.feats = &bad;
        sp.nfeats = 1;
        expect_fail(f, lg, &sp, f->out, GKV_EINVAL, "longer than 255", NULL);
    }
    gkv_graph_free(lg);
    tg_free(&t);
}

static void
test_outdir_rules(void **state)
{
    struct fx *f = *state;
    struct tg t;
    gkv_part_feat pf[MAXF];
    gkv_part_spec sp;
    char p[8300], *j1, *j2, *l1, *l2;
    size_t n1, n2;

    make_homo(f, &t);
    spec_init(&sp, &t, pf, GKV_PART_RANGE, 2);
    GKVT_OK(gkv_partition_write(t.g, &sp, f->out, NULL, f->msg, sizeof f->msg));
    snprintf(p, sizeof p, "%s/g.json", f->out);
    j1 = (char *)gkvt_read_file(p, &n1);
    l1 = gkvt_listing(f->out);

    /* an existing partition stays untouched without FORCE */
    sp.num_parts = 3;
    expect_fail(f, t.g, &sp, f->out, GKV_EEXIST, "already holds a partition",
                "--force", NULL);
    j2 = (char *)gkvt_read_file(p, &n2);
    l2 = gkvt_listing(f->out);
    assert_int_equal(n1, n2);
    assert_memory_equal(j1, j2, n1);
    assert_string_equal(l1, l2);
    free(j2);
    free(l2);
    /* also with a trailing slash */
    {
        char o2[8300];
        snprintf(o2, sizeof o2, "%s/", f->out);
        expect_fail(f, t.g, &sp, o2, GKV_EEXIST, "already holds", NULL);
    }

    /* with FORCE it is replaced, and verifies as the new one */
    sp.flags = GKV_PART_FORCE;
    GKVT_OK(gkv_partition_write(t.g, &sp, f->out, NULL, f->msg, sizeof f->msg));
    verify(f->out, &t, &sp);
    l2 = gkvt_listing(f->out);
    assert_non_null(strstr(l2, "part-2\n"));
    free(l2);
    l2 = gkvt_listing(f->dir);
    assert_null(strstr(l2, ".old-"));
    assert_null(strstr(l2, ".tmp-"));
    free(l2);

    /* a directory with other files is never touched, FORCE or not */
    snprintf(p, sizeof p, "%s/notes.txt", f->out);
    {
        FILE *fp = fopen(p, "w");
        fputs("mine\n", fp);
        fclose(fp);
    }
    expect_fail(f, t.g, &sp, f->out, GKV_EEXIST, "not a gkv partition",
                "notes.txt", NULL);
    sp.flags = 0;
    expect_fail(f, t.g, &sp, f->out, GKV_EEXIST, "not a gkv partition", NULL);

    /* a file where OUT should be; a missing parent */
    snprintf(p, sizeof p, "%s/afile", f->dir);
    {
        FILE *fp = fopen(p, "w");
        fclose(fp);
    }
    expect_fail(f, t.g, &sp, p, GKV_EEXIST, "not a directory", NULL);
    snprintf(p, sizeof p, "%s/no/such/out", f->dir);
    expect_fail(f, t.g, &sp, p, GKV_ENOENT, "parent", NULL);

    /* an empty directory is fine */
    snprintf(p, sizeof p, "%s/empty", f->dir);
    assert_int_equal(mkdir(p, 0755), 0);
    GKVT_OK(gkv_partition_write(t.g, &sp, p, NULL, f->msg, sizeof f->msg));
    verify(p, &t, &sp);
    free(j1);
    free(l1);
    tg_free(&t);
}


/* Thinning (spec.metis_keep): on four communities of 100 nodes, each
 * around a hub joined to all its members (some twice), the hubs joined to
 * each other three times each, a few edges across, a self-loop and 100
 * isolated nodes, each node keeping 4 or 1 neighbours (or all), with
 * bisection and k-way into 3 and 4 parts: every node in one part, the
 * parts balanced within METIS's tolerance, the reported cut the input
 * edges cut (all of them, not only those METIS saw), counted here; the
 * same input gives the same partition; thinning changes what METIS sees
 * (1 neighbour gives another partition than all); out of memory anywhere
 * fails cleanly; a negative count other than GKV_PART_METIS_KEEP_ALL is
 * refused. */
static void
test_metis_thinned(void **state)
{
    struct fx *f = *state;
    static const int keeps[] = {4, 1, GKV_PART_METIS_KEEP_ALL};
    enum { NN = 500, ME = 6000 };
    static int64_t src[ME], dst[ME];
    static int owner[NN], first[NN], one[NN], all[NN];
    size_t n = 0;
    uint32_t x = 12345;
    struct tg t;
    gkv_part_feat pf[MAXF];
    gkv_part_spec sp;
    long live;
    int ok_run;

#define EDGE(a, b) do { src[n] = (a); dst[n++] = (b); } while (0)
    for (int c = 0; c < 4; c++) {
        int h = 100 * c;
        for (int j = h + 1; j < h + 100; j++) {
            EDGE(h, j);
            if (j % 3 == 0)
                EDGE(j, h);                   /* weight 2 */
            for (int k = 0; k < 5; k++) {     /* members among themselves */
                int o;
                x = x * 1103515245u + 12345u;
                o = h + 1 + (int)((x >> 8) % 99);
                if (o != j)
                    EDGE(j, o);
            }
        }
        for (int r = 0; r < 3; r++)
            EDGE(h, 100 * ((c + 1) % 4));
    }
    for (int r = 0; r < 30; r++) {            /* across communities */
        x = x * 1103515245u + 12345u;
        EDGE((int)((x >> 8) % 400), (int)((x >> 16) % 400));
    }
    EDGE(7, 7);
    for (int a = 400; a < 460; a++)           /* a dense block: every node */
        for (int b = a + 1; b < 460; b++) {   /* of it over 32 neighbours */
            x = x * 1103515245u + 12345u;
            EDGE(a, b);
            if ((x >> 12) % 3 == 0)
                EDGE(b, a);
        }
    EDGE(459, 0);
#undef EDGE
    assert_true(n <= ME);
    memset(&t, 0, sizeof t);
    GKVT_OK(gkv_graph_new_homo(&t.g, NN));
    GKVT_OK(gkv_graph_add_edges(t.g, 0, src, dst, NULL, n));

    for (size_t i = 0; i < sizeof keeps / sizeof *keeps; i++)
        for (int kway = 0; kway < 2; kway++)
            for (int P = 3; P <= 4; P++) {
                char what[64];

                spec_init(&sp, &t, pf, GKV_PART_METIS, P);
                sp.metis_keep = keeps[i];
                sp.flags = GKV_PART_FORCE | (kway ? GKV_PART_METIS_KWAY : 0);
                snprintf(what, sizeof what, "keep %d, %s", keeps[i],
                         kway ? "k-way" : "bisection");
                metis_checked(f, &t, &sp, NN, src, dst, (int64_t)n, owner,
                              what);
                if (kway || P != 4)
                    continue;
                if (keeps[i] == 4)
                    memcpy(first, owner, sizeof owner);
                else if (keeps[i] == 1)
                    memcpy(one, owner, sizeof owner);
                else
                    memcpy(all, owner, sizeof owner);
            }
    /* thinning took effect, and again gives the same partition */
    assert_true(memcmp(one, all, sizeof one) != 0);
    /* the default (metis_keep 0) on a graph past the size where it thins:
     * the 32 heaviest neighbours a node, as metis_keep 32 */
    spec_init(&sp, &t, pf, GKV_PART_METIS, 4);
    sp.flags = GKV_PART_FORCE;
    sp.metis_keep = 32;
    metis_checked(f, &t, &sp, NN, src, dst, (int64_t)n, first, "keep 32");
    assert_true(memcmp(first, all, sizeof first) != 0);
    pw__set_thin_min(0);
    sp.metis_keep = 0;
    if (gkv_partition_write(t.g, &sp, f->out, NULL, f->msg,
                            sizeof f->msg) != GKV_OK) {
        pw__set_thin_min(-1);
        fail_msg("default, thinning: %s", f->msg);
    }
    pw__set_thin_min(-1);
    metis_owners(f->out, NN, 4, owner);
    assert_memory_equal(owner, first, sizeof owner);
    metis_checked(f, &t, &sp, NN, src, dst, (int64_t)n, owner,
                  "default, small");
    assert_memory_equal(owner, all, sizeof owner);
    spec_init(&sp, &t, pf, GKV_PART_METIS, 4);
    sp.metis_keep = 4;
    sp.flags = GKV_PART_FORCE;
    metis_checked(f, &t, &sp, NN, src, dst, (int64_t)n, first, "keep 4");
    sp.nthreads = 1;
    GKVT_OK(gkv_partition_write(t.g, &sp, f->out, NULL, f->msg, sizeof f->msg));
    metis_owners(f->out, NN, 4, owner);
    assert_memory_equal(owner, first, sizeof owner);

    /* out of memory at each allocation (the thinning's among them; the
     * shrinking of METIS's arrays may fail and the call still succeed),
     * into a new directory each time */
    gkvt_rmtree(strdup(f->out));
    sp.flags = 0;
    live = gkvt_alloc_live();
    ok_run = 0;
    for (int k = 0; k < 20000 && ok_run < 20; k++) {
        char *before = gkvt_listing(f->dir), *after;
        gkv_err rc;
        sp.metis_keep = 2;
        gkvt_alloc_fail_at(k);
        rc = gkv_partition_write(t.g, &sp, f->out, NULL, f->msg, sizeof f->msg);
        gkvt_alloc_fail_at(-1);
        assert_int_equal(gkvt_alloc_live(), live);
        after = gkvt_listing(f->dir);
        if (rc == GKV_OK) {
            ok_run++;
            verify(f->out, &t, &sp);
            gkvt_rmtree(strdup(f->out));
        } else {
            ok_run = 0;
            if (rc != GKV_ENOMEM)
                fail_msg("allocation %d: %s (%s)", k, gkv_err_name(rc), f->msg);
            assert_string_equal(before, after);
        }
        free(before);
        free(after);
    }
    assert_int_equal(ok_run, 20);

    sp.metis_keep = -2;
    expect_fail(f, t.g, &sp, f->out, GKV_EINVAL, "metis_keep -2",
                "GKV_PART_METIS_KEEP_ALL", NULL);
    sp.metis_keep = INT32_MIN;
    expect_fail(f, t.g, &sp, f->out, GKV_EINVAL, "metis_keep -2147483648",
                NULL);
    tg_free(&t);
}

/* Cancels at the k-th progress call, for every k: GKV_EINTR and nothing
 * left; the call after the last one completes. */
struct cancel {
    int calls, at;
    char stage[2][16];           /* of the last two calls */
    uint64_t done[2], total[2];
};

static int
cancel_at(void *ctx, const char *stage, uint64_t done, uint64_t total)
{
    struct cancel *c = ctx;

    assert_true(total == 0 || done <= total);
    memcpy(c->stage[0], c->stage[1], sizeof c->stage[0]);
    c->done[0] = c->done[1];
    c->total[0] = c->total[1];
    snprintf(c->stage[1], sizeof c->stage[1], "%s", stage);
    c->done[1] = done;
    c->total[1] = total;
    return c->calls++ == c->at;
}

static void
test_cancel_everywhere(void **state)
{
    struct fx *f = *state;
    struct tg t;
    gkv_part_feat pf[MAXF];
    gkv_part_spec sp;
    struct cancel c;
    int done = 0;

    make_hetero(f, &t);
    spec_init(&sp, &t, pf, GKV_PART_METIS, 3);
    sp.flags = GKV_PART_CSR;
    sp.progress = cancel_at;
    sp.progress_ctx = &c;
    for (int k = 0; !done; k++) {
        char *before = gkvt_listing(f->dir), *after;
        gkv_err rc;
        c.calls = 0;
        c.at = k;
        rc = gkv_partition_write(t.g, &sp, f->out, NULL, f->msg, sizeof f->msg);
        after = gkvt_listing(f->dir);
        if (rc == GKV_OK) {
            /* the only call left is the one after publishing; the one
             * before it comes after every store and file is synced (a
             * signal while syncing, maybe the longest stage, cancels) */
            assert_int_equal(c.calls - 1, k);
            assert_string_equal(c.stage[0], "sync");
            assert_true(c.done[0] == 1 && c.total[0] == 2);
            verify(f->out, &t, &sp);
            done = 1;
        } else {
            assert_int_equal(rc, GKV_EINTR);
            assert_non_null(strstr(f->msg, "cancelled"));
            assert_string_equal(before, after);
        }
        free(before);
        free(after);
        assert_true(k < 1000);
    }
    tg_free(&t);
}

/* Two partitions with METIS at once, in two threads (distinct output
 * directories; gkv_partition_write is thread-safe for those): each gives
 * the partition it gives alone, and the program's SIGTERM handler is
 * still its own afterwards (libmetis installs its own during a call; a
 * call that noted the handlers while the other thread's was inside took
 * libmetis's for the program's and put it back for good). */
struct mrun {
    const gkv_graph *g;
    char dir[4200];
    int64_t cut[3];
    int bad;
};

static volatile sig_atomic_t term_seen;

static void
on_term(int sig)
{
    (void)sig;
    term_seen = 1;
}

static void *
metis_thread(void *arg)
{
    struct mrun *r = arg;

    for (int i = 0; i < 3; i++) {
        gkv_part_spec sp;
        gkv_part_report rep;
        char msg[512];
        memset(&sp, 0, sizeof sp);
        sp.name = "g";
        sp.method = GKV_PART_METIS;
        sp.num_parts = 4;
        sp.seed = 7;
        sp.flags = GKV_PART_FORCE;
        sp.metis_keep = 8;
        if (gkv_partition_write(r->g, &sp, r->dir, &rep, msg,
                                sizeof msg) != GKV_OK) {
            print_error("%s: %s\n", r->dir, msg);
            r->bad = 1;
            return NULL;
        }
        r->cut[i] = rep.edge_cut;
    }
    return NULL;
}

static void
test_metis_concurrent(void **state)
{
    struct fx *f = *state;
    enum { N = 20000, M = 200000 };
    int64_t *src = malloc(M * sizeof *src), *dst = malloc(M * sizeof *dst);
    struct sigaction sa, old, now;
    struct mrun r[3];
    static int own[3][N];
    pthread_t th[2];
    gkv_graph *g;
    uint64_t x = 1;

    for (int e = 0; e < M; e++) {         /* skewed: hubs at low IDs */
        double a, b;
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        a = (double)((x >> 20) & 0xffff) / 65536.0;
        b = (double)((x >> 36) & 0xffff) / 65536.0;
        src[e] = (int64_t)(a * a * N);
        dst[e] = (int64_t)(b * N);
    }
    GKVT_OK(gkv_graph_new_homo(&g, N));
    GKVT_OK(gkv_graph_add_edges(g, 0, src, dst, NULL, M));
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_term;
    sigemptyset(&sa.sa_mask);
    assert_int_equal(sigaction(SIGTERM, &sa, &old), 0);
    memset(r, 0, sizeof r);
    for (int i = 0; i < 3; i++) {
        r[i].g = g;
        snprintf(r[i].dir, sizeof r[i].dir, "%s/conc%d", f->dir, i);
    }
    metis_thread(&r[2]);                  /* alone */
    assert_false(r[2].bad);
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&th[i], NULL, metis_thread, &r[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    sigaction(SIGTERM, NULL, &now);
    term_seen = 0;
    if (now.sa_handler == on_term)
        raise(SIGTERM);
    sigaction(SIGTERM, &old, NULL);     /* the runner's SIGTERM works again */
    if (now.sa_handler != on_term)
        fail_msg("after two METIS partitions at once, SIGTERM's handler "
                 "is no longer the program's");
    assert_int_equal(term_seen, 1);
    metis_owners(r[2].dir, N, 4, own[2]);
    for (int i = 0; i < 2; i++) {
        assert_false(r[i].bad);
        for (int k = 0; k < 3; k++)
            assert_int_equal(r[i].cut[k], r[2].cut[0]);
        metis_owners(r[i].dir, N, 4, own[i]);
        assert_memory_equal(own[i], own[2], sizeof own[2]);
    }
    gkv_graph_free(g);
    free(src);
    free(dst);
}

/* gkv_partition_write of t into f->out failing at each allocation in
 * turn until one run succeeds: every failure is GKV_ENOMEM, leaks
 * nothing and leaves the directory as it was (with 'whole', also the
 * partition already there readable and right). Returns the failures. */
static int
fail_each_alloc(struct fx *f, struct tg *t, gkv_part_spec *sp, int whole)
{
    long live = gkvt_alloc_live();
    int n;

    for (n = 0; n < 20000; n++) {
        char *before = gkvt_listing(f->dir), *after;
        gkv_err rc;
        gkvt_alloc_fail_at(n);
        rc = gkv_partition_write(t->g, sp, f->out, NULL, f->msg,
                                 sizeof f->msg);
        gkvt_alloc_fail_at(-1);
        assert_int_equal(gkvt_alloc_live(), live);
        if (rc == GKV_OK) {
            free(before);
            break;
        }
        if (rc != GKV_ENOMEM)
            fail_msg("allocation %d%s: %s (%s)", n,
                     whole ? ", over a partition" : "", gkv_err_name(rc),
                     f->msg);
        after = gkvt_listing(f->dir);
        assert_string_equal(before, after);
        if (whole)
            verify(f->out, t, sp);
        free(before);
        free(after);
    }
    return n;
}

static void
test_alloc_failures(void **state)
{
    struct fx *f = *state;
    struct tg t;
    gkv_part_feat pf[MAXF];
    gkv_part_spec sp;
    int n;

    make_hetero(f, &t);
    spec_init(&sp, &t, pf, GKV_PART_RANDOM, 2);
    sp.flags = GKV_PART_CSR;
    n = fail_each_alloc(f, &t, &sp, 0);
    print_message("succeeded after failing each of %d allocations\n", n);
    assert_true(n > 10);
    verify(f->out, &t, &sp);
    /* over that partition with GKV_PART_FORCE: a failed allocation while
     * the directory is read is GKV_ENOMEM (it was taken for a file that is
     * no partition's: GKV_EEXIST), and the partition there stays whole */
    sp.flags |= GKV_PART_FORCE;
    assert_true(fail_each_alloc(f, &t, &sp, 1) > 10);
    verify(f->out, &t, &sp);
    tg_free(&t);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_trip_hetero, setup, gkvt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_round_trip_homo, setup, gkvt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_round_trip_rmat, setup, gkvt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_empty_types, setup, gkvt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_range_hand_checked, setup, gkvt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_given_owners, setup, gkvt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_metis_two_cliques, setup, gkvt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_metis_mask_and_edges, setup, gkvt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_metis_graph_given, setup, gkvt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_metis_star_sides, setup, gkvt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_metis_thinned, setup, gkvt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_metis_concurrent, setup,
                                        gkvt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_bad_spec, setup, gkvt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_bool_node_feature, setup, gkvt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_bad_features, setup, gkvt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_outdir_rules, setup, gkvt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_cancel_everywhere, setup, gkvt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_alloc_failures, setup, gkvt_dir_teardown),
    };

    return cmocka_run_group_tests_name("partition", tests, NULL, NULL);
}
