/* config.c - set-up before anything starts: inputs checked and made
 * absolute, the workspace, the gkv-server program. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <sys/random.h>
#include "launch.h"
#include "util.h"

/* An absolute version of 'path' (made from the working directory; the file
 * need not exist). */
static void
absolute(const char *path, const char *cwd, char *out, size_t cap)
{
    char rp[PATH_MAX];

    if (realpath(path, rp) != NULL)
        snprintf(out, cap, "%s", rp);
    else if (path[0] == '/')
        snprintf(out, cap, "%s", path);
    else
        snprintf(out, cap, "%s/%s", cwd, path);
}

/* The store of machine m: --store with each '%m' replaced by m. */
void
launch__store_path(const struct job *j, unsigned m, char *out, size_t cap)
{
    size_t o = 0;

    for (const char *c = j->store_abs; *c && o + 12 < cap; c++) {
        if (c[0] == '%' && c[1] == 'm') {
            o += (size_t)snprintf(out + o, cap - o, "%u", m);
            c++;
        } else {
            out[o++] = *c;
        }
    }
    out[o] = '\0';
}

/* Where the workspace goes (j->ws); nothing is made yet. */
void
launch__workspace_path(struct job *j)
{
    if (j->workspace != NULL) {
        absolute(j->workspace, j->cwd, j->ws, sizeof j->ws);
    } else {
        snprintf(j->ws, sizeof j->ws, "%s/gkv-launch-%ld", j->cwd,
                 (long)getpid());
        if (access(j->cwd, W_OK) != 0) {
            const char *t = launch__env_get("TMPDIR");
            snprintf(j->ws, sizeof j->ws, "%s/gkv-launch-%ld", t ? t : "/tmp",
                     (long)getpid());
        }
    }
}

/* Makes the workspace j->ws and its logs/ folder, checking it can write
 * there. Called once the launch goes ahead (after the checks that refuse
 * it), so that a refused launch leaves no empty workspace behind. 0, or
 * -1 after saying why. */
int
launch__make_workspace(struct job *j)
{
    char logs[PATH_MAX + 80], probe[PATH_MAX + 120];
    int fd;

    snprintf(logs, sizeof logs, "%s/logs", j->ws);
    /* private: the logs name the stores and the job's token lives here */
    if ((mkdir(j->ws, 0700) != 0 && errno != EEXIST) ||
        (mkdir(logs, 0700) != 0 && errno != EEXIST)) {
        tools__note("workspace %s: cannot create it: %s", j->ws,
                    strerror(errno));
        return -1;
    }
    snprintf(probe, sizeof probe, "%s/.probe-%ld", logs, (long)getpid());
    if ((fd = open(probe, O_WRONLY | O_CREAT | O_EXCL, 0600)) < 0) {
        tools__note("workspace %s: not writable: %s", j->ws, strerror(errno));
        return -1;
    }
    close(fd);
    unlink(probe);
    return 0;
}

static void
find_server_bin(struct job *j)
{
    char self[PATH_MAX], *sl;
    ssize_t n;

    if (j->server_bin != NULL)
        return;
    j->server_bin = "gkv-server";
    n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return;
    self[n] = '\0';
    if ((sl = strrchr(self, '/')) == NULL)
        return;
    *sl = '\0';
    snprintf(j->server_bin_buf, sizeof j->server_bin_buf, "%s/gkv-server",
             self);
    if (access(j->server_bin_buf, X_OK) == 0)
        j->server_bin = j->server_bin_buf;
}

/* Reads the ip_config and token, makes paths absolute, finds the local
 * machines and the server program. 0, or -1 after printing why. */
int
launch__prepare(struct job *j)
{
    gkv_err rc;
    struct ifaddrs *ifs = NULL;
    char token[GKV_TOKEN_MAX + 1];
    unsigned long long nclients;

    if (getcwd(j->cwd, sizeof j->cwd) == NULL) {
        tools__note("cannot read the working directory: %s", strerror(errno));
        return -1;
    }
    if ((rc = gkv_ipconfig_load(&j->ipc, j->ip_config)) != GKV_OK) {
        /* the message names the file and what is wrong with it; GKV_ENOENT's
         * own text would speak of a store */
        if (gkv_net_errmsg()[0] != '\0')
            tools__note("%s", gkv_net_errmsg());
        else
            tools__note("%s: %s", j->ip_config, gkv_strerror(rc));
        return -1;
    }
    j->M = (unsigned)gkv_ipconfig_count(j->ipc);
    if ((rc = gkv_ipconfig_check(j->ipc, j->S)) != GKV_OK) {
        tools__note("%s: %s: %s", j->ip_config, gkv_strerror(rc),
                    gkv_net_errmsg());
        return -1;
    }
    /* every address resolves, before anything starts: a server on an
     * address that does not would fail at its start ("cannot resolve")
     * after the others had started. --shutdown names such a server among
     * those that did not answer instead, and stops the others. */
    for (unsigned m = 0; m < j->M && !j->shutdown; m++) {
        const gkv_machine *mc = gkv_ipconfig_machine(j->ipc, m);
        char why[256];

        if (launch__host_resolves(mc->host, why, sizeof why) != 0) {
            tools__note(
                "%s:%u: address '%s' (machine %u) does not resolve: %s (give "
                "an IPv4 or IPv6 address, or a host name that resolves to "
                "an IPv4 address); nothing was started",
                j->ip_config, mc->line, mc->host, m, why);
            return -1;
        }
    }
    absolute(j->ip_config, j->cwd, j->ipc_abs, sizeof j->ipc_abs);
    if (j->part_config != NULL) {
        absolute(j->part_config, j->cwd, j->part_abs, sizeof j->part_abs);
        if (access(j->part_abs, R_OK) != 0) {
            tools__note("--part-config %s: %s", j->part_config,
                        strerror(errno));
            return -1;
        }
    }
    if (j->part_config != NULL && !j->shutdown) {
        /* machine m serves partition m: a server of a job with too few or
         * too many machines would fail at its start */
        if ((rc = gkv_pbook_open(&j->book, j->part_abs)) != GKV_OK) {
            tools__note("--part-config: %s: %s", gkv_strerror(rc),
                gkv_pbook_errmsg(NULL));
            return -1;
        }
        if ((unsigned)gkv_pbook_num_parts(j->book) != j->M) {
            tools__note(
                "%s lists %u machine%s but %s has %d partitions: machine m "
                "serves partition m, so the counts must be equal",
                j->ip_config, j->M, j->M == 1 ? "" : "s", j->part_config,
                gkv_pbook_num_parts(j->book));
            return -1;
        }
    }
    nclients = (unsigned long long)j->M * j->T;
    if (!j->shutdown && nclients > MAX_CLIENTS) {
        tools__note(
            "the job has %llu trainer processes, each a client of "
            "every server, but a server takes at most %d clients",
            nclients, MAX_CLIENTS);
        return -1;
    }
    if (j->store != NULL)
        absolute(j->store, j->cwd, j->store_abs, sizeof j->store_abs);
    if (j->token_file != NULL)
        absolute(j->token_file, j->cwd, j->tok_abs, sizeof j->tok_abs);
    else if (launch__token_persistent(j) != 0)
        return -1;
    if (j->token_file != NULL) {
        if (launch__load_token(j, token, sizeof token) != 0)
            return -1;
        memset(token, 0, sizeof token);
    }
    if (j->shutdown)
        return 0;
    j->local = tools__xcalloc(j->M, sizeof *j->local);
    if (getifaddrs(&ifs) != 0)
        ifs = NULL;
    for (unsigned m = 0; m < j->M; m++)
        j->local[m] =
            !j->force_ssh &&
            launch__host_is_local(gkv_ipconfig_machine(j->ipc, m)->host, ifs);
    if (ifs != NULL)
        freeifaddrs(ifs);
    if (j->group_opt != NULL) {
        snprintf(j->group, sizeof j->group, "%s", j->group_opt);
    } else {
        char host[256] = "host";
        gethostname(host, sizeof host - 1);
        host[sizeof host - 1] = '\0';
        for (char *c = host; *c; c++)
            if (*c <= ' ' || *c >= 127)
                *c = '_';
        snprintf(j->group, sizeof j->group, "job-%.40s-%ld", host,
                 (long)getpid());
    }
    {
        /* fresh each launch: servers drop the members of an earlier run
         * with this group name (killed, their leases not out yet) */
        unsigned char rb[8] = {0};
        size_t o = 0;

        if (getrandom(rb, sizeof rb, 0) != (ssize_t)sizeof rb) {
            uint64_t t = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
            memcpy(rb, &t, sizeof rb);
        }
        o = (size_t)snprintf(j->instance, sizeof j->instance, "launch-");
        for (size_t i = 0; i < sizeof rb; i++)
            o += (size_t)snprintf(j->instance + o, sizeof j->instance - o,
                                  "%02x", rb[i]);
    }
    find_server_bin(j);
    return 0;
}
