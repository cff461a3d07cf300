/* gate.c - gkv-server's connection gate (gate.h; doc/DESIGN.md, net/,
 * "Bounded, whoever the peer is").
 *
 * nanomsg 1.1.5 reads each message whole, up to NN_RCVMAXSIZE, before
 * nn_recvmsg hands it to the server, and never says which peer sent it.
 * So this program defines accept, accept4, recvmsg, close and socket: the
 * executable's definitions interpose libc's for libnanomsg (they call the
 * real ones through dlsym(RTLD_NEXT)). They live in the program, never in
 * libgkv, which would interpose them in every program that embeds it.
 *
 *   accept, accept4  record each accepted TCP connection by descriptor:
 *                    its peer address, "not yet authenticated". Such
 *                    connections are capped per address, per IPv6 /64
 *                    (NET_MUL times as many) and in all; past a cap the
 *                    oldest one of that address (that /64; in all: of the
 *                    network holding the most) older than FLOOR_MS is
 *                    shut down, else the new one is closed at once.
 *                    Logged, rationed.
 *   recvmsg          follows each gated connection's SP-over-TCP stream:
 *                    the 8-byte SP header, then frames (8-byte big-endian
 *                    length, payload: the REQ request id, 4 bytes, then
 *                    the gkv message). Every frame of PREFIX bytes or
 *                    more is held back until they are in: a live session
 *                    of another address in its header is cleared. On a
 *                    connection not yet authenticated, a frame longer
 *                    than SMALL (a handshake fits with room) is then
 *                    judged: with a live session of the connection's own
 *                    address (a client's second lane, a reconnected
 *                    socket) the connection is authenticated by that
 *                    session while the address's live sessions
 *                    authenticate fewer than AUTH_SLACK + AUTH_PER_SESS
 *                    x (those sessions) connections, and the frame goes
 *                    on; else nanomsg gets the frame cut to its first
 *                    PREFIX bytes (the server answers that header as a
 *                    message too large before a handshake, or, with a
 *                    live session, GKV_EBUSY: the cap) and the rest is
 *                    swallowed as it comes, so it costs no memory. An
 *                    authenticated connection whose session ended counts
 *                    no more and is not authenticated from its next frame
 *                    on. The digest of
 *                    each handshake frame is kept (NDIG per connection)
 *                    for the server's link().
 *   close, socket    forget the descriptor: its number is reused, also by
 *                    the server's own outgoing connections (its peer
 *                    clients), which are never gated.
 *
 * nanomsg 1.1.5 runs one worker thread, which makes every recvmsg and
 * accept call; the server's threads call link() and session() under their
 * lock. One mutex, g.mu, guards the tables; nothing else is taken under
 * it, and nothing is written under it (log lines wait for unlock()); on[]
 * lets recvmsg pass an ungated descriptor on without it.
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>
#include "gate.h"
#include "wire.h"

#define EXPORT        __attribute__((visibility("default")))
#define SP_HDR_LEN    8u               /* opens each SP stream */
#define REQ_ID_LEN    4u               /* a REQ peer's request id */
#define PREFIX        (REQ_ID_LEN + NET_HDR_LEN) /* a frame's first bytes:
                                        * request id and gkv header */
#define SMALL         (PREFIX + GKV_PRESESS_MAX) /* frame bytes any peer may
                                        * send before it has a session */
#define NDIG          4                /* handshake digests per connection */
#define NET_MUL       16               /* an IPv6 /64 may have this many
                                        * times --max-unauth-per-peer */
#define FLOOR_MS      200              /* a connection not authenticated
                                        * this long may make room */
#define AUTH_SLACK    8                /* authenticated connections one
                                        * address may have beyond */
#define AUTH_PER_SESS 4                /* ... these per session of it (a
                                        * client: 2 lanes and a heartbeat) */
#define SCRATCH       65536            /* a swallowed frame, read at once */
#define DRAIN_MAX     (1u << 20)       /* ... at most this much per call */
#define SESS_SLOTS    (1u << 17)       /* live sessions: 65536 at most */
#define LOG_BURST     50               /* lines per LOG_WINDOW_MS */
#define LOG_WINDOW_MS 10000
#define FD_TAB_MAX    (1 << 20)

enum { C_PRE = 1, C_AUTH, C_DEAD };

struct sent {                    /* a live session */
    uint64_t id;                 /* 0: a free slot */
    uint64_t ah;                 /* addr_hash() of its peer address */
    unsigned nauth;              /* connections it authenticates */
};

struct aent {                    /* an address with live sessions */
    uint64_t ah;                 /* addr_hash(); 0: a free slot */
    unsigned nsess;              /* its live sessions */
    unsigned nauth;              /* connections they authenticate */
};

struct conn {                    /* an accepted TCP connection */
    int fd, state;               /* C_* */
    char addr[GKV_PEER_ADDR_MAX];
    char key[GKV_PEER_ADDR_MAX]; /* its network: the address, an IPv6
                                  * one's /64 */
    uint64_t ah;                 /* addr_hash(addr) */
    uint64_t kh;                 /* addr_hash(key) */
    uint64_t sess;               /* the session that authenticated it */
    uint64_t since_ms;           /* accepted (monotonic) */
    unsigned skip;               /* SP header bytes still to come */
    unsigned nlen;               /* length bytes of the frame seen */
    unsigned char len[8];
    uint64_t left;               /* payload bytes of the frame to come */
    int drop;                    /* the frame is swallowed, not delivered */
    uint64_t then_drop;          /* bytes to swallow after the frame */
    int collect;                 /* body[] gets the frame (a small one) */
    size_t nbody;
    unsigned char body[SMALL];
    unsigned char hold[8 + PREFIX]; /* read, not delivered yet */
    size_t nhold;
    uint64_t dig[NDIG];          /* digests of its handshake frames */
    unsigned dnext;
};

static struct {
    pthread_mutex_t mu;
    int cap;                     /* fixed by gate_start: tab's size */
    struct conn **tab;           /* by descriptor */
    _Atomic unsigned char *on;   /* tab[fd] != NULL, read without mu */
    int top;                     /* one past the highest fd gated */
    struct conn **pre;           /* the connections not yet authenticated */
    unsigned npre;
    unsigned max_pre, max_pre_peer;
    uint64_t max_frame;          /* the server's NN_RCVMAXSIZE */
    struct sent *sess;           /* live sessions, open addressing */
    struct aent *addrs;          /* their addresses, open addressing */
    struct {
        uint64_t kh;
        unsigned n;
    } *tmp;                      /* most_net()'s counts, empty between */
    size_t tmp_mask;
    unsigned char scratch[SCRATCH]; /* swallowed bytes go here */
    int quiet;
    uint64_t window, count, dropped; /* the log's ration */
    gkv_server_gate hook;
} g = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* ---- the real functions ------------------------------------------------- */

static struct {
    int (*accept)(int, struct sockaddr *, socklen_t *);
    int (*accept4)(int, struct sockaddr *, socklen_t *, int);
    ssize_t (*recvmsg)(int, struct msghdr *, int);
    int (*close)(int);
    int (*socket)(int, int, int);
} real;

#define REAL(f) (__atomic_load_n(&real.f, __ATOMIC_ACQUIRE) != NULL ?       \
                 real.f : real_load_##f())
#define REAL_LOADER(f)                                                     \
    static __typeof__(real.f) real_load_##f(void)                          \
    {                                                                       \
        __typeof__(real.f) p;                                               \
        *(void **)&p = dlsym(RTLD_NEXT, #f);                                \
        if (p == NULL)                                                      \
            abort();                                                        \
        __atomic_store_n(&real.f, p, __ATOMIC_RELEASE);                     \
        return p;                                                           \
    }
REAL_LOADER(accept)
REAL_LOADER(accept4)
REAL_LOADER(recvmsg)
REAL_LOADER(close)
REAL_LOADER(socket)

/* ---- small things ------------------------------------------------------- */

static uint64_t
get_be64(const unsigned char *p)
{
    uint64_t v = 0;

    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

static int
gated(int fd)
{
    return fd >= 0 && fd < g.cap &&
           atomic_load_explicit(&g.on[fd], memory_order_acquire) != 0;
}

/* Log lines made under g.mu, written by unlock() once it is released: a
 * thread's own (nanomsg's worker, or a server thread in link/session). */
static __thread char tl_log[4096];
static __thread size_t tl_n;

static void
unlock(void)
{
    size_t n = tl_n;

    pthread_mutex_unlock(&g.mu);
    tl_n = 0;
    if (n > 0 && write(2, tl_log, n) < 0)
        return;
}

/* A log line as the server writes them, rationed (LOG_BURST per window,
 * then one line saying how many were not written), kept for unlock().
 * Caller holds g.mu. */
__attribute__((format(printf, 1, 2)))
static void
gate_log(const char *fmt, ...)
{
    char line[768], ts[40];
    struct timespec now;
    struct tm tm;
    uint64_t t = gkv__now_ms(), dropped = 0;
    va_list ap;
    int n;

    if (g.quiet)
        return;
    if (t - g.window >= LOG_WINDOW_MS) {
        dropped = g.dropped;
        g.window = t;
        g.count = g.dropped = 0;
    }
    if (g.count++ >= LOG_BURST) {
        g.dropped++;
        return;
    }
    clock_gettime(CLOCK_REALTIME, &now);
    gmtime_r(&now.tv_sec, &tm);
    strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
    n = snprintf(line, sizeof line, "%s.%03ldZ gkv-server[%ld] gate: ", ts,
                 now.tv_nsec / 1000000, (long)getpid());
    if (dropped > 0)
        n += snprintf(line + n, sizeof line - (size_t)n, "(%llu more gate "
                      "lines were not logged) ", (unsigned long long)dropped);
    va_start(ap, fmt);
    n += vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof line - 2)
        n = (int)sizeof line - 2;
    line[n++] = '\n';
    if (tl_n + (size_t)n > sizeof tl_log) {
        g.dropped++;
        return;
    }
    memcpy(tl_log + tl_n, line, (size_t)n);
    tl_n += (size_t)n;
}

/* ---- the tables (caller holds g.mu) ------------------------------------- */

static void
pre_remove(struct conn *c)
{
    for (unsigned i = 0; i < g.npre; i++)
        if (g.pre[i] == c) {
            g.pre[i] = g.pre[--g.npre];
            return;
        }
}

static void auth_release(struct conn *c);

/* c must go: shut down (nanomsg's next read fails and it closes c). */
static void
conn_kill(struct conn *c)
{
    if (c->state == C_PRE)
        pre_remove(c);
    auth_release(c);
    c->state = C_DEAD;
    shutdown(c->fd, SHUT_RDWR);
}

/* Never 0 (a free slot of the tables). */
static uint64_t
addr_hash(const char *addr)
{
    return XXH3_64bits(addr, strlen(addr)) | 1;
}

/* The two tables, sessions by id and addresses by hash: open addressing
 * with linear probing, SESS_SLOTS entries of 'sz' bytes that start with
 * their 64-bit key (0: a free slot); at most SESS_SLOTS / 2 are used (live
 * sessions, and so their addresses, are at most 65536). */
#define KEY(t, sz, i) (*(uint64_t *)((char *)(t) + (i) * (sz)))

static size_t
slot_home(uint64_t k, size_t mask)
{
    return (size_t)(k ^ k >> 29) & mask;
}

/* The slot of key k in table t of mask + 1 slots (a power of two) of sz
 * bytes, or the free one where it would go. most_net()'s g.tmp is such a
 * table too. */
static size_t
slot_in(void *t, size_t sz, size_t mask, uint64_t k)
{
    size_t i;

    for (i = slot_home(k, mask); KEY(t, sz, i) != 0 && KEY(t, sz, i) != k;
         i = (i + 1) & mask)
        ;
    return i;
}

/* slot_in() for the two tables of SESS_SLOTS slots. */
static size_t
slot_find(void *t, size_t sz, uint64_t k)
{
    return slot_in(t, sz, SESS_SLOTS - 1, k);
}

/* Empties slot i. Linear probing's deletion: later entries of the run
 * move up so that every entry stays reachable from its home slot. */
static void
slot_del(void *t, size_t sz, size_t i)
{
    size_t j, h, m = SESS_SLOTS - 1;

    for (j = i;;) {
        j = (j + 1) & m;
        if (KEY(t, sz, j) == 0)
            break;
        h = slot_home(KEY(t, sz, j), m);
        /* move j to i unless its home lies cyclically in (i, j] */
        if (i <= j ? (h <= i || h > j) : (h <= i && h > j)) {
            memcpy((char *)t + i * sz, (char *)t + j * sz, sz);
            i = j;
        }
    }
    memset((char *)t + i * sz, 0, sz);
}

static struct sent *
sess_find(uint64_t id)
{
    size_t i;

    if (id == 0)
        return NULL;
    i = slot_find(g.sess, sizeof *g.sess, id);
    return g.sess[i].id == id ? &g.sess[i] : NULL;
}

/* Address ah's entry; with 'make', made if need be. */
static struct aent *
addr_find(uint64_t ah, int make)
{
    size_t i = slot_find(g.addrs, sizeof *g.addrs, ah);

    if (g.addrs[i].ah == 0 && make)
        g.addrs[i].ah = ah;
    return g.addrs[i].ah == ah ? &g.addrs[i] : NULL;
}

/* Whether session id is live and of the address whose hash is ah. */
static int
sess_ok(uint64_t id, uint64_t ah)
{
    struct sent *e = sess_find(id);

    return e != NULL && e->ah == ah;
}

static void
sess_del(uint64_t id)
{
    struct sent *e = sess_find(id);
    struct aent *a;

    if (e == NULL)
        return;
    if ((a = addr_find(e->ah, 0)) != NULL) {
        a->nauth -= e->nauth < a->nauth ? e->nauth : a->nauth;
        if (--a->nsess == 0)
            slot_del(g.addrs, sizeof *g.addrs, (size_t)(a - g.addrs));
    }
    slot_del(g.sess, sizeof *g.sess, (size_t)(e - g.sess));
}

static void
sess_add(uint64_t id, uint64_t ah)
{
    struct sent *e = sess_find(id);
    size_t i;

    if (e != NULL && e->ah == ah)
        return;
    sess_del(id);                   /* another address's: from scratch */
    i = slot_find(g.sess, sizeof *g.sess, id);
    g.sess[i].id = id;
    g.sess[i].ah = ah;
    g.sess[i].nauth = 0;
    addr_find(ah, 1)->nsess++;
}

/* Whether c, authenticated, is by a session that is live and of its
 * address (then counted in that session's and address's nauth). */
static int
conn_live(const struct conn *c)
{
    return c->state == C_AUTH && sess_ok(c->sess, c->ah);
}

/* c leaves C_AUTH (or its session changes): no longer counted. */
static void
auth_release(struct conn *c)
{
    struct sent *e;
    struct aent *a;

    /* conn_live(c), keeping the session found */
    if (c->state != C_AUTH || (e = sess_find(c->sess)) == NULL ||
        e->ah != c->ah)
        return;
    if (e->nauth > 0)
        e->nauth--;
    if ((a = addr_find(c->ah, 0)) != NULL && a->nauth > 0)
        a->nauth--;
}

/* c is authenticated by session sid (0: by a handshake it carried that
 * was not granted a session; not the case today): no longer counted as
 * not authenticated, no frame limit, until sid ends. 'capped': only while
 * its address's connections authenticated by its live sessions are fewer
 * than AUTH_SLACK + AUTH_PER_SESS x (those sessions); connections whose
 * session ended are not counted (they are judged again at their next
 * frame). Counts kept where they change (g.addrs), so this costs no scan.
 * 1, or 0 when c stays as it was (the cap). */
static int
conn_auth(struct conn *c, uint64_t sid, int capped)
{
    struct aent *a = addr_find(c->ah, 0);
    unsigned n = a != NULL ? a->nauth : 0, ns = a != NULL ? a->nsess : 0;
    struct sent *e;

    if (capped && n >= AUTH_SLACK && n >= AUTH_SLACK + AUTH_PER_SESS * ns) {
        gate_log("connection from %s not authenticated by its session: the "
                 "address has %u authenticated connections, the most %u "
                 "sessions allow", c->addr, n, ns);
        return 0;
    }
    auth_release(c);
    if (c->state == C_PRE)
        pre_remove(c);
    c->state = C_AUTH;
    c->sess = sid;
    if ((e = sess_find(sid)) != NULL && e->ah == c->ah) {
        e->nauth++;
        addr_find(c->ah, 1)->nauth++;
    }
    return 1;
}

/* ---- the stream ---------------------------------------------------------- */

static int conn_unauth(struct conn *c);

/* A frame of L bytes, longer than SMALL, on a connection not yet
 * authenticated; p: its first PREFIX bytes, which may be rewritten. J_ON:
 * it goes on (a request with a live session of c's address: c is
 * authenticated now); J_CUT: nanomsg gets the frame cut to its first
 * PREFIX bytes, its header as sent (a live session it may not use set to
 * 0), and the rest is swallowed: the server answers that header as it
 * answers a message that large before a handshake (server.c's
 * presess_too_big: "without a session", GKV_EPERM, or GKV_EPROTO for a
 * HELLO or HANDSHAKE) or what else is wrong with it, and counts and logs
 * it. J_END: c must go (a frame over the server's message limit, which
 * nanomsg would drop it for). Nothing is sent from here: a reply of the
 * gate's own could land in the middle of one of nanomsg's. */
enum { J_END = -1, J_ON, J_CUT };

static int
judge_big(struct conn *c, unsigned char *p, uint64_t L)
{
    unsigned char hb[NET_HDR_LEN];
    char why[256];
    const char *name;
    net_hdr q;
    gkv_err rc;
    int sess, live;

    if (L > g.max_frame) {
        gate_log("connection from %s closed: a frame of %llu bytes, over the "
                 "message limit (--max-msg), before it authenticated", c->addr,
                 (unsigned long long)L);
        return J_END;
    }
    /* the header's checks, but the checksum: the payload is not here */
    memcpy(hb, p + REQ_ID_LEN, NET_HDR_LEN);
    hb[8] &= (unsigned char)~NET_F_SUM;
    memset(hb + 40, 0, 8);
    rc = net__hdr_check(hb, NET_HDR_LEN + (size_t)(L - PREFIX), &q, why,
                        sizeof why);
    if (rc != GKV_OK) {
        /* the server answers what is wrong with the header; its session
         * cleared, so that the cut does not read as one over the cap */
        gate_log("connection from %s: a frame of %llu bytes before it "
                 "authenticated, refused unread: %s", c->addr,
                 (unsigned long long)L, why);
        memset(p + REQ_ID_LEN + 24, 0, 8);
        return J_CUT;
    }
    name = net__type_name(q.type);
    /* HELLO, HANDSHAKE and unknown types need no session (server.c's
     * presess_too_big) */
    sess = name != NULL && q.type != NET_HELLO && q.type != NET_HANDSHAKE;
    live = sess && sess_find(q.session) != NULL;
    if (live && conn_auth(c, q.session, 1))
        return J_ON;                /* foreign_clear() left only c's own */
    gate_log("connection from %s: a %s request of %llu payload bytes before "
             "it authenticated%s, refused unread", c->addr, name != NULL ?
             name : "unknown", (unsigned long long)q.len, !live ? "" :
             " (its address has its most authenticated connections)");
    /* the header as sent, its session too when live: the server then
     * answers GKV_EBUSY (presess_too_big), which a client's pull asks
     * again with backoff, not "unknown session", which would make it hand
     * shake again and end its session */
    return J_CUT;
}

/* A frame of PREFIX bytes or more starts on c; p: its first PREFIX bytes.
 * A live session of another address in its header is cleared (bytes
 * 24-31 of the header; the checksum covers only the payload): the server
 * answers "unknown session", whatever the frame's size or c's state, so
 * that a session id seen on the wire is of use only from its own
 * address. */
static void
foreign_clear(struct conn *c, unsigned char *p)
{
    const struct sent *e;
    net_hdr q;

    /* one lookup: a live session of another address (sess_find(0) is
     * NULL) */
    if (net__hdr_get(p + REQ_ID_LEN, NET_HDR_LEN, &q) != 0 ||
        (e = sess_find(q.session)) == NULL || e->ah == c->ah)
        return;
    gate_log("connection from %s: a %s request carrying another address's "
             "session, its session cleared", c->addr,
             net__type_name(q.type) != NULL ? net__type_name(q.type) :
             "unknown");
    memset(p + REQ_ID_LEN + 24, 0, 8);
}

/* The end of a small frame c collected in body[]. */
static void
frame_done(struct conn *c)
{
    net_hdr q;

    if (c->nbody < PREFIX || c->then_drop > 0)
        return;                     /* no header, or a cut frame's */
    net__hdr_get(c->body + REQ_ID_LEN, NET_HDR_LEN, &q);
    if (q.type == NET_HANDSHAKE) {
        c->dig[c->dnext] = XXH3_64bits(c->body, c->nbody);
        c->dnext = (c->dnext + 1) % NDIG;
    } else if (c->state == C_PRE && q.type != NET_HELLO &&
               sess_ok(q.session, c->ah)) {
        (void)conn_auth(c, q.session, 1);
    }
}

/* Follows c's stream over b[0..n), the bytes read. What nanomsg may see
 * is moved to b's start and counted in the return value; bytes that must
 * wait for more (the start of a frame not judged yet) go to c->hold.
 * -1: c must go. */
static ssize_t
stream(struct conn *c, unsigned char *b, size_t n)
{
    size_t i = 0, w = 0, k;

#define DELIVER(cnt) do {                                                   \
        if (w != i)                                                         \
            memmove(b + w, b + i, (cnt));                                   \
        w += (cnt);                                                         \
        i += (cnt);                                                         \
    } while (0)

    while (i < n) {
        if (c->skip > 0) {
            k = n - i < c->skip ? n - i : c->skip;
            c->skip -= (unsigned)k;
            DELIVER(k);
            continue;
        }
        if (c->left == 0 && c->nlen == 0) {
            /* a frame starts: judged before nanomsg sees a byte of it */
            uint64_t L;
            int v;

            if (c->state == C_AUTH && !conn_live(c) && conn_unauth(c) != 0)
                return -1;
            if (n - i < 8)
                break;
            L = get_be64(b + i);
            if (L >= PREFIX) {
                if (n - i < 8 + PREFIX)
                    break;
                foreign_clear(c, b + i + 8);
            }
            if (L > SMALL && c->state == C_PRE) {
                if ((v = judge_big(c, b + i + 8, L)) == J_END)
                    return -1;
                if (v == J_CUT) {
                    /* a frame of PREFIX bytes, then the rest swallowed */
                    for (int s = 0; s < 8; s++)
                        b[i + s] = (unsigned char)
                                   ((uint64_t)PREFIX >> (56 - 8 * s));
                    c->then_drop = L - PREFIX;
                }
            }
        }
        if (c->left == 0) {
            /* the length, byte by byte: it may straddle reads */
            c->len[c->nlen++] = b[i];
            DELIVER(1);
            if (c->nlen == 8) {
                c->nlen = 0;
                c->left = get_be64(c->len);
                c->drop = 0;
                c->collect = c->left <= SMALL;
                c->nbody = 0;
                if (c->left == 0)
                    frame_done(c);
            }
            continue;
        }
        k = n - i < c->left ? n - i : (size_t)c->left;
        if (c->drop) {
            i += k;                 /* swallowed */
        } else {
            if (c->collect) {
                memcpy(c->body + c->nbody, b + i, k);
                c->nbody += k;
            }
            DELIVER(k);
        }
        c->left -= k;
        if (c->left == 0 && !c->drop && c->collect)
            frame_done(c);
        if (c->left == 0 && c->then_drop > 0) {
            c->drop = 1;
            c->left = c->then_drop;
            c->then_drop = 0;
        }
    }
#undef DELIVER
    c->nhold = n - i;
    memcpy(c->hold, b + i, c->nhold);
    return (ssize_t)w;
}

/* ---- the wrappers -------------------------------------------------------- */

/* While c's frame is swallowed, reads what has come of it (at most
 * DRAIN_MAX bytes, never past the frame) in SCRATCH pieces here, rather
 * than one of nanomsg's 2 KiB reads and a lock per piece. Called by
 * nanomsg's worker without g.mu: recv() may take a while. */
static void
drain(struct conn *c)
{
    size_t total = 0;
    ssize_t k;

    while (c->drop && c->left > 0 && c->nhold == 0 && total < DRAIN_MAX) {
        k = recv(c->fd, g.scratch, c->left < SCRATCH ? (size_t)c->left :
                 SCRATCH, MSG_DONTWAIT);
        if (k <= 0)
            break;
        c->left -= (uint64_t)k;
        total += (size_t)k;
    }
}

/* "IP" of a TCP peer (an IPv4-mapped IPv6 one as IPv4) in addr, and what
 * the per-address caps count it as in key: the same, but an IPv6 one's
 * /64 ("2001:db8:1:2::/64"): one host has a /64 to pick from. 0 when not
 * a TCP peer. */
static int
peer_text(int fd, char *addr, char *key)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    struct in6_addr net;
    size_t n;

    if (getpeername(fd, (struct sockaddr *)&ss, &sl) != 0)
        return 0;
    if (ss.ss_family == AF_INET) {
        if (inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, addr,
                      GKV_PEER_ADDR_MAX) == NULL)
            return 0;
    } else if (ss.ss_family == AF_INET6) {
        const struct in6_addr *a = &((struct sockaddr_in6 *)&ss)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(a)) {
            if (inet_ntop(AF_INET, a->s6_addr + 12, addr,
                          GKV_PEER_ADDR_MAX) == NULL)
                return 0;
        } else {
            if (inet_ntop(AF_INET6, a, addr, GKV_PEER_ADDR_MAX) == NULL)
                return 0;
            memset(&net, 0, sizeof net);
            memcpy(net.s6_addr, a->s6_addr, 8);
            if (inet_ntop(AF_INET6, &net, key, GKV_PEER_ADDR_MAX - 3) == NULL)
                return 0;
            n = strlen(key);
            memcpy(key + n, "/64", 4);
            return 1;
        }
    } else {
        return 0;
    }
    memcpy(key, addr, GKV_PEER_ADDR_MAX);
    return 1;
}

/* The connections not yet authenticated that make_room() may pick: all,
 * those of one address (conn.ah), or of one network (conn.kh: an IPv6
 * address's /64, an IPv4 address itself). */
enum { BY_ANY, BY_ADDR, BY_NET };

/* The network (kh) holding the most connections not yet authenticated
 * older than FLOOR_MS: counted in g.tmp, an open-addressing table of
 * g.tmp_mask + 1 slots (twice --max-unauth or more), emptied after. 0
 * when none. Caller holds g.mu. */
static uint64_t
most_net(uint64_t now)
{
    uint64_t best = 0;
    unsigned most = 0;

    for (unsigned i = 0; i < g.npre; i++) {
        struct conn *c = g.pre[i];
        size_t k;

        if (now - c->since_ms < FLOOR_MS)
            continue;
        k = slot_in(g.tmp, sizeof *g.tmp, g.tmp_mask, c->kh);
        g.tmp[k].kh = c->kh;
        if (++g.tmp[k].n > most) {
            most = g.tmp[k].n;
            best = c->kh;
        }
    }
    memset(g.tmp, 0, (g.tmp_mask + 1) * sizeof *g.tmp);
    return best;
}

/* Makes room among the connections not yet authenticated ('by' and h:
 * which; BY_ANY: of the network holding the most of them, so that a peer
 * opening connections from many addresses of one network fast takes the
 * room of its own, not a client's of another): the oldest one goes,
 * whatever its age past FLOOR_MS (one that re-opens its connections
 * cannot lock another out). 1 when one went. Caller holds g.mu. */
static int
make_room(int by, uint64_t h, uint64_t now)
{
    struct conn *old = NULL;

    if (by == BY_ANY) {
        if ((h = most_net(now)) == 0)
            return 0;
        by = BY_NET;
    }
    for (unsigned i = 0; i < g.npre; i++) {
        struct conn *c = g.pre[i];
        if ((by == BY_ADDR ? c->ah : c->kh) == h &&
            now - c->since_ms >= FLOOR_MS &&
            (old == NULL || c->since_ms < old->since_ms))
            old = c;
    }
    if (old == NULL)
        return 0;
    gate_log("connection from %s closed: not authenticated after %llu ms, "
             "and a new one needs its place", old->addr,
             (unsigned long long)(now - old->since_ms));
    conn_kill(old);
    return 1;
}

/* Whether one more connection of address addr (hash ah) of network key
 * (hash kh: the same for IPv4, an IPv6 address's /64) may be counted as
 * not authenticated, room made if need be (make_room): at most
 * --max-unauth-per-peer of the address, NET_MUL times that of an IPv6
 * /64, --max-unauth in all. Caller holds g.mu. */
static int
pre_room(uint64_t ah, uint64_t kh, const char *addr, const char *key,
         uint64_t now)
{
    unsigned per = 0, net = 0;

    for (unsigned i = 0; i < g.npre; i++) {
        per += g.pre[i]->ah == ah;
        net += g.pre[i]->kh == kh;
    }
    if (per >= g.max_pre_peer && !make_room(BY_ADDR, ah, now)) {
        gate_log("connection from %s closed at once: %u of its connections "
                 "have not authenticated yet, the most one address may "
                 "(--max-unauth-per-peer), none older than %d ms", addr, per,
                 FLOOR_MS);
        return 0;
    }
    if (kh != ah && net >= NET_MUL * g.max_pre_peer &&
        !make_room(BY_NET, kh, now)) {
        gate_log("connection from %s closed at once: %u connections of %s "
                 "have not authenticated yet, the most one IPv6 /64 may (%u "
                 "x --max-unauth-per-peer), none older than %d ms", addr, net,
                 key, NET_MUL, FLOOR_MS);
        return 0;
    }
    if (g.npre >= g.max_pre && !make_room(BY_ANY, 0, now)) {
        gate_log("connection from %s closed at once: %u connections have not "
                 "authenticated yet, the most the server takes "
                 "(--max-unauth), none older than %d ms", addr, g.npre,
                 FLOOR_MS);
        return 0;
    }
    return 1;
}

/* Authenticated c's session ended: c is counted as not authenticated
 * again (from now), room made for it. 0, or -1: no room, c must go. */
static int
conn_unauth(struct conn *c)
{
    uint64_t now = gkv__now_ms();

    if (!pre_room(c->ah, c->kh, c->addr, c->key, now))
        return -1;
    auth_release(c);
    c->state = C_PRE;
    c->sess = 0;
    c->since_ms = now;
    g.pre[g.npre++] = c;
    return 0;
}

/* Takes accepted descriptor fd into the gate: 1, or 0 when it was closed
 * (a cap). */
static int
admit(int fd)
{
    char addr[GKV_PEER_ADDR_MAX], key[GKV_PEER_ADDR_MAX];
    struct conn *c = NULL;
    uint64_t now;

    if (g.cap == 0 || !peer_text(fd, addr, key))
        return 1;                   /* not started, or no TCP peer */
    now = gkv__now_ms();
    pthread_mutex_lock(&g.mu);
    if (fd >= g.cap)
        gate_log("connection from %s closed at once: descriptor %d is past "
                 "the gate's table (%d, from ulimit -n)", addr, fd, g.cap);
    else if (!pre_room(addr_hash(addr), addr_hash(key), addr, key, now))
        ;
    else if ((c = calloc(1, sizeof *c)) == NULL)
        gate_log("connection from %s closed at once: out of memory", addr);
    if (c == NULL) {
        unlock();
        REAL(close)(fd);
        return 0;
    }
    c->fd = fd;
    c->state = C_PRE;
    snprintf(c->addr, sizeof c->addr, "%s", addr);
    snprintf(c->key, sizeof c->key, "%s", key);
    c->ah = addr_hash(addr);
    c->kh = addr_hash(key);
    c->since_ms = now;
    c->skip = SP_HDR_LEN;
    free(g.tab[fd]);                /* none: close forgets it */
    g.tab[fd] = c;
    g.pre[g.npre++] = c;
    if (fd >= g.top)
        g.top = fd + 1;
    atomic_store_explicit(&g.on[fd], 1, memory_order_release);
    unlock();
    return 1;
}

/* fd is closed or new: not a connection of the gate's. */
static void
forget(int fd)
{
    struct conn *c;

    pthread_mutex_lock(&g.mu);
    c = g.tab[fd];
    g.tab[fd] = NULL;
    atomic_store_explicit(&g.on[fd], 0, memory_order_release);
    if (c != NULL && c->state == C_PRE)
        pre_remove(c);
    if (c != NULL)
        auth_release(c);
    unlock();
    free(c);
}

/* A connection closed at a cap is reported as one the peer gave up before
 * it was accepted (ECONNABORTED): nanomsg then waits for the next one
 * (EAGAIN would break its assumption that a ready listener accepts). */
EXPORT int
accept4(int l, struct sockaddr *a, socklen_t *al, int flags)
{
    int fd = REAL(accept4)(l, a, al, flags);

    if (fd < 0 || admit(fd))
        return fd;
    errno = ECONNABORTED;
    return -1;
}

EXPORT int
accept(int l, struct sockaddr *a, socklen_t *al)
{
    int fd = REAL(accept)(l, a, al);

    if (fd < 0 || admit(fd))
        return fd;
    errno = ECONNABORTED;
    return -1;
}

EXPORT int
close(int fd)
{
    if (gated(fd))
        forget(fd);
    return REAL(close)(fd);
}

EXPORT int
socket(int domain, int type, int protocol)
{
    int fd = REAL(socket)(domain, type, protocol);

    if (gated(fd))
        forget(fd);
    return fd;
}

EXPORT ssize_t
recvmsg(int fd, struct msghdr *msg, int flags)
{
    struct conn *c;
    unsigned char *b;
    size_t cap, got;
    ssize_t rc, w;
    int e;

    if (!gated(fd) || (flags & MSG_PEEK) || msg->msg_iovlen < 1 ||
        msg->msg_iov[0].iov_len == 0)
        return REAL(recvmsg)(fd, msg, flags);
    pthread_mutex_lock(&g.mu);
    if ((c = g.tab[fd]) == NULL) {
        unlock();
        return REAL(recvmsg)(fd, msg, flags);
    }
    if (c->state == C_DEAD) {
        unlock();
        errno = ECONNRESET;
        return -1;
    }
    /* one buffer (nanomsg passes one): what was held, then what came */
    b = msg->msg_iov[0].iov_base;
    cap = msg->msg_iov[0].iov_len;
    if (cap < c->nhold) {
        /* nanomsg reads at least 2048 bytes while a frame starts */
        gate_log("connection from %s closed: a read of %zu bytes while %zu "
                 "were held", c->addr, cap, c->nhold);
        conn_kill(c);
        unlock();
        errno = ECONNRESET;
        return -1;
    }
    got = c->nhold < cap ? c->nhold : cap;
    memcpy(b, c->hold, got);
    memmove(c->hold, c->hold + got, c->nhold - got);
    c->nhold -= got;
    msg->msg_controllen = 0;
    msg->msg_flags = 0;
    if (got < cap) {
        struct msghdr m = *msg;
        struct iovec v = {b + got, cap - got};

        m.msg_iov = &v;
        m.msg_iovlen = 1;
        rc = REAL(recvmsg)(fd, &m, flags);
        e = errno;
        if (rc > 0) {
            got += (size_t)rc;
        } else if (got == 0 || rc == 0 || (e != EAGAIN && e != EWOULDBLOCK)) {
            /* nothing, the end, or an error: as it came (what was held
             * was a frame not judged yet) */
            unlock();
            errno = e;
            return rc;
        }
    }
    if ((w = stream(c, b, got)) < 0) {
        conn_kill(c);
        unlock();
        errno = ECONNRESET;
        return -1;
    }
    unlock();
    /* without g.mu: only nanomsg's worker (this thread) reads and writes
     * c's frame state (left, drop, nhold), and only it frees c (close) */
    drain(c);
    if (w == 0) {
        errno = EAGAIN;             /* all held or swallowed: wait for more */
        return -1;
    }
    return w;
}

/* ---- the server's hook --------------------------------------------------- */

static int
hook_link(void *ctx, uint64_t digest, char *addr, uint64_t session)
{
    struct conn *one = NULL;
    int n = 0;

    (void)ctx;
    pthread_mutex_lock(&g.mu);
    for (int fd = 0; fd < g.top; fd++) {
        struct conn *c = g.tab[fd];
        if (c == NULL || c->state == C_DEAD)
            continue;
        for (unsigned k = 0; k < NDIG; k++)
            if (c->dig[k] == digest) {
                n++;
                one = c;
                break;
            }
    }
    if (n == 1 && session != 0) {
        for (unsigned k = 0; k < NDIG; k++)
            if (one->dig[k] == digest)
                one->dig[k] = 0;
        (void)conn_auth(one, session, 0);
    }
    if (n == 1)
        snprintf(addr, GKV_PEER_ADDR_MAX, "%s", one->addr);
    unlock();
    return n;
}

static void
hook_session(void *ctx, uint64_t id, const char *addr, int live)
{
    (void)ctx;
    pthread_mutex_lock(&g.mu);
    if (live)
        sess_add(id, addr_hash(addr));
    else
        sess_del(id);
    unlock();
}

gkv_err
gate_start(const struct gate_opts *o)
{
    struct rlimit rl;
    int cap = 65536;

    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        cap = rl.rlim_cur < 1024 ? 1024 : rl.rlim_cur > FD_TAB_MAX ?
              FD_TAB_MAX : (int)rl.rlim_cur;
    g.max_pre = o->max_unauth ? o->max_unauth : GATE_UNAUTH_MAX;
    g.max_pre_peer = o->max_unauth_peer ? o->max_unauth_peer :
                     GATE_UNAUTH_PEER_MAX;
    g.quiet = o->quiet;
    g.max_frame = (o->max_msg ? o->max_msg : GKV_NET_MAX_MSG) + NET_HDR_LEN +
                  64;
    g.tab = calloc((size_t)cap, sizeof *g.tab);
    g.on = calloc((size_t)cap, sizeof *g.on);
    g.pre = calloc(g.max_pre, sizeof *g.pre);
    g.sess = calloc(SESS_SLOTS, sizeof *g.sess);
    g.addrs = calloc(SESS_SLOTS, sizeof *g.addrs);
    for (g.tmp_mask = 1; g.tmp_mask < 2 * (size_t)g.max_pre;)
        g.tmp_mask <<= 1;
    g.tmp = calloc(g.tmp_mask, sizeof *g.tmp);
    g.tmp_mask--;
    if (g.tab == NULL || g.on == NULL || g.pre == NULL || g.sess == NULL ||
        g.addrs == NULL || g.tmp == NULL)
        return GKV_ENOMEM;
    g.hook.link = hook_link;
    g.hook.session = hook_session;
    g.hook.max_peer_sessions = o->max_peer_sessions;
    pthread_mutex_lock(&g.mu);
    g.cap = cap;                    /* accept gates from now on */
    unlock();
    return GKV_OK;
}

const gkv_server_gate *
gate_hook(void)
{
    return &g.hook;
}
