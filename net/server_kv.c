/* server_kv.c - tensors: PULL, PUSH, CREATE, DELETE and OPT_RESET, and
 * the write-back tensors (--writeback) set up at open and taken in when a
 * client creates one.
 *
 * Locks: none of the server's. The handlers run with no lock held (the
 * core's rule) and block only in the store (LMDB's writer lock, a map
 * resize). PUSH is SRV_ONCE: the core keeps a copy from being applied
 * twice. wb.pat is fixed at open; wb.taken and wb.held are atomics.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <nanomsg/nn.h>
#include "net/server_int.h"

static void enc_create(net_wr *w, const void *a) { net__enc_create_rep(w, a); }

void
srv__tensor_from_desc(net_tensor *t, const gkv_tensor_desc *d)
{
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", d->name);
    t->dtype = (uint8_t)d->dtype;
    t->ndim = (uint8_t)d->ndim;
    t->flags = (uint16_t)d->flags;
    for (unsigned i = 0; i < d->ndim && i < GKV_MAX_DIMS; i++)
        t->shape[i] = d->shape[i];
    t->lo = d->lo;
    t->hi = d->hi;
    t->row_bytes = d->row_bytes;
    t->chunk_rows = d->chunk_rows;
}

/* ---- write-back tensors ------------------------------------------------- */

/* The first write-back pattern that tensor 'name' matches (its index),
 * or -1: none, or a state companion ('#': it goes with its tensor). */
static int
wb_pattern(const gkv_server *s, const char *name)
{
    if (strchr(name, '#') != NULL)      /* state goes with its tensor */
        return -1;
    for (size_t i = 0; i < s->wb.npat; i++) {
        size_t n = strlen(s->wb.pat[i]);
        if (n > 0 && s->wb.pat[i][n - 1] == '*'
            ? strncmp(name, s->wb.pat[i], n - 1) == 0
            : strcmp(name, s->wb.pat[i]) == 0)
            return (int)i;
    }
    return -1;
}

/* Whether tensor 'name' is one the server keeps in write-back mode. */
int
srv__wb_match(const gkv_server *s, const char *name)
{
    return wb_pattern(s, name) >= 0;
}

/* Puts tensor 'name' in write-back mode and says so: at start ('by' NULL)
 * or when a client created it ('by': "group 'g' rank r"). */
static gkv_err
wb_begin(gkv_server *s, const char *name, const char *by)
{
    gkv_tensor_desc d;
    gkv_err rc;
    int pi = wb_pattern(s, name);

    if ((rc = gkv_writeback_start(s->store, name, s->wb.flush_ms)) != GKV_OK)
        return net__fail(rc, "write-back of tensor '%s': %s", name,
                         gkv_store_errmsg(s->store));
    atomic_fetch_add(&s->wb.taken, 1);
    atomic_fetch_add(&s->wb.held, 1);
    if (gkv_tensor_info(s->store, NULL, name, &d) != GKV_OK)
        return GKV_OK;
    if (by == NULL)
        srv__log(s, "write-back: tensor '%s' (%llu rows, %.1f MB) in RAM, "
                 "written every %u ms", name, (unsigned long long)(d.hi - d.lo),
                 (double)(d.hi - d.lo) * (double)d.row_bytes / 1e6,
                 s->wb.flush_ms);
    else
        srv__log(s, "write-back: tensor '%s', created by %s, matches '%s': "
                 "taken into write-back (%llu rows, %.1f MB in RAM, written "
                 "every %u ms)", name, by, pi >= 0 ? s->wb.pat[pi] : "?",
                 (unsigned long long)(d.hi - d.lo),
                 (double)(d.hi - d.lo) * (double)d.row_bytes / 1e6,
                 s->wb.flush_ms);
    return GKV_OK;
}

/* At start: which of the store's tensors (d[0..nt)) pattern i matches, or
 * a warning that it matches none yet. */
static void
wb_say_matches(gkv_server *s, size_t i, const gkv_tensor_desc *d, size_t nt)
{
    char list[1024];
    size_t n = 0, len = 0, shown = 0;

    list[0] = '\0';
    for (size_t t = 0; t < nt; t++) {
        if (wb_pattern(s, d[t].name) != (int)i)
            continue;
        n++;
        if (len < sizeof list - 1 && shown < 8) {
            int w = snprintf(list + len, sizeof list - len, "%s'%s'",
                             shown ? ", " : "", d[t].name);
            if (w > 0 && (size_t)w < sizeof list - len) {
                len += (size_t)w;
                shown++;
            } else {
                list[len] = '\0';
                len = sizeof list;   /* full: show no more */
            }
        }
    }
    if (n == 0) {
        const char *p = s->wb.pat[i];
        /* a graph's tensors are "node/NTYPE/NAME" and "edge/ETYPE/NAME" */
        int graph_hint = s->graph.part != NULL && strncmp(p, "node/", 5) != 0 &&
                         strncmp(p, "edge/", 5) != 0 && strcmp(p, "*") != 0;
        srv__log(s, "write-back: WARNING: '%s' matches no tensor yet; tensors "
                 "created later whose names match will be held in RAM%s", p,
                 graph_hint ? " (this server serves a graph partition, whose "
                 "tensors are named node/NTYPE/NAME and edge/ETYPE/NAME: the "
                 "embedding 'emb' of node type 'user' is 'node/user/emb')" :
                 "");
        return;
    }
    srv__log(s, "write-back: '%s' matches %zu tensor%s: %s%s", s->wb.pat[i], n,
             n == 1 ? "" : "s", list, n > shown ? ", ..." : "");
}

/* The patterns of o->writeback, checked and copied; then every tensor of
 * the store that matches in write-back mode. */
gkv_err
srv__wb_open(gkv_server *s, const gkv_server_opts *o, unsigned nserv)
{
    gkv_tensor_desc *d = NULL;
    size_t n = 0, nt = 0;
    gkv_err rc = GKV_OK;

    while (o->writeback != NULL && o->writeback[n] != NULL)
        n++;
    if (n == 0)
        return GKV_OK;
    if (nserv > 1)
        return net__fail(GKV_EINVAL, "write-back needs one server per "
                         "machine, not %u: each server process would keep "
                         "its own copy of the tensors", nserv);
    if (o->flush_ms > 86400000u)
        return net__fail(GKV_EINVAL, "write-back flush interval %u ms: at "
                         "most 86400000 (a day)", o->flush_ms);
    if ((s->wb.pat = gkv__calloc(n, sizeof *s->wb.pat)) == NULL)
        return net__fail(GKV_ENOMEM, "server: out of memory");
    for (size_t i = 0; i < n; i++) {
        const char *p = o->writeback[i], *star = strchr(p, '*');
        size_t len = strlen(p);

        if (len == 0 || len > GKV_NAME_MAX || strchr(p, '#') != NULL ||
            (star != NULL && star != p + len - 1))
            return net__fail(GKV_EINVAL, "write-back name '%.*s': a tensor "
                             "name of 1..%d bytes without '#', or a prefix "
                             "ending in '*'", GKV_NAME_MAX + 8, p,
                             GKV_NAME_MAX);
        if ((s->wb.pat[i] = gkv__strdup(p)) == NULL)
            return net__fail(GKV_ENOMEM, "server: out of memory");
        s->wb.npat = i + 1;
    }
    s->wb.flush_ms = o->flush_ms ? o->flush_ms : 10;
    if ((rc = gkv_tensor_list(s->store, NULL, 0, &d, &nt)) != GKV_OK)
        return net__fail(rc, "write-back: %s", gkv_store_errmsg(s->store));
    for (size_t i = 0; i < s->wb.npat; i++)
        wb_say_matches(s, i, d, nt);
    for (size_t i = 0; i < nt && rc == GKV_OK; i++)
        if (srv__wb_match(s, d[i].name))
            rc = wb_begin(s, d[i].name, NULL);
    gkv_free(d);
    return rc;
}

/* At the stop: the last flush, and what became of it. */
gkv_err
srv__wb_last_flush(gkv_server *s)
{
    gkv_err rc;

    if (s->wb.npat == 0)
        return GKV_OK;
    if (atomic_load(&s->wb.held) == 0) {
        /* nothing in RAM: say so, never "last pushes written" */
        char pats[1024];
        size_t len = 0;

        pats[0] = '\0';
        for (size_t i = 0; i < s->wb.npat && len < sizeof pats; i++) {
            int w = snprintf(pats + len, sizeof pats - len, "%s'%s'",
                             i ? ", " : "", s->wb.pat[i]);
            len = w > 0 ? len + (size_t)w : sizeof pats;
        }
        if (atomic_load(&s->wb.taken) == 0)
            srv__log(s, "write-back: no tensor was held in RAM (--writeback %s "
                     "matched none); nothing to write", pats);
        else
            srv__log(s, "write-back: no tensor is held in RAM any more (the "
                     "%llu held were deleted); nothing to write",
                     (unsigned long long)atomic_load(&s->wb.taken));
        return GKV_OK;
    }
    if ((rc = gkv_writeback_flush(s->store)) == GKV_OK) {
        srv__log(s, "write-back: last pushes written");
        return GKV_OK;
    }
    if (rc == GKV_ENOTFOUND) {   /* the others were written */
        srv__log(s, "write-back: last pushes written, but %s",
                 gkv_store_errmsg(s->store));
        return GKV_OK;
    }
    srv__log(s, "write-back: writing the last pushes FAILED (%s): %s",
             gkv_strerror(rc), gkv_store_errmsg(s->store));
    return net__fail(rc, "write-back: %s", gkv_store_errmsg(s->store));
}

/* ---- PULL and PUSH ------------------------------------------------------ */

/* Describes tensor 'name' as of tx (NULL: now) for a pull or push
 * ('what'): its own description, or for optimizer state not created yet
 * the one it will have, when its tensor is here (*absent 1: its rows are
 * zeros until then). GKV_OK, or r failed. */
static gkv_err
tensor_desc(gkv_server *s, srv_req *r, gkv_txn *tx, const char *what,
            const char *name, gkv_tensor_desc *d, int *absent)
{
    int exists = 1;
    gkv_err rc;

    rc = gkv_tensor_info(s->store, tx, name, d);
    if (rc == GKV_ENOTFOUND && strchr(name, '#') != NULL)
        rc = gkv_opt_state_info(s->store, tx, name, d, &exists);
    *absent = !exists;
    if (rc != GKV_OK)
        return srv__fail(r, rc, "%s: %s", what, gkv_store_errmsg(s->store));
    return GKV_OK;
}

/* After a range error of ids[0..n) of tensor d, from a server of a
 * partition: for a graph feature (node/T/F, edge/E/F, and their state)
 * whose type the partition book knows, which partition owns the first ID
 * outside d's range, and --ip-config; "" otherwise. Into buf. */
static const char *
owner_hint(const gkv_server *s, const gkv_tensor_desc *d,
           const uint64_t *ids, uint64_t n, char *buf, size_t len)
{
    const gkv_pbook *b = s->graph.book;
    const char *slash;
    char type[GKV_NAME_MAX + 1];
    int edge = strncmp(d->name, "edge/", 5) == 0, t;
    int64_t v = -1;
    int32_t part;
    uint64_t i;

    buf[0] = '\0';
    if (b == NULL || s->graph.part == NULL ||
        (!edge && strncmp(d->name, "node/", 5) != 0) ||
        (slash = strchr(d->name + 5, '/')) == NULL)
        return buf;
    snprintf(type, sizeof type, "%.*s", (int)(slash - d->name - 5),
             d->name + 5);
    if ((edge ? gkv_pbook_etype_find(b, type, &t) :
                gkv_pbook_ntype_find(b, type, &t)) != GKV_OK)
        return buf;
    for (i = 0; i < n && v < 0; i++)
        if ((ids[i] < d->lo || ids[i] >= d->hi) && ids[i] <= INT64_MAX)
            v = (int64_t)ids[i];
    if (v < 0)
        return buf;
    if ((edge ? gkv_pbook_edge_owner(b, t, &v, 1, &part) :
                gkv_pbook_node_owner(b, t, &v, 1, &part)) == GKV_OK)
        snprintf(buf, len, ": partition %d owns ID %lld; this server serves "
                 "partition %d: ask the whole job (kvctl --ip-config FILE, "
                 "gkv_client_connect with its ip_config)", (int)part,
                 (long long)v, gkv_part_id(s->graph.part));
    else
        snprintf(buf, len, ": no partition owns ID %lld: the graph has %lld "
                 "%s of type '%s'", (long long)v, (long long)(edge ?
                 gkv_pbook_num_edges(b, t) : gkv_pbook_num_nodes(b, t)),
                 edge ? "edges" : "nodes", type);
    return buf;
}

/* r fails with the store's error rc about ids[0..n) of tensor d: its
 * message, and for a range error the owner_hint. */
static gkv_err
store_fail(const gkv_server *s, srv_req *r, gkv_err rc,
           const gkv_tensor_desc *d, const uint64_t *ids, uint64_t n)
{
    char hint[320] = "";

    if (rc == GKV_ERANGE)
        owner_hint(s, d, ids, n, hint, sizeof hint);
    return srv__fail(r, rc, "%s%s", gkv_store_errmsg(s->store), hint);
}

/* Fills 'rows' (n of d's rows) with zeros for IDs in d's range: the rows
 * of optimizer state not created yet. GKV_OK, or r failed. */
static gkv_err
pull_zeros(const gkv_server *s, srv_req *r, const char *name,
           const gkv_tensor_desc *d, const uint64_t *ids, uint64_t n,
           unsigned char *rows, size_t bytes)
{
    char hint[320];

    for (uint64_t i = 0; i < n; i++)
        if (ids[i] < d->lo || ids[i] >= d->hi)
            return srv__fail(r, GKV_ERANGE, "tensor '%s': ID %llu (index "
                             "%llu) is outside [%llu, %llu)%s", name,
                             (unsigned long long)ids[i],
                             (unsigned long long)i, (unsigned long long)d->lo,
                             (unsigned long long)d->hi,
                             owner_hint(s, d, ids, n, hint, sizeof hint));
    if (bytes > 0)
        memset(rows, 0, bytes);
    return GKV_OK;
}

/* PULL: rows by ID, gathered straight into the reply message. */
static void
op_pull(gkv_server *s, srv_req *r)
{
    net_pull_req pq;
    gkv_tensor_desc d;
    gkv_txn *tx = NULL;
    net_rd rd;
    net_wr w;
    uint64_t *tmp = NULL;
    const uint64_t *ids;
    unsigned char *rows;
    size_t bytes;
    int zeros;           /* a companion not created yet */
    gkv_err rc;

    net__rd_init(&rd, r->pl, r->plen);
    if (net__dec_pull_req(&rd, &pq) != 0) {
        srv__fail(r, GKV_EPROTO, "pull: %s", rd.why);
        return;
    }
    /* one snapshot for the description and the rows; without one when
     * tensors are kept in write-back mode, so that their RAM copy is read */
    if (s->wb.npat == 0 && (rc = gkv_txn_begin(s->store, &tx)) != GKV_OK) {
        srv__fail(r, rc, "pull: %s", gkv_store_errmsg(s->store));
        return;
    }
    if (tensor_desc(s, r, tx, "pull", pq.name, &d, &zeros) != GKV_OK)
        goto out;
    /* bound the reply before allocating it */
    if (d.row_bytes != 0 && pq.n > (s->io.max_msg - 64) / d.row_bytes) {
        srv__fail(r, GKV_EINVAL, "pull of %llu rows of tensor '%s' (%zu "
                  "bytes each) is more than this server's %llu-byte message "
                  "limit; split it", (unsigned long long)pq.n, pq.name,
                  d.row_bytes, (unsigned long long)s->io.max_msg);
        goto out;
    }
    bytes = (size_t)pq.n * d.row_bytes;
    /* the reply first, before any row is read: refused at once when it
     * would pass the reply memory cap */
    if ((r->out = srv__reply_alloc(r, 16 + bytes)) == NULL)
        goto out;
    if ((ids = srv__ids_aligned(pq.ids, (size_t)pq.n, &tmp)) == NULL) {
        srv__fail(r, GKV_ENOMEM, "pull: out of memory for %llu IDs",
                  (unsigned long long)pq.n);
        goto out;       /* the core frees r->out */
    }
    w.p = (unsigned char *)r->out + NET_HDR_LEN;
    w.cap = 16 + bytes;
    w.off = 0;
    net__wr_u64(&w, pq.n);
    net__wr_u64(&w, d.row_bytes);
    rows = net__wr_arr(&w, bytes);
    if (zeros)
        rc = pull_zeros(s, r, pq.name, &d, ids, pq.n, rows, bytes);
    else if ((rc = gkv_tensor_pull(s->store, tx, pq.name, ids, (size_t)pq.n,
                                   rows, bytes)) != GKV_OK)
        store_fail(s, r, rc, &d, ids, pq.n);
    if (rc != GKV_OK)
        goto out;       /* the core frees r->out */
    r->out_len = w.off;
    atomic_fetch_add_explicit(&s->stats.pulls, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->stats.pull_rows, pq.n, memory_order_relaxed);
out:
    gkv_txn_end(tx);
    gkv__free(tmp);
}

/* PUSH's check (SRV_ONCE): a well-formed payload. */
static gkv_err
push_check(gkv_server *s, srv_req *r)
{
    net_push_req pq;
    net_rd rd;

    (void)s;
    net__rd_init(&rd, r->pl, r->plen);
    if (net__dec_push_req(&rd, &pq) != 0)
        return srv__fail(r, GKV_EPROTO, "push: %s", rd.why);
    return GKV_OK;
}

/* PUSH: rows by ID through gkv_tensor_push (one write transaction). Runs
 * once per request (SRV_ONCE): the core answers a copy. */
static void
op_push(gkv_server *s, srv_req *r)
{
    net_push_req pq;
    gkv_tensor_desc d;
    gkv_push_args pa;
    net_rd rd;
    uint64_t *tmp = NULL;
    void *rtmp = NULL;
    const uint64_t *ids;
    const void *rows;
    int absent;
    gkv_err rc;

    net__rd_init(&rd, r->pl, r->plen);
    if (net__dec_push_req(&rd, &pq) != 0) {     /* push_check passed it */
        srv__fail(r, GKV_EPROTO, "push: %s", rd.why);
        return;
    }
    /* a restore of optimizer state not created yet: the push checks and
     * creates it (gkv_tensor_push); its rows as it will have */
    if (tensor_desc(s, r, NULL, "push", pq.name, &d, &absent) != GKV_OK)
        return;
    if (pq.row_bytes != d.row_bytes) {
        srv__fail(r, GKV_ESHAPE, "push to tensor '%s': rows of %llu bytes, "
                  "the tensor's rows are %zu bytes (%llu x %s)", pq.name,
                  (unsigned long long)pq.row_bytes, d.row_bytes,
                  (unsigned long long)d.row_elems, gkv_dtype_name(d.dtype));
        return;
    }
    if ((ids = srv__ids_aligned(pq.ids, (size_t)pq.n, &tmp)) == NULL ||
        (rows = srv__bytes_aligned(pq.rows, (size_t)(pq.n * pq.row_bytes),
                                   &rtmp)) == NULL) {
        srv__fail(r, GKV_ENOMEM, "push: out of memory");
        goto out;
    }
    memset(&pa, 0, sizeof pa);
    pa.handler = pq.handler[0] ? pq.handler : NULL;
    pa.lr = pq.lr;
    pa.eps = pq.eps;
    pa.beta1 = pq.beta1;
    pa.beta2 = pq.beta2;
    pa.flags = pq.flags;
    rc = gkv_tensor_push(s->store, pq.name, ids, (size_t)pq.n, rows,
                         (size_t)(pq.n * pq.row_bytes), &pa);
    if (rc != GKV_OK) {
        store_fail(s, r, rc, &d, ids, pq.n);
        goto out;
    }
    atomic_fetch_add_explicit(&s->stats.pushes, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->stats.push_rows, pq.n, memory_order_relaxed);
    srv__reply_u64(r, pq.n);
out:
    gkv__free(tmp);
    gkv__free(rtmp);
}

/* ---- CREATE, DELETE, OPT_RESET ------------------------------------------ */

/* Says how an existing tensor differs from a create request, or "" when it
 * matches (dtype, row shape, range, flags, and chunk rows when asked). */
static void
spec_diff(const gkv_tensor_desc *d, const net_create_req *c, char *out,
          size_t cap)
{
    int same = d->dtype == (gkv_dtype)c->t.dtype && d->ndim == c->t.ndim &&
               d->lo == c->t.lo && d->hi == c->t.hi &&
               d->flags == c->t.flags &&
               (c->t.chunk_rows == 0 || c->t.chunk_rows == d->chunk_rows);
    char a[160], b[160];
    size_t oa, ob;

    for (unsigned i = 0; same && i < d->ndim; i++)
        same = d->shape[i] == c->t.shape[i];
    out[0] = '\0';
    if (same)
        return;
    oa = (size_t)snprintf(a, sizeof a, "%s [", gkv_dtype_name(d->dtype));
    ob = (size_t)snprintf(b, sizeof b, "%s [",
                          gkv_dtype_name((gkv_dtype)c->t.dtype));
    for (unsigned i = 0; i < d->ndim && oa < sizeof a; i++)
        oa += (size_t)snprintf(a + oa, sizeof a - oa, "%s%llu", i ? "," : "",
                               (unsigned long long)d->shape[i]);
    for (unsigned i = 0; i < c->t.ndim && ob < sizeof b; i++)
        ob += (size_t)snprintf(b + ob, sizeof b - ob, "%s%llu", i ? "," : "",
                               (unsigned long long)c->t.shape[i]);
    if (oa < sizeof a)
        snprintf(a + oa, sizeof a - oa, "] rows [%llu, %llu) flags %u chunk "
                 "rows %u", (unsigned long long)d->lo,
                 (unsigned long long)d->hi, d->flags, d->chunk_rows);
    if (ob < sizeof b)
        snprintf(b + ob, sizeof b - ob, "] rows [%llu, %llu) flags %u chunk "
                 "rows %u", (unsigned long long)c->t.lo,
                 (unsigned long long)c->t.hi, (unsigned)c->t.flags,
                 c->t.chunk_rows);
    snprintf(out, cap, "tensor '%s' exists as %s; asked for %s", d->name, a, b);
}

/* The store's spec of a CREATE request. */
static void
spec_from(const net_create_req *cq, gkv_tensor_spec *sp)
{
    memset(sp, 0, sizeof *sp);
    sp->dtype = (gkv_dtype)cq->t.dtype;
    sp->ndim = cq->t.ndim;
    for (unsigned i = 0; i < cq->t.ndim; i++)
        sp->shape[i] = cq->t.shape[i];
    sp->lo = cq->t.lo;
    sp->hi = cq->t.hi;
    sp->chunk_rows = cq->t.chunk_rows;
    sp->flags = cq->t.flags;
    sp->init = (gkv_init)cq->init;
    sp->a = cq->a;
    sp->b = cq->b;
    sp->seed = cq->seed;
}

/* A tensor r's client just created (d, as created): logged, and taken
 * into write-back when it matches --writeback. When that fails it is
 * deleted again (not as configured: undone, so a retry starts afresh),
 * but only while the name is still that tensor (its id): a racing client
 * may have deleted it and created another, which is not this request's to
 * undo. A write-back already on for the name (a racing create took it) is
 * what was wanted. GKV_OK, or r failed. */
static gkv_err
create_taken(gkv_server *s, srv_req *r, const net_create_req *cq,
             const gkv_tensor_desc *d)
{
    char by[NET_GROUP_MAX + 32], why[512];
    gkv_tensor_desc now;
    gkv_err rc;

    srv__log(s, "group '%s' rank %u created tensor '%s' rows [%llu, %llu)",
             r->group, r->rank, cq->t.name, (unsigned long long)cq->t.lo,
             (unsigned long long)cq->t.hi);
    snprintf(by, sizeof by, "group '%s' rank %u", r->group, r->rank);
    if (!srv__wb_match(s, cq->t.name) ||
        (rc = wb_begin(s, cq->t.name, by)) == GKV_OK || rc == GKV_EEXIST)
        return GKV_OK;
    snprintf(why, sizeof why, "%s", gkv_net_errmsg());
    if (gkv_tensor_info(s->store, NULL, cq->t.name, &now) != GKV_OK ||
        now.id != d->id) {
        srv__log(s, "%s; tensor '%s' was deleted (or replaced) meanwhile",
                 why, cq->t.name);
        return srv__fail(r, rc, "%s; the tensor this request created was "
                         "deleted meanwhile", why);
    }
    srv__log(s, "%s; tensor '%s' deleted again", why, cq->t.name);
    gkv_tensor_delete(s->store, cq->t.name);
    return srv__fail(r, rc, "%s; the tensor was not kept", why);
}

/* CREATE: a tensor, or the same one again (idempotent: a tensor that
 * exists must match the request). The reply describes what this request
 * did: the store creates or finds the tensor and describes it in one
 * transaction (gkv_tensor_ensure), so a DELETE (and another CREATE) of
 * the name racing with it cannot make it answer "no tensor" or describe
 * another request's tensor. */
static void
op_create(gkv_server *s, srv_req *r)
{
    net_create_req cq;
    net_create_rep cr;
    gkv_tensor_spec sp;
    gkv_tensor_desc d;
    char diff[800];
    net_rd rd;
    int created;
    gkv_err rc;

    net__rd_init(&rd, r->pl, r->plen);
    if (net__dec_create_req(&rd, &cq) != 0) {
        srv__fail(r, GKV_EPROTO, "create: %s", rd.why);
        return;
    }
    if (cq.t.policy[0] != '\0') {
        srv__fail(r, GKV_EINVAL, "create '%s': policy '%s' is not one this "
                  "server knows", cq.t.name, cq.t.policy);
        return;
    }
    spec_from(&cq, &sp);
    memset(&cr, 0, sizeof cr);
    if ((rc = gkv_tensor_ensure(s->store, cq.t.name, &sp, &d,
                                &created)) != GKV_OK) {
        srv__fail(r, rc, "%s", gkv_store_errmsg(s->store));
        return;
    }
    cr.created = (uint8_t)created;
    if (created && create_taken(s, r, &cq, &d) != GKV_OK)
        return;
    if (!created) {   /* made before (also by a racing client): must match */
        spec_diff(&d, &cq, diff, sizeof diff);
        if (diff[0] != '\0') {
            srv__fail(r, GKV_EEXIST, "%s", diff);
            return;
        }
    }
    srv__tensor_from_desc(&cr.t, &d);
    srv__reply_build(r, enc_create, &cr);
}

static void
op_delete(gkv_server *s, srv_req *r)
{
    char name[GKV_NAME_MAX + 1];
    net_rd rd;
    uint8_t existed = 1;
    gkv_err rc;

    net__rd_init(&rd, r->pl, r->plen);
    if (net__dec_name(&rd, name) != 0) {
        srv__fail(r, GKV_EPROTO, "delete: %s", rd.why);
        return;
    }
    /* out of write-back first (delete refuses it); that writes the
     * pushes not yet flushed, which the delete then drops */
    if (srv__wb_match(s, name)) {
        rc = gkv_writeback_stop(s->store, name);
        if (rc == GKV_OK)
            atomic_fetch_sub(&s->wb.held, 1);
        else if (rc != GKV_ENOTFOUND) {
            srv__fail(r, rc, "%s", gkv_store_errmsg(s->store));
            return;
        }
    }
    rc = gkv_tensor_delete(s->store, name);
    if (rc == GKV_ENOTFOUND)
        existed = 0;
    else if (rc != GKV_OK) {
        srv__fail(r, rc, "%s", gkv_store_errmsg(s->store));
        return;
    } else {
        srv__log(s, "group '%s' rank %u deleted tensor '%s'", r->group, r->rank,
                 name);
    }
    srv__reply_u8(r, existed);
}

/* Drops a tensor's optimizer state (gkv_opt_reset; with write-back, its
 * RAM copies too). Idempotent, like DELETE. */
static void
op_opt_reset(gkv_server *s, srv_req *r)
{
    char name[GKV_NAME_MAX + 1], opt[NET_OPT_MAX + 1];
    net_rd rd;
    uint8_t one = 1;
    gkv_err rc;

    net__rd_init(&rd, r->pl, r->plen);
    if (net__dec_opt_reset(&rd, name, opt) != 0) {
        srv__fail(r, GKV_EPROTO, "opt_reset: %s", rd.why);
        return;
    }
    rc = gkv_opt_reset(s->store, name, opt[0] != '\0' ? opt : NULL);
    if (rc != GKV_OK) {
        srv__fail(r, rc, "%s", gkv_store_errmsg(s->store));
        return;
    }
    srv__log(s, "group '%s' rank %u reset the %s optimizer state of tensor "
             "'%s'", r->group, r->rank,
             opt[0] != '\0' ? opt : "adagrad and adam", name);
    srv__reply_u8(r, one);
}

const srv_op srv__kv_ops[] = {
    {NET_PULL, SRV_SESSION, op_pull, NULL},
    {NET_PUSH, SRV_SESSION | SRV_ONCE, op_push, push_check},
    {NET_CREATE, SRV_SESSION, op_create, NULL},
    {NET_DELETE, SRV_SESSION, op_delete, NULL},
    {NET_OPT_RESET, SRV_SESSION, op_opt_reset, NULL},
    {0, 0, NULL, NULL},
};
