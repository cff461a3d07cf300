/* reuse.c - persistent (--keep-alive) servers: finding running ones a
 * launch may reuse, and checking they serve what this launch would. */
#include <stdlib.h>
#include <string.h>
#include "launch.h"
#include "util.h"

/* "host:port" of server k of machine m ("[v6]:port" for an IPv6 address),
 * as gkv_client_connect_addr() takes it. */
void
launch__server_addr(const struct job *j, unsigned m, unsigned k, char *out,
                    size_t cap)
{
    const gkv_machine *mc = gkv_ipconfig_machine(j->ipc, m);

    if (strchr(mc->host, ':') != NULL)
        snprintf(out, cap, "[%s]:%u", mc->host, mc->port + k);
    else
        snprintf(out, cap, "%s:%u", mc->host, mc->port + k);
}

/* gkv_net_errmsg() without the client's own label of the server it talked
 * to: a client of one address (gkv_client_connect_addr) calls every server
 * "ADDR (machine 0, server 0)", whichever it is, so the callers here name
 * it from the ip_config instead. */
const char *
launch__net_detail(const char *addr)
{
    const char *m = gkv_net_errmsg(), *p;
    size_t n = strlen(addr);

    if (strncmp(m, "server ", 7) == 0 && strncmp(m + 7, addr, n) == 0 &&
        strncmp(m + 7 + n, " (machine ", 10) == 0 &&
        (p = strstr(m + 7 + n, "): ")) != NULL)
        return p + 3;
    return m;
}

/* Server k of machine m as the ip_config places it, for messages:
 * "server 1/0 (machine 1, server 0, 10.0.0.6:30050, ip.txt line 2)". */
void
launch__server_label(const struct job *j, unsigned m, unsigned k, char *out,
             size_t cap)
{
    char addr[300];

    launch__server_addr(j, m, k, addr, sizeof addr);
    snprintf(out, cap, "server %u/%u (machine %u, server %u, %s, %s line %u)",
             m, k, m, k, addr, j->ip_config,
             gkv_ipconfig_machine(j->ipc, m)->line);
}

/* The store this launch serves on machine m, as a server reports it in its
 * handshake (the realpath, when it resolves here): partition m's store
 * with --part-config, else --store with '%m' replaced. */
static void
expected_store(const struct job *j, unsigned m, char *out, size_t cap)
{
    char path[PATH_MAX], rp[PATH_MAX];

    if (j->book != NULL)
        snprintf(path, sizeof path, "%s", gkv_pbook_part_path(j->book, (int)m));
    else
        launch__store_path(j, m, path, sizeof path);
    snprintf(out, cap, "%s", realpath(path, rp) != NULL ? rp : path);
}

/* Checks with a handshake, one server at a time, that every server of the
 * job found running (p->reused) is a persistent gkv server named
 * j->server_name, in its place (machine m, server k of S per machine), and
 * serving the store this launch would serve there. Runs before anything is
 * started. EX_OK when so; EX_FAIL when a port is held by anything else;
 * EX_USAGE when the persistent servers serve another store (another graph,
 * another --store) than this launch's inputs say. Says why. */
int
launch__check_reused(struct job *j)
{
    char token[GKV_TOKEN_MAX + 1], group[GKV_NET_GROUP_MAX + 1];
    gkv_client_opts o;
    int held = 0, other_store = 0;

    if (j->token_file != NULL &&
        launch__load_token(j, token, sizeof token) != 0)
        return EX_USAGE;
    memset(&o, 0, sizeof o);
    o.timeout_ms = 3000;
    o.flags = GKV_CLIENT_NO_HEARTBEAT | GKV_CLIENT_OBSERVER;
    snprintf(group, sizeof group, "gkv-launch-probe-%ld", (long)getpid());
    for (size_t i = 0; i < j->np; i++) {
        struct proc *p = &j->p[i];
        char addr[300], want[PATH_MAX];
        gkv_client *c = NULL;
        gkv_server_info in;
        gkv_err rc;

        if (p->role != R_SERVER || !p->reused)
            continue;
        launch__server_addr(j, p->machine, p->idx, addr, sizeof addr);
        rc = gkv_client_connect_addr(&c, addr, j->token_file ? token : NULL,
                                     group, 0, &o);
        if (rc == GKV_OK)
            rc = gkv_client_server_info(c, 0, &in);
        if (rc != GKV_OK) {
            tools__note(
                "port %s is held by something that is not a gkv server of "
                "this job (%s: %s)",
                addr, gkv_strerror(rc), launch__net_detail(addr));
            gkv_client_close(c);
            held = 1;
            continue;
        }
        gkv_client_close(c);
        p->hs_lease_ms = in.lease_ms;
        p->hs_max_msg = in.max_msg;
        if (strcmp(in.name, j->server_name) != 0 || !in.keep_alive ||
            in.num_servers != j->S) {
            tools__note(
                "port %s is held by gkv server '%s' (pid %u, %u servers per "
                "machine, keep-alive %s), not persistent server '%s' with %u "
                "servers per machine",
                addr, in.name, (unsigned)in.pid, in.num_servers,
                in.keep_alive ? "on" : "off", j->server_name, j->S);
            held = 1;
            continue;
        }
        if (in.machine != p->machine || in.server_id != p->idx) {
            tools__note(
                "port %s is held by persistent server '%s' %u/%u (pid %u), "
                "but %s makes it server %u/%u (a reordered ip_config?)",
                addr, in.name, in.machine, in.server_id, (unsigned)in.pid,
                j->ip_config, p->machine, p->idx);
            held = 1;
            continue;
        }
        expected_store(j, p->machine, want, sizeof want);
        if (strcmp(in.store, want) != 0) {
            tools__note(
                "persistent server '%s' at %s (pid %u) serves the store %s, "
                "but this launch serves %s on machine %u (%s %s): stop the "
                "servers first (" PROG " --ip-config %s --num-servers %u%s%s "
                "--shutdown) or give other ports and another --server-name",
                in.name, addr, (unsigned)in.pid, in.store, want, p->machine,
                j->book != NULL ? "--part-config" : "--store",
                j->book != NULL ? j->part_abs : j->store_abs, j->ipc_abs, j->S,
                launch__token_shown(j) ? " --token-file " : "",
                launch__token_shown(j) ? j->tok_abs : "");
            other_store = 1;
        }
    }
    memset(token, 0, sizeof token);
    return held ? EX_FAIL : other_store ? EX_USAGE : EX_OK;
}
