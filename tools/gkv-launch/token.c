/* token.c - the job's token: read from --token-file, or, when none is
 * given, made by gkv-launch. A job's token is 32 random bytes (libsodium
 * randombytes), base64, in WORKSPACE/token (mode 0600). Persistent
 * servers (--keep-alive) keep one token job after job, named by where
 * they listen: $XDG_STATE_HOME/gkv/server-HOST-PORT.token (default
 * ~/.local/state/gkv/, the folder 0700; HOST and PORT of machine 0's
 * server 0 in the ip_config), where the next launch with that ip_config
 * finds it, and --shutdown too (which removes it once every server has
 * stopped). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sodium.h>
#include "launch.h"
#include "util.h"

#define TOKEN_BYTES 32          /* random bytes; 44 characters in base64 */

int
launch__load_token(const struct job *j, char *buf, size_t cap)
{
    gkv_err rc = gkv_token_load(j->tok_abs, buf, cap);

    /* the net/ message names the file and the problem ("token file F:
     * mode 0644 lets group or others ... chmod 600"), so it is printed
     * without gkv_strerror()'s text, which for a missing file would be
     * GKV_ENOENT's "no store at that path" */
    if (rc == GKV_OK)
        return 0;
    if (rc == GKV_ENOENT)
        tools__note("--token-file %s: the token file does not exist (make one: "
            "umask 077; head -c 32 /dev/urandom | base64 > FILE)", j->tok_abs);
    else
        tools__note("--token-file: %s", gkv_net_errmsg());
    return -1;
}

/* Makes 'path' hold a fresh token, unless it exists already (another
 * launch made it: that one is kept). Written to a private temporary file
 * and linked into place, so no reader sees half a token and two launches
 * racing keep one. 0, or -1 after saying why. */
static int
token_make(const char *path)
{
    unsigned char raw[TOKEN_BYTES];
    char b64[sodium_base64_ENCODED_LEN(TOKEN_BYTES,
                                       sodium_base64_VARIANT_ORIGINAL) + 1];
    char tmp[PATH_MAX + 64];
    size_t len;
    int fd, ok;

    if (access(path, F_OK) == 0)
        return 0;
    if (sodium_init() < 0) {
        tools__note("libsodium failed to initialise");
        return -1;
    }
    randombytes_buf(raw, sizeof raw);
    sodium_bin2base64(b64, sizeof b64 - 1, raw, sizeof raw,
                      sodium_base64_VARIANT_ORIGINAL);
    sodium_memzero(raw, sizeof raw);
    len = strlen(b64);
    b64[len++] = '\n';
    snprintf(tmp, sizeof tmp, "%s.tmp-%ld", path, (long)getpid());
    if ((fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) < 0) {
        tools__note("token file %s: cannot create it: %s", tmp,
                    strerror(errno));
        sodium_memzero(b64, sizeof b64);
        return -1;
    }
    ok = write(fd, b64, len) == (ssize_t)len && fsync(fd) == 0;
    ok = close(fd) == 0 && ok;
    sodium_memzero(b64, sizeof b64);
    if (ok && link(tmp, path) != 0 && errno != EEXIST)
        ok = 0;
    if (!ok)
        tools__note("token file %s: cannot write it: %s", path,
                    strerror(errno));
    unlink(tmp);
    return ok ? 0 : -1;
}

/* j->tok_abs made the job's token file; --token-file says so from now. */
static void
token_use(struct job *j)
{
    j->token_file = j->tok_abs;
}

/* The folder persistent servers' tokens live in, made (0700) when
 * 'create'. 0, or -1 (said why when creating). */
static int
state_dir(char *out, size_t cap, int create)
{
    const char *x = launch__env_get("XDG_STATE_HOME");
    const char *home = launch__env_get("HOME");
    char parent[PATH_MAX - 300];

    if (x != NULL && x[0] == '/') {
        snprintf(parent, sizeof parent, "%s", x);
    } else if (home != NULL) {
        snprintf(parent, sizeof parent, "%s/.local/state", home);
    } else {
        if (create)
            tools__note("--keep-alive without --token-file: neither "
                        "XDG_STATE_HOME nor HOME says where to keep the "
                        "persistent servers' token; give --token-file F");
        return -1;
    }
    if ((size_t)snprintf(out, cap, "%s/gkv", parent) >= cap) {
        if (create)
            tools__note("%s/gkv: too long a path", parent);
        return -1;
    }
    if (!create)
        return 0;
    /* like mkdir -p for the parent; the last folder private */
    for (char *c = parent + 1; *c; c++)
        if (*c == '/') {
            *c = '\0';
            (void)mkdir(parent, 0755);
            *c = '/';
        }
    (void)mkdir(parent, 0755);
    if (mkdir(out, 0700) != 0 && errno != EEXIST) {
        tools__note("%s: cannot create it: %s", out, strerror(errno));
        return -1;
    }
    return 0;
}

int
launch__token_persistent(struct job *j)
{
    const gkv_machine *m0 = gkv_ipconfig_machine(j->ipc, 0);
    char dir[PATH_MAX - 400], host[300];
    size_t n = 0;

    if (j->token_file != NULL || !(j->keep_alive || j->shutdown))
        return 0;
    if (state_dir(dir, sizeof dir, !j->shutdown) != 0)
        return j->shutdown ? 0 : -1;
    /* the address as a file name: anything but [A-Za-z0-9.-] becomes '_'
     * (an IPv6 address's colons) */
    for (const char *c = m0->host; *c && n < sizeof host - 1; c++)
        host[n++] = (strchr(".-", *c) != NULL || (*c >= '0' && *c <= '9') ||
                     (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z')) ?
                    *c : '_';
    host[n] = '\0';
    snprintf(j->tok_abs, sizeof j->tok_abs, "%s/server-%s-%u.token", dir, host,
             m0->port);
    j->tok_persistent = 1;
    if (j->shutdown) {
        /* servers started without one (by hand, or before tokens were the
         * default) need none */
        if (access(j->tok_abs, F_OK) == 0)
            token_use(j);
        else
            j->tok_abs[0] = '\0';
        return 0;
    }
    if (token_make(j->tok_abs) != 0)
        return -1;
    token_use(j);
    return 0;
}

int
launch__token_job(struct job *j)
{
    if (j->token_file != NULL)
        return 0;
    if ((size_t)snprintf(j->tok_abs, sizeof j->tok_abs, "%s/token", j->ws) >=
        sizeof j->tok_abs) {
        tools__note("workspace %s: too long a path for its token file", j->ws);
        return -1;
    }
    if (token_make(j->tok_abs) != 0)
        return -1;
    token_use(j);
    return 0;
}

int
launch__token_shown(const struct job *j)
{
    return j->token_file != NULL && !j->tok_persistent;
}
