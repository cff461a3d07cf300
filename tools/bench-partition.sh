#!/usr/bin/env bash
# bench-partition.sh - the partitioning benchmark of `make bench`.
#
# Runs build/gkv-partition on a Graph500 R-MAT graph (edge factor 16) into
# 4 parts with each method and prints one RESULT line per run: seconds,
# edges/s and peak RSS, the last as a ratio to the raw edge list (16 bytes
# per edge: two int64 IDs), the yardstick of issue 3 (target: < 3x for
# random and range).
#
# usage: tools/bench-partition.sh [SCALE [METHOD...]]
#   SCALE     R-MAT scale (default 22: 67 M edges)
#   METHOD    random, range, metis (default: random range)
# Env: BUILD (default build), BENCH_TMP (scratch directory, default tmp/),
#   DGL_PYTHON (a python with dgl and torch, e.g. the project's venv:
#   `make -s python-venv` names it): when set and metis is among the
#   methods, bench/dgl_metis.py then measures DGL's METIS on the same edges
#   beside gkv's (target: gkv >= 2x DGL's speed, no more memory, a cut at
#   most 5 % larger; issue 27). Unset, or without dgl: a SKIP line.
# Exit status: 0, 1 when a run failed, 2 on bad usage.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
SCALE=${1:-22}
shift || true
METHODS=("$@")
[ ${#METHODS[@]} -gt 0 ] || METHODS=(random range)
case $SCALE in ''|*[!0-9]*) echo "bench-partition: scale '$SCALE' is not a number" >&2; exit 2;; esac
for m in "${METHODS[@]}"; do
    case $m in random|range|metis) ;; *) echo "bench-partition: unknown method '$m' (random, range, metis)" >&2; exit 2;; esac
done
TOOL=$BUILD/gkv-partition
[ -x "$TOOL" ] || { echo "bench-partition: $TOOL is not built (make all)" >&2; exit 1; }
SCRATCH=${BENCH_TMP:-tmp}/bench-partition.$$
mkdir -p "$SCRATCH"
trap 'rm -rf "$SCRATCH"' EXIT

status=0
printf '\nPartitioning R-MAT scale %s (edge factor 16) into 4 parts\n' "$SCALE"
printf '%-7s %9s %12s %12s %10s %9s\n' method seconds "M edges/s" "peak RSS" "x edges" edge_cut
for m in "${METHODS[@]}"; do
    out=$SCRATCH/$m
    if ! line=$("$TOOL" --rmat "$SCALE" --parts 4 --method "$m" --stats \
                "$out" 2>"$SCRATCH/$m.err"); then
        echo "bench-partition: $m failed:" >&2
        tail -5 "$SCRATCH/$m.err" >&2
        status=1
        continue
    fi
    rm -rf "$out"
    # stats: method=.. parts=.. nodes=.. edges=.. edge_cut=.. seconds=..
    #        ... edges_per_s=.. bytes_written=.. peak_rss_bytes=..
    get() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $line"; }
    edges=$(get edges); secs=$(get seconds); eps=$(get edges_per_s)
    rss=$(get peak_rss_bytes); cut=$(get edge_cut)
    ratio=$(awk -v r="$rss" -v e="$edges" 'BEGIN{printf "%.2f", r / (16 * e)}')
    echo "RESULT graph_partition scale=$SCALE parts=4 method=$m edges=$edges" \
         "seconds=$secs edges_per_s=$eps peak_rss_bytes=$rss" \
         "edge_list_bytes=$((16 * edges)) rss_ratio=$ratio edge_cut=$cut"
    printf '%-7s %9.2f %12.2f %9.2f GiB %9sx %9s\n' "$m" "$secs" \
        "$(awk -v x="$eps" 'BEGIN{print x / 1e6}')" \
        "$(awk -v x="$rss" 'BEGIN{print x / 2^30}')" "$ratio" "$cut"
done
echo "(peak RSS as a multiple of the raw edge list, 16 bytes per edge; target < 3x for random and range)"
if [[ " ${METHODS[*]} " == *" metis "* ]]; then
    if [ -n "${DGL_PYTHON:-}" ] && "$DGL_PYTHON" -c 'import dgl' 2>/dev/null; then
        "$DGL_PYTHON" bench/dgl_metis.py --build "$BUILD" --scale "$SCALE" \
            --dir "$SCRATCH" 2>"$SCRATCH/dgl.err" || {
            echo "bench-partition: bench/dgl_metis.py failed:" >&2
            tail -5 "$SCRATCH/dgl.err" >&2
            status=1
        }
    else
        echo "SKIP metis_vs_dgl: no DGL_PYTHON with dgl (the venv: make -s python-venv)"
    fi
fi
exit $status
