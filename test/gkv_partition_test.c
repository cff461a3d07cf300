/* gkv_partition_test.c - the gkv-partition tool run as a process on real
 * files: --help and --version, every usage error (exit 2), homogeneous and
 * heterogeneous edge lists in text (each line form), binary with weights,
 * R-MAT with --stats, features, --csr, --force, and every bad input (exit
 * 1, the message naming what was wrong, nothing new in the directory and an
 * existing partition untouched). Each result is read back with the kv API
 * and jansson and checked edge by edge against the same graph built in
 * memory. The tool is taken from the build directory of this test binary
 * (BUILD/test/gkv_partition_test -> BUILD/gkv-partition), or GKVT_BUILD. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/select.h>
#include <sys/wait.h>
#include <time.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>
#include <jansson.h>
#include "gkvt.h"
#include "gkvt_graph.h"
#include "graph/gkv_graph.h"

struct fx {
    char *dir;
    char out[4096];
    char *sout, *serr;      /* of the last run */
};

static char tool[PATH_MAX + 32];

static int
setup(void **state)
{
    return gkvt_file_setup(state, sizeof(struct fx), "gkvpart", "out");
}

static int
teardown(void **state)
{
    struct fx *f = *state;

    free(f->sout);
    free(f->serr);
    return gkvt_dir_teardown(state);
}

/* BUILD/gkv-partition for this binary's BUILD/test/. */
static void
find_tool(void)
{
    const char *b = getenv("GKVT_BUILD");
    char exe[PATH_MAX];
    ssize_t n;

    if (b != NULL && *b != '\0') {
        snprintf(tool, sizeof tool, "%s/gkv-partition", b);
        return;
    }
    n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        char *s;
        exe[n] = '\0';
        for (int k = 0; k < 2 && (s = strrchr(exe, '/')) != NULL; k++)
            *s = '\0';
        snprintf(tool, sizeof tool, "%s/gkv-partition", exe);
    } else {
        snprintf(tool, sizeof tool, "build/gkv-partition");
    }
}

/* Runs the tool with the arguments (NULL-terminated). */
/* DIR/NAME of the test's directory (gkvt_path). */
static char *
path(struct fx *f, const char *name)
{
    return gkvt_path(f->dir, name);
}

/* Writes len bytes of b to DIR/name. */
static void
put(struct fx *f, const char *name, const void *b, size_t len)
{
    gkvt_write_file(path(f, name), b, len);
}

static int
run(struct fx *f, ...)
{
    char *argv[64];
    int n = 0;
    va_list ap;

    argv[n++] = tool;
    va_start(ap, f);
    while (n < 63 && (argv[n] = va_arg(ap, char *)) != NULL)
        n++;
    va_end(ap);
    argv[n] = NULL;
    free(f->sout);
    free(f->serr);
    return gkvt_run(argv, NULL, 0, &f->sout, &f->serr, 120);
}

static void
put_npy(struct fx *f, const char *name, gkv_dtype dt, uint64_t rows,
        uint64_t cols, const void *data)
{
    uint64_t shape[2] = {rows, cols};
    int fd = open(path(f, name), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    size_t len = rows * cols * gkv_dtype_size(dt);

    assert_true(fd >= 0);
    GKVT_OK(gkv_npy_write_header(fd, dt, 2, shape, NULL, NULL, 0));
    assert_int_equal(write(fd, data, len), (ssize_t)len);
    close(fd);
}

static void
expect_text(const char *what, const char *text, const char *needle)
{
    if (strstr(text, needle) == NULL)
        fail_msg("%s does not mention '%s':\n%s", what, needle, text);
}

/* ---- checking a result against the graph built in memory ------------------- */

static int64_t *
npy_i64(const char *p, int64_t n)
{
    gkv_npy_map m;
    int64_t *v = malloc((size_t)n * 8 + 8);

    if (gkv_npy_map_open(&m, p, NULL, 0) != GKV_OK)
        fail_msg("cannot open '%s'", p);
    assert_int_equal(m.hdr.shape[0], (uint64_t)n);
    memcpy(v, m.data, (size_t)n * 8);
    gkv_npy_map_close(&m);
    return v;
}

/* Every edge of g at the CSC position its mappings claim, in the partition
 * of its destination, with its new source and weight; returns the JSON. */
static json_t *
check(const char *out, const char *name, const gkv_graph *g, int P)
{
    char p[8192], tn[512];
    json_t *j;
    json_error_t je;
    int nnt = gkv_graph_num_ntypes(g), net = gkv_graph_num_etypes(g);
    int64_t **nmap = calloc((size_t)nnt, sizeof *nmap);
    int64_t *nst = calloc((size_t)nnt * (size_t)(P + 1), sizeof *nst);
    gkv_store **st = calloc((size_t)P, sizeof *st);

    snprintf(p, sizeof p, "%s/%s.json", out, name);
    if ((j = json_load_file(p, 0, &je)) == NULL)
        fail_msg("%s: %s", p, je.text);
    assert_int_equal(json_integer_value(json_object_get(j, "num_parts")), P);
    for (int t = 0; t < nnt; t++) {
        json_t *r = json_object_get(json_object_get(j, "node_map"),
                                    gkv_graph_ntype_name(g, t));
        assert_int_equal(json_array_size(r), P);
        for (int q = 0; q < P; q++) {
            json_t *a = json_array_get(r, (size_t)q);
            nst[t * (P + 1) + q + 1] = nst[t * (P + 1) + q] +
                json_integer_value(json_array_get(a, 1)) -
                json_integer_value(json_array_get(a, 0));
        }
        assert_int_equal(nst[t * (P + 1) + P], gkv_graph_num_nodes(g, t));
        snprintf(p, sizeof p, "%s/mapping/node-%s.npy", out,
                 gkv_graph_ntype_name(g, t));
        nmap[t] = npy_i64(p, gkv_graph_num_nodes(g, t));
    }
    for (int q = 0; q < P; q++) {
        snprintf(p, sizeof p, "%s/part-%d", out, q);
        GKVT_OK(gkv_store_open(&st[q], p, GKV_RDONLY, NULL));
    }
    for (int e = 0; e < net; e++) {
        gkv_etype_info ei;
        gkv_coo c;
        int64_t *emap, elo = 0;
        int64_t *est = calloc((size_t)P + 1, sizeof *est);
        json_t *r;

        GKVT_OK(gkv_graph_etype_info(g, e, &ei));
        GKVT_OK(gkv_graph_edges(g, e, &c));
        r = json_object_get(json_object_get(j, "edge_map"), ei.canonical);
        for (int q = 0; q < P; q++) {
            json_t *a = json_array_get(r, (size_t)q);
            est[q + 1] = est[q] + json_integer_value(json_array_get(a, 1)) -
                         json_integer_value(json_array_get(a, 0));
        }
        assert_int_equal(est[P], c.n);
        snprintf(p, sizeof p, "%s/mapping/edge-%s.npy", out, ei.canonical);
        emap = npy_i64(p, c.n);
        for (int64_t i = 0; i < c.n; i++) {
            int64_t ns = nmap[ei.src_ntype][c.src[i]];
            int64_t nd = nmap[ei.dst_ntype][c.dst[i]], ptr[2], got;
            const int64_t *ds = nst + ei.dst_ntype * (P + 1);
            int q = 0;
            while (!(nd >= ds[q] && nd < ds[q + 1]))
                q++;
            elo = est[q];
            assert_true(emap[i] >= elo && emap[i] < est[q + 1]);
            snprintf(tn, sizeof tn, "csc/%s/indptr", ei.canonical);
            GKVT_OK(gkv_tensor_read(st[q], NULL, tn, (uint64_t)(nd - ds[q]),
                                    (uint64_t)(nd - ds[q] + 2), ptr, sizeof ptr));
            assert_true(ptr[0] <= emap[i] - elo && emap[i] - elo < ptr[1]);
            snprintf(tn, sizeof tn, "csc/%s/indices", ei.canonical);
            GKVT_OK(gkv_tensor_read(st[q], NULL, tn, (uint64_t)emap[i],
                                    (uint64_t)emap[i] + 1, &got, 8));
            assert_int_equal(got, ns);
            if (c.w != NULL) {
                float w;
                snprintf(tn, sizeof tn, "csc/%s/weight", ei.canonical);
                GKVT_OK(gkv_tensor_read(st[q], NULL, tn, (uint64_t)emap[i],
                                        (uint64_t)emap[i] + 1, &w, 4));
                assert_true(w == c.w[i]);
            }
        }
        free(emap);
        free(est);
    }
    for (int q = 0; q < P; q++)
        gkv_store_close(st[q]);
    for (int t = 0; t < nnt; t++)
        free(nmap[t]);
    free(nmap);
    free(nst);
    free(st);
    return j;
}

/* Node feature 'tensor' of ntype 0 at every new ID equals row v of 'rows'. */
static void
check_node_feat(const char *out, json_t *j, const char *ntype,
                const char *tensor, const float *rows, int64_t n, size_t cols)
{
    char p[8192];
    int64_t *nmap, lo = 0;
    json_t *r = json_object_get(json_object_get(j, "node_map"), ntype);
    float *got = malloc(cols * sizeof *got);

    snprintf(p, sizeof p, "%s/mapping/node-%s.npy", out, ntype);
    nmap = npy_i64(p, n);
    for (size_t q = 0; q < json_array_size(r); q++) {
        json_t *a = json_array_get(r, q);
        int64_t cnt = json_integer_value(json_array_get(a, 1)) -
                      json_integer_value(json_array_get(a, 0));
        gkv_store *s;
        snprintf(p, sizeof p, "%s/part-%zu", out, q);
        GKVT_OK(gkv_store_open(&s, p, GKV_RDONLY, NULL));
        for (int64_t v = 0; v < n; v++)
            if (nmap[v] >= lo && nmap[v] < lo + cnt) {
                GKVT_OK(gkv_tensor_read(s, NULL, tensor, (uint64_t)nmap[v],
                                        (uint64_t)nmap[v] + 1, got,
                                        cols * sizeof *got));
                assert_memory_equal(got, rows + (size_t)v * cols,
                                    cols * sizeof *got);
            }
        gkv_store_close(s);
        lo += cnt;
    }
    free(got);
    free(nmap);
}

/* ---- tests -------------------------------------------------------------------- */

static void
test_help_and_version(void **state)
{
    struct fx *f = *state;

    assert_int_equal(run(f, "--help", NULL), 0);
    expect_text("--help", f->sout, "Usage: gkv-partition [options] OUTDIR");
    expect_text("--help", f->sout, "--parts N");
    expect_text("--help", f->sout, "--method M");
    expect_text("--help", f->sout, "--metis-keep K");
    assert_string_equal(f->serr, "");
    assert_int_equal(run(f, "-h", "--parts", "0", NULL), 0);
    expect_text("-h", f->sout, "Usage:");
    assert_int_equal(run(f, "-V", NULL), 0);
    expect_text("-V", f->sout, "gkv-partition (gkv) " GKV_VERSION_STRING);
}

static void
test_usage_errors_exit_2(void **state)
{
    struct fx *f = *state;
    char *before;
    static const char edges[] = "0 1\n1 2\n";
    struct { const char *args[12]; const char *says; } cases[] = {
        {{NULL}, "no output directory"},
        {{"--input", "E", "OUT", NULL}, "--parts N is required"},
        {{"--parts", "0", "--input", "E", "OUT", NULL}, "--parts '0'"},
        {{"--parts", "-3", "--input", "E", "OUT", NULL}, "--parts '-3'"},
        {{"--parts", "abc", "--input", "E", "OUT", NULL}, "--parts 'abc'"},
        {{"--parts", "2x", "--input", "E", "OUT", NULL}, "--parts '2x'"},
        {{"--parts", "70000", "--input", "E", "OUT", NULL}, "1 to 65535"},
        {{"--input", "E", "OUT", "--parts", NULL}, "--parts needs a value"},
        {{"--parts=2", "--method", "kway", "--input", "E", "OUT", NULL},
         "--method 'kway'"},
        {{"--parts=2", "--method", "given", "--input", "E", "OUT", NULL},
         "--method 'given'"},
        {{"--parts", "2", "--bogus", "--input", "E", "OUT", NULL},
         "unknown option '--bogus'"},
        {{"--parts", "2", "--csr=1", "--input", "E", "OUT", NULL},
         "unknown option '--csr=1'"},
        {{"--parts", "2", "--rmat", "x", "OUT", NULL}, "--rmat 'x'"},
        {{"--parts", "2", "--rmat", "9:0", "OUT", NULL}, "--rmat '9:0'"},
        {{"--parts", "2", "--rmat", "9", "--input", "E", "OUT", NULL},
         "--rmat makes the whole graph"},
        {{"--parts", "2", "OUT", NULL}, "no input"},
        {{"--parts", "2", "--input", "E", "OUT", "OTHER", NULL},
         "unexpected argument 'OTHER'"},
        {{"--parts", "2", "--method", "range", "--balance-edges", "--input",
          "E", "OUT", NULL}, "--balance-edges is for --method metis"},
        {{"--parts", "2", "--method", "random", "--train-mask", "M.npy",
          "--input", "E", "OUT", NULL}, "--train-mask is for --method metis"},
        {{"--parts", "2", "--method", "range", "--metis-ptype", "kway",
          "--input", "E", "OUT", NULL}, "--metis-ptype is for --method metis"},
        {{"--parts", "2", "--metis-ptype", "ring", "--input", "E", "OUT",
          NULL}, "--metis-ptype 'ring': expected rb or kway"},
        {{"--parts", "2", "--metis-ctype", "hem", "--input", "E", "OUT",
          NULL}, "--metis-ctype 'hem': expected rm or shem"},
        {{"--parts", "2", "--method", "random", "--metis-keep", "8",
          "--input", "E", "OUT", NULL}, "--metis-keep is for --method metis"},
        {{"--parts", "2", "--metis-keep", "0", "--input", "E", "OUT", NULL},
         "--metis-keep '0': expected a number of neighbours from 1 to "
         "2147483647, or all"},
        {{"--parts", "2", "--metis-keep", "-1", "--input", "E", "OUT", NULL},
         "--metis-keep '-1'"},
        {{"--parts", "2", "--metis-keep", "2147483648", "--input", "E", "OUT",
          NULL}, "--metis-keep '2147483648'"},
        {{"--parts", "2", "--metis-keep", "many", "--input", "E", "OUT",
          NULL}, "--metis-keep 'many'"},
        {{"--parts", "2", "--metis-keep=", "--input", "E", "OUT", NULL},
         "--metis-keep ''"},
        {{"--parts", "2", "--seed", "-1", "--input", "E", "OUT", NULL},
         "--seed '-1'"},
        {{"--parts", "2", "--num-nodes", "many", "--input", "E", "OUT", NULL},
         "--num-nodes 'many'"},
        {{"--parts", "2", "--ntype", "user=abc", "--etype", "user:f:user=E",
          "OUT", NULL}, "count is not a number"},
        {{"--parts", "2", "--ntype", "user=4", "--etype", "user:f", "OUT",
          NULL}, "expected SRC:REL:DST"},
        {{"--parts", "2", "--ntype", "user=4", "--etype", "user:buys:item=E",
          "OUT", NULL}, "unknown node type"},
        {{"--parts", "2", "--ntype", "u=4", "--etype", "u:a:u", "--etype",
          "u:b:u", "--input", "E", "OUT", NULL}, "name the type"},
        {{"--parts", "2", "--ntype", "u=4", "--etype", "u:a:u", "--input",
          "u:zz:u=E", "OUT", NULL}, "unknown edge type 'u:zz:u'"},
        {{"--parts", "2", "--ntype", "u=4", "--input", "E", "OUT", NULL},
         "--ntype without --etype"},
        {{"--parts", "2", "--node-feat", "feat", "--input", "E", "OUT", NULL},
         "expected [TYPE/]NAME=FILE.npy"},
        {{"--parts", "2", "--threads", "0", "--input", "E", "OUT", NULL},
         "--threads '0'"},
        {{"--parts", "2", "--weights", "W", "--input", "E", "OUT", NULL},
         "goes with no --binary file"},
    };

    put(f, "E", edges, sizeof edges - 1);
    assert_int_equal(chdir(f->dir), 0);
    before = gkvt_listing(f->dir);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *argv[16], *after;
        int n = 0, rc;
        argv[n++] = tool;
        for (int k = 0; cases[i].args[k] != NULL; k++)
            argv[n++] = (char *)cases[i].args[k];
        argv[n] = NULL;
        free(f->sout);
        free(f->serr);
        rc = gkvt_run(argv, NULL, 0, &f->sout, &f->serr, 60);
        if (rc != 2)
            fail_msg("case %zu: exit %d, expected 2: %s", i, rc, f->serr);
        expect_text("stderr", f->serr, cases[i].says);
        expect_text("stderr", f->serr, "Try 'gkv-partition --help'");
        assert_string_equal(f->sout, "");
        after = gkvt_listing(f->dir);
        assert_string_equal(before, after);
        free(after);
    }
    free(before);
    assert_int_equal(chdir("/"), 0);      /* f->dir goes at teardown */
}

/* The fixed homogeneous graph as a text file in every line form. */
static const char homo_txt[] =
    "# the fixed homogeneous graph, src dst weight\n"
    "0 1 1.0\n"
    "0,2,2\n"
    "\n"
    "1, 2 , 1   # a comment\n"
    "2\t3\t0.5\r\n"
    "3 0 1\n"
    "2 3 0.5\n"
    "4 3 3\n"
    "5 5 1\n"
    "6 0 2\n"
    "1 4 1\n"
    "3 4 1\n"
    "6 5 4\n"
    "4 1 0\n"
    "0 3 2";

static void
test_text_every_method(void **state)
{
    struct fx *f = *state;
    gkv_graph *g;
    float feat[8 * 3];
    /* then metis with METIS's own routine and matching, with each node
     * keeping one neighbour in METIS's graph, and keeping all */
    static const char *methods[] = {"random", "range", "metis", "metis",
                                    "metis", "metis"};
    static const char *extra[][2] = {
        {"--force", "--force"}, {"--force", "--force"},
        {"--force", "--force"}, {"--metis-ptype=kway", "--metis-ctype=shem"},
        {"--metis-keep", "1"}, {"--metis-keep=all", "--force"}};

    GKVT_OK(gkv_graph_fixed_homo(&g));
    put(f, "e.txt", homo_txt, sizeof homo_txt - 1);
    for (int i = 0; i < 24; i++)
        feat[i] = (float)i * 0.5f - 3;
    put_npy(f, "feat.npy", GKV_F32, 8, 3, feat);
    for (int m = 0; m < 6; m++) {
        json_t *j;
        char *l;
        int rc;
        {
            char nf[4200];
            snprintf(nf, sizeof nf, "feat=%s", path(f, "feat.npy"));
            rc = run(f, "--parts", "3", "--method", methods[m],
                     "--text-weights", "--input", path(f, "e.txt"),
                     "--num-nodes", "8", "--csr", "--node-feat", nf,
                     "--name", "homo", "--force",
                     extra[m][0], extra[m][1], f->out, NULL);
        }
        if (rc != 0)
            fail_msg("%s: exit %d: %s", methods[m], rc, f->serr);
        assert_string_equal(f->serr, "");      /* no progress when piped */
        assert_string_equal(f->sout, "");
        j = check(f->out, "homo", g, 3);
        assert_string_equal(json_string_value(json_object_get(j, "part_method")),
                            methods[m]);
        assert_true(json_is_true(json_object_get(j, "csr")));
        assert_string_equal(json_string_value(json_array_get(json_object_get(
            json_object_get(j, "node_feats"), "_N"), 0)), "feat");
        check_node_feat(f->out, j, "_N", "node/_N/feat", feat, 8, 3);
        json_decref(j);
        l = gkvt_listing(f->dir);
        assert_null(strstr(l, ".tmp-"));
        free(l);
        gkvt_rmtree(strdup(f->out));
    }
    gkv_graph_free(g);
}

/* fixed_hetero's schema and edges, unweighted; buys only 'with_buys'. */
static gkv_graph *
hetero_ref(int with_buys)
{
    gkv_graph *g, *h;
    gkv_coo c;

    GKVT_OK(gkv_graph_fixed_hetero(&g));
    GKVT_OK(gkv_graph_new(&h));
    GKVT_OK(gkv_graph_add_ntype(h, "user", 4, NULL));
    GKVT_OK(gkv_graph_add_ntype(h, "item", 5, NULL));
    GKVT_OK(gkv_graph_add_etype(h, "user", "follows", "user", NULL));
    GKVT_OK(gkv_graph_add_etype(h, "user", "buys", "item", NULL));
    GKVT_OK(gkv_graph_add_etype(h, "item", "similar", "item", NULL));
    for (int e = 0; e < 3; e++) {
        GKVT_OK(gkv_graph_edges(g, e, &c));
        if (e != 1 || with_buys)
            GKVT_OK(gkv_graph_add_edges(h, e, c.src, c.dst, NULL, (size_t)c.n));
    }
    gkv_graph_free(g);
    return h;
}

static void
test_hetero_files(void **state)
{
    struct fx *f = *state;
    gkv_graph *g;
    static const char follows[] = "0 1\n0 2\n1 2\n2 0\n3 0\n3 2\n";
    static const char buys[] = "src,dst\n0,0\n0,1\n1,1\n1,3\n2,1\n2,4\n3,1\n";
    static const char similar[] = "0 1 similar\n1 0 item:similar:item\n"
                                  "1 2 similar\n3 4 similar\n4 3 similar\n";
    char a1[4200], a2[4200], a3[4200], nf[4200];
    float ufeat[4 * 2] = {1, 2, 3, 4, 5, 6, 7, 8};
    json_t *j;
    int rc;

    /* the fixed heterogeneous graph without weights (the files have none);
     * first without the buys edges */
    g = hetero_ref(0);
    put(f, "follows.txt", follows, sizeof follows - 1);
    put(f, "buys.csv", buys, sizeof buys - 1);
    put(f, "similar.txt", similar, sizeof similar - 1);
    put_npy(f, "u.npy", GKV_F32, 4, 2, ufeat);
    snprintf(a1, sizeof a1, "user:follows:user=%s", path(f, "follows.txt"));
    snprintf(a2, sizeof a2, "user:buys:item=%s", path(f, "buys.csv"));
    snprintf(a3, sizeof a3, "item:similar:item");
    snprintf(nf, sizeof nf, "user/feat=%s", path(f, "u.npy"));
    /* the header flag applies to every text file: the buys file alone has
     * one, so give it through --input with its own run below */
    rc = run(f, "--parts", "2", "--method", "random", "--seed", "11",
             "--ntype", "user=4", "--ntype", "item=5", "--etype", a1,
             "--etype", "user:buys:item", "--etype", a3, "--etype-column",
             "--input", path(f, "similar.txt"), "--node-feat", nf, f->out,
             NULL);
    if (rc != 0)
        fail_msg("exit %d: %s", rc, f->serr);
    j = check(f->out, "graph", g, 2);
    assert_int_equal(json_integer_value(json_object_get(j, "num_edges")), 11);
    json_decref(j);
    gkv_graph_free(g);
    g = hetero_ref(1);
    gkvt_rmtree(strdup(f->out));
    /* now with buys: its header line is an error without --header */
    rc = run(f, "--parts", "2", "--ntype", "user=4", "--ntype", "item=5",
             "--etype", a1, "--etype", a2, "--etype", a3, "--etype-column",
             "--input", path(f, "similar.txt"), f->out, NULL);
    assert_int_equal(rc, 1);
    expect_text("stderr", f->serr, "buys.csv:1:");
    assert_int_equal(access(f->out, F_OK), -1);
    /* headers only in buys.csv: pass it alone with --header? --header is
     * global, so give every file one */
    {
        static const char fh[] = "src dst\n0 1\n0 2\n1 2\n2 0\n3 0\n3 2\n";
        static const char sh[] = "src dst etype\n0 1 similar\n"
                                 "1 0 item:similar:item\n1 2 similar\n"
                                 "3 4 similar\n4 3 similar\n";
        put(f, "follows.txt", fh, sizeof fh - 1);
        put(f, "similar.txt", sh, sizeof sh - 1);
    }
    rc = run(f, "--parts", "2", "--method", "metis", "--header", "--ntype",
             "user=4", "--ntype", "item=5", "--etype", a1, "--etype", a2,
             "--etype", a3, "--etype-column", "--input",
             path(f, "similar.txt"), "--node-feat", nf, "--csr", f->out, NULL);
    if (rc != 0)
        fail_msg("exit %d: %s", rc, f->serr);
    j = check(f->out, "graph", g, 2);
    assert_int_equal(json_integer_value(json_object_get(j, "num_nodes")), 9);
    assert_int_equal(json_integer_value(json_object_get(j, "num_edges")), 18);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j,
                     "ntypes"), "item")), 1);
    check_node_feat(f->out, j, "user", "node/user/feat", ufeat, 4, 2);
    json_decref(j);
    gkv_graph_free(g);
}

/* An edge batch of all of partition q's buys edges on its sgraph, reverse
 * edges excluded by the stored reverse_eid (reverse_eids NULL). */
static gkv_err
part_edge_batch(const char *json, int q, int rev_et, char *msg, size_t cap)
{
    gkv_part *pt;
    gkv_sgraph *sg;
    gkv_sampler *s;
    gkv_edge_batch_spec sp = {0};
    gkv_edge_batch eb;
    gkv_block blk[1];
    int64_t lo, hi, eids[16];
    int fan[1] = {0};           /* one fanout for every edge type */
    gkv_err rc;

    GKVT_OK(gkv_part_open(&pt, json, q, 0));
    GKVT_OK(gkv_pbook_edge_range(gkv_part_book(pt), 0, q, &lo, &hi));
    assert_true(hi - lo >= 1 && hi - lo <= 16);
    for (int64_t e = lo; e < hi; e++)
        eids[e - lo] = e;
    GKVT_OK(gkv_part_sgraph(pt, &sg));
    GKVT_OK(gkv_sampler_new(&s, sg, 1));
    sp.etype = 0;
    sp.eids = eids;
    sp.n = (size_t)(hi - lo);
    sp.exclude = GKV_EXCLUDE_SELF | GKV_EXCLUDE_REVERSE;
    sp.reverse_etype = rev_et;
    rc = gkv_sample_edge_batch(s, &sp, fan, 1, 1, NULL, &eb, blk);
    snprintf(msg, cap, "%s", gkv_sampler_errmsg(s));
    gkv_sampler_free(s);
    gkv_sgraph_free(sg);
    gkv_part_close(pt);
    return rc;
}

/* --reverse-etypes: each type of the pair gets edge/<canon>/reverse_eid,
 * the new ID of its reverse (checked against the mapping files), which
 * an edge batch on a partition reads; without it such a batch is refused
 * (partitioning renumbers each edge type on its own: edge k of the
 * reverse type is no longer edge k's reverse). Bad pairs are named. */
static void
test_reverse_etypes(void **state)
{
    struct fx *f = *state;
    static const char buys[] = "0 0\n0 1\n1 1\n1 3\n2 1\n2 4\n3 1\n3 3\n";
    static const char back[] = "0 0\n1 0\n1 1\n3 1\n1 2\n4 2\n1 3\n3 3\n";
    static const char skew[] = "0 0\n1 0\n1 1\n1 3\n1 2\n4 2\n1 3\n3 3\n";
    static const char views[] = "0 1\n2 3\n4 0\n";
    /* edge 1 starts where buys edge 1 ends, but ends elsewhere */
    static const char skew2[] = "0 0\n2 0\n1 1\n3 1\n1 2\n4 2\n1 3\n3 3\n";
    static const char follows[] = "0 1\n1 2\n";
    char a4[4200];
    static const char *const canon[2] = {"user:buys:item", "item:bought_by:user"};
    char a1[4200], a2[4200], a3[4200], json[4300], msg[1024];
    int64_t *em[2], moved = 0;
    gkv_pbook *b;
    int rc;

    put(f, "buys.txt", buys, sizeof buys - 1);
    put(f, "back.txt", back, sizeof back - 1);
    put(f, "skew.txt", skew, sizeof skew - 1);
    put(f, "views.txt", views, sizeof views - 1);
    put(f, "skew2.txt", skew2, sizeof skew2 - 1);
    put(f, "follows.txt", follows, sizeof follows - 1);
    snprintf(a4, sizeof a4, "user:follows:user=%s", path(f, "follows.txt"));
    snprintf(a3, sizeof a3, "item:viewed_by:user=%s", path(f, "views.txt"));
    snprintf(a1, sizeof a1, "user:buys:item=%s", path(f, "buys.txt"));
    snprintf(a2, sizeof a2, "item:bought_by:user=%s", path(f, "back.txt"));
    snprintf(json, sizeof json, "%s/graph.json", f->out);

    /* without the pair: a batch excluding reverses by edge ID is refused */
    rc = run(f, "--parts", "2", "--method", "random", "--seed", "5",
             "--ntype", "user=4", "--ntype", "item=5", "--etype", a1,
             "--etype", a2, "--etype", a3, f->out, NULL);
    if (rc != 0)
        fail_msg("exit %d: %s", rc, f->serr);
    assert_int_equal(part_edge_batch(json, 0, 1, msg, sizeof msg), GKV_EINVAL);
    expect_text("error", msg, "--reverse-etypes user:buys:item=item:bought_by:user");
    expect_text("error", msg, "renumbers each edge type");
    gkvt_rmtree(strdup(f->out));

    rc = run(f, "--parts", "2", "--method", "random", "--seed", "5",
             "--ntype", "user=4", "--ntype", "item=5", "--etype", a1,
             "--etype", a2, "--etype", a3, "--etype", a4, "--reverse-etypes",
             "buys=bought_by", f->out, NULL);
    if (rc != 0)
        fail_msg("exit %d: %s", rc, f->serr);
    GKVT_OK(gkv_pbook_open(&b, json));
    for (int e = 0; e < 2; e++)
        em[e] = gkvt_read_map(gkv_pbook_edge_mapping(b, e), 8);
    /* reverse_eid of new edge em[e][k] is em[1 - e][k], in its owner */
    for (int e = 0; e < 2; e++)
        for (int q = 0; q < 2; q++) {
            gkv_store *st;
            gkv_tensor_desc d;
            int64_t lo, hi, got[8];
            char tn[128];

            GKVT_OK(gkv_pbook_edge_range(b, e, q, &lo, &hi));
            GKVT_OK(gkv_store_open(&st, gkv_pbook_part_path(b, q),
                                   GKV_RDONLY, NULL));
            snprintf(tn, sizeof tn, "edge/%s/reverse_eid", canon[e]);
            GKVT_OK(gkv_tensor_info(st, NULL, tn, &d));
            assert_int_equal(d.dtype, GKV_I64);
            assert_int_equal(d.lo, lo);
            assert_int_equal(d.hi, hi);
            GKVT_OK(gkv_tensor_read(st, NULL, tn, (uint64_t)lo, (uint64_t)hi,
                                    got, (size_t)(hi - lo) * 8));
            for (int k = 0; k < 8; k++)
                if (em[e][k] >= lo && em[e][k] < hi)
                    assert_int_equal(got[em[e][k] - lo], em[1 - e][k]);
            gkv_store_close(st);
        }
    for (int k = 0; k < 8; k++)
        moved += em[0][k] != em[1][k];
    assert_true(moved > 0);     /* else the test would not tell */
    /* the feature is listed with the others in the config, the pairs too */
    assert_int_equal(gkv_pbook_num_edge_feats(b, 0), 1);
    assert_string_equal(gkv_pbook_edge_feat(b, 0, 0), "reverse_eid");
    assert_int_equal(gkv_pbook_reverse_etype(b, 0), 1);
    assert_int_equal(gkv_pbook_reverse_etype(b, 1), 0);
    assert_int_equal(gkv_pbook_reverse_etype(b, 2), -1);
    {   /* a hand-edited config whose pairs do not pair back is refused */
        json_error_t je;
        json_t *j = json_load_file(json, 0, &je), *rv = json_object();
        char edited[4300];
        gkv_pbook *b2 = NULL;

        assert_non_null(j);
        json_object_set_new(rv, "user:buys:item",
                            json_string("item:bought_by:user"));
        json_object_set_new(j, "reverse_etypes", rv);
        snprintf(edited, sizeof edited, "%s/edited.json", f->out);
        assert_int_equal(json_dump_file(j, edited, 0), 0);
        json_decref(j);
        assert_int_not_equal(gkv_pbook_open(&b2, edited), GKV_OK);
        expect_text("error", gkv_pbook_errmsg(NULL), "is not paired back");
        /* paired both ways, but user->item with user->user */
        j = json_load_file(json, 0, &je);
        rv = json_object();
        json_object_set_new(rv, "user:buys:item",
                            json_string("user:follows:user"));
        json_object_set_new(rv, "user:follows:user",
                            json_string("user:buys:item"));
        json_object_set_new(j, "reverse_etypes", rv);
        assert_int_equal(json_dump_file(j, edited, 0), 0);
        json_decref(j);
        assert_int_not_equal(gkv_pbook_open(&b2, edited), GKV_OK);
        expect_text("error", gkv_pbook_errmsg(NULL), "are not swapped");
        unlink(edited);
    }
    free(em[0]);
    free(em[1]);
    gkv_pbook_close(b);
    for (int q = 0; q < 2; q++)
        if (part_edge_batch(json, q, 1, msg, sizeof msg) != GKV_OK)
            fail_msg("edge batch on partition %d: %s", q, msg);
    /* another reverse type than the pair's: its reverse_eid would name
     * edges of the wrong type */
    assert_int_equal(part_edge_batch(json, 0, 2, msg, sizeof msg), GKV_EINVAL);
    expect_text("error", msg, "was partitioned with 'item:bought_by:user' as "
                "its reverse type");
    gkvt_rmtree(strdup(f->out));

    /* bad pairs: exit 1 naming what is wrong, nothing written */
    snprintf(a2, sizeof a2, "item:bought_by:user=%s", path(f, "skew.txt"));
    rc = run(f, "--parts", "2", "--ntype", "user=4", "--ntype", "item=5",
             "--etype", a1, "--etype", a2, "--reverse-etypes",
             "user:buys:item=bought_by", f->out, NULL);
    assert_int_equal(rc, 1);
    expect_text("stderr", f->serr, "edge 3 of 'user:buys:item' is 1 -> 3, "
                "but edge 3 of 'item:bought_by:user' is 1 -> 3, not 3 -> 1");
    assert_int_equal(access(f->out, F_OK), -1);
    snprintf(a2, sizeof a2, "item:bought_by:user=%s", path(f, "skew2.txt"));
    rc = run(f, "--parts", "2", "--ntype", "user=4", "--ntype", "item=5",
             "--etype", a1, "--etype", a2, "--reverse-etypes",
             "user:buys:item=bought_by", f->out, NULL);
    assert_int_equal(rc, 1);
    expect_text("stderr", f->serr, "edge 1 of 'user:buys:item' is 0 -> 1, "
                "but edge 1 of 'item:bought_by:user' is 2 -> 0, not 1 -> 0");
    rc = run(f, "--parts", "2", "--ntype", "user=4", "--ntype", "item=5",
             "--etype", a1, "--etype", a2, "--reverse-etypes", "buys=buys",
             f->out, NULL);
    assert_int_equal(rc, 1);
    expect_text("stderr", f->serr, "the same edge type");
    rc = run(f, "--parts", "2", "--ntype", "user=4", "--ntype", "item=5",
             "--etype", a1, "--etype", a2, "--reverse-etypes", "buys=sold",
             f->out, NULL);
    assert_int_equal(rc, 1);
    expect_text("stderr", f->serr, "unknown edge type 'sold'");
    rc = run(f, "--parts", "2", "--ntype", "user=4", "--ntype", "item=5",
             "--etype", a1, "--etype", a2, "--reverse-etypes", "buys",
             f->out, NULL);
    assert_int_equal(rc, 2);
    expect_text("stderr", f->serr, "expected ETYPE=REVERSE_ETYPE");
    put(f, "back.txt", back, sizeof back - 5);      /* one edge short */
    snprintf(a2, sizeof a2, "item:bought_by:user=%s", path(f, "back.txt"));
    rc = run(f, "--parts", "2", "--ntype", "user=4", "--ntype", "item=5",
             "--etype", a1, "--etype", a2, "--reverse-etypes",
             "buys=bought_by", f->out, NULL);
    assert_int_equal(rc, 1);
    expect_text("stderr", f->serr, "need as many edges");
    assert_int_equal(access(f->out, F_OK), -1);
}

/* --force killed (SIGKILL, injected by strace) at each rename-family system
 * call in turn: OUT is always there, the old partition or the new one
 * (it was missing when the kill fell between moving the old one aside and
 * moving the new one in). */
static void
test_force_killed_at_each_rename(void **state)
{
    struct fx *f = *state;
    static const char ok[] = "0 1\n1 2\n2 3\n3 0\n4 5\n";
    char json[4200], inj[128], strace[PATH_MAX] = "";
    int killed = 0;
    FILE *pp = popen("command -v strace", "r");

    if (pp != NULL) {
        if (fgets(strace, sizeof strace, pp) == NULL)
            strace[0] = '\0';
        pclose(pp);
    }
    strace[strcspn(strace, "\n")] = '\0';
    if (strace[0] != '/')
        skip();                 /* make deps installs it */
    /* LeakSanitizer cannot run under a ptracer (a sanitizer build's
     * gkv-partition would exit 1 at its end) */
    for (int k = 0; k < 2; k++) {
        const char *var = k ? "ASAN_OPTIONS" : "LSAN_OPTIONS";
        const char *e = getenv(var);
        char opts[1024];

        snprintf(opts, sizeof opts, "%s%sdetect_leaks=0", e ? e : "",
                 e && *e ? ":" : "");
        setenv(var, opts, 1);
    }
    put(f, "e.txt", ok, sizeof ok - 1);
    snprintf(json, sizeof json, "%s/graph.json", f->out);
    for (int when = 1; when <= 6; when++) {
        char *argv[32];
        int n = 0, rc;
        json_t *j;
        json_error_t je;

        if (when == 1 && run(f, "--parts", "2", "--method", "range",
                             "--input", path(f, "e.txt"), f->out, NULL) != 0)
            fail_msg("first run: %s", f->serr);
        snprintf(inj, sizeof inj, "inject=rename,renameat,renameat2:"
                 "signal=SIGKILL:when=%d", when);
        argv[n++] = strace;
        argv[n++] = "-f";
        argv[n++] = "-o";
        argv[n++] = "/dev/null";
        argv[n++] = "-e";
        argv[n++] = inj;
        argv[n++] = tool;
        argv[n++] = "--parts";
        argv[n++] = when % 2 ? "3" : "2";
        argv[n++] = "--method";
        argv[n++] = "range";
        argv[n++] = "--force";
        argv[n++] = "--input";
        argv[n++] = path(f, "e.txt");
        argv[n++] = f->out;
        argv[n] = NULL;
        free(f->sout);
        free(f->serr);
        rc = gkvt_run(argv, NULL, 0, &f->sout, &f->serr, 120);
        if (rc != 0 && rc != 128 + SIGKILL)
            fail_msg("strace run %d: exit %d: %s", when, rc, f->serr);
        killed += rc == 128 + SIGKILL;
        j = json_load_file(json, 0, &je);
        if (j == NULL)
            fail_msg("after a kill at rename %d (exit %d) OUT holds no "
                     "partition: %s", when, rc, je.text);
        assert_true(json_integer_value(json_object_get(j, "num_parts")) >= 2);
        json_decref(j);
    }
    assert_true(killed > 0);    /* some kill hit a rename */
    /* the killed runs left OUT.tmp-PID directories: the next run says so */
    if (run(f, "--parts", "2", "--method", "range", "--force", "--input",
            path(f, "e.txt"), f->out, NULL) != 0)
        fail_msg("last run: %s", f->serr);
    expect_text("stderr", f->serr, "was left by an interrupted run");
    expect_text("stderr", f->serr, "out.tmp-");
    {   /* OUT given as "OUT/" too */
        char slashed[4200];

        snprintf(slashed, sizeof slashed, "%s/", f->out);
        if (run(f, "--parts", "2", "--method", "range", "--force", "--input",
                path(f, "e.txt"), slashed, NULL) != 0)
            fail_msg("run into OUT/: %s", f->serr);
        expect_text("stderr", f->serr, "was left by an interrupted run");
    }
}

static void
test_binary_with_weights(void **state)
{
    struct fx *f = *state;
    gkv_graph *g;
    gkv_coo c;
    int64_t pairs[28];
    char *before;
    json_t *j;
    int rc;

    GKVT_OK(gkv_graph_fixed_homo(&g));
    GKVT_OK(gkv_graph_edges(g, 0, &c));
    for (int64_t i = 0; i < c.n; i++) {
        pairs[2 * i] = c.src[i];
        pairs[2 * i + 1] = c.dst[i];
    }
    put(f, "e.bin", pairs, sizeof pairs);
    put(f, "w.bin", c.w, (size_t)c.n * sizeof(float));
    rc = run(f, "--parts", "4", "--method", "range", "--num-nodes", "8",
             "--binary", path(f, "e.bin"), "--weights", path(f, "w.bin"),
             f->out, NULL);
    if (rc != 0)
        fail_msg("exit %d: %s", rc, f->serr);
    j = check(f->out, "graph", g, 4);
    assert_string_equal(json_string_value(json_array_get(json_object_get(j,
                        "weighted"), 0)), "_N:_E:_N");
    json_decref(j);
    /* a weight file of the wrong size: the reader's message, no OUT2 */
    put(f, "w3.bin", c.w, 3 * sizeof(float));
    before = gkvt_listing(f->dir);
    rc = run(f, "--parts", "2", "--binary", path(f, "e.bin"), "--weights",
             path(f, "w3.bin"), path(f, "out2"), NULL);
    assert_int_equal(rc, 1);
    expect_text("stderr", f->serr, "w3.bin");
    {
        char *after = gkvt_listing(f->dir);
        assert_string_equal(before, after);
        free(after);
    }
    free(before);
    gkv_graph_free(g);
}

static void
test_rmat_stats(void **state)
{
    struct fx *f = *state;
    gkv_rmat_spec rs = {.scale = 8, .seed = 5};
    gkv_graph *g;
    double secs = 0, eps = 0, rss = 0;
    long long edges = 0;
    const char *s;
    json_t *j;
    int rc;

    rc = run(f, "--rmat", "8", "--parts", "2", "--method", "random", "--seed",
             "5", "--stats", f->out, NULL);
    if (rc != 0)
        fail_msg("exit %d: %s", rc, f->serr);
    s = strstr(f->sout, "stats: ");
    assert_non_null(s);
    assert_non_null(strstr(s, "edges="));
    sscanf(strstr(s, " edges=") + 7, "%lld", &edges);
    sscanf(strstr(s, " seconds=") + 9, "%lf", &secs);
    sscanf(strstr(s, " edges_per_s=") + 13, "%lf", &eps);
    sscanf(strstr(s, " peak_rss_bytes=") + 16, "%lf", &rss);
    assert_int_equal(edges, 16 * 256);
    assert_true(secs > 0 && eps > 0 && rss > 1e6);
    assert_non_null(strstr(s, "method=random parts=2"));
    GKVT_OK(gkv_rmat_graph(&g, &rs, 1));
    j = check(f->out, "graph", g, 2);
    json_decref(j);
    gkv_graph_free(g);
    /* 2:4 = edge factor 4 */
    rc = run(f, "--rmat", "2:4", "--parts", "1", "--method", "range",
             path(f, "small"), NULL);
    assert_int_equal(rc, 0);
    rs.scale = 2;
    rs.edge_factor = 4;
    rs.seed = 0;
    GKVT_OK(gkv_rmat_graph(&g, &rs, 1));
    j = check(path(f, "small"), "graph", g, 1);
    assert_int_equal(json_integer_value(json_object_get(j, "num_edges")), 16);
    json_decref(j);
    gkv_graph_free(g);
}

/* ---- bad inputs: exit 1, the message, and nothing new in the directory */

/* Writes the bad (and one good) input files, runs the tool with args (in
 * which BADLINE, BIGID, BADTYPE, OK, ODD, NOSUCH, MASK3 and OUT stand for
 * those files and the output directory, NF3, NFGARBAGE and NFMISSING for
 * feat=FILE options), and checks it exits 1 with a message holding
 * "gkv-partition: " and says[] and leaves the directory as it was. */
static void
expect_bad_input(struct fx *f, const char *const *args,
                 const char *const *says)
{
    static const char bad_line[] = "0 1\n1 2\n1 x\n";
    static const char big_id[] = "0 1\n1 7\n";
    static const char bad_type[] = "0 1 follows\n1 0 likes\n";
    static const char ok[] = "0 1\n1 2\n2 0\n";
    float three[3 * 2] = {0};
    char *before, *after;
    char *argv[20];
    int n = 0, rc;

    put(f, "bad_line.txt", bad_line, sizeof bad_line - 1);
    put(f, "big_id.txt", big_id, sizeof big_id - 1);
    put(f, "bad_type.txt", bad_type, sizeof bad_type - 1);
    put(f, "ok.txt", ok, sizeof ok - 1);
    put(f, "odd.bin", "0123456789ab", 12);
    put(f, "garbage.npy", "\x93NUMPY garbage", 14);
    put_npy(f, "three.npy", GKV_F32, 2, 3, three);
    put_npy(f, "mask3.npy", GKV_F32, 2, 1, three);
    before = gkvt_listing(f->dir);
    argv[n++] = tool;
    for (int k = 0; args[k] != NULL; k++) {
        const char *a = args[k];
        static char buf[16][4200];
        char *b = buf[k];
        if (strcmp(a, "BADLINE") == 0) a = path(f, "bad_line.txt");
        else if (strcmp(a, "BIGID") == 0) a = path(f, "big_id.txt");
        else if (strcmp(a, "BADTYPE") == 0) a = path(f, "bad_type.txt");
        else if (strcmp(a, "OK") == 0) a = path(f, "ok.txt");
        else if (strcmp(a, "ODD") == 0) a = path(f, "odd.bin");
        else if (strcmp(a, "NOSUCH") == 0) a = path(f, "nosuch.txt");
        else if (strcmp(a, "OUT") == 0) a = f->out;
        else if (strcmp(a, "MASK3") == 0) a = path(f, "mask3.npy");
        else if (strcmp(a, "NF3") == 0) {
            snprintf(b, 4200, "feat=%s", path(f, "three.npy"));
            a = b;
        } else if (strcmp(a, "NFGARBAGE") == 0) {
            snprintf(b, 4200, "feat=%s", path(f, "garbage.npy"));
            a = b;
        } else if (strcmp(a, "NFMISSING") == 0) {
            snprintf(b, 4200, "feat=%s", path(f, "missing.npy"));
            a = b;
        }
        argv[n++] = (char *)a;
    }
    argv[n] = NULL;
    free(f->sout);
    free(f->serr);
    rc = gkvt_run(argv, NULL, 0, &f->sout, &f->serr, 60);
    if (rc != 1)
        fail_msg("exit %d, expected 1: %s", rc, f->serr);
    expect_text("stderr", f->serr, "gkv-partition: ");
    for (int k = 0; k < 3 && says[k] != NULL; k++)
        expect_text("stderr", f->serr, says[k]);
    after = gkvt_listing(f->dir);
    assert_string_equal(before, after);
    free(after);
    free(before);
}

#define BAD_INPUT(name, args, says)                                         \
static void                                                                 \
name(void **state)                                                          \
{                                                                           \
    static const char *const a_[] = args, *const s_[4] = says;              \
    expect_bad_input(*state, a_, s_);                                       \
}
#define L(...) {__VA_ARGS__}

BAD_INPUT(test_bad_text_line_is_named_by_line,
          L("--parts", "2", "--input", "BADLINE", "OUT", NULL),
          L("bad_line.txt:3:", NULL))
BAD_INPUT(test_bad_node_id_not_below_num_nodes,
          L("--parts", "2", "--num-nodes", "5", "--input", "BIGID", "OUT",
            NULL),
          L("big_id.txt:2:", "7", "not below 5"))
BAD_INPUT(test_bad_unknown_edge_type_column,
          L("--parts", "2", "--ntype", "u=3", "--etype", "u:follows:u",
            "--etype-column", "--input", "BADTYPE", "OUT", NULL),
          L("bad_type.txt:2:", "unknown edge type 'likes'", NULL))
BAD_INPUT(test_bad_node_feat_rows_not_nodes,
          L("--parts", "2", "--input", "OK", "--node-feat", "NF3", "OUT",
            NULL),
          L("node/_N/feat", "has 2 rows", "3 nodes"))
BAD_INPUT(test_bad_node_feat_garbage_npy,
          L("--parts", "2", "--input", "OK", "--node-feat", "NFGARBAGE",
            "OUT", NULL),
          L("garbage.npy", NULL))
BAD_INPUT(test_bad_node_feat_missing_npy,
          L("--parts", "2", "--input", "OK", "--node-feat", "NFMISSING",
            "OUT", NULL),
          L("missing.npy", NULL))
BAD_INPUT(test_bad_more_parts_than_nodes,
          L("--parts", "4", "--input", "OK", "OUT", NULL),
          L("4 partitions", "only 3 nodes", NULL))
BAD_INPUT(test_bad_input_file_missing,
          L("--parts", "2", "--input", "NOSUCH", "OUT", NULL),
          L("nosuch.txt", NULL))
BAD_INPUT(test_bad_binary_odd_length,
          L("--parts", "2", "--binary", "ODD", "OUT", NULL),
          L("odd.bin", NULL))
BAD_INPUT(test_bad_node_feat_unknown_node_type,
          L("--parts", "2", "--input", "OK", "--node-feat", "u/x=/dev/null",
            "OUT", NULL),
          L("unknown node type 'u'", NULL))
BAD_INPUT(test_bad_train_mask_rows_not_nodes,
          L("--parts", "2", "--input", "OK", "--train-mask", "MASK3", "OUT",
            NULL),
          L("training mask", "2 rows", "3 nodes"))

static void
test_existing_partition_and_force(void **state)
{
    struct fx *f = *state;
    static const char ok[] = "0 1\n1 2\n2 3\n3 0\n";
    char j1p[8300], *l1, *l2;
    FILE *fp;
    char j1[4096], j2[4096];
    size_t n1, n2;
    int rc;

    put(f, "e.txt", ok, sizeof ok - 1);
    rc = run(f, "--parts", "2", "--method", "range", "--input",
             path(f, "e.txt"), f->out, NULL);
    assert_int_equal(rc, 0);
    snprintf(j1p, sizeof j1p, "%s/graph.json", f->out);
    fp = fopen(j1p, "rb");
    n1 = fread(j1, 1, sizeof j1, fp);
    fclose(fp);
    l1 = gkvt_listing(f->out);
    rc = run(f, "--parts", "4", "--method", "range", "--input",
             path(f, "e.txt"), f->out, NULL);
    assert_int_equal(rc, 1);
    expect_text("stderr", f->serr, "already holds a partition");
    expect_text("stderr", f->serr, "--force");
    fp = fopen(j1p, "rb");
    n2 = fread(j2, 1, sizeof j2, fp);
    fclose(fp);
    l2 = gkvt_listing(f->out);
    assert_int_equal(n1, n2);
    assert_memory_equal(j1, j2, n1);
    assert_string_equal(l1, l2);
    free(l2);
    l2 = gkvt_listing(f->dir);
    assert_null(strstr(l2, ".tmp-"));
    free(l2);
    rc = run(f, "--parts", "4", "--method", "range", "--force", "--input",
             path(f, "e.txt"), f->out, NULL);
    if (rc != 0)
        fail_msg("exit %d: %s", rc, f->serr);
    {
        gkv_graph *g;
        json_t *j;
        GKVT_OK(gkv_graph_new_homo(&g, 4));
        {
            int64_t s[4] = {0, 1, 2, 3}, d[4] = {1, 2, 3, 0};
            GKVT_OK(gkv_graph_add_edges(g, 0, s, d, NULL, 4));
        }
        j = check(f->out, "graph", g, 4);
        json_decref(j);
        gkv_graph_free(g);
    }
    l2 = gkvt_listing(f->dir);
    assert_null(strstr(l2, ".old-"));
    free(l2);
    free(l1);

    /* OUT/. (and OUT/..): the temporary folder went inside OUT, and the
     * final rename failed with "Device or resource busy" after the work */
    {
        char dot[8300];
        snprintf(dot, sizeof dot, "%s/.", f->out);
        l1 = gkvt_listing(f->dir);
        rc = run(f, "--parts", "2", "--force", "--input", path(f, "e.txt"),
                 dot, NULL);
        assert_int_equal(rc, 1);
        expect_text("stderr", f->serr, "ends in '.'; name the directory");
        l2 = gkvt_listing(f->dir);
        assert_string_equal(l1, l2);
        free(l1);
        free(l2);
    }
    /* a folder with partition stores but no config: the refusal named
     * nothing ('?') */
    {
        char half[8300];
        snprintf(half, sizeof half, "%s/half", f->dir);
        assert_int_equal(mkdir(half, 0755), 0);
        snprintf(half, sizeof half, "%s/half/part-0", f->dir);
        assert_int_equal(mkdir(half, 0755), 0);
        snprintf(half, sizeof half, "%s/half", f->dir);
        rc = run(f, "--parts", "2", "--force", "--input", path(f, "e.txt"),
                 half, NULL);
        assert_int_equal(rc, 1);
        expect_text("stderr", f->serr, "but no partition config");
    }
}

/* On a terminal the bar is drawn on stderr (never otherwise: the other
 * tests check that stderr stays empty). */
static void
test_progress_on_a_tty(void **state)
{
    struct fx *f = *state;
    char *argv[] = {tool, "--rmat", "12", "--parts", "2", "--method", "range",
                    f->out, NULL};
    char buf[16384];

    assert_int_equal(gkvt_run_tty(argv, buf, sizeof buf), 0);
    expect_text("the terminal", buf, "assigning nodes (range)");
    expect_text("the terminal", buf, "writing [");
    expect_text("the terminal", buf, "100%");
    expect_text("the terminal", buf, "syncing");
}

/* Runs gkv-partition on R-MAT 'scale' by 'method', sends 'sig' 'ms'
 * milliseconds after OUT.tmp-PID appears, and asserts that the tool died
 * of it (within 60 s) and left the folder as it was. A run that finished
 * before the signal reached it (this process was not scheduled while
 * OUT.tmp-PID existed, about a second) proves nothing: its output is
 * removed and it is run again, up to 5 times. */
static void
sig_leaves_nothing(struct fx *f, const char *scale, const char *method,
                   int sig, int ms)
{
    char *argv[] = {tool, "--rmat", (char *)scale, "--parts", "4",
                    "--method", (char *)method, "--threads", "1", f->out,
                    NULL};
    char *before = gkvt_listing(f->dir), *after;
    int st = 0, seen = 0, attempt = 0;
    pid_t pid, w = 0;
    double end;

again:
    st = 0;
    seen = 0;
    w = 0;
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int dn = open("/dev/null", O_RDWR);
        dup2(dn, 0);
        dup2(dn, 1);
        dup2(dn, 2);
        execv(argv[0], argv);
        _exit(127);
    }
    /* wait until OUT.tmp-PID exists, then interrupt */
    end = tools__now_s() + 60;
    while (!seen && tools__now_s() < end) {
        char tmp[4200];
        struct timespec ts = {0, 1000000};
        snprintf(tmp, sizeof tmp, "%s.tmp-%ld", f->out, (long)pid);
        seen = access(tmp, F_OK) == 0;
        if (!seen && (w = waitpid(pid, &st, WNOHANG)) != 0)
            break;
        if (!seen)
            nanosleep(&ts, NULL);
    }
    if (w == 0 && seen) {
        tools__sleep_ms(ms);
        kill(pid, sig);
    } else if (w == 0) {
        gkvt_kill_child(pid);
        fail_msg("the temporary directory never appeared in 60 s");
    }
    for (int i = 0; i < 6000 && w == 0 &&
                    (w = waitpid(pid, &st, WNOHANG)) == 0; i++)
        tools__sleep_ms(10);
    if (w == 0) {
        gkvt_kill_child(pid);
        fail_msg("%s: still running 60 s after signal %d", method, sig);
    }
    assert_int_equal(w, pid);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0 && attempt++ < 5) {
        /* done before the signal came: again */
        gkvt_rmtree(strdup(f->out));
        goto again;
    }
    if (!WIFSIGNALED(st) || WTERMSIG(st) != sig)
        fail_msg("%s: status 0x%x: expected death by signal %d", method, st,
                 sig);
    after = gkvt_listing(f->dir);
    assert_string_equal(before, after);
    free(before);
    free(after);
}

/* SIGINT while the partition is being written: the temporary directory is
 * removed and the tool dies of the signal. */
static void
test_sigint_leaves_nothing(void **state)
{
    sig_leaves_nothing(*state, "19", "range", SIGINT, 0);
}

/* SIGTERM while METIS runs (R-MAT 17 spends about 0.3-1.4 s of its 1.6 s
 * there): libmetis took SIGTERM for itself during the call and longjmp'd
 * out of it, so the tool failed with "METIS_PartGraphKway failed (error)",
 * hung on malloc's lock or crashed, leaving OUT.tmp-PID; its own handler
 * never ran. Now the signal waits for METIS to return. Whenever it lands,
 * the tool must die of it and leave nothing. */
static void
test_sigterm_in_metis_leaves_nothing(void **state)
{
    sig_leaves_nothing(*state, "17", "metis", SIGTERM, 700);
}

/* A negative edge weight, in a text or a binary edge list: the weighted
 * sampler refuses such a graph at training time, so the tool refuses it
 * here (exit 1) naming the line or the edge, and leaves nothing. It
 * accepted -3.0 and exited 0. */
static void
test_negative_weight_refused(void **state)
{
    struct fx *f = *state;
    static const char txt[] = "0 1 0.5\n1 2 -3.0\n2 3 1\n3 0 1\n";
    const int64_t pairs[] = {0, 1, 1, 2, 2, 3, 3, 0};
    const float w[] = {0.5f, -3.0f, 1.0f, 1.0f};
    char *before, *after, want[4200];
    int rc;

    put(f, "negw.txt", txt, sizeof txt - 1);
    put(f, "negw.bin", pairs, sizeof pairs);
    put(f, "negw.w", w, sizeof w);
    before = gkvt_listing(f->dir);
    rc = run(f, "--parts", "2", "--method", "range", "--text-weights",
             "--input", path(f, "negw.txt"), f->out, NULL);
    if (rc != 1)
        fail_msg("text: exit %d, expected 1: %s", rc, f->serr);
    snprintf(want, sizeof want, "%s:2: weight '-3.0' is negative",
             path(f, "negw.txt"));
    expect_text("stderr", f->serr, want);
    expect_text("stderr", f->serr, "(GKV_EFORMAT)");
    after = gkvt_listing(f->dir);
    assert_string_equal(before, after);
    free(after);
    rc = run(f, "--parts", "2", "--method", "range", "--binary",
             path(f, "negw.bin"), "--weights", path(f, "negw.w"), f->out,
             NULL);
    if (rc != 1)
        fail_msg("binary: exit %d, expected 1: %s", rc, f->serr);
    snprintf(want, sizeof want, "%s: weight 1 (byte 4) is -3, negative",
             path(f, "negw.w"));
    expect_text("stderr", f->serr, want);
    after = gkvt_listing(f->dir);
    assert_string_equal(before, after);
    free(after);
    free(before);
}

/* Two --binary files of one edge type, each followed by its --weights:
 * the weights of the first went to both (the last --weights of a type
 * was taken for every --binary of it). Now each --weights pairs with the
 * --binary before it; a --weights before several, or two after one, are
 * usage errors. Range partitioning into one part keeps the edge order,
 * so the CSC weights by destination are known. */
static void
test_weights_pair_with_binary(void **state)
{
    struct fx *f = *state;
    const int64_t a[] = {0, 1, 1, 2}, b[] = {2, 3, 3, 0};
    const float wa[] = {1.5f, 2.5f}, wb[] = {7, 8};
    float got[4];
    char p[4300];
    gkv_store *s;
    int rc;

    put(f, "a.bin", a, sizeof a);
    put(f, "b.bin", b, sizeof b);
    put(f, "wa.bin", wa, sizeof wa);
    put(f, "wb.bin", wb, sizeof wb);
    rc = run(f, "--parts", "1", "--method", "range", "--binary", path(f, "a.bin"),
             "--weights", path(f, "wa.bin"), "--binary", path(f, "b.bin"),
             "--weights", path(f, "wb.bin"), f->out, NULL);
    if (rc != 0)
        fail_msg("exit %d: %s", rc, f->serr);
    snprintf(p, sizeof p, "%s/part-0", f->out);
    GKVT_OK(gkv_store_open(&s, p, GKV_RDONLY, NULL));
    GKVT_OK(gkv_tensor_read(s, NULL, "csc/_N:_E:_N/weight", 0, 4, got,
                            sizeof got));
    gkv_store_close(s);
    /* in-edges of 0, 1, 2, 3: 3->0 (b), 0->1 (a), 1->2 (a), 2->3 (b) */
    assert_true(got[0] == 8 && got[1] == 1.5f && got[2] == 2.5f && got[3] == 7);
    rc = run(f, "--parts", "1", "--method", "range", "--force", "--weights",
             path(f, "wa.bin"), "--binary", path(f, "a.bin"), "--binary",
             path(f, "b.bin"), f->out, NULL);
    assert_int_equal(rc, 2);
    expect_text("stderr", f->serr, "several follow it: give each --weights "
                "after its --binary");
    rc = run(f, "--parts", "1", "--method", "range", "--force", "--binary",
             path(f, "a.bin"), "--weights", path(f, "wa.bin"), "--weights",
             path(f, "wb.bin"), f->out, NULL);
    assert_int_equal(rc, 2);
    expect_text("stderr", f->serr, "both go with --binary");
}

/* --train-mask FILE whose path holds '=': "run=1/mask.npy" was split as
 * NTYPE=FILE and failed with "unknown node type 'run'". The part before
 * '=' is a type only when the graph has that type; a misspelt type with
 * no such file is named both ways. --node-feat NAME=FILE splits at the
 * first '=', so a FILE with '=' already worked: checked alongside. */
static void
test_train_mask_path_with_eq(void **state)
{
    struct fx *f = *state;
    static const char edges[] = "0 1\n1 2\n2 3\n3 0\n";
    const uint8_t mask[4] = {1, 0, 1, 0};
    float feat[4 * 2] = {1, 2, 3, 4, 5, 6, 7, 8};
    char ma[4200], ma2[4200], nf[4200], bad[64], *before, *after;
    gkv_graph *g;
    json_t *j;
    int rc;

    put(f, "e.txt", edges, sizeof edges - 1);
    snprintf(ma, sizeof ma, "%s", path(f, "run=1"));
    assert_int_equal(mkdir(ma, 0755), 0);
    put_npy(f, "run=1/mask.npy", GKV_U8, 4, 1, mask);
    put_npy(f, "run=1/feat.npy", GKV_F32, 4, 2, feat);
    GKVT_OK(gkv_graph_new_homo(&g, 4));
    {
        int64_t s4[4] = {0, 1, 2, 3}, d4[4] = {1, 2, 3, 0};
        GKVT_OK(gkv_graph_add_edges(g, 0, s4, d4, NULL, 4));
    }
    assert_int_equal(chdir(f->dir), 0);
    /* relative, as the user wrote it; and with the type in front */
    snprintf(nf, sizeof nf, "feat=%s", path(f, "run=1/feat.npy"));
    rc = run(f, "--parts", "2", "--input", "e.txt", "--train-mask",
             "run=1/mask.npy", "--node-feat", nf, f->out, NULL);
    if (rc != 0)
        fail_msg("exit %d: %s", rc, f->serr);
    j = check(f->out, "graph", g, 2);
    check_node_feat(f->out, j, "_N", "node/_N/feat", feat, 4, 2);
    json_decref(j);
    gkvt_rmtree(strdup(f->out));
    snprintf(ma2, sizeof ma2, "_N=%s", path(f, "run=1/mask.npy"));
    rc = run(f, "--parts", "2", "--input", "e.txt", "--train-mask", ma2,
             f->out, NULL);
    if (rc != 0)
        fail_msg("_N=: exit %d: %s", rc, f->serr);
    gkvt_rmtree(strdup(f->out));
    /* neither a type nor a file */
    before = gkvt_listing(f->dir);
    snprintf(bad, sizeof bad, "itme=mask.npy");
    rc = run(f, "--parts", "2", "--input", "e.txt", "--train-mask", bad,
             f->out, NULL);
    assert_int_equal(rc, 1);
    expect_text("stderr", f->serr, "--train-mask 'itme=mask.npy': 'itme' is "
                "not a node type, and there is no file 'itme=mask.npy'");
    after = gkvt_listing(f->dir);
    assert_string_equal(before, after);
    free(after);
    free(before);
    assert_int_equal(chdir("/"), 0);
    gkv_graph_free(g);
}

/* Reading the edge list from a FIFO whose writer stalls: SIGTERM or SIGINT
 * must end the tool at once (it dies of the signal, nothing left behind),
 * also while open() waits for a writer. It restarted the blocked read()
 * (SA_RESTART) and lived on until the writer went away. */
static void
fifo_signal(struct fx *f, int sig, int with_writer)
{
    char fifo[4200], *before, *after;
    char *argv[] = {tool, "--parts", "2", "--method", "range", "--input",
                    fifo, f->out, NULL};
    int st = 0, wfd = -1;
    pid_t pid, w = 0;

    snprintf(fifo, sizeof fifo, "%s", path(f, "fifo_in"));
    assert_int_equal(mkfifo(fifo, 0600), 0);
    before = gkvt_listing(f->dir);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int dn = open("/dev/null", O_RDWR);
        dup2(dn, 0);
        dup2(dn, 1);
        dup2(dn, 2);
        execv(argv[0], argv);
        _exit(127);
    }
    if (with_writer) {
        /* be the stalled writer: wait for the tool to open its end (a
         * non-blocking open for writing fails with ENXIO until then),
         * write two edges and keep the FIFO open */
        for (int i = 0; i < 2000 && wfd < 0; i++) {
            wfd = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
            if (wfd < 0)
                tools__sleep_ms(5);
        }
        if (wfd < 0) {
            gkvt_kill_child(pid);
            fail_msg("gkv-partition never opened the FIFO");
        }
        assert_int_equal(write(wfd, "0 1\n1 2\n", 8), 8);
    }
    tools__sleep_ms(300);        /* it is blocked in read() or open() now */
    kill(pid, sig);
    for (int i = 0; i < 3000 && (w = waitpid(pid, &st, WNOHANG)) == 0; i++)
        tools__sleep_ms(10);
    if (w == 0) {
        gkvt_kill_child(pid);
        if (wfd >= 0)
            close(wfd);
        fail_msg("still running 30 s after signal %d, blocked on a FIFO "
                 "(%s writer)", sig, with_writer ? "a stalled" : "no");
    }
    if (wfd >= 0)
        close(wfd);
    assert_int_equal(w, pid);
    if (!WIFSIGNALED(st) || WTERMSIG(st) != sig)
        fail_msg("status 0x%x: expected death by signal %d", st, sig);
    after = gkvt_listing(f->dir);
    assert_string_equal(before, after);       /* no OUT, no OUT.tmp-PID */
    free(before);
    free(after);
    assert_int_equal(unlink(fifo), 0);
}

static void
test_signal_on_stalled_fifo(void **state)
{
    fifo_signal(*state, SIGTERM, 1);
    fifo_signal(*state, SIGINT, 1);
    fifo_signal(*state, SIGTERM, 0);
}

/* A CSV with a header line, read without --header: the error names the
 * line and says to give --header (it said only "src 'src' is not a node
 * ID"); with --header it partitions. A bad line further down, or a file
 * given with --header, gets no such hint. */
static void
test_header_line_hint(void **state)
{
    struct fx *f = *state;
    static const char hdr[] = "# edges\n\nsrc,dst\n0,1\n1,2\n2,0\n";
    static const char bad[] = "0,1\n1,x\n";
    int rc;

    put(f, "e.csv", hdr, sizeof hdr - 1);
    rc = run(f, "--parts", "2", "--input", path(f, "e.csv"), f->out, NULL);
    assert_int_equal(rc, 1);
    expect_text("stderr", f->serr, "e.csv:3: src 'src' is not a node ID");
    expect_text("stderr", f->serr, "a header line? --header skips the first "
                                   "line of each text file");
    assert_int_equal(access(f->out, F_OK), -1);
    rc = run(f, "--parts", "2", "--header", "--input", path(f, "e.csv"),
             f->out, NULL);
    if (rc != 0)
        fail_msg("exit %d: %s", rc, f->serr);
    gkvt_rmtree(strdup(f->out));
    put(f, "bad.csv", bad, sizeof bad - 1);
    assert_int_equal(run(f, "--parts", "2", "--input", path(f, "bad.csv"),
                         f->out, NULL), 1);
    expect_text("stderr", f->serr, "bad.csv:2: dst 'x' is not a node ID");
    assert_null(strstr(f->serr, "--header"));
    assert_int_equal(run(f, "--parts", "2", "--header", "--input",
                         path(f, "e.csv"), "--input", path(f, "bad.csv"),
                         f->out, NULL), 1);
    assert_null(strstr(f->serr, "a header line?"));
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int
main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_help_and_version),
        T(test_usage_errors_exit_2),
        T(test_text_every_method),
        T(test_hetero_files),
        T(test_binary_with_weights),
        T(test_rmat_stats),
        T(test_bad_text_line_is_named_by_line),
        T(test_bad_node_id_not_below_num_nodes),
        T(test_bad_unknown_edge_type_column),
        T(test_bad_node_feat_rows_not_nodes),
        T(test_bad_node_feat_garbage_npy),
        T(test_bad_node_feat_missing_npy),
        T(test_bad_more_parts_than_nodes),
        T(test_bad_input_file_missing),
        T(test_bad_binary_odd_length),
        T(test_bad_node_feat_unknown_node_type),
        T(test_bad_train_mask_rows_not_nodes),
        T(test_existing_partition_and_force),
        T(test_progress_on_a_tty),
        T(test_sigint_leaves_nothing),
        T(test_sigterm_in_metis_leaves_nothing),
        T(test_negative_weight_refused),
        T(test_weights_pair_with_binary),
        T(test_train_mask_path_with_eq),
        T(test_signal_on_stalled_fifo),
        T(test_reverse_etypes),
        T(test_force_killed_at_each_rename),
        T(test_header_line_hint),
    };

    find_tool();
    return cmocka_run_group_tests_name("gkv-partition", tests, NULL, NULL);
}
