/* kvctl - inspect and administer a gkv store directory.
 *
 *   kvctl [-h|--help] [-V|--version] [--json] STORE COMMAND [ARGS]
 *   kvctl [--json] --server HOST:PORT [--token-file F] [--group NAME]
 *         ls|info|get|stat|export [ARGS]
 *   kvctl [--json] --ip-config FILE [--token-file F] [--group NAME]
 *         ls|info|get|stat|export [ARGS]
 *
 * With --server, kvctl asks a running gkv-server instead of opening a
 * store: it joins as an observer (GKV_CLIENT_OBSERVER), so its leaving
 * never stops the server, even one without --keep-alive whose job has not
 * started or is running (the server stops when its last non-observer
 * client leaves, as before).
 *
 * With --ip-config, kvctl asks every server of the job, the same way: it
 * first reads what each machine's store holds from the machine's server 0
 * (the servers of a machine share one store), then connects to the whole
 * job as a training client would (gkv_client_connect), whose pulls are
 * routed by ID range. So ls, info and export see the whole tensor, and
 * kvctl can say which machine holds which rows, or which hold none.
 *
 * Commands: ls, info, get, put, create, import, export, reset-opt, rm,
 * rename, verify, stat (see usage() below and doc/man/kvctl.1). kvctl uses only the public
 * API (gkv.h), so it doubles as an example of it.
 *
 * Exit status: 0 ok; 1 the operation failed (the reason on stderr, as
 * "kvctl: WHAT: gkv_strerror: detail"); 2 bad usage. --help prints to
 * stdout and exits 0.
 *
 * Import is all-or-nothing: rows go into a temporary tensor
 * NAME.kvctl-import-PID, slice by slice, and only a complete one is renamed
 * to NAME. A failure, SIGINT or SIGTERM deletes the temporary tensor; only
 * kill -9 (or a crash) can leave it behind, and `kvctl STORE rm` removes it.
 * Export writes FILE.tmp-PID and renames it over FILE at the end; with
 * --server it pulls the rows through the servers in batches.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "gkv.h"
#include "idlist.h"
#include "progress.h"
#include "util.h"

#define PROG "kvctl"
#define SLICE_BYTES (64u << 20)          /* import/export step: one txn each */
#define IMPORT_TAG ".kvctl-import-"

enum { EX_OK = 0, EX_FAIL = 1, EX_USAGE = 2 };

/* ---- options ------------------------------------------------------------- */

enum opt {
    O_ALL, O_DTYPE, O_SHAPE, O_RANGE, O_INIT, O_SEED, O_HOT, O_CHUNK_ROWS,
    O_DIM, O_LO, O_REPLACE, O_RAW, O_HANDLER, O_LR, O_SERVER, O_TOKEN_FILE,
    O_GROUP, O_ORIG_IDS, O_IP_CONFIG, NOPT
};

static const struct {
    const char *name;
    int has_arg;
} optdefs[NOPT] = {
    [O_ALL] = {"--all", 0},          [O_DTYPE] = {"--dtype", 1},
    [O_SHAPE] = {"--shape", 1},      [O_RANGE] = {"--range", 1},
    [O_INIT] = {"--init", 1},        [O_SEED] = {"--seed", 1},
    [O_HOT] = {"--hot", 0},          [O_CHUNK_ROWS] = {"--chunk-rows", 1},
    [O_DIM] = {"--dim", 1},          [O_LO] = {"--lo", 1},
    [O_REPLACE] = {"--replace", 0},  [O_RAW] = {"--raw", 0},
    [O_HANDLER] = {"--handler", 1},  [O_LR] = {"--lr", 1},
    [O_SERVER] = {"--server", 1},    [O_TOKEN_FILE] = {"--token-file", 1},
    [O_GROUP] = {"--group", 1},      [O_ORIG_IDS] = {"--orig-ids", 1},
    [O_IP_CONFIG] = {"--ip-config", 1},
};

#define BIT(o) (1u << (o))
/* options of every command (that only a server connection uses) */
#define GLOBAL_OPTS (BIT(O_SERVER) | BIT(O_TOKEN_FILE) | BIT(O_GROUP) | \
                     BIT(O_IP_CONFIG))

/* --ip-config: what one machine's store holds, as its server 0 said */
struct jobmach {
    char addr[300];              /* its server 0: "host:port" */
    unsigned line;               /* its line in the ip_config */
    gkv_tensor_desc *t;          /* its tensors (gkv_free) */
    size_t nt;
};

struct ctx {
    const char *path;            /* STORE */
    const struct cmd *cmd;
    char **args;                 /* positionals after COMMAND */
    int nargs;
    int json;
    const char *opt[NOPT];       /* value, or "" for a flag; NULL if unset */
    gkv_store *s;
    int made_dir, made_files;    /* this run created the store (undo on failure) */
    const char *server;          /* --server HOST:PORT, else NULL */
    const char *ipc;             /* --ip-config FILE, else NULL */
    int remote;                  /* --server or --ip-config: no store */
    char where[4200];            /* "server ADDR" or "the job in 'FILE'" */
    gkv_client *cl;              /* the connection (to the whole job) */
    struct jobmach *jm;          /* --ip-config: machine by machine */
    size_t nmach;
    unsigned nserv;              /* servers per machine */
};

struct cmd {
    const char *name;
    int (*fn)(struct ctx *);
    int min_args, max_args;
    unsigned opts;               /* BIT(O_*) it accepts */
    const char *synopsis;        /* after "kvctl STORE " */
    const char *help;            /* what it does, then its options */
};

static int cmd_ls(struct ctx *), cmd_info(struct ctx *), cmd_get(struct ctx *),
    cmd_put(struct ctx *), cmd_create(struct ctx *), cmd_import(struct ctx *),
    cmd_export(struct ctx *), cmd_rm(struct ctx *), cmd_rename(struct ctx *),
    cmd_verify(struct ctx *), cmd_stat(struct ctx *), cmd_reset_opt(struct ctx *);

static const struct cmd cmds[] = {
    {"ls", cmd_ls, 0, 0, BIT(O_ALL), "ls [--all]",
     "Lists the tensors: name, dtype, shape (rows x row shape), ID range\n"
     "[lo, hi), rows per chunk and bytes of rows. Tab-separated when stdout\n"
     "is not a terminal.\n\n"
     "  --all    also list optimizer-state companions (NAME#adam_m, ...)\n"},
    {"info", cmd_info, 1, 1, 0, "info NAME",
     "Describes tensor NAME: dtype, shapes, range, chunking, flags and its\n"
     "optimizer-state companions.\n"},
    {"get", cmd_get, 2, 2, 0, "get NAME IDS",
     "Prints the rows with the given global IDs, one per line:\n"
     "\"ID: v0 v1 ...\" (f32 as %.9g, f64 as %.17g, f16 and bf16 widened to\n"
     "f32, integers as integers). Every ID is checked against the tensor's\n"
     "range before anything is printed.\n\n"
     "IDS: 1,5,9 | 10:20 (half-open: 10..19) | 1,5,10:20 | @FILE (IDs or\n"
     "ranges separated by whitespace, newlines or commas)\n"},
    {"put", cmd_put, 3, -1, BIT(O_HANDLER) | BIT(O_LR), "put NAME ID VALUES...",
     "Writes one row: VALUES are exactly as many numbers as a row holds,\n"
     "separated by commas or spaces (one argument or several).\n\n"
     "  --handler H  how to combine with the stored row: assign (default),\n"
     "               add, or an optimizer (sgd, adagrad, adam; VALUES is\n"
     "               then the gradient)\n"
     "  --lr X       learning rate for the optimizers (default 0.01)\n"},
    {"create", cmd_create, 1, 1,
     BIT(O_DTYPE) | BIT(O_SHAPE) | BIT(O_RANGE) | BIT(O_INIT) | BIT(O_SEED) |
     BIT(O_HOT) | BIT(O_CHUNK_ROWS),
     "create NAME --dtype DT --range LO:HI [--shape D1[,D2..]] [--init SPEC]\n"
     "                     [--seed N] [--hot] [--chunk-rows N]",
     "Creates tensor NAME (and the store, if missing) and fills every row.\n\n"
     "  --dtype DT       f32 f16 bf16 f64 i8 u8 i32 i64 (required)\n"
     "  --range LO:HI    global row IDs [LO, HI) (required)\n"
     "  --shape D1,..    row shape, up to 4 dims (default: one scalar per row)\n"
     "  --init SPEC      zeros (default), const:A, uniform:A,B, normal:MEAN,STD\n"
     "  --seed N         initializer seed (default 0)\n"
     "  --hot            small chunks, for rows pushed every step\n"
     "  --chunk-rows N   rows per chunk (default: chosen from the row size)\n"},
    {"import", cmd_import, 2, 2,
     BIT(O_DTYPE) | BIT(O_DIM) | BIT(O_LO) | BIT(O_REPLACE) | BIT(O_HOT) |
     BIT(O_CHUNK_ROWS) | BIT(O_ORIG_IDS),
     "import NAME FILE [--dtype DT --dim D1[,D2..]] [--lo N | --orig-ids\n"
     "                     MAPPING.npy] [--replace] [--hot] [--chunk-rows N]",
     "Loads FILE as tensor NAME, creating the store if missing. FILE is a\n"
     ".npy file (found by its magic; C order, little-endian, dtypes <f4 <f2\n"
     "<f8 |i1 |u1 |b1 <i4 <i8; bool |b1 is stored as u8 0/1) whose first dim\n"
     "is the rows, or raw rows when --dtype and --dim are given. All or\n"
     "nothing: on any failure, SIGINT or SIGTERM the store is left as it was.\n\n"
     "  --dtype DT       raw input: element type (also bf16)\n"
     "  --dim D1,..      raw input: row shape; the row count is the file\n"
     "                   size / row bytes\n"
     "  --lo N           global ID of the first row (default 0)\n"
     "  --replace        replace an existing tensor NAME (else it is an error)\n"
     "  --hot, --chunk-rows N   chunking, as for create\n"
     "  --orig-ids MAPPING.npy\n"
     "                   row i of FILE is the row of new ID MAPPING[i]: a file\n"
     "                   in original-ID order (export --orig-ids wrote it)\n"
     "                   with gkv-partition's mapping/node-NTYPE.npy; into a\n"
     "                   store or a new tensor the new IDs must be\n"
     "                   consecutive (the tensor starts at the lowest), into\n"
     "                   an existing tensor through servers IDs it holds\n\n"
     "With --server or --ip-config the rows are pushed (assign) through the\n"
     "servers, batch by batch: a missing NAME is created first (split across\n"
     "the machines as create splits it) and removed again if the import\n"
     "fails; an existing one needs --replace and keeps its range and\n"
     "chunking (the file must have its dtype and row shape; --lo defaults\n"
     "to its first ID); its rows are overwritten in place, and an import\n"
     "that fails midway says which rows it wrote: run it again.\n\n"
     "NAME may be an optimizer-state companion of tensor T (T#adam_m,\n"
     "T#adam_v, T#adam_t, T#adagrad_s: restoring a checkpoint): FILE must\n"
     "hold the companion's rows (f32 in T's row shape, f64 for an f64 T,\n"
     "int64 step counts >= 0 for T#adam_t), --lo defaults to T's first ID,\n"
     "the rows are written in one transaction (created zero-filled if\n"
     "missing) and --replace, --hot and --chunk-rows do not apply.\n"},
    {"export", cmd_export, 2, 2, BIT(O_RAW) | BIT(O_RANGE) | BIT(O_ORIG_IDS),
     "export NAME FILE [--raw] [--range A:B | --orig-ids MAPPING.npy]",
     "Writes tensor NAME to FILE as .npy (a bf16 tensor needs --raw). FILE\n"
     "appears only when complete: rows go to FILE.tmp-PID, renamed at the end.\n"
     "With --server the rows are pulled from the running servers (what a\n"
     "write-back server holds in memory, not its store's lagging copy); with\n"
     "--ip-config from every machine of the job, so FILE holds the whole\n"
     "tensor (an error, naming the machines, when some of its rows are held\n"
     "by none, or a server is down).\n\n"
     "  --raw          write the rows only, no header\n"
     "  --range A:B    only rows [A, B)\n"
     "  --orig-ids MAPPING.npy\n"
     "                 row i of FILE is the row of new ID MAPPING[i]: with\n"
     "                 gkv-partition's mapping/node-NTYPE.npy (original ID ->\n"
     "                 new ID, int64), rows in original-ID order\n\n"
     "NAME may be an optimizer-state companion (T#adam_m, ...: a checkpoint\n"
     "of T's optimizer); one not created yet (T never pushed with that\n"
     "optimizer) exports as zeros, locally and through servers.\n"},
    {"reset-opt", cmd_reset_opt, 1, 2, 0, "reset-opt NAME [adagrad|adam]",
     "Drops the optimizer state of tensor NAME (gkv_opt_reset): the\n"
     "companions of adagrad or adam (default: both); the next push with that\n"
     "optimizer starts fresh (adam at step 1). The rows are not changed.\n"
     "To checkpoint optimizer state, export NAME#adam_m, NAME#adam_v,\n"
     "NAME#adam_t and NAME#adagrad_s (a companion never used exports as\n"
     "zeros); to restore it, import those files to the same names.\n"},
    {"rm", cmd_rm, 1, 1, 0, "rm NAME",
     "Deletes tensor NAME with its optimizer state (also a tensor left by an\n"
     "interrupted import, NAME.kvctl-import-PID).\n"},
    {"rename", cmd_rename, 2, 2, 0, "rename FROM TO",
     "Renames tensor FROM (and its optimizer state) to TO.\n"},
    {"verify", cmd_verify, 0, 1, 0, "verify [NAME]",
     "Recomputes the checksum of every chunk of NAME (default: all tensors).\n"
     "Exit status 1 when any chunk is corrupt; the first bad one is named.\n"},
    {"stat", cmd_stat, 0, 0, 0, "stat",
     "Prints store statistics: format, map size, bytes in use, page size,\n"
     "tensors, chunks, row bytes and reader slots.\n"},
};
#define NCMDS (sizeof cmds / sizeof cmds[0])

static const struct cmd *
cmd_find(const char *name)
{
    for (size_t i = 0; name != NULL && i < NCMDS; i++)
        if (strcmp(cmds[i].name, name) == 0)
            return &cmds[i];
    return NULL;
}

static void
usage(FILE *f)
{
    fputs(
"Usage: kvctl [-h|--help] [-V|--version] [--json] STORE COMMAND [ARGS]\n"
"\n"
"Inspects and administers the gkv tensor store in directory STORE.\n"
"\n"
"Commands:\n"
"  ls [--all]              list tensors (--all: with optimizer state)\n"
"  info NAME               describe a tensor\n"
"  get NAME IDS            print rows, one per line: \"ID: v0 v1 ...\"\n"
"  put NAME ID VALUES...   write one row [--handler H] [--lr X]\n"
"  create NAME --dtype DT --range LO:HI [--shape D1[,D2..]]\n"
"         [--init zeros|const:A|uniform:A,B|normal:MEAN,STD] [--seed N]\n"
"         [--hot] [--chunk-rows N]\n"
"                          make a tensor filled by an initializer\n"
"  import NAME FILE        load a .npy file, or raw rows with --dtype DT\n"
"         --dim D1[,D2..]; [--lo N] [--replace] [--hot] [--chunk-rows N]\n"
"  export NAME FILE        write a .npy file [--raw] [--range A:B]\n"
"         [--orig-ids MAPPING.npy]\n"
"  reset-opt NAME [adagrad|adam]\n"
"                          drop a tensor's optimizer state\n"
"  rm NAME                 delete a tensor and its optimizer state\n"
"  rename FROM TO          rename a tensor\n"
"  verify [NAME]           check the checksum of every chunk\n"
"  stat                    store statistics\n"
"\n"
"       kvctl [--json] --server HOST:PORT [--token-file F] [--group NAME]\n"
"             COMMAND [ARGS]       (every command but rename and verify)\n"
"       kvctl [--json] --ip-config FILE [--token-file F] [--group NAME]\n"
"             COMMAND [ARGS]       (the same)\n"
"\n"
"Options:\n"
"  --json         ls, info, get, verify and stat print one JSON object\n"
"                 (before or after the command)\n"
"  --server HOST:PORT  work through a running gkv-server instead of\n"
"                 opening a store (what it holds in memory, write-back\n"
"                 tensors included); kvctl joins as an observer: its\n"
"                 leaving never stops the server\n"
"  --ip-config FILE  work through every server of the job FILE lists (the\n"
"                 ip_config gkv-server and gkv-launch take): whole\n"
"                 tensors, split across the machines; info says which\n"
"                 machine holds which rows; stat shows every server;\n"
"                 create and import split a new tensor as trainers'\n"
"                 creates do; also as an observer\n"
"  --token-file F the job's token, when the servers require one\n"
"  --group NAME   the group kvctl joins (default kvctl)\n"
"  -h, --help     show this help; `kvctl COMMAND --help` shows a command's\n"
"  -V, --version  show the version\n"
"\n"
"IDS: 1,5,9 | 10:20 (half-open) | 1,5,10:20 | @FILE\n"
"Read-only commands (ls, info, get, export, verify, stat) never create or\n"
"change the store; create and import create it when missing. Through\n"
"servers an import is batch by batch, not one transaction.\n"
"Optimizer state: export and import take NAME#adam_m, NAME#adam_v,\n"
"NAME#adam_t, NAME#adagrad_s (checkpoint and restore); reset-opt drops it.\n"
"Exit status: 0 ok, 1 the operation failed, 2 usage error. See kvctl(1).\n",
          f);
}

static void
cmd_usage(const struct cmd *c, FILE *f)
{
    fprintf(f, "Usage: kvctl [--json] STORE %s\n\n%s", c->synopsis, c->help);
}

/* ---- messages -------------------------------------------------------------- */

static const char *usage_cmd;    /* for "Try 'kvctl CMD --help'" */

static int
usage_error(const char *fmt, ...)
{
    va_list ap;

    fputs(PROG ": ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    if (usage_cmd != NULL)
        fprintf(stderr, "\nTry 'kvctl %s --help'.\n", usage_cmd);
    else
        fputs("\nTry 'kvctl --help'.\n", stderr);
    return EX_USAGE;
}

static int
fail(const char *fmt, ...)
{
    va_list ap;

    fputs(PROG ": ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return EX_FAIL;
}

/* "kvctl: WHAT: strerror(rc): detail" with the store's message for this
 * thread (or the open message when s is NULL). */
static int
fail_gkv(const gkv_store *s, gkv_err rc, const char *fmt, ...)
{
    const char *detail = gkv_store_errmsg(s);
    va_list ap;

    fputs(PROG ": ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, ": %s", gkv_strerror(rc));
    if (detail != NULL && *detail != '\0')
        fprintf(stderr, " (%s)", detail);
    fputc('\n', stderr);
    return EX_FAIL;
}

/* Flushes stdout; a failed write (disk full, closed pipe) is a failure. */
static int
out_done(int rc)
{
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fail("writing output: %s", strerror(errno));
        return EX_FAIL;
    }
    return rc;
}

static int
json_print(json_t *o, size_t flags)
{
    int rc;

    if (o == NULL)
        return fail("out of memory building JSON");
    rc = json_dumpf(o, stdout, JSON_INDENT(2) | flags);
    json_decref(o);
    if (rc != 0)
        return fail("writing JSON: %s", strerror(errno));
    fputc('\n', stdout);
    return out_done(EX_OK);
}

/* ---- signals ------------------------------------------------------------- */

static void
block_signals(int block)
{
    sigset_t set;

    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigprocmask(block ? SIG_BLOCK : SIG_UNBLOCK, &set, NULL);
}

/* ---- the store ------------------------------------------------------------- */

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

    if (flags & GKV_CREATE) {
        char data[4096];

        if (stat(c->path, &sb) != 0 && errno == ENOENT) {
            c->made_dir = 1;
        } else if ((size_t)snprintf(data, sizeof data, "%s/data.mdb", c->path)
                   < sizeof data && stat(data, &sb) != 0 && errno == ENOENT) {
            c->made_files = 1;
        }
    }
    if ((rc = gkv_store_open(&c->s, c->path, flags, NULL)) != GKV_OK) {
        /* the open may fail after making the files (the map cannot be
         * reserved, the disk is full): take them away again */
        store_undo(c);
        return fail_gkv(NULL, rc, "store '%s'", c->path);
    }
    return EX_OK;
}

/* Closes the store; when this run created it and 'undo' is set, removes
 * what the creation made, so a failed create or import leaves no store
 * behind where there was none. */
static void
store_close(struct ctx *c, int undo)
{
    gkv_store_close(c->s);
    c->s = NULL;
    if (undo)
        store_undo(c);
}

/* ---- formatting ------------------------------------------------------------ */

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

static json_t *
json_u64(uint64_t v)
{
    char b[24];

    if (v <= INT64_MAX)
        return json_integer((json_int_t)v);
    /* jansson's integers are signed 64-bit: above that (ranges near 2^64)
     * the exact digits, as a string, rather than a negative number */
    snprintf(b, sizeof b, "%" PRIu64, v);
    return json_string(b);
}

/* A tensor's declared bytes, (hi - lo) x row bytes; UINT64_MAX when that
 * is 2^64 or more (ranges near 2^64). */
static uint64_t
desc_bytes(uint64_t rows, size_t row_bytes)
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
        json_array_append_new(a, json_u64(rows));
    for (unsigned i = 0; i < d->ndim; i++)
        json_array_append_new(a, json_u64(d->shape[i]));
    return a;
}

/* rows: hi - lo, or with --ip-config the rows the machines hold (fewer
 * when some IDs of [lo, hi) are held by none) */
static json_t *
json_desc(const gkv_tensor_desc *d, uint64_t rows, int remote)
{
    json_t *o = json_object();

    json_object_set_new(o, "name", json_string(d->name));
    json_object_set_new(o, "dtype", json_string(gkv_dtype_name(d->dtype)));
    json_object_set_new(o, "shape", json_shape(d, 1, rows));
    json_object_set_new(o, "row_shape", json_shape(d, 0, 0));
    json_object_set_new(o, "lo", json_u64(d->lo));
    json_object_set_new(o, "hi", json_u64(d->hi));
    json_object_set_new(o, "rows", json_u64(rows));
    json_object_set_new(o, "row_elems", json_u64(d->row_elems));
    json_object_set_new(o, "row_bytes", json_u64(d->row_bytes));
    json_object_set_new(o, "chunk_rows", json_u64(d->chunk_rows));
    /* a server's schema carries neither the chunk count nor the id */
    json_object_set_new(o, "nchunks", remote ? json_null() : json_u64(d->nchunks));
    json_object_set_new(o, "bytes", json_u64(desc_bytes(rows, d->row_bytes)));
    json_object_set_new(o, "hot", json_boolean(d->flags & GKV_TENSOR_HOT));
    json_object_set_new(o, "state", json_boolean(d->is_state));
    json_object_set_new(o, "id", remote ? json_null() : json_u64(d->id));
    return o;
}

/* Element i of a row of dtype dt, as text. */
static int
elem_str(gkv_dtype dt, const void *row, uint64_t i, char *buf, size_t len)
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

static json_t *
elem_json(gkv_dtype dt, const void *row, uint64_t i)
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

/* ---- names ------------------------------------------------------------- */

/* Checks a tensor name the way the store does, with room for 'reserve'
 * more bytes (the import suffix). 0 when good, else -1 with 'why'. */
static int
name_check(const char *name, size_t reserve, char *why, size_t len)
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


/* ---- a running server (--server) ------------------------------------------ */

/* "kvctl: WHAT: strerror(rc) (the client's detail)". */
static int
fail_net(gkv_err rc, const char *fmt, ...)
{
    const char *detail = gkv_net_errmsg();
    va_list ap;

    fputs(PROG ": ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    if (tools__err_text(rc, detail) == NULL) {
        fprintf(stderr, ": %s\n", detail);
        return EX_FAIL;
    }
    fprintf(stderr, ": %s", gkv_strerror(rc));
    if (detail != NULL && *detail != '\0')
        fprintf(stderr, " (%s)", detail);
    fputc('\n', stderr);
    return EX_FAIL;
}

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
        return fail("%s%s: cannot resolve host '%s': %s", what, where, host,
                    gai_strerror(e));
    freeaddrinfo(res);
    if (!tools__port_accepts(host, port, 1000))
        return fail("%s%s is down: nothing accepts connections there", what,
                    where);
    return EX_OK;
}

/* Connects to c->server as an observer of group --group (default "kvctl");
 * the rank is the process ID, so two kvctl runs never share a session. */
static int
server_open(struct ctx *c)
{
    gkv_client_opts o = {0};
    char token[GKV_TOKEN_MAX + 1];
    const char *group = c->opt[O_GROUP] != NULL ? c->opt[O_GROUP] : "kvctl";
    gkv_err rc;

    if (c->opt[O_TOKEN_FILE] != NULL &&
        (rc = gkv_token_load(c->opt[O_TOKEN_FILE], token, sizeof token)) != GKV_OK)
        return fail_net(rc, "token file '%s'", c->opt[O_TOKEN_FILE]);
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
        return fail_net(rc, "server %s%s", c->server, rc == GKV_ETIMEDOUT ?
                        " (something accepts connections there but did not "
                        "answer as a gkv-server: another program's port, or "
                        "a server too busy to answer)" : "");
    return EX_OK;
}

static void
server_close(struct ctx *c)
{
    gkv_client_close(c->cl);
    c->cl = NULL;
    for (size_t m = 0; m < c->nmach && c->jm != NULL; m++)
        gkv_free(c->jm[m].t);
    free(c->jm);
    c->jm = NULL;
    c->nmach = 0;
}

/* fail_gkv() on a store; fail_net(), naming the servers, through them. */
static int
fail_any(struct ctx *c, gkv_err rc, const char *fmt, ...)
{
    char what[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return c->remote ? fail_net(rc, "%s on %s", what, c->where) :
                       fail_gkv(c->s, rc, "%s", what);
}

/* ---- the whole job (--ip-config) ------------------------------------------ */

/* Server k of machine mc: "host:port" ("[v6]:port"), as the client names it. */
static void
mach_addr(const gkv_machine *mc, unsigned k, char *buf, size_t len)
{
    snprintf(buf, len, strchr(mc->host, ':') != NULL ? "[%s]:%u" : "%s:%u",
             mc->host, mc->port + k);
}

/* Connects to the job of ip_config c->ipc, as an observer like
 * server_open(). First a quick look at each server's port, so that a
 * server that is down is named at once rather than after the handshake's
 * timeout; then what each machine's store holds, from its server 0 (that
 * connection is closed again: the job's client joins with the same group
 * and rank, which would replace its session); then the whole job, with
 * the servers per machine that server 0 of machine 0 reported. */
static int
job_open(struct ctx *c)
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
            return fail_net(rc, "token file '%s'", c->opt[O_TOKEN_FILE]);
        tok = token;
    }
    if ((rc = gkv_ipconfig_load(&cfg, c->ipc)) != GKV_OK) {
        /* GKV_ENOENT's text speaks of stores: say what it means here */
        if (rc == GKV_ENOENT || rc == GKV_EPERM || rc == GKV_EIO)
            fail("ip_config '%s': cannot read it: %s (%s)", c->ipc,
                 gkv_net_errmsg(), gkv_err_name(rc));
        else
            fail_net(rc, "ip_config '%s'", c->ipc);
        goto out;
    }
    c->nmach = gkv_ipconfig_count(cfg);
    if ((c->jm = calloc(c->nmach, sizeof *c->jm)) == NULL) {
        c->nmach = 0;
        fail("out of memory");
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
            fail_net(rc, "server 0 of machine %zu at %s", m, j->addr);
            gkv_client_close(one);
            goto out;
        }
        gkv_client_close(one);
        if (si.machine != m || si.server_id != 0) {
            fail("the server at %s is server %u of machine %u, but '%s' line "
                 "%u makes it server 0 of machine %zu (another job's ip_config, "
                 "or a reordered one?)", j->addr, si.server_id, si.machine,
                 c->ipc, mc->line, m);
            goto out;
        }
        if (m == 0) {
            c->nserv = si.num_servers ? si.num_servers : 1;
        } else if (si.num_servers != c->nserv) {
            fail("machine %zu (%s) runs %u servers, machine 0 runs %u: not "
                 "one job", m, j->addr, si.num_servers, c->nserv);
            goto out;
        }
    }
    for (size_t m = 0; m < c->nmach; m++) {
        const gkv_machine *mc = gkv_ipconfig_machine(cfg, m);
        for (unsigned k = 1; k < c->nserv; k++)
            if (!tools__port_accepts(mc->host, mc->port + k, 1000)) {
                mach_addr(mc, k, addr, sizeof addr);
                fail("server %u of machine %zu at %s ('%s' line %u) is down: "
                     "nothing accepts connections there", k, m, addr, c->ipc,
                     mc->line);
                goto out;
            }
    }
    o.num_servers = c->nserv;
    if ((rc = gkv_client_connect(&c->cl, c->ipc, tok, group, (uint32_t)getpid(),
                                 &o)) != GKV_OK) {
        fail_net(rc, "the job in '%s'", c->ipc);
        goto out;
    }
    ex = EX_OK;
out:
    memset(token, 0, sizeof token);
    gkv_ipconfig_free(cfg);
    return ex;
}

/* Connects to the server or the job when a command first needs it: after
 * it has checked its own arguments, so that a usage error is one (exit 2)
 * whether or not the servers answer. */
static int
remote_ready(struct ctx *c)
{
    if (c->cl != NULL)
        return EX_OK;
    return c->server != NULL ? server_open(c) : job_open(c);
}

/* The store, or (--server, --ip-config) the connection. */
static int
target_open(struct ctx *c, unsigned flags)
{
    return c->remote ? remote_ready(c) : store_open(c, flags);
}

static const gkv_tensor_desc *
jm_find(const struct jobmach *j, const char *name)
{
    for (size_t i = 0; i < j->nt; i++)
        if (strcmp(j->t[i].name, name) == 0)
            return &j->t[i];
    return NULL;
}

/* One machine's rows of a tensor. */
struct jspan {
    uint64_t lo, hi;
    size_t m;
};

/* The machines' ranges of tensor 'name', sorted by lo (the job's client
 * has checked that they are disjoint): a malloc'd array of *n, NULL when
 * no machine holds it. *rows gets the rows they hold together. */
static struct jspan *
job_spans(const struct ctx *c, const char *name, size_t *n, uint64_t *rows)
{
    struct jspan *sp = malloc((c->nmach ? c->nmach : 1) * sizeof *sp);

    *n = 0;
    *rows = 0;
    if (sp == NULL)
        return NULL;
    for (size_t m = 0; m < c->nmach; m++) {
        const gkv_tensor_desc *d = jm_find(&c->jm[m], name);
        size_t i;

        if (d == NULL)
            continue;
        for (i = *n; i > 0 && sp[i - 1].lo > d->lo; i--)
            sp[i] = sp[i - 1];
        sp[i] = (struct jspan){d->lo, d->hi, m};
        (*n)++;
        *rows += d->hi - d->lo;
    }
    if (*n == 0) {
        free(sp);
        return NULL;
    }
    return sp;
}

/* "machine 0 at ADDR [0, 50), machine 1 at ADDR none" */
static void
job_holders_str(const struct ctx *c, const char *name, char *buf, size_t len)
{
    size_t o = 0;

    buf[0] = '\0';
    for (size_t m = 0; m < c->nmach && o < len; m++) {
        const gkv_tensor_desc *d = jm_find(&c->jm[m], name);

        if (d != NULL)
            o += (size_t)snprintf(buf + o, len - o, "%smachine %zu at %s [%"
                                  PRIu64 ", %" PRIu64 ")", m ? ", " : "", m,
                                  c->jm[m].addr, d->lo, d->hi);
        else
            o += (size_t)snprintf(buf + o, len - o, "%smachine %zu at %s "
                                  "none", m ? ", " : "", m, c->jm[m].addr);
    }
}

/* The type count a graph job's feature must span: node/NTYPE/NAME holds
 * [0, nodes of NTYPE), edge/SRC:REL:DST/NAME [0, edges of the type).
 * 1 with *count and *what ("nodes of type '_N'") set; 0 for any other
 * tensor or a job without a partitioned graph. */
static int
graph_span(const struct ctx *c, const char *name, uint64_t *count, char *what,
           size_t len)
{
    const gkv_pbook *b = gkv_client_pbook(c->cl);
    int node = strncmp(name, "node/", 5) == 0, t;
    const char *slash;
    char type[GKV_NAME_MAX + 1];
    int64_t k;

    if (b == NULL || (!node && strncmp(name, "edge/", 5) != 0) ||
        (slash = strchr(name + 5, '/')) == NULL ||
        (size_t)(slash - name - 5) >= sizeof type)
        return 0;
    memcpy(type, name + 5, (size_t)(slash - name - 5));
    type[slash - name - 5] = '\0';
    if (node ? gkv_pbook_ntype_find(b, type, &t) != GKV_OK :
               gkv_pbook_etype_find(b, type, &t) != GKV_OK)
        return 0;
    k = node ? gkv_pbook_num_nodes(b, t) : gkv_pbook_num_edges(b, t);
    if (k < 0)
        return 0;
    *count = (uint64_t)k;
    snprintf(what, len, "%s of type '%s'", node ? "nodes" : "edges", type);
    return 1;
}

/* Before an export of rows [a, b) of tensor d from the whole job: fails,
 * naming every machine and what it holds, when some of those rows are held
 * by no machine, or when a partitioned graph's feature does not span its
 * type (a machine whose partition should hold some of it does not); notes
 * on stderr that some machines hold none of a tensor others split. */
static int
job_check(struct ctx *c, const char *verb, const gkv_tensor_desc *d,
          uint64_t a, uint64_t b)
{
    char holders[2048], what[GKV_NAME_MAX + 32];
    uint64_t rows, count;
    struct jspan *sp;
    size_t n;
    int ex = EX_OK;

    if ((sp = job_spans(c, d->name, &n, &rows)) == NULL)
        return fail("%s: tensor '%s': %s: no machine of '%s' holds it",
                    verb, d->name, gkv_strerror(GKV_ENOTFOUND), c->ipc);
    job_holders_str(c, d->name, holders, sizeof holders);
    if (graph_span(c, d->name, &count, what, sizeof what) &&
        (d->lo != 0 || d->hi != count || rows != count)) {
        ex = fail("%s: tensor '%s' is inconsistent across the job: the "
                  "%" PRIu64 " %s need rows [0, %" PRIu64 "), but the "
                  "machines hold %" PRIu64 " rows: %s", verb, d->name, count, what,
                  count, rows, holders);
        goto out;
    }
    for (size_t i = 1; i < n; i++) {
        uint64_t g0 = sp[i - 1].hi, g1 = sp[i].lo;

        if (g0 < g1 && g0 < b && g1 > a) {
            ex = fail("%s: tensor '%s' is inconsistent across the job: "
                      "no machine holds rows [%" PRIu64 ", %" PRIu64 "): %s",
                      verb, d->name, g0, g1, holders);
            goto out;
        }
    }
    if (n < c->nmach && n > 1)
        fprintf(stderr, PROG ": note: tensor '%s' is held by %zu of the %zu "
                "machines: %s\n", d->name, n, c->nmach, holders);
out:
    free(sp);
    return ex;
}

/* One server's stat as a JSON object. */
static json_t *
stat_json(const gkv_server_info *psi, const gkv_server_stats *pst)
{
    const gkv_server_info si = *psi;
    const gkv_server_stats st = *pst;
    json_t *o = json_object();

    json_object_set_new(o, "server", json_string(si.addr));
    json_object_set_new(o, "host", json_string(si.host));
    json_object_set_new(o, "name", json_string(si.name));
    json_object_set_new(o, "store", json_string(si.store));
    json_object_set_new(o, "version", json_string(si.version));
    json_object_set_new(o, "machine", json_u64(si.machine));
    json_object_set_new(o, "server_id", json_u64(si.server_id));
    json_object_set_new(o, "num_servers", json_u64(si.num_servers));
    json_object_set_new(o, "pid", json_u64(si.pid));
    json_object_set_new(o, "keep_alive", json_boolean(si.keep_alive));
    json_object_set_new(o, "auth", json_boolean(si.auth));
    json_object_set_new(o, "uptime_ms", json_u64(st.uptime_ms));
    json_object_set_new(o, "requests", json_u64(st.requests));
    json_object_set_new(o, "errors", json_u64(st.errors));
    json_object_set_new(o, "rejected", json_u64(st.rejected));
    json_object_set_new(o, "bytes_in", json_u64(st.bytes_in));
    json_object_set_new(o, "bytes_out", json_u64(st.bytes_out));
    json_object_set_new(o, "pulls", json_u64(st.pulls));
    json_object_set_new(o, "pull_rows", json_u64(st.pull_rows));
    json_object_set_new(o, "pushes", json_u64(st.pushes));
    json_object_set_new(o, "push_rows", json_u64(st.push_rows));
    json_object_set_new(o, "samples", json_u64(st.samples));
    json_object_set_new(o, "sessions", json_u64(st.sessions));
    json_object_set_new(o, "groups", json_u64(st.groups));
    json_object_set_new(o, "joined", json_u64(st.joined));
    json_object_set_new(o, "ntensors", json_u64(st.tensors));
    json_object_set_new(o, "used_bytes", json_u64(st.store_used_bytes));
    json_object_set_new(o, "free_bytes", json_u64(st.store_free_bytes));
    json_object_set_new(o, "map_size", json_u64(st.store_map_size));
    return o;
}

/* One server's stat as text. */
static void
stat_text(const gkv_server_info *psi, const gkv_server_stats *pst)
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
}

/* The server's identity and statistics (kvctl --server ADDR stat); with
 * --ip-config, those of every server of the job, machine-major (text:
 * one block each, a blank line between; JSON: an array "servers"). */
static int
stat_server(struct ctx *c)
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
            return fail_net(rc, "server %s", c->server != NULL ? c->server :
                            si.addr);
        }
        if (c->json && all == NULL)
            return json_print(stat_json(&si, &st), 0);
        if (c->json) {
            json_array_append_new(all, stat_json(&si, &st));
            continue;
        }
        if (i > 0)
            putchar('\n');
        stat_text(&si, &st);
    }
    if (c->json) {
        json_t *o = json_object();
        json_object_set_new(o, "ip_config", json_string(c->ipc));
        json_object_set_new(o, "servers", all);
        return json_print(o, 0);
    }
    json_decref(all);
    return out_done(EX_OK);
}

/* ---- ls, info, stat -------------------------------------------------------- */

/* A NAME.kvctl-import-PID tensor whose process is gone was left by an
 * import killed with -9: say how to remove it. */
static void
note_leftover(const struct ctx *c, const char *name)
{
    const char *tag = strstr(name, IMPORT_TAG);
    uint64_t pid;

    if (tag == NULL || tools__parse_u64(tag + strlen(IMPORT_TAG), &pid) != 0 ||
        pid == 0 || pid > INT32_MAX)
        return;
    if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
        return;                         /* that import may still be running */
    fprintf(stderr, PROG ": note: '%s' is left from an interrupted import; "
            "remove it with: kvctl %s rm '%s'\n", name, c->path, name);
}

/* The tensor 'name' names: itself, or for a state companion (T#adam_m)
 * its tensor, whose rows it has on every machine (the machines' lists
 * hold no companions). Into buf (GKV_NAME_MAX + 1 bytes). */
static const char *
base_name(const char *name, char *buf)
{
    snprintf(buf, GKV_NAME_MAX + 1, "%s", name);
    buf[strcspn(buf, "#")] = '\0';
    return buf;
}

/* With --ip-config: the rows the machines hold of tensor d and how many
 * machines hold it; else hi - lo (and 0). */
static uint64_t
rows_of(const struct ctx *c, const gkv_tensor_desc *d, size_t *holders)
{
    uint64_t rows = d->hi - d->lo, held;
    char base[GKV_NAME_MAX + 1];
    struct jspan *sp;

    *holders = 0;
    if (c->ipc != NULL &&
        (sp = job_spans(c, base_name(d->name, base), holders, &held)) !=
        NULL) {
        rows = held;
        free(sp);
    }
    return rows;
}

static int
name_cmp(const void *a, const void *b)
{
    return strcmp(((const gkv_tensor_desc *)a)->name,
                  ((const gkv_tensor_desc *)b)->name);
}

/* ls with --ip-config: every tensor of every machine's list, once, with
 * the range from the lowest to the highest ID a machine holds (lo, hi) and
 * the rows they hold together. Built from the machines' lists rather than
 * the job client's, which refuses the whole list for one tensor the
 * machines disagree on, such as a partition's own graph structure
 * (csc/...: each partition's local IDs, so the machines' ranges overlap);
 * such a tensor is listed with what is wrong in 'why' ("" when whole).
 * Returns a malloc'd array of *n sorted by name, NULL when out of memory. */
struct jtensor {
    gkv_tensor_desc d;           /* lo, hi: over the machines */
    uint64_t rows;               /* held by the machines together */
    size_t held;                 /* machines that hold it */
    const char *why;             /* "", "overlapping ranges", "rows differ" */
};

static struct jtensor *
job_list(const struct ctx *c, size_t *n)
{
    gkv_tensor_desc *all;
    struct jtensor *v;
    size_t total = 0, k = 0;

    *n = 0;
    for (size_t m = 0; m < c->nmach; m++)
        total += c->jm[m].nt;
    if ((all = malloc((total ? total : 1) * sizeof *all)) == NULL ||
        (v = malloc((total ? total : 1) * sizeof *v)) == NULL) {
        free(all);
        return NULL;
    }
    total = 0;
    for (size_t m = 0; m < c->nmach; m++)
        for (size_t i = 0; i < c->jm[m].nt; i++)
            all[total++] = c->jm[m].t[i];
    qsort(all, total, sizeof *all, name_cmp);
    for (size_t i = 0; i < total; i++) {
        struct jtensor *t;
        struct jspan *sp;
        size_t ns;

        if (i > 0 && strcmp(all[i].name, all[i - 1].name) == 0) {
            t = &v[k - 1];
            if (all[i].dtype != t->d.dtype || all[i].ndim != t->d.ndim ||
                all[i].row_bytes != t->d.row_bytes ||
                memcmp(all[i].shape, t->d.shape,
                       all[i].ndim * sizeof all[i].shape[0]) != 0)
                t->why = "rows differ";
            continue;
        }
        t = &v[k++];
        t->d = all[i];
        t->why = "";
        if ((sp = job_spans(c, t->d.name, &ns, &t->rows)) == NULL)
            continue;
        t->held = ns;
        t->d.lo = sp[0].lo;
        t->d.hi = sp[0].hi;
        for (size_t j = 1; j < ns; j++) {
            if (sp[j].lo < sp[j - 1].hi)
                t->why = "overlapping ranges";
            if (sp[j].hi > t->d.hi)
                t->d.hi = sp[j].hi;
        }
        free(sp);
    }
    free(all);
    *n = k;
    return v;
}

static int
job_ls(struct ctx *c)
{
    size_t n;
    struct jtensor *v = job_list(c, &n);
    int ex;

    if (v == NULL)
        return fail("out of memory");
    if (c->json) {
        json_t *o = json_object(), *a = json_array();

        for (size_t i = 0; i < n; i++) {
            json_t *t = json_desc(&v[i].d, v[i].rows, 1);
            json_object_set_new(t, "machines", json_u64(v[i].held));
            json_object_set_new(t, "problem", v[i].why[0] ?
                                json_string(v[i].why) : json_null());
            json_array_append_new(a, t);
        }
        json_object_set_new(o, "ip_config", json_string(c->ipc));
        json_object_set_new(o, "num_machines", json_u64(c->nmach));
        json_object_set_new(o, "tensors", a);
        ex = json_print(o, 0);
    } else {
        /* MACHINES: how many of the job's hold it, and what is wrong */
        struct table t = {.ncol = 7};
        static const char *head[] = {"NAME", "DTYPE", "SHAPE", "RANGE",
                                     "CHUNK_ROWS", "BYTES", "MACHINES"};
        int bad = 0;

        for (size_t i = 0; i < t.ncol; i++)
            bad |= table_add(&t, head[i]);
        for (size_t i = 0; i < n && !bad; i++) {
            const gkv_tensor_desc *d = &v[i].d;
            char b[5][96];

            shape_str(d, v[i].rows, b[0], sizeof b[0]);
            snprintf(b[1], sizeof b[1], "[%" PRIu64 ",%" PRIu64 ")", d->lo, d->hi);
            snprintf(b[2], sizeof b[2], "%" PRIu32, d->chunk_rows);
            bytes_str(desc_bytes(v[i].rows, d->row_bytes), b[3], sizeof b[3]);
            snprintf(b[4], sizeof b[4], "%zu/%zu%s%s", v[i].held, c->nmach,
                     v[i].why[0] ? " " : "", v[i].why);
            bad |= table_add(&t, d->name);
            bad |= table_add(&t, gkv_dtype_name(d->dtype));
            for (int k = 0; k < 5; k++)
                bad |= table_add(&t, b[k]);
        }
        if (!bad)
            table_print(&t);
        table_free(&t);
        ex = bad ? fail("out of memory") : out_done(EX_OK);
    }
    free(v);
    return ex;
}

static int
cmd_ls(struct ctx *c)
{
    gkv_tensor_desc *v = NULL;
    size_t n = 0;
    gkv_err rc;
    int ex;

    if (c->remote && (ex = remote_ready(c)) != EX_OK)
        return ex;
    if (c->ipc != NULL)
        return job_ls(c);
    if (c->remote) {
        if ((rc = gkv_client_tensor_list(c->cl, &v, &n)) != GKV_OK)
            return fail_net(rc, "listing tensors of %s", c->where);
    } else {
        if ((ex = store_open(c, GKV_RDONLY)) != EX_OK)
            return ex;
        if ((rc = gkv_tensor_list(c->s, NULL, c->opt[O_ALL] != NULL, &v,
                                  &n)) != GKV_OK)
            return fail_gkv(c->s, rc, "listing tensors of '%s'", c->path);
    }
    if (c->json) {
        json_t *o = json_object(), *a = json_array();

        for (size_t i = 0; i < n; i++)
            json_array_append_new(a, json_desc(&v[i], v[i].hi - v[i].lo,
                                               c->remote));
        json_object_set_new(o, c->server != NULL ? "server" : "store",
                            json_string(c->path));
        json_object_set_new(o, "tensors", a);
        ex = json_print(o, 0);
    } else {
        struct table t = {.ncol = 6};
        static const char *head[] = {"NAME", "DTYPE", "SHAPE", "RANGE",
                                     "CHUNK_ROWS", "BYTES"};
        int bad = 0;

        for (size_t i = 0; i < 6; i++)
            bad |= table_add(&t, head[i]);
        for (size_t i = 0; i < n && !bad; i++) {
            char b[4][96];
            shape_str(&v[i], v[i].hi - v[i].lo, b[0], sizeof b[0]);
            snprintf(b[1], sizeof b[1], "[%" PRIu64 ",%" PRIu64 ")", v[i].lo, v[i].hi);
            snprintf(b[2], sizeof b[2], "%" PRIu32, v[i].chunk_rows);
            bytes_str(desc_bytes(v[i].hi - v[i].lo, v[i].row_bytes), b[3], sizeof b[3]);
            bad |= table_add(&t, v[i].name);
            bad |= table_add(&t, gkv_dtype_name(v[i].dtype));
            for (int k = 0; k < 4; k++)
                bad |= table_add(&t, b[k]);
        }
        if (bad) {
            table_free(&t);
            gkv_free(v);
            return fail("out of memory");
        }
        table_print(&t);
        table_free(&t);
        ex = out_done(EX_OK);
    }
    for (size_t i = 0; i < n && !c->remote; i++)
        note_leftover(c, v[i].name);
    gkv_free(v);
    return ex;
}

/* info with --ip-config: what each machine holds, and any IDs of [lo, hi)
 * that none holds. */
static void
info_machines(const struct ctx *c, const gkv_tensor_desc *d, json_t *o)
{
    json_t *a = o != NULL ? json_array() : NULL;
    uint64_t rows;
    size_t n;
    char base[GKV_NAME_MAX + 1];
    struct jspan *sp = job_spans(c, base_name(d->name, base), &n, &rows);

    if (o == NULL)
        printf("machines:    %zu of %zu hold it\n", n, c->nmach);
    for (size_t m = 0; m < c->nmach; m++) {
        const gkv_tensor_desc *t = jm_find(&c->jm[m], base);

        if (o != NULL) {
            json_t *e = json_object();
            json_object_set_new(e, "machine", json_u64(m));
            json_object_set_new(e, "server", json_string(c->jm[m].addr));
            json_object_set_new(e, "lo", t ? json_u64(t->lo) : json_null());
            json_object_set_new(e, "hi", t ? json_u64(t->hi) : json_null());
            json_object_set_new(e, "rows", json_u64(t ? t->hi - t->lo : 0));
            json_array_append_new(a, e);
        } else if (t != NULL) {
            printf("  machine %zu: %s [%" PRIu64 ", %" PRIu64 ") %" PRIu64
                   " rows\n", m, c->jm[m].addr, t->lo, t->hi, t->hi - t->lo);
        } else {
            printf("  machine %zu: %s -\n", m, c->jm[m].addr);
        }
    }
    if (o != NULL) {
        json_t *g = json_array();
        for (size_t i = 1; i < n; i++)
            if (sp[i - 1].hi < sp[i].lo) {
                json_t *r = json_array();
                json_array_append_new(r, json_u64(sp[i - 1].hi));
                json_array_append_new(r, json_u64(sp[i].lo));
                json_array_append_new(g, r);
            }
        json_object_set_new(o, "machines", a);
        json_object_set_new(o, "gaps", g);
    } else {
        for (size_t i = 1; i < n; i++)
            if (sp[i - 1].hi < sp[i].lo)
                printf("  no machine holds [%" PRIu64 ", %" PRIu64 ")\n",
                       sp[i - 1].hi, sp[i].lo);
    }
    free(sp);
}

static int
cmd_info(struct ctx *c)
{
    const char *name = c->args[0];
    gkv_tensor_desc d, *v = NULL;
    size_t n = 0, pl = strlen(name), held;
    char bb[48];
    gkv_txn *tx = NULL;
    gkv_err rc;
    json_t *state;
    char shp[128], rshp[128];
    uint64_t rows;
    int ex;

    if (c->remote) {
        /* a server lists no optimizer state; the range is the one it
         * holds (with --ip-config: from the lowest to the highest ID any
         * machine holds) */
        if ((ex = remote_ready(c)) != EX_OK)
            return ex;
        if ((rc = gkv_client_tensor_info(c->cl, name, &d)) != GKV_OK) {
            char holders[2048];

            ex = fail_net(rc, "tensor '%s' on %s", name, c->where);
            if (c->ipc != NULL && rc != GKV_ENOTFOUND) {
                job_holders_str(c, name, holders, sizeof holders);
                fprintf(stderr, PROG ": the machines hold: %s\n", holders);
            }
            return ex;
        }
        state = json_null();        /* unknown, not "none" */
        goto show;
    }
    if ((ex = store_open(c, GKV_RDONLY)) != EX_OK)
        return ex;
    if ((rc = gkv_txn_begin(c->s, &tx)) != GKV_OK)
        return fail_gkv(c->s, rc, "store '%s'", c->path);
    if ((rc = gkv_tensor_info(c->s, tx, name, &d)) != GKV_OK) {
        ex = fail_gkv(c->s, rc, "tensor '%s'", name);
        gkv_txn_end(tx);
        return ex;
    }
    if ((rc = gkv_tensor_list(c->s, tx, 1, &v, &n)) != GKV_OK) {
        ex = fail_gkv(c->s, rc, "tensor '%s'", name);
        gkv_txn_end(tx);
        return ex;
    }
    gkv_txn_end(tx);
    state = json_array();
    for (size_t i = 0; i < n; i++)
        if (strncmp(v[i].name, name, pl) == 0 && v[i].name[pl] == '#')
            json_array_append_new(state, json_string(v[i].name));
    gkv_free(v);
show:
    rows = rows_of(c, &d, &held);
    if (c->json) {
        json_t *o = json_desc(&d, rows, c->remote);
        json_object_set_new(o, "state_tensors", state);
        if (c->ipc != NULL)
            info_machines(c, &d, o);
        return json_print(o, 0);
    }
    shape_str(&d, rows, shp, sizeof shp);
    row_shape_str(&d, rshp, sizeof rshp);
    printf("name:        %s\n", d.name);
    printf("dtype:       %s\n", gkv_dtype_name(d.dtype));
    printf("shape:       %s\n", shp);
    printf("row shape:   %s\n", rshp);
    printf("range:       [%" PRIu64 ", %" PRIu64 ")\n", d.lo, d.hi);
    printf("rows:        %" PRIu64 "\n", rows);
    printf("row elems:   %" PRIu64 "\n", d.row_elems);
    printf("row bytes:   %zu\n", d.row_bytes);
    printf("chunk rows:  %" PRIu32 "\n", d.chunk_rows);
    if (c->remote)
        printf("chunks:      -\n");
    else
        printf("chunks:      %" PRIu64 "\n", d.nchunks);
    printf("bytes:       %s\n", bytes_str(desc_bytes(rows, d.row_bytes), bb, sizeof bb));
    printf("flags:       %s\n", d.flags & GKV_TENSOR_HOT ? "hot" : "-");
    if (c->remote)
        printf("id:          -\n");
    else
        printf("id:          %" PRIu32 "\n", d.id);
    printf("state:       ");
    if (json_is_null(state) && strchr(d.name, '#') != NULL)
        printf("-");                /* a companion has none of its own */
    else if (json_is_null(state))
        printf("(servers do not list it: get or export %s#adagrad_s, "
               "#adam_m, ... read it; zeros when never pushed)", d.name);
    else if (json_array_size(state) == 0)
        printf("-");
    for (size_t i = 0; i < json_array_size(state); i++)
        printf("%s%s", i ? " " : "", json_string_value(json_array_get(state, i)));
    printf("\n");
    json_decref(state);
    if (c->ipc != NULL)
        info_machines(c, &d, NULL);
    return out_done(EX_OK);
}

static int
cmd_stat(struct ctx *c)
{
    gkv_store_stat st;
    char bb[48];
    gkv_err rc;
    int ex;

    if (c->remote)
        return (ex = remote_ready(c)) != EX_OK ? ex : stat_server(c);
    if ((ex = store_open(c, GKV_RDONLY)) != EX_OK)
        return ex;
    if ((rc = gkv_store_stat_get(c->s, &st)) != GKV_OK)
        return fail_gkv(c->s, rc, "store '%s'", c->path);
    if (c->json) {
        json_t *o = json_object();
        json_object_set_new(o, "store", json_string(c->path));
        json_object_set_new(o, "format", json_u64(st.format));
        json_object_set_new(o, "map_size", json_u64(st.map_size));
        json_object_set_new(o, "used_bytes", json_u64(st.used_bytes));
        json_object_set_new(o, "free_bytes", json_u64(st.free_bytes));
        json_object_set_new(o, "page_size", json_u64(st.page_size));
        json_object_set_new(o, "ntensors", json_u64(st.ntensors));
        json_object_set_new(o, "nchunks", json_u64(st.nchunks));
        json_object_set_new(o, "data_bytes", json_u64(st.data_bytes));
        json_object_set_new(o, "readers", json_u64(st.readers));
        json_object_set_new(o, "max_readers", json_u64(st.max_readers));
        return json_print(o, 0);
    }
    printf("store:        %s\n", c->path);
    printf("format:       %" PRIu32 "\n", st.format);
    printf("map size:     %" PRIu64 "\n", st.map_size);
    printf("used bytes:   %" PRIu64 " (%" PRIu64 " of them free for reuse)\n",
           st.used_bytes, st.free_bytes);
    printf("page size:    %" PRIu64 "\n", st.page_size);
    printf("tensors:      %" PRIu64 "\n", st.ntensors);
    printf("chunks:       %" PRIu64 "\n", st.nchunks);
    printf("data bytes:   %s\n", bytes_str(st.data_bytes, bb, sizeof bb));
    printf("readers:      %u of %u\n", st.readers, st.max_readers);
    return out_done(EX_OK);
}

/* ---- get, put ---------------------------------------------------------------- */

static int
cmd_get(struct ctx *c)
{
    const char *name = c->args[0];
    tools_idlist ids = {0};
    tools_idcur cur = {0};
    gkv_tensor_desc d;
    gkv_txn *tx = NULL;
    json_t *root = NULL, *jids = NULL, *jrows = NULL;
    uint64_t *idbuf = NULL;
    unsigned char *rows = NULL;
    size_t batch, k;
    char err[512];
    gkv_err rc;
    int ex;

    if ((ex = tools__idlist_parse(&ids, c->args[1], err, sizeof err)) != 0) {
        tools__idlist_free(&ids);
        return ex == 2 ? usage_error("%s", err) : fail("%s", err);
    }
    if (c->remote) {
        if ((ex = remote_ready(c)) != EX_OK)
            goto out;
        if ((rc = gkv_client_tensor_info(c->cl, name, &d)) != GKV_OK) {
            ex = fail_net(rc, "tensor '%s' on %s", name, c->where);
            goto out;
        }
    } else {
        if ((ex = store_open(c, GKV_RDONLY)) != EX_OK)
            goto out;
        if ((rc = gkv_txn_begin(c->s, &tx)) != GKV_OK) {
            ex = fail_gkv(c->s, rc, "store '%s'", c->path);
            goto out;
        }
        if ((rc = gkv_tensor_info(c->s, tx, name, &d)) != GKV_OK) {
            ex = fail_gkv(c->s, rc, "tensor '%s'", name);
            goto out;
        }
    }
    /* every ID is checked before a row is printed */
    for (size_t i = 0; i < ids.nseg; i++) {
        const tools_idseg *sg = &ids.seg[i];
        if (sg->a < d.lo || sg->b > d.hi) {
            ex = fail("tensor '%s': %s: ID %" PRIu64 " is outside its range "
                      "[%" PRIu64 ", %" PRIu64 ")", name, gkv_strerror(GKV_ERANGE),
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
        ex = fail("out of memory");
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
        if (c->remote) {
            if ((rc = gkv_client_pull(c->cl, name, idbuf, k, rows,
                                      k * d.row_bytes)) != GKV_OK) {
                ex = fail_net(rc, "tensor '%s' on %s", name, c->where);
                goto out;
            }
        } else if ((rc = gkv_tensor_pull(c->s, tx, name, idbuf, k, rows,
                                         k * d.row_bytes)) != GKV_OK) {
            ex = fail_gkv(c->s, rc, "tensor '%s'", name);
            goto out;
        }
        for (size_t i = 0; i < k; i++) {
            const unsigned char *row = rows + i * d.row_bytes;

            if (c->json) {
                json_t *r = json_array();
                json_array_append_new(jids, json_u64(idbuf[i]));
                for (uint64_t e = 0; e < d.row_elems; e++)
                    json_array_append_new(r, elem_json(d.dtype, row, e));
                json_array_append_new(jrows, r);
            } else {
                char b[64];
                printf("%" PRIu64 ":", idbuf[i]);
                for (uint64_t e = 0; e < d.row_elems; e++) {
                    elem_str(d.dtype, row, e, b, sizeof b);
                    printf(" %s", b);
                }
                putchar('\n');
            }
        }
    }
    gkv_txn_end(tx);
    tx = NULL;
    if (c->json) {
        int prec = d.dtype == GKV_F64 ? 17 : 9;
        ex = json_print(root, JSON_REAL_PRECISION(prec));
        root = NULL;
    } else {
        ex = out_done(EX_OK);
    }
out:
    gkv_txn_end(tx);
    json_decref(root);
    json_decref(jids);
    json_decref(jrows);
    free(idbuf);
    free(rows);
    tools__idlist_free(&ids);
    return ex;
}

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

static int
cmd_put(struct ctx *c)
{
    const char *name = c->args[0];
    gkv_push_args pa;
    gkv_tensor_desc d;
    uint64_t id;
    unsigned char *row = NULL;
    char **tok = NULL, *tokbuf = NULL, *end;
    size_t ntok = 0;
    gkv_err rc;
    int ex;

    memset(&pa, 0, sizeof pa);
    if (tools__parse_u64(c->args[1], &id) != 0)
        return usage_error("put: '%s' is not an ID (a non-negative integer)",
                           c->args[1]);
    if (c->opt[O_LR] != NULL) {
        errno = 0;
        pa.lr = strtod(c->opt[O_LR], &end);
        if (errno != 0 || *end != '\0' || end == c->opt[O_LR] || !(pa.lr > 0))
            return usage_error("--lr '%s' is not a positive number", c->opt[O_LR]);
    }
    pa.handler = c->opt[O_HANDLER];
    if ((tok = split_values(c->args + 2, c->nargs - 2, &ntok, &tokbuf)) == NULL)
        return fail("out of memory");
    /* syntax first, so that bad values are a usage error whatever the store */
    for (size_t i = 0; i < ntok; i++) {
        strtod(tok[i], &end);
        if (end == tok[i] || *end != '\0') {
            ex = usage_error("put: '%s' is not a number", tok[i]);
            goto out;
        }
    }
    if (ntok == 0) {
        ex = usage_error("put: no VALUES");
        goto out;
    }
    if ((ex = target_open(c, 0)) != EX_OK)
        goto out;
    if ((rc = c->remote ? gkv_client_tensor_info(c->cl, name, &d) :
                          gkv_tensor_info(c->s, NULL, name, &d)) != GKV_OK) {
        ex = fail_any(c, rc, "tensor '%s'", name);
        goto out;
    }
    if (ntok != d.row_elems) {
        ex = usage_error("put: tensor '%s' rows hold %" PRIu64 " values, got %zu",
                         name, d.row_elems, ntok);
        goto out;
    }
    if ((row = malloc(d.row_bytes)) == NULL) {
        ex = fail("out of memory");
        goto out;
    }
    for (size_t i = 0; i < ntok; i++)
        if (value_parse(tok[i], d.dtype, row + i * gkv_dtype_size(d.dtype)) != 0) {
            ex = usage_error("put: '%s' is not a value of dtype %s", tok[i],
                             gkv_dtype_name(d.dtype));
            goto out;
        }
    rc = c->remote ? gkv_client_push(c->cl, name, &id, 1, row, d.row_bytes, &pa) :
                     gkv_tensor_push(c->s, name, &id, 1, row, d.row_bytes, &pa);
    if (rc != GKV_OK)
        ex = fail_any(c, rc, "tensor '%s': put row %" PRIu64, name, id);
out:
    free(row);
    free(tok);
    free(tokbuf);
    return ex;
}

/* ---- create ------------------------------------------------------------------- */

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
            return usage_error("--chunk-rows '%s' is not a count from 1 to %u",
                               c->opt[O_CHUNK_ROWS], UINT32_MAX);
        sp->chunk_rows = (uint32_t)v;
    }
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
    fail_net(rc, "%s '%s' on %s", what, name, c->where);
    (void)gkv_client_delete(c->cl, name);
    return EX_FAIL;
}

/* create through the servers: split across the job's machines as the
 * client splits it (by the partition book for node/T/... and edge/E/...);
 * an existing tensor is an error, as in a store (the client's create
 * would accept an identical one). */
static int
remote_create(struct ctx *c, const char *name, const gkv_tensor_spec *sp)
{
    char why[512];
    gkv_tensor_desc d;
    gkv_err rc;

    if (name_check(name, 0, why, sizeof why) != 0)
        return fail("create: %s", why);
    if (remote_ready(c) != EX_OK)
        return EX_FAIL;
    if ((rc = gkv_client_tensor_info(c->cl, name, &d)) == GKV_OK)
        return fail("create tensor '%s' on %s: %s", name, c->where,
                    gkv_strerror(GKV_EEXIST));
    if (rc != GKV_ENOTFOUND)
        return fail_net(rc, "create tensor '%s' on %s", name, c->where);
    return create_split(c, name, sp, "create tensor");
}

static int
cmd_create(struct ctx *c)
{
    const char *name = c->args[0];
    gkv_tensor_spec sp;
    gkv_err rc;
    int nd, ex;

    memset(&sp, 0, sizeof sp);
    if (c->opt[O_DTYPE] == NULL)
        return usage_error("create: --dtype is required");
    if (gkv_dtype_parse(c->opt[O_DTYPE], &sp.dtype) != GKV_OK)
        return usage_error("create: unknown dtype '%s' (f32 f16 bf16 f64 i8 "
                           "u8 i32 i64)", c->opt[O_DTYPE]);
    if (c->opt[O_RANGE] == NULL)
        return usage_error("create: --range LO:HI is required");
    if (tools__parse_range(c->opt[O_RANGE], &sp.lo, &sp.hi) != 0)
        return usage_error("create: --range '%s' is not LO:HI with LO < HI",
                           c->opt[O_RANGE]);
    if (c->opt[O_SHAPE] != NULL) {
        if ((nd = tools__parse_dims(c->opt[O_SHAPE], sp.shape, GKV_MAX_DIMS)) < 0)
            return usage_error("create: --shape '%s' is not 1 to %d dims "
                               "D1[,D2..], each >= 1", c->opt[O_SHAPE],
                               GKV_MAX_DIMS);
        sp.ndim = (unsigned)nd;
    }
    if (c->opt[O_INIT] != NULL && init_parse(c->opt[O_INIT], &sp) != 0)
        return usage_error("create: --init '%s' is not zeros, const:A, "
                           "uniform:A,B (A < B) or normal:MEAN,STD (STD >= 0)",
                           c->opt[O_INIT]);
    if (c->opt[O_SEED] != NULL && tools__parse_u64(c->opt[O_SEED], &sp.seed) != 0)
        return usage_error("create: --seed '%s' is not a non-negative integer",
                           c->opt[O_SEED]);
    if ((ex = chunk_opts(c, &sp)) != EX_OK)
        return ex;
    if (c->remote)
        return remote_create(c, name, &sp);
    if ((ex = store_open(c, GKV_CREATE)) != EX_OK)
        return ex;
    if ((rc = gkv_tensor_create(c->s, name, &sp)) != GKV_OK) {
        ex = fail_gkv(c->s, rc, "create tensor '%s'", name);
        store_close(c, 1);
        return ex;
    }
    return EX_OK;
}

/* ---- import ------------------------------------------------------------------- */

/* ---- optimizer state (T#adam_m, ...) ------------------------------------------ */

/* "f32 [3,4]" */
static void
rows_str(gkv_dtype dt, unsigned ndim, const uint64_t *shape, char *buf,
         size_t cap)
{
    size_t o = (size_t)snprintf(buf, cap, "%s [", gkv_dtype_name(dt));

    for (unsigned i = 0; i < ndim && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%" PRIu64, i ? "," : "",
                              shape[i]);
    if (o < cap)
        snprintf(buf + o, cap - o, "]");
}

/* Optimizer-state companion 'name' ("T#adam_m") of the store: *d is its
 * description, or, when T was never pushed with that optimizer (*exists
 * 0), the one it gets when created: T's range and chunking with the
 * companion's rows (f32 in T's row shape, f64 for an f64 T, one i64 for
 * T#adam_t). EX_OK, or EX_FAIL with the message printed. */
static int
state_desc(struct ctx *c, gkv_txn *tx, const char *name, gkv_tensor_desc *d,
           int *exists)
{
    gkv_err rc = gkv_opt_state_info(c->s, tx, name, d, exists);

    return rc == GKV_OK ? EX_OK : fail_gkv(c->s, rc, "'%.64s'", name);
}

/* import --orig-ids MAPPING.npy: row i of FILE is the row of new ID
 * MAPPING[i] (gkv-partition's mapping/node-NTYPE.npy, original ID -> new
 * ID, int64). */
struct origmap {
    gkv_npy_map m;
    uint64_t n, min, max;        /* entries; their smallest and largest */
    uint64_t *inv;               /* origmap_perm: inv[id - lo] = FILE row */
};

static uint64_t
origmap_at(const struct origmap *o, uint64_t i)
{
    int64_t v;

    memcpy(&v, (const unsigned char *)o->m.data + i * 8, 8);
    return (uint64_t)v;
}

static int
u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

/* Maps --orig-ids MAPPING for 'verb' (import, export): an int64 array of
 * N or N x 1; o->n gets N. */
static int
origmap_load(struct origmap *o, const char *verb, const char *map)
{
    char msg[512];
    gkv_err rc;

    if ((rc = gkv_npy_map_open(&o->m, map, msg, sizeof msg)) == GKV_EFORMAT)
        return fail("%s: --orig-ids '%s': %s: %s", verb, map, gkv_strerror(rc),
                    msg);
    if (rc != GKV_OK)
        return fail("%s: --orig-ids '%s': %s", verb, map, msg);
    if (o->m.hdr.dtype != GKV_I64 || o->m.hdr.is_bool || o->m.hdr.ndim > 2 ||
        (o->m.hdr.ndim == 2 && o->m.hdr.shape[1] != 1))
        return fail("%s: --orig-ids '%s': %s: expected an int64 array with "
                    "one new ID per original ID (N or N x 1, as gkv-partition "
                    "writes mapping/node-NTYPE.npy), not %u dims of %s", verb,
                    map, gkv_strerror(GKV_EFORMAT), o->m.hdr.ndim,
                    o->m.hdr.is_bool ? "bool" : gkv_dtype_name(o->m.hdr.dtype));
    o->n = o->m.hdr.shape[0];
    return EX_OK;
}

/* Maps MAPPING and checks it against a FILE of 'rows' rows: int64, N or
 * N x 1, N = rows, every new ID >= 0 and none twice. */
static int
origmap_open(struct origmap *o, const char *map, const char *file,
             uint64_t rows)
{
    uint64_t *sorted;
    int ex;

    if ((ex = origmap_load(o, "import", map)) != EX_OK)
        return ex;
    if (o->n != rows)
        return fail("import: --orig-ids '%s' has %" PRIu64 " entries, but "
                    "'%s' has %" PRIu64 " rows: the mapping of another type "
                    "or graph?", map, o->n, file, rows);
    if ((sorted = malloc(o->n * sizeof *sorted)) == NULL)
        return fail("out of memory");
    for (uint64_t i = 0; i < o->n; i++) {
        sorted[i] = origmap_at(o, i);
        if ((int64_t)sorted[i] < 0) {
            free(sorted);
            return fail("import: --orig-ids '%s': %s: original ID %" PRIu64
                        " maps to %" PRId64 ", not a new ID", map,
                        gkv_strerror(GKV_ERANGE), i, (int64_t)origmap_at(o, i));
        }
    }
    qsort(sorted, o->n, sizeof *sorted, u64_cmp);
    for (uint64_t i = 1; i < o->n; i++)
        if (sorted[i] == sorted[i - 1]) {
            uint64_t dup = sorted[i];
            free(sorted);
            return fail("import: --orig-ids '%s': new ID %" PRIu64 " comes "
                        "twice: not a mapping", map, dup);
        }
    o->min = sorted[0];
    o->max = sorted[o->n - 1];
    free(sorted);
    return EX_OK;
}

/* The new IDs must be exactly [lo, lo + n): fills o->inv. */
static int
origmap_perm(struct origmap *o, const char *map, uint64_t lo, const char *what)
{
    /* n distinct IDs from lo to lo + n - 1 are each of them once */
    if (o->min != lo || o->max - o->min != o->n - 1)
        return fail("import: --orig-ids '%s': %s: the new IDs run from %"
                    PRIu64 " to %" PRIu64 "; %s of %" PRIu64 " rows needs "
                    "each of [%" PRIu64 ", %" PRIu64 ") (a store is written in "
                    "one transaction of consecutive rows)", map,
                    gkv_strerror(GKV_ERANGE), o->min, o->max, what, o->n, lo,
                    lo + o->n);
    if ((o->inv = malloc(o->n * sizeof *o->inv)) == NULL)
        return fail("out of memory");
    for (uint64_t i = 0; i < o->n; i++)
        o->inv[origmap_at(o, i) - lo] = i;
    return EX_OK;
}

static void
origmap_close(struct origmap *o)
{
    gkv_npy_map_close(&o->m);
    free(o->inv);
    o->inv = NULL;
}

/* Rows [at, at + n) of the tensor being imported from 'data': the file's
 * own rows, or (o->inv) the file rows they map from, gathered into buf. */
static const unsigned char *
origmap_rows(const struct origmap *o, const unsigned char *data,
             size_t row_bytes, uint64_t at, uint64_t n, unsigned char *buf)
{
    if (o == NULL || o->inv == NULL)
        return data + at * row_bytes;
    for (uint64_t k = 0; k < n; k++)
        memcpy(buf + k * row_bytes, data + o->inv[at + k] * row_bytes,
               row_bytes);
    return buf;
}

/* Whether the mapped file's rows are rows of d (dtype and row shape) and
 * fit [lo, lo + rows) inside d's range; EX_FAIL, printed, when not.
 * 'note' follows the row shape in the message. */
static int
rows_fit(const char *file, const gkv_npy_map *m, const gkv_tensor_desc *d,
         uint64_t lo, const char *note)
{
    uint64_t rows = m->hdr.shape[0];
    const char *what = strchr(d->name, '#') ? "optimizer state" : "tensor";
    char want[160], got[160];
    /* numpy's bool is u8 0/1, as import stores it */
    int same = m->hdr.dtype == d->dtype && m->hdr.ndim - 1 == d->ndim;

    for (unsigned i = 0; same && i < d->ndim; i++)
        same = m->hdr.shape[i + 1] == d->shape[i];
    if (!same) {
        rows_str(d->dtype, d->ndim, d->shape, want, sizeof want);
        rows_str(m->hdr.dtype, m->hdr.ndim - 1, m->hdr.shape + 1, got,
                 sizeof got);
        return fail("import '%s': %s: %s '%s' has rows of %s; the file's "
                    "rows are %s%s", file, gkv_strerror(GKV_ESHAPE), what,
                    d->name, want, m->hdr.is_bool ? "bool" : got, note);
    }
    if (lo < d->lo || lo > d->hi || rows > d->hi - lo)
        return fail("import '%s': %s: %" PRIu64 " rows from ID %" PRIu64
                    " are not inside %s '%s' [%" PRIu64 ", %" PRIu64 ")",
                    file, gkv_strerror(GKV_ERANGE), rows, lo, what, d->name,
                    d->lo, d->hi);
    return EX_OK;
}

/* import T#suffix FILE: the mapped file's rows written over the
 * companion's [lo, lo + rows) in one transaction (gkv_tensor_write
 * creates a missing companion zero-filled and checks step counts). */
static int
import_state(struct ctx *c, const char *name, const char *file,
             const gkv_npy_map *m, uint64_t lo, int have_lo,
             struct origmap *om)
{
    uint64_t rows = m->hdr.shape[0];
    unsigned char *buf = NULL;
    gkv_tensor_desc d;
    int exists, ex;
    gkv_err rc;

    if ((ex = store_open(c, 0)) != EX_OK)
        return ex;
    if ((ex = state_desc(c, NULL, name, &d, &exists)) != EX_OK)
        return ex;
    if (om != NULL)
        lo = om->min;               /* the mapping's IDs, at its lowest */
    else if (!have_lo)
        lo = d.lo;
    if (rows_fit(file, m, &d, lo, exists ? "" :
                 " (as the state of its tensor would be)") != EX_OK)
        return EX_FAIL;
    /* in the store's ID order: one write, so one transaction */
    if (om != NULL && (origmap_perm(om, c->opt[O_ORIG_IDS], lo,
                                    "optimizer state") != EX_OK ||
                       (buf = malloc(rows * d.row_bytes)) == NULL)) {
        if (om->inv != NULL)
            fail("out of memory");
        return EX_FAIL;
    }
    rc = gkv_tensor_write(c->s, name, lo, lo + rows,
                          origmap_rows(om, m->data, d.row_bytes, 0, rows, buf),
                          (size_t)rows * d.row_bytes);
    free(buf);
    if (rc != GKV_OK)
        return fail_gkv(c->s, rc, "import: optimizer state '%s'", name);
    return EX_OK;
}

static int
cmd_reset_opt(struct ctx *c)
{
    const char *name = c->args[0], *opt = c->nargs > 1 ? c->args[1] : NULL;
    gkv_err rc;
    int ex;

    if (opt != NULL && strcmp(opt, "adagrad") != 0 && strcmp(opt, "adam") != 0)
        return usage_error("reset-opt: optimizer '%s' has no state to reset "
                           "(adagrad or adam; default both)", opt);
    if (strchr(name, '#') != NULL)
        return usage_error("reset-opt: '%s' is optimizer state (or has a "
                           "'#'); name its tensor", name);
    if ((ex = target_open(c, 0)) != EX_OK)
        return ex;
    if ((rc = c->remote ? gkv_client_opt_reset(c->cl, name, opt) :
                          gkv_opt_reset(c->s, name, opt)) != GKV_OK)
        return fail_any(c, rc, "reset-opt: tensor '%s'", name);
    return EX_OK;
}

/* --ip-config, --orig-ids into an existing tensor d: every mapped ID is
 * held by some machine (the IDs may skip the rows no machine holds). */
static int
job_ids_held(const struct ctx *c, const gkv_tensor_desc *d,
             const struct origmap *om)
{
    char holders[2048];
    struct jspan *sp;
    uint64_t rows;
    size_t n;

    if ((sp = job_spans(c, d->name, &n, &rows)) == NULL)
        return fail("import: tensor '%s': no machine of '%s' holds it",
                    d->name, c->ipc);
    for (uint64_t i = 0; i < om->n; i++) {
        uint64_t id = origmap_at(om, i);
        size_t lo = 0, hi = n;

        while (lo < hi) {                /* the last span starting <= id */
            size_t mid = (lo + hi) / 2;
            if (sp[mid].lo <= id)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo == 0 || id >= sp[lo - 1].hi) {
            free(sp);
            job_holders_str(c, d->name, holders, sizeof holders);
            return fail("import: --orig-ids '%s': %s: new ID %" PRIu64 " (of "
                        "the file's row %" PRIu64 ") is held by no machine: "
                        "%s", c->opt[O_ORIG_IDS], gkv_strerror(GKV_ERANGE), id,
                        i, holders);
        }
    }
    free(sp);
    return EX_OK;
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
            return fail("import '%s': %s: row %" PRIu64 " holds step count %"
                        PRId64 "; '%s' takes 0 to %" PRId64, file,
                        gkv_strerror(GKV_EINVAL), i, t, d->name,
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
            return fail("import '%s': %s: row %" PRIu64 " holds %g (element %"
                        PRIu64 "); '%s' takes %s", file,
                        gkv_strerror(GKV_EINVAL), i / d->row_elems, v,
                        i % d->row_elems, d->name, nonneg ? "finite values, 0 "
                        "or more" : "finite values");
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
import_remote(struct ctx *c, const char *name, const char *file,
              const gkv_npy_map *m, gkv_tensor_spec *sp, int state,
              struct origmap *om)
{
    const unsigned char *data = m->data;
    uint64_t rows = m->hdr.shape[0], step, at = 0, sent = 0, *ids = NULL;
    char label[GKV_NAME_MAX + 16];
    tools_progress bar = {0};
    gkv_tensor_desc d, bd;
    int created = 0, ex = EX_FAIL;
    gkv_err rc;

    if (remote_ready(c) != EX_OK)
        return EX_FAIL;
    rc = gkv_client_tensor_info(c->cl, name, &d);
    if (rc == GKV_ENOTFOUND && !state) {
        /* a new tensor [lo, lo + rows): a mapping must fill it */
        if (om != NULL &&
            origmap_perm(om, c->opt[O_ORIG_IDS], sp->lo, "a new tensor") != EX_OK)
            return EX_FAIL;
        if (create_split(c, name, sp, "import: creating tensor") != EX_OK)
            return EX_FAIL;
        created = 1;
        if ((rc = gkv_client_tensor_info(c->cl, name, &d)) != GKV_OK) {
            fail_net(rc, "import: tensor '%s' on %s", name, c->where);
            goto out;
        }
    } else if (rc != GKV_OK) {
        return fail_net(rc, "import: tensor '%s' on %s", name, c->where);
    } else if (!state && c->opt[O_REPLACE] == NULL) {
        return fail("import: tensor '%s' on %s: %s (give --replace to "
                    "overwrite its rows)", name, c->where,
                    gkv_strerror(GKV_EEXIST));
    } else if (c->opt[O_HOT] != NULL || c->opt[O_CHUNK_ROWS] != NULL) {
        return fail("import: tensor '%s' on %s exists: --hot and --chunk-rows "
                    "apply only when import creates it", name, c->where);
    } else if (c->opt[O_LO] == NULL) {
        sp->lo = d.lo;              /* over the tensor's first rows */
    }
    if (om != NULL)
        sp->lo = d.lo;              /* the shape check; the IDs are om's */
    if (rows_fit(file, m, &d, sp->lo, "") != EX_OK)
        goto out;
    if (om != NULL && (om->min < d.lo || om->max >= d.hi)) {
        fail("import: --orig-ids '%s': %s: new IDs %" PRIu64 " to %" PRIu64
             " are not all inside %s '%s' [%" PRIu64 ", %" PRIu64 ")",
             c->opt[O_ORIG_IDS], gkv_strerror(GKV_ERANGE), om->min, om->max,
             state ? "optimizer state" : "tensor", name, d.lo, d.hi);
        goto out;
    }
    if (state && state_values_check(file, &d, data, rows) != EX_OK)
        goto out;
    bd = d;                         /* a companion is where its tensor is */
    base_name(d.name, bd.name);
    if (c->ipc != NULL && !created &&
        (om != NULL ? job_check(c, "import", &bd, om->min, om->min) != EX_OK ||
                      job_ids_held(c, &bd, om) != EX_OK
                    : job_check(c, "import", &bd, sp->lo, sp->lo + rows) != EX_OK))
        goto out;
    /* batches a server answers within its timeout, as export's */
    step = SLICE_BYTES / 8 / d.row_bytes;
    step = step == 0 ? 1 : step > (1u << 20) ? (1u << 20) : step;
    if ((ids = malloc(step * sizeof *ids)) == NULL) {
        fail("out of memory");
        goto out;
    }
    snprintf(label, sizeof label, "import %s", name);
    tools__progress_start(&bar, label, rows * d.row_bytes);
    while (at < rows && !tools__got_signal) {
        size_t n = (size_t)(rows - at < step ? rows - at : step);

        for (size_t i = 0; i < n; i++)   /* the file's rows, in its order */
            ids[i] = om != NULL ? origmap_at(om, at + i) : sp->lo + at + i;
        sent = at + n;
        if ((rc = gkv_client_push(c->cl, name, ids, n, data + at * d.row_bytes,
                                  n * d.row_bytes, NULL)) != GKV_OK) {
            tools__progress_end(&bar, 0);
            fail_net(rc, "import: tensor '%s' on %s: %s [%" PRIu64 ", %"
                     PRIu64 ")", name, c->where, om ? "the file's rows" : "rows",
                     om ? at : sp->lo + at, om ? sent : sp->lo + sent);
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
            fail_net(rc, "import: could not remove tensor '%s', which this "
                     "import created", name);
    } else if (created) {
        if ((rc = gkv_client_delete(c->cl, name)) == GKV_OK)
            fprintf(stderr, PROG ": import: tensor '%s', which this import "
                    "created, is removed again\n", name);
        else
            fail_net(rc, "import: could not remove tensor '%s', which this "
                     "import created and wrote in part", name);
    } else {
        /* om: in the file's row order; else in ID order */
        uint64_t base = om != NULL ? 0 : sp->lo;
        char part[128] = "";

        if (sent > at)
            snprintf(part, sizeof part, ", %s [%" PRIu64 ", %" PRIu64 ") may "
                     "be in part", om != NULL ? "its rows" : "rows",
                     base + at, base + sent);
        fprintf(stderr, PROG ": import: %s [%" PRIu64 ", %" PRIu64 ") %s'%s' "
                "were written%s, the rest are as they were: import again to "
                "finish\n", om != NULL ? "the file's rows" : "rows", base,
                base + at, om != NULL ? "to " : "of ", name, part);
    }
    return ex;
}

static int
cmd_import(struct ctx *c)
{
    const char *name = c->args[0], *file = c->args[1];
    char tmp[GKV_NAME_MAX + 1], why[512], msg[512];
    uint64_t dims[GKV_MAX_DIMS], rows, step, done_rows = 0;
    int raw = c->opt[O_DTYPE] != NULL || c->opt[O_DIM] != NULL;
    int nd = 0, ex = EX_FAIL, have_tmp = 0;
    int state = strchr(name, '#') != NULL;   /* a companion: a restore */
    const unsigned char *data;
    unsigned char *gather = NULL;
    gkv_npy_map m = {0};
    struct origmap om, *omp = NULL;
    gkv_tensor_spec sp;
    gkv_tensor_desc d;
    tools_progress bar = {0};
    gkv_dtype dt = GKV_F32;
    gkv_err rc;

    memset(&sp, 0, sizeof sp);
    memset(&om, 0, sizeof om);
    /* ---- arguments: usage errors before any file or store is touched */
    if (c->opt[O_ORIG_IDS] != NULL && c->opt[O_LO] != NULL)
        return usage_error("import: --orig-ids gives the rows' IDs; --lo does "
                           "not go with it");
    if (raw) {
        if (c->opt[O_DTYPE] == NULL || c->opt[O_DIM] == NULL)
            return usage_error("import: raw input needs both --dtype and --dim");
        if (gkv_dtype_parse(c->opt[O_DTYPE], &dt) != GKV_OK)
            return usage_error("import: unknown dtype '%s' (f32 f16 bf16 f64 "
                               "i8 u8 i32 i64)", c->opt[O_DTYPE]);
        if ((nd = tools__parse_dims(c->opt[O_DIM], dims, GKV_MAX_DIMS)) < 0)
            return usage_error("import: --dim '%s' is not 1 to %d dims "
                               "D1[,D2..], each >= 1", c->opt[O_DIM], GKV_MAX_DIMS);
    }
    if (c->opt[O_LO] != NULL && tools__parse_u64(c->opt[O_LO], &sp.lo) != 0)
        return usage_error("import: --lo '%s' is not a non-negative integer",
                           c->opt[O_LO]);
    if ((ex = chunk_opts(c, &sp)) != EX_OK)
        return ex;
    if (state && (c->opt[O_REPLACE] != NULL || c->opt[O_HOT] != NULL ||
                  c->opt[O_CHUNK_ROWS] != NULL))
        return usage_error("import: --replace, --hot and --chunk-rows do not "
                           "apply to optimizer state '%s' (it has its "
                           "tensor's chunking, and is overwritten)", name);
    if (!state && name_check(name, strlen(IMPORT_TAG) + 10, why, sizeof why) != 0)
        return fail("import: %s", why);

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
            return usage_error("import: '%s' is a .npy file; --dtype and --dim "
                               "are for raw files", file);
        rc = gkv_npy_map_raw(&m, file, dt, (unsigned)nd, dims, msg, sizeof msg);
    } else {
        rc = gkv_npy_map_open(&m, file, msg, sizeof msg);
        if (rc == GKV_EFORMAT && strstr(msg, "bad magic") != NULL)
            snprintf(msg + strlen(msg), sizeof msg - strlen(msg),
                     "; for raw rows give --dtype and --dim");
    }
    if (rc == GKV_EFORMAT)
        return fail("import '%s': %s: %s", file, gkv_strerror(rc), msg);
    if (rc != GKV_OK)
        return fail("import '%s': %s", file, msg);
    rows = m.hdr.shape[0];
    if (rows == 0) {
        ex = fail("import '%s': the file holds no rows", file);
        goto out;
    }
    for (unsigned i = 1; i < m.hdr.ndim; i++)
        if (m.hdr.shape[i] == 0) {
            ex = fail("import '%s': row dim %u is 0: rows would hold nothing",
                      file, i - 1);
            goto out;
        }
    if (rows > UINT64_MAX - sp.lo) {
        ex = fail("import '%s': --lo %" PRIu64 " + %" PRIu64 " rows is past 2^64",
                  file, sp.lo, rows);
        goto out;
    }
    sp.dtype = m.hdr.dtype;
    sp.ndim = m.hdr.ndim - 1;
    for (unsigned i = 0; i < sp.ndim; i++)
        sp.shape[i] = m.hdr.shape[i + 1];
    sp.hi = sp.lo + rows;
    sp.init = GKV_INIT_ZEROS;           /* unwritten zeros cost nothing */
    data = m.data;
    if (c->opt[O_ORIG_IDS] != NULL) {
        if ((ex = origmap_open(&om, c->opt[O_ORIG_IDS], file, rows)) != EX_OK)
            goto out;
        omp = &om;
        ex = EX_FAIL;
        /* the IDs are the mapping's: a new tensor starts at its lowest
         * (an export --orig-ids of a tensor from ID 10 comes back there) */
        sp.lo = om.min;
        sp.hi = om.min + rows;
    }
    if (c->remote) {
        ex = import_remote(c, name, file, &m, &sp, state, omp);
        goto out;
    }
    if (state) {
        ex = import_state(c, name, file, &m, sp.lo, c->opt[O_LO] != NULL, omp);
        goto out;
    }
    /* a new tensor [lo, lo + rows), written in ID order */
    if (omp != NULL &&
        (ex = origmap_perm(omp, c->opt[O_ORIG_IDS], sp.lo, "a new tensor")) != EX_OK)
        goto out;

    /* ---- the store */
    if ((ex = store_open(c, GKV_CREATE)) != EX_OK)
        goto out;
    ex = EX_FAIL;
    rc = gkv_tensor_info(c->s, NULL, name, &d);
    if (rc == GKV_OK && c->opt[O_REPLACE] == NULL) {
        fail("import: tensor '%s': %s (give --replace to replace it)", name,
             gkv_strerror(GKV_EEXIST));
        goto out;
    }
    if (rc != GKV_OK && rc != GKV_ENOTFOUND) {
        fail_gkv(c->s, rc, "import: tensor '%s'", name);
        goto out;
    }
    if (rc == GKV_OK && c->opt[O_LO] == NULL && omp == NULL) {
        /* a replacement starts where the tensor it replaces did (a
         * partition's rows stay at its IDs), as through servers */
        if (rows > UINT64_MAX - d.lo) {
            fail("import '%s': tensor '%s' starts at ID %" PRIu64 "; %" PRIu64
                 " rows from there is past 2^64", file, name, d.lo, rows);
            goto out;
        }
        sp.lo = d.lo;
        sp.hi = d.lo + rows;
    }
    snprintf(tmp, sizeof tmp, "%s" IMPORT_TAG "%ld", name, (long)getpid());
    rc = gkv_tensor_create(c->s, tmp, &sp);
    if (rc == GKV_EEXIST) {
        /* left by a killed process that had our PID: no one else can use it */
        if ((rc = gkv_tensor_delete(c->s, tmp)) == GKV_OK)
            rc = gkv_tensor_create(c->s, tmp, &sp);
    }
    if (rc != GKV_OK) {
        fail_gkv(c->s, rc, "import: creating tensor '%s'", name);
        goto out;
    }
    have_tmp = 1;
    if ((rc = gkv_tensor_info(c->s, NULL, tmp, &d)) != GKV_OK) {
        fail_gkv(c->s, rc, "import: tensor '%s'", tmp);
        goto out;
    }
    /* slices of whole chunks: no chunk is written twice */
    step = SLICE_BYTES / d.row_bytes / d.chunk_rows * d.chunk_rows;
    if (step == 0)
        step = d.chunk_rows;
    if (omp != NULL && (gather = malloc(step * d.row_bytes)) == NULL) {
        fail("out of memory");
        goto out;
    }
    snprintf(why, sizeof why, "import %s", name);
    tools__progress_start(&bar, why, m.hdr.data_bytes);
    while (done_rows < rows && !tools__got_signal) {
        uint64_t n = rows - done_rows < step ? rows - done_rows : step;

        rc = gkv_tensor_write(c->s, tmp, sp.lo + done_rows, sp.lo + done_rows + n,
                              origmap_rows(omp, data, d.row_bytes, done_rows, n,
                                           gather), n * d.row_bytes);
        if (rc != GKV_OK) {
            tools__progress_end(&bar, 0);
            fail_gkv(c->s, rc, "import: writing rows [%" PRIu64 ", %" PRIu64
                     ") of '%s'", sp.lo + done_rows, sp.lo + done_rows + n, name);
            goto out;
        }
        done_rows += n;
        tools__progress_update(&bar, done_rows * d.row_bytes);
    }
    /* the swap runs with SIGINT and SIGTERM held: it finishes or does not
     * start; a signal caught before it cancels the import */
    block_signals(1);
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
        fail_gkv(c->s, rc, "import: tensor '%s'", name);
        goto out;
    }
    have_tmp = 0;
    ex = EX_OK;
out:
    if (have_tmp && (rc = gkv_tensor_delete(c->s, tmp)) != GKV_OK)
        fail_gkv(c->s, rc, "import: could not remove temporary tensor '%s'; "
                 "remove it with: kvctl %s rm '%s'", tmp, c->path, tmp);
    gkv_npy_map_close(&m);
    origmap_close(&om);
    free(gather);
    if (c->s != NULL)
        store_close(c, ex != EX_OK);
    if (tools__got_signal && ex != EX_OK) {
        fail("import of '%s' interrupted by %s%s", name,
             tools__got_signal == SIGINT ? "SIGINT" : "SIGTERM",
             c->remote ? "" : "; the store is unchanged");
        return tools__die_of_signal(tools__got_signal);
    }
    block_signals(0);
    return ex;
}

/* ---- export ------------------------------------------------------------------- */

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
 * servers (--server), pulled batch by batch. */
struct rowsrc {
    struct ctx *c;
    const char *name;
    gkv_txn *tx;                 /* the store's snapshot; NULL for servers */
    int zeros;                   /* optimizer state not created yet */
    size_t row_bytes;
    uint64_t *ids;               /* servers: a batch of IDs, 'cap' of them */
    size_t cap;
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
    if (!r->c->remote) {
        if ((rc = gkv_tensor_pull(r->c->s, r->tx, r->name, ids, n, buf,
                                  n * r->row_bytes)) != GKV_OK)
            return fail_gkv(r->c->s, rc, "export: tensor '%s'", r->name);
        return EX_OK;
    }
    if ((rc = gkv_client_pull(r->c->cl, r->name, ids, n, buf,
                              n * r->row_bytes)) != GKV_OK)
        return fail_net(rc, "export: tensor '%s' on %s", r->name,
                        r->c->where);
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
    if (!r->c->remote) {
        if ((rc = gkv_tensor_read(r->c->s, r->tx, r->name, a, a + n, buf,
                                  n * r->row_bytes)) != GKV_OK)
            return fail_gkv(r->c->s, rc, "export: tensor '%s'", r->name);
        return EX_OK;
    }
    for (size_t i = 0; i < n; i++)
        r->ids[i] = a + i;
    return src_ids(r, r->ids, n, buf);
}

/* Maps --orig-ids FILE (the partitioner's mapping/node-<ntype>.npy: int64,
 * entry i the new ID of original ID i) and checks that every new ID is a
 * row of the tensor, [lo, hi). *count gets the entries. */
static int
orig_ids_open(struct ctx *c, const char *file, const gkv_tensor_desc *d,
              struct origmap *m, uint64_t *count)
{
    int ex;

    if ((ex = origmap_load(m, "export", file)) != EX_OK)
        return ex;
    *count = m->n;
    for (uint64_t i = 0; i < *count; i++) {
        int64_t v = (int64_t)origmap_at(m, i);

        if (v < 0 || (uint64_t)v < d->lo || (uint64_t)v >= d->hi)
            return fail("export: --orig-ids '%s': %s: original ID %" PRIu64
                        " maps to %" PRId64 ", which is not a row of tensor "
                        "'%s' [%" PRIu64 ", %" PRIu64 ")%s", file,
                        gkv_strerror(GKV_ERANGE), i, v, d->name, d->lo, d->hi,
                        c->ipc != NULL ? " as the job's machines hold it" :
                        c->server != NULL ? " as the server holds it" : "");
    }
    return EX_OK;
}

static int
cmd_export(struct ctx *c)
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
        return usage_error("export: --range '%s' is not A:B with A < B",
                           c->opt[O_RANGE]);
    if (orig != NULL && c->opt[O_RANGE] != NULL)
        return usage_error("export: --orig-ids and --range do not go together");
    src.c = c;
    src.name = name;
    if (c->remote) {
        if (remote_ready(c) != EX_OK)
            return EX_FAIL;
        if ((rc = gkv_client_tensor_info(c->cl, name, &d)) != GKV_OK)
            return fail_net(rc, "export: tensor '%s' on %s", name, c->where);
    } else {
        if ((ex = store_open(c, GKV_RDONLY)) != EX_OK)
            return ex;
        ex = EX_FAIL;
        /* one snapshot: the file is the tensor as of one moment */
        if ((rc = gkv_txn_begin(c->s, &src.tx)) != GKV_OK) {
            fail_gkv(c->s, rc, "store '%s'", c->path);
            goto out;
        }
        if (strchr(name, '#') != NULL) {
            int exists;
            if (state_desc(c, src.tx, name, &d, &exists) != EX_OK)
                goto out;
            src.zeros = !exists;
        } else if ((rc = gkv_tensor_info(c->s, src.tx, name, &d)) != GKV_OK) {
            fail_gkv(c->s, rc, "tensor '%s'", name);
            goto out;
        }
    }
    src.row_bytes = d.row_bytes;
    if (c->opt[O_RANGE] == NULL) {
        a = d.lo;
        b = d.hi;
    } else if (a < d.lo || b > d.hi) {
        fail("export: tensor '%s': %s: rows [%" PRIu64 ", %" PRIu64 ") are not "
             "inside [%" PRIu64 ", %" PRIu64 ")", name, gkv_strerror(GKV_ERANGE),
             a, b, d.lo, d.hi);
        goto out;
    }
    if (!raw && gkv_npy_descr(d.dtype) == NULL) {
        fail("export: tensor '%s' is %s, which .npy cannot hold; use --raw",
             name, gkv_dtype_name(d.dtype));
        goto out;
    }
    /* the whole job: every row to write is held by some machine */
    if (c->ipc != NULL) {
        gkv_tensor_desc bd = d;     /* a companion is where its tensor is */

        base_name(d.name, bd.name);
        if (job_check(c, "export", &bd, a, b) != EX_OK)
            goto out;
    }
    rows = b - a;
    if (orig != NULL && orig_ids_open(c, orig, &d, &map, &rows) != EX_OK)
        goto out;
    if (stat(file, &sb) == 0 && !S_ISREG(sb.st_mode)) {
        /* the rename at the end would replace a FIFO, device or directory */
        fail("export: '%s' exists and is not a regular file", file);
        goto out;
    }
    if (asprintf(&tmp, "%s.tmp-%ld", file, (long)getpid()) < 0) {
        tmp = NULL;
        fail("out of memory");
        goto out;
    }
    /* a server answers within its timeout: smaller batches than a store */
    step = (c->remote ? SLICE_BYTES / 8 : SLICE_BYTES) / d.row_bytes;
    if (step == 0)
        step = 1;
    if ((c->remote || orig != NULL) && step > (1u << 20))
        step = 1u << 20;            /* the ID list: 8 MiB at most */
    if ((buf = malloc(step * d.row_bytes)) == NULL ||
        ((c->remote || orig != NULL) &&
         (src.ids = malloc(step * sizeof *src.ids)) == NULL)) {
        fail("out of memory");
        goto out;
    }
    src.cap = step;
    tools__catch_signals();
    if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0) {
        fail("export: cannot create '%s': %s", tmp, strerror(errno));
        goto out;
    }
    if (!raw) {
        shape[0] = rows;
        for (unsigned i = 0; i < d.ndim; i++)
            shape[i + 1] = d.shape[i];
        if ((rc = gkv_npy_write_header(fd, d.dtype, d.ndim + 1, shape, NULL, msg,
                                       sizeof msg)) != GKV_OK) {
            fail("export: '%s': %s: %s", tmp, gkv_strerror(rc), msg);
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
                src.ids[i] = origmap_at(&map, at + i);
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
            fail("export: writing '%s': %s", tmp, strerror(errno));
            goto out;
        }
        at += n;
        tools__progress_update(&bar, at * d.row_bytes);
    }
    block_signals(1);
    if (tools__got_signal) {
        tools__progress_end(&bar, 0);
        goto out;
    }
    if (fsync(fd) != 0 || close(fd) != 0) {
        fd = -1;
        tools__progress_end(&bar, 0);
        fail("export: writing '%s': %s", tmp, strerror(errno));
        goto out;
    }
    fd = -1;
    if (rename(tmp, file) != 0) {
        tools__progress_end(&bar, 0);
        fail("export: cannot rename '%s' to '%s': %s", tmp, file, strerror(errno));
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
    origmap_close(&map);
    gkv_txn_end(src.tx);
    if (tools__got_signal && ex != EX_OK) {
        fail("export of '%s' interrupted by %s; no file written", name,
             tools__got_signal == SIGINT ? "SIGINT" : "SIGTERM");
        return tools__die_of_signal(tools__got_signal);
    }
    block_signals(0);
    return ex;
}

/* ---- rm, rename, verify ------------------------------------------------------- */

static int
cmd_rm(struct ctx *c)
{
    gkv_err rc;
    int ex;

    if (c->remote) {
        gkv_tensor_desc d;

        /* the servers' delete succeeds for a missing tensor: name it */
        if ((ex = remote_ready(c)) != EX_OK)
            return ex;
        if ((rc = gkv_client_tensor_info(c->cl, c->args[0], &d)) == GKV_OK &&
            strchr(c->args[0], '#') != NULL)
            return fail("rm: '%s' is optimizer state: reset-opt drops it",
                        c->args[0]);
        if (rc != GKV_OK || (rc = gkv_client_delete(c->cl, c->args[0])) != GKV_OK)
            return fail_any(c, rc, "tensor '%s'", c->args[0]);
        return EX_OK;
    }
    if ((ex = store_open(c, 0)) != EX_OK)
        return ex;
    if ((rc = gkv_tensor_delete(c->s, c->args[0])) != GKV_OK)
        return fail_gkv(c->s, rc, "tensor '%s'", c->args[0]);
    return EX_OK;
}

static int
cmd_rename(struct ctx *c)
{
    gkv_err rc;
    int ex;

    if ((ex = store_open(c, 0)) != EX_OK)
        return ex;
    if ((rc = gkv_tensor_rename(c->s, c->args[0], c->args[1])) != GKV_OK)
        return fail_gkv(c->s, rc, "rename '%s' to '%s'", c->args[0], c->args[1]);
    return EX_OK;
}

static int
cmd_verify(struct ctx *c)
{
    const char *name = c->nargs > 0 ? c->args[0] : NULL;
    gkv_verify_report rep;
    char detail[640];
    gkv_err rc;
    int ex;

    if ((ex = store_open(c, GKV_RDONLY)) != EX_OK)
        return ex;
    rc = gkv_store_verify(c->s, name, &rep);
    snprintf(detail, sizeof detail, "%s", gkv_store_errmsg(c->s));
    if (rc != GKV_OK && rc != GKV_ECORRUPT)
        return fail_gkv(c->s, rc, name ? "verify tensor '%s'" : "verify store '%s'",
                        name ? name : c->path);
    if (c->json) {
        json_t *o = json_object();

        json_object_set_new(o, "store", json_string(c->path));
        json_object_set_new(o, "tensor", name ? json_string(name) : json_null());
        json_object_set_new(o, "ok", json_boolean(rc == GKV_OK));
        json_object_set_new(o, "chunks_checked", json_u64(rep.chunks_checked));
        json_object_set_new(o, "bytes_checked", json_u64(rep.bytes_checked));
        json_object_set_new(o, "bad_chunks", json_u64(rep.bad_chunks));
        json_object_set_new(o, "orphan_keys", json_u64(rep.orphan_keys));
        if (rc == GKV_ECORRUPT) {
            json_t *f = json_object();
            json_object_set_new(f, "tensor", json_string(rep.first_bad));
            json_object_set_new(f, "chunk", json_u64(rep.first_bad_chunk));
            json_object_set_new(f, "row", json_u64(rep.first_bad_row));
            json_object_set_new(o, "first_bad", f);
            json_object_set_new(o, "message", json_string(detail));
        }
        ex = json_print(o, 0);
    } else {
        if (rc == GKV_OK)
            printf("ok: %" PRIu64 " chunks, %" PRIu64 " bytes checked\n",
                   rep.chunks_checked, rep.bytes_checked);
        else if (rep.bad_chunks == 0)
            printf("CORRUPT: %" PRIu64 " orphan data keys; %" PRIu64 " chunks "
                   "checked, all good\n", rep.orphan_keys, rep.chunks_checked);
        else
            printf("CORRUPT: %" PRIu64 " of %" PRIu64 " chunks bad, %" PRIu64
                   " orphan data keys; first: tensor '%s' chunk %" PRIu64
                   " (from row %" PRIu64 ")\n", rep.bad_chunks,
                   rep.chunks_checked, rep.orphan_keys, rep.first_bad,
                   rep.first_bad_chunk, rep.first_bad_row);
        ex = out_done(EX_OK);
    }
    if (rc == GKV_ECORRUPT) {
        fprintf(stderr, PROG ": verify: %s (%s)\n", gkv_strerror(rc), detail);
        return EX_FAIL;
    }
    return ex;
}

/* ---- main ------------------------------------------------------------------- */

/* "-1.5", "-.5", "-inf", "-nan": a value, not an option. */
static int
looks_negative_number(const char *a)
{
    return a[0] == '-' && (isdigit((unsigned char)a[1]) ||
                           (a[1] == '.' && isdigit((unsigned char)a[2])) ||
                           strncasecmp(a + 1, "inf", 3) == 0 ||
                           strncasecmp(a + 1, "nan", 3) == 0);
}

int
main(int argc, char **argv)
{
    struct ctx c;
    char **pos = calloc((size_t)argc + 1, sizeof *pos);
    const char *bad = NULL, *needs = NULL, *remote;
    int npos = 0, help = 0, version = 0, rest = 0, ex;
    unsigned seen = 0;

    memset(&c, 0, sizeof c);
    if (pos == NULL)
        return fail("out of memory");
    for (int i = 1; i < argc; i++) {
        char *a = argv[i];
        const char *eq;
        size_t nl;
        int o;

        if (rest || a[0] != '-' || a[1] == '\0' || looks_negative_number(a)) {
            pos[npos++] = a;
            continue;
        }
        if (strcmp(a, "--") == 0) {
            rest = 1;
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            help = 1;
        } else if (strcmp(a, "-V") == 0 || strcmp(a, "--version") == 0) {
            version = 1;
        } else if (strcmp(a, "--json") == 0) {
            c.json = 1;
        } else {
            eq = strchr(a, '=');
            nl = eq && a[1] == '-' ? (size_t)(eq - a) : strlen(a);
            for (o = 0; o < NOPT; o++)
                if (strlen(optdefs[o].name) == nl && strncmp(optdefs[o].name, a, nl) == 0)
                    break;
            if (o == NOPT) {
                if (bad == NULL)
                    bad = a;
                continue;
            }
            seen |= BIT(o);
            if (!optdefs[o].has_arg) {
                if (eq != NULL && a[1] == '-' && bad == NULL)
                    bad = a;
                c.opt[o] = "";
            } else if (eq != NULL && a[1] == '-') {
                c.opt[o] = eq + 1;
            } else if (i + 1 < argc) {
                c.opt[o] = argv[++i];
            } else if (needs == NULL) {
                needs = optdefs[o].name;
            }
        }
    }
    if (help) {
        /* `kvctl ls --help`, `kvctl STORE ls --help` */
        const struct cmd *hc = npos > 0 ? cmd_find(pos[0]) : NULL;
        if (hc == NULL && npos > 1)
            hc = cmd_find(pos[1]);
        if (hc != NULL)
            cmd_usage(hc, stdout);
        else
            usage(stdout);
        free(pos);
        return out_done(EX_OK);
    }
    if (version) {
        printf("kvctl (gkv) %s\n", GKV_VERSION_STRING);
        free(pos);
        return out_done(EX_OK);
    }
    c.server = c.opt[O_SERVER];
    c.ipc = c.opt[O_IP_CONFIG];
    c.remote = c.server != NULL || c.ipc != NULL;
    /* what the commands name in messages; pos[0] below, for both */
    remote = c.server != NULL ? c.server : c.ipc;
    if (c.server != NULL)
        snprintf(c.where, sizeof c.where, "server %s", c.server);
    else if (c.ipc != NULL)
        snprintf(c.where, sizeof c.where, "the job in '%s'", c.ipc);
    if (c.remote && npos >= 1 && (c.cmd = cmd_find(pos[0])) != NULL)
        usage_cmd = c.cmd->name;
    else if (!c.remote && npos >= 2 && (c.cmd = cmd_find(pos[1])) != NULL)
        usage_cmd = c.cmd->name;
    if (bad != NULL) {
        ex = usage_error("unknown option '%s'", bad);
        goto done;
    }
    if (needs != NULL) {
        ex = usage_error("option %s needs a value", needs);
        goto done;
    }
    if (!c.remote && (c.opt[O_TOKEN_FILE] != NULL ||
                      c.opt[O_GROUP] != NULL)) {
        ex = usage_error("%s goes with --server HOST:PORT or --ip-config FILE",
                         c.opt[O_TOKEN_FILE] != NULL ? "--token-file" : "--group");
        goto done;
    }
    if (c.server != NULL && c.ipc != NULL) {
        ex = usage_error("--server and --ip-config do not go together (one "
                         "server, or every server of the job)");
        goto done;
    }
    if (c.remote) {
        /* what the servers answer; rename and verify need the store */
        static const char *const remote_cmds[] = {"ls", "info", "get", "stat",
                                                  "export", "put", "import",
                                                  "create", "rm", "reset-opt"};
        const char *opt = c.server != NULL ? "--server" : "--ip-config";
        int ok = 0;

        if (npos == 0 || c.cmd == NULL) {
            ex = usage_error(npos == 0 ? "missing COMMAND after %s %s" :
                             "unknown command '%s'", npos == 0 ? opt : pos[0],
                             remote);
            goto done;
        }
        for (size_t i = 0; i < sizeof remote_cmds / sizeof remote_cmds[0]; i++)
            ok |= strcmp(c.cmd->name, remote_cmds[i]) == 0;
        if (!ok) {
            ex = usage_error("%s: not available with %s (ls, info, get, stat, "
                             "export, put, import, create, rm and reset-opt "
                             "are; %s works on a store: run it on the store's "
                             "machine, kvctl STORE %s)", c.cmd->name, opt,
                             c.cmd->name, c.cmd->name);
            goto done;
        }
        if (c.opt[O_ALL] != NULL) {
            ex = usage_error("ls --all: a server lists no optimizer state");
            goto done;
        }
        /* no STORE: the command comes first */
        memmove(pos + 1, pos, (size_t)npos * sizeof *pos);
        pos[0] = (char *)remote;
        npos++;
    }
    if (npos == 0) {
        ex = usage_error("missing STORE and COMMAND");
        goto done;
    }
    if (c.cmd == NULL) {
        const char *first = pos[0];
        struct stat sb;

        if (npos == 1 && cmd_find(first) != NULL)
            ex = usage_error("missing STORE: it comes before the command "
                             "(kvctl STORE %s ...)", first);
        else if (npos == 1)
            ex = usage_error("missing COMMAND after STORE '%s'", first);
        else if (cmd_find(first) != NULL && stat(first, &sb) != 0)
            ex = usage_error("unknown command '%s'; the store comes first: "
                             "kvctl STORE %s ...", pos[1], first);
        else
            ex = usage_error("unknown command '%s'", pos[1]);
        goto done;
    }
    for (int o = 0; o < NOPT; o++)
        if ((seen & BIT(o)) && !(c.cmd->opts & BIT(o)) &&
            !(GLOBAL_OPTS & BIT(o))) {
            ex = usage_error("%s: option %s does not apply", c.cmd->name,
                             optdefs[o].name);
            goto done;
        }
    c.path = pos[0];
    c.args = pos + 2;
    c.nargs = npos - 2;
    if (c.nargs < c.cmd->min_args) {
        ex = usage_error("%s: missing arguments (kvctl STORE %s)", c.cmd->name,
                         c.cmd->synopsis);
        goto done;
    }
    if (c.cmd->max_args >= 0 && c.nargs > c.cmd->max_args) {
        ex = usage_error("%s: unexpected argument '%s'", c.cmd->name,
                         c.args[c.cmd->max_args]);
        goto done;
    }
    if (c.path[0] == '\0') {
        ex = usage_error(c.ipc != NULL ? "empty --ip-config path" :
                         c.server != NULL ? "empty --server address" :
                         "empty STORE path");
        goto done;
    }
    {
        static char obuf[1 << 16];
        setvbuf(stdout, obuf, _IOFBF, sizeof obuf);
    }
    /* a command connects (remote_ready) once its arguments are checked */
    ex = c.cmd->fn(&c);
    if (c.s != NULL)
        store_close(&c, 0);
    if (c.cl != NULL || c.jm != NULL)
        server_close(&c);
done:
    free(pos);
    return ex;
}
