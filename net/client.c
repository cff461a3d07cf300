/* client.c - the gkv client: one REQ socket per server, requests routed by
 * the ID ranges of each machine's schema, parts sent to all owners at once
 * and merged in request order.
 *
 * A call builds "parts" (one message each), queues them per server, sends
 * the head of every queue, then polls: each reply is consumed as it comes
 * (pull rows are copied straight to their place in the caller's buffer) and
 * the next part of that server goes out. A REQ socket holds one request at
 * a time, so the parts of one server go in order, the servers in parallel.
 *
 * Failures: a server that does not answer before the call's deadline gets
 * its socket closed (so nanomsg cannot re-send the request later) and is
 * hand-shaken again by the next call that needs it. A reply saying the
 * session is unknown (the server restarted) makes the client hand-shake on
 * the spot and send that part once more: the server had not executed it.
 * Except for a push that nanomsg may have delivered before, on a
 * connection since lost (lane_mark): the server that died may have
 * applied it, so that part fails with GKV_EIO instead.
 *
 * A heartbeat thread, with sockets of its own, tells every server the
 * client is alive every heartbeat_ms, so an idle client keeps its lease.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <nanomsg/nn.h>
#include <nanomsg/reqrep.h>
#include <sodium.h>
#include "kv_int.h"
#include "graph_int.h"   /* graph__eb_check, graph__eb_reverse */
#include "gkv_partition.h" /* GKV_PART_REVERSE_FEAT */
#include "gkv_net.h"
#include "wire.h"

#define SOCK_BUF     (4 << 20)   /* NN_SNDBUF / NN_RCVBUF (BENCH.md) */
#define NLANES       2           /* requests in flight per server (lanes,
                                  * a REQ socket each): the server gathers
                                  * the next pull message while the last
                                  * one is on the wire. gkv-bench-net, 100k
                                  * rows of 512 B on loopback: 2.3 GB/s with
                                  * 2 lanes, 2.1 with 1 (the server has 2
                                  * worker threads by default). The code
                                  * runs any number. */
#define SPLIT_ROWS   8192        /* rows per server before a machine's part
                                  * is shared among its servers */
#define PART_SLACK   (64u << 10) /* header and field bytes beside the rows */
/* What a handshake or schema reply may need: a partition config (up to 64
 * MiB, as the server reads it) and the schema beside it. */
#define HS_REPLY_MAX (80u << 20)
#define PULL_CAP     (2ull << 20) /* pull reply bytes per message: nanomsg
                                    * moves 1-2 MiB messages fastest */
#define PUSH_CAP     (64ull << 20) /* push bytes per message: each one is a
                                    * commit, so fewer and larger */
#define HB_SLICE_MS  50          /* the heartbeat checks for a stop this
                                  * often while it waits for replies */
#define LEAVE_AGAIN_MS 1000      /* gkv_client_close waits this long at
                                  * most for a LEAVE sent over a socket
                                  * opened anew after a failed call, when
                                  * no other server is left (such a server
                                  * may be gone) */

struct part;
typedef void (*part_enc)(net_wr *w, const struct part *p);
typedef gkv_err (*part_done)(gkv_client *c, struct part *p, net_rd *rd);

/* One message of a call, to one server. */
struct part {
    struct conn *cn;
    uint16_t type;
    part_enc enc;
    part_done done;                /* reads a successful reply's payload */
    /* inputs (as the type needs) */
    const char *name;
    const uint64_t *ids;           /* with idx NULL: ids[0..n); else
                                    * ids[idx[j]] */
    const size_t *idx;
    size_t n;
    const unsigned char *rows;     /* push rows, same indexing as ids */
    size_t row_bytes;
    const char *handler;
    double opt[4];
    unsigned pflags;               /* push: GKV_PUSH_* */
    const void *arg;               /* other requests' fields */
    unsigned char *dst;            /* pull: where rows go (same indexing) */
    void *out;                     /* small replies: decoded here */
    /* state */
    struct part *next;             /* in its server's queue */
    int retried;
    uint32_t rflags;               /* reply flags */
    gkv_err rc;
};

struct conn {
    unsigned machine, server;
    char addr[300];                /* "host:port" */
    char url[320];
    int v6;
    int sock[NLANES];              /* REQ sockets, -1: closed; lane 0
                                    * carries the handshake */
    int ready;                     /* hand-shaken (the session is good) */
    uint64_t session;              /* under c->hb_mu */
    uint64_t next_req;
    net_ident id;
    int have_id;
    uint32_t part_id;              /* a graph server's partition */
    uint64_t book_len, book_sum;   /* and its config's size and XXH3 */
    atomic_int stale;              /* the heartbeat saw the session refused */
    /* the call in progress */
    struct part *head, *tail;
    struct part *inflight[NLANES];
    uint64_t inflight_req[NLANES];
    /* for a request that must not run twice (resend_unsafe), the lane
     * socket's connections when it was sent (lane_mark) */
    uint64_t inflight_est[NLANES]; /* NN_STAT_ESTABLISHED_CONNECTIONS */
    int inflight_up[NLANES];       /* a connection was up or being set up */
    /* the heartbeat thread's own */
    int hb_sock;
    uint64_t hb_req;
    uint64_t hb_sess;              /* the session its request carries */
    int hb_wait;
};

struct mach {
    net_schema schema;             /* the latest any of its servers sent */
    int have;
    gkv_store *local;              /* GKV_CLIENT_LOCAL_READ: the store, when
                                    * it is on this host */
};

struct span { uint64_t lo, hi; unsigned m; };

struct route {
    char name[GKV_NAME_MAX + 1];
    net_tensor t;                  /* dtype, shape, row bytes */
    struct span *sp;               /* sorted by lo, disjoint */
    size_t nsp;
};

struct gkv_client {
    pthread_mutex_t mu;            /* one call at a time */
    int schema_stale;              /* a shape error: fetch the schemas
                                    * again before the next routed call */
    gkv_ipconfig *cfg;
    size_t nmach;
    unsigned nserv;
    struct conn *cn;               /* nmach x nserv, machine-major */
    size_t ncn;
    struct mach *mc;
    char group[NET_GROUP_MAX + 1];
    uint32_t rank;
    int auth;
    unsigned char key[NET_KEY_LEN];
    int timeout_ms;
    int call_ms;                   /* the running call's timeout, which its
                                    * messages quote: timeout_ms, or a
                                    * barrier's own, or close's bound */
    unsigned group_size, flags;
    uint64_t max_msg;
    unsigned rr;                   /* round robin over a machine's servers */
    uint64_t barrier_seq;
    int bar_unsure;                /* the last barrier failed: its request
                                    * may still count (see conn_open) */
    uint64_t instance;             /* the job instance's hash; 0: none */
    int hs_legacy;                 /* a server refused the newer handshake
                                    * flags: send them no more */
    int single;                    /* gkv_client_connect_addr: one server */
    struct route *rt;              /* cache, dropped when a schema changes */
    size_t nrt;
    char host[NET_HOST_MAX + 1];
    /* graph servers: the partition config (its bytes as the first server
     * sent them, and the book read from them) */
    unsigned char *book_json;
    uint64_t book_len, book_sum;
    gkv_pbook *book;
    /* results of the last sampling call (reused by the next one) */
    struct achunk { void *p; size_t cap, used; } *ar;
    size_t nar, capar;
    int32_t **mk;                  /* sample_blocks' relabelling markers */
    int nmk;
    int64_t *eb;                   /* the last edge batch's pairs */
    size_t ebcap;
    /* the exchange in progress: the first failed part's message */
    struct part *x_base;
    size_t x_first;
    char x_msg[1280];
    /* heartbeat */
    pthread_mutex_t hb_mu;
    pthread_cond_t hb_cv;
    pthread_t hb_thr;
    int hb_running, hb_stop;
    unsigned hb_ms;
};

/* ---- time -------------------------------------------------------------- */

static uint64_t
mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int
left_ms(uint64_t deadline)
{
    uint64_t now = mono_ms();

    if (now >= deadline)
        return 0;
    return deadline - now > INT_MAX ? INT_MAX : (int)(deadline - now);
}

static gkv_err cfail(struct conn *cn, gkv_err rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The error of a call, naming the server. */
static gkv_err
cfail(struct conn *cn, gkv_err rc, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* what the server said it is, once it did: a client of one address
     * (kvctl --server) numbers its only server 0 of 0 */
    return net__fail(rc, "server %s (machine %u, server %u): %s", cn->addr,
                     cn->have_id ? cn->id.machine : cn->machine,
                     cn->have_id ? cn->id.server_id : cn->server, msg);
}

/* ---- sockets ------------------------------------------------------------ */

static int
sockopt(int sock, int level, int opt, int v)
{
    return nn_setsockopt(sock, level, opt, &v, sizeof v);
}

static int
req_socket(gkv_client *c, struct conn *cn)
{
    int s = nn_socket(AF_SP, NN_REQ);
    /* never below HS_REPLY_MAX: a handshake reply carries the schema and
     * the partition config whatever max_msg says, and nanomsg drops a
     * larger message without a word (the connect timed out) */
    uint64_t rmax = (c->max_msg > HS_REPLY_MAX ? c->max_msg : HS_REPLY_MAX) +
                    NET_HDR_LEN + PART_SLACK;

    if (s < 0)
        return -1;
    if (rmax > INT_MAX)
        rmax = INT_MAX;
    /* the REQ socket must never re-send by itself: a push would apply
     * twice; a lost request is the call's timeout instead */
    if (sockopt(s, NN_SOL_SOCKET, NN_RCVMAXSIZE, (int)rmax) < 0 ||
        sockopt(s, NN_SOL_SOCKET, NN_SNDBUF, SOCK_BUF) < 0 ||
        sockopt(s, NN_SOL_SOCKET, NN_RCVBUF, SOCK_BUF) < 0 ||
        sockopt(s, NN_SOL_SOCKET, NN_RECONNECT_IVL_MAX, 1000) < 0 ||
        sockopt(s, NN_REQ, NN_REQ_RESEND_IVL, INT_MAX) < 0 ||
        (cn->v6 && sockopt(s, NN_SOL_SOCKET, NN_IPV4ONLY, 0) < 0) ||
        nn_connect(s, cn->url) < 0) {
        nn_close(s);
        return -1;
    }
    return s;
}

/* Closes cn's sockets (so nanomsg cannot re-send what was in flight); the
 * next request hand-shakes again. The session stays with the heartbeat
 * thread: a server that is alive but was slow keeps our lease, and a
 * restarted one answers the heartbeat with "unknown session". */
static void
conn_break(struct conn *cn)
{
    for (int l = 0; l < NLANES; l++) {
        if (cn->sock[l] >= 0)
            nn_close(cn->sock[l]);
        cn->sock[l] = -1;
    }
    cn->ready = 0;
}

/* Makes message 'type' (header and payload from enc) in a buffer that
 * nn_send(NN_MSG) takes over. */
static void *
msg_make(gkv_client *c, uint16_t type, uint64_t req_id,
         uint64_t session, void (*enc)(net_wr *, const void *),
         const void *arg, size_t *len)
{
    net_wr w = {0};
    net_hdr h = {0};
    void *m;

    enc(&w, arg);
    if ((m = nn_allocmsg(NET_HDR_LEN + w.off, 0)) == NULL)
        return NULL;
    h.len = w.off;
    w.p = (unsigned char *)m + NET_HDR_LEN;
    w.cap = w.off;
    w.off = 0;
    enc(&w, arg);
    h.magic = NET_MAGIC;
    h.version = NET_VERSION;
    h.type = type;
    h.req_id = req_id;
    h.session = session;
    if (c->flags & GKV_CLIENT_CHECKSUM) {
        h.flags |= NET_F_SUM;
        h.sum = net__sum(w.p, w.off);
    }
    net__hdr_put(m, &h);
    *len = NET_HDR_LEN + w.off;
    return m;
}

/* Checks a reply to request (type, req_id); on success *rd reads its
 * payload, else the error is recorded (naming cn) and returned. */
static gkv_err
reply_check(struct conn *cn, const void *m, size_t len, uint16_t type,
            uint64_t req_id, net_hdr *h, net_rd *rd)
{
    char why[256], msg[NET_ERRMSG_MAX + 1];
    gkv_err rc;

    if ((rc = net__hdr_check(m, len, h, why, sizeof why)) != GKV_OK) {
        h->status = 0;        /* not the server's word: the stream is bad */
        return cfail(cn, rc, "bad reply to %s: %s", net__type_name(type), why);
    }
    if (!(h->flags & NET_F_REPLY) || h->type != type || h->req_id != req_id)
        return cfail(cn, GKV_EPROTO, "reply of type %u to request %llu does "
                     "not match the request (%s, %llu)", h->type,
                     (unsigned long long)h->req_id, net__type_name(type),
                     (unsigned long long)req_id);
    net__rd_init(rd, (const unsigned char *)m + NET_HDR_LEN, (size_t)h->len);
    if (h->status != GKV_OK) {
        if (net__dec_err(rd, msg, sizeof msg) != 0)
            snprintf(msg, sizeof msg, "%s (malformed error reply: %s)",
                     gkv_strerror(h->status), rd->why);
        if (h->status > 0 || h->status < -64)
            return cfail(cn, GKV_EPROTO, "reply status %d: %s", h->status, msg);
        return cfail(cn, (gkv_err)h->status, "%s", msg);
    }
    return GKV_OK;
}

/* One blocking round trip on lane 0 (hello and handshake). On success
 * *reply is an NN_MSG buffer the caller frees, and *rd reads its payload. */
static gkv_err
roundtrip(gkv_client *c, struct conn *cn, uint16_t type, uint64_t session,
          void (*enc)(net_wr *, const void *), const void *arg,
          uint64_t deadline, void **reply, net_rd *rd)
{
    size_t len;
    uint64_t id = ++cn->next_req;
    void *m = msg_make(c, type, id, session, enc, arg, &len);
    net_hdr h;
    int n, left;
    gkv_err rc;

    *reply = NULL;
    if (m == NULL)
        return cfail(cn, GKV_ENOMEM, "out of memory");
    left = left_ms(deadline);
    sockopt(cn->sock[0], NN_SOL_SOCKET, NN_SNDTIMEO, left > 0 ? left : 1);
    if (nn_send(cn->sock[0], &m, NN_MSG, 0) < 0) {
        int e = nn_errno();
        nn_freemsg(m);
        return cfail(cn, net__from_nn(e), "%s: send failed: %s",
                     net__type_name(type), nn_strerror(e));
    }
    for (;;) {
        left = left_ms(deadline);
        if (left <= 0)
            return cfail(cn, GKV_ETIMEDOUT, "no reply to %s within %d ms (is "
                         "it running and reachable?)", net__type_name(type),
                         c->call_ms);
        sockopt(cn->sock[0], NN_SOL_SOCKET, NN_RCVTIMEO, left);
        n = nn_recv(cn->sock[0], reply, NN_MSG, 0);
        if (n >= 0)
            break;
        if (nn_errno() == EINTR)
            continue;
        if (nn_errno() == ETIMEDOUT || nn_errno() == EAGAIN)
            continue;                    /* the loop head reports it */
        return cfail(cn, net__from_nn(nn_errno()), "%s: receive failed: %s",
                     net__type_name(type), nn_strerror(nn_errno()));
    }
    if ((rc = reply_check(cn, *reply, (size_t)n, type, id, &h, rd)) != GKV_OK) {
        nn_freemsg(*reply);
        *reply = NULL;
    }
    return rc;
}

static void enc_empty(net_wr *w, const void *a) { (void)w; (void)a; }
static void enc_hs(net_wr *w, const void *a) { net__enc_hs_req(w, a); }

static void route_drop(gkv_client *c);

/* Stores a schema for cn's machine (taking it over). */
static void
schema_set(gkv_client *c, struct conn *cn, net_schema *sc)
{
    struct mach *mc = &c->mc[cn->machine];

    net__schema_free(&mc->schema);
    mc->schema = *sc;
    mc->have = 1;
    sc->t = NULL;
    sc->n = 0;
    route_drop(c);
}

/* Opens cn's socket if needed and hand-shakes: hello (a nonce), then the
 * proof. Learns the identity and the machine's schema. */
static gkv_err
conn_open(gkv_client *c, struct conn *cn, uint64_t deadline)
{
    net_hello_rep hr;
    net_hs_req hs;
    net_hs_rep hp;
    net_rd rd;
    void *rep = NULL;
    gkv_err rc;

    if (cn->sock[0] < 0 && (cn->sock[0] = req_socket(c, cn)) < 0)
        return cfail(cn, net__from_nn(nn_errno()), "cannot connect to %s: %s",
                     cn->url, nn_strerror(nn_errno()));
    cn->ready = 0;
    if ((rc = roundtrip(c, cn, NET_HELLO, 0, enc_empty, NULL, deadline, &rep,
                        &rd)) != GKV_OK)
        goto fail;
    if (net__dec_hello_rep(&rd, &hr) != 0) {
        rc = cfail(cn, GKV_EPROTO, "malformed hello reply: %s", rd.why);
        goto fail;
    }
    nn_freemsg(rep);
    rep = NULL;
    if (hr.id.proto != NET_VERSION) {
        rc = cfail(cn, GKV_EVERSION, "it speaks protocol %u, this client %u",
                   hr.id.proto, NET_VERSION);
        goto fail;
    }
    if ((hr.id.flags & NET_ID_AUTH) && !c->auth) {
        rc = cfail(cn, GKV_EPERM, "it requires a token and this client has "
                   "none");
        goto fail;
    }
    memset(&hs, 0, sizeof hs);
    memcpy(hs.nonce, hr.nonce, NET_NONCE_LEN);
    snprintf(hs.group, sizeof hs.group, "%s", c->group);
    hs.rank = c->rank;
    if (c->auth) {
        hs.flags = NET_HS_PROOF;
        net__proof(c->key, hs.nonce, hs.group, hs.rank, hs.mac);
    }
    if (c->flags & GKV_CLIENT_OBSERVER)
        hs.flags |= NET_HS_OBSERVER;
    /* after a failed barrier, the barrier server may have released the
     * request this client abandoned (its group went on): RESUME keeps
     * that release on the server, so that the retry of the same barrier
     * is answered instead of parked as one the group has passed. Only
     * then, and only there: a server that predates the flag refuses it */
    if (c->bar_unsure && cn == &c->cn[0] && !c->hs_legacy)
        hs.flags |= NET_HS_RESUME;
    if (c->instance != 0 && !c->hs_legacy) {
        hs.flags |= NET_HS_INSTANCE;
        hs.instance = c->instance;
    }
    if ((rc = roundtrip(c, cn, NET_HANDSHAKE, 0, enc_hs, &hs, deadline, &rep,
                        &rd)) != GKV_OK) {
        if (rc == GKV_EPROTO && (hs.flags & (NET_HS_RESUME | NET_HS_INSTANCE))) {
            /* a server older than the flags refuses them ("unknown
             * flags"): join as before them, as a new session whose
             * barriers the group may have passed and that an earlier run
             * of the job may share (what such a server always did) */
            c->bar_unsure = 0;
            c->hs_legacy = 1;
            conn_break(cn);
            return conn_open(c, cn, deadline);
        }
        goto fail;
    }
    if (net__dec_hs_rep(&rd, &hp) != 0) {
        rc = cfail(cn, GKV_EPROTO, "malformed handshake reply: %s", rd.why);
        goto fail;
    }
    /* rep stays until the partition config (pointing into it) is taken */
    if (!c->single &&
        (hp.id.server_id != cn->server || hp.id.num_servers != c->nserv)) {
        rc = cfail(cn, GKV_EINVAL, "it says it is server %u of %u, this "
                   "client expected server %u of %u (ip_config or "
                   "--num-servers differ?)", hp.id.server_id,
                   hp.id.num_servers, cn->server, c->nserv);
        net__schema_free(&hp.schema);
        goto fail;
    }
    if (hp.id.flags & NET_ID_GRAPH) {
        uint64_t sum = net__sum(hp.book.json, (size_t)hp.book.len);
        if (c->book_json == NULL) {
            if ((c->book_json = gkv__malloc((size_t)hp.book.len)) == NULL) {
                rc = cfail(cn, GKV_ENOMEM, "out of memory for the partition "
                           "config");
                net__schema_free(&hp.schema);
                goto fail;
            }
            memcpy(c->book_json, hp.book.json, (size_t)hp.book.len);
            c->book_len = hp.book.len;
            c->book_sum = sum;
        } else if (c->book_len != hp.book.len || c->book_sum != sum) {
            rc = cfail(cn, GKV_EINVAL, "it serves another partition config "
                       "than the first server this client joined (%llu "
                       "bytes against %llu%s): one of the two serves another "
                       "graph (a server left from another job?)",
                       (unsigned long long)hp.book.len,
                       (unsigned long long)c->book_len,
                       hp.book.len == c->book_len ? ", the same size with "
                       "other bytes" : "");
            net__schema_free(&hp.schema);
            goto fail;
        }
        if (!c->single && hp.book.part_id != cn->machine) {
            rc = cfail(cn, GKV_EINVAL, "it serves partition %u, but machine "
                       "%u of the ip_config must serve partition %u",
                       hp.book.part_id, cn->machine, cn->machine);
            net__schema_free(&hp.schema);
            goto fail;
        }
        cn->part_id = hp.book.part_id;
        cn->book_len = hp.book.len;
        cn->book_sum = sum;
    }
    nn_freemsg(rep);
    rep = NULL;
    cn->id = hp.id;
    cn->have_id = 1;
    schema_set(c, cn, &hp.schema);
    /* together, under the lock the heartbeat marks stale with: a refusal
     * of the old session read after this must not mark the new one */
    pthread_mutex_lock(&c->hb_mu);
    cn->session = hp.session;
    atomic_store(&cn->stale, 0);
    pthread_mutex_unlock(&c->hb_mu);
    cn->ready = 1;
    return GKV_OK;
fail:
    if (rep != NULL)
        nn_freemsg(rep);
    conn_break(cn);
    return rc;
}

/* ---- the exchange engine ------------------------------------------------- */

static void
part_enc_thunk(net_wr *w, const void *a)
{
    const struct part *p = a;

    p->enc(w, p);
}

/* Records a part's outcome; the message of the failure of the earliest
 * part (in request order) is kept for the call's error. */
static void
part_finish(gkv_client *c, struct part *p, gkv_err rc)
{
    size_t i;

    p->rc = rc;
    if (rc == GKV_OK || c->x_base == NULL)
        return;
    i = (size_t)(p - c->x_base);
    if (i < c->x_first) {
        c->x_first = i;
        snprintf(c->x_msg, sizeof c->x_msg, "%s", gkv_net_errmsg());
    }
}

static int
conn_busy(const struct conn *cn)
{
    for (int l = 0; l < NLANES; l++)
        if (cn->inflight[l] != NULL)
            return 1;
    return 0;
}

/* Fails every part of cn, in flight or queued, with rc (its message is
 * the current one) and closes its sockets. */
static void
conn_fail_all(gkv_client *c, struct conn *cn, gkv_err rc)
{
    struct part *p;

    for (int l = 0; l < NLANES; l++)
        if ((p = cn->inflight[l]) != NULL) {
            cn->inflight[l] = NULL;
            part_finish(c, p, rc);
        }
    while ((p = cn->head) != NULL) {
        cn->head = p->next;
        part_finish(c, p, rc);
    }
    cn->tail = NULL;
    conn_break(cn);
}

/* Whether a request must not be executed twice: PUSH ("add" would add
 * twice). CREATE and DELETE end in the same state however often they run,
 * and the client reads nothing from their replies that a second run
 * changes (created/existed are ignored); the others read, or, like
 * BARRIER, are for the server that answers them. */
static int
resend_unsafe(uint16_t type)
{
    return type == NET_PUSH;
}

/* nanomsg's REQ socket sends its pending request again by itself as soon
 * as the connection it went out on is gone and another is up (req.c:
 * removing the pipe the request was sent to "pretend[s] we timed out so
 * request resent immediately"; NN_REQ_RESEND_IVL does not turn that off).
 * So a request may reach a server that restarted after executing it, and
 * that server answers "unknown session". To tell that from a first
 * delivery, lane l notes before the send how many connections its socket
 * has established and whether one is up or being set up (established and
 * not broken: its protocol header exchange may be under way, and the
 * request would go out on it). Read before nn_send, so a connection that
 * comes up meanwhile is counted as a later one. */
static void
lane_mark(struct conn *cn, int l)
{
    int s = cn->sock[l];
    uint64_t est = nn_get_statistic(s, NN_STAT_ESTABLISHED_CONNECTIONS);
    uint64_t brk = nn_get_statistic(s, NN_STAT_BROKEN_CONNECTIONS);
    uint64_t cur = nn_get_statistic(s, NN_STAT_CURRENT_CONNECTIONS);

    cn->inflight_est[l] = est;
    cn->inflight_up[l] = cur != 0 || est != brk;   /* (uint64_t)-1: unknown */
}

/* Whether lane l's request may have been delivered on more than one
 * connection: the one up when it was sent, and every one established
 * since (a socket connects to one address, so at most one is up at a
 * time). When the statistics cannot be read, it may have. */
static int
lane_redelivered(const struct conn *cn, int l)
{
    uint64_t est = nn_get_statistic(cn->sock[l], NN_STAT_ESTABLISHED_CONNECTIONS);

    if (est == UINT64_MAX || cn->inflight_est[l] == UINT64_MAX ||
        est < cn->inflight_est[l])
        return 1;
    return (uint64_t)cn->inflight_up[l] + (est - cn->inflight_est[l]) > 1;
}

/* Sends queued parts of cn on its free lanes, hand-shaking first when the
 * session is not good (only once no lane has a request in flight: a new
 * request on a REQ socket would cancel the one there). Parts that cannot
 * be sent fail with the reason. */
static void
conn_kick(gkv_client *c, struct conn *cn, uint64_t deadline)
{
    while (cn->head != NULL) {
        struct part *p;
        void *m;
        size_t len;
        gkv_err rc = GKV_OK;
        int left, l;

        if (!cn->ready || atomic_load(&cn->stale)) {
            if (conn_busy(cn))
                return;                  /* its replies come first */
            if ((rc = conn_open(c, cn, deadline)) != GKV_OK) {
                /* the server is unreachable: its whole queue fails */
                conn_fail_all(c, cn, rc);
                return;
            }
        }
        for (l = 0; l < NLANES && cn->inflight[l] != NULL; l++)
            ;
        if (l == NLANES)
            return;                      /* every lane is busy */
        if (cn->sock[l] < 0 && (cn->sock[l] = req_socket(c, cn)) < 0) {
            rc = cfail(cn, net__from_nn(nn_errno()), "cannot connect to "
                       "%s: %s", cn->url, nn_strerror(nn_errno()));
            conn_fail_all(c, cn, rc);
            return;
        }
        p = cn->head;
        cn->head = p->next;
        if (cn->head == NULL)
            cn->tail = NULL;
        cn->inflight_req[l] = ++cn->next_req;
        m = msg_make(c, p->type, cn->inflight_req[l], cn->session,
                     part_enc_thunk, p, &len);
        if (m == NULL) {
            part_finish(c, p, cfail(cn, GKV_ENOMEM, "out of memory for a "
                                    "request"));
            continue;
        }
        left = left_ms(deadline);
        sockopt(cn->sock[l], NN_SOL_SOCKET, NN_SNDTIMEO, left > 0 ? left : 1);
        if (resend_unsafe(p->type))
            lane_mark(cn, l);
        if (nn_send(cn->sock[l], &m, NN_MSG, 0) < 0) {
            int e = nn_errno();
            nn_freemsg(m);
            rc = cfail(cn, net__from_nn(e), "%s: send failed: %s",
                       net__type_name(p->type), nn_strerror(e));
            part_finish(c, p, rc);
            conn_fail_all(c, cn, rc);
            return;
        }
        cn->inflight[l] = p;
    }
}

static void
enqueue(struct part *p)
{
    struct conn *cn = p->cn;

    p->next = NULL;
    p->rc = GKV_OK;
    if (cn->tail != NULL)
        cn->tail->next = p;
    else
        cn->head = p;
    cn->tail = p;
}

/* Runs parts[0..n) to completion or the deadline. Returns the failure of
 * the earliest failed part (in request order), with its message. */
static gkv_err
exchange(gkv_client *c, struct part *parts, size_t n, uint64_t deadline)
{
    size_t cap = c->ncn * NLANES;
    struct nn_pollfd *pf = NULL;
    struct conn **pc = NULL;
    int *pl = NULL;
    gkv_err first = GKV_OK;

    if (n == 0)
        return GKV_OK;
    pf = gkv__malloc(cap * sizeof *pf);
    pc = gkv__malloc(cap * sizeof *pc);
    pl = gkv__malloc(cap * sizeof *pl);
    if (pf == NULL || pc == NULL || pl == NULL) {
        gkv__free(pf);
        gkv__free(pc);
        gkv__free(pl);
        return net__fail(GKV_ENOMEM, "out of memory");
    }
    c->x_base = parts;
    c->x_first = SIZE_MAX;
    c->x_msg[0] = '\0';
    for (size_t i = 0; i < n; i++)
        enqueue(&parts[i]);
    for (size_t i = 0; i < c->ncn; i++)
        conn_kick(c, &c->cn[i], deadline);
    for (;;) {
        int np = 0, left, r;

        for (size_t i = 0; i < c->ncn; i++)
            for (int l = 0; l < NLANES; l++)
                if (c->cn[i].inflight[l] != NULL) {
                    pf[np].fd = c->cn[i].sock[l];
                    pf[np].events = NN_POLLIN;
                    pf[np].revents = 0;
                    pc[np] = &c->cn[i];
                    pl[np++] = l;
                }
        if (np == 0)
            break;
        /* past the deadline, one last look (poll with 0 ms): a reply that
         * came while another server's hand-shake blocked is taken, and
         * only the servers still silent fail */
        left = left_ms(deadline);
        r = nn_poll(pf, np, left);
        if (r < 0 && nn_errno() != EINTR) {
            gkv_err rc = net__fail(net__from_nn(nn_errno()), "nn_poll: %s",
                                   nn_strerror(nn_errno()));
            for (int k = 0; k < np; k++)
                conn_fail_all(c, pc[k], rc);
            break;
        }
        for (int k = 0; k < np && r > 0; k++) {
            struct conn *cn = pc[k];
            int l = pl[k];
            struct part *p = cn->inflight[l];
            void *rep = NULL;
            net_hdr h;
            net_rd rd;
            gkv_err rc;
            int got;

            if (p == NULL || !(pf[k].revents & NN_POLLIN))
                continue;
            got = nn_recv(cn->sock[l], &rep, NN_MSG, NN_DONTWAIT);
            if (got < 0) {
                int e = nn_errno();
                if (e == EAGAIN || e == EINTR || e == ETIMEDOUT)
                    continue;
                rc = cfail(cn, net__from_nn(e), "receive failed: %s",
                           nn_strerror(e));
                conn_fail_all(c, cn, rc);
                continue;
            }
            cn->inflight[l] = NULL;
            rc = reply_check(cn, rep, (size_t)got, p->type,
                             cn->inflight_req[l], &h, &rd);
            if (rc == GKV_EPERM && (h.flags & NET_F_SESSION) &&
                resend_unsafe(p->type) && lane_redelivered(cn, l)) {
                /* this server executed nothing, but nanomsg may have
                 * delivered the request before, on a connection since
                 * lost, to a server that executed it and then died (or
                 * that dropped our session meanwhile): sending it again
                 * could apply it twice, so the part fails. GKV_EIO: the
                 * request was lost with its connection and its outcome
                 * is unknown (not GKV_EPERM, which promises nothing ran,
                 * nor GKV_ETIMEDOUT: an answer came in time). */
                nn_freemsg(rep);
                cn->ready = 0;
                part_finish(c, p, cfail(cn, GKV_EIO, "restarted (or "
                            "dropped the session) while a %s was in flight: "
                            "it may or may not have been applied; not sent "
                            "again (nanomsg delivered it again on a new "
                            "connection, which refused the session)",
                            net__type_name(p->type)));
                conn_kick(c, cn, deadline);
                continue;
            }
            if (rc == GKV_EPERM && (h.flags & NET_F_SESSION) &&
                p->type == NET_LEAVE) {
                /* the server does not know the session (it restarted,
                 * or our lease lapsed): there is nothing to leave, and a
                 * handshake just to leave could stop it (see
                 * gkv_client_close) */
                nn_freemsg(rep);
                cn->ready = 0;
                part_finish(c, p, GKV_OK);
                conn_kick(c, cn, deadline);
                continue;
            }
            if (rc == GKV_EPERM && (h.flags & NET_F_SESSION) && !p->retried) {
                /* the server does not know our session (it restarted or
                 * our lease lapsed) and the request reached no server
                 * before: nothing executed it; hand-shake and send again */
                nn_freemsg(rep);
                p->retried = 1;
                cn->ready = 0;
                p->next = cn->head;
                cn->head = p;
                if (cn->tail == NULL)
                    cn->tail = p;
                conn_kick(c, cn, deadline);
                continue;
            }
            p->rflags = h.flags;
            if (rc == GKV_OK && p->done != NULL)
                rc = p->done(c, p, &rd);
            nn_freemsg(rep);
            part_finish(c, p, rc);
            if (rc != GKV_OK && rc != GKV_ENOMEM && h.status == 0) {
                /* a garbled stream: start afresh (not after running out
                 * of memory reading a good reply: the stream is fine) */
                conn_fail_all(c, cn, rc);
                continue;
            }
            conn_kick(c, cn, deadline);
        }
        if (left <= 0) {
            for (int k = 0; k < np; k++) {
                struct conn *cn = pc[k];
                struct part *p = cn->inflight[pl[k]];
                gkv_err rc;

                if (p == NULL)
                    continue;            /* answered, or failed already */
                rc = p->type == NET_BARRIER
                   ? cfail(cn, GKV_ETIMEDOUT, "no reply to barrier %llu of "
                           "group '%s' (%u clients) within %d ms: not every "
                           "rank arrived (one failed, is slow, or was started "
                           "with another group or size?), or the server is "
                           "unreachable", (unsigned long long)
                           c->barrier_seq + 1, c->group, c->group_size,
                           c->call_ms)
                   : cfail(cn, GKV_ETIMEDOUT, "no reply to %s within %d ms "
                           "(is it running and reachable?)",
                           net__type_name(p->type), c->call_ms);
                conn_fail_all(c, cn, rc);
            }
            break;
        }
    }
    if (c->x_first != SIZE_MAX) {
        first = parts[c->x_first].rc;
        net__fail(first, "%s", c->x_msg);
    } else {
        /* a refusal that was answered by a hand-shake and a re-send
         * wrote its message on the way; the call succeeded, so "" */
        net__clear();
    }
    c->x_base = NULL;
    gkv__free(pf);
    gkv__free(pc);
    gkv__free(pl);
    return first;
}

/* ---- routes: who holds which IDs of a tensor ------------------------------ */

static void
route_drop(gkv_client *c)
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
 * beside T's, and dropped with it when a schema changes (route_drop).
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

/* ---- small requests ------------------------------------------------------ */

static gkv_err
done_schema(gkv_client *c, struct part *p, net_rd *rd)
{
    net_schema sc;

    if (net__dec_schema(rd, &sc) != 0)
        return cfail(p->cn, GKV_EPROTO, "malformed schema: %s", rd->why);
    schema_set(c, p->cn, &sc);
    return GKV_OK;
}

/* A ready (or openable) server of machine m: the first one, else the next
 * in round-robin order. */
static struct conn *
mach_conn(gkv_client *c, size_t m)
{
    for (unsigned k = 0; k < c->nserv; k++) {
        struct conn *cn = &c->cn[m * c->nserv + (c->rr + k) % c->nserv];
        if (cn->ready)
            return cn;
    }
    return &c->cn[m * c->nserv + c->rr++ % c->nserv];
}

static void penc_empty(net_wr *w, const struct part *p) { (void)w; (void)p; }

static gkv_err
refresh(gkv_client *c, uint64_t deadline)
{
    struct part *parts = gkv__calloc(c->nmach, sizeof *parts);
    gkv_err rc;

    if (parts == NULL)
        return net__fail(GKV_ENOMEM, "out of memory");
    for (size_t m = 0; m < c->nmach; m++) {
        parts[m].cn = mach_conn(c, m);
        parts[m].type = NET_SCHEMA;
        parts[m].enc = penc_empty;
        parts[m].done = done_schema;
    }
    rc = exchange(c, parts, c->nmach, deadline);
    gkv__free(parts);
    route_drop(c);
    return rc;
}

/* The route of 'name', fetching the schemas again once when no server
 * is known to hold it (another client may have created it). */
static gkv_err
route_fresh(gkv_client *c, const char *name, uint64_t deadline,
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

/* ---- connect and close ------------------------------------------------------ */

static void *heartbeat(void *arg);

static void
conn_init(gkv_client *c, struct conn *cn, size_t m, unsigned k)
{
    const gkv_machine *gm = gkv_ipconfig_machine(c->cfg, m);
    int v6 = strchr(gm->host, ':') != NULL;

    memset(cn, 0, sizeof *cn);
    cn->machine = (unsigned)m;
    cn->server = k;
    for (int l = 0; l < NLANES; l++)
        cn->sock[l] = -1;
    cn->hb_sock = -1;
    cn->v6 = v6;
    snprintf(cn->addr, sizeof cn->addr, v6 ? "[%s]:%u" : "%s:%u", gm->host,
             gm->port + k);
    snprintf(cn->url, sizeof cn->url, "tcp://%s", cn->addr);
    atomic_init(&cn->stale, 0);
}

/* Opens the store of machine m in-process when it is on this host. */
static void
local_open(gkv_client *c, size_t m)
{
    const struct conn *cn = &c->cn[m * c->nserv];
    struct stat sb;

    if (!(c->flags & GKV_CLIENT_LOCAL_READ) || !cn->have_id ||
        (cn->id.flags & NET_ID_WRITEBACK) ||
        strcmp(cn->id.host, c->host) != 0 || stat(cn->id.store, &sb) != 0 ||
        !S_ISDIR(sb.st_mode))
        return;
    if (gkv_store_open(&c->mc[m].local, cn->id.store, GKV_RDONLY, NULL) != GKV_OK)
        c->mc[m].local = NULL;   /* then machine m is read over the network */
}

/* The results of sampling calls live in an arena: chunks bumped from the
 * front, emptied (not freed) by the next call, and merged into one chunk
 * of their total size, so a steady stream of calls allocates nothing (and
 * touches no fresh pages). */
static void
arena_reset(gkv_client *c)
{
    size_t total = 0;

    for (size_t i = 0; i < c->nar; i++) {
        c->ar[i].used = 0;
        total += c->ar[i].cap;
    }
    if (c->nar > 1) {
        void *p;
        for (size_t i = 0; i < c->nar; i++)
            gkv__free(c->ar[i].p);
        c->nar = 0;
        if ((p = gkv__malloc(total)) != NULL) {
            c->ar[0].p = p;
            c->ar[0].cap = total;
            c->ar[0].used = 0;
            c->nar = 1;
        }
    }
}

static void
arena_free(gkv_client *c)
{
    for (size_t i = 0; i < c->nar; i++)
        gkv__free(c->ar[i].p);
    gkv__free(c->ar);
    c->ar = NULL;
    c->nar = c->capar = 0;
}

/* Whether p points into what the arena holds now: the results of the
 * last sampling call, which the next one's arena_reset overwrites. */
static int
arena_holds(const gkv_client *c, const void *p)
{
    uintptr_t q = (uintptr_t)p;

    for (size_t i = 0; p != NULL && i < c->nar; i++) {
        uintptr_t a = (uintptr_t)c->ar[i].p;
        if (q >= a && q - a < c->ar[i].used)
            return 1;
    }
    return 0;
}

/* Memory that lives until the next sampling call, 16-aligned. */
static void *
arena_alloc(gkv_client *c, size_t bytes)
{
    struct achunk *a = c->nar > 0 ? &c->ar[c->nar - 1] : NULL;
    size_t need = (bytes + 15) & ~(size_t)15;

    if (need == 0)
        need = 16;
    if (a == NULL || a->cap - a->used < need) {
        size_t cap = need < (1u << 20) ? (1u << 20) : need;
        if (a != NULL && cap < 2 * a->cap)
            cap = 2 * a->cap;
        if (c->nar == c->capar) {
            size_t nc = c->capar ? c->capar * 2 : 8;
            struct achunk *na = gkv__realloc(c->ar, nc * sizeof *na);
            if (na == NULL)
                return NULL;
            c->ar = na;
            c->capar = nc;
        }
        a = &c->ar[c->nar];
        if ((a->p = gkv__malloc(cap)) == NULL)
            return NULL;
        a->cap = cap;
        a->used = 0;
        c->nar++;
    }
    a->used += need;
    return (unsigned char *)a->p + a->used - need;
}

/* After every server hand-shook: when they serve partitions, reads the
 * book from the config's bytes and checks it against the ip_config. */
static gkv_err
book_load(gkv_client *c)
{
    size_t ngraph = 0;
    gkv_err rc;

    for (size_t i = 0; i < c->ncn; i++)
        if (c->cn[i].id.flags & NET_ID_GRAPH)
            ngraph++;
    if (ngraph == 0)
        return GKV_OK;
    for (size_t i = 0; i < c->ncn; i++)
        if (!(c->cn[i].id.flags & NET_ID_GRAPH))
            return cfail(&c->cn[i], GKV_EINVAL, "it serves a plain store "
                         "while other servers of the job serve partitions");
    rc = gkv_pbook_open_mem(&c->book, c->book_json, (size_t)c->book_len,
                            "the servers' partition config");
    if (rc != GKV_OK)
        return net__fail(rc, "the partition config the servers sent: %s",
                         gkv_pbook_errmsg(NULL));
    if (!c->single && (size_t)gkv_pbook_num_parts(c->book) != c->nmach)
        return net__fail(GKV_EINVAL, "the graph has %d partitions but the "
                         "ip_config lists %zu machines (machine m serves "
                         "partition m)", gkv_pbook_num_parts(c->book),
                         c->nmach);
    return GKV_OK;
}

static void
client_free(gkv_client *c)
{
    if (c == NULL)
        return;
    if (c->hb_running) {
        pthread_mutex_lock(&c->hb_mu);
        c->hb_stop = 1;
        pthread_cond_signal(&c->hb_cv);
        pthread_mutex_unlock(&c->hb_mu);
        pthread_join(c->hb_thr, NULL);
    }
    for (size_t i = 0; i < c->ncn && c->cn != NULL; i++) {
        for (int l = 0; l < NLANES; l++)
            if (c->cn[i].sock[l] >= 0)
                nn_close(c->cn[i].sock[l]);
        if (c->cn[i].hb_sock >= 0)
            nn_close(c->cn[i].hb_sock);
    }
    for (size_t m = 0; m < c->nmach && c->mc != NULL; m++) {
        net__schema_free(&c->mc[m].schema);
        gkv_store_close(c->mc[m].local);
    }
    route_drop(c);
    arena_free(c);
    gkv__free(c->eb);
    for (int t = 0; c->mk != NULL && t < c->nmk; t++)
        gkv__free(c->mk[t]);
    gkv__free(c->mk);
    gkv_pbook_close(c->book);
    gkv__free(c->book_json);
    gkv__free(c->mc);
    gkv__free(c->cn);
    gkv_ipconfig_free(c->cfg);
    sodium_memzero(c->key, sizeof c->key);
    pthread_mutex_destroy(&c->mu);
    pthread_mutex_destroy(&c->hb_mu);
    pthread_cond_destroy(&c->hb_cv);
    gkv__free(c);
}

/* gkv_client_connect (ip_config) and gkv_client_connect_addr (addr). */
static gkv_err
client_connect(gkv_client **out, const char *ip_config, const char *addr,
               const char *token, const char *group, uint32_t rank,
               const gkv_client_opts *opts)
{
    gkv_client *c = NULL;
    gkv_client_opts o = {0};
    struct conn probe;
    uint64_t deadline;
    gkv_err rc;

    net__clear();
    if (out == NULL)
        return net__fail(GKV_EINVAL, "gkv_client_connect: no out pointer");
    *out = NULL;
    if (opts != NULL)
        o = *opts;
    if (!net__group_ok(group))
        return net__fail(GKV_EINVAL, "group name '%s' must be 1..%u printable "
                         "characters without spaces", group ? group : "(null)",
                         NET_GROUP_MAX);
    if (token != NULL && (token[0] == '\0' || strlen(token) > GKV_TOKEN_MAX))
        return net__fail(GKV_EINVAL, "token: empty or longer than %d bytes",
                         GKV_TOKEN_MAX);
    if (o.timeout_ms < 0)
        return net__fail(GKV_EINVAL, "timeout %d ms", o.timeout_ms);
    if (o.max_msg != 0 && (o.max_msg < 4096 ||
                           o.max_msg > (uint64_t)INT_MAX - NET_HDR_LEN - PART_SLACK))
        return net__fail(GKV_EINVAL, "max message size %llu: must be in "
                         "4096..%d", (unsigned long long)o.max_msg,
                         (int)(INT_MAX - NET_HDR_LEN - PART_SLACK));
    if (sodium_init() < 0)
        return net__fail(GKV_EIO, "libsodium failed to initialise");
    if ((c = gkv__calloc(1, sizeof *c)) == NULL)
        return net__fail(GKV_ENOMEM, "out of memory");
    pthread_mutex_init(&c->mu, NULL);
    pthread_mutex_init(&c->hb_mu, NULL);
    kv__cond_init_mono(&c->hb_cv);   /* heartbeat waits: monotonic */
    snprintf(c->group, sizeof c->group, "%s", group);
    c->rank = rank;
    c->timeout_ms = o.timeout_ms ? o.timeout_ms : 10000;
    c->call_ms = c->timeout_ms;
    c->group_size = o.group_size;
    c->flags = o.flags;
    c->max_msg = o.max_msg ? o.max_msg : GKV_NET_MAX_MSG;
    {
        const char *in = o.instance != NULL ? o.instance
                                            : getenv("GKV_JOB_INSTANCE");

        if (in != NULL && *in != '\0' && !(o.flags & GKV_CLIENT_OBSERVER)) {
            c->instance = net__sum(in, strlen(in));
            if (c->instance == 0)
                c->instance = 1;
        }
    }
    c->x_first = SIZE_MAX;
    if (gethostname(c->host, sizeof c->host - 1) != 0)
        c->host[0] = '\0';
    if (token != NULL) {
        /* as a token file is read (gkv_token_load, the server's): trailing
         * blanks and newlines are not part of the secret */
        size_t tl = strlen(token);
        while (tl > 1 && strchr(" \t\r\n", token[tl - 1]) != NULL)
            tl--;
        c->auth = 1;
        net__token_key(token, tl, c->key);
    }
    deadline = mono_ms() + (uint64_t)c->timeout_ms;
    c->single = addr != NULL;
    if ((rc = c->single ? net__ipconfig_addr(&c->cfg, addr) :
                          gkv_ipconfig_load(&c->cfg, ip_config)) != GKV_OK)
        goto fail;
    c->nmach = gkv_ipconfig_count(c->cfg);
    c->nserv = c->single ? 1 : o.num_servers;
    if ((c->mc = gkv__calloc(c->nmach, sizeof *c->mc)) == NULL) {
        rc = net__fail(GKV_ENOMEM, "out of memory");
        goto fail;
    }
    if (c->nserv == 0) {
        /* learn the number of servers per machine from server 0 of
         * machine 0 */
        void *rep = NULL;
        net_rd rd;
        net_hello_rep hr;

        c->nserv = 1;
        conn_init(c, &probe, 0, 0);
        if ((probe.sock[0] = req_socket(c, &probe)) < 0) {
            rc = cfail(&probe, net__from_nn(nn_errno()), "cannot connect: %s",
                       nn_strerror(nn_errno()));
            goto fail;
        }
        rc = roundtrip(c, &probe, NET_HELLO, 0, enc_empty, NULL, deadline,
                       &rep, &rd);
        if (rc == GKV_OK && net__dec_hello_rep(&rd, &hr) != 0)
            rc = cfail(&probe, GKV_EPROTO, "malformed hello reply: %s", rd.why);
        if (rep != NULL)
            nn_freemsg(rep);
        nn_close(probe.sock[0]);
        if (rc != GKV_OK)
            goto fail;
        c->nserv = hr.id.num_servers;
    }
    if ((rc = gkv_ipconfig_check(c->cfg, c->nserv)) != GKV_OK)
        goto fail;
    c->ncn = c->nmach * c->nserv;
    if ((c->cn = gkv__calloc(c->ncn, sizeof *c->cn)) == NULL) {
        rc = net__fail(GKV_ENOMEM, "out of memory");
        goto fail;
    }
    for (size_t m = 0; m < c->nmach; m++)
        for (unsigned k = 0; k < c->nserv; k++)
            conn_init(c, &c->cn[m * c->nserv + k], m, k);
    for (size_t i = 0; i < c->ncn; i++)
        if ((rc = conn_open(c, &c->cn[i], deadline)) != GKV_OK)
            goto fail;
    for (size_t m = 0; m < c->nmach; m++) {
        for (unsigned k = 1; k < c->nserv; k++)
            if (strcmp(c->cn[m * c->nserv + k].id.store,
                       c->cn[m * c->nserv].id.store) != 0 ||
                strcmp(c->cn[m * c->nserv + k].id.host,
                       c->cn[m * c->nserv].id.host) != 0) {
                rc = net__fail(GKV_EINVAL, "machine %zu: server %u serves "
                               "%s:%s but server 0 serves %s:%s; the servers "
                               "of a machine must share one store", m, k,
                               c->cn[m * c->nserv + k].id.host,
                               c->cn[m * c->nserv + k].id.store,
                               c->cn[m * c->nserv].id.host,
                               c->cn[m * c->nserv].id.store);
                goto fail;
            }
        local_open(c, m);
    }
    if ((rc = book_load(c)) != GKV_OK)
        goto fail;
    if (!(c->flags & GKV_CLIENT_NO_HEARTBEAT)) {
        unsigned lease = c->cn[0].id.lease_ms;
        /* every server must hear from us within its own lease */
        for (size_t i = 1; i < c->ncn; i++)
            if (c->cn[i].id.lease_ms < lease)
                lease = c->cn[i].id.lease_ms;
        c->hb_ms = o.heartbeat_ms ? o.heartbeat_ms : lease / 3;
        if (c->hb_ms == 0)
            c->hb_ms = 1;
        if (pthread_create(&c->hb_thr, NULL, heartbeat, c) != 0) {
            rc = net__fail(GKV_EIO, "cannot start the heartbeat thread");
            goto fail;
        }
        c->hb_running = 1;
    }
    *out = c;
    return GKV_OK;
fail:
    client_free(c);
    if (rc == GKV_EPERM && token != NULL && strchr(token, '/') != NULL &&
        access(token, F_OK) == 0) {
        /* the commonest slip: GKV_TOKEN_FILE's path passed as the token */
        char was[512];
        snprintf(was, sizeof was, "%s", gkv_net_errmsg());
        rc = net__fail(rc, "%s; the token given is the name of a file: pass "
                       "its contents (gkv_token_load)", was);
    }
    return rc;
}

gkv_err
gkv_client_connect(gkv_client **out, const char *ip_config, const char *token,
                   const char *group, uint32_t rank, const gkv_client_opts *opts)
{
    if (ip_config == NULL) {
        net__clear();
        if (out != NULL)
            *out = NULL;
        return net__fail(GKV_EINVAL, "gkv_client_connect: no ip_config");
    }
    return client_connect(out, ip_config, NULL, token, group, rank, opts);
}

gkv_err
gkv_client_connect_addr(gkv_client **out, const char *addr, const char *token,
                        const char *group, uint32_t rank,
                        const gkv_client_opts *opts)
{
    if (addr == NULL) {
        net__clear();
        if (out != NULL)
            *out = NULL;
        return net__fail(GKV_EINVAL, "gkv_client_connect_addr: no address");
    }
    return client_connect(out, NULL, addr, token, group, rank, opts);
}

gkv_err
gkv_client_close(gkv_client *c)
{
    struct part *parts;
    size_t np = 0;
    gkv_err rc = GKV_OK;

    net__clear();
    if (c == NULL)
        return GKV_OK;
    pthread_mutex_lock(&c->mu);
    if (c->hb_running) {
        pthread_mutex_lock(&c->hb_mu);
        c->hb_stop = 1;
        pthread_cond_signal(&c->hb_cv);
        pthread_mutex_unlock(&c->hb_mu);
        pthread_join(c->hb_thr, NULL);
        c->hb_running = 0;
    }
    /* leave wherever we hold a session. Not where the heartbeat found our
     * session refused (stale: the server restarted, or dropped us): it no
     * longer knows us, and a handshake just to leave would be taken by a
     * server that does not keep alive for its last member leaving (it
     * stops, under the other clients of the job). A server whose call
     * failed (its sockets closed, so that nanomsg cannot re-send) still
     * holds the session the heartbeat kept: it gets the LEAVE over a
     * fresh socket, with that session and no handshake (without it, a
     * server that does not keep alive would wait out our lease). Such a
     * server may be the one that is gone, so it alone gets a short
     * wait. */
    if ((parts = gkv__calloc(c->ncn, sizeof *parts)) == NULL) {
        rc = net__fail(GKV_ENOMEM, "out of memory");
    } else {
        size_t nready = 0;

        for (size_t i = 0; i < c->ncn; i++) {
            struct conn *cn = &c->cn[i];

            if (cn->session == 0 || atomic_load(&cn->stale))
                continue;
            if (!cn->ready) {
                if (cn->sock[0] < 0 && (cn->sock[0] = req_socket(c, cn)) < 0)
                    continue;
                cn->ready = 1;           /* conn_kick: no handshake */
            } else {
                nready++;
            }
            parts[np].cn = cn;
            parts[np].type = NET_LEAVE;
            parts[np].enc = penc_empty;
            parts[np].retried = 1;       /* no hand-shake just to leave */
            np++;
        }
        c->call_ms = nready > 0 || c->timeout_ms < LEAVE_AGAIN_MS ?
                     c->timeout_ms : LEAVE_AGAIN_MS;
        rc = exchange(c, parts, np, mono_ms() + (uint64_t)c->call_ms);
        c->call_ms = c->timeout_ms;
        gkv__free(parts);
    }
    pthread_mutex_unlock(&c->mu);
    if (rc != GKV_OK) {
        char msg[1280];
        snprintf(msg, sizeof msg, "%s", gkv_net_errmsg());
        client_free(c);
        return net__fail(rc, "leave: %s", msg);
    }
    client_free(c);
    return GKV_OK;
}

/* ---- heartbeat ------------------------------------------------------------ */

/* Every hb_ms: a HEARTBEAT to every server we hold a session with, on the
 * thread's own sockets. A refused session marks the connection stale, so
 * the next call hand-shakes first. A silent server gets its heartbeat
 * socket closed (and a fresh one next round). */
static void *
heartbeat(void *arg)
{
    gkv_client *c = arg;
    struct nn_pollfd *pf = gkv__calloc(c->ncn, sizeof *pf);
    struct conn **pc = gkv__calloc(c->ncn, sizeof *pc);

    if (pf == NULL || pc == NULL) {
        gkv__free(pf);
        gkv__free(pc);
        return NULL;
    }
    for (;;) {
        struct timespec ts;
        uint64_t deadline;
        int np = 0, stop;

        kv__mono_deadline(&ts, c->hb_ms);
        pthread_mutex_lock(&c->hb_mu);
        while (!c->hb_stop &&
               pthread_cond_timedwait(&c->hb_cv, &c->hb_mu, &ts) != ETIMEDOUT)
            ;
        stop = c->hb_stop;
        pthread_mutex_unlock(&c->hb_mu);
        if (stop)
            break;
        for (size_t i = 0; i < c->ncn; i++) {
            struct conn *cn = &c->cn[i];
            uint64_t sess;
            size_t len;
            void *m;

            pthread_mutex_lock(&c->hb_mu);
            sess = cn->session;
            pthread_mutex_unlock(&c->hb_mu);
            cn->hb_wait = 0;
            if (sess == 0)
                continue;
            if (cn->hb_sock < 0 && (cn->hb_sock = req_socket(c, cn)) < 0)
                continue;
            m = msg_make(c, NET_HEARTBEAT, ++cn->hb_req, sess, enc_empty,
                         NULL, &len);
            if (m == NULL)
                continue;
            sockopt(cn->hb_sock, NN_SOL_SOCKET, NN_SNDTIMEO, (int)c->hb_ms);
            if (nn_send(cn->hb_sock, &m, NN_MSG, 0) < 0) {
                nn_freemsg(m);
                continue;
            }
            cn->hb_sess = sess;
            cn->hb_wait = 1;
        }
        deadline = mono_ms() + c->hb_ms;
        for (;;) {
            int left = left_ms(deadline), r;

            np = 0;
            for (size_t i = 0; i < c->ncn; i++)
                if (c->cn[i].hb_wait) {
                    pf[np].fd = c->cn[i].hb_sock;
                    pf[np].events = NN_POLLIN;
                    pf[np].revents = 0;
                    pc[np++] = &c->cn[i];
                }
            if (np == 0 || left <= 0)
                break;
            /* in slices, so that gkv_client_close is not held for up to
             * hb_ms by a server that does not answer */
            pthread_mutex_lock(&c->hb_mu);
            stop = c->hb_stop;
            pthread_mutex_unlock(&c->hb_mu);
            if (stop)
                break;
            r = nn_poll(pf, np, left < HB_SLICE_MS ? left : HB_SLICE_MS);
            if (r < 0 && nn_errno() != EINTR)
                break;
            for (int k = 0; k < np; k++) {
                struct conn *cn = pc[k];
                void *rep = NULL;
                net_hdr h;
                char why[160];
                int got;

                if (!(pf[k].revents & NN_POLLIN))
                    continue;
                got = nn_recv(cn->hb_sock, &rep, NN_MSG, NN_DONTWAIT);
                if (got < 0)
                    continue;
                cn->hb_wait = 0;
                /* only when the session refused is still the one the
                 * calls use: a heartbeat that went out just before a
                 * call hand-shook again carries the session that handshake
                 * replaced, whose refusal says nothing of the new one
                 * (marking it would hand-shake again for nothing, and
                 * make gkv_client_close skip its LEAVE) */
                if (net__hdr_check(rep, (size_t)got, &h, why, sizeof why) == GKV_OK &&
                    h.status == GKV_EPERM && (h.flags & NET_F_SESSION)) {
                    pthread_mutex_lock(&c->hb_mu);
                    if (cn->session == cn->hb_sess)
                        atomic_store(&cn->stale, 1);
                    pthread_mutex_unlock(&c->hb_mu);
                }
                nn_freemsg(rep);
            }
        }
        for (size_t i = 0; i < c->ncn; i++)
            if (c->cn[i].hb_wait) {
                nn_close(c->cn[i].hb_sock);
                c->cn[i].hb_sock = -1;
                c->cn[i].hb_wait = 0;
            }
    }
    gkv__free(pf);
    gkv__free(pc);
    return NULL;
}

/* ---- pull and push ------------------------------------------------------- */

static void
penc_pull(net_wr *w, const struct part *p)
{
    net__enc_pull_req(w, p->name, p->ids, p->idx, p->n);
}

static gkv_err
done_pull(gkv_client *c, struct part *p, net_rd *rd)
{
    net_pull_rep pr;
    size_t rb = p->row_bytes;

    (void)c;
    if (net__dec_pull_rep(rd, &pr) != 0)
        return cfail(p->cn, GKV_EPROTO, "malformed pull reply: %s", rd->why);
    if (pr.n == p->n && pr.row_bytes != rb)
        return cfail(p->cn, GKV_ESHAPE, "tensor '%s' has %llu-byte rows on "
                     "this server, %zu-byte in this client's schema (another "
                     "client replaced it?); the schema is fetched again on "
                     "the next call", p->name,
                     (unsigned long long)pr.row_bytes, rb);
    if (pr.n != p->n)
        return cfail(p->cn, GKV_EPROTO, "pull reply holds %llu rows of %llu "
                     "bytes; asked for %zu rows of %zu bytes",
                     (unsigned long long)pr.n, (unsigned long long)pr.row_bytes,
                     p->n, rb);
    if (p->idx == NULL)
        memcpy(p->dst, pr.rows, p->n * rb);
    else
        for (size_t j = 0; j < p->n; j++)
            memcpy(p->dst + p->idx[j] * rb, pr.rows + j * rb, rb);
    return GKV_OK;
}

static void
penc_push(net_wr *w, const struct part *p)
{
    net__enc_push_req(w, p->name, p->handler, p->pflags, p->opt, p->row_bytes,
                      p->ids, p->rows, p->idx, p->n);
}

static gkv_err
done_push(gkv_client *c, struct part *p, net_rd *rd)
{
    uint64_t n;

    (void)c;
    if (net__dec_u64(rd, &n, "push reply.n") != 0)
        return cfail(p->cn, GKV_EPROTO, "malformed push reply: %s", rd->why);
    if (n != p->n)
        return cfail(p->cn, GKV_EPROTO, "push reply says %llu rows applied, "
                     "%zu were sent", (unsigned long long)n, p->n);
    return GKV_OK;
}

/* A growing array of parts. */
struct plist {
    struct part *p;
    size_t n, cap;
};

static struct part *
plist_add(struct plist *l)
{
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 16;
        struct part *np = gkv__realloc(l->p, nc * sizeof *np);
        if (np == NULL)
            return NULL;
        l->p = np;
        l->cap = nc;
    }
    memset(&l->p[l->n], 0, sizeof l->p[l->n]);
    return &l->p[l->n++];
}

/* The payload bytes one message to machine m may carry (at most 'most'). */
static size_t
part_cap(gkv_client *c, size_t m, uint64_t most)
{
    uint64_t cap = c->max_msg, srv = c->cn[m * c->nserv].id.max_msg;

    if (srv != 0 && srv < cap)
        cap = srv;
    if (cap > most)
        cap = most;
    return cap > 2 * PART_SLACK ? (size_t)(cap - PART_SLACK) : (size_t)cap / 2;
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

/* gkv_client_pull() with c->mu held; r: the tensor's route when the
 * caller has just looked it up, else NULL. */
static gkv_err
pull_locked(gkv_client *c, const char *name, const struct route *r,
            const uint64_t *ids, size_t n, void *dst, size_t dst_len)
{
    struct plist pl = {0};
    unsigned *mach = NULL;
    size_t *count = NULL, *start = NULL, *pos = NULL, rb;
    uint64_t deadline = mono_ms() + (uint64_t)c->timeout_ms;
    gkv_err rc = GKV_OK;

    if (r == NULL && (rc = route_fresh(c, name, deadline, &r)) != GKV_OK)
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
    for (size_t m = 0; m < c->nmach; m++) {
        size_t cnt = count[m], per, k, pieces, base;
        const size_t *mpos = pos != NULL ? pos + start[m] : NULL;

        if (cnt == 0)
            continue;
        /* a companion is read through the servers: one not created yet
         * is zeros there, not an error */
        if (c->mc[m].local != NULL && strchr(name, '#') == NULL) {
            if ((rc = local_pull(c, m, name, ids, mpos, cnt, dst, rb)) != GKV_OK) {
                if (rc == GKV_ESHAPE)
                    c->schema_stale = 1;
                goto out;
            }
            continue;
        }
        per = part_cap(c, m, PULL_CAP) / (rb > 8 ? rb : 8);
        if (per == 0) {
            /* rows wider than the preferred message: one per message, as
             * long as the hard limit allows */
            if (rb > part_cap(c, m, UINT64_MAX)) {
                rc = net__fail(GKV_EINVAL, "tensor '%s': one row of %zu "
                               "bytes is more than a message may carry", name,
                               rb);
                goto out;
            }
            per = 1;
        }
        k = share(c, cnt);
        pieces = (cnt + per - 1) / per;
        if (pieces < k)
            pieces = k;
        base = c->rr++;
        for (size_t j = 0; j < pieces; j++) {
            size_t a = cnt * j / pieces, b = cnt * (j + 1) / pieces;
            struct part *p;

            if (a == b)
                continue;
            if ((p = plist_add(&pl)) == NULL) {
                rc = net__fail(GKV_ENOMEM, "out of memory");
                goto out;
            }
            p->cn = &c->cn[m * c->nserv + (base + j) % c->nserv];
            p->type = NET_PULL;
            p->enc = penc_pull;
            p->done = done_pull;
            p->name = name;
            p->n = b - a;
            p->row_bytes = rb;
            if (mpos == NULL) {
                p->ids = ids + a;
                p->dst = (unsigned char *)dst + a * rb;
            } else {
                p->ids = ids;
                p->idx = mpos + a;
                p->dst = dst;
            }
        }
    }
    rc = exchange(c, pl.p, pl.n, deadline);
    if (rc == GKV_ESHAPE)
        c->schema_stale = 1;
out:
    gkv__free(pl.p);
    gkv__free(mach);
    gkv__free(count);
    gkv__free(start);
    gkv__free(pos);
    return rc;
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
    rc = pull_locked(c, name, NULL, ids, n, dst, dst_len);
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
    struct part *p = plist_add(pl);

    if (p == NULL)
        return net__fail(GKV_ENOMEM, "out of memory");
    p->cn = cn;
    p->ids = ids;
    p->rows = rows;
    p->idx = idx;
    p->n = n;
    return GKV_OK;
}

gkv_err
gkv_client_push(gkv_client *c, const char *name, const uint64_t *ids,
                size_t n, const void *rows, size_t rows_len,
                const gkv_push_args *args)
{
    const struct route *r;
    struct plist pl = {0};
    unsigned *mach = NULL;
    size_t *count = NULL, *start = NULL, *pos = NULL, *bpos = NULL, rb;
    size_t *tmp = NULL;
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
    deadline = mono_ms() + (uint64_t)c->timeout_ms;
    if ((rc = route_fresh(c, name, deadline, &r)) != GKV_OK)
        goto out;
    rb = (size_t)r->t.row_bytes;
    if (rb == 0 || n > SIZE_MAX / rb || rows_len != n * rb) {
        rc = net__fail(GKV_ESHAPE, "push of %zu rows to tensor '%s' (%zu "
                       "bytes each) from %zu bytes", n, name, rb, rows_len);
        goto out;
    }
    if (n == 0)
        goto out;
    if ((rc = split_ids(c, r, ids, n, &mach, &count, &start, &pos)) != GKV_OK)
        goto out;
    for (size_t si = 0; si < r->nsp; si++) {
        size_t m = r->sp[si].m, cnt = count[m], base = c->rr++;
        size_t limit = part_cap(c, m, UINT64_MAX), hard = limit / (rb + 8);
        size_t most = part_cap(c, m, PUSH_CAP) / (rb + 8);
        size_t k, pieces, goal, a = 0, q = 0, *mb;
        const size_t *mpos = pos != NULL ? pos + start[m] : NULL;
        struct conn *mcn = &c->cn[m * c->nserv];   /* machine m's servers */

        if (cnt == 0)
            continue;
        /* rows per message: at most 'hard' (the server's and this client's
         * limit), and 'most' (PUSH_CAP too) unless one row passes that */
        if (hard == 0) {
            rc = net__fail(GKV_EINVAL, "tensor '%s': one row of %zu bytes is "
                           "more than a message may carry", name, rb);
            goto out;
        }
        if (most == 0)
            most = hard;
        k = share(c, cnt);
        if (cnt <= most && k == 1) {     /* one message, in request order */
            if ((rc = push_part(&pl, &mcn[base % c->nserv], ids, rows, mpos,
                                cnt)) != GKV_OK)
                goto out;
            continue;
        }
        /* Several messages: the machine's positions sorted by ID (stable)
         * and cut between two IDs, so every copy of an ID is in one message
         * and in request order: one server applies them in one transaction
         * and they combine as in gkv_tensor_push (the last assign wins,
         * adds sum, gradients average), and the messages hold disjoint IDs, so
         * the order servers and lanes apply them in changes nothing. A
         * piece closes once it holds the goal (an even share of the rows,
         * at most 'most'), or before an ID whose copies would take it
         * past 'most' (an ID with more copies than that, up to 'hard', is
         * a piece of its own). The parts point into bpos[start[m] ..)
         * until the exchange ends. */
        if ((bpos == NULL && (bpos = gkv__malloc(n * sizeof *bpos)) == NULL) ||
            (tmp == NULL && (tmp = gkv__malloc(n * sizeof *tmp)) == NULL)) {
            rc = net__fail(GKV_ENOMEM, "out of memory");
            goto out;
        }
        mb = bpos + start[m];
        if ((rc = push_sort(ids, mpos, cnt, r->sp[si].lo,
                            r->sp[si].hi - r->sp[si].lo, mb, tmp)) != GKV_OK)
            goto out;
        pieces = cnt / most + (cnt % most != 0);
        if (pieces < k)
            pieces = k;
        goal = cnt / pieces + (cnt % pieces != 0);
        for (size_t j = 0, e; j < cnt; j = e) {
            for (e = j + 1; e < cnt && ids[mb[e]] == ids[mb[j]]; e++)
                ;                        /* [j, e): the copies of one ID */
            if (e - j > hard) {
                rc = net__fail(GKV_EINVAL, "push to tensor '%s': ID %llu "
                               "comes %zu times, %zu bytes, more than a "
                               "message to machine %zu may carry (%zu "
                               "bytes); the copies of an ID go in one message "
                               "(they combine in one transaction): push fewer "
                               "copies of it per call", name,
                               (unsigned long long)ids[mb[j]], e - j,
                               (e - j) * (rb + 8), m, limit);
                goto out;
            }
            if (j > a && e - a > most) { /* they would pass the limit */
                if ((rc = push_part(&pl, &mcn[(base + q++) % c->nserv], ids,
                                    rows, mb + a, j - a)) != GKV_OK)
                    goto out;
                a = j;
            }
            if (e - a >= goal || e == cnt) {
                if ((rc = push_part(&pl, &mcn[(base + q++) % c->nserv], ids,
                                    rows, mb + a, e - a)) != GKV_OK)
                    goto out;
                a = e;
            }
        }
    }
    for (size_t i = 0; i < pl.n; i++) {
        struct part *p = &pl.p[i];
        p->type = NET_PUSH;
        p->enc = penc_push;
        p->done = done_push;
        p->name = name;
        p->row_bytes = rb;
        p->handler = handler;
        if (args != NULL) {
            p->opt[0] = args->lr;
            p->opt[1] = args->eps;
            p->opt[2] = args->beta1;
            p->opt[3] = args->beta2;
            p->pflags = args->flags;
        }
    }
    rc = exchange(c, pl.p, pl.n, deadline);
    if (rc == GKV_ESHAPE)
        c->schema_stale = 1;
out:
    gkv__free(pl.p);
    gkv__free(mach);
    gkv__free(count);
    gkv__free(start);
    gkv__free(pos);
    gkv__free(bpos);
    gkv__free(tmp);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

/* ---- create, delete, refresh, describe ------------------------------------ */

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
        return cfail(p->cn, GKV_EPROTO, "malformed create reply: %s", rd->why);
    return GKV_OK;
}

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
    deadline = mono_ms() + (uint64_t)c->timeout_ms;
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
        parts[np].cn = mach_conn(c, m);
        parts[np].type = NET_CREATE;
        parts[np].enc = penc_create;
        parts[np].done = done_create;
        parts[np].arg = q;
        np++;
    }
    rc = exchange(c, parts, np, deadline);
    if (rc == GKV_OK)
        rc = refresh(c, deadline);
    else
        route_drop(c);
out:
    gkv__free(cq);
    gkv__free(parts);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

static void
penc_name(net_wr *w, const struct part *p)
{
    net__wr_str(w, p->name);
}

static gkv_err
done_u8(gkv_client *c, struct part *p, net_rd *rd)
{
    uint8_t v;

    (void)c;
    if (net__dec_u8(rd, &v, "reply") != 0)
        return cfail(p->cn, GKV_EPROTO, "malformed %s reply: %s",
                     net__type_name(p->type), rd->why);
    if (p->out != NULL)
        *(uint8_t *)p->out = v;
    return GKV_OK;
}

gkv_err
gkv_client_delete(gkv_client *c, const char *name)
{
    struct part *parts;
    uint64_t deadline;
    gkv_err rc;

    net__clear();
    if (c == NULL || name == NULL || name[0] == '\0' ||
        strlen(name) > GKV_NAME_MAX)
        return net__fail(GKV_EINVAL, "delete: missing or bad tensor name");
    pthread_mutex_lock(&c->mu);
    deadline = mono_ms() + (uint64_t)c->timeout_ms;
    if ((parts = gkv__calloc(c->nmach, sizeof *parts)) == NULL) {
        rc = net__fail(GKV_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t m = 0; m < c->nmach; m++) {
        parts[m].cn = mach_conn(c, m);
        parts[m].type = NET_DELETE;
        parts[m].enc = penc_name;
        parts[m].done = done_u8;
        parts[m].name = name;
    }
    rc = exchange(c, parts, c->nmach, deadline);
    if (rc == GKV_OK)
        rc = refresh(c, deadline);
    else
        route_drop(c);
    gkv__free(parts);
out:
    pthread_mutex_unlock(&c->mu);
    return rc;
}

static void
penc_opt_reset(net_wr *w, const struct part *p)
{
    net__wr_str(w, p->name);
    net__wr_str(w, p->arg != NULL ? p->arg : "");
}

gkv_err
gkv_client_opt_reset(gkv_client *c, const char *name, const char *optimizer)
{
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
    deadline = mono_ms() + (uint64_t)c->timeout_ms;
    if ((rc = route_fresh(c, name, deadline, &r)) != GKV_OK)
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
        parts[np].cn = mach_conn(c, r->sp[i].m);
        parts[np].type = NET_OPT_RESET;
        parts[np].enc = penc_opt_reset;
        parts[np].done = done_u8;
        parts[np].name = name;
        parts[np].arg = optimizer;
        np++;
    }
    rc = exchange(c, parts, np, deadline);
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
    rc = refresh(c, mono_ms() + (uint64_t)c->timeout_ms);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

size_t
gkv_client_nservers(const gkv_client *c)
{
    return c != NULL ? c->ncn : 0;
}

gkv_err
gkv_client_server_info(gkv_client *c, size_t i, gkv_server_info *out)
{
    struct conn *cn;

    net__clear();
    if (c == NULL || out == NULL || i >= c->ncn)
        return net__fail(GKV_EINVAL, "server_info: no server %zu", i);
    pthread_mutex_lock(&c->mu);
    cn = &c->cn[i];
    memset(out, 0, sizeof *out);
    snprintf(out->addr, sizeof out->addr, "%s", cn->addr);
    snprintf(out->host, sizeof out->host, "%s", cn->id.host);
    snprintf(out->name, sizeof out->name, "%s", cn->id.name);
    snprintf(out->store, sizeof out->store, "%s", cn->id.store);
    snprintf(out->version, sizeof out->version, "%s", cn->id.version);
    out->machine = cn->have_id ? cn->id.machine : cn->machine;
    out->server_id = cn->have_id ? cn->id.server_id : cn->server;
    out->num_servers = cn->have_id ? cn->id.num_servers : c->nserv;
    out->pid = cn->id.pid;
    out->lease_ms = cn->id.lease_ms;
    out->max_msg = cn->id.max_msg;
    out->keep_alive = (cn->id.flags & NET_ID_KEEP_ALIVE) != 0;
    out->auth = (cn->id.flags & NET_ID_AUTH) != 0;
    out->connected = cn->ready;
    pthread_mutex_unlock(&c->mu);
    return GKV_OK;
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
    rc = route_fresh(c, name, mono_ms() + (uint64_t)c->timeout_ms, &r);
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

/* ---- barrier, stats, shutdown ------------------------------------------------ */

static void
penc_barrier(net_wr *w, const struct part *p)
{
    net__enc_barrier(w, p->arg);
}

static gkv_err
done_barrier(gkv_client *c, struct part *p, net_rd *rd)
{
    const net_barrier *want = p->arg;
    net_barrier got;

    (void)c;
    if (net__dec_barrier(rd, &got) != 0)
        return cfail(p->cn, GKV_EPROTO, "malformed barrier reply: %s", rd->why);
    if (got.seq != want->seq || got.group_size != want->group_size)
        return cfail(p->cn, GKV_EPROTO, "barrier reply for barrier %llu of "
                     "%u clients; this was barrier %llu of %u",
                     (unsigned long long)got.seq, got.group_size,
                     (unsigned long long)want->seq, want->group_size);
    return GKV_OK;
}

gkv_err
gkv_client_barrier(gkv_client *c, int timeout_ms)
{
    struct part p;
    net_barrier b;
    gkv_err rc;

    net__clear();
    if (c == NULL)
        return net__fail(GKV_EINVAL, "barrier: no client");
    if (c->group_size == 0)
        return net__fail(GKV_EINVAL, "barrier: the group size is unknown "
                         "(set gkv_client_opts.group_size)");
    if (c->rank >= c->group_size)
        return net__fail(GKV_EINVAL, "barrier: rank %u is not below the group "
                         "size %u", c->rank, c->group_size);
    pthread_mutex_lock(&c->mu);
    b.group_size = c->group_size;
    /* counted only once passed: a barrier that failed is tried again
     * with the same seq, which the server answers at once when the group
     * passed it meanwhile (with the request this call abandoned) */
    b.seq = c->barrier_seq + 1;
    memset(&p, 0, sizeof p);
    p.cn = &c->cn[0];
    p.type = NET_BARRIER;
    p.enc = penc_barrier;
    p.done = done_barrier;
    p.arg = &b;
    c->call_ms = timeout_ms > 0 ? timeout_ms : c->timeout_ms;
    rc = exchange(c, &p, 1, mono_ms() + (uint64_t)c->call_ms);
    c->call_ms = c->timeout_ms;
    if (rc == GKV_OK)
        c->barrier_seq = b.seq;
    /* a failed barrier may stay parked on the server (a timeout closes
     * only our socket; the heartbeat keeps the session), and the group
     * may pass it with that request: the next handshake there resumes
     * the session's barrier state (conn_open) */
    c->bar_unsure = rc != GKV_OK;
    pthread_mutex_unlock(&c->mu);
    return rc;
}

static gkv_err
done_stats(gkv_client *c, struct part *p, net_rd *rd)
{
    static const struct { const char *k; size_t off; } keys[] = {
#define K(f) {#f, offsetof(gkv_server_stats, f)}
        K(uptime_ms), K(requests), K(errors), K(rejected), K(bytes_in),
        K(bytes_out), K(pulls), K(pull_rows), K(pushes), K(push_rows),
        K(sessions), K(groups), K(joined), K(tensors),
        K(store_used_bytes), K(store_map_size), K(samples), K(sample_edges),
        K(store_free_bytes),
#undef K
    };
    net_stats *st = gkv__malloc(sizeof *st);
    gkv_server_stats *out = p->out;

    (void)c;
    if (st == NULL)
        return net__fail(GKV_ENOMEM, "out of memory");
    if (net__dec_stats(rd, st) != 0) {
        gkv_err rc = cfail(p->cn, GKV_EPROTO, "malformed stats reply: %s",
                           rd->why);
        gkv__free(st);
        return rc;
    }
    memset(out, 0, sizeof *out);
    /* unknown keys are a newer server's: skipped */
    for (uint32_t i = 0; i < st->n; i++)
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
            if (strcmp(st->kv[i].key, keys[k].k) == 0)
                memcpy((char *)out + keys[k].off, &st->kv[i].val, 8);
    gkv__free(st);
    return GKV_OK;
}

gkv_err
gkv_client_stats(gkv_client *c, size_t i, gkv_server_stats *out)
{
    struct part p;
    gkv_err rc;

    net__clear();
    if (c == NULL || out == NULL || i >= c->ncn)
        return net__fail(GKV_EINVAL, "stats: no server %zu", i);
    pthread_mutex_lock(&c->mu);
    memset(&p, 0, sizeof p);
    p.cn = &c->cn[i];
    p.type = NET_STATS;
    p.enc = penc_empty;
    p.done = done_stats;
    p.out = out;
    rc = exchange(c, &p, 1, mono_ms() + (uint64_t)c->timeout_ms);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

static void
penc_u8(net_wr *w, const struct part *p)
{
    net__wr_u8(w, *(const uint8_t *)p->arg);
}

gkv_err
gkv_client_shutdown(gkv_client *c, int force)
{
    struct part *parts;
    uint8_t f = force ? 1 : 0;
    gkv_err rc;

    net__clear();
    if (c == NULL)
        return net__fail(GKV_EINVAL, "shutdown: no client");
    pthread_mutex_lock(&c->mu);
    if ((parts = gkv__calloc(c->ncn, sizeof *parts)) == NULL) {
        pthread_mutex_unlock(&c->mu);
        return net__fail(GKV_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < c->ncn; i++) {
        parts[i].cn = &c->cn[i];
        parts[i].type = NET_SHUTDOWN;
        parts[i].enc = penc_u8;
        parts[i].done = done_u8;
        parts[i].arg = &f;
    }
    rc = exchange(c, parts, c->ncn, mono_ms() + (uint64_t)c->timeout_ms);
    /* a stopping server is not there to leave later, nor to send
     * heartbeats to: the session goes (gkv_client_close leaves wherever
     * one is held, also over a broken connection) */
    for (size_t i = 0; i < c->ncn; i++)
        if (parts[i].rc == GKV_OK && (parts[i].rflags & NET_F_STOPPING)) {
            conn_break(&c->cn[i]);
            pthread_mutex_lock(&c->hb_mu);
            c->cn[i].session = 0;
            pthread_mutex_unlock(&c->hb_mu);
        }
    gkv__free(parts);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

/* ---- graph requests ---------------------------------------------------------
 *
 * Seeds and IDs are routed by the partition book: machine m serves
 * partition m. A machine's share goes in one message to one of its servers,
 * or is cut into slices spread over its servers when it is large. Each
 * slice keeps the request's order, and each node is asked once (dedup),
 * so the answers, node by node in the order asked, merge back in request
 * order. */

#define GSPLIT   512          /* IDs per server before a machine's share is
                               * spread over its servers */
#define GMAX_IDS (1u << 20)   /* IDs per message at most */

const gkv_pbook *
gkv_client_pbook(const gkv_client *c)
{
    return c != NULL ? c->book : NULL;
}

static gkv_err
need_book(gkv_client *c, const char *what)
{
    if (c->book == NULL)
        return net__fail(GKV_ENOTSUP, "%s: the servers serve a store, not "
                         "the partitions of a graph (start them with "
                         "--part-config)", what);
    if (c->single)
        return net__fail(GKV_ENOTSUP, "%s: a client of one server "
                         "(gkv_client_connect_addr) does not route graph "
                         "requests; connect with the job's ip_config", what);
    return GKV_OK;
}

/* Into how many slices a machine's 'cnt' IDs are cut, 'per' IDs a
 * message at most (1 .. GMAX_IDS). */
static size_t
gpieces(gkv_client *c, size_t cnt, size_t per)
{
    size_t k = 1, most = (cnt + per - 1) / per;

    if (c->nserv > 1 && cnt >= 2 * GSPLIT) {
        k = cnt / GSPLIT;
        if (k > c->nserv)
            k = c->nserv;
    }
    return most > k ? most : k;
}

/* Splits a slice's answer (edges grouped node by node, the nodes distinct
 * and in the slice's order; col[] the node each edge belongs to) into
 * per-node counts cnt[]. -1 when the edges do not match the nodes. */
static int
split_edges(const int64_t *ids, const size_t *idx, size_t n,
            const int64_t *col, size_t m, size_t *cnt)
{
    size_t e = 0;

    for (size_t j = 0; j < n; j++) {
        int64_t v = ids[idx != NULL ? idx[j] : j];
        size_t t = 0;

        while (e + t < m && col[e + t] == v)
            t++;
        cnt[j] = t;
        e += t;
    }
    return e == m ? 0 : -1;
}

/* The relabelling table of one block: (node type, global ID) -> local ID,
 * open addressing. */
struct hent {
    int64_t v;
    int32_t t;                 /* -1: an empty slot */
    int32_t loc;
};

static uint64_t
hmix(int64_t v, int t)
{
    uint64_t z = (uint64_t)v + (uint64_t)t * 0x9e3779b97f4a7c15ull;

    z ^= z >> 30;
    z *= 0xbf58476d1ce4e5b9ull;
    z ^= z >> 27;
    z *= 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The entry of (t, v): found, or the empty slot where it goes. */
static struct hent *
hfind(struct hent *h, size_t mask, int t, int64_t v)
{
    size_t i = (size_t)hmix(v, t) & mask;

    while (h[i].t >= 0 && (h[i].v != v || h[i].t != t))
        i = (i + 1) & mask;
    return &h[i];
}

/* The distinct values of ids[0..n) in order of first appearance into
 * *uniq (*nu of them), and map[i] = the index of ids[i] there. Asking each
 * node once keeps the servers' answers unambiguous: they list edges node
 * by node, and a node without edges leaves no trace. */
static gkv_err
dedup(const int64_t *ids, size_t n, int64_t **uniq, size_t *nu, size_t **map)
{
    size_t cap = 16, mask, k = 0;
    struct hent *h;
    int64_t *u;
    size_t *mp;

    while (cap < 2 * n + 16)
        cap <<= 1;
    mask = cap - 1;
    h = gkv__malloc(cap * sizeof *h);
    u = gkv__malloc(n * 8 + 8);
    mp = gkv__malloc(n * sizeof *mp + 8);
    if (h == NULL || u == NULL || mp == NULL) {
        gkv__free(h);
        gkv__free(u);
        gkv__free(mp);
        return net__fail(GKV_ENOMEM, "out of memory for %zu IDs", n);
    }
    memset(h, 0xff, cap * sizeof *h);
    for (size_t i = 0; i < n; i++) {
        struct hent *x = hfind(h, mask, 0, ids[i]);
        if (x->t < 0) {
            x->t = 0;
            x->v = ids[i];
            x->loc = (int32_t)k;
            u[k++] = ids[i];
        }
        mp[i] = (size_t)x->loc;
    }
    gkv__free(h);
    *uniq = u;
    *nu = k;
    *map = mp;
    return GKV_OK;
}

/* Which machine owns each ID (of node type ty, or edge type ty when
 * by_edge), and the positions of each machine's IDs in request order:
 * pos[start[m] .. start[m] + count[m]). */
static gkv_err
graph_route(gkv_client *c, const char *what, int ty, int by_edge,
            const int64_t *ids, size_t n, size_t *count, size_t *start,
            size_t **posout)
{
    int32_t *own = gkv__malloc(n * sizeof *own + 4);
    size_t *pos = gkv__malloc(n * sizeof *pos + 8), *fill = NULL;
    gkv_err rc;

    *posout = NULL;
    if (own == NULL || pos == NULL ||
        (fill = gkv__malloc(c->nmach * sizeof *fill)) == NULL) {
        rc = net__fail(GKV_ENOMEM, "out of memory");
        goto out;
    }
    rc = by_edge ? gkv_pbook_edge_owner(c->book, ty, ids, n, own) :
                   gkv_pbook_node_owner(c->book, ty, ids, n, own);
    if (rc != GKV_OK) {
        net__fail(rc, "%s: %s", what, gkv_pbook_errmsg(c->book));
        goto out;
    }
    memset(count, 0, c->nmach * sizeof *count);
    for (size_t i = 0; i < n; i++) {
        if (own[i] < 0 || (size_t)own[i] >= c->nmach) {
            rc = net__fail(GKV_EINVAL, "%s: ID %lld belongs to partition %d, "
                           "and the job has %zu machines", what,
                           (long long)ids[i], own[i], c->nmach);
            goto out;
        }
        count[own[i]]++;
    }
    for (size_t m = 0, a = 0; m < c->nmach; m++) {
        start[m] = fill[m] = a;
        a += count[m];
    }
    for (size_t i = 0; i < n; i++)
        pos[fill[own[i]]++] = i;
    *posout = pos;
    pos = NULL;
out:
    gkv__free(own);
    gkv__free(pos);
    gkv__free(fill);
    return rc;
}

/* ---- find_edges, degrees, in_subgraph ---- */

struct gids {                  /* one message of an ID request */
    uint32_t etype;
    const int64_t *ids;        /* the caller's */
    const size_t *idx;         /* the positions of this slice's IDs */
    size_t n;
    int64_t *out[2];           /* find_edges, degrees: scattered by idx */
    int64_t *sub[3];           /* in_subgraph: the slice's edges */
    size_t m;
};

static void
penc_ids(net_wr *w, const struct part *p)
{
    const struct gids *g = p->arg;

    net__enc_ids_req(w, g->etype, g->ids, g->idx, g->n);
}

static gkv_err
done_ids(gkv_client *c, struct part *p, net_rd *rd)
{
    struct gids *g = p->out;
    unsigned k = p->type == NET_FIND_EDGES ? 2 :
                 p->type == NET_IN_SUBGRAPH ? 3 : 1;
    net_cols co;

    (void)c;
    if (net__dec_cols(rd, k, &co, "reply") != 0)
        return cfail(p->cn, GKV_EPROTO, "malformed %s reply: %s",
                     net__type_name(p->type), rd->why);
    if (p->type == NET_IN_SUBGRAPH) {
        for (int i = 0; i < 3; i++) {
            if ((g->sub[i] = gkv__malloc((size_t)co.n * 8 + 8)) == NULL)
                return net__fail(GKV_ENOMEM, "out of memory");
            memcpy(g->sub[i], co.c[i], (size_t)co.n * 8);
        }
        g->m = (size_t)co.n;
        return GKV_OK;
    }
    if (co.n != g->n)
        return cfail(p->cn, GKV_EPROTO, "%s reply holds %llu answers for %zu "
                     "IDs", net__type_name(p->type),
                     (unsigned long long)co.n, g->n);
    for (unsigned i = 0; i < k; i++)
        for (size_t j = 0; j < g->n; j++)
            memcpy(&g->out[i][g->idx[j]], co.c[i] + 8 * j, 8);
    return GKV_OK;
}

/* The IDs one message of request 'type' to machine m may carry: the
 * request (8 bytes an ID) and the reply (8 bytes an ID a column: 2 for
 * find_edges, 1 for the degrees) within the smaller of the servers' and
 * this client's message limits, less room for the fixed fields, as pulls
 * and pushes are cut (part_cap). nanomsg drops a larger request without
 * a word: the call would time out, blaming the server. An in_subgraph
 * reply holds the nodes' in-edges, which the client cannot know: a
 * server refuses one over its limit (GKV_EINVAL, "ask for fewer").
 * 0 when not one ID fits. */
static size_t
ids_per_msg(gkv_client *c, size_t m, uint16_t type)
{
    size_t per = part_cap(c, m, UINT64_MAX) / (type == NET_FIND_EDGES ? 16 : 8);

    return per < GMAX_IDS ? per : GMAX_IDS;
}

/* Routes ids[0..n) (nodes of type 'ty', or edges when by_edge) to their
 * owners with request 'type' on edge type 'etype'; answers go to o0, o1
 * (find_edges, degrees), or with gs != NULL (in_subgraph) stay in the
 * slices *gs[0 .. *ngs), whose idx point into *keep: the caller frees
 * both (and each slice's sub arrays). */
static gkv_err
ids_call(gkv_client *c, uint16_t type, int etype, int ty, int by_edge,
         const int64_t *ids, size_t n, int64_t *o0, int64_t *o1,
         struct gids **gs, size_t *ngs, size_t **keep)
{
    const char *what = net__type_name(type);
    size_t *count = NULL, *start = NULL, *pos = NULL, *per = NULL, np = 0,
           maxp = 0;
    struct part *parts = NULL;
    struct gids *g = NULL;
    gkv_err rc;

    if (gs != NULL) {
        *gs = NULL;
        *ngs = 0;
        *keep = NULL;
    }
    if ((count = gkv__calloc(c->nmach, sizeof *count)) == NULL ||
        (start = gkv__calloc(c->nmach, sizeof *start)) == NULL ||
        (per = gkv__calloc(c->nmach, sizeof *per)) == NULL) {
        rc = net__fail(GKV_ENOMEM, "out of memory");
        goto out;
    }
    if ((rc = graph_route(c, what, ty, by_edge, ids, n, count, start,
                          &pos)) != GKV_OK)
        goto out;
    for (size_t m = 0; m < c->nmach; m++)
        if (count[m] > 0) {
            if ((per[m] = ids_per_msg(c, m, type)) == 0) {
                rc = net__fail(GKV_EINVAL, "%s: machine %zu's servers take "
                               "messages of %llu bytes, too small for one "
                               "ID", what, m, (unsigned long long)
                               c->cn[m * c->nserv].id.max_msg);
                goto out;
            }
            maxp += gpieces(c, count[m], per[m]);
        }
    if ((parts = gkv__calloc(maxp + 1, sizeof *parts)) == NULL ||
        (g = gkv__calloc(maxp + 1, sizeof *g)) == NULL) {
        rc = net__fail(GKV_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t m = 0; m < c->nmach; m++) {
        size_t cnt = count[m], k, base;

        if (cnt == 0)
            continue;
        k = gpieces(c, cnt, per[m]);
        base = c->rr++;
        for (size_t j = 0; j < k; j++) {
            size_t a = cnt * j / k, b = cnt * (j + 1) / k;

            if (a == b)
                continue;
            g[np].etype = (uint32_t)etype;
            g[np].ids = ids;
            g[np].idx = pos + start[m] + a;
            g[np].n = b - a;
            g[np].out[0] = o0;
            g[np].out[1] = o1;
            parts[np].cn = &c->cn[m * c->nserv + (base + j) % c->nserv];
            parts[np].type = type;
            parts[np].enc = penc_ids;
            parts[np].done = done_ids;
            parts[np].arg = &g[np];
            parts[np].out = &g[np];
            np++;
        }
    }
    rc = exchange(c, parts, np, mono_ms() + (uint64_t)c->timeout_ms);
out:
    if (rc == GKV_OK && gs != NULL) {
        /* in_subgraph: the slices and their positions, for the merge */
        *gs = g;
        *ngs = np;
        *keep = pos;
        g = NULL;
        pos = NULL;
    } else if (g != NULL) {
        for (size_t i = 0; i < np; i++)
            for (int k = 0; k < 3; k++)
                gkv__free(g[i].sub[k]);
    }
    gkv__free(g);
    gkv__free(parts);
    gkv__free(count);
    gkv__free(start);
    gkv__free(per);
    gkv__free(pos);
    return rc;
}

/* Checks an edge type and the arrays of an ID request. */
static gkv_err
ids_args(gkv_client *c, const char *what, int etype, const void *in,
         size_t n, const void *o0, const void *o1, gkv_etype_info *ei)
{
    gkv_err rc;

    if ((rc = need_book(c, what)) != GKV_OK)
        return rc;
    if (gkv_pbook_etype_info(c->book, etype, ei) != GKV_OK)
        return net__fail(GKV_EINVAL, "%s: edge type %d: the graph has %d",
                         what, etype, gkv_pbook_num_etypes(c->book));
    if (n > 0 && (in == NULL || o0 == NULL || o1 == NULL))
        return net__fail(GKV_EINVAL, "%s: NULL array with n = %zu", what, n);
    return GKV_OK;
}

/* gkv_client_find_edges with c->mu held (the edge batch calls it inside
 * its own call). */
static gkv_err
find_edges_locked(gkv_client *c, int etype, const int64_t *eids, size_t n,
                  int64_t *src, int64_t *dst)
{
    gkv_etype_info ei;
    gkv_err rc;

    if ((rc = ids_args(c, "find_edges", etype, eids, n, src, dst, &ei)) !=
        GKV_OK || n == 0)
        return rc;
    return ids_call(c, NET_FIND_EDGES, etype, etype, 1, eids, n, src, dst,
                    NULL, NULL, NULL);
}

gkv_err
gkv_client_find_edges(gkv_client *c, int etype, const int64_t *eids, size_t n,
                      int64_t *src, int64_t *dst)
{
    gkv_err rc;

    net__clear();
    if (c == NULL)
        return net__fail(GKV_EINVAL, "find_edges: no client");
    pthread_mutex_lock(&c->mu);
    rc = find_edges_locked(c, etype, eids, n, src, dst);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

static gkv_err
degrees(gkv_client *c, uint16_t type, int etype, const int64_t *nodes,
        size_t n, int64_t *deg)
{
    const char *what = net__type_name(type);
    gkv_etype_info ei;
    gkv_err rc;

    net__clear();
    if (c == NULL)
        return net__fail(GKV_EINVAL, "%s: no client", what);
    pthread_mutex_lock(&c->mu);
    if ((rc = ids_args(c, what, etype, nodes, n, deg, deg, &ei)) == GKV_OK &&
        n > 0)
        rc = ids_call(c, type, etype, type == NET_IN_DEGREES ? ei.dst_ntype :
                      ei.src_ntype, 0, nodes, n, deg, NULL, NULL, NULL, NULL);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

gkv_err
gkv_client_in_degrees(gkv_client *c, int etype, const int64_t *nodes,
                      size_t n, int64_t *deg)
{
    return degrees(c, NET_IN_DEGREES, etype, nodes, n, deg);
}

gkv_err
gkv_client_out_degrees(gkv_client *c, int etype, const int64_t *nodes,
                       size_t n, int64_t *deg)
{
    return degrees(c, NET_OUT_DEGREES, etype, nodes, n, deg);
}

gkv_err
gkv_client_in_subgraph(gkv_client *c, int etype, const int64_t *nodes,
                       size_t n, int64_t **src, int64_t **dst, int64_t **eid,
                       size_t *m)
{
    struct gids *g = NULL;
    size_t ng = 0, *pos = NULL, *cnt = NULL, *off = NULL, *pc = NULL, total = 0;
    size_t nu = 0, *map = NULL;
    int64_t *uniq = NULL;
    uint32_t *which = NULL;
    int64_t *o[3] = {NULL, NULL, NULL};
    gkv_etype_info ei;
    gkv_err rc;

    net__clear();
    if (c == NULL || src == NULL || dst == NULL || eid == NULL || m == NULL)
        return net__fail(GKV_EINVAL, "in_subgraph: missing argument");
    *src = *dst = *eid = NULL;
    *m = 0;
    pthread_mutex_lock(&c->mu);
    if ((rc = ids_args(c, "in_subgraph", etype, nodes, n, src, dst, &ei)) !=
        GKV_OK || n == 0)
        goto out;
    if ((rc = dedup(nodes, n, &uniq, &nu, &map)) != GKV_OK ||
        (rc = ids_call(c, NET_IN_SUBGRAPH, etype, ei.dst_ntype, 0, uniq, nu,
                       NULL, NULL, &g, &ng, &pos)) != GKV_OK)
        goto out;
    if ((cnt = gkv__malloc(nu * sizeof *cnt)) == NULL ||
        (off = gkv__malloc(nu * sizeof *off)) == NULL ||
        (pc = gkv__malloc(nu * sizeof *pc)) == NULL ||
        (which = gkv__malloc(nu * sizeof *which)) == NULL) {
        rc = net__fail(GKV_ENOMEM, "out of memory");
        goto out;
    }
    /* each slice's edges, node by node, back to the request's order */
    for (size_t k = 0; k < ng; k++) {
        size_t a = 0;

        if (split_edges(uniq, g[k].idx, g[k].n, g[k].sub[1], g[k].m, pc) != 0) {
            rc = net__fail(GKV_EPROTO, "in_subgraph: a server's edges do not "
                           "match the nodes asked for");
            goto out;
        }
        for (size_t j = 0; j < g[k].n; j++) {
            size_t i = g[k].idx[j];
            which[i] = (uint32_t)k;
            off[i] = a;
            cnt[i] = pc[j];
            a += pc[j];
        }
    }
    for (size_t i = 0; i < n; i++)
        total += cnt[map[i]];
    for (int i = 0; i < 3; i++)
        if ((o[i] = gkv__malloc(total * 8 + 8)) == NULL) {
            rc = net__fail(GKV_ENOMEM, "out of memory for %zu edges", total);
            goto out;
        }
    for (size_t i = 0, at = 0; i < n; i++) {
        size_t u = map[i];
        const struct gids *gi = &g[which[u]];
        for (int k = 0; k < 3; k++)
            memcpy(o[k] + at, gi->sub[k] + off[u], cnt[u] * 8);
        at += cnt[u];
    }
    if (total > 0) {
        *src = o[0];
        *dst = o[1];
        *eid = o[2];
        o[0] = o[1] = o[2] = NULL;
    }
    *m = total;
out:
    for (int i = 0; i < 3; i++)
        gkv__free(o[i]);
    for (size_t k = 0; k < ng; k++)
        for (int i = 0; i < 3; i++)
            gkv__free(g[k].sub[i]);
    gkv__free(g);
    gkv__free(pos);
    gkv__free(cnt);
    gkv__free(off);
    gkv__free(pc);
    gkv__free(which);
    gkv__free(uniq);
    gkv__free(map);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

/* ---- sampling ---- */

struct spet {                  /* one edge type of a SAMPLE reply (arena) */
    size_t n;                  /* edges */
    uint32_t wide;             /* NET_SAMPLE_WIDE_* */
    const uint32_t *cnt;       /* per seed of the centre type, as sent */
    const void *nbr, *eid;     /* n x (u32 or i64) */
};

struct spiece {                /* one SAMPLE message: seeds of one machine */
    net_sample_enc enc;
    int64_t **seeds;           /* [nnt] this slice's seeds (gathered) */
    size_t *nseeds;            /* [nnt] */
    const size_t **pos;        /* [nnt] their positions in the request */
    size_t *ctr;               /* [net] the centre type's seed count */
    struct spet *et;           /* [net] the reply */
    int net;
    /* weights by position (out-edges by an edge feature): [net] */
    size_t *nwc, *nw;
    uint32_t **wc;
    float **w;
};

/* The relabelling of sample_blocks, done while merging a hop: the hop's
 * seeds (distinct) are the block's destination nodes; every neighbour
 * gets a local ID in order of first appearance. */
struct relab {
    int32_t **mk;              /* [nnt] markers: local ID + 1, 0 = none */
    int64_t **ids;             /* [nnt] out: the block's node lists */
    size_t *nsrc;              /* [nnt] out: their lengths (markers set) */
    gkv_sample_edges *be;      /* [net] out: local src, dst and eid */
};

static void
penc_sample(net_wr *w, const struct part *p)
{
    const struct spiece *sp = p->arg;

    net__enc_sample_req(w, &sp->enc);
}

/* Copies one column of n IDs (u32 or i64 on the wire) into the arena. */
static const void *
col_copy(gkv_client *c, const unsigned char *p, size_t n, int wide)
{
    size_t b = n * (wide ? 8 : 4);
    void *d = arena_alloc(c, b);

    if (d != NULL && b > 0)
        memcpy(d, p, b);
    return d;
}

static gkv_err
done_sample(gkv_client *c, struct part *p, net_rd *rd)
{
    struct spiece *sp = p->out;
    net_sample_rep rep;
    int d = net__dec_sample_rep(rd, &rep);

    if (d == NET_DEC_NOMEM)     /* ours, not the server's */
        return net__fail(GKV_ENOMEM, "out of memory for a sample reply of "
                         "%zu bytes", rd->len);
    if (d != 0)
        return cfail(p->cn, GKV_EPROTO, "malformed sample reply: %s", rd->why);
    if (rep.net != (uint32_t)sp->net) {
        net__sample_rep_free(&rep);
        return cfail(p->cn, GKV_EPROTO, "sample reply for %u edge types, the "
                     "graph has %d", rep.net, sp->net);
    }
    for (int e = 0; e < sp->net; e++) {
        const net_sample_et *x = &rep.e[e];
        struct spet *o = &sp->et[e];
        size_t n = (size_t)x->n;

        if (x->nc != sp->ctr[e]) {
            net__sample_rep_free(&rep);
            return cfail(p->cn, GKV_EPROTO, "sample reply: %llu counts for "
                         "edge type %d, and %zu seeds were sent",
                         (unsigned long long)x->nc, e, sp->ctr[e]);
        }
        o->n = n;
        o->wide = x->wide;
        o->cnt = col_copy(c, x->cnt, (size_t)x->nc, 0);
        o->nbr = col_copy(c, x->nbr, n, (x->wide & NET_SAMPLE_WIDE_NBR) != 0);
        o->eid = col_copy(c, x->eid, n, (x->wide & NET_SAMPLE_WIDE_EID) != 0);
        if (o->cnt == NULL || o->nbr == NULL || o->eid == NULL) {
            net__sample_rep_free(&rep);
            return net__fail(GKV_ENOMEM, "out of memory for %zu edges", n);
        }
    }
    net__sample_rep_free(&rep);
    return GKV_OK;
}

/* dst[0 .. k) = column[at .. at + k) as int64. */
static void
col_widen(int64_t *dst, const void *col, int wide, size_t at, size_t k)
{
    if (wide) {
        memcpy(dst, (const int64_t *)col + at, k * 8);
    } else {
        const uint32_t *s = (const uint32_t *)col + at;
        for (size_t i = 0; i < k; i++)
            dst[i] = (int64_t)s[i];
    }
}

/* out's three columns for n edges, in the arena (*ap: src, then dst, then
 * eid). */
static gkv_err
edges_alloc(gkv_client *c, gkv_sample_edges *out, size_t n, int64_t **ap)
{
    int64_t *a = arena_alloc(c, 3 * n * 8);

    *ap = a;
    if (a == NULL)
        return net__fail(GKV_ENOMEM, "out of memory for %zu edges", n);
    out->src = a;
    out->dst = a + n;
    out->eid = a + 2 * n;
    out->n = n;
    return GKV_OK;
}

/* The block's node lists, room for every neighbour the replies hold;
 * the destination nodes (the hop's seeds) first, marked. */
static gkv_err
relab_begin(gkv_client *c, struct relab *rl, const int64_t *const *seeds,
            const size_t *nseeds, const struct spiece *sp, size_t np, int dir)
{
    int nnt = gkv_pbook_num_ntypes(c->book), net_ = gkv_pbook_num_etypes(c->book);

    for (int t = 0; t < nnt; t++) {
        size_t room = nseeds[t];
        for (int e = 0; e < net_; e++) {
            gkv_etype_info ei;
            gkv_pbook_etype_info(c->book, e, &ei);
            if ((dir == GKV_DIR_IN ? ei.src_ntype : ei.dst_ntype) == t)
                for (size_t k = 0; k < np; k++)
                    room += sp[k].et[e].n;
        }
        if (room > INT32_MAX - 1)
            return net__fail(GKV_EINVAL, "sample_blocks: %zu nodes of type "
                             "%d in one block: too many", room, t);
        if ((rl->ids[t] = arena_alloc(c, room * 8)) == NULL)
            return net__fail(GKV_ENOMEM, "out of memory");
    }
    for (int t = 0; t < nnt; t++) {
        int32_t *mk = rl->mk[t];
        for (size_t i = 0; i < nseeds[t]; i++) {
            mk[seeds[t][i]] = (int32_t)i + 1;
            rl->ids[t][i] = seeds[t][i];
        }
        rl->nsrc[t] = nseeds[t];
    }
    return GKV_OK;
}

#define RL_PF 16               /* marker prefetch distance, edges */

/* Edge type e of the block: seed i (destination i) has cnt[i] edges at
 * off[i] in piece which[i]; each neighbour gets its local ID, a new one
 * in order of first appearance. */
static gkv_err
relab_etype(gkv_client *c, struct relab *rl, int e, int dir,
            const struct spiece *sp, size_t ns, const uint32_t *which,
            const size_t *off, const size_t *cnt)
{
    gkv_etype_info ei;
    int nt;
    int64_t nn, *a, *nids;
    int32_t *mk;
    size_t total = 0, k;

    gkv_pbook_etype_info(c->book, e, &ei);
    nt = dir == GKV_DIR_IN ? ei.src_ntype : ei.dst_ntype;
    nn = gkv_pbook_num_nodes(c->book, nt);
    for (size_t i = 0; i < ns; i++)
        total += cnt[i];
    if ((a = arena_alloc(c, 3 * total * 8)) == NULL)
        return net__fail(GKV_ENOMEM, "out of memory for %zu edges", total);
    mk = rl->mk[nt];
    nids = rl->ids[nt];
    k = rl->nsrc[nt];
    /* the neighbours and edge IDs in block order (neighbours checked),
     * then their local IDs: the markers are random accesses, prefetched
     * RL_PF edges ahead */
    for (size_t i = 0, j = 0; i < ns; i++) {
        const struct spet *x = &sp[which[i]].et[e];

        col_widen(a + j, x->nbr, (x->wide & NET_SAMPLE_WIDE_NBR) != 0,
                  off[i], cnt[i]);
        col_widen(a + 2 * total + j, x->eid,
                  (x->wide & NET_SAMPLE_WIDE_EID) != 0, off[i], cnt[i]);
        for (size_t q = 0; q < cnt[i]; q++, j++) {
            if (a[j] < 0 || a[j] >= nn)
                return net__fail(GKV_EPROTO, "sample_blocks: a server sent "
                                 "neighbour %lld for edge type %d, and node "
                                 "type %d has %lld nodes", (long long)a[j], e,
                                 nt, (long long)nn);
            a[total + j] = (int64_t)i;
        }
    }
    for (size_t j = 0; j < total; j++) {
        int64_t v = a[j];
        int32_t l;

        if (j + RL_PF < total)
            __builtin_prefetch(&mk[a[j + RL_PF]], 1);
        if ((l = mk[v]) == 0) {
            nids[k] = v;
            l = (int32_t)++k;
            mk[v] = l;
        }
        a[j] = l - 1;
    }
    rl->nsrc[nt] = k;
    rl->be[e].src = a;
    rl->be[e].dst = a + total;
    rl->be[e].eid = a + 2 * total;
    rl->be[e].n = total;
    return GKV_OK;
}

/* Checks the arguments of a sampling call. */
static gkv_err
sample_args(gkv_client *c, const char *what, const int64_t *const *seeds,
            const size_t *nseeds, const int *fan, int nfan, int nlayers,
            const gkv_sample_opts *o)
{
    int nnt, net_;
    gkv_err rc;

    if ((rc = need_book(c, what)) != GKV_OK)
        return rc;
    nnt = gkv_pbook_num_ntypes(c->book);
    net_ = gkv_pbook_num_etypes(c->book);
    if (seeds == NULL || nseeds == NULL || fan == NULL)
        return net__fail(GKV_EINVAL, "%s: seeds, nseeds or fanouts is NULL",
                         what);
    for (int t = 0; t < nnt; t++)
        if (nseeds[t] > 0 && seeds[t] == NULL)
            return net__fail(GKV_EINVAL, "%s: seeds[%d] is NULL with "
                             "nseeds[%d] = %zu", what, t, t, nseeds[t]);
    if (nfan != 1 && nfan != net_)
        return net__fail(GKV_EINVAL, "%s: nfan %d is neither 1 nor the number "
                         "of edge types (%d)", what, nfan, net_);
    for (int i = 0; i < nlayers * nfan; i++)
        if (fan[i] < -1)
            return net__fail(GKV_EINVAL, "%s: fanout[%d] = %d: a fanout is -1 "
                             "(all) or >= 0", what, i, fan[i]);
    if (o != NULL) {
        if (o->dir != GKV_DIR_IN && o->dir != GKV_DIR_OUT)
            return net__fail(GKV_EINVAL, "%s: direction %d", what, o->dir);
        if (o->flags & ~(GKV_SAMPLE_REPLACE | GKV_SAMPLE_WEIGHTED))
            return net__fail(GKV_EINVAL, "%s: flags 0x%x have unknown bits",
                             what, o->flags);
        /* the rules of in-process sampling (graph/sample.c, opts_prep):
         * GKV_SAMPLE_WEIGHTED with an edge_w array of any entries */
        if ((o->flags & GKV_SAMPLE_WEIGHTED) && o->edge_w != NULL)
            return net__fail(GKV_EINVAL, "%s: GKV_SAMPLE_WEIGHTED and "
                             "edge_w are both given; choose one source of "
                             "weights", what);
        if (o->edge_w != NULL && o->edge_w_len == NULL)
            return net__fail(GKV_EINVAL, "%s: edge_w is given without "
                             "edge_w_len", what);
        for (int e = 0; o->edge_w != NULL && e < net_; e++) {
            if (o->edge_w[e] == NULL)
                continue;
            if (o->edge_w_len[e] < 0)
                return net__fail(GKV_EINVAL, "%s: edge_w_len[%d] = %lld is "
                                 "negative", what, e,
                                 (long long)o->edge_w_len[e]);
            if (o->edge_w_lo != NULL && o->edge_w_lo[e] < 0)
                return net__fail(GKV_EINVAL, "%s: edge_w_lo[%d] = %lld is "
                                 "negative", what, e,
                                 (long long)o->edge_w_lo[e]);
            if (o->edge_w_feat != NULL && o->edge_w_feat[e] != NULL)
                return net__fail(GKV_EINVAL, "%s: edge type %d has both an "
                                 "edge_w array and edge_w_feat ('%s'); "
                                 "choose one source of weights", what, e,
                                 o->edge_w_feat[e]);
        }
        for (int e = 0; o->edge_w_feat != NULL && e < net_; e++) {
            const char *fn = o->edge_w_feat[e], *canon, *why;
            if (fn == NULL)
                continue;
            canon = gkv_pbook_etype_name(c->book, e);
            if ((why = net__feat_name_bad(fn, strlen(fn))) != NULL)
                return net__fail(GKV_EINVAL, "%s: edge_w_feat[%d] ('%.300s', "
                                 "%zu bytes) has %s: a feature name is 1 to "
                                 "%d bytes of printable ASCII without spaces "
                                 "or '#'", what, e, fn, strlen(fn), why,
                                 GKV_NAME_MAX);
            if (strlen("edge//") + strlen(canon) + strlen(fn) > GKV_NAME_MAX)
                return net__fail(GKV_EINVAL, "%s: edge_w_feat[%d]: tensor "
                                 "'edge/%s/%.300s' would be longer than a "
                                 "tensor name may be (%d bytes)", what, e,
                                 canon, fn, GKV_NAME_MAX);
            if (o->flags & GKV_SAMPLE_WEIGHTED)
                return net__fail(GKV_EINVAL, "%s: edge_w_feat[%d] ('%s') "
                                 "and GKV_SAMPLE_WEIGHTED both give weights; "
                                 "choose one source of weights", what, e, fn);
        }
        /* as in-process: exclude_n alone, or exclude[e] NULL with
         * exclude_n[e] > 0, excludes nothing (ex_count) */
        if (o->exclude != NULL && o->exclude_n == NULL)
            return net__fail(GKV_EINVAL, "%s: exclude is given without "
                             "exclude_n", what);
    }
    return GKV_OK;
}

/* The pieces a hop sends to a machine with cnt seeds: gpieces(), times
 * mult after answers that would not fit (at most one a seed). */
static size_t
hop_pieces(gkv_client *c, size_t cnt, size_t mult)
{
    size_t k = gpieces(c, cnt, GMAX_IDS);

    return k > cnt / mult ? cnt : k * mult;
}

/* After a failed exchange of a hop's pieces: 1 when some failed only
 * because their answer would exceed a server's message limit (NET_F_SPLIT)
 * and their machine's seeds can still be cut finer (mult[m] doubled);
 * 0 when the error stands. */
static int
hop_split(gkv_client *c, const struct part *parts, size_t np,
          const size_t *mtot, size_t *mult)
{
    int more = 0;

    for (size_t i = 0; i < np; i++) {
        size_t m = (size_t)(parts[i].cn - c->cn) / c->nserv;
        if (parts[i].rc == GKV_OK)
            continue;
        if (!(parts[i].rflags & NET_F_SPLIT) ||
            hop_pieces(c, mtot[m], mult[m]) >= mtot[m])
            return 0;
    }
    for (size_t m = 0; m < c->nmach; m++)
        for (size_t i = 0; i < np; i++)
            if (parts[i].rc != GKV_OK &&
                (size_t)(parts[i].cn - c->cn) / c->nserv == m) {
                mult[m] *= 2;
                more = 1;
                break;
            }
    return more;
}

static void
pieces_free(struct spiece *sp, size_t np, int nnt)
{
    for (size_t k = 0; sp != NULL && k < np; k++) {
        for (int t = 0; sp[k].seeds != NULL && t < nnt; t++)
            gkv__free(sp[k].seeds[t]);
        gkv__free(sp[k].seeds);
        gkv__free(sp[k].nseeds);
        gkv__free((void *)sp[k].pos);
        gkv__free(sp[k].ctr);
        gkv__free(sp[k].et);
        /* piece_wpos allocates nwc, nw, wc and w in turn and may stop
         * after any of them */
        for (int e = 0; sp[k].wc != NULL && e < sp[k].net; e++)
            gkv__free(sp[k].wc[e]);
        for (int e = 0; sp[k].w != NULL && e < sp[k].net; e++)
            gkv__free(sp[k].w[e]);
        gkv__free(sp[k].nwc);
        gkv__free(sp[k].nw);
        gkv__free(sp[k].wc);
        gkv__free(sp[k].w);
    }
}

/* Drops a hop's pieces and parts, to cut its seeds again. */
static void
pieces_reset(struct spiece **sp, struct part **parts, size_t *np, int nnt)
{
    pieces_free(*sp, *np, nnt);
    gkv__free(*sp);
    gkv__free(*parts);
    *sp = NULL;
    *parts = NULL;
    *np = 0;
}

/* A hop's seeds of each of the nnt types, each once in order of first
 * appearance: seeds_in itself when 'known' distinct (or empty), else a
 * copy in useeds[t] with smap[t] mapping each input to its place (both
 * the caller's to free). */
static gkv_err
seeds_distinct(int nnt, int known, const int64_t *const *seeds_in,
               const size_t *nseeds_in, const int64_t **seeds, size_t *nseeds,
               int64_t **useeds, size_t **smap)
{
    gkv_err rc;

    for (int t = 0; t < nnt; t++) {
        if (known || nseeds_in[t] == 0) {
            seeds[t] = seeds_in[t];
            nseeds[t] = nseeds_in[t];
        } else if ((rc = dedup(seeds_in[t], nseeds_in[t], &useeds[t],
                               &nseeds[t], &smap[t])) != GKV_OK) {
            return rc;
        } else {
            seeds[t] = useeds[t];
        }
    }
    return GKV_OK;
}

/* The payload bytes of SAMPLE request e: the encoder's measuring pass,
 * so that no copy of its layout can drift from it. */
static size_t
sample_req_bytes(const net_sample_enc *e)
{
    net_wr m = {0};

    net__enc_sample_req(&m, e);
    return m.off;
}

/* Piece s's weights by position (NET_SAMPLE_F_WPOS) from wp, indexed by
 * the hop's distinct seeds: per edge type with weights, the counts and
 * weights of the piece's seeds of the centre type. */
static gkv_err
piece_wpos(gkv_client *c, struct spiece *s, const graph__wpos *wp, int dir)
{
    int net_ = s->net;

    if ((s->nwc = gkv__calloc((size_t)net_, sizeof *s->nwc)) == NULL ||
        (s->nw = gkv__calloc((size_t)net_, sizeof *s->nw)) == NULL ||
        (s->wc = gkv__calloc((size_t)net_, sizeof *s->wc)) == NULL ||
        (s->w = gkv__calloc((size_t)net_, sizeof *s->w)) == NULL)
        return net__fail(GKV_ENOMEM, "out of memory");
    for (int e = 0; e < net_; e++) {
        gkv_etype_info ei;
        int ct;
        size_t nc, tot = 0;

        if (wp[e].off == NULL)
            continue;
        gkv_pbook_etype_info(c->book, e, &ei);
        ct = dir == GKV_DIR_IN ? ei.dst_ntype : ei.src_ntype;
        nc = s->nseeds[ct];
        for (size_t q = 0; q < nc; q++) {
            size_t i = s->pos[ct][q];
            tot += (size_t)(wp[e].off[i + 1] - wp[e].off[i]);
        }
        if ((s->wc[e] = gkv__malloc(4 * nc + 4)) == NULL ||
            (s->w[e] = gkv__malloc(4 * tot + 4)) == NULL)
            return net__fail(GKV_ENOMEM, "out of memory");
        s->nwc[e] = nc;
        s->nw[e] = tot;
        tot = 0;
        for (size_t q = 0; q < nc; q++) {
            size_t i = s->pos[ct][q];
            int64_t a = wp[e].off[i], k = wp[e].off[i + 1] - a;
            s->wc[e][q] = (uint32_t)k;
            memcpy(s->w[e] + tot, wp[e].w + a, (size_t)k * 4);
            tot += (size_t)k;
        }
    }
    s->enc.flags |= NET_SAMPLE_F_WPOS;
    s->enc.nwc = s->nwc;
    s->enc.nw = s->nw;
    s->enc.wc = (const uint32_t *const *)s->wc;
    s->enc.w = (const float *const *)s->w;
    return GKV_OK;
}

/* The fields of a hop's SAMPLE requests that every piece shares (all but
 * the seeds and the weights by position). */
static void
sample_enc_init(net_sample_enc *x, const gkv_sample_opts *o, int layer,
                int nnt, int net_, int nfan, const int *fan)
{
    memset(x, 0, sizeof *x);
    x->layer = (uint32_t)layer;
    x->dir = (uint32_t)o->dir;
    x->flags = o->flags;
    x->nnt = (uint32_t)nnt;
    x->net = (uint32_t)net_;
    x->nfan = (uint32_t)nfan;
    x->seed = o->seed;
    x->fanout = fan;
    x->ex = o->exclude;
    x->nex = o->exclude_n;
    for (int e = 0; o->edge_w_feat != NULL && e < net_; e++)
        if (o->edge_w_feat[e] != NULL) {
            x->flags |= NET_SAMPLE_F_FEAT;
            x->feat = o->edge_w_feat;
        }
}

/* The excluded edges of type e a request carries (in-process ignores
 * exclude_n without exclude, and exclude_n[e] with exclude[e] NULL). */
static size_t
ex_count(const gkv_sample_opts *o, int e)
{
    return o->exclude != NULL && o->exclude[e] != NULL ? o->exclude_n[e] : 0;
}

/* Whether the part of a SAMPLE request every piece to machine m carries
 * (the options and the exclusions, sent in full with each piece) fits the
 * message limit 'cap' of m's servers; GKV_EINVAL, naming its size, when
 * no cut of the seeds could make a piece fit. */
static gkv_err
sample_fixed_fits(const gkv_sample_opts *o, int layer, int nnt, int net_,
                  int nfan, const int *fan, size_t m, size_t cap)
{
    net_sample_enc x;
    size_t *zero = gkv__calloc((size_t)nnt + 1, sizeof *zero), nex = 0, b;

    if (zero == NULL)
        return net__fail(GKV_ENOMEM, "out of memory");
    sample_enc_init(&x, o, layer, nnt, net_, nfan, fan);
    x.nseeds = zero;            /* no seeds: what every piece carries */
    b = sample_req_bytes(&x);
    gkv__free(zero);
    if (b <= cap)
        return GKV_OK;
    for (int e = 0; e < net_; e++)
        nex += ex_count(o, e);
    return net__fail(GKV_EINVAL, "sample: the %zu excluded edges (%zu "
                     "bytes) go whole with every request, which takes %zu "
                     "bytes before any seed, and a request to machine %zu "
                     "may carry %zu (the lower of its servers' --max-msg "
                     "and the client's max_msg, less room for headers): "
                     "exclude fewer edges per call, or raise the limit",
                     nex, 8 * nex, b, m, cap);
}

/* One hop through the servers. Without rl: the edges into out[0 .. net)
 * (arena memory), repeated seeds asked once. With rl (the seeds distinct,
 * out unused): relabelled into rl's block. wp: NULL, or per edge type
 * weights by position, indexed by the hop's distinct seeds (in order of
 * first appearance), sent with each piece. */
static gkv_err
hop_once(gkv_client *c, const int64_t *const *seeds_in,
         const size_t *nseeds_in, const int *fan, int nfan, int layer,
         const gkv_sample_opts *o, struct relab *rl, gkv_sample_edges *out,
         const graph__wpos *wp)
{
    static const gkv_sample_opts zero;
    int nnt = gkv_pbook_num_ntypes(c->book), net_ = gkv_pbook_num_etypes(c->book);
    size_t nm = c->nmach, maxp = 0, np = 0, nall = 0, nex = 0;
    size_t *count = NULL, *start = NULL, **pos = NULL, *mtot = NULL;
    size_t *cnt = NULL, *off = NULL, *mult = NULL;
    uint32_t *which = NULL;
    struct spiece *sp = NULL;
    struct part *parts = NULL;
    gkv_err rc = GKV_OK;

    const int64_t **seeds = NULL;
    int64_t **useeds = NULL;
    size_t *nseeds = NULL, **smap = NULL;

    if (o == NULL)
        o = &zero;
    if (rl == NULL)
        memset(out, 0, (size_t)net_ * sizeof *out);
    /* each seed once (the answer is copied to its repeats), unless the
     * caller knows they are distinct (smap[t] NULL: the identity) */
    if ((seeds = gkv__calloc((size_t)nnt, sizeof *seeds)) == NULL ||
        (useeds = gkv__calloc((size_t)nnt, sizeof *useeds)) == NULL ||
        (nseeds = gkv__calloc((size_t)nnt, sizeof *nseeds)) == NULL ||
        (smap = gkv__calloc((size_t)nnt, sizeof *smap)) == NULL) {
        rc = net__fail(GKV_ENOMEM, "out of memory");
        goto out;
    }
    if ((rc = seeds_distinct(nnt, rl != NULL, seeds_in, nseeds_in, seeds,
                             nseeds, useeds, smap)) != GKV_OK)
        goto out;
    if ((count = gkv__calloc((size_t)nnt * nm, sizeof *count)) == NULL ||
        (start = gkv__calloc((size_t)nnt * nm, sizeof *start)) == NULL ||
        (pos = gkv__calloc((size_t)nnt, sizeof *pos)) == NULL ||
        (mtot = gkv__calloc(nm, sizeof *mtot)) == NULL ||
        (mult = gkv__calloc(nm, sizeof *mult)) == NULL) {
        rc = net__fail(GKV_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t m = 0; m < nm; m++)
        mult[m] = 1;
    for (int t = 0; t < nnt; t++) {
        char what[64];
        if (nseeds[t] == 0)
            continue;
        snprintf(what, sizeof what, "sample: seeds of node type %d", t);
        if ((rc = graph_route(c, what, t, 0, seeds[t], nseeds[t],
                              count + (size_t)t * nm, start + (size_t)t * nm,
                              &pos[t])) != GKV_OK)
            goto out;
        for (size_t m = 0; m < nm; m++)
            mtot[m] += count[(size_t)t * nm + m];
        if (nseeds[t] > nall)
            nall = nseeds[t];
    }
    for (int e = 0; e < net_; e++)
        nex += ex_count(o, e);
    /* the exclusions go whole with every piece: when they alone are more
     * than a server takes, no cut of the seeds helps (and the request
     * would be dropped unanswered, a timeout) */
    for (size_t m = 0; m < nm; m++)
        if (mtot[m] > 0 &&
            (rc = sample_fixed_fits(o, layer, nnt, net_, nfan, fan, m,
                                    part_cap(c, m, UINT64_MAX))) != GKV_OK)
            goto out;
again:
    maxp = np = 0;
    for (size_t m = 0; m < nm; m++)
        if (mtot[m] > 0)
            maxp += hop_pieces(c, mtot[m], mult[m]);
    if ((sp = gkv__calloc(maxp + 1, sizeof *sp)) == NULL ||
        (parts = gkv__calloc(maxp + 1, sizeof *parts)) == NULL) {
        rc = net__fail(GKV_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t m = 0; m < nm; m++) {
        size_t k, base, cap;

        if (mtot[m] == 0)
            continue;
        k = hop_pieces(c, mtot[m], mult[m]);
        base = c->rr++;
        cap = part_cap(c, m, UINT64_MAX);
        for (size_t j = 0; j < k; j++) {
            struct spiece *s = &sp[np];
            size_t any = 0, bytes;

            s->net = net_;
            if ((s->seeds = gkv__calloc((size_t)nnt, sizeof *s->seeds)) == NULL ||
                (s->nseeds = gkv__calloc((size_t)nnt, sizeof *s->nseeds)) == NULL ||
                (s->pos = gkv__calloc((size_t)nnt, sizeof *s->pos)) == NULL ||
                (s->ctr = gkv__calloc((size_t)net_, sizeof *s->ctr)) == NULL ||
                (s->et = gkv__calloc((size_t)net_, sizeof *s->et)) == NULL) {
                np++;
                rc = net__fail(GKV_ENOMEM, "out of memory");
                goto out;
            }
            np++;
            for (int t = 0; t < nnt; t++) {
                size_t ct = count[(size_t)t * nm + m];
                size_t a = ct * j / k, b = ct * (j + 1) / k;
                const size_t *ps = pos[t] != NULL ?
                    pos[t] + start[(size_t)t * nm + m] + a : NULL;

                if (a == b)
                    continue;
                if ((s->seeds[t] = gkv__malloc((b - a) * 8)) == NULL) {
                    rc = net__fail(GKV_ENOMEM, "out of memory");
                    goto out;
                }
                for (size_t q = 0; q < b - a; q++)
                    s->seeds[t][q] = seeds[t][ps[q]];
                s->nseeds[t] = b - a;
                s->pos[t] = ps;
                any += b - a;
            }
            if (any == 0) {
                np--;
                for (int t = 0; t < nnt; t++)
                    gkv__free(s->seeds[t]);
                gkv__free(s->seeds);
                gkv__free(s->nseeds);
                gkv__free((void *)s->pos);
                gkv__free(s->ctr);
                gkv__free(s->et);
                memset(s, 0, sizeof *s);
                continue;
            }
            for (int e = 0; e < net_; e++) {
                gkv_etype_info ei;
                gkv_pbook_etype_info(c->book, e, &ei);
                s->ctr[e] = s->nseeds[o->dir == GKV_DIR_IN ? ei.dst_ntype :
                                      ei.src_ntype];
            }
            sample_enc_init(&s->enc, o, layer, nnt, net_, nfan, fan);
            s->enc.seeds = (const int64_t *const *)s->seeds;
            s->enc.nseeds = s->nseeds;
            if (wp != NULL &&
                (rc = piece_wpos(c, s, wp, o->dir)) != GKV_OK)
                goto out;
            if ((bytes = sample_req_bytes(&s->enc)) > cap) {
                /* more seeds (or their weights) than a message to the
                 * server carries, beside the exclusions every piece
                 * repeats: nanomsg would drop it unanswered. Cut this
                 * machine's seeds finer, while they can be. */
                if (hop_pieces(c, mtot[m], mult[m]) >= mtot[m]) {
                    rc = net__fail(GKV_EINVAL, "sample: a request of "
                                   "one seed (of each node type)%s takes "
                                   "%zu bytes with the options and %zu "
                                   "excluded edges, and a request to "
                                   "machine %zu may carry %zu bytes",
                                   wp == NULL ? "" : o->dir == GKV_DIR_IN ?
                                   " and the weights of its in-edges" :
                                   " and the weights of its out-edges",
                                   bytes, nex, m, cap);
                    goto out;
                }
                mult[m] *= 2;
                pieces_reset(&sp, &parts, &np, nnt);
                goto again;
            }
            parts[np - 1].cn = &c->cn[m * c->nserv + (base + j) % c->nserv];
            parts[np - 1].type = NET_SAMPLE;
            parts[np - 1].enc = penc_sample;
            parts[np - 1].done = done_sample;
            parts[np - 1].arg = s;
            parts[np - 1].out = s;
        }
    }
    rc = exchange(c, parts, np, mono_ms() + (uint64_t)c->timeout_ms);
    if (rc != GKV_OK && hop_split(c, parts, np, mtot, mult)) {
        /* a server's answer would exceed its message limit: the same
         * hop in more, smaller pieces (a seed's picks do not depend on
         * the other seeds of its request) */
        pieces_reset(&sp, &parts, &np, nnt);
        net__clear();
        goto again;
    }
    if (rc != GKV_OK)
        goto out;
    /* merge: per edge type, seed by seed in the request's order */
    if ((cnt = gkv__malloc(nall * sizeof *cnt + 8)) == NULL ||
        (off = gkv__malloc(nall * sizeof *off + 8)) == NULL ||
        (which = gkv__malloc(nall * sizeof *which + 8)) == NULL) {
        rc = net__fail(GKV_ENOMEM, "out of memory");
        goto out;
    }
    if (rl != NULL && (rc = relab_begin(c, rl, seeds, nseeds, sp, np, o->dir))
        != GKV_OK)
        goto out;
    for (int e = 0; e < net_; e++) {
        gkv_etype_info ei;
        int ct;
        size_t total = 0, ns;
        int64_t *ea;

        gkv_pbook_etype_info(c->book, e, &ei);
        ct = o->dir == GKV_DIR_IN ? ei.dst_ntype : ei.src_ntype;
        ns = nseeds_in[ct];
        for (size_t k = 0; k < np; k++) {
            const struct spiece *s = &sp[k];
            size_t at = 0;

            for (size_t j = 0; j < s->nseeds[ct]; j++) {
                size_t i = s->pos[ct][j];
                which[i] = (uint32_t)k;
                off[i] = at;
                cnt[i] = s->et[e].cnt[j];
                at += cnt[i];
            }
        }
        if (rl != NULL) {
            if ((rc = relab_etype(c, rl, e, o->dir, sp, ns, which, off,
                                  cnt)) != GKV_OK)
                goto out;
            continue;
        }
        for (size_t i = 0; i < ns; i++)
            total += cnt[smap[ct] != NULL ? smap[ct][i] : i];
        if ((rc = edges_alloc(c, &out[e], total, &ea)) != GKV_OK)
            goto out;
        for (size_t i = 0, at = 0; i < ns; i++) {
            size_t u = smap[ct] != NULL ? smap[ct][i] : i;
            const struct spet *x = &sp[which[u]].et[e];
            int64_t *cc = o->dir == GKV_DIR_IN ? ea + total : ea;
            int64_t *nb = o->dir == GKV_DIR_IN ? ea : ea + total;

            for (size_t q = 0; q < cnt[u]; q++)
                cc[at + q] = seeds_in[ct][i];
            col_widen(nb + at, x->nbr, (x->wide & NET_SAMPLE_WIDE_NBR) != 0,
                      off[u], cnt[u]);
            col_widen(ea + 2 * total + at, x->eid,
                      (x->wide & NET_SAMPLE_WIDE_EID) != 0, off[u], cnt[u]);
            at += cnt[u];
        }
    }
out:
    pieces_free(sp, np, nnt);
    gkv__free(mult);
    for (int t = 0; pos != NULL && t < nnt; t++)
        gkv__free(pos[t]);
    /* useeds and smap are allocated one after the other: either may be
     * missing */
    for (int t = 0; useeds != NULL && t < nnt; t++)
        gkv__free(useeds[t]);
    for (int t = 0; smap != NULL && t < nnt; t++)
        gkv__free(smap[t]);
    gkv__free(useeds);
    gkv__free((void *)seeds);
    gkv__free(nseeds);
    gkv__free(smap);
    gkv__free(pos);
    gkv__free(sp);
    gkv__free(parts);
    gkv__free(count);
    gkv__free(start);
    gkv__free(mtot);
    gkv__free(cnt);
    gkv__free(off);
    gkv__free(which);
    if (rc != GKV_OK && rl == NULL)
        memset(out, 0, (size_t)net_ * sizeof *out);
    return rc;
}

/* rc, with the message of the failed pull of edge feature 'name' (edge
 * type e) put in context. */
static gkv_err
wpos_fail(gkv_err rc, int e, const char *name)
{
    char why[1024];

    snprintf(why, sizeof why, "%s", gkv_net_errmsg());
    return net__fail(rc, "sample: weights of edge type %d from edge feature "
                     "'%s': %s", e, name, why);
}

/* Out-edge weights from edge feature e's tensor 'name' for the n edges
 * eids (int64), converted to floats into w (n of them). */
static gkv_err
wpos_pull(gkv_client *c, int e, const char *name, const int64_t *eids,
          size_t n, float *w)
{
    const struct route *r;
    size_t rb, es;
    gkv_dtype dt;
    unsigned char *buf = NULL;
    int64_t bad;
    gkv_err rc;

    if ((rc = route_fresh(c, name, mono_ms() + (uint64_t)c->timeout_ms, &r))
        != GKV_OK)
        return wpos_fail(rc, e, name);
    rb = (size_t)r->t.row_bytes;
    dt = (gkv_dtype)r->t.dtype;
    es = gkv_dtype_size(dt);
    if (es == 0 || rb != es)
        return net__fail(GKV_EINVAL, "sample: edge feature '%s' has rows of "
                         "%zu elements; a sampling weight needs one per edge "
                         "(row shape () or (1))", name, es ? rb / es : 0);
    if (n == 0)
        return GKV_OK;
    if ((buf = gkv__malloc(n * rb)) == NULL)
        return net__fail(GKV_ENOMEM, "out of memory for %zu weights", n);
    if ((rc = pull_locked(c, name, r, (const uint64_t *)eids, n, buf,
                          n * rb)) != GKV_OK) {
        gkv__free(buf);
        return wpos_fail(rc, e, name);
    }
    bad = net__w_convert(buf, dt, n, w);
    gkv__free(buf);
    if (bad >= 0) {
        int32_t own = -1;
        gkv_pbook_edge_owner(c->book, e, &eids[bad], 1, &own);
        return net__fail(GKV_EINVAL, "sample: edge feature '%s': edge %lld "
                         "(on partition %d) has weight %g; sampling weights "
                         "must be finite and >= 0", name,
                         (long long)eids[bad], own, (double)w[bad]);
    }
    return GKV_OK;
}

/* Weights of the n listed edges eids of type e from the caller's edge_w
 * array, into w: the checks in-process sampling makes. */
static gkv_err
wpos_array(const gkv_sample_opts *o, int e, const int64_t *eids, size_t n,
           float *w)
{
    int64_t lo = o->edge_w_lo != NULL ? o->edge_w_lo[e] : 0;
    int64_t len = o->edge_w_len[e];

    for (size_t j = 0; j < n; j++) {
        int64_t id = eids[j];
        float v;

        if (id < lo || id - lo >= len)
            return net__fail(GKV_ERANGE, "sample: edge type %d: edge %lld "
                             "has no entry in edge_w[%d] (%lld weights, of "
                             "edges from %lld)", e, (long long)id, e,
                             (long long)len, (long long)lo);
        v = o->edge_w[e][id - lo];
        if (!(v >= 0.0f) || isinf(v))
            return net__fail(GKV_EINVAL, "sample: edge type %d: edge %lld "
                             "has weight %g in edge_w; weights must be "
                             "finite and >= 0", e, (long long)id, (double)v);
        w[j] = v;
    }
    return GKV_OK;
}

/* One hop through the servers (hop_once). Weights the servers cannot
 * find themselves go by position, in three steps: an edge_w array the
 * caller holds (either direction), and an edge feature along out-edges
 * (a node's out-edges include edges other machines own, with their
 * feature rows). A fanout -1 hop lists each distinct seed's non-excluded
 * edges of those types, the client takes their weights from the array or
 * pulls them from the edges' owners, and the hop proper sends them with
 * the seeds: the servers sample exactly as in-process edge_w would. When
 * some type goes by position, so do in-edge features of the hop (a
 * request carries one source of weights). */
static gkv_err
sample_hop(gkv_client *c, const int64_t *const *seeds_in,
           const size_t *nseeds_in, const int *fan, int nfan, int layer,
           const gkv_sample_opts *o, struct relab *rl, gkv_sample_edges *out)
{
    int nnt = gkv_pbook_num_ntypes(c->book), net_ = gkv_pbook_num_etypes(c->book);
    int any = 0, *fa = NULL;
    int64_t **useeds = NULL;
    const int64_t **u = NULL;
    size_t *nu = NULL, **smap = NULL;
    gkv_sample_edges *ea = NULL;
    graph__wpos *wp = NULL;
    gkv_sample_opts oa;
    gkv_err rc = GKV_OK;

#define HOP_ARR(e)  (o->edge_w != NULL && o->edge_w[e] != NULL)
#define HOP_FEAT(e) (o->edge_w_feat != NULL && o->edge_w_feat[e] != NULL)
#define HOP_FAN(e)  (fan[nfan == 1 ? 0 : (e)] != 0)
    for (int e = 0; o != NULL && e < net_; e++)
        any |= HOP_FAN(e) && (HOP_ARR(e) ||
                              (o->dir == GKV_DIR_OUT && HOP_FEAT(e)));
    if (!any && (o == NULL || (o->dir == GKV_DIR_IN && o->edge_w == NULL)))
        return hop_once(c, seeds_in, nseeds_in, fan, nfan, layer, o, rl, out,
                        NULL);
    oa = *o;
    oa.edge_w = NULL;           /* the weights go, not arrays */
    oa.edge_w_len = NULL;
    oa.edge_w_lo = NULL;
    if (!any) {
        if (o->dir == GKV_DIR_OUT)
            oa.edge_w_feat = NULL;
        return hop_once(c, seeds_in, nseeds_in, fan, nfan, layer, &oa, rl,
                        out, NULL);
    }
    oa.edge_w_feat = NULL;      /* ... nor names */
    /* (+ 1: never a request for 0 bytes) */
    if ((fa = gkv__calloc((size_t)net_ + 1, sizeof *fa)) == NULL ||
        (useeds = gkv__calloc((size_t)nnt + 1, sizeof *useeds)) == NULL ||
        (u = gkv__calloc((size_t)nnt + 1, sizeof *u)) == NULL ||
        (nu = gkv__calloc((size_t)nnt + 1, sizeof *nu)) == NULL ||
        (smap = gkv__calloc((size_t)nnt + 1, sizeof *smap)) == NULL ||
        (ea = gkv__calloc((size_t)net_ + 1, sizeof *ea)) == NULL ||
        (wp = gkv__calloc((size_t)net_ + 1, sizeof *wp)) == NULL) {
        rc = net__fail(GKV_ENOMEM, "out of memory");
        goto out;
    }
    /* the distinct seeds, in hop_once's order (first appearance) */
    if ((rc = seeds_distinct(nnt, rl != NULL, seeds_in, nseeds_in, u, nu,
                             useeds, smap)) != GKV_OK)
        goto out;
    for (int e = 0; e < net_; e++)
        fa[e] = HOP_FAN(e) && (HOP_ARR(e) || HOP_FEAT(e)) ? -1 : 0;
    if ((rc = hop_once(c, u, nu, fa, net_, layer, &oa, NULL, ea, NULL))
        != GKV_OK)
        goto out;
    for (int e = 0; e < net_; e++) {
        gkv_etype_info ei;
        char name[GKV_NAME_MAX + 2];
        const int64_t *ctr;
        int64_t *off;
        float *w;
        size_t j = 0, n = ea[e].n;
        int ct;

        if (fa[e] == 0)
            continue;
        gkv_pbook_etype_info(c->book, e, &ei);
        ct = o->dir == GKV_DIR_IN ? ei.dst_ntype : ei.src_ntype;
        ctr = o->dir == GKV_DIR_IN ? ea[e].dst : ea[e].src;
        off = arena_alloc(c, (nu[ct] + 1) * sizeof *off);
        w = arena_alloc(c, n * sizeof *w + 4);
        if (off == NULL || w == NULL) {
            rc = net__fail(GKV_ENOMEM, "out of memory for %zu weights", n);
            goto out;
        }
        for (size_t i = 0; i < nu[ct]; i++) {
            off[i] = (int64_t)j;
            while (j < n && ctr[j] == u[ct][i])
                j++;
        }
        off[nu[ct]] = (int64_t)j;
        if (j != n) {
            rc = net__fail(GKV_EPROTO, "sample: the edges of edge type %d "
                           "came back out of seed order", e);
            goto out;
        }
        if (HOP_ARR(e)) {
            rc = wpos_array(o, e, ea[e].eid, n, w);
        } else {
            snprintf(name, sizeof name, "edge/%s/%s",
                     gkv_pbook_etype_name(c->book, e), o->edge_w_feat[e]);
            rc = wpos_pull(c, e, name, ea[e].eid, n, w);
        }
        if (rc != GKV_OK)
            goto out;
        wp[e].off = off;
        wp[e].w = w;
    }
#undef HOP_ARR
#undef HOP_FEAT
#undef HOP_FAN
    rc = hop_once(c, seeds_in, nseeds_in, fan, nfan, layer, &oa, rl, out, wp);
out:
    for (int t = 0; useeds != NULL && t < nnt; t++)   /* as hop_once */
        gkv__free(useeds[t]);
    for (int t = 0; smap != NULL && t < nnt; t++)
        gkv__free(smap[t]);
    gkv__free(useeds);
    gkv__free(smap);
    gkv__free((void *)u);
    gkv__free(nu);
    gkv__free(fa);
    gkv__free(ea);
    gkv__free(wp);
    if (rc != GKV_OK && rl == NULL)
        memset(out, 0, (size_t)net_ * sizeof *out);
    return rc;
}

/* The inputs of a sampling call (checked) that point into the arena, the
 * previous call's results fed back (a seed list from out[e].src or a
 * block's node IDs, exclusions from out[e].eid), copied into *own (one
 * gkv__malloc'd block, NULL when nothing needed copying) before the call
 * empties the arena: *seeds and *opts then point at the copies (*opts at
 * *obuf). Cheap: a look at each array's first address. */
static gkv_err
inputs_own(gkv_client *c, const int64_t *const **seeds, const size_t *nseeds,
           const gkv_sample_opts **opts, gkv_sample_opts *obuf, void **own)
{
    int nnt = gkv_pbook_num_ntypes(c->book), net_ = gkv_pbook_num_etypes(c->book);
    const gkv_sample_opts *o = *opts;
    size_t ids = 0, at = 0;
    int xs = 0, xe = 0;
    const int64_t **sv, **xv;
    int64_t *d;
    char *blk;

    *own = NULL;
    for (int t = 0; t < nnt; t++)
        if (nseeds[t] > 0 && arena_holds(c, (*seeds)[t])) {
            ids += nseeds[t];
            xs = 1;
        }
    for (int e = 0; o != NULL && e < net_; e++)
        if (ex_count(o, e) > 0 && arena_holds(c, o->exclude[e])) {
            ids += ex_count(o, e);
            xe = 1;
        }
    if (!xs && !xe)
        return GKV_OK;
    blk = gkv__malloc((size_t)(nnt + net_) * sizeof *sv + ids * sizeof *d);
    if (blk == NULL)
        return net__fail(GKV_ENOMEM, "out of memory for a copy of %zu seeds "
                         "and excluded edges from the last call's results",
                         ids);
    sv = (const int64_t **)blk;
    xv = sv + nnt;
    d = (int64_t *)(xv + net_);
    for (int t = 0; t < nnt; t++) {
        sv[t] = (*seeds)[t];
        if (nseeds[t] > 0 && arena_holds(c, sv[t])) {
            memcpy(d + at, sv[t], nseeds[t] * sizeof *d);
            sv[t] = d + at;
            at += nseeds[t];
        }
    }
    for (int e = 0; xe && e < net_; e++) {
        size_t k = ex_count(o, e);
        xv[e] = o->exclude != NULL ? o->exclude[e] : NULL;
        if (k > 0 && arena_holds(c, xv[e])) {
            memcpy(d + at, xv[e], k * sizeof *d);
            xv[e] = d + at;
            at += k;
        }
    }
    if (xs)
        *seeds = sv;
    if (xe) {
        *obuf = *o;
        obuf->exclude = xv;
        *opts = obuf;
    }
    *own = blk;
    return GKV_OK;
}

gkv_err
gkv_client_sample_neighbors(gkv_client *c, const int64_t *const *seeds,
                            const size_t *nseeds, const int *fanout, int nfan,
                            int layer, const gkv_sample_opts *opts,
                            gkv_sample_edges *out)
{
    gkv_sample_opts obuf;
    void *own = NULL;
    gkv_err rc;

    net__clear();
    if (c == NULL || out == NULL)
        return net__fail(GKV_EINVAL, "sample_neighbors: no client or no out");
    pthread_mutex_lock(&c->mu);
    /* as in-process: out is cleared on any failure, the checks' too */
    if (c->book != NULL)
        memset(out, 0, (size_t)gkv_pbook_num_etypes(c->book) * sizeof *out);
    if ((rc = sample_args(c, "sample_neighbors", seeds, nseeds, fanout, nfan,
                          1, opts)) == GKV_OK && layer < 0)
        rc = net__fail(GKV_EINVAL, "sample_neighbors: layer %d", layer);
    if (rc == GKV_OK &&
        (rc = inputs_own(c, &seeds, nseeds, &opts, &obuf, &own)) == GKV_OK) {
        arena_reset(c);
        rc = sample_hop(c, seeds, nseeds, fanout, nfan, layer, opts, NULL,
                        out);
    }
    gkv__free(own);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

/* The relabelling markers of sample_blocks: per node type, 4 bytes per
 * node (local ID + 1, 0 = not in the block), allocated on the first call;
 * every marker set is cleared again before the call returns. */
static gkv_err
markers_get(gkv_client *c, int nnt)
{
    int32_t **mk;

    if (c->mk != NULL)
        return GKV_OK;
    if ((mk = gkv__calloc((size_t)nnt, sizeof *mk)) == NULL)
        return net__fail(GKV_ENOMEM, "out of memory");
    for (int t = 0; t < nnt; t++) {
        int64_t n = gkv_pbook_num_nodes(c->book, t);
        if ((mk[t] = gkv__calloc((size_t)n + 1, sizeof *mk[t])) == NULL) {
            /* c->mk is set only when whole: a later call would take a
             * half-built table for a ready one */
            for (int u = 0; u < t; u++)
                gkv__free(mk[u]);
            gkv__free(mk);
            return net__fail(GKV_ENOMEM, "sample_blocks: out of memory for "
                             "the relabelling markers (%lld nodes of type %d)",
                             (long long)n, t);
        }
    }
    c->mk = mk;
    c->nmk = nnt;
    return GKV_OK;
}

/* gkv_client_sample_blocks with c->mu held, blocks[0 .. nlayers) zeroed
 * (the edge batch calls it inside its own call). */
static gkv_err
blocks_locked(gkv_client *c, const int64_t *const *seeds,
              const size_t *nseeds, const int *fanouts, int nfan,
              int nlayers, const gkv_sample_opts *opts, gkv_block *blocks)
{
    static const gkv_sample_opts zero;
    const gkv_sample_opts *o;
    gkv_sample_opts obuf;
    const int64_t **dst = NULL;
    int64_t **ids = NULL;
    size_t *ndst = NULL, *nsrc = NULL;
    void *own = NULL;
    int nnt = 0, net_ = 0;
    gkv_err rc;

    if ((rc = sample_args(c, "sample_blocks", seeds, nseeds, fanouts, nfan,
                          nlayers, opts)) != GKV_OK ||
        (rc = inputs_own(c, &seeds, nseeds, &opts, &obuf, &own)) != GKV_OK)
        goto out;
    arena_reset(c);
    o = opts != NULL ? opts : &zero;
    nnt = gkv_pbook_num_ntypes(c->book);
    net_ = gkv_pbook_num_etypes(c->book);
    if ((rc = markers_get(c, nnt)) != GKV_OK)
        goto out;
    if ((dst = gkv__calloc((size_t)nnt, sizeof *dst)) == NULL ||
        (ndst = gkv__calloc((size_t)nnt, sizeof *ndst)) == NULL) {
        rc = net__fail(GKV_ENOMEM, "out of memory");
        goto out;
    }
    /* the seeds must be distinct per type (then every hop's destination
     * nodes are: the previous block's source nodes) */
    for (int t = 0; t < nnt && rc == GKV_OK; t++) {
        int32_t *mk = c->mk[t];
        size_t i;

        for (i = 0; i < nseeds[t]; i++) {
            int64_t v = seeds[t][i];
            if (v < 0 || v >= gkv_pbook_num_nodes(c->book, t)) {
                rc = net__fail(GKV_ERANGE, "sample_blocks: seeds[%d][%zu] = "
                               "%lld is not a node of type %d '%s' (%lld "
                               "nodes)", t, i, (long long)v, t,
                               gkv_pbook_ntype_name(c->book, t),
                               (long long)gkv_pbook_num_nodes(c->book, t));
                break;
            }
            if (mk[v] != 0) {
                rc = net__fail(GKV_EINVAL, "sample_blocks: seeds[%d][%zu] = "
                               "%lld is given twice (first at index %d)", t, i,
                               (long long)v, mk[v] - 1);
                break;
            }
            mk[v] = (int32_t)i + 1;
        }
        while (i-- > 0)
            mk[seeds[t][i]] = 0;
        dst[t] = seeds[t];
        ndst[t] = nseeds[t];
    }
    if (rc != GKV_OK)
        goto out;
    for (int hi = 0; hi < nlayers; hi++) {
        int bi = nlayers - 1 - hi;
        gkv_block_nodes *bn;
        struct relab rl;

        bn = arena_alloc(c, (size_t)nnt * sizeof *bn);
        rl.be = arena_alloc(c, (size_t)net_ * sizeof *rl.be);
        ids = arena_alloc(c, (size_t)nnt * sizeof *ids);
        nsrc = arena_alloc(c, (size_t)nnt * sizeof *nsrc);
        if (bn == NULL || rl.be == NULL || ids == NULL || nsrc == NULL) {
            rc = net__fail(GKV_ENOMEM, "out of memory");
            goto out;
        }
        memset(nsrc, 0, (size_t)nnt * sizeof *nsrc);
        memset(ids, 0, (size_t)nnt * sizeof *ids);
        memset(rl.be, 0, (size_t)net_ * sizeof *rl.be);
        rl.mk = c->mk;
        rl.ids = ids;
        rl.nsrc = nsrc;
        /* the hop: the destination nodes' neighbours at layer hi, each
         * given its local ID as the replies are merged */
        rc = sample_hop(c, dst, ndst, fanouts + (size_t)bi * (size_t)nfan,
                        nfan, hi, o, &rl, NULL);
        /* every marker set is on a node list */
        for (int t = 0; t < nnt; t++) {
            int32_t *mk = c->mk[t];
            for (size_t i = 0; i < nsrc[t]; i++)
                mk[ids[t][i]] = 0;
        }
        if (rc != GKV_OK)
            goto out;
        for (int t = 0; t < nnt; t++) {
            bn[t].ids = ids[t];
            bn[t].num_dst = ndst[t];
            bn[t].num_src = nsrc[t];
            /* the next hop's destination nodes: this block's sources */
            dst[t] = ids[t];
            ndst[t] = nsrc[t];
        }
        blocks[bi].num_ntypes = nnt;
        blocks[bi].num_etypes = net_;
        blocks[bi].nodes = bn;
        blocks[bi].edges = rl.be;
    }
out:
    if (rc != GKV_OK)
        memset(blocks, 0, (size_t)nlayers * sizeof *blocks);
    gkv__free(dst);
    gkv__free(ndst);
    gkv__free(own);
    return rc;
}

gkv_err
gkv_client_sample_blocks(gkv_client *c, const int64_t *const *seeds,
                         const size_t *nseeds, const int *fanouts, int nfan,
                         int nlayers, const gkv_sample_opts *opts,
                         gkv_block *blocks)
{
    gkv_err rc;

    net__clear();
    if (c == NULL || blocks == NULL)
        return net__fail(GKV_EINVAL, "sample_blocks: no client or no blocks");
    if (nlayers < 1)
        return net__fail(GKV_EINVAL, "sample_blocks: nlayers %d: at least "
                         "one layer", nlayers);
    memset(blocks, 0, (size_t)nlayers * sizeof *blocks);
    pthread_mutex_lock(&c->mu);
    rc = blocks_locked(c, seeds, nseeds, fanouts, nfan, nlayers, opts,
                       blocks);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

/* ---- edge mini-batches ----------------------------------------------------- */

/* The stored reverses of the batch's edges into out[0 .. sp->n): the
 * partitioner's reverse_eid feature of the positive edges' type (the edge
 * IDs here are renumbered per type: edge k of the reverse type is not the
 * reverse of edge k). Called with c->mu held. */
static gkv_err
eb_stored_reverse(gkv_client *c, const gkv_edge_batch_spec *sp, int64_t *out)
{
    const char *canon = gkv_pbook_etype_name(c->book, sp->etype);
    char name[GKV_NAME_MAX + 1], m[512];
    int nf = gkv_pbook_num_edge_feats(c->book, sp->etype), have = 0;
    int paired = gkv_pbook_reverse_etype(c->book, sp->etype);

    for (int i = 0; i < nf && !have; i++)
        have = strcmp(gkv_pbook_edge_feat(c->book, sp->etype, i),
                      GKV_PART_REVERSE_FEAT) == 0;
    if (have && paired < 0)
        return net__fail(GKV_EINVAL, "sample_edge_batch: partition config "
                         "without \"reverse_etypes\": it does not say which "
                         "edge type edge/%s/" GKV_PART_REVERSE_FEAT " holds IDs "
                         "of (a partition written before the field was; "
                         "partition again)", canon);
    if (!have || paired < 0 ||
        graph__eb_stored_name(name, sizeof name, canon) != 0) {
        graph__eb_no_stored(canon,
                            gkv_pbook_etype_name(c->book, sp->reverse_etype),
                            m, sizeof m);
        return net__fail(GKV_EINVAL, "sample_edge_batch: %s", m);
    }
    if (paired != sp->reverse_etype) {
        graph__eb_wrong_pair(canon, gkv_pbook_etype_name(c->book, paired),
                             gkv_pbook_etype_name(c->book, sp->reverse_etype),
                             m, sizeof m);
        return net__fail(GKV_EINVAL, "sample_edge_batch: %s", m);
    }
    return pull_locked(c, name, NULL, (const uint64_t *)sp->eids, sp->n, out,
                       sp->n * sizeof *out);
}

/* opts' exclusions plus the batch's edges (GKV_EXCLUDE_SELF) and their
 * reverses (GKV_EXCLUDE_REVERSE) into *ex (one gkv__malloc'd block:
 * pointers, counts, IDs); *ex NULL when nothing is excluded. */
static gkv_err
eb_exclude(gkv_client *c, const gkv_edge_batch_spec *sp,
           const gkv_sample_opts *o, void **ex, const int64_t *const **xv,
           const size_t **xn)
{
    int net_ = gkv_pbook_num_etypes(c->book);
    size_t total = 0, *cnt, at = 0;
    const int64_t **ptr;
    int64_t *ids;
    char *blk;

    *ex = NULL;
    *xv = o->exclude;
    *xn = o->exclude_n;
    if (!(sp->exclude & (GKV_EXCLUDE_SELF | GKV_EXCLUDE_REVERSE)) ||
        sp->n == 0)
        return GKV_OK;
    for (int e = 0; e < net_; e++)
        total += ex_count(o, e);
    total += 2 * sp->n;
    blk = gkv__malloc((size_t)net_ * (sizeof *ptr + sizeof *cnt) +
                      total * sizeof *ids);
    if (blk == NULL)
        return net__fail(GKV_ENOMEM, "sample_edge_batch: out of memory for "
                         "%zu excluded edges", total);
    ptr = (const int64_t **)blk;
    cnt = (size_t *)(blk + (size_t)net_ * sizeof *ptr);
    ids = (int64_t *)(blk + (size_t)net_ * (sizeof *ptr + sizeof *cnt));
    for (int e = 0; e < net_; e++) {
        size_t k = ex_count(o, e);
        ptr[e] = ids + at;
        if (k > 0)
            memcpy(ids + at, o->exclude[e], k * sizeof *ids);
        at += k;
        if ((sp->exclude & GKV_EXCLUDE_SELF) && e == sp->etype) {
            memcpy(ids + at, sp->eids, sp->n * sizeof *ids);
            at += sp->n, k += sp->n;
        }
        if ((sp->exclude & GKV_EXCLUDE_REVERSE) && e == sp->reverse_etype) {
            char m[256];
            gkv_err rc;

            /* stored ones into place, then checked like given ones */
            if (sp->reverse_eids == NULL &&
                (rc = eb_stored_reverse(c, sp, ids + at)) != GKV_OK) {
                gkv__free(blk);
                return rc;
            }
            rc = graph__eb_reverse(sp, sp->reverse_eids == NULL ? ids + at
                                   : NULL, ids + at, m, sizeof m);
            if (rc != GKV_OK) {
                gkv__free(blk);
                return net__fail(rc, "sample_edge_batch: %s", m);
            }
            at += sp->n, k += sp->n;
        }
        cnt[e] = k;
    }
    *ex = blk;
    *xv = ptr;
    *xn = cnt;
    return GKV_OK;
}

/* The seed set of an edge batch, per node type the endpoints in order of
 * first appearance (positive i's source, then its destination; then the
 * negatives' destinations), and the pairs in those local IDs into c->eb:
 * pos_src, pos_dst (n each), neg_src, neg_dst (n x k each). */
static gkv_err
eb_seeds(gkv_client *c, const gkv_edge_batch_spec *sp, uint64_t seed,
         const int64_t *src, const int64_t *dst, int64_t **uniq, size_t *nu)
{
    gkv_etype_info ei;
    size_t n = sp->n, k = (size_t)sp->num_neg, nneg = n * k, len[2] = {0, 0};
    int64_t *seq[2], nn_dst;
    size_t *map[2] = {NULL, NULL}, need = 2 * n + 2 * nneg;
    int same, st, dt;
    gkv_err rc = GKV_OK;

    gkv_pbook_etype_info(c->book, sp->etype, &ei);
    st = ei.src_ntype;
    dt = ei.dst_ntype;
    same = st == dt;
    nn_dst = gkv_pbook_num_nodes(c->book, dt);
    if (c->ebcap < need) {
        int64_t *p = gkv__malloc(need * sizeof *p + 8);
        if (p == NULL)
            return net__fail(GKV_ENOMEM, "sample_edge_batch: out of memory "
                             "for %zu pairs", n + nneg);
        gkv__free(c->eb);
        c->eb = p;
        c->ebcap = need;
    }
    /* the endpoints of each type in labelling order: seq[0] the source
     * type's, seq[1] the destination type's (one list when they are one
     * type) */
    seq[0] = gkv__malloc((2 * n + nneg) * sizeof *seq[0] + 8);
    seq[1] = same ? seq[0] : gkv__malloc((n + nneg) * sizeof *seq[1] + 8);
    if (seq[0] == NULL || seq[1] == NULL) {
        rc = net__fail(GKV_ENOMEM, "sample_edge_batch: out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        seq[0][len[0]++] = src[i];
        seq[same ? 0 : 1][len[same ? 0 : 1]++] = dst[i];
    }
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < k; j++)
            seq[same ? 0 : 1][len[same ? 0 : 1]++] =
                gkv_sample_negative(seed, sp->etype, sp->eids[i], j, nn_dst);
    for (int q = 0; q < (same ? 1 : 2); q++)
        if ((rc = dedup(seq[q], len[q], &uniq[q == 0 ? st : dt],
                        &nu[q == 0 ? st : dt], &map[q])) != GKV_OK)
            goto out;
    /* the pairs in local IDs */
    for (size_t i = 0, a = 0, b = 0; i < n; i++) {
        c->eb[i] = (int64_t)map[0][a++];
        c->eb[n + i] = (int64_t)(same ? map[0][a++] : map[1][b++]);
    }
    for (size_t i = 0, a = same ? 2 * n : n; i < n; i++)
        for (size_t j = 0; j < k; j++, a++) {
            c->eb[2 * n + i * k + j] = c->eb[i];
            c->eb[2 * n + nneg + i * k + j] =
                (int64_t)(same ? map[0][a] : map[1][a]);
        }
out:
    gkv__free(map[0]);
    gkv__free(map[1]);
    gkv__free(seq[0]);
    if (!same)
        gkv__free(seq[1]);
    return rc;
}

gkv_err
gkv_client_sample_edge_batch(gkv_client *c, const gkv_edge_batch_spec *spec,
                             const int *fanouts, int nfan, int nlayers,
                             const gkv_sample_opts *opts,
                             gkv_edge_batch *batch, gkv_block *blocks)
{
    static const gkv_sample_opts zero;
    const gkv_sample_opts *o = opts != NULL ? opts : &zero;
    gkv_sample_opts ox;
    int64_t *src = NULL, **uniq = NULL;
    size_t *nu = NULL, n;
    void *ex = NULL;
    int nnt = 0;
    gkv_err rc;

    net__clear();
    if (batch != NULL)
        memset(batch, 0, sizeof *batch);
    if (c == NULL || spec == NULL || batch == NULL || blocks == NULL)
        return net__fail(GKV_EINVAL, "sample_edge_batch: client, spec, batch "
                         "or blocks is NULL");
    if (nlayers < 1)
        return net__fail(GKV_EINVAL, "sample_edge_batch: nlayers %d: at least "
                         "one layer", nlayers);
    memset(blocks, 0, (size_t)nlayers * sizeof *blocks);
    /* held for the whole call: c->eb and the arena are this call's until
     * it returns (another thread's call would rewrite them) */
    pthread_mutex_lock(&c->mu);
    if ((rc = need_book(c, "sample_edge_batch")) != GKV_OK)
        goto out;
    {
        char m[256];
        if ((rc = graph__eb_check(spec, gkv_pbook_num_etypes(c->book), m,
                                  sizeof m)) != GKV_OK) {
            rc = net__fail(rc, "sample_edge_batch: %s", m);
            goto out;
        }
    }
    n = spec->n;
    if (spec->num_neg > 0 && n > SIZE_MAX / 8 / (size_t)spec->num_neg) {
        rc = net__fail(GKV_ENOMEM, "sample_edge_batch: %zu x %d negatives: "
                       "too many", n, spec->num_neg);
        goto out;
    }
    nnt = gkv_pbook_num_ntypes(c->book);
    src = gkv__malloc(2 * n * sizeof *src + 8);
    uniq = gkv__calloc((size_t)nnt, sizeof *uniq);
    nu = gkv__calloc((size_t)nnt, sizeof *nu);
    if (src == NULL || uniq == NULL || nu == NULL) {
        rc = net__fail(GKV_ENOMEM, "sample_edge_batch: out of memory");
        goto out;
    }
    /* fanouts and opts checked before any request (no seeds yet) */
    if ((rc = sample_args(c, "sample_edge_batch",
                          (const int64_t *const *)uniq, nu, fanouts, nfan,
                          nlayers, opts)) != GKV_OK)
        goto out;
    /* the positive edges' endpoints from their owners */
    if (n > 0 && (rc = find_edges_locked(c, spec->etype, spec->eids, n,
                                         src, src + n)) != GKV_OK)
        goto out;
    ox = *o;
    if ((rc = eb_exclude(c, spec, o, &ex, &ox.exclude, &ox.exclude_n)) !=
        GKV_OK ||
        (rc = eb_seeds(c, spec, o->seed, src, src + n, uniq, nu)) != GKV_OK)
        goto out;
    rc = blocks_locked(c, (const int64_t *const *)uniq, nu, fanouts, nfan,
                       nlayers, &ox, blocks);
    if (rc != GKV_OK)
        goto out;
    batch->pos_src = c->eb;
    batch->pos_dst = c->eb + n;
    batch->num_pos = n;
    batch->neg_src = c->eb + 2 * n;
    batch->neg_dst = c->eb + 2 * n + n * (size_t)spec->num_neg;
    batch->num_neg = n * (size_t)spec->num_neg;
out:
    pthread_mutex_unlock(&c->mu);
    for (int t = 0; uniq != NULL && t < nnt; t++)
        gkv__free(uniq[t]);
    gkv__free(uniq);
    gkv__free(nu);
    gkv__free(src);
    gkv__free(ex);
    return rc;
}
