/* client_kv.c - the tensor family: SCHEMA, PULL, PUSH, CREATE, DELETE and
 * OPT_RESET. Routes (which machine holds which rows of a tensor, from the
 * machines' schemas), pull and push split by owner and merged in request
 * order, create, delete, optimizer-state reset, and describe.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/base.h"
#include "net/gkv_net.h"
#include "net/wire.h"
#include "net/client_int.h"

#define SPLIT_ROWS   8192        /* rows per server before a machine's part
                                  * is shared among its servers */
#define PULL_CAP     (2ull << 20) /* pull reply bytes per message: nanomsg
                                    * moves 1-2 MiB messages fastest */
#define PUSH_CAP     (64ull << 20) /* push bytes per message: each one is a
                                    * commit, so fewer and larger */

/* ---- schemas ------------------------------------------------------------ */

void
net__schema_set(gkv_client *c, struct conn *cn, net_schema *sc)
{
    struct mach *mc = &c->mc[cn->machine];

    net__schema_free(&mc->schema);
    mc->schema = *sc;
    mc->have = 1;
    sc->t = NULL;
    sc->n = 0;
    net__route_drop(c);
}

/* ---- routes: who holds which IDs of a tensor ---------------------------- */

void
net__route_drop(gkv_client *c)
{
    for (size_t i = 0; i < c->nrt; i++)
        gkv__free(c->rt[i].sp);
    gkv__free(c->rt);
    c->rt = NULL;
    c->nrt = 0;
}

static const net_tensor *
mach_tensor(const struct mach *mc, const char *name)
{
    for (uint32_t i = 0; i < mc->schema.n; i++)
        if (strcmp(mc->schema.t[i].name, name) == 0)
            return &mc->schema.t[i];
    return NULL;
}

static int
span_cmp(const void *a, const void *b)
{
    const struct span *x = a, *y = b;

    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static int
same_rows(const net_tensor *a, const net_tensor *b)
{
    if (a->dtype != b->dtype || a->ndim != b->ndim || a->row_bytes != b->row_bytes)
        return 0;
    for (unsigned i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i])
            return 0;
    return 1;
}

static gkv_err route_state(gkv_client *c, const char *name,
                           const struct route **out);

/* Appends route *r (its spans now the cache's) and points *out at it; on
 * GKV_ENOMEM frees r's spans. Earlier pointers into c->rt die. */
static gkv_err
route_add(gkv_client *c, struct route *r, const struct route **out)
{
    struct route *nr;

    if ((nr = gkv__realloc(c->rt, (c->nrt + 1) * sizeof *nr)) == NULL) {
        gkv__free(r->sp);
        return net__fail(GKV_ENOMEM, "out of memory");
    }
    c->rt = nr;
    c->rt[c->nrt] = *r;
    *out = &c->rt[c->nrt++];
    return GKV_OK;
}

/* Builds (or finds) the route of 'name' from the machines' schemas.
 * Errors: GKV_ENOTFOUND (no machine holds it), GKV_EINVAL (machines
 * disagree on its rows, or their ranges overlap; a bad '#' name). */
static gkv_err
route_get(gkv_client *c, const char *name, const struct route **out)
{
    struct route r;
    const net_tensor *first = NULL;

    for (size_t i = 0; i < c->nrt; i++)
        if (strcmp(c->rt[i].name, name) == 0) {
            *out = &c->rt[i];
            return GKV_OK;
        }
    if (strchr(name, '#') != NULL)
        return route_state(c, name, out);
    memset(&r, 0, sizeof r);
    snprintf(r.name, sizeof r.name, "%s", name);
    if ((r.sp = gkv__calloc(c->nmach, sizeof *r.sp)) == NULL)
        return net__fail(GKV_ENOMEM, "out of memory");
    for (size_t m = 0; m < c->nmach; m++) {
        const net_tensor *t = mach_tensor(&c->mc[m], name);
        if (t == NULL)
            continue;
        if (first == NULL) {
            first = t;
            r.t = *t;
        } else if (!same_rows(first, t)) {
            unsigned m0 = r.sp[0].m;
            gkv__free(r.sp);
            return net__fail(GKV_EINVAL, "tensor '%s': machine %u has rows "
                             "of %llu bytes (%s), machine %zu of %llu bytes "
                             "(%s); the job's servers disagree", name, m0,
                             (unsigned long long)first->row_bytes,
                             gkv_dtype_name((gkv_dtype)first->dtype), m,
                             (unsigned long long)t->row_bytes,
                             gkv_dtype_name((gkv_dtype)t->dtype));
        }
        r.sp[r.nsp].lo = t->lo;
        r.sp[r.nsp].hi = t->hi;
        r.sp[r.nsp].m = (unsigned)m;
        r.nsp++;
    }
    if (r.nsp == 0) {
        gkv__free(r.sp);
        return net__fail(GKV_ENOTFOUND, "no server holds tensor '%s'", name);
    }
    qsort(r.sp, r.nsp, sizeof *r.sp, span_cmp);
    for (size_t i = 1; i < r.nsp; i++)
        if (r.sp[i].lo < r.sp[i - 1].hi) {
            gkv_err rc = net__fail(GKV_EINVAL, "tensor '%s': machines %u "
                                   "[%llu, %llu) and %u [%llu, %llu) hold "
                                   "overlapping IDs; routing needs disjoint "
                                   "ranges", name, r.sp[i - 1].m,
                                   (unsigned long long)r.sp[i - 1].lo,
                                   (unsigned long long)r.sp[i - 1].hi,
                                   r.sp[i].m, (unsigned long long)r.sp[i].lo,
                                   (unsigned long long)r.sp[i].hi);
            gkv__free(r.sp);
            return rc;
        }
    return route_add(c, &r, out);
}

/* The route of optimizer-state companion "T#suffix": schemas list no
 * companions (a server may not have created one yet: missing is zeros),
 * so it is T's spans with the companion's rows (kv/gkv_kv.h). Cached
 * beside T's, and dropped with it when a schema changes (net__route_drop).
 * Errors: GKV_EINVAL (not a companion name, T not floating),
 * GKV_ENOTFOUND (no server holds T), as route_get. */
static gkv_err
route_state(gkv_client *c, const char *name, const struct route **out)
{
    char base[GKV_NAME_MAX + 1];
    const struct route *tr;
    struct route r;
    int is_step;
    gkv_err rc;

    if ((rc = net__state_split(name, base, &is_step)) != GKV_OK)
        return rc;
    if ((rc = route_get(c, base, &tr)) != GKV_OK) {
        if (rc == GKV_ENOTFOUND)
            return net__fail(rc, "optimizer state '%s': no server holds "
                             "tensor '%s'", name, base);
        return rc;
    }
    memset(&r, 0, sizeof r);
    snprintf(r.name, sizeof r.name, "%s", name);
    if ((rc = net__state_rows(name, &tr->t, is_step, &r.t)) != GKV_OK)
        return rc;
    if ((r.sp = gkv__calloc(tr->nsp, sizeof *r.sp)) == NULL)
        return net__fail(GKV_ENOMEM, "out of memory");
    memcpy(r.sp, tr->sp, tr->nsp * sizeof *r.sp);
    r.nsp = tr->nsp;
    /* tr dies with the realloc */
    return route_add(c, &r, out);
}

/* The span holding id, or NULL. */
static const struct span *
route_find(const struct route *r, uint64_t id)
{
    size_t lo = 0, hi = r->nsp;

    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (id < r->sp[mid].lo)
            hi = mid;
        else if (id >= r->sp[mid].hi)
            lo = mid + 1;
        else
            return &r->sp[mid];
    }
    return NULL;
}

static gkv_err
range_error(const struct route *r, size_t i, uint64_t id)
{
    return net__fail(GKV_ERANGE, "tensor '%s': ids[%zu] = %llu is held by no "
                     "server (the job holds %llu ranges, [%llu, %llu) at the "
                     "widest)", r->name, i, (unsigned long long)id,
                     (unsigned long long)r->nsp,
                     (unsigned long long)r->sp[0].lo,
                     (unsigned long long)r->sp[r->nsp - 1].hi);
}

/* ---- SCHEMA: learning what the machines hold ---------------------------- */

static gkv_err
done_schema(gkv_client *c, struct part *p, net_rd *rd)
{
    net_schema sc;
    int d;

    if ((d = net__dec_schema(rd, &sc)) != 0)
        return net__cfail(p->cn, d == NET_DEC_NOMEM ? GKV_ENOMEM :
                          GKV_EPROTO, "malformed schema: %s", rd->why);
    net__schema_set(c, p->cn, &sc);
    return GKV_OK;
}

static const struct part_ops schema_ops = {
    .type = NET_SCHEMA, .done = done_schema,
};

static gkv_err
refresh(gkv_client *c, uint64_t deadline)
{
    struct part *parts = gkv__calloc(c->nmach, sizeof *parts);
    gkv_err rc;

    if (parts == NULL)
        return net__fail(GKV_ENOMEM, "out of memory");
    for (size_t m = 0; m < c->nmach; m++) {
        parts[m].cn = net__mach_conn(c, m);
        parts[m].ops = &schema_ops;
    }
    rc = net__exchange(c, parts, c->nmach, deadline);
    gkv__free(parts);
    net__route_drop(c);
    return rc;
}

/* The route of 'name', fetching the schemas again once when no server
 * is known to hold it (another client may have created it). */
gkv_err
net__route_fresh(gkv_client *c, const char *name, uint64_t deadline,
                 const struct route **out)
{
    gkv_err rc;

    if (c->schema_stale) {
        /* a server's rows no longer matched the schema (another client
         * replaced the tensor): learn what it is now */
        if ((rc = refresh(c, deadline)) != GKV_OK)
            return rc;
        c->schema_stale = 0;
    }
    if ((rc = route_get(c, name, out)) != GKV_ENOTFOUND)
        return rc;
    if ((rc = refresh(c, deadline)) != GKV_OK)
        return rc;
    return route_get(c, name, out);
}

/* ---- pull and push ------------------------------------------------------ */

/* The payload of a PULL or PUSH part: n IDs, ids[0 .. n) or, with idx,
 * ids[idx[j]], and their rows in the same order. */
struct rows_msg {
    const char *name;
    const uint64_t *ids;
    const size_t *idx;
    size_t n;
    size_t row_bytes;
    unsigned char *dst;            /* pull: where the rows go */
    const unsigned char *rows;     /* push: the rows */
    const char *handler;           /* push */
    const gkv_push_args *args;     /* push: the caller's, or NULL */
};

static void
penc_pull(net_wr *w, const struct part *p)
{
    const struct rows_msg *q = p->arg;

    net__enc_pull_req(w, q->name, q->ids, q->idx, q->n);
}

static gkv_err
done_pull(gkv_client *c, struct part *p, net_rd *rd)
{
    const struct rows_msg *q = p->arg;
    net_pull_rep pr;
    size_t rb = q->row_bytes;

    (void)c;
    if (net__dec_pull_rep(rd, &pr) != 0)
        return net__cfail(p->cn, GKV_EPROTO, "malformed pull reply: %s",
                          rd->why);
    if (pr.n == q->n && pr.row_bytes != rb)
        return net__cfail(p->cn, GKV_ESHAPE, "tensor '%s' has %llu-byte rows "
                          "on this server, %zu-byte in this client's schema "
                          "(another client replaced it?); the schema is "
                          "fetched again on the next call", q->name,
                          (unsigned long long)pr.row_bytes, rb);
    if (pr.n != q->n)
        return net__cfail(p->cn, GKV_EPROTO, "pull reply holds %llu rows of "
                          "%llu bytes; asked for %zu rows of %zu bytes",
                          (unsigned long long)pr.n,
                          (unsigned long long)pr.row_bytes, q->n, rb);
    if (q->idx == NULL)
        memcpy(q->dst, pr.rows, q->n * rb);
    else
        for (size_t j = 0; j < q->n; j++)
            memcpy(q->dst + q->idx[j] * rb, pr.rows + j * rb, rb);
    return GKV_OK;
}

static const struct part_ops pull_ops = {
    .type = NET_PULL, .enc = penc_pull, .done = done_pull,
};

static void
penc_push(net_wr *w, const struct part *p)
{
    const struct rows_msg *q = p->arg;
    const gkv_push_args *a = q->args;
    double opt[4] = {0, 0, 0, 0};

    if (a != NULL) {
        opt[0] = a->lr;
        opt[1] = a->eps;
        opt[2] = a->beta1;
        opt[3] = a->beta2;
    }
    net__enc_push_req(w, q->name, q->handler, a != NULL ? a->flags : 0, opt,
                      q->row_bytes, q->ids, q->rows, q->idx, q->n);
}

static gkv_err
done_push(gkv_client *c, struct part *p, net_rd *rd)
{
    const struct rows_msg *q = p->arg;
    uint64_t n;

    (void)c;
    if (net__dec_u64(rd, &n, "push reply.n") != 0)
        return net__cfail(p->cn, GKV_EPROTO, "malformed push reply: %s",
                          rd->why);
    if (n != q->n)
        return net__cfail(p->cn, GKV_EPROTO, "push reply says %llu rows "
                          "applied, %zu were sent", (unsigned long long)n,
                          q->n);
    return GKV_OK;
}

/* PUSH must not run twice: "add" would add twice. */
static const struct part_ops push_ops = {
    .type = NET_PUSH, .flags = PART_ONCE, .enc = penc_push, .done = done_push,
};

/* A growing array of PULL or PUSH parts p[i] with their payloads q[i]
 * (plist_link points each part at its payload once the list is whole:
 * growing moves them). */
struct plist {
    struct part *p;
    struct rows_msg *q;
    size_t n, cap;
};

/* A new zeroed part to cn; its payload, or NULL when out of memory. */
static struct rows_msg *
plist_add(struct plist *l, struct conn *cn)
{
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 16;
        struct part *np = gkv__realloc(l->p, nc * sizeof *np);
        struct rows_msg *nq;

        if (np == NULL)
            return NULL;
        l->p = np;
        if ((nq = gkv__realloc(l->q, nc * sizeof *nq)) == NULL)
            return NULL;
        l->q = nq;
        l->cap = nc;
    }
    memset(&l->p[l->n], 0, sizeof l->p[l->n]);
    memset(&l->q[l->n], 0, sizeof l->q[l->n]);
    l->p[l->n].cn = cn;
    return &l->q[l->n++];
}

static void
plist_link(struct plist *l, const struct part_ops *ops)
{
    for (size_t i = 0; i < l->n; i++) {
        l->p[i].ops = ops;
        l->p[i].arg = &l->q[i];
    }
}

/* How many servers of a machine share 'cnt' rows. */
static size_t
share(gkv_client *c, size_t cnt)
{
    size_t k = cnt / SPLIT_ROWS;

    if (c->nserv < 2 || cnt < 2 * SPLIT_ROWS)
        return 1;
    return k < c->nserv ? k : c->nserv;
}

/* Which machine holds each ID: with one span, a range check; else *mach
 * (gkv__malloc'd) and the counts. */
static gkv_err
owners(gkv_client *c, const struct route *r, const uint64_t *ids, size_t n,
       unsigned **mach, size_t *count)
{
    memset(count, 0, c->nmach * sizeof *count);
    *mach = NULL;
    if (r->nsp == 1) {
        uint64_t lo = r->sp[0].lo, hi = r->sp[0].hi;
        for (size_t i = 0; i < n; i++)
            if (ids[i] < lo || ids[i] >= hi)
                return range_error(r, i, ids[i]);
        count[r->sp[0].m] = n;
        return GKV_OK;
    }
    if ((*mach = gkv__malloc(n * sizeof **mach)) == NULL)
        return net__fail(GKV_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const struct span *sp = route_find(r, ids[i]);
        if (sp == NULL) {
            gkv__free(*mach);
            *mach = NULL;
            return range_error(r, i, ids[i]);
        }
        (*mach)[i] = sp->m;
        count[sp->m]++;
    }
    return GKV_OK;
}

/* Positions of each machine's IDs, in request order: pos[start[m] ..
 * start[m] + count[m]). */
static size_t *
positions(gkv_client *c, const unsigned *mach, size_t n, const size_t *count,
          size_t *start)
{
    size_t *pos = gkv__malloc(n * sizeof *pos), *fill;

    if (pos == NULL || (fill = gkv__malloc(c->nmach * sizeof *fill)) == NULL) {
        gkv__free(pos);
        return NULL;
    }
    for (size_t m = 0, a = 0; m < c->nmach; m++) {
        start[m] = a;
        fill[m] = a;
        a += count[m];
    }
    for (size_t i = 0; i < n; i++)
        pos[fill[mach[i]]++] = i;
    gkv__free(fill);
    return pos;
}

static gkv_err
local_pull(gkv_client *c, size_t m, const char *name, const uint64_t *ids,
           const size_t *idx, size_t cnt, unsigned char *dst, size_t rb)
{
    gkv_store *st = c->mc[m].local;
    uint64_t *gid = NULL;
    unsigned char *rows = NULL;
    gkv_err rc;

    if (idx == NULL) {
        rc = gkv_tensor_pull(st, NULL, name, ids, cnt, dst, cnt * rb);
    } else {
        if ((gid = gkv__malloc(cnt * sizeof *gid)) == NULL ||
            (rows = gkv__malloc(cnt * rb)) == NULL) {
            gkv__free(gid);
            return net__fail(GKV_ENOMEM, "out of memory");
        }
        for (size_t j = 0; j < cnt; j++)
            gid[j] = ids[idx[j]];
        rc = gkv_tensor_pull(st, NULL, name, gid, cnt, rows, cnt * rb);
        if (rc == GKV_OK)
            for (size_t j = 0; j < cnt; j++)
                memcpy(dst + idx[j] * rb, rows + j * rb, rb);
        gkv__free(gid);
        gkv__free(rows);
    }
    if (rc != GKV_OK)
        return net__fail(rc, "local store %s (machine %zu): %s",
                         c->cn[m * c->nserv].id.store, m,
                         gkv_store_errmsg(st));
    return GKV_OK;
}

/* The IDs of a pull or push split by owning machine: count[m] IDs of
 * machine m; with several machines also mach[i] and, for machine m, the
 * positions pos[start[m] .. start[m] + count[m]) of its IDs (mach and pos
 * stay NULL when one machine owns them all). The caller frees all four
 * with gkv__free, also on error. */
static gkv_err
split_ids(gkv_client *c, const struct route *r, const uint64_t *ids,
          size_t n, unsigned **mach, size_t **count, size_t **start,
          size_t **pos)
{
    gkv_err rc;

    if ((*count = gkv__calloc(c->nmach, sizeof **count)) == NULL ||
        (*start = gkv__calloc(c->nmach, sizeof **start)) == NULL)
        return net__fail(GKV_ENOMEM, "out of memory");
    if ((rc = owners(c, r, ids, n, mach, *count)) != GKV_OK)
        return rc;
    if (*mach != NULL &&
        (*pos = positions(c, *mach, n, *count, *start)) == NULL)
        return net__fail(GKV_ENOMEM, "out of memory");
    return GKV_OK;
}

/* The parts pulling machine m's 'cnt' rows of tensor 'name' (row size
 * rb) onto pl: ids[0 .. cnt) into dst[0 .. cnt) when mpos is NULL, else
 * ids[mpos[j]] into dst + mpos[j] x rb; read here instead when the
 * machine's store is local. */
static gkv_err
pull_mach(gkv_client *c, struct plist *pl, const char *name, size_t m,
          const uint64_t *ids, const size_t *mpos, size_t cnt,
          unsigned char *dst, size_t rb)
{
    size_t per, k, pieces, base;
    gkv_err rc;

    /* a companion is read through the servers: one not created yet is
     * zeros there, not an error */
    if (c->mc[m].local != NULL && strchr(name, '#') == NULL) {
        if ((rc = local_pull(c, m, name, ids, mpos, cnt, dst, rb)) ==
            GKV_ESHAPE)
            c->schema_stale = 1;
        return rc;
    }
    per = net__part_cap(c, m, PULL_CAP) / (rb > 8 ? rb : 8);
    if (per == 0) {
        /* rows wider than the preferred message: one per message, as long
         * as the hard limit allows */
        if (rb > net__part_cap(c, m, UINT64_MAX))
            return net__fail(GKV_EINVAL, "tensor '%s': one row of %zu bytes "
                             "is more than a message may carry", name, rb);
        per = 1;
    }
    k = share(c, cnt);
    pieces = (cnt + per - 1) / per;
    if (pieces < k)
        pieces = k;
    base = c->rr++;
    for (size_t j = 0; j < pieces; j++) {
        size_t a = cnt * j / pieces, b = cnt * (j + 1) / pieces;
        struct rows_msg *q;

        if (a == b)
            continue;
        if ((q = plist_add(pl, &c->cn[m * c->nserv +
                                      (base + j) % c->nserv])) == NULL)
            return net__fail(GKV_ENOMEM, "out of memory");
        q->name = name;
        q->n = b - a;
        q->row_bytes = rb;
        if (mpos == NULL) {
            q->ids = ids + a;
            q->dst = dst + a * rb;
        } else {
            q->ids = ids;
            q->idx = mpos + a;
            q->dst = dst;
        }
    }
    return GKV_OK;
}

gkv_err
net__pull_locked(gkv_client *c, const char *name, const struct route *r,
                 const uint64_t *ids, size_t n, void *dst, size_t dst_len)
{
    struct plist pl = {0};
    unsigned *mach = NULL;
    size_t *count = NULL, *start = NULL, *pos = NULL, rb;
    uint64_t deadline = net__deadline((uint64_t)c->timeout_ms);
    gkv_err rc = GKV_OK;

    if (r == NULL && (rc = net__route_fresh(c, name, deadline, &r)) != GKV_OK)
        goto out;
    rb = (size_t)r->t.row_bytes;
    if (rb == 0 || n > SIZE_MAX / rb || dst_len != n * rb) {
        rc = net__fail(GKV_ESHAPE, "pull of %zu rows of tensor '%s' (%zu "
                       "bytes each) into %zu bytes", n, name, rb, dst_len);
        goto out;
    }
    if (n == 0)
        goto out;
    if ((rc = split_ids(c, r, ids, n, &mach, &count, &start, &pos)) != GKV_OK)
        goto out;
    for (size_t m = 0; m < c->nmach; m++)
        if (count[m] > 0 &&
            (rc = pull_mach(c, &pl, name, m, ids,
                            pos != NULL ? pos + start[m] : NULL, count[m],
                            dst, rb)) != GKV_OK)
            goto out;
    plist_link(&pl, &pull_ops);
    rc = net__exchange_reads(c, pl.p, pl.n, deadline);
    if (rc == GKV_ESHAPE)
        c->schema_stale = 1;
out:
    gkv__free(pl.p);
    gkv__free(pl.q);
    gkv__free(mach);
    gkv__free(count);
    gkv__free(start);
    gkv__free(pos);
    return rc;
}

/* ---- rows of several tensors at once (client_batch.c) ------------------- */

gkv_err
net__rowjob_route(gkv_client *c, struct rowjob *j)
{
    for (size_t i = 0; i < c->nrt; i++)
        if (strcmp(c->rt[i].name, j->name) == 0) {
            const struct route *r = &c->rt[i];

            if ((j->rt.sp = gkv__malloc(r->nsp * sizeof *r->sp + 1)) ==
                NULL)
                return net__fail(GKV_ENOMEM, "out of memory");
            memcpy(j->rt.sp, r->sp, r->nsp * sizeof *r->sp);
            j->rt.nsp = r->nsp;
            j->rt.t = r->t;
            snprintf(j->rt.name, sizeof j->rt.name, "%s", r->name);
            break;
        }
    return GKV_OK;
}

gkv_err
net__rowjob_split(gkv_client *c, struct rowjob *j)
{
    return split_ids(c, &j->rt, j->ids, j->n, &j->mach, &j->count,
                     &j->start, &j->pos);
}

/* Machine m's count of j's IDs; *pos: their positions in request order,
 * or NULL when they are all of them, in order. */
static size_t
rowjob_at(const struct rowjob *j, size_t m, const size_t **pos)
{
    *pos = j->pos != NULL ? j->pos + j->start[m] : NULL;
    return j->count != NULL ? j->count[m] : 0;
}

gkv_err
net__rowjob_pull(gkv_client *c, const struct rowjob *j, size_t nj,
                 uint64_t deadline)
{
    struct plist pl = {0};
    gkv_err rc = GKV_OK;

    for (size_t k = 0; k < nj && rc == GKV_OK; k++)
        for (size_t m = 0; m < c->nmach && rc == GKV_OK; m++) {
            const size_t *pos;
            size_t cnt = rowjob_at(&j[k], m, &pos);

            if (cnt > 0)
                rc = pull_mach(c, &pl, j[k].name, m, j[k].ids, pos, cnt,
                               j[k].dst, (size_t)j[k].rt.t.row_bytes);
        }
    if (rc == GKV_OK) {
        plist_link(&pl, &pull_ops);
        if ((rc = net__exchange_reads(c, pl.p, pl.n, deadline)) ==
            GKV_ESHAPE)
            c->schema_stale = 1;
    }
    gkv__free(pl.p);
    gkv__free(pl.q);
    return rc;
}

void
net__rowjob_free(struct rowjob *j)
{
    gkv__free(j->mach);
    gkv__free(j->count);
    gkv__free(j->start);
    gkv__free(j->pos);
    gkv__free(j->rt.sp);
    j->mach = NULL;
    j->count = j->start = j->pos = NULL;
    j->rt.sp = NULL;
}

gkv_err
gkv_client_pull(gkv_client *c, const char *name, const uint64_t *ids,
                size_t n, void *dst, size_t dst_len)
{
    gkv_err rc;

    net__clear();
    if (c == NULL || name == NULL || (n > 0 && (ids == NULL || dst == NULL)))
        return net__fail(GKV_EINVAL, "pull: missing argument");
    pthread_mutex_lock(&c->mu);
    rc = net__pull_locked(c, name, NULL, ids, n, dst, dst_len);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

/* Machine m's push positions mpos[0..cnt) (NULL: 0..cnt) in a stable
 * order by ID into out[0..cnt) (copies of one ID keep their request
 * order); tmp: cnt scratch slots. IDs lie in [lo, lo + len). An LSD radix
 * sort on id - lo, 11 bits a pass, skipped when already in order. */
static gkv_err
push_sort(const uint64_t *ids, const size_t *mpos, size_t cnt, uint64_t lo,
          uint64_t len, size_t *out, size_t *tmp)
{
    int bits = len > 1 ? 64 - __builtin_clzll(len - 1) : 1, sorted = 1;
    size_t *digit, *a = out, *b = tmp, *t;

    for (size_t j = 0; j < cnt; j++) {
        out[j] = mpos != NULL ? mpos[j] : j;
        if (j > 0 && ids[out[j]] < ids[out[j - 1]])
            sorted = 0;
    }
    if (sorted)
        return GKV_OK;
    if ((digit = gkv__malloc(2048 * sizeof *digit)) == NULL)
        return net__fail(GKV_ENOMEM, "out of memory");
    for (int sh = 0; sh < bits; sh += 11) {
        size_t sum = 0;

        memset(digit, 0, 2048 * sizeof *digit);
        for (size_t j = 0; j < cnt; j++)
            digit[((ids[a[j]] - lo) >> sh) & 2047]++;
        for (size_t d = 0; d < 2048; d++) {
            size_t k = digit[d];
            digit[d] = sum;
            sum += k;
        }
        for (size_t j = 0; j < cnt; j++)
            b[digit[((ids[a[j]] - lo) >> sh) & 2047]++] = a[j];
        t = a;
        a = b;
        b = t;
    }
    if (a != out)
        memcpy(out, a, cnt * sizeof *out);
    gkv__free(digit);
    return GKV_OK;
}

/* Adds a push part of n rows, ids[idx[j]] (idx NULL: ids[j]), to cn. */
static gkv_err
push_part(struct plist *pl, struct conn *cn, const uint64_t *ids,
          const void *rows, const size_t *idx, size_t n)
{
    struct rows_msg *q = plist_add(pl, cn);

    if (q == NULL)
        return net__fail(GKV_ENOMEM, "out of memory");
    q->ids = ids;
    q->rows = rows;
    q->idx = idx;
    q->n = n;
    return GKV_OK;
}

/* A push being cut into messages (gkv_client_push). */
struct push {
    const char *name;
    const uint64_t *ids;
    const void *rows;
    size_t n, rb;                  /* IDs; bytes a row */
    struct plist pl;
    size_t *bpos, *tmp;            /* n slots each when first needed: the
                                    * positions sorted by ID (the parts
                                    * point into it), and scratch */
};

/* The messages of the machine of span sp, which owns cnt of the IDs, at
 * positions mpos (NULL: all of them, in order); base: its first server in
 * round-robin order; at: where its positions go in bpos. */
static gkv_err
push_span(gkv_client *c, struct push *ps, const struct span *sp, size_t base,
          size_t cnt, const size_t *mpos, size_t at)
{
    size_t m = sp->m, rb = ps->rb;
    size_t limit = net__part_cap(c, m, UINT64_MAX), hard = limit / (rb + 8);
    size_t most = net__part_cap(c, m, PUSH_CAP) / (rb + 8);
    size_t k, pieces, goal, a = 0, q = 0, *mb;
    const uint64_t *ids = ps->ids;
    struct conn *mcn = &c->cn[m * c->nserv];   /* machine m's servers */
    gkv_err rc;

    /* rows per message: at most 'hard' (the server's and this client's
     * limit), and 'most' (PUSH_CAP too) unless one row passes that */
    if (hard == 0)
        return net__fail(GKV_EINVAL, "tensor '%s': one row of %zu bytes is "
                         "more than a message may carry", ps->name, rb);
    if (most == 0)
        most = hard;
    k = share(c, cnt);
    if (cnt <= most && k == 1)           /* one message, in request order */
        return push_part(&ps->pl, &mcn[base % c->nserv], ids, ps->rows,
                         mpos, cnt);
    /* Several messages: the machine's positions sorted by ID (stable)
     * and cut between two IDs, so every copy of an ID is in one message
     * and in request order: one server applies them in one transaction
     * and they combine as in gkv_tensor_push (the last assign wins,
     * adds sum, gradients average), and the messages hold disjoint IDs, so
     * the order servers and lanes apply them in changes nothing. A
     * piece closes once it holds the goal (an even share of the rows,
     * at most 'most'), or before an ID whose copies would take it
     * past 'most' (an ID with more copies than that, up to 'hard', is
     * a piece of its own). The parts point into bpos[at ..) until the
     * exchange ends. */
    if ((ps->bpos == NULL &&
         (ps->bpos = gkv__malloc(ps->n * sizeof *ps->bpos)) == NULL) ||
        (ps->tmp == NULL &&
         (ps->tmp = gkv__malloc(ps->n * sizeof *ps->tmp)) == NULL))
        return net__fail(GKV_ENOMEM, "out of memory");
    mb = ps->bpos + at;
    if ((rc = push_sort(ids, mpos, cnt, sp->lo, sp->hi - sp->lo, mb,
                        ps->tmp)) != GKV_OK)
        return rc;
    pieces = cnt / most + (cnt % most != 0);
    if (pieces < k)
        pieces = k;
    goal = cnt / pieces + (cnt % pieces != 0);
    for (size_t j = 0, e; j < cnt; j = e) {
        for (e = j + 1; e < cnt && ids[mb[e]] == ids[mb[j]]; e++)
            ;                            /* [j, e): the copies of one ID */
        if (e - j > hard)
            return net__fail(GKV_EINVAL, "push to tensor '%s': ID %llu "
                             "comes %zu times, %zu bytes, more than a "
                             "message to machine %zu may carry (%zu "
                             "bytes); the copies of an ID go in one message "
                             "(they combine in one transaction): push fewer "
                             "copies of it per call", ps->name,
                             (unsigned long long)ids[mb[j]], e - j,
                             (e - j) * (rb + 8), m, limit);
        if (j > a && e - a > most) {     /* they would pass the limit */
            if ((rc = push_part(&ps->pl, &mcn[(base + q++) % c->nserv], ids,
                                ps->rows, mb + a, j - a)) != GKV_OK)
                return rc;
            a = j;
        }
        if (e - a >= goal || e == cnt) {
            if ((rc = push_part(&ps->pl, &mcn[(base + q++) % c->nserv], ids,
                                ps->rows, mb + a, e - a)) != GKV_OK)
                return rc;
            a = e;
        }
    }
    return GKV_OK;
}

/* A push through add or an optimizer is refused before anything is sent
 * when it carries a NaN or an infinity (each server would refuse its
 * part, but the others would apply theirs): GKV_EINVAL, in the words of
 * gkv_tensor_push's refusal. */
static gkv_err
push_finite(const char *name, const char *handler, const struct route *r,
            const uint64_t *ids, size_t n, const void *rows)
{
    static const char *const checked[] = {"add", "sgd", "adagrad", "adam"};
    gkv_dtype dt = (gkv_dtype)r->t.dtype;
    size_t es = gkv_dtype_size(dt), re = es ? (size_t)r->t.row_bytes / es : 0, j;
    const char *what;

    for (size_t k = 0; re > 0 && k < sizeof checked / sizeof *checked; k++) {
        if (strcmp(handler, checked[k]) != 0)
            continue;
        if ((j = gkv_dtype_nonfinite(dt, rows, n * re, &what)) == SIZE_MAX)
            return GKV_OK;
        return net__fail(GKV_EINVAL, "tensor '%s': push '%s': row %llu col "
                         "%zu is %s: refused, nothing applied (not sent)",
                         name, handler, (unsigned long long)ids[j / re],
                         j % re, what);
    }
    return GKV_OK;
}

gkv_err
gkv_client_push(gkv_client *c, const char *name, const uint64_t *ids,
                size_t n, const void *rows, size_t rows_len,
                const gkv_push_args *args)
{
    const struct route *r;
    struct push ps = {0};
    unsigned *mach = NULL;
    size_t *count = NULL, *start = NULL, *pos = NULL, rb;
    const char *handler = args != NULL && args->handler != NULL ? args->handler : "";
    uint64_t deadline;
    gkv_err rc;

    net__clear();
    if (c == NULL || name == NULL || (n > 0 && (ids == NULL || rows == NULL)))
        return net__fail(GKV_EINVAL, "push: missing argument");
    if (strlen(handler) > 63)
        return net__fail(GKV_EHANDLER, "push: handler name '%.80s' is longer "
                         "than 63 bytes", handler);
    if (args != NULL && (args->flags & ~GKV_PUSH_DUPS_SUM) != 0)
        return net__fail(GKV_EINVAL, "push to tensor '%.64s': unknown push "
                         "flags 0x%x", name, args->flags & ~GKV_PUSH_DUPS_SUM);
    if (strchr(name, '#') != NULL && handler[0] != '\0' &&
        strcmp(handler, "assign") != 0)
        return net__fail(GKV_EINVAL, "optimizer state '%.64s': only assign "
                         "writes it (restoring saved state); push handler "
                         "'%s' is refused", name, handler);
    pthread_mutex_lock(&c->mu);
    deadline = net__deadline((uint64_t)c->timeout_ms);
    if ((rc = net__route_fresh(c, name, deadline, &r)) != GKV_OK)
        goto out;
    rb = (size_t)r->t.row_bytes;
    if (rb == 0 || n > SIZE_MAX / rb || rows_len != n * rb) {
        rc = net__fail(GKV_ESHAPE, "push of %zu rows to tensor '%s' (%zu "
                       "bytes each) from %zu bytes", n, name, rb, rows_len);
        goto out;
    }
    if (n == 0)
        goto out;
    if ((rc = push_finite(name, handler, r, ids, n, rows)) != GKV_OK)
        goto out;
    if ((rc = split_ids(c, r, ids, n, &mach, &count, &start, &pos)) != GKV_OK)
        goto out;
    ps.name = name;
    ps.ids = ids;
    ps.rows = rows;
    ps.n = n;
    ps.rb = rb;
    for (size_t si = 0; si < r->nsp; si++) {
        size_t m = r->sp[si].m, base = c->rr++;

        if (count[m] == 0)
            continue;
        if ((rc = push_span(c, &ps, &r->sp[si], base, count[m],
                            pos != NULL ? pos + start[m] : NULL,
                            start[m])) != GKV_OK)
            goto out;
    }
    for (size_t i = 0; i < ps.pl.n; i++) {
        struct rows_msg *q = &ps.pl.q[i];
        q->name = name;
        q->row_bytes = rb;
        q->handler = handler;
        q->args = args;
    }
    plist_link(&ps.pl, &push_ops);
    rc = net__exchange(c, ps.pl.p, ps.pl.n, deadline);
    if (rc == GKV_ESHAPE)
        c->schema_stale = 1;
out:
    gkv__free(ps.pl.p);
    gkv__free(ps.pl.q);
    gkv__free(mach);
    gkv__free(count);
    gkv__free(start);
    gkv__free(pos);
    gkv__free(ps.bpos);
    gkv__free(ps.tmp);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

/* ---- create, delete, opt_reset, describe -------------------------------- */

static void
penc_create(net_wr *w, const struct part *p)
{
    net__enc_create_req(w, p->arg);
}

static gkv_err
done_create(gkv_client *c, struct part *p, net_rd *rd)
{
    net_create_rep cr;

    (void)c;
    if (net__dec_create_rep(rd, &cr) != 0)
        return net__cfail(p->cn, GKV_EPROTO, "malformed create reply: %s",
                          rd->why);
    return GKV_OK;
}

/* CREATE and DELETE end in the same state however often they run, and
 * the client reads nothing from their replies that a second run changes
 * (created/existed are ignored): re-sent after a refused session. */
static const struct part_ops create_ops = {
    .type = NET_CREATE, .enc = penc_create, .done = done_create,
};

/* The partition-book type a tensor created with machine < 0 follows (DGL's
 * partition policy), in a graph job: the node type T of "node/T/..." or the
 * edge type E of "edge/E/...", else the only node type (then the only edge
 * type) whose count is the tensor's row count. *is_edge, *ty: the type; 0
 * when none (an even split), -1 with the error recorded when the name
 * names a type but the range is not that type's IDs. */
static int
create_policy(gkv_client *c, const char *name, const gkv_tensor_spec *sp,
              int *is_edge, int *ty)
{
    const gkv_pbook *b = c->book;
    const char *slash;
    int found = 0;

    if (b == NULL || c->single)
        return 0;
    for (int e = 0; e < 2; e++) {
        const char *pre = e ? "edge/" : "node/";
        char tn[GKV_NAME_MAX + 1];
        int64_t cnt;
        gkv_err frc;

        if (strncmp(name, pre, 5) != 0 ||
            (slash = strchr(name + 5, '/')) == NULL ||
            (size_t)(slash - name - 5) >= sizeof tn)
            continue;
        memcpy(tn, name + 5, (size_t)(slash - name - 5));
        tn[slash - name - 5] = '\0';
        /* a typo here would split the rows some other way, silently */
        if ((frc = e ? gkv_pbook_etype_find(b, tn, ty) :
                       gkv_pbook_ntype_find(b, tn, ty)) != GKV_OK) {
            net__fail(GKV_EINVAL, "create '%s': %s '%s' (a tensor named "
                      "%s<type>/... is split by that type's partition "
                      "book)", name, frc == GKV_EINVAL ? "the graph has "
                      "several edge types of relation" : e ? "the graph "
                      "has no edge type" : "the graph has no node type",
                      tn, pre);
            return -1;
        }
        if (e && strcmp(tn, gkv_pbook_etype_name(b, *ty)) != 0) {
            net__fail(GKV_EINVAL, "create '%s': name edge tensors by the "
                      "canonical type, 'edge/%s/%s' (sampling weights and "
                      "the partitioner's features are looked up so)", name,
                      gkv_pbook_etype_name(b, *ty), slash + 1);
            return -1;
        }
        cnt = e ? gkv_pbook_num_edges(b, *ty) : gkv_pbook_num_nodes(b, *ty);
        if (sp->lo != 0 || sp->hi != (uint64_t)cnt) {
            net__fail(GKV_EINVAL, "create '%s': rows [%llu, %llu), but %s "
                      "type '%s' has IDs [0, %lld) (a tensor named after a "
                      "type is split by the partition book; give its range, "
                      "or a machine)", name, (unsigned long long)sp->lo,
                      (unsigned long long)sp->hi, e ? "edge" : "node", tn,
                      (long long)cnt);
            return -1;
        }
        *is_edge = e;
        return 1;
    }
    if (sp->lo != 0)
        return 0;
    for (int e = 0; e < 2 && !found; e++) {
        int nt = e ? gkv_pbook_num_etypes(b) : gkv_pbook_num_ntypes(b);
        for (int t = 0; t < nt; t++)
            if ((uint64_t)(e ? gkv_pbook_num_edges(b, t) :
                               gkv_pbook_num_nodes(b, t)) == sp->hi) {
                if (found++ == 0) {
                    *is_edge = e;
                    *ty = t;
                }
            }
        if (found > 1)
            return 0;             /* two types of that count: ambiguous */
    }
    return found == 1;
}

gkv_err
gkv_client_create(gkv_client *c, const char *name, const gkv_tensor_spec *spec,
                  int machine)
{
    net_create_req *cq = NULL;
    struct part *parts = NULL;
    size_t np = 0;
    uint64_t deadline;
    int by_book = 0, is_edge = 0, ty = 0;
    gkv_err rc;

    net__clear();
    if (c == NULL || name == NULL || spec == NULL)
        return net__fail(GKV_EINVAL, "create: missing argument");
    if (strlen(name) == 0 || strlen(name) > GKV_NAME_MAX)
        return net__fail(GKV_EINVAL, "create: tensor name of %zu bytes",
                         strlen(name));
    if (spec->ndim > GKV_MAX_DIMS || spec->hi <= spec->lo ||
        gkv_dtype_size(spec->dtype) == 0 || spec->init > GKV_INIT_NORMAL)
        return net__fail(GKV_EINVAL, "create '%s': bad spec (dtype %d, ndim "
                         "%u, range [%llu, %llu))", name, (int)spec->dtype,
                         spec->ndim, (unsigned long long)spec->lo,
                         (unsigned long long)spec->hi);
    pthread_mutex_lock(&c->mu);
    if (machine >= 0 && (size_t)machine >= c->nmach) {
        rc = net__fail(GKV_EINVAL, "create '%s': machine %d, the job has %zu",
                       name, machine, c->nmach);
        goto out;
    }
    if (machine < 0 &&
        (by_book = create_policy(c, name, spec, &is_edge, &ty)) < 0) {
        rc = GKV_EINVAL;
        goto out;
    }
    deadline = net__deadline((uint64_t)c->timeout_ms);
    cq = gkv__calloc(c->nmach, sizeof *cq);
    parts = gkv__calloc(c->nmach, sizeof *parts);
    if (cq == NULL || parts == NULL) {
        rc = net__fail(GKV_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t m = 0; m < c->nmach; m++) {
        uint64_t len = spec->hi - spec->lo, a, b;
        net_create_req *q = &cq[np];

        if (machine >= 0 && (size_t)machine != m)
            continue;
        if (machine >= 0) {
            a = spec->lo;
            b = spec->hi;
        } else if (by_book) {
            /* machine m serves partition m: its rows of the type */
            int64_t lo, hi;
            if ((is_edge ? gkv_pbook_edge_range(c->book, ty, (int)m, &lo, &hi) :
                 gkv_pbook_node_range(c->book, ty, (int)m, &lo, &hi)) != GKV_OK) {
                rc = net__fail(GKV_EINVAL, "create '%s': the partition book "
                               "has no range for partition %zu", name, m);
                goto out;
            }
            a = (uint64_t)lo;
            b = (uint64_t)hi;
        } else {
            a = spec->lo + (uint64_t)((unsigned __int128)len * m / c->nmach);
            b = spec->lo + (uint64_t)((unsigned __int128)len * (m + 1) / c->nmach);
        }
        if (a == b)
            continue;
        snprintf(q->t.name, sizeof q->t.name, "%s", name);
        q->t.dtype = (uint8_t)spec->dtype;
        q->t.ndim = (uint8_t)spec->ndim;
        q->t.flags = (uint16_t)spec->flags;
        for (unsigned i = 0; i < spec->ndim; i++)
            q->t.shape[i] = spec->shape[i];
        q->t.lo = a;
        q->t.hi = b;
        q->t.chunk_rows = spec->chunk_rows;
        q->init = (uint8_t)spec->init;
        q->a = spec->a;
        q->b = spec->b;
        q->seed = spec->seed;
        parts[np].cn = net__mach_conn(c, m);
        parts[np].ops = &create_ops;
        parts[np].arg = q;
        np++;
    }
    rc = net__exchange(c, parts, np, deadline);
    if (rc == GKV_OK)
        rc = refresh(c, deadline);
    else
        net__route_drop(c);
out:
    gkv__free(cq);
    gkv__free(parts);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

/* The payload of DELETE (name) and OPT_RESET (name, optimizer). */
struct name_msg {
    const char *name;
    const char *opt;               /* OPT_RESET: NULL for both */
};

static void
penc_name(net_wr *w, const struct part *p)
{
    const struct name_msg *q = p->arg;

    net__wr_str(w, q->name);
}

static const struct part_ops delete_ops = {
    .type = NET_DELETE, .enc = penc_name, .done = net__done_u8,
};

gkv_err
gkv_client_delete(gkv_client *c, const char *name)
{
    struct name_msg q = {name, NULL};
    struct part *parts;
    uint64_t deadline;
    gkv_err rc;

    net__clear();
    if (c == NULL || name == NULL || name[0] == '\0' ||
        strlen(name) > GKV_NAME_MAX)
        return net__fail(GKV_EINVAL, "delete: missing or bad tensor name");
    pthread_mutex_lock(&c->mu);
    deadline = net__deadline((uint64_t)c->timeout_ms);
    if ((parts = gkv__calloc(c->nmach, sizeof *parts)) == NULL) {
        rc = net__fail(GKV_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t m = 0; m < c->nmach; m++) {
        parts[m].cn = net__mach_conn(c, m);
        parts[m].ops = &delete_ops;
        parts[m].arg = &q;
    }
    rc = net__exchange(c, parts, c->nmach, deadline);
    if (rc == GKV_OK)
        rc = refresh(c, deadline);
    else
        net__route_drop(c);
    gkv__free(parts);
out:
    pthread_mutex_unlock(&c->mu);
    return rc;
}

static void
penc_opt_reset(net_wr *w, const struct part *p)
{
    const struct name_msg *q = p->arg;

    net__wr_str(w, q->name);
    net__wr_str(w, q->opt != NULL ? q->opt : "");
}

/* Idempotent, as DELETE. */
static const struct part_ops opt_reset_ops = {
    .type = NET_OPT_RESET, .enc = penc_opt_reset, .done = net__done_u8,
};

gkv_err
gkv_client_opt_reset(gkv_client *c, const char *name, const char *optimizer)
{
    struct name_msg q = {name, optimizer};
    const struct route *r;
    struct part *parts = NULL;
    size_t np = 0;
    uint64_t deadline;
    gkv_err rc;

    net__clear();
    if (c == NULL || name == NULL || name[0] == '\0' ||
        strlen(name) > GKV_NAME_MAX)
        return net__fail(GKV_EINVAL, "opt_reset: missing or bad tensor name");
    if (strchr(name, '#') != NULL)
        return net__fail(GKV_EINVAL, "opt_reset: '%.64s' is optimizer state "
                         "(or has a '#'); name its tensor", name);
    if (optimizer != NULL && strcmp(optimizer, "adagrad") != 0 &&
        strcmp(optimizer, "adam") != 0)
        return net__fail(GKV_EINVAL, "opt_reset of tensor '%s': optimizer "
                         "'%.64s' has no state to reset (adagrad or adam; "
                         "NULL: both)", name, optimizer);
    pthread_mutex_lock(&c->mu);
    deadline = net__deadline((uint64_t)c->timeout_ms);
    if ((rc = net__route_fresh(c, name, deadline, &r)) != GKV_OK)
        goto out;
    if ((parts = gkv__calloc(r->nsp, sizeof *parts)) == NULL) {
        rc = net__fail(GKV_ENOMEM, "out of memory");
        goto out;
    }
    /* every machine that holds rows of the tensor, once */
    for (size_t i = 0; i < r->nsp; i++) {
        size_t j;

        for (j = 0; j < np; j++)
            if (parts[j].cn->machine == r->sp[i].m)
                break;
        if (j < np)
            continue;
        parts[np].cn = net__mach_conn(c, r->sp[i].m);
        parts[np].ops = &opt_reset_ops;
        parts[np].arg = &q;
        np++;
    }
    rc = net__exchange(c, parts, np, deadline);
out:
    gkv__free(parts);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

gkv_err
gkv_client_refresh(gkv_client *c)
{
    gkv_err rc;

    net__clear();
    if (c == NULL)
        return net__fail(GKV_EINVAL, "refresh: no client");
    pthread_mutex_lock(&c->mu);
    rc = refresh(c, net__deadline((uint64_t)c->timeout_ms));
    pthread_mutex_unlock(&c->mu);
    return rc;
}

static void
desc_of(const struct route *r, gkv_tensor_desc *d)
{
    size_t es = gkv_dtype_size((gkv_dtype)r->t.dtype);

    memset(d, 0, sizeof *d);
    snprintf(d->name, sizeof d->name, "%s", r->name);
    d->dtype = (gkv_dtype)r->t.dtype;
    d->ndim = r->t.ndim;
    for (unsigned i = 0; i < r->t.ndim; i++)
        d->shape[i] = r->t.shape[i];
    d->lo = r->sp[0].lo;
    d->hi = r->sp[r->nsp - 1].hi;
    d->row_bytes = (size_t)r->t.row_bytes;
    d->row_elems = es ? r->t.row_bytes / es : 0;
    d->chunk_rows = r->t.chunk_rows;
    d->flags = r->t.flags;
}

gkv_err
gkv_client_tensor_info(gkv_client *c, const char *name, gkv_tensor_desc *out)
{
    const struct route *r;
    gkv_err rc;

    net__clear();
    if (c == NULL || name == NULL || out == NULL)
        return net__fail(GKV_EINVAL, "tensor_info: missing argument");
    pthread_mutex_lock(&c->mu);
    rc = net__route_fresh(c, name, net__deadline((uint64_t)c->timeout_ms), &r);
    if (rc == GKV_OK)
        desc_of(r, out);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

static int
name_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

gkv_err
gkv_client_tensor_list(gkv_client *c, gkv_tensor_desc **out, size_t *n)
{
    const char **names = NULL;
    gkv_tensor_desc *d = NULL;
    size_t total = 0, k = 0;
    gkv_err rc = GKV_OK;

    net__clear();
    if (c == NULL || out == NULL || n == NULL)
        return net__fail(GKV_EINVAL, "tensor_list: missing argument");
    *out = NULL;
    *n = 0;
    pthread_mutex_lock(&c->mu);
    for (size_t m = 0; m < c->nmach; m++)
        total += c->mc[m].schema.n;
    if ((names = gkv__malloc((total + 1) * sizeof *names)) == NULL ||
        (d = gkv__malloc((total + 1) * sizeof *d)) == NULL) {
        rc = net__fail(GKV_ENOMEM, "out of memory");
        goto out;
    }
    total = 0;
    for (size_t m = 0; m < c->nmach; m++)
        for (uint32_t i = 0; i < c->mc[m].schema.n; i++)
            names[total++] = c->mc[m].schema.t[i].name;
    qsort(names, total, sizeof *names, name_cmp);
    for (size_t i = 0; i < total; i++) {
        const struct route *r;
        if (i > 0 && strcmp(names[i], names[i - 1]) == 0)
            continue;
        /* a partition's adjacency: positions local to it, not routable */
        if (c->book != NULL && (strncmp(names[i], "csc/", 4) == 0 ||
                                strncmp(names[i], "csr/", 4) == 0))
            continue;
        if ((rc = route_get(c, names[i], &r)) != GKV_OK)
            goto out;
        desc_of(r, &d[k++]);
    }
    *out = d;
    *n = k;
    d = NULL;
out:
    gkv__free(names);
    gkv__free(d);
    pthread_mutex_unlock(&c->mu);
    return rc;
}
