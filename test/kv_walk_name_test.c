/* kv_walk_name_test.c - a damaged data page is named rightly (issue 26).
 *
 * The structural walk (kv/walk.c) names the tensor a damaged page of the
 * data tree holds, from the keys its parent bounds it by. The data tree's
 * ROOT page has no bounds: its keys are every tensor's. Damaging its
 * header once named "tensor id 1684108385": the main tree's key "data"
 * ("data" as a u32), read as a tensor id after the nested walk failed.
 * Here: the root's damaged flags name no tensor ("any tensor"), and a leaf
 * below it still names its own tensor. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "gkvt.h"
#include "gkvt_mdb.h"

#define PSIZE 4096u

struct fx {
    char *dir;
    char st[4200], mdb[4300];
    unsigned char *img;       /* data.mdb as built */
    size_t len;
};

static uint16_t
at16(const unsigned char *b, size_t off)
{
    uint16_t v;

    memcpy(&v, b + off, 2);
    return v;
}

static int
setup(void **state)
{
    struct fx *f;
    gkv_store *s;
    gkv_tensor_spec a = gkvt_spec_init(GKV_F32, 4, 0, 4000, GKV_INIT_UNIFORM);
    gkv_tensor_spec b = gkvt_spec_init(GKV_F32, 4, 0, 100, GKV_INIT_UNIFORM);

    if (gkvt_dir_setup(state, sizeof *f, "kv_walk_name") != 0)
        return -1;
    f = *state;
    snprintf(f->st, sizeof f->st, "%s/st", f->dir);
    snprintf(f->mdb, sizeof f->mdb, "%s/data.mdb", f->st);
    a.chunk_rows = 16;        /* 250 small chunks: a data tree of branches */
    GKVT_OK(gkv_store_open(&s, f->st, GKV_CREATE, NULL));
    GKVT_OK(gkv_tensor_create(s, "alpha", &a));
    GKVT_OK(gkv_tensor_create(s, "beta", &b));
    GKVT_OK(gkv_store_verify(s, NULL, NULL));
    gkv_store_close(s);
    f->img = gkvt_read_file(f->mdb, &f->len);
    assert_true(f->len > 0);
    return 0;
}

static int
teardown(void **state)
{
    struct fx *f = *state;

    free(f->img);
    return gkvt_dir_teardown(state);
}

/* The data database's record (MDB_db, 48 bytes) in the image: from the
 * newest meta page, the main database's root (one leaf) and its "data"
 * node. */
static const unsigned char *
data_db(const struct fx *f)
{
    uint64_t p = gkvt_mdb_db_root(f->img, NULL) * PSIZE;

    assert_int_equal(at16(f->img, p + 10), 0x02);    /* a leaf */
    return gkvt_mdb_db(f->img, "data");
}

/* Writes the image back with page pg's flags byte XOR 0xff; opens the
 * store (which checks its structure) or verifies it, and returns the
 * message of the refusal. */
static const char *
damaged_msg(const struct fx *f, uint64_t pg)
{
    unsigned char fl = f->img[pg * PSIZE + 10] ^ 0xff;
    gkv_store *s;
    gkv_err rc;
    int fd;
    static char msg[2048];

    gkvt_write_file(f->mdb, f->img, f->len);
    fd = open(f->mdb, O_WRONLY);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, &fl, 1, (off_t)(pg * PSIZE + 10)), 1);
    close(fd);
    rc = gkv_store_open(&s, f->st, GKV_RDONLY, NULL);
    if (rc == GKV_OK) {
        assert_int_equal(gkv_store_verify(s, NULL, NULL), GKV_ECORRUPT);
        snprintf(msg, sizeof msg, "%s", gkv_store_errmsg(s));
        gkv_store_close(s);
    } else {
        assert_int_equal(rc, GKV_ECORRUPT);
        snprintf(msg, sizeof msg, "%s", gkv_store_errmsg(NULL));
    }
    return msg;
}

static void
test_data_root_names_no_tensor(void **state)
{
    struct fx *f = *state;
    const unsigned char *db = data_db(f);
    uint64_t root = gkvt_mdb_u64(db, 40);
    const char *msg = damaged_msg(f, root);
    char want[64];

    snprintf(want, sizeof want, "data page %llu", (unsigned long long)root);
    if (strstr(msg, want) == NULL || strstr(msg, "any tensor") == NULL ||
        strstr(msg, "tensor id") != NULL || strstr(msg, "tensor '") != NULL)
        fail_msg("damaged root page %llu: %s", (unsigned long long)root, msg);
}

static void
test_data_leaf_names_its_tensor(void **state)
{
    struct fx *f = *state;
    const unsigned char *db = data_db(f);
    uint64_t root = gkvt_mdb_u64(db, 40), child;
    size_t n;
    const char *msg;
    char want[64];

    assert_true(at16(db, 6) >= 2);                   /* depth: root a branch */
    assert_int_equal(at16(f->img, root * PSIZE + 10), 0x01);
    assert_true((at16(f->img, root * PSIZE + 12) - 16u) / 2 >= 3);
    /* the root's second child: keys between its first two keys, of
     * "alpha" (created first, the lower tensor id, 250 chunks) */
    n = root * PSIZE + at16(f->img, root * PSIZE + 16 + 2);
    child = at16(f->img, n) | (uint64_t)at16(f->img, n + 2) << 16 |
            (uint64_t)at16(f->img, n + 4) << 32;
    msg = damaged_msg(f, child);
    snprintf(want, sizeof want, "data page %llu", (unsigned long long)child);
    if (strstr(msg, want) == NULL || strstr(msg, "tensor 'alpha'") == NULL)
        fail_msg("damaged page %llu below the root: %s",
                 (unsigned long long)child, msg);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_data_root_names_no_tensor,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_data_leaf_names_its_tensor,
                                        setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
