#!/usr/bin/env bash
# bench/trainer.sh - the example trainer's whole data path (issue 24): each
# batch's blocks, its input nodes' 128-wide f32 feature rows, and an Adagrad
# push of those rows' gradients to a 16-wide embedding held in write-back
# on the servers, in batches/s, against an older build in the same run.
#
#   1. an R-MAT graph (SCALE, edge factor 16) with 128-wide f32 features, an
#      i64 label per node and a training mask (a fifth of the nodes),
#      partitioned (random) into 1 and into 2 parts;
#   2. for each job shape (1 partition, 1 server, 1 trainer; 1 partition,
#      1 server, 2 trainers; 2 partitions on 2 loopback "machines", a server
#      and a trainer each), ROUNDS rounds, each running the old build's
#      trainer and then this build's (alternating, on fresh servers), every
#      server started with --writeback node/_N/emb --flush-ms FLUSH_MS;
#   3. one RESULT line per run and, per shape, the medians and their ratio.
#
# Run by hand (not part of make test):
#   bench/trainer.sh                 # this build only
#   OLD_BUILD=../old/build bench/trainer.sh
# Env: BUILD (default build), OLD_BUILD (a build of the old trainer, e.g.
# main at 2efcac1; unset: this build only), SCALE (20), BATCHES per run
# (--max-batches, 150), ROUNDS (2), FLUSH_MS (1000: the loss window, see
# doc/DEPLOY.md), FANOUTS (10,15, DGL's order: input layer first), SHAPES
# (default "1x1 1x2 2x1": partitions x trainers per machine), NEW_ARGS
# (extra trainer options for this build, e.g. "--sample-on client"),
# BENCH_TMP (scratch directory, default tmp/), PORT (first port, 32100).
# Exit status: 0, 1 when a run failed, 2 on bad usage.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${BUILD:-build}
OLD=${OLD_BUILD:-}
SCALE=${SCALE:-20}
BATCHES=${BATCHES:-150}
ROUNDS=${ROUNDS:-2}
FLUSH_MS=${FLUSH_MS:-1000}
FANOUTS=${FANOUTS:-10,15}
SHAPES=${SHAPES:-"1x1 1x2 2x1"}
PORT=${PORT:-32100}
W=${BENCH_TMP:-tmp}/bench-trainer
for v in SCALE BATCHES ROUNDS FLUSH_MS PORT; do
    case ${!v} in ''|*[!0-9]*) echo "trainer.sh: $v '${!v}' is not a number" >&2; exit 2;; esac
done
for b in "$B" ${OLD:+"$OLD"}; do
    for t in kvctl gkv-partition gkv-launch gkv-server gkv-example-train; do
        [ -x "$b/$t" ] || { echo "trainer.sh: $b/$t is not built" >&2; exit 1; }
    done
done
mkdir -p "$W"
N=$((1 << SCALE))

# ---- 1. the graph, once per scale (kept in $W between runs) -------------
G=$W/s$SCALE
if [ ! -f "$G/done" ]; then
    rm -rf "$G"
    mkdir -p "$G"
    echo "generating R-MAT scale $SCALE with 128-wide f32 features, labels and a training mask in $G" >&2
    $B/kvctl "$G/src" create feat --dtype f32 --shape 128 --range 0:$N \
        --init normal:0,1 --seed 1 >/dev/null
    $B/kvctl "$G/src" export feat "$G/feat.npy"
    $B/kvctl "$G/src" create label --dtype i64 --range 0:$N \
        --init uniform:0,47 --seed 3 >/dev/null
    $B/kvctl "$G/src" export label "$G/label.npy"
    $B/kvctl "$G/src" create train_mask --dtype u8 --range 0:$N \
        --init uniform:0,1.25 --seed 2 >/dev/null
    $B/kvctl "$G/src" export train_mask "$G/train_mask.npy"
    rm -rf "$G/src"
    for p in 1 2; do
        $B/gkv-partition --rmat "$SCALE" --parts $p --method random --csr \
            --node-feat feat="$G/feat.npy" --node-feat label="$G/label.npy" \
            --node-feat train_mask="$G/train_mask.npy" \
            --name bench "$G/p$p" >/dev/null
    done
    rm -f "$G/feat.npy" "$G/label.npy" "$G/train_mask.npy"
    touch "$G/done"
fi

# ---- 2. the runs ---------------------------------------------------------
# one run: build, parts, trainers per machine -> batches/s (the trainers'
# sum), and the new trainer's push and loader waits on stderr
run_one() {
    local b=$1 parts=$2 nt=$3 tag=$4 ws ipc extra=()
    ws=$W/run.$tag
    rm -rf "$ws"
    mkdir -p "$ws"
    # a fresh copy of the partitions: the embedding a run leaves stays out
    # of the next
    cp -r "$G/p$parts" "$ws/graph"
    ipc=$ws/ip.txt
    : > "$ipc"
    for ((m = 0; m < parts; m++)); do
        echo "127.0.0.1 $((PORT + 10 * m))" >> "$ipc"
    done
    PORT=$((PORT + 40))
    [ "$b" = "$B" ] && [ -n "${NEW_ARGS:-}" ] && read -r -a extra <<<"$NEW_ARGS"
    if ! $b/gkv-launch --ip-config "$ipc" --part-config "$ws/graph/bench.json" \
            --num-servers 1 --num-trainers "$nt" \
            --server-arg --writeback --server-arg node/_N/emb \
            --server-arg --flush-ms --server-arg "$FLUSH_MS" \
            --workspace "$ws/job" \
            -- $b/gkv-example-train --epochs 1 --max-batches "$BATCHES" \
               --fanouts "$FANOUTS" "${extra[@]}" >"$ws/launch.log" 2>&1; then
        echo "trainer.sh: run $tag failed:" >&2
        tail -5 "$ws/launch.log" >&2
        tail -5 "$ws"/job/logs/*.log >&2 || true
        return 1
    fi
    # the job's rate: the sum over trainers of each one's batches/s
    cat "$ws"/job/logs/trainer-*.log | sed -n 's/.* epoch 0: .* s: \([0-9.]*\) batches\/s.*/\1/p' \
        | awk '{s += $1} END {if (NR == 0) exit 1; printf "%.2f\n", s}'
    grep -h " epoch 0: " "$ws"/job/logs/trainer-*.log | sed 's/^/    /' >&2
    rm -rf "$ws/graph"
}

median() { sort -g | awk '{a[NR] = $1} END {if (NR % 2) print a[(NR + 1) / 2]; else printf "%.2f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

status=0
printf '\nTrainer data path: R-MAT scale %s, 128-wide f32 features, fanouts %s, 1,024 seeds a batch,\n' "$SCALE" "$FANOUTS"
printf 'Adagrad push of the input rows to a 16-wide embedding in write-back (--flush-ms %s); %s batches a run\n' "$FLUSH_MS" "$BATCHES"
printf 'machine: %s, %s CPUs\n' "$(uname -m)" "$(nproc)"
for shape in $SHAPES; do
    parts=${shape%x*}
    nt=${shape#*x}
    old_r=() new_r=()
    for ((r = 1; r <= ROUNDS; r++)); do
        for which in old new; do
            [ "$which" = old ] && [ -z "$OLD" ] && continue
            b=$B
            [ "$which" = old ] && b=$OLD
            echo "  $shape round $r: $which ($b)" >&2
            if ! x=$(run_one "$b" "$parts" "$nt" "$which.$shape.$r"); then
                status=1
                continue
            fi
            echo "RESULT trainer_path build=$which parts=$parts servers=$parts trainers=$((parts * nt)) round=$r batches_per_s=$x flush_ms=$FLUSH_MS scale=$SCALE"
            if [ "$which" = old ]; then old_r+=("$x"); else new_r+=("$x"); fi
        done
    done
    nm=$(printf '%s\n' "${new_r[@]:-}" | grep . | median || true)
    if [ -n "$OLD" ]; then
        om=$(printf '%s\n' "${old_r[@]:-}" | grep . | median || true)
        ratio=$(awk -v a="$nm" -v b="$om" 'BEGIN{if (b > 0) printf "%.2f", a / b; else print "-"}')
        printf '%s partition(s), %s trainer(s): new %s batches/s, old %s batches/s: %sx\n' \
            "$parts" "$((parts * nt))" "${nm:--}" "${om:--}" "$ratio"
    else
        printf '%s partition(s), %s trainer(s): %s batches/s\n' "$parts" "$((parts * nt))" "${nm:--}"
    fi
done
exit $status
