/* opts.c - the command line: usage text, and the options into struct opts
 * (values stay text; main.c and graph.c check them once the graph is
 * known). */
#include <stdlib.h>
#include <string.h>
#include "idlist.h"
#include "opt.h"
#include "partition.h"
#include "util.h"

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
"  --metis-ptype P      rb (default): recursive bisection, or kway: k-way\n"
"                       (METIS's and DGL's choice; on R-MAT 2-3x slower)\n"
"  --metis-ctype C      rm (default): random matching, or shem: heavy-edge\n"
"                       matching (METIS's default; on R-MAT twice the cut)\n"
"  --metis-keep K       each node keeps its K heaviest neighbours for METIS\n"
"                       and an edge stays when either end keeps it, so only\n"
"                       edges between two nodes of more than K neighbours\n"
"                       go (the cut reported counts every edge); or all:\n"
"                       every edge (default: 32 when the graph has about\n"
"                       8 M distinct node pairs or more, all below)\n"
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

/* Appends item (size bytes) to the array *arr of *n; out of memory ends
 * the tool (as every allocation here: a command line is small). */
static void
push(void **arr, size_t *n, size_t size, const void *item)
{
    void *p = realloc(*arr, (*n + 1) * size);

    if (p == NULL)
        tools__die("out of memory");
    memcpy((char *)p + *n * size, item, size);
    *arr = p;
    (*n)++;
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
    char *p = tools__xmalloc(n + 1);

    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

/* "[SRC:REL:DST=]FILE" -> key (or NULL), val. */
static void
split_canon_file(const char *a, struct named *nm)
{
    const char *eq = strchr(a, '=');

    memset(nm, 0, sizeof *nm);
    if (eq != NULL && is_canonical(a, (size_t)(eq - a))) {
        nm->key = dupn(a, (size_t)(eq - a));
        nm->val = eq + 1;
    } else {
        nm->val = a;
    }
}

/* "[TYPE/]NAME=FILE": the type is before the last '/' ahead of the '='.
 * 0, or -1 when a is not of that form. */
static int
split_feat(const char *a, struct named *nm)
{
    const char *eq = strchr(a, '='), *sl = NULL;

    memset(nm, 0, sizeof *nm);
    if (eq == NULL || eq == a || eq[1] == '\0')
        return -1;
    for (const char *c = a; c < eq; c++)
        if (*c == '/')
            sl = c;
    if (sl == a || (sl != NULL ? sl + 1 : a) == eq)
        return -1;                  /* "/NAME=FILE", "TYPE/=FILE" */
    if (sl != NULL) {
        nm->key = dupn(a, (size_t)(sl - a));
        a = sl + 1;
    }
    nm->name = dupn(a, (size_t)(eq - a));
    nm->val = eq + 1;
    return 0;
}

/* "NAME[=N]" (--ntype): split at the last '='. */
static void
split_last_eq(const char *a, struct named *nm)
{
    const char *eq = strrchr(a, '=');

    memset(nm, 0, sizeof *nm);
    nm->key = eq != NULL ? dupn(a, (size_t)(eq - a)) : tools__xstrdup(a);
    nm->val = eq != NULL ? eq + 1 : NULL;
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

void
part__opts_free(struct opts *o)
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
long long
part__parse_count(const char *s, long long max)
{
    uint64_t v;

    if (s == NULL || *s == '-' || *s == '+' || tools__parse_u64(s, &v) != 0 ||
        v > (uint64_t)max)
        return -1;
    return (long long)v;
}

/* The options of "[KEY=]VALUE" forms: each adds to a list of o. */

static int
add_input(struct opts *o, const char *opt, const char *val, int binary)
{
    struct named nm;
    struct input in;

    split_canon_file(val, &nm);
    in.binary = binary;
    in.etype = nm.key;
    in.path = nm.val;
    if (*in.path == '\0') {
        free(nm.key);
        return tools__usage_error(PROG, "%s: empty file name", opt);
    }
    push((void **)&o->inputs, &o->n_inputs, sizeof in, &in);
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

    split_canon_file(val, &nm);
    nm.after = o->n_inputs;
    push((void **)&o->weights, &o->n_weights, sizeof nm, &nm);
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
    if (eq != NULL && eq[1] == '\0')
        return tools__usage_error(PROG, "--etype '%s': empty file name", val);
    memset(&nm, 0, sizeof nm);
    nm.key = dupn(val, cl);
    nm.val = eq != NULL ? eq + 1 : NULL;
    push((void **)&o->etypes, &o->n_etypes, sizeof nm, &nm);
    return 0;
}

static int
opt_ntype(void *ctx, const char *val)
{
    struct opts *o = ctx;
    struct named nm;

    split_last_eq(val, &nm);
    push((void **)&o->ntypes, &o->n_ntypes, sizeof nm, &nm);
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
    push((void **)&o->masks, &o->n_masks, sizeof nm, &nm);
    return 0;
}

static int
opt_reverse(void *ctx, const char *val)
{
    struct opts *o = ctx;
    struct named nm;

    split_last_eq(val, &nm);
    if (nm.val == NULL || *nm.key == '\0' || *nm.val == '\0' ||
        strchr(nm.key, '=') != NULL) {
        free(nm.key);
        return tools__usage_error(PROG, "--reverse-etypes '%s': expected "
                                  "ETYPE=REVERSE_ETYPE", val);
    }
    push((void **)&o->rev, &o->n_rev, sizeof nm, &nm);
    return 0;
}

static int
add_feat(const char *opt, const char *val, struct named **v, size_t *n)
{
    struct named nm;

    if (split_feat(val, &nm) != 0)
        return tools__usage_error(PROG, "%s '%s': expected "
                                  "[TYPE/]NAME=FILE.npy", opt, val);
    push((void **)v, n, sizeof nm, &nm);
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
int
part__parse_args(int argc, char **argv, struct opts *o)
{
    const struct tools_opt opts[] = {
        {"--name", OPT_STR, .dst = &o->name, .flags = OPT_EMPTY_OK},
        {"--parts", OPT_STR, .dst = &o->parts, .flags = OPT_EMPTY_OK},
        {"--method", OPT_STR, .dst = &o->method, .flags = OPT_EMPTY_OK},
        {"--seed", OPT_STR, .dst = &o->seed, .flags = OPT_EMPTY_OK},
        {"--balance-edges", OPT_FLAG, .dst = &o->balance_edges},
        {"--metis-ptype", OPT_STR, .dst = &o->metis_ptype, .flags = OPT_EMPTY_OK},
        {"--metis-ctype", OPT_STR, .dst = &o->metis_ctype, .flags = OPT_EMPTY_OK},
        {"--metis-keep", OPT_STR, .dst = &o->metis_keep, .flags = OPT_EMPTY_OK},
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
