/* gkv-bench - the benchmarks behind doc/BENCHMARKS.md.
 *
 * Every figure is the median of its repetitions and is printed next to a
 * reference measured in the same run, in the same process, interleaved rep
 * by rep with it (the machines are shared and noisy; a ratio travels, an
 * absolute figure does not):
 *
 *   pull    gkv_tensor_pull of B uniform random IDs from an N x D f32 tensor
 *           (D = 32, 128, 512), 1 and 2 threads, against a gather of the
 *           same IDs from a RAM array of the same rows that prefetches as
 *           the pull does (the target), and the plain memcpy loop (naive).
 *   push    gkv_tensor_push of B random IDs into an N x 128 f32 tensor with
 *           "assign" and "adagrad", default (read-mostly) and GKV_TENSOR_HOT
 *           chunking, with GKV_NOSYNC and durable, against Redis pipelined
 *           SET of the same 512 B rows (a redis-server this program starts)
 *           and the memcpy gather.
 *   import  `kvctl STORE import NAME FILE.npy` as a process, against a
 *           sequential read and a copy (+ fsync) of the same file.
 *
 * Row values come from feat_val(row, col) and IDs from xoshiro256** seeded
 * with 42, as in bench/anchors/common.h, so the figures line up with the
 * anchor programs. Every pulled, pushed and imported row is checked; the
 * exit status is 1 when any check fails, 2 on bad usage.
 *
 * stdout: one "RESULT name key=value ..." line per figure, then a table.
 * stderr: progress and diagnostics.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "gkv.h"
#include "opt.h"
#include "util.h"

#define PROG "gkv-bench"

/* ---- options ----------------------------------------------------------- */

static struct {
    int quick;
    int reps;               /* 0 = per-phase default */
    const char *dir;        /* NULL = ./tmp/bench-PID */
    const char *only;       /* NULL, "pull", "push" or "import" */
} opt;

/* sizes, set from opt.quick */
static uint64_t pull_n, push_n, import_n;   /* rows of the tensor / file */
static size_t pull_b, push_b;               /* IDs per pull / push */
static int pull_reps, push_reps, import_reps;

/* ---- process state for cleanup -------------------------------------------- */

static char scratch[PATH_MAX];      /* the directory this run created */
static int scratch_made;
static volatile pid_t redis_pid;    /* redis-server we started, or 0 */
static char redis_sock[64];         /* its unix socket */
static volatile pid_t child_pid;    /* kvctl while it runs, or 0 */
static int nfail;                   /* verification failures */

static void
die_gkv(gkv_store *s, const char *what, gkv_err rc)
{
    const char *detail = gkv_store_errmsg(s);

    tools__die("%s: %s%s%s", what, gkv_strerror(rc), *detail ? ": " : "", detail);
}

#define GKV_CK(s, call)                                                      \
    do {                                                                     \
        gkv_err rc_ = (call);                                                \
        if (rc_ != GKV_OK)                                                   \
            die_gkv((s), #call, rc_);                                        \
    } while (0)

static int
rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb; (void)flag; (void)ftw;
    if (remove(path) != 0 && errno != ENOENT)
        tools__note("cannot remove %s: %s", path, strerror(errno));
    return 0;
}

/* Removes 'path' and everything under it (no symlinks followed). */
static void
rm_tree(const char *path)
{
    struct stat sb;

    if (lstat(path, &sb) != 0)
        return;
    nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void
redis_stop(void)
{
    pid_t p = redis_pid;

    if (p > 0) {
        kill(p, SIGTERM);
        waitpid(p, NULL, 0);
        redis_pid = 0;
        unlink(redis_sock);
    }
}

static void
cleanup(void)
{
    redis_stop();
    if (scratch_made) {
        rm_tree(scratch);
        scratch_made = 0;
    }
}

/* SIGINT/SIGTERM/SIGHUP: stop our children and remove the scratch
 * directory with async-signal-safe calls only (rm runs as a process), then
 * die of the same signal. */
static void
on_signal(int sig)
{
    pid_t p;

    if (child_pid > 0) {
        kill(child_pid, SIGTERM);
        waitpid(child_pid, NULL, 0);
    }
    if (redis_pid > 0) {
        kill(redis_pid, SIGTERM);
        waitpid(redis_pid, NULL, 0);
        unlink(redis_sock);
    }
    if (scratch_made && (p = fork()) == 0) {
        execlp("rm", "rm", "-rf", "--", scratch, (char *)NULL);
        _exit(127);
    } else if (scratch_made && p > 0) {
        waitpid(p, NULL, 0);
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

/* ---- time, random IDs, row values (as in bench/anchors/common.h) ------- */

typedef struct { uint64_t s[4]; } rng_t;

static inline uint64_t rotl64(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static void
rng_seed(rng_t *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        r->s[i] = tools__splitmix64(&seed);
}

static inline uint64_t
rng_next(rng_t *r)
{
    uint64_t *s = r->s, res = rotl64(s[1] * 5, 7) * 9, t = s[1] << 17;

    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3]; s[2] ^= t;
    s[3] = rotl64(s[3], 45);
    return res;
}

/* uniform in [0, n), n < 2^32 */
static inline uint32_t
rng_below(rng_t *r, uint32_t n)
{
    return (uint32_t)(((rng_next(r) >> 32) * (uint64_t)n) >> 32);
}

/* The value of element (row, col) of every benchmark tensor. */
static inline float
feat_val(uint64_t row, uint32_t col)
{
    uint64_t x = row * 0x100000001b3ULL + col;
    uint64_t z = tools__splitmix64(&x);

    return (float)(z >> 40) * (1.0f / 16777216.0f) + (float)(row & 1023);
}

/* What "assign" writes to row 'id' (a function of the ID only, so duplicate
 * IDs in one push agree), and the gradient "adagrad" gets for it. */
static inline float
push_val(uint64_t id, uint32_t col)
{
    return feat_val(id + (1ull << 40), col);
}

static inline float
grad_val(uint64_t id, uint32_t col)
{
    return feat_val(id + (1ull << 41), col) - (float)((id + (1ull << 41)) & 1023) - 0.5f;
}

static void
fill_rows(float *dst, uint64_t first, uint64_t n, uint32_t d)
{
    for (uint64_t r = 0; r < n; r++)
        for (uint32_t c = 0; c < d; c++)
            dst[r * d + c] = feat_val(first + r, c);
}

/* b IDs below n, uniform, from the seeded generator: the same for the
 * same seed in every run. */
static uint64_t *
random_ids_seeded(size_t b, uint64_t n, uint64_t seed)
{
    uint64_t *ids = tools__xmalloc(b * sizeof *ids);
    rng_t rng;

    rng_seed(&rng, seed);
    for (size_t i = 0; i < b; i++)
        ids[i] = rng_below(&rng, (uint32_t)n);
    return ids;
}

static uint64_t *
random_ids(size_t b, uint64_t n)
{
    return random_ids_seeded(b, n, 42);
}

/* ---- the summary table ----------------------------------------------------- */

#define MAX_ROWS 96

static struct trow {
    char what[64];
    char value[40];
    char ref[48];
    char ratio[16];
    char target[24];
} table[MAX_ROWS];
static int ntable;

static void
table_add(const char *what, const char *value, const char *ref,
          const char *ratio, const char *target)
{
    struct trow *t;

    if (ntable == MAX_ROWS)
        return;
    t = &table[ntable++];
    snprintf(t->what, sizeof t->what, "%s", what);
    snprintf(t->value, sizeof t->value, "%s", value);
    snprintf(t->ref, sizeof t->ref, "%s", ref);
    snprintf(t->ratio, sizeof t->ratio, "%s", ratio);
    snprintf(t->target, sizeof t->target, "%s", target);
}

static void
table_print(void)
{
    if (ntable == 0)
        return;
    printf("\n%-46s %-20s %-32s %-7s %s\n", "figure (median)", "gkv",
           "reference (same run)", "ratio", "target");
    for (int i = 0; i < ntable; i++)
        printf("%-46s %-20s %-32s %-7s %s\n", table[i].what, table[i].value,
               table[i].ref, table[i].ratio, table[i].target);
}

/* ---- stores ---------------------------------------------------------------- */

static gkv_store *
store_open(const char *path, unsigned flags, uint64_t data_bytes)
{
    gkv_open_opts o = {0};
    gkv_store *s = NULL;
    gkv_err rc;

    /* room for the data, a second copy while pushes rewrite it, and the
     * optimizer state: the map is address space, not disk */
    o.map_size = 4 * data_bytes + (256ull << 20);
    if ((rc = gkv_store_open(&s, path, flags, &o)) != GKV_OK)
        tools__die("cannot open store %s: %s: %s", path, gkv_strerror(rc),
            gkv_store_errmsg(NULL));
    return s;
}

/* Creates f32 tensor 'name' of n rows of d, flags 'tflags', and writes
 * m's rows into it in transactions of about 64 MiB. Returns the seconds
 * the writes took. */
static double
tensor_load(gkv_store *s, const char *name, uint64_t n, uint32_t d,
            unsigned tflags, const float *m)
{
    gkv_tensor_spec sp;
    size_t rb = (size_t)d * sizeof(float);
    uint64_t step = ((uint64_t)64 << 20) / rb;
    double t0;

    memset(&sp, 0, sizeof sp);
    sp.dtype = GKV_F32;
    sp.ndim = 1;
    sp.shape[0] = d;
    sp.lo = 0;
    sp.hi = n;
    sp.flags = tflags;
    sp.init = GKV_INIT_ZEROS;
    GKV_CK(s, gkv_tensor_create(s, name, &sp));
    t0 = tools__now_s();
    for (uint64_t a = 0; a < n; a += step) {
        uint64_t b = n - a < step ? n : a + step;
        GKV_CK(s, gkv_tensor_write(s, name, a, b, m + a * d, (size_t)(b - a) * rb));
    }
    return tools__now_s() - t0;
}

static gkv_tensor_desc
tensor_desc(gkv_store *s, const char *name)
{
    gkv_tensor_desc d;

    GKV_CK(s, gkv_tensor_info(s, NULL, name, &d));
    return d;
}

/* ---- 1. pull --------------------------------------------------------------- */

/* The prefetching RAM gather copies gkv_tensor_pull's loop (kv/pull.c):
 * resolve GATHER_PF_BATCH row addresses and prefetch each row's first cache
 * line, then copy those rows. Keep the two equal, or the reference no longer
 * says how close the pull is to what the memory allows. */
#define GATHER_PF_BATCH 16

struct gather {
    gkv_store *s;           /* NULL: gather from m instead */
    const char *name;
    const float *m;         /* N x d rows in RAM */
    int pf;                 /* RAM gather: prefetch as the pull does */
    uint32_t d;
    const uint64_t *ids;
    size_t n;
    float *dst;
    gkv_err rc;
    char msg[256];          /* the thread's gkv_store_errmsg on failure */
};

static void *
gather_run(void *arg)
{
    struct gather *g = arg;
    size_t rb = (size_t)g->d * sizeof(float);

    if (g->s != NULL) {
        g->rc = gkv_tensor_pull(g->s, NULL, g->name, g->ids, g->n, g->dst,
                                g->n * rb);
        if (g->rc != GKV_OK)
            snprintf(g->msg, sizeof g->msg, "%s", gkv_store_errmsg(g->s));
    } else if (g->pf) {
        const float *src[GATHER_PF_BATCH];

        for (size_t i = 0; i < g->n; i += GATHER_PF_BATCH) {
            size_t m = g->n - i < GATHER_PF_BATCH ? g->n - i : GATHER_PF_BATCH;

            for (size_t j = 0; j < m; j++) {
                src[j] = g->m + g->ids[i + j] * g->d;
                __builtin_prefetch(src[j]);
            }
            for (size_t j = 0; j < m; j++)
                memcpy(g->dst + (i + j) * g->d, src[j], rb);
        }
        g->rc = GKV_OK;
    } else {
        for (size_t i = 0; i < g->n; i++)
            memcpy(g->dst + i * g->d, g->m + g->ids[i] * g->d, rb);
        g->rc = GKV_OK;
    }
    return NULL;
}

/* Gathers ids[0..b) into dst with nt threads (each its own half of the IDs,
 * each its own snapshot); from m when s is NULL, prefetching as the pull
 * does when pf. Returns the wall clock of all of them. */
static double
gather_timed(gkv_store *s, const char *name, const float *m, int pf, uint32_t d,
             const uint64_t *ids, size_t b, float *dst, int nt)
{
    struct gather g[2];
    pthread_t th;
    double t0;

    for (int t = 0; t < nt; t++) {
        size_t lo = b * t / nt, hi = b * (t + 1) / nt;
        g[t] = (struct gather){s, name, m, pf, d, ids + lo, hi - lo,
                               dst + lo * d, GKV_OK, ""};
    }
    t0 = tools__now_s();
    if (nt > 1 && pthread_create(&th, NULL, gather_run, &g[1]) != 0)
        tools__die("pthread_create failed");
    gather_run(&g[0]);
    if (nt > 1)
        pthread_join(th, NULL);
    t0 = tools__now_s() - t0;
    for (int t = 0; t < nt; t++)
        if (g[t].rc != GKV_OK)
            tools__die("gkv_tensor_pull (thread %d): %s%s%s", t, gkv_strerror(g[t].rc),
                *g[t].msg ? ": " : "", g[t].msg);
    return t0;
}

/* Reads a buffer of four times the last-level cache (32 MiB on the
 * benchmark VM), one word per cache line, so that the next gather
 * finds none of its rows in the caches. Without it, a gather that runs right
 * after another of the same IDs from the same memory (gkv 2T after gkv 1T,
 * or the RAM gathers one after another) finds much of its rows in L3 at
 * D = 32 (100,000 rows of 128 B fit), and the order of the configurations
 * decides the ratio. Reads, not a memset: glibc's memset of a large buffer
 * uses non-temporal stores, which evict nothing. */
#define EVICT_BYTES ((size_t)128 << 20)

static volatile uint64_t evict_sink;

static void
cache_evict(void)
{
    static uint64_t *buf;
    uint64_t sum = 0;

    if (buf == NULL) {
        buf = tools__xmalloc(EVICT_BYTES);
        memset(buf, 1, EVICT_BYTES);
    }
    for (size_t i = 0; i < EVICT_BYTES / sizeof *buf; i += 8)
        sum += buf[i];
    evict_sink = sum;
}

/* The RAM rows of the pull's references. By default plain malloc, as the
 * anchors' gather_ram: 4 KiB pages, rows 16 B past a cache-line boundary
 * (glibc's mmap'd chunk header), as gkv's rows sit 32 B past one (LMDB's
 * page header and the chunk header). GKV_BENCH_RAM=align puts the rows on
 * 2 MiB (so cache-line) boundaries; GKV_BENCH_RAM=huge also asks for
 * transparent huge pages (MADV_HUGEPAGE): the limit a gather from
 * anonymous memory can reach, for the record, not the target's reference. */
static float *
ram_rows_alloc(size_t bytes)
{
    const char *how = getenv("GKV_BENCH_RAM");
    size_t huge = (size_t)2 << 20;
    void *p;

    if (how == NULL || !*how)
        return tools__xmalloc(bytes);
    if (strcmp(how, "align") && strcmp(how, "huge"))
        tools__die("GKV_BENCH_RAM: '%s' is not align or huge", how);
    p = aligned_alloc(huge, (bytes + huge - 1) / huge * huge);
    if (p == NULL)
        tools__die("out of memory for %zu bytes of RAM rows", bytes);
    if (!strcmp(how, "huge") && madvise(p, bytes, MADV_HUGEPAGE) != 0)
        tools__die("madvise(MADV_HUGEPAGE): %s", strerror(errno));
    return p;
}

static void
bench_pull(uint32_t d)
{
    /* RAM: the plain (naive) memcpy loop, the reference of the first
     * figures; PF: the RAM gather prefetching as the pull does (issue 27) */
    enum { GKV1, GKV2, RAM1, RAM2, PF1, PF2, NCFG };
    static const char *const cname[NCFG] = {"gkv 1T", "gkv 2T", "RAM 1T", "RAM 2T",
                                            "RAM prefetch 1T", "RAM prefetch 2T"};
    size_t rb = (size_t)d * sizeof(float), b = pull_b;
    uint64_t n = pull_n, bytes = n * rb;
    char path[PATH_MAX + 32], what[64], v[40], ref[48], ratio[16];
    double *t[NCFG], med[NCFG], load_s, pf_s;
    float *m, *out_gkv, *out_ram, *out_pf;
    uint64_t *ids;
    gkv_tensor_desc desc;
    gkv_store *s;
    int bad = 0;

    tools__note("pull D=%u: filling %.2f GB in RAM and in the store", d, bytes / 1e9);
    m = ram_rows_alloc(bytes);
    fill_rows(m, 0, n, d);
    ids = random_ids(b, n);
    out_gkv = tools__xmalloc(b * rb);
    out_ram = tools__xmalloc(b * rb);
    out_pf = tools__xmalloc(b * rb);

    snprintf(path, sizeof path, "%s/pull-%u", scratch, d);
    s = store_open(path, GKV_CREATE | GKV_NOSYNC, bytes);
    load_s = tensor_load(s, "feat", n, d, 0, m);
    GKV_CK(s, gkv_store_sync(s));
    desc = tensor_desc(s, "feat");
    pf_s = tools__now_s();
    GKV_CK(s, gkv_store_prefault(s));
    pf_s = tools__now_s() - pf_s;

    /* the reference's own rows must be right before it judges gkv's */
    gather_timed(NULL, NULL, m, 0, d, ids, b, out_ram, 1);
    for (size_t i = 0; i < b && !bad; i++)
        for (uint32_t c = 0; c < d; c++)
            if (out_ram[i * d + c] != feat_val(ids[i], c)) {
                tools__note("pull D=%u: RAM row %zu (ID %llu) is wrong", d, i,
                     (unsigned long long)ids[i]);
                bad = 1;
                break;
            }

    for (int q = 0; q < NCFG; q++)
        t[q] = tools__xmalloc(pull_reps * sizeof(double));
    tools__note("pull D=%u: %d reps of %zu random IDs (chunks of %u rows)", d,
         pull_reps, b, desc.chunk_rows);
    for (int r = -1; r < pull_reps; r++)        /* r = -1: warm-up */
        for (int q = 0; q < NCFG; q++) {
            int gk = q == GKV1 || q == GKV2, pf = q == PF1 || q == PF2;
            int nt = q == GKV2 || q == RAM2 || q == PF2 ? 2 : 1;
            float *out = gk ? out_gkv : pf ? out_pf : out_ram;
            double sec;

            cache_evict();
            memset(out, 0, b * rb);
            sec = gather_timed(gk ? s : NULL, "feat", m, pf, d, ids, b, out, nt);
            if (r >= 0)
                t[q][r] = sec;
            if (getenv("GKV_BENCH_VERBOSE"))
                fprintf(stderr, "  rep %d %s: %.1f ns/row\n", r, cname[q], sec / b * 1e9);
            /* every pulled (and prefetch-gathered) row against the
             * reference bytes, every rep */
            if ((gk || pf) && memcmp(out, out_ram, b * rb) != 0 && !bad) {
                for (size_t i = 0; i < b; i++)
                    if (memcmp(out + i * d, out_ram + i * d, rb) != 0) {
                        tools__note("pull D=%u %s rep %d: row %zu (ID %llu) differs "
                             "from the RAM copy", d, cname[q], r, i,
                             (unsigned long long)ids[i]);
                        break;
                    }
                bad = 1;
            }
        }
    for (int q = 0; q < NCFG; q++)
        med[q] = tools__median(t[q], pull_reps);
    nfail += bad;

    printf("RESULT pull D=%u N=%llu B=%zu reps=%d chunk_rows=%u "
           "load_rows_s=%.3g load_GBs=%.2f prefault_s=%.2f "
           "t1_rows_s=%.3g t1_GBs=%.2f ram_t1_rows_s=%.3g ram_t1_GBs=%.2f t1_x_ram=%.2f "
           "t2_rows_s=%.3g t2_GBs=%.2f ram_t2_rows_s=%.3g ram_t2_GBs=%.2f t2_x_ram=%.2f "
           "pf_t1_rows_s=%.3g pf_t1_GBs=%.2f t1_x_pf=%.2f "
           "pf_t2_rows_s=%.3g pf_t2_GBs=%.2f t2_x_pf=%.2f "
           "verify=%s\n",
           d, (unsigned long long)n, b, pull_reps, desc.chunk_rows,
           n / load_s, bytes / load_s / 1e9, pf_s,
           b / med[GKV1], b * rb / med[GKV1] / 1e9, b / med[RAM1],
           b * rb / med[RAM1] / 1e9, med[RAM1] / med[GKV1],
           b / med[GKV2], b * rb / med[GKV2] / 1e9, b / med[RAM2],
           b * rb / med[RAM2] / 1e9, med[RAM2] / med[GKV2],
           b / med[PF1], b * rb / med[PF1] / 1e9, med[PF1] / med[GKV1],
           b / med[PF2], b * rb / med[PF2] / 1e9, med[PF2] / med[GKV2],
           bad ? "FAIL" : "ok");
    fflush(stdout);

    /* against the prefetching gather (the target, 1T and 2T), then against
     * the naive loop (the first figures' reference, no target now) */
    for (int k = 0; k < 4; k++) {
        int nt = k % 2 + 1, g = nt == 1 ? GKV1 : GKV2;
        int ra = k < 2 ? (nt == 1 ? PF1 : PF2) : (nt == 1 ? RAM1 : RAM2);
        double x = med[ra] / med[g];

        snprintf(what, sizeof what, "pull D=%u (%zu B rows), %dT", d, rb, nt);
        snprintf(v, sizeof v, "%.2f M/s %.2f GB/s", b / med[g] / 1e6,
                 b * rb / med[g] / 1e9);
        snprintf(ref, sizeof ref, "RAM %s %.2f M/s",
                 k < 2 ? "prefetch gather" : "naive memcpy", b / med[ra] / 1e6);
        snprintf(ratio, sizeof ratio, "%.2fx", x);
        table_add(what, v, ref, ratio, k >= 2 ? "-" : x >= 0.9 ? ">=0.9x: met"
                                                               : ">=0.9x: NOT met");
    }

    gkv_store_close(s);
    rm_tree(path);
    for (int q = 0; q < NCFG; q++)
        free(t[q]);
    free(m);
    free(ids);
    free(out_gkv);
    free(out_ram);
    free(out_pf);
}

/* ---- Redis, the reference for push ------------------------------------------ */

static int
in_path(const char *prog)
{
    const char *p = getenv("PATH");
    char buf[PATH_MAX];

    if (p == NULL)
        p = "/usr/local/bin:/usr/bin:/bin";
    while (*p) {
        size_t len = strcspn(p, ":");

        snprintf(buf, sizeof buf, "%.*s/%s", (int)len, len ? p : ".", prog);
        if (access(buf, X_OK) == 0)
            return 1;
        p += len;
        if (*p == ':')
            p++;
    }
    return 0;
}

/* Whether the server behind c is process 'pid' (and not whatever else
 * already listened on the port). */
static int
redis_is(redisContext *c, pid_t pid)
{
    redisReply *r = redisCommand(c, "INFO server");
    const char *p;
    int yes = 0;

    if (r != NULL && r->type == REDIS_REPLY_STRING &&
        (p = strstr(r->str, "process_id:")) != NULL)
        yes = atol(p + 11) == (long)pid;
    if (r != NULL)
        freeReplyObject(r);
    return yes;
}

/* Starts redis-server on 127.0.0.1 and a unix socket, without persistence,
 * and connects over TCP. The port comes from GKV_BENCH_REDIS_PORT or from
 * our PID; when the server cannot bind it (it exits), the next port is
 * tried. Returns NULL, with a note, when there is no redis-server. */
static redisContext *
redis_start(void)
{
    const char *env = getenv("GKV_BENCH_REDIS_PORT");
    int port0 = env ? atoi(env) : 20000 + (int)(getpid() % 20000);

    if (!in_path("redis-server")) {
        tools__note("redis-server is not installed: the Redis reference is skipped "
             "(tools/deps.sh --bench installs it)");
        return NULL;
    }
    snprintf(redis_sock, sizeof redis_sock, "/tmp/gkv-bench-redis-%d.sock", (int)getpid());
    for (int attempt = 0; attempt < 8; attempt++) {
        char port[16];
        redisContext *c = NULL;
        pid_t pid;

        snprintf(port, sizeof port, "%d", port0 + attempt);
        if ((pid = fork()) < 0)
            tools__die("fork: %s", strerror(errno));
        if (pid == 0) {
            int dn = open("/dev/null", O_WRONLY);

            if (dn >= 0) {
                dup2(dn, 1);
                dup2(dn, 2);
            }
            execlp("redis-server", "redis-server", "--port", port, "--bind",
                   "127.0.0.1", "--unixsocket", redis_sock, "--unixsocketperm",
                   "700", "--save", "", "--appendonly", "no", "--daemonize",
                   "no", "--dir", "/tmp", "--dbfilename",
                   "gkv-bench-unused.rdb", (char *)NULL);
            _exit(127);
        }
        redis_pid = pid;
        for (int i = 0; i < 100; i++) {            /* up to ~10 s */
            int st;

            if (waitpid(pid, &st, WNOHANG) == pid) {  /* it exited: port taken? */
                redis_pid = 0;
                break;
            }
            /* a short timeout: a stranger on the port may never answer */
            c = redisConnectWithTimeout("127.0.0.1", port0 + attempt,
                                        (struct timeval){1, 0});
            if (c != NULL && !c->err &&
                redisSetTimeout(c, (struct timeval){1, 0}) == REDIS_OK &&
                redis_is(c, pid) &&
                redisSetTimeout(c, (struct timeval){120, 0}) == REDIS_OK)
                return c;
            if (c != NULL)
                redisFree(c);
            c = NULL;
            usleep(100000);
        }
        redis_stop();
    }
    tools__note("redis-server did not start: the Redis reference is skipped");
    return NULL;
}

/* Pipelined SET of b rows of rb bytes as feat:<id>, 1,000 commands in
 * flight at a time (as the anchor's load). Returns seconds; *ok = 0 if any
 * reply is not OK. */
static double
redis_set_timed(redisContext *c, const uint64_t *ids, size_t b,
                const float *rows, size_t rb, int *ok)
{
    double t0 = tools__now_s();

    for (size_t lo = 0; lo < b; lo += 1000) {
        size_t k = b - lo < 1000 ? b - lo : 1000;

        for (size_t j = 0; j < k; j++)
            redisAppendCommand(c, "SET feat:%llu %b",
                               (unsigned long long)ids[lo + j],
                               (const char *)rows + (lo + j) * rb, rb);
        for (size_t j = 0; j < k; j++) {
            redisReply *r;

            if (redisGetReply(c, (void **)&r) != REDIS_OK)
                tools__die("redis: %s", c->errstr);
            if (r->type != REDIS_REPLY_STATUS || strcmp(r->str, "OK") != 0)
                *ok = 0;
            freeReplyObject(r);
        }
    }
    return tools__now_s() - t0;
}

/* Reads back a sample of the rows SET stored. */
static int
redis_check(redisContext *c, const uint64_t *ids, size_t b, const float *rows,
            size_t rb)
{
    for (size_t i = 0; i < b; i += b / 97 + 1) {
        redisReply *r = redisCommand(c, "GET feat:%llu", (unsigned long long)ids[i]);
        int good = r != NULL && r->type == REDIS_REPLY_STRING &&
                   (size_t)r->len == rb &&
                   memcmp(r->str, (const char *)rows + i * rb, rb) == 0;

        if (r != NULL)
            freeReplyObject(r);
        if (!good)
            return 0;
    }
    return 1;
}

/* ---- 2. push --------------------------------------------------------------- */

#define PUSH_D 128u
#define ADAGRAD_LR 0.01
#define ADAGRAD_EPS 1e-10

struct push_cfg {
    const char *chunking;   /* "read" (default chunks) or "hot" */
    unsigned tflags;
    const char *sync;       /* "nosync" or "durable" */
    unsigned oflags;
    int store;              /* index into the stores: one per chunking */
    int wb;                 /* write-back mode (gkv_writeback_start) */
};

static const struct push_cfg push_cfgs[] = {
    {"read", 0, "nosync", GKV_NOSYNC, 0, 0},
    {"read", 0, "durable", 0, 0, 0},
    {"read", 0, "write-back", GKV_NOSYNC, 0, 1},
    {"hot", GKV_TENSOR_HOT, "nosync", GKV_NOSYNC, 1, 0},
    {"hot", GKV_TENSOR_HOT, "durable", 0, 1, 0},
    {"hot", GKV_TENSOR_HOT, "write-back", GKV_NOSYNC, 1, 1},
};
#define NPUSH_CFG (sizeof push_cfgs / sizeof *push_cfgs)

/* Distinct chunks the IDs touch. */
static uint64_t
chunks_touched(const uint64_t *ids, size_t b, uint64_t n, uint32_t chunk_rows)
{
    uint64_t nch = (n + chunk_rows - 1) / chunk_rows, k = 0;
    unsigned char *seen = calloc(nch, 1);

    if (seen == NULL)
        tools__die("out of memory");
    for (size_t i = 0; i < b; i++)
        if (!seen[ids[i] / chunk_rows]++)
            k++;
    free(seen);
    return k;
}

/* Checks tensor 'emb' after the last push of the run, which was adagrad
 * (k adagrad steps so far, each after an assign that reset the rows): the
 * pushed rows follow the adagrad rule of gkv_kv.h computed here, and a
 * sample of the other rows still holds the loaded values. */
static int
push_verify(gkv_store *s, const char *label, const uint64_t *ids, size_t b,
            uint64_t n, int k)
{
    const uint32_t d = PUSH_D;
    size_t rb = d * sizeof(float);
    uint32_t *cnt = calloc(n, sizeof *cnt);
    float *got = tools__xmalloc(b * rb), *row = tools__xmalloc(rb);
    uint64_t *other = tools__xmalloc(1000 * sizeof *other);
    size_t nother = 0, nbad = 0;
    gkv_txn *tx;
    int ok = 1;
    rng_t rng;

    if (cnt == NULL)
        tools__die("out of memory");
    for (size_t i = 0; i < b; i++)
        cnt[ids[i]]++;
    /* through an explicit snapshot: the bytes in LMDB, which for a
     * write-back configuration are what its last flush wrote (a pull
     * without one would read the RAM copy and check nothing of it) */
    GKV_CK(s, gkv_txn_begin(s, &tx));
    GKV_CK(s, gkv_tensor_pull(s, tx, "emb", ids, b, got, b * rb));
    for (size_t i = 0; i < b; i++)
        for (uint32_t c = 0; c < d; c++) {
            /* duplicates' gradients are averaged (in double; every copy
             * has the same one here) and one step is taken per distinct
             * ID; state and rows round to f32 */
            double g = (double)grad_val(ids[i], c), ss;
            float st = 0.0f, want;

            for (int j = 0; j < k; j++)
                st = (float)((double)st + g * g);
            ss = st;
            want = (float)((double)push_val(ids[i], c) -
                           ADAGRAD_LR * g / (sqrt(ss) + ADAGRAD_EPS));
            if (!(fabsf(got[i * d + c] - want) <= 1e-6f * fmaxf(1.0f, fabsf(want)))) {
                if (nbad++ < 5)
                    tools__note("push %s: row %zu (ID %llu, %u copies) col %u is %.9g, "
                         "expected %.9g (assign then %d adagrad steps)", label, i,
                         (unsigned long long)ids[i], cnt[ids[i]], c,
                         got[i * d + c], want, k);
                ok = 0;
                break;
            }
        }
    if (nbad > 0)
        tools__note("push %s: %zu of %zu pushed rows are wrong", label, nbad, b);
    /* and every chunk's checksum, the rows' and the optimizer state's */
    {
        gkv_verify_report rep;
        gkv_err rc = gkv_store_verify(s, NULL, &rep);

        if (rc != GKV_OK) {
            tools__note("push %s: gkv_store_verify: %s: %s", label, gkv_strerror(rc),
                 gkv_store_errmsg(s));
            ok = 0;
        }
    }
    rng_seed(&rng, 7);
    while (nother < 1000) {
        uint64_t id = rng_below(&rng, (uint32_t)n);
        if (cnt[id] == 0)
            other[nother++] = id;
    }
    for (size_t i = 0; i < nother && ok; i++) {
        GKV_CK(s, gkv_tensor_pull(s, tx, "emb", &other[i], 1, row, rb));
        for (uint32_t c = 0; c < d; c++)
            if (row[c] != feat_val(other[i], c)) {
                tools__note("push %s: row ID %llu was not pushed but changed", label,
                     (unsigned long long)other[i]);
                ok = 0;
                break;
            }
    }
    gkv_txn_end(tx);
    free(cnt);
    free(got);
    free(row);
    free(other);
    return ok;
}

/* ---- a push during a write-back flush ------------------------------------
 * A flush marks the dirty chunks, then writes them without holding the
 * push lock; a push only waits for the chunks it changes to be saved. The
 * figure: the longest small push (1,000 IDs in the first 1 % of rows, one
 * every millisecond) while a flush writes every chunk of the tensor,
 * against the median of the same pushes with no flush running. */

struct stall_flush {
    gkv_store *s;
    volatile int done;
    double sec;
};

static void *
stall_flusher(void *arg)
{
    struct stall_flush *f = arg;
    double t0 = tools__now_s();

    GKV_CK(f->s, gkv_writeback_flush(f->s));
    f->sec = tools__now_s() - t0;
    __atomic_store_n(&f->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static double
small_push(gkv_store *s, uint64_t *rs, uint64_t n, const float *rows, size_t rb)
{
    uint64_t sid[1000];
    double t0;

    for (int i = 0; i < 1000; i++) {
        *rs = *rs * 6364136223846793005ull + 1442695040888963407ull;
        sid[i] = (*rs >> 11) % (n / 100);
    }
    t0 = tools__now_s();
    GKV_CK(s, gkv_tensor_push(s, "emb", sid, 1000, rows, 1000 * rb, NULL));
    return tools__now_s() - t0;
}

/* The write-back copy of 'name' (a read without a snapshot) against the
 * store's bytes (through one): equal once a flush has run. */
static int
wb_copy_is_stored(gkv_store *s, const char *name, uint64_t n, size_t rb)
{
    float *a = tools__xmalloc(n * rb), *c = tools__xmalloc(n * rb);
    gkv_txn *tx;
    int same;

    GKV_CK(s, gkv_tensor_read(s, NULL, name, 0, n, a, n * rb));
    GKV_CK(s, gkv_txn_begin(s, &tx));
    GKV_CK(s, gkv_tensor_read(s, tx, name, 0, n, c, n * rb));
    gkv_txn_end(tx);
    same = memcmp(a, c, n * rb) == 0;
    if (!same)
        tools__note("push: after a flush the stored %s differs from its "
                    "write-back copy", name);
    free(a);
    free(c);
    return same;
}

static void
bench_flush_stall(const float *m, uint64_t n, uint32_t d, const uint64_t *ids,
                  size_t b, const float *rows)
{
    const size_t rb = d * sizeof(float);
    char path[PATH_MAX + 32], v[40], ref[48], ratio[16];
    double *t_max = tools__xmalloc(push_reps * sizeof(double));
    double *t_alone = tools__xmalloc(push_reps * sizeof(double));
    double *t_fl = tools__xmalloc(push_reps * sizeof(double));
    double alone[20], mx, al, fl;
    uint64_t rs = 12345;
    long nduring = 0;
    int ok = 1;
    gkv_store *s;

    snprintf(path, sizeof path, "%s/push-stall", scratch);
    s = store_open(path, GKV_CREATE | GKV_NOSYNC, n * rb);
    tensor_load(s, "emb", n, d, 0, m);
    GKV_CK(s, gkv_store_prefault(s));
    GKV_CK(s, gkv_writeback_start(s, "emb", 1000000000u));  /* flush: ours */
    tools__note("push: a small push during a flush, %d reps", push_reps);
    for (int r = -1; r < push_reps; r++) {
        struct stall_flush f = {s, 0, 0};
        pthread_t th;

        /* every chunk dirty, then a flush while small pushes come */
        GKV_CK(s, gkv_tensor_push(s, "emb", ids, b, rows, b * rb, NULL));
        if (pthread_create(&th, NULL, stall_flusher, &f) != 0)
            tools__die("push: cannot start a thread");
        mx = 0;
        while (!__atomic_load_n(&f.done, __ATOMIC_ACQUIRE)) {
            double t = small_push(s, &rs, n, rows, rb);
            mx = t > mx ? t : mx;
            nduring++;
            usleep(1000);
        }
        pthread_join(th, NULL);
        GKV_CK(s, gkv_writeback_flush(s));
        for (int i = 0; i < 20; i++) {
            alone[i] = small_push(s, &rs, n, rows, rb);
            usleep(1000);
        }
        if (r >= 0) {
            t_max[r] = mx;
            t_alone[r] = tools__median(alone, 20);
            t_fl[r] = f.sec;
        }
    }
    /* the store after a last flush holds what the pushes made */
    GKV_CK(s, gkv_writeback_flush(s));
    ok = wb_copy_is_stored(s, "emb", n, rb) &&
         gkv_store_verify(s, NULL, NULL) == GKV_OK;
    gkv_store_close(s);
    rm_tree(path);
    mx = tools__median(t_max, push_reps);
    al = tools__median(t_alone, push_reps);
    fl = tools__median(t_fl, push_reps);
    printf("RESULT push_during_flush D=%u N=%llu reps=%d small_push_ids=1000 "
           "pushes_during=%ld flush_s=%.3f longest_during_ms=%.2f alone_ms=%.2f "
           "x_alone=%.1f verify=%s\n", d, (unsigned long long)n, push_reps,
           nduring, fl, mx * 1e3, al * 1e3, mx / al, ok ? "ok" : "FAIL");
    snprintf(v, sizeof v, "%.2f ms", mx * 1e3);
    snprintf(ref, sizeof ref, "same push alone %.2f ms", al * 1e3);
    snprintf(ratio, sizeof ratio, "%.1fx", mx / al);
    table_add("  longest small push during a flush", v, ref, ratio, "-");
    if (!ok) {
        tools__note("push: after the flushes the store differs from the "
                    "write-back copy, or verify failed");
        nfail++;
    }
    free(t_max);
    free(t_alone);
    free(t_fl);
}

/* ---- write-back: batches per flush ---------------------------------------
 * The sustained figure above is one batch (an assign and an adagrad push
 * of the same 100,000 random IDs) and the flush after it. A trainer
 * chooses how often a flush runs (gkv_writeback_start's interval, or
 * gkv_writeback_flush): here K batches, each to IDs of its own (the
 * first: the sustained figure's), then one flush; K = 1 is that figure.
 * A chunk that several batches dirty is written once, so a flush's bytes
 * grow slower than K. Per K: the rate (2 K b rows over the pushes
 * and the flush) against Redis pipelined SET of b rows timed in the same
 * rep, and the loss window: the first push is durable only once the flush
 * commits, so a crash before then loses all K batches (with NOSYNC an OS
 * crash may lose more). */

static const int wb_ks[] = {1, 2, 4, 8, 16};
#define N_WB_K (sizeof wb_ks / sizeof *wb_ks)

static void
bench_wb_window(const char *path, uint64_t n, uint32_t d, const uint64_t *ids0,
                size_t b, const float *rows, const float *grads)
{
    const size_t rb = d * sizeof(float);
    const gkv_push_args assign = {"assign", 0, 0, 0, 0, 0};
    const gkv_push_args adagrad = {"adagrad", ADAGRAD_LR, ADAGRAD_EPS, 0, 0, 0};
    const size_t nk = opt.quick ? 3 : N_WB_K;
    const int kmax = wb_ks[nk - 1];
    uint64_t *ids[16], dirty[N_WB_K], nch, ndirty = 0;
    double *t_win[N_WB_K], *t_fl[N_WB_K], *t_redis, redis_med = 0;
    char what[64], v[40], ref[48], ratio[16];
    unsigned char *seen;
    redisContext *rc;
    int redis_ok = 1, ok = 1, j = 0;
    uint32_t cr;
    gkv_store *s;

    /* batch k's IDs, and the chunks the first K batches dirty */
    s = store_open(path, GKV_NOSYNC, n * rb);
    cr = tensor_desc(s, "emb").chunk_rows;
    gkv_store_close(s);
    nch = (n + cr - 1) / cr;
    seen = calloc(nch, 1);
    if (seen == NULL)
        tools__die("out of memory");
    for (size_t q = 0; q < nk; q++) {
        for (; j < wb_ks[q]; j++) {
            /* batch 0: the IDs of the sustained figure above (and of
             * Redis's SETs, whose rows are theirs) */
            if (j == 0) {
                ids[0] = tools__xmalloc(b * sizeof *ids0);
                memcpy(ids[0], ids0, b * sizeof *ids0);
            } else {
                ids[j] = random_ids_seeded(b, n, 1000 + j);
            }
            for (size_t i = 0; i < b; i++)
                if (!seen[ids[j][i] / cr]++)
                    ndirty++;
        }
        dirty[q] = ndirty;
        t_win[q] = tools__xmalloc(push_reps * sizeof(double));
        t_fl[q] = tools__xmalloc(push_reps * sizeof(double));
    }
    free(seen);
    t_redis = tools__xmalloc(push_reps * sizeof(double));
    rc = redis_start();
    tools__note("push: write-back, 1 to %d batches of %zu IDs per flush (HOT "
                "chunks, NOSYNC), %d reps", kmax, b, push_reps);
    for (int r = -1; r < push_reps; r++) {
        for (size_t q = 0; q < nk; q++) {
            double t0, tp, t1;

            s = store_open(path, GKV_NOSYNC, n * rb);
            GKV_CK(s, gkv_store_prefault(s));
            /* untimed: the copy into RAM; the flushes are ours */
            GKV_CK(s, gkv_writeback_start(s, "emb", 1000000000u));
            t0 = tools__now_s();
            for (int k = 0; k < wb_ks[q]; k++) {
                GKV_CK(s, gkv_tensor_push(s, "emb", ids[k], b, rows, b * rb, &assign));
                GKV_CK(s, gkv_tensor_push(s, "emb", ids[k], b, grads, b * rb, &adagrad));
            }
            tp = tools__now_s();
            GKV_CK(s, gkv_writeback_flush(s));
            t1 = tools__now_s();
            if (r >= 0) {
                t_win[q][r] = t1 - t0;
                t_fl[q][r] = t1 - tp;
            }
            if (getenv("GKV_BENCH_VERBOSE"))
                fprintf(stderr, "  rep %d K=%d: pushes %.3f s, flush %.3f s\n",
                        r, wb_ks[q], tp - t0, t1 - tp);
            /* the last flush wrote what the RAM copy holds, rows and state */
            if (r == push_reps - 1 && q == nk - 1)
                ok = wb_copy_is_stored(s, "emb", n, rb) &&
                     wb_copy_is_stored(s, "emb#adagrad_s", n, rb) &&
                     gkv_store_verify(s, NULL, NULL) == GKV_OK;
            gkv_store_close(s);
        }
        if (rc != NULL) {
            double sec = redis_set_timed(rc, ids[0], b, rows, rb, &redis_ok);
            if (r >= 0)
                t_redis[r] = sec;
        }
    }
    if (rc != NULL) {
        if (!redis_ok || !redis_check(rc, ids[0], b, rows, rb)) {
            tools__note("redis: a SET failed or a stored row differs");
            nfail++;
        }
        redis_med = tools__median(t_redis, push_reps);
        redisFree(rc);
        redis_stop();
    }
    if (!ok) {
        tools__note("push: write-back batches per flush: the store is not what "
                    "the pushes made, or verify failed");
        nfail++;
    }
    for (size_t q = 0; q < nk; q++) {
        double win = tools__median(t_win[q], push_reps);
        double fl = tools__median(t_fl[q], push_reps);
        double rate = 2.0 * wb_ks[q] * b / win;
        /* weights and adagrad state: every dirty chunk, whole */
        double mb = 2.0 * dirty[q] * (16.0 + cr * rb) / 1e6;

        printf("RESULT wb_window K=%d D=%u N=%llu B=%zu reps=%d chunk_rows=%u "
               "dirty_chunks=%llu dirty_MB=%.0f flush_s=%.3f "
               "flush_ms_per_dirty_MB=%.2f window_s=%.3f rows_s=%.3g",
               wb_ks[q], d, (unsigned long long)n, b, push_reps, cr,
               (unsigned long long)dirty[q], mb, fl, fl * 1e3 / mb, win, rate);
        if (rc != NULL)
            printf(" redis_set_rows_s=%.3g x_redis_set=%.2f", b / redis_med,
                   rate * redis_med / b);
        printf(" verify=%s\n", ok ? "ok" : "FAIL");
        snprintf(what, sizeof what, "  %d batch%s per flush (loss window %.2f s)",
                 wb_ks[q], wb_ks[q] > 1 ? "es" : "", win);
        snprintf(v, sizeof v, "%.3f M rows/s", rate / 1e6);
        if (rc != NULL) {
            snprintf(ref, sizeof ref, "Redis SET %.3f M/s", b / redis_med / 1e6);
            snprintf(ratio, sizeof ratio, "%.2fx", rate * redis_med / b);
        }
        table_add(what, v, rc != NULL ? ref : "Redis skipped",
                  rc != NULL ? ratio : "-", "-");
        free(t_win[q]);
        free(t_fl[q]);
    }
    fflush(stdout);
    for (int k = 0; k < kmax; k++)
        free(ids[k]);
    free(t_redis);
}

static void
bench_push(void)
{
    enum { ASSIGN, ADAGRAD };
    const uint32_t d = PUSH_D;
    size_t rb = d * sizeof(float), b = push_b;
    uint64_t n = push_n, bytes = n * rb;
    char path[2][PATH_MAX + 32], what[64], v[40], ref[48], ratio[16];
    double *tp[NPUSH_CFG][2], *t_flush[NPUSH_CFG], *t_redis, *t_gath, *t_scat, med[NPUSH_CFG][2];
    double redis_med = 0, gath_med, scat_med;
    uint32_t chunk_rows[2];
    uint64_t touched[2];
    float *m, *m2, *rows, *grads, *out;
    uint64_t *ids;
    redisContext *rc;
    int redis_ok = 1, ok[NPUSH_CFG];
    const gkv_push_args assign = {"assign", 0, 0, 0, 0, 0};
    const gkv_push_args adagrad = {"adagrad", ADAGRAD_LR, ADAGRAD_EPS, 0, 0, 0};

    tools__note("push: filling %.2f GB in RAM and in two stores (default and HOT "
         "chunks)", bytes / 1e9);
    m = tools__xmalloc(bytes);
    fill_rows(m, 0, n, d);
    ids = random_ids(b, n);
    rows = tools__xmalloc(b * rb);
    grads = tools__xmalloc(b * rb);
    out = tools__xmalloc(b * rb);
    for (size_t i = 0; i < b; i++)
        for (uint32_t c = 0; c < d; c++) {
            rows[i * d + c] = push_val(ids[i], c);
            grads[i * d + c] = grad_val(ids[i], c);
        }
    for (int k = 0; k < 2; k++) {
        gkv_store *s;

        snprintf(path[k], sizeof path[k], "%s/push-%s", scratch, k ? "hot" : "read");
        s = store_open(path[k], GKV_CREATE | GKV_NOSYNC, bytes);
        tensor_load(s, "emb", n, d, k ? GKV_TENSOR_HOT : 0, m);
        GKV_CK(s, gkv_store_sync(s));
        chunk_rows[k] = tensor_desc(s, "emb").chunk_rows;
        touched[k] = chunks_touched(ids, b, n, chunk_rows[k]);
        gkv_store_close(s);
    }
    /* the RAM scatter writes into a copy, so m stays the loaded rows */
    m2 = tools__xmalloc(bytes);
    memcpy(m2, m, bytes);

    rc = redis_start();
    for (size_t q = 0; q < NPUSH_CFG; q++) {
        tp[q][ASSIGN] = tools__xmalloc(push_reps * sizeof(double));
        tp[q][ADAGRAD] = tools__xmalloc(push_reps * sizeof(double));
        t_flush[q] = tools__xmalloc(push_reps * sizeof(double));
        ok[q] = 1;
    }
    t_redis = tools__xmalloc(push_reps * sizeof(double));
    t_gath = tools__xmalloc(push_reps * sizeof(double));
    t_scat = tools__xmalloc(push_reps * sizeof(double));

    tools__note("push: %d reps of %zu random IDs; chunks of %u rows (default) and %u "
         "(HOT) touch %llu and %llu chunks per push", push_reps, b,
         chunk_rows[0], chunk_rows[1], (unsigned long long)touched[0],
         (unsigned long long)touched[1]);
    /* rep by rep: each config (the store reopened with its sync flag and
     * prefaulted, untimed), then Redis, then the RAM gather and scatter */
    for (int r = -1; r < push_reps; r++) {
        for (size_t q = 0; q < NPUSH_CFG; q++) {
            const struct push_cfg *pc = &push_cfgs[q];
            gkv_store *s = store_open(path[pc->store], pc->oflags, bytes);
            double t0, ta, tg;

            GKV_CK(s, gkv_store_prefault(s));
            if (pc->wb)   /* untimed: loads the tensor into RAM */
                GKV_CK(s, gkv_writeback_start(s, "emb", 0));
            t0 = tools__now_s();
            GKV_CK(s, gkv_tensor_push(s, "emb", ids, b, rows, b * rb, &assign));
            ta = tools__now_s() - t0;
            t0 = tools__now_s();
            GKV_CK(s, gkv_tensor_push(s, "emb", ids, b, grads, b * rb, &adagrad));
            tg = tools__now_s() - t0;
            if (pc->wb) {
                /* what the background thread has not written yet, written
                 * now: the cost the pushes deferred (NOSYNC, as the Redis
                 * reference runs without persistence) */
                t0 = tools__now_s();
                GKV_CK(s, gkv_writeback_flush(s));
                if (r >= 0)
                    t_flush[q][r] = tools__now_s() - t0;
            }
            if (r >= 0) {
                tp[q][ASSIGN][r] = ta;
                tp[q][ADAGRAD][r] = tg;
            }
            if (getenv("GKV_BENCH_VERBOSE"))
                fprintf(stderr, "  rep %d %s/%s: assign %.3f s, adagrad %.3f s, "
                        "flush %.3f s\n", r, pc->chunking, pc->sync, ta, tg,
                        pc->wb && r >= 0 ? t_flush[q][r] : 0.0);
            /* each store gets an assign + adagrad pair per config sharing
             * it: check after the store's last pair of the run */
            if (r == push_reps - 1 && (q + 1 == NPUSH_CFG ||
                                       push_cfgs[q + 1].store != pc->store)) {
                int steps = 0;
                for (size_t j = 0; j < NPUSH_CFG; j++)
                    steps += push_cfgs[j].store == pc->store;
                char label[64];
                snprintf(label, sizeof label, "%s chunks", pc->chunking);
                if (!push_verify(s, label, ids, b, n, steps * (push_reps + 1)))
                    for (size_t j = 0; j < NPUSH_CFG; j++)
                        if (push_cfgs[j].store == pc->store)
                            ok[j] = 0;
            }
            gkv_store_close(s);
        }
        if (rc != NULL) {
            double sec = redis_set_timed(rc, ids, b, rows, rb, &redis_ok);
            if (r >= 0)
                t_redis[r] = sec;
        }
        {
            double t0 = tools__now_s(), sec;

            for (size_t i = 0; i < b; i++)
                memcpy(out + i * d, m + ids[i] * d, rb);
            sec = tools__now_s() - t0;
            if (r >= 0)
                t_gath[r] = sec;
            t0 = tools__now_s();
            for (size_t i = 0; i < b; i++)
                memcpy(m2 + ids[i] * d, rows + i * d, rb);
            sec = tools__now_s() - t0;
            if (r >= 0)
                t_scat[r] = sec;
        }
    }
    if (rc != NULL) {
        if (redis_ok && !redis_check(rc, ids, b, rows, rb))
            redis_ok = 0;
        if (!redis_ok) {
            tools__note("redis: a SET failed or a stored row differs");
            nfail++;
        }
        redis_med = tools__median(t_redis, push_reps);
        redisFree(rc);
        redis_stop();
    }
    gath_med = tools__median(t_gath, push_reps);
    scat_med = tools__median(t_scat, push_reps);
    for (size_t i = 0; i < b; i++)
        if (memcmp(out + i * d, m + ids[i] * d, rb) != 0) {
            tools__note("push: the RAM gather reference is wrong at row %zu", i);
            nfail++;
            break;
        }

    if (rc != NULL)
        printf("RESULT redis_set D=%u B=%zu reps=%d batch=1000 transport=tcp "
               "rows_s=%.3g GBs=%.3f verify=%s\n", d, b, push_reps,
               b / redis_med, b * rb / redis_med / 1e9, redis_ok ? "ok" : "FAIL");
    else
        printf("RESULT redis_set skipped=redis-server-missing\n");
    printf("RESULT ram_ref D=%u N=%llu B=%zu reps=%d gather_rows_s=%.3g "
           "gather_GBs=%.2f scatter_rows_s=%.3g scatter_GBs=%.2f\n",
           d, (unsigned long long)n, b, push_reps, b / gath_med,
           b * rb / gath_med / 1e9, b / scat_med, b * rb / scat_med / 1e9);
    for (size_t q = 0; q < NPUSH_CFG; q++) {
        const struct push_cfg *pc = &push_cfgs[q];
        uint32_t cr = chunk_rows[pc->store];
        /* bytes LMDB copies for the tensor: every touched chunk, whole */
        double cow = (double)touched[pc->store] * (16.0 + cr * rb);

        for (int h = 0; h < 2; h++) {
            med[q][h] = tools__median(tp[q][h], push_reps);
            printf("RESULT push chunking=%s sync=%s handler=%s D=%u N=%llu "
                   "B=%zu reps=%d chunk_rows=%u chunks_touched=%llu "
                   "cow_MB=%.0f cow_GBs=%.2f rows_s=%.3g GBs=%.3f",
                   pc->chunking, pc->sync, h ? "adagrad" : "assign", d,
                   (unsigned long long)n, b, push_reps, cr,
                   (unsigned long long)touched[pc->store],
                   cow * (h ? 2 : 1) / 1e6, cow * (h ? 2 : 1) / med[q][h] / 1e9,
                   b / med[q][h], b * rb / med[q][h] / 1e9);
            if (rc != NULL)
                printf(" redis_set_rows_s=%.3g x_redis_set=%.2f",
                       b / redis_med, redis_med / med[q][h]);
            printf(" ram_gather_rows_s=%.3g x_ram_gather=%.4f verify=%s",
                   b / gath_med, gath_med / med[q][h], ok[q] ? "ok" : "FAIL");
            if (pc->wb) {
                /* sustained: both pushes of the rep and the flush after,
                 * which writes every touched chunk of the weights and of
                 * the adagrad state (cow: one tensor's) */
                double fl = tools__median(t_flush[q], push_reps);
                double sus = 2.0 * b / (med[q][ASSIGN] + med[q][ADAGRAD] + fl);
                printf(" flush_s=%.3f dirty_MB=%.0f flush_ms_per_dirty_MB=%.2f "
                       "sustained_rows_s=%.3g", fl, 2 * cow / 1e6,
                       fl * 1e3 / (2 * cow / 1e6), sus);
                if (rc != NULL)
                    printf(" sustained_x_redis_set=%.2f", sus * redis_med / b);
            }
            printf("\n");

            snprintf(what, sizeof what, "push %s, %s chunks (%u rows), %s",
                     h ? "adagrad" : "assign", pc->chunking, cr, pc->sync);
            snprintf(v, sizeof v, "%.3f M rows/s", b / med[q][h] / 1e6);
            if (rc != NULL) {
                double x = redis_med / med[q][h];
                /* the second wave's target for the direct HOT push */
                int hot_direct = pc->tflags == GKV_TENSOR_HOT && !pc->wb &&
                                 (pc->oflags & GKV_NOSYNC);
                snprintf(ref, sizeof ref, "Redis SET %.3f M/s", b / redis_med / 1e6);
                snprintf(ratio, sizeof ratio, "%.2fx", x);
                table_add(what, v, ref, ratio, h != ASSIGN ? "-"
                          : x >= 4 ? ">=4x: met"
                          : hot_direct ? (x >= 1 ? ">=4x: NOT; >=1x: met"
                                                 : ">=4x, >=1x: NOT met")
                          : ">=4x: NOT met");
            } else {
                table_add(what, v, "Redis skipped", "-", h == ASSIGN ? ">=4x: n/a" : "-");
            }
        }
        if (pc->wb) {
            double fl = tools__median(t_flush[q], push_reps);
            double sus = 2.0 * b / (med[q][ASSIGN] + med[q][ADAGRAD] + fl);

            snprintf(what, sizeof what, "  sustained: 2 pushes+flush (%.2f s, "
                     "%.2f ms/dirty MB)", fl, fl * 1e3 / (2 * cow / 1e6));
            snprintf(v, sizeof v, "%.3f M rows/s", sus / 1e6);
            if (rc != NULL) {
                snprintf(ref, sizeof ref, "Redis SET %.3f M/s", b / redis_med / 1e6);
                snprintf(ratio, sizeof ratio, "%.2fx", sus * redis_med / b);
            }
            table_add(what, v, rc != NULL ? ref : "Redis skipped",
                      rc != NULL ? ratio : "-", rc == NULL ? ">=1x: n/a"
                      : sus * redis_med / b >= 1 ? ">=1x: met" : ">=1x: NOT met");
        }
        nfail += !ok[q];
    }
    snprintf(v, sizeof v, "-");
    snprintf(ref, sizeof ref, "gather %.2f, scatter %.2f M/s", b / gath_med / 1e6,
             b / scat_med / 1e6);
    table_add("push reference: RAM memcpy, 1T", v, ref, "-", "-");
    printf("NOTE push: LMDB never writes in place: a push copies every chunk it "
           "touches (and its B-tree path) to new pages, checksums it, and "
           "commits; durable commits also fsync those pages. %zu random IDs "
           "touch %llu of %llu default chunks (%u rows, %.0f KiB: %.0f MB "
           "copied per push) but only %.0f MB of %u-row HOT chunks, so chunk "
           "size trades pull speed (one lookup per chunk) against push speed "
           "(bytes copied per pushed row); adagrad also rewrites its state "
           "tensor, twice the bytes. Write-back mode (gkv_writeback_start) "
           "applies pushes to a RAM copy and writes dirty chunks in one "
           "transaction per interval from a background thread: the push rate "
           "is the memory rate, and the sustained figure adds the flush that "
           "follows (loss window: the pushes since the last flush).\n",
           b, (unsigned long long)touched[0],
           (unsigned long long)((n + chunk_rows[0] - 1) / chunk_rows[0]),
           chunk_rows[0], chunk_rows[0] * rb / 1024.0,
           touched[0] * (16.0 + chunk_rows[0] * rb) / 1e6,
           touched[1] * (16.0 + chunk_rows[1] * rb) / 1e6, chunk_rows[1]);
    fflush(stdout);

    bench_flush_stall(m, n, d, ids, b, rows);
    bench_wb_window(path[1], n, d, ids, b, rows, grads);

    for (size_t q = 0; q < NPUSH_CFG; q++) {
        free(tp[q][ASSIGN]);
        free(tp[q][ADAGRAD]);
        free(t_flush[q]);
    }
    rm_tree(path[0]);
    rm_tree(path[1]);
    free(t_redis);
    free(t_gath);
    free(t_scat);
    free(m);
    free(m2);
    free(ids);
    free(rows);
    free(grads);
    free(out);
}

/* ---- 3. .npy import ---------------------------------------------------------- */

/* Writes an n x d little-endian f32 .npy (format 1.0) of feat_val rows. */
static void
npy_write(const char *path, uint64_t n, uint32_t d)
{
    char hdr[128];
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 0, 0};
    int len = snprintf(hdr, sizeof hdr, "{'descr': '<f4', 'fortran_order': "
                       "False, 'shape': (%llu, %u), }", (unsigned long long)n, d);
    uint64_t step = ((uint64_t)64 << 20) / (d * sizeof(float));
    float *buf = tools__xmalloc(step * d * sizeof(float));
    FILE *f = fopen(path, "wb");

    if (f == NULL)
        tools__die("cannot create %s: %s", path, strerror(errno));
    while ((10 + len + 1) % 64 != 0)
        hdr[len++] = ' ';
    hdr[len++] = '\n';
    pre[8] = (unsigned char)(len & 0xff);
    pre[9] = (unsigned char)(len >> 8);
    if (fwrite(pre, 1, 10, f) != 10 || fwrite(hdr, 1, (size_t)len, f) != (size_t)len)
        tools__die("writing %s: %s", path, strerror(errno));
    for (uint64_t a = 0; a < n; a += step) {
        uint64_t k = n - a < step ? n - a : step;

        fill_rows(buf, a, k, d);
        if (fwrite(buf, d * sizeof(float), k, f) != k)
            tools__die("writing %s: %s", path, strerror(errno));
    }
    if (fclose(f) != 0)
        tools__die("writing %s: %s", path, strerror(errno));
    free(buf);
}

/* Reads 'path' sequentially; with 'copy_to', writes it there and fsyncs. */
static double
file_pass(const char *path, const char *copy_to)
{
    size_t bs = (size_t)4 << 20;
    char *buf = tools__xmalloc(bs);
    int in = open(path, O_RDONLY), out = -1;
    double t0 = tools__now_s();
    ssize_t k;

    if (in < 0)
        tools__die("cannot open %s: %s", path, strerror(errno));
    if (copy_to && (out = open(copy_to, O_WRONLY | O_CREAT | O_TRUNC, 0644)) < 0)
        tools__die("cannot create %s: %s", copy_to, strerror(errno));
    while ((k = read(in, buf, bs)) > 0)
        if (out >= 0 && write(out, buf, (size_t)k) != k)
            tools__die("writing %s: %s", copy_to, strerror(errno));
    if (k < 0)
        tools__die("reading %s: %s", path, strerror(errno));
    if (out >= 0 && (fsync(out) != 0 || close(out) != 0))
        tools__die("writing %s: %s", copy_to, strerror(errno));
    t0 = tools__now_s() - t0;
    close(in);
    free(buf);
    return t0;
}

/* The kvctl beside this program (build/kvctl next to build/gkv-bench). */
static int
kvctl_path(char *buf, size_t len)
{
    char self[PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
    char *slash;

    if (k <= 0)
        return 0;
    self[k] = '\0';
    if ((slash = strrchr(self, '/')) == NULL)
        return 0;
    *slash = '\0';
    if ((size_t)snprintf(buf, len, "%.*s/kvctl", PATH_MAX - 16, self) >= len)
        return 0;
    return access(buf, X_OK) == 0;
}

/* How to call kvctl: the argument order, and whether the store must exist
 * first. Found by the untimed warm-up import. */
struct kvctl_form {
    int cmd_first;      /* 0: kvctl STORE import NAME FILE; 1: kvctl import STORE NAME FILE */
    int precreate;      /* create an empty store before importing */
};

/* Runs kvctl's import of 'file' as tensor 'name' into 'store' (removed
 * first). Returns its wall clock, or -1 when it fails; its stderr passes
 * through unless 'quiet'. */
static double
kvctl_import(const char *kvctl, struct kvctl_form f, const char *store,
             const char *name, const char *file, int quiet)
{
    double t0;
    int st;
    pid_t pid;

    rm_tree(store);
    if (f.precreate) {
        gkv_store *s = NULL;
        if (gkv_store_open(&s, store, GKV_CREATE, NULL) != GKV_OK)
            tools__die("cannot create store %s: %s", store, gkv_store_errmsg(NULL));
        gkv_store_close(s);
    }
    t0 = tools__now_s();
    if ((pid = fork()) < 0)
        tools__die("fork: %s", strerror(errno));
    if (pid == 0) {
        int dn = open("/dev/null", O_WRONLY);

        if (dn >= 0) {
            dup2(dn, 1);
            if (quiet)
                dup2(dn, 2);
        }
        if (f.cmd_first)
            execl(kvctl, kvctl, "import", store, name, file, (char *)NULL);
        else
            execl(kvctl, kvctl, store, "import", name, file, (char *)NULL);
        _exit(127);
    }
    child_pid = pid;
    if (waitpid(pid, &st, 0) != pid)
        tools__die("waitpid: %s", strerror(errno));
    child_pid = 0;
    t0 = tools__now_s() - t0;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        if (!quiet)
            tools__note("`kvctl %s %s %s %s` failed (%s %d)",
                 f.cmd_first ? "import" : store, f.cmd_first ? store : "import",
                 name, file, WIFEXITED(st) ? "exit" : "signal",
                 WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
        return -1;
    }
    return t0;
}

/* Checks every row of the imported tensor against feat_val. */
static int
import_verify(const char *store, uint64_t n, uint32_t d)
{
    gkv_store *s = NULL;
    gkv_tensor_desc desc;
    uint64_t step = 65536;
    float *buf = tools__xmalloc(step * d * sizeof(float));
    gkv_err rc;
    int ok = 1;

    if ((rc = gkv_store_open(&s, store, GKV_RDONLY, NULL)) != GKV_OK) {
        tools__note("import: cannot open %s: %s: %s", store, gkv_strerror(rc),
             gkv_store_errmsg(NULL));
        free(buf);
        return 0;
    }
    if ((rc = gkv_tensor_info(s, NULL, "feat", &desc)) != GKV_OK) {
        tools__note("import: tensor 'feat': %s: %s", gkv_strerror(rc), gkv_store_errmsg(s));
        ok = 0;
    } else if (desc.dtype != GKV_F32 || desc.ndim != 1 || desc.shape[0] != d ||
               desc.lo != 0 || desc.hi != n) {
        tools__note("import: tensor 'feat' is %s, %u dims, [%llu, %llu); expected "
             "f32 (%u) rows [0, %llu)", gkv_dtype_name(desc.dtype), desc.ndim,
             (unsigned long long)desc.lo, (unsigned long long)desc.hi, d,
             (unsigned long long)n);
        ok = 0;
    }
    for (uint64_t a = 0; a < n && ok; a += step) {
        uint64_t b = n - a < step ? n : a + step;

        if ((rc = gkv_tensor_read(s, NULL, "feat", a, b, buf,
                                  (size_t)(b - a) * d * sizeof(float))) != GKV_OK) {
            tools__note("import: reading rows [%llu, %llu): %s: %s",
                 (unsigned long long)a, (unsigned long long)b, gkv_strerror(rc),
                 gkv_store_errmsg(s));
            ok = 0;
            break;
        }
        for (uint64_t r = 0; r < b - a && ok; r++)
            for (uint32_t c = 0; c < d; c++)
                if (buf[r * d + c] != feat_val(a + r, c)) {
                    tools__note("import: row %llu col %u is %g, expected %g",
                         (unsigned long long)(a + r), c, buf[r * d + c],
                         feat_val(a + r, c));
                    ok = 0;
                    break;
                }
    }
    gkv_store_close(s);
    free(buf);
    return ok;
}

static void
bench_import(void)
{
    const uint32_t d = 128;
    uint64_t n = import_n;
    char file[PATH_MAX + 32], copy[PATH_MAX + 32], store[PATH_MAX + 32];
    char kvctl[PATH_MAX], v[40], ref[48], ratio[16];
    double *t_imp, *t_read, *t_copy, mb, write_s, mi, mr, mc;
    struct kvctl_form form = {0, 0};
    struct stat sb;
    int ok = 1;

    if (!kvctl_path(kvctl, sizeof kvctl)) {
        tools__note("kvctl is not built next to " PROG ": the import figure is skipped");
        printf("RESULT import skipped=kvctl-missing\n");
        table_add("import .npy via kvctl", "skipped", "-", "-", "-");
        return;
    }
    snprintf(file, sizeof file, "%s/feat.npy", scratch);
    snprintf(copy, sizeof copy, "%s/feat-copy.npy", scratch);
    snprintf(store, sizeof store, "%s/import", scratch);
    tools__note("import: writing %.2f GB .npy (%llu x %u f32)",
         n * d * 4.0 / 1e9, (unsigned long long)n, d);
    write_s = tools__now_s();
    npy_write(file, n, d);
    write_s = tools__now_s() - write_s;
    if (stat(file, &sb) != 0)
        tools__die("stat %s: %s", file, strerror(errno));
    mb = sb.st_size / 1e6;

    t_imp = tools__xmalloc(import_reps * sizeof(double));
    t_read = tools__xmalloc(import_reps * sizeof(double));
    t_copy = tools__xmalloc(import_reps * sizeof(double));
    tools__note("import: %d reps of read, copy+fsync and `kvctl STORE import feat FILE`",
         import_reps);
    /* untimed warm-up: finds how this kvctl is called (the order the issue
     * gives, `kvctl STORE import NAME FILE`, first) */
    {
        static const struct kvctl_form tries[] = {{0, 0}, {1, 0}, {0, 1}, {1, 1}};
        size_t k;

        for (k = 0; k < sizeof tries / sizeof *tries; k++)
            if (kvctl_import(kvctl, tries[k], store, "feat", file, 1) >= 0)
                break;
        if (k == sizeof tries / sizeof *tries) {
            kvctl_import(kvctl, tries[0], store, "feat", file, 0);  /* shows why */
            ok = 0;
        } else {
            form = tries[k];
            tools__note("import: calling `kvctl %s`%s", form.cmd_first
                 ? "import STORE NAME FILE" : "STORE import NAME FILE",
                 form.precreate ? " on an empty store made first" : "");
        }
    }
    for (int r = 0; r < import_reps && ok; r++) {
        t_read[r] = file_pass(file, NULL);
        t_copy[r] = file_pass(file, copy);
        unlink(copy);
        if ((t_imp[r] = kvctl_import(kvctl, form, store, "feat", file, 0)) < 0)
            ok = 0;
        else if (r == import_reps - 1)
            ok = import_verify(store, n, d);
    }
    rm_tree(store);
    unlink(file);
    if (!ok) {
        nfail++;
        printf("RESULT import N=%llu D=%u file_MB=%.0f verify=FAIL\n",
               (unsigned long long)n, d, mb);
        table_add("import .npy via kvctl", "FAILED", "-", "-", "-");
    } else {
        mi = tools__median(t_imp, import_reps);
        mr = tools__median(t_read, import_reps);
        mc = tools__median(t_copy, import_reps);
        printf("RESULT import N=%llu D=%u file_MB=%.0f reps=%d import_MBs=%.0f "
               "import_rows_s=%.3g read_MBs=%.0f copy_fsync_MBs=%.0f "
               "x_read=%.3f x_copy=%.2f npy_write_MBs=%.0f verify=ok\n",
               (unsigned long long)n, d, mb, import_reps, mb / mi, n / mi,
               mb / mr, mb / mc, mr / mi, mc / mi, mb / write_s);
        snprintf(v, sizeof v, "%.0f MB/s", mb / mi);
        snprintf(ref, sizeof ref, "copy+fsync %.0f MB/s", mb / mc);
        snprintf(ratio, sizeof ratio, "%.2fx", mc / mi);
        table_add("import .npy via kvctl (process)", v, ref, ratio, "-");
        snprintf(ref, sizeof ref, "cached read %.0f MB/s", mb / mr);
        snprintf(ratio, sizeof ratio, "%.3fx", mr / mi);
        table_add("  (same import)", "", ref, ratio, "-");
    }
    fflush(stdout);
    free(t_imp);
    free(t_read);
    free(t_copy);
}

/* ---- main ------------------------------------------------------------------ */

static void
usage(FILE *f)
{
    fprintf(f,
"usage: " PROG " [--quick] [--dir DIR] [--reps N] [--only pull|push|import]\n"
"\n"
"Measures gkv against references run in the same process, rep by rep:\n"
"  pull    gkv_tensor_pull of 100,000 random IDs from 2,000,000 x {32,128,512}\n"
"          f32, 1 and 2 threads, vs a RAM gather prefetching as the pull does\n"
"          (target >= 0.9x, 1T and 2T) and the naive memcpy gather from RAM\n"
"  push    gkv_tensor_push (assign, adagrad) of 100,000 random 512 B rows,\n"
"          default and HOT chunks, NOSYNC, durable and write-back, vs Redis SET\n"
"          (target >= 4x, assign) and the memcpy gather; write-back with 1 to\n"
"          16 batches per flush (the rate with the flush, the loss window)\n"
"  import  `kvctl STORE import NAME FILE.npy` of 2,000,000 x 128 f32, vs a\n"
"          sequential read and a copy+fsync of the file\n"
"\n"
"  --quick        small sizes (a smoke run, under a minute)\n"
"  --dir DIR      scratch directory (default ./tmp/bench-PID); created and\n"
"                 removed at the end; if DIR exists, DIR/" PROG "-PID is used\n"
"  --reps N       repetitions per figure (default 11 pull, 5 push, 3 import)\n"
"  --only WHAT    run one part: pull, push or import\n"
"  -V, --version  print the version\n"
"  -h, --help     this text\n"
"\n"
"stdout: RESULT lines (key=value) and a table; stderr: progress.\n"
"Exit status: 0 ok, 1 a check failed or an error, 2 bad usage.\n"
"Env: GKV_BENCH_REDIS_PORT (first TCP port to try for redis-server),\n"
"GKV_BENCH_VERBOSE=1 (per-rep times). Needs about 9 GB of disk and 12 GB of RAM.\n");
}

static int
set_only(void *ctx, const char *val)
{
    if (strcmp(val, "pull") && strcmp(val, "push") && strcmp(val, "import"))
        return tools__usage_error(PROG, "--only: '%s' is not pull, push or "
                                  "import", val);
    opt.only = val;
    return 0;
}

static void
machine_line(void)
{
    struct utsname u;
    char model[128] = "?", line[256];
    FILE *f = fopen("/proc/cpuinfo", "r");
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGE_SIZE);

    if (f != NULL) {
        while (fgets(line, sizeof line, f))
            if (strncmp(line, "model name", 10) == 0) {
                char *p = strchr(line, ':');
                if (p != NULL) {
                    p += 1 + strspn(p + 1, " \t");
                    p[strcspn(p, "\n")] = '\0';
                    snprintf(model, sizeof model, "%s", p);
                }
                break;
            }
        fclose(f);
    }
    uname(&u);
    for (char *p = model; *p; p++)
        if (*p == ' ')
            *p = '_';
    printf("RESULT machine nproc=%ld cpu=%s mem_GiB=%.1f kernel=%s gkv=%s quick=%d\n",
           sysconf(_SC_NPROCESSORS_ONLN), model,
           (double)pages * psz / (1024.0 * 1024 * 1024), u.release,
           GKV_VERSION_STRING, opt.quick);
}

int
main(int argc, char **argv)
{
    struct sigaction sa;
    double t0 = tools__now_s();
    const struct tools_opt opts[] = {
        {"--quick", OPT_FLAG, .dst = &opt.quick},
        {"--dir", OPT_STR, .dst = &opt.dir},
        {"--reps", OPT_INT, .dst = &opt.reps, .lo = 1, .hi = 1000},
        {"--only", OPT_FN, .fn = set_only},
        {NULL},
    };
    const struct tools_opt_parser parser = {
        .prog = PROG, .opts = opts, .usage = usage,
        .version = PROG " " GKV_VERSION_STRING,
    };
    int rc;

    tools__prog = PROG;
    if ((rc = tools__opt_parse(&parser, argc, argv)) != 0)
        return rc;
    pull_n = push_n = import_n = opt.quick ? 200000 : 2000000;
    pull_b = push_b = opt.quick ? 20000 : 100000;
    pull_reps = opt.reps ? opt.reps : opt.quick ? 5 : 11;
    push_reps = opt.reps ? opt.reps : opt.quick ? 3 : 5;
    import_reps = opt.reps ? opt.reps : opt.quick ? 2 : 3;

    /* the scratch directory: ours alone, so removing it is safe */
    if (opt.dir == NULL) {
        mkdir("tmp", 0755);
        snprintf(scratch, sizeof scratch, "tmp/bench-%d", (int)getpid());
    } else {
        snprintf(scratch, sizeof scratch, "%s", opt.dir);
    }
    if (mkdir(scratch, 0755) != 0) {
        struct stat sb;
        if (errno == EEXIST && opt.dir && stat(scratch, &sb) == 0 && S_ISDIR(sb.st_mode)) {
            snprintf(scratch, sizeof scratch, "%s/" PROG "-%d", opt.dir, (int)getpid());
            if (mkdir(scratch, 0755) != 0)
                tools__die("cannot create %s: %s", scratch, strerror(errno));
        } else {
            tools__die("cannot create scratch directory %s: %s", scratch, strerror(errno));
        }
    }
    scratch_made = 1;
    atexit(cleanup);
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    machine_line();
    tools__note("scratch directory %s", scratch);
    if (!opt.only || !strcmp(opt.only, "pull")) {
        static const uint32_t widths[] = {32, 128, 512};
        for (size_t i = 0; i < sizeof widths / sizeof *widths; i++)
            bench_pull(widths[i]);
    }
    if (!opt.only || !strcmp(opt.only, "push"))
        bench_push();
    if (!opt.only || !strcmp(opt.only, "import"))
        bench_import();
    table_print();
    printf("\n%s in %.0f s; %d check(s) failed\n", nfail ? "FAILED" : "done",
           tools__now_s() - t0, nfail);
    return nfail ? 1 : 0;
}
