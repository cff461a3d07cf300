/* server_rmem.c - reply memory: the bytes of replies the server has handed
 * to nanomsg that nanomsg has not freed yet, counted so that they can be
 * bounded in total (gkv_server_opts.max_reply_mem).
 *
 * A raw REP socket keeps at most one outgoing message per connection (a
 * reply to a connection whose last reply is still unsent is dropped), but
 * a peer that never reads keeps that one for as long as it stays
 * connected: twelve such peers asking for 200 MiB pulls hold 2.4 GiB of
 * the server. nanomsg says nothing about when it frees a message, so the
 * count hooks the free itself. In nanomsg 1.1.5 (src/utils/chunk.c) a
 * message from nn_allocmsg(size, 0) is one block:
 *
 *   struct nn_chunk { struct nn_atomic refcount;   u32 (GCC atomics)
 *                     size_t size;                 the message's bytes
 *                     void (*ffn)(void *); }       frees the block
 *   u32 offset (0), u32 tag (0xdeadcafe, big-endian), then the data
 *
 * and nn_chunk_free() calls ffn(block) when the last reference goes,
 * whichever way it goes: sent, dropped because the connection was busy or
 * gone, the socket closed, or nn_freemsg(). Each reply's ffn is replaced
 * by rmem_free(), which takes the block's size off the count and calls the
 * original. The layout is not public, so the first server of a process
 * probes it once (rmem_probe) and counts nothing unless all of it holds;
 * the server then logs that its reply memory is not bounded, and why.
 *
 * The count is the process's (the free function cannot tell servers
 * apart): servers in one process share it, each bounding it by its own
 * cap. Reply messages are never trimmed or reallocated by the server or
 * by nanomsg's send path (xrep trims only the control header), so the
 * size a block is freed with is the size it was counted with. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <nanomsg/nn.h>
#include "net/server_int.h"

#define CHUNK_TAG 0xdeadcafeu

typedef void (*free_fn)(void *);

/* struct nn_chunk of nanomsg 1.1.5 built with GCC atomics */
struct chunk {
    uint32_t refcount;
    size_t size;
    free_fn ffn;
};

#define CHUNK_HDR (sizeof(struct chunk) + 2 * sizeof(uint32_t))

static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static int probe_ok;                   /* the layout matched */
static char probe_why[256];            /* else why not */
static free_fn orig_free;              /* nanomsg's own (for type 0) */
static atomic_uint_fast64_t held;      /* bytes of counted replies alive */
static void *probe_seen;               /* probe_free()'s argument */

static uint32_t
get_be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
           (uint32_t)p[2] << 8 | p[3];
}

static struct chunk *
chunk_of(void *data)
{
    return (struct chunk *)((unsigned char *)data - CHUNK_HDR);
}

static void
rmem_free(void *block)
{
    struct chunk *c = block;

    atomic_fetch_sub_explicit(&held, c->size, memory_order_relaxed);
    orig_free(block);
}

static void
probe_free(void *block)
{
    probe_seen = block;
    orig_free(block);
}

/* Whether the free function 'fn' lies in nanomsg's library (the object
 * that holds nn_allocmsg), by dladdr. */
static int
fn_in_nanomsg(free_fn fn, char *why, size_t cap)
{
    Dl_info fi, ai;
    const char *base;

    if (dladdr((void *)fn, &fi) == 0 || fi.dli_fname == NULL) {
        snprintf(why, cap, "its free function %p is in no loaded object",
                 (void *)fn);
        return 0;
    }
    base = strrchr(fi.dli_fname, '/');
    base = base != NULL ? base + 1 : fi.dli_fname;
    if (strncmp(base, "libnanomsg", 10) == 0)
        return 1;
    /* nanomsg linked statically: the same object as nn_allocmsg */
    if (dladdr((void *)nn_allocmsg, &ai) != 0 && ai.dli_fbase == fi.dli_fbase)
        return 1;
    snprintf(why, cap, "its free function lies in %s, not in nanomsg",
             fi.dli_fname);
    return 0;
}

int
srv__rmem_layout(const void *data, size_t size, char *why, size_t cap)
{
    const unsigned char *p = data;
    const struct chunk *c = chunk_of((void *)data);

    /* the tag and offset first: they are in any nanomsg header, so the
     * fields before them are read only when the header is as long */
    if (get_be32(p - 4) != CHUNK_TAG)
        snprintf(why, cap, "no chunk tag before the data (0x%08x)",
                 get_be32(p - 4));
    else if (get_be32(p - 8) != 0)
        snprintf(why, cap, "a chunk offset %u, not 0", get_be32(p - 8));
    else if (c->size != size)
        snprintf(why, cap, "the chunk's size field reads %zu for a %zu-byte "
                 "message", c->size, size);
    else if (c->refcount != 1)
        snprintf(why, cap, "the chunk's reference count reads %u",
                 c->refcount);
    else
        return fn_in_nanomsg(c->ffn, why, cap);
    return 0;
}

/* The layout of a message of an odd size, checked field by field, then a
 * free through a replaced function: probe_ok, or probe_why says what did
 * not match. */
static void
rmem_probe(void)
{
    enum { ODD = 4099 };
    unsigned char *p = nn_allocmsg(ODD, 0);
    struct chunk *c;
    char why[160];

    if (p == NULL) {
        snprintf(probe_why, sizeof probe_why, "nn_allocmsg failed");
        return;
    }
    c = chunk_of(p);
    if (srv__rmem_layout(p, ODD, why, sizeof why)) {
        orig_free = c->ffn;
        c->ffn = probe_free;
        nn_freemsg(p);
        p = NULL;
        if (probe_seen == c) {
            probe_ok = 1;
            return;
        }
        snprintf(why, sizeof why, "a replaced free function was not called "
                 "by nn_freemsg");
    }
    if (p != NULL)
        nn_freemsg(p);
    snprintf(probe_why, sizeof probe_why, "nanomsg's message layout is not "
             "the one known (nanomsg 1.1.5): %s", why);
}

int
srv__rmem_probe(char *why, size_t cap)
{
    pthread_once(&probe_once, rmem_probe);
    if (!probe_ok && why != NULL)
        snprintf(why, cap, "%s", probe_why);
    return probe_ok;
}

void *
srv__rmem_alloc(size_t bytes, uint64_t cap, int *busy)
{
    uint_fast64_t cur;
    unsigned char *m;
    struct chunk *c;

    *busy = 0;
    if (!srv__rmem_probe(NULL, 0))
        return nn_allocmsg(bytes, 0);
    /* reserved before the allocation, so that threads making replies at
     * once cannot pass the cap together */
    cur = atomic_load_explicit(&held, memory_order_relaxed);
    do {
        /* nothing held: admitted whatever its size, so that a cap set
         * near the largest message cannot refuse a reply for ever */
        if (cap != 0 && bytes >= SRV_REPLY_SMALL && cur != 0 &&
            bytes + cur > cap) {
            *busy = 1;
            return NULL;
        }
    } while (!atomic_compare_exchange_weak_explicit(&held, &cur, cur + bytes,
                                                    memory_order_relaxed,
                                                    memory_order_relaxed));
    if ((m = nn_allocmsg(bytes, 0)) == NULL) {
        atomic_fetch_sub_explicit(&held, bytes, memory_order_relaxed);
        return NULL;
    }
    c = chunk_of(m);
    if (c->ffn != orig_free || c->size != bytes) {
        /* not the block the probe saw: left as it is, not counted */
        atomic_fetch_sub_explicit(&held, bytes, memory_order_relaxed);
        return m;
    }
    c->ffn = rmem_free;
    return m;
}

uint64_t
srv__rmem_held(void)
{
    return atomic_load_explicit(&held, memory_order_relaxed);
}

/* Replies that carry data a client asked to read (rows, samples, graph
 * queries) may be refused, and nothing is done for them; control replies
 * (hello, handshake, schema, partition book, barrier, stats, the answers
 * to writes) are small or change state, and always go. */
static int
refusable(unsigned type)
{
    switch (type) {
    case NET_PULL: case NET_SAMPLE: case NET_SAMPLE_BATCH:
    case NET_FIND_EDGES: case NET_IN_DEGREES: case NET_OUT_DEGREES:
    case NET_IN_SUBGRAPH: case NET_EDGE_BATCH:
        return 1;
    default:
        return 0;
    }
}

void *
srv__reply_msg(gkv_server *s, unsigned type, size_t payload, int *busy)
{
    void *m = srv__rmem_alloc(NET_HDR_LEN + payload,
                              refusable(type) ? s->rmem.cap : 0, busy);

    if (*busy)
        atomic_fetch_add_explicit(&s->rmem.refused, 1, memory_order_relaxed);
    return m;
}

void *
srv__reply_alloc(srv_req *r, size_t payload)
{
    gkv_server *s = r->srv;
    void *m;
    int busy;

    if ((m = srv__reply_msg(s, r->h.type, payload, &busy)) != NULL)
        return m;
    if (!busy) {
        srv__fail(r, GKV_ENOMEM, "%s: out of memory for a reply of %zu "
                  "bytes", net__type_name(r->h.type), payload);
        return NULL;
    }
    /* said in the log too (rationed as rejections are): the operator
     * learns that some client is not reading */
    if (srv__log_allowed(s, LOG_REJECT))
        srv__log(s, "refused a %s reply of %zu bytes: %llu bytes of replies "
                 "are held unsent, the cap is %llu (--max-reply-memory); "
                 "clients are not reading their replies",
                 net__type_name(r->h.type), payload,
                 (unsigned long long)srv__rmem_held(),
                 (unsigned long long)s->rmem.cap);
    srv__fail(r, GKV_EBUSY, "%s: a reply of %zu bytes would take the "
              "replies this server process holds unsent past its cap of "
              "%llu bytes (--max-reply-memory; %llu held now): clients are "
              "not reading their replies. Nothing was read or changed; try "
              "again later",
              net__type_name(r->h.type), payload,
              (unsigned long long)s->rmem.cap,
              (unsigned long long)srv__rmem_held());
    return NULL;
}

void
srv__rmem_open(gkv_server *s, const gkv_server_opts *o)
{
    char why[256];

    if (!srv__rmem_probe(why, sizeof why)) {
        s->rmem.cap = 0;
        srv__log(s, "reply memory is not bounded in total (replies that "
                 "clients do not read may hold up to one reply a "
                 "connection): %s", why);
        return;
    }
    s->rmem.cap = o->max_reply_mem ? o->max_reply_mem : GKV_NET_MAX_REPLY_MEM;
}
