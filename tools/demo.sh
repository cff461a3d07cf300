#!/usr/bin/env bash
# make demo: the main job end to end on this machine.
#
#   1. generate an R-MAT graph with node features and a training mask, and
#      partition it in 2;
#   2. launch a persistent pair of graph servers (one per partition, two
#      "machines" on loopback), the embedding in write-back mode on them,
#      and 2 trainers running the example trainer (node_split of the
#      graph's training mask; mini-batches from gkv_loader, each sampled
#      and gathered on the servers in one request, made ahead by worker
#      threads; Adagrad pushes to the embedding overlapped with the next
#      batch);
#   3. run a second job against the same running servers: it sees the
#      embedding the first job left;
#   4. show the running servers' tensors with kvctl --server;
#   5. shut the servers down and print a summary;
#   6. train GraphSAGE with PyTorch Geometric through gkv (gkv.pyg) on a
#      planted-community graph, to >= 0.9 test accuracy (installs the
#      Python environment the first time: torch from PyPI, ~3.3 GB).
#
# Everything lives under tmp/demo. DEMO_SCALE sets the graph
# size (default 18), DEMO_PORT the first port (default: a free one from 31050 up),
# DEMO_FLUSH_MS the write-back interval (default 100), DEMO_SAMPLE_ON where
# the loader samples (server or client: the trainers' --sample-on; default
# server), DEMO_GS_NODES the GraphSAGE graph's nodes (default 10000), BUILD the
# build directory (default build; make demo BUILD=DIR passes it).
set -euo pipefail
cd "$(dirname "$0")/.."
B=${BUILD:-build}
D=tmp/demo
SCALE=${DEMO_SCALE:-18}
FLUSH_MS=${DEMO_FLUSH_MS:-100}
SAMPLE_ON=${DEMO_SAMPLE_ON:-server}
t_start=$(date +%s)
step() { printf '\n== %s\n' "$*"; }
run() { printf '$ %s\n' "$*"; "$@"; }

port_busy() { ss -Hltn "sport = :$1" 2>/dev/null | grep -q .; }
pick_port() {
    local p=${DEMO_PORT:-31050}
    while port_busy "$p" || port_busy $((p + 10)); do p=$((p + 20)); done
    echo "$p"
}

rm -rf "$D"
mkdir -p "$D"
PORT=$(pick_port)
IPC=$D/ip.txt
TOKEN=$D/token
printf '# the demo job: two machines, both on this host\n127.0.0.1 %d\n127.0.0.1 %d\n' \
    "$PORT" $((PORT + 10)) > "$IPC"
umask 077
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$TOKEN"
umask 022

servers_up=0
stop_servers() {
    if [ "$servers_up" = 1 ]; then
        $B/gkv-launch --ip-config "$IPC" --num-servers 1 --token-file "$TOKEN" \
            --shutdown >/dev/null 2>&1 || true
        servers_up=0
    fi
}
trap 'stop_servers' EXIT
trap 'exit 130' INT TERM

step "1. an R-MAT graph (scale $SCALE) with 32-wide node features and a training mask, in 2 partitions (METIS)"
run $B/kvctl $D/featsrc create feat --dtype f32 --shape 32 \
    --range 0:$((1 << SCALE)) --init normal:0,1 --seed 1 >/dev/null
run $B/kvctl $D/featsrc export feat $D/feat.npy
# the training mask, DGL's g.ndata['train_mask']: u8 rounds uniform values
# down, so [0, 1.25) makes a fifth of the nodes 1 (training nodes)
run $B/kvctl $D/featsrc create train_mask --dtype u8 \
    --range 0:$((1 << SCALE)) --init uniform:0,1.25 --seed 2 >/dev/null
run $B/kvctl $D/featsrc export train_mask $D/train_mask.npy
# stored as node/_N/train_mask in each partition (the trainers split it),
# and METIS balances the training nodes between the partitions
run $B/gkv-partition --rmat "$SCALE" --parts 2 --method metis --csr \
    --node-feat feat=$D/feat.npy --node-feat train_mask=$D/train_mask.npy \
    --train-mask $D/train_mask.npy --name demo $D/graph

step "2. job 1: persistent servers 'demo' (one per partition) and 2 trainers"
# The embedding node/_N/emb (and its Adagrad state) in write-back mode on
# the servers: a push changes their RAM copies at memory speed, and a
# flusher writes the changed rows to the stores every FLUSH_MS in one
# durable transaction. Pushed straight into the store instead, each
# batch's push of ~20,000 rows rewrites most of the embedding's chunks and
# is most of the batch's time.
EMB_MODE="write-back on the servers (gkv-server --writeback node/_N/emb --flush-ms $FLUSH_MS): pushes land in the servers' RAM and reach their stores every $FLUSH_MS ms, each flush one durable (fsync'd) transaction; a crash of a server (process or OS) loses at most the pushes of the last $FLUSH_MS ms plus one flush; a normal stop (SIGTERM, --shutdown) writes them all"
printf 'embedding: %s\n' "$EMB_MODE"
cat "$IPC"
servers_up=1
run $B/gkv-launch --ip-config "$IPC" --part-config $D/graph/demo.json \
    --num-servers 1 --num-trainers 1 --keep-alive --server-name demo \
    --server-arg --writeback --server-arg node/_N/emb \
    --server-arg --flush-ms --server-arg "$FLUSH_MS" \
    --token-file "$TOKEN" --workspace $D/job1 \
    -- $B/gkv-example-train --epochs 3 --sample-on "$SAMPLE_ON"
for f in $D/job1/logs/trainer-*.log; do sed 's/^/  /' "$f"; done

step "3. job 2: the same servers (still running), a new group, one epoch"
run $B/gkv-launch --ip-config "$IPC" --part-config $D/graph/demo.json \
    --num-servers 1 --num-trainers 1 --keep-alive --server-name demo \
    --token-file "$TOKEN" --workspace $D/job2 \
    -- $B/gkv-example-train --epochs 1 --sample-on "$SAMPLE_ON"
for f in $D/job2/logs/trainer-*.log; do sed 's/^/  /' "$f"; done

step "4. the running servers, seen with kvctl --server"
K="$B/kvctl --server 127.0.0.1:$PORT --token-file $TOKEN"
run $K ls
run $K info node/_N/emb
run $K get node/_N/emb 0:3
run $K stat

step "5. shut the servers down"
run $B/gkv-launch --ip-config "$IPC" --num-servers 1 --token-file "$TOKEN" --shutdown
servers_up=0

step "summary"
printf 'graph: R-MAT scale %s in 2 partitions (%s)\n' "$SCALE" "$D/graph"
printf 'embedding: %s\n' "$EMB_MODE"
sed -n 's/^rank 0: batches from /batches: /p' $D/job1/logs/trainer-0-0.log
sed -n 's/^rank 0: training mask: /training mask: /p' $D/job1/logs/trainer-0-0.log
grep -h "training nodes of" $D/job1/logs/trainer-*.log | sed 's/;.*//; s/^/job1: /'
for j in job1 job2; do
    grep -h " epoch " $D/$j/logs/trainer-*.log | sed "s/; a batch waited.*//; s/^/$j: /"
done
first=$(sed -n 's/.*mean |x| \([0-9.]*\) at the start/\1/p' $D/job1/logs/trainer-0-0.log)
left=$(sed -n 's/.*mean |x| \([0-9.]*\) at the end/\1/p' $D/job1/logs/trainer-0-0.log)
found=$(sed -n 's/.*mean |x| \([0-9.]*\) at the start/\1/p' $D/job2/logs/trainer-0-0.log)
printf 'embedding (rank 0 sample): job 1 started at mean |x| %s and left %s; job 2 found %s\n' \
    "$first" "$left" "$found"
if [ -z "$left" ] || [ "$left" != "$found" ]; then
    echo "demo: job 2 did not find the embedding job 1 left" >&2
    exit 1
fi
printf 'demo: done in %d s; logs in %s/job1/logs and %s/job2/logs\n' \
    $(( $(date +%s) - t_start )) "$D" "$D"

step "6. a model learning through gkv: GraphSAGE with PyTorch Geometric (examples/graphsage_pyg.py)"
# make python installs the Python package and, the first time, its virtual
# environment: numpy, pytest, torch 2.2.1 with its CUDA wheels,
# torch_geometric and dgl from PyPI (about 3.3 GB, kept in ~/.cache; README.md,
# "Python"); later runs download nothing.
run make --no-print-directory python BUILD="$B"
PY=$(make --no-print-directory -s python-venv)/bin/python
run env BUILD="$B" "$PY" examples/graphsage_pyg.py --dir $D/graphsage \
    --nodes "${DEMO_GS_NODES:-10000}"
step "7. the same model as a DGL script (gkv.dgl, DGL's SAGEConv on its blocks; examples/graphsage_dgl.py)"
run env BUILD="$B" "$PY" examples/graphsage_dgl.py --dir $D/graphsage-dgl \
    --nodes "${DEMO_GS_NODES:-10000}"
printf 'demo: GraphSAGE learned through gkv; all done in %d s\n' $(( $(date +%s) - t_start ))
