/* server_batch.c - SAMPLE_BATCH: a whole mini-batch sampled here
 * (gkv_client_sample_batch). The server samples every hop: the frontier
 * nodes its partition owns in process (graph__sample_hop, as SAMPLE
 * does), the others through its peer client (gkv_client_sample_neighbors
 * on just those seeds: their owners sample them), merged per edge type
 * back into the frontier's order and relabelled as gkv_sample_blocks()
 * does; then the rows of the input nodes, the seeds' labels and the
 * sampled edges, when the request lacks NET_BATCH_NO_ROWS
 * (GKV_BATCH_RELAY): its own from its store, the rest pulled through the
 * peer client, scattered into place in the reply. With NET_BATCH_NO_ROWS
 * (the client's default) the reply carries the blocks and each entry's
 * row size only, and the client pulls the rows from their owners.
 *
 * Threads. Batches run on the core's pool (SRV_POOL), never on a worker:
 * a batch waits on other servers, whose batches may be waiting on this
 * one, and the workers must stay free to answer their SAMPLE and PULL
 * requests. Pool thread i has the state th[i] alone: a sampler, the
 * relabelling markers, the peer client, an arena for the batch's arrays
 * and a side thread, which samples this partition's part of a hop and
 * reads the local rows while the pool thread waits on the peers (the
 * sampler is the side thread's then, the peer client the pool
 * thread's; the arena is used by the pool thread only).
 *
 * The peer client. Made on a thread's first batch from the server's own
 * ip_config and token, joined as an observer (GKV_CLIENT_OBSERVER: its
 * sessions never keep a server up nor stop one, and are not members) of
 * the group "gkv.peer" with a rank of this server's and thread's own, and
 * kept. Each of its calls gets the time left until the batch's deadline
 * (three quarters of the trainer's timeout, which the request carries),
 * so a peer that died fails the batch with GKV_ETIMEDOUT naming it before
 * the trainer's own call times out; the next batch hand-shakes with it
 * again (a restarted peer is picked up).
 */
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <nanomsg/nn.h>
#include <sodium.h>
#include "net/server_int.h"
#include "graph/graph_seam.h"   /* graph__sample_hop */

#define PEER_GROUP    "gkv.peer"  /* the peer clients' group */
#define PEER_RANKS    256u        /* ranks a server's peer clients take
                                   * (--batch-threads is at most 256) */
#define PEER_CLOSE_MS 500         /* a peer client's leave waits this long */
#define BATCH_MS      10000       /* a request's timeout when it says 0 */
#define ARENA_KEEP    (64u << 20) /* arena bytes a pool thread keeps after
                                   * a batch; more is given back */

/* A helper of a pool thread's (server_batch.c's side thread). */
struct side {
    pthread_t thr;
    pthread_mutex_t mu;
    pthread_cond_t cv;               /* a job was handed over, it is done,
                                      * or stop */
    void (*fn)(void *);
    void *arg;
    int busy, stop, up;
};

/* A pool thread's own. */
struct bthread {
    struct side side;             /* samples this partition's columns and
                                   * reads the local rows while the pool
                                   * thread waits on the peers */
    gkv_sampler *samp;            /* on the partition's sgraph, 1 thread */
    gkv_client *peer;             /* NULL until the first batch needs it */
    int32_t **mk;                 /* [nnt] local ID + 1, 0 = none; made on
                                   * the first batch, clear between calls */
    /* the batch's memory: chunks bumped from the front, emptied (and
     * merged into one of their total size) by the next batch, so a steady
     * stream of batches allocates nothing and touches no fresh pages */
    gkv__arena ar;
};

struct srv_batch {
    char *ipcfg;                  /* the ip_config's real path */
    char *token;                  /* NULL: the servers need none */
    unsigned nserv;
    uint32_t rank0;               /* this server's first peer rank */
    int part, nparts, nnt, net;
    int64_t *lo, *hi;             /* [nnt] node IDs the partition owns */
    struct bthread *th;           /* [s->pool.nthreads] */
};

/* ---- one batch ------------------------------------------------------------ */

struct batch {
    gkv_server *s;
    srv_req *r;
    struct srv_batch *sb;
    struct bthread *bt;
    net_batch_req q;
    int nl, nnt, net, nfan;
    int *fan;                     /* [nl * nfan] */
    const int64_t **seeds;        /* [nnt] aligned */
    size_t *ns;
    gkv_sample_opts o;
    uint64_t deadline;            /* monotonic ms */
    gkv_block *blk;               /* [nl] */
    size_t nrows;                 /* rows entries */
    uint64_t *rows_n, *row_bytes;
    unsigned char **slot;
};

static void
batch_free(struct batch *b)
{
    net__batch_req_free(&b->q);
}

/* After a batch: an arena grown past ARENA_KEEP by an outsized batch is
 * given back (a later one grows it again), so that a thread does not keep
 * the peak of every batch it ever served. */
static void
arena_trim(struct bthread *bt)
{
    if (gkv__arena_size(&bt->ar) > ARENA_KEEP)
        gkv__arena_free(&bt->ar);
}

/* 'bytes' of the thread's arena, 16-aligned, until the next batch; NULL:
 * out of memory (r failed). */
static void *
bmem(struct batch *b, size_t bytes)
{
    /* 16 bytes past every array, and chunks of 4 MiB at least */
    void *p = gkv__arena_alloc(&b->bt->ar, bytes + 16, 4u << 20);

    if (p == NULL)
        srv__fail(b->r, GKV_ENOMEM, "sample_batch: out of memory for %zu "
                  "bytes", bytes);
    return p;
}

/* ms left until the deadline (0 once past). */
static int
left_ms(const struct batch *b)
{
    uint64_t now = gkv__now_ms();

    if (now >= b->deadline)
        return 0;
    return b->deadline - now > INT_MAX ? INT_MAX : (int)(b->deadline - now);
}

/* Fails the batch with the peer client's error ('what' it was doing). */
static gkv_err
peer_fail(struct batch *b, gkv_err rc, const char *what)
{
    return srv__fail(b->r, rc, "sample_batch on partition %d: %s through "
                     "the peer servers: %s", b->sb->part, what,
                     gkv_net_errmsg());
}

/* The thread's peer client, made when missing, with the time left as its
 * timeout. GKV_OK, or r failed. */
static gkv_err
peer_get(struct batch *b)
{
    struct bthread *bt = b->bt;
    gkv_client_opts o = {0};
    int left = left_ms(b);
    gkv_err rc;

    if (atomic_load(&b->s->run.stop)) {     /* cut the batch short */
        b->r->rflags |= NET_F_STOPPING;
        return srv__fail(b->r, GKV_EINTR, "sample_batch on partition %d: "
                         "the server is stopping", b->sb->part);
    }
    if (left == 0)
        return srv__fail(b->r, GKV_ETIMEDOUT, "sample_batch on partition "
                         "%d: no time left for the peer servers (the "
                         "request's timeout is %u ms)", b->sb->part,
                         b->q.timeout_ms);
    if (bt->peer != NULL) {
        net__client_timeout(bt->peer, left);
        return GKV_OK;
    }
    o.timeout_ms = left;
    o.num_servers = b->sb->nserv;
    o.flags = GKV_CLIENT_OBSERVER;
    rc = gkv_client_connect(&bt->peer, b->sb->ipcfg, b->sb->token, PEER_GROUP,
                            b->sb->rank0 + b->r->pool, &o);
    if (rc != GKV_OK)
        return peer_fail(b, rc, "joining");
    return GKV_OK;
}

/* The thread's markers, made on its first batch. */
static gkv_err
markers_get(struct batch *b)
{
    struct bthread *bt = b->bt;

    if (bt->mk != NULL)
        return GKV_OK;
    if ((bt->mk = gkv__calloc((size_t)b->nnt, sizeof *bt->mk)) == NULL)
        return srv__fail(b->r, GKV_ENOMEM, "sample_batch: out of memory");
    for (int t = 0; t < b->nnt; t++) {
        int64_t n = gkv_pbook_num_nodes(b->s->graph.book, t);
        if ((bt->mk[t] = gkv__calloc((size_t)n + 1, sizeof **bt->mk)) == NULL) {
            for (int u = 0; u < t; u++)
                gkv__free(bt->mk[u]);
            gkv__free(bt->mk);
            bt->mk = NULL;
            return srv__fail(b->r, GKV_ENOMEM, "sample_batch: out of memory "
                             "for the relabelling markers (%lld nodes of "
                             "type %d)", (long long)n, t);
        }
    }
    return GKV_OK;
}

/* ---- checks ----------------------------------------------------------------- */

/* The request against the graph: types, direction, flags, fanouts. */
static gkv_err
batch_check(struct batch *b)
{
    const net_batch_req *q = &b->q;
    const gkv_pbook *bk = b->s->graph.book;
    srv_req *r = b->r;

    if (q->nnt != (uint32_t)b->nnt || q->net != (uint32_t)b->net)
        return srv__fail(r, GKV_EINVAL, "sample_batch: the request has %u "
                         "node types and %u edge types; the graph has %d and "
                         "%d", q->nnt, q->net, b->nnt, b->net);
    if (q->dir != GKV_DIR_IN && q->dir != GKV_DIR_OUT)
        return srv__fail(r, GKV_EINVAL, "sample_batch: direction %u is "
                         "neither in (0) nor out (1)", q->dir);
    if (q->flags & ~(GKV_SAMPLE_REPLACE | GKV_SAMPLE_WEIGHTED |
                     NET_BATCH_NO_ROWS))
        return srv__fail(r, GKV_EINVAL, "sample_batch: flags 0x%x have "
                         "unknown bits", q->flags);
    if (q->dir == GKV_DIR_OUT && !gkv_pbook_has_csr(bk))
        return srv__fail(r, GKV_ENOTSUP, "sample_batch: out-edge sampling "
                         "needs the CSR, and this graph was partitioned "
                         "without it (gkv-partition --csr)");
    if (q->nfan != 1 && q->nfan != (uint32_t)b->net)
        return srv__fail(r, GKV_EINVAL, "sample_batch: %u fanouts a layer; "
                         "give 1 (for every edge type) or one per edge type "
                         "(%d)", q->nfan, b->net);
    for (uint32_t k = 0; k < q->nfeats + q->has_label + q->nefeats; k++) {
        const net_tref *t = &q->tref[k];
        int edge = k >= q->nfeats + q->has_label;
        if (t->type >= (edge ? b->net : b->nnt))
            return srv__fail(r, GKV_EINVAL, "sample_batch: tensor '%s' is "
                             "given %s type %d, and the graph has %d",
                             t->name, edge ? "edge" : "node", t->type,
                             edge ? b->net : b->nnt);
    }
    return GKV_OK;
}

/* The fanouts and the seeds (aligned), each seed a node of its type and
 * distinct within it. */
static gkv_err
batch_inputs(struct batch *b)
{
    const net_batch_req *q = &b->q;
    size_t nf = (size_t)b->nl * (size_t)b->nfan;

    if ((b->fan = bmem(b, nf * sizeof *b->fan)) == NULL ||
        (b->seeds = bmem(b, (size_t)b->nnt * sizeof *b->seeds)) == NULL ||
        (b->ns = bmem(b, (size_t)b->nnt * sizeof *b->ns)) == NULL)
        return b->r->status;
    for (size_t i = 0; i < nf; i++) {
        int32_t v;
        memcpy(&v, q->fanout + 4 * i, 4);
        if (v < -1)
            return srv__fail(b->r, GKV_EINVAL, "sample_batch: fanouts[%zu] "
                             "= %d: a fanout is -1 (all) or >= 0", i, v);
        b->fan[i] = v;
    }
    if (markers_get(b) != GKV_OK)
        return b->r->status;
    for (int t = 0; t < b->nnt; t++) {
        int64_t nn = gkv_pbook_num_nodes(b->s->graph.book, t), *sv;
        int32_t *mk = b->bt->mk[t];
        size_t n = (size_t)q->nseeds[t], i;
        gkv_err rc = GKV_OK;

        if ((sv = bmem(b, n * 8)) == NULL)
            return b->r->status;
        if (n > 0)
            memcpy(sv, q->seeds[t], n * 8);
        b->seeds[t] = sv;
        b->ns[t] = n;
        for (i = 0; i < n && rc == GKV_OK; i++) {
            if (sv[i] < 0 || sv[i] >= nn) {
                rc = srv__fail(b->r, GKV_ERANGE, "sample_batch: seeds[%d]"
                               "[%zu] = %lld is not a node of type %d '%s' "
                               "(%lld nodes)", t, i, (long long)sv[i], t,
                               gkv_pbook_ntype_name(b->s->graph.book, t),
                               (long long)nn);
                break;
            }
            if (mk[sv[i]] != 0) {
                rc = srv__fail(b->r, GKV_EINVAL, "sample_batch: seeds[%d]"
                               "[%zu] = %lld is given twice (first at index "
                               "%d)", t, i, (long long)sv[i], mk[sv[i]] - 1);
                break;
            }
            mk[sv[i]] = (int32_t)i + 1;
        }
        while (i-- > 0)
            mk[sv[i]] = 0;
        if (rc != GKV_OK)
            return rc;
    }
    return GKV_OK;
}

static const char *const tref_what[3] = {"feature", "label", "edge feature"};

/* Tensor k of the request exists and its rows cover its type (as the job
 * sees it: through the peer client when the graph has other partitions);
 * its row size into b->row_bytes of its entries. */
static gkv_err
tensor_check(struct batch *b, uint32_t k)
{
    const net_batch_req *q = &b->q;
    const net_tref *t = &q->tref[k];
    const gkv_pbook *bk = b->s->graph.book;
    int kind = k < q->nfeats ? 0 : k < q->nfeats + q->has_label ? 1 : 2;
    int64_t count = kind == 2 ? gkv_pbook_num_edges(bk, t->type) :
                                gkv_pbook_num_nodes(bk, t->type);
    const char *tn = kind == 2 ? gkv_pbook_etype_name(bk, t->type) :
                                 gkv_pbook_ntype_name(bk, t->type);
    gkv_tensor_desc d;
    gkv_err rc;

    if (b->sb->nparts > 1) {
        if ((rc = peer_get(b)) != GKV_OK)
            return rc;
        rc = gkv_client_tensor_info(b->bt->peer, t->name, &d);
        if (rc != GKV_OK && rc != GKV_ENOTFOUND)
            return peer_fail(b, rc, "describing the tensors");
    } else {
        rc = gkv_tensor_info(b->s->store, NULL, t->name, &d);
    }
    if (rc == GKV_ENOTFOUND)
        return srv__fail(b->r, GKV_ENOTFOUND, "sample_batch: %s tensor '%s' "
                         "(of %s type '%s'): no server holds a tensor of "
                         "that name", tref_what[kind], t->name,
                         kind == 2 ? "edge" : "node", tn);
    if (rc != GKV_OK)
        return srv__fail(b->r, rc, "sample_batch: %s tensor '%s': %s",
                         tref_what[kind], t->name,
                         gkv_store_errmsg(b->s->store));
    if (d.lo > 0 || d.hi < (uint64_t)count)
        return srv__fail(b->r, GKV_EINVAL, "sample_batch: %s tensor '%s' "
                         "holds the rows [%llu, %llu), and %s type '%s' has "
                         "%lld: its rows must cover every ID of the type",
                         tref_what[kind], t->name, (unsigned long long)d.lo,
                         (unsigned long long)d.hi, kind == 2 ? "edge" :
                         "node", tn, (long long)count);
    if (kind < 2) {
        b->row_bytes[k] = d.row_bytes;
    } else {
        uint32_t f = k - q->nfeats - q->has_label;
        for (int i = 0; i < b->nl; i++)
            b->row_bytes[k + f * (uint32_t)(b->nl - 1) + (uint32_t)i] =
                d.row_bytes;
    }
    return GKV_OK;
}

/* ---- the side thread ------------------------------------------------------ */

/* Runs one job at a time for its pool thread (this partition's part of a
 * hop, the local rows), started on the first batch that has one. */
static void *
side_main(void *arg)
{
    struct side *sd = arg;

    pthread_mutex_lock(&sd->mu);
    for (;;) {
        while (!sd->busy && !sd->stop)
            pthread_cond_wait(&sd->cv, &sd->mu);
        if (!sd->busy)
            break;
        pthread_mutex_unlock(&sd->mu);
        sd->fn(sd->arg);
        pthread_mutex_lock(&sd->mu);
        sd->busy = 0;
        pthread_cond_broadcast(&sd->cv);
    }
    pthread_mutex_unlock(&sd->mu);
    return NULL;
}

/* Hands fn(arg) to the side thread: 1, and side_wait() must follow; 0
 * when the thread cannot be started (the caller runs fn itself). */
static int
side_start(struct side *sd, void (*fn)(void *), void *arg)
{
    if (!sd->up) {
        pthread_mutex_init(&sd->mu, NULL);
        pthread_cond_init(&sd->cv, NULL);
        sd->busy = sd->stop = 0;
        if (pthread_create(&sd->thr, NULL, side_main, sd) != 0) {
            pthread_mutex_destroy(&sd->mu);
            pthread_cond_destroy(&sd->cv);
            return 0;
        }
        sd->up = 1;
    }
    pthread_mutex_lock(&sd->mu);
    sd->fn = fn;
    sd->arg = arg;
    sd->busy = 1;
    pthread_cond_broadcast(&sd->cv);
    pthread_mutex_unlock(&sd->mu);
    return 1;
}

static void
side_wait(struct side *sd)
{
    pthread_mutex_lock(&sd->mu);
    while (sd->busy)
        pthread_cond_wait(&sd->cv, &sd->mu);
    pthread_mutex_unlock(&sd->mu);
}

static void
side_stop(struct side *sd)
{
    if (!sd->up)
        return;
    pthread_mutex_lock(&sd->mu);
    sd->stop = 1;
    pthread_cond_broadcast(&sd->cv);
    pthread_mutex_unlock(&sd->mu);
    pthread_join(sd->thr, NULL);
    pthread_mutex_destroy(&sd->mu);
    pthread_cond_destroy(&sd->cv);
    sd->up = 0;
}

/* ---- the hops ------------------------------------------------------------------ */

/* The hop's columns this partition owns, sampled in process (on the
 * side thread while the peers sample theirs). */
struct own_job {
    gkv_sampler *samp;
    const int64_t *const *seeds;
    const size_t *ns;
    const int *fan;
    int nfan, layer;
    const gkv_sample_opts *o;
    int64_t *const *cnt;
    gkv_sample_edges *out;
    gkv_err rc;
    char err[NET_ERRMSG_MAX];
};

static void
own_hop(void *arg)
{
    struct own_job *oj = arg;

    oj->rc = graph__sample_hop(oj->samp, oj->seeds, oj->ns, oj->fan,
                               oj->nfan, oj->layer, oj->o, NULL, oj->cnt,
                               oj->out);
    if (oj->rc != GKV_OK)
        snprintf(oj->err, sizeof oj->err, "%s", gkv_sampler_errmsg(oj->samp));
}

/* One hop (RNG layer hi) from the destination nodes dst[t][0 .. ndst[t])
 * (distinct per type) into block *blk: the nodes this partition owns
 * sampled here, the others by their owners through the peer client, the
 * picks merged seed by seed in dst's order and relabelled as
 * gkv_sample_blocks() does. */
static gkv_err
hop(struct batch *b, int hi, const int64_t *const *dst, const size_t *ndst,
    gkv_block *blk)
{
    struct srv_batch *sb = b->sb;
    const gkv_pbook *bk = b->s->graph.book;
    int nnt = b->nnt, net_ = b->net, bi = b->nl - 1 - hi;
    const int *fan = b->fan + (size_t)bi * (size_t)b->nfan;
    int32_t **mk = b->bt->mk;
    int64_t **own, **oth, **cnt, **ids;
    size_t *nown, *noth, *nsrc, anyoth = 0;
    uint8_t **isown;
    gkv_sample_edges *oe, *pe, *be;
    gkv_block_nodes *bn;
    struct own_job oj;
    gkv_err rc = GKV_OK;
    int side;

    own = bmem(b, (size_t)nnt * sizeof *own);
    oth = bmem(b, (size_t)nnt * sizeof *oth);
    ids = bmem(b, (size_t)nnt * sizeof *ids);
    isown = bmem(b, (size_t)nnt * sizeof *isown);
    nown = bmem(b, (size_t)nnt * sizeof *nown);
    noth = bmem(b, (size_t)nnt * sizeof *noth);
    nsrc = bmem(b, (size_t)nnt * sizeof *nsrc);
    cnt = bmem(b, (size_t)net_ * sizeof *cnt);
    oe = bmem(b, (size_t)net_ * sizeof *oe);
    pe = bmem(b, (size_t)net_ * sizeof *pe);
    be = bmem(b, (size_t)net_ * sizeof *be);
    bn = bmem(b, (size_t)nnt * sizeof *bn);
    if (bn == NULL || be == NULL || pe == NULL || oe == NULL || cnt == NULL ||
        nsrc == NULL || noth == NULL || nown == NULL || isown == NULL ||
        ids == NULL || oth == NULL || own == NULL)
        return b->r->status;
    /* the frontier by owner */
    for (int t = 0; t < nnt; t++) {
        if ((own[t] = bmem(b, ndst[t] * 8)) == NULL ||
            (oth[t] = bmem(b, ndst[t] * 8)) == NULL ||
            (isown[t] = bmem(b, ndst[t])) == NULL)
            return b->r->status;
        nown[t] = noth[t] = 0;
        for (size_t i = 0; i < ndst[t]; i++) {
            int64_t v = dst[t][i];
            isown[t][i] = v >= sb->lo[t] && v < sb->hi[t];
            if (isown[t][i])
                own[t][nown[t]++] = v;
            else
                oth[t][noth[t]++] = v;
        }
        anyoth += noth[t];
    }
    for (int e = 0; e < net_; e++) {
        gkv_etype_info ei;
        gkv_pbook_etype_info(bk, e, &ei);
        if ((cnt[e] = bmem(b, nown[b->o.dir == GKV_DIR_IN ? ei.dst_ntype :
                                    ei.src_ntype] * 8)) == NULL)
            return b->r->status;
    }
    /* the owners' picks: this partition's on the side thread while the
     * peers sample theirs */
    memset(pe, 0, (size_t)net_ * sizeof *pe);
    memset(&oj, 0, sizeof oj);
    oj.samp = b->bt->samp;
    oj.seeds = (const int64_t *const *)own;
    oj.ns = nown;
    oj.fan = fan;
    oj.nfan = b->nfan;
    oj.layer = hi;
    oj.o = &b->o;
    oj.cnt = cnt;
    oj.out = oe;
    if (!(side = anyoth > 0 && side_start(&b->bt->side, own_hop, &oj)))
        own_hop(&oj);
    if (anyoth > 0 && (rc = peer_get(b)) == GKV_OK &&
        (rc = gkv_client_sample_neighbors(b->bt->peer,
                                          (const int64_t *const *)oth, noth,
                                          fan, b->nfan, hi, &b->o,
                                          pe)) != GKV_OK) {
        char what[64];
        snprintf(what, sizeof what, "sampling hop %d", hi);
        peer_fail(b, rc, what);
    }
    if (side)
        side_wait(&b->bt->side);
    if (rc != GKV_OK)
        return rc;
    if (oj.rc != GKV_OK)
        return srv__fail(b->r, oj.rc, "sample_batch on partition %d: %s",
                         sb->part, oj.err);
    /* the block's node lists: room for every neighbour, the destination
     * nodes first, marked */
    for (int t = 0; t < nnt; t++) {
        size_t room = ndst[t];
        for (int e = 0; e < net_; e++) {
            gkv_etype_info ei;
            gkv_pbook_etype_info(bk, e, &ei);
            if ((b->o.dir == GKV_DIR_IN ? ei.src_ntype : ei.dst_ntype) == t)
                room += oe[e].n + pe[e].n;
        }
        if (room > INT32_MAX - 1)
            return srv__fail(b->r, GKV_EINVAL, "sample_batch: %zu nodes of "
                             "type %d in one block: too many", room, t);
        if ((ids[t] = bmem(b, room * 8)) == NULL)
            return b->r->status;
    }
    for (int t = 0; t < nnt; t++) {
        for (size_t i = 0; i < ndst[t]; i++) {
            mk[t][dst[t][i]] = (int32_t)i + 1;
            ids[t][i] = dst[t][i];
        }
        nsrc[t] = ndst[t];
    }
    for (int e = 0; e < net_ && rc == GKV_OK; e++) {
        gkv_etype_info ei;
        int ct, nt;
        size_t total = oe[e].n + pe[e].n, io = 0, ko = 0, po = 0, j = 0;
        const int64_t *octr, *onbr, *pctr, *pnbr;
        int64_t *a, nn;

        gkv_pbook_etype_info(bk, e, &ei);
        ct = b->o.dir == GKV_DIR_IN ? ei.dst_ntype : ei.src_ntype;
        nt = b->o.dir == GKV_DIR_IN ? ei.src_ntype : ei.dst_ntype;
        nn = gkv_pbook_num_nodes(bk, nt);
        octr = b->o.dir == GKV_DIR_IN ? oe[e].dst : oe[e].src;
        onbr = b->o.dir == GKV_DIR_IN ? oe[e].src : oe[e].dst;
        pctr = b->o.dir == GKV_DIR_IN ? pe[e].dst : pe[e].src;
        pnbr = b->o.dir == GKV_DIR_IN ? pe[e].src : pe[e].dst;
        if ((a = bmem(b, 3 * total * 8)) == NULL) {
            rc = b->r->status;
            break;
        }
        for (size_t i = 0; i < ndst[ct] && rc == GKV_OK; i++) {
            const int64_t *nb, *ed;
            size_t k = 0;

            if (isown[ct][i]) {
                k = (size_t)cnt[e][ko++];
                if (k > oe[e].n - io || (k > 0 && octr[io] != dst[ct][i])) {
                    rc = srv__fail(b->r, GKV_EIO, "sample_batch on "
                                   "partition %d: the sampler's edges of "
                                   "edge type %d do not follow the seeds",
                                   sb->part, e);
                    break;
                }
                nb = onbr + io;
                ed = oe[e].eid + io;
                io += k;
            } else {
                /* the peers' edges come seed by seed: a seed's are the run
                 * of edges centred on it (the frontier is distinct) */
                while (po + k < pe[e].n && pctr[po + k] == dst[ct][i])
                    k++;
                nb = pnbr + po;
                ed = pe[e].eid + po;
                po += k;
            }
            for (size_t q = 0; q < k; q++, j++) {
                int64_t v = nb[q];
                int32_t l;

                if (v < 0 || v >= nn) {
                    rc = srv__fail(b->r, GKV_EPROTO, "sample_batch: a peer "
                                   "sent neighbour %lld for edge type %d, "
                                   "and node type %d has %lld nodes",
                                   (long long)v, e, nt, (long long)nn);
                    break;
                }
                if ((l = mk[nt][v]) == 0) {
                    ids[nt][nsrc[nt]] = v;
                    l = (int32_t)++nsrc[nt];
                    mk[nt][v] = l;
                }
                a[j] = l - 1;
                a[total + j] = (int64_t)i;
                a[2 * total + j] = ed[q];
            }
        }
        if (rc == GKV_OK && (io != oe[e].n || po != pe[e].n))
            rc = srv__fail(b->r, GKV_EPROTO, "sample_batch on partition %d: "
                           "%zu of %zu edges of edge type %d do not follow "
                           "the seeds", sb->part, (oe[e].n - io) +
                           (pe[e].n - po), total, e);
        be[e].src = a;
        be[e].dst = a + total;
        be[e].eid = a + 2 * total;
        be[e].n = total;
    }
    /* every marker set is on a node list */
    for (int t = 0; t < nnt; t++)
        for (size_t i = 0; i < nsrc[t]; i++)
            mk[t][ids[t][i]] = 0;
    if (rc != GKV_OK)
        return rc;
    for (int t = 0; t < nnt; t++) {
        bn[t].ids = ids[t];
        bn[t].num_src = nsrc[t];
        bn[t].num_dst = ndst[t];
    }
    blk->num_ntypes = nnt;
    blk->num_etypes = net_;
    blk->nodes = bn;
    blk->edges = be;
    return GKV_OK;
}

/* The most reply bytes a batch may take: what the client takes (its
 * max_msg), and what this server sends; *who names the smaller. */
static uint64_t
reply_max(const struct batch *b, const char **who)
{
    int cl = b->q.max_reply <= b->s->io.max_msg;

    *who = cl ? "the client takes in a reply" : "this server sends in a "
                                                "reply";
    return cl ? b->q.max_reply : b->s->io.max_msg;
}

/* Fails the batch when its blocks so far take more than a reply may hold
 * (counted at their narrowest: 4 bytes an ID), before the next hop grows
 * them further. */
static gkv_err
blocks_fit(struct batch *b, int upto)
{
    uint64_t bytes = 0, max;
    const char *who;

    for (int i = b->nl - 1; i >= b->nl - 1 - upto; i--) {
        const gkv_block *blk = &b->blk[i];
        for (int t = 0; t < b->nnt; t++)
            bytes += 20 + 4 * (uint64_t)blk->nodes[t].num_src;
        for (int e = 0; e < b->net; e++)
            bytes += 12 + 12 * (uint64_t)blk->edges[e].n;
    }
    if (bytes > (max = reply_max(b, &who)))
        return srv__fail(b->r, GKV_EINVAL, "sample_batch: the blocks of "
                         "hops 0..%d take %llu bytes at least, more than %s "
                         "(%llu, its max_msg): use fewer seeds, smaller "
                         "fanouts or fewer layers", upto,
                         (unsigned long long)bytes, who,
                         (unsigned long long)max);
    return GKV_OK;
}

/* The blocks, block nl - 1 (the seeds') first. */
static gkv_err
batch_blocks(struct batch *b)
{
    const int64_t **dst;
    size_t *ndst;
    gkv_err rc;

    if ((b->blk = bmem(b, (size_t)b->nl * sizeof *b->blk)) == NULL ||
        (dst = bmem(b, (size_t)b->nnt * sizeof *dst)) == NULL ||
        (ndst = bmem(b, (size_t)b->nnt * sizeof *ndst)) == NULL)
        return b->r->status;
    for (int t = 0; t < b->nnt; t++) {
        dst[t] = b->seeds[t];
        ndst[t] = b->ns[t];
    }
    for (int hi = 0; hi < b->nl; hi++) {
        gkv_block *blk = &b->blk[b->nl - 1 - hi];

        if ((rc = hop(b, hi, dst, ndst, blk)) != GKV_OK ||
            (rc = blocks_fit(b, hi)) != GKV_OK)
            return rc;
        for (int t = 0; t < b->nnt; t++) {
            dst[t] = blk->nodes[t].ids;
            ndst[t] = blk->nodes[t].num_src;
        }
    }
    return GKV_OK;
}

/* ---- the rows ------------------------------------------------------------------ */

/* Entry k's IDs: blocks[0]'s source nodes of a feature's type, the seeds
 * of the label's, or layer i's edges of an edge feature's. */
static void
entry_ids(const struct batch *b, uint32_t k, const int64_t **ids, size_t *n)
{
    const net_batch_req *q = &b->q;

    if (k < q->nfeats) {
        const gkv_block_nodes *x = &b->blk[0].nodes[q->tref[k].type];
        *ids = x->ids;
        *n = x->num_src;
    } else if (k < q->nfeats + q->has_label) {
        *ids = b->seeds[q->tref[k].type];
        *n = b->ns[q->tref[k].type];
    } else {
        uint32_t x = k - q->nfeats - q->has_label;
        uint32_t f = x / (uint32_t)b->nl, i = x % (uint32_t)b->nl;
        const gkv_sample_edges *e =
            &b->blk[i].edges[q->tref[q->nfeats + q->has_label + f].type];
        *ids = e->eid;
        *n = e->n;
    }
}

/* Entry k's tensor: its index in q->tref. */
static uint32_t
entry_tref(const struct batch *b, uint32_t k)
{
    const net_batch_req *q = &b->q;
    uint32_t nh = q->nfeats + q->has_label;

    return k < nh ? k : nh + (k - nh) / (uint32_t)b->nl;
}

/* One entry's rows on their way into its slot, split by where they are
 * read: those in this store's range of the tensor here, the others from
 * their servers through the peer client. */
struct entry {
    const char *name;
    size_t rb, nl, nr;                /* row bytes; local and remote rows */
    uint64_t *lid, *rid;              /* their IDs */
    size_t *lpos, *rpos;              /* and their places in the slot */
    unsigned char *ltmp, *rtmp, *slot;
};

/* Entry k of the reply split (arena memory). GKV_OK, or r failed. */
static gkv_err
entry_split(struct batch *b, uint32_t k, const char *name, struct entry *x)
{
    const int64_t *ids;
    gkv_tensor_desc d;
    size_t n;
    gkv_err rc;

    memset(x, 0, sizeof *x);
    x->name = name;
    x->rb = (size_t)b->row_bytes[k];
    x->slot = b->slot[k];
    entry_ids(b, k, &ids, &n);
    if (n == 0 || x->rb == 0)
        return GKV_OK;
    rc = gkv_tensor_info(b->s->store, NULL, name, &d);
    if (rc != GKV_OK && rc != GKV_ENOTFOUND)
        return srv__fail(b->r, rc, "sample_batch: tensor '%s': %s", name,
                         gkv_store_errmsg(b->s->store));
    if (rc == GKV_OK && d.row_bytes != x->rb)
        return srv__fail(b->r, GKV_ESHAPE, "sample_batch: tensor '%s' has "
                         "rows of %zu bytes here and of %zu on other "
                         "servers", name, d.row_bytes, x->rb);
    if ((x->lid = bmem(b, n * 8)) == NULL || (x->rid = bmem(b, n * 8)) == NULL ||
        (x->lpos = bmem(b, n * sizeof *x->lpos)) == NULL ||
        (x->rpos = bmem(b, n * sizeof *x->rpos)) == NULL)
        return b->r->status;
    for (size_t i = 0; i < n; i++) {
        uint64_t v = (uint64_t)ids[i];
        if (rc == GKV_OK && v >= d.lo && v < d.hi) {
            x->lid[x->nl] = v;
            x->lpos[x->nl++] = i;
        } else {
            x->rid[x->nr] = v;
            x->rpos[x->nr++] = i;
        }
    }
    /* local rows go straight into the slot when they are all of it */
    if ((x->nr > 0 && x->nl > 0 &&
         (x->ltmp = bmem(b, x->nl * x->rb)) == NULL) ||
        (x->nr > 0 && (x->rtmp = bmem(b, x->nr * x->rb)) == NULL))
        return b->r->status;
    return GKV_OK;
}

/* The local rows of every entry: the side thread's job, while the pool
 * thread pulls the others from the peers. */
struct local_job {
    gkv_store *st;
    struct entry *e;
    uint32_t n;
    gkv_err rc;
    char err[NET_ERRMSG_MAX];
};

static void
local_rows(void *arg)
{
    struct local_job *lj = arg;

    lj->rc = GKV_OK;
    for (uint32_t k = 0; k < lj->n; k++) {
        struct entry *x = &lj->e[k];

        if (x->nl == 0)
            continue;
        if ((lj->rc = gkv_tensor_pull(lj->st, NULL, x->name, x->lid, x->nl,
                                      x->nr == 0 ? x->slot : x->ltmp,
                                      x->nl * x->rb)) != GKV_OK) {
            snprintf(lj->err, sizeof lj->err, "sample_batch: %s",
                     gkv_store_errmsg(lj->st));
            return;
        }
        for (size_t i = 0; x->nr > 0 && i < x->nl; i++)
            memcpy(x->slot + x->lpos[i] * x->rb, x->ltmp + i * x->rb, x->rb);
    }
}

/* Entry x's remote rows, pulled through the peer client and scattered
 * into place. GKV_OK, or r failed. */
static gkv_err
remote_rows(struct batch *b, struct entry *x)
{
    char what[GKV_NAME_MAX + 32];
    gkv_err rc;

    if (x->nr == 0)
        return GKV_OK;
    if ((rc = peer_get(b)) != GKV_OK)
        return rc;
    if ((rc = gkv_client_pull(b->bt->peer, x->name, x->rid, x->nr, x->rtmp,
                              x->nr * x->rb)) != GKV_OK) {
        snprintf(what, sizeof what, "pulling rows of '%s'", x->name);
        return peer_fail(b, rc, what);
    }
    for (size_t i = 0; i < x->nr; i++)
        memcpy(x->slot + x->rpos[i] * x->rb, x->rtmp + i * x->rb, x->rb);
    return GKV_OK;
}

/* The reply: the blocks, then room for every entry's rows (none with
 * NET_BATCH_NO_ROWS), bounded by what the client takes; then the rows
 * gathered into it. */
static gkv_err
batch_reply(struct batch *b)
{
    const net_batch_req *q = &b->q;
    int norows = (q->flags & NET_BATCH_NO_ROWS) != 0;
    struct local_job lj;
    struct entry *ent;
    net_batch_renc re;
    net_wr w = {0};
    gkv_err rc = GKV_OK;
    uint64_t max;
    const char *who;
    int side;

    for (uint32_t k = 0; k < b->nrows; k++) {
        const int64_t *ids;
        size_t n;
        entry_ids(b, k, &ids, &n);
        b->rows_n[k] = norows ? 0 : n;
    }
    memset(&re, 0, sizeof re);
    re.nlayers = (uint32_t)b->nl;
    re.nnt = (uint32_t)b->nnt;
    re.net = (uint32_t)b->net;
    re.blocks = b->blk;
    re.nfeats = q->nfeats;
    re.has_label = q->has_label;
    re.nefeats = q->nefeats;
    re.rows_n = b->rows_n;
    re.row_bytes = b->row_bytes;
    re.slot = b->slot;
    net__enc_batch_rep(&w, &re);
    if (w.off > (max = reply_max(b, &who)))
        return srv__fail(b->r, GKV_EINVAL, "sample_batch: the batch takes "
                         "%zu bytes, more than %s (%llu, its max_msg): use "
                         "fewer seeds, smaller fanouts or fewer tensors",
                         w.off, who, (unsigned long long)max);
    if ((b->r->out = srv__reply_alloc(b->r, w.off)) == NULL)
        return b->r->status;    /* GKV_EBUSY: the client tries again */
    b->r->out_len = w.off;
    w.p = (unsigned char *)b->r->out + NET_HDR_LEN;
    w.cap = w.off;
    w.off = 0;
    net__enc_batch_rep(&w, &re);
    if (norows)
        return GKV_OK;
    if ((ent = bmem(b, b->nrows * sizeof *ent)) == NULL)
        return b->r->status;
    for (uint32_t k = 0; k < b->nrows; k++)
        if ((rc = entry_split(b, k, q->tref[entry_tref(b, k)].name,
                              &ent[k])) != GKV_OK)
            return rc;          /* the core frees r->out */
    /* the local rows on the side thread while the peers send theirs */
    memset(&lj, 0, sizeof lj);
    lj.st = b->s->store;
    lj.e = ent;
    lj.n = b->nrows;
    if (!(side = side_start(&b->bt->side, local_rows, &lj)))
        local_rows(&lj);
    for (uint32_t k = 0; k < b->nrows && rc == GKV_OK; k++)
        rc = remote_rows(b, &ent[k]);
    if (side)
        side_wait(&b->bt->side);
    if (rc == GKV_OK && lj.rc != GKV_OK)
        rc = srv__fail(b->r, lj.rc, "%s", lj.err);
    return rc;
}

/* SAMPLE_BATCH: a whole mini-batch (gkv_client_sample_batch). On a pool
 * thread (SRV_POOL), with its state th[r->pool]. */
static void
op_sample_batch(gkv_server *s, srv_req *r)
{
    struct batch b;
    net_rd rd;
    uint32_t ntref;
    uint64_t ms, t0;
    int d;

    memset(&b, 0, sizeof b);
    b.s = s;
    b.r = r;
    b.sb = s->batch;
    if (b.sb == NULL || r->pool >= s->pool.nthreads) {
        srv__fail(r, GKV_EINVAL, "sample_batch: not on a batch thread");
        return;
    }
    b.bt = &b.sb->th[r->pool];
    gkv__arena_reset(&b.bt->ar);
    net__rd_init(&rd, r->pl, r->plen);
    if ((d = net__dec_batch_req(&rd, &b.q)) != 0) {
        srv__fail(r, d == NET_DEC_NOMEM ? GKV_ENOMEM : GKV_EPROTO,
                  "sample_batch: %s", rd.why);
        return;
    }
    ms = b.q.timeout_ms ? b.q.timeout_ms : BATCH_MS;
    /* from its arrival: a batch that waited out its time in the queue
     * is answered at once, not made for a client that gave up */
    t0 = r->queued_ms ? r->queued_ms : gkv__now_ms();
    b.deadline = t0 + ms * 3 / 4;
    if (left_ms(&b) == 0) {
        srv__fail(r, GKV_ETIMEDOUT, "sample_batch on partition %d: waited "
                  "%llu ms in the batch queue, past the request's deadline "
                  "(3/4 of its timeout of %llu ms)", b.sb->part,
                  (unsigned long long)(gkv__now_ms() - t0),
                  (unsigned long long)ms);
        goto out;
    }
    b.nl = (int)b.q.nlayers;
    b.nnt = b.sb->nnt;
    b.net = b.sb->net;
    b.nfan = (int)b.q.nfan;
    b.o.seed = b.q.seed;
    b.o.dir = (int)b.q.dir;
    b.o.flags = b.q.flags & ~NET_BATCH_NO_ROWS;
    ntref = b.q.nfeats + b.q.has_label + b.q.nefeats;
    b.nrows = (size_t)b.q.nfeats + b.q.has_label +
              (size_t)b.q.nefeats * b.q.nlayers;
    if (batch_check(&b) != GKV_OK || batch_inputs(&b) != GKV_OK ||
        (b.rows_n = bmem(&b, (size_t)b.nrows * 8)) == NULL ||
        (b.row_bytes = bmem(&b, (size_t)b.nrows * 8)) == NULL ||
        (b.slot = bmem(&b, b.nrows * sizeof *b.slot)) == NULL)
        goto out;
    for (uint32_t k = 0; k < ntref; k++)
        if (tensor_check(&b, k) != GKV_OK)
            goto out;
    if (batch_blocks(&b) == GKV_OK)
        batch_reply(&b);
out:
    batch_free(&b);
    arena_trim(b.bt);
}

const srv_op srv__batch_ops[] = {
    {NET_SAMPLE_BATCH, SRV_SESSION | SRV_PART | SRV_POOL, op_sample_batch,
     NULL},
    {0, 0, NULL, NULL},
};

/* ---- open, stop, free ------------------------------------------------------- */

gkv_err
srv__batch_open(gkv_server *s, const gkv_server_opts *o, const char *token)
{
    struct srv_batch *sb;
    char *rp;
    gkv_err rc;

    if ((sb = gkv__calloc(1, sizeof *sb)) == NULL)
        return net__fail(GKV_ENOMEM, "server: out of memory");
    s->batch = sb;
    sb->nnt = gkv_pbook_num_ntypes(s->graph.book);
    sb->net = gkv_pbook_num_etypes(s->graph.book);
    sb->part = gkv_part_id(s->graph.part);
    sb->nparts = gkv_pbook_num_parts(s->graph.book);
    sb->nserv = s->conf.id.num_servers;
    sb->rank0 = (s->conf.id.machine * sb->nserv + s->conf.id.server_id) *
                PEER_RANKS;
    /* the peer clients read the ip_config when they connect: its real
     * path, whatever the working directory is by then */
    rp = realpath(o->ip_config, NULL);
    sb->ipcfg = gkv__strdup(rp != NULL ? rp : o->ip_config);
    free(rp);
    if (sb->ipcfg == NULL ||
        (token != NULL && (sb->token = gkv__strdup(token)) == NULL) ||
        (sb->lo = gkv__calloc((size_t)sb->nnt, sizeof *sb->lo)) == NULL ||
        (sb->hi = gkv__calloc((size_t)sb->nnt, sizeof *sb->hi)) == NULL ||
        (sb->th = gkv__calloc(s->pool.nthreads + 1, sizeof *sb->th)) == NULL)
        return net__fail(GKV_ENOMEM, "server: out of memory");
    for (int t = 0; t < sb->nnt; t++)
        if ((rc = gkv_pbook_node_range(s->graph.book, t, sb->part, &sb->lo[t],
                                       &sb->hi[t])) != GKV_OK)
            return net__fail(rc, "partition %d: %s", sb->part,
                             gkv_pbook_errmsg(s->graph.book));
    for (unsigned i = 0; i < s->pool.nthreads; i++)
        if ((rc = gkv_sampler_new(&sb->th[i].samp, s->graph.sg, 1)) != GKV_OK)
            return net__fail(rc, "batch thread %u: a sampler: %s", i,
                             gkv_sampler_errmsg(NULL));
    return GKV_OK;
}

/* Closes a peer client (a thread's, so that they leave together). */
static void *
peer_close(void *arg)
{
    gkv_client_close(arg);
    return NULL;
}

void
srv__batch_stop(gkv_server *s)
{
    struct srv_batch *sb = s->batch;
    pthread_t *thr;
    int *up;

    if (sb == NULL)
        return;
    /* the peers may be stopping too: a short wait for each leave, all at
     * once (one after another, a dead peer cost PEER_CLOSE_MS a thread) */
    thr = gkv__calloc(s->pool.nthreads + 1, sizeof *thr);
    up = gkv__calloc(s->pool.nthreads + 1, sizeof *up);
    for (unsigned i = 0; i < s->pool.nthreads; i++) {
        struct bthread *bt = &sb->th[i];

        if (bt->peer == NULL)
            continue;
        net__client_timeout(bt->peer, PEER_CLOSE_MS);
        if (thr == NULL || up == NULL ||
            pthread_create(&thr[i], NULL, peer_close, bt->peer) != 0)
            gkv_client_close(bt->peer);
        else
            up[i] = 1;
        bt->peer = NULL;
    }
    for (unsigned i = 0; up != NULL && i < s->pool.nthreads; i++)
        if (up[i])
            pthread_join(thr[i], NULL);
    gkv__free(thr);
    gkv__free(up);
}

void
srv__batch_free(gkv_server *s)
{
    struct srv_batch *sb = s->batch;

    if (sb == NULL)
        return;
    srv__batch_stop(s);
    for (unsigned i = 0; sb->th != NULL && i < s->pool.nthreads; i++) {
        struct bthread *bt = &sb->th[i];

        side_stop(&bt->side);
        gkv_sampler_free(bt->samp);
        gkv__arena_free(&bt->ar);
        for (int t = 0; bt->mk != NULL && t < sb->nnt; t++)
            gkv__free(bt->mk[t]);
        gkv__free(bt->mk);
    }
    gkv__free(sb->th);
    gkv__free(sb->lo);
    gkv__free(sb->hi);
    gkv__free(sb->ipcfg);
    if (sb->token != NULL) {
        sodium_memzero(sb->token, strlen(sb->token));
        gkv__free(sb->token);
    }
    gkv__free(sb);
    s->batch = NULL;
}
