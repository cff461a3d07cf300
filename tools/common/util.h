/* util.h - small things every gkv tool and benchmark needs: messages that
 * start with the program's name, an allocator that dies on failure, a
 * monotonic clock, a median, SIGINT/SIGTERM into a flag, and a quick look
 * at a TCP port. */
#ifndef TOOLS_UTIL_H
#define TOOLS_UTIL_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

/* The program's name, for messages: set it first thing in main(). */
extern const char *tools__prog;

/* "PROG: message\n" on stderr, then exit(1). */
__attribute__((noreturn, format(printf, 1, 2)))
void tools__die(const char *fmt, ...);
/* "PROG: message\n" on stderr (stdout is flushed first, so the two keep
 * their order on one terminal or log). */
__attribute__((format(printf, 1, 2)))
void tools__note(const char *fmt, ...);
/* "PROG: message\n" on stdout, flushed: progress a person or a log reads. */
__attribute__((format(printf, 1, 2)))
void tools__say(const char *fmt, ...);
/* A benchmark's failed check: "PROG: CHECK FAILED: message\n" on stderr,
 * counted in tools__checks_failed (its exit status says whether any). */
extern int tools__checks_failed;
__attribute__((format(printf, 1, 2)))
void tools__check_failed(const char *fmt, ...);
/* malloc, calloc and strdup that die with a message; 0 bytes gives 1. */
void *tools__xmalloc(size_t n);
void *tools__xcalloc(size_t n, size_t size);
char *tools__xstrdup(const char *s);
/* Seconds on the monotonic clock. */
double tools__now_s(void);
/* Sleeps ms milliseconds (less when a signal comes). */
void tools__sleep_ms(int ms);
/* The median of v[0..n) (n >= 1); v is not changed. */
double tools__median(const double *v, int n);
/* Nanoseconds for a cache line to go from one thread to another and back
 * (a new thread and this one; after 1 ms untimed, 20,000 round trips or
 * 20 ms, whichever ends first: about 1.2 ms when near, a time slice more
 * when both threads share a busy vCPU; one caller at a time): about 55
 * on this project's 2-vCPU VM when its vCPUs share a cache, 300 and more
 * when the host runs them far apart, which it does now and then for a
 * while, and microseconds to milliseconds when both threads land on one
 * busy vCPU. Work that hands data between threads or processes then runs
 * slower, so benchmarks take it before each rep and say how many reps
 * ran far apart. */
double tools__roundtrip_ns(void);
/* The shortest of 5 round trips (tools__roundtrip_ns): at a program's
 * start, the base its reps' round trips are compared with. */
double tools__roundtrip_base(void);
/* Of n reps with round trips rt[0..n): *lo = the shortest of those and of
 * 'base' (one taken before, say at the program's start; 0 for none); the
 * reps under twice it are "near", *nnear of them; returns the median of
 * num[] over the near reps / the median of den[] over them (a ratio of
 * medians, as the benchmarks' figures are), NAN when none is near. Near
 * is relative to what the process saw: when all of it ran far apart, all
 * count as near, and only *lo says so. */
double tools__near_ratio(const double *rt, int n, const double *num,
                         const double *den, double base, double *lo,
                         int *nnear);
/* SplitMix64: advances *state and returns its next 64 random bits (the
 * benchmarks' and examples' reproducible ID streams). */
uint64_t tools__splitmix64(uint64_t *state);

/* The signal SIGINT or SIGTERM delivered since tools__catch_signals(), or
 * 0. The handler only sets it (SA_RESTART: system calls are not cut
 * short); work loops poll it. */
extern volatile sig_atomic_t tools__got_signal;
void tools__catch_signals(void);
/* For a long-running tool (a server, a launcher): SIGTERM, SIGINT and
 * SIGHUP run fn (no SA_RESTART: a blocking call returns EINTR, so the tool
 * notices at once and stops cleanly; a closed terminal's HUP stops it the
 * same way instead of killing it), and SIGPIPE is ignored. */
void tools__stop_signals(void (*fn)(int));
/* After cleaning up for a caught signal: restores its default action,
 * unblocks SIGINT and SIGTERM and raises it, so a calling shell sees the
 * interrupt; returns 128 + sig should the process survive. */
int tools__die_of_signal(int sig);

/* The text of error code rc (a gkv_err) to print before 'detail', a
 * library message, or NULL when the detail says it alone: GKV_ENOENT's
 * text, "no store at that path", speaks of stores, while net/ gives that
 * code for any missing file it names (an ip_config, a token file). */
const char *tools__err_text(int rc, const char *detail);

/* 1 when something accepts TCP connections on host:port within 'ms''
 * milliseconds, else 0: a quick look before a handshake, which with a port
 * nobody listens on would wait its whole timeout. A socket that TCP
 * connected to itself (its port chosen as its own source port) is not
 * something accepting: 0. */
int tools__port_accepts(const char *host, unsigned port, int ms);

#endif
