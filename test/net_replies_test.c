/* net_replies_test.c - the replies a server holds for clients that do not
 * read them are bounded in total (--max-reply-memory, server_rmem.c):
 *
 *   - the probe of nanomsg's message layout (each field changed in a copy
 *     of a real header is named), and the count, in-process:
 *     a message counts from its allocation until nanomsg frees it (freed,
 *     received and freed, its socket closed unsent); a large one past the
 *     cap is refused, a small one never; the option's bounds;
 *   - twelve peers (SP over TCP by hand) ask a real gkv-server for 32 MiB
 *     pulls and never read: the server keeps what its cap holds (3), the
 *     rest are refused (GKV_EBUSY, naming the option), its resident memory
 *     grows by no more than the cap and a margin, a peer that reads gets
 *     the documented refusal for a 32 MiB reply, a well-behaved client's
 *     pulls (which ask for 2 MiB a message) get the right rows meanwhile
 *     (latency printed); once the peers go, the count is 0 again (server
 *     stats, kvctl) and 32 MiB replies are made again;
 *   - two peers hold the cap to the byte: a handshake whose schema reply
 *     is over 64 KiB still goes (control replies are never refused); a
 *     client's pull asks again until its deadline (GKV_EBUSY then), and
 *     with a longer one gets its rows once the peers go.
 *
 * Servers are real gkv-server processes on loopback, killed and reaped by
 * PID in the teardown. */
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <nanomsg/nn.h>
#include <nanomsg/pair.h>
#include <nanomsg/reqrep.h>
#include "gkvt.h"
#include "gkvt_net.h"
#include "gkv_net.h"
#include "net/server_int.h"
#include "net/wire.h"

static int
setup(void **state)
{
    return gkvt_rawfx_setup(state, "netreplies");
}

/* srv__rmem_held() back at 'want' within 5 s (nanomsg frees on its own
 * threads). */
static void
await_held(uint64_t want)
{
    for (int i = 0; i < 500 && srv__rmem_held() != want; i++)
        tools__sleep_ms(10);
    assert_int_equal(srv__rmem_held(), want);
}

/* ---- the probe and the count, in-process -------------------------------- */

static void
test_probe_and_count(void **state)
{
    enum { MB = 1 << 20 };
    char why[256] = "";
    uint64_t h0;
    void *a, *b, *small, *got = NULL;
    int busy, tx, rx, fd;
    char url[64];

    (void)state;
    /* Debian's libnanomsg5 1.1.5: the layout is the known one */
    if (!srv__rmem_probe(why, sizeof why))
        fail_msg("the probe refused this nanomsg: %s", why);
    assert_true(srv__rmem_probe(NULL, 0));  /* once a process, same answer */
    h0 = srv__rmem_held();
    assert_int_equal(h0, 0);    /* nothing of this process's is counted */
    /* with nothing held, a message larger than the cap is admitted (a cap
     * set near the largest message cannot refuse one for ever) */
    a = srv__rmem_alloc(3 * MB, 2 * MB, &busy);
    assert_non_null(a);
    assert_int_equal(busy, 0);
    assert_int_equal(srv__rmem_held(), 3 * MB);
    nn_freemsg(a);
    assert_int_equal(srv__rmem_held(), 0);

    /* counted from the allocation; past the cap refused, counted nothing */
    a = srv__rmem_alloc(MB, 2 * MB, &busy);
    assert_non_null(a);
    assert_int_equal(busy, 0);
    assert_int_equal(srv__rmem_held(), h0 + MB);
    b = srv__rmem_alloc(MB + MB / 2, 2 * MB, &busy);
    assert_null(b);
    assert_int_equal(busy, 1);
    assert_int_equal(srv__rmem_held(), h0 + MB);
    /* the largest small one goes whatever the cap; the smallest large
     * one does not */
    small = srv__rmem_alloc(SRV_REPLY_SMALL - 1, 1, &busy);
    assert_non_null(small);
    assert_int_equal(busy, 0);
    assert_null(srv__rmem_alloc(SRV_REPLY_SMALL, 1, &busy));
    assert_int_equal(busy, 1);
    assert_int_equal(srv__rmem_held(), h0 + MB + SRV_REPLY_SMALL - 1);
    /* a counted message is an ordinary one: writable to its end */
    memset(a, 0x5a, MB);
    nn_freemsg(small);
    nn_freemsg(a);
    assert_int_equal(srv__rmem_held(), h0);

    /* sent: counted until nanomsg frees it (on the way, or the
     * receiver: inproc may hand the message itself over) */
    snprintf(url, sizeof url, "inproc://rmem%ld", (long)getpid());
    assert_true((rx = nn_socket(AF_SP, NN_PAIR)) >= 0);
    assert_true((tx = nn_socket(AF_SP, NN_PAIR)) >= 0);
    assert_true(nn_bind(rx, url) >= 0);
    assert_true(nn_connect(tx, url) >= 0);
    a = srv__rmem_alloc(MB, 0, &busy);
    assert_non_null(a);
    memset(a, 7, MB);
    assert_int_equal(nn_send(tx, &a, NN_MSG, 0), MB);
    assert_int_equal(nn_recv(rx, &got, NN_MSG, 0), MB);
    assert_int_equal(((unsigned char *)got)[MB - 1], 7);
    nn_freemsg(got);
    await_held(h0);
    nn_close(tx);
    nn_close(rx);

    /* unsent to a TCP peer that never reads: counted until the socket
     * closes */
    assert_true((tx = nn_socket(AF_SP, NN_PAIR)) >= 0);
    {
        int port = gkvt_port_base(1);

        snprintf(url, sizeof url, "tcp://127.0.0.1:%d", port);
        assert_true(nn_bind(tx, url) >= 0);
        fd = gkvt_sp_connect(port, NN_PAIR);
    }
    tools__sleep_ms(100);       /* the pipe is up */
    a = srv__rmem_alloc(8 * MB, 0, &busy);
    assert_non_null(a);
    memset(a, 1, 8 * MB);
    assert_int_equal(nn_send(tx, &a, NN_MSG, NN_DONTWAIT), 8 * MB);
    tools__sleep_ms(200);
    assert_int_equal(srv__rmem_held(), h0 + 8 * MB);
    nn_close(tx);
    await_held(h0);
    close(fd);
}

/* The probe's check, field by field, on a copy of a real message's
 * header (nanomsg 1.1.5: struct nn_chunk {u32 refcount; size_t size;
 * free function}, u32 offset, u32 tag, big-endian, then the data): the
 * copy passes, and each field changed is named. */
static void
own_free(void *p)
{
    (void)p;
}

static void
test_probe_layout(void **state)
{
    enum { ODD = 4099 };
    struct {
        uint32_t refcount;
        size_t size;
        void (*ffn)(void *);
        unsigned char off[4], tag[4];
        unsigned char data[ODD];
    } k, good;
    unsigned char *m = nn_allocmsg(ODD, 0);
    char why[256] = "";

    (void)state;
    assert_non_null(m);
    assert_int_equal(offsetof(__typeof__(k), data), 32);
    memcpy(&good, m - 32, 32);
    nn_freemsg(m);
    k = good;
    if (!srv__rmem_layout(k.data, ODD, why, sizeof why))
        fail_msg("a copy of a real header: %s", why);
    k.tag[3] ^= 1;
    assert_false(srv__rmem_layout(k.data, ODD, why, sizeof why));
    gkvt_expect_has(why, "no chunk tag before the data (0xdeadcaff)");
    k = good;
    k.off[3] = 8;
    assert_false(srv__rmem_layout(k.data, ODD, why, sizeof why));
    gkvt_expect_has(why, "a chunk offset 8, not 0");
    k = good;
    assert_false(srv__rmem_layout(k.data, ODD + 1, why, sizeof why));
    gkvt_expect_has(why, "the chunk's size field reads 4099 for a 4100-byte "
                    "message");
    k.refcount = 2;
    assert_false(srv__rmem_layout(k.data, ODD, why, sizeof why));
    gkvt_expect_has(why, "the chunk's reference count reads 2");
    k = good;
    k.ffn = own_free;
    assert_false(srv__rmem_layout(k.data, ODD, why, sizeof why));
    gkvt_expect_has(why, "its free function lies in ");
    gkvt_expect_has(why, "net_replies_test, not in nanomsg");
}

/* The option's bounds: below max_msg refused by the library, not a byte
 * count by gkv-server, each naming what was wrong. */
static void
test_option_bounds(void **state)
{
    struct gkvt_rawfx *f = *state;
    gkv_server_opts o = {0};
    gkv_server *s = NULL;
    char *out = NULL, *err = NULL;

    o.store = f->st;
    o.ip_config = f->cfg;
    o.max_msg = 1 << 20;
    o.max_reply_mem = (1 << 20) - 1;
    assert_int_equal(gkv_server_open(&s, &o), GKV_EINVAL);
    assert_null(s);
    gkvt_expect_has(gkv_net_errmsg(), "max reply memory 1048575 is less than "
                    "the largest message, 1048624 bytes with its header");
    gkvt_expect_has(gkv_net_errmsg(), "lower max_msg (--max-msg) too");
    /* the largest message's header counts too */
    o.max_reply_mem = 1 << 20;
    assert_int_equal(gkv_server_open(&s, &o), GKV_EINVAL);
    assert_null(s);
    o.max_reply_mem = (1 << 20) + NET_HDR_LEN;
    gkvt_make_f32(f->st, "t", 1, 0, 1);
    {
        char text[64];

        snprintf(text, sizeof text, "127.0.0.1 %d\n", gkvt_port_base(1));
        gkvt_write_text(f->cfg, text, 0644);
    }
    if (gkv_server_open(&s, &o) != GKV_OK)
        fail_msg("gkv_server_open: %s", gkv_net_errmsg());
    gkv_server_close(s);
    assert_int_not_equal(gkvt_tool("gkv-server", &out, &err, "--store",
                                   f->st, "--ip-config", f->cfg,
                                   "--max-reply-memory", "lots", NULL), 0);
    gkvt_expect_has(err, "--max-reply-memory");
    gkvt_expect_has(err, "is not a byte count");
    free(out);
    free(err);
}

/* ---- twelve peers that never read ---------------------------------------- */

enum {
    ROWW = 4096,                     /* floats a row: 16 KiB */
    NROW = 2048,                     /* 32 MiB a whole pull */
    NATK = 12,
    KEEP = 3,                        /* whole pulls the cap holds */
    SMALLN = 3,                      /* a 48 KiB pull: under 64 KiB */
};
#define PULL_MSG ((uint64_t)NET_HDR_LEN + 16 + (uint64_t)NROW * ROWW * 4)
/* --max-reply-memory: KEEP whole pulls and 16 MiB of room, which the
 * client's pulls use (it asks for 2 MiB a message) */
#define CAP (KEEP * PULL_MSG + (16u << 20))
#define CAP_S "117440704"

static double
now_ms(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int
cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

/* The server's stats once it has taken 'n' pulls (served or refused). */
static void
await_pulls(gkv_client *c, uint64_t n, gkv_server_stats *ss)
{
    for (int k = 0; k < 400; k++) {
        NET_OK(gkv_client_stats(c, 0, ss));
        if (ss->pulls + ss->reply_mem_refused >= n)
            return;
        tools__sleep_ms(50);
    }
    fail_msg("the server took %llu pulls of %llu",
             (unsigned long long)(ss->pulls + ss->reply_mem_refused),
             (unsigned long long)n);
}

/* Encodes a PULL of rows ids[0..nrow) of "big" into pl (cap bytes) and
 * sends it from each of the n sessions sess[], each on a REQ socket of
 * its own to port (fd[i]), never reading the replies. The payload's
 * length. */
static size_t
send_unread_pulls(int port, const uint64_t *sess, int n, const uint64_t *ids,
                  size_t nrow, unsigned char *pl, size_t cap, int *fd)
{
    net_wr w = {pl, cap, 0};
    unsigned char *m = malloc(NET_HDR_LEN + cap);

    assert_non_null(m);
    net__enc_pull_req(&w, "big", ids, NULL, nrow);
    for (int i = 0; i < n; i++) {
        size_t len = gkvt_raw_msg(m, NET_PULL, sess[i], 100 + (uint64_t)i,
                                  pl, w.off);

        fd[i] = gkvt_sp_connect(port, NN_REQ);
        gkvt_sp_send(fd[i], 1, m, len);
    }
    free(m);
    return w.off;
}

static void
test_peers_never_read(void **state)
{
    struct gkvt_rawfx *f = *state;
    const char *extra[] = {"--keep-alive", "--max-reply-memory", CAP_S,
                           "--max-msg", "40000000", "--heartbeat-timeout",
                           "600000", NULL};
    static uint64_t ids[NROW];
    static unsigned char pl[16 + NROW * 8 + 64];
    size_t plen, rb = (size_t)ROWW * 4;
    float *want, *got = malloc((size_t)NROW * rb);
    gkv_server_stats ss = {0};
    gkv_client_opts o = {0};
    struct gkvt_proc *srv;
    struct gkvt_rep rep = {0};
    gkv_client *c;
    uint64_t sess[NATK], base;
    double lat[20];
    long before, peak;
    int fd[NATK], s;
    char addr[64], *out = NULL, *err = NULL;

    gkvt_make_f32(f->st, "big", ROWW, 0, NROW);
    want = gkvt_read_all(f->st, "big", NROW, rb);
    for (int i = 0; i < NROW; i++)
        ids[i] = (uint64_t)i;
    srv = gkvt_rawfx_serve_peak(f, extra);
    assert_true(gkvt_file_has(srv->log, "max reply memory " CAP_S " bytes"));
    o.timeout_ms = 10000;
    NET_OK(gkv_client_connect(&c, f->cfg, NULL, "good", 0, &o));
    /* a whole pull works, and is freed once read */
    NET_OK(gkv_client_pull(c, "big", ids, NROW, got, (size_t)NROW * rb));
    assert_memory_equal(got, want, (size_t)NROW * rb);
    s = gkvt_raw_socket(f->base, 10000);
    for (int i = 0; i < NATK; i++)
        sess[i] = gkvt_rhandshake(s, "atk", (uint32_t)i);

    /* twelve connections ask for the whole tensor and never read */
    before = gkvt_peak_kib(srv->pid);
    NET_OK(gkv_client_stats(c, 0, &ss));
    base = ss.pulls;
    plen = send_unread_pulls(f->base, sess, NATK, ids, NROW, pl, sizeof pl,
                             fd);
    await_pulls(c, base + NATK, &ss);
    /* 3 fit the cap and are held (with at most a few small replies on
     * their way); the other 9 were refused */
    assert_int_equal(ss.pulls - base, KEEP);
    assert_int_equal(ss.reply_mem_refused, NATK - KEEP);
    assert_int_equal(ss.reply_mem_max, CAP);
    assert_int_equal(CAP, strtoull(CAP_S, NULL, 10));
    assert_true(ss.reply_mem_bytes >= KEEP * PULL_MSG);
    assert_true(ss.reply_mem_bytes < KEEP * PULL_MSG + SRV_REPLY_SMALL);
    assert_true(gkvt_file_has(srv->log, "refused a pull reply of 33554448 "
                              "bytes: "));
    assert_true(gkvt_file_has(srv->log, "the cap is " CAP_S " "
                              "(--max-reply-memory); clients are not "
                              "reading their replies"));
    peak = gkvt_peak_kib(srv->pid);
    printf("# server peak grew by %ld KiB during the attack (cap %llu KiB; "
           "%d unread 32 MiB pulls would be %d KiB)\n", peak - before,
           (unsigned long long)CAP >> 10, NATK, NATK * 32 * 1024);
    assert_true(peak - before < (long)(CAP >> 10) + 48 * 1024);

    /* a whole pull in one message meanwhile: refused at once, saying why */
    assert_int_equal(gkvt_rcall(s, NET_PULL, sess[0], 900, pl, plen,
                                &rep), 0);
    assert_int_equal(rep.h.status, GKV_EBUSY);
    gkvt_expect_has(rep.msg, "pull: a reply of 33554448 bytes would take the "
                    "replies this server process holds unsent past its cap of "
                    CAP_S " bytes (--max-reply-memory;");
    gkvt_expect_has(rep.msg, "clients are not reading their replies");
    /* the client's pulls are served, with the right rows: a whole one
     * (in 2 MiB messages, in the cap's room) and small ones */
    {
        double t0 = now_ms();

        memset(got, 0, (size_t)NROW * rb);
        NET_OK(gkv_client_pull(c, "big", ids, NROW, got, (size_t)NROW * rb));
        printf("# well-behaved client during the attack: 32 MiB pull "
               "%.1f ms\n", now_ms() - t0);
        assert_memory_equal(got, want, (size_t)NROW * rb);
    }
    for (int k = 0; k < 20; k++) {
        uint64_t at[SMALLN];
        double t0 = now_ms();

        for (int i = 0; i < SMALLN; i++)
            at[i] = (uint64_t)((k * 97 + i * 13) % NROW);
        NET_OK(gkv_client_pull(c, "big", at, SMALLN, got, SMALLN * rb));
        lat[k] = now_ms() - t0;
        for (int i = 0; i < SMALLN; i++)
            assert_memory_equal((unsigned char *)got + i * rb,
                                (unsigned char *)want + at[i] * rb, rb);
    }
    qsort(lat, 20, sizeof *lat, cmp_dbl);
    printf("# well-behaved client during the attack: 48 KiB pull median "
           "%.2f ms, max %.2f ms\n", lat[10], lat[19]);

    /* the peers go: the count is 0 again, large pulls work again */
    for (int i = 0; i < NATK; i++)
        close(fd[i]);
    for (int k = 0; k < 200; k++) {
        NET_OK(gkv_client_stats(c, 0, &ss));
        if (ss.reply_mem_bytes == 0)
            break;
        tools__sleep_ms(50);
    }
    assert_int_equal(ss.reply_mem_bytes, 0);
    snprintf(addr, sizeof addr, "127.0.0.1:%d", f->base);
    assert_int_equal(gkvt_tool("kvctl", &out, &err, "--server", addr,
                               "stat", NULL), 0);
    gkvt_expect_has(out, "reply memory: 0 bytes held unsent, of " CAP_S
                    " (10 replies refused)");
    assert_int_equal(gkvt_rcall(s, NET_PULL, sess[0], 901, pl, plen, &rep),
                     0);
    assert_int_equal(rep.h.status, GKV_OK);
    assert_int_equal(rep.plen, PULL_MSG - NET_HDR_LEN);
    assert_memory_equal(rep.pl + 16, want, (size_t)NROW * rb);
    NET_OK(gkv_client_close(c));
    nn_close(s);
    free(rep.pl);
    free(out);
    free(err);
    assert_true(gkvt_proc_alive(srv));
    free(got);
    free(want);
}

/* ---- the cap full to the byte: control replies go, pulls wait ----------- */

enum { ROW2 = 4096, NROW2 = 1024, NATK2 = 2, NSCHEMA = 320 };
#define PULL2_MSG ((uint64_t)NET_HDR_LEN + 16 + (uint64_t)NROW2 * ROW2 * 4)
#define CAP2_S "33554560"        /* NATK2 whole 16 MiB pulls: no room left */

struct later_pull {
    gkv_client *c;
    const uint64_t *ids;
    size_t n, rb;
    void *dst;
    gkv_err rc;
};

static void *
later_pull_run(void *arg)
{
    struct later_pull *lp = arg;

    lp->rc = gkv_client_pull(lp->c, "big", lp->ids, lp->n, lp->dst,
                             lp->n * lp->rb);
    return NULL;
}

/* Two peers that never read hold the cap to the byte. A client's
 * handshake (a schema reply of over 64 KiB: 320 tensors of long names) is
 * a control reply and goes through; its 128 KiB pull with a short
 * deadline ends in GKV_EBUSY naming the cap; the same pull with a longer
 * one waits, asking again, and gets the right rows once the peers have
 * gone (the server refused it at least once meanwhile). */
static void
test_cap_full(void **state)
{
    struct gkvt_rawfx *f = *state;
    const char *extra[] = {"--keep-alive", "--max-reply-memory", CAP2_S,
                           "--max-msg", "17000000", "--heartbeat-timeout",
                           "600000", NULL};
    static uint64_t ids[NROW2];
    static unsigned char pl[16 + NROW2 * 8 + 64];
    size_t rb = (size_t)ROW2 * 4;
    enum { PN = 8 };              /* 8 rows: a 128 KiB reply */
    float *want, *got = calloc(NROW2, rb);
    gkv_server_stats ss = {0};
    gkv_client_opts o = {0};
    struct gkvt_proc *srv;
    struct later_pull lp = {0};
    gkv_client *c, *late, *hasty;
    uint64_t sess[NATK2], base, refused;
    pthread_t th;
    int fd[NATK2], s;

    assert_int_equal(2 * PULL2_MSG, strtoull(CAP2_S, NULL, 10));
    gkvt_make_f32(f->st, "big", ROW2, 0, NROW2);
    for (int i = 0; i < NSCHEMA; i++) {
        char name[GKV_NAME_MAX + 1];

        snprintf(name, sizeof name, "schema_%03d_%0200d", i, 0);
        gkvt_make_f32(f->st, name, 1, 0, 1);
    }
    want = gkvt_read_all(f->st, "big", NROW2, rb);
    for (int i = 0; i < NROW2; i++)
        ids[i] = (uint64_t)i;
    srv = gkvt_rawfx_serve(f, extra);
    o.timeout_ms = 10000;
    NET_OK(gkv_client_connect(&c, f->cfg, NULL, "good", 0, &o));
    s = gkvt_raw_socket(f->base, 10000);
    for (int i = 0; i < NATK2; i++)
        sess[i] = gkvt_rhandshake(s, "atk", (uint32_t)i);
    NET_OK(gkv_client_stats(c, 0, &ss));
    base = ss.pulls;
    send_unread_pulls(f->base, sess, NATK2, ids, NROW2, pl, sizeof pl, fd);
    await_pulls(c, base + NATK2, &ss);
    assert_int_equal(ss.pulls - base, NATK2);
    assert_int_equal(ss.reply_mem_refused, 0);
    assert_true(ss.reply_mem_bytes >= 2 * PULL2_MSG);

    /* handshakes with a schema of over 64 KiB: never refused */
    o.timeout_ms = 1500;
    NET_OK(gkv_client_connect(&hasty, f->cfg, NULL, "late", 0, &o));
    o.timeout_ms = 10000;
    NET_OK(gkv_client_connect(&late, f->cfg, NULL, "late", 1, &o));
    NET_OK(gkv_client_stats(late, 0, &ss));
    assert_int_equal(ss.reply_mem_refused, 0);
    /* a pull with a short deadline: asked again until it, then refused */
    assert_int_equal(gkv_client_pull(hasty, "big", ids, PN, got, PN * rb),
                     GKV_EBUSY);
    gkvt_expect_has(gkv_net_errmsg(), "pull: a reply of 131088 bytes would "
                    "take the replies this server process holds unsent past "
                    "its cap of " CAP2_S " bytes (--max-reply-memory;");
    gkvt_expect_has(gkv_net_errmsg(), "Nothing was read or changed");
    NET_OK(gkv_client_stats(c, 0, &ss));
    assert_true(ss.reply_mem_refused >= 2);  /* asked more than once */
    refused = ss.reply_mem_refused;

    NET_OK(gkv_client_close(hasty));
    /* a longer deadline: it waits, and gets its rows once the peers go */
    lp.c = late;
    lp.ids = ids + 5;
    lp.n = PN;
    lp.rb = rb;
    lp.dst = got;
    assert_int_equal(pthread_create(&th, NULL, later_pull_run, &lp), 0);
    for (int k = 0; k < 100; k++) {
        NET_OK(gkv_client_stats(c, 0, &ss));
        if (ss.reply_mem_refused > refused)
            break;
        tools__sleep_ms(20);
    }
    assert_true(ss.reply_mem_refused > refused);  /* it was refused ... */
    for (int i = 0; i < NATK2; i++)
        close(fd[i]);
    assert_int_equal(pthread_join(th, NULL), 0);
    NET_OK(lp.rc);                                /* ... and then served */
    assert_memory_equal(got, (unsigned char *)want + 5 * rb, PN * rb);
    NET_OK(gkv_client_close(late));
    NET_OK(gkv_client_close(c));
    nn_close(s);
    assert_true(gkvt_proc_alive(srv));
    free(got);
    free(want);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_probe_layout),
        cmocka_unit_test(test_probe_and_count),
        cmocka_unit_test_setup_teardown(test_option_bounds, setup, gkvt_rawfx_teardown),
        cmocka_unit_test_setup_teardown(test_peers_never_read, setup, gkvt_rawfx_teardown),
        cmocka_unit_test_setup_teardown(test_cap_full, setup, gkvt_rawfx_teardown),
    };

    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests_name("net_replies", tests, NULL, NULL);
}
