/* util.c - net/'s error detail (the one per-thread slot of base/err.c) and
 * nanomsg error translation. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <nanomsg/nn.h>
#include "base/base.h"
#include "net/gkv_net.h"
#include "net/wire.h"

const char *
gkv_net_errmsg(void)
{
    return gkv_errmsg();
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

/* ---- optimizer-state companions ------------------------------------------ */

gkv_err
net__state_split(const char *name, char *base, int *is_step)
{
    return gkv_opt_state_split(name, base, is_step);   /* fills the slot */
}

gkv_err
net__state_rows(const char *name, const net_tensor *t, int is_step,
                net_tensor *out)
{
    gkv_dtype dt = (gkv_dtype)t->dtype;
    uint64_t elems = 1;

    if (dt != GKV_F32 && dt != GKV_F64 && dt != GKV_F16 && dt != GKV_BF16)
        return net__fail(GKV_EINVAL, "optimizer state '%.64s': tensor '%s' is "
                         "%s; optimizer state needs a floating dtype (f32, "
                         "f64, f16, bf16)", name, t->name, gkv_dtype_name(dt));
    *out = *t;
    snprintf(out->name, sizeof out->name, "%s", name);
    out->policy[0] = '\0';
    if (is_step) {
        out->dtype = GKV_I64;
        out->ndim = 0;
        memset(out->shape, 0, sizeof out->shape);
    } else {
        out->dtype = dt == GKV_F64 ? GKV_F64 : GKV_F32;
        for (unsigned i = 0; i < out->ndim; i++)
            elems *= out->shape[i];
    }
    out->row_bytes = elems * gkv_dtype_size((gkv_dtype)out->dtype);
    return GKV_OK;
}

