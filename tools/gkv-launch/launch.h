/* launch.h - what the files of gkv-launch share: the job and its
 * processes, and the functions one file calls in another. */
#ifndef LAUNCH_H
#define LAUNCH_H

#include <ifaddrs.h>
#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "gkv.h"
#include "gkv_net.h"

#define PROG "gkv-launch"

enum { EX_OK = 0, EX_FAIL = 1, EX_USAGE = 2 };
enum { R_SERVER, R_TRAINER };

#define GRACE_S      5.0     /* SIGTERM -> SIGKILL */
#define SERVER_GONE_GRACE_S 10.0 /* trainers may finish after a server stops */
#define TAIL_LINES   20
#define MAX_SARGS    64
#define MAX_CLIENTS  65536   /* gkv-server --num-clients' bound (sessions) */
/* "server", "trainer", by R_*. */
extern const char *const launch__role_names[];


struct proc {
    int role;
    unsigned machine;
    unsigned idx;           /* server k, trainer t */
    unsigned rank;          /* servers: m * S + k; trainers: m * T + t */
    int remote;
    pid_t pid;              /* the local child: the process or its ssh */
    int started, reaped, status;
    int stopping;           /* we sent it SIGTERM */
    long rpgid; /* remote session id ("@gkv-pgid" line); 0 unknown */
    off_t log_off;          /* the log's size before this run's output: an
                             * earlier run's "@gkv-pgid" line above it */
    int ready;              /* servers: accepts connections */
    int reused;             /* servers: a persistent one already running */
    unsigned hs_lease_ms;   /* reused servers: their handshake's lease
                             * (--heartbeat-timeout), in ms */
    uint64_t hs_max_msg;    /* and message limit (--max-msg), in bytes */
    char name[64];          /* "server 0/1", "trainer rank 3", ... */
    char log[PATH_MAX + 160];  /* WORKSPACE/logs/ROLE-M-I.log */
};

struct job {
    /* options */
    const char *ip_config, *part_config, *store, *workspace, *server_name;
    const char *token_file, *ssh_user, *server_bin, *ssh_cmd, *group_opt;
    const char *cluster;
    unsigned S, T, ssh_port;
    unsigned loader_workers;    /* --num-samplers (deprecated): the
                                 * trainers' GKV_LOADER_WORKERS; 0: unset */
    int keep_alive, force_ssh, shutdown;
    unsigned timeout_arg;       /* --timeout SEC; 0: not given */
    double timeout_s;           /* --timeout, or 60 */
    const char *sargs[MAX_SARGS];
    int nsargs;
    char **cmd;
    int ncmd;
    /* derived */
    gkv_ipconfig *ipc;
    unsigned M;
    int *local;             /* per machine: 1 when this host */
    char ipc_abs[PATH_MAX], part_abs[PATH_MAX], store_abs[PATH_MAX];
    char tok_abs[PATH_MAX], cwd[PATH_MAX], ws[PATH_MAX + 64];
    int tok_persistent;     /* tok_abs is the persistent servers' token
                             * file (token.c), not --token-file */
    char group[GKV_NET_GROUP_MAX + 1];
    char instance[160];             /* GKV_JOB_INSTANCE: this run's */
    gkv_pbook *book;        /* --part-config's book; NULL with --store */
    char server_bin_buf[PATH_MAX + 16];
    struct proc *p;
    size_t np;
};

/* The signal (SIGTERM, SIGINT, SIGHUP) that asked the job to stop, or 0. */
extern volatile sig_atomic_t launch__sig;

/* Every function below that fails says why (tools__note) before it
 * returns; out of memory ends the process (tools__xcalloc). */

/* opts.c: the command line into j; 0, or the exit status of a usage error
 * (its message printed). -h and -V exit here. */
int launch__parse_args(struct job *j, int argc, char **argv);

/* config.c: inputs read and checked, paths made absolute, local machines
 * and the server program found (0, or -1); the workspace's path, then the
 * workspace itself once the launch goes ahead (0, or -1); machine m's
 * store (--store with '%m' replaced). */
int launch__prepare(struct job *j);
void launch__workspace_path(struct job *j);
int launch__make_workspace(struct job *j);
void launch__store_path(const struct job *j, unsigned m, char *out,
                        size_t cap);

/* remote.c: shell quoting into a growing string; whether a host is this
 * one, or resolves at all (-1 with why); the command string a remote shell
 * runs (a fresh session whose id it prints first; malloc'd) and the ssh
 * argv that runs it on machine m (strings borrowed, the port in pbuf, the
 * destination in dest; the array malloc'd). */
void launch__sq_append(char **buf, size_t *len, size_t *cap, const char *s);
void launch__raw_append(char **buf, size_t *len, size_t *cap, const char *s);
int launch__host_is_local(const char *host, struct ifaddrs *ifs);
int launch__host_resolves(const char *host, char *why, size_t cap);
char *launch__remote_string(const struct job *j, char **env, char **argv);
char **launch__ssh_argv(const struct job *j, unsigned m, const char *remote,
                        char *pbuf, char *dest, size_t dest_cap);

/* env.c: what process p is given. Its GKV_* variables (a NULL-ended
 * malloc'd array of malloc'd "NAME=value"); environ without any GKV_* this
 * tool sets, plus 'add' (malloc'd array, borrowed strings); free either
 * with launch__strv_free (the first) or free() (the second). A server's
 * argv points into j, 'num' and 'st'. */
char **launch__proc_env(const struct job *j, const struct proc *p);
void launch__strv_free(char **v);
char **launch__merged_env(char **add);
char **launch__server_argv(const struct job *j, const struct proc *p,
                           char num[4][16], char *st, size_t st_cap);

/* proc.c: the job's processes. Start one (0, or -1), find a remote one's
 * session id in its log, whether it runs, reap exited children (the first
 * that failed, or NULL), stop a role's (-1: all; the number that had to be
 * killed), count them; an exit status in words; the end of a log. */
void launch__proc_name(const struct job *j, struct proc *p);
int launch__proc_start(struct job *j, struct proc *p);
void launch__proc_find_rpgid(struct proc *p);
int launch__proc_live(const struct proc *p);
struct proc *launch__reap(struct job *j);
int launch__stop_procs(struct job *j, int role);
size_t launch__count_live(const struct job *j, int role);
size_t launch__nreused(const struct job *j);
void launch__describe_status(int st, char *b, size_t cap);
void launch__print_tail(const char *path);

/* token.c: the job's token. Read j->tok_abs into buf (GKV_TOKEN_MAX + 1
 * bytes; 0, or -1). Without --token-file: persistent servers' (with
 * --keep-alive, or --shutdown, which uses it only when it exists), made
 * when missing (0, or -1; sets j->tok_persistent); a job's, in the
 * workspace, made after it (0, or -1). Either sets j->token_file and
 * j->tok_abs as --token-file would. */
int launch__load_token(const struct job *j, char *buf, size_t cap);
int launch__token_persistent(struct job *j);
int launch__token_job(struct job *j);
/* Whether a command shown to the user (--shutdown) needs --token-file:
 * the token is one the user gave, not the persistent servers' (found
 * without it). */
int launch__token_shown(const struct job *j);

/* reuse.c: persistent servers. Server k of
 * machine m as an address and as words for messages; gkv_net_errmsg()
 * without the client's label of addr; whether the servers found running
 * are the ones this launch would start (EX_OK, EX_FAIL: a port held by
 * something else, EX_USAGE: they serve another store). */
void launch__server_addr(const struct job *j, unsigned m, unsigned k,
                         char *out, size_t cap);
void launch__server_label(const struct job *j, unsigned m, unsigned k,
                          char *out, size_t cap);
const char *launch__net_detail(const char *addr);
int launch__check_reused(struct job *j);

/* cluster.c: under Slurm or MPI, run this task's one role (an exit
 * status), or -1 when no cluster launcher is there; an environment
 * variable, NULL when unset or empty. */
int launch__cluster_task(struct job *j);
const char *launch__env_get(const char *name);

/* shutdown.c: --shutdown; EX_OK when every server answered, exited and
 * freed its port. */
int launch__do_shutdown(struct job *j);

/* job.c: waiting until every server accepts connections (0, or -1: the
 * timeout or a signal); running the job to its end (its exit status). */
int launch__wait_all_ports(struct job *j);
int launch__run_job(struct job *j);

#endif
