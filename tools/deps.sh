#!/usr/bin/env bash
# Installs gkv's Debian build and test dependencies when any is missing
# (iproute2 and procps: the multi-host tests and the demo use ip, ss, pgrep;
# strace: a test kills gkv-partition at chosen system calls):
# with apt-get when run as root, otherwise prints the exact command. When
# every package is there it prints nothing and runs no apt-get; when it
# installs, apt-get waits up to 600 s for another package manager's lock.
# Usage: tools/deps.sh [--bench | --fuzz | --coverage | --check]
#   --bench, --fuzz, --coverage: what `make bench` / `make fuzz` /
#   `make coverage` need on top (redis-server; clang with libFuzzer; gcovr)
#   --check: only what `make` needs to build; installs nothing, and when a
#   package is missing says to run `make deps` (what `make` runs first)
set -u
build_pkgs=(build-essential pkg-config liblmdb-dev libnanomsg-dev
            libxxhash-dev libjansson-dev libmetis-dev libsodium-dev
            libhiredis-dev)
pkgs=("${build_pkgs[@]}" lmdb-utils libcmocka-dev iproute2 procps strace
      python3 python3-dev python3-venv)
case "${1:-}" in
--bench) pkgs+=(redis-server) ;;
--fuzz) pkgs+=(clang libclang-rt-14-dev) ;;
--coverage) pkgs+=(gcovr) ;;
--check)
    # not Debian: nothing to check with, the compiler will say
    command -v dpkg-query >/dev/null || exit 0
    pkgs=("${build_pkgs[@]}") ;;
esac
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
        missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
lock=600
cmd="apt-get install -y --no-install-recommends ${missing[*]}"
if [ "${1:-}" = "--check" ]; then
    echo "gkv: cannot build, missing packages: ${missing[*]}" >&2
    echo "gkv: run 'make deps' as root (apt-get update && $cmd), then make" >&2
    exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "gkv: missing packages: ${missing[*]}" >&2
    echo "gkv: run as root:  apt-get update && $cmd" >&2
    exit 1
fi
echo "gkv: installing ${missing[*]} (waiting up to ${lock} s for another package manager's lock)" >&2
export DEBIAN_FRONTEND=noninteractive
# apt-get install waits for dpkg's lock (DPkg::Lock::Timeout); apt-get
# update does not wait for its lists lock (apt 2.6), so it is retried
update() {
    local end=$((SECONDS + lock)) err
    while ! err=$(apt-get -o "DPkg::Lock::Timeout=$lock" update -qq 2>&1); do
        case "$err" in
        *"Could not get lock"*) [ $SECONDS -lt $end ] && sleep 5 && continue ;;
        esac
        printf '%s\n' "$err" >&2
        return 1
    done
}
update && apt-get -o "DPkg::Lock::Timeout=$lock" install -y -qq \
    --no-install-recommends "${missing[@]}" >&2 || {
    echo "gkv: apt-get failed; install by hand: $cmd" >&2
    exit 1
}
