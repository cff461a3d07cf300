/* kv_crash_test.c - crash atomicity: a child process writes to a store in a
 * loop and is killed with SIGKILL at a random moment; the store must then
 * verify and hold exactly the state after the last acknowledged call or the
 * one after it (committed, but killed before it could say so).
 *
 * Every write call i is a deterministic function of (seed, i) and of the
 * state before it, and an in-memory model replays the same sequence, so the
 * expected contents of every tensor are known byte for byte after any
 * number of calls. The calls: assign and add pushes of several hundred
 * random IDs (every pushed element = i) on a default-chunk and a
 * GKV_TENSOR_HOT tensor, adagrad pushes (creating, then updating, the state
 * companion in the same transaction), and create/delete of tensors tmp_i.
 *
 * The same store lives through all kills of a test; in every other round the
 * parent keeps its own handle open while the child runs, so the child both
 * creates the lock table afresh and joins one shared with a live process.
 * Last, writers are killed exactly before and after a commit's commit point
 * (LMDB's system calls intercepted), which random kills seldom hit.
 * GKVT_SOAK=1 (make soak) runs many more kills. */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <lmdb.h>
#include "gkvt.h"
#include "kv/kv_test.h"         /* st_env, st_swept_ms, kv__push_slice */

#define ROWS      20000u   /* feat and hot: IDs [0, ROWS) */
#define W         16u      /* floats per row of feat, hot and tmp_i */
#define EMB_ROWS  5000u
#define EMB_W     8u
#define NTMP      3        /* live tmp_i tensors at most */
#define PUSH_MAX  800u     /* IDs per push at most */
#define LR        0.05
#define EPS       1e-10

/* ---- the model: what the store must hold after k calls -------------------- */

struct model {
    uint64_t seed;
    uint32_t steps;              /* calls applied */
    float *feat, *hot;           /* ROWS x W */
    float *emb, *emb_s;          /* EMB_ROWS x EMB_W: rows, adagrad state */
    int has_s;                   /* emb#adagrad_s exists */
    uint32_t tmp[NTMP];          /* live tmp_i, by i, oldest first */
    int ntmp;
};

enum opkind { OP_ASSIGN, OP_ADD, OP_ADAGRAD, OP_CREATE, OP_DELETE };

struct step {
    uint32_t i;
    enum opkind op;
    const char *tensor;          /* feat, hot or emb for pushes */
    char tmp[32];                /* tmp_i for create and delete */
    size_t n, width;
    uint64_t ids[PUSH_MAX];
    float rows[PUSH_MAX * W];
};

static uint64_t
tmp_rows(uint32_t i)
{
    return 3000 + (i % 4) * 2000;
}

static void
model_init(struct model *m, uint64_t seed)
{
    memset(m, 0, sizeof *m);
    m->seed = seed;
    m->feat = calloc(ROWS * W, sizeof(float));
    m->hot = malloc(ROWS * W * sizeof(float));
    m->emb = malloc(EMB_ROWS * EMB_W * sizeof(float));
    m->emb_s = calloc(EMB_ROWS * EMB_W, sizeof(float));
    for (size_t j = 0; j < ROWS * W; j++)
        m->hot[j] = -1.0f;
    for (size_t j = 0; j < EMB_ROWS * EMB_W; j++)
        m->emb[j] = 0.5f;
}

static void
model_free(struct model *m)
{
    free(m->feat);
    free(m->hot);
    free(m->emb);
    free(m->emb_s);
}

/* Call i, given the state after i - 1 calls. */
static void
step_make(const struct model *m, uint32_t i, struct step *st)
{
    uint64_t r = m->seed ^ ((uint64_t)i * 0xd1342543de82ef95ULL);
    unsigned k = (unsigned)(tools__splitmix64(&r) % 16);
    uint64_t range = ROWS;

    st->i = i;
    st->n = 0;
    st->width = W;
    if (k == 14 || k == 15) {
        int create = k == 14 ? m->ntmp < NTMP : m->ntmp == 0;

        st->op = create ? OP_CREATE : OP_DELETE;
        snprintf(st->tmp, sizeof st->tmp, "tmp_%u", create ? i : m->tmp[0]);
        return;
    }
    if (k < 11) {
        st->op = k < 5 || k == 7 || k == 8 ? OP_ASSIGN : OP_ADD;
        st->tensor = k < 7 ? "feat" : "hot";
    } else {
        st->op = OP_ADAGRAD;
        st->tensor = "emb";
        st->width = EMB_W;
        range = EMB_ROWS;
    }
    st->n = 100 + tools__splitmix64(&r) % (PUSH_MAX - 100 + 1);
    for (size_t p = 0; p < st->n; p++)
        st->ids[p] = tools__splitmix64(&r) % range;
    for (size_t p = 0; p < st->n; p++)
        for (size_t j = 0; j < st->width; j++)
            st->rows[p * st->width + j] = st->op == OP_ADAGRAD
                /* gradients in steps of 1/8: their sums are exact */
                ? (float)((int)((i + st->ids[p] + j) % 9) - 4) * 0.125f
                : (float)i;
}

/* Runs call st on the store. */
static gkv_err
step_store(gkv_store *s, const struct step *st)
{
    gkv_push_args pa = {NULL, LR, EPS, 0, 0, 0};
    gkv_tensor_spec sp;

    switch (st->op) {
    case OP_CREATE:
        memset(&sp, 0, sizeof sp);
        sp.dtype = GKV_F32;
        sp.ndim = 1;
        sp.shape[0] = W;
        sp.lo = 0;
        sp.hi = tmp_rows(st->i);
        sp.init = GKV_INIT_CONST;
        sp.a = st->i;
        return gkv_tensor_create(s, st->tmp, &sp);
    case OP_DELETE:
        return gkv_tensor_delete(s, st->tmp);
    case OP_ASSIGN: pa.handler = "assign"; break;
    case OP_ADD:    pa.handler = "add"; break;
    case OP_ADAGRAD: pa.handler = "adagrad"; break;
    }
    return gkv_tensor_push(s, st->tensor, st->ids, st->n, st->rows,
                           st->n * st->width * sizeof(float), &pa);
}

/* Applies call st to the model, as the store defines it: assign in request
 * order (the last duplicate wins), add in request order in f32, adagrad
 * with duplicate gradients averaged and one step per distinct ID, the state
 * kept in f32 and read back as stored. */
static void
step_model(struct model *m, const struct step *st)
{
    float *t = st->op == OP_ADAGRAD ? m->emb
             : st->tensor != NULL && strcmp(st->tensor, "hot") == 0 ? m->hot
             : m->feat;

    switch (st->op) {
    case OP_CREATE:
        m->tmp[m->ntmp++] = st->i;
        break;
    case OP_DELETE:
        memmove(m->tmp, m->tmp + 1, (size_t)(m->ntmp - 1) * sizeof *m->tmp);
        m->ntmp--;
        break;
    case OP_ASSIGN:
        for (size_t p = 0; p < st->n; p++)
            memcpy(t + st->ids[p] * W, st->rows + p * W, W * sizeof(float));
        break;
    case OP_ADD:
        for (size_t p = 0; p < st->n; p++)
            for (size_t j = 0; j < W; j++)
                t[st->ids[p] * W + j] += st->rows[p * W + j];
        break;
    case OP_ADAGRAD: {
        static double g[EMB_ROWS][EMB_W];
        static size_t seen[EMB_ROWS];

        memset(seen, 0, sizeof seen);
        for (size_t p = 0; p < st->n; p++) {
            uint64_t id = st->ids[p];
            if (!seen[id]++)
                memset(g[id], 0, sizeof g[id]);
            for (size_t j = 0; j < EMB_W; j++)
                g[id][j] += st->rows[p * EMB_W + j];
        }
        for (uint64_t id = 0; id < EMB_ROWS; id++) {
            if (!seen[id])
                continue;
            for (size_t j = 0; j < EMB_W; j++)
                g[id][j] /= (double)seen[id];
            for (size_t j = 0; j < EMB_W; j++) {
                float *w = &m->emb[id * EMB_W + j], *s = &m->emb_s[id * EMB_W + j];
                double ss = (double)*s + g[id][j] * g[id][j];

                *s = (float)ss;
                ss = *s;
                *w = (float)((double)*w - LR * g[id][j] / (sqrt(ss) + EPS));
            }
        }
        m->has_s = 1;
        break;
    }
    }
    m->steps = st->i;
}

static void
model_copy(struct model *dst, const struct model *src)
{
    model_init(dst, src->seed);
    memcpy(dst->feat, src->feat, ROWS * W * sizeof(float));
    memcpy(dst->hot, src->hot, ROWS * W * sizeof(float));
    memcpy(dst->emb, src->emb, EMB_ROWS * EMB_W * sizeof(float));
    memcpy(dst->emb_s, src->emb_s, EMB_ROWS * EMB_W * sizeof(float));
    dst->steps = src->steps;
    dst->has_s = src->has_s;
    dst->ntmp = src->ntmp;
    memcpy(dst->tmp, src->tmp, sizeof dst->tmp);
}

static void
model_advance(struct model *m, uint32_t to)
{
    static struct step st;

    while (m->steps < to) {
        step_make(m, m->steps + 1, &st);
        step_model(m, &st);
    }
}

/* ---- comparing the store with the model ---------------------------------- */

struct expect { char name[32]; const float *rows; size_t len; uint32_t fill; };

static int
expect_cmp(const void *a, const void *b)
{
    return strcmp(((const struct expect *)a)->name, ((const struct expect *)b)->name);
}

/* NULL when store s holds exactly m; else what differs (static buffer). */
static const char *
model_diff(gkv_store *s, const struct model *m)
{
    static char why[1024];
    struct expect ex[4 + NTMP];
    gkv_tensor_desc *v = NULL;
    unsigned char *buf = NULL;
    size_t ne = 0, n = 0, cap = 0;
    gkv_err rc;

    ex[ne++] = (struct expect){"emb", m->emb, EMB_ROWS * EMB_W * 4, 0};
    if (m->has_s)
        ex[ne++] = (struct expect){"emb#adagrad_s", m->emb_s, EMB_ROWS * EMB_W * 4, 0};
    ex[ne++] = (struct expect){"feat", m->feat, ROWS * W * 4, 0};
    ex[ne++] = (struct expect){"hot", m->hot, ROWS * W * 4, 0};
    for (int t = 0; t < m->ntmp; t++) {
        ex[ne] = (struct expect){"", NULL, tmp_rows(m->tmp[t]) * W * 4, m->tmp[t]};
        snprintf(ex[ne].name, sizeof ex[ne].name, "tmp_%u", m->tmp[t]);
        ne++;
    }
    qsort(ex, ne, sizeof *ex, expect_cmp);
    if ((rc = gkv_tensor_list(s, NULL, 1, &v, &n)) != GKV_OK) {
        snprintf(why, sizeof why, "list: %s (%s)", gkv_err_name(rc),
                 gkv_store_errmsg(s));
        return why;
    }
    why[0] = '\0';
    for (size_t t = 0; t < ne || t < n; t++) {
        const char *want = t < ne ? ex[t].name : "(none)";
        const char *got = t < n ? v[t].name : "(none)";

        if (strcmp(want, got) != 0) {
            snprintf(why, sizeof why, "tensor %zu is '%s', expected '%s' (%zu "
                     "tensors, expected %zu)", t, got, want, n, ne);
            break;
        }
        if (v[t].dtype != GKV_F32 || (v[t].hi - v[t].lo) * v[t].row_bytes != ex[t].len) {
            snprintf(why, sizeof why, "tensor '%s': wrong shape", got);
            break;
        }
        if (cap < ex[t].len)
            buf = realloc(buf, cap = ex[t].len);
        if ((rc = gkv_tensor_read(s, NULL, got, v[t].lo, v[t].hi, buf,
                                  ex[t].len)) != GKV_OK) {
            snprintf(why, sizeof why, "read '%s': %s (%s)", got,
                     gkv_err_name(rc), gkv_store_errmsg(s));
            break;
        }
        if (ex[t].rows == NULL) {           /* tmp_i: every element = i */
            const float *f = (const float *)buf;
            for (size_t j = 0; j < ex[t].len / 4; j++)
                if (f[j] != (float)ex[t].fill) {
                    snprintf(why, sizeof why, "tensor '%s': element %zu is %g, "
                             "expected %u", got, j, f[j], ex[t].fill);
                    break;
                }
        } else if (memcmp(buf, ex[t].rows, ex[t].len) != 0) {
            size_t j = 0;
            const float *f = (const float *)buf;
            while (f[j] == ex[t].rows[j] &&
                   memcmp(&f[j], &ex[t].rows[j], 4) == 0)
                j++;
            snprintf(why, sizeof why, "tensor '%s': row %zu element %zu is %g, "
                     "expected %g", got, j / (v[t].row_bytes / 4),
                     j % (v[t].row_bytes / 4), f[j], ex[t].rows[j]);
        }
        if (why[0] != '\0')
            break;
    }
    gkv_free(v);
    free(buf);
    return why[0] != '\0' ? why : NULL;
}

/* ---- the writer child ------------------------------------------------------ */

struct ack { uint32_t step; int32_t rc; };

static const gkv_open_opts small_map = {1u << 20, 0};   /* it grows as it fills */

static void
put_ack(int fd, uint32_t step, gkv_err rc)
{
    struct ack a = {step, rc};
    ssize_t w;

    do
        w = write(fd, &a, sizeof a);
    while (w < 0 && errno == EINTR);
}

/* Runs in the child: open the store itself, then calls m->steps + 1, ...
 * (at most 'max' of them), acknowledging each after it returned. Never
 * returns. */
static void
child_write(const char *dir, unsigned flags, struct model *m, uint32_t max, int fd)
{
    static struct step st;
    gkv_store *s;
    gkv_err rc;

    if ((rc = gkv_store_open(&s, dir, flags, &small_map)) != GKV_OK) {
        fprintf(stderr, "child: open: %s\n", gkv_store_errmsg(NULL));
        put_ack(fd, m->steps, rc);
        _exit(3);
    }
    for (uint32_t k = 0; k < max; k++) {
        step_make(m, m->steps + 1, &st);
        if ((rc = step_store(s, &st)) != GKV_OK) {
            fprintf(stderr, "child: call %u: %s\n", st.i, gkv_store_errmsg(s));
            put_ack(fd, st.i, rc);
            _exit(3);
        }
        step_model(m, &st);
        put_ack(fd, st.i, GKV_OK);
    }
    gkv_store_close(s);
    _exit(0);
}

/* Reads acks from fd until 'until_ms' (or EOF when until_ms < 0). Records
 * the last good step in *acked and a failure in *err_step / *err_rc. */
static void
read_acks(int fd, double until_ms, uint32_t *acked, uint32_t *err_step,
          int32_t *err_rc)
{
    struct ack buf[512];
    size_t have = 0;

    for (;;) {
        struct pollfd pf = {fd, POLLIN, 0};
        int tmo = -1;
        ssize_t r;

        if (until_ms >= 0) {
            double left = until_ms - tools__now_s() * 1e3;
            if (left <= 0)
                return;
            tmo = (int)left + 1;
        }
        if (poll(&pf, 1, tmo) <= 0)
            continue;
        r = read(fd, (char *)buf + have, sizeof buf - have);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return;
        have += (size_t)r;
        for (size_t k = 0; k < have / sizeof *buf; k++) {
            if (buf[k].rc != 0) {
                *err_step = buf[k].step;
                *err_rc = buf[k].rc;
            } else {
                *acked = buf[k].step;
            }
        }
        memmove(buf, (char *)buf + have - have % sizeof *buf, have % sizeof *buf);
        have %= sizeof *buf;
    }
}

/* ---- fixture ---------------------------------------------------------------- */

struct fx {
    char *dir;
    pid_t child;          /* live child, reaped by teardown if a check fails */
    struct model m;
};

static int teardown(void **state);

static int
setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    gkv_tensor_spec sp;
    gkv_store *s;
    int rc = -1;

    *state = f;
    model_init(&f->m, gkvt_seed());
    f->dir = gkvt_mkdtemp("crash");
    if (f->dir == NULL ||
        gkv_store_open(&s, f->dir, GKV_CREATE, &small_map) != GKV_OK) {
        teardown(state);          /* cmocka runs no teardown after a failed setup */
        return -1;
    }
    memset(&sp, 0, sizeof sp);
    sp.dtype = GKV_F32;
    sp.ndim = 1;
    sp.shape[0] = W;
    sp.hi = ROWS;
    if (gkv_tensor_create(s, "feat", &sp) == GKV_OK) {      /* 5 chunks */
        sp.flags = GKV_TENSOR_HOT;                          /* 318 chunks */
        sp.init = GKV_INIT_CONST;
        sp.a = -1;
        if (gkv_tensor_create(s, "hot", &sp) == GKV_OK) {
            sp.flags = 0;
            sp.shape[0] = EMB_W;
            sp.hi = EMB_ROWS;
            sp.chunk_rows = 256;
            sp.a = 0.5;
            if (gkv_tensor_create(s, "emb", &sp) == GKV_OK)
                rc = 0;
        }
    }
    gkv_store_close(s);
    if (rc != 0)
        teardown(state);
    return rc;
}

static int
teardown(void **state)
{
    struct fx *f = *state;

    if (f->child > 0) {
        kill(f->child, SIGKILL);
        while (waitpid(f->child, NULL, 0) < 0 && errno == EINTR)
            ;
    }
    model_free(&f->m);
    gkvt_rmtree(f->dir);
    free(f);
    return 0;
}

/* ---- a killed reader ------------------------------------------------------------ */

struct slots { pid_t pid; int n; };

static int
count_slots(const char *msg, void *ctx)
{
    struct slots *sl = ctx;
    long pid;

    /* one line per slot: "  pid  thread  txnid"; a header line first */
    if (sscanf(msg, " %ld", &pid) == 1 && pid == (long)sl->pid)
        sl->n++;
    return 0;
}

static int
reader_slots(gkv_store *s, pid_t pid)
{
    struct slots sl = {pid, 0};

    assert_true(mdb_reader_list(s->st_env, count_slots, &sl) >= 0);
    return sl.n;
}

/* A child that opens the store read-only and, with 'snap', begins a
 * snapshot, then waits to be killed; returns once it is there. */
static pid_t
reader_child(struct fx *f, int snap)
{
    int pfd[2];
    pid_t pid;
    char c;

    assert_int_equal(pipe(pfd), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        gkv_store *cs;
        gkv_txn *tx;

        if (gkv_store_open(&cs, f->dir, GKV_RDONLY, NULL) != GKV_OK ||
            (snap && gkv_txn_begin(cs, &tx) != GKV_OK))
            _exit(1);
        gkvt_die_with_parent();
        if (write(pfd[1], "r", 1) != 1)
            _exit(1);
        for (;;)
            pause();
    }
    close(pfd[1]);
    assert_int_equal(read(pfd[0], &c, 1), 1);
    close(pfd[0]);
    return pid;
}

/* A reader killed by SIGKILL keeps its LMDB reader slot, and with it the
 * pages of its snapshot: every later write took fresh pages and the file
 * grew without bound (a server beside killed `kvctl export`s). The next
 * write (at most a second later) and every open free such slots. */
static void
test_killed_reader_slot_freed(void **state)
{
    struct fx *f = *state;
    gkv_store *s;
    float row[W] = {1};
    uint64_t id = 3;
    pid_t holder;

    GKVT_OK(gkv_store_open(&s, f->dir, 0, NULL));
    f->child = reader_child(f, 1);
    assert_int_equal(reader_slots(s, f->child), 1);
    gkvt_kill_child(f->child);
    /* dead, its slot still taken */
    assert_int_equal(reader_slots(s, f->child), 1);
    /* a write sweeps (the once-a-second limit set aside) */
    s->st_swept_ms = 0;
    GKVT_OK(gkv_tensor_write(s, "feat", id, id + 1, row, sizeof row));
    assert_int_equal(reader_slots(s, f->child), 0);
    /* an open sweeps too (with another process holding the store, so
     * that LMDB does not start the table afresh) */
    f->child = holder = reader_child(f, 0);
    {
        pid_t dead = reader_child(f, 1);

        gkvt_kill_child(dead);
        gkv_store_close(s);
        GKVT_OK(gkv_store_open(&s, f->dir, GKV_RDONLY, NULL));
        assert_int_equal(reader_slots(s, dead), 0);
    }
    gkvt_kill_child(holder);
    f->child = 0;
    gkv_store_close(s);
}

/* ---- the rounds ---------------------------------------------------------------- */

static int
soak(void)
{
    const char *e = getenv("GKVT_SOAK");
    return e != NULL && *e != '\0' && strcmp(e, "0") != 0;
}

/* Forks a child that writes (at most 'max' calls) and, when kill_ms >= 0,
 * kills it after kill_ms. Returns the last acknowledged call; fails the
 * test if the child reported an error or died otherwise. */
static uint32_t
run_child(struct fx *f, unsigned flags, uint32_t max, double kill_ms, int round)
{
    uint32_t acked = f->m.steps, err_step = 0;
    int32_t err_rc = 0;
    int p[2], status = 0;
    double t0 = tools__now_s() * 1e3;

    assert_int_equal(pipe(p), 0);
    fflush(NULL);
    f->child = fork();
    assert_true(f->child >= 0);
    if (f->child == 0) {
        close(p[0]);
        child_write(f->dir, flags, &f->m, max, p[1]);
    }
    close(p[1]);
    if (kill_ms >= 0) {
        read_acks(p[0], t0 + kill_ms, &acked, &err_step, &err_rc);
        kill(f->child, SIGKILL);
    } else {
        /* a child that must finish: give it 60 s */
        read_acks(p[0], t0 + 60000, &acked, &err_step, &err_rc);
        if (waitpid(f->child, &status, WNOHANG) == 0)
            kill(f->child, SIGKILL);
    }
    while (waitpid(f->child, &status, 0) < 0 && errno == EINTR)
        ;
    f->child = 0;
    read_acks(p[0], -1, &acked, &err_step, &err_rc);      /* what was left */
    close(p[0]);
    if (err_rc != 0)
        fail_msg("round %d: the writer failed at call %u: %s (seed %llu)", round,
                 err_step, gkv_err_name(err_rc), (unsigned long long)f->m.seed);
    if (kill_ms >= 0 && !(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL))
        fail_msg("round %d: the writer ended by itself (status 0x%x) before "
                 "the kill (seed %llu)", round, status,
                 (unsigned long long)f->m.seed);
    if (kill_ms < 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
        fail_msg("round %d: the writer did not finish (status 0x%x; hung?) "
                 "(seed %llu)", round, status, (unsigned long long)f->m.seed);
    return acked;
}

/* Checks that store s verifies and holds the model after 'acked' calls or
 * after acked + 1, and advances the model to the one it holds (it may be
 * at acked + 1 already). Returns that number of calls. */
static uint32_t
expect_store(struct fx *f, gkv_store *s, uint32_t acked, int round,
             const char *view)
{
    gkv_verify_report rep;
    const char *d0, *d1;
    char first[1024];
    gkv_err rc;

    if ((rc = gkv_store_verify(s, NULL, &rep)) != GKV_OK)
        fail_msg("round %d, %s: verify after kill: %s (%s) (seed %llu)", round,
                 view, gkv_err_name(rc), gkv_store_errmsg(s),
                 (unsigned long long)f->m.seed);
    model_advance(&f->m, acked);
    if ((d0 = model_diff(s, &f->m)) == NULL)
        return f->m.steps;
    if (f->m.steps > acked)
        fail_msg("round %d, %s: after a kill with %u calls acknowledged, the "
                 "store no longer holds %u calls (%s) (seed %llu)", round, view,
                 acked, f->m.steps, d0, (unsigned long long)f->m.seed);
    snprintf(first, sizeof first, "%s", d0);
    model_advance(&f->m, acked + 1);
    if ((d1 = model_diff(s, &f->m)) != NULL)
        fail_msg("round %d, %s: after a kill with %u calls acknowledged, the "
                 "store matches neither %u calls (%s) nor %u (%s) (seed %llu)",
                 round, view, acked, acked, first, acked + 1, d1,
                 (unsigned long long)f->m.seed);
    return acked + 1;
}

struct tally { int ahead; };

/* Checks the store after a round: through 'held' (the handle of a process
 * that kept the store open while the writer died) or a fresh open. */
static void
check_store(struct fx *f, gkv_store *held, uint32_t acked, int round,
            struct tally *t)
{
    gkv_store *s;
    uint32_t k;
    gkv_err rc;

    if (held != NULL) {
        k = expect_store(f, held, acked, round, "held handle");
        /* a write must not reveal a commit the reads did not see (LMDB can
         * leave other processes a commit behind: see
         * test_kill_at_the_commit_point) */
        GKVT_OK(gkv_tensor_push(held, "feat", NULL, 0, NULL, 0, NULL));
        if (expect_store(f, held, acked, round, "held handle, after a write") != k)
            fail_msg("round %d: a process holding the store saw the last "
                     "commit only after a write (seed %llu)", round,
                     (unsigned long long)f->m.seed);
    } else {
        if ((rc = gkv_store_open(&s, f->dir, 0, NULL)) != GKV_OK)
            fail_msg("round %d: reopen after kill: %s (%s) (seed %llu)", round,
                     gkv_err_name(rc), gkv_store_errmsg(NULL),
                     (unsigned long long)f->m.seed);
        expect_store(f, s, acked, round, "reopened");
        gkv_store_close(s);
    }
    t->ahead += f->m.steps > acked;
}

static void
crash_rounds(struct fx *f, unsigned flags)
{
    uint64_t rs = f->m.seed ^ (flags * 0x5bd1e995ULL) ^ 0xc4a5;
    int rounds = soak() ? 400 : 24;
    struct tally t = {0};
    uint32_t first_steps;
    double t0 = tools__now_s() * 1e3;

    for (int round = 0; round < rounds; round++) {
        double kill_ms = 2 + (double)(tools__splitmix64(&rs) % 199);
        gkv_store *held = NULL;
        uint32_t acked;

        /* odd rounds: a second process holds the store open throughout */
        if (round % 2 == 1) {
            gkv_err rc = gkv_store_open(&held, f->dir, 0, NULL);
            if (rc != GKV_OK)
                fail_msg("round %d: open: %s (%s)", round, gkv_err_name(rc),
                         gkv_store_errmsg(NULL));
        }
        acked = run_child(f, flags, UINT32_MAX, kill_ms, round);
        check_store(f, held, acked, round, &t);
        gkv_store_close(held);
    }
    /* after all that, a writer still gets the lock and finishes normally */
    first_steps = f->m.steps;
    assert_int_equal(run_child(f, flags, 40, -1, rounds), first_steps + 40);
    check_store(f, NULL, first_steps + 40, rounds, &t);
    assert_int_equal(f->m.steps, first_steps + 40);
    print_message("  %d kills, %u calls; %d committed but unacknowledged; "
                  "%.1f s\n", rounds, f->m.steps, t.ahead,
                  (tools__now_s() * 1e3 - t0) / 1e3);
    /* the kills landed among the writes, not before them */
    assert_true(f->m.steps > (uint32_t)rounds);
}

static void
test_kill_during_writes(void **state)
{
    crash_rounds(*state, 0);
}

static void
test_kill_during_writes_nosync(void **state)
{
    crash_rounds(*state, GKV_NOSYNC);
}

/* Pushes in slices of 3 chunks (kv__push_slice; the children inherit
 * it): many nested transactions, still one commit a call. */
static void
test_kill_during_writes_sliced(void **state)
{
    size_t old = kv__push_slice;

    kv__push_slice = 3;
    crash_rounds(*state, GKV_NOSYNC);
    kv__push_slice = old;
}

/* ---- kills at chosen points of a commit ------------------------------------
 *
 * LMDB (linked as a shared library) calls pwrite() and fdatasync() from the
 * C library; defining them here puts this program's versions first, so a
 * child can die right after a chosen system call of a commit. A commit
 * without GKV_NOSYNC is: data pages written, fdatasync, then the meta page
 * (one of the first two 4 KiB pages, a few hundred bytes) written through a
 * synchronous descriptor: that write is the commit point. Unarmed, these are
 * plain system calls. (Exported by hand: the build hides symbols.) */

static int die_after_fdatasync;   /* > 0: die after this many more */
static int die_after_meta_write;

__attribute__((visibility("default"))) ssize_t
pwrite(int fd, const void *buf, size_t n, off_t off)
{
    ssize_t r = syscall(SYS_pwrite64, fd, buf, n, off);

    if (die_after_meta_write > 0 && off > 0 && off < 2 * 4096 && n < 4096 &&
        --die_after_meta_write == 0)
        raise(SIGKILL);
    return r;
}

__attribute__((visibility("default"))) int
fdatasync(int fd)
{
    int r = (int)syscall(SYS_fdatasync, fd);

    if (die_after_fdatasync > 0 && --die_after_fdatasync == 0)
        raise(SIGKILL);
    return r;
}

/* Runs in the child: adds 1 to row 0 of tensor 'n' 'adds' times and
 * acknowledges each; armed to die inside add number adds (after its data
 * is flushed, or after its meta page is written). Never returns. */
static void
child_count(const char *dir, int adds, int at_meta, int fd)
{
    gkv_push_args add = {"add", 0, 0, 0, 0, 0};
    uint64_t id = 0;
    int64_t one = 1;
    gkv_store *s;
    gkv_err rc;

    if ((rc = gkv_store_open(&s, dir, 0, NULL)) != GKV_OK) {
        put_ack(fd, 0, rc);
        _exit(3);
    }
    if (at_meta)
        die_after_meta_write = adds;
    else
        die_after_fdatasync = adds;
    for (int k = 1; k <= adds; k++) {
        if ((rc = gkv_tensor_push(s, "n", &id, 1, &one, sizeof one, &add)) != GKV_OK) {
            put_ack(fd, (uint32_t)k, rc);
            _exit(3);
        }
        put_ack(fd, (uint32_t)k, GKV_OK);
    }
    _exit(4);                     /* the armed kill did not fire */
}

/* A writer killed just before its commit point leaves the previous commit,
 * one killed just after it leaves its own commit (unacknowledged) - for a
 * process that opens the store afterwards, and for a process that kept the
 * store open all along.
 *
 * The last case once failed: LMDB 0.9 writes the meta page and only then
 * publishes the new transaction id in the shared lock table, so a writer
 * killed in between left every process holding the store open on the
 * previous commit until the next write (a reader saw v, later v + 1 with no
 * push between; whoever replayed "the lost push" applied it twice).
 * kv__txn_begin() now notices the newer meta page and repairs the table. */
static void
test_kill_at_the_commit_point(void **state)
{
    struct fx *f = *state;
    uint64_t rs = f->m.seed ^ 0x57a1e;
    int stale = 0, stale_first = -1;
    int64_t v = 0, v_held = 0, v_open = 0;
    gkv_tensor_spec sp;
    gkv_store *h;

    memset(&sp, 0, sizeof sp);
    sp.dtype = GKV_I64;
    sp.hi = 1;
    GKVT_OK(gkv_store_open(&h, f->dir, 0, NULL));
    GKVT_OK(gkv_tensor_create(h, "n", &sp));
    for (int a = 0; a < (soak() ? 40 : 8); a++) {
        int at_meta = a % 2, adds = 1 + (int)(tools__splitmix64(&rs) % 6), p[2], status;
        uint32_t acked = 0, err_step = 0;
        int32_t err_rc = 0;
        int64_t want = v + adds - !at_meta;
        uint64_t id = 0;

        assert_int_equal(pipe(p), 0);
        fflush(NULL);
        f->child = fork();
        assert_true(f->child >= 0);
        if (f->child == 0) {
            close(p[0]);
            child_count(f->dir, adds, at_meta, p[1]);
        }
        close(p[1]);
        read_acks(p[0], tools__now_s() * 1e3 + 30000, &acked, &err_step,
                  &err_rc);
        if (waitpid(f->child, &status, WNOHANG) == 0)
            kill(f->child, SIGKILL);          /* hung: fail below */
        while (waitpid(f->child, &status, 0) < 0 && errno == EINTR)
            ;
        f->child = 0;
        close(p[0]);
        if (err_rc != 0)
            fail_msg("kill %d: the child's add %u failed: %s", a, err_step,
                     gkv_err_name(err_rc));
        if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL))
            fail_msg("kill %d: the child was not killed at its commit point "
                     "(status 0x%x)", a, status);
        assert_int_equal(acked, adds - 1);
        /* the process that held the store open, then a fresh open */
        GKVT_OK(gkv_tensor_pull(h, NULL, "n", &id, 1, &v_held, sizeof v_held));
        gkv_store_close(h);
        GKVT_OK(gkv_store_open(&h, f->dir, 0, NULL));
        GKVT_OK(gkv_tensor_pull(h, NULL, "n", &id, 1, &v_open, sizeof v_open));
        GKVT_OK(gkv_store_verify(h, NULL, NULL));
        if (v_open != want)
            fail_msg("kill %d %s the commit point of add %d: reopened store "
                     "holds %lld, expected %lld", a, at_meta ? "after" : "before",
                     adds, (long long)v_open, (long long)want);
        if (v_held != want && stale++ == 0)
            stale_first = a;
        v = v_open;
    }
    gkv_store_close(h);
    if (stale > 0)
        fail_msg("%d of %d writers killed right after their commit point: a "
                 "process holding the store open still read the commit before "
                 "(first: kill %d)", stale, soak() ? 20 : 4, stale_first);
}

/* The model agrees with the store when nothing is killed: a failure here
 * is a model bug (or a changed push rule), not a crash bug. And it tells
 * k calls from k + 1, as the crash check needs. */
static void
test_model_matches_store(void **state)
{
    struct fx *f = *state;
    static struct step st;
    gkv_store *s;
    const char *d;

    GKVT_OK(gkv_store_open(&s, f->dir, GKV_NOSYNC, NULL));
    for (uint32_t i = 1; i <= 300; i++) {
        step_make(&f->m, i, &st);
        GKVT_OK(step_store(s, &st));
        step_model(&f->m, &st);
        if (i % 25 == 0) {
            struct model next;

            if ((d = model_diff(s, &f->m)) != NULL)
                fail_msg("after %u calls: %s (seed %llu)", i, d,
                         (unsigned long long)f->m.seed);
            model_copy(&next, &f->m);
            model_advance(&next, i + 1);
            if (model_diff(s, &next) == NULL)
                fail_msg("after %u calls the store also matches %u calls "
                         "(seed %llu)", i, i + 1, (unsigned long long)f->m.seed);
            model_free(&next);
        }
    }
    assert_true(f->m.has_s);
    GKVT_OK(gkv_store_verify(s, NULL, NULL));
    gkv_store_close(s);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_model_matches_store, setup, teardown),
        cmocka_unit_test_setup_teardown(test_killed_reader_slot_freed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kill_during_writes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kill_during_writes_nosync, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kill_during_writes_sliced, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kill_at_the_commit_point, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
