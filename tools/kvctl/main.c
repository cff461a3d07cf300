/* kvctl - inspect and administer a gkv store directory, or the tensors of
 * running servers (see kvctl.h for the files, doc/man/kvctl.1 for use).
 *
 * main.c: the options, the command table and its --help texts, and the
 * checks of a command line before a command runs: every usage error is
 * found here or in the command's own argument checks, before the store is
 * opened or a server asked (exit 2 either way). The options are read by
 * the tools' shared parser (opt.h); -h anywhere wins over usage errors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kvctl.h"
#include "opt.h"
#include "ops.h"
#include "util.h"

/* ---- options ------------------------------------------------------------ */

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

static const struct cmd cmds[] = {
    {"ls", kvctl__cmd_ls, 0, 0, BIT(O_ALL), "ls [--all]",
     "Lists the tensors: name, dtype, shape (rows x row shape), ID range\n"
     "[lo, hi), rows per chunk and bytes of rows. Tab-separated when stdout\n"
     "is not a terminal.\n\n"
     "  --all    also list optimizer-state companions (NAME#adam_m, ...)\n"},
    {"info", kvctl__cmd_info, 1, 1, 0, "info NAME",
     "Describes tensor NAME: dtype, shapes, range, chunking, flags and its\n"
     "optimizer-state companions.\n"},
    {"get", kvctl__cmd_get, 2, 2, BIT(O_ORIG_IDS),
     "get NAME IDS [--orig-ids MAPPING.npy]",
     "Prints the rows with the given global IDs, one per line:\n"
     "\"ID: v0 v1 ...\" (f32 as %.9g, f64 as %.17g, f16 and bf16 widened to\n"
     "f32, integers as integers). Every ID is checked against the tensor's\n"
     "range before anything is printed. From a store directory, each chunk\n"
     "read is checked against its checksum (as verify does): a changed\n"
     "chunk is an error naming it, never printed.\n\n"
     "Which IDs: those the rows are stored by. For a partitioned graph\n"
     "(node/T/F, edge/E/F, or servers that serve partitions) these are the\n"
     "partitioned IDs gkv-partition renumbered the graph to, not the input\n"
     "graph's: an original ID would silently give another node's row. Give\n"
     "--orig-ids for original IDs: node/T/F takes mapping/node-T.npy,\n"
     "edge/E/F mapping/edge-E.npy, and another type's mapping, or one of\n"
     "the wrong length, is refused. A note on stderr says which IDs these\n"
     "are; --json says it in \"id_space\": \"partitioned\", \"original\" or\n"
     "\"stored\" (a plain tensor's own IDs).\n\n"
     "  --orig-ids MAPPING.npy\n"
     "               IDS are original IDs: gkv-partition's\n"
     "               mapping/node-NTYPE.npy (original ID -> new ID) maps them;\n"
     "               the lines print the original IDs (--json: \"ids\", and\n"
     "               the stored ones in \"new_ids\")\n\n"
     "With --server, an ID outside the rows that server holds names the\n"
     "partition that owns it (from the partition book the servers send);\n"
     "--ip-config reaches every server of the job.\n\n"
     "IDS: 1,5,9 | 10:20 (half-open: 10..19) | 1,5,10:20 | @FILE (IDs or\n"
     "ranges separated by whitespace, newlines or commas)\n"},
    {"put", kvctl__cmd_put, 3, -1, BIT(O_HANDLER) | BIT(O_LR) |
     BIT(O_ORIG_IDS),
     "put NAME ID VALUES... [--orig-ids MAPPING.npy]",
     "Writes one row: VALUES are exactly as many numbers as a row holds,\n"
     "separated by commas or spaces (one argument or several). ID is a\n"
     "stored (for a partitioned graph: partitioned) ID, as get takes.\n\n"
     "  --handler H  how to combine with the stored row: assign (default),\n"
     "               add, or an optimizer (sgd, adagrad, adam; VALUES is\n"
     "               then the gradient)\n"
     "  --lr X       learning rate for the optimizers (default 0.01)\n"
     "  --orig-ids MAPPING.npy\n"
     "               ID is an original ID, mapped as get maps it\n"},
    {"create", kvctl__cmd_create, 1, 1,
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
    {"import", kvctl__cmd_import, 2, 2,
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
    {"export", kvctl__cmd_export, 2, 2,
     BIT(O_RAW) | BIT(O_RANGE) | BIT(O_ORIG_IDS),
     "export NAME FILE [--raw] [--range A:B | --orig-ids MAPPING.npy]",
     "Writes tensor NAME to FILE as .npy (a bf16 tensor needs --raw). FILE\n"
     "appears only when complete: rows go to FILE.tmp-PID, renamed at the end.\n"
     "From a store directory, each chunk read is checked against its\n"
     "checksum (as verify does): a changed chunk fails the export.\n"
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
    {"reset-opt", kvctl__cmd_reset_opt, 1, 2, 0,
     "reset-opt NAME [adagrad|adam]",
     "Drops the optimizer state of tensor NAME (gkv_opt_reset): the\n"
     "companions of adagrad or adam (default: both); the next push with that\n"
     "optimizer starts fresh (adam at step 1). The rows are not changed.\n"
     "To checkpoint optimizer state, export NAME#adam_m, NAME#adam_v,\n"
     "NAME#adam_t and NAME#adagrad_s (a companion never used exports as\n"
     "zeros); to restore it, import those files to the same names.\n"},
    {"rm", kvctl__cmd_rm, 1, 1, 0, "rm NAME",
     "Deletes tensor NAME with its optimizer state (also a tensor left by an\n"
     "interrupted import, NAME.kvctl-import-PID).\n"},
    {"rename", kvctl__cmd_rename, 2, 2, 0, "rename FROM TO",
     "Renames tensor FROM (and its optimizer state) to TO.\n"},
    {"verify", kvctl__cmd_verify, 0, 1, 0, "verify [NAME]",
     "Checks the structure of the store's file (every B-tree page), then\n"
     "recomputes the checksum of every chunk of NAME (default: all tensors).\n"
     "Exit status 1 when any chunk is corrupt; the first bad one is named.\n"},
    {"stat", kvctl__cmd_stat, 0, 0, 0, "stat",
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
"         [--orig-ids MAPPING.npy]   (IDs: see below)\n"
"  put NAME ID VALUES...   write one row [--handler H] [--lr X]\n"
"         [--orig-ids MAPPING.npy]\n"
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
"  verify [NAME]           check the file's structure and every chunk\n"
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
"IDs are those the rows are stored by: for a partitioned graph the\n"
"partitioned IDs gkv-partition renumbered it to, not the input graph's;\n"
"get and put take original IDs with --orig-ids DIR/mapping/node-NTYPE.npy.\n"
"get says which on stderr, or in --json's \"id_space\".\n"
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

/* ---- the command line -------------------------------------------------- */

/* What the parser collects: the operands in order (STORE COMMAND ARGS, or
 * COMMAND ARGS through servers; one slot spare for the server address
 * main() puts first) and the flags, into the context the commands get. */
struct cmdline {
    struct ctx *c;
    char **pos;
    int npos;
    int flag[NOPT];             /* --all, --hot, --replace, --raw */
};

static int
operand(void *ctx, const char *arg)
{
    struct cmdline *l = ctx;

    l->pos[l->npos++] = (char *)arg;
    return 0;
}

/* -h, --help: the help of the command named (`kvctl ls --help`, `kvctl
 * STORE ls --help`), else kvctl's. */
static void
help(void *ctx, FILE *f)
{
    const struct cmdline *l = ctx;
    const struct cmd *hc = l->npos > 0 ? cmd_find(l->pos[0]) : NULL;

    if (hc == NULL && l->npos > 1)
        hc = cmd_find(l->pos[1]);
    if (hc != NULL)
        cmd_usage(hc, f);
    else
        usage(f);
}

/* After the help or the version: a failed write is said as a command's
 * output is, exit 1. */
static int
shown(void *ctx)
{
    return kvctl__out_done(EX_OK);
}

/* The context from the options and operands read: local or remote, and
 * the command (which names its own help in usage errors). */
static void
cmdline_resolve(struct cmdline *l)
{
    struct ctx *c = l->c;
    char **pos = l->pos;
    int npos = l->npos;

    c->server = c->opt[O_SERVER];
    c->ipc = c->opt[O_IP_CONFIG];
    c->remote = c->server != NULL || c->ipc != NULL;
    c->ops = c->remote ? &kvctl__server_ops : &kvctl__store_ops;
    if (c->server != NULL)
        snprintf(c->where, sizeof c->where, "server %s", c->server);
    else if (c->ipc != NULL)
        snprintf(c->where, sizeof c->where, "the job in '%s'", c->ipc);
    if (c->remote && npos >= 1 && (c->cmd = cmd_find(pos[0])) != NULL)
        kvctl__usage_cmd = c->cmd->name;
    else if (!c->remote && npos >= 2 && (c->cmd = cmd_find(pos[1])) != NULL)
        kvctl__usage_cmd = c->cmd->name;
}

/* A usage error of the parse, with the command's "Try" line. */
static int
parse_error(void *ctx, const char *what)
{
    cmdline_resolve(ctx);
    return kvctl__usage_error("%s", what);
}

/* ---- main --------------------------------------------------------------- */

int
main(int argc, char **argv)
{
    static const char *const wording[OPT_E_COUNT] = {
        [OPT_E_NEEDS_VALUE] = "option %s needs a value",
    };
    struct ctx c;
    struct cmdline l = {.c = &c};
    struct tools_opt opts[NOPT + 2];
    const struct tools_opt_parser parser = {
        .prog = "kvctl", .opts = opts, .usage = usage, .help = help,
        .flags = OPT_HELP_WINS | OPT_NEGATIVE_OPERANDS | OPT_QUOTE_ARGUMENT,
        .version = "kvctl (gkv) " GKV_VERSION_STRING,
        .operand = operand, .ctx = &l, .wording = wording,
        .error = parse_error, .shown = shown,
    };
    char **pos;
    const char *remote;
    int npos, ex;

    memset(&c, 0, sizeof c);
    tools__prog = "kvctl";
    /* every value may be empty or begin with '-': the commands check them */
    for (int o = 0; o < NOPT; o++)
        opts[o] = (struct tools_opt){
            optdefs[o].name, optdefs[o].has_arg ? OPT_STR : OPT_FLAG,
            .dst = optdefs[o].has_arg ? (void *)&c.opt[o] : &l.flag[o],
            .flags = OPT_EMPTY_OK,
        };
    opts[NOPT] = (struct tools_opt){"--json", OPT_FLAG, .dst = &c.json};
    opts[NOPT + 1] = (struct tools_opt){NULL};
    if ((l.pos = calloc((size_t)argc + 1, sizeof *l.pos)) == NULL)
        return kvctl__fail("out of memory");
    if ((ex = tools__opt_parse(&parser, argc, argv)) != 0)
        goto done;
    for (int o = 0; o < NOPT; o++)
        if (l.flag[o])
            c.opt[o] = "";
    cmdline_resolve(&l);
    pos = l.pos;
    npos = l.npos;
    /* what the commands name in messages; pos[0] below, for both */
    remote = c.server != NULL ? c.server : c.ipc;
    if (!c.remote && (c.opt[O_TOKEN_FILE] != NULL ||
                      c.opt[O_GROUP] != NULL)) {
        ex = kvctl__usage_error("%s goes with --server HOST:PORT or "
                                "--ip-config FILE",
                                c.opt[O_TOKEN_FILE] != NULL ? "--token-file" :
                                "--group");
        goto done;
    }
    if (c.server != NULL && c.ipc != NULL) {
        ex = kvctl__usage_error("--server and --ip-config do not go together "
                                "(one server, or every server of the job)");
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
            ex = kvctl__usage_error(npos == 0 ? "missing COMMAND after %s %s" :
                                    "unknown command '%s'", npos == 0 ? opt :
                                    pos[0], remote);
            goto done;
        }
        for (size_t i = 0; i < sizeof remote_cmds / sizeof remote_cmds[0]; i++)
            ok |= strcmp(c.cmd->name, remote_cmds[i]) == 0;
        if (!ok) {
            ex = kvctl__usage_error("%s: not available with %s (ls, info, get, "
                                    "stat, export, put, import, create, rm and "
                                    "reset-opt are; %s works on a store: run "
                                    "it on the store's machine, kvctl STORE "
                                    "%s)", c.cmd->name, opt, c.cmd->name,
                                    c.cmd->name);
            goto done;
        }
        if (c.opt[O_ALL] != NULL) {
            ex = kvctl__usage_error("ls --all: a server lists no optimizer "
                                    "state");
            goto done;
        }
        /* no STORE: the command comes first */
        memmove(pos + 1, pos, (size_t)npos * sizeof *pos);
        pos[0] = (char *)remote;
        npos++;
    }
    if (npos == 0) {
        ex = kvctl__usage_error("missing STORE and COMMAND");
        goto done;
    }
    if (c.cmd == NULL) {
        const char *first = pos[0];
        struct stat sb;

        if (npos == 1 && cmd_find(first) != NULL)
            ex = kvctl__usage_error("missing STORE: it comes before the "
                                    "command (kvctl STORE %s ...)", first);
        else if (npos == 1)
            ex = kvctl__usage_error("missing COMMAND after STORE '%s'", first);
        else if (cmd_find(first) != NULL && stat(first, &sb) != 0)
            ex = kvctl__usage_error("unknown command '%s'; the store comes "
                                    "first: kvctl STORE %s ...", pos[1], first);
        else
            ex = kvctl__usage_error("unknown command '%s'", pos[1]);
        goto done;
    }
    for (int o = 0; o < NOPT; o++)
        if (c.opt[o] != NULL && !(c.cmd->opts & BIT(o)) &&
            !(GLOBAL_OPTS & BIT(o))) {
            ex = kvctl__usage_error("%s: option %s does not apply", c.cmd->name,
                                    optdefs[o].name);
            goto done;
        }
    c.path = pos[0];
    c.args = pos + 2;
    c.nargs = npos - 2;
    if (c.nargs < c.cmd->min_args) {
        ex = kvctl__usage_error("%s: missing arguments (kvctl STORE %s)",
                                c.cmd->name, c.cmd->synopsis);
        goto done;
    }
    if (c.cmd->max_args >= 0 && c.nargs > c.cmd->max_args) {
        ex = kvctl__usage_error("%s: unexpected argument '%s'", c.cmd->name,
                                c.args[c.cmd->max_args]);
        goto done;
    }
    if (c.path[0] == '\0') {
        ex = kvctl__usage_error(c.ipc != NULL ? "empty --ip-config path" :
                                c.server != NULL ? "empty --server address" :
                                "empty STORE path");
        goto done;
    }
    {
        static char obuf[1 << 16];
        setvbuf(stdout, obuf, _IOFBF, sizeof obuf);
    }
    /* a command opens the store or connects (c.ops->open) once its
     * arguments are checked */
    ex = c.cmd->fn(&c);
    c.ops->close(&c, 0);
done:
    free(l.pos);
    return ex;
}
