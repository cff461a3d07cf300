/* kv_damage_test.c - a damaged store never crashes gkv (issue 26).
 *
 * SQLite's way: a small store holding every kind of tensor (plain, with
 * chunks small enough to need branch pages; GKV_TENSOR_HOT; optimizer
 * state companions; a tensor written in write-back mode and flushed; a
 * zeros tensor partly written; a deleted one, so the free list holds
 * pages) is damaged one way at a time, and after each: open (which checks
 * the file's structure), verify, what a server does at start (prefault),
 * pull every row of every tensor, push (assign and adam), pull the pushed
 * row back, close. Nothing may crash or hang: every step ends in a clean
 * error or a correct answer, and a store that verify passes must pull
 * exactly the rows it was built with (a flipped byte that nothing notices
 * and that changes an answer is a failure too). That includes a changed
 * transaction number in the older header page that makes it read as the
 * newer one (parity and sequence kept): LMDB then reads the commit before
 * the last, whose tree is whole, and only gkv's own record of the
 * transaction that wrote the tree (KV_TXN_KEY) tells; such a case is
 * named "read the commit before the last", and must not occur.
 *
 * The damage: one byte changed (XOR with a random non-zero mask) at every
 * byte of every page header, of both meta pages' records, and at a stride
 * through the rest of data.mdb; a sample of multi-byte damage (runs of
 * random bytes, zeroed and random pages); truncations. GKVT_SOAK=1 (make
 * soak) changes every byte of the file and samples far more. The cases
 * run in a child process, a batch at a time, each under an alarm; a
 * crash or hang names the case and the step, and the sweep goes on with
 * the next case in a new child.
 *
 * Last, gkv-server and kvctl meet a damaged store: the server refuses it
 * at start with a message, kvctl's commands fail cleanly (exit 1); and a
 * store cut short under an open handle, or under a running server, fails
 * each request with an error instead of SIGBUS, and writes stay refused. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include "gkvt.h"
#include "gkvt_mdb.h"
#include "kv/kv_test.h"

#define PSIZE      4096u
#define MAX_FAILS  20
#define CASE_S     20      /* seconds one case may take */

/* One tensor's rows as built. */
struct ref {
    char name[GKV_NAME_MAX + 1];
    uint64_t lo, hi;
    size_t row_bytes;
    unsigned char *rows;
};

/* The damage of one case. */
enum dkind { D_XOR, D_RUN, D_PAGE_ZERO, D_PAGE_RAND, D_TRUNC, D_U64,
             D_U16 };

struct dcase {
    enum dkind kind;
    uint64_t off;          /* byte (D_XOR, D_RUN), page start, or new size */
    uint32_t len;          /* bytes (D_RUN) */
    uint8_t mask;          /* D_XOR */
    uint64_t seed;         /* D_RUN, D_PAGE_RAND; D_U64, D_U16: the value */
};

/* What the child says, in shared memory: the case it is on and its step. */
struct shared {
    volatile long cur;
    volatile int step;
    volatile long done;
    /* counts of outcomes */
    volatile long refused, corrupt, clean, pull_err, push_err;
    volatile long rolled;   /* read the commit before the last: see below */
    volatile long caught;   /* requests a guard failed (run_live_case) */
    volatile long asserted; /* of which an LMDB assertion */
    volatile long held;     /* reads through a snapshot held across the
                             * damage that failed GKV_ECORRUPT */
    volatile long wrong;                     /* a wrong answer: a failure */
    char wrong_msg[512];
};

static const char *const steps[] = {"restore", "open", "verify", "prefault",
                                    "pull", "push", "pull after push",
                                    "close", "held snapshot"};

struct fx {
    char *dir;             /* the temporary directory */
    char st[4200];         /* the store damaged case by case */
    unsigned char *img;    /* data.mdb as built */
    size_t img_len;
    struct ref *refs;
    size_t nrefs;
    struct ref *prev;      /* the rows before the last commit */
    size_t nprev;
    struct shared *sh;
};

static void
build_store(const char *st)
{
    gkv_store *s;
    gkv_tensor_spec plain = gkvt_spec_init(GKV_F32, 4, 0, 2400,
                                           GKV_INIT_UNIFORM);
    gkv_tensor_spec hot = gkvt_spec_init(GKV_F32, 16, 100, 700,
                                         GKV_INIT_NORMAL);
    gkv_tensor_spec opt = gkvt_spec_init(GKV_F32, 8, 0, 300, GKV_INIT_CONST);
    gkv_tensor_spec wb = gkvt_spec_init(GKV_F16, 8, 0, 500, GKV_INIT_UNIFORM);
    gkv_tensor_spec zeros = gkvt_spec(GKV_I64, 2, 0, 4000);
    gkv_tensor_spec tmp = gkvt_spec_init(GKV_F32, 64, 0, 200,
                                         GKV_INIT_UNIFORM);
    gkv_push_args adam = {.handler = "adam", .lr = 0.1};
    uint64_t ids[40];
    float g[40 * 8];
    int64_t z[40 * 2];
    uint16_t h[40 * 8];

    plain.chunk_rows = 16;          /* 150 small chunks: branch pages */
    hot.flags = GKV_TENSOR_HOT;
    zeros.init = GKV_INIT_ZEROS;
    zeros.chunk_rows = 256;
    GKVT_OK(gkv_store_open(&s, st, GKV_CREATE, NULL));
    GKVT_OK(gkv_tensor_create(s, "plain", &plain));
    GKVT_OK(gkv_tensor_create(s, "hot", &hot));
    GKVT_OK(gkv_tensor_create(s, "opt", &opt));
    GKVT_OK(gkv_tensor_create(s, "wb", &wb));
    GKVT_OK(gkv_tensor_create(s, "zeros", &zeros));
    GKVT_OK(gkv_tensor_create(s, "tmp", &tmp));
    for (int i = 0; i < 40; i++) {
        ids[i] = (uint64_t)(i * 7);
        for (int j = 0; j < 8; j++) {
            g[i * 8 + j] = (float)(i - j) / 8;
            h[i * 8 + j] = gkv_f32_to_f16((float)(i + j));
        }
        z[2 * i] = i;
        z[2 * i + 1] = -i;
    }
    GKVT_OK(gkv_tensor_push(s, "opt", ids, 40, g, sizeof g, &adam));
    GKVT_OK(gkv_tensor_push(s, "opt", ids, 20, g, 20 * 8 * 4, &adam));
    GKVT_OK(gkv_tensor_push(s, "zeros", ids, 40, z, sizeof z, NULL));
    GKVT_OK(gkv_writeback_start(s, "wb", 0));
    GKVT_OK(gkv_tensor_push(s, "wb", ids, 40, h, sizeof h,
                            &(gkv_push_args){.handler = "add"}));
    GKVT_OK(gkv_writeback_flush(s));
    GKVT_OK(gkv_writeback_stop(s, "wb"));
    GKVT_OK(gkv_tensor_delete(s, "tmp"));      /* its pages: the free list */
    GKVT_OK(gkv_store_verify(s, NULL, NULL));
    gkv_store_close(s);
}

/* The store's last commit: a push to "plain". */
static void
last_commit(const char *st)
{
    gkv_store *s;
    uint64_t ids[10];
    float g[10 * 4];

    for (int i = 0; i < 10; i++) {
        ids[i] = (uint64_t)(i * 7);
        for (int j = 0; j < 4; j++)
            g[i * 4 + j] = (float)(i * j) + 0.25f;
    }
    GKVT_OK(gkv_store_open(&s, st, 0, NULL));
    GKVT_OK(gkv_tensor_push(s, "plain", ids, 10, g, sizeof g, NULL));
    gkv_store_close(s);
}

/* Reads every row of every tensor (state companions too) into refs. */
static void
read_refs(struct fx *f, struct ref **out, size_t *nout)
{
    gkv_tensor_desc *v;
    gkv_store *s;
    size_t n;

    GKVT_OK(gkv_store_open(&s, f->st, GKV_RDONLY, NULL));
    GKVT_OK(gkv_tensor_list(s, NULL, 1, &v, &n));
    assert_true(n >= 8);          /* 5 tensors, adam's 3 companions */
    *out = calloc(n, sizeof **out);
    for (size_t i = 0; i < n; i++) {
        struct ref *r = &(*out)[i];
        size_t len = (size_t)(v[i].hi - v[i].lo) * v[i].row_bytes;

        snprintf(r->name, sizeof r->name, "%s", v[i].name);
        r->lo = v[i].lo;
        r->hi = v[i].hi;
        r->row_bytes = v[i].row_bytes;
        r->rows = malloc(len);
        GKVT_OK(gkv_tensor_read(s, NULL, r->name, r->lo, r->hi, r->rows, len));
    }
    *nout = n;
    gkv_free(v);
    gkv_store_close(s);
}

static int
setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    char ref[4200], p[4300];
    struct stat sb;
    int fd;

    f->dir = gkvt_mkdtemp("damage");
    snprintf(ref, sizeof ref, "%s/ref", f->dir);
    snprintf(f->st, sizeof f->st, "%s/st", f->dir);
    build_store(ref);
    snprintf(f->st, sizeof f->st, "%s", ref);
    read_refs(f, &f->prev, &f->nprev);
    last_commit(ref);
    read_refs(f, &f->refs, &f->nrefs);
    assert_int_equal(f->nprev, f->nrefs);
    snprintf(f->st, sizeof f->st, "%s/st", f->dir);
    snprintf(p, sizeof p, "%s/data.mdb", ref);
    fd = open(p, O_RDONLY);
    assert_true(fd >= 0 && fstat(fd, &sb) == 0);
    f->img_len = (size_t)sb.st_size;
    f->img = malloc(f->img_len);
    assert_int_equal(pread(fd, f->img, f->img_len, 0), (ssize_t)f->img_len);
    close(fd);
    assert_int_equal(mkdir(f->st, 0755), 0);
    f->sh = mmap(NULL, sizeof *f->sh, PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(f->sh != MAP_FAILED);
    print_message("damage: data.mdb of %zu bytes (%zu pages), %zu tensors\n",
                  f->img_len, f->img_len / PSIZE, f->nrefs);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fx *f = *state;

    for (size_t i = 0; i < f->nrefs; i++) {
        free(f->refs[i].rows);
        free(f->prev[i].rows);
    }
    free(f->refs);
    free(f->prev);
    free(f->img);
    munmap(f->sh, sizeof *f->sh);
    gkvt_rmtree(f->dir);
    free(f);
    return 0;
}

/* The image as built, damaged as case c says, in *plen bytes. */
static unsigned char *
damaged_image(struct fx *f, const struct dcase *c, size_t *plen)
{
    unsigned char *b = malloc(f->img_len);
    size_t len = f->img_len;
    uint64_t x = c->seed;

    memcpy(b, f->img, len);
    switch (c->kind) {
    case D_XOR:
        b[c->off] ^= c->mask;
        break;
    case D_RUN:
        for (uint32_t i = 0; i < c->len && c->off + i < len; i++)
            b[c->off + i] = (unsigned char)tools__splitmix64(&x);
        break;
    case D_PAGE_ZERO:
        memset(b + c->off, 0, PSIZE);
        break;
    case D_PAGE_RAND:
        for (uint32_t i = 0; i < PSIZE; i++)
            b[c->off + i] = (unsigned char)tools__splitmix64(&x);
        break;
    case D_TRUNC:
        len = (size_t)c->off;
        break;
    case D_U64:
        memcpy(b + c->off, &c->seed, 8);
        break;
    case D_U16: {
        uint16_t v = (uint16_t)c->seed;
        memcpy(b + c->off, &v, 2);
        break;
    }
    }
    *plen = len;
    return b;
}

/* Writes data.mdb of the case: the image as built, damaged. */
static int
restore(struct fx *f, const struct dcase *c)
{
    char p[4300];
    size_t len;
    unsigned char *b = damaged_image(f, c, &len);
    int fd, ok;

    snprintf(p, sizeof p, "%s/data.mdb", f->st);
    fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ok = fd >= 0 && write(fd, b, len) == (ssize_t)len;
    if (fd >= 0)
        close(fd);
    free(b);
    return ok ? 0 : -1;
}

static void
wrong(struct fx *f, const struct dcase *c, const char *what)
{
    if (f->sh->wrong++ == 0)
        snprintf(f->sh->wrong_msg, sizeof f->sh->wrong_msg, "case kind %d "
                 "offset %llu mask 0x%02x: %s", (int)c->kind,
                 (unsigned long long)c->off, c->mask, what);
}

/* Runs one case in this (child) process. */
static void
run_case(struct fx *f, const struct dcase *c)
{
    struct shared *sh = f->sh;
    gkv_store *s = NULL;
    gkv_err rc, vrc;
    float row[4] = {7.5f, -1, 2, 3}, got[4], g[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    uint64_t id = 5, oid = 3;
    int all_ok = 1, rolled = 0;

    sh->step = 0;
    if (restore(f, c) != 0) {
        wrong(f, c, "cannot write data.mdb");
        return;
    }
    sh->step = 1;
    rc = gkv_store_open(&s, f->st, GKV_NOSYNC, NULL);
    if (rc != GKV_OK) {
        const char *m = gkv_store_errmsg(NULL);
        sh->refused++;
        if (m == NULL || *m == '\0')
            wrong(f, c, "open failed without a message");
        else if (rc == GKV_EVERSION && c->off < 2 * PSIZE)
            wrong(f, c, "a damaged header page reads as a version mismatch");
        return;
    }
    sh->step = 2;
    vrc = gkv_store_verify(s, NULL, NULL);
    if (vrc != GKV_OK)
        sh->corrupt++;
    sh->step = 3;
    if (gkv_store_prefault(s) != GKV_OK)
        all_ok = 0;
    sh->step = 4;
    for (size_t i = 0; i < f->nrefs; i++) {
        const struct ref *r = &f->refs[i];
        size_t len = (size_t)(r->hi - r->lo) * r->row_bytes;
        unsigned char *b = malloc(len);

        rc = gkv_tensor_read(s, NULL, r->name, r->lo, r->hi, b, len);
        if (rc != GKV_OK)
            all_ok = 0;
        else if (vrc == GKV_OK && memcmp(b, r->rows, len) != 0) {
            if (memcmp(b, f->prev[i].rows, len) == 0)
                rolled = 1;
            wrong(f, c, rolled ? "verify passed, but a pull returned the "
                  "rows before the last commit (a silent rollback)" :
                  "verify passed, but a pull returned other rows");
        }
        free(b);
    }
    sh->step = 5;
    rc = gkv_tensor_push(s, "plain", &id, 1, row, sizeof row, NULL);
    if (gkv_tensor_push(s, "opt", &oid, 1, g, sizeof g,
                        &(gkv_push_args){.handler = "adam"}) != GKV_OK)
        sh->push_err++;
    if (rc != GKV_OK) {
        sh->push_err++;
    } else {
        sh->step = 6;
        if (gkv_tensor_pull(s, NULL, "plain", &id, 1, got, sizeof got) ==
                GKV_OK) {
            if (vrc == GKV_OK && memcmp(got, row, sizeof row) != 0)
                wrong(f, c, "a pushed row pulled back different");
        } else {
            all_ok = 0;
        }
    }
    if (rolled)
        sh->rolled++;
    if (!all_ok)
        sh->pull_err++;
    if (vrc == GKV_OK && all_ok)
        sh->clean++;
    sh->step = 7;
    gkv_store_close(s);
}

/* One case written IN PLACE under a handle opened with GKV_GUARD, as a
 * stray dd or another program would (pwrite of the whole damaged image,
 * never truncating). Read every tensor, push (assign and adam), pull the
 * pushed row back, verify, close: nothing may crash or hang, every error
 * has a message, a guard's GKV_ECORRUPT refuses writes from then on, and
 * when verify passes at the end (the damage touched nothing the store
 * uses), the reads and the pushed row were correct. */
static void
run_live_case(struct fx *f, const struct dcase *c)
{
    static const struct dcase whole = {D_XOR, 0, 1, 0, 0};
    struct shared *sh = f->sh;
    gkv_store *s = NULL;
    gkv_err rc, vrc;
    float row[4] = {7.5f, -1, 2, 3}, got[4], g[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    uint64_t id = 5, oid = 3;
    int all_ok = 1, bad_read = 0, pushed_bad = 0, caught = 0;
    gkv_txn *tx = NULL;
    char p[4300];
    unsigned char *b;
    size_t len;
    int fd;

    sh->step = 0;
    if (restore(f, &whole) != 0) {
        wrong(f, c, "cannot write data.mdb");
        return;
    }
    sh->step = 1;
    if (gkv_store_open(&s, f->st, GKV_NOSYNC | GKV_GUARD, NULL) != GKV_OK) {
        wrong(f, c, gkv_store_errmsg(NULL));
        return;
    }
    sh->step = 3;
    if (gkv_store_prefault(s) != GKV_OK)
        wrong(f, c, "prefault of the whole store failed");
    if (gkv_txn_begin(s, &tx) != GKV_OK)
        wrong(f, c, "cannot begin the snapshot held across the damage");
    b = damaged_image(f, c, &len);
    snprintf(p, sizeof p, "%s/data.mdb", f->st);
    fd = open(p, O_WRONLY);
    if (fd < 0 || pwrite(fd, b, len, 0) != (ssize_t)len)
        wrong(f, c, "cannot write data.mdb in place");
    if (fd >= 0)
        close(fd);
    free(b);
#define LIVE_RC(rc)                                                         \
    do {                                                                    \
        const char *m_ = gkv_store_errmsg(s);                               \
        if ((rc) != GKV_OK && (m_ == NULL || *m_ == '\0'))                  \
            wrong(f, c, "an error without a message");                      \
        if ((rc) == GKV_ECORRUPT && m_ != NULL &&                           \
            strstr(m_, "changed under this handle") != NULL) {              \
            caught = 1;                                                     \
            if (strstr(m_, "(LMDB: ") != NULL)                              \
                sh->asserted++;                                             \
        }                                                                   \
    } while (0)
    /* first through the snapshot begun before the damage: the check runs
     * before each read (kv__guard_held; before, LMDB met the changed
     * pages itself, and some damaged page headers made it loop without a
     * fault). Rows it returns are either the rows as built or an error; a
     * row changed by the damage is no failure here (the damage may hit a
     * row's bytes), a crash or a hang is */
    sh->step = 8;
    for (size_t i = 0; tx != NULL && i < f->nrefs; i++) {
        const struct ref *r = &f->refs[i];
        size_t n = (size_t)(r->hi - r->lo) * r->row_bytes;
        unsigned char *rb = malloc(n);

        rc = gkv_tensor_read(s, tx, r->name, r->lo, r->hi, rb, n);
        LIVE_RC(rc);
        if (rc == GKV_ECORRUPT)
            sh->held++;
        free(rb);
    }
    gkv_txn_end(tx);
    sh->step = 4;
    for (size_t i = 0; i < f->nrefs; i++) {
        const struct ref *r = &f->refs[i];
        size_t n = (size_t)(r->hi - r->lo) * r->row_bytes;
        unsigned char *rb = malloc(n);

        rc = gkv_tensor_read(s, NULL, r->name, r->lo, r->hi, rb, n);
        LIVE_RC(rc);
        if (rc != GKV_OK)
            all_ok = 0;
        else if (memcmp(rb, r->rows, n) != 0 &&
                 strncmp(r->name, "plain", 5) != 0 &&
                 strncmp(r->name, "opt", 3) != 0)
            bad_read = 1;         /* (the pushes below rewrite a chunk of
                                   * those two, damaged or not, and seal
                                   * it anew: verify cannot see that) */
        free(rb);
    }
    sh->step = 5;
    rc = gkv_tensor_push(s, "plain", &id, 1, row, sizeof row, NULL);
    LIVE_RC(rc);
    {
        gkv_err orc = gkv_tensor_push(s, "opt", &oid, 1, g, sizeof g,
                                      &(gkv_push_args){.handler = "adam"});
        LIVE_RC(orc);
        if (orc != GKV_OK)
            sh->push_err++;
    }
    if (rc != GKV_OK) {
        sh->push_err++;
    } else {
        sh->step = 6;
        rc = gkv_tensor_pull(s, NULL, "plain", &id, 1, got, sizeof got);
        LIVE_RC(rc);
        if (rc != GKV_OK)
            all_ok = 0;
        else if (memcmp(got, row, sizeof row) != 0)
            pushed_bad = 1;
    }
    sh->step = 2;
    vrc = gkv_store_verify(s, NULL, NULL);
    LIVE_RC(vrc);
    if (vrc != GKV_OK)
        sh->corrupt++;
    else if (bad_read)
        wrong(f, c, "verify passed, but a read under the open handle "
              "returned other rows");
    else if (pushed_bad)
        wrong(f, c, "a pushed row pulled back different");
    if (caught) {
        sh->caught++;
        if (gkv_tensor_push(s, "plain", &id, 1, row, sizeof row, NULL) !=
                GKV_ECORRUPT)
            wrong(f, c, "a write accepted after the guard caught a fault");
    }
#undef LIVE_RC
    if (!all_ok)
        sh->pull_err++;
    if (vrc == GKV_OK && all_ok)
        sh->clean++;
    sh->step = 7;
    gkv_store_close(s);
}

static void
describe(const struct dcase *c, char *b, size_t bl)
{
    static const char *const kinds[] = {"xor", "run", "zero page",
                                        "random page", "truncate", "u64",
                                        "u16"};

    snprintf(b, bl, "%s at %llu (page %llu + %llu) len %u mask 0x%02x "
             "seed %llu", kinds[c->kind], (unsigned long long)c->off,
             (unsigned long long)(c->off / PSIZE),
             (unsigned long long)(c->off % PSIZE), c->len, c->mask,
             (unsigned long long)c->seed);
}

/* Runs cases [0, n) in child processes; fails naming each crash or hang. */
static void
sweep(struct fx *f, const struct dcase *cs, long n,
      void (*run)(struct fx *, const struct dcase *))
{
    struct shared *sh = f->sh;
    char lock[4300];
    int fails = 0;
    long next = 0;
    double t0 = tools__now_s();

    memset(sh, 0, sizeof *sh);
    snprintf(lock, sizeof lock, "%s/lock.mdb", f->st);
    while (next < n) {
        pid_t pid;
        int wst;

        unlink(lock);           /* a crash may have left it locked */
        sh->cur = next;
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            for (long i = next; i < n; i++) {
                sh->cur = i;
                alarm(CASE_S);
                run(f, &cs[i]);
                sh->done++;
            }
            _exit(0);
        }
        assert_int_equal(waitpid(pid, &wst, 0), pid);
        if (WIFEXITED(wst) && WEXITSTATUS(wst) == 0)
            break;
        {
            char d[200];
            describe(&cs[sh->cur], d, sizeof d);
            print_error("case %ld (%s): %s in step '%s'\n", sh->cur, d,
                        WIFSIGNALED(wst) ? (WTERMSIG(wst) == SIGALRM ?
                        "hung" : strsignal(WTERMSIG(wst))) : "exited",
                        steps[sh->step]);
        }
        fails++;
        next = sh->cur + 1;
        if (fails >= MAX_FAILS)
            break;
    }
    print_message("damage: %ld cases in %.1f s: %ld refused at open, %ld "
                  "more failed verify, %ld all correct, %ld read the commit "
                  "before the last; %ld with a pull error, %ld push errors; "
                  "%d crashed or hung\n", n, tools__now_s() - t0, sh->refused,
                  sh->corrupt, sh->clean, sh->rolled, sh->pull_err,
                  sh->push_err, fails);
    if (sh->wrong > 0)
        print_error("%ld wrong answers; first: %s\n", sh->wrong, sh->wrong_msg);
    if (fails > 0 || sh->wrong > 0)
        fail_msg("damage: %d crashes or hangs, %ld wrong answers", fails,
                 sh->wrong);
}

static int
soak(void)
{
    const char *e = getenv("GKVT_SOAK");
    return e != NULL && *e != '\0' && strcmp(e, "0") != 0;
}

static uint8_t
mask_of(uint64_t *x)
{
    uint8_t m;

    while ((m = (uint8_t)tools__splitmix64(x)) == 0)
        ;
    return m;
}

/* Single-byte damage: every byte of every page header and of the meta
 * pages' records, and every 'stride'-th byte of the rest (1: all). */
static void
test_flip_each_byte(void **state)
{
    struct fx *f = *state;
    uint64_t x = gkvt_seed() ^ 0xda3a6e;
    long stride = soak() ? 1 : 89, n = 0;
    struct dcase *cs = calloc(f->img_len, sizeof *cs);

    print_message("damage: seed %llu (GKVT_SEED), stride %ld\n",
                  (unsigned long long)gkvt_seed(), stride);
    for (uint64_t off = 0; off < f->img_len; off++) {
        uint64_t in = off % PSIZE, pg = off / PSIZE;
        if (stride == 1 || in < 16 || (pg < 2 && in < 152) ||
            (long)(off % (uint64_t)stride) == 0)
            cs[n++] = (struct dcase){D_XOR, off, 1, mask_of(&x), 0};
    }
    sweep(f, cs, n, run_case);
    free(cs);
}

/* A header page's transaction number changed so that the two still hold
 * consecutive numbers of the right parities: the older page (N-1) reading
 * N+1, or the newer (N) reading N-2. LMDB then takes the older commit's
 * page for the newest and reads the commit before the last, whose tree is
 * whole; only gkv's record of the transaction that wrote each tree tells.
 * Those two numbers exactly, then every one-bit change of either page's
 * number but the parity bit (those that keep the pattern are these two;
 * the others break the sequence): each case must be refused at open, and
 * none may read the older rows. */
static void
test_header_renumbered(void **state)
{
    struct fx *f = *state;
    uint64_t t[2];
    struct dcase cs[2 + 2 * 63];
    long n = 0;
    unsigned older;

    memcpy(&t[0], f->img + 144, 8);
    memcpy(&t[1], f->img + PSIZE + 144, 8);
    older = t[0] > t[1];
    assert_int_equal(t[older] + 1, t[!older]);
    cs[n++] = (struct dcase){D_U64, older * PSIZE + 144, 8, 0, t[!older] + 1};
    cs[n++] = (struct dcase){D_U64, !older * PSIZE + 144, 8, 0, t[older] - 1};
    for (unsigned pg = 0; pg < 2; pg++)
        for (unsigned bit = 1; bit < 64; bit++)
            cs[n++] = (struct dcase){D_XOR, pg * PSIZE + 144 + bit / 8, 1,
                                     (uint8_t)(1u << bit % 8), 0};
    print_message("damage: header txnids %llu (older) and %llu; renumbered "
                  "%llu and %llu\n", (unsigned long long)t[older],
                  (unsigned long long)t[!older],
                  (unsigned long long)t[!older] + 1,
                  (unsigned long long)t[older] - 1);
    sweep(f, cs, n, run_case);
    assert_int_equal(f->sh->rolled, 0);
    assert_int_equal(f->sh->refused, n);
}

/* Multi-byte damage and truncations, sampled. */
static void
test_multi_byte_and_truncation(void **state)
{
    struct fx *f = *state;
    uint64_t x = gkvt_seed() ^ 0x3717, npages = f->img_len / PSIZE;
    long want = soak() ? 20000 : 300, n = 0;
    struct dcase *cs = calloc((size_t)want + 2 * npages + 64, sizeof *cs);

    for (uint64_t pg = 0; pg < npages; pg++) {
        cs[n++] = (struct dcase){D_PAGE_ZERO, pg * PSIZE, PSIZE, 0, 0};
        cs[n++] = (struct dcase){D_PAGE_RAND, pg * PSIZE, PSIZE, 0,
                                 tools__splitmix64(&x)};
    }
    for (int i = 0; i < 48; i++) {
        uint64_t sz = tools__splitmix64(&x) % f->img_len;
        if (i < 8)
            sz = (uint64_t)i * PSIZE / 2;
        cs[n++] = (struct dcase){D_TRUNC, sz, 0, 0, 0};
    }
    for (long i = 0; i < want; i++) {
        uint64_t off = tools__splitmix64(&x) % f->img_len;
        uint32_t len = 2 + (uint32_t)(tools__splitmix64(&x) % 15);
        if (i % 3 == 0)             /* aim at headers: the pointers */
            off = off / PSIZE * PSIZE + tools__splitmix64(&x) % 24;
        cs[n++] = (struct dcase){D_RUN, off, len, 0, tools__splitmix64(&x)};
    }
    sweep(f, cs, n, run_case);
    free(cs);
}

/* Damage written in place under an open handle with GKV_GUARD (see
 * run_live_case): one byte changed in every page header and the meta
 * records at a stride, every byte under GKVT_SOAK=1; zeroed and random
 * pages; runs aimed at page headers. */
static void
test_damaged_in_place(void **state)
{
    struct fx *f = *state;
    uint64_t x = gkvt_seed() ^ 0x9a4d, npages = f->img_len / PSIZE;
    long stride = soak() ? 1 : 3, want = soak() ? 20000 : 200, n = 0;
    struct dcase *cs;

    if (!KV_GUARD_SIGNALS) {
        skip();                 /* ThreadSanitizer: no fault handler */
        return;
    }
    cs = calloc(f->img_len + (size_t)want + 2 * npages + 2, sizeof *cs);

    for (uint64_t off = 0; off < f->img_len; off++) {
        uint64_t in = off % PSIZE, pg = off / PSIZE;
        if (stride == 1 ||
            ((in < 16 || (pg < 2 && in < 152)) && off % (uint64_t)stride == 0))
            cs[n++] = (struct dcase){D_XOR, off, 1, mask_of(&x), 0};
    }
    for (uint64_t pg = 0; pg < npages; pg++) {
        cs[n++] = (struct dcase){D_PAGE_ZERO, pg * PSIZE, PSIZE, 0, 0};
        cs[n++] = (struct dcase){D_PAGE_RAND, pg * PSIZE, PSIZE, 0,
                                 tools__splitmix64(&x)};
    }
    /* the header byte whose change made the next pull abort in LMDB (now
     * the check before a read finds it); and the data tree's root, a
     * branch page, left with no keys (its mp_lower at the header's end),
     * which fails LMDB's own assertion "i < NUMKEYS(mp)" where no check
     * runs first (test_guard_catches) */
    cs[n++] = (struct dcase){D_XOR, PSIZE + 92, 1, 0x0c, 0};
    cs[n++] = (struct dcase){D_XOR, 92, 1, 0x0c, 0};
    cs[n++] = (struct dcase){D_U16,
                             gkvt_mdb_db_root(f->img, "data") * PSIZE + 12,
                             2, 0, 16};
    for (long i = 0; i < want; i++) {
        uint64_t off = tools__splitmix64(&x) % f->img_len;
        uint32_t len = 2 + (uint32_t)(tools__splitmix64(&x) % 15);
        off = off / PSIZE * PSIZE + tools__splitmix64(&x) % 24;
        cs[n++] = (struct dcase){D_RUN, off, len, 0, tools__splitmix64(&x)};
    }
    sweep(f, cs, n, run_live_case);
    print_message("damage in place: %ld cases, the guard caught a fault or "
                  "an LMDB assertion in %ld (an assertion %ld times); %ld "
                  "reads through the snapshot held across the damage "
                  "refused\n", n, f->sh->caught, f->sh->asserted,
                  f->sh->held);
    /* the check before reads through a held snapshot was reached (the
     * fault handler and LMDB's assertion callback: test_guard_catches,
     * test_guard_outside_map) */
    assert_true(f->sh->held > 0);
    free(cs);
}

static uint64_t
db_root(const struct fx *f, const char *name)
{
    return gkvt_mdb_db_root(f->img, name);
}

/* gkv-server refuses a damaged store at start, with a message; kvctl's
 * commands fail with exit 1 and say the store is damaged. */
static void
test_server_and_kvctl_refuse(void **state)
{
    struct fx *f = *state;
    uint64_t pages[] = {0, 1, db_root(f, NULL), db_root(f, "catalog"),
                        db_root(f, "data")};
    char cfg[4300];
    FILE *fp;

    snprintf(cfg, sizeof cfg, "%s/ip.cfg", f->dir);
    fp = fopen(cfg, "w");
    assert_non_null(fp);
    fprintf(fp, "127.0.0.1 %d\n", gkvt_port_base(1));
    fclose(fp);
    for (size_t i = 0; i < sizeof pages / sizeof pages[0]; i++) {
        /* a page header's flags: a page LMDB would write in place */
        struct dcase c = {D_XOR, pages[i] * PSIZE + (pages[i] < 2 ? 16 : 10),
                          1, pages[i] < 2 ? 0x01 : 0x10, 0};
        char *sp = strdup(gkvt_prog("gkv-server"));
        char *kp = strdup(gkvt_prog("kvctl"));
        char *srv[] = {sp, "--store", f->st, "--ip-config", cfg, "--machine",
                       "0", NULL};
        char *kv1[] = {kp, f->st, "verify", NULL};
        char *kv2[] = {kp, f->st, "ls", NULL};
        char *out = NULL, *err = NULL;
        char lock[4300];

        snprintf(lock, sizeof lock, "%s/lock.mdb", f->st);
        unlink(lock);
        assert_int_equal(restore(f, &c), 0);
        if (gkvt_run(srv, NULL, 0, &out, &err, 30) != 1 ||
            strstr(err, "damaged") == NULL)
            fail_msg("gkv-server on damaged page %llu said: %s",
                     (unsigned long long)pages[i], err);
        free(out);
        free(err);
        for (int k = 0; k < 2; k++) {
            if (gkvt_run(k ? kv2 : kv1, NULL, 0, &out, &err, 30) != 1 ||
                strstr(err, "damaged") == NULL)
                fail_msg("kvctl on damaged page %llu said: %s",
                         (unsigned long long)pages[i], err);
            free(out);
            free(err);
        }
        free(sp);
        free(kp);
    }
}

/* data.mdb cut short under an open handle (a server's): the next pull
 * faulted (SIGBUS). Now each request fails with GKV_ECORRUPT; the handle
 * refuses writes from then on, also once the file is whole again, until
 * the store is reopened. A structure damaged under it is found by verify,
 * which also stops its writes. */
static void
test_damaged_while_open(void **state)
{
    struct fx *f = *state;
    struct dcase whole = {D_XOR, 0, 1, 0, 0};
    struct dcase cut = {D_TRUNC, f->img_len / 2, 0, 0, 0};
    char lock[4300], p[4300];
    uint64_t id = 5;
    float row[4] = {1, 2, 3, 4}, got[4];
    gkv_store *s;
    int fd;

    snprintf(lock, sizeof lock, "%s/lock.mdb", f->st);
    snprintf(p, sizeof p, "%s/data.mdb", f->st);
    unlink(lock);
    assert_int_equal(restore(f, &whole), 0);
    GKVT_OK(gkv_store_open(&s, f->st, 0, NULL));
    GKVT_OK(gkv_tensor_pull(s, NULL, "plain", &id, 1, got, sizeof got));
    assert_int_equal(truncate(p, (off_t)cut.off), 0);
    assert_int_equal(gkv_tensor_pull(s, NULL, "plain", &id, 1, got,
                                     sizeof got), GKV_ECORRUPT);
    if (strstr(gkv_store_errmsg(s), "cut short while open") == NULL)
        fail_msg("message: %s", gkv_store_errmsg(s));
    assert_int_equal(gkv_tensor_push(s, "plain", &id, 1, row, sizeof row,
                                     NULL), GKV_ECORRUPT);
    assert_int_equal(gkv_store_verify(s, NULL, NULL), GKV_ECORRUPT);
    assert_int_equal(gkv_store_prefault(s), GKV_ECORRUPT);
    /* the operator puts the file back: reads work, writes wait for a
     * reopen */
    fd = open(p, O_WRONLY);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, f->img, f->img_len, 0), (ssize_t)f->img_len);
    close(fd);
    GKVT_OK(gkv_tensor_pull(s, NULL, "plain", &id, 1, got, sizeof got));
    assert_int_equal(gkv_tensor_push(s, "plain", &id, 1, row, sizeof row,
                                     NULL), GKV_ECORRUPT);
    assert_non_null(strstr(gkv_store_errmsg(s), "reopened"));
    gkv_store_close(s);
    GKVT_OK(gkv_store_open(&s, f->st, 0, NULL));
    GKVT_OK(gkv_tensor_push(s, "plain", &id, 1, row, sizeof row, NULL));
    GKVT_OK(gkv_store_verify(s, NULL, NULL));
    /* a page's flags overwritten under it (as a stray write would): the
     * next write would take the page for its own dirty copy and write into
     * the read-only map. Verify names the page; the handle writes no more */
    {
        unsigned char *now = malloc(f->img_len * 2);
        uint64_t pg;
        uint16_t fl;
        char want[64];

        fd = open(p, O_RDWR);
        assert_true(fd >= 0);
        assert_true(pread(fd, now, f->img_len * 2, 0) >= (ssize_t)f->img_len);
        pg = gkvt_mdb_db_root(now, "data");
        memcpy(&fl, now + pg * PSIZE + 10, 2);
        fl |= 0x10;                               /* P_DIRTY */
        assert_int_equal(pwrite(fd, &fl, 2, (off_t)(pg * PSIZE + 10)), 2);
        close(fd);
        free(now);
        assert_int_equal(gkv_store_verify(s, NULL, NULL), GKV_ECORRUPT);
        snprintf(want, sizeof want, "data page %llu", (unsigned long long)pg);
        if (strstr(gkv_store_errmsg(s), want) == NULL)
            fail_msg("message: %s", gkv_store_errmsg(s));
        assert_int_equal(gkv_tensor_push(s, "plain", &id, 1, row, sizeof row,
                                         NULL), GKV_ECORRUPT);
    }
    gkv_store_close(s);
}

static unsigned char *file_now(const struct fx *f, size_t *len);
static void write_in_place(const struct fx *f, const void *b, size_t len,
                           uint64_t off);
static void restore_whole(struct fx *f);
static uint64_t held_behind(const struct fx *f, gkv_store *s, gkv_txn **tx);
static uint64_t first_leaf(const unsigned char *img);
static void loop_header(const unsigned char *img, uint64_t pg,
                        uint16_t hdr[2]);
static uint64_t leaf_rewritten(const unsigned char *a, const unsigned char *b);

/* The guard itself (GKV_GUARD): data.mdb cut short under a snapshot
 * already begun and older than a commit of the handle (no transaction
 * begins, so no size check runs, and no walk: held_behind) makes the
 * next read of a missing page SIGBUS inside LMDB's map. The pull fails
 * with GKV_ECORRUPT naming the fault, the process lives, and the handle
 * refuses writes. The data tree's root, a branch page, left with no keys
 * under such a snapshot fails LMDB's own assertion "i < NUMKEYS(mp)":
 * LMDB's assertion callback fails the read the same way, naming LMDB's
 * message. A fault elsewhere still kills the process as before (the
 * handler passes it on): a child dies of it. (In this process the
 * handler passes faults outside the map on to cmocka's.) */
static void
test_guard_catches(void **state)
{
    struct fx *f = *state;
    struct dcase whole = {D_XOR, 0, 1, 0, 0};
    char lock[4300], p[4300];
    uint64_t ids[3] = {5, 1000, 2300};
    float row[4] = {1, 2, 3, 4}, got[3 * 4];
    gkv_store *s;
    gkv_txn *tx;
    pid_t pid;
    int wst;

    if (!KV_GUARD_SIGNALS) {
        skip();                 /* ThreadSanitizer: no fault handler */
        return;
    }
    snprintf(lock, sizeof lock, "%s/lock.mdb", f->st);
    snprintf(p, sizeof p, "%s/data.mdb", f->st);
    /* first, before this process installs the handler: a fault outside
     * the map under a guarded handle kills as it would have. (The child
     * takes cmocka's handler off first, as a program without one.) */
    unlink(lock);
    assert_int_equal(restore(f, &whole), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        volatile int *np = mmap(NULL, PSIZE, PROT_NONE,
                                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

        alarm(CASE_S);
        signal(SIGSEGV, SIG_DFL);
        if (np == MAP_FAILED ||
            gkv_store_open(&s, f->st, GKV_GUARD, NULL) != GKV_OK)
            _exit(3);
        np[2] = 1;                      /* SIGSEGV outside the map */
        _exit(0);
    }
    assert_int_equal(waitpid(pid, &wst, 0), pid);
    if (!(WIFSIGNALED(wst) && WTERMSIG(wst) == SIGSEGV))
        fail_msg("a fault outside the map: status 0x%x, not SIGSEGV", wst);
    unlink(lock);
    assert_int_equal(restore(f, &whole), 0);
    GKVT_OK(gkv_store_open(&s, f->st, GKV_GUARD, NULL));
    GKVT_OK(gkv_store_prefault(s));
    assert_true(held_behind(f, s, &tx) != 0);
    GKVT_OK(gkv_tensor_pull(s, tx, "plain", ids, 3, got, sizeof got));
    assert_int_equal(truncate(p, 2 * PSIZE), 0);
    assert_int_equal(gkv_tensor_pull(s, tx, "plain", ids, 3, got,
                                     sizeof got), GKV_ECORRUPT);
    if (strstr(gkv_store_errmsg(s), "changed under this handle (SIGBUS at "
               "map offset") == NULL)
        fail_msg("message: %s", gkv_store_errmsg(s));
    /* the same snapshot again, a read of rows */
    {
        float *hb = malloc(600 * 16 * sizeof *hb);

        assert_int_equal(gkv_tensor_read(s, tx, "hot", 100, 700, hb,
                                         600 * 16 * sizeof *hb), GKV_ECORRUPT);
        free(hb);
    }
    gkv_txn_end(tx);
    assert_int_equal(gkv_tensor_push(s, "plain", ids, 1, row, sizeof row,
                                     NULL), GKV_ECORRUPT);
    gkv_store_close(s);

    /* LMDB's assertion, under a snapshot held behind a commit */
    restore_whole(f);
    GKVT_OK(gkv_store_open(&s, f->st, GKV_GUARD, NULL));
    {
        uint64_t root = held_behind(f, s, &tx);
        uint16_t lower = 16;

        assert_true(root != 0);
        write_in_place(f, &lower, 2, root * PSIZE + 12);
    }
    assert_int_equal(gkv_tensor_pull(s, tx, "plain", ids, 3, got,
                                     sizeof got), GKV_ECORRUPT);
    if (strstr(gkv_store_errmsg(s), "changed under this handle (LMDB: ") ==
            NULL)
        fail_msg("message: %s", gkv_store_errmsg(s));
    gkv_txn_end(tx);
    assert_int_equal(gkv_tensor_push(s, "plain", ids, 1, row, sizeof row,
                                     NULL), GKV_ECORRUPT);
    gkv_store_close(s);
}

/* Runs child(f, arg) in a child process under an alarm; fails naming
 * 'what' and arg when it hangs, dies or exits non-zero (the exit code
 * says which check failed: see each child); skips when it exits
 * CHILD_SKIP (no inotify watch to be had). */
#define CHILD_SKIP 77
static void
in_child(struct fx *f, void (*child)(struct fx *, int), int arg,
         const char *what)
{
    pid_t pid;
    int wst;

    restore_whole(f);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(CASE_S);
        child(f, arg);
        _exit(0);
    }
    assert_int_equal(waitpid(pid, &wst, 0), pid);
    if (WIFSIGNALED(wst))
        fail_msg("%s (%d): %s", what, arg, WTERMSIG(wst) == SIGALRM ?
                 "hung" : strsignal(WTERMSIG(wst)));
    if (WEXITSTATUS(wst) == CHILD_SKIP)
        skip();
    else if (WEXITSTATUS(wst) != 0)
        fail_msg("%s (%d): child exit %d", what, arg, WEXITSTATUS(wst));
}

/* A snapshot held at the newest commit, then a leaf page of the data
 * tree changed in place so that LMDB 0.9 searches it without end and
 * without a fault (P_LEAF2 set and mp_lower below the page header:
 * NUMKEYS comes out near 2^31 and mdb_node_search's int bounds overflow;
 * found by test_damaged_in_place with seed 15012706687832). The read
 * through that snapshot is checked first (kv__guard_held) and fails with
 * the walk's message naming the page, for each kind of read through a
 * held snapshot (without the check a pull, gkv_tensor_changed and
 * gkv_row_view loop; a read of a range fails another way), and for a
 * pull when the change left the file's mtime as it was (a write within
 * the tick: the watch sees it); writes are refused after. Each in a
 * child under alarm: a hang fails the test. */
/* A child of test_guard_held_loop: read kind h. Exits 3 at set-up, 4
 * when the read did not fail GKV_ECORRUPT, 5 when its message does not
 * name the page, 6 when a write was accepted after. */
static void
held_loop_child(struct fx *f, int h)
{
    uint64_t id = 5, mark[2] = {0}, leaf;
    float got[4];
    const void *view;
    unsigned char *img;
    size_t len;
    uint16_t hdr[2];             /* mp_flags, mp_lower */
    char want[64];
    gkv_store *s;
    gkv_txn *tx;
    gkv_err rc;

    if (gkv_store_open(&s, f->st, GKV_GUARD, NULL) != GKV_OK ||
        gkv_txn_begin(s, &tx) != GKV_OK)
        _exit(3);
    if (h == 4 && s->st_gfd < 0)
        _exit(CHILD_SKIP);          /* the time kept: only the watch sees */
    img = file_now(f, &len);
    leaf = first_leaf(img);
    if (!(img[leaf * PSIZE + 10] & 0x02))
        _exit(3);                   /* not a leaf (P_LEAF) */
    loop_header(img, leaf, hdr);
    free(img);
    if (h < 4) {
        write_in_place(f, hdr, 4, leaf * PSIZE + 10);
    } else {
        char p[4300];
        struct stat st;
        int fd;

        snprintf(p, sizeof p, "%s/data.mdb", f->st);
        if ((fd = open(p, O_WRONLY)) < 0 || fstat(fd, &st) != 0 ||
            pwrite(fd, hdr, 4, (off_t)(leaf * PSIZE + 10)) != 4 ||
            futimens(fd, (struct timespec[2]){{0, UTIME_OMIT},
                                              st.st_mtim}) != 0)
            _exit(3);
        close(fd);
    }
    if (h == 0 || h == 4)
        rc = gkv_tensor_pull(s, tx, "plain", &id, 1, got, sizeof got);
    else if (h == 1)
        rc = gkv_tensor_read(s, tx, "plain", 0, 4, got, sizeof got);
    else if (h == 2)
        rc = gkv_tensor_changed(tx, "plain", 0, 1, mark, NULL, NULL);
    else
        rc = gkv_row_view(tx, "plain", id, &view);
    if (rc != GKV_ECORRUPT)
        _exit(4);
    snprintf(want, sizeof want, "data page %llu", (unsigned long long)leaf);
    if (strstr(gkv_store_errmsg(s), want) == NULL)
        _exit(5);
    gkv_txn_end(tx);
    if (gkv_tensor_push(s, "plain", &id, 1, got, sizeof got, NULL) !=
            GKV_ECORRUPT)
        _exit(6);
    gkv_store_close(s);
}

static void
test_guard_held_loop(void **state)
{
    for (int h = 0; h < 5; h++)
        in_child(*state, held_loop_child, h, "a read through a snapshot "
                 "held across a page LMDB loops on");
}

static void
bad_kept_child(struct fx *f, int unused)
{
    uint64_t id = 2399, leaf;
    float row[4] = {9, 8, 7, 6}, got[16];
    unsigned char *img0, *img1;
    uint16_t hdr[2];
    size_t len;
    gkv_store *s;
    gkv_txn *tx;

    if (gkv_store_open(&s, f->st, GKV_GUARD, NULL) != GKV_OK ||
        gkv_txn_begin(s, &tx) != GKV_OK)
        _exit(3);
    img0 = file_now(f, &len);
    if (gkv_tensor_push(s, "plain", &id, 1, row, sizeof row, NULL) != GKV_OK)
        _exit(3);
    img1 = file_now(f, &len);
    if ((leaf = leaf_rewritten(img0, img1)) == 0)
        _exit(3);
    loop_header(img1, leaf, hdr);
    write_in_place(f, hdr, 4, leaf * PSIZE + 10);
    if (gkv_tensor_pull(s, NULL, "plain", &id, 1, got, 16) != GKV_ECORRUPT)
        _exit(4);                   /* the new state walked: damaged */
    hdr[1] = 4;                     /* written again: the watch sees it */
    write_in_place(f, hdr, 4, leaf * PSIZE + 10);
    if (gkv_tensor_read(s, tx, "plain", 0, 4, got, 64) != GKV_ECORRUPT)
        _exit(5);                   /* the older snapshot: refused */
    if (gkv_tensor_pull(s, NULL, "plain", &id, 1, got, 16) != GKV_ECORRUPT)
        _exit(6);                   /* and the damaged state still is */
    gkv_txn_end(tx);
    gkv_store_close(s);
    free(img0);
    free(img1);
}

/* A state found damaged stays so: a snapshot held from before the commit
 * whose state was walked and found damaged (a leaf that commit wrote,
 * made to loop LMDB), then data.mdb written again. The read through the
 * older snapshot is refused, and neither walks nor records its own
 * (whole) tree: a record of it would have cleared the damaged state, and
 * the next fresh read would have met the page and looped. */
static void
test_guard_held_bad_kept(void **state)
{
    in_child(*state, bad_kept_child, 0,
             "a read through an older held snapshot of a damaged state");
}

static void
held_newer_child(struct fx *f, int unused)
{
    uint64_t id = 5, id2 = 2399;
    float row[4] = {9, 8, 7, 6}, got[4];
    unsigned char *img;
    uint16_t hdr[2];
    size_t len;
    struct stat st;
    struct timespec ts[2] = {{0, UTIME_OMIT}};
    char p[4300];
    gkv_store *s, *o;
    gkv_txn *tx;
    int fd;

    snprintf(p, sizeof p, "%s/data.mdb", f->st);
    if (gkv_store_open(&s, f->st, GKV_GUARD, NULL) != GKV_OK ||
        stat(p, &st) != 0)
        _exit(3);
    if (s->st_gfd < 0)
        _exit(CHILD_SKIP);          /* the record needs the watch */
    ts[1] = st.st_mtim;
    /* another process's commit, its time put back: this handle's next
     * begin takes it without a record */
    {
        pid_t g = fork();
        int wst;

        if (g == 0) {
            alarm(CASE_S);          /* not inherited across fork() */
            if (gkv_store_open(&o, f->st, 0, NULL) != GKV_OK ||
                gkv_tensor_push(o, "plain", &id2, 1, row, sizeof row,
                                NULL) != GKV_OK)
                _exit(3);
            gkv_store_close(o);
            _exit(0);
        }
        if (g < 0 || waitpid(g, &wst, 0) != g || wst != 0)
            _exit(3);
    }
    if ((fd = open(p, O_WRONLY)) < 0 || futimens(fd, ts) != 0)
        _exit(3);
    close(fd);
    if (gkv_txn_begin(s, &tx) != GKV_OK)
        _exit(3);
    img = file_now(f, &len);
    loop_header(img, first_leaf(img), hdr);
    write_in_place(f, hdr, 4, first_leaf(img) * PSIZE + 10);
    free(img);
    if (gkv_tensor_pull(s, tx, "plain", &id, 1, got, sizeof got) !=
            GKV_ECORRUPT)
        _exit(4);
    gkv_txn_end(tx);
    gkv_store_close(s);
}

/* A held snapshot newer than the state last recorded: another process's
 * commit landed with data.mdb's time put back (a commit within the
 * timestamp tick), so the snapshot's begin took it without a record.
 * gkv_txn_begin records it (the watch saw the commit), so a page damaged
 * after it (one LMDB loops on) is walked before the next read through
 * the snapshot, not taken for that commit. */
static void
test_guard_held_newer(void **state)
{
    in_child(*state, held_newer_child, 0,
             "a read through a snapshot newer than the state recorded");
}

/* A thread of unsure_child: a pull through a snapshot it holds (begun
 * before the test's write), or a push. */
struct unsure_arg {
    gkv_store *s;
    int push;
    int ready, go, done;            /* __atomic */
    pid_t tid;
    gkv_err rc;
};

/* Whether thread tid of this process waits in futex(2) now (a mutex): 1,
 * 0, or -1 when /proc does not say. */
static int
in_futex(pid_t tid)
{
    char p[64], b[64];
    long nr = -1;
    FILE *fp;

    snprintf(p, sizeof p, "/proc/self/task/%d/syscall", (int)tid);
    if ((fp = fopen(p, "r")) == NULL)
        return -1;
    if (fgets(b, sizeof b, fp) != NULL && b[0] >= '0' && b[0] <= '9')
        nr = strtol(b, NULL, 10);
    fclose(fp);
    return nr < 0 ? -1 : nr == SYS_futex;
}

static void *
unsure_thread(void *p)
{
    struct unsure_arg *a = p;
    uint64_t id = 5;
    float row[4] = {1, 2, 3, 4}, got[4];
    gkv_txn *tx = NULL;

    a->tid = (pid_t)syscall(SYS_gettid);
    a->rc = a->push ? GKV_OK : gkv_txn_begin(a->s, &tx);
    __atomic_store_n(&a->ready, 1, __ATOMIC_RELEASE);
    while (a->rc == GKV_OK && !__atomic_load_n(&a->go, __ATOMIC_ACQUIRE))
        usleep(1000);
    if (a->rc == GKV_OK)
        a->rc = a->push ? gkv_tensor_push(a->s, "plain", &id, 1, row,
                                          sizeof row, NULL)
                        : gkv_tensor_pull(a->s, tx, "plain", &id, 1, got,
                                          sizeof got);
    gkv_txn_end(tx);
    __atomic_store_n(&a->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void
unsure_child(struct fx *f, int unused)
{
    struct unsure_arg a[2] = {{.push = 0}, {.push = 1}};
    pthread_t th[2];
    MDB_envinfo e0, e1;
    unsigned char *img;
    char ev[4096];
    size_t len;
    gkv_store *s;

    if (gkv_store_open(&s, f->st, GKV_GUARD, NULL) != GKV_OK)
        _exit(3);
    if (s->st_gfd < 0)
        _exit(CHILD_SKIP);
    for (int i = 0; i < 2; i++) {
        a[i].s = s;
        if (pthread_create(&th[i], NULL, unsure_thread, &a[i]) != 0)
            _exit(3);
    }
    while (!__atomic_load_n(&a[0].ready, __ATOMIC_ACQUIRE) ||
           !__atomic_load_n(&a[1].ready, __ATOMIC_ACQUIRE))
        usleep(1000);
    if (a[0].rc != GKV_OK)
        _exit(3);
    /* page 2 written again with its own bytes (the watch holds an event),
     * then, as a walk does before it walks: st_gmu held, st_gunsure set,
     * the watch drained */
    img = file_now(f, &len);
    write_in_place(f, img + 2 * PSIZE, PSIZE, 2 * PSIZE);
    free(img);
    pthread_mutex_lock(&s->st_gmu);
    __atomic_store_n(&s->st_gunsure, 1, __ATOMIC_RELEASE);
    while (read(s->st_gfd, ev, sizeof ev) > 0)
        ;
    if (mdb_env_info(s->st_env, &e0) != 0)
        _exit(3);
    for (int i = 0; i < 2; i++)
        __atomic_store_n(&a[i].go, 1, __ATOMIC_RELEASE);
    /* until both wait on a mutex (st_gmu), or one got past: then a short
     * while more (a machine under load may take long to get there; where
     * /proc does not say, a fixed 300 ms) */
    for (int k = 0; k < 10000; k++) {
        int w0 = in_futex(a[0].tid), w1 = in_futex(a[1].tid);

        if (w0 < 0 || w1 < 0) {
            usleep(300000);
            break;
        }
        if ((w0 && w1) || __atomic_load_n(&a[0].done, __ATOMIC_ACQUIRE) ||
            (mdb_env_info(s->st_env, &e1) == 0 &&
             e1.me_last_txnid != e0.me_last_txnid))
            break;
        usleep(1000);
    }
    usleep(50000);
    /* the pull has not returned; the push has not committed (it would
     * then wait for st_gmu to record its state: not returning tells
     * nothing) */
    if (__atomic_load_n(&a[0].done, __ATOMIC_ACQUIRE))
        _exit(4);
    if (mdb_env_info(s->st_env, &e1) != 0 ||
        e1.me_last_txnid != e0.me_last_txnid)
        _exit(5);
    pthread_mutex_unlock(&s->st_gmu);
    for (int i = 0; i < 2; i++)
        if (pthread_join(th[i], NULL) != 0 || a[i].rc != GKV_OK)
            _exit(6 + i);
    if (__atomic_load_n(&s->st_gunsure, __ATOMIC_ACQUIRE) != 0)
        _exit(8);                   /* the check recorded a state */
    gkv_store_close(s);
}

/* While the watch has been drained and no state recorded since
 * (st_gunsure: another thread's walk under way, as held here by the
 * test), a read through a held snapshot and a write transaction do not
 * pass the fast path over the drained events: they wait for the check
 * (st_gmu), and go on, whole, once a state is recorded. (Exit 4: the
 * held pull did not wait; 5: the push did not.) */
static void
test_guard_unsure_waits(void **state)
{
    in_child(*state, unsure_child, 0,
             "reads and writes while the watch is drained and unrecorded");
}

/* Starts gkv-server 'sp' on f->st at a free loopback port (config file
 * 'cfg', log 'log', port candidates from 'salt'); its address to addr. */
static void
server_start(struct fx *f, struct gkvt_proc *procs, int *np, char *sp,
             const char *cfg, const char *log, unsigned salt, char *addr,
             size_t addr_len)
{
    int port = 0;

    for (int k = 0; port == 0 && k < 20; k++) {
        char *srv[] = {sp, "--store", f->st, "--ip-config", (char *)cfg,
                       "--machine", "0", NULL};
        struct gkvt_proc *pr;
        FILE *fp = fopen(cfg, "w");
        int cand = gkvt_port_candidate((unsigned)k + salt, 1, 1);

        assert_non_null(fp);
        fprintf(fp, "127.0.0.1 %d\n", cand);
        fclose(fp);
        pr = gkvt_spawn(procs, np, 4, f->dir, srv, log);
        if (gkvt_server_listening(pr))
            port = cand;
    }
    assert_true(port != 0);
    snprintf(addr, addr_len, "127.0.0.1:%d", port);
}

/* The same under a real gkv-server: data.mdb cut short while it serves
 * faulted the server (SIGBUS) at the next pull. Now the request fails
 * with an error reply (kvctl --server exits 1 naming the damage), the
 * server stays up, and a put is refused too. */
static void
test_server_survives_cut_short(void **state)
{
    struct fx *f = *state;
    struct dcase whole = {D_XOR, 0, 1, 0, 0};
    struct gkvt_proc procs[4];
    int np = 0;
    char cfg[4300], lock[4300], p[4300], addr[64];
    char *sp = strdup(gkvt_prog("gkv-server"));
    char *kp = strdup(gkvt_prog("kvctl"));
    char *out = NULL, *err = NULL;

    snprintf(cfg, sizeof cfg, "%s/ip2.cfg", f->dir);
    snprintf(lock, sizeof lock, "%s/lock.mdb", f->st);
    snprintf(p, sizeof p, "%s/data.mdb", f->st);
    unlink(lock);
    assert_int_equal(restore(f, &whole), 0);
    server_start(f, procs, &np, sp, cfg, "server.log", 71u, addr,
                 sizeof addr);
    {
        char *get[] = {kp, "--server", addr, "get", "plain", "5", NULL};
        char *put[] = {kp, "--server", addr, "put", "plain", "5", "1", "2",
                       "3", "4", NULL};

        assert_int_equal(gkvt_run(get, NULL, 0, &out, &err, 30), 0);
        free(out);
        free(err);
        assert_int_equal(truncate(p, (off_t)(f->img_len / 3)), 0);
        for (int k = 0; k < 2; k++) {
            if (gkvt_run(k ? put : get, NULL, 0, &out, &err, 30) != 1 ||
                strstr(err, "damaged") == NULL)
                fail_msg("kvctl --server %s on a store cut short: %s",
                         k ? "put" : "get", err);
            free(out);
            free(err);
        }
        assert_true(gkvt_proc_alive(&procs[np - 1]));
    }
    assert_int_equal(gkvt_proc_reap_all(procs, np), 0);
    free(sp);
    free(kp);
}

/* Bytes overwritten in place under a running gkv-server (it opens its
 * store with GKV_GUARD), as a stray dd would: a header page's byte (the
 * change that made LMDB abort the server at the next pull) and, with a
 * new server, the data tree's root page zeroed. The next requests fail
 * with an error reply, kvctl --server exits 1 printing it, the server
 * stays up, and puts are refused ("damaged"). (LMDB itself finds the
 * zeroed page on a read: "Located page was wrong type"; the guard, the
 * changed header.) */
static void
test_server_survives_overwrite(void **state)
{
    struct fx *f = *state;
    struct dcase whole = {D_XOR, 0, 1, 0, 0};
    char *sp = strdup(gkvt_prog("gkv-server"));
    char *kp = strdup(gkvt_prog("kvctl"));
    char cfg[4300], lock[4300], p[4300], addr[64];

    snprintf(cfg, sizeof cfg, "%s/ip3.cfg", f->dir);
    snprintf(lock, sizeof lock, "%s/lock.mdb", f->st);
    snprintf(p, sizeof p, "%s/data.mdb", f->st);
    for (int kind = 0; kind < 2; kind++) {
        struct gkvt_proc procs[4];
        int np = 0, fd;
        char *out = NULL, *err = NULL;
        char *get[] = {kp, "--server", addr, "get", "plain", "5", NULL};
        char *put[] = {kp, "--server", addr, "put", "plain", "5", "1", "2",
                       "3", "4", NULL};

        unlink(lock);
        assert_int_equal(restore(f, &whole), 0);
        server_start(f, procs, &np, sp, cfg, kind ? "server-tree.log" :
                     "server-header.log", 91u + 20u * (unsigned)kind, addr,
                     sizeof addr);
        if (gkvt_run(get, NULL, 0, &out, &err, 30) != 0)
            fail_msg("kvctl --server get before the damage: %s", err);
        free(out);
        free(err);
        fd = open(p, O_RDWR);
        assert_true(fd >= 0);
        if (kind == 0) {
            unsigned char b;

            assert_int_equal(pread(fd, &b, 1, PSIZE + 92), 1);
            b ^= 0x0c;
            assert_int_equal(pwrite(fd, &b, 1, PSIZE + 92), 1);
        } else {
            unsigned char *now = malloc(f->img_len * 2), zero[PSIZE] = {0};
            uint64_t pg;

            assert_true(pread(fd, now, f->img_len * 2, 0) >=
                        (ssize_t)f->img_len);
            pg = gkvt_mdb_db_root(now, "data");
            assert_int_equal(pwrite(fd, zero, PSIZE, (off_t)(pg * PSIZE)),
                             PSIZE);
            free(now);
        }
        close(fd);
        for (int k = 0; k < 3; k++) {
            int r = gkvt_run(k == 1 ? put : get, NULL, 0, &out, &err, 30);

            if (r != 1 || err == NULL || *err == '\0' ||
                ((kind == 0 || k == 1) && strstr(err, "damaged") == NULL))
                fail_msg("kvctl --server %s after %s overwritten: exit %d: "
                         "%s", k == 1 ? "put" : "get", kind ? "the data "
                         "tree's root page" : "a header page byte", r,
                         err != NULL ? err : "");
            free(out);
            free(err);
        }
        assert_true(gkvt_proc_alive(&procs[np - 1]));
        assert_int_equal(gkvt_proc_reap_all(procs, np), 0);
    }
    free(sp);
    free(kp);
}


/* ---- the guard's own rules, one at a time (GKV_GUARD) ------------------ */

/* data.mdb of f->st now, whole, in *len bytes (malloc'd). */
static unsigned char *
file_now(const struct fx *f, size_t *len)
{
    char p[4300];

    snprintf(p, sizeof p, "%s/data.mdb", f->st);
    return gkvt_read_file(p, len);
}

/* Writes len bytes at off of f->st's data.mdb in place (no truncation),
 * as a stray dd would. A file system whose timestamps tick coarsely may
 * leave the modification time as it was (a write within the tick of the
 * last): then it is set one millisecond on, as a write a moment later
 * would have left it, so that the reads' check sees the change whatever
 * the kernel's clock. */
static void
write_in_place(const struct fx *f, const void *b, size_t len, uint64_t off)
{
    char p[4300];
    struct stat before, after;
    int fd;

    snprintf(p, sizeof p, "%s/data.mdb", f->st);
    fd = open(p, O_WRONLY);
    assert_true(fd >= 0 && fstat(fd, &before) == 0);
    assert_int_equal(pwrite(fd, b, len, (off_t)off), (ssize_t)len);
    assert_int_equal(fstat(fd, &after), 0);
    if (after.st_mtim.tv_sec == before.st_mtim.tv_sec &&
        after.st_mtim.tv_nsec == before.st_mtim.tv_nsec) {
        struct timespec ts[2] = {{0, UTIME_OMIT}, after.st_mtim};

        ts[1].tv_nsec += 1000000;
        if (ts[1].tv_nsec >= 1000000000) {
            ts[1].tv_sec++;
            ts[1].tv_nsec -= 1000000000;
        }
        assert_int_equal(futimens(fd, ts), 0);
    }
    close(fd);
}

/* f->st as built, whole, with no lock file left by an earlier case. */
static void
restore_whole(struct fx *f)
{
    static const struct dcase whole = {D_XOR, 0, 1, 0, 0};
    char lock[4300];

    snprintf(lock, sizeof lock, "%s/lock.mdb", f->st);
    unlink(lock);
    assert_int_equal(restore(f, &whole), 0);
}

/* Begins *tx on s (open with GKV_GUARD), then commits a push of the last
 * row of "plain" through s: the snapshot is then older than the state the
 * guard last checked, which it neither walks nor records for such a
 * snapshot (only the newest state counts: kv__guard_held). Damage written
 * after this meets LMDB itself, and the fault guard. The data tree's root
 * in the snapshot (its pages stay in the file while it is held); 0 when
 * a call failed (no assertion: children call it too). */
static uint64_t
held_behind(const struct fx *f, gkv_store *s, gkv_txn **tx)
{
    uint64_t id = 2399, root;
    float row[4] = {9, 8, 7, 6};
    unsigned char *img;
    size_t len;

    if (gkv_txn_begin(s, tx) != GKV_OK)
        return 0;
    img = file_now(f, &len);
    root = gkvt_mdb_db_root(img, "data");
    free(img);
    return gkv_tensor_push(s, "plain", &id, 1, row, sizeof row, NULL) ==
           GKV_OK ? root : 0;
}

/* The data tree's first leaf page in image img (its root is a branch
 * page: build_store's 150 small chunks of "plain"): the root's first
 * child. */
static uint64_t
first_leaf(const unsigned char *img)
{
    uint64_t root = gkvt_mdb_db_root(img, "data");
    uint16_t off, lo, hi;

    memcpy(&off, img + root * PSIZE + 16, 2);
    memcpy(&lo, img + root * PSIZE + off, 2);
    memcpy(&hi, img + root * PSIZE + off + 2, 2);
    return lo | (uint64_t)hi << 16;
}

/* The header of page pg as 'hdr' (mp_flags, mp_lower) would make LMDB
 * 0.9 search it without end: P_LEAF2 set, mp_lower below the header
 * (img: data.mdb as it is, whose page is changed). */
static void
loop_header(const unsigned char *img, uint64_t pg, uint16_t hdr[2])
{
    memcpy(hdr, img + pg * PSIZE + 10, 4);
    hdr[0] |= 0x20;                 /* P_LEAF2 */
    hdr[1] = 2;
}

/* The child of the data tree's root that differs between images a and b
 * (the same root layout): the leaf a commit between them wrote anew; 0
 * when none differs. */
static uint64_t
leaf_rewritten(const unsigned char *a, const unsigned char *b)
{
    uint64_t ra = gkvt_mdb_db_root(a, "data");
    uint64_t rb = gkvt_mdb_db_root(b, "data");
    uint16_t la, lb;

    memcpy(&la, a + ra * PSIZE + 12, 2);
    memcpy(&lb, b + rb * PSIZE + 12, 2);
    for (unsigned i = 0; la == lb && i < (lb - 16u) / 2; i++) {
        uint16_t oa, ob, wa[2], wb[2];

        memcpy(&oa, a + ra * PSIZE + 16 + 2 * i, 2);
        memcpy(&ob, b + rb * PSIZE + 16 + 2 * i, 2);
        memcpy(wa, a + ra * PSIZE + oa, 4);
        memcpy(wb, b + rb * PSIZE + ob, 4);
        if (wa[0] != wb[0] || wa[1] != wb[1])
            return wb[0] | (uint64_t)wb[1] << 16;
    }
    return 0;
}

/* Sets F_DUPDATA (0x04) on every node of every leaf page under page pg
 * of image img: in a database without MDB_DUPSORT, LMDB then follows its
 * cursor's sub-cursor, NULL: a fault outside the map, in liblmdb's code.
 * The number of leaf pages changed. */
static int
dupdata_leaves(unsigned char *img, size_t len, uint64_t pg, int depth)
{
    unsigned char *p = img + pg * PSIZE;
    uint16_t lower, flags;
    int n = 0;

    assert_true((pg + 1) * PSIZE <= len && depth < 8);
    memcpy(&flags, p + 10, 2);
    memcpy(&lower, p + 12, 2);
    for (unsigned i = 0; i < (lower - 16u) / 2; i++) {
        uint16_t off, lo, hi, fl;

        memcpy(&off, p + 16 + 2 * i, 2);
        memcpy(&lo, p + off, 2);
        memcpy(&hi, p + off + 2, 2);
        memcpy(&fl, p + off + 4, 2);
        if (flags & 0x01) {             /* P_BRANCH: the child's number */
            n += dupdata_leaves(img, len, lo | (uint64_t)hi << 16 |
                                (uint64_t)fl << 32, depth + 1);
        } else {
            fl |= 0x04;
            memcpy(p + off + 4, &fl, 2);
        }
    }
    return n + !(flags & 0x01);
}

/* A child's outcome for test_guard_outside_map. */
enum { OM_OK = 0, OM_OPEN = 3, OM_RC, OM_NOT_CAUGHT, OM_WRITE };

/* In a child: opens f->st with GKV_GUARD, begins a snapshot held behind
 * a commit (held_behind: no walk before its reads), sets
 * F_DUPDATA on every leaf node of the data tree in place, then reads
 * through the held snapshot with call 'how' (0 gkv_tensor_read of every
 * tensor, 1 gkv_tensor_pull, 2 gkv_tensor_changed, 3 gkv_row_view).
 * Exits OM_OK when the reads failed with the guard's GKV_ECORRUPT and a
 * push is refused after. */
static void
outside_map_child(struct fx *f, int how)
{
    gkv_store *s;
    gkv_txn *tx;
    unsigned char *img;
    size_t len;
    uint64_t id = 5, root, mark[1 + 150] = {0};
    float row[4] = {1, 2, 3, 4};
    const void *view;
    gkv_err rc = GKV_OK;

    signal(SIGSEGV, SIG_DFL);       /* not cmocka's: a program's */
    signal(SIGBUS, SIG_DFL);
    if (gkv_store_open(&s, f->st, GKV_GUARD, NULL) != GKV_OK ||
        gkv_store_prefault(s) != GKV_OK ||
        (root = held_behind(f, s, &tx)) == 0)
        _exit(OM_OPEN);
    img = file_now(f, &len);
    if (dupdata_leaves(img, len, root, 0) < 2)
        _exit(OM_OPEN);
    write_in_place(f, img, len, 0);
    free(img);
    for (size_t i = 0; i < f->nrefs && rc == GKV_OK; i++) {
        const struct ref *r = &f->refs[i];
        size_t n = (size_t)(r->hi - r->lo) * r->row_bytes;
        unsigned char *rb = malloc(n);

        if (how == 0)
            rc = gkv_tensor_read(s, tx, r->name, r->lo, r->hi, rb, n);
        else if (how == 1)
            rc = gkv_tensor_pull(s, tx, r->name, &r->lo, 1, rb,
                                 r->row_bytes);
        else if (how == 2)
            rc = gkv_tensor_changed(tx, "plain", 0, 150, mark, NULL, NULL);
        else
            rc = gkv_row_view(tx, r->name, r->lo, &view);
        free(rb);
    }
    if (rc != GKV_ECORRUPT)
        _exit(OM_RC);
    if (strstr(gkv_store_errmsg(s), "in LMDB at address") == NULL ||
        s->st_gcaught == 0)
        _exit(OM_NOT_CAUGHT);
    {
        /* the handler knew liblmdb's code (a shared library here) */
        uintptr_t lo, hi;

        if (!kv__guard_lmdb_code(&lo, &hi) ||
            (uintptr_t)(void *)mdb_txn_begin - lo >= hi - lo)
            _exit(OM_NOT_CAUGHT);
    }
    gkv_txn_end(tx);
    if (gkv_tensor_push(s, "plain", &id, 1, row, sizeof row, NULL) !=
            GKV_ECORRUPT)
        _exit(OM_WRITE);
    gkv_store_close(s);
    _exit(OM_OK);
}

/* Damage met through a snapshot held across it, where LMDB follows a
 * NULL pointer (a leaf node made to claim duplicates in a database that
 * has none): the fault lies outside the map, in liblmdb's code. The
 * handler catches it (the call fails with GKV_ECORRUPT naming "LMDB" and
 * an address), the process lives, and writes are refused: for a read, a
 * pull, gkv_tensor_changed and gkv_row_view alike. Each in a child that
 * sets the default actions before its first guarded open (so a handler
 * that passes the fault on kills it): this process must not have opened
 * a store with GKV_GUARD yet (the handler is installed once). */
static void
test_guard_outside_map(void **state)
{
    struct fx *f = *state;
    static const char *const how[] = {"read", "pull", "tensor_changed",
                                      "row_view"};

    if (!KV_GUARD_SIGNALS) {
        skip();                 /* ThreadSanitizer: no fault handler */
        return;
    }
    for (int h = 0; h < 4; h++) {
        char what[128];

        snprintf(what, sizeof what, "%s through a held snapshot of a "
                 "damaged store", how[h]);
        in_child(f, outside_map_child, h, what);
    }
}

/* A commit by another process (kvctl put: its own handle) changes
 * data.mdb under a guarded handle. The next read and write see newer
 * commits with sound header pages and walk nothing (st_gwalks, the
 * guard's count of structure walks, stays); the handle's own commits
 * neither. The rows read are the new ones. */
static void
test_guard_foreign_commit_no_walk(void **state)
{
    struct fx *f = *state;
    char *kp = strdup(gkvt_prog("kvctl"));
    uint64_t id = 5, walks;
    float row[4] = {1, 2, 3, 4}, got[4];
    gkv_store *s;

    restore_whole(f);
    GKVT_OK(gkv_store_open(&s, f->st, GKV_GUARD, NULL));
    GKVT_OK(gkv_tensor_pull(s, NULL, "plain", &id, 1, got, sizeof got));
    walks = s->st_gwalks;
    for (int k = 0; k < 4; k++) {
        char v[4][16];
        char *put[] = {kp, f->st, "put", "plain", "5", v[0], v[1], v[2], v[3],
                       NULL};
        char *out = NULL, *err = NULL;
        uint64_t commits = s->st_gcommits;

        for (int j = 0; j < 4; j++)
            snprintf(v[j], sizeof v[j], "%d", 10 * k + j);
        if (gkvt_run(put, NULL, 0, &out, &err, 30) != 0)
            fail_msg("kvctl put: %s", err);
        free(out);
        free(err);
        GKVT_OK(gkv_tensor_pull(s, NULL, "plain", &id, 1, got, sizeof got));
        for (int j = 0; j < 4; j++)
            assert_true(got[j] == (float)(10 * k + j));
        assert_true(s->st_gcommits > commits);
        /* a write of this handle, after the foreign commit, and a read
         * after it: no walk either */
        GKVT_OK(gkv_tensor_push(s, "plain", &id, 1, row, sizeof row, NULL));
        GKVT_OK(gkv_tensor_pull(s, NULL, "plain", &id, 1, got, sizeof got));
        assert_memory_equal(got, row, sizeof row);
    }
    if (s->st_gwalks != walks)
        fail_msg("%llu structure walks after commits by another process "
                 "and by this handle (none wanted)",
                 (unsigned long long)(s->st_gwalks - walks));
    GKVT_OK(gkv_store_verify(s, NULL, NULL));
    gkv_store_close(s);
    free(kp);
}

/* A page overwritten in place with no commit (a leaf page of the data
 * tree made P_DIRTY) under a guarded handle: the next read walks the
 * structure once and fails naming the page; reads that begin on the
 * same state fail again with the same message without a walk (intact
 * rows too: a state known damaged serves no reads). When the file changes
 * again (the operator writes it back whole) the next read walks once more
 * and reads work; writes stay refused until a reopen. */
static void
test_guard_damage_not_rewalked(void **state)
{
    struct fx *f = *state;
    char want[64], first[640];
    uint64_t id = 5, leaf, walks;
    uint16_t fl;
    float row[4] = {1, 2, 3, 4}, got[4];
    unsigned char *img;
    size_t len;
    gkv_store *s;

    restore_whole(f);
    GKVT_OK(gkv_store_open(&s, f->st, GKV_GUARD, NULL));
    GKVT_OK(gkv_tensor_pull(s, NULL, "plain", &id, 1, got, sizeof got));
    walks = s->st_gwalks;
    img = file_now(f, &len);
    leaf = first_leaf(img);
    memcpy(&fl, img + leaf * PSIZE + 10, 2);
    assert_true(fl & 0x02);                       /* P_LEAF */
    fl |= 0x10;                                   /* P_DIRTY */
    write_in_place(f, &fl, 2, leaf * PSIZE + 10);
    assert_int_equal(gkv_tensor_pull(s, NULL, "plain", &id, 1, got,
                                     sizeof got), GKV_ECORRUPT);
    snprintf(want, sizeof want, "data page %llu", (unsigned long long)leaf);
    if (strstr(gkv_store_errmsg(s), want) == NULL)
        fail_msg("message: %s", gkv_store_errmsg(s));
    snprintf(first, sizeof first, "%s", gkv_store_errmsg(s));
    assert_int_equal(s->st_gwalks, walks + 1);
    for (int k = 0; k < 5; k++) {
        /* "hot" lies elsewhere in the tree: refused all the same */
        float hb[16];
        uint64_t hid = 100;

        assert_int_equal(gkv_tensor_pull(s, NULL, k % 2 ? "hot" : "plain",
                                         k % 2 ? &hid : &id, 1,
                                         k % 2 ? (void *)hb : (void *)got,
                                         k % 2 ? sizeof hb : sizeof got),
                         GKV_ECORRUPT);
        assert_string_equal(gkv_store_errmsg(s), first);
    }
    if (s->st_gwalks != walks + 1)
        fail_msg("the same damaged state walked %llu times",
                 (unsigned long long)(s->st_gwalks - walks));
    assert_int_equal(s->st_grefused, 5);
    /* put back whole: one walk, reads work, writes wait for a reopen */
    write_in_place(f, img, len, 0);
    free(img);
    GKVT_OK(gkv_tensor_pull(s, NULL, "plain", &id, 1, got, sizeof got));
    assert_int_equal(s->st_gwalks, walks + 2);
    GKVT_OK(gkv_tensor_pull(s, NULL, "plain", &id, 1, got, sizeof got));
    assert_int_equal(s->st_gwalks, walks + 2);
    assert_int_equal(gkv_tensor_push(s, "plain", &id, 1, row, sizeof row,
                                     NULL), GKV_ECORRUPT);
    gkv_store_close(s);
}

/* The guard's thread-local is initial-exec: the handler (and every guard
 * set) reaches it without __tls_get_addr, which may call malloc in a
 * signal handler. Checked in the shared library's code: no call to
 * __tls_get_addr in the handler's functions. (Skipped without objdump or
 * a libgkv.so.) */
static void
test_guard_tls_initial_exec(void **state)
{
    const char *b = getenv("GKVT_BUILD");
    char cmd[4400], line[512], fn[256] = "";
    int inside = 0, calls = 0, seen = 0;
    FILE *p;

    (void)state;
    snprintf(cmd, sizeof cmd, "objdump -d --no-show-raw-insn '%s/libgkv.so' "
             "2>/dev/null", b != NULL ? b : "build");
    if ((p = popen(cmd, "r")) == NULL) {
        skip();
        return;
    }
    while (fgets(line, sizeof line, p) != NULL) {
        char name[256];

        if (sscanf(line, "%*x <%255[^>]>:", name) == 1) {
            inside = strcmp(name, "on_fault") == 0 ||
                     strcmp(name, "on_assert") == 0 ||
                     strcmp(name, "kv__guard_caught") == 0 ||
                     strcmp(name, "gkv_tensor_pull") == 0;
            seen += inside;
            if (inside)
                snprintf(fn, sizeof fn, "%s", name);
        } else if (inside && strstr(line, "__tls_get_addr") != NULL) {
            calls++;
            print_error("%s calls __tls_get_addr\n", fn);
        }
    }
    pclose(p);
    if (seen == 0) {
        skip();
        return;
    }
    assert_int_equal(seen, 4);
    assert_int_equal(calls, 0);
}

/* A handler chained to SIG_IGN: a SIGSEGV sent to the process (kill) is
 * ignored as it was before the guard (not raised again under SIG_DFL).
 * Runs in a child that sets SIG_IGN before its first guarded open (the
 * handler records the previous one then), so it must run before this
 * process opens a store with GKV_GUARD itself. */
static void
test_guard_chain_ignored(void **state)
{
    struct fx *f = *state;
    pid_t pid;
    int wst;

    if (!KV_GUARD_SIGNALS) {
        skip();                 /* ThreadSanitizer: no fault handler */
        return;
    }
    restore_whole(f);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        gkv_store *s;

        alarm(CASE_S);
        signal(SIGSEGV, SIG_IGN);
        if (gkv_store_open(&s, f->st, GKV_GUARD, NULL) != GKV_OK)
            _exit(3);
        kill(getpid(), SIGSEGV);
        gkv_store_close(s);
        _exit(0);
    }
    assert_int_equal(waitpid(pid, &wst, 0), pid);
    if (!WIFEXITED(wst) || WEXITSTATUS(wst) != 0)
        fail_msg("an ignored SIGSEGV sent under a guarded handle: status "
                 "0x%x", wst);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        /* first, before this process installs the guard's handler (see
         * each) */
        cmocka_unit_test(test_guard_chain_ignored),
        cmocka_unit_test(test_guard_outside_map),
        cmocka_unit_test(test_flip_each_byte),
        cmocka_unit_test(test_header_renumbered),
        cmocka_unit_test(test_multi_byte_and_truncation),
        cmocka_unit_test(test_server_and_kvctl_refuse),
        cmocka_unit_test(test_damaged_while_open),
        cmocka_unit_test(test_damaged_in_place),
        cmocka_unit_test(test_guard_catches),
        cmocka_unit_test(test_guard_held_loop),
        cmocka_unit_test(test_guard_held_bad_kept),
        cmocka_unit_test(test_guard_held_newer),
        cmocka_unit_test(test_guard_unsure_waits),
        cmocka_unit_test(test_guard_foreign_commit_no_walk),
        cmocka_unit_test(test_guard_damage_not_rewalked),
        cmocka_unit_test(test_guard_tls_initial_exec),
        cmocka_unit_test(test_server_survives_cut_short),
        cmocka_unit_test(test_server_survives_overwrite),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
