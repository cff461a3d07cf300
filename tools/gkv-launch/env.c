/* env.c - what each process is given: its GKV_* environment (trainers also
 * torch.distributed's RANK, WORLD_SIZE, ...) and a server's arguments. */
#include <stdlib.h>
#include <string.h>
#include "launch.h"
#include "util.h"

const char *const launch__role_names[] = {"server", "trainer"};

/* Every GKV_* variable this tool sets; inherited copies are dropped. */
static const char *const env_names[] = {
    "GKV_ROLE", "GKV_SERVER_ID", "GKV_MACHINE", "GKV_NUM_MACHINES",
    "GKV_IP_CONFIG", "GKV_PART_CONFIG", "GKV_STORE", "GKV_NUM_SERVERS",
    "GKV_NUM_TRAINERS", "GKV_RANK", "GKV_LOCAL_RANK", "GKV_WORLD_SIZE",
    "GKV_GROUP", "GKV_TOKEN_FILE", "GKV_SERVER_NAME", "GKV_WORKSPACE",
    "GKV_JOB_INSTANCE",
    /* trainers: torch.distributed's env:// (as torchrun or DGL's launch
     * give them); dropped for the others, whose inherited copies (an outer
     * launcher's) would be wrong for them */
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
    "MASTER_PORT",
};
#define NENV (sizeof env_names / sizeof env_names[0])

/* The GKV_* values of process p (at most NENV strings "NAME=value", and a
 * trainer's GKV_LOADER_WORKERS, malloc'd). */
char **
launch__proc_env(const struct job *j, const struct proc *p)
{
    char **e = tools__xcalloc(NENV + 2, sizeof *e);
    char v[NENV + 1][PATH_MAX + 128], st[PATH_MAX];
    size_t n = 0;
    unsigned t = p->role == R_SERVER ? 0 : p->idx;

#define SET(...) snprintf(v[n++], sizeof v[0], __VA_ARGS__)
    SET("GKV_ROLE=%s", launch__role_names[p->role]);
    SET("GKV_SERVER_ID=%u", p->role == R_SERVER ? p->idx : t % j->S);
    SET("GKV_MACHINE=%u", p->machine);
    SET("GKV_NUM_MACHINES=%u", j->M);
    SET("GKV_IP_CONFIG=%s", j->ipc_abs);
    SET("GKV_PART_CONFIG=%s", j->part_abs);
    launch__store_path(j, p->machine, st, sizeof st);
    SET("GKV_STORE=%s", st);
    SET("GKV_NUM_SERVERS=%u", j->S);
    SET("GKV_NUM_TRAINERS=%u", j->T);
    SET("GKV_RANK=%u", p->rank);
    SET("GKV_LOCAL_RANK=%u", p->role == R_SERVER ? p->idx : t);
    SET("GKV_WORLD_SIZE=%u", j->M * j->T);
    SET("GKV_GROUP=%s", j->group);
    SET("GKV_TOKEN_FILE=%s", j->tok_abs);
    SET("GKV_SERVER_NAME=%s", j->server_name ? j->server_name : "");
    SET("GKV_WORKSPACE=%s", j->ws);
    SET("GKV_JOB_INSTANCE=%s", j->instance);
    if (p->role == R_TRAINER) {
        const char *mp = getenv("MASTER_PORT");

        SET("RANK=%u", p->rank);
        SET("LOCAL_RANK=%u", t);
        SET("WORLD_SIZE=%u", j->M * j->T);
        SET("LOCAL_WORLD_SIZE=%u", j->T);
        SET("MASTER_ADDR=%s", gkv_ipconfig_machine(j->ipc, 0)->host);
        SET("MASTER_PORT=%s", mp != NULL && *mp != '\0' ? mp : "29500");
        /* --num-samplers K, deprecated: the trainer's loader threads */
        if (j->loader_workers > 0)
            SET("GKV_LOADER_WORKERS=%u", j->loader_workers);
    }
#undef SET
    for (size_t i = 0; i < n; i++)
        e[i] = tools__xstrdup(v[i]);
    return e;
}

void
launch__strv_free(char **v)
{
    if (v == NULL)
        return;
    for (size_t i = 0; v[i] != NULL; i++)
        free(v[i]);
    free(v);
}

/* environ without the names of env_names and of 'add', plus 'add'. */
char **
launch__merged_env(char **add)
{
    extern char **environ;
    size_t ne = 0, na = 0, n = 0;
    char **out;

    while (environ[ne] != NULL)
        ne++;
    while (add[na] != NULL)
        na++;
    out = tools__xcalloc(ne + na + 1, sizeof *out);
    for (size_t i = 0; i < ne; i++) {
        int ours = 0;
        for (size_t k = 0; k < NENV && !ours; k++) {
            size_t l = strlen(env_names[k]);
            ours = strncmp(environ[i], env_names[k], l) == 0 &&
                   environ[i][l] == '=';
        }
        for (size_t k = 0; k < na && !ours; k++) {
            size_t l = strcspn(add[k], "=");
            ours = strncmp(environ[i], add[k], l + 1) == 0;
        }
        if (!ours)
            out[n++] = environ[i];
    }
    for (size_t i = 0; i < na; i++)
        out[n++] = add[i];
    return out;
}

/* argv of server k of machine m (pointers into j, 'num', which holds the
 * formatted numbers, and 'st', the store path). */
char **
launch__server_argv(const struct job *j, const struct proc *p, char num[4][16],
            char *st, size_t st_cap)
{
    char **a = tools__xcalloc(24 + (size_t)j->nsargs, sizeof *a);
    size_t n = 0;

    snprintf(num[0], 16, "%u", p->machine);
    snprintf(num[1], 16, "%u", p->idx);
    snprintf(num[2], 16, "%u", j->S);
    /* every trainer of the job is a client of every server: a
     * server without --keep-alive stops when its last client leaves only
     * once all of them have joined (one that connects late still finds
     * it) */
    snprintf(num[3], 16, "%u", j->M * j->T);   /* <= MAX_CLIENTS */
    a[n++] = (char *)j->server_bin;
    a[n++] = "--ip-config";
    a[n++] = (char *)j->ipc_abs;
    a[n++] = "--machine";
    a[n++] = num[0];
    a[n++] = "--server-id";
    a[n++] = num[1];
    a[n++] = "--num-servers";
    a[n++] = num[2];
    a[n++] = "--num-clients";
    a[n++] = num[3];
    if (j->part_config != NULL) {
        a[n++] = "--part-config";
        a[n++] = (char *)j->part_abs;
        a[n++] = "--part-id";
        a[n++] = num[0];
    } else {
        launch__store_path(j, p->machine, st, st_cap);
        a[n++] = "--store";
        a[n++] = st;
    }
    if (j->token_file != NULL) {
        a[n++] = "--token-file";
        a[n++] = (char *)j->tok_abs;
    }
    if (j->keep_alive)
        a[n++] = "--keep-alive";
    if (j->server_name != NULL) {
        a[n++] = "--server-name";
        a[n++] = (char *)j->server_name;
    }
    for (int i = 0; i < j->nsargs; i++)
        a[n++] = (char *)j->sargs[i];
    a[n] = NULL;
    return a;
}
