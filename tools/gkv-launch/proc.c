/* proc.c - the processes of a job: start, signal, reap, stop, and the
 * end of a failed one's log. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include "launch.h"
#include "util.h"

/* Forks argv (PATH lookup) in a process group of its own with envp, its
 * stdout and stderr appended to 'log' (NULL: /dev/null), stdin /dev/null.
 * Returns the pid, or -1 (errno). */
static pid_t
spawn(char **argv, char **envp, const char *log)
{
    int fd = open(log ? log : "/dev/null",
                  O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    pid_t pid;

    if (fd < 0)
        return -1;
    pid = fork();
    if (pid == 0) {
        int dn = open("/dev/null", O_RDONLY);
        sigset_t none;

        setpgid(0, 0);
        signal(SIGPIPE, SIG_DFL);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGHUP, SIG_DFL);
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        dup2(dn, 0);
        dup2(fd, 1);
        dup2(fd, 2);
        execvpe(argv[0], argv, envp);
        fprintf(stderr, PROG ": cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    if (pid > 0)
        setpgid(pid, pid);       /* either side may win the race */
    close(fd);
    return pid;
}

void
launch__proc_name(const struct job *j, struct proc *p)
{
    if (p->role == R_SERVER)
        snprintf(p->name, sizeof p->name, "server %u/%u", p->machine, p->idx);
    else
        snprintf(p->name, sizeof p->name, "trainer rank %u", p->rank);
    snprintf(p->log, sizeof p->log, "%s/logs/%s-%u-%u.log", j->ws,
             launch__role_names[p->role], p->machine, p->idx);
}

int
launch__proc_start(struct job *j, struct proc *p)
{
    char **genv = launch__proc_env(j, p), **argv, **envp, num[4][16],
         st[PATH_MAX];
    char *remote = NULL, pbuf[16], dest[512];
    char **sargv = NULL;
    const gkv_machine *mc = gkv_ipconfig_machine(j->ipc, p->machine);

    argv = p->role == R_SERVER ? launch__server_argv(j, p, num, st, sizeof st)
                               : NULL;
    if (p->remote) {
        extern char **environ;
        remote = launch__remote_string(j, genv, argv ? argv : j->cmd);
        struct stat sb;
        sargv =
            launch__ssh_argv(j, p->machine, remote, pbuf, dest, sizeof dest);
        /* logs are appended to, run after run in one workspace */
        p->log_off = stat(p->log, &sb) == 0 ? sb.st_size : 0;
        p->pid = spawn(sargv, environ, p->log);
    } else {
        envp = launch__merged_env(genv);
        p->pid = spawn(argv ? argv : j->cmd, envp, p->log);
        free(envp);
    }
    if (p->pid < 0) {
        tools__note("cannot start %s: %s", p->name, strerror(errno));
    } else {
        p->started = 1;
        if (p->role == R_SERVER)
            tools__say("started %s on %s:%u (%s pid %ld), log %s", p->name,
                       mc->host, mc->port + p->idx,
                       p->remote ? "ssh" : "local", (long)p->pid, p->log);
        else
            tools__say("started %s on machine %u (%s pid %ld), log %s", p->name,
                p->machine, p->remote ? "ssh" : "local", (long)p->pid, p->log);
    }
    free(argv);
    free(sargv);
    free(remote);
    launch__strv_free(genv);
    return p->pid < 0 ? -1 : 0;
}

/* Reads the remote session id from the "@gkv-pgid N" line this run's ssh
 * wrote to p's log (after p->log_off: the line of an earlier run in the
 * same workspace would send the kills to whatever has that number now). */
void
launch__proc_find_rpgid(struct proc *p)
{
    FILE *f;
    char line[256];

    if (!p->remote || p->rpgid > 0 || (f = fopen(p->log, "r")) == NULL)
        return;
    if (fseeko(f, p->log_off, SEEK_SET) != 0) {
        fclose(f);
        return;
    }
    for (int i = 0; i < 50 && fgets(line, sizeof line, f) != NULL; i++) {
        long v;
        if (sscanf(line, "@gkv-pgid %ld", &v) == 1 && v > 1) {
            p->rpgid = v;
            break;
        }
    }
    fclose(f);
}

int
launch__proc_live(const struct proc *p)
{
    return p->started && !p->reaped;
}

/* Sends sig to p's process group, and for a remote one to the remote
 * session through a fresh ssh (kept in 'killers' to be reaped). */
static void
proc_signal(struct job *j, struct proc *p, int sig, pid_t *killer)
{
    if (!launch__proc_live(p))
        return;
    if (p->remote) {
        launch__proc_find_rpgid(p);
        if (p->rpgid > 0) {
            char cmd[96], pbuf[16], dest[512], **a;
            extern char **environ;

            snprintf(cmd, sizeof cmd, "kill -%s -%ld",
                     sig == SIGKILL ? "KILL" : "TERM", p->rpgid);
            a = launch__ssh_argv(j, p->machine, cmd, pbuf, dest, sizeof dest);
            *killer = spawn(a, environ, NULL);
            free(a);
        }
        /* the ssh client itself only on SIGKILL: its exit is how we learn
         * that the remote process ended */
        if (sig == SIGKILL || p->rpgid <= 0)
            kill(-p->pid, sig);
    } else {
        kill(-p->pid, sig);
    }
}

void
launch__describe_status(int st, char *b, size_t cap)
{
    if (WIFEXITED(st))
        snprintf(b, cap, "exit status %d", WEXITSTATUS(st));
    else if (WIFSIGNALED(st))
        snprintf(b, cap, "killed by signal %d (%s)", WTERMSIG(st),
                 strsignal(WTERMSIG(st)));
    else
        snprintf(b, cap, "status 0x%x", st);
}

void
launch__print_tail(const char *path)
{
    FILE *f = fopen(path, "r");
    char *buf = NULL;
    size_t cap = 0, len = 0, start;
    int lines = 0;

    fprintf(stderr, "---- last %d lines of %s ----\n", TAIL_LINES, path);
    if (f == NULL) {
        fprintf(stderr, "(cannot read it: %s)\n", strerror(errno));
        return;
    }
    for (;;) {
        if (len + 65536 > cap) {
            char *nb = realloc(buf, (len + 65536) * 2);
            if (nb == NULL) {
                free(buf);
                fclose(f);
                return;
            }
            buf = nb;
            cap = (len + 65536) * 2;
        }
        size_t r = fread(buf + len, 1, cap - len - 1, f);
        if (r == 0)
            break;
        len += r;
    }
    fclose(f);
    if (buf == NULL)
        return;
    buf[len] = '\0';
    start = len;
    if (start > 0 && buf[start - 1] == '\n')
        start--;
    while (start > 0) {
        if (buf[start - 1] == '\n' && ++lines == TAIL_LINES)
            break;
        start--;
    }
    fputs(buf + start, stderr);
    if (len > 0 && buf[len - 1] != '\n')
        fputc('\n', stderr);
    fprintf(stderr, "---- end of %s ----\n", path);
    free(buf);
}

/* Reaps exited children; returns the first process that failed (exited
 * non-zero or by a signal we did not send), or NULL. */
struct proc *
launch__reap(struct job *j)
{
    struct proc *bad = NULL;
    int st;
    pid_t pid;

    while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
        for (size_t i = 0; i < j->np; i++) {
            struct proc *p = &j->p[i];
            char how[96];

            if (p->pid != pid || !launch__proc_live(p))
                continue;
            p->reaped = 1;
            p->status = st;
            launch__describe_status(st, how, sizeof how);
            tools__say("%s exited: %s%s", p->name, how,
                p->stopping ? " (stopped by us)" : "");
            if (!p->remote)
                kill(-p->pid, SIGTERM);   /* what it left in its group */
            if (!p->stopping && st != 0 && bad == NULL)
                bad = p;
        }
    }
    return bad;
}

size_t
launch__count_live(const struct job *j, int role)
{
    size_t n = 0;

    for (size_t i = 0; i < j->np; i++)
        if (launch__proc_live(&j->p[i]) && (role < 0 || j->p[i].role == role))
            n++;
    return n;
}

/* Servers of the job found running (persistent ones reused). */
size_t
launch__nreused(const struct job *j)
{
    size_t n = 0;

    for (size_t i = 0; i < j->np; i++)
        n += j->p[i].role == R_SERVER && j->p[i].reused;
    return n;
}

/* Stops 'role' processes (-1: all we started): SIGTERM, then SIGKILL after
 * GRACE_S. Returns the number that had to be killed. */
int
launch__stop_procs(struct job *j, int role)
{
    pid_t *killers = tools__xcalloc(2 * j->np + 1, sizeof *killers);
    size_t nk = 0;
    double end;
    int killed = 0, any = 0;

    for (size_t i = 0; i < j->np; i++) {
        struct proc *p = &j->p[i];
        if (launch__proc_live(p) && (role < 0 || p->role == role)) {
            p->stopping = 1;
            proc_signal(j, p, SIGTERM, &killers[nk]);
            if (killers[nk] > 0)
                nk++;
            any = 1;
        }
    }
    end = tools__now_s() + GRACE_S;
    while (any && tools__now_s() < end) {
        launch__reap(j);
        any = 0;
        for (size_t i = 0; i < j->np; i++)
            if (launch__proc_live(&j->p[i]) &&
                (role < 0 || j->p[i].role == role))
                any = 1;
        if (any)
            tools__sleep_ms(20);
    }
    for (size_t i = 0; i < j->np; i++) {
        struct proc *p = &j->p[i];
        if (launch__proc_live(p) && (role < 0 || p->role == role)) {
            tools__say("%s did not stop within %.0f s: SIGKILL", p->name,
                       GRACE_S);
            proc_signal(j, p, SIGKILL, &killers[nk]);
            if (killers[nk] > 0)
                nk++;
            killed++;
        }
    }
    end = tools__now_s() + GRACE_S;
    while (launch__count_live(j, role) > 0 && tools__now_s() < end) {
        launch__reap(j);
        tools__sleep_ms(20);
    }
    /* the helper ssh processes that sent remote kills */
    for (size_t i = 0; i < nk; i++) {
        int st;
        double e2 = tools__now_s() + 2;
        while (waitpid(killers[i], &st, WNOHANG) == 0 && tools__now_s() < e2)
            tools__sleep_ms(20);
        if (waitpid(killers[i], &st, WNOHANG) == 0) {
            kill(-killers[i], SIGKILL);
            waitpid(killers[i], &st, 0);
        }
    }
    free(killers);
    return killed;
}
