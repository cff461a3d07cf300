/* gate.h - gkv-server's connection gate (gate.c): what nanomsg 1.1.5 does
 * not do for a server, done from below it. The program's definitions of
 * accept, accept4, recvmsg, close and socket interpose libc's for
 * libnanomsg; the server asks the gate through gkv_server_gate. */
#ifndef GKV_SERVER_GATE_H
#define GKV_SERVER_GATE_H

#include "gkv_net.h"

#define GATE_UNAUTH_MAX      1024  /* default --max-unauth */
#define GATE_UNAUTH_PEER_MAX 256   /* default --max-unauth-per-peer */

struct gate_opts {
    unsigned max_unauth;       /* connections not yet authenticated, in
                                * all; 0 = GATE_UNAUTH_MAX */
    unsigned max_unauth_peer;  /* ... from one address; 0 =
                                * GATE_UNAUTH_PEER_MAX */
    unsigned max_peer_sessions;/* sessions per address (the server's
                                * check); 0 = GKV_PEER_SESSIONS */
    uint64_t max_msg;          /* the server's (gkv_server_opts); 0 =
                                * GKV_NET_MAX_MSG */
    int quiet;                 /* no log lines */
};

/* Starts gating the TCP connections accepted from now on: peer address,
 * caps on connections not yet authenticated, the pre-session frame limit.
 * Call once, before gkv_server_open(). GKV_OK, or GKV_ENOMEM. Until it is
 * called (and in any other program) the wrappers only pass calls on. */
gkv_err gate_start(const struct gate_opts *o);

/* The hook to give gkv_server_set_gate(). */
const gkv_server_gate *gate_hook(void);

#endif
