#!/usr/bin/env bash
# make demo: what gkv can do today, end to end, on the embedded store.
# (The graph job - partition, persistent server, sampling - joins this
# script with the launcher issue.)
set -euo pipefail
cd "$(dirname "$0")/.."
KVCTL=build/kvctl
STORE=tmp/demo/store
rm -rf tmp/demo
mkdir -p tmp/demo
step() { printf '\n== %s\n' "$*"; }
run() { printf '$ %s\n' "$*"; "$@"; }

step "create two tensors: node features (normal init) and HOT embeddings"
run $KVCTL $STORE create node/feat --dtype f32 --shape 16 --range 0:200000 \
    --init normal:0,1 --seed 1
run $KVCTL $STORE create node/emb --dtype f32 --shape 8 --range 0:200000 \
    --init uniform:-0.1,0.1 --seed 2 --hot

step "pull rows by ID (any order, duplicates allowed, ranges)"
run $KVCTL $STORE get node/emb 42,7,42,199998:200000

step "push: assign a row, then an Adagrad step on it (state kept in the store)"
run $KVCTL $STORE put node/emb 7 1,1,1,1,1,1,1,1
run $KVCTL $STORE put node/emb 7 0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5 --handler adagrad --lr 0.1
run $KVCTL $STORE get node/emb 7
run $KVCTL $STORE ls --all

step "export to NumPy .npy, import it back under another name, compare"
run $KVCTL $STORE export node/feat tmp/demo/feat.npy
run $KVCTL $STORE import node/feat_copy tmp/demo/feat.npy
run $KVCTL $STORE export node/feat_copy tmp/demo/feat_copy.npy
run cmp tmp/demo/feat.npy tmp/demo/feat_copy.npy && echo "identical"

step "bad input is refused and changes nothing"
printf '$ %s\n' "$KVCTL $STORE get node/emb 200000"
if $KVCTL $STORE get node/emb 200000; then
    echo "demo: an out-of-range ID was accepted" >&2
    exit 1
fi

step "verify every chunk's checksum, and show the store"
run $KVCTL $STORE verify
run $KVCTL $STORE info node/feat
run $KVCTL $STORE stat
run $KVCTL --json $STORE ls

printf '\ndemo: done; the store is in %s (remove with: rm -rf tmp/demo)\n' "$STORE"
