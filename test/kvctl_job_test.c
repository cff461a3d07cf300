/* kvctl_job_test.c - kvctl --ip-config FILE against a whole job of real
 * gkv-server processes on loopback, started and killed by PID:
 *   - a graph partitioned by gkv-partition into 2 partitions, 2 servers
 *     per machine: export of a node feature is the concatenation of the
 *     partitions' rows, and with --orig-ids byte for byte the .npy given
 *     to the partitioner; ls, info, get and stat see the whole job; a
 *     feature that one partition lacks is refused;
 *   - a plain store per machine (2 machines, a token): export is the
 *     original file byte for byte; a tensor on one machine only is whole;
 *     IDs that no machine holds and servers that disagree on a tensor's
 *     rows are refused, naming the machines, and leave no file;
 *   - a server killed: a quick error naming it, no file left;
 *   - a missing tensor, a missing or malformed ip_config, bad usage. */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <jansson.h>
#include "gkvt.h"
#include "gkvt_kvctl.h"
#include "gkv.h"

#define MAXPROC 8
#define NN      200     /* graph nodes */
#define FW      5       /* floats per graph feature row */
#define EW      3       /* floats per row of the plain tensor 'emb' */
#define EN      100     /* its rows: [0, 40) on machine 0, [40, 100) on 1 */

struct fx {
    char *dir;
    char cfg[4200];     /* the ip_config */
    int base, nmach, nserv;
    struct gkvt_proc p[MAXPROC];
    int np;
    char *out, *err;    /* of the last kvctl run */
};

static int
setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);

    if (f == NULL || (f->dir = gkvt_mkdtemp("kvctl-job")) == NULL)
        return -1;
    snprintf(f->cfg, sizeof f->cfg, "%s/ip.cfg", f->dir);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fx *f = *state;
    int dirty = gkvt_proc_reap_all(f->p, f->np);

    free(f->out);
    free(f->err);
    gkvt_rmtree(f->dir);
    free(f);
    return dirty ? -1 : 0;
}

/* Runs kvctl with the arguments (NULL-terminated); stdout and stderr in
 * f->out and f->err; returns the exit status. */
/* DIR/NAME of the test's directory (gkvt_path). */
static char *
path(struct fx *f, const char *name)
{
    return gkvt_path(f->dir, name);
}

static void
has(const char *text, const char *needle)
{
    gkvt_expect_has(text, needle);
}

static int
kv(struct fx *f, ...)
{
    va_list ap;
    int rc;

    va_start(ap, f);
    rc = gkvt_toolv("kvctl", &f->out, &f->err, ap);
    va_end(ap);
    return rc;
}

/* kvctl must exit with 'want'; else a failure showing what it said. */
#define KV(f, want, ...) do {                                             \
        int rc_ = kv(f, __VA_ARGS__);                                     \
        if (rc_ != (want))                                                \
            fail_msg("kvctl exit %d, want %d\nstdout: %s\nstderr: %s",    \
                     rc_, (want), (f)->out, (f)->err);                    \
    } while (0)

/* Nothing in f->dir whose name starts with 'base' (FILE, FILE.tmp-PID). */
static void
no_file(struct fx *f, const char *base)
{
    DIR *dp = opendir(f->dir);
    struct dirent *de;

    assert_non_null(dp);
    while ((de = readdir(dp)) != NULL)
        if (strncmp(de->d_name, base, strlen(base)) == 0)
            fail_msg("'%s' left in %s", de->d_name, f->dir);
    closedir(dp);
}

/* An f32 .npy of n x w values v (the header gkv writes, as kvctl's). */
static void
write_npy(const char *p, gkv_dtype dt, const void *v, uint64_t n, uint64_t w)
{
    uint64_t shape[2] = {n, w};
    size_t len = n * w * gkv_dtype_size(dt);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);

    assert_true(fd >= 0);
    GKVT_OK(gkv_npy_write_header(fd, dt, 2, shape, NULL, NULL, 0));
    assert_int_equal(write(fd, v, len), (ssize_t)len);
    close(fd);
}

static float *
make_rows(uint64_t n, uint64_t w, uint64_t seed)
{
    float *v = malloc(n * w * sizeof *v);

    for (uint64_t i = 0; i < n * w; i++)
        v[i] = (float)((i * 2654435761u + seed * 97) % 100003) / 7.0f - 3.5f;
    return v;
}

/* ---- servers ------------------------------------------------------------ */

static void
write_cfg(struct fx *f)
{
    FILE *fp = fopen(f->cfg, "w");

    assert_non_null(fp);
    fprintf(fp, "# the job of kvctl_job_test\n");
    for (int m = 0; m < f->nmach; m++)
        fprintf(fp, "127.0.0.1 %d\n", f->base + 8 * m);
    fclose(fp);
}

/* Starts server k of machine m: of store DIR/st<m>, or of partition m of
 * 'part_json' when given; extra: NULL-terminated arguments. NULL when its
 * port was taken. */
static struct gkvt_proc *
server_try(struct fx *f, int m, int k, const char *part_json,
           const char *const *extra)
{
    char *argv[32], ms[16], ks[16], ns[16], logname[64], st[4200];
    int n = 0;

    snprintf(ms, sizeof ms, "%d", m);
    snprintf(ks, sizeof ks, "%d", k);
    snprintf(ns, sizeof ns, "%d", f->nserv);
    snprintf(logname, sizeof logname, "server-m%d-s%d.log", m, k);
    snprintf(st, sizeof st, "%s/st%d", f->dir, m);
    argv[n++] = (char *)gkvt_prog("gkv-server");
    if (part_json != NULL) {
        argv[n++] = "--part-config";
        argv[n++] = (char *)part_json;
        argv[n++] = "--part-id";
    } else {
        argv[n++] = "--store";
        argv[n++] = st;
        argv[n++] = "--machine";
    }
    argv[n++] = ms;
    argv[n++] = "--ip-config";
    argv[n++] = f->cfg;
    argv[n++] = "--server-id";
    argv[n++] = ks;
    argv[n++] = "--num-servers";
    argv[n++] = ns;
    argv[n++] = "--nosync";
    for (int i = 0; extra != NULL && extra[i] != NULL && n < 30; i++)
        argv[n++] = (char *)extra[i];
    argv[n] = NULL;
    {
        struct gkvt_proc *p = gkvt_spawn(f->p, &f->np, MAXPROC, f->dir, argv,
                                         logname);
        return gkvt_server_listening(p) ? p : NULL;
    }
}

static void
serve(struct fx *f, int nmach, int nserv, const char *part_json,
      const char *const *extra)
{
    f->nmach = nmach;
    f->nserv = nserv;
    for (int attempt = 0; attempt < 20; attempt++) {
        int clash = 0;

        f->base = gkvt_port_base(8 * nmach);
        write_cfg(f);
        for (int m = 0; m < nmach && !clash; m++)
            for (int k = 0; k < nserv && !clash; k++)
                clash = server_try(f, m, k, part_json, extra) == NULL;
        if (!clash)
            return;
        for (int i = 0; i < f->np; i++)
            gkvt_proc_kill(&f->p[i]);
        f->np = 0;
    }
    fail_msg("could not find free ports in 20 tries");
}

/* The server process of machine m, server k (serve() starts them in
 * order). */
static struct gkvt_proc *
server_of(struct fx *f, int m, int k)
{
    return &f->p[m * f->nserv + k];
}

/* All rows of 'name' in store 'st', read in this process; *d gets it. */
static unsigned char *
store_rows(const char *st, const char *name, gkv_tensor_desc *d)
{
    gkv_store *s;
    unsigned char *b;
    size_t len;

    GKVT_OK(gkv_store_open(&s, st, GKV_RDONLY, NULL));
    GKVT_OK(gkv_tensor_info(s, NULL, name, d));
    len = (d->hi - d->lo) * d->row_bytes;
    b = malloc(len ? len : 1);
    GKVT_OK(gkv_tensor_read(s, NULL, name, d->lo, d->hi, b, len));
    gkv_store_close(s);
    return b;
}

/* ---- a partitioned graph ---------------------------------------------------- */

/* gkv-partition of a random graph of NN nodes with the node feature
 * DIR/feat.npy (NN x FW f32) into 2 random partitions under DIR/g;
 * returns the feature's rows. */
static float *
partition(struct fx *f)
{
    float *feat = make_rows(NN, FW, 1);

    write_npy(path(f, "feat.npy"), GKV_F32, feat, NN, FW);
    gkvt_partition_random(f->dir, NN, 4 * NN, 7, path(f, "feat.npy"));
    return feat;
}

/* Files a and b (names under the fixture's directory) hold the same bytes. */
static void
same_files(struct fx *f, const char *a, const char *b)
{
    gkvt_expect_same_files(path(f, a), path(f, b));
}

/* export of a node feature from 2 machines x 2 servers: the partitions'
 * rows in ID order; with --orig-ids, the partitioner's input file byte for
 * byte; the whole job in ls, info, get and stat; a feature only one
 * partition holds is refused. */
static void
test_graph_job(void **state)
{
    struct fx *f = *state;
    const char *name = "node/_N/feat";
    gkv_tensor_desc d0, d1;
    unsigned char *r0, *r1, *got, *want, hdr[256];
    uint64_t shape[2] = {NN, FW};
    size_t glen, wlen, hl, rb = FW * sizeof(float);
    float *feat = partition(f), *extra;
    char json[4200], part0[4200], extra_npy[4200], line[128];
    json_t *j, *a;
    uint64_t sum = 0;

    snprintf(json, sizeof json, "%s/g/graph.json", f->dir);
    snprintf(part0, sizeof part0, "%s/g/part-0", f->dir);
    /* a second feature, in partition 0's store only: as if partition 1
     * had been written without it */
    r0 = store_rows(part0, name, &d0);
    free(r0);
    extra = make_rows(d0.hi - d0.lo, 2, 9);
    snprintf(extra_npy, sizeof extra_npy, "%s/extra.npy", f->dir);
    write_npy(extra_npy, GKV_F32, extra, d0.hi - d0.lo, 2);
    free(extra);
    KV(f, 0, part0, "import", "node/_N/half", extra_npy, NULL);

    serve(f, 2, 2, json, NULL);
    r0 = store_rows(part0, name, &d0);
    snprintf(part0, sizeof part0, "%s/g/part-1", f->dir);
    r1 = store_rows(part0, name, &d1);
    /* random partitions split the nodes; partition 0 has the low IDs */
    assert_int_equal(d0.lo, 0);
    assert_int_equal(d0.hi, d1.lo);
    assert_int_equal(d1.hi, NN);
    assert_true(d0.hi > 0 && d0.hi < NN);

    /* export: the header, then partition 0's rows, then partition 1's */
    KV(f, 0, "--ip-config", f->cfg, "export", name,
                        path(f, "out.npy"), NULL);
    assert_string_equal(f->err, "");
    GKVT_OK(gkv_npy_header_format(GKV_F32, 2, shape, hdr, sizeof hdr, &hl,
                                  NULL, 0));
    got = gkvt_read_file(path(f, "out.npy"), &glen);
    assert_int_equal(glen, hl + NN * rb);
    assert_memory_equal(got, hdr, hl);
    assert_memory_equal(got + hl, r0, (d0.hi - d0.lo) * rb);
    assert_memory_equal(got + hl + (d0.hi - d0.lo) * rb, r1,
                        (d1.hi - d1.lo) * rb);
    /* random partitioning renumbers: not the input order */
    assert_true(memcmp(got + hl, feat, NN * rb) != 0);
    free(got);

    /* --orig-ids: back in original order, the partitioner's input exactly */
    KV(f, 0, "--ip-config", f->cfg, "export", name,
                        path(f, "orig.npy"), "--orig-ids",
                        path(f, "g/mapping/node-_N.npy"), NULL);
    same_files(f, "orig.npy", "feat.npy");

    /* import --orig-ids: a file in original order lands at the new IDs,
     * as a new tensor split by the book and over an existing one; without
     * it the rows would sit at the wrong IDs */
    KV(f, 0, "--ip-config", f->cfg, "import", "node/_N/again",
                        path(f, "feat.npy"), "--orig-ids",
                        path(f, "g/mapping/node-_N.npy"), NULL);
    KV(f, 0, "--ip-config", f->cfg, "export", "node/_N/again",
                        path(f, "again.npy"), NULL);
    got = gkvt_read_file(path(f, "again.npy"), &glen);
    want = gkvt_read_file(path(f, "out.npy"), &wlen);
    assert_int_equal(glen, wlen);
    assert_memory_equal(got, want, wlen);
    free(got);
    KV(f, 0, "--ip-config", f->cfg, "put", "node/_N/again", "5",
                        "1,2,3,4,5", NULL);
    KV(f, 0, "--ip-config", f->cfg, "import", "node/_N/again",
                        path(f, "feat.npy"), "--orig-ids",
                        path(f, "g/mapping/node-_N.npy"), "--replace", NULL);
    KV(f, 0, "--ip-config", f->cfg, "export", "node/_N/again",
                        path(f, "again.npy"), NULL);
    got = gkvt_read_file(path(f, "again.npy"), &glen);
    assert_int_equal(glen, wlen);
    assert_memory_equal(got, want, wlen);
    free(got);
    free(want);
    {   /* rows wide enough that the import takes several batches
         * (about 8 MiB each): each batch's rows at their own IDs, so the
         * export in original order gives the file back */
        enum { WIDE = 12000 };
        float *wide = make_rows(NN, WIDE, 4);

        write_npy(path(f, "wide.npy"), GKV_F32, wide, NN, WIDE);
        free(wide);
        KV(f, 0, "--ip-config", f->cfg, "import", "node/_N/wide",
           path(f, "wide.npy"), "--orig-ids",
           path(f, "g/mapping/node-_N.npy"), NULL);
        KV(f, 0, "--ip-config", f->cfg, "export", "node/_N/wide",
           path(f, "wide2.npy"), "--orig-ids",
           path(f, "g/mapping/node-_N.npy"), NULL);
        same_files(f, "wide2.npy", "wide.npy");
        KV(f, 0, "--ip-config", f->cfg, "rm", "node/_N/wide", NULL);
    }
    /* the mapping of another type (fewer entries): refused, nothing sent */
    write_npy(path(f, "short.npy"), GKV_I64, (int64_t[3]){0, 1, 2}, 3, 1);
    KV(f, 1, "--ip-config", f->cfg, "import", "node/_N/again",
                        path(f, "feat.npy"), "--orig-ids", path(f, "short.npy"),
                        "--replace", NULL);
    has(f->err, "has 3 entries, but");

    /* ls and info: the whole job's rows, machine by machine */
    KV(f, 0, "--ip-config", f->cfg, "ls", NULL);
    snprintf(line, sizeof line, "%s\tf32\t%dx%d\t[0,%d)\t", name, NN, FW, NN);
    has(f->out, line);
    has(f->out, "\t2/2\n");
    has(f->out, "MACHINES");
    KV(f, 0, "--ip-config", f->cfg, "info", name, NULL);
    snprintf(line, sizeof line, "rows:        %d\n", NN);
    has(f->out, line);
    has(f->out, "machines:    2 of 2 hold it\n");
    snprintf(line, sizeof line, "  machine 1: 127.0.0.1:%d [%llu, %d) %llu rows\n",
             f->base + 8, (unsigned long long)d1.lo, NN,
             (unsigned long long)(d1.hi - d1.lo));
    has(f->out, line);
    KV(f, 0, "--json", "--ip-config", f->cfg, "info", name, NULL);
    j = gkvt_json_parse(f->out);
    assert_int_equal(json_integer_value(json_object_get(j, "rows")), NN);
    a = json_object_get(j, "machines");
    assert_int_equal(json_array_size(a), 2);
    for (size_t i = 0; i < 2; i++)
        sum += (uint64_t)json_integer_value(json_object_get(json_array_get(a, i),
                                                            "rows"));
    assert_int_equal(sum, NN);
    assert_int_equal(json_array_size(json_object_get(j, "gaps")), 0);
    json_decref(j);

    /* get: rows of both partitions, through the routing client */
    snprintf(line, sizeof line, "0,%d", NN - 1);
    KV(f, 0, "--ip-config", f->cfg, "get", name, line, NULL);
    {
        char *p = f->out;
        float v;
        assert_int_equal(strncmp(p, "0:", 2), 0);
        p += 2;
        for (int c = 0; c < FW; c++) {
            v = strtof(p, &p);
            assert_true(v == ((float *)r0)[c]);
        }
    }
    /* stat: every server of the job */
    KV(f, 0, "--json", "--ip-config", f->cfg, "stat", NULL);
    j = gkvt_json_parse(f->out);
    assert_int_equal(json_array_size(json_object_get(j, "servers")), 4);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(
        json_object_get(j, "servers"), 3), "machine")), 1);
    json_decref(j);
    KV(f, 0, "--ip-config", f->cfg, "stat", NULL);
    snprintf(line, sizeof line, "127.0.0.1:%d (machine 1, server 1 of 2",
             f->base + 9);
    has(f->out, line);

    /* the feature only partition 0 holds: not the whole node type */
    KV(f, 1, "--ip-config", f->cfg, "export", "node/_N/half",
                        path(f, "half.npy"), NULL);
    has(f->err, "tensor 'node/_N/half' is inconsistent across the job");
    has(f->err, "nodes of type '_N' need rows [0, 200)");
    snprintf(line, sizeof line, "machine 1 at 127.0.0.1:%d none", f->base + 8);
    has(f->err, line);
    no_file(f, "half.npy");
    KV(f, 0, "--ip-config", f->cfg, "info", "node/_N/half", NULL);
    has(f->out, "machines:    1 of 2 hold it\n");
    free(r0);
    free(r1);
    free(feat);
}

/* ---- plain stores ------------------------------------------------------------ */

/* DIR/st0 and DIR/st1 with 'emb' split [0, 40) and [40, EN) (from
 * DIR/emb.npy), 'solo' on machine 1 only, 'gap' [0, 10) and [20, 30),
 * 'mixed' with f32 rows on machine 0 and i64 on machine 1. Returns emb. */
static float *
plain_stores(struct fx *f)
{
    float *emb = make_rows(EN, EW, 2), *small = make_rows(10, EW, 3);
    int64_t ints[10 * EW] = {0};

    write_npy(path(f, "emb.npy"), GKV_F32, emb, EN, EW);
    write_npy(path(f, "emb0.npy"), GKV_F32, emb, 40, EW);
    write_npy(path(f, "emb1.npy"), GKV_F32, emb + 40 * EW, EN - 40, EW);
    write_npy(path(f, "small.npy"), GKV_F32, small, 10, EW);
    write_npy(path(f, "ints.npy"), GKV_I64, ints, 10, EW);
    free(small);
    KV(f, 0, path(f, "st0"), "import", "emb", path(f, "emb0.npy"),
                        NULL);
    KV(f, 0, path(f, "st1"), "import", "emb", path(f, "emb1.npy"),
                        "--lo", "40", NULL);
    KV(f, 0, path(f, "st1"), "import", "solo", path(f, "small.npy"),
                        "--lo", "5", NULL);
    KV(f, 0, path(f, "st0"), "import", "gap", path(f, "small.npy"),
                        NULL);
    KV(f, 0, path(f, "st1"), "import", "gap", path(f, "small.npy"),
                        "--lo", "20", NULL);
    KV(f, 0, path(f, "st0"), "import", "mixed", path(f, "small.npy"),
                        NULL);
    KV(f, 0, path(f, "st1"), "import", "mixed", path(f, "ints.npy"),
                        "--lo", "10", NULL);
    return emb;
}

/* A plain store on each of 2 machines, behind a token: the export is the
 * file the two halves were imported from, byte for byte; a tensor on one
 * machine is whole; IDs no machine holds, or rows the machines disagree
 * on, are refused, naming the machines, with no file left. */
static void
test_plain_job(void **state)
{
    struct fx *f = *state;
    float *emb = plain_stores(f);
    char tok[4200], line[160];
    const char *extra[] = {"--token-file", tok, NULL};
    unsigned char *got, *want, *small;
    size_t glen, wlen, slen;
    int64_t map[EN];

    snprintf(tok, sizeof tok, "%s/token", f->dir);
    gkvt_write_text(tok, "job-secret-0123456789\n", 0600);
    serve(f, 2, 1, NULL, extra);

    /* the servers want the token */
    KV(f, 1, "--ip-config", f->cfg, "export", "emb",
                        path(f, "out.npy"), NULL);
    has(f->err, "requires a token");
    no_file(f, "out.npy");

    KV(f, 0, "--ip-config", f->cfg, "--token-file", tok, "export",
                        "emb", path(f, "out.npy"), NULL);
    assert_string_equal(f->err, "");
    got = gkvt_read_file(path(f, "out.npy"), &glen);
    want = gkvt_read_file(path(f, "emb.npy"), &wlen);
    assert_int_equal(glen, wlen);
    assert_memory_equal(got, want, wlen);
    free(got);

    /* --orig-ids: row i is row map[i] */
    for (int i = 0; i < EN; i++)
        map[i] = (37 * i + 11) % EN;
    {
        uint64_t shape[1] = {EN};
        int fd = open(path(f, "map.npy"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        assert_true(fd >= 0);
        GKVT_OK(gkv_npy_write_header(fd, GKV_I64, 1, shape, NULL, NULL, 0));
        assert_int_equal(write(fd, map, sizeof map), (ssize_t)sizeof map);
        close(fd);
    }
    KV(f, 0, "--ip-config", f->cfg, "--token-file", tok, "export",
                        "emb", path(f, "perm.npy"), "--orig-ids",
                        path(f, "map.npy"), NULL);
    got = gkvt_read_file(path(f, "perm.npy"), &glen);
    assert_int_equal(glen, wlen);
    assert_memory_equal(got, want, 128);
    for (int i = 0; i < EN; i++)
        assert_memory_equal(got + 128 + (size_t)i * EW * 4,
                            emb + map[i] * EW, EW * 4);
    free(got);
    free(want);
    /* --range across the machines' boundary, raw */
    KV(f, 0, "--ip-config", f->cfg, "--token-file", tok, "export",
                        "emb", path(f, "r.raw"), "--raw", "--range", "35:45",
                        NULL);
    got = gkvt_read_file(path(f, "r.raw"), &glen);
    assert_int_equal(glen, 10 * EW * 4);
    assert_memory_equal(got, emb + 35 * EW, glen);
    free(got);

    /* info: both machines' halves */
    KV(f, 0, "--ip-config", f->cfg, "--token-file", tok, "info",
                        "emb", NULL);
    has(f->out, "rows:        100\n");
    has(f->out, "range:       [0, 100)\n");
    snprintf(line, sizeof line, "  machine 0: 127.0.0.1:%d [0, 40) 40 rows\n",
             f->base);
    has(f->out, line);

    /* a tensor on one machine: whole, and no note */
    KV(f, 0, "--ip-config", f->cfg, "--token-file", tok, "export",
                        "solo", path(f, "solo.npy"), NULL);
    assert_string_equal(f->err, "");
    got = gkvt_read_file(path(f, "solo.npy"), &glen);
    small = gkvt_read_file(path(f, "small.npy"), &slen);
    assert_int_equal(glen, slen);
    assert_memory_equal(got, small, slen);
    free(got);
    free(small);

    /* IDs [10, 20) of 'gap' are on no machine: refused, named */
    KV(f, 1, "--ip-config", f->cfg, "--token-file", tok, "export",
                        "gap", path(f, "gap.npy"), NULL);
    has(f->err, "tensor 'gap' is inconsistent across the job: no machine "
                "holds rows [10, 20)");
    snprintf(line, sizeof line, "machine 0 at 127.0.0.1:%d [0, 10), machine 1 "
             "at 127.0.0.1:%d [20, 30)", f->base, f->base + 8);
    has(f->err, line);
    no_file(f, "gap.npy");
    /* the part that is held exports */
    KV(f, 0, "--ip-config", f->cfg, "--token-file", tok, "export",
                        "gap", path(f, "gap.npy"), "--range", "20:30", NULL);
    KV(f, 0, "--ip-config", f->cfg, "--token-file", tok, "info",
                        "gap", NULL);
    has(f->out, "rows:        20\n");
    has(f->out, "  no machine holds [10, 20)\n");

    /* f32 rows on one machine, i64 on the other */
    KV(f, 1, "--ip-config", f->cfg, "--token-file", tok, "export",
                        "mixed", path(f, "mixed.npy"), NULL);
    has(f->err, "tensor 'mixed'");
    has(f->err, "disagree");
    no_file(f, "mixed.npy");
    free(emb);
}

/* A create through the job that one machine refuses (its write-back copy
 * of 8 TB is larger than its memory) leaves the tensor on no machine: the one
 * that made it deletes it again, and a retry is not "exists". Not under
 * a sanitizer, whose allocator aborts on such a request. */
static void
test_job_create_undone(void **state)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    (void)state;
    skip();
#else
    struct fx *f = *state;
    const char *wb[] = {"--writeback", "*", "--create", NULL};
    const char *plain[] = {"--create", NULL};

    f->nmach = 2;
    f->nserv = 1;
    for (int attempt = 0;; attempt++) {
        f->base = gkvt_port_base(16);
        write_cfg(f);
        if (server_try(f, 0, 0, NULL, plain) != NULL &&
            server_try(f, 1, 0, NULL, wb) != NULL)
            break;
        for (int i = 0; i < f->np; i++)
            gkvt_proc_kill(&f->p[i]);
        f->np = 0;
        if (attempt == 20)
            fail_msg("no free ports");
    }
    KV(f, 1, "--ip-config", f->cfg, "create", "huge", "--dtype", "f32",
       "--shape", "1024", "--range", "0:2000000000", NULL);
    has(f->err, "create tensor 'huge'");
    KV(f, 0, "--ip-config", f->cfg, "ls", NULL);
    if (strstr(f->out, "huge") != NULL)
        fail_msg("left behind:\n%s", f->out);
    KV(f, 1, "--ip-config", f->cfg, "create", "huge", "--dtype", "f32",
       "--shape", "1024", "--range", "0:2000000000", NULL);
    if (strstr(f->err, "already exists") != NULL)
        fail_msg("the retry found it: %s", f->err);
#endif
}

/* Exports NAME through the job to DIR/FILE and returns its rows (past
 * the .npy header) in a malloc'd buffer of *len bytes. */
static unsigned char *
job_export(struct fx *f, const char *name, const char *file, size_t *len)
{
    unsigned char *b, *rows;
    gkv_npy_header h;
    size_t n;

    KV(f, 0, "--ip-config", f->cfg, "export", name, path(f, file), NULL);
    b = gkvt_read_file(path(f, file), &n);
    GKVT_OK(gkv_npy_parse(b, n, n, &h, NULL, 0));
    *len = n - h.data_offset;
    rows = malloc(*len + 1);
    memcpy(rows, b + h.data_offset, *len);
    free(b);
    return rows;
}

/* Changes through the whole job: import of a file over a tensor split
 * across the machines (each store holds its rows of the file afterwards),
 * of a new tensor (created split, removed again when refused), of a
 * checkpointed optimizer state after reset-opt (the export matches the
 * checkpoint byte for byte); put, create and rm; bad files, a tensor
 * with rows no machine holds and an existing tensor without --replace
 * are refused before any row changes. */
static void
test_job_writes(void **state)
{
    struct fx *f = *state;
    float *emb = plain_stores(f), *upd = make_rows(EN, EW, 9);
    unsigned char *got, *ck, *m0, *m1;
    gkv_tensor_desc d;
    size_t glen, cklen;
    float one[EW];
    char line[200];

    write_npy(path(f, "upd.npy"), GKV_F32, upd, EN, EW);
    write_npy(path(f, "wide.npy"), GKV_F32, upd, EN / 4, EW + 1);
    serve(f, 2, 1, NULL, NULL);

    /* an existing tensor needs --replace; a wrong row shape, rows past
     * the end and rows no machine holds are refused: nothing changes */
    KV(f, 1, "--ip-config", f->cfg, "import", "emb", path(f, "upd.npy"), NULL);
    has(f->err, "give --replace");
    KV(f, 1, "--ip-config", f->cfg, "import", "emb", path(f, "wide.npy"),
       "--replace", NULL);
    has(f->err, "tensor 'emb' has rows of f32 [3]; the file's rows are f32 [4]");
    KV(f, 1, "--ip-config", f->cfg, "import", "emb", path(f, "upd.npy"),
       "--replace", "--lo", "1", NULL);
    has(f->err, "100 rows from ID 1 are not inside tensor 'emb' [0, 100)");
    KV(f, 1, "--ip-config", f->cfg, "import", "gap", path(f, "small.npy"),
       "--replace", "--lo", "5", NULL);
    has(f->err, "import: tensor 'gap' is inconsistent across the job: no "
                "machine holds rows [10, 20)");
    KV(f, 1, "--ip-config", f->cfg, "import", "emb", path(f, "upd.npy"),
       "--replace", "--hot", NULL);
    has(f->err, "apply only when import creates it");
    got = job_export(f, "emb", "e0.npy", &glen);
    assert_int_equal(glen, EN * EW * 4);
    assert_memory_equal(got, emb, glen);
    free(got);

    /* --replace: every machine's store holds its rows of the file */
    KV(f, 0, "--ip-config", f->cfg, "import", "emb", path(f, "upd.npy"),
       "--replace", NULL);
    m0 = store_rows(path(f, "st0"), "emb", &d);
    assert_int_equal(d.hi, 40);
    assert_memory_equal(m0, upd, 40 * EW * 4);
    m1 = store_rows(path(f, "st1"), "emb", &d);
    assert_int_equal(d.lo, 40);
    assert_memory_equal(m1, upd + 40 * EW, (EN - 40) * EW * 4);
    free(m0);
    free(m1);

    /* a new tensor: created split into equal slices, then written */
    KV(f, 0, "--ip-config", f->cfg, "import", "fresh", path(f, "upd.npy"), NULL);
    m0 = store_rows(path(f, "st0"), "fresh", &d);
    assert_true(d.lo == 0 && d.hi == 50);
    assert_memory_equal(m0, upd, 50 * EW * 4);
    m1 = store_rows(path(f, "st1"), "fresh", &d);
    assert_true(d.lo == 50 && d.hi == EN);
    assert_memory_equal(m1, upd + 50 * EW, 50 * EW * 4);
    free(m0);
    free(m1);

    /* optimizer state: push with adam, checkpoint m, reset, restore */
    for (int i = 0; i < EW; i++)
        one[i] = 0.5f * (float)(i + 1);
    snprintf(line, sizeof line, "%g,%g,%g", one[0], one[1], one[2]);
    KV(f, 0, "--ip-config", f->cfg, "put", "emb", "7", line, "--handler",
       "adam", "--lr", "0.1", NULL);
    KV(f, 0, "--ip-config", f->cfg, "put", "emb", "77", line, "--handler",
       "adam", "--lr", "0.1", NULL);
    ck = job_export(f, "emb#adam_m", "m.npy", &cklen);
    assert_int_equal(cklen, EN * EW * 4);
    /* m = (1 - b1) g = 0.1 g at the pushed rows, 0 elsewhere */
    for (int r = 0; r < EN; r++)
        for (int i = 0; i < EW; i++) {
            float v;
            memcpy(&v, ck + ((size_t)r * EW + i) * 4, 4);
            if (r == 7 || r == 77)
                assert_float_equal(v, 0.1f * one[i], 1e-6);
            else
                assert_true(v == 0.0f);
        }
    KV(f, 0, "--ip-config", f->cfg, "reset-opt", "emb", NULL);
    got = job_export(f, "emb#adam_m", "m-reset.npy", &glen);
    for (size_t i = 0; i < glen; i++)
        assert_int_equal(got[i], 0);
    free(got);
    KV(f, 0, "--ip-config", f->cfg, "import", "emb#adam_m", path(f, "m.npy"),
       NULL);
    got = job_export(f, "emb#adam_m", "m-back.npy", &glen);
    assert_int_equal(glen, cklen);
    assert_memory_equal(got, ck, cklen);
    free(got);
    free(ck);
    KV(f, 2, "--ip-config", f->cfg, "reset-opt", "emb", "sgd", NULL);
    /* servers list no state: info says so rather than "none" */
    KV(f, 0, "--ip-config", f->cfg, "info", "emb", NULL);
    has(f->out, "state:       (servers do not list it: get or export "
                "emb#adagrad_s");
    KV(f, 0, "--json", "--ip-config", f->cfg, "info", "emb", NULL);
    {
        json_t *j = gkvt_json_parse(f->out);
        assert_true(json_is_null(json_object_get(j, "state_tensors")));
        json_decref(j);
    }
    KV(f, 1, "--ip-config", f->cfg, "reset-opt", "nope", NULL);
    has(f->err, "no server holds tensor 'nope'");

    /* create, get, rm; rm of what no server holds names it */
    KV(f, 0, "--ip-config", f->cfg, "create", "c", "--dtype", "f32",
       "--range", "0:10", "--init", "const:1.5", NULL);
    KV(f, 1, "--ip-config", f->cfg, "create", "c", "--dtype", "f32",
       "--range", "0:10", NULL);
    has(f->err, "already exists");
    KV(f, 0, "--ip-config", f->cfg, "get", "c", "0,9", NULL);
    assert_string_equal(f->out, "0: 1.5\n9: 1.5\n");
    KV(f, 0, "--ip-config", f->cfg, "info", "c", NULL);
    snprintf(line, sizeof line, "  machine 1: 127.0.0.1:%d [5, 10) 5 rows\n",
             f->base + 8);
    has(f->out, line);
    KV(f, 0, "--ip-config", f->cfg, "rm", "c", NULL);
    KV(f, 1, "--ip-config", f->cfg, "rm", "c", NULL);
    has(f->err, "no server holds tensor 'c'");
    KV(f, 1, "--ip-config", f->cfg, "rm", "emb#adam_m", NULL);
    has(f->err, "reset-opt drops it");
    KV(f, 2, "--ip-config", f->cfg, "rename", "emb", "x", NULL);
    has(f->err, "rename: not available with --ip-config");

    /* --orig-ids over a tensor with a hole no machine holds: the mapping
     * skips the hole, so every row has a home */
    {
        float g20[20 * EW];
        int64_t gmap[20];
        for (int i = 0; i < 20; i++) {
            gmap[i] = i < 10 ? 29 - i : 9 - (i - 10);   /* [20,30) then [0,10) */
            for (int k = 0; k < EW; k++)
                g20[i * EW + k] = (float)(100 * i + k);
        }
        write_npy(path(f, "g20.npy"), GKV_F32, g20, 20, EW);
        write_npy(path(f, "gmap.npy"), GKV_I64, gmap, 20, 1);
        KV(f, 0, "--ip-config", f->cfg, "import", "gap", path(f, "g20.npy"),
           "--orig-ids", path(f, "gmap.npy"), "--replace", NULL);
        KV(f, 0, "--ip-config", f->cfg, "get", "gap", "29,0", NULL);
        assert_string_equal(f->out, "29: 0 1 2\n0: 1900 1901 1902\n");
        gmap[3] = 15;                   /* in the hole */
        write_npy(path(f, "gmap2.npy"), GKV_I64, gmap, 20, 1);
        KV(f, 1, "--ip-config", f->cfg, "import", "gap", path(f, "g20.npy"),
           "--orig-ids", path(f, "gmap2.npy"), "--replace", NULL);
        has(f->err, "new ID 15 (of the file's row 3) is held by no machine");
    }

    /* a step count the servers would refuse, in machine 1's rows: refused
     * before a row is sent, so machine 0's rows stay as they were */
    {
        int64_t steps[EN];
        uint64_t shape[1] = {EN};
        int fd;

        for (int i = 0; i < EN; i++)
            steps[i] = i == 70 ? -1 : 5;
        fd = open(path(f, "t.npy"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        assert_true(fd >= 0);
        GKVT_OK(gkv_npy_write_header(fd, GKV_I64, 1, shape, NULL, NULL, 0));
        assert_int_equal(write(fd, steps, sizeof steps), (ssize_t)sizeof steps);
        close(fd);
        KV(f, 0, "--ip-config", f->cfg, "get", "emb#adam_t", "3,77", NULL);
        assert_string_equal(f->out, "3: 0\n77: 0\n");
        KV(f, 1, "--ip-config", f->cfg, "import", "emb#adam_t", path(f, "t.npy"),
           NULL);
        has(f->err, "row 70 holds step count -1");
        KV(f, 0, "--ip-config", f->cfg, "get", "emb#adam_t", "3,77", NULL);
        assert_string_equal(f->out, "3: 0\n77: 0\n");
    }
    free(emb);
    free(upd);
}

/* A server of the job is down: every command fails at once, naming it
 * (not after a handshake's timeout), and export leaves no file. */
static void
test_server_down(void **state)
{
    struct fx *f = *state;
    char line[160];
    double t0;

    free(plain_stores(f));
    serve(f, 2, 2, NULL, NULL);
    KV(f, 0, "--ip-config", f->cfg, "ls", NULL);
    has(f->out, "emb\tf32\t100x3\t[0,100)\t");

    gkvt_proc_kill(server_of(f, 1, 1));
    t0 = tools__now_s();
    KV(f, 1, "--ip-config", f->cfg, "export", "emb",
                        path(f, "out.npy"), NULL);
    assert_true(tools__now_s() - t0 < 5);
    snprintf(line, sizeof line, "server 1 of machine 1 at 127.0.0.1:%d", f->base + 9);
    has(f->err, line);
    has(f->err, "is down");
    has(f->err, "line 3");
    no_file(f, "out.npy");

    gkvt_proc_kill(server_of(f, 0, 0));
    KV(f, 1, "--ip-config", f->cfg, "info", "emb", NULL);
    snprintf(line, sizeof line, "server 0 of machine 0 at 127.0.0.1:%d", f->base);
    has(f->err, line);
    assert_string_equal(f->out, "");
}

/* A tensor no server holds: exit 1, named, no file. */
static void
test_missing_tensor(void **state)
{
    struct fx *f = *state;

    free(plain_stores(f));
    serve(f, 2, 1, NULL, NULL);
    KV(f, 1, "--ip-config", f->cfg, "export", "nope",
                        path(f, "out.npy"), NULL);
    has(f->err, "tensor 'nope'");
    has(f->err, "no server holds tensor 'nope'");
    no_file(f, "out.npy");
    KV(f, 1, "--ip-config", f->cfg, "info", "nope", NULL);
    has(f->err, "no such tensor");
    KV(f, 1, "--ip-config", f->cfg, "get", "nope", "1", NULL);
    has(f->err, "tensor 'nope'");
}

/* A missing or malformed ip_config, and usage errors: before any server
 * is asked. */
static void
test_bad_ip_config(void **state)
{
    struct fx *f = *state;

    KV(f, 1, "--ip-config", path(f, "none.cfg"), "export", "emb",
                        path(f, "out.npy"), NULL);
    has(f->err, "ip_config '");
    has(f->err, "none.cfg': cannot read it");
    has(f->err, "No such file or directory");
    no_file(f, "out.npy");
    gkvt_write_text(path(f, "bad.cfg"), "127.0.0.1 30050\n10.0.0.2 port\n", 0644);
    KV(f, 1, "--ip-config", path(f, "bad.cfg"), "ls", NULL);
    has(f->err, "bad.cfg:2:");
    gkvt_write_text(path(f, "empty.cfg"), "# nothing\n", 0644);
    KV(f, 1, "--ip-config", path(f, "empty.cfg"), "ls", NULL);
    has(f->err, "empty.cfg");
    /* usage: exit 2 */
    KV(f, 2, "--ip-config", path(f, "bad.cfg"), "verify", NULL);
    has(f->err, "verify: not available with --ip-config");
    KV(f, 2, "--ip-config", path(f, "bad.cfg"), NULL);
    has(f->err, "missing COMMAND after --ip-config");
    KV(f, 2, "--ip-config", path(f, "bad.cfg"), "--server",
                        "127.0.0.1:1", "ls", NULL);
    has(f->err, "--server and --ip-config do not go together");
    KV(f, 2, "--ip-config", "", "ls", NULL);
    has(f->err, "empty --ip-config path");
    KV(f, 2, "--ip-config", path(f, "bad.cfg"), "ls", "--all",
                        NULL);
    /* --help says so */
    KV(f, 0, "--help", NULL);
    has(f->out, "--ip-config FILE");
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_graph_job, setup, teardown),
        cmocka_unit_test_setup_teardown(test_plain_job, setup, teardown),
        cmocka_unit_test_setup_teardown(test_job_writes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_job_create_undone, setup, teardown),
        cmocka_unit_test_setup_teardown(test_server_down, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_tensor, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_ip_config, setup, teardown),
    };

    return cmocka_run_group_tests_name("kvctl --ip-config", tests, NULL, NULL);
}
