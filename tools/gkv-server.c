/* gkv-server - serves a gkv store to clients over TCP (nanomsg).
 *
 *   gkv-server --store DIR --ip-config FILE [--server-id K] [--num-servers N]
 *   gkv-server --part-config G.json --part-id P --ip-config FILE ...
 *              [--keep-alive --server-name NAME] [--token-file F] ...
 *
 * All the work is in net/ (gkv_server_open / run / close); this file reads
 * the options, installs the SIGTERM/SIGINT handler and maps the outcome to
 * an exit status: 0 a normal stop (the last client left, a shutdown
 * request, SIGTERM or SIGINT: requests in flight finish, the store is
 * synced), 1 a failure (the reason on stderr), 2 bad usage.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gkv.h"
#include "gkv_net.h"
#include "util.h"

#define PROG "gkv-server"

enum { EX_OK = 0, EX_FAIL = 1, EX_USAGE = 2 };

static gkv_server *volatile g_server;
static volatile sig_atomic_t g_sig;

static void
on_signal(int sig)
{
    g_sig = sig;
    gkv_server_stop(g_server);     /* async-signal-safe: sets a flag */
}

static void
usage(FILE *f)
{
    fputs(
"Usage: gkv-server --store DIR --ip-config FILE [options]\n"
"       gkv-server --part-config G.json --part-id P --ip-config FILE [options]\n"
"\n"
"Serves the gkv tensor store in DIR, or partition P of a partitioned graph\n"
"(its store, and sampling, find_edges, degrees and in_subgraph on it), to\n"
"clients over TCP. Server K of a machine listens on the machine's\n"
"ip_config port + K; the servers of one machine share its store; machine\n"
"M serves partition M. The server stops when the last client leaves\n"
"(unless --keep-alive), on a shutdown request, or on SIGTERM, SIGINT or\n"
"SIGHUP.\n"
"\n"
"Options:\n"
"  --store DIR              the store directory (required without\n"
"                           --part-config)\n"
"  --part-config FILE       serve a partition of this partition config\n"
"                           (written by gkv-partition)\n"
"  --part-id P              the partition served (required with\n"
"                           --part-config); the machine is P's line\n"
"  --create                 create the store if it is missing\n"
"  --ip-config FILE         the job's machines, one \"IP [PORT]\" per line\n"
"                           (default port 30050) (required)\n"
"  --machine N              this machine's line in FILE, from 0 (default:\n"
"                           the line whose address is this host's)\n"
"  --server-id K            which server of this machine (default 0)\n"
"  --num-servers N          servers per machine (default 1)\n"
"  --threads N              worker threads (default 2)\n"
"  --token-file F           clients must prove they know the secret in F\n"
"                           (F must be private: chmod 600)\n"
"  --keep-alive             persistent: go on serving when the last client\n"
"                           leaves; a later job connects to it again\n"
"  --num-clients N          without --keep-alive: stop when the last client\n"
"                           leaves only once N distinct clients (group,\n"
"                           rank) have joined (default 0: the ones so far)\n"
"  --server-name NAME       the persistent server's name (in logs and the\n"
"                           handshake)\n"
"  --heartbeat-timeout MS   a client not heard from for MS is gone\n"
"                           (default 30000)\n"
"  --max-msg BYTES          largest request payload (default 1073741824)\n"
"  --bind-any               listen on every interface, not only the\n"
"                           ip_config address\n"
"  --nosync                 no fsync per commit (a process crash loses\n"
"                           nothing committed, an OS crash may)\n"
"  --no-prefault            do not pre-fault the store's map at start\n"
"  --writeback NAME         keep tensor NAME in RAM, pushes at memory speed,\n"
"                           written to the store every --flush-ms; NAME may\n"
"                           end in '*' to match a prefix ('emb*', '*': all);\n"
"                           a graph's are node/NTYPE/NAME ('node/user/emb');\n"
"                           repeatable; applies to tensors clients create;\n"
"                           the log names each pattern's tensors and warns\n"
"                           of one matching none yet; needs --num-servers 1;\n"
"                           a crash loses the pushes of the last interval\n"
"                           (SIGTERM writes them)\n"
"  --flush-ms MS            write-back interval (default 10)\n"
"  -q, --quiet              no log lines on stderr\n"
"  -h, --help               print this help and exit\n"
"  -V, --version            print the version and exit\n"
"\n"
"Log lines go to stderr, one per event, each with a UTC timestamp.\n"
"Exit status: 0 stopped normally, 1 failure, 2 bad usage.\n", f);
}

static int
bad_usage(const char *fmt, const char *arg)
{
    fprintf(stderr, PROG ": ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry '" PROG " --help'.\n");
    return EX_USAGE;
}

/* 1 for an option that takes a value, 0 for a flag, -1 for none of ours. */
static int
opt_kind(const char *name)
{
    static const char *const with[] = {
        "--store", "--ip-config", "--token-file", "--server-name",
        "--machine", "--server-id", "--num-servers", "--threads",
        "--heartbeat-timeout", "--max-msg", "--part-config", "--part-id",
        "--num-clients", "--writeback", "--flush-ms",
    };
    static const char *const flags[] = {
        "--create", "--keep-alive", "--bind-any", "--nosync", "--no-prefault",
    };

    for (size_t i = 0; i < sizeof with / sizeof with[0]; i++)
        if (strcmp(name, with[i]) == 0)
            return 1;
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        if (strcmp(name, flags[i]) == 0)
            return 0;
    return -1;
}

/* Parses a decimal number in [lo, hi]; -1 on error. */
static int
parse_num(const char *s, unsigned long long lo, unsigned long long hi,
          unsigned long long *out)
{
    char *end;

    if (s == NULL || *s < '0' || *s > '9')
        return -1;
    errno = 0;
    *out = strtoull(s, &end, 10);
    if (errno || *end != '\0' || *out < lo || *out > hi)
        return -1;
    return 0;
}

int
main(int argc, char **argv)
{
    gkv_server_opts o;
    const char *wb[65] = {NULL};   /* 64 and the NULL */
    size_t nwb = 0;
    gkv_server *srv = NULL;
    struct sigaction sa;
    unsigned long long v;
    gkv_err rc;

    memset(&o, 0, sizeof o);
    o.machine = -1;
    o.part_id = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = NULL, *eq;
        char name[64];
        int takes;

        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return EX_OK;
        }
        if (strcmp(a, "-V") == 0 || strcmp(a, "--version") == 0) {
            printf(PROG " %s (protocol %d)\n", GKV_VERSION_STRING,
                   GKV_NET_PROTO);
            return EX_OK;
        }
        if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) {
            o.flags |= GKV_SERVER_QUIET;
            continue;
        }
        if (strncmp(a, "--", 2) != 0)
            return bad_usage("unexpected argument '%s'", a);
        /* --name=value or --name value */
        eq = strchr(a, '=');
        snprintf(name, sizeof name, "%.*s", eq ? (int)(eq - a) : (int)strlen(a), a);
        if ((takes = opt_kind(name)) < 0)
            return bad_usage("unknown option '%s'", name);
        if (takes) {
            if (eq != NULL)
                val = eq + 1;
            else if (i + 1 < argc)
                val = argv[++i];
            else
                return bad_usage("option '%s' needs a value", name);
            if (*val == '\0')
                return bad_usage("option '%s' needs a non-empty value", name);
        } else if (eq != NULL) {
            return bad_usage("option '%s' takes no value", name);
        }
        if (strcmp(name, "--store") == 0)
            o.store = val;
        else if (strcmp(name, "--ip-config") == 0)
            o.ip_config = val;
        else if (strcmp(name, "--part-config") == 0)
            o.part_config = val;
        else if (strcmp(name, "--part-id") == 0) {
            if (parse_num(val, 0, 1u << 20, &v))
                return bad_usage("--part-id: '%s' is not a partition number", val);
            o.part_id = (int)v;
        }
        else if (strcmp(name, "--token-file") == 0)
            o.token_file = val;
        else if (strcmp(name, "--server-name") == 0)
            o.server_name = val;
        else if (strcmp(name, "--create") == 0)
            o.flags |= GKV_SERVER_CREATE;
        else if (strcmp(name, "--keep-alive") == 0)
            o.flags |= GKV_SERVER_KEEP_ALIVE;
        else if (strcmp(name, "--bind-any") == 0)
            o.flags |= GKV_SERVER_BIND_ANY;
        else if (strcmp(name, "--nosync") == 0)
            o.flags |= GKV_SERVER_NOSYNC;
        else if (strcmp(name, "--no-prefault") == 0)
            o.flags |= GKV_SERVER_NO_PREFAULT;
        else if (strcmp(name, "--machine") == 0) {
            if (parse_num(val, 0, 1u << 20, &v))
                return bad_usage("--machine: '%s' is not a machine index", val);
            o.machine = (int)v;
        } else if (strcmp(name, "--server-id") == 0) {
            if (parse_num(val, 0, 65535, &v))
                return bad_usage("--server-id: '%s' is not a number in 0..65535", val);
            o.server_id = (unsigned)v;
        } else if (strcmp(name, "--num-servers") == 0) {
            if (parse_num(val, 1, 65535, &v))
                return bad_usage("--num-servers: '%s' is not a number in 1..65535", val);
            o.num_servers = (unsigned)v;
        } else if (strcmp(name, "--num-clients") == 0) {
            if (parse_num(val, 0, 65536, &v))
                return bad_usage("--num-clients: '%s' is not a number in 0..65536", val);
            o.num_clients = (unsigned)v;
        } else if (strcmp(name, "--threads") == 0) {
            if (parse_num(val, 1, 256, &v))
                return bad_usage("--threads: '%s' is not a number in 1..256", val);
            o.threads = (unsigned)v;
        } else if (strcmp(name, "--heartbeat-timeout") == 0) {
            if (parse_num(val, 1, 86400000, &v))
                return bad_usage("--heartbeat-timeout: '%s' is not a number of "
                                 "milliseconds in 1..86400000", val);
            o.lease_ms = (unsigned)v;
        } else if (strcmp(name, "--max-msg") == 0) {
            if (parse_num(val, 4096, 2000000000ull, &v))
                return bad_usage("--max-msg: '%s' is not a byte count in "
                                 "4096..2000000000", val);
            o.max_msg = v;
        } else if (strcmp(name, "--writeback") == 0) {
            const char *star = strchr(val, '*');

            if (nwb == sizeof wb / sizeof wb[0] - 1)
                return bad_usage("--writeback: more than %s names", "64");
            _Static_assert(GKV_NAME_MAX == 255, "the message below says 255");
            if (*val == '\0' || strlen(val) > GKV_NAME_MAX ||
                strchr(val, '#') != NULL ||
                (star != NULL && star[1] != '\0'))
                return bad_usage("--writeback: '%s' is not a tensor name "
                                 "without '#' (at most 255 bytes), or a "
                                 "prefix ending in '*'", val);
            wb[nwb++] = val;
            o.writeback = wb;
        } else if (strcmp(name, "--flush-ms") == 0) {
            if (parse_num(val, 1, 86400000, &v))
                return bad_usage("--flush-ms: '%s' is not a number of "
                                 "milliseconds in 1..86400000", val);
            o.flush_ms = (unsigned)v;
        } else {
            return bad_usage("unknown option '%s'", name);
        }
    }
    if (o.flush_ms != 0 && nwb == 0)
        return bad_usage("%s", "--flush-ms needs --writeback");
    if (nwb > 0 && o.num_servers > 1)
        return bad_usage("%s", "--writeback needs one server per machine "
                         "(--num-servers 1): each server process would keep "
                         "its own copy of the tensors");
    if (o.store == NULL && o.part_config == NULL)
        return bad_usage("%s", "--store DIR or --part-config FILE is required");
    if (o.part_config != NULL && o.part_id < 0)
        return bad_usage("%s", "--part-config needs --part-id P");
    if (o.part_config == NULL && o.part_id >= 0)
        return bad_usage("%s", "--part-id needs --part-config FILE");
    if (o.ip_config == NULL)
        return bad_usage("%s", "--ip-config FILE is required");
    if (o.server_id >= (o.num_servers ? o.num_servers : 1)) {
        char b[64];
        snprintf(b, sizeof b, "%u", o.server_id);
        return bad_usage("--server-id %s must be below --num-servers", b);
    }
    signal(SIGPIPE, SIG_IGN);
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    /* a closed terminal or ssh session, or a log-rotating HUP: stop as on
     * SIGTERM (write-back pushes written, store synced), never the default
     * death that loses them */
    sigaction(SIGHUP, &sa, NULL);
    if ((rc = gkv_server_open(&srv, &o)) != GKV_OK) {
        const char *t = tools__err_text(rc, gkv_net_errmsg());
        fprintf(stderr, PROG ": %s%s%s\n", t != NULL ? t : "",
                t != NULL ? ": " : "", gkv_net_errmsg());
        return EX_FAIL;
    }
    g_server = srv;
    if (g_sig)                     /* a signal that came during start-up */
        gkv_server_stop(srv);
    rc = gkv_server_run(srv);
    if (rc != GKV_OK)
        fprintf(stderr, PROG ": %s: %s\n", gkv_strerror(rc), gkv_net_errmsg());
    if (g_sig)
        fprintf(stderr, PROG ": the signal was %s\n", g_sig == SIGHUP ?
                "SIGHUP" : g_sig == SIGINT ? "SIGINT" : "SIGTERM");
    g_server = NULL;
    gkv_server_close(srv);
    return rc == GKV_OK ? EX_OK : EX_FAIL;
}
