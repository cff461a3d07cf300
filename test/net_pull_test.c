/* net_pull_test.c - large remote pulls against a real gkv-server process on
 * loopback (started and stopped by PID; the teardown kills and reaps every
 * process a test started, also after a failed assertion): pulls of tens of
 * MB, as a mini-batch's features are, cut into many replies and copied out
 * of each, compared byte for byte with the store's rows read in-process:
 *   - 512-byte rows, random IDs with duplicates, into destinations at odd
 *     addresses, with guard bytes on both sides that must stay untouched;
 *   - 52-byte rows, so no reply is a multiple of 64 bytes;
 *   - a small pull of the same IDs gives the same bytes.
 *
 * Ports: each test picks a range no one is listening on from a
 * PID-dependent start, and starts over on a fresh range when a server
 * still finds its port taken. GKVT_PORT_BASE fixes the start; GKVT_SEED
 * repeats a run's random IDs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gkvt_net.h"

#define MAXPROC 4
#define GUARD   64           /* guard bytes each side of a destination */

static int
setup(void **state)
{
    return gkvt_job_setup(state, sizeof (struct gkvt_job), "netpull", MAXPROC,
                          NULL, 0);
}

/* Kills and reaps every process the test started; a sanitizer report in
 * any of their logs (SAN= builds) fails the test. */
static int
teardown(void **state)
{
    return gkvt_job_teardown(state);
}

/* Rows ids[0..n) of tensor name in store st, read in-process. */
static unsigned char *
read_rows(const char *st, const char *name, const uint64_t *ids, size_t n,
          size_t rb)
{
    gkv_store *s;
    unsigned char *b = malloc(n * rb);

    assert_non_null(b);
    GKVT_OK(gkv_store_open(&s, st, GKV_RDONLY, NULL));
    GKVT_OK(gkv_tensor_pull(s, NULL, name, ids, n, b, n * rb));
    gkv_store_close(s);
    return b;
}

/* Pulls ids[0..n) of name through c into a destination 'skew' bytes past
 * an aligned address, between guard bytes, and checks the rows against
 * want and the guards against their fill. */
static void
pull_check(gkv_client *c, const char *name, const uint64_t *ids, size_t n,
           size_t rb, size_t skew, const unsigned char *want)
{
    size_t len = n * rb;
    unsigned char *buf = malloc(len + 2 * GUARD + 64), *dst, *p;

    assert_non_null(buf);
    dst = buf + GUARD + skew;
    memset(buf, 0xab, len + 2 * GUARD + 64);
    NET_OK(gkv_client_pull(c, name, ids, n, dst, len));
    assert_memory_equal(dst, want, len);
    for (p = buf; p < dst; p++)
        assert_int_equal(*p, 0xab);
    for (p = dst + len; p < buf + len + 2 * GUARD + 64; p++)
        assert_int_equal(*p, 0xab);
    free(buf);
}

static void
test_large_pulls_match_the_store(void **state)
{
    struct gkvt_job *f = *state;
    gkv_tensor_spec wide = gkvt_spec_init(GKV_F32, 128, 0, 60000,
                                          GKV_INIT_UNIFORM);
    gkv_tensor_spec odd = gkvt_spec_init(GKV_F32, 13, 1000, 401000,
                                         GKV_INIT_UNIFORM);
    uint64_t x = gkvt_seed(), *ids;
    size_t nw = 40000, no = 330000;       /* 20.5 MB and 17.2 MB */
    unsigned char *want;
    gkv_client *c;

    gkvt_store_create(f->st[0], "wide", &wide);
    gkvt_store_create(f->st[0], "odd", &odd);
    gkvt_serve(f, 1, 1, NULL, NULL);
    c = gkvt_connect(f->cfg, "job", 0, NULL);
    ids = malloc(no * sizeof *ids);
    assert_non_null(ids);

    /* 512-byte rows with duplicates, aligned and at odd addresses */
    for (size_t i = 0; i < nw; i++)
        ids[i] = tools__splitmix64(&x) % 60000;
    ids[1] = ids[0];
    ids[nw - 1] = ids[0];
    want = read_rows(f->st[0], "wide", ids, nw, 512);
    pull_check(c, "wide", ids, nw, 512, 0, want);
    pull_check(c, "wide", ids, nw, 512, 3, want);
    pull_check(c, "wide", ids, nw, 512, 17, want);
    /* a pull of one reply: the same bytes */
    pull_check(c, "wide", ids, 1000, 512, 5, want);
    free(want);

    /* 52-byte rows: replies that do not end on a 64-byte step */
    for (size_t i = 0; i < no; i++)
        ids[i] = 1000 + tools__splitmix64(&x) % 400000;
    want = read_rows(f->st[0], "odd", ids, no, 52);
    pull_check(c, "odd", ids, no, 52, 0, want);
    pull_check(c, "odd", ids, no, 52, 9, want);
    free(want);

    NET_OK(gkv_client_close(c));
    free(ids);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int
main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_large_pulls_match_the_store),
    };

    return cmocka_run_group_tests_name("net_pull", tests, NULL, NULL);
}
