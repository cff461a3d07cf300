/* err.c - the error space's names and texts, errno translation, and the
 * one per-thread slot that holds the detail of the last failed call. */
#include <errno.h>
#include <stdio.h>
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

/* The slot: the message and the handle it is about. */
static __thread struct {
    const void *about;
    char msg[GKV__MSG_MAX];
} tl_err;

gkv_err
gkv__vfail(const void *about, gkv_err rc, const char *fmt, va_list ap)
{
    char tmp[GKV__MSG_MAX];   /* fmt's arguments may point into the slot */

    vsnprintf(tmp, sizeof tmp, fmt, ap);
    memcpy(tl_err.msg, tmp, strlen(tmp) + 1);
    tl_err.about = about;
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
    tl_err.about = about;
    tl_err.msg[0] = '\0';
}

const char *
gkv__errmsg_about(const void *about)
{
    return tl_err.about == about ? tl_err.msg : "";
}

const char *
gkv_errmsg(void)
{
    return tl_err.msg;
}
