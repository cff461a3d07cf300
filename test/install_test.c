/* install_test.c - `make install` and `make uninstall` into a temporary
 * DESTDIR, from the already-built BUILD directory (GKVT_BUILD; the
 * repository is its parent), then what a user of the installed files
 * does: a small C program compiled with `pkg-config --define-prefix
 * --cflags --libs gkv` (PKG_CONFIG_PATH into the staging tree, as README.md
 * says), linked against the shared library (found through an rpath) and
 * against the static one (pkg-config --static), opens a store, writes a
 * tensor, reads the same bytes back and prints the version; the installed
 * gkv.pc names the build's prefix, and of CUDA only the runtime (-lcudart,
 * no directory: not /usr/local/cuda nor the build machine's; the static
 * link adds -L of its own, as README.md says), or, built with CUDA=no,
 * nothing of CUDA at all; every installed tool answers --help
 * with exit 0; the man pages are there. Uninstall must remove every file
 * install put there.
 *
 * The install goes to DESTDIR with the PREFIX the build was made with (read
 * from BUILD/gkv.pc), so nothing in BUILD is remade (a different PREFIX
 * would remake gkv.pc there). When BUILD is up to date, `make install` runs
 * as a user would and must not rebuild anything (checked by mtime); when
 * other changes are pending, install runs with -o all (what is built). */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include "gkvt.h"
#include "gkv.h"

/* snprintf, through a va_list: paths here are far below their buffers, so
 * no -Wformat-truncation for each of them */
static void
fmt_into(char *buf, size_t len, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    if ((size_t)vsnprintf(buf, len, fmt, ap) >= len)
        fail_msg("a path or command is too long: %s", buf);
    va_end(ap);
}

struct fx {
    char *dir;                   /* the temporary directory */
    char root[PATH_MAX];         /* the repository */
    char build[PATH_MAX];        /* BUILD, relative to root */
    char prefix[PATH_MAX];       /* the build's PREFIX */
    char dest[PATH_MAX + 16];    /* DESTDIR: dir/stage */
    const char *cuda;            /* "CUDA=yes" or "CUDA=no", as built */
    char cudadir[PATH_MAX];      /* the CUDA runtime's directory, or "" */
    char *out, *err;
};

static int
setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    char abs[PATH_MAX], *sl;
    const char *b = gkvt_prog(".");

    if (f == NULL || realpath(b, abs) == NULL ||
        (f->dir = gkvt_mkdtemp("install")) == NULL)
        return -1;
    fmt_into(f->root, sizeof f->root, "%s", abs);
    if ((sl = strrchr(f->root, '/')) == NULL)
        return -1;
    *sl = '\0';
    fmt_into(f->build, sizeof f->build, "%s", sl + 1);
    fmt_into(f->dest, sizeof f->dest, "%s/stage", f->dir);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fx *f = *state;

    free(f->out);
    free(f->err);
    return gkvt_dir_teardown(state);
}

/* Runs "sh -c CMD" in the repository; keeps stdout and stderr. */
static int
sh(struct fx *f, const char *cmd)
{
    char *argv[] = {"/bin/sh", "-c", (char *)cmd, NULL};
    char *full;
    int rc;

    free(f->out);
    free(f->err);
    if (asprintf(&full, "cd '%s' && %s", f->root, cmd) < 0)
        fail_msg("out of memory");
    argv[2] = full;
    rc = gkvt_run(argv, NULL, 0, &f->out, &f->err, 120);
    free(full);
    return rc;
}

#define SH_OK(f, cmd) do {                                                \
        if (sh(f, cmd) != 0)                                              \
            fail_msg("failed: %s\nstdout: %s\nstderr: %s", cmd, (f)->out, \
                     (f)->err);                                           \
    } while (0)

static int
exists(const char *p)
{
    struct stat sb;
    return lstat(p, &sb) == 0;
}

static time_t
mtime(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 ? sb.st_mtime : 0;
}

/* Every regular file and link under 'dir' (paths relative to it), one per
 * line, appended to *list. */
static void
walk(const char *dir, const char *rel, char **list, size_t *len)
{
    char p[PATH_MAX * 2];
    DIR *dp;
    struct dirent *de;

    fmt_into(p, sizeof p, "%s/%s", dir, rel);
    if ((dp = opendir(p)) == NULL)
        return;
    while ((de = readdir(dp)) != NULL) {
        char r[PATH_MAX];
        struct stat sb;

        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        fmt_into(r, sizeof r, "%s%s%s", rel, rel[0] ? "/" : "", de->d_name);
        fmt_into(p, sizeof p, "%s/%s", dir, r);
        if (lstat(p, &sb) != 0)
            continue;
        if (S_ISDIR(sb.st_mode)) {
            walk(dir, r, list, len);
        } else {
            size_t n = strlen(r);
            *list = realloc(*list, *len + n + 2);
            memcpy(*list + *len, r, n);
            (*list)[*len + n] = '\n';
            *len += n + 1;
            (*list)[*len] = '\0';
        }
    }
    closedir(dp);
}

static const char prog_c[] =
"#include <stdio.h>\n"
"#include <string.h>\n"
"#include <gkv.h>\n"
"\n"
"int main(int argc, char **argv)\n"
"{\n"
"    gkv_store *s = NULL;\n"
"    gkv_tensor_spec sp;\n"
"    float in[4 * 3], out[4 * 3];\n"
"    gkv_err rc;\n"
"\n"
"    if (argc != 2)\n"
"        return 2;\n"
"    memset(&sp, 0, sizeof sp);\n"
"    sp.dtype = GKV_F32;\n"
"    sp.ndim = 1;\n"
"    sp.shape[0] = 3;\n"
"    sp.lo = 10;\n"
"    sp.hi = 14;\n"
"    for (int i = 0; i < 12; i++)\n"
"        in[i] = (float)i * 1.25f - 3.0f;\n"
"    if ((rc = gkv_store_open(&s, argv[1], GKV_CREATE, NULL)) != GKV_OK ||\n"
"        (rc = gkv_tensor_create(s, \"t\", &sp)) != GKV_OK ||\n"
"        (rc = gkv_tensor_write(s, \"t\", 10, 14, in, sizeof in)) != GKV_OK ||\n"
"        (rc = gkv_tensor_read(s, NULL, \"t\", 10, 14, out, sizeof out)) != GKV_OK) {\n"
"        fprintf(stderr, \"prog: %s: %s\\n\", gkv_err_name(rc), gkv_strerror(rc));\n"
"        return 1;\n"
"    }\n"
"    gkv_store_close(s);\n"
"    if (memcmp(in, out, sizeof in) != 0) {\n"
"        fprintf(stderr, \"prog: the rows read back differ\\n\");\n"
"        return 1;\n"
"    }\n"
"    printf(\"gkv %s rows ok\\n\", GKV_VERSION_STRING);\n"
"    return 0;\n"
"}\n";

/* The installed gkv.pc ('pc') names no directory of the build machine's
 * CUDA: a CUDA build's Libs.private has -lcudart alone; a CUDA=no build
 * names nothing of CUDA. */
static void
check_pc_cuda(struct fx *f, const char *pc)
{
    const char *at;

    if (strstr(pc, "/usr/local/cuda") != NULL ||
        (f->cudadir[0] != '\0' && strstr(pc, f->cudadir) != NULL) ||
        strstr(pc, "cudalibdir") != NULL)
        fail_msg("installed gkv.pc names the build's CUDA directory:\n%s", pc);
    if (f->cudadir[0] == '\0') {
        for (at = pc; *at != '\0'; at++)
            if (strncasecmp(at, "cuda", 4) == 0)
                fail_msg("gkv.pc of a CUDA=no build names CUDA:\n%s", pc);
        return;
    }
    if ((at = strstr(pc, "\nLibs.private:")) == NULL ||
        strstr(at, " -lcudart\n") == NULL)
        fail_msg("installed gkv.pc: Libs.private without -lcudart:\n%s", pc);
}

static void
test_install_uninstall(void **state)
{
    struct fx *f = *state;
    char cmd[8192], p[PATH_MAX * 2], pcdir[PATH_MAX * 2], lib[PATH_MAX * 2];
    char want[PATH_MAX + 32], *pc, *line, *files = NULL, *left = NULL;
    char cudal[2 * PATH_MAX + 64] = "";
    const char *tools[] = {"kvctl", "gkv-server", "gkv-partition", "gkv-launch",
                           "gkv-example-train"};
    const char *mans[] = {"kvctl.1", "gkv-partition.1"};
    const char *heads[] = {"gkv.h", "gkv_err.h", "gkv_kv.h", "gkv_npy.h",
                           "gkv_graph.h", "gkv_part.h", "gkv_partition.h",
                           "gkv_sample.h", "gkv_net.h"};
    size_t nfiles = 0, nleft = 0;
    time_t before[2];
    int uptodate, fd;
    FILE *fp;

    /* the build's PREFIX, from the gkv.pc it made */
    fmt_into(p, sizeof p, "%s/%s/gkv.pc", f->root, f->build);
    pc = gkvt_slurp(p);
    if ((line = strstr(pc, "prefix=")) != pc)
        fail_msg("%s does not start with prefix=: %s", p, pc);
    sscanf(line, "prefix=%4095[^\n]", f->prefix);
    free(pc);
    assert_true(f->prefix[0] == '/');
    /* and whether it has the GPU code (the CUDA libraries gkv.pc.vars
     * records): make must be given the same, or it expects other objects */
    fmt_into(p, sizeof p, "%s/%s/gkv.pc.vars", f->root, f->build);
    pc = gkvt_slurp(p);
    if ((line = strstr(pc, " cuda=")) == NULL)
        fail_msg("%s: no cuda= in '%s'", p, pc);
    f->cuda = line[6] != '\n' && line[6] != '\0' ? "CUDA=yes" : "CUDA=no";
    if (strcmp(f->cuda, "CUDA=yes") == 0 &&
        sscanf(line, " cuda=-L%4095[^ \n]", f->cudadir) != 1)
        fail_msg("%s: no -L directory in cuda=: '%s'", p, pc);
    free(pc);

    /* install, as a user would after make: nothing is rebuilt */
    /* (gkv.pc.vars is remade on every run, to compare PREFIX: not a
     * sign of anything out of date) */
    fmt_into(cmd, sizeof cmd, "make -q BUILD=%s PREFIX='%s' %s -o "
             "%s/gkv.pc.vars all", f->build, f->prefix, f->cuda, f->build);
    uptodate = sh(f, cmd) == 0;
    fmt_into(p, sizeof p, "%s/%s/libgkv.so", f->root, f->build);
    before[0] = mtime(p);
    fmt_into(p, sizeof p, "%s/%s/kvctl", f->root, f->build);
    before[1] = mtime(p);
    if (!uptodate)
        fprintf(stderr, "install_test: %s is not up to date with the sources "
                "(someone is editing them?); installing what is built "
                "(make -o all)\n", f->build);
    fmt_into(cmd, sizeof cmd, "make --no-print-directory %s BUILD=%s "
             "PREFIX='%s' %s DESTDIR='%s' install", uptodate ? "" : "-o all",
             f->build, f->prefix, f->cuda, f->dest);
    SH_OK(f, cmd);
    if (strstr(f->out, "  CC ") != NULL || strstr(f->out, "  LINK ") != NULL)
        fail_msg("make install rebuilt something:\n%s", f->out);
    fmt_into(p, sizeof p, "%s/%s/libgkv.so", f->root, f->build);
    assert_true(mtime(p) == before[0]);
    fmt_into(p, sizeof p, "%s/%s/kvctl", f->root, f->build);
    assert_true(mtime(p) == before[1]);

    /* what is there */
    fmt_into(lib, sizeof lib, "%s%s/lib", f->dest, f->prefix);
    fmt_into(pcdir, sizeof pcdir, "%s/pkgconfig", lib);
    fmt_into(p, sizeof p, "%s/gkv.pc", pcdir);
    pc = gkvt_slurp(p);
    fmt_into(want, sizeof want, "prefix=%s\n", f->prefix);
    if (strncmp(pc, want, strlen(want)) != 0)
        fail_msg("installed gkv.pc: want '%s' first, got:\n%s", want, pc);
    assert_non_null(strstr(pc, "Version: " GKV_VERSION_STRING "\n"));
    check_pc_cuda(f, pc);
    free(pc);
    fmt_into(p, sizeof p, "%s/libgkv.a", lib);
    assert_true(exists(p));
    fmt_into(p, sizeof p, "%s/libgkv.so.0", lib);
    assert_true(exists(p));
    fmt_into(p, sizeof p, "%s/libgkv.so", lib);
    assert_true(exists(p));
    for (size_t i = 0; i < sizeof heads / sizeof heads[0]; i++) {
        fmt_into(p, sizeof p, "%s%s/include/gkv/%s", f->dest, f->prefix, heads[i]);
        if (!exists(p))
            fail_msg("header %s was not installed", p);
    }
    for (size_t i = 0; i < sizeof mans / sizeof mans[0]; i++) {
        fmt_into(p, sizeof p, "%s%s/share/man/man1/%s", f->dest, f->prefix,
                 mans[i]);
        if (!exists(p))
            fail_msg("man page %s was not installed", p);
    }
    /* every installed tool answers --help, exit 0, on stdout */
    for (size_t i = 0; i < sizeof tools / sizeof tools[0]; i++) {
        fmt_into(cmd, sizeof cmd, "'%s%s/bin/%s' --help", f->dest, f->prefix,
                 tools[i]);
        SH_OK(f, cmd);
        if (strstr(f->out, "Usage") == NULL && strstr(f->out, "usage") == NULL)
            fail_msg("%s --help printed no usage:\n%s", tools[i], f->out);
    }
    fmt_into(cmd, sizeof cmd, "for t in '%s%s'/bin/*; do \"$t\" --help "
             ">/dev/null || { echo \"$t --help failed\"; exit 1; }; done",
             f->dest, f->prefix);
    SH_OK(f, cmd);

    /* a program built against the installed files only; its static link
     * names the CUDA runtime's directory itself, as README.md says */
    if (f->cudadir[0] != '\0')
        fmt_into(cudal, sizeof cudal, "-L'%s' -Wl,-rpath,'%s'", f->cudadir,
                 f->cudadir);
    fmt_into(p, sizeof p, "%s/prog.c", f->dir);
    fp = fopen(p, "w");
    assert_non_null(fp);
    fputs(prog_c, fp);
    fclose(fp);
    /* a SAN= build's library needs its sanitizers in the program too
     * (gkv.pc does not carry them), found from what libgkv.so links;
     * --define-prefix takes gkv.pc's prefix from where it lies, the
     * staging tree, and leaves the CUDA directory as it is */
    fmt_into(cmd, sizeof cmd,
             "export PKG_CONFIG_PATH='%s'; pc='pkg-config --define-prefix'; "
             "san=$(ldd '%s/libgkv.so.0' | sed -n 's/.*lib\\(asan\\|ubsan\\|tsan\\)"
             "\\.so.*/\\1/p' | sed 's/^asan/address/;s/^ubsan/undefined/;"
             "s/^tsan/thread/' | paste -sd, -); sf=${san:+-fsanitize=$san}; "
             "cd '%s' && $pc --cflags gkv | grep -q -- '-I%s%s/include/gkv' "
             "&& $pc --libs gkv | grep -q -- '-L%s ' "
             "&& ${CC:-cc} -std=c11 -Wall -Werror $sf -o prog_so prog.c "
             "$($pc --cflags --libs gkv) -Wl,-rpath,'%s' "
             "&& ${CC:-cc} -std=c11 -Wall -Werror $sf -o prog_a prog.c "
             "$($pc --cflags gkv) "
             "$($pc --static --libs gkv | sed 's/-lgkv /-l:libgkv.a /') %s "
             "&& ./prog_so st_so && ./prog_a st_a "
             "&& ldd ./prog_so | grep libgkv.so.0",
             pcdir, lib, f->dir, f->dest, f->prefix, lib, lib, cudal);
    SH_OK(f, cmd);
    assert_non_null(strstr(f->out, "gkv " GKV_VERSION_STRING " rows ok\n"
                                   "gkv " GKV_VERSION_STRING " rows ok\n"));
    /* the shared one really is the installed library */
    fmt_into(want, sizeof want, "%s/libgkv.so.0", lib);
    assert_non_null(strstr(f->out, want));
    /* what pkg-config gives a static link: the runtime, not where the
     * build machine had it */
    if (f->cudadir[0] != '\0') {
        fmt_into(cmd, sizeof cmd, "PKG_CONFIG_PATH='%s' pkg-config "
                 "--define-prefix --static --libs gkv", pcdir);
        SH_OK(f, cmd);
        if (strstr(f->out, "-lcudart") == NULL ||
            strstr(f->out, f->cudadir) != NULL ||
            strstr(f->out, "/usr/local/cuda") != NULL)
            fail_msg("pkg-config --static --libs gkv: %s", f->out);
    }

    /* uninstall removes every file install put there */
    walk(f->dest, "", &files, &nfiles);
    assert_true(nfiles > 10);
    fmt_into(cmd, sizeof cmd, "make --no-print-directory BUILD=%s PREFIX='%s' "
             "%s DESTDIR='%s' uninstall", f->build, f->prefix, f->cuda, f->dest);
    SH_OK(f, cmd);
    walk(f->dest, "", &left, &nleft);
    if (nleft != 0)
        fail_msg("left after make uninstall:\n%s(installed:\n%s)", left, files);
    free(files);
    free(left);
    /* and a second uninstall is harmless */
    SH_OK(f, cmd);
    fd = open(f->dest, O_RDONLY);
    assert_true(fd >= 0);
    close(fd);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_install_uninstall, setup, teardown),
    };

    return cmocka_run_group_tests_name("install", tests, NULL, NULL);
}
