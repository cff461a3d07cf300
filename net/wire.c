/* wire.c - the wire codec: header, primitives and every message's payload
 * (doc/PROTOCOL.md). Pure functions of bytes: no sockets, no store, so the
 * fuzzer (test/fuzz/wire_fuzz.c) links this file alone. */
#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <xxhash.h>
#include "base/base.h"
#include "net/wire.h"

static const char *const type_names[NET_TYPE_MAX + 1] = {
    [NET_HELLO] = "hello",           [NET_HANDSHAKE] = "handshake",
    [NET_SCHEMA] = "schema",         [NET_PULL] = "pull",
    [NET_PUSH] = "push",             [NET_CREATE] = "create",
    [NET_DELETE] = "delete",         [NET_BARRIER] = "barrier",
    [NET_STATS] = "stats",           [NET_SHUTDOWN] = "shutdown",
    [NET_LEAVE] = "leave",           [NET_HEARTBEAT] = "heartbeat",
    [NET_OPT_RESET] = "opt_reset",
    [NET_PBOOK] = "pbook",           [NET_SAMPLE] = "sample",
    [NET_FIND_EDGES] = "find_edges", [NET_IN_DEGREES] = "in_degrees",
    [NET_OUT_DEGREES] = "out_degrees", [NET_IN_SUBGRAPH] = "in_subgraph",
    [NET_EDGE_BATCH] = "edge_batch", [NET_SAMPLE_BATCH] = "sample_batch",
};

const char *
net__type_name(unsigned type)
{
    return type <= NET_TYPE_MAX ? type_names[type] : NULL;
}

/* ---- header -------------------------------------------------------------- */

static void put16(unsigned char *b, uint16_t v) { memcpy(b, &v, 2); }
static void put32(unsigned char *b, uint32_t v) { memcpy(b, &v, 4); }
static void put64(unsigned char *b, uint64_t v) { memcpy(b, &v, 8); }
static uint16_t get16(const unsigned char *b) { uint16_t v; memcpy(&v, b, 2); return v; }
static uint32_t get32(const unsigned char *b) { uint32_t v; memcpy(&v, b, 4); return v; }
static uint64_t get64(const unsigned char *b) { uint64_t v; memcpy(&v, b, 8); return v; }

void
net__hdr_put(unsigned char *b, const net_hdr *h)
{
    put32(b, h->magic);
    put16(b + 4, h->version);
    put16(b + 6, h->type);
    put32(b + 8, h->flags);
    put32(b + 12, (uint32_t)h->status);
    put64(b + 16, h->req_id);
    put64(b + 24, h->session);
    put64(b + 32, h->len);
    put64(b + 40, h->sum);
}

int
net__hdr_get(const void *m, size_t len, net_hdr *h)
{
    const unsigned char *b = m;

    memset(h, 0, sizeof *h);
    if (len < NET_HDR_LEN)
        return -1;
    h->magic = get32(b);
    h->version = get16(b + 4);
    h->type = get16(b + 6);
    h->flags = get32(b + 8);
    h->status = (int32_t)get32(b + 12);
    h->req_id = get64(b + 16);
    h->session = get64(b + 24);
    h->len = get64(b + 32);
    h->sum = get64(b + 40);
    return 0;
}

uint64_t
net__sum(const void *p, size_t len)
{
    return XXH3_64bits(p, len);
}

gkv_err
net__hdr_check(const void *m, size_t len, net_hdr *h, char *why, size_t whylen)
{
    if (net__hdr_get(m, len, h) != 0) {
        snprintf(why, whylen, "message of %zu bytes is shorter than the "
                 "%u-byte header", len, NET_HDR_LEN);
        return GKV_EPROTO;
    }
    if (h->magic != NET_MAGIC) {
        snprintf(why, whylen, "bad magic 0x%08x (expected 0x%08x, \"GKVN\")",
                 h->magic, NET_MAGIC);
        return GKV_EPROTO;
    }
    if (h->version != NET_VERSION) {
        snprintf(why, whylen, "protocol version %u, this end speaks %u",
                 h->version, NET_VERSION);
        return GKV_EVERSION;
    }
    if (h->len != len - NET_HDR_LEN) {
        snprintf(why, whylen, "header says %llu payload bytes, %zu arrived",
                 (unsigned long long)h->len, len - NET_HDR_LEN);
        return GKV_EPROTO;
    }
    if (h->flags & ~NET_F_KNOWN) {
        snprintf(why, whylen, "unknown flags 0x%x", h->flags & ~NET_F_KNOWN);
        return GKV_EPROTO;
    }
    if ((h->flags & NET_F_SUM) &&
        net__sum((const unsigned char *)m + NET_HDR_LEN, (size_t)h->len) != h->sum) {
        snprintf(why, whylen, "payload checksum mismatch (XXH3 of %llu bytes)",
                 (unsigned long long)h->len);
        return GKV_EPROTO;
    }
    if (!(h->flags & NET_F_SUM) && h->sum != 0) {
        snprintf(why, whylen, "checksum field set without the checksum flag");
        return GKV_EPROTO;
    }
    return GKV_OK;
}

/* ---- reading ------------------------------------------------------------- */

void
net__rd_init(net_rd *r, const void *p, size_t len)
{
    r->p = p;
    r->len = len;
    r->off = 0;
    r->err = 0;
    r->why[0] = '\0';
}

static int rd_fail(net_rd *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int
rd_fail(net_rd *r, const char *fmt, ...)
{
    va_list ap;

    if (!r->err) {
        r->err = 1;
        va_start(ap, fmt);
        vsnprintf(r->why, sizeof r->why, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* Whether n more bytes are there; records the failure otherwise. */
static int
rd_have(net_rd *r, size_t n, const char *what)
{
    if (r->err)
        return 0;
    if (n > r->len - r->off) {
        rd_fail(r, "%s: needs %zu bytes, %zu left in the payload", what, n,
                r->len - r->off);
        return 0;
    }
    return 1;
}

uint8_t
net__rd_u8(net_rd *r, const char *what)
{
    if (!rd_have(r, 1, what))
        return 0;
    return r->p[r->off++];
}

uint16_t
net__rd_u16(net_rd *r, const char *what)
{
    uint16_t v;

    if (!rd_have(r, 2, what))
        return 0;
    v = get16(r->p + r->off);
    r->off += 2;
    return v;
}

uint32_t
net__rd_u32(net_rd *r, const char *what)
{
    uint32_t v;

    if (!rd_have(r, 4, what))
        return 0;
    v = get32(r->p + r->off);
    r->off += 4;
    return v;
}

uint64_t
net__rd_u64(net_rd *r, const char *what)
{
    uint64_t v;

    if (!rd_have(r, 8, what))
        return 0;
    v = get64(r->p + r->off);
    r->off += 8;
    return v;
}

double
net__rd_f64(net_rd *r, const char *what)
{
    uint64_t u = net__rd_u64(r, what);
    double d;

    memcpy(&d, &u, 8);
    return d;
}

void
net__rd_bytes(net_rd *r, void *dst, size_t n, const char *what)
{
    if (!rd_have(r, n, what)) {
        memset(dst, 0, n);
        return;
    }
    memcpy(dst, r->p + r->off, n);
    r->off += n;
}

void
net__rd_str(net_rd *r, char *dst, size_t cap, const char *what)
{
    size_t n = net__rd_u16(r, what);

    dst[0] = '\0';
    if (r->err)
        return;
    if (n >= cap) {
        rd_fail(r, "%s: string of %zu bytes, at most %zu allowed", what, n,
                cap - 1);
        return;
    }
    if (!rd_have(r, n, what))
        return;
    if (memchr(r->p + r->off, '\0', n) != NULL) {
        rd_fail(r, "%s: string of %zu bytes holds a NUL byte", what, n);
        return;
    }
    memcpy(dst, r->p + r->off, n);
    dst[n] = '\0';
    r->off += n;
}

static size_t
pad8(size_t off)
{
    return (8 - (off & 7)) & 7;
}

const unsigned char *
net__rd_arr(net_rd *r, uint64_t count, size_t elem, const char *what)
{
    size_t pad;
    const unsigned char *p;

    if (r->err)
        return NULL;
    pad = pad8(r->off);
    if (!rd_have(r, pad, what))
        return NULL;
    for (size_t i = 0; i < pad; i++)
        if (r->p[r->off + i] != 0) {
            rd_fail(r, "%s: padding byte %zu is not zero", what, i);
            return NULL;
        }
    r->off += pad;
    /* count x elem may overflow: compare by division first */
    if (elem != 0 && count > (r->len - r->off) / elem) {
        rd_fail(r, "%s: %llu elements do not fit the %zu bytes left", what,
                (unsigned long long)count, r->len - r->off);
        return NULL;
    }
    p = r->p + r->off;
    r->off += (size_t)count * elem;
    return p;
}

void
net__rd_end(net_rd *r)
{
    if (!r->err && r->off != r->len)
        rd_fail(r, "%s: %zu bytes left over after the last field "
                "(payload of %zu bytes)", "payload", r->len - r->off, r->len);
}

/* ---- writing ------------------------------------------------------------- */

static unsigned char *
wr_take(net_wr *w, size_t n)
{
    unsigned char *p = NULL;

    if (w->p != NULL) {
        assert(w->off + n <= w->cap);
        p = w->p + w->off;
    }
    w->off += n;
    return p;
}

void net__wr_u8(net_wr *w, uint8_t v) { unsigned char *p = wr_take(w, 1); if (p) *p = v; }
void net__wr_u16(net_wr *w, uint16_t v) { unsigned char *p = wr_take(w, 2); if (p) put16(p, v); }
void net__wr_u32(net_wr *w, uint32_t v) { unsigned char *p = wr_take(w, 4); if (p) put32(p, v); }
void net__wr_u64(net_wr *w, uint64_t v) { unsigned char *p = wr_take(w, 8); if (p) put64(p, v); }

void
net__wr_f64(net_wr *w, double v)
{
    uint64_t u;

    memcpy(&u, &v, 8);
    net__wr_u64(w, u);
}

void
net__wr_bytes(net_wr *w, const void *b, size_t n)
{
    unsigned char *p = wr_take(w, n);

    if (p != NULL && n > 0)
        memcpy(p, b, n);
}

void
net__wr_str(net_wr *w, const char *s)
{
    size_t n = s != NULL ? strlen(s) : 0;

    if (n > 65535)
        n = 65535;
    net__wr_u16(w, (uint16_t)n);
    net__wr_bytes(w, s, n);
}

void
net__wr_pad(net_wr *w)
{
    size_t n = pad8(w->off);
    unsigned char *p = wr_take(w, n);

    if (p != NULL)
        memset(p, 0, n);
}

unsigned char *
net__wr_arr(net_wr *w, size_t n)
{
    net__wr_pad(w);
    return wr_take(w, n);
}

/* ---- messages ------------------------------------------------------------ */

static int
done(net_rd *r)
{
    net__rd_end(r);
    return r->err ? -1 : 0;
}

void
net__enc_ident(net_wr *w, const net_ident *id)
{
    net__wr_u32(w, id->proto);
    net__wr_u32(w, id->server_id);
    net__wr_u32(w, id->num_servers);
    net__wr_u32(w, id->machine);
    net__wr_u32(w, id->pid);
    net__wr_u32(w, id->lease_ms);
    net__wr_u32(w, id->flags);
    net__wr_u64(w, id->max_msg);
    net__wr_u64(w, id->start_ms);
    net__wr_str(w, id->host);
    net__wr_str(w, id->name);
    net__wr_str(w, id->store);
    net__wr_str(w, id->version);
}

static void
dec_ident(net_rd *r, net_ident *id)
{
    id->proto = net__rd_u32(r, "identity.proto");
    id->server_id = net__rd_u32(r, "identity.server_id");
    id->num_servers = net__rd_u32(r, "identity.num_servers");
    id->machine = net__rd_u32(r, "identity.machine");
    id->pid = net__rd_u32(r, "identity.pid");
    id->lease_ms = net__rd_u32(r, "identity.lease_ms");
    id->flags = net__rd_u32(r, "identity.flags");
    id->max_msg = net__rd_u64(r, "identity.max_msg");
    id->start_ms = net__rd_u64(r, "identity.start_ms");
    net__rd_str(r, id->host, sizeof id->host, "identity.host");
    net__rd_str(r, id->name, sizeof id->name, "identity.name");
    net__rd_str(r, id->store, sizeof id->store, "identity.store");
    net__rd_str(r, id->version, sizeof id->version, "identity.version");
    if (!r->err && id->num_servers == 0)
        rd_fail(r, "identity: num_servers is 0");
    if (!r->err && id->server_id >= id->num_servers)
        rd_fail(r, "identity: server_id %u not below num_servers %u",
                id->server_id, id->num_servers);
}

void
net__enc_tensor(net_wr *w, const net_tensor *t)
{
    net__wr_str(w, t->name);
    net__wr_u8(w, t->dtype);
    net__wr_u8(w, t->ndim);
    net__wr_u16(w, t->flags);
    for (unsigned i = 0; i < t->ndim && i < GKV_MAX_DIMS; i++)
        net__wr_u64(w, t->shape[i]);
    net__wr_u64(w, t->lo);
    net__wr_u64(w, t->hi);
    net__wr_u64(w, t->row_bytes);
    net__wr_u32(w, t->chunk_rows);
    net__wr_str(w, t->policy);
}

/* The smallest encoded tensor: a 1-byte name and no dims. */
#define TENSOR_MIN_BYTES (2 + 1 + 4 + 8 * 3 + 4 + 2)

static void
dec_tensor(net_rd *r, net_tensor *t, int with_row_bytes)
{
    memset(t, 0, sizeof *t);
    net__rd_str(r, t->name, sizeof t->name, "tensor.name");
    t->dtype = net__rd_u8(r, "tensor.dtype");
    t->ndim = net__rd_u8(r, "tensor.ndim");
    t->flags = net__rd_u16(r, "tensor.flags");
    if (r->err || t->ndim > GKV_MAX_DIMS) {
        rd_fail(r, "tensor '%s': ndim %u, at most %d", t->name, t->ndim, GKV_MAX_DIMS);
        return;
    }
    for (unsigned i = 0; i < t->ndim; i++)
        t->shape[i] = net__rd_u64(r, "tensor.shape");
    t->lo = net__rd_u64(r, "tensor.lo");
    t->hi = net__rd_u64(r, "tensor.hi");
    t->row_bytes = net__rd_u64(r, "tensor.row_bytes");
    t->chunk_rows = net__rd_u32(r, "tensor.chunk_rows");
    net__rd_str(r, t->policy, sizeof t->policy, "tensor.policy");
    if (r->err)
        return;
    if (t->name[0] == '\0')
        rd_fail(r, "tensor: empty name");
    else if (gkv_dtype_size((gkv_dtype)t->dtype) == 0)
        rd_fail(r, "tensor '%s': unknown dtype %u", t->name, t->dtype);
    else if (t->hi <= t->lo)
        rd_fail(r, "tensor '%s': empty ID range [%llu, %llu)", t->name,
                (unsigned long long)t->lo, (unsigned long long)t->hi);
    if (!r->err && with_row_bytes) {
        /* row_bytes must be what dtype and shape say, without overflow */
        uint64_t e = 1;
        for (unsigned i = 0; i < t->ndim; i++) {
            if (t->shape[i] == 0 || e > UINT64_MAX / t->shape[i]) {
                rd_fail(r, "tensor '%s': bad row shape (dim %u is %llu)",
                        t->name, i, (unsigned long long)t->shape[i]);
                return;
            }
            e *= t->shape[i];
        }
        if (e > UINT64_MAX / 8 ||
            e * gkv_dtype_size((gkv_dtype)t->dtype) != t->row_bytes)
            rd_fail(r, "tensor '%s': row_bytes %llu does not match the shape "
                    "(%llu elements)", t->name,
                    (unsigned long long)t->row_bytes, (unsigned long long)e);
    }
}

void
net__enc_hello_rep(net_wr *w, const net_hello_rep *o)
{
    net__wr_bytes(w, o->nonce, NET_NONCE_LEN);
    net__enc_ident(w, &o->id);
}

int
net__dec_hello_rep(net_rd *r, net_hello_rep *o)
{
    memset(o, 0, sizeof *o);
    net__rd_bytes(r, o->nonce, NET_NONCE_LEN, "hello.nonce");
    dec_ident(r, &o->id);
    return done(r);
}

void
net__enc_hs_req(net_wr *w, const net_hs_req *o)
{
    net__wr_bytes(w, o->nonce, NET_NONCE_LEN);
    net__wr_str(w, o->group);
    net__wr_u32(w, o->rank);
    net__wr_u32(w, o->flags);
    net__wr_bytes(w, o->mac, NET_MAC_LEN);
    if (o->flags & NET_HS_INSTANCE)
        net__wr_u64(w, o->instance);
}

int
net__dec_hs_req(net_rd *r, net_hs_req *o)
{
    memset(o, 0, sizeof *o);
    net__rd_bytes(r, o->nonce, NET_NONCE_LEN, "handshake.nonce");
    net__rd_str(r, o->group, sizeof o->group, "handshake.group");
    o->rank = net__rd_u32(r, "handshake.rank");
    o->flags = net__rd_u32(r, "handshake.flags");
    net__rd_bytes(r, o->mac, NET_MAC_LEN, "handshake.proof");
    if (!r->err && (o->flags & ~(NET_HS_PROOF | NET_HS_OBSERVER |
                                 NET_HS_RESUME | NET_HS_INSTANCE)))
        rd_fail(r, "handshake: unknown flags 0x%x", o->flags);
    if (!r->err && (o->flags & NET_HS_INSTANCE)) {
        o->instance = net__rd_u64(r, "handshake.instance");
        if (!r->err && o->instance == 0)
            rd_fail(r, "handshake: job instance 0");
    }
    return done(r);
}

void
net__schema_free(net_schema *s)
{
    gkv__free(s->t);
    s->t = NULL;
    s->n = 0;
}

static int
dec_schema(net_rd *r, net_schema *o)
{
    uint32_t n = net__rd_u32(r, "schema.count");

    o->t = NULL;
    o->n = 0;
    if (r->err)
        return -1;
    /* bound the count by the bytes left before allocating */
    if (n > (r->len - r->off) / TENSOR_MIN_BYTES)
        return rd_fail(r, "schema.count: %u tensors cannot fit in %zu bytes",
                       n, r->len - r->off);
    if (n > 0 && (o->t = gkv__calloc(n, sizeof *o->t)) == NULL) {
        rd_fail(r, "schema: out of memory for %u tensors", n);
        return NET_DEC_NOMEM;
    }
    for (uint32_t i = 0; i < n && !r->err; i++)
        dec_tensor(r, &o->t[i], 1);
    o->n = n;
    if (r->err) {
        net__schema_free(o);
        return -1;
    }
    return 0;
}

int
net__dec_schema(net_rd *r, net_schema *o)
{
    int d;

    if ((d = dec_schema(r, o)) != 0)
        return d;
    if (done(r) != 0) {
        net__schema_free(o);
        return -1;
    }
    return 0;
}

/* The partition part of a graph server's handshake or PBOOK reply. */
static void
dec_book(net_rd *r, net_book *o)
{
    o->part_id = net__rd_u32(r, "book.part_id");
    o->len = net__rd_u64(r, "book.len");
    o->json = net__rd_arr(r, o->len, 1, "book.json");
    if (!r->err && o->len == 0)
        rd_fail(r, "book: an empty partition config");
}

int
net__dec_hs_rep(net_rd *r, net_hs_rep *o)
{
    int d;

    memset(o, 0, sizeof *o);
    o->session = net__rd_u64(r, "handshake.session");
    dec_ident(r, &o->id);
    if (!r->err && o->session == 0)
        rd_fail(r, "handshake: session 0 granted");
    if (r->err)
        return -1;
    if ((d = dec_schema(r, &o->schema)) != 0)
        return d;
    if (o->id.flags & NET_ID_GRAPH)
        dec_book(r, &o->book);
    if (done(r) != 0) {
        net__schema_free(&o->schema);
        return -1;
    }
    return 0;
}

void
net__enc_pull_req(net_wr *w, const char *name, const uint64_t *ids,
                  const size_t *idx, size_t n)
{
    unsigned char *p;

    net__wr_str(w, name);
    net__wr_u64(w, n);
    p = net__wr_arr(w, n * 8);
    if (p == NULL)
        return;
    if (idx == NULL)
        memcpy(p, ids, n * 8);
    else
        for (size_t j = 0; j < n; j++)
            memcpy(p + 8 * j, &ids[idx[j]], 8);
}

int
net__dec_pull_req(net_rd *r, net_pull_req *o)
{
    memset(o, 0, sizeof *o);
    net__rd_str(r, o->name, sizeof o->name, "pull.tensor");
    o->n = net__rd_u64(r, "pull.n");
    o->ids = net__rd_arr(r, o->n, 8, "pull.ids");
    return done(r);
}

int
net__dec_pull_rep(net_rd *r, net_pull_rep *o)
{
    memset(o, 0, sizeof *o);
    o->n = net__rd_u64(r, "pull reply.n");
    o->row_bytes = net__rd_u64(r, "pull reply.row_bytes");
    if (!r->err && o->row_bytes == 0 && o->n > 0)
        rd_fail(r, "pull reply: rows of 0 bytes");
    if (!r->err && o->row_bytes != 0 && o->n > UINT64_MAX / o->row_bytes)
        rd_fail(r, "pull reply: %llu rows of %llu bytes overflow",
                (unsigned long long)o->n, (unsigned long long)o->row_bytes);
    if (!r->err)
        o->rows = net__rd_arr(r, o->n * o->row_bytes, 1, "pull reply.rows");
    return done(r);
}

void
net__enc_push_req(net_wr *w, const char *name, const char *handler,
                  unsigned flags, const double opt[4], size_t row_bytes, const uint64_t *ids,
                  const void *rows, const size_t *idx, size_t n)
{
    const unsigned char *rw = rows;
    unsigned char *p;

    net__wr_str(w, name);
    net__wr_str(w, handler);
    for (int i = 0; i < 4; i++)
        net__wr_f64(w, opt[i]);
    net__wr_u64(w, row_bytes);
    net__wr_u64(w, n);
    p = net__wr_arr(w, n * 8);
    if (p != NULL) {
        if (idx == NULL)
            memcpy(p, ids, n * 8);
        else
            for (size_t j = 0; j < n; j++)
                memcpy(p + 8 * j, &ids[idx[j]], 8);
    }
    p = net__wr_arr(w, n * row_bytes);
    if (p != NULL) {
        if (idx == NULL)
            memcpy(p, rw, n * row_bytes);
        else
            for (size_t j = 0; j < n; j++)
                memcpy(p + j * row_bytes, rw + idx[j] * row_bytes, row_bytes);
    }
    net__wr_u8(w, (uint8_t)flags);
}

int
net__dec_push_req(net_rd *r, net_push_req *o)
{
    memset(o, 0, sizeof *o);
    net__rd_str(r, o->name, sizeof o->name, "push.tensor");
    net__rd_str(r, o->handler, sizeof o->handler, "push.handler");
    o->lr = net__rd_f64(r, "push.lr");
    o->eps = net__rd_f64(r, "push.eps");
    o->beta1 = net__rd_f64(r, "push.beta1");
    o->beta2 = net__rd_f64(r, "push.beta2");
    o->row_bytes = net__rd_u64(r, "push.row_bytes");
    o->n = net__rd_u64(r, "push.n");
    o->ids = net__rd_arr(r, o->n, 8, "push.ids");
    if (!r->err && o->row_bytes != 0 && o->n > UINT64_MAX / o->row_bytes)
        rd_fail(r, "push: %llu rows of %llu bytes overflow",
                (unsigned long long)o->n, (unsigned long long)o->row_bytes);
    if (!r->err && o->row_bytes == 0 && o->n > 0)
        rd_fail(r, "push: rows of 0 bytes");
    if (!r->err)
        o->rows = net__rd_arr(r, o->n * o->row_bytes, 1, "push.rows");
    o->flags = net__rd_u8(r, "push.flags");
    if (!r->err && (o->flags & ~GKV_PUSH_DUPS_SUM) != 0)
        rd_fail(r, "unknown flags 0x%x", o->flags);
    return done(r);
}

void
net__enc_create_req(net_wr *w, const net_create_req *o)
{
    net__enc_tensor(w, &o->t);
    net__wr_u8(w, o->init);
    net__wr_f64(w, o->a);
    net__wr_f64(w, o->b);
    net__wr_u64(w, o->seed);
}

int
net__dec_create_req(net_rd *r, net_create_req *o)
{
    memset(o, 0, sizeof *o);
    dec_tensor(r, &o->t, 0);
    o->init = net__rd_u8(r, "create.init");
    o->a = net__rd_f64(r, "create.a");
    o->b = net__rd_f64(r, "create.b");
    o->seed = net__rd_u64(r, "create.seed");
    if (!r->err && o->init > GKV_INIT_NORMAL)
        rd_fail(r, "create: unknown initializer %u", o->init);
    return done(r);
}

void
net__enc_create_rep(net_wr *w, const net_create_rep *o)
{
    net__wr_u8(w, o->created);
    net__enc_tensor(w, &o->t);
}

int
net__dec_create_rep(net_rd *r, net_create_rep *o)
{
    memset(o, 0, sizeof *o);
    o->created = net__rd_u8(r, "create reply.created");
    dec_tensor(r, &o->t, 1);
    if (!r->err && o->created > 1)
        rd_fail(r, "create reply: created is %u", o->created);
    return done(r);
}

int
net__dec_name(net_rd *r, char name[GKV_NAME_MAX + 1])
{
    net__rd_str(r, name, GKV_NAME_MAX + 1, "tensor name");
    if (!r->err && name[0] == '\0')
        rd_fail(r, "tensor name: empty");
    return done(r);
}

int
net__dec_opt_reset(net_rd *r, char name[GKV_NAME_MAX + 1],
                   char opt[NET_OPT_MAX + 1])
{
    net__rd_str(r, name, GKV_NAME_MAX + 1, "opt_reset.tensor");
    if (!r->err && name[0] == '\0')
        rd_fail(r, "opt_reset.tensor: empty");
    net__rd_str(r, opt, NET_OPT_MAX + 1, "opt_reset.optimizer");
    if (!r->err && opt[0] != '\0' && strcmp(opt, "adagrad") != 0 &&
        strcmp(opt, "adam") != 0)
        rd_fail(r, "opt_reset.optimizer: '%s' is not \"\", \"adagrad\" or "
                "\"adam\"", opt);
    return done(r);
}

void
net__enc_barrier(net_wr *w, const net_barrier *o)
{
    net__wr_u32(w, o->group_size);
    net__wr_u64(w, o->seq);
}

int
net__dec_barrier(net_rd *r, net_barrier *o)
{
    o->group_size = net__rd_u32(r, "barrier.group_size");
    o->seq = net__rd_u64(r, "barrier.seq");
    if (!r->err && o->group_size == 0)
        rd_fail(r, "barrier: group size 0");
    return done(r);
}

int
net__dec_stats(net_rd *r, net_stats *o)
{
    uint32_t n = net__rd_u32(r, "stats.count");

    o->n = 0;
    if (!r->err && n > NET_STATS_MAX)
        return rd_fail(r, "stats: %u entries, at most %u", n,
                       NET_STATS_MAX);
    for (uint32_t i = 0; i < n && !r->err; i++) {
        net__rd_str(r, o->kv[i].key, sizeof o->kv[i].key, "stats.key");
        o->kv[i].val = net__rd_u64(r, "stats.value");
    }
    if (!r->err)
        o->n = n;
    return done(r);
}

int
net__dec_u8(net_rd *r, uint8_t *o, const char *what)
{
    *o = net__rd_u8(r, what);
    return done(r);
}

int
net__dec_u32(net_rd *r, uint32_t *o, const char *what)
{
    *o = net__rd_u32(r, what);
    return done(r);
}

int
net__dec_u64(net_rd *r, uint64_t *o, const char *what)
{
    *o = net__rd_u64(r, what);
    return done(r);
}

int
net__dec_empty(net_rd *r)
{
    return done(r);
}

void
net__enc_err(net_wr *w, const char *msg)
{
    char buf[NET_ERRMSG_MAX];

    snprintf(buf, sizeof buf, "%s", msg != NULL ? msg : "");
    net__wr_str(w, buf);
}

int
net__dec_err(net_rd *r, char *msg, size_t cap)
{
    char buf[NET_ERRMSG_MAX + 1];

    net__rd_str(r, buf, sizeof buf, "error message");
    if (done(r) != 0)
        return -1;
    /* the peer's text goes into logs and messages: keep it printable */
    for (char *c = buf; *c; c++)
        if ((unsigned char)*c < 0x20 || (unsigned char)*c > 0x7e)
            *c = '?';
    snprintf(msg, cap, "%s", buf);
    return 0;
}

/* ---- graph requests ------------------------------------------------------ */

void
net__enc_book(net_wr *w, const net_book *o)
{
    unsigned char *p;

    net__wr_u32(w, o->part_id);
    net__wr_u64(w, o->len);
    if ((p = net__wr_arr(w, (size_t)o->len)) != NULL && o->len > 0)
        memcpy(p, o->json, (size_t)o->len);
}

int
net__dec_book(net_rd *r, net_book *o)
{
    memset(o, 0, sizeof *o);
    dec_book(r, o);
    return done(r);
}

void
net__enc_ids_req(net_wr *w, uint32_t etype, const int64_t *ids,
                 const size_t *idx, size_t n)
{
    unsigned char *p;

    net__wr_u32(w, etype);
    net__wr_u64(w, n);
    if ((p = net__wr_arr(w, n * 8)) == NULL)
        return;
    if (idx == NULL) {
        if (n > 0)
            memcpy(p, ids, n * 8);
    } else {
        for (size_t j = 0; j < n; j++)
            memcpy(p + 8 * j, &ids[idx[j]], 8);
    }
}

int
net__dec_ids_req(net_rd *r, net_ids_req *o)
{
    memset(o, 0, sizeof *o);
    o->etype = net__rd_u32(r, "ids.etype");
    o->n = net__rd_u64(r, "ids.n");
    o->ids = net__rd_arr(r, o->n, 8, "ids.ids");
    return done(r);
}

void
net__enc_cols(net_wr *w, unsigned k, const int64_t *const *cols, size_t n)
{
    net__wr_u64(w, n);
    for (unsigned i = 0; i < k; i++) {
        unsigned char *p = net__wr_arr(w, n * 8);
        if (p != NULL && n > 0)
            memcpy(p, cols[i], n * 8);
    }
}

static void
dec_cols(net_rd *r, unsigned k, net_cols *o, const char *what)
{
    memset(o, 0, sizeof *o);
    o->n = net__rd_u64(r, what);
    for (unsigned i = 0; i < k && i < 3; i++)
        o->c[i] = net__rd_arr(r, o->n, 8, what);
}

int
net__dec_cols(net_rd *r, unsigned k, net_cols *o, const char *what)
{
    if (k < 1 || k > 3)
        return rd_fail(r, "%s: %u columns", what, k);
    dec_cols(r, k, o, what);
    return done(r);
}

/* The fanouts (an arr of n i32) and the seeds (per node type a u64 count
 * and an i64 arr) of SAMPLE and SAMPLE_BATCH requests. */
static void
enc_fan_seeds(net_wr *w, const int *fan, size_t n, uint32_t nnt,
              const int64_t *const *seeds, const size_t *nseeds)
{
    unsigned char *p;

    if ((p = net__wr_arr(w, n * 4)) != NULL)
        for (size_t i = 0; i < n; i++)
            put32(p + 4 * i, (uint32_t)fan[i]);
    for (uint32_t t = 0; t < nnt; t++) {
        net__wr_u64(w, nseeds[t]);
        if ((p = net__wr_arr(w, nseeds[t] * 8)) != NULL && nseeds[t] > 0)
            memcpy(p, seeds[t], nseeds[t] * 8);
    }
}

/* Their decoder ('what': the message's name in the reasons): the nnt
 * counts and seed arrays into *nseeds and *seeds (gkv__calloc'd; the
 * caller frees them, also on failure). 0, or -1 with r failed. */
static int
dec_seeds(net_rd *r, uint32_t nnt, uint64_t **nseeds,
          const unsigned char ***seeds, const char *what)
{
    char fc[48], fs[48];

    /* every type takes at least 8 bytes (its count): bound before
     * allocating */
    if (nnt == 0 || nnt > (r->len - r->off) / 8)
        return rd_fail(r, "%s.num_ntypes: %u node types cannot fit in %zu "
                       "bytes", what, nnt, r->len - r->off);
    if ((*nseeds = gkv__calloc(nnt, sizeof **nseeds)) == NULL ||
        (*seeds = gkv__calloc(nnt, sizeof **seeds)) == NULL) {
        rd_fail(r, "%s: out of memory for %u node types", what, nnt);
        return NET_DEC_NOMEM;
    }
    snprintf(fc, sizeof fc, "%s.nseeds", what);
    snprintf(fs, sizeof fs, "%s.seeds", what);
    for (uint32_t t = 0; t < nnt && !r->err; t++) {
        (*nseeds)[t] = net__rd_u64(r, fc);
        (*seeds)[t] = net__rd_arr(r, (*nseeds)[t], 8, fs);
    }
    return r->err ? -1 : 0;
}

void
net__enc_sample_req(net_wr *w, const net_sample_enc *o)
{
    unsigned char *p;

    net__wr_u32(w, o->layer);
    net__wr_u32(w, o->dir);
    net__wr_u32(w, o->flags);
    net__wr_u32(w, o->nnt);
    net__wr_u32(w, o->net);
    net__wr_u32(w, o->nfan);
    net__wr_u64(w, o->seed);
    enc_fan_seeds(w, o->fanout, o->nfan, o->nnt, o->seeds, o->nseeds);
    net__wr_u32(w, o->ex != NULL);
    for (uint32_t e = 0; o->ex != NULL && e < o->net; e++) {
        size_t n = o->ex[e] != NULL ? o->nex[e] : 0;
        net__wr_u64(w, n);
        if ((p = net__wr_arr(w, n * 8)) != NULL && n > 0)
            memcpy(p, o->ex[e], n * 8);
    }
    for (uint32_t e = 0; (o->flags & NET_SAMPLE_F_FEAT) && e < o->net; e++)
        net__wr_str(w, o->feat != NULL ? o->feat[e] : NULL);
    for (uint32_t e = 0; (o->flags & NET_SAMPLE_F_WPOS) && e < o->net; e++) {
        size_t nc = o->nwc[e], n = nc > 0 ? o->nw[e] : 0;
        net__wr_u64(w, nc);
        if ((p = net__wr_arr(w, nc * 4)) != NULL && nc > 0)
            memcpy(p, o->wc[e], nc * 4);
        net__wr_u64(w, n);
        if ((p = net__wr_arr(w, n * 4)) != NULL && n > 0)
            memcpy(p, o->w[e], n * 4);
    }
}

const char *
gkv_edge_feat_name_bad(const char *name)
{
    return name == NULL ? "no name" : net__feat_name_bad(name, strlen(name));
}

const char *
net__feat_name_bad(const char *name, size_t n)
{
    if (n == 0)
        return "an empty name";
    if (n > GKV_NAME_MAX)
        return "more bytes than a tensor name may have (255)";
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)name[i];
        if (ch == '#')
            return "'#' (it marks optimizer state) in the name";
        if (ch <= 0x20 || ch >= 0x7f)
            return "a byte that is not printable ASCII (or a space) in the "
                   "name";
    }
    return NULL;
}

void
net__sample_req_free(net_sample_req *o)
{
    gkv__free(o->nseeds);
    gkv__free(o->seeds);
    gkv__free(o->nex);
    gkv__free(o->ex);
    gkv__free(o->feat);
    gkv__free(o->featbuf);
    gkv__free(o->nwc);
    gkv__free(o->nw);
    gkv__free(o->wc);
    gkv__free(o->w);
    o->nwc = o->nw = NULL;
    o->wc = o->w = NULL;
    o->nseeds = NULL;
    o->seeds = NULL;
    o->nex = NULL;
    o->ex = NULL;
    o->feat = NULL;
    o->featbuf = NULL;
}

/* The edge-feature names of a SAMPLE request (NET_SAMPLE_F_FEAT): per edge
 * type a str, "" for none. Each at least its 2-byte length: bound the
 * count before allocating; the copies take at most the bytes left plus a
 * NUL each. */
static void
dec_sample_feat(net_rd *r, net_sample_req *o)
{
    size_t left = r->len - r->off, at = 0;

    if (o->net == 0 || o->net > left / 2) {
        rd_fail(r, "sample.edge_w_feat: %u edge types cannot fit in %zu "
                "bytes", o->net, left);
        return;
    }
    if ((o->feat = gkv__calloc(o->net, sizeof *o->feat)) == NULL ||
        (o->featbuf = gkv__malloc(left + o->net)) == NULL) {
        rd_fail(r, "sample: out of memory for %u edge-feature names", o->net);
        return;
    }
    for (uint32_t e = 0; e < o->net && !r->err; e++) {
        size_t n = net__rd_u16(r, "sample.edge_w_feat");
        const char *why;

        if (r->err || n == 0)
            continue;
        if (!rd_have(r, n, "sample.edge_w_feat"))
            return;
        if ((why = net__feat_name_bad((const char *)r->p + r->off, n))
            != NULL) {
            rd_fail(r, "sample.edge_w_feat[%u]: a name of %zu bytes with "
                    "%s", e, n, why);
            return;
        }
        memcpy(o->featbuf + at, r->p + r->off, n);
        o->featbuf[at + n] = '\0';
        o->feat[e] = o->featbuf + at;
        at += n + 1;
        r->off += n;
    }
}

/* The weights by position of a SAMPLE request (NET_SAMPLE_F_WPOS): per
 * edge type at least its two u64 counts; the counts must sum to the
 * number of weights. */
static void
dec_sample_wpos(net_rd *r, net_sample_req *o)
{
    if (o->net == 0 || o->net > (r->len - r->off) / 16) {
        rd_fail(r, "sample.weights: %u edge types cannot fit in %zu bytes",
                o->net, r->len - r->off);
        return;
    }
    if ((o->nwc = gkv__calloc(o->net, sizeof *o->nwc)) == NULL ||
        (o->nw = gkv__calloc(o->net, sizeof *o->nw)) == NULL ||
        (o->wc = gkv__calloc(o->net, sizeof *o->wc)) == NULL ||
        (o->w = gkv__calloc(o->net, sizeof *o->w)) == NULL) {
        rd_fail(r, "sample: out of memory for %u edge types", o->net);
        return;
    }
    for (uint32_t e = 0; e < o->net && !r->err; e++) {
        uint64_t sum = 0;

        o->nwc[e] = net__rd_u64(r, "sample.weight_counts");
        o->wc[e] = net__rd_arr(r, o->nwc[e], 4, "sample.weight_counts");
        o->nw[e] = net__rd_u64(r, "sample.weights");
        o->w[e] = net__rd_arr(r, o->nw[e], 4, "sample.weights");
        if (r->err)
            return;
        for (uint64_t i = 0; i < o->nwc[e]; i++)
            sum += get32(o->wc[e] + 4 * i);
        if (sum != o->nw[e]) {
            rd_fail(r, "sample.weights[%u]: the counts sum to %llu, and %llu "
                    "weights follow", e, (unsigned long long)sum,
                    (unsigned long long)o->nw[e]);
            return;
        }
    }
}

int
net__dec_sample_req(net_rd *r, net_sample_req *o)
{
    memset(o, 0, sizeof *o);
    o->layer = net__rd_u32(r, "sample.layer");
    o->dir = net__rd_u32(r, "sample.dir");
    o->flags = net__rd_u32(r, "sample.flags");
    o->nnt = net__rd_u32(r, "sample.num_ntypes");
    o->net = net__rd_u32(r, "sample.num_etypes");
    o->nfan = net__rd_u32(r, "sample.nfan");
    o->seed = net__rd_u64(r, "sample.seed");
    o->fanout = net__rd_arr(r, o->nfan, 4, "sample.fanout");
    if (r->err)
        return -1;
    if (dec_seeds(r, o->nnt, &o->nseeds, &o->seeds, "sample") != 0) {
        net__sample_req_free(o);
        return -1;
    }
    o->has_ex = net__rd_u32(r, "sample.has_exclude");
    if (!r->err && o->has_ex > 1)
        rd_fail(r, "sample.has_exclude: %u is neither 0 nor 1", o->has_ex);
    if (!r->err && o->has_ex) {
        if (o->net == 0 || o->net > (r->len - r->off) / 8)
            rd_fail(r, "sample.exclude: %u edge types cannot fit in %zu "
                    "bytes", o->net, r->len - r->off);
        else if ((o->nex = gkv__calloc(o->net, sizeof *o->nex)) == NULL ||
                 (o->ex = gkv__calloc(o->net, sizeof *o->ex)) == NULL)
            rd_fail(r, "sample: out of memory for %u edge types", o->net);
        for (uint32_t e = 0; e < o->net && !r->err; e++) {
            o->nex[e] = net__rd_u64(r, "sample.nexclude");
            o->ex[e] = net__rd_arr(r, o->nex[e], 8, "sample.exclude");
        }
    }
    if (!r->err && (o->flags & NET_SAMPLE_F_FEAT))
        dec_sample_feat(r, o);
    if (!r->err && (o->flags & NET_SAMPLE_F_WPOS))
        dec_sample_wpos(r, o);
    if (done(r) != 0) {
        net__sample_req_free(o);
        return -1;
    }
    return 0;
}

void
net__sample_rep_free(net_sample_rep *o)
{
    gkv__free(o->e);
    o->e = NULL;
    o->net = 0;
}

/* One column of n IDs, narrowed to u32 unless wide. */
static void
enc_idcol(net_wr *w, const int64_t *v, size_t n, int wide)
{
    unsigned char *p = net__wr_arr(w, n * (wide ? 8 : 4));

    if (p == NULL || n == 0)
        return;
    if (wide) {
        memcpy(p, v, n * 8);
    } else {
        for (size_t i = 0; i < n; i++)
            put32(p + 4 * i, (uint32_t)v[i]);
    }
}

void
net__enc_sample_rep(net_wr *w, uint32_t net, const net_sample_renc_et *e)
{
    net__wr_u32(w, net);
    for (uint32_t k = 0; k < net; k++) {
        unsigned char *p;

        net__wr_u64(w, e[k].n);
        net__wr_u64(w, e[k].nc);
        net__wr_u32(w, e[k].wide);
        if ((p = net__wr_arr(w, e[k].nc * 4)) != NULL)
            for (size_t i = 0; i < e[k].nc; i++)
                put32(p + 4 * i, e[k].cnt[i]);
        enc_idcol(w, e[k].nbr, e[k].n, (e[k].wide & NET_SAMPLE_WIDE_NBR) != 0);
        enc_idcol(w, e[k].eid, e[k].n, (e[k].wide & NET_SAMPLE_WIDE_EID) != 0);
    }
}

static void
dec_sample_et(net_rd *r, net_sample_et *o)
{
    uint64_t sum = 0;

    o->n = net__rd_u64(r, "sample.num_edges");
    o->nc = net__rd_u64(r, "sample.num_counts");
    o->wide = net__rd_u32(r, "sample.wide");
    if (!r->err && (o->wide & ~(NET_SAMPLE_WIDE_NBR | NET_SAMPLE_WIDE_EID))) {
        rd_fail(r, "sample.wide: flags 0x%x have unknown bits", o->wide);
        return;
    }
    o->cnt = net__rd_arr(r, o->nc, 4, "sample.counts");
    o->nbr = net__rd_arr(r, o->n, o->wide & NET_SAMPLE_WIDE_NBR ? 8 : 4,
                         "sample.neighbours");
    o->eid = net__rd_arr(r, o->n, o->wide & NET_SAMPLE_WIDE_EID ? 8 : 4,
                         "sample.eids");
    if (r->err)
        return;
    for (uint64_t i = 0; i < o->nc; i++)
        sum += get32(o->cnt + 4 * i);
    if (sum != o->n)
        rd_fail(r, "sample.counts: they sum to %llu, and the reply has %llu "
                "edges", (unsigned long long)sum, (unsigned long long)o->n);
}

int
net__dec_sample_rep(net_rd *r, net_sample_rep *o)
{
    memset(o, 0, sizeof *o);
    o->net = net__rd_u32(r, "sample.num_etypes");
    if (r->err)
        return -1;
    if (o->net == 0 || o->net > (r->len - r->off) / 8)
        return rd_fail(r, "sample reply: %u edge types cannot fit in %zu "
                       "bytes", o->net, r->len - r->off);
    if ((o->e = gkv__calloc(o->net, sizeof *o->e)) == NULL) {
        /* not the sender's fault: the caller must not blame the server */
        rd_fail(r, "sample reply: out of memory for %u edge types", o->net);
        return NET_DEC_NOMEM;
    }
    for (uint32_t e = 0; e < o->net && !r->err; e++)
        dec_sample_et(r, &o->e[e]);
    if (done(r) != 0) {
        net__sample_rep_free(o);
        return -1;
    }
    return 0;
}

/* ---- SAMPLE_BATCH ----------------------------------------------------- */

void
net__enc_batch_req(net_wr *w, const net_batch_enc *o)
{
    net__wr_u32(w, o->nlayers);
    net__wr_u32(w, o->dir);
    net__wr_u32(w, o->flags);
    net__wr_u32(w, o->nnt);
    net__wr_u32(w, o->net);
    net__wr_u32(w, o->nfan);
    net__wr_u64(w, o->seed);
    net__wr_u32(w, o->timeout_ms);
    net__wr_u64(w, o->max_reply);
    enc_fan_seeds(w, o->fanout, (size_t)o->nlayers * o->nfan, o->nnt,
                  o->seeds, o->nseeds);
    net__wr_u32(w, o->nfeats);
    for (uint32_t f = 0; f < o->nfeats; f++) {
        net__wr_u32(w, (uint32_t)o->feats[f].type);
        net__wr_str(w, o->feats[f].name);
    }
    net__wr_u32(w, o->label != NULL);
    if (o->label != NULL) {
        net__wr_u32(w, (uint32_t)o->label->type);
        net__wr_str(w, o->label->name);
    }
    net__wr_u32(w, o->nefeats);
    for (uint32_t f = 0; f < o->nefeats; f++) {
        net__wr_u32(w, (uint32_t)o->efeats[f].type);
        net__wr_str(w, o->efeats[f].name);
    }
}

void
net__batch_req_free(net_batch_req *o)
{
    gkv__free(o->nseeds);
    gkv__free(o->seeds);
    gkv__free(o->tref);
    gkv__free(o->nbuf);
    o->nseeds = NULL;
    o->seeds = NULL;
    o->tref = NULL;
    o->nbuf = NULL;
}

/* Tensor references k .. k + n of a SAMPLE_BATCH request ('what' names
 * them): u32 type, str name; each name non-empty, copied into nbuf at
 * *at. */
static void
dec_trefs(net_rd *r, net_batch_req *o, uint32_t k, uint32_t n, size_t *at,
          const char *what)
{
    for (uint32_t i = 0; i < n && !r->err; i++) {
        net_tref *t = &o->tref[k + i];
        char name[GKV_NAME_MAX + 1];

        t->type = (int)net__rd_u32(r, what);
        net__rd_str(r, name, sizeof name, what);
        if (r->err)
            return;
        if (name[0] == '\0' || t->type < 0) {
            rd_fail(r, "%s[%u]: %s", what, i, name[0] == '\0' ?
                    "an empty tensor name" : "a type above 2^31");
            return;
        }
        memcpy(o->nbuf + *at, name, strlen(name) + 1);
        t->name = o->nbuf + *at;
        *at += strlen(name) + 1;
    }
}

int
net__dec_batch_req(net_rd *r, net_batch_req *o)
{
    size_t at = 0, nt, left;
    int d;

    memset(o, 0, sizeof *o);
    o->nlayers = net__rd_u32(r, "sample_batch.num_layers");
    o->dir = net__rd_u32(r, "sample_batch.dir");
    o->flags = net__rd_u32(r, "sample_batch.flags");
    o->nnt = net__rd_u32(r, "sample_batch.num_ntypes");
    o->net = net__rd_u32(r, "sample_batch.num_etypes");
    o->nfan = net__rd_u32(r, "sample_batch.nfan");
    o->seed = net__rd_u64(r, "sample_batch.seed");
    o->timeout_ms = net__rd_u32(r, "sample_batch.timeout_ms");
    o->max_reply = net__rd_u64(r, "sample_batch.max_reply");
    if (!r->err && (o->nlayers == 0 || o->nlayers > NET_BATCH_LAYERS_MAX))
        return rd_fail(r, "sample_batch.num_layers: %u is not in 1..%u",
                       o->nlayers, NET_BATCH_LAYERS_MAX);
    o->fanout = net__rd_arr(r, (uint64_t)o->nlayers * o->nfan, 4,
                            "sample_batch.fanouts");
    if (r->err)
        return -1;
    if ((d = dec_seeds(r, o->nnt, &o->nseeds, &o->seeds,
                       "sample_batch")) != 0) {
        net__batch_req_free(o);
        return d;
    }
    /* the tensors: each reference is at least 6 bytes (its type and the
     * name's length); bound the counts by what is left before allocating */
    o->nfeats = net__rd_u32(r, "sample_batch.num_feats");
    left = r->err ? 0 : r->len - r->off;
    if (!r->err && o->nfeats > NET_BATCH_TENSORS_MAX)
        rd_fail(r, "sample_batch.num_feats: %u features, more than %u",
                o->nfeats, NET_BATCH_TENSORS_MAX);
    if (!r->err && o->nfeats > left / 6)
        rd_fail(r, "sample_batch.num_feats: %u cannot fit in %zu bytes",
                o->nfeats, left);
    if (!r->err) {
        /* at most every byte left is a name byte, plus a NUL each */
        nt = (size_t)o->nfeats + 1 + left / 6;
        if ((o->tref = gkv__calloc(nt, sizeof *o->tref)) == NULL ||
            (o->nbuf = gkv__malloc(left + nt)) == NULL) {
            /* not the sender's fault: the server must not blame it */
            rd_fail(r, "sample_batch: out of memory for %zu tensor names",
                    nt);
            net__batch_req_free(o);
            return NET_DEC_NOMEM;
        }
    }
    dec_trefs(r, o, 0, o->nfeats, &at, "sample_batch.feats");
    o->has_label = net__rd_u32(r, "sample_batch.has_label");
    if (!r->err && o->has_label > 1)
        rd_fail(r, "sample_batch.has_label: %u is neither 0 nor 1",
                o->has_label);
    dec_trefs(r, o, o->nfeats, o->has_label, &at, "sample_batch.label");
    o->nefeats = net__rd_u32(r, "sample_batch.num_efeats");
    if (!r->err && o->nefeats > NET_BATCH_TENSORS_MAX)
        rd_fail(r, "sample_batch.num_efeats: %u edge features, more than "
                "%u", o->nefeats, NET_BATCH_TENSORS_MAX);
    if (!r->err && o->nefeats > (r->len - r->off) / 6)
        rd_fail(r, "sample_batch.num_efeats: %u cannot fit in %zu bytes",
                o->nefeats, r->len - r->off);
    dec_trefs(r, o, o->nfeats + o->has_label, o->nefeats, &at,
              "sample_batch.efeats");
    if (done(r) != 0) {
        net__batch_req_free(o);
        return -1;
    }
    return 0;
}

/* Whether any of v[0 .. n) needs 64 bits on the wire. */
static int
ids_wide(const int64_t *v, size_t n)
{
    uint64_t big = 0;

    for (size_t i = 0; i < n; i++)
        big |= (uint64_t)v[i];
    return big > UINT32_MAX;
}

/* A column of n local IDs (each below 2^31): u32. */
static void
enc_u32col(net_wr *w, const int64_t *v, size_t n)
{
    unsigned char *p = net__wr_arr(w, n * 4);

    for (size_t i = 0; p != NULL && i < n; i++)
        put32(p + 4 * i, (uint32_t)v[i]);
}

void
net__enc_batch_rep(net_wr *w, const net_batch_renc *o)
{
    size_t nrows = (size_t)o->nfeats + o->has_label +
                   (size_t)o->nefeats * o->nlayers;

    net__wr_u32(w, o->nlayers);
    net__wr_u32(w, o->nnt);
    net__wr_u32(w, o->net);
    for (uint32_t i = 0; i < o->nlayers; i++) {
        const gkv_block *b = &o->blocks[i];

        for (uint32_t t = 0; t < o->nnt; t++) {
            const gkv_block_nodes *x = &b->nodes[t];
            int wide = ids_wide(x->ids, x->num_src);

            net__wr_u64(w, x->num_src);
            net__wr_u64(w, x->num_dst);
            net__wr_u32(w, wide ? NET_BATCH_WIDE : 0);
            enc_idcol(w, x->ids, x->num_src, wide);
        }
        for (uint32_t e = 0; e < o->net; e++) {
            const gkv_sample_edges *x = &b->edges[e];
            int wide = ids_wide(x->eid, x->n);

            net__wr_u64(w, x->n);
            net__wr_u32(w, wide ? NET_BATCH_WIDE : 0);
            enc_u32col(w, x->src, x->n);
            enc_u32col(w, x->dst, x->n);
            enc_idcol(w, x->eid, x->n, wide);
        }
    }
    net__wr_u32(w, o->nfeats);
    net__wr_u32(w, o->has_label);
    net__wr_u32(w, o->nefeats);
    for (size_t k = 0; k < nrows; k++) {
        unsigned char *p;

        net__wr_u64(w, o->rows_n[k]);
        net__wr_u64(w, o->row_bytes[k]);
        p = net__wr_arr(w, (size_t)(o->rows_n[k] * o->row_bytes[k]));
        if (w->p != NULL)
            o->slot[k] = p;
    }
}

void
net__batch_rep_free(net_batch_rep *o)
{
    gkv__free(o->nodes);
    gkv__free(o->edges);
    gkv__free(o->rows);
    o->nodes = NULL;
    o->edges = NULL;
    o->rows = NULL;
}

/* The block lists of a SAMPLE_BATCH reply: per layer, per node type 20
 * bytes at least and per edge type 12 (bound before allocating). */
static int
dec_batch_blocks(net_rd *r, net_batch_rep *o)
{
    uint64_t nn = (uint64_t)o->nlayers * o->nnt;
    uint64_t ne = (uint64_t)o->nlayers * o->net;

    if (o->nlayers == 0 || o->nlayers > NET_BATCH_LAYERS_MAX || o->nnt == 0 ||
        o->net == 0 || nn > (r->len - r->off) / 20 ||
        ne > (r->len - r->off) / 12)
        return rd_fail(r, "sample_batch reply: %u layers of %u node and %u "
                       "edge types cannot fit in %zu bytes", o->nlayers,
                       o->nnt, o->net, r->len - r->off);
    if ((o->nodes = gkv__calloc((size_t)nn, sizeof *o->nodes)) == NULL ||
        (o->edges = gkv__calloc((size_t)ne, sizeof *o->edges)) == NULL) {
        rd_fail(r, "sample_batch reply: out of memory for %u layers",
                o->nlayers);
        return NET_DEC_NOMEM;
    }
    for (uint32_t i = 0; i < o->nlayers && !r->err; i++) {
        for (uint32_t t = 0; t < o->nnt && !r->err; t++) {
            net_bnodes *x = &o->nodes[i * o->nnt + t];

            x->num_src = net__rd_u64(r, "sample_batch.num_src");
            x->num_dst = net__rd_u64(r, "sample_batch.num_dst");
            x->wide = net__rd_u32(r, "sample_batch.wide");
            if (!r->err && (x->wide & ~NET_BATCH_WIDE))
                return rd_fail(r, "sample_batch.wide: flags 0x%x have "
                               "unknown bits", x->wide);
            if (!r->err && x->num_dst > x->num_src)
                return rd_fail(r, "sample_batch: block %u, node type %u: "
                               "%llu destination nodes of %llu", i, t,
                               (unsigned long long)x->num_dst,
                               (unsigned long long)x->num_src);
            x->ids = net__rd_arr(r, x->num_src, x->wide ? 8 : 4,
                                 "sample_batch.ids");
        }
        for (uint32_t e = 0; e < o->net && !r->err; e++) {
            net_bedges *x = &o->edges[i * o->net + e];

            x->n = net__rd_u64(r, "sample_batch.num_edges");
            x->wide = net__rd_u32(r, "sample_batch.wide");
            if (!r->err && (x->wide & ~NET_BATCH_WIDE))
                return rd_fail(r, "sample_batch.wide: flags 0x%x have "
                               "unknown bits", x->wide);
            x->src = net__rd_arr(r, x->n, 4, "sample_batch.src");
            x->dst = net__rd_arr(r, x->n, 4, "sample_batch.dst");
            x->eid = net__rd_arr(r, x->n, x->wide ? 8 : 4,
                                 "sample_batch.eids");
        }
    }
    return r->err ? -1 : 0;
}

int
net__dec_batch_rep(net_rd *r, net_batch_rep *o)
{
    uint64_t nrows;
    int d;

    memset(o, 0, sizeof *o);
    o->nlayers = net__rd_u32(r, "sample_batch.num_layers");
    o->nnt = net__rd_u32(r, "sample_batch.num_ntypes");
    o->net = net__rd_u32(r, "sample_batch.num_etypes");
    if (r->err)
        return -1;
    if ((d = dec_batch_blocks(r, o)) != 0) {
        net__batch_rep_free(o);
        return d;
    }
    o->nfeats = net__rd_u32(r, "sample_batch.num_feats");
    o->has_label = net__rd_u32(r, "sample_batch.has_label");
    o->nefeats = net__rd_u32(r, "sample_batch.num_efeats");
    nrows = (uint64_t)o->nfeats + o->has_label +
            (uint64_t)o->nefeats * o->nlayers;
    /* each entry is at least its two counts */
    if (!r->err && (o->has_label > 1 || nrows > (r->len - r->off) / 16))
        rd_fail(r, "sample_batch reply: %llu row entries cannot fit in %zu "
                "bytes", (unsigned long long)nrows, r->len - r->off);
    if (!r->err && (o->rows = gkv__calloc((size_t)nrows + 1,
                                          sizeof *o->rows)) == NULL) {
        rd_fail(r, "sample_batch reply: out of memory");
        net__batch_rep_free(o);
        return NET_DEC_NOMEM;
    }
    for (uint64_t k = 0; k < nrows && !r->err; k++) {
        net_rows *x = &o->rows[k];

        x->n = net__rd_u64(r, "sample_batch.num_rows");
        x->row_bytes = net__rd_u64(r, "sample_batch.row_bytes");
        if (!r->err && x->row_bytes != 0 &&
            x->n > (r->len - r->off) / x->row_bytes)
            rd_fail(r, "sample_batch: %llu rows of %llu bytes cannot fit in "
                    "%zu bytes", (unsigned long long)x->n,
                    (unsigned long long)x->row_bytes, r->len - r->off);
        else
            x->p = net__rd_arr(r, x->n * x->row_bytes, 1,
                               "sample_batch.rows");
    }
    if (done(r) != 0) {
        net__batch_rep_free(o);
        return -1;
    }
    return 0;
}
