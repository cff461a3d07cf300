/* client_session.c - the sessions family: HELLO, HANDSHAKE, HEARTBEAT and
 * LEAVE. Connecting (every server hand-shaken, the partition book read
 * from what graph servers send), the handshake the core runs before a
 * part when a session is not good (net__conn_open), the heartbeat thread
 * and close.
 *
 * The heartbeat thread, with sockets of its own, tells every server the
 * client is alive every heartbeat_ms, so an idle client keeps its lease.
 * It runs without c->mu: it reads conn.session under c->hb_mu and uses
 * only the hb_* fields of each conn, and calls compete with it only
 * through c->hb_mu (session, stale).
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <nanomsg/nn.h>
#include <nanomsg/reqrep.h>
#include <sodium.h>
#include "base/base.h"
#include "net/gkv_net.h"
#include "net/wire.h"
#include "net/client_int.h"

#define HB_SLICE_MS  50          /* the heartbeat checks for a stop this
                                  * often while it waits for replies */
#define LEAVE_AGAIN_MS 1000      /* gkv_client_close waits this long at
                                  * most for a LEAVE sent over a socket
                                  * opened anew after a failed call, when
                                  * no other server is left (such a server
                                  * may be gone) */

/* LEAVE: a server that no longer knows the session has nothing to
 * leave (PART_GONE_OK). */
static const struct part_ops leave_ops = {
    .type = NET_LEAVE, .flags = PART_GONE_OK,
};

static void *heartbeat(void *arg);

/* ---- the handshake ------------------------------------------------------ */

static void enc_empty(net_wr *w, const void *a) { (void)w; (void)a; }
static void enc_hs(net_wr *w, const void *a) { net__enc_hs_req(w, a); }

/* Checks handshake reply *hp against what the client expects of cn: its
 * place in the ip_config and, from a graph server, the partition config
 * every server must share (kept on first sight). */
static gkv_err
hs_check(gkv_client *c, struct conn *cn, const net_hs_rep *hp)
{
    uint64_t sum;

    if (!c->single &&
        (hp->id.server_id != cn->server || hp->id.num_servers != c->nserv))
        return net__cfail(cn, GKV_EINVAL, "it says it is server %u of %u, "
                          "this client expected server %u of %u (ip_config "
                          "or --num-servers differ?)", hp->id.server_id,
                          hp->id.num_servers, cn->server, c->nserv);
    if (!(hp->id.flags & NET_ID_GRAPH))
        return GKV_OK;
    sum = net__sum(hp->book.json, (size_t)hp->book.len);
    if (c->book_json == NULL) {
        if ((c->book_json = gkv__malloc((size_t)hp->book.len)) == NULL)
            return net__cfail(cn, GKV_ENOMEM, "out of memory for the "
                              "partition config");
        memcpy(c->book_json, hp->book.json, (size_t)hp->book.len);
        c->book_len = hp->book.len;
        c->book_sum = sum;
    } else if (c->book_len != hp->book.len || c->book_sum != sum) {
        return net__cfail(cn, GKV_EINVAL, "it serves another partition "
                          "config than the first server this client joined "
                          "(%llu bytes against %llu%s): one of the two "
                          "serves another graph (a server left from "
                          "another job?)", (unsigned long long)hp->book.len,
                          (unsigned long long)c->book_len,
                          hp->book.len == c->book_len ? ", the same size "
                          "with other bytes" : "");
    }
    if (!c->single && hp->book.part_id != cn->machine)
        return net__cfail(cn, GKV_EINVAL, "it serves partition %u, but "
                          "machine %u of the ip_config must serve "
                          "partition %u", hp->book.part_id, cn->machine,
                          cn->machine);
    cn->part_id = hp->book.part_id;
    cn->book_len = hp->book.len;
    cn->book_sum = sum;
    return GKV_OK;
}

gkv_err
net__conn_open(gkv_client *c, struct conn *cn, uint64_t deadline)
{
    net_hello_rep hr;
    net_hs_req hs;
    net_hs_rep hp;
    net_rd rd;
    void *rep = NULL;
    gkv_err rc;
    int d;

    if (cn->sock[0] < 0 && (cn->sock[0] = net__req_socket(c, cn)) < 0)
        return net__cfail(cn, net__from_nn(nn_errno()), "cannot connect to "
                          "%s: %s", cn->url, nn_strerror(nn_errno()));
    cn->ready = 0;
    if ((rc = net__roundtrip(c, cn, NET_HELLO, 0, enc_empty, NULL, deadline,
                             &rep, &rd)) != GKV_OK)
        goto fail;
    if (net__dec_hello_rep(&rd, &hr) != 0) {
        rc = net__cfail(cn, GKV_EPROTO, "malformed hello reply: %s", rd.why);
        goto fail;
    }
    nn_freemsg(rep);
    rep = NULL;
    if (hr.id.proto != NET_VERSION) {
        rc = net__cfail(cn, GKV_EVERSION, "it speaks protocol %u, this "
                        "client %u", hr.id.proto, NET_VERSION);
        goto fail;
    }
    if ((hr.id.flags & NET_ID_AUTH) && !c->auth) {
        rc = net__cfail(cn, GKV_EPERM, "it requires a token and this client "
                        "has none");
        goto fail;
    }
    memset(&hs, 0, sizeof hs);
    memcpy(hs.nonce, hr.nonce, NET_NONCE_LEN);
    snprintf(hs.group, sizeof hs.group, "%s", c->group);
    hs.rank = c->rank;
    if (c->auth) {
        hs.flags = NET_HS_PROOF;
        net__proof(c->key, hs.nonce, hs.group, hs.rank, hs.mac);
    }
    if (c->flags & GKV_CLIENT_OBSERVER)
        hs.flags |= NET_HS_OBSERVER;
    /* after a failed barrier, the barrier server may have released the
     * request this client abandoned (its group went on): RESUME keeps
     * that release on the server, so that the retry of the same barrier
     * is answered instead of parked as one the group has passed. Only
     * then, and only there: a server that predates the flag refuses it */
    if (c->bar_unsure && cn == &c->cn[0] && !c->hs_legacy)
        hs.flags |= NET_HS_RESUME;
    if (c->instance != 0 && !c->hs_legacy) {
        hs.flags |= NET_HS_INSTANCE;
        hs.instance = c->instance;
    }
    if ((rc = net__roundtrip(c, cn, NET_HANDSHAKE, 0, enc_hs, &hs, deadline,
                             &rep, &rd)) != GKV_OK) {
        if (rc == GKV_EPROTO && (hs.flags & (NET_HS_RESUME | NET_HS_INSTANCE))) {
            /* a server older than the flags refuses them ("unknown
             * flags"): join as before them, as a new session whose
             * barriers the group may have passed and that an earlier run
             * of the job may share (what such a server always did) */
            c->bar_unsure = 0;
            c->hs_legacy = 1;
            net__conn_break(cn);
            return net__conn_open(c, cn, deadline);
        }
        goto fail;
    }
    if ((d = net__dec_hs_rep(&rd, &hp)) != 0) {
        /* our own shortage is no malformed reply */
        rc = d == NET_DEC_NOMEM ?
             net__cfail(cn, GKV_ENOMEM, "handshake reply: %s", rd.why) :
             net__cfail(cn, GKV_EPROTO, "malformed handshake reply: %s",
                        rd.why);
        goto fail;
    }
    /* rep stays until the partition config (pointing into it) is taken */
    if ((rc = hs_check(c, cn, &hp)) != GKV_OK) {
        net__schema_free(&hp.schema);
        goto fail;
    }
    nn_freemsg(rep);
    rep = NULL;
    cn->id = hp.id;
    cn->have_id = 1;
    net__schema_set(c, cn, &hp.schema);
    /* together, under the lock the heartbeat marks stale with: a refusal
     * of the old session read after this must not mark the new one */
    pthread_mutex_lock(&c->hb_mu);
    cn->session = hp.session;
    atomic_store(&cn->stale, 0);
    pthread_mutex_unlock(&c->hb_mu);
    cn->ready = 1;
    return GKV_OK;
fail:
    if (rep != NULL)
        nn_freemsg(rep);
    net__conn_break(cn);
    return rc;
}

/* ---- connect and close -------------------------------------------------- */

static void
conn_init(gkv_client *c, struct conn *cn, size_t m, unsigned k)
{
    const gkv_machine *gm = gkv_ipconfig_machine(c->cfg, m);
    int v6 = strchr(gm->host, ':') != NULL;

    memset(cn, 0, sizeof *cn);
    cn->machine = (unsigned)m;
    cn->server = k;
    for (int l = 0; l < NLANES; l++)
        cn->sock[l] = -1;
    cn->hb_sock = -1;
    cn->v6 = v6;
    snprintf(cn->addr, sizeof cn->addr, v6 ? "[%s]:%u" : "%s:%u", gm->host,
             gm->port + k);
    snprintf(cn->url, sizeof cn->url, "tcp://%s", cn->addr);
    atomic_init(&cn->stale, 0);
}

/* Opens the store of machine m in-process when it is on this host. */
static void
local_open(gkv_client *c, size_t m)
{
    const struct conn *cn = &c->cn[m * c->nserv];
    struct stat sb;

    if (!(c->flags & GKV_CLIENT_LOCAL_READ) || !cn->have_id ||
        (cn->id.flags & NET_ID_WRITEBACK) ||
        strcmp(cn->id.host, c->host) != 0 || stat(cn->id.store, &sb) != 0 ||
        !S_ISDIR(sb.st_mode))
        return;
    if (gkv_store_open(&c->mc[m].local, cn->id.store, GKV_RDONLY, NULL) != GKV_OK)
        c->mc[m].local = NULL;   /* then machine m is read over the network */
}

/* After every server hand-shook: when they serve partitions, reads the
 * book from the config's bytes and checks it against the ip_config. */
static gkv_err
book_load(gkv_client *c)
{
    size_t ngraph = 0;
    gkv_err rc;

    for (size_t i = 0; i < c->ncn; i++)
        if (c->cn[i].id.flags & NET_ID_GRAPH)
            ngraph++;
    if (ngraph == 0)
        return GKV_OK;
    for (size_t i = 0; i < c->ncn; i++)
        if (!(c->cn[i].id.flags & NET_ID_GRAPH))
            return net__cfail(&c->cn[i], GKV_EINVAL, "it serves a plain "
                              "store while other servers of the job serve "
                              "partitions");
    rc = gkv_pbook_open_mem(&c->book, c->book_json, (size_t)c->book_len,
                            "the servers' partition config");
    if (rc != GKV_OK)
        return net__fail(rc, "the partition config the servers sent: %s",
                         gkv_pbook_errmsg(NULL));
    if (!c->single && (size_t)gkv_pbook_num_parts(c->book) != c->nmach)
        return net__fail(GKV_EINVAL, "the graph has %d partitions but the "
                         "ip_config lists %zu machines (machine m serves "
                         "partition m)", gkv_pbook_num_parts(c->book),
                         c->nmach);
    return GKV_OK;
}

/* c->nserv from the identity server 0 of machine 0 gives. */
static gkv_err
probe_nserv(gkv_client *c, uint64_t deadline)
{
    struct conn probe;
    void *rep = NULL;
    net_rd rd;
    net_hello_rep hr;
    gkv_err rc;

    c->nserv = 1;
    conn_init(c, &probe, 0, 0);
    if ((probe.sock[0] = net__req_socket(c, &probe)) < 0)
        return net__cfail(&probe, net__from_nn(nn_errno()), "cannot "
                          "connect: %s", nn_strerror(nn_errno()));
    rc = net__roundtrip(c, &probe, NET_HELLO, 0, enc_empty, NULL, deadline,
                        &rep, &rd);
    if (rc == GKV_OK && net__dec_hello_rep(&rd, &hr) != 0)
        rc = net__cfail(&probe, GKV_EPROTO, "malformed hello reply: %s",
                        rd.why);
    if (rep != NULL)
        nn_freemsg(rep);
    nn_close(probe.sock[0]);
    if (rc == GKV_OK)
        c->nserv = hr.id.num_servers;
    return rc;
}

/* Whether the servers of machine m (hand-shaken) share one store. */
static gkv_err
mach_check(gkv_client *c, size_t m)
{
    const struct conn *s0 = &c->cn[m * c->nserv];

    for (unsigned k = 1; k < c->nserv; k++) {
        const struct conn *sk = &c->cn[m * c->nserv + k];

        if (strcmp(sk->id.store, s0->id.store) != 0 ||
            strcmp(sk->id.host, s0->id.host) != 0)
            return net__fail(GKV_EINVAL, "machine %zu: server %u serves "
                             "%s:%s but server 0 serves %s:%s; the servers "
                             "of a machine must share one store", m, k,
                             sk->id.host, sk->id.store, s0->id.host,
                             s0->id.store);
    }
    return GKV_OK;
}

/* Starts the heartbeat, every 'ms' (0: a third of the shortest lease). */
static gkv_err
hb_start(gkv_client *c, unsigned ms)
{
    unsigned lease = c->cn[0].id.lease_ms;

    /* every server must hear from us within its own lease */
    for (size_t i = 1; i < c->ncn; i++)
        if (c->cn[i].id.lease_ms < lease)
            lease = c->cn[i].id.lease_ms;
    c->hb_ms = ms ? ms : lease / 3;
    if (c->hb_ms == 0)
        c->hb_ms = 1;
    if (pthread_create(&c->hb_thr, NULL, heartbeat, c) != 0)
        return net__fail(GKV_EIO, "cannot start the heartbeat thread");
    c->hb_running = 1;
    return GKV_OK;
}

/* The length of the secret in 'token': as a token file is read
 * (gkv_token_load, the server's), trailing blanks and newlines are not
 * part of it. */
static size_t
token_len(const char *token)
{
    size_t tl = strlen(token);

    while (tl > 1 && strchr(" \t\r\n", token[tl - 1]) != NULL)
        tl--;
    return tl;
}

/* A client object from the options (not connected): *out is the
 * caller's (net__client_free). */
static gkv_err
client_new(gkv_client **out, const gkv_client_opts *o, const char *group,
           uint32_t rank, const char *token, const unsigned char *key)
{
    const char *in = o->instance != NULL ? o->instance
                                         : getenv("GKV_JOB_INSTANCE");
    gkv_client *c;

    if (sodium_init() < 0)
        return net__fail(GKV_EIO, "libsodium failed to initialise");
    if ((c = gkv__calloc(1, sizeof *c)) == NULL)
        return net__fail(GKV_ENOMEM, "out of memory");
    pthread_mutex_init(&c->mu, NULL);
    pthread_mutex_init(&c->hb_mu, NULL);
    gkv__cond_init_mono(&c->hb_cv);   /* heartbeat waits: monotonic */
    snprintf(c->group, sizeof c->group, "%s", group);
    c->rank = rank;
    c->timeout_ms = o->timeout_ms ? o->timeout_ms : 10000;
    c->call_ms = c->timeout_ms;
    c->group_size = o->group_size;
    c->flags = o->flags;
    c->max_msg = o->max_msg ? o->max_msg : GKV_NET_MAX_MSG;
    if (in != NULL && *in != '\0' && !(o->flags & GKV_CLIENT_OBSERVER)) {
        c->instance = net__sum(in, strlen(in));
        if (c->instance == 0)
            c->instance = 1;
    }
    c->x_first = SIZE_MAX;
    if (gethostname(c->host, sizeof c->host - 1) != 0)
        c->host[0] = '\0';
    if (token != NULL) {
        c->auth = 1;
        net__token_key(token, token_len(token), c->key);
    } else if (key != NULL) {
        c->auth = 1;
        memcpy(c->key, key, NET_KEY_LEN);
    }
    atomic_init(&c->nclone, 0);
    *out = c;
    return GKV_OK;
}

/* gkv_client_connect (ip_config) and gkv_client_connect_addr (addr);
 * a clone gives the token's key instead of the token. */
static gkv_err
client_connect(gkv_client **out, const char *ip_config, const char *addr,
               const char *token, const unsigned char *key, const char *group,
               uint32_t rank, const gkv_client_opts *opts)
{
    char *rp;
    gkv_client *c = NULL;
    gkv_client_opts o = {0};
    uint64_t deadline;
    gkv_err rc;

    net__clear();
    if (out == NULL)
        return net__fail(GKV_EINVAL, "gkv_client_connect: no out pointer");
    *out = NULL;
    if (opts != NULL)
        o = *opts;
    if (!net__group_ok(group))
        return net__fail(GKV_EINVAL, "group name '%s' must be 1..%u printable "
                         "characters without spaces", group ? group : "(null)",
                         NET_GROUP_MAX);
    if (token != NULL && (token[0] == '\0' || strlen(token) > GKV_TOKEN_MAX))
        return net__fail(GKV_EINVAL, "token: empty or longer than %d bytes",
                         GKV_TOKEN_MAX);
    if (token != NULL && token_len(token) < GKV_TOKEN_MIN)
        return net__fail(GKV_EINVAL, "token: %zu bytes; a token must be at "
                         "least %d (gkv-launch makes one of 44)",
                         token_len(token), GKV_TOKEN_MIN);
    if (o.timeout_ms < 0)
        return net__fail(GKV_EINVAL, "timeout %d ms", o.timeout_ms);
    if (o.max_msg != 0 && (o.max_msg < 4096 ||
                           o.max_msg > (uint64_t)INT_MAX - NET_HDR_LEN - PART_SLACK))
        return net__fail(GKV_EINVAL, "max message size %llu: must be in "
                         "4096..%d", (unsigned long long)o.max_msg,
                         (int)(INT_MAX - NET_HDR_LEN - PART_SLACK));
    if ((rc = client_new(&c, &o, group, rank, token, key)) != GKV_OK)
        return rc;
    /* what a clone connects with: the ip_config's real path (the
     * working directory may change) */
    rp = addr == NULL ? realpath(ip_config, NULL) : NULL;
    c->src = gkv__strdup(addr != NULL ? addr : rp != NULL ? rp : ip_config);
    free(rp);
    c->hb_opt = o.heartbeat_ms;
    if (c->src == NULL) {
        rc = net__fail(GKV_ENOMEM, "out of memory");
        goto fail;
    }
    deadline = net__deadline((uint64_t)c->timeout_ms);
    c->single = addr != NULL;
    if ((rc = c->single ? net__ipconfig_addr(&c->cfg, addr) :
                          gkv_ipconfig_load(&c->cfg, ip_config)) != GKV_OK)
        goto fail;
    c->nmach = gkv_ipconfig_count(c->cfg);
    c->nserv = c->single ? 1 : o.num_servers;
    if ((c->mc = gkv__calloc(c->nmach, sizeof *c->mc)) == NULL) {
        rc = net__fail(GKV_ENOMEM, "out of memory");
        goto fail;
    }
    /* with no number given, learn it from server 0 of machine 0 */
    if (c->nserv == 0 && (rc = probe_nserv(c, deadline)) != GKV_OK)
        goto fail;
    if ((rc = gkv_ipconfig_check(c->cfg, c->nserv)) != GKV_OK)
        goto fail;
    c->ncn = c->nmach * c->nserv;
    if ((c->cn = gkv__calloc(c->ncn, sizeof *c->cn)) == NULL) {
        rc = net__fail(GKV_ENOMEM, "out of memory");
        goto fail;
    }
    for (size_t m = 0; m < c->nmach; m++)
        for (unsigned k = 0; k < c->nserv; k++)
            conn_init(c, &c->cn[m * c->nserv + k], m, k);
    for (size_t i = 0; i < c->ncn; i++)
        if ((rc = net__conn_open(c, &c->cn[i], deadline)) != GKV_OK)
            goto fail;
    for (size_t m = 0; m < c->nmach; m++) {
        if ((rc = mach_check(c, m)) != GKV_OK)
            goto fail;
        local_open(c, m);
    }
    if ((rc = book_load(c)) != GKV_OK)
        goto fail;
    if (!(c->flags & GKV_CLIENT_NO_HEARTBEAT) &&
        (rc = hb_start(c, o.heartbeat_ms)) != GKV_OK)
        goto fail;
    *out = c;
    return GKV_OK;
fail:
    net__client_free(c);
    if (rc == GKV_EPERM && token != NULL && strchr(token, '/') != NULL &&
        access(token, F_OK) == 0) {
        /* the commonest slip: GKV_TOKEN_FILE's path passed as the token */
        char was[512];
        snprintf(was, sizeof was, "%s", gkv_net_errmsg());
        rc = net__fail(rc, "%s; the token given is the name of a file: pass "
                       "its contents (gkv_token_load)", was);
    }
    return rc;
}

gkv_err
gkv_client_connect(gkv_client **out, const char *ip_config, const char *token,
                   const char *group, uint32_t rank, const gkv_client_opts *opts)
{
    if (ip_config == NULL) {
        net__clear();
        if (out != NULL)
            *out = NULL;
        return net__fail(GKV_EINVAL, "gkv_client_connect: no ip_config");
    }
    return client_connect(out, ip_config, NULL, token, NULL, group, rank,
                          opts);
}

gkv_err
gkv_client_connect_addr(gkv_client **out, const char *addr, const char *token,
                        const char *group, uint32_t rank,
                        const gkv_client_opts *opts)
{
    if (addr == NULL) {
        net__clear();
        if (out != NULL)
            *out = NULL;
        return net__fail(GKV_EINVAL, "gkv_client_connect_addr: no address");
    }
    return client_connect(out, NULL, addr, token, NULL, group, rank, opts);
}

uint32_t
gkv_client_observer_rank(void)
{
    uint32_t r;

    randombytes_buf(&r, sizeof r);      /* getrandom: safe after fork() */
    return r | 0x80000000u;
}

/* A clone takes a rank of its own: a session is one per (group, rank),
 * and a server refuses an observer the rank of a member (server_sess.c),
 * so the clone must not share its original's rank to coexist with it. */
gkv_err
gkv_client_clone(gkv_client *c, gkv_client **out)
{
    gkv_client_opts o = {0};

    net__clear();
    if (out != NULL)
        *out = NULL;
    if (c == NULL || out == NULL)
        return net__fail(GKV_EINVAL, "gkv_client_clone: no client or no out "
                         "pointer");
    pthread_mutex_lock(&c->mu);
    o.timeout_ms = c->timeout_ms;
    pthread_mutex_unlock(&c->mu);
    o.num_servers = c->nserv;
    o.group_size = c->group_size;
    o.flags = c->flags | GKV_CLIENT_OBSERVER;
    o.heartbeat_ms = c->hb_opt;
    o.max_msg = c->max_msg;
    return client_connect(out, c->single ? NULL : c->src,
                          c->single ? c->src : NULL, NULL,
                          c->auth ? c->key : NULL, c->group,
                          gkv_client_observer_rank(), &o);
}

gkv_err
gkv_client_close(gkv_client *c)
{
    struct part *parts;
    size_t np = 0;
    gkv_err rc = GKV_OK;

    net__clear();
    if (c == NULL)
        return GKV_OK;
    pthread_mutex_lock(&c->mu);
    net__hb_stop(c);
    /* leave wherever we hold a session. Not where the heartbeat found our
     * session refused (stale: the server restarted, or dropped us): it no
     * longer knows us, and a handshake just to leave would be taken by a
     * server that does not keep alive for its last member leaving (it
     * stops, under the other clients of the job). A server whose call
     * failed (its sockets closed, so that nanomsg cannot re-send) still
     * holds the session the heartbeat kept: it gets the LEAVE over a
     * fresh socket, with that session and no handshake (without it, a
     * server that does not keep alive would wait out our lease). Such a
     * server may be the one that is gone, so it alone gets a short
     * wait. */
    if ((parts = gkv__calloc(c->ncn, sizeof *parts)) == NULL) {
        rc = net__fail(GKV_ENOMEM, "out of memory");
    } else {
        size_t nready = 0;

        for (size_t i = 0; i < c->ncn; i++) {
            struct conn *cn = &c->cn[i];

            if (cn->session == 0 || atomic_load(&cn->stale))
                continue;
            if (!cn->ready) {
                if (cn->sock[0] < 0 &&
                    (cn->sock[0] = net__req_socket(c, cn)) < 0)
                    continue;
                cn->ready = 1;           /* conn_kick: no handshake */
            } else {
                nready++;
            }
            parts[np].cn = cn;
            parts[np].ops = &leave_ops;
            parts[np].retried = 1;       /* no hand-shake just to leave */
            np++;
        }
        c->call_ms = nready > 0 || c->timeout_ms < LEAVE_AGAIN_MS ?
                     c->timeout_ms : LEAVE_AGAIN_MS;
        rc = net__exchange(c, parts, np, net__deadline((uint64_t)c->call_ms));
        c->call_ms = c->timeout_ms;
        gkv__free(parts);
    }
    pthread_mutex_unlock(&c->mu);
    if (rc != GKV_OK) {
        char msg[1280];
        snprintf(msg, sizeof msg, "%s", gkv_net_errmsg());
        net__client_free(c);
        return net__fail(rc, "leave: %s", msg);
    }
    net__client_free(c);
    return GKV_OK;
}

/* ---- heartbeat ---------------------------------------------------------- */

void
net__hb_stop(gkv_client *c)
{
    if (!c->hb_running)
        return;
    pthread_mutex_lock(&c->hb_mu);
    c->hb_stop = 1;
    pthread_cond_signal(&c->hb_cv);
    pthread_mutex_unlock(&c->hb_mu);
    pthread_join(c->hb_thr, NULL);
    c->hb_running = 0;
}

/* Whether to stop, after waiting hb_ms for close to say so. */
static int
hb_pause(gkv_client *c)
{
    struct timespec ts;
    int stop;

    gkv__mono_deadline(&ts, c->hb_ms);
    pthread_mutex_lock(&c->hb_mu);
    while (!c->hb_stop &&
           pthread_cond_timedwait(&c->hb_cv, &c->hb_mu, &ts) != ETIMEDOUT)
        ;
    stop = c->hb_stop;
    pthread_mutex_unlock(&c->hb_mu);
    return stop;
}

static int
hb_stopping(gkv_client *c)
{
    int stop;

    pthread_mutex_lock(&c->hb_mu);
    stop = c->hb_stop;
    pthread_mutex_unlock(&c->hb_mu);
    return stop;
}

/* A HEARTBEAT to cn when we hold a session there (cn->hb_wait: sent). */
static void
hb_send(gkv_client *c, struct conn *cn)
{
    uint64_t sess;
    size_t len;
    void *m;

    pthread_mutex_lock(&c->hb_mu);
    sess = cn->session;
    pthread_mutex_unlock(&c->hb_mu);
    cn->hb_wait = 0;
    if (sess == 0)
        return;
    if (cn->hb_sock < 0 && (cn->hb_sock = net__req_socket(c, cn)) < 0)
        return;
    m = net__msg_make(c, NET_HEARTBEAT, ++cn->hb_req, sess, enc_empty, NULL,
                      &len);
    if (m == NULL)
        return;
    net__sockopt(cn->hb_sock, NN_SOL_SOCKET, NN_SNDTIMEO, (int)c->hb_ms);
    if (nn_send(cn->hb_sock, &m, NN_MSG, 0) < 0) {
        nn_freemsg(m);
        return;
    }
    cn->hb_sess = sess;
    cn->hb_wait = 1;
}

/* Reads cn's heartbeat reply, when there is one; a refused session marks
 * cn stale. */
static void
hb_read(gkv_client *c, struct conn *cn)
{
    void *rep = NULL;
    net_hdr h;
    char why[160];
    int got = nn_recv(cn->hb_sock, &rep, NN_MSG, NN_DONTWAIT);

    if (got < 0)
        return;
    cn->hb_wait = 0;
    /* only when the session refused is still the one the calls use: a
     * heartbeat that went out just before a call hand-shook again carries
     * the session that handshake replaced, whose refusal says nothing of
     * the new one (marking it would hand-shake again for nothing, and
     * make gkv_client_close skip its LEAVE) */
    if (net__hdr_check(rep, (size_t)got, &h, why, sizeof why) == GKV_OK &&
        h.status == GKV_EPERM && (h.flags & NET_F_SESSION)) {
        pthread_mutex_lock(&c->hb_mu);
        if (cn->session == cn->hb_sess)
            atomic_store(&cn->stale, 1);
        pthread_mutex_unlock(&c->hb_mu);
    }
    nn_freemsg(rep);
}

/* Waits up to hb_ms for the replies to a round of heartbeats (pf, pc:
 * room for every server). */
static void
hb_collect(gkv_client *c, struct nn_pollfd *pf, struct conn **pc)
{
    uint64_t deadline = net__deadline(c->hb_ms);

    for (;;) {
        int left = net__left_ms(deadline), np = 0, r;

        for (size_t i = 0; i < c->ncn; i++)
            if (c->cn[i].hb_wait) {
                pf[np].fd = c->cn[i].hb_sock;
                pf[np].events = NN_POLLIN;
                pf[np].revents = 0;
                pc[np++] = &c->cn[i];
            }
        if (np == 0 || left <= 0)
            return;
        /* in slices, so that gkv_client_close is not held for up to hb_ms
         * by a server that does not answer */
        if (hb_stopping(c))
            return;
        r = nn_poll(pf, np, left < HB_SLICE_MS ? left : HB_SLICE_MS);
        if (r < 0 && nn_errno() != EINTR)
            return;
        for (int k = 0; k < np; k++)
            if (pf[k].revents & NN_POLLIN)
                hb_read(c, pc[k]);
    }
}

/* Every hb_ms: a HEARTBEAT to every server we hold a session with, on the
 * thread's own sockets. A refused session marks the connection stale, so
 * the next call hand-shakes first. A silent server gets its heartbeat
 * socket closed (and a fresh one next round). */
static void *
heartbeat(void *arg)
{
    gkv_client *c = arg;
    struct nn_pollfd *pf = gkv__calloc(c->ncn, sizeof *pf);
    struct conn **pc = gkv__calloc(c->ncn, sizeof *pc);

    if (pf == NULL || pc == NULL) {
        gkv__free(pf);
        gkv__free(pc);
        return NULL;
    }
    while (!hb_pause(c)) {
        for (size_t i = 0; i < c->ncn; i++)
            hb_send(c, &c->cn[i]);
        hb_collect(c, pf, pc);
        for (size_t i = 0; i < c->ncn; i++)
            if (c->cn[i].hb_wait) {
                nn_close(c->cn[i].hb_sock);
                c->cn[i].hb_sock = -1;
                c->cn[i].hb_wait = 0;
            }
    }
    gkv__free(pf);
    gkv__free(pc);
    return NULL;
}
