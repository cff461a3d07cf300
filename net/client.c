/* client.c - the core of the gkv client: the client object, one REQ
 * socket per server and lane, and the exchange that runs a call's
 * messages. The message families (client_int.h lists them) build the
 * messages; this file knows none of their fields.
 *
 * A call builds "parts" (one message each), queues them per server, sends
 * the head of every queue, then polls: each reply is consumed as it comes
 * (the part's done hook reads it, e.g. pull rows straight to their place
 * in the caller's buffer) and the next part of that server goes out. A
 * REQ socket holds one request at a time, so the parts of one server go
 * in order on its lanes, the servers in parallel.
 *
 * Failures: a server that does not answer before the call's deadline gets
 * its socket closed (so nanomsg cannot re-send the request later) and is
 * hand-shaken again by the next call that needs it. A reply saying the
 * session is unknown (the server restarted) makes the client hand-shake on
 * the spot and send that part once more: the server had not executed it.
 * Except for a part that must not run twice (PART_ONCE: a push) that
 * nanomsg may have delivered before, on a connection since lost
 * (lane_mark): the server that died may have applied it, so that part
 * fails with GKV_EIO instead.
 */
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <nanomsg/nn.h>
#include <nanomsg/reqrep.h>
#include <sodium.h>
#include "base/base.h"
#include "net/gkv_net.h"
#include "net/wire.h"
#include "net/client_int.h"

#define SOCK_BUF     (4 << 20)   /* NN_SNDBUF / NN_RCVBUF (doc/BENCHMARKS.md) */
/* What a handshake or schema reply may need: a partition config (up to 64
 * MiB, as the server reads it) and the schema beside it. */
#define HS_REPLY_MAX (80u << 20)

/* ---- time -------------------------------------------------------------- */

uint64_t
net__deadline(uint64_t ms)
{
    return gkv__now_ms() + ms;
}

int
net__left_ms(uint64_t deadline)
{
    uint64_t now = gkv__now_ms();

    if (now >= deadline)
        return 0;
    return deadline - now > INT_MAX ? INT_MAX : (int)(deadline - now);
}

/* The error of a call, naming the server. */
gkv_err
net__cfail(struct conn *cn, gkv_err rc, const char *fmt, ...)
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

int
net__sockopt(int sock, int level, int opt, int v)
{
    return nn_setsockopt(sock, level, opt, &v, sizeof v);
}

int
net__req_socket(gkv_client *c, struct conn *cn)
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
    if (net__sockopt(s, NN_SOL_SOCKET, NN_RCVMAXSIZE, (int)rmax) < 0 ||
        net__sockopt(s, NN_SOL_SOCKET, NN_SNDBUF, SOCK_BUF) < 0 ||
        net__sockopt(s, NN_SOL_SOCKET, NN_RCVBUF, SOCK_BUF) < 0 ||
        net__sockopt(s, NN_SOL_SOCKET, NN_RECONNECT_IVL_MAX, 1000) < 0 ||
        net__sockopt(s, NN_REQ, NN_REQ_RESEND_IVL, INT_MAX) < 0 ||
        (cn->v6 && net__sockopt(s, NN_SOL_SOCKET, NN_IPV4ONLY, 0) < 0) ||
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
void
net__conn_break(struct conn *cn)
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
void *
net__msg_make(gkv_client *c, uint16_t type, uint64_t req_id,
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
        return net__cfail(cn, rc, "bad reply to %s: %s",
                          net__type_name(type), why);
    }
    if (!(h->flags & NET_F_REPLY) || h->type != type || h->req_id != req_id)
        return net__cfail(cn, GKV_EPROTO, "reply of type %u to request %llu "
                          "does not match the request (%s, %llu)", h->type,
                          (unsigned long long)h->req_id, net__type_name(type),
                          (unsigned long long)req_id);
    net__rd_init(rd, (const unsigned char *)m + NET_HDR_LEN, (size_t)h->len);
    if (h->status != GKV_OK) {
        if (net__dec_err(rd, msg, sizeof msg) != 0)
            snprintf(msg, sizeof msg, "%s (malformed error reply: %s)",
                     gkv_strerror(h->status), rd->why);
        if (h->status > 0 || h->status < -64)
            return net__cfail(cn, GKV_EPROTO, "reply status %d: %s",
                              h->status, msg);
        return net__cfail(cn, (gkv_err)h->status, "%s", msg);
    }
    return GKV_OK;
}

/* One blocking round trip on lane 0 (hello and handshake). On success
 * *reply is an NN_MSG buffer the caller frees, and *rd reads its payload. */
gkv_err
net__roundtrip(gkv_client *c, struct conn *cn, uint16_t type, uint64_t session,
               void (*enc)(net_wr *, const void *), const void *arg,
               uint64_t deadline, void **reply, net_rd *rd)
{
    size_t len;
    uint64_t id = ++cn->next_req;
    void *m = net__msg_make(c, type, id, session, enc, arg, &len);
    net_hdr h;
    int n, left;
    gkv_err rc;

    *reply = NULL;
    if (m == NULL)
        return net__cfail(cn, GKV_ENOMEM, "out of memory");
    left = net__left_ms(deadline);
    net__sockopt(cn->sock[0], NN_SOL_SOCKET, NN_SNDTIMEO, left > 0 ? left : 1);
    if (nn_send(cn->sock[0], &m, NN_MSG, 0) < 0) {
        int e = nn_errno();
        nn_freemsg(m);
        return net__cfail(cn, net__from_nn(e), "%s: send failed: %s",
                          net__type_name(type), nn_strerror(e));
    }
    for (;;) {
        left = net__left_ms(deadline);
        if (left <= 0)
            return net__cfail(cn, GKV_ETIMEDOUT, "no reply to %s within %d ms "
                              "(is it running and reachable?)",
                              net__type_name(type), c->call_ms);
        net__sockopt(cn->sock[0], NN_SOL_SOCKET, NN_RCVTIMEO, left);
        n = nn_recv(cn->sock[0], reply, NN_MSG, 0);
        if (n >= 0)
            break;
        if (nn_errno() == EINTR)
            continue;
        if (nn_errno() == ETIMEDOUT || nn_errno() == EAGAIN)
            continue;                    /* the loop head reports it */
        return net__cfail(cn, net__from_nn(nn_errno()), "%s: receive "
                          "failed: %s", net__type_name(type),
                          nn_strerror(nn_errno()));
    }
    if ((rc = reply_check(cn, *reply, (size_t)n, type, id, &h, rd)) != GKV_OK) {
        nn_freemsg(*reply);
        *reply = NULL;
    }
    return rc;
}

/* ---- the exchange engine ------------------------------------------------ */

static void
part_enc_thunk(net_wr *w, const void *a)
{
    const struct part *p = a;

    if (p->ops->enc != NULL)
        p->ops->enc(w, p);
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
    net__conn_break(cn);
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
            if ((rc = net__conn_open(c, cn, deadline)) != GKV_OK) {
                /* the server is unreachable: its whole queue fails */
                conn_fail_all(c, cn, rc);
                return;
            }
        }
        for (l = 0; l < NLANES && cn->inflight[l] != NULL; l++)
            ;
        if (l == NLANES)
            return;                      /* every lane is busy */
        if (cn->sock[l] < 0 && (cn->sock[l] = net__req_socket(c, cn)) < 0) {
            rc = net__cfail(cn, net__from_nn(nn_errno()), "cannot connect to "
                            "%s: %s", cn->url, nn_strerror(nn_errno()));
            conn_fail_all(c, cn, rc);
            return;
        }
        p = cn->head;
        cn->head = p->next;
        if (cn->head == NULL)
            cn->tail = NULL;
        cn->inflight_req[l] = ++cn->next_req;
        m = net__msg_make(c, p->ops->type, cn->inflight_req[l], cn->session,
                          part_enc_thunk, p, &len);
        if (m == NULL) {
            part_finish(c, p, net__cfail(cn, GKV_ENOMEM, "out of memory for a "
                                         "request"));
            continue;
        }
        left = net__left_ms(deadline);
        net__sockopt(cn->sock[l], NN_SOL_SOCKET, NN_SNDTIMEO,
                     left > 0 ? left : 1);
        if (p->ops->flags & PART_ONCE)
            lane_mark(cn, l);
        if (nn_send(cn->sock[l], &m, NN_MSG, 0) < 0) {
            int e = nn_errno();
            nn_freemsg(m);
            rc = net__cfail(cn, net__from_nn(e), "%s: send failed: %s",
                            net__type_name(p->ops->type), nn_strerror(e));
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

/* Handles rep (len bytes), the reply to lane l of cn: the part is sent
 * again, finished or failed, and what cn has queued goes out. */
static void
reply_take(gkv_client *c, struct conn *cn, int l, void *rep, size_t len,
           uint64_t deadline)
{
    struct part *p = cn->inflight[l];
    net_hdr h;
    net_rd rd;
    gkv_err rc;
    int refused;

    cn->inflight[l] = NULL;
    rc = reply_check(cn, rep, len, p->ops->type, cn->inflight_req[l], &h,
                     &rd);
    refused = rc == GKV_EPERM && (h.flags & NET_F_SESSION);
    if (refused && (p->ops->flags & PART_ONCE) && lane_redelivered(cn, l)) {
        /* this server executed nothing, but nanomsg may have delivered
         * the request before, on a connection since lost, to a server
         * that executed it and then died (or that dropped our session
         * meanwhile): sending it again could apply it twice, so the part
         * fails. GKV_EIO: the request was lost with its connection and
         * its outcome is unknown (not GKV_EPERM, which promises nothing
         * ran, nor GKV_ETIMEDOUT: an answer came in time). */
        nn_freemsg(rep);
        cn->ready = 0;
        rc = net__cfail(cn, GKV_EIO, "restarted (or dropped the session) "
                        "while a %s was in flight: it may or may not have "
                        "been applied; not sent again (nanomsg delivered it "
                        "again on a new connection, which refused the "
                        "session)", net__type_name(p->ops->type));
        part_finish(c, p, rc);
    } else if (refused && (p->ops->flags & PART_GONE_OK)) {
        /* the server does not know the session (it restarted, or our
         * lease lapsed): there is nothing to do there, and a handshake
         * just for this could stop it (see gkv_client_close) */
        nn_freemsg(rep);
        cn->ready = 0;
        part_finish(c, p, GKV_OK);
    } else if (refused && !p->retried) {
        /* the server does not know our session (it restarted or our
         * lease lapsed) and the request reached no server before:
         * nothing executed it; hand-shake and send again */
        nn_freemsg(rep);
        p->retried = 1;
        cn->ready = 0;
        p->next = cn->head;
        cn->head = p;
        if (cn->tail == NULL)
            cn->tail = p;
    } else {
        p->rflags = h.flags;
        if (rc == GKV_OK && p->ops->done != NULL)
            rc = p->ops->done(c, p, &rd);
        nn_freemsg(rep);
        part_finish(c, p, rc);
        if (rc != GKV_OK && rc != GKV_ENOMEM && h.status == 0) {
            /* a garbled stream: start afresh (not after running out of
             * memory reading a good reply: the stream is fine) */
            conn_fail_all(c, cn, rc);
            return;
        }
    }
    conn_kick(c, cn, deadline);
}

/* The lanes with a request in flight into pf[], pc[] (their servers) and
 * pl[] (their lane numbers); returns how many. */
static int
poll_set(gkv_client *c, struct nn_pollfd *pf, struct conn **pc, int *pl)
{
    int np = 0;

    for (size_t i = 0; i < c->ncn; i++)
        for (int l = 0; l < NLANES; l++)
            if (c->cn[i].inflight[l] != NULL) {
                pf[np].fd = c->cn[i].sock[l];
                pf[np].events = NN_POLLIN;
                pf[np].revents = 0;
                pc[np] = &c->cn[i];
                pl[np++] = l;
            }
    return np;
}

/* Takes the replies nn_poll found among poll_set's np lanes (r: its
 * result). */
static void
replies_read(gkv_client *c, const struct nn_pollfd *pf, struct conn **pc,
             const int *pl, int np, int r, uint64_t deadline)
{
    for (int k = 0; k < np && r > 0; k++) {
        struct conn *cn = pc[k];
        int l = pl[k], got;
        void *rep = NULL;

        if (cn->inflight[l] == NULL || !(pf[k].revents & NN_POLLIN))
            continue;
        got = nn_recv(cn->sock[l], &rep, NN_MSG, NN_DONTWAIT);
        if (got < 0) {
            int e = nn_errno();
            if (e == EAGAIN || e == EINTR || e == ETIMEDOUT)
                continue;
            conn_fail_all(c, cn, net__cfail(cn, net__from_nn(e),
                                            "receive failed: %s",
                                            nn_strerror(e)));
            continue;
        }
        reply_take(c, cn, l, rep, (size_t)got, deadline);
    }
}

/* At the deadline: the servers still silent fail, with all they hold. */
static void
silent_fail(gkv_client *c, struct conn **pc, const int *pl, int np)
{
    for (int k = 0; k < np; k++) {
        struct conn *cn = pc[k];
        struct part *p = cn->inflight[pl[k]];
        gkv_err rc;

        if (p == NULL)
            continue;                    /* answered, or failed already */
        if (p->ops->timeout != NULL)
            rc = p->ops->timeout(c, p);
        else
            rc = net__cfail(cn, GKV_ETIMEDOUT, "no reply to %s within %d "
                            "ms (is it running and reachable?)",
                            net__type_name(p->ops->type), c->call_ms);
        conn_fail_all(c, cn, rc);
    }
}

int
net__busy_again(int *ms, uint64_t deadline)
{
    if (net__left_ms(deadline) <= *ms)
        return 0;
    nanosleep(&(struct timespec){*ms / 1000, (*ms % 1000) * 1000000L}, NULL);
    if (*ms < 640)
        *ms *= 2;
    return 1;
}

gkv_err
net__exchange_reads(gkv_client *c, struct part *parts, size_t n,
                    uint64_t deadline)
{
    gkv_err rc;
    int ms = 10;

    while ((rc = net__exchange(c, parts, n, deadline)) == GKV_EBUSY &&
           net__busy_again(&ms, deadline))
        ;
    return rc;
}

gkv_err
net__exchange(gkv_client *c, struct part *parts, size_t n, uint64_t deadline)
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
        int np = poll_set(c, pf, pc, pl), left, r;

        if (np == 0)
            break;
        /* past the deadline, one last look (poll with 0 ms): a reply that
         * came while another server's hand-shake blocked is taken, and
         * only the servers still silent fail */
        left = net__left_ms(deadline);
        r = nn_poll(pf, np, left);
        if (r < 0 && nn_errno() != EINTR) {
            gkv_err rc = net__fail(net__from_nn(nn_errno()), "nn_poll: %s",
                                   nn_strerror(nn_errno()));
            for (int k = 0; k < np; k++)
                conn_fail_all(c, pc[k], rc);
            break;
        }
        replies_read(c, pf, pc, pl, np, r, deadline);
        if (left <= 0) {
            silent_fail(c, pc, pl, np);
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

/* ---- replies any family may use ----------------------------------------- */

gkv_err
net__done_u8(gkv_client *c, struct part *p, net_rd *rd)
{
    uint8_t v;

    (void)c;
    if (net__dec_u8(rd, &v, "reply") != 0)
        return net__cfail(p->cn, GKV_EPROTO, "malformed %s reply: %s",
                          net__type_name(p->ops->type), rd->why);
    return GKV_OK;
}

/* ---- a machine's servers ------------------------------------------------ */

/* A ready (or openable) server of machine m: the first one, else the next
 * in round-robin order. */
struct conn *
net__mach_conn(gkv_client *c, size_t m)
{
    for (unsigned k = 0; k < c->nserv; k++) {
        struct conn *cn = &c->cn[m * c->nserv + (c->rr + k) % c->nserv];
        if (cn->ready)
            return cn;
    }
    return &c->cn[m * c->nserv + c->rr++ % c->nserv];
}

/* The payload bytes one message to machine m may carry (at most 'most'). */
size_t
net__part_cap(gkv_client *c, size_t m, uint64_t most)
{
    uint64_t cap = c->max_msg, srv = c->cn[m * c->nserv].id.max_msg;

    if (srv != 0 && srv < cap)
        cap = srv;
    if (cap > most)
        cap = most;
    return cap > 2 * PART_SLACK ? (size_t)(cap - PART_SLACK) : (size_t)cap / 2;
}

/* ---- the client object -------------------------------------------------- */

/* The families' state goes with them (net__route_drop, net__sample_free),
 * the sessions' with net__hb_stop. */
void
net__client_free(gkv_client *c)
{
    if (c == NULL)
        return;
    net__hb_stop(c);
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
    net__route_drop(c);
    net__sample_free(c);
    gkv_pbook_close(c->book);
    gkv__free(c->book_json);
    gkv__free(c->mc);
    gkv__free(c->cn);
    gkv_ipconfig_free(c->cfg);
    gkv__free(c->src);
    sodium_memzero(c->key, sizeof c->key);
    pthread_mutex_destroy(&c->mu);
    pthread_mutex_destroy(&c->hb_mu);
    pthread_cond_destroy(&c->hb_cv);
    gkv__free(c);
}
