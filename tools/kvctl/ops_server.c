/* ops_server.c - kvctl's operations (ops.h) through running servers:
 * kvctl --server HOST:PORT (one gkv-server) and kvctl --ip-config FILE
 * (every server of the job).
 *
 * kvctl joins as an observer (GKV_CLIENT_OBSERVER), so its leaving never
 * stops a server, even one without --keep-alive whose job has not started
 * or is running (the server stops when its last non-observer client
 * leaves, as before).
 *
 * With --ip-config, kvctl first reads what each machine's store holds
 * from the machine's server 0 (the servers of a machine share one store),
 * then connects to the whole job as a training client would
 * (gkv_client_connect), whose pulls are routed by ID range. So ls, info
 * and export see the whole tensor, and kvctl can say which machine holds
 * which rows, or which hold none (job.c).
 *
 * Through servers an import is batch by batch, not one transaction; export
 * pulls the rows in batches a server answers within its timeout. */
#include <inttypes.h>
#include <math.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "idlist.h"
#include "kvctl.h"
#include "ops.h"
#include "progress.h"
#include "util.h"

/* ---- connecting --------------------------------------------------------- */

/* Before a handshake that would wait its whole timeout: a host name that
 * does not resolve, or a port where nothing accepts connections, is named
 * at once. 'what' introduces the message ("server 0 of machine 1 at
 * ADDR"); 'where' says where the address came from (may be ""). EX_OK or
 * EX_FAIL, printed. */
static int
host_check(const char *host, unsigned port, const char *what,
           const char *where)
{
    struct addrinfo hints, *res = NULL;
    int e;

    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    if ((e = getaddrinfo(host, NULL, &hints, &res)) != 0)
        return kvctl__fail("%s%s: cannot resolve host '%s': %s", what, where,
                           host, gai_strerror(e));
    freeaddrinfo(res);
    if (!tools__port_accepts(host, port, 1000))
        return kvctl__fail("%s%s is down: nothing accepts connections there",
                           what, where);
    return EX_OK;
}

/* Connects to c->server as an observer of group --group (default "kvctl");
 * the rank is the process ID, so two kvctl runs never share a session. */
static int
connect_one(struct ctx *c)
{
    gkv_client_opts o = {0};
    char token[GKV_TOKEN_MAX + 1];
    const char *group = c->opt[O_GROUP] != NULL ? c->opt[O_GROUP] : "kvctl";
    gkv_err rc;

    if (c->opt[O_TOKEN_FILE] != NULL &&
        (rc = gkv_token_load(c->opt[O_TOKEN_FILE], token, sizeof token)) != GKV_OK)
        return kvctl__fail_net(rc, "token file '%s'", c->opt[O_TOKEN_FILE]);
    {
        /* HOST:PORT or [V6]:PORT; anything else is for the client to refuse */
        char host[256];
        const char *colon = strrchr(c->server, ':');
        size_t hl = colon != NULL ? (size_t)(colon - c->server) : 0;
        uint64_t port;

        if (hl >= 2 && c->server[0] == '[' && c->server[hl - 1] == ']') {
            memcpy(host, c->server + 1, hl - 2);
            host[hl - 2] = '\0';
        } else if (hl > 0 && hl < sizeof host) {
            memcpy(host, c->server, hl);
            host[hl] = '\0';
        } else {
            hl = 0;
        }
        if (hl > 0 && tools__parse_u64(colon + 1, &port) == 0 && port > 0 &&
            port < 65536 && host_check(host, (unsigned)port, "server ",
                                       c->server) != EX_OK)
            return EX_FAIL;
    }
    o.timeout_ms = 10000;
    o.flags = GKV_CLIENT_OBSERVER | GKV_CLIENT_NO_HEARTBEAT;
    rc = gkv_client_connect_addr(&c->cl, c->server,
                                 c->opt[O_TOKEN_FILE] != NULL ? token : NULL,
                                 group, (uint32_t)getpid(), &o);
    memset(token, 0, sizeof token);
    if (rc != GKV_OK)
        return kvctl__fail_net(rc, "server %s%s", c->server,
                               rc == GKV_ETIMEDOUT ? " (something accepts "
                               "connections there but did not answer as a "
                               "gkv-server: another program's port, or a "
                               "server too busy to answer)" : "");
    return EX_OK;
}

static void
server_close(struct ctx *c, int undo)
{
    gkv_client_close(c->cl);
    c->cl = NULL;
    for (size_t m = 0; m < c->nmach && c->jm != NULL; m++)
        gkv_free(c->jm[m].t);
    free(c->jm);
    c->jm = NULL;
    c->nmach = 0;
}

/* Server k of machine mc: "host:port" ("[v6]:port"), as the client names it. */
static void
mach_addr(const gkv_machine *mc, unsigned k, char *buf, size_t len)
{
    snprintf(buf, len, strchr(mc->host, ':') != NULL ? "[%s]:%u" : "%s:%u",
             mc->host, mc->port + k);
}

/* Connects to the job of ip_config c->ipc, as an observer like
 * connect_one(). First a quick look at each server's port, so that a
 * server that is down is named at once rather than after the handshake's
 * timeout; then what each machine's store holds, from its server 0 (that
 * connection is closed again: the job's client joins with the same group
 * and rank, which would replace its session); then the whole job, with
 * the servers per machine that server 0 of machine 0 reported. */
static int
connect_job(struct ctx *c)
{
    gkv_client_opts o = {0};
    gkv_ipconfig *cfg = NULL;
    char token[GKV_TOKEN_MAX + 1], addr[300], what[4500];
    const char *group = c->opt[O_GROUP] != NULL ? c->opt[O_GROUP] : "kvctl";
    const char *tok = NULL;
    int ex = EX_FAIL;
    gkv_err rc;

    if (c->opt[O_TOKEN_FILE] != NULL) {
        if ((rc = gkv_token_load(c->opt[O_TOKEN_FILE], token, sizeof token)) != GKV_OK)
            return kvctl__fail_net(rc, "token file '%s'", c->opt[O_TOKEN_FILE]);
        tok = token;
    }
    if ((rc = gkv_ipconfig_load(&cfg, c->ipc)) != GKV_OK) {
        /* GKV_ENOENT's text speaks of stores: say what it means here */
        if (rc == GKV_ENOENT || rc == GKV_EPERM || rc == GKV_EIO)
            kvctl__fail("ip_config '%s': cannot read it: %s (%s)", c->ipc,
                        gkv_net_errmsg(), gkv_err_name(rc));
        else
            kvctl__fail_net(rc, "ip_config '%s'", c->ipc);
        goto out;
    }
    c->nmach = gkv_ipconfig_count(cfg);
    if ((c->jm = calloc(c->nmach, sizeof *c->jm)) == NULL) {
        c->nmach = 0;
        kvctl__fail("out of memory");
        goto out;
    }
    o.timeout_ms = 10000;
    o.flags = GKV_CLIENT_OBSERVER | GKV_CLIENT_NO_HEARTBEAT;
    for (size_t m = 0; m < c->nmach; m++) {
        const gkv_machine *mc = gkv_ipconfig_machine(cfg, m);
        struct jobmach *j = &c->jm[m];
        gkv_client *one = NULL;
        gkv_server_info si;

        mach_addr(mc, 0, j->addr, sizeof j->addr);
        j->line = mc->line;
        snprintf(what, sizeof what, "server 0 of machine %zu at %s ('%.4096s' "
                 "line %u)", m, j->addr, c->ipc, mc->line);
        if (host_check(mc->host, mc->port, what, "") != EX_OK)
            goto out;
        rc = gkv_client_connect_addr(&one, j->addr, tok, group,
                                     (uint32_t)getpid(), &o);
        if (rc == GKV_OK && (rc = gkv_client_server_info(one, 0, &si)) == GKV_OK)
            rc = gkv_client_tensor_list(one, &j->t, &j->nt);
        if (rc != GKV_OK) {
            kvctl__fail_net(rc, "server 0 of machine %zu at %s", m, j->addr);
            gkv_client_close(one);
            goto out;
        }
        gkv_client_close(one);
        if (si.machine != m || si.server_id != 0) {
            kvctl__fail("the server at %s is server %u of machine %u, but '%s' "
                        "line %u makes it server 0 of machine %zu (another "
                        "job's ip_config, or a reordered one?)", j->addr,
                        si.server_id, si.machine, c->ipc, mc->line, m);
            goto out;
        }
        if (m == 0) {
            c->nserv = si.num_servers ? si.num_servers : 1;
        } else if (si.num_servers != c->nserv) {
            kvctl__fail("machine %zu (%s) runs %u servers, machine 0 runs %u: "
                        "not one job", m, j->addr, si.num_servers, c->nserv);
            goto out;
        }
    }
    for (size_t m = 0; m < c->nmach; m++) {
        const gkv_machine *mc = gkv_ipconfig_machine(cfg, m);
        for (unsigned k = 1; k < c->nserv; k++)
            if (!tools__port_accepts(mc->host, mc->port + k, 1000)) {
                mach_addr(mc, k, addr, sizeof addr);
                kvctl__fail("server %u of machine %zu at %s ('%s' line %u) is "
                            "down: nothing accepts connections there", k, m,
                            addr, c->ipc, mc->line);
                goto out;
            }
    }
    o.num_servers = c->nserv;
    if ((rc = gkv_client_connect(&c->cl, c->ipc, tok, group, (uint32_t)getpid(),
                                 &o)) != GKV_OK) {
        kvctl__fail_net(rc, "the job in '%s'", c->ipc);
        goto out;
    }
    ex = EX_OK;
out:
    memset(token, 0, sizeof token);
    gkv_ipconfig_free(cfg);
    return ex;
}

static int
server_open(struct ctx *c, unsigned flags)
{
    if (c->cl != NULL)
        return EX_OK;
    return c->ipc != NULL ? connect_job(c) : connect_one(c);
}

/* "WHAT on server ADDR: ..." ("on the job in 'FILE'") */
static int
server_fail(struct ctx *c, gkv_err rc, const char *what)
{
    return kvctl__fail_net(rc, "%s on %s", what, c->where);
}

/* servers keep no snapshot: each answer is of its own moment */
static int
server_begin(struct ctx *c)
{
    return EX_OK;
}

static void
server_end(struct ctx *c)
{
}

/* ---- reading ------------------------------------------------------------ */

/* The server's identity and statistics (kvctl --server ADDR stat); with
 * --ip-config, those of every server of the job, machine-major (text:
 * one block each, a blank line between; JSON: an array "servers"). */
static int
server_stat(struct ctx *c)
{
    json_t *all = c->ipc != NULL ? json_array() : NULL;
    size_t ns = gkv_client_nservers(c->cl);

    for (size_t i = 0; i < ns; i++) {
        gkv_server_info si;
        gkv_server_stats st;
        gkv_err rc;

        if ((rc = gkv_client_server_info(c->cl, i, &si)) != GKV_OK ||
            (rc = gkv_client_stats(c->cl, i, &st)) != GKV_OK) {
            json_decref(all);
            return kvctl__fail_net(rc, "server %s", c->server != NULL ?
                                   c->server : si.addr);
        }
        if (c->json && all == NULL)
            return kvctl__json_print(kvctl__server_stat_json(&si, &st), 0);
        if (c->json) {
            json_array_append_new(all, kvctl__server_stat_json(&si, &st));
            continue;
        }
        if (i > 0)
            putchar('\n');
        kvctl__server_stat_text(&si, &st);
    }
    if (c->json) {
        json_t *o = json_object();
        json_object_set_new(o, "ip_config", json_string(c->ipc));
        json_object_set_new(o, "servers", all);
        return kvctl__json_print(o, 0);
    }
    json_decref(all);
    return kvctl__out_done(EX_OK);
}

static int
server_list(struct ctx *c, int all, struct kvctl_lsrow **out, size_t *n)
{
    gkv_tensor_desc *v = NULL;
    gkv_err rc;

    if (c->ipc != NULL)
        return kvctl__job_list(c, out, n);
    *out = NULL;
    *n = 0;
    if ((rc = gkv_client_tensor_list(c->cl, &v, n)) != GKV_OK)
        return kvctl__fail_net(rc, "listing tensors of %s", c->where);
    return kvctl__lsrows(v, n, out);
}

/* a server lists no optimizer state: unknown, not "none" */
static int
server_state_names(struct ctx *c, const char *name, json_t **state)
{
    *state = json_null();
    return EX_OK;
}

/* the range is the one the server holds (with --ip-config: from the
 * lowest to the highest ID any machine holds) */
static gkv_err
server_info(struct ctx *c, const char *name, gkv_tensor_desc *d)
{
    return gkv_client_tensor_info(c->cl, name, d);
}

static gkv_err
server_state_info(struct ctx *c, const char *name, gkv_tensor_desc *d,
                  int *exists)
{
    *exists = 1;
    return gkv_client_tensor_info(c->cl, name, d);
}

static gkv_err
server_pull(struct ctx *c, const char *name, const uint64_t *ids, size_t n,
            void *buf, size_t len)
{
    return gkv_client_pull(c->cl, name, ids, n, buf, len);
}

static gkv_err
server_read(struct ctx *c, const char *name, uint64_t a, size_t n, void *buf,
            size_t len, uint64_t *ids)
{
    for (size_t i = 0; i < n; i++)
        ids[i] = a + i;
    return gkv_client_pull(c->cl, name, ids, n, buf, len);
}

/* ---- writing ------------------------------------------------------------ */

static gkv_err
server_push(struct ctx *c, const char *name, const uint64_t *ids, size_t n,
            const void *rows, size_t len, const gkv_push_args *pa)
{
    return gkv_client_push(c->cl, name, ids, n, rows, len, pa);
}

static gkv_err
server_opt_reset(struct ctx *c, const char *name, const char *opt)
{
    return gkv_client_opt_reset(c->cl, name, opt);
}

/* the servers' delete succeeds for a missing tensor: name it */
static int
server_remove(struct ctx *c, const char *name)
{
    gkv_tensor_desc d;
    gkv_err rc;

    if ((rc = gkv_client_tensor_info(c->cl, name, &d)) == GKV_OK &&
        strchr(name, '#') != NULL)
        return kvctl__fail("rm: '%s' is optimizer state: reset-opt drops it",
                           name);
    if (rc != GKV_OK || (rc = gkv_client_delete(c->cl, name)) != GKV_OK)
        return kvctl__fail_on(c, rc, "tensor '%s'", name);
    return EX_OK;
}

/* gkv_client_create of a tensor no server holds, split across the job;
 * when it fails, the machines that did make it delete theirs again.
 * 'what' begins the message ("create tensor"). */
static int
create_split(struct ctx *c, const char *name, const gkv_tensor_spec *sp,
             const char *what)
{
    gkv_err rc;

    if ((rc = gkv_client_create(c->cl, name, sp, -1)) == GKV_OK)
        return EX_OK;
    kvctl__fail_net(rc, "%s '%s' on %s", what, name, c->where);
    (void)gkv_client_delete(c->cl, name);
    return EX_FAIL;
}

/* create through the servers: split across the job's machines as the
 * client splits it (by the partition book for node/T/... and edge/E/...);
 * an existing tensor is an error, as in a store (the client's create
 * would accept an identical one). */
static int
server_create(struct ctx *c, const char *name, const gkv_tensor_spec *sp)
{
    char why[512];
    gkv_tensor_desc d;
    gkv_err rc;

    if (kvctl__name_check(name, 0, why, sizeof why) != 0)
        return kvctl__fail("create: %s", why);
    if (c->ops->open(c, 0) != EX_OK)
        return EX_FAIL;
    if ((rc = gkv_client_tensor_info(c->cl, name, &d)) == GKV_OK)
        return kvctl__fail("create tensor '%s' on %s: %s", name, c->where,
                           gkv_strerror(GKV_EEXIST));
    if (rc != GKV_ENOTFOUND)
        return kvctl__fail_net(rc, "create tensor '%s' on %s", name, c->where);
    return create_split(c, name, sp, "create tensor");
}

/* Through servers, before the first row is sent: the values of optimizer
 * state the servers' stores would refuse (as a store's restore does, in
 * its one transaction): step counts 0 to INT64_MAX - 1 (T#adam_t), sums
 * of squares and second moments finite and >= 0 (T#adagrad_s, T#adam_v),
 * first moments finite (T#adam_m). */
static int
state_values_check(const char *file, const gkv_tensor_desc *d,
                   const unsigned char *data, uint64_t rows)
{
    const char *suf = strchr(d->name, '#');
    int step = strcmp(suf, "#adam_t") == 0;
    int nonneg = strcmp(suf, "#adagrad_s") == 0 || strcmp(suf, "#adam_v") == 0;
    uint64_t n = rows * d->row_elems;

    for (uint64_t i = 0; i < n; i++) {
        double v;
        int bad;

        if (step) {
            int64_t t;
            memcpy(&t, data + i * 8, 8);
            if (t >= 0 && t < INT64_MAX)
                continue;
            return kvctl__fail("import '%s': %s: row %" PRIu64 " holds step "
                               "count %" PRId64 "; '%s' takes 0 to %" PRId64,
                               file, gkv_strerror(GKV_EINVAL), i, t, d->name,
                               (int64_t)(INT64_MAX - 1));
        }
        if (d->dtype == GKV_F64) {
            memcpy(&v, data + i * 8, 8);
        } else {
            float f;
            memcpy(&f, data + i * 4, 4);
            v = f;
        }
        bad = !isfinite(v) || (nonneg && v < 0);
        if (bad)
            return kvctl__fail("import '%s': %s: row %" PRIu64 " holds %g "
                               "(element %" PRIu64 "); '%s' takes %s", file,
                               gkv_strerror(GKV_EINVAL), i / d->row_elems, v,
                               i % d->row_elems, d->name, nonneg ? "finite "
                               "values, 0 or more" : "finite values");
    }
    return EX_OK;
}

/* import through the servers (--server, --ip-config): the file's rows
 * pushed (assign) to rows [lo, lo + rows) of 'name', batch by batch. A
 * missing tensor is created first, split across the job as create splits
 * it, and deleted again when the import fails; an existing one needs
 * --replace and is overwritten in place (no one-transaction swap through
 * servers: a reader may see old and new rows while it runs); a companion
 * T#... is a restore. Everything that can be checked is, before the
 * first row is sent. */
static int
server_import(struct ctx *c, const struct kvctl_import *im)
{
    const char *name = im->name, *file = im->file;
    const gkv_npy_map *m = im->m;
    gkv_tensor_spec *sp = im->sp;
    struct origmap *om = im->om;
    int state = im->state;
    const unsigned char *data = m->data;
    uint64_t rows = m->hdr.shape[0], step, at = 0, sent = 0, *ids = NULL;
    char label[GKV_NAME_MAX + 16];
    tools_progress bar = {0};
    gkv_tensor_desc d, bd;
    int created = 0, ex = EX_FAIL;
    gkv_err rc;

    if (c->ops->open(c, 0) != EX_OK)
        return EX_FAIL;
    rc = gkv_client_tensor_info(c->cl, name, &d);
    if (rc == GKV_ENOTFOUND && !state) {
        /* a new tensor [lo, lo + rows): a mapping must fill it */
        if (om != NULL &&
            kvctl__origmap_perm(om, c->opt[O_ORIG_IDS], sp->lo,
                                "a new tensor") != EX_OK)
            return EX_FAIL;
        if (create_split(c, name, sp, "import: creating tensor") != EX_OK)
            return EX_FAIL;
        created = 1;
        if ((rc = gkv_client_tensor_info(c->cl, name, &d)) != GKV_OK) {
            kvctl__fail_net(rc, "import: tensor '%s' on %s", name, c->where);
            goto out;
        }
    } else if (rc != GKV_OK) {
        return kvctl__fail_net(rc, "import: tensor '%s' on %s", name, c->where);
    } else if (!state && c->opt[O_REPLACE] == NULL) {
        return kvctl__fail("import: tensor '%s' on %s: %s (give --replace to "
                           "overwrite its rows)", name, c->where,
                           gkv_strerror(GKV_EEXIST));
    } else if (c->opt[O_HOT] != NULL || c->opt[O_CHUNK_ROWS] != NULL) {
        return kvctl__fail("import: tensor '%s' on %s exists: --hot and "
                           "--chunk-rows apply only when import creates it",
                           name, c->where);
    } else if (c->opt[O_LO] == NULL) {
        sp->lo = d.lo;              /* over the tensor's first rows */
    }
    if (om != NULL)
        sp->lo = d.lo;              /* the shape check; the IDs are om's */
    if (kvctl__rows_fit(file, m, &d, sp->lo, "") != EX_OK)
        goto out;
    if (om != NULL && (om->min < d.lo || om->max >= d.hi)) {
        kvctl__fail("import: --orig-ids '%s': %s: new IDs %" PRIu64 " to %"
                    PRIu64 " are not all inside %s '%s' [%" PRIu64 ", %" PRIu64
                    ")", c->opt[O_ORIG_IDS], gkv_strerror(GKV_ERANGE), om->min,
                    om->max, state ? "optimizer state" : "tensor", name, d.lo,
                    d.hi);
        goto out;
    }
    if (state && state_values_check(file, &d, data, rows) != EX_OK)
        goto out;
    bd = d;                         /* a companion is where its tensor is */
    kvctl__base_name(d.name, bd.name);
    if (c->ipc != NULL && !created) {
        if (om != NULL ? kvctl__job_check(c, "import", &bd, om->min,
                                          om->min) != EX_OK ||
                         kvctl__job_ids_held(c, &bd, om) != EX_OK
                       : kvctl__job_check(c, "import", &bd, sp->lo,
                                          sp->lo + rows) != EX_OK)
            goto out;
    }
    /* batches a server answers within its timeout, as export's */
    step = SLICE_BYTES / 8 / d.row_bytes;
    step = step == 0 ? 1 : step > (1u << 20) ? (1u << 20) : step;
    if ((ids = malloc(step * sizeof *ids)) == NULL) {
        kvctl__fail("out of memory");
        goto out;
    }
    snprintf(label, sizeof label, "import %s", name);
    tools__progress_start(&bar, label, rows * d.row_bytes);
    while (at < rows && !tools__got_signal) {
        size_t n = (size_t)(rows - at < step ? rows - at : step);

        for (size_t i = 0; i < n; i++)   /* the file's rows, in its order */
            ids[i] = om != NULL ? kvctl__origmap_at(om, at + i)
                                : sp->lo + at + i;
        sent = at + n;
        if ((rc = gkv_client_push(c->cl, name, ids, n, data + at * d.row_bytes,
                                  n * d.row_bytes, NULL)) != GKV_OK) {
            tools__progress_end(&bar, 0);
            kvctl__fail_net(rc, "import: tensor '%s' on %s: %s [%" PRIu64 ", %"
                            PRIu64 ")", name, c->where, om ? "the file's rows" :
                            "rows", om ? at : sp->lo + at, om ? sent :
                            sp->lo + sent);
            goto out;
        }
        at = sent;
        tools__progress_update(&bar, at * d.row_bytes);
    }
    tools__progress_end(&bar, at == rows);
    if (at == rows)
        ex = EX_OK;
out:
    free(ids);
    if (ex == EX_OK || sent == 0) {
        if (created && ex != EX_OK && (rc = gkv_client_delete(c->cl, name)) != GKV_OK)
            kvctl__fail_net(rc, "import: could not remove tensor '%s', which "
                            "this import created", name);
    } else if (created) {
        if ((rc = gkv_client_delete(c->cl, name)) == GKV_OK)
            tools__note("import: tensor '%s', which this import created, is "
                        "removed again", name);
        else
            kvctl__fail_net(rc, "import: could not remove tensor '%s', which "
                            "this import created and wrote in part", name);
    } else {
        /* om: in the file's row order; else in ID order */
        uint64_t base = om != NULL ? 0 : sp->lo;
        char part[128] = "";

        if (sent > at)
            snprintf(part, sizeof part, ", %s [%" PRIu64 ", %" PRIu64 ") may "
                     "be in part", om != NULL ? "its rows" : "rows",
                     base + at, base + sent);
        tools__note("import: %s [%" PRIu64 ", %" PRIu64 ") %s'%s' were "
                    "written%s, the rest are as they were: import again to "
                    "finish", om != NULL ? "the file's rows" : "rows", base,
                    base + at, om != NULL ? "to " : "of ", name, part);
    }
    return ex;
}

/* --server: the ID is not among the rows this one server holds. With a
 * partition book (servers that serve partitions; machine m serves
 * partition m), a graph feature's owner is named; else other machines may
 * hold it. With --ip-config the range is the whole job's: nothing to add. */
static void
server_whereis(struct ctx *c, const gkv_tensor_desc *d, uint64_t id,
               char *buf, size_t len)
{
    const gkv_pbook *b = gkv_client_pbook(c->cl);
    char type[GKV_NAME_MAX + 1], mach[32] = "";
    gkv_server_info si;
    int64_t v = (int64_t)id;
    int32_t part;
    int edge, t = -1;

    buf[0] = '\0';
    if (c->server == NULL)
        return;
    if (gkv_client_server_info(c->cl, 0, &si) == GKV_OK)
        snprintf(mach, sizeof mach, " (machine %u)", si.machine);
    if (b != NULL && kvctl__graph_name(d->name)) {
        const char *slash = strchr(d->name + 5, '/');
        gkv_err rc;

        edge = d->name[0] == 'e';
        snprintf(type, sizeof type, "%.*s", (int)(slash - d->name - 5),
                 d->name + 5);
        rc = edge ? gkv_pbook_etype_find(b, type, &t) :
             gkv_pbook_ntype_find(b, type, &t);
        if (rc == GKV_OK) {
            rc = edge ? gkv_pbook_edge_owner(b, t, &v, 1, &part) :
                 gkv_pbook_node_owner(b, t, &v, 1, &part);
            if (rc == GKV_OK)
                snprintf(buf, len, "partition %d owns it, served by machine "
                         "%d of the job, not by server %s%s: ask the whole "
                         "job with --ip-config FILE (its ip_config)", (int)part,
                         (int)part, c->server, mach);
            else
                snprintf(buf, len, "no partition owns it: the graph has %lld "
                         "%s of type '%s'", (long long)(edge ?
                         gkv_pbook_num_edges(b, t) : gkv_pbook_num_nodes(b, t)),
                         edge ? "edges" : "nodes", type);
            return;
        }
    }
    snprintf(buf, len, "server %s%s holds only these rows; other machines of "
             "the job may hold it: --ip-config FILE (the job's ip_config) "
             "reaches every server", c->server, mach);
}

const struct kvctl_ops kvctl__server_ops = {
    .open = server_open,
    .close = server_close,
    .fail = server_fail,
    .begin = server_begin,
    .end = server_end,
    .list = server_list,
    .listed = NULL,
    .state_names = server_state_names,
    .info = server_info,
    .state_info = server_state_info,
    .pull = server_pull,
    .read = server_read,
    .push = server_push,
    .opt_reset = server_opt_reset,
    .create = server_create,
    .remove = server_remove,
    .import = server_import,
    .stat = server_stat,
    .whereis = server_whereis,
    .batch_bytes = SLICE_BYTES / 8,     /* answered within a server's timeout */
    .pulls_by_id = 1,
    .describes_chunks = 0,
    .cancel_note = "",
};

