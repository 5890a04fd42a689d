#!/usr/bin/env bash
# The CPU suite (issue 24) on a many-core host: the shards run side by side, shard K pinned to
# its own pair of cores (2K-2, 2K-1 counted from FIRST_CPU), at 1 thread on the first of them
# and 2 threads on both. Every child process (Inductor's compile workers too) inherits its
# shard's pinning, so each shard sees a 2-core machine like the one the issue measured.
#   SLOTS=24 SECONDS_TOTAL=540 bash benchmarks/suite/cpu_shards.sh OUT_DIR [run.py arguments]
# With stored eager/Inductor rows (benchmarks/suite/refs/), pass --shard-by-work: the shards
# are then balanced by the processes left to run, not by the models' weights.
# Writes OUT_DIR/cpu-suite.jsonl (every shard's rows) and OUT_DIR/cpu-logs.tar.gz (the shards'
# logs). Memory bandwidth and the last-level cache are shared between slots: say so beside
# the figures.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$1
shift
mkdir -p "$out"
work=$(mktemp -d)
t0=$(date +%s)
slots=${SLOTS:-$(( $(nproc) / 2 - 2 ))}
first=${FIRST_CPU:-2}
pids=()
for k in $(seq 1 "$slots"); do
  a=$(( first + 2 * (k - 1) ))
  (
    left=$(( ${SECONDS_TOTAL:-540} - ($(date +%s) - t0) ))
    python3 benchmarks/suite/run.py --device cpu --shard "$k/$slots" --threads 1,2 --cpus "$a,$((a + 1))" \
      --budget "$left" "$@" --out "$work/c$k.jsonl" > "$work/c$k.log" 2>&1
  ) &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || true; done
cat "$work"/c*.jsonl > "$out/cpu-suite.jsonl" 2>/dev/null || true
tar -czf "$out/cpu-logs.tar.gz" -C "$work" $(cd "$work" && ls c*.log)
echo "all $slots CPU shards done in $(( $(date +%s) - t0 )) s"
