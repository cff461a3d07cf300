/* token.c - the job's shared secret: reading the token file (refused
 * unless private to its owner) and the handshake proof, an HMAC
 * (libsodium crypto_auth, HMAC-SHA512-256) over a fresh server nonce, the
 * group and the rank. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sodium.h>
#include "base/base.h"
#include "net/gkv_net.h"
#include "net/wire.h"

/* 1 when the rest of fd is at most a few blanks (spaces, tabs, line
 * ends), 0 when anything else follows or it cannot be read. */
static int
only_blanks_left(int fd)
{
    char extra[256];
    size_t seen = 0;
    ssize_t k;

    while ((k = read(fd, extra, sizeof extra)) != 0) {
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 || (seen += (size_t)k) > sizeof extra)
            return 0;
        for (ssize_t i = 0; i < k; i++)
            if (strchr(" \t\r\n", extra[i]) == NULL || extra[i] == '\0')
                return 0;
    }
    return 1;
}

gkv_err
gkv_token_load(const char *path, char *buf, size_t cap)
{
    struct stat sb;
    size_t len = 0, lim;
    int fd;

    net__clear();
    if (path == NULL || buf == NULL || cap < 2)
        return net__fail(GKV_EINVAL, "token: no file or no buffer");
    buf[0] = '\0';
    lim = cap - 1 < GKV_TOKEN_MAX ? cap - 1 : GKV_TOKEN_MAX;
    /* O_NONBLOCK: opening a FIFO without a writer (or a tty, a device)
     * returns at once, for the check below to refuse it; a regular
     * file's reads never block */
    if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)) < 0)
        return net__fail(gkv__from_errno(errno), "token file %s: %s", path,
                         strerror(errno));
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return net__fail(GKV_EINVAL, "token file %s: not a regular file", path);
    }
    if (sb.st_mode & (S_IRWXG | S_IRWXO)) {
        close(fd);
        return net__fail(GKV_EPERM, "token file %s: mode %04o lets group or "
                         "others read or write it; a secret must be private "
                         "(chmod 600 %s)", path,
                         (unsigned)(sb.st_mode & 07777), path);
    }
    for (;;) {
        ssize_t r = read(fd, buf + len, lim - len);

        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            close(fd);
            sodium_memzero(buf, cap);
            return net__fail(GKV_EIO, "token file %s: %s", path, strerror(e));
        }
        if (r == 0)
            break;
        len += (size_t)r;
        if (len == lim) {
            /* full: what follows may only be the trailing blanks that are
             * dropped below (a token of the largest size written by echo
             * ends in a newline) */
            if (!only_blanks_left(fd)) {
                close(fd);
                sodium_memzero(buf, cap);
                return net__fail(GKV_EINVAL, "token file %s: longer than %zu "
                                 "bytes", path, lim);
            }
            break;
        }
    }
    close(fd);
    while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r' ||
                       buf[len - 1] == ' ' || buf[len - 1] == '\t'))
        len--;
    buf[len] = '\0';
    if (len == 0)
        return net__fail(GKV_EINVAL, "token file %s: empty", path);
    if (memchr(buf, '\0', len) != NULL) {
        sodium_memzero(buf, cap);
        return net__fail(GKV_EINVAL, "token file %s: holds a NUL byte", path);
    }
    if (len < GKV_TOKEN_MIN) {
        sodium_memzero(buf, cap);
        return net__fail(GKV_EINVAL, "token file %s: the token is %zu bytes; "
                         "a token must be at least %d (make one: umask 077; "
                         "head -c 32 /dev/urandom | base64 > %s)", path, len,
                         GKV_TOKEN_MIN, path);
    }
    return GKV_OK;
}

void
net__token_key(const void *token, size_t len, unsigned char key[NET_KEY_LEN])
{
    crypto_generichash(key, NET_KEY_LEN, token, len, NULL, 0);
}

static void
proof_msg(crypto_auth_hmacsha512256_state *st,
          const unsigned char key[NET_KEY_LEN],
          const unsigned char nonce[NET_NONCE_LEN], const char *group,
          uint32_t rank)
{
    static const char tag[] = "gkv-auth-v1";
    uint16_t gl = (uint16_t)strlen(group);
    unsigned char b[4];

    crypto_auth_hmacsha512256_init(st, key, NET_KEY_LEN);
    crypto_auth_hmacsha512256_update(st, (const unsigned char *)tag,
                                     sizeof tag - 1);
    crypto_auth_hmacsha512256_update(st, nonce, NET_NONCE_LEN);
    b[0] = (unsigned char)gl;
    b[1] = (unsigned char)(gl >> 8);
    crypto_auth_hmacsha512256_update(st, b, 2);
    crypto_auth_hmacsha512256_update(st, (const unsigned char *)group, gl);
    for (int i = 0; i < 4; i++)
        b[i] = (unsigned char)(rank >> (8 * i));
    crypto_auth_hmacsha512256_update(st, b, 4);
}

void
net__proof(const unsigned char key[NET_KEY_LEN],
           const unsigned char nonce[NET_NONCE_LEN], const char *group,
           uint32_t rank, unsigned char mac[NET_MAC_LEN])
{
    crypto_auth_hmacsha512256_state st;

    proof_msg(&st, key, nonce, group, rank);
    crypto_auth_hmacsha512256_final(&st, mac);
    sodium_memzero(&st, sizeof st);
}

int
net__proof_ok(const unsigned char key[NET_KEY_LEN],
              const unsigned char nonce[NET_NONCE_LEN], const char *group,
              uint32_t rank, const unsigned char mac[NET_MAC_LEN])
{
    unsigned char want[NET_MAC_LEN];
    int ok;

    net__proof(key, nonce, group, rank, want);
    ok = sodium_memcmp(want, mac, NET_MAC_LEN) == 0;
    sodium_memzero(want, sizeof want);
    return ok;
}
