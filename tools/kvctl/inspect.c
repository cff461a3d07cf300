/* inspect.c - the commands that read: ls, info, get, stat (and which IDs
 * get and put take, and where an ID outside the range is). They never
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

/* ---- the IDs of get and put ------------------------------------------- */

int
kvctl__graph_type(const char *name, int *node, char *type)
{
    int is_node = strncmp(name, "node/", 5) == 0;
    const char *slash;

    if ((!is_node && strncmp(name, "edge/", 5) != 0) ||
        (slash = strchr(name + 5, '/')) == NULL)
        return 0;
    if (type != NULL) {
        if ((size_t)(slash - name - 5) > GKV_NAME_MAX)
            return 0;
        memcpy(type, name + 5, (size_t)(slash - name - 5));
        type[slash - name - 5] = '\0';
    }
    if (node != NULL)
        *node = is_node;
    return 1;
}

int
kvctl__graph_name(const char *name)
{
    return kvctl__graph_type(name, NULL, NULL);
}

int64_t
kvctl__type_count(const gkv_pbook *b, int node, const char *type)
{
    int t;

    if (b == NULL || (node ? gkv_pbook_ntype_find(b, type, &t) :
                             gkv_pbook_etype_find(b, type, &t)) != GKV_OK)
        return -1;
    return node ? gkv_pbook_num_nodes(b, t) : gkv_pbook_num_edges(b, t);
}

const char *
kvctl__id_space(const struct ctx *c, const char *name)
{
    if (c->opt[O_ORIG_IDS] != NULL)
        return "original";
    if (kvctl__graph_name(name) || (c->cl != NULL && gkv_client_pbook(c->cl) != NULL))
        return "partitioned";
    return "stored";
}

int
kvctl__fail_id(struct ctx *c, const gkv_tensor_desc *d, uint64_t id,
               const uint64_t *orig)
{
    char where[1024] = "", as[96] = "";

    c->ops->whereis(c, d, id, where, sizeof where);
    if (orig != NULL)
        snprintf(as, sizeof as, "original ID %" PRIu64 " is new ID %" PRIu64
                 ", which", *orig, id);
    else
        snprintf(as, sizeof as, "ID %" PRIu64, id);
    return kvctl__fail("tensor '%s': %s: %s is outside its range [%" PRIu64
                       ", %" PRIu64 ")%s%s", d->name, gkv_strerror(GKV_ERANGE),
                       as, d->lo, d->hi, *where ? ": " : "", where);
}

/* The stored IDs of original IDs orig[0..n) (--orig-ids), each a row of
 * d, into id; EX. */
static int
ids_mapped(struct ctx *c, const struct origmap *om, const gkv_tensor_desc *d,
           const uint64_t *orig, size_t n, uint64_t *id)
{
    for (size_t i = 0; i < n; i++) {
        if (kvctl__origmap_id(om, "get", c->opt[O_ORIG_IDS], orig[i],
                              &id[i]) != EX_OK)
            return EX_FAIL;
        if (id[i] < d->lo || id[i] >= d->hi)
            return kvctl__fail_id(c, d, id[i], &orig[i]);
    }
    return EX_OK;
}

/* Every ID of the list is a row of d (with --orig-ids, maps to one),
 * checked before a row is printed; EX. */
static int
ids_check(struct ctx *c, const tools_idlist *ids, const struct origmap *om,
          const gkv_tensor_desc *d, uint64_t *buf, uint64_t *tmp, size_t batch)
{
    tools_idcur cur = {0};
    size_t k;

    if (om == NULL) {
        for (size_t i = 0; i < ids->nseg; i++) {
            const tools_idseg *sg = &ids->seg[i];
            if (sg->a < d->lo || sg->b > d->hi)
                return kvctl__fail_id(c, d, sg->a < d->lo || sg->a > d->hi ?
                                      sg->a : d->hi, NULL);
        }
        return EX_OK;
    }
    while ((k = tools__idlist_next(ids, &cur, buf, batch)) > 0)
        if (ids_mapped(c, om, d, buf, k, tmp) != EX_OK)
            return EX_FAIL;
    return EX_OK;
}

/* On stderr, unless --json says it in "id_space": which IDs a partitioned
 * graph's rows are printed by. */
static void
id_space_note(const struct ctx *c, const gkv_tensor_desc *d)
{
    const char *space = kvctl__id_space(c, d->name);

    if (c->json)
        return;
    if (strcmp(space, "original") == 0)
        tools__note("note: the IDs are original IDs (the input graph's), "
                    "mapped to the stored ones by --orig-ids '%s'",
                    c->opt[O_ORIG_IDS]);
    else if (strcmp(space, "partitioned") == 0)
        tools__note("note: the IDs are the partitioned IDs tensor '%s' is "
                    "stored by (gkv-partition renumbered them), not the "
                    "input graph's: --orig-ids OUT/mapping/node-TYPE.npy "
                    "takes those", d->name);
}

int
kvctl__cmd_get(struct ctx *c)
{
    const char *name = c->args[0];
    tools_idlist ids = {0};
    tools_idcur cur = {0};
    struct origmap map = {.n = 0}, *om = NULL;
    gkv_tensor_desc d;
    json_t *root = NULL, *jids = NULL, *jrows = NULL, *jnew = NULL;
    uint64_t *idbuf = NULL, *newbuf = NULL, *pullids;
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
    if (c->opt[O_ORIG_IDS] != NULL) {
        if ((ex = kvctl__origmap_load(&map, "get", c->opt[O_ORIG_IDS])) !=
            EX_OK ||
            (ex = kvctl__origmap_fits(c, &map, "get", c->opt[O_ORIG_IDS], &d))
            != EX_OK)
            goto out;
        om = &map;
    }
    batch = d.row_bytes >= (4u << 20) ? 1 : (4u << 20) / d.row_bytes;
    if (batch > 65536)
        batch = 65536;
    if ((idbuf = malloc(batch * sizeof *idbuf)) == NULL ||
        (newbuf = malloc(batch * sizeof *newbuf)) == NULL ||
        (rows = malloc(batch * d.row_bytes)) == NULL) {
        ex = kvctl__fail("out of memory");
        goto out;
    }
    /* every ID is checked before a row is printed */
    if ((ex = ids_check(c, &ids, om, &d, idbuf, newbuf, batch)) != EX_OK)
        goto out;
    pullids = om != NULL ? newbuf : idbuf;
    if (c->json) {
        root = json_object();
        jids = json_array();
        jrows = json_array();
        json_object_set_new(root, "name", json_string(name));
        json_object_set_new(root, "dtype", json_string(gkv_dtype_name(d.dtype)));
        json_object_set_new(root, "id_space",
                            json_string(kvctl__id_space(c, name)));
        json_object_set(root, "ids", jids);
        if (om != NULL) {
            jnew = json_array();
            json_object_set(root, "new_ids", jnew);
        }
        json_object_set(root, "rows", jrows);
    }
    id_space_note(c, &d);
    while ((k = tools__idlist_next(&ids, &cur, idbuf, batch)) > 0) {
        if (om != NULL && (ex = ids_mapped(c, om, &d, idbuf, k, newbuf)) !=
            EX_OK)
            goto out;
        if ((rc = c->ops->pull(c, name, pullids, k, rows, k * d.row_bytes))
            != GKV_OK) {
            ex = kvctl__fail_on(c, rc, "tensor '%s'", name);
            goto out;
        }
        for (size_t i = 0; i < k; i++) {
            const unsigned char *row = rows + i * d.row_bytes;

            if (c->json) {
                json_t *r = json_array();
                json_array_append_new(jids, kvctl__json_u64(idbuf[i]));
                if (jnew != NULL)
                    json_array_append_new(jnew, kvctl__json_u64(newbuf[i]));
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
    json_decref(jnew);
    free(idbuf);
    free(newbuf);
    free(rows);
    kvctl__origmap_close(&map);
    tools__idlist_free(&ids);
    return ex;
}
