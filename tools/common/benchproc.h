/* benchproc.h - what the network benchmarks share: child processes
 * (gkv-server, a reference server) started on loopback TCP and killed by
 * PID on every exit path, and a work directory in /tmp removed with them.
 *
 * tools__bench_init() first (once, in main): it makes the work directory,
 * finds gkv-server next to the running program, and sets up the clean-up
 * that runs at exit() and on SIGINT/SIGTERM (children killed, the
 * directory removed, exit status 128 + sig). Children also die with the
 * benchmark when it is killed with -9 (PR_SET_PDEATHSIG). Not thread-safe:
 * the benchmark's main thread starts and stops its children. */
#ifndef TOOLS_BENCHPROC_H
#define TOOLS_BENCHPROC_H

#include <sys/types.h>
#include "gkv.h"

/* The work directory ("/tmp/TAG-XXXXXX"), set by tools__bench_init(). */
extern char tools__bench_dir[256];

/* Makes the work directory /tmp/TAG-XXXXXX, finds gkv-server in this
 * program's directory (dies naming it when missing), and installs the
 * clean-up (atexit, SIGINT, SIGTERM; SIGPIPE ignored). Dies on failure. */
void tools__bench_init(const char *tag);

/* Starts argv[0] (looked up in PATH) with stdin and stdout on /dev/null
 * and stderr appended to 'log' (NULL: /dev/null); the child dies with this
 * process. Returns its PID, which is killed at exit unless stopped before. */
pid_t tools__bench_spawn(char *const argv[], const char *log);
/* In a child this process forked itself: die with the benchmark (call it
 * first thing); tools__bench_adopt() the PID in the parent. */
void  tools__bench_die_with_parent(void);
void  tools__bench_adopt(pid_t pid);
/* SIGTERM, then SIGKILL after 2 s; waits for it. A PID not started here
 * is left alone. */
void  tools__bench_stop(pid_t pid);

/* The first of n consecutive loopback ports nobody listens on now. */
int   tools__bench_ports(int n);
/* A TCP connection to 127.0.0.1:port (TCP_NODELAY), or -1. */
int   tools__bench_tcp_connect(int port);
/* Waits (60 s at most) until something listens on port; dies, naming
 * 'what' and its log, when child 'pid' exits first. */
void  tools__bench_wait_listen(pid_t pid, int port, const char *what,
                               const char *log);

/* Starts gkv-server for machine m of ip_config 'cfg' (listening on 'port')
 * on a store ('store') or a partition (part_config, part m), with
 * --threads 2 and the NULL-terminated 'extra' arguments; waits until it
 * listens. Its log: <work directory>/server-PORT-M.log. */
pid_t tools__bench_server(const char *cfg, int m, int port,
                          const char *store, const char *part_config,
                          const char *const *extra);
/* Writes 'text' to 'path'; dies on failure. */
void  tools__bench_write_file(const char *path, const char *text);
/* A client of job "bench" on cfg (a 120 s timeout); dies on failure. */
gkv_client *tools__bench_connect(const char *cfg);
/* rm -rf 'dir', only below /tmp/. */
void  tools__bench_rmtree(const char *dir);

/* The sampling benchmarks' graph: R-MAT (2^scale nodes, edge factor 16,
 * generator seed 1) written to <work directory>/g as 2 range partitions
 * (node IDs kept; part_flags: GKV_PART_*), the path of its JSON in
 * json[0 .. len). Returns the graph, the caller's (gkv_graph_free). Dies
 * on failure. */
gkv_graph *tools__bench_rmat_parts(int scale, unsigned part_flags,
                                   char *json, size_t len);
/* One gkv-server per partition of the 2-partition 'json', on ip_config
 * 'cfg' (written here: two machine lines on 127.0.0.1); pids[0..2). */
void  tools__bench_part_servers(const char *json, const char *cfg,
                                pid_t pids[2]);
/* A random permutation of 0 .. n-1 (Fisher-Yates, drawing with
 * tools__splitmix64(x)); the caller frees it. */
int64_t *tools__bench_perm(int64_t n, uint64_t *x);

#endif
