/* gkvt_net.c - a test's gkv-server processes on loopback (gkvt_net.h). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <nanomsg/nn.h>
#include <nanomsg/reqrep.h>
#include "gkvt_net.h"
#include "net/wire.h"

int
gkvt_job_init(struct gkvt_job *j, const char *tag, int maxproc)
{
    memset(j, 0, sizeof *j);
    if ((j->dir = gkvt_mkdtemp(tag)) == NULL)
        return -1;
    snprintf(j->cfg, sizeof j->cfg, "%s/ip.cfg", j->dir);
    for (int m = 0; m < GKVT_JOB_MACH; m++)
        snprintf(j->st[m], sizeof j->st[m], "%s/st%d", j->dir, m);
    j->maxproc = maxproc < GKVT_JOB_PROCS ? maxproc : GKVT_JOB_PROCS;
    return 0;
}

int
gkvt_job_fini(struct gkvt_job *j)
{
    int bad = gkvt_proc_reap_all(j->p, j->np);

    j->np = 0;
    gkvt_rmtree(j->dir);
    j->dir = NULL;
    return bad ? -1 : 0;
}

int
gkvt_job_setup(void **state, size_t size, const char *tag, int maxproc,
               const char *const *opts, int drop_clashed)
{
    struct gkvt_job *j = calloc(1, size > sizeof *j ? size : sizeof *j);

    if (j == NULL || gkvt_job_init(j, tag, maxproc) != 0) {
        free(j);
        return -1;
    }
    j->opts = opts;
    j->drop_clashed = drop_clashed;
    *state = j;
    return 0;
}

int
gkvt_job_teardown(void **state)
{
    struct gkvt_job *j = *state;
    int bad = gkvt_job_fini(j);

    free(j);
    return bad;
}

struct gkvt_proc *
gkvt_job_spawn(struct gkvt_job *j, char *const argv[], const char *logname)
{
    return gkvt_spawn(j->p, &j->np, j->maxproc, j->dir, argv, logname);
}

void
gkvt_ipcfg_write(const char *path, const char *head, int base, int nmach)
{
    char text[1024];
    size_t o = 0;

    if (head != NULL)
        o += (size_t)snprintf(text + o, sizeof text - o, "%s\n", head);
    for (int m = 0; m < nmach && o < sizeof text; m++)
        o += (size_t)snprintf(text + o, sizeof text - o, "127.0.0.1 %d\n",
                              base + 8 * m);
    assert_true(o < sizeof text);
    gkvt_write_text(path, text, 0644);
}

struct gkvt_proc *
gkvt_server_try(struct gkvt_job *j, int m, int k, const char *const *extra)
{
    char *argv[48], mach[16], sid[16], ns[16], logname[64], server[4200];
    struct gkvt_proc *p;
    int n = 0;

    assert_true(m >= 0 && m < GKVT_JOB_MACH);
    snprintf(server, sizeof server, "%s", gkvt_prog("gkv-server"));
    snprintf(mach, sizeof mach, "%d", m);
    snprintf(sid, sizeof sid, "%d", k);
    snprintf(ns, sizeof ns, "%d", j->nserv);
    snprintf(logname, sizeof logname, "server-m%d-s%d.log", m, k);
    argv[n++] = server;
    if (j->json[0] != '\0') {
        argv[n++] = "--part-config";
        argv[n++] = j->json;
        argv[n++] = "--part-id";
        argv[n++] = mach;
        argv[n++] = "--ip-config";
        argv[n++] = j->cfg;
    } else {
        argv[n++] = "--store";
        argv[n++] = j->st[m];
        argv[n++] = "--ip-config";
        argv[n++] = j->cfg;
        argv[n++] = "--machine";
        argv[n++] = mach;
    }
    argv[n++] = "--server-id";
    argv[n++] = sid;
    argv[n++] = "--num-servers";
    argv[n++] = ns;
    for (int i = 0; j->opts != NULL && j->opts[i] != NULL; i++) {
        assert_true(n < 47);
        argv[n++] = (char *)j->opts[i];
    }
    for (int i = 0; extra != NULL && extra[i] != NULL; i++) {
        assert_true(n < 47);
        argv[n++] = (char *)extra[i];
    }
    argv[n] = NULL;
    p = gkvt_job_spawn(j, argv, logname);
    return gkvt_server_listening(p) ? p : NULL;
}

void
gkvt_serve(struct gkvt_job *j, int nmach, int nserv, const char *const *extra,
           struct gkvt_proc **srv)
{
    for (int attempt = 0; attempt < 20; attempt++) {
        int clash = 0;

        j->nmach = nmach;
        j->nserv = nserv;
        j->base = gkvt_port_base(8 * nmach);
        gkvt_ipcfg_write(j->cfg, j->cfg_head, j->base, nmach);
        for (int m = 0; m < nmach && !clash; m++)
            for (int k = 0; k < nserv && !clash; k++) {
                struct gkvt_proc *p = gkvt_server_try(j, m, k, extra);

                if (srv != NULL)
                    srv[m * nserv + k] = p;
                clash = p == NULL;
            }
        if (!clash)
            return;
        for (int i = 0; i < j->np; i++)
            gkvt_proc_kill(&j->p[i]);
        if (j->drop_clashed)
            j->np = 0;
    }
    fail_msg("could not find free ports in 20 tries");
}

gkv_client *
gkvt_connect(const char *cfg, const char *group, uint32_t rank,
             const gkv_client_opts *o)
{
    gkv_client *c = NULL;
    gkv_err rc = gkv_client_connect(&c, cfg, NULL, group, rank, o);

    if (rc != GKV_OK)
        fail_msg("connect to the servers of %s as %s rank %u: %s: %s", cfg,
                 group, (unsigned)rank, gkv_err_name(rc), gkv_net_errmsg());
    return c;
}

unsigned char *
gkvt_encode(void (*enc)(net_wr *w, const void *arg), const void *arg,
            size_t *len)
{
    net_wr w = {0};
    unsigned char *b;

    enc(&w, arg);
    *len = w.off;
    b = malloc(w.off + 1);
    assert_non_null(b);
    w.p = b;
    w.cap = w.off;
    w.off = 0;
    enc(&w, arg);
    assert_int_equal(w.off, *len);
    return b;
}

int
gkvt_raw_socket(int port, int timeout_ms)
{
    int s = nn_socket(AF_SP, NN_REQ), v = -1;
    char url[64];

    assert_true(s >= 0);
    nn_setsockopt(s, NN_SOL_SOCKET, NN_RCVMAXSIZE, &v, sizeof v);
    nn_setsockopt(s, NN_SOL_SOCKET, NN_RCVTIMEO, &timeout_ms, sizeof timeout_ms);
    v = INT_MAX;
    nn_setsockopt(s, NN_REQ, NN_REQ_RESEND_IVL, &v, sizeof v);
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", port);
    assert_true(nn_connect(s, url) >= 0);
    return s;
}

size_t
gkvt_raw_msg(unsigned char *b, uint16_t type, uint64_t session, uint64_t req,
             const void *pl, size_t plen)
{
    net_hdr h = {0};

    h.magic = NET_MAGIC;
    h.version = NET_VERSION;
    h.type = type;
    h.req_id = req;
    h.session = session;
    h.len = plen;
    net__hdr_put(b, &h);
    if (plen > 0)
        memcpy(b + NET_HDR_LEN, pl, plen);
    return NET_HDR_LEN + plen;
}
