#!/usr/bin/env bash
# Runs each cmocka test program in its own process with a time limit, then
# prints one closing line: "tests: N passed, N failed, N skipped".
# GKVT_TIMEOUT (seconds per program, default 300) and GKVT_SEED pass through.
set -u
limit=${GKVT_TIMEOUT:-300}
# SAN= builds: known leaks in the libraries we link (see the file)
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$(cd "$(dirname "$0")" && pwd)/lsan.supp:print_suppressions=0}
pass=0 fail=0 skip=0 bad_progs=()
for t in "$@"; do
    name=$(basename "$t")
    echo "==> $name"
    out=$(mktemp)
    timeout --kill-after=10 "$limit" "$t" >"$out" 2>&1
    rc=$?
    cat "$out"
    p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$out" | tail -n1)
    f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$out" | tail -n1)
    s=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$out" | tail -n1)
    rm -f "$out"
    pass=$((pass + ${p:-0})); fail=$((fail + ${f:-0})); skip=$((skip + ${s:-0}))
    if [ "$rc" -ne 0 ]; then
        if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
            echo "!! $name: timed out after ${limit}s"
        else
            echo "!! $name: exit status $rc"
        fi
        # A program that died before cmocka counted a failure still fails.
        [ "${f:-0}" -eq 0 ] && fail=$((fail + 1))
        bad_progs+=("$name")
    fi
done
[ ${#bad_progs[@]} -gt 0 ] && echo "failing programs: ${bad_progs[*]}"
echo "tests: $pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
