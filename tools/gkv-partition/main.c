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
 *
 * The files (partition.h has what they share):
 *   main.c   this: checks the values, builds the spec, runs the library's
 *            partitioner with a progress bar, signals and --stats
 *   opts.c   the command line into struct opts
 *   graph.c  the graph from the inputs (edge lists, weights, R-MAT)
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include "idlist.h"
#include "opt.h"
#include "partition.h"
#include "progress.h"
#include "util.h"

struct prog {
    int tty;
    tools_progress bar;
    int bar_on;
    const char *method;
};

/* "gkv-partition: WHAT: detail (GKV_EXXX)", or "WHAT: strerror" when the
 * library gave no detail. The detail names the file, line, type or count;
 * gkv_strerror's store-minded texts would only blur it. */
int
part__fail_rc(gkv_err rc, const char *detail, const char *fmt, ...)
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
    ex = part__parse_args(argc, argv, &o);
    if (ex != EX_OK)
        goto done;

    if (o.parts == NULL) {
        ex = tools__usage_error(PROG, "--parts N is required");
        goto done;
    }
    if ((parts = part__parse_count(o.parts, GKV_PART_MAX)) < 1) {
        ex = tools__usage_error(
            PROG, "--parts '%s': expected a whole number from 1 to %d",
            o.parts, GKV_PART_MAX);
        goto done;
    }
    sp.num_parts = (int)parts;
    if (gkv_part_method_parse(o.method != NULL ? o.method : "metis",
                              &sp.method) != GKV_OK ||
        sp.method == GKV_PART_GIVEN) {   /* owners come from the library only */
        ex = tools__usage_error(
            PROG, "--method '%s': expected metis, random or range", o.method);
        goto done;
    }
    if (o.seed != NULL &&
        (*o.seed == '-' || tools__parse_u64(o.seed, &seed) != 0)) {
        ex = tools__usage_error(PROG, "--seed '%s' is not a number", o.seed);
        goto done;
    }
    sp.seed = seed;
    threads = sysconf(_SC_NPROCESSORS_ONLN);
    if (threads < 1)
        threads = 1;
    if (threads > 8)
        threads = 8;
    if (o.threads != NULL && (threads = part__parse_count(o.threads, 64)) < 1) {
        ex = tools__usage_error(PROG, "--threads '%s': expected 1 to 64",
                                o.threads);
        goto done;
    }
    sp.nthreads = (int)threads;
    if (o.balance_edges && sp.method != GKV_PART_METIS) {
        ex = tools__usage_error(PROG, "--balance-edges is for --method metis");
        goto done;
    }
    if (o.n_masks > 0 && sp.method != GKV_PART_METIS) {
        ex = tools__usage_error(
            PROG, "--train-mask is for --method metis (random and "
                  "range take no weights)");
        goto done;
    }
    if ((o.metis_ptype != NULL || o.metis_ctype != NULL ||
         o.metis_keep != NULL) && sp.method != GKV_PART_METIS) {
        ex = tools__usage_error(PROG, "--metis-%s is for --method metis",
                                o.metis_ptype != NULL ? "ptype" :
                                o.metis_ctype != NULL ? "ctype" : "keep");
        goto done;
    }
    if (o.metis_keep != NULL) {
        int all = strcmp(o.metis_keep, "all") == 0;
        long long k = all ? 0 : part__parse_count(o.metis_keep, INT_MAX);
        if (!all && k < 1) {
            ex = tools__usage_error(PROG, "--metis-keep '%s': expected a "
                                    "number of neighbours from 1 to %d, or "
                                    "all", o.metis_keep, INT_MAX);
            goto done;
        }
        sp.metis_keep = all ? GKV_PART_METIS_KEEP_ALL : (int)k;
    }
    if (o.metis_ptype != NULL && strcmp(o.metis_ptype, "rb") != 0 &&
        strcmp(o.metis_ptype, "kway") != 0) {
        ex = tools__usage_error(PROG, "--metis-ptype '%s': expected rb or "
                                "kway", o.metis_ptype);
        goto done;
    }
    if (o.metis_ctype != NULL && strcmp(o.metis_ctype, "rm") != 0 &&
        strcmp(o.metis_ctype, "shem") != 0) {
        ex = tools__usage_error(PROG, "--metis-ctype '%s': expected rm or "
                                "shem", o.metis_ctype);
        goto done;
    }
    sp.name = o.name;
    sp.flags = (o.csr ? GKV_PART_CSR : 0) | (o.force ? GKV_PART_FORCE : 0) |
               (o.balance_edges ? GKV_PART_BALANCE_EDGES : 0) |
               (o.metis_ptype != NULL && strcmp(o.metis_ptype, "kway") == 0 ?
                GKV_PART_METIS_KWAY : 0) |
               (o.metis_ctype != NULL && strcmp(o.metis_ctype, "shem") == 0 ?
                GKV_PART_METIS_SHEM : 0);

    if ((ex = part__build_graph(&o, sp.nthreads, seed, &g)) != EX_OK)
        goto done;
    /* from here a signal is a flag: the write polls it (at each progress
     * call), removes OUT.tmp-PID and then dies of it */
    tools__catch_signals();
    t_load = tools__now_s() - t0;

    /* features and masks: the type defaults to the only one */
    feats = calloc(o.n_nfeat + o.n_efeat + 1, sizeof *feats);
    masks = calloc(o.n_masks + 1, sizeof *masks);
    if (feats == NULL || masks == NULL) {
        ex = part__fail_rc(GKV_ENOMEM, NULL, "options");
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
            ex = tools__usage_error(
                PROG,
                "%s '%s=%s': the graph has %d %s types; write "
                "TYPE/NAME=FILE",
                edge ? "--edge-feat" : "--node-feat", nm->name, nm->val, n,
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
            ex = part__fail_rc(GKV_ENOTFOUND, msg, "--train-mask '%s'", a);
            goto done;
        }
        if (t >= 0) {
            m->ntype = gkv_graph_ntype_name(g, t);
        } else if (gkv_graph_num_ntypes(g) == 1) {
            m->ntype = gkv_graph_ntype_name(g, 0);
        } else {
            ex = tools__usage_error(
                PROG,
                "--train-mask '%s': the graph has %d node types; "
                "write NTYPE=FILE",
                o.masks[i].val, gkv_graph_num_ntypes(g));
            goto done;
        }
    }
    sp.feats = feats;
    sp.masks = masks;
    if (o.n_rev > 0) {
        if ((rev = calloc(o.n_rev, sizeof *rev)) == NULL) {
            ex = part__fail_rc(GKV_ENOMEM, NULL, "options");
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
        ex = part__fail_rc(rc, msg, "partitioning into '%s'", o.out);
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
            ex = part__fail_rc(GKV_EIO, strerror(errno),
                               "writing the statistics");
            goto done;
        }
    }
    ex = EX_OK;
done:
    gkv_graph_free(g);
    part__opts_free(&o);
    free(feats);
    free(masks);
    free(rev);
    /* a signal ends the tool by that signal, after the cleanup */
    return dying ? tools__die_of_signal(dying) : ex;
}
