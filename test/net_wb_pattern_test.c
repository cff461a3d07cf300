/* net_wb_pattern_test.c - what a real gkv-server says about its
 * --writeback patterns: at start, which tensors each matched, or a warning
 * that one matches none yet (with a hint on a graph partition's names);
 * later, a tensor a client creates that a pattern takes into write-back;
 * at the stop, "last pushes written" only when it held a write-back
 * tensor. A pattern that matched nothing used to pass in silence, and the
 * stop claimed pushes written all the same.
 *
 * Every server is a process of the test's job, killed and reaped by PID in
 * the teardown (gkvt_job_fini), also after a failed assertion.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gkvt_net.h"
#include "gkvt_graph.h"

#define MAXPROC 8
#define NO_MATCH "matches no tensor yet; tensors created later whose " \
                 "names match will be held in RAM"

static int
setup(void **state)
{
    static const char *const opts[] = {"--keep-alive", "--flush-ms",
                                       "86400000", NULL};

    return gkvt_job_setup(state, sizeof (struct gkvt_job), "wbpat", MAXPROC,
                          opts, 0);
}

static int
teardown(void **state)
{
    return gkvt_job_teardown(state);
}

/* The log must (want 1) or must not (want 0) hold 'needle'. */
static void
log_check(const struct gkvt_proc *p, const char *needle, int want)
{
    if (gkvt_file_has(p->log, needle) != want) {
        char *t = gkvt_slurp(p->log);
        fail_msg("server log %s '%s':\n%s", want ? "lacks" : "has", needle, t);
    }
}

/* SIGTERM; the server must exit 0. */
static void
stop(struct gkvt_proc *p)
{
    kill(p->pid, SIGTERM);
    assert_true(gkvt_proc_wait(p, 15000));
    assert_int_equal(gkvt_proc_code(p), 0);
}

/* Patterns that match nothing: each is warned about at start, nothing is
 * in write-back, and the stop says nothing was held instead of "last
 * pushes written". A tensor that exists but does not match stays out. */
static void
test_matches_none(void **state)
{
    struct gkvt_job *f = *state;
    const char *extra[] = {"--writeback", "emb*", "--writeback", "x", NULL};
    struct gkvt_proc *srv[1];

    gkvt_make_f32(f->st[0], "feat", 4, 0, 100);
    gkvt_serve(f, 1, 1, extra, srv);
    log_check(srv[0], "write-back: WARNING: 'emb*' " NO_MATCH, 1);
    log_check(srv[0], "write-back: WARNING: 'x' " NO_MATCH, 1);
    log_check(srv[0], "write-back: tensor", 0);
    /* a plain store: no hint about graph names */
    log_check(srv[0], "node/NTYPE/NAME", 0);
    stop(srv[0]);
    log_check(srv[0], "write-back: no tensor was held in RAM (--writeback "
              "'emb*', 'x' matched none); nothing to write", 1);
    log_check(srv[0], "last pushes written", 0);
}

/* A pattern's matches are listed at start; a tensor a client creates
 * later is said to be taken into write-back, with the pattern; its push
 * is on disk after the stop, which says so. */
static void
test_matches_and_later(void **state)
{
    struct gkvt_job *f = *state;
    const char *extra[] = {"--writeback", "emb*", "--writeback", "late*",
                           "--writeback", "feat", NULL};
    struct gkvt_proc *srv[1];
    gkv_tensor_spec sp = gkvt_spec(GKV_F32, 4, 0, 10);
    float row[4] = {1.5f, -2.0f, 3.25f, 0.5f}, got[4];
    uint64_t id = 7;
    gkv_client *c;
    gkv_store *s;

    gkvt_make_f32(f->st[0], "emb_a", 4, 0, 100);
    gkvt_make_f32(f->st[0], "emb_b", 4, 0, 50);
    gkvt_make_f32(f->st[0], "feat", 4, 0, 100);
    gkvt_make_f32(f->st[0], "other", 4, 0, 100);
    gkvt_serve(f, 1, 1, extra, srv);
    log_check(srv[0], "write-back: 'emb*' matches 2 tensors: 'emb_a', "
              "'emb_b'", 1);
    log_check(srv[0], "write-back: 'feat' matches 1 tensor: 'feat'", 1);
    log_check(srv[0], "write-back: WARNING: 'late*' " NO_MATCH, 1);
    log_check(srv[0], "write-back: WARNING: 'emb*'", 0);
    log_check(srv[0], "write-back: tensor 'emb_a' (100 rows", 1);
    log_check(srv[0], "write-back: tensor 'emb_b' (50 rows", 1);
    log_check(srv[0], "write-back: tensor 'other'", 0);

    c = gkvt_connect(f->cfg, "wb", 0, NULL);
    NET_OK(gkv_client_create(c, "late_emb", &sp, 0));
    NET_OK(gkv_client_push(c, "late_emb", &id, 1, row, sizeof row, NULL));
    NET_OK(gkv_client_close(c));
    log_check(srv[0], "write-back: tensor 'late_emb', created by group 'wb' "
              "rank 0, matches 'late*': taken into write-back (10 rows", 1);
    stop(srv[0]);
    log_check(srv[0], "write-back: last pushes written", 1);
    log_check(srv[0], "nothing to write", 0);
    /* and it was: the pushed row is in the store */
    GKVT_OK(gkv_store_open(&s, f->st[0], GKV_RDONLY, NULL));
    GKVT_OK(gkv_tensor_pull(s, NULL, "late_emb", &id, 1, got, sizeof got));
    gkv_store_close(s);
    assert_memory_equal(got, row, sizeof row);
}

/* A tensor taken into write-back and deleted again: nothing is held at
 * the stop, which says so (not that the pattern matched none). */
static void
test_held_then_deleted(void **state)
{
    struct gkvt_job *f = *state;
    const char *extra[] = {"--writeback", "emb*", NULL};
    struct gkvt_proc *srv[1];
    gkv_tensor_spec sp = gkvt_spec(GKV_F32, 4, 0, 10);
    gkv_client *c;

    gkvt_make_f32(f->st[0], "feat", 4, 0, 100);
    gkvt_serve(f, 1, 1, extra, srv);
    log_check(srv[0], "write-back: WARNING: 'emb*' " NO_MATCH, 1);
    c = gkvt_connect(f->cfg, "wb", 0, NULL);
    NET_OK(gkv_client_create(c, "emb", &sp, 0));
    NET_OK(gkv_client_delete(c, "emb"));
    NET_OK(gkv_client_close(c));
    log_check(srv[0], "write-back: tensor 'emb', created by group 'wb' rank "
              "0, matches 'emb*': taken into write-back", 1);
    stop(srv[0]);
    log_check(srv[0], "write-back: no tensor is held in RAM any more (the 1 "
              "held were deleted); nothing to write", 1);
    log_check(srv[0], "last pushes written", 0);
}

/* A graph partition: 'emb*' (the plain store's form) matches nothing
 * there and the warning names the graph's form; 'node/user/emb', which
 * the trainers create, is taken into write-back when they do. */
static void
test_graph_names(void **state)
{
    struct gkvt_job *f = *state;
    const char *plain[] = {"--writeback", "emb*", NULL};
    const char *graph[] = {"--writeback", "node/user/emb", NULL};
    struct gkvt_proc *srv[1];
    gkv_graph *g = gkvt_ui_graph(5, 0);
    gkv_tensor_spec sp = gkvt_spec(GKV_F32, 4, 0, 0);
    const gkv_pbook *b;
    int64_t lo, hi;
    gkv_client *c;

    gkvt_partition(g, f->dir, "parts", "ui", 1, 3, NULL, 0, f->json,
                   sizeof f->json);
    gkv_graph_free(g);

    gkvt_serve(f, 1, 1, plain, srv);
    log_check(srv[0], "write-back: WARNING: 'emb*' " NO_MATCH " (this "
              "server serves a graph partition, whose tensors are named "
              "node/NTYPE/NAME and edge/ETYPE/NAME: the embedding 'emb' of "
              "node type 'user' is 'node/user/emb')", 1);
    stop(srv[0]);
    log_check(srv[0], "write-back: no tensor was held in RAM (--writeback "
              "'emb*' matched none); nothing to write", 1);
    log_check(srv[0], "last pushes written", 0);

    gkvt_serve(f, 1, 1, graph, srv);
    log_check(srv[0], "write-back: WARNING: 'node/user/emb' " NO_MATCH, 1);
    log_check(srv[0], "node/NTYPE/NAME", 0);
    c = gkvt_connect(f->cfg, "trainers", 0, NULL);
    b = gkv_client_pbook(c);
    assert_non_null(b);
    GKVT_OK(gkv_pbook_node_range(b, 0, 0, &lo, &hi));
    sp.lo = (uint64_t)lo;
    sp.hi = (uint64_t)hi;
    NET_OK(gkv_client_create(c, "node/user/emb", &sp, 0));
    NET_OK(gkv_client_close(c));
    log_check(srv[0], "write-back: tensor 'node/user/emb', created by group "
              "'trainers' rank 0, matches 'node/user/emb': taken into "
              "write-back", 1);
    stop(srv[0]);
    log_check(srv[0], "write-back: last pushes written", 1);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_matches_none, setup, teardown),
        cmocka_unit_test_setup_teardown(test_matches_and_later, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_held_then_deleted, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_graph_names, setup, teardown),
    };

    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests_name("writeback_pattern", tests, NULL, NULL);
}
