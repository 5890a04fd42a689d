#!/usr/bin/env bash
# On a GPU machine with several GPUs: builds ember once, then runs the suite's shards side by
# side, one per GPU (CUDA_VISIBLE_DEVICES), each a shard K/N of the same model list. Timings
# stay per GPU: one measuring process at a time on each card. Writes $OUT_DIR/sK.jsonl and
# $OUT_DIR/sK.log, then waits for all.
#   SECONDS_TOTAL=540 bash benchmarks/suite/device_shards.sh OUT_DIR [run.py arguments, e.g. --no-warm]
# Every shard's --budget ends SECONDS_TOTAL (default 540) after this script started, the build
# included. BEFORE_SHARD_1="command" runs that command on GPU 0 first (shard 1 then has less time).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$1
shift
mkdir -p "$out"
t0=$(date +%s)
if grep -qs "CMAKE_CXX_COMPILER:.*=" build/cp3*/CMakeCache.txt && \
   ! grep -qs "CMAKE_CXX_COMPILER:[A-Z]*=/usr/bin/g++" build/cp3*/CMakeCache.txt; then
  rm -rf build/cp3*
fi
CC=/usr/bin/gcc CXX=/usr/bin/g++ python3 -m pip install -q --no-build-isolation -e .
echo "ember built in $(( $(date +%s) - t0 )) s"
n=$(nvidia-smi -L | wc -l)
pids=()
for k in $(seq 1 "$n"); do
  (
    export CUDA_VISIBLE_DEVICES=$((k - 1))
    if [[ $k == 1 && -n "${BEFORE_SHARD_1:-}" ]]; then
      bash -c "$BEFORE_SHARD_1" > "$out/s1.log" 2>&1 || true
    fi
    left=$(( ${SECONDS_TOTAL:-540} - ($(date +%s) - t0) ))
    python3 benchmarks/suite/run.py --shard "$k/$n" --budget "$left" "$@" --out "$out/s$k.jsonl" >> "$out/s$k.log" 2>&1
  ) &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || true; done
echo "all shards done in $(( $(date +%s) - t0 )) s"
