/* launch_test.c - gkv-launch with real processes on loopback: the
 * environment every role gets, failure and signal handling (nothing left
 * running, no port held), a port taken, Slurm and MPI task layouts, the
 * ssh path through a stand-in ssh that runs the remote command string with
 * sh -c, the examples, a late client.
 * Usage errors: launch_usage_test.c; persistent servers and --shutdown:
 * launch_keep_alive_test.c; the shared fixture: gkvt_launch.c.
 *
 * The trainer COMMAND is this program again ("launch_test --child MODE"),
 * and ports are picked as gkvt_launch.h says.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "gkvt.h"
#include "gkvt_graph.h"
#include "gkv_net.h"
#include "util.h"
#include "gkvt_launch.h"

static void
test_env(void **state)
{
    struct gkvt_lt_fx *f = *state;
    const char *args[] = {"--ip-config", f->cfg, "--store", f->store,
        "--num-servers", "2", "--num-trainers", "2",
        "--num-samplers", "2", "--workspace", f->ws, "--group", "g-env",
        "--", gkvt_lt_self, "--child", "env", "x y", NULL};
    pid_t sp[8];
    int rc, ns;
    char want[PATH_MAX + 64];
    char ids[2][96];                 /* (group, rank) of every client */
    char inst0[PATH_MAX] = "";
    int nid = 0;

    gkvt_lt_ports(f);
    /* an inherited copy is replaced by --num-samplers' value */
    setenv("GKV_LOADER_WORKERS", "9", 1);
    rc = gkvt_lt_retry(f, args, NULL, 20);
    unsetenv("GKV_LOADER_WORKERS");
    gkvt_lt_expect_ok(f, rc, "the launch");
    ns = gkvt_lt_server_pids(f, sp, 8);
    assert_int_equal(ns, 2);
    /* --num-samplers 2 (deprecated) starts no sampler processes: it gives
     * each trainer's loader 2 worker threads, and says so */
    assert_true(gkvt_lt_has(f, "--num-samplers 2 (deprecated): no sampler "
                            "processes; each trainer's loader gets 2 worker "
                            "threads (GKV_LOADER_WORKERS=2)"));
    assert_false(gkvt_lt_has(f, "started sampler"));
    for (int i = 0; i < ns; i++) {
        gkvt_lt_track(f, sp[i]);
        assert_true(gkvt_lt_wait_gone(sp[i], 2000));          /* servers stopped */
    }
    for (int k = 0; k < 2; k++) {
        assert_true(gkvt_lt_port_closed(f->base + k));        /* and no port held */
        assert_true(gkvt_port_bindable(f->base + k, 1));
    }
    assert_true(gkvt_lt_has(f, "job done"));
    for (int r = 0; r < 2; r++) {
        char tag[32], num[16], *e, *pa, path[PATH_MAX + 64];
        pid_t tp;

        snprintf(tag, sizeof tag, "trainer-%d", r);
        snprintf(num, sizeof num, "%d", r);
        e = gkvt_lt_read_env(f, tag);
        GKVT_LT_ENV_EQ(e, "GKV_ROLE", "trainer");
        GKVT_LT_ENV_EQ(e, "GKV_RANK", num);
        GKVT_LT_ENV_EQ(e, "GKV_LOCAL_RANK", num);
        GKVT_LT_ENV_EQ(e, "GKV_SERVER_ID", num);             /* r mod 2 servers */
        GKVT_LT_ENV_EQ(e, "GKV_MACHINE", "0");
        GKVT_LT_ENV_EQ(e, "GKV_NUM_MACHINES", "1");
        GKVT_LT_ENV_EQ(e, "GKV_WORLD_SIZE", "2");
        GKVT_LT_ENV_EQ(e, "GKV_NUM_SERVERS", "2");
        GKVT_LT_ENV_EQ(e, "GKV_NUM_TRAINERS", "2");
        GKVT_LT_ENV_EQ(e, "GKV_NUM_SAMPLERS", "");
        GKVT_LT_ENV_EQ(e, "GKV_LOADER_WORKERS", "2");
        GKVT_LT_ENV_EQ(e, "GKV_GROUP", "g-env");
        GKVT_LT_ENV_EQ(e, "GKV_TRAINER_RANK", "");
        GKVT_LT_ENV_EQ(e, "GKV_IP_CONFIG", f->cfg);
        GKVT_LT_ENV_EQ(e, "GKV_STORE", f->store);
        GKVT_LT_ENV_EQ(e, "GKV_PART_CONFIG", "");
        snprintf(path, sizeof path, "%s/token", f->ws);  /* made per job */
        GKVT_LT_ENV_EQ(e, "GKV_TOKEN_FILE", path);
        GKVT_LT_ENV_EQ(e, "GKV_SERVER_NAME", "");
        GKVT_LT_ENV_EQ(e, "GKV_WORKSPACE", f->ws);
        /* torch.distributed's env:// for the trainers */
        GKVT_LT_ENV_EQ(e, "RANK", num);
        GKVT_LT_ENV_EQ(e, "LOCAL_RANK", num);
        GKVT_LT_ENV_EQ(e, "WORLD_SIZE", "2");
        GKVT_LT_ENV_EQ(e, "LOCAL_WORLD_SIZE", "2");
        GKVT_LT_ENV_EQ(e, "MASTER_ADDR", "127.0.0.1");
        GKVT_LT_ENV_EQ(e, "MASTER_PORT", "29500");
        {   /* one instance for the run: "launch-" and 16 hex digits */
            char in[PATH_MAX];
            gkvt_lt_env_in(e, "GKV_JOB_INSTANCE", in, sizeof in);
            assert_int_equal(strlen(in), 7 + 16);
            assert_int_equal(strncmp(in, "launch-", 7), 0);
            if (r == 0)
                snprintf(inst0, sizeof inst0, "%s", in);
            else
                assert_string_equal(in, inst0);
        }
        snprintf(ids[nid++], sizeof ids[0], "%s/%s",
                 gkvt_lt_env_in(e, "GKV_GROUP", path, sizeof path), num);
        free(e);
        snprintf(path, sizeof path, "%s/ports-%s", f->ws, tag);
        pa = gkvt_slurp(path);
        assert_string_equal(pa, "ok");               /* servers listened */
        free(pa);
        snprintf(path, sizeof path, "%s/args-%s", f->ws, tag);
        pa = gkvt_slurp(path);
        assert_string_equal(pa, "x y");
        free(pa);
        snprintf(path, sizeof path, "pid-%s", tag);
        tp = gkvt_lt_pid_file(f->ws, path);
        assert_true(tp > 0 && gkvt_lt_pid_gone(tp));
        snprintf(want, sizeof want, "started trainer rank %d", r);
        assert_true(gkvt_lt_has(f, want));
        snprintf(want, sizeof want, "trainer rank %d exited: exit status 0", r);
        assert_true(gkvt_lt_has(f, want));
        snprintf(want, sizeof want, "%s/logs/trainer-0-%d.log", f->ws, r);
        assert_true(access(want, F_OK) == 0);
        snprintf(want, sizeof want, "%s/logs/sampler-0-%d.log", f->ws, r);
        assert_true(access(want, F_OK) != 0);
    }
    /* no two clients share an identity on the servers */
    assert_int_equal(nid, 2);
    for (int a = 0; a < nid; a++)
        for (int b = a + 1; b < nid; b++)
            if (strcmp(ids[a], ids[b]) == 0)
                fail_msg("two processes are (group, rank) %s", ids[a]);
    for (int k = 0; k < 2; k++) {
        char path[PATH_MAX + 64], *t;
        snprintf(path, sizeof path, "%s/logs/server-0-%d.log", f->ws, k);
        t = gkvt_slurp(path);
        assert_non_null(strstr(t, "listening on"));
        assert_non_null(strstr(t, "stopped"));
        free(t);
    }
}

static void
test_failure(void **state)
{
    struct gkvt_lt_fx *f = *state;
    const char *args[] = {"--ip-config", f->cfg, "--store", f->store,
        "--num-servers", "1", "--num-trainers", "2",
        "--workspace", f->ws, "--", gkvt_lt_self, "--child", "fail", NULL};
    double t0;
    pid_t sp[4], r0;
    int rc;
    char *e;

    gkvt_lt_ports(f);
    t0 = tools__now_s();
    rc = gkvt_lt_retry(f, args, NULL, 20);
    assert_int_equal(rc, 1);
    /* stopped at the failure, not when trainer 0's sleep of 60 s ends */
    assert_true(tools__now_s() - t0 < 45);
    e = gkvt_slurp(f->err);
    assert_non_null(strstr(e, "trainer rank 1 (machine 0) failed: exit status 3"));
    assert_non_null(strstr(e, "rank 1 failing on purpose"));   /* log tail */
    assert_non_null(strstr(e, "last 20 lines of"));
    free(e);
    r0 = gkvt_lt_pid_file(f->ws, "pid-trainer-0");
    assert_true(r0 > 0);
    gkvt_lt_track(f, r0);
    assert_true(gkvt_lt_wait_gone(r0, 2000));
    assert_int_equal(gkvt_lt_server_pids(f, sp, 4), 1);
    gkvt_lt_track(f, sp[0]);
    assert_true(gkvt_lt_wait_gone(sp[0], 2000));
    assert_true(gkvt_lt_port_closed(f->base));
}

static void
test_sigterm(void **state)
{
    struct gkvt_lt_fx *f = *state;
    const char *args[] = {"--ip-config", f->cfg, "--store", f->store,
        "--num-servers", "2", "--num-trainers", "2",
        "--workspace", f->ws, "--", gkvt_lt_self, "--child", "sleep", NULL};
    pid_t sp[4], r0, r1;
    int rc;

    gkvt_lt_ports(f);
    gkvt_lt_start(f, args, NULL);
    r0 = gkvt_lt_wait_pid_file(f->ws, "pid-trainer-0", 10000);
    r1 = gkvt_lt_wait_pid_file(f->ws, "pid-trainer-1", 10000);
    gkvt_lt_track(f, r0);
    gkvt_lt_track(f, r1);
    if (r0 <= 0 || r1 <= 0) {
        gkvt_lt_wait(f, 1);
        gkvt_lt_dump(f);
        fail_msg("trainers did not start");
    }
    assert_int_equal(gkvt_lt_server_pids(f, sp, 4), 2);
    gkvt_lt_track(f, sp[0]);
    gkvt_lt_track(f, sp[1]);
    kill(f->launcher, SIGTERM);
    rc = gkvt_lt_wait(f, 15);
    assert_int_equal(rc, 1);
    assert_true(gkvt_lt_has(f, "stopping every process"));
    assert_true(gkvt_lt_wait_gone(r0, 2000));
    assert_true(gkvt_lt_wait_gone(r1, 2000));
    assert_true(gkvt_lt_wait_gone(sp[0], 2000));
    assert_true(gkvt_lt_wait_gone(sp[1], 2000));
    assert_true(gkvt_lt_port_closed(f->base));
    assert_true(gkvt_lt_port_closed(f->base + 1));
}

/* Holds 127.0.0.1:f->base: a listening socket in f->lsock (the teardown
 * closes it). */
static void
hold_port(struct gkvt_lt_fx *f)
{
    struct sockaddr_in a;
    int one = 1;

    f->lsock = socket(AF_INET, SOCK_STREAM, 0);
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)f->base);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(f->lsock, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    assert_int_equal(bind(f->lsock, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(f->lsock, 16), 0);
}

/* A port held by something that is not a gkv server. */
static void
test_port_taken(void **state)
{
    struct gkvt_lt_fx *f = *state;
    const char *args[] = {"--ip-config", f->cfg, "--store", f->store,
        "--num-servers", "1", "--num-trainers", "1",
        "--workspace", f->ws, "--timeout", "5", "--", gkvt_lt_self, "--child", "env",
        NULL};
    const char *ka[] = {"--ip-config", f->cfg, "--store", f->store,
        "--num-servers", "1", "--num-trainers", "1",
        "--keep-alive", "--server-name", "n1", "--workspace", f->ws,
        "--", gkvt_lt_self, "--child", "env", NULL};
    char want[64];

    gkvt_lt_ports(f);
    hold_port(f);

    assert_int_equal(gkvt_lt_launch(f, args, NULL, 20), 1);
    snprintf(want, sizeof want, "port 127.0.0.1:%d of server 0/0 is already "
             "in use", f->base);
    assert_true(gkvt_lt_has(f, want));
    assert_false(gkvt_lt_has(f, "started"));

    assert_int_equal(gkvt_lt_launch(f, ka, NULL, 20), 1);
    assert_true(gkvt_lt_has(f, "not a gkv server of this job"));
    assert_false(gkvt_lt_has(f, "started trainer"));
}

static void
test_slurm_mpi(void **state)
{
    struct gkvt_lt_fx *f = *state;
    char fake[PATH_MAX + 64];
    const char *srv[] = {"--ip-config", f->cfg, "--store", f->store,
        "--num-servers", "1", "--num-trainers", "2", "--server-bin", gkvt_lt_self,
        "--server-arg", "--fake-server", "--", gkvt_lt_self, "--child", "env", NULL};
    const char *task_s[] = {"SLURM_PROCID=0", "SLURM_NTASKS=3", "SLURM_NODEID=0",
        "SLURM_LOCALID=0", "SLURM_JOB_ID=77", "SLURM_STEP_ID=1", NULL};
    const char *task_t[] = {"SLURM_PROCID=2", "SLURM_NTASKS=3", "SLURM_NODEID=0",
        "SLURM_LOCALID=2", "SLURM_JOB_ID=77", "SLURM_STEP_ID=1",
        "SLURM_NNODES=1", NULL};
    const char *task_nodes[] = {"SLURM_PROCID=2", "SLURM_NTASKS=3",
        "SLURM_NODEID=0", "SLURM_LOCALID=2", "SLURM_NNODES=2",
        "SLURM_STEP_ID=1", NULL};
    /* the step places 4 and 2 tasks: every task refuses, task 0 too */
    const char *task_uneven[] = {"SLURM_PROCID=0", "SLURM_NTASKS=3",
        "SLURM_NODEID=0", "SLURM_LOCALID=0", "SLURM_STEP_ID=1",
        "SLURM_STEP_TASKS_PER_NODE=2,1", NULL};
    const char *task_even[] = {"SLURM_PROCID=0", "SLURM_NTASKS=3",
        "SLURM_NODEID=0", "SLURM_LOCALID=0", "SLURM_JOB_ID=77",
        "SLURM_STEP_ID=1", "SLURM_STEP_TASKS_PER_NODE=3(x1)", NULL};
    const char *task_nan[] = {"SLURM_PROCID=0", "SLURM_NTASKS=3",
        "SLURM_NODEID=0", "SLURM_LOCALID=abc", "SLURM_STEP_ID=1", NULL};
    /* mpirun inside a Slurm allocation: its ranks carry the daemons'
     * SLURM_* too, which do not describe them */
    const char *mpi_in_slurm[] = {"OMPI_COMM_WORLD_RANK=1",
        "OMPI_COMM_WORLD_SIZE=3", "OMPI_COMM_WORLD_LOCAL_RANK=1",
        "PMIX_NAMESPACE=prte-y-2@1", "SLURM_PROCID=0", "SLURM_NTASKS=1",
        "SLURM_NODEID=0", "SLURM_LOCALID=0", "SLURM_STEP_ID=0", NULL};
    /* MPICH/Intel MPI's mpirun under Slurm: srun starts its proxies, one
     * per node, whose SLURM_* the ranks inherit (counting nodes) */
    const char *hydra[] = {"PMI_RANK=1", "PMI_SIZE=3", "MPI_LOCALRANKID=1",
        "PMIX_NAMESPACE=h-1", "SLURM_PROCID=0", "SLURM_NTASKS=2",
        "SLURM_NODEID=0", "SLURM_LOCALID=0", "SLURM_STEP_ID=0", NULL};
    /* the same, rank 0: PMI_RANK equals SLURM_PROCID, the sizes differ */
    const char *hydra0[] = {"PMI_RANK=0", "PMI_SIZE=3", "MPI_LOCALRANKID=0",
        "PMIX_NAMESPACE=h-1", "SLURM_PROCID=0", "SLURM_NTASKS=2",
        "SLURM_NODEID=0", "SLURM_LOCALID=0", "SLURM_STEP_ID=0", NULL};
    const char *srv_keep[] = {"--ip-config", f->cfg, "--store", f->store,
        "--num-servers", "1", "--num-trainers", "2", "--server-bin", gkvt_lt_self,
        "--keep-alive", "--server-name", "k", "--", gkvt_lt_self, "--child", "env",
        NULL};
    /* --num-samplers 3 (deprecated) adds no tasks: still 1 + 2 = 3, and
     * the trainers' loaders get 3 threads; the 5 tasks sampler processes
     * once took are refused */
    const char *srvk[] = {"--ip-config", f->cfg, "--store", f->store,
        "--num-servers", "1", "--num-trainers", "2", "--num-samplers", "3",
        "--server-bin", gkvt_lt_self, "--server-arg", "--fake-server", "--", gkvt_lt_self,
        "--child", "env", NULL};
    const char *task_k[] = {"SLURM_PROCID=2", "SLURM_NTASKS=3", "SLURM_NODEID=0",
        "SLURM_LOCALID=2", "SLURM_JOB_ID=77", "SLURM_STEP_ID=1",
        "SLURM_NNODES=1", NULL};
    const char *task_ks[] = {"SLURM_PROCID=0", "SLURM_NTASKS=3", "SLURM_NODEID=0",
        "SLURM_LOCALID=0", "SLURM_JOB_ID=77", "SLURM_STEP_ID=1", NULL};
    const char *task_k5[] = {"SLURM_PROCID=4", "SLURM_NTASKS=5", "SLURM_NODEID=0",
        "SLURM_LOCALID=4", "SLURM_JOB_ID=77", "SLURM_STEP_ID=1", NULL};
    const char *task_bad[] = {"SLURM_PROCID=2", "SLURM_NTASKS=4", "SLURM_NODEID=0",
        "SLURM_LOCALID=2", "SLURM_STEP_ID=1", NULL};
    const char *mpi_t[] = {"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=3",
        "OMPI_COMM_WORLD_LOCAL_RANK=1", "PMIX_NAMESPACE=prte-x-1@1", NULL};
    const char *mpi_bad[] = {"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=3",
        "OMPI_COMM_WORLD_LOCAL_RANK=0", NULL};
    char *t;

    gkvt_lt_ports(f);
    assert_int_equal(mkdir(f->ws, 0755), 0);
    /* server task: execs the (stand-in) server with the right arguments */
    assert_int_equal(gkvt_lt_launch(f, srv, task_s, 20), 0);
    snprintf(fake, sizeof fake, "%s/fake-server", f->ws);
    t = gkvt_slurp(fake);
    assert_non_null(strstr(t, "arg --fake-server\n"));
    assert_non_null(strstr(t, "arg --machine\narg 0\n"));
    assert_non_null(strstr(t, "arg --server-id\narg 0\narg --num-servers\narg 1\n"));
    /* the job's 2 trainers are the clients a server waits for */
    assert_non_null(strstr(t, "arg --num-clients\narg 2\n"));
    snprintf(fake, sizeof fake, "arg --store\narg %s\n", f->store);
    assert_non_null(strstr(t, fake));
    GKVT_LT_ENV_EQ(t, "GKV_ROLE", "server");
    GKVT_LT_ENV_EQ(t, "GKV_SERVER_ID", "0");
    GKVT_LT_ENV_EQ(t, "GKV_GROUP", "slurm-77-1");
    GKVT_LT_ENV_EQ(t, "GKV_WORLD_SIZE", "2");
    free(t);

    /* trainer task: waits for the server port (held here), then runs */
    hold_port(f);
    assert_int_equal(gkvt_lt_launch(f, srv, task_t, 20), 0);
    t = gkvt_lt_read_env(f, "trainer-1");
    GKVT_LT_ENV_EQ(t, "GKV_ROLE", "trainer");
    GKVT_LT_ENV_EQ(t, "GKV_RANK", "1");
    GKVT_LT_ENV_EQ(t, "GKV_LOCAL_RANK", "1");
    GKVT_LT_ENV_EQ(t, "GKV_MACHINE", "0");
    GKVT_LT_ENV_EQ(t, "GKV_WORLD_SIZE", "2");
    GKVT_LT_ENV_EQ(t, "GKV_GROUP", "slurm-77-1");
    free(t);
    /* the task count, not the node count (SLURM_NNODES=1) */
    assert_true(gkvt_lt_has(f, "slurm task 2 of 3: trainer rank 1 on machine 0"));
    assert_int_equal(gkvt_lt_launch(f, srv, task_nodes, 20), 2);
    assert_true(gkvt_lt_has(f, "Slurm: 2 nodes, but"));

    /* --num-samplers: the last task is trainer 1, with 3 loader threads;
     * the servers wait for the 2 trainers only */
    assert_int_equal(gkvt_lt_launch(f, srvk, task_k, 20), 0);
    t = gkvt_lt_read_env(f, "trainer-1");
    GKVT_LT_ENV_EQ(t, "GKV_ROLE", "trainer");
    GKVT_LT_ENV_EQ(t, "GKV_RANK", "1");
    GKVT_LT_ENV_EQ(t, "GKV_LOADER_WORKERS", "3");
    GKVT_LT_ENV_EQ(t, "GKV_SAMPLER_ID", "");
    GKVT_LT_ENV_EQ(t, "GKV_WORLD_SIZE", "2");
    GKVT_LT_ENV_EQ(t, "GKV_GROUP", "slurm-77-1");
    free(t);
    assert_true(gkvt_lt_has(f, "slurm task 2 of 3: trainer rank 1 on "
                           "machine 0"));
    assert_int_equal(gkvt_lt_launch(f, srvk, task_ks, 20), 0);
    snprintf(fake, sizeof fake, "%s/fake-server", f->ws);
    t = gkvt_slurp(fake);
    assert_non_null(strstr(t, "arg --num-clients\narg 2\n"));
    GKVT_LT_ENV_EQ(t, "GKV_LOADER_WORKERS", "");   /* a trainer's only */
    free(t);
    assert_int_equal(gkvt_lt_launch(f, srvk, task_k5, 20), 2);
    assert_true(gkvt_lt_has(f, "need 3 tasks, 3 per node"));

    /* a layout that does not fit */
    assert_int_equal(gkvt_lt_launch(f, srv, task_bad, 20), 2);
    assert_true(gkvt_lt_has(f, "slurm layout does not match the job: 4 tasks"));
    assert_true(gkvt_lt_has(f, "need 3 tasks, 3 per node"));

    /* MPI: rank 1 of 3 is trainer 0 */
    assert_int_equal(gkvt_lt_launch(f, srv, mpi_t, 20), 0);
    t = gkvt_lt_read_env(f, "trainer-0");
    GKVT_LT_ENV_EQ(t, "GKV_ROLE", "trainer");
    GKVT_LT_ENV_EQ(t, "GKV_LOCAL_RANK", "0");
    GKVT_LT_ENV_EQ(t, "GKV_GROUP", "mpi-prte-x-1@1");
    free(t);
    assert_int_equal(gkvt_lt_launch(f, srv, mpi_bad, 20), 2);
    assert_true(gkvt_lt_has(f, "has local rank 0, but the layout needs ranks placed "
                           "in blocks of 3 per node"));
    assert_int_equal(gkvt_lt_launch(f, srv, mpi_in_slurm, 20), 0);
    t = gkvt_lt_read_env(f, "trainer-0");
    GKVT_LT_ENV_EQ(t, "GKV_GROUP", "mpi-prte-y-2@1");
    free(t);
    assert_int_equal(gkvt_lt_launch(f, srv, hydra, 20), 0);
    t = gkvt_lt_read_env(f, "trainer-0");
    GKVT_LT_ENV_EQ(t, "GKV_GROUP", "mpi-h-1");
    free(t);
    assert_int_equal(gkvt_lt_launch(f, srv, hydra0, 20), 0);
    assert_true(gkvt_lt_has(f, "mpi task 0 of 3: server"));

    /* the step's tasks per node: refused by every task, not only the one
     * past the end; a fitting list runs */
    assert_int_equal(gkvt_lt_launch(f, srv, task_uneven, 20), 2);
    assert_true(gkvt_lt_has(f, "places tasks 2,1 per node"));
    assert_true(gkvt_lt_has(f, "--ntasks-per-node=3"));
    assert_int_equal(gkvt_lt_launch(f, srv, task_even, 20), 0);
    assert_int_equal(gkvt_lt_launch(f, srv, task_nan, 20), 2);
    assert_true(gkvt_lt_has(f, "SLURM_LOCALID='abc' is not a number"));
    /* persistent servers cannot be a step's tasks: they would never end */
    assert_int_equal(gkvt_lt_launch(f, srv_keep, task_s, 20), 2);
    assert_true(gkvt_lt_has(f, "--keep-alive does not go with a cluster launcher"));
    {   /* a 2-node step with an ip_config of loopback addresses only */
        char cfg2[PATH_MAX + 16];
        const char *srv2[] = {"--ip-config", cfg2, "--store", f->store,
            "--num-servers", "1", "--num-trainers", "2", "--server-bin",
            gkvt_lt_self, "--", gkvt_lt_self, "--child", "env", NULL};
        const char *task2[] = {"SLURM_PROCID=0", "SLURM_NTASKS=6",
            "SLURM_NODEID=0", "SLURM_LOCALID=0", "SLURM_NNODES=2",
            "SLURM_STEP_ID=1", NULL};

        gkvt_lt_two_machines(f, cfg2, sizeof cfg2);
        assert_int_equal(gkvt_lt_launch(f, srv2, task2, 20), 2);
        assert_true(gkvt_lt_has(f, "every machine of"));
        assert_true(gkvt_lt_has(f, "is a loopback address"));
    }
}

/* Writes the ssh stand-in: logs its arguments (one per line, then "--"),
 * then runs the remote command string like sshd with a POSIX login shell
 * would: sh -c, with an environment of its own (not the launcher's). */
static void
write_fake_ssh(struct gkvt_lt_fx *f, char *path, size_t cap)
{
    char text[PATH_MAX * 2];

    snprintf(path, cap, "%s/fake-ssh", f->dir);
    snprintf(text, sizeof text,
             "#!/bin/sh\n"
             "for a; do printf '%%s\\n' \"$a\"; done >> '%s/ssh-args'\n"
             "echo -- >> '%s/ssh-args'\n"
             "for last; do :; done\n"
             "exec env -i PATH=\"$PATH\" HOME=/nonexistent "
             "${LSAN_OPTIONS:+LSAN_OPTIONS=\"$LSAN_OPTIONS\"} sh -c \"$last\"\n",
             f->dir, f->dir);
    gkvt_write_text(path, text, 0755);
}

/* Launches 'args' (a job of one remote trainer) on fresh ports; returns
 * the trainer's PID (tracked) once it runs. */
static pid_t
remote_trainer(struct gkvt_lt_fx *f, const char *const *args)
{
    pid_t tp;

    gkvt_lt_ports(f);
    gkvt_lt_start(f, args, NULL);
    tp = gkvt_lt_wait_pid_file(f->ws, "pid-trainer-0", 10000);
    gkvt_lt_track(f, tp);
    if (tp <= 0) {
        gkvt_lt_wait(f, 1);
        gkvt_lt_dump(f);
        fail_msg("remote trainer did not start");
    }
    return tp;
}

static void
test_remote(void **state)
{
    struct gkvt_lt_fx *f = *state;
    char ssh[PATH_MAX + 16], path[PATH_MAX + 64], *t, want[PATH_MAX + 64];
    static const char nasty[] = "it's \"q\" $HOME `id` \\ *\nnew line";
    const char *args[] = {"--ip-config", f->cfg, "--store", f->store,
        "--num-servers", "1", "--num-trainers", "2",
        "--workspace", f->ws, "--ssh-cmd", ssh, "--force-ssh", "--ssh-user",
        "alice", "--ssh-port", "2222", "--", gkvt_lt_self, "--child", "env", nasty,
        "", "*", NULL};
    const char *sl[] = {"--ip-config", f->cfg, "--store", f->store,
        "--num-servers", "1", "--num-trainers", "1",
        "--workspace", f->ws, "--ssh-cmd", ssh, "--force-ssh", "--",
        gkvt_lt_self, "--child", "sleep", NULL};
    long spid = 0;
    pid_t tp;
    FILE *fp;

    write_fake_ssh(f, ssh, sizeof ssh);
    gkvt_lt_ports(f);
    /* the stand-in ssh clears LT_DIR: children write to GKV_WORKSPACE */
    unsetenv("LT_DIR");
    gkvt_lt_expect_ok(f, gkvt_lt_retry(f, args, NULL, 20), "remote launch");
    assert_true(gkvt_lt_has(f, "(ssh pid"));
    /* arguments survive the remote shell byte for byte */
    snprintf(path, sizeof path, "%s/args-trainer-1", f->ws);
    fp = fopen(path, "rb");
    assert_non_null(fp);
    {
        char buf[512];
        size_t n = fread(buf, 1, sizeof buf, fp);
        size_t want_n = sizeof nasty + 1 + 2;
        fclose(fp);
        assert_int_equal(n, want_n);
        assert_memory_equal(buf, nasty, sizeof nasty);
        assert_memory_equal(buf + sizeof nasty, "\0*\0", 3);
    }
    t = gkvt_lt_read_env(f, "trainer-1");
    GKVT_LT_ENV_EQ(t, "GKV_ROLE", "trainer");
    GKVT_LT_ENV_EQ(t, "GKV_RANK", "1");
    GKVT_LT_ENV_EQ(t, "GKV_IP_CONFIG", f->cfg);
    free(t);
    snprintf(path, sizeof path, "%s/ports-trainer-0", f->ws);
    t = gkvt_slurp(path);
    assert_string_equal(t, "ok");
    free(t);
    /* ssh options */
    snprintf(path, sizeof path, "%s/ssh-args", f->dir);
    t = gkvt_slurp(path);
    assert_non_null(strstr(t, "-o\nBatchMode=yes\n-p\n2222\nalice@127.0.0.1\ncd '"));
    free(t);
    /* the server ran in a session of its own, whose id is its PID, and is
     * gone */
    snprintf(path, sizeof path, "%s/logs/server-0-0.log", f->ws);
    t = gkvt_slurp(path);
    assert_int_equal(sscanf(t, "@gkv-pgid %ld", &spid), 1);
    assert_non_null(strstr(t, "listening on"));
    free(t);
    gkvt_lt_track(f, (pid_t)spid);
    assert_true(gkvt_lt_wait_gone((pid_t)spid, 2000));
    assert_true(gkvt_lt_port_closed(f->base));

    /* SIGTERM mid-job stops the "remote" trainer through ssh kill */
    gkvt_rmtree(strdup(f->ws));
    tp = remote_trainer(f, sl);
    kill(f->launcher, SIGTERM);
    assert_int_equal(gkvt_lt_wait(f, 20), 1);
    assert_true(gkvt_lt_wait_gone(tp, 3000));
    snprintf(path, sizeof path, "%s/ssh-args", f->dir);
    t = gkvt_slurp(path);
    snprintf(want, sizeof want, "kill -TERM -%ld", (long)tp);
    assert_non_null(strstr(t, want));
    free(t);
    snprintf(path, sizeof path, "%s/logs/server-0-0.log", f->ws);
    t = gkvt_slurp(path);
    spid = 0;
    assert_int_equal(sscanf(t, "@gkv-pgid %ld", &spid), 1);
    free(t);
    gkvt_lt_track(f, (pid_t)spid);
    assert_true(gkvt_lt_wait_gone((pid_t)spid, 3000));

    /* again in the same workspace, whose logs now begin with the first
     * run's "@gkv-pgid" lines: the kills went to those numbers, and this
     * run's remote trainer and server were left running */
    snprintf(path, sizeof path, "%s/pid-trainer-0", f->ws);
    unlink(path);
    snprintf(path, sizeof path, "%s/ssh-args", f->dir);
    unlink(path);
    tp = remote_trainer(f, sl);
    snprintf(path, sizeof path, "%s/logs/server-0-0.log", f->ws);
    t = gkvt_slurp(path);
    {
        const char *l2 = strstr(t + 1, "@gkv-pgid ");
        long spid2 = 0;
        assert_non_null(l2);
        assert_int_equal(sscanf(l2, "@gkv-pgid %ld", &spid2), 1);
        gkvt_lt_track(f, (pid_t)spid2);         /* the teardown kills it if left */
        kill(f->launcher, SIGTERM);
        assert_int_equal(gkvt_lt_wait(f, 20), 1);
        if (!gkvt_lt_wait_gone(tp, 3000))
            fail_msg("second run: the remote trainer %ld outlived the "
                     "launcher", (long)tp);
        if (!gkvt_lt_wait_gone((pid_t)spid2, 3000))
            fail_msg("second run: the remote server %ld outlived the "
                     "launcher", spid2);
    }
    free(t);
    snprintf(path, sizeof path, "%s/ssh-args", f->dir);
    t = gkvt_slurp(path);
    snprintf(want, sizeof want, "kill -TERM -%ld", (long)tp);
    assert_non_null(strstr(t, want));
    snprintf(want, sizeof want, "kill -TERM -%ld\n", spid);
    assert_null(strstr(t, want));            /* not the first run's server */
    free(t);
}

/* The example trainer under --num-samplers 3 (deprecated), two machines
 * serving the two partitions of a graph: no sampler process is started
 * (samplers used to sample blocks nobody used); each trainer's loader
 * runs 3 worker threads instead, its batches sampled on the servers, its
 * pushes on a thread with a client of its own (an observer: no session
 * of the trainer's is taken over, and the job ends when the trainers do). */
static void
test_loader_workers_example(void **state)
{
    struct gkvt_lt_fx *f = *state;
    char json[PATH_MAX + 64], cfg2[PATH_MAX + 16], train[PATH_MAX + 16];
    const char *args[] = {"--ip-config", cfg2, "--part-config", json,
        "--num-servers", "1", "--num-trainers", "1", "--num-samplers", "3",
        "--workspace", f->ws, "--group", "g-samp", "--", train,
        "--max-batches", "50", "--batch", "64", NULL};
    int rc;

    snprintf(train, sizeof train, "%s", gkvt_prog("gkv-example-train"));
    gkvt_lt_graph(f, "g", 10, 2, json, sizeof json);
    rc = gkvt_lt_retry2(f, args, cfg2, sizeof cfg2, 60);
    if (rc != 0) {
        char path[PATH_MAX + 64], *t;
        gkvt_lt_dump(f);
        snprintf(path, sizeof path, "%s/logs/server-0-0.log", f->ws);
        t = gkvt_slurp(path);
        fprintf(stderr, "server 0/0:\n%s\n", t);
        free(t);
    }
    assert_int_equal(rc, 0);
    assert_true(gkvt_lt_has(f, "job done"));
    assert_false(gkvt_lt_has(f, "started sampler"));
    for (int m = 0; m < 2; m++) {
        char log[64], want[256], path[PATH_MAX + 64], *t;

        snprintf(path, sizeof path, "%s/logs/sampler-%d-0.log", f->ws, m);
        assert_true(access(path, F_OK) != 0);
        snprintf(log, sizeof log, "trainer-%d-0.log", m);
        snprintf(want, sizeof want, "rank %d: batches from gkv_loader, "
                 "sampled and gathered on the servers (--sample-on server), "
                 "3 worker threads, 4 batches ahead; Adagrad pushes on a "
                 "thread of their own, one outstanding", m);
        gkvt_lt_log_has(f, log, want);
        snprintf(want, sizeof want, "rank %d epoch 0: ", m);
        gkvt_lt_log_has(f, log, want);
        gkvt_lt_log_has(f, log, "for the loader and ");
        snprintf(want, sizeof want, "rank %d: embedding 'node/_N/emb' mean |x|", m);
        gkvt_lt_log_has(f, log, want);
        /* no mask in this graph: the trainer says it falls back */
        snprintf(want, sizeof want, "rank %d: training mask: the servers hold "
                 "no 'node/_N/train_mask'; a random 0.6 of the nodes "
                 "(--train-frac)", m);
        gkvt_lt_log_has(f, log, want);
        /* and no session was taken over */
        snprintf(path, sizeof path, "%s/logs/server-%d-0.log", f->ws, m);
        t = gkvt_slurp(path);
        assert_non_null(strstr(t, "listening on"));
        if (strstr(t, "rejoin") != NULL)
            fail_msg("a client rejoined on server %d/0:\n%s", m, t);
        free(t);
    }
}

/* --sample-on local: the trainer's loader samples in its own process on
 * the partition config's one partition (GKV_PART_CONFIG), and pushes
 * through the server; on a graph of two partitions it fails, saying why. */
static void
test_example_local(void **state)
{
    struct gkvt_lt_fx *f = *state;
    char json[PATH_MAX + 64], json2[PATH_MAX + 64], cfg2[PATH_MAX + 16];
    char train[PATH_MAX + 16];
    const char *args[] = {"--ip-config", f->cfg, "--part-config", json,
        "--num-servers", "1", "--num-trainers", "1", "--workspace", f->ws,
        "--group", "g-local", "--", train, "--max-batches", "5", "--batch",
        "64", "--sample-on", "local", "--prefetch", "2", NULL};
    const char *args2[] = {"--ip-config", cfg2, "--part-config", json2,
        "--num-servers", "1", "--num-trainers", "1", "--workspace", f->ws,
        "--group", "g-local2", "--", train, "--sample-on", "local", NULL};
    int rc;

    snprintf(train, sizeof train, "%s", gkvt_prog("gkv-example-train"));
    gkvt_lt_graph(f, "g1", 9, 1, json, sizeof json);
    gkvt_lt_ports(f);
    rc = gkvt_lt_retry(f, args, NULL, 60);
    gkvt_lt_expect_ok(f, rc, "the launch");
    gkvt_lt_log_has(f, "trainer-0-0.log", "rank 0: batches from gkv_loader, "
                    "sampled in this process (--sample-on local), 2 worker "
                    "threads, 2 batches ahead");
    gkvt_lt_log_has(f, "trainer-0-0.log", "rank 0 epoch 0: 5 batches in ");
    gkvt_lt_log_has(f, "trainer-0-0.log", "rank 0: embedding 'node/_N/emb' "
                    "mean |x|");

    gkvt_lt_graph(f, "g2", 9, 2, json2, sizeof json2);
    rc = gkvt_lt_retry2(f, args2, cfg2, sizeof cfg2, 60);
    assert_int_equal(rc, 1);
    gkvt_lt_log_has(f, "trainer-0-0.log", "--sample-on local samples in this "
                    "process on the whole graph: it needs a graph of one "
                    "partition, this one has 2 (use --sample-on server or "
                    "client)");
}

static uint64_t
mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* The example trainer takes the graph's own training mask: the bool
 * node feature 'train_mask' given to gkv-partition (a random third of the
 * nodes here), pulled from the servers. Two machines with 2 trainers each:
 * every trainer names the mask and its count, and its training nodes are
 * exactly its share of gkv_pbook_node_split over that mask (count, sum and
 * hash of the IDs it prints), so all are mask nodes and they add up to the
 * mask's count. It used to draw a mask of its own from --train-frac.
 * The batches are sampled client side here (--sample-on client). */
static void
test_example_train_mask(void **state)
{
    struct gkvt_lt_fx *f = *state;
    char json[PATH_MAX + 64], cfg2[PATH_MAX + 16], train[PATH_MAX + 16];
    const char *args[] = {"--ip-config", cfg2, "--part-config", json,
        "--num-servers", "1", "--num-trainers", "2", "--workspace", f->ws,
        "--group", "g-mask", "--", train, "--max-batches", "1", "--batch",
        "32", "--fanouts", "2,2", "--sample-on", "client", NULL};
    enum { SCALE = 10, N = 1 << SCALE, W = 4 };
    uint8_t mask[N], *newmask = calloc(N, 1);
    int64_t *nmap, *split;
    size_t off[W + 1], nmask = 0, total = 0;
    gkv_pbook *b = NULL;
    int rc;

    assert_non_null(newmask);
    for (int i = 0; i < N; i++) {
        mask[i] = mix64((uint64_t)i * 31 + 5) % 3 == 0;
        nmask += mask[i];
    }
    snprintf(train, sizeof train, "%s", gkvt_prog("gkv-example-train"));
    gkvt_lt_graph_mask(f, "gm", SCALE, 2, mask, json, sizeof json);
    rc = gkvt_lt_retry2(f, args, cfg2, sizeof cfg2, 60);
    gkvt_lt_expect_ok(f, rc, "the launch");

    /* the split the trainers should have made, in the partitions' IDs */
    GKVT_OK(gkv_pbook_open(&b, json));
    assert_int_equal(gkv_pbook_num_nodes(b, 0), N);
    nmap = gkvt_read_map(gkv_pbook_node_mapping(b, 0), N);
    for (int i = 0; i < N; i++)
        newmask[nmap[i]] = mask[i];
    GKVT_OK(gkv_pbook_node_split_all(b, 0, newmask, NULL, N, W, &split, off));
    for (int r = 0; r < W; r++) {
        char log[64], want[256];
        uint64_t sum = 0, h = 0;

        for (size_t i = off[r]; i < off[r + 1]; i++) {
            assert_true(newmask[split[i]]);          /* a mask node */
            sum += (uint64_t)split[i];
            h ^= mix64((uint64_t)split[i]);
        }
        total += off[r + 1] - off[r];
        snprintf(log, sizeof log, "trainer-%d-%d.log", r / 2, r % 2);
        snprintf(want, sizeof want, "rank %d: training mask: "
                 "'node/_N/train_mask' from the servers: %zu of %d '_N' "
                 "nodes", r, nmask, N);
        gkvt_lt_log_has(f, log, want);
        snprintf(want, sizeof want, "rank %d training nodes: n=%zu sum=%llu "
                 "hash=%016llx\n", r, off[r + 1] - off[r],
                 (unsigned long long)sum, (unsigned long long)h);
        gkvt_lt_log_has(f, log, want);
    }
    assert_int_equal(total, nmask);
    gkv_free(split);
    free(nmap);
    free(newmask);
    gkv_pbook_close(b);
}

/* A trainer that connects after the others have come and gone still finds
 * the servers: gkv-launch starts them with --num-clients (every trainer
 * of the job), so they stop on "last client left" only once
 * all have joined. */
static void
test_late_client(void **state)
{
    struct gkvt_lt_fx *f = *state;
    const char *args[] = {"--ip-config", f->cfg, "--store", f->store,
        "--num-servers", "1", "--num-trainers", "2", "--workspace", f->ws,
        "--", gkvt_lt_self, "--child", "late", NULL};
    pid_t sp[4];
    int rc;

    gkvt_lt_ports(f);
    rc = gkvt_lt_retry(f, args, NULL, 40);
    gkvt_lt_expect_ok(f, rc, "the launch");
    gkvt_lt_log_has(f, "trainer-0-0.log", "rank 0: connected");
    gkvt_lt_log_has(f, "trainer-0-1.log", "rank 1: connected");
    assert_int_equal(gkvt_lt_server_pids(f, sp, 4), 1);
    gkvt_lt_track(f, sp[0]);
    assert_true(gkvt_lt_wait_gone(sp[0], 30000));
    assert_true(gkvt_lt_port_closed(f->base));
}

/* A refused launch (a port held, so nothing was started) makes no
 * workspace: it used to leave an empty WORKSPACE/logs behind. */
static void
test_refused_no_workspace(void **state)
{
    struct gkvt_lt_fx *f = *state;
    const char *args[] = {"--ip-config", f->cfg, "--store", f->store,
        "--num-servers", "1", "--num-trainers", "1",
        "--workspace", f->ws, "--", gkvt_lt_self, "--child", "env", NULL};
    const char *ka[] = {"--ip-config", f->cfg, "--store", f->store,
        "--num-servers", "1", "--num-trainers", "1",
        "--keep-alive", "--server-name", "n1", "--workspace", f->ws,
        "--", gkvt_lt_self, "--child", "env", NULL};

    gkvt_lt_ports(f);
    hold_port(f);

    assert_int_equal(gkvt_lt_launch(f, args, NULL, 20), 1);
    assert_true(gkvt_lt_has(f, "is already in use"));
    assert_int_not_equal(access(f->ws, F_OK), 0);

    assert_int_equal(gkvt_lt_launch(f, ka, NULL, 20), 1);
    assert_true(gkvt_lt_has(f, "nothing was started"));
    assert_int_not_equal(access(f->ws, F_OK), 0);
}

#define T(name) cmocka_unit_test_setup_teardown(name, gkvt_lt_setup, \
                                                gkvt_lt_teardown)


int
main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        T(test_env),
        T(test_failure),
        T(test_sigterm),
        T(test_port_taken),
        T(test_slurm_mpi),
        T(test_remote),
        T(test_loader_workers_example),
        T(test_example_train_mask),
        T(test_example_local),
        T(test_refused_no_workspace),
        /* last: it needs gkv-server --num-clients */
        T(test_late_client),
    };
    int rc = gkvt_lt_prelude(argc, argv);

    if (rc >= 0)
        return rc;
    return cmocka_run_group_tests_name("launch", tests, NULL, NULL);
}
