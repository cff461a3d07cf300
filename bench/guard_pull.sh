#!/usr/bin/env bash
# guard_pull.sh - GKV_GUARD's cost on the pull path against main, in one
# run (doc/BENCHMARKS.md, "The fault guard on the pull path").
#
#   bench/guard_pull.sh MAIN_CHECKOUT [REPS]
#
# Builds bench/guard_pull.c against this tree's build/libgkv.a and against
# MAIN_CHECKOUT's (a checkout of main with `make build/libgkv.a` done),
# then alternates, rep by rep in rotating order: main unguarded, this
# tree unguarded, this tree with GKV_GUARD, main with GKV_GUARD; 1 and 64
# rows per pull; prints each one's median ns per call over REPS (default
# 9) and every figure. GUARD_PULL_HELD=1 in the environment: every pull
# through one held snapshot (guard_pull.c).
set -eu
main=$1 reps=${2:-9}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
libs="$(pkg-config --libs lmdb libxxhash jansson nanomsg libsodium) -lmetis -lm -lpthread"
inc="-I. -Ikv -Igraph -Inet -Iloader"
src=$PWD/bench/guard_pull.c
cc -O2 -std=c11 -D_GNU_SOURCE $inc "$src" build/libgkv.a $libs -o "$tmp/branch"
(cd "$main" && cc -O2 -std=c11 -D_GNU_SOURCE $inc "$src" build/libgkv.a $libs \
    -o "$tmp/main")
uptime
for rows in 1 64; do
    : > "$tmp/out"
    for r in $(seq 1 "$reps"); do
        for k in 0 1 2 3; do
            case $(( (k + r) % 4 )) in
            0) echo "main $("$tmp/main" "$tmp/st" 0 "$rows" 5)" ;;
            1) echo "branch $("$tmp/branch" "$tmp/st" 0 "$rows" 5)" ;;
            2) echo "guarded $("$tmp/branch" "$tmp/st" 1 "$rows" 5)" ;;
            3) echo "main-guarded $("$tmp/main" "$tmp/st" 1 "$rows" 5)" ;;
            esac >> "$tmp/out"
        done
    done
    for b in main branch guarded main-guarded; do
        v=$(awk -v b=$b '$1 == b {print $2}' "$tmp/out" | sort -n | tr '\n' ' ')
        echo "rows=$rows $b median $(echo $v | tr ' ' '\n' |
            awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}') ns/call; all: $v"
    done
done
uptime
