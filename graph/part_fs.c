/* part_fs.c - the partitioner's output directory: what is there checked
 * before anything is written, paths, files written whole, the temporary
 * tree synced to disk and renamed to OUT (see part_write.c). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <jansson.h>
#include "graph/part_write.h"

/* ---- files and directories ------------------------------------------------ */

char *
pw__path_join(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    char *p = gkv__malloc(la + lb + 2);

    if (p != NULL) {
        memcpy(p, a, la);
        p[la] = '/';
        memcpy(p + la + 1, b, lb + 1);
    }
    return p;
}

static int
rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)ftw;
    if (flag == FTW_DP)
        return rmdir(p) != 0 && errno != ENOENT ? -1 : 0;
    return unlink(p) != 0 && errno != ENOENT ? -1 : 0;
}

/* Removes the tree at 'p' (no symlinks followed). */
int
pw__rmtree(const char *p)
{
    return nftw(p, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static int
fsync_path(const char *p, int dir)
{
    int fd = open(p, (dir ? O_DIRECTORY : 0) | O_RDONLY | O_CLOEXEC), rc;

    if (fd < 0)
        return -1;
    rc = fsync(fd);
    close(fd);
    return rc;
}

int
pw__write_all(int fd, const void *buf, size_t len)
{
    const unsigned char *b = buf;

    while (len > 0) {
        ssize_t n = write(fd, b, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        b += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Is 'name' "part-<digits>"? */
static int
is_part_dir(const char *name)
{
    if (strncmp(name, "part-", 5) != 0 || name[5] == '\0')
        return 0;
    for (const char *c = name + 5; *c; c++)
        if (*c < '0' || *c > '9')
            return 0;
    return 1;
}

/* Checks what is at w->out now: nothing, an empty directory, or (with
 * GKV_PART_FORCE) a gkv partition and nothing else. */
gkv_err
pw__check_outdir(struct pw *w)
{
    char *parent, *slash, *json = NULL, *other = NULL;
    struct stat sb;
    DIR *d;
    struct dirent *de;
    int n = 0, oom = 0;
    gkv_err rc = GKV_OK;

    if ((parent = gkv__strdup(w->out)) == NULL)
        return pw__fail(w, GKV_ENOMEM, "out of memory");
    slash = strrchr(parent, '/');
    if (slash == NULL)
        strcpy(parent, ".");
    else if (slash == parent)
        slash[1] = '\0';
    else
        *slash = '\0';
    if (stat(parent, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        rc = pw__fail(w, stat(parent, &sb) != 0 ? pw__from_errno(errno)
                      : GKV_ENOENT, "output directory '%s': its parent '%s' "
                      "is not an existing directory", w->out, parent);
        gkv__free(parent);
        return rc;
    }
    gkv__free(parent);
    if (lstat(w->out, &sb) != 0) {
        if (errno == ENOENT)
            return GKV_OK;
        return pw__fail(w, pw__from_errno(errno), "output directory '%s': %s",
                        w->out, strerror(errno));
    }
    if (!S_ISDIR(sb.st_mode))
        return pw__fail(w, GKV_EEXIST, "output directory '%s' exists and is "
                        "not a directory", w->out);
    if ((d = opendir(w->out)) == NULL)
        return pw__fail(w, pw__from_errno(errno), "output directory '%s': %s",
                        w->out, strerror(errno));
    while ((de = readdir(d)) != NULL) {
        const char *nm = de->d_name;
        size_t len = strlen(nm);
        if (strcmp(nm, ".") == 0 || strcmp(nm, "..") == 0)
            continue;
        n++;
        if (len > 5 && strcmp(nm + len - 5, ".json") == 0) {
            char *p = pw__path_join(w->out, nm);
            json_error_t jerr;
            json_t *j = p != NULL ? json_load_file(p, 0, &jerr) : NULL;
            if (p == NULL || (j == NULL && json_error_code(&jerr) ==
                                           json_error_out_of_memory))
                oom = 1;
            else if (j != NULL && json_is_object(j) &&
                     json_object_get(j, "gkv_format") != NULL &&
                     json == NULL)
                oom = (json = gkv__strdup(nm)) == NULL;
            else if (other == NULL)
                oom = (other = gkv__strdup(nm)) == NULL;
            json_decref(j);
            gkv__free(p);
        } else if (!is_part_dir(nm) && strcmp(nm, "mapping") != 0 &&
                   other == NULL) {
            oom = (other = gkv__strdup(nm)) == NULL;
        }
        if (oom)
            break;
    }
    closedir(d);
    if (oom)
        rc = pw__fail(w, GKV_ENOMEM, "output directory '%s': out of memory "
                      "while reading what it holds", w->out);
    else if (n == 0)
        rc = GKV_OK;
    else if (other != NULL)
        rc = pw__fail(w, GKV_EEXIST, "output directory '%s' holds files that "
                      "are not a gkv partition ('%s'); choose another "
                      "directory", w->out, other);
    else if (json == NULL)
        rc = pw__fail(w, GKV_EEXIST, "output directory '%s' holds partition "
                      "stores (part-N) or a mapping folder but no partition "
                      "config (NAME.json); remove it or choose another "
                      "directory", w->out);
    else if (!(w->sp->flags & GKV_PART_FORCE))
        rc = pw__fail(w, GKV_EEXIST, "output directory '%s' already holds a "
                      "partition ('%s'); replace it with --force "
                      "(GKV_PART_FORCE)", w->out, json);
    else
        w->replace = 1;
    gkv__free(json);
    gkv__free(other);
    return rc;
}

gkv_err
pw__part_path(struct pw *w, int p, char **out)
{
    char sub[32];

    snprintf(sub, sizeof sub, "part-%d", p);
    if ((*out = pw__path_join(w->tmp, sub)) == NULL)
        return pw__fail(w, GKV_ENOMEM, "out of memory");
    return GKV_OK;
}

/* Every store, mapping file and directory of the temporary tree to disk. */
gkv_err
pw__sync_all(struct pw *w)
{
    char rel[GKV_NAME_MAX + 32], *path = NULL;
    gkv_err rc = GKV_OK;

    if ((rc = pw__progress(w, "sync", 0, 0)) != GKV_OK)
        return rc;
    for (int p = 0; p < w->P && rc == GKV_OK; p++) {
        gkv_store *s = NULL;
        if ((rc = pw__part_path(w, p, &path)) != GKV_OK)
            break;
        if ((rc = gkv_store_open(&s, path, GKV_NOSYNC, NULL)) != GKV_OK ||
            (rc = gkv_store_sync(s)) != GKV_OK)
            rc = pw__fail(w, rc, "partition %d: syncing store '%s': %s", p,
                          path, gkv_store_errmsg(s));
        gkv_store_close(s);
        if (rc == GKV_OK && fsync_path(path, 1) != 0)
            rc = pw__fail(w, pw__from_errno(errno), "syncing '%s': %s", path,
                          strerror(errno));
        gkv__free(path);
        path = NULL;
    }
    for (int i = 0; i < w->nnt + w->net && rc == GKV_OK; i++) {
        if (i < w->nnt)
            snprintf(rel, sizeof rel, "mapping/node-%s.npy",
                     gkv_graph_ntype_name(w->g, i));
        else
            snprintf(rel, sizeof rel, "mapping/edge-%s.npy",
                     w->einfo[i - w->nnt].canonical);
        if ((path = pw__path_join(w->tmp, rel)) == NULL)
            return pw__fail(w, GKV_ENOMEM, "out of memory");
        if (fsync_path(path, 0) != 0)
            rc = pw__fail(w, pw__from_errno(errno), "syncing '%s': %s", path,
                          strerror(errno));
        gkv__free(path);
        path = NULL;
    }
    if (rc == GKV_OK && (path = pw__path_join(w->tmp, "mapping")) != NULL &&
        fsync_path(path, 1) != 0)
        rc = pw__fail(w, pw__from_errno(errno), "syncing '%s': %s", path,
                      strerror(errno));
    gkv__free(path);
    return rc;
}

/* The parent directory of w->out, synced after the rename. */
static void
sync_parent(struct pw *w)
{
    char *parent = gkv__strdup(w->out), *slash;

    if (parent == NULL)
        return;
    slash = strrchr(parent, '/');
    if (slash == NULL)
        strcpy(parent, ".");
    else if (slash == parent)
        slash[1] = '\0';
    else
        *slash = '\0';
    fsync_path(parent, 1);
    gkv__free(parent);
}

/* Moves the complete temporary tree to OUT. */
gkv_err
pw__publish(struct pw *w)
{
    if (fsync_path(w->tmp, 1) != 0)
        return pw__fail(w, pw__from_errno(errno), "syncing '%s': %s", w->tmp,
                        strerror(errno));
    if (w->replace) {
        /* one step where the file system can: OUT is the old partition or
         * the new one at every moment, and OUT.tmp-PID then holds the old
         * (a crash leaves it behind, as documented) */
        if (renameat2(AT_FDCWD, w->tmp, AT_FDCWD, w->out,
                      RENAME_EXCHANGE) == 0) {
            w->tmp_made = 0;
            sync_parent(w);
            pw__rmtree(w->tmp);
            return GKV_OK;
        }
        if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP)
            return pw__fail(w, pw__from_errno(errno), "swapping '%s' and "
                            "'%s': %s", w->tmp, w->out, strerror(errno));
        /* a file system without exchange: OUT is missing for a moment */
        if (rename(w->out, w->old) != 0)
            return pw__fail(w, pw__from_errno(errno), "moving the old "
                            "partition '%s' aside: %s", w->out,
                            strerror(errno));
        if (rename(w->tmp, w->out) != 0) {
            int e = errno;
            rename(w->old, w->out);
            return pw__fail(w, pw__from_errno(e), "renaming '%s' to '%s': %s",
                            w->tmp, w->out, strerror(e));
        }
        w->tmp_made = 0;
        sync_parent(w);
        pw__rmtree(w->old);
        return GKV_OK;
    }
    if (rename(w->tmp, w->out) != 0) {
        int e = errno;
        if (e == ENOTEMPTY || e == EEXIST)
            return pw__fail(w, GKV_EEXIST, "output directory '%s' was filled "
                            "by someone else while partitioning", w->out);
        return pw__fail(w, pw__from_errno(e), "renaming '%s' to '%s': %s",
                        w->tmp, w->out, strerror(e));
    }
    w->tmp_made = 0;
    sync_parent(w);
    return GKV_OK;
}
