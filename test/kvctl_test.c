/* kvctl_test.c - build/kvctl run as a process on real temporary stores:
 * every command, each ID syntax, --json read back with jansson, exit
 * statuses, bad input files, corruption found by verify, and imports and
 * exports stopped by signals that must leave the store and the directory
 * exactly as they were; and kvctl --server against a real gkv-server
 * process, which kvctl (an observer) must never stop by leaving, down to
 * export through the server (with --orig-ids) byte for byte. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/mount.h>
#include <sys/select.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <jansson.h>
#include "gkvt.h"
#include "gkv.h"
#include "idlist.h"
#include "util.h"

#define W 16            /* row width of the f32 test tensor */
#define N 3000          /* its rows */

struct fx {
    char *dir;
    char st[4096];      /* the store: DIR/st */
    char *out, *err;    /* of the last run */
    pid_t srv;          /* a gkv-server this test started, or 0 */
};

static int
setup(void **state)
{
    struct fx *f;

    if (gkvt_dir_setup(state, sizeof *f, "kvctl") != 0)
        return -1;
    f = *state;
    snprintf(f->st, sizeof f->st, "%s/st", f->dir);
    return 0;
}

static int
teardown(void **state)
{
    struct fx *f = *state;

    if (f->srv > 0) {
        kill(f->srv, SIGKILL);
        waitpid(f->srv, NULL, 0);
    }
    free(f->out);
    free(f->err);
    {   /* a test's tmpfs, should it have failed with it mounted */
        char mnt[4200];
        snprintf(mnt, sizeof mnt, "%s/mnt", f->dir);
        umount(mnt);
    }
    gkvt_rmtree(f->dir);
    free(f);
    return 0;
}

/* Runs kvctl with the given arguments (NULL-terminated); keeps stdout and
 * stderr in f->out and f->err; returns the exit status. */
/* DIR/NAME of the test's directory (gkvt_path). */
static char *
path(struct fx *f, const char *name)
{
    return gkvt_path(f->dir, name);
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

static int
exists(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0;
}

/* The header np.save writes, built here by hand the way numpy's format.py
 * does: the dict, spaces, '\n', 128 bytes in all for these shapes. */
static size_t
npy_header(unsigned char *b, const char *descr, const char *shape)
{
    char dict[128];
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': "
                     "False, 'shape': %s, }", descr, shape);

    assert_true(n > 0 && n < 117);
    memcpy(b, "\x93NUMPY\x01\x00\x76\x00", 10);
    memcpy(b + 10, dict, (size_t)n);
    memset(b + 10 + n, ' ', (size_t)(117 - n));
    b[127] = '\n';
    return 128;
}

static float
val(uint64_t r, uint64_t c)
{
    return (float)(r * 1000 + c) + 0.25f - (float)((r + c) % 3);
}

/* Writes an n x w f32 .npy of val(row + seed, col); returns its rows. */
static float *
write_npy_f32(const char *p, uint64_t n, uint64_t w, uint64_t seed)
{
    size_t hl, len = n * w * sizeof(float);
    unsigned char *b = malloc(128 + len);
    float *v = malloc(len);
    char shape[64];

    snprintf(shape, sizeof shape, "(%llu, %llu)", (unsigned long long)n,
             (unsigned long long)w);
    hl = npy_header(b, "<f4", shape);
    for (uint64_t i = 0; i < n; i++)
        for (uint64_t j = 0; j < w; j++)
            v[i * w + j] = val(i + seed, j);
    memcpy(b + hl, v, len);
    gkvt_write_file(p, b, hl + len);
    free(b);
    return v;
}

/* All rows of tensor 'name' through the C API. */
static unsigned char *
dump(const char *st, const char *name, gkv_tensor_desc *d, size_t *len)
{
    gkv_store *s;
    unsigned char *b;

    GKVT_OK(gkv_store_open(&s, st, GKV_RDONLY, NULL));
    GKVT_OK(gkv_tensor_info(s, NULL, name, d));
    *len = (d->hi - d->lo) * d->row_bytes;
    b = malloc(*len ? *len : 1);
    GKVT_OK(gkv_tensor_read(s, NULL, name, d->lo, d->hi, b, *len));
    gkv_store_close(s);
    return b;
}

static json_t *
parse_json(const char *text)
{
    json_error_t e;
    json_t *j = json_loads(text, 0, &e);

    if (j == NULL)
        fail_msg("bad JSON (%s at line %d): %s", e.text, e.line, text);
    return j;
}

/* The f32 test tensor 'feat' (N x W, val(row, col)) in f->st. */
static float *
make_feat(struct fx *f)
{
    float *v = write_npy_f32(path(f, "feat.npy"), N, W, 0);

    assert_int_equal(kv(f, f->st, "import", "feat", path(f, "feat.npy"), NULL), 0);
    return v;
}

/* Checks one "ID: v0 v1 ..." line against val(). */
static const char *
check_line(const char *line, uint64_t id)
{
    char *end;
    uint64_t got = strtoull(line, &end, 10);

    assert_int_equal(got, id);
    assert_int_equal(*end, ':');
    line = end + 1;
    for (uint64_t c = 0; c < W; c++) {
        float x = strtof(line, &end);
        assert_true(end != line);
        if (x != val(id, c))
            fail_msg("row %llu col %llu: got %.9g, want %.9g",
                     (unsigned long long)id, (unsigned long long)c, x, val(id, c));
        line = end;
    }
    assert_int_equal(*line, '\n');
    return line + 1;
}

static void
check_get(struct fx *f, const uint64_t *ids, size_t n)
{
    const char *p = f->out;

    for (size_t i = 0; i < n; i++)
        p = check_line(p, ids[i]);
    assert_int_equal(*p, '\0');
    assert_string_equal(f->err, "");
}

/* ---- help, usage, exit statuses --------------------------------------- */

static void
test_help_and_version(void **state)
{
    static const char *cmds[] = {"ls", "info", "get", "put", "create", "import",
                                 "export", "rm", "rename", "verify", "stat"};
    struct fx *f = *state;
    char want[64];

    assert_int_equal(kv(f, "--help", NULL), 0);
    assert_non_null(strstr(f->out, "Usage: kvctl [-h|--help] [-V|--version]"));
    assert_string_equal(f->err, "");
    assert_int_equal(kv(f, "-h", NULL), 0);
    assert_non_null(strstr(f->out, "Commands:"));
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        snprintf(want, sizeof want, "STORE %s", cmds[i]);
        /* `kvctl CMD --help` and `kvctl STORE CMD --help` */
        assert_int_equal(kv(f, cmds[i], "--help", NULL), 0);
        assert_non_null(strstr(f->out, want));
        assert_string_equal(f->err, "");
        assert_int_equal(kv(f, f->st, cmds[i], "--help", NULL), 0);
        assert_non_null(strstr(f->out, want));
    }
    assert_int_equal(kv(f, f->st, "import", "-h", NULL), 0);
    assert_non_null(strstr(f->out, "--replace"));
    assert_int_equal(kv(f, "-V", NULL), 0);
    assert_string_equal(f->out, "kvctl (gkv) " GKV_VERSION_STRING "\n");
    assert_int_equal(kv(f, "--version", NULL), 0);
    /* help never touches the store */
    assert_false(exists(f->st));
}

static void
test_usage_errors_exit_2(void **state)
{
    struct fx *f = *state;
    char at_empty[4200];
    float *v = make_feat(f);
    struct {
        const char *a[10];
        const char *msg;
    } t[] = {
        {{NULL}, "missing STORE and COMMAND"},
        {{"ls", NULL}, "missing STORE"},
        {{f->st, NULL}, "missing COMMAND"},
        {{f->st, "frobnicate", NULL}, "unknown command 'frobnicate'"},
        {{"ls", f->st, NULL}, "the store comes first"},
        {{f->st, "ls", "--bogus", NULL}, "unknown option '--bogus'"},
        {{f->st, "ls", "extra", NULL}, "unexpected argument 'extra'"},
        {{f->st, "ls", "--raw", NULL}, "option --raw does not apply"},
        {{f->st, "ls", "--all=1", NULL}, "unknown option '--all=1'"},
        {{f->st, "info", NULL}, "missing arguments"},
        {{f->st, "get", "feat", NULL}, "missing arguments"},
        {{f->st, "get", "feat", "1,,2", NULL}, "empty item"},
        {{f->st, "get", "feat", "1,2,", NULL}, "empty item"},
        {{f->st, "get", "feat", "5:3", NULL}, "'5:3' is not a range"},
        {{f->st, "get", "feat", "5:5", NULL}, "not a range"},
        {{f->st, "get", "feat", "abc", NULL}, "'abc' is not an ID"},
        {{f->st, "get", "feat", "-1", NULL}, "'-1' is not an ID"},
        {{f->st, "get", "feat", "1.5", NULL}, "not an ID"},
        {{f->st, "get", "feat", "99999999999999999999", NULL}, "not an ID"},
        {{f->st, "get", "feat", at_empty, NULL}, "holds no IDs"},
        {{f->st, "put", "feat", "x", "1", NULL}, "'x' is not an ID"},
        {{f->st, "put", "feat", "1", "1,zz", NULL}, "'zz' is not a number"},
        {{f->st, "put", "feat", "1", "1,2,3", NULL}, "rows hold 16 values, got 3"},
        {{f->st, "put", "feat", "1", "1", "--lr", "fast", NULL}, "--lr"},
        {{f->st, "put", "feat", "1", "1", "--lr", "0", NULL}, "--lr '0' is not a positive number"},
        {{f->st, "put", "feat", "1", "1", "--lr", "-1", NULL}, "--lr '-1' is not a positive number"},
        {{f->st, "create", "x", "--range", "0:10", NULL}, "--dtype is required"},
        {{f->st, "create", "x", "--dtype", "f32", NULL}, "--range LO:HI is required"},
        {{f->st, "create", "x", "--dtype", "f33", "--range", "0:1", NULL}, "unknown dtype 'f33'"},
        {{f->st, "create", "x", "--dtype", "f32", "--range", "9:1", NULL}, "not LO:HI"},
        {{f->st, "create", "x", "--dtype", "f32", "--range", "0:1", "--shape", "4,0", NULL}, "--shape"},
        {{f->st, "create", "x", "--dtype", "f32", "--range", "0:1", "--shape", "1,2,3,4,5", NULL}, "--shape"},
        {{f->st, "create", "x", "--dtype", "f32", "--range", "0:1", "--init", "gauss", NULL}, "--init"},
        {{f->st, "create", "x", "--dtype", "f32", "--range", "0:1", "--init", "uniform:1", NULL}, "--init"},
        {{f->st, "create", "x", "--dtype", "f32", "--range", "0:1", "--init", "uniform:1,0", NULL}, "(A < B)"},
        {{f->st, "create", "x", "--dtype", "f32", "--range", "0:1", "--init", "normal:0,-1", NULL}, "(STD >= 0)"},
        {{f->st, "create", "x", "--dtype", "f32", "--range", "0:1", "--chunk-rows", "0", NULL}, "--chunk-rows"},
        {{f->st, "create", "x", "--dtype", NULL}, "option --dtype needs a value"},
        {{f->st, "import", "x", "f.bin", "--dtype", "f32", NULL}, "both --dtype and --dim"},
        {{f->st, "import", "x", "f.bin", "--dtype", "f32", "--dim", "a", NULL}, "--dim"},
        {{f->st, "import", "x", "f.bin", "--lo", "-3", NULL}, "--lo"},
        {{f->st, "import", "x", "f.bin", "--dtype", "f32", "--dim", "2", "--raw", NULL}, "--raw does not apply"},
        {{f->st, "export", "feat", "o.npy", "--range", "x", NULL}, "--range 'x'"},
        {{f->st, "rename", "feat", NULL}, "missing arguments"},
        {{f->st, "verify", "a", "b", NULL}, "unexpected argument 'b'"},
    };

    snprintf(at_empty, sizeof at_empty, "@%s", path(f, "empty.ids"));
    gkvt_write_file(at_empty + 1, " \n\t\n", 4);
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        char *argv[12];
        int n = 0, rc;

        argv[n++] = (char *)gkvt_prog("kvctl");
        for (int k = 0; t[i].a[k] != NULL; k++)
            argv[n++] = (char *)t[i].a[k];
        argv[n] = NULL;
        free(f->out);
        free(f->err);
        rc = gkvt_run(argv, NULL, 0, &f->out, &f->err, 30);
        if (rc != 2 || strstr(f->err, t[i].msg) == NULL)
            fail_msg("case %zu: exit %d, stderr '%s', wanted 2 and '%s'", i, rc,
                     f->err, t[i].msg);
        assert_string_equal(f->out, "");
        assert_memory_equal(f->err, "kvctl: ", 7);
        assert_non_null(strstr(f->err, "--help"));
    }
    /* none of that changed the store: a bad put wrote nothing */
    assert_int_equal(kv(f, f->st, "get", "feat", "1", NULL), 0);
    check_get(f, (uint64_t[]){1}, 1);
    free(v);
}

static void
test_missing_store_is_an_error(void **state)
{
    struct fx *f = *state;
    const char *cmds[][4] = {
        {"ls", NULL}, {"info", "x", NULL}, {"get", "x", "1", NULL},
        {"export", "x", "o.npy", NULL}, {"verify", NULL}, {"stat", NULL},
        {"put", "x", "1", "2"}, {"rm", "x", NULL}, {"rename", "x", "y"},
    };

    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        assert_int_equal(kv(f, f->st, cmds[i][0], cmds[i][1], cmds[i][2],
                            cmds[i][3], NULL), 1);
        assert_non_null(strstr(f->err, "kvctl: store '"));
        assert_non_null(strstr(f->err, f->st));
        assert_non_null(strstr(f->err, "no store at that path"));
        assert_string_equal(f->out, "");
        /* nothing was created */
        assert_false(exists(f->st));
    }
}

/* ---- import, export ------------------------------------------------------ */

static void
test_import_npy_rows_match(void **state)
{
    struct fx *f = *state;
    float *v = write_npy_f32(path(f, "feat.npy"), N, W, 0);
    gkv_tensor_desc d;
    unsigned char *got;
    size_t len;

    /* into a store that does not exist yet */
    assert_int_equal(kv(f, f->st, "import", "feat", path(f, "feat.npy"), NULL), 0);
    assert_string_equal(f->out, "");
    assert_string_equal(f->err, "");        /* no progress bar off a tty */
    got = dump(f->st, "feat", &d, &len);
    assert_int_equal(d.dtype, GKV_F32);
    assert_int_equal(d.ndim, 1);
    assert_int_equal(d.shape[0], W);
    assert_int_equal(d.lo, 0);
    assert_int_equal(d.hi, N);
    assert_int_equal(len, N * W * sizeof(float));
    for (uint64_t r = 0; r < N; r++)
        assert_memory_equal(got + r * W * 4, v + r * W, W * 4);
    free(got);
    /* --lo and chunking options; the name may hold slashes */
    assert_int_equal(kv(f, f->st, "import", "node/feat", path(f, "feat.npy"),
                        "--lo", "500", "--chunk-rows", "7", NULL), 0);
    got = dump(f->st, "node/feat", &d, &len);
    assert_int_equal(d.lo, 500);
    assert_int_equal(d.hi, 500 + N);
    assert_int_equal(d.chunk_rows, 7);
    assert_memory_equal(got, v, len);
    free(got);
    assert_int_equal(kv(f, f->st, "import", "hot", path(f, "feat.npy"), "--hot", NULL), 0);
    got = dump(f->st, "hot", &d, &len);
    assert_true(d.flags & GKV_TENSOR_HOT);
    assert_memory_equal(got, v, len);
    free(got);
    /* no temporary tensor is left */
    assert_int_equal(kv(f, f->st, "ls", NULL), 0);
    assert_null(strstr(f->out, "kvctl-import"));
    free(v);
}

static void
test_import_other_dtypes(void **state)
{
    struct fx *f = *state;
    unsigned char b[128 + 64];
    gkv_tensor_desc d;
    unsigned char *got;
    size_t hl, len;
    int64_t i64[6] = {-5, 0, 7, INT64_MAX, INT64_MIN, 42};
    double f64[3] = {0.1, -1e300, 3.0};
    uint16_t f16[4] = {0x3c00, 0xb800, 0x3555, 0x7bff};   /* 1 -0.5 0.333 65504 */
    int8_t i8[4] = {-128, -1, 0, 127};

    hl = npy_header(b, "<i8", "(3, 2)");
    memcpy(b + hl, i64, sizeof i64);
    gkvt_write_file(path(f, "i.npy"), b, hl + sizeof i64);
    assert_int_equal(kv(f, f->st, "import", "ints", path(f, "i.npy"), NULL), 0);
    got = dump(f->st, "ints", &d, &len);
    assert_int_equal(d.dtype, GKV_I64);
    assert_memory_equal(got, i64, sizeof i64);
    free(got);
    assert_int_equal(kv(f, f->st, "get", "ints", "0:3", NULL), 0);
    assert_string_equal(f->out, "0: -5 0\n1: 7 9223372036854775807\n"
                                "2: -9223372036854775808 42\n");

    hl = npy_header(b, "<f8", "(3,)");
    memcpy(b + hl, f64, sizeof f64);
    gkvt_write_file(path(f, "d.npy"), b, hl + sizeof f64);
    assert_int_equal(kv(f, f->st, "import", "dbl", path(f, "d.npy"), NULL), 0);
    assert_int_equal(kv(f, f->st, "get", "dbl", "0,1,2", NULL), 0);
    assert_string_equal(f->out, "0: 0.10000000000000001\n1: -1.0000000000000001e+300\n2: 3\n");

    hl = npy_header(b, "<f2", "(1, 4)");
    memcpy(b + hl, f16, sizeof f16);
    gkvt_write_file(path(f, "h.npy"), b, hl + sizeof f16);
    assert_int_equal(kv(f, f->st, "import", "half", path(f, "h.npy"), NULL), 0);
    assert_int_equal(kv(f, f->st, "get", "half", "0", NULL), 0);
    assert_string_equal(f->out, "0: 1 -0.5 0.333251953 65504\n");

    hl = npy_header(b, "|i1", "(2, 2)");
    memcpy(b + hl, i8, sizeof i8);
    gkvt_write_file(path(f, "b.npy"), b, hl + sizeof i8);
    assert_int_equal(kv(f, f->st, "import", "bytes", path(f, "b.npy"), NULL), 0);
    assert_int_equal(kv(f, f->st, "get", "bytes", "1,0", NULL), 0);
    assert_string_equal(f->out, "1: 0 127\n0: -128 -1\n");

    /* numpy bool (a DGL mask): stored as u8, the bytes as they are */
    {
        unsigned char mask[6] = {1, 0, 0, 1, 1, 0};
        hl = npy_header(b, "|b1", "(6,)");
        memcpy(b + hl, mask, sizeof mask);
        gkvt_write_file(path(f, "m.npy"), b, hl + sizeof mask);
        assert_int_equal(kv(f, f->st, "import", "mask", path(f, "m.npy"), NULL), 0);
        got = dump(f->st, "mask", &d, &len);
        assert_int_equal(d.dtype, GKV_U8);
        assert_int_equal(len, sizeof mask);
        assert_memory_equal(got, mask, sizeof mask);
        free(got);
        /* a byte that is not 0 or 1: refused, naming the file and the row;
         * the store is left without the tensor */
        b[hl + 4] = 2;
        gkvt_write_file(path(f, "m2.npy"), b, hl + sizeof mask);
        assert_int_equal(kv(f, f->st, "import", "mask2", path(f, "m2.npy"), NULL), 1);
        assert_non_null(strstr(f->err, "m2.npy"));
        assert_non_null(strstr(f->err, "row 4 holds byte 2"));
        assert_int_equal(kv(f, f->st, "info", "mask2", NULL), 1);
    }
}

static void
test_export_round_trip(void **state)
{
    struct fx *f = *state;
    float *v = make_feat(f);
    unsigned char *a, *b;
    size_t la, lb;
    DIR *dp;
    struct dirent *de;

    /* byte-identical to the .npy it came from */
    assert_int_equal(kv(f, f->st, "export", "feat", path(f, "out.npy"), NULL), 0);
    assert_string_equal(f->out, "");
    assert_string_equal(f->err, "");
    a = gkvt_read_file(path(f, "feat.npy"), &la);
    b = gkvt_read_file(path(f, "out.npy"), &lb);
    assert_int_equal(la, lb);
    assert_memory_equal(a, b, la);
    free(b);
    /* --raw: the rows alone */
    assert_int_equal(kv(f, f->st, "export", "feat", path(f, "out.raw"), "--raw", NULL), 0);
    b = gkvt_read_file(path(f, "out.raw"), &lb);
    assert_int_equal(lb, la - 128);
    assert_memory_equal(b, a + 128, lb);
    free(b);
    free(a);
    /* --range: a header of the right shape and those rows */
    assert_int_equal(kv(f, f->st, "export", "feat", path(f, "part.npy"),
                        "--range", "10:20", NULL), 0);
    {
        gkv_npy_header h;
        b = gkvt_read_file(path(f, "part.npy"), &lb);
        GKVT_OK(gkv_npy_parse(b, lb, lb, &h, NULL, 0));
        assert_int_equal(h.shape[0], 10);
        assert_int_equal(h.shape[1], W);
        assert_int_equal(lb, h.data_offset + 10 * W * 4);
        assert_memory_equal(b + h.data_offset, v + 10 * W, 10 * W * 4);
        free(b);
    }
    /* failures leave an existing FILE untouched and no temporary file */
    assert_int_equal(kv(f, f->st, "export", "feat", path(f, "part.npy"),
                        "--range", "2990:3010", NULL), 1);
    assert_non_null(strstr(f->err, "not inside [0, 3000)"));
    assert_int_equal(kv(f, f->st, "export", "nope", path(f, "part.npy"), NULL), 1);
    assert_non_null(strstr(f->err, "tensor 'nope'"));
    b = gkvt_read_file(path(f, "part.npy"), &lb);
    assert_int_equal(lb, 128 + 10 * W * 4);
    free(b);
    assert_int_equal(kv(f, f->st, "export", "feat", path(f, "no/such/dir.npy"), NULL), 1);
    assert_non_null(strstr(f->err, "cannot create"));
    dp = opendir(f->dir);
    while ((de = readdir(dp)) != NULL)
        assert_null(strstr(de->d_name, ".tmp-"));
    closedir(dp);
    free(v);
}

static void
test_raw_import_export(void **state)
{
    struct fx *f = *state;
    double rows[10][2][3];
    uint16_t bf[8];
    gkv_tensor_desc d;
    unsigned char *got;
    size_t len;

    for (int i = 0; i < 10; i++)
        for (int j = 0; j < 6; j++)
            rows[i][j / 3][j % 3] = i * 10 + j + 0.125;
    gkvt_write_file(path(f, "rows.f64"), rows, sizeof rows);
    assert_int_equal(kv(f, f->st, "import", "cube", path(f, "rows.f64"),
                        "--dtype", "f64", "--dim", "2,3", "--lo", "40", NULL), 0);
    got = dump(f->st, "cube", &d, &len);
    assert_int_equal(d.dtype, GKV_F64);
    assert_int_equal(d.ndim, 2);
    assert_int_equal(d.shape[0], 2);
    assert_int_equal(d.shape[1], 3);
    assert_int_equal(d.lo, 40);
    assert_int_equal(d.hi, 50);
    assert_int_equal(len, sizeof rows);
    assert_memory_equal(got, rows, len);
    free(got);
    assert_int_equal(kv(f, f->st, "export", "cube", path(f, "back.f64"), "--raw", NULL), 0);
    got = gkvt_read_file(path(f, "back.f64"), &len);
    assert_int_equal(len, sizeof rows);
    assert_memory_equal(got, rows, len);
    free(got);
    /* a row of several dims prints flat */
    assert_int_equal(kv(f, f->st, "get", "cube", "41", NULL), 0);
    assert_string_equal(f->out, "41: 10.125 11.125 12.125 13.125 14.125 15.125\n");
    /* and as .npy with its 3-D shape */
    assert_int_equal(kv(f, f->st, "export", "cube", path(f, "cube.npy"), NULL), 0);
    {
        gkv_npy_header h;
        got = gkvt_read_file(path(f, "cube.npy"), &len);
        GKVT_OK(gkv_npy_parse(got, len, len, &h, NULL, 0));
        assert_int_equal(h.ndim, 3);
        assert_int_equal(h.shape[0], 10);
        assert_int_equal(h.shape[2], 3);
        free(got);
    }

    /* bf16 exists only raw */
    for (int i = 0; i < 8; i++)
        bf[i] = gkv_f32_to_bf16((float)i * 0.5f - 1.0f);
    gkvt_write_file(path(f, "e.bf16"), bf, sizeof bf);
    assert_int_equal(kv(f, f->st, "import", "emb", path(f, "e.bf16"),
                        "--dtype", "bf16", "--dim", "4", NULL), 0);
    assert_int_equal(kv(f, f->st, "get", "emb", "0:2", NULL), 0);
    assert_string_equal(f->out, "0: -1 -0.5 0 0.5\n1: 1 1.5 2 2.5\n");
    assert_int_equal(kv(f, f->st, "export", "emb", path(f, "e.npy"), NULL), 1);
    assert_non_null(strstr(f->err, "bf16"));
    assert_non_null(strstr(f->err, "--raw"));
    assert_false(exists(path(f, "e.npy")));
    assert_int_equal(kv(f, f->st, "export", "emb", path(f, "e2.bf16"), "--raw", NULL), 0);
    got = gkvt_read_file(path(f, "e2.bf16"), &len);
    assert_int_equal(len, sizeof bf);
    assert_memory_equal(got, bf, len);
    free(got);

    /* 16 bytes are not whole rows of 3 bf16; the store is unchanged */
    assert_int_equal(kv(f, f->st, "import", "odd", path(f, "e.bf16"),
                        "--dtype", "bf16", "--dim", "3", NULL), 1);
    assert_non_null(strstr(f->err, "whole number"));
    assert_int_equal(kv(f, f->st, "info", "odd", NULL), 1);
    /* raw options on a .npy file are a usage error */
    assert_int_equal(kv(f, f->st, "import", "x", path(f, "cube.npy"),
                        "--dtype", "f64", "--dim", "2,3", NULL), 2);
    assert_non_null(strstr(f->err, "is a .npy file"));
}

/* ---- get, put -------------------------------------------------------------- */

static void
test_get_each_id_syntax(void **state)
{
    struct fx *f = *state;
    float *v = make_feat(f);
    char at[4200];

    assert_int_equal(kv(f, f->st, "get", "feat", "5", NULL), 0);
    check_get(f, (uint64_t[]){5}, 1);
    assert_int_equal(kv(f, f->st, "get", "feat", "1,5,9", NULL), 0);
    check_get(f, (uint64_t[]){1, 5, 9}, 3);
    assert_int_equal(kv(f, f->st, "get", "feat", "10:13", NULL), 0);
    check_get(f, (uint64_t[]){10, 11, 12}, 3);
    assert_int_equal(kv(f, f->st, "get", "feat", "2999,1,5,10:12,4,4,0x10", NULL), 0);
    check_get(f, (uint64_t[]){2999, 1, 5, 10, 11, 4, 4, 16}, 8);
    {
        const char *ids = "3\n 7\t8\r\n\n100:103,2\n";
        gkvt_write_file(path(f, "ids.txt"), ids, strlen(ids));
    }
    snprintf(at, sizeof at, "@%s", path(f, "ids.txt"));
    assert_int_equal(kv(f, f->st, "get", "feat", at, NULL), 0);
    check_get(f, (uint64_t[]){3, 7, 8, 100, 101, 102, 2}, 7);
    /* a long range in one batch after another */
    assert_int_equal(kv(f, f->st, "get", "feat", "0:3000", NULL), 0);
    {
        const char *p = f->out;
        for (uint64_t r = 0; r < N; r++)
            p = check_line(p, r);
        assert_int_equal(*p, '\0');
    }
    /* IDs outside [0, 3000): exit 1 and nothing printed */
    assert_int_equal(kv(f, f->st, "get", "feat", "1,3000", NULL), 1);
    assert_string_equal(f->out, "");
    assert_non_null(strstr(f->err, "tensor 'feat'"));
    assert_non_null(strstr(f->err, "ID 3000 is outside its range [0, 3000)"));
    assert_int_equal(kv(f, f->st, "get", "feat", "2990:3001", NULL), 1);
    assert_non_null(strstr(f->err, "ID 3000"));
    /* unknown tensor: exit 1, named */
    assert_int_equal(kv(f, f->st, "get", "nope", "1", NULL), 1);
    assert_string_equal(f->out, "");
    assert_non_null(strstr(f->err, "kvctl: tensor 'nope': no such tensor"));
    assert_int_equal(kv(f, f->st, "info", "nope", NULL), 1);
    assert_non_null(strstr(f->err, "tensor 'nope'"));
    /* an unreadable ID file is a failure, not a usage error */
    snprintf(at, sizeof at, "@%s", path(f, "missing.txt"));
    assert_int_equal(kv(f, f->st, "get", "feat", at, NULL), 1);
    assert_non_null(strstr(f->err, "cannot read ID file"));
    free(v);
}

static void
test_put_then_get(void **state)
{
    struct fx *f = *state;
    float *v = make_feat(f);
    const char *want = "7: -1.5 2 3 4 5 6 7 8 9 10 11 12 13 14 15 0.25\n";
    gkv_tensor_desc d;
    unsigned char *got;
    size_t len;

    assert_int_equal(kv(f, f->st, "put", "feat", "7",
                        "-1.5,2,3,4,5,6,7,8,9,10,11,12,13,14,15,0.25", NULL), 0);
    assert_string_equal(f->out, "");
    assert_int_equal(kv(f, f->st, "get", "feat", "7", NULL), 0);
    assert_string_equal(f->out, want);
    /* several arguments, spaces inside one, and the add handler */
    assert_int_equal(kv(f, f->st, "put", "feat", "7", "1", "1 1", "1,1,1,1,1",
                        "1", "1", "1", "1", "1", "1", "1", "0", "--handler", "add",
                        NULL), 0);
    assert_int_equal(kv(f, f->st, "get", "feat", "7", NULL), 0);
    assert_string_equal(f->out, "7: -0.5 3 4 5 6 7 8 9 10 11 12 13 14 15 16 0.25\n");
    /* other rows are untouched */
    got = dump(f->st, "feat", &d, &len);
    assert_memory_equal(got, v, 7 * W * 4);
    assert_memory_equal(got + 8 * W * 4, v + 8 * W, (N - 8) * W * 4);
    free(got);
    /* failures: ID out of range, unknown handler, missing tensor */
    assert_int_equal(kv(f, f->st, "put", "feat", "3000", "1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1",
                        NULL), 1);
    assert_non_null(strstr(f->err, "tensor 'feat'"));
    assert_int_equal(kv(f, f->st, "put", "feat", "1", "1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1",
                        "--handler", "nosuch", NULL), 1);
    assert_int_equal(kv(f, f->st, "put", "nope", "1", "1", NULL), 1);
    assert_non_null(strstr(f->err, "tensor 'nope'"));

    /* integer rows take whole numbers within their range */
    assert_int_equal(kv(f, f->st, "create", "cnt", "--dtype", "i32", "--shape", "3",
                        "--range", "0:10", NULL), 0);
    assert_int_equal(kv(f, f->st, "put", "cnt", "4", "-2147483648,2147483647,1e3", NULL), 0);
    assert_int_equal(kv(f, f->st, "get", "cnt", "4", NULL), 0);
    assert_string_equal(f->out, "4: -2147483648 2147483647 1000\n");
    assert_int_equal(kv(f, f->st, "put", "cnt", "4", "1.5,0,0", NULL), 2);
    assert_non_null(strstr(f->err, "'1.5' is not a value of dtype i32"));
    assert_int_equal(kv(f, f->st, "put", "cnt", "4", "2147483648,0,0", NULL), 2);
    assert_int_equal(kv(f, f->st, "create", "u", "--dtype", "u8", "--range", "0:2", NULL), 0);
    assert_int_equal(kv(f, f->st, "put", "u", "1", "-1", NULL), 2);
    assert_int_equal(kv(f, f->st, "put", "u", "1", "255", NULL), 0);
    assert_int_equal(kv(f, f->st, "get", "u", "0:2", NULL), 0);
    assert_string_equal(f->out, "0: 0\n1: 255\n");
    /* floats: too large for the dtype is refused, infinity is not */
    assert_int_equal(kv(f, f->st, "create", "h", "--dtype", "f16", "--range", "0:1", NULL), 0);
    assert_int_equal(kv(f, f->st, "put", "h", "0", "70000", NULL), 2);
    assert_non_null(strstr(f->err, "not a value of dtype f16"));
    assert_int_equal(kv(f, f->st, "put", "h", "0", "1e400", NULL), 2);
    assert_int_equal(kv(f, f->st, "put", "h", "0", "-inf", NULL), 0);
    assert_int_equal(kv(f, f->st, "get", "h", "0", NULL), 0);
    assert_string_equal(f->out, "0: -inf\n");
    assert_int_equal(kv(f, f->st, "get", "h", "0", "--json", NULL), 0);
    {
        json_t *j = parse_json(f->out);
        assert_true(json_is_null(json_array_get(json_array_get(
            json_object_get(j, "rows"), 0), 0)));
        json_decref(j);
    }
    free(v);
}

/* ---- create, ls, info, stat, verify, JSON ---------------------------------- */

static void
test_create_and_json(void **state)
{
    struct fx *f = *state;
    json_t *j, *a;

    assert_int_equal(kv(f, f->st, "create", "emb", "--dtype", "f16", "--shape", "2x3",
                        "--range", "100:200", "--init", "const:0.5", "--hot", NULL), 0);
    assert_int_equal(kv(f, f->st, "get", "emb", "150", NULL), 0);
    assert_string_equal(f->out, "150: 0.5 0.5 0.5 0.5 0.5 0.5\n");
    assert_int_equal(kv(f, f->st, "create", "w", "--dtype=f32", "--range=0:4",
                        "--init", "uniform:-1,1", "--seed", "9", NULL), 0);
    assert_int_equal(kv(f, f->st, "create", "n", "--dtype", "f64", "--range", "0:4",
                        "--init", "normal:0,1", NULL), 0);
    /* again: exists */
    assert_int_equal(kv(f, f->st, "create", "emb", "--dtype", "f32", "--range", "0:1", NULL), 1);
    assert_non_null(strstr(f->err, "already exists"));

    /* info --json (the option after the command) */
    assert_int_equal(kv(f, f->st, "info", "emb", "--json", NULL), 0);
    j = parse_json(f->out);
    assert_string_equal(json_string_value(json_object_get(j, "name")), "emb");
    assert_string_equal(json_string_value(json_object_get(j, "dtype")), "f16");
    a = json_object_get(j, "shape");
    assert_int_equal(json_array_size(a), 3);
    assert_int_equal(json_integer_value(json_array_get(a, 0)), 100);
    assert_int_equal(json_integer_value(json_array_get(a, 1)), 2);
    assert_int_equal(json_integer_value(json_array_get(a, 2)), 3);
    assert_int_equal(json_integer_value(json_object_get(j, "lo")), 100);
    assert_int_equal(json_integer_value(json_object_get(j, "hi")), 200);
    assert_int_equal(json_integer_value(json_object_get(j, "row_bytes")), 12);
    assert_true(json_is_true(json_object_get(j, "hot")));
    assert_int_equal(json_array_size(json_object_get(j, "state_tensors")), 0);
    json_decref(j);

    /* ls --json (the option first) */
    assert_int_equal(kv(f, "--json", f->st, "ls", NULL), 0);
    j = parse_json(f->out);
    a = json_object_get(j, "tensors");
    assert_int_equal(json_array_size(a), 3);
    assert_string_equal(json_string_value(json_object_get(json_array_get(a, 0), "name")), "emb");
    assert_string_equal(json_string_value(json_object_get(json_array_get(a, 1), "name")), "n");
    assert_string_equal(json_string_value(json_object_get(json_array_get(a, 2), "name")), "w");
    assert_int_equal(json_integer_value(json_object_get(json_array_get(a, 2), "bytes")), 16);
    json_decref(j);

    /* get --json: ids and rows as numbers */
    assert_int_equal(kv(f, f->st, "--json", "get", "emb", "199,100", NULL), 0);
    j = parse_json(f->out);
    assert_string_equal(json_string_value(json_object_get(j, "name")), "emb");
    a = json_object_get(j, "ids");
    assert_int_equal(json_array_size(a), 2);
    assert_int_equal(json_integer_value(json_array_get(a, 0)), 199);
    assert_int_equal(json_integer_value(json_array_get(a, 1)), 100);
    a = json_object_get(j, "rows");
    assert_int_equal(json_array_size(a), 2);
    assert_int_equal(json_array_size(json_array_get(a, 1)), 6);
    assert_true(json_number_value(json_array_get(json_array_get(a, 1), 5)) == 0.5);
    json_decref(j);

    /* get --json of f32: values read back to the same floats */
    {
        gkv_store *s;
        float row[1];
        uint64_t id = 3;

        assert_int_equal(kv(f, f->st, "get", "w", "3", "--json", NULL), 0);
        j = parse_json(f->out);
        GKVT_OK(gkv_store_open(&s, f->st, GKV_RDONLY, NULL));
        GKVT_OK(gkv_tensor_pull(s, NULL, "w", &id, 1, row, sizeof row));
        gkv_store_close(s);
        assert_true((float)json_number_value(json_array_get(
            json_array_get(json_object_get(j, "rows"), 0), 0)) == row[0]);
        assert_true(row[0] >= -1 && row[0] < 1);
        json_decref(j);
    }

    /* stat --json */
    assert_int_equal(kv(f, f->st, "stat", "--json", NULL), 0);
    j = parse_json(f->out);
    assert_int_equal(json_integer_value(json_object_get(j, "ntensors")), 3);
    assert_int_equal(json_integer_value(json_object_get(j, "format")), 1);
    assert_true(json_integer_value(json_object_get(j, "page_size")) > 0);
    assert_int_equal(json_integer_value(json_object_get(j, "data_bytes")),
                     100 * 12 + 4 * 4 + 4 * 8);
    json_decref(j);
    assert_int_equal(kv(f, f->st, "stat", NULL), 0);
    assert_non_null(strstr(f->out, "tensors:      3\n"));

    /* verify --json on a clean store */
    assert_int_equal(kv(f, f->st, "verify", "--json", NULL), 0);
    j = parse_json(f->out);
    assert_true(json_is_true(json_object_get(j, "ok")));
    assert_int_equal(json_integer_value(json_object_get(j, "bad_chunks")), 0);
    assert_true(json_integer_value(json_object_get(j, "chunks_checked")) > 0);
    json_decref(j);

    /* a bad name is refused by the store; a store made for it is removed */
    snprintf(f->st, sizeof f->st, "%s/st2", f->dir);
    assert_int_equal(kv(f, f->st, "create", "a b", "--dtype", "f32", "--range", "0:1", NULL), 1);
    assert_non_null(strstr(f->err, "not printable ASCII"));
    assert_false(exists(f->st));
}

/* A range near 2^64: info, ls and stat print the exact bounds, and the
 * byte totals capped at 2^64 - 1 and marked as such, never a wrapped
 * number; JSON gives numbers above 2^63 - 1 as strings of their digits
 * (jansson's integers are signed), not negative numbers. */
static void
test_huge_range_output(void **state)
{
    struct fx *f = *state;
    json_t *j, *t;

    assert_int_equal(kv(f, f->st, "create", "big", "--dtype", "f64", "--shape",
                        "4", "--range", "0:18446744073709551615", NULL), 0);
    assert_int_equal(kv(f, f->st, "create", "small", "--dtype", "f32",
                        "--range", "5:9", NULL), 0);
    assert_int_equal(kv(f, f->st, "info", "big", NULL), 0);
    assert_non_null(strstr(f->out, "range:       [0, 18446744073709551615)\n"));
    assert_non_null(strstr(f->out, "bytes:       18446744073709551615 (or more)\n"));
    assert_int_equal(kv(f, f->st, "ls", NULL), 0);
    assert_non_null(strstr(f->out, "\t18446744073709551615 (or more)\n"));
    assert_non_null(strstr(f->out, "[5,9)\t"));
    assert_non_null(strstr(f->out, "\t16\n"));
    assert_int_equal(kv(f, f->st, "stat", NULL), 0);
    assert_non_null(strstr(f->out, "data bytes:   18446744073709551615 (or more)\n"));

    assert_int_equal(kv(f, "--json", f->st, "info", "big", NULL), 0);
    j = parse_json(f->out);
    assert_int_equal(json_integer_value(json_object_get(j, "lo")), 0);
    assert_string_equal(json_string_value(json_object_get(j, "hi")),
                        "18446744073709551615");
    assert_string_equal(json_string_value(json_object_get(j, "rows")),
                        "18446744073709551615");
    assert_string_equal(json_string_value(json_object_get(j, "bytes")),
                        "18446744073709551615");
    assert_string_equal(json_string_value(json_array_get(json_object_get(j, "shape"), 0)),
                        "18446744073709551615");
    assert_int_equal(json_integer_value(json_object_get(j, "row_bytes")), 32);
    json_decref(j);
    assert_int_equal(kv(f, "--json", f->st, "ls", NULL), 0);
    j = parse_json(f->out);
    t = json_array_get(json_object_get(j, "tensors"), 1);
    assert_string_equal(json_string_value(json_object_get(t, "name")), "small");
    assert_int_equal(json_integer_value(json_object_get(t, "bytes")), 16);
    json_decref(j);
    assert_int_equal(kv(f, "--json", f->st, "stat", NULL), 0);
    j = parse_json(f->out);
    assert_string_equal(json_string_value(json_object_get(j, "data_bytes")),
                        "18446744073709551615");
    assert_int_equal(json_integer_value(json_object_get(j, "ntensors")), 2);
    json_decref(j);
}

static void
test_rm_rename_ls(void **state)
{
    struct fx *f = *state;
    float *v = make_feat(f);
    gkv_tensor_desc d;
    unsigned char *got;
    size_t len;

    assert_int_equal(kv(f, f->st, "ls", NULL), 0);
    assert_string_equal(f->out, "NAME\tDTYPE\tSHAPE\tRANGE\tCHUNK_ROWS\tBYTES\n"
                                "feat\tf32\t3000x16\t[0,3000)\t4096\t192000\n");
    assert_int_equal(kv(f, f->st, "rename", "feat", "node/x", NULL), 0);
    assert_int_equal(kv(f, f->st, "ls", NULL), 0);
    assert_non_null(strstr(f->out, "\nnode/x\tf32\t3000x16\t"));
    assert_null(strstr(f->out, "feat"));
    got = dump(f->st, "node/x", &d, &len);
    assert_memory_equal(got, v, len);
    free(got);
    /* errors name the tensor */
    assert_int_equal(kv(f, f->st, "rename", "feat", "y", NULL), 1);
    assert_non_null(strstr(f->err, "'feat'"));
    assert_int_equal(kv(f, f->st, "create", "y", "--dtype", "u8", "--range", "0:1", NULL), 0);
    assert_int_equal(kv(f, f->st, "rename", "node/x", "y", NULL), 1);
    assert_non_null(strstr(f->err, "already exists"));
    assert_int_equal(kv(f, f->st, "rm", "node/x", NULL), 0);
    assert_int_equal(kv(f, f->st, "rm", "node/x", NULL), 1);
    assert_non_null(strstr(f->err, "tensor 'node/x'"));
    assert_int_equal(kv(f, f->st, "rm", "y", NULL), 0);
    assert_int_equal(kv(f, f->st, "ls", NULL), 0);
    assert_string_equal(f->out, "NAME\tDTYPE\tSHAPE\tRANGE\tCHUNK_ROWS\tBYTES\n");
    assert_int_equal(kv(f, f->st, "ls", "--json", NULL), 0);
    {
        json_t *j = parse_json(f->out);
        assert_int_equal(json_array_size(json_object_get(j, "tensors")), 0);
        json_decref(j);
    }
    /* optimizer state shows with --all and goes with its tensor */
    assert_int_equal(kv(f, f->st, "create", "e", "--dtype", "f32", "--shape", "2",
                        "--range", "0:4", NULL), 0);
    assert_int_equal(kv(f, f->st, "put", "e", "1", "1,1", "--handler", "adam", NULL), 0);
    assert_int_equal(kv(f, f->st, "ls", NULL), 0);
    assert_null(strstr(f->out, "e#adam_m"));
    assert_int_equal(kv(f, f->st, "ls", "--all", NULL), 0);
    assert_non_null(strstr(f->out, "e#adam_m\t"));
    assert_int_equal(kv(f, f->st, "info", "e", NULL), 0);
    assert_non_null(strstr(f->out, "e#adam_m"));
    assert_int_equal(kv(f, f->st, "rm", "e", NULL), 0);
    assert_int_equal(kv(f, f->st, "ls", "--all", NULL), 0);
    assert_string_equal(f->out, "NAME\tDTYPE\tSHAPE\tRANGE\tCHUNK_ROWS\tBYTES\n");
    free(v);
}

static void
test_verify_finds_flipped_byte(void **state)
{
    struct fx *f = *state;
    float *v = make_feat(f);
    unsigned char *db;
    size_t len, hits = 0;
    char data[4200];
    json_t *j;
    int fd;

    assert_int_equal(kv(f, f->st, "create", "other", "--dtype", "i64",
                        "--range", "0:100", "--init", "const:3", NULL), 0);
    assert_int_equal(kv(f, f->st, "verify", NULL), 0);
    assert_memory_equal(f->out, "ok: ", 4);
    assert_string_equal(f->err, "");
    /* flip one byte of row 77 where it lies in data.mdb */
    snprintf(data, sizeof data, "%s/data.mdb", f->st);
    db = gkvt_read_file(data, &len);
    fd = open(data, O_WRONLY);
    for (size_t i = 0; i + W * 4 <= len; i++)
        if (memcmp(db + i, v + 77 * W, W * 4) == 0) {
            unsigned char c = db[i + 21] ^ 0x10;
            assert_int_equal(pwrite(fd, &c, 1, (off_t)(i + 21)), 1);
            hits++;
        }
    close(fd);
    free(db);
    assert_true(hits >= 1);
    assert_int_equal(kv(f, f->st, "verify", NULL), 1);
    assert_non_null(strstr(f->out, "CORRUPT"));
    assert_non_null(strstr(f->err, "tensor 'feat'"));
    assert_non_null(strstr(f->err, "chunk 0"));
    assert_non_null(strstr(f->err, "checksum"));
    assert_int_equal(kv(f, f->st, "verify", "feat", NULL), 1);
    assert_non_null(strstr(f->err, "tensor 'feat'"));
    assert_int_equal(kv(f, f->st, "verify", "other", NULL), 0);
    assert_int_equal(kv(f, f->st, "verify", "nope", NULL), 1);
    assert_non_null(strstr(f->err, "'nope'"));
    assert_int_equal(kv(f, "--json", f->st, "verify", NULL), 1);
    j = parse_json(f->out);
    assert_true(json_is_false(json_object_get(j, "ok")));
    assert_int_equal(json_integer_value(json_object_get(j, "bad_chunks")), 1);
    assert_string_equal(json_string_value(json_object_get(
        json_object_get(j, "first_bad"), "tensor")), "feat");
    assert_int_equal(json_integer_value(json_object_get(
        json_object_get(j, "first_bad"), "chunk")), 0);
    json_decref(j);
    free(v);
}

/* ---- failed imports leave the store as it was ------------------------------ */

/* ls output and every row of 'keep', to compare before and after. */
struct snap {
    char *ls;
    unsigned char *rows;
    size_t len;
};

static void
snap_take(struct fx *f, struct snap *s)
{
    gkv_tensor_desc d;

    assert_int_equal(kv(f, f->st, "ls", "--all", NULL), 0);
    s->ls = strdup(f->out);
    s->rows = dump(f->st, "keep", &d, &s->len);
}

static void
snap_check(struct fx *f, const struct snap *s)
{
    struct snap now;

    snap_take(f, &now);
    assert_string_equal(now.ls, s->ls);
    assert_int_equal(now.len, s->len);
    assert_memory_equal(now.rows, s->rows, s->len);
    free(now.ls);
    free(now.rows);
}

static void
test_bad_import_changes_nothing(void **state)
{
    struct fx *f = *state;
    const char *good = "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 2), }";
    static const struct {
        const char *name, *dict;
        size_t data;                    /* bytes after the header */
        const char *why;
    } t[] = {
        {"trunc_data", "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 2), }", 31,
         "truncated data"},
        {"fortran", "{'descr': '<f4', 'fortran_order': True, 'shape': (4, 2), }", 32,
         "Fortran"},
        {"bigend", "{'descr': '>f4', 'fortran_order': False, 'shape': (4, 2), }", 32,
         "big-endian"},
        {"object", "{'descr': '|O', 'fortran_order': False, 'shape': (4,), }", 32,
         "object arrays"},
        {"i2", "{'descr': '<i2', 'fortran_order': False, 'shape': (4, 2), }", 32,
         "unsupported dtype"},
        {"sixd", "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 2), }",
         32, "more than 5 dims"},
        {"zerod", "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", 4, "0-d"},
        {"norows", "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 2), }", 0,
         "no rows"},
    };
    unsigned char b[512];
    struct snap s0;
    size_t hl;

    hl = npy_header(b, "<f4", "(5, 3)");
    for (int i = 0; i < 15; i++) {
        float x = (float)i;
        memcpy(b + hl + 4 * i, &x, 4);
    }
    gkvt_write_file(path(f, "keep.npy"), b, hl + 60);
    assert_int_equal(kv(f, f->st, "import", "keep", path(f, "keep.npy"), NULL), 0);
    snap_take(f, &s0);

    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        size_t dl = strlen(t[i].dict);

        memcpy(b, "\x93NUMPY\x01\x00", 8);
        b[8] = (unsigned char)(dl + 1);
        b[9] = 0;
        memcpy(b + 10, t[i].dict, dl);
        b[10 + dl] = '\n';
        memset(b + 11 + dl, 0x3f, t[i].data);
        gkvt_write_file(path(f, t[i].name), b, 11 + dl + t[i].data);
        /* as a new name and as a replacement of 'keep' */
        assert_int_equal(kv(f, f->st, "import", "new", path(f, t[i].name), NULL), 1);
        if (strstr(f->err, t[i].why) == NULL)
            fail_msg("%s: stderr '%s' lacks '%s'", t[i].name, f->err, t[i].why);
        assert_non_null(strstr(f->err, t[i].name));
        assert_int_equal(kv(f, f->st, "import", "keep", path(f, t[i].name),
                            "--replace", NULL), 1);
        snap_check(f, &s0);
    }
    /* a truncated header, a bad magic, an empty file, a directory, no file */
    gkvt_write_file(path(f, "trunc_hdr"),
                    "\x93NUMPY\x01\x00\x76\x00{'descr'", 19);
    assert_int_equal(kv(f, f->st, "import", "keep", path(f, "trunc_hdr"), "--replace", NULL), 1);
    assert_non_null(strstr(f->err, "truncated header"));
    memcpy(b, good, strlen(good));
    gkvt_write_file(path(f, "magic"), b, strlen(good));
    assert_int_equal(kv(f, f->st, "import", "new", path(f, "magic"), NULL), 1);
    assert_non_null(strstr(f->err, "bad magic"));
    assert_non_null(strstr(f->err, "--dtype and --dim"));
    gkvt_write_file(path(f, "empty"), "", 0);
    assert_int_equal(kv(f, f->st, "import", "new", path(f, "empty"), NULL), 1);
    assert_int_equal(kv(f, f->st, "import", "new", f->dir, NULL), 1);
    assert_int_equal(kv(f, f->st, "import", "new", path(f, "none.npy"), NULL), 1);
    assert_non_null(strstr(f->err, "none.npy"));
    /* a name the store cannot hold */
    assert_int_equal(kv(f, f->st, "import", "a#b", path(f, "keep.npy"), NULL), 1);
    assert_non_null(strstr(f->err, "'#' is reserved"));
    snap_check(f, &s0);

    /* the same into a store that did not exist: it still does not */
    snprintf(f->st, sizeof f->st, "%s/fresh", f->dir);
    assert_int_equal(kv(f, f->st, "import", "x", path(f, "trunc_data"), NULL), 1);
    assert_false(exists(f->st));
    assert_int_equal(kv(f, f->st, "import", "x", path(f, "norows"), NULL), 1);
    assert_false(exists(f->st));
    /* a failure after the store was made: the tensor spec is refused */
    assert_int_equal(kv(f, f->st, "import", "x", path(f, "keep.npy"),
                        "--chunk-rows", "4294967295", NULL), 1);
    assert_non_null(strstr(f->err, "chunks of"));
    assert_false(exists(f->st));
    free(s0.ls);
    free(s0.rows);
}

static void write_npy_i64(const char *p, const int64_t *v, uint64_t n,
                          uint64_t cols);

/* Tensors x and y of the store export to the same bytes. */
static void
expect_same_export(struct fx *f, const char *x, const char *y)
{
    unsigned char *a, *b;
    size_t al, bl;

    assert_int_equal(kv(f, f->st, "export", x, path(f, "x.npy"), NULL), 0);
    assert_int_equal(kv(f, f->st, "export", y, path(f, "y.npy"), NULL), 0);
    a = gkvt_read_file(path(f, "x.npy"), &al);
    b = gkvt_read_file(path(f, "y.npy"), &bl);
    assert_int_equal(al, bl);
    assert_memory_equal(a, b, al);
    free(a);
    free(b);
}

/* import --orig-ids: a file in original-ID order (export --orig-ids)
 * comes back at the new IDs, as a tensor and as optimizer state; a
 * mapping of the wrong length, with an ID twice, or not covering the new
 * tensor's rows, and --lo beside it, are refused before the store
 * changes. */
static void
test_import_orig_ids(void **state)
{
    struct fx *f = *state;
        int64_t map[50];
    unsigned char *a, *b;
    size_t al, bl;
    struct snap s0;

    for (int i = 0; i < 50; i++)
        map[i] = (17 * i + 3) % 50;
    write_npy_i64(path(f, "map.npy"), map, 50, 0);
    assert_int_equal(kv(f, f->st, "create", "e", "--dtype", "f32", "--range",
                        "0:50", "--shape", "3", "--init", "uniform:0,1", NULL), 0);
    assert_int_equal(kv(f, f->st, "export", "e", path(f, "orig.npy"),
                        "--orig-ids", path(f, "map.npy"), NULL), 0);
    assert_int_equal(kv(f, f->st, "import", "e2", path(f, "orig.npy"),
                        "--orig-ids", path(f, "map.npy"), NULL), 0);
    expect_same_export(f, "e", "e2");
    assert_int_equal(kv(f, f->st, "export", "e", path(f, "a.npy"), NULL), 0);
    a = gkvt_read_file(path(f, "a.npy"), &al);
    /* optimizer state: the same file as e#adagrad_s, read back in order */
    assert_int_equal(kv(f, f->st, "import", "e#adagrad_s", path(f, "orig.npy"),
                        "--orig-ids", path(f, "map.npy"), NULL), 0);
    assert_int_equal(kv(f, f->st, "export", "e#adagrad_s", path(f, "s.npy"),
                        NULL), 0);
    b = gkvt_read_file(path(f, "s.npy"), &bl);
    assert_int_equal(al, bl);
    assert_memory_equal(a, b, al);
    free(a);
    free(b);

    /* refusals: nothing changes */
    assert_int_equal(kv(f, f->st, "create", "keep", "--dtype", "f32", "--range",
                        "0:10", "--init", "const:2", NULL), 0);
    snap_take(f, &s0);
    map[7] = map[8];
    write_npy_i64(path(f, "dup.npy"), map, 50, 0);
    assert_int_equal(kv(f, f->st, "import", "e3", path(f, "orig.npy"),
                        "--orig-ids", path(f, "dup.npy"), NULL), 1);
    assert_non_null(strstr(f->err, "comes twice"));
    write_npy_i64(path(f, "short.npy"), map, 49, 0);
    assert_int_equal(kv(f, f->st, "import", "e3", path(f, "orig.npy"),
                        "--orig-ids", path(f, "short.npy"), NULL), 1);
    assert_non_null(strstr(f->err, "has 49 entries, but"));
    for (int i = 0; i < 50; i++)
        map[i] = (17 * i + 3) % 50 + ((17 * i + 3) % 50 >= 25 ? 5 : 0);
    write_npy_i64(path(f, "holes.npy"), map, 50, 0);  /* 0..24, 30..54 */
    assert_int_equal(kv(f, f->st, "import", "e3", path(f, "orig.npy"),
                        "--orig-ids", path(f, "holes.npy"), NULL), 1);
    assert_non_null(strstr(f->err, "needs each of [0, 50)"));
    assert_int_equal(kv(f, f->st, "import", "e3", path(f, "orig.npy"),
                        "--orig-ids", path(f, "map.npy"), "--lo", "3", NULL), 2);
    snap_check(f, &s0);
    free(s0.ls);
    free(s0.rows);

    /* a tensor from ID 10 exported in original order comes back there */
    for (int i = 0; i < 50; i++)
        map[i] = 10 + (17 * i + 3) % 50;
    write_npy_i64(path(f, "map10.npy"), map, 50, 0);
    assert_int_equal(kv(f, f->st, "create", "t10", "--dtype", "f32", "--range",
                        "10:60", "--init", "uniform:0,1", NULL), 0);
    assert_int_equal(kv(f, f->st, "export", "t10", path(f, "o10.npy"),
                        "--orig-ids", path(f, "map10.npy"), NULL), 0);
    assert_int_equal(kv(f, f->st, "import", "u10", path(f, "o10.npy"),
                        "--orig-ids", path(f, "map10.npy"), NULL), 0);
    expect_same_export(f, "t10", "u10");
}

/* A create or import whose store open fails after LMDB made the files
 * (here the 1 GiB map cannot be reserved under ulimit -v; a full disk
 * does the same) removes what it made: no directory, or the empty
 * directory it found. Not under a sanitizer, whose shadow memory needs
 * more address space than the limit leaves. */
static void
test_failed_open_leaves_nothing(void **state)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    (void)state;
    skip();
#else
    struct fx *f = *state;
    char *argv[16], *out = NULL, *err = NULL;
    const char *sh = "ulimit -v 300000; exec \"$0\" \"$@\"";
    struct stat sb;
    DIR *d;
    int rc, n;

    write_npy_f32(path(f, "small.npy"), 4, 2, 0);
    argv[0] = "/bin/sh";
    argv[1] = "-c";
    argv[2] = (char *)sh;
    argv[3] = (char *)gkvt_prog("kvctl");
    argv[4] = path(f, "new");
    argv[5] = "create";
    argv[6] = "t";
    argv[7] = "--dtype";
    argv[8] = "f32";
    argv[9] = "--range";
    argv[10] = "0:10";
    argv[11] = NULL;
    rc = gkvt_run(argv, NULL, 0, &out, &err, 60);
    if (rc != 1)
        fail_msg("create under ulimit -v: exit %d\n%s", rc, err);
    assert_non_null(strstr(err, "store '"));
    assert_true(stat(path(f, "new"), &sb) != 0 && errno == ENOENT);
    free(out);
    free(err);

    /* an empty directory stays, empty */
    assert_int_equal(mkdir(path(f, "empty"), 0755), 0);
    argv[4] = path(f, "empty");
    argv[5] = "import";
    argv[6] = "t";
    argv[7] = path(f, "small.npy");
    argv[8] = NULL;
    rc = gkvt_run(argv, NULL, 0, &out, &err, 60);
    if (rc != 1)
        fail_msg("import under ulimit -v: exit %d\n%s", rc, err);
    assert_non_null(d = opendir(path(f, "empty")));
    for (n = 0; readdir(d) != NULL; n++)
        ;
    closedir(d);
    assert_int_equal(n, 2);             /* . and .. */
    free(out);
    free(err);
#endif
}

static void
test_import_existing_name(void **state)
{
    struct fx *f = *state;
    float *v = make_feat(f), *w;
    gkv_tensor_desc d;
    unsigned char *got;
    size_t len;

    w = write_npy_f32(path(f, "other.npy"), 50, 4, 7);
    assert_int_equal(kv(f, f->st, "import", "feat", path(f, "other.npy"), NULL), 1);
    assert_non_null(strstr(f->err, "tensor 'feat'"));
    assert_non_null(strstr(f->err, "already exists"));
    assert_non_null(strstr(f->err, "--replace"));
    got = dump(f->st, "feat", &d, &len);
    assert_int_equal(d.hi, N);
    assert_memory_equal(got, v, len);
    free(got);
    /* --replace swaps in the new rows, shape and all */
    assert_int_equal(kv(f, f->st, "import", "feat", path(f, "other.npy"), "--replace",
                        "--lo", "10", NULL), 0);
    got = dump(f->st, "feat", &d, &len);
    assert_int_equal(d.lo, 10);
    assert_int_equal(d.hi, 60);
    assert_int_equal(d.shape[0], 4);
    assert_memory_equal(got, w, len);
    free(got);
    /* without --lo a replacement stays at the replaced tensor's IDs (a
     * partition's export imported back), here [10, 60) */
    free(v);
    v = write_npy_f32(path(f, "third.npy"), 50, 4, 9);
    assert_int_equal(kv(f, f->st, "import", "feat", path(f, "third.npy"),
                        "--replace", NULL), 0);
    got = dump(f->st, "feat", &d, &len);
    assert_int_equal(d.lo, 10);
    assert_int_equal(d.hi, 60);
    assert_int_equal(len, 50 * 4 * sizeof(float));
    assert_memory_equal(got, v, len);
    free(got);
    /* a new tensor still starts at 0 */
    assert_int_equal(kv(f, f->st, "import", "fresh", path(f, "third.npy"), NULL), 0);
    got = dump(f->st, "fresh", &d, &len);
    assert_int_equal(d.lo, 0);
    assert_int_equal(d.hi, 50);
    free(got);
    assert_int_equal(kv(f, f->st, "ls", NULL), 0);
    assert_null(strstr(f->out, "kvctl-import"));
    free(v);
    free(w);
}

/* ---- signals ------------------------------------------------------------------ */

/* Starts kvctl with argv in the background, stdout to /dev/null and
 * stderr to 'errpath'. */
static pid_t
spawn(char *const argv[], const char *errpath)
{
    pid_t pid = fork();

    assert_true(pid >= 0);
    if (pid == 0) {
        int dn = open("/dev/null", O_RDWR), fe = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(dn, 0);
        dup2(dn, 1);
        dup2(fe, 2);
        execv(argv[0], argv);
        _exit(127);
    }
    return pid;
}

/* Waits (at most 60 s) until tensor 'name' appears in store 'st': 1. -1
 * when process 'pid' ended first (its wait status in *status), 0 when the
 * time ran out. */
static int
wait_tensor(const char *st, const char *name, pid_t pid, int *status)
{
    double end = gkvt_now_s() + 60;

    while (gkvt_now_s() < end) {
        gkv_store *s;
        gkv_tensor_desc d;
        int ok = 0;

        if (gkv_store_open(&s, st, GKV_RDONLY, NULL) == GKV_OK) {
            ok = gkv_tensor_info(s, NULL, name, &d) == GKV_OK;
            gkv_store_close(s);
        }
        if (ok)
            return 1;
        if (waitpid(pid, status, WNOHANG) == pid)
            return -1;
        gkvt_sleep_ms(1);
    }
    return 0;
}

static int
wait_status(pid_t pid)
{
    int st;

    assert_int_equal(waitpid(pid, &st, 0), pid);
    return st;
}

/* A 192 MiB import is three 64 MiB slices, each its own transaction: a
 * signal caught after the temporary tensor appears lands mid-import. */
static void
test_signals_during_import(void **state)
{
    static const int sigs[] = {SIGINT, SIGTERM, SIGKILL};
    struct fx *f = *state;
    char tmpname[128], *errtxt;
    size_t elen;
    float *v;
    struct snap s0;
    pid_t pid;
    int st, attempt = 0;

    v = write_npy_f32(path(f, "big.npy"), 3 << 17, 128, 1);
    free(v);
    v = write_npy_f32(path(f, "keep.npy"), 64, 4, 3);
    assert_int_equal(kv(f, f->st, "import", "keep", path(f, "keep.npy"), NULL), 0);
    snap_take(f, &s0);
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        char *argv[] = {(char *)gkvt_prog("kvctl"), f->st, "import", "keep",
                        path(f, "big.npy"), "--replace", NULL};

        int seen;

        pid = spawn(argv, path(f, "err.txt"));
        snprintf(tmpname, sizeof tmpname, "keep.kvctl-import-%ld", (long)pid);
        seen = wait_tensor(f->st, tmpname, pid, &st);
        assert_int_not_equal(seen, 0);
        if (seen > 0) {
            kill(pid, sigs[i]);
            st = wait_status(pid);
        }
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0 && attempt++ < 5) {
            /* it finished before the signal came (this process was not
             * scheduled meanwhile): put "keep" back and try again */
            assert_int_equal(kv(f, f->st, "import", "keep",
                                path(f, "keep.npy"), "--replace", NULL), 0);
            snap_check(f, &s0);
            i--;
            continue;
        }
        if (!WIFSIGNALED(st))
            fail_msg("kvctl import ended with status %d before signal %d landed",
                     WEXITSTATUS(st), sigs[i]);
        assert_int_equal(WTERMSIG(st), sigs[i]);
        errtxt = (char *)gkvt_read_file(path(f, "err.txt"), &elen);
        errtxt[elen] = '\0';
        if (sigs[i] != SIGKILL) {
            assert_non_null(strstr(errtxt, "interrupted"));
            assert_non_null(strstr(errtxt, "unchanged"));
            snap_check(f, &s0);
        } else {
            /* kill -9 leaves the temporary tensor, listed with a note;
             * rm removes it and the store is as before */
            assert_int_equal(kv(f, f->st, "ls", NULL), 0);
            assert_non_null(strstr(f->out, tmpname));
            assert_non_null(strstr(f->err, "interrupted import"));
            assert_non_null(strstr(f->err, "rm"));
            assert_int_equal(kv(f, f->st, "rm", tmpname, NULL), 0);
            snap_check(f, &s0);
        }
        free(errtxt);
    }
    free(s0.ls);
    free(s0.rows);
    free(v);
}

static void
test_signal_during_export(void **state)
{
    struct fx *f = *state;
    float *v = write_npy_f32(path(f, "big.npy"), 3 << 17, 128, 1);
    char tmp[4200];
    pid_t pid;
    int st;
    DIR *dp;
    struct dirent *de;
    char *argv[] = {(char *)gkvt_prog("kvctl"), f->st, "export", "big",
                    path(f, "out.npy"), NULL};

    free(v);
    assert_int_equal(kv(f, f->st, "import", "big", path(f, "big.npy"), NULL), 0);
    unlink(path(f, "big.npy"));
    for (int attempt = 0;; attempt++) {
        double end = gkvt_now_s() + 60;
        int done = 0;

        pid = spawn(argv, path(f, "err.txt"));
        snprintf(tmp, sizeof tmp, "%s.tmp-%ld", path(f, "out.npy"), (long)pid);
        while (!exists(tmp) && gkvt_now_s() < end &&
               !(done = waitpid(pid, &st, WNOHANG) == pid))
            gkvt_sleep_ms(1);
        if (!done) {
            assert_true(exists(tmp));
            kill(pid, SIGTERM);
            st = wait_status(pid);
        }
        /* finished before the signal came (this process was not
         * scheduled meanwhile): again */
        if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0) || attempt == 5)
            break;
        assert_int_equal(unlink(path(f, "out.npy")), 0);
    }
    if (!WIFSIGNALED(st))
        fail_msg("kvctl export ended with status %d before SIGTERM landed",
                 WEXITSTATUS(st));
    assert_int_equal(WTERMSIG(st), SIGTERM);
    assert_false(exists(tmp));
    assert_false(exists(path(f, "out.npy")));
    dp = opendir(f->dir);
    while ((de = readdir(dp)) != NULL)
        assert_null(strstr(de->d_name, "out.npy"));
    closedir(dp);
}

/* The progress bar is drawn when stderr is a terminal (and only then: the
 * other tests check stderr stays empty through a pipe). */
static void
test_progress_bar_on_a_tty(void **state)
{
    struct fx *f = *state;
    float *v = write_npy_f32(path(f, "feat.npy"), 100, 4, 0);
    char *argv[] = {(char *)gkvt_prog("kvctl"), f->st, "import", "feat",
                    path(f, "feat.npy"), NULL};
    char buf[8192];

    free(v);
    assert_int_equal(gkvt_run_tty(argv, buf, sizeof buf), 0);
    assert_non_null(strstr(buf, "import feat ["));
    assert_non_null(strstr(buf, "100%"));
}

/* ---- the ID-list helper (tools/common) directly ----------------------------- */

static void
test_idlist_parser(void **state)
{
    tools_idlist l = {0};
    tools_idcur c = {0};
    uint64_t out[16], a, b, dims[4];
    char err[256];

    (void)state;
    assert_int_equal(tools__idlist_parse(&l, "4,5,6,1,0:3,7", err, sizeof err), 0);
    /* 4,5,6 is one run; 0:3 stays a range */
    assert_int_equal(l.nseg, 4);
    assert_int_equal(l.count, 8);
    assert_int_equal(tools__idlist_next(&l, &c, out, 3), 3);
    assert_int_equal(out[0], 4);
    assert_int_equal(out[2], 6);
    assert_int_equal(tools__idlist_next(&l, &c, out, 16), 5);
    assert_int_equal(out[0], 1);
    assert_int_equal(out[1], 0);
    assert_int_equal(out[3], 2);
    assert_int_equal(out[4], 7);
    assert_int_equal(tools__idlist_next(&l, &c, out, 16), 0);
    tools__idlist_free(&l);
    /* a huge range costs one segment */
    assert_int_equal(tools__idlist_parse(&l, "0:18446744073709551615", err, sizeof err), 0);
    assert_int_equal(l.nseg, 1);
    assert_int_equal(l.count, UINT64_MAX);
    tools__idlist_free(&l);
    assert_int_equal(tools__idlist_parse(&l, "", err, sizeof err), 2);
    tools__idlist_free(&l);
    assert_int_equal(tools__idlist_parse(&l, ",1", err, sizeof err), 2);
    tools__idlist_free(&l);
    assert_int_equal(tools__idlist_parse(&l, "1:2:3", err, sizeof err), 2);
    tools__idlist_free(&l);
    assert_int_equal(tools__idlist_parse(&l, "+1", err, sizeof err), 2);
    tools__idlist_free(&l);
    assert_int_equal(tools__idlist_parse(&l, "@/nonexistent/ids", err, sizeof err), 1);
    tools__idlist_free(&l);
    assert_int_equal(tools__parse_range("3:9", &a, &b), 0);
    assert_int_equal(a, 3);
    assert_int_equal(b, 9);
    assert_int_equal(tools__parse_range(":9", &a, &b), -1);
    assert_int_equal(tools__parse_range("3:", &a, &b), -1);
    assert_int_equal(tools__parse_dims("4x8,2", dims, 4), 3);
    assert_int_equal(dims[1], 8);
    assert_int_equal(tools__parse_dims("1,2,3,4,5", dims, 4), -1);
    assert_int_equal(tools__parse_dims("4,", dims, 4), -1);
    assert_int_equal(tools__parse_dims("-4", dims, 4), -1);
    assert_int_equal(tools__parse_u64("010", &a), 0);
    assert_int_equal(a, 10);
    assert_int_equal(tools__parse_u64("0x1f", &a), 0);
    assert_int_equal(a, 31);
    assert_int_equal(tools__parse_u64("1 ", &a), -1);
}

/* tools__port_accepts (gkv-launch's and kvctl's look for a running server)
 * on a local port nobody listens on. Linux hands connects to one port
 * successive ephemeral ports, so some thousands of connects to an even
 * port of the ephemeral range are given that port as their own, and the
 * socket connects to itself: that is not a server (it made gkv-launch
 * report a free port as in use, and a test see a stopped server). On
 * 'host' of 'family' (loopback), over twice the range [lo, hi]; 0 when the
 * family has no loopback here (IPv6 off), else 1. */
static int
self_connect_refused(int family, const char *host, unsigned lo, unsigned hi)
{
    struct sockaddr_storage ss;
    struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
    socklen_t len = family == AF_INET ? sizeof *a4 : sizeof *a6;
    unsigned port = 0;
    int one = 1;

    memset(&ss, 0, sizeof ss);
    ss.ss_family = (sa_family_t)family;
    if (family == AF_INET)
        a4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    else
        a6->sin6_addr = in6addr_loopback;
    /* an even port in the ephemeral range that is free */
    for (unsigned k = 0; k < 200 && port == 0; k++) {
        unsigned p = (lo + (((unsigned)getpid() * 2654435761u + 77u * family +
                             k * 7919u) % (hi - lo))) & ~1u;
        int s = socket(family, SOCK_STREAM, 0);

        if (s < 0)
            return 0;
        if (p < lo)
            p += 2;
        if (family == AF_INET)
            a4->sin_port = htons((uint16_t)p);
        else
            a6->sin6_port = htons((uint16_t)p);
        setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(s, (struct sockaddr *)&ss, len) == 0)
            port = p;
        close(s);
    }
    if (port == 0)
        return 0;
    for (unsigned i = 0; i < 2 * (hi - lo + 1); i++)
        if (tools__port_accepts(host, port, 1000))
            fail_msg("%s port %u accepts after %u tries, with nothing "
                     "listening", host, port, i);
    return 1;
}

static void
test_port_accepts_self_connect(void **state)
{
    unsigned lo = 32768, hi = 60999;
    char *r = gkvt_slurp("/proc/sys/net/ipv4/ip_local_port_range");
    int ls;
    struct sockaddr_in a;
    socklen_t al;

    (void)state;
    if (r != NULL)
        sscanf(r, "%u %u", &lo, &hi);
    free(r);
    assert_int_equal(self_connect_refused(AF_INET, "127.0.0.1", lo, hi), 1);
    (void)self_connect_refused(AF_INET6, "::1", lo, hi);   /* where there is one */

    /* and a port something listens on does accept (another port: the one
     * above may still be held by the closed self-connection) */
    ls = socket(AF_INET, SOCK_STREAM, 0);
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(ls, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(ls, 4), 0);
    al = sizeof a;
    assert_int_equal(getsockname(ls, (struct sockaddr *)&a, &al), 0);
    assert_int_equal(tools__port_accepts("127.0.0.1", ntohs(a.sin_port), 1000), 1);
    close(ls);
}

/* ---- kvctl --server -------------------------------------------------------- */

/* Starts gkv-server on f->st (extra: NULL-terminated arguments), listening
 * on a free port; returns the port. */
static int
server_start(struct fx *f, const char *const *extra)
{
    char cfg[4200], log[4200], text[64];
    static unsigned seq;

    snprintf(cfg, sizeof cfg, "%s/ip.cfg", f->dir);
    snprintf(log, sizeof log, "%s/server.log", f->dir);
    for (int attempt = 0; attempt < 50; attempt++) {
        int port = gkvt_port_candidate(seq++ + 3333u, 1, 1);
        char *argv[20];
        int n = 0;
        FILE *fp;
        pid_t pid;

        if (!gkvt_port_free(port))
            continue;
        snprintf(text, sizeof text, "127.0.0.1 %d\n", port);
        fp = fopen(cfg, "w");
        assert_non_null(fp);
        fputs(text, fp);
        fclose(fp);
        argv[n++] = (char *)gkvt_prog("gkv-server");
        argv[n++] = "--store";
        argv[n++] = f->st;
        argv[n++] = "--ip-config";
        argv[n++] = cfg;
        argv[n++] = "--machine";
        argv[n++] = "0";
        for (int i = 0; extra != NULL && extra[i] != NULL; i++)
            argv[n++] = (char *)extra[i];
        argv[n] = NULL;
        unlink(log);
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            int fe = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
            dup2(fe, 2);
            execv(argv[0], argv);
            _exit(127);
        }
        f->srv = pid;
        for (int i = 0; i < 2000; i++) {
            char *t = NULL;
            int st;
            FILE *lf = fopen(log, "r");
            if (lf != NULL) {
                t = calloc(1, 1 << 16);
                if (fread(t, 1, (1 << 16) - 1, lf) == 0)
                    t[0] = '\0';
                fclose(lf);
            }
            if (t != NULL && strstr(t, "listening on") != NULL) {
                free(t);
                return port;
            }
            free(t);
            if (waitpid(pid, &st, WNOHANG) == pid) {
                f->srv = 0;
                break;              /* the port was taken: another one */
            }
            usleep(10000);
        }
        if (f->srv > 0)
            fail_msg("gkv-server did not start");
    }
    fail_msg("no free port for gkv-server");
    return -1;
}

/* Whether the server still runs after ms milliseconds. */
static int
server_alive_after(struct fx *f, int ms)
{
    int st;

    for (int i = 0; i < ms / 10; i++) {
        if (waitpid(f->srv, &st, WNOHANG) == f->srv) {
            f->srv = 0;
            return 0;
        }
        usleep(10000);
    }
    return 1;
}

static void
test_server_commands(void **state)
{
    struct fx *f = *state;
    char addr[64], cfg[4200], *local;
    const char *none[] = {NULL};
    gkv_client *member;
    gkv_client_opts o = {0};
    json_t *j;
    json_error_t je;
    int port, st;

    assert_int_equal(kv(f, f->st, "create", "feat", "--dtype", "f32",
                        "--range", "10:110", "--shape", "3", "--init",
                        "uniform:0,1", NULL), 0);
    assert_int_equal(kv(f, f->st, "get", "feat", "10,50:53,109", NULL), 0);
    local = strdup(f->out);
    port = server_start(f, none);
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);

    /* the same rows as from the store itself */
    assert_int_equal(kv(f, "--server", addr, "get", "feat", "10,50:53,109", NULL), 0);
    assert_string_equal(f->out, local);
    free(local);
    assert_int_equal(kv(f, "--server", addr, "ls", NULL), 0);
    assert_non_null(strstr(f->out, "feat"));
    assert_non_null(strstr(f->out, "[10,110)"));
    assert_int_equal(kv(f, "--json", "--server", addr, "info", "feat", NULL), 0);
    j = json_loads(f->out, 0, &je);
    assert_non_null(j);
    assert_int_equal(json_integer_value(json_object_get(j, "lo")), 10);
    assert_int_equal(json_integer_value(json_object_get(j, "hi")), 110);
    /* a server's schema has no chunk count or id: null, not 0 */
    assert_true(json_is_null(json_object_get(j, "nchunks")));
    assert_true(json_is_null(json_object_get(j, "id")));
    json_decref(j);
    assert_int_equal(kv(f, "--server", addr, "info", "feat", NULL), 0);
    assert_non_null(strstr(f->out, "chunks:      -\n"));
    assert_non_null(strstr(f->out, "id:          -\n"));
    assert_int_equal(kv(f, "--server", addr, "--group", "ops", "stat", NULL), 0);
    assert_non_null(strstr(f->out, "keep-alive:   no"));
    assert_non_null(strstr(f->out, "pulls:        1 (5 rows)"));
    /* errors: an ID outside, a missing tensor, a command that writes */
    assert_int_equal(kv(f, "--server", addr, "get", "feat", "5", NULL), 1);
    assert_non_null(strstr(f->err, "ID 5"));
    assert_int_equal(kv(f, "--server", addr, "info", "nope", NULL), 1);
    assert_non_null(strstr(f->err, "nope"));
    assert_int_equal(kv(f, "--server", addr, "verify", NULL), 2);
    assert_non_null(strstr(f->err, "not available with --server"));
    /* a name that does not resolve, a port nothing listens on: named at
     * once, not after the handshake's 10 s */
    assert_int_equal(kv(f, "--server", "nosuchhost.invalid:30050", "ls", NULL), 1);
    assert_non_null(strstr(f->err, "cannot resolve host 'nosuchhost.invalid'"));
    {
        char down[64];
        int dp = gkvt_port_base(1);
        double t0 = gkvt_now_s();

        snprintf(down, sizeof down, "127.0.0.1:%d", dp);
        assert_int_equal(kv(f, "--server", down, "get", "feat", "10", NULL), 1);
        assert_true(gkvt_now_s() - t0 < 5);
        assert_non_null(strstr(f->err, "is down: nothing accepts connections"));
        assert_non_null(strstr(f->err, down));
        /* a usage error is one before any server is asked */
        assert_int_equal(kv(f, "--server", down, "put", "feat", "10", "x", NULL), 2);
        assert_non_null(strstr(f->err, "'x' is not a number"));
        assert_int_equal(kv(f, "--server", down, "create", "c", "--dtype", "f32",
                            "--range", "0:4", "--init", "uniform:1,0", NULL), 2);
    }
    assert_int_equal(kv(f, "--server", "nocolon", "ls", NULL), 1);
    assert_non_null(strstr(f->err, "HOST:PORT"));
    assert_int_equal(kv(f, f->st, "ls", "--group", "g", NULL), 2);
    assert_non_null(strstr(f->err, "--group goes with --server"));

    /* kvctl joined and left several times: a server without --keep-alive
     * still runs (an observer never stops it) */
    assert_true(server_alive_after(f, 300));
    /* a job's member joins; kvctl comes and goes meanwhile; the member's
     * leaving stops the server */
    snprintf(cfg, sizeof cfg, "%s/ip.cfg", f->dir);
    o.timeout_ms = 5000;
    if (gkv_client_connect(&member, cfg, NULL, "job", 0, &o) != GKV_OK)
        fail_msg("connect: %s", gkv_net_errmsg());
    assert_int_equal(kv(f, "--server", addr, "stat", NULL), 0);
    assert_non_null(strstr(f->out, "sessions:     2"));
    assert_true(server_alive_after(f, 200));
    assert_int_equal(gkv_client_close(member), GKV_OK);
    for (int i = 0; i < 500 && f->srv > 0; i++) {
        if (waitpid(f->srv, &st, WNOHANG) == f->srv) {
            f->srv = 0;
            assert_true(WIFEXITED(st));
            assert_int_equal(WEXITSTATUS(st), 0);
        }
        usleep(10000);
    }
    assert_int_equal(f->srv, 0);
}

/* Writes through one server: put, and import over a write-back tensor
 * (the server's RAM copy, read back through it and, after its flush at
 * SIGTERM, from the store); an optimizer-state restore that a bad step
 * count stops in its second batch keeps the first batch, leaves the rest
 * as it was, and says which rows are which. */
static void
test_server_writes(void **state)
{
    struct fx *f = *state;
    const char *wb[] = {"--writeback", "emb", "--nosync", NULL};
    enum { BIG = 1200000, BATCH = 1 << 20 };   /* i64 rows per batch */
    char addr[64], shape[64];
    float *v;
    int64_t *t;
    unsigned char *b;
    size_t hl;
    int port, st;

    assert_int_equal(kv(f, f->st, "create", "emb", "--dtype", "f32",
                        "--range", "0:40", "--shape", "4", NULL), 0);
    assert_int_equal(kv(f, f->st, "create", "big", "--dtype", "f32",
                        "--range", "0:1200000", NULL), 0);
    v = write_npy_f32(path(f, "v.npy"), 40, 4, 3);
    port = server_start(f, wb);
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);

    assert_int_equal(kv(f, "--server", addr, "put", "emb", "2", "1,2,3,4.5", NULL), 0);
    assert_int_equal(kv(f, "--server", addr, "get", "emb", "2", NULL), 0);
    assert_string_equal(f->out, "2: 1 2 3 4.5\n");
    assert_int_equal(kv(f, "--server", addr, "put", "emb", "2", "1,2", NULL), 2);
    assert_non_null(strstr(f->err, "rows hold 4 values, got 2"));
    assert_int_equal(kv(f, "--server", addr, "import", "emb", path(f, "v.npy"),
                        "--replace", NULL), 0);
    assert_int_equal(kv(f, "--server", addr, "export", "emb", path(f, "back.npy"),
                        "--raw", NULL), 0);
    b = gkvt_read_file(path(f, "back.npy"), &hl);
    assert_int_equal(hl, 40 * 4 * 4);
    assert_memory_equal(b, v, hl);
    free(b);

    /* big#adam_t: 5 everywhere, but -1 at a row of the second batch */
    t = malloc((size_t)BIG * 8 + 128);
    b = (unsigned char *)t;
    snprintf(shape, sizeof shape, "(%d,)", BIG);
    hl = npy_header(b, "<i8", shape);
    for (size_t i = 0; i < BIG; i++) {
        int64_t x = i == BATCH + 5000 ? -1 : 5;
        memcpy(b + hl + i * 8, &x, 8);
    }
    gkvt_write_file(path(f, "t.npy"), b, hl + (size_t)BIG * 8);
    free(t);
    /* what the server's store would refuse is refused before the first
     * batch (a store's own restore refuses it in one transaction) */
    assert_int_equal(kv(f, "--server", addr, "import", "big#adam_t",
                        path(f, "t.npy"), NULL), 1);
    assert_non_null(strstr(f->err, "row 1053576 holds step count -1"));
    assert_int_equal(kv(f, "--server", addr, "get", "big#adam_t",
                        "0,1048575,1048576,1199999", NULL), 0);
    assert_string_equal(f->out, "0: 0\n1048575: 0\n1048576: 0\n1199999: 0\n");

    /* SIGTERM: the write-back server writes its RAM copy to the store */
    assert_int_equal(kill(f->srv, SIGTERM), 0);
    assert_int_equal(waitpid(f->srv, &st, 0), f->srv);
    f->srv = 0;
    assert_int_equal(kv(f, f->st, "export", "emb", path(f, "st.npy"), "--raw",
                        NULL), 0);
    b = gkvt_read_file(path(f, "st.npy"), &hl);
    assert_int_equal(hl, 40 * 4 * 4);
    assert_memory_equal(b, v, hl);
    free(b);
    free(v);
}

/* An import through a server that fails midway (its store's disk fills
 * in the second batch) says which rows it wrote and which it may have
 * written in part; those it wrote hold the file's rows, the rest are as
 * they were. Root only (the store on a 12 MB tmpfs). */
static void
test_server_import_partial(void **state)
{
    struct fx *f = *state;
    const char *none[] = {NULL};
    enum { ROWS = 4000000 };            /* 16 MB of f32: batches of 2 Mi */
    char addr[64], mnt[3000], shape[64];
    unsigned char *b;
    size_t hl;
    int port;

    snprintf(mnt, sizeof mnt, "%s/mnt", f->dir);
    assert_int_equal(mkdir(mnt, 0755), 0);
    if (mount("gkvt", mnt, "tmpfs", 0, "size=12m") != 0)
        skip();                         /* needs CAP_SYS_ADMIN */
    snprintf(f->st, sizeof f->st, "%s/st", mnt);
    assert_int_equal(kv(f, f->st, "create", "big", "--dtype", "f32", "--range",
                        "0:4000000", NULL), 0);
    b = malloc((size_t)ROWS * 4 + 128);
    snprintf(shape, sizeof shape, "(%d,)", ROWS);
    hl = npy_header(b, "<f4", shape);
    for (size_t i = 0; i < ROWS; i++) {
        float x = (float)i + 0.5f;
        memcpy(b + hl + i * 4, &x, 4);
    }
    gkvt_write_file(path(f, "big.npy"), b, hl + (size_t)ROWS * 4);
    free(b);
    port = server_start(f, none);
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    assert_int_equal(kv(f, "--server", addr, "import", "big", path(f, "big.npy"),
                        "--replace", NULL), 1);
    {
        /* which batch the disk refuses depends on LMDB's page overhead */
        const char *m = strstr(f->err, "import: rows [0, ");
        unsigned long long x = 0, y = 0;
        char ids[128], want2[160];

        if (m == NULL || sscanf(m, "import: rows [0, %llu) of 'big' were "
                                "written, rows [%llu, ", &x, &y) != 2 ||
            x != y || x == 0 || x >= ROWS)
            fail_msg("stderr: %s", f->err);
        assert_non_null(strstr(f->err, "store is full"));
        assert_non_null(strstr(f->err, "may be in part, the rest are as they "
                                       "were: import again to finish"));
        /* written: the file's rows; past the failed batch: zeros */
        snprintf(ids, sizeof ids, "0,%llu,%d", x - 1, ROWS - 1);
        assert_int_equal(kv(f, "--server", addr, "get", "big", ids, NULL), 0);
        snprintf(want2, sizeof want2, "0: 0.5\n%llu: %.9g\n%d: 0\n", x - 1,
                 (double)((float)(x - 1) + 0.5f), ROWS - 1);
        assert_string_equal(f->out, want2);
    }
    kill(f->srv, SIGKILL);
    waitpid(f->srv, NULL, 0);
    f->srv = 0;
    umount(mnt);
}

static void
test_server_token(void **state)
{
    struct fx *f = *state;
    char tok[4200], addr[64];
    const char *extra[] = {"--token-file", tok, NULL};
    int port, fd;

    snprintf(tok, sizeof tok, "%s/token", f->dir);
    fd = open(tok, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "s3cret\n", 7), 7);
    close(fd);
    assert_int_equal(kv(f, f->st, "create", "t", "--dtype", "i64", "--range",
                        "0:4", "--init", "const:7", NULL), 0);
    port = server_start(f, extra);
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    assert_int_equal(kv(f, "--server", addr, "ls", NULL), 1);
    assert_non_null(strstr(f->err, "requires a token"));
    assert_int_equal(kv(f, "--server", addr, "--token-file", tok, "get", "t",
                        "0:4", NULL), 0);
    assert_string_equal(f->out, "0: 7\n1: 7\n2: 7\n3: 7\n");
    assert_true(server_alive_after(f, 200));
}

/* Writes an int64 .npy of n values (rows x cols, cols 0: 1-d). */
static void
write_npy_i64(const char *p, const int64_t *v, uint64_t n, uint64_t cols)
{
    uint64_t shape[2] = {cols ? n / cols : n, cols};
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);

    assert_true(fd >= 0);
    GKVT_OK(gkv_npy_write_header(fd, GKV_I64, cols ? 2 : 1, shape, NULL, NULL, 0));
    assert_int_equal(write(fd, v, n * 8), (ssize_t)(n * 8));
    close(fd);
}

/* No FILE.tmp-* (nor anything else named after 'base') in f->dir but the
 * names in 'allowed' (NULL-terminated). */
static void
no_leftovers(struct fx *f, const char *base, const char *const *allowed)
{
    DIR *dp = opendir(f->dir);
    struct dirent *de;

    assert_non_null(dp);
    while ((de = readdir(dp)) != NULL) {
        int ok = 0;
        if (strncmp(de->d_name, base, strlen(base)) != 0)
            continue;
        for (int i = 0; allowed != NULL && allowed[i] != NULL; i++)
            ok |= strcmp(de->d_name, allowed[i]) == 0;
        if (!ok)
            fail_msg("'%s' left in %s", de->d_name, f->dir);
    }
    closedir(dp);
}

/* kvctl --server ADDR export: the file holds every row as the server
 * serves it (after a push the store's copy may lag; the pull does not),
 * byte for byte what a local export writes and what a client pulls;
 * --orig-ids puts row i at new ID MAPPING[i]; bad input fails with a
 * clear message and leaves no file, not even a temporary one. */
static void
test_server_export(void **state)
{
    struct fx *f = *state;
    const char *none[] = {NULL}, *only_keep[] = {"out.npy", NULL};
    char addr[64], *errs;
    unsigned char *local, *remote, *want;
    size_t llen, rlen, hl;
    uint64_t ids[100], shape[2] = {100, 3};
    int64_t map[100], bad[100];
    float rows[300], push[6] = {1, 2, 3, -4, -5, -6};
    gkv_client *cl;
    gkv_client_opts o = {0};
    unsigned char hdr[256];
    int port;

    assert_int_equal(kv(f, f->st, "create", "emb", "--dtype", "f32",
                        "--range", "10:110", "--shape", "3", "--init",
                        "uniform:-1,1", "--seed", "5", NULL), 0);
    assert_int_equal(kv(f, f->st, "export", "emb", path(f, "local.npy"), NULL), 0);
    port = server_start(f, none);
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);

    /* the same file as a local export */
    assert_int_equal(kv(f, "--server", addr, "export", "emb", path(f, "out.npy"),
                        NULL), 0);
    assert_string_equal(f->err, "");
    local = gkvt_read_file(path(f, "local.npy"), &llen);
    remote = gkvt_read_file(path(f, "out.npy"), &rlen);
    assert_int_equal(llen, rlen);
    assert_memory_equal(local, remote, llen);
    free(remote);

    /* after a push, the rows a client pulls: the pushed ones included */
    o.timeout_ms = 5000;
    o.flags = GKV_CLIENT_OBSERVER | GKV_CLIENT_NO_HEARTBEAT;
    if (gkv_client_connect_addr(&cl, addr, NULL, "test", 1, &o) != GKV_OK)
        fail_msg("connect: %s", gkv_net_errmsg());
    ids[0] = 10;
    ids[1] = 109;
    GKVT_OK(gkv_client_push(cl, "emb", ids, 2, push, sizeof push, NULL));
    for (int i = 0; i < 100; i++)
        ids[i] = 10 + (uint64_t)i;
    GKVT_OK(gkv_client_pull(cl, "emb", ids, 100, rows, sizeof rows));
    assert_memory_equal(rows, push, 3 * sizeof(float));
    assert_memory_equal(rows + 297, push + 3, 3 * sizeof(float));
    assert_int_equal(kv(f, "--server", addr, "export", "emb", path(f, "out.npy"),
                        NULL), 0);
    remote = gkvt_read_file(path(f, "out.npy"), &rlen);
    GKVT_OK(gkv_npy_header_format(GKV_F32, 2, shape, hdr, sizeof hdr, &hl,
                                  NULL, 0));
    assert_int_equal(rlen, hl + sizeof rows);
    assert_memory_equal(remote, hdr, hl);
    assert_memory_equal(remote + hl, rows, sizeof rows);
    assert_int_equal(hl, 128);
    /* the header is the local export's; the rows differ only where pushed */
    assert_memory_equal(remote, local, hl);
    assert_memory_equal(remote + hl + 12, local + hl + 12, sizeof rows - 24);
    free(remote);
    free(local);
    /* --range and --raw as locally */
    assert_int_equal(kv(f, "--server", addr, "export", "emb", path(f, "out.raw"),
                        "--raw", "--range", "100:110", NULL), 0);
    remote = gkvt_read_file(path(f, "out.raw"), &rlen);
    assert_int_equal(rlen, 10 * 12);
    assert_memory_equal(remote, rows + 90 * 3, rlen);
    free(remote);

    /* --orig-ids: original ID i -> new ID 10 + (37 i + 11) mod 100 */
    for (int i = 0; i < 100; i++)
        map[i] = 10 + (37 * i + 11) % 100;
    write_npy_i64(path(f, "node-_N.npy"), map, 100, 0);
    assert_int_equal(kv(f, "--server", addr, "export", "emb", path(f, "out.npy"),
                        "--orig-ids", path(f, "node-_N.npy"), NULL), 0);
    for (int i = 0; i < 100; i++)
        ids[i] = (uint64_t)map[i];
    want = malloc(sizeof rows);
    GKVT_OK(gkv_client_pull(cl, "emb", ids, 100, want, sizeof rows));
    for (int i = 0; i < 100; i++)        /* the same as reordering by hand */
        assert_memory_equal(want + i * 12, rows + (map[i] - 10) * 3, 12);
    remote = gkvt_read_file(path(f, "out.npy"), &rlen);
    assert_int_equal(rlen, hl + sizeof rows);
    assert_memory_equal(remote, hdr, hl);
    assert_memory_equal(remote + hl, want, sizeof rows);
    free(remote);
    /* an N x 1 mapping is the same; so is a local export with it (the
     * store is shared with the running server, read-only) */
    write_npy_i64(path(f, "col.npy"), map, 100, 1);
    assert_int_equal(kv(f, "--server", addr, "export", "emb", path(f, "col.npy.out"),
                        "--orig-ids", path(f, "col.npy"), NULL), 0);
    remote = gkvt_read_file(path(f, "col.npy.out"), &rlen);
    assert_int_equal(rlen, hl + sizeof rows);
    assert_memory_equal(remote + hl, want, sizeof rows);
    free(remote);
    assert_int_equal(kv(f, f->st, "export", "emb", path(f, "loc-orig.npy"),
                        "--orig-ids", path(f, "node-_N.npy"), NULL), 0);
    remote = gkvt_read_file(path(f, "loc-orig.npy"), &rlen);
    assert_int_equal(rlen, hl + sizeof rows);
    assert_memory_equal(remote, hdr, hl);
    assert_memory_equal(remote + hl, want, sizeof rows);
    free(remote);
    free(want);
    GKVT_OK(gkv_client_close(cl));

    /* several batches: 100 rows of 256 KiB (8 MiB a pull), created before
     * the server listed its tensors, so it is found by a refresh */
    assert_int_equal(kv(f, f->st, "create", "wide", "--dtype", "f32",
                        "--range", "0:100", "--shape", "65536", "--init",
                        "uniform:0,1", NULL), 0);
    assert_int_equal(kv(f, f->st, "export", "wide", path(f, "wl.npy"), NULL), 0);
    assert_int_equal(kv(f, "--server", addr, "export", "wide", path(f, "wr.npy"),
                        NULL), 0);
    local = gkvt_read_file(path(f, "wl.npy"), &llen);
    remote = gkvt_read_file(path(f, "wr.npy"), &rlen);
    assert_int_equal(llen, 128 + (size_t)100 * 65536 * 4);
    assert_int_equal(llen, rlen);
    assert_memory_equal(local, remote, llen);
    free(remote);
    for (int i = 0; i < 100; i++)
        map[i] = 99 - i;
    write_npy_i64(path(f, "rev.npy"), map, 100, 0);
    assert_int_equal(kv(f, "--server", addr, "export", "wide", path(f, "wr.npy"),
                        "--orig-ids", path(f, "rev.npy"), NULL), 0);
    remote = gkvt_read_file(path(f, "wr.npy"), &rlen);
    assert_int_equal(rlen, llen);
    assert_memory_equal(remote, local, 128);
    for (int i = 0; i < 100; i++)
        if (memcmp(remote + 128 + (size_t)i * 262144,
                   local + 128 + (size_t)(99 - i) * 262144, 262144) != 0)
            fail_msg("row %d of the --orig-ids export is not row %d", i, 99 - i);
    free(remote);
    free(local);
    unlink(path(f, "wl.npy"));
    unlink(path(f, "wr.npy"));

    /* ---- bad input: exit 1, a message, out.npy as it was, nothing else */
    gkvt_write_file(path(f, "out.npy"), "keep", 4);
    assert_int_equal(kv(f, "--server", addr, "export", "nope", path(f, "out.npy"),
                        NULL), 1);
    assert_non_null(strstr(f->err, "tensor 'nope'"));
    assert_non_null(strstr(f->err, "no such tensor"));
    no_leftovers(f, "out.npy", only_keep);
    /* mapping files: missing, not .npy, float, 2 columns, an ID outside */
    assert_int_equal(kv(f, "--server", addr, "export", "emb", path(f, "out.npy"),
                        "--orig-ids", path(f, "missing.npy"), NULL), 1);
    assert_non_null(strstr(f->err, "missing.npy"));
    assert_non_null(strstr(f->err, "No such file"));
    gkvt_write_file(path(f, "junk.npy"), "not a numpy file at all", 23);
    assert_int_equal(kv(f, "--server", addr, "export", "emb", path(f, "out.npy"),
                        "--orig-ids", path(f, "junk.npy"), NULL), 1);
    assert_non_null(strstr(f->err, "junk.npy"));
    assert_non_null(strstr(f->err, "bad magic"));
    free(write_npy_f32(path(f, "f.npy"), 100, 1, 0));
    assert_int_equal(kv(f, "--server", addr, "export", "emb", path(f, "out.npy"),
                        "--orig-ids", path(f, "f.npy"), NULL), 1);
    assert_non_null(strstr(f->err, "expected an int64 array"));
    assert_non_null(strstr(f->err, "f32"));
    write_npy_i64(path(f, "two.npy"), map, 100, 2);
    assert_int_equal(kv(f, "--server", addr, "export", "emb", path(f, "out.npy"),
                        "--orig-ids", path(f, "two.npy"), NULL), 1);
    assert_non_null(strstr(f->err, "expected an int64 array"));
    memcpy(bad, map, sizeof bad);
    bad[57] = 110;
    write_npy_i64(path(f, "bad.npy"), bad, 100, 0);
    assert_int_equal(kv(f, "--server", addr, "export", "emb", path(f, "out.npy"),
                        "--orig-ids", path(f, "bad.npy"), NULL), 1);
    assert_non_null(strstr(f->err, "original ID 57 maps to 110, which is not a "
                                   "row of tensor 'emb' [10, 110)"));
    bad[57] = -1;
    write_npy_i64(path(f, "bad.npy"), bad, 100, 0);
    assert_int_equal(kv(f, "--server", addr, "export", "emb", path(f, "out.npy"),
                        "--orig-ids", path(f, "bad.npy"), NULL), 1);
    assert_non_null(strstr(f->err, "original ID 57 maps to -1"));
    no_leftovers(f, "out.npy", only_keep);
    errs = (char *)gkvt_read_file(path(f, "out.npy"), &rlen);
    assert_int_equal(rlen, 4);
    assert_memory_equal(errs, "keep", 4);
    free(errs);
    /* where the file cannot go */
    assert_int_equal(kv(f, "--server", addr, "export", "emb",
                        path(f, "no/such/dir/out.npy"), NULL), 1);
    assert_non_null(strstr(f->err, "cannot create"));
    assert_non_null(strstr(f->err, "No such file or directory"));
    assert_false(exists(path(f, "no")));
    assert_int_equal(mkdir(path(f, "adir"), 0755), 0);
    assert_int_equal(kv(f, "--server", addr, "export", "emb", path(f, "adir"),
                        NULL), 1);
    assert_non_null(strstr(f->err, "not a regular file"));
    no_leftovers(f, "adir", (const char *const[]){"adir", NULL});
    /* usage */
    assert_int_equal(kv(f, "--server", addr, "export", "emb", path(f, "out.npy"),
                        "--orig-ids", path(f, "node-_N.npy"), "--range", "10:20",
                        NULL), 2);
    assert_int_equal(kv(f, "--server", addr, "get", "emb", "10",
                        "--orig-ids", path(f, "node-_N.npy"), NULL), 2);
    /* the observer's runs never stopped the server */
    assert_true(server_alive_after(f, 100));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_idlist_parser),
        cmocka_unit_test(test_port_accepts_self_connect),
        cmocka_unit_test_setup_teardown(test_help_and_version, setup, teardown),
        cmocka_unit_test_setup_teardown(test_usage_errors_exit_2, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_store_is_an_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_import_npy_rows_match, setup, teardown),
        cmocka_unit_test_setup_teardown(test_import_other_dtypes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_export_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_raw_import_export, setup, teardown),
        cmocka_unit_test_setup_teardown(test_get_each_id_syntax, setup, teardown),
        cmocka_unit_test_setup_teardown(test_put_then_get, setup, teardown),
        cmocka_unit_test_setup_teardown(test_create_and_json, setup, teardown),
        cmocka_unit_test_setup_teardown(test_huge_range_output, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rm_rename_ls, setup, teardown),
        cmocka_unit_test_setup_teardown(test_verify_finds_flipped_byte, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_import_changes_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failed_open_leaves_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_import_orig_ids, setup, teardown),
        cmocka_unit_test_setup_teardown(test_import_existing_name, setup, teardown),
        cmocka_unit_test_setup_teardown(test_signals_during_import, setup, teardown),
        cmocka_unit_test_setup_teardown(test_signal_during_export, setup, teardown),
        cmocka_unit_test_setup_teardown(test_progress_bar_on_a_tty, setup, teardown),
        cmocka_unit_test_setup_teardown(test_server_commands, setup, teardown),
        cmocka_unit_test_setup_teardown(test_server_writes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_server_import_partial, setup, teardown),
        cmocka_unit_test_setup_teardown(test_server_token, setup, teardown),
        cmocka_unit_test_setup_teardown(test_server_export, setup, teardown),
    };

    return cmocka_run_group_tests_name("kvctl", tests, NULL, NULL);
}
