/* graph.c - the graph from the command line's inputs: edge lists (text
 * or binary, typed or not), their weights, or an R-MAT graph. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "opt.h"
#include "partition.h"
#include "util.h"

/* Whether text file 'path' begins with a header line: its first line that
 * holds fields (blank lines and '#' comments are skipped, as the reader
 * skips them) starts with a field that is not a number, "src,dst". Only a
 * regular file is looked at again: a pipe's lines are gone. */
static int
starts_with_header(const char *path)
{
    char line[4096], *p;
    struct stat sb;
    FILE *fp;
    int header = 0;

    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode) ||
        (fp = fopen(path, "r")) == NULL)
        return 0;
    while (fgets(line, sizeof line, fp) != NULL) {
        p = line + strspn(line, " \t\r\n");
        if (*p == '\0' || *p == '#')
            continue;
        p += strspn(p, "+-");
        header = strspn(p, "0123456789") == 0 ||
                 strchr(" \t\r\n,#", p[strspn(p, "0123456789")]) == NULL;
        break;
    }
    fclose(fp);
    return header;
}

/* A text file could not be read: the library's message, and when the file
 * starts with a header line and --header was not given, the hint to give
 * it. EX_FAIL. */
static int
text_fail(const struct opts *o, gkv_graph *g, gkv_err rc, const char *path)
{
    part__fail_rc(rc, gkv_graph_errmsg(g), "reading '%s'", path);
    if (!o->header && starts_with_header(path))
        tools__note("the first line of '%s' is not numbers: a header line? "
                    "--header skips the first line of each text file", path);
    return EX_FAIL;
}

/* Resolves an input's edge type; -2 (usage error printed) when it cannot. */
static int
input_etype(const gkv_graph *g, const struct opts *o, const char *canon,
            int text, const char *path)
{
    int et;

    if (canon != NULL) {
        if (gkv_graph_etype_find(g, canon, &et) != GKV_OK) {
            tools__usage_error(PROG,
                               "'%s': unknown edge type '%s' (declare it with "
                               "--etype)",
                               path, canon);
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
            return tools__usage_error(
                PROG,
                "--weights '%s' goes with no --binary file of "
                "its edge type%s",
                o->weights[k].val,
                nof > 1 ? " (several follow it: give each --weights "
                          "after its --binary)"
                        : "");
        if (wfor[t] >= 0)
            return tools__usage_error(
                PROG,
                "--weights '%s' and '%s' both go with --binary "
                "'%s' (give each --weights after its "
                "--binary)",
                o->weights[wfor[t]].val, o->weights[k].val, o->inputs[t].path);
        wfor[t] = (long)k;
    }
    return EX_OK;
}

int
part__build_graph(const struct opts *o, int threads, uint64_t seed,
                  gkv_graph **out)
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
            return tools__usage_error(
                PROG, "--rmat makes the whole graph: no --ntype, "
                      "--etype, --input, --binary, --weights or "
                      "--num-nodes with it");
        snprintf(buf, sizeof buf, "%s", o->rmat);
        if ((colon = strchr(buf, ':')) != NULL)
            *colon = '\0';
        if ((scale = part__parse_count(buf, GKV_RMAT_SCALE_MAX)) < 0 ||
            (colon != NULL &&
             (ef = part__parse_count(colon + 1, INT32_MAX)) < 1))
            return tools__usage_error(
                PROG,
                "--rmat '%s': expected SCALE[:EDGE_FACTOR], "
                "SCALE 0..%d",
                o->rmat, GKV_RMAT_SCALE_MAX);
        memset(&rs, 0, sizeof rs);
        rs.scale = (int)scale;
        rs.edge_factor = ef;
        rs.seed = seed;
        if ((rc = gkv_rmat_graph(&g, &rs, threads)) != GKV_OK)
            return part__fail_rc(rc, NULL, "R-MAT scale %lld, edge factor %lld",
                           scale, ef);
        *out = g;
        return EX_OK;
    }
    if (o->n_inputs == 0 && o->n_etypes == 0)
        return tools__usage_error(PROG,
                                  "no input: give --input, --binary, --etype "
                                  "SRC:REL:DST=FILE or --rmat");
    if (o->n_ntypes > 0) {
        if (o->num_nodes != NULL)
            return tools__usage_error(
                PROG, "--num-nodes is for homogeneous graphs; give "
                      "counts as --ntype NAME=N");
        if (o->n_etypes == 0)
            return tools__usage_error(
                PROG, "--ntype without --etype: declare the edge "
                      "types (--etype SRC:REL:DST[=FILE])");
        if ((rc = gkv_graph_new(&g)) != GKV_OK)
            return part__fail_rc(rc, NULL, "making the graph");
        for (size_t i = 0; i < o->n_ntypes; i++) {
            long long n = GKV_GRAPH_GROW;
            if (o->ntypes[i].val != NULL &&
                (n = part__parse_count(o->ntypes[i].val, INT64_MAX)) < 0) {
                ex = tools__usage_error(PROG,
                                        "--ntype '%s=%s': the count is not a "
                                        "number",
                                        o->ntypes[i].key, o->ntypes[i].val);
                goto out;
            }
            if ((rc = gkv_graph_add_ntype(g, o->ntypes[i].key, n, NULL)) !=
                GKV_OK) {
                ex = tools__usage_error(PROG, "--ntype '%s': %s",
                                        o->ntypes[i].key, gkv_graph_errmsg(g));
                goto out;
            }
        }
    } else {
        long long n = GKV_GRAPH_GROW;
        if (o->num_nodes != NULL &&
            (n = part__parse_count(o->num_nodes, INT64_MAX)) < 0)
            return tools__usage_error(PROG, "--num-nodes '%s' is not a number",
                               o->num_nodes);
        if ((rc = gkv_graph_new(&g)) != GKV_OK ||
            (rc = gkv_graph_add_ntype(g, "_N", n, NULL)) != GKV_OK) {
            gkv_graph_free(g);
            return part__fail_rc(rc, NULL, "making the graph");
        }
        if (o->n_etypes == 0 && gkv_graph_add_etype(g, "_N", "_E", "_N", NULL)
            != GKV_OK) {
            gkv_graph_free(g);
            return part__fail_rc(GKV_ENOMEM, NULL, "making the graph");
        }
    }
    for (size_t i = 0; i < o->n_etypes; i++) {
        char *c = strdup(o->etypes[i].key), *c1, *c2;
        if (c == NULL) {
            ex = part__fail_rc(GKV_ENOMEM, NULL, "parsing --etype");
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
        if ((rc = gkv_graph_read_text(g, o->etypes[i].val, et, tflags)) !=
            GKV_OK) {
            ex = text_fail(o, g, rc, o->etypes[i].val);
            goto out;
        }
    }
    if ((wfor = calloc(o->n_inputs + 1, sizeof *wfor)) == NULL) {
        ex = part__fail_rc(GKV_ENOMEM, NULL, "reading the edges");
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
        if (!in->binary) {
            if ((rc = gkv_graph_read_text(g, in->path, et, tflags)) != GKV_OK) {
                ex = text_fail(o, g, rc, in->path);
                goto out;
            }
            continue;
        }
        if ((rc = gkv_graph_read_binary(g, et, in->path, wfor[i] >= 0 ?
                                        o->weights[wfor[i]].val : NULL)) !=
            GKV_OK) {
            ex = part__fail_rc(rc, gkv_graph_errmsg(g), "reading '%s'",
                               in->path);
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
