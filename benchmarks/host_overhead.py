"""What one call of a compiled model costs the host, where compute is negligible: eager,
Inductor and ember side by side, per call and per step.

    python benchmarks/host_overhead.py [--device cpu|cuda] [--models gpt2-tiny,mlp50,gpt2]
        [--backends eager,inductor,ember,ember-dynamic] [--shapes 1] [--rounds 15] [--calls 20]
        [--threads 1] [--clock wall|cpu] [--out FILE.json]

Models (random weights, inference under torch.no_grad):

    gpt2-tiny  GPT-2 with 12 layers 64 wide (4 heads), batch 2 x 16 tokens: a decoder's
               full op mix at sizes where every kernel is a few microseconds
    mlp50      50 x (Linear 64 -> 64, ReLU), batch 4: one matmul and one kernel a layer
    gpt2       GPT-2 124M, batch 4 x 128 (bf16 on cuda): the lead's host-bound case

Backends: eager, inductor (torch.compile's default), ember, ember-dynamic (ember with
dynamic=True, the symbolic plans' path), inductor-dynamic (Inductor with dynamic=True),
ember-dynamic-sf (ember with dynamic=True, traced with Dynamo's specialize_float on:
dynamic=True otherwise makes Dynamo pass every float attribute of the model -- a
decoder's eps, dropout p, attention scale -- as a 0-d tensor it makes and guards on every
call, a cost of Dynamo's that every backend pays; this variant shows how much). The
static variants compile with dynamic=False. With --shapes N every variant is called at
the model's first N shapes (the static ones compile once per shape, the dynamic ones
once), and each (variant, shape) is a row. Every variant is compiled in this one process
on its own copy of the model, then timed in rounds that interleave the variants (the
order rotating), so that a machine whose speed drifts affects all alike. Each call is
timed alone: on CUDA, `host` is the time until the call returns (what the host spends
issuing it, nothing synchronizes) and `wall` the time until the device is done; on the
CPU both are the call's time, on the wall clock or (--clock cpu, one thread) on the
calling thread's CPU clock, which leaves out the time a loaded machine gives other
processes. Figures are medians over all calls.

Per ember variant the compiled graphs' steps are counted on one call (kernel steps:
one C++ call each, launching its kernels; extern steps: one ATen call each), and
`host_us_per_step` is the host time divided by all steps: the runner's cost per step
plus what ATen's calls cost. `in_runners_us` is the host time per call inside ember's
runners (measured apart, after the rounds); the rest of an ember call is Dynamo's (guards,
the frame's own Python) and the model's code around its graphs. On CUDA the device kernels of one call are counted for
every backend (torch.profiler), and `host_us_per_kernel` divides by them.

Defaults: CPU: 1 thread, gpt2-tiny and mlp50, fp32. CUDA: gpt2-tiny, mlp50 and gpt2
(bf16 for gpt2).
"""
from __future__ import annotations

import argparse
import copy
import json
import platform
import statistics
import sys
import time

import torch

BACKENDS = "eager,inductor,ember,ember-dynamic"
DYNAMIC = ("ember-dynamic", "inductor-dynamic", "ember-dynamic-sf")

# (batch, sequence) per model, the first the one --shapes 1 times; batch and sequence above 1
# (Dynamo specializes sizes 0 and 1).
SHAPES = {"gpt2-tiny": [(2, 16), (3, 24), (4, 12)], "gpt2": [(4, 128), (3, 200), (8, 64)],
          "mlp50": [(4,), (6,), (8,)]}


# ----------------------------------------------------------------------------- models

def build(name: str, device: str, shapes: int = 1):
    """(model, example inputs as kwargs, one dict per shape: the model's first `shapes`)."""
    torch.manual_seed(0)
    if name not in SHAPES:
        raise SystemExit(f"unknown model {name!r}")
    sizes = SHAPES[name][:shapes]
    if name in ("gpt2-tiny", "gpt2"):
        import transformers

        if name == "gpt2":
            cfg = transformers.GPT2Config(use_cache=False)
            dtype = torch.bfloat16 if device == "cuda" else torch.float32
        else:
            cfg = transformers.GPT2Config(n_layer=12, n_embd=64, n_head=4, n_positions=128, vocab_size=1024,
                                          use_cache=False, bos_token_id=1, eos_token_id=2)
            dtype = torch.float32
        cfg._attn_implementation = "sdpa"
        model = transformers.GPT2LMHeadModel(cfg).eval().to(device=device, dtype=dtype)
        return model, [{"input_ids": torch.randint(0, cfg.vocab_size, size, device=device)} for size in sizes]
    layers = []
    for _ in range(50):
        layers += [torch.nn.Linear(64, 64), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers).eval().to(device)
    return _KwargsModel(model), [{"x": torch.randn(batch, 64, device=device)} for batch, in sizes]


def shape_label(inputs: dict) -> str:
    return "x".join(str(n) for n in next(iter(inputs.values())).shape)


class _KwargsModel(torch.nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        return self.inner(x)


def first_tensor(out):
    if isinstance(out, torch.Tensor):
        return out
    if hasattr(out, "logits"):
        return out.logits
    if isinstance(out, (list, tuple)):
        return out[0]
    raise TypeError(type(out))


# ----------------------------------------------------------------------------- variants

def compiled(model, backend: str):
    """A callable model for `backend`, compiled on a copy of `model`."""
    if backend == "eager":
        return model
    m = copy.deepcopy(model)
    dynamic = backend in DYNAMIC
    if backend.startswith("inductor"):
        return torch.compile(m, dynamic=dynamic)
    import ember

    return ember.compile(m, dynamic=dynamic)


def ember_steps(call):
    """Per call of `call`: the ember graphs run, their kernel steps, kernels and extern
    (ATen) steps, counted on the compiled graphs' steps."""
    from ember.runtime.runner import GraphRunner

    seen = []
    original = GraphRunner.run

    def run(self, args, step_names=None):
        seen.append(self)
        return original(self, args, step_names)

    GraphRunner.run = run
    try:
        call()
    finally:
        GraphRunner.run = original
    kernel_steps = kernels = externs = 0
    for r in seen:
        for kind, payload, _ in r.cg.steps:
            if kind == "kernels":
                kernel_steps += 1
                kernels += len(payload)
            else:
                externs += 1
    return {"graphs": len(seen), "kernel_steps": kernel_steps, "kernels": kernels, "extern_steps": externs}


def runner_share_us(call, calls: int, clock=time.perf_counter) -> float:
    """Median host time per call spent inside ember's runners (what Dynamo calls: the
    runner's __call__), the rest of a call being Dynamo's guards and the model's own
    Python around the compiled graphs."""
    from ember.runtime.runner import GraphRunner

    classes = [GraphRunner] + GraphRunner.__subclasses__()
    originals = {c: c.__dict__["__call__"] for c in classes if "__call__" in c.__dict__}
    spent = [0.0]

    def timed(original):
        def __call__(self, args):
            t0 = clock()
            try:
                return original(self, args)
            finally:
                spent[0] += clock() - t0
        return __call__

    for c, original in originals.items():
        c.__call__ = timed(original)
    per_call = []
    try:
        for _ in range(calls):
            spent[0] = 0.0
            call()
            per_call.append(spent[0] * 1e6)
    finally:
        for c, original in originals.items():
            c.__call__ = original
    return statistics.median(per_call)


def device_kernels(call) -> int:
    """Device kernels one call launches (torch.profiler, CUDA activity)."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        call()
        torch.cuda.synchronize()
    return sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
               and "memcpy" not in e.name.lower() and "memset" not in e.name.lower())


# ----------------------------------------------------------------------------- timing

def time_rounds(calls: dict, rounds: int, per_round: int, cuda: bool, clock=time.perf_counter) -> dict:
    """name -> (host times, wall times) in microseconds, one per call."""
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    names = list(calls)
    out = {n: ([], []) for n in names}
    for r in range(rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for n in order:
            fn = calls[n]
            host, wall = out[n]
            for _ in range(per_round):
                sync()
                t0 = clock()
                fn()
                t1 = clock()
                sync()
                t2 = clock()
                host.append((t1 - t0) * 1e6)
                wall.append((t2 - t0) * 1e6)
    return out


def measure_model(name: str, args) -> list[dict]:
    device = args.device
    model, shapes = build(name, device, args.shapes)
    rows, calls = [], {}
    with torch.no_grad():
        refs = [first_tensor(model(**inputs)).float() for inputs in shapes]
        for backend in args.backends.split(","):
            t0 = time.perf_counter()
            fn = compiled(model, backend)
            # Every shape's first call traces (Dynamo recompiles a static variant per shape):
            # ember-dynamic-sf's traces see Dynamo's floats as constants.
            with torch._dynamo.config.patch(specialize_float=backend == "ember-dynamic-sf" or
                                            torch._dynamo.config.specialize_float):
                outs = [first_tensor(fn(**inputs)).float() for inputs in shapes]
            first = time.perf_counter() - t0
            for inputs, out, ref in zip(shapes, outs, refs):
                call = (lambda fn=fn, inputs=inputs: fn(**inputs))
                for _ in range(args.warmup):
                    call()
                row = {"model": name, "backend": backend, "shape": shape_label(inputs), "device": device,
                       "first_calls_s": round(first, 3), "max_abs_err": (out - ref).abs().max().item()}
                if backend.startswith("ember"):
                    row.update(ember_steps(call))
                if device == "cuda":
                    row["device_kernels"] = device_kernels(call)
                rows.append(row)
                calls[(backend, row["shape"])] = call
            print(f"  {name} {backend}: compiled, first calls (every shape) {first:.2f} s", flush=True)
        clock = time.thread_time if args.clock == "cpu" else time.perf_counter
        times = time_rounds(calls, args.rounds, args.calls, device == "cuda", clock)
        for row in rows:
            if row["backend"].startswith("ember"):
                row["in_runners_us"] = round(runner_share_us(calls[(row["backend"], row["shape"])],
                                                             args.rounds * args.calls, clock), 2)
    for row in rows:
        host, wall = times[(row["backend"], row["shape"])]
        row["host_us"] = round(statistics.median(host), 2)
        row["wall_us"] = round(statistics.median(wall), 2)
        row["host_us_min"] = round(min(host), 2)
        steps = row.get("kernel_steps", 0) + row.get("extern_steps", 0)
        if steps:
            row["host_us_per_step"] = round(row["host_us"] / steps, 2)
        if row.get("device_kernels"):
            row["host_us_per_kernel"] = round(row["host_us"] / row["device_kernels"], 2)
    return rows


def table(rows: list[dict]) -> str:
    head = (f"{'model':<10} {'backend':<17} {'shape':>7} {'wall us':>9} {'host us':>9} {'runners':>9} {'vs eager':>8} "
            f"{'steps':>11} {'us/step':>8} {'kernels':>8} {'us/kern':>8}")
    lines = [head, "-" * len(head)]
    eager = {(r["model"], r["shape"]): r["wall_us"] for r in rows if r["backend"] == "eager"}
    for r in rows:
        steps = f"{r['kernel_steps']}+{r['extern_steps']}" if "kernel_steps" in r else "-"
        at = (r["model"], r["shape"])
        ratio = f"{eager[at] / r['wall_us']:.2f}x" if at in eager else "-"
        lines.append(f"{r['model']:<10} {r['backend']:<17} {r['shape']:>7} {r['wall_us']:>9.1f} {r['host_us']:>9.1f} "
                     f"{r.get('in_runners_us', '-'):>9} {ratio:>8} "
                     f"{steps:>11} {r.get('host_us_per_step', '-'):>8} {r.get('device_kernels', '-'):>8} "
                     f"{r.get('host_us_per_kernel', '-'):>8}")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--models", default=None)
    p.add_argument("--backends", default=BACKENDS)
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--calls", type=int, default=20, help="calls per variant per round")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: 1 on the CPU)")
    p.add_argument("--shapes", type=int, default=1, choices=(1, 2, 3),
                   help="call every variant at each of the model's first N shapes (rows per shape)")
    p.add_argument("--clock", default="wall", choices=("wall", "cpu"),
                   help="cpu: the calling thread's CPU time (the CPU with one thread only)")
    p.add_argument("--out", default=None, help="write the rows as JSON here")
    args = p.parse_args(argv)
    if args.models is None:
        args.models = "gpt2-tiny,mlp50" + (",gpt2" if args.device == "cuda" else "")
    threads = args.threads or (1 if args.device == "cpu" else None)
    if args.clock == "cpu" and (args.device != "cpu" or threads != 1):
        raise SystemExit("--clock cpu times the calling thread: use it on the CPU with one thread")
    if threads:
        torch.set_num_threads(threads)
    # Every variant compiles the same forward code objects, each with its own backend.
    torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 16)
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 16)
    rows = []
    for name in args.models.split(","):
        rows += measure_model(name, args)
    print(table(rows))
    meta = {"device": args.device, "device_name": torch.cuda.get_device_name() if args.device == "cuda"
            else platform.processor() or platform.machine(), "torch": torch.__version__, "threads": threads,
            "rounds": args.rounds, "calls": args.calls, "shapes": args.shapes, "clock": args.clock, "time": time.strftime("%Y-%m-%d %H:%M:%S")}
    try:
        import subprocess

        meta["commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                        cwd=sys.path[0] or ".").stdout.strip()
    except OSError:
        pass
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"meta": meta, "rows": rows}, f, indent=1)
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
