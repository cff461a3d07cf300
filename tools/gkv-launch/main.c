/* gkv-launch - starts a gkv job: servers and trainers on the machines of an
 * ip_config, watched until the job ends.
 *
 *   gkv-launch --ip-config FILE (--part-config G.json | --store DIR)
 *              --num-servers S --num-trainers T [options] -- COMMAND...
 *
 * Per machine m of the ip_config: S gkv-server processes (server k on the
 * machine's port + k), then, once every server of the job accepts TCP
 * connections, T trainer processes running COMMAND. Roles travel in GKV_*
 * environment variables (doc/DEPLOY.md lists them); every trainer gets a
 * (GKV_GROUP, GKV_RANK) of its own, the identity it joins the servers
 * with, and every server --num-clients with their number. The trainers
 * make their mini-batches with the loader's worker threads (gkv_loader);
 * --num-samplers K, which used to start sampler processes that could not
 * hand their batches over, is kept as a deprecated way to set those
 * threads (GKV_LOADER_WORKERS=K) and starts nothing.
 *
 * Local machines (an address of this host) get plain child processes, each
 * in a process group of its own; remote ones get
 *   ssh -o BatchMode=yes [-p P] [U@]HOST 'cd CWD; exec setsid -w sh -c
 *       '\''echo "@gkv-pgid $$"; exec "$0" "$@"'\'' env VAR=... CMD ARGS'
 * so the remote process runs in a session of its own whose id comes back as
 * the first line of its output; stopping it is `ssh HOST kill -TERM -- -PGID`
 * (then -KILL after the grace period).
 *
 * Under Slurm or an MPI launcher (one task per role, S + T tasks
 * per node) the task takes its role from its local rank and execs it.
 *
 * Exit status: 0 the job succeeded, 1 it failed (or was stopped by a
 * signal), 2 bad usage or inputs (nothing was started).
 *
 * --ssh-cmd PROG replaces ssh (the tests give a script that runs the
 * remote command string with sh -c, standing in for a real host) and
 * --force-ssh treats every machine as remote.
 *
 * The files, one concern each (launch.h has what they share):
 *   main.c      this: the order of the steps
 *   opts.c      the command line
 *   config.c    inputs checked and made absolute, the workspace
 *   env.c       each process's GKV_* environment and a server's argv
 *   proc.c      local processes: start, signal, reap, stop
 *   remote.c    ssh: which hosts are remote, the remote command line
 *   reuse.c     persistent (--keep-alive) servers a launch reuses
 *   token.c     the job's token: --token-file, or one made per job (or
 *               kept for persistent servers)
 *   cluster.c   Slurm and MPI: one role per task
 *   shutdown.c  --shutdown
 *   job.c       the job: servers, then trainers; waiting; stopping
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "launch.h"
#include "util.h"

volatile sig_atomic_t launch__sig;

static void
on_signal(int sig)
{
    launch__sig = sig;
}

int
main(int argc, char **argv)
{
    struct job j;
    int rc;

    tools__prog = PROG;
    memset(&j, 0, sizeof j);
    if ((rc = launch__parse_args(&j, argc, argv)) != EX_OK)
        return rc;
    tools__stop_signals(on_signal);
    if (launch__prepare(&j) != 0) {
        rc = EX_USAGE;
        goto out;
    }
    if (j.shutdown) {
        rc = launch__do_shutdown(&j);
        /* the persistent servers are gone: so is their token */
        if (rc == EX_OK && j.tok_persistent && j.token_file != NULL)
            unlink(j.tok_abs);
        goto out;
    }
    if ((rc = launch__cluster_task(&j)) >= 0)
        goto out;
    launch__workspace_path(&j);
    rc = launch__run_job(&j);
out:
    gkv_ipconfig_free(j.ipc);
    gkv_pbook_close(j.book);
    free(j.local);
    free(j.p);
    return rc;
}
