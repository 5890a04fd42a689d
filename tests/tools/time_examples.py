"""Cold compile time of ember's built-in examples (python/ember/examples.py), to compare
builds of ember side by side on one machine.

    python tests/tools/time_examples.py [--rounds 8] [--models mlp,ln_gelu,...] TREE [TREE ...]

A TREE is a python/ directory holding an ember package with its _core module
(scripts/build-commit prints one for a commit; scripts/compare-compile-time does both).
Rounds interleave the trees: in each round every tree runs once, in an order that rotates
from round to round, each in a fresh process (python -S with the tree first on the path)
with new, empty ember and torch cache directories. The process compiles each example in
turn as `ember demo` does (torch.compile(model, backend="ember") under no_grad) and times
its first call, which waits for the C compiler: per model the wall time and the CPU time
(the process's threads and its children, the C compiler). On a machine other work shares,
CPU time is the steadier figure; wall time counts what the C compiler's parallel units save.

Prints per tree and model the median over the rounds, each round's totals, and the ratio of
each tree's median total to the first tree's; --json writes every measurement.
"""
import argparse
import json
import os
import site
import statistics
import subprocess
import sys
import tempfile

MODELS = ["mlp", "ln_gelu", "tiny_gpt2", "small_cnn", "tiny_llama"]

_CHILD = r"""
import json, resource, sys, time
import torch
import ember
from ember import examples

def cpu():
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime

out = {"ember": ember.__file__}
for name in sys.argv[1].split(","):
    model, inputs = examples.MODELS[name]()
    torch._dynamo.reset()
    with torch.no_grad():
        compiled = torch.compile(model, backend="ember")
        t0, c0 = time.perf_counter(), cpu()
        compiled(*inputs)
        out[name] = {"wall": time.perf_counter() - t0, "cpu": cpu() - c0}
print(json.dumps(out))
"""


def run_once(tree: str, models: list[str]) -> dict:
    """One fresh process of `tree` compiling `models`: {model: {wall, cpu}}."""
    with tempfile.TemporaryDirectory(prefix="ember-time-") as d:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.abspath(tree)] + site.getsitepackages()),
                   EMBER_CACHE_DIR=os.path.join(d, "ember"), TORCHINDUCTOR_CACHE_DIR=os.path.join(d, "torch"),
                   TRITON_CACHE_DIR=os.path.join(d, "triton"),
                   # The installed ember's torch.backends entry point (TORCH_LOGS registration)
                   # names a module an older tree may not have: off for every tree alike.
                   TORCH_DEVICE_BACKEND_AUTOLOAD="0")
        env.pop("EMBER_DEBUG_DIR", None)
        r = subprocess.run([sys.executable, "-S", "-c", _CHILD, ",".join(models)], env=env, cwd=d,
                           capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{tree}: {r.stderr[-2000:]}")
    result = json.loads(r.stdout.strip().splitlines()[-1])
    expected = os.path.realpath(os.path.join(tree, "ember", "__init__.py"))
    if os.path.realpath(result.pop("ember")) != expected:
        raise RuntimeError(f"{tree}: the process imported another ember")
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trees", nargs="+")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--json", help="write every measurement here")
    args = parser.parse_args()
    models = args.models.split(",")
    runs = {tree: [] for tree in args.trees}
    for r in range(args.rounds):
        order = args.trees[r % len(args.trees):] + args.trees[:r % len(args.trees)]
        for tree in order:
            result = run_once(tree, models)
            runs[tree].append(result)
            total_wall = sum(m["wall"] for m in result.values())
            total_cpu = sum(m["cpu"] for m in result.values())
            print(f"round {r}  {tree}: wall {total_wall:6.2f} s  cpu {total_cpu:6.2f} s", flush=True)

    def median(tree, model, key):
        return statistics.median(run[model][key] for run in runs[tree])

    def total(tree, key):
        return statistics.median(sum(m[key] for m in run.values()) for run in runs[tree])

    print()
    print(f"median of {args.rounds} rounds, seconds (wall / cpu)")
    print(f"{'model':12s}" + "".join(f"  {os.path.basename(os.path.dirname(os.path.abspath(t))) or t:>24s}" for t in args.trees))
    for model in models:
        print(f"{model:12s}" + "".join(f"  {median(t, model, 'wall'):10.3f} / {median(t, model, 'cpu'):9.3f}"
                                       for t in args.trees))
    print(f"{'total':12s}" + "".join(f"  {total(t, 'wall'):10.3f} / {total(t, 'cpu'):9.3f}" for t in args.trees))
    first = args.trees[0]
    for t in args.trees[1:]:
        print(f"{t} / {first}: wall {total(t, 'wall') / total(first, 'wall'):.3f}x, "
              f"cpu {total(t, 'cpu') / total(first, 'cpu'):.3f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"models": models, "runs": runs}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
