/* loader_int.h - what the loader's files share (private, not installed).
 *
 *   loader.c        the object: gkv_loader_new/free, the worker threads and
 *                   the queue of batches, the epoch order and batch seeds
 *   loader_check.c  everything gkv_loader_new checks and resolves: the
 *                   source of each mode, counts, seeds (or the mask's
 *                   split), fanouts, the tensors and their row sizes
 *   loader_make.c   making one batch in each mode, and the batch's memory
 *
 * Locking: l->mu guards the queue fields (the block marked "queue"); the
 * rest of the loader is written only by gkv_loader_new before the workers
 * start and read-only afterwards. A worker owns its loader_worker. */
#ifndef LOADER_INT_H
#define LOADER_INT_H

#include <pthread.h>
#include "base/base.h"
#include "loader/gkv_loader.h"

#define LOADER_WORKERS_MAX  64     /* opts.workers */
#define LOADER_PREFETCH_MAX 1024   /* opts.prefetch */
#define LOADER_SERVER_LAYERS 64    /* opts.nlayers in SERVER mode (what
                                    * gkv_client_sample_batch takes) */

/* A tensor a batch collects, resolved at gkv_loader_new. */
typedef struct loader_tensor {
    int    type;                   /* node type (feats, label), edge type */
    char  *name;                   /* owned copy */
    size_t row_bytes;
} loader_tensor;

/* One worker thread and what it makes batches with. */
typedef struct loader_worker {
    struct gkv_loader *l;
    pthread_t   th;
    int         started;
    gkv_sampler *smp;              /* LOCAL */
    gkv_client  *c;                /* CLIENT, SERVER: a clone */
    int64_t     *seeds;            /* the claimed batch's seeds */
} loader_worker;

/* A batch made (or failed) and not yet handed out: slot index % prefetch. */
typedef struct loader_slot {
    int        full;
    uint64_t   index;
    gkv_batch *b;                  /* NULL when rc != GKV_OK */
    gkv_err    rc;
    char       msg[GKV__MSG_MAX];
} loader_slot;

struct gkv_loader {
    gkv_loader_opts o;             /* pointers below replace its arrays */
    int          where, num_ntypes, num_etypes;
    int64_t     *nnodes;           /* [num_ntypes] */
    int64_t     *nedges;           /* [num_etypes]; -1: unknown (LOCAL sg) */
    const gkv_sgraph *sg;          /* LOCAL */
    gkv_sgraph  *own_sg;           /* LOCAL with a part: made here */
    gkv_store   *store;            /* LOCAL: rows read here (or NULL) */
    gkv_client  *client;           /* CLIENT, SERVER: borrowed */
    int          pinned;
    int64_t     *seeds;            /* nseeds, owned */
    size_t       nseeds;
    int         *fanouts;          /* nlayers x nfan, owned */
    loader_tensor *feats, *efeats; /* o.nfeats, o.nefeats */
    loader_tensor label;           /* name NULL: none */
    char       **wfeat;            /* [num_etypes] copies of
                                    * o.edge_w_feat, or NULL: none */
    float      **ew;               /* LOCAL with wfeat: [num_etypes] the
                                    * features' values by edge ID, or NULL */
    int64_t     *ewlen;            /* [num_etypes] their lengths */
    int          prefetch, nworkers;
    loader_worker *w;              /* [nworkers] */

    /* queue (under mu) */
    pthread_mutex_t mu;
    pthread_cond_t  work;          /* workers: a batch may be claimed */
    pthread_cond_t  ready;         /* the caller: a slot was filled */
    int          mu_init;
    int          stop;
    uint64_t     gen;              /* bumped by every epoch start */
    uint64_t     epoch;
    size_t      *perm;             /* the epoch's order of seeds[] */
    size_t       nbatches, next_claim, next_out;
    loader_slot *slots;            /* [prefetch] */
    gkv_batch  **drop;             /* [prefetch]: taken from the slots,
                                    * released after mu (ndrop of them) */
    int          ndrop;
};

/* Page-locked host memory, from the CUDA runtime when one is linked in:
 * weak, so that a build linking the library without it (the emulated-GPU
 * tests) links, and GKV_LOADER_PINNED is then GKV_ENOTSUP. */
#ifdef GKV_HAVE_CUDA
extern int cudaHostAlloc(void **p, size_t n, unsigned flags)
    __attribute__((weak));
extern int cudaFreeHost(void *p) __attribute__((weak));
#endif

/* loader_check.c: checks o and fills l's resolved fields (everything above
 * the queue but w). On error the message names what was wrong; l holds
 * what was made so far (freed by the caller). */
gkv_err loader__check(struct gkv_loader *l, const gkv_loader_opts *o);

/* loader_make.c: makes batch 'index' of 'epoch' from seeds[0 .. n) with
 * worker w's sampler or client. On GKV_OK *out is a new batch; on error
 * *out is NULL and the thread's message says why. */
gkv_err loader__make(struct gkv_loader *l, loader_worker *w, uint64_t epoch,
                     uint64_t index, const int64_t *seeds, size_t n,
                     gkv_batch **out);

#endif /* LOADER_INT_H */
