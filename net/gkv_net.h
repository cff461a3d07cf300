/* gkv_net.h - gkv over the network: servers that serve a store to many
 * clients, and the client library that talks to them (doc/PROTOCOL.md
 * specifies the bytes).
 *
 * A job's machines are listed in an ip_config file, one line per machine
 * ("IP [PORT]", default port 30050). Each machine runs num_servers server
 * processes; server k listens on PORT + k, and all servers of a machine
 * share one store directory (readers everywhere, writes serialised by the
 * store). A client connects to every server, learns what each holds from
 * its handshake (the schema: tensors with dtype, shape and ID range), and
 * routes every pull and push by those ranges.
 *
 * Errors: every call returns GKV_OK or a gkv_err; gkv_errmsg() (or its
 * alias gkv_net_errmsg()) gives the detail of the calling thread's last
 * failed call, naming the server ("server 127.0.0.1:30051 (machine 0,
 * server 1): tensor 'feat': ID 99 outside [0, 50)"), the file and line of
 * a bad ip_config, etc.
 */
#ifndef GKV_NET_H
#define GKV_NET_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "gkv_err.h"
#include "gkv_kv.h"
#include "gkv_part.h"
#include "gkv_sample.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GKV_NET_PROTO       2          /* wire protocol version */
#define GKV_NET_PORT        30050      /* ip_config's default port (DGL's) */
#define GKV_NET_GROUP_MAX   63         /* bytes in a group name */
#define GKV_NET_MAX_MSG     (1ull << 30) /* default payload bound: 1 GiB */
#define GKV_NET_MAX_REPLY_MEM (2ull << 30) /* default max_reply_mem: 2 GiB */

/* gkv_errmsg(): the detail of this thread's last failed call ("" after a
 * success). Valid until the thread's next gkv call. */
GKV_API const char *gkv_net_errmsg(void);

/* ---- ip_config --------------------------------------------------------- */

typedef struct gkv_ipconfig gkv_ipconfig;   /* opaque */

typedef struct gkv_machine {
    char     host[256];   /* as written: an IPv4/IPv6 address or a host name */
    unsigned port;        /* base port: server k listens on port + k */
    unsigned line;        /* line in the file, for messages */
} gkv_machine;

/* Reads an ip_config: one machine per line, "IP [PORT]"; blank lines and
 * '#' comments (whole-line or trailing) are allowed. A bad line fails the
 * whole file with GKV_EFORMAT and a message naming file:line; so does a
 * machine listed twice or a file with no machine. On GKV_OK *out is yours
 * until gkv_ipconfig_free(); on error *out is NULL.
 * Errors: GKV_ENOENT, GKV_EPERM, GKV_EIO, GKV_EFORMAT, GKV_ENOMEM. */
GKV_API gkv_err gkv_ipconfig_load(gkv_ipconfig **out, const char *path);
GKV_API void    gkv_ipconfig_free(gkv_ipconfig *c);        /* NULL is fine */
GKV_API size_t  gkv_ipconfig_count(const gkv_ipconfig *c);
/* Machine i (0-based, file order); NULL when i is out of range. Borrowed:
 * valid until gkv_ipconfig_free(). */
GKV_API const gkv_machine *gkv_ipconfig_machine(const gkv_ipconfig *c,
                                                size_t i);
/* Checks that num_servers servers per machine fit: ports up to 65535, and
 * no two machines on one host with overlapping port ranges.
 * Errors: GKV_EINVAL (naming both lines). */
GKV_API gkv_err gkv_ipconfig_check(const gkv_ipconfig *c, unsigned num_servers);
/* The machine whose address is one of this host's (by getifaddrs and name
 * resolution). Errors: GKV_ENOTFOUND (none), GKV_EINVAL (several: the
 * caller must say which). */
GKV_API gkv_err gkv_ipconfig_find_local(const gkv_ipconfig *c, size_t *machine);
/* Whether 'host' (an address or a name) is this host: 1 when an address
 * it resolves to is one of this host's interfaces', else 0. 'ifs' is the
 * getifaddrs() list to compare with (declared in <ifaddrs.h>; the caller
 * keeps it), or NULL: the function reads and frees its own. With
 * 'any_loopback', any 127.0.0.0/8 address counts as this host's too (a
 * name /etc/hosts maps to 127.0.1.1). It has no error: a name that does
 * not resolve, or a failed getifaddrs(), gives 0, and gkv_net_errmsg() is
 * "" after it, as after any success.
 * Thread-safe: yes (getaddrinfo and getifaddrs are); it may block on
 * name resolution. */
struct ifaddrs;
GKV_API int gkv_net_host_is_local(const char *host, const struct ifaddrs *ifs,
                                  int any_loopback);

/* ---- tokens -------------------------------------------------------------- */

#define GKV_TOKEN_MAX 4096   /* bytes of a token */
#define GKV_TOKEN_MIN 16     /* a shorter token is refused (server, client,
                              * gkv-launch): gkv-launch writes 32 random
                              * bytes, base64 */

/* Reads the job's secret token from 'path' into buf (cap bytes, at least
 * 2), NUL-terminated, trailing whitespace (a final newline) removed. The
 * file must be a regular file that neither group nor others may read or
 * write (mode 0600 or 0400): otherwise GKV_EPERM with a message saying to
 * chmod 600 it. A token shorter than GKV_TOKEN_MIN bytes (an empty one
 * too) is GKV_EINVAL. Errors also: GKV_ENOENT, GKV_EIO, GKV_EINVAL (longer
 * than cap - 1 or GKV_TOKEN_MAX bytes). */
GKV_API gkv_err gkv_token_load(const char *path, char *buf, size_t cap);

/* ---- the server -------------------------------------------------------- */

typedef struct gkv_server gkv_server;   /* opaque */

#define GKV_SERVER_KEEP_ALIVE  0x01u  /* persistent: do not stop when the
                                       * last client leaves */
#define GKV_SERVER_BIND_ANY    0x02u  /* listen on every interface, not only
                                       * the ip_config address */
#define GKV_SERVER_CREATE      0x04u  /* create the store if missing */
#define GKV_SERVER_NOSYNC      0x08u  /* open the store with GKV_NOSYNC:
                                       * pushes survive a process crash,
                                       * not an OS crash */
#define GKV_SERVER_NO_PREFAULT 0x10u  /* skip gkv_store_prefault() at start
                                       * (and the check of the chunks) */
#define GKV_SERVER_QUIET       0x20u  /* no log lines */
#define GKV_SERVER_INSECURE_NO_TOKEN 0x40u /* without token_file, listen on
                                       * a non-loopback address (or every
                                       * interface) all the same: anyone
                                       * who reaches the port may read,
                                       * write and delete tensors and stop
                                       * the server. Without this flag such
                                       * a server is refused (GKV_EPERM) */
#define GKV_SERVER_NO_VERIFY_DATA 0x80u /* at start, pre-fault the map
                                       * without checking every chunk's
                                       * checksum (gkv_store_verify); by
                                       * default a store with a bad chunk
                                       * is refused (GKV_ECORRUPT) */

typedef struct gkv_server_opts {
    const char *store;        /* store directory (required unless
                               * part_config is given) */
    const char *part_config;  /* serve a partition: the partition config
                               * (gkv_part.h); NULL: a plain store */
    int      part_id;         /* with part_config: the partition served */
    const char *ip_config;    /* ip_config file (required) */
    int      machine;         /* this machine's line, 0-based; -1: the line
                               * whose address is this host's */
    unsigned server_id;       /* which server of the machine: 0..num-1 */
    unsigned num_servers;     /* servers per machine; 0 = 1 */
    unsigned threads;         /* worker threads; 0 = 2 */
    const char *token_file;   /* NULL: no authentication, allowed on a
                               * loopback address only (else see
                               * GKV_SERVER_INSECURE_NO_TOKEN) */
    const char *server_name;  /* persistent server's name; NULL = "" */
    unsigned flags;           /* GKV_SERVER_* */
    unsigned lease_ms;        /* heartbeat timeout: a client silent this
                               * long is gone; 0 = 30000 */
    uint64_t max_msg;         /* largest request payload; 0 = 1 GiB */
    FILE    *log;             /* log lines; NULL = stderr */
    /* Tensors kept in write-back mode (gkv_writeback_start: in RAM, pushes
     * at memory speed, written every flush_ms): a NULL-terminated list of
     * names, each of which may end in '*' to match a prefix ("emb*", or
     * "*" for every tensor), applied at start and to tensors clients
     * create. Needs one server per machine (each process would keep its
     * own copy). Pulls through the server see every push; a client's local
     * reads (GKV_CLIENT_LOCAL_READ) are turned off for such a server. NULL:
     * none. */
    const char *const *writeback;
    unsigned flush_ms;        /* write-back flush interval; 0 = 10 */
    /* Without GKV_SERVER_KEEP_ALIVE: the members the job has (DGL's
     * num_clients). The server stops when its last member leaves only once
     * this many distinct members (group, rank) have joined, so a client
     * that connects after the first ones left still finds it. 0 = stop when
     * the members joined so far have left. */
    unsigned num_clients;
    /* Sessions one group may hold at once (members and observers); a
     * handshake past it is refused (GKV_EBUSY), so that one group cannot
     * take every session of the server. 0 = 16384 (a quarter of the
     * 65536 a server holds); at most 65536. */
    unsigned max_group_sessions;
    /* A partition server's threads answering SAMPLE_BATCH
     * (gkv_client_sample_batch), beside the workers: batches wait on
     * other servers, and run on threads of their own so that the workers
     * always answer those servers. Each keeps a peer client and 4 bytes a
     * node of the graph for relabelling. 0 = threads; at most 256. */
    unsigned batch_threads;
    /* Bytes of replies the server may hold at once, handed to nanomsg and
     * not yet sent (a client that does not read its replies keeps its
     * last one for as long as it stays connected). A reply carrying data
     * to read (pull, samples, graph queries) of 64 KiB or more that would
     * pass it is refused at once with GKV_EBUSY, before the work where
     * the size is known up front (pulls); control replies, smaller ones
     * and any reply while nothing is held always go. 0 = 2 GiB
     * (GKV_NET_MAX_REPLY_MEM); at least max_msg + 48. */
    uint64_t max_reply_mem;
} gkv_server_opts;

/* Opens the store, pre-faults its map, reads the token and binds the
 * listening socket; serves nothing until gkv_server_run(). On GKV_OK *out
 * is yours until gkv_server_close(); on error *out is NULL.
 * Errors: GKV_EINVAL (options, ip_config check), GKV_EFORMAT (ip_config),
 * GKV_EPERM (token file mode; no token on a non-loopback address
 * without GKV_SERVER_INSECURE_NO_TOKEN), GKV_ENOENT (store or file missing),
 * GKV_EBUSY (address in use), GKV_EIO, GKV_ENOMEM. */
GKV_API gkv_err gkv_server_open(gkv_server **out, const gkv_server_opts *o);

/* Serves on the calling thread (plus the worker threads) until the server
 * stops: gkv_server_stop(), a SHUTDOWN request, or the last client leaving
 * (explicitly or by lease expiry) without GKV_SERVER_KEEP_ALIVE, once
 * num_clients members have joined. In-flight
 * requests finish, the store is synced. Returns GKV_OK on a normal stop. */
GKV_API gkv_err gkv_server_run(gkv_server *s);

/* Asks a running server to stop. Async-signal-safe (only sets a flag): a
 * SIGTERM handler may call it. */
GKV_API void    gkv_server_stop(gkv_server *s);

/* The served store, e.g. to register push handlers before run. Borrowed. */
GKV_API gkv_store  *gkv_server_store(gkv_server *s);
/* "tcp://127.0.0.1:30050": where it listens. Borrowed. */
GKV_API const char *gkv_server_url(const gkv_server *s);

/* Closes the socket and the store. NULL is fine. */
GKV_API void    gkv_server_close(gkv_server *s);

/* ---- a connection gate (the gkv-server program's) ------------------------
 * nanomsg neither tells a server a peer's address nor bounds what one
 * connection makes it buffer before the peer authenticates. gkv-server
 * watches its accepted TCP connections from below nanomsg (it interposes
 * accept, recvmsg and close: tools/gkv-server/gate.c) and registers this
 * hook so that the server can ask which connection carried a handshake and
 * tell which sessions are live. A program that embeds gkv_server_open()
 * has no gate unless it brings one: then no peer address is known and
 * sessions are capped per group only. */

#define GKV_PRESESS_MAX  1024   /* payload bytes a request may carry before
                                 * its sender has a session: a handshake's
                                 * are about 180 at most */
#define GKV_PEER_ADDR_MAX 48    /* a peer address as text, with its NUL */
#define GKV_PEER_SESSIONS 4096  /* default cap of sessions per address */

typedef struct gkv_server_gate {
    void *ctx;
    /* Which connection carried the handshake whose digest is 'digest': the
     * XXH3-64 (seed 0) of its SP frame's payload, that is its request id (4
     * bytes, as the REQ peer sent it) and then the gkv message (header and
     * payload). Returns how many connections carried it; on 1 it writes
     * that connection's peer address ("IP", at most GKV_PEER_ADDR_MAX
     * bytes with the NUL) to addr and, when 'session' is not 0 (the
     * handshake was accepted and granted that session), marks the
     * connection authenticated by that session and forgets the digest.
     * Called with the server's lock held: must not block or call the
     * server. */
    int  (*link)(void *ctx, uint64_t digest, char *addr, uint64_t session);
    /* Session 'id' of peer address 'addr' ("" when unknown) was granted
     * (live 1) or ended (live 0). A connection from that address whose
     * request carries a live session of it is authenticated by it (a
     * client's second lane, a reconnected socket), up to a cap per address;
     * a connection is no longer authenticated once the session that
     * authenticated it ended. Called as link. */
    void (*session)(void *ctx, uint64_t id, const char *addr, int live);
    unsigned max_peer_sessions; /* sessions one peer address may hold
                                 * (members and observers); past it a
                                 * handshake is refused (GKV_EBUSY).
                                 * 0 = GKV_PEER_SESSIONS */
} gkv_server_gate;

/* Registers gate g (borrowed until gkv_server_close) with server s, before
 * gkv_server_run(). From then on a handshake is accepted only when
 * g->link() finds the one connection that carried it (else GKV_EPERM:
 * its bytes came on no connection or on several, a replay), and the
 * session gets that connection's address: in the join and leave log
 * lines, and counted against max_peer_sessions. Errors: GKV_EINVAL (NULL,
 * a missing function, or the server runs). */
GKV_API gkv_err gkv_server_set_gate(gkv_server *s, const gkv_server_gate *g);

/* ---- the client -------------------------------------------------------- */

typedef struct gkv_client gkv_client;   /* opaque */

#define GKV_CLIENT_CHECKSUM     0x01u  /* XXH3 of every payload, checked by
                                        * both ends */
#define GKV_CLIENT_LOCAL_READ   0x02u  /* pull in-process from a store on
                                        * this host (read-only); one this
                                        * process has open already (one
                                        * handle per store and process) is
                                        * read through its server, and one
                                        * the client opened cannot be
                                        * opened again here until it closes
                                        * (GKV_EBUSY): open yours first */
#define GKV_CLIENT_NO_HEARTBEAT 0x04u  /* no heartbeat thread (the lease then
                                        * lapses when the client is idle) */
#define GKV_CLIENT_OBSERVER     0x08u  /* join as an observer (a tool such
                                        * as kvctl): its leaving never stops
                                        * a server, and a server stops when
                                        * its last non-observer leaves */

typedef struct gkv_client_opts {
    int      timeout_ms;      /* deadline of every call; 0 = 10000 */
    unsigned num_servers;     /* per machine; 0 = learn at handshake */
    unsigned group_size;      /* clients in this group, for barriers;
                               * 0 = barriers fail with GKV_EINVAL */
    unsigned flags;           /* GKV_CLIENT_* */
    unsigned heartbeat_ms;    /* 0 = a third of the server's lease */
    uint64_t max_msg;         /* largest payload to send or accept;
                               * 0 = 1 GiB; requests are split to fit
                               * (handshake and schema replies are taken
                               * up to 80 MiB whatever it says) */
    const char *instance;     /* this run of the job, the same string in
                               * all its clients (gkv-launch sets
                               * $GKV_JOB_INSTANCE, fresh each launch);
                               * NULL = $GKV_JOB_INSTANCE, or none. A
                               * member joining with another instance than
                               * its group's members on a server replaces
                               * them: the sessions (and parked barriers)
                               * of a killed earlier run of a job with the
                               * same group name cannot count for this
                               * one. Members never give it to observers. */
} gkv_client_opts;

/* Connects to every server of 'ip_config' (machines x num_servers) and
 * hand-shakes with each as member 'rank' of 'group' (1..63 printable
 * characters), proving knowledge of 'token' (NULL: none): the secret
 * itself, which gkv_token_load() reads from a token file such as
 * $GKV_TOKEN_FILE (trailing blanks and newlines are ignored, as in the
 * file; at least GKV_TOKEN_MIN bytes, else GKV_EINVAL). 'opts' may be
 * NULL. On GKV_OK *out is yours until gkv_client_close(); on error *out is
 * NULL and gkv_net_errmsg() names the server that failed.
 * Errors: GKV_ETIMEDOUT (a server did not answer), GKV_EPERM (rejected),
 * GKV_EVERSION, GKV_EPROTO, GKV_EFORMAT (ip_config), GKV_EINVAL,
 * GKV_ENOMEM. */
GKV_API gkv_err gkv_client_connect(gkv_client **out, const char *ip_config,
                                   const char *token, const char *group,
                                   uint32_t rank, const gkv_client_opts *opts);

/* Connects to the one server at 'addr' ("HOST:PORT" or "[IPv6]:PORT"),
 * whichever server of whichever machine it is, as gkv_client_connect()
 * does with an ip_config (same token, group and rank rules). The client
 * sees that server only: its tensors with the ID ranges it holds; graph
 * calls are not routed (gkv_client_pbook() still gives the book). Used by
 * tools (kvctl --server), usually with GKV_CLIENT_OBSERVER.
 * Errors: as gkv_client_connect(), GKV_EINVAL (a bad address). */
GKV_API gkv_err gkv_client_connect_addr(gkv_client **out, const char *addr,
                                        const char *token, const char *group,
                                        uint32_t rank,
                                        const gkv_client_opts *opts);

/* Leaves the group on every server it holds a session with, also one a
 * call timed out on (over a fresh socket, waiting at most 1 s when only
 * such servers are left; one that still does not answer forgets the
 * client when its lease expires; one the heartbeat found restarted never
 * knew it, and is not joined just to be left), then frees the client.
 * A server that does not keep alive stops when its last client is gone.
 * Returns the first error of the leave; the client is freed either way.
 * NULL is fine. */
GKV_API gkv_err gkv_client_close(gkv_client *c);

/* Thread-safety of the calls below: a client may be shared by threads;
 * its calls are serialised (use one client per thread for parallelism).
 * Every call finishes within the timeout: a dead or unreachable server is
 * GKV_ETIMEDOUT naming it (host:port), and the next call hand-shakes with
 * it again (a restarted server is picked up). */

/* Servers known: machines x num_servers, machine-major. */
GKV_API size_t  gkv_client_nservers(const gkv_client *c);

typedef struct gkv_server_info {
    char     addr[300];       /* "host:port" */
    char     host[256];       /* the server's own host name */
    char     name[256];       /* --server-name */
    char     store[4096];     /* its store directory */
    char     version[32];     /* gkv version */
    unsigned machine, server_id, num_servers;
    uint32_t pid;
    unsigned lease_ms;
    uint64_t max_msg;
    int      keep_alive, auth, connected;
} gkv_server_info;

/* What server i said at its last handshake. Errors: GKV_EINVAL. */
GKV_API gkv_err gkv_client_server_info(gkv_client *c, size_t i,
                                       gkv_server_info *out);

/* Tensor 'name' as the whole job sees it: lo/hi span every server's range,
 * nchunks and id are 0. Errors: GKV_ENOTFOUND. */
GKV_API gkv_err gkv_client_tensor_info(gkv_client *c, const char *name,
                                       gkv_tensor_desc *out);
/* All tensors of the job in name order; free *out with gkv_free(). With
 * graph servers, each partition's own adjacency (csc/..., csr/...: rows at
 * positions local to that partition, not global IDs) is not a tensor of
 * the job and is left out (kvctl --server lists one server's). */
GKV_API gkv_err gkv_client_tensor_list(gkv_client *c, gkv_tensor_desc **out,
                                       size_t *n);
/* Fetches every server's schema again (after another client created or
 * deleted tensors; pulls and pushes of an unknown name do it themselves,
 * and the call after one that failed with GKV_ESHAPE, which is what a
 * tensor another client replaced with another shape gives). */
GKV_API gkv_err gkv_client_refresh(gkv_client *c);

/* Gathers rows ids[0..n) of tensor 'name' into dst (dst_len = n x
 * row_bytes, row i at dst + i x row_bytes), from every server that holds
 * some of them, in parallel; servers of one machine share the work.
 * A server whose reply memory is full (max_reply_mem, clients not
 * reading) answers GKV_EBUSY having read nothing; the call asks again
 * with backoff (10 ms doubling to 640 ms) while its timeout lasts.
 * Errors: GKV_ENOTFOUND, GKV_ERANGE (an ID no server holds, named),
 * GKV_ESHAPE (dst_len), GKV_ETIMEDOUT, GKV_EBUSY (the timeout passed
 * while the server's reply memory stayed full), GKV_EPROTO, server
 * errors. */
GKV_API gkv_err gkv_client_pull(gkv_client *c, const char *name,
                                const uint64_t *ids, size_t n,
                                void *dst, size_t dst_len);

/* Scatters rows to their owners with the handler of 'args' (NULL: assign;
 * see gkv_tensor_push); returns when every owner has committed. A
 * machine's part goes in messages within the message limit (the smaller
 * max_msg of this client and the server; 64 MiB at most, but for one ID
 * whose copies alone need more, up to that limit), split between IDs: all occurrences of one ID go in one message, in the order given,
 * which one server applies in one transaction, so duplicates combine as
 * in gkv_tensor_push (the rows end as after one gkv_tensor_push). A
 * failure may leave other messages applied: the error names the server.
 * Errors: as gkv_client_pull, and GKV_EHANDLER, GKV_EMAPFULL, GKV_EINVAL
 * (the occurrences of one ID, named, are more than one message may carry;
 * unknown args->flags, before anything is sent),
 * GKV_EIO (the server restarted while the push was in flight: it may or
 * may not have been applied there, and it was not sent again). */
GKV_API gkv_err gkv_client_push(gkv_client *c, const char *name,
                                const uint64_t *ids, size_t n,
                                const void *rows, size_t rows_len,
                                const gkv_push_args *args);

/* Creates tensor 'name'. machine < 0: its range [lo, hi) is split, one
 * contiguous slice per machine, by the partition book in a job of graph
 * servers (DGL's partition policy: each partition's rows of the node type
 * T of "node/T/...", or of the edge type E of "edge/E/..." (E canonical,
 * "src:rel:dst"), whose range must then be [0, count of the type), else
 * GKV_EINVAL, as for a T or E the graph does not have; for other names,
 * of the only node type, else the only edge type, whose count is hi when
 * lo is 0), otherwise into equal slices (initial values are the same as
 * one store would have, being keyed by global ID); machine >= 0: the
 * whole tensor on that machine. Creating a tensor that exists with the
 * same dtype, shape, range and flags succeeds (idempotent); a different
 * one is GKV_EEXIST with a message saying what differs. */
GKV_API gkv_err gkv_client_create(gkv_client *c, const char *name,
                                  const gkv_tensor_spec *spec, int machine);

/* Deletes tensor 'name' wherever it is. Deleting a tensor that no server
 * holds succeeds (idempotent). */
GKV_API gkv_err gkv_client_delete(gkv_client *c, const char *name);

/* Optimizer state through the servers (DGL's SparseAdam.save / .load in a
 * distributed job): gkv_client_pull() and gkv_client_push() take a
 * companion name "T#adagrad_s", "T#adam_m", "T#adam_v" or "T#adam_t" of a
 * tensor T (kv/gkv_kv.h, "optimizer state"). It is routed by T's ranges,
 * with the companion's rows (f32 in T's row shape, f64 for an f64 T, one
 * i64 step count per row for T#adam_t). A pull of a companion a server
 * has not created yet gives zeros (a fresh optimizer). A push to one
 * restores it: handler assign only (NULL args or "assign"; any other is
 * GKV_EINVAL before anything is sent), creating it zero-filled if missing;
 * on a write-back server it goes to the RAM copy, and pulls read that.
 * Errors besides the usual: GKV_EINVAL (an unknown suffix, T not
 * floating, a negative step count), GKV_ENOTFOUND (no server holds T,
 * named). GKV_CLIENT_LOCAL_READ is not used for companions.
 * Checkpoint: pull T and its companions for every ID; restore: push them
 * (assign) to a job with T created the same way; optimizer pushes then go
 * on bit for bit as if never interrupted. */

/* Drops the optimizer state of tensor 'name' (gkv_opt_reset) on every
 * machine that holds rows of it: 'optimizer' "adagrad" or "adam", NULL
 * both. The next push with that optimizer starts fresh (adam at step 1).
 * Idempotent (re-sent after a lost reply like DELETE). A failure may
 * leave other machines reset: the error names the server.
 * Errors: GKV_EINVAL (a '#' name, an unknown optimizer), GKV_ENOTFOUND (no
 * server holds 'name'), GKV_ETIMEDOUT, server errors (GKV_ERDONLY, ...). */
GKV_API gkv_err gkv_client_opt_reset(gkv_client *c, const char *name,
                                     const char *optimizer);

/* Waits until all opts.group_size clients of this group have called it
 * (the barrier server is machine 0, server 0). 'timeout_ms' 0 = the
 * client's timeout; a barrier may wait for slow peers, so give a long one.
 * A barrier that timed out still counts as this client's arrival (the
 * others may pass with it): call it again, and the retry returns at once
 * if they did, or waits for them if not; the group stays in step either
 * way (doc/PROTOCOL.md, BARRIER).
 * Errors: GKV_EINVAL (group_size unknown or mismatched), GKV_ETIMEDOUT. */
GKV_API gkv_err gkv_client_barrier(gkv_client *c, int timeout_ms);

typedef struct gkv_server_stats {
    uint64_t uptime_ms, requests, errors, rejected;
    uint64_t bytes_in, bytes_out;
    uint64_t pulls, pull_rows, pushes, push_rows;
    uint64_t sessions, groups, joined;
    uint64_t tensors, store_used_bytes, store_map_size;
    uint64_t samples, sample_edges;   /* graph servers: SAMPLE requests
                                       * answered and edges returned */
    uint64_t store_free_bytes;        /* gkv_store_stat.free_bytes (0 from
                                       * a server that predates it) */
    /* Reply memory (0 from a server that predates it): bytes of replies
     * the server's process holds, not yet sent; its cap (0: not bounded);
     * replies refused for it (GKV_EBUSY). */
    uint64_t reply_mem_bytes, reply_mem_max, reply_mem_refused;
} gkv_server_stats;

/* Statistics of server i. */
GKV_API gkv_err gkv_client_stats(gkv_client *c, size_t i,
                                 gkv_server_stats *out);

/* Asks every server to stop: force = 0 stops the servers that do not keep
 * alive, force = 1 stops persistent ones too. */
GKV_API gkv_err gkv_client_shutdown(gkv_client *c, int force);

/* ---- graph requests: servers that serve partitions --------------------- *
 *
 * When the servers serve the partitions of a partitioned graph
 * (gkv-server --part-config G.json --part-id P; machine m serves partition
 * m), the client learns the partition config from the handshake and every
 * call below takes global type-wise IDs (gkv_part.h), routes them to the
 * partitions that own them (a machine's share spread over its servers),
 * asks all of them in parallel and merges the answers in request order.
 * Node features are pulled with gkv_client_pull() from the tensors
 * "node/<ntype>/<feat>" (each partition holds its owned ID range).
 * Against servers of a plain store these calls fail with GKV_ENOTSUP.
 * Errors, as for pulls: GKV_ERANGE (an ID outside its type, named),
 * GKV_EINVAL, GKV_ETIMEDOUT, GKV_EPROTO, and the servers' errors (their
 * messages name the server and the partition). */

/* The partition book (the config's schema, counts and ID ranges), or NULL
 * when the servers serve a plain store. Borrowed until gkv_client_close().
 * Paths in it (gkv_pbook_part_path, mappings) are meaningless on the
 * client: the config was read from the servers' bytes. */
GKV_API const gkv_pbook *gkv_client_pbook(const gkv_client *c);

/* One hop, exactly as gkv_sample_neighbors() on the whole graph (same
 * arguments, same result): each seed is sampled by the partition that owns
 * it, and out[e] (num_etypes entries) lists the edges seed by seed in the
 * order given. Weights come from one source per edge type: the weights
 * stored with the partitions (GKV_SAMPLE_WEIGHTED), an edge feature each
 * server holds (opts->edge_w_feat, DGL's prob= / mask=: per etype a
 * feature name FEAT, the tensor "edge/<canonical>/<FEAT>"), or an edge_w
 * array the caller holds (by global edge ID, edge_w_lo as in-process);
 * the result equals gkv_sample_neighbors() given those values (as floats)
 * as edge_w arrays. gkv_sample.h says which dtypes and values are
 * accepted. For in-edges each server weighs its seeds by the feature rows
 * it owns, kept converted (4 bytes an owned edge per feature in use) and
 * read again where the store was written since, so a push to the feature
 * is seen by the next call. Out-edge features and edge_w arrays take
 * three steps a hop: the seeds' servers list the seeds' edges of those
 * types, the client pulls the features' rows of those edges from their
 * owners (or reads its array), and sends the weights with the seeds.
 * Errors besides those below: GKV_ENOTFOUND (no such feature tensor: the
 * message names it and the partition), GKV_EINVAL (a bad name, rows of
 * more than one element, a negative, NaN or infinite value on an edge of
 * a partition asked or of the seeds' edges, two sources of weights for a
 * type), GKV_ERANGE (an edge the edge_w array has no entry for). The
 * arrays are borrowed from the client until its next sampling call (from
 * any thread: threads that sample should each have a client) or
 * gkv_client_close(); on any failure out is zeroed, as in-process.
 * Results fed back: a sampling call of the client copies the seeds and
 * excluded edges that point into its previous results (out[e].src,
 * blocks[0].nodes[t].ids, out[e].eid) before it reuses their memory, so
 * a walk may pass them on as they are. In-process calls do not
 * (gkv_sample.h): code meant for both copies them first.
 * Request sizes: a machine's seeds are cut into as many requests as the
 * servers' message limit (gkv_server_info.max_msg) needs. The excluded
 * edges go whole with each of them: when they alone, or they with one
 * seed and that seed's edge weights (edge_w, or a weighing feature), are
 * more than that limit, the call fails at once with GKV_EINVAL naming
 * their number and size (exclude fewer per call, or raise the servers'
 * --max-msg).
 * GKV_ENOMEM: the client ran out of memory (never GKV_EPROTO, which
 * blames a server); the client stays usable. */
GKV_API gkv_err gkv_client_sample_neighbors(gkv_client *c,
                                            const int64_t *const *seeds,
                                            const size_t *nseeds,
                                            const int *fanout, int nfan,
                                            int layer,
                                            const gkv_sample_opts *opts,
                                            gkv_sample_edges *out);

/* Multi-layer blocks, byte for byte what gkv_sample_blocks() returns on
 * the whole graph for the same seeds, fanouts and opts (the same layer
 * order, relabelling and node order rules; with opts->edge_w_feat, what it
 * returns given the features' values as edge_w arrays): each hop goes
 * through the servers, the relabelling is done here. A push to a feature
 * between two hops of one call is seen by the later hop only. blocks[0 ..
 * nlayers) is the caller's array; the contents are borrowed from the
 * client until its next sampling call or gkv_client_close(), and may be
 * fed back as the next call's seeds (as gkv_client_sample_neighbors()
 * says, with its request sizes and errors). Seeds must be distinct per
 * type. */
GKV_API gkv_err gkv_client_sample_blocks(gkv_client *c,
                                         const int64_t *const *seeds,
                                         const size_t *nseeds,
                                         const int *fanouts, int nfan,
                                         int nlayers,
                                         const gkv_sample_opts *opts,
                                         gkv_block *blocks);

/* An edge mini-batch (DGL's EdgeDataLoader with uniform negatives), byte
 * for byte what gkv_sample_edge_batch() returns on the whole graph for the
 * same spec, fanouts and opts: the positive edges' endpoints come from
 * their owners (gkv_client_find_edges), the negatives are drawn here with
 * the same generator (gkv_sample_negative), and the blocks are sampled
 * through the servers (gkv_client_sample_blocks) with the batch's edges
 * (GKV_EXCLUDE_SELF) and their reverses (GKV_EXCLUDE_REVERSE) excluded at
 * every layer. *batch and blocks are borrowed from the client until its
 * next sampling call or gkv_client_close(). The whole call holds the
 * client, as every call does (the pairs are built in the client's own
 * buffer).
 * Errors: as gkv_client_sample_blocks(); GKV_EINVAL (a bad spec, named as
 * gkv_sample_edge_batch() names it), GKV_ERANGE (a positive edge no
 * partition owns, an ID beyond reverse_eids, a negative reverse edge). */
GKV_API gkv_err gkv_client_sample_edge_batch(gkv_client *c,
                                             const gkv_edge_batch_spec *spec,
                                             const int *fanouts, int nfan,
                                             int nlayers,
                                             const gkv_sample_opts *opts,
                                             gkv_edge_batch *batch,
                                             gkv_block *blocks);

/* src[i], dst[i] of edge eids[i] of 'etype' (gkv_part_find_edges on the
 * owning partition). */
GKV_API gkv_err gkv_client_find_edges(gkv_client *c, int etype,
                                      const int64_t *eids, size_t n,
                                      int64_t *src, int64_t *dst);

/* deg[i] = in-degree of destination-type node nodes[i] / out-degree of
 * source-type node nodes[i] (out-degrees need a config with the CSR). */
GKV_API gkv_err gkv_client_in_degrees(gkv_client *c, int etype,
                                      const int64_t *nodes, size_t n,
                                      int64_t *deg);
GKV_API gkv_err gkv_client_out_degrees(gkv_client *c, int etype,
                                       const int64_t *nodes, size_t n,
                                       int64_t *deg);

/* The in-edges of 'etype' into nodes[0..n), node by node in the given
 * order, each node's in edge-ID order (as gkv_part_in_subgraph). On GKV_OK
 * the three arrays of *m entries are the caller's to free with gkv_free()
 * (NULL when *m is 0); on error they are NULL. */
GKV_API gkv_err gkv_client_in_subgraph(gkv_client *c, int etype,
                                       const int64_t *nodes, size_t n,
                                       int64_t **src, int64_t **dst,
                                       int64_t **eid, size_t *m);

/* ---- whole batches sampled on the servers ------------------------------ */

/* Rows a batch collects: of node type 'type' (input nodes, seeds) or of
 * edge type 'type' (sampled edges), read by global type-wise ID from the
 * tensor whose full name is 'name' ("node/paper/feat"). */
typedef struct gkv_typed_tensor {
    int         type;
    const char *name;
} gkv_typed_tensor;

/* A batch to sample on the servers (gkv_client_sample_batch). */
typedef struct gkv_batch_spec {
    const int64_t *const *seeds;     /* per node type, distinct */
    const size_t         *nseeds;    /* per node type */
    const int            *fanouts;   /* nlayers x nfan, as sample_blocks */
    int                   nfan, nlayers;
    /* seed, dir and flags (GKV_SAMPLE_REPLACE, GKV_SAMPLE_WEIGHTED) are
     * used; edge_w, exclude and edge_w_feat must be NULL (GKV_EINVAL).
     * NULL: all defaults. */
    const gkv_sample_opts *opts;
    const gkv_typed_tensor *feats;   /* rows of blocks[0]'s source nodes */
    int                     nfeats;
    const gkv_typed_tensor *label;   /* rows of the seeds of label->type;
                                      * NULL: none */
    const gkv_typed_tensor *efeats;  /* rows of every layer's edges of
                                      * efeats[f].type, by edge ID */
    int                     nefeats;
    unsigned                flags;   /* GKV_BATCH_*; 0: the default */
} gkv_batch_spec;

/* gkv_batch_spec.flags. GKV_BATCH_RELAY: the asked server gathers every
 * row itself, pulling those other machines hold from its peers, and
 * replies with all of them (one round trip for the client, but those rows
 * cross the wire twice). Without it (the default) the asked server
 * replies with the blocks, and the client pulls the rows straight from
 * the machines holding them, all in parallel, in the same call: each row
 * crosses the wire once. The results are the same. */
#define GKV_BATCH_RELAY 0x1u

/* gkv_batch_out.rows_alloc's kinds of rows. */
enum { GKV_BATCH_FEAT = 0, GKV_BATCH_LABEL = 1, GKV_BATCH_EFEAT = 2 };

/* What gkv_client_sample_batch() gives: the caller's struct holding
 * arrays of the caller's (blocks: nlayers; feat, feat_bytes: nfeats;
 * efeat, efeat_bytes: nefeats x nlayers, [f * nlayers + i] for layer i),
 * whose contents it fills with memory borrowed from the client until its
 * next call or gkv_client_close().
 *
 * rows_alloc (optional; NULL: the rows too are the client's memory, as
 * above) lets the rows be written straight into the caller's memory, with
 * no copy after: once the blocks are known, it is called for each entry
 * of rows in turn (kind GKV_BATCH_FEAT with index f, GKV_BATCH_LABEL with
 * 0, GKV_BATCH_EFEAT with f * nlayers + i; also with bytes 0) and returns
 * at least 'bytes' bytes (any alignment the caller wants), which the rows
 * are written to and feat[f], label or efeat[k] then point at. That
 * memory is the caller's whatever the outcome (on an error its contents
 * are undefined); NULL from rows_alloc fails the call with GKV_ENOMEM. It
 * runs on the calling thread, with the client's lock held: it must not
 * call the client. */
typedef struct gkv_batch_out {
    gkv_block   *blocks;
    const void **feat;
    size_t      *feat_bytes;
    const void  *label;
    size_t       label_bytes;
    const void **efeat;
    size_t      *efeat_bytes;
    void      *(*rows_alloc)(void *arg, int kind, size_t index,
                             size_t bytes);
    void        *rows_arg;
} gkv_batch_out;

/* Samples a whole mini-batch on the servers in one request: it goes to the
 * server owning the most seeds (ties: the lowest machine; a machine's
 * servers taken in turn), which samples every hop (its own partition's
 * columns in process, the rest from its peers), relabels and replies
 * with the blocks. The client then pulls the rows of spec->feats for
 * blocks[0]'s source nodes, of spec->label for the seeds and of
 * spec->efeats for each block's edges straight from the machines holding
 * them (all in parallel, into place), so each row crosses the wire once;
 * with GKV_BATCH_RELAY the asked server gathers them (its own from its
 * store, the rest from its peers) and replies with every row. The
 * tensors are checked by the asked server before it samples, either way.
 * The blocks are byte for byte
 * gkv_client_sample_blocks()'s (and gkv_sample_blocks()'s on the whole
 * graph) for the same seeds, fanouts and opts; the rows are
 * gkv_client_pull()'s of those IDs, whichever way they came. The whole
 * call, the pulls included, takes at most the client's timeout.
 * Errors: as gkv_client_sample_blocks() and gkv_client_pull() (unknown
 * tensors, named), GKV_EINVAL (a bad spec, named), GKV_ENOMEM (also
 * rows_alloc's NULL), GKV_ETIMEDOUT naming the server asked (or the peer
 * it waited for, or the server a row was pulled from). A server whose
 * batch queue is full answers GKV_EBUSY having done nothing; the call asks
 * again with backoff (10 ms doubling to 640 ms) while its timeout lasts.
 * A spec names at most 1024 feats and 1024 efeats. */
GKV_API gkv_err gkv_client_sample_batch(gkv_client *c,
                                        const gkv_batch_spec *spec,
                                        gkv_batch_out *out);

/* Opens a second client to the same servers with the same token, group
 * and options, joined as an observer (GKV_CLIENT_OBSERVER: its leaving
 * never stops a server), for a worker thread of the caller's (a loader's
 * workers each use one). A server keeps one session per (group, rank), so
 * the clone takes a rank of its own, gkv_client_observer_rank(), and
 * leaves c's session alone. Thread-safe (beside c's calls). On GKV_OK
 * *out is yours until gkv_client_close(), independent of c. Errors: as
 * gkv_client_connect(). */
GKV_API gkv_err gkv_client_clone(gkv_client *c, gkv_client **out);

/* A rank for an observer of a group that must not share a member's or
 * another observer's: 2^31 plus 31 random bits (members' ranks are below
 * the group size). Drawn afresh each call from the kernel's generator,
 * so processes forked from one parent, and trainers on other machines,
 * draw independently: no counter or process ID repeats across them.
 * Two live observers of one group draw the same rank with probability
 * about n^2 / 2^32 for n of them (1,000: about 1 in 4,300); they would
 * then take over each other's session by turns, and the server logs the
 * rejoins. */
GKV_API uint32_t gkv_client_observer_rank(void);

/* Why 'name' cannot name an edge feature to sample by (edge_w_feat: the
 * tensor "edge/<canonical>/<name>"), or NULL when it can: 1 to 255 bytes
 * of printable ASCII, no space, no '#' (which marks optimizer state). The
 * sampling calls and the loader refuse such a name with GKV_EINVAL. */
GKV_API const char *gkv_edge_feat_name_bad(const char *name);

#ifdef __cplusplus
}
#endif
#endif /* GKV_NET_H */
