/* gkvt.c - helpers shared by gkv's cmocka tests. */
#include <arpa/inet.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "gkvt.h"
#include "kv/kv_test.h"

char *
gkvt_mkdtemp(const char *tag)
{
    const char *base = getenv("TMPDIR");
    char *p;

    if (base == NULL || *base == '\0')
        base = "/tmp";
    if (asprintf(&p, "%s/gkvt-%s-XXXXXX", base, tag) < 0)
        return NULL;
    if (mkdtemp(p) == NULL) {
        free(p);
        return NULL;
    }
    return p;
}

static int
rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb; (void)flag; (void)ftw;
    return remove(path);
}

void
gkvt_rmtree(char *dir)
{
    if (dir == NULL)
        return;
    nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    free(dir);
}

uint64_t
gkvt_seed(void)
{
    static int done;
    static uint64_t seed;
    const char *e;

    if (done)
        return seed;
    e = getenv("GKVT_SEED");
    if (e != NULL && *e != '\0')
        seed = strtoull(e, NULL, 0);
    else
        seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    fprintf(stderr, "gkvt: GKVT_SEED=%llu\n", (unsigned long long)seed);
    done = 1;
    return seed;
}

/* tmpfs mounts of the running test program, unmounted at exit when a
 * failed test left them (lazily: the failed test may have left a store
 * open on it, which a plain umount refuses as busy) */
static char *tmpfs_dirs[16];

static void
tmpfs_atexit(void)
{
    for (size_t i = 0; i < sizeof tmpfs_dirs / sizeof *tmpfs_dirs; i++)
        if (tmpfs_dirs[i] != NULL) {
            umount2(tmpfs_dirs[i], MNT_DETACH);
            gkvt_rmtree(tmpfs_dirs[i]);
            tmpfs_dirs[i] = NULL;
        }
}

void
gkvt_tmpfs_or_skip(char *dir, const char *opts)
{
    static int registered;
    size_t i;

    if (mount("gkvt", dir, "tmpfs", 0, opts) != 0) {
        gkvt_rmtree(dir);
        skip();
    }
    if (!registered) {
        atexit(tmpfs_atexit);
        registered = 1;
    }
    for (i = 0; i < sizeof tmpfs_dirs / sizeof *tmpfs_dirs; i++)
        if (tmpfs_dirs[i] == NULL) {
            tmpfs_dirs[i] = dir;
            break;
        }
}

void
gkvt_tmpfs_done(char *dir)
{
    for (size_t i = 0; i < sizeof tmpfs_dirs / sizeof *tmpfs_dirs; i++)
        if (tmpfs_dirs[i] == dir)
            tmpfs_dirs[i] = NULL;
    umount(dir);
    gkvt_rmtree(dir);
}

const char *
gkvt_self(void)
{
    static char self[4096];

    if (self[0] == '\0') {
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);

        assert_true(n > 0);
        self[n] = '\0';
    }
    return self;
}

const char *
gkvt_prog(const char *name)
{
    static __thread char buf[4096];
    const char *b = getenv("GKVT_BUILD");
    char self[3800], *sl;
    ssize_t n;

    if (b != NULL && *b != '\0') {
        snprintf(buf, sizeof buf, "%s/%s", b, name);
        return buf;
    }
    /* BUILD/test/NAME_test -> BUILD/name */
    n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        snprintf(buf, sizeof buf, "build/%s", name);
        return buf;
    }
    self[n] = '\0';
    for (int k = 0; k < 2 && (sl = strrchr(self, '/')) != NULL; k++)
        *sl = '\0';
    snprintf(buf, sizeof buf, "%s/%s", self, name);
    return buf;
}

struct sink { char *buf; size_t len, cap; int fd; };

static void
sink_read(struct sink *k)
{
    char tmp[65536];
    ssize_t r = read(k->fd, tmp, sizeof tmp);

    if (r <= 0) {
        close(k->fd);
        k->fd = -1;
        return;
    }
    if (k->len + (size_t)r > (1u << 20))
        r = (ssize_t)((1u << 20) - k->len);
    if (r > 0 && k->len + (size_t)r + 1 > k->cap) {
        k->cap = (k->len + (size_t)r + 1) * 2;
        k->buf = realloc(k->buf, k->cap);
    }
    if (r > 0) {
        memcpy(k->buf + k->len, tmp, (size_t)r);
        k->len += (size_t)r;
    }
}

int
gkvt_run(char *const argv[], const char *in, size_t in_len,
         char **out, char **err, int timeout_s)
{
    int po[2], pe[2], pi[2], status = 0;
    struct sink so = {0}, se = {0};
    size_t in_off = 0;
    pid_t pid;
    time_t deadline = time(NULL) + timeout_s;

    if (pipe(po) || pipe(pe) || pipe(pi))
        return -1;
    pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        dup2(pi[0], 0); dup2(po[1], 1); dup2(pe[1], 2);
        close(pi[0]); close(pi[1]); close(po[0]); close(po[1]);
        close(pe[0]); close(pe[1]);
        execv(argv[0], argv);
        fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(pi[0]); close(po[1]); close(pe[1]);
    so.fd = po[0]; se.fd = pe[0];
    if (in == NULL || in_len == 0) {
        close(pi[1]);
        pi[1] = -1;
    } else {
        fcntl(pi[1], F_SETFL, O_NONBLOCK);
    }
    signal(SIGPIPE, SIG_IGN);
    while (so.fd >= 0 || se.fd >= 0 || pi[1] >= 0) {
        struct pollfd pf[3];
        int np = 0, left = (int)(deadline - time(NULL));

        if (left <= 0) {
            kill(pid, SIGKILL);
            break;
        }
        if (so.fd >= 0) pf[np++] = (struct pollfd){so.fd, POLLIN, 0};
        if (se.fd >= 0) pf[np++] = (struct pollfd){se.fd, POLLIN, 0};
        if (pi[1] >= 0) pf[np++] = (struct pollfd){pi[1], POLLOUT, 0};
        if (poll(pf, (nfds_t)np, 1000) < 0 && errno != EINTR)
            break;
        for (int i = 0; i < np; i++) {
            if (!pf[i].revents)
                continue;
            if (pf[i].fd == so.fd) sink_read(&so);
            else if (pf[i].fd == se.fd) sink_read(&se);
            else {
                ssize_t w = write(pi[1], in + in_off, in_len - in_off);
                if (w > 0) in_off += (size_t)w;
                if (w < 0 || in_off == in_len) {
                    close(pi[1]);
                    pi[1] = -1;
                }
            }
        }
    }
    if (so.fd >= 0) close(so.fd);
    if (se.fd >= 0) close(se.fd);
    if (pi[1] >= 0) close(pi[1]);
    waitpid(pid, &status, 0);
    if (so.buf == NULL) so.buf = calloc(1, 1); else so.buf[so.len] = '\0';
    if (se.buf == NULL) se.buf = calloc(1, 1); else se.buf[se.len] = '\0';
    if (out) *out = so.buf; else free(so.buf);
    if (err) *err = se.buf; else free(se.buf);
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    return 128 + WTERMSIG(status);
}

void
gkvt_alloc_fail_at(long n)
{
    gkv__alloc_fail_at(n);
}

long
gkvt_alloc_live(void)
{
    return gkv__alloc_live();
}

/* ---- processes and servers -------------------------------------------------- */

char *
gkvt_slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    size_t len = 0, cap = 4096, r;
    char *b = calloc(1, cap);

    assert_non_null(b);
    if (f == NULL)
        return b;
    while ((r = fread(b + len, 1, cap - len - 1, f)) > 0) {
        len += r;
        if (cap - len < 2) {
            char *nb = realloc(b, cap * 2);
            assert_non_null(nb);
            b = nb;
            cap *= 2;
        }
    }
    b[len] = '\0';
    fclose(f);
    return b;
}

int
gkvt_file_count(const char *path, const char *needle)
{
    char *text = gkvt_slurp(path);
    int n = 0;

    for (const char *q = text; (q = strstr(q, needle)) != NULL; q++)
        n++;
    free(text);
    return n;
}

int
gkvt_file_has(const char *path, const char *needle)
{
    char *t = gkvt_slurp(path);
    int hit = strstr(t, needle) != NULL;

    free(t);
    return hit;
}

void
gkvt_write_text(const char *path, const char *text, unsigned mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, (mode_t)mode);

    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    chmod(path, (mode_t)mode);
}

int
gkvt_port_bindable(int port, int reuse)
{
    struct sockaddr_in a;
    int s = socket(AF_INET, SOCK_STREAM, 0), one = 1, ok;

    if (s < 0)
        return 0;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (reuse)
        setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    ok = bind(s, (struct sockaddr *)&a, sizeof a) == 0;
    close(s);
    return ok;
}

int
gkvt_port_free(int port)
{
    return gkvt_port_bindable(port, 0);
}

int
gkvt_port_candidate(unsigned k, int n, int align)
{
    static int lo, span;

    if (span == 0) {
        char *r = gkvt_slurp("/proc/sys/net/ipv4/ip_local_port_range");
        int first = 0;

        if (r != NULL && sscanf(r, "%d", &first) == 1 && first >= 14096) {
            lo = 10000;
            span = first - 10000;
        } else {
            lo = 20000;
            span = 30000;
        }
        free(r);
    }
    return lo + (int)(((unsigned)getpid() * 2654435761u + k * 7919u) %
                      (unsigned)(span - n)) / align * align;
}

int
gkvt_port_find(int n, int align, unsigned salt, int env_off,
               int (*usable)(int port))
{
    static unsigned seq;
    const char *e = getenv("GKVT_PORT_BASE");

    for (int attempt = 0; attempt < 500; attempt++) {
        unsigned k = seq++;
        int base, ok = 1;

        if (e != NULL && *e != '\0')
            base = atoi(e) + env_off + (int)k * align;
        else
            base = gkvt_port_candidate(salt + k, n, align);
        if (base < 1024 || base + n > 65535)
            continue;
        for (int i = 0; i < n && ok; i++)
            ok = usable(base + i);
        if (ok)
            return base;
    }
    fail_msg("no free range of %d ports found", n);
    return -1;
}

int
gkvt_port_base(int n)
{
    return gkvt_port_find(n, 32, 0, 0, gkvt_port_free);
}

struct gkvt_proc *
gkvt_spawn(struct gkvt_proc *procs, int *np, int max, const char *dir,
           char *const argv[], const char *logname)
{
    struct gkvt_proc *p;

    assert_true(*np < max);
    p = &procs[(*np)++];
    memset(p, 0, sizeof *p);
    /* a log of its own: a restarted server must not find the old lines */
    snprintf(p->log, sizeof p->log, "%s/%d-%s", dir, *np, logname);
    gkvt_proc_start(p, argv);
    return p;
}

int
gkvt_server_listening(struct gkvt_proc *p)
{
    double end = tools__now_s() + 20;

    while (!gkvt_file_has(p->log, "listening on")) {
        if (!gkvt_proc_alive(p)) {
            if (gkvt_file_has(p->log, "Address already in use"))
                return 0;
            fail_msg("gkv-server exited with %d before listening:\n%s",
                     gkvt_proc_code(p), gkvt_slurp(p->log));
        }
        if (tools__now_s() > end)
            fail_msg("gkv-server did not listen within 20 s");
        tools__sleep_ms(5);
    }
    return 1;
}

void
gkvt_proc_start(struct gkvt_proc *p, char *const argv[])
{
    pid_t pid = fork();

    assert_true(pid >= 0);
    if (pid == 0) {
        int dn = open("/dev/null", O_RDWR);
        int fe = open(p->log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        dup2(dn, 0);
        dup2(dn, 1);
        dup2(fe, 2);
        execv(argv[0], argv);
        _exit(127);
    }
    p->pid = pid;
    p->reaped = 0;
}

int
gkvt_proc_alive(struct gkvt_proc *p)
{
    int st;

    if (p->pid <= 0 || p->reaped)
        return 0;
    if (waitpid(p->pid, &st, WNOHANG) == p->pid) {
        p->reaped = 1;
        p->status = st;
        return 0;
    }
    return 1;
}

int
gkvt_proc_wait(struct gkvt_proc *p, int ms)
{
    double end = tools__now_s() + ms / 1000.0;

    while (gkvt_proc_alive(p)) {
        if (tools__now_s() > end)
            return 0;
        tools__sleep_ms(5);
    }
    return 1;
}

void
gkvt_proc_kill(struct gkvt_proc *p)
{
    if (p->pid > 0 && !p->reaped) {
        kill(p->pid, SIGKILL);
        waitpid(p->pid, &p->status, 0);
        p->reaped = 1;
    }
}

int
gkvt_proc_code(const struct gkvt_proc *p)
{
    if (WIFEXITED(p->status))
        return WEXITSTATUS(p->status);
    return -WTERMSIG(p->status);
}

int
gkvt_proc_reap_all(struct gkvt_proc *procs, int n)
{
    int bad = 0;

    for (int i = 0; i < n; i++) {
        char *t;

        gkvt_proc_kill(&procs[i]);
        t = gkvt_slurp(procs[i].log);
        if (strstr(t, "Sanitizer") != NULL || strstr(t, "runtime error") != NULL) {
            fprintf(stderr, "sanitizer report in %s:\n%s\n", procs[i].log, t);
            bad = 1;
        }
        free(t);
    }
    return bad;
}

int
gkvt_run_tty(char *const argv[], char *buf, size_t cap)
{
    size_t got = 0;
    int m, st;
    pid_t pid;

    assert_true(cap > 0);
    m = posix_openpt(O_RDWR | O_NOCTTY);
    assert_true(m >= 0);
    assert_int_equal(grantpt(m), 0);
    assert_int_equal(unlockpt(m), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int s = open(ptsname(m), O_RDWR | O_NOCTTY), dn = open("/dev/null", O_RDWR);
        dup2(dn, 0);
        dup2(dn, 1);
        dup2(s, 2);
        close(m);
        execv(argv[0], argv);
        _exit(127);
    }
    /* read while it runs (a full terminal would stop it), and after it
     * ended until the terminal is drained: EIO once no one has the other
     * end open, or 2 s without output */
    for (int done = 0, quiet = 0;;) {
        char spill[4096];
        ssize_t r;
        fd_set rs;
        struct timeval tv = {0, 100000};

        if (!done && waitpid(pid, &st, WNOHANG) == pid)
            done = 1;
        FD_ZERO(&rs);
        FD_SET(m, &rs);
        if (select(m + 1, &rs, NULL, NULL, &tv) <= 0) {
            if (done && ++quiet >= 20)
                break;
            continue;
        }
        quiet = 0;
        if (got + 1 < cap)
            r = read(m, buf + got, cap - 1 - got);
        else
            r = read(m, spill, sizeof spill);       /* past 'cap': dropped */
        if (r <= 0) {
            if (done)
                break;
            tools__sleep_ms(10);
            continue;
        }
        if (got + 1 < cap)
            got += (size_t)r;
    }
    buf[got] = '\0';
    close(m);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

void
gkvt_gpu_missing(const char *why)
{
    const char *v = getenv("GKV_REQUIRE_GPU");

    if (v != NULL && strcmp(v, "1") == 0)
        fail_msg("GKV_REQUIRE_GPU=1 but no CUDA device: %s", why);
}

void
gkvt_gpu_skip(const char *why)
{
    gkvt_gpu_missing(why);
    print_message("GPU tests skipped: %s\n", why);
    skip();
}

/* 1 when every thread of pid is in state T (stopped). */
static int
all_stopped(int pid)
{
    char path[64];
    struct dirent *e;
    DIR *d;
    int all = 1, any = 0;

    snprintf(path, sizeof path, "/proc/%d/task", pid);
    if ((d = opendir(path)) == NULL)
        return 0;
    while (all && (e = readdir(d)) != NULL) {
        char st[320], *t, *p;
        if (e->d_name[0] == '.')
            continue;
        snprintf(st, sizeof st, "/proc/%d/task/%s/stat", pid, e->d_name);
        if ((t = gkvt_slurp(st))[0] == '\0') {
            free(t);
            continue;                   /* the thread ended */
        }
        /* "tid (comm) S ...": the state follows the last ')' */
        p = strrchr(t, ')');
        all = p != NULL && p[1] == ' ' && p[2] == 'T';
        any = 1;
        free(t);
    }
    closedir(d);
    return all && any;
}

void
gkvt_kill_child(int pid)
{
    kill(pid, SIGKILL);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
}

void
gkvt_die_with_parent(void)
{
    pid_t parent = getppid();

    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)            /* it died before the call */
        _exit(1);
}

void
gkvt_stop_proc(int pid)
{
    kill(pid, SIGSTOP);
    for (int i = 0; i < 3000 && !all_stopped(pid); i++)
        tools__sleep_ms(10);
    assert_true(all_stopped(pid));
}

gkv_tensor_spec
gkvt_spec(gkv_dtype dt, uint64_t width, uint64_t lo, uint64_t hi)
{
    gkv_tensor_spec sp;

    memset(&sp, 0, sizeof sp);
    sp.dtype = dt;
    sp.ndim = 1;
    sp.shape[0] = width;
    sp.lo = lo;
    sp.hi = hi;
    return sp;
}

gkv_tensor_spec
gkvt_spec_init(gkv_dtype dt, uint64_t width, uint64_t lo, uint64_t hi,
               gkv_init init)
{
    gkv_tensor_spec sp = gkvt_spec(dt, width, lo, hi);

    sp.init = init;
    sp.a = -1;
    sp.b = 1;
    sp.seed = 7;
    return sp;
}

int
gkvt_dir_setup(void **state, size_t size, const char *tag)
{
    char **f = calloc(1, size);

    if (f == NULL || (*f = gkvt_mkdtemp(tag)) == NULL) {
        free(f);
        return -1;
    }
    *state = f;
    return 0;
}

int
gkvt_dir_teardown(void **state)
{
    char **f = *state;

    gkvt_rmtree(*f);
    free(f);
    return 0;
}

int
gkvt_file_setup(void **state, size_t size, const char *tag, const char *name)
{
    struct gkvt_file_fx *f;

    if (gkvt_dir_setup(state, size, tag) != 0)
        return -1;
    f = *state;
    snprintf(f->path, sizeof f->path, "%s/%s", f->dir, name);
    return 0;
}

int
gkvt_store_setup(void **state, size_t size, const char *tag)
{
    struct gkvt_store_fx *f;

    if (gkvt_dir_setup(state, size, tag) != 0)
        return -1;
    f = *state;
    if (gkv_store_open(&f->s, f->dir, GKV_CREATE, NULL) != GKV_OK) {
        gkvt_dir_teardown(state);
        return -1;
    }
    return 0;
}

int
gkvt_store_teardown(void **state)
{
    struct gkvt_store_fx *f = *state;

    gkv_store_close(f->s);
    return gkvt_dir_teardown(state);
}

void
gkvt_expect_msg(const char *msg, const char *want)
{
    if (strstr(msg, want) == NULL)
        fail_msg("message \"%s\" does not name \"%s\"", msg, want);
}

unsigned char *
gkvt_tensor_dump(gkv_store *s, gkv_txn *tx, const char *name, size_t *len)
{
    gkv_tensor_desc d;
    unsigned char *b;
    gkv_err rc;

    *len = 0;
    rc = gkv_tensor_info(s, tx, name, &d);
    if (rc == GKV_ENOTFOUND)
        return NULL;
    GKVT_OK(rc);
    *len = (size_t)(d.hi - d.lo) * d.row_bytes;
    b = malloc(*len ? *len : 1);
    assert_non_null(b);
    GKVT_OK(gkv_tensor_read(s, tx, name, d.lo, d.hi, b, *len));
    return b;
}

unsigned char *
gkvt_tensor_all(gkv_store *s, gkv_txn *tx, const char *name, size_t *len)
{
    unsigned char *b = gkvt_tensor_dump(s, tx, name, len);

    if (b == NULL)
        fail_msg("no tensor '%s'", name);
    return b;
}

unsigned char *
gkvt_read_file(const char *path, size_t *len)
{
    struct stat sb;
    unsigned char *b;
    int fd = open(path, O_RDONLY);

    if (fd < 0)
        fail_msg("cannot open %s: %s", path, strerror(errno));
    assert_int_equal(fstat(fd, &sb), 0);
    b = malloc((size_t)sb.st_size + 1);
    assert_non_null(b);
    *len = 0;
    while (*len < (size_t)sb.st_size) {
        ssize_t r = read(fd, b + *len, (size_t)sb.st_size - *len);
        assert_true(r > 0);
        *len += (size_t)r;
    }
    b[*len] = '\0';
    close(fd);
    return b;
}

char *
gkvt_listing(const char *dir)
{
    struct dirent **ents;
    int n = scandir(dir, &ents, NULL, alphasort);
    size_t len = 0;
    char *s = calloc(1, 1);

    assert_non_null(s);
    for (int i = 0; i < n; i++) {
        size_t k = strlen(ents[i]->d_name);

        s = realloc(s, len + k + 2);
        assert_non_null(s);
        memcpy(s + len, ents[i]->d_name, k);
        len += k;
        s[len++] = '\n';
        s[len] = '\0';
        free(ents[i]);
    }
    if (n >= 0)
        free(ents);
    return s;
}

void
gkvt_write_file(const char *path, const void *b, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const unsigned char *c = b;

    if (fd < 0)
        fail_msg("cannot create %s: %s", path, strerror(errno));
    while (len > 0) {
        ssize_t w = write(fd, c, len);
        assert_true(w > 0);
        c += w;
        len -= (size_t)w;
    }
    assert_int_equal(close(fd), 0);
}

char *
gkvt_path(const char *dir, const char *name)
{
    static __thread char buf[8][4096];
    static __thread int k;
    char *p = buf[k++ % 8];

    snprintf(p, 4096, "%s/%s", dir, name);
    return p;
}

int
gkvt_toolv(const char *name, char **out, char **err, va_list ap)
{
    char *argv[64];
    int n = 0;

    argv[n++] = (char *)gkvt_prog(name);
    while (n < 63 && (argv[n] = va_arg(ap, char *)) != NULL)
        n++;
    argv[n] = NULL;
    free(*out);
    free(*err);
    *out = *err = NULL;
    return gkvt_run(argv, NULL, 0, out, err, 60);
}

int
gkvt_tool(const char *name, char **out, char **err, ...)
{
    va_list ap;
    int rc;

    va_start(ap, err);
    rc = gkvt_toolv(name, out, err, ap);
    va_end(ap);
    return rc;
}

void
gkvt_expect_has(const char *text, const char *needle)
{
    if (strstr(text, needle) == NULL)
        fail_msg("expected '%s' in:\n%s", needle, text);
}

void
gkvt_expect_i64(const int64_t *got, const int64_t *want, size_t n,
                const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i])
            fail_msg("%s[%zu] = %lld, want %lld", what, i, (long long)got[i],
                     (long long)want[i]);
}

void
gkvt_expect_etype_info(const gkv_etype_info *got, const gkv_etype_info *want)
{
    assert_string_equal(got->canonical, want->canonical);
    assert_string_equal(got->relation, want->relation);
    assert_string_equal(got->src_type, want->src_type);
    assert_string_equal(got->dst_type, want->dst_type);
    assert_int_equal(got->src_ntype, want->src_ntype);
    assert_int_equal(got->dst_ntype, want->dst_ntype);
    assert_int_equal(got->num_edges, want->num_edges);
    assert_int_equal(got->weighted, want->weighted);
}

uint64_t
gkvt_fnv64(uint64_t h, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        h ^= (v >> (8 * i)) & 0xff;
        h *= 0x100000001b3ULL;
    }
    return h;
}

void
gkvt_store_create(const char *st, const char *name, const gkv_tensor_spec *sp)
{
    gkv_store *s;

    GKVT_OK(gkv_store_open(&s, st, GKV_CREATE, NULL));
    GKVT_OK(gkv_tensor_create(s, name, sp));
    gkv_store_close(s);
}

void
gkvt_make_f32(const char *st, const char *name, uint64_t width, uint64_t lo,
              uint64_t hi)
{
    gkv_tensor_spec sp = gkvt_spec_init(GKV_F32, width, lo, hi,
                                        GKV_INIT_UNIFORM);

    gkvt_store_create(st, name, &sp);
}

int
gkvt_exists(const char *path)
{
    struct stat sb;

    return stat(path, &sb) == 0;
}

void
gkvt_expect_same_files(const char *a, const char *b)
{
    size_t la, lb;
    unsigned char *x = gkvt_read_file(a, &la);
    unsigned char *y = gkvt_read_file(b, &lb);

    if (la != lb)
        fail_msg("%s has %zu bytes, %s %zu", a, la, b, lb);
    assert_memory_equal(x, y, la);
    free(x);
    free(y);
}

void
gkvt_elem_set(gkv_dtype dt, unsigned char *p, size_t j, double v)
{
    float f = (float)v;
    uint16_t h;

    switch (dt) {
    case GKV_F32:  memcpy(p + 4 * j, &f, 4); break;
    case GKV_F64:  memcpy(p + 8 * j, &v, 8); break;
    case GKV_F16:  h = gkv_f32_to_f16(f); memcpy(p + 2 * j, &h, 2); break;
    case GKV_BF16: h = gkv_f32_to_bf16(f); memcpy(p + 2 * j, &h, 2); break;
    default:       fail_msg("gkvt_elem_set: %s is not a float dtype",
                            gkv_dtype_name(dt));
    }
}

long
gkvt_status_kib(int pid, const char *field)
{
    char path[64], *t, *l;
    long v = -1;

    snprintf(path, sizeof path, "/proc/%d/status", pid);
    t = gkvt_slurp(path);
    if ((l = strstr(t, field)) != NULL)
        v = strtol(l + strlen(field), NULL, 10);
    free(t);
    assert_true(v > 0);
    return v;
}

long
gkvt_peak_kib(int pid)
{
    return gkvt_status_kib(pid, "VmHWM:");
}

/* Rows 0..n-1 of tensor 'name' (rb bytes each), read in-process after
 * checking every chunk of the store. */
void *
gkvt_read_all(const char *st, const char *name, size_t n, size_t rb)
{
    gkv_store *s;
    gkv_verify_report vr;
    uint64_t *ids = malloc(n * 8);
    void *b = malloc(n * rb);

    for (size_t i = 0; i < n; i++)
        ids[i] = i;
    GKVT_OK(gkv_store_open(&s, st, GKV_RDONLY, NULL));
    GKVT_OK(gkv_store_verify(s, NULL, &vr));
    assert_int_equal(vr.bad_chunks, 0);
    GKVT_OK(gkv_tensor_pull(s, NULL, name, ids, n, b, n * rb));
    gkv_store_close(s);
    free(ids);
    return b;
}
