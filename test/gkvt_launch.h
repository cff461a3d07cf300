/* gkvt_launch.h - the gkv-launch tests' fixture and helpers
 * (launch_test.c, launch_usage_test.c, launch_keep_alive_test.c).
 *
 * The trainer COMMAND of a launch is the test program itself
 * ("PROG --child MODE", gkvt_lt_self): it writes its GKV_* environment,
 * its arguments and its PID to files in $LT_DIR (or $GKV_WORKSPACE: the
 * stand-in ssh clears the environment like a real remote login), checks
 * the servers accept connections, then exits, fails or sleeps as MODE
 * says. Every program's main starts with gkvt_lt_prelude().
 *
 * Ports: a PID-dependent range nobody listens on (GKVT_PORT_BASE fixes the
 * start); a launch that finds a port taken is repeated on a fresh range. */
#ifndef GKVT_LAUNCH_H
#define GKVT_LAUNCH_H
#include <limits.h>
#include <sys/types.h>
#include "gkvt.h"

#define GKVT_LT_MAXPIDS 64

struct gkvt_lt_fx {
    char *dir;
    char cfg[PATH_MAX];      /* ip_config */
    char store[PATH_MAX];
    char ws[PATH_MAX];       /* workspace of the launch */
    char out[PATH_MAX], err[PATH_MAX]; /* the launcher's stdout, stderr */
    int base;
    pid_t launcher;
    pid_t pids[GKVT_LT_MAXPIDS]; /* everything to kill in teardown */
    int npids;
    int lsock;               /* a listening socket a test holds, or -1 */
};

/* This program's path: the trainer command of the launches. */
extern char gkvt_lt_self[PATH_MAX];

/* The test fails unless NAME=want is a line of text. */
#define GKVT_LT_ENV_EQ(text, name, want) do { char b_[PATH_MAX]; \
    if (strcmp(gkvt_lt_env_in((text), (name), b_, sizeof b_), (want)) != 0) \
        fail_msg("%s is '%s', expected '%s'", (name), b_, (want)); \
} while (0)

/* The value of NAME in a file of "NAME=value" lines; "" when missing. */
const char *gkvt_lt_env_in(const char *text, const char *name, char *buf,
                           size_t cap);
/* Whether pid is gone (no process, or a zombie nobody reaped yet). */
int gkvt_lt_pid_gone(pid_t pid);
/* Waits up to ms for gkvt_lt_pid_gone(pid): 1 when it is gone, else 0. */
int gkvt_lt_wait_gone(pid_t pid, int ms);
/* Adds pid to the processes the teardown kills. */
void gkvt_lt_track(struct gkvt_lt_fx *f, pid_t pid);
/* PID in file DIR/NAME (written by a child), or 0. */
pid_t gkvt_lt_pid_file(const char *dir, const char *name);
/* gkvt_lt_pid_file(), waiting up to ms for it to be written. */
pid_t gkvt_lt_wait_pid_file(const char *dir, const char *name, int ms);
/* Something listens on the port (the launcher's own look, which does not
 * count a connect that TCP joined to itself: a plain connect to a port
 * nobody listens on does that once in some thousands). */
int gkvt_lt_port_connects(int port);
/* Nothing listens on the port, within 15 s. A server counts as gone when its
 * first thread has exited, but its sockets close with its last thread,
 * which can be a moment later (one blocked in a disk write). */
int gkvt_lt_port_closed(int port);
/* Picks f->base, the first of 16 free ports, and writes f->cfg: an
 * ip_config of one machine on it. */
void gkvt_lt_ports(struct gkvt_lt_fx *f);
/* Starts gkv-launch with the NULL-terminated arguments after argv[0],
 * stdout and stderr to f->out and f->err; extra environment "N=V" strings
 * in envs (NULL-terminated, may be NULL). */
pid_t gkvt_lt_start(struct gkvt_lt_fx *f, const char *const *args,
                    const char *const *envs);
/* Waits for the launcher; returns its exit code (or 128 + signal). Fails
 * the test after timeout_s. *secs gets the time it took when not NULL. */
int gkvt_lt_wait(struct gkvt_lt_fx *f, int timeout_s);
/* gkvt_lt_start(), then gkvt_lt_wait(). */
int gkvt_lt_launch(struct gkvt_lt_fx *f, const char *const *args,
                   const char *const *envs, int timeout_s);
/* Whether the launcher's stdout or stderr holds needle. */
int gkvt_lt_has(struct gkvt_lt_fx *f, const char *needle);
/* Prints the launcher's stdout and stderr to stderr. */
void gkvt_lt_dump(struct gkvt_lt_fx *f);
/* Unless rc (a launch's exit status) is 0: gkvt_lt_dump(), then fails the
 * test with "WHAT failed: exit RC". */
void gkvt_lt_expect_ok(struct gkvt_lt_fx *f, int rc, const char *what);
/* PIDs of the "started server ... (local pid N)" lines, into pids. */
int gkvt_lt_server_pids(struct gkvt_lt_fx *f, pid_t *pids, int max);
/* A cmocka setup: a new struct gkvt_lt_fx with its directory; cfg
 * DIR/ip.txt, the store DIR/st (made), workspace DIR/ws (LT_DIR), out and
 * err DIR/launch.out and .err. Its teardown kills and reaps every process the
 * test tracked or started and removes the directory. */
int gkvt_lt_setup(void **state);
int gkvt_lt_teardown(void **state);
/* Writes DIR/env-ROLE-RANK (GKV_* lines), args-... (each
 * argument then a NUL), pid-... and ports-... ("ok" when every server of
 * the ip_config accepts connections). */
int gkvt_lt_child_main(int argc, char **argv);
/* WORKSPACE/env-TAG, the environment a child wrote (malloc'd). */
char *gkvt_lt_read_env(struct gkvt_lt_fx *f, const char *tag);
/* An ip_config of two machines on loopback: f->base and f->base + 8. */
void gkvt_lt_two_machines(struct gkvt_lt_fx *f, char *path, size_t cap);
/* DIR/NAME/graph.json: an R-MAT graph of 2^scale nodes in 'parts'
 * partitions (random), with an 8-wide f32 node feature 'feat' and, when
 * 'mask' is not NULL, the bool node feature 'train_mask' holding it (2^scale
 * bytes, 0 or 1; a NumPy |b1 file, as DGL's g.ndata['train_mask'] is
 * saved). Returns the config's path in json. */
void gkvt_lt_graph_mask(struct gkvt_lt_fx *f, const char *name, int scale,
                        int parts, const uint8_t *mask, char *json,
                        size_t cap);
/* gkvt_lt_graph_mask() without a mask. */
void gkvt_lt_graph(struct gkvt_lt_fx *f, const char *name, int scale, int parts,
                   char *json, size_t cap);
/* Runs a launch, on a fresh port range again when a port was taken. */
int gkvt_lt_retry(struct gkvt_lt_fx *f, const char *const *args,
                  const char *const *envs, int timeout_s);
/* gkvt_lt_launch() on a fresh port range again while a port was taken,
 * with the two-machine ip_config of gkvt_lt_two_machines() rewritten for
 * each range. */
int gkvt_lt_retry2(struct gkvt_lt_fx *f, const char *const *args, char *cfg2,
                   size_t cap, int timeout_s);
/* Fails (showing the launcher's output) unless WORKSPACE/logs/LOG holds
 * needle. */
void gkvt_lt_log_has(struct gkvt_lt_fx *f, const char *log,
                     const char *needle);
/* Sets gkvt_lt_self and finds gkv-launch and gkv-server (gkvt_prog). */
void gkvt_lt_find_programs(void);
/* The start of a launch test program's main: runs the child or fake
 * server this program was started as (returning its exit status), or
 * clears the cluster variables, ignores SIGPIPE and finds gkv-launch and
 * gkv-server (1 when not built); -1: go on with the tests. */
int gkvt_lt_prelude(int argc, char **argv);

#endif
