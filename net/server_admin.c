/* server_admin.c - the job's administration: BARRIER, STATS, SHUTDOWN.
 *
 * Locks: a barrier's parked requests live in their group, under s->mu
 * (server_int.h); a barrier takes s->mu to park and to release, and
 * answers the released requests after unlocking. STATS reads the
 * counters (atomics) and, under s->mu, the table sizes. The handlers run
 * with no lock held (the core's rule) and never wait for another request:
 * a barrier parks (srv_req.parked) instead.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <nanomsg/nn.h>
#include "net/server_int.h"

static void enc_barrier(net_wr *w, const void *a) { net__enc_barrier(w, a); }


/* ---- BARRIER ------------------------------------------------------------ */

/* Where barrier request r of group g may park: the group's parked
 * requests agree with it (size, barrier), the earlier request of its
 * session or of its rank (a restarted client) taken out. GKV_OK, or r
 * failed. Caller holds s->mu. */
static gkv_err
bar_admit(struct group *g, srv_req *r, const net_barrier *b)
{
    srv__unpark(g, r->h.session);       /* a retry replaces the earlier one */
    for (size_t i = 0; i < g->nwait; i++)
        if (g->wait[i].rank == r->rank) {
            /* the same rank under another session: a restarted client */
            nn_freemsg(g->wait[i].ctl);
            g->wait[i] = g->wait[--g->nwait];
            break;
        }
    if (g->nwait > 0 && g->bsize != b->group_size)
        return srv__fail(r, GKV_EINVAL, "barrier of group '%s': rank %u "
                         "says %u clients, ranks already waiting said %u",
                         r->group, r->rank, b->group_size, g->bsize);
    if (g->nwait > 0 && g->wait[0].seq != b->seq)
        return srv__fail(r, GKV_EINVAL, "barrier of group '%s': rank %u is "
                         "at barrier %llu, ranks already waiting are at %llu",
                         r->group, r->rank, (unsigned long long)b->seq,
                         (unsigned long long)g->wait[0].seq);
    if (g->nwait == g->capwait) {
        size_t nc = g->capwait ? g->capwait * 2 : 8;
        struct parked *nw = gkv__realloc(g->wait, nc * sizeof *nw);
        if (nw == NULL)
            return srv__fail(r, GKV_ENOMEM, "barrier: out of memory");
        g->wait = nw;
        g->capwait = nc;
    }
    return GKV_OK;
}

/* Parks r in g (it keeps r's control header). When the group is whole,
 * takes its parked requests out into *rel (n of them, the caller's to
 * answer and free) and marks their sessions released. Caller holds
 * s->mu. */
static void
bar_park(gkv_server *s, struct group *g, srv_req *r, const net_barrier *b,
         struct parked **rel, size_t *nrel)
{
    struct parked *p = &g->wait[g->nwait++];
    struct sess *ss;

    g->bsize = b->group_size;
    p->ctl = r->ctl;
    p->req_id = r->h.req_id;
    p->session = r->h.session;
    p->seq = b->seq;
    p->rank = r->rank;
    p->flags = r->h.flags & NET_F_SUM;
    r->ctl = NULL;
    r->parked = 1;
    *rel = NULL;
    *nrel = 0;
    if (g->nwait < g->bsize)
        return;
    *rel = g->wait;
    *nrel = g->nwait;
    g->wait = NULL;
    g->nwait = g->capwait = 0;
    for (size_t i = 0; i < *nrel; i++)
        if ((ss = srv__sess_find(s, (*rel)[i].session)) != NULL) {
            ss->bar_any = 1;
            ss->bar_seq = (*rel)[i].seq;
        }
}

/* Answers the released requests rel[0..n) and frees rel. No lock held
 * (none needed: srv__send_reply never blocks). */
static void
bar_release(gkv_server *s, struct parked *rel, size_t n, const net_barrier *b)
{
    for (size_t i = 0; i < n; i++) {
        net_hdr h = {0};
        net_wr w = {0};
        net_barrier rb = {b->group_size, b->seq};
        int busy;       /* never: a control reply */
        void *m = srv__reply_msg(s, NET_BARRIER, 12, &busy);

        h.type = NET_BARRIER;
        h.flags = rel[i].flags;
        h.req_id = rel[i].req_id;
        h.session = rel[i].session;
        if (m == NULL) {
            nn_freemsg(rel[i].ctl);
            continue;
        }
        w.p = (unsigned char *)m + NET_HDR_LEN;
        w.cap = 12;
        net__enc_barrier(&w, &rb);
        srv__send_reply(s, rel[i].ctl, &h, GKV_OK, 0, m, w.off);
    }
    gkv__free(rel);
}

/* BARRIER: parks the request until the group's every rank has sent its
 * own; the last arrival answers them all (the socket is raw). */
static void
op_barrier(gkv_server *s, srv_req *r)
{
    net_barrier b;
    net_rd rd;
    struct group *g;
    struct parked *rel = NULL;
    struct sess *ss;
    size_t nrel = 0;

    net__rd_init(&rd, r->pl, r->plen);
    if (net__dec_barrier(&rd, &b) != 0) {
        srv__fail(r, GKV_EPROTO, "barrier: %s", rd.why);
        return;
    }
    if (r->rank >= b.group_size) {
        srv__fail(r, GKV_EINVAL, "barrier of group '%s': rank %u is not "
                  "below the group size %u", r->group, r->rank, b.group_size);
        return;
    }
    pthread_mutex_lock(&s->mu);
    /* the dispatcher saw the session, but without the lock since: one
     * dropped meanwhile (a rejoin, its lease) must not park, as no
     * srv__sess_remove() would ever take it out of the group's count */
    if ((ss = srv__sess_find(s, r->h.session)) == NULL) {
        pthread_mutex_unlock(&s->mu);
        srv__fail(r, GKV_EPERM, "barrier of group '%s' rank %u: the session "
                  "ended before the barrier was entered", r->group, r->rank);
        r->rflags |= NET_F_SESSION;
        return;
    }
    if (ss->bar_any && ss->bar_seq == b.seq) {
        /* this barrier was released, and its answer lost with the
         * connection; nanomsg sent the request again on the new one:
         * answer again rather than park it as a new barrier of a group
         * that has moved on */
        pthread_mutex_unlock(&s->mu);
        if (srv__log_allowed(s, LOG_AGAIN))
            srv__log(s, "group '%s' rank %u: barrier %llu arrived again "
                     "after it was released; answered again", r->group,
                     r->rank, (unsigned long long)b.seq);
        srv__reply_build(r, enc_barrier, &b);
        return;
    }
    if ((g = srv__group_find(s, r->group, 0)) == NULL) {
        pthread_mutex_unlock(&s->mu);
        srv__fail(r, GKV_EINVAL, "barrier: group '%s' has no members",
                  r->group);
        return;
    }
    if (bar_admit(g, r, &b) == GKV_OK)
        bar_park(s, g, r, &b, &rel, &nrel);
    pthread_mutex_unlock(&s->mu);
    bar_release(s, rel, nrel, &b);
}

/* Parked barrier requests get an error when the server stops. */
void
srv__barrier_fail_parked(gkv_server *s)
{
    pthread_mutex_lock(&s->mu);
    for (size_t k = 0; k < s->sess.ngrp; k++) {
        struct group *g = &s->sess.grp[k];
        for (size_t i = 0; i < g->nwait; i++) {
            net_hdr h = {0};
            h.type = NET_BARRIER;
            h.flags = g->wait[i].flags;
            h.req_id = g->wait[i].req_id;
            h.session = g->wait[i].session;
            srv__send_error(s, g->wait[i].ctl, &h, GKV_EINTR, NET_F_STOPPING,
                            "barrier abandoned: the server is stopping");
        }
        g->nwait = 0;
    }
    pthread_mutex_unlock(&s->mu);
}

/* ---- STATS and SHUTDOWN ------------------------------------------------- */

struct stats_arg {
    const char *key[32];
    uint64_t val[32];
    size_t n;
};

static void
enc_stats(net_wr *w, const void *a)
{
    const struct stats_arg *sa = a;

    net__wr_u32(w, (uint32_t)sa->n);
    for (size_t i = 0; i < sa->n; i++) {
        net__wr_str(w, sa->key[i]);
        net__wr_u64(w, sa->val[i]);
    }
}

static void
stat_add(struct stats_arg *sa, const char *k, uint64_t v)
{
    if (sa->n < 32) {
        sa->key[sa->n] = k;
        sa->val[sa->n++] = v;
    }
}

static void
op_stats(gkv_server *s, srv_req *r)
{
    struct stats_arg sa = {0};
    gkv_store_stat st;
    net_rd rd;
    uint64_t nsess, ngrp, joined;

    net__rd_init(&rd, r->pl, r->plen);
    if (net__dec_empty(&rd) != 0) {
        srv__fail(r, GKV_EPROTO, "stats: %s", rd.why);
        return;
    }
    memset(&st, 0, sizeof st);
    gkv_store_stat_get(s->store, &st);
    pthread_mutex_lock(&s->mu);
    nsess = s->sess.n;
    ngrp = s->sess.ngrp;
    joined = s->sess.joined;
    pthread_mutex_unlock(&s->mu);
#define LD(x) atomic_load_explicit(&s->x, memory_order_relaxed)
    stat_add(&sa, "uptime_ms", gkv__now_ms() - s->stats.start_ms);
    stat_add(&sa, "requests", LD(stats.requests));
    stat_add(&sa, "errors", LD(stats.errors));
    stat_add(&sa, "rejected", LD(stats.rejected));
    stat_add(&sa, "bytes_in", LD(stats.bytes_in));
    stat_add(&sa, "bytes_out", LD(stats.bytes_out));
    stat_add(&sa, "pulls", LD(stats.pulls));
    stat_add(&sa, "pull_rows", LD(stats.pull_rows));
    stat_add(&sa, "pushes", LD(stats.pushes));
    stat_add(&sa, "push_rows", LD(stats.push_rows));
    stat_add(&sa, "samples", LD(stats.samples));
    stat_add(&sa, "sample_edges", LD(stats.sample_edges));
    stat_add(&sa, "sessions", nsess);
    stat_add(&sa, "groups", ngrp);
    stat_add(&sa, "joined", joined);
    stat_add(&sa, "tensors", st.ntensors);
    stat_add(&sa, "store_used_bytes", st.used_bytes);
    stat_add(&sa, "store_map_size", st.map_size);
    stat_add(&sa, "store_free_bytes", st.free_bytes);
    stat_add(&sa, "reply_mem_bytes", srv__rmem_held());
    stat_add(&sa, "reply_mem_max", s->rmem.cap);
    stat_add(&sa, "reply_mem_refused", LD(rmem.refused));
#undef LD
    srv__reply_build(r, enc_stats, &sa);
}

static void
op_shutdown(gkv_server *s, srv_req *r)
{
    net_rd rd;
    uint8_t force, stopping;

    net__rd_init(&rd, r->pl, r->plen);
    if (net__dec_u8(&rd, &force, "shutdown.force") != 0) {
        srv__fail(r, GKV_EPROTO, "shutdown: %s", rd.why);
        return;
    }
    stopping = force || !(s->conf.flags & GKV_SERVER_KEEP_ALIVE);
    pthread_mutex_lock(&s->mu);
    if (stopping)
        srv__stop_request(s, "shutdown requested by group '%s' rank %u%s",
                          r->group, r->rank, force ? " (forced)" : "");
    pthread_mutex_unlock(&s->mu);
    if (!stopping)
        srv__log(s, "shutdown request of group '%s' rank %u ignored: this "
                 "server keeps alive (a forced shutdown stops it)", r->group,
                 r->rank);
    else
        r->rflags |= NET_F_STOPPING;
    srv__reply_u8(r, stopping);
}

const srv_op srv__admin_ops[] = {
    {NET_BARRIER, SRV_SESSION, op_barrier, NULL},
    {NET_STATS, SRV_SESSION, op_stats, NULL},
    {NET_SHUTDOWN, SRV_SESSION, op_shutdown, NULL},
    {0, 0, NULL, NULL},
};
