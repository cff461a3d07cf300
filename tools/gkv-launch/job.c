/* job.c - running a job: servers first, then the trainers once
 * every server accepts connections; watching them until the job ends, and
 * stopping them all when one fails. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "launch.h"
#include "util.h"

/* Waits until every server of the job accepts connections (or the
 * deadline, or a signal). 0 when they all do. */
int
launch__wait_all_ports(struct job *j)
{
    double end = tools__now_s() + j->timeout_s;

    for (unsigned m = 0; m < j->M; m++) {
        const gkv_machine *mc = gkv_ipconfig_machine(j->ipc, m);
        for (unsigned k = 0; k < j->S; k++)
            while (!tools__port_accepts(mc->host, mc->port + k, 200)) {
                if (launch__sig) {
                    tools__note(
                        "stopped by signal %d while waiting for servers",
                        (int)launch__sig);
                    return -1;
                }
                if (tools__now_s() > end) {
                    tools__note(
                        "server %u/%u (%s:%u) did not accept connections "
                        "within %.0f s",
                        m, k, mc->host, mc->port + k, j->timeout_s);
                    return -1;
                }
                tools__sleep_ms(50);
            }
    }
    return 0;
}

static void
build_procs(struct job *j)
{
    size_t per = j->S + (size_t)j->T, n = 0;

    j->p = tools__xcalloc(j->M * per, sizeof *j->p);
    for (unsigned m = 0; m < j->M; m++) {
        for (unsigned k = 0; k < j->S; k++) {
            struct proc *p = &j->p[n++];
            p->role = R_SERVER;
            p->machine = m;
            p->idx = k;
            p->rank = m * j->S + k;
        }
        for (unsigned t = 0; t < j->T; t++) {
            struct proc *p = &j->p[n++];
            p->role = R_TRAINER;
            p->machine = m;
            p->idx = t;
            p->rank = m * j->T + t;
        }
    }
    j->np = n;
    for (size_t i = 0; i < n; i++) {
        j->p[i].remote = !j->local[j->p[i].machine];
        launch__proc_name(j, &j->p[i]);
    }
}

/* --keep-alive: says that the servers stay and how to stop them. */
static void
say_servers_kept(struct job *j)
{
    tools__say("--keep-alive: leaving the servers running (persistent server "
        "'%s'; stop them with: " PROG " --ip-config %s --num-servers %u "
        "--shutdown%s%s)", j->server_name, j->ipc_abs, j->S,
        launch__token_shown(j) ? " --token-file " : "", launch__token_shown(j) ? j->tok_abs : "");
    for (size_t i = 0; i < j->np; i++)
        if (j->p[i].role == R_SERVER && launch__proc_live(&j->p[i]))
            tools__say("%s keeps running (pid %ld)", j->p[i].name,
                       (long)j->p[i].pid);
}

/* Stops the trainers, then the servers we started, except
 * that with --keep-alive the servers stay (whether this launch started
 * them or reused them) unless they are what failed. */
static void
stop_job(struct job *j, int servers_failed)
{
    launch__stop_procs(j, R_TRAINER);
    if (j->keep_alive && !servers_failed) {
        if (launch__count_live(j, R_SERVER) > 0 || launch__nreused(j) > 0)
            say_servers_kept(j);
        return;
    }
    launch__stop_procs(j, -1);
}

/* Reports failure of p (or 'why' alone), stops the job (stop_job; a failed
 * server, or servers_failed, stops the servers too), returns EX_FAIL. */
static int
fail_job(struct job *j, struct proc *p, const char *why, int servers_failed)
{
    char how[96];

    if (p != NULL) {
        launch__describe_status(p->status, how, sizeof how);
        tools__note("%s (machine %u) failed: %s%s%s", p->name, p->machine, how,
            why ? ": " : "", why ? why : "");
        servers_failed |= p->role == R_SERVER;
    } else {
        tools__note("%s", why);
    }
    if (launch__count_live(j, -1) > 0)
        tools__say("stopping every other process of the job%s",
            j->keep_alive && !servers_failed ? " but the servers" : "");
    stop_job(j, servers_failed);
    if (p != NULL)
        launch__print_tail(p->log);
    tools__note("job failed; logs in %s/logs", j->ws);
    return EX_FAIL;
}

static int
stopped_by_signal(struct job *j)
{
    tools__note("got %s: stopping every process of the job%s",
                strsignal((int)launch__sig),
                j->keep_alive ? " but the servers" : "");
    stop_job(j, 0);
    tools__note("job stopped; logs in %s/logs", j->ws);
    return EX_FAIL;
}

/* Value of server option 'opt' among the --server-arg words ("--opt V"
 * or "--opt=V"), or NULL; the last one given wins, as in gkv-server. */
static const char *
sarg_value(const struct job *j, const char *opt)
{
    const char *v = NULL;
    size_t n = strlen(opt);

    for (int i = 0; i < j->nsargs; i++) {
        if (strcmp(j->sargs[i], opt) == 0 && i + 1 < j->nsargs)
            v = j->sargs[++i];
        else if (strncmp(j->sargs[i], opt, n) == 0 && j->sargs[i][n] == '=')
            v = j->sargs[i] + n + 1;
    }
    return v;
}

/* A launch that reuses persistent servers and gives --server-arg: the
 * running servers keep the options they were started with (a server
 * takes its options at its start only), so say so, naming the options,
 * rather than let the operator believe they apply. The handshake tells
 * the lease (--heartbeat-timeout) and message limit (--max-msg) of each
 * server, so a difference in those is named per server; the others (e.g.
 * --writeback, --nosync, --threads) it does not tell. */
static void
say_sargs_not_applied(struct job *j, size_t nre)
{
    static const struct { const char *opt; int lease; } shown[] = {
        {"--heartbeat-timeout", 1}, {"--max-msg", 0},
    };
    char *list = NULL, stop[2 * PATH_MAX + 128];
    size_t len = 0, cap = 0, nsrv = (size_t)j->M * j->S;

    if (j->nsargs == 0 || nre == 0)
        return;
    for (int i = 0; i < j->nsargs; i++) {
        const char *a = j->sargs[i];
        int plain = *a != '\0';

        /* quoted for a shell when it holds anything but these */
        for (const char *c = a; *c && plain; c++)
            plain = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                    (*c >= '0' && *c <= '9') || strchr("-_./:=,@+%", *c);
        if (i > 0)
            launch__raw_append(&list, &len, &cap, " ");
        if (plain)
            launch__raw_append(&list, &len, &cap, a);
        else
            launch__sq_append(&list, &len, &cap, a);
    }
    snprintf(stop, sizeof stop, PROG " --ip-config %s --num-servers %u "
             "--shutdown%s%s", j->ipc_abs, j->S,
             launch__token_shown(j) ? " --token-file " : "",
             launch__token_shown(j) ? j->tok_abs : "");
    if (nre == nsrv)
        tools__say(
            "note: the %zu reused server%s (persistent server '%s') keep%s "
            "the options %s started with: this launch's --server-arg %s %s "
            "NOT applied (to change server options, stop the servers: %s, "
            "and launch again)",
            nre, nre == 1 ? "" : "s", j->server_name, nre == 1 ? "s" : "",
            nre == 1 ? "it was" : "they were", list,
            j->nsargs == 1 ? "is" : "are", stop);
    else
        tools__say("note: %zu of the %zu servers %s reused (persistent server "
            "'%s') and keep%s the options %s started with: this launch's "
            "--server-arg %s %s NOT applied to %s, only to the %zu server%s "
            "it starts, so the job's servers may run with different "
            "options (to give them all the same, stop the servers: %s, and "
            "launch again)", nre, nsrv, nre == 1 ? "is" : "are",
            j->server_name, nre == 1 ? "s" : "",
            nre == 1 ? "it was" : "they were", list,
            j->nsargs == 1 ? "is" : "are", nre == 1 ? "it" : "them",
            nsrv - nre, nsrv - nre == 1 ? "" : "s", stop);
    free(list);
    for (size_t o = 0; o < sizeof shown / sizeof shown[0]; o++) {
        const char *v = sarg_value(j, shown[o].opt);
        unsigned long long want;
        char *end;

        if (v == NULL)
            continue;
        errno = 0;
        want = strtoull(v, &end, 10);
        if (errno != 0 || end == v || *end != '\0')
            continue; /* a server started with it would refuse it */
        for (size_t i = 0; i < j->np; i++) {
            const struct proc *p = &j->p[i];
            unsigned long long have;

            if (p->role != R_SERVER || !p->reused)
                continue;
            have = shown[o].lease ? p->hs_lease_ms : p->hs_max_msg;
            if (have != want)
                tools__say("note: reused %s runs with %s %llu, not %s as given",
                    p->name, shown[o].opt, have, v);
        }
    }
}

int
launch__run_job(struct job *j)
{
    struct proc *bad;
    int nlisten = 0, nsrv = (int)(j->M * j->S);
    double end, server_gone = 0;

    build_procs(j);
    tools__say("job %s: %u machine%s, %u server%s and %u trainer%s each",
        j->group, j->M, j->M == 1 ? "" : "s", j->S,
        j->S == 1 ? "" : "s", j->T, j->T == 1 ? "" : "s");
    if (j->loader_workers > 0)
        tools__say("--num-samplers %u (deprecated): no sampler processes; "
            "each trainer's loader gets %u worker thread%s "
            "(GKV_LOADER_WORKERS=%u)", j->loader_workers, j->loader_workers,
            j->loader_workers == 1 ? "" : "s", j->loader_workers);
    /* which servers are up already */
    for (size_t i = 0; i < j->np; i++) {
        struct proc *p = &j->p[i];
        const gkv_machine *mc = gkv_ipconfig_machine(j->ipc, p->machine);
        if (p->role == R_SERVER &&
            tools__port_accepts(mc->host, mc->port + p->idx, 300)) {
            p->reused = 1;
            p->ready = 1;
            nlisten++;
        }
    }
    if (nlisten > 0 && !j->keep_alive) {
        for (size_t i = 0; i < j->np; i++)
            if (j->p[i].reused) {
                const gkv_machine *mc =
                    gkv_ipconfig_machine(j->ipc, j->p[i].machine);
                tools__note(
                    "port %s:%u of %s is already in use (a server left from "
                    "an earlier job? doc/DEPLOY.md says how to find and stop "
                    "it)",
                    mc->host, mc->port + j->p[i].idx, j->p[i].name);
            }
        return EX_FAIL;
    }
    if (nlisten > 0) {
        /* --keep-alive: the running ones must be this job's persistent
         * servers, checked before anything starts */
        int rc = launch__check_reused(j);
        if (rc != EX_OK) {
            tools__note("nothing was started");
            return rc;
        }
        for (size_t i = 0; i < j->np; i++)
            if (j->p[i].reused) {
                const gkv_machine *mc =
                    gkv_ipconfig_machine(j->ipc, j->p[i].machine);
                tools__say("reusing %s on %s:%u (persistent server '%s')",
                    j->p[i].name, mc->host, mc->port + j->p[i].idx,
                    j->server_name);
            }
        say_sargs_not_applied(j, (size_t)nlisten);
    }
    if (launch__make_workspace(j) != 0 || launch__token_job(j) != 0) {
        tools__note("nothing was started");
        return EX_USAGE;
    }
    tools__say("workspace %s (logs in %s/logs, token %s)", j->ws, j->ws,
               j->tok_abs);
    for (size_t i = 0; i < j->np; i++) {
        struct proc *p = &j->p[i];
        if (p->role != R_SERVER || p->reused)
            continue;
        if (launch__proc_start(j, p) != 0)
            return fail_job(j, NULL, "could not start every server", 1);
    }
    end = tools__now_s() + j->timeout_s;
    for (;;) {
        int ready = 0;
        if (launch__sig)
            return stopped_by_signal(j);
        if ((bad = launch__reap(j)) != NULL)
            return fail_job(j, bad, "it exited before the job started", 1);
        for (size_t i = 0; i < j->np; i++) {
            struct proc *p = &j->p[i];
            const gkv_machine *mc = gkv_ipconfig_machine(j->ipc, p->machine);
            if (p->role != R_SERVER)
                continue;
            if (!p->ready && launch__proc_live(p) &&
                tools__port_accepts(mc->host, mc->port + p->idx, 100))
                p->ready = 1;
            if (!p->reused && p->reaped)
                return fail_job(j, p, "it exited before the job started", 1);
            ready += p->ready;
        }
        if (ready == nsrv)
            break;
        if (tools__now_s() > end) {
            for (size_t i = 0; i < j->np; i++) {
                struct proc *p = &j->p[i];
                if (p->role == R_SERVER && !p->ready) {
                    const gkv_machine *mc =
                        gkv_ipconfig_machine(j->ipc, p->machine);
                    tools__note(
                        "%s (%s:%u) did not accept connections within %.0f s",
                        p->name, mc->host, mc->port + p->idx, j->timeout_s);
                    launch__print_tail(p->log);
                }
            }
            return fail_job(j, NULL, "servers did not start in time", 1);
        }
        tools__sleep_ms(30);
    }
    tools__say("all %d servers accept connections", nsrv);
    for (size_t i = 0; i < j->np; i++) {
        if (j->p[i].role == R_SERVER)
            continue;
        if (launch__proc_start(j, &j->p[i]) != 0)
            return fail_job(j, NULL, "could not start every trainer", 0);
    }
    for (;;) {
        size_t workers;
        if (launch__sig)
            return stopped_by_signal(j);
        if ((bad = launch__reap(j)) != NULL)
            return fail_job(j, bad, NULL, 0);
        for (size_t i = 0; i < j->np; i++)
            if (j->p[i].remote && j->p[i].rpgid == 0 &&
                launch__proc_live(&j->p[i]))
                launch__proc_find_rpgid(&j->p[i]);
        workers = launch__count_live(j, R_TRAINER);
        if (workers == 0)
            break;
        /* a server that stopped normally (exit 0) while trainers still run:
         * they may only be finishing; give them a while */
        for (size_t i = 0; i < j->np && server_gone == 0; i++)
            if (j->p[i].role == R_SERVER && j->p[i].started && j->p[i].reaped) {
                server_gone = tools__now_s();
                tools__say(
                    "%s stopped while %zu trainer processes still "
                    "run; they have %.0f s to finish",
                    j->p[i].name, workers, SERVER_GONE_GRACE_S);
            }
        if (server_gone > 0 &&
            tools__now_s() - server_gone > SERVER_GONE_GRACE_S) {
            for (size_t i = 0; i < j->np; i++)
                if (j->p[i].role == R_SERVER && j->p[i].started &&
                    j->p[i].reaped)
                    return fail_job(j, &j->p[i], "a server exited while "
                                    "trainers still ran", 1);
        }
        tools__sleep_ms(20);
    }
    tools__say("all trainers exited 0");
    if (j->keep_alive) {
        say_servers_kept(j);
        return EX_OK;
    }
    for (size_t i = 0; i < j->np; i++)
        if (j->p[i].role == R_SERVER && launch__proc_live(&j->p[i]))
            j->p[i].stopping = 1;
    if (launch__stop_procs(j, R_SERVER) > 0) {
        tools__note("some servers had to be killed; logs in %s/logs", j->ws);
        return EX_FAIL;
    }
    for (size_t i = 0; i < j->np; i++)
        if (j->p[i].role == R_SERVER && j->p[i].started &&
            j->p[i].status != 0) {
            char how[96];
            launch__describe_status(j->p[i].status, how, sizeof how);
            tools__note("%s failed while stopping: %s", j->p[i].name, how);
            launch__print_tail(j->p[i].log);
            return EX_FAIL;
        }
    tools__say("job done; logs in %s/logs", j->ws);
    return EX_OK;
}
