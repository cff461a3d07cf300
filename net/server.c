/* server.c - the gkv server: one raw REP socket (AF_SP_RAW, NN_REP) and a
 * few worker threads, each receiving a request with its nanomsg control
 * header, answering it and sending the reply with that header. Because the
 * socket is raw, a reply can also be sent later from any thread: barriers
 * park their requests and the last arrival answers them all.
 *
 * Locking: s->mu guards sessions, groups (members and parked barrier
 * requests), nonces and the stop reason. The store has its own locking
 * (readers never block; writers are serialised by LMDB across processes).
 * Handlers run on worker threads without s->mu, taking it only around the
 * session and group tables; nothing blocks while holding it (nn_sendmsg on
 * a raw REP socket never blocks: it drops a reply whose peer is gone).
 *
 * Request dispatch goes through ops[], indexed by message type: graph
 * requests (types 32..63) plug in there when the server holds a partition.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
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
#include <xxhash.h>
#include "kv_int.h"
#include "gkv_net.h"
#include "gkv_part.h"
#include "gkv_sample.h"
#include "graph_int.h"   /* graph__sample_hop */
#include "wire.h"

#define NONCE_TTL_MS   30000     /* a nonce is good this long, once */
#define SPENT_MAX      (1u << 18) /* spent nonces kept (live ones, at most) */
#define SESS_MAX       65536     /* sessions at once */
#define TICK_MS        50        /* housekeeping period */
#define RECV_TICK_MS   100       /* workers look at the stop flag this often */
#define FLUSH_MS       150       /* replies in flight get this long before
                                  * the socket closes (nanomsg has no linger) */
#define LOG_BURST      50        /* lines of a kind per LOG_WINDOW_MS */
enum { LOG_REJECT, LOG_REJOIN, LOG_AGAIN, LOG_OBSERVER, LOG_KINDS };
#define LOG_WINDOW_MS  10000
#define SOCK_BUF       (4 << 20) /* NN_SNDBUF / NN_RCVBUF: 4 MiB (BENCH.md) */
#define BOOK_MAX       (64u << 20) /* bytes of a partition config */
#define DONE_MAX       16        /* pushes a session remembers (dedup) */

/* The worker thread's index (its sampler), -1 off the workers. */
static _Thread_local int tl_worker = -1;

/* A push of a session, remembered so that a copy nanomsg sends again
 * after a lost connection is not applied twice. */
struct done {
    uint64_t req;           /* its request id */
    int32_t status;         /* its outcome, once applied */
    int busy;               /* being applied now */
};

struct sess {
    uint64_t id;
    char group[NET_GROUP_MAX + 1];
    uint32_t rank;
    uint64_t last_ms;       /* monotonic ms of its last request */
    struct done *done;      /* its latest DONE_MAX pushes, a ring (the
                             * client has two in flight, so a re-sent one
                             * may come after later ones); NULL until the
                             * first push */
    unsigned ndone, done_next;
    int observer;           /* joined with NET_HS_OBSERVER */
    int bar_any;            /* a barrier of this session was released: */
    uint64_t bar_seq;       /* the last one's seq */
    uint64_t inst;          /* its job instance (NET_HS_INSTANCE), or 0 */
};

struct parked {             /* a barrier request waiting for its group */
    void *ctl;              /* nanomsg control header (owned) */
    uint64_t req_id, session, seq;
    uint32_t rank, flags;   /* flags: the request's NET_F_SUM */
};

struct group {
    char name[NET_GROUP_MAX + 1];
    unsigned members;
    uint32_t bsize;         /* group size the parked requests said */
    struct parked *wait;
    size_t nwait, capwait;
};

#define GONE_MAX 256                 /* replaced sessions remembered */
struct gone {                        /* a session a rejoin replaced */
    uint64_t id;
    uint64_t when_ms;
    char group[NET_GROUP_MAX + 1];
    uint32_t rank;
};

/* A set of 64-bit keys, each kept until its expiry (UINT64_MAX: for
 * good), by open addressing on the key (random or hashed, so spread); a
 * slot with exp 0 is free. */
struct kset {
    struct kent {
        uint64_t k, exp;
    } *e;
    size_t cap, n;                   /* slots (a power of two), used */
};

/* The server's state, by concern. Each part says what guards it: "fixed"
 * fields are set by gkv_server_open() and only read while the server
 * runs (no lock); s->mu guards the fields marked so; atomics need none. */
struct gkv_server {
    gkv_store *store;                /* fixed; a partition's is the part's */
    char *store_path;                /* fixed; realpath */

    struct {                         /* fixed: the options it runs with */
        net_ident id;                /* sent in HELLO and HANDSHAKE replies */
        unsigned flags;              /* GKV_SERVER_* */
        unsigned lease_ms;
        unsigned num_clients;        /* members to see before stopping */
        int wide_ids;                /* SAMPLE replies always send i64 IDs
                                      * (GKV_SERVER_WIDE_IDS=1: tests) */
        uint32_t refuse_hs;          /* GKV_SERVER_REFUSE_HS_FLAGS (tests) */
    } conf;

    struct {                         /* the socket and its workers */
        int sock;                    /* fixed while running */
        char url[320];
        uint64_t max_msg;            /* payload bytes a message may carry */
        unsigned nthreads;
        pthread_t *thr;              /* gkv_server_run()'s */
        atomic_uint wnext;           /* worker indices handed out */
    } io;

    struct {                         /* server_graph.c, server_sample.c */
        gkv_part *part;              /* fixed; serving a partition, else NULL */
        const gkv_pbook *book;       /* fixed; the part's book */
        gkv_sgraph *sg;              /* fixed; the part's sgraph */
        gkv_sampler **samp;          /* one per worker; samp[i] is worker
                                      * i's alone */
        unsigned char *json;         /* fixed; the config file's bytes */
        size_t json_len;
    } graph;

    struct {                         /* edge features as sampling weights */
        pthread_mutex_t mu;          /* guards 'list' and each entry's
                                      * refs (each entry has its own lock) */
        struct pw *list;
    } pw;

    struct {                         /* write-back tensors (server_kv.c) */
        char **pat;                  /* fixed; names and prefixes ("emb*") */
        size_t npat;
        unsigned flush_ms;           /* fixed */
        atomic_uint_fast64_t taken;  /* tensors put in write-back mode */
        atomic_uint_fast64_t held;   /* ... and not deleted since */
    } wb;

    struct {                         /* tokens and nonces (server_sess.c) */
        int on;                      /* fixed; a token is required */
        unsigned char key[NET_KEY_LEN];                 /* fixed */
        unsigned char nkey[crypto_auth_hmacsha512256_KEYBYTES]; /* fixed;
                                      * tags the nonces; drawn at start */
        uint64_t nonce_ttl_ms;       /* fixed */
        struct kset spent;           /* under mu: the nonces (their random
                                      * part) accepted token handshakes
                                      * used, until they expire */
    } auth;

    pthread_mutex_t mu;              /* guards sess, log's counters and
                                      * run.why; nothing blocks under it */

    struct {                         /* sessions and groups, under mu */
        pthread_cond_t done_cv;      /* a push was applied (with mu) */
        struct sess *tab;
        size_t n, cap;
        struct group *grp;
        size_t ngrp, capgrp;
        uint64_t joined;
        struct gone gone[GONE_MAX];  /* a ring, to explain a request with
                                      * a replaced session */
        size_t gone_next;
        struct kset seen;            /* distinct members joined: hashes of
                                      * (group, rank); freed once
                                      * num_clients of them joined */
        size_t nseen;                /* how many it counted */
    } sess;

    struct {                         /* the log */
        FILE *fp;                    /* fixed */
        char tag[32];                /* fixed; "m0/s1" for log lines */
        /* under mu: lines rationed per kind (LOG_REJECT, ...) */
        uint64_t window[LOG_KINDS], count[LOG_KINDS], dropped[LOG_KINDS];
    } log;

    struct {                         /* stopping */
        volatile sig_atomic_t sig;   /* gkv_server_stop() */
        atomic_int stop;             /* a stop was decided */
        atomic_int halt;             /* workers must leave */
        int ran;                     /* gkv_server_run()'s thread only */
        char why[160];               /* under mu; the first reason */
    } run;

    struct {                         /* counters for STATS (atomics) */
        uint64_t start_ms;           /* fixed; srv__mono_ms() at open */
        atomic_uint_fast64_t requests, errors, rejected, bytes_in,
            bytes_out, pulls, pull_rows, pushes, push_rows, samples,
            sample_edges;
    } stats;
};

/* One request being handled. */
struct req {
    net_hdr h;
    const unsigned char *pl;         /* payload */
    size_t plen;
    void *ctl;                       /* control header; NULL once consumed */
    char group[NET_GROUP_MAX + 1];   /* the session's, when it has one */
    uint32_t rank;
    /* the outcome */
    gkv_err status;
    char err[NET_ERRMSG_MAX];
    uint32_t rflags;                 /* extra reply flags */
    void *out;                       /* reply message (nn_allocmsg), header
                                      * space included */
    size_t out_len;                  /* its payload bytes */
    int parked;                      /* the handler kept ctl */
};

/* ---- time and logs ---------------------------------------------------- */

static uint64_t
mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint64_t
wall_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void slog(gkv_server *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* One line per event: "2026-11-23T09:10:11.123Z gkv-server[pid] m0/s1: ..." */
static void
slog(gkv_server *s, const char *fmt, ...)
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
 * window, so a flood of garbage (rejections) or of handshakes as one
 * group and rank (rejoins: anyone may hand-shake to a server without a
 * token) cannot flood the log. *dropped: the lines of the window that
 * just ended that were not logged, for the caller to say. Caller holds
 * s->mu. */
static int
log_take(gkv_server *s, int kind, uint64_t *dropped)
{
    uint64_t now = mono_ms();
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
                                       "observer joins and leaves"};

static void
log_say_dropped(gkv_server *s, int kind, uint64_t dropped)
{
    if (dropped > 0)
        slog(s, "%llu more %s were not logged (at most %d are logged in "
             "%d s)", (unsigned long long)dropped, log_what[kind], LOG_BURST,
             LOG_WINDOW_MS / 1000);
}

/* log_take() with the lock taken here, saying what the window before
 * dropped. Takes s->mu. */
static int
log_allowed(gkv_server *s, int kind)
{
    uint64_t dropped;
    int ok;

    pthread_mutex_lock(&s->mu);
    ok = log_take(s, kind, &dropped);
    pthread_mutex_unlock(&s->mu);
    log_say_dropped(s, kind, dropped);
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
    now = mono_ms();    /* under the lock: log_take stamps windows under it */
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
        log_say_dropped(s, k, dropped[k]);
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

static void
request_stop(gkv_server *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Records why the server stops (the first reason wins). Caller holds
 * s->mu. */
static void
request_stop(gkv_server *s, const char *fmt, ...)
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

static gkv_err rfail(struct req *r, gkv_err rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static gkv_err
rfail(struct req *r, gkv_err rc, const char *fmt, ...)
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
static void
send_reply(gkv_server *s, void *ctl, const net_hdr *rq, gkv_err status,
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
        nn_freemsg(m);
        nn_freemsg(ctl);
        return;
    }
    atomic_fetch_add_explicit(&s->stats.bytes_out, NET_HDR_LEN + len,
                              memory_order_relaxed);
}

/* An error reply: the status and a message. Consumes ctl. */
static void
send_error(gkv_server *s, void *ctl, const net_hdr *rq, gkv_err status,
           uint32_t rflags, const char *msg)
{
    net_wr w = {0};
    void *m;

    net__enc_err(&w, msg);
    if ((m = nn_allocmsg(NET_HDR_LEN + w.off, 0)) == NULL) {
        nn_freemsg(ctl);
        return;
    }
    w.p = (unsigned char *)m + NET_HDR_LEN;
    w.cap = w.off;
    w.off = 0;
    net__enc_err(&w, msg);
    atomic_fetch_add_explicit(&s->stats.errors, 1, memory_order_relaxed);
    send_reply(s, ctl, rq, status, rflags, m, w.off);
}

typedef void (*enc_fn)(net_wr *w, const void *arg);

/* Builds r->out with encoder 'enc' in two passes (count, then write). */
static gkv_err
build(struct req *r, enc_fn enc, const void *arg)
{
    net_wr w = {0};

    enc(&w, arg);
    if ((r->out = nn_allocmsg(NET_HDR_LEN + w.off, 0)) == NULL)
        return rfail(r, GKV_ENOMEM, "out of memory for a reply of %zu bytes",
                     w.off);
    r->out_len = w.off;
    w.p = (unsigned char *)r->out + NET_HDR_LEN;
    w.cap = w.off;
    w.off = 0;
    enc(&w, arg);
    return GKV_OK;
}

static void enc_hello(net_wr *w, const void *a) { net__enc_hello_rep(w, a); }
static void enc_create(net_wr *w, const void *a) { net__enc_create_rep(w, a); }
static void enc_u8(net_wr *w, const void *a) { net__wr_u8(w, *(const uint8_t *)a); }
static void enc_u32(net_wr *w, const void *a) { net__wr_u32(w, *(const uint32_t *)a); }
static void enc_u64(net_wr *w, const void *a) { net__wr_u64(w, *(const uint64_t *)a); }
static void enc_barrier(net_wr *w, const void *a) { net__enc_barrier(w, a); }

/* ---- sessions and groups (caller holds mu) ---------------------------- */

static struct sess *
sess_find(gkv_server *s, uint64_t id)
{
    for (size_t i = 0; i < s->sess.n; i++)
        if (s->sess.tab[i].id == id)
            return &s->sess.tab[i];
    return NULL;
}

static struct group *
group_find(gkv_server *s, const char *name, int create)
{
    struct group *g;

    for (size_t i = 0; i < s->sess.ngrp; i++)
        if (strcmp(s->sess.grp[i].name, name) == 0)
            return &s->sess.grp[i];
    if (!create)
        return NULL;
    if (s->sess.ngrp == s->sess.capgrp) {
        size_t nc = s->sess.capgrp ? s->sess.capgrp * 2 : 8;
        struct group *ng = gkv__realloc(s->sess.grp, nc * sizeof *ng);
        if (ng == NULL)
            return NULL;
        s->sess.grp = ng;
        s->sess.capgrp = nc;
    }
    g = &s->sess.grp[s->sess.ngrp++];
    memset(g, 0, sizeof *g);
    snprintf(g->name, sizeof g->name, "%s", name);
    return g;
}

/* Drops the parked barrier request of 'session' in g, if any. */
static void
unpark(struct group *g, uint64_t session)
{
    for (size_t i = 0; i < g->nwait; i++)
        if (g->wait[i].session == session) {
            nn_freemsg(g->wait[i].ctl);
            g->wait[i] = g->wait[--g->nwait];
            return;
        }
}

/* Removes session i: its group loses a member (an emptied group is
 * forgotten), and a parked barrier request of it is dropped. Then, when no
 * client is left and the server does not keep alive, it stops. */
static void
sess_remove(gkv_server *s, size_t i, const char *how, int may_stop)
{
    struct sess old = s->sess.tab[i];
    struct group *g = group_find(s, old.group, 0);
    unsigned left = 0;
    uint64_t dropped = 0;

    s->sess.tab[i] = s->sess.tab[--s->sess.n];
    gkv__free(old.done);
    if (g != NULL) {
        unpark(g, old.id);
        if (g->members > 0)
            g->members--;
        left = g->members;
        if (left == 0) {
            for (size_t k = 0; k < g->nwait; k++)
                nn_freemsg(g->wait[k].ctl);
            gkv__free(g->wait);
            *g = s->sess.grp[--s->sess.ngrp];
        }
    }
    /* observers (kvctl, monitors polling stat) come and go all day: their
     * lines are rationed */
    if (!old.observer || log_take(s, LOG_OBSERVER, &dropped)) {
        log_say_dropped(s, LOG_OBSERVER, dropped);
        slog(s, "%s: group '%s' rank %u%s (%u left in the group, %zu clients "
             "in all)", how, old.group, old.rank, old.observer ?
             " (observer)" : "", left, s->sess.n);
    }
    /* an observer (kvctl) leaving never stops the server; the last member
     * leaving does, observers or not, once num_clients members joined */
    if (may_stop && !old.observer && !(s->conf.flags & GKV_SERVER_KEEP_ALIVE)) {
        size_t members = 0;
        for (size_t k = 0; k < s->sess.n; k++)
            members += !s->sess.tab[k].observer;
        if (members == 0 && s->sess.nseen < s->conf.num_clients)
            slog(s, "the last client left (group '%s' rank %u); %zu of the "
                 "%u clients (--num-clients) have joined: waiting for the "
                 "others", old.group, old.rank, s->sess.nseen,
                 s->conf.num_clients);
        else if (members == 0)
            request_stop(s, "the last client left (group '%s' rank %u)",
                         old.group, old.rank);
    }
}

/* Adds keys of 'ks' (with s->mu): 0 when k is new, 1 when it is there,
 * -1 when 'max' live keys fill the set (or out of memory). Expired keys go
 * when the set is rebuilt; until then one still holds its slot, which
 * only matters for itself. */
static int
kset_add(struct kset *ks, uint64_t k, uint64_t exp, size_t max)
{
    uint64_t now = mono_ms();
    size_t j;

    if (2 * (ks->n + 1) > ks->cap) {
        size_t live = 0, cap = 64;
        struct kent *t;

        for (size_t i = 0; i < ks->cap; i++)
            live += ks->e[i].exp > now;
        if (live >= max)
            return -1;
        while (cap < 4 * (live + 1))
            cap *= 2;
        if ((t = gkv__calloc(cap, sizeof *t)) == NULL)
            return -1;
        for (size_t i = 0; i < ks->cap; i++) {
            if (ks->e[i].exp <= now)
                continue;
            for (j = ks->e[i].k & (cap - 1); t[j].exp != 0; j = (j + 1) & (cap - 1))
                ;
            t[j] = ks->e[i];
        }
        gkv__free(ks->e);
        ks->e = t;
        ks->cap = cap;
        ks->n = live;
    }
    for (j = k & (ks->cap - 1); ks->e[j].exp != 0; j = (j + 1) & (ks->cap - 1))
        if (ks->e[j].k == k)
            return 1;
    ks->e[j].k = k;
    ks->e[j].exp = exp;
    ks->n++;
    return 0;
}

/* Counts member (group, rank) as seen (with s->mu), until num_clients
 * distinct members have been: then the set is dropped. A 64-bit hash
 * stands for the member; a collision (about n^2 / 2^65) would only make
 * the server wait for SIGTERM, never stop early. */
static void
seen_add(gkv_server *s, const char *group, uint32_t rank)
{
    unsigned char b[NET_GROUP_MAX + 1 + 4];
    size_t gl = strlen(group);

    if (s->sess.nseen >= s->conf.num_clients)
        return;
    memcpy(b, group, gl);
    b[gl] = 0;
    memcpy(b + gl + 1, &rank, 4);
    /* out of memory: counted at a later join, or never (no early stop) */
    if (kset_add(&s->sess.seen, XXH3_64bits(b, gl + 5), UINT64_MAX, SIZE_MAX) != 0)
        return;
    if (++s->sess.nseen == s->conf.num_clients) {
        slog(s, "all %u clients (--num-clients) have joined",
             s->conf.num_clients);
        gkv__free(s->sess.seen.e);
        memset(&s->sess.seen, 0, sizeof s->sess.seen);
    }
}

/* ---- the schema ------------------------------------------------------------ */

static void
tensor_from_desc(net_tensor *t, const gkv_tensor_desc *d)
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

struct schema_arg {
    const gkv_tensor_desc *d;
    size_t n;
    uint64_t session;               /* HANDSHAKE: written before the rest */
    const net_ident *id;            /* HANDSHAKE */
    const net_book *book;           /* HANDSHAKE of a graph server */
};

static void
enc_schema(net_wr *w, const void *a)
{
    const struct schema_arg *sa = a;
    net_tensor t;

    if (sa->id != NULL) {
        net__wr_u64(w, sa->session);
        net__enc_ident(w, sa->id);
    }
    net__wr_u32(w, (uint32_t)sa->n);
    for (size_t i = 0; i < sa->n; i++) {
        tensor_from_desc(&t, &sa->d[i]);
        net__enc_tensor(w, &t);
    }
    if (sa->book != NULL)
        net__enc_book(w, sa->book);
}

/* Replies with the schema (and, for a handshake, session and identity). */
static gkv_err
reply_schema(gkv_server *s, struct req *r, uint64_t session, int with_id)
{
    struct schema_arg sa = {0};
    net_book book;
    gkv_tensor_desc *d = NULL;
    size_t n = 0;
    gkv_err rc;

    if ((rc = gkv_tensor_list(s->store, NULL, 0, &d, &n)) != GKV_OK)
        return rfail(r, rc, "listing tensors: %s",
                     gkv_store_errmsg(s->store));
    sa.d = d;
    sa.n = n;
    sa.session = session;
    sa.id = with_id ? &s->conf.id : NULL;
    if (with_id && s->graph.part != NULL) {
        book.part_id = (uint32_t)gkv_part_id(s->graph.part);
        book.len = s->graph.json_len;
        book.json = s->graph.json;
        sa.book = &book;
    }
    rc = build(r, enc_schema, &sa);
    gkv_free(d);
    return rc;
}

/* ---- handlers ---------------------------------------------------------------- */

/* A HELLO's nonce carries its own proof, so the server keeps nothing per
 * HELLO and a flood of HELLOs cannot push other clients' nonces out: bytes
 * 0-7 are the issue time (monotonic ms, little-endian), 8-15 random, 16-31
 * the first 16 bytes of HMAC-SHA512-256 over bytes 0-15, keyed with
 * auth.nkey. A handshake's nonce must carry a good tag and be younger than
 * the TTL; with a token it must also be unspent (the spent set holds the
 * nonces of accepted handshakes until they expire), so a handshake seen on
 * the wire cannot be replayed. Without a token anyone may hand-shake as
 * anyone, so a replay gains nothing and nothing is kept. */
static void
nonce_tag(const gkv_server *s, const unsigned char *n, unsigned char *tag)
{
    unsigned char mac[crypto_auth_hmacsha512256_BYTES];

    crypto_auth_hmacsha512256(mac, n, 16, s->auth.nkey);
    memcpy(tag, mac, 16);
    sodium_memzero(mac, sizeof mac);
}

static void
nonce_make(const gkv_server *s, unsigned char *n)
{
    uint64_t t = mono_ms();

    for (int i = 0; i < 8; i++)
        n[i] = (unsigned char)(t >> (8 * i));
    randombytes_buf(n + 8, 8);
    nonce_tag(s, n, n + 16);
}

/* 1 when n is a nonce of this server younger than the TTL; *rnd, *exp_ms:
 * its random part and when it expires. */
static int
nonce_good(const gkv_server *s, const unsigned char *n, uint64_t *rnd,
           uint64_t *exp_ms)
{
    unsigned char tag[16];
    uint64_t t = 0, now = mono_ms();
    int ok;

    nonce_tag(s, n, tag);
    ok = sodium_memcmp(tag, n + 16, 16) == 0;
    for (int i = 0; i < 8; i++)
        t |= (uint64_t)n[i] << (8 * i);
    memcpy(rnd, n + 8, 8);
    *exp_ms = t + s->auth.nonce_ttl_ms;
    return ok && t <= now && now < *exp_ms;
}

static void
op_hello(gkv_server *s, struct req *r)
{
    net_hello_rep hr;
    net_rd rd;

    net__rd_init(&rd, r->pl, r->plen);
    if (net__dec_empty(&rd) != 0) {
        rfail(r, GKV_EPROTO, "hello: %s", rd.why);
        return;
    }
    memset(&hr, 0, sizeof hr);
    nonce_make(s, hr.nonce);
    hr.id = s->conf.id;
    build(r, enc_hello, &hr);
}

static void
op_handshake(gkv_server *s, struct req *r)
{
    net_hs_req hs;
    net_rd rd;
    struct sess *old;
    struct group *g;
    uint64_t id, rnd, exp_ms, dropped;
    int spent;

    net__rd_init(&rd, r->pl, r->plen);
    if (net__dec_hs_req(&rd, &hs) != 0) {
        rfail(r, GKV_EPROTO, "handshake: %s", rd.why);
        return;
    }
    if (hs.flags & s->conf.refuse_hs) {   /* a test's older server */
        rfail(r, GKV_EPROTO, "handshake: unknown flags 0x%x", hs.flags);
        return;
    }
    if (!net__group_ok(hs.group)) {
        rfail(r, GKV_EINVAL, "handshake: group name '%s' must be 1..%u "
              "printable characters without spaces", hs.group, NET_GROUP_MAX);
        return;
    }
    if (!nonce_good(s, hs.nonce, &rnd, &exp_ms)) {
        rfail(r, GKV_EPERM, "handshake of group '%s' rank %u: nonce not "
              "from this server or older than %llu ms (hello again)",
              hs.group, hs.rank, (unsigned long long)s->auth.nonce_ttl_ms);
        return;
    }
    if (s->auth.on && !(hs.flags & NET_HS_PROOF)) {
        rfail(r, GKV_EPERM, "handshake of group '%s' rank %u: this server "
              "requires a token and none was given", hs.group, hs.rank);
        return;
    }
    if (s->auth.on && !net__proof_ok(s->auth.key, hs.nonce, hs.group, hs.rank,
                                     hs.mac)) {
        rfail(r, GKV_EPERM, "handshake of group '%s' rank %u: wrong token "
              "(the proof does not match)", hs.group, hs.rank);
        return;
    }
    if (s->auth.on) {
        pthread_mutex_lock(&s->mu);
        spent = kset_add(&s->auth.spent, rnd, exp_ms, SPENT_MAX);
        pthread_mutex_unlock(&s->mu);
        if (spent != 0) {
            rfail(r, spent > 0 ? GKV_EPERM : GKV_EBUSY, spent > 0 ?
                  "handshake of group '%s' rank %u: nonce already used (a "
                  "replayed handshake?)" : "handshake of group '%s' rank "
                  "%u: too many handshakes in the last 30 s (try again)",
                  hs.group, hs.rank);
            return;
        }
    }
    do
        randombytes_buf(&id, sizeof id);
    while (id == 0);
    pthread_mutex_lock(&s->mu);
    if (hs.instance != 0 && !(hs.flags & NET_HS_OBSERVER)) {
        /* another run of the job with this group name: the members of an
         * earlier one (killed, their leases not out yet) go now, with
         * their parked barriers, which would count for this run's. The
         * server is not stopped by their going: a member is joining */
        for (size_t i = s->sess.n; i-- > 0;) {
            struct sess *o = &s->sess.tab[i];
            if (!o->observer && o->inst != 0 && o->inst != hs.instance &&
                strcmp(o->group, hs.group) == 0)
                sess_remove(s, i, "dropped: another run of the job (a new "
                            "job instance) joined its group", 0);
        }
    }
    old = NULL;
    for (size_t i = 0; i < s->sess.n; i++)
        if (s->sess.tab[i].rank == hs.rank &&
            strcmp(s->sess.tab[i].group, hs.group) == 0)
            old = &s->sess.tab[i];
    if (old != NULL && !old->observer && (hs.flags & NET_HS_OBSERVER)) {
        /* stopping counts members' ends only: a member's session made an
         * observer's would end uncounted (the server ran on with no member
         * left), and no longer kept the server up for the member it
         * displaced. A client's flags never change, so this is another
         * client using a member's identity. */
        pthread_mutex_unlock(&s->mu);
        rfail(r, GKV_EPERM, "handshake of group '%s' rank %u as an "
              "observer: rank %u is a member's (an observer needs a group "
              "or rank of its own)", hs.group, hs.rank, hs.rank);
        return;
    }
    if (old != NULL) {
        /* the same member again (it reconnected): its new session replaces
         * the old one, and a barrier it had parked is dropped */
        struct gone *gn = &s->sess.gone[s->sess.gone_next];
        uint64_t now = mono_ms(), idle = now - old->last_ms;
        if ((g = group_find(s, hs.group, 0)) != NULL)
            unpark(g, old->id);
        s->sess.gone_next = (s->sess.gone_next + 1) % GONE_MAX;
        gn->id = old->id;
        gn->when_ms = now;
        snprintf(gn->group, sizeof gn->group, "%s", old->group);
        gn->rank = old->rank;
        old->id = id;
        old->last_ms = now;
        old->ndone = old->done_next = 0;
        /* a new session may be a new process, whose barriers count from 1
         * again: an old release must not answer its first one. But the
         * same client rejoining after a barrier timed out (RESUME) retries
         * that barrier, which the group may have passed with the request
         * it abandoned: the retry must be answered, not parked as a new
         * barrier the group has moved past */
        if (!(hs.flags & NET_HS_RESUME))
            old->bar_any = 0;
        /* an observer may become a member (its end then counts), not
         * the reverse (refused above) */
        old->observer = (hs.flags & NET_HS_OBSERVER) != 0;
        old->inst = hs.instance;
        if (log_take(s, LOG_REJOIN, &dropped)) {
            log_say_dropped(s, LOG_REJOIN, dropped);
            slog(s, "rejoin: group '%s' rank %u (new session; the old one "
                 "was last heard %llu ms ago%s)", hs.group, hs.rank,
                 (unsigned long long)idle, (hs.flags & NET_HS_RESUME) ?
                 "; the same client after a failed call" : idle < 1000 ?
                 ": two clients with one group and rank?" : "");
        }
    } else if (s->sess.n >= SESS_MAX ||
               (g = group_find(s, hs.group, 1)) == NULL) {
        pthread_mutex_unlock(&s->mu);
        rfail(r, GKV_ENOMEM, "handshake: no room for another client");
        return;
    } else {
        if (s->sess.n == s->sess.cap) {
            size_t nc = s->sess.cap ? s->sess.cap * 2 : 16;
            struct sess *ns = gkv__realloc(s->sess.tab, nc * sizeof *ns);
            if (ns == NULL) {
                if (g->members == 0)
                    *g = s->sess.grp[--s->sess.ngrp];
                pthread_mutex_unlock(&s->mu);
                rfail(r, GKV_ENOMEM, "handshake: no room for another client");
                return;
            }
            s->sess.tab = ns;
            s->sess.cap = nc;
        }
        old = &s->sess.tab[s->sess.n++];
        memset(old, 0, sizeof *old);
        old->id = id;
        snprintf(old->group, sizeof old->group, "%s", hs.group);
        old->rank = hs.rank;
        old->last_ms = mono_ms();
        old->observer = (hs.flags & NET_HS_OBSERVER) != 0;
        old->inst = hs.instance;
        g->members++;
        s->sess.joined++;
        dropped = 0;
        if (!old->observer || log_take(s, LOG_OBSERVER, &dropped)) {
            log_say_dropped(s, LOG_OBSERVER, dropped);
            slog(s, "join: group '%s' rank %u%s (%u in the group, %zu "
                 "clients in all)", hs.group, hs.rank, old->observer ?
                 " (observer)" : "", g->members, s->sess.n);
        }
    }
    if (!(hs.flags & NET_HS_OBSERVER))
        seen_add(s, hs.group, hs.rank);
    pthread_mutex_unlock(&s->mu);
    reply_schema(s, r, id, 1);
}

static void
op_schema(gkv_server *s, struct req *r)
{
    net_rd rd;

    net__rd_init(&rd, r->pl, r->plen);
    if (net__dec_empty(&rd) != 0) {
        rfail(r, GKV_EPROTO, "schema: %s", rd.why);
        return;
    }
    reply_schema(s, r, 0, 0);
}

/* A pointer to n u64 IDs that is aligned: 'p' itself, or a copy in *tmp
 * (payload arrays are 8-aligned within the message, but nanomsg does not
 * promise where a received message starts). */
static const void *
bytes_aligned(const unsigned char *p, size_t bytes, void **tmp)
{
    *tmp = NULL;
    if (((uintptr_t)p & 7) == 0)
        return p;
    if ((*tmp = gkv__malloc(bytes + 1)) == NULL)
        return NULL;
    memcpy(*tmp, p, bytes);
    return *tmp;
}

static const uint64_t *
ids_aligned(const unsigned char *p, size_t n, uint64_t **tmp)
{
    void *t;
    const void *a = bytes_aligned(p, n * 8, &t);

    *tmp = t;
    return a;
}

/* ---- write-back tensors (gkv_server_opts.writeback) ---------------- */

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
static int
wb_match(const gkv_server *s, const char *name)
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
        slog(s, "write-back: tensor '%s' (%llu rows, %.1f MB) in RAM, "
             "written every %u ms", name, (unsigned long long)(d.hi - d.lo),
             (double)(d.hi - d.lo) * (double)d.row_bytes / 1e6,
             s->wb.flush_ms);
    else
        slog(s, "write-back: tensor '%s', created by %s, matches '%s': "
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
        slog(s, "write-back: WARNING: '%s' matches no tensor yet; tensors "
             "created later whose names match will be held in RAM%s", p,
             graph_hint ? " (this server serves a graph partition, whose "
             "tensors are named node/NTYPE/NAME and edge/ETYPE/NAME: the "
             "embedding 'emb' of node type 'user' is 'node/user/emb')" : "");
        return;
    }
    slog(s, "write-back: '%s' matches %zu tensor%s: %s%s", s->wb.pat[i], n,
         n == 1 ? "" : "s", list, n > shown ? ", ..." : "");
}

/* The patterns of o->writeback, checked and copied; then every tensor of
 * the store that matches in write-back mode. */
static gkv_err
wb_open(gkv_server *s, const gkv_server_opts *o, unsigned nserv)
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
        if (wb_match(s, d[i].name))
            rc = wb_begin(s, d[i].name, NULL);
    gkv_free(d);
    return rc;
}

/* At the stop: the last flush, and what became of it. */
static gkv_err
wb_last_flush(gkv_server *s)
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
            slog(s, "write-back: no tensor was held in RAM (--writeback %s "
                 "matched none); nothing to write", pats);
        else
            slog(s, "write-back: no tensor is held in RAM any more (the "
                 "%llu held were deleted); nothing to write",
                 (unsigned long long)atomic_load(&s->wb.taken));
        return GKV_OK;
    }
    if ((rc = gkv_writeback_flush(s->store)) == GKV_OK) {
        slog(s, "write-back: last pushes written");
        return GKV_OK;
    }
    if (rc == GKV_ENOTFOUND) {   /* the others were written */
        slog(s, "write-back: last pushes written, but %s",
             gkv_store_errmsg(s->store));
        return GKV_OK;
    }
    slog(s, "write-back: writing the last pushes FAILED (%s): %s",
         gkv_strerror(rc), gkv_store_errmsg(s->store));
    return net__fail(rc, "write-back: %s", gkv_store_errmsg(s->store));
}

static void
op_pull(gkv_server *s, struct req *r)
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
    int zeros = 0;       /* a companion not created yet */
    gkv_err rc;

    net__rd_init(&rd, r->pl, r->plen);
    if (net__dec_pull_req(&rd, &pq) != 0) {
        rfail(r, GKV_EPROTO, "pull: %s", rd.why);
        return;
    }
    /* one snapshot for the description and the rows; without one when
     * tensors are kept in write-back mode, so that their RAM copy is read */
    if (s->wb.npat == 0 && (rc = gkv_txn_begin(s->store, &tx)) != GKV_OK) {
        rfail(r, rc, "pull: %s", gkv_store_errmsg(s->store));
        return;
    }
    rc = gkv_tensor_info(s->store, tx, pq.name, &d);
    if (rc == GKV_ENOTFOUND && strchr(pq.name, '#') != NULL) {
        /* optimizer state not created yet: zeros, when its tensor is here */
        int exists;
        if ((rc = gkv_opt_state_info(s->store, tx, pq.name, &d,
                                     &exists)) != GKV_OK) {
            rfail(r, rc, "pull: %s", gkv_store_errmsg(s->store));
            goto out;
        }
        zeros = !exists;
    } else if (rc != GKV_OK) {
        rfail(r, rc, "pull: %s", gkv_store_errmsg(s->store));
        goto out;
    }
    /* bound the reply before allocating it */
    if (d.row_bytes != 0 && pq.n > (s->io.max_msg - 64) / d.row_bytes) {
        rfail(r, GKV_EINVAL, "pull of %llu rows of tensor '%s' (%zu bytes "
              "each) is more than this server's %llu-byte message limit; "
              "split it", (unsigned long long)pq.n, pq.name, d.row_bytes,
              (unsigned long long)s->io.max_msg);
        goto out;
    }
    bytes = (size_t)pq.n * d.row_bytes;
    if ((ids = ids_aligned(pq.ids, (size_t)pq.n, &tmp)) == NULL) {
        rfail(r, GKV_ENOMEM, "pull: out of memory");
        goto out;
    }
    /* the rows are gathered straight into the reply message */
    if ((r->out = nn_allocmsg(NET_HDR_LEN + 16 + bytes, 0)) == NULL) {
        rfail(r, GKV_ENOMEM, "pull: out of memory for a %zu-byte reply", bytes);
        goto out;
    }
    w.p = (unsigned char *)r->out + NET_HDR_LEN;
    w.cap = 16 + bytes;
    w.off = 0;
    net__wr_u64(&w, pq.n);
    net__wr_u64(&w, d.row_bytes);
    rows = net__wr_arr(&w, bytes);
    if (zeros) {
        for (uint64_t i = 0; i < pq.n; i++)
            if (ids[i] < d.lo || ids[i] >= d.hi) {
                nn_freemsg(r->out);
                r->out = NULL;
                rfail(r, GKV_ERANGE, "tensor '%s': ID %llu (index %llu) is "
                      "outside [%llu, %llu)", pq.name,
                      (unsigned long long)ids[i], (unsigned long long)i,
                      (unsigned long long)d.lo, (unsigned long long)d.hi);
                goto out;
            }
        if (bytes > 0)
            memset(rows, 0, bytes);
        rc = GKV_OK;
    } else {
        rc = gkv_tensor_pull(s->store, tx, pq.name, ids, (size_t)pq.n,
                             rows, bytes);
    }
    if (rc != GKV_OK) {
        nn_freemsg(r->out);
        r->out = NULL;
        rfail(r, rc, "%s", gkv_store_errmsg(s->store));
        goto out;
    }
    r->out_len = w.off;
    atomic_fetch_add_explicit(&s->stats.pulls, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->stats.pull_rows, pq.n, memory_order_relaxed);
out:
    gkv_txn_end(tx);
    gkv__free(tmp);
}

static struct done *
done_find(struct sess *ss, uint64_t req)
{
    for (unsigned i = 0; i < ss->ndone; i++)
        if (ss->done[i].req == req)
            return &ss->done[i];
    return NULL;
}

/* For a push: whether this session already has request r->h.req_id (a
 * request nanomsg re-sent after a lost connection). A copy of one being
 * applied waits for it. A repeat gets the first one's status without
 * being applied again (1); otherwise the request is recorded as being
 * applied, and the caller must call mark_done() with its outcome (0).
 * When the session is gone (a rejoin of its group and rank, its lease, a
 * LEAVE), before or while the copy waited, its record of pushes went with
 * it: the request is refused with GKV_EPERM and NET_F_SESSION (1), never
 * applied unrecorded, since it may be a copy of one already applied. */
static int
already_done(gkv_server *s, struct req *r)
{
    struct sess *ss;
    struct done *d;
    int dup = 0, gone = 1;
    int32_t st = 0;

    pthread_mutex_lock(&s->mu);
    while ((ss = sess_find(s, r->h.session)) != NULL) {
        gone = 0;
        if ((d = done_find(ss, r->h.req_id)) == NULL) {
            if (ss->done == NULL &&
                (ss->done = gkv__calloc(DONE_MAX, sizeof *ss->done)) == NULL)
                break;                  /* not remembered */
            d = &ss->done[ss->done_next];
            ss->done_next = (ss->done_next + 1) % DONE_MAX;
            if (ss->ndone < DONE_MAX)
                ss->ndone++;
            d->req = r->h.req_id;
            d->status = 0;
            d->busy = 1;
            break;
        }
        if (!d->busy) {
            dup = 1;
            st = d->status;
            break;
        }
        pthread_cond_wait(&s->sess.done_cv, &s->mu);
        gone = 1;
    }
    pthread_mutex_unlock(&s->mu);
    if (gone) {
        rfail(r, GKV_EPERM, "%s request %llu of session 0x%016llx: the "
              "session ended (a newer handshake as its group and rank, its "
              "lease, or a leave) before it was applied; not applied",
              net__type_name(r->h.type), (unsigned long long)r->h.req_id,
              (unsigned long long)r->h.session);
        r->rflags |= NET_F_SESSION;
        return 1;
    }
    if (dup) {
        if (log_allowed(s, LOG_AGAIN))
            slog(s, "group '%s' rank %u: request %llu (%s) arrived again; "
                 "not applied twice", r->group, r->rank,
                 (unsigned long long)r->h.req_id, net__type_name(r->h.type));
        if (st != GKV_OK)
            rfail(r, (gkv_err)st, "request %llu was already answered with "
                  "this error", (unsigned long long)r->h.req_id);
    }
    return dup;
}

static void
mark_done(gkv_server *s, struct req *r, gkv_err st)
{
    struct sess *ss;
    struct done *d;

    pthread_mutex_lock(&s->mu);
    if ((ss = sess_find(s, r->h.session)) != NULL &&
        (d = done_find(ss, r->h.req_id)) != NULL && d->busy) {
        d->status = st;
        d->busy = 0;
    }
    pthread_cond_broadcast(&s->sess.done_cv);
    pthread_mutex_unlock(&s->mu);
}

static void
op_push(gkv_server *s, struct req *r)
{
    net_push_req pq;
    gkv_tensor_desc d;
    gkv_push_args pa;
    net_rd rd;
    uint64_t *tmp = NULL, n;
    unsigned char *rtmp = NULL;
    const uint64_t *ids;
    const void *rows;
    gkv_err rc;

    net__rd_init(&rd, r->pl, r->plen);
    if (net__dec_push_req(&rd, &pq) != 0) {
        rfail(r, GKV_EPROTO, "push: %s", rd.why);
        return;
    }
    if (already_done(s, r)) {
        if (r->status == GKV_OK)
            build(r, enc_u64, &pq.n);
        return;
    }
    /* from here every way out records the outcome, rc (mark_done) */
    rc = gkv_tensor_info(s->store, NULL, pq.name, &d);
    if (rc == GKV_ENOTFOUND && strchr(pq.name, '#') != NULL) {
        /* a restore of optimizer state not created yet: the push checks
         * and creates it (gkv_tensor_push); its rows as it will have */
        int exists;
        if ((rc = gkv_opt_state_info(s->store, NULL, pq.name, &d,
                                     &exists)) != GKV_OK) {
            rfail(r, rc, "push: %s", gkv_store_errmsg(s->store));
            goto out;
        }
    } else if (rc != GKV_OK) {
        rfail(r, rc, "push: %s", gkv_store_errmsg(s->store));
        goto out;
    }
    if (pq.row_bytes != d.row_bytes) {
        rc = rfail(r, GKV_ESHAPE, "push to tensor '%s': rows of %llu "
                   "bytes, the tensor's rows are %zu bytes (%llu x %s)",
                   pq.name, (unsigned long long)pq.row_bytes, d.row_bytes,
                   (unsigned long long)d.row_elems, gkv_dtype_name(d.dtype));
        goto out;
    }
    if ((ids = ids_aligned(pq.ids, (size_t)pq.n, &tmp)) == NULL) {
        rc = rfail(r, GKV_ENOMEM, "push: out of memory");
        goto out;
    }
    rows = pq.rows;
    if (((uintptr_t)rows & 7) != 0) {
        if ((rtmp = gkv__malloc((size_t)(pq.n * pq.row_bytes) + 1)) == NULL) {
            rc = rfail(r, GKV_ENOMEM, "push: out of memory");
            goto out;
        }
        memcpy(rtmp, rows, (size_t)(pq.n * pq.row_bytes));
        rows = rtmp;
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
        rfail(r, rc, "%s", gkv_store_errmsg(s->store));
        goto out;
    }
    atomic_fetch_add_explicit(&s->stats.pushes, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->stats.push_rows, pq.n, memory_order_relaxed);
    n = pq.n;
    build(r, enc_u64, &n);
out:
    mark_done(s, r, rc);
    gkv__free(tmp);
    gkv__free(rtmp);
}

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

static void
op_create(gkv_server *s, struct req *r)
{
    net_create_req cq;
    net_create_rep cr;
    gkv_tensor_spec sp;
    gkv_tensor_desc d;
    char diff[800];
    net_rd rd;
    gkv_err rc;

    net__rd_init(&rd, r->pl, r->plen);
    if (net__dec_create_req(&rd, &cq) != 0) {
        rfail(r, GKV_EPROTO, "create: %s", rd.why);
        return;
    }
    if (cq.t.policy[0] != '\0') {
        rfail(r, GKV_EINVAL, "create '%s': policy '%s' is not one this "
              "server knows", cq.t.name, cq.t.policy);
        return;
    }
    memset(&sp, 0, sizeof sp);
    sp.dtype = (gkv_dtype)cq.t.dtype;
    sp.ndim = cq.t.ndim;
    for (unsigned i = 0; i < cq.t.ndim; i++)
        sp.shape[i] = cq.t.shape[i];
    sp.lo = cq.t.lo;
    sp.hi = cq.t.hi;
    sp.chunk_rows = cq.t.chunk_rows;
    sp.flags = cq.t.flags;
    sp.init = (gkv_init)cq.init;
    sp.a = cq.a;
    sp.b = cq.b;
    sp.seed = cq.seed;
    memset(&cr, 0, sizeof cr);
    rc = gkv_tensor_create(s->store, cq.t.name, &sp);
    if (rc == GKV_OK) {
        char by[NET_GROUP_MAX + 32];

        cr.created = 1;
        slog(s, "group '%s' rank %u created tensor '%s' rows [%llu, %llu)",
             r->group, r->rank, cq.t.name, (unsigned long long)cq.t.lo,
             (unsigned long long)cq.t.hi);
        snprintf(by, sizeof by, "group '%s' rank %u", r->group, r->rank);
        if (wb_match(s, cq.t.name) &&
            (rc = wb_begin(s, cq.t.name, by)) != GKV_OK) {
            char why[512];

            /* not as configured: undone, so a retry starts afresh */
            snprintf(why, sizeof why, "%s", gkv_net_errmsg());
            slog(s, "%s; tensor '%s' deleted again", why, cq.t.name);
            gkv_tensor_delete(s->store, cq.t.name);
            rfail(r, rc, "%s; the tensor was not kept", why);
            return;
        }
    } else if (rc != GKV_EEXIST) {
        rfail(r, rc, "%s", gkv_store_errmsg(s->store));
        return;
    }
    /* created now or before (also by a racing client): describe it, and
     * an old one must match */
    if ((rc = gkv_tensor_info(s->store, NULL, cq.t.name, &d)) != GKV_OK) {
        rfail(r, rc, "%s", gkv_store_errmsg(s->store));
        return;
    }
    if (!cr.created) {
        spec_diff(&d, &cq, diff, sizeof diff);
        if (diff[0] != '\0') {
            rfail(r, GKV_EEXIST, "%s", diff);
            return;
        }
    }
    tensor_from_desc(&cr.t, &d);
    build(r, enc_create, &cr);
}

static void
op_delete(gkv_server *s, struct req *r)
{
    char name[GKV_NAME_MAX + 1];
    net_rd rd;
    uint8_t existed = 1;
    gkv_err rc;

    net__rd_init(&rd, r->pl, r->plen);
    if (net__dec_name(&rd, name) != 0) {
        rfail(r, GKV_EPROTO, "delete: %s", rd.why);
        return;
    }
    /* out of write-back first (delete refuses it); that writes the
     * pushes not yet flushed, which the delete then drops */
    if (wb_match(s, name)) {
        rc = gkv_writeback_stop(s->store, name);
        if (rc == GKV_OK)
            atomic_fetch_sub(&s->wb.held, 1);
        else if (rc != GKV_ENOTFOUND) {
            rfail(r, rc, "%s", gkv_store_errmsg(s->store));
            return;
        }
    }
    rc = gkv_tensor_delete(s->store, name);
    if (rc == GKV_ENOTFOUND)
        existed = 0;
    else if (rc != GKV_OK) {
        rfail(r, rc, "%s", gkv_store_errmsg(s->store));
        return;
    } else {
        slog(s, "group '%s' rank %u deleted tensor '%s'", r->group, r->rank,
             name);
    }
    build(r, enc_u8, &existed);
}

/* Drops a tensor's optimizer state (gkv_opt_reset; with write-back, its
 * RAM copies too). Idempotent, like DELETE. */
static void
op_opt_reset(gkv_server *s, struct req *r)
{
    char name[GKV_NAME_MAX + 1], opt[NET_OPT_MAX + 1];
    net_rd rd;
    uint8_t one = 1;
    gkv_err rc;

    net__rd_init(&rd, r->pl, r->plen);
    if (net__dec_opt_reset(&rd, name, opt) != 0) {
        rfail(r, GKV_EPROTO, "opt_reset: %s", rd.why);
        return;
    }
    rc = gkv_opt_reset(s->store, name, opt[0] != '\0' ? opt : NULL);
    if (rc != GKV_OK) {
        rfail(r, rc, "%s", gkv_store_errmsg(s->store));
        return;
    }
    slog(s, "group '%s' rank %u reset the %s optimizer state of tensor '%s'",
         r->group, r->rank, opt[0] != '\0' ? opt : "adagrad and adam", name);
    build(r, enc_u8, &one);
}

static void
op_barrier(gkv_server *s, struct req *r)
{
    net_barrier b;
    net_rd rd;
    struct group *g;
    struct parked *rel = NULL, *p;
    struct sess *ss;
    size_t nrel = 0;
    int bad = 0;

    net__rd_init(&rd, r->pl, r->plen);
    if (net__dec_barrier(&rd, &b) != 0) {
        rfail(r, GKV_EPROTO, "barrier: %s", rd.why);
        return;
    }
    if (r->rank >= b.group_size) {
        rfail(r, GKV_EINVAL, "barrier of group '%s': rank %u is not below the "
              "group size %u", r->group, r->rank, b.group_size);
        return;
    }
    pthread_mutex_lock(&s->mu);
    /* the dispatcher saw the session, but without the lock since: one
     * dropped meanwhile (a rejoin, its lease) must not park, as no
     * sess_remove() would ever take it out of the group's count */
    if ((ss = sess_find(s, r->h.session)) == NULL) {
        pthread_mutex_unlock(&s->mu);
        rfail(r, GKV_EPERM, "barrier of group '%s' rank %u: the session "
              "ended before the barrier was entered", r->group, r->rank);
        r->rflags |= NET_F_SESSION;
        return;
    }
    if (ss->bar_any && ss->bar_seq == b.seq) {
        /* this barrier was released, and its answer lost with the
         * connection; nanomsg sent the request again on the new one:
         * answer again rather than park it as a new barrier of a group
         * that has moved on */
        pthread_mutex_unlock(&s->mu);
        if (log_allowed(s, LOG_AGAIN))
            slog(s, "group '%s' rank %u: barrier %llu arrived again after "
                 "it was released; answered again", r->group, r->rank,
                 (unsigned long long)b.seq);
        build(r, enc_barrier, &b);
        return;
    }
    if ((g = group_find(s, r->group, 0)) == NULL) {
        pthread_mutex_unlock(&s->mu);
        rfail(r, GKV_EINVAL, "barrier: group '%s' has no members", r->group);
        return;
    }
    unpark(g, r->h.session);            /* a retry replaces the earlier one */
    for (size_t i = 0; i < g->nwait; i++)
        if (g->wait[i].rank == r->rank) {
            /* the same rank under another session: a restarted client */
            nn_freemsg(g->wait[i].ctl);
            g->wait[i] = g->wait[--g->nwait];
            break;
        }
    if (g->nwait > 0 && g->bsize != b.group_size)
        bad = rfail(r, GKV_EINVAL, "barrier of group '%s': rank %u says %u "
                    "clients, ranks already waiting said %u", r->group,
                    r->rank, b.group_size, g->bsize);
    else if (g->nwait > 0 && g->wait[0].seq != b.seq)
        bad = rfail(r, GKV_EINVAL, "barrier of group '%s': rank %u is at "
                    "barrier %llu, ranks already waiting are at %llu",
                    r->group, r->rank, (unsigned long long)b.seq,
                    (unsigned long long)g->wait[0].seq);
    if (bad) {
        pthread_mutex_unlock(&s->mu);
        return;
    }
    if (g->nwait == g->capwait) {
        size_t nc = g->capwait ? g->capwait * 2 : 8;
        struct parked *nw = gkv__realloc(g->wait, nc * sizeof *nw);
        if (nw == NULL) {
            pthread_mutex_unlock(&s->mu);
            rfail(r, GKV_ENOMEM, "barrier: out of memory");
            return;
        }
        g->wait = nw;
        g->capwait = nc;
    }
    g->bsize = b.group_size;
    p = &g->wait[g->nwait++];
    p->ctl = r->ctl;
    p->req_id = r->h.req_id;
    p->session = r->h.session;
    p->seq = b.seq;
    p->rank = r->rank;
    p->flags = r->h.flags & NET_F_SUM;
    r->ctl = NULL;
    r->parked = 1;
    if (g->nwait == g->bsize) {
        /* everyone is here: take the parked requests out, answer them
         * after unlocking */
        rel = g->wait;
        nrel = g->nwait;
        g->wait = NULL;
        g->nwait = g->capwait = 0;
        for (size_t i = 0; i < nrel; i++)
            if ((ss = sess_find(s, rel[i].session)) != NULL) {
                ss->bar_any = 1;
                ss->bar_seq = rel[i].seq;
            }
    }
    pthread_mutex_unlock(&s->mu);
    for (size_t i = 0; i < nrel; i++) {
        net_hdr h = {0};
        net_wr w = {0};
        net_barrier rb = {b.group_size, b.seq};
        void *m = nn_allocmsg(NET_HDR_LEN + 12, 0);

        h.type = NET_BARRIER;
        h.flags = rel[i].flags;
        h.req_id = rel[i].req_id;
        h.session = rel[i].session;
        if (m == NULL) {
            nn_freemsg(rel[i].ctl);
            continue;
        }
        w.p = (unsigned char *)m + NET_HDR_LEN;
        w.cap = 12;
        net__enc_barrier(&w, &rb);
        send_reply(s, rel[i].ctl, &h, GKV_OK, 0, m, w.off);
    }
    gkv__free(rel);
}

/* Parked barrier requests get an error when the server stops. */
static void
fail_parked(gkv_server *s)
{
    pthread_mutex_lock(&s->mu);
    for (size_t k = 0; k < s->sess.ngrp; k++) {
        struct group *g = &s->sess.grp[k];
        for (size_t i = 0; i < g->nwait; i++) {
            net_hdr h = {0};
            h.type = NET_BARRIER;
            h.flags = g->wait[i].flags;
            h.req_id = g->wait[i].req_id;
            h.session = g->wait[i].session;
            send_error(s, g->wait[i].ctl, &h, GKV_EINTR, NET_F_STOPPING,
                       "barrier abandoned: the server is stopping");
        }
        g->nwait = 0;
    }
    pthread_mutex_unlock(&s->mu);
}

struct stats_arg {
    const char *key[32];
    uint64_t val[32];
    size_t n;
};

static void
enc_stats(net_wr *w, const void *a)
{
    const struct stats_arg *sa = a;

    net__wr_u32(w, (uint32_t)sa->n);
    for (size_t i = 0; i < sa->n; i++) {
        net__wr_str(w, sa->key[i]);
        net__wr_u64(w, sa->val[i]);
    }
}

static void
stat_add(struct stats_arg *sa, const char *k, uint64_t v)
{
    if (sa->n < 32) {
        sa->key[sa->n] = k;
        sa->val[sa->n++] = v;
    }
}

static void
op_stats(gkv_server *s, struct req *r)
{
    struct stats_arg sa = {0};
    gkv_store_stat st;
    net_rd rd;
    uint64_t nsess, ngrp, joined;

    net__rd_init(&rd, r->pl, r->plen);
    if (net__dec_empty(&rd) != 0) {
        rfail(r, GKV_EPROTO, "stats: %s", rd.why);
        return;
    }
    memset(&st, 0, sizeof st);
    gkv_store_stat_get(s->store, &st);
    pthread_mutex_lock(&s->mu);
    nsess = s->sess.n;
    ngrp = s->sess.ngrp;
    joined = s->sess.joined;
    pthread_mutex_unlock(&s->mu);
#define LD(x) atomic_load_explicit(&s->x, memory_order_relaxed)
    stat_add(&sa, "uptime_ms", mono_ms() - s->stats.start_ms);
    stat_add(&sa, "requests", LD(stats.requests));
    stat_add(&sa, "errors", LD(stats.errors));
    stat_add(&sa, "rejected", LD(stats.rejected));
    stat_add(&sa, "bytes_in", LD(stats.bytes_in));
    stat_add(&sa, "bytes_out", LD(stats.bytes_out));
    stat_add(&sa, "pulls", LD(stats.pulls));
    stat_add(&sa, "pull_rows", LD(stats.pull_rows));
    stat_add(&sa, "pushes", LD(stats.pushes));
    stat_add(&sa, "push_rows", LD(stats.push_rows));
    stat_add(&sa, "samples", LD(stats.samples));
    stat_add(&sa, "sample_edges", LD(stats.sample_edges));
#undef LD
    stat_add(&sa, "sessions", nsess);
    stat_add(&sa, "groups", ngrp);
    stat_add(&sa, "joined", joined);
    stat_add(&sa, "tensors", st.ntensors);
    stat_add(&sa, "store_used_bytes", st.used_bytes);
    stat_add(&sa, "store_map_size", st.map_size);
    stat_add(&sa, "store_free_bytes", st.free_bytes);
    build(r, enc_stats, &sa);
}

static void
op_shutdown(gkv_server *s, struct req *r)
{
    net_rd rd;
    uint8_t force, stopping;

    net__rd_init(&rd, r->pl, r->plen);
    if (net__dec_u8(&rd, &force, "shutdown.force") != 0) {
        rfail(r, GKV_EPROTO, "shutdown: %s", rd.why);
        return;
    }
    stopping = force || !(s->conf.flags & GKV_SERVER_KEEP_ALIVE);
    pthread_mutex_lock(&s->mu);
    if (stopping)
        request_stop(s, "shutdown requested by group '%s' rank %u%s",
                     r->group, r->rank, force ? " (forced)" : "");
    pthread_mutex_unlock(&s->mu);
    if (!stopping)
        slog(s, "shutdown request of group '%s' rank %u ignored: this server "
             "keeps alive (a forced shutdown stops it)", r->group, r->rank);
    else
        r->rflags |= NET_F_STOPPING;
    build(r, enc_u8, &stopping);
}

static void
op_leave(gkv_server *s, struct req *r)
{
    net_rd rd;
    uint8_t stopping = 0;

    net__rd_init(&rd, r->pl, r->plen);
    if (net__dec_empty(&rd) != 0) {
        rfail(r, GKV_EPROTO, "leave: %s", rd.why);
        return;
    }
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < s->sess.n; i++)
        if (s->sess.tab[i].id == r->h.session) {
            sess_remove(s, i, "leave", 1);
            break;
        }
    stopping = (uint8_t)atomic_load(&s->run.stop);
    pthread_mutex_unlock(&s->mu);
    if (stopping)
        r->rflags |= NET_F_STOPPING;
    build(r, enc_u8, &stopping);
}

static void
op_heartbeat(gkv_server *s, struct req *r)
{
    net_rd rd;
    uint32_t lease = s->conf.lease_ms;

    net__rd_init(&rd, r->pl, r->plen);
    if (net__dec_empty(&rd) != 0) {
        rfail(r, GKV_EPROTO, "heartbeat: %s", rd.why);
        return;
    }
    build(r, enc_u32, &lease);
}

/* ---- graph requests (a server that serves a partition) -------------------- */

static int
need_part(gkv_server *s, struct req *r)
{
    if (s->graph.part != NULL)
        return 1;
    rfail(r, GKV_ENOTSUP, "%s: this server serves a store, not a graph "
          "partition (start it with --part-config)", net__type_name(r->h.type));
    return 0;
}

static void enc_book(net_wr *w, const void *a) { net__enc_book(w, a); }

static void
op_pbook(gkv_server *s, struct req *r)
{
    net_book b;
    net_rd rd;

    if (!need_part(s, r))
        return;
    net__rd_init(&rd, r->pl, r->plen);
    if (net__dec_empty(&rd) != 0) {
        rfail(r, GKV_EPROTO, "pbook: %s", rd.why);
        return;
    }
    b.part_id = (uint32_t)gkv_part_id(s->graph.part);
    b.len = s->graph.json_len;
    b.json = s->graph.json;
    build(r, enc_book, &b);
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
cols_fit(gkv_server *s, struct req *r, unsigned k, size_t n)
{
    if (n > (s->io.max_msg - 64) / (8 * k)) {
        rfail(r, GKV_EINVAL, "%s: the reply would hold %zu x %u values, more "
              "than this server's %llu-byte message limit; ask for fewer",
              net__type_name(r->h.type), n, k,
              (unsigned long long)s->io.max_msg);
        return 0;
    }
    return 1;
}

/* Replies with k columns of n int64, unless that is more than a message
 * may carry. */
static void
reply_cols(gkv_server *s, struct req *r, unsigned k,
           const int64_t *const *cols, size_t n)
{
    struct cols_arg ca = {k, cols, n};

    if (cols_fit(s, r, k, n))
        build(r, enc_cols, &ca);
}

/* find_edges, in_degrees, out_degrees, in_subgraph: an edge type and IDs. */
static void
op_ids(gkv_server *s, struct req *r)
{
    const char *what = net__type_name(r->h.type);
    int64_t *o[3] = {NULL, NULL, NULL}, *deg = NULL;
    const int64_t *ids;
    uint64_t *tmp = NULL;
    net_ids_req q;
    net_rd rd;
    size_t n, m = 0;
    int net_;
    gkv_err rc = GKV_OK;

    if (!need_part(s, r))
        return;
    net__rd_init(&rd, r->pl, r->plen);
    if (net__dec_ids_req(&rd, &q) != 0) {
        rfail(r, GKV_EPROTO, "%s: %s", what, rd.why);
        return;
    }
    net_ = gkv_pbook_num_etypes(s->graph.book);
    if (q.etype >= (uint32_t)net_) {
        rfail(r, GKV_EINVAL, "%s: edge type %u: the graph has %d", what,
              q.etype, net_);
        return;
    }
    n = (size_t)q.n;
    if ((ids = (const int64_t *)ids_aligned(q.ids, n, &tmp)) == NULL) {
        rfail(r, GKV_ENOMEM, "%s: out of memory", what);
        return;
    }
    switch (r->h.type) {
    case NET_FIND_EDGES:
        if ((o[0] = gkv__malloc(n * 8 + 8)) == NULL ||
            (o[1] = gkv__malloc(n * 8 + 8)) == NULL) {
            rc = GKV_ENOMEM;
            break;
        }
        rc = gkv_part_find_edges(s->graph.part, (int)q.etype, ids, n, o[0], o[1]);
        m = n;
        break;
    case NET_IN_DEGREES:
    case NET_OUT_DEGREES:
        if ((o[0] = gkv__malloc(n * 8 + 8)) == NULL) {
            rc = GKV_ENOMEM;
            break;
        }
        rc = r->h.type == NET_IN_DEGREES ?
            gkv_part_in_degrees(s->graph.part, (int)q.etype, ids, n, o[0]) :
            gkv_part_out_degrees(s->graph.part, (int)q.etype, ids, n, o[0]);
        m = n;
        break;
    default:   /* NET_IN_SUBGRAPH */
        /* the reply is the nodes' in-degrees summed (a node may repeat):
         * refuse one over the limit before the edges are gathered */
        if ((deg = gkv__malloc(n * 8 + 8)) == NULL) {
            rc = GKV_ENOMEM;
            break;
        }
        if ((rc = gkv_part_in_degrees(s->graph.part, (int)q.etype, ids, n,
                                      deg)) != GKV_OK)
            break;
        for (size_t i = 0; i < n && m <= SIZE_MAX / 2; i++)
            m += (size_t)deg[i];
        if (!cols_fit(s, r, 3, m))
            goto out;
        m = 0;
        rc = gkv_part_in_subgraph(s->graph.part, (int)q.etype, ids, n, &o[0],
                                  &o[1], &o[2], &m);
        break;
    }
    if (rc == GKV_ENOMEM && gkv_part_errmsg(s->graph.part)[0] == '\0')
        rfail(r, rc, "%s: out of memory for %zu IDs", what, n);
    else if (rc != GKV_OK)
        rfail(r, rc, "%s on partition %d: %s", what, gkv_part_id(s->graph.part),
              gkv_part_errmsg(s->graph.part));
    else
        reply_cols(s, r, r->h.type == NET_FIND_EDGES ? 2 :
                   r->h.type == NET_IN_SUBGRAPH ? 3 : 1,
                   (const int64_t *const *)o, m);
out:
    if (r->h.type == NET_IN_SUBGRAPH) {
        for (int i = 0; i < 3; i++)
            gkv_free(o[i]);
    } else {
        for (int i = 0; i < 3; i++)
            gkv__free(o[i]);
    }
    gkv__free(deg);
    gkv__free(tmp);
}

struct sample_arg {
    const net_sample_renc_et *e;
    int net;
};

static void
enc_sample(net_wr *w, const void *a)
{
    const struct sample_arg *sa = a;

    net__enc_sample_rep(w, (uint32_t)sa->net, sa->e);
}

/* The wire form of one edge type of a hop: per-seed counts (the edges
 * come grouped by centre node, in the seeds' order) and which columns
 * need 64 bits. -1 when the edges do not follow the seeds. */
static int
sample_pack(const gkv_sample_edges *x, int dir, const int64_t *seeds,
            size_t ns, const int64_t *c64, int wide, uint32_t *cnt,
            net_sample_renc_et *o)
{
    const int64_t *ctr = dir == GKV_DIR_IN ? x->dst : x->src;
    const int64_t *nbr = dir == GKV_DIR_IN ? x->src : x->dst;
    uint64_t big = 0;
    size_t e = 0;

    /* the sampler's counts, not runs of equal seeds: a seed sent twice in
     * a row has two runs that touch */
    for (size_t j = 0; j < ns; j++) {
        if (c64[j] < 0 || (uint64_t)c64[j] > UINT32_MAX ||
            (uint64_t)c64[j] > x->n - e)
            return -1;
        cnt[j] = (uint32_t)c64[j];
        for (size_t t = e; t < e + cnt[j]; t++)
            if (ctr[t] != seeds[j])
                return -1;
        e += cnt[j];
    }
    if (e != x->n)
        return -1;
    o->n = x->n;
    o->nc = ns;
    o->cnt = cnt;
    o->nbr = nbr;
    o->eid = x->eid;
    o->wide = wide ? NET_SAMPLE_WIDE_NBR | NET_SAMPLE_WIDE_EID : 0;
    for (size_t i = 0; i < x->n; i++)
        big |= (uint64_t)nbr[i];
    if (big > UINT32_MAX)
        o->wide |= NET_SAMPLE_WIDE_NBR;
    big = 0;
    for (size_t i = 0; i < x->n; i++)
        big |= (uint64_t)x->eid[i];
    if (big > UINT32_MAX)
        o->wide |= NET_SAMPLE_WIDE_EID;
    return 0;
}

/* An upper bound of the edges one hop returns, from the seeds' degrees
 * (*bound stops growing once past 'lim'). A seed may repeat and a fanout
 * with replacement may be far above the degree, so without it a small
 * request could make the sampler allocate without bound. Exact for an
 * unweighted hop without exclusions; weights and exclusions only lower
 * the count. */
static gkv_err
sample_bound(gkv_server *s, const net_sample_req *q, const int *fan,
             const int64_t *const *seeds, const size_t *ns, size_t lim,
             size_t *bound)
{
    int nnt = gkv_pbook_num_ntypes(s->graph.book);
    int net_ = gkv_pbook_num_etypes(s->graph.book);
    size_t nmax = 0, b = 0;
    int64_t *deg;
    gkv_err rc = GKV_OK;

    for (int t = 0; t < nnt; t++)
        nmax = ns[t] > nmax ? ns[t] : nmax;
    if ((deg = gkv__malloc(nmax * sizeof *deg + 8)) == NULL)
        return GKV_ENOMEM;
    for (int e = 0; e < net_ && b <= lim; e++) {
        int k = fan[q->nfan == 1 ? 0 : e], ct;
        gkv_etype_info ei;

        if (k == 0)
            continue;
        gkv_pbook_etype_info(s->graph.book, e, &ei);
        ct = q->dir == GKV_DIR_IN ? ei.dst_ntype : ei.src_ntype;
        rc = q->dir == GKV_DIR_IN ?
            gkv_part_in_degrees(s->graph.part, e, seeds[ct], ns[ct], deg) :
            gkv_part_out_degrees(s->graph.part, e, seeds[ct], ns[ct], deg);
        if (rc != GKV_OK)
            break;
        for (size_t i = 0; i < ns[ct] && b <= lim; i++) {
            size_t d = (size_t)deg[i];
            b += k < 0 ? d : (q->flags & GKV_SAMPLE_REPLACE) ?
                (d > 0 ? (size_t)k : 0) : (d < (size_t)k ? d : (size_t)k);
        }
    }
    gkv__free(deg);
    *bound = b;
    return rc;
}

/* ---- edge features as sampling weights (SAMPLE, NET_SAMPLE_F_FEAT) ----
 *
 * A request may name, per edge type, an edge feature whose values are the
 * weights (DGL's prob= / mask=): the tensor "edge/<canonical>/<feat>" of
 * the partition's store, rows [elo, ehi) the edges this partition owns. The
 * server keeps one entry per (edge type, feature) asked for: the owned
 * rows as floats (4 bytes an owned edge) and, per chunk of the tensor that
 * holds owned rows, its stamp (gkv_tensor_changed: a mark of the snapshot
 * it was read at). An entry is current for every snapshot up to the
 * mark's version. A request whose snapshot is newer (something was
 * committed since, anywhere in the store, by any process) reads the
 * tensor's record and asks kv which of those chunks changed (one lookup a
 * chunk, no rows), and converts again only those, or everything when the tensor
 * was replaced (its id differs) or its range, dtype or chunking did: a push
 * to the feature is seen by the next sample. Requests hold an entry's lock
 * shared while they sample; a refresh holds it exclusive. Entries are
 * taken in edge-type order and a request's snapshot is begun before any,
 * so no lock waits on a map resize that waits on it. A feature the server
 * keeps in write-back mode (--writeback) is read from its RAM copy on every
 * request, uncached (the store lags its pushes). */
struct pw {
    struct pw *pw_next;              /* pw.list list (under pw.mu) */
    unsigned pw_refs;                /* requests using it (under pw.mu) */
    int pw_etype;
    char pw_name[GKV_NAME_MAX + 1];  /* "edge/<canonical>/<feat>" */
    int pw_private;                  /* write-back: this request's only */
    pthread_rwlock_t pw_lock;        /* guards what follows */
    int pw_ok;                       /* filled and consistent */
    gkv_tensor_desc pw_d;            /* the tensor it was read from */
    int64_t pw_lo, pw_n;             /* owned edges [lo, lo + n) */
    float *pw_w;                     /* [n] the weights */
    uint64_t pw_c0, pw_nc;           /* chunks c0 .. c0 + nc hold them */
    uint64_t *pw_mark;               /* [1 + nc] gkv_tensor_changed's mark:
                                      * current up to version pw_mark[0] */
    uint8_t *pw_chg;                 /* [nc] a refresh's: chunk changed */
    int64_t *pw_bad;                 /* [nc] first edge in the chunk whose
                                      * weight is negative, NaN or
                                      * infinite; -1 if none */
    int64_t pw_first_bad;            /* the least of them, or -1 */
};

static void
pw_drop(struct pw *p)
{
    gkv__free(p->pw_w);
    gkv__free(p->pw_mark);
    gkv__free(p->pw_chg);
    gkv__free(p->pw_bad);
    p->pw_w = NULL;
    p->pw_mark = NULL;
    p->pw_chg = NULL;
    p->pw_bad = NULL;
    p->pw_ok = 0;
}

static void
pw_free(struct pw *p)
{
    if (p == NULL)
        return;
    pw_drop(p);
    pthread_rwlock_destroy(&p->pw_lock);
    gkv__free(p);
}

static struct pw *
pw_new(int etype, const char *name)
{
    struct pw *p = gkv__calloc(1, sizeof *p);

    if (p == NULL)
        return NULL;
    if (pthread_rwlock_init(&p->pw_lock, NULL) != 0) {
        gkv__free(p);
        return NULL;
    }
    p->pw_etype = etype;
    snprintf(p->pw_name, sizeof p->pw_name, "%s", name);
    return p;
}

/* Brings p up to the snapshot tx for the owned edges [lo, hi), reading
 * through tx (NULL: the write-back RAM copy, every chunk). Caller holds
 * p's lock exclusive. On error p is emptied and the request's message
 * set. */
static gkv_err
pw_refresh(gkv_server *s, struct req *r, struct pw *p, gkv_txn *tx,
           int64_t lo, int64_t hi)
{
    int part = gkv_part_id(s->graph.part);
    gkv_tensor_desc d;
    unsigned char *tmp = NULL;
    uint64_t c1;
    int full;
    gkv_err rc;

    rc = gkv_tensor_info(s->store, tx, p->pw_name, &d);
    if (rc == GKV_ENOTFOUND) {
        rfail(r, rc, "sample: edge feature of edge type '%s': no tensor '%s' "
              "in partition %d's store (server %s)",
              gkv_pbook_etype_name(s->graph.book, p->pw_etype), p->pw_name,
              part, s->log.tag);
        goto fail;
    }
    if (rc != GKV_OK) {
        rfail(r, rc, "sample: edge feature '%s' on partition %d: %s",
              p->pw_name, part, gkv_store_errmsg(s->store));
        goto fail;
    }
    if (d.row_elems != 1) {
        rc = rfail(r, GKV_EINVAL, "sample: edge feature '%s' on partition "
                   "%d has rows of %llu elements; a sampling weight needs "
                   "one per edge (row shape () or (1))", p->pw_name, part,
                   (unsigned long long)d.row_elems);
        goto fail;
    }
    if (d.lo > (uint64_t)lo || d.hi < (uint64_t)hi) {
        rc = rfail(r, GKV_EINVAL, "sample: edge feature '%s' on partition "
                   "%d holds edges [%llu, %llu), and the partition owns "
                   "[%lld, %lld) of its edge type", p->pw_name, part,
                   (unsigned long long)d.lo, (unsigned long long)d.hi,
                   (long long)lo, (long long)hi);
        goto fail;
    }
    if (gkv_dtype_size(d.dtype) == 0 || d.chunk_rows == 0) {
        rc = rfail(r, GKV_ECORRUPT, "sample: edge feature '%s' on partition "
                   "%d: dtype %d, %u rows a chunk", p->pw_name, part,
                   (int)d.dtype, d.chunk_rows);
        goto fail;
    }
    full = tx == NULL || !p->pw_ok || d.id != p->pw_d.id ||
           d.dtype != p->pw_d.dtype || d.lo != p->pw_d.lo ||
           d.hi != p->pw_d.hi || d.chunk_rows != p->pw_d.chunk_rows ||
           lo != p->pw_lo || hi - lo != p->pw_n;
    if (full) {
        size_t n = (size_t)(hi - lo);
        pw_drop(p);
        p->pw_lo = lo;
        p->pw_n = hi - lo;
        p->pw_c0 = ((uint64_t)lo - d.lo) / d.chunk_rows;
        c1 = ((uint64_t)hi - 1 - d.lo) / d.chunk_rows + 1;
        p->pw_nc = c1 - p->pw_c0;
        if ((p->pw_w = gkv__malloc(n * sizeof *p->pw_w)) == NULL ||
            (p->pw_mark = gkv__calloc(p->pw_nc + 1, sizeof *p->pw_mark)) == NULL ||
            (p->pw_chg = gkv__calloc(p->pw_nc, 1)) == NULL ||
            (p->pw_bad = gkv__calloc(p->pw_nc, sizeof *p->pw_bad)) == NULL) {
            rc = rfail(r, GKV_ENOMEM, "sample: out of memory for the %zu "
                       "weights of edge feature '%s'", n, p->pw_name);
            goto fail;
        }
    }
    p->pw_ok = 0;
    if (d.dtype != GKV_F32 &&
        (tmp = gkv__malloc((size_t)d.chunk_rows * d.row_bytes)) == NULL) {
        rc = rfail(r, GKV_ENOMEM, "sample: out of memory");
        goto fail;
    }
    /* which chunks to convert: those kv says changed (all of them on a
     * full refresh, whose mark is zero), or every one from RAM */
    if (tx == NULL)
        memset(p->pw_chg, 1, (size_t)p->pw_nc);
    else if ((rc = gkv_tensor_changed(tx, p->pw_name, p->pw_c0,
                                      (size_t)p->pw_nc, p->pw_mark,
                                      p->pw_chg, NULL)) != GKV_OK) {
        rfail(r, rc, "sample: edge feature '%s' on partition %d: %s",
              p->pw_name, part, gkv_store_errmsg(s->store));
        goto fail;
    }
    p->pw_first_bad = -1;
    for (uint64_t i = 0; i < p->pw_nc; i++) {
        uint64_t c = p->pw_c0 + i;
        uint64_t a = d.lo + c * d.chunk_rows, b = a + d.chunk_rows;
        float *dst;
        int64_t bad;

        if (!p->pw_chg[i])
            goto next;
        a = a > (uint64_t)lo ? a : (uint64_t)lo;
        b = b > d.hi ? d.hi : b;
        b = b < (uint64_t)hi ? b : (uint64_t)hi;
        dst = p->pw_w + (a - (uint64_t)lo);
        rc = gkv_tensor_read(s->store, tx, p->pw_name, a, b,
                             tmp != NULL ? (void *)tmp : (void *)dst,
                             (size_t)(b - a) * d.row_bytes);
        if (rc != GKV_OK) {
            rfail(r, rc, "sample: edge feature '%s' on partition %d: rows "
                  "[%llu, %llu): %s", p->pw_name, part, (unsigned long long)a,
                  (unsigned long long)b, gkv_store_errmsg(s->store));
            goto fail;
        }
        bad = net__w_convert(tmp != NULL ? (const void *)tmp :
                             (const void *)dst, d.dtype, (size_t)(b - a), dst);
        p->pw_bad[i] = bad < 0 ? -1 : (int64_t)a + bad;
next:
        if (p->pw_bad[i] >= 0 && p->pw_first_bad < 0)
            p->pw_first_bad = p->pw_bad[i];
    }
    gkv__free(tmp);
    p->pw_d = d;
    p->pw_ok = 1;
    return GKV_OK;
fail:
    gkv__free(tmp);
    pw_drop(p);
    return r->status;
}

/* The entry of (etype, name), made if missing, with a reference the
 * caller gives back with pw_unref(); NULL with *rc GKV_ENOTFOUND when it
 * is missing and snapshot tx has no such tensor (only features that exist
 * get entries), or GKV_ENOMEM. Making one also frees the unused entries
 * whose tensor is gone from tx (deleted since): a server that serves job
 * after job keeps the weights of the features that exist, not of every
 * name ever sampled by. */
static struct pw *
pw_find(gkv_server *s, gkv_txn *tx, int etype, const char *name, gkv_err *rc)
{
    struct pw *p, **pp;
    gkv_tensor_desc d;

    *rc = GKV_ENOMEM;
    pthread_mutex_lock(&s->pw.mu);
    for (p = s->pw.list; p != NULL; p = p->pw_next)
        if (p->pw_etype == etype && strcmp(p->pw_name, name) == 0)
            break;
    if (p == NULL &&
        gkv_tensor_info(s->store, tx, name, &d) == GKV_ENOTFOUND) {
        pthread_mutex_unlock(&s->pw.mu);
        *rc = GKV_ENOTFOUND;
        return NULL;
    }
    if (p == NULL) {
        for (pp = &s->pw.list; *pp != NULL;) {
            struct pw *q = *pp;
            if (q->pw_refs == 0 &&
                gkv_tensor_info(s->store, tx, q->pw_name, &d) ==
                GKV_ENOTFOUND) {
                *pp = q->pw_next;
                pw_free(q);
            } else {
                pp = &q->pw_next;
            }
        }
        if ((p = pw_new(etype, name)) != NULL) {
            p->pw_next = s->pw.list;
            s->pw.list = p;
        }
    }
    if (p != NULL) {
        p->pw_refs++;
        *rc = GKV_OK;
    }
    pthread_mutex_unlock(&s->pw.mu);
    return p;
}

static void
pw_unref(gkv_server *s, struct pw *p)
{
    pthread_mutex_lock(&s->pw.mu);
    p->pw_refs--;
    pthread_mutex_unlock(&s->pw.mu);
}

/* Lets go of the entries pw_take() gave (held[e] NULL after). */
static void
pw_release(gkv_server *s, struct pw **held, int net_)
{
    for (int e = 0; held != NULL && e < net_; e++) {
        if (held[e] == NULL)
            continue;
        if (held[e]->pw_private) {
            pw_free(held[e]);
        } else {
            pthread_rwlock_unlock(&held[e]->pw_lock);
            pw_unref(s, held[e]);
        }
        held[e] = NULL;
    }
}

/* For every edge type the request samples with a feature: its weights in
 * ew[e] (ewlen[e] of them, from edge ewlo[e]) and its entry in held[e],
 * its lock held shared until pw_release(). Edge types whose partition
 * range is empty need no tensor (they have nothing to sample). */
static gkv_err
pw_take(gkv_server *s, struct req *r, const net_sample_req *q,
        const int *fan, struct pw **held, const float **ew, int64_t *ewlen,
        int64_t *ewlo)
{
    int net_ = gkv_pbook_num_etypes(s->graph.book), part = gkv_part_id(s->graph.part);
    gkv_txn *tx = NULL;
    uint64_t txid = 0;
    gkv_err rc = GKV_OK;

    /* two passes: write-back features first (their reads begin snapshots
     * of their own), then one snapshot for the cached ones */
    for (int pass = 0; pass < 2 && rc == GKV_OK; pass++) {
        for (int e = 0; e < net_ && rc == GKV_OK; e++) {
            const char *canon = gkv_pbook_etype_name(s->graph.book, e);
            char name[GKV_NAME_MAX + 2];
            int64_t lo, hi;
            struct pw *p;

            if (q->feat[e] == NULL || fan[q->nfan == 1 ? 0 : e] == 0)
                continue;
            if ((size_t)snprintf(name, sizeof name, "edge/%s/%s", canon,
                                 q->feat[e]) > GKV_NAME_MAX) {
                rc = rfail(r, GKV_EINVAL, "sample: edge feature '%s' of edge "
                           "type '%s': 'edge/%s/%s' is longer than a tensor "
                           "name may be (%d bytes)", q->feat[e], canon, canon,
                           q->feat[e], GKV_NAME_MAX);
                break;
            }
            if ((rc = gkv_pbook_edge_range(s->graph.book, e, part, &lo, &hi))
                != GKV_OK) {
                rfail(r, rc, "sample: edge type %d: %s", e,
                      gkv_pbook_errmsg(s->graph.book));
                break;
            }
            if (hi <= lo || wb_match(s, name) != (pass == 0))
                continue;
            if (pass == 0) {
                if ((p = pw_new(e, name)) == NULL) {
                    rc = rfail(r, GKV_ENOMEM, "sample: out of memory");
                    break;
                }
                p->pw_private = 1;
                held[e] = p;
                rc = pw_refresh(s, r, p, NULL, lo, hi);
            } else {
                if (tx == NULL) {
                    if ((rc = gkv_txn_begin(s->store, &tx)) != GKV_OK) {
                        rfail(r, rc, "sample: partition %d's store: %s", part,
                              gkv_store_errmsg(s->store));
                        break;
                    }
                    /* tx's version: a zero mark brought up to tx */
                    if ((rc = gkv_tensor_changed(tx, NULL, 0, 0, &txid,
                                                 NULL, NULL)) != GKV_OK) {
                        rfail(r, rc, "sample: partition %d's store: %s",
                              part, gkv_store_errmsg(s->store));
                        break;
                    }
                }
                if ((p = pw_find(s, tx, e, name, &rc)) == NULL) {
                    if (rc == GKV_ENOTFOUND)
                        rfail(r, rc, "sample: edge feature of edge type "
                              "'%s': no tensor '%s' in partition %d's store "
                              "(server %s)", canon, name, part, s->log.tag);
                    else
                        rfail(r, rc, "sample: out of memory");
                    break;
                }
                for (;;) {
                    pthread_rwlock_rdlock(&p->pw_lock);
                    if (p->pw_ok && p->pw_mark[0] >= txid)
                        break;
                    pthread_rwlock_unlock(&p->pw_lock);
                    pthread_rwlock_wrlock(&p->pw_lock);
                    if (!(p->pw_ok && p->pw_mark[0] >= txid))
                        rc = pw_refresh(s, r, p, tx, lo, hi);
                    pthread_rwlock_unlock(&p->pw_lock);
                    if (rc != GKV_OK)
                        break;
                }
                if (rc != GKV_OK) {
                    pw_unref(s, p);
                    break;
                }
                held[e] = p;
            }
            if (rc != GKV_OK)
                break;
            if (p->pw_first_bad >= 0) {
                rc = rfail(r, GKV_EINVAL, "sample on partition %d: edge "
                           "feature '%s': edge %lld has weight %g; sampling "
                           "weights must be finite and >= 0", part, name,
                           (long long)p->pw_first_bad,
                           (double)p->pw_w[p->pw_first_bad - p->pw_lo]);
                break;
            }
            ew[e] = p->pw_w;
            ewlen[e] = p->pw_n;
            ewlo[e] = p->pw_lo;
        }
    }
    gkv_txn_end(tx);
    if (rc != GKV_OK)
        pw_release(s, held, net_);
    return rc;
}

/* The weights by position of a SAMPLE request (NET_SAMPLE_F_WPOS) as the
 * sampler takes them: per edge type with counts, the offsets of each
 * seed's weights and the weights, aligned. *wpo and the 2 x net buffers
 * in *bufs are the caller's to free, also on error. */
static gkv_err
wpos_take(gkv_server *s, struct req *r, const net_sample_req *q,
          const size_t *ns, graph__wpos **wpo, void ***bufs)
{
    int net_ = gkv_pbook_num_etypes(s->graph.book);
    graph__wpos *wp;
    void **b;

    /* (+ 1: never a request for 0 bytes) */
    *wpo = wp = gkv__calloc((size_t)net_ + 1, sizeof *wp);
    *bufs = b = gkv__calloc(2 * (size_t)net_ + 1, sizeof *b);
    if (wp == NULL || b == NULL)
        return rfail(r, GKV_ENOMEM, "sample: out of memory");
    for (int e = 0; e < net_; e++) {
        gkv_etype_info ei;
        size_t nc = (size_t)q->nwc[e], want;
        int64_t *off;

        if (nc == 0)
            continue;
        gkv_pbook_etype_info(s->graph.book, e, &ei);
        want = ns[q->dir == GKV_DIR_IN ? ei.dst_ntype : ei.src_ntype];
        if (nc != want)
            return rfail(r, GKV_EINVAL, "sample: %zu weight counts for edge "
                         "type '%s', and the request has %zu seeds of its "
                         "type", nc, gkv_pbook_etype_name(s->graph.book, e),
                         want);
        if ((off = gkv__malloc((nc + 1) * sizeof *off)) == NULL)
            return rfail(r, GKV_ENOMEM, "sample: out of memory");
        b[2 * e] = off;
        off[0] = 0;
        for (size_t i = 0; i < nc; i++) {
            uint32_t k;
            memcpy(&k, q->wc[e] + 4 * i, 4);
            off[i + 1] = off[i] + (int64_t)k;
        }
        wp[e].off = off;
        if ((wp[e].w = bytes_aligned(q->w[e], (size_t)q->nw[e] * 4,
                                     &b[2 * e + 1])) == NULL)
            return rfail(r, GKV_ENOMEM, "sample: out of memory");
    }
    return GKV_OK;
}

/* One hop of neighbour sampling on the partition's sgraph, with the
 * worker's own sampler. Every seed must be a node this partition owns. */
static void
op_sample(gkv_server *s, struct req *r)
{
    net_sample_req q;
    net_rd rd;
    gkv_sample_opts o;
    int64_t *c64 = NULL, **cv = NULL;
    struct sample_arg sa;
    gkv_sample_edges *out = NULL;
    net_sample_renc_et *pk = NULL;
    uint32_t *cnt = NULL;
    size_t ncnt = 0, need;
    const int64_t **seeds = NULL, **ex = NULL;
    uint64_t **tmp = NULL;
    size_t *ns = NULL, *nex = NULL, total = 0, ntmp = 0;
    int32_t *own = NULL;
    int *fan = NULL, nnt, net_, part, nfeat = 0;
    struct pw **held = NULL;
    graph__wpos *wp = NULL;
    void **wbuf = NULL;
    const float **ew = NULL;
    int64_t *ewlen = NULL, *ewlo = NULL;
    gkv_sampler *sp;
    gkv_err rc;

    if (!need_part(s, r))
        return;
    net__rd_init(&rd, r->pl, r->plen);
    if (net__dec_sample_req(&rd, &q) != 0) {
        rfail(r, GKV_EPROTO, "sample: %s", rd.why);
        return;
    }
    nnt = gkv_pbook_num_ntypes(s->graph.book);
    net_ = gkv_pbook_num_etypes(s->graph.book);
    part = gkv_part_id(s->graph.part);
    if (q.nnt != (uint32_t)nnt || q.net != (uint32_t)net_) {
        rfail(r, GKV_EINVAL, "sample: the request has %u node types and %u "
              "edge types; the graph has %d and %d", q.nnt, q.net, nnt, net_);
        goto out;
    }
    if (q.dir != GKV_DIR_IN && q.dir != GKV_DIR_OUT) {
        rfail(r, GKV_EINVAL, "sample: direction %u is neither in (0) nor out "
              "(1)", q.dir);
        goto out;
    }
    if (q.flags & ~(GKV_SAMPLE_REPLACE | GKV_SAMPLE_WEIGHTED |
                    NET_SAMPLE_F_FEAT | NET_SAMPLE_F_WPOS)) {
        rfail(r, GKV_EINVAL, "sample: flags 0x%x have unknown bits", q.flags);
        goto out;
    }
    for (int e = 0; q.feat != NULL && e < net_; e++)
        nfeat += q.feat[e] != NULL;
    if (nfeat > 0 && (q.flags & GKV_SAMPLE_WEIGHTED)) {
        rfail(r, GKV_EINVAL, "sample: weights from edge features "
              "(edge_w_feat) and the stored weights (GKV_SAMPLE_WEIGHTED) "
              "are both asked for; choose one source of weights");
        goto out;
    }
    if (nfeat > 0 && q.dir != GKV_DIR_IN) {
        rfail(r, GKV_ENOTSUP, "sample: edge-feature names (edge_w_feat) "
              "come with in-edge sampling (GKV_DIR_IN) only: a node's "
              "out-edges include edges other partitions own, whose feature "
              "rows this partition does not hold, so for out-edges the "
              "client sends the weights");
        goto out;
    }
    if ((q.flags & NET_SAMPLE_F_WPOS) &&
        (q.flags & (NET_SAMPLE_F_FEAT | GKV_SAMPLE_WEIGHTED))) {
        rfail(r, GKV_EINVAL, "sample: weights sent with the seeds and %s "
              "are both asked for; choose one source of weights",
              (q.flags & NET_SAMPLE_F_FEAT) ? "edge-feature names" :
              "the stored weights (GKV_SAMPLE_WEIGHTED)");
        goto out;
    }
    if (q.layer > INT_MAX) {
        rfail(r, GKV_EINVAL, "sample: layer %u", q.layer);
        goto out;
    }
    if (q.nfan != 1 && q.nfan != (uint32_t)net_) {
        rfail(r, GKV_EINVAL, "sample: %u fanouts; give 1 (for every edge "
              "type) or one per edge type (%d)", q.nfan, net_);
        goto out;
    }
    if (q.dir == GKV_DIR_OUT && !gkv_pbook_has_csr(s->graph.book)) {
        rfail(r, GKV_ENOTSUP, "sample: out-edge sampling needs the CSR, and "
              "this graph was partitioned without it (gkv-partition --csr)");
        goto out;
    }
    /* (+ 1: never a request for 0 bytes) */
    if ((fan = gkv__calloc(q.nfan + 1, sizeof *fan)) == NULL ||
        (seeds = gkv__calloc((size_t)nnt + 1, sizeof *seeds)) == NULL ||
        (ns = gkv__calloc((size_t)nnt + 1, sizeof *ns)) == NULL ||
        (tmp = gkv__calloc((size_t)nnt + (size_t)net_ + 1, sizeof *tmp)) == NULL ||
        (out = gkv__calloc((size_t)net_ + 1, sizeof *out)) == NULL ||
        (q.has_ex && ((ex = gkv__calloc((size_t)net_ + 1, sizeof *ex)) == NULL ||
                      (nex = gkv__calloc((size_t)net_ + 1, sizeof *nex)) == NULL))) {
        rfail(r, GKV_ENOMEM, "sample: out of memory");
        goto out;
    }
    ntmp = (size_t)nnt + (size_t)net_;
    for (uint32_t i = 0; i < q.nfan; i++) {
        int32_t v;
        memcpy(&v, q.fanout + 4 * i, 4);
        if (v < -1) {
            rfail(r, GKV_EINVAL, "sample: fanout[%u] = %d: a fanout is -1 "
                  "(all) or >= 0", i, v);
            goto out;
        }
        fan[i] = v;
    }
    for (int t = 0; t < nnt; t++) {
        ns[t] = (size_t)q.nseeds[t];
        total += ns[t];
        if ((seeds[t] = (const int64_t *)ids_aligned(q.seeds[t], ns[t],
                                                    &tmp[t])) == NULL) {
            rfail(r, GKV_ENOMEM, "sample: out of memory");
            goto out;
        }
    }
    /* every seed must be ours: name the owner of one that is not */
    if ((own = gkv__malloc(total * sizeof *own + 4)) == NULL) {
        rfail(r, GKV_ENOMEM, "sample: out of memory");
        goto out;
    }
    for (int t = 0; t < nnt; t++) {
        if (ns[t] == 0)
            continue;
        if ((rc = gkv_pbook_node_owner(s->graph.book, t, seeds[t], ns[t],
                                       own)) != GKV_OK) {
            rfail(r, rc, "sample: seeds of node type '%s': %s",
                  gkv_pbook_ntype_name(s->graph.book, t),
                  gkv_pbook_errmsg(s->graph.book));
            goto out;
        }
        for (size_t i = 0; i < ns[t]; i++)
            if (own[i] != part) {
                rfail(r, GKV_ERANGE, "sample: seed %lld of node type '%s' "
                      "(seeds[%d][%zu]) is owned by partition %d, not by "
                      "partition %d (this server's)", (long long)seeds[t][i],
                      gkv_pbook_ntype_name(s->graph.book, t), t, i, own[i], part);
                goto out;
            }
    }
    for (int e = 0; q.has_ex && e < net_; e++) {
        nex[e] = (size_t)q.nex[e];
        if ((ex[e] = (const int64_t *)ids_aligned(q.ex[e], nex[e],
                                                 &tmp[nnt + e])) == NULL) {
            rfail(r, GKV_ENOMEM, "sample: out of memory");
            goto out;
        }
    }
    /* bound the reply (as below) before the sampler allocates the edges */
    for (int e = 0; e < net_; e++) {
        gkv_etype_info ei;
        gkv_pbook_etype_info(s->graph.book, e, &ei);
        ncnt += ns[q.dir == GKV_DIR_IN ? ei.dst_ntype : ei.src_ntype];
    }
    need = 64 + 48 * (size_t)net_ + 4 * ncnt;
    if (need > s->io.max_msg) {
        r->rflags |= NET_F_SPLIT;
        rfail(r, GKV_EINVAL, "sample: %zu seeds are more than this server's "
              "%llu-byte message limit; send fewer seeds", total,
              (unsigned long long)s->io.max_msg);
        goto out;
    }
    if ((rc = sample_bound(s, &q, fan, seeds, ns, (s->io.max_msg - need) / 16,
                           &total)) != GKV_OK) {
        rfail(r, rc, "sample on partition %d: %s", part, rc == GKV_ENOMEM ?
              "out of memory" : gkv_part_errmsg(s->graph.part));
        goto out;
    }
    if (total > (s->io.max_msg - need) / 16) {
        r->rflags |= NET_F_SPLIT;
        rfail(r, GKV_EINVAL, "sample: the seeds could get more than %zu "
              "edges, more than this server's %llu-byte message limit; send "
              "fewer seeds or smaller fanouts", (s->io.max_msg - need) / 16,
              (unsigned long long)s->io.max_msg);
        goto out;
    }
    memset(&o, 0, sizeof o);
    o.seed = q.seed;
    o.dir = (int)q.dir;
    o.flags = q.flags & ~(NET_SAMPLE_F_FEAT | NET_SAMPLE_F_WPOS);
    o.exclude = ex;
    o.exclude_n = nex;
    if (tl_worker < 0 || (unsigned)tl_worker >= s->io.nthreads) {
        rfail(r, GKV_EINVAL, "sample: not on a worker thread");
        goto out;
    }
    if ((q.flags & NET_SAMPLE_F_WPOS) &&
        wpos_take(s, r, &q, ns, &wp, &wbuf) != GKV_OK)
        goto out;
    if (nfeat > 0) {
        /* (+ 1: never a request for 0 bytes) */
        if ((held = gkv__calloc((size_t)net_ + 1, sizeof *held)) == NULL ||
            (ew = gkv__calloc((size_t)net_ + 1, sizeof *ew)) == NULL ||
            (ewlen = gkv__calloc((size_t)net_ + 1, sizeof *ewlen)) == NULL ||
            (ewlo = gkv__calloc((size_t)net_ + 1, sizeof *ewlo)) == NULL) {
            rfail(r, GKV_ENOMEM, "sample: out of memory");
            goto out;
        }
        if (pw_take(s, r, &q, fan, held, ew, ewlen, ewlo) != GKV_OK)
            goto out;
        o.edge_w = ew;
        o.edge_w_len = ewlen;
        o.edge_w_lo = ewlo;
    }
    /* each seed's count of picks per edge type, from the sampler */
    if ((c64 = gkv__malloc(ncnt * sizeof *c64 + 8)) == NULL ||
        (cv = gkv__calloc((size_t)net_ + 1, sizeof *cv)) == NULL) {
        rfail(r, GKV_ENOMEM, "sample: out of memory");
        goto out;
    }
    for (size_t e = 0, at = 0; e < (size_t)net_; e++) {
        gkv_etype_info ei;
        gkv_pbook_etype_info(s->graph.book, (int)e, &ei);
        cv[e] = c64 + at;
        at += ns[q.dir == GKV_DIR_IN ? ei.dst_ntype : ei.src_ntype];
    }
    sp = s->graph.samp[tl_worker];
    rc = graph__sample_hop(sp, seeds, ns, fan, (int)q.nfan, (int)q.layer, &o,
                           wp, cv, out);
    pw_release(s, held, net_);
    if (rc != GKV_OK) {
        rfail(r, rc, "sample on partition %d: %s", part,
              gkv_sampler_errmsg(sp));
        goto out;
    }
    total = 0;
    for (int e = 0; e < net_; e++)
        total += out[e].n;
    /* at most 16 bytes an edge, 4 a count, 48 an edge type (its fields
     * and padding); 'need' is as computed for the bound above */
    if (need > s->io.max_msg || total > (s->io.max_msg - need) / 16) {
        r->rflags |= NET_F_SPLIT;
        rfail(r, GKV_EINVAL, "sample: %zu edges are more than this server's "
              "%llu-byte message limit; send fewer seeds", total,
              (unsigned long long)s->io.max_msg);
        goto out;
    }
    if ((pk = gkv__calloc((size_t)net_ + 1, sizeof *pk)) == NULL ||
        (cnt = gkv__malloc(ncnt * sizeof *cnt + 4)) == NULL) {
        rfail(r, GKV_ENOMEM, "sample: out of memory");
        goto out;
    }
    for (int e = 0; e < net_; e++) {
        gkv_etype_info ei;
        int ct;
        gkv_pbook_etype_info(s->graph.book, e, &ei);
        ct = q.dir == GKV_DIR_IN ? ei.dst_ntype : ei.src_ntype;
        /* the u32 counts sit where the sampler's do */
        if (sample_pack(&out[e], (int)q.dir, seeds[ct], ns[ct], cv[e],
                        s->conf.wide_ids, cnt + (cv[e] - c64), &pk[e]) != 0) {
            rfail(r, GKV_EINVAL, "sample on partition %d: the edges of edge "
                  "type '%s' do not follow the seeds", part,
                  gkv_pbook_etype_name(s->graph.book, e));
            goto out;
        }
    }
    sa.e = pk;
    sa.net = net_;
    if (build(r, enc_sample, &sa) == GKV_OK) {
        atomic_fetch_add_explicit(&s->stats.samples, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&s->stats.sample_edges, total,
                                  memory_order_relaxed);
    }
out:
    for (size_t i = 0; tmp != NULL && i < ntmp; i++)
        gkv__free(tmp[i]);
    gkv__free(tmp);
    gkv__free(fan);
    gkv__free(seeds);
    gkv__free(ns);
    gkv__free(ex);
    gkv__free(nex);
    gkv__free(out);
    gkv__free(own);
    gkv__free(pk);
    gkv__free(cnt);
    gkv__free(c64);
    gkv__free(cv);
    pw_release(s, held, net_);
    gkv__free(held);
    gkv__free((void *)ew);
    gkv__free(ewlen);
    gkv__free(ewlo);
    for (int e = 0; wbuf != NULL && e < 2 * net_; e++)
        gkv__free(wbuf[e]);
    gkv__free(wbuf);
    gkv__free(wp);
    net__sample_req_free(&q);
}

/* Type 38 is reserved for edge mini-batches served whole; this protocol
 * version answers GKV_ENOTSUP (doc/PROTOCOL.md). A trainer builds them
 * from find_edges and sample_blocks, or in-process with
 * gkv_sample_edge_batch on a partition. */
static void
op_edge_batch(gkv_server *s, struct req *r)
{
    (void)s;
    rfail(r, GKV_ENOTSUP, "edge_batch (type %d) is reserved and not "
          "implemented by this server", NET_EDGE_BATCH);
}

typedef void (*op_fn)(gkv_server *s, struct req *r);

#define NEED_SESSION 0x1u

/* The dispatch table, by message type. Graph requests (NET_SAMPLE, ...)
 * get their rows here when the server serves a partition. */
static const struct op {
    op_fn fn;
    unsigned need;
} ops[NET_TYPE_MAX + 1] = {
    [NET_HELLO] = {op_hello, 0},
    [NET_HANDSHAKE] = {op_handshake, 0},
    [NET_SCHEMA] = {op_schema, NEED_SESSION},
    [NET_PULL] = {op_pull, NEED_SESSION},
    [NET_PUSH] = {op_push, NEED_SESSION},
    [NET_CREATE] = {op_create, NEED_SESSION},
    [NET_DELETE] = {op_delete, NEED_SESSION},
    [NET_BARRIER] = {op_barrier, NEED_SESSION},
    [NET_STATS] = {op_stats, NEED_SESSION},
    [NET_SHUTDOWN] = {op_shutdown, NEED_SESSION},
    [NET_LEAVE] = {op_leave, NEED_SESSION},
    [NET_HEARTBEAT] = {op_heartbeat, NEED_SESSION},
    [NET_OPT_RESET] = {op_opt_reset, NEED_SESSION},
    [NET_PBOOK] = {op_pbook, NEED_SESSION},
    [NET_SAMPLE] = {op_sample, NEED_SESSION},
    [NET_FIND_EDGES] = {op_ids, NEED_SESSION},
    [NET_IN_DEGREES] = {op_ids, NEED_SESSION},
    [NET_OUT_DEGREES] = {op_ids, NEED_SESSION},
    [NET_IN_SUBGRAPH] = {op_ids, NEED_SESSION},
    [NET_EDGE_BATCH] = {op_edge_batch, NEED_SESSION},
};

/* ---- dispatch ------------------------------------------------------------- */

static void
reject(gkv_server *s, const char *what, const void *m, size_t len,
       const char *why)
{
    char hex[64];

    atomic_fetch_add_explicit(&s->stats.rejected, 1, memory_order_relaxed);
    if (!log_allowed(s, LOG_REJECT))
        return;
    hex16(m, len, hex, sizeof hex);
    slog(s, "rejected %s (%zu bytes, first: %s): %s", what, len, hex, why);
}

/* Handles one received message; consumes 'msg' and 'ctl'. */
static void
handle(gkv_server *s, void *msg, size_t len, void *ctl)
{
    struct req r;
    const struct op *op;
    char why[512];
    gkv_err rc;

    memset(&r, 0, sizeof r);
    r.ctl = ctl;
    atomic_fetch_add_explicit(&s->stats.requests, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->stats.bytes_in, len, memory_order_relaxed);
    if ((rc = net__hdr_check(msg, len, &r.h, why, sizeof why)) != GKV_OK) {
        /* answer in the client's terms (type, request id) where its
         * header could be read; no checksum on this reply */
        net_hdr h = r.h;
        if (len < NET_HDR_LEN || h.magic != NET_MAGIC)
            memset(&h, 0, sizeof h);
        h.flags = 0;
        reject(s, "malformed message", msg, len, why);
        send_error(s, ctl, &h, rc, 0, why);
        nn_freemsg(msg);
        return;
    }
    r.pl = (const unsigned char *)msg + NET_HDR_LEN;
    r.plen = (size_t)r.h.len;
    if (r.h.flags & ~NET_F_SUM) {
        reject(s, "message", msg, len, "a reply or reply-only flags sent to "
               "a server");
        r.h.flags &= NET_F_SUM;
        send_error(s, ctl, &r.h, GKV_EPROTO, 0, "a reply or reply-only flags "
                   "sent to a server");
        nn_freemsg(msg);
        return;
    }
    op = r.h.type <= NET_TYPE_MAX ? &ops[r.h.type] : NULL;
    if (op == NULL || op->fn == NULL) {
        const char *nm = net__type_name(r.h.type);
        snprintf(why, sizeof why, nm != NULL ?
                 "request type %u (%s) is not served by this server" :
                 "unknown request type %u%s", r.h.type, nm != NULL ? nm : "");
        reject(s, "request", msg, len, why);
        send_error(s, ctl, &r.h, GKV_EPROTO, 0, why);
        nn_freemsg(msg);
        return;
    }
    if (op->need & NEED_SESSION) {
        struct sess *ss;
        int ok = 0;

        pthread_mutex_lock(&s->mu);
        if (r.h.session != 0 && (ss = sess_find(s, r.h.session)) != NULL) {
            ok = 1;
            ss->last_ms = mono_ms();
            snprintf(r.group, sizeof r.group, "%s", ss->group);
            r.rank = ss->rank;
        }
        const struct gone *gn = NULL;
        for (size_t i = 0; !ok && r.h.session != 0 && i < GONE_MAX; i++)
            if (s->sess.gone[i].id == r.h.session)
                gn = &s->sess.gone[i];
        if (gn != NULL)
            snprintf(why, sizeof why, "%s request with session 0x%016llx of "
                     "group '%s' rank %u: a newer handshake as the same group "
                     "and rank replaced it %llu ms ago (two clients with one "
                     "identity? each client of a group needs its own rank)",
                     net__type_name(r.h.type), (unsigned long long)r.h.session,
                     gn->group, gn->rank,
                     (unsigned long long)(mono_ms() - gn->when_ms));
        pthread_mutex_unlock(&s->mu);
        if (!ok && gn == NULL)
            snprintf(why, sizeof why, "%s request with %s session 0x%016llx: "
                     "hand-shake first (the server restarted, the lease "
                     "expired, or it was never granted)",
                     net__type_name(r.h.type),
                     r.h.session ? "unknown" : "no",
                     (unsigned long long)r.h.session);
        if (!ok) {
            reject(s, "request", msg, len, why);
            send_error(s, ctl, &r.h, GKV_EPERM, NET_F_SESSION, why);
            nn_freemsg(msg);
            return;
        }
    }
    op->fn(s, &r);
    if (r.parked) {
        nn_freemsg(msg);
        return;
    }
    if (r.status != GKV_OK) {
        if (r.status == GKV_EPERM || r.status == GKV_EPROTO)
            reject(s, net__type_name(r.h.type), msg, len, r.err);
        if (r.out != NULL)
            nn_freemsg(r.out);
        send_error(s, r.ctl, &r.h, r.status, r.rflags, r.err);
    } else {
        send_reply(s, r.ctl, &r.h, GKV_OK, r.rflags, r.out, r.out_len);
    }
    nn_freemsg(msg);
}

static void *
worker(void *arg)
{
    gkv_server *s = arg;
    sigset_t all;

    tl_worker = (int)atomic_fetch_add(&s->io.wnext, 1);
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
            slog(s, "receive failed: %s", nn_strerror(e));
            continue;
        }
        handle(s, body, (size_t)n, ctl);
    }
    return NULL;
}

/* ---- open, run, close --------------------------------------------------------- */

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

static int
sockopt(int sock, int opt, int v)
{
    return nn_setsockopt(sock, NN_SOL_SOCKET, opt, &v, sizeof v);
}

/* Opens partition o->part_id of o->part_config (its store writable, shared
 * with the machine's other servers), its sgraph and one sampler per worker
 * thread, and keeps the config's bytes for handshakes. */
static gkv_err
part_open(gkv_server *s, const gkv_server_opts *o, const gkv_ipconfig *cfg)
{
    FILE *fp;
    long len;
    gkv_err rc;

    if ((rc = gkv_part_open(&s->graph.part, o->part_config, o->part_id,
                            GKV_PART_WRITABLE |
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
        char *b = realpath(gkv_pbook_part_path(s->graph.book, o->part_id), NULL);
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
    if ((s->graph.samp = gkv__calloc(s->io.nthreads, sizeof *s->graph.samp)) == NULL)
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

gkv_err
gkv_server_open(gkv_server **out, const gkv_server_opts *o)
{
    gkv_server *s = NULL;
    gkv_ipconfig *cfg = NULL;
    const gkv_machine *m;
    char token[GKV_TOKEN_MAX + 1], *rp = NULL;
    gkv_tensor_desc *d = NULL;
    size_t nt = 0, mi;
    unsigned nserv;
    uint64_t t0;
    gkv_err rc;

    net__clear();
    if (out == NULL || o == NULL)
        return net__fail(GKV_EINVAL, "gkv_server_open: no options");
    *out = NULL;
    if ((o->store == NULL && o->part_config == NULL) || o->ip_config == NULL)
        return net__fail(GKV_EINVAL, "server: a store directory (or a "
                         "partition config) and an ip_config are required");
    if (o->part_config != NULL && o->part_id < 0)
        return net__fail(GKV_EINVAL, "server: partition id %d", o->part_id);
    nserv = o->num_servers ? o->num_servers : 1;
    if (o->server_id >= nserv)
        return net__fail(GKV_EINVAL, "server id %u is not below the number "
                         "of servers %u", o->server_id, nserv);
    if (o->max_msg != 0 && (o->max_msg < 4096 ||
                            o->max_msg > (uint64_t)INT_MAX - NET_HDR_LEN - 64))
        return net__fail(GKV_EINVAL, "max message size %llu: must be in "
                         "4096..%d", (unsigned long long)o->max_msg,
                         INT_MAX - NET_HDR_LEN - 64);
    if (o->server_name != NULL && strlen(o->server_name) > NET_HOST_MAX)
        return net__fail(GKV_EINVAL, "server name longer than %u bytes",
                         NET_HOST_MAX);
    if (sodium_init() < 0)
        return net__fail(GKV_EIO, "libsodium failed to initialise");
    if ((rc = gkv_ipconfig_load(&cfg, o->ip_config)) != GKV_OK)
        return rc;
    if ((rc = gkv_ipconfig_check(cfg, nserv)) != GKV_OK)
        goto fail;
    if (o->part_config != NULL && o->machine >= 0 && o->machine != o->part_id) {
        rc = net__fail(GKV_EINVAL, "machine %d cannot serve partition %d: "
                       "machine m of the ip_config serves partition m",
                       o->machine, o->part_id);
        goto fail;
    }
    if (o->part_config != NULL && o->machine < 0) {
        if ((size_t)o->part_id >= gkv_ipconfig_count(cfg)) {
            rc = net__fail(GKV_EINVAL, "partition %d: %s lists %zu machines "
                           "(machine m serves partition m)", o->part_id,
                           o->ip_config, gkv_ipconfig_count(cfg));
            goto fail;
        }
        mi = (size_t)o->part_id;
    } else if (o->machine >= 0) {
        if ((size_t)o->machine >= gkv_ipconfig_count(cfg)) {
            rc = net__fail(GKV_EINVAL, "machine %d: %s lists %zu machines",
                           o->machine, o->ip_config, gkv_ipconfig_count(cfg));
            goto fail;
        }
        mi = (size_t)o->machine;
    } else if ((rc = gkv_ipconfig_find_local(cfg, &mi)) != GKV_OK) {
        char why[256];
        /* the message is formatted into the buffer it quotes: copy it */
        snprintf(why, sizeof why, "%s", gkv_net_errmsg());
        if (rc == GKV_ENOTFOUND)
            rc = GKV_EINVAL;
        net__fail(rc, "%s: %s; name this machine's line with --machine N "
                  "(from 0)", o->ip_config, strncmp(why, "ip_config: ", 11) == 0 ?
                  why + 11 : why);
        goto fail;
    }
    m = gkv_ipconfig_machine(cfg, mi);
    if ((s = gkv__calloc(1, sizeof *s)) == NULL) {
        rc = net__fail(GKV_ENOMEM, "server: out of memory");
        goto fail;
    }
    s->io.sock = -1;
    s->log.fp = o->log != NULL ? o->log : stderr;
    s->conf.flags = o->flags;
    s->conf.lease_ms = o->lease_ms ? o->lease_ms : 30000;
    s->io.max_msg = o->max_msg ? o->max_msg : GKV_NET_MAX_MSG;
    s->io.nthreads = o->threads ? o->threads : 2;
    s->conf.num_clients = o->num_clients;
    {
        const char *w = getenv("GKV_SERVER_WIDE_IDS");
        s->conf.wide_ids = w != NULL && strcmp(w, "1") == 0;
        /* tests shorten the nonce TTL to see expiry */
        w = getenv("GKV_SERVER_NONCE_TTL_MS");
        s->auth.nonce_ttl_ms = w != NULL && atoi(w) > 0 ? (uint64_t)atoi(w) :
                             NONCE_TTL_MS;
        /* tests play a server older than some handshake flags */
        w = getenv("GKV_SERVER_REFUSE_HS_FLAGS");
        s->conf.refuse_hs = w != NULL ? (uint32_t)strtoul(w, NULL, 0) : 0;
    }
    crypto_auth_hmacsha512256_keygen(s->auth.nkey);
    s->stats.start_ms = mono_ms();
    snprintf(s->log.tag, sizeof s->log.tag, "m%zu/s%u", mi, o->server_id);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->sess.done_cv, NULL);
    pthread_mutex_init(&s->pw.mu, NULL);
    if (o->token_file != NULL) {
        if ((rc = gkv_token_load(o->token_file, token, sizeof token)) != GKV_OK)
            goto fail;
        net__token_key(token, strlen(token), s->auth.key);
        sodium_memzero(token, sizeof token);
        s->auth.on = 1;
    }
    if (o->part_config != NULL) {
        if ((rc = part_open(s, o, cfg)) != GKV_OK)
            goto fail;
    } else if ((rc = gkv_store_open(&s->store, o->store,
                             ((o->flags & GKV_SERVER_CREATE) ? GKV_CREATE : 0) |
                             ((o->flags & GKV_SERVER_NOSYNC) ? GKV_NOSYNC : 0),
                             NULL)) != GKV_OK) {
        net__fail(rc, "%s", gkv_store_errmsg(NULL)[0] ?
                  gkv_store_errmsg(NULL) : gkv_strerror(rc));
        goto fail;
    }
    if ((rp = realpath(s->graph.part != NULL ?
                       gkv_pbook_part_path(s->graph.book, o->part_id) :
                       o->store, NULL)) == NULL ||
        (s->store_path = gkv__strdup(rp)) == NULL) {
        rc = net__fail(GKV_ENOMEM, "store %s: cannot resolve its path",
                       s->graph.part != NULL ?
                       gkv_pbook_part_path(s->graph.book, o->part_id) : o->store);
        free(rp);
        goto fail;
    }
    free(rp);
    t0 = mono_ms();
    if (!(o->flags & GKV_SERVER_NO_PREFAULT) &&
        (rc = gkv_store_prefault(s->store)) != GKV_OK) {
        net__fail(rc, "store %s: prefault: %s", o->store,
                  gkv_store_errmsg(s->store));
        goto fail;
    }
    t0 = mono_ms() - t0;
    if ((rc = wb_open(s, o, nserv)) != GKV_OK)
        goto fail;
    if ((rc = bind_url(s, m, m->port + o->server_id,
                       (o->flags & GKV_SERVER_BIND_ANY) != 0)) != GKV_OK)
        goto fail;
    if ((s->io.sock = nn_socket(AF_SP_RAW, NN_REP)) < 0) {
        rc = net__fail(net__from_nn(nn_errno()), "nn_socket: %s",
                       nn_strerror(nn_errno()));
        goto fail;
    }
    if (sockopt(s->io.sock, NN_RCVMAXSIZE,
                (int)(s->io.max_msg + NET_HDR_LEN + 64)) < 0 ||
        sockopt(s->io.sock, NN_SNDBUF, SOCK_BUF) < 0 ||
        sockopt(s->io.sock, NN_RCVBUF, SOCK_BUF) < 0 ||
        sockopt(s->io.sock, NN_RCVTIMEO, RECV_TICK_MS) < 0 ||
        (strchr(s->io.url, '[') != NULL && sockopt(s->io.sock, NN_IPV4ONLY, 0) < 0)) {
        rc = net__fail(GKV_EIO, "socket options: %s", nn_strerror(nn_errno()));
        goto fail;
    }
    if (nn_bind(s->io.sock, s->io.url) < 0) {
        int e = nn_errno();
        rc = net__fail(net__from_nn(e), "cannot listen on %s: %s%s", s->io.url,
                       nn_strerror(e), e == EADDRINUSE ?
                       " (another server runs there?)" : "");
        goto fail;
    }
    gkv_tensor_list(s->store, NULL, 0, &d, &nt);
    gkv_free(d);
    s->conf.id.proto = NET_VERSION;
    s->conf.id.server_id = o->server_id;
    s->conf.id.num_servers = nserv;
    s->conf.id.machine = (uint32_t)mi;
    s->conf.id.pid = (uint32_t)getpid();
    s->conf.id.lease_ms = s->conf.lease_ms;
    s->conf.id.flags = ((o->flags & GKV_SERVER_KEEP_ALIVE) ? NET_ID_KEEP_ALIVE : 0) |
                     (s->auth.on ? NET_ID_AUTH : 0) |
                     (s->graph.part != NULL ? NET_ID_GRAPH : 0) |
                     (s->wb.npat ? NET_ID_WRITEBACK : 0);
    s->conf.id.max_msg = s->io.max_msg;
    s->conf.id.start_ms = wall_ms();
    if (gethostname(s->conf.id.host, sizeof s->conf.id.host - 1) != 0)
        snprintf(s->conf.id.host, sizeof s->conf.id.host, "unknown");
    snprintf(s->conf.id.name, sizeof s->conf.id.name, "%s",
             o->server_name ? o->server_name : "");
    snprintf(s->conf.id.store, sizeof s->conf.id.store, "%s", s->store_path);
    snprintf(s->conf.id.version, sizeof s->conf.id.version, "%s",
             GKV_VERSION_STRING);
    slog(s, "start: gkv %s, store %s (%zu tensors, map pre-faulted in %llu "
         "ms), machine %zu (%s line %u) server %u of %u%s%s%s, auth %s, "
         "keep-alive %s, lease %u ms, %u threads, max message %llu bytes",
         GKV_VERSION_STRING, s->store_path, nt,
         (unsigned long long)t0, mi, o->ip_config, m->line, o->server_id,
         nserv, s->conf.id.name[0] ? ", name '" : "", s->conf.id.name,
         s->conf.id.name[0] ? "'" : "", s->auth.on ? "on" : "off",
         (o->flags & GKV_SERVER_KEEP_ALIVE) ? "on" : "off", s->conf.lease_ms,
         s->io.nthreads, (unsigned long long)s->io.max_msg);
    if (s->conf.num_clients > 0 && !(o->flags & GKV_SERVER_KEEP_ALIVE))
        slog(s, "stops when the last client leaves once %u clients have "
             "joined", s->conf.num_clients);
    if (s->graph.part != NULL)
        slog(s, "serving partition %d of %d of graph '%s' (%s, %d node "
             "types, %d edge types%s)", o->part_id,
             gkv_pbook_num_parts(s->graph.book), gkv_pbook_graph_name(s->graph.book),
             o->part_config, gkv_pbook_num_ntypes(s->graph.book),
             gkv_pbook_num_etypes(s->graph.book),
             gkv_pbook_has_csr(s->graph.book) ? ", CSR" : "");
    slog(s, "listening on %s", s->io.url);
    gkv_ipconfig_free(cfg);
    *out = s;
    return GKV_OK;
fail:
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
            request_stop(s, "cannot start worker thread %u", started);
            pthread_mutex_unlock(&s->mu);
            rc = net__fail(GKV_EIO, "cannot start worker threads");
            break;
        }
    while (!atomic_load(&s->run.stop)) {
        struct timespec ts = {0, TICK_MS * 1000000L};
        uint64_t now;

        nanosleep(&ts, NULL);
        if (s->run.sig) {
            pthread_mutex_lock(&s->mu);
            request_stop(s, "stop requested (signal)");
            pthread_mutex_unlock(&s->mu);
            break;
        }
        /* read the clock under the lock: a worker stamps last_ms under it,
         * so no session's stamp is later than now (now - last_ms would
         * wrap and expire a session heard from a moment ago) */
        pthread_mutex_lock(&s->mu);
        now = mono_ms();
        for (size_t i = 0; i < s->sess.n;) {
            if (now - s->sess.tab[i].last_ms > s->conf.lease_ms) {
                char how[96];
                snprintf(how, sizeof how, "lease expired (nothing heard for "
                         "%llu ms; killed?)",
                         (unsigned long long)(now - s->sess.tab[i].last_ms));
                sess_remove(s, i, how, 1);
            } else {
                i++;
            }
        }
        pthread_mutex_unlock(&s->mu);
        log_flush_dropped(s, 0);
    }
    slog(s, "stopping: %s; finishing requests in flight", s->run.why);
    atomic_store(&s->run.halt, 1);
    for (unsigned i = 0; i < started; i++)
        pthread_join(s->io.thr[i], NULL);
    fail_parked(s);
    {
        /* replies already handed to nanomsg need a moment on the wire */
        struct timespec ts = {0, FLUSH_MS * 1000000L};
        nanosleep(&ts, NULL);
    }
    nn_close(s->io.sock);
    s->io.sock = -1;
    log_flush_dropped(s, 1);
    if (wb_last_flush(s) != GKV_OK && rc == GKV_OK)
        rc = GKV_EIO;
    if (gkv_store_sync(s->store) != GKV_OK) {
        slog(s, "store sync failed: %s", gkv_store_errmsg(s->store));
        if (rc == GKV_OK)
            rc = net__fail(GKV_EIO, "store sync: %s",
                           gkv_store_errmsg(s->store));
    }
    slog(s, "stopped: store synced, %llu requests served",
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
    for (size_t k = 0; k < s->sess.ngrp; k++) {
        for (size_t i = 0; i < s->sess.grp[k].nwait; i++)
            nn_freemsg(s->sess.grp[k].wait[i].ctl);
        gkv__free(s->sess.grp[k].wait);
    }
    gkv__free(s->sess.grp);
    for (size_t i = 0; i < s->sess.n; i++)
        gkv__free(s->sess.tab[i].done);
    gkv__free(s->sess.tab);
    gkv__free(s->io.thr);
    gkv__free(s->auth.spent.e);
    gkv__free(s->sess.seen.e);
    sodium_memzero(s->auth.nkey, sizeof s->auth.nkey);
    for (unsigned i = 0; s->graph.samp != NULL && i < s->io.nthreads; i++)
        gkv_sampler_free(s->graph.samp[i]);
    gkv__free(s->graph.samp);
    while (s->pw.list != NULL) {
        struct pw *p = s->pw.list;
        s->pw.list = p->pw_next;
        pw_free(p);
    }
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
