/* gkvt_net.h - a test's gkv-server processes on loopback: its directory,
 * ip_config and stores, servers started on fresh ports (again on a port
 * clash), clients connected to them. Shared by the net tests. */
#ifndef GKVT_NET_H
#define GKVT_NET_H
#include <limits.h>
#include <string.h>
#include "gkvt.h"
#include "gkv_net.h"
#include "net/wire.h"

/* A net/ call must fail with 'want', its message holding 'text'. */
#define NET_FAILS(expr, want, text) do { gkv_err rc_ = (expr); \
    if (rc_ != (want)) \
        fail_msg("%s: %s (%s), expected %s", #expr, gkv_err_name(rc_), \
                 gkv_net_errmsg(), gkv_err_name(want)); \
    if (strstr(gkv_net_errmsg(), (text)) == NULL) \
        fail_msg("%s: message '%s' lacks '%s'", #expr, gkv_net_errmsg(), \
                 (text)); \
} while (0)

#define GKVT_JOB_MACH  4     /* machines (stores) a job may have */
#define GKVT_JOB_PROCS 16    /* processes a job may start */

/* One test's processes and files. Machine m listens on base + 8m (server
 * k of it on base + 8m + k). */
struct gkvt_job {
    char *dir;                       /* fresh, removed by gkvt_job_fini */
    char cfg[4200];                  /* DIR/ip.cfg: the ip_config */
    char st[GKVT_JOB_MACH][4200];    /* DIR/st<m>: machine m's store */
    /* Partition servers (gkvt_server_try): the partition config, set by
     * the test; empty: store servers. */
    char json[4200];
    /* The ip_config's first line (NULL: none), set by the test. */
    const char *cfg_head;
    /* Arguments every server of the test gets after the ones that place
     * it (NULL-terminated; NULL: none), set by the test. */
    const char *const *opts;
    /* Set by the test: on a port clash gkvt_serve forgets the processes
     * it killed (their slots are used again); else they stay in p for
     * gkvt_job_fini's check of their logs. */
    int drop_clashed;
    int base, nmach, nserv;
    int maxproc;                     /* p's slots in use at most */
    struct gkvt_proc p[GKVT_JOB_PROCS];
    int np;
};

/* Makes the job's directory ("tag" in its name) and names its ip_config
 * and stores; at most maxproc (<= GKVT_JOB_PROCS) processes. Returns -1
 * (for a cmocka setup) when the directory cannot be made, else 0. */
int  gkvt_job_init(struct gkvt_job *j, const char *tag, int maxproc);
/* Kills and reaps every process the job started and removes its
 * directory. Returns -1 when any of their logs holds a sanitizer report
 * (for a cmocka teardown), else 0. */
int  gkvt_job_fini(struct gkvt_job *j);
/* A cmocka setup: *state gets a new zeroed struct of 'size' bytes whose
 * first member is a job (struct gkvt_job itself, or a test's struct that
 * begins with one), made by gkvt_job_init; its servers get opts, and
 * drop_clashed is set as given. */
int  gkvt_job_setup(void **state, size_t size, const char *tag, int maxproc,
                    const char *const *opts, int drop_clashed);
/* Its teardown: gkvt_job_fini, then frees the struct. */
int  gkvt_job_teardown(void **state);
/* Starts argv in the job (gkvt_spawn) with log DIR/<number>-logname. */
struct gkvt_proc *gkvt_job_spawn(struct gkvt_job *j, char *const argv[],
                                 const char *logname);
/* Writes an ip_config of nmach machines "127.0.0.1 <base + 8m>" to path,
 * after the line 'head' when not NULL (a cmocka failure if it cannot). */
void gkvt_ipcfg_write(const char *path, const char *head, int base, int nmach);
/* Starts server k (of j->nserv) of machine m and waits until it listens;
 * NULL when its port was taken. Its arguments:
 *   gkv-server --store ST[m] --ip-config CFG --machine m
 *   gkv-server --part-config JSON --part-id m --ip-config CFG   (json set)
 * then --server-id k --num-servers NSERV, j->opts and extra
 * (NULL-terminated; NULL: none). Its log is server-m<m>-s<k>.log. */
struct gkvt_proc *gkvt_server_try(struct gkvt_job *j, int m, int k,
                                  const char *const *extra);
/* nserv servers on each of nmach machines, all with extra, on fresh
 * ports (j->base; the ip_config written anew): on a port clash all are
 * killed and started again elsewhere, 20 tries at most. srv (NULL: not
 * wanted) gets server k of machine m at srv[m * nserv + k]. */
void gkvt_serve(struct gkvt_job *j, int nmach, int nserv,
                const char *const *extra, struct gkvt_proc **srv);
/* A client of 'group' as 'rank' with options o (NULL: the defaults),
 * connected through the ip_config cfg; a failure fails the test, naming
 * the error. */
gkv_client *gkvt_connect(const char *cfg, const char *group, uint32_t rank,
                         const gkv_client_opts *o);

/* A raw nanomsg REQ socket connected to 127.0.0.1:port, for hand-made
 * messages: any reply size, replies awaited timeout_ms, no resends. The
 * caller nn_close()s it. */
int gkvt_raw_socket(int port, int timeout_ms);
/* A payload encoded by enc(w, arg) with the two passes the server and
 * client use (the first only counts): malloc'd, *len bytes (and one more
 * allocated); a cmocka failure when the passes disagree. */
unsigned char *gkvt_encode(void (*enc)(net_wr *w, const void *arg),
                           const void *arg, size_t *len);
/* Writes a request of 'type' to b (NET_HDR_LEN + plen bytes): the
 * header (magic, version, req, session, plen) and the payload pl.
 * Returns its length. */
size_t gkvt_raw_msg(unsigned char *b, uint16_t type, uint64_t session,
                    uint64_t req, const void *pl, size_t plen);

/* ---- one server spoken to by hand (the net_hostile tests) ----------------
 * A test's directory with one store and one gkv-server, spoken to with raw
 * REQ sockets (gkvt_raw_socket) in the wire format of net/wire.h. */

#define GKVT_RAWFX_PROCS 8   /* processes a test may start */

struct gkvt_rawfx {
    char *dir;
    char st[4200];           /* the store: DIR/st */
    char cfg[4200];          /* the ip_config: DIR/ip.cfg */
    char json[4400];         /* graph tests: the partition config */
    char server[PATH_MAX + 16];  /* the gkv-server program */
    int base;                /* the server's port */
    struct gkvt_proc p[GKVT_RAWFX_PROCS];
    int np;
};

/* A cmocka setup: *state gets a new zeroed gkvt_rawfx whose directory has
 * "tag" in its name. */
int  gkvt_rawfx_setup(void **state, const char *tag);
/* Its teardown: kills and reaps every process the test started; a
 * sanitizer report in a log fails the test. */
int  gkvt_rawfx_teardown(void **state);
/* Starts argv in the test (gkvt_spawn) with log DIR/<number>-logname. */
struct gkvt_proc *gkvt_rawfx_spawn(struct gkvt_rawfx *f, char *const argv[],
                                   const char *logname);
/* Starts gkv-server with the leading arguments 'lead' and 'extra' (both
 * NULL-terminated) on fresh ports (again on a port clash); returns it once
 * it listens. */
struct gkvt_proc *gkvt_rawfx_start(struct gkvt_rawfx *f, const char *const *lead,
                                   const char *const *extra);
/* The same for a job of nmach (1..8) machines: the ip_config has nmach
 * lines, machine m's ports from f->base + 8 m; only the one server is
 * started. */
struct gkvt_proc *gkvt_rawfx_start_n(struct gkvt_rawfx *f, int nmach,
                                     const char *const *lead,
                                     const char *const *extra);
/* gkvt_rawfx_start with "--store ST --machine 0" and extra. */
struct gkvt_proc *gkvt_rawfx_serve(struct gkvt_rawfx *f, const char *const *extra);
/* gkvt_rawfx_serve with no ASan quarantine in the server (SAN=address),
 * so that its peak resident set (gkvt_peak_kib) shows what it keeps. */
struct gkvt_proc *gkvt_rawfx_serve_peak(struct gkvt_rawfx *f,
                                        const char *const *extra);

/* A reply as gkvt_rrecv gives it. */
struct gkvt_rep {
    net_hdr h;
    unsigned char *pl;       /* payload (malloc'd; the next gkvt_rrecv frees it) */
    size_t plen;
    char msg[1100];          /* an error reply's message */
};

/* Sends request 'type' (header and payload) without waiting. */
void gkvt_rsend(int s, uint16_t type, uint64_t session, uint64_t req,
                const void *pl, size_t plen);
/* Receives a reply into r (its header checked); -1 when none came. */
int  gkvt_rrecv(int s, struct gkvt_rep *r);
/* gkvt_rsend, then gkvt_rrecv. */
int  gkvt_rcall(int s, uint16_t type, uint64_t session, uint64_t req,
                const void *pl, size_t plen, struct gkvt_rep *r);
/* A HELLO's nonce, into n. */
void gkvt_rhello(int s, unsigned char *n);
/* A HANDSHAKE with nonce n as (group, rank) with NET_HS_* 'flags', and a
 * proof made from 'token' (none when NULL); returns the session, or 0 when
 * refused (r holds the reply). */
uint64_t gkvt_rhs(int s, const unsigned char *n, const char *token,
                  const char *group, uint32_t rank, uint32_t flags,
                  struct gkvt_rep *r);
/* HELLO and HANDSHAKE as (group, rank) with NET_HS_* 'flags', no token;
 * returns the session, or 0 when refused (r holds the reply). */
uint64_t gkvt_rjoin(int s, const char *group, uint32_t rank, uint32_t flags,
                    struct gkvt_rep *r);
/* HELLO and HANDSHAKE as (group, rank), no token; returns the session. */
uint64_t gkvt_rhandshake(int s, const char *group, uint32_t rank);
/* The server's "requests" count, asked with a STATS over s as session
 * sess (the count includes this STATS: handle() counts a request first). */
uint64_t gkvt_rrequests(int s, uint64_t sess);
/* Waits (30 s at most) until the server has taken up one more request
 * than the STATS polls over s (session sess) since gkvt_rrequests() said
 * 'before': the request sent on another socket after that call is in a
 * worker's hands (answered, parked, or being handled), not waiting in
 * nanomsg's queue. */
void gkvt_await_taken(int s, uint64_t sess, uint64_t before);
/* An "add" push of every element 'v' to rows id..id+n-1 (w floats each)
 * into b (cap bytes); returns the payload length. */
size_t gkvt_enc_add(unsigned char *b, size_t cap, const char *name,
                    uint64_t id, size_t n, size_t w, float v);
/* Asserts got[i] == was[i] + d for n floats. */
void gkvt_assert_added(const float *got, const float *was, size_t n, float d);

/* A peer speaking SP over TCP by hand (nanomsg's framing: an 8-byte
 * greeting, then per message a u64 big-endian size and the bytes, a REQ
 * message starting with its 4-byte request id), so that it can send
 * requests and never read a reply: a TCP socket connected to
 * 127.0.0.1:port with a small receive buffer, greeted as a socket of
 * protocol 'proto' (NN_REQ, NN_PAIR); the caller close()s it. */
int  gkvt_sp_connect(int port, int proto);
/* Sends msg (len bytes) as a REQ message with request id 'id'. */
void gkvt_sp_send(int fd, uint32_t id, const void *msg, size_t len);
/* A REQ frame's first 12 bytes into h: the u64 big-endian length of a
 * message of len bytes with its request id, then the id 'id' (its top bit
 * set), as gkvt_sp_send sends them. */
void gkvt_sp_head(unsigned char *h, uint32_t id, size_t len);
/* Sends all n bytes of p on socket fd (no SIGPIPE); fails the test on an
 * error. */
void gkvt_send_all(int fd, const void *p, size_t n);

#endif
