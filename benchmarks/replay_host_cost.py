"""The host's part of one mode="reduce-overhead" replay (python/ember/runtime/cudagraphs.py), on
the CPU: the CUDA calls stubbed (a replay launches nothing, the current stream is one
object), the arguments shaped as Dynamo hands GPT-2 124M's graph under dynamic=True (two
sizes, input_ids, 148 parameters read in place, 65 0-d float tensors the graph never
reads), one output. What a replay does on the host besides the CUDA calls: per call, the
median time of CudaGraphReplay.__call__ and the ATen ops it runs (counted by a dispatch
mode: copies into static buffers, output copies, allocations).

    python benchmarks/replay_host_cost.py [--calls 2000] [--baseline OLD_cudagraphs.py]

--baseline loads another version of cudagraphs.py (`git show main:python/ember/runtime/cudagraphs.py
> /tmp/old.py`) and measures it beside this tree's, interleaved. The output is small: its
copy's host cost on a GPU does not depend on its size (the device does the copying), on
the CPU it would.
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import importlib.util
import statistics
import time

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ember.runtime import cudagraphs

PARAMS, UNREAD = 148, 65


class _Stub:
    """The torch.cuda calls a replay makes, with no device: each sync is counted."""

    def __init__(self):
        self.syncs = 0
        stub = self

        class Stream:
            def wait_stream(self, other):
                pass

            def synchronize(self):
                stub.syncs += 1

        class Graph:
            def replay(self):
                pass

        @contextlib.contextmanager
        def graph(g, pool=None, stream=None):
            yield

        def synchronize(device=None):
            stub.syncs += 1

        current = Stream()
        self.patch = {"CUDAGraph": Graph, "Stream": lambda device=None: Stream(), "graph": graph,
                      "graph_pool_handle": lambda: (1, 1), "current_stream": lambda device=None: current,
                      "synchronize": synchronize, "memory_snapshot": lambda: []}

    @contextlib.contextmanager
    def installed(self):
        saved = {k: getattr(torch.cuda, k, None) for k in self.patch}
        for k, v in self.patch.items():
            setattr(torch.cuda, k, v)
        try:
            yield self
        finally:
            for k, v in saved.items():
                setattr(torch.cuda, k, v)


class _Gpt2LikeRunner:
    """Stands for the CudaGraphRunner: the arguments' layout of GPT-2's graph; run() returns
    one output (what the recording's outputs are)."""

    device = torch.device("cpu")

    def __init__(self, batch=4, seq=128):
        import types

        self.cg = types.SimpleNamespace(symbols=[("s0", batch), ("s1", seq)])
        self.out = torch.empty(16)  # tiny: on the CPU a copy runs here, on a GPU the device copies

    def symbol_values(self, args):
        return (args[0], args[1])

    def inputs_read(self):
        return frozenset(range(2, 3 + PARAMS))

    def plan_of(self, args):
        return None

    def drop_workspaces(self, plan):
        pass

    def run(self, args):
        return [self.out]


def gpt2_args(params, batch=4, seq=128):
    return [batch, seq, torch.randint(0, 50257, (batch, seq))] + params + [torch.tensor(1e-5, dtype=torch.float64)
                                                                           for _ in range(UNREAD)]


class _CountOps(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops[str(func.overloadpacket.__name__)] += 1
        return func(*args, **(kwargs or {}))


def load(path: str):
    spec = importlib.util.spec_from_file_location("ember.runtime._cudagraphs_baseline", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def make_replay(mod, params):
    runner = _Gpt2LikeRunner()
    static = list(range(3, 3 + PARAMS))  # Dynamo's static input indices: the parameters
    replay = mod.CudaGraphReplay(runner, "inference_0", static)
    for _ in range(2):  # the first call runs as usual, the second records
        replay(gpt2_args(params))
    assert replay.recorded == 1
    return replay


def measure(mods: dict, calls: int) -> dict:
    params = [torch.empty(8) for _ in range(PARAMS)]
    stub = _Stub()
    rows = {}
    with stub.installed():
        replays = {name: make_replay(mod, params) for name, mod in mods.items()}
        times = {name: [] for name in mods}
        args = gpt2_args(params)  # Dynamo makes the 65 float tensors per call: not part of the replay
        for _ in range(calls):
            for name, replay in replays.items():
                t0 = time.perf_counter()
                replay(args)
                times[name].append(time.perf_counter() - t0)
        for name, replay in replays.items():
            syncs = stub.syncs
            with _CountOps() as counted:
                for _ in range(10):
                    replay(args)
            rows[name] = {"median_us": round(1e6 * statistics.median(times[name]), 2),
                          "min_us": round(1e6 * min(times[name]), 2),
                          "aten_ops_per_replay": {k: v / 10 for k, v in sorted(counted.ops.items())},
                          "syncs_per_replay": (stub.syncs - syncs) / 10,
                          "recordings": replay.recorded}
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--baseline", help="another cudagraphs.py to measure beside this tree's")
    args = ap.parse_args(argv)
    mods = {"this tree": cudagraphs}
    if args.baseline:
        mods = {"baseline": load(args.baseline), **mods}
    for name, row in measure(mods, args.calls).items():
        print(f"{name}: {row}")


if __name__ == "__main__":
    main()
