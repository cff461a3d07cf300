/* net_wire_test.c - the wire codec (net/wire.c), ip_config parsing, token
 * files and handshake proofs, without sockets: every message encoded and
 * decoded back field by field; every truncation, oversized count, bad
 * string and bad header refused with a reason; no allocation leaked when
 * one fails. */
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "gkvt.h"
#include "gkvt_net.h"
#include "gkv_net.h"
#include "net/wire.h"

/* ---- helpers ---------------------------------------------------------------- */

/* Every cut of message b (len bytes) short of its end fails dec(&rd,
 * out) with a reason and allocates nothing. */
#define EXPECT_CUTS_FAIL(b, len, dec, out) do { \
    for (size_t cut_ = 0; cut_ < (len); cut_++) { \
        long live_ = gkvt_alloc_live(); \
        net_rd rd_; \
        net__rd_init(&rd_, (b), cut_); \
        assert_int_equal(dec(&rd_, (out)), -1); \
        assert_true(rd_.why[0] != '\0'); \
        assert_int_equal(gkvt_alloc_live(), live_); \
    } \
} while (0)

static void
write_text(const char *path, const char *text, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);

    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    chmod(path, mode);
}

static void
fill_ident(net_ident *id)
{
    memset(id, 0, sizeof *id);
    id->proto = NET_VERSION;
    id->server_id = 1;
    id->num_servers = 3;
    id->machine = 2;
    id->pid = 4242;
    id->lease_ms = 1500;
    id->flags = NET_ID_KEEP_ALIVE | NET_ID_AUTH;
    id->max_msg = 1u << 20;
    id->start_ms = 1700000000123ull;
    snprintf(id->host, sizeof id->host, "node-7");
    snprintf(id->name, sizeof id->name, "persist");
    snprintf(id->store, sizeof id->store, "/data/gkv/part0");
    snprintf(id->version, sizeof id->version, "%s", GKV_VERSION_STRING);
}

static void
fill_tensor(net_tensor *t, const char *name, uint64_t lo, uint64_t hi)
{
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->dtype = GKV_F32;
    t->ndim = 2;
    t->shape[0] = 4;
    t->shape[1] = 8;
    t->lo = lo;
    t->hi = hi;
    t->row_bytes = 4 * 8 * 4;
    t->chunk_rows = 512;
    t->flags = GKV_TENSOR_HOT;
}

static void
assert_ident_equal(const net_ident *a, const net_ident *b)
{
    assert_int_equal(a->proto, b->proto);
    assert_int_equal(a->server_id, b->server_id);
    assert_int_equal(a->num_servers, b->num_servers);
    assert_int_equal(a->machine, b->machine);
    assert_int_equal(a->pid, b->pid);
    assert_int_equal(a->lease_ms, b->lease_ms);
    assert_int_equal(a->flags, b->flags);
    assert_int_equal(a->max_msg, b->max_msg);
    assert_int_equal(a->start_ms, b->start_ms);
    assert_string_equal(a->host, b->host);
    assert_string_equal(a->name, b->name);
    assert_string_equal(a->store, b->store);
    assert_string_equal(a->version, b->version);
}

static void
assert_tensor_equal(const net_tensor *a, const net_tensor *b)
{
    assert_string_equal(a->name, b->name);
    assert_int_equal(a->dtype, b->dtype);
    assert_int_equal(a->ndim, b->ndim);
    assert_int_equal(a->flags, b->flags);
    for (unsigned i = 0; i < a->ndim; i++)
        assert_int_equal(a->shape[i], b->shape[i]);
    assert_int_equal(a->lo, b->lo);
    assert_int_equal(a->hi, b->hi);
    assert_int_equal(a->row_bytes, b->row_bytes);
    assert_int_equal(a->chunk_rows, b->chunk_rows);
    assert_string_equal(a->policy, b->policy);
}

/* ---- the header -------------------------------------------------------------- */

static void
test_header(void **state)
{
    unsigned char m[NET_HDR_LEN + 16];
    net_hdr h = {0}, g;
    char why[256];

    (void)state;
    memset(m + NET_HDR_LEN, 0xab, 16);
    h.magic = NET_MAGIC;
    h.version = NET_VERSION;
    h.type = NET_PULL;
    h.flags = NET_F_SUM;
    h.status = GKV_ERANGE;
    h.req_id = 0x1122334455667788ull;
    h.session = 0x99aabbccddeeff00ull;
    h.len = 16;
    h.sum = net__sum(m + NET_HDR_LEN, 16);
    net__hdr_put(m, &h);
    /* little-endian, at the offsets PROTOCOL.md gives */
    assert_memory_equal(m, "GKVN", 4);
    assert_int_equal(m[4], 2);                 /* version 2 */
    assert_int_equal(m[6], NET_PULL);
    assert_int_equal(m[16], 0x88);
    assert_int_equal(m[32], 16);
    assert_int_equal(net__hdr_check(m, sizeof m, &g, why, sizeof why), GKV_OK);
    assert_int_equal(g.type, NET_PULL);
    assert_int_equal(g.status, GKV_ERANGE);
    assert_int_equal(g.req_id, h.req_id);
    assert_int_equal(g.session, h.session);
    /* too short */
    assert_int_equal(net__hdr_check(m, NET_HDR_LEN - 1, &g, why, sizeof why),
                     GKV_EPROTO);
    assert_non_null(strstr(why, "shorter than the 48-byte header"));
    /* the payload length must be what arrived */
    assert_int_equal(net__hdr_check(m, sizeof m - 1, &g, why, sizeof why),
                     GKV_EPROTO);
    assert_non_null(strstr(why, "16 payload bytes, 15 arrived"));
    /* checksum */
    m[NET_HDR_LEN + 3] ^= 1;
    assert_int_equal(net__hdr_check(m, sizeof m, &g, why, sizeof why),
                     GKV_EPROTO);
    assert_non_null(strstr(why, "checksum mismatch"));
    m[NET_HDR_LEN + 3] ^= 1;
    /* a sum without the flag, an unknown flag */
    h.flags = 0;
    net__hdr_put(m, &h);
    assert_int_equal(net__hdr_check(m, sizeof m, &g, why, sizeof why),
                     GKV_EPROTO);
    h.sum = 0;
    h.flags = 0x100;
    net__hdr_put(m, &h);
    assert_int_equal(net__hdr_check(m, sizeof m, &g, why, sizeof why),
                     GKV_EPROTO);
    assert_non_null(strstr(why, "unknown flags"));
    /* version: its own error (1: a build before PUSH carried flags) */
    h.flags = 0;
    h.version = 1;
    net__hdr_put(m, &h);
    assert_int_equal(net__hdr_check(m, sizeof m, &g, why, sizeof why),
                     GKV_EVERSION);
    assert_non_null(strstr(why, "version 1"));
    /* magic */
    h.version = NET_VERSION;
    net__hdr_put(m, &h);
    m[0] = 'X';
    assert_int_equal(net__hdr_check(m, sizeof m, &g, why, sizeof why),
                     GKV_EPROTO);
    assert_non_null(strstr(why, "bad magic"));
    assert_string_equal(net__type_name(NET_SAMPLE), "sample");
    assert_string_equal(net__type_name(NET_OPT_RESET), "opt_reset");
    assert_null(net__type_name(14));
    assert_null(net__type_name(64));
}

/* ---- every message, there and back ------------------------------------------------ */

static void enc_hello(net_wr *w, const void *a) { net__enc_hello_rep(w, a); }
static void enc_hs(net_wr *w, const void *a) { net__enc_hs_req(w, a); }
static void enc_create(net_wr *w, const void *a) { net__enc_create_req(w, a); }
static void enc_create_rep(net_wr *w, const void *a) { net__enc_create_rep(w, a); }
static void enc_barrier(net_wr *w, const void *a) { net__enc_barrier(w, a); }
static void enc_err(net_wr *w, const void *a) { net__enc_err(w, a); }

struct hs_rep_arg { uint64_t session; const net_ident *id; const net_tensor *t; uint32_t n; };

static void
enc_hs_rep(net_wr *w, const void *a)
{
    const struct hs_rep_arg *h = a;

    if (h->id != NULL) {
        net__wr_u64(w, h->session);
        net__enc_ident(w, h->id);
    }
    net__wr_u32(w, h->n);
    for (uint32_t i = 0; i < h->n; i++)
        net__enc_tensor(w, &h->t[i]);
}

struct pull_arg { const uint64_t *ids; const size_t *idx; size_t n; };

static void
enc_pull(net_wr *w, const void *a)
{
    const struct pull_arg *p = a;

    net__enc_pull_req(w, "node/paper/feat", p->ids, p->idx, p->n);
}

struct push_arg { const uint64_t *ids; const float *rows; const size_t *idx; size_t n; };

static void
enc_push(net_wr *w, const void *a)
{
    const struct push_arg *p = a;
    static const double opt[4] = {0.5, 1e-8, 0.9, 0.999};

    net__enc_push_req(w, "emb", "adam", 0, opt, 3 * sizeof(float), p->ids,
                      p->rows, p->idx, p->n);
}

/* the same with push flags a->n (a known one, then an unknown one) */
static void
enc_push_flags(net_wr *w, const void *a)
{
    static const uint64_t ids[2] = {4, 4};
    static const float rows[6] = {1, 2, 3, 4, 5, 6};
    static const double opt[4] = {0.5, 1e-8, 0.9, 0.999};

    net__enc_push_req(w, "emb", "adam", *(const unsigned *)a, opt,
                      3 * sizeof(float), ids, rows, NULL, 2);
}

static void
enc_pull_rep(net_wr *w, const void *a)
{
    const float *rows = a;
    unsigned char *p;

    net__wr_u64(w, 3);
    net__wr_u64(w, 8);
    p = net__wr_arr(w, 24);
    if (p != NULL)
        memcpy(p, rows, 24);
}

static void
enc_stats(net_wr *w, const void *a)
{
    (void)a;
    net__wr_u32(w, 2);
    net__wr_str(w, "pulls");
    net__wr_u64(w, 17);
    net__wr_str(w, "a_newer_key");
    net__wr_u64(w, 5);
}

static void
test_roundtrip(void **state)
{
    unsigned char *b;
    size_t len;
    net_rd rd;

    (void)state;
    {   /* hello reply */
        net_hello_rep in, out;
        memset(&in, 0, sizeof in);
        for (int i = 0; i < 32; i++)
            in.nonce[i] = (unsigned char)(i * 7);
        fill_ident(&in.id);
        b = gkvt_encode(enc_hello, &in, &len);
        net__rd_init(&rd, b, len);
        assert_int_equal(net__dec_hello_rep(&rd, &out), 0);
        assert_memory_equal(in.nonce, out.nonce, 32);
        assert_ident_equal(&in.id, &out.id);
        free(b);
    }
    {   /* handshake request */
        net_hs_req in, out;
        memset(&in, 0, sizeof in);
        snprintf(in.group, sizeof in.group, "job-17");
        in.rank = 3;
        in.flags = NET_HS_PROOF;
        memset(in.mac, 0x5a, 32);
        b = gkvt_encode(enc_hs, &in, &len);
        net__rd_init(&rd, b, len);
        assert_int_equal(net__dec_hs_req(&rd, &out), 0);
        assert_string_equal(out.group, "job-17");
        assert_int_equal(out.rank, 3);
        assert_int_equal(out.flags, NET_HS_PROOF);
        assert_memory_equal(out.mac, in.mac, 32);
        assert_int_equal(out.instance, 0);
        free(b);
        /* with a job instance after the proof; instance 0 is refused */
        in.flags = NET_HS_PROOF | NET_HS_INSTANCE;
        in.instance = 0x1122334455667788ull;
        b = gkvt_encode(enc_hs, &in, &len);
        net__rd_init(&rd, b, len);
        assert_int_equal(net__dec_hs_req(&rd, &out), 0);
        assert_int_equal(out.flags, NET_HS_PROOF | NET_HS_INSTANCE);
        assert_true(out.instance == 0x1122334455667788ull);
        net__rd_init(&rd, b, len - 1);             /* cut short */
        assert_int_not_equal(net__dec_hs_req(&rd, &out), 0);
        free(b);
        in.instance = 0;
        b = gkvt_encode(enc_hs, &in, &len);
        net__rd_init(&rd, b, len);
        assert_int_not_equal(net__dec_hs_req(&rd, &out), 0);
        assert_non_null(strstr(rd.why, "job instance 0"));
        free(b);
    }
    {   /* handshake reply and a bare schema */
        net_ident id;
        net_tensor t[2];
        net_hs_rep out;
        net_schema sc;
        struct hs_rep_arg a;

        fill_ident(&id);
        fill_tensor(&t[0], "feat", 0, 1000);
        fill_tensor(&t[1], "node/paper/emb", 500, 700);
        snprintf(t[1].policy, sizeof t[1].policy, "node:paper");
        a.session = 0xfeedull;
        a.id = &id;
        a.t = t;
        a.n = 2;
        b = gkvt_encode(enc_hs_rep, &a, &len);
        net__rd_init(&rd, b, len);
        assert_int_equal(net__dec_hs_rep(&rd, &out), 0);
        assert_int_equal(out.session, 0xfeed);
        assert_ident_equal(&id, &out.id);
        assert_int_equal(out.schema.n, 2);
        assert_tensor_equal(&t[0], &out.schema.t[0]);
        assert_tensor_equal(&t[1], &out.schema.t[1]);
        net__schema_free(&out.schema);
        free(b);
        a.id = NULL;
        b = gkvt_encode(enc_hs_rep, &a, &len);
        net__rd_init(&rd, b, len);
        assert_int_equal(net__dec_schema(&rd, &sc), 0);
        assert_int_equal(sc.n, 2);
        assert_tensor_equal(&t[1], &sc.t[1]);
        net__schema_free(&sc);
        free(b);
    }
    {   /* pull request, plain and through an index list */
        uint64_t ids[5] = {9, 1, 4, 1, 700};
        size_t idx[3] = {4, 0, 3};
        struct pull_arg a = {ids, NULL, 5};
        net_pull_req out;
        uint64_t got;

        b = gkvt_encode(enc_pull, &a, &len);
        net__rd_init(&rd, b, len);
        assert_int_equal(net__dec_pull_req(&rd, &out), 0);
        assert_string_equal(out.name, "node/paper/feat");
        assert_int_equal(out.n, 5);
        assert_int_equal(((uintptr_t)(out.ids - b)) % 8, 0);   /* aligned */
        assert_memory_equal(out.ids, ids, 40);
        free(b);
        a.idx = idx;
        a.n = 3;
        b = gkvt_encode(enc_pull, &a, &len);
        net__rd_init(&rd, b, len);
        assert_int_equal(net__dec_pull_req(&rd, &out), 0);
        assert_int_equal(out.n, 3);
        memcpy(&got, out.ids + 8, 8);
        assert_int_equal(got, 9);
        memcpy(&got, out.ids + 16, 8);
        assert_int_equal(got, 1);
        free(b);
    }
    {   /* pull reply */
        float rows[6] = {1, 2, 3, 4, 5, 6};
        net_pull_rep out;
        b = gkvt_encode(enc_pull_rep, rows, &len);
        net__rd_init(&rd, b, len);
        assert_int_equal(net__dec_pull_rep(&rd, &out), 0);
        assert_int_equal(out.n, 3);
        assert_int_equal(out.row_bytes, 8);
        assert_memory_equal(out.rows, rows, 24);
        free(b);
    }
    {   /* push request through an index list */
        uint64_t ids[3] = {10, 11, 12};
        float rows[9] = {0, 1, 2, 3, 4, 5, 6, 7, 8};
        size_t idx[2] = {2, 0};
        struct push_arg a = {ids, rows, idx, 2};
        net_push_req out;
        float r[6];

        b = gkvt_encode(enc_push, &a, &len);
        net__rd_init(&rd, b, len);
        assert_int_equal(net__dec_push_req(&rd, &out), 0);
        assert_string_equal(out.name, "emb");
        assert_string_equal(out.handler, "adam");
        assert_true(out.lr == 0.5 && out.eps == 1e-8 && out.beta1 == 0.9 &&
                    out.beta2 == 0.999);
        assert_int_equal(out.row_bytes, 12);
        assert_int_equal(out.n, 2);
        memcpy(r, out.rows, 24);
        assert_true(r[0] == 6 && r[2] == 8 && r[3] == 0 && r[5] == 2);
        assert_int_equal(out.flags, 0);
        free(b);
    }
    {   /* push flags: GKV_PUSH_DUPS_SUM travels; an unknown bit is refused */
        unsigned fl = GKV_PUSH_DUPS_SUM;
        net_push_req out;

        b = gkvt_encode(enc_push_flags, &fl, &len);
        net__rd_init(&rd, b, len);
        assert_int_equal(net__dec_push_req(&rd, &out), 0);
        assert_int_equal(out.flags, GKV_PUSH_DUPS_SUM);
        assert_int_equal(out.n, 2);
        free(b);
        fl = 0x4;
        b = gkvt_encode(enc_push_flags, &fl, &len);
        net__rd_init(&rd, b, len);
        assert_int_equal(net__dec_push_req(&rd, &out), -1);
        assert_non_null(strstr(rd.why, "unknown flags 0x4"));
        free(b);
    }
    {   /* create request and reply */
        net_create_req in, out;
        net_create_rep rin, rout;

        memset(&in, 0, sizeof in);
        fill_tensor(&in.t, "emb", 0, 1u << 20);
        in.t.row_bytes = 0;
        in.init = GKV_INIT_NORMAL;
        in.a = 0.0;
        in.b = 0.02;
        in.seed = 77;
        b = gkvt_encode(enc_create, &in, &len);
        net__rd_init(&rd, b, len);
        assert_int_equal(net__dec_create_req(&rd, &out), 0);
        assert_tensor_equal(&in.t, &out.t);
        assert_int_equal(out.init, GKV_INIT_NORMAL);
        assert_true(out.b == 0.02);
        assert_int_equal(out.seed, 77);
        free(b);
        memset(&rin, 0, sizeof rin);
        rin.created = 1;
        fill_tensor(&rin.t, "emb", 0, 10);
        b = gkvt_encode(enc_create_rep, &rin, &len);
        net__rd_init(&rd, b, len);
        assert_int_equal(net__dec_create_rep(&rd, &rout), 0);
        assert_int_equal(rout.created, 1);
        assert_tensor_equal(&rin.t, &rout.t);
        free(b);
    }
    {   /* barrier, stats, error text */
        net_barrier in = {4, 9}, out;
        net_stats *st = malloc(sizeof *st);
        char msg[64];

        b = gkvt_encode(enc_barrier, &in, &len);
        assert_int_equal(len, 12);
        net__rd_init(&rd, b, len);
        assert_int_equal(net__dec_barrier(&rd, &out), 0);
        assert_int_equal(out.group_size, 4);
        assert_int_equal(out.seq, 9);
        free(b);
        b = gkvt_encode(enc_stats, NULL, &len);
        net__rd_init(&rd, b, len);
        assert_int_equal(net__dec_stats(&rd, st), 0);
        assert_int_equal(st->n, 2);
        assert_string_equal(st->kv[1].key, "a_newer_key");
        assert_int_equal(st->kv[0].val, 17);
        free(st);
        free(b);
        b = gkvt_encode(enc_err, "ID 99\x01 outside", &len);
        net__rd_init(&rd, b, len);
        assert_int_equal(net__dec_err(&rd, msg, sizeof msg), 0);
        assert_string_equal(msg, "ID 99? outside");    /* made printable */
        free(b);
    }
}

/* ---- truncation, left-over bytes, lying counts ------------------------------------ */

typedef int (*dec_fn)(net_rd *r, void *out);

static int dec_hello(net_rd *r, void *o) { return net__dec_hello_rep(r, o); }
static int dec_hs(net_rd *r, void *o) { return net__dec_hs_req(r, o); }
static int dec_pull(net_rd *r, void *o) { return net__dec_pull_req(r, o); }
static int dec_push(net_rd *r, void *o) { return net__dec_push_req(r, o); }
static int dec_create(net_rd *r, void *o) { return net__dec_create_req(r, o); }
static int dec_barrier(net_rd *r, void *o) { return net__dec_barrier(r, o); }

static int
dec_schema(net_rd *r, void *o)
{
    int rc = net__dec_schema(r, o);

    if (rc == 0)
        net__schema_free(o);
    return rc;
}

/* Every strict prefix of a valid payload fails, and so does the payload
 * with one byte more; each failure says why. */
static void
check_prefixes(const unsigned char *b, size_t len, dec_fn dec, void *out)
{
    unsigned char *big = malloc(len + 1);
    net_rd rd;

    for (size_t k = 0; k < len; k++) {
        net__rd_init(&rd, b, k);
        if (dec(&rd, out) == 0)
            fail_msg("a %zu-byte prefix of a %zu-byte payload decoded", k, len);
        assert_true(rd.err);
        assert_true(rd.why[0] != '\0');
    }
    memcpy(big, b, len);
    big[len] = 0;
    net__rd_init(&rd, big, len + 1);
    assert_int_equal(dec(&rd, out), -1);
    assert_non_null(strstr(rd.why, "left over"));
    net__rd_init(&rd, b, len);
    assert_int_equal(dec(&rd, out), 0);
    free(big);
}

static void
test_truncated_and_trailing(void **state)
{
    union {
        net_hello_rep h; net_hs_req s; net_pull_req p; net_push_req u;
        net_create_req c; net_barrier b; net_schema sc;
    } *out = malloc(sizeof *out);
    long live = gkvt_alloc_live();
    unsigned char *b;
    size_t len;

    (void)state;
    {
        net_hello_rep in;
        memset(&in, 0, sizeof in);
        fill_ident(&in.id);
        b = gkvt_encode(enc_hello, &in, &len);
        check_prefixes(b, len, dec_hello, out);
        free(b);
    }
    {
        net_hs_req in;
        memset(&in, 0, sizeof in);
        snprintf(in.group, sizeof in.group, "g");
        b = gkvt_encode(enc_hs, &in, &len);
        check_prefixes(b, len, dec_hs, out);
        free(b);
    }
    {
        uint64_t ids[3] = {1, 2, 3};
        struct pull_arg a = {ids, NULL, 3};
        b = gkvt_encode(enc_pull, &a, &len);
        check_prefixes(b, len, dec_pull, out);
        free(b);
    }
    {
        uint64_t ids[3] = {1, 2, 3};
        float rows[9] = {0};
        struct push_arg a = {ids, rows, NULL, 3};
        b = gkvt_encode(enc_push, &a, &len);
        check_prefixes(b, len, dec_push, out);
        free(b);
    }
    {
        net_create_req in;
        memset(&in, 0, sizeof in);
        fill_tensor(&in.t, "x", 0, 5);
        b = gkvt_encode(enc_create, &in, &len);
        check_prefixes(b, len, dec_create, out);
        free(b);
    }
    {
        net_barrier in = {2, 1};
        b = gkvt_encode(enc_barrier, &in, &len);
        check_prefixes(b, len, dec_barrier, out);
        free(b);
    }
    {
        net_tensor t[3];
        struct hs_rep_arg a = {0, NULL, t, 3};
        fill_tensor(&t[0], "a", 0, 1);
        fill_tensor(&t[1], "b", 0, 2);
        fill_tensor(&t[2], "c", 0, 3);
        b = gkvt_encode(enc_hs_rep, &a, &len);
        check_prefixes(b, len, dec_schema, out);
        free(b);
    }
    /* failed schema decodes freed what they allocated */
    assert_int_equal(gkvt_alloc_live(), live);
    free(out);
}

/* A PUSH request's head, written by hand from w's start: tensor "t", no
 * handler, lr, eps, beta1 and beta2 0, row_bytes, n, padding. */
static void
push_head(net_wr *w, uint64_t row_bytes, uint64_t n)
{
    w->off = 0;
    net__wr_str(w, "t");
    net__wr_str(w, "");
    for (int i = 0; i < 4; i++)
        net__wr_f64(w, 0);
    net__wr_u64(w, row_bytes);
    net__wr_u64(w, n);
    net__wr_pad(w);
}

static void
test_lying_counts(void **state)
{
    unsigned char b[256];
    net_wr w = {b, sizeof b, 0};
    net_pull_req pq;
    net_push_req uq;
    net_pull_rep pr;
    net_schema sc;
    net_stats *st = malloc(sizeof *st);
    char name[GKV_NAME_MAX + 1];
    long live = gkvt_alloc_live();
    net_rd rd;

    (void)state;
    /* a pull of 2^61 IDs in a few bytes */
    net__wr_str(&w, "feat");
    net__wr_u64(&w, 1ull << 61);
    net__wr_pad(&w);
    net__wr_u64(&w, 5);
    net__rd_init(&rd, b, w.off);
    assert_int_equal(net__dec_pull_req(&rd, &pq), -1);
    assert_non_null(strstr(rd.why, "pull.ids"));
    /* n x row_bytes overflowing 64 bits */
    w.off = 0;
    net__wr_u64(&w, 1ull << 40);
    net__wr_u64(&w, 1ull << 40);
    net__rd_init(&rd, b, w.off);
    assert_int_equal(net__dec_pull_rep(&rd, &pr), -1);
    assert_non_null(strstr(rd.why, "overflow"));
    push_head(&w, 1ull << 40, 0);
    net__wr_u8(&w, 0);                                   /* flags */
    net__rd_init(&rd, b, w.off);
    assert_int_equal(net__dec_push_req(&rd, &uq), 0);   /* zero rows is fine */
    /* rows of 0 bytes are not (n rows would take no room at all) */
    push_head(&w, 0, 3);
    for (int i = 0; i < 3; i++)
        net__wr_u64(&w, (uint64_t)i);
    net__rd_init(&rd, b, w.off);
    assert_int_equal(net__dec_push_req(&rd, &uq), -1);
    assert_non_null(strstr(rd.why, "rows of 0 bytes"));
    push_head(&w, 1ull << 40, 1ull << 30);
    net__rd_init(&rd, b, w.off);
    assert_int_equal(net__dec_push_req(&rd, &uq), -1);
    assert_non_null(strstr(rd.why, "push.ids"));
    /* a schema claiming a billion tensors is refused before allocating */
    w.off = 0;
    net__wr_u32(&w, 1000000000u);
    net__rd_init(&rd, b, w.off);
    gkvt_alloc_fail_at(0);           /* any allocation would fail the test */
    assert_int_equal(net__dec_schema(&rd, &sc), -1);
    gkvt_alloc_fail_at(-1);
    assert_non_null(strstr(rd.why, "cannot fit"));
    assert_int_equal(gkvt_alloc_live(), live);
    /* stats over the bound */
    w.off = 0;
    net__wr_u32(&w, NET_STATS_MAX + 1);
    net__rd_init(&rd, b, w.off);
    assert_int_equal(net__dec_stats(&rd, st), -1);
    /* a string longer than its field, one with a NUL, one running out */
    w.off = 0;
    net__wr_u16(&w, 300);
    memset(b + 2, 'a', 200);
    w.off = 202;
    net__rd_init(&rd, b, w.off);
    assert_int_equal(net__dec_name(&rd, name), -1);
    assert_non_null(strstr(rd.why, "at most 255"));
    /* the bound exactly: 256 bytes are one too many, 255 fit */
    for (int len = 255; len <= 256; len++) {
        unsigned char sb[2 + 256];

        sb[0] = (unsigned char)(len & 0xff);      /* u16, little-endian */
        sb[1] = (unsigned char)(len >> 8);
        memset(sb + 2, 'n', (size_t)len);
        net__rd_init(&rd, sb, 2 + (size_t)len);
        if (len == 255) {
            assert_int_equal(net__dec_name(&rd, name), 0);
            assert_int_equal(strlen(name), 255);
        } else {
            assert_int_equal(net__dec_name(&rd, name), -1);
            assert_non_null(strstr(rd.why, "string of 256 bytes, at most 255"));
        }
    }
    w.off = 0;
    net__wr_str(&w, "ab");
    b[3] = '\0';
    net__rd_init(&rd, b, w.off);
    assert_int_equal(net__dec_name(&rd, name), -1);
    assert_non_null(strstr(rd.why, "NUL"));
    w.off = 0;
    net__wr_u16(&w, 10);
    net__wr_bytes(&w, "abc", 3);
    net__rd_init(&rd, b, w.off);
    assert_int_equal(net__dec_name(&rd, name), -1);
    /* padding before an array must be zero */
    w.off = 0;
    net__wr_str(&w, "feat");          /* 6 bytes */
    net__wr_u64(&w, 1);               /* 14 */
    net__wr_pad(&w);                  /* 16 */
    net__wr_u64(&w, 3);
    b[15] = 1;
    net__rd_init(&rd, b, w.off);
    assert_int_equal(net__dec_pull_req(&rd, &pq), -1);
    assert_non_null(strstr(rd.why, "padding"));
    /* a tensor entry with a huge ndim, cut short right after it (the
     * fuzzer's first find: the dims loop must not run) */
    w.off = 0;
    net__wr_u32(&w, 1);
    net__wr_str(&w, "x");
    net__wr_u8(&w, GKV_F32);
    net__wr_u8(&w, 200);
    net__rd_init(&rd, b, w.off);
    assert_int_equal(net__dec_schema(&rd, &sc), -1);
    for (int i = 0; i < 48; i++)         /* flags, and room for the rest */
        net__wr_u8(&w, 0);
    net__rd_init(&rd, b, w.off);
    assert_int_equal(net__dec_schema(&rd, &sc), -1);
    assert_non_null(strstr(rd.why, "ndim 200, at most 4"));
    /* a tensor entry whose row bytes contradict its shape */
    {
        net_tensor t;
        struct hs_rep_arg a = {0, NULL, &t, 1};
        unsigned char *e;
        size_t len;

        fill_tensor(&t, "x", 0, 4);
        t.row_bytes = 12;
        e = gkvt_encode(enc_hs_rep, &a, &len);
        net__rd_init(&rd, e, len);
        assert_int_equal(net__dec_schema(&rd, &sc), -1);
        assert_non_null(strstr(rd.why, "row_bytes"));
        free(e);
        fill_tensor(&t, "x", 5, 5);
        e = gkvt_encode(enc_hs_rep, &a, &len);
        net__rd_init(&rd, e, len);
        assert_int_equal(net__dec_schema(&rd, &sc), -1);
        assert_non_null(strstr(rd.why, "empty ID range"));
        free(e);
    }
    assert_int_equal(gkvt_alloc_live(), live);
    free(st);
}

/* A schema decode failing at every allocation leaks nothing. */
static void
test_schema_alloc_failure(void **state)
{
    net_tensor t[4];
    struct hs_rep_arg a = {0, NULL, t, 4};
    unsigned char *b;
    size_t len;
    long live = gkvt_alloc_live();
    net_schema sc;
    net_rd rd;
    int n, rc;

    (void)state;
    for (int i = 0; i < 4; i++)
        fill_tensor(&t[i], "t", 0, (uint64_t)i + 1);
    b = gkvt_encode(enc_hs_rep, &a, &len);
    for (n = 0;; n++) {
        net__rd_init(&rd, b, len);
        gkvt_alloc_fail_at(n);
        rc = net__dec_schema(&rd, &sc);
        gkvt_alloc_fail_at(-1);
        if (rc == 0)
            break;
        assert_non_null(strstr(rd.why, "out of memory"));
        assert_int_equal(gkvt_alloc_live(), live);
    }
    assert_int_equal(n, 1);
    assert_int_equal(sc.n, 4);
    net__schema_free(&sc);
    assert_int_equal(gkvt_alloc_live(), live);
    free(b);
}

/* ---- ip_config ------------------------------------------------------------------ */

struct fx { char *dir; char p[4096]; };

static int
setup(void **state)
{
    return gkvt_dir_setup(state, sizeof(struct fx), "netwire");
}

static int
teardown(void **state)
{
    return gkvt_dir_teardown(state);
}

static const char *
fpath(struct fx *f, const char *name)
{
    snprintf(f->p, sizeof f->p, "%s/%s", f->dir, name);
    return f->p;
}

static gkv_err
load_text(struct fx *f, const char *text, gkv_ipconfig **c)
{
    write_text(fpath(f, "ip.cfg"), text, 0644);
    return gkv_ipconfig_load(c, f->p);
}

static void
test_ipconfig(void **state)
{
    struct fx *f = *state;
    gkv_ipconfig *c = NULL;
    const gkv_machine *m;
    size_t local;
    char want[4200];

    assert_int_equal(load_text(f, "# the job\n\n10.0.0.1\n  10.0.0.2 31000  # two\n"
                               "node-3.cluster 4000\n::1 5000\n\t\n", &c), GKV_OK);
    assert_int_equal(gkv_ipconfig_count(c), 4);
    m = gkv_ipconfig_machine(c, 0);
    assert_string_equal(m->host, "10.0.0.1");
    assert_int_equal(m->port, GKV_NET_PORT);
    assert_int_equal(m->line, 3);
    m = gkv_ipconfig_machine(c, 1);
    assert_int_equal(m->port, 31000);
    assert_int_equal(m->line, 4);
    assert_string_equal(gkv_ipconfig_machine(c, 2)->host, "node-3.cluster");
    assert_string_equal(gkv_ipconfig_machine(c, 3)->host, "::1");
    assert_null(gkv_ipconfig_machine(c, 4));
    assert_int_equal(gkv_ipconfig_check(c, 8), GKV_OK);
    gkv_ipconfig_free(c);

    /* bad lines name file:line */
    static const struct { const char *text; const char *msg; } bad[] = {
        {"10.0.0.1\n10.0.0.2 70000\n", ":2: port '70000'"},
        {"10.0.0.1 0\n", ":1: port '0'"},
        {"10.0.0.1 12x\n", ":1: port '12x'"},
        {"10.0.0.1 -5\n", ":1: port '-5'"},
        {"\n\n10.0.0.1 1 2\n", ":3: expected 'IP [PORT]'"},
        {"bad!host\n", ":1: 'bad!host' is not an IP address"},
        {"1:2:3:zz\n", ":1: '1:2:3:zz' is not an IP address"},
        {"10.0.0.1 30050\n10.0.0.1\n", ":2: machine 10.0.0.1 port 30050 is already listed at line 1"},
        {"# only a comment\n\n", "no machine listed"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        c = (gkv_ipconfig *)1;
        assert_int_equal(load_text(f, bad[i].text, &c), GKV_EFORMAT);
        assert_null(c);
        if (strstr(gkv_net_errmsg(), bad[i].msg) == NULL)
            fail_msg("ip_config '%s': message '%s' lacks '%s'", bad[i].text,
                     gkv_net_errmsg(), bad[i].msg);
        if (bad[i].msg[0] == ':') {
            snprintf(want, sizeof want, "%s:", fpath(f, "ip.cfg"));
            assert_non_null(strstr(gkv_net_errmsg(), want));
        }
    }
    assert_int_equal(gkv_ipconfig_load(&c, fpath(f, "missing")), GKV_ENOENT);
    assert_non_null(strstr(gkv_net_errmsg(), "missing"));

    /* ports of several servers must not overlap, nor pass 65535 */
    assert_int_equal(load_text(f, "127.0.0.1 3000\n127.0.0.1 3002\n", &c), GKV_OK);
    assert_int_equal(gkv_ipconfig_check(c, 2), GKV_OK);
    assert_int_equal(gkv_ipconfig_check(c, 3), GKV_EINVAL);
    assert_non_null(strstr(gkv_net_errmsg(), "lines 1 and 2"));
    /* two local machines: find_local cannot choose */
    assert_int_equal(gkv_ipconfig_find_local(c, &local), GKV_EINVAL);
    assert_non_null(strstr(gkv_net_errmsg(), "2 machines are this host (lines 1 and 2 at least)"));
    gkv_ipconfig_free(c);
    assert_int_equal(load_text(f, "127.0.0.1 65535\n", &c), GKV_OK);
    assert_int_equal(gkv_ipconfig_check(c, 1), GKV_OK);
    assert_int_equal(gkv_ipconfig_check(c, 2), GKV_EINVAL);
    assert_non_null(strstr(gkv_net_errmsg(), "go past 65535"));
    /* a count that wraps port + count - 1 around (a hostile hello's) */
    assert_int_equal(gkv_ipconfig_check(c, 4294967295u), GKV_EINVAL);
    assert_non_null(strstr(gkv_net_errmsg(), "go past 65535"));
    gkv_ipconfig_free(c);
    assert_int_equal(load_text(f, "192.0.2.1\n127.0.0.1 3000\n", &c), GKV_OK);
    assert_int_equal(gkv_ipconfig_find_local(c, &local), GKV_OK);
    assert_int_equal(local, 1);
    gkv_ipconfig_free(c);
    assert_int_equal(load_text(f, "192.0.2.1\n", &c), GKV_OK);
    assert_int_equal(gkv_ipconfig_find_local(c, &local), GKV_ENOTFOUND);
    gkv_ipconfig_free(c);
}

/* gkv_net_host_is_local(): loopback by interface, the wider 127/8 only
 * when asked, and a documentation address (or an unknown name) never. */
static void
test_host_is_local(void **state)
{
    struct ifaddrs *ifs = NULL;

    assert_int_equal(gkv_net_host_is_local("127.0.0.1", NULL, 0), 1);
    assert_int_equal(gkv_net_host_is_local("127.0.0.2", NULL, 0), 0);
    assert_int_equal(gkv_net_host_is_local("127.0.0.2", NULL, 1), 1);
    assert_int_equal(gkv_net_host_is_local("192.0.2.1", NULL, 1), 0);
    assert_int_equal(gkv_net_host_is_local("no-such-host.invalid", NULL, 1),
                     0);
    assert_int_equal(gkv_net_host_is_local(NULL, NULL, 1), 0);
    assert_int_equal(getifaddrs(&ifs), 0);
    assert_int_equal(gkv_net_host_is_local("127.0.0.1", ifs, 0), 1);
    assert_int_equal(gkv_net_host_is_local("192.0.2.1", ifs, 0), 0);
    freeifaddrs(ifs);
}

/* ---- token files and proofs ------------------------------------------------------- */

static void
test_token_file(void **state)
{
    struct fx *f = *state;
    char tok[64], big[5000];

    write_text(fpath(f, "tok"), "s3cret-s3cret-s3cret\n", 0600);
    assert_int_equal(gkv_token_load(f->p, tok, sizeof tok), GKV_OK);
    assert_string_equal(tok, "s3cret-s3cret-s3cret");
    write_text(fpath(f, "tok"), "s3cret-s3cret-s3cret\n", 0400);
    assert_int_equal(gkv_token_load(f->p, tok, sizeof tok), GKV_OK);
    write_text(fpath(f, "tok"), "s3cret-s3cret-s3cret\n", 0644);
    assert_int_equal(gkv_token_load(f->p, tok, sizeof tok), GKV_EPERM);
    assert_non_null(strstr(gkv_net_errmsg(), "mode 0644"));
    assert_non_null(strstr(gkv_net_errmsg(), "chmod 600"));
    write_text(fpath(f, "tok"), "s3cret-s3cret-s3cret\n", 0620);
    assert_int_equal(gkv_token_load(f->p, tok, sizeof tok), GKV_EPERM);
    write_text(fpath(f, "tok"), "\n\n", 0600);
    assert_int_equal(gkv_token_load(f->p, tok, sizeof tok), GKV_EINVAL);
    assert_non_null(strstr(gkv_net_errmsg(), "empty"));
    memset(big, 'k', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    write_text(fpath(f, "tok"), big, 0600);
    assert_int_equal(gkv_token_load(f->p, tok, sizeof tok), GKV_EINVAL);
    assert_non_null(strstr(gkv_net_errmsg(), "longer than 63"));
    /* a token of the largest size, then a line end (echo's): it fits */
    big[63] = '\n';
    big[64] = '\0';
    write_text(fpath(f, "tok"), big, 0600);
    assert_int_equal(gkv_token_load(f->p, tok, sizeof tok), GKV_OK);
    assert_int_equal(strlen(tok), 63);
    big[64] = '\r';                 /* more blanks: still */
    big[65] = '\n';
    big[66] = '\0';
    write_text(fpath(f, "tok"), big, 0600);
    assert_int_equal(gkv_token_load(f->p, tok, sizeof tok), GKV_OK);
    big[64] = 'x';                  /* a 65th character after the line end */
    write_text(fpath(f, "tok"), big, 0600);
    assert_int_equal(gkv_token_load(f->p, tok, sizeof tok), GKV_EINVAL);
    assert_non_null(strstr(gkv_net_errmsg(), "longer than 63"));
    assert_int_equal(gkv_token_load(fpath(f, "nope"), tok, sizeof tok), GKV_ENOENT);
    assert_int_equal(gkv_token_load(f->dir, tok, sizeof tok), GKV_EINVAL);
    assert_non_null(strstr(gkv_net_errmsg(), "not a regular file"));
}

static void
test_proof(void **state)
{
    unsigned char k1[NET_KEY_LEN], k2[NET_KEY_LEN], nonce[NET_NONCE_LEN];
    unsigned char mac[NET_MAC_LEN];

    (void)state;
    memset(nonce, 3, sizeof nonce);
    net__token_key("right", 5, k1);
    net__token_key("wrong", 5, k2);
    net__proof(k1, nonce, "job", 2, mac);
    assert_true(net__proof_ok(k1, nonce, "job", 2, mac));
    /* every byte of the proof counts, the last one too */
    mac[NET_MAC_LEN - 1] ^= 1;
    assert_false(net__proof_ok(k1, nonce, "job", 2, mac));
    mac[NET_MAC_LEN - 1] ^= 1;
    assert_false(net__proof_ok(k2, nonce, "job", 2, mac));
    assert_false(net__proof_ok(k1, nonce, "job", 3, mac));
    assert_false(net__proof_ok(k1, nonce, "jox", 2, mac));
    nonce[31] ^= 1;
    assert_false(net__proof_ok(k1, nonce, "job", 2, mac));
    assert_true(net__group_ok("job-1"));
    assert_false(net__group_ok(""));
    assert_false(net__group_ok("has space"));
    assert_false(net__group_ok("0123456789012345678901234567890123456789012345678901234567890123"));
}

/* ---- graph requests ------------------------------------------------------- */

static void enc_book(net_wr *w, const void *a) { net__enc_book(w, a); }
static void enc_sample(net_wr *w, const void *a) { net__enc_sample_req(w, a); }

static void
enc_ids(net_wr *w, const void *a)
{
    static const size_t idx[2] = {2, 0};

    net__enc_ids_req(w, 5, a, idx, 2);
}

static void
enc_cols3(net_wr *w, const void *a)
{
    const int64_t *const *cols = a;

    net__enc_cols(w, 3, cols, 3);
}

/* Two edge types: 3 edges over 2 seeds (counts 2, 1; neighbours wide,
 * edge IDs narrow), then 1 edge over 1 seed (both narrow). */
static void
enc_sample_rep(net_wr *w, const void *a)
{
    static const uint32_t c0[2] = {2, 1}, c1[1] = {1};
    static const int64_t e0[3] = {7, 8, 0xffffffffll}, e1[1] = {5};
    const int64_t *const *cols = a;
    net_sample_renc_et et[2] = {
        {3, 2, NET_SAMPLE_WIDE_NBR, c0, NULL, e0},
        {1, 1, 0, c1, NULL, e1},
    };

    et[0].nbr = cols[0];
    et[1].nbr = cols[1];
    net__enc_sample_rep(w, 2, et);
}

static void
test_graph_codec(void **state)
{
    static const int64_t x[3] = {10, -1, 1ll << 40}, y[3] = {7, 8, 9};
    static const int64_t ex0[2] = {99, 3};
    static const int fan[2] = {15, -1};
    const int64_t *cols[3] = {x, y, x}, *sv[2] = {x, NULL}, *ex[2] = {ex0, NULL};
    size_t ns[2] = {3, 0}, nex[2] = {2, 0}, len;
    net_book bk = {3, 5, (const unsigned char *)"{\"\":1}"}, bo;
    net_sample_enc se = {0};
    net_sample_req sq;
    net_sample_rep sr;
    net_ids_req iq;
    net_cols co;
    net_rd rd;
    unsigned char *b;
    int64_t v;
    int32_t f32;

    (void)state;
    b = gkvt_encode(enc_book, &bk, &len);
    net__rd_init(&rd, b, len);
    assert_int_equal(net__dec_book(&rd, &bo), 0);
    assert_int_equal(bo.part_id, 3);
    assert_int_equal(bo.len, 5);
    assert_memory_equal(bo.json, "{\"\":1", 5);
    net__rd_init(&rd, b, len - 1);
    assert_int_equal(net__dec_book(&rd, &bo), -1);
    assert_non_null(strstr(rd.why, "book.json"));
    free(b);

    b = gkvt_encode(enc_ids, x, &len);
    net__rd_init(&rd, b, len);
    assert_int_equal(net__dec_ids_req(&rd, &iq), 0);
    assert_int_equal(iq.etype, 5);
    assert_int_equal(iq.n, 2);
    memcpy(&v, iq.ids, 8);
    assert_int_equal(v, 1ll << 40);            /* x[idx[0]] = x[2] */
    memcpy(&v, iq.ids + 8, 8);
    assert_int_equal(v, 10);
    free(b);

    b = gkvt_encode(enc_cols3, cols, &len);
    net__rd_init(&rd, b, len);
    assert_int_equal(net__dec_cols(&rd, 3, &co, "c"), 0);
    assert_int_equal(co.n, 3);
    assert_memory_equal(co.c[0], x, 24);
    assert_memory_equal(co.c[1], y, 24);
    net__rd_init(&rd, b, len);                 /* two columns leave bytes */
    assert_int_equal(net__dec_cols(&rd, 2, &co, "c"), -1);
    net__rd_init(&rd, b, len);
    assert_int_equal(net__dec_cols(&rd, 4, &co, "c"), -1);
    free(b);

    se.layer = 2;
    se.dir = 1;
    se.flags = 3;
    se.nnt = 2;
    se.net = 2;
    se.nfan = 2;
    se.seed = 0xabcdef;
    se.fanout = fan;
    se.seeds = sv;
    se.nseeds = ns;
    se.ex = ex;
    se.nex = nex;
    b = gkvt_encode(enc_sample, &se, &len);
    net__rd_init(&rd, b, len);
    assert_int_equal(net__dec_sample_req(&rd, &sq), 0);
    assert_int_equal(sq.layer, 2);
    assert_int_equal(sq.dir, 1);
    assert_int_equal(sq.flags, 3);
    assert_int_equal(sq.seed, 0xabcdef);
    assert_int_equal(sq.nfan, 2);
    memcpy(&f32, sq.fanout + 4, 4);
    assert_int_equal(f32, -1);
    assert_int_equal(sq.nseeds[0], 3);
    assert_int_equal(sq.nseeds[1], 0);
    assert_memory_equal(sq.seeds[0], x, 24);
    assert_int_equal(sq.has_ex, 1);
    assert_int_equal(sq.nex[0], 2);
    assert_int_equal(sq.nex[1], 0);
    assert_memory_equal(sq.ex[0], ex0, 16);
    net__sample_req_free(&sq);
    /* every truncation fails with a reason and allocates nothing */
    EXPECT_CUTS_FAIL(b, len, net__dec_sample_req, &sq);
    /* a node-type count that cannot fit */
    b[12] = 0xff;
    b[13] = 0xff;
    net__rd_init(&rd, b, len);
    assert_int_equal(net__dec_sample_req(&rd, &sq), -1);
    assert_non_null(strstr(rd.why, "num_ntypes"));
    free(b);

    b = gkvt_encode(enc_sample_rep, cols, &len);
    net__rd_init(&rd, b, len);
    assert_int_equal(net__dec_sample_rep(&rd, &sr), 0);
    assert_int_equal(sr.net, 2);
    assert_int_equal(sr.e[0].n, 3);
    assert_int_equal(sr.e[0].nc, 2);
    assert_int_equal(sr.e[0].wide, NET_SAMPLE_WIDE_NBR);
    assert_int_equal(sr.e[1].n, 1);
    assert_int_equal(sr.e[1].nc, 1);
    assert_int_equal(sr.e[1].wide, 0);
    {
        static const uint32_t want_c[2] = {2, 1}, want_e[3] = {7, 8,
                                                               0xffffffffu};
        uint32_t u;
        assert_memory_equal(sr.e[0].cnt, want_c, 8);
        assert_memory_equal(sr.e[0].nbr, x, 24);  /* 1 << 40 kept wide */
        assert_memory_equal(sr.e[0].eid, want_e, 12);
        memcpy(&u, sr.e[1].nbr, 4);
        assert_int_equal(u, 7);                   /* y[0], narrowed */
        memcpy(&u, sr.e[1].eid, 4);
        assert_int_equal(u, 5);
    }
    net__sample_rep_free(&sr);
    EXPECT_CUTS_FAIL(b, len, net__dec_sample_rep, &sr);
    /* counts that do not sum to the edges: the first count is at byte 24
     * (num_etypes 4, n 8, nc 8, wide 4) */
    b[24] = 3;
    net__rd_init(&rd, b, len);
    assert_int_equal(net__dec_sample_rep(&rd, &sr), -1);
    assert_non_null(strstr(rd.why, "sample.counts"));
    b[24] = 2;
    /* an unknown width flag (wide is at byte 20) */
    b[20] = 4;
    net__rd_init(&rd, b, len);
    assert_int_equal(net__dec_sample_rep(&rd, &sr), -1);
    assert_non_null(strstr(rd.why, "sample.wide"));
    free(b);
}

/* OPT_RESET: tensor str, optimizer str; anything but "", "adagrad" and
 * "adam", an empty name, a cut or a trailing byte is refused, saying why. */
static void
enc_opt_reset(net_wr *w, const void *a)
{
    const char *const *v = a;

    net__wr_str(w, v[0]);
    net__wr_str(w, v[1]);
}

static void
test_opt_reset_codec(void **state)
{
    const char *ok[3][2] = {{"emb", ""}, {"emb", "adam"}, {"e", "adagrad"}};
    const char *bad[3][2] = {{"emb", "sgd"}, {"", "adam"}, {"emb", "adamx"}};
    char name[GKV_NAME_MAX + 1], opt[NET_OPT_MAX + 1];
    unsigned char *b;
    size_t len;
    net_rd rd;

    (void)state;
    for (int i = 0; i < 3; i++) {
        b = gkvt_encode(enc_opt_reset, ok[i], &len);
        net__rd_init(&rd, b, len);
        assert_int_equal(net__dec_opt_reset(&rd, name, opt), 0);
        assert_string_equal(name, ok[i][0]);
        assert_string_equal(opt, ok[i][1]);
        for (size_t cut = 0; cut < len; cut++) {
            net__rd_init(&rd, b, cut);
            assert_int_equal(net__dec_opt_reset(&rd, name, opt), -1);
            assert_true(rd.why[0] != '\0');
        }
        free(b);
        b = gkvt_encode(enc_opt_reset, bad[i], &len);
        net__rd_init(&rd, b, len);
        assert_int_equal(net__dec_opt_reset(&rd, name, opt), -1);
        assert_non_null(strstr(rd.why, "opt_reset"));
        free(b);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_header),
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_truncated_and_trailing),
        cmocka_unit_test(test_lying_counts),
        cmocka_unit_test(test_schema_alloc_failure),
        cmocka_unit_test_setup_teardown(test_ipconfig, setup, teardown),
        cmocka_unit_test(test_host_is_local),
        cmocka_unit_test_setup_teardown(test_token_file, setup, teardown),
        cmocka_unit_test(test_proof),
        cmocka_unit_test(test_graph_codec),
        cmocka_unit_test(test_opt_reset_codec),
    };

    return cmocka_run_group_tests_name("net_wire", tests, NULL, NULL);
}
