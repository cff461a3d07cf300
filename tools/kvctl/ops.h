/* ops.h - what kvctl's commands do to tensors, as one table of
 * operations with two implementations: an embedded store directory
 * (ops_store.c: kvctl STORE ...) and running servers (ops_server.c: one
 * gkv-server with --server, every server of a job with --ip-config).
 * main.c puts the table in c->ops; a command is written once against it.
 *
 * kvctl runs one command on one thread: no operation takes a lock, and
 * any may block (on the store's write lock, or a server's answer, at most
 * its timeout).
 *
 * Two conventions, named at each member:
 *  - "gkv_err": nothing printed; the command says what failed with
 *    kvctl__fail_on(), which adds this backend's detail (and through
 *    servers, which servers).
 *  - "EX": EX_OK, or EX_FAIL with the message printed (the backends word
 *    some messages differently, and those stay as they are).
 *
 * Commands that only a store can do (rename, verify) use c->s directly;
 * main.c refuses them with --server and --ip-config. */
#ifndef KVCTL_OPS_H
#define KVCTL_OPS_H

#include "kvctl.h"

struct origmap;

/* An import's input, mapped and checked against itself (data.c). */
struct kvctl_import {
    const char *name;            /* the tensor, or a companion T#adam_m ... */
    const char *file;
    const gkv_npy_map *m;        /* the file's rows */
    gkv_tensor_spec *sp;         /* what a new tensor gets; sp->lo: the
                                  * first row's ID (--lo, or the mapping's
                                  * lowest) */
    int state;                   /* a companion: a restore of its state */
    struct origmap *om;          /* --orig-ids, or NULL */
};

struct kvctl_ops {
    /* EX. Opens the store with 'flags' (GKV_RDONLY, GKV_CREATE or 0), or
     * connects to the servers (flags unused); a second call does nothing.
     * Commands open once their own arguments are checked, so that a usage
     * error is one (exit 2) whether or not the store or servers are there. */
    int (*open)(struct ctx *c, unsigned flags);
    /* Closes what open() opened; nothing when nothing is open. 'undo':
     * the command failed, so a store this run created is removed again. */
    void (*close)(struct ctx *c, int undo);
    /* EX_FAIL: "kvctl: WHAT: strerror(rc) (detail)" (kvctl__fail_on()). */
    int (*fail)(struct ctx *c, gkv_err rc, const char *what);

    /* EX. A read snapshot in c->tx (a store's read transaction; servers
     * have none: nothing), which info, state_info, pull and read then
     * use; end() is NULL-safe. */
    int (*begin)(struct ctx *c);
    void (*end)(struct ctx *c);

    /* EX. ls's lines: every tensor (with 'all' also optimizer state, which
     * only a store lists), sorted by name; *v malloc'd. */
    int (*list)(struct ctx *c, int all, struct kvctl_lsrow **v, size_t *n);
    /* After ls has printed v: notes on stderr about it. May be NULL. */
    void (*listed)(struct ctx *c, const struct kvctl_lsrow *v, size_t n);
    /* EX. *state: a JSON array of the names of tensor 'name''s
     * optimizer-state companions; servers list none: JSON null. */
    int (*state_names)(struct ctx *c, const char *name, json_t **state);

    /* gkv_err. The description of tensor 'name'. */
    gkv_err (*info)(struct ctx *c, const char *name, gkv_tensor_desc *d);
    /* gkv_err. Of companion 'name' (T#adam_m): a store describes one not
     * created yet (*exists 0) as it would be made; servers answer for it
     * either way (zeros when never pushed), *exists 1. */
    gkv_err (*state_info)(struct ctx *c, const char *name, gkv_tensor_desc *d,
                          int *exists);
    /* gkv_err. Rows ids[0..n) into buf (len bytes: n rows). */
    gkv_err (*pull)(struct ctx *c, const char *name, const uint64_t *ids,
                    size_t n, void *buf, size_t len);
    /* gkv_err. Rows [a, a + n) into buf; 'ids' is room for n IDs when
     * pulls_by_id, else unused. */
    gkv_err (*read)(struct ctx *c, const char *name, uint64_t a, size_t n,
                    void *buf, size_t len, uint64_t *ids);
    /* gkv_err. Rows ids[0..n) combined with the stored ones as pa says. */
    gkv_err (*push)(struct ctx *c, const char *name, const uint64_t *ids,
                    size_t n, const void *rows, size_t len,
                    const gkv_push_args *pa);
    /* gkv_err. Drops tensor 'name''s state of optimizer 'opt' (NULL: all). */
    gkv_err (*opt_reset)(struct ctx *c, const char *name, const char *opt);

    /* EX; opens itself. Creates tensor 'name' (with the store, if
     * missing); an existing one is an error. */
    int (*create)(struct ctx *c, const char *name, const gkv_tensor_spec *sp);
    /* EX. Deletes tensor 'name' with its optimizer state. */
    int (*remove)(struct ctx *c, const char *name);
    /* EX; opens itself. Writes the file's rows as im says: into a store
     * all or nothing, through servers batch by batch. */
    int (*import)(struct ctx *c, const struct kvctl_import *im);
    /* EX. Prints stat's statistics. */
    int (*stat)(struct ctx *c);
    /* After ID 'id' was found outside [d->lo, d->hi) of tensor d: where
     * its row is, as far as this backend knows, as words for the message
     * into buf ("" when it knows nothing). Servers name the partition
     * that owns it, from the partition book the client learned at the
     * handshake. */
    void (*whereis)(struct ctx *c, const gkv_tensor_desc *d, uint64_t id,
                    char *buf, size_t len);

    size_t batch_bytes;          /* export: bytes read per step */
    int pulls_by_id;             /* read() goes as pulls of IDs: export
                                  * caps its steps at 2^20 rows and gives
                                  * read() room for their IDs */
    int describes_chunks;        /* descriptions carry nchunks and id */
    const char *cancel_note;     /* after "import of 'X' interrupted by SIG" */
};

extern const struct kvctl_ops kvctl__store_ops;   /* ops_store.c */
extern const struct kvctl_ops kvctl__server_ops;  /* ops_server.c */

/* ---- --orig-ids (mapping.c) ---- */

/* A mapping MAPPING.npy: row i of FILE is the row of new ID MAPPING[i]
 * (gkv-partition's mapping/node-NTYPE.npy, original ID -> new ID, int64). */
struct origmap {
    gkv_npy_map m;
    uint64_t n, min, max;        /* entries; their smallest and largest */
    uint64_t *inv;               /* from kvctl__origmap_perm: inv[id - lo] =
                                  * the FILE row of ID id */
};

uint64_t kvctl__origmap_at(const struct origmap *o, uint64_t i);
/* qsort's comparison of two uint64_t, ascending. */
int kvctl__u64_cmp(const void *a, const void *b);
/* EX. Maps MAPPING for 'verb' (import, export, get, put): int64, N or
 * N x 1. */
int kvctl__origmap_load(struct origmap *o, const char *verb, const char *map);
/* EX. The new ID of original ID 'orig' into *id, for 'verb' (get, put):
 * orig must be an entry of the mapping, and its new ID not negative. */
int kvctl__origmap_id(const struct origmap *o, const char *verb,
                      const char *map, uint64_t orig, uint64_t *id);
/* EX. Maps MAPPING and checks it against a FILE of 'rows' rows: N = rows,
 * every new ID >= 0 and none twice; sets min and max. */
int kvctl__origmap_open(struct origmap *o, const char *map, const char *file,
                        uint64_t rows);
/* EX. The new IDs must be exactly [lo, lo + n): fills o->inv. */
int kvctl__origmap_perm(struct origmap *o, const char *map, uint64_t lo,
                        const char *what);
void kvctl__origmap_close(struct origmap *o);
/* EX. Whether mapping o (file 'map') is the one graph tensor d's IDs
 * need, for 'verb': node/NTYPE/F the node mapping of NTYPE, edge/CANON/F
 * the edge mapping of CANON (known from the partition config's "mapping"
 * field, else from gkv-partition's file names node-NTYPE.npy and
 * edge-CANON.npy), of the type's length where the config is known (the
 * job's, or the one beside a partition's store), else at least d->hi.
 * Any other tensor: EX_OK. */
int kvctl__origmap_fits(const struct ctx *c, const struct origmap *o,
                        const char *verb, const char *map,
                        const gkv_tensor_desc *d);
/* Rows [at, at + n) of the tensor being imported from 'data': the file's
 * own rows, or (o->inv) the file rows they map from, gathered into buf. */
const unsigned char *kvctl__origmap_rows(const struct origmap *o,
                                         const unsigned char *data,
                                         size_t row_bytes, uint64_t at,
                                         uint64_t n, unsigned char *buf);
/* EX. Whether the mapped file's rows are rows of d (dtype and row shape)
 * and fit [lo, lo + rows) inside d's range. 'note' follows the row shape
 * in the message. */
int kvctl__rows_fit(const char *file, const gkv_npy_map *m,
                    const gkv_tensor_desc *d, uint64_t lo, const char *note);

/* ---- the IDs get and put take (inspect.c) ---- */

/* Which IDs get and put take and print for tensor 'name': "original"
 * with --orig-ids (the input graph's, mapped to the stored ones),
 * "partitioned" for a partitioned graph's tensor (node/T/F and edge/E/F,
 * or any through servers that serve partitions: gkv-partition renumbered
 * them), else "stored" (a plain tensor's own IDs). */
const char *kvctl__id_space(const struct ctx *c, const char *name);
/* 1 when 'name' is a partitioned graph's feature: "node/T/F", "edge/E/F". */
int kvctl__graph_name(const char *name);
/* The same, with *node (1: "node/T/F", 0: "edge/E/F") and T or E into
 * 'type' (GKV_NAME_MAX + 1 bytes) set; either may be NULL. 0 for any
 * other name, or a type longer than GKV_NAME_MAX when 'type' is given. */
int kvctl__graph_type(const char *name, int *node, char *type);
/* The count of nodes (node 1) or edges of type 'type' in book b, or -1
 * when b is NULL or has no such type. */
int64_t kvctl__type_count(const gkv_pbook *b, int node, const char *type);
/* EX_FAIL: "tensor 'NAME': ERANGE: ID X is outside its range [lo, hi)"
 * (with orig, "original ID O is new ID X, outside ..."), then where the
 * row is as the backend knows it (ops->whereis). */
int kvctl__fail_id(struct ctx *c, const gkv_tensor_desc *d, uint64_t id,
                   const uint64_t *orig);

/* ---- --ip-config: the machines of the job (job.c) ---- */

/* ls's lines over the machines (see job.c); EX. */
int kvctl__job_list(struct ctx *c, struct kvctl_lsrow **v, size_t *n);
/* The rows the machines hold of tensor d (with --ip-config; else
 * hi - lo), and how many machines hold it. */
uint64_t kvctl__job_rows(const struct ctx *c, const gkv_tensor_desc *d,
                         size_t *holders);
/* "machine 0 at ADDR [0, 50), machine 1 at ADDR none" */
void kvctl__job_holders_str(const struct ctx *c, const char *name, char *buf,
                            size_t len);
/* info: what each machine holds into JSON object o, or printed (o NULL). */
void kvctl__job_info(const struct ctx *c, const gkv_tensor_desc *d, json_t *o);
/* EX. Before rows [a, b) of tensor d go to or from the whole job: every
 * one is held by some machine, a graph's feature spans its type. */
int kvctl__job_check(struct ctx *c, const char *verb, const gkv_tensor_desc *d,
                     uint64_t a, uint64_t b);
/* EX. Every ID the mapping names is held by some machine. */
int kvctl__job_ids_held(const struct ctx *c, const gkv_tensor_desc *d,
                        const struct origmap *om);

/* ---- the chunks read from a store, checked (chunksum.c) ---- */

/* gkv_err. After a read of rows [a, a + n) of 'name' into buf through
 * c->tx: every chunk they touch, not checked before in this run, matches
 * the checksum in its header (chunks the read holds whole are checked in
 * buf, the others read once more). GKV_ECORRUPT when one does not, the
 * chunk named by kvctl__sums_msg(). */
gkv_err kvctl__sums_range(struct ctx *c, const char *name, uint64_t a,
                          size_t n, const void *buf);
/* The same after a pull of ids[0..n): each chunk they lie in. */
gkv_err kvctl__sums_ids(struct ctx *c, const char *name, const uint64_t *ids,
                        size_t n);
/* The last check's failure ("chunk C (rows A..B) fails its checksum..."),
 * or NULL. */
const char *kvctl__sums_msg(struct ctx *c);
void kvctl__sums_free(struct ctx *c);

#endif
