/* npy_test.c - the .npy reader and writer (kv/npy.c): headers written by
 * hand as bytes for every dtype and version, numpy's exact header bytes,
 * every rejection the format allows, mapping, and truncated or flipped
 * headers fed to the parser. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "gkvt.h"

struct fx {
    char *dir;
    char path[4096];
};

static int
setup(void **state)
{
    return gkvt_file_setup(state, sizeof(struct fx), "npy", "a.npy");
}

/* A .npy image: magic, version, header length, 'dict' + '\n', then
 * data_len bytes of 0xA5 (or 'data'). Version 1 has a 2-byte length,
 * 2 and 3 a 4-byte one. Caller frees. */
static unsigned char *
npy_image(int version, const char *dict, const void *data, size_t data_len,
          size_t *len)
{
    size_t dl = strlen(dict) + 1, pre = version == 1 ? 10 : 12;
    unsigned char *b = malloc(pre + dl + data_len + 1);

    memcpy(b, "\x93NUMPY", 6);
    b[6] = (unsigned char)version;
    b[7] = 0;
    b[8] = (unsigned char)dl;
    b[9] = (unsigned char)(dl >> 8);
    if (pre == 12) {
        b[10] = (unsigned char)(dl >> 16);
        b[11] = (unsigned char)(dl >> 24);
    }
    memcpy(b + pre, dict, dl - 1);
    b[pre + dl - 1] = '\n';
    if (data != NULL)
        memcpy(b + pre + dl, data, data_len);
    else
        memset(b + pre + dl, 0xA5, data_len);
    *len = pre + dl + data_len;
    return b;
}

/* Parses a v1 image of 'dict' with exactly the data its shape needs
 * ('bytes') both from memory and from a file; checks both agree. */
static gkv_err
parse_dict(struct fx *f, const char *dict, size_t bytes, gkv_npy_header *h,
           char *msg, size_t msg_len)
{
    size_t len;
    unsigned char *b = npy_image(1, dict, NULL, bytes, &len);
    gkv_npy_header h2;
    char msg2[256];
    gkv_err rc, rc2;

    rc = gkv_npy_parse(b, len, len, h, msg, msg_len);
    gkvt_write_file(f->path, b, len);
    rc2 = gkv_npy_read_header(f->path, &h2, msg2, sizeof msg2);
    assert_int_equal(rc, rc2);
    assert_memory_equal(h, &h2, sizeof h2);
    assert_string_equal(msg, msg2);
    free(b);
    return rc;
}

/* ---- every dtype, shape and version ---------------------------------- */

static void
test_each_dtype(void **state)
{
    static const struct {
        const char *descr;
        gkv_dtype dt;
        size_t es;
    } t[] = {
        {"<f4", GKV_F32, 4}, {"<f2", GKV_F16, 2}, {"<f8", GKV_F64, 8},
        {"|i1", GKV_I8, 1},  {"|u1", GKV_U8, 1},  {"<i4", GKV_I32, 4},
        {"<i8", GKV_I64, 8},
        /* one-byte types carry no byte order, whatever the character */
        {"<i1", GKV_I8, 1},  {"<u1", GKV_U8, 1},
        /* numpy bool reads as u8 */
        {"|b1", GKV_U8, 1},  {"<b1", GKV_U8, 1},
    };
    struct fx *f = *state;

    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        char dict[256], msg[256];
        gkv_npy_header h;

        snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, "
                 "'shape': (7, 3), }", t[i].descr);
        GKVT_OK(parse_dict(f, dict, 21 * t[i].es, &h, msg, sizeof msg));
        assert_int_equal(h.dtype, t[i].dt);
        assert_int_equal(h.ndim, 2);
        assert_int_equal(h.shape[0], 7);
        assert_int_equal(h.shape[1], 3);
        assert_int_equal(h.version, 1);
        assert_int_equal(h.data_offset, 10 + strlen(dict) + 1);
        assert_int_equal(h.data_bytes, 21 * t[i].es);
        assert_int_equal(h.is_bool, t[i].descr[1] == 'b');
        assert_string_equal(msg, "");
    }
}

static void
test_shapes_and_syntax(void **state)
{
    struct fx *f = *state;
    gkv_npy_header h;
    char msg[256];

    /* 1-D: one scalar per row */
    GKVT_OK(parse_dict(f, "{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }",
                       20, &h, msg, sizeof msg));
    assert_int_equal(h.ndim, 1);
    assert_int_equal(h.shape[0], 5);
    /* 5-D, the most a tensor holds */
    GKVT_OK(parse_dict(f, "{'descr': '<f8', 'fortran_order': False, "
                       "'shape': (2, 3, 4, 5, 6), }", 720 * 8, &h, msg, sizeof msg));
    assert_int_equal(h.ndim, 5);
    assert_int_equal(h.shape[4], 6);
    assert_int_equal(h.data_bytes, 720 * 8);
    /* other key order, double quotes, no trailing comma, Python 2 longs,
     * odd whitespace */
    GKVT_OK(parse_dict(f, "{ \"shape\" :(4L,2L) ,\"fortran_order\":False,"
                       "\"descr\":\"<i4\"}", 32, &h, msg, sizeof msg));
    assert_int_equal(h.dtype, GKV_I32);
    assert_int_equal(h.ndim, 2);
    assert_int_equal(h.shape[0], 4);
    assert_int_equal(h.shape[1], 2);
    /* zero rows is a valid .npy (kvctl refuses to import it, not the parser) */
    GKVT_OK(parse_dict(f, "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 8), }",
                       0, &h, msg, sizeof msg));
    assert_int_equal(h.data_bytes, 0);
    /* Fortran order is the same bytes when only one dim exceeds 1 */
    GKVT_OK(parse_dict(f, "{'descr': '<f4', 'fortran_order': True, 'shape': (1, 4), }",
                       16, &h, msg, sizeof msg));
    GKVT_OK(parse_dict(f, "{'descr': '<f4', 'fortran_order': True, 'shape': (6,), }",
                       24, &h, msg, sizeof msg));
    /* bytes after the data are ignored, as numpy does */
    GKVT_OK(parse_dict(f, "{'descr': '|u1', 'fortran_order': False, 'shape': (3,), }",
                       10, &h, msg, sizeof msg));
    assert_int_equal(h.data_bytes, 3);
}

static void
test_versions_2_and_3(void **state)
{
    const char *dict = "{'descr': '<i8', 'fortran_order': False, 'shape': (3, 4), }";
    struct fx *f = *state;

    for (int v = 1; v <= 3; v++) {
        gkv_npy_header h;
        size_t len;
        unsigned char *b = npy_image(v, dict, NULL, 96, &len);

        gkvt_write_file(f->path, b, len);
        GKVT_OK(gkv_npy_read_header(f->path, &h, NULL, 0));
        assert_int_equal(h.version, v);
        assert_int_equal(h.dtype, GKV_I64);
        assert_int_equal(h.data_offset, (v == 1 ? 10 : 12) + strlen(dict) + 1);
        assert_int_equal(h.data_bytes, 96);
        free(b);
    }
}

/* ---- the writer: numpy's bytes exactly -------------------------------- */

static void
test_header_matches_numpy(void **state)
{
    /* np.save() headers from numpy 2.4, copied from the files it wrote:
     * the dict, spare room for shape[0] to grow, and padding to 128 */
    static const struct {
        gkv_dtype dt;
        unsigned ndim;
        uint64_t shape[5];
        const char *text;
    } t[] = {
        {GKV_F32, 2, {3, 4}, "{'descr': '<f4', 'fortran_order': False, "
         "'shape': (3, 4), }                                                          \n"},
        {GKV_U8, 1, {5}, "{'descr': '|u1', 'fortran_order': False, "
         "'shape': (5,), }                                                            \n"},
        {GKV_F64, 5, {2, 3, 4, 5, 6}, "{'descr': '<f8', 'fortran_order': False, "
         "'shape': (2, 3, 4, 5, 6), }                                                 \n"},
    };
    unsigned char buf[256];
    size_t len;

    (void)state;
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        GKVT_OK(gkv_npy_header_format(t[i].dt, t[i].ndim, t[i].shape, buf,
                                      sizeof buf, &len, NULL, 0));
        assert_int_equal(len, 128);
        assert_memory_equal(buf, "\x93NUMPY\x01\x00\x76\x00", 10);
        assert_int_equal(strlen(t[i].text), 118);
        assert_memory_equal(buf + 10, t[i].text, 118);
    }
}

static void
test_format_then_parse(void **state)
{
    static const gkv_dtype dts[] = {GKV_F32, GKV_F16, GKV_F64, GKV_I8, GKV_U8,
                                    GKV_I32, GKV_I64};
    static const uint64_t shapes[][5] = {
        {1}, {10, 3}, {123456789012ull, 2}, {7, 1, 2, 3}, {2, 2, 2, 2, 2},
    };
    static const unsigned nd[] = {1, 2, 2, 4, 5};
    struct fx *f = *state;

    for (size_t i = 0; i < sizeof dts / sizeof dts[0]; i++)
        for (size_t j = 0; j < sizeof nd / sizeof nd[0]; j++) {
            unsigned char buf[256];
            gkv_npy_header h;
            size_t len, hl;
            uint64_t bytes = gkv_dtype_size(dts[i]);
            int fd;

            for (unsigned k = 0; k < nd[j]; k++)
                bytes *= shapes[j][k];
            GKVT_OK(gkv_npy_header_format(dts[i], nd[j], shapes[j], buf,
                                          sizeof buf, &len, NULL, 0));
            assert_int_equal(len % 64, 0);
            assert_int_equal(buf[len - 1], '\n');
            GKVT_OK(gkv_npy_parse(buf, len, len + bytes, &h, NULL, 0));
            assert_int_equal(h.dtype, dts[i]);
            assert_int_equal(h.ndim, nd[j]);
            assert_memory_equal(h.shape, shapes[j], nd[j] * sizeof(uint64_t));
            assert_int_equal(h.data_offset, len);
            assert_int_equal(h.data_bytes, bytes);
            /* the fd writer gives the same bytes */
            fd = open(f->path, O_RDWR | O_CREAT | O_TRUNC, 0644);
            GKVT_OK(gkv_npy_write_header(fd, dts[i], nd[j], shapes[j], &hl, NULL, 0));
            assert_int_equal(hl, len);
            assert_int_equal(lseek(fd, 0, SEEK_CUR), (off_t)len);
            {
                unsigned char back[256];
                assert_int_equal(pread(fd, back, len, 0), (ssize_t)len);
                assert_memory_equal(back, buf, len);
            }
            close(fd);
        }
}

static void
test_format_rejects(void **state)
{
    uint64_t shape[6] = {2, 2, 2, 2, 2, 2}, big[2] = {UINT64_MAX / 2, 4};
    unsigned char buf[256];
    char msg[256];
    size_t len = 99;

    (void)state;
    assert_int_equal(gkv_npy_header_format(GKV_BF16, 2, shape, buf, sizeof buf,
                                           &len, msg, sizeof msg), GKV_EINVAL);
    assert_non_null(strstr(msg, "bf16"));
    assert_int_equal(len, 0);
    assert_int_equal(gkv_npy_header_format(GKV_F32, 0, shape, buf, sizeof buf,
                                           &len, msg, sizeof msg), GKV_EINVAL);
    assert_int_equal(gkv_npy_header_format(GKV_F32, 6, shape, buf, sizeof buf,
                                           &len, msg, sizeof msg), GKV_EINVAL);
    assert_int_equal(gkv_npy_header_format(GKV_F32, 2, shape, buf, 100, &len,
                                           msg, sizeof msg), GKV_EINVAL);
    assert_non_null(strstr(msg, "buffer"));
    assert_int_equal(gkv_npy_header_format(GKV_F32, 2, big, buf, sizeof buf,
                                           &len, msg, sizeof msg), GKV_EINVAL);
    assert_null(gkv_npy_descr(GKV_BF16));
    assert_string_equal(gkv_npy_descr(GKV_I8), "|i1");
    assert_string_equal(gkv_npy_descr(GKV_F16), "<f2");
}

/* ---- rejections ---------------------------------------------------------- */

static void
test_rejects_each_bad_header(void **state)
{
    static const struct {
        const char *dict;
        const char *why;        /* must appear in the message */
    } t[] = {
        {"{'descr': '<f4', 'fortran_order': True, 'shape': (3, 4), }", "Fortran"},
        {"{'descr': '>f4', 'fortran_order': False, 'shape': (3, 4), }", "big-endian"},
        {"{'descr': '>i8', 'fortran_order': False, 'shape': (3, 4), }", "big-endian"},
        {"{'descr': '|O', 'fortran_order': False, 'shape': (3,), }", "object"},
        {"{'descr': '<i2', 'fortran_order': False, 'shape': (3, 4), }", "unsupported dtype '<i2'"},
        {"{'descr': '<c8', 'fortran_order': False, 'shape': (3, 4), }", "unsupported dtype"},
        {"{'descr': '|b2', 'fortran_order': False, 'shape': (3, 4), }", "unsupported dtype '|b2'"},
        {"{'descr': '<U3', 'fortran_order': False, 'shape': (3, 4), }", "unsupported dtype"},
        {"{'descr': '<f4x', 'fortran_order': False, 'shape': (3, 4), }", "unsupported dtype"},
        {"{'descr': '|f4', 'fortran_order': False, 'shape': (3, 4), }", "byte order"},
        {"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (3,), }", "structured"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 2), }",
         "more than 5 dims"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (), }", "0-d"},
        {"{'descr': '<f4', 'fortran_order': False, }", "lacks 'shape'"},
        {"{'fortran_order': False, 'shape': (3,), }", "lacks 'descr'"},
        {"{'descr': '<f4', 'shape': (3,), }", "lacks 'fortran_order'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'x': 1, }",
         "unexpected header key 'x'"},
        {"{'descr': '<f4', 'fortran_order': 0, 'shape': (3,), }", "True or False"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (-3, 4), }", "malformed"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3 4), }", "malformed"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': [3, 4], }", "malformed"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), } x", "malformed"},
        {"{'descr': '<f4, 'fortran_order': False, 'shape': (3, 4), }", "malformed"},
        {"['descr', '<f4']", "malformed"},
        /* a descr too long for the parser was cut to its first 63
         * characters and the rest ignored (so '<f4' and junk, cut right,
         * read as '<f4') */
        {"{'descr': '<f0000000000000000000000000000000000000000000000000000000"
         "0000004junk', 'fortran_order': False, 'shape': (3, 4), }",
         "'descr' is not a string of at most 63 characters"},
        {"{'a_key_much_longer_than_any_key_numpy_writes': 1, 'descr': '<f4', "
         "'fortran_order': False, 'shape': (3, 4), }",
         "expected a quoted key of at most"},
        {"", "malformed"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999, 4), }",
         "over 2^64"},
        {"{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904, 4), }",
         "2^64 bytes"},
        /* no rows, but a row of more than 2^64 bytes: zero rows hid it */
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (0, "
         "18446744073709551615, 18446744073709551615), }",
         "2^64 bytes a row"},
    };
    struct fx *f = *state;

    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        gkv_npy_header h;
        char msg[256];

        memset(&h, 0x5a, sizeof h);
        assert_int_equal(parse_dict(f, t[i].dict, 64, &h, msg, sizeof msg),
                         GKV_EFORMAT);
        if (strstr(msg, t[i].why) == NULL)
            fail_msg("case %zu (%s): message '%s' lacks '%s'", i, t[i].dict,
                     msg, t[i].why);
        /* nothing half-filled on error */
        assert_int_equal(h.ndim, 0);
        assert_int_equal(h.data_bytes, 0);
    }
}

static void
test_rejects_bad_files(void **state)
{
    const char *dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }";
    struct fx *f = *state;
    gkv_npy_header h;
    unsigned char *b;
    char msg[256];
    size_t len;

    b = npy_image(1, dict, NULL, 48, &len);
    /* bad magic */
    b[1] = 'n';
    assert_int_equal(gkv_npy_parse(b, len, len, &h, msg, sizeof msg), GKV_EFORMAT);
    assert_non_null(strstr(msg, "magic"));
    b[1] = 'N';
    /* unsupported versions */
    b[6] = 4;
    assert_int_equal(gkv_npy_parse(b, len, len, &h, msg, sizeof msg), GKV_EFORMAT);
    assert_non_null(strstr(msg, "version 4.0"));
    b[6] = 1;
    b[7] = 1;
    assert_int_equal(gkv_npy_parse(b, len, len, &h, msg, sizeof msg), GKV_EFORMAT);
    assert_non_null(strstr(msg, "version 1.1"));
    b[7] = 0;
    /* truncated data: one byte short of 3 x 4 floats */
    gkvt_write_file(f->path, b, len - 1);
    assert_int_equal(gkv_npy_read_header(f->path, &h, msg, sizeof msg), GKV_EFORMAT);
    assert_non_null(strstr(msg, "truncated data"));
    assert_non_null(strstr(msg, "48 bytes"));
    assert_non_null(strstr(msg, "47"));
    /* truncated header: the file ends inside the dict */
    gkvt_write_file(f->path, b, 40);
    assert_int_equal(gkv_npy_read_header(f->path, &h, msg, sizeof msg), GKV_EFORMAT);
    assert_non_null(strstr(msg, "truncated header"));
    /* ... and inside the magic or the length */
    for (size_t cut = 0; cut < 10; cut++) {
        gkvt_write_file(f->path, b, cut);
        assert_int_equal(gkv_npy_read_header(f->path, &h, msg, sizeof msg),
                         GKV_EFORMAT);
        assert_true(strstr(msg, "truncated header") || strstr(msg, "magic"));
    }
    /* a header length over the bound is refused before it is read */
    b[8] = 0xff;
    b[9] = 0xff;
    b[6] = 2;
    b[10] = 0x10;
    b[11] = 0;
    assert_int_equal(gkv_npy_parse(b, len, len, &h, msg, sizeof msg), GKV_EFORMAT);
    assert_non_null(strstr(msg, "over the"));
    free(b);
    /* not a file, no file */
    assert_int_equal(gkv_npy_read_header(f->dir, &h, msg, sizeof msg), GKV_EFORMAT);
    assert_non_null(strstr(msg, "regular file"));
    snprintf(f->path, sizeof f->path, "%s/none.npy", f->dir);
    assert_int_equal(gkv_npy_read_header(f->path, &h, msg, sizeof msg), GKV_ENOENT);
    /* NULL arguments */
    assert_int_equal(gkv_npy_parse(NULL, 0, 0, &h, msg, sizeof msg), GKV_EINVAL);
    assert_int_equal(gkv_npy_is_npy("\x93NUMP", 5), 0);
    assert_int_equal(gkv_npy_is_npy("\x93NUMPY", 6), 1);
}

/* Every prefix of a valid file, and every single-byte change of its
 * header, parses to GKV_OK or GKV_EFORMAT: never a crash, never a header
 * that claims more data than the buffer has. */
static void
test_truncations_and_flips(void **state)
{
    const char *dict = "{'descr': '<f2', 'fortran_order': False, 'shape': (5, 2, 3), }";
    uint64_t seed = gkvt_seed(), rs = seed;
    unsigned char *b;
    size_t len, hdr;

    (void)state;
    b = npy_image(1, dict, NULL, 60, &len);
    hdr = len - 60;
    for (size_t cut = 0; cut < len; cut++) {
        gkv_npy_header h;
        assert_int_equal(gkv_npy_parse(b, cut, cut, &h, NULL, 0), GKV_EFORMAT);
    }
    for (int i = 0; i < 20000; i++) {
        unsigned char *c = malloc(len);
        size_t at = (size_t)(tools__splitmix64(&rs) % hdr);
        gkv_npy_header h;
        char msg[128];
        gkv_err rc;

        memcpy(c, b, len);
        c[at] = (unsigned char)tools__splitmix64(&rs);
        rc = gkv_npy_parse(c, len, len, &h, msg, sizeof msg);
        if (rc == GKV_OK)
            assert_true(h.data_offset + h.data_bytes <= len);
        else
            assert_int_equal(rc, GKV_EFORMAT);
        free(c);
    }
    free(b);
}

/* ---- mapping --------------------------------------------------------------- */

static void
test_map_npy_and_raw(void **state)
{
    struct fx *f = *state;
    gkv_npy_map m = {0};
    uint64_t shape[2] = {6, 4}, dim = 4, dims2[2] = {2, 2};
    float v[24];
    unsigned char buf[256];
    char msg[256];
    size_t hl;
    int fd;

    for (int i = 0; i < 24; i++)
        v[i] = (float)i * 0.5f - 3;
    GKVT_OK(gkv_npy_header_format(GKV_F32, 2, shape, buf, sizeof buf, &hl, NULL, 0));
    fd = open(f->path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_int_equal(write(fd, buf, hl), (ssize_t)hl);
    assert_int_equal(write(fd, v, sizeof v), (ssize_t)sizeof v);
    close(fd);
    GKVT_OK(gkv_npy_map_open(&m, f->path, msg, sizeof msg));
    assert_int_equal(m.hdr.dtype, GKV_F32);
    assert_int_equal(m.hdr.shape[0], 6);
    assert_int_equal(m.hdr.data_bytes, sizeof v);
    assert_memory_equal(m.data, v, sizeof v);
    gkv_npy_map_close(&m);
    assert_null(m.data);
    gkv_npy_map_close(&m);          /* twice is fine */
    gkv_npy_map_close(NULL);

    /* the same bytes, raw: 12 rows of 2 floats, or 6 rows of 2x2 */
    snprintf(f->path, sizeof f->path, "%s/a.raw", f->dir);
    gkvt_write_file(f->path, v, sizeof v);
    dim = 2;
    GKVT_OK(gkv_npy_map_raw(&m, f->path, GKV_F32, 1, &dim, msg, sizeof msg));
    assert_int_equal(m.hdr.ndim, 2);
    assert_int_equal(m.hdr.shape[0], 12);
    assert_int_equal(m.hdr.shape[1], 2);
    assert_int_equal(m.hdr.data_offset, 0);
    assert_memory_equal(m.data, v, sizeof v);
    gkv_npy_map_close(&m);
    GKVT_OK(gkv_npy_map_raw(&m, f->path, GKV_BF16, 2, dims2, msg, sizeof msg));
    assert_int_equal(m.hdr.shape[0], 12);
    assert_int_equal(m.hdr.ndim, 3);
    gkv_npy_map_close(&m);
    /* scalar rows */
    GKVT_OK(gkv_npy_map_raw(&m, f->path, GKV_F64, 0, NULL, msg, sizeof msg));
    assert_int_equal(m.hdr.ndim, 1);
    assert_int_equal(m.hdr.shape[0], 12);
    gkv_npy_map_close(&m);
    /* 96 bytes are not a whole number of 5-float rows */
    dim = 5;
    assert_int_equal(gkv_npy_map_raw(&m, f->path, GKV_F32, 1, &dim, msg, sizeof msg),
                     GKV_EFORMAT);
    assert_non_null(strstr(msg, "whole number"));
    assert_null(m.data);
    /* an empty file holds no rows */
    gkvt_write_file(f->path, "", 0);
    assert_int_equal(gkv_npy_map_raw(&m, f->path, GKV_F32, 1, &dim, msg, sizeof msg),
                     GKV_EFORMAT);
    dim = 0;
    assert_int_equal(gkv_npy_map_raw(&m, f->path, GKV_F32, 1, &dim, msg, sizeof msg),
                     GKV_EINVAL);
    assert_int_equal(gkv_npy_map_raw(&m, f->path, (gkv_dtype)42, 0, NULL, msg,
                                     sizeof msg), GKV_EINVAL);
    snprintf(f->path, sizeof f->path, "%s/missing", f->dir);
    assert_int_equal(gkv_npy_map_open(&m, f->path, msg, sizeof msg), GKV_ENOENT);
    assert_null(m.data);
}

static void
test_map_rejects_and_zero_rows(void **state)
{
    struct fx *f = *state;
    gkv_npy_map m = {0};
    char msg[256];
    unsigned char *b;
    size_t len;

    /* truncated data is refused at map time too */
    b = npy_image(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }",
                  NULL, 47, &len);
    gkvt_write_file(f->path, b, len);
    free(b);
    assert_int_equal(gkv_npy_map_open(&m, f->path, msg, sizeof msg), GKV_EFORMAT);
    assert_non_null(strstr(msg, "truncated data"));
    assert_null(m.data);
    assert_null(m.map_base);
    /* an array with no rows maps to no bytes */
    b = npy_image(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 4), }",
                  NULL, 0, &len);
    gkvt_write_file(f->path, b, len);
    free(b);
    GKVT_OK(gkv_npy_map_open(&m, f->path, msg, sizeof msg));
    assert_int_equal(m.hdr.data_bytes, 0);
    assert_non_null(m.data);
    gkv_npy_map_close(&m);
}

/* A bool ('|b1') file maps as u8 with its bytes as they are; a byte
 * other than 0 or 1 anywhere (also past the first 8-byte word, and in a
 * row of several elements) is refused, naming the row. */
static void
test_map_bool(void **state)
{
    struct fx *f = *state;
    gkv_npy_map m = {0};
    unsigned char v[40], bad[40];
    unsigned char *b;
    char msg[256];
    size_t len;

    for (int i = 0; i < 40; i++)
        v[i] = (unsigned char)((i * 7 + 3) % 5 == 0);
    /* 40 rows of one bool */
    b = npy_image(1, "{'descr': '|b1', 'fortran_order': False, 'shape': (40,), }",
                  v, sizeof v, &len);
    gkvt_write_file(f->path, b, len);
    free(b);
    GKVT_OK(gkv_npy_map_open(&m, f->path, msg, sizeof msg));
    assert_int_equal(m.hdr.dtype, GKV_U8);
    assert_int_equal(m.hdr.is_bool, 1);
    assert_int_equal(m.hdr.ndim, 1);
    assert_int_equal(m.hdr.shape[0], 40);
    assert_int_equal(m.hdr.data_bytes, 40);
    assert_memory_equal(m.data, v, sizeof v);
    gkv_npy_map_close(&m);
    /* 10 rows of 4 bools: the same bytes */
    b = npy_image(1, "{'descr': '|b1', 'fortran_order': False, 'shape': (10, 4), }",
                  v, sizeof v, &len);
    gkvt_write_file(f->path, b, len);
    free(b);
    GKVT_OK(gkv_npy_map_open(&m, f->path, msg, sizeof msg));
    assert_int_equal(m.hdr.dtype, GKV_U8);
    assert_int_equal(m.hdr.shape[1], 4);
    assert_memory_equal(m.data, v, sizeof v);
    gkv_npy_map_close(&m);

    /* a 2 at byte 0, 21 (past the first words) and 39 (the tail) */
    {
        static const struct { size_t at; unsigned char val; const char *d1, *d2; } t[] = {
            {0, 2, "row 0 holds byte 2", "row 0 holds byte 2 (element 0 of the row)"},
            {21, 255, "row 21 holds byte 255", "row 5 holds byte 255 (element 1 of the row)"},
            {39, 0x10, "row 39 holds byte 16", "row 9 holds byte 16 (element 3 of the row)"},
        };
        for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
            memcpy(bad, v, sizeof bad);
            bad[t[i].at] = t[i].val;
            b = npy_image(1, "{'descr': '|b1', 'fortran_order': False, "
                          "'shape': (40,), }", bad, sizeof bad, &len);
            gkvt_write_file(f->path, b, len);
            free(b);
            assert_int_equal(gkv_npy_map_open(&m, f->path, msg, sizeof msg),
                             GKV_EFORMAT);
            if (strstr(msg, t[i].d1) == NULL || strstr(msg, "|b1") == NULL)
                fail_msg("case %zu: '%s' lacks '%s'", i, msg, t[i].d1);
            assert_null(m.data);
            assert_null(m.map_base);
            b = npy_image(1, "{'descr': '|b1', 'fortran_order': False, "
                          "'shape': (10, 4), }", bad, sizeof bad, &len);
            gkvt_write_file(f->path, b, len);
            free(b);
            assert_int_equal(gkv_npy_map_open(&m, f->path, msg, sizeof msg),
                             GKV_EFORMAT);
            if (strstr(msg, t[i].d2) == NULL)
                fail_msg("case %zu: '%s' lacks '%s'", i, msg, t[i].d2);
            /* the same bytes as u8 are fine: only a bool is checked */
            b = npy_image(1, "{'descr': '|u1', 'fortran_order': False, "
                          "'shape': (10, 4), }", bad, sizeof bad, &len);
            gkvt_write_file(f->path, b, len);
            free(b);
            GKVT_OK(gkv_npy_map_open(&m, f->path, msg, sizeof msg));
            assert_int_equal(m.hdr.is_bool, 0);
            assert_memory_equal(m.data, bad, sizeof bad);
            gkv_npy_map_close(&m);
        }
    }
}

/* The header read allocates once: its failure is GKV_ENOMEM, leaks
 * nothing, and the file offset is never moved. */
static void
test_read_header_alloc_failure(void **state)
{
    struct fx *f = *state;
    gkv_npy_header h;
    unsigned char *b;
    size_t len;
    int fd;

    b = npy_image(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }",
                  NULL, 8, &len);
    gkvt_write_file(f->path, b, len);
    free(b);
    fd = open(f->path, O_RDONLY);
    assert_int_equal(lseek(fd, 3, SEEK_SET), 3);
    for (int n = 0;; n++) {
        gkv_err rc;
        gkvt_alloc_fail_at(n);
        rc = gkv_npy_read_header_fd(fd, &h, NULL, 0);
        gkvt_alloc_fail_at(-1);
        if (rc == GKV_OK)
            break;
        assert_int_equal(rc, GKV_ENOMEM);
        assert_int_equal(gkvt_alloc_live(), 0);
    }
    assert_int_equal(gkvt_alloc_live(), 0);
    assert_int_equal(h.shape[0], 2);
    assert_int_equal(lseek(fd, 0, SEEK_CUR), 3);
    close(fd);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_each_dtype, setup, gkvt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_shapes_and_syntax, setup, gkvt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_versions_2_and_3, setup, gkvt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_header_matches_numpy, setup, gkvt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_format_then_parse, setup, gkvt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_format_rejects, setup, gkvt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_rejects_each_bad_header, setup, gkvt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_rejects_bad_files, setup, gkvt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_truncations_and_flips, setup, gkvt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_map_npy_and_raw, setup, gkvt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_map_rejects_and_zero_rows, setup, gkvt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_map_bool, setup, gkvt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_read_header_alloc_failure, setup, gkvt_dir_teardown),
    };

    return cmocka_run_group_tests_name("npy", tests, NULL, NULL);
}
