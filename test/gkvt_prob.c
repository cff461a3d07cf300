/* gkvt_prob.c - the net_prob tests' fixture (gkvt_prob.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gkvt_prob.h"

/* ---- servers (gkvt_net.h) ---------------------------------------------- */

/* Every server: three threads, no syncing. */
static const char *const g_opts[] = {"--threads", "3", "--nosync", NULL};

void
gkvt_prob_serve(struct gkvt_prob *f, int nserv, const char *const *extra)
{
    gkvt_serve(&f->j, 2, nserv, extra, NULL);
}

gkv_client *
gkvt_prob_client(struct gkvt_prob *f, uint32_t rank)
{
    gkv_client_opts o = {0};

    o.timeout_ms = 20000;
    return gkvt_connect(f->j.cfg, "prob", rank, &o);
}

/* ---- the graph and its features --------------------------------------------- */

struct gkvt_efeat *
gkvt_prob_feat_add(struct gkvt_prob *f, const char *name, int et, gkv_dtype dt,
                   unsigned ndim, uint64_t shape0)
{
    struct gkvt_efeat *t = &f->ft[f->nft++];

    assert_true(f->nft <= GKVT_PROB_NFEAT);
    gkvt_efeat_make(t, name, et, dt, ndim, shape0, f->ne[et]);
    return t;
}

const struct gkvt_efeat *
gkvt_prob_feat_get(const struct gkvt_prob *f, int et, const char *name)
{
    for (int i = 0; i < f->nft; i++)
        if (f->ft[i].et == et && strcmp(f->ft[i].name, name) == 0)
            return &f->ft[i];
    fail_msg("no feature %s on etype %d", name, et);
    return NULL;
}

void
gkvt_prob_graph_make(struct gkvt_prob *f)
{
    gkv_graph *g = gkvt_ui_graph(77, 0);

    f->ne[0] = GKVT_UI_FOLLOWS;
    f->ne[1] = GKVT_UI_CLICKS;
    f->ne[2] = GKVT_UI_CLICKS;
    gkvt_prob_feat_add(f, "w", 0, GKV_F32, 0, 0);    /* 0 .. 3, a fifth zero */
    gkvt_prob_feat_add(f, "cnt", 0, GKV_I32, 1, 1);  /* integers 0 .. 3, (E, 1) */
    gkvt_prob_feat_add(f, "wide", 0, GKV_F32, 1, 2); /* two floats a row: refused */
    gkvt_prob_feat_add(f, "mask", 1, GKV_U8, 0, 0);  /* bool, 40 % ones */
    gkvt_prob_feat_add(f, "h", 1, GKV_F16, 0, 0);    /* f16 */
    gkvt_prob_feat_add(f, "w64", 2, GKV_F64, 0, 0);  /* thirds, as f64 */
    gkvt_ui_partition_efeats(g, f->j.dir, f->ft, f->nft, f->j.json,
                             sizeof f->j.json, &f->ref, f->emap);
    for (int q = 0; q < 2; q++)
        GKVT_OK(gkv_part_open(&f->part[q], f->j.json, q, 0));
    gkv_graph_free(g);
}

int
gkvt_prob_setup(void **state)
{
    /* a port clash forgets the servers it killed: slots for the next */
    return gkvt_job_setup(state, sizeof (struct gkvt_prob), "netprob",
                          GKVT_PROB_PROCS, g_opts, 1);
}

int
gkvt_prob_teardown(void **state)
{
    struct gkvt_prob *f = *state;
    int bad = gkvt_job_fini(&f->j);

    for (int q = 0; q < 2; q++)
        gkv_part_close(f->part[q]);
    gkvt_ui_efeats_free(&f->ref, f->emap, f->ft, f->nft);
    free(f);
    return bad;
}

/* ---- comparisons --------------------------------------------------------------- */

void
gkvt_prob_wopts(const struct gkvt_prob *f, struct gkvt_wopts *w,
                const char *const *names, uint64_t seed, unsigned flags)
{
    memset(w, 0, sizeof *w);
    w->o.seed = seed;
    w->o.flags = flags & ~(GKVT_PROB_OUT | GKVT_PROB_ARR);
    w->o.dir = (flags & GKVT_PROB_OUT) ? GKV_DIR_OUT : GKV_DIR_IN;
    for (int e = 0; e < 3; e++)
        if (names != NULL && names[e] != NULL) {
            w->ew[e] = gkvt_prob_feat_get(f, e, names[e])->w;
            w->len[e] = f->ne[e];
            w->o.edge_w = w->ew;
            w->o.edge_w_len = w->len;
        }
}

void
gkvt_prob_opts_pair(const struct gkvt_prob *f, gkv_sample_opts *oc,
                    struct gkvt_wopts *w, const char *const *names,
                    uint64_t seed, unsigned flags)
{
    gkvt_prob_wopts(f, w, names, seed, flags);
    memset(oc, 0, sizeof *oc);
    oc->seed = seed;
    oc->flags = flags & ~(GKVT_PROB_OUT | GKVT_PROB_ARR);
    oc->dir = (flags & GKVT_PROB_OUT) ? GKV_DIR_OUT : GKV_DIR_IN;
    oc->edge_w_feat = names;
    if (flags & GKVT_PROB_ARR)
        *oc = w->o;
}

void
gkvt_hcopy_take(struct gkvt_hcopy *h, const gkv_block *b, int nl)
{
    memset(h, 0, sizeof *h);
    h->nl = nl;
    for (int i = 0; i < nl; i++) {
        h->b[i] = b[i];
        h->b[i].nodes = h->nodes[i];
        h->b[i].edges = h->edges[i];
        for (int t = 0; t < b[i].num_ntypes; t++) {
            int64_t *ids = malloc(b[i].nodes[t].num_src * 8 + 8);
            h->nodes[i][t] = b[i].nodes[t];
            if (b[i].nodes[t].num_src > 0)
                memcpy(ids, b[i].nodes[t].ids, b[i].nodes[t].num_src * 8);
            h->nodes[i][t].ids = ids;
        }
        for (int e = 0; e < b[i].num_etypes; e++) {
            size_t m = b[i].edges[e].n;
            int64_t *s = malloc(m * 8 + 8), *d = malloc(m * 8 + 8),
                    *x = malloc(m * 8 + 8);
            if (m > 0) {
                memcpy(s, b[i].edges[e].src, m * 8);
                memcpy(d, b[i].edges[e].dst, m * 8);
                memcpy(x, b[i].edges[e].eid, m * 8);
            }
            h->edges[i][e].src = s;
            h->edges[i][e].dst = d;
            h->edges[i][e].eid = x;
            h->edges[i][e].n = m;
        }
    }
}

void
gkvt_hcopy_free(struct gkvt_hcopy *h)
{
    for (int i = 0; i < h->nl; i++) {
        for (int t = 0; t < h->b[i].num_ntypes; t++)
            free((void *)h->nodes[i][t].ids);
        for (int e = 0; e < h->b[i].num_etypes; e++) {
            free((void *)h->edges[i][e].src);
            free((void *)h->edges[i][e].dst);
            free((void *)h->edges[i][e].eid);
        }
    }
}

size_t
gkvt_block_edges(const gkv_block *b, int nl)
{
    size_t n = 0;

    for (int i = 0; i < nl; i++)
        for (int e = 0; e < b[i].num_etypes; e++)
            n += b[i].edges[e].n;
    return n;
}

void
gkvt_prob_same_blocks(struct gkvt_prob *f, gkv_client *c,
                      const struct gkvt_ui_seeds *sd,
                      const gkv_sample_opts *oc, const gkv_sample_opts *ow,
                      const int *fan, int nl, gkv_block *wb)
{
    gkv_block cb[4];

    NET_OK(gkv_client_sample_blocks(c, sd->sv, sd->ns, fan, 3, nl, oc, cb));
    GKVT_OK(gkv_sample_blocks(f->ref.ws, sd->sv, sd->ns, fan, 3, nl, ow, wb));
    if (!gkvt_blocks_same(wb, cb, nl))
        fail_msg("client blocks differ from in-process edge_w (dir %d, flags "
                 "0x%x, fanout %d..)", ow->dir, ow->flags, fan[0]);
    assert_true(gkvt_block_edges(cb, nl) > 0);
}

void
gkvt_prob_check_blocks(struct gkvt_prob *f, gkv_client *c,
                       const struct gkvt_ui_seeds *sd,
                       const char *const *names, const int *fan, int nl,
                       uint64_t seed, unsigned flags, int *differs)
{
    gkv_sample_opts oc = {0};
    struct gkvt_wopts wo;
    gkv_block wb[4];
    struct gkvt_hcopy ref;

    gkvt_prob_opts_pair(f, &oc, &wo, names, seed, flags);
    gkvt_prob_same_blocks(f, c, sd, &oc, &wo.o, fan, nl, wb);
    gkvt_hcopy_take(&ref, wb, nl);
    wo.o.edge_w = NULL;
    wo.o.edge_w_len = NULL;
    GKVT_OK(gkv_sample_blocks(f->ref.ws, sd->sv, sd->ns, fan, 3, nl, &wo.o,
                              wb));
    if (!gkvt_blocks_same(wb, ref.b, nl))
        *differs = 1;
    gkvt_hcopy_free(&ref);
}

void
gkvt_prob_check_hop(struct gkvt_prob *f, gkv_client *c, size_t nus,
                    int64_t umul, int64_t umod, size_t nis, int64_t imul,
                    const char *const *names, const int *fan, uint64_t seed,
                    unsigned flags)
{
    int64_t us[300], is[100];
    const int64_t *sv[2] = {us, is};
    size_t ns[2] = {nus, nis};
    gkv_sample_opts oc = {0};
    struct gkvt_wopts wo;
    gkv_sample_edges we[3], ce[3];
    struct gkvt_hcopy ref;
    gkv_block rb[1];

    assert_true(nus <= 300 && nis <= 100);
    for (size_t i = 0; i < nus; i++)
        us[i] = ((int64_t)i * umul) % umod;
    for (size_t i = 0; i < nis; i++)
        is[i] = ((int64_t)i * imul) % GKVT_UI_ITEMS;
    gkvt_prob_opts_pair(f, &oc, &wo, names, seed, flags);
    GKVT_OK(gkv_sample_neighbors(f->ref.ws, sv, ns, fan, 3, 2, &wo.o, we));
    memset(rb, 0, sizeof rb);
    rb[0].num_etypes = 3;
    rb[0].edges = we;
    gkvt_hcopy_take(&ref, rb, 1);
    NET_OK(gkv_client_sample_neighbors(c, sv, ns, fan, 3, 2, &oc, ce));
    for (int e = 0; e < 3; e++) {
        const gkv_sample_edges *x = &ref.edges[0][e];
        assert_true(x->n > 0);
        assert_int_equal(ce[e].n, x->n);
        assert_memory_equal(ce[e].src, x->src, x->n * 8);
        assert_memory_equal(ce[e].dst, x->dst, x->n * 8);
        assert_memory_equal(ce[e].eid, x->eid, x->n * 8);
    }
    gkvt_hcopy_free(&ref);
}

void
gkvt_prob_check_edge_batch(struct gkvt_prob *f, gkv_client *c,
                           const char *const *names, int64_t mul, int64_t add,
                           int num_neg, uint64_t seed, unsigned flags)
{
    gkv_edge_batch_spec sp = {0};
    gkv_edge_batch web, ceb;
    gkv_block wb[2], cb[2];
    gkv_sample_opts oc = {0};
    struct gkvt_wopts wo;
    int64_t eids[100];
    int fan[6] = {3, 2, 3, 5, 5, 5};

    for (int i = 0; i < 100; i++)
        eids[i] = (i * mul + add) % GKVT_UI_CLICKS;
    sp.etype = 1;
    sp.eids = eids;
    sp.n = 100;
    sp.num_neg = num_neg;
    sp.exclude = GKV_EXCLUDE_SELF | GKV_EXCLUDE_REVERSE;
    sp.reverse_etype = 2;
    gkvt_prob_opts_pair(f, &oc, &wo, names, seed, flags);
    NET_OK(gkv_client_sample_edge_batch(c, &sp, fan, 3, 2, &oc, &ceb, cb));
    sp.reverse_eids = f->ref.rev;       /* what the servers read from storage */
    sp.reverse_n = GKVT_UI_CLICKS;
    GKVT_OK(gkv_sample_edge_batch(f->ref.ws, &sp, fan, 3, 2, &wo.o, &web, wb));
    assert_true(gkvt_blocks_same(wb, cb, 2));
    assert_int_equal(ceb.num_neg, web.num_neg);
    assert_memory_equal(ceb.neg_dst, web.neg_dst, web.num_neg * 8);
    assert_true(gkvt_block_edges(cb, 2) > 0);
}
