/* verify.c - kvctl STORE verify [NAME]: checks the structure of the
 * store's file (every B-tree page), then recomputes the checksum of every
 * chunk. A store only (main.c refuses it through servers): it reads the
 * chunks as stored, which a server does not send. */
#include <stdio.h>

#include "kvctl.h"
#include "ops.h"
#include "util.h"

int
kvctl__cmd_verify(struct ctx *c)
{
    const char *name = c->nargs > 0 ? c->args[0] : NULL;
    gkv_verify_report rep;
    char detail[640];
    gkv_err rc;
    int ex;

    if ((ex = c->ops->open(c, GKV_RDONLY)) != EX_OK)
        return ex;
    rc = gkv_store_verify(c->s, name, &rep);
    snprintf(detail, sizeof detail, "%s", gkv_store_errmsg(c->s));
    if (rc != GKV_OK && rc != GKV_ECORRUPT)
        return kvctl__fail_gkv(c->s, rc, name ? "verify tensor '%s'" :
                               "verify store '%s'", name ? name : c->path);
    if (rc == GKV_ECORRUPT && !c->json && rep.bad_chunks == 0 &&
        rep.orphan_keys == 0) {
        /* the structure of data.mdb, checked before any chunk */
        printf("CORRUPT: %s\n", detail);
        ex = kvctl__out_done(EX_OK);
    } else {
        ex = kvctl__print_verify(c, name, rc, &rep, detail);
    }
    if (rc == GKV_ECORRUPT) {
        tools__note("verify: %s (%s)", gkv_strerror(rc), detail);
        return EX_FAIL;
    }
    return ex;
}
