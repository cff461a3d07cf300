/* sample_par.c - a hop on several threads: the frontier cut into chunks,
 * picked side by side; with relabelling, each chunk's picks kept apart and
 * labelled in frontier order by one thread at a time (sample_hop.c's
 * opening comment), so that the result is the one-thread result; and the
 * parallel reset of the markers. */
#include <limits.h>
#include "graph/sample_int.h"

/* Single hop: the picks (P1 and P2 only; the copy waits for the
 * offsets) into the thread's buffers, chunks taken in any order. */
static void
ph_pick(gkv_sampler *s, int tid)
{
    struct tbuf *tb = &s->tb[tid];

    for (;;) {
        size_t ci = atomic_fetch_add_explicit(&s->next, 1,
                                              memory_order_relaxed);
        struct chunk *c;
        if (ci >= s->nch)
            break;
        c = &s->ch[ci];
        c->tid = tid;
        c->uoff = tb->ue_len;
        c->coff = tb->cnt_len;
        c->n = 0;
        if ((long)ci > atomic_load_explicit(&s->fail_ci, memory_order_relaxed))
            continue;
        graph__pipe_range(s, tb, (long)ci, c->et, c->lo, c->hi, P3_NONE);
        c->n = tb->ue_len - c->uoff;
    }
}

/* Phase D of a single hop: the picks in global IDs at their offsets. */
static void
ph_copy(gkv_sampler *s, int tid)
{
    const struct run *R = &s->R;

    (void)tid;
    for (;;) {
        size_t ci = atomic_fetch_add_explicit(&s->next, 1,
                                              memory_order_relaxed);
        const struct chunk *c;
        const struct tbuf *tb;
        const int64_t *u, *e, *cnt, *f;
        struct earr *ea;
        int64_t *os, *od;
        size_t j = 0, o;
        if (ci >= s->nch)
            break;
        c = &s->ch[ci];
        tb = &s->tb[c->tid];
        ea = &R->out[c->et];
        f = R->f[col_ntype(s->sg, c->et, R->dir)];
        u = tb->u + c->uoff;
        e = tb->e + c->uoff;
        cnt = tb->cnt + c->coff;
        os = R->dir == GKV_DIR_IN ? ea->s : ea->d;
        od = R->dir == GKV_DIR_IN ? ea->d : ea->s;
        o = c->eoff;
        counts_out(s, c->et, c->lo, c->hi, cnt);
        for (int64_t i = c->lo; i < c->hi; i++)
            for (int64_t k = cnt[i - c->lo]; k > 0; k--, j++, o++) {
                os[o] = u[j];
                od[o] = f[i];
                ea->e[o] = e[j];
            }
    }
}

/* After a relabelling hop: its new nodes into the node lists (where the
 * end of the batch resets their markers). When there is no room, their
 * markers go back to 0 here and GKV_ENOMEM. */
static gkv_err
new_nodes_list(gkv_sampler *s)
{
    struct blay *L = s->R.L;
    gkv_err rc = GKV_OK;

    for (int t = 0; t < s->nnt; t++) {
        size_t n0 = s->ntot[t], n = L->nodes[t].num_src;
        if (n == n0)
            continue;
        if (graph__grow(&L->ids[t], &L->idcap[t], n, sizeof *L->ids[t])) {
            for (size_t i = 0; i < n - n0; i++)
                STORE(&s->mk[t][s->pid[t][i]], 0);
            L->nodes[t].num_src = n0;
            rc = GKV_ENOMEM;
            continue;
        }
        memcpy(L->ids[t] + n0, s->pid[t], (n - n0) * sizeof *L->ids[t]);
    }
    return rc;
}

/* Relabel: tb and chunk buffer b swap their picks (u, e, cnt). */
static void
cb_swap(struct tbuf *tb, struct cbuf *b)
{
    struct cbuf t = *b;

    b->u = tb->u;
    b->e = tb->e;
    b->ue_cap = tb->ue_cap;
    b->ue_len = tb->ue_len;
    b->cnt = tb->cnt;
    b->cnt_cap = tb->cnt_cap;
    b->cnt_len = tb->cnt_len;
    tb->u = t.u;
    tb->e = t.e;
    tb->ue_cap = t.ue_cap;
    tb->ue_len = t.ue_len;
    tb->cnt = t.cnt;
    tb->cnt_cap = t.cnt_cap;
    tb->cnt_len = t.cnt_len;
}

/* Relabel: while the next chunk to label has its picks and no other
 * thread labels, label chunks in order (s->tok is the right to label,
 * s->lab the next chunk). A thread that marks a chunk picked and finds
 * another thread labelling leaves the chunk to it: that thread, after
 * letting go, looks at the next chunk again, and with seq_cst on both
 * sides one of the two sees the other's store. Labelling stops at the
 * first chunk that failed. */
static void
label_ready(gkv_sampler *s, struct tbuf *tb)
{
    for (;;) {
        size_t l = atomic_load(&s->lab);
        int z = 0;
        if (l >= s->nch || !atomic_load(&s->ch[l].ready) ||
            !atomic_compare_exchange_strong(&s->tok, &z, 1))
            return;
        while ((l = atomic_load_explicit(&s->lab, memory_order_relaxed)) <
               s->nch && atomic_load_explicit(&s->ch[l].ready,
                                              memory_order_acquire)) {
            const struct chunk *c = &s->ch[l];
            if ((long)l >= atomic_load(&s->fail_ci)) {
                atomic_store(&s->lab, s->nch);
                break;
            }
            cb_swap(tb, &s->cb[l]);
            (void)graph__label_chunk(s, tb, c->et, c->lo, c->hi);
            cb_swap(tb, &s->cb[l]);
            atomic_store_explicit(&s->lab, l + 1, memory_order_relaxed);
        }
        atomic_store(&s->tok, 0);
    }
}

/* Relabel: each thread takes chunks in frontier order from s->next, puts
 * their picks (P1 and P2) in the chunk's buffers and marks them ready,
 * then labels what is ready (label_ready). The caller picks at most
 * s->caller_max chunks and then only labels until every chunk is taken;
 * the job ends when the last chunk is labelled, by whoever picked it or
 * was labelling then. */
static void
ph_relabel(gkv_sampler *s, int tid)
{
    struct tbuf *tb = &s->tb[tid];
    size_t npick = 0;

    for (;;) {
        size_t ci;
        struct chunk *c;
        if (tid == 0 && npick >= s->caller_max) {
            while (atomic_load(&s->next) < s->nch) {
                label_ready(s, tb);
                cpu_relax();
            }
            break;
        }
        ci = atomic_fetch_add(&s->next, 1);
        if (ci >= s->nch)
            break;
        npick++;
        c = &s->ch[ci];
        if ((long)ci <= atomic_load_explicit(&s->fail_ci,
                                             memory_order_relaxed)) {
            cb_swap(tb, &s->cb[ci]);
            tb->ue_len = tb->cnt_len = 0;
            (void)graph__pipe_range(s, tb, (long)ci, c->et, c->lo, c->hi,
                                    P3_NONE);
            cb_swap(tb, &s->cb[ci]);
        }
        atomic_store(&c->ready, 1);
        label_ready(s, tb);
    }
    label_ready(s, tb);
}

/* The relabelling hop of s->R on the workers. */
static gkv_err
hop_relabel(gkv_sampler *s)
{
    struct blay *L = s->R.L;
    gkv_err rc;

    if (s->nch > s->cbcap) {
        size_t old = s->cbcap;
        if (graph__grow(&s->cb, &s->cbcap, s->nch, sizeof *s->cb)) {
            graph__tb_fail(s, &s->tb[0], 0, GKV_ENOMEM, "out of memory for "
                           "the work list");
            return GKV_ENOMEM;
        }
        memset(s->cb + old, 0, (s->cbcap - old) * sizeof *s->cb);
    }
    for (size_t ci = 0; ci < s->nch; ci++)
        atomic_store_explicit(&s->ch[ci].ready, 0, memory_order_relaxed);
    for (int t = 0; t < s->nnt; t++)
        s->ntot[t] = L->nodes[t].num_src;
    atomic_store(&s->next, 0);
    atomic_store(&s->lab, 0);
    atomic_store(&s->tok, 0);
    graph__pool_run(s, ph_relabel);
    rc = new_nodes_list(s);
    if (atomic_load(&s->fail_ci) != LONG_MAX)
        return GKV_EINVAL;
    if (rc != GKV_OK)
        graph__tb_fail(s, &s->tb[0], 0, rc, "out of memory for the node "
                       "lists");
    return rc;
}

gkv_err
graph__hop_parallel(gkv_sampler *s, size_t total)
{
    struct run *R = &s->R;
    struct tbuf *tb0 = &s->tb[0];
    size_t chs = total / ((size_t)s->nt * 8);

    if (chs < SUB)
        chs = SUB;
    if (chs > 1024)
        chs = 1024;
    s->nch = 0;
    for (int et = 0; et < s->net; et++) {
        size_t nf;
        if (R->fan[et] == 0)
            continue;
        nf = R->nf[col_ntype(s->sg, et, R->dir)];
        for (size_t lo = 0; lo < nf; lo += chs) {
            struct chunk *c;
            if (graph__grow(&s->ch, &s->chcap, s->nch + 1, sizeof *s->ch)) {
                graph__tb_fail(s, tb0, 0, GKV_ENOMEM, "out of memory for the "
                               "work list");
                return GKV_ENOMEM;
            }
            c = &s->ch[s->nch++];
            memset(c, 0, sizeof *c);
            c->et = et;
            c->lo = (int64_t)lo;
            c->hi = (int64_t)(lo + chs < nf ? lo + chs : nf);
        }
    }
    for (int i = 0; i < s->nt; i++)
        s->tb[i].ue_len = s->tb[i].cnt_len = 0;
    if (R->relabel)
        return hop_relabel(s);
    atomic_store(&s->next, 0);
    graph__pool_run(s, ph_pick);
    if (atomic_load(&s->fail_ci) != LONG_MAX)
        return GKV_EINVAL;
    for (size_t ci = 0; ci < s->nch; ci++) {
        struct chunk *c = &s->ch[ci];
        c->eoff = R->olen[c->et];
        R->olen[c->et] += c->n;
    }
    for (int e = 0; e < s->net; e++)
        if (graph__earr_grow(&R->out[e], R->olen[e])) {
            graph__tb_fail(s, tb0, 0, GKV_ENOMEM, "out of memory for the "
                           "sampled edges");
            return GKV_ENOMEM;
        }
    atomic_store(&s->next, 0);
    graph__pool_run(s, ph_copy);
    return GKV_OK;
}

#define RESET_CHUNK 4096

/* Markers of the nodes in L's lists back to 0, in chunks of RESET_CHUNK
 * nodes taken from s->next. */
static void
ph_reset(gkv_sampler *s, int tid)
{
    const struct blay *L = s->R.L;

    (void)tid;
    for (;;) {
        size_t ci = atomic_fetch_add_explicit(&s->next, 1,
                                              memory_order_relaxed);
        size_t lo = ci * RESET_CHUNK;
        int t;
        for (t = 0; t < s->nnt; t++) {
            size_t n = L->nodes[t].num_src;
            if (lo < n)
                break;
            lo -= (n + RESET_CHUNK - 1) / RESET_CHUNK * RESET_CHUNK;
        }
        if (t == s->nnt)
            break;
        {
            size_t n = L->nodes[t].num_src;
            size_t hi = lo + RESET_CHUNK < n ? lo + RESET_CHUNK : n;
            const int64_t *ids = L->ids[t];
            amark *mk = s->mk[t];
            for (size_t i = lo; i < hi; i++)
                STORE(&mk[ids[i]], 0);
        }
    }
}

void
graph__markers_reset(gkv_sampler *s, struct blay *L)
{
    size_t n = 0;

    for (int t = 0; t < s->nnt; t++)
        n += L->nodes[t].num_src;
    s->R.L = L;
    atomic_store(&s->next, 0);
    if (n >= 2 * RESET_CHUNK && s->solo == 0)
        graph__pool_run(s, ph_reset);
    else
        ph_reset(s, 0);
}

void
graph__sample_caller_max(gkv_sampler *s, size_t n)
{
    s->caller_max = n;
}
