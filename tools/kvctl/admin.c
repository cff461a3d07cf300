/* admin.c - the commands that manage tensors as a whole: rm, rename,
 * reset-opt. */
#include <stdio.h>
#include <string.h>

#include "kvctl.h"
#include "ops.h"

int
kvctl__cmd_rm(struct ctx *c)
{
    int ex;

    if ((ex = c->ops->open(c, 0)) != EX_OK)
        return ex;
    return c->ops->remove(c, c->args[0]);
}

/* A store only (main.c refuses it through servers). */
int
kvctl__cmd_rename(struct ctx *c)
{
    gkv_err rc;
    int ex;

    if ((ex = c->ops->open(c, 0)) != EX_OK)
        return ex;
    if ((rc = gkv_tensor_rename(c->s, c->args[0], c->args[1])) != GKV_OK)
        return kvctl__fail_gkv(c->s, rc, "rename '%s' to '%s'", c->args[0],
                               c->args[1]);
    return EX_OK;
}

int
kvctl__cmd_reset_opt(struct ctx *c)
{
    const char *name = c->args[0], *opt = c->nargs > 1 ? c->args[1] : NULL;
    gkv_err rc;
    int ex;

    if (opt != NULL && strcmp(opt, "adagrad") != 0 && strcmp(opt, "adam") != 0)
        return kvctl__usage_error("reset-opt: optimizer '%s' has no state to "
                                  "reset (adagrad or adam; default both)", opt);
    if (strchr(name, '#') != NULL)
        return kvctl__usage_error("reset-opt: '%s' is optimizer state (or has "
                                  "a '#'); name its tensor", name);
    if ((ex = c->ops->open(c, 0)) != EX_OK)
        return ex;
    if ((rc = c->ops->opt_reset(c, name, opt)) != GKV_OK)
        return kvctl__fail_on(c, rc, "reset-opt: tensor '%s'", name);
    return EX_OK;
}
