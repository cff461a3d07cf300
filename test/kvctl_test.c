/* kvctl_test.c - build/kvctl run as a process on real temporary stores:
 * every command, each ID syntax, --json read back with jansson, exit
 * statuses, bad input files, corruption found by verify, and imports and
 * exports stopped by signals that must leave the store and the directory
 * exactly as they were. kvctl --server against a real gkv-server:
 * kvctl_server_test.c. */
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
#include "gkvt_kvctl.h"
#include "gkv.h"
#include "idlist.h"
#include "util.h"

#define W 16            /* row width of the f32 test tensor */
#define N 3000          /* its rows */

/* kvctl with the arguments that follow (NULL-terminated); f->out and
 * f->err get what it wrote; returns its exit status. */
#define kv gkvt_kvctl

/* DIR/NAME of the test's directory (gkvt_path). */
static char *
path(struct gkvt_kvctl_fx *f, const char *name)
{
    return gkvt_path(f->dir, name);
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

/* The f32 test tensor 'feat' (N x W, gkvt_npy_val(row, col)) in f->st. */
static float *
make_feat(struct gkvt_kvctl_fx *f)
{
    float *v = gkvt_npy_f32(path(f, "feat.npy"), N, W, 0);

    assert_int_equal(kv(f, f->st, "import", "feat", path(f, "feat.npy"), NULL), 0);
    return v;
}

/* Checks one "ID: v0 v1 ..." line against gkvt_npy_val(). */
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
        if (x != gkvt_npy_val(id, c))
            fail_msg("row %llu col %llu: got %.9g, want %.9g",
                     (unsigned long long)id, (unsigned long long)c, x,
                     gkvt_npy_val(id, c));
        line = end;
    }
    assert_int_equal(*line, '\n');
    return line + 1;
}

static void
check_get(struct gkvt_kvctl_fx *f, const uint64_t *ids, size_t n)
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
    struct gkvt_kvctl_fx *f = *state;
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
    assert_false(gkvt_exists(f->st));
}

static void
test_usage_errors_exit_2(void **state)
{
    struct gkvt_kvctl_fx *f = *state;
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
    struct gkvt_kvctl_fx *f = *state;
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
        assert_false(gkvt_exists(f->st));
    }
}

/* ---- import, export ------------------------------------------------------ */

static void
test_import_npy_rows_match(void **state)
{
    struct gkvt_kvctl_fx *f = *state;
    float *v = gkvt_npy_f32(path(f, "feat.npy"), N, W, 0);
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
    struct gkvt_kvctl_fx *f = *state;
    unsigned char b[128 + 64];
    gkv_tensor_desc d;
    unsigned char *got;
    size_t hl, len;
    int64_t i64[6] = {-5, 0, 7, INT64_MAX, INT64_MIN, 42};
    double f64[3] = {0.1, -1e300, 3.0};
    uint16_t f16[4] = {0x3c00, 0xb800, 0x3555, 0x7bff};   /* 1 -0.5 0.333 65504 */
    int8_t i8[4] = {-128, -1, 0, 127};

    hl = gkvt_npy_header(b, "<i8", "(3, 2)");
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

    hl = gkvt_npy_header(b, "<f8", "(3,)");
    memcpy(b + hl, f64, sizeof f64);
    gkvt_write_file(path(f, "d.npy"), b, hl + sizeof f64);
    assert_int_equal(kv(f, f->st, "import", "dbl", path(f, "d.npy"), NULL), 0);
    assert_int_equal(kv(f, f->st, "get", "dbl", "0,1,2", NULL), 0);
    assert_string_equal(f->out, "0: 0.10000000000000001\n1: -1.0000000000000001e+300\n2: 3\n");

    hl = gkvt_npy_header(b, "<f2", "(1, 4)");
    memcpy(b + hl, f16, sizeof f16);
    gkvt_write_file(path(f, "h.npy"), b, hl + sizeof f16);
    assert_int_equal(kv(f, f->st, "import", "half", path(f, "h.npy"), NULL), 0);
    assert_int_equal(kv(f, f->st, "get", "half", "0", NULL), 0);
    assert_string_equal(f->out, "0: 1 -0.5 0.333251953 65504\n");

    hl = gkvt_npy_header(b, "|i1", "(2, 2)");
    memcpy(b + hl, i8, sizeof i8);
    gkvt_write_file(path(f, "b.npy"), b, hl + sizeof i8);
    assert_int_equal(kv(f, f->st, "import", "bytes", path(f, "b.npy"), NULL), 0);
    assert_int_equal(kv(f, f->st, "get", "bytes", "1,0", NULL), 0);
    assert_string_equal(f->out, "1: 0 127\n0: -128 -1\n");

    /* numpy bool (a DGL mask): stored as u8, the bytes as they are */
    {
        unsigned char mask[6] = {1, 0, 0, 1, 1, 0};
        hl = gkvt_npy_header(b, "|b1", "(6,)");
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
    struct gkvt_kvctl_fx *f = *state;
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
    struct gkvt_kvctl_fx *f = *state;
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
    assert_false(gkvt_exists(path(f, "e.npy")));
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
    struct gkvt_kvctl_fx *f = *state;
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
    struct gkvt_kvctl_fx *f = *state;
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
        json_t *j = gkvt_json_parse(f->out);
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
    struct gkvt_kvctl_fx *f = *state;
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
    j = gkvt_json_parse(f->out);
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
    j = gkvt_json_parse(f->out);
    a = json_object_get(j, "tensors");
    assert_int_equal(json_array_size(a), 3);
    assert_string_equal(json_string_value(json_object_get(json_array_get(a, 0), "name")), "emb");
    assert_string_equal(json_string_value(json_object_get(json_array_get(a, 1), "name")), "n");
    assert_string_equal(json_string_value(json_object_get(json_array_get(a, 2), "name")), "w");
    assert_int_equal(json_integer_value(json_object_get(json_array_get(a, 2), "bytes")), 16);
    json_decref(j);

    /* get --json: ids and rows as numbers */
    assert_int_equal(kv(f, f->st, "--json", "get", "emb", "199,100", NULL), 0);
    j = gkvt_json_parse(f->out);
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
        j = gkvt_json_parse(f->out);
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
    j = gkvt_json_parse(f->out);
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
    j = gkvt_json_parse(f->out);
    assert_true(json_is_true(json_object_get(j, "ok")));
    assert_int_equal(json_integer_value(json_object_get(j, "bad_chunks")), 0);
    assert_true(json_integer_value(json_object_get(j, "chunks_checked")) > 0);
    json_decref(j);

    /* a bad name is refused by the store; a store made for it is removed */
    snprintf(f->st, sizeof f->st, "%s/st2", f->dir);
    assert_int_equal(kv(f, f->st, "create", "a b", "--dtype", "f32", "--range", "0:1", NULL), 1);
    assert_non_null(strstr(f->err, "not printable ASCII"));
    assert_false(gkvt_exists(f->st));
}

/* A range near 2^64: info, ls and stat print the exact bounds, and the
 * byte totals capped at 2^64 - 1 and marked as such, never a wrapped
 * number; JSON gives numbers above 2^63 - 1 as strings of their digits
 * (jansson's integers are signed), not negative numbers. */
static void
test_huge_range_output(void **state)
{
    struct gkvt_kvctl_fx *f = *state;
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
    j = gkvt_json_parse(f->out);
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
    j = gkvt_json_parse(f->out);
    t = json_array_get(json_object_get(j, "tensors"), 1);
    assert_string_equal(json_string_value(json_object_get(t, "name")), "small");
    assert_int_equal(json_integer_value(json_object_get(t, "bytes")), 16);
    json_decref(j);
    assert_int_equal(kv(f, "--json", f->st, "stat", NULL), 0);
    j = gkvt_json_parse(f->out);
    assert_string_equal(json_string_value(json_object_get(j, "data_bytes")),
                        "18446744073709551615");
    assert_int_equal(json_integer_value(json_object_get(j, "ntensors")), 2);
    json_decref(j);
}

static void
test_rm_rename_ls(void **state)
{
    struct gkvt_kvctl_fx *f = *state;
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
        json_t *j = gkvt_json_parse(f->out);
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

/* XORs byte 'at' of the f32 row 'row' (W values) with 'mask' wherever
 * the row lies in the store's data.mdb (at least once). */
static void
flip_row(struct gkvt_kvctl_fx *f, const float *row, size_t at, unsigned mask)
{
    unsigned char *db;
    size_t len, hits = 0;
    char data[4200];
    int fd;

    snprintf(data, sizeof data, "%s/data.mdb", f->st);
    db = gkvt_read_file(data, &len);
    fd = open(data, O_WRONLY);
    assert_true(fd >= 0);
    for (size_t i = 0; i + W * 4 <= len; i++)
        if (memcmp(db + i, row, W * 4) == 0) {
            unsigned char c = db[i + at] ^ (unsigned char)mask;
            assert_int_equal(pwrite(fd, &c, 1, (off_t)(i + at)), 1);
            hits++;
        }
    close(fd);
    free(db);
    assert_true(hits >= 1);
}

static void
test_verify_finds_flipped_byte(void **state)
{
    struct gkvt_kvctl_fx *f = *state;
    float *v = make_feat(f);
    json_t *j;

    assert_int_equal(kv(f, f->st, "create", "other", "--dtype", "i64",
                        "--range", "0:100", "--init", "const:3", NULL), 0);
    assert_int_equal(kv(f, f->st, "verify", NULL), 0);
    assert_memory_equal(f->out, "ok: ", 4);
    assert_string_equal(f->err, "");
    /* flip one byte of row 77 where it lies in data.mdb */
    flip_row(f, v + 77 * W, 21, 0x10);
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
    j = gkvt_json_parse(f->out);
    assert_true(json_is_false(json_object_get(j, "ok")));
    assert_int_equal(json_integer_value(json_object_get(j, "bad_chunks")), 1);
    assert_string_equal(json_string_value(json_object_get(
        json_object_get(j, "first_bad"), "tensor")), "feat");
    assert_int_equal(json_integer_value(json_object_get(
        json_object_get(j, "first_bad"), "chunk")), 0);
    json_decref(j);
    free(v);
}

/* get and export check each chunk they read against its checksum: a row
 * whose stored bytes changed is refused with an error naming the tensor
 * and the chunk (it was printed, changed, with exit 0); rows of the other
 * chunks still come, byte for byte. */
static void
test_get_export_check_chunks(void **state)
{
    struct gkvt_kvctl_fx *f = *state;
    float *v = gkvt_npy_f32(path(f, "feat.npy"), N, W, 0);
    const char *want = "chunk 1 (rows 64..127) fails its checksum";
    gkv_npy_map m;

    assert_int_equal(kv(f, f->st, "import", "feat", path(f, "feat.npy"),
                        "--chunk-rows", "64", NULL), 0);
    /* flip one byte of row 77 (chunk 1) where it lies in data.mdb */
    flip_row(f, v + 77 * W, 9, 0x01);

    assert_int_equal(kv(f, f->st, "get", "feat", "77", NULL), 1);
    assert_string_equal(f->out, "");
    if (strstr(f->err, "tensor 'feat'") == NULL || strstr(f->err, want) == NULL)
        fail_msg("stderr: %s", f->err);
    /* another row of that chunk, among good ones, and --json */
    assert_int_equal(kv(f, "--json", f->st, "get", "feat", "3,100,200", NULL),
                     1);
    assert_string_equal(f->out, "");
    assert_non_null(strstr(f->err, want));
    /* rows of other chunks */
    assert_int_equal(kv(f, f->st, "get", "feat", "63", NULL), 0);
    check_line(f->out, 63);
    assert_int_equal(kv(f, f->st, "get", "feat", "128", NULL), 0);
    check_line(f->out, 128);
    /* export: refused, no file left */
    assert_int_equal(kv(f, f->st, "export", "feat", path(f, "bad.npy"), NULL),
                     1);
    if (strstr(f->err, "export: tensor 'feat'") == NULL ||
        strstr(f->err, want) == NULL)
        fail_msg("stderr: %s", f->err);
    assert_int_equal(access(path(f, "bad.npy"), F_OK), -1);
    assert_int_equal(kv(f, f->st, "export", "feat", path(f, "bad.npy"),
                        "--range", "70:80", NULL), 1);
    assert_non_null(strstr(f->err, want));
    /* a range that leaves the chunk out: byte for byte */
    assert_int_equal(kv(f, f->st, "export", "feat", path(f, "rest.npy"),
                        "--range", "128:3000", NULL), 0);
    GKVT_OK(gkv_npy_map_open(&m, path(f, "rest.npy"), NULL, 0));
    assert_int_equal(m.hdr.shape[0], N - 128);
    assert_memory_equal(m.data, v + 128 * W, (size_t)(N - 128) * W * 4);
    gkv_npy_map_close(&m);
    free(v);
}

/* A chunk whose bytes changed on disk: gkv-server refuses the store at
 * start, naming the tensor and the chunk (so that no pull serves the
 * changed rows); --no-verify-data starts it all the same. */
static void
test_server_start_checks_chunks(void **state)
{
    struct gkvt_kvctl_fx *f = *state;
    float *v = gkvt_npy_f32(path(f, "feat.npy"), N, W, 0);
    struct gkvt_proc procs[1];
    char cfg[4200], text[64], *out = NULL, *err = NULL;
    int np = 0;

    assert_int_equal(kv(f, f->st, "import", "feat", path(f, "feat.npy"),
                        "--chunk-rows", "64", NULL), 0);
    flip_row(f, v + 77 * W, 9, 0x01);
    snprintf(cfg, sizeof cfg, "%s", path(f, "ip.cfg"));
    snprintf(text, sizeof text, "127.0.0.1 %d\n", gkvt_port_base(1));
    gkvt_write_text(cfg, text, 0644);
    assert_int_not_equal(gkvt_tool("gkv-server", &out, &err, "--store",
                                   f->st, "--ip-config", cfg, NULL), 0);
    if (strstr(err, "tensor 'feat'") == NULL || strstr(err, "chunk 1") ==
        NULL || strstr(err, "--no-verify-data") == NULL)
        fail_msg("stderr: %s", err);
    free(out);
    free(err);
    /* --no-verify-data: it starts (and serves the changed rows) */
    {
        char *argv[] = {(char *)gkvt_prog("gkv-server"), "--store", f->st, "--ip-config", cfg,
                        "--no-verify-data", NULL};
        struct gkvt_proc *p = gkvt_spawn(procs, &np, 1, f->dir, argv,
                                         "server.log");

        assert_true(gkvt_server_listening(p));
        assert_true(gkvt_file_has(p->log, "chunks not checked"));
    }
    gkvt_proc_reap_all(procs, np);
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
snap_take(struct gkvt_kvctl_fx *f, struct snap *s)
{
    gkv_tensor_desc d;

    assert_int_equal(kv(f, f->st, "ls", "--all", NULL), 0);
    s->ls = strdup(f->out);
    s->rows = dump(f->st, "keep", &d, &s->len);
}

static void
snap_check(struct gkvt_kvctl_fx *f, const struct snap *s)
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
    struct gkvt_kvctl_fx *f = *state;
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

    hl = gkvt_npy_header(b, "<f4", "(5, 3)");
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
    assert_false(gkvt_exists(f->st));
    assert_int_equal(kv(f, f->st, "import", "x", path(f, "norows"), NULL), 1);
    assert_false(gkvt_exists(f->st));
    /* a failure after the store was made: the tensor spec is refused */
    assert_int_equal(kv(f, f->st, "import", "x", path(f, "keep.npy"),
                        "--chunk-rows", "4294967295", NULL), 1);
    assert_non_null(strstr(f->err, "chunks of"));
    assert_false(gkvt_exists(f->st));
    free(s0.ls);
    free(s0.rows);
}

/* Tensors x and y of the store export to the same bytes. */
static void
expect_same_export(struct gkvt_kvctl_fx *f, const char *x, const char *y)
{
    assert_int_equal(kv(f, f->st, "export", x, path(f, "x.npy"), NULL), 0);
    assert_int_equal(kv(f, f->st, "export", y, path(f, "y.npy"), NULL), 0);
    gkvt_expect_same_files(path(f, "x.npy"), path(f, "y.npy"));
}

/* import --orig-ids: a file in original-ID order (export --orig-ids)
 * comes back at the new IDs, as a tensor and as optimizer state; a
 * mapping of the wrong length, with an ID twice, or not covering the new
 * tensor's rows, and --lo beside it, are refused before the store
 * changes. */
static void
test_import_orig_ids(void **state)
{
    struct gkvt_kvctl_fx *f = *state;
        int64_t map[50];
    unsigned char *a, *b;
    size_t al, bl;
    struct snap s0;

    for (int i = 0; i < 50; i++)
        map[i] = (17 * i + 3) % 50;
    gkvt_npy_i64(path(f, "map.npy"), map, 50, 0);
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
    gkvt_npy_i64(path(f, "dup.npy"), map, 50, 0);
    assert_int_equal(kv(f, f->st, "import", "e3", path(f, "orig.npy"),
                        "--orig-ids", path(f, "dup.npy"), NULL), 1);
    assert_non_null(strstr(f->err, "comes twice"));
    gkvt_npy_i64(path(f, "short.npy"), map, 49, 0);
    assert_int_equal(kv(f, f->st, "import", "e3", path(f, "orig.npy"),
                        "--orig-ids", path(f, "short.npy"), NULL), 1);
    assert_non_null(strstr(f->err, "has 49 entries, but"));
    for (int i = 0; i < 50; i++)
        map[i] = (17 * i + 3) % 50 + ((17 * i + 3) % 50 >= 25 ? 5 : 0);
    gkvt_npy_i64(path(f, "holes.npy"), map, 50, 0);  /* 0..24, 30..54 */
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
    gkvt_npy_i64(path(f, "map10.npy"), map, 50, 0);
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
    struct gkvt_kvctl_fx *f = *state;
    char *argv[16], *out = NULL, *err = NULL;
    const char *sh = "ulimit -v 300000; exec \"$0\" \"$@\"";
    struct stat sb;
    DIR *d;
    int rc, n;

    gkvt_npy_f32(path(f, "small.npy"), 4, 2, 0);
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
    struct gkvt_kvctl_fx *f = *state;
    float *v = make_feat(f), *w;
    gkv_tensor_desc d;
    unsigned char *got;
    size_t len;

    w = gkvt_npy_f32(path(f, "other.npy"), 50, 4, 7);
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
    v = gkvt_npy_f32(path(f, "third.npy"), 50, 4, 9);
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
    double end = tools__now_s() + 60;

    while (tools__now_s() < end) {
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
        tools__sleep_ms(1);
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
    struct gkvt_kvctl_fx *f = *state;
    char tmpname[128], *errtxt;
    size_t elen;
    float *v;
    struct snap s0;
    pid_t pid;
    int st, attempt = 0;

    v = gkvt_npy_f32(path(f, "big.npy"), 3 << 17, 128, 1);
    free(v);
    v = gkvt_npy_f32(path(f, "keep.npy"), 64, 4, 3);
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
    struct gkvt_kvctl_fx *f = *state;
    float *v = gkvt_npy_f32(path(f, "big.npy"), 3 << 17, 128, 1);
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
        double end = tools__now_s() + 60;
        int done = 0;

        pid = spawn(argv, path(f, "err.txt"));
        snprintf(tmp, sizeof tmp, "%s.tmp-%ld", path(f, "out.npy"), (long)pid);
        while (!gkvt_exists(tmp) && tools__now_s() < end &&
               !(done = waitpid(pid, &st, WNOHANG) == pid))
            tools__sleep_ms(1);
        if (!done) {
            assert_true(gkvt_exists(tmp));
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
    assert_false(gkvt_exists(tmp));
    assert_false(gkvt_exists(path(f, "out.npy")));
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
    struct gkvt_kvctl_fx *f = *state;
    float *v = gkvt_npy_f32(path(f, "feat.npy"), 100, 4, 0);
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

#define T(name) \
    cmocka_unit_test_setup_teardown(name, gkvt_kvctl_setup, gkvt_kvctl_teardown)

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_idlist_parser),
        T(test_help_and_version),
        T(test_usage_errors_exit_2),
        T(test_missing_store_is_an_error),
        T(test_import_npy_rows_match),
        T(test_import_other_dtypes),
        T(test_export_round_trip),
        T(test_raw_import_export),
        T(test_get_each_id_syntax),
        T(test_put_then_get),
        T(test_create_and_json),
        T(test_huge_range_output),
        T(test_rm_rename_ls),
        T(test_verify_finds_flipped_byte),
        T(test_get_export_check_chunks),
        T(test_server_start_checks_chunks),
        T(test_bad_import_changes_nothing),
        T(test_failed_open_leaves_nothing),
        T(test_import_orig_ids),
        T(test_import_existing_name),
        T(test_signals_during_import),
        T(test_signal_during_export),
        T(test_progress_bar_on_a_tty),
    };

    return cmocka_run_group_tests_name("kvctl", tests, NULL, NULL);
}
