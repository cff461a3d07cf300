/* server_int.h - what the files of the server share (private; not
 * installed). The server is a core and message families, after NNG's
 * src/core + src/sp/protocol and Redis's t_*.c:
 *
 *   server.c         the core: open, run, stop, close; the socket and the
 *                    worker threads; receiving, header checks, dispatch
 *                    through one table; replies and errors; the log and
 *                    its rate limits; the housekeeping tick
 *   server_sess.c    sessions: HELLO, HANDSHAKE, SCHEMA, LEAVE, HEARTBEAT;
 *                    the session and group tables, nonces, the seen set,
 *                    leases, and the done set behind SRV_ONCE
 *   server_kv.c      tensors: PULL, PUSH, CREATE, DELETE, OPT_RESET, and
 *                    write-back setup
 *   server_graph.c   graph queries: PBOOK, FIND_EDGES, IN/OUT_DEGREES,
 *                    IN_SUBGRAPH; opening the partition
 *   server_sample.c  sampling: SAMPLE, EDGE_BATCH
 *   server_pw.c      the edge-weight cache SAMPLE uses (edge features as
 *                    sampling weights)
 *   server_admin.c   BARRIER, STATS, SHUTDOWN
 *   server_rmem.c    reply memory: every reply message counted until
 *                    nanomsg frees it, bounded in total (max_reply_mem)
 *   server_batch.c   SAMPLE_BATCH: whole mini-batches, sampled here and
 *                    through the peer servers (a client of theirs), on
 *                    the pool's threads (SRV_POOL)
 *
 * Each family exports one table of srv_op rows (srv__*_ops below); the
 * core puts them into its dispatch table, indexed by message type, when
 * the server opens. Adding a message type: its number, name, codec and
 * PROTOCOL.md entry in net/wire.h and net/wire.c, and a handler with its
 * row in its family's table. Nothing else changes; a row for a type that
 * another row already has is a bug, caught by an assert at open.
 *
 * Names: srv__* are shared between the server's files only (net__* are
 * the whole of net/'s). */
#ifndef SERVER_INT_H
#define SERVER_INT_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <sodium.h>
#include "base/base.h"
#include "net/gkv_net.h"
#include "graph/gkv_part.h"
#include "graph/gkv_sample.h"
#include "net/wire.h"

#define GONE_MAX       256       /* replaced sessions remembered */
#define DONE_MAX       16        /* SRV_ONCE requests a session remembers */
#define SRV_ONCE_REPLY 16        /* payload bytes of a SRV_ONCE reply, at
                                  * most: kept to answer a copy */
#define SRV_REPLY_SMALL (64u << 10) /* replies (whole messages) smaller
                                  * than this are never refused for the
                                  * reply memory cap (server_rmem.c) */
/* the kinds of log lines rationed (srv__log_take) */
enum { LOG_REJECT, LOG_REJOIN, LOG_AGAIN, LOG_OBSERVER, LOG_JOIN, LOG_KINDS };

/* ---- the state ---------------------------------------------------------- */

typedef struct srv_op srv_op;        /* a row of the dispatch table */
struct pw;                           /* an edge-weight cache entry */
struct srv_job;                      /* a request queued for the pool */
struct srv_batch;                    /* server_batch.c's state */

/* A SRV_ONCE request (a push) of a session, remembered so that a copy
 * nanomsg sends again after a lost connection is not applied twice. Under
 * s->mu, as its session. */
struct done {
    uint64_t req;           /* its request id */
    uint64_t digest;        /* XXH3 of its type and payload: a request
                             * that reuses the id with other bytes is
                             * refused, not taken for a copy */
    int32_t status;         /* its outcome, once applied */
    int busy;               /* being applied now */
    uint32_t rep_len;       /* its reply's payload, once applied and OK */
    unsigned char rep[SRV_ONCE_REPLY];
};

struct sess {                /* a client's session; under s->mu */
    uint64_t id;
    char group[NET_GROUP_MAX + 1];
    uint32_t rank;
    uint64_t last_ms;       /* monotonic ms of its last request */
    struct done *done;      /* its latest DONE_MAX SRV_ONCE requests
                             * (pushes), a ring (the client has two in
                             * flight, so a re-sent one may come after
                             * later ones); NULL until the first */
    unsigned ndone, done_next;
    int observer;           /* joined with NET_HS_OBSERVER */
    int bar_any;            /* a barrier of this session was released: */
    uint64_t bar_seq;       /* the last one's seq */
    uint64_t inst;          /* its job instance (NET_HS_INSTANCE), or 0 */
    char addr[GKV_PEER_ADDR_MAX]; /* its peer's address (the connection
                             * its handshake came on, s->gate's), or ""
                             * without a gate */
};

struct parked {             /* a barrier request waiting for its group */
    void *ctl;              /* nanomsg control header (owned) */
    uint64_t req_id, session, seq;
    uint32_t rank, flags;   /* flags: the request's NET_F_SUM */
};

struct group {               /* the sessions of a group; under s->mu */
    char name[NET_GROUP_MAX + 1];
    unsigned members;
    uint32_t bsize;         /* group size the parked requests said */
    struct parked *wait;
    size_t nwait, capwait;
};

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
    const srv_op *ops[NET_TYPE_MAX + 1]; /* fixed: the dispatch table, by
                                      * message type (NULL: not served) */
    gkv_store *store;                /* fixed; a partition's is the part's */
    char *store_path;                /* fixed; realpath */

    struct {                         /* fixed: the options it runs with */
        net_ident id;                /* sent in HELLO and HANDSHAKE replies */
        unsigned flags;              /* GKV_SERVER_* */
        unsigned lease_ms;
        unsigned num_clients;        /* members to see before stopping */
        unsigned max_group_sessions; /* sessions a group may hold */
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

    struct {                         /* the edge-weight cache (server_pw.c) */
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

    struct {                         /* the pool (SRV_POOL rows): threads
                                      * of their own for handlers that wait
                                      * on other servers, so that the
                                      * workers always answer those
                                      * servers' requests */
        pthread_mutex_t mu;          /* guards the queue and halt */
        pthread_cond_t cv;           /* a job was queued, or halt */
        struct srv_job *head, *tail;
        size_t n;                    /* jobs queued */
        unsigned nthreads;           /* fixed; 0: no pool (a plain store) */
        unsigned started;            /* gkv_server_run()'s */
        pthread_t *thr;
        atomic_uint next;            /* pool indices handed out */
        int halt;                    /* under mu: threads must leave */
    } pool;

    struct {                         /* reply memory (server_rmem.c) */
        uint64_t cap;                /* fixed; bytes of replies not yet
                                      * freed by nanomsg, at most (0: not
                                      * bounded, the probe failed) */
        atomic_uint_fast64_t refused;/* replies refused for it */
    } rmem;
    const gkv_server_gate *gate;     /* fixed once running
                                      * (gkv_server_set_gate); NULL: none.
                                      * Its functions are called under mu */

    struct srv_batch *batch;         /* server_batch.c's (per pool thread:
                                      * a sampler, markers, a peer client) */

    struct {                         /* stopping */
        volatile sig_atomic_t sig;   /* gkv_server_stop() */
        atomic_int stop;             /* a stop was decided */
        atomic_int halt;             /* workers must leave */
        int ran;                     /* gkv_server_run()'s thread only */
        char why[160];               /* under mu; the first reason */
    } run;

    struct {                         /* counters for STATS (atomics) */
        uint64_t start_ms;           /* fixed; gkv__now_ms() at open */
        atomic_uint_fast64_t requests, errors, rejected, bytes_in,
            bytes_out, pulls, pull_rows, pushes, push_rows, samples,
            sample_edges;
    } stats;
};

/* One request being handled: the core fills the input, a handler the
 * outcome. A handler either fails it (srv__fail: status and message; the
 * core sends the error reply and frees any r->out) or builds r->out
 * (srv__reply_*), or parks it (takes r->ctl, sets r->parked, and answers
 * it later with srv__send_reply). */
typedef struct srv_req {
    gkv_server *srv;                 /* the server it came to */
    net_hdr h;
    const unsigned char *pl;         /* payload, r->plen bytes (checked
                                      * against the header; not aligned) */
    size_t plen;
    void *ctl;                       /* control header; NULL once consumed */
    char group[NET_GROUP_MAX + 1];   /* the session's (SRV_SESSION) */
    uint32_t rank;
    unsigned worker;                 /* the worker thread's index, below
                                      * io.nthreads: its sampler (UINT_MAX
                                      * on the pool) */
    unsigned pool;                   /* on the pool (SRV_POOL): its
                                      * thread's index, below
                                      * pool.nthreads */
    uint64_t queued_ms;              /* on the pool: gkv__now_ms() when
                                      * it was queued (its deadline
                                      * counts from then) */
    /* the outcome */
    gkv_err status;
    char err[NET_ERRMSG_MAX];
    uint32_t rflags;                 /* extra reply flags */
    void *out;                       /* reply message (nn_allocmsg), header
                                      * space included */
    size_t out_len;                  /* its payload bytes */
    int parked;                      /* the handler kept ctl */
} srv_req;

/* ---- the dispatch table (NNG's ops tables) -------------------------------
 *
 * A handler runs on a worker thread, with no lock held; it may block on
 * the store (LMDB's writer lock, a map resize) but must not hold s->mu
 * while it does, and must not wait for another request (a barrier parks
 * instead). Before it runs, the core has checked the header, and per the
 * row's flags: */
#define SRV_SESSION 0x1u  /* a live session: r->group and r->rank are its
                           * own, its lease renewed; else GKV_EPERM with
                           * NET_F_SESSION, and the handler does not run */
#define SRV_PART    0x2u  /* the server serves a graph partition
                           * (s->graph.part); else GKV_ENOTSUP */
#define SRV_ONCE    0x4u  /* must not run twice for one (session, request
                           * id): a copy that nanomsg re-sent after a lost
                           * connection gets the first one's answer and a
                           * copy of one still running waits for it. Needs
                           * SRV_SESSION and 'check'; the reply payload
                           * must fit SRV_ONCE_REPLY bytes */
#define SRV_POOL    0x8u  /* runs on a pool thread, not a worker: the core
                           * queues the request (message and control header)
                           * after the session check, and a pool thread
                           * runs the row as a worker would and replies
                           * (a raw REP socket replies from any thread).
                           * For handlers that wait on other servers, which
                           * may be waiting on this one: the workers stay
                           * free to answer them. Without a pool (a server
                           * that serves no partition) the row runs on the
                           * worker. Not with SRV_ONCE */

struct srv_op {
    unsigned type;                   /* NET_*; 0 ends a family's table */
    unsigned flags;                  /* SRV_* */
    /* Handles r: fills r->out, or fails r, or parks it. */
    void (*fn)(gkv_server *s, srv_req *r);
    /* For SRV_ONCE: checks the payload before the done set sees it, so
     * a malformed request is refused, never remembered (GKV_OK: go on;
     * else r failed). NULL for the others. */
    gkv_err (*check)(gkv_server *s, srv_req *r);
};

/* The families' tables, each ended by a row of type 0. */
extern const srv_op srv__sess_ops[];     /* server_sess.c */
extern const srv_op srv__kv_ops[];       /* server_kv.c */
extern const srv_op srv__graph_ops[];    /* server_graph.c */
extern const srv_op srv__sample_ops[];   /* server_sample.c */
extern const srv_op srv__admin_ops[];    /* server_admin.c */
extern const srv_op srv__batch_ops[];    /* server_batch.c */

/* ---- the core (server.c) ------------------------------------------------ */

/* One log line, "2026-11-23T09:10:11.123Z gkv-server[pid] m0/s1: ...",
 * control characters replaced (a peer's bytes may be quoted). Nothing
 * under GKV_SERVER_QUIET. Any lock may be held. */
void srv__log(gkv_server *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Whether one more line of 'kind' may be logged (at most LOG_BURST per
 * LOG_WINDOW_MS, server.c); *dropped: the lines the window that just ended did not
 * log, for srv__log_say_dropped(). Caller holds s->mu. */
int  srv__log_take(gkv_server *s, int kind, uint64_t *dropped);
/* Says "N more <kind> were not logged" when dropped > 0. */
void srv__log_say_dropped(gkv_server *s, int kind, uint64_t dropped);
/* srv__log_take() and srv__log_say_dropped() in one. Takes s->mu. */
int  srv__log_allowed(gkv_server *s, int kind);

/* Decides that the server stops, saying why (the first reason wins).
 * Caller holds s->mu. */
void srv__stop_request(gkv_server *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Fails r: its status and message. Returns rc. */
gkv_err srv__fail(srv_req *r, gkv_err rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Builds r->out with encoder 'enc', run twice (count, then write).
 * GKV_OK, or GKV_ENOMEM with r failed. */
typedef void (*srv_enc_fn)(net_wr *w, const void *arg);
gkv_err srv__reply_build(srv_req *r, srv_enc_fn enc, const void *arg);
/* A reply of one integer, or of 'len' bytes. As srv__reply_build. */
gkv_err srv__reply_u8(srv_req *r, uint8_t v);
gkv_err srv__reply_u32(srv_req *r, uint32_t v);
gkv_err srv__reply_u64(srv_req *r, uint64_t v);
gkv_err srv__reply_bytes(srv_req *r, const void *p, size_t len);
/* Sends message m (header space included, payload 'len') on control
 * header 'ctl' as the reply to header 'rq'. Consumes m and ctl whatever
 * happens; never blocks (a raw REP socket drops a reply whose peer is
 * gone), so any lock may be held. */
void srv__send_reply(gkv_server *s, void *ctl, const net_hdr *rq,
                     gkv_err status, uint32_t rflags, void *m, size_t len);
/* An error reply: status and message. Consumes ctl. As srv__send_reply. */
void srv__send_error(gkv_server *s, void *ctl, const net_hdr *rq,
                     gkv_err status, uint32_t rflags, const char *msg);

/* ---- reply memory (server_rmem.c) -----------------------------------------
 *
 * Every reply message comes from srv__rmem_alloc() (through the two calls
 * below): its bytes count in srv__rmem_held() until nanomsg frees it
 * (sent, dropped, its connection or the socket closed, nn_freemsg), so
 * that the replies clients have not read are bounded in total. */

/* Whether this nanomsg's message layout is the one known (1.1.5), so that
 * replies can be counted; probed once a process. 0: 'why' says what did
 * not match (why may be NULL). Thread-safe. */
int srv__rmem_probe(char *why, size_t cap);
/* The probe's check of one message: 'data' (from nn_allocmsg(size, 0),
 * or a copy of its header and data) has the known chunk header, with a
 * free function in nanomsg's library. 0: 'why' says what differs. */
int srv__rmem_layout(const void *data, size_t size, char *why, size_t cap);
/* A message of 'bytes' (nn_allocmsg's, header space included), counted
 * until freed. NULL: out of memory, or *busy set: it is of at least
 * SRV_REPLY_SMALL bytes, the count is not 0 and would pass 'cap' (0: no
 * cap). When
 * the probe failed nothing is counted and nothing refused. Thread-safe. */
void *srv__rmem_alloc(size_t bytes, uint64_t cap, int *busy);
/* The bytes counted now: the process's replies not yet freed (servers in
 * one process share the count). */
uint64_t srv__rmem_held(void);
/* A reply message of 'payload' bytes (plus header space) to a request of
 * 'type': as srv__rmem_alloc, under s's cap when the type's reply carries
 * data to read (pull, samples, graph queries; control replies are never
 * refused), counting a refusal in s's stats. */
void *srv__reply_msg(gkv_server *s, unsigned type, size_t payload,
                     int *busy);
/* The same for request r: NULL with r failed, GKV_EBUSY (the cap, named
 * with what holds it) or GKV_ENOMEM. */
void *srv__reply_alloc(srv_req *r, size_t payload);
/* At open: the probe, s->rmem.cap from o (logged when not bounded). */
void srv__rmem_open(gkv_server *s, const gkv_server_opts *o);

/* p itself when 8-aligned, else a copy in *tmp (yours to gkv__free; NULL
 * when none was made). NULL: out of memory. Payload arrays are 8-aligned
 * within a message, but nanomsg does not promise where one starts. */
const void *srv__bytes_aligned(const unsigned char *p, size_t bytes,
                               void **tmp);
const uint64_t *srv__ids_aligned(const unsigned char *p, size_t n,
                                 uint64_t **tmp);

/* ---- sessions (server_sess.c); caller holds s->mu for each --------------- */

struct sess  *srv__sess_find(gkv_server *s, uint64_t id);
/* Group 'name'; made when missing and 'create' (NULL: out of memory). */
struct group *srv__group_find(gkv_server *s, const char *name, int create);
/* Drops the parked barrier request of 'session' in g, if any. */
void srv__unpark(struct group *g, uint64_t session);
/* Removes session i (its group loses a member, its parked barrier goes);
 * with 'may_stop', the server stops when no member is left and it does
 * not keep alive. 'how' is logged. */
void srv__sess_remove(gkv_server *s, size_t i, const char *how, int may_stop);
/* For a SRV_SESSION request: 1 when its session is live (r->group and
 * r->rank filled, its lease renewed); else 0, 'why' saying what became
 * of it. Takes s->mu. */
int  srv__sess_touch(gkv_server *s, srv_req *r, char *why, size_t cap);
/* Ends the sessions whose lease ran out. Takes s->mu. */
void srv__sess_expire(gkv_server *s);
/* At close: the tables, parked requests and sets. No request may run. */
void srv__sess_free_all(gkv_server *s);
/* SRV_ONCE around a handler, called by the core: 1 when r must not run
 * (a copy, answered as the first was, or its session ended: failed with
 * GKV_EPERM and NET_F_SESSION); 0 when it runs, and srv__once_end()
 * records its outcome after. Take s->mu; srv__once_begin() may wait
 * on sess.done_cv for a copy being applied. */
int  srv__once_begin(gkv_server *s, srv_req *r);
void srv__once_end(gkv_server *s, srv_req *r);

/* ---- tensors (server_kv.c) ---------------------------------------------- */

/* The wire form of a tensor's description. */
void srv__tensor_from_desc(net_tensor *t, const gkv_tensor_desc *d);
/* Whether tensor 'name' is one the server keeps in write-back mode. */
int  srv__wb_match(const gkv_server *s, const char *name);
/* At open: o->writeback checked and copied, and the store's matching
 * tensors put in write-back mode. Errors set gkv_net_errmsg(). */
gkv_err srv__wb_open(gkv_server *s, const gkv_server_opts *o, unsigned nserv);
/* At the stop: the last flush, logged. */
gkv_err srv__wb_last_flush(gkv_server *s);

/* ---- graph (server_graph.c, server_pw.c, server_admin.c) ----------------- */

/* At open: partition o->part_id, its sgraph, one sampler per worker, the
 * config's bytes. Errors set gkv_net_errmsg(). */
gkv_err srv__graph_open(gkv_server *s, const gkv_server_opts *o,
                        const gkv_ipconfig *cfg);
/* The edge-weight cache (server_pw.c). For every edge type that SAMPLE
 * request q samples (fanouts 'fan') with a feature: its weights in ew[e]
 * (ewlen[e] of them, from edge ewlo[e]) and its entry in held[e] (the
 * caller's array of net_ NULLs), its lock held shared until
 * srv__pw_release(). Features in write-back mode are read from RAM into
 * an entry of the request's own. GKV_OK, or r failed with nothing held. */
gkv_err srv__pw_take(gkv_server *s, srv_req *r, const net_sample_req *q,
                     const int *fan, struct pw **held, const float **ew,
                     int64_t *ewlen, int64_t *ewlo);
/* Lets go of what srv__pw_take() gave (held[e] NULL after; held may be
 * NULL). */
void srv__pw_release(gkv_server *s, struct pw **held, int net_);
/* At close: the cache's entries. No request may run. */
void srv__pw_free_all(gkv_server *s);
/* At the stop: parked barrier requests answered GKV_EINTR. Takes s->mu. */
void srv__barrier_fail_parked(gkv_server *s);

/* ---- batches (server_batch.c) ------------------------------------------- */

/* At open, for a server of a partition with a pool: the state of each of
 * the pool's threads, and what its peer client connects with (the
 * ip_config's path, the token: NULL when none). Errors set
 * gkv_net_errmsg(). */
gkv_err srv__batch_open(gkv_server *s, const gkv_server_opts *o,
                        const char *token);
/* At the stop, once the pool's threads are joined and while the workers
 * still run (a peer client is also a client of this server): the peer
 * clients leave (briefly waiting on servers that are gone). */
void srv__batch_stop(gkv_server *s);
/* At close: everything (srv__batch_stop first when the server ran). NULL
 * state is fine. */
void srv__batch_free(gkv_server *s);

#endif
