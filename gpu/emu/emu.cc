/* emu.cc - the CPU stand-in for the CUDA runtime declared in
 * gpu/emu/cuda_runtime.h: device memory, copies, streams and kernel
 * launches, for the emulated-GPU test build only.
 *
 * Memory. Every allocation is its own mapping with an inaccessible guard
 * page on each side; the bytes end at most 255 bytes before the upper
 * guard (CUDA's 256-byte alignment), so a kernel that runs past a buffer
 * faults. The slack round the bytes holds a pattern checked after every
 * launch: a kernel that wrote into it, just past or before its buffer,
 * aborts the program with the allocation named. Device allocations are
 * PROT_NONE except while a launch, copy or memset runs, so host code that
 * reads a device pointer faults too. New memory holds 0xbe bytes, not
 * the zeros of a fresh mapping, since neither cudaMalloc nor
 * cudaHostAlloc clears it: code that reads what it never wrote gets
 * results that differ. Freed memory is unmapped: a later use faults.
 * Pinned host memory (cudaHostAlloc) is always readable; a mapped one is
 * its own device pointer, as under CUDA's unified addressing.
 *
 * Launches. One runtime call at a time (emu_mu). The blocks run one after
 * another, and the threads of a block one after another: as plain calls,
 * or for a launch that may sync as coroutines (ucontext) on stacks kept
 * for the process: the scheduler resumes each runnable thread in turn
 * until it returns or reaches __syncthreads(), and releases the barrier
 * when every live thread is there. By default every launch runs
 * coroutines and each atomic first yields to the next thread of the
 * block, so threads interleave at every atomic (a thread that read a slot
 * empty may find it taken when its atomicCAS runs, as on a GPU): the paths
 * taken only when atomics collide run too. GKV_GPU_EMU_INTERLEAVE=0 turns
 * that off (plain calls, about a third faster). The order is
 * scrambled, blocks and threads alike, differently at every launch
 * (GKV_GPU_EMU_SEED, default 1; GKV_GPU_EMU_ORDER=forward runs them in
 * index order): a kernel whose result depends on which thread runs first,
 * as a racy one's does on a GPU, gives results that differ from the CPU
 * reference.
 */
#include "cuda_runtime.h"
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define EMU_ASAN 1
#endif

uint3 threadIdx, blockIdx;
dim3 blockDim, gridDim;

#define EMU_ALIGN   256
#define EMU_CANARY  0xa5
#define EMU_FRESH   0xbe        /* new memory: CUDA does not zero it */
#define EMU_MAX_THREADS 1024
/* Stacks of emulated threads. ASan clears the shadow of the whole stack
 * at every swapcontext(), so a small one keeps its switches cheap; the
 * kernels' frames are small. */
#ifdef EMU_ASAN
#define EMU_STACK   (64u << 10)
#else
#define EMU_STACK   (128u << 10)
#endif

static pthread_mutex_t emu_mu = PTHREAD_MUTEX_INITIALIZER;
static thread_local cudaError_t last_err = cudaSuccess;
static thread_local int cur_dev = 0;

/* ---- errors and devices ------------------------------------------------ */

/* Ends the process with SIGABRT after a line on stderr: what a kernel did
 * wrong cannot be undone, and a test framework that catches the signal
 * (cmocka does) must not go on with the emulator's lock held. */
__attribute__((format(printf, 1, 2), noreturn)) static void
emu_die(const char *fmt, ...)
{
    va_list ap;

    fputs("gkv GPU emulator: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    signal(SIGABRT, SIG_DFL);
    abort();
}

/* A fault inside a launch (a kernel read or wrote a guard page, or memory
 * that is not there): one line, then the fault again without a handler. */
static void
on_fault(int sig, siginfo_t *si, void *uc)
{
    static const char m[] = "gkv GPU emulator: a kernel touched memory it "
                            "may not (past a device buffer, freed, or not "
                            "mapped)\n";
    (void)si;
    (void)uc;
    if (write(2, m, sizeof m - 1) < 0) {
        /* nothing more to say */
    }
    signal(sig, SIG_DFL);
}

static cudaError_t
fail(cudaError_t e)
{
    last_err = e;
    return e;
}

const char *
cudaGetErrorName(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    }
    return "cudaErrorUnknown";
}

const char *
cudaGetErrorString(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration:
        return "invalid configuration argument";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    }
    return "unknown error";
}

cudaError_t
cudaGetLastError(void)
{
    cudaError_t e = last_err;

    last_err = cudaSuccess;
    return e;
}

/* GKV_GPU_EMU_DEVICES (default 1) emulated devices, all alike. */
static int
ndevices(void)
{
    const char *s = getenv("GKV_GPU_EMU_DEVICES");
    int n = s != NULL ? atoi(s) : 1;

    return n < 0 ? 0 : n;
}

cudaError_t
cudaGetDeviceCount(int *n)
{
    *n = ndevices();
    return *n > 0 ? cudaSuccess : fail(cudaErrorNoDevice);
}

cudaError_t
cudaSetDevice(int d)
{
    if (d < 0 || d >= ndevices())
        return fail(cudaErrorInvalidDevice);
    cur_dev = d;
    return cudaSuccess;
}

cudaError_t
cudaGetDeviceProperties(cudaDeviceProp *p, int d)
{
    if (d < 0 || d >= ndevices())
        return fail(cudaErrorInvalidDevice);
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "gkv CPU emulation of a CUDA device");
    p->totalGlobalMem = (size_t)16 << 30;
    p->multiProcessorCount = 2;
    p->major = 9;
    return cudaSuccess;
}

cudaError_t
cudaDeviceGetAttribute(int *v, cudaDeviceAttr a, int d)
{
    if (d < 0 || d >= ndevices())
        return fail(cudaErrorInvalidDevice);
    if (a != cudaDevAttrMultiProcessorCount)
        return fail(cudaErrorInvalidValue);
    *v = 2;
    return cudaSuccess;
}

cudaError_t
cudaDeviceSynchronize(void)
{
    return cudaSuccess;                 /* every call ran to its end */
}

/* ---- memory ------------------------------------------------------------ */

enum { R_DEV, R_HOST };

struct region {
    char  *map;                         /* the mapping, guards included */
    size_t maplen;
    char  *p;                           /* what the caller got */
    size_t n;
    int    kind;
};

static struct region *reg;              /* under emu_mu */
static size_t nreg, capreg;
static size_t dev_bytes;                /* device bytes allocated */

static size_t
page(void)
{
    static size_t pg;

    if (pg == 0)
        pg = (size_t)sysconf(_SC_PAGESIZE);
    return pg;
}

/* the inner pages of r: PROT_NONE ('on' 0) or read-write */
static void
reg_open(const struct region *r, int on)
{
    if (r->kind != R_DEV)
        return;
    if (mprotect(r->map + page(), r->maplen - 2 * page(),
                 on ? PROT_READ | PROT_WRITE : PROT_NONE) != 0)
        emu_die("mprotect: %s", strerror(errno));
}

static void
dev_open_all(int on)
{
    for (size_t i = 0; i < nreg; i++)
        reg_open(&reg[i], on);
}

/* The slack of r before and after its bytes (readable: r open). */
static void
slack(const struct region *r, unsigned char **lo, size_t *nlo,
      unsigned char **hi, size_t *nhi)
{
    *lo = (unsigned char *)r->map + page();
    *nlo = (size_t)((unsigned char *)r->p - *lo);
    *hi = (unsigned char *)r->p + r->n;
    *nhi = (size_t)((unsigned char *)r->map + r->maplen - page() - *hi);
}

/* Aborts, naming the allocation, when a launch wrote into any slack (the
 * device regions open). */
static void
canaries_check(void)
{
    for (size_t i = 0; i < nreg; i++) {
        unsigned char *lo, *hi;
        size_t nlo, nhi, j;
        slack(&reg[i], &lo, &nlo, &hi, &nhi);
        for (j = 0; j < nlo && lo[j] == EMU_CANARY; j++)
            ;
        if (j < nlo)
            emu_die("a kernel wrote up to %zu bytes before the %zu bytes "
                    "allocated at %p", nlo - j, reg[i].n, (void *)reg[i].p);
        for (j = nhi; j > 0 && hi[j - 1] == EMU_CANARY; j--)
            ;
        if (j > 0)
            emu_die("a kernel wrote up to %zu bytes past the end of the %zu "
                    "bytes allocated at %p", j, reg[i].n, (void *)reg[i].p);
    }
}

/* The region whose mapping holds p, or NULL. */
static struct region *
reg_find(const void *p)
{
    const char *c = (const char *)p;

    for (size_t i = 0; i < nreg; i++)
        if (c >= reg[i].map && c < reg[i].map + reg[i].maplen)
            return &reg[i];
    return NULL;
}

static cudaError_t
reg_add(void **out, size_t n, int kind)
{
    size_t pg = page(), inner, len;
    struct region r;

    *out = NULL;
    if (n == 0)
        return cudaSuccess;
    if (n > ((size_t)1 << 40))
        return fail(cudaErrorMemoryAllocation);
    if (kind == R_DEV) {
        /* GKV_GPU_EMU_MEM: the device's memory in bytes (default no
         * limit), so tests can run it out */
        const char *m = getenv("GKV_GPU_EMU_MEM");
        if (m != NULL && dev_bytes + n > strtoull(m, NULL, 0))
            return fail(cudaErrorMemoryAllocation);
    }
    inner = (n + EMU_ALIGN - 1 + pg - 1) / pg * pg;
    len = inner + 2 * pg;
    r.map = (char *)mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS |
                         MAP_NORESERVE, -1, 0);
    if (r.map == MAP_FAILED)
        return fail(cudaErrorMemoryAllocation);
    r.maplen = len;
    r.n = n;
    r.kind = kind;
    r.p = (char *)(((uintptr_t)(r.map + pg + inner) - n) &
                   ~(uintptr_t)(EMU_ALIGN - 1));
    if (nreg == capreg) {
        size_t cap = capreg ? 2 * capreg : 64;
        struct region *nr = (struct region *)realloc(reg, cap * sizeof *nr);
        if (nr == NULL) {
            munmap(r.map, len);
            return fail(cudaErrorMemoryAllocation);
        }
        reg = nr;
        capreg = cap;
    }
    if (mprotect(r.map + pg, inner, PROT_READ | PROT_WRITE) != 0) {
        munmap(r.map, len);
        return fail(cudaErrorMemoryAllocation);
    }
    {
        unsigned char *lo, *hi;
        size_t nlo, nhi;
        slack(&r, &lo, &nlo, &hi, &nhi);
        memset(lo, EMU_CANARY, nlo);
        memset(hi, EMU_CANARY, nhi);
    }
    memset(r.p, EMU_FRESH, n);
    reg[nreg++] = r;
    if (kind == R_DEV)
        dev_bytes += n;
    reg_open(&r, 0);
    *out = r.p;
    return cudaSuccess;
}

static cudaError_t
reg_drop(void *p, int kind, const char *what)
{
    struct region *r;

    if (p == NULL)
        return cudaSuccess;
    r = reg_find(p);
    if (r == NULL || r->p != p || r->kind != kind) {
        fprintf(stderr, "gkv GPU emulator: %s(%p): not a pointer that %s "
                "returned\n", what, p, kind == R_DEV ? "cudaMalloc" :
                "cudaHostAlloc");
        return fail(cudaErrorInvalidValue);
    }
    if (r->kind == R_DEV)
        dev_bytes -= r->n;
    munmap(r->map, r->maplen);
    *r = reg[--nreg];
    return cudaSuccess;
}

/* Allocations not freed (device and pinned), for tests that check a call
 * leaves none behind, failed or not. */
extern "C" size_t
gkv_emu_live_allocs(void)
{
    size_t n;

    pthread_mutex_lock(&emu_mu);
    n = nreg;
    pthread_mutex_unlock(&emu_mu);
    return n;
}

void
gkv_emu_check_arg(const char *kernel, int i, const void *p)
{
    int ok;

    if (p == NULL)
        return;
    pthread_mutex_lock(&emu_mu);
    ok = reg_find(p) != NULL;
    pthread_mutex_unlock(&emu_mu);
    if (!ok)
        emu_die("%s: argument %d (%p) is neither device nor pinned memory: "
                "a kernel on a GPU cannot read it", kernel, i, p);
}

/* reg_add() and reg_drop() under the lock */
static cudaError_t
reg_new(void **out, size_t n, int kind)
{
    cudaError_t e;

    pthread_mutex_lock(&emu_mu);
    e = reg_add(out, n, kind);
    pthread_mutex_unlock(&emu_mu);
    return e;
}

static cudaError_t
reg_free(void *p, int kind, const char *what)
{
    cudaError_t e;

    pthread_mutex_lock(&emu_mu);
    e = reg_drop(p, kind, what);
    pthread_mutex_unlock(&emu_mu);
    return e;
}

cudaError_t
cudaMalloc(void **p, size_t n)
{
    return reg_new(p, n, R_DEV);
}

cudaError_t
cudaFree(void *p)
{
    return reg_free(p, R_DEV, "cudaFree");
}

cudaError_t
cudaHostAlloc(void **p, size_t n, unsigned flags)
{
    (void)flags;
    return reg_new(p, n, R_HOST);
}

cudaError_t
cudaFreeHost(void *p)
{
    return reg_free(p, R_HOST, "cudaFreeHost");
}

cudaError_t
cudaHostGetDevicePointer(void **d, void *h, unsigned flags)
{
    struct region *r;
    cudaError_t e = cudaSuccess;

    (void)flags;
    pthread_mutex_lock(&emu_mu);
    r = reg_find(h);
    if (r == NULL || r->kind != R_HOST || (char *)h < r->p ||
        (char *)h >= r->p + r->n) {
        fprintf(stderr, "gkv GPU emulator: cudaHostGetDevicePointer(%p): not "
                "in memory from cudaHostAlloc\n", h);
        e = fail(cudaErrorInvalidValue);
    } else {
        *d = h;
    }
    pthread_mutex_unlock(&emu_mu);
    return e;
}

/* The region that [p, p + n) lies in wholly, NULL for memory no region
 * touches; *bad set when the range is partly in one or past its bytes. */
static struct region *
range_of(const void *p, size_t n, int *bad)
{
    struct region *r = reg_find(p);
    const char *c = (const char *)p;

    *bad = 0;
    if (r == NULL) {
        /* its last byte may still fall in a region */
        if (n > 0 && reg_find(c + n - 1) != NULL)
            *bad = 1;
        return NULL;
    }
    if (c < r->p || n > (size_t)(r->p + r->n - c))
        *bad = 1;
    return r;
}

/* Checks one side of a copy: 'dev' 1 when the kind says device memory
 * (mapped pinned memory counts), 0 host, -1 either. */
static int
side_ok(const char *op, const char *side, const void *p, size_t n, int dev,
        struct region **out)
{
    int bad;
    struct region *r = range_of(p, n, &bad);

    *out = r;
    if (bad) {
        fprintf(stderr, "gkv GPU emulator: %s: %s [%p, +%zu) runs past the "
                "%zu bytes allocated at %p\n", op, side, p, n,
                r != NULL ? r->n : 0, r != NULL ? (void *)r->p : NULL);
        return 0;
    }
    if (dev == 1 && r == NULL) {
        fprintf(stderr, "gkv GPU emulator: %s: %s %p is not device memory\n",
                op, side, p);
        return 0;
    }
    if (dev == 0 && r != NULL && r->kind == R_DEV) {
        fprintf(stderr, "gkv GPU emulator: %s: %s %p is device memory but "
                "the copy's kind says host\n", op, side, p);
        return 0;
    }
    return 1;
}

static cudaError_t
copy(const char *op, void *dst, const void *src, size_t n, cudaMemcpyKind k)
{
    static const int want_dst[] = {0, 1, 0, 1, -1};
    static const int want_src[] = {0, 0, 1, 1, -1};
    struct region *rd, *rs;
    cudaError_t e = cudaSuccess;

    if ((unsigned)k > cudaMemcpyDefault)
        return fail(cudaErrorInvalidValue);
    if (n == 0)
        return cudaSuccess;
    pthread_mutex_lock(&emu_mu);
    if (!side_ok(op, "destination", dst, n, want_dst[k], &rd) ||
        !side_ok(op, "source", src, n, want_src[k], &rs)) {
        e = fail(cudaErrorInvalidValue);
    } else {
        if (rd != NULL)
            reg_open(rd, 1);
        if (rs != NULL)
            reg_open(rs, 1);
        memmove(dst, src, n);
        if (rd != NULL)
            reg_open(rd, 0);
        if (rs != NULL)
            reg_open(rs, 0);
    }
    pthread_mutex_unlock(&emu_mu);
    return e;
}

cudaError_t
cudaMemcpy(void *dst, const void *src, size_t n, cudaMemcpyKind k)
{
    return copy("cudaMemcpy", dst, src, n, k);
}

cudaError_t
cudaMemcpyAsync(void *dst, const void *src, size_t n, cudaMemcpyKind k,
                cudaStream_t st)
{
    (void)st;
    return copy("cudaMemcpyAsync", dst, src, n, k);
}

cudaError_t
cudaMemset(void *p, int v, size_t n)
{
    struct region *r;
    cudaError_t e = cudaSuccess;

    if (n == 0)
        return cudaSuccess;
    pthread_mutex_lock(&emu_mu);
    if (!side_ok("cudaMemset", "destination", p, n, 1, &r)) {
        e = fail(cudaErrorInvalidValue);
    } else {
        reg_open(r, 1);
        memset(p, v, n);
        reg_open(r, 0);
    }
    pthread_mutex_unlock(&emu_mu);
    return e;
}

cudaError_t
cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t st)
{
    (void)st;
    return cudaMemset(p, v, n);
}

/* ---- streams: every call completes before it returns ------------------- */

cudaError_t
cudaStreamCreate(cudaStream_t *st)
{
    *st = (cudaStream_t)malloc(1);
    return *st != NULL ? cudaSuccess : fail(cudaErrorMemoryAllocation);
}

cudaError_t
cudaStreamDestroy(cudaStream_t st)
{
    free(st);
    return cudaSuccess;
}

cudaError_t
cudaStreamSynchronize(cudaStream_t st)
{
    (void)st;
    return cudaSuccess;
}

/* ---- launches ---------------------------------------------------------- */

enum { T_RUN, T_BARRIER, T_DONE };

struct ethr {
    ucontext_t uc;
    char      *stack;                   /* EMU_STACK bytes above a guard */
    int        state;
};

static struct ethr thr[EMU_MAX_THREADS];  /* under emu_mu, as all below */
static unsigned torder[EMU_MAX_THREADS];  /* the order threads run in */
static int in_coro;                     /* the launch runs coroutines */
static int launch_sync;                 /* launched with GPU_LAUNCH_SYNC */
static int interleave;                  /* atomics yield (coroutines) */
static int configured;                  /* interleave, rng: read from the
                                         * environment at the first launch */
static uint64_t rng;                    /* scrambles the order; 0: forward */
static ucontext_t sched_uc;
static unsigned cur;
static void (*cur_fn)(void *);
static void *cur_arg;
#ifdef EMU_ASAN
static const void *main_bottom;
static size_t main_size;
#endif

static void
thread_main(void)
{
#ifdef EMU_ASAN
    __sanitizer_finish_switch_fiber(NULL, &main_bottom, &main_size);
#endif
    cur_fn(cur_arg);
    thr[cur].state = T_DONE;
#ifdef EMU_ASAN
    __sanitizer_start_switch_fiber(NULL, main_bottom, main_size);
#endif
    /* returns to sched_uc (uc_link) */
}

/* The running coroutine back to the scheduler, in 'state'. */
static void
to_sched(int state)
{
    struct ethr *t = &thr[cur];
#ifdef EMU_ASAN
    void *fake = NULL;
    __sanitizer_start_switch_fiber(&fake, main_bottom, main_size);
#endif
    t->state = state;
    swapcontext(&t->uc, &sched_uc);
#ifdef EMU_ASAN
    __sanitizer_finish_switch_fiber(fake, &main_bottom, &main_size);
#endif
}

void
__syncthreads(void)
{
    if (!launch_sync)
        emu_die("a kernel launched with GPU_LAUNCH called __syncthreads(): "
                "launch it with GPU_LAUNCH_SYNC (gpu/gpu_int.h)");
    to_sched(T_BARRIER);
}

void
gkv_emu_yield(void)
{
    if (interleave)
        to_sched(T_RUN);
}

static void
resume(unsigned i)
{
#ifdef EMU_ASAN
    void *fake = NULL;
    __sanitizer_start_switch_fiber(&fake, thr[i].stack, EMU_STACK);
#endif
    cur = i;
    swapcontext(&sched_uc, &thr[i].uc);
#ifdef EMU_ASAN
    __sanitizer_finish_switch_fiber(fake, NULL, NULL);
#endif
}

static int
stacks(unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        char *m;
        if (thr[i].stack != NULL)
            continue;
        m = (char *)mmap(NULL, EMU_STACK + page(), PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED)
            return -1;
        mprotect(m, page(), PROT_NONE);         /* stacks grow down */
        thr[i].stack = m + page();
    }
    return 0;
}

static uint64_t
rng_next(void)
{
    uint64_t z = (rng += 0x9e3779b97f4a7c15ULL);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t
gcd(uint64_t a, uint64_t b)
{
    while (b != 0) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* The launch's order: k -> (mul k + add) mod n runs over [0, n) once. */
struct order {
    uint64_t n, mul, add;
};

static void
order_new(struct order *o, uint64_t n)
{
    o->n = n;
    o->mul = 1;
    o->add = 0;
    if (rng == 0 || n < 2)
        return;
    o->add = rng_next() % n;
    do
        o->mul = rng_next() % n;
    while (o->mul == 0 || gcd(o->mul, n) != 1);
}

static uint64_t
order_at(const struct order *o, uint64_t k)
{
    return (uint64_t)(((unsigned __int128)o->mul * k + o->add) % o->n);
}

static void
set_thread(unsigned i)
{
    threadIdx.x = i % blockDim.x;
    threadIdx.y = i / blockDim.x % blockDim.y;
    threadIdx.z = i / (blockDim.x * blockDim.y);
}

/* Every thread of the current block, to its end. */
static void
run_block(unsigned nt)
{
    for (unsigned i = 0; i < nt; i++)
        torder[i] = i;
    for (unsigned i = nt - 1; rng != 0 && i > 0; i--) {
        unsigned j = (unsigned)(rng_next() % (i + 1)), t = torder[i];
        torder[i] = torder[j];
        torder[j] = t;
    }
    if (!in_coro) {
        for (unsigned k = 0; k < nt; k++) {
            set_thread(torder[k]);
            cur_fn(cur_arg);
        }
        return;
    }
    for (unsigned i = 0; i < nt; i++) {
        getcontext(&thr[i].uc);
        thr[i].uc.uc_stack.ss_sp = thr[i].stack;
        thr[i].uc.uc_stack.ss_size = EMU_STACK;
        thr[i].uc.uc_link = &sched_uc;
        makecontext(&thr[i].uc, thread_main, 0);
        thr[i].state = T_RUN;
    }
    for (;;) {
        int live = 0, run = 0;
        for (unsigned k = 0; k < nt; k++) {
            unsigned i = torder[k];
            if (thr[i].state != T_RUN)
                continue;
            set_thread(i);
            resume(i);
        }
        for (unsigned i = 0; i < nt; i++) {
            run |= thr[i].state == T_RUN;       /* yielded at an atomic */
            live |= thr[i].state != T_DONE;
        }
        if (!live)
            return;
        if (!run)                   /* every live thread at the barrier */
            for (unsigned i = 0; i < nt; i++)
                if (thr[i].state == T_BARRIER)
                    thr[i].state = T_RUN;
    }
}

void
gkv_emu_launch(dim3 grid, dim3 block, cudaStream_t st, int sync,
               void (*fn)(void *), void *arg)
{
    unsigned long long nt = (unsigned long long)block.x * block.y * block.z;
    struct sigaction sa, old_segv, old_bus;

    (void)st;
    if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.y > 65535 ||
        grid.z > 65535 || grid.x > 0x7fffffffu || nt == 0 ||
        nt > EMU_MAX_THREADS || block.z > 64) {
        fprintf(stderr, "gkv GPU emulator: launch of grid (%u, %u, %u) x "
                "block (%u, %u, %u): invalid configuration\n", grid.x, grid.y,
                grid.z, block.x, block.y, block.z);
        fail(cudaErrorInvalidConfiguration);
        return;
    }
    pthread_mutex_lock(&emu_mu);
    if (!configured) {
        const char *il = getenv("GKV_GPU_EMU_INTERLEAVE");
        const char *o = getenv("GKV_GPU_EMU_ORDER");
        const char *s = getenv("GKV_GPU_EMU_SEED");
        configured = 1;
        interleave = il == NULL || strcmp(il, "0") != 0;
        rng = o != NULL && strcmp(o, "forward") == 0 ? 0 :
              s != NULL ? strtoull(s, NULL, 0) | 1 : 1;
    }
    launch_sync = sync;
    in_coro = sync || interleave;
    if (in_coro && stacks((unsigned)nt) != 0) {
        pthread_mutex_unlock(&emu_mu);
        fail(cudaErrorMemoryAllocation);
        return;
    }
    gridDim = grid;
    blockDim = block;
    cur_fn = fn;
    cur_arg = arg;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &old_segv);
    sigaction(SIGBUS, &sa, &old_bus);
    dev_open_all(1);
    {
        struct order bo;
        uint64_t nb = (uint64_t)grid.x * grid.y * grid.z;
        order_new(&bo, nb);
        for (uint64_t k = 0; k < nb; k++) {
            uint64_t b = order_at(&bo, k);
            blockIdx.x = (unsigned)(b % grid.x);
            blockIdx.y = (unsigned)(b / grid.x % grid.y);
            blockIdx.z = (unsigned)(b / ((uint64_t)grid.x * grid.y));
            run_block((unsigned)nt);
        }
    }
    canaries_check();
    dev_open_all(0);
    sigaction(SIGSEGV, &old_segv, NULL);
    sigaction(SIGBUS, &old_bus, NULL);
    pthread_mutex_unlock(&emu_mu);
}
