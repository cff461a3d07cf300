/* gkv-partition - split a graph into partitions on disk, one gkv store per
 * partition plus a JSON config with DGL's field names (the job of DGL's
 * dgl.distributed.partition_graph).
 *
 *   gkv-partition [options] OUTDIR
 *
 * The graph comes from edge lists (text or binary) or from the R-MAT
 * generator; features from .npy files. All the work is the library's
 * gkv_partition_write() (graph/gkv_partition.h); this tool builds the graph
 * and the spec from the command line, so it doubles as an example of both.
 *
 * Exit status: 0 ok; 1 the operation failed (the reason on stderr, as
 * "gkv-partition: WHAT: detail (GKV_EXXX)"); 2 bad usage. --help prints
 * to stdout and exits 0. SIGINT and SIGTERM stop a run cleanly: nothing is
 * left behind, then the tool dies of the signal (during METIS, once METIS
 * returns; while the graph loads, at once, even in a read from a stalled
 * pipe).
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "gkv.h"
#include "gkv_partition.h"
#include "idlist.h"
#include "opt.h"
#include "progress.h"
#include "util.h"

#define PROG "gkv-partition"

enum { EX_OK = 0, EX_FAIL = 1, EX_USAGE = 2 };

static void
usage(FILE *f)
{
    fputs(
"Usage: gkv-partition [options] OUTDIR\n"
"\n"
"Splits a graph into partitions: OUTDIR/<name>.json (the partition config,\n"
"with DGL's field names), OUTDIR/part-<p>/ (one gkv store per partition:\n"
"the CSC of the in-edges of the nodes it owns, their features) and\n"
"OUTDIR/mapping/*.npy (original ID -> new ID per node and edge type).\n"
"OUTDIR appears only when complete.\n"
"\n"
"Partitioning (as dgl.distributed.partition_graph):\n"
"  --name NAME          graph name: the config is NAME.json (default graph)\n"
"  --parts N            number of partitions (required)\n"
"  --method M           metis (default), random or range\n"
"  --seed N             seed of random, of METIS and of --rmat (default 0)\n"
"  --balance-edges      metis: also balance the in-edges per partition\n"
"  --train-mask [NTYPE=]FILE.npy\n"
"                       metis: also balance training nodes (non-zero = train)\n"
"  --csr                also store the CSR of out-edges in each partition\n"
"  --force              replace a partition already in OUTDIR\n"
"\n"
"The graph, homogeneous:\n"
"  --num-nodes N        number of nodes (default: largest ID + 1)\n"
"  --input FILE         text edge list: 'src dst' per line (blanks or a\n"
"                       comma between fields, '#' comments)\n"
"  --binary FILE        binary edge list: little-endian int64 pairs\n"
"  --weights FILE       float32 per edge of the --binary file\n"
"  --text-weights       text lines end with a weight: 'src dst w'\n"
"  --header             skip the first line of each text file ('src,dst')\n"
"  --rmat SCALE[:EF]    an R-MAT graph: 2^SCALE nodes, EF x 2^SCALE edges\n"
"                       (default EF 16; Graph500 parameters; --seed)\n"
"\n"
"The graph, heterogeneous:\n"
"  --ntype NAME[=N]     a node type with N nodes (default: largest ID + 1);\n"
"                       repeat for each type, in type order\n"
"  --etype SRC:REL:DST[=FILE]\n"
"                       an edge type, with FILE: its text edge list\n"
"  --input [SRC:REL:DST=]FILE, --binary [SRC:REL:DST=]FILE,\n"
"  --weights [SRC:REL:DST=]FILE\n"
"                       edges of the named type (needed when there are\n"
"                       several types, unless --etype-column)\n"
"  --etype-column       text lines are 'src dst etype' (canonical or a\n"
"                       unique relation)\n"
"\n"
"Features (rows in original ID order; stored at the new IDs):\n"
"  --node-feat [NTYPE/]NAME=FILE.npy   as node/<ntype>/<name>\n"
"  --edge-feat [SRC:REL:DST/]NAME=FILE.npy   as edge/<canonical>/<name>\n"
"  --reverse-etypes ETYPE=REVERSE   edge k of each type is the reverse of\n"
"                       edge k of the other (DGL's reverse_etypes): each\n"
"                       gets edge/<canonical>/reverse_eid, the new ID of\n"
"                       its reverse, for excluding reverse edges\n"
"\n"
"Other:\n"
"  --threads N          worker threads (default: CPUs, at most 8)\n"
"  --stats              print one line to stdout: seconds, edges/s, peak RSS\n"
"  -h, --help           show this help\n"
"  -V, --version        show the version\n"
"\n"
"Options take their value as the next argument or after '='.\n"
"Exit status: 0 ok, 1 failed, 2 usage error. See gkv-partition(1).\n",
          f);
}

/* ---- messages ------------------------------------------------------------ */

/* "gkv-partition: WHAT: detail (GKV_EXXX)", or "WHAT: strerror" when the
 * library gave no detail. The detail names the file, line, type or count;
 * gkv_strerror's store-minded texts would only blur it. */
static int
fail_rc(gkv_err rc, const char *detail, const char *fmt, ...)
{
    va_list ap;

    fputs(PROG ": ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    if (detail != NULL && *detail != '\0')
        fprintf(stderr, ": %s (%s)\n", detail, gkv_err_name(rc));
    else
        fprintf(stderr, ": %s\n", gkv_strerror(rc));
    return EX_FAIL;
}

/* ---- progress ------------------------------------------------------------- */

struct prog {
    int tty;
    tools_progress bar;
    int bar_on;
    const char *method;
};

static int
on_progress(void *ctx, const char *stage, uint64_t done, uint64_t total)
{
    struct prog *p = ctx;

    if (tools__got_signal)
        return 1;
    if (!p->tty)
        return 0;
    if (strcmp(stage, "write") == 0) {
        if (!p->bar_on) {
            tools__progress_start(&p->bar, "writing", total);
            p->bar_on = 1;
        }
        tools__progress_update(&p->bar, done);
    } else if (strcmp(stage, "assign") == 0 && total == 0) {
        fprintf(stderr, PROG ": assigning nodes (%s)...\n", p->method);
    } else if (strcmp(stage, "sync") == 0 && total == 0) {
        if (p->bar_on)
            tools__progress_end(&p->bar, 1);
        p->bar_on = 0;
        fputs(PROG ": syncing to disk...\n", stderr);
    }
    return 0;
}

/* ---- the command line ----------------------------------------------------- */

struct input {
    int binary;
    char *etype;          /* canonical name, or NULL: the only type/column */
    const char *path;
};

struct named {            /* "[KEY=]VALUE" or "[TYPE/]NAME=FILE" options */
    char *key;            /* may be NULL */
    const char *val;
    char *name;           /* features: the feature name */
    size_t after;         /* --weights: the --input/--binary options before it */
};

struct opts {
    const char *out, *name, *method, *parts, *seed, *num_nodes, *rmat,
               *threads;
    int csr, force, stats, balance_edges, etype_column, text_weights, header;
    struct named *ntypes, *etypes, *weights, *nfeat, *efeat, *masks, *rev;
    size_t n_ntypes, n_etypes, n_weights, n_nfeat, n_efeat, n_masks, n_rev;
    struct input *inputs;
    size_t n_inputs;
};

static int
push(void **arr, size_t *n, size_t size, const void *item)
{
    void *p = realloc(*arr, (*n + 1) * size);

    if (p == NULL)
        return -1;
    memcpy((char *)p + *n * size, item, size);
    *arr = p;
    (*n)++;
    return 0;
}

/* Does s (n bytes) look like a canonical edge type "a:b:c"? */
static int
is_canonical(const char *s, size_t n)
{
    size_t colons = 0;

    for (size_t i = 0; i < n; i++) {
        if (s[i] == '/' || s[i] == '=')
            return 0;
        colons += s[i] == ':';
    }
    return colons == 2 && n >= 5;
}

static char *
dupn(const char *s, size_t n)
{
    char *p = malloc(n + 1);

    if (p != NULL) {
        memcpy(p, s, n);
        p[n] = '\0';
    }
    return p;
}

/* "[SRC:REL:DST=]FILE" -> key (or NULL), val. */
static int
split_canon_file(const char *a, struct named *nm)
{
    const char *eq = strchr(a, '=');

    memset(nm, 0, sizeof *nm);
    if (eq != NULL && is_canonical(a, (size_t)(eq - a))) {
        if ((nm->key = dupn(a, (size_t)(eq - a))) == NULL)
            return -1;
        nm->val = eq + 1;
    } else {
        nm->val = a;
    }
    return 0;
}

/* "[TYPE/]NAME=FILE": the type is before the last '/' ahead of the '='. */
static int
split_feat(const char *a, struct named *nm)
{
    const char *eq = strchr(a, '='), *sl = NULL;

    memset(nm, 0, sizeof *nm);
    if (eq == NULL || eq == a || eq[1] == '\0')
        return 1;
    for (const char *c = a; c < eq; c++)
        if (*c == '/')
            sl = c;
    if (sl != NULL) {
        if (sl == a || (nm->key = dupn(a, (size_t)(sl - a))) == NULL)
            return sl == a ? 1 : -1;
        a = sl + 1;
    }
    if (a == eq || (nm->name = dupn(a, (size_t)(eq - a))) == NULL) {
        free(nm->key);              /* "TYPE/=FILE": no name */
        nm->key = NULL;
        return a == eq ? 1 : -1;
    }
    nm->val = eq + 1;
    return 0;
}

/* "NAME[=N]" (--ntype): split at the last '='. */
static int
split_last_eq(const char *a, struct named *nm)
{
    const char *eq = strrchr(a, '=');

    memset(nm, 0, sizeof *nm);
    if (eq == NULL) {
        nm->val = NULL;
        if ((nm->key = strdup(a)) == NULL)
            return -1;
        return 0;
    }
    if ((nm->key = dupn(a, (size_t)(eq - a))) == NULL)
        return -1;
    nm->val = eq + 1;
    return 0;
}

static void
free_named(struct named *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(v[i].key);
        free(v[i].name);
    }
    free(v);
}

static void
opts_free(struct opts *o)
{
    free_named(o->ntypes, o->n_ntypes);
    free_named(o->etypes, o->n_etypes);
    free_named(o->weights, o->n_weights);
    free_named(o->nfeat, o->n_nfeat);
    free_named(o->efeat, o->n_efeat);
    free_named(o->masks, o->n_masks);
    free_named(o->rev, o->n_rev);
    for (size_t i = 0; i < o->n_inputs; i++)
        free(o->inputs[i].etype);
    free(o->inputs);
}

/* Parses a positive int; -1 when s is not one. */
static long long
parse_count(const char *s, long long max)
{
    uint64_t v;

    if (s == NULL || *s == '-' || *s == '+' || tools__parse_u64(s, &v) != 0 ||
        v > (uint64_t)max)
        return -1;
    return (long long)v;
}

/* Says which OUT.tmp-PID / OUT.old-PID directories beside 'out' were left
 * by runs that are gone (killed: a run removes its own otherwise); they
 * are never used again, and can be large. */
static void
note_leftovers(const char *out_arg)
{
    char out[PATH_MAX], dir[PATH_MAX], base[NAME_MAX + 1];
    const char *slash;
    size_t bl, ol;
    DIR *d;
    struct dirent *de;

    /* "OUT/" names OUT: the library writes OUT.tmp-PID beside it */
    snprintf(out, sizeof out, "%s", out_arg);
    for (ol = strlen(out); ol > 1 && out[ol - 1] == '/'; ol--)
        out[ol - 1] = '\0';
    slash = strrchr(out, '/');
    if (slash == NULL) {
        snprintf(dir, sizeof dir, ".");
        snprintf(base, sizeof base, "%s", out);
    } else {
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - out) + (slash == out),
                 out);
        snprintf(base, sizeof base, "%s", slash + 1);
    }
    bl = strlen(base);
    if (bl == 0 || (d = opendir(dir)) == NULL)
        return;
    while ((de = readdir(d)) != NULL) {
        const char *rest = de->d_name + bl;
        char *end;
        long pid;

        if (strncmp(de->d_name, base, bl) != 0 ||
            (strncmp(rest, ".tmp-", 5) != 0 && strncmp(rest, ".old-", 5) != 0))
            continue;
        pid = strtol(rest + 5, &end, 10);
        if (*end != '\0' || pid <= 0)
            continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;                   /* a run in progress (or not ours) */
        fprintf(stderr, PROG ": note: '%s/%s' was left by an interrupted run "
                "(process %ld is gone); it is not used: remove it\n", dir,
                de->d_name, pid);
    }
    closedir(d);
}

/* The options that take "[KEY=]VALUE" forms: each adds to a list of o. */

static int
add_input(struct opts *o, const char *opt, const char *val, int binary)
{
    struct named nm;
    struct input in;

    if (split_canon_file(val, &nm) != 0)
        return tools__usage_error(PROG, "out of memory");
    in.binary = binary;
    in.etype = nm.key;
    in.path = nm.val;
    if (*in.path == '\0') {
        free(nm.key);
        return tools__usage_error(PROG, "%s: empty file name", opt);
    }
    if (push((void **)&o->inputs, &o->n_inputs, sizeof in, &in) != 0)
        return tools__usage_error(PROG, "out of memory");
    return 0;
}

static int
opt_input(void *ctx, const char *val)
{
    return add_input(ctx, "--input", val, 0);
}

static int
opt_binary(void *ctx, const char *val)
{
    return add_input(ctx, "--binary", val, 1);
}

static int
opt_weights(void *ctx, const char *val)
{
    struct opts *o = ctx;
    struct named nm;

    if (split_canon_file(val, &nm) != 0)
        return tools__usage_error(PROG, "out of memory");
    nm.after = o->n_inputs;
    if (push((void **)&o->weights, &o->n_weights, sizeof nm, &nm) != 0)
        return tools__usage_error(PROG, "out of memory");
    return 0;
}

static int
opt_etype(void *ctx, const char *val)
{
    struct opts *o = ctx;
    const char *eq = strchr(val, '=');
    size_t cl = eq != NULL ? (size_t)(eq - val) : strlen(val);
    struct named nm;

    if (!is_canonical(val, cl))
        return tools__usage_error(PROG, "--etype '%s': expected SRC:REL:DST "
                                  "or SRC:REL:DST=FILE", val);
    memset(&nm, 0, sizeof nm);
    if ((nm.key = dupn(val, cl)) == NULL)
        return tools__usage_error(PROG, "out of memory");
    nm.val = eq != NULL ? eq + 1 : NULL;
    if (nm.val != NULL && *nm.val == '\0') {
        free(nm.key);
        return tools__usage_error(PROG, "--etype '%s': empty file name", val);
    }
    if (push((void **)&o->etypes, &o->n_etypes, sizeof nm, &nm) != 0)
        return tools__usage_error(PROG, "out of memory");
    return 0;
}

static int
opt_ntype(void *ctx, const char *val)
{
    struct opts *o = ctx;
    struct named nm;

    if (split_last_eq(val, &nm) != 0 ||
        push((void **)&o->ntypes, &o->n_ntypes, sizeof nm, &nm) != 0)
        return tools__usage_error(PROG, "out of memory");
    return 0;
}

/* --train-mask: split once the node types are known */
static int
opt_mask(void *ctx, const char *val)
{
    struct opts *o = ctx;
    struct named nm;

    memset(&nm, 0, sizeof nm);
    nm.val = val;
    if (push((void **)&o->masks, &o->n_masks, sizeof nm, &nm) != 0)
        return tools__usage_error(PROG, "out of memory");
    return 0;
}

static int
opt_reverse(void *ctx, const char *val)
{
    struct opts *o = ctx;
    struct named nm;

    if (split_last_eq(val, &nm) != 0)
        return tools__usage_error(PROG, "out of memory");
    if (nm.val == NULL || *nm.key == '\0' || *nm.val == '\0' ||
        strchr(nm.key, '=') != NULL) {
        free(nm.key);
        return tools__usage_error(PROG, "--reverse-etypes '%s': expected "
                                  "ETYPE=REVERSE_ETYPE", val);
    }
    if (push((void **)&o->rev, &o->n_rev, sizeof nm, &nm) != 0)
        return tools__usage_error(PROG, "out of memory");
    return 0;
}

static int
add_feat(const char *opt, const char *val, struct named **v, size_t *n)
{
    struct named nm;
    int r = split_feat(val, &nm);

    if (r > 0)
        return tools__usage_error(PROG, "%s '%s': expected "
                                  "[TYPE/]NAME=FILE.npy", opt, val);
    if (r < 0 || push((void **)v, n, sizeof nm, &nm) != 0)
        return tools__usage_error(PROG, "out of memory");
    return 0;
}

static int
opt_node_feat(void *ctx, const char *val)
{
    struct opts *o = ctx;

    return add_feat("--node-feat", val, &o->nfeat, &o->n_nfeat);
}

static int
opt_edge_feat(void *ctx, const char *val)
{
    struct opts *o = ctx;

    return add_feat("--edge-feat", val, &o->efeat, &o->n_efeat);
}

/* OUTDIR, the one operand */
static int
operand(void *ctx, const char *arg)
{
    struct opts *o = ctx;

    if (o->out != NULL)
        return tools__usage_error(PROG, "unexpected argument '%s' (one "
                                  "OUTDIR only)", arg);
    o->out = arg;
    return 0;
}

/* Fills *o from argv. Returns EX_OK or EX_USAGE (the message printed);
 * --help and --version exit. Values stay text here: main() checks them
 * once the graph's shape is known. */
static int
parse_args(int argc, char **argv, struct opts *o)
{
    const struct tools_opt opts[] = {
        {"--name", OPT_STR, .dst = &o->name, .flags = OPT_EMPTY_OK},
        {"--parts", OPT_STR, .dst = &o->parts, .flags = OPT_EMPTY_OK},
        {"--method", OPT_STR, .dst = &o->method, .flags = OPT_EMPTY_OK},
        {"--seed", OPT_STR, .dst = &o->seed, .flags = OPT_EMPTY_OK},
        {"--balance-edges", OPT_FLAG, .dst = &o->balance_edges},
        {"--train-mask", OPT_FN, .fn = opt_mask, .flags = OPT_EMPTY_OK},
        {"--csr", OPT_FLAG, .dst = &o->csr},
        {"--force", OPT_FLAG, .dst = &o->force},
        {"--num-nodes", OPT_STR, .dst = &o->num_nodes, .flags = OPT_EMPTY_OK},
        {"--input", OPT_FN, .fn = opt_input, .flags = OPT_EMPTY_OK},
        {"--binary", OPT_FN, .fn = opt_binary, .flags = OPT_EMPTY_OK},
        {"--weights", OPT_FN, .fn = opt_weights, .flags = OPT_EMPTY_OK},
        {"--text-weights", OPT_FLAG, .dst = &o->text_weights},
        {"--header", OPT_FLAG, .dst = &o->header},
        {"--rmat", OPT_STR, .dst = &o->rmat, .flags = OPT_EMPTY_OK},
        {"--ntype", OPT_FN, .fn = opt_ntype, .flags = OPT_EMPTY_OK},
        {"--etype", OPT_FN, .fn = opt_etype, .flags = OPT_EMPTY_OK},
        {"--etype-column", OPT_FLAG, .dst = &o->etype_column},
        {"--node-feat", OPT_FN, .fn = opt_node_feat, .flags = OPT_EMPTY_OK},
        {"--edge-feat", OPT_FN, .fn = opt_edge_feat, .flags = OPT_EMPTY_OK},
        {"--reverse-etypes", OPT_FN, .fn = opt_reverse,
         .flags = OPT_EMPTY_OK},
        {"--threads", OPT_STR, .dst = &o->threads, .flags = OPT_EMPTY_OK},
        {"--stats", OPT_FLAG, .dst = &o->stats},
        {NULL},
    };
    /* the tests read "--parts needs a value" */
    static const char *const wording[OPT_E_COUNT] = {
        [OPT_E_NEEDS_VALUE] = "option %s needs a value",
    };
    const struct tools_opt_parser parser = {
        .prog = PROG, .opts = opts, .usage = usage,
        .version = PROG " (gkv) " GKV_VERSION_STRING,
        .operand = operand, .ctx = o, .wording = wording,
    };
    int rc;

    if ((rc = tools__opt_parse(&parser, argc, argv)) != 0)
        return rc;
    if (o->out == NULL)
        return tools__usage_error(PROG, "no output directory (OUTDIR)");
    if (o->out[0] == '\0')
        return tools__usage_error(PROG, "empty output directory (OUTDIR)");
    return EX_OK;
}

/* ---- building the graph ---------------------------------------------------- */

/* Resolves an input's edge type; -2 (usage error printed) when it cannot. */
static int
input_etype(const gkv_graph *g, const struct opts *o, const char *canon,
            int text, const char *path)
{
    int et;

    if (canon != NULL) {
        if (gkv_graph_etype_find(g, canon, &et) != GKV_OK) {
            tools__usage_error(PROG, "'%s': unknown edge type '%s' (declare it with "
                        "--etype)", path, canon);
            return -2;
        }
        return et;
    }
    if (text && o->etype_column)
        return GKV_ETYPE_COLUMN;
    if (gkv_graph_num_etypes(g) == 1)
        return 0;
    tools__usage_error(PROG, "'%s': the graph has %d edge types; name the type "
                "(SRC:REL:DST=FILE)%s", path, gkv_graph_num_etypes(g),
                text ? " or use --etype-column" : "");
    return -2;
}

/* The edge type of --binary input i or of --weights k ([SRC:REL:DST=]),
 * -1 when it names none (input_etype reports that). */
static int
named_etype(const gkv_graph *g, const char *canon)
{
    int et = -1;

    if (canon == NULL)
        return gkv_graph_num_etypes(g) == 1 ? 0 : -1;
    return gkv_graph_etype_find(g, canon, &et) == GKV_OK ? et : -1;
}

/* Pairs every --weights with its --binary file: the last one of its edge
 * type given before it, or, when none comes before it, the only one of
 * that type. wfor[i] gets the --weights index of input i, or -1. EX_OK,
 * or a usage error naming the --weights that pairs with none, or two
 * that pair with one file (their weights would go to the wrong edges). */
static int
pair_weights(const gkv_graph *g, const struct opts *o, long *wfor)
{
    for (size_t i = 0; i < o->n_inputs; i++)
        wfor[i] = -1;
    for (size_t k = 0; k < o->n_weights; k++) {
        int wet = named_etype(g, o->weights[k].key);
        long t, before = -1, only = -1;
        size_t nof = 0;

        for (size_t i = 0; i < o->n_inputs; i++) {
            if (!o->inputs[i].binary || wet < 0 ||
                named_etype(g, o->inputs[i].etype) != wet)
                continue;
            nof++;
            only = (long)i;
            if (i < o->weights[k].after)
                before = (long)i;
        }
        t = before >= 0 ? before : nof == 1 ? only : -1;
        if (t < 0)
            return tools__usage_error(PROG, "--weights '%s' goes with no --binary file of "
                               "its edge type%s", o->weights[k].val, nof > 1 ?
                               " (several follow it: give each --weights "
                               "after its --binary)" : "");
        if (wfor[t] >= 0)
            return tools__usage_error(PROG, "--weights '%s' and '%s' both go with --binary "
                               "'%s' (give each --weights after its "
                               "--binary)", o->weights[wfor[t]].val,
                               o->weights[k].val, o->inputs[t].path);
        wfor[t] = (long)k;
    }
    return EX_OK;
}

static int
build_graph(const struct opts *o, int threads, uint64_t seed, gkv_graph **out)
{
    gkv_graph *g = NULL;
    unsigned tflags = (o->text_weights ? GKV_TEXT_WEIGHT : 0) |
                      (o->header ? GKV_TEXT_HEADER : 0);
    long *wfor = NULL;             /* input i's --weights, or -1 */
    gkv_err rc;
    int ex = EX_OK;

    *out = NULL;
    if (o->rmat != NULL) {
        gkv_rmat_spec rs;
        long long scale, ef = 16;
        char *colon;
        char buf[64];

        if (o->n_ntypes || o->n_etypes || o->n_inputs || o->num_nodes ||
            o->n_weights)
            return tools__usage_error(PROG, "--rmat makes the whole graph: no --ntype, "
                               "--etype, --input, --binary, --weights or "
                               "--num-nodes with it");
        snprintf(buf, sizeof buf, "%s", o->rmat);
        if ((colon = strchr(buf, ':')) != NULL)
            *colon = '\0';
        if ((scale = parse_count(buf, GKV_RMAT_SCALE_MAX)) < 0 ||
            (colon != NULL && (ef = parse_count(colon + 1, INT32_MAX)) < 1))
            return tools__usage_error(PROG, "--rmat '%s': expected SCALE[:EDGE_FACTOR], "
                               "SCALE 0..%d", o->rmat, GKV_RMAT_SCALE_MAX);
        memset(&rs, 0, sizeof rs);
        rs.scale = (int)scale;
        rs.edge_factor = ef;
        rs.seed = seed;
        if ((rc = gkv_rmat_graph(&g, &rs, threads)) != GKV_OK)
            return fail_rc(rc, NULL, "R-MAT scale %lld, edge factor %lld",
                           scale, ef);
        *out = g;
        return EX_OK;
    }
    if (o->n_inputs == 0 && o->n_etypes == 0)
        return tools__usage_error(PROG, "no input: give --input, --binary, --etype "
                           "SRC:REL:DST=FILE or --rmat");
    if (o->n_ntypes > 0) {
        if (o->num_nodes != NULL)
            return tools__usage_error(PROG, "--num-nodes is for homogeneous graphs; give "
                               "counts as --ntype NAME=N");
        if (o->n_etypes == 0)
            return tools__usage_error(PROG, "--ntype without --etype: declare the edge "
                               "types (--etype SRC:REL:DST[=FILE])");
        if ((rc = gkv_graph_new(&g)) != GKV_OK)
            return fail_rc(rc, NULL, "making the graph");
        for (size_t i = 0; i < o->n_ntypes; i++) {
            long long n = GKV_GRAPH_GROW;
            if (o->ntypes[i].val != NULL &&
                (n = parse_count(o->ntypes[i].val, INT64_MAX)) < 0) {
                ex = tools__usage_error(PROG, "--ntype '%s=%s': the count is not a "
                                 "number", o->ntypes[i].key, o->ntypes[i].val);
                goto out;
            }
            if ((rc = gkv_graph_add_ntype(g, o->ntypes[i].key, n, NULL)) != GKV_OK) {
                ex = tools__usage_error(PROG, "--ntype '%s': %s", o->ntypes[i].key,
                                 gkv_graph_errmsg(g));
                goto out;
            }
        }
    } else {
        long long n = GKV_GRAPH_GROW;
        if (o->num_nodes != NULL &&
            (n = parse_count(o->num_nodes, INT64_MAX)) < 0)
            return tools__usage_error(PROG, "--num-nodes '%s' is not a number",
                               o->num_nodes);
        if ((rc = gkv_graph_new(&g)) != GKV_OK ||
            (rc = gkv_graph_add_ntype(g, "_N", n, NULL)) != GKV_OK) {
            gkv_graph_free(g);
            return fail_rc(rc, NULL, "making the graph");
        }
        if (o->n_etypes == 0 && gkv_graph_add_etype(g, "_N", "_E", "_N", NULL)
            != GKV_OK) {
            gkv_graph_free(g);
            return fail_rc(GKV_ENOMEM, NULL, "making the graph");
        }
    }
    for (size_t i = 0; i < o->n_etypes; i++) {
        char *c = strdup(o->etypes[i].key), *c1, *c2;
        if (c == NULL) {
            ex = fail_rc(GKV_ENOMEM, NULL, "parsing --etype");
            goto out;
        }
        c1 = strchr(c, ':');
        *c1 = '\0';
        c2 = strchr(c1 + 1, ':');
        *c2 = '\0';
        rc = gkv_graph_add_etype(g, c, c1 + 1, c2 + 1, NULL);
        free(c);
        if (rc != GKV_OK) {
            ex = tools__usage_error(PROG, "--etype '%s': %s", o->etypes[i].key,
                             rc == GKV_ENOTFOUND ? "unknown node type (declare "
                             "it with --ntype)" : gkv_graph_errmsg(g));
            goto out;
        }
    }
    /* --etype CANON=FILE: text edges of that type */
    for (size_t i = 0; i < o->n_etypes; i++) {
        int et;
        if (o->etypes[i].val == NULL)
            continue;
        gkv_graph_etype_find(g, o->etypes[i].key, &et);
        if ((rc = gkv_graph_read_text(g, o->etypes[i].val, et, tflags)) != GKV_OK) {
            ex = fail_rc(rc, gkv_graph_errmsg(g), "reading '%s'",
                         o->etypes[i].val);
            goto out;
        }
    }
    if ((wfor = calloc(o->n_inputs + 1, sizeof *wfor)) == NULL) {
        ex = fail_rc(GKV_ENOMEM, NULL, "reading the edges");
        goto out;
    }
    if ((ex = pair_weights(g, o, wfor)) != EX_OK)
        goto out;
    for (size_t i = 0; i < o->n_inputs; i++) {
        const struct input *in = &o->inputs[i];
        int et = input_etype(g, o, in->etype, !in->binary, in->path);

        if (et == -2) {
            ex = EX_USAGE;
            goto out;
        }
        if (!in->binary)
            rc = gkv_graph_read_text(g, in->path, et, tflags);
        else
            rc = gkv_graph_read_binary(g, et, in->path, wfor[i] >= 0 ?
                                       o->weights[wfor[i]].val : NULL);
        if (rc != GKV_OK) {
            ex = fail_rc(rc, gkv_graph_errmsg(g), "reading '%s'", in->path);
            goto out;
        }
    }
    /* growing counts are final now */
    for (int t = 0; t < gkv_graph_num_ntypes(g); t++)
        gkv_graph_set_num_nodes(g, t, gkv_graph_num_nodes(g, t));
out:
    free(wfor);
    if (ex != EX_OK) {
        gkv_graph_free(g);
        return ex;
    }
    *out = g;
    return EX_OK;
}

/* "--train-mask [NTYPE=]FILE": the part before an '=' is a node type only
 * when it names one of the graph's, so a path that holds '=' ("run=1/m.npy")
 * is a path. Of several '=', the longest prefix that names a type wins (a
 * type name may hold '='). Returns the type's index and points *file past
 * its '=', or returns -1 with *file = a. */
static int
mask_ntype(const gkv_graph *g, const char *a, const char **file)
{
    char name[GKV_TYPE_NAME_MAX + 1];
    int found = -1, t;

    *file = a;
    for (const char *eq = strchr(a, '='); eq != NULL;
         eq = strchr(eq + 1, '=')) {
        size_t n = (size_t)(eq - a);
        if (n == 0 || n > GKV_TYPE_NAME_MAX)
            continue;
        memcpy(name, a, n);
        name[n] = '\0';
        if (gkv_graph_ntype_find(g, name, &t) == GKV_OK) {
            found = t;
            *file = eq + 1;
        }
    }
    return found;
}

/* SIGINT and SIGTERM back to their default action (whatever the tool
 * inherited), so that they end the process wherever it waits. */
static void
signals_default(void)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

/* ---- main -------------------------------------------------------------------- */

int
main(int argc, char **argv)
{
    struct opts o;
    gkv_part_spec sp;
    gkv_part_feat *feats = NULL;
    gkv_part_mask *masks = NULL;
    gkv_part_reverse *rev = NULL;
    gkv_part_report rep;
    gkv_graph *g = NULL;
    struct prog pg;
    struct rusage ru;
    char msg[1024];
    long long parts, threads;
    uint64_t seed = 0;
    double t0 = tools__now_s(), t_load;
    gkv_err rc;
    int ex, dying = 0;

    memset(&o, 0, sizeof o);
    memset(&sp, 0, sizeof sp);
    /* Until the graph is loaded nothing is on disk: SIGINT and SIGTERM keep
     * their default action and end the tool at once, also in a read() that
     * waits on a stalled pipe or FIFO (a caught signal would restart it).
     * They are caught from then on (below). */
    signals_default();
    tools__prog = PROG;
    ex = parse_args(argc, argv, &o);
    if (ex != EX_OK)
        goto done;

    if (o.parts == NULL) {
        ex = tools__usage_error(PROG, "--parts N is required");
        goto done;
    }
    if ((parts = parse_count(o.parts, GKV_PART_MAX)) < 1) {
        ex = tools__usage_error(PROG, "--parts '%s': expected a whole number from 1 to %d",
                         o.parts, GKV_PART_MAX);
        goto done;
    }
    sp.num_parts = (int)parts;
    if (gkv_part_method_parse(o.method != NULL ? o.method : "metis",
                              &sp.method) != GKV_OK) {
        ex = tools__usage_error(PROG, "--method '%s': expected metis, random or range",
                         o.method);
        goto done;
    }
    if (o.seed != NULL && (*o.seed == '-' || tools__parse_u64(o.seed, &seed) != 0)) {
        ex = tools__usage_error(PROG, "--seed '%s' is not a number", o.seed);
        goto done;
    }
    sp.seed = seed;
    threads = sysconf(_SC_NPROCESSORS_ONLN);
    if (threads < 1)
        threads = 1;
    if (threads > 8)
        threads = 8;
    if (o.threads != NULL && (threads = parse_count(o.threads, 64)) < 1) {
        ex = tools__usage_error(PROG, "--threads '%s': expected 1 to 64", o.threads);
        goto done;
    }
    sp.nthreads = (int)threads;
    if (o.balance_edges && sp.method != GKV_PART_METIS) {
        ex = tools__usage_error(PROG, "--balance-edges is for --method metis");
        goto done;
    }
    if (o.n_masks > 0 && sp.method != GKV_PART_METIS) {
        ex = tools__usage_error(PROG, "--train-mask is for --method metis (random and "
                         "range take no weights)");
        goto done;
    }
    sp.name = o.name;
    sp.flags = (o.csr ? GKV_PART_CSR : 0) | (o.force ? GKV_PART_FORCE : 0) |
               (o.balance_edges ? GKV_PART_BALANCE_EDGES : 0);

    if ((ex = build_graph(&o, sp.nthreads, seed, &g)) != EX_OK)
        goto done;
    /* from here a signal is a flag: the write polls it (at each progress
     * call), removes OUT.tmp-PID and then dies of it */
    tools__catch_signals();
    t_load = tools__now_s() - t0;

    /* features and masks: the type defaults to the only one */
    feats = calloc(o.n_nfeat + o.n_efeat + 1, sizeof *feats);
    masks = calloc(o.n_masks + 1, sizeof *masks);
    if (feats == NULL || masks == NULL) {
        ex = fail_rc(GKV_ENOMEM, NULL, "options");
        goto done;
    }
    for (size_t i = 0; i < o.n_nfeat + o.n_efeat; i++) {
        int edge = i >= o.n_nfeat;
        const struct named *nm = edge ? &o.efeat[i - o.n_nfeat] : &o.nfeat[i];
        gkv_part_feat *f = &feats[sp.nfeats++];
        int n = edge ? gkv_graph_num_etypes(g) : gkv_graph_num_ntypes(g);

        f->is_edge = edge;
        f->name = nm->name;
        f->path = nm->val;
        if (nm->key != NULL) {
            f->type = nm->key;
        } else if (n == 1) {
            gkv_etype_info ei;
            if (edge && gkv_graph_etype_info(g, 0, &ei) == GKV_OK)
                f->type = ei.canonical;
            else
                f->type = gkv_graph_ntype_name(g, 0);
        } else {
            ex = tools__usage_error(PROG, "%s '%s=%s': the graph has %d %s types; write "
                             "TYPE/NAME=FILE", edge ? "--edge-feat" :
                             "--node-feat", nm->name, nm->val, n,
                             edge ? "edge" : "node");
            goto done;
        }
    }
    for (size_t i = 0; i < o.n_masks; i++) {
        gkv_part_mask *m = &masks[sp.nmasks++];
        const char *a = o.masks[i].val, *eq = strchr(a, '=');
        int t = mask_ntype(g, a, &m->path);

        if (t < 0 && eq != NULL && access(a, F_OK) != 0 && errno == ENOENT) {
            /* most likely a misspelt type: say both readings */
            snprintf(msg, sizeof msg, "'%.*s' is not a node type, and there "
                     "is no file '%s'", (int)(eq - a), a, a);
            ex = fail_rc(GKV_ENOTFOUND, msg, "--train-mask '%s'", a);
            goto done;
        }
        if (t >= 0) {
            m->ntype = gkv_graph_ntype_name(g, t);
        } else if (gkv_graph_num_ntypes(g) == 1) {
            m->ntype = gkv_graph_ntype_name(g, 0);
        } else {
            ex = tools__usage_error(PROG, "--train-mask '%s': the graph has %d node types; "
                             "write NTYPE=FILE", o.masks[i].val,
                             gkv_graph_num_ntypes(g));
            goto done;
        }
    }
    sp.feats = feats;
    sp.masks = masks;
    if (o.n_rev > 0) {
        if ((rev = calloc(o.n_rev, sizeof *rev)) == NULL) {
            ex = fail_rc(GKV_ENOMEM, NULL, "options");
            goto done;
        }
        for (size_t i = 0; i < o.n_rev; i++) {
            rev[i].etype = o.rev[i].key;
            rev[i].reverse_etype = o.rev[i].val;
        }
        sp.reverse = rev;
        sp.nreverse = o.n_rev;
    }

    memset(&pg, 0, sizeof pg);
    pg.tty = isatty(STDERR_FILENO);
    pg.method = gkv_part_method_name(sp.method);
    sp.progress = on_progress;
    sp.progress_ctx = &pg;
    if (tools__got_signal) {
        dying = tools__got_signal;
        goto done;
    }
    rc = gkv_partition_write(g, &sp, o.out, &rep, msg, sizeof msg);
    if (pg.bar_on)
        tools__progress_end(&pg.bar, rc == GKV_OK);
    if (rc == GKV_EINTR && tools__got_signal) {
        dying = tools__got_signal;
        goto done;
    }
    if (rc != GKV_OK) {
        ex = fail_rc(rc, msg, "partitioning into '%s'", o.out);
        note_leftovers(o.out);
        goto done;
    }
    note_leftovers(o.out);
    if (tools__got_signal) {
        /* it came while OUT was being renamed into place: done, but the
         * caller asked to stop, and the exit status says so */
        fprintf(stderr, PROG ": %s after '%s' was complete: it is kept\n",
                tools__got_signal == SIGINT ? "SIGINT" : "SIGTERM", o.out);
        dying = tools__got_signal;
        goto done;
    }
    if (o.stats) {
        double secs = tools__now_s() - t0;
        getrusage(RUSAGE_SELF, &ru);
        printf("stats: method=%s parts=%d nodes=%lld edges=%lld "
               "edge_cut=%lld seconds=%.3f load_seconds=%.3f "
               "partition_seconds=%.3f assign_seconds=%.3f edges_per_s=%.0f "
               "bytes_written=%llu peak_rss_bytes=%llu\n",
               gkv_part_method_name(sp.method), sp.num_parts,
               (long long)rep.num_nodes, (long long)rep.num_edges,
               (long long)rep.edge_cut, secs, t_load, rep.seconds,
               rep.assign_seconds,
               secs > 0 ? (double)rep.num_edges / secs : 0.0,
               (unsigned long long)rep.bytes_written,
               (unsigned long long)ru.ru_maxrss * 1024ull);
        if (fflush(stdout) != 0 || ferror(stdout)) {
            ex = fail_rc(GKV_EIO, strerror(errno), "writing the statistics");
            goto done;
        }
    }
    ex = EX_OK;
done:
    gkv_graph_free(g);
    opts_free(&o);
    free(feats);
    free(masks);
    free(rev);
    /* a signal ends the tool by that signal, after the cleanup */
    return dying ? tools__die_of_signal(dying) : ex;
}
