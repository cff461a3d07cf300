/* sample.c - samplers (gkv_sampler_*): their life cycle, the worker pool
 * that runs a hop's phases, per-thread errors, and the checks and set-up
 * of a call's fanouts, seeds and options (see gkv_sample.h for the
 * contract and the exact generator; sample_hop.c for how a hop runs). */
#include <math.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include "graph/sample_int.h"

/* Three arrays that share one capacity *cap, grown together to hold
 * 'need' entries; *cap is what all three hold. -1: out of memory (*cap
 * unchanged). */
int
graph__grow3(void *a, size_t ea, void *b, size_t eb, void *c, size_t ec,
             size_t *cap, size_t need)
{
    size_t c1 = *cap, c2 = *cap, c3 = *cap;

    if (need <= *cap)
        return 0;
    if (graph__grow(a, &c1, need, ea) || graph__grow(b, &c2, need, eb) ||
        graph__grow(c, &c3, need, ec))
        return -1;
    *cap = c1 < c2 ? (c1 < c3 ? c1 : c3) : (c2 < c3 ? c2 : c3);
    return 0;
}

/* Large arrays that are read at random (adjacency, markers) go on 2 MiB
 * pages where the kernel allows it (transparent huge pages in "madvise"
 * mode): a random access then costs a cache miss but rarely a TLB miss.
 * The block is gkv__malloc'd 2 MiB larger and aligned inside; *raw keeps
 * the pointer to free. Below 4 MiB it is a plain allocation. */
#define HUGE_SZ ((size_t)2 << 20)

void *
graph__huge_alloc(size_t bytes, void **raw)
{
    uintptr_t a;
    char *p;

    if (bytes < 2 * HUGE_SZ) {
        *raw = gkv__malloc(bytes ? bytes : 1);
        return *raw;
    }
    if (bytes > SIZE_MAX - HUGE_SZ ||
        (p = gkv__malloc(bytes + HUGE_SZ)) == NULL) {
        *raw = NULL;
        return NULL;
    }
    *raw = p;
    a = ((uintptr_t)p + HUGE_SZ - 1) & ~(uintptr_t)(HUGE_SZ - 1);
#ifdef MADV_HUGEPAGE
    /* [a, a + bytes) lies inside the block; advice only, so a kernel
     * without THP (EINVAL) changes nothing */
    (void)madvise((void *)a, bytes, MADV_HUGEPAGE);
#endif
    return (void *)a;
}

/* rc of a graph__eb_* call that wrote its detail to s->ebmsg: recorded as
 * s's message when it is an error. */
gkv_err
graph__s_eb(gkv_sampler *s, gkv_err rc)
{
    return rc == GKV_OK ? rc : s_fail(s, rc, "%s", s->ebmsg);
}

/* Records the first error of this thread (its lowest chunk) and lowers
 * the sampler's failing-chunk mark. */
gkv_err
graph__tb_fail(gkv_sampler *s, struct tbuf *tb, long ci, gkv_err rc,
               const char *fmt, ...)
{
    va_list ap;
    long cur;

    if (tb->err_ci < 0 || ci < tb->err_ci) {
        tb->err_ci = ci;
        tb->err = rc;
        va_start(ap, fmt);
        vsnprintf(tb->msg, sizeof tb->msg, fmt, ap);
        va_end(ap);
    }
    cur = atomic_load(&s->fail_ci);
    while (ci < cur && !atomic_compare_exchange_weak(&s->fail_ci, &cur, ci))
        ;
    return rc;
}

/* ---- the worker pool ---------------------------------------------------- */

#define SPIN_ITERS 4096

/* A job word the worker has not run yet and that is still open. */
static inline int
runnable(uint64_t w, uint64_t done)
{
    return !(w & 1) && w != done;
}

static void *
worker_main(void *p)
{
    struct warg *wa = p;
    gkv_sampler *s = wa->s;
    struct pool *pl = &s->pool;
    uint64_t done = 1;

    for (;;) {
        uint64_t w;
        int spins = 0;
        while (!runnable(w = atomic_load(&pl->job), done) &&
               !atomic_load_explicit(&pl->stop, memory_order_relaxed)) {
            if (++spins < SPIN_ITERS) {
                cpu_relax();
                continue;
            }
            pthread_mutex_lock(&pl->mu);
            atomic_fetch_add(&pl->sleepers, 1);
            while (!runnable(atomic_load(&pl->job), done) &&
                   !atomic_load(&pl->stop))
                pthread_cond_wait(&pl->cv, &pl->mu);
            atomic_fetch_sub(&pl->sleepers, 1);
            pthread_mutex_unlock(&pl->mu);
            spins = 0;
        }
        if (atomic_load(&pl->stop))
            break;
        atomic_fetch_add(&pl->active, 1);
        if (atomic_load(&pl->job) == w)
            pl->fn(s, wa->tid);
        atomic_fetch_sub_explicit(&pl->active, 1, memory_order_release);
        done = w;
    }
    return NULL;
}

static void
pool_wake(struct pool *pl)
{
    if (atomic_load(&pl->sleepers) > 0) {
        pthread_mutex_lock(&pl->mu);
        pthread_cond_broadcast(&pl->cv);
        pthread_mutex_unlock(&pl->mu);
    }
}

/* Runs fn(s, tid) on the caller (tid 0) and on the workers that join
 * while there is work, and returns when all of them are done. */
void
graph__pool_run(gkv_sampler *s, void (*fn)(gkv_sampler *, int))
{
    struct pool *pl = &s->pool;
    uint64_t w;
    long spins = 0;

    if (s->nt == 1) {
        fn(s, 0);
        return;
    }
    pl->fn = fn;
    w = (atomic_load_explicit(&pl->job, memory_order_relaxed) | 1) + 1;
    atomic_store(&pl->job, w);
    pool_wake(pl);
    fn(s, 0);
    atomic_store(&pl->job, w | 1);
    /* seq_cst, not acquire: with the workers' fetch_add(active) then
     * load(job) this is a Dekker handshake, and only seq_cst on both
     * sides forbids a late worker seeing job == w (so running fn) while
     * this load sees active == 0 (so the next phase starts beside it) */
    while (atomic_load(&pl->active) > 0) {
        if (++spins < SPIN_ITERS)
            cpu_relax();
        else
            sched_yield();
    }
}

/* Around each sampling call: parallel or the caller alone? On cores the
 * sampler has to itself the workers win. On oversubscribed cores (other
 * processes, or more sampler threads than cores) the workers take CPU
 * from the caller and wait on it, and a call can take twice as long as on
 * the caller alone. That shows directly in the caller's share of a CPU
 * during a parallel call: near 1 when it runs undisturbed (waiting spins),
 * 0.5 when it shares its core. Below SHARE_MIN the next calls run on the
 * caller alone, and every EXPLORE-th call tries the workers again. The
 * result is the same either way. */
#define EXPLORE    32
#define SHARE_MIN  0.8

static double
cpu_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void
graph__call_begin(gkv_sampler *s)
{
    gkv__clear(s_about(s));
    if (s->nt == 1)
        return;
    s->ncalls++;
    s->solo = s->share_par < SHARE_MIN && s->ncalls % EXPLORE != 0 &&
              !s->always_par;
    if (!s->solo) {
        s->t0 = (double)gkv__now_ns() * 1e-9;
        s->c0 = cpu_s();
    }
}

void
graph__call_end(gkv_sampler *s, gkv_err rc)
{
    double wall;

    if (s->nt == 1 || s->solo || rc != GKV_OK)
        return;
    wall = (double)gkv__now_ns() * 1e-9 - s->t0;
    if (wall < 200e-6)          /* too short to tell */
        return;
    s->share_par = 0.5 * s->share_par + 0.5 * ((cpu_s() - s->c0) / wall);
}

static void
pool_stop(gkv_sampler *s)
{
    struct pool *pl = &s->pool;

    if (pl->started > 0) {
        atomic_store(&pl->stop, 1);
        pthread_mutex_lock(&pl->mu);
        pthread_cond_broadcast(&pl->cv);
        pthread_mutex_unlock(&pl->mu);
        for (int i = 0; i < pl->started; i++)
            pthread_join(pl->th[i], NULL);
    }
    if (pl->sync_ok) {
        pthread_mutex_destroy(&pl->mu);
        pthread_cond_destroy(&pl->cv);
    }
}

/* ---- the sampler: life cycle -------------------------------------------- */

static void
earr_free(struct earr *a)
{
    gkv__free(a->s);
    gkv__free(a->d);
    gkv__free(a->e);
    memset(a, 0, sizeof *a);
}

int
graph__earr_grow(struct earr *a, size_t need)
{
    return graph__grow3(&a->s, sizeof *a->s, &a->d, sizeof *a->d, &a->e,
                        sizeof *a->e, &a->cap, need);
}

static void
blay_free(gkv_sampler *s, struct blay *L)
{
    if (L->ids != NULL)
        for (int t = 0; t < s->nnt; t++)
            gkv__free(L->ids[t]);
    if (L->ea != NULL)
        for (int e = 0; e < s->net; e++)
            earr_free(&L->ea[e]);
    gkv__free(L->ids);
    gkv__free(L->idcap);
    gkv__free(L->nodes);
    gkv__free(L->ea);
    gkv__free(L->edges);
}

static void
tb_free(struct tbuf *tb)
{
    gkv__free(tb->spos[0]);
    gkv__free(tb->spos[1]);
    gkv__free(tb->u);
    gkv__free(tb->e);
    gkv__free(tb->rank);
    gkv__free(tb->cnt);
    gkv__free(tb->allow);
    gkv__free(tb->S);
    gkv__free(tb->wv);
    gkv__free(tb->pick);
    gkv__free(tb->hset);
    gkv__free(tb->ovr);
}

void
gkv_sampler_free(gkv_sampler *s)
{
    if (s == NULL)
        return;
    pool_stop(s);
    if (s->tb != NULL)
        for (int i = 0; i < s->nt; i++)
            tb_free(&s->tb[i]);
    gkv__free(s->tb);
    if (s->mkraw != NULL)
        for (int t = 0; t < s->nnt; t++)
            gkv__free(s->mkraw[t]);
    gkv__free(s->mk);
    gkv__free(s->mkraw);
    gkv__free(s->ch);
    for (size_t i = 0; i < s->cbcap; i++) {
        gkv__free(s->cb[i].u);
        gkv__free(s->cb[i].e);
        gkv__free(s->cb[i].rank);
        gkv__free(s->cb[i].cnt);
    }
    gkv__free(s->cb);
    if (s->ex != NULL)
        for (int e = 0; e < s->net; e++)
            gkv__free(s->ex[e]);
    gkv__free(s->ex);
    gkv__free(s->nex);
    gkv__free(s->excap);
    if (s->nea != NULL)
        for (int e = 0; e < s->net; e++)
            earr_free(&s->nea[e]);
    gkv__free(s->nea);
    gkv__free(s->nlen);
    gkv__free(s->fanv);
    gkv__free(s->fastv);
    gkv__free(s->wmodev);
    gkv__free(s->keyv);
    gkv__free(s->fv);
    gkv__free(s->nfv);
    gkv__free(s->ntot);
    if (s->pid != NULL)
        for (int t = 0; t < s->nnt; t++)
            gkv__free(s->pid[t]);
    gkv__free(s->pid);
    gkv__free(s->pidcap);
    for (int i = 0; i < s->nlay; i++)
        blay_free(s, &s->lay[i]);
    gkv__free(s->lay);
    for (int i = 0; i < 4; i++)
        gkv__free(s->pb[i]);
    gkv__free(s->tmpv);
    gkv__free(s);
}

const char *
gkv_sampler_errmsg(const gkv_sampler *s)
{
    return s != NULL ? gkv__errmsg_about(s) : "";
}

gkv_err
gkv_sampler_new(gkv_sampler **out, const gkv_sgraph *sg, int nthreads)
{
    gkv_sampler *s;
    size_t net1, nnt;

    if (out == NULL)
        return GKV_EINVAL;
    *out = NULL;
    if (sg == NULL || nthreads < 0 || nthreads > GKV_SAMPLE_THREADS_MAX)
        return GKV_EINVAL;
    if ((s = gkv__calloc(1, sizeof *s)) == NULL)
        return GKV_ENOMEM;
    s->sg = sg;
    s->nt = nthreads < 1 ? 1 : nthreads;
    s->share_par = 1.0;
    s->caller_max = SIZE_MAX;
    s->nnt = sg->nnt;
    s->net = sg->net;
    nnt = (size_t)s->nnt;
    net1 = (size_t)s->net + 1;
    atomic_init(&s->pool.job, 1);
    atomic_init(&s->pool.active, 0);
    atomic_init(&s->pool.sleepers, 0);
    atomic_init(&s->pool.stop, 0);
    s->tb = gkv__calloc((size_t)s->nt, sizeof *s->tb);
    s->mk = gkv__calloc(nnt, sizeof *s->mk);
    s->mkraw = gkv__calloc(nnt, sizeof *s->mkraw);
    s->ex = gkv__calloc(net1, sizeof *s->ex);
    s->nex = gkv__calloc(net1, sizeof *s->nex);
    s->excap = gkv__calloc(net1, sizeof *s->excap);
    s->nea = gkv__calloc(net1, sizeof *s->nea);
    s->nlen = gkv__calloc(net1, sizeof *s->nlen);
    s->fanv = gkv__calloc(net1, sizeof *s->fanv);
    s->fastv = gkv__calloc(net1, sizeof *s->fastv);
    s->wmodev = gkv__calloc(net1, sizeof *s->wmodev);
    s->keyv = gkv__calloc(net1, sizeof *s->keyv);
    s->fv = gkv__calloc(nnt, sizeof *s->fv);
    s->nfv = gkv__calloc(nnt, sizeof *s->nfv);
    s->ntot = gkv__calloc(nnt, sizeof *s->ntot);
    s->pid = gkv__calloc(nnt, sizeof *s->pid);
    s->pidcap = gkv__calloc(nnt, sizeof *s->pidcap);
    if (s->tb == NULL || s->mk == NULL || s->mkraw == NULL ||
        s->ex == NULL || s->nex == NULL || s->excap == NULL ||
        s->nea == NULL || s->nlen == NULL || s->fanv == NULL ||
        s->fastv == NULL || s->wmodev == NULL || s->keyv == NULL ||
        s->fv == NULL || s->nfv == NULL || s->ntot == NULL ||
        s->pid == NULL || s->pidcap == NULL) {
        gkv_sampler_free(s);
        return GKV_ENOMEM;
    }
    if (s->nt > 1) {
        struct pool *pl = &s->pool;
        if (pthread_mutex_init(&pl->mu, NULL) != 0) {
            gkv_sampler_free(s);
            return GKV_ENOMEM;
        }
        if (pthread_cond_init(&pl->cv, NULL) != 0) {
            pthread_mutex_destroy(&pl->mu);
            gkv_sampler_free(s);
            return GKV_ENOMEM;
        }
        pl->sync_ok = 1;
        for (int i = 1; i < s->nt; i++) {
            s->wa[i].s = s;
            s->wa[i].tid = i;
            if (pthread_create(&pl->th[i - 1], NULL, worker_main,
                               &s->wa[i]) != 0) {
                gkv_sampler_free(s);
                return GKV_EIO;
            }
            pl->started++;
        }
    }
    *out = s;
    return GKV_OK;
}

/* ---- call set-up -------------------------------------------------------- */

static const gkv_sample_opts opts_zero;

gkv_err
graph__fan_check(gkv_sampler *s, const int *fan, int nfan, int nlayers)
{
    if (fan == NULL)
        return s_fail(s, GKV_EINVAL, "fanouts is NULL");
    if (nfan != 1 && nfan != s->net)
        return s_fail(s, GKV_EINVAL, "nfan %d is neither 1 nor the number "
                      "of edge types (%d)", nfan, s->net);
    for (int i = 0; i < nlayers * nfan; i++)
        if (fan[i] < -1)
            return s_fail(s, GKV_EINVAL, "fanout[%d] = %d: a fanout is -1 "
                          "(all) or >= 0", i, fan[i]);
    return GKV_OK;
}

/* Is edge type e sampled in any of the layers? */
static int
fan_used(const int *fan, int nfan, int nlayers, int e)
{
    for (int i = 0; i < nlayers; i++)
        if (fan[i * nfan + (nfan == 1 ? 0 : e)] != 0)
            return 1;
    return 0;
}

/* Appends the positions of the edges ids[0..n) of type e (those the
 * adjacency holds) to the exclusion list of e. */
gkv_err
graph__ex_add(gkv_sampler *s, int e, const int64_t *ids, size_t n,
              const char *what)
{
    const struct sg_adj *sa = &s->sg->adj[2 * e + s->R.dir];
    const struct sg_inv *iv = NULL;

    if (!sa->set || n == 0)
        return GKV_OK;
    if (ids == NULL)
        return s_fail(s, GKV_EINVAL, "%s of edge type %d is NULL", what, e);
    if (has_eids(sa) && graph__inv_get(s->sg, sa, &iv) != GKV_OK)
        return s_fail(s, GKV_ENOMEM, "out of memory for the edge-ID index "
                      "of edge type %d", e);
    if (graph__grow(&s->ex[e], &s->excap[e], s->nex[e] + n, sizeof *s->ex[e]))
        return s_fail(s, GKV_ENOMEM, "out of memory for %zu excluded edges",
                      s->nex[e] + n);
    for (size_t i = 0; i < n; i++) {
        int64_t p;
        if (ids[i] < 0)
            return s_fail(s, GKV_ERANGE, "%s of edge type %d: [%zu] = %lld "
                          "is not an edge ID", what, e, i, (long long)ids[i]);
        if ((p = eid_pos(sa, iv, ids[i])) >= 0)
            s->ex[e][s->nex[e]++] = p;
    }
    return GKV_OK;
}

static int
i64_cmp(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;

    return (a > b) - (a < b);
}

void
graph__ex_finish(gkv_sampler *s)
{
    for (int e = 0; e < s->net; e++) {
        size_t n = s->nex[e], m = 0;
        int64_t *x = s->ex[e];
        if (n < 2)
            continue;
        qsort(x, n, sizeof *x, i64_cmp);
        for (size_t i = 0; i < n; i++)
            if (m == 0 || x[i] != x[m - 1])
                x[m++] = x[i];
        s->nex[e] = m;
    }
}

/* Checks the options against the edge types sampled, and fills s->R's
 * direction, flags and weight modes and the exclusion lists from o. */
gkv_err
graph__opts_prep(gkv_sampler *s, const gkv_sample_opts *o, const int *fan,
                 int nfan, int nlayers)
{
    struct run *R = &s->R;

    if (o == NULL)
        o = &opts_zero;
    if (o->dir != GKV_DIR_IN && o->dir != GKV_DIR_OUT)
        return s_fail(s, GKV_EINVAL, "opts->dir %d is neither GKV_DIR_IN "
                      "nor GKV_DIR_OUT", o->dir);
    if (o->flags & ~(GKV_SAMPLE_REPLACE | GKV_SAMPLE_WEIGHTED))
        return s_fail(s, GKV_EINVAL, "opts->flags 0x%x has unknown bits",
                      o->flags);
    if ((o->flags & GKV_SAMPLE_WEIGHTED) && o->edge_w != NULL)
        return s_fail(s, GKV_EINVAL, "GKV_SAMPLE_WEIGHTED and edge_w are "
                      "both given; choose one source of weights");
    if (o->edge_w != NULL && o->edge_w_len == NULL)
        return s_fail(s, GKV_EINVAL, "edge_w is given without edge_w_len");
    if (o->exclude != NULL && o->exclude_n == NULL)
        return s_fail(s, GKV_EINVAL, "exclude is given without exclude_n");
    for (int e = 0; o->edge_w_feat != NULL && e < s->net; e++)
        if (o->edge_w_feat[e] != NULL)
            return s_fail(s, GKV_EINVAL, "opts->edge_w_feat[%d] names the "
                          "edge feature '%s': only graph servers resolve "
                          "feature names (gkv_client_sample_*); in-process, "
                          "pass the values as edge_w", e, o->edge_w_feat[e]);
    memset(R, 0, sizeof *R);
    R->dir = o->dir;
    R->flags = o->flags;
    R->seed = o->seed;
    R->ew = o->edge_w;
    R->ewlen = o->edge_w_len;
    R->ewlo = o->edge_w != NULL ? o->edge_w_lo : NULL;
    R->wp = s->wpv;
    R->fan = s->fanv;
    R->key = s->keyv;
    R->fast = s->fastv;
    R->wmode = s->wmodev;
    R->f = s->fv;
    R->nf = s->nfv;
    for (int e = 0; e < s->net; e++) {
        const struct sg_adj *sa = &s->sg->adj[2 * e + o->dir];
        int used = fan_used(fan, nfan, nlayers, e);
        s->nex[e] = 0;
        s->wmodev[e] = 0;
        if (used && !sa->set)
            return s_fail(s, GKV_EINVAL, "edge type %d is sampled but has "
                          "no %s adjacency set", e, dir_name(o->dir));
        if (o->edge_w != NULL && o->edge_w[e] != NULL) {
            if (o->edge_w_len[e] < 0)
                return s_fail(s, GKV_EINVAL, "edge_w_len[%d] = %lld is "
                              "negative", e, (long long)o->edge_w_len[e]);
            if (o->edge_w_lo != NULL && o->edge_w_lo[e] < 0)
                return s_fail(s, GKV_EINVAL, "edge_w_lo[%d] = %lld is "
                              "negative", e, (long long)o->edge_w_lo[e]);
            s->wmodev[e] = 2;
        } else if (s->wpv != NULL && s->wpv[e].off != NULL) {
            if (o->flags & GKV_SAMPLE_WEIGHTED)
                return s_fail(s, GKV_EINVAL, "GKV_SAMPLE_WEIGHTED and "
                              "weights by position for edge type %d are "
                              "both given; choose one source of weights", e);
            s->wmodev[e] = 3;
        } else if (o->flags & GKV_SAMPLE_WEIGHTED) {
            if (used && sa->a.w == NULL)
                return s_fail(s, GKV_EINVAL, "GKV_SAMPLE_WEIGHTED: edge type "
                              "%d has no weights in its %s adjacency", e,
                              dir_name(o->dir));
            s->wmodev[e] = 1;
        }
    }
    if (o->exclude != NULL)
        for (int e = 0; e < s->net; e++) {
            gkv_err rc;
            if (o->exclude[e] == NULL || o->exclude_n[e] == 0)
                continue;
            if ((rc = graph__ex_add(s, e, o->exclude[e], o->exclude_n[e],
                                    "opts->exclude")) != GKV_OK)
                return rc;
        }
    return GKV_OK;
}

/* Fanouts, keys and fast-path flags of one hop. */
void
graph__hop_set(gkv_sampler *s, const int *fan, int nfan, int row, int layer)
{
    struct run *R = &s->R;
    uint64_t kl = absorb(absorb(GKV_GEN_DOM_SAMPLE, R->seed), (uint64_t)layer);

    for (int e = 0; e < s->net; e++) {
        int k = fan[row * nfan + (nfan == 1 ? 0 : e)];
        s->fanv[e] = k;
        s->keyv[e] = absorb(kl, (uint64_t)e);
        s->fastv[e] = s->wmodev[e] == 0 && s->nex[e] == 0 &&
                      !(R->flags & GKV_SAMPLE_REPLACE) && k >= 1 &&
                      k <= FLOYD_SMALL;
    }
}

gkv_err
graph__markers_alloc(gkv_sampler *s)
{
    for (int t = 0; t < s->nnt; t++) {
        int64_t n = s->sg->nn[t];
        if (s->mk[t] != NULL)
            continue;
        if ((s->mk[t] = graph__huge_alloc((size_t)n * sizeof *s->mk[t],
                                          &s->mkraw[t])) == NULL)
            return s_fail(s, GKV_ENOMEM, "out of memory for the relabel "
                          "markers of node type %d (%lld nodes)", t,
                          (long long)n);
        memset((void *)s->mk[t], 0, (size_t)n * sizeof *s->mk[t]);
    }
    return GKV_OK;
}

gkv_err
graph__lay_reserve(gkv_sampler *s, int nlayers)
{
    struct blay *nl;

    if (nlayers <= s->nlay)
        return GKV_OK;
    if ((nl = gkv__realloc(s->lay, (size_t)nlayers * sizeof *nl)) == NULL)
        return s_fail(s, GKV_ENOMEM, "out of memory for %d blocks", nlayers);
    s->lay = nl;
    while (s->nlay < nlayers) {
        struct blay *L = &s->lay[s->nlay];
        memset(L, 0, sizeof *L);
        L->ids = gkv__calloc((size_t)s->nnt, sizeof *L->ids);
        L->idcap = gkv__calloc((size_t)s->nnt, sizeof *L->idcap);
        L->nodes = gkv__calloc((size_t)s->nnt, sizeof *L->nodes);
        L->ea = gkv__calloc((size_t)s->net + 1, sizeof *L->ea);
        L->edges = gkv__calloc((size_t)s->net + 1, sizeof *L->edges);
        if (L->ids == NULL || L->idcap == NULL || L->nodes == NULL ||
            L->ea == NULL || L->edges == NULL) {
            blay_free(s, L);
            return s_fail(s, GKV_ENOMEM, "out of memory for %d blocks",
                          nlayers);
        }
        s->nlay++;
    }
    return GKV_OK;
}

/* ---- the calls ---------------------------------------------------------- */

gkv_err
graph__seeds_check(gkv_sampler *s, const int64_t *const *seeds,
                   const size_t *nseeds)
{
    if (seeds == NULL || nseeds == NULL)
        return s_fail(s, GKV_EINVAL, "seeds or nseeds is NULL");
    for (int t = 0; t < s->nnt; t++) {
        int64_t nn = s->sg->nn[t];
        if (nseeds[t] > 0 && seeds[t] == NULL)
            return s_fail(s, GKV_EINVAL, "seeds[%d] is NULL with nseeds[%d] "
                          "= %zu", t, t, nseeds[t]);
        for (size_t i = 0; i < nseeds[t]; i++)
            if ((uint64_t)seeds[t][i] >= (uint64_t)nn)
                return s_fail(s, GKV_ERANGE, "seeds[%d][%zu] = %lld is not "
                              "a node of type %d (%lld nodes)", t, i,
                              (long long)seeds[t][i], t, (long long)nn);
    }
    return GKV_OK;
}

int64_t
gkv_sample_weights_from(const void *src, gkv_dtype dt, size_t n, float *dst)
{
    int64_t bad = -1;

    for (size_t i = 0; i < n; i++) {
        const unsigned char *b = (const unsigned char *)src;
        float w;
        switch (dt) {
        case GKV_F32: { float v; memcpy(&v, b + 4 * i, 4); w = v; break; }
        case GKV_F64: { double v; memcpy(&v, b + 8 * i, 8); w = (float)v; break; }
        case GKV_F16: { uint16_t v; memcpy(&v, b + 2 * i, 2); w = gkv_f16_to_f32(v); break; }
        case GKV_BF16: { uint16_t v; memcpy(&v, b + 2 * i, 2); w = gkv_bf16_to_f32(v); break; }
        case GKV_I8: w = (float)(int8_t)b[i]; break;
        case GKV_U8: w = (float)b[i]; break;
        case GKV_I32: { int32_t v; memcpy(&v, b + 4 * i, 4); w = (float)v; break; }
        case GKV_I64: { int64_t v; memcpy(&v, b + 8 * i, 8); w = (float)v; break; }
        default: w = NAN; break;
        }
        dst[i] = w;
        if (bad < 0 && (!(w >= 0.0f) || isinf(w)))
            bad = (int64_t)i;
    }
    return bad;
}
