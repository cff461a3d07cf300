/* base.h - what every layer of gkv shares: allocation with fault
 * injection, the monotonic clock, and the per-thread error detail.
 *
 * The layers stack base <- kv <- graph <- net <- loader <- gpu <- tools: a layer
 * includes the public headers of those below it and this one, never their
 * private headers (kv/kv_int.h, graph/graph_int.h). Private: not
 * installed. Compiled as C and as C++ (nvcc, and g++ for gpu/emu). */
#ifndef GKV_BASE_H
#define GKV_BASE_H

#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include "kv/gkv_err.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- allocation (alloc.c) ----------------------------------------------
 * Every gkv allocation goes through these, so tests can fail the n-th one
 * and count what is still live. A size of 0 allocates 1 byte; gkv__free
 * takes NULL; gkv__realloc(NULL, n) is gkv__malloc(n). */
void *gkv__malloc(size_t n);
void *gkv__calloc(size_t n, size_t size);
void *gkv__realloc(void *p, size_t n);
void  gkv__free(void *p);
char *gkv__strdup(const char *s);

/* Test hooks: fail the n-th allocation from now (0: the next; -1: never),
 * and the number of blocks allocated and not yet freed. */
void  gkv__alloc_fail_at(long n);
long  gkv__alloc_live(void);

/* ---- the monotonic clock (clock.c) -------------------------------------
 * CLOCK_MONOTONIC: setting the system clock neither stretches nor cuts a
 * wait or a measured time. */

/* Now, in nanoseconds and in milliseconds, from an arbitrary origin. */
uint64_t gkv__now_ns(void);
uint64_t gkv__now_ms(void);
/* Initialises cv so that its timed waits take CLOCK_MONOTONIC deadlines. */
void gkv__cond_init_mono(pthread_cond_t *cv);
/* *ts = CLOCK_MONOTONIC now + ms, for pthread_cond_timedwait on such a cv. */
void gkv__mono_deadline(struct timespec *ts, unsigned ms);

/* ---- the error detail (err.c) ------------------------------------------
 * One slot per thread holds the detail of the thread's last failed gkv
 * call, read with gkv_errmsg() (gkv.h). A public call clears it when it
 * starts and, when it fails, fills it before it returns, so the message
 * always belongs to the last call. 'about' tags the message with the
 * handle the call was on (a store, a graph, a book, a sampler ...; NULL
 * for a failed open and for calls on no handle), for the per-module
 * getters such as gkv_store_errmsg(s), which give "" for a message about
 * another handle. Library codes (gkv_err) and errno stay apart: a call
 * that meets an errno translates it (gkv__from_errno) and may name it in
 * the message. */
#define GKV__MSG_MAX 1280   /* bytes of a message, with its NUL */

#if defined(__GNUC__)
#define GKV__PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define GKV__PRINTF(f, a)
#endif

/* Sets the calling thread's message (about 'about') from fmt, which may
 * read the current message (as in "pull: %s", gkv_store_errmsg(s)), and
 * returns rc, so a call can say: return gkv__fail(s, GKV_EINVAL, ...). */
gkv_err gkv__fail(const void *about, gkv_err rc, const char *fmt, ...)
    GKV__PRINTF(3, 4);
gkv_err gkv__vfail(const void *about, gkv_err rc, const char *fmt,
                   va_list ap);
/* Empties the calling thread's message and tags it with 'about'. */
void    gkv__clear(const void *about);
/* The calling thread's message when it is about 'about', else "". */
const char *gkv__errmsg_about(const void *about);

/* Translates an errno value from the C library (file I/O) into the error
 * space: ENOENT/ENOTDIR GKV_ENOENT, EACCES/EPERM/EROFS GKV_EPERM, ENOMEM,
 * EINVAL, anything else GKV_EIO. */
gkv_err gkv__from_errno(int e);

/* ---- arenas (arena.c) ---------------------------------------------------
 * Memory handed out by bumping chunks, all of it given back at once: the
 * client's sampling results and a server's batch arrays live in one. A
 * reset keeps the memory, merged into one chunk of the total size, so a
 * steady stream of calls allocates nothing and touches no fresh pages.
 * Not thread-safe: an arena belongs to one thread (or lock) at a time.
 * Zero-initialise. */
typedef struct gkv__arena {
    struct gkv__achunk { unsigned char *p; size_t cap, used; } *ar;
    size_t nar, capar;
} gkv__arena;

/* 'bytes' (0: 16), 16-aligned, until the next reset; a new chunk is at
 * least 'min_chunk' bytes and twice the last. NULL: out of memory. */
void   *gkv__arena_alloc(gkv__arena *a, size_t bytes, size_t min_chunk);
/* Empties the arena, keeping its memory (merged into one chunk). */
void    gkv__arena_reset(gkv__arena *a);
/* Frees all of it; the arena is empty and usable again. */
void    gkv__arena_free(gkv__arena *a);
/* The bytes of memory it holds (used or not). */
size_t  gkv__arena_size(const gkv__arena *a);
/* Whether p points into what the arena has handed out since its reset. */
int     gkv__arena_holds(const gkv__arena *a, const void *p);

#ifdef __cplusplus
}
#endif
#endif /* GKV_BASE_H */
