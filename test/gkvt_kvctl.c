/* gkvt_kvctl.c - the kvctl tests' fixture (gkvt_kvctl.h). */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "gkvt_kvctl.h"

int
gkvt_kvctl_setup(void **state)
{
    struct gkvt_kvctl_fx *f;

    if (gkvt_dir_setup(state, sizeof *f, "kvctl") != 0)
        return -1;
    f = *state;
    snprintf(f->st, sizeof f->st, "%s/st", f->dir);
    return 0;
}

int
gkvt_kvctl_teardown(void **state)
{
    struct gkvt_kvctl_fx *f = *state;
    char mnt[4200];

    if (f->srv > 0) {
        kill(f->srv, SIGKILL);
        waitpid(f->srv, NULL, 0);
    }
    free(f->out);
    free(f->err);
    snprintf(mnt, sizeof mnt, "%s/mnt", f->dir);
    umount(mnt);
    return gkvt_dir_teardown(state);
}

size_t
gkvt_npy_header(unsigned char *b, const char *descr, const char *shape)
{
    char dict[128];
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': "
                     "False, 'shape': %s, }", descr, shape);

    assert_true(n > 0 && n < 117);
    memcpy(b, "\x93NUMPY\x01\x00\x76\x00", 10);
    memcpy(b + 10, dict, (size_t)n);
    memset(b + 10 + n, ' ', (size_t)(117 - n));
    b[127] = '\n';
    return 128;
}

float
gkvt_npy_val(uint64_t r, uint64_t c)
{
    return (float)(r * 1000 + c) + 0.25f - (float)((r + c) % 3);
}

float *
gkvt_npy_f32(const char *path, uint64_t n, uint64_t w, uint64_t seed)
{
    size_t hl, len = n * w * sizeof(float);
    unsigned char *b = malloc(128 + len);
    float *v = malloc(len);
    char shape[64];

    assert_non_null(b);
    assert_non_null(v);
    snprintf(shape, sizeof shape, "(%llu, %llu)", (unsigned long long)n,
             (unsigned long long)w);
    hl = gkvt_npy_header(b, "<f4", shape);
    for (uint64_t i = 0; i < n; i++)
        for (uint64_t j = 0; j < w; j++)
            v[i * w + j] = gkvt_npy_val(i + seed, j);
    memcpy(b + hl, v, len);
    gkvt_write_file(path, b, hl + len);
    free(b);
    return v;
}

void
gkvt_npy_i64(const char *path, const int64_t *v, uint64_t n, uint64_t cols)
{
    uint64_t shape[2] = {cols ? n / cols : n, cols};
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

    assert_true(fd >= 0);
    GKVT_OK(gkv_npy_write_header(fd, GKV_I64, cols ? 2 : 1, shape, NULL, NULL,
                                 0));
    assert_int_equal(write(fd, v, n * 8), (ssize_t)(n * 8));
    close(fd);
}

void
gkvt_partition_random(const char *dir, int nn, int nedges, uint64_t seed,
                      const char *feat_npy)
{
    char edges[4200], out[4200], nodes[16], featarg[4200];
    char *so = NULL, *se = NULL;
    FILE *fp;
    int code;

    snprintf(edges, sizeof edges, "%s/edges.txt", dir);
    snprintf(out, sizeof out, "%s/g", dir);
    fp = fopen(edges, "w");
    assert_non_null(fp);
    for (int i = 0; i < nedges; i++) {
        uint64_t a = tools__splitmix64(&seed) % (uint64_t)nn;
        uint64_t b = tools__splitmix64(&seed) % (uint64_t)nn;

        fprintf(fp, "%llu %llu\n", (unsigned long long)a,
                (unsigned long long)b);
    }
    fclose(fp);
    snprintf(nodes, sizeof nodes, "%d", nn);
    snprintf(featarg, sizeof featarg, "feat=%s", feat_npy);
    {
        char *argv[] = {(char *)gkvt_prog("gkv-partition"), "--parts", "2",
                        "--method", "random", "--seed", "3", "--input",
                        edges, "--num-nodes", nodes, "--node-feat", featarg,
                        out, NULL};
        code = gkvt_run(argv, NULL, 0, &so, &se, 120);
    }
    if (code != 0)
        fail_msg("gkv-partition: exit %d\n%s%s", code, so, se);
    free(so);
    free(se);
}

json_t *
gkvt_json_parse(const char *text)
{
    json_error_t e;
    json_t *j = json_loads(text, 0, &e);

    if (j == NULL)
        fail_msg("bad JSON (%s at line %d): %s", e.text, e.line, text);
    return j;
}
