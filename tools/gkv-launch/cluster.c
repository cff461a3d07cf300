/* cluster.c - Slurm and MPI: one task per role, taken from the task's
 * local rank. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "idlist.h"
#include "launch.h"
#include "util.h"

const char *
launch__env_get(const char *name)
{
    const char *v = getenv(name);

    return v != NULL && *v != '\0' ? v : NULL;
}

static int
env_num(const char *name, unsigned *out)
{
    const char *v = launch__env_get(name);
    uint64_t n;

    if (v == NULL || tools__parse_u64(v, &n) != 0 || n > 1u << 30)
        return 0;
    *out = (unsigned)n;
    return 1;
}

/* Whether Slurm's tasks-per-node list ("3(x2)", "4,2", "3(x2),3") gives
 * every node n tasks. */
static int
tasks_per_node_is(const char *v, unsigned n)
{
    while (*v != '\0') {
        char *end;
        unsigned long k = strtoul(v, &end, 10);

        if (end == v || k != n)
            return 0;
        v = end;
        if (strncmp(v, "(x", 2) == 0) {
            strtoul(v + 2, &end, 10);
            if (end == v + 2 || *end != ')')
                return 0;
            v = end + 1;
        }
        if (*v == ',')
            v++;
        else if (*v != '\0')
            return 0;
    }
    return 1;
}

/* Whether every machine of the ip_config is a loopback address. */
static int
all_loopback(const struct job *j)
{
    for (unsigned m = 0; m < j->M; m++) {
        const char *h = gkv_ipconfig_machine(j->ipc, m)->host;

        if (strncmp(h, "127.", 4) != 0 && strcmp(h, "::1") != 0 &&
            strcmp(h, "[::1]") != 0 && strcmp(h, "localhost") != 0)
            return 0;
    }
    return 1;
}

/* Whether PMI_RANK/PMI_SIZE are the srun step's own task numbers (srun
 * --mpi=pmi2 sets both), not those of an mpirun whose proxies srun
 * started. */
static int
pmi_is_slurms(void)
{
    unsigned pr, ps, sr, sn;

    return launch__env_get("SLURM_STEP_ID") != NULL &&
           env_num("PMI_RANK", &pr) && env_num("PMI_SIZE", &ps) &&
           env_num("SLURM_PROCID", &sr) && env_num("SLURM_NTASKS", &sn) &&
           pr == sr && ps == sn;
}

/* Runs this task's one role when started by Slurm or MPI. Returns an exit
 * status, or -1 when no cluster launcher is detected. */
int
launch__cluster_task(struct job *j)
{
    unsigned L = j->S + j->T, rank = 0, size = 0, node, local;
    unsigned nnodes = 0;
    const char *kind = NULL, *mode = j->cluster ? j->cluster : "auto";
    struct proc p;
    char **genv, **envp, **argv, num[4][16], st[PATH_MAX];
    struct ifaddrs *ifs = NULL;
    int is_local;

    if (strcmp(mode, "none") == 0)
        return -1;
    /* Open MPI's launcher first: ranks that mpirun starts inside a Slurm
     * allocation inherit its daemons' SLURM_* too. Slurm only inside an
     * srun step (SLURM_STEP_ID): the batch script of sbatch -N2
     * --ntasks-per-node=3 has SLURM_PROCID 0 and SLURM_NTASKS 6 as well,
     * and gkv-launch run there launches over ssh */
    if (strcmp(mode, "mpi") == 0 || (strcmp(mode, "auto") == 0 &&
        launch__env_get("OMPI_COMM_WORLD_RANK")))
        kind = "mpi";
    else if (strcmp(mode, "auto") == 0 && launch__env_get("PMI_RANK") &&
             !pmi_is_slurms())
        kind = "mpi";       /* MPICH/Intel MPI's mpirun, its proxies
                             * started by srun: their SLURM_* count nodes */
    else if (strcmp(mode, "slurm") == 0 ||
             (strcmp(mode, "auto") == 0 && launch__env_get("SLURM_PROCID") &&
              launch__env_get("SLURM_STEP_ID") &&
              env_num("SLURM_NTASKS", &size) && size > 1))
        kind = "slurm";
    else if (strcmp(mode, "auto") == 0 && launch__env_get("PMI_RANK"))
        kind = "mpi";
    if (kind == NULL)
        return -1;
    if (j->keep_alive) {
        tools__note("%s: --keep-alive does not go with a cluster launcher: the "
            "server tasks would never end, so the step would not either; "
            "start persistent servers in a step of their own, or launch "
            "over ssh (--cluster none)", kind);
        return EX_USAGE;
    }
    if (strcmp(kind, "slurm") == 0) {
        static const char *const need[4] = {"SLURM_PROCID", "SLURM_NTASKS",
                                             "SLURM_NODEID", "SLURM_LOCALID"};
        unsigned *dst[4] = {&rank, &size, &node, &local};
        const char *tpn;

        for (int i = 0; i < 4; i++)
            if (!env_num(need[i], dst[i])) {
                if (launch__env_get(need[i]) != NULL)
                    tools__note("Slurm: %s='%s' is not a number", need[i],
                        launch__env_get(need[i]));
                else
                    tools__note(
                        "Slurm: SLURM_PROCID, SLURM_NTASKS, SLURM_NODEID and "
                        "SLURM_LOCALID must all be set (run under srun); %s "
                        "is not",
                        need[i]);
                return EX_USAGE;
            }
        /* the step's tasks per node, the same in every task: a layout
         * that does not fit is refused by all of them, not only by the
         * task past the end (the others would start and wait) */
        if ((tpn = launch__env_get("SLURM_STEP_TASKS_PER_NODE")) != NULL &&
            !tasks_per_node_is(tpn, L)) {
            tools__note("Slurm: the step places tasks %s per node "
                "(SLURM_STEP_TASKS_PER_NODE), but this job needs %u on every "
                "node (S + T = %u + %u): srun --ntasks-per-node=%u", tpn, L,
                j->S, j->T, L);
            return EX_USAGE;
        }
    } else {
        unsigned lr;
        int has_lr = env_num("OMPI_COMM_WORLD_LOCAL_RANK", &lr) ||
                     env_num("MPI_LOCALRANKID", &lr);

        if (!((env_num("OMPI_COMM_WORLD_RANK", &rank) &&
               env_num("OMPI_COMM_WORLD_SIZE", &size)) ||
              (env_num("PMI_RANK", &rank) && env_num("PMI_SIZE", &size)))) {
            tools__note(
                "MPI: need OMPI_COMM_WORLD_RANK and OMPI_COMM_WORLD_SIZE, or "
                "PMI_RANK and PMI_SIZE");
            return EX_USAGE;
        }
        node = rank / L;
        local = rank % L;
        if (has_lr && lr != local) {
            tools__note(
                "MPI: rank %u has local rank %u, but the layout needs ranks "
                "placed in blocks of %u per node (S + T = %u + %u), so local "
                "rank %u (e.g. mpirun --map-by ppr:%u:node)",
                rank, lr, L, j->S, j->T, local, L);
            return EX_USAGE;
        }
    }
    if (size != j->M * L || node >= j->M || local >= L) {
        tools__note(
            "%s layout does not match the job: %u tasks (this one on node %u, "
            "local rank %u), but %u machines in %s x (%u servers + %u trainers) "
            "need %u tasks, %u per node (use --cluster none to launch over "
            "ssh instead)",
            kind, size, node, local, j->M, j->ip_config, j->S, j->T,
            j->M * L, L);
        return EX_USAGE;
    }
    if (strcmp(kind, "slurm") == 0 && env_num("SLURM_NNODES", &nnodes) &&
        nnodes != j->M) {
        tools__note("Slurm: %u nodes, but %s lists %u machines", nnodes,
                    j->ip_config, j->M);
        return EX_USAGE;
    }
    if (strcmp(kind, "slurm") == 0 && nnodes > 1 && all_loopback(j)) {
        /* every node would take itself for every machine: the ordering
         * check below cannot tell, and other nodes' trainers time out */
        tools__note("Slurm: %u nodes, but every machine of %s is a loopback "
            "address: list the nodes' addresses, in node order (scontrol "
            "show hostnames \"$SLURM_JOB_NODELIST\")", nnodes, j->ip_config);
        return EX_USAGE;
    }
    if (getifaddrs(&ifs) == 0) {
        is_local = launch__host_is_local(
            gkv_ipconfig_machine(j->ipc, node)->host, ifs);
        freeifaddrs(ifs);
        if (!is_local) {
            tools__note(
                "%s node %u runs machine %u of %s (line %u: %s), but that "
                "address is not one of this host's: order the ip_config like "
                "the nodes",
                kind, node, node, j->ip_config,
                gkv_ipconfig_machine(j->ipc, node)->line,
                gkv_ipconfig_machine(j->ipc, node)->host);
            return EX_USAGE;
        }
    }
    if (j->group_opt == NULL) {
        const char *ns;
        int len;
        if (strcmp(kind, "slurm") == 0)
            len = snprintf(j->group, sizeof j->group, "slurm-%s-%s",
                           launch__env_get("SLURM_JOB_ID")
                               ? launch__env_get("SLURM_JOB_ID")
                               : "0",
                           launch__env_get("SLURM_STEP_ID")
                               ? launch__env_get("SLURM_STEP_ID")
                               : "0");
        else if ((ns = launch__env_get("PMIX_NAMESPACE")) != NULL ||
                 (ns = launch__env_get("OMPI_MCA_ess_base_jobid")) != NULL)
            len = snprintf(j->group, sizeof j->group, "mpi-%s", ns);
        else {
            tools__note(
                "MPI: cannot derive a group name shared by all tasks (no "
                "PMIX_NAMESPACE): give --group NAME");
            return EX_USAGE;
        }
        if (len < 0 || (size_t)len >= sizeof j->group) {
            tools__note(
                "%s: the group name derived from the job's variables is "
                "longer than %d characters: give --group NAME",
                kind, GKV_NET_GROUP_MAX);
            return EX_USAGE;
        }
    }
    /* every task of this run, and only of this run, says the same: a
     * requeued Slurm job counts its restarts */
    if (strcmp(kind, "slurm") == 0) {
        snprintf(
            j->instance, sizeof j->instance, "slurm-%.40s.%.20s.%.20s",
            launch__env_get("SLURM_JOB_ID") ? launch__env_get("SLURM_JOB_ID")
                                            : "0",
            launch__env_get("SLURM_STEP_ID") ? launch__env_get("SLURM_STEP_ID")
                                             : "0",
            launch__env_get("SLURM_RESTART_COUNT")
                ? launch__env_get("SLURM_RESTART_COUNT")
                : "0");
    } else {
        const char *ns = launch__env_get("PMIX_NAMESPACE");
        if (ns == NULL)
            ns = launch__env_get("OMPI_MCA_ess_base_jobid");
        /* none shared by all tasks: no instance (as before it) */
        snprintf(j->instance, sizeof j->instance, "%s%.140s", ns ? "mpi-" : "",
                 ns ? ns : "");
    }
    memset(&p, 0, sizeof p);
    p.machine = node;
    if (local < j->S) {
        p.role = R_SERVER;
        p.idx = local;
        p.rank = node * j->S + local;
    } else {
        p.role = R_TRAINER;
        p.idx = local - j->S;
        p.rank = node * j->T + p.idx;
    }
    launch__proc_name(j, &p);
    genv = launch__proc_env(j, &p);
    envp = launch__merged_env(genv);
    argv = p.role == R_SERVER ? launch__server_argv(j, &p, num, st, sizeof st)
                              : j->cmd;
    tools__say("%s task %u of %u: %s on machine %u", kind, rank, size, p.name,
               node);
    if (p.role != R_SERVER && launch__wait_all_ports(j) != 0)
        return EX_FAIL;
    signal(SIGPIPE, SIG_DFL);          /* ignored here, not in what runs */
    execvpe(argv[0], argv, envp);
    tools__note("cannot run %s: %s", argv[0], strerror(errno));
    return 127;
}
