/* graph_input_test.c - the graph layer's input side: schema and edges, the
 * text and binary readers (every line form and every bad input), sparse
 * IDs, long weights, and allocation failures throughout (readers, R-MAT,
 * CSC). The R-MAT generator: graph_rmat_test.c; CSC/CSR construction:
 * graph_csc_test.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "gkvt.h"
#include "gkvt_graph.h"
#include "graph/gkv_graph.h"
#include "graph/gkv_partition.h"

#define N_OF(a) (sizeof (a) / sizeof (a)[0])

struct fx {
    char *dir;
    char path[4096];
};

static int
setup(void **state)
{
    return gkvt_dir_setup(state, sizeof(struct fx), "graph");
}

static int
teardown(void **state)
{
    return gkvt_dir_teardown(state);
}

/* Writes len bytes to f->dir/name; returns the path (f->path). */
static const char *
put_file(struct fx *f, const char *name, const void *buf, size_t len)
{
    FILE *fp;

    snprintf(f->path, sizeof f->path, "%s/%s", f->dir, name);
    fp = fopen(f->path, "wb");
    assert_non_null(fp);
    if (len > 0)
        assert_int_equal(fwrite(buf, 1, len, fp), len);
    assert_int_equal(fclose(fp), 0);
    return f->path;
}

/* Little-endian int64 pairs, as the binary reader wants them. */
static const char *
put_pairs(struct fx *f, const char *name, const int64_t *v, size_t nvals)
{
    unsigned char *b = malloc(nvals * 8 + 1);
    const char *p;

    for (size_t i = 0; i < nvals; i++)
        for (int j = 0; j < 8; j++)
            b[8 * i + j] = (unsigned char)((uint64_t)v[i] >> (8 * j));
    p = put_file(f, name, b, nvals * 8);
    free(b);
    return p;
}

static const char *
put_floats(struct fx *f, const char *name, const float *v, size_t n)
{
    unsigned char *b = malloc(n * 4 + 1);
    const char *p;

    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &v[i], 4);
        for (int j = 0; j < 4; j++)
            b[4 * i + j] = (unsigned char)(u >> (8 * j));
    }
    p = put_file(f, name, b, n * 4);
    free(b);
    return p;
}

/* What a failed call must leave alone: edge counts, weightedness, node
 * counts, and every edge. */
struct snap {
    int net, nnt;
    int64_t n[8], count[8];
    int weighted[8];
    uint64_t hash;
};

static struct snap
take_snap(const gkv_graph *g)
{
    struct snap s;
    gkv_etype_info info;
    gkv_coo c;

    memset(&s, 0, sizeof s);
    s.hash = 0xcbf29ce484222325ULL;
    s.net = gkv_graph_num_etypes(g);
    s.nnt = gkv_graph_num_ntypes(g);
    for (int i = 0; i < s.net && i < 8; i++) {
        GKVT_OK(gkv_graph_etype_info(g, i, &info));
        GKVT_OK(gkv_graph_edges(g, i, &c));
        s.n[i] = c.n;
        s.weighted[i] = info.weighted;
        for (int64_t e = 0; e < c.n; e++) {
            s.hash = gkvt_fnv64(s.hash, (uint64_t)c.src[e]);
            s.hash = gkvt_fnv64(s.hash, (uint64_t)c.dst[e]);
            if (c.w != NULL) {
                uint32_t u;
                memcpy(&u, &c.w[e], 4);
                s.hash = gkvt_fnv64(s.hash, u);
            }
        }
    }
    for (int i = 0; i < s.nnt && i < 8; i++)
        s.count[i] = gkv_graph_num_nodes(g, i);
    return s;
}

static void
expect_snap(const gkv_graph *g, const struct snap *want)
{
    struct snap s = take_snap(g);

    assert_int_equal(s.net, want->net);
    assert_int_equal(s.nnt, want->nnt);
    for (int i = 0; i < 8; i++) {
        assert_int_equal(s.n[i], want->n[i]);
        assert_int_equal(s.weighted[i], want->weighted[i]);
        assert_int_equal(s.count[i], want->count[i]);
    }
    assert_true(s.hash == want->hash);
}

/* user (4), item (5), tag (grows); etypes 0 user:follows:user,
 * 1 user:buys:item, 2 item:has:tag, 3 item:follows:item ("follows" is
 * ambiguous, "buys" and "has" are not). */
static gkv_graph *
schema(void)
{
    gkv_graph *g;

    GKVT_OK(gkv_graph_new(&g));
    GKVT_OK(gkv_graph_add_ntype(g, "user", 4, NULL));
    GKVT_OK(gkv_graph_add_ntype(g, "item", 5, NULL));
    GKVT_OK(gkv_graph_add_ntype(g, "tag", GKV_GRAPH_GROW, NULL));
    GKVT_OK(gkv_graph_add_etype(g, "user", "follows", "user", NULL));
    GKVT_OK(gkv_graph_add_etype(g, "user", "buys", "item", NULL));
    GKVT_OK(gkv_graph_add_etype(g, "item", "has", "tag", NULL));
    GKVT_OK(gkv_graph_add_etype(g, "item", "follows", "item", NULL));
    return g;
}

/* ---- schema and edges ---------------------------------------------------- */

static void
test_schema(void **state)
{
    gkv_graph *g = schema(), *h;
    gkv_etype_info info;
    int i;

    (void)state;
    assert_int_equal(gkv_graph_num_ntypes(g), 3);
    assert_int_equal(gkv_graph_num_etypes(g), 4);
    assert_string_equal(gkv_graph_ntype_name(g, 1), "item");
    assert_null(gkv_graph_ntype_name(g, 3));
    assert_int_equal(gkv_graph_num_nodes(g, 0), 4);
    assert_int_equal(gkv_graph_num_nodes(g, 2), 0);        /* grows */
    assert_int_equal(gkv_graph_num_nodes(g, -1), -1);
    assert_int_equal(gkv_graph_num_edges(g, 3), 0);
    assert_int_equal(gkv_graph_num_edges(g, 4), -1);
    GKVT_OK(gkv_graph_ntype_find(g, "tag", &i));
    assert_int_equal(i, 2);
    assert_int_equal(gkv_graph_ntype_find(g, "nope", &i), GKV_ENOTFOUND);

    /* edge types by canonical name or unique relation */
    GKVT_OK(gkv_graph_etype_find(g, "buys", &i));
    assert_int_equal(i, 1);
    GKVT_OK(gkv_graph_etype_find(g, "item:follows:item", &i));
    assert_int_equal(i, 3);
    assert_int_equal(gkv_graph_etype_find(g, "follows", &i), GKV_EINVAL);
    assert_int_equal(gkv_graph_etype_find(g, "user:buys:user", &i),
                     GKV_ENOTFOUND);
    GKVT_OK(gkv_graph_etype_info(g, 1, &info));
    gkvt_expect_etype_info(&info, &(gkv_etype_info){"user:buys:item", "buys",
                           "user", "item", 0, 1, 0, 0});
    assert_int_equal(gkv_graph_etype_info(g, 9, &info), GKV_EINVAL);

    /* bad schema changes fail with a message and change nothing */
    assert_int_equal(gkv_graph_add_ntype(g, "user", 3, NULL), GKV_EEXIST);
    assert_non_null(strstr(gkv_graph_errmsg(g), "'user' exists"));
    assert_int_equal(gkv_graph_add_ntype(g, "a:b", 3, NULL), GKV_EINVAL);
    assert_non_null(strstr(gkv_graph_errmsg(g), "a:b"));
    assert_int_equal(gkv_graph_add_ntype(g, "a b", 3, NULL), GKV_EINVAL);
    assert_int_equal(gkv_graph_add_ntype(g, "node/x", 3, NULL), GKV_EINVAL);
    assert_int_equal(gkv_graph_add_ntype(g, "", 3, NULL), GKV_EINVAL);
    assert_int_equal(gkv_graph_add_ntype(g, NULL, 3, NULL), GKV_EINVAL);
    assert_int_equal(gkv_graph_add_ntype(g,
        "a234567890123456789012345678901234567890123456789012345678901234",
        3, NULL), GKV_EINVAL);
    assert_int_equal(gkv_graph_add_ntype(g, "x", -2, NULL), GKV_EINVAL);
    assert_int_equal(gkv_graph_add_etype(g, "user", "buys", "item", NULL),
                     GKV_EEXIST);
    assert_int_equal(gkv_graph_add_etype(g, "user", "x", "nope", NULL),
                     GKV_ENOTFOUND);
    assert_non_null(strstr(gkv_graph_errmsg(g), "'nope'"));
    assert_int_equal(gkv_graph_add_etype(g, "user", "a#b", "item", NULL),
                     GKV_EINVAL);
    assert_int_equal(gkv_graph_num_ntypes(g), 3);
    assert_int_equal(gkv_graph_num_etypes(g), 4);
    /* a good call clears the message */
    GKVT_OK(gkv_graph_add_ntype(g, "x", 0, &i));
    assert_int_equal(i, 3);
    assert_string_equal(gkv_graph_errmsg(g), "");
    gkv_graph_free(g);

    /* the homogeneous case is named as DGL names it */
    GKVT_OK(gkv_graph_new_homo(&h, 10));
    assert_string_equal(gkv_graph_ntype_name(h, 0), "_N");
    GKVT_OK(gkv_graph_etype_info(h, 0, &info));
    assert_string_equal(info.canonical, "_N:_E:_N");
    GKVT_OK(gkv_graph_etype_find(h, "_E", &i));
    assert_int_equal(i, 0);
    gkv_graph_free(h);
    h = (gkv_graph *)1;
    assert_int_equal(gkv_graph_new_homo(&h, -5), GKV_EINVAL);
    assert_null(h);
    gkv_graph_free(NULL);
    assert_string_equal(gkv_graph_errmsg(NULL), "");
}

static void
test_add_edges(void **state)
{
    gkv_graph *g = schema();
    const int64_t s1[] = {0, 1, 3}, d1[] = {1, 2, 0};
    const int64_t s2[] = {2, 0}, d2[] = {3, 3};
    const float w2[] = {0.5f, 2.0f};
    const int64_t bad_s[] = {0, 1, 2}, bad_d[] = {1, 4, 0};
    const int64_t neg_d[] = {1, -3};
    const float nanw[] = {1.0f, NAN};
    const int64_t ts[] = {4, 0}, td[] = {9, 2};
    struct snap before;

    (void)state;
    GKVT_OK(gkv_graph_add_edges(g, 0, s1, d1, NULL, 3));
    gkvt_expect_coo(g, 0, s1, d1, NULL, 3);
    /* weights arrive late: the earlier edges weigh 1 */
    GKVT_OK(gkv_graph_add_edges(g, 0, s2, d2, w2, 2));
    {
        const int64_t s[] = {0, 1, 3, 2, 0}, d[] = {1, 2, 0, 3, 3};
        const float w[] = {1, 1, 1, 0.5f, 2};
        gkvt_expect_coo(g, 0, s, d, w, 5);
    }
    /* ... and later edges without weights weigh 1 too */
    GKVT_OK(gkv_graph_add_edges(g, 0, s1, d1, NULL, 1));
    {
        gkv_coo c;
        GKVT_OK(gkv_graph_edges(g, 0, &c));
        assert_int_equal(c.n, 6);
        assert_true(c.w[5] == 1.0f);
    }
    before = take_snap(g);
    assert_int_equal(gkv_graph_add_edges(g, 0, bad_s, bad_d, NULL, 3),
                     GKV_ERANGE);
    assert_string_equal(gkv_graph_errmsg(g), "edge 1: dst 4 is not below 4, "
                        "the number of 'user' nodes");
    assert_int_equal(gkv_graph_add_edges(g, 0, s1, neg_d, NULL, 2),
                     GKV_ERANGE);
    assert_string_equal(gkv_graph_errmsg(g), "edge 1: dst -3 is negative");
    assert_int_equal(gkv_graph_add_edges(g, 0, s1, d1, nanw, 2), GKV_EFORMAT);
    assert_non_null(strstr(gkv_graph_errmsg(g), "edge 1: weight"));
    {   /* a negative weight: what the sampler would refuse, refused here */
        const float negw[2] = {1.0f, -0.5f};
        assert_int_equal(gkv_graph_add_edges(g, 0, s1, d1, negw, 2),
                         GKV_EFORMAT);
        assert_string_equal(gkv_graph_errmsg(g), "edge 1: weight -0.5 is "
                            "negative (weights must be 0 or more)");
    }
    assert_int_equal(gkv_graph_add_edges(g, 7, s1, d1, NULL, 1), GKV_EINVAL);
    assert_int_equal(gkv_graph_add_edges(g, 0, NULL, d1, NULL, 1), GKV_EINVAL);
    expect_snap(g, &before);
    GKVT_OK(gkv_graph_add_edges(g, 0, NULL, NULL, NULL, 0));

    /* a growing type follows the largest ID; then it can be fixed */
    GKVT_OK(gkv_graph_add_edges(g, 2, ts, td, NULL, 2));
    assert_int_equal(gkv_graph_num_nodes(g, 2), 10);
    assert_int_equal(gkv_graph_set_num_nodes(g, 2, 9), GKV_ERANGE);
    GKVT_OK(gkv_graph_set_num_nodes(g, 2, 12));
    assert_int_equal(gkv_graph_num_nodes(g, 2), 12);
    {
        const int64_t s[] = {1}, d[] = {12};
        assert_int_equal(gkv_graph_add_edges(g, 2, s, d, NULL, 1), GKV_ERANGE);
        assert_non_null(strstr(gkv_graph_errmsg(g), "not below 12"));
    }
    assert_int_equal(gkv_graph_set_num_nodes(g, 5, 1), GKV_EINVAL);
    gkv_graph_free(g);
}

/* ---- text reader ---------------------------------------------------------- */

static void
test_text_every_line_form(void **state)
{
    struct fx *f = *state;
    static const char text[] =
        "# a comment line\n"
        "\n"
        "   \t \n"
        "0 1\n"
        "1\t2\n"
        "2,3\n"
        "3 , 4\n"
        "  4   5  # a trailing comment\n"
        "5,6\r\n"
        "#6 7\n"
        "  # indented comment\n"
        "6\t,\t7\n"
        "7 0";                                  /* no final newline */
    const int64_t s[] = {0, 1, 2, 3, 4, 5, 6, 7};
    const int64_t d[] = {1, 2, 3, 4, 5, 6, 7, 0};
    gkv_graph *g;

    GKVT_OK(gkv_graph_new_homo(&g, GKV_GRAPH_GROW));
    GKVT_OK(gkv_graph_read_text(g, put_file(f, "forms.txt", text,
                                            strlen(text)), 0, 0));
    gkvt_expect_coo(g, 0, s, d, NULL, 8);
    assert_int_equal(gkv_graph_num_nodes(g, 0), 8);
    /* the same bytes from memory give the same edges, appended */
    GKVT_OK(gkv_graph_read_text_mem(g, "forms", text, strlen(text), 0, 0));
    assert_int_equal(gkv_graph_num_edges(g, 0), 16);
    gkv_graph_free(g);

    /* a header line, after comments, is skipped unread */
    {
        static const char csv[] = "# exported\n\nsrc,dst,weight\n0,1,0.5\n"
                                   "1,2,2e0\n2, 0, .25\n";
        const int64_t cs[] = {0, 1, 2}, cd[] = {1, 2, 0};
        const float cw[] = {0.5f, 2.0f, 0.25f};

        GKVT_OK(gkv_graph_new_homo(&g, 3));
        GKVT_OK(gkv_graph_read_text(g, put_file(f, "h.csv", csv, strlen(csv)),
                                    0, GKV_TEXT_HEADER | GKV_TEXT_WEIGHT));
        gkvt_expect_coo(g, 0, cs, cd, cw, 3);
        /* without the flag the header is a bad line 3 */
        assert_int_equal(gkv_graph_read_text(g, f->path, 0, GKV_TEXT_WEIGHT),
                         GKV_EFORMAT);
        assert_non_null(strstr(gkv_graph_errmsg(g),
                               "h.csv:3: src 'src' is not a node ID"));
        gkvt_expect_coo(g, 0, cs, cd, cw, 3);
        gkv_graph_free(g);
    }
    /* an empty file and a comments-only file add nothing */
    GKVT_OK(gkv_graph_new_homo(&g, 3));
    GKVT_OK(gkv_graph_read_text(g, put_file(f, "empty", "", 0), 0, 0));
    GKVT_OK(gkv_graph_read_text_mem(g, "c", "# x\n#y", 6, 0, 0));
    GKVT_OK(gkv_graph_read_text_mem(g, "nothing", NULL, 0, 0, 0));
    assert_int_equal(gkv_graph_num_edges(g, 0), 0);
    gkv_graph_free(g);
}

static void
test_text_types_and_weights(void **state)
{
    struct fx *f = *state;
    static const char text[] =
        "# src dst etype weight\n"
        "0 1 user:follows:user 1.5\n"
        "1,2,user:follows:user,2\n"
        "2 3 buys 0.25\n"
        "3, 4, buys, 1e-1\n"
        "4 0 has 3\n"
        "2 7 has 2.5\n"
        "0 1 item:follows:item 1\n"
        "3 3 user:buys:item 7\n";
    gkv_graph *g = schema();

    GKVT_OK(gkv_graph_read_text(g, put_file(f, "het.txt", text, strlen(text)),
                                GKV_ETYPE_COLUMN, GKV_TEXT_WEIGHT));
    {
        const int64_t s[] = {0, 1}, d[] = {1, 2};
        const float w[] = {1.5f, 2.0f};
        gkvt_expect_coo(g, 0, s, d, w, 2);
    }
    {
        const int64_t s[] = {2, 3, 3}, d[] = {3, 4, 3};
        const float w[] = {0.25f, 0.1f, 7.0f};
        gkvt_expect_coo(g, 1, s, d, w, 3);
    }
    {
        const int64_t s[] = {4, 2}, d[] = {0, 7};
        const float w[] = {3.0f, 2.5f};
        gkvt_expect_coo(g, 2, s, d, w, 2);
    }
    {
        const int64_t s[] = {0}, d[] = {1};
        const float w[] = {1.0f};
        gkvt_expect_coo(g, 3, s, d, w, 1);
    }
    assert_int_equal(gkv_graph_num_nodes(g, 2), 8);          /* tag grew */
    gkv_graph_free(g);

    /* types without weights; one fixed type for a whole file */
    g = schema();
    GKVT_OK(gkv_graph_read_text_mem(g, "t", "0 1 has\n1 2 buys\n", 17,
                                    GKV_ETYPE_COLUMN, 0));
    {
        const int64_t s[] = {0}, d[] = {1};
        gkvt_expect_coo(g, 2, s, d, NULL, 1);
        gkvt_expect_coo(g, 1, (const int64_t[]){1}, (const int64_t[]){2},
                        NULL, 1);
    }
    GKVT_OK(gkv_graph_read_text_mem(g, "t", "4 4\n", 4, 3, 0));
    gkvt_expect_coo(g, 3, (const int64_t[]){4}, (const int64_t[]){4}, NULL, 1);
    gkv_graph_free(g);
}

struct bad_text {
    const char *text;
    size_t len;            /* 0: strlen(text) */
    int etype;
    unsigned flags;
    gkv_err rc;
    const char *msg;       /* expected in the message after "bad.txt" */
};

static void
test_text_bad_input(void **state)
{
    struct fx *f = *state;
    static char longline[GKV_TEXT_LINE_MAX + 64];
    static char longtail[300 * 1024];
    const struct bad_text cases[] = {
        {"0 1\n0 1\nx 2\n", 0, 0, 0, GKV_EFORMAT,
         ":3: src 'x' is not a node ID"},
        {"0 1\n\n# c\n0 1 2\n", 0, 0, 0, GKV_EFORMAT,
         ":4: expected 2 fields (src dst), found 3"},
        {"0\n", 0, 0, 0, GKV_EFORMAT, ":1: expected 2 fields (src dst), found 1"},
        {"1 2\n0,,1\n", 0, 0, 0, GKV_EFORMAT, ":2: empty field"},
        {"0,1,\n", 0, 0, 0, GKV_EFORMAT, ":1: empty field"},
        {",0,1\n", 0, 0, 0, GKV_EFORMAT, ":1: empty field"},
        {"0 1\n1 4\n", 0, 0, 0, GKV_ERANGE,
         ":2: dst 4 is not below 4, the number of 'user' nodes"},
        {"0 -1\n", 0, 0, 0, GKV_ERANGE, ":1: dst -1 is negative"},
        {"99999999999999999999 1\n", 0, 0, 0, GKV_ERANGE,
         ":1: src 99999999999999999999 is too large"},
        {"9223372036854775808 1\n", 0, 0, 0, GKV_ERANGE, ":1: src "
         "9223372036854775808 is too large"},
        {"0 0x1\n", 0, 0, 0, GKV_EFORMAT, ":1: dst '0x1' is not a node ID"},
        {"+1 2\n", 0, 0, 0, GKV_EFORMAT, ":1: src '+1' is not a node ID"},
        {"1 - 2\n", 0, 0, 0, GKV_EFORMAT, ":1: expected 2 fields"},
        {"0 1\n1 2\0\n", 9, 0, 0, GKV_EFORMAT, ":2: dst '2?' is not a node ID"},
        {"0 1 likes\n", 0, GKV_ETYPE_COLUMN, 0, GKV_ENOTFOUND,
         ":1: unknown edge type 'likes'"},
        {"0 1 user:buys:user\n", 0, GKV_ETYPE_COLUMN, 0, GKV_ENOTFOUND,
         ":1: unknown edge type 'user:buys:user'"},
        {"0 1 buys\n0 1 follows\n", 0, GKV_ETYPE_COLUMN, 0, GKV_EFORMAT,
         ":2: relation 'follows' belongs to several edge types"},
        {"3 5 buys\n", 0, GKV_ETYPE_COLUMN, 0, GKV_ERANGE,
         ":1: dst 5 is not below 5, the number of 'item' nodes"},
        {"0 1 buys 1.0\n", 0, GKV_ETYPE_COLUMN, 0, GKV_EFORMAT,
         ":1: expected 3 fields (src dst etype), found 4"},
        {"0 1 buys\n", 0, GKV_ETYPE_COLUMN, GKV_TEXT_WEIGHT, GKV_EFORMAT,
         ":1: expected 4 fields (src dst etype weight), found 3"},
        {"0 1 abc\n", 0, 0, GKV_TEXT_WEIGHT, GKV_EFORMAT,
         ":1: weight 'abc' is not a finite number"},
        {"0 1 1\n0 1 nan\n", 0, 0, GKV_TEXT_WEIGHT, GKV_EFORMAT,
         ":2: weight 'nan' is not a finite number"},
        {"0 1 inf\n", 0, 0, GKV_TEXT_WEIGHT, GKV_EFORMAT, ":1: weight 'inf'"},
        {"0 1 1e999\n", 0, 0, GKV_TEXT_WEIGHT, GKV_EFORMAT,
         ":1: weight '1e999'"},
        {"0 1 1.5x\n", 0, 0, GKV_TEXT_WEIGHT, GKV_EFORMAT, ":1: weight '1.5x'"},
        {"0 1 1.5\n", 0, 0, 0, GKV_EFORMAT,
         ":1: expected 2 fields (src dst), found 3"},
        /* a growing type's count comes back after a late failure */
        {"0 5 has\n4 9 has\n1 x has\n", 0, GKV_ETYPE_COLUMN, 0, GKV_EFORMAT,
         ":3: dst 'x' is not a node ID"},
        /* and so do weights that the file brought */
        {"0 1 1\n1 2 2\n3 9 1\n", 0, 0, GKV_TEXT_WEIGHT, GKV_ERANGE,
         ":3: dst 9 is not below 4"},
        {longline, 0, 0, 0, GKV_EFORMAT, ":2: line is longer than 4096 bytes"},
        {longtail, 0, 0, 0, GKV_EFORMAT, ":2: line is longer than 4096 bytes"},
    };
    gkv_graph *g = schema();
    const int64_t s0[] = {0, 1}, d0[] = {1, 2}, s2[] = {0}, d2[] = {2};
    struct snap before;

    /* a line over the limit, whole in the buffer or running past it */
    memset(longline, ' ', sizeof longline - 1);
    memcpy(longline, "0 1\n", 4);
    memcpy(longline + sizeof longline - 5, "0 1\n", 4);
    memset(longtail, '7', sizeof longtail - 1);
    memcpy(longtail, "0 1\n", 4);

    /* Some edges already there, on the etypes the cases touch, so rollback
     * has something to keep. */
    GKVT_OK(gkv_graph_add_edges(g, 0, s0, d0, NULL, 2));
    GKVT_OK(gkv_graph_add_edges(g, 2, s2, d2, NULL, 1));
    before = take_snap(g);
    assert_int_equal(before.count[2], 3);
    for (size_t i = 0; i < N_OF(cases); i++) {
        const struct bad_text *c = &cases[i];
        size_t len = c->len ? c->len : strlen(c->text);
        char want[128];
        gkv_err rc;

        snprintf(want, sizeof want, "bad.txt%s", c->msg);
        rc = gkv_graph_read_text(g, put_file(f, "bad.txt", c->text, len),
                                 c->etype, c->flags);
        if (rc != c->rc || strstr(gkv_graph_errmsg(g), want) == NULL)
            fail_msg("case %zu: got %s '%s', want %s '...%s...'", i,
                     gkv_err_name(rc), gkv_graph_errmsg(g),
                     gkv_err_name(c->rc), want);
        expect_snap(g, &before);
        /* from memory: the same code and line, under the given name */
        rc = gkv_graph_read_text_mem(g, "bad.txt", c->text, len, c->etype,
                                     c->flags);
        if (rc != c->rc || strstr(gkv_graph_errmsg(g), want) == NULL)
            fail_msg("case %zu (mem): got %s '%s'", i, gkv_err_name(rc),
                     gkv_graph_errmsg(g));
        expect_snap(g, &before);
    }

    /* bad arguments and files */
    assert_int_equal(gkv_graph_read_text(g, f->path, 4, 0), GKV_EINVAL);
    assert_int_equal(gkv_graph_read_text(g, f->path, -2, 0), GKV_EINVAL);
    assert_int_equal(gkv_graph_read_text(g, f->path, 0, 0x80), GKV_EINVAL);
    snprintf(f->path, sizeof f->path, "%s/missing.txt", f->dir);
    assert_int_equal(gkv_graph_read_text(g, f->path, 0, 0), GKV_ENOENT);
    assert_non_null(strstr(gkv_graph_errmsg(g), "missing.txt"));
    assert_int_equal(gkv_graph_read_text(g, f->dir, 0, 0), GKV_EINVAL);
    assert_non_null(strstr(gkv_graph_errmsg(g), "is a directory"));
    assert_int_equal(gkv_graph_read_text(g, NULL, 0, 0), GKV_EINVAL);
    assert_int_equal(gkv_graph_read_text(NULL, f->path, 0, 0), GKV_EINVAL);
    expect_snap(g, &before);
    gkv_graph_free(g);
}

/* A file much larger than the reader's buffer: lines cross block
 * boundaries, and a late bad line still gets its own number. */
static void
test_text_large_file(void **state)
{
    struct fx *f = *state;
    const size_t n = 120000;
    char *text = malloc(n * 40), *p = text;
    uint64_t x = gkvt_seed();
    int64_t *s = malloc(n * sizeof *s), *d = malloc(n * sizeof *d);
    float *w = malloc(n * sizeof *w);
    gkv_graph *g;
    gkv_coo c;

    for (size_t i = 0; i < n; i++) {
        s[i] = (int64_t)(tools__splitmix64(&x) % 100000);
        d[i] = (int64_t)(tools__splitmix64(&x) % 100000);
        w[i] = (float)(tools__splitmix64(&x) % 1000) / 8.0f;
        p += sprintf(p, i % 3 ? "%lld %lld %g\n" : "%lld,%lld,%g\r\n",
                     (long long)s[i], (long long)d[i], (double)w[i]);
    }
    GKVT_OK(gkv_graph_new_homo(&g, 100000));
    GKVT_OK(gkv_graph_read_text(g, put_file(f, "big.txt", text,
                                            (size_t)(p - text)),
                                0, GKV_TEXT_WEIGHT));
    GKVT_OK(gkv_graph_edges(g, 0, &c));
    assert_int_equal(c.n, n);
    gkvt_expect_i64(c.src, s, n, "element");
    gkvt_expect_i64(c.dst, d, n, "element");
    for (size_t i = 0; i < n; i++)
        assert_true(c.w[i] == w[i]);
    gkv_graph_free(g);

    /* line 100001 goes bad */
    p = text;
    for (size_t i = 0; i < n; i++)
        p += sprintf(p, i == 100000 ? "%lld %lld!\n" : "%lld %lld\n",
                     (long long)s[i], (long long)d[i]);
    GKVT_OK(gkv_graph_new_homo(&g, 100000));
    assert_int_equal(gkv_graph_read_text(g, put_file(f, "big2.txt", text,
                                                     (size_t)(p - text)),
                                         0, 0), GKV_EFORMAT);
    assert_non_null(strstr(gkv_graph_errmsg(g), "big2.txt:100001: dst "));
    assert_int_equal(gkv_graph_num_edges(g, 0), 0);
    gkv_graph_free(g);
    free(text);
    free(s);
    free(d);
    free(w);
}

/* ---- binary reader -------------------------------------------------------- */

static void
test_binary(void **state)
{
    struct fx *f = *state;
    const int64_t pairs[] = {0, 1, 3, 0, 2, 2, 1, 3};
    const float w[] = {0.5f, 1.0f, 2.0f, 8.0f};
    const int64_t s[] = {0, 3, 2, 1}, d[] = {1, 0, 2, 3};
    char wpath[4096];
    gkv_graph *g;

    GKVT_OK(gkv_graph_new_homo(&g, 4));
    put_floats(f, "w.f32", w, 4);
    snprintf(wpath, sizeof wpath, "%s", f->path);
    GKVT_OK(gkv_graph_read_binary(g, 0, put_pairs(f, "e.bin", pairs, 8),
                                  wpath));
    gkvt_expect_coo(g, 0, s, d, w, 4);
    /* appending without weights: 1.0 each */
    GKVT_OK(gkv_graph_read_binary(g, 0, f->path, NULL));
    {
        gkv_coo c;
        GKVT_OK(gkv_graph_edges(g, 0, &c));
        assert_int_equal(c.n, 8);
        assert_int_equal(c.src[6], 2);
        assert_true(c.w[6] == 1.0f && c.w[2] == 2.0f);
    }
    gkv_graph_free(g);

    /* unweighted, into a heterogeneous type; an empty file is no edges */
    g = schema();
    {
        const int64_t p2[] = {3, 4, 0, 0};
        GKVT_OK(gkv_graph_read_binary(g, 1, put_pairs(f, "b.bin", p2, 4),
                                      NULL));
        gkvt_expect_coo(g, 1, (const int64_t[]){3, 0}, (const int64_t[]){4, 0},
                        NULL, 2);
        GKVT_OK(gkv_graph_read_binary(g, 2, put_file(f, "z.bin", "", 0),
                                      NULL));
        assert_int_equal(gkv_graph_num_edges(g, 2), 0);
        /* a growing type grows */
        const int64_t p3[] = {1, 41, 2, 7};
        GKVT_OK(gkv_graph_read_binary(g, 2, put_pairs(f, "t.bin", p3, 4),
                                      NULL));
        assert_int_equal(gkv_graph_num_nodes(g, 2), 42);
    }
    gkv_graph_free(g);
}

static void
test_binary_bad_input(void **state)
{
    struct fx *f = *state;
    const int64_t good[] = {0, 1, 1, 2, 2, 3};
    const int64_t big[] = {0, 1, 1, 2, 3, 4};       /* user 4: dst 4 bad */
    const int64_t neg[] = {0, 1, -1, 2};
    const float w3[] = {1, 2, 3}, w2[] = {1, 2}, wnan[] = {1, NAN, 3};
    char ep[4096], wp[4096], raw[64];
    gkv_graph *g = schema();
    struct snap before;

    GKVT_OK(gkv_graph_add_edges(g, 0, (const int64_t[]){3},
                                (const int64_t[]){3}, NULL, 1));
    before = take_snap(g);

    /* a partial int64: "odd byte count" */
    memset(raw, 0, sizeof raw);
    assert_int_equal(gkv_graph_read_binary(g, 0, put_file(f, "odd.bin", raw,
                                                          21), NULL),
                     GKV_EFORMAT);
    assert_non_null(strstr(gkv_graph_errmsg(g), "odd.bin: 21 bytes is not a "
                           "whole number of int64 values (5 left over)"));
    /* a truncated file: a src without its dst */
    assert_int_equal(gkv_graph_read_binary(g, 0, put_file(f, "trunc.bin", raw,
                                                          40), NULL),
                     GKV_EFORMAT);
    assert_non_null(strstr(gkv_graph_errmsg(g), "trunc.bin: 5 int64 values "
                           "is an odd number: edge 2 has a src but no dst"));
    /* weights that do not match the edges */
    snprintf(ep, sizeof ep, "%s", put_pairs(f, "good.bin", good, 6));
    snprintf(wp, sizeof wp, "%s", put_floats(f, "w2.f32", w2, 2));
    assert_int_equal(gkv_graph_read_binary(g, 0, ep, wp), GKV_EFORMAT);
    assert_non_null(strstr(gkv_graph_errmsg(g), "w2.f32: 8 bytes, but "));
    assert_non_null(strstr(gkv_graph_errmsg(g), "holds 3 edges and needs 12 "
                           "bytes"));
    snprintf(wp, sizeof wp, "%s", put_file(f, "w.odd", raw, 13));
    assert_int_equal(gkv_graph_read_binary(g, 0, ep, wp), GKV_EFORMAT);
    snprintf(wp, sizeof wp, "%s", put_floats(f, "wnan.f32", wnan, 3));
    assert_int_equal(gkv_graph_read_binary(g, 0, ep, wp), GKV_EFORMAT);
    assert_non_null(strstr(gkv_graph_errmsg(g), "wnan.f32: weight 1 (byte 4) "
                           "is nan"));
    /* IDs out of range */
    assert_int_equal(gkv_graph_read_binary(g, 0, put_pairs(f, "big.bin", big,
                                                           6), NULL),
                     GKV_ERANGE);
    assert_non_null(strstr(gkv_graph_errmsg(g), "big.bin: edge 2 (byte 32): "
                           "dst 4 is not below 4, the number of 'user' "
                           "nodes"));
    assert_int_equal(gkv_graph_read_binary(g, 1, put_pairs(f, "neg.bin", neg,
                                                           4), NULL),
                     GKV_ERANGE);
    assert_non_null(strstr(gkv_graph_errmsg(g), "neg.bin: edge 1 (byte 16): "
                           "src -1 is negative"));
    /* files and arguments */
    snprintf(wp, sizeof wp, "%s/nope.f32", f->dir);
    assert_int_equal(gkv_graph_read_binary(g, 0, ep, wp), GKV_ENOENT);
    assert_non_null(strstr(gkv_graph_errmsg(g), "nope.f32"));
    snprintf(wp, sizeof wp, "%s/nope.bin", f->dir);
    assert_int_equal(gkv_graph_read_binary(g, 0, wp, NULL), GKV_ENOENT);
    assert_int_equal(gkv_graph_read_binary(g, 0, f->dir, NULL), GKV_EINVAL);
    assert_int_equal(gkv_graph_read_binary(g, 9, ep, NULL), GKV_EINVAL);
    assert_int_equal(gkv_graph_read_binary(g, 0, NULL, NULL), GKV_EINVAL);
    expect_snap(g, &before);
    /* and the good one still reads, with weights */
    snprintf(wp, sizeof wp, "%s", put_floats(f, "w3.f32", w3, 3));
    GKVT_OK(gkv_graph_read_binary(g, 0, ep, wp));
    assert_int_equal(gkv_graph_num_edges(g, 0), 4);
    gkv_graph_free(g);
}

/* Negative weights: the weighted sampler refuses a graph that has one
 * (at training time, on every call), so both readers refuse it when the
 * graph is read, naming the line or the edge, and keep nothing. A weight
 * of 0 or -0 is fine; a non-finite one is still "not a finite number". */
static void
test_negative_weights_refused(void **state)
{
    struct fx *f = *state;
    static const char neg[] = "0 1 0.5\n1 2 -3.0\n2 3 1\n";
    static const char tiny[] = "0 1 -1e-40\n";       /* subnormal, < 0 */
    static const char ninf[] = "0 1 1\n1 2 -inf\n";
    static const char zeros[] = "0 1 0\n1 2 -0\n2 3 -0.0e0\n";
    const int64_t pairs[] = {0, 1, 1, 2, 2, 3, 3, 0};
    const float wneg[] = {0.5f, 1.0f, 1.0f, -3.0f};
    const float wzero[] = {0.0f, -0.0f, 1.0f, 2.0f};
    const float winf[] = {1.0f, -INFINITY, 1.0f, 1.0f};
    char ep[4096], wp[4096];
    gkv_graph *g;
    gkv_coo c;

    GKVT_OK(gkv_graph_new_homo(&g, 4));
    /* text, from a file and from memory */
    assert_int_equal(gkv_graph_read_text(g, put_file(f, "neg.txt", neg,
                                                     sizeof neg - 1),
                                         0, GKV_TEXT_WEIGHT), GKV_EFORMAT);
    if (strstr(gkv_graph_errmsg(g), "neg.txt:2: weight '-3.0' is negative")
        == NULL)
        fail_msg("%s", gkv_graph_errmsg(g));
    assert_int_equal(gkv_graph_num_edges(g, 0), 0);
    assert_int_equal(gkv_graph_read_text_mem(g, "m.txt", neg, sizeof neg - 1,
                                             0, GKV_TEXT_WEIGHT), GKV_EFORMAT);
    assert_non_null(strstr(gkv_graph_errmsg(g),
                           "m.txt:2: weight '-3.0' is negative"));
    assert_int_equal(gkv_graph_read_text_mem(g, "m.txt", tiny,
                                             sizeof tiny - 1, 0,
                                             GKV_TEXT_WEIGHT), GKV_EFORMAT);
    assert_non_null(strstr(gkv_graph_errmsg(g),
                           "m.txt:1: weight '-1e-40' is negative"));
    assert_int_equal(gkv_graph_read_text_mem(g, "m.txt", ninf,
                                             sizeof ninf - 1, 0,
                                             GKV_TEXT_WEIGHT), GKV_EFORMAT);
    assert_non_null(strstr(gkv_graph_errmsg(g), "m.txt:2: weight '-inf' is "
                           "not a finite number"));
    assert_int_equal(gkv_graph_num_edges(g, 0), 0);
    GKVT_OK(gkv_graph_read_text_mem(g, "z.txt", zeros, sizeof zeros - 1, 0,
                                    GKV_TEXT_WEIGHT));
    GKVT_OK(gkv_graph_edges(g, 0, &c));
    assert_int_equal(c.n, 3);
    assert_non_null(c.w);
    for (int i = 0; i < 3; i++)
        assert_true(c.w[i] == 0.0f);
    gkv_graph_free(g);

    /* binary */
    GKVT_OK(gkv_graph_new_homo(&g, 4));
    snprintf(ep, sizeof ep, "%s", put_pairs(f, "e.bin", pairs, 8));
    snprintf(wp, sizeof wp, "%s", put_floats(f, "neg.f32", wneg, 4));
    assert_int_equal(gkv_graph_read_binary(g, 0, ep, wp), GKV_EFORMAT);
    if (strstr(gkv_graph_errmsg(g), "neg.f32: weight 3 (byte 12) is -3, "
                                    "negative") == NULL)
        fail_msg("%s", gkv_graph_errmsg(g));
    assert_int_equal(gkv_graph_num_edges(g, 0), 0);
    snprintf(wp, sizeof wp, "%s", put_floats(f, "inf.f32", winf, 4));
    assert_int_equal(gkv_graph_read_binary(g, 0, ep, wp), GKV_EFORMAT);
    assert_non_null(strstr(gkv_graph_errmsg(g), "inf.f32: weight 1 (byte 4) "
                           "is -inf, not a finite number"));
    assert_int_equal(gkv_graph_num_edges(g, 0), 0);
    snprintf(wp, sizeof wp, "%s", put_floats(f, "zero.f32", wzero, 4));
    GKVT_OK(gkv_graph_read_binary(g, 0, ep, wp));
    gkvt_expect_coo(g, 0, (const int64_t[]){0, 1, 2, 3},
                    (const int64_t[]){1, 2, 3, 0}, wzero, 4);
    gkv_graph_free(g);
}

/* ---- allocation failures -------------------------------------------------- */

/* ---- sparse node IDs ------------------------------------------------------- */

/* Partitions edge list 'text' (homogeneous, counts grown from the IDs, as
 * gkv-partition reads an --input file) into f->dir/out; returns the code,
 * the message in msg. */
static gkv_err
partition_text(struct fx *f, const char *text, int64_t num_nodes,
               gkv_part_method m, char *msg, size_t len)
{
    gkv_part_spec sp;
    gkv_graph *g;
    char out[4200];
    struct stat sb;
    gkv_err rc;

    GKVT_OK(gkv_graph_new_homo(&g, num_nodes));
    GKVT_OK(gkv_graph_read_text_mem(g, "big.txt", text, strlen(text), 0, 0));
    GKVT_OK(gkv_graph_set_num_nodes(g, 0, gkv_graph_num_nodes(g, 0)));
    memset(&sp, 0, sizeof sp);
    sp.method = m;
    sp.num_parts = 2;
    snprintf(out, sizeof out, "%s/out", f->dir);
    rc = gkv_partition_write(g, &sp, out, NULL, msg, len);
    if (rc != GKV_OK)         /* refused before anything was written */
        assert_int_equal(stat(out, &sb), -1);
    gkv_graph_free(g);
    return rc;
}

/* One edge "0 1099511627776": node IDs are dense, so that is 2^40 + 1
 * nodes; the partitioner refuses at once (no allocation of terabytes, no
 * minutes of work), saying so and how much memory it needs, rather than
 * "out of memory numbering the 1 edges". */
static void
test_sparse_ids_refused_with_reason(void **state)
{
    struct fx *f = *state;
    char msg[1024];

    assert_int_equal(partition_text(f, "0 1099511627776\n", GKV_GRAPH_GROW,
                                    GKV_PART_RANDOM, msg, sizeof msg),
                     GKV_ENOMEM);
    print_message("%s\n", msg);
    assert_non_null(strstr(msg, "node IDs are dense"));
    assert_non_null(strstr(msg, "the largest '_N' ID in the edges, "
                                "1099511627776, implies 1,099,511,627,777 nodes"));
    assert_non_null(strstr(msg, "at most 2 distinct '_N' endpoints"));
    /* 2^40 + 1 nodes x 26 bytes (owner, new ID, CSC offsets, counts) */
    assert_non_null(strstr(msg, "needs at least 26.0 TiB"));
    assert_non_null(strstr(msg, "renumber the IDs"));
    /* range keeps the IDs: no new-ID array, 18 bytes a node */
    assert_int_equal(partition_text(f, "0 1099511627776\n", GKV_GRAPH_GROW,
                                    GKV_PART_RANGE, msg, sizeof msg),
                     GKV_ENOMEM);
    assert_non_null(strstr(msg, "needs at least 18.0 TiB"));
    /* near 2^63: the byte count saturates instead of wrapping */
    assert_int_equal(partition_text(f, "4611686018427387904 3\n",
                                    GKV_GRAPH_GROW, GKV_PART_RANDOM, msg,
                                    sizeof msg), GKV_ENOMEM);
    assert_non_null(strstr(msg, "needs at least 16.0 EiB"));
    assert_non_null(strstr(msg, "4611686018427387904, implies "
                                "4,611,686,018,427,387,905 nodes"));
    /* METIS (gkv-partition's default) refuses 2^31 nodes or more first,
     * for its 32-bit idx_t, and now says why there are so many */
    assert_int_equal(partition_text(f, "0 4000000000\n", GKV_GRAPH_GROW,
                                    GKV_PART_METIS, msg, sizeof msg),
                     GKV_ERANGE);
    assert_non_null(strstr(msg, "graph too large for METIS"));
    assert_non_null(strstr(msg, "node IDs are dense"));
    assert_non_null(strstr(msg, "4000000000, implies 4,000,000,001 nodes"));
    /* a count given, not grown from an ID: asked whether it is right */
    assert_int_equal(partition_text(f, "0 1\n", (int64_t)1 << 42,
                                    GKV_PART_RANGE, msg, sizeof msg),
                     GKV_ENOMEM);
    assert_non_null(strstr(msg, "'_N' is given 4,398,046,511,104 nodes"));
    assert_non_null(strstr(msg, "the largest ID is 1"));
    /* many isolated nodes that fit are partitioned as asked */
    assert_int_equal(partition_text(f, "0 99999\n", GKV_GRAPH_GROW,
                                    GKV_PART_RANDOM, msg, sizeof msg), GKV_OK);
}

static void
test_alloc_failures(void **state)
{
    struct fx *f = *state;
    static const char text[] = "0 1 buys 1\n1 2 has 2\n3 3 user:follows:user 3\n";
    const int64_t pairs[] = {0, 1, 2, 3, 3, 0};
    const float w[] = {1, 2, 3};
    long base = gkvt_alloc_live();
    char tpath[4096], bpath[4096], wpath[4096];
    int64_t *col, *oth;
    gkv_graph *g;
    gkv_csc ref;
    gkv_err rc;
    int fails;

    snprintf(tpath, sizeof tpath, "%s", put_file(f, "a.txt", text,
                                                 strlen(text)));
    snprintf(bpath, sizeof bpath, "%s", put_pairs(f, "a.bin", pairs, 6));
    snprintf(wpath, sizeof wpath, "%s", put_floats(f, "a.f32", w, 3));

    /* readers: each failure leaves the graph as it was */
    for (int which = 0; which < 2; which++) {
        for (int n = 0;; n++) {
            struct snap before;
            g = schema();
            before = take_snap(g);
            gkvt_alloc_fail_at(n);
            rc = which == 0 ? gkv_graph_read_text(g, tpath, GKV_ETYPE_COLUMN,
                                                  GKV_TEXT_WEIGHT)
                            : gkv_graph_read_binary(g, 0, bpath, wpath);
            gkvt_alloc_fail_at(-1);
            if (rc == GKV_OK) {
                assert_int_equal(gkv_graph_num_edges(g, which == 0 ? 1 : 0),
                                 which == 0 ? 1 : 3);
                gkv_graph_free(g);
                break;
            }
            assert_int_equal(rc, GKV_ENOMEM);
            assert_non_null(strstr(gkv_graph_errmsg(g), "memory"));
            expect_snap(g, &before);
            gkv_graph_free(g);
            assert_int_equal(gkvt_alloc_live(), base);
        }
        assert_int_equal(gkvt_alloc_live(), base);
    }

    /* builders: ENOMEM and *out NULL, or the whole thing */
    for (int which = 0; which < 4; which++) {
        for (int n = 0;; n++) {
            gkv_rmat_spec sp = gkvt_rmat_spec(8, 1, 0);
            g = (gkv_graph *)1;
            gkvt_alloc_fail_at(n);
            switch (which) {
            case 0: rc = gkv_graph_fixed_hetero(&g); break;
            case 1: rc = gkv_graph_fixed_homo(&g); break;
            case 2: rc = gkv_rmat_graph(&g, &sp, 2); break;
            default: rc = gkv_graph_new_homo(&g, 5); break;
            }
            gkvt_alloc_fail_at(-1);
            if (rc == GKV_OK) {
                gkv_graph_free(g);
                break;
            }
            assert_int_equal(rc, GKV_ENOMEM);
            assert_null(g);
            assert_int_equal(gkvt_alloc_live(), base);
        }
    }

    /* CSC on the two-pass, threaded path: a failed allocation there falls
     * back to a plainer way, so each try either fails whole or is right */
    col = malloc(300000 * 8);
    oth = malloc(300000 * 8);
    {
        uint64_t x = 12345;
        for (int i = 0; i < 300000; i++) {
            col[i] = (int64_t)(tools__splitmix64(&x) % 20000);
            oth[i] = i;
        }
    }
    fails = 0;
    GKVT_OK(gkv_csc_build(&ref, col, oth, NULL, 300000, 20000, 2));
    gkvt_csc_check(&ref, col, oth, NULL, 300000, 20000);
    for (int n = 0; n < 24; n++) {
        gkv_csc a;
        gkvt_alloc_fail_at(n);
        rc = gkv_csc_build(&a, col, oth, NULL, 300000, 20000, 2);
        gkvt_alloc_fail_at(-1);
        if (rc == GKV_OK) {
            assert_memory_equal(a.indptr, ref.indptr, 20001 * 8);
            assert_memory_equal(a.indices, ref.indices, 300000 * 8);
            assert_memory_equal(a.eids, ref.eids, 300000 * 8);
            gkv_csc_free(&a);
        } else {
            assert_int_equal(rc, GKV_ENOMEM);
            assert_null(a.indptr);
            fails++;
        }
        assert_int_equal(gkvt_alloc_live(), base + 3);
    }
    assert_int_equal(fails, 3);
    gkv_csc_free(&ref);
    assert_int_equal(gkvt_alloc_live(), base);          /* indptr, indices, eids */
    free(col);
    free(oth);
}

/* A weight field longer than 63 bytes (a decimal printed with 70 digits)
 * was refused as "not a finite number"; any field of a line parses. */
static void
test_long_weight(void **state)
{
    static const char text[] =
        "0 1 0.1000000000000000055511151231257827021181583404541015625000000\n"
        "1 2 2.50000000000000000000000000000000000000000000000000000000000000\n";
    gkv_graph *g;
    gkv_coo c;

    (void)state;
    GKVT_OK(gkv_graph_new_homo(&g, 4));
    if (gkv_graph_read_text_mem(g, "w.txt", text, sizeof text - 1, 0,
                                GKV_TEXT_WEIGHT) != GKV_OK)
        fail_msg("%s", gkv_graph_errmsg(g));
    gkv_graph_edges(g, 0, &c);
    assert_int_equal(c.n, 2);
    assert_non_null(c.w);
    assert_true(c.w[0] == 0.1f);
    assert_true(c.w[1] == 2.5f);
    gkv_graph_free(g);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_schema),
        cmocka_unit_test(test_add_edges),
        cmocka_unit_test(test_long_weight),
        cmocka_unit_test_setup_teardown(test_text_every_line_form, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_text_types_and_weights, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_text_bad_input, setup, teardown),
        cmocka_unit_test_setup_teardown(test_text_large_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_binary, setup, teardown),
        cmocka_unit_test_setup_teardown(test_binary_bad_input, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_negative_weights_refused, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_sparse_ids_refused_with_reason,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_alloc_failures, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
