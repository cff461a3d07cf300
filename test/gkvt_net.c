/* gkvt_net.c - a test's gkv-server processes on loopback (gkvt_net.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <nanomsg/nn.h>
#include <nanomsg/reqrep.h>
#include "gkvt_net.h"
#include "net/wire.h"

int
gkvt_job_init(struct gkvt_job *j, const char *tag, int maxproc)
{
    memset(j, 0, sizeof *j);
    if ((j->dir = gkvt_mkdtemp(tag)) == NULL)
        return -1;
    snprintf(j->cfg, sizeof j->cfg, "%s/ip.cfg", j->dir);
    for (int m = 0; m < GKVT_JOB_MACH; m++)
        snprintf(j->st[m], sizeof j->st[m], "%s/st%d", j->dir, m);
    j->maxproc = maxproc < GKVT_JOB_PROCS ? maxproc : GKVT_JOB_PROCS;
    return 0;
}

int
gkvt_job_fini(struct gkvt_job *j)
{
    int bad = gkvt_proc_reap_all(j->p, j->np);

    j->np = 0;
    gkvt_rmtree(j->dir);
    j->dir = NULL;
    return bad ? -1 : 0;
}

int
gkvt_job_setup(void **state, size_t size, const char *tag, int maxproc,
               const char *const *opts, int drop_clashed)
{
    struct gkvt_job *j = calloc(1, size > sizeof *j ? size : sizeof *j);

    if (j == NULL || gkvt_job_init(j, tag, maxproc) != 0) {
        free(j);
        return -1;
    }
    j->opts = opts;
    j->drop_clashed = drop_clashed;
    *state = j;
    return 0;
}

int
gkvt_job_teardown(void **state)
{
    struct gkvt_job *j = *state;
    int bad = gkvt_job_fini(j);

    free(j);
    return bad;
}

struct gkvt_proc *
gkvt_job_spawn(struct gkvt_job *j, char *const argv[], const char *logname)
{
    return gkvt_spawn(j->p, &j->np, j->maxproc, j->dir, argv, logname);
}

void
gkvt_ipcfg_write(const char *path, const char *head, int base, int nmach)
{
    char text[1024];
    size_t o = 0;

    if (head != NULL)
        o += (size_t)snprintf(text + o, sizeof text - o, "%s\n", head);
    for (int m = 0; m < nmach && o < sizeof text; m++)
        o += (size_t)snprintf(text + o, sizeof text - o, "127.0.0.1 %d\n",
                              base + 8 * m);
    assert_true(o < sizeof text);
    gkvt_write_text(path, text, 0644);
}

struct gkvt_proc *
gkvt_server_try(struct gkvt_job *j, int m, int k, const char *const *extra)
{
    char *argv[48], mach[16], sid[16], ns[16], logname[64], server[4200];
    struct gkvt_proc *p;
    int n = 0;

    assert_true(m >= 0 && m < GKVT_JOB_MACH);
    snprintf(server, sizeof server, "%s", gkvt_prog("gkv-server"));
    snprintf(mach, sizeof mach, "%d", m);
    snprintf(sid, sizeof sid, "%d", k);
    snprintf(ns, sizeof ns, "%d", j->nserv);
    snprintf(logname, sizeof logname, "server-m%d-s%d.log", m, k);
    argv[n++] = server;
    if (j->json[0] != '\0') {
        argv[n++] = "--part-config";
        argv[n++] = j->json;
        argv[n++] = "--part-id";
        argv[n++] = mach;
        argv[n++] = "--ip-config";
        argv[n++] = j->cfg;
    } else {
        argv[n++] = "--store";
        argv[n++] = j->st[m];
        argv[n++] = "--ip-config";
        argv[n++] = j->cfg;
        argv[n++] = "--machine";
        argv[n++] = mach;
    }
    argv[n++] = "--server-id";
    argv[n++] = sid;
    argv[n++] = "--num-servers";
    argv[n++] = ns;
    for (int i = 0; j->opts != NULL && j->opts[i] != NULL; i++) {
        assert_true(n < 47);
        argv[n++] = (char *)j->opts[i];
    }
    for (int i = 0; extra != NULL && extra[i] != NULL; i++) {
        assert_true(n < 47);
        argv[n++] = (char *)extra[i];
    }
    argv[n] = NULL;
    p = gkvt_job_spawn(j, argv, logname);
    return gkvt_server_listening(p) ? p : NULL;
}

void
gkvt_serve(struct gkvt_job *j, int nmach, int nserv, const char *const *extra,
           struct gkvt_proc **srv)
{
    for (int attempt = 0; attempt < 20; attempt++) {
        int clash = 0;

        j->nmach = nmach;
        j->nserv = nserv;
        j->base = gkvt_port_base(8 * nmach);
        gkvt_ipcfg_write(j->cfg, j->cfg_head, j->base, nmach);
        for (int m = 0; m < nmach && !clash; m++)
            for (int k = 0; k < nserv && !clash; k++) {
                struct gkvt_proc *p = gkvt_server_try(j, m, k, extra);

                if (srv != NULL)
                    srv[m * nserv + k] = p;
                clash = p == NULL;
            }
        if (!clash)
            return;
        for (int i = 0; i < j->np; i++)
            gkvt_proc_kill(&j->p[i]);
        if (j->drop_clashed)
            j->np = 0;
    }
    fail_msg("could not find free ports in 20 tries");
}

gkv_client *
gkvt_connect(const char *cfg, const char *group, uint32_t rank,
             const gkv_client_opts *o)
{
    gkv_client *c = NULL;
    gkv_err rc = gkv_client_connect(&c, cfg, NULL, group, rank, o);

    if (rc != GKV_OK)
        fail_msg("connect to the servers of %s as %s rank %u: %s: %s", cfg,
                 group, (unsigned)rank, gkv_err_name(rc), gkv_net_errmsg());
    return c;
}

unsigned char *
gkvt_encode(void (*enc)(net_wr *w, const void *arg), const void *arg,
            size_t *len)
{
    net_wr w = {0};
    unsigned char *b;

    enc(&w, arg);
    *len = w.off;
    b = malloc(w.off + 1);
    assert_non_null(b);
    w.p = b;
    w.cap = w.off;
    w.off = 0;
    enc(&w, arg);
    assert_int_equal(w.off, *len);
    return b;
}

int
gkvt_raw_socket(int port, int timeout_ms)
{
    int s = nn_socket(AF_SP, NN_REQ), v = -1;
    char url[64];

    assert_true(s >= 0);
    nn_setsockopt(s, NN_SOL_SOCKET, NN_RCVMAXSIZE, &v, sizeof v);
    nn_setsockopt(s, NN_SOL_SOCKET, NN_RCVTIMEO, &timeout_ms, sizeof timeout_ms);
    v = INT_MAX;
    nn_setsockopt(s, NN_REQ, NN_REQ_RESEND_IVL, &v, sizeof v);
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", port);
    assert_true(nn_connect(s, url) >= 0);
    return s;
}

size_t
gkvt_raw_msg(unsigned char *b, uint16_t type, uint64_t session, uint64_t req,
             const void *pl, size_t plen)
{
    net_hdr h = {0};

    h.magic = NET_MAGIC;
    h.version = NET_VERSION;
    h.type = type;
    h.req_id = req;
    h.session = session;
    h.len = plen;
    net__hdr_put(b, &h);
    if (plen > 0)
        memcpy(b + NET_HDR_LEN, pl, plen);
    return NET_HDR_LEN + plen;
}

/* ---- one server spoken to by hand ---------------------------------------- */

struct gkvt_proc *
gkvt_rawfx_spawn(struct gkvt_rawfx *f, char *const argv[], const char *logname)
{
    return gkvt_spawn(f->p, &f->np, GKVT_RAWFX_PROCS, f->dir, argv, logname);
}

struct gkvt_proc *
gkvt_rawfx_start(struct gkvt_rawfx *f, const char *const *lead, const char *const *extra)
{
    return gkvt_rawfx_start_n(f, 1, lead, extra);
}

struct gkvt_proc *
gkvt_rawfx_start_n(struct gkvt_rawfx *f, int nmach, const char *const *lead,
                   const char *const *extra)
{
    assert_true(nmach >= 1 && nmach <= 8);
    for (int attempt = 0; attempt < 20; attempt++) {
        char *argv[48], text[8 * 32];
        struct gkvt_proc *p;
        size_t off = 0;
        int n = 0;

        f->base = gkvt_port_base(8 * nmach);
        for (int m = 0; m < nmach; m++)
            off += (size_t)snprintf(text + off, sizeof text - off,
                                    "127.0.0.1 %d\n", f->base + 8 * m);
        gkvt_write_text(f->cfg, text, 0644);
        argv[n++] = f->server;
        argv[n++] = "--ip-config";
        argv[n++] = f->cfg;
        for (int i = 0; lead[i] != NULL && n < 24; i++)
            argv[n++] = (char *)lead[i];
        for (int i = 0; extra != NULL && extra[i] != NULL && n < 46; i++)
            argv[n++] = (char *)extra[i];
        argv[n] = NULL;
        p = gkvt_rawfx_spawn(f, argv, "server.log");
        if (gkvt_server_listening(p))
            return p;
    }
    fail_msg("could not find free ports in 20 tries");
    return NULL;
}

struct gkvt_proc *
gkvt_rawfx_serve(struct gkvt_rawfx *f, const char *const *extra)
{
    const char *lead[] = {"--store", f->st, "--machine", "0", NULL};

    return gkvt_rawfx_start(f, lead, extra);
}

struct gkvt_proc *
gkvt_rawfx_serve_peak(struct gkvt_rawfx *f, const char *const *extra)
{
    /* SAN=address: freed memory would wait in ASan's quarantine and count
     * as resident; the server gets none, so that its peak shows what it
     * keeps (other builds ignore the variable) */
    const char *e = getenv("ASAN_OPTIONS");
    char *old = e != NULL ? strdup(e) : NULL, env[1024];
    struct gkvt_proc *srv;

    snprintf(env, sizeof env, "%s%squarantine_size_mb=0",
             old != NULL ? old : "", old != NULL && *old ? ":" : "");
    setenv("ASAN_OPTIONS", env, 1);
    srv = gkvt_rawfx_serve(f, extra);
    if (old != NULL)
        setenv("ASAN_OPTIONS", old, 1);
    else
        unsetenv("ASAN_OPTIONS");
    free(old);
    return srv;
}

int
gkvt_rawfx_setup(void **state, const char *tag)
{
    struct gkvt_rawfx *f;

    if (gkvt_dir_setup(state, sizeof *f, tag) != 0)
        return -1;
    f = *state;
    snprintf(f->st, sizeof f->st, "%s/st", f->dir);
    snprintf(f->cfg, sizeof f->cfg, "%s/ip.cfg", f->dir);
    snprintf(f->server, sizeof f->server, "%s", gkvt_prog("gkv-server"));
    return 0;
}

int
gkvt_rawfx_teardown(void **state)
{
    struct gkvt_rawfx *f = *state;
    int bad = gkvt_proc_reap_all(f->p, f->np);

    gkvt_dir_teardown(state);
    return bad ? -1 : 0;
}

/* ---- the wire, by hand ------------------------------------------------- */

void
gkvt_rsend(int s, uint16_t type, uint64_t session, uint64_t req, const void *pl,
      size_t plen)
{
    unsigned char *b = malloc(NET_HDR_LEN + plen + 1);
    size_t len = gkvt_raw_msg(b, type, session, req, pl, plen);

    assert_int_equal(nn_send(s, b, len, 0), (int)len);
    free(b);
}

int
gkvt_rrecv(int s, struct gkvt_rep *r)
{
    void *m = NULL;
    char why[256];
    int n;

    free(r->pl);
    memset(r, 0, sizeof *r);
    if ((n = nn_recv(s, &m, NN_MSG, 0)) < 0)
        return -1;
    assert_int_equal(net__hdr_check(m, (size_t)n, &r->h, why, sizeof why), GKV_OK);
    assert_true(r->h.flags & NET_F_REPLY);
    r->plen = (size_t)r->h.len;
    r->pl = malloc(r->plen + 1);
    memcpy(r->pl, (unsigned char *)m + NET_HDR_LEN, r->plen);
    nn_freemsg(m);
    if (r->h.status != 0) {
        net_rd rd;
        net__rd_init(&rd, r->pl, r->plen);
        assert_int_equal(net__dec_err(&rd, r->msg, sizeof r->msg), 0);
    }
    return 0;
}

int
gkvt_rcall(int s, uint16_t type, uint64_t session, uint64_t req, const void *pl,
      size_t plen, struct gkvt_rep *r)
{
    gkvt_rsend(s, type, session, req, pl, plen);
    return gkvt_rrecv(s, r);
}

void
gkvt_rhello(int s, unsigned char *n)
{
    struct gkvt_rep r = {0};
    net_hello_rep hr;
    net_rd rd;

    assert_int_equal(gkvt_rcall(s, NET_HELLO, 0, 1, NULL, 0, &r), 0);
    assert_int_equal(r.h.status, 0);
    net__rd_init(&rd, r.pl, r.plen);
    assert_int_equal(net__dec_hello_rep(&rd, &hr), 0);
    memcpy(n, hr.nonce, NET_NONCE_LEN);
    free(r.pl);
}

uint64_t
gkvt_rhs(int s, const unsigned char *n, const char *token, const char *group,
    uint32_t rank, uint32_t flags, struct gkvt_rep *r)
{
    unsigned char b[512];
    net_wr w = {b, sizeof b, 0};
    net_hs_req hs;
    net_hs_rep hp;
    net_rd rd;

    memset(&hs, 0, sizeof hs);
    memcpy(hs.nonce, n, NET_NONCE_LEN);
    snprintf(hs.group, sizeof hs.group, "%s", group);
    hs.rank = rank;
    hs.flags = flags;
    if (token != NULL) {
        unsigned char key[NET_KEY_LEN];
        net__token_key(token, strlen(token), key);
        net__proof(key, hs.nonce, group, rank, hs.mac);
        hs.flags |= NET_HS_PROOF;
    }
    net__enc_hs_req(&w, &hs);
    assert_int_equal(gkvt_rcall(s, NET_HANDSHAKE, 0, 2, b, w.off, r), 0);
    if (r->h.status != 0)
        return 0;
    net__rd_init(&rd, r->pl, r->plen);
    assert_int_equal(net__dec_hs_rep(&rd, &hp), 0);
    net__schema_free(&hp.schema);
    return hp.session;
}

uint64_t
gkvt_rjoin(int s, const char *group, uint32_t rank, uint32_t flags, struct gkvt_rep *r)
{
    unsigned char n[NET_NONCE_LEN];

    gkvt_rhello(s, n);
    return gkvt_rhs(s, n, NULL, group, rank, flags, r);
}

uint64_t
gkvt_rhandshake(int s, const char *group, uint32_t rank)
{
    struct gkvt_rep r = {0};
    uint64_t sess = gkvt_rjoin(s, group, rank, 0, &r);

    if (r.h.status != 0)
        fail_msg("handshake of '%s' rank %u: %s", group, rank, r.msg);
    free(r.pl);
    return sess;
}

uint64_t
gkvt_rrequests(int s, uint64_t sess)
{
    static uint64_t req = 900;
    struct gkvt_rep r = {0};
    net_stats *st = malloc(sizeof *st);
    uint64_t v = 0;
    int found = 0;
    net_rd rd;

    assert_non_null(st);
    assert_int_equal(gkvt_rcall(s, NET_STATS, sess, req++, NULL, 0, &r), 0);
    if (r.h.status != 0)
        fail_msg("stats: %s", r.msg);
    net__rd_init(&rd, r.pl, r.plen);
    assert_int_equal(net__dec_stats(&rd, st), 0);
    for (uint32_t i = 0; i < st->n; i++)
        if (strcmp(st->kv[i].key, "requests") == 0) {
            v = st->kv[i].val;
            found = 1;
        }
    assert_true(found);
    free(st);
    free(r.pl);
    return v;
}

void
gkvt_await_taken(int s, uint64_t sess, uint64_t before)
{
    double t0 = tools__now_s();

    for (uint64_t polls = 1;; polls++) {
        if (gkvt_rrequests(s, sess) > before + polls)
            return;
        if (tools__now_s() - t0 > 30)
            fail_msg("the server did not take up a request in 30 s");
        tools__sleep_ms(5);
    }
}

size_t
gkvt_enc_add(unsigned char *b, size_t cap, const char *name, uint64_t id, size_t n,
        size_t w, float v)
{
    static const double opt[4] = {0};
    net_wr wr = {b, cap, 0};
    uint64_t *ids = malloc(n * 8);
    float *rows = malloc(n * w * sizeof *rows);

    for (size_t i = 0; i < n; i++)
        ids[i] = id + i;
    for (size_t i = 0; i < n * w; i++)
        rows[i] = v;
    net__enc_push_req(&wr, name, "add", 0, opt, w * sizeof *rows, ids, rows, NULL, n);
    free(ids);
    free(rows);
    return wr.off;
}

void
gkvt_assert_added(const float *got, const float *was, size_t n, float d)
{
    for (size_t i = 0; i < n; i++)
        if (got[i] != was[i] + d)
            fail_msg("element %zu is %g; it was %g and %g was added once",
                     i, got[i], was[i], d);
}

int
gkvt_sp_connect(int port, int proto)
{
    const unsigned char hello[8] = {0, 'S', 'P', 0, (unsigned char)(proto >> 8),
                                    (unsigned char)proto, 0, 0};
    struct sockaddr_in a = {0};
    int fd = socket(AF_INET, SOCK_STREAM, 0), small = 4096;

    assert_true(fd >= 0);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(write(fd, hello, 8), 8);
    return fd;
}

void
gkvt_send_all(int fd, const void *p, size_t n)
{
    const unsigned char *b = p;

    while (n > 0) {
        ssize_t k = send(fd, b, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            fail_msg("send: %s", strerror(errno));
        b += k;
        n -= (size_t)k;
    }
}

void
gkvt_sp_head(unsigned char *h, uint32_t id, size_t len)
{
    uint64_t n = len + 4;

    for (int i = 0; i < 8; i++)
        h[i] = (unsigned char)(n >> (56 - 8 * i));
    id |= 0x80000000u;
    for (int i = 0; i < 4; i++)
        h[8 + i] = (unsigned char)(id >> (24 - 8 * i));
}

void
gkvt_sp_send(int fd, uint32_t id, const void *msg, size_t len)
{
    unsigned char h[12];

    gkvt_sp_head(h, id, len);
    gkvt_send_all(fd, h, sizeof h);
    gkvt_send_all(fd, msg, len);
}
