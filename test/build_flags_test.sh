#!/usr/bin/env bash
# Checks that the Makefile rebuilds when the flags change: after `make`,
# `make SAN=...` must remake every object and relink the tools and tests
# (each then holds the sanitizer runtime's symbols), and a second
# `make SAN=...` must remake nothing. Two full builds: a few minutes, so it
# is run by hand, not by `make test`:
#   test/build_flags_test.sh        (BUILD=build-flags-test, SAN=address,undefined)
# BUILD=build reuses (and leaves sanitized) the usual build directory.
set -u
cd "$(dirname "$0")/.."
b=${BUILD:-build-flags-test} san=${SAN:-address,undefined} jobs=${JOBS:-2}
progs=("$b/kvctl" "$b/gkv-server" "$b/test/kv_store_test")
command -v nvcc >/dev/null && [ "${CUDA:-auto}" != no ] &&
    progs+=("$b/test/gpu_emu_test")
fails=0
fail() { echo "build_flags_test: FAIL: $*"; fails=$((fails + 1)); }
build() { make --no-print-directory -j"$jobs" BUILD="$b" "$@" all "${progs[@]}"; }
asan() { nm "$1" 2>/dev/null | grep -q '__asan_init'; }

build SAN= >/dev/null || { echo "build_flags_test: FAIL: make"; exit 1; }
for p in "${progs[@]}"; do asan "$p" && fail "$p has ASan before SAN= was set"; done
stamp=$b/.flags-test-stamp
touch "$stamp"
sleep 1

echo "build_flags_test: make SAN=$san (everything must be rebuilt)"
build SAN="$san" >/dev/null || { echo "build_flags_test: FAIL: make SAN=$san"; exit 1; }
old=$(find "$b" -name '*.o' ! -newer "$stamp")
[ -z "$old" ] && echo "build_flags_test: $(find "$b" -name '*.o' | wc -l) objects rebuilt" ||
    fail "objects not rebuilt with SAN=$san:" $old
for p in "${progs[@]}"; do
    [ "$p" -nt "$stamp" ] || fail "$p not relinked"
    asan "$p" || fail "$p has no __asan_init"
done

touch "$stamp"
sleep 1
echo "build_flags_test: make SAN=$san again (nothing must be rebuilt)"
out=$(build SAN="$san" 2>&1) || fail "second make SAN=$san: $out"
newer=$(find "$b" -type f -newer "$stamp")
[ -z "$newer" ] || fail "second make SAN=$san remade:" $newer
grep -q '^  \(CC\|CXX\|NVCC\|LINK\|AR\|LD\) ' <<<"$out" && fail "second make SAN=$san ran: $out"
# (gkv.pc.vars is remade on every run, to compare PREFIX)
uptodate() { make -q BUILD="$b" -o "$b/gkv.pc.vars" "$@" all "${progs[@]}"; }
uptodate SAN="$san" || fail "make -q SAN=$san says out of date"
uptodate SAN= && fail "make -q SAN= says up to date after a SAN=$san build"

rm -f "$stamp"
[ "$fails" -eq 0 ] && echo "build_flags_test: ok" && exit 0
echo "build_flags_test: $fails failed"
exit 1
