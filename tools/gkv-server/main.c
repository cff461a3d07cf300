/* gkv-server - serves a gkv store to clients over TCP (nanomsg).
 *
 *   gkv-server --store DIR --ip-config FILE [--server-id K] [--num-servers N]
 *   gkv-server --part-config G.json --part-id P --ip-config FILE ...
 *              [--keep-alive --server-name NAME] [--token-file F] ...
 *
 * Without --token-file it listens on a loopback address only, unless
 * --insecure-no-token says otherwise (net/server.c refuses it).
 *
 * The work is in net/ (gkv_server_open / run / close) and gate.c (the
 * connection gate: peer addresses, the caps on connections that have not
 * authenticated, the pre-session frame limit); this file reads the
 * options, starts the gate, installs the SIGTERM/SIGINT handler and maps
 * the outcome to an exit status: 0 a normal stop (the last client left, a
 * shutdown request, SIGTERM or SIGINT: requests in flight finish, the
 * store is synced), 1 a failure (the reason on stderr), 2 bad usage.
 */
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gkv.h"
#include "gkv_net.h"
#include "gate.h"
#include "opt.h"
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
"  --batch-threads N        threads answering whole batches (SAMPLE_BATCH)\n"
"                           of a partition server (default: --threads);\n"
"                           each keeps 4 bytes a node of the whole graph\n"
"                           (relabelling) and up to 64 MiB of arena\n"
"  --token-file F           clients must prove they know the secret in F\n"
"                           (F must be private: chmod 600; at least 16\n"
"                           bytes; gkv-launch makes one per job)\n"
"  --insecure-no-token      allow listening on a non-loopback address (or\n"
"                           --bind-any) without --token-file: ANYONE WHO\n"
"                           CAN REACH THE PORT CAN READ, WRITE AND DELETE\n"
"                           TENSORS AND STOP THE SERVER; the log says so\n"
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
"  --max-reply-memory BYTES replies held unsent, in total (default 2147483648);\n"
"                           a reply of 64 KiB or more past it gets GKV_EBUSY\n"
"  --max-group-sessions N   sessions one group may hold at once; more are\n"
"                           refused (default 16384)\n"
"  --max-peer-sessions N    sessions one peer address may hold at once;\n"
"                           more are refused (default 4096)\n"
"  --max-unauth N           connections that have not authenticated yet,\n"
"                           in all (default 1024); past it the oldest one\n"
"                           of the address (IPv6: /64) holding the most is\n"
"                           closed (the new one when none is older than\n"
"                           200 ms)\n"
"  --max-unauth-per-peer N  the same from one address (default 256); an\n"
"                           IPv6 /64 may have 16 times it\n"
"  --bind-any               listen on every interface, not only the\n"
"                           ip_config address (needs --token-file, or\n"
"                           --insecure-no-token)\n"
"  --nosync                 no fsync per commit (a process crash loses\n"
"                           nothing committed, an OS crash may)\n"
"  --no-prefault            do not pre-fault the store's map at start (nor\n"
"                           check its chunks)\n"
"  --no-verify-data         pre-fault without checking every chunk's\n"
"                           checksum (by default a store with a chunk\n"
"                           changed on disk is refused at start)\n"
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
"Before a connection authenticates (its handshake, or a request with a\n"
"live session granted to the same address) it may send at most 1024\n"
"payload bytes a message: a larger one is answered and dropped unread, so\n"
"a connection without a session of its address makes the server hold a\n"
"few KiB at most. A request carrying a live session of another address,\n"
"of any size, has its session cleared (answered: no session). Requests\n"
"authenticate at most 8 + 4 x (live sessions of their address)\n"
"connections (past it a large request gets GKV_EBUSY, the session kept);\n"
"each accepted handshake authenticates its own connection besides, so an\n"
"address has at most 8 + 5 x its live sessions; each may hold up to\n"
"--max-msg. A connection whose session ended is not counted and is judged\n"
"again at its next frame (one arriving then is read to its end). Session\n"
"ids are not secret on the wire: with TLS absent, a peer that can send\n"
"from a client's address and sees its traffic gets that much.\n"
"\n"
"Without --token-file the server listens on a loopback address only\n"
"(127.0.0.1, ::1), where every local user may use it, and refuses any other\n"
"address unless --insecure-no-token is given.\n"
"\n"
"Log lines go to stderr, one per event, each with a UTC timestamp.\n"
"Exit status: 0 stopped normally, 1 failure, 2 bad usage.\n", f);
}

/* --writeback NAME: one more name; ctx is the struct wb. */
struct wb {
    const char *name[65];           /* 64 and the NULL */
    size_t n;
};

static int
add_writeback(void *ctx, const char *val)
{
    struct wb *w = ctx;
    const char *star = strchr(val, '*');

    if (w->n == sizeof w->name / sizeof w->name[0] - 1)
        return tools__usage_error(PROG, "--writeback: more than 64 names");
    _Static_assert(GKV_NAME_MAX == 255, "the message below says 255");
    if (*val == '\0' || strlen(val) > GKV_NAME_MAX ||
        strchr(val, '#') != NULL || (star != NULL && star[1] != '\0'))
        return tools__usage_error(PROG, "--writeback: '%s' is not a tensor "
                                  "name without '#' (at most 255 bytes), or a "
                                  "prefix ending in '*'", val);
    w->name[w->n++] = val;
    return 0;
}

/* Fills *o from argv (w keeps the --writeback names o points to). 0, or
 * the exit status of a usage error (its message printed). */
static int
parse_args(gkv_server_opts *o, struct gate_opts *go, struct wb *w, int argc,
           char **argv)
{
    unsigned part_id = UINT_MAX, machine = UINT_MAX;
    char version[64];
    const struct tools_opt opts[] = {
        {"--store", OPT_STR, .dst = &o->store},
        {"--ip-config", OPT_STR, .dst = &o->ip_config},
        {"--part-config", OPT_STR, .dst = &o->part_config},
        {"--part-id", OPT_UINT, .dst = &part_id, .lo = 0, .hi = 1u << 20,
         .bad = "is not a partition number in 0..1048576"},
        {"--token-file", OPT_STR, .dst = &o->token_file},
        {"--server-name", OPT_STR, .dst = &o->server_name},
        {"--create", OPT_BITS, .dst = &o->flags, .bits = GKV_SERVER_CREATE},
        {"--keep-alive", OPT_BITS, .dst = &o->flags,
         .bits = GKV_SERVER_KEEP_ALIVE},
        {"--bind-any", OPT_BITS, .dst = &o->flags,
         .bits = GKV_SERVER_BIND_ANY},
        {"--insecure-no-token", OPT_BITS, .dst = &o->flags,
         .bits = GKV_SERVER_INSECURE_NO_TOKEN},
        {"--nosync", OPT_BITS, .dst = &o->flags, .bits = GKV_SERVER_NOSYNC},
        {"--no-prefault", OPT_BITS, .dst = &o->flags,
         .bits = GKV_SERVER_NO_PREFAULT},
        {"--no-verify-data", OPT_BITS, .dst = &o->flags,
         .bits = GKV_SERVER_NO_VERIFY_DATA},
        {"--quiet", OPT_BITS, .dst = &o->flags, .bits = GKV_SERVER_QUIET,
         .alias = "-q"},
        {"--machine", OPT_UINT, .dst = &machine, .lo = 0, .hi = 1u << 20,
         .bad = "is not a machine index in 0..1048576"},
        {"--server-id", OPT_UINT, .dst = &o->server_id, .lo = 0, .hi = 65535},
        {"--num-servers", OPT_UINT, .dst = &o->num_servers, .lo = 1,
         .hi = 65535},
        {"--num-clients", OPT_UINT, .dst = &o->num_clients, .lo = 0,
         .hi = 65536},
        {"--max-group-sessions", OPT_UINT, .dst = &o->max_group_sessions,
         .lo = 1, .hi = 65536},
        {"--max-peer-sessions", OPT_UINT, .dst = &go->max_peer_sessions,
         .lo = 1, .hi = 65536},
        {"--max-unauth", OPT_UINT, .dst = &go->max_unauth, .lo = 1,
         .hi = 65536},
        {"--max-unauth-per-peer", OPT_UINT, .dst = &go->max_unauth_peer,
         .lo = 1, .hi = 65536},
        {"--threads", OPT_UINT, .dst = &o->threads, .lo = 1, .hi = 256},
        {"--batch-threads", OPT_UINT, .dst = &o->batch_threads, .lo = 1,
         .hi = 256},
        {"--heartbeat-timeout", OPT_UINT, .dst = &o->lease_ms, .lo = 1,
         .hi = 86400000, .bad = "is not a number of milliseconds in "
         "1..86400000"},
        {"--max-msg", OPT_U64, .dst = &o->max_msg, .lo = 4096,
         .hi = 2000000000, .bad = "is not a byte count in 4096..2000000000"},
        {"--max-reply-memory", OPT_U64, .dst = &o->max_reply_mem,
         .lo = 4096, .hi = 1ull << 50, .bad = "is not a byte count of at "
         "least 4096 (and at least --max-msg)"},
        {"--writeback", OPT_FN, .fn = add_writeback},
        {"--flush-ms", OPT_UINT, .dst = &o->flush_ms, .lo = 1,
         .hi = 86400000, .bad = "is not a number of milliseconds in "
         "1..86400000"},
        {NULL},
    };
    const struct tools_opt_parser parser = {
        .prog = PROG, .opts = opts, .usage = usage, .version = version,
        .ctx = w,
    };
    int rc;

    snprintf(version, sizeof version, PROG " %s (protocol %d)",
             GKV_VERSION_STRING, GKV_NET_PROTO);
    if ((rc = tools__opt_parse(&parser, argc, argv)) != 0)
        return rc;
    o->part_id = part_id == UINT_MAX ? -1 : (int)part_id;
    o->machine = machine == UINT_MAX ? -1 : (int)machine;
    if (w->n > 0)
        o->writeback = w->name;
    if (o->flush_ms != 0 && w->n == 0)
        return tools__usage_error(PROG, "--flush-ms needs --writeback");
    if (w->n > 0 && o->num_servers > 1)
        return tools__usage_error(PROG, "--writeback needs one server per "
                                  "machine (--num-servers 1): each server "
                                  "process would keep its own copy of the "
                                  "tensors");
    if (o->store == NULL && o->part_config == NULL)
        return tools__usage_error(PROG, "--store DIR or --part-config FILE is "
                                  "required");
    if (o->part_config != NULL && o->part_id < 0)
        return tools__usage_error(PROG, "--part-config needs --part-id P");
    if (o->part_config == NULL && o->part_id >= 0)
        return tools__usage_error(PROG, "--part-id needs --part-config FILE");
    if (o->ip_config == NULL)
        return tools__usage_error(PROG, "--ip-config FILE is required");
    if (o->server_id >= (o->num_servers ? o->num_servers : 1))
        return tools__usage_error(PROG, "--server-id %u must be below "
                                  "--num-servers", o->server_id);
    return 0;
}

int
main(int argc, char **argv)
{
    gkv_server_opts o;
    struct gate_opts go;
    struct wb wb = {{NULL}, 0};
    gkv_server *srv = NULL;
    gkv_err rc;
    int urc;

    memset(&o, 0, sizeof o);
    memset(&go, 0, sizeof go);
    if ((urc = parse_args(&o, &go, &wb, argc, argv)) != 0)
        return urc;
    go.quiet = (o.flags & GKV_SERVER_QUIET) != 0;
    go.max_msg = o.max_msg;
    /* before the socket listens: every connection is gated */
    if (gate_start(&go) != GKV_OK) {
        fprintf(stderr, PROG ": out of memory for the connection gate\n");
        return EX_FAIL;
    }
    /* SIGHUP too: a closed terminal or ssh session, or a log-rotating
     * HUP, stops the server as SIGTERM does (write-back pushes written,
     * store synced), never the default death that loses them */
    tools__stop_signals(on_signal);
    if ((rc = gkv_server_open(&srv, &o)) != GKV_OK) {
        const char *t = tools__err_text(rc, gkv_net_errmsg());
        fprintf(stderr, PROG ": %s%s%s\n", t != NULL ? t : "",
                t != NULL ? ": " : "", gkv_net_errmsg());
        return EX_FAIL;
    }
    if ((rc = gkv_server_set_gate(srv, gate_hook())) != GKV_OK) {
        fprintf(stderr, PROG ": %s\n", gkv_net_errmsg());
        gkv_server_close(srv);
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
