#!/usr/bin/env bash
# Installs gkv's Debian build and test dependencies when any is missing
# (iproute2 and procps: the multi-host tests and the demo use ip, ss, pgrep;
# strace: a test kills gkv-partition at chosen system calls):
# with apt-get when run as root, otherwise prints the exact command.
# Usage: tools/deps.sh [--bench | --fuzz]   (what `make bench` / `make fuzz`
# need on top: redis-server; clang with libFuzzer)
set -u
pkgs=(build-essential pkg-config liblmdb-dev lmdb-utils libnanomsg-dev
      libxxhash-dev libjansson-dev libcmocka-dev libmetis-dev libsodium-dev
      libhiredis-dev iproute2 procps strace)
[ "${1:-}" = "--bench" ] && pkgs+=(redis-server)
[ "${1:-}" = "--fuzz" ] && pkgs+=(clang libclang-rt-14-dev)
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
        missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
cmd="apt-get install -y --no-install-recommends ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
    echo "gkv: missing packages: ${missing[*]}" >&2
    echo "gkv: run as root:  apt-get update && $cmd" >&2
    exit 1
fi
echo "gkv: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2 && apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2 || {
    echo "gkv: apt-get failed; install by hand: $cmd" >&2
    exit 1
}
