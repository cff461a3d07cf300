/* server.c - the server's core: one raw REP socket (AF_SP_RAW, NN_REP) and
 * a few worker threads, each receiving a request with its nanomsg control
 * header, answering it and sending the reply with that header. Because the
 * socket is raw, a reply can also be sent later from any thread: barriers
 * park their requests and the last arrival answers them all.
 *
 * The core checks each message's header, finds the row of its type in one
 * dispatch table (server_int.h: the families' srv_op rows, merged at open),
 * applies the row's flags (session, partition, at most once) and runs the
 * family's handler, then sends its reply or its error. It also keeps the
 * log and its rate limits, and the housekeeping tick (leases, the stop).
 * Rows marked SRV_POOL (SAMPLE_BATCH, which waits on peer servers) run on
 * a small pool of threads of their own instead, so a worker is never held
 * by a request that waits on another server, which may be waiting on
 * this one: the core queues them after the session check, a pool thread
 * runs them and replies.
 *
 * Locking: s->mu guards sessions, groups (members and parked barrier
 * requests), spent nonces, the log's counters and the stop reason. The
 * store has its own locking (readers never block; writers are serialised
 * by LMDB across processes). Handlers run on worker threads without s->mu,
 * taking it only around the session and group tables; nothing blocks
 * while holding it (nn_sendmsg on a raw REP socket never blocks: it drops
 * a reply whose peer is gone). The edge-weight cache has locks of its own
 * (server_sample.c).
 */
#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <nanomsg/nn.h>
#include <nanomsg/reqrep.h>
#include <sodium.h>
#include "net/server_int.h"

#define NONCE_TTL_MS   30000     /* a nonce is good this long, once */
#define TICK_MS        50        /* housekeeping period */
#define RECV_TICK_MS   100       /* workers look at the stop flag this often */
#define FLUSH_MS       150       /* replies in flight get this long before
                                  * the socket closes (nanomsg has no linger) */
#define SOCK_BUF       (4 << 20) /* NN_SNDBUF / NN_RCVBUF: 4 MiB (doc/BENCHMARKS.md) */
#define PRESESS_MAX    GKV_PRESESS_MAX /* payload bytes a message may
                                  * carry before its sender has a session:
                                  * a handshake's are ~180 at most */
#define GROUP_SESS_MAX 16384     /* default --max-group-sessions */
#define LOG_BURST      50        /* lines of a kind per LOG_WINDOW_MS */
#define LOG_WINDOW_MS  10000
#define POOL_QUEUE_MAX 256       /* SRV_POOL requests queued at most; more
                                  * are refused with GKV_EBUSY */

/* ---- time and logs ---------------------------------------------------- */

static uint64_t
wall_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* One line per event: "2026-11-23T09:10:11.123Z gkv-server[pid] m0/s1: ..." */
void
srv__log(gkv_server *s, const char *fmt, ...)
{
    char line[1536], ts[40];
    struct timespec now;
    struct tm tm;
    va_list ap;
    int n;

    if (s->conf.flags & GKV_SERVER_QUIET)
        return;
    clock_gettime(CLOCK_REALTIME, &now);
    gmtime_r(&now.tv_sec, &tm);
    strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
    n = snprintf(line, sizeof line, "%s.%03ldZ gkv-server[%ld] %s: ", ts,
                 now.tv_nsec / 1000000, (long)getpid(), s->log.tag);
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    /* the message may quote a peer's bytes (a tensor name in a rejection):
     * a control character there could end the line and forge the next */
    for (char *c = line + n; *c != '\0'; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            *c = '?';
    fprintf(s->log.fp, "%s\n", line);   /* one call: lines never interleave */
    fflush(s->log.fp);
}

/* Whether one more line of 'kind' may be logged: at most LOG_BURST per
 * window, so a flood of garbage (rejections), of handshakes as one
 * group and rank (rejoins: anyone may hand-shake to a server without a
 * token) or of joins and leaves cannot flood the log. *dropped: the lines of the window that
 * just ended that were not logged, for the caller to say. Caller holds
 * s->mu. */
int
srv__log_take(gkv_server *s, int kind, uint64_t *dropped)
{
    uint64_t now = gkv__now_ms();
    int ok;

    *dropped = 0;
    if (now - s->log.window[kind] >= LOG_WINDOW_MS) {
        *dropped = s->log.dropped[kind];
        s->log.window[kind] = now;
        s->log.count[kind] = 0;
        s->log.dropped[kind] = 0;
    }
    ok = s->log.count[kind]++ < LOG_BURST;
    if (!ok)
        s->log.dropped[kind]++;
    return ok;
}

static const char *const log_what[LOG_KINDS] = {"rejections", "rejoins",
                                       "requests that arrived again",
                                       "observer joins and leaves",
                                       "joins and leaves"};

void
srv__log_say_dropped(gkv_server *s, int kind, uint64_t dropped)
{
    if (dropped > 0)
        srv__log(s, "%llu more %s were not logged (at most %d are logged "
                 "in %d s)", (unsigned long long)dropped, log_what[kind],
                 LOG_BURST, LOG_WINDOW_MS / 1000);
}

/* srv__log_take() with the lock taken here, saying what the window before
 * dropped. Takes s->mu. */
int
srv__log_allowed(gkv_server *s, int kind)
{
    uint64_t dropped;
    int ok;

    pthread_mutex_lock(&s->mu);
    ok = srv__log_take(s, kind, &dropped);
    pthread_mutex_unlock(&s->mu);
    srv__log_say_dropped(s, kind, dropped);
    return ok;
}

/* The lines not logged in windows that have ended (or, 'all', in the
 * current one too): said without waiting for another line of the kind,
 * which a flood that stopped never brings. Takes s->mu. */
static void
log_flush_dropped(gkv_server *s, int all)
{
    uint64_t dropped[LOG_KINDS] = {0}, now;

    pthread_mutex_lock(&s->mu);
    now = gkv__now_ms();    /* under the lock: log_take stamps under it */
    for (int k = 0; k < LOG_KINDS; k++)
        if (s->log.dropped[k] > 0 &&
            (all || now - s->log.window[k] >= LOG_WINDOW_MS)) {
            dropped[k] = s->log.dropped[k];
            s->log.dropped[k] = 0;
            s->log.count[k] = 0;
            s->log.window[k] = now;
        }
    pthread_mutex_unlock(&s->mu);
    for (int k = 0; k < LOG_KINDS; k++)
        srv__log_say_dropped(s, k, dropped[k]);
}

static void
hex16(const void *p, size_t len, char *out, size_t cap)
{
    const unsigned char *b = p;
    size_t o = 0;

    out[0] = '\0';
    for (size_t i = 0; i < len && i < 16 && o + 4 < cap; i++)
        o += (size_t)snprintf(out + o, cap - o, "%s%02x", i ? " " : "", b[i]);
}

void
srv__stop_request(gkv_server *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Records why the server stops (the first reason wins). Caller holds
 * s->mu. */
void
srv__stop_request(gkv_server *s, const char *fmt, ...)
{
    va_list ap;

    if (atomic_load(&s->run.stop))
        return;
    va_start(ap, fmt);
    vsnprintf(s->run.why, sizeof s->run.why, fmt, ap);
    va_end(ap);
    atomic_store(&s->run.stop, 1);
}

/* ---- replies ------------------------------------------------------------ */

gkv_err
srv__fail(srv_req *r, gkv_err rc, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(r->err, sizeof r->err, fmt, ap);
    va_end(ap);
    r->status = rc;
    return rc;
}

/* Sends message m (header space included, payload 'len') on the control
 * header 'ctl', filling the header as the reply to 'rq'. Consumes m and
 * ctl whatever happens. */
void
srv__send_reply(gkv_server *s, void *ctl, const net_hdr *rq, gkv_err status,
                uint32_t rflags, void *m, size_t len)
{
    struct nn_iovec iov;
    struct nn_msghdr mh;
    net_hdr h = {0};

    h.magic = NET_MAGIC;
    h.version = NET_VERSION;
    h.type = rq->type;
    h.flags = NET_F_REPLY | rflags | (rq->flags & NET_F_SUM);
    h.status = status;
    h.req_id = rq->req_id;
    h.session = rq->session;
    h.len = len;
    if (h.flags & NET_F_SUM)
        h.sum = net__sum((unsigned char *)m + NET_HDR_LEN, len);
    net__hdr_put(m, &h);
    memset(&mh, 0, sizeof mh);
    iov.iov_base = &m;
    iov.iov_len = NN_MSG;
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = &ctl;
    mh.msg_controllen = NN_MSG;
    if (nn_sendmsg(s->io.sock, &mh, 0) < 0) {
        /* nanomsg 1.1.5 hands a failed NN_MSG body back to the caller but
         * frees the control message with its own copy of the message
         * (nn_sendmsg's nn_msg_term): ctl is not ours to free here. It
         * fails only on a socket being closed, which gkv_server_close
         * does after joining the workers. */
        nn_freemsg(m);
        return;
    }
    atomic_fetch_add_explicit(&s->stats.bytes_out, NET_HDR_LEN + len,
                              memory_order_relaxed);
}

/* An error reply: the status and a message. Consumes ctl. */
void
srv__send_error(gkv_server *s, void *ctl, const net_hdr *rq, gkv_err status,
                uint32_t rflags, const char *msg)
{
    net_wr w = {0};
    void *m;
    int busy;           /* never: an error is smaller than SRV_REPLY_SMALL */

    net__enc_err(&w, msg);
    if ((m = srv__reply_msg(s, rq->type, w.off, &busy)) == NULL) {
        nn_freemsg(ctl);
        return;
    }
    w.p = (unsigned char *)m + NET_HDR_LEN;
    w.cap = w.off;
    w.off = 0;
    net__enc_err(&w, msg);
    atomic_fetch_add_explicit(&s->stats.errors, 1, memory_order_relaxed);
    srv__send_reply(s, ctl, rq, status, rflags, m, w.off);
}

gkv_err
srv__reply_build(srv_req *r, srv_enc_fn enc, const void *arg)
{
    net_wr w = {0};

    enc(&w, arg);
    if ((r->out = srv__reply_alloc(r, w.off)) == NULL)
        return r->status;
    r->out_len = w.off;
    w.p = (unsigned char *)r->out + NET_HDR_LEN;
    w.cap = w.off;
    w.off = 0;
    enc(&w, arg);
    return GKV_OK;
}

static void
enc_u8(net_wr *w, const void *a)
{
    net__wr_u8(w, *(const uint8_t *)a);
}

static void
enc_u32(net_wr *w, const void *a)
{
    net__wr_u32(w, *(const uint32_t *)a);
}

static void
enc_u64(net_wr *w, const void *a)
{
    net__wr_u64(w, *(const uint64_t *)a);
}

gkv_err
srv__reply_u8(srv_req *r, uint8_t v)
{
    return srv__reply_build(r, enc_u8, &v);
}

gkv_err
srv__reply_u32(srv_req *r, uint32_t v)
{
    return srv__reply_build(r, enc_u32, &v);
}

gkv_err
srv__reply_u64(srv_req *r, uint64_t v)
{
    return srv__reply_build(r, enc_u64, &v);
}

gkv_err
srv__reply_bytes(srv_req *r, const void *p, size_t len)
{
    if ((r->out = srv__reply_alloc(r, len)) == NULL)
        return r->status;
    if (len > 0)
        memcpy((unsigned char *)r->out + NET_HDR_LEN, p, len);
    r->out_len = len;
    return GKV_OK;
}

/* ---- payload arrays ----------------------------------------------------- */

/* 'p' itself when 8-aligned, or a copy in *tmp (payload arrays are
 * 8-aligned within the message, but nanomsg does not promise where a
 * received message starts). */
const void *
srv__bytes_aligned(const unsigned char *p, size_t bytes, void **tmp)
{
    *tmp = NULL;
    if (((uintptr_t)p & 7) == 0)
        return p;
    if ((*tmp = gkv__malloc(bytes + 1)) == NULL)
        return NULL;
    memcpy(*tmp, p, bytes);
    return *tmp;
}

const uint64_t *
srv__ids_aligned(const unsigned char *p, size_t n, uint64_t **tmp)
{
    void *t;
    const void *a = srv__bytes_aligned(p, n * 8, &t);

    *tmp = t;
    return a;
}

/* ---- dispatch ----------------------------------------------------------- */

struct srv_job;
static gkv_err pool_push(gkv_server *s, const srv_op *op, srv_req *r,
                         void *msg, size_t len);

static void
reject(gkv_server *s, const char *what, const void *m, size_t len,
       const char *why)
{
    char hex[64];

    atomic_fetch_add_explicit(&s->stats.rejected, 1, memory_order_relaxed);
    if (!srv__log_allowed(s, LOG_REJECT))
        return;
    hex16(m, len, hex, sizeof hex);
    srv__log(s, "rejected %s (%zu bytes, first: %s): %s", what, len, hex, why);
}

/* The row of r's type, or NULL with 'why' said: the request is refused
 * (GKV_EPROTO) without a handler. */
static const srv_op *
op_of(gkv_server *s, const srv_req *r, char *why, size_t cap)
{
    const char *nm = net__type_name(r->h.type);

    if (r->h.type <= NET_TYPE_MAX && s->ops[r->h.type] != NULL)
        return s->ops[r->h.type];
    snprintf(why, cap, nm != NULL ?
             "request type %u (%s) is not served by this server" :
             "unknown request type %u%s", r->h.type, nm != NULL ? nm : "");
    return NULL;
}

/* Runs r's handler under its row's flags (other than SRV_SESSION, which
 * handle() saw to). */
static void
dispatch(gkv_server *s, const srv_op *op, srv_req *r)
{
    if ((op->flags & SRV_PART) && s->graph.part == NULL) {
        srv__fail(r, GKV_ENOTSUP, "%s: this server serves a store, not a "
                  "graph partition (start it with --part-config)",
                  net__type_name(r->h.type));
        return;
    }
    if (op->check != NULL && op->check(s, r) != GKV_OK)
        return;
    if (!(op->flags & SRV_ONCE)) {
        op->fn(s, r);
        return;
    }
    if (srv__once_begin(s, r))
        return;                 /* a copy: answered as the first was */
    op->fn(s, r);
    srv__once_end(s, r);
}

/* Sends r's reply or its error (unless a handler parked it). */
static void
finish(gkv_server *s, srv_req *r, const void *msg, size_t len)
{
    if (r->parked)
        return;
    if (r->status != GKV_OK) {
        if (r->status == GKV_EPERM || r->status == GKV_EPROTO)
            reject(s, net__type_name(r->h.type), msg, len, r->err);
        if (r->out != NULL)
            nn_freemsg(r->out);
        srv__send_error(s, r->ctl, &r->h, r->status, r->rflags, r->err);
    } else {
        srv__send_reply(s, r->ctl, &r->h, GKV_OK, r->rflags, r->out,
                        r->out_len);
    }
}

/* Whether 'msg' (len bytes) is larger than a peer without a session may
 * send: more than PRESESS_MAX payload bytes in a request that needs no
 * session (HELLO, HANDSHAKE: 1) or whose session is not live (2); its
 * header in *h. 0: it may go on (a header net__hdr_check refuses goes on
 * too, to be refused there for what is wrong with it: those checks read
 * the header only). Takes s->mu. Under gkv-server's connection gate such
 * a message never arrives whole: the gate passes on its header alone (the
 * length as sent) and swallows the rest, and that header is judged here
 * the same; an embedding program without a gate gets it whole, as
 * nanomsg reads it. A header alone with a live session (3) is what the
 * gate passes on of a request on a connection its session could not
 * authenticate (its address has its most authenticated connections): not
 * the session's fault, so answered GKV_EBUSY (a pull asks again), not as
 * a lost session. Only the gate sends that; a peer sending it itself is
 * answered the same, and nothing is read or applied. */
static int
presess_too_big(gkv_server *s, const void *msg, size_t len, net_hdr *h)
{
    const srv_op *op;
    int live;

    memset(h, 0, sizeof *h);
    /* a larger message whole, or its header alone saying so: what
     * gkv-server's gate passes on of one (the rest is never read) */
    if (len < NET_HDR_LEN || (len > NET_HDR_LEN && len <= NET_HDR_LEN +
                              PRESESS_MAX))
        return 0;
    if (net__hdr_get(msg, len, h) != 0 || h->magic != NET_MAGIC ||
        h->version != NET_VERSION || h->len <= PRESESS_MAX ||
        (len > NET_HDR_LEN && h->len != len - NET_HDR_LEN))
        return 0;
    op = h->type <= NET_TYPE_MAX ? s->ops[h->type] : NULL;
    if (op == NULL || !(op->flags & SRV_SESSION))
        return 1;
    pthread_mutex_lock(&s->mu);
    live = srv__sess_find(s, h->session) != NULL;
    pthread_mutex_unlock(&s->mu);
    return !live ? 2 :
           len == NET_HDR_LEN && !(h->flags & ~NET_F_KNOWN) ? 3 : 0;
}

/* Handles one message that worker 'wk' received; consumes 'msg' and
 * 'ctl'. No lock is held. */
static void
handle(gkv_server *s, unsigned wk, void *msg, size_t len, void *ctl)
{
    srv_req r;
    const srv_op *op;
    char why[512];
    gkv_err rc;
    int big;

    memset(&r, 0, sizeof r);
    r.srv = s;
    r.ctl = ctl;
    r.worker = wk;
    atomic_fetch_add_explicit(&s->stats.requests, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->stats.bytes_in, len, memory_order_relaxed);
    if ((big = presess_too_big(s, msg, len, &r.h)) != 0) {
        /* freed before anything else looks at it (no checksum over it,
         * no decoding): nanomsg had to take it whole, the server keeps
         * it no longer than this */
        if (big == 3)
            snprintf(why, sizeof why, "%llu payload bytes on a connection "
                     "not authenticated: its address has its most "
                     "authenticated connections (gkv-server: 8 + 4 per "
                     "session); try again", (unsigned long long)r.h.len);
        else
            snprintf(why, sizeof why, "%llu payload bytes without a "
                     "session: at most %d before a handshake",
                     (unsigned long long)r.h.len, PRESESS_MAX);
        reject(s, "message", msg, len, why);
        nn_freemsg(msg);
        r.h.flags = 0;
        srv__send_error(s, ctl, &r.h, big == 2 ? GKV_EPERM : big == 3 ?
                        GKV_EBUSY : GKV_EPROTO, big == 2 ? NET_F_SESSION : 0,
                        why);
        return;
    }
    if ((rc = net__hdr_check(msg, len, &r.h, why, sizeof why)) != GKV_OK) {
        /* answer in the client's terms (type, request id) where its
         * header could be read; no checksum on this reply */
        net_hdr h = r.h;
        if (len < NET_HDR_LEN || h.magic != NET_MAGIC)
            memset(&h, 0, sizeof h);
        h.flags = 0;
        reject(s, "malformed message", msg, len, why);
        srv__send_error(s, ctl, &h, rc, 0, why);
        goto out;
    }
    r.pl = (const unsigned char *)msg + NET_HDR_LEN;
    r.plen = (size_t)r.h.len;
    if (r.h.flags & ~NET_F_SUM) {
        snprintf(why, sizeof why, "a reply or reply-only flags sent to a "
                 "server");
        reject(s, "message", msg, len, why);
        r.h.flags &= NET_F_SUM;
        srv__send_error(s, ctl, &r.h, GKV_EPROTO, 0, why);
        goto out;
    }
    if ((op = op_of(s, &r, why, sizeof why)) == NULL) {
        reject(s, "request", msg, len, why);
        srv__send_error(s, ctl, &r.h, GKV_EPROTO, 0, why);
        goto out;
    }
    if ((op->flags & SRV_SESSION) && !srv__sess_touch(s, &r, why, sizeof why)) {
        reject(s, "request", msg, len, why);
        srv__send_error(s, ctl, &r.h, GKV_EPERM, NET_F_SESSION, why);
        goto out;
    }
    if ((op->flags & SRV_POOL) && s->pool.nthreads > 0) {
        if ((rc = pool_push(s, op, &r, msg, len)) == GKV_OK)
            return;             /* the pool has msg and ctl now */
        srv__send_error(s, ctl, &r.h, rc, rc == GKV_EINTR ?
                        NET_F_STOPPING : 0, r.err);
        goto out;
    }
    dispatch(s, op, &r);
    finish(s, &r, msg, len);
out:
    nn_freemsg(msg);
}

/* ---- the pool (SRV_POOL rows) ------------------------------------------- */

/* A request handed to the pool: its message (freed once answered) and
 * the core's srv_req, checked up to the session. */
struct srv_job {
    struct srv_job *next;
    const srv_op *op;
    void *msg;
    size_t len;
    srv_req r;
};

/* Queues r (which holds ctl) with msg for the pool: GKV_OK, and both are
 * the pool's; else the error to answer r with (r->err says why; the
 * caller still has both): GKV_EBUSY (the queue is full), GKV_EINTR (the
 * server is stopping), GKV_ENOMEM. */
static gkv_err
pool_push(gkv_server *s, const srv_op *op, srv_req *r, void *msg, size_t len)
{
    struct srv_job *j = NULL;
    gkv_err rc = GKV_OK;

    pthread_mutex_lock(&s->pool.mu);
    if (s->pool.halt)
        rc = srv__fail(r, GKV_EINTR, "%s: the server is stopping",
                       net__type_name(r->h.type));
    else if (s->pool.n >= POOL_QUEUE_MAX)
        rc = srv__fail(r, GKV_EBUSY, "%s: %d requests wait for this "
                       "server's %u batch threads already; try again",
                       net__type_name(r->h.type), POOL_QUEUE_MAX,
                       s->pool.nthreads);
    else if ((j = gkv__malloc(sizeof *j)) == NULL)
        rc = srv__fail(r, GKV_ENOMEM, "%s: out of memory",
                       net__type_name(r->h.type));
    if (rc != GKV_OK) {
        pthread_mutex_unlock(&s->pool.mu);
        return rc;
    }
    j->next = NULL;
    j->op = op;
    j->msg = msg;
    j->len = len;
    j->r = *r;
    j->r.queued_ms = gkv__now_ms();
    if (s->pool.tail != NULL)
        s->pool.tail->next = j;
    else
        s->pool.head = j;
    s->pool.tail = j;
    s->pool.n++;
    pthread_cond_signal(&s->pool.cv);
    pthread_mutex_unlock(&s->pool.mu);
    return GKV_OK;
}

/* The next job, or NULL once the pool halts (queued jobs are answered
 * GKV_EINTR by pool_stop). */
static struct srv_job *
pool_pop(gkv_server *s)
{
    struct srv_job *j = NULL;

    pthread_mutex_lock(&s->pool.mu);
    while (!s->pool.halt && s->pool.head == NULL)
        pthread_cond_wait(&s->pool.cv, &s->pool.mu);
    if (!s->pool.halt) {
        j = s->pool.head;
        s->pool.head = j->next;
        if (s->pool.head == NULL)
            s->pool.tail = NULL;
        s->pool.n--;
    }
    pthread_mutex_unlock(&s->pool.mu);
    return j;
}

static void *
pool_main(void *arg)
{
    gkv_server *s = arg;
    unsigned idx = atomic_fetch_add(&s->pool.next, 1);
    struct srv_job *j;
    sigset_t all;

    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    while ((j = pool_pop(s)) != NULL) {
        j->r.worker = UINT_MAX;
        j->r.pool = idx;
        dispatch(s, j->op, &j->r);
        finish(s, &j->r, j->msg, j->len);
        nn_freemsg(j->msg);
        gkv__free(j);
    }
    return NULL;
}

/* Starts the pool's threads; GKV_OK, or GKV_EIO naming the one that did
 * not start (those started run). */
static gkv_err
pool_start(gkv_server *s)
{
    if (s->pool.nthreads == 0)
        return GKV_OK;
    if ((s->pool.thr = gkv__calloc(s->pool.nthreads,
                                   sizeof *s->pool.thr)) == NULL)
        return net__fail(GKV_ENOMEM, "server: out of memory");
    for (; s->pool.started < s->pool.nthreads; s->pool.started++)
        if (pthread_create(&s->pool.thr[s->pool.started], NULL, pool_main,
                           s) != 0)
            return net__fail(GKV_EIO, "cannot start batch thread %u",
                             s->pool.started);
    return GKV_OK;
}

/* Stops the pool: its threads finish the job in hand (bounded by its
 * deadline) and leave; queued jobs are answered GKV_EINTR. */
static void
pool_stop(gkv_server *s)
{
    struct srv_job *j;

    pthread_mutex_lock(&s->pool.mu);
    s->pool.halt = 1;
    pthread_cond_broadcast(&s->pool.cv);
    pthread_mutex_unlock(&s->pool.mu);
    for (unsigned i = 0; i < s->pool.started; i++)
        pthread_join(s->pool.thr[i], NULL);
    s->pool.started = 0;
    while ((j = s->pool.head) != NULL) {
        s->pool.head = j->next;
        srv__send_error(s, j->r.ctl, &j->r.h, GKV_EINTR, NET_F_STOPPING,
                        "the server is stopping");
        nn_freemsg(j->msg);
        gkv__free(j);
    }
    s->pool.tail = NULL;
    s->pool.n = 0;
}

/* ---- the workers -------------------------------------------------------- */

static void *
worker(void *arg)
{
    gkv_server *s = arg;
    unsigned wk = atomic_fetch_add(&s->io.wnext, 1);   /* its sampler */
    sigset_t all;

    /* signals go to the thread that runs gkv_server_run() */
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    while (!atomic_load(&s->run.halt)) {
        void *body = NULL, *ctl = NULL;
        struct nn_iovec iov = {&body, NN_MSG};
        struct nn_msghdr mh;
        int n;

        memset(&mh, 0, sizeof mh);
        mh.msg_iov = &iov;
        mh.msg_iovlen = 1;
        mh.msg_control = &ctl;
        mh.msg_controllen = NN_MSG;
        n = nn_recvmsg(s->io.sock, &mh, 0);
        if (n < 0) {
            int e = nn_errno();
            if (e == ETIMEDOUT || e == EAGAIN || e == EINTR)
                continue;
            if (e == EBADF || e == ETERM)
                break;
            srv__log(s, "receive failed: %s", nn_strerror(e));
            continue;
        }
        handle(s, wk, body, (size_t)n, ctl);
    }
    return NULL;
}

/* ---- open, run, close --------------------------------------------------- */

static gkv_err
bind_url(gkv_server *s, const gkv_machine *m, unsigned port, int any)
{
    struct in_addr a4;
    struct in6_addr a6;
    struct addrinfo hints = {0}, *res = NULL;
    char ip[INET6_ADDRSTRLEN];

    if (any) {
        snprintf(s->io.url, sizeof s->io.url, "tcp://*:%u", port);
        return GKV_OK;
    }
    if (inet_pton(AF_INET, m->host, &a4) == 1) {
        snprintf(s->io.url, sizeof s->io.url, "tcp://%s:%u", m->host, port);
        return GKV_OK;
    }
    if (inet_pton(AF_INET6, m->host, &a6) == 1) {
        snprintf(s->io.url, sizeof s->io.url, "tcp://[%s]:%u", m->host, port);
        return GKV_OK;
    }
    /* nanomsg binds to addresses or interface names, not DNS names */
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(m->host, NULL, &hints, &res) != 0 || res == NULL)
        return net__fail(GKV_EINVAL, "ip_config line %u: cannot resolve '%s' "
                         "to an address to listen on", m->line, m->host);
    inet_ntop(AF_INET, &((struct sockaddr_in *)res->ai_addr)->sin_addr, ip,
              sizeof ip);
    freeaddrinfo(res);
    snprintf(s->io.url, sizeof s->io.url, "tcp://%s:%u", ip, port);
    return GKV_OK;
}

/* 1 when s->io.url (bind_url's) is a loopback address: 127.0.0.0/8 or
 * ::1; 0 for every interface ("*") and any other address. */
static int
url_loopback(const gkv_server *s)
{
    const char *h = s->io.url + sizeof "tcp://" - 1;
    char ip[INET6_ADDRSTRLEN + 2];
    const char *end;
    struct in_addr a4;
    struct in6_addr a6;
    size_t n;

    if (*h == '[') {
        if ((end = strchr(++h, ']')) == NULL)
            return 0;
    } else if ((end = strrchr(h, ':')) == NULL) {
        return 0;
    }
    if ((n = (size_t)(end - h)) >= sizeof ip)
        return 0;
    memcpy(ip, h, n);
    ip[n] = '\0';
    if (inet_pton(AF_INET, ip, &a4) == 1)
        return (ntohl(a4.s_addr) >> 24) == 127;
    return inet_pton(AF_INET6, ip, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
}

/* A server without a token listens on a loopback address only, unless
 * its operator said GKV_SERVER_INSECURE_NO_TOKEN (--insecure-no-token):
 * anyone who reaches its port may read, write and delete tensors and stop
 * it. Called once s->io.url is known, before binding. */
static gkv_err
auth_check(const gkv_server *s, const gkv_server_opts *o)
{
    if (s->auth.on || url_loopback(s) ||
        (o->flags & GKV_SERVER_INSECURE_NO_TOKEN))
        return GKV_OK;
    return net__fail(GKV_EPERM, "refusing to listen on %s without a token: "
                     "anyone who could reach it could read, write and delete "
                     "tensors and stop the server. Give --token-file FILE "
                     "(gkv-launch makes one per job), listen on a loopback "
                     "address (127.0.0.1) only, or, on a network you trust "
                     "entirely, say --insecure-no-token", s->io.url);
}

static int
sockopt(int sock, int opt, int v)
{
    return nn_setsockopt(sock, NN_SOL_SOCKET, opt, &v, sizeof v);
}

/* The families' tables, merged into one by ops_build(). */
static const srv_op *const families[] = {
    srv__sess_ops, srv__kv_ops, srv__graph_ops, srv__sample_ops,
    srv__admin_ops, srv__batch_ops,
};

/* s->ops from the families' rows: one row a type. */
static void
ops_build(gkv_server *s)
{
    for (size_t f = 0; f < sizeof families / sizeof *families; f++)
        for (const srv_op *op = families[f]; op->type != 0; op++) {
            assert(op->type <= NET_TYPE_MAX && s->ops[op->type] == NULL);
            assert(!(op->flags & SRV_ONCE) ||
                   ((op->flags & SRV_SESSION) && op->check != NULL));
            assert(!((op->flags & SRV_ONCE) && (op->flags & SRV_POOL)));
            s->ops[op->type] = op;
        }
}

/* The options that need no file: what gkv_server_open() refuses first.
 * *nserv: the servers a machine runs. */
static gkv_err
opts_check(const gkv_server_opts *o, unsigned *nserv)
{
    /* the largest reply, with its header */
    uint64_t largest = (o->max_msg ? o->max_msg : GKV_NET_MAX_MSG) +
                       NET_HDR_LEN;

    if ((o->store == NULL && o->part_config == NULL) || o->ip_config == NULL)
        return net__fail(GKV_EINVAL, "server: a store directory (or a "
                         "partition config) and an ip_config are required");
    if (o->part_config != NULL && o->part_id < 0)
        return net__fail(GKV_EINVAL, "server: partition id %d", o->part_id);
    *nserv = o->num_servers ? o->num_servers : 1;
    if (o->server_id >= *nserv)
        return net__fail(GKV_EINVAL, "server id %u is not below the number "
                         "of servers %u", o->server_id, *nserv);
    if (o->batch_threads > 256)
        return net__fail(GKV_EINVAL, "batch threads %u: at most 256",
                         o->batch_threads);
    if (o->max_group_sessions > 65536)
        return net__fail(GKV_EINVAL, "sessions per group %u: must be in "
                         "1..65536", o->max_group_sessions);
    if (o->max_msg != 0 && (o->max_msg < 4096 ||
                            o->max_msg > (uint64_t)INT_MAX - NET_HDR_LEN - 64))
        return net__fail(GKV_EINVAL, "max message size %llu: must be in "
                         "4096..%d", (unsigned long long)o->max_msg,
                         INT_MAX - NET_HDR_LEN - 64);
    if (o->max_reply_mem != 0 && o->max_reply_mem < largest)
        return net__fail(GKV_EINVAL, "max reply memory %llu is less than the "
                         "largest message, %llu bytes with its header: a "
                         "reply of that size could never be sent; lower "
                         "max_msg (--max-msg) too",
                         (unsigned long long)o->max_reply_mem,
                         (unsigned long long)largest);
    if (o->server_name != NULL && strlen(o->server_name) > NET_HOST_MAX)
        return net__fail(GKV_EINVAL, "server name longer than %u bytes",
                         NET_HOST_MAX);
    if (sodium_init() < 0)
        return net__fail(GKV_EIO, "libsodium failed to initialise");
    return GKV_OK;
}

/* Which line of the ip_config is this machine (*mi): the partition's
 * (machine m serves partition m), --machine, or the local address. */
static gkv_err
machine_pick(const gkv_server_opts *o, const gkv_ipconfig *cfg, size_t *mi)
{
    size_t nm = gkv_ipconfig_count(cfg);
    char why[256];
    gkv_err rc;

    if (o->part_config != NULL && o->machine >= 0 && o->machine != o->part_id)
        return net__fail(GKV_EINVAL, "machine %d cannot serve partition %d: "
                         "machine m of the ip_config serves partition m",
                         o->machine, o->part_id);
    if (o->part_config != NULL && o->machine < 0) {
        if ((size_t)o->part_id >= nm)
            return net__fail(GKV_EINVAL, "partition %d: %s lists %zu "
                             "machines (machine m serves partition m)",
                             o->part_id, o->ip_config, nm);
        *mi = (size_t)o->part_id;
        return GKV_OK;
    }
    if (o->machine >= 0) {
        if ((size_t)o->machine >= nm)
            return net__fail(GKV_EINVAL, "machine %d: %s lists %zu machines",
                             o->machine, o->ip_config, nm);
        *mi = (size_t)o->machine;
        return GKV_OK;
    }
    if ((rc = gkv_ipconfig_find_local(cfg, mi)) == GKV_OK)
        return GKV_OK;
    /* the message is formatted into the buffer it quotes: copy it */
    snprintf(why, sizeof why, "%s", gkv_net_errmsg());
    return net__fail(rc == GKV_ENOTFOUND ? GKV_EINVAL : rc, "%s: %s; name "
                     "this machine's line with --machine N (from 0)",
                     o->ip_config, strncmp(why, "ip_config: ", 11) == 0 ?
                     why + 11 : why);
}

/* A server with its options and locks, nothing opened yet: safe to
 * gkv_server_close(). NULL: out of memory. */
static gkv_server *
server_new(const gkv_server_opts *o, size_t mi)
{
    gkv_server *s = gkv__calloc(1, sizeof *s);
    const char *w;

    if (s == NULL)
        return NULL;
    ops_build(s);
    s->io.sock = -1;
    s->log.fp = o->log != NULL ? o->log : stderr;
    s->conf.flags = o->flags;
    s->conf.lease_ms = o->lease_ms ? o->lease_ms : 30000;
    s->io.max_msg = o->max_msg ? o->max_msg : GKV_NET_MAX_MSG;
    s->io.nthreads = o->threads ? o->threads : 2;
    s->conf.num_clients = o->num_clients;
    s->conf.max_group_sessions = o->max_group_sessions ?
                                 o->max_group_sessions : GROUP_SESS_MAX;
    w = getenv("GKV_SERVER_WIDE_IDS");
    s->conf.wide_ids = w != NULL && strcmp(w, "1") == 0;
    /* tests shorten the nonce TTL to see expiry */
    w = getenv("GKV_SERVER_NONCE_TTL_MS");
    s->auth.nonce_ttl_ms = w != NULL && atoi(w) > 0 ? (uint64_t)atoi(w) :
                           NONCE_TTL_MS;
    /* tests play a server older than some handshake flags */
    w = getenv("GKV_SERVER_REFUSE_HS_FLAGS");
    s->conf.refuse_hs = w != NULL ? (uint32_t)strtoul(w, NULL, 0) : 0;
    crypto_auth_hmacsha512256_keygen(s->auth.nkey);
    s->stats.start_ms = gkv__now_ms();
    snprintf(s->log.tag, sizeof s->log.tag, "m%zu/s%u", mi, o->server_id);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->sess.done_cv, NULL);
    pthread_mutex_init(&s->pw.mu, NULL);
    pthread_mutex_init(&s->pool.mu, NULL);
    pthread_cond_init(&s->pool.cv, NULL);
    return s;
}

/* Pre-faults the store's map and, unless GKV_SERVER_NO_VERIFY_DATA,
 * checks every chunk's checksum on the way (gkv_store_verify reads every
 * chunk, which is what the pre-fault does): a store with a chunk whose
 * bytes changed on disk is refused, so a pull never serves them. Data
 * keys of no tensor (orphans) are logged, not refused: they are never
 * read. */
static gkv_err
store_check(gkv_server *s, const gkv_server_opts *o, const char *path)
{
    gkv_verify_report rep = {0};
    gkv_err rc;

    if (o->flags & GKV_SERVER_NO_PREFAULT)
        return GKV_OK;
    if (o->flags & GKV_SERVER_NO_VERIFY_DATA) {
        if ((rc = gkv_store_prefault(s->store)) != GKV_OK)
            return net__fail(rc, "store %s: prefault: %s", path,
                             gkv_store_errmsg(s->store));
        return GKV_OK;
    }
    rc = gkv_store_verify(s->store, NULL, &rep);
    if (rc == GKV_ECORRUPT && rep.bad_chunks == 0 && rep.orphan_keys > 0) {
        srv__log(s, "warning: store %s holds %llu data keys of no tensor "
                 "(%s); served all the same ('kvctl %s verify' names them)",
                 path, (unsigned long long)rep.orphan_keys,
                 gkv_store_errmsg(s->store), path);
        rc = GKV_OK;
    }
    if (rc != GKV_OK)
        return net__fail(rc, "store %s: %s (gkv-server checks every chunk's "
                         "checksum at start; 'kvctl %s verify' names every "
                         "bad one; --no-verify-data starts without the "
                         "check)", path, gkv_store_errmsg(s->store), path);
    return GKV_OK;
}

/* The store (a partition's, or o->store), its real path, and its map
 * pre-faulted and checked (*ms: how long that took). */
static gkv_err
store_open(gkv_server *s, const gkv_server_opts *o, const gkv_ipconfig *cfg,
           uint64_t *ms)
{
    const char *path;
    char *rp;
    gkv_err rc;

    if (o->part_config != NULL) {
        if ((rc = srv__graph_open(s, o, cfg)) != GKV_OK)
            return rc;
    } else if ((rc = gkv_store_open(&s->store, o->store,
                             ((o->flags & GKV_SERVER_CREATE) ? GKV_CREATE : 0) |
                             ((o->flags & GKV_SERVER_NOSYNC) ? GKV_NOSYNC : 0) |
                             GKV_GUARD,
                             NULL)) != GKV_OK) {
        return net__fail(rc, "%s", gkv_store_errmsg(NULL)[0] ?
                         gkv_store_errmsg(NULL) : gkv_strerror(rc));
    }
    path = s->graph.part != NULL ?
           gkv_pbook_part_path(s->graph.book, o->part_id) : o->store;
    rp = realpath(path, NULL);
    if (rp == NULL || (s->store_path = gkv__strdup(rp)) == NULL) {
        free(rp);
        return net__fail(GKV_ENOMEM, "store %s: cannot resolve its path",
                         path);
    }
    free(rp);
    *ms = gkv__now_ms();
    if ((rc = store_check(s, o, path)) != GKV_OK)
        return rc;
    *ms = gkv__now_ms() - *ms;
    return GKV_OK;
}

/* The raw REP socket, with its options, listening on machine m's port
 * for server o->server_id. */
static gkv_err
sock_open(gkv_server *s, const gkv_server_opts *o, const gkv_machine *m)
{
    int e;
    gkv_err rc;

    if ((rc = bind_url(s, m, m->port + o->server_id,
                       (o->flags & GKV_SERVER_BIND_ANY) != 0)) != GKV_OK ||
        (rc = auth_check(s, o)) != GKV_OK)
        return rc;
    if ((s->io.sock = nn_socket(AF_SP_RAW, NN_REP)) < 0)
        return net__fail(net__from_nn(nn_errno()), "nn_socket: %s",
                         nn_strerror(nn_errno()));
    if (sockopt(s->io.sock, NN_RCVMAXSIZE,
                (int)(s->io.max_msg + NET_HDR_LEN + 64)) < 0 ||
        sockopt(s->io.sock, NN_SNDBUF, SOCK_BUF) < 0 ||
        sockopt(s->io.sock, NN_RCVBUF, SOCK_BUF) < 0 ||
        sockopt(s->io.sock, NN_RCVTIMEO, RECV_TICK_MS) < 0 ||
        (strchr(s->io.url, '[') != NULL &&
         sockopt(s->io.sock, NN_IPV4ONLY, 0) < 0))
        return net__fail(GKV_EIO, "socket options: %s",
                         nn_strerror(nn_errno()));
    if (nn_bind(s->io.sock, s->io.url) < 0) {
        e = nn_errno();
        return net__fail(net__from_nn(e), "cannot listen on %s: %s%s",
                         s->io.url, nn_strerror(e), e == EADDRINUSE ?
                         " (another server runs there?)" : "");
    }
    return GKV_OK;
}

/* The identity HELLO and HANDSHAKE replies carry. */
static void
ident_fill(gkv_server *s, const gkv_server_opts *o, unsigned nserv,
           size_t mi)
{
    net_ident *id = &s->conf.id;

    id->proto = NET_VERSION;
    id->server_id = o->server_id;
    id->num_servers = nserv;
    id->machine = (uint32_t)mi;
    id->pid = (uint32_t)getpid();
    id->lease_ms = s->conf.lease_ms;
    id->flags = ((o->flags & GKV_SERVER_KEEP_ALIVE) ? NET_ID_KEEP_ALIVE : 0) |
                (s->auth.on ? NET_ID_AUTH : 0) |
                (s->graph.part != NULL ? NET_ID_GRAPH : 0) |
                (s->wb.npat ? NET_ID_WRITEBACK : 0);
    id->max_msg = s->io.max_msg;
    id->start_ms = wall_ms();
    if (gethostname(id->host, sizeof id->host - 1) != 0)
        snprintf(id->host, sizeof id->host, "unknown");
    snprintf(id->name, sizeof id->name, "%s",
             o->server_name ? o->server_name : "");
    snprintf(id->store, sizeof id->store, "%s", s->store_path);
    snprintf(id->version, sizeof id->version, "%s", GKV_VERSION_STRING);
}

/* The start lines of the log. */
static void
say_start(gkv_server *s, const gkv_server_opts *o, const gkv_machine *m,
          uint64_t prefault_ms)
{
    const net_ident *id = &s->conf.id;
    gkv_tensor_desc *d = NULL;
    size_t nt = 0;

    gkv_tensor_list(s->store, NULL, 0, &d, &nt);
    gkv_free(d);
    srv__log(s, "start: gkv %s, store %s (%zu tensors, map pre-faulted in "
             "%llu ms%s), machine %u (%s line %u) server %u of %u%s%s%s, auth "
             "%s, keep-alive %s, lease %u ms, %u threads, max message %llu "
             "bytes, max reply memory %llu bytes%s", GKV_VERSION_STRING, s->store_path, nt,
             (unsigned long long)prefault_ms,
             (o->flags & GKV_SERVER_NO_PREFAULT) ? "" :
             (o->flags & GKV_SERVER_NO_VERIFY_DATA) ? ", chunks not checked" :
             ", every chunk's checksum checked", id->machine, o->ip_config,
             m->line, o->server_id, id->num_servers,
             id->name[0] ? ", name '" : "", id->name, id->name[0] ? "'" : "",
             s->auth.on ? "on" : "off",
             (o->flags & GKV_SERVER_KEEP_ALIVE) ? "on" : "off",
             s->conf.lease_ms, s->io.nthreads,
             (unsigned long long)s->io.max_msg,
             (unsigned long long)s->rmem.cap,
             s->rmem.cap == 0 ? " (not bounded)" : "");
    if (s->conf.num_clients > 0 && !(o->flags & GKV_SERVER_KEEP_ALIVE))
        srv__log(s, "stops when the last client leaves once %u clients have "
                 "joined", s->conf.num_clients);
    if (s->graph.part != NULL)
        srv__log(s, "serving partition %d of %d of graph '%s' (%s, %d node "
                 "types, %d edge types%s)", o->part_id,
                 gkv_pbook_num_parts(s->graph.book),
                 gkv_pbook_graph_name(s->graph.book), o->part_config,
                 gkv_pbook_num_ntypes(s->graph.book),
                 gkv_pbook_num_etypes(s->graph.book),
                 gkv_pbook_has_csr(s->graph.book) ? ", CSR" : "");
    srv__log(s, "listening on %s", s->io.url);
    if (!s->auth.on && url_loopback(s))
        srv__log(s, "auth off: anyone who can reach %s can read, write, "
                 "delete tensors and stop this server (local users of this "
                 "host; give --token-file to require the job's token)",
                 s->io.url + sizeof "tcp://" - 1);
    else if (!s->auth.on)
        srv__log(s, "WARNING: auth off on %s (--insecure-no-token): ANYONE "
                 "WHO CAN REACH %s FROM THE NETWORK CAN READ, WRITE, DELETE "
                 "TENSORS AND STOP THIS SERVER; give --token-file to require "
                 "the job's token", s->io.url, s->io.url + sizeof "tcp://" - 1);
}

gkv_err
gkv_server_open(gkv_server **out, const gkv_server_opts *o)
{
    gkv_server *s = NULL;
    gkv_ipconfig *cfg = NULL;
    const gkv_machine *m;
    char token[GKV_TOKEN_MAX + 1];
    size_t mi;
    unsigned nserv = 1;
    uint64_t prefault_ms = 0;
    gkv_err rc;

    net__clear();
    if (out == NULL || o == NULL)
        return net__fail(GKV_EINVAL, "gkv_server_open: no options");
    *out = NULL;
    if ((rc = opts_check(o, &nserv)) != GKV_OK ||
        (rc = gkv_ipconfig_load(&cfg, o->ip_config)) != GKV_OK)
        return rc;
    if ((rc = gkv_ipconfig_check(cfg, nserv)) != GKV_OK ||
        (rc = machine_pick(o, cfg, &mi)) != GKV_OK)
        goto fail;
    m = gkv_ipconfig_machine(cfg, mi);
    if ((s = server_new(o, mi)) == NULL) {
        rc = net__fail(GKV_ENOMEM, "server: out of memory");
        goto fail;
    }
    if (o->token_file != NULL) {
        if ((rc = gkv_token_load(o->token_file, token, sizeof token)) != GKV_OK)
            goto fail;
        net__token_key(token, strlen(token), s->auth.key);
        s->auth.on = 1;
    }
    if ((rc = store_open(s, o, cfg, &prefault_ms)) != GKV_OK ||
        (rc = srv__wb_open(s, o, nserv)) != GKV_OK ||
        (rc = sock_open(s, o, m)) != GKV_OK)
        goto fail;
    srv__rmem_open(s, o);
    ident_fill(s, o, nserv, mi);
    /* batches (SRV_POOL) are served by partition servers, whose peer
     * clients join with the token */
    if (s->graph.part != NULL) {
        s->pool.nthreads = o->batch_threads ? o->batch_threads :
                           s->io.nthreads;
        if ((rc = srv__batch_open(s, o, s->auth.on ? token : NULL)) != GKV_OK)
            goto fail;
    }
    sodium_memzero(token, sizeof token);
    say_start(s, o, m, prefault_ms);
    gkv_ipconfig_free(cfg);
    *out = s;
    return GKV_OK;
fail:
    sodium_memzero(token, sizeof token);
    gkv_ipconfig_free(cfg);
    gkv_server_close(s);
    return rc;
}

gkv_err
gkv_server_run(gkv_server *s)
{
    unsigned started = 0;
    gkv_err rc = GKV_OK;

    net__clear();
    if (s == NULL || s->run.ran || s->io.sock < 0)
        return net__fail(GKV_EINVAL, "server: not open, or already ran");
    s->run.ran = 1;
    if ((s->io.thr = gkv__calloc(s->io.nthreads, sizeof *s->io.thr)) == NULL)
        return net__fail(GKV_ENOMEM, "server: out of memory");
    for (; started < s->io.nthreads; started++)
        if (pthread_create(&s->io.thr[started], NULL, worker, s) != 0) {
            pthread_mutex_lock(&s->mu);
            srv__stop_request(s, "cannot start worker thread %u", started);
            pthread_mutex_unlock(&s->mu);
            rc = net__fail(GKV_EIO, "cannot start worker threads");
            break;
        }
    if (rc == GKV_OK && (rc = pool_start(s)) != GKV_OK) {
        pthread_mutex_lock(&s->mu);
        srv__stop_request(s, "%s", gkv_net_errmsg());
        pthread_mutex_unlock(&s->mu);
    }
    while (!atomic_load(&s->run.stop)) {
        struct timespec ts = {0, TICK_MS * 1000000L};

        nanosleep(&ts, NULL);
        if (s->run.sig) {
            pthread_mutex_lock(&s->mu);
            srv__stop_request(s, "stop requested (signal)");
            pthread_mutex_unlock(&s->mu);
            break;
        }
        srv__sess_expire(s);
        log_flush_dropped(s, 0);
        if (gkv_store_writer_held(s->store)) {
            /* fail-stop: a fault inside a write left this process holding
             * the store's writer lock (gkv_store_writer_held); it passes
             * on to the next writer only when this process exits. The
             * request that met it has its error reply */
            pthread_mutex_lock(&s->mu);
            srv__stop_request(s, "store damaged: a fault inside a write "
                              "left this process holding the store's "
                              "writer lock; exiting so that it passes on");
            pthread_mutex_unlock(&s->mu);
            rc = net__fail(GKV_ECORRUPT, "store '%s' is damaged: a fault "
                           "inside a write left this process holding its "
                           "writer lock, which passes on when it exits",
                           gkv_store_path(s->store));
        }
    }
    srv__log(s, "stopping: %s; finishing requests in flight", s->run.why);
    /* the pushes so far written first: a batch in hand may hold the
     * pool's stop up to its deadline (a peer that stopped first does not
     * answer), past a supervisor's grace (gkv-launch kills 5 s after its
     * SIGTERM); the last flush below writes those since */
    if (s->pool.started > 0 && s->wb.npat > 0 &&
        atomic_load(&s->wb.held) > 0 &&
        gkv_writeback_flush(s->store) != GKV_OK)
        srv__log(s, "write-back: writing the pushes before the batch "
                 "threads stop FAILED: %s", gkv_store_errmsg(s->store));
    /* the pool first, while the workers still answer: a batch in hand may
     * wait on this server's own workers (its peer client is a client of
     * every server, this one too), and so may the peer clients' leave */
    pool_stop(s);
    srv__batch_stop(s);
    atomic_store(&s->run.halt, 1);
    for (unsigned i = 0; i < started; i++)
        pthread_join(s->io.thr[i], NULL);
    srv__barrier_fail_parked(s);
    {
        /* replies already handed to nanomsg need a moment on the wire */
        struct timespec ts = {0, FLUSH_MS * 1000000L};
        nanosleep(&ts, NULL);
    }
    nn_close(s->io.sock);
    s->io.sock = -1;
    log_flush_dropped(s, 1);
    if (srv__wb_last_flush(s) != GKV_OK && rc == GKV_OK)
        rc = GKV_EIO;
    if (gkv_store_sync(s->store) != GKV_OK) {
        srv__log(s, "store sync failed: %s", gkv_store_errmsg(s->store));
        if (rc == GKV_OK)
            rc = net__fail(GKV_EIO, "store sync: %s",
                           gkv_store_errmsg(s->store));
    }
    srv__log(s, "stopped: store synced, %llu requests served",
             (unsigned long long)atomic_load(&s->stats.requests));
    return rc;
}

void
gkv_server_stop(gkv_server *s)
{
    if (s != NULL)
        s->run.sig = 1;
}

gkv_store *
gkv_server_store(gkv_server *s)
{
    return s != NULL ? s->store : NULL;
}

const char *
gkv_server_url(const gkv_server *s)
{
    return s != NULL ? s->io.url : "";
}

void
gkv_server_close(gkv_server *s)
{
    if (s == NULL)
        return;
    if (s->io.sock >= 0)
        nn_close(s->io.sock);
    srv__sess_free_all(s);
    gkv__free(s->io.thr);
    pool_stop(s);               /* nothing runs now: frees what is queued */
    gkv__free(s->pool.thr);
    pthread_mutex_destroy(&s->pool.mu);
    pthread_cond_destroy(&s->pool.cv);
    srv__batch_free(s);
    sodium_memzero(s->auth.nkey, sizeof s->auth.nkey);
    for (unsigned i = 0; s->graph.samp != NULL && i < s->io.nthreads; i++)
        gkv_sampler_free(s->graph.samp[i]);
    gkv__free(s->graph.samp);
    srv__pw_free_all(s);
    pthread_mutex_destroy(&s->pw.mu);
    gkv_sgraph_free(s->graph.sg);
    for (size_t i = 0; i < s->wb.npat; i++)
        gkv__free(s->wb.pat[i]);
    gkv__free(s->wb.pat);
    if (s->graph.part != NULL)
        gkv_part_close(s->graph.part);      /* closes its store */
    else
        gkv_store_close(s->store);
    gkv__free(s->graph.json);
    gkv__free(s->store_path);
    sodium_memzero(s->auth.key, sizeof s->auth.key);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->sess.done_cv);
    gkv__free(s);
}

