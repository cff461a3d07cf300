/* gkvt.h - helpers shared by gkv's cmocka tests. */
#ifndef GKVT_H
#define GKVT_H
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "gkv.h"
#include "tools/common/util.h"

/* Makes a fresh directory under $TMPDIR (or /tmp); returns a malloc'd path. */
char *gkvt_mkdtemp(const char *tag);
/* Removes a directory tree made by gkvt_mkdtemp(); frees 'dir'. NULL is fine. */
void  gkvt_rmtree(char *dir);

/* The run's random seed: GKVT_SEED if set, else time-based. Printed once to
 * stderr so a failing run can be repeated. */
uint64_t gkvt_seed(void);
/* A small deterministic generator for tests: tools__splitmix64(). */

/* Runs argv[0] (a path) with argv; stdin from 'in' (NULL: /dev/null).
 * Captures stdout and stderr (each truncated to 1 MiB) into malloc'd
 * strings the caller frees (pass NULL to discard). Returns the exit status,
 * or 128 + signal. Waits at most 'timeout_s' seconds, then kills by PID. */
int gkvt_run(char *const argv[], const char *in, size_t in_len,
             char **out, char **err, int timeout_s);

/* The running test program's path (from /proc/self/exe), read once; a
 * cmocka failure when it cannot be read. */
const char *gkvt_self(void);
/* Path of a built program, e.g. gkvt_prog("kvctl") -> "build/kvctl";
 * honours GKVT_BUILD. Returned string is static per call site use. */
const char *gkvt_prog(const char *name);
/* Mounts a tmpfs of 'opts' (e.g. "size=12m") on dir (from gkvt_mkdtemp),
 * or removes dir and skips the test (mounting needs CAP_SYS_ADMIN: these
 * run as root in CI). A mount a failed test leaves is unmounted and
 * removed when the program exits; gkvt_tmpfs_done() does both at once. */
void gkvt_tmpfs_or_skip(char *dir, const char *opts);
void gkvt_tmpfs_done(char *dir);

/* Allocation fault injection (see base/base.h): fail the n-th gkv__malloc
 * from now (0 = the next one); -1 turns it off. */
void   gkvt_alloc_fail_at(long n);
/* Number of gkv__malloc'd blocks not yet freed. */
long   gkvt_alloc_live(void);

/* ---- cmocka fixtures ---- */
/* A test's directory: *state gets a new zeroed struct of 'size' bytes
 * whose first member is a char * set to a fresh gkvt_mkdtemp(tag).
 * Returns -1 (for a cmocka setup) when it cannot, else 0. */
int  gkvt_dir_setup(void **state, size_t size, const char *tag);
/* Its teardown: removes the directory and frees the struct; 0. */
int  gkvt_dir_teardown(void **state);
/* A directory and one path in it; a test's fixture is this struct, or one
 * that begins with its two members (the second may have another name). */
struct gkvt_file_fx {
    char *dir;
    char path[4096];
};
/* gkvt_dir_setup(), then path gets DIR/name; -1 when it fails. Its
 * teardown is gkvt_dir_teardown(). */
int  gkvt_file_setup(void **state, size_t size, const char *tag,
                     const char *name);
/* A directory and a store opened there (GKV_CREATE); a test's fixture is
 * this struct, or one that begins with its two members. */
struct gkvt_store_fx {
    char *dir;
    gkv_store *s;
};
/* gkvt_dir_setup(), then the store; -1 when either fails. */
int  gkvt_store_setup(void **state, size_t size, const char *tag);
/* Closes the store, then gkvt_dir_teardown(); 0. */
int  gkvt_store_teardown(void **state);
/* Fails the test unless 'msg' (an error detail) holds 'want'. */
void gkvt_expect_msg(const char *msg, const char *want);
/* Every row of 'name' through tx (NULL: without a snapshot, so the RAM
 * copy of a tensor in write-back mode), malloc'd; *len gets its bytes.
 * NULL when there is no such tensor; any other failure fails the test. */
unsigned char *gkvt_tensor_dump(gkv_store *s, gkv_txn *tx, const char *name,
                                size_t *len);
/* gkvt_tensor_dump() of a tensor that must exist (else a failure). */
unsigned char *gkvt_tensor_all(gkv_store *s, gkv_txn *tx, const char *name,
                               size_t *len);

/* Fails naming the first i where got[i] != want[i] (as "what[i]"). */
void gkvt_expect_i64(const int64_t *got, const int64_t *want, size_t n,
                     const char *what);
/* Fails naming the first field of an edge type's info that differs from
 * want's (names compared as strings). */
void gkvt_expect_etype_info(const gkv_etype_info *got,
                            const gkv_etype_info *want);
/* FNV-1a of h with the 8 bytes of v, low first. */
uint64_t gkvt_fnv64(uint64_t h, uint64_t v);

/* ---- for tests that run processes and servers ---- */
/* The clock and sleep are tools/common's (linked into every test):
 * tools__now_s(), tools__sleep_ms(). */
/* The whole file as a malloc'd string ("" when it cannot be read); reads
 * to the end, so /proc files work too. */
char  *gkvt_slurp(const char *path);
/* Whether the file holds 'needle'. */
int    gkvt_file_has(const char *path, const char *needle);
/* How many times 'needle' occurs in the file (0 when it cannot be read). */
int    gkvt_file_count(const char *path, const char *needle);
/* The whole file as a malloc'd buffer (one NUL past *len, which gets its
 * bytes); a cmocka failure when it cannot be read. */
unsigned char *gkvt_read_file(const char *path, size_t *len);
/* Writes len bytes to path (created or truncated, mode 0644); a cmocka
 * failure when it cannot. */
void   gkvt_write_file(const char *path, const void *b, size_t len);
/* The names in directory dir (with "." and ".."), sorted, each followed
 * by '\n', as a malloc'd string ("" when dir cannot be read). */
char  *gkvt_listing(const char *dir);
/* Whether path exists (stat). */
int    gkvt_exists(const char *path);
/* Fails unless files a and b hold the same bytes. */
void   gkvt_expect_same_files(const char *a, const char *b);
/* DIR/NAME in one of 8 thread-local buffers, each reused 8 calls later. */
char  *gkvt_path(const char *dir, const char *name);
/* Runs the built program 'name' (gkvt_prog) with the arguments that follow
 * (NULL-terminated; 62 at most), stdin /dev/null, for 60 s at most; *out
 * and *err are freed, then get its stdout and stderr. Returns its exit
 * status (gkvt_run). */
int    gkvt_tool(const char *name, char **out, char **err, ...);
int    gkvt_toolv(const char *name, char **out, char **err, va_list ap);
/* Fails, showing 'text', unless it holds 'needle'. */
void   gkvt_expect_has(const char *text, const char *needle);
/* Writes 'text' to 'path' with mode 'mode' (a cmocka failure if it
 * cannot). */
void   gkvt_write_text(const char *path, const char *text, unsigned mode);
/* Whether TCP port 'port' on 127.0.0.1 can be bound now; with 'reuse'
 * the bind sets SO_REUSEADDR (a port in TIME_WAIT counts as free). */
int    gkvt_port_bindable(int port, int reuse);
/* gkvt_port_bindable(port, 0). */
int    gkvt_port_free(int port);
/* The first of n consecutive loopback ports that each pass usable(port),
 * a multiple of 'align': candidate k is gkvt_port_candidate(salt + k, n,
 * align), or with GKVT_PORT_BASE set, that + env_off + k * align. A
 * cmocka failure when 500 candidates fail. */
int    gkvt_port_find(int n, int align, unsigned salt, int env_off,
                      int (*usable)(int port));
/* The first of n consecutive loopback ports nobody listens on now, spread
 * by PID so parallel runs rarely meet (a server that still finds its port
 * taken must make the caller pick again). GKVT_PORT_BASE fixes the start. */
int    gkvt_port_base(int n);
/* Candidate k (0, 1, ...) for the first of n ports, a multiple of 'align':
 * spread by PID over ports below the kernel's ephemeral range, which
 * outgoing connections (and a connect joined to itself) take their ports
 * from; 20000..50000 when that range starts below 14096. */
int    gkvt_port_candidate(unsigned k, int n, int align);
/* A child process the test started and must stop (by PID). */
struct gkvt_proc {
    int  pid;                /* pid_t */
    int  reaped, status;     /* status: from waitpid */
    char log[4200];          /* its stderr */
};
/* Takes the next of procs[0..max) (*np of them in use; a cmocka failure
 * when none is left), gives it the log DIR/<number>-LOGNAME and starts
 * argv there (gkvt_proc_start); every process a test spawns this way is
 * then in procs for gkvt_proc_reap_all. */
struct gkvt_proc *gkvt_spawn(struct gkvt_proc *procs, int *np, int max,
                             const char *dir, char *const argv[],
                             const char *logname);
/* Waits (at most 20 s) until gkv-server p logs "listening on": 1. 0 when
 * it exited because its port was taken (pick other ports); any other exit,
 * or no listening in time, is a cmocka failure showing its log. */
int gkvt_server_listening(struct gkvt_proc *p);
/* Starts argv[0] (a path) with argv: stdin and stdout /dev/null, stderr
 * appended to p->log (set by the caller). */
void gkvt_proc_start(struct gkvt_proc *p, char *const argv[]);
/* Whether it still runs (reaps it when not). */
int  gkvt_proc_alive(struct gkvt_proc *p);
/* Waits up to ms for it to exit; 1 when it did. */
int  gkvt_proc_wait(struct gkvt_proc *p, int ms);
/* SIGKILL and reap; nothing when already reaped. */
void gkvt_proc_kill(struct gkvt_proc *p);
/* Its exit code once reaped, or -signal. */
int  gkvt_proc_code(const struct gkvt_proc *p);
/* Kills and reaps procs[0..n); returns 1 when any of their logs holds a
 * sanitizer report (printed to stderr), else 0. */
int  gkvt_proc_reap_all(struct gkvt_proc *procs, int n);
/* Runs argv[0] (a path) with argv, stdin and stdout /dev/null and stderr a
 * pseudo-terminal; what it wrote there goes to buf (NUL-terminated, at
 * most cap - 1 bytes). Returns the exit status, or 128 + signal. */
int  gkvt_run_tty(char *const argv[], char *buf, size_t cap);
/* SIGKILL a forked child by PID and reap it. */
void gkvt_kill_child(int pid);
/* In a forked child that waits to be killed: dies with this test program
 * (SIGKILL when its parent exits), so a failed assertion in the parent
 * before gkvt_kill_child() leaves no process behind. */
void gkvt_die_with_parent(void);
/* kill(pid, SIGSTOP), then waits (up to 5 s) until every thread of pid is
 * stopped: kill() only queues the stop, and a request sent at once could
 * still be answered. */
void gkvt_stop_proc(int pid);
/* A test that needs a CUDA device met none ('why': the library's message).
 * Fails the test when GKV_REQUIRE_GPU=1 (the runs on a lent GPU machine,
 * where a skip would hide a broken driver); else returns. */
void gkvt_gpu_missing(const char *why);
/* gkvt_gpu_missing(), then skips the test. */
void gkvt_gpu_skip(const char *why);
/* A one-dimensional tensor: rows of 'width' elements of dt, IDs [lo, hi);
 * every other field zero. */
gkv_tensor_spec gkvt_spec(gkv_dtype dt, uint64_t width, uint64_t lo,
                          uint64_t hi);
/* gkvt_spec() with rows made by 'init' (a = -1, b = 1, seed 7). */
gkv_tensor_spec gkvt_spec_init(gkv_dtype dt, uint64_t width, uint64_t lo,
                               uint64_t hi, gkv_init init);
/* Creates tensor 'name' of spec sp in the store at st (made when missing)
 * and closes the store again. */
void gkvt_store_create(const char *st, const char *name,
                       const gkv_tensor_spec *sp);
/* gkvt_store_create() of f32 rows of 'width', IDs [lo, hi), uniform in
 * [-1, 1] (seed 7): the net tests' tensors. */
void gkvt_make_f32(const char *st, const char *name, uint64_t width,
                   uint64_t lo, uint64_t hi);
/* A "Vm...:" field of /proc/PID/status ("VmHWM:", "VmRSS:"), KiB; a
 * cmocka failure when it is missing. */
long  gkvt_status_kib(int pid, const char *field);
/* The peak resident set of process pid, in KiB (VmHWM). */
long  gkvt_peak_kib(int pid);
/* Rows 0..n-1 of tensor 'name' (rb bytes each) of store st, malloc'd,
 * read in-process after checking every chunk of the store. */
void *gkvt_read_all(const char *st, const char *name, size_t n, size_t rb);
#define GKVT_OK(expr) assert_int_equal((expr), GKV_OK)
/* A net/ call must succeed; else fail naming the call, code and detail. */
#define NET_OK(expr) do { gkv_err rc_ = (expr); \
    if (rc_ != GKV_OK) fail_msg("%s: %s: %s", #expr, gkv_err_name(rc_), gkv_net_errmsg()); \
} while (0)

#ifdef GKVT_GPU_EMU
#include <stdio.h>
/* Device and pinned allocations not freed (gpu/emu/emu.cc). */
size_t gkv_emu_live_allocs(void);

/* A test program's exit status after its tests returned rc: 1 when they
 * passed but left emulated-device memory allocated (a leak). */
static inline int
gkvt_emu_exit(const char *prog, int rc)
{
    if (rc == 0 && gkv_emu_live_allocs() != 0) {
        fprintf(stderr, "%s: %zu emulated-device allocations left after "
                "every test (a leak)\n", prog, gkv_emu_live_allocs());
        return 1;
    }
    return rc;
}
#endif

/* Element j of the float dtype dt (f32, f64, f16, bf16) at p set to v
 * (rounded as gkv's own conversions round); fails the test for another
 * dtype. */
void gkvt_elem_set(gkv_dtype dt, unsigned char *p, size_t j, double v);

#endif
