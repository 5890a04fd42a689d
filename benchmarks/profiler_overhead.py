"""What the profiler ranges of ember's compiled graphs cost per call, with no profiler active
and with one.

Each compiled graph's call (python/ember/runtime/runner.py, GraphRunner.__call__) reads
torch.autograd.profiler._is_profiler_enabled and only while a profiler records runs inside
a range named after the graph, with one range per kernel step. Measured on a one-op graph,
so that the check is not hidden by the graph's own work:

  with ranges     runner(args), what Dynamo calls: the check, then run()
  without ranges  the same runner whose __call__ is run() itself, as it was before the
                  ranges (the baseline)
  overhead        with - without: the ranges' cost per graph call with no profiler active
                  (issue 25's bar: <= 1 us)
  for scale, what an unconditional range would cost with no profiler active:
  fast range    the call inside torch._C._profiler._RecordFunctionFast, entered every call
  record_function  the call inside torch.autograd.profiler.record_function
  and under torch.profiler.profile (CPU activity): the call with its ranges recorded;
  isolated        the same difference on a runner whose run() returns at once: the check
                  alone, free of the kernel's own noise (a busy machine's spread is microseconds)

Rounds interleave the variants, the order rotating (a machine whose speed drifts affects
all alike); each figure is the median over rounds of the mean per call in a round, and the
overhead is the median of the per-round differences (also shown: the difference of the
fastest rounds, the least disturbed on a busy machine).

    python benchmarks/profiler_overhead.py [--device cuda] [--rounds 401] [--calls 500]
"""
import argparse
import contextlib
import copy
import statistics
import sys
import time

import torch


def compiled_runner(device: str):
    """The runner ember builds for x + 1 (one kernel), and its argument list."""
    import ember

    backend = ember.make_backend()
    made = []

    def capture(gm, example_inputs):
        out = backend(gm, example_inputs)
        made.append(out)
        return out

    x = torch.randn(16, device=device)
    torch._dynamo.reset()
    with torch.no_grad():
        torch.compile(lambda t: t + 1.0, backend=capture)(x)
    runner = getattr(made[0], "runner", None)
    if runner is None:
        sys.exit("ember did not compile the graph with its own front end; nothing to measure")
    return runner, [x]


def per_call_us(fn, calls: int, sync) -> float:
    t0 = time.perf_counter_ns()
    for _ in range(calls):
        fn()
    sync()
    return (time.perf_counter_ns() - t0) / calls / 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--rounds", type=int, default=401)
    parser.add_argument("--calls", type=int, default=500, help="calls per variant per round")
    args = parser.parse_args()

    from torch._C._profiler import _RecordFunctionFast
    from torch.autograd.profiler import record_function

    runner, inputs = compiled_runner(args.device)

    class WithoutRanges(type(runner)):
        __call__ = type(runner).run

    plain = copy.copy(runner)
    plain.__class__ = WithoutRanges
    sync = torch.cuda.synchronize if args.device.startswith("cuda") else (lambda: None)

    def fast_range():
        with _RecordFunctionFast("range"):
            runner.run(inputs)

    def full_range():
        with record_function("range"):
            runner.run(inputs)

    class Stub(type(runner)):
        def run(self, args, step_names=None):
            return None

    class StubWithoutRanges(Stub):
        __call__ = Stub.run

    stub, stub_plain = copy.copy(runner), copy.copy(runner)
    stub.__class__, stub_plain.__class__ = Stub, StubWithoutRanges

    variants = {"with ranges": lambda: runner(inputs), "without ranges": lambda: plain(inputs),
                "fast range": fast_range, "record_function": full_range}
    for fn in variants.values():
        per_call_us(fn, 1000, sync)  # warm up
    times = {name: [] for name in variants}
    for r in range(args.rounds):
        names = list(variants)
        for name in names[r % len(names):] + names[:r % len(names)]:
            calls = args.calls if name != "record_function" else max(1, args.calls // 20)
            times[name].append(per_call_us(variants[name], calls, sync))
    with contextlib.redirect_stderr(sys.stdout), torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU]):
        profiled = statistics.median(per_call_us(variants["with ranges"], 2000, sync) for _ in range(5))

    isolated = statistics.median(per_call_us(lambda: stub(inputs), 100000, sync)
                                 - per_call_us(lambda: stub_plain(inputs), 100000, sync) for _ in range(15))
    med = {name: statistics.median(ts) for name, ts in times.items()}
    deltas = [c - n for c, n in zip(times["with ranges"], times["without ranges"])]
    overhead = statistics.median(deltas)
    fastest = min(times["with ranges"]) - min(times["without ranges"])
    print(f"ember profiler ranges, one-op graph on {args.device}, torch {torch.__version__}, "
          f"{args.rounds} interleaved rounds x {args.calls} calls; median of per-round means, us per call:")
    for name in variants:
        print(f"  {name:<16} {med[name]:8.3f}")
    print(f"  {'under profiler':<16} {profiled:8.3f}   (ranges recorded: graph + kernel step)")
    deciles = statistics.quantiles(deltas, n=10)
    print(f"overhead of the ranges with no profiler active: {overhead:+.3f} us per graph call, median of "
          f"per-round differences (p10..p90 {deciles[0]:+.3f}..{deciles[-1]:+.3f}); fastest rounds: "
          f"{fastest:+.3f} us; isolated: {isolated:+.3f} us; bar <= 1 us: {'met' if overhead <= 1.0 else 'NOT met'}")
    return 0 if overhead <= 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
