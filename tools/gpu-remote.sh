#!/usr/bin/env bash
# gpu-remote.sh - the GPU checks (doc/GPU.md) on a lent GPU machine, whose
# image has CUDA but none of gkv's Debian libraries and no network.
#
#   tools/gpu-remote.sh fetch        here (Debian 12, network): download the
#                                    .deb files of the libraries into
#                                    .gpu-deps/ (ignored by git; carry it)
#   tools/gpu-remote.sh STEP.. [--out DIR] [--deadline S]
#                                    there, steps in order:
#     build     unpack .gpu-deps/*.deb under .gpu-deps/root (never into /),
#               build everything with CUDA=yes into build-gpu
#     test      the GPU tests (gpu_test, net_graph_test), 180 s each at most
#     alltests  every test program with the GPU build (long: a call of its
#               own, and only when device time is left). Two fail there
#               for the set-up alone (2026-11-27): install_test (the
#               installed gkv.pc needs lmdb.pc, which is unpacked, not
#               installed) and launch_test's test_remote (a server started
#               over ssh does not get LD_LIBRARY_PATH)
#     sanitize  compute-sanitizer over the GPU tests: memcheck over both,
#               then initcheck, racecheck and synccheck over gpu_test (a
#               runtime that refuses the tool, as gVisor does, is noted
#               as skipped)
#     bench     gkv-bench-gpu (BENCH_GPU_ARGS are passed on)
#   Logs go to DIR (default: $OUT when set, else gpu-out), one per step,
#   and DIR/summary.txt gets one line per check and the RESULT lines.
#   A warm machine keeps build-gpu between calls, so the steps can be split
#   over calls of at most 10 minutes each. --deadline S ends the whole run
#   within S seconds: each check's timeout is cut to the time left, and a
#   check with under 20 s left is noted as not run.
#
# Exit status: 0 every step passed, 1 a step failed (summary.txt says
# which), 2 bad usage.
set -u
cd "$(dirname "$0")/.." || exit 1
deps=.gpu-deps
pkgs=(liblmdb0 liblmdb-dev libnanomsg5 libnanomsg-dev libxxhash0
      libxxhash-dev libjansson4 libjansson-dev libcmocka0 libcmocka-dev
      libmetis5 libmetis-dev libsodium23 libsodium-dev libhiredis0.14
      libhiredis-dev libgomp1)

usage() {
    sed -n '2,/^set -u/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
}

if [ "${1:-}" = "fetch" ]; then
    mkdir -p "$deps" && cd "$deps" || exit 1
    rm -f ./*.deb
    apt-get download "${pkgs[@]}" || {
        echo "gpu-remote: apt-get download failed (apt-get update first?)" >&2
        exit 1
    }
    echo "gpu-remote: $(ls ./*.deb | wc -l) packages in $deps ($(du -sh . | cut -f1))"
    exit 0
fi

out=${OUT:-gpu-out}
deadline=
steps=()
while [ $# -gt 0 ]; do
    case $1 in
    build|test|alltests|sanitize|bench) steps+=("$1") ;;
    --out) out=${2:?--out needs a folder}; shift ;;
    --deadline) deadline=${2:?--deadline needs seconds}; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "gpu-remote: unknown step '$1'" >&2; usage >&2; exit 2 ;;
    esac
    shift
done
[ ${#steps[@]} -gt 0 ] || { usage >&2; exit 2; }
case $deadline in
'') end= ;;
*[!0-9]*) echo "gpu-remote: --deadline '$deadline': not a number of seconds" >&2
    exit 2 ;;
*) end=$((SECONDS + deadline)) ;;
esac
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)
sum=$out/summary.txt
failed=0

note() { echo "$*" | tee -a "$sum"; }
# limit WANT: sets lim to WANT seconds, or to the time left before the
# deadline when that is less; fails when under 20 s are left
limit() {
    lim=$1
    [ -n "$end" ] || return 0
    [ $((end - SECONDS)) -lt "$lim" ] && lim=$((end - SECONDS))
    [ "$lim" -ge 20 ]
}
# gate NAME WANT: limit WANT, or notes NAME as not run (and fails)
gate() {
    limit "$2" && return 0
    note "$1: NOT RUN (the deadline is near)"
    failed=1
    return 1
}
# check NAME WANT CMD..: runs CMD, for WANT seconds at most (less near the
# deadline), with its output in NAME.log, and notes the status
check() {
    local name=$1 t0=$SECONDS rc
    gate "$name" "$2" || return 1
    shift 2
    timeout "$lim" "$@" >"$out/$name.log" 2>&1
    rc=$?
    if [ $rc -eq 124 ]; then
        note "$name: TIMEOUT after $lim s"
    else
        note "$name: exit $rc ($((SECONDS - t0)) s)"
    fi
    [ $rc -eq 0 ] || failed=1
    return $rc
}

# The unpacked libraries, for the compiler, the linker and the programs.
root=$PWD/$deps/root
ma=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
export CPATH=$root/usr/include${CPATH:+:$CPATH}
export LIBRARY_PATH=$root/usr/lib/$ma:$root/usr/lib${LIBRARY_PATH:+:$LIBRARY_PATH}
export LD_LIBRARY_PATH=$root/usr/lib/$ma:$root/usr/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PKG_CONFIG_PATH=$root/usr/lib/$ma/pkgconfig:$root/usr/share/pkgconfig
export GKVT_BUILD=$PWD/build-gpu
# here a missing device (a driver older than the toolkit, say) fails the
# GPU tests and the bench instead of skipping them
export GKV_REQUIRE_GPU=1
jobs=$(nproc 2>/dev/null || echo 4)

for step in "${steps[@]}"; do
    case $step in
    build)
        if ! ls "$deps"/*.deb >/dev/null 2>&1; then
            note "build: no .deb files in $deps (run 'tools/gpu-remote.sh fetch' here and carry $deps)"
            failed=1
            continue
        fi
        mkdir -p "$root"
        for f in "$deps"/*.deb; do dpkg-deb -x "$f" "$root" || failed=1; done
        nvidia-smi >"$out/nvidia-smi.txt" 2>&1
        note "device: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)"
        note "nvcc: $(nvcc --version 2>/dev/null | tail -1)"
        # without the emulated-GPU tests (they need no GPU, and a g++
        # missing there must not cost the GPU run)
        check build 600 make -j"$jobs" CUDA=yes BUILD=build-gpu EMU_TESTS= \
            EMU_TOOLS= all build-tests || break
        ;;
    test)
        # a hung kernel must not take the whole call
        check gpu_test 180 build-gpu/test/gpu_test
        check net_graph_test 180 build-gpu/test/net_graph_test
        grep -h "SKIPPED\|skipped" "$out/gpu_test.log" "$out/net_graph_test.log" 2>/dev/null |
            sed 's/^/  /' | tee -a "$sum"
        ;;
    alltests)
        check all_tests 600 test/run.sh build-gpu/test/*_test
        tail -1 "$out/all_tests.log" | sed 's/^/  /' | tee -a "$sum"
        ;;
    sanitize)
        # memcheck first (the one that matters most), over both programs;
        # each tool slows a test many times: 280 s each at most, and
        # running out is said as such
        for tt in memcheck:gpu_test memcheck:net_graph_test \
                  initcheck:gpu_test racecheck:gpu_test synccheck:gpu_test; do
            tool=${tt%%:*} t=${tt#*:} log=$out/$tool-$t.log
            gate "$tool-$t" 280 || continue
            timeout "$lim" compute-sanitizer --tool "$tool" \
                --error-exitcode 99 "build-gpu/test/$t" >"$log" 2>&1
            rc=$?
            if [ $rc -eq 0 ]; then
                note "$tool-$t: ok"
            elif [ $rc -eq 124 ]; then
                note "$tool-$t: TIMEOUT after $lim s (not a sanitizer finding; run it alone)"
                failed=1
            elif grep -q "Device not supported\|device not supported" "$log"; then
                note "$tool-$t: SKIPPED (this runtime refuses compute-sanitizer: not a code result)"
            else
                note "$tool-$t: FAILED (see $tool-$t.log)"
                failed=1
            fi
            grep -h "ERROR SUMMARY" "$log" | sed 's/^/  /' | tee -a "$sum"
        done
        ;;
    bench)
        # shellcheck disable=SC2086
        check bench-gpu 300 build-gpu/gkv-bench-gpu ${BENCH_GPU_ARGS:-}
        grep -h "^RESULT" "$out/bench-gpu.log" | sed 's/^/  /' | tee -a "$sum"
        ;;
    esac
done
exit $failed
