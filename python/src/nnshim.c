/* nnshim.c - nanomsg reached through a table the module can reload, so a
 * child made by fork() gets a nanomsg of its own.
 *
 * nanomsg keeps one process-wide context (its socket table, the worker
 * threads that move its bytes) in the library's globals. fork() copies the
 * globals but not the threads, so in a child no nanomsg socket works, not
 * even a new one, and closing an inherited one waits on a thread that is
 * not there. The cure is a second copy of the library with globals of its
 * own: the extension defines the nn_* functions libgkv.a calls (hidden:
 * the archive's references bind here at link time, and the extension does
 * not link -lnanomsg), each forwarding through 'tab'. Module init opens
 * libnanomsg.so.5 with dlopen(RTLD_LOCAL) and fills tab. In a child after
 * fork() (a pthread_atfork handler marks the table stale) the next call
 * copies the library file into a memfd and opens /proc/self/fd/N: a new
 * inode, so the dynamic loader maps a new instance (a dlclose() then
 * dlopen() of the same path would give the old one back whenever anything
 * else holds it). RTLD_LOCAL keeps each copy out of the global scope, so
 * a copy's calls to its own nn_* bind inside itself. The old copy stays
 * mapped and is never called again in the child; the memfd stays open, so
 * a grandchild's memfd gets another number and another name.
 *
 * Host names. nanomsg resolves a connect address's host name with glibc's
 * getaddrinfo_a(), whose helper threads, like nanomsg's, are not copied
 * by fork(): for about a second after the parent resolved a name, glibc
 * in the child counts an idle helper that is not there and queues the
 * child's request to it for ever (a connect by name timed out; seen in
 * the tests). So in a forked child nn_connect() resolves a host name
 * itself, with the plain getaddrinfo() (no threads), and hands nanomsg
 * the numeric address. */
#define NN_EXPORT extern __attribute__((visibility("hidden")))
#include "gkvpy.h"
#include <nanomsg/nn.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <link.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define NN_SONAME "libnanomsg.so.5"

/* X(name, return type, parameters, arguments, value on failure) */
#define NN_FUNCS(X) \
    X(nn_socket, int, (int d, int p), (d, p), -1) \
    X(nn_close, int, (int s), (s), -1) \
    X(nn_setsockopt, int, (int s, int l, int o, const void *v, size_t n), \
      (s, l, o, v, n), -1) \
    X(nn_getsockopt, int, (int s, int l, int o, void *v, size_t *n), \
      (s, l, o, v, n), -1) \
    X(nn_bind, int, (int s, const char *a), (s, a), -1) \
    X(nn_shutdown, int, (int s, int h), (s, h), -1) \
    X(nn_send, int, (int s, const void *b, size_t n, int f), (s, b, n, f), -1) \
    X(nn_recv, int, (int s, void *b, size_t n, int f), (s, b, n, f), -1) \
    X(nn_sendmsg, int, (int s, const struct nn_msghdr *m, int f), (s, m, f), -1) \
    X(nn_recvmsg, int, (int s, struct nn_msghdr *m, int f), (s, m, f), -1) \
    X(nn_poll, int, (struct nn_pollfd *p, int n, int t), (p, n, t), -1) \
    X(nn_allocmsg, void *, (size_t n, int t), (n, t), NULL) \
    X(nn_freemsg, int, (void *m), (m), -1) \
    X(nn_get_statistic, uint64_t, (int s, int st), (s, st), (uint64_t)-1) \
    X(nn_cmsg_nxthdr_, struct nn_cmsghdr *, \
      (const struct nn_msghdr *m, const struct nn_cmsghdr *c), (m, c), NULL)

#define X_FIELD(name, ret, params, args, fail) ret (*name) params;
struct nn_tab {
    NN_FUNCS(X_FIELD)
    int (*nn_connect)(int, const char *);
    int (*nn_errno)(void);
    const char *(*nn_strerror)(int);
};

static struct nn_tab tab;
static void *handle;                /* the copy tab points into */
static int   libfd = -1;            /* the library file, kept open */
static struct stat libst;           /* its device and inode */
static char  libpath[4096];         /* its path, to open it again */
static int   stale;                 /* set in a child after fork() */
static pid_t loaded_by;             /* the process that filled tab */
static int   reloaded;              /* tab is a forked child's copy */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char  why[512];              /* the last failure to load */

static void
at_fork_child(void)
{
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;

    mu = fresh;                     /* a parent's thread may have held it */
    __atomic_store_n(&stale, 1, __ATOMIC_RELEASE);
}

/* Fills *t from copy h; -1 naming the missing symbol in why. */
static int
tab_fill(void *h, struct nn_tab *t)
{
#define X_SYM(name, ret, params, args, fail) \
    if ((*(void **)&t->name = dlsym(h, #name)) == NULL) \
        goto missing_##name;
    NN_FUNCS(X_SYM)
    if ((*(void **)&t->nn_connect = dlsym(h, "nn_connect")) == NULL ||
        (*(void **)&t->nn_errno = dlsym(h, "nn_errno")) == NULL ||
        (*(void **)&t->nn_strerror = dlsym(h, "nn_strerror")) == NULL) {
        snprintf(why, sizeof why, "%s has no nn_connect, nn_errno or "
                 "nn_strerror", NN_SONAME);
        return -1;
    }
    return 0;
#define X_MISS(name, ret, params, args, fail) \
missing_##name: \
    snprintf(why, sizeof why, "%s has no %s (%s)", NN_SONAME, #name, dlerror()); \
    return -1;
    NN_FUNCS(X_MISS)
}

/* A fresh copy of the library (a memfd holding its bytes) into tab, after
 * fork(); under mu. -1 with why. */
static int
reload(void)
{
    char path[64], buf[65536];
    struct nn_tab t;
    off_t off = 0;
    ssize_t n;
    void *h;
    int fd;

    {
        /* the process may have closed libfd and reused its number */
        struct stat st;

        if (fstat(libfd, &st) != 0 || st.st_dev != libst.st_dev ||
            st.st_ino != libst.st_ino) {
            int nfd = open(libpath, O_RDONLY | O_CLOEXEC);

            if (nfd < 0) {
                snprintf(why, sizeof why, "opening %.400s again: %s", libpath,
                         strerror(errno));
                return -1;
            }
            libfd = nfd;
        }
    }
    fd = memfd_create("gkv-" NN_SONAME, MFD_CLOEXEC);
    if (fd < 0) {
        snprintf(why, sizeof why, "memfd_create: %s", strerror(errno));
        return -1;
    }
    while ((n = pread(libfd, buf, sizeof buf, off)) != 0) {
        if (n < 0) {
            if (errno == EINTR)
                continue;
            snprintf(why, sizeof why, "reading %s: %s", NN_SONAME, strerror(errno));
            goto fail;
        }
        for (ssize_t w = 0, k; w < n; w += k)
            if ((k = write(fd, buf + w, (size_t)(n - w))) < 0) {
                if (errno == EINTR) {
                    k = 0;
                    continue;
                }
                snprintf(why, sizeof why, "copying %s: %s", NN_SONAME,
                         strerror(errno));
                goto fail;
            }
        off += n;
    }
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    if ((h = dlopen(path, RTLD_NOW | RTLD_LOCAL)) == NULL) {
        snprintf(why, sizeof why, "dlopen(%s, a copy of %s): %s", path,
                 NN_SONAME, dlerror());
        goto fail;
    }
    if (tab_fill(h, &t) < 0) {
        dlclose(h);
        goto fail;
    }
    if ((void *)t.nn_socket == (void *)tab.nn_socket) {
        /* the loader handed back the old copy: its threads are gone */
        snprintf(why, sizeof why, "dlopen(%s) returned the parent's copy of %s",
                 path, NN_SONAME);
        goto fail;
    }
    tab = t;
    handle = h;                     /* the old copy stays mapped, unused */
    reloaded = 1;
    loaded_by = getpid();
    return 0;                       /* fd stays open: see the top */
fail:
    close(fd);
    return -1;
}

/* Makes tab usable in this process: 0, or -1 with errno ENOTSUP. */
static int
ready(void)
{
    int rc = 0;

    if (!__atomic_load_n(&stale, __ATOMIC_ACQUIRE))
        return 0;
    pthread_mutex_lock(&mu);
    if (__atomic_load_n(&stale, __ATOMIC_ACQUIRE)) {
        if (reload() == 0)
            __atomic_store_n(&stale, 0, __ATOMIC_RELEASE);
        else
            rc = -1;
    }
    pthread_mutex_unlock(&mu);
    if (rc < 0)
        errno = ENOTSUP;
    return rc;
}

int
gkvpy_nn_load(void)
{
    struct link_map *lm = NULL;

    if (handle != NULL)
        return 0;
    if ((handle = dlopen(NN_SONAME, RTLD_NOW | RTLD_LOCAL)) == NULL) {
        PyErr_Format(PyExc_ImportError, "gkv: cannot load nanomsg (%s): %s "
                     "(install libnanomsg5: make deps)", NN_SONAME, dlerror());
        return -1;
    }
    if (tab_fill(handle, &tab) < 0) {
        PyErr_Format(PyExc_ImportError, "gkv: %s", why);
        goto fail;
    }
    if (dlinfo(handle, RTLD_DI_LINKMAP, &lm) != 0 || lm == NULL ||
        (libfd = open(lm->l_name, O_RDONLY | O_CLOEXEC)) < 0 ||
        fstat(libfd, &libst) != 0) {
        PyErr_Format(PyExc_ImportError, "gkv: cannot open the file of %s "
                     "(%s), needed to give forked children a copy of their own",
                     NN_SONAME, lm != NULL ? lm->l_name : dlerror());
        goto fail;
    }
    snprintf(libpath, sizeof libpath, "%s", lm->l_name);
    if ((errno = pthread_atfork(NULL, NULL, at_fork_child)) != 0) {
        PyErr_SetFromErrno(PyExc_ImportError);
        goto fail;
    }
    loaded_by = getpid();
    return 0;
fail:
    if (libfd >= 0)
        close(libfd);
    libfd = -1;
    dlclose(handle);
    handle = NULL;
    return -1;
}

int
gkvpy_nn_ready(void)
{
    if (ready() < 0) {
        gkvpy_raisef(GKV_ENOTSUP, "nanomsg cannot be used in this forked "
                     "child: loading a copy of its own failed (%s)", why);
        return -1;
    }
    return 0;
}

PyObject *
gkvpy_nn_loaded_by(PyObject *self, PyObject *unused)
{
    return PyLong_FromLong(handle != NULL && !stale ? (long)loaded_by : 0);
}

/* ---- the functions libgkv.a calls ---- */

#define X_DEF(name, ret, params, args, fail) \
    ret name params \
    { \
        if (ready() < 0) \
            return fail; \
        return tab.name args; \
    }
NN_FUNCS(X_DEF)

/* "tcp://[iface;]host:port" with host a name: the same address with the
 * host's first address (IPv4 unless the socket takes IPv6), resolved by
 * getaddrinfo(), into out; else 0 (leave addr as it is). */
static int
numeric_addr(int s, const char *addr, char *out, size_t cap)
{
    char host[256], ip[INET6_ADDRSTRLEN];
    unsigned char bin[sizeof(struct in6_addr)];
    struct addrinfo hints, *res = NULL;
    const char *h, *semi, *colon;
    int v4only = 1, n;
    size_t sz = sizeof v4only, hl;

    if (strncmp(addr, "tcp://", 6) != 0)
        return 0;
    h = addr + 6;
    if ((semi = strchr(h, ';')) != NULL)
        h = semi + 1;
    if ((colon = strrchr(h, ':')) == NULL || *h == '[' ||
        (hl = (size_t)(colon - h)) == 0 || hl >= sizeof host)
        return 0;
    memcpy(host, h, hl);
    host[hl] = '\0';
    if (inet_pton(AF_INET, host, bin) == 1 || inet_pton(AF_INET6, host, bin) == 1)
        return 0;                   /* numeric already */
    (void)tab.nn_getsockopt(s, NN_SOL_SOCKET, NN_IPV4ONLY, &v4only, &sz);
    memset(&hints, 0, sizeof hints);
    hints.ai_family = v4only ? AF_INET : AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host, NULL, &hints, &res) != 0 || res == NULL)
        return 0;                   /* nanomsg will say it cannot connect */
    if (res->ai_family == AF_INET)
        inet_ntop(AF_INET, &((struct sockaddr_in *)res->ai_addr)->sin_addr,
                  ip, sizeof ip);
    else
        inet_ntop(AF_INET6, &((struct sockaddr_in6 *)res->ai_addr)->sin6_addr,
                  ip, sizeof ip);
    n = snprintf(out, cap, res->ai_family == AF_INET ? "%.*s%s%s" : "%.*s[%s]%s",
                 (int)(h - addr), addr, ip, colon);
    freeaddrinfo(res);
    return n > 0 && (size_t)n < cap;
}

int
nn_connect(int s, const char *addr)
{
    char num[NN_SOCKADDR_MAX + 64];

    if (ready() < 0)
        return -1;
    if (reloaded && numeric_addr(s, addr, num, sizeof num))
        addr = num;
    return tab.nn_connect(s, addr);
}

int
nn_errno(void)
{
    if (__atomic_load_n(&stale, __ATOMIC_ACQUIRE))
        return errno;               /* a ready() failure: ENOTSUP */
    return tab.nn_errno();
}

const char *
nn_strerror(int e)
{
    if (ready() < 0)
        return strerror(e);
    return tab.nn_strerror(e);
}
