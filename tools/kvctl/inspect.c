/* inspect.c - the commands that read: ls, info, get, stat. They never
 * create or change the store. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idlist.h"
#include "kvctl.h"
#include "ops.h"
#include "util.h"

int
kvctl__cmd_ls(struct ctx *c)
{
    struct kvctl_lsrow *v = NULL;
    size_t n = 0;
    int ex;

    if ((ex = c->ops->open(c, GKV_RDONLY)) != EX_OK ||
        (ex = c->ops->list(c, c->opt[O_ALL] != NULL, &v, &n)) != EX_OK)
        return ex;
    ex = kvctl__print_ls(c, v, n);
    if (c->ops->listed != NULL)
        c->ops->listed(c, v, n);
    free(v);
    return ex;
}

int
kvctl__cmd_info(struct ctx *c)
{
    const char *name = c->args[0];
    json_t *state = NULL;
    gkv_tensor_desc d;
    uint64_t rows;
    size_t held;
    gkv_err rc;
    int ex;

    if ((ex = c->ops->open(c, GKV_RDONLY)) != EX_OK ||
        (ex = c->ops->begin(c)) != EX_OK)
        return ex;
    if ((rc = c->ops->info(c, name, &d)) != GKV_OK) {
        ex = kvctl__fail_on(c, rc, "tensor '%s'", name);
        if (c->ipc != NULL && rc != GKV_ENOTFOUND) {
            char holders[2048];

            kvctl__job_holders_str(c, name, holders, sizeof holders);
            tools__note("the machines hold: %s", holders);
        }
        c->ops->end(c);
        return ex;
    }
    ex = c->ops->state_names(c, name, &state);
    c->ops->end(c);
    if (ex != EX_OK)
        return ex;
    rows = kvctl__job_rows(c, &d, &held);
    return kvctl__print_info(c, &d, rows, state);
}

int
kvctl__cmd_stat(struct ctx *c)
{
    int ex;

    if ((ex = c->ops->open(c, GKV_RDONLY)) != EX_OK)
        return ex;
    return c->ops->stat(c);
}

int
kvctl__cmd_get(struct ctx *c)
{
    const char *name = c->args[0];
    tools_idlist ids = {0};
    tools_idcur cur = {0};
    gkv_tensor_desc d;
    json_t *root = NULL, *jids = NULL, *jrows = NULL;
    uint64_t *idbuf = NULL;
    unsigned char *rows = NULL;
    size_t batch, k;
    char err[512];
    gkv_err rc;
    int ex;

    if ((ex = tools__idlist_parse(&ids, c->args[1], err, sizeof err)) != 0) {
        tools__idlist_free(&ids);
        return ex == 2 ? kvctl__usage_error("%s", err) : kvctl__fail("%s", err);
    }
    if ((ex = c->ops->open(c, GKV_RDONLY)) != EX_OK ||
        (ex = c->ops->begin(c)) != EX_OK)
        goto out;
    if ((rc = c->ops->info(c, name, &d)) != GKV_OK) {
        ex = kvctl__fail_on(c, rc, "tensor '%s'", name);
        goto out;
    }
    /* every ID is checked before a row is printed */
    for (size_t i = 0; i < ids.nseg; i++) {
        const tools_idseg *sg = &ids.seg[i];
        if (sg->a < d.lo || sg->b > d.hi) {
            ex = kvctl__fail("tensor '%s': %s: ID %" PRIu64 " is outside its "
                             "range [%" PRIu64 ", %" PRIu64 ")", name,
                             gkv_strerror(GKV_ERANGE),
                             sg->a < d.lo || sg->a > d.hi ? sg->a : d.hi,
                             d.lo, d.hi);
            goto out;
        }
    }
    batch = d.row_bytes >= (4u << 20) ? 1 : (4u << 20) / d.row_bytes;
    if (batch > 65536)
        batch = 65536;
    if ((idbuf = malloc(batch * sizeof *idbuf)) == NULL ||
        (rows = malloc(batch * d.row_bytes)) == NULL) {
        ex = kvctl__fail("out of memory");
        goto out;
    }
    if (c->json) {
        root = json_object();
        jids = json_array();
        jrows = json_array();
        json_object_set_new(root, "name", json_string(name));
        json_object_set_new(root, "dtype", json_string(gkv_dtype_name(d.dtype)));
        json_object_set(root, "ids", jids);
        json_object_set(root, "rows", jrows);
    }
    while ((k = tools__idlist_next(&ids, &cur, idbuf, batch)) > 0) {
        if ((rc = c->ops->pull(c, name, idbuf, k, rows, k * d.row_bytes))
            != GKV_OK) {
            ex = kvctl__fail_on(c, rc, "tensor '%s'", name);
            goto out;
        }
        for (size_t i = 0; i < k; i++) {
            const unsigned char *row = rows + i * d.row_bytes;

            if (c->json) {
                json_t *r = json_array();
                json_array_append_new(jids, kvctl__json_u64(idbuf[i]));
                for (uint64_t e = 0; e < d.row_elems; e++)
                    json_array_append_new(r, kvctl__elem_json(d.dtype, row, e));
                json_array_append_new(jrows, r);
            } else {
                char b[64];
                printf("%" PRIu64 ":", idbuf[i]);
                for (uint64_t e = 0; e < d.row_elems; e++) {
                    kvctl__elem_str(d.dtype, row, e, b, sizeof b);
                    printf(" %s", b);
                }
                putchar('\n');
            }
        }
    }
    c->ops->end(c);
    if (c->json) {
        int prec = d.dtype == GKV_F64 ? 17 : 9;
        ex = kvctl__json_print(root, JSON_REAL_PRECISION(prec));
        root = NULL;
    } else {
        ex = kvctl__out_done(EX_OK);
    }
out:
    c->ops->end(c);
    json_decref(root);
    json_decref(jids);
    json_decref(jrows);
    free(idbuf);
    free(rows);
    tools__idlist_free(&ids);
    return ex;
}
