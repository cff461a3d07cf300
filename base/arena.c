/* arena.c - bump-allocated memory given back all at once (base.h). */
#include <stdint.h>
#include "base/base.h"

void *
gkv__arena_alloc(gkv__arena *a, size_t bytes, size_t min_chunk)
{
    struct gkv__achunk *c = a->nar > 0 ? &a->ar[a->nar - 1] : NULL;
    size_t need = (bytes + 15) & ~(size_t)15;

    if (need == 0)
        need = 16;
    if (c == NULL || c->cap - c->used < need) {
        size_t cap = need < min_chunk ? min_chunk : need;

        if (c != NULL && cap < 2 * c->cap)
            cap = 2 * c->cap;
        if (a->nar == a->capar) {
            size_t nc = a->capar ? 2 * a->capar : 8;
            struct gkv__achunk *na =
                (struct gkv__achunk *)gkv__realloc(a->ar, nc * sizeof *na);
            if (na == NULL)
                return NULL;
            a->ar = na;
            a->capar = nc;
        }
        c = &a->ar[a->nar];
        if ((c->p = (unsigned char *)gkv__malloc(cap)) == NULL)
            return NULL;
        c->cap = cap;
        c->used = 0;
        a->nar++;
    }
    c->used += need;
    return c->p + c->used - need;
}

void
gkv__arena_reset(gkv__arena *a)
{
    size_t total = gkv__arena_size(a);

    for (size_t i = 0; i < a->nar; i++)
        a->ar[i].used = 0;
    if (a->nar > 1) {
        unsigned char *p;
        for (size_t i = 0; i < a->nar; i++)
            gkv__free(a->ar[i].p);
        a->nar = 0;
        if ((p = (unsigned char *)gkv__malloc(total)) != NULL) {
            a->ar[0].p = p;
            a->ar[0].cap = total;
            a->ar[0].used = 0;
            a->nar = 1;
        }
    }
}

void
gkv__arena_free(gkv__arena *a)
{
    for (size_t i = 0; i < a->nar; i++)
        gkv__free(a->ar[i].p);
    gkv__free(a->ar);
    a->ar = NULL;
    a->nar = a->capar = 0;
}

size_t
gkv__arena_size(const gkv__arena *a)
{
    size_t total = 0;

    for (size_t i = 0; i < a->nar; i++)
        total += a->ar[i].cap;
    return total;
}

int
gkv__arena_holds(const gkv__arena *a, const void *p)
{
    uintptr_t q = (uintptr_t)p;

    for (size_t i = 0; p != NULL && i < a->nar; i++) {
        uintptr_t b = (uintptr_t)a->ar[i].p;
        if (q >= b && q - b < a->ar[i].used)
            return 1;
    }
    return 0;
}
