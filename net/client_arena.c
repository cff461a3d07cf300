/* client_arena.c - the arena the results of the client's sampling calls
 * live in (until the next sampling call; c->mu held throughout), and the
 * copy of a call's inputs that point into it. */
#include <stdint.h>
#include <string.h>
#include "base/base.h"
#include "net/client_int.h"

/* ---- the arena ---------------------------------------------------------- */

/* The results of sampling calls live in an arena: chunks bumped from the
 * front, emptied (not freed) by the next call, and merged into one chunk
 * of their total size, so a steady stream of calls allocates nothing (and
 * touches no fresh pages). */
void
net__arena_reset(gkv_client *c)
{
    gkv__arena_reset(&c->ar);
}

void
net__sample_free(gkv_client *c)
{
    gkv__arena_free(&c->ar);
    gkv__free(c->eb);
    c->eb = NULL;
    c->ebcap = 0;
    for (int t = 0; c->mk != NULL && t < c->nmk; t++)
        gkv__free(c->mk[t]);
    gkv__free(c->mk);
    c->mk = NULL;
    c->nmk = 0;
}

/* Whether p points into what the arena holds now: the results of the
 * last sampling call, which the next one's net__arena_reset overwrites. */
static int
arena_holds(const gkv_client *c, const void *p)
{
    return gkv__arena_holds(&c->ar, p);
}

/* Memory that lives until the next sampling call, 16-aligned. */
void *
net__arena_alloc(gkv_client *c, size_t bytes)
{
    return gkv__arena_alloc(&c->ar, bytes, 1u << 20);
}

/* The inputs of a sampling call (checked) that point into the arena, the
 * previous call's results fed back (a seed list from out[e].src or a
 * block's node IDs, exclusions from out[e].eid), copied into *own (one
 * gkv__malloc'd block, NULL when nothing needed copying) before the call
 * empties the arena: *seeds and *opts then point at the copies (*opts at
 * *obuf). Cheap: a look at each array's first address. */
gkv_err
net__inputs_own(gkv_client *c, const int64_t *const **seeds,
                const size_t *nseeds, const gkv_sample_opts **opts,
                gkv_sample_opts *obuf, void **own)
{
    int nnt = gkv_pbook_num_ntypes(c->book), net_ = gkv_pbook_num_etypes(c->book);
    const gkv_sample_opts *o = *opts;
    size_t ids = 0, at = 0;
    int xs = 0, xe = 0;
    const int64_t **sv, **xv;
    int64_t *d;
    char *blk;

    *own = NULL;
    for (int t = 0; t < nnt; t++)
        if (nseeds[t] > 0 && arena_holds(c, (*seeds)[t])) {
            ids += nseeds[t];
            xs = 1;
        }
    for (int e = 0; o != NULL && e < net_; e++)
        if (net__ex_count(o, e) > 0 && arena_holds(c, o->exclude[e])) {
            ids += net__ex_count(o, e);
            xe = 1;
        }
    if (!xs && !xe)
        return GKV_OK;
    blk = gkv__malloc((size_t)(nnt + net_) * sizeof *sv + ids * sizeof *d);
    if (blk == NULL)
        return net__fail(GKV_ENOMEM, "out of memory for a copy of %zu seeds "
                         "and excluded edges from the last call's results",
                         ids);
    sv = (const int64_t **)blk;
    xv = sv + nnt;
    d = (int64_t *)(xv + net_);
    for (int t = 0; t < nnt; t++) {
        sv[t] = (*seeds)[t];
        if (nseeds[t] > 0 && arena_holds(c, sv[t])) {
            memcpy(d + at, sv[t], nseeds[t] * sizeof *d);
            sv[t] = d + at;
            at += nseeds[t];
        }
    }
    for (int e = 0; xe && e < net_; e++) {
        size_t k = net__ex_count(o, e);
        xv[e] = o->exclude != NULL ? o->exclude[e] : NULL;
        if (k > 0 && arena_holds(c, xv[e])) {
            memcpy(d + at, xv[e], k * sizeof *d);
            xv[e] = d + at;
            at += k;
        }
    }
    if (xs)
        *seeds = sv;
    if (xe) {
        *obuf = *o;
        obuf->exclude = xv;
        *opts = obuf;
    }
    *own = blk;
    return GKV_OK;
}
