/* wire.h - the gkv wire format: message header, payload codec and the
 * decoded form of every message (doc/PROTOCOL.md is the specification).
 * Private to net/ (and to the tests and the fuzzer, which link it).
 *
 * Every message is a 48-byte little-endian header followed by a payload of
 * exactly hdr.len bytes. Decoders never trust a length: each count is
 * checked against the bytes that remain before anything is read or
 * allocated, and the first failure sticks (net_rd.err) with a reason.
 */
#ifndef NET_WIRE_H
#define NET_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include "base/base.h"
#include "kv/gkv_kv.h"
#include "graph/gkv_sample.h"   /* gkv_block (SAMPLE_BATCH replies) */

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the wire codec assumes a little-endian host; add byte swaps first"
#endif

#define NET_MAGIC     0x4e564b47u   /* "GKVN" as little-endian bytes */
#define NET_VERSION   2u            /* protocol version of this build */
#define NET_HDR_LEN   48u
#define NET_NONCE_LEN 32u
#define NET_MAC_LEN   32u           /* crypto_auth_BYTES (HMAC-SHA512-256) */
#define NET_GROUP_MAX 63u           /* bytes of a group name */
#define NET_HOST_MAX  255u
#define NET_PATH_MAX  4095u
#define NET_POLICY_MAX 63u
#define NET_ERRMSG_MAX 1024u        /* bytes of an error reply's message */

/* Header flags. */
#define NET_F_REPLY    0x01u   /* a reply (server to client) */
#define NET_F_SUM      0x02u   /* hdr.sum is the XXH3-64 of the payload */
#define NET_F_SESSION  0x04u   /* reply: the session was not accepted; the
                                * client must hand-shake again */
#define NET_F_STOPPING 0x08u   /* reply: the server is stopping */
#define NET_F_SPLIT    0x10u   /* error reply: the answer would exceed the
                                * message limit; fewer seeds may fit */
#define NET_F_KNOWN    0x1fu

/* Message types. A reply carries the type of its request. 1..31 are kv
 * requests (14..31 free), 32..63 graph requests. */
enum net_type {
    NET_HELLO = 1,       /* no session: a fresh nonce and the identity */
    NET_HANDSHAKE = 2,   /* group, rank, proof: a session and the schema */
    NET_SCHEMA = 3,
    NET_PULL = 4,
    NET_PUSH = 5,
    NET_CREATE = 6,
    NET_DELETE = 7,
    NET_BARRIER = 8,
    NET_STATS = 9,
    NET_SHUTDOWN = 10,
    NET_LEAVE = 11,
    NET_HEARTBEAT = 12,
    NET_OPT_RESET = 13,  /* tensor, optimizer: drop its optimizer state */
    /* graph requests */
    NET_PBOOK = 32,
    NET_SAMPLE = 33,
    NET_FIND_EDGES = 34,
    NET_IN_DEGREES = 35,
    NET_OUT_DEGREES = 36,
    NET_IN_SUBGRAPH = 37,
    NET_EDGE_BATCH = 38,
    NET_SAMPLE_BATCH = 39, /* a whole mini-batch sampled on the server */
    NET_TYPE_MAX = 63
};

/* "pull", "sample", ...; NULL for a number no type has. */
const char *net__type_name(unsigned type);

typedef struct net_hdr {
    uint32_t magic;
    uint16_t version;
    uint16_t type;
    uint32_t flags;      /* NET_F_* */
    int32_t  status;     /* gkv_err; 0 in requests */
    uint64_t req_id;     /* chosen by the client, echoed in the reply */
    uint64_t session;    /* granted by HANDSHAKE; 0 before */
    uint64_t len;        /* payload bytes after the header */
    uint64_t sum;        /* XXH3-64 of the payload when NET_F_SUM, else 0 */
} net_hdr;

/* Writes h (magic and version as given) into b[0..NET_HDR_LEN). */
void    net__hdr_put(unsigned char *b, const net_hdr *h);
/* Reads the header of message m (len bytes) without judging it. Returns 0,
 * or -1 when len < NET_HDR_LEN. */
int     net__hdr_get(const void *m, size_t len, net_hdr *h);
/* Reads and checks the header of message m: size, magic, version (the
 * header layout is the same in every version, so a version mismatch is
 * reported as GKV_EVERSION), payload length equal to what arrived, known
 * flags, the checksum when flagged. On error 'why' says what was wrong. */
gkv_err net__hdr_check(const void *m, size_t len, net_hdr *h,
                       char *why, size_t whylen);
/* The XXH3-64 of a payload. */
uint64_t net__sum(const void *p, size_t len);

/* ---- reading ----------------------------------------------------------- */

typedef struct net_rd {
    const unsigned char *p;   /* payload */
    size_t len, off;
    int err;                  /* sticky: 0, or set by the first failure */
    char why[160];            /* the reason of the first failure */
} net_rd;

void     net__rd_init(net_rd *r, const void *p, size_t len);
uint8_t  net__rd_u8(net_rd *r, const char *what);
uint16_t net__rd_u16(net_rd *r, const char *what);
uint32_t net__rd_u32(net_rd *r, const char *what);
uint64_t net__rd_u64(net_rd *r, const char *what);
double   net__rd_f64(net_rd *r, const char *what);
/* Fixed bytes: copies n bytes into dst. */
void     net__rd_bytes(net_rd *r, void *dst, size_t n, const char *what);
/* A string (u16 length, bytes) copied into dst (cap bytes with the NUL);
 * longer than cap - 1, or holding a NUL byte, is an error. */
void     net__rd_str(net_rd *r, char *dst, size_t cap, const char *what);
/* An array of 'count' elements of 'elem' bytes, after padding to 8 bytes:
 * a pointer into the payload (not necessarily aligned in memory). The
 * count is checked against what remains before the pointer is made. */
const unsigned char *net__rd_arr(net_rd *r, uint64_t count, size_t elem,
                                 const char *what);
/* Fails unless every byte was read. */
void     net__rd_end(net_rd *r);

/* ---- writing ----------------------------------------------------------- */

/* With p == NULL a writer only counts (the first pass of a message). */
typedef struct net_wr {
    unsigned char *p;
    size_t cap, off;
} net_wr;

void net__wr_u8(net_wr *w, uint8_t v);
void net__wr_u16(net_wr *w, uint16_t v);
void net__wr_u32(net_wr *w, uint32_t v);
void net__wr_u64(net_wr *w, uint64_t v);
void net__wr_f64(net_wr *w, double v);
void net__wr_bytes(net_wr *w, const void *b, size_t n);
/* A string of at most 65535 bytes (longer ones are cut: callers check). */
void net__wr_str(net_wr *w, const char *s);
/* Zero padding up to the next multiple of 8. */
void net__wr_pad(net_wr *w);
/* Reserves n bytes (after padding) and returns where they go (NULL when
 * only counting). */
unsigned char *net__wr_arr(net_wr *w, size_t n);

/* ---- decoded messages ---------------------------------------------------- */

/* Who a server is (HELLO and HANDSHAKE replies). */
#define NET_ID_KEEP_ALIVE 0x01u
#define NET_ID_AUTH       0x02u   /* a token is required */
#define NET_ID_GRAPH      0x04u   /* serves graph requests (a partition) */
#define NET_ID_WRITEBACK  0x08u   /* keeps tensors in write-back mode: its
                                   * store lags the pushes, so clients do
                                   * not read it locally */
typedef struct net_ident {
    uint32_t proto;                   /* NET_VERSION of the server */
    uint32_t server_id, num_servers, machine;
    uint32_t pid, lease_ms, flags;    /* NET_ID_* */
    uint64_t max_msg;                 /* largest payload it accepts */
    uint64_t start_ms;                /* start time, ms since the epoch */
    char host[NET_HOST_MAX + 1];      /* gethostname() */
    char name[NET_HOST_MAX + 1];      /* --server-name, may be "" */
    char store[NET_PATH_MAX + 1];     /* the store directory (realpath) */
    char version[32];                 /* GKV_VERSION_STRING */
} net_ident;

/* One tensor of a schema. */
typedef struct net_tensor {
    char name[GKV_NAME_MAX + 1];
    uint8_t dtype, ndim;
    uint16_t flags;                   /* GKV_TENSOR_* */
    uint64_t shape[GKV_MAX_DIMS];
    uint64_t lo, hi;                  /* the rows this server holds */
    uint64_t row_bytes;
    uint32_t chunk_rows;
    char policy[NET_POLICY_MAX + 1];  /* "" for a plain store tensor */
} net_tensor;

typedef struct net_hello_rep {
    unsigned char nonce[NET_NONCE_LEN];
    net_ident id;
} net_hello_rep;

#define NET_HS_PROOF    0x01u         /* the request carries a proof */
#define NET_HS_OBSERVER 0x02u         /* an observer (kvctl): its leaving
                                       * never stops the server */
#define NET_HS_RESUME   0x04u         /* the same client again (a rejoin
                                       * after a failed call, not a new
                                       * process): the member keeps the seq
                                       * of its last released barrier */
#define NET_HS_INSTANCE 0x08u         /* a u64 job instance follows the
                                       * proof: members of the group from
                                       * another instance are dropped */
typedef struct net_hs_req {
    unsigned char nonce[NET_NONCE_LEN];
    char group[NET_GROUP_MAX + 1];
    uint32_t rank, flags;             /* NET_HS_* */
    unsigned char mac[NET_MAC_LEN];
    uint64_t instance;                /* with NET_HS_INSTANCE; not 0 */
} net_hs_req;

typedef struct net_schema {
    net_tensor *t;                    /* gkv__malloc'd; net__schema_free */
    uint32_t n;
} net_schema;

/* A graph server's partition: its number and the partition config (the
 * JSON file's bytes). Sent after the schema in a HANDSHAKE reply when the
 * identity has NET_ID_GRAPH, and as the PBOOK reply. */
typedef struct net_book {
    uint32_t part_id;
    uint64_t len;
    const unsigned char *json;        /* len bytes, into the payload */
} net_book;

typedef struct net_hs_rep {
    uint64_t session;
    net_ident id;
    net_schema schema;
    net_book book;                    /* when id.flags has NET_ID_GRAPH */
} net_hs_rep;

typedef struct net_pull_req {
    char name[GKV_NAME_MAX + 1];
    uint64_t n;
    const unsigned char *ids;         /* n x u64, into the payload */
} net_pull_req;

typedef struct net_pull_rep {
    uint64_t n, row_bytes;
    const unsigned char *rows;        /* n x row_bytes, into the payload */
} net_pull_rep;

typedef struct net_push_req {
    char name[GKV_NAME_MAX + 1];
    char handler[64];
    double lr, eps, beta1, beta2;
    uint64_t row_bytes, n;
    const unsigned char *ids;         /* n x u64 */
    const unsigned char *rows;        /* n x row_bytes */
    uint8_t flags;                    /* GKV_PUSH_* */
} net_push_req;

typedef struct net_create_req {
    net_tensor t;                     /* row_bytes not sent (0) */
    uint8_t init;
    double a, b;
    uint64_t seed;
} net_create_req;

typedef struct net_create_rep {
    uint8_t created;                  /* 1 new, 0 an identical one existed */
    net_tensor t;
} net_create_rep;

/* Graph requests. IDs and results are arrays of little-endian int64. */

/* FIND_EDGES, IN_DEGREES, OUT_DEGREES, IN_SUBGRAPH requests. */
typedef struct net_ids_req {
    uint32_t etype;
    uint64_t n;
    const unsigned char *ids;         /* n x i64 */
} net_ids_req;

/* k columns of n int64 each (replies: find_edges k = 2, degrees k = 1,
 * in_subgraph k = 3, each edge type of a sample k = 3). */
typedef struct net_cols {
    uint64_t n;
    const unsigned char *c[3];        /* n x i64 each, into the payload */
} net_cols;

/* SAMPLE request flag (beside GKV_SAMPLE_*, in the flags field): per
 * edge type an edge-feature name follows the exclusions (the weights are
 * the partition's "edge/<canonical>/<name>"; gkv_sample_opts.edge_w_feat).
 * Servers that predate it refuse it as an unknown flag. */
#define NET_SAMPLE_F_FEAT 0x100u

/* SAMPLE request flag: weights by position follow the exclusions (and
 * the names, which it does not go with): per edge type a u64 count nc (0:
 * none for this type; else the number of seeds of the type the hop centres
 * on), nc u32 counts (seed i's non-excluded edges, in adjacency order),
 * a u64 n (their sum) and n f32 weights, seed by seed. The client samples
 * out-edges by an edge feature this way (graph__sample_hop). */
#define NET_SAMPLE_F_WPOS 0x200u

/* SAMPLE request: one hop (gkv_sample_neighbors). Arrays of nnt / net
 * entries are gkv__malloc'd by the decoder: net__sample_req_free(). */
typedef struct net_sample_req {
    uint32_t layer, dir, flags;       /* GKV_DIR_*, GKV_SAMPLE_*,
                                       * NET_SAMPLE_F_FEAT */
    uint32_t nnt, net, nfan;
    uint64_t seed;
    const unsigned char *fanout;      /* nfan x i32 */
    uint64_t *nseeds;                 /* [nnt] */
    const unsigned char **seeds;      /* [nnt]: nseeds[t] x i64 */
    uint32_t has_ex;
    uint64_t *nex;                    /* [net] when has_ex */
    const unsigned char **ex;         /* [net]: nex[e] x i64 */
    const char **feat;                /* [net] with NET_SAMPLE_F_FEAT: a
                                       * checked name (NUL-terminated, into
                                       * featbuf) or NULL; else NULL */
    char *featbuf;
    uint64_t *nwc, *nw;               /* [net] with NET_SAMPLE_F_WPOS: counts
                                       * and weights (their sum); else NULL */
    const unsigned char **wc, **w;    /* [net]: nwc[e] x u32, nw[e] x f32 */
} net_sample_req;

/* SAMPLE reply, per edge type: the number of edges each seed of the
 * type the hop centres on got (in the order sent), then the neighbour and
 * edge-ID columns, each u32 unless its flag says i64 (the centre column is
 * implicit). e is gkv__malloc'd: net__sample_rep_free(). */
#define NET_SAMPLE_WIDE_NBR 0x1u       /* neighbours are i64 */
#define NET_SAMPLE_WIDE_EID 0x2u       /* edge IDs are i64 */
typedef struct net_sample_et {
    uint64_t n;                       /* edges */
    uint64_t nc;                      /* seeds counted */
    uint32_t wide;                    /* NET_SAMPLE_WIDE_* */
    const unsigned char *cnt;         /* nc x u32, summing to n */
    const unsigned char *nbr;         /* n x (u32 or i64) */
    const unsigned char *eid;         /* n x (u32 or i64) */
} net_sample_et;

typedef struct net_sample_rep {
    uint32_t net;
    net_sample_et *e;                 /* [net] */
} net_sample_rep;

/* What the SAMPLE reply encoder sends (the server's view): per edge type
 * n edges, nc counts; a column is narrowed to u32 unless its wide flag is
 * set (the caller sets it when a value is negative or above UINT32_MAX). */
typedef struct net_sample_renc_et {
    size_t n, nc;
    uint32_t wide;
    const uint32_t *cnt;
    const int64_t *nbr, *eid;
} net_sample_renc_et;

/* What the SAMPLE encoder sends (the client's view). */
typedef struct net_sample_enc {
    uint32_t layer, dir, flags, nnt, net, nfan;
    uint64_t seed;
    const int *fanout;                /* nfan */
    const int64_t *const *seeds;      /* [nnt] */
    const size_t *nseeds;             /* [nnt] */
    const int64_t *const *ex;         /* NULL, or [net] (entries may be
                                       * NULL when nex[e] is 0) */
    const size_t *nex;
    const char *const *feat;          /* sent when flags has
                                       * NET_SAMPLE_F_FEAT: [net], NULL
                                       * entries sent as "" */
    const size_t *nwc, *nw;           /* sent when flags has
                                       * NET_SAMPLE_F_WPOS: [net] */
    const uint32_t *const *wc;        /* [net]: nwc[e] counts */
    const float *const *w;            /* [net]: nw[e] weights */
} net_sample_enc;

/* SAMPLE_BATCH: a whole mini-batch (gkv_client_sample_batch). A tensor
 * the batch collects rows of: a node type (feats, label) or an edge type
 * (efeats) and the tensor's full name. */
typedef struct net_tref {
    int type;
    const char *name;                 /* request: NUL-terminated; decoded:
                                       * into nbuf */
} net_tref;

#define NET_BATCH_LAYERS_MAX 64u      /* layers of one batch */
/* A SAMPLE_BATCH request's flags beside GKV_SAMPLE_*: the reply's row
 * entries carry no rows (n = 0; row_bytes the tensor's), the client pulls
 * them all from their owners. Without it the server gathers every row
 * (its own, and the others through its peer client) into the reply. */
#define NET_BATCH_NO_ROWS 0x10000u
#define NET_BATCH_TENSORS_MAX 1024u   /* features, and edge features, of one
                                       * batch (bounds its row entries) */

/* What the SAMPLE_BATCH encoder sends (the client's view). */
typedef struct net_batch_enc {
    uint32_t nlayers, dir, flags, nnt, net, nfan;
    uint64_t seed;
    uint32_t timeout_ms;              /* the client's deadline for the call */
    uint64_t max_reply;               /* the largest reply payload it takes */
    const int *fanout;                /* nlayers x nfan */
    const int64_t *const *seeds;      /* [nnt] */
    const size_t *nseeds;             /* [nnt] */
    const net_tref *feats;            /* [nfeats] */
    uint32_t nfeats;
    const net_tref *label;            /* NULL: none */
    const net_tref *efeats;           /* [nefeats] */
    uint32_t nefeats;
} net_batch_enc;

/* A SAMPLE_BATCH request as decoded. Arrays are gkv__malloc'd:
 * net__batch_req_free(); pointers marked "payload" point into it. */
typedef struct net_batch_req {
    uint32_t nlayers, dir, flags, nnt, net, nfan;
    uint64_t seed;
    uint32_t timeout_ms;
    uint64_t max_reply;
    const unsigned char *fanout;      /* payload: nlayers x nfan x i32 */
    uint64_t *nseeds;                 /* [nnt] */
    const unsigned char **seeds;      /* [nnt], payload: nseeds[t] x i64 */
    uint32_t nfeats, has_label, nefeats;
    net_tref *tref;                   /* [nfeats + has_label + nefeats]:
                                       * the feats, the label, the efeats */
    char *nbuf;                       /* their names */
} net_batch_req;

/* One entry of rows in a SAMPLE_BATCH reply: n rows of row_bytes. */
typedef struct net_rows {
    uint64_t n, row_bytes;
    const unsigned char *p;           /* payload: n x row_bytes */
} net_rows;

/* A block's node list or edge list as sent: global IDs and edge IDs in
 * u32 unless wide, local IDs always u32. */
#define NET_BATCH_WIDE 0x1u
typedef struct net_bnodes {
    uint64_t num_src, num_dst;
    uint32_t wide;
    const unsigned char *ids;         /* payload: num_src x (u32 or i64) */
} net_bnodes;

typedef struct net_bedges {
    uint64_t n;
    uint32_t wide;                    /* of the edge IDs */
    const unsigned char *src, *dst;   /* payload: n x u32 (local IDs) */
    const unsigned char *eid;         /* payload: n x (u32 or i64) */
} net_bedges;

/* A SAMPLE_BATCH reply as decoded (arrays gkv__malloc'd:
 * net__batch_rep_free()). Rows: nfeats entries, then the label's (when
 * has_label), then nefeats x nlayers ([f * nlayers + i] for layer i). */
typedef struct net_batch_rep {
    uint32_t nlayers, nnt, net;
    net_bnodes *nodes;                /* [nlayers x nnt] */
    net_bedges *edges;                /* [nlayers x net] */
    uint32_t nfeats, has_label, nefeats;
    net_rows *rows;
} net_batch_rep;

/* What the SAMPLE_BATCH reply encoder sends (the server's view): the
 * blocks, and per rows entry its count and row size; on the writing pass
 * slot[k] gets where entry k's rows go (the caller fills them after). */
typedef struct net_batch_renc {
    uint32_t nlayers, nnt, net;
    const gkv_block *blocks;          /* [nlayers] */
    uint32_t nfeats, has_label, nefeats;
    const uint64_t *rows_n, *row_bytes;   /* [nfeats + has_label +
                                           * nefeats x nlayers] */
    unsigned char **slot;             /* out, the same count */
} net_batch_renc;

typedef struct net_barrier {
    uint32_t group_size;
    uint64_t seq;                     /* the client's barrier count */
} net_barrier;

#define NET_STATS_MAX 256u
typedef struct net_stats {
    uint32_t n;
    struct { char key[64]; uint64_t val; } kv[NET_STATS_MAX];
} net_stats;

/* Decoders: each reads a whole payload (nothing may be left over). 0 on
 * success, -1 on malformed input with r->why saying what. Pointers in the
 * results point into the payload. */
int net__dec_hello_rep(net_rd *r, net_hello_rep *o);
int net__dec_hs_req(net_rd *r, net_hs_req *o);
/* These two: NET_DEC_NOMEM (below) when out of memory. */
int net__dec_hs_rep(net_rd *r, net_hs_rep *o);      /* frees on failure */
int net__dec_schema(net_rd *r, net_schema *o);      /* frees on failure */
int net__dec_pull_req(net_rd *r, net_pull_req *o);
int net__dec_pull_rep(net_rd *r, net_pull_rep *o);
int net__dec_push_req(net_rd *r, net_push_req *o);
int net__dec_create_req(net_rd *r, net_create_req *o);
int net__dec_create_rep(net_rd *r, net_create_rep *o);
int net__dec_name(net_rd *r, char name[GKV_NAME_MAX + 1]);   /* DELETE */
/* OPT_RESET: tensor str, optimizer str ("", "adagrad" or "adam"). */
#define NET_OPT_MAX 15u
int net__dec_opt_reset(net_rd *r, char name[GKV_NAME_MAX + 1],
                       char opt[NET_OPT_MAX + 1]);
int net__dec_barrier(net_rd *r, net_barrier *o);   /* request and reply */
int net__dec_stats(net_rd *r, net_stats *o);
int net__dec_u8(net_rd *r, uint8_t *o, const char *what);   /* 1-byte payloads */
int net__dec_u32(net_rd *r, uint32_t *o, const char *what);
int net__dec_u64(net_rd *r, uint64_t *o, const char *what);
int net__dec_empty(net_rd *r);
/* An error reply's message (status != 0) into msg. */
int net__dec_err(net_rd *r, char *msg, size_t cap);
void net__schema_free(net_schema *s);
int net__dec_book(net_rd *r, net_book *o);          /* PBOOK reply */
int net__dec_ids_req(net_rd *r, net_ids_req *o);
/* A whole payload of k columns (k = 1..3). */
int net__dec_cols(net_rd *r, unsigned k, net_cols *o, const char *what);
int net__dec_sample_req(net_rd *r, net_sample_req *o);   /* frees on failure */
/* Whether 'name' (n bytes) may name an edge feature in SAMPLE: 1..
 * GKV_NAME_MAX bytes of printable ASCII without spaces or '#'. NULL when
 * it may, else why not (a constant string). */
const char *net__feat_name_bad(const char *name, size_t n);
void net__sample_req_free(net_sample_req *o);
/* The SAMPLE reply: as the others, but NET_DEC_NOMEM (not -1) when out of
 * memory, so that a client does not take its own shortage for a malformed
 * reply and a broken server. */
#define NET_DEC_NOMEM (-2)
int net__dec_sample_rep(net_rd *r, net_sample_rep *o);   /* frees on failure */
void net__sample_rep_free(net_sample_rep *o);

/* The SAMPLE_BATCH request; NET_DEC_NOMEM when out of memory. */
int net__dec_batch_req(net_rd *r, net_batch_req *o);     /* frees on failure */
void net__batch_req_free(net_batch_req *o);
/* The SAMPLE_BATCH reply; NET_DEC_NOMEM when out of memory. */
int net__dec_batch_rep(net_rd *r, net_batch_rep *o);     /* frees on failure */
void net__batch_rep_free(net_batch_rep *o);

/* Encoders (the same fields in the same order). Pull and push requests
 * take an optional index list: element j is ids[idx[j]] (and its row),
 * so a client can send its request's parts without gathering first. */
void net__enc_ident(net_wr *w, const net_ident *id);
void net__enc_tensor(net_wr *w, const net_tensor *t);
void net__enc_hello_rep(net_wr *w, const net_hello_rep *o);
void net__enc_hs_req(net_wr *w, const net_hs_req *o);
void net__enc_pull_req(net_wr *w, const char *name, const uint64_t *ids,
                       const size_t *idx, size_t n);
void net__enc_push_req(net_wr *w, const char *name, const char *handler,
                       unsigned flags,
                       const double opt[4], size_t row_bytes,
                       const uint64_t *ids, const void *rows,
                       const size_t *idx, size_t n);
void net__enc_create_req(net_wr *w, const net_create_req *o);
void net__enc_create_rep(net_wr *w, const net_create_rep *o);
void net__enc_barrier(net_wr *w, const net_barrier *o);
void net__enc_err(net_wr *w, const char *msg);
void net__enc_book(net_wr *w, const net_book *o);
/* ids[idx[j]] for j < n when idx is given, else ids[0..n). */
void net__enc_ids_req(net_wr *w, uint32_t etype, const int64_t *ids,
                      const size_t *idx, size_t n);
/* Columns cols[0..k) of n int64 each (the fields of one net_cols). */
void net__enc_cols(net_wr *w, unsigned k, const int64_t *const *cols,
                   size_t n);
void net__enc_sample_req(net_wr *w, const net_sample_enc *o);
void net__enc_sample_rep(net_wr *w, uint32_t net, const net_sample_renc_et *e);
void net__enc_batch_req(net_wr *w, const net_batch_enc *o);
void net__enc_batch_rep(net_wr *w, const net_batch_renc *o);

/* ---- authentication ------------------------------------------------------ */

#define NET_KEY_LEN 32u
/* The HMAC key of a token: BLAKE2b-256 of its bytes (a token may have any
 * length). */
void net__token_key(const void *token, size_t len, unsigned char key[NET_KEY_LEN]);
/* The proof of a handshake: crypto_auth (HMAC-SHA512-256) under 'key' of
 * "gkv-auth-v1" || nonce || u16 group length || group || u32 rank. */
void net__proof(const unsigned char key[NET_KEY_LEN],
                const unsigned char nonce[NET_NONCE_LEN],
                const char *group, uint32_t rank,
                unsigned char mac[NET_MAC_LEN]);
/* 1 when mac is the proof (constant-time compare), else 0. */
int  net__proof_ok(const unsigned char key[NET_KEY_LEN],
                   const unsigned char nonce[NET_NONCE_LEN],
                   const char *group, uint32_t rank,
                   const unsigned char mac[NET_MAC_LEN]);

/* Group names: 1..NET_GROUP_MAX printable ASCII bytes without spaces. */
int net__group_ok(const char *g);

/* ---- error detail of net/ calls ------------------------------------------ */

/* gkv__fail() and gkv__clear() about no handle (base/base.h): net/ calls
 * are about clients, servers and files alike. */
#define net__fail(rc, ...) gkv__fail(NULL, (rc), __VA_ARGS__)
#define net__clear()       gkv__clear(NULL)

/* A one-machine ip_config for "HOST:PORT" or "[IPv6]:PORT" (the server
 * at exactly that port). Errors: GKV_EINVAL (naming the address),
 * GKV_ENOMEM. */
typedef struct gkv_ipconfig gkv_ipconfig;
gkv_err net__ipconfig_addr(gkv_ipconfig **out, const char *addr);

/* ---- optimizer-state companions ("T#adam_m"): routed by T ---------------- */

/* gkv_opt_state_split() (kv/gkv_kv.h): 'name' into base tensor T (base,
 * GKV_NAME_MAX + 1 bytes) and whether it is the step count (T#adam_t).
 * GKV_OK, or GKV_EINVAL (with the message) for a suffix that is not
 * #adagrad_s, #adam_m, #adam_v or #adam_t, or an empty T. */
gkv_err net__state_split(const char *name, char *base, int *is_step);
/* The rows of companion 'name' of tensor *t (kv/gkv_kv.h: f32 with T's row
 * shape, f64 for an f64 T, one i64 for the step count) into *out, with
 * T's range and chunking. GKV_EINVAL when T's dtype is not floating. */
gkv_err net__state_rows(const char *name, const net_tensor *t, int is_step,
                        net_tensor *out);

/* ---- sampling weights from edge features ------------------------------ */


/* ---- a server's peer client (server_batch.c) ----------------------------- */

/* Sets the timeout of client c's later calls to ms (> 0): a server gives
 * its peer client the time left until a batch's deadline. Takes c's lock
 * (c->mu): not while another thread's call holds it. */
typedef struct gkv_client gkv_client;
void net__client_timeout(gkv_client *c, int ms);

/* nn_errno() of a failed nanomsg call, translated once. */
gkv_err net__from_nn(int e);

#endif /* NET_WIRE_H */
