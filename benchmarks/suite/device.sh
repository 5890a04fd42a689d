#!/usr/bin/env bash
# On the GPU machine: builds ember (scikit-build-core reuses build/ when an earlier call on
# the same machine left it: incremental), then runs the suite's runner with the arguments
# given, e.g.
#   bash benchmarks/suite/device.sh --shard 1/8 --budget 450 --out $OUT/s1.jsonl
# or, when the first argument is a Python script, that script with the rest:
#   bash benchmarks/suite/device.sh benchmarks/dynamic_llm.py --budget 480 --out $OUT/dyn.json
set -euo pipefail
cd "$(dirname "$0")/../.."
t0=$(date +%s)
# The image's default compiler (its CC/CXX) links libstdc++ statically: a second copy of
# the C++ runtime beside torch's crashes in iostreams. /usr/bin's GCC, whatever CC says;
# a build directory configured with another compiler is configured again.
if grep -qs "CMAKE_CXX_COMPILER:.*=" build/cp3*/CMakeCache.txt && \
   ! grep -qs "CMAKE_CXX_COMPILER:[A-Z]*=/usr/bin/g++" build/cp3*/CMakeCache.txt; then
  rm -rf build/cp3*
fi
CC=/usr/bin/gcc CXX=/usr/bin/g++ python3 -m pip install -q --no-build-isolation -e .
echo "ember built in $(( $(date +%s) - t0 )) s"
if [[ "${1:-}" == *.py ]]; then
  script=$1
  shift
  exec python3 "$script" "$@"
fi
exec python3 benchmarks/suite/run.py "$@"
