/* kvctl.h - what kvctl's files share: the options, the run's context,
 * the commands, messages and output helpers.
 *
 *   kvctl [-h|--help] [-V|--version] [--json] STORE COMMAND [ARGS]
 *   kvctl [--json] --server HOST:PORT [--token-file F] [--group NAME]
 *         COMMAND [ARGS]
 *   kvctl [--json] --ip-config FILE [--token-file F] [--group NAME]
 *         COMMAND [ARGS]
 *
 * A command is written once, against an operations table (ops.h) that
 * main.c picks from the arguments: an embedded store (ops_store.c), one
 * running gkv-server (--server) or every server of a job (--ip-config,
 * ops_server.c). The files:
 *
 *   main.c        option parsing, the command table and --help, dispatch
 *   msg.c         error messages and usage errors (exit 1 and 2)
 *   format.c      output: tables, --json, values, the shapes of tensors
 *   ops_store.c   the operations on a store directory
 *   ops_server.c  the operations through servers (connecting, as an observer)
 *   job.c         --ip-config: which machine holds which rows
 *   mapping.c     --orig-ids mappings and the checks of a file's rows
 *   inspect.c     ls, info, get, stat
 *   data.c        put, create, import, export
 *   admin.c       rm, rename, reset-opt
 *   verify.c      verify
 *   chunksum.c    the checksums of the chunks get and export read
 *
 * kvctl uses only the public API (gkv.h), so it doubles as an example of
 * it. Exit status: 0 ok; 1 the operation failed (the reason on stderr, as
 * "kvctl: WHAT: gkv_strerror: detail"); 2 bad usage. --help prints to
 * stdout and exits 0. */
#ifndef KVCTL_H
#define KVCTL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "gkv.h"

#define SLICE_BYTES (64u << 20)          /* import/export step: one txn each */
#define IMPORT_TAG ".kvctl-import-"

enum { EX_OK = 0, EX_FAIL = 1, EX_USAGE = 2 };

/* Options that take part in commands (main.c's table names them). */
enum opt {
    O_ALL, O_DTYPE, O_SHAPE, O_RANGE, O_INIT, O_SEED, O_HOT, O_CHUNK_ROWS,
    O_DIM, O_LO, O_REPLACE, O_RAW, O_HANDLER, O_LR, O_SERVER, O_TOKEN_FILE,
    O_GROUP, O_ORIG_IDS, O_IP_CONFIG, NOPT
};

struct kvctl_ops;

/* --ip-config: what one machine's store holds, as its server 0 said */
struct jobmach {
    char addr[300];              /* its server 0: "host:port" */
    unsigned line;               /* its line in the ip_config */
    gkv_tensor_desc *t;          /* its tensors (gkv_free) */
    size_t nt;
};

struct ctx {
    const struct kvctl_ops *ops; /* the store, or the servers */
    const char *path;            /* STORE, or --server's or --ip-config's */
    const struct cmd *cmd;
    char **args;                 /* positionals after COMMAND */
    int nargs;
    int json;
    const char *opt[NOPT];       /* value, or "" for a flag; NULL if unset */
    /* a store (ops_store.c) */
    gkv_store *s;
    gkv_txn *tx;                 /* a command's read snapshot, or NULL */
    int made_dir, made_files;    /* this run created the store (undo on failure) */
    struct kvctl_sums *sums;     /* the chunks read and checked (chunksum.c) */
    /* servers (ops_server.c) */
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

/* ---- the commands: EX_OK, EX_FAIL or EX_USAGE, the reason printed ---- */
int kvctl__cmd_ls(struct ctx *c);          /* inspect.c */
int kvctl__cmd_info(struct ctx *c);
int kvctl__cmd_get(struct ctx *c);
int kvctl__cmd_stat(struct ctx *c);
int kvctl__cmd_put(struct ctx *c);         /* data.c */
int kvctl__cmd_create(struct ctx *c);
int kvctl__cmd_import(struct ctx *c);
int kvctl__cmd_export(struct ctx *c);
int kvctl__cmd_rm(struct ctx *c);          /* admin.c */
int kvctl__cmd_rename(struct ctx *c);
int kvctl__cmd_reset_opt(struct ctx *c);
int kvctl__cmd_verify(struct ctx *c);      /* verify.c */

/* ---- messages (msg.c): each prints one line on stderr and returns its
 * exit status. ---- */

/* The command a usage error names ("Try 'kvctl CMD --help'"), or NULL. */
extern const char *kvctl__usage_cmd;

/* "kvctl: MESSAGE" and the line saying where help is: EX_USAGE. */
__attribute__((format(printf, 1, 2)))
int kvctl__usage_error(const char *fmt, ...);
/* "kvctl: MESSAGE": EX_FAIL. */
__attribute__((format(printf, 1, 2)))
int kvctl__fail(const char *fmt, ...);
/* "kvctl: WHAT: strerror(rc) (detail)" with store s's message for this
 * thread (the open message when s is NULL): EX_FAIL. */
__attribute__((format(printf, 3, 4)))
int kvctl__fail_gkv(const gkv_store *s, gkv_err rc, const char *fmt, ...);
/* The same with the client's message (gkv_net_errmsg): EX_FAIL. */
__attribute__((format(printf, 2, 3)))
int kvctl__fail_net(gkv_err rc, const char *fmt, ...);
/* "WHAT" failed with rc in c's store or servers: kvctl__fail_gkv(), or
 * through servers kvctl__fail_net() with " on WHERE" after WHAT. */
__attribute__((format(printf, 3, 4)))
int kvctl__fail_on(struct ctx *c, gkv_err rc, const char *fmt, ...);

/* ---- output (format.c) ---- */

/* Flushes stdout; a failed write (disk full, closed pipe) is EX_FAIL,
 * printed; else rc. */
int kvctl__out_done(int rc);
/* Prints and releases JSON object o (NULL: out of memory); EX_OK or EX_FAIL. */
int kvctl__json_print(json_t *o, size_t flags);
json_t *kvctl__json_u64(uint64_t v);
/* A tensor's declared bytes, (hi - lo) x row bytes; UINT64_MAX when that
 * is 2^64 or more (ranges near 2^64). */
uint64_t kvctl__desc_bytes(uint64_t rows, size_t row_bytes);
/* Element i of a row of dtype dt: as text into buf, or as JSON. */
int kvctl__elem_str(gkv_dtype dt, const void *row, uint64_t i, char *buf,
                    size_t len);
json_t *kvctl__elem_json(gkv_dtype dt, const void *row, uint64_t i);
/* "f32 [3,4]": a dtype and a row shape. */
void kvctl__rows_str(gkv_dtype dt, unsigned ndim, const uint64_t *shape,
                     char *buf, size_t cap);

/* One line of ls: a tensor; with --ip-config over the machines. */
struct kvctl_lsrow {
    gkv_tensor_desc d;           /* --ip-config: lo, hi over the machines */
    uint64_t rows;               /* held by the machines together (hi - lo) */
    size_t held;                 /* --ip-config: machines that hold it */
    const char *why;             /* "", "overlapping ranges", "rows differ" */
};
/* ls's lines of the tensors v[0..n) (a gkv_tensor_list() array, freed
 * here) into *out (malloc'd): EX_OK, or EX_FAIL printed. */
int kvctl__lsrows(gkv_tensor_desc *v, size_t *n, struct kvctl_lsrow **out);
/* ls's table or JSON object of v[0..n); EX_OK or EX_FAIL. */
int kvctl__print_ls(struct ctx *c, const struct kvctl_lsrow *v, size_t n);
/* info's lines or JSON object of tensor d with 'rows' rows: 'state' is a
 * JSON array of its companions' names, or JSON null when the servers do
 * not list them; taken. EX_OK or EX_FAIL. */
int kvctl__print_info(struct ctx *c, const gkv_tensor_desc *d, uint64_t rows,
                      json_t *state);
int kvctl__print_store_stat(struct ctx *c, const gkv_store_stat *st);
/* One server's identity and statistics, as JSON or as text. */
json_t *kvctl__server_stat_json(const gkv_server_info *si,
                                const gkv_server_stats *st);
void kvctl__server_stat_text(const gkv_server_info *si,
                             const gkv_server_stats *st);
/* verify's report: rc GKV_OK or GKV_ECORRUPT, 'detail' the store's message. */
int kvctl__print_verify(struct ctx *c, const char *name, gkv_err rc,
                        const gkv_verify_report *rep, const char *detail);

/* ---- small helpers ---- */

/* Checks a tensor name the way the store does, with room for 'reserve'
 * more bytes (the import suffix). 0 when good, else -1 with 'why'
 * (data.c). */
int kvctl__name_check(const char *name, size_t reserve, char *why, size_t len);
/* The tensor 'name' names: itself, or for a state companion (T#adam_m)
 * its tensor. Into buf (GKV_NAME_MAX + 1 bytes) (job.c). */
const char *kvctl__base_name(const char *name, char *buf);
/* Holds (1) or lets through (0) SIGINT and SIGTERM (data.c). */
void kvctl__block_signals(int block);

#endif
