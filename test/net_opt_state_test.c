/* net_opt_state_test.c - optimizer state through servers: DGL's
 * SparseAdam.save / .load in a distributed job. Real gkv-server processes
 * on loopback (2 machines, one store each), started and stopped by PID
 * (teardown kills and reaps every process a test started, also after a
 * failed assertion); the client pulls and assign-pushes the companions
 * "T#adam_m", ... and resets them (gkv_client_opt_reset).
 *
 * The resume tests run the same adam pushes three ways: a job that is
 * checkpointed half way and restored into fresh servers and stores; an
 * uninterrupted job (the reference, byte for byte); and a job restored
 * without its optimizer state (which must differ: the check can fail).
 *
 * Ports: gkvt_port_base() per job, everything again on new ports when a
 * server still finds its port taken. GKVT_PORT_BASE fixes the start.
 */
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "gkvt.h"
#include "gkv_net.h"

#define MAXPROC 24
#define NROWS   20              /* IDs [0, 20): [0, 10) on machine 0 */
#define WIDTH   3
#define STEPS   10              /* pushes; the checkpoint is after HALF */
#define HALF    5

struct job {
    char st[2][4200];            /* machine m's store */
    char cfg[4200];
    int base;
    gkv_client *c;
};

struct fx {
    char *dir;
    int njob;
    struct gkvt_proc p[MAXPROC];
    int np;
};

static char g_server_path[PATH_MAX + 16];
static char g_kvctl_path[PATH_MAX + 16];

static int
setup(void **state)
{
    return gkvt_dir_setup(state, sizeof(struct fx), "netopt");
}

/* Kills and reaps every process the test started; a sanitizer report in
 * any of their logs (SAN= builds) fails the test. */
static int
teardown(void **state)
{
    struct fx *f = *state;
    int bad = gkvt_proc_reap_all(f->p, f->np);

    gkvt_dir_teardown(state);
    return bad ? -1 : 0;
}

/* ---- jobs: 2 machines, one server each, fresh stores ----------------------- */

static struct gkvt_proc *
server_try(struct fx *f, struct job *j, int m, const char *const *extra)
{
    char *argv[32], mach[16], logname[64];
    struct gkvt_proc *p;
    int n = 0;

    snprintf(mach, sizeof mach, "%d", m);
    snprintf(logname, sizeof logname, "job%d-m%d.log", f->njob, m);
    argv[n++] = g_server_path;
    argv[n++] = "--store";
    argv[n++] = j->st[m];
    argv[n++] = "--ip-config";
    argv[n++] = j->cfg;
    argv[n++] = "--machine";
    argv[n++] = mach;
    argv[n++] = "--create";
    for (int i = 0; extra != NULL && extra[i] != NULL && n < 30; i++)
        argv[n++] = (char *)extra[i];
    argv[n] = NULL;
    p = gkvt_spawn(f->p, &f->np, MAXPROC, f->dir, argv, logname);
    return gkvt_server_listening(p) ? p : NULL;
}

/* Starts a fresh job (new stores, new ports) and connects a client. */
static void
job_start(struct fx *f, struct job *j, const char *const *extra)
{
    gkv_client_opts o = {0};
    int id = f->njob++;

    memset(j, 0, sizeof *j);
    for (int m = 0; m < 2; m++)
        snprintf(j->st[m], sizeof j->st[m], "%s/j%d-st%d", f->dir, id, m);
    snprintf(j->cfg, sizeof j->cfg, "%s/j%d.cfg", f->dir, id);
    for (int attempt = 0; ; attempt++) {
        struct gkvt_proc *p0, *p1 = NULL;
        char text[128];

        if (attempt == 20)
            fail_msg("could not find free ports in 20 tries");
        j->base = gkvt_port_base(16);
        snprintf(text, sizeof text, "127.0.0.1 %d\n127.0.0.1 %d\n", j->base,
                 j->base + 8);
        gkvt_write_text(j->cfg, text, 0644);
        if ((p0 = server_try(f, j, 0, extra)) != NULL &&
            (p1 = server_try(f, j, 1, extra)) != NULL)
            break;
        if (p0 != NULL)
            gkvt_proc_kill(p0);
    }
    o.timeout_ms = 20000;
    o.group_size = 1;
    NET_OK(gkv_client_connect(&j->c, j->cfg, NULL, "job", 0, &o));
}

static void
job_end(struct job *j)
{
    NET_OK(gkv_client_close(j->c));
    j->c = NULL;
}

static void
create_emb(struct job *j, const char *name, gkv_dtype dt, uint64_t width)
{
    gkv_tensor_spec sp = gkvt_spec_init(dt, width, 0, NROWS,
                                        GKV_INIT_UNIFORM);

    NET_OK(gkv_client_create(j->c, name, &sp, -1));
}

/* ---- the pushes ------------------------------------------------------------- */

/* Step k's IDs (both machines, one twice) and gradients. */
static size_t
step_batch(int k, uint64_t ids[6], float g[6 * WIDTH])
{
    ids[0] = (uint64_t)k % NROWS;
    ids[1] = (uint64_t)(k * 3 + 5) % NROWS;
    ids[2] = 12;
    ids[3] = 3;
    ids[4] = 3;
    ids[5] = 19;
    for (int i = 0; i < 6; i++)
        for (int c = 0; c < WIDTH; c++)
            g[i * WIDTH + c] = (float)((k * 31 + i * 7 + c * 3) % 17 - 8) / 8.0f;
    return 6;
}

static void
adam_steps(gkv_client *c, int from, int to)
{
    gkv_push_args a = {0};
    uint64_t ids[6];
    float g[6 * WIDTH];

    a.handler = "adam";
    a.lr = 0.05;
    for (int k = from; k < to; k++) {
        size_t n = step_batch(k, ids, g);
        NET_OK(gkv_client_push(c, "emb", ids, n, g, sizeof g, &a));
    }
}

/* Everything a checkpoint holds: the rows and the four companions. */
static const char *const parts[5] = {
    "emb", "emb#adam_m", "emb#adam_v", "emb#adam_t", "emb#adagrad_s"
};
static const size_t part_rb[5] = {
    WIDTH * 4, WIDTH * 4, WIDTH * 4, 8, WIDTH * 4
};

struct ckpt {
    unsigned char *b[5];
};

static void
ckpt_pull(gkv_client *c, struct ckpt *k)
{
    uint64_t ids[NROWS];

    for (int i = 0; i < NROWS; i++)
        ids[i] = (uint64_t)i;
    for (int p = 0; p < 5; p++) {
        k->b[p] = malloc(NROWS * part_rb[p]);
        NET_OK(gkv_client_pull(c, parts[p], ids, NROWS, k->b[p],
                               NROWS * part_rb[p]));
    }
}

/* Restores the parts up to 'np' (1: the rows only) with assign pushes. */
static void
ckpt_push(gkv_client *c, const struct ckpt *k, int np)
{
    uint64_t ids[NROWS];

    for (int i = 0; i < NROWS; i++)
        ids[i] = (uint64_t)(NROWS - 1 - i);     /* any order */
    for (int p = 0; p < np; p++) {
        unsigned char *rev = malloc(NROWS * part_rb[p]);
        for (int i = 0; i < NROWS; i++)
            memcpy(rev + i * part_rb[p],
                   k->b[p] + (NROWS - 1 - i) * part_rb[p], part_rb[p]);
        NET_OK(gkv_client_push(c, parts[p], ids, NROWS, rev,
                               NROWS * part_rb[p], NULL));
        free(rev);
    }
}

static void
ckpt_free(struct ckpt *k)
{
    for (int p = 0; p < 5; p++)
        free(k->b[p]);
}

static int
all_zero(const unsigned char *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (b[i] != 0)
            return 0;
    return 1;
}

/* ---- save, load, go on: byte-identical to an uninterrupted run -------------- */

static void
resume(struct fx *f, const char *const *extra)
{
    struct job a, b, ref, bare;
    struct ckpt save, got, want, lost;
    const int64_t *t;

    /* job a: half the pushes, then the checkpoint (SparseAdam.save) */
    job_start(f, &a, extra);
    create_emb(&a, "emb", GKV_F32, WIDTH);
    adam_steps(a.c, 0, HALF);
    ckpt_pull(a.c, &save);
    /* the state is real: steps counted on both machines, moments set;
     * adagrad was never used, so its state is zeros */
    t = (const int64_t *)(const void *)save.b[3];
    assert_int_equal(t[3], HALF);          /* ID 3 in every step (twice) */
    assert_int_equal(t[12], HALF);
    assert_int_equal(t[19], HALF);
    assert_int_equal(t[18], 0);            /* never pushed */
    assert_false(all_zero(save.b[1], NROWS * part_rb[1]));
    assert_false(all_zero(save.b[2], NROWS * part_rb[2]));
    assert_true(all_zero(save.b[4], NROWS * part_rb[4]));
    job_end(&a);

    /* job b: fresh servers and stores, the tensor created the same way,
     * the checkpoint loaded (SparseAdam.load), the rest of the pushes */
    job_start(f, &b, extra);
    create_emb(&b, "emb", GKV_F32, WIDTH);
    ckpt_push(b.c, &save, 5);
    ckpt_pull(b.c, &got);
    for (int p = 0; p < 5; p++)
        assert_memory_equal(got.b[p], save.b[p], NROWS * part_rb[p]);
    ckpt_free(&got);
    adam_steps(b.c, HALF, STEPS);
    ckpt_pull(b.c, &got);

    /* the reference: every push on one job, uninterrupted (no write-back) */
    job_start(f, &ref, NULL);
    create_emb(&ref, "emb", GKV_F32, WIDTH);
    adam_steps(ref.c, 0, STEPS);
    ckpt_pull(ref.c, &want);
    for (int p = 0; p < 5; p++)
        if (memcmp(got.b[p], want.b[p], NROWS * part_rb[p]) != 0)
            fail_msg("'%s' after save, load and %d more pushes differs from "
                     "the uninterrupted run", parts[p], STEPS - HALF);

    /* the check can fail: rows restored without their optimizer state */
    job_start(f, &bare, extra);
    create_emb(&bare, "emb", GKV_F32, WIDTH);
    ckpt_push(bare.c, &save, 1);
    adam_steps(bare.c, HALF, STEPS);
    ckpt_pull(bare.c, &lost);
    assert_true(memcmp(lost.b[0], want.b[0], NROWS * part_rb[0]) != 0);
    assert_true(memcmp(lost.b[3], want.b[3], NROWS * part_rb[3]) != 0);

    ckpt_free(&save);
    ckpt_free(&got);
    ckpt_free(&want);
    ckpt_free(&lost);
    job_end(&b);
    job_end(&ref);
    job_end(&bare);
}

static void
test_resume(void **state)
{
    resume(*state, NULL);
}

/* The same with write-back servers that never flush during the test: the
 * state lives in their RAM, and only pulls that read the RAM copy see it. */
static void
test_resume_writeback(void **state)
{
    const char *extra[] = {"--writeback", "emb", "--flush-ms", "86400000",
                           NULL};

    resume(*state, extra);
}

/* ---- zeros before any push, reset, bad inputs -------------------------------- */

static void
pull_all(gkv_client *c, const char *name, void *dst, size_t rb)
{
    uint64_t ids[NROWS];

    for (int i = 0; i < NROWS; i++)
        ids[i] = (uint64_t)i;
    NET_OK(gkv_client_pull(c, name, ids, NROWS, dst, NROWS * rb));
}

static void
expect(gkv_err got, gkv_err want, const char *needle)
{
    if (got != want)
        fail_msg("expected %s, got %s: %s", gkv_err_name(want),
                 gkv_err_name(got), gkv_net_errmsg());
    if (needle != NULL && strstr(gkv_net_errmsg(), needle) == NULL)
        fail_msg("message '%s' does not say '%s'", gkv_net_errmsg(), needle);
}

static void
test_zeros_and_reset(void **state)
{
    struct fx *f = *state;
    struct job j;
    unsigned char m[NROWS * WIDTH * 4], v[NROWS * WIDTH * 4];
    unsigned char before[NROWS * WIDTH * 4], e1[NROWS * WIDTH * 4];
    unsigned char d64[NROWS * 2 * 8], big[NROWS * 16];
    int64_t tt[NROWS];
    gkv_push_args adam = {0}, ada = {0};
    uint64_t ids[2] = {4, 15};
    float g[2 * WIDTH] = {0.5f, -1, 2, 1, 0.25f, -0.75f};
    float row[2 * WIDTH];
    char *sdir;
    gkv_store *s;
    gkv_tensor_spec sp;

    job_start(f, &j, NULL);
    create_emb(&j, "emb", GKV_F32, WIDTH);
    create_emb(&j, "emb64", GKV_F64, 2);
    create_emb(&j, "cnt", GKV_I64, 1);

    /* before any optimizer push: zeros of the companion's rows */
    memset(m, 0xab, sizeof m);
    pull_all(j.c, "emb#adam_m", m, WIDTH * 4);
    assert_true(all_zero(m, sizeof m));
    memset(tt, 0xab, sizeof tt);
    pull_all(j.c, "emb#adam_t", tt, 8);
    assert_true(all_zero((unsigned char *)tt, sizeof tt));
    memset(d64, 0xab, sizeof d64);
    pull_all(j.c, "emb64#adam_v", d64, 2 * 8);          /* f64 for f64 */
    assert_true(all_zero(d64, sizeof d64));
    pull_all(j.c, "emb#adagrad_s", m, WIDTH * 4);
    assert_true(all_zero(m, sizeof m));
    {   /* the companion's row size, not the tensor's */
        gkv_tensor_desc d;
        NET_OK(gkv_client_tensor_info(j.c, "emb#adam_t", &d));
        assert_int_equal(d.row_bytes, 8);
        assert_int_equal(d.dtype, GKV_I64);
        assert_int_equal(d.lo, 0);
        assert_int_equal(d.hi, NROWS);
        expect(gkv_client_pull(j.c, "emb#adam_m", ids, 2, big, 2 * 8),
               GKV_ESHAPE, "emb#adam_m");
    }

    /* one adam step, then an adagrad one on other rows */
    adam.handler = "adam";
    adam.lr = 0.05;
    ada.handler = "adagrad";
    ada.lr = 0.1;
    NET_OK(gkv_client_push(j.c, "emb", ids, 2, g, sizeof g, &adam));
    NET_OK(gkv_client_push(j.c, "emb", ids, 2, g, sizeof g, &ada));
    pull_all(j.c, "emb#adam_m", m, WIDTH * 4);
    assert_false(all_zero(m, sizeof m));
    pull_all(j.c, "emb#adagrad_s", v, WIDTH * 4);
    assert_false(all_zero(v, sizeof v));

    /* adam's own betas reach the server's push: the rows and both
     * moments equal an in-process push with the same betas (each beta
     * away from the defaults and from the other) */
    {
        gkv_push_args b = {0};
        gkv_tensor_spec rs = {.dtype = GKV_F32, .ndim = 1, .shape = {WIDTH},
                              .lo = 0, .hi = NROWS, .init = GKV_INIT_UNIFORM,
                              .a = -1, .b = 1, .seed = 7};
        unsigned char got[2 * WIDTH * 4], want[2 * WIDTH * 4];
        static const char *const names[] = {"embb", "embb#adam_m",
                                            "embb#adam_v"};
        char *rdir = gkvt_mkdtemp("optref");
        gkv_store *rst;

        create_emb(&j, "embb", GKV_F32, WIDTH);
        b.handler = "adam";
        b.lr = 0.05;
        b.beta1 = 0.8;
        b.beta2 = 0.95;
        NET_OK(gkv_client_push(j.c, "embb", ids, 2, g, sizeof g, &b));
        NET_OK(gkv_client_push(j.c, "embb", ids, 2, g, sizeof g, &b));
        GKVT_OK(gkv_store_open(&rst, rdir, GKV_CREATE, NULL));
        GKVT_OK(gkv_tensor_create(rst, "embb", &rs));
        GKVT_OK(gkv_tensor_push(rst, "embb", ids, 2, g, sizeof g, &b));
        GKVT_OK(gkv_tensor_push(rst, "embb", ids, 2, g, sizeof g, &b));
        for (int k = 0; k < 3; k++) {
            NET_OK(gkv_client_pull(j.c, names[k], ids, 2, got, sizeof got));
            GKVT_OK(gkv_tensor_pull(rst, NULL, names[k], ids, 2, want,
                                    sizeof want));
            if (memcmp(got, want, sizeof got) != 0)
                fail_msg("%s through the server differs from in-process",
                         names[k]);
        }
        gkv_store_close(rst);
        gkvt_rmtree(rdir);
    }

    /* bad inputs: clear errors, nothing changes (bytes before and after) */
    pull_all(j.c, "emb", before, WIDTH * 4);
    {
        gkv_push_args add = {0};
        unsigned char m2[sizeof m], v2[sizeof v], after[sizeof before];
        int64_t neg[2] = {1, -3};

        add.handler = "add";
        expect(gkv_client_push(j.c, "emb#adam_m", ids, 2, g, sizeof g, &add),
               GKV_EINVAL, "only assign");
        expect(gkv_client_push(j.c, "emb#adam_m", ids, 2, g, sizeof g, &adam),
               GKV_EINVAL, "only assign");
        expect(gkv_client_push(j.c, "emb#adam_x", ids, 2, g, sizeof g, NULL),
               GKV_EINVAL, "is not optimizer state");
        expect(gkv_client_pull(j.c, "emb#adam_x", ids, 2, g, sizeof g),
               GKV_EINVAL, "is not optimizer state");
        expect(gkv_client_push(j.c, "#adam_m", ids, 2, g, sizeof g, NULL),
               GKV_EINVAL, "is not optimizer state");
        expect(gkv_client_push(j.c, "nope#adam_m", ids, 2, g, sizeof g, NULL),
               GKV_ENOTFOUND, "tensor 'nope'");
        expect(gkv_client_pull(j.c, "nope#adam_v", ids, 2, g, sizeof g),
               GKV_ENOTFOUND, "tensor 'nope'");
        expect(gkv_client_push(j.c, "cnt#adam_m", ids, 2, g, 2 * 8, NULL),
               GKV_EINVAL, "floating");
        expect(gkv_client_push(j.c, "emb#adam_m", ids, 2, g, sizeof g - 4,
                               NULL), GKV_ESHAPE, "emb#adam_m");
        expect(gkv_client_push(j.c, "emb#adam_t", ids, 2, g, sizeof g, NULL),
               GKV_ESHAPE, "emb#adam_t");
        /* a negative step count: refused by the server's store */
        expect(gkv_client_push(j.c, "emb#adam_t", ids, 2, neg, sizeof neg,
                               NULL), GKV_EINVAL, NULL);
        {
            uint64_t far[1] = {NROWS};
            expect(gkv_client_push(j.c, "emb#adam_m", far, 1, g, WIDTH * 4,
                                   NULL), GKV_ERANGE, NULL);
        }
        expect(gkv_client_opt_reset(j.c, "emb#adam_m", NULL), GKV_EINVAL,
               "name its tensor");
        expect(gkv_client_opt_reset(j.c, "emb", "sgd"), GKV_EINVAL, "sgd");
        expect(gkv_client_opt_reset(j.c, "nope", NULL), GKV_ENOTFOUND,
               "nope");
        pull_all(j.c, "emb", after, WIDTH * 4);
        assert_memory_equal(after, before, sizeof before);
        pull_all(j.c, "emb#adam_m", m2, WIDTH * 4);
        assert_memory_equal(m2, m, sizeof m);
        pull_all(j.c, "emb#adagrad_s", v2, WIDTH * 4);
        assert_memory_equal(v2, v, sizeof v);
        pull_all(j.c, "emb#adam_t", tt, 8);
        assert_int_equal(tt[4], 1);
        assert_int_equal(tt[15], 1);
        /* no companion was made for a refused name: cnt has none */
        pull_all(j.c, "emb64#adam_m", d64, 2 * 8);
        assert_true(all_zero(d64, sizeof d64));
    }

    /* reset adagrad only: adam's state stays */
    NET_OK(gkv_client_opt_reset(j.c, "emb", "adagrad"));
    pull_all(j.c, "emb#adagrad_s", v, WIDTH * 4);
    assert_true(all_zero(v, sizeof v));
    {
        unsigned char m2[sizeof m];
        pull_all(j.c, "emb#adam_m", m2, WIDTH * 4);
        assert_memory_equal(m2, m, sizeof m);
    }
    /* reset adam (twice: idempotent), then a push is a fresh step 1 */
    NET_OK(gkv_client_opt_reset(j.c, "emb", "adam"));
    NET_OK(gkv_client_opt_reset(j.c, "emb", NULL));
    pull_all(j.c, "emb#adam_m", m, WIDTH * 4);
    assert_true(all_zero(m, sizeof m));
    pull_all(j.c, "emb#adam_t", tt, 8);
    assert_true(all_zero((unsigned char *)tt, sizeof tt));
    pull_all(j.c, "emb", before, WIDTH * 4);
    NET_OK(gkv_client_push(j.c, "emb", ids, 2, g, sizeof g, &adam));
    pull_all(j.c, "emb", e1, WIDTH * 4);
    pull_all(j.c, "emb#adam_t", tt, 8);
    assert_int_equal(tt[4], 1);
    assert_int_equal(tt[15], 1);
    assert_int_equal(tt[5], 0);

    /* the same step on a fresh store holding the same rows */
    sdir = malloc(strlen(f->dir) + 16);
    sprintf(sdir, "%s/fresh", f->dir);
    memset(&sp, 0, sizeof sp);
    sp.dtype = GKV_F32;
    sp.ndim = 1;
    sp.shape[0] = WIDTH;
    sp.hi = NROWS;
    GKVT_OK(gkv_store_open(&s, sdir, GKV_CREATE, NULL));
    GKVT_OK(gkv_tensor_create(s, "emb", &sp));
    GKVT_OK(gkv_tensor_write(s, "emb", 0, NROWS, before, sizeof before));
    GKVT_OK(gkv_tensor_push(s, "emb", ids, 2, g, sizeof g, &adam));
    {
        unsigned char fresh[sizeof e1];
        GKVT_OK(gkv_tensor_read(s, NULL, "emb", 0, NROWS, fresh, sizeof fresh));
        assert_memory_equal(e1, fresh, sizeof fresh);
    }
    /* and by hand: step 1 of adam moves each element by lr * g / (|g| +
     * eps'), about lr in the direction against g */
    memcpy(row, e1 + 4 * WIDTH * 4, WIDTH * 4);
    for (int c = 0; c < WIDTH; c++) {
        float b0;
        memcpy(&b0, before + (4 * WIDTH + c) * 4, 4);
        assert_true(fabsf((b0 - row[c]) - 0.05f * (g[c] > 0 ? 1 : -1)) < 1e-4f);
    }
    gkv_store_close(s);
    free(sdir);
    job_end(&j);
}

/* ---- kvctl: export, import and reset-opt of optimizer state ----------------- */

/* Runs kvctl with up to 10 arguments (NULL-terminated); its exit status.
 * *err (may be NULL) gets its stderr, the caller frees it. */
static int
kvctl(char **err, const char *a0, ...)
{
    char *argv[16];
    va_list ap;
    int n = 0, rc;

    argv[n++] = g_kvctl_path;
    argv[n++] = (char *)a0;
    va_start(ap, a0);
    while (n < 15 && (argv[n] = va_arg(ap, char *)) != NULL)
        n++;
    va_end(ap);
    argv[n] = NULL;
    rc = gkvt_run(argv, NULL, 0, NULL, err, 60);
    return rc;
}

#define KV_OK(...) do { char *e_ = NULL; \
    int rc_ = kvctl(&e_, __VA_ARGS__, (char *)NULL); \
    if (rc_ != 0) \
        fail_msg("kvctl exit %d: %s", rc_, e_); \
    free(e_); \
} while (0)

/* The rows of a .npy file kvctl wrote: they must be 'len' bytes. */
static void
npy_expect(const char *file, const void *want, size_t len)
{
    gkv_npy_map m = {0};
    char msg[256];

    GKVT_OK(gkv_npy_map_open(&m, file, msg, sizeof msg));
    assert_int_equal(m.hdr.data_bytes, len);
    assert_memory_equal(m.data, want, len);
    gkv_npy_map_close(&m);
}

/* Every part of 'emb' (rows and the four companions, missing ones as
 * zeros) of a local store, into k. */
static void
store_ckpt(const char *st, struct ckpt *k)
{
    gkv_store *s;

    GKVT_OK(gkv_store_open(&s, st, GKV_RDONLY, NULL));
    for (int p = 0; p < 5; p++) {
        gkv_err rc;
        k->b[p] = calloc(NROWS, part_rb[p]);
        rc = gkv_tensor_read(s, NULL, parts[p], 0, NROWS, k->b[p],
                             NROWS * part_rb[p]);
        if (rc != GKV_OK && rc != GKV_ENOTFOUND)
            fail_msg("%s: %s", parts[p], gkv_store_errmsg(s));
    }
    gkv_store_close(s);
}

static void
store_emb(const char *st, int steps)
{
    gkv_store *s;
    gkv_tensor_spec sp = gkvt_spec_init(GKV_F32, WIDTH, 0, NROWS,
                                        GKV_INIT_UNIFORM);
    gkv_push_args a = {0};
    uint64_t ids[6];
    float g[6 * WIDTH];

    a.handler = "adam";
    a.lr = 0.05;
    GKVT_OK(gkv_store_open(&s, st, GKV_CREATE, NULL));
    GKVT_OK(gkv_tensor_create(s, "emb", &sp));
    for (int k = 0; k < steps; k++) {
        size_t n = step_batch(k, ids, g);
        GKVT_OK(gkv_tensor_push(s, "emb", ids, n, g, sizeof g, &a));
    }
    gkv_store_close(s);
}

static void
store_steps(const char *st, int from, int to)
{
    gkv_store *s;
    gkv_push_args a = {0};
    uint64_t ids[6];
    float g[6 * WIDTH];

    a.handler = "adam";
    a.lr = 0.05;
    GKVT_OK(gkv_store_open(&s, st, 0, NULL));
    for (int k = from; k < to; k++) {
        size_t n = step_batch(k, ids, g);
        GKVT_OK(gkv_tensor_push(s, "emb", ids, n, g, sizeof g, &a));
    }
    gkv_store_close(s);
}

static void
test_kvctl_local(void **state)
{
    struct fx *f = *state;
    char st1[4200], st2[4200], ref[4200], file[5][4300], raw[4300];
    struct ckpt want, got, before, after;
    char *err = NULL;

    snprintf(st1, sizeof st1, "%s/a", f->dir);
    snprintf(st2, sizeof st2, "%s/b", f->dir);
    snprintf(ref, sizeof ref, "%s/ref", f->dir);
    for (int p = 0; p < 5; p++)
        snprintf(file[p], sizeof file[p], "%s/part%d.npy", f->dir, p);
    store_emb(st1, HALF);
    store_emb(ref, STEPS);

    /* checkpoint: export the rows and the state (adagrad's, never used,
     * as zeros) */
    for (int p = 0; p < 5; p++)
        KV_OK(st1, "export", parts[p], file[p]);
    store_ckpt(st1, &want);
    for (int p = 0; p < 5; p++)
        npy_expect(file[p], want.b[p], NROWS * part_rb[p]);

    /* restore into a fresh store with the tensor created the same way */
    store_emb(st2, 0);
    /* the rows first: replacing a tensor drops its optimizer state */
    KV_OK(st2, "import", "emb", file[0], "--replace");
    for (int p = 1; p < 5; p++)
        KV_OK(st2, "import", parts[p], file[p]);
    store_ckpt(st2, &got);
    for (int p = 0; p < 5; p++)
        assert_memory_equal(got.b[p], want.b[p], NROWS * part_rb[p]);
    ckpt_free(&got);
    /* and on: byte for byte the uninterrupted run */
    store_steps(st2, HALF, STEPS);
    store_ckpt(st2, &got);
    ckpt_free(&want);
    store_ckpt(ref, &want);
    for (int p = 0; p < 5; p++)
        assert_memory_equal(got.b[p], want.b[p], NROWS * part_rb[p]);
    ckpt_free(&want);

    /* bad inputs: exit status and message, the store unchanged */
    store_ckpt(st2, &before);
    assert_int_equal(kvctl(&err, st2, "import", "emb#adam_t", file[1],
                           (char *)NULL), 1);           /* f32 rows, not i64 */
    assert_non_null(strstr(err, "has rows of i64"));
    free(err);
    assert_int_equal(kvctl(&err, st2, "import", "emb#adam_q", file[1],
                           (char *)NULL), 1);
    assert_non_null(strstr(err, "not optimizer state"));
    free(err);
    assert_int_equal(kvctl(&err, st2, "import", "nope#adam_m", file[1],
                           (char *)NULL), 1);
    assert_non_null(strstr(err, "nope"));
    free(err);
    assert_int_equal(kvctl(&err, st2, "import", "emb#adam_m", file[1],
                           "--replace", (char *)NULL), 2);
    free(err);
    assert_int_equal(kvctl(&err, st2, "import", "emb#adam_m", file[1],
                           "--lo", "5", (char *)NULL), 1);   /* past hi */
    assert_non_null(strstr(err, "not inside"));
    free(err);
    {   /* negative step counts: refused by the store, nothing written */
        int64_t neg[NROWS];
        FILE *fp;
        for (int i = 0; i < NROWS; i++)
            neg[i] = i == 7 ? -1 : 3;
        snprintf(raw, sizeof raw, "%s/neg.raw", f->dir);
        fp = fopen(raw, "wb");
        assert_non_null(fp);
        assert_int_equal(fwrite(neg, sizeof neg, 1, fp), 1);
        fclose(fp);
        assert_int_equal(kvctl(&err, st2, "import", "emb#adam_t", raw,
                               "--dtype", "i64", "--dim", "1", (char *)NULL), 1);
        free(err);
    }
    assert_int_equal(kvctl(&err, st2, "reset-opt", "emb", "sgd",
                           (char *)NULL), 2);
    free(err);
    assert_int_equal(kvctl(&err, st2, "reset-opt", "emb#adam_m",
                           (char *)NULL), 2);
    free(err);
    assert_int_equal(kvctl(&err, st2, "reset-opt", "nope", (char *)NULL), 1);
    assert_non_null(strstr(err, "nope"));
    free(err);
    store_ckpt(st2, &after);
    for (int p = 0; p < 5; p++)
        assert_memory_equal(after.b[p], before.b[p], NROWS * part_rb[p]);
    ckpt_free(&after);

    /* reset-opt adam: the state is gone (exports as zeros), rows stay */
    KV_OK(st2, "reset-opt", "emb", "adam");
    KV_OK(st2, "export", "emb#adam_m", file[1]);
    store_ckpt(st2, &after);
    assert_memory_equal(after.b[0], before.b[0], NROWS * part_rb[0]);
    for (int p = 1; p < 4; p++)
        assert_true(all_zero(after.b[p], NROWS * part_rb[p]));
    npy_expect(file[1], after.b[1], NROWS * part_rb[1]);
    ckpt_free(&after);
    ckpt_free(&before);
    ckpt_free(&got);
}

/* kvctl --ip-config and --server: export of companions from the servers
 * (RAM copies of write-back servers included), as the client pulls them */
static void
test_kvctl_servers(void **state)
{
    struct fx *f = *state;
    const char *extra[] = {"--writeback", "emb", "--flush-ms", "86400000",
                           NULL};
    char file[4300], addr[64];
    struct job j;
    struct ckpt k;

    snprintf(file, sizeof file, "%s/x.npy", f->dir);
    job_start(f, &j, extra);
    create_emb(&j, "emb", GKV_F32, WIDTH);
    adam_steps(j.c, 0, HALF);
    ckpt_pull(j.c, &k);
    assert_false(all_zero(k.b[2], NROWS * part_rb[2]));
    for (int p = 0; p < 5; p++) {
        KV_OK("--ip-config", j.cfg, "export", parts[p], file);
        npy_expect(file, k.b[p], NROWS * part_rb[p]);
    }
    /* one server: its rows only */
    snprintf(addr, sizeof addr, "127.0.0.1:%d", j.base + 8);
    KV_OK("--server", addr, "export", "emb#adam_v", file);
    npy_expect(file, k.b[2] + (NROWS / 2) * part_rb[2],
               (NROWS / 2) * part_rb[2]);
    /* info of a companion: the rows where its tensor's are (the machines'
     * lists hold no companions: it said "0 of 2 hold it") */
    {
        char *argv[] = {g_kvctl_path, "--ip-config", j.cfg, "info",
                        "emb#adam_m", NULL}, *out = NULL, *err = NULL, want[64];
        assert_int_equal(gkvt_run(argv, NULL, 0, &out, &err, 60), 0);
        if (strstr(out, "machines:    2 of 2 hold it\n") == NULL)
            fail_msg("kvctl info emb#adam_m says:\n%s", out);
        snprintf(want, sizeof want, "rows:        %d\n", NROWS);
        assert_non_null(strstr(out, want));
        free(out);
        free(err);
    }
    {
        char *err = NULL;
        assert_int_equal(kvctl(&err, "--ip-config", j.cfg, "export",
                               "emb#adam_z", file, (char *)NULL), 1);
        assert_non_null(strstr(err, "not optimizer state"));
        free(err);
    }
    ckpt_free(&k);
    job_end(&j);
}

static void
find_programs(void)
{
    snprintf(g_server_path, sizeof g_server_path, "%s", gkvt_prog("gkv-server"));
    snprintf(g_kvctl_path, sizeof g_kvctl_path, "%s", gkvt_prog("kvctl"));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_resume, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resume_writeback, setup, teardown),
        cmocka_unit_test_setup_teardown(test_zeros_and_reset, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kvctl_local, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kvctl_servers, setup, teardown),
    };

    signal(SIGPIPE, SIG_IGN);
    find_programs();
    return cmocka_run_group_tests_name("net_opt_state", tests, NULL, NULL);
}
