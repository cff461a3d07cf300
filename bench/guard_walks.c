/* guard_walks.c - how many structure walks GKV_GUARD runs while commits
 * land under continuous reads (doc/BENCHMARKS.md, "The fault guard on
 * the pull path"). Not a test: which read meets which commit depends on
 * timing; a read that begins while a commit has written its pages but
 * not yet its header page sees data.mdb changed and no newer commit.
 *
 *   guard_walks STORE KVCTL N
 *
 * STORE holds tensor "t" (rows 5 and 7, 16 f32 a row: bench/guard_pull
 * makes it). Reads row 5 in a loop on a handle opened with GKV_GUARD
 * while (1) another process commits N times (KVCTL STORE put t 5 ...),
 * then (2) a thread of this process pushes row 7 N times; prints the
 * reads, the walks and the changes taken for commits of each phase.
 * Links kv/'s internals (the handle's counts):
 *
 *   cc -O2 -std=c11 -D_GNU_SOURCE -I. -Ikv -Igraph -Inet -Iloader \
 *      bench/guard_walks.c build/libgkv.a $(pkg-config --libs lmdb \
 *      libxxhash jansson nanomsg libsodium) -lmetis -lm -lpthread */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
#include "kv/kv_test.h"

static gkv_store *s;
static int n;
static volatile int done;

static void *
pusher(void *arg)
{
    uint64_t id = 7;
    float r[16] = {0};

    for (int i = 0; i < n; i++) {
        r[0] = (float)i;
        if (gkv_tensor_push(s, "t", &id, 1, r, sizeof r, NULL) != GKV_OK) {
            fprintf(stderr, "push: %s\n", gkv_store_errmsg(s));
            break;
        }
    }
    done = 1;
    return arg;
}

static void
report(const char *what, long reads, uint64_t w0, uint64_t c0)
{
    printf("%s: %d commits, %ld reads: %llu walks, %llu changes taken for "
           "commits\n", what, n, reads,
           (unsigned long long)(s->st_gwalks - w0),
           (unsigned long long)(s->st_gcommits - c0));
}

int
main(int argc, char **argv)
{
    uint64_t id = 5, w0, c0;
    float got[16];
    long reads = 0;
    pthread_t t;
    pid_t pid;
    int st;

    if (argc != 4 || (n = atoi(argv[3])) <= 0) {
        fprintf(stderr, "usage: guard_walks STORE KVCTL N\n");
        return 2;
    }
    if (gkv_store_open(&s, argv[1], GKV_GUARD, NULL) != GKV_OK) {
        fprintf(stderr, "open: %s\n", gkv_store_errmsg(NULL));
        return 1;
    }
    w0 = s->st_gwalks;
    c0 = s->st_gcommits;
    if ((pid = fork()) == 0) {
        for (int i = 0; i < n; i++) {
            char v[32];
            pid_t c;

            snprintf(v, sizeof v, "%d", i);
            if ((c = fork()) == 0) {
                execl(argv[2], "kvctl", argv[1], "put", "t", "5", v, v, v, v,
                      v, v, v, v, v, v, v, v, v, v, v, v, (char *)NULL);
                _exit(127);
            }
            waitpid(c, &st, 0);
        }
        _exit(0);
    }
    while (waitpid(pid, &st, WNOHANG) == 0) {
        if (gkv_tensor_pull(s, NULL, "t", &id, 1, got, sizeof got) !=
                GKV_OK) {
            fprintf(stderr, "pull: %s\n", gkv_store_errmsg(s));
            return 1;
        }
        reads++;
    }
    report("another process's commits", reads, w0, c0);
    w0 = s->st_gwalks;
    c0 = s->st_gcommits;
    reads = 0;
    pthread_create(&t, NULL, pusher, NULL);
    while (!done) {
        if (gkv_tensor_pull(s, NULL, "t", &id, 1, got, sizeof got) !=
                GKV_OK) {
            fprintf(stderr, "pull: %s\n", gkv_store_errmsg(s));
            return 1;
        }
        reads++;
    }
    pthread_join(t, NULL);
    report("this handle's commits", reads, w0, c0);
    gkv_store_close(s);
    return 0;
}
