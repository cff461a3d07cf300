/* opts.c - the command line: usage text and option parsing into struct
 * job. */
#include <string.h>
#include "launch.h"
#include "opt.h"

static void
usage(FILE *f)
{
    fputs(
"Usage: gkv-launch --ip-config FILE (--part-config G.json | --store DIR)\n"
"                  --num-servers S --num-trainers T [options] -- COMMAND...\n"
"       gkv-launch --ip-config FILE --num-servers S --shutdown [--token-file F]\n"
"\n"
"Starts S gkv-server processes and T trainer processes running COMMAND on\n"
"every machine of the ip_config (ssh for remote hosts, local processes for\n"
"this host), waits until every server accepts connections before starting\n"
"the trainers, and watches them all: when one fails, all others are\n"
"stopped on every host, the failed one is named with its exit status and\n"
"the end of its log, and the exit status is 1. When every trainer exits 0\n"
"the servers are stopped (kept with --keep-alive) and the exit status is 0.\n"
"Roles and settings reach every process in GKV_* environment variables\n"
"(doc/DEPLOY.md); every trainer has a (GKV_GROUP, GKV_RANK) of its own to\n"
"connect with, and the job's token in GKV_TOKEN_FILE: no one else can use\n"
"the servers. Under srun or\n"
"mpirun each task runs one role instead (give --token-file there).\n"
"\n"
"Options:\n"
"  --ip-config FILE       the job's machines, one \"IP [PORT]\" per line\n"
"  --part-config G.json   serve partition m of G.json on machine m\n"
"  --store DIR            serve the store DIR (a '%m' in DIR becomes the\n"
"                         machine index)\n"
"  --num-servers S        servers per machine (>= 1)\n"
"  --num-trainers T       trainer processes per machine (>= 1)\n"
"  --num-samplers K       deprecated: starts no processes; sets each\n"
"                         trainer's GKV_LOADER_WORKERS=K, the worker threads\n"
"                         of its mini-batch loader (gkv_loader), which make\n"
"                         the batches it uses (sampler processes could not\n"
"                         hand theirs over)\n"
"  --workspace DIR        logs go to DIR/logs (default ./gkv-launch-PID, or\n"
"                         $TMPDIR/gkv-launch-PID when . is not writable)\n"
"  --keep-alive           leave the servers running after the job, also when\n"
"                         it fails (unless the servers failed); needs\n"
"                         --server-name\n"
"  --server-name N        the persistent servers' name: a later launch with\n"
"                         the same name reuses running servers when they\n"
"                         serve the same store or partition\n"
"  --group NAME           the job's group name (default job-HOST-PID; at\n"
"                         most 63 characters)\n"
"  --token-file F         the job's secret (mode 0600, at least 16 bytes),\n"
"                         passed to all (default: a random token made per\n"
"                         job in WORKSPACE/token, or, with --keep-alive,\n"
"                         kept for the persistent servers (and found by\n"
"                         --shutdown) in $XDG_STATE_HOME/gkv/\n"
"                         server-HOST-PORT.token, machine 0's address;\n"
"                         remote hosts must see it at the same path)\n"
"  --ssh-user U           ssh as user U\n"
"  --ssh-port P           ssh port P\n"
"  --ssh-cmd PROG         run PROG instead of ssh, with ssh's arguments\n"
"                         (-o BatchMode=yes [-p P] [U@]HOST COMMAND)\n"
"  --force-ssh            start local machines' processes through ssh too\n"
"  --server-bin PATH      the gkv-server program (default: the one next to\n"
"                         gkv-launch, else gkv-server on PATH)\n"
"  --server-arg ARG       one more argument for every server (repeatable;\n"
"                         not applied to persistent servers a launch reuses:\n"
"                         it says so)\n"
"  --timeout SEC          how long servers may take to accept connections\n"
"                         (default 60); with --shutdown, how long each\n"
"                         server may take to answer (default 5), and the\n"
"                         servers to exit and free their ports (default 60)\n"
"  --cluster MODE         auto (default), slurm, mpi or none: how to read\n"
"                         Slurm or MPI task variables\n"
"  --shutdown             stop the running servers of the ip_config\n"
"                         (persistent ones too), each one that answers,\n"
"                         and wait until they have exited and their ports\n"
"                         are free; exit 1 if any did not answer or exit\n"
"  -h, --help             print this help and exit\n"
"  -V, --version          print the version and exit\n"
"\n"
"Exit status: 0 the job succeeded, 1 it failed or was stopped, 2 bad usage\n"
"or inputs (nothing was started): among them a --part-config whose\n"
"partition count is not the number of machines, and persistent servers\n"
"that serve another store than this launch's.\n", f);
}

/* --server-arg ARG: one more argument for every server; ctx is the job. */
static int
add_server_arg(void *ctx, const char *val)
{
    struct job *j = ctx;

    if (j->nsargs == MAX_SARGS)
        return tools__usage_error(PROG, "more than %d --server-arg", MAX_SARGS);
    j->sargs[j->nsargs++] = val;
    return 0;
}

static int
set_cluster(void *ctx, const char *val)
{
    struct job *j = ctx;

    if (strcmp(val, "auto") && strcmp(val, "slurm") && strcmp(val, "mpi") &&
        strcmp(val, "none"))
        return tools__usage_error(PROG, "--cluster: '%s' is not auto, slurm, "
                                  "mpi or none", val);
    j->cluster = val;
    return 0;
}

int
launch__parse_args(struct job *j, int argc, char **argv)
{
    const struct tools_opt opts[] = {
        {"--ip-config", OPT_STR, .dst = &j->ip_config},
        {"--part-config", OPT_STR, .dst = &j->part_config},
        {"--store", OPT_STR, .dst = &j->store},
        {"--num-servers", OPT_UINT, .dst = &j->S, .lo = 1, .hi = 1000},
        {"--num-trainers", OPT_UINT, .dst = &j->T, .lo = 1, .hi = 100000},
        {"--num-samplers", OPT_UINT, .dst = &j->loader_workers, .lo = 0,
         .hi = 64, .bad = "is not a number of loader threads in 0..64"},
        {"--workspace", OPT_STR, .dst = &j->workspace},
        {"--keep-alive", OPT_FLAG, .dst = &j->keep_alive},
        {"--server-name", OPT_STR, .dst = &j->server_name},
        {"--group", OPT_STR, .dst = &j->group_opt},
        {"--token-file", OPT_STR, .dst = &j->token_file},
        {"--ssh-user", OPT_STR, .dst = &j->ssh_user},
        {"--ssh-port", OPT_UINT, .dst = &j->ssh_port, .lo = 1, .hi = 65535,
         .bad = "is not a port in 1..65535"},
        {"--server-bin", OPT_STR, .dst = &j->server_bin},
        {"--server-arg", OPT_FN, .fn = add_server_arg, .flags = OPT_EMPTY_OK},
        {"--timeout", OPT_UINT, .dst = &j->timeout_arg, .lo = 1, .hi = 86400,
         .bad = "is not a number of seconds in 1..86400"},
        {"--cluster", OPT_FN, .fn = set_cluster},
        {"--shutdown", OPT_FLAG, .dst = &j->shutdown},
        {"--ssh-cmd", OPT_STR, .dst = &j->ssh_cmd},
        {"--force-ssh", OPT_FLAG, .dst = &j->force_ssh},
        {NULL},
    };
    char version[64];
    int rest, rc;
    const struct tools_opt_parser parser = {
        .prog = PROG, .opts = opts, .usage = usage, .version = version,
        .ctx = j, .rest = &rest,
        .operand_hint = " (the command to run goes after '--')",
    };

    snprintf(version, sizeof version, PROG " %s (protocol %d)",
             GKV_VERSION_STRING, GKV_NET_PROTO);
    if ((rc = tools__opt_parse(&parser, argc, argv)) != 0)
        return rc;
    if (rest >= 0) {
        j->cmd = argv + rest;
        j->ncmd = argc - rest;
    }
    j->timeout_s = j->timeout_arg != 0 ? j->timeout_arg : 60;
    if (j->ip_config == NULL)
        return tools__usage_error(PROG, "--ip-config FILE is required");
    if (j->S == 0)
        return tools__usage_error(PROG, "--num-servers S is required");
    if (j->shutdown)
        return EX_OK;
    if (j->T == 0)
        return tools__usage_error(PROG, "--num-trainers T is required");
    if ((j->part_config == NULL) == (j->store == NULL))
        return tools__usage_error(PROG, "give exactly one of --part-config "
                                  "G.json and --store DIR");
    if (j->keep_alive && j->server_name == NULL)
        return tools__usage_error(PROG, "--keep-alive needs --server-name N "
                                  "(a later launch finds the servers by that "
                                  "name)");
    if (j->server_name != NULL &&
        (j->server_name[0] == '\0' || strlen(j->server_name) > 255))
        return tools__usage_error(PROG, "--server-name: 1..255 characters");
    if (j->cmd == NULL)
        return tools__usage_error(PROG, "no command: put the trainer command "
                                  "after '--'");
    if (j->ncmd == 0)
        return tools__usage_error(PROG, "no command after '--'");
    if (j->group_opt != NULL) {
        size_t n = strlen(j->group_opt);
        int ok = n >= 1 && n <= GKV_NET_GROUP_MAX;
        for (size_t i = 0; ok && i < n; i++)
            ok = j->group_opt[i] > ' ' && j->group_opt[i] < 127;
        if (!ok)
            return tools__usage_error(PROG, "--group: '%s' is not 1..%d "
                                      "printable characters without spaces",
                                      j->group_opt, GKV_NET_GROUP_MAX);
    }
    return EX_OK;
}
