/* loader.c - the mini-batch loader (gkv_loader.h): the object, its worker
 * threads and the queue that hands batches out in index order.
 *
 * The queue. An epoch has nbatches batches. Workers claim indices in order
 * (next_claim), but only below next_out + prefetch, next_out being the
 * index the caller asks for next: so at most 'prefetch' batches are being
 * made or waiting at any time, and batch i, once made, waits in slot
 * i % prefetch (the indices in flight are distinct modulo prefetch). A
 * worker copies the claimed batch's seeds under the lock, makes the batch
 * without it, and files it (or its error and message) only when the epoch
 * is still the one it claimed in (gen); otherwise it frees it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/gen.h"
#include "loader/loader_int.h"

/* Domains of the loader's generators ("GKVSHUFL", "GKVBATCH"). */
#define LOADER_DOM_SHUFFLE 0x474b56534855464cULL
#define LOADER_DOM_BATCH   0x474b564241544348ULL

uint64_t
gkv_loader_batch_seed(uint64_t sample_seed, uint64_t epoch, uint64_t index)
{
    uint64_t k = gkv_gen_absorb(LOADER_DOM_BATCH, sample_seed);

    k = gkv_gen_absorb(k, epoch);
    return gkv_gen_absorb(k, index);
}

void
gkv_loader_epoch_order(uint64_t shuffle_seed, uint64_t epoch, unsigned flags,
                       size_t n, size_t *perm)
{
    uint64_t k = gkv_gen_absorb(gkv_gen_absorb(LOADER_DOM_SHUFFLE,
                                               shuffle_seed), epoch);

    for (size_t i = 0; i < n; i++)
        perm[i] = i;
    if (flags & GKV_LOADER_NO_SHUFFLE)
        return;
    for (size_t i = n; i > 1; i--) {     /* Fisher-Yates, from the end */
        size_t j = (size_t)gkv_gen_below(gkv_gen_draw(k, i - 1), i);
        size_t t = perm[i - 1];

        perm[i - 1] = perm[j];
        perm[j] = t;
    }
}

static size_t
batches_of(const gkv_loader *l)
{
    size_t bs = l->o.batch_size;

    if (l->o.flags & GKV_LOADER_DROP_LAST)
        return l->nseeds / bs;
    return (l->nseeds + bs - 1) / bs;
}

/* Empties every slot (under mu), their batches into l->drop (released
 * by drop_release() once mu is let go: a pinned batch's release may wait
 * on the device, and must not stall the workers). */
static void
slots_drop(gkv_loader *l)
{
    for (int i = 0; i < l->prefetch; i++) {
        loader_slot *s = &l->slots[i];

        if (s->full && s->b != NULL)
            l->drop[l->ndrop++] = s->b;
        s->full = 0;
        s->b = NULL;
    }
}

/* Releases the batches slots_drop() took (not under mu). */
static void
drop_release(gkv_loader *l)
{
    for (int i = 0; i < l->ndrop; i++)
        gkv_batch_release(l->drop[i]);
    l->ndrop = 0;
}

/* Starts epoch e (under mu): its order, nothing claimed or waiting (the
 * batches waiting are left in l->drop: drop_release() after mu). */
static void
epoch_start(gkv_loader *l, uint64_t e)
{
    slots_drop(l);
    l->gen++;
    l->epoch = e;
    gkv_loader_epoch_order(l->o.shuffle_seed, e, l->o.flags, l->nseeds,
                           l->perm);
    l->nbatches = batches_of(l);
    l->next_claim = l->next_out = 0;
    pthread_cond_broadcast(&l->work);
}

static int
claimable(const gkv_loader *l)
{
    return l->next_claim < l->nbatches &&
           l->next_claim < l->next_out + (size_t)l->prefetch;
}

static void *
worker_main(void *arg)
{
    loader_worker *w = arg;
    gkv_loader *l = w->l;
    size_t bs = l->o.batch_size;

    pthread_mutex_lock(&l->mu);
    for (;;) {
        uint64_t gen, epoch, index;
        size_t n, lo;
        gkv_batch *b = NULL;
        gkv_err rc;

        while (!l->stop && !claimable(l))
            pthread_cond_wait(&l->work, &l->mu);
        if (l->stop)
            break;
        gen = l->gen;
        epoch = l->epoch;
        index = l->next_claim++;
        lo = (size_t)index * bs;
        n = l->nseeds - lo < bs ? l->nseeds - lo : bs;
        for (size_t i = 0; i < n; i++)
            w->seeds[i] = l->seeds[l->perm[lo + i]];
        pthread_mutex_unlock(&l->mu);

        rc = loader__make(l, w, epoch, index, w->seeds, n, &b);

        pthread_mutex_lock(&l->mu);
        if (gen == l->gen && !l->stop) {
            loader_slot *s = &l->slots[index % (uint64_t)l->prefetch];

            s->full = 1;
            s->index = index;
            s->b = b;
            s->rc = rc;
            s->msg[0] = '\0';
            if (rc != GKV_OK)
                snprintf(s->msg, sizeof s->msg, "%s", gkv_errmsg());
            b = NULL;
            pthread_cond_broadcast(&l->ready);
        }
        if (b != NULL) {        /* made for an epoch that was dropped */
            pthread_mutex_unlock(&l->mu);
            gkv_batch_release(b);
            pthread_mutex_lock(&l->mu);
        }
    }
    pthread_mutex_unlock(&l->mu);
    /* the clone's leave here, in parallel with the other workers': a
     * server that died makes each wait up to the client's timeout */
    if (w->c != NULL) {
        (void)gkv_client_close(w->c);
        w->c = NULL;
    }
    return NULL;
}

void
gkv_loader_free(gkv_loader *l)
{
    if (l == NULL)
        return;
    if (l->mu_init) {
        pthread_mutex_lock(&l->mu);
        l->stop = 1;
        pthread_cond_broadcast(&l->work);
        pthread_mutex_unlock(&l->mu);
    }
    for (int i = 0; l->w != NULL && i < l->nworkers; i++)
        if (l->w[i].started)
            pthread_join(l->w[i].th, NULL);
    if (l->slots != NULL && l->drop != NULL) {
        slots_drop(l);
        drop_release(l);
    }
    for (int i = 0; l->w != NULL && i < l->nworkers; i++) {
        gkv_sampler_free(l->w[i].smp);
        if (l->w[i].c != NULL)
            (void)gkv_client_close(l->w[i].c);
        gkv__free(l->w[i].seeds);
    }
    if (l->mu_init) {
        pthread_mutex_destroy(&l->mu);
        pthread_cond_destroy(&l->work);
        pthread_cond_destroy(&l->ready);
    }
    gkv_sgraph_free(l->own_sg);
    for (int f = 0; l->feats != NULL && f < l->o.nfeats; f++)
        gkv__free(l->feats[f].name);
    for (int f = 0; l->efeats != NULL && f < l->o.nefeats; f++)
        gkv__free(l->efeats[f].name);
    gkv__free(l->label.name);
    for (int e = 0; l->wfeat != NULL && e < l->num_etypes; e++) {
        gkv__free(l->wfeat[e]);
        gkv__free(l->ew != NULL ? l->ew[e] : NULL);
    }
    gkv__free(l->wfeat);
    gkv__free(l->ew);
    gkv__free(l->ewlen);
    gkv__free(l->feats);
    gkv__free(l->efeats);
    gkv__free(l->w);
    gkv__free(l->slots);
    gkv__free(l->drop);
    gkv__free(l->perm);
    gkv__free(l->seeds);
    gkv__free(l->fanouts);
    gkv__free(l->nnodes);
    gkv__free(l->nedges);
    gkv__free(l);
}

/* Each worker's sampler or client clone, and its seed buffer. */
static gkv_err
workers_make(gkv_loader *l)
{
    gkv_err rc;

    if ((l->w = gkv__calloc((size_t)l->nworkers, sizeof *l->w)) == NULL)
        return gkv__fail(NULL, GKV_ENOMEM, "loader: out of memory");
    for (int i = 0; i < l->nworkers; i++) {
        loader_worker *w = &l->w[i];

        w->l = l;
        if ((w->seeds = gkv__malloc(l->o.batch_size * sizeof *w->seeds))
            == NULL)
            return gkv__fail(NULL, GKV_ENOMEM, "loader: out of memory");
        if (l->where == GKV_LOADER_LOCAL)
            rc = gkv_sampler_new(&w->smp, l->sg, l->o.sampler_threads);
        else
            rc = gkv_client_clone(l->client, &w->c);
        if (rc != GKV_OK)
            return gkv__fail(NULL, rc, "loader: worker %d: %s", i,
                             gkv_errmsg());
    }
    return GKV_OK;
}

gkv_err
gkv_loader_new(gkv_loader **out, const gkv_loader_opts *o)
{
    gkv_loader *l = NULL;
    gkv_err rc;

    gkv__clear(NULL);
    if (out == NULL || o == NULL)
        return gkv__fail(NULL, GKV_EINVAL, "gkv_loader_new: NULL %s",
                         out == NULL ? "out" : "opts");
    *out = NULL;
    if ((l = gkv__calloc(1, sizeof *l)) == NULL)
        return gkv__fail(NULL, GKV_ENOMEM, "loader: out of memory");
    if ((rc = loader__check(l, o)) != GKV_OK)
        goto out;
    l->perm = gkv__malloc((l->nseeds + 1) * sizeof *l->perm);
    l->slots = gkv__calloc((size_t)l->prefetch, sizeof *l->slots);
    l->drop = gkv__calloc((size_t)l->prefetch, sizeof *l->drop);
    if (l->perm == NULL || l->slots == NULL || l->drop == NULL) {
        rc = gkv__fail(NULL, GKV_ENOMEM, "loader: out of memory");
        goto out;
    }
    if ((rc = workers_make(l)) != GKV_OK)
        goto out;
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->work, NULL);
    pthread_cond_init(&l->ready, NULL);
    l->mu_init = 1;
    pthread_mutex_lock(&l->mu);
    epoch_start(l, 0);
    pthread_mutex_unlock(&l->mu);
    for (int i = 0; i < l->nworkers; i++) {
        if (pthread_create(&l->w[i].th, NULL, worker_main, &l->w[i]) != 0) {
            rc = gkv__fail(NULL, GKV_EIO, "loader: worker thread %d could "
                           "not be started", i);
            goto out;
        }
        l->w[i].started = 1;
    }
    *out = l;
    return GKV_OK;
out:
    if (l != NULL) {   /* closing clients clears the message: keep it */
        char msg[GKV__MSG_MAX];

        snprintf(msg, sizeof msg, "%s", gkv_errmsg());
        gkv_loader_free(l);
        gkv__fail(NULL, rc, "%s", msg);
    }
    return rc;
}

gkv_err
gkv_loader_next(gkv_loader *l, gkv_batch **out)
{
    loader_slot *s;
    gkv_err rc;
    uint64_t index;

    gkv__clear(l);
    if (out == NULL)
        return gkv__fail(l, GKV_EINVAL, "gkv_loader_next: NULL out");
    *out = NULL;
    if (l == NULL)
        return gkv__fail(l, GKV_EINVAL, "gkv_loader_next: NULL loader");
    pthread_mutex_lock(&l->mu);
    if (l->next_out >= l->nbatches) {
        pthread_mutex_unlock(&l->mu);
        return GKV_OK;
    }
    index = l->next_out;
    s = &l->slots[index % (uint64_t)l->prefetch];
    while (!(s->full && s->index == index))
        pthread_cond_wait(&l->ready, &l->mu);
    rc = s->rc;
    *out = s->b;
    if (rc != GKV_OK)
        gkv__fail(l, rc, "batch %llu of epoch %llu: %s",
                  (unsigned long long)index, (unsigned long long)l->epoch,
                  s->msg);
    s->full = 0;
    s->b = NULL;
    l->next_out++;
    pthread_cond_broadcast(&l->work);
    pthread_mutex_unlock(&l->mu);
    return rc;
}

gkv_err
gkv_loader_epoch(gkv_loader *l, uint64_t epoch)
{
    gkv__clear(l);
    if (l == NULL)
        return gkv__fail(l, GKV_EINVAL, "gkv_loader_epoch: NULL loader");
    pthread_mutex_lock(&l->mu);
    epoch_start(l, epoch);
    pthread_mutex_unlock(&l->mu);
    drop_release(l);
    return GKV_OK;
}

size_t
gkv_loader_num_batches(const gkv_loader *l)
{
    return l == NULL ? 0 : batches_of(l);
}

const int64_t *
gkv_loader_seeds(const gkv_loader *l, size_t *n)
{
    if (n != NULL)
        *n = l == NULL ? 0 : l->nseeds;
    return l == NULL ? NULL : l->seeds;
}
