/* partition.h - what the files of gkv-partition share: the options as
 * parsed, and the functions one file calls in another. */
#ifndef PARTITION_H
#define PARTITION_H

#include <stddef.h>
#include <stdint.h>
#include "gkv.h"

#define PROG "gkv-partition"

enum { EX_OK = 0, EX_FAIL = 1, EX_USAGE = 2 };

struct input {
    int binary;
    char *etype;          /* canonical name, or NULL: the only type/column */
    const char *path;
};

struct named {            /* "[KEY=]VALUE" or "[TYPE/]NAME=FILE" options */
    char *key;            /* may be NULL */
    const char *val;
    char *name;           /* features: the feature name */
    size_t after; /* --weights: the --input/--binary options before it */
};

struct opts {
    const char *out, *name, *method, *parts, *seed, *num_nodes, *rmat,
               *threads, *metis_ptype, *metis_ctype, *metis_keep;
    int csr, force, stats, balance_edges, etype_column, text_weights, header;
    struct named *ntypes, *etypes, *weights, *nfeat, *efeat, *masks, *rev;
    size_t n_ntypes, n_etypes, n_weights, n_nfeat, n_efeat, n_masks, n_rev;
    struct input *inputs;
    size_t n_inputs;
};

/* opts.c: the options into *o (EX_OK, or EX_USAGE after the message;
 * -h and -V exit); *o's lists freed (also after an error); a whole number
 * in 1..max of the text s, or -1. */
int part__parse_args(int argc, char **argv, struct opts *o);
void part__opts_free(struct opts *o);
long long part__parse_count(const char *s, long long max);

/* graph.c: the graph the options describe, loaded with 'threads' threads
 * (R-MAT from 'seed'): EX_OK with *out yours (gkv_graph_free), or
 * EX_USAGE or EX_FAIL after the message. */
int part__build_graph(const struct opts *o, int threads, uint64_t seed,
                      gkv_graph **out);

/* main.c: "gkv-partition: WHAT: detail (GKV_EXXX)", or "WHAT: strerror"
 * without a detail, on stderr; returns EX_FAIL. */
__attribute__((format(printf, 3, 4)))
int part__fail_rc(gkv_err rc, const char *detail, const char *fmt, ...);

#endif
