/* sample_int.h - private declarations shared by the sampler's files:
 * sgraph.c (the sampling view of a graph), sample.c (samplers, their
 * worker pool, options and errors), sample_hop.c (one hop on one thread),
 * sample_par.c (a hop on several threads and its deterministic relabel),
 * blocks.c (multi-layer blocks) and edge_batch.c (edge mini-batches).
 * Not installed; no file outside those includes it (its short macro names
 * would clash). See sample_hop.c for how a hop runs. */
#ifndef SAMPLE_INT_H
#define SAMPLE_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "base/gen.h"
#include "graph/graph_int.h"
#include "graph/gkv_part.h"
#include "graph/gkv_sample.h"

#define G64         GKV_GEN_G
#define DOM_NEG     0x474b564e45474154ULL   /* "GKVNEGAT" */

#define SUB          32       /* nodes per P1/P2/P3 sub-block */
#define PF           8        /* indptr prefetch distance, nodes */
#define FLOYD_SMALL  64       /* above: Floyd checks picks in a hash set */
#define PAR_MIN      128      /* frontier nodes below which one thread runs */
#define MSG_MAX      512      /* a worker's message (tbuf) */

#define KEYBIT       (UINT64_C(1) << 62)
#define KEY_CH_BITS  22
#define KEY_IX_BITS  40
#define KEY(ci, j)   (KEYBIT | ((uint64_t)(ci) << KEY_IX_BITS) | (uint64_t)(j))
#define FIRSTBIT     (UINT64_C(1) << 63)  /* rank: first appearance */
#define KEY_CH(k)    ((size_t)((k) >> KEY_IX_BITS) & \
                      (((size_t)1 << KEY_CH_BITS) - 1))
#define KEY_IX(k)    ((size_t)((k) & ((UINT64_C(1) << KEY_IX_BITS) - 1)))

typedef _Atomic uint64_t amark;

/* ---- the generator: M, A, r_t, below and unit of gkv_sample.h are
 * base/gen.h's, the one copy that the GPU sampler runs too; short names
 * here keep the pick loops readable. ----------------------------------- */

#define mix(z)        gkv_gen_mix(z)
#define absorb(x, v)  gkv_gen_absorb((x), (v))
#define draw(bv, t)   gkv_gen_draw((bv), (t))
#define below(r, n)   gkv_gen_below((r), (n))
#define unit(r)       gkv_gen_unit(r)

#define LOAD(p)      atomic_load_explicit((p), memory_order_relaxed)
#define STORE(p, v)  atomic_store_explicit((p), (v), memory_order_relaxed)

/* A spinning thread's pause. */
static inline void
cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Edge ID -> position: a dense table over [lo, lo + span) or sorted pairs. */
struct sg_inv {
    int64_t  lo, span;
    int64_t *pos;           /* dense: pos[eid - lo], -1 where absent */
    int64_t *keys, *vals;   /* sparse: n pairs sorted by key */
    size_t   n;
};

/* An adjacency. Set with gkv_sgraph_set_adj: a's arrays, borrowed. Built
 * by gkv_sgraph_from_graph: owned, and the neighbour and edge ID of
 * position p sit side by side in pk[2p], pk[2p + 1] (one cache line per
 * random pick instead of two); a.indices and a.eids are then NULL until
 * gkv_sgraph_adj asks for them (soa). */
struct sg_adj {
    int      set;
    gkv_adj  a;
    int64_t  ncols, nnz;
    const int64_t *pk;               /* packed (neighbour, edge ID) or NULL */
    _Atomic(struct sg_inv *) inv;    /* built on first need, under sg_mu */
    _Atomic int soa;                 /* pk: a.indices/a.eids made */
    void    *raw[5];                 /* owned blocks: indptr, pk, w, and
                                      * the indices and eids soa made */
};

static inline int64_t
at_idx(const struct sg_adj *sa, int64_t p)
{
    return sa->pk != NULL ? sa->pk[2 * p] : sa->a.indices[p];
}

static inline int
has_eids(const struct sg_adj *sa)
{
    return sa->pk != NULL || sa->a.eids != NULL;
}

static inline int64_t
at_eid(const struct sg_adj *sa, int64_t p)
{
    return sa->pk != NULL ? sa->pk[2 * p + 1]
           : sa->a.eids != NULL ? sa->a.eids[p] : sa->a.eid_lo + p;
}

struct gkv_sgraph {
    int            nnt, net;
    int64_t       *nn;               /* nodes per node type */
    int           *snt, *dnt;        /* per etype */
    struct sg_adj *adj;              /* [etype * 2 + dir] */
    pthread_mutex_t mu;              /* builds edge-ID indexes */
    const gkv_part *part;            /* a partition's sgraph: its partition */
};

static inline int
col_ntype(const gkv_sgraph *sg, int et, int dir)
{
    return dir == GKV_DIR_IN ? sg->dnt[et] : sg->snt[et];
}

static inline int
nbr_ntype(const gkv_sgraph *sg, int et, int dir)
{
    return dir == GKV_DIR_IN ? sg->snt[et] : sg->dnt[et];
}

static inline const char *
dir_name(int dir)
{
    return dir == GKV_DIR_IN ? "in-edge (CSC)" : "out-edge (CSR)";
}

/* Position of edge 'eid' in sa, or -1. */
static inline int64_t
eid_pos(const struct sg_adj *sa, const struct sg_inv *iv, int64_t eid)
{
    /* Subtract only once eid >= the base (>= 0), so that a client's
     * eid near INT64_MIN cannot overflow. */
    if (!has_eids(sa))
        return eid >= sa->a.eid_lo && eid - sa->a.eid_lo < sa->nnz ?
               eid - sa->a.eid_lo : -1;
    if (iv->pos != NULL)
        return eid >= iv->lo && eid - iv->lo < iv->span ?
               iv->pos[eid - iv->lo] : -1;
    {
        size_t lo = 0, hi = iv->n;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (iv->keys[mid] < eid)
                lo = mid + 1;
            else
                hi = mid;
        }
        return lo < iv->n && iv->keys[lo] == eid ? iv->vals[lo] : -1;
    }
}

/* ---- the sampler: types ------------------------------------------------ */

struct tbuf {                 /* one thread's scratch */
    int64_t *pos;             /* P1: picks of one sub-block, as positions */
    size_t   pos_cap;
    int64_t *spos[2];         /* the two P1 slots of the pipeline */
    size_t   scap[2];
    int64_t *u, *e;           /* P2: neighbour and edge ID of each pick */
    int64_t *rank;            /* parallel: after A, 1 where the pick's key
                               * went in; after C, the indices of the
                               * chunk's first appearances, in order */
    size_t   ue_cap, ue_len;
    int64_t *cnt;             /* picks per frontier node */
    size_t   cnt_cap, cnt_len;
    int64_t *allow;           /* general columns: allowed positions */
    double  *S;               /* weighted: prefix sums */
    float   *wv;              /* weighted: weights of allowed positions */
    int64_t *pick;            /* general: chosen indices */
    size_t   w_cap;
    int64_t *hset;            /* chosen-index hash set (large k) */
    size_t   hset_cap;
    uint64_t *ovr;            /* parallel relabel: (key, new value) pairs,
                               * one per key this thread took off a
                               * marker */
    size_t   ovr_len, ovr_cap;
    long     err_ci;          /* chunk of the first error, or -1 */
    gkv_err  err;
    char     msg[MSG_MAX];
    char     pad[64];         /* keeps threads' hot fields apart */
};

struct chunk {
    int     et;
    int64_t lo, hi;           /* frontier indices */
    int     tid;
    size_t  uoff, coff;       /* into tb[tid].u / .cnt */
    size_t  n;                /* picks */
    int     pre;              /* relabel: 1 when the caller labelled it
                               * as part of the prefix */
    size_t  nnew;             /* relabel: its first appearances */
    int64_t base;             /* relabel: local ID of the first of them */
    size_t  eoff;             /* offset in the etype's output */
    _Atomic int ready;        /* ordered relabel: picked, so it can be
                               * labelled */
};

struct cbuf {                 /* ordered relabel: one chunk's picks, the
                               * u, e, rank and cnt of the tbuf that picks
                               * or labels it meanwhile (sample_par.c) */
    int64_t *u, *e, *rank;
    size_t   ue_cap, ue_len;
    int64_t *cnt;
    size_t   cnt_cap, cnt_len;
};

struct earr {
    int64_t *s, *d, *e;
    size_t   cap;
};

struct blay {                 /* one block's storage */
    int64_t         **ids;    /* [nnt] */
    size_t           *idcap;  /* [nnt] */
    gkv_block_nodes  *nodes;  /* [nnt] */
    struct earr      *ea;     /* [net] */
    gkv_sample_edges *edges;  /* [net] */
};

struct run {                  /* the current call and hop */
    int       dir;
    unsigned  flags;
    uint64_t  seed;
    int       relabel;        /* 1: blocks; 0: single hop, global IDs */
    int       last;           /* relabel: the batch's last hop (markers
                               * need not hold the local IDs after it) */
    int      *fan;            /* [net] this hop's fanouts */
    uint64_t *key;            /* [net] this hop's generator keys */
    int      *fast;           /* [net] 1: plain uniform Floyd path */
    int      *wmode;          /* [net] 0 uniform, 1 adj w, 2 edge_w,
                               * 3 weights by position (graph__wpos) */
    const float *const *ew;
    const int64_t *ewlen;
    const int64_t *ewlo;      /* NULL: every edge_w array starts at 0 */
    const graph__wpos *wp;    /* wmode 3: [net] */
    const int64_t **f;        /* [nnt] frontier */
    size_t   *nf;             /* [nnt] */
    struct blay *L;           /* relabel: the block being built */
    struct earr *out;         /* single hop: per etype */
    size_t   *olen;           /* single hop: per etype */
};

/* Workers join a job only while it is open: the caller closes it once it
 * has run out of chunks itself and then waits only for the workers inside,
 * so a worker the OS has descheduled never holds a batch up. Every phase
 * takes its work in chunks from a shared counter, so who does what cannot
 * change the result. */
struct pool {
    pthread_t       th[GKV_SAMPLE_THREADS_MAX];
    int             started;
    _Atomic uint64_t job;     /* generation << 1 | 1 when closed */
    _Atomic int     active, sleepers, stop;
    void          (*fn)(gkv_sampler *, int);
    pthread_mutex_t mu;
    pthread_cond_t  cv;
    int             sync_ok;  /* mu and cv initialised */
};

struct warg {
    gkv_sampler *s;
    int          tid;
};

struct gkv_sampler {
    const gkv_sgraph *sg;
    int          nt;                  /* threads, the caller included */
    int          nnt, net;
    struct pool  pool;
    struct warg  wa[GKV_SAMPLE_THREADS_MAX];
    struct tbuf *tb;                  /* [nt] */
    amark      **mk;                  /* [nnt]: local ID + 1, a key, or 0 */
    void       **mkraw;               /* [nnt]: the blocks mk live in */
    struct run   R;
    struct chunk *ch;
    size_t       nch, chcap;
    _Atomic size_t next;              /* next chunk to take */
    _Atomic uint64_t fb;              /* relabel: front | back << 32, the
                                       * chunks not yet taken */
    size_t       caller_max;          /* relabel: most chunks the caller
                                       * takes in order (a test setting):
                                       * its prefix, or its picks */
    _Atomic long fail_ci;             /* lowest chunk with an error */
    struct cbuf *cb;                  /* ordered relabel: [chunk] */
    size_t       cbcap;
    _Atomic size_t lab;               /* ordered relabel: next chunk to
                                       * label */
    _Atomic int  tok;                 /* ordered relabel: 1 while a thread
                                       * labels */
    /* per etype */
    int         *fanv, *fastv, *wmodev;
    uint64_t    *keyv;
    int64_t    **ex;                  /* sorted excluded positions */
    size_t      *nex, *excap;
    struct earr *nea;                 /* single-hop results */
    size_t      *nlen;
    /* per node type */
    const int64_t **fv;
    size_t      *nfv;
    size_t      *ntot;                /* parallel relabel: nodes per type
                                       * at the hop's start */
    int64_t    **pid;                 /* [nnt] parallel relabel: the new
                                       * nodes labelled in order (the
                                       * prefix's, or an ordered hop's) */
    size_t      *pidcap;
    /* blocks */
    struct blay *lay;
    int          nlay;
    /* edge batches */
    int64_t     *pb[4];               /* pos_src, pos_dst, neg_src, neg_dst */
    size_t       pbcap[4];
    int64_t     *tmpv;                /* gathered excluded IDs */
    size_t       tmpcap;
    const graph__wpos *wpv;           /* graph__sample_hop: [net] */
    int64_t *const *cntv;             /* graph__sample_hop: [net] or NULL */
    /* Choosing between the workers and the caller alone
     * (graph__call_begin): the caller's share of a CPU during parallel
     * calls (moving average), this call's way, its start (wall and thread
     * CPU clocks), the call count */
    double       share_par, t0, c0;
    int          solo;
    int          always_par;          /* a test setting: never solo */
    unsigned     ncalls;
    char         ebmsg[MSG_MAX];   /* a graph__eb_* call's detail */
};

/* gkv__fail() about sampler s. */
static inline const void *s_about(const gkv_sampler *s) { return s; }
#define s_fail(s, rc, ...) gkv__fail(s_about(s), (rc), __VA_ARGS__)

/* A single hop's per-seed pick counts of frontier nodes [lo, hi) of edge
 * type et, for graph__sample_hop's caller. */
static inline void
counts_out(gkv_sampler *s, int et, int64_t lo, int64_t hi,
           const int64_t *cnt)
{
    if (s->cntv != NULL && s->cntv[et] != NULL)
        memcpy(s->cntv[et] + lo, cnt, (size_t)(hi - lo) * sizeof *cnt);
}

/* What P3 does with a sub-block's picks. */
enum { P3_NONE, P3_LABEL, P3_COPY, P3_KEYS, P3_PREFIX };

/* ---- shared between the sampler's files -------------------------------- */

/* sample.c: memory */

/* Grows the array whose pointer is at 'pp' (*cap elements of 'elem'
 * bytes) to hold 'need', at least doubling. The pointer is read and written
 * with memcpy, so any object pointer type may be passed. 0, or -1 when out
 * of memory (the array is then unchanged). Inline: the pick loops call it
 * per node. */
static inline int
graph__grow(void *pp, size_t *cap, size_t need, size_t elem)
{
    void *p, *q;
    size_t n;

    if (need <= *cap)
        return 0;
    n = *cap * 2 > need ? *cap * 2 : need;
    if (n < 64)
        n = 64;
    if (n > SIZE_MAX / elem)
        return -1;
    memcpy(&p, pp, sizeof p);
    if ((q = gkv__realloc(p, n * elem)) == NULL)
        return -1;
    memcpy(pp, &q, sizeof q);
    *cap = n;
    return 0;
}

/* Three arrays that share one capacity *cap, grown together to hold
 * 'need' entries; *cap is what all three hold. -1: out of memory (*cap
 * unchanged). */
int     graph__grow3(void *a, size_t ea, void *b, size_t eb, void *c,
                     size_t ec, size_t *cap, size_t need);

/* 'bytes' for an array read at random, on 2 MiB pages where the kernel
 * allows it; *raw gets the pointer to gkv__free (NULL with the result when
 * out of memory). */
void   *graph__huge_alloc(size_t bytes, void **raw);

/* a grows to hold 'need' (s, d, e together); -1 when out of memory. */
int     graph__earr_grow(struct earr *a, size_t need);

/* sample.c: errors, the worker pool and calls */

/* rc of a graph__eb_* call that wrote its detail to s->ebmsg: recorded as
 * s's message when it is an error. */
gkv_err graph__s_eb(gkv_sampler *s, gkv_err rc);

/* Records the first error of this thread (its lowest chunk) and lowers
 * the sampler's failing-chunk mark; returns rc. */
gkv_err graph__tb_fail(gkv_sampler *s, struct tbuf *tb, long ci, gkv_err rc,
                       const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Runs fn(s, tid) on the caller (tid 0) and on the workers that join
 * while there is work, and returns when all of them are done. */
void    graph__pool_run(gkv_sampler *s, void (*fn)(gkv_sampler *, int));

/* Start and end of every public sampling call: clears s's message, and
 * chooses between the workers and the caller alone (s->solo). */
void    graph__call_begin(gkv_sampler *s);
void    graph__call_end(gkv_sampler *s, gkv_err rc);

/* sample.c: checking a call and setting it up */

/* Checks fanouts fan[nfan] for nlayers hops; GKV_EINVAL with s's message. */
gkv_err graph__fan_check(gkv_sampler *s, const int *fan, int nfan,
                         int nlayers);

/* Checks the seed lists (one per node type); GKV_EINVAL / GKV_ERANGE
 * with s's message. */
gkv_err graph__seeds_check(gkv_sampler *s, const int64_t *const *seeds,
                           const size_t *nseeds);

/* Checks the options against the edge types sampled, and fills s->R's
 * direction, flags and weight modes and the exclusion lists from o. */
gkv_err graph__opts_prep(gkv_sampler *s, const gkv_sample_opts *o,
                         const int *fan, int nfan, int nlayers);

/* Appends the positions of the edges ids[0..n) of type e (those the
 * adjacency holds) to the exclusion list of e; 'what' names ids in a
 * message. */
gkv_err graph__ex_add(gkv_sampler *s, int e, const int64_t *ids, size_t n,
                      const char *what);

/* Sorts and dedups the exclusion lists (after the last graph__ex_add). */
void    graph__ex_finish(gkv_sampler *s);

/* Fanouts, keys and fast-path flags of one hop: row 'row' of fan, hop
 * 'layer' of the generator. */
void    graph__hop_set(gkv_sampler *s, const int *fan, int nfan, int row,
                       int layer);

/* The relabel markers (one per node of each type), made on first need;
 * GKV_ENOMEM. */
gkv_err graph__markers_alloc(gkv_sampler *s);

/* Room for nlayers blocks' storage in s->lay; GKV_ENOMEM. */
gkv_err graph__lay_reserve(gkv_sampler *s, int nlayers);

/* sgraph.c */

/* The edge-ID index of an adjacency with explicit eids, built once. */
gkv_err graph__inv_get(const gkv_sgraph *sg, const struct sg_adj *sac,
                       const struct sg_inv **out);

/* sample_hop.c */

/* Samples frontier nodes [lo, hi) of edge type et in sub-blocks of SUB,
 * software-pipelined so that every prefetch has a sub-block's time to
 * land: step j runs P1 of sub-block j, P2 of j - 1 and P3 of j - 2 (mode,
 * a P3_*). Counts and picks are appended to tb's buffers; 'cbase' is where
 * chunk ci's picks start there (P3_KEYS). */
gkv_err graph__pipe_range(gkv_sampler *s, struct tbuf *tb, long ci, int et,
                          int64_t lo, int64_t hi, int mode, size_t cbase);

/* Runs the hop described by s->R (fan, key, fast, f, nf, and L or out). */
gkv_err graph__hop_run(gkv_sampler *s);

/* Labels a chunk of an ordered parallel hop (edge type et, frontier nodes
 * [lo, hi)), whose picks tb's buffers hold from their start, as one
 * thread would after the chunks before it; new nodes go to s->pid. */
gkv_err graph__label_chunk(gkv_sampler *s, struct tbuf *tb, int et,
                           int64_t lo, int64_t hi);

/* sample_par.c */

/* The hop of s->R on the workers; 'total' frontier nodes. The result is
 * the one-thread result. */
gkv_err graph__hop_parallel(gkv_sampler *s, size_t total);

/* At most n chunks of each parallel relabelling hop taken by the caller
 * (default SIZE_MAX: as many as it takes): on two threads the chunks it
 * picks (past them it only labels the worker's), on more the chunks of
 * its in-order prefix (past them it keys the suffix as the workers do).
 * The result is the same for every n; tests set it so that both paths run
 * however the threads are scheduled. Not in gkv_sample.h: for tests,
 * which declare it themselves. */
void    graph__sample_caller_max(gkv_sampler *s, size_t n);

/* Every later call of s on its workers, whatever the caller's share of a
 * CPU (no adaptive threading): for tests, which declare it themselves. */
void    graph__sample_always_par(gkv_sampler *s);

/* Markers of the nodes in L's lists back to 0 (on the workers when many). */
void    graph__markers_reset(gkv_sampler *s, struct blay *L);

/* blocks.c */

/* The hops of a block sample. The seeds are in s->lay[nlayers - 1]'s lists
 * (num_dst = num_src) and labelled in the markers. Resets the markers. */
gkv_err graph__blocks_run(gkv_sampler *s, const int *fan, int nfan,
                          int nlayers, gkv_block *blocks);

#endif /* SAMPLE_INT_H */
