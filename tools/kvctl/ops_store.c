/* ops_store.c - kvctl's operations (ops.h) on a store directory, through
 * the embedded store (gkv_store_open): kvctl STORE COMMAND.
 *
 * Import is all-or-nothing: rows go into a temporary tensor
 * NAME.kvctl-import-PID, slice by slice, and only a complete one is renamed
 * to NAME. A failure, SIGINT or SIGTERM deletes the temporary tensor; only
 * kill -9 (or a crash) can leave it behind, and `kvctl STORE rm` removes
 * it. create and import create the store when it is missing, and remove
 * it again when they fail. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "idlist.h"
#include "kvctl.h"
#include "ops.h"
#include "progress.h"
#include "util.h"

/* Removes the files (and the directory) this run's store_open() made. */
static void
store_undo(struct ctx *c)
{
    char p[4096];

    if (c->made_dir || c->made_files) {
        snprintf(p, sizeof p, "%s/data.mdb", c->path);
        unlink(p);
        snprintf(p, sizeof p, "%s/lock.mdb", c->path);
        unlink(p);
        snprintf(p, sizeof p, "%s/writeback.lock", c->path);
        unlink(p);
        if (c->made_dir)
            rmdir(c->path);
    }
    c->made_dir = c->made_files = 0;
}

static int
store_open(struct ctx *c, unsigned flags)
{
    struct stat sb;
    gkv_err rc;

    if (c->s != NULL)
        return EX_OK;
    if (flags & GKV_CREATE) {
        char data[4096];

        if (stat(c->path, &sb) != 0 && errno == ENOENT) {
            c->made_dir = 1;
        } else if ((size_t)snprintf(data, sizeof data, "%s/data.mdb", c->path)
                   < sizeof data && stat(data, &sb) != 0 && errno == ENOENT) {
            c->made_files = 1;
        }
    }
    /* GKV_GUARD: a store changed under kvctl while it works (another
     * program writing data.mdb) ends the command with an error, not a
     * crash */
    if ((rc = gkv_store_open(&c->s, c->path, flags | GKV_GUARD, NULL)) !=
        GKV_OK) {
        /* the open may fail after making the files (the map cannot be
         * reserved, the disk is full): take them away again */
        store_undo(c);
        return kvctl__fail_gkv(NULL, rc, "store '%s'", c->path);
    }
    return EX_OK;
}

/* Closes the store; when this run created it and 'undo' is set, removes
 * what the creation made, so a failed create or import leaves no store
 * behind where there was none. */
static void
store_close(struct ctx *c, int undo)
{
    if (c->s == NULL)
        return;
    gkv_store_close(c->s);
    c->s = NULL;
    kvctl__sums_free(c);
    if (undo)
        store_undo(c);
}

static int
store_fail(struct ctx *c, gkv_err rc, const char *what)
{
    const char *bad = kvctl__sums_msg(c);

    if (rc == GKV_ECORRUPT && bad != NULL)
        return kvctl__fail("%s: %s: %s", what, gkv_strerror(rc), bad);
    return kvctl__fail_gkv(c->s, rc, "%s", what);
}

static int
store_begin(struct ctx *c)
{
    gkv_err rc;

    if ((rc = gkv_txn_begin(c->s, &c->tx)) != GKV_OK)
        return kvctl__fail_gkv(c->s, rc, "store '%s'", c->path);
    return EX_OK;
}

static void
store_end(struct ctx *c)
{
    gkv_txn_end(c->tx);
    c->tx = NULL;
    kvctl__sums_free(c);        /* what it checked was of that snapshot */
}

/* ---- reading ------------------------------------------------------------ */

static int
store_list(struct ctx *c, int all, struct kvctl_lsrow **out, size_t *n)
{
    gkv_tensor_desc *v = NULL;
    gkv_err rc;

    *out = NULL;
    *n = 0;
    if ((rc = gkv_tensor_list(c->s, c->tx, all, &v, n)) != GKV_OK)
        return kvctl__fail_gkv(c->s, rc, "listing tensors of '%s'", c->path);
    return kvctl__lsrows(v, n, out);
}

/* A NAME.kvctl-import-PID tensor whose process is gone was left by an
 * import killed with -9: say how to remove it. */
static void
store_listed(struct ctx *c, const struct kvctl_lsrow *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const char *name = v[i].d.name, *tag = strstr(name, IMPORT_TAG);
        uint64_t pid;

        if (tag == NULL ||
            tools__parse_u64(tag + strlen(IMPORT_TAG), &pid) != 0 ||
            pid == 0 || pid > INT32_MAX)
            continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;                   /* that import may still be running */
        tools__note("note: '%s' is left from an interrupted import; remove it "
                    "with: kvctl %s rm '%s'", name, c->path, name);
    }
}

static int
store_state_names(struct ctx *c, const char *name, json_t **state)
{
    gkv_tensor_desc *v = NULL;
    size_t n = 0, pl = strlen(name);
    gkv_err rc;

    *state = NULL;
    if ((rc = gkv_tensor_list(c->s, c->tx, 1, &v, &n)) != GKV_OK)
        return kvctl__fail_gkv(c->s, rc, "tensor '%s'", name);
    *state = json_array();
    for (size_t i = 0; i < n; i++)
        if (strncmp(v[i].name, name, pl) == 0 && v[i].name[pl] == '#')
            json_array_append_new(*state, json_string(v[i].name));
    gkv_free(v);
    return EX_OK;
}

static gkv_err
store_info(struct ctx *c, const char *name, gkv_tensor_desc *d)
{
    return gkv_tensor_info(c->s, c->tx, name, d);
}

/* T#adam_m not created yet (T never pushed with that optimizer) is
 * described as it would be made: T's range and chunking with the
 * companion's rows (f32 in T's row shape, f64 for an f64 T, one i64 for
 * T#adam_t). */
static gkv_err
store_state_info(struct ctx *c, const char *name, gkv_tensor_desc *d,
                 int *exists)
{
    return gkv_opt_state_info(c->s, c->tx, name, d, exists);
}

/* Reads check the checksums of the chunks they read (chunksum.c): a
 * value kvctl prints or exports is what was written. */
static gkv_err
store_pull(struct ctx *c, const char *name, const uint64_t *ids, size_t n,
           void *buf, size_t len)
{
    gkv_err rc = gkv_tensor_pull(c->s, c->tx, name, ids, n, buf, len);

    return rc != GKV_OK ? rc : kvctl__sums_ids(c, name, ids, n);
}

static gkv_err
store_read(struct ctx *c, const char *name, uint64_t a, size_t n, void *buf,
           size_t len, uint64_t *ids)
{
    gkv_err rc = gkv_tensor_read(c->s, c->tx, name, a, a + n, buf, len);

    return rc != GKV_OK ? rc : kvctl__sums_range(c, name, a, n, buf);
}

static int
store_stat(struct ctx *c)
{
    gkv_store_stat st;
    gkv_err rc;

    if ((rc = gkv_store_stat_get(c->s, &st)) != GKV_OK)
        return kvctl__fail_gkv(c->s, rc, "store '%s'", c->path);
    return kvctl__print_store_stat(c, &st);
}

/* ---- writing ------------------------------------------------------------ */

static gkv_err
store_push(struct ctx *c, const char *name, const uint64_t *ids, size_t n,
           const void *rows, size_t len, const gkv_push_args *pa)
{
    return gkv_tensor_push(c->s, name, ids, n, rows, len, pa);
}

static gkv_err
store_opt_reset(struct ctx *c, const char *name, const char *opt)
{
    return gkv_opt_reset(c->s, name, opt);
}

static int
store_create(struct ctx *c, const char *name, const gkv_tensor_spec *sp)
{
    gkv_err rc;
    int ex;

    if ((ex = store_open(c, GKV_CREATE)) != EX_OK)
        return ex;
    if ((rc = gkv_tensor_create(c->s, name, sp)) != GKV_OK) {
        ex = kvctl__fail_gkv(c->s, rc, "create tensor '%s'", name);
        store_close(c, 1);
        return ex;
    }
    return EX_OK;
}

static int
store_remove(struct ctx *c, const char *name)
{
    gkv_err rc;

    if ((rc = gkv_tensor_delete(c->s, name)) != GKV_OK)
        return kvctl__fail_gkv(c->s, rc, "tensor '%s'", name);
    return EX_OK;
}

/* import T#suffix FILE: the mapped file's rows written over the
 * companion's [lo, lo + rows) in one transaction (gkv_tensor_write
 * creates a missing companion zero-filled and checks step counts). */
static int
import_state(struct ctx *c, const struct kvctl_import *im)
{
    const gkv_npy_map *m = im->m;
    struct origmap *om = im->om;
    uint64_t rows = m->hdr.shape[0], lo = im->sp->lo;
    unsigned char *buf = NULL;
    gkv_tensor_desc d;
    int exists, ex;
    gkv_err rc;

    if ((ex = store_open(c, 0)) != EX_OK)
        return ex;
    if ((rc = store_state_info(c, im->name, &d, &exists)) != GKV_OK)
        return kvctl__fail_gkv(c->s, rc, "'%.64s'", im->name);
    if (om != NULL)
        lo = om->min;               /* the mapping's IDs, at its lowest */
    else if (c->opt[O_LO] == NULL)
        lo = d.lo;
    if (kvctl__rows_fit(im->file, m, &d, lo, exists ? "" :
                        " (as the state of its tensor would be)") != EX_OK)
        return EX_FAIL;
    /* in the store's ID order: one write, so one transaction */
    if (om != NULL && (kvctl__origmap_perm(om, c->opt[O_ORIG_IDS], lo,
                                           "optimizer state") != EX_OK ||
                       (buf = malloc(rows * d.row_bytes)) == NULL)) {
        if (om->inv != NULL)
            kvctl__fail("out of memory");
        return EX_FAIL;
    }
    rc = gkv_tensor_write(c->s, im->name, lo, lo + rows,
                          kvctl__origmap_rows(om, m->data, d.row_bytes, 0,
                                              rows, buf),
                          (size_t)rows * d.row_bytes);
    free(buf);
    if (rc != GKV_OK)
        return kvctl__fail_gkv(c->s, rc, "import: optimizer state '%s'",
                               im->name);
    return EX_OK;
}

/* import NAME FILE: a new tensor [lo, lo + rows), written in ID order
 * into NAME.kvctl-import-PID, then renamed over NAME in one transaction
 * with SIGINT and SIGTERM held (the caller lets them through again). */
static int
store_import(struct ctx *c, const struct kvctl_import *im)
{
    const char *name = im->name;
    const gkv_npy_map *m = im->m;
    gkv_tensor_spec *sp = im->sp;
    uint64_t rows = m->hdr.shape[0], step, done_rows = 0;
    char tmp[GKV_NAME_MAX + 1], label[GKV_NAME_MAX + 16];
    unsigned char *gather = NULL;
    tools_progress bar = {0};
    int ex, have_tmp = 0;
    gkv_tensor_desc d;
    gkv_err rc;

    if (im->state)
        return import_state(c, im);
    if (im->om != NULL && (ex = kvctl__origmap_perm(im->om, c->opt[O_ORIG_IDS],
                                                    sp->lo, "a new tensor"))
        != EX_OK)
        return ex;
    if ((ex = store_open(c, GKV_CREATE)) != EX_OK)
        return ex;
    ex = EX_FAIL;
    rc = gkv_tensor_info(c->s, NULL, name, &d);
    if (rc == GKV_OK && c->opt[O_REPLACE] == NULL) {
        kvctl__fail("import: tensor '%s': %s (give --replace to replace it)",
                    name, gkv_strerror(GKV_EEXIST));
        goto out;
    }
    if (rc != GKV_OK && rc != GKV_ENOTFOUND) {
        kvctl__fail_gkv(c->s, rc, "import: tensor '%s'", name);
        goto out;
    }
    if (rc == GKV_OK && c->opt[O_LO] == NULL && im->om == NULL) {
        /* a replacement starts where the tensor it replaces did (a
         * partition's rows stay at its IDs), as through servers */
        if (rows > UINT64_MAX - d.lo) {
            kvctl__fail("import '%s': tensor '%s' starts at ID %" PRIu64 "; %"
                        PRIu64 " rows from there is past 2^64", im->file, name,
                        d.lo, rows);
            goto out;
        }
        sp->lo = d.lo;
        sp->hi = d.lo + rows;
    }
    snprintf(tmp, sizeof tmp, "%s" IMPORT_TAG "%ld", name, (long)getpid());
    rc = gkv_tensor_create(c->s, tmp, sp);
    if (rc == GKV_EEXIST) {
        /* left by a killed process that had our PID: no one else can use it */
        if ((rc = gkv_tensor_delete(c->s, tmp)) == GKV_OK)
            rc = gkv_tensor_create(c->s, tmp, sp);
    }
    if (rc != GKV_OK) {
        kvctl__fail_gkv(c->s, rc, "import: creating tensor '%s'", name);
        goto out;
    }
    have_tmp = 1;
    if ((rc = gkv_tensor_info(c->s, NULL, tmp, &d)) != GKV_OK) {
        kvctl__fail_gkv(c->s, rc, "import: tensor '%s'", tmp);
        goto out;
    }
    /* slices of whole chunks: no chunk is written twice */
    step = SLICE_BYTES / d.row_bytes / d.chunk_rows * d.chunk_rows;
    if (step == 0)
        step = d.chunk_rows;
    if (im->om != NULL && (gather = malloc(step * d.row_bytes)) == NULL) {
        kvctl__fail("out of memory");
        goto out;
    }
    snprintf(label, sizeof label, "import %s", name);
    tools__progress_start(&bar, label, m->hdr.data_bytes);
    while (done_rows < rows && !tools__got_signal) {
        uint64_t n = rows - done_rows < step ? rows - done_rows : step;

        rc = gkv_tensor_write(c->s, tmp, sp->lo + done_rows,
                              sp->lo + done_rows + n,
                              kvctl__origmap_rows(im->om, m->data, d.row_bytes,
                                                  done_rows, n, gather),
                              n * d.row_bytes);
        if (rc != GKV_OK) {
            tools__progress_end(&bar, 0);
            kvctl__fail_gkv(c->s, rc, "import: writing rows [%" PRIu64 ", %"
                            PRIu64 ") of '%s'", sp->lo + done_rows,
                            sp->lo + done_rows + n, name);
            goto out;
        }
        done_rows += n;
        tools__progress_update(&bar, done_rows * d.row_bytes);
    }
    /* the swap runs with SIGINT and SIGTERM held: it finishes or does not
     * start; a signal caught before it cancels the import */
    kvctl__block_signals(1);
    if (tools__got_signal) {
        tools__progress_end(&bar, 0);
        goto out;
    }
    tools__progress_end(&bar, 1);
    /* one transaction: a reader sees the old tensor or the new one; and
     * without --replace one made meanwhile by someone else is kept */
    if ((rc = c->opt[O_REPLACE] != NULL
              ? gkv_tensor_replace(c->s, tmp, name)
              : gkv_tensor_rename(c->s, tmp, name)) != GKV_OK) {
        kvctl__fail_gkv(c->s, rc, "import: tensor '%s'", name);
        goto out;
    }
    have_tmp = 0;
    ex = EX_OK;
out:
    if (have_tmp && (rc = gkv_tensor_delete(c->s, tmp)) != GKV_OK)
        kvctl__fail_gkv(c->s, rc, "import: could not remove temporary tensor "
                        "'%s'; remove it with: kvctl %s rm '%s'", tmp, c->path,
                        tmp);
    free(gather);
    return ex;
}

/* A partition's store holds the rows its partition owns, no others. */
static void
store_whereis(struct ctx *c, const gkv_tensor_desc *d, uint64_t id, char *buf,
              size_t len)
{
    buf[0] = '\0';
    if (kvctl__graph_name(d->name))
        snprintf(buf, len, "a partition's store holds only the rows its "
                 "partition owns: another partition's store, or the job's "
                 "servers (--ip-config FILE), may hold it");
}

const struct kvctl_ops kvctl__store_ops = {
    .open = store_open,
    .close = store_close,
    .fail = store_fail,
    .begin = store_begin,
    .end = store_end,
    .list = store_list,
    .listed = store_listed,
    .state_names = store_state_names,
    .info = store_info,
    .state_info = store_state_info,
    .pull = store_pull,
    .read = store_read,
    .push = store_push,
    .opt_reset = store_opt_reset,
    .create = store_create,
    .remove = store_remove,
    .import = store_import,
    .stat = store_stat,
    .whereis = store_whereis,
    .batch_bytes = SLICE_BYTES,
    .pulls_by_id = 0,
    .describes_chunks = 1,
    .cancel_note = "; the store is unchanged",
};
