"""Where a precompiled artifact's load + first call goes: phases and a cProfile, per model.

For each model one process saves an artifact (torch.compile(call, fullgraph=True,
backend=B).aot_compile + save_compiled_function, as benchmarks/precompile.py does), then a
fresh process (fresh cache directories unless --warm-caches: everything comes from the
artifact) loads it and calls it twice, with:

  phases   wall and CPU seconds of each step of torch's load and ember's, nested, from
           wrappers put around the functions that do them (on CUDA each phase ends with
           torch.cuda.synchronize()): torch's unpickling, ember's container decode and
           checks, kernel install, graph decode, the C++ pipeline and kernel load
           (cg.times), the runner, Dynamo's guard-manager rebuild, the first call
           (its guard check and the graph's own run) and a second call for comparison
  profile  cProfile of the load + first call, the top functions by cumulative and by own
           time (--top)

  steps    with --steps: each ATen call and kernel group of the first and second calls,
           synchronized, the steps the first call pays most for over the second

CPU seconds beside wall seconds tell waiting (a loaded machine, a child process, the GPU)
from work. Imports, building the model and its inputs and (CUDA) creating the context are
outside the timed span, as in benchmarks/precompile.py. --compare interleaves the loads of
the "before" variant (ember's load before it was cut: apply_variant) with the current one,
and prints medians. cProfile slows the Python it sees (the main thread's: torch's guards,
ember's decode) and not the C++ it does not: --no-profile times without it.

Usage:
  python benchmarks/precompile_profile.py                                  # CPU: tiny_gpt2, mlp, tiny_bert
  python benchmarks/precompile_profile.py --device cuda --models gpt2,bert # GPU, bf16 (default: gpt2,bert,resnet50)
          [--backend ember|inductor] [--warm-caches] [--top 30] [--variant after|before | --compare]
          [--loads N] [--steps] [--no-profile] [--json out.json]
  python benchmarks/precompile_profile.py child save|profile MODEL BACKEND DEVICE DTYPE DIR TOP VARIANT STEPS  (internal;
          TOP 0: no cProfile)
"""
import argparse
import cProfile
import functools
import gc
import io
import json
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

RESULT_TAG = "PRECOMPILE_PROFILE "
CPU_MODELS = ["tiny_gpt2", "mlp", "tiny_bert"]
CUDA_MODELS = ["gpt2", "bert", "resnet50"]


def call(model, *inputs):
    return model(*inputs)


def _bench():
    """benchmarks/precompile.py, for its model builder and guard filter."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("precompile_bench",
                                                  os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                               "precompile.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build(name, device, dtype):
    """benchmarks/precompile.py's models, and tiny_bert: BERT's encoder at tiny GPT-2's size
    (2 layers, 256 wide, 4x128 tokens), what stands in for BERT on the CPU."""
    import torch

    if name != "tiny_bert":
        return _bench().build(name, device, dtype)
    from transformers import BertConfig, BertModel

    from ember.examples import HiddenStatesOnly

    torch.manual_seed(0)
    config = BertConfig(num_hidden_layers=2, hidden_size=256, num_attention_heads=4, intermediate_size=1024,
                        vocab_size=4096)
    model = HiddenStatesOnly(BertModel(config, add_pooling_layer=False)).eval()
    inputs = (torch.randint(0, 4096, (4, 128)),)
    return model.to(device=device, dtype=dtype), tuple(x.to(device) for x in inputs)


class GcTimes:
    """Wall seconds and passes of Python's cyclic garbage collector, by generation."""

    def __init__(self):
        self.seconds = [0.0, 0.0, 0.0]
        self.passes = [0, 0, 0]
        self._start = None

    def __call__(self, phase, info):
        if phase == "start":
            self._start = time.perf_counter()
        elif self._start is not None:
            self.seconds[info["generation"]] += time.perf_counter() - self._start
            self.passes[info["generation"]] += 1
            self._start = None


class Phases:
    """Nested (name, depth, wall s, CPU s) of the wrapped functions, in call order. A phase
    on another thread than the main one (ember's background build of a loaded graph) is
    marked so, nested among its thread's phases, with that thread's own CPU seconds; the
    main thread's rows have the process's (the kernels' and ATen's worker threads too)."""

    def __init__(self, sync):
        self.rows = []
        self.depths = {}
        self.sync = sync

    def wrap(self, owner, attr, name=None, note=None):
        """Times owner.attr; note(result) -> str, when given, is shown beside the row."""
        original = getattr(owner, attr)
        phases = self
        label = name or attr

        @functools.wraps(original)
        def timed(*args, **kwargs):
            main = threading.current_thread() is threading.main_thread()
            cpu_time = time.process_time if main else time.thread_time
            thread = threading.get_ident()
            depth = phases.depths.get(thread, 0)
            row = [label if main else f"{label} [on its thread]", depth, 0.0, 0.0, ""]
            phases.rows.append(row)
            phases.depths[thread] = depth + 1
            w0, c0 = time.perf_counter(), cpu_time()
            try:
                result = original(*args, **kwargs)
                if note is not None:
                    row[4] = note(result)
                return result
            finally:
                phases.sync()
                row[2], row[3] = time.perf_counter() - w0, cpu_time() - c0
                phases.depths[thread] = depth

        setattr(owner, attr, timed)

    def table(self):
        lines = [f"{'phase':<58} {'wall s':>8} {'cpu s':>8}"]
        for name, depth, wall, cpu, note in self.rows:
            lines.append(f"{'  ' * depth + name:<58} {wall:8.4f} {cpu:8.4f}  {note}")
        return "\n".join(lines)


def instrument(phases, backend):
    """Wrappers around the steps of a load (torch's and ember's) and of a call."""
    import torch._dynamo.aot_compile as aot_compile
    import torch._dynamo.package as package

    phases.wrap(aot_compile.AOTCompileUnpickler, "load", "torch: unpickle the saved state")
    phases.wrap(package, "load_guards_state", "torch: unpickle the guards")
    phases.wrap(package, "load_guard_manager", "torch: rebuild the guard manager")
    phases.wrap(aot_compile.AOTCompiledFunction, "guard_check", "torch: guard check")
    if backend != "ember":
        return
    from ember import compiler
    from ember.caches import graph_format, precompile
    from ember.runtime import runner as runtime

    phases.wrap(precompile, "load_artifact", "ember: load_artifact")
    phases.wrap(graph_format, "decode", "ember: container decode (digest)")
    phases.wrap(precompile, "_check_machine", "ember: check torch, device, compiler identity")
    phases.wrap(precompile, "_install_kernels", "ember: install kernels into the cache")
    phases.wrap(precompile, "_seed_cubins", "ember: cubins into the process's memory cache")
    phases.wrap(graph_format, "decode_state", "ember: decode the graph state")
    phases.wrap(precompile._RunnerBuild, "result", "ember: wait for the graph's build, make its runner")
    phases.wrap(precompile, "run_pipeline", "ember: C++ pipeline + kernels (run_pipeline)",
                note=lambda cg: "C++ s: " + " ".join(f"{k} {v:.4f}" for k, v in cg.times.items()))
    phases.wrap(precompile, "load_graph", "ember: load_graph")
    phases.wrap(compiler, "build_runner", "ember: build_runner (C++ pipeline if not run yet + runner)",
                note=lambda r: "C++ s: " + " ".join(f"{k} {v:.4f}" for k, v in r[0].times.items()))
    phases.wrap(compiler, "compile_cuda_graph", "ember: compile_cuda_graph")
    phases.wrap(compiler, "_use_cuda_graphs", "ember: CUDA graphs setup")
    phases.wrap(runtime.GraphRunner, "__call__", "ember: graph run")
    try:
        from ember.runtime import cuda

        phases.wrap(cuda.CudaGraphRunner, "__call__", "ember: CUDA graph run")
    except ImportError:
        pass


def apply_variant(variant):
    """The "before" variant: ember's load as it was before the load was cut (2026-11-27):
    the kernels written to the kernel cache, then the graph's runner built from it, inside
    torch's call to ember, on the main thread, before torch rebuilds Dynamo's guards."""
    import ember

    if variant == "before":
        ember.config.compile_in_background = False


class StepTimes:
    """With --steps: each step of ember's graph runs timed, synchronized on CUDA (which
    changes the call's total), per call: ATen calls by op and kernel groups by step, to
    show what the first call pays that the second does not (cuBLAS and cuDNN handles,
    modules loaded at a kernel's first launch, first allocations)."""

    def __init__(self, sync):
        self.sync = sync
        self.calls = []  # per call: {step: seconds}
        self._plans = set()

    def install(self):
        from ember.runtime import runner as runtime

        classes = [runtime.GraphRunner]
        try:
            from ember.runtime.cuda import CudaGraphRunner

            classes.append(CudaGraphRunner)
        except ImportError:
            pass
        for cls in classes:
            cls._call_context = self._wrap_context(vars(cls)["_call_context"])

    def _wrap_context(self, original):
        def call_context(runner, plan):
            if id(plan) not in self._plans:
                self._plans.add(id(plan))
                self._time_aten_calls(runner, plan)
            free, launch, extra = original(runner, plan)
            return free, self._timed_launch(launch), extra

        return call_context

    def _timed(self, label, fn, *args, **kwargs):
        self.sync()
        t0 = time.perf_counter()
        result = fn(*args, **kwargs)
        self.sync()
        self.calls[-1][label] = self.calls[-1].get(label, 0.0) + time.perf_counter() - t0
        return result

    def _time_aten_calls(self, runner, plan):
        """The plan's generated function (runtime/runner.py, runtime/plan_code.py) calls ATen through the
        ops and prepared calls bound in its globals: each is replaced by a timed one."""
        from ember.runtime.runner import runtime_op

        ops = {id(runtime_op(c.op)): c.op for c in runner.imported.calls.values()}
        scope = plan.run.__globals__
        for name, value in list(scope.items()):
            if callable(value) and (id(value) in ops or (name.startswith("f") and name[1:].isdigit())):
                label = f"aten {name} {ops.get(id(value), 'prepared call')}"[:42]
                scope[name] = (lambda fn, label: lambda *a, **k: self._timed(label, fn, *a, **k))(value, label)

    def _timed_launch(self, launch):
        return lambda si, ptrs, *extra: self._timed(f"kernels {si}", launch, si, ptrs, *extra)

    def table(self, top=15):
        if len(self.calls) < 2:
            return ""
        first, second = self.calls[0], self.calls[1]
        rows = sorted(first, key=lambda k: first[k] - second.get(k, 0.0), reverse=True)[:top]
        lines = [f"steps (--steps, synchronized): first call {sum(first.values()):.4f} s in steps, second "
                 f"{sum(second.values()):.4f} s; the {len(rows)} that cost the first call most over the second:",
                 f"{'step':<42} {'first s':>9} {'second s':>9}"]
        lines += [f"{k:<42} {first[k]:9.4f} {second.get(k, 0.0):9.4f}" for k in rows]
        return "\n".join(lines)


def child(action, name, backend, device, dtype_name, directory, top, variant="after", steps="0"):
    import torch

    if backend == "ember":
        import ember  # noqa: F401
    else:
        import torch._functorch._aot_autograd.autograd_cache  # noqa: F401
        import torch._inductor.codecache  # noqa: F401
        import torch._inductor.compile_fx  # noqa: F401
        import torch._inductor.output_code  # noqa: F401
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dtype_name]
    model, inputs = build(name, device, dtype)
    path = os.path.join(directory, f"{name}-{backend}.bin")
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    if device == "cuda":
        torch.empty(1, device=device)
        sync()
    result = {"model": name, "backend": backend, "variant": variant}
    with torch.no_grad():
        if action == "save":
            if hasattr(torch._dynamo.config, "enable_aot_compile"):
                torch._dynamo.config.enable_aot_compile = True
            fn = torch.compile(call, fullgraph=True, backend=backend,
                               options={"guard_filter_fn": _bench().portable_guards})
            compiled = fn.aot_compile(((model, *inputs), {}))
            out = compiled(model, *inputs)
            compiled.save_compiled_function(path)
            torch.save(out.detach().cpu(), path + ".out")
            result["artifact_bytes"] = os.path.getsize(path)
            print(RESULT_TAG + json.dumps(result), flush=True)
            return
        if backend == "ember":
            apply_variant(variant)
        phases = Phases(sync)
        instrument(phases, backend)
        step_times = StepTimes(sync) if steps == "1" and backend == "ember" else None
        if step_times is not None:
            step_times.install()
            step_times.calls.append({})
        with open(path, "rb") as f:
            data = f.read()
        profile = cProfile.Profile() if int(top) > 0 else None
        gc_times = GcTimes()
        gc.callbacks.append(gc_times)
        w0, c0 = time.perf_counter(), time.process_time()
        if profile is not None:
            profile.enable()
        compiled = torch.compiler.load_compiled_function(io.BytesIO(data))
        sync()
        w1, c1 = time.perf_counter(), time.process_time()
        out = compiled(model, *inputs)
        sync()
        w2, c2 = time.perf_counter(), time.process_time()
        if profile is not None:
            profile.disable()
        gc.callbacks.remove(gc_times)
        first_rows = len(phases.rows)
        if step_times is not None:
            step_times.calls.append({})
        out2 = compiled(model, *inputs)
        sync()
        w3 = time.perf_counter()
    expected = torch.load(path + ".out")
    result.update(load_s=w1 - w0, load_cpu_s=c1 - c0, first_call_s=w2 - w1, first_call_cpu_s=c2 - c1,
                  second_call_s=w3 - w2, bitwise_equal=bool(torch.equal(out.detach().cpu(), expected)),
                  second_equal=bool(torch.equal(out2, out)),
                  phases=[r for r in phases.rows[:first_rows]], gc_seconds=gc_times.seconds,
                  gc_passes=gc_times.passes)
    if backend == "ember":
        s = ember.stats()
        result["ember"] = {k: s[k] for k in ("c_compiler_runs", "precompile", "dynamo_compiles")}
    print(f"== {name} ({backend}, {device}, {dtype_name}): load {w1 - w0:.4f} s (cpu {c1 - c0:.4f}), "
          f"first call {w2 - w1:.4f} s (cpu {c2 - c1:.4f}), second call {w3 - w2:.4f} s; "
          f"bitwise = saved: {result['bitwise_equal']}")
    print(phases.table())
    print(f"Python's garbage collector during load + first call: {sum(gc_times.seconds):.4f} s wall "
          f"(generations 0/1/2: {gc_times.passes[0]}/{gc_times.passes[1]}/{gc_times.passes[2]} passes, "
          + "/".join(f"{x:.4f}" for x in gc_times.seconds) + " s)")
    if step_times is not None:
        print(step_times.table())
    if profile is not None:
        text = io.StringIO()
        stats = pstats.Stats(profile, stream=text)
        stats.sort_stats("cumulative").print_stats(int(top))
        stats.sort_stats("tottime").print_stats(int(top))
        print("\n".join(line for line in text.getvalue().splitlines() if line.strip()))
    print(RESULT_TAG + json.dumps(result), flush=True)


def run_child(args, cache_dir, timeout):
    env = dict(os.environ, PYTHONUNBUFFERED="1", TORCHINDUCTOR_CACHE_DIR=os.path.join(cache_dir, "torch"),
               EMBER_CACHE_DIR=os.path.join(cache_dir, "ember"))
    cmd = [sys.executable, os.path.abspath(__file__), "child", *args]
    try:
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"timeout after {timeout} s"
    for line in reversed(r.stdout.splitlines()):
        if line.startswith(RESULT_TAG):
            return json.loads(line[len(RESULT_TAG):]), "\n".join(
                x for x in r.stdout.splitlines() if not x.startswith(RESULT_TAG))
    return None, f"exit {r.returncode}: " + (r.stderr or r.stdout)[-3000:]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--dtype", default=None, choices=["fp32", "bf16", "fp16"],
                        help="default: fp32 on the CPU, bf16 on CUDA")
    parser.add_argument("--models", default=None, help="comma-separated (default: the device's list)")
    parser.add_argument("--backend", default="ember", choices=["ember", "inductor"])
    parser.add_argument("--loads", type=int, default=1, help="load processes per model (each printed)")
    parser.add_argument("--warm-caches", action="store_true", help="load with the saving process's caches")
    parser.add_argument("--top", type=int, default=25, help="cProfile rows per listing")
    parser.add_argument("--variant", default="after", choices=["after", "before"],
                        help="before: as ember's load was before it was cut (apply_variant says how)")
    parser.add_argument("--compare", action="store_true",
                        help="both variants, their loads interleaved (--loads each); medians in the summary")
    parser.add_argument("--steps", action="store_true",
                        help="time each step of the first and second calls, synchronized (changes their totals)")
    parser.add_argument("--no-profile", action="store_true", help="no cProfile (phases and times only)")
    parser.add_argument("--timeout", type=int, default=600)
    parser.add_argument("--json", help="write the loads' phases and times here")
    args = parser.parse_args()
    dtype = args.dtype or ("bf16" if args.device == "cuda" else "fp32")
    models = args.models.split(",") if args.models else (CUDA_MODELS if args.device == "cuda" else CPU_MODELS)
    variants = ["before", "after"] if args.compare else [args.variant]
    top = str(0 if args.no_profile else args.top)
    results = []
    for name in models:
        work = tempfile.mkdtemp(prefix=f"precompile_profile_{name}_")
        try:
            saved = {}
            for v in variants:
                os.makedirs(os.path.join(work, v))
                common = [name, args.backend, args.device, dtype, os.path.join(work, v), top, v,
                          "1" if args.steps else "0"]
                saved[v], text = run_child(["save", *common], os.path.join(work, v, "save"), args.timeout)
                if saved[v] is None:
                    print(f"== {name} ({v}): save failed: {text}", flush=True)
            for i in range(args.loads):
                for v in variants:
                    if saved[v] is None:
                        continue
                    common = [name, args.backend, args.device, dtype, os.path.join(work, v), top, v,
                              "1" if args.steps else "0"]
                    caches = os.path.join(work, v, "save" if args.warm_caches else f"load-{i}")
                    loaded, text = run_child(["profile", *common], caches, args.timeout)
                    print(text, flush=True)
                    if loaded is not None:
                        loaded["artifact_bytes"] = saved[v].get("artifact_bytes")
                        results.append(loaded)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    print("\n| model | variant | load s (cpu) | first call s (cpu) | second call s | bitwise |\n|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['model']} | {r['variant']} | {r['load_s']:.3f} ({r['load_cpu_s']:.3f}) | {r['first_call_s']:.3f} "
              f"({r['first_call_cpu_s']:.3f}) | {r['second_call_s']:.3f} | {r['bitwise_equal']} |")
    if len(results) > 1:
        print("\nmedians\n| model | variant | loads | load s | load cpu s | first call s | load + first call s | "
              "guards (unpickle + rebuild) cpu s |\n|---|---|---|---|---|---|---|---|")
        for name in models:
            for v in variants:
                rs = [r for r in results if r["model"] == name and r["variant"] == v]
                if not rs:
                    continue
                med = lambda f: statistics.median(f(r) for r in rs)  # noqa: E731
                guards = med(lambda r: sum(p[3] for p in r["phases"] if p[0].startswith("torch: unpickle the g")
                                           or p[0].startswith("torch: rebuild")))
                print(f"| {name} | {v} | {len(rs)} | {med(lambda r: r['load_s']):.3f} | "
                      f"{med(lambda r: r['load_cpu_s']):.3f} | {med(lambda r: r['first_call_s']):.3f} | "
                      f"{med(lambda r: r['load_s'] + r['first_call_s']):.3f} | {guards:.3f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "child":
        child(*sys.argv[2:11])
    else:
        main()
