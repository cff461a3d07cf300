/* err.c - the error space's names and texts, errno translation, and the
 * one per-thread slot that holds the detail of the last failed call. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/base.h"

const char *
gkv_strerror(int e)
{
    switch (e) {
#define X(name, val, text) case val: return text;
    GKV_ERRORS(X)
#undef X
    }
    return "unknown error";
}

const char *
gkv_err_name(int e)
{
    switch (e) {
#define X(name, val, text) case val: return "GKV_" #name;
    GKV_ERRORS(X)
#undef X
    }
    return "GKV_E?";
}

gkv_err
gkv__from_errno(int e)
{
    switch (e) {
    case 0:                    return GKV_OK;
    case ENOMEM:               return GKV_ENOMEM;
    case ENOENT: case ENOTDIR: return GKV_ENOENT;
    case EACCES: case EPERM:
    case EROFS:                return GKV_EPERM;
    case EINVAL:               return GKV_EINVAL;
    default:                   return GKV_EIO;
    }
}

/* The slot: the message and the handle it is about, one a thread, made on
 * the thread's first failed call and freed when the thread ends. Kept
 * through a pthread key, not a thread-local: libgkv.so's TLS block must
 * stay a few bytes (kv/kv_int.h, KV_TLS_IE). */
struct errslot {
    const void *about;
    char msg[GKV__MSG_MAX];
};

static pthread_key_t err_key;
static pthread_once_t err_once = PTHREAD_ONCE_INIT;
static int err_key_ok;

static void
err_key_make(void)
{
    err_key_ok = pthread_key_create(&err_key, free) == 0;
}

/* This thread's slot; NULL when it has none and 'make' is 0, or when it
 * cannot be made (out of memory). */
static struct errslot *
slot(int make)
{
    struct errslot *e;

    pthread_once(&err_once, err_key_make);
    if (!err_key_ok)
        return NULL;
    if ((e = pthread_getspecific(err_key)) == NULL && make &&
        (e = calloc(1, sizeof *e)) != NULL &&
        pthread_setspecific(err_key, e) != 0) {
        free(e);
        e = NULL;
    }
    return e;
}

gkv_err
gkv__vfail(const void *about, gkv_err rc, const char *fmt, va_list ap)
{
    char tmp[GKV__MSG_MAX];   /* fmt's arguments may point into the slot */
    struct errslot *e;

    vsnprintf(tmp, sizeof tmp, fmt, ap);
    if ((e = slot(1)) != NULL) {
        memcpy(e->msg, tmp, strlen(tmp) + 1);
        e->about = about;
    }
    return rc;
}

gkv_err
gkv__fail(const void *about, gkv_err rc, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    gkv__vfail(about, rc, fmt, ap);
    va_end(ap);
    return rc;
}

void
gkv__clear(const void *about)
{
    struct errslot *e = slot(0);

    if (e != NULL) {
        e->about = about;
        e->msg[0] = '\0';
    }
}

const char *
gkv__errmsg_about(const void *about)
{
    struct errslot *e = slot(0);

    return e != NULL && e->about == about ? e->msg : "";
}

const char *
gkv_errmsg(void)
{
    struct errslot *e = slot(0);

    return e != NULL ? e->msg : "";
}
