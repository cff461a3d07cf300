/* util.c - see util.h. */
#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include "util.h"
#include "gkv.h"

const char *tools__prog = "gkv";
volatile sig_atomic_t tools__got_signal;
int tools__checks_failed;

/* "PROG: TAGmessage\n" on f. */
static void
vnote(FILE *f, const char *tag, const char *fmt, va_list ap)
{
    fflush(stdout);
    fprintf(f, "%s: %s", tools__prog, tag);
    vfprintf(f, fmt, ap);
    fputc('\n', f);
    fflush(f);
}

void
tools__die(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vnote(stderr, "", fmt, ap);
    va_end(ap);
    exit(1);
}

void
tools__note(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vnote(stderr, "", fmt, ap);
    va_end(ap);
}

void
tools__check_failed(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vnote(stderr, "CHECK FAILED: ", fmt, ap);
    va_end(ap);
    tools__checks_failed++;
}

void *
tools__xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);

    if (p == NULL)
        tools__die("out of memory (%zu bytes)", n);
    return p;
}

void *
tools__xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);

    if (p == NULL)
        tools__die("out of memory (%zu x %zu bytes)", n, size);
    return p;
}

char *
tools__xstrdup(const char *s)
{
    char *d = strdup(s);

    if (d == NULL)
        tools__die("out of memory (%zu bytes)", strlen(s) + 1);
    return d;
}

void
tools__say(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vnote(stdout, "", fmt, ap);
    va_end(ap);
}

double
tools__now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void
tools__sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

/* The line tools__roundtrip_ns passes: 2i - 1 from the caller, 2i back;
 * -1 stops the other thread. A waiting thread yields now and then, as on
 * a busy machine both may share one vCPU. */
static _Atomic long rt_flag;

/* Waits until rt_flag is 'want' or negative and returns it; *yielded
 * (may be NULL) is set when the wait had to yield. */
static long
rt_wait(long want, int *yielded)
{
    long f, spins = 0;

    while ((f = atomic_load(&rt_flag)) != want && f >= 0)
        if (++spins > 4096) {
            sched_yield();
            spins = 0;
            if (yielded != NULL)
                *yielded = 1;
        }
    return f;
}

static void *
rt_pong(void *p)
{
    (void)p;
    for (long i = 1; rt_wait(2 * i - 1, NULL) >= 0; i++)
        atomic_store(&rt_flag, 2 * i);
    return NULL;
}

/* Round trips i = from, from + 1, ... (2i - 1 out, 2i back) until 'to'
 * or until 'limit' seconds after t0 (the clock read after every yield and
 * every 16 trips); returns the i after the last. */
static long
rt_run(long from, long to, double t0, double limit)
{
    long i;

    for (i = from; i < to; i++) {
        int yielded = 0;
        atomic_store(&rt_flag, 2 * i - 1);
        (void)rt_wait(2 * i, &yielded);
        /* a round trip that needed a yield can take a time slice */
        if ((yielded || i % 16 == 0) && tools__now_s() - t0 > limit)
            return i + 1;
    }
    return i;
}

double
tools__roundtrip_ns(void)
{
    pthread_t th;
    long i, n;
    double t0, t;

    atomic_store(&rt_flag, 0);
    if (pthread_create(&th, NULL, rt_pong, NULL) != 0)
        tools__die("pthread_create failed");
    /* untimed first, about 1 ms: a vCPU that was idle answers slowly at
     * first, which says nothing of where it runs */
    i = rt_run(1, 20001, tools__now_s(), 0.001);
    t0 = tools__now_s();
    n = rt_run(i, i + 20000, t0, 0.02) - i;
    t = tools__now_s() - t0;
    atomic_store(&rt_flag, -1);
    pthread_join(th, NULL);
    return t / (double)n * 1e9;
}

double
tools__roundtrip_base(void)
{
    double lo = tools__roundtrip_ns();

    for (int i = 1; i < 5; i++) {
        double x = tools__roundtrip_ns();
        if (x < lo)
            lo = x;
    }
    return lo;
}

double
tools__near_ratio(const double *rt, int n, const double *num,
                  const double *den, double base, double *lo, int *nnear)
{
    double *a = tools__xmalloc(2 * (size_t)n * sizeof *a), *b = a + n, q;
    int k = 0;

    *lo = base > 0 && base < rt[0] ? base : rt[0];
    for (int r = 1; r < n; r++)
        if (rt[r] < *lo)
            *lo = rt[r];
    for (int r = 0; r < n; r++)
        if (rt[r] < 2 * *lo) {
            a[k] = num[r];
            b[k++] = den[r];
        }
    q = k > 0 ? tools__median(a, k) / tools__median(b, k) : NAN;
    free(a);
    *nnear = k;
    return q;
}

uint64_t
tools__splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static int
cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

double
tools__median(const double *v, int n)
{
    double *t = tools__xmalloc((size_t)n * sizeof *t), m;

    memcpy(t, v, (size_t)n * sizeof *t);
    qsort(t, (size_t)n, sizeof *t, cmp_dbl);
    m = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
    free(t);
    return m;
}

static void
on_signal(int sig)
{
    tools__got_signal = sig;
}

/* SIGINT and SIGTERM (and SIGHUP when 'hup') run fn with sa_flags. */
static void
on_stop_signals(void (*fn)(int), int flags, int hup)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = fn;
    sa.sa_flags = flags;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    if (hup)
        sigaction(SIGHUP, &sa, NULL);
}

void
tools__catch_signals(void)
{
    on_stop_signals(on_signal, SA_RESTART, 0);
}

void
tools__stop_signals(void (*fn)(int))
{
    signal(SIGPIPE, SIG_IGN);
    on_stop_signals(fn, 0, 1);
}

int
tools__die_of_signal(int sig)
{
    struct sigaction sa;
    sigset_t set;

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    sigaction(sig, &sa, NULL);
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
    raise(sig);
    return 128 + sig;
}

/* 1 when s is connected to itself. A connect to a local port nobody
 * listens on can be given that very port as its own (ephemeral) port, and
 * TCP's simultaneous open then connects the socket to itself: on Linux one
 * connect in some thousands to an even port of the ephemeral range. */
static int
self_connected(int s)
{
    struct sockaddr_storage me, peer;
    socklen_t ml = sizeof me, pl = sizeof peer;

    if (getsockname(s, (struct sockaddr *)&me, &ml) != 0 ||
        getpeername(s, (struct sockaddr *)&peer, &pl) != 0)
        return 0;
    if (me.ss_family != peer.ss_family)
        return 0;
    if (me.ss_family == AF_INET) {
        const struct sockaddr_in *a = (const void *)&me, *b = (const void *)&peer;
        return a->sin_port == b->sin_port &&
               a->sin_addr.s_addr == b->sin_addr.s_addr;
    }
    if (me.ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const void *)&me, *b = (const void *)&peer;
        return a->sin6_port == b->sin6_port &&
               memcmp(&a->sin6_addr, &b->sin6_addr, sizeof a->sin6_addr) == 0;
    }
    return 0;
}

int
tools__port_accepts(const char *host, unsigned port, int ms)
{
    struct addrinfo hints, *res = NULL;
    char ps[16];
    int ok = 0;

    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    snprintf(ps, sizeof ps, "%u", port);
    if (getaddrinfo(host, ps, &hints, &res) != 0)
        return 0;
    for (struct addrinfo *a = res; a != NULL && !ok; a = a->ai_next) {
        int s = socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        int e = 0;
        socklen_t el = sizeof e;

        if (s < 0)
            continue;
        if (connect(s, a->ai_addr, a->ai_addrlen) == 0) {
            ok = 1;
        } else if (errno == EINPROGRESS) {
            struct pollfd pf = {s, POLLOUT, 0};
            if (poll(&pf, 1, ms) == 1 &&
                getsockopt(s, SOL_SOCKET, SO_ERROR, &e, &el) == 0 && e == 0)
                ok = 1;
        }
        if (ok && self_connected(s))
            ok = 0;
        close(s);
    }
    freeaddrinfo(res);
    return ok;
}

const char *
tools__err_text(int rc, const char *detail)
{
    if (rc == GKV_ENOENT && detail != NULL && *detail != '\0')
        return NULL;
    return gkv_strerror((gkv_err)rc);
}
