"""Precompiled warm starts: load of a saved artifact + first call, ember against Inductor.

Both backends go through torch's own precompile API, side by side:

  save   one process per (model, backend): torch.compile(call, fullgraph=True, backend=B)
         .aot_compile(((model, *inputs), {})) under torch.no_grad(), then
         save_compiled_function(); the first call's output is kept for the bitwise check
  load   fresh processes, round-robin over the backends: build the model and its inputs on
         the device (and, on CUDA, create the context), then time
         torch.compiler.load_compiled_function(file) + the first call (synchronized).
         Imports (ember's; Inductor's compiler modules, which it would import lazily inside
         the load), model building and CUDA context creation are outside the timed span for
         both backends. The output must equal the saved one bitwise.

  eager  (with --backends ...,eager) the floor: eager's first call of the same model in a
         fresh process, timed the same way (after the model, its inputs and the CUDA
         context): what any backend's first call pays for the libraries' first use
         (cuDNN's and cuBLAS's handles and heuristics, kernels' modules loaded at their
         first launch). No artifact, no load.
  eager-thread  (the same, with --backends ...,eager-thread) eager's first call on the main
         thread after the model ran once on another thread, before the timer: what of the
         first call's cost is the process's (libraries loaded, kernels' modules, handles in
         the pool, which a backend could pay on a thread while torch rebuilds the guards)
         and what stays the calling thread's (cuDNN's execution-plan cache is
         thread-local in ATen).

`call(model, *inputs)` is the same function for both, and so is the guard filter: the
guards torch can serialize (Hugging Face's decorators make Dynamo guard on a code object's
identity, which torch cannot save; ember.save drops the same ones).

Loads use fresh cache directories by default (a new machine: everything must come from the
artifact); --warm-caches loads with the caches the saving process filled.

--inductor-from FILE,... reuses Inductor's rows from earlier runs' JSON (same device name,
torch, dtype and model) instead of measuring them: Inductor's save is most of a run's time
(minutes for the Llama decoder), and its load + first call does not change with ember.
The table marks such rows "stored"; a model with no stored row is measured as usual.

Usage:
  python benchmarks/precompile.py                                   # CPU: built-in examples
  python benchmarks/precompile.py --device cuda --dtype bf16        # GPU: GPT-2, BERT, ResNet-50, Llama
          [--models gpt2,bert] [--backends inductor,ember] [--runs 3] [--warm-caches] [--json out.json]
          [--inductor-from benchmarks/results/precompile-cuda-....json,...]
  python benchmarks/precompile.py child save|load MODEL BACKEND DEVICE DTYPE DIR   # one process (internal)
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

RESULT_TAG = "PRECOMPILE_BENCH "
CPU_MODELS = ["mlp", "ln_gelu", "small_cnn", "tiny_gpt2", "tiny_llama"]
CUDA_MODELS = ["gpt2", "bert", "resnet50", "llama"]


def call(model, *inputs):
    return model(*inputs)


def portable_guards(entries):
    """The guards torch can serialize, without their user stacks and without the empty-hooks
    guards torch does not check (the same rule as ember.deploy.portable_guards)."""
    import torch
    from torch._dynamo.guards import CheckFunctionManager

    unsupported = set(CheckFunctionManager.UNSUPPORTED_SERIALIZATION_GUARD_TYPES)
    if torch._dynamo.config.skip_nnmodule_hook_guards:
        unsupported.add("EMPTY_NN_MODULE_HOOKS_DICT")
    for e in entries:
        e.orig_guard.user_stack = e.orig_guard.stack = None
    return [not (e.is_global or e.guard_type in unsupported
                 or unsupported.intersection(getattr(e, "derived_guard_types", None) or ()))
            for e in entries]


def build(name, device, dtype):
    """(model, inputs) on the device: the built-in examples on the CPU; on CUDA the shapes of
    the Inductor anchor (docs/benchmarks.md): GPT-2 124M 8x512, BERT-base 16x512, ResNet-50 batch 64, and a
    Llama-style decoder (TinyLlama-1.1B widths, 8 layers) 8x512."""
    import contextlib

    import torch

    from ember import examples

    # On CUDA the weights are made on the device: initializing the Llama decoder's 480 M
    # parameters on the CPU took seconds of every process (both backends alike, untimed).
    with torch.device(device) if device == "cuda" else contextlib.nullcontext():
        model, inputs = examples.get(name)
    torch.manual_seed(0)
    if device == "cuda":
        shapes = {"gpt2": (8, 512, 50257), "bert": (16, 512, 30522), "llama": (8, 512, 32000)}
        if name in shapes:
            b, s, vocab = shapes[name]
            inputs = (torch.randint(0, vocab, (b, s)),)
        elif name == "resnet50":
            inputs = (torch.randn(64, 3, 224, 224),)
    model = model.to(device=device, dtype=dtype)
    inputs = tuple(x.to(device=device, dtype=dtype) if x.is_floating_point() else x.to(device) for x in inputs)
    return model, inputs


def child(action, name, backend, device, dtype_name, directory):
    import torch

    if backend == "ember":
        import ember  # noqa: F401  (registers the backend; an import, outside the timed span)
    elif backend.startswith("eager"):
        pass
    elif action == "load":
        # Inductor imports its compiler lazily, inside the load: imports are outside the timed
        # span for both backends, so they come first here.
        import torch._functorch._aot_autograd.autograd_cache  # noqa: F401
        import torch._inductor.codecache  # noqa: F401
        import torch._inductor.compile_fx  # noqa: F401
        import torch._inductor.output_code  # noqa: F401
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dtype_name]
    model, inputs = build(name, device, dtype)
    path = os.path.join(directory, f"{name}-{backend}.bin")
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    if device == "cuda":
        torch.empty(1, device=device)  # the context, before timing
        sync()
    result = {"model": name, "backend": backend, "action": action}
    with torch.no_grad():
        if backend.startswith("eager"):  # the floor: the first call alone
            if backend == "eager-thread":
                import threading

                def warm():
                    with torch.no_grad():
                        model(*inputs)
                    sync()

                thread = threading.Thread(target=warm)
                thread.start()
                thread.join()
            t0 = time.perf_counter()
            model(*inputs)
            sync()
            result.update(load_s=0.0, first_call_s=time.perf_counter() - t0, bitwise_equal=None)
            result["total_s"] = result["first_call_s"]
        elif action == "save":
            t0 = time.perf_counter()
            if hasattr(torch._dynamo.config, "enable_aot_compile"):
                torch._dynamo.config.enable_aot_compile = True  # off by default before torch 2.13
            fn = torch.compile(call, fullgraph=True, backend=backend, options={"guard_filter_fn": portable_guards})
            compiled = fn.aot_compile(((model, *inputs), {}))
            out = compiled(model, *inputs)
            sync()
            result["compile_and_first_call_s"] = time.perf_counter() - t0
            compiled.save_compiled_function(path)
            torch.save(out.detach().cpu() if torch.is_tensor(out) else out, path + ".out")
            result["artifact_bytes"] = os.path.getsize(path)
        else:
            t0 = time.perf_counter()
            with open(path, "rb") as f:
                compiled = torch.compiler.load_compiled_function(f)
            t1 = time.perf_counter()
            out = compiled(model, *inputs)
            sync()
            t2 = time.perf_counter()
            expected = torch.load(path + ".out")
            result.update(load_s=t1 - t0, first_call_s=t2 - t1, total_s=t2 - t0,
                          bitwise_equal=bool(torch.equal(out.detach().cpu(), expected)))
    if backend == "ember":
        s = ember.stats()
        result["ember"] = {k: s[k] for k in ("graphs_compiled", "graphs_loaded", "c_compiler_runs", "precompile",
                                             "dynamo_compiles")}
    print(RESULT_TAG + json.dumps(result), flush=True)


def run_child(args, cache_dir, timeout):
    env = dict(os.environ, PYTHONUNBUFFERED="1", TORCHINDUCTOR_CACHE_DIR=os.path.join(cache_dir, "torch"),
               EMBER_CACHE_DIR=os.path.join(cache_dir, "ember"))
    cmd = [sys.executable, os.path.abspath(__file__), "child", *args]
    t0 = time.perf_counter()
    try:
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {timeout} s"}
    print(f"#   ({time.perf_counter() - t0:.1f} s in that process)", file=sys.stderr, flush=True)
    for line in reversed(r.stdout.splitlines()):
        if line.startswith(RESULT_TAG):
            return {**json.loads(line[len(RESULT_TAG):]), "process_s": round(time.perf_counter() - t0, 1)}
    return {"error": f"exit {r.returncode}: " + (r.stderr or r.stdout)[-1500:]}


def stored_rows(files, device, dtype):
    """{model: Inductor's row} from earlier runs' JSON files of this device name (the GPU's,
    or the machine's on the CPU), torch and dtype, the latest file winning."""
    import torch

    here = torch.cuda.get_device_name() if device == "cuda" else platform.node()
    rows = {}
    for path in files:
        with open(path) as f:
            run = json.load(f)
        there = run.get("gpu") if device == "cuda" else run.get("machine")
        if (run.get("device"), run.get("dtype"), run.get("torch"), there) != (device, dtype, torch.__version__, here):
            print(f"# {path}: another device, dtype or torch ({there}, {run.get('dtype')}, {run.get('torch')}): "
                  "not reused", file=sys.stderr, flush=True)
            continue
        for row in run["rows"]:
            if row["backend"] == "inductor" and row.get("total_s") is not None:
                rows[row["model"]] = {**row, "stored": os.path.basename(path)}
    return rows


def measure(name, backends, device, dtype, runs, warm_caches, timeout, stored=None):
    work = tempfile.mkdtemp(prefix=f"precompile_{name}_")
    rows = {b: {"model": name, "backend": b, "loads": []} for b in backends}
    if stored is not None and "inductor" in rows:
        rows["inductor"] = stored
        print(f"# {name} inductor: stored ({stored['stored']}): {stored['total_s']:.3f} s", file=sys.stderr,
              flush=True)
    measured = [b for b in backends if b != "inductor" or stored is None]
    try:
        for b in measured:
            if b.startswith("eager"):
                rows[b]["save"] = {}
                continue
            print(f"# {name} {b}: save", file=sys.stderr, flush=True)
            rows[b]["save"] = run_child(["save", name, b, device, dtype, work], os.path.join(work, f"save-{b}"),
                                        timeout)
        for i in range(runs):
            for b in measured:
                if "error" in rows[b]["save"]:
                    continue
                print(f"# {name} {b}: load {i + 1}/{runs}", file=sys.stderr, flush=True)
                caches = os.path.join(work, f"save-{b}") if warm_caches else os.path.join(work, f"load-{b}-{i}")
                rows[b]["loads"].append(run_child(["load", name, b, device, dtype, work], caches, timeout))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for b in measured:
        row = rows[b]
        ok = [x for x in row["loads"] if "error" not in x]
        for key in ("load_s", "first_call_s", "total_s"):
            row[key] = statistics.median(x[key] for x in ok) if ok else None
        row["bitwise_equal"] = all(x["bitwise_equal"] for x in ok) if ok and not b.startswith("eager") else None
    return list(rows.values())


def fmt(v, spec=".3f"):
    return "n/a" if v is None else format(v, spec)


def table(rows):
    lines = ["| model | backend | artifact KiB | load s | first call s | load + first call s (median) "
             "| / Inductor | bitwise = original |", "|---|---|---|---|---|---|---|---|"]
    inductor = {r["model"]: r["total_s"] for r in rows if r["backend"] == "inductor"}
    for r in rows:
        error = r["save"].get("error") or next((x["error"] for x in r["loads"] if "error" in x), None)
        if error:
            lines.append(f"| {r['model']} | {r['backend']} | error: {error.strip().splitlines()[-1][:120]} | | | | | |")
            continue
        base = inductor.get(r["model"])
        ratio = r["total_s"] / base if base and r["total_s"] is not None else None
        size = r["save"].get("artifact_bytes")
        backend = r["backend"] + (" (stored)" if r.get("stored") else "") + (
            " (floor: its first call)" if r["backend"].startswith("eager") else "")
        lines.append(f"| {r['model']} | {backend} | {fmt(size / 1024 if size else None, '.0f')} "
                     f"| {fmt(r['load_s'])} | {fmt(r['first_call_s'])} | {fmt(r['total_s'])} | {fmt(ratio, '.2f')} "
                     f"| {r['bitwise_equal']} |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--dtype", default=None, choices=["fp32", "bf16", "fp16"],
                        help="default: fp32 on the CPU, bf16 on CUDA")
    parser.add_argument("--models", default=None, help="comma-separated (default: the device's list)")
    parser.add_argument("--backends", default="inductor,ember")
    parser.add_argument("--runs", type=int, default=3, help="load processes per backend (the median is reported)")
    parser.add_argument("--warm-caches", action="store_true", help="load with the saving process's caches")
    parser.add_argument("--timeout", type=int, default=1800)
    parser.add_argument("--json", help="write the results here (after each model)")
    parser.add_argument("--inductor-from", default="",
                        help="comma-separated JSON files of earlier runs: their Inductor rows are reused")
    args = parser.parse_args()
    dtype = args.dtype or ("bf16" if args.device == "cuda" else "fp32")
    models = args.models.split(",") if args.models else (CUDA_MODELS if args.device == "cuda" else CPU_MODELS)
    import torch

    stored = stored_rows([f for f in args.inductor_from.split(",") if f], args.device, dtype)
    out = {"date": datetime.date.today().isoformat(), "machine": platform.node(), "cpu_count": os.cpu_count(),
           "torch": torch.__version__, "device": args.device, "dtype": dtype, "warm_caches": args.warm_caches,
           "gpu": torch.cuda.get_device_name() if args.device == "cuda" else None, "rows": []}
    for name in models:
        out["rows"] += measure(name, args.backends.split(","), args.device, dtype, args.runs, args.warm_caches,
                               args.timeout, stored.get(name))
        print(table(out["rows"]), flush=True)
        if args.json:  # after each model: a run cut short keeps the models it finished
            with open(args.json, "w") as f:
                json.dump(out, f, indent=2)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "child":
        child(*sys.argv[2:8])
    else:
        main()
