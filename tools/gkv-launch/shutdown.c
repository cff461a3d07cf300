/* shutdown.c - --shutdown: asks each server of the ip_config to stop. */
#include <string.h>
#include "launch.h"
#include "util.h"

/* Asks every server of the ip_config to stop (forced: persistent ones
 * too), one at a time, so that one down does not spare the others. Each
 * that does not answer is named. A machine whose servers say in their
 * handshake that they run more than --num-servers per machine has those
 * stopped too (said on stdout); they are checked to be the servers the
 * handshake promised (this machine's, at their place) before they are
 * asked. EX_OK when all answered. */
int
launch__do_shutdown(struct job *j)
{
    char token[GKV_TOKEN_MAX + 1], group[GKV_NET_GROUP_MAX + 1];
    gkv_client_opts o;
    unsigned nbad = 0, ntried = 0;

    if (j->token_file != NULL &&
        launch__load_token(j, token, sizeof token) != 0)
        return EX_FAIL;
    memset(&o, 0, sizeof o);
    o.timeout_ms = j->timeout_arg != 0 ? (int)(j->timeout_s * 1000) : 5000;
    o.flags = GKV_CLIENT_NO_HEARTBEAT | GKV_CLIENT_OBSERVER;
    snprintf(group, sizeof group, "gkv-launch-stop-%ld", (long)getpid());
    for (unsigned m = 0; m < j->M; m++) {
        const gkv_machine *mc = gkv_ipconfig_machine(j->ipc, m);
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
            }
            gkv_client_close(c);
        }
        if (refused > ns) {         /* named above, not asked */
            nbad += refused - ns;
            ntried += refused - ns;
        }
    }
    memset(token, 0, sizeof token);
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
    return EX_OK;
}
