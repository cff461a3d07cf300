/* server_graph.c - graph queries on the partition a server serves:
 * PBOOK, FIND_EDGES, IN_DEGREES, OUT_DEGREES, IN_SUBGRAPH; and opening
 * the partition at start.
 *
 * Locks: none of the server's. s->graph is fixed at open, and the
 * partition's calls are thread-safe. The handlers run with no lock held
 * (the core's rule), and only when the server serves a partition
 * (SRV_PART: the core answers GKV_ENOTSUP otherwise).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "net/server_int.h"

#define BOOK_MAX       (64u << 20) /* bytes of a partition config */

/* ---- PBOOK, FIND_EDGES, IN/OUT_DEGREES, IN_SUBGRAPH ---------------------- */

static void enc_book(net_wr *w, const void *a) { net__enc_book(w, a); }

static void
op_pbook(gkv_server *s, srv_req *r)
{
    net_book b;
    net_rd rd;

    net__rd_init(&rd, r->pl, r->plen);
    if (net__dec_empty(&rd) != 0) {
        srv__fail(r, GKV_EPROTO, "pbook: %s", rd.why);
        return;
    }
    b.part_id = (uint32_t)gkv_part_id(s->graph.part);
    b.len = s->graph.json_len;
    b.json = s->graph.json;
    srv__reply_build(r, enc_book, &b);
}

struct cols_arg {
    unsigned k;
    const int64_t *const *cols;
    size_t n;
};

static void
enc_cols(net_wr *w, const void *a)
{
    const struct cols_arg *ca = a;

    net__enc_cols(w, ca->k, ca->cols, ca->n);
}

/* Whether k columns of n int64 fit in a reply; fails r when not. */
static int
cols_fit(gkv_server *s, srv_req *r, unsigned k, size_t n)
{
    if (n > (s->io.max_msg - 64) / (8 * k)) {
        srv__fail(r, GKV_EINVAL, "%s: the reply would hold %zu x %u values, "
                  "more than this server's %llu-byte message limit; ask for "
                  "fewer",
                  net__type_name(r->h.type), n, k,
                  (unsigned long long)s->io.max_msg);
        return 0;
    }
    return 1;
}

/* Replies with k columns of n int64, unless that is more than a message
 * may carry. */
static void
reply_cols(gkv_server *s, srv_req *r, unsigned k,
           const int64_t *const *cols, size_t n)
{
    struct cols_arg ca = {k, cols, n};

    if (cols_fit(s, r, k, n))
        srv__reply_build(r, enc_cols, &ca);
}

/* IN_SUBGRAPH's columns (dst, src, eid) of the in-edges of ids[0..n),
 * in *o; the reply is the nodes' in-degrees summed (a node may repeat):
 * one over the limit is refused before the edges are gathered. GKV_OK,
 * an error of the partition's for the caller to say, or r failed. */
static gkv_err
ids_subgraph(gkv_server *s, srv_req *r, int et, const int64_t *ids,
             size_t n, int64_t **o, size_t *m)
{
    int64_t *deg;
    gkv_err rc;

    *m = 0;
    if ((deg = gkv__malloc(n * 8 + 8)) == NULL)
        return GKV_ENOMEM;
    if ((rc = gkv_part_in_degrees(s->graph.part, et, ids, n, deg)) != GKV_OK)
        goto out;
    for (size_t i = 0; i < n && *m <= SIZE_MAX / 2; i++)
        *m += (size_t)deg[i];
    if (!cols_fit(s, r, 3, *m)) {
        rc = r->status;
        goto out;
    }
    *m = 0;
    rc = gkv_part_in_subgraph(s->graph.part, et, ids, n, &o[0], &o[1], &o[2],
                              m);
out:
    gkv__free(deg);
    return rc;
}

/* The columns of an ids request: FIND_EDGES (src, dst), IN_DEGREES or
 * OUT_DEGREES (one), each n long. As ids_subgraph. */
static gkv_err
ids_cols(gkv_server *s, unsigned type, int et, const int64_t *ids, size_t n,
         int64_t **o)
{
    if ((o[0] = gkv__malloc(n * 8 + 8)) == NULL ||
        (type == NET_FIND_EDGES && (o[1] = gkv__malloc(n * 8 + 8)) == NULL))
        return GKV_ENOMEM;
    if (type == NET_FIND_EDGES)
        return gkv_part_find_edges(s->graph.part, et, ids, n, o[0], o[1]);
    if (type == NET_IN_DEGREES)
        return gkv_part_in_degrees(s->graph.part, et, ids, n, o[0]);
    return gkv_part_out_degrees(s->graph.part, et, ids, n, o[0]);
}

/* FIND_EDGES, IN_DEGREES, OUT_DEGREES, IN_SUBGRAPH: an edge type and IDs;
 * the reply is columns of int64. */
static void
op_ids(gkv_server *s, srv_req *r)
{
    const char *what = net__type_name(r->h.type);
    int64_t *o[3] = {NULL, NULL, NULL};
    const int64_t *ids;
    uint64_t *tmp = NULL;
    net_ids_req q;
    net_rd rd;
    size_t n, m = 0;
    int net_, sub = r->h.type == NET_IN_SUBGRAPH;
    gkv_err rc;

    net__rd_init(&rd, r->pl, r->plen);
    if (net__dec_ids_req(&rd, &q) != 0) {
        srv__fail(r, GKV_EPROTO, "%s: %s", what, rd.why);
        return;
    }
    net_ = gkv_pbook_num_etypes(s->graph.book);
    if (q.etype >= (uint32_t)net_) {
        srv__fail(r, GKV_EINVAL, "%s: edge type %u: the graph has %d", what,
                  q.etype, net_);
        return;
    }
    n = (size_t)q.n;
    if ((ids = (const int64_t *)srv__ids_aligned(q.ids, n, &tmp)) == NULL) {
        srv__fail(r, GKV_ENOMEM, "%s: out of memory", what);
        return;
    }
    if (sub)
        rc = ids_subgraph(s, r, (int)q.etype, ids, n, o, &m);
    else
        rc = ids_cols(s, r->h.type, (int)q.etype, ids, n, o);
    m = sub ? m : n;
    if (r->status != GKV_OK)
        ;                       /* failed already (the reply's size) */
    else if (rc == GKV_ENOMEM && gkv_part_errmsg(s->graph.part)[0] == '\0')
        srv__fail(r, rc, "%s: out of memory for %zu IDs", what, n);
    else if (rc != GKV_OK)
        srv__fail(r, rc, "%s on partition %d: %s", what,
                  gkv_part_id(s->graph.part), gkv_part_errmsg(s->graph.part));
    else
        reply_cols(s, r, r->h.type == NET_FIND_EDGES ? 2 : sub ? 3 : 1,
                   (const int64_t *const *)o, m);
    for (int i = 0; i < 3; i++) {
        if (sub)
            gkv_free(o[i]);     /* gkv_part_in_subgraph's */
        else
            gkv__free(o[i]);
    }
    gkv__free(tmp);
}

/* ---- opening the partition ---------------------------------------------- */

/* Opens partition o->part_id of o->part_config (its store writable, shared
 * with the machine's other servers), its sgraph and one sampler per worker
 * thread, and keeps the config's bytes for handshakes. */
gkv_err
srv__graph_open(gkv_server *s, const gkv_server_opts *o,
                const gkv_ipconfig *cfg)
{
    FILE *fp;
    long len;
    gkv_err rc;

    if ((rc = gkv_part_open(&s->graph.part, o->part_config, o->part_id,
                            GKV_PART_WRITABLE | GKV_GUARD |
                            ((o->flags & GKV_SERVER_NOSYNC) ? GKV_NOSYNC : 0)))
        != GKV_OK)
        return net__fail(rc, "partition %d of %s: %s", o->part_id,
                         o->part_config, gkv_part_errmsg(NULL));
    s->graph.book = gkv_part_book(s->graph.part);
    s->store = gkv_part_store(s->graph.part);
    if (gkv_ipconfig_count(cfg) != (size_t)gkv_pbook_num_parts(s->graph.book))
        return net__fail(GKV_EINVAL, "%s lists %zu machines but %s has %d "
                         "partitions: machine m serves partition m, so the "
                         "counts must be equal", o->ip_config,
                         gkv_ipconfig_count(cfg), o->part_config,
                         gkv_pbook_num_parts(s->graph.book));
    if (o->store != NULL) {
        char *a = realpath(o->store, NULL);
        char *b = realpath(gkv_pbook_part_path(s->graph.book, o->part_id),
                           NULL);
        int same = a != NULL && b != NULL && strcmp(a, b) == 0;
        free(a);
        free(b);
        if (!same)
            return net__fail(GKV_EINVAL, "--store %s is not partition %d's "
                             "store %s (give only --part-config)", o->store,
                             o->part_id,
                             gkv_pbook_part_path(s->graph.book, o->part_id));
    }
    if ((rc = gkv_part_sgraph(s->graph.part, &s->graph.sg)) != GKV_OK)
        return net__fail(rc, "partition %d: sgraph: %s", o->part_id,
                         gkv_part_errmsg(s->graph.part));
    s->graph.samp = gkv__calloc(s->io.nthreads, sizeof *s->graph.samp);
    if (s->graph.samp == NULL)
        return net__fail(GKV_ENOMEM, "server: out of memory");
    for (unsigned i = 0; i < s->io.nthreads; i++)
        if ((rc = gkv_sampler_new(&s->graph.samp[i], s->graph.sg, 1)) != GKV_OK)
            return net__fail(rc, "partition %d: sampler: %s", o->part_id,
                             gkv_strerror(rc));
    /* the config's bytes, sent to every client at handshake */
    if ((fp = fopen(o->part_config, "rb")) == NULL)
        return net__fail(GKV_EIO, "%s: %s", o->part_config, strerror(errno));
    if (fseek(fp, 0, SEEK_END) != 0 || (len = ftell(fp)) <= 0 ||
        len > (long)BOOK_MAX || fseek(fp, 0, SEEK_SET) != 0) {
        fclose(fp);
        return net__fail(GKV_EIO, "%s: cannot read it (empty, or more than "
                         "%u bytes?)", o->part_config, BOOK_MAX);
    }
    if ((s->graph.json = gkv__malloc((size_t)len)) == NULL) {
        fclose(fp);
        return net__fail(GKV_ENOMEM, "server: out of memory");
    }
    if (fread(s->graph.json, 1, (size_t)len, fp) != (size_t)len) {
        fclose(fp);
        return net__fail(GKV_EIO, "%s: short read", o->part_config);
    }
    fclose(fp);
    s->graph.json_len = (size_t)len;
    return GKV_OK;
}

const srv_op srv__graph_ops[] = {
    {NET_PBOOK, SRV_SESSION | SRV_PART, op_pbook, NULL},
    {NET_FIND_EDGES, SRV_SESSION | SRV_PART, op_ids, NULL},
    {NET_IN_DEGREES, SRV_SESSION | SRV_PART, op_ids, NULL},
    {NET_OUT_DEGREES, SRV_SESSION | SRV_PART, op_ids, NULL},
    {NET_IN_SUBGRAPH, SRV_SESSION | SRV_PART, op_ids, NULL},
    {0, 0, NULL, NULL},
};
