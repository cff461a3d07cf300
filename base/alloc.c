/* alloc.c - allocation with fault injection: a countdown to the allocation
 * that fails, and a count of live blocks (SQLite's test_malloc habit). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "base/base.h"

/* Countdown to the allocation that fails (-1: none) and live blocks. */
static atomic_long alloc_countdown = -1;
static atomic_long alloc_live;

void gkv__alloc_fail_at(long n) { atomic_store(&alloc_countdown, n); }
long gkv__alloc_live(void) { return atomic_load(&alloc_live); }

static int
alloc_should_fail(void)
{
    long c = atomic_load(&alloc_countdown);

    while (c >= 0) {
        if (atomic_compare_exchange_weak(&alloc_countdown, &c, c - 1))
            return c == 0;
    }
    return 0;
}

void *
gkv__malloc(size_t n)
{
    void *p;

    if (alloc_should_fail())
        return NULL;
    if ((p = malloc(n ? n : 1)) != NULL)
        atomic_fetch_add(&alloc_live, 1);
    return p;
}

void *
gkv__calloc(size_t n, size_t size)
{
    void *p;

    if (alloc_should_fail())
        return NULL;
    if ((p = calloc(n ? n : 1, size ? size : 1)) != NULL)
        atomic_fetch_add(&alloc_live, 1);
    return p;
}

void *
gkv__realloc(void *old, size_t n)
{
    if (old == NULL)
        return gkv__malloc(n);
    if (alloc_should_fail())
        return NULL;
    return realloc(old, n ? n : 1);   /* live count unchanged on success */
}

void
gkv__free(void *p)
{
    if (p != NULL) {
        atomic_fetch_sub(&alloc_live, 1);
        free(p);
    }
}

char *
gkv__strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = gkv__malloc(n);

    if (p != NULL)
        memcpy(p, s, n);
    return p;
}
