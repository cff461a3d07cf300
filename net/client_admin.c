/* client_admin.c - the administration family: BARRIER, STATS and
 * SHUTDOWN, and what the client knows of each server (server_info).
 */
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include "base/base.h"
#include "net/gkv_net.h"
#include "net/wire.h"
#include "net/client_int.h"

/* ---- servers ------------------------------------------------------------ */

size_t
gkv_client_nservers(const gkv_client *c)
{
    return c != NULL ? c->ncn : 0;
}

gkv_err
gkv_client_server_info(gkv_client *c, size_t i, gkv_server_info *out)
{
    struct conn *cn;

    net__clear();
    if (c == NULL || out == NULL || i >= c->ncn)
        return net__fail(GKV_EINVAL, "server_info: no server %zu", i);
    pthread_mutex_lock(&c->mu);
    cn = &c->cn[i];
    memset(out, 0, sizeof *out);
    snprintf(out->addr, sizeof out->addr, "%s", cn->addr);
    snprintf(out->host, sizeof out->host, "%s", cn->id.host);
    snprintf(out->name, sizeof out->name, "%s", cn->id.name);
    snprintf(out->store, sizeof out->store, "%s", cn->id.store);
    snprintf(out->version, sizeof out->version, "%s", cn->id.version);
    out->machine = cn->have_id ? cn->id.machine : cn->machine;
    out->server_id = cn->have_id ? cn->id.server_id : cn->server;
    out->num_servers = cn->have_id ? cn->id.num_servers : c->nserv;
    out->pid = cn->id.pid;
    out->lease_ms = cn->id.lease_ms;
    out->max_msg = cn->id.max_msg;
    out->keep_alive = (cn->id.flags & NET_ID_KEEP_ALIVE) != 0;
    out->auth = (cn->id.flags & NET_ID_AUTH) != 0;
    out->connected = cn->ready;
    pthread_mutex_unlock(&c->mu);
    return GKV_OK;
}

/* ---- barrier, stats, shutdown ------------------------------------------- */

static void
penc_barrier(net_wr *w, const struct part *p)
{
    net__enc_barrier(w, p->arg);
}

static gkv_err
done_barrier(gkv_client *c, struct part *p, net_rd *rd)
{
    const net_barrier *want = p->arg;
    net_barrier got;

    (void)c;
    if (net__dec_barrier(rd, &got) != 0)
        return net__cfail(p->cn, GKV_EPROTO, "malformed barrier reply: %s",
                          rd->why);
    if (got.seq != want->seq || got.group_size != want->group_size)
        return net__cfail(p->cn, GKV_EPROTO, "barrier reply for barrier %llu "
                          "of %u clients; this was barrier %llu of %u",
                          (unsigned long long)got.seq, got.group_size,
                          (unsigned long long)want->seq, want->group_size);
    return GKV_OK;
}

static gkv_err
timeout_barrier(gkv_client *c, struct part *p)
{
    return net__cfail(p->cn, GKV_ETIMEDOUT, "no reply to barrier %llu of "
                      "group '%s' (%u clients) within %d ms: not every rank "
                      "arrived (one failed, is slow, or was started with "
                      "another group or size?), or the server is "
                      "unreachable", (unsigned long long)c->barrier_seq + 1,
                      c->group, c->group_size, c->call_ms);
}

/* BARRIER is for the server that answers it: re-sent after a refused
 * session (the server then counts the new session's arrival). */
static const struct part_ops barrier_ops = {
    .type = NET_BARRIER, .enc = penc_barrier, .done = done_barrier,
    .timeout = timeout_barrier,
};

gkv_err
gkv_client_barrier(gkv_client *c, int timeout_ms)
{
    struct part p;
    net_barrier b;
    gkv_err rc;

    net__clear();
    if (c == NULL)
        return net__fail(GKV_EINVAL, "barrier: no client");
    if (c->group_size == 0)
        return net__fail(GKV_EINVAL, "barrier: the group size is unknown "
                         "(set gkv_client_opts.group_size)");
    if (c->rank >= c->group_size)
        return net__fail(GKV_EINVAL, "barrier: rank %u is not below the group "
                         "size %u", c->rank, c->group_size);
    pthread_mutex_lock(&c->mu);
    b.group_size = c->group_size;
    /* counted only once passed: a barrier that failed is tried again
     * with the same seq, which the server answers at once when the group
     * passed it meanwhile (with the request this call abandoned) */
    b.seq = c->barrier_seq + 1;
    memset(&p, 0, sizeof p);
    p.cn = &c->cn[0];
    p.ops = &barrier_ops;
    p.arg = &b;
    c->call_ms = timeout_ms > 0 ? timeout_ms : c->timeout_ms;
    rc = net__exchange(c, &p, 1, net__deadline((uint64_t)c->call_ms));
    c->call_ms = c->timeout_ms;
    if (rc == GKV_OK)
        c->barrier_seq = b.seq;
    /* a failed barrier may stay parked on the server (a timeout closes
     * only our socket; the heartbeat keeps the session), and the group
     * may pass it with that request: the next handshake there resumes
     * the session's barrier state (net__conn_open) */
    c->bar_unsure = rc != GKV_OK;
    pthread_mutex_unlock(&c->mu);
    return rc;
}

static gkv_err
done_stats(gkv_client *c, struct part *p, net_rd *rd)
{
    static const struct { const char *k; size_t off; } keys[] = {
#define K(f) {#f, offsetof(gkv_server_stats, f)}
        K(uptime_ms), K(requests), K(errors), K(rejected), K(bytes_in),
        K(bytes_out), K(pulls), K(pull_rows), K(pushes), K(push_rows),
        K(sessions), K(groups), K(joined), K(tensors),
        K(store_used_bytes), K(store_map_size), K(samples), K(sample_edges),
        K(store_free_bytes), K(reply_mem_bytes), K(reply_mem_max),
        K(reply_mem_refused),
#undef K
    };
    net_stats *st = gkv__malloc(sizeof *st);
    gkv_server_stats *out = p->arg;

    (void)c;
    if (st == NULL)
        return net__fail(GKV_ENOMEM, "out of memory");
    if (net__dec_stats(rd, st) != 0) {
        gkv_err rc = net__cfail(p->cn, GKV_EPROTO, "malformed stats reply: %s",
                                rd->why);
        gkv__free(st);
        return rc;
    }
    memset(out, 0, sizeof *out);
    /* unknown keys are a newer server's: skipped */
    for (uint32_t i = 0; i < st->n; i++)
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
            if (strcmp(st->kv[i].key, keys[k].k) == 0)
                memcpy((char *)out + keys[k].off, &st->kv[i].val, 8);
    gkv__free(st);
    return GKV_OK;
}

static const struct part_ops stats_ops = {
    .type = NET_STATS, .done = done_stats,
};

gkv_err
gkv_client_stats(gkv_client *c, size_t i, gkv_server_stats *out)
{
    struct part p;
    gkv_err rc;

    net__clear();
    if (c == NULL || out == NULL || i >= c->ncn)
        return net__fail(GKV_EINVAL, "stats: no server %zu", i);
    pthread_mutex_lock(&c->mu);
    memset(&p, 0, sizeof p);
    p.cn = &c->cn[i];
    p.ops = &stats_ops;
    p.arg = out;
    rc = net__exchange(c, &p, 1, net__deadline((uint64_t)c->timeout_ms));
    pthread_mutex_unlock(&c->mu);
    return rc;
}

static void
penc_u8(net_wr *w, const struct part *p)
{
    net__wr_u8(w, *(const uint8_t *)p->arg);
}

static const struct part_ops shutdown_ops = {
    .type = NET_SHUTDOWN, .enc = penc_u8, .done = net__done_u8,
};

gkv_err
gkv_client_shutdown(gkv_client *c, int force)
{
    struct part *parts;
    uint8_t f = force ? 1 : 0;
    gkv_err rc;

    net__clear();
    if (c == NULL)
        return net__fail(GKV_EINVAL, "shutdown: no client");
    pthread_mutex_lock(&c->mu);
    if ((parts = gkv__calloc(c->ncn, sizeof *parts)) == NULL) {
        pthread_mutex_unlock(&c->mu);
        return net__fail(GKV_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < c->ncn; i++) {
        parts[i].cn = &c->cn[i];
        parts[i].ops = &shutdown_ops;
        parts[i].arg = &f;
    }
    rc = net__exchange(c, parts, c->ncn,
                       net__deadline((uint64_t)c->timeout_ms));
    /* a stopping server is not there to leave later, nor to send
     * heartbeats to: the session goes (gkv_client_close leaves wherever
     * one is held, also over a broken connection) */
    for (size_t i = 0; i < c->ncn; i++)
        if (parts[i].rc == GKV_OK && (parts[i].rflags & NET_F_STOPPING)) {
            net__conn_break(&c->cn[i]);
            pthread_mutex_lock(&c->hb_mu);
            c->cn[i].session = 0;
            pthread_mutex_unlock(&c->hb_mu);
        }
    gkv__free(parts);
    pthread_mutex_unlock(&c->mu);
    return rc;
}
