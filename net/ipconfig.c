/* ipconfig.c - the ip_config file: one machine per line, "IP [PORT]". */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include "base/base.h"
#include "net/gkv_net.h"
#include "net/wire.h"

struct gkv_ipconfig {
    size_t n;
    gkv_machine *m;
};

static int
host_ok(const char *h)
{
    struct in6_addr a6;
    size_t n = strlen(h);

    if (n == 0 || n > 253)
        return 0;
    if (strchr(h, ':') != NULL)          /* an IPv6 literal, nothing else */
        return inet_pton(AF_INET6, h, &a6) == 1;
    for (size_t i = 0; i < n; i++)
        if (!((h[i] >= 'a' && h[i] <= 'z') || (h[i] >= 'A' && h[i] <= 'Z') ||
              (h[i] >= '0' && h[i] <= '9') || h[i] == '.' || h[i] == '-' ||
              h[i] == '_'))
            return 0;
    return h[0] != '-' && h[0] != '.';
}

gkv_err
gkv_ipconfig_load(gkv_ipconfig **out, const char *path)
{
    gkv_ipconfig *c = NULL;
    FILE *f = NULL;
    char line[1024];
    unsigned ln = 0;
    size_t cap = 0;
    gkv_err rc = GKV_OK;

    net__clear();
    if (out == NULL || path == NULL)
        return net__fail(GKV_EINVAL, "ip_config: no path");
    *out = NULL;
    if ((f = fopen(path, "r")) == NULL)
        return net__fail(gkv__from_errno(errno), "ip_config %s: %s", path,
                         strerror(errno));
    if ((c = gkv__calloc(1, sizeof *c)) == NULL) {
        rc = net__fail(GKV_ENOMEM, "ip_config %s: out of memory", path);
        goto out;
    }
    while (fgets(line, sizeof line, f) != NULL) {
        char *tok[3], *save = NULL, *hash, *end;
        size_t nt = 0, len = strlen(line);
        unsigned long port = GKV_NET_PORT;

        ln++;
        if (len == sizeof line - 1 && line[len - 1] != '\n' && !feof(f)) {
            rc = net__fail(GKV_EFORMAT, "%s:%u: line longer than %zu bytes",
                           path, ln, sizeof line - 2);
            goto out;
        }
        if ((hash = strchr(line, '#')) != NULL)
            *hash = '\0';
        for (char *t = strtok_r(line, " \t\r\n", &save); t != NULL;
             t = strtok_r(NULL, " \t\r\n", &save)) {
            if (nt == 2) {
                rc = net__fail(GKV_EFORMAT, "%s:%u: expected 'IP [PORT]', "
                               "found more than two fields", path, ln);
                goto out;
            }
            tok[nt++] = t;
        }
        if (nt == 0)
            continue;
        if (!host_ok(tok[0])) {
            rc = net__fail(GKV_EFORMAT, "%s:%u: '%s' is not an IP address or "
                           "host name", path, ln, tok[0]);
            goto out;
        }
        if (nt == 2) {
            errno = 0;
            port = strtoul(tok[1], &end, 10);
            if (errno || *end != '\0' || tok[1][0] < '0' || tok[1][0] > '9' ||
                port == 0 || port > 65535) {
                rc = net__fail(GKV_EFORMAT, "%s:%u: port '%s' is not a number "
                               "in 1..65535", path, ln, tok[1]);
                goto out;
            }
        }
        for (size_t i = 0; i < c->n; i++)
            if (strcmp(c->m[i].host, tok[0]) == 0 && c->m[i].port == port) {
                rc = net__fail(GKV_EFORMAT, "%s:%u: machine %s port %lu is "
                               "already listed at line %u", path, ln, tok[0],
                               port, c->m[i].line);
                goto out;
            }
        if (c->n == cap) {
            size_t nc = cap ? cap * 2 : 8;
            gkv_machine *m = gkv__realloc(c->m, nc * sizeof *m);
            if (m == NULL) {
                rc = net__fail(GKV_ENOMEM, "ip_config %s: out of memory", path);
                goto out;
            }
            c->m = m;
            cap = nc;
        }
        snprintf(c->m[c->n].host, sizeof c->m[c->n].host, "%s", tok[0]);
        c->m[c->n].port = (unsigned)port;
        c->m[c->n].line = ln;
        c->n++;
    }
    if (ferror(f)) {
        rc = net__fail(GKV_EIO, "ip_config %s: read error", path);
        goto out;
    }
    if (c->n == 0) {
        rc = net__fail(GKV_EFORMAT, "ip_config %s: no machine listed", path);
        goto out;
    }
out:
    if (f != NULL)
        fclose(f);
    if (rc != GKV_OK) {
        gkv_ipconfig_free(c);
        return rc;
    }
    *out = c;
    return GKV_OK;
}

void
gkv_ipconfig_free(gkv_ipconfig *c)
{
    if (c == NULL)
        return;
    gkv__free(c->m);
    gkv__free(c);
}

size_t
gkv_ipconfig_count(const gkv_ipconfig *c)
{
    return c != NULL ? c->n : 0;
}

const gkv_machine *
gkv_ipconfig_machine(const gkv_ipconfig *c, size_t i)
{
    return c != NULL && i < c->n ? &c->m[i] : NULL;
}

gkv_err
gkv_ipconfig_check(const gkv_ipconfig *c, unsigned num_servers)
{
    net__clear();
    if (c == NULL || num_servers == 0)
        return net__fail(GKV_EINVAL, "ip_config: %s",
                         c == NULL ? "none" : "0 servers per machine");
    for (size_t i = 0; i < c->n; i++) {
        /* (compared so that a huge num_servers cannot wrap around) */
        if (num_servers - 1 > 65535 - c->m[i].port)
            return net__fail(GKV_EINVAL, "ip_config line %u: ports from %u "
                             "for %u servers go past 65535", c->m[i].line,
                             c->m[i].port, num_servers);
        for (size_t j = 0; j < i; j++)
            if (strcmp(c->m[i].host, c->m[j].host) == 0 &&
                c->m[i].port < c->m[j].port + num_servers &&
                c->m[j].port < c->m[i].port + num_servers)
                return net__fail(GKV_EINVAL, "ip_config lines %u and %u: "
                                 "machines on %s with ports %u and %u overlap "
                                 "with %u servers each", c->m[j].line,
                                 c->m[i].line, c->m[i].host, c->m[j].port,
                                 c->m[i].port, num_servers);
    }
    return GKV_OK;
}

int
gkv_net_host_is_local(const char *host, const struct ifaddrs *ifs,
                      int any_loopback)
{
    struct addrinfo hints = {0}, *res = NULL;
    struct ifaddrs *own = NULL;
    int hit = 0;

    net__clear();
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    if (host == NULL || getaddrinfo(host, NULL, &hints, &res) != 0)
        return 0;
    if (ifs == NULL && getifaddrs(&own) == 0)
        ifs = own;
    for (struct addrinfo *a = res; a != NULL && !hit; a = a->ai_next) {
        if (any_loopback && a->ai_family == AF_INET &&
            (ntohl(((struct sockaddr_in *)a->ai_addr)->sin_addr.s_addr) >>
             24) == 127)
            hit = 1;
        for (const struct ifaddrs *i = ifs; i != NULL && !hit;
             i = i->ifa_next) {
            if (i->ifa_addr == NULL || i->ifa_addr->sa_family != a->ai_family)
                continue;
            if (a->ai_family == AF_INET)
                hit = ((struct sockaddr_in *)a->ai_addr)->sin_addr.s_addr ==
                      ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr;
            else if (a->ai_family == AF_INET6)
                hit = memcmp(&((struct sockaddr_in6 *)a->ai_addr)->sin6_addr,
                             &((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr,
                             16) == 0;
        }
    }
    if (own != NULL)
        freeifaddrs(own);
    freeaddrinfo(res);
    return hit;
}

gkv_err
gkv_ipconfig_find_local(const gkv_ipconfig *c, size_t *machine)
{
    struct ifaddrs *ifs = NULL;
    size_t found = 0, first = 0;
    unsigned lines[2] = {0, 0};

    net__clear();
    if (c == NULL)
        return net__fail(GKV_EINVAL, "ip_config: none");
    if (getifaddrs(&ifs) != 0)
        return net__fail(GKV_EIO, "getifaddrs: %s", strerror(errno));
    for (size_t i = 0; i < c->n; i++)
        if (gkv_net_host_is_local(c->m[i].host, ifs, 0)) {
            if (found < 2)
                lines[found] = c->m[i].line;
            if (found++ == 0)
                first = i;
        }
    freeifaddrs(ifs);
    if (found == 0)
        return net__fail(GKV_ENOTFOUND, "ip_config: no machine listed is "
                         "this host (no address matches an interface)");
    if (found > 1)
        return net__fail(GKV_EINVAL, "ip_config: %zu machines are this host "
                         "(lines %u and %u at least)", found,
                         lines[0], lines[1]);
    *machine = first;
    return GKV_OK;
}

gkv_err
net__ipconfig_addr(gkv_ipconfig **out, const char *addr)
{
    gkv_ipconfig *c;
    const char *colon, *host = addr, *hend;
    char *end;
    unsigned long port;

    *out = NULL;
    if (addr == NULL)
        return net__fail(GKV_EINVAL, "no server address");
    if (addr[0] == '[') {                /* [IPv6]:PORT */
        host = addr + 1;
        if ((hend = strchr(host, ']')) == NULL || hend[1] != ':')
            return net__fail(GKV_EINVAL, "server address '%s': expected "
                             "HOST:PORT or [IPv6]:PORT", addr);
        colon = hend + 1;
    } else {
        if ((colon = strrchr(addr, ':')) == NULL || colon == addr ||
            memchr(addr, ':', (size_t)(colon - addr)) != NULL)
            return net__fail(GKV_EINVAL, "server address '%s': expected "
                             "HOST:PORT or [IPv6]:PORT", addr);
        hend = colon;
    }
    errno = 0;
    port = strtoul(colon + 1, &end, 10);
    if (colon[1] < '0' || colon[1] > '9' || *end != '\0' || errno != 0 ||
        port == 0 || port > 65535)
        return net__fail(GKV_EINVAL, "server address '%s': port '%s' is not "
                         "in 1..65535", addr, colon + 1);
    if ((c = gkv__calloc(1, sizeof *c)) == NULL ||
        (c->m = gkv__calloc(1, sizeof *c->m)) == NULL) {
        gkv__free(c);
        return net__fail(GKV_ENOMEM, "out of memory");
    }
    c->n = 1;
    snprintf(c->m[0].host, sizeof c->m[0].host, "%.*s", (int)(hend - host),
             host);
    c->m[0].port = (unsigned)port;
    c->m[0].line = 1;
    if (!host_ok(c->m[0].host)) {
        gkv_err rc = net__fail(GKV_EINVAL, "server address '%s': '%s' is not "
                               "a host name or address", addr, c->m[0].host);
        gkv_ipconfig_free(c);
        return rc;
    }
    *out = c;
    return GKV_OK;
}
