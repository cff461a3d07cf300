/* part_write.h - private declarations shared by the files of the
 * partitioner: part_write.c (the spec checked, the steps run, the memory
 * estimate), part_load.c (features, reverse pairs and masks read and
 * checked), part_assign.c (nodes assigned to partitions and renumbered,
 * edges numbered), part_write_metis.c (METIS assignment), part_store.c
 * (one partition's store written), part_config.c (the mapping files and
 * the JSON config) and part_fs.c (the output directory: checked, synced,
 * published). Not installed. */
#ifndef PART_WRITE_H
#define PART_WRITE_H

#include <stddef.h>
#include <stdint.h>
#include "graph/gkv_partition.h"
#include "graph/graph_int.h"
#include "kv/gkv_npy.h"

#define SLICE_BYTES   (64u << 20)   /* one gkv_tensor_write / file write */
#define MSG_MAX       1024
#define PW_FORMAT     1              /* "gkv_format" of the JSON */

/* ---- state ---------------------------------------------------------------- */

struct pw_feat {
    const gkv_part_feat *f;
    int type;                     /* node or edge type index */
    char tname[GKV_NAME_MAX + 1]; /* node/<type>/<name> or edge/<canon>/<name> */
    char name[GKV_PART_NAME_MAX + 1];
    gkv_npy_map map;              /* when read from a file */
    const unsigned char *rows;
    gkv_dtype dtype;
    unsigned ndim;
    uint64_t shape[GKV_MAX_DIMS];
    size_t row_bytes;
    uint64_t nrows;
    int rev_et;                   /* >= 0: "reverse_eid", the new IDs of
                                   * edge type rev_et (rows: its emap) */
};

struct pw {
    const gkv_graph *g;
    const gkv_part_spec *sp;
    const char *name;             /* graph name */
    int P, nnt, net, nthreads;
    char *msg;
    size_t msglen;
    /* nodes, per type */
    int64_t *ncount;              /* nnt */
    uint16_t **owner;             /* nnt arrays of ncount[t] */
    int64_t **newid;              /* nnt arrays, or all NULL: identity */
    int64_t *nstart;              /* nnt x (P + 1): nlo(t, p) */
    uint8_t **mask;               /* nnt arrays or NULL */
    /* edges, per type */
    gkv_etype_info *einfo;        /* net */
    int64_t **emap;               /* net arrays: original edge -> new ID */
    int64_t **eptr;               /* net arrays of ncount[dst] + 1: the
                                   * global CSC offsets over new dst IDs */
    int64_t *ocnt;                /* net x P: out-edges of the sources each
                                   * partition owns (the CSR's edges) */
    /* features */
    struct pw_feat *feats;
    size_t nfeats;
    gkv_part_feat *revf;          /* 2 x nreverse: the reverse_eid features */
    /* output */
    char *out, *tmp, *old;        /* OUT, OUT.tmp-PID, OUT.old-PID */
    int replace;                  /* OUT holds a partition to replace */
    int tmp_made;
    uint64_t bytes_total, bytes_done;
    int64_t edge_cut;             /* counted while scattering */
    /* scratch kept from partition to partition (no fresh pages each time) */
    int64_t *s_idx, *s_oeid;
    float *s_w;
    size_t s_idx_cap, s_oeid_cap, s_w_cap;   /* elements */
};

static inline int64_t
nid(const int64_t *map, int64_t v)
{
    return map != NULL ? map[v] : v;
}

static inline int64_t
nlo(const struct pw *w, int t, int p)
{
    return w->nstart[(size_t)t * (size_t)(w->P + 1) + (size_t)p];
}

/* First new ID of type t in partition p, as a slice of count into P:
 * [count * p / P, count * (p + 1) / P). */
static inline int64_t
slice_lo(int64_t count, int p, int P)
{
    return (int64_t)(((unsigned __int128)count * (unsigned)p) / (unsigned)P);
}

/* Assigns every node of 'g' to one of 'nparts' partitions with METIS on
 * the homogeneous view: all node types in one ID space (type 0 first), the
 * edges of all types made symmetric, without self-loops, each neighbour
 * once with the number of input edges between the two as edge weight.
 * Recursive bisection with random matching, or (flags GKV_PART_METIS_KWAY,
 * GKV_PART_METIS_SHEM) k-way, heavy-edge matching. Vertex weights
 * (multi-constraint): 1 per node; with GKV_PART_BALANCE_EDGES in 'flags'
 * the node's in-degree (all edge types); with a non-NULL mask[t] for some
 * type, 1 per training node. A constraint whose total is 0 is left out.
 * With one constraint and bisection, nodes without a neighbour are left
 * out of METIS's graph and afterwards fill, in order, the parts holding
 * fewer than ceil(nodes / nparts), up to that many.
 * owner[t] (gkv_graph_num_nodes(g, t) entries each) receives the partition
 * of every node. 'keep' (spec.metis_keep: > 0, 0 for the default, or
 * GKV_PART_METIS_KEEP_ALL) thins METIS's graph first: each node keeps its
 * 'keep' heaviest neighbours, an edge staying when either end keeps it.
 * *objval (may be NULL) gets METIS's edge cut of the graph it was given:
 * the input edges whose ends lie in different parts (unit weights, so
 * pairs rather than edges, only when twice the edges exceed idx_t), less
 * the edges thinning left out. libmetis is serial and keeps its random
 * state in globals: runs on the calling thread, one METIS call at a time
 * in the process (so the same input and seed give the same partition).
 * With bisection and 3 or more parts, the first level is done by hand and
 * each side's nodes left without a neighbour there are placed after.
 * Errors, with the detail in msg: GKV_ERANGE (the graph or a weight total
 * exceeds METIS's idx_t), GKV_ENOMEM, GKV_EINVAL / GKV_EIO (METIS failed). */
gkv_err pw__metis(const gkv_graph *g, int nparts, uint64_t seed,
                  unsigned flags, int keep, uint8_t *const *mask,
                  uint16_t *const *owner, int64_t *objval, char *msg,
                  size_t msglen);

/* Refuses (GKV_ERANGE, with msg) a graph whose node count alone exceeds
 * METIS's idx_t, before anything is allocated for it. */
gkv_err pw__metis_check(const gkv_graph *g, char *msg, size_t msglen);

/* Formats into msg (NULL is fine) and returns rc. */
gkv_err pw__msg(char *msg, size_t msglen, gkv_err rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* ---- shared between the partitioner's files ----------------------------- */

/* part_write.c */

/* Records the failure's message in w->msg (the caller returns at once);
 * returns rc. */
gkv_err pw__fail(struct pw *w, gkv_err rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* gkv__from_errno(e), with EEXIST/ENOTEMPTY as GKV_EEXIST and
 * ENOSPC/EDQUOT as GKV_EMAPFULL. */
gkv_err pw__from_errno(int e);

/* Reports 'stage' to the spec's progress callback; GKV_EINTR (with the
 * message) when it asks to cancel. */
gkv_err pw__progress(struct pw *w, const char *stage, uint64_t done,
                     uint64_t total);

/* 'bytes' more written: pw__progress of stage "write". */
gkv_err pw__wrote(struct pw *w, uint64_t bytes);

/* *buf with room for n elements of 'size' bytes (old contents dropped);
 * NULL when out of memory. */
void   *pw__scratch(void *bufp, size_t *cap, size_t n, size_t size);

/* 1..GKV_PART_NAME_MAX printable ASCII bytes without blanks, '#' or '/';
 * 0 with a constant reason in *why otherwise. */
int     pw__name_ok(const char *s, const char **why);

/* An allocation of 'bytes' for the nodes of type t failed: GKV_ENOMEM with
 * the message. */
gkv_err pw__fail_nodes(struct pw *w, int t, uint64_t bytes,
                       const char *what);

/* part_load.c (step 1; each checks and maps what the spec names) */

/* The features: names checked, files mapped, row counts checked. */
gkv_err pw__load_feats(struct pw *w);

/* The reverse pairs: checked (edge k of each type joins the same nodes as
 * edge k of the other, the other way), and a "reverse_eid" feature for
 * each type, whose rows (the other type's emap) are set once the edges are
 * numbered. Appended to w->feats, which pw__load_feats sized for them. */
gkv_err pw__load_reverse(struct pw *w);

/* The training masks, into w->mask. */
gkv_err pw__load_masks(struct pw *w);

/* part_assign.c (steps 2 and 3) */

/* w->owner, w->newid and w->nstart by the spec's method (METIS through
 * pw__metis); sets rep->assign_seconds. */
gkv_err pw__assign(struct pw *w, gkv_part_report *rep);

/* eptr[et] (nd + 1 global CSC offsets over the new dst IDs: ptr[v] is the
 * first new edge ID into v, ptr[nd] the edge count) and emap[et]; with
 * GKV_PART_CSR also the type's out-edge counts per owner in w->ocnt. */
gkv_err pw__number_edges(struct pw *w, int et);

/* part_store.c (step 4) */

/* Bytes of partition p's tensors, for the map size and the progress. */
uint64_t pw__part_bytes(const struct pw *w, int p);

/* Partition p's store, written complete and closed. */
gkv_err pw__write_partition(struct pw *w, int p);

/* part_config.c (step 5) */

/* The mapping files (new IDs of nodes and edges) under w->tmp. */
gkv_err pw__write_mappings(struct pw *w);

/* Edges of type et in partition p (into its nodes). */
int64_t pw__ecount(const struct pw *w, int et, int p);

/* The JSON config, with r's figures, under w->tmp. */
gkv_err pw__write_json(struct pw *w, const gkv_part_report *r);

/* part_fs.c */

/* "a/b", gkv__malloc'd; NULL when out of memory. */
char   *pw__path_join(const char *a, const char *b);

/* Removes the tree at 'p' (no symlinks followed). */
int     pw__rmtree(const char *p);

/* All of buf to fd (EINTR retried); 0, or -1 with errno. */
int     pw__write_all(int fd, const void *buf, size_t len);

/* Checks what is at w->out now: nothing, an empty directory, or (with
 * GKV_PART_FORCE) a gkv partition and nothing else. */
gkv_err pw__check_outdir(struct pw *w);

/* *out: the path of partition p's store under w->tmp (gkv__free it). */
gkv_err pw__part_path(struct pw *w, int p, char **out);

/* Every store, mapping file and directory of the temporary tree to disk. */
gkv_err pw__sync_all(struct pw *w);

/* Moves the complete temporary tree to OUT. */
gkv_err pw__publish(struct pw *w);

#endif /* PART_WRITE_H */
