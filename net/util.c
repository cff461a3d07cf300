/* util.c - net/'s per-thread error detail and nanomsg error translation. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <nanomsg/nn.h>
#include "gkv_net.h"
#include "wire.h"

/* One message per thread: net/ calls are about many handles (a client,
 * a server, a file), and the caller asks right after the failed call. */
static __thread char tl_msg[1280];

gkv_err
net__fail(gkv_err rc, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(tl_msg, sizeof tl_msg, fmt, ap);
    va_end(ap);
    return rc;
}

void
net__clear(void)
{
    tl_msg[0] = '\0';
}

const char *
gkv_net_errmsg(void)
{
    return tl_msg;
}

gkv_err
net__from_nn(int e)
{
    switch (e) {
    case 0:             return GKV_OK;
    case ETIMEDOUT:
    case EAGAIN:        return GKV_ETIMEDOUT;
    case EINTR:         return GKV_EINTR;
    case ENOMEM:        return GKV_ENOMEM;
    case EADDRINUSE:    return GKV_EBUSY;
    case EINVAL:
    case ENAMETOOLONG:
    case EPROTONOSUPPORT:
    case EADDRNOTAVAIL:
    case ENODEV:        return GKV_EINVAL;
    case EACCES:
    case EPERM:         return GKV_EPERM;
    default:            return GKV_EIO;
    }
}

int
net__group_ok(const char *g)
{
    size_t n = g != NULL ? strlen(g) : 0;

    if (n == 0 || n > NET_GROUP_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (g[i] <= 0x20 || g[i] > 0x7e)
            return 0;
    return 1;
}
