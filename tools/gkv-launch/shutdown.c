/* shutdown.c - --shutdown: asks each server of the ip_config to stop,
 * then waits until those it asked are gone and their ports free, so that
 * a launch right after it finds the ports as a fresh job would. */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "launch.h"
#include "util.h"

/* A server that was asked to stop, watched until it is gone. */
struct stopped {
    unsigned m, k;
    int local;              /* its machine is this host: its port must be
                             * bindable again */
    uint32_t pid;           /* its process here (same host name), or 0:
                             * only its port is watched */
};

/* Whether port 'port' of 'host' (an address of this host) can be bound as
 * a server binds it (SO_REUSEADDR, as nanomsg does: connections left in
 * TIME_WAIT do not count, a listener does). An address that cannot be
 * bound for another reason says nothing: 1. */
static int
port_bindable(const char *host, unsigned port)
{
    struct addrinfo hints, *res = NULL;
    char ps[16];
    int ok = 1, one = 1;

    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    snprintf(ps, sizeof ps, "%u", port);
    if (getaddrinfo(host, ps, &hints, &res) != 0)
        return 1;
    for (struct addrinfo *a = res; a != NULL && ok; a = a->ai_next) {
        int fd = socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);

        if (fd < 0)
            continue;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 && errno == EADDRINUSE)
            ok = 0;
        close(fd);
    }
    freeaddrinfo(res);
    return ok;
}

/* Whether process pid is gone: no such process, or a zombie its parent
 * has not reaped yet (it holds no port and no store). */
static int
pid_gone(uint32_t pid)
{
    char path[64], buf[512], *p;
    FILE *fp;
    size_t n;

    if (kill((pid_t)pid, 0) != 0 && errno == ESRCH)
        return 1;
    snprintf(path, sizeof path, "/proc/%lu/stat", (unsigned long)pid);
    if ((fp = fopen(path, "r")) == NULL)
        return errno == ENOENT;
    n = fread(buf, 1, sizeof buf - 1, fp);
    fclose(fp);
    buf[n] = '\0';
    p = strrchr(buf, ')');
    return p != NULL && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X');
}

/* NULL when server v is gone and its port free; else what still holds it
 * into why. */
static const char *
server_left(const struct job *j, const struct stopped *v, char *why,
            size_t cap)
{
    const gkv_machine *mc = gkv_ipconfig_machine(j->ipc, v->m);

    if (tools__port_accepts(mc->host, mc->port + v->k, 200))
        snprintf(why, cap, "its port %u still accepts connections",
                 mc->port + v->k);
    else if (v->local && !port_bindable(mc->host, mc->port + v->k))
        snprintf(why, cap, "its port %u cannot be bound yet", mc->port + v->k);
    else if (v->pid != 0 && !pid_gone(v->pid))
        snprintf(why, cap, "its process (pid %lu) still runs (writing its "
                 "store?)", (unsigned long)v->pid);
    else
        return NULL;
    return why;
}

/* Waits (at most --timeout, default 60 s) until every server of v[0..n)
 * is gone and its port free: a launch right after this then starts its
 * own servers instead of finding the ports held. EX_OK, or EX_FAIL with
 * each server still there named. */
static int
wait_stopped(const struct job *j, const struct stopped *v, size_t n)
{
    double end = tools__now_s() + j->timeout_s;
    char why[256], label[PATH_MAX + 400];
    size_t left = n;
    int said = 0;

    while (n > 0) {
        left = 0;
        for (size_t i = 0; i < n; i++)
            left += server_left(j, &v[i], why, sizeof why) != NULL;
        if (left == 0 || launch__sig || tools__now_s() > end)
            break;
        if (!said) {
            tools__say("waiting (at most %.0f s) for %zu server%s to exit and "
                       "free %s port%s", j->timeout_s, left,
                       left == 1 ? "" : "s", left == 1 ? "its" : "their",
                       left == 1 ? "" : "s");
            said = 1;
        }
        tools__sleep_ms(50);
    }
    if (left == 0) {
        if (said)
            tools__say("the servers have exited and their ports are free");
        return EX_OK;
    }
    for (size_t i = 0; i < n; i++) {
        if (server_left(j, &v[i], why, sizeof why) == NULL)
            continue;
        launch__server_label(j, v[i].m, v[i].k, label, sizeof label);
        if (launch__sig)
            tools__note("%s was asked to stop, but %s (stopped waiting: "
                        "signal %d)", label, why, (int)launch__sig);
        else
            tools__note("%s was asked to stop, but after %.0f s %s: a launch "
                        "on these ports would find them in use; wait, or "
                        "give a longer --timeout", label, j->timeout_s, why);
    }
    return EX_FAIL;
}

/* Asks every server of the ip_config to stop (forced: persistent ones
 * too), one at a time, so that one down does not spare the others. Each
 * that does not answer is named. A machine whose servers say in their
 * handshake that they run more than --num-servers per machine has those
 * stopped too (said on stdout); they are checked to be the servers the
 * handshake promised (this machine's, at their place) before they are
 * asked. Then waits until those asked are gone and their ports free
 * (wait_stopped). EX_OK when all answered and are gone. */
int
launch__do_shutdown(struct job *j)
{
    char token[GKV_TOKEN_MAX + 1], group[GKV_NET_GROUP_MAX + 1];
    char self[256] = "";
    gkv_client_opts o;
    unsigned nbad = 0, ntried = 0;
    struct stopped *sv = NULL;
    size_t nsv = 0, capsv = 0;
    struct ifaddrs *ifs = NULL;
    int ex;

    if (j->token_file != NULL &&
        launch__load_token(j, token, sizeof token) != 0)
        return EX_FAIL;
    memset(&o, 0, sizeof o);
    o.timeout_ms = j->timeout_arg != 0 ? (int)(j->timeout_s * 1000) : 5000;
    o.flags = GKV_CLIENT_NO_HEARTBEAT | GKV_CLIENT_OBSERVER;
    snprintf(group, sizeof group, "gkv-launch-stop-%ld", (long)getpid());
    gethostname(self, sizeof self - 1);
    if (getifaddrs(&ifs) != 0)
        ifs = NULL;
    for (unsigned m = 0; m < j->M; m++) {
        const gkv_machine *mc = gkv_ipconfig_machine(j->ipc, m);
        int local = launch__host_is_local(mc->host, ifs);
        unsigned ns = j->S;         /* servers of this machine to stop */
        unsigned said = j->S;       /* the most its servers said they are */
        unsigned refused = 0;       /* a count whose ports do not fit */

        for (unsigned k = 0; k < ns; k++) {
            char addr[300], label[PATH_MAX + 400], why[256];
            gkv_client *c = NULL;
            gkv_server_info in;
            gkv_err rc;
            int have_info;

            ntried++;
            launch__server_addr(j, m, k, addr, sizeof addr);
            launch__server_label(j, m, k, label, sizeof label);
            if (launch__host_resolves(mc->host, why, sizeof why) != 0) {
                tools__note(
                    "%s did not answer: its address '%s' does not resolve: "
                    "%s",
                    label, mc->host, why);
                nbad++;
                continue;
            }
            /* a quick look first: a handshake with a port nobody listens
             * on would take the whole timeout */
            if (!tools__port_accepts(mc->host, mc->port + k, 1000)) {
                tools__note(
                    "%s did not answer: nothing accepts connections there",
                    label);
                nbad++;
                continue;
            }
            rc = gkv_client_connect_addr(&c, addr, j->token_file ? token : NULL,
                                         group, 0, &o);
            if (rc != GKV_OK) {
                tools__note("%s was not stopped: handshake: %s: %s%s", label,
                    gkv_strerror(rc), launch__net_detail(addr),
                    rc == GKV_EPERM && j->token_file == NULL ?
                    " (give --token-file: the job's token)" : "");
                nbad++;
                continue;
            }
            have_info = gkv_client_server_info(c, 0, &in) == GKV_OK;
            if (k >= j->S && (!have_info || in.machine != m ||
                              in.server_id != k)) {
                /* not the server its machine's handshake spoke of */
                if (have_info)
                    tools__note(
                        "%s was not stopped: the port is held by gkv server "
                        "'%s' %u/%u (pid %u)",
                        label, in.name, in.machine, in.server_id,
                        (unsigned)in.pid);
                else
                    tools__note(
                        "%s was not stopped: it did not say who it is: %s",
                        label, launch__net_detail(addr));
                gkv_client_close(c);
                nbad++;
                continue;
            }
            if (have_info) {
                tools__say("stopping server %u/%u at %s ('%s', pid %u)", m, k,
                           addr, in.name, (unsigned)in.pid);
                if (in.num_servers > said) {
                    said = in.num_servers;
                    /* their ports must fit and not be another machine's */
                    if (gkv_ipconfig_check(j->ipc, in.num_servers) != GKV_OK) {
                        tools__note(
                            "%s says machine %u runs %u servers, more than "
                            "--num-servers %u, but %s has no room for them "
                            "(%s): servers %u/%u..%u/%u were not stopped",
                            label, m, in.num_servers, j->S, j->ip_config,
                            gkv_net_errmsg(), m, ns, m, in.num_servers - 1);
                        refused = in.num_servers;
                    } else {
                        tools__say("server %u/%u at %s says machine %u runs %u "
                            "servers, more than --num-servers %u: stopping "
                            "servers %u/%u..%u/%u as well", m, k, addr, m,
                            in.num_servers, j->S, m, ns, m,
                            in.num_servers - 1);
                        ns = in.num_servers;
                    }
                }
            }
            if ((rc = gkv_client_shutdown(c, 1)) != GKV_OK) {
                tools__note("%s: shutdown: %s: %s", label, gkv_strerror(rc),
                    launch__net_detail(addr));
                nbad++;
            } else {
                if (nsv == capsv) {
                    capsv = capsv ? 2 * capsv : 16;
                    if ((sv = realloc(sv, capsv * sizeof *sv)) == NULL)
                        tools__die("out of memory");
                }
                /* its process is watched when it runs here: this host's
                 * name, as it said (not a container's namesake pid) */
                sv[nsv++] = (struct stopped){m, k, local,
                    local && have_info && strcmp(in.host, self) == 0 ?
                    in.pid : 0};
            }
            gkv_client_close(c);
        }
        if (refused > ns) {         /* named above, not asked */
            nbad += refused - ns;
            ntried += refused - ns;
        }
    }
    memset(token, 0, sizeof token);
    if (ifs != NULL)
        freeifaddrs(ifs);
    ex = wait_stopped(j, sv, nsv);
    free(sv);
    if (nbad > 0) {
        /* each is named above; say what became of the rest, if any */
        if (nbad == ntried && ntried == 1)
            tools__note(
                "the only server was not stopped (named above, with why)");
        else if (nbad == ntried)
            tools__note(
                "none of the %u servers was stopped (each is named above, "
                "with why)",
                ntried);
        else if (ntried - nbad == 1)
            tools__note(
                "%u of %u servers did not answer or %s not stopped; the "
                "other one was asked to stop",
                nbad, ntried, nbad == 1 ? "was" : "were");
        else
            tools__note(
                "%u of %u servers did not answer or %s not stopped; the "
                "other %u were asked to stop",
                nbad, ntried, nbad == 1 ? "was" : "were", ntried - nbad);
        return EX_FAIL;
    }
    return ex;
}
