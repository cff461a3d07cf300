/* pbook.c - the partition book: the partition config (JSON, read with
 * jansson and checked in full at open), the ID lookups over its ranges and
 * the training-set splits.
 *
 * Layout in memory: per node type and per edge type, tlo[0..P] (the
 * type-wise start of each partition's range, tlo[P] = count) and hlo[0..P)
 * (the homogeneous start of the same range). Owner lookups binary-search
 * tlo; homogeneous lookups binary-search the list of non-empty homogeneous
 * ranges, which the format lays out partition by partition, type by type,
 * so the list is sorted by construction. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <jansson.h>
#include "graph/graph_int.h"
#include "graph/gkv_part.h"

#define PB_MSG_MAX   640
#define PB_PARTS_MAX (1 << 20)        /* partitions in one config */
#define PB_NODES 0
#define PB_EDGES 1

/* ---- messages ---------------------------------------------------------- */

/* gkv__fail() / gkv__clear() about b (NULL: a failed open). */
static inline const void *pb_about(const gkv_pbook *b) { return b; }
#define pb_fail(b, rc, ...) gkv__fail(pb_about(b), (rc), __VA_ARGS__)
#define pb_clear(b)         gkv__clear(pb_about(b))

const char *
gkv_pbook_errmsg(const gkv_pbook *b)
{
    return gkv__errmsg_about(b);
}

/* ---- the book ---------------------------------------------------------- */

struct pb_type {
    char    *name;        /* node type name, or canonical edge type name */
    char    *rel;         /* edge type: its relation; NULL for node types */
    int      src, dst;    /* edge type: node type indices */
    int      weighted;    /* edge type: 1 when listed in "weighted" */
    int      rev1;        /* edge type: its "reverse_etypes" pair + 1, or 0 */
    int64_t  count;       /* IDs of this type, all partitions */
    int64_t *tlo;         /* nparts + 1 type-wise starts; tlo[P] = count */
    int64_t *hlo;         /* nparts homogeneous starts */
    char   **feats;       /* nfeats feature names */
    int      nfeats;
    char    *mapping;     /* resolved .npy path, or NULL */
};

struct pb_seg {
    int64_t start;        /* homogeneous start of a non-empty range */
    int32_t type, part;
};

struct pb_space {
    const char     *kind;     /* "node" or "edge", for messages */
    int             ntypes;
    struct pb_type *t;
    struct pb_seg  *seg;      /* non-empty ranges, increasing start */
    size_t          nseg;
    int64_t         total;    /* IDs of all types */
};

struct gkv_pbook {
    char           *pb_path;       /* the JSON, as given */
    char           *pb_name;       /* graph_name */
    char           *pb_method;     /* part_method */
    int             pb_nparts;
    int             pb_csr;
    char          **pb_part_path;  /* nparts resolved store paths */
    struct pb_space pb_sp[2];      /* PB_NODES, PB_EDGES */
};

static void
types_free(struct pb_space *sp)
{
    for (int i = 0; sp->t != NULL && i < sp->ntypes; i++) {
        struct pb_type *t = &sp->t[i];
        gkv__free(t->name);
        gkv__free(t->rel);
        gkv__free(t->tlo);
        gkv__free(t->hlo);
        for (int j = 0; t->feats != NULL && j < t->nfeats; j++)
            gkv__free(t->feats[j]);
        gkv__free(t->feats);
        gkv__free(t->mapping);
    }
    gkv__free(sp->t);
    gkv__free(sp->seg);
}

void
gkv_pbook_close(gkv_pbook *b)
{
    if (b == NULL)
        return;
    types_free(&b->pb_sp[PB_NODES]);
    types_free(&b->pb_sp[PB_EDGES]);
    for (int p = 0; b->pb_part_path != NULL && p < b->pb_nparts; p++)
        gkv__free(b->pb_part_path[p]);
    gkv__free(b->pb_part_path);
    gkv__free(b->pb_path);
    gkv__free(b->pb_name);
    gkv__free(b->pb_method);
    gkv__free(b);
}

/* ---- parsing ------------------------------------------------------------ */

struct pctx {
    const char *path;     /* for messages */
    char       *dir;      /* the JSON's directory + '/', or "" */
    gkv_pbook  *b;
};

static gkv_err bad(struct pctx *c, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A malformed field: "PATH: field 'FIELD': what". */
static gkv_err
bad(struct pctx *c, const char *field, const char *fmt, ...)
{
    char what[PB_MSG_MAX];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return pb_fail(NULL, GKV_EFORMAT, "%s: field '%s': %s", c->path, field,
                   what);
}

static gkv_err
oom(void)
{
    return pb_fail(NULL, GKV_ENOMEM, "out of memory reading the partition "
                   "config");
}

static const char *
jtype(const json_t *j)
{
    switch (json_typeof(j)) {
    case JSON_OBJECT:  return "an object";
    case JSON_ARRAY:   return "an array";
    case JSON_STRING:  return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL:    return "a real number";
    case JSON_TRUE:
    case JSON_FALSE:   return "a boolean";
    case JSON_NULL:    return "null";
    }
    return "?";
}

/* Member 'key' of 'obj' with JSON type 'want' (or NULL when optional and
 * absent: *got = NULL, GKV_OK). */
static gkv_err
member(struct pctx *c, json_t *obj, const char *key, json_type want,
       const char *want_text, int optional, json_t **got)
{
    json_t *v = json_object_get(obj, key);

    *got = NULL;
    if (v == NULL) {
        if (optional)
            return GKV_OK;
        return bad(c, key, "missing");
    }
    if (json_typeof(v) != want &&
        !(want == JSON_TRUE && json_typeof(v) == JSON_FALSE))
        return bad(c, key, "expected %s, got %s", want_text, jtype(v));
    *got = v;
    return GKV_OK;
}

static gkv_err
int_member(struct pctx *c, json_t *obj, const char *key, int64_t min,
           int64_t max, int64_t *out)
{
    json_t *v;
    gkv_err rc;

    if ((rc = member(c, obj, key, JSON_INTEGER, "an integer", 0, &v)) != 0)
        return rc;
    *out = (int64_t)json_integer_value(v);
    if (*out < min || *out > max)
        return bad(c, key, "%lld is outside [%lld, %lld]", (long long)*out,
                   (long long)min, (long long)max);
    return GKV_OK;
}

static gkv_err
str_member(struct pctx *c, json_t *obj, const char *key, char **out)
{
    json_t *v;
    gkv_err rc;

    if ((rc = member(c, obj, key, JSON_STRING, "a string", 0, &v)) != 0)
        return rc;
    if (json_string_length(v) == 0 ||
        strlen(json_string_value(v)) != json_string_length(v))
        return bad(c, key, "empty, or holds a NUL byte");
    if ((*out = gkv__strdup(json_string_value(v))) == NULL)
        return oom();
    return GKV_OK;
}

/* 'rel' resolved against the JSON's directory (absolute paths kept). */
static char *
resolve(const struct pctx *c, const char *rel)
{
    size_t ld = rel[0] == '/' ? 0 : strlen(c->dir), lr = strlen(rel);
    char *s = gkv__malloc(ld + lr + 1);

    if (s != NULL) {
        memcpy(s, c->dir, ld);
        memcpy(s + ld, rel, lr + 1);
    }
    return s;
}

/* Index of type 'name' in space 'k', or -1. */
static int
type_index(const gkv_pbook *b, int k, const char *name)
{
    const struct pb_space *sp = &b->pb_sp[k];

    for (int i = 0; i < sp->ntypes; i++)
        if (strcmp(sp->t[i].name, name) == 0)
            return i;
    return -1;
}

/* "ntypes" or "etypes": name -> index, a permutation of 0..n-1. */
static gkv_err
parse_types(struct pctx *c, json_t *root, int k)
{
    const char *key = k == PB_NODES ? "ntypes" : "etypes";
    struct pb_space *sp = &c->b->pb_sp[k];
    char field[GKV_NAME_MAX + 32];
    const char *name, *why;
    json_t *obj, *v;
    size_t n;
    gkv_err rc;

    if ((rc = member(c, root, key, JSON_OBJECT, "an object", 0, &obj)) != 0)
        return rc;
    n = json_object_size(obj);
    if (k == PB_NODES && n == 0)
        return bad(c, key, "no node types");
    if (n > GKV_GRAPH_TYPES_MAX)
        return bad(c, key, "%zu types, at most %d", n, GKV_GRAPH_TYPES_MAX);
    if ((sp->t = gkv__calloc(n ? n : 1, sizeof *sp->t)) == NULL)
        return oom();
    sp->ntypes = (int)n;
    json_object_foreach(obj, name, v) {
        json_int_t idx;

        snprintf(field, sizeof field, "%s.%s", key, name);
        if (!json_is_integer(v))
            return bad(c, field, "expected an integer type index, got %s",
                       jtype(v));
        idx = json_integer_value(v);
        if (idx < 0 || (size_t)idx >= n)
            return bad(c, field, "type index %lld is outside [0, %zu)",
                       (long long)idx, n);
        if (sp->t[idx].name != NULL)
            return bad(c, field, "type index %lld is also '%s''s",
                       (long long)idx, sp->t[idx].name);
        if (k == PB_NODES) {
            if (!graph__name_ok(name, &why))
                return bad(c, field, "the type name %s", why);
        } else {
            const char *c1 = strchr(name, ':');
            const char *c2 = c1 != NULL ? strchr(c1 + 1, ':') : NULL;
            char part[3][GKV_TYPE_NAME_MAX + 2];
            size_t len[3];

            if (c2 == NULL || strchr(c2 + 1, ':') != NULL)
                return bad(c, field, "not a canonical edge type "
                           "\"src:relation:dst\"");
            len[0] = (size_t)(c1 - name);
            len[1] = (size_t)(c2 - c1 - 1);
            len[2] = strlen(c2 + 1);
            for (int j = 0; j < 3; j++)
                if (len[j] > GKV_TYPE_NAME_MAX)
                    return bad(c, field, "a name longer than %d bytes",
                               GKV_TYPE_NAME_MAX);
            memcpy(part[0], name, len[0]);
            memcpy(part[1], c1 + 1, len[1]);
            memcpy(part[2], c2 + 1, len[2]);
            for (int j = 0; j < 3; j++)
                part[j][len[j]] = '\0';
            if (!graph__name_ok(part[1], &why))
                return bad(c, field, "the relation %s", why);
            sp->t[idx].src = type_index(c->b, PB_NODES, part[0]);
            sp->t[idx].dst = type_index(c->b, PB_NODES, part[2]);
            if (sp->t[idx].src < 0 || sp->t[idx].dst < 0)
                return bad(c, field, "node type '%s' is not in \"ntypes\"",
                           sp->t[idx].src < 0 ? part[0] : part[2]);
            if ((sp->t[idx].rel = gkv__strdup(part[1])) == NULL)
                return oom();
        }
        if ((sp->t[idx].name = gkv__strdup(name)) == NULL)
            return oom();
    }
    return GKV_OK;
}

/* "node_map" or "edge_map": per type, nparts [start, end) pairs that tile
 * [0, total) partition by partition, type by type. */
static gkv_err
parse_map(struct pctx *c, json_t *root, int k, int64_t total)
{
    const char *key = k == PB_NODES ? "node_map" : "edge_map";
    struct pb_space *sp = &c->b->pb_sp[k];
    int P = c->b->pb_nparts;
    char field[GKV_NAME_MAX + 64];
    json_t *obj, *v, **arr;
    const char *name;
    int64_t cur = 0;
    size_t nseg = 0;
    gkv_err rc;

    if ((rc = member(c, root, key, JSON_OBJECT, "an object", 0, &obj)) != 0)
        return rc;
    json_object_foreach(obj, name, v) {
        if (type_index(c->b, k, name) < 0) {
            snprintf(field, sizeof field, "%s.%s", key, name);
            return bad(c, field, "no such %s type in \"%s\"", sp->kind,
                       k == PB_NODES ? "ntypes" : "etypes");
        }
    }
    if ((arr = gkv__calloc(sp->ntypes ? (size_t)sp->ntypes : 1,
                           sizeof *arr)) == NULL)
        return oom();
    for (int t = 0; t < sp->ntypes; t++) {
        struct pb_type *ty = &sp->t[t];

        snprintf(field, sizeof field, "%s.%s", key, ty->name);
        arr[t] = json_object_get(obj, ty->name);
        if (arr[t] == NULL) {
            rc = bad(c, field, "missing: every %s type needs its ranges",
                     sp->kind);
            goto out;
        }
        if (!json_is_array(arr[t]) || json_array_size(arr[t]) != (size_t)P) {
            rc = bad(c, field, "expected an array of %d [start, end] pairs "
                     "(one per partition), got %s%s", P, jtype(arr[t]),
                     json_is_array(arr[t]) ? " of another length" : "");
            goto out;
        }
        if ((ty->tlo = gkv__malloc(((size_t)P + 1) * sizeof *ty->tlo)) ==
                NULL ||
            (ty->hlo = gkv__malloc((size_t)P * sizeof *ty->hlo)) == NULL) {
            rc = oom();
            goto out;
        }
        ty->tlo[0] = 0;
    }
    for (int p = 0; p < P; p++)
        for (int t = 0; t < sp->ntypes; t++) {
            struct pb_type *ty = &sp->t[t];
            json_t *pair = json_array_get(arr[t], (size_t)p);
            json_t *js = json_array_get(pair, 0), *je = json_array_get(pair, 1);
            int64_t s, e;

            snprintf(field, sizeof field, "%s.%s[%d]", key, ty->name, p);
            if (!json_is_array(pair) || json_array_size(pair) != 2 ||
                !json_is_integer(js) || !json_is_integer(je)) {
                rc = bad(c, field, "expected an array of 2 integers "
                         "[start, end]");
                goto out;
            }
            s = (int64_t)json_integer_value(js);
            e = (int64_t)json_integer_value(je);
            if (s != cur) {
                rc = bad(c, field, "starts at %lld, expected %lld: the "
                         "ranges must tile the homogeneous IDs partition "
                         "by partition, type by type in type order",
                         (long long)s, (long long)cur);
                goto out;
            }
            if (e < s) {
                rc = bad(c, field, "end %lld is below start %lld",
                         (long long)e, (long long)s);
                goto out;
            }
            ty->hlo[p] = s;
            ty->tlo[p + 1] = ty->tlo[p] + (e - s);
            if (e > s)
                nseg++;
            cur = e;
        }
    if (cur != total) {
        rc = bad(c, k == PB_NODES ? "num_nodes" : "num_edges",
                 "%lld, but \"%s\" covers %lld IDs", (long long)total, key,
                 (long long)cur);
        goto out;
    }
    sp->total = total;
    if ((sp->seg = gkv__malloc((nseg ? nseg : 1) * sizeof *sp->seg)) == NULL) {
        rc = oom();
        goto out;
    }
    for (int p = 0; p < P; p++)
        for (int t = 0; t < sp->ntypes; t++) {
            struct pb_type *ty = &sp->t[t];
            if (ty->tlo[p + 1] > ty->tlo[p])
                sp->seg[sp->nseg++] = (struct pb_seg){ty->hlo[p], t, p};
        }
    for (int t = 0; t < sp->ntypes; t++)
        sp->t[t].count = sp->t[t].tlo[P];
    rc = GKV_OK;
out:
    gkv__free(arr);
    return rc;
}

/* "node_feats" / "edge_feats": type -> array of feature names. */
static gkv_err
parse_feats(struct pctx *c, json_t *root, int k)
{
    const char *key = k == PB_NODES ? "node_feats" : "edge_feats";
    struct pb_space *sp = &c->b->pb_sp[k];
    char field[GKV_NAME_MAX + 64];
    const char *name;
    json_t *obj, *v;
    gkv_err rc;

    if ((rc = member(c, root, key, JSON_OBJECT, "an object", 0, &obj)) != 0)
        return rc;
    json_object_foreach(obj, name, v) {
        int t = type_index(c->b, k, name);
        struct pb_type *ty;

        snprintf(field, sizeof field, "%s.%s", key, name);
        if (t < 0)
            return bad(c, field, "no such %s type", sp->kind);
        if (!json_is_array(v))
            return bad(c, field, "expected an array of names, got %s",
                       jtype(v));
        ty = &sp->t[t];
        if ((ty->feats = gkv__calloc(json_array_size(v) + 1,
                                     sizeof *ty->feats)) == NULL)
            return oom();
        for (size_t i = 0; i < json_array_size(v); i++) {
            json_t *s = json_array_get(v, i);
            if (!json_is_string(s) || json_string_length(s) == 0 ||
                json_string_length(s) > GKV_NAME_MAX ||
                strlen(json_string_value(s)) != json_string_length(s)) {
                snprintf(field, sizeof field, "%s.%s[%zu]", key, name, i);
                return bad(c, field, "expected a feature name (a string of "
                           "1..%d bytes)", GKV_NAME_MAX);
            }
            if ((ty->feats[i] = gkv__strdup(json_string_value(s))) == NULL)
                return oom();
            ty->nfeats = (int)i + 1;
        }
    }
    return GKV_OK;
}

static gkv_err
parse_weighted(struct pctx *c, json_t *root)
{
    char field[32];
    json_t *arr;
    gkv_err rc;

    if ((rc = member(c, root, "weighted", JSON_ARRAY, "an array", 0,
                     &arr)) != 0)
        return rc;
    for (size_t i = 0; i < json_array_size(arr); i++) {
        json_t *s = json_array_get(arr, i);
        int t;

        snprintf(field, sizeof field, "weighted[%zu]", i);
        if (!json_is_string(s))
            return bad(c, field, "expected a canonical edge type, got %s",
                       jtype(s));
        if ((t = type_index(c->b, PB_EDGES, json_string_value(s))) < 0)
            return bad(c, field, "'%s' is not in \"etypes\"",
                       json_string_value(s));
        c->b->pb_sp[PB_EDGES].t[t].weighted = 1;
    }
    return GKV_OK;
}

/* "reverse_etypes" (optional, gkv-partition --reverse-etypes): canonical
 * edge type -> the canonical edge type of its reverses. */
static gkv_err
parse_reverse(struct pctx *c, json_t *root)
{
    char field[GKV_NAME_MAX + 32];
    const char *key;
    json_t *obj, *v;
    gkv_err rc;

    if ((rc = member(c, root, "reverse_etypes", JSON_OBJECT, "an object", 1,
                     &obj)) != 0 || obj == NULL)
        return rc;
    json_object_foreach(obj, key, v) {
        int a, b;

        snprintf(field, sizeof field, "reverse_etypes.%.200s", key);
        if ((a = type_index(c->b, PB_EDGES, key)) < 0)
            return bad(c, field, "'%s' is not in \"etypes\"", key);
        if (!json_is_string(v) ||
            (b = type_index(c->b, PB_EDGES, json_string_value(v))) < 0)
            return bad(c, field, "expected a canonical edge type of "
                       "\"etypes\"");
        if (a == b)
            return bad(c, field, "an edge type cannot be its own reverse");
        c->b->pb_sp[PB_EDGES].t[a].rev1 = b + 1;
    }
    /* both ways, and node types swapped, as gkv-partition writes them */
    for (int a = 0; a < c->b->pb_sp[PB_EDGES].ntypes; a++) {
        const struct pb_type *ta = &c->b->pb_sp[PB_EDGES].t[a], *tb;

        if (ta->rev1 == 0)
            continue;
        tb = &c->b->pb_sp[PB_EDGES].t[ta->rev1 - 1];
        snprintf(field, sizeof field, "reverse_etypes.%.200s", ta->name);
        if (tb->rev1 != a + 1)
            return bad(c, field, "'%s' is not paired back with it", tb->name);
        /* the other side's source is checked when the loop is there */
        if (ta->src != tb->dst)
            return bad(c, field, "the node types of '%s' are not swapped",
                       tb->name);
    }
    return GKV_OK;
}

/* "part-N": {"part_graph": PATH, "node_feats": PATH, "edge_feats": PATH},
 * where the feature paths, when given, are the same store. */
static gkv_err
parse_parts(struct pctx *c, json_t *root)
{
    static const char *const feat_keys[2] = {"node_feats", "edge_feats"};
    gkv_pbook *b = c->b;
    char key[32], field[64];
    json_t *obj, *v;
    gkv_err rc;

    if ((b->pb_part_path = gkv__calloc((size_t)b->pb_nparts,
                                       sizeof *b->pb_part_path)) == NULL)
        return oom();
    for (int p = 0; p < b->pb_nparts; p++) {
        snprintf(key, sizeof key, "part-%d", p);
        if ((rc = member(c, root, key, JSON_OBJECT, "an object", 0,
                         &obj)) != 0)
            return rc;
        snprintf(field, sizeof field, "%s.part_graph", key);
        v = json_object_get(obj, "part_graph");
        if (v == NULL)
            return bad(c, field, "missing");
        if (!json_is_string(v) || json_string_length(v) == 0)
            return bad(c, field, "expected a path (a non-empty string), "
                       "got %s", jtype(v));
        if ((b->pb_part_path[p] = resolve(c, json_string_value(v))) == NULL)
            return oom();
        for (int i = 0; i < 2; i++) {
            json_t *f = json_object_get(obj, feat_keys[i]);
            snprintf(field, sizeof field, "%s.%s", key, feat_keys[i]);
            if (f == NULL)
                continue;
            if (!json_is_string(f))
                return bad(c, field, "expected a path, got %s", jtype(f));
            if (strcmp(json_string_value(f), json_string_value(v)) != 0)
                return bad(c, field, "'%s' is not part_graph '%s': "
                           "features live in the partition's store",
                           json_string_value(f), json_string_value(v));
        }
    }
    return GKV_OK;
}

/* Optional "mapping": {"node": {ntype: PATH}, "edge": {etype: PATH}}. */
static gkv_err
parse_mapping(struct pctx *c, json_t *root)
{
    static const char *const keys[2] = {"node", "edge"};
    char field[GKV_NAME_MAX + 64];
    const char *name;
    json_t *obj, *sub, *v;
    gkv_err rc;

    if ((rc = member(c, root, "mapping", JSON_OBJECT, "an object", 1,
                     &obj)) != 0 || obj == NULL)
        return rc;
    for (int k = 0; k < 2; k++) {
        snprintf(field, sizeof field, "mapping.%s", keys[k]);
        if ((sub = json_object_get(obj, keys[k])) == NULL)
            continue;
        if (!json_is_object(sub))
            return bad(c, field, "expected an object, got %s", jtype(sub));
        json_object_foreach(sub, name, v) {
            int t = type_index(c->b, k, name);

            snprintf(field, sizeof field, "mapping.%s.%s", keys[k], name);
            if (t < 0)
                return bad(c, field, "no such %s type", keys[k]);
            if (!json_is_string(v) || json_string_length(v) == 0)
                return bad(c, field, "expected a path, got %s", jtype(v));
            gkv__free(c->b->pb_sp[k].t[t].mapping);
            if ((c->b->pb_sp[k].t[t].mapping =
                     resolve(c, json_string_value(v))) == NULL)
                return oom();
        }
    }
    return GKV_OK;
}

static gkv_err
parse(struct pctx *c, json_t *root)
{
    gkv_pbook *b = c->b;
    int64_t fmt, nparts, nnodes, nedges;
    json_t *v;
    gkv_err rc;

    if (!json_is_object(root))
        return pb_fail(NULL, GKV_EFORMAT, "%s: expected a JSON object, "
                       "got %s", c->path, jtype(root));
    if ((rc = member(c, root, "gkv_format", JSON_INTEGER, "an integer", 0,
                     &v)) != 0)
        return rc;
    fmt = (int64_t)json_integer_value(v);
    if (fmt > GKV_PART_FORMAT)
        return pb_fail(NULL, GKV_EVERSION, "%s: field 'gkv_format': %lld "
                       "is newer than this build reads (%d)", c->path,
                       (long long)fmt, GKV_PART_FORMAT);
    if (fmt < 1)
        return bad(c, "gkv_format", "%lld is not a format version",
                   (long long)fmt);
    if ((rc = str_member(c, root, "graph_name", &b->pb_name)) != 0 ||
        (rc = str_member(c, root, "part_method", &b->pb_method)) != 0 ||
        (rc = int_member(c, root, "num_parts", 1, PB_PARTS_MAX,
                         &nparts)) != 0 ||
        (rc = int_member(c, root, "num_nodes", 0, INT64_MAX,
                         &nnodes)) != 0 ||
        (rc = int_member(c, root, "num_edges", 0, INT64_MAX, &nedges)) != 0)
        return rc;
    b->pb_nparts = (int)nparts;
    if ((rc = member(c, root, "halo_hops", JSON_INTEGER, "an integer", 1,
                     &v)) != 0)
        return rc;
    if (v != NULL && json_integer_value(v) != 0)
        return bad(c, "halo_hops", "%lld: partitions with halo nodes are "
                   "not supported (0 only)", (long long)json_integer_value(v));
    if ((rc = member(c, root, "csr", JSON_TRUE, "a boolean", 0, &v)) != 0)
        return rc;
    b->pb_csr = json_is_true(v);
    if ((rc = parse_types(c, root, PB_NODES)) != 0 ||
        (rc = parse_types(c, root, PB_EDGES)) != 0 ||
        (rc = parse_map(c, root, PB_NODES, nnodes)) != 0 ||
        (rc = parse_map(c, root, PB_EDGES, nedges)) != 0 ||
        (rc = parse_weighted(c, root)) != 0 ||
        (rc = parse_reverse(c, root)) != 0 ||
        (rc = parse_feats(c, root, PB_NODES)) != 0 ||
        (rc = parse_feats(c, root, PB_EDGES)) != 0 ||
        (rc = parse_parts(c, root)) != 0 ||
        (rc = parse_mapping(c, root)) != 0)
        return rc;
    return GKV_OK;
}

/* Builds the book from a parsed config; 'name' is the file (or what the
 * bytes are) for messages, and its directory resolves relative paths. */
static gkv_err
book_from_json(gkv_pbook **out, json_t *root, const char *name)
{
    struct pctx c = {name, NULL, NULL};
    const char *slash;
    gkv_err rc;

    if ((c.b = gkv__calloc(1, sizeof *c.b)) == NULL) {
        rc = oom();
        goto out;
    }
    c.b->pb_sp[PB_NODES].kind = "node";
    c.b->pb_sp[PB_EDGES].kind = "edge";
    slash = strrchr(name, '/');
    if ((c.dir = gkv__malloc(slash ? (size_t)(slash - name) + 2 : 1)) ==
            NULL ||
        (c.b->pb_path = gkv__strdup(name)) == NULL) {
        rc = oom();
        goto out;
    }
    if (slash != NULL) {
        memcpy(c.dir, name, (size_t)(slash - name) + 1);
        c.dir[slash - name + 1] = '\0';
    } else {
        c.dir[0] = '\0';
    }
    if ((rc = parse(&c, root)) != GKV_OK)
        goto out;
    *out = c.b;
    c.b = NULL;
out:
    gkv_pbook_close(c.b);
    gkv__free(c.dir);
    return rc;
}

gkv_err
gkv_pbook_open(gkv_pbook **out, const char *json_path)
{
    json_error_t jerr;
    json_t *root;
    struct stat st;
    FILE *fp;
    gkv_err rc;

    pb_clear(NULL);
    if (out == NULL || json_path == NULL)
        return pb_fail(NULL, GKV_EINVAL, "gkv_pbook_open: NULL argument");
    *out = NULL;
    if ((fp = fopen(json_path, "r")) == NULL) {
        int e = errno;
        return pb_fail(NULL, e == ENOENT || e == ENOTDIR ? GKV_ENOENT :
                       e == EACCES || e == EPERM ? GKV_EPERM :
                       e == ENOMEM ? GKV_ENOMEM : GKV_EIO,
                       "%s: %s", json_path, strerror(e));
    }
    if (fstat(fileno(fp), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(fp);
        return pb_fail(NULL, GKV_EINVAL, "%s: not a regular file",
                       json_path);
    }
    root = json_loadf(fp, JSON_REJECT_DUPLICATES, &jerr);
    fclose(fp);
    if (root == NULL)
        return pb_fail(NULL, GKV_EFORMAT, "%s:%d:%d: not a valid JSON "
                       "partition config: %s", json_path, jerr.line,
                       jerr.column, jerr.text);
    rc = book_from_json(out, root, json_path);
    json_decref(root);
    return rc;
}

gkv_err
gkv_pbook_open_mem(gkv_pbook **out, const void *text, size_t len,
                   const char *name)
{
    json_error_t jerr;
    json_t *root;
    gkv_err rc;

    pb_clear(NULL);
    if (out == NULL || (text == NULL && len > 0) || name == NULL)
        return pb_fail(NULL, GKV_EINVAL, "gkv_pbook_open_mem: NULL argument");
    *out = NULL;
    root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL)
        return pb_fail(NULL, GKV_EFORMAT, "%s:%d:%d: not a valid JSON "
                       "partition config: %s", name, jerr.line, jerr.column,
                       jerr.text);
    rc = book_from_json(out, root, name);
    json_decref(root);
    return rc;
}

/* ---- plain accessors ---------------------------------------------------- */

const char *gkv_pbook_graph_name(const gkv_pbook *b) { return b->pb_name; }
const char *gkv_pbook_method(const gkv_pbook *b) { return b->pb_method; }
int         gkv_pbook_num_parts(const gkv_pbook *b) { return b->pb_nparts; }
int         gkv_pbook_has_csr(const gkv_pbook *b) { return b->pb_csr; }

int
gkv_pbook_reverse_etype(const gkv_pbook *b, int etype)
{
    const struct pb_space *sp = &b->pb_sp[PB_EDGES];

    return etype >= 0 && etype < sp->ntypes ? sp->t[etype].rev1 - 1 : -1;
}

int64_t
gkv_pbook_total_nodes(const gkv_pbook *b)
{
    return b->pb_sp[PB_NODES].total;
}

int64_t
gkv_pbook_total_edges(const gkv_pbook *b)
{
    return b->pb_sp[PB_EDGES].total;
}

const char *
gkv_pbook_part_path(const gkv_pbook *b, int part)
{
    return part >= 0 && part < b->pb_nparts ? b->pb_part_path[part] : NULL;
}

static const struct pb_type *
get_type(const gkv_pbook *b, int k, int t)
{
    if (b == NULL || t < 0 || t >= b->pb_sp[k].ntypes)
        return NULL;
    return &b->pb_sp[k].t[t];
}

int
gkv_pbook_num_ntypes(const gkv_pbook *b)
{
    return b->pb_sp[PB_NODES].ntypes;
}

int
gkv_pbook_num_etypes(const gkv_pbook *b)
{
    return b->pb_sp[PB_EDGES].ntypes;
}

const char *
gkv_pbook_ntype_name(const gkv_pbook *b, int ntype)
{
    const struct pb_type *t = get_type(b, PB_NODES, ntype);
    return t != NULL ? t->name : NULL;
}

const char *
gkv_pbook_etype_name(const gkv_pbook *b, int etype)
{
    const struct pb_type *t = get_type(b, PB_EDGES, etype);
    return t != NULL ? t->name : NULL;
}

gkv_err
gkv_pbook_ntype_find(const gkv_pbook *b, const char *name, int *ntype)
{
    int t;

    pb_clear(b);
    if (name == NULL || ntype == NULL)
        return pb_fail(b, GKV_EINVAL, "gkv_pbook_ntype_find: NULL argument");
    if ((t = type_index(b, PB_NODES, name)) < 0)
        return pb_fail(b, GKV_ENOTFOUND, "no node type '%s'", name);
    *ntype = t;
    return GKV_OK;
}

gkv_err
gkv_pbook_etype_find(const gkv_pbook *b, const char *name, int *etype)
{
    const struct pb_space *sp = &b->pb_sp[PB_EDGES];
    int found = -1, nfound = 0;

    pb_clear(b);
    if (name == NULL || etype == NULL)
        return pb_fail(b, GKV_EINVAL, "gkv_pbook_etype_find: NULL argument");
    if ((found = type_index(b, PB_EDGES, name)) >= 0) {
        *etype = found;
        return GKV_OK;
    }
    for (int i = 0; i < sp->ntypes; i++)
        if (strcmp(sp->t[i].rel, name) == 0) {
            if (nfound++ == 0)
                found = i;
        }
    if (nfound == 0)
        return pb_fail(b, GKV_ENOTFOUND, "no edge type '%s'", name);
    if (nfound > 1) {
        char list[PB_MSG_MAX / 2];
        size_t len = 0;
        list[0] = '\0';
        for (int i = 0; i < sp->ntypes && len < sizeof list; i++)
            if (strcmp(sp->t[i].rel, name) == 0) {
                int w = snprintf(list + len, sizeof list - len, "%s%s",
                                 len ? ", " : "", sp->t[i].name);
                len += w > 0 ? (size_t)w : 0;
            }
        return pb_fail(b, GKV_EINVAL, "relation '%s' is ambiguous: %d edge "
                       "types have it (%s); use the canonical name", name,
                       nfound, list);
    }
    *etype = found;
    return GKV_OK;
}

gkv_err
gkv_pbook_etype_info(const gkv_pbook *b, int etype, gkv_etype_info *out)
{
    const struct pb_type *t = get_type(b, PB_EDGES, etype);

    pb_clear(b);
    if (t == NULL || out == NULL)
        return pb_fail(b, GKV_EINVAL, "no edge type %d", etype);
    out->canonical = t->name;
    out->relation = t->rel;
    out->src_ntype = t->src;
    out->dst_ntype = t->dst;
    out->src_type = b->pb_sp[PB_NODES].t[t->src].name;
    out->dst_type = b->pb_sp[PB_NODES].t[t->dst].name;
    out->num_edges = t->count;
    out->weighted = t->weighted;
    return GKV_OK;
}

int64_t
gkv_pbook_num_nodes(const gkv_pbook *b, int ntype)
{
    const struct pb_type *t = get_type(b, PB_NODES, ntype);
    return t != NULL ? t->count : -1;
}

int64_t
gkv_pbook_num_edges(const gkv_pbook *b, int etype)
{
    const struct pb_type *t = get_type(b, PB_EDGES, etype);
    return t != NULL ? t->count : -1;
}

int
gkv_pbook_num_node_feats(const gkv_pbook *b, int ntype)
{
    const struct pb_type *t = get_type(b, PB_NODES, ntype);
    return t != NULL ? t->nfeats : 0;
}

const char *
gkv_pbook_node_feat(const gkv_pbook *b, int ntype, int i)
{
    const struct pb_type *t = get_type(b, PB_NODES, ntype);
    return t != NULL && i >= 0 && i < t->nfeats ? t->feats[i] : NULL;
}

int
gkv_pbook_num_edge_feats(const gkv_pbook *b, int etype)
{
    const struct pb_type *t = get_type(b, PB_EDGES, etype);
    return t != NULL ? t->nfeats : 0;
}

const char *
gkv_pbook_edge_feat(const gkv_pbook *b, int etype, int i)
{
    const struct pb_type *t = get_type(b, PB_EDGES, etype);
    return t != NULL && i >= 0 && i < t->nfeats ? t->feats[i] : NULL;
}

const char *
gkv_pbook_node_mapping(const gkv_pbook *b, int ntype)
{
    const struct pb_type *t = get_type(b, PB_NODES, ntype);
    return t != NULL ? t->mapping : NULL;
}

const char *
gkv_pbook_edge_mapping(const gkv_pbook *b, int etype)
{
    const struct pb_type *t = get_type(b, PB_EDGES, etype);
    return t != NULL ? t->mapping : NULL;
}

/* ---- ranges and lookups ------------------------------------------------- */

/* Checks type 't' of space 'k', and partition 'part' when 'use_part'. */
static const struct pb_type *
check_type(const gkv_pbook *b, int k, int t, int use_part, int part,
           const char *fn)
{
    const struct pb_type *ty;

    pb_clear(b);
    if (b == NULL)
        return NULL;
    if ((ty = get_type(b, k, t)) == NULL) {
        pb_fail(b, GKV_EINVAL, "%s: no %s type %d (there are %d)", fn,
                b->pb_sp[k].kind, t, b->pb_sp[k].ntypes);
        return NULL;
    }
    if (use_part && (part < 0 || part >= b->pb_nparts)) {
        pb_fail(b, GKV_EINVAL, "%s: no partition %d (there are %d)", fn,
                part, b->pb_nparts);
        return NULL;
    }
    return ty;
}

static gkv_err
range(const gkv_pbook *b, int k, int t, int part, int homo, int64_t *lo,
      int64_t *hi)
{
    const struct pb_type *ty = check_type(b, k, t, 1, part, "range");

    if (ty == NULL)
        return GKV_EINVAL;
    if (lo == NULL || hi == NULL)
        return pb_fail(b, GKV_EINVAL, "range: NULL argument");
    *lo = ty->tlo[part];
    *hi = ty->tlo[part + 1];
    if (homo) {
        *hi = ty->hlo[part] + (*hi - *lo);
        *lo = ty->hlo[part];
    }
    return GKV_OK;
}

gkv_err
gkv_pbook_node_range(const gkv_pbook *b, int ntype, int part, int64_t *lo,
                     int64_t *hi)
{
    return range(b, PB_NODES, ntype, part, 0, lo, hi);
}

gkv_err
gkv_pbook_edge_range(const gkv_pbook *b, int etype, int part, int64_t *lo,
                     int64_t *hi)
{
    return range(b, PB_EDGES, etype, part, 0, lo, hi);
}

gkv_err
gkv_pbook_node_homo_range(const gkv_pbook *b, int ntype, int part,
                          int64_t *lo, int64_t *hi)
{
    return range(b, PB_NODES, ntype, part, 1, lo, hi);
}

gkv_err
gkv_pbook_edge_homo_range(const gkv_pbook *b, int etype, int part,
                          int64_t *lo, int64_t *hi)
{
    return range(b, PB_EDGES, etype, part, 1, lo, hi);
}

/* The partition owning type-wise ID 'id' (0 <= id < count): the last p
 * with tlo[p] <= id, which skips empty ranges. */
static int
owner(const struct pb_type *ty, int nparts, int64_t id)
{
    int lo = 0, hi = nparts - 1;

    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        if (ty->tlo[mid] <= id)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

static gkv_err
not_of_type(const gkv_pbook *b, int k, const struct pb_type *ty,
            const char *arr, size_t i, int64_t id)
{
    return pb_fail(b, GKV_ERANGE, "%s[%zu] = %lld is not a '%s' %s ID: "
                   "there are %lld", arr, i, (long long)id, ty->name,
                   b->pb_sp[k].kind, (long long)ty->count);
}

static gkv_err
owners(const gkv_pbook *b, int k, int t, const int64_t *ids, size_t n,
       int32_t *part)
{
    const struct pb_type *ty = check_type(b, k, t, 0, 0, "owner");

    if (ty == NULL)
        return GKV_EINVAL;
    if (n > 0 && (ids == NULL || part == NULL))
        return pb_fail(b, GKV_EINVAL, "owner: NULL array");
    for (size_t i = 0; i < n; i++) {
        int64_t id = ids[i];
        if (id < 0 || id >= ty->count)
            return not_of_type(b, k, ty, "ids", i, id);
        part[i] = owner(ty, b->pb_nparts, id);
    }
    return GKV_OK;
}

gkv_err
gkv_pbook_node_owner(const gkv_pbook *b, int ntype, const int64_t *ids,
                     size_t n, int32_t *part)
{
    return owners(b, PB_NODES, ntype, ids, n, part);
}

gkv_err
gkv_pbook_edge_owner(const gkv_pbook *b, int etype, const int64_t *ids,
                     size_t n, int32_t *part)
{
    return owners(b, PB_EDGES, etype, ids, n, part);
}

static gkv_err
to_local(const gkv_pbook *b, int k, int t, int part, const int64_t *ids,
         size_t n, int64_t *local)
{
    const struct pb_type *ty = check_type(b, k, t, 1, part,
                                          "to_local");
    int64_t lo, hi;

    if (ty == NULL)
        return GKV_EINVAL;
    if (n > 0 && (ids == NULL || local == NULL))
        return pb_fail(b, GKV_EINVAL, "to_local: NULL array");
    lo = ty->tlo[part];
    hi = ty->tlo[part + 1];
    for (size_t i = 0; i < n; i++) {
        int64_t id = ids[i];
        if (id < lo || id >= hi) {
            if (id < 0 || id >= ty->count)
                return not_of_type(b, k, ty, "ids", i, id);
            return pb_fail(b, GKV_ERANGE, "ids[%zu] = %lld: '%s' %s owned "
                           "by partition %d, not %d", i, (long long)id,
                           ty->name, b->pb_sp[k].kind,
                           owner(ty, b->pb_nparts, id), part);
        }
        local[i] = id - lo;
    }
    return GKV_OK;
}

gkv_err
gkv_pbook_node_to_local(const gkv_pbook *b, int ntype, int part,
                        const int64_t *ids, size_t n, int64_t *local)
{
    return to_local(b, PB_NODES, ntype, part, ids, n, local);
}

gkv_err
gkv_pbook_edge_to_local(const gkv_pbook *b, int etype, int part,
                        const int64_t *ids, size_t n, int64_t *local)
{
    return to_local(b, PB_EDGES, etype, part, ids, n, local);
}

static gkv_err
from_local(const gkv_pbook *b, int k, int t, int part, const int64_t *local,
           size_t n, int64_t *ids)
{
    const struct pb_type *ty = check_type(b, k, t, 1, part,
                                          "from_local");
    int64_t lo, cnt;

    if (ty == NULL)
        return GKV_EINVAL;
    if (n > 0 && (ids == NULL || local == NULL))
        return pb_fail(b, GKV_EINVAL, "from_local: NULL array");
    lo = ty->tlo[part];
    cnt = ty->tlo[part + 1] - lo;
    for (size_t i = 0; i < n; i++) {
        int64_t l = local[i];
        if (l < 0 || l >= cnt)
            return pb_fail(b, GKV_ERANGE, "local[%zu] = %lld: partition %d "
                           "owns %lld '%s' %ss", i, (long long)l, part,
                           (long long)cnt, ty->name, b->pb_sp[k].kind);
        ids[i] = lo + l;
    }
    return GKV_OK;
}

gkv_err
gkv_pbook_node_from_local(const gkv_pbook *b, int ntype, int part,
                          const int64_t *local, size_t n, int64_t *ids)
{
    return from_local(b, PB_NODES, ntype, part, local, n, ids);
}

gkv_err
gkv_pbook_edge_from_local(const gkv_pbook *b, int etype, int part,
                          const int64_t *local, size_t n, int64_t *ids)
{
    return from_local(b, PB_EDGES, etype, part, local, n, ids);
}

static gkv_err
to_homo(const gkv_pbook *b, int k, int t, const int64_t *ids, size_t n,
        int64_t *homo)
{
    const struct pb_type *ty = check_type(b, k, t, 0, 0, "to_homo");

    if (ty == NULL)
        return GKV_EINVAL;
    if (n > 0 && (ids == NULL || homo == NULL))
        return pb_fail(b, GKV_EINVAL, "to_homo: NULL array");
    for (size_t i = 0; i < n; i++) {
        int64_t id = ids[i];
        int p;
        if (id < 0 || id >= ty->count)
            return not_of_type(b, k, ty, "ids", i, id);
        p = owner(ty, b->pb_nparts, id);
        homo[i] = ty->hlo[p] + (id - ty->tlo[p]);
    }
    return GKV_OK;
}

gkv_err
gkv_pbook_node_to_homo(const gkv_pbook *b, int ntype, const int64_t *ids,
                       size_t n, int64_t *homo)
{
    return to_homo(b, PB_NODES, ntype, ids, n, homo);
}

gkv_err
gkv_pbook_edge_to_homo(const gkv_pbook *b, int etype, const int64_t *ids,
                       size_t n, int64_t *homo)
{
    return to_homo(b, PB_EDGES, etype, ids, n, homo);
}

static gkv_err
from_homo(const gkv_pbook *b, int k, const int64_t *homo, size_t n,
          int32_t *type, int64_t *ids, int32_t *part)
{
    const struct pb_space *sp;

    pb_clear(b);
    if (b == NULL || (n > 0 && homo == NULL))
        return pb_fail(b, GKV_EINVAL, "from_homo: NULL argument");
    sp = &b->pb_sp[k];
    for (size_t i = 0; i < n; i++) {
        int64_t h = homo[i];
        size_t lo = 0, hi;
        const struct pb_seg *s;

        if (h < 0 || h >= sp->total)
            return pb_fail(b, GKV_ERANGE, "homo[%zu] = %lld is not a "
                           "homogeneous %s ID: there are %lld", i,
                           (long long)h, sp->kind, (long long)sp->total);
        hi = sp->nseg - 1;
        while (lo < hi) {                 /* last segment starting <= h */
            size_t mid = lo + (hi - lo + 1) / 2;
            if (sp->seg[mid].start <= h)
                lo = mid;
            else
                hi = mid - 1;
        }
        s = &sp->seg[lo];
        if (type != NULL)
            type[i] = s->type;
        if (part != NULL)
            part[i] = s->part;
        if (ids != NULL)
            ids[i] = sp->t[s->type].tlo[s->part] + (h - s->start);
    }
    return GKV_OK;
}

gkv_err
gkv_pbook_node_from_homo(const gkv_pbook *b, const int64_t *homo, size_t n,
                         int32_t *ntype, int64_t *ids, int32_t *part)
{
    return from_homo(b, PB_NODES, homo, n, ntype, ids, part);
}

gkv_err
gkv_pbook_edge_from_homo(const gkv_pbook *b, const int64_t *homo, size_t n,
                         int32_t *etype, int64_t *ids, int32_t *part)
{
    return from_homo(b, PB_EDGES, homo, n, etype, ids, part);
}

/* ---- training-set splits ------------------------------------------------ */

int
gkv_pbook_trainer_part(const gkv_pbook *b, int num_trainers, int rank)
{
    if (b == NULL || num_trainers < 1 || rank < 0 || rank >= num_trainers)
        return -1;
    return (int)((int64_t)rank * b->pb_nparts / num_trainers);
}

static int
cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The plan of a split. S: the M selected IDs, sorted, unique; off[p]: the
 * first index in S of partition p's IDs (off[P] = M). Trainer r has a
 * quota of IDs, takes 'take' of them from S[lstart .. lstart + take) (its
 * own partition) and the rest, 'need', from the surplus stream: the IDs of
 * all partitions past what their own trainers took, in ID order, of which
 * it gets [fstart, fstart + need). */
struct plan {
    int64_t *S;
    size_t   M;
    int64_t *off;                         /* P + 1 */
    int64_t *used;                        /* P: taken by own trainers */
    int64_t *quota, *take, *lstart, *fstart;   /* T each */
};

static void
plan_free(struct plan *pl)
{
    gkv__free(pl->S);
    gkv__free(pl->off);
    gkv__free(pl->used);
    gkv__free(pl->quota);
    gkv__free(pl->take);
    gkv__free(pl->lstart);
    gkv__free(pl->fstart);
}

static gkv_err
plan_make(const gkv_pbook *b, int k, const struct pb_type *ty,
          const uint8_t *mask, const int64_t *ids, size_t n, int T,
          struct plan *pl)
{
    int P = b->pb_nparts;
    int64_t base, extra, spos = 0;
    int r, p;

    if (mask != NULL) {
        size_t m = 0;
        if ((int64_t)n != ty->count)
            return pb_fail(b, GKV_EINVAL, "split: the mask has %zu entries, "
                           "but there are %lld '%s' %ss", n,
                           (long long)ty->count, ty->name, b->pb_sp[k].kind);
        for (size_t i = 0; i < n; i++)
            m += mask[i] != 0;
        if ((pl->S = gkv__malloc((m ? m : 1) * sizeof *pl->S)) == NULL)
            return GKV_ENOMEM;
        for (size_t i = 0; i < n; i++)
            if (mask[i] != 0)
                pl->S[pl->M++] = (int64_t)i;
    } else {
        for (size_t i = 0; i < n; i++)
            if (ids[i] < 0 || ids[i] >= ty->count)
                return not_of_type(b, k, ty, "ids", i, ids[i]);
        if ((pl->S = gkv__malloc((n ? n : 1) * sizeof *pl->S)) == NULL)
            return GKV_ENOMEM;
        if (n > 0)
            memcpy(pl->S, ids, n * sizeof *ids);
        qsort(pl->S, n, sizeof *pl->S, cmp_i64);
        for (size_t i = 0; i < n; i++)
            if (pl->M == 0 || pl->S[pl->M - 1] != pl->S[i])
                pl->S[pl->M++] = pl->S[i];
    }
    if ((pl->off = gkv__malloc(((size_t)P + 1) * sizeof *pl->off)) == NULL ||
        (pl->used = gkv__calloc((size_t)P, sizeof *pl->used)) == NULL ||
        (pl->quota = gkv__malloc((size_t)T * sizeof *pl->quota)) == NULL ||
        (pl->take = gkv__malloc((size_t)T * sizeof *pl->take)) == NULL ||
        (pl->lstart = gkv__malloc((size_t)T * sizeof *pl->lstart)) == NULL ||
        (pl->fstart = gkv__malloc((size_t)T * sizeof *pl->fstart)) == NULL)
        return GKV_ENOMEM;
    /* S is sorted and ranges are in partition order: one merge pass */
    for (p = 0; p <= P; p++) {
        int64_t bound = p < P ? ty->tlo[p] : INT64_MAX;
        while ((size_t)spos < pl->M && pl->S[spos] < bound)
            spos++;
        pl->off[p] = p < P ? spos : (int64_t)pl->M;
    }
    base = (int64_t)pl->M / T;
    extra = (int64_t)pl->M % T;
    for (r = 0; r < T; r++)
        pl->quota[r] = base;
    /* Ceil shares first to trainers of partitions with a surplus, so the
     * extra IDs they take are their own. Trainers of p are consecutive. */
    for (r = 0; r < T && extra > 0;) {
        int pr = gkv_pbook_trainer_part(b, T, r), r2 = r;
        int64_t surplus = pl->off[pr + 1] - pl->off[pr];
        while (r2 < T && gkv_pbook_trainer_part(b, T, r2) == pr)
            r2++;
        surplus -= (int64_t)(r2 - r) * base;
        for (; r < r2 && surplus > 0 && extra > 0; r++, surplus--, extra--)
            pl->quota[r]++;
        r = r2;
    }
    for (r = 0; r < T && extra > 0; r++)
        if (pl->quota[r] == base) {
            pl->quota[r]++;
            extra--;
        }
    /* own partition first, then the surplus stream in rank order */
    for (r = 0, spos = 0; r < T; r++) {
        int pr = gkv_pbook_trainer_part(b, T, r);
        int64_t avail = pl->off[pr + 1] - pl->off[pr] - pl->used[pr];
        pl->take[r] = pl->quota[r] < avail ? pl->quota[r] : avail;
        pl->lstart[r] = pl->off[pr] + pl->used[pr];
        pl->used[pr] += pl->take[r];
        pl->fstart[r] = spos;
        spos += pl->quota[r] - pl->take[r];
    }
    return GKV_OK;
}

/* Writes trainer r's IDs (quota[r] of them, sorted) to dst. */
static void
plan_emit(const struct plan *pl, int P, int r, int64_t *dst)
{
    int64_t skip = pl->fstart[r], need = pl->quota[r] - pl->take[r];
    int64_t q = pl->quota[r], j = pl->take[r];

    if (pl->take[r] > 0)
        memcpy(dst, pl->S + pl->lstart[r],
               (size_t)pl->take[r] * sizeof *dst);
    for (int p = 0; p < P && need > 0; p++) {
        int64_t s0 = pl->off[p] + pl->used[p], len = pl->off[p + 1] - s0;
        if (len <= 0)
            continue;
        if (skip >= len) {
            skip -= len;
            continue;
        }
        s0 += skip;
        len -= skip;
        skip = 0;
        if (len > need)
            len = need;
        memcpy(dst + j, pl->S + s0, (size_t)len * sizeof *dst);
        j += len;
        need -= len;
    }
    if (pl->take[r] < q)
        qsort(dst, (size_t)q, sizeof *dst, cmp_i64);
}

/* One trainer's IDs ('all' 0: into *out, *nout) or every trainer's ('all'
 * 1: into *out, offsets). */
static gkv_err
split(const gkv_pbook *b, int k, int t, const uint8_t *mask,
      const int64_t *ids, size_t n, int T, int all, int rank, int64_t **out,
      size_t *nout, size_t *offsets)
{
    const struct pb_type *ty = check_type(b, k, t, 0, 0, "split");
    struct plan pl = {0};
    int64_t *res = NULL;
    size_t total;
    gkv_err rc;

    if (ty == NULL)
        return GKV_EINVAL;
    if (out == NULL || (all ? offsets == NULL : nout == NULL))
        return pb_fail(b, GKV_EINVAL, "split: NULL output");
    *out = NULL;
    if ((mask != NULL && ids != NULL) ||
        (mask == NULL && ids == NULL && n > 0))
        return pb_fail(b, GKV_EINVAL, "split: pass exactly one of a mask "
                       "and an ID list");
    if (T < 1)
        return pb_fail(b, GKV_EINVAL, "split: %d trainers", T);
    if (!all && (rank < 0 || rank >= T))
        return pb_fail(b, GKV_EINVAL, "split: rank %d of %d trainers",
                       rank, T);
    if ((rc = plan_make(b, k, ty, mask, ids, n, T, &pl)) != GKV_OK)
        goto out;
    total = all ? pl.M : (size_t)pl.quota[rank];
    if (total > 0 && (res = gkv__malloc(total * sizeof *res)) == NULL) {
        rc = GKV_ENOMEM;
        goto out;
    }
    if (!all) {
        plan_emit(&pl, b->pb_nparts, rank, res);
        *nout = total;
    } else {
        offsets[0] = 0;
        for (int r = 0; r < T; r++) {
            plan_emit(&pl, b->pb_nparts, r, res + offsets[r]);
            offsets[r + 1] = offsets[r] + (size_t)pl.quota[r];
        }
    }
    *out = res;
    res = NULL;
    rc = GKV_OK;
out:
    if (rc == GKV_ENOMEM)
        pb_fail(b, rc, "split: out of memory");
    plan_free(&pl);
    gkv__free(res);
    return rc;
}

gkv_err
gkv_pbook_node_split(const gkv_pbook *b, int ntype, const uint8_t *mask,
                     const int64_t *ids, size_t n, int num_trainers,
                     int rank, int64_t **out, size_t *nout)
{
    return split(b, PB_NODES, ntype, mask, ids, n, num_trainers, 0, rank, out,
                 nout, NULL);
}

gkv_err
gkv_pbook_edge_split(const gkv_pbook *b, int etype, const uint8_t *mask,
                     const int64_t *ids, size_t n, int num_trainers,
                     int rank, int64_t **out, size_t *nout)
{
    return split(b, PB_EDGES, etype, mask, ids, n, num_trainers, 0, rank, out,
                 nout, NULL);
}

gkv_err
gkv_pbook_node_split_all(const gkv_pbook *b, int ntype, const uint8_t *mask,
                         const int64_t *ids, size_t n, int num_trainers,
                         int64_t **out, size_t *offsets)
{
    return split(b, PB_NODES, ntype, mask, ids, n, num_trainers, 1, 0, out,
                 NULL, offsets);
}

gkv_err
gkv_pbook_edge_split_all(const gkv_pbook *b, int etype, const uint8_t *mask,
                         const int64_t *ids, size_t n, int num_trainers,
                         int64_t **out, size_t *offsets)
{
    return split(b, PB_EDGES, etype, mask, ids, n, num_trainers, 1, 0, out,
                 NULL, offsets);
}
