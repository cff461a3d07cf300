/* remote.c - remote machines: whether a host is this one, and the ssh
 * command line (a remote process runs in a session of its own, whose id
 * comes back as the first line of its output). */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include "launch.h"
#include "util.h"

/* Appends 's' quoted for a POSIX shell ('...' with ' as '\''). */
void
launch__sq_append(char **buf, size_t *len, size_t *cap, const char *s)
{
    size_t need = *len + 4 * strlen(s) + 4;

    if (need > *cap) {
        *cap = need * 2;
        if ((*buf = realloc(*buf, *cap)) == NULL) {
            tools__note("out of memory");
            exit(EX_FAIL);
        }
    }
    (*buf)[(*len)++] = '\'';
    for (; *s; s++) {
        if (*s == '\'') {
            memcpy(*buf + *len, "'\\''", 4);
            *len += 4;
        } else {
            (*buf)[(*len)++] = *s;
        }
    }
    (*buf)[(*len)++] = '\'';
    (*buf)[*len] = '\0';
}

void
launch__raw_append(char **buf, size_t *len, size_t *cap, const char *s)
{
    size_t n = strlen(s);

    if (*len + n + 1 > *cap) {
        *cap = (*len + n + 1) * 2;
        if ((*buf = realloc(*buf, *cap)) == NULL) {
            tools__note("out of memory");
            exit(EX_FAIL);
        }
    }
    memcpy(*buf + *len, s, n + 1);
    *len += n;
}

/* Whether 'host' names this host: 127.x, ::1, localhost, or (by the
 * library's check, where any 127.0.0.0/8 address counts) a name or
 * address of one of its interfaces. */
int
launch__host_is_local(const char *host, struct ifaddrs *ifs)
{
    if (strncmp(host, "127.", 4) == 0 || strcmp(host, "::1") == 0 ||
        strcmp(host, "localhost") == 0)
        return 1;
    return gkv_net_host_is_local(host, ifs, 1);
}

/* Whether 'host' is an address a server can listen on and clients can
 * reach: an IPv4 or IPv6 address, or a name that resolves to an IPv4
 * address (the servers resolve names to IPv4 only, see net/server.c). 0,
 * or -1 with why in 'why' (getaddrinfo's text). The ip_config format check
 * takes "127.0.0.300" as a host name; only this finds that it is none. */
int
launch__host_resolves(const char *host, char *why, size_t cap)
{
    struct addrinfo hints, *res = NULL;
    struct in_addr a4;
    struct in6_addr a6;
    int rc;

    if (inet_pton(AF_INET, host, &a4) == 1 ||
        inet_pton(AF_INET6, host, &a6) == 1)
        return 0;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    rc = getaddrinfo(host, NULL, &hints, &res);
    if (rc == 0 && res != NULL) {
        freeaddrinfo(res);
        return 0;
    }
    if (res != NULL)
        freeaddrinfo(res);
    snprintf(why, cap, "%s", rc == EAI_SYSTEM ? strerror(errno) :
             rc != 0 ? gai_strerror(rc) : "no IPv4 address");
    return -1;
}

/* The string a remote shell runs for argv with environment env: a fresh
 * session whose id is printed first, then the program. */
char *
launch__remote_string(const struct job *j, char **env, char **argv)
{
    char *b = NULL;
    size_t len = 0, cap = 0;

    launch__raw_append(&b, &len, &cap, "cd ");
    launch__sq_append(&b, &len, &cap, j->cwd);
    launch__raw_append(&b, &len, &cap, " 2>/dev/null; exec setsid -w sh -c ");
    launch__sq_append(&b, &len, &cap,
                      "echo \"@gkv-pgid $$\"; exec \"$0\" \"$@\"");
    launch__raw_append(&b, &len, &cap, " env");
    for (size_t i = 0; env[i] != NULL; i++) {
        launch__raw_append(&b, &len, &cap, " ");
        launch__sq_append(&b, &len, &cap, env[i]);
    }
    for (size_t i = 0; argv[i] != NULL; i++) {
        launch__raw_append(&b, &len, &cap, " ");
        launch__sq_append(&b, &len, &cap, argv[i]);
    }
    return b;
}

/* ssh argv running 'remote' on machine m; strings borrowed, port in 'pbuf'. */
char **
launch__ssh_argv(const struct job *j, unsigned m, const char *remote,
                 char *pbuf, char *dest, size_t dest_cap)
{
    char **a = tools__xcalloc(10, sizeof *a);
    size_t n = 0;
    const char *host = gkv_ipconfig_machine(j->ipc, m)->host;

    if (j->ssh_user != NULL)
        snprintf(dest, dest_cap, "%s@%s", j->ssh_user, host);
    else
        snprintf(dest, dest_cap, "%s", host);
    a[n++] = (char *)(j->ssh_cmd ? j->ssh_cmd : "ssh");
    a[n++] = "-o";
    a[n++] = "BatchMode=yes";
    if (j->ssh_port != 0) {
        snprintf(pbuf, 16, "%u", j->ssh_port);
        a[n++] = "-p";
        a[n++] = pbuf;
    }
    a[n++] = dest;
    a[n++] = (char *)remote;
    a[n] = NULL;
    return a;
}
