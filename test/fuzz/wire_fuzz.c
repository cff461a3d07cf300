/* wire_fuzz.c - libFuzzer target for the wire decoder (net/wire.c), run
 * by `make fuzz` with ASan and UBSan.
 *
 * Each input is tried two ways: as a whole message (header checks, then
 * its payload through the decoders of its type, request and reply forms),
 * and as a bare payload whose first byte picks the decoder, so the fuzzer
 * reaches every field without forging a header. Every array a decoder
 * returns is read to its end, so a count the decoder failed to bound is
 * an ASan report, not a silent pass.
 *
 * Built with -DWIRE_FUZZ_SEEDS it is instead a program that writes a valid
 * message of every type into the directory it is given: the seed corpus.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kv/kv_test.h"
#include "wire.h"

static volatile unsigned char sink;

static void
touch(const unsigned char *p, size_t n)
{
    unsigned char x = 0;

    for (size_t i = 0; i < n; i++)
        x ^= p[i];
    sink ^= x;
}

#define NDEC 26   /* decoders */

/* Runs decoder k (0..NDEC-1) over payload p. */
static void
decode(unsigned k, const unsigned char *p, size_t n)
{
    net_rd rd;
    char msg[NET_ERRMSG_MAX + 1], name[GKV_NAME_MAX + 1];
    uint8_t u8;
    uint32_t u32;
    uint64_t u64;

    net__rd_init(&rd, p, n);
    switch (k % NDEC) {
    case 0: {
        net_hello_rep o;
        net__dec_hello_rep(&rd, &o);
        break;
    }
    case 1: {
        net_hs_req o;
        net__dec_hs_req(&rd, &o);
        break;
    }
    case 2: {
        net_hs_rep o;
        if (net__dec_hs_rep(&rd, &o) == 0) {
            for (uint32_t i = 0; i < o.schema.n; i++)
                touch((const unsigned char *)&o.schema.t[i], sizeof o.schema.t[i]);
            net__schema_free(&o.schema);
        }
        break;
    }
    case 3: {
        net_schema o;
        if (net__dec_schema(&rd, &o) == 0)
            net__schema_free(&o);
        break;
    }
    case 4: {
        net_pull_req o;
        if (net__dec_pull_req(&rd, &o) == 0)
            touch(o.ids, (size_t)o.n * 8);
        break;
    }
    case 5: {
        net_pull_rep o;
        if (net__dec_pull_rep(&rd, &o) == 0)
            touch(o.rows, (size_t)(o.n * o.row_bytes));
        break;
    }
    case 6: {
        net_push_req o;
        if (net__dec_push_req(&rd, &o) == 0) {
            touch(o.ids, (size_t)o.n * 8);
            touch(o.rows, (size_t)(o.n * o.row_bytes));
        }
        break;
    }
    case 7: {
        net_create_req o;
        net__dec_create_req(&rd, &o);
        break;
    }
    case 8: {
        net_create_rep o;
        net__dec_create_rep(&rd, &o);
        break;
    }
    case 9:
        net__dec_name(&rd, name);
        break;
    case 10: {
        net_barrier o;
        net__dec_barrier(&rd, &o);
        break;
    }
    case 11: {
        net_stats *o = malloc(sizeof *o);
        if (o != NULL)
            net__dec_stats(&rd, o);
        free(o);
        break;
    }
    case 12:
        net__dec_u8(&rd, &u8, "u8");
        break;
    case 13:
        net__dec_u32(&rd, &u32, "u32");
        break;
    case 14:
        net__dec_u64(&rd, &u64, "u64");
        break;
    case 16: {
        net_book o;
        if (net__dec_book(&rd, &o) == 0)
            touch(o.json, (size_t)o.len);
        break;
    }
    case 17: {
        net_ids_req o;
        if (net__dec_ids_req(&rd, &o) == 0)
            touch(o.ids, (size_t)o.n * 8);
        break;
    }
    case 18:
    case 19:
    case 20: {
        net_cols o;
        unsigned nc = k % NDEC - 17;
        if (net__dec_cols(&rd, nc, &o, "cols") == 0)
            for (unsigned i = 0; i < nc; i++)
                touch(o.c[i], (size_t)o.n * 8);
        break;
    }
    case 21: {
        net_sample_req o;
        if (net__dec_sample_req(&rd, &o) == 0) {
            touch(o.fanout, (size_t)o.nfan * 4);
            for (uint32_t t = 0; t < o.nnt; t++)
                touch(o.seeds[t], (size_t)o.nseeds[t] * 8);
            for (uint32_t e = 0; o.has_ex && e < o.net; e++)
                touch(o.ex[e], (size_t)o.nex[e] * 8);
            net__sample_req_free(&o);
        }
        break;
    }
    case 22: {
        net_sample_rep o;
        if (net__dec_sample_rep(&rd, &o) == 0) {
            for (uint32_t e = 0; e < o.net; e++) {
                touch(o.e[e].cnt, (size_t)o.e[e].nc * 4);
                touch(o.e[e].nbr, (size_t)o.e[e].n *
                      (o.e[e].wide & NET_SAMPLE_WIDE_NBR ? 8 : 4));
                touch(o.e[e].eid, (size_t)o.e[e].n *
                      (o.e[e].wide & NET_SAMPLE_WIDE_EID ? 8 : 4));
            }
            net__sample_rep_free(&o);
        }
        break;
    }
    case 23: {
        char opt[NET_OPT_MAX + 1];
        net__dec_opt_reset(&rd, name, opt);
        break;
    }
    case 24: {
        net_batch_req o;
        if (net__dec_batch_req(&rd, &o) == 0) {
            touch(o.fanout, (size_t)o.nlayers * o.nfan * 4);
            for (uint32_t t = 0; t < o.nnt; t++)
                touch(o.seeds[t], (size_t)o.nseeds[t] * 8);
            for (uint32_t i = 0; i < o.nfeats + o.has_label + o.nefeats; i++)
                touch((const unsigned char *)o.tref[i].name,
                      strlen(o.tref[i].name));
            net__batch_req_free(&o);
        }
        break;
    }
    case 25: {
        net_batch_rep o;
        if (net__dec_batch_rep(&rd, &o) == 0) {
            for (uint32_t i = 0; i < o.nlayers * o.nnt; i++)
                touch(o.nodes[i].ids, (size_t)o.nodes[i].num_src *
                      (o.nodes[i].wide & NET_BATCH_WIDE ? 8 : 4));
            for (uint32_t i = 0; i < o.nlayers * o.net; i++) {
                touch(o.edges[i].src, (size_t)o.edges[i].n * 4);
                touch(o.edges[i].dst, (size_t)o.edges[i].n * 4);
                touch(o.edges[i].eid, (size_t)o.edges[i].n *
                      (o.edges[i].wide & NET_BATCH_WIDE ? 8 : 4));
            }
            for (uint32_t i = 0; i < o.nfeats + o.has_label +
                 o.nefeats * o.nlayers; i++)
                touch(o.rows[i].p, (size_t)(o.rows[i].n * o.rows[i].row_bytes));
            net__batch_rep_free(&o);
        }
        break;
    }
    default:
        if (net__dec_err(&rd, msg, sizeof msg) == 0)
            touch((const unsigned char *)msg, strlen(msg));
        break;
    }
    /* a failure always says why */
    if (rd.err && rd.why[0] == '\0')
        abort();
}

/* The decoders a message of type t is read with (request, reply). */
static void
decode_message(const net_hdr *h, const unsigned char *p, size_t n)
{
    int reply = (h->flags & NET_F_REPLY) != 0;

    if (reply && h->status != 0) {
        decode(15, p, n);
        return;
    }
    switch (h->type) {
    case NET_HELLO:     decode(reply ? 0 : 12, p, n); break;
    case NET_HANDSHAKE: decode(reply ? 2 : 1, p, n); break;
    case NET_SCHEMA:    decode(3, p, n); break;
    case NET_PULL:      decode(reply ? 5 : 4, p, n); break;
    case NET_PUSH:      decode(reply ? 14 : 6, p, n); break;
    case NET_CREATE:    decode(reply ? 8 : 7, p, n); break;
    case NET_DELETE:    decode(reply ? 12 : 9, p, n); break;
    case NET_BARRIER:   decode(10, p, n); break;
    case NET_STATS:     decode(11, p, n); break;
    case NET_SHUTDOWN:
    case NET_LEAVE:     decode(12, p, n); break;
    case NET_HEARTBEAT: decode(13, p, n); break;
    case NET_OPT_RESET: decode(reply ? 12 : 23, p, n); break;
    case NET_PBOOK:     decode(reply ? 16 : 15, p, n); break;
    case NET_SAMPLE:    decode(reply ? 22 : 21, p, n); break;
    case NET_SAMPLE_BATCH: decode(reply ? 25 : 24, p, n); break;
    case NET_FIND_EDGES: decode(reply ? 19 : 17, p, n); break;
    case NET_IN_DEGREES:
    case NET_OUT_DEGREES: decode(reply ? 18 : 17, p, n); break;
    case NET_IN_SUBGRAPH: decode(reply ? 20 : 17, p, n); break;
    default:            decode(15, p, n); break;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    net_hdr h;
    char why[256];
    unsigned char *copy;

    if (net__hdr_check(data, size, &h, why, sizeof why) == GKV_OK)
        decode_message(&h, data + NET_HDR_LEN, (size_t)h.len);
    else if (why[0] == '\0')
        abort();
    if (size == 0)
        return 0;
    /* the bare payload, in a buffer of exactly its size (ASan sees any
     * read past it) */
    copy = malloc(size - 1 + 1);
    if (copy == NULL)
        return 0;
    memcpy(copy, data + 1, size - 1);
    decode(data[0], copy, size - 1);
    free(copy);
    return 0;
}

#ifdef WIRE_FUZZ_SEEDS
/* ---- the seed corpus ---------------------------------------------------- */

static const char *g_dir;
static int g_n;

typedef void (*enc_fn)(net_wr *w, const void *arg);

/* Writes a whole message (header + payload) and the bare payload with its
 * decoder byte in front. */
static void
seed(uint16_t type, uint32_t flags, int32_t status, unsigned dec, enc_fn enc,
     const void *arg)
{
    net_wr w = {0};
    net_hdr h = {0};
    unsigned char *b;
    char path[4096];
    FILE *f;

    enc(&w, arg);
    b = calloc(1, NET_HDR_LEN + w.off + 1);
    w.p = b + NET_HDR_LEN;
    w.cap = w.off;
    w.off = 0;
    enc(&w, arg);
    h.magic = NET_MAGIC;
    h.version = NET_VERSION;
    h.type = type;
    h.flags = flags;
    h.status = status;
    h.req_id = 1;
    h.len = w.off;
    if (flags & NET_F_SUM)
        h.sum = net__sum(w.p, w.off);
    net__hdr_put(b, &h);
    snprintf(path, sizeof path, "%s/msg-%02d", g_dir, g_n);
    if ((f = fopen(path, "wb")) != NULL) {
        fwrite(b, 1, NET_HDR_LEN + w.off, f);
        fclose(f);
    }
    snprintf(path, sizeof path, "%s/payload-%02d", g_dir, g_n++);
    b[NET_HDR_LEN - 1] = (unsigned char)dec;
    if ((f = fopen(path, "wb")) != NULL) {
        fwrite(b + NET_HDR_LEN - 1, 1, w.off + 1, f);
        fclose(f);
    }
    free(b);
}

static void e_none(net_wr *w, const void *a) { (void)w; (void)a; }
static void e_hello(net_wr *w, const void *a) { net__enc_hello_rep(w, a); }
static void e_hs(net_wr *w, const void *a) { net__enc_hs_req(w, a); }
static void e_create(net_wr *w, const void *a) { net__enc_create_req(w, a); }
static void e_create_rep(net_wr *w, const void *a) { net__enc_create_rep(w, a); }
static void e_barrier(net_wr *w, const void *a) { net__enc_barrier(w, a); }
static void e_err(net_wr *w, const void *a) { net__enc_err(w, a); }
static void e_u8(net_wr *w, const void *a) { net__wr_u8(w, *(const uint8_t *)a); }
static void e_u64(net_wr *w, const void *a) { net__wr_u64(w, *(const uint64_t *)a); }
static void e_opt_reset(net_wr *w, const void *a) { net__wr_str(w, a); net__wr_str(w, "adam"); }

static void
e_schema(net_wr *w, const void *a)
{
    const net_tensor *t = a;

    net__wr_u64(w, 0x1234);
    {
        net_ident id;
        memset(&id, 0, sizeof id);
        id.proto = 1;
        id.num_servers = 2;
        snprintf(id.host, sizeof id.host, "h");
        snprintf(id.store, sizeof id.store, "/s");
        net__enc_ident(w, &id);
    }
    net__wr_u32(w, 2);
    net__enc_tensor(w, &t[0]);
    net__enc_tensor(w, &t[1]);
}

static void
e_pull(net_wr *w, const void *a)
{
    static const uint64_t ids[3] = {1, 5, 9};

    (void)a;
    net__enc_pull_req(w, "feat", ids, NULL, 3);
}

static void
e_pull_rep(net_wr *w, const void *a)
{
    unsigned char *p;

    (void)a;
    net__wr_u64(w, 2);
    net__wr_u64(w, 4);
    if ((p = net__wr_arr(w, 8)) != NULL)
        memset(p, 7, 8);
}

static void
e_push(net_wr *w, const void *a)
{
    static const uint64_t ids[2] = {3, 4};
    static const float rows[4] = {1, 2, 3, 4};
    static const double opt[4] = {0.1, 0, 0, 0};

    (void)a;
    net__enc_push_req(w, "emb", "adam", 0, opt, 8, ids, rows, NULL, 2);
}

static void
e_book(net_wr *w, const void *a)
{
    net_book b = {1, 9, (const unsigned char *)"{\"a\": 1}"};

    (void)a;
    net__enc_book(w, &b);
}

static void
e_ids(net_wr *w, const void *a)
{
    static const int64_t ids[3] = {4, 8, 15};

    (void)a;
    net__enc_ids_req(w, 0, ids, NULL, 3);
}

static void
e_cols(net_wr *w, const void *a)
{
    static const int64_t x[2] = {16, 23}, y[2] = {42, 4}, z[2] = {8, 15};
    const int64_t *cols[3] = {x, y, z};

    net__enc_cols(w, *(const unsigned *)a, cols, 2);
}

static void
e_sample(net_wr *w, const void *a)
{
    static const int64_t s0[2] = {1, 2}, x0[1] = {7};
    static const int fan[2] = {5, -1};
    const int64_t *seeds[1] = {s0}, *ex[2] = {x0, NULL};
    size_t ns[1] = {2}, nex[2] = {1, 0};
    net_sample_enc o = {0};

    (void)a;
    o.layer = 1;
    o.nnt = 1;
    o.net = 2;
    o.nfan = 2;
    o.seed = 42;
    o.fanout = fan;
    o.seeds = seeds;
    o.nseeds = ns;
    o.ex = ex;
    o.nex = nex;
    net__enc_sample_req(w, &o);
}

static void
e_sample_rep(net_wr *w, const void *a)
{
    static const int64_t x[2] = {3, 1ll << 33};
    static const uint32_t c[3] = {1, 1, 0};
    const net_sample_renc_et et[2] = {
        {2, 2, NET_SAMPLE_WIDE_EID, c, x, x},
        {0, 1, 0, c + 2, x, x},
    };

    (void)a;
    net__enc_sample_rep(w, 2, et);
}

static void
e_stats(net_wr *w, const void *a)
{
    (void)a;
    net__wr_u32(w, 1);
    net__wr_str(w, "pulls");
    net__wr_u64(w, 3);
}

int
main(int argc, char **argv)
{
    net_hello_rep hr;
    net_hs_req hs;
    net_tensor t[2];
    net_create_req cq;
    net_create_rep cr;
    net_barrier b = {4, 2};
    uint8_t one = 1;
    uint64_t n = 2;
    unsigned k1 = 1, k2 = 2, k3 = 3;

    if (argc != 2) {
        fprintf(stderr, "usage: wire_seeds DIR\n");
        return 2;
    }
    g_dir = argv[1];
    memset(&hr, 0, sizeof hr);
    hr.id.proto = 1;
    hr.id.num_servers = 1;
    snprintf(hr.id.host, sizeof hr.id.host, "host");
    memset(&hs, 0, sizeof hs);
    snprintf(hs.group, sizeof hs.group, "job");
    hs.flags = NET_HS_PROOF;
    memset(t, 0, sizeof t);
    snprintf(t[0].name, sizeof t[0].name, "feat");
    t[0].dtype = GKV_F32;
    t[0].ndim = 1;
    t[0].shape[0] = 4;
    t[0].hi = 10;
    t[0].row_bytes = 16;
    t[1] = t[0];
    snprintf(t[1].name, sizeof t[1].name, "emb");
    snprintf(t[1].policy, sizeof t[1].policy, "node:x");
    memset(&cq, 0, sizeof cq);
    cq.t = t[0];
    cq.t.row_bytes = 0;
    memset(&cr, 0, sizeof cr);
    cr.created = 1;
    cr.t = t[0];
    seed(NET_HELLO, 0, 0, 12, e_none, NULL);
    seed(NET_HELLO, NET_F_REPLY | NET_F_SUM, 0, 0, e_hello, &hr);
    seed(NET_HANDSHAKE, 0, 0, 1, e_hs, &hs);
    seed(NET_HANDSHAKE, NET_F_REPLY, 0, 2, e_schema, t);
    seed(NET_PULL, NET_F_SUM, 0, 4, e_pull, NULL);
    seed(NET_PULL, NET_F_REPLY, 0, 5, e_pull_rep, NULL);
    seed(NET_PUSH, 0, 0, 6, e_push, NULL);
    seed(NET_PUSH, NET_F_REPLY, 0, 14, e_u64, &n);
    seed(NET_CREATE, 0, 0, 7, e_create, &cq);
    seed(NET_CREATE, NET_F_REPLY, 0, 8, e_create_rep, &cr);
    seed(NET_BARRIER, 0, 0, 10, e_barrier, &b);
    seed(NET_STATS, NET_F_REPLY, 0, 11, e_stats, NULL);
    seed(NET_SHUTDOWN, 0, 0, 12, e_u8, &one);
    seed(NET_PULL, NET_F_REPLY, GKV_ERANGE, 15, e_err, "tensor 'feat': ID 99");
    seed(NET_PBOOK, NET_F_REPLY, 0, 16, e_book, NULL);
    seed(NET_FIND_EDGES, 0, 0, 17, e_ids, NULL);
    seed(NET_IN_DEGREES, NET_F_REPLY, 0, 18, e_cols, &k1);
    seed(NET_FIND_EDGES, NET_F_REPLY, 0, 19, e_cols, &k2);
    seed(NET_IN_SUBGRAPH, NET_F_REPLY, 0, 20, e_cols, &k3);
    seed(NET_SAMPLE, NET_F_SUM, 0, 21, e_sample, NULL);
    seed(NET_SAMPLE, NET_F_REPLY, 0, 22, e_sample_rep, NULL);
    seed(NET_OPT_RESET, 0, 0, 23, e_opt_reset, "emb");
    seed(NET_OPT_RESET, NET_F_REPLY, 0, 12, e_u8, &one);
    return 0;
}
#endif
