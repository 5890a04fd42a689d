"""Compile time of graph texts, to compare two builds of the C++ core on the same graphs.

    python tests/tools/time_compile.py CORPUS [--pattern 'backend_*'] [--repeat 51] [--cold 5]

CORPUS is a directory of <name>.graph files with <name>.json CPU options, as
tests/tools/dump_generated.py collects them (its `backend_*` graphs are the built-in
examples and a tiny BERT as ember's CPU backend compiles them). For each graph:

  pipeline   the fastest of --repeat runs of _core.compile(build=False): the C++ pipeline
             alone, parse to memory plan (what a refactor of csrc/ can change; the fastest
             run is the one least disturbed by other work on the machine);
  cold       the median over --cold runs, each in a fresh process (empty in-process caches)
             and without the disk cache, of _core.compile(): the pipeline, the C compiler
             and the load.

Run it once per build, on an otherwise idle machine. An editable install's import hook
wins over PYTHONPATH: to time another build, run Python without site (-S) with that
build's python/ directory (ember with its _core module) and site-packages on PYTHONPATH.
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import time


def _options(path: str) -> dict:
    options_path = path[:-len(".graph")] + ".json"
    options = json.load(open(options_path)) if os.path.exists(options_path) else {}
    return {k: v for k, v in options.items() if k in ("fuse", "pad_matmuls", "emulate_precision_casts",
                                                        "channels_last_activations")}


def _pipeline_seconds(text: str, options: dict, repeat: int) -> float:
    from ember import _core

    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        _core.compile(text, disk_cache=False, build=False, **options)
        runs.append(time.perf_counter() - t0)
    return min(runs)


_COLD = """
import json, sys, time
from ember import _core
text = open(sys.argv[1]).read()
options = json.loads(sys.argv[2])
t0 = time.perf_counter()
_core.compile(text, disk_cache=False, **options)
print(time.perf_counter() - t0)
"""


def _cold_seconds(path: str, options: dict, runs: int) -> float:
    out = []
    for _ in range(runs):
        python = [sys.executable] + (["-S"] if sys.flags.no_site else [])
        r = subprocess.run(python + ["-c", _COLD, path, json.dumps(options)], capture_output=True, text=True,
                           check=True)
        out.append(float(r.stdout.strip().splitlines()[-1]))
    return statistics.median(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus")
    parser.add_argument("--pattern", default="backend_*")
    parser.add_argument("--repeat", type=int, default=51)
    parser.add_argument("--cold", type=int, default=5)
    args = parser.parse_args()
    import ember

    print(f"ember from {os.path.dirname(ember.__file__)}")
    total_pipeline = total_cold = 0.0
    for path in sorted(glob.glob(os.path.join(args.corpus, args.pattern + ".graph"))):
        text = open(path).read()
        options = _options(path)
        pipeline = _pipeline_seconds(text, options, args.repeat)
        cold = _cold_seconds(path, options, args.cold) if args.cold else 0.0
        total_pipeline += pipeline
        total_cold += cold
        print(f"{os.path.basename(path):40s} pipeline {pipeline * 1e3:8.2f} ms   cold {cold:7.3f} s")
    print(f"{'total':40s} pipeline {total_pipeline * 1e3:8.2f} ms   cold {total_cold:7.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
