/* format.c - what kvctl prints on stdout: aligned tables on a terminal
 * (tab-separated otherwise), "key: value" lines, and with --json one JSON
 * object per command. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kvctl.h"
#include "ops.h"

int
kvctl__out_done(int rc)
{
    if (fflush(stdout) != 0 || ferror(stdout)) {
        kvctl__fail("writing output: %s", strerror(errno));
        return EX_FAIL;
    }
    return rc;
}

int
kvctl__json_print(json_t *o, size_t flags)
{
    int rc;

    if (o == NULL)
        return kvctl__fail("out of memory building JSON");
    rc = json_dumpf(o, stdout, JSON_INDENT(2) | flags);
    json_decref(o);
    if (rc != 0)
        return kvctl__fail("writing JSON: %s", strerror(errno));
    fputc('\n', stdout);
    return kvctl__out_done(EX_OK);
}

/* "1000x128" (rows, then the row shape) or "1000" for scalar rows. */
static void
shape_str(const gkv_tensor_desc *d, uint64_t rows, char *buf, size_t len)
{
    size_t o = (size_t)snprintf(buf, len, "%" PRIu64, rows);

    for (unsigned i = 0; i < d->ndim && o < len; i++)
        o += (size_t)snprintf(buf + o, len - o, "x%" PRIu64, d->shape[i]);
}

static void
row_shape_str(const gkv_tensor_desc *d, char *buf, size_t len)
{
    size_t o = 0;

    buf[0] = '\0';
    if (d->ndim == 0)
        snprintf(buf, len, "scalar");
    for (unsigned i = 0; i < d->ndim && o < len; i++)
        o += (size_t)snprintf(buf + o, len - o, "%s%" PRIu64, i ? "x" : "",
                              d->shape[i]);
}

json_t *
kvctl__json_u64(uint64_t v)
{
    char b[24];

    if (v <= INT64_MAX)
        return json_integer((json_int_t)v);
    /* jansson's integers are signed 64-bit: above that (ranges near 2^64)
     * the exact digits, as a string, rather than a negative number */
    snprintf(b, sizeof b, "%" PRIu64, v);
    return json_string(b);
}

uint64_t
kvctl__desc_bytes(uint64_t rows, size_t row_bytes)
{
    return row_bytes != 0 && rows > UINT64_MAX / row_bytes
           ? UINT64_MAX : rows * row_bytes;
}

/* desc_bytes() as text: the capped value says so */
static const char *
bytes_str(uint64_t v, char *b, size_t len)
{
    snprintf(b, len, "%" PRIu64 "%s", v, v == UINT64_MAX ? " (or more)" : "");
    return b;
}

/* The row shape, after 'rows' when with_rows is set. */
static json_t *
json_shape(const gkv_tensor_desc *d, int with_rows, uint64_t rows)
{
    json_t *a = json_array();

    if (with_rows)
        json_array_append_new(a, kvctl__json_u64(rows));
    for (unsigned i = 0; i < d->ndim; i++)
        json_array_append_new(a, kvctl__json_u64(d->shape[i]));
    return a;
}

/* rows: hi - lo, or with --ip-config the rows the machines hold (fewer
 * when some IDs of [lo, hi) are held by none) */
static json_t *
json_desc(const struct ctx *c, const gkv_tensor_desc *d, uint64_t rows)
{
    int bare = !c->ops->describes_chunks;
    json_t *o = json_object();

    json_object_set_new(o, "name", json_string(d->name));
    json_object_set_new(o, "dtype", json_string(gkv_dtype_name(d->dtype)));
    json_object_set_new(o, "shape", json_shape(d, 1, rows));
    json_object_set_new(o, "row_shape", json_shape(d, 0, 0));
    json_object_set_new(o, "lo", kvctl__json_u64(d->lo));
    json_object_set_new(o, "hi", kvctl__json_u64(d->hi));
    json_object_set_new(o, "rows", kvctl__json_u64(rows));
    json_object_set_new(o, "row_elems", kvctl__json_u64(d->row_elems));
    json_object_set_new(o, "row_bytes", kvctl__json_u64(d->row_bytes));
    json_object_set_new(o, "chunk_rows", kvctl__json_u64(d->chunk_rows));
    /* a server's schema carries neither the chunk count nor the id */
    json_object_set_new(o, "nchunks", bare ? json_null() :
                        kvctl__json_u64(d->nchunks));
    json_object_set_new(o, "bytes",
                        kvctl__json_u64(kvctl__desc_bytes(rows, d->row_bytes)));
    json_object_set_new(o, "hot", json_boolean(d->flags & GKV_TENSOR_HOT));
    json_object_set_new(o, "state", json_boolean(d->is_state));
    json_object_set_new(o, "id", bare ? json_null() : kvctl__json_u64(d->id));
    return o;
}

int
kvctl__elem_str(gkv_dtype dt, const void *row, uint64_t i, char *buf,
               size_t len)
{
    const unsigned char *p = (const unsigned char *)row + i * gkv_dtype_size(dt);

    switch (dt) {
    case GKV_F32: { float v; memcpy(&v, p, 4); return snprintf(buf, len, "%.9g", v); }
    case GKV_F64: { double v; memcpy(&v, p, 8); return snprintf(buf, len, "%.17g", v); }
    case GKV_F16: { uint16_t h; memcpy(&h, p, 2);
                    return snprintf(buf, len, "%.9g", gkv_f16_to_f32(h)); }
    case GKV_BF16: { uint16_t h; memcpy(&h, p, 2);
                     return snprintf(buf, len, "%.9g", gkv_bf16_to_f32(h)); }
    case GKV_I8:  return snprintf(buf, len, "%d", (int)(int8_t)p[0]);
    case GKV_U8:  return snprintf(buf, len, "%u", (unsigned)p[0]);
    case GKV_I32: { int32_t v; memcpy(&v, p, 4); return snprintf(buf, len, "%" PRId32, v); }
    case GKV_I64: { int64_t v; memcpy(&v, p, 8); return snprintf(buf, len, "%" PRId64, v); }
    }
    return snprintf(buf, len, "?");
}

json_t *
kvctl__elem_json(gkv_dtype dt, const void *row, uint64_t i)
{
    const unsigned char *p = (const unsigned char *)row + i * gkv_dtype_size(dt);
    double d;

    switch (dt) {
    case GKV_F32: { float v; memcpy(&v, p, 4); d = v; break; }
    case GKV_F64: memcpy(&d, p, 8); break;
    case GKV_F16: { uint16_t h; memcpy(&h, p, 2); d = gkv_f16_to_f32(h); break; }
    case GKV_BF16: { uint16_t h; memcpy(&h, p, 2); d = gkv_bf16_to_f32(h); break; }
    case GKV_I8:  return json_integer((int8_t)p[0]);
    case GKV_U8:  return json_integer(p[0]);
    case GKV_I32: { int32_t v; memcpy(&v, p, 4); return json_integer(v); }
    case GKV_I64: { int64_t v; memcpy(&v, p, 8); return json_integer(v); }
    default:      return json_null();
    }
    /* JSON has no NaN or infinity */
    return isfinite(d) ? json_real(d) : json_null();
}

/* A small table: aligned columns on a terminal, tab-separated otherwise. */
struct table {
    char **cell;
    size_t ncol, n, cap;
};

static int
table_add(struct table *t, const char *s)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        char **p = realloc(t->cell, cap * sizeof *p);
        if (p == NULL)
            return -1;
        t->cell = p;
        t->cap = cap;
    }
    if ((t->cell[t->n] = strdup(s)) == NULL)
        return -1;
    t->n++;
    return 0;
}

static void
table_print(struct table *t)
{
    int tty = isatty(STDOUT_FILENO);
    size_t w[16] = {0};

    for (size_t i = 0; i < t->n; i++)
        if (strlen(t->cell[i]) > w[i % t->ncol])
            w[i % t->ncol] = strlen(t->cell[i]);
    for (size_t i = 0; i < t->n; i++) {
        size_t col = i % t->ncol;
        int last = col == t->ncol - 1;

        if (tty && !last)
            printf("%-*s  ", (int)w[col], t->cell[i]);
        else
            printf("%s%s", t->cell[i], last ? "\n" : "\t");
    }
}

static void
table_free(struct table *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->cell[i]);
    free(t->cell);
}

void
kvctl__rows_str(gkv_dtype dt, unsigned ndim, const uint64_t *shape, char *buf,
                size_t cap)
{
    size_t o = (size_t)snprintf(buf, cap, "%s [", gkv_dtype_name(dt));

    for (unsigned i = 0; i < ndim && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%" PRIu64, i ? "," : "",
                              shape[i]);
    if (o < cap)
        snprintf(buf + o, cap - o, "]");
}

json_t *
kvctl__server_stat_json(const gkv_server_info *psi,
                        const gkv_server_stats *pst)
{
    const gkv_server_info si = *psi;
    const gkv_server_stats st = *pst;
    json_t *o = json_object();

    json_object_set_new(o, "server", json_string(si.addr));
    json_object_set_new(o, "host", json_string(si.host));
    json_object_set_new(o, "name", json_string(si.name));
    json_object_set_new(o, "store", json_string(si.store));
    json_object_set_new(o, "version", json_string(si.version));
    json_object_set_new(o, "machine", kvctl__json_u64(si.machine));
    json_object_set_new(o, "server_id", kvctl__json_u64(si.server_id));
    json_object_set_new(o, "num_servers", kvctl__json_u64(si.num_servers));
    json_object_set_new(o, "pid", kvctl__json_u64(si.pid));
    json_object_set_new(o, "keep_alive", json_boolean(si.keep_alive));
    json_object_set_new(o, "auth", json_boolean(si.auth));
    json_object_set_new(o, "uptime_ms", kvctl__json_u64(st.uptime_ms));
    json_object_set_new(o, "requests", kvctl__json_u64(st.requests));
    json_object_set_new(o, "errors", kvctl__json_u64(st.errors));
    json_object_set_new(o, "rejected", kvctl__json_u64(st.rejected));
    json_object_set_new(o, "bytes_in", kvctl__json_u64(st.bytes_in));
    json_object_set_new(o, "bytes_out", kvctl__json_u64(st.bytes_out));
    json_object_set_new(o, "pulls", kvctl__json_u64(st.pulls));
    json_object_set_new(o, "pull_rows", kvctl__json_u64(st.pull_rows));
    json_object_set_new(o, "pushes", kvctl__json_u64(st.pushes));
    json_object_set_new(o, "push_rows", kvctl__json_u64(st.push_rows));
    json_object_set_new(o, "samples", kvctl__json_u64(st.samples));
    json_object_set_new(o, "sessions", kvctl__json_u64(st.sessions));
    json_object_set_new(o, "groups", kvctl__json_u64(st.groups));
    json_object_set_new(o, "joined", kvctl__json_u64(st.joined));
    json_object_set_new(o, "ntensors", kvctl__json_u64(st.tensors));
    json_object_set_new(o, "used_bytes", kvctl__json_u64(st.store_used_bytes));
    json_object_set_new(o, "free_bytes", kvctl__json_u64(st.store_free_bytes));
    json_object_set_new(o, "map_size", kvctl__json_u64(st.store_map_size));
    json_object_set_new(o, "reply_mem_bytes",
                        kvctl__json_u64(st.reply_mem_bytes));
    json_object_set_new(o, "reply_mem_max", kvctl__json_u64(st.reply_mem_max));
    json_object_set_new(o, "reply_mem_refused",
                        kvctl__json_u64(st.reply_mem_refused));
    return o;
}

void
kvctl__server_stat_text(const gkv_server_info *psi,
                        const gkv_server_stats *pst)
{
    const gkv_server_info si = *psi;
    const gkv_server_stats st = *pst;

    printf("server:       %s (machine %u, server %u of %u, pid %u)\n", si.addr,
           si.machine, si.server_id, si.num_servers, si.pid);
    printf("host:         %s\n", si.host);
    printf("name:         %s\n", si.name[0] ? si.name : "-");
    printf("store:        %s\n", si.store);
    printf("version:      %s\n", si.version);
    printf("keep-alive:   %s\n", si.keep_alive ? "yes" : "no");
    printf("auth:         %s\n", si.auth ? "token" : "none");
    printf("uptime ms:    %" PRIu64 "\n", st.uptime_ms);
    printf("requests:     %" PRIu64 " (%" PRIu64 " errors, %" PRIu64
           " rejected)\n", st.requests, st.errors, st.rejected);
    printf("bytes:        %" PRIu64 " in, %" PRIu64 " out\n", st.bytes_in,
           st.bytes_out);
    printf("pulls:        %" PRIu64 " (%" PRIu64 " rows)\n", st.pulls,
           st.pull_rows);
    printf("pushes:       %" PRIu64 " (%" PRIu64 " rows)\n", st.pushes,
           st.push_rows);
    printf("samples:      %" PRIu64 " (%" PRIu64 " edges)\n", st.samples,
           st.sample_edges);
    printf("sessions:     %" PRIu64 " in %" PRIu64 " groups (%" PRIu64
           " joined since start)\n", st.sessions, st.groups, st.joined);
    printf("tensors:      %" PRIu64 "\n", st.tensors);
    printf("used bytes:   %" PRIu64 " (%" PRIu64 " of them free for reuse)\n",
           st.store_used_bytes, st.store_free_bytes);
    printf("map size:     %" PRIu64 "\n", st.store_map_size);
    printf("reply memory: %" PRIu64 " bytes held unsent, of %" PRIu64 "%s (%"
           PRIu64 " replies refused)\n", st.reply_mem_bytes,
           st.reply_mem_max, st.reply_mem_max ? "" : " (not bounded)",
           st.reply_mem_refused);
}

/* The server's identity and statistics (kvctl --server ADDR stat); with
 * --ip-config, those of every server of the job, machine-major (text:
 * one block each, a blank line between; JSON: an array "servers"). */

int
kvctl__lsrows(gkv_tensor_desc *v, size_t *n, struct kvctl_lsrow **out)
{
    struct kvctl_lsrow *r = calloc(*n ? *n : 1, sizeof *r);

    if (r == NULL) {
        gkv_free(v);
        *n = 0;
        return kvctl__fail("out of memory");
    }
    for (size_t i = 0; i < *n; i++)
        r[i] = (struct kvctl_lsrow){v[i], v[i].hi - v[i].lo, 0, ""};
    gkv_free(v);
    *out = r;
    return EX_OK;
}

/* With --ip-config one more column, MACHINES: how many of the job's hold
 * each tensor, and what is wrong with it. */
int
kvctl__print_ls(struct ctx *c, const struct kvctl_lsrow *v, size_t n)
{
    static const char *head[] = {"NAME", "DTYPE", "SHAPE", "RANGE",
                                 "CHUNK_ROWS", "BYTES", "MACHINES"};
    int job = c->ipc != NULL, bad = 0;
    struct table t = {.ncol = job ? 7 : 6};

    if (c->json) {
        json_t *o = json_object(), *a = json_array();

        for (size_t i = 0; i < n; i++) {
            json_t *e = json_desc(c, &v[i].d, v[i].rows);

            if (job) {
                json_object_set_new(e, "machines", kvctl__json_u64(v[i].held));
                json_object_set_new(e, "problem", v[i].why[0] ?
                                    json_string(v[i].why) : json_null());
            }
            json_array_append_new(a, e);
        }
        if (job) {
            json_object_set_new(o, "ip_config", json_string(c->ipc));
            json_object_set_new(o, "num_machines", kvctl__json_u64(c->nmach));
        } else {
            json_object_set_new(o, c->server != NULL ? "server" : "store",
                                json_string(c->path));
        }
        json_object_set_new(o, "tensors", a);
        return kvctl__json_print(o, 0);
    }
    for (size_t i = 0; i < t.ncol; i++)
        bad |= table_add(&t, head[i]);
    for (size_t i = 0; i < n && !bad; i++) {
        const gkv_tensor_desc *d = &v[i].d;
        char b[5][96];

        shape_str(d, v[i].rows, b[0], sizeof b[0]);
        snprintf(b[1], sizeof b[1], "[%" PRIu64 ",%" PRIu64 ")", d->lo, d->hi);
        snprintf(b[2], sizeof b[2], "%" PRIu32, d->chunk_rows);
        bytes_str(kvctl__desc_bytes(v[i].rows, d->row_bytes), b[3],
                  sizeof b[3]);
        snprintf(b[4], sizeof b[4], "%zu/%zu%s%s", v[i].held, c->nmach,
                 v[i].why[0] ? " " : "", v[i].why);
        bad |= table_add(&t, d->name);
        bad |= table_add(&t, gkv_dtype_name(d->dtype));
        for (size_t k = 0; k + 2 < t.ncol; k++)
            bad |= table_add(&t, b[k]);
    }
    if (!bad)
        table_print(&t);
    table_free(&t);
    return bad ? kvctl__fail("out of memory") : kvctl__out_done(EX_OK);
}

int
kvctl__print_info(struct ctx *c, const gkv_tensor_desc *d, uint64_t rows,
                  json_t *state)
{
    char shp[128], rshp[128], bb[48];

    if (c->json) {
        json_t *o = json_desc(c, d, rows);
        json_object_set_new(o, "state_tensors", state);
        if (c->ipc != NULL)
            kvctl__job_info(c, d, o);
        return kvctl__json_print(o, 0);
    }
    shape_str(d, rows, shp, sizeof shp);
    row_shape_str(d, rshp, sizeof rshp);
    printf("name:        %s\n", d->name);
    printf("dtype:       %s\n", gkv_dtype_name(d->dtype));
    printf("shape:       %s\n", shp);
    printf("row shape:   %s\n", rshp);
    printf("range:       [%" PRIu64 ", %" PRIu64 ")\n", d->lo, d->hi);
    printf("rows:        %" PRIu64 "\n", rows);
    printf("row elems:   %" PRIu64 "\n", d->row_elems);
    printf("row bytes:   %zu\n", d->row_bytes);
    printf("chunk rows:  %" PRIu32 "\n", d->chunk_rows);
    /* a server's schema carries neither the chunk count nor the id */
    if (c->ops->describes_chunks)
        printf("chunks:      %" PRIu64 "\n", d->nchunks);
    else
        printf("chunks:      -\n");
    printf("bytes:       %s\n", bytes_str(kvctl__desc_bytes(rows, d->row_bytes),
                                          bb, sizeof bb));
    printf("flags:       %s\n", d->flags & GKV_TENSOR_HOT ? "hot" : "-");
    if (c->ops->describes_chunks)
        printf("id:          %" PRIu32 "\n", d->id);
    else
        printf("id:          -\n");
    printf("state:       ");
    if (json_is_null(state) && strchr(d->name, '#') != NULL)
        printf("-");                /* a companion has none of its own */
    else if (json_is_null(state))
        printf("(servers do not list it: get or export %s#adagrad_s, "
               "#adam_m, ... read it; zeros when never pushed)", d->name);
    else if (json_array_size(state) == 0)
        printf("-");
    for (size_t i = 0; i < json_array_size(state); i++)
        printf("%s%s", i ? " " : "", json_string_value(json_array_get(state, i)));
    printf("\n");
    json_decref(state);
    if (c->ipc != NULL)
        kvctl__job_info(c, d, NULL);
    return kvctl__out_done(EX_OK);
}

int
kvctl__print_store_stat(struct ctx *c, const gkv_store_stat *st)
{
    char bb[48];

    if (c->json) {
        json_t *o = json_object();
        json_object_set_new(o, "store", json_string(c->path));
        json_object_set_new(o, "format", kvctl__json_u64(st->format));
        json_object_set_new(o, "map_size", kvctl__json_u64(st->map_size));
        json_object_set_new(o, "used_bytes", kvctl__json_u64(st->used_bytes));
        json_object_set_new(o, "free_bytes", kvctl__json_u64(st->free_bytes));
        json_object_set_new(o, "page_size", kvctl__json_u64(st->page_size));
        json_object_set_new(o, "ntensors", kvctl__json_u64(st->ntensors));
        json_object_set_new(o, "nchunks", kvctl__json_u64(st->nchunks));
        json_object_set_new(o, "data_bytes", kvctl__json_u64(st->data_bytes));
        json_object_set_new(o, "readers", kvctl__json_u64(st->readers));
        json_object_set_new(o, "max_readers", kvctl__json_u64(st->max_readers));
        return kvctl__json_print(o, 0);
    }
    printf("store:        %s\n", c->path);
    printf("format:       %" PRIu32 "\n", st->format);
    printf("map size:     %" PRIu64 "\n", st->map_size);
    printf("used bytes:   %" PRIu64 " (%" PRIu64 " of them free for reuse)\n",
           st->used_bytes, st->free_bytes);
    printf("page size:    %" PRIu64 "\n", st->page_size);
    printf("tensors:      %" PRIu64 "\n", st->ntensors);
    printf("chunks:       %" PRIu64 "\n", st->nchunks);
    printf("data bytes:   %s\n", bytes_str(st->data_bytes, bb, sizeof bb));
    printf("readers:      %u of %u\n", st->readers, st->max_readers);
    return kvctl__out_done(EX_OK);
}

int
kvctl__print_verify(struct ctx *c, const char *name, gkv_err rc,
                    const gkv_verify_report *rep, const char *detail)
{
    if (c->json) {
        json_t *o = json_object();

        json_object_set_new(o, "store", json_string(c->path));
        json_object_set_new(o, "tensor", name ? json_string(name) : json_null());
        json_object_set_new(o, "ok", json_boolean(rc == GKV_OK));
        json_object_set_new(o, "chunks_checked",
                            kvctl__json_u64(rep->chunks_checked));
        json_object_set_new(o, "bytes_checked",
                            kvctl__json_u64(rep->bytes_checked));
        json_object_set_new(o, "bad_chunks", kvctl__json_u64(rep->bad_chunks));
        json_object_set_new(o, "orphan_keys",
                            kvctl__json_u64(rep->orphan_keys));
        if (rc == GKV_ECORRUPT) {
            json_t *f = json_object();
            json_object_set_new(f, "tensor", json_string(rep->first_bad));
            json_object_set_new(f, "chunk",
                                kvctl__json_u64(rep->first_bad_chunk));
            json_object_set_new(f, "row", kvctl__json_u64(rep->first_bad_row));
            json_object_set_new(o, "first_bad", f);
            json_object_set_new(o, "message", json_string(detail));
        }
        return kvctl__json_print(o, 0);
    }
    if (rc == GKV_OK)
        printf("ok: %" PRIu64 " chunks, %" PRIu64 " bytes checked\n",
               rep->chunks_checked, rep->bytes_checked);
    else if (rep->bad_chunks == 0)
        printf("CORRUPT: %" PRIu64 " orphan data keys; %" PRIu64 " chunks "
               "checked, all good\n", rep->orphan_keys, rep->chunks_checked);
    else
        printf("CORRUPT: %" PRIu64 " of %" PRIu64 " chunks bad, %" PRIu64
               " orphan data keys; first: tensor '%s' chunk %" PRIu64
               " (from row %" PRIu64 ")\n", rep->bad_chunks,
               rep->chunks_checked, rep->orphan_keys, rep->first_bad,
               rep->first_bad_chunk, rep->first_bad_row);
    return kvctl__out_done(EX_OK);
}
