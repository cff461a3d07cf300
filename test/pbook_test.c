/* pbook_test.c - the partition book: a hand-written config of the fixed
 * hetero graph (every accessor against hand-checked values), random
 * configs against brute-force loops over the ranges (owner, local,
 * homogeneous round trips on every ID), bad IDs, every kind of malformed
 * config, allocation failures, and the training-set splits (balance,
 * coverage, locality, determinism, the rank mapping). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "gkvt.h"
#include "graph/gkv_part.h"

#define N_OF(a) (sizeof (a) / sizeof (a)[0])

struct fx {
    char *dir;
    char path[4096];
};

static int
setup(void **state)
{
    return gkvt_file_setup(state, sizeof(struct fx), "pbook", "g.json");
}

static void
put_text(struct fx *f, const char *text)
{
    FILE *fp = fopen(f->path, "w");

    assert_non_null(fp);
    fputs(text, fp);
    assert_int_equal(fclose(fp), 0);
}

static void
put_json(struct fx *f, json_t *j)
{
    assert_int_equal(json_dump_file(j, f->path, JSON_INDENT(1)), 0);
}

/* The fixed hetero graph of gkv_graph.h in 2 partitions by range: users
 * {0,1} {2,3}, items {0,1,2} {3,4}; edges go with their destination:
 * follows 3 + 3, buys 5 + 2, similar 3 + 2. */
static const char hetero_json[] =
    "{\n"
    " \"graph_name\": \"shop\", \"gkv_format\": 1,\n"
    " \"num_nodes\": 9, \"num_edges\": 18, \"part_method\": \"range\",\n"
    " \"num_parts\": 2, \"halo_hops\": 0,\n"
    " \"ntypes\": {\"user\": 0, \"item\": 1},\n"
    " \"etypes\": {\"user:follows:user\": 0, \"user:buys:item\": 1,\n"
    "              \"item:similar:item\": 2},\n"
    " \"node_map\": {\"user\": [[0, 2], [5, 7]], \"item\": [[2, 5], [7, 9]]},\n"
    " \"edge_map\": {\"user:follows:user\": [[0, 3], [11, 14]],\n"
    "              \"user:buys:item\": [[3, 8], [14, 16]],\n"
    "              \"item:similar:item\": [[8, 11], [16, 18]]},\n"
    " \"weighted\": [\"user:buys:item\"], \"csr\": true,\n"
    " \"node_feats\": {\"user\": [\"feat\", \"label\"]},\n"
    " \"edge_feats\": {\"user:buys:item\": [\"feat\"]},\n"
    " \"part-0\": {\"part_graph\": \"part-0\", \"node_feats\": \"part-0\",\n"
    "             \"edge_feats\": \"part-0\"},\n"
    " \"part-1\": {\"part_graph\": \"/abs/part-1\"},\n"
    " \"mapping\": {\"node\": {\"user\": \"mapping/node-user.npy\"},\n"
    "             \"edge\": {\"user:buys:item\":\n"
    "                        \"mapping/edge-user:buys:item.npy\"}}\n"
    "}\n";

static void
test_hetero_accessors(void **state)
{
    struct fx *f = *state;
    gkv_pbook *b;
    gkv_etype_info ei;
    char want[4200];
    int64_t lo, hi;
    int t;

    put_text(f, hetero_json);
    GKVT_OK(gkv_pbook_open(&b, f->path));
    assert_string_equal(gkv_pbook_errmsg(b), "");
    assert_string_equal(gkv_pbook_graph_name(b), "shop");
    assert_string_equal(gkv_pbook_method(b), "range");
    assert_int_equal(gkv_pbook_num_parts(b), 2);
    assert_int_equal(gkv_pbook_has_csr(b), 1);
    assert_int_equal(gkv_pbook_total_nodes(b), 9);
    assert_int_equal(gkv_pbook_total_edges(b), 18);
    snprintf(want, sizeof want, "%s/part-0", f->dir);
    assert_string_equal(gkv_pbook_part_path(b, 0), want);
    assert_string_equal(gkv_pbook_part_path(b, 1), "/abs/part-1");
    assert_null(gkv_pbook_part_path(b, 2));
    assert_null(gkv_pbook_part_path(b, -1));

    assert_int_equal(gkv_pbook_num_ntypes(b), 2);
    assert_int_equal(gkv_pbook_num_etypes(b), 3);
    assert_string_equal(gkv_pbook_ntype_name(b, 1), "item");
    assert_null(gkv_pbook_ntype_name(b, 2));
    assert_string_equal(gkv_pbook_etype_name(b, 2), "item:similar:item");
    assert_null(gkv_pbook_etype_name(b, 3));
    GKVT_OK(gkv_pbook_ntype_find(b, "item", &t));
    assert_int_equal(t, 1);
    assert_int_equal(gkv_pbook_ntype_find(b, "shop", &t), GKV_ENOTFOUND);
    gkvt_expect_msg(gkv_pbook_errmsg(b), "shop");
    GKVT_OK(gkv_pbook_etype_find(b, "user:buys:item", &t));
    assert_int_equal(t, 1);
    GKVT_OK(gkv_pbook_etype_find(b, "similar", &t));
    assert_int_equal(t, 2);
    assert_int_equal(gkv_pbook_etype_find(b, "likes", &t), GKV_ENOTFOUND);
    assert_int_equal(gkv_pbook_etype_find(b, "user:buys:user", &t),
                     GKV_ENOTFOUND);
    GKVT_OK(gkv_pbook_etype_info(b, 1, &ei));
    gkvt_expect_etype_info(&ei, &(gkv_etype_info){"user:buys:item", "buys",
                           "user", "item", 0, 1, 7, 1});
    GKVT_OK(gkv_pbook_etype_info(b, 0, &ei));
    assert_int_equal(ei.weighted, 0);
    assert_int_equal(ei.num_edges, 6);
    assert_int_equal(gkv_pbook_etype_info(b, 3, &ei), GKV_EINVAL);

    assert_int_equal(gkv_pbook_num_nodes(b, 0), 4);
    assert_int_equal(gkv_pbook_num_nodes(b, 1), 5);
    assert_int_equal(gkv_pbook_num_nodes(b, 2), -1);
    assert_int_equal(gkv_pbook_num_edges(b, 2), 5);
    assert_int_equal(gkv_pbook_num_edges(b, -1), -1);

    GKVT_OK(gkv_pbook_node_range(b, 1, 1, &lo, &hi));
    assert_int_equal(lo, 3);
    assert_int_equal(hi, 5);
    GKVT_OK(gkv_pbook_node_homo_range(b, 1, 1, &lo, &hi));
    assert_int_equal(lo, 7);
    assert_int_equal(hi, 9);
    GKVT_OK(gkv_pbook_edge_range(b, 1, 0, &lo, &hi));
    assert_int_equal(lo, 0);
    assert_int_equal(hi, 5);
    GKVT_OK(gkv_pbook_edge_range(b, 1, 1, &lo, &hi));
    assert_int_equal(lo, 5);
    assert_int_equal(hi, 7);
    GKVT_OK(gkv_pbook_edge_homo_range(b, 1, 1, &lo, &hi));
    assert_int_equal(lo, 14);
    assert_int_equal(hi, 16);
    assert_int_equal(gkv_pbook_node_range(b, 0, 2, &lo, &hi), GKV_EINVAL);
    gkvt_expect_msg(gkv_pbook_errmsg(b), "no partition 2");
    assert_int_equal(gkv_pbook_edge_range(b, 5, 0, &lo, &hi), GKV_EINVAL);

    assert_int_equal(gkv_pbook_num_node_feats(b, 0), 2);
    assert_string_equal(gkv_pbook_node_feat(b, 0, 1), "label");
    assert_null(gkv_pbook_node_feat(b, 0, 2));
    assert_int_equal(gkv_pbook_num_node_feats(b, 1), 0);
    assert_int_equal(gkv_pbook_num_edge_feats(b, 1), 1);
    assert_string_equal(gkv_pbook_edge_feat(b, 1, 0), "feat");
    snprintf(want, sizeof want, "%s/mapping/node-user.npy", f->dir);
    assert_string_equal(gkv_pbook_node_mapping(b, 0), want);
    assert_null(gkv_pbook_node_mapping(b, 1));
    snprintf(want, sizeof want, "%s/mapping/edge-user:buys:item.npy", f->dir);
    assert_string_equal(gkv_pbook_edge_mapping(b, 1), want);

    /* homogeneous IDs of the hand layout */
    {
        const int64_t items[5] = {0, 1, 2, 3, 4};
        const int64_t want_h[5] = {2, 3, 4, 7, 8};
        const int64_t homo[9] = {0, 1, 2, 3, 4, 5, 6, 7, 8};
        const int32_t want_t[9] = {0, 0, 1, 1, 1, 0, 0, 1, 1};
        const int64_t want_id[9] = {0, 1, 0, 1, 2, 2, 3, 3, 4};
        const int32_t want_p[9] = {0, 0, 0, 0, 0, 1, 1, 1, 1};
        int64_t h[9], id[9];
        int32_t ty[9], pa[9];

        GKVT_OK(gkv_pbook_node_to_homo(b, 1, items, 5, h));
        for (int i = 0; i < 5; i++)
            assert_int_equal(h[i], want_h[i]);
        GKVT_OK(gkv_pbook_node_from_homo(b, homo, 9, ty, id, pa));
        for (int i = 0; i < 9; i++) {
            assert_int_equal(ty[i], want_t[i]);
            assert_int_equal(id[i], want_id[i]);
            assert_int_equal(pa[i], want_p[i]);
        }
        /* edges: buys edge 5 is partition 1's first, homo 14 */
        GKVT_OK(gkv_pbook_edge_to_homo(b, 1, &items[4], 1, h));
        assert_int_equal(h[0], 3 + 4);
        {
            int64_t e5 = 5, he;
            GKVT_OK(gkv_pbook_edge_to_homo(b, 1, &e5, 1, &he));
            assert_int_equal(he, 14);
            GKVT_OK(gkv_pbook_edge_from_homo(b, &he, 1, ty, id, NULL));
            assert_int_equal(ty[0], 1);
            assert_int_equal(id[0], 5);
        }
    }
    gkv_pbook_close(b);
    gkv_pbook_close(NULL);
}

/* ---- random configs against brute force --------------------------------- */

struct cfg {
    int P, nnt, net;
    int64_t ncnt[6][7];     /* per node type, per partition */
    int64_t ecnt[6][7];
    int esrc[6], edst[6];
    int relmod;             /* relation of etype t: r(t % relmod), or rt */
};

static json_t *
pairs(const struct cfg *c, int edge, int t)
{
    json_t *a = json_array();
    for (int p = 0; p < c->P; p++) {
        int64_t s = 0;
        /* homogeneous start: everything before (p, t) in (part, type) order */
        for (int q = 0; q <= p; q++)
            for (int u = 0; u < (edge ? c->net : c->nnt); u++) {
                if (q == p && u == t)
                    break;
                s += edge ? c->ecnt[u][q] : c->ncnt[u][q];
            }
        json_array_append_new(a, json_pack("[I, I]", (json_int_t)s,
            (json_int_t)(s + (edge ? c->ecnt[t][p] : c->ncnt[t][p]))));
    }
    return a;
}

static void
ntname(char *buf, int t)
{
    snprintf(buf, 16, "n%d", t);
}

static void
etname(const struct cfg *c, char *buf, int t)
{
    snprintf(buf, 48, "n%d:r%d:n%d", c->esrc[t],
             c->relmod ? t % c->relmod : t, c->edst[t]);
}

static json_t *
cfg_json(const struct cfg *c)
{
    json_t *j = json_object(), *nt = json_object(), *et = json_object();
    json_t *nm = json_object(), *em = json_object();
    int64_t nn = 0, ne = 0;
    char name[64];

    for (int t = 0; t < c->nnt; t++) {
        ntname(name, t);
        json_object_set_new(nt, name, json_integer(t));
        json_object_set_new(nm, name, pairs(c, 0, t));
        for (int p = 0; p < c->P; p++)
            nn += c->ncnt[t][p];
    }
    for (int t = 0; t < c->net; t++) {
        etname(c, name, t);
        json_object_set_new(et, name, json_integer(t));
        json_object_set_new(em, name, pairs(c, 1, t));
        for (int p = 0; p < c->P; p++)
            ne += c->ecnt[t][p];
    }
    json_object_set_new(j, "graph_name", json_string("g"));
    json_object_set_new(j, "gkv_format", json_integer(1));
    json_object_set_new(j, "num_nodes", json_integer(nn));
    json_object_set_new(j, "num_edges", json_integer(ne));
    json_object_set_new(j, "part_method", json_string("random"));
    json_object_set_new(j, "num_parts", json_integer(c->P));
    json_object_set_new(j, "halo_hops", json_integer(0));
    json_object_set_new(j, "ntypes", nt);
    json_object_set_new(j, "etypes", et);
    json_object_set_new(j, "node_map", nm);
    json_object_set_new(j, "edge_map", em);
    json_object_set_new(j, "weighted", json_array());
    json_object_set_new(j, "csr", json_false());
    json_object_set_new(j, "node_feats", json_object());
    json_object_set_new(j, "edge_feats", json_object());
    for (int p = 0; p < c->P; p++) {
        char key[32], path[32];
        snprintf(key, sizeof key, "part-%d", p);
        snprintf(path, sizeof path, "part-%d", p);
        json_object_set_new(j, key, json_pack("{s:s}", "part_graph", path));
    }
    return j;
}

static void
random_cfg(struct cfg *c, uint64_t *rng)
{
    memset(c, 0, sizeof *c);
    c->P = 1 + (int)(tools__splitmix64(rng) % 7);
    c->nnt = 1 + (int)(tools__splitmix64(rng) % 6);
    c->net = (int)(tools__splitmix64(rng) % 7);
    for (int t = 0; t < c->nnt; t++)
        for (int p = 0; p < c->P; p++)   /* about a third empty */
            c->ncnt[t][p] = tools__splitmix64(rng) % 3 == 0 ? 0
                            : (int64_t)(tools__splitmix64(rng) % 40);
    for (int t = 0; t < c->net; t++) {
        c->esrc[t] = (int)(tools__splitmix64(rng) % (uint64_t)c->nnt);
        c->edst[t] = (int)(tools__splitmix64(rng) % (uint64_t)c->nnt);
        for (int p = 0; p < c->P; p++)
            c->ecnt[t][p] = tools__splitmix64(rng) % 3 == 0 ? 0
                            : (int64_t)(tools__splitmix64(rng) % 50);
    }
}

/* Checks one space (nodes or edges) of book b against the config. */
static void
check_space(const gkv_pbook *b, const struct cfg *c, int edge)
{
    int nt = edge ? c->net : c->nnt;
    int64_t total = 0, seen_total = 0;
    int64_t (*cnt)[7] = edge ? (int64_t (*)[7])c->ecnt
                             : (int64_t (*)[7])c->ncnt;
    unsigned char *seen;

    for (int t = 0; t < nt; t++)
        for (int p = 0; p < c->P; p++)
            total += cnt[t][p];
    assert_int_equal(edge ? gkv_pbook_total_edges(b)
                          : gkv_pbook_total_nodes(b), total);
    seen = calloc((size_t)total + 1, 1);
    for (int t = 0; t < nt; t++) {
        int64_t count = 0, tlo = 0;
        for (int p = 0; p < c->P; p++)
            count += cnt[t][p];
        assert_int_equal(edge ? gkv_pbook_num_edges(b, t)
                              : gkv_pbook_num_nodes(b, t), count);
        for (int p = 0; p < c->P; p++) {
            int64_t lo, hi, hlo, hhi, n = cnt[t][p];
            int64_t *ids = malloc(((size_t)n + 1) * 8);
            int64_t *loc = malloc(((size_t)n + 1) * 8);
            int64_t *back = malloc(((size_t)n + 1) * 8);
            int64_t *homo = malloc(((size_t)n + 1) * 8);
            int32_t *own = malloc(((size_t)n + 1) * 4);
            int32_t *ty = malloc(((size_t)n + 1) * 4);
            int32_t *pa = malloc(((size_t)n + 1) * 4);
            int64_t *id2 = malloc(((size_t)n + 1) * 8);

            GKVT_OK((edge ? gkv_pbook_edge_range : gkv_pbook_node_range)(
                b, t, p, &lo, &hi));
            assert_int_equal(lo, tlo);
            assert_int_equal(hi, tlo + n);
            GKVT_OK((edge ? gkv_pbook_edge_homo_range
                          : gkv_pbook_node_homo_range)(b, t, p, &hlo, &hhi));
            assert_int_equal(hhi - hlo, n);
            for (int64_t i = 0; i < n; i++)
                ids[i] = lo + i;
            GKVT_OK((edge ? gkv_pbook_edge_owner : gkv_pbook_node_owner)(
                b, t, ids, (size_t)n, own));
            GKVT_OK((edge ? gkv_pbook_edge_to_local
                          : gkv_pbook_node_to_local)(b, t, p, ids, (size_t)n,
                                                     loc));
            GKVT_OK((edge ? gkv_pbook_edge_from_local
                          : gkv_pbook_node_from_local)(b, t, p, loc,
                                                       (size_t)n, back));
            GKVT_OK((edge ? gkv_pbook_edge_to_homo : gkv_pbook_node_to_homo)(
                b, t, ids, (size_t)n, homo));
            GKVT_OK((edge ? gkv_pbook_edge_from_homo
                          : gkv_pbook_node_from_homo)(b, homo, (size_t)n, ty,
                                                      id2, pa));
            for (int64_t i = 0; i < n; i++) {
                assert_int_equal(own[i], p);
                assert_int_equal(loc[i], i);
                assert_int_equal(back[i], ids[i]);
                assert_int_equal(homo[i], hlo + i);
                assert_int_equal(ty[i], t);
                assert_int_equal(id2[i], ids[i]);
                assert_int_equal(pa[i], p);
                assert_true(homo[i] >= 0 && homo[i] < total);
                assert_int_equal(seen[homo[i]], 0);
                seen[homo[i]] = 1;
                seen_total++;
            }
            /* the first ID past the range is not p's */
            if (hi < count) {
                int64_t x = hi, l;
                assert_int_equal((edge ? gkv_pbook_edge_to_local
                                       : gkv_pbook_node_to_local)(b, t, p, &x,
                                                                  1, &l),
                                 GKV_ERANGE);
                gkvt_expect_msg(gkv_pbook_errmsg(b), "not ");
            }
            tlo += n;
            free(ids); free(loc); free(back); free(homo);
            free(own); free(ty); free(pa); free(id2);
        }
    }
    assert_int_equal(seen_total, total);    /* a bijection onto [0, total) */
    free(seen);
}

static void
test_random_configs(void **state)
{
    struct fx *f = *state;
    uint64_t rng = gkvt_seed();

    for (int round = 0; round < 60; round++) {
        struct cfg c;
        json_t *j;
        gkv_pbook *b;

        random_cfg(&c, &rng);
        j = cfg_json(&c);
        put_json(f, j);
        json_decref(j);
        if (gkv_pbook_open(&b, f->path) != GKV_OK)
            fail_msg("round %d: %s", round, gkv_pbook_errmsg(NULL));
        assert_int_equal(gkv_pbook_num_parts(b), c.P);
        assert_int_equal(gkv_pbook_num_ntypes(b), c.nnt);
        assert_int_equal(gkv_pbook_num_etypes(b), c.net);
        check_space(b, &c, 0);
        check_space(b, &c, 1);
        gkv_pbook_close(b);
    }
}

/* A homogeneous graph: homogeneous ID == type-wise ID. */
static void
test_homogeneous_ids(void **state)
{
    struct fx *f = *state;
    struct cfg c = {.P = 3, .nnt = 1, .net = 1};
    int64_t ids[100], h[100];
    int32_t ty[100], pa[100];
    gkv_pbook *b;
    json_t *j;

    c.ncnt[0][0] = 30; c.ncnt[0][1] = 0; c.ncnt[0][2] = 70;
    c.ecnt[0][0] = 5; c.ecnt[0][1] = 0; c.ecnt[0][2] = 7;
    j = cfg_json(&c);
    put_json(f, j);
    json_decref(j);
    GKVT_OK(gkv_pbook_open(&b, f->path));
    for (int i = 0; i < 100; i++)
        ids[i] = i;
    GKVT_OK(gkv_pbook_node_to_homo(b, 0, ids, 100, h));
    GKVT_OK(gkv_pbook_node_from_homo(b, ids, 100, ty, NULL, pa));
    for (int i = 0; i < 100; i++) {
        assert_int_equal(h[i], i);
        assert_int_equal(ty[i], 0);
        assert_int_equal(pa[i], i < 30 ? 0 : 2);   /* empty part 1 skipped */
    }
    /* in place: output == input */
    GKVT_OK(gkv_pbook_node_to_local(b, 0, 2, &ids[30], 70, &ids[30]));
    for (int i = 30; i < 100; i++)
        assert_int_equal(ids[i], i - 30);
    gkv_pbook_close(b);
}

/* ---- bad IDs and arguments ------------------------------------------------ */

static void
test_bad_ids(void **state)
{
    struct fx *f = *state;
    const int64_t ids[4] = {0, 3, 4, 1};
    const int64_t neg[2] = {1, -1};
    int64_t out[4];
    int32_t part[4];
    gkv_pbook *b;

    put_text(f, hetero_json);
    GKVT_OK(gkv_pbook_open(&b, f->path));
    assert_int_equal(gkv_pbook_node_owner(b, 0, ids, 4, part), GKV_ERANGE);
    gkvt_expect_msg(gkv_pbook_errmsg(b), "ids[2] = 4");
    gkvt_expect_msg(gkv_pbook_errmsg(b), "'user'");
    assert_int_equal(gkv_pbook_node_to_homo(b, 0, neg, 2, out), GKV_ERANGE);
    gkvt_expect_msg(gkv_pbook_errmsg(b), "ids[1] = -1");
    assert_int_equal(gkv_pbook_edge_owner(b, 1, neg, 2, part), GKV_ERANGE);
    gkvt_expect_msg(gkv_pbook_errmsg(b), "ids[1] = -1");
    /* user 3 is partition 1's */
    assert_int_equal(gkv_pbook_node_to_local(b, 0, 0, ids, 2, out),
                     GKV_ERANGE);
    gkvt_expect_msg(gkv_pbook_errmsg(b), "ids[1] = 3");
    gkvt_expect_msg(gkv_pbook_errmsg(b), "owned by partition 1, not 0");
    /* an edge past partition 0's buys */
    {
        const int64_t e[2] = {4, 5};
        assert_int_equal(gkv_pbook_edge_to_local(b, 1, 0, e, 2, out),
                         GKV_ERANGE);
        gkvt_expect_msg(gkv_pbook_errmsg(b), "ids[1] = 5");
        gkvt_expect_msg(gkv_pbook_errmsg(b), "partition 1");
    }
    {
        const int64_t l[3] = {0, 1, 2};   /* partition 1 has 2 users */
        assert_int_equal(gkv_pbook_node_from_local(b, 0, 1, l, 3, out),
                         GKV_ERANGE);
        gkvt_expect_msg(gkv_pbook_errmsg(b), "local[2] = 2");
    }
    {
        const int64_t h[2] = {8, 9};
        assert_int_equal(gkv_pbook_node_from_homo(b, h, 2, NULL, out, NULL),
                         GKV_ERANGE);
        gkvt_expect_msg(gkv_pbook_errmsg(b), "homo[1] = 9");
        assert_int_equal(gkv_pbook_edge_from_homo(b, h, 2, NULL, NULL, part),
                         GKV_OK);
    }
    assert_int_equal(gkv_pbook_node_owner(b, 2, ids, 1, part), GKV_EINVAL);
    gkvt_expect_msg(gkv_pbook_errmsg(b), "no node type 2");
    assert_int_equal(gkv_pbook_edge_to_homo(b, -1, ids, 1, out), GKV_EINVAL);
    assert_int_equal(gkv_pbook_node_to_local(b, 0, 2, ids, 1, out),
                     GKV_EINVAL);
    assert_int_equal(gkv_pbook_node_from_local(b, 0, -1, ids, 1, out),
                     GKV_EINVAL);
    assert_int_equal(gkv_pbook_node_owner(b, 0, NULL, 1, part), GKV_EINVAL);
    GKVT_OK(gkv_pbook_node_owner(b, 0, NULL, 0, NULL));   /* n = 0 */
    /* a good call clears the message */
    GKVT_OK(gkv_pbook_node_owner(b, 0, ids, 2, part));
    assert_string_equal(gkv_pbook_errmsg(b), "");
    assert_int_equal(part[1], 1);
    gkv_pbook_close(b);
}

static void
test_ambiguous_relation(void **state)
{
    struct fx *f = *state;
    struct cfg c = {.P = 2, .nnt = 2, .net = 4, .relmod = 3};
    gkv_pbook *b;
    json_t *j;
    int t;

    for (int i = 0; i < 4; i++) {     /* relations r0 r1 r2 r0 */
        c.esrc[i] = i % 2;
        c.edst[i] = i / 2;
    }
    j = cfg_json(&c);
    put_json(f, j);
    json_decref(j);
    GKVT_OK(gkv_pbook_open(&b, f->path));
    assert_int_equal(gkv_pbook_etype_find(b, "r0", &t), GKV_EINVAL);
    gkvt_expect_msg(gkv_pbook_errmsg(b), "n0:r0:n0");
    gkvt_expect_msg(gkv_pbook_errmsg(b), "n1:r0:n1");
    GKVT_OK(gkv_pbook_etype_find(b, "r1", &t));
    assert_int_equal(t, 1);
    GKVT_OK(gkv_pbook_etype_find(b, "n1:r0:n1", &t));
    assert_int_equal(t, 3);
    assert_int_equal(gkv_pbook_etype_find(b, "r9", &t), GKV_ENOTFOUND);
    /* a graph without edges is fine */
    gkv_pbook_close(b);
}

/* ---- malformed configs ------------------------------------------------------ */

static json_t *
path_get(json_t *j, const char *a, const char *b2)
{
    json_t *x = json_object_get(j, a);
    return b2 != NULL ? json_object_get(x, b2) : x;
}

struct bad_case {
    const char *what;
    gkv_err rc;
    const char *msg;      /* the message must hold this */
};

static const struct bad_case bad_cases[] = {
    {"graph_name missing", GKV_EFORMAT, "'graph_name': missing"},
    {"graph_name an integer", GKV_EFORMAT, "'graph_name': expected a string"},
    {"gkv_format missing", GKV_EFORMAT, "'gkv_format': missing"},
    {"gkv_format 2", GKV_EVERSION, "'gkv_format': 2 is newer"},
    {"gkv_format a string", GKV_EFORMAT, "'gkv_format': expected an integer"},
    {"gkv_format 0", GKV_EFORMAT, "'gkv_format'"},
    {"num_parts 0", GKV_EFORMAT, "'num_parts': 0 is outside"},
    {"num_parts a real", GKV_EFORMAT, "'num_parts': expected an integer, got a real"},
    {"num_nodes wrong", GKV_EFORMAT, "'num_nodes': 10, but \"node_map\" covers 9"},
    {"num_edges missing", GKV_EFORMAT, "'num_edges': missing"},
    {"part_method null", GKV_EFORMAT, "'part_method': expected a string, got null"},
    {"ntypes an array", GKV_EFORMAT, "'ntypes': expected an object"},
    {"ntypes index twice", GKV_EFORMAT, "'ntypes.item': type index 0"},
    {"ntypes index too big", GKV_EFORMAT, "'ntypes.item': type index 2 is outside"},
    {"ntypes bad name", GKV_EFORMAT, "'ntypes.a b'"},
    {"etypes not canonical", GKV_EFORMAT, "'etypes.user-buys-item': not a canonical"},
    {"etypes unknown node type", GKV_EFORMAT, "'etypes.user:buys:shop': node type 'shop'"},
    {"node_map missing a type", GKV_EFORMAT, "'node_map.item': missing"},
    {"node_map unknown type", GKV_EFORMAT, "'node_map.shop': no such node type"},
    {"node_map wrong length", GKV_EFORMAT, "'node_map.user': expected an array of 2"},
    {"node_map pair not ints", GKV_EFORMAT, "'node_map.user[1]': expected an array of 2 integers"},
    {"node_map gap", GKV_EFORMAT, "'node_map.user[1]': starts at 6, expected 5"},
    {"node_map overlap", GKV_EFORMAT, "'node_map.item[0]': starts at 1, expected 2"},
    {"node_map end below start", GKV_EFORMAT, "'node_map.item[1]': end 6 is below start 7"},
    {"edge_map order", GKV_EFORMAT, "'edge_map.user:follows:user[1]': starts at 14"},
    {"edge_map missing", GKV_EFORMAT, "'edge_map': missing"},
    {"part-1 missing", GKV_EFORMAT, "'part-1': missing"},
    {"part_graph missing", GKV_EFORMAT, "'part-0.part_graph': missing"},
    {"part_graph an integer", GKV_EFORMAT, "'part-0.part_graph': expected a path"},
    {"part node_feats elsewhere", GKV_EFORMAT, "'part-0.node_feats'"},
    {"weighted not an array", GKV_EFORMAT, "'weighted': expected an array"},
    {"weighted unknown etype", GKV_EFORMAT, "'weighted[0]': 'user:sells:item'"},
    {"csr missing", GKV_EFORMAT, "'csr': missing"},
    {"csr a string", GKV_EFORMAT, "'csr': expected a boolean"},
    {"node_feats unknown type", GKV_EFORMAT, "'node_feats.shop'"},
    {"edge_feats not names", GKV_EFORMAT, "'edge_feats.user:buys:item[0]'"},
    {"halo_hops 1", GKV_EFORMAT, "'halo_hops': 1"},
    {"mapping node not an object", GKV_EFORMAT, "'mapping.node'"},
};

static void
mutate(json_t *j, int i)
{
    json_t *x;

    switch (i) {
    case 0: json_object_del(j, "graph_name"); break;
    case 1: json_object_set_new(j, "graph_name", json_integer(3)); break;
    case 2: json_object_del(j, "gkv_format"); break;
    case 3: json_object_set_new(j, "gkv_format", json_integer(2)); break;
    case 4: json_object_set_new(j, "gkv_format", json_string("1")); break;
    case 5: json_object_set_new(j, "gkv_format", json_integer(0)); break;
    case 6: json_object_set_new(j, "num_parts", json_integer(0)); break;
    case 7: json_object_set_new(j, "num_parts", json_real(2.0)); break;
    case 8: json_object_set_new(j, "num_nodes", json_integer(10)); break;
    case 9: json_object_del(j, "num_edges"); break;
    case 10: json_object_set_new(j, "part_method", json_null()); break;
    case 11: json_object_set_new(j, "ntypes", json_array()); break;
    case 12: json_object_set_new(path_get(j, "ntypes", NULL), "item",
                                 json_integer(0)); break;
    case 13: json_object_set_new(path_get(j, "ntypes", NULL), "item",
                                 json_integer(2)); break;
    case 14:
        json_object_del(path_get(j, "ntypes", NULL), "item");
        json_object_set_new(path_get(j, "ntypes", NULL), "a b",
                            json_integer(1));
        break;
    case 15:
        x = path_get(j, "etypes", NULL);
        json_object_del(x, "user:buys:item");
        json_object_set_new(x, "user-buys-item", json_integer(1));
        break;
    case 16:
        x = path_get(j, "etypes", NULL);
        json_object_del(x, "user:buys:item");
        json_object_set_new(x, "user:buys:shop", json_integer(1));
        break;
    case 17: json_object_del(path_get(j, "node_map", NULL), "item"); break;
    case 18: json_object_set_new(path_get(j, "node_map", NULL), "shop",
                                 json_array()); break;
    case 19: json_array_remove(path_get(j, "node_map", "user"), 1); break;
    case 20: json_array_set_new(path_get(j, "node_map", "user"), 1,
                                json_pack("[I, s]", (json_int_t)5, "7"));
        break;
    case 21: json_array_set_new(path_get(j, "node_map", "user"), 1,
                                json_pack("[I, I]", (json_int_t)6,
                                          (json_int_t)7));
        break;
    case 22: json_array_set_new(path_get(j, "node_map", "item"), 0,
                                json_pack("[I, I]", (json_int_t)1,
                                          (json_int_t)5));
        break;
    case 23: json_array_set_new(path_get(j, "node_map", "item"), 1,
                                json_pack("[I, I]", (json_int_t)7,
                                          (json_int_t)6));
        break;
    case 24:     /* follows of part 1 swapped with similar's */
        json_array_set_new(path_get(j, "edge_map", "user:follows:user"), 1,
                           json_pack("[I, I]", (json_int_t)14,
                                     (json_int_t)17));
        break;
    case 25: json_object_del(j, "edge_map"); break;
    case 26: json_object_del(j, "part-1"); break;
    case 27: json_object_del(path_get(j, "part-0", NULL), "part_graph"); break;
    case 28: json_object_set_new(path_get(j, "part-0", NULL), "part_graph",
                                 json_integer(0)); break;
    case 29: json_object_set_new(path_get(j, "part-0", NULL), "node_feats",
                                 json_string("feats-0")); break;
    case 30: json_object_set_new(j, "weighted", json_string("x")); break;
    case 31: json_array_set_new(path_get(j, "weighted", NULL), 0,
                                json_string("user:sells:item")); break;
    case 32: json_object_del(j, "csr"); break;
    case 33: json_object_set_new(j, "csr", json_string("yes")); break;
    case 34: json_object_set_new(path_get(j, "node_feats", NULL), "shop",
                                 json_array()); break;
    case 35: json_object_set_new(path_get(j, "edge_feats", NULL),
                                 "user:buys:item", json_pack("[i]", 1));
        break;
    case 36: json_object_set_new(j, "halo_hops", json_integer(1)); break;
    case 37: json_object_set_new(path_get(j, "mapping", NULL), "node",
                                 json_integer(1)); break;
    default: fail_msg("no mutation %d", i);
    }
}

static void
test_malformed_configs(void **state)
{
    struct fx *f = *state;
    json_error_t e;
    json_t *good = json_loads(hetero_json, 0, &e);
    gkv_pbook *b;

    assert_non_null(good);
    put_json(f, good);
    GKVT_OK(gkv_pbook_open(&b, f->path));     /* the base is good */
    gkv_pbook_close(b);
    for (size_t i = 0; i < N_OF(bad_cases); i++) {
        json_t *j = json_deep_copy(good);
        gkv_err rc;

        mutate(j, (int)i);
        put_json(f, j);
        json_decref(j);
        b = (gkv_pbook *)&b;
        rc = gkv_pbook_open(&b, f->path);
        if (rc != bad_cases[i].rc)
            fail_msg("%s: got %s (%s), want %s", bad_cases[i].what,
                     gkv_err_name(rc), gkv_pbook_errmsg(NULL),
                     gkv_err_name(bad_cases[i].rc));
        assert_null(b);
        gkvt_expect_msg(gkv_pbook_errmsg(NULL), bad_cases[i].msg);
        gkvt_expect_msg(gkv_pbook_errmsg(NULL), f->path);
    }
    json_decref(good);
}

static void
test_not_json(void **state)
{
    struct fx *f = *state;
    static const char *const texts[] = {
        "", "hello", "{\"graph_name\": \"g\",", "[1, 2]", "42",
        "{\"graph_name\": \"a\", \"graph_name\": \"b\"}",    /* duplicate */
    };
    char dir_json[4200];
    gkv_pbook *b;

    for (size_t i = 0; i < N_OF(texts); i++) {
        put_text(f, texts[i]);
        assert_int_equal(gkv_pbook_open(&b, f->path), GKV_EFORMAT);
        assert_null(b);
        gkvt_expect_msg(gkv_pbook_errmsg(NULL), f->path);
    }
    put_text(f, "hello");
    assert_int_equal(gkv_pbook_open(&b, f->path), GKV_EFORMAT);
    gkvt_expect_msg(gkv_pbook_errmsg(NULL), "not a valid JSON");
    put_text(f, "[1, 2]");
    assert_int_equal(gkv_pbook_open(&b, f->path), GKV_EFORMAT);
    gkvt_expect_msg(gkv_pbook_errmsg(NULL), "expected a JSON object");
    snprintf(dir_json, sizeof dir_json, "%s/none.json", f->dir);
    assert_int_equal(gkv_pbook_open(&b, dir_json), GKV_ENOENT);
    gkvt_expect_msg(gkv_pbook_errmsg(NULL), "none.json");
    assert_int_equal(gkv_pbook_open(&b, f->dir), GKV_EINVAL);
    assert_int_equal(gkv_pbook_open(NULL, f->path), GKV_EINVAL);
}

/* From bytes: the same book as from the file, messages name the given
 * name, bad bytes are refused like a bad file. */
static void
test_open_mem(void **state)
{
    struct fx *f = *state;
    gkv_pbook *a, *b;
    static const char *const bad[] = {"", "hello", "[1, 2]",
        "{\"graph_name\": \"a\", \"graph_name\": \"b\"}"};

    (void)f;
    GKVT_OK(gkv_pbook_open_mem(&b, hetero_json, strlen(hetero_json),
                               "/cfg/shop.json"));
    put_text(f, hetero_json);
    GKVT_OK(gkv_pbook_open(&a, f->path));
    assert_string_equal(gkv_pbook_graph_name(b), gkv_pbook_graph_name(a));
    assert_int_equal(gkv_pbook_num_parts(b), gkv_pbook_num_parts(a));
    assert_int_equal(gkv_pbook_total_nodes(b), gkv_pbook_total_nodes(a));
    assert_int_equal(gkv_pbook_total_edges(b), gkv_pbook_total_edges(a));
    for (int t = 0; t < gkv_pbook_num_ntypes(a); t++)
        for (int p = 0; p < 2; p++) {
            int64_t l1, h1, l2, h2;
            GKVT_OK(gkv_pbook_node_range(a, t, p, &l1, &h1));
            GKVT_OK(gkv_pbook_node_range(b, t, p, &l2, &h2));
            assert_int_equal(l1, l2);
            assert_int_equal(h1, h2);
        }
    /* relative paths resolve against the name's directory */
    assert_string_equal(gkv_pbook_part_path(b, 0), "/cfg/part-0");
    gkv_pbook_close(a);
    gkv_pbook_close(b);
    for (size_t i = 0; i < N_OF(bad); i++) {
        assert_int_equal(gkv_pbook_open_mem(&b, bad[i], strlen(bad[i]),
                                            "the servers' config"),
                         GKV_EFORMAT);
        assert_null(b);
        gkvt_expect_msg(gkv_pbook_errmsg(NULL), "the servers' config");
    }
    assert_int_equal(gkv_pbook_open_mem(&b, NULL, 3, "x"), GKV_EINVAL);
    assert_int_equal(gkv_pbook_open_mem(&b, "{}", 2, NULL), GKV_EINVAL);
    assert_int_equal(gkv_pbook_open_mem(NULL, "{}", 2, "x"), GKV_EINVAL);
}

static void
test_alloc_failures(void **state)
{
    struct fx *f = *state;
    gkv_pbook *b = NULL;
    int64_t *out;
    size_t offs[4];
    long book_live;
    gkv_err rc;
    int n;

    put_text(f, hetero_json);
    for (n = 0;; n++) {
        gkvt_alloc_fail_at(n);
        rc = gkv_pbook_open(&b, f->path);
        gkvt_alloc_fail_at(-1);
        if (rc == GKV_OK)
            break;
        assert_int_equal(rc, GKV_ENOMEM);
        assert_null(b);
        assert_int_equal(gkvt_alloc_live(), 0);
    }
    assert_true(n > 10);
    book_live = gkvt_alloc_live();
    for (n = 0;; n++) {
        uint8_t mask[4] = {1, 1, 0, 1};
        gkvt_alloc_fail_at(n);
        rc = gkv_pbook_node_split_all(b, 0, mask, NULL, 4, 3, &out, offs);
        gkvt_alloc_fail_at(-1);
        if (rc == GKV_OK)
            break;
        assert_int_equal(rc, GKV_ENOMEM);
        assert_int_equal(gkvt_alloc_live(), book_live);
    }
    gkv_free(out);
    gkv_pbook_close(b);
    assert_int_equal(gkvt_alloc_live(), 0);
}

/* ---- splits -------------------------------------------------------------------- */

/* Checks a split of selected IDs S (sorted, unique, m of them) among T
 * trainers: balance, coverage, order, locality, and that each per-rank
 * call gives the same as the all-ranks one. */
static void
check_split(const gkv_pbook *b, int edge, int t, const uint8_t *mask,
            const int64_t *ids, size_t n, int T, const int64_t *S, size_t m)
{
    int P = gkv_pbook_num_parts(b);
    int64_t *all, *one;
    size_t *offs = malloc(((size_t)T + 1) * sizeof *offs), none;
    int64_t *cnt = calloc((size_t)P, 8), *share = calloc((size_t)P, 8);
    int64_t *local = calloc((size_t)P, 8), floor_share = (int64_t)m / T;
    int64_t count = edge ? gkv_pbook_num_edges(b, t)
                         : gkv_pbook_num_nodes(b, t);
    unsigned char *hit = calloc((size_t)count + 1, 1);
    int32_t own;

    GKVT_OK((edge ? gkv_pbook_edge_split_all : gkv_pbook_node_split_all)(
        b, t, mask, ids, n, T, &all, offs));
    assert_int_equal(offs[0], 0);
    assert_int_equal(offs[T], m);
    for (size_t i = 0; i < m; i++) {
        (edge ? gkv_pbook_edge_owner : gkv_pbook_node_owner)(b, t, &S[i], 1,
                                                            &own);
        cnt[own]++;
    }
    for (int r = 0; r < T; r++) {
        size_t q = offs[r + 1] - offs[r];
        int pr = gkv_pbook_trainer_part(b, T, r);

        assert_true(q == (size_t)floor_share ||
                    q == (size_t)floor_share + 1);
        share[pr] += (int64_t)q;
        for (size_t i = offs[r]; i < offs[r + 1]; i++) {
            int64_t v = all[i];
            assert_true(v >= 0 && v < count);
            assert_int_equal(hit[v], 0);      /* no ID twice */
            hit[v] = 1;
            if (i > offs[r])
                assert_true(all[i - 1] < v);   /* increasing */
            (edge ? gkv_pbook_edge_owner : gkv_pbook_node_owner)(b, t, &v, 1,
                                                                &own);
            if (own == pr)
                local[pr]++;
        }
        GKVT_OK((edge ? gkv_pbook_edge_split : gkv_pbook_node_split)(
            b, t, mask, ids, n, T, r, &one, &none));
        assert_int_equal(none, q);
        if (q > 0)
            assert_memory_equal(one, all + offs[r], q * 8);
        gkv_free(one);
    }
    for (size_t i = 0; i < m; i++)
        assert_int_equal(hit[S[i]], 1);       /* every selected ID, once */
    {
        /* Per partition: as many local IDs as its trainers' shares allow.
         * In all: the most any balanced split allows, which is what floor
         * shares give plus one per ceil share that lands on a partition
         * with a surplus (at most one per trainer). */
        int64_t floor_local = 0, useful = 0, total_local = 0;
        int64_t extra = (int64_t)m % T;

        for (int p = 0; p < P; p++) {
            int64_t best = cnt[p] < share[p] ? cnt[p] : share[p];
            int64_t k = 0, fl, sur;
            for (int r = 0; r < T; r++)
                k += gkv_pbook_trainer_part(b, T, r) == p;
            assert_int_equal(local[p], best);
            fl = cnt[p] < k * floor_share ? cnt[p] : k * floor_share;
            sur = cnt[p] - k * floor_share;
            floor_local += fl;
            useful += sur <= 0 ? 0 : sur < k ? sur : k;
            total_local += local[p];
        }
        assert_int_equal(total_local,
                         floor_local + (useful < extra ? useful : extra));
    }
    gkv_free(all);
    free(offs); free(cnt); free(share); free(local); free(hit);
}

static void
test_split_hand(void **state)
{
    struct fx *f = *state;
    /* users: part 0 = {0, 1}, part 1 = {2, 3}; all four selected */
    const uint8_t mask[4] = {1, 1, 1, 1};
    const uint8_t skew[4] = {1, 1, 1, 0};    /* 2 in part 0, 1 in part 1 */
    int64_t *out;
    size_t offs[5], n;
    gkv_pbook *b;

    put_text(f, hetero_json);
    GKVT_OK(gkv_pbook_open(&b, f->path));
    assert_int_equal(gkv_pbook_trainer_part(b, 4, 0), 0);
    assert_int_equal(gkv_pbook_trainer_part(b, 4, 1), 0);
    assert_int_equal(gkv_pbook_trainer_part(b, 4, 2), 1);
    assert_int_equal(gkv_pbook_trainer_part(b, 4, 3), 1);
    assert_int_equal(gkv_pbook_trainer_part(b, 1, 0), 0);
    assert_int_equal(gkv_pbook_trainer_part(b, 3, 2), 1);
    assert_int_equal(gkv_pbook_trainer_part(b, 3, 3), -1);
    assert_int_equal(gkv_pbook_trainer_part(b, 0, 0), -1);

    GKVT_OK(gkv_pbook_node_split_all(b, 0, mask, NULL, 4, 4, &out, offs));
    for (int r = 0; r < 4; r++) {      /* one each, in order */
        assert_int_equal(offs[r + 1] - offs[r], 1);
        assert_int_equal(out[r], r);
    }
    gkv_free(out);
    GKVT_OK(gkv_pbook_node_split_all(b, 0, mask, NULL, 4, 2, &out, offs));
    assert_int_equal(offs[1], 2);
    assert_int_equal(out[0], 0);
    assert_int_equal(out[1], 1);
    assert_int_equal(out[2], 2);
    assert_int_equal(out[3], 3);
    gkv_free(out);
    /* 3 IDs, 2 trainers: the ceil share goes to partition 0 (its surplus) */
    GKVT_OK(gkv_pbook_node_split_all(b, 0, skew, NULL, 4, 2, &out, offs));
    assert_int_equal(offs[1], 2);
    assert_int_equal(offs[2], 3);
    assert_int_equal(out[0], 0);
    assert_int_equal(out[1], 1);
    assert_int_equal(out[2], 2);
    gkv_free(out);
    /* 3 IDs, 2 trainers, the surplus in partition 1: its trainer gets the
     * ceil share, so nothing leaves its partition */
    {
        const uint8_t late[4] = {0, 1, 1, 1};
        GKVT_OK(gkv_pbook_node_split_all(b, 0, late, NULL, 4, 2, &out, offs));
        assert_int_equal(offs[1], 1);
        assert_int_equal(offs[2], 3);
        assert_int_equal(out[0], 1);
        assert_int_equal(out[1], 2);
        assert_int_equal(out[2], 3);
        gkv_free(out);
    }
    /* 3 IDs, 4 trainers: trainer 3 (partition 1) gets none */
    GKVT_OK(gkv_pbook_node_split(b, 0, skew, NULL, 4, 4, 3, &out, &n));
    assert_int_equal(n, 0);
    gkv_free(out);
    GKVT_OK(gkv_pbook_node_split(b, 0, skew, NULL, 4, 4, 1, &out, &n));
    assert_int_equal(n, 1);
    assert_int_equal(out[0], 1);
    gkv_free(out);
    /* an ID list, duplicates once, any order */
    {
        const int64_t ids[5] = {3, 0, 3, 2, 0};
        GKVT_OK(gkv_pbook_node_split(b, 0, NULL, ids, 5, 1, 0, &out, &n));
        assert_int_equal(n, 3);
        assert_int_equal(out[0], 0);
        assert_int_equal(out[1], 2);
        assert_int_equal(out[2], 3);
        gkv_free(out);
    }
    /* edges: buys, 5 in part 0 and 2 in part 1, over 2 trainers: 4 and 3,
     * trainer 1 gets part 0's surplus edge 4 */
    {
        const uint8_t all7[7] = {1, 1, 1, 1, 1, 1, 1};
        GKVT_OK(gkv_pbook_edge_split_all(b, 1, all7, NULL, 7, 2, &out, offs));
        assert_int_equal(offs[1], 4);
        assert_int_equal(offs[2], 7);
        assert_int_equal(out[3], 3);
        assert_int_equal(out[4], 4);
        assert_int_equal(out[5], 5);
        assert_int_equal(out[6], 6);
        gkv_free(out);
    }
    /* errors */
    {
        const int64_t bad[2] = {1, 4};
        assert_int_equal(gkv_pbook_node_split(b, 0, mask, bad, 2, 2, 0, &out,
                                              &n), GKV_EINVAL);
        assert_int_equal(gkv_pbook_node_split(b, 0, mask, NULL, 3, 2, 0, &out,
                                              &n), GKV_EINVAL);
        gkvt_expect_msg(gkv_pbook_errmsg(b), "3 entries");
        assert_int_equal(gkv_pbook_node_split(b, 0, NULL, bad, 2, 2, 0, &out,
                                              &n), GKV_ERANGE);
        gkvt_expect_msg(gkv_pbook_errmsg(b), "ids[1] = 4");
        assert_int_equal(gkv_pbook_node_split(b, 0, mask, NULL, 4, 0, 0, &out,
                                              &n), GKV_EINVAL);
        assert_int_equal(gkv_pbook_node_split(b, 0, mask, NULL, 4, 2, 2, &out,
                                              &n), GKV_EINVAL);
        gkvt_expect_msg(gkv_pbook_errmsg(b), "rank 2 of 2");
        assert_int_equal(gkv_pbook_node_split(b, 0, mask, NULL, 4, 2, -1,
                                              &out, &n), GKV_EINVAL);
        assert_int_equal(gkv_pbook_node_split(b, 7, mask, NULL, 4, 2, 0, &out,
                                              &n), GKV_EINVAL);
        assert_int_equal(gkv_pbook_edge_split_all(b, 1, mask, NULL, 4, 2,
                                                  &out, NULL), GKV_EINVAL);
    }
    gkv_pbook_close(b);
}

static void
test_split_random(void **state)
{
    struct fx *f = *state;
    uint64_t rng = gkvt_seed() ^ 0x5eed;

    for (int round = 0; round < 40; round++) {
        struct cfg c;
        gkv_pbook *b;
        json_t *j;

        random_cfg(&c, &rng);
        if (c.net == 0)
            c.net = 1;
        j = cfg_json(&c);
        put_json(f, j);
        json_decref(j);
        GKVT_OK(gkv_pbook_open(&b, f->path));
        for (int edge = 0; edge < 2; edge++) {
            int t = 0;
            int64_t count = edge ? gkv_pbook_num_edges(b, t)
                                 : gkv_pbook_num_nodes(b, t);
            uint8_t *mask = malloc((size_t)count + 1);
            int64_t *S = malloc(((size_t)count + 1) * 8);
            int64_t *list = malloc(((size_t)count * 2 + 1) * 8);
            size_t m = 0, nl = 0;
            /* density: none, all, or a per-partition skewed fraction */
            int mode = (int)(tools__splitmix64(&rng) % 4);

            for (int64_t v = 0; v < count; v++) {
                int32_t own;
                (edge ? gkv_pbook_edge_owner : gkv_pbook_node_owner)(
                    b, t, &v, 1, &own);
                mask[v] = mode == 0 ? 0 : mode == 1 ? 1
                          : tools__splitmix64(&rng) % (uint64_t)(own + 2) == 0;
                if (mask[v]) {
                    S[m++] = v;
                    list[nl++] = v;
                    if (tools__splitmix64(&rng) % 4 == 0)
                        list[nl++] = v;      /* a duplicate */
                }
            }
            for (size_t i = nl; i > 1; i--) {       /* shuffle the list */
                size_t k = tools__splitmix64(&rng) % i;
                int64_t x = list[i - 1];
                list[i - 1] = list[k];
                list[k] = x;
            }
            for (int T = 1; T <= 9; T++) {
                check_split(b, edge, t, mask, NULL, (size_t)count, T, S, m);
                check_split(b, edge, t, NULL, list, nl, T, S, m);
            }
            /* the list and the mask give the same split */
            {
                int64_t *x, *y;
                size_t o1[6], o2[6];
                GKVT_OK((edge ? gkv_pbook_edge_split_all
                              : gkv_pbook_node_split_all)(
                    b, t, mask, NULL, (size_t)count, 5, &x, o1));
                GKVT_OK((edge ? gkv_pbook_edge_split_all
                              : gkv_pbook_node_split_all)(
                    b, t, NULL, list, nl, 5, &y, o2));
                assert_memory_equal(o1, o2, sizeof o1);
                if (m > 0)
                    assert_memory_equal(x, y, m * 8);
                gkv_free(x);
                gkv_free(y);
            }
            free(mask); free(S); free(list);
        }
        gkv_pbook_close(b);
    }
}

/* Trainers a multiple of partitions with equal selected counts: each
 * trainer's IDs are all in its own partition, contiguous. */
static void
test_split_balanced_local(void **state)
{
    struct fx *f = *state;
    struct cfg c = {.P = 4, .nnt = 1, .net = 0};
    uint8_t mask[400];
    int64_t *out;
    size_t offs[9];
    gkv_pbook *b;
    json_t *j;

    for (int p = 0; p < 4; p++)
        c.ncnt[0][p] = 100;
    j = cfg_json(&c);
    put_json(f, j);
    json_decref(j);
    GKVT_OK(gkv_pbook_open(&b, f->path));
    for (int i = 0; i < 400; i++)
        mask[i] = i % 5 != 0;          /* 80 per partition */
    GKVT_OK(gkv_pbook_node_split_all(b, 0, mask, NULL, 400, 8, &out, offs));
    for (int r = 0; r < 8; r++) {
        assert_int_equal(offs[r + 1] - offs[r], 40);
        for (size_t i = offs[r]; i < offs[r + 1]; i++)
            assert_int_equal(out[i] / 100, r / 2);
        /* contiguous: the first 40 selected of the partition, or the next */
        assert_int_equal(out[offs[r]], (r / 2) * 100 + (r % 2 ? 51 : 1));
    }
    gkv_free(out);
    gkv_pbook_close(b);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_hetero_accessors, setup, gkvt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_random_configs, setup, gkvt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_homogeneous_ids, setup, gkvt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_bad_ids, setup, gkvt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_ambiguous_relation, setup, gkvt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_malformed_configs, setup, gkvt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_not_json, setup, gkvt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_open_mem, setup, gkvt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_alloc_failures, setup, gkvt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_split_hand, setup, gkvt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_split_random, setup, gkvt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_split_balanced_local, setup, gkvt_dir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
