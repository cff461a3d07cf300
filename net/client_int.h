/* client_int.h - what the files of the client share (private to
 * net/client*.c; the public API is gkv_net.h).
 *
 * The client is a small core and message families, after NNG's src/core
 * and src/sp/protocol:
 *
 *   client.c          the core: the gkv_client object, its connections
 *                     (struct conn: a REQ socket per lane), and the
 *                     exchange (net__exchange): parts queued per server,
 *                     sent on free lanes, replies read as they come, the
 *                     re-send and timeout rules
 *   client_session.c  HELLO, HANDSHAKE, HEARTBEAT, LEAVE: connect, the
 *                     handshake (net__conn_open), the heartbeat, close
 *   client_kv.c       SCHEMA, PULL, PUSH, CREATE, DELETE, OPT_RESET: routes
 *                     by the tensors' ID ranges; describe
 *   client_graph.c    FIND_EDGES, IN/OUT_DEGREES, IN_SUBGRAPH: routing by
 *                     the partition book
 *   client_sample.c   SAMPLE: one hop (routing by the partition book,
 *                     pieces that fit a message, replies merged), and
 *                     sample_neighbors
 *   client_weights.c  hops weighted by position (edge_w arrays, out-edge
 *                     features): weights gathered by the client
 *   client_blocks.c   multi-layer blocks, relabelled as replies merge
 *   client_edge_batch.c  edge mini-batches composed on the client
 *   client_arena.c    the arena sampling results live in
 *   client_admin.c    BARRIER, STATS, SHUTDOWN; server info
 *   client_batch.c    SAMPLE_BATCH: whole mini-batches sampled on a
 *                     server, decoded into the arena
 *
 * A family sends a message type through one const struct part_ops of its
 * own (the encoder, the reply reader, the re-send rule) and parts whose
 * 'arg' points at its own payload: the core knows no message's fields.
 *
 * Locks. c->mu is "one call at a time": every public call holds it from
 * its checks of the client's state to its return, and every function
 * declared here expects it held unless its comment says otherwise (none
 * takes it). c->hb_mu guards conn.session (written) and the marking of
 * conn.stale against the heartbeat thread, which runs without c->mu and
 * touches only the conn fields marked as its own.
 */
#ifndef NET_CLIENT_INT_H
#define NET_CLIENT_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include "net/gkv_net.h"
#include "net/wire.h"

#define NLANES       2           /* requests in flight per server (lanes,
                                  * a REQ socket each): the server gathers
                                  * the next pull message while the last
                                  * one is on the wire. gkv-bench-net, 100k
                                  * rows of 512 B on loopback: 2.3 GB/s with
                                  * 2 lanes, 2.1 with 1 (the server has 2
                                  * worker threads by default). The code
                                  * runs any number. */
#define PART_SLACK   (64u << 10) /* header and field bytes beside the rows */
#define GMAX_IDS     (1u << 20)  /* graph requests: IDs per message at most */

/* ---- parts: one message of a call, to one server ------------------------ */

struct part;

/* What the core needs of a message type. Defined (const) by the family
 * that sends it. Every hook runs on the calling thread, inside
 * net__exchange, with c->mu held and c->hb_mu not held; none may block on
 * the network or call net__exchange (the exchange is not re-entrant). */
struct part_ops {
    uint16_t type;                 /* NET_* (wire.h) */
    unsigned flags;                /* PART_* */
    /* Writes p's payload; NULL: an empty payload. Called twice per send
     * (counting, then writing): must write the same bytes both times. */
    void (*enc)(net_wr *w, const struct part *p);
    /* Reads the payload of a successful reply, into where p->arg says;
     * NULL: nothing is read. An error is recorded (net__cfail naming
     * p->cn, or net__fail for the client's own GKV_ENOMEM) and returned;
     * one that is not GKV_ENOMEM closes the connection (a garbled
     * stream). */
    gkv_err (*done)(gkv_client *c, struct part *p, net_rd *rd);
    /* The error of a part whose server did not answer by the deadline,
     * recorded with net__cfail; NULL: "no reply to TYPE within N ms". */
    gkv_err (*timeout)(gkv_client *c, struct part *p);
};

/* Must not be executed twice (PUSH: "add" would add twice): after a
 * reply saying the session is unknown, the part is sent again only when
 * nanomsg cannot have delivered it before on a connection since lost
 * (lane_mark, client.c); else it fails with GKV_EIO. Requests that end
 * in the same state however often they run (CREATE, DELETE), or that
 * only read, go without it. */
#define PART_ONCE    0x1u
/* A reply saying the session is unknown is success: there is nothing to
 * do for a server that does not know us (LEAVE). */
#define PART_GONE_OK 0x2u

/* A family zeroes its parts, then sets cn, ops, arg (and retried). */
struct part {
    struct conn *cn;               /* the server it goes to */
    const struct part_ops *ops;
    void *arg;                     /* the family's payload: the request's
                                    * fields and where its reply goes.
                                    * The caller's; lives until
                                    * net__exchange returns; never read by
                                    * the core */
    int retried;                   /* in: 1 = no hand-shake and re-send
                                    * after a refused session */
    /* out, set by net__exchange */
    uint32_t rflags;               /* the reply's header flags */
    gkv_err rc;                    /* the part's outcome */
    /* the core's */
    struct part *next;             /* in its server's queue */
};

/* ---- the client object -------------------------------------------------- */

struct conn {
    unsigned machine, server;
    char addr[300];                /* "host:port" */
    char url[320];
    int v6;
    int sock[NLANES];              /* REQ sockets, -1: closed; lane 0
                                    * carries the handshake */
    int ready;                     /* hand-shaken (the session is good) */
    uint64_t session;              /* written under c->hb_mu */
    uint64_t next_req;
    net_ident id;
    int have_id;
    uint32_t part_id;              /* a graph server's partition */
    uint64_t book_len, book_sum;   /* and its config's size and XXH3 */
    atomic_int stale;              /* the heartbeat saw the session refused */
    /* the call in progress (the core's) */
    struct part *head, *tail;
    struct part *inflight[NLANES];
    uint64_t inflight_req[NLANES];
    /* for a request that must not run twice (PART_ONCE), the lane
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
    char host[NET_HOST_MAX + 1];
    int single;                    /* gkv_client_connect_addr: one server */
    /* clones (gkv_client_clone): what connected it */
    char *src;                     /* the ip_config's real path, or the
                                    * address (single) */
    unsigned hb_opt;               /* opts.heartbeat_ms */
    atomic_uint nclone;            /* clones made: each takes a rank */
    /* sessions (client_session.c) */
    uint64_t instance;             /* the job instance's hash; 0: none */
    int hs_legacy;                 /* a server refused the newer handshake
                                    * flags: send them no more */
    /* barriers (client_admin.c; the handshake reads bar_unsure) */
    uint64_t barrier_seq;
    int bar_unsure;                /* the last barrier failed: its request
                                    * may still count (see net__conn_open) */
    /* routes (client_kv.c) */
    int schema_stale;              /* a shape error: fetch the schemas
                                    * again before the next routed call */
    struct route *rt;              /* cache, dropped when a schema changes */
    size_t nrt;
    /* graph servers: the partition config (its bytes as the first server
     * sent them, and the book read from them) */
    unsigned char *book_json;
    uint64_t book_len, book_sum;
    gkv_pbook *book;
    /* sampling (client_arena.c, client_blocks.c, client_edge_batch.c):
     * the results of the last sampling call, reused by the next one */
    gkv__arena ar;
    int32_t **mk;                  /* sample_blocks' relabelling markers */
    int nmk;
    int64_t *eb;                   /* the last edge batch's pairs */
    size_t ebcap;
    /* the exchange in progress (the core's): the first failed part's
     * message */
    struct part *x_base;
    size_t x_first;
    char x_msg[1280];
    /* heartbeat (client_session.c) */
    pthread_mutex_t hb_mu;
    pthread_cond_t hb_cv;
    pthread_t hb_thr;
    int hb_running, hb_stop;
    unsigned hb_ms;
};

/* ---- the core (client.c) ------------------------------------------------ */

/* The monotonic clock in ms, 'ms' from now: a call's deadline. Any
 * thread. */
uint64_t net__deadline(uint64_t ms);
/* ms left until 'deadline' (0 once past, at most INT_MAX). Any thread. */
int      net__left_ms(uint64_t deadline);

/* Records the error of a call, naming cn's server, and returns rc. */
gkv_err  net__cfail(struct conn *cn, gkv_err rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

int      net__sockopt(int sock, int level, int opt, int v);
/* A new REQ socket connected to cn's server with the client's options
 * (never re-sends by itself), or -1 with nn_errno() set. The caller owns
 * it. Any thread (reads only fields set at connect). */
int      net__req_socket(gkv_client *c, struct conn *cn);
/* Closes cn's lane sockets and marks it not ready (the next part
 * hand-shakes first); the session stays with the heartbeat. */
void     net__conn_break(struct conn *cn);
/* Message 'type' (header and the payload enc writes from arg) in a
 * buffer nn_send(NN_MSG) takes over; NULL when out of memory. Any
 * thread. */
void    *net__msg_make(gkv_client *c, uint16_t type, uint64_t req_id,
                       uint64_t session, void (*enc)(net_wr *, const void *),
                       const void *arg, size_t *len);
/* One blocking round trip on cn's lane 0 (hello and handshake). On
 * GKV_OK *reply is an NN_MSG buffer the caller frees and *rd reads its
 * payload; on error *reply is NULL and the error is recorded. */
gkv_err  net__roundtrip(gkv_client *c, struct conn *cn, uint16_t type,
                        uint64_t session, void (*enc)(net_wr *, const void *),
                        const void *arg, uint64_t deadline, void **reply,
                        net_rd *rd);

/* Runs parts[0 .. n) to completion or the deadline: each goes to its
 * p->cn (hand-shaking first when the session is not good), the parts of
 * one server in order on its lanes, the servers in parallel. Sets every
 * part's rc and rflags. Returns the failure of the earliest failed part
 * (in request order), with its message; GKV_OK clears the message. The
 * parts and their payloads stay the caller's. */
gkv_err  net__exchange(gkv_client *c, struct part *parts, size_t n,
                       uint64_t deadline);
/* After an answer of GKV_EBUSY (the server did nothing: its batch queue
 * or its reply memory was full): waits *ms, doubling it up to 640 ms for
 * the next time, and returns 1 when 'deadline' leaves time to ask again;
 * else returns 0 at once. */
int      net__busy_again(int *ms, uint64_t deadline);
/* net__exchange(), asked again while the answer is GKV_EBUSY and the
 * deadline leaves time: for requests that read only (pulls), so that
 * asking again cannot apply anything twice. */
gkv_err  net__exchange_reads(gkv_client *c, struct part *parts, size_t n,
                             uint64_t deadline);
/* A part_ops.done for replies of one byte (an acknowledgement): checks
 * the payload is one byte and reads nothing from it. */
gkv_err  net__done_u8(gkv_client *c, struct part *p, net_rd *rd);
/* A ready (or openable) server of machine m: the first one, else the
 * next in round-robin order. */
struct conn *net__mach_conn(gkv_client *c, size_t m);
/* The payload bytes one message to machine m may carry (at most 'most'):
 * the lower of its servers' and this client's limits, less PART_SLACK. */
size_t   net__part_cap(gkv_client *c, size_t m, uint64_t most);
/* Frees c and all it holds (stops the heartbeat first); safe on a
 * half-built client and on NULL. c->mu not held. */
void     net__client_free(gkv_client *c);

/* ---- sessions (client_session.c) ---------------------------------------- */

/* Opens cn's lane 0 socket if needed and hand-shakes: hello (a nonce),
 * then the proof. Learns the identity and the machine's schema. On error
 * cn is broken (net__conn_break) and the error recorded. */
gkv_err  net__conn_open(gkv_client *c, struct conn *cn, uint64_t deadline);
/* Stops and joins the heartbeat thread when it runs (c->mu held or
 * not: the thread never takes it); takes c->hb_mu. */
void     net__hb_stop(gkv_client *c);

/* ---- routes (client_kv.c) ----------------------------------------------- */

/* Stores a schema for cn's machine (taking *sc over) and drops the route
 * cache. */
void     net__schema_set(gkv_client *c, struct conn *cn, net_schema *sc);
void     net__route_drop(gkv_client *c);
/* The route of 'name' (a pointer into the cache: valid until the next
 * call that changes a schema or adds a route), fetching the schemas again
 * when they are stale or no server is known to hold it. */
gkv_err  net__route_fresh(gkv_client *c, const char *name, uint64_t deadline,
                          const struct route **out);
/* gkv_client_pull() with c->mu held; r: the tensor's route when the
 * caller has just looked it up, else NULL. */
gkv_err  net__pull_locked(gkv_client *c, const char *name,
                          const struct route *r, const uint64_t *ids,
                          size_t n, void *dst, size_t dst_len);

/* The rows of one tensor a batch collects (gkv_client_sample_batch, but
 * with GKV_BATCH_RELAY): ids[0 .. n) into dst (n x the route's row bytes), split
 * by the machine holding each (net__rowjob_split: the four arrays, freed
 * by net__rowjob_free, also after an error). */
struct rowjob {
    const char *name;
    struct route rt;               /* a copy (the cache may be dropped by
                                    * a hand-shake meanwhile); rt.sp NULL:
                                    * no server known to hold it */
    const uint64_t *ids;
    size_t n;
    unsigned char *dst;
    unsigned *mach;
    size_t *count, *start, *pos;
};
/* A copy of j->name's route into j->rt if the cache has it (else rt.sp
 * stays NULL); never fetches. Errors: GKV_ENOMEM. */
gkv_err  net__rowjob_route(gkv_client *c, struct rowjob *j);
/* j's IDs split by machine. Errors: GKV_ERANGE (an ID no server holds,
 * named), GKV_ENOMEM. */
gkv_err  net__rowjob_split(gkv_client *c, struct rowjob *j);
/* The rows of j[0 .. nj) (split), pulled in one exchange straight into
 * place (every machine's servers in parallel; a local store read here). */
gkv_err  net__rowjob_pull(gkv_client *c, const struct rowjob *j, size_t nj,
                          uint64_t deadline);
void     net__rowjob_free(struct rowjob *j);

/* ---- graph requests (client_graph.c) ------------------------------------ */

/* GKV_ENOTSUP, naming 'what', unless the servers serve a graph and the
 * client has the job's ip_config. */
gkv_err  net__need_book(gkv_client *c, const char *what);
/* Into how many slices a machine's 'cnt' IDs are cut, 'per' IDs a
 * message at most (1 .. GMAX_IDS). */
size_t   net__gpieces(gkv_client *c, size_t cnt, size_t per);
/* The distinct values of ids[0..n) in order of first appearance into
 * *uniq (*nu of them), and (*map)[i] = the index of ids[i] there; the
 * caller frees both (gkv__free). */
gkv_err  net__dedup(const int64_t *ids, size_t n, int64_t **uniq, size_t *nu,
                    size_t **map);
/* Which machine owns each ID (of node type ty, or edge type ty when
 * by_edge), and the positions of each machine's IDs in request order:
 * (*posout)[start[m] .. start[m] + count[m]), *posout the caller's. */
gkv_err  net__graph_route(gkv_client *c, const char *what, int ty,
                          int by_edge, const int64_t *ids, size_t n,
                          size_t *count, size_t *start, size_t **posout);
/* gkv_client_find_edges with c->mu held. */
gkv_err  net__find_edges_locked(gkv_client *c, int etype,
                                const int64_t *eids, size_t n, int64_t *src,
                                int64_t *dst);

/* ---- sampling (client_sample.c, client_arena.c, client_weights.c,
 * client_blocks.c, client_edge_batch.c) ---------------------------------- */

/* The arena (client_arena.c). Frees the sampling state (arena, markers,
 * edge-batch pairs). */
void     net__sample_free(gkv_client *c);
/* Empties the arena (at the start of a sampling call): what the last call
 * returned is overwritten by this one's results. */
void     net__arena_reset(gkv_client *c);
/* 'bytes' of memory, 16-aligned, that live until the next sampling call's
 * net__arena_reset; NULL when out of memory. */
void    *net__arena_alloc(gkv_client *c, size_t bytes);
/* Copies the inputs of a sampling call (checked) that point into the arena
 * (the last call's results fed back) into *own (gkv__malloc'd, the
 * caller's to free; NULL when nothing needed copying), before the call
 * empties the arena: *seeds and *opts then point at the copies (*opts at
 * *obuf). */
gkv_err  net__inputs_own(gkv_client *c, const int64_t *const **seeds,
                         const size_t *nseeds, const gkv_sample_opts **opts,
                         gkv_sample_opts *obuf, void **own);

/* The relabelling of sample_blocks, done while merging a hop: the hop's
 * seeds (distinct) are the block's destination nodes; every neighbour
 * gets a local ID in order of first appearance. */
struct relab {
    int32_t **mk;              /* [nnt] markers: local ID + 1, 0 = none */
    int64_t **ids;             /* [nnt] out: the block's node lists */
    size_t *nsrc;              /* [nnt] out: their lengths (markers set) */
    gkv_sample_edges *be;      /* [net] out: local src, dst and eid */
};

/* The excluded edges of type e a request carries (in-process ignores
 * exclude_n without exclude, and exclude_n[e] with exclude[e] NULL). */
static inline size_t
net__ex_count(const gkv_sample_opts *o, int e)
{
    return o->exclude != NULL && o->exclude[e] != NULL ? o->exclude_n[e] : 0;
}

/* Checks the arguments of sampling call 'what' (messages name it). */
gkv_err  net__sample_args(gkv_client *c, const char *what,
                          const int64_t *const *seeds, const size_t *nseeds,
                          const int *fan, int nfan, int nlayers,
                          const gkv_sample_opts *o);
/* A hop's seeds of each of the nnt types, each once in order of first
 * appearance: seeds_in itself when 'known' distinct (or empty), else a
 * copy in useeds[t] with smap[t] mapping each input to its place (both
 * the caller's to free). */
gkv_err  net__seeds_distinct(int nnt, int known,
                             const int64_t *const *seeds_in,
                             const size_t *nseeds_in, const int64_t **seeds,
                             size_t *nseeds, int64_t **useeds, size_t **smap);
struct graph__wpos;             /* graph/graph_seam.h */
/* One hop through the servers (client_sample.c). Without rl: the edges
 * into out[0 .. net) (arena memory), repeated seeds asked once. With rl
 * (the seeds distinct, out unused): relabelled into rl's block. wp: NULL,
 * or per edge type weights by position, indexed by the hop's distinct
 * seeds (in order of first appearance), sent with each piece. */
gkv_err  net__hop_once(gkv_client *c, const int64_t *const *seeds_in,
                       const size_t *nseeds_in, const int *fan, int nfan,
                       int layer, const gkv_sample_opts *o, struct relab *rl,
                       gkv_sample_edges *out, const struct graph__wpos *wp);
/* One hop as net__hop_once, with the weights the servers cannot find
 * themselves (an edge_w array, an edge feature along out-edges) sent by
 * position (client_weights.c). */
gkv_err  net__sample_hop(gkv_client *c, const int64_t *const *seeds_in,
                         const size_t *nseeds_in, const int *fan, int nfan,
                         int layer, const gkv_sample_opts *o, struct relab *rl,
                         gkv_sample_edges *out);
/* gkv_client_sample_blocks with c->mu held, blocks[0 .. nlayers) zeroed
 * (client_blocks.c; the edge batch calls it inside its own call). */
gkv_err  net__blocks_locked(gkv_client *c, const int64_t *const *seeds,
                            const size_t *nseeds, const int *fanouts, int nfan,
                            int nlayers, const gkv_sample_opts *opts,
                            gkv_block *blocks);

#endif /* NET_CLIENT_INT_H */
