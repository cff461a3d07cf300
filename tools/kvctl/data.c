/* data.c - the commands that write rows or read them all: put, create,
 * import, export.
 *
 * Import maps FILE and checks it here, then hands it to the backend
 * (ops.h): into a store all or nothing, through servers batch by batch.
 * Export writes FILE.tmp-PID and renames it over FILE at the end; with
 * --server it pulls the rows through the servers in batches. Both stop
 * cleanly on SIGINT and SIGTERM. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
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

void
kvctl__block_signals(int block)
{
    sigset_t set;

    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigprocmask(block ? SIG_BLOCK : SIG_UNBLOCK, &set, NULL);
}

/* Checks a tensor name the way the store does, with room for 'reserve'
 * more bytes (the import suffix). 0 when good, else -1 with 'why'. */
int
kvctl__name_check(const char *name, size_t reserve, char *why, size_t len)
{
    size_t n = strlen(name);

    if (n == 0)
        return snprintf(why, len, "empty tensor name"), -1;
    if (n + reserve > GKV_NAME_MAX)
        return snprintf(why, len, "tensor name of %zu bytes is too long (at most "
                        "%zu here)", n, GKV_NAME_MAX - reserve), -1;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)name[i];
        if (ch < 0x21 || ch > 0x7e)
            return snprintf(why, len, "tensor name '%.64s': byte %zu is not "
                            "printable ASCII (spaces are not allowed)", name, i), -1;
        if (ch == '#')
            return snprintf(why, len, "tensor name '%.64s': '#' is reserved for "
                            "optimizer state", name), -1;
    }
    return 0;
}

/* ---- put ---------------------------------------------------------------- */

/* One number of a put, checked against dtype dt and stored at out. */
static int
value_parse(const char *tok, gkv_dtype dt, void *out)
{
    static const struct { gkv_dtype dt; double lo, hi; } lim[] = {
        {GKV_I8, -128, 127}, {GKV_U8, 0, 255},
        {GKV_I32, -2147483648.0, 2147483647.0},
    };
    char *end;
    double v, back;

    if (dt == GKV_I64 || dt == GKV_I32 || dt == GKV_I8 || dt == GKV_U8) {
        long long iv;

        errno = 0;
        iv = strtoll(tok, &end, 10);
        if (errno != 0 || *end != '\0' || end == tok) {
            /* "1e3" is an integer too, if it is a whole number */
            errno = 0;
            v = strtod(tok, &end);
            if (errno != 0 || *end != '\0' || end == tok || v != floor(v) ||
                !(v >= -9223372036854775808.0 && v < 9223372036854775808.0))
                return -1;
            iv = (long long)v;
        }
        if (dt == GKV_I64) {
            int64_t x = iv;
            memcpy(out, &x, 8);
            return 0;
        }
        for (size_t i = 0; i < sizeof lim / sizeof lim[0]; i++)
            if (lim[i].dt == dt && ((double)iv < lim[i].lo || (double)iv > lim[i].hi))
                return -1;
        if (dt == GKV_I32) {
            int32_t x = (int32_t)iv;
            memcpy(out, &x, 4);
        } else if (dt == GKV_I8) {
            int8_t x = (int8_t)iv;
            memcpy(out, &x, 1);
        } else {
            *(unsigned char *)out = (unsigned char)iv;
        }
        return 0;
    }
    errno = 0;
    v = strtod(tok, &end);
    if (end == tok || *end != '\0' || (errno == ERANGE && isinf(v)))
        return -1;
    switch (dt) {
    case GKV_F64: memcpy(out, &v, 8); back = v; break;
    case GKV_F32: { float x = (float)v; memcpy(out, &x, 4); back = x; break; }
    case GKV_F16: { uint16_t h = gkv_f32_to_f16((float)v); memcpy(out, &h, 2);
                    back = gkv_f16_to_f32(h); break; }
    case GKV_BF16: { uint16_t h = gkv_f32_to_bf16((float)v); memcpy(out, &h, 2);
                     back = gkv_bf16_to_f32(h); break; }
    default: return -1;
    }
    /* a finite number too large for the dtype is refused, not stored as
     * infinity ("inf" itself is fine) */
    return isinf(back) && !isinf(v) ? -1 : 0;
}

/* Splits args into tokens at commas and whitespace: a malloc'd array of
 * pointers into a malloc'd copy (*store). */
static char **
split_values(char **args, int n, size_t *count, char **store)
{
    size_t len = 1, m = 0;
    char *buf, **tok;

    for (int i = 0; i < n; i++)
        len += strlen(args[i]) + 1;
    if ((buf = malloc(len)) == NULL || (tok = malloc(len * sizeof *tok)) == NULL) {
        free(buf);
        return NULL;
    }
    buf[0] = '\0';
    for (int i = 0; i < n; i++) {
        strcat(buf, args[i]);
        strcat(buf, " ");
    }
    for (char *p = strtok(buf, ", \t\n"); p != NULL; p = strtok(NULL, ", \t\n"))
        tok[m++] = p;
    *count = m;
    *store = buf;
    return tok;
}

int
kvctl__cmd_put(struct ctx *c)
{
    const char *name = c->args[0];
    gkv_push_args pa;
    gkv_tensor_desc d;
    struct origmap map = {.n = 0};
    uint64_t id, orig;
    unsigned char *row = NULL;
    char **tok = NULL, *tokbuf = NULL, *end;
    size_t ntok = 0;
    gkv_err rc;
    int ex;

    memset(&pa, 0, sizeof pa);
    if (tools__parse_u64(c->args[1], &id) != 0)
        return kvctl__usage_error("put: '%s' is not an ID (a non-negative "
                                  "integer)", c->args[1]);
    if (c->opt[O_LR] != NULL) {
        errno = 0;
        pa.lr = strtod(c->opt[O_LR], &end);
        if (errno != 0 || *end != '\0' || end == c->opt[O_LR] || !(pa.lr > 0))
            return kvctl__usage_error("--lr '%s' is not a positive number",
                                      c->opt[O_LR]);
    }
    pa.handler = c->opt[O_HANDLER];
    if ((tok = split_values(c->args + 2, c->nargs - 2, &ntok, &tokbuf)) == NULL)
        return kvctl__fail("out of memory");
    /* syntax first, so that bad values are a usage error whatever the store */
    for (size_t i = 0; i < ntok; i++) {
        strtod(tok[i], &end);
        if (end == tok[i] || *end != '\0') {
            ex = kvctl__usage_error("put: '%s' is not a number", tok[i]);
            goto out;
        }
    }
    if (ntok == 0) {
        ex = kvctl__usage_error("put: no VALUES");
        goto out;
    }
    if ((ex = c->ops->open(c, 0)) != EX_OK)
        goto out;
    if ((rc = c->ops->info(c, name, &d)) != GKV_OK) {
        ex = kvctl__fail_on(c, rc, "tensor '%s'", name);
        goto out;
    }
    if (ntok != d.row_elems) {
        ex = kvctl__usage_error("put: tensor '%s' rows hold %" PRIu64 " "
                                "values, got %zu", name, d.row_elems, ntok);
        goto out;
    }
    /* an original ID: the row of its new ID */
    orig = id;
    if (c->opt[O_ORIG_IDS] != NULL &&
        ((ex = kvctl__origmap_load(&map, "put", c->opt[O_ORIG_IDS])) != EX_OK ||
         (ex = kvctl__origmap_fits(c, &map, "put", c->opt[O_ORIG_IDS], &d)) !=
         EX_OK ||
         (ex = kvctl__origmap_id(&map, "put", c->opt[O_ORIG_IDS], orig, &id)) !=
         EX_OK))
        goto out;
    if (id < d.lo || id >= d.hi) {
        ex = kvctl__fail_id(c, &d, id, c->opt[O_ORIG_IDS] != NULL ? &orig :
                            NULL);
        goto out;
    }
    if ((row = malloc(d.row_bytes)) == NULL) {
        ex = kvctl__fail("out of memory");
        goto out;
    }
    for (size_t i = 0; i < ntok; i++)
        if (value_parse(tok[i], d.dtype, row + i * gkv_dtype_size(d.dtype)) != 0) {
            ex = kvctl__usage_error("put: '%s' is not a value of dtype %s",
                                    tok[i], gkv_dtype_name(d.dtype));
            goto out;
        }
    if ((rc = c->ops->push(c, name, &id, 1, row, d.row_bytes, &pa)) != GKV_OK)
        ex = kvctl__fail_on(c, rc, "tensor '%s': put row %" PRIu64, name, id);
out:
    kvctl__origmap_close(&map);
    free(row);
    free(tok);
    free(tokbuf);
    return ex;
}

/* ---- create ------------------------------------------------------------- */

/* "A" or "A,B" of finite numbers after the initializer's colon. */
static int
init_nums(const char *s, int want, double *a, double *b)
{
    char *end;

    errno = 0;
    *a = strtod(s, &end);
    if (end == s || errno != 0 || !isfinite(*a))
        return -1;
    if (want == 1)
        return *end == '\0' ? 0 : -1;
    if (*end != ',')
        return -1;
    s = end + 1;
    *b = strtod(s, &end);
    if (end == s || errno != 0 || !isfinite(*b) || *end != '\0')
        return -1;
    return 0;
}

static int
init_parse(const char *s, gkv_tensor_spec *sp)
{
    if (strcmp(s, "zeros") == 0) {
        sp->init = GKV_INIT_ZEROS;
        return 0;
    }
    if (strncmp(s, "const:", 6) == 0) {
        sp->init = GKV_INIT_CONST;
        return init_nums(s + 6, 1, &sp->a, &sp->b);
    }
    /* the store's own rules (a < b, std >= 0) checked here too, so that a
     * bad value is a usage error like a malformed one */
    if (strncmp(s, "uniform:", 8) == 0) {
        sp->init = GKV_INIT_UNIFORM;
        return init_nums(s + 8, 2, &sp->a, &sp->b) == 0 && sp->a < sp->b ? 0 : -1;
    }
    if (strncmp(s, "normal:", 7) == 0) {
        sp->init = GKV_INIT_NORMAL;
        return init_nums(s + 7, 2, &sp->a, &sp->b) == 0 && sp->b >= 0 ? 0 : -1;
    }
    return -1;
}

/* --hot and --chunk-rows, shared by create and import. */
static int
chunk_opts(struct ctx *c, gkv_tensor_spec *sp)
{
    uint64_t v;

    if (c->opt[O_HOT] != NULL)
        sp->flags |= GKV_TENSOR_HOT;
    if (c->opt[O_CHUNK_ROWS] != NULL) {
        if (tools__parse_u64(c->opt[O_CHUNK_ROWS], &v) != 0 || v == 0 ||
            v > UINT32_MAX)
            return kvctl__usage_error("--chunk-rows '%s' is not a count from 1 "
                                      "to %u", c->opt[O_CHUNK_ROWS],
                                      UINT32_MAX);
        sp->chunk_rows = (uint32_t)v;
    }
    return EX_OK;
}

int
kvctl__cmd_create(struct ctx *c)
{
    const char *name = c->args[0];
    gkv_tensor_spec sp;
    int nd, ex;

    memset(&sp, 0, sizeof sp);
    if (c->opt[O_DTYPE] == NULL)
        return kvctl__usage_error("create: --dtype is required");
    if (gkv_dtype_parse(c->opt[O_DTYPE], &sp.dtype) != GKV_OK)
        return kvctl__usage_error("create: unknown dtype '%s' (f32 f16 bf16 "
                                  "f64 i8 u8 i32 i64)", c->opt[O_DTYPE]);
    if (c->opt[O_RANGE] == NULL)
        return kvctl__usage_error("create: --range LO:HI is required");
    if (tools__parse_range(c->opt[O_RANGE], &sp.lo, &sp.hi) != 0)
        return kvctl__usage_error("create: --range '%s' is not LO:HI with LO < "
                                  "HI", c->opt[O_RANGE]);
    if (c->opt[O_SHAPE] != NULL) {
        if ((nd = tools__parse_dims(c->opt[O_SHAPE], sp.shape, GKV_MAX_DIMS)) < 0)
            return kvctl__usage_error("create: --shape '%s' is not 1 to %d "
                                      "dims D1[,D2..], each >= 1",
                                      c->opt[O_SHAPE], GKV_MAX_DIMS);
        sp.ndim = (unsigned)nd;
    }
    if (c->opt[O_INIT] != NULL && init_parse(c->opt[O_INIT], &sp) != 0)
        return kvctl__usage_error("create: --init '%s' is not zeros, const:A, "
                                  "uniform:A,B (A < B) or normal:MEAN,STD (STD "
                                  ">= 0)", c->opt[O_INIT]);
    if (c->opt[O_SEED] != NULL && tools__parse_u64(c->opt[O_SEED], &sp.seed) != 0)
        return kvctl__usage_error("create: --seed '%s' is not a non-negative "
                                  "integer", c->opt[O_SEED]);
    if ((ex = chunk_opts(c, &sp)) != EX_OK)
        return ex;
    return c->ops->create(c, name, &sp);
}

int
kvctl__cmd_import(struct ctx *c)
{
    const char *name = c->args[0], *file = c->args[1];
    char why[512], msg[512];
    uint64_t dims[GKV_MAX_DIMS], rows;
    int raw = c->opt[O_DTYPE] != NULL || c->opt[O_DIM] != NULL;
    int nd = 0, ex = EX_FAIL;
    int state = strchr(name, '#') != NULL;   /* a companion: a restore */
    gkv_npy_map m = {0};
    struct origmap om, *omp = NULL;
    struct kvctl_import im;
    gkv_tensor_spec sp;
    gkv_dtype dt = GKV_F32;
    gkv_err rc;

    memset(&sp, 0, sizeof sp);
    memset(&om, 0, sizeof om);
    /* ---- arguments: usage errors before any file or store is touched */
    if (c->opt[O_ORIG_IDS] != NULL && c->opt[O_LO] != NULL)
        return kvctl__usage_error("import: --orig-ids gives the rows' IDs; "
                                  "--lo does not go with it");
    if (raw) {
        if (c->opt[O_DTYPE] == NULL || c->opt[O_DIM] == NULL)
            return kvctl__usage_error("import: raw input needs both --dtype "
                                      "and --dim");
        if (gkv_dtype_parse(c->opt[O_DTYPE], &dt) != GKV_OK)
            return kvctl__usage_error("import: unknown dtype '%s' (f32 f16 "
                                      "bf16 f64 i8 u8 i32 i64)",
                                      c->opt[O_DTYPE]);
        if ((nd = tools__parse_dims(c->opt[O_DIM], dims, GKV_MAX_DIMS)) < 0)
            return kvctl__usage_error("import: --dim '%s' is not 1 to %d dims "
                                      "D1[,D2..], each >= 1", c->opt[O_DIM],
                                      GKV_MAX_DIMS);
    }
    if (c->opt[O_LO] != NULL && tools__parse_u64(c->opt[O_LO], &sp.lo) != 0)
        return kvctl__usage_error("import: --lo '%s' is not a non-negative "
                                  "integer", c->opt[O_LO]);
    if ((ex = chunk_opts(c, &sp)) != EX_OK)
        return ex;
    if (state && (c->opt[O_REPLACE] != NULL || c->opt[O_HOT] != NULL ||
                  c->opt[O_CHUNK_ROWS] != NULL))
        return kvctl__usage_error("import: --replace, --hot and --chunk-rows "
                                  "do not apply to optimizer state '%s' (it "
                                  "has its tensor's chunking, and is "
                                  "overwritten)", name);
    if (!state && kvctl__name_check(name, strlen(IMPORT_TAG) + 10, why,
                                    sizeof why) != 0)
        return kvctl__fail("import: %s", why);

    tools__catch_signals();

    /* ---- the input, mapped and checked before the store is opened */
    if (raw) {
        unsigned char head[8];
        ssize_t r = -1;
        int fd = open(file, O_RDONLY | O_CLOEXEC);

        if (fd >= 0) {
            r = pread(fd, head, sizeof head, 0);
            close(fd);
        }
        if (r > 0 && gkv_npy_is_npy(head, (size_t)r))
            return kvctl__usage_error("import: '%s' is a .npy file; --dtype "
                                      "and --dim are for raw files", file);
        rc = gkv_npy_map_raw(&m, file, dt, (unsigned)nd, dims, msg, sizeof msg);
    } else {
        rc = gkv_npy_map_open(&m, file, msg, sizeof msg);
        if (rc == GKV_EFORMAT && strstr(msg, "bad magic") != NULL)
            snprintf(msg + strlen(msg), sizeof msg - strlen(msg),
                     "; for raw rows give --dtype and --dim");
    }
    if (rc == GKV_EFORMAT)
        return kvctl__fail("import '%s': %s: %s", file, gkv_strerror(rc), msg);
    if (rc != GKV_OK)
        return kvctl__fail("import '%s': %s", file, msg);
    rows = m.hdr.shape[0];
    if (rows == 0) {
        ex = kvctl__fail("import '%s': the file holds no rows", file);
        goto out;
    }
    for (unsigned i = 1; i < m.hdr.ndim; i++)
        if (m.hdr.shape[i] == 0) {
            ex = kvctl__fail("import '%s': row dim %u is 0: rows would hold "
                             "nothing", file, i - 1);
            goto out;
        }
    if (rows > UINT64_MAX - sp.lo) {
        ex = kvctl__fail("import '%s': --lo %" PRIu64 " + %" PRIu64 " rows is "
                         "past 2^64", file, sp.lo, rows);
        goto out;
    }
    sp.dtype = m.hdr.dtype;
    sp.ndim = m.hdr.ndim - 1;
    for (unsigned i = 0; i < sp.ndim; i++)
        sp.shape[i] = m.hdr.shape[i + 1];
    sp.hi = sp.lo + rows;
    sp.init = GKV_INIT_ZEROS;           /* unwritten zeros cost nothing */
    if (c->opt[O_ORIG_IDS] != NULL) {
        gkv_tensor_desc td = {.hi = 0};     /* only its name is asked */

        snprintf(td.name, sizeof td.name, "%s", name);
        if ((ex = kvctl__origmap_open(&om, c->opt[O_ORIG_IDS], file, rows))
            != EX_OK ||
            (ex = kvctl__origmap_fits(c, &om, "import", c->opt[O_ORIG_IDS],
                                      &td)) != EX_OK)
            goto out;
        omp = &om;
        ex = EX_FAIL;
        /* the IDs are the mapping's: a new tensor starts at its lowest
         * (an export --orig-ids of a tensor from ID 10 comes back there) */
        sp.lo = om.min;
        sp.hi = om.min + rows;
    }
    im.name = name;
    im.file = file;
    im.m = &m;
    im.sp = &sp;
    im.state = state;
    im.om = omp;
    ex = c->ops->import(c, &im);
out:
    gkv_npy_map_close(&m);
    kvctl__origmap_close(&om);
    c->ops->close(c, ex != EX_OK);
    if (tools__got_signal && ex != EX_OK) {
        kvctl__fail("import of '%s' interrupted by %s%s", name,
                    tools__got_signal == SIGINT ? "SIGINT" : "SIGTERM",
                    c->ops->cancel_note);
        return tools__die_of_signal(tools__got_signal);
    }
    kvctl__block_signals(0);
    return ex;
}

/* ---- export ------------------------------------------------------------- */

static int
write_all(int fd, const void *buf, size_t len)
{
    const unsigned char *p = buf;

    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -1;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

/* Where export's rows come from: the store, in one read snapshot, or the
 * servers, pulled batch by batch. */
struct rowsrc {
    struct ctx *c;
    const char *name;
    int zeros;                   /* optimizer state not created yet */
    size_t row_bytes;
    uint64_t *ids;               /* a batch of IDs, when pulled by ID */
};

/* Rows ids[0..n) into buf. EX_OK, or EX_FAIL with the message printed. */
static int
src_ids(struct rowsrc *r, const uint64_t *ids, size_t n, void *buf)
{
    gkv_err rc;

    if (r->zeros) {
        memset(buf, 0, n * r->row_bytes);
        return EX_OK;
    }
    if ((rc = r->c->ops->pull(r->c, r->name, ids, n, buf, n * r->row_bytes))
        != GKV_OK)
        return kvctl__fail_on(r->c, rc, "export: tensor '%s'", r->name);
    return EX_OK;
}

/* Rows [a, a + n) into buf, as src_ids(). */
static int
src_range(struct rowsrc *r, uint64_t a, size_t n, void *buf)
{
    gkv_err rc;

    if (r->zeros) {
        memset(buf, 0, n * r->row_bytes);
        return EX_OK;
    }
    if ((rc = r->c->ops->read(r->c, r->name, a, n, buf, n * r->row_bytes,
                              r->ids)) != GKV_OK)
        return kvctl__fail_on(r->c, rc, "export: tensor '%s'", r->name);
    return EX_OK;
}

/* Maps --orig-ids FILE (the partitioner's mapping/node-<ntype>.npy: int64,
 * entry i the new ID of original ID i) and checks that every new ID is a
 * row of the tensor, [lo, hi). *count gets the entries. */
static int
orig_ids_open(struct ctx *c, const char *file, const gkv_tensor_desc *d,
              struct origmap *m, uint64_t *count)
{
    const char *as = c->ipc != NULL ? " as the job's machines hold it" :
                     c->server != NULL ? " as the server holds it" : "";
    int ex;

    if ((ex = kvctl__origmap_load(m, "export", file)) != EX_OK ||
        (ex = kvctl__origmap_fits(c, m, "export", file, d)) != EX_OK)
        return ex;
    *count = m->n;
    for (uint64_t i = 0; i < *count; i++) {
        int64_t v = (int64_t)kvctl__origmap_at(m, i);

        if (v < 0 || (uint64_t)v < d->lo || (uint64_t)v >= d->hi)
            return kvctl__fail("export: --orig-ids '%s': %s: original ID %"
                               PRIu64 " maps to %" PRId64 ", which is not a "
                               "row of tensor '%s' [%" PRIu64 ", %" PRIu64
                               ")%s", file, gkv_strerror(GKV_ERANGE), i, v,
                               d->name, d->lo, d->hi, as);
    }
    return EX_OK;
}

int
kvctl__cmd_export(struct ctx *c)
{
    const char *name = c->args[0], *file = c->args[1];
    const char *orig = c->opt[O_ORIG_IDS];
    int raw = c->opt[O_RAW] != NULL, fd = -1, ex = EX_FAIL;
    uint64_t a = 0, b = 0, rows, shape[GKV_NPY_MAX_DIMS], step, at;
    unsigned char *buf = NULL;
    char *tmp = NULL, msg[512];
    tools_progress bar = {0};
    struct origmap map = {.n = 0};
    struct rowsrc src = {0};
    gkv_tensor_desc d;
    struct stat sb;
    gkv_err rc;

    if (c->opt[O_RANGE] != NULL && tools__parse_range(c->opt[O_RANGE], &a, &b) != 0)
        return kvctl__usage_error("export: --range '%s' is not A:B with A < B",
                                  c->opt[O_RANGE]);
    if (orig != NULL && c->opt[O_RANGE] != NULL)
        return kvctl__usage_error("export: --orig-ids and --range do not go "
                                  "together");
    src.c = c;
    src.name = name;
    if ((ex = c->ops->open(c, GKV_RDONLY)) != EX_OK)
        return ex;
    ex = EX_FAIL;
    /* one snapshot: the file is the tensor as of one moment (a store's) */
    if (c->ops->begin(c) != EX_OK)
        goto out;
    if (strchr(name, '#') != NULL) {
        int exists;

        if ((rc = c->ops->state_info(c, name, &d, &exists)) == GKV_OK)
            src.zeros = !exists;
    } else {
        rc = c->ops->info(c, name, &d);
    }
    if (rc != GKV_OK) {
        /* worded as ever: servers name the command, a store the tensor */
        kvctl__fail_on(c, rc, c->remote ? "export: tensor '%s'" :
                       strchr(name, '#') != NULL ? "'%.64s'" : "tensor '%s'",
                       name);
        goto out;
    }
    src.row_bytes = d.row_bytes;
    if (c->opt[O_RANGE] == NULL) {
        a = d.lo;
        b = d.hi;
    } else if (a < d.lo || b > d.hi) {
        kvctl__fail("export: tensor '%s': %s: rows [%" PRIu64 ", %" PRIu64 ") "
                    "are not inside [%" PRIu64 ", %" PRIu64 ")", name,
                    gkv_strerror(GKV_ERANGE), a, b, d.lo, d.hi);
        goto out;
    }
    if (!raw && gkv_npy_descr(d.dtype) == NULL) {
        kvctl__fail("export: tensor '%s' is %s, which .npy cannot hold; use "
                    "--raw", name, gkv_dtype_name(d.dtype));
        goto out;
    }
    /* the whole job: every row to write is held by some machine */
    if (c->ipc != NULL) {
        gkv_tensor_desc bd = d;     /* a companion is where its tensor is */

        kvctl__base_name(d.name, bd.name);
        if (kvctl__job_check(c, "export", &bd, a, b) != EX_OK)
            goto out;
    }
    rows = b - a;
    if (orig != NULL && orig_ids_open(c, orig, &d, &map, &rows) != EX_OK)
        goto out;
    if (stat(file, &sb) == 0 && !S_ISREG(sb.st_mode)) {
        /* the rename at the end would replace a FIFO, device or directory */
        kvctl__fail("export: '%s' exists and is not a regular file", file);
        goto out;
    }
    if (asprintf(&tmp, "%s.tmp-%ld", file, (long)getpid()) < 0) {
        tmp = NULL;
        kvctl__fail("out of memory");
        goto out;
    }
    /* the backend's step (a server answers within its timeout) */
    step = c->ops->batch_bytes / d.row_bytes;
    if (step == 0)
        step = 1;
    if ((c->ops->pulls_by_id || orig != NULL) && step > (1u << 20))
        step = 1u << 20;            /* the ID list: 8 MiB at most */
    if ((buf = malloc(step * d.row_bytes)) == NULL ||
        ((c->ops->pulls_by_id || orig != NULL) &&
         (src.ids = malloc(step * sizeof *src.ids)) == NULL)) {
        kvctl__fail("out of memory");
        goto out;
    }
    tools__catch_signals();
    if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0) {
        kvctl__fail("export: cannot create '%s': %s", tmp, strerror(errno));
        goto out;
    }
    if (!raw) {
        shape[0] = rows;
        for (unsigned i = 0; i < d.ndim; i++)
            shape[i + 1] = d.shape[i];
        if ((rc = gkv_npy_write_header(fd, d.dtype, d.ndim + 1, shape, NULL, msg,
                                       sizeof msg)) != GKV_OK) {
            kvctl__fail("export: '%s': %s: %s", tmp, gkv_strerror(rc), msg);
            goto out;
        }
    }
    snprintf(msg, sizeof msg, "export %s", name);
    tools__progress_start(&bar, msg, rows * d.row_bytes);
    for (at = 0; at < rows && !tools__got_signal; ) {
        size_t n = (size_t)(rows - at < step ? rows - at : step);
        int got;

        if (orig != NULL) {
            for (size_t i = 0; i < n; i++)
                src.ids[i] = kvctl__origmap_at(&map, at + i);
            got = src_ids(&src, src.ids, n, buf);
        } else {
            got = src_range(&src, a + at, n, buf);
        }
        if (got != EX_OK) {
            tools__progress_end(&bar, 0);
            goto out;
        }
        if (write_all(fd, buf, n * d.row_bytes) != 0) {
            tools__progress_end(&bar, 0);
            kvctl__fail("export: writing '%s': %s", tmp, strerror(errno));
            goto out;
        }
        at += n;
        tools__progress_update(&bar, at * d.row_bytes);
    }
    kvctl__block_signals(1);
    if (tools__got_signal) {
        tools__progress_end(&bar, 0);
        goto out;
    }
    if (fsync(fd) != 0 || close(fd) != 0) {
        fd = -1;
        tools__progress_end(&bar, 0);
        kvctl__fail("export: writing '%s': %s", tmp, strerror(errno));
        goto out;
    }
    fd = -1;
    if (rename(tmp, file) != 0) {
        tools__progress_end(&bar, 0);
        kvctl__fail("export: cannot rename '%s' to '%s': %s", tmp, file,
                    strerror(errno));
        goto out;
    }
    tools__progress_end(&bar, 1);
    free(tmp);
    tmp = NULL;
    ex = EX_OK;
out:
    if (fd >= 0)
        close(fd);
    if (tmp != NULL)
        unlink(tmp);             /* harmless when it was never made */
    free(tmp);
    free(buf);
    free(src.ids);
    kvctl__origmap_close(&map);
    c->ops->end(c);
    if (tools__got_signal && ex != EX_OK) {
        kvctl__fail("export of '%s' interrupted by %s; no file written", name,
                    tools__got_signal == SIGINT ? "SIGINT" : "SIGTERM");
        return tools__die_of_signal(tools__got_signal);
    }
    kvctl__block_signals(0);
    return ex;
}
