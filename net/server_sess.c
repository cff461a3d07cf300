/* server_sess.c - sessions: HELLO, HANDSHAKE, SCHEMA, LEAVE and
 * HEARTBEAT; the session and group tables, the nonces and the spent set,
 * the members seen (--num-clients), leases, and the done set that keeps
 * a SRV_ONCE request from running twice.
 *
 * Locks: the tables are under s->mu (server_int.h); every srv__ function
 * here but srv__sess_touch, srv__sess_expire and srv__once_* expects the
 * caller to hold it. The handlers run with no lock held (the core's rule)
 * and take s->mu around the tables only; none blocks under it but
 * srv__once_begin, which waits on sess.done_cv (releasing it).
 */
#include <assert.h>
#include <stdio.h>
#include <string.h>
#include <nanomsg/nn.h>
#include <sodium.h>
#include <xxhash.h>
#include "net/server_int.h"

#define SPENT_MAX      (1u << 18) /* spent nonces kept (live ones, at most) */
#define SESS_MAX       65536     /* sessions at once */

/* " from ADDR" for the log lines of a session, or "" without a gate */
#define FROM_FMT       "%s%s"
#define FROM(a)        (a)[0] ? " from " : "", (a)

static void enc_hello(net_wr *w, const void *a) { net__enc_hello_rep(w, a); }

/* ---- the tables (caller holds s->mu) ------------------------------------ */

struct sess *
srv__sess_find(gkv_server *s, uint64_t id)
{
    for (size_t i = 0; i < s->sess.n; i++)
        if (s->sess.tab[i].id == id)
            return &s->sess.tab[i];
    return NULL;
}

struct group *
srv__group_find(gkv_server *s, const char *name, int create)
{
    struct group *g;

    for (size_t i = 0; i < s->sess.ngrp; i++)
        if (strcmp(s->sess.grp[i].name, name) == 0)
            return &s->sess.grp[i];
    if (!create)
        return NULL;
    if (s->sess.ngrp == s->sess.capgrp) {
        size_t nc = s->sess.capgrp ? s->sess.capgrp * 2 : 8;
        struct group *ng = gkv__realloc(s->sess.grp, nc * sizeof *ng);
        if (ng == NULL)
            return NULL;
        s->sess.grp = ng;
        s->sess.capgrp = nc;
    }
    g = &s->sess.grp[s->sess.ngrp++];
    memset(g, 0, sizeof *g);
    snprintf(g->name, sizeof g->name, "%s", name);
    return g;
}

/* Drops the parked barrier request of 'session' in g, if any. */
void
srv__unpark(struct group *g, uint64_t session)
{
    for (size_t i = 0; i < g->nwait; i++)
        if (g->wait[i].session == session) {
            nn_freemsg(g->wait[i].ctl);
            g->wait[i] = g->wait[--g->nwait];
            return;
        }
}

/* Removes session i: its group loses a member (an emptied group is
 * forgotten), and a parked barrier request of it is dropped. Then, when no
 * client is left and the server does not keep alive, it stops. */
void
srv__sess_remove(gkv_server *s, size_t i, const char *how, int may_stop)
{
    struct sess old = s->sess.tab[i];
    struct group *g = srv__group_find(s, old.group, 0);
    unsigned left = 0;
    uint64_t dropped = 0;
    int kind;

    s->sess.tab[i] = s->sess.tab[--s->sess.n];
    gkv__free(old.done);
    if (s->gate != NULL)
        s->gate->session(s->gate->ctx, old.id, old.addr, 0);
    if (g != NULL) {
        srv__unpark(g, old.id);
        if (g->members > 0)
            g->members--;
        left = g->members;
        if (left == 0) {
            for (size_t k = 0; k < g->nwait; k++)
                nn_freemsg(g->wait[k].ctl);
            gkv__free(g->wait);
            *g = s->sess.grp[--s->sess.ngrp];
        }
    }
    /* observers (kvctl, monitors polling stat) come and go all day, and
     * a peer may join and leave in a loop: the lines are rationed */
    kind = old.observer ? LOG_OBSERVER : LOG_JOIN;
    if (srv__log_take(s, kind, &dropped)) {
        srv__log_say_dropped(s, kind, dropped);
        srv__log(s, "%s: group '%s' rank %u%s" FROM_FMT " (%u left in the "
                 "group, %zu clients in all)", how, old.group, old.rank,
                 old.observer ? " (observer)" : "", FROM(old.addr), left,
                 s->sess.n);
    }
    /* an observer (kvctl) leaving never stops the server; the last member
     * leaving does, observers or not, once num_clients members joined */
    if (may_stop && !old.observer && !(s->conf.flags & GKV_SERVER_KEEP_ALIVE)) {
        size_t members = 0;
        for (size_t k = 0; k < s->sess.n; k++)
            members += !s->sess.tab[k].observer;
        if (members == 0 && s->sess.nseen < s->conf.num_clients) {
            if (srv__log_take(s, LOG_JOIN, &dropped)) {
                srv__log_say_dropped(s, LOG_JOIN, dropped);
                srv__log(s, "the last client left (group '%s' rank %u); %zu "
                         "of the %u clients (--num-clients) have joined: "
                         "waiting for the others", old.group, old.rank,
                         s->sess.nseen, s->conf.num_clients);
            }
        } else if (members == 0)
            srv__stop_request(s, "the last client left (group '%s' rank %u)",
                              old.group, old.rank);
    }
}

/* ---- key sets: spent nonces, members seen ------------------------------- */

/* Adds keys of 'ks' (with s->mu): 0 when k is new, 1 when it is there,
 * -1 when 'max' live keys fill the set (or out of memory). Expired keys go
 * when the set is rebuilt; until then one still holds its slot, which
 * only matters for itself. */
static int
kset_add(struct kset *ks, uint64_t k, uint64_t exp, size_t max)
{
    uint64_t now = gkv__now_ms();
    size_t j;

    if (2 * (ks->n + 1) > ks->cap) {
        size_t live = 0, cap = 64;
        struct kent *t;

        for (size_t i = 0; i < ks->cap; i++)
            live += ks->e[i].exp > now;
        if (live >= max)
            return -1;
        while (cap < 4 * (live + 1))
            cap *= 2;
        if ((t = gkv__calloc(cap, sizeof *t)) == NULL)
            return -1;
        for (size_t i = 0; i < ks->cap; i++) {
            if (ks->e[i].exp <= now)
                continue;
            for (j = ks->e[i].k & (cap - 1); t[j].exp != 0;
                 j = (j + 1) & (cap - 1))
                ;
            t[j] = ks->e[i];
        }
        gkv__free(ks->e);
        ks->e = t;
        ks->cap = cap;
        ks->n = live;
    }
    for (j = k & (ks->cap - 1); ks->e[j].exp != 0; j = (j + 1) & (ks->cap - 1))
        if (ks->e[j].k == k)
            return 1;
    ks->e[j].k = k;
    ks->e[j].exp = exp;
    ks->n++;
    return 0;
}

/* Counts member (group, rank) as seen (with s->mu), until num_clients
 * distinct members have been: then the set is dropped. A 64-bit hash
 * stands for the member; a collision (about n^2 / 2^65) would only make
 * the server wait for SIGTERM, never stop early. */
static void
seen_add(gkv_server *s, const char *group, uint32_t rank)
{
    unsigned char b[NET_GROUP_MAX + 1 + 4];
    size_t gl = strlen(group);

    if (s->sess.nseen >= s->conf.num_clients)
        return;
    memcpy(b, group, gl);
    b[gl] = 0;
    memcpy(b + gl + 1, &rank, 4);
    /* out of memory: counted at a later join, or never (no early stop) */
    if (kset_add(&s->sess.seen, XXH3_64bits(b, gl + 5), UINT64_MAX,
                 SIZE_MAX) != 0)
        return;
    if (++s->sess.nseen == s->conf.num_clients) {
        srv__log(s, "all %u clients (--num-clients) have joined",
                 s->conf.num_clients);
        gkv__free(s->sess.seen.e);
        memset(&s->sess.seen, 0, sizeof s->sess.seen);
    }
}

/* ---- the schema --------------------------------------------------------- */

struct schema_arg {
    const gkv_tensor_desc *d;
    size_t n;
    uint64_t session;               /* HANDSHAKE: written before the rest */
    const net_ident *id;            /* HANDSHAKE */
    const net_book *book;           /* HANDSHAKE of a graph server */
};

static void
enc_schema(net_wr *w, const void *a)
{
    const struct schema_arg *sa = a;
    net_tensor t;

    if (sa->id != NULL) {
        net__wr_u64(w, sa->session);
        net__enc_ident(w, sa->id);
    }
    net__wr_u32(w, (uint32_t)sa->n);
    for (size_t i = 0; i < sa->n; i++) {
        srv__tensor_from_desc(&t, &sa->d[i]);
        net__enc_tensor(w, &t);
    }
    if (sa->book != NULL)
        net__enc_book(w, sa->book);
}

/* Replies with the schema (and, for a handshake, session and identity). */
static gkv_err
reply_schema(gkv_server *s, srv_req *r, uint64_t session, int with_id)
{
    struct schema_arg sa = {0};
    net_book book;
    gkv_tensor_desc *d = NULL;
    size_t n = 0;
    gkv_err rc;

    if ((rc = gkv_tensor_list(s->store, NULL, 0, &d, &n)) != GKV_OK)
        return srv__fail(r, rc, "listing tensors: %s",
                         gkv_store_errmsg(s->store));
    sa.d = d;
    sa.n = n;
    sa.session = session;
    sa.id = with_id ? &s->conf.id : NULL;
    if (with_id && s->graph.part != NULL) {
        book.part_id = (uint32_t)gkv_part_id(s->graph.part);
        book.len = s->graph.json_len;
        book.json = s->graph.json;
        sa.book = &book;
    }
    rc = srv__reply_build(r, enc_schema, &sa);
    gkv_free(d);
    return rc;
}

/* ---- HELLO and HANDSHAKE ------------------------------------------------ */

/* A HELLO's nonce carries its own proof, so the server keeps nothing per
 * HELLO and a flood of HELLOs cannot push other clients' nonces out: bytes
 * 0-7 are the issue time (monotonic ms, little-endian), 8-15 random, 16-31
 * the first 16 bytes of HMAC-SHA512-256 over bytes 0-15, keyed with
 * auth.nkey. A handshake's nonce must carry a good tag and be younger than
 * the TTL; with a token it must also be unspent (the spent set holds the
 * nonces of accepted handshakes until they expire), so a handshake seen on
 * the wire cannot be replayed. Without a token anyone may hand-shake as
 * anyone, so a replay gains nothing and nothing is kept. */
static void
nonce_tag(const gkv_server *s, const unsigned char *n, unsigned char *tag)
{
    unsigned char mac[crypto_auth_hmacsha512256_BYTES];

    crypto_auth_hmacsha512256(mac, n, 16, s->auth.nkey);
    memcpy(tag, mac, 16);
    sodium_memzero(mac, sizeof mac);
}

static void
nonce_make(const gkv_server *s, unsigned char *n)
{
    uint64_t t = gkv__now_ms();

    for (int i = 0; i < 8; i++)
        n[i] = (unsigned char)(t >> (8 * i));
    randombytes_buf(n + 8, 8);
    nonce_tag(s, n, n + 16);
}

/* 1 when n is a nonce of this server younger than the TTL; *rnd, *exp_ms:
 * its random part and when it expires. */
static int
nonce_good(const gkv_server *s, const unsigned char *n, uint64_t *rnd,
           uint64_t *exp_ms)
{
    unsigned char tag[16];
    uint64_t t = 0, now = gkv__now_ms();
    int ok;

    nonce_tag(s, n, tag);
    ok = sodium_memcmp(tag, n + 16, 16) == 0;
    for (int i = 0; i < 8; i++)
        t |= (uint64_t)n[i] << (8 * i);
    memcpy(rnd, n + 8, 8);
    *exp_ms = t + s->auth.nonce_ttl_ms;
    return ok && t <= now && now < *exp_ms;
}

/* The identity a HELLO tells, to anyone: what a client needs to
 * hand-shake (the protocol, whether a token is required, the servers per
 * machine, the limits, the version), never where the server runs or what
 * it serves (host, pid, start time, name, store path): those come in the
 * HANDSHAKE reply, to a client that proved the token (or to anyone, when
 * the server has none: then everyone is trusted, see auth_check). */
static void
hello_ident(const gkv_server *s, net_ident *id)
{
    const net_ident *all = &s->conf.id;

    memset(id, 0, sizeof *id);
    id->proto = all->proto;
    id->server_id = all->server_id;
    id->num_servers = all->num_servers;
    id->machine = all->machine;
    id->lease_ms = all->lease_ms;
    id->flags = all->flags;
    id->max_msg = all->max_msg;
    snprintf(id->version, sizeof id->version, "%s", all->version);
}

static void
op_hello(gkv_server *s, srv_req *r)
{
    net_hello_rep hr;
    net_rd rd;

    net__rd_init(&rd, r->pl, r->plen);
    if (net__dec_empty(&rd) != 0) {
        srv__fail(r, GKV_EPROTO, "hello: %s", rd.why);
        return;
    }
    memset(&hr, 0, sizeof hr);
    nonce_make(s, hr.nonce);
    hello_ident(s, &hr.id);
    srv__reply_build(r, enc_hello, &hr);
}

/* The digest the gate keeps of the handshake r as it came on the wire
 * (gkv_server_gate.link): XXH3-64 of the SP frame's payload, the REQ
 * request id (the raw REP control header after the 4-byte pipe key) and
 * the gkv message. 0 when the control header is not the expected one. */
static uint64_t
hs_wire_digest(const srv_req *r)
{
    unsigned char b[8 + NET_HDR_LEN + GKV_PRESESS_MAX];
    void *ctl = r->ctl;
    struct nn_msghdr mh;
    struct nn_cmsghdr *c;
    size_t sp = 0;

    memset(&mh, 0, sizeof mh);
    mh.msg_control = &ctl;
    mh.msg_controllen = NN_MSG;
    /* SP_HDR's data (nanomsg 1.1.5, nn_recvmsg): its size (a size_t),
     * then the header: the pipe key and the request id */
    for (c = NN_CMSG_FIRSTHDR(&mh); c != NULL; c = NN_CMSG_NXTHDR(&mh, c))
        if (c->cmsg_level == PROTO_SP && c->cmsg_type == SP_HDR) {
            if (c->cmsg_len >= NN_CMSG_LEN(sizeof sp + 8))
                memcpy(&sp, NN_CMSG_DATA(c), sizeof sp);
            break;
        }
    /* a REQ peer's header is one request id; a longer one (a device in
     * between) is not a connection of ours to link */
    if (c == NULL || sp != 8 || r->plen > GKV_PRESESS_MAX)
        return 0;
    memcpy(b, NN_CMSG_DATA(c) + sizeof sp + 4, 4);
    memcpy(b + 4, r->pl - NET_HDR_LEN, NET_HDR_LEN + r->plen);
    return XXH3_64bits(b, 4 + NET_HDR_LEN + r->plen);
}

/* With a gate, the connection that carried handshake r (*digest: the
 * gate's digest of it): its peer address in addr (GKV_PEER_ADDR_MAX
 * bytes); "" without a gate. GKV_OK, or r failed: its bytes came on no
 * connection the gate watched, or on more than one (a copy replayed on
 * another connection). The connection is marked authenticated only once
 * the handshake is accepted (op_handshake). */
static gkv_err
hs_link(gkv_server *s, srv_req *r, const net_hs_req *hs, char *addr,
        uint64_t *digest)
{
    uint64_t d;
    int n;

    addr[0] = '\0';
    *digest = 0;
    if (s->gate == NULL)
        return GKV_OK;
    d = hs_wire_digest(r);
    pthread_mutex_lock(&s->mu);
    n = d != 0 ? s->gate->link(s->gate->ctx, d, addr, 0) : 0;
    pthread_mutex_unlock(&s->mu);
    *digest = d;
    if (n == 1)
        return GKV_OK;
    addr[0] = '\0';
    if (srv__log_allowed(s, LOG_REJECT))
        srv__log(s, "handshake of group '%s' rank %u refused: its bytes came "
                 "on %d connections, not one (a replayed handshake?)",
                 hs->group, hs->rank, n);
    return srv__fail(r, GKV_EPERM, "handshake of group '%s' rank %u: its "
                     "message came on %d connections, not exactly one (a "
                     "copy replayed on another connection?): refused",
                     hs->group, hs->rank, n);
}

/* A handshake's checks before any state changes: its payload, group
 * name, nonce and (with a token) proof, and the nonce spent. GKV_OK, or
 * r failed. */
static gkv_err
hs_check(gkv_server *s, srv_req *r, net_hs_req *hs)
{
    net_rd rd;
    uint64_t rnd, exp_ms;
    int spent;

    net__rd_init(&rd, r->pl, r->plen);
    if (net__dec_hs_req(&rd, hs) != 0)
        return srv__fail(r, GKV_EPROTO, "handshake: %s", rd.why);
    if (hs->flags & s->conf.refuse_hs)   /* a test's older server */
        return srv__fail(r, GKV_EPROTO, "handshake: unknown flags 0x%x",
                         hs->flags);
    if (!net__group_ok(hs->group))
        return srv__fail(r, GKV_EINVAL, "handshake: group name '%s' must be "
                         "1..%u printable characters without spaces",
                         hs->group, NET_GROUP_MAX);
    if (!nonce_good(s, hs->nonce, &rnd, &exp_ms))
        return srv__fail(r, GKV_EPERM, "handshake of group '%s' rank %u: "
                         "nonce not from this server or older than %llu ms "
                         "(hello again)", hs->group, hs->rank,
                         (unsigned long long)s->auth.nonce_ttl_ms);
    if (!s->auth.on)
        return GKV_OK;
    if (!(hs->flags & NET_HS_PROOF))
        return srv__fail(r, GKV_EPERM, "handshake of group '%s' rank %u: "
                         "this server requires a token and none was given",
                         hs->group, hs->rank);
    if (!net__proof_ok(s->auth.key, hs->nonce, hs->group, hs->rank, hs->mac))
        return srv__fail(r, GKV_EPERM, "handshake of group '%s' rank %u: "
                         "wrong token (the proof does not match)", hs->group,
                         hs->rank);
    pthread_mutex_lock(&s->mu);
    spent = kset_add(&s->auth.spent, rnd, exp_ms, SPENT_MAX);
    pthread_mutex_unlock(&s->mu);
    if (spent != 0)
        return srv__fail(r, spent > 0 ? GKV_EPERM : GKV_EBUSY, spent > 0 ?
                         "handshake of group '%s' rank %u: nonce already used "
                         "(a replayed handshake?)" : "handshake of group '%s' "
                         "rank %u: too many handshakes in the last 30 s (try "
                         "again)", hs->group, hs->rank);
    return GKV_OK;
}

/* Another run of the job with this group name: the members of an earlier
 * one (killed, their leases not out yet) go now, with their parked
 * barriers, which would count for this run's. The server is not stopped
 * by their going: a member is joining. Caller holds s->mu. */
static void
hs_drop_other_runs(gkv_server *s, const net_hs_req *hs)
{
    if (hs->instance == 0 || (hs->flags & NET_HS_OBSERVER))
        return;
    for (size_t i = s->sess.n; i-- > 0;) {
        struct sess *o = &s->sess.tab[i];
        if (!o->observer && o->inst != 0 && o->inst != hs->instance &&
            strcmp(o->group, hs->group) == 0)
            srv__sess_remove(s, i, "dropped: another run of the job (a new "
                             "job instance) joined its group", 0);
    }
}

/* The same member again (it reconnected): its new session 'id' replaces
 * the old one 'old', and a barrier it had parked is dropped. Caller holds
 * s->mu. */
static void
hs_rejoin(gkv_server *s, struct sess *old, const net_hs_req *hs, uint64_t id,
          const char *addr)
{
    struct gone *gn = &s->sess.gone[s->sess.gone_next];
    uint64_t now = gkv__now_ms(), idle = now - old->last_ms, dropped;
    struct group *g;

    if ((g = srv__group_find(s, hs->group, 0)) != NULL)
        srv__unpark(g, old->id);
    s->sess.gone_next = (s->sess.gone_next + 1) % GONE_MAX;
    gn->id = old->id;
    gn->when_ms = now;
    snprintf(gn->group, sizeof gn->group, "%s", old->group);
    gn->rank = old->rank;
    if (s->gate != NULL) {
        s->gate->session(s->gate->ctx, old->id, old->addr, 0);
        s->gate->session(s->gate->ctx, id, addr, 1);
    }
    old->id = id;
    snprintf(old->addr, sizeof old->addr, "%s", addr);
    old->last_ms = now;
    old->ndone = old->done_next = 0;
    /* a new session may be a new process, whose barriers count from 1
     * again: an old release must not answer its first one. But the same
     * client rejoining after a barrier timed out (RESUME) retries that
     * barrier, which the group may have passed with the request it
     * abandoned: the retry must be answered, not parked as a new barrier
     * the group has moved past */
    if (!(hs->flags & NET_HS_RESUME))
        old->bar_any = 0;
    /* an observer may become a member (its end then counts), not the
     * reverse (refused by op_handshake) */
    old->observer = (hs->flags & NET_HS_OBSERVER) != 0;
    old->inst = hs->instance;
    if (srv__log_take(s, LOG_REJOIN, &dropped)) {
        srv__log_say_dropped(s, LOG_REJOIN, dropped);
        srv__log(s, "rejoin: group '%s' rank %u" FROM_FMT " (new session; "
                 "the old one was last heard %llu ms ago%s)", hs->group,
                 hs->rank, FROM(addr), (unsigned long long)idle,
                 (hs->flags & NET_HS_RESUME) ?
                 "; the same client after a failed call" : idle < 1000 ?
                 ": two clients with one group and rank?" : "");
    }
}

/* The sessions peer address 'addr' holds ("": none, without a gate).
 * Caller holds s->mu. */
static unsigned
addr_sessions(const gkv_server *s, const char *addr)
{
    unsigned n = 0;

    if (addr[0] == '\0')
        return 0;
    for (size_t i = 0; i < s->sess.n; i++)
        n += strcmp(s->sess.tab[i].addr, addr) == 0;
    return n;
}

/* The cap of sessions per peer address (with a gate). */
static unsigned
peer_cap(const gkv_server *s)
{
    return s->gate->max_peer_sessions ? s->gate->max_peer_sessions :
           GKV_PEER_SESSIONS;
}

/* A new member or observer: session 'id' in its group, from peer address
 * 'addr'. GKV_OK, or GKV_EBUSY (its group holds conf.max_group_sessions:
 * *peer 0; its address holds the gate's max_peer_sessions: *peer 1) or
 * GKV_ENOMEM, with nothing changed. Caller holds s->mu. */
static gkv_err
hs_join(gkv_server *s, const net_hs_req *hs, uint64_t id, const char *addr,
        int *peer)
{
    struct group *g;
    struct sess *ss;
    uint64_t dropped = 0;
    int kind;

    *peer = 0;
    if (s->gate != NULL && addr_sessions(s, addr) >= peer_cap(s)) {
        *peer = 1;
        return GKV_EBUSY;
    }
    if (s->sess.n >= SESS_MAX || (g = srv__group_find(s, hs->group, 1)) == NULL)
        return GKV_ENOMEM;
    if (g->members >= s->conf.max_group_sessions)
        return GKV_EBUSY;
    if (s->sess.n == s->sess.cap) {
        size_t nc = s->sess.cap ? s->sess.cap * 2 : 16;
        struct sess *ns = gkv__realloc(s->sess.tab, nc * sizeof *ns);
        if (ns == NULL) {
            if (g->members == 0)
                *g = s->sess.grp[--s->sess.ngrp];
            return GKV_ENOMEM;
        }
        s->sess.tab = ns;
        s->sess.cap = nc;
    }
    ss = &s->sess.tab[s->sess.n++];
    memset(ss, 0, sizeof *ss);
    ss->id = id;
    snprintf(ss->group, sizeof ss->group, "%s", hs->group);
    ss->rank = hs->rank;
    ss->last_ms = gkv__now_ms();
    ss->observer = (hs->flags & NET_HS_OBSERVER) != 0;
    ss->inst = hs->instance;
    snprintf(ss->addr, sizeof ss->addr, "%s", addr);
    if (s->gate != NULL)
        s->gate->session(s->gate->ctx, id, addr, 1);
    g->members++;
    s->sess.joined++;
    kind = ss->observer ? LOG_OBSERVER : LOG_JOIN;
    if (srv__log_take(s, kind, &dropped)) {
        srv__log_say_dropped(s, kind, dropped);
        srv__log(s, "join: group '%s' rank %u%s" FROM_FMT " (%u in the "
                 "group, %zu clients in all)", hs->group, hs->rank,
                 ss->observer ? " (observer)" : "", FROM(addr), g->members,
                 s->sess.n);
    }
    return GKV_OK;
}

/* HANDSHAKE: a session for (group, rank), replacing the member's earlier
 * one; the reply is the session, the identity and the schema. With a
 * gate, only once the proof checked (with a token) is the connection that
 * carried it looked for, and the session gets its address. */
static void
op_handshake(gkv_server *s, srv_req *r)
{
    net_hs_req hs;
    struct sess *old = NULL;
    char addr[GKV_PEER_ADDR_MAX], again[GKV_PEER_ADDR_MAX];
    uint64_t id, digest;
    gkv_err rc;
    int peer;

    /* the gate is asked once the proof checked and the nonce is spent: a
     * copy handled after the first is refused for its nonce, two copies
     * present at once are both refused here */
    if (hs_check(s, r, &hs) != GKV_OK ||
        hs_link(s, r, &hs, addr, &digest) != GKV_OK)
        return;
    do
        randombytes_buf(&id, sizeof id);
    while (id == 0);
    pthread_mutex_lock(&s->mu);
    hs_drop_other_runs(s, &hs);
    for (size_t i = 0; i < s->sess.n; i++)
        if (s->sess.tab[i].rank == hs.rank &&
            strcmp(s->sess.tab[i].group, hs.group) == 0)
            old = &s->sess.tab[i];
    if (old != NULL && !old->observer && (hs.flags & NET_HS_OBSERVER)) {
        /* stopping counts members' ends only: a member's session made an
         * observer's would end uncounted (the server ran on with no member
         * left), and no longer kept the server up for the member it
         * displaced. A client's flags never change, so this is another
         * client using a member's identity. */
        pthread_mutex_unlock(&s->mu);
        srv__fail(r, GKV_EPERM, "handshake of group '%s' rank %u as an "
                  "observer: rank %u is a member's (an observer needs a "
                  "group or rank of its own)", hs.group, hs.rank, hs.rank);
        return;
    }
    if (old != NULL) {
        hs_rejoin(s, old, &hs, id, addr);
    } else if ((rc = hs_join(s, &hs, id, addr, &peer)) != GKV_OK) {
        unsigned cap = s->conf.max_group_sessions;
        pthread_mutex_unlock(&s->mu);
        if (rc == GKV_EBUSY && peer) {
            if (srv__log_allowed(s, LOG_REJECT))
                srv__log(s, "handshake of group '%s' rank %u from %s refused: "
                         "the address holds %u sessions (--max-peer-sessions)",
                         hs.group, hs.rank, addr, peer_cap(s));
            srv__fail(r, rc, "handshake of group '%s' rank %u: %s holds %u "
                      "sessions, the most one peer address may "
                      "(--max-peer-sessions)", hs.group, hs.rank, addr,
                      peer_cap(s));
        } else if (rc == GKV_EBUSY)
            srv__fail(r, rc, "handshake of group '%s' rank %u: the group "
                      "holds %u sessions, the most one group may "
                      "(--max-group-sessions)", hs.group, hs.rank, cap);
        else
            srv__fail(r, rc, "handshake: no room for another client");
        return;
    }
    if (!(hs.flags & NET_HS_OBSERVER))
        seen_add(s, hs.group, hs.rank);
    /* accepted: its connection is authenticated by session id (no longer
     * capped as one that has not, no frame limit) until that ends */
    if (s->gate != NULL)
        (void)s->gate->link(s->gate->ctx, digest, again, id);
    pthread_mutex_unlock(&s->mu);
    reply_schema(s, r, id, 1);
}

static void
op_schema(gkv_server *s, srv_req *r)
{
    net_rd rd;

    net__rd_init(&rd, r->pl, r->plen);
    if (net__dec_empty(&rd) != 0) {
        srv__fail(r, GKV_EPROTO, "schema: %s", rd.why);
        return;
    }
    reply_schema(s, r, 0, 0);
}

static struct done *
done_find(struct sess *ss, uint64_t req)
{
    for (unsigned i = 0; i < ss->ndone; i++)
        if (ss->done[i].req == req)
            return &ss->done[i];
    return NULL;
}

/* ---- the done set (SRV_ONCE) -------------------------------------------- */

/* SRV_ONCE: whether this session already has request r->h.req_id (a
 * request nanomsg re-sent after a lost connection). A copy of one being
 * applied waits for it. A repeat gets the first one's answer without
 * being applied again (1); otherwise the request is recorded as being
 * applied, and the core calls srv__once_end() with its outcome (0).
 * A copy is the same bytes: a request that reuses the id of one
 * remembered with another type or payload (a client's bug) is refused
 * with GKV_EINVAL (1), and the first one's record stays as it was.
 * When the session is gone (a rejoin of its group and rank, its lease, a
 * LEAVE), before or while the copy waited, its record went with it: the
 * request is refused with GKV_EPERM and NET_F_SESSION (1), never applied
 * unrecorded, since it may be a copy of one already applied. */
int
srv__once_begin(gkv_server *s, srv_req *r)
{
    struct sess *ss;
    struct done *d, first = {0};
    int dup = 0, gone = 1, reused = 0;
    uint64_t digest = XXH3_64bits_withSeed(r->pl, r->plen, r->h.type);

    pthread_mutex_lock(&s->mu);
    while ((ss = srv__sess_find(s, r->h.session)) != NULL) {
        gone = 0;
        if ((d = done_find(ss, r->h.req_id)) == NULL) {
            if (ss->done == NULL &&
                (ss->done = gkv__calloc(DONE_MAX, sizeof *ss->done)) == NULL)
                break;                  /* not remembered */
            d = &ss->done[ss->done_next];
            ss->done_next = (ss->done_next + 1) % DONE_MAX;
            if (ss->ndone < DONE_MAX)
                ss->ndone++;
            memset(d, 0, sizeof *d);
            d->req = r->h.req_id;
            d->digest = digest;
            d->busy = 1;
            break;
        }
        if (d->digest != digest) {
            reused = 1;
            break;
        }
        if (!d->busy) {
            dup = 1;
            first = *d;
            break;
        }
        pthread_cond_wait(&s->sess.done_cv, &s->mu);
        gone = 1;
    }
    pthread_mutex_unlock(&s->mu);
    if (gone) {
        srv__fail(r, GKV_EPERM, "%s request %llu of session 0x%016llx: the "
                  "session ended (a newer handshake as its group and rank, "
                  "its lease, or a leave) before it was applied; not applied",
                  net__type_name(r->h.type), (unsigned long long)r->h.req_id,
                  (unsigned long long)r->h.session);
        r->rflags |= NET_F_SESSION;
        return 1;
    }
    if (reused) {
        if (srv__log_allowed(s, LOG_REJECT))
            srv__log(s, "group '%s' rank %u: request %llu (%s) reuses the "
                     "id of another request; refused", r->group, r->rank,
                     (unsigned long long)r->h.req_id,
                     net__type_name(r->h.type));
        srv__fail(r, GKV_EINVAL, "request id %llu reused with a different "
                  "payload (%s of %zu bytes): refused, not applied; the "
                  "first request with that id stands",
                  (unsigned long long)r->h.req_id, net__type_name(r->h.type),
                  r->plen);
        return 1;
    }
    if (!dup)
        return 0;
    if (srv__log_allowed(s, LOG_AGAIN))
        srv__log(s, "group '%s' rank %u: request %llu (%s) arrived again; "
                 "not applied twice", r->group, r->rank,
                 (unsigned long long)r->h.req_id, net__type_name(r->h.type));
    if (first.status != GKV_OK)
        srv__fail(r, (gkv_err)first.status, "request %llu was already "
                  "answered with this error", (unsigned long long)r->h.req_id);
    else
        srv__reply_bytes(r, first.rep, first.rep_len);
    return 1;
}

void
srv__once_end(gkv_server *s, srv_req *r)
{
    struct sess *ss;
    struct done *d;

    /* ops_build() admits only handlers whose replies fit */
    assert(r->status != GKV_OK || r->out_len <= SRV_ONCE_REPLY);
    pthread_mutex_lock(&s->mu);
    if ((ss = srv__sess_find(s, r->h.session)) != NULL &&
        (d = done_find(ss, r->h.req_id)) != NULL && d->busy) {
        d->status = r->status;
        if (r->status == GKV_OK && r->out_len > SRV_ONCE_REPLY)
            d->status = GKV_EIO;        /* applied; its answer not kept */
        else if (r->status == GKV_OK) {
            d->rep_len = (uint32_t)r->out_len;
            memcpy(d->rep, (unsigned char *)r->out + NET_HDR_LEN, r->out_len);
        }
        d->busy = 0;
    }
    pthread_cond_broadcast(&s->sess.done_cv);
    pthread_mutex_unlock(&s->mu);
}

/* ---- LEAVE and HEARTBEAT ------------------------------------------------ */

static void
op_leave(gkv_server *s, srv_req *r)
{
    net_rd rd;
    uint8_t stopping = 0;

    net__rd_init(&rd, r->pl, r->plen);
    if (net__dec_empty(&rd) != 0) {
        srv__fail(r, GKV_EPROTO, "leave: %s", rd.why);
        return;
    }
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < s->sess.n; i++)
        if (s->sess.tab[i].id == r->h.session) {
            srv__sess_remove(s, i, "leave", 1);
            break;
        }
    stopping = (uint8_t)atomic_load(&s->run.stop);
    pthread_mutex_unlock(&s->mu);
    if (stopping)
        r->rflags |= NET_F_STOPPING;
    srv__reply_u8(r, stopping);
}

static void
op_heartbeat(gkv_server *s, srv_req *r)
{
    net_rd rd;
    uint32_t lease = s->conf.lease_ms;

    net__rd_init(&rd, r->pl, r->plen);
    if (net__dec_empty(&rd) != 0) {
        srv__fail(r, GKV_EPROTO, "heartbeat: %s", rd.why);
        return;
    }
    srv__reply_u32(r, lease);
}

/* ---- the gate ------------------------------------------------------------ */

gkv_err
gkv_server_set_gate(gkv_server *s, const gkv_server_gate *g)
{
    if (s == NULL || g == NULL || g->link == NULL || g->session == NULL)
        return net__fail(GKV_EINVAL, "gkv_server_set_gate: a server and a "
                         "gate with both functions are required");
    if (s->run.ran)
        return net__fail(GKV_EINVAL, "gkv_server_set_gate: the server runs "
                         "already");
    s->gate = g;
    return GKV_OK;
}

/* ---- the core's hooks ---------------------------------------------------- */

/* For a SRV_SESSION request: 1 when r's session is live (r->group and
 * r->rank filled, its lease renewed); else 0 and 'why' says what became
 * of it. Takes s->mu. */
int
srv__sess_touch(gkv_server *s, srv_req *r, char *why, size_t cap)
{
    const struct gone *gn = NULL;
    struct sess *ss;
    int ok = 0;

    pthread_mutex_lock(&s->mu);
    if (r->h.session != 0 && (ss = srv__sess_find(s, r->h.session)) != NULL) {
        ok = 1;
        ss->last_ms = gkv__now_ms();
        snprintf(r->group, sizeof r->group, "%s", ss->group);
        r->rank = ss->rank;
    }
    for (size_t i = 0; !ok && r->h.session != 0 && i < GONE_MAX; i++)
        if (s->sess.gone[i].id == r->h.session)
            gn = &s->sess.gone[i];
    if (gn != NULL)
        snprintf(why, cap, "%s request with session 0x%016llx of group '%s' "
                 "rank %u: a newer handshake as the same group and rank "
                 "replaced it %llu ms ago (two clients with one identity? "
                 "each client of a group needs its own rank)",
                 net__type_name(r->h.type), (unsigned long long)r->h.session,
                 gn->group, gn->rank,
                 (unsigned long long)(gkv__now_ms() - gn->when_ms));
    pthread_mutex_unlock(&s->mu);
    if (!ok && gn == NULL)
        snprintf(why, cap, "%s request with %s session 0x%016llx: hand-shake "
                 "first (the server restarted, the lease expired, or it was "
                 "never granted)", net__type_name(r->h.type),
                 r->h.session ? "unknown" : "no",
                 (unsigned long long)r->h.session);
    return ok;
}

void
srv__sess_expire(gkv_server *s)
{
    uint64_t now;

    /* read the clock under the lock: a worker stamps last_ms under it, so
     * no session's stamp is later than now (now - last_ms would wrap and
     * expire a session heard from a moment ago) */
    pthread_mutex_lock(&s->mu);
    now = gkv__now_ms();
    for (size_t i = 0; i < s->sess.n;) {
        if (now - s->sess.tab[i].last_ms > s->conf.lease_ms) {
            char how[96];
            snprintf(how, sizeof how, "lease expired (nothing heard for %llu "
                     "ms; killed?)",
                     (unsigned long long)(now - s->sess.tab[i].last_ms));
            srv__sess_remove(s, i, how, 1);
        } else {
            i++;
        }
    }
    pthread_mutex_unlock(&s->mu);
}

void
srv__sess_free_all(gkv_server *s)
{
    for (size_t k = 0; k < s->sess.ngrp; k++) {
        for (size_t i = 0; i < s->sess.grp[k].nwait; i++)
            nn_freemsg(s->sess.grp[k].wait[i].ctl);
        gkv__free(s->sess.grp[k].wait);
    }
    gkv__free(s->sess.grp);
    for (size_t i = 0; i < s->sess.n; i++)
        gkv__free(s->sess.tab[i].done);
    gkv__free(s->sess.tab);
    gkv__free(s->auth.spent.e);
    gkv__free(s->sess.seen.e);
}

const srv_op srv__sess_ops[] = {
    {NET_HELLO, 0, op_hello, NULL},
    {NET_HANDSHAKE, 0, op_handshake, NULL},
    {NET_SCHEMA, SRV_SESSION, op_schema, NULL},
    {NET_LEAVE, SRV_SESSION, op_leave, NULL},
    {NET_HEARTBEAT, SRV_SESSION, op_heartbeat, NULL},
    {0, 0, NULL, NULL},
};
