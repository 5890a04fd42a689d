"""Why ember's BatchNorm + ReLU kernels after a convolution run 1.4-1.9x slower since the
morning of 2026-11-27 (H200: resnet50 `ember_poi_sqrt_reciprocal_relu_add_plus2_3`, 6 calls,
105 -> 185 us a step; the same kernels with a residual add unchanged), while their
generated CUDA, launch geometry, arena plan and runner are the same in both trees.

One process, one GPU, about a minute:

    python3 benchmarks/bn_relu_regression.py [--model resnet50] [--kernel SUFFIX ...] [--ember DIR]

1. The suite's model at its full size, compiled by ember: each kernel step's pointers are
   checked for 16-byte alignment at every launch (a misaligned one sends a kernel to its
   scalar path), then 5 profiled steps give each kernel's device time per call.
2. The same kernels alone, from the compiled graph's CUDA source, on buffers of the model's
   sizes, NVRTC with ember's options (--fmad=false, since 081414a) and with --fmad=true (the
   morning tree's): vector path with the convolution's output cold in L2 and just written
   (warm), and the scalar path (one parameter pointer 2 bytes off). Times are CUDA events
   over 50 launches, in us per call.

Reading: if (2)'s vector path with fmad=false is near the model's time (~30 us for _3 at
batch 64) while fmad=true is near the morning's (~17.6 us), NVRTC's --fmad=false is the
cause; if both are near 17 us and (1) shows misaligned pointers, the scalar path is; if both
are near 17 us and (1) shows none, the kernel is slowed by its neighbours in the model (L2
state, the convolution before it), not by its code.
"""
import argparse
import ctypes
import os
import re
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

FAMILY = "ember_poi_sqrt_reciprocal_relu_add_plus2_"


def ember_cuda_module():
    """ember's CUDA runtime module: ember.runtime.cuda, or ember.cuda in trees before the
    subpackages (the morning's 481e424), so that one script measures both trees."""
    try:
        from ember.runtime import cuda
    except ImportError:
        from ember import cuda
    return cuda


def build_model(name):
    from suite import registry

    entry = next(iter(registry.select(name)))
    model, inputs = entry.build("cuda", torch.bfloat16, "full")
    return model.eval(), inputs


def compile_model(model, inputs):
    """(compiled step, [CudaCompiledGraph], alignment record) with the graphs' launches checked."""
    import ember  # noqa: F401  registers the backend
    from suite.registry import call

    ember_cuda = ember_cuda_module()
    graphs = []  # the CudaCompiledGraphs called
    misaligned = {}  # (graph id, step) -> set of (buffer, ptr % 16)
    orig_context = ember_cuda.CudaGraphRunner._call_context

    def checked_context(self, plan):
        free, launch, extra = orig_context(self, plan)
        cg = self.cg
        if not any(g is cg for g in graphs):
            graphs.append(cg)

        def checked(si, ptrs, *rest):
            args = cg.steps[si][2]
            for b, p in zip(args, ptrs):
                if p % 16:
                    misaligned.setdefault((id(cg), si), set()).add((b, p % 16))
            return launch(si, ptrs, *rest)
        return free, checked, extra

    ember_cuda.CudaGraphRunner._call_context = checked_context
    fn = torch.compile(model, backend="ember")

    def step():
        with torch.no_grad():
            return call(fn, inputs)
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    return step, graphs, misaligned


def profile_kernels(step, steps=5):
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    per = {}
    kernels = sorted((e for e in prof.events() if e.device_type != torch.autograd.DeviceType.CPU),
                     key=lambda e: e.time_range.start)  # the kernels, as benchmarks/suite/profiling.py counts them
    for e in kernels:
        t = per.setdefault(e.name, [0.0, 0])
        t[0] += e.time_range.elapsed_us()
        t[1] += 1
    n = len(kernels) // steps
    sequence = [(e.name, e.time_range.elapsed_us()) for e in kernels[-n:]]  # the last step's, in order
    return {k: (v[0] / steps, v[1] / steps) for k, v in per.items()}, sequence


# --- the kernels alone ---------------------------------------------------------------------

def nvrtc_cubin(source, name, fmad):
    path = ember_cuda_module().nvrtc_info()["path"]
    d = os.path.dirname(path)
    for f in sorted(os.listdir(d)):
        if f.startswith("libnvrtc-builtins.so"):
            ctypes.CDLL(os.path.join(d, f), mode=ctypes.RTLD_GLOBAL)
    lib = ctypes.CDLL(path)
    prog = ctypes.c_void_p()
    assert lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), name.encode(), 0, None, None) == 0
    major, minor = torch.cuda.get_device_capability()
    opts = ["--std=c++17", "-default-device", "--ftz=false", "--prec-div=true", "--prec-sqrt=true",
            f"--fmad={'true' if fmad else 'false'}", f"--gpu-architecture=sm_{major}{minor}"]
    arr = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
    rc = lib.nvrtcCompileProgram(prog, len(opts), arr)
    n = ctypes.c_size_t()
    if rc:
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
        log = ctypes.create_string_buffer(n.value)
        lib.nvrtcGetProgramLog(prog, log)
        raise RuntimeError(log.value.decode()[:2000])
    lib.nvrtcGetCUBINSize(prog, ctypes.byref(n))
    buf = ctypes.create_string_buffer(n.value)
    lib.nvrtcGetCUBIN(prog, buf)
    return buf.raw


class Driver:
    def __init__(self):
        self.cu = ctypes.CDLL("libcuda.so.1")
        self.mods = []

    def function(self, cubin, name):
        mod, fn = ctypes.c_void_p(), ctypes.c_void_p()
        assert self.cu.cuModuleLoadData(ctypes.byref(mod), cubin) == 0
        assert self.cu.cuModuleGetFunction(ctypes.byref(fn), mod, name.encode()) == 0
        self.mods.append((mod, cubin))
        return fn

    def launch(self, fn, grid, block, ptrs):
        vals = [ctypes.c_uint64(p) for p in ptrs]
        params = (ctypes.c_void_p * len(vals))(*[ctypes.cast(ctypes.byref(v), ctypes.c_void_p) for v in vals])
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        rc = self.cu.cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, 0, stream, params, None)
        assert rc == 0, rc


def kernel_source(cg, function):
    src = cg.source
    first = src.index('extern "C"')
    m = re.search(r'extern "C" __global__ void __launch_bounds__\(\d+\) ' + function + r"\(", src)
    end = src.index("\n}\n", m.start()) + 3
    return src[:first] + src[m.start():end]


def time_alone(drv, cg, kernel, grid, fmad, reps=50):
    """us per call of `kernel` (a cg.kernels entry) on `grid` blocks: vector path with its
    input cold / warm in L2, scalar path."""
    fn = drv.function(nvrtc_cubin(kernel_source(cg, kernel["function"]), kernel["function"] + ".cu", fmad),
                      kernel["function"])
    bufs = {b["id"]: b for b in cg.buffers}
    tensors = []
    for b in kernel["args"]:
        sizes, strides = bufs[b]["sizes"], bufs[b]["strides"]
        extent = 1 + sum((s - 1) * st for s, st in zip(sizes, strides))
        t = torch.empty(extent + 64, dtype=torch.bfloat16, device="cuda")
        t.uniform_(0.5, 1.5)  # running_var > 0, no NaN
        tensors.append(t)
    big = [b for b, t in zip(kernel["args"], tensors) if t.numel() > 1 << 16]
    first_read = next(i for i, b in enumerate(kernel["args"]) if b in big and b not in kernel["writes"])
    source = tensors[first_read].clone()
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    results = {}
    for case in ("vector, input cold", "vector, input warm", "scalar (param +2 bytes), cold"):
        ptrs = [t.data_ptr() for t in tensors]
        if case.startswith("scalar"):
            ptrs[0] += 2
        times = []
        for _ in range(reps):
            if "cold" in case:
                flush.fill_(1)
            else:
                tensors[first_read].copy_(source)  # written just before, as the convolution does
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            drv.launch(fn, grid, kernel["block"], ptrs)
            b.record()
            b.synchronize()
            times.append(1000 * a.elapsed_time(b))
        results[case] = statistics.median(times)
    return results


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--kernel", action="append", help="kernel name suffixes to time alone (default: 3 and 32)")
    ap.add_argument("--ember", help="import ember from this directory (another tree's build, e.g. installed "
                                    "with pip --target), ahead of an editable install's import hook")
    args = ap.parse_args()
    if args.ember:
        sys.meta_path[:] = [f for f in sys.meta_path if type(f).__name__ != "ScikitBuildRedirectingFinder"]
        sys.path.insert(0, args.ember)
    import ember
    print("ember:", ember.__file__)
    print("device:", torch.cuda.get_device_name(), "torch", torch.__version__)
    model, inputs = build_model(args.model)
    step, graphs, misaligned = compile_model(model, inputs)
    prof, sequence = profile_kernels(step)
    total = sum(us for us, _ in prof.values())
    print(f"\n{args.model}: device time {total:.1f} us a step; the family's kernels (us a step, calls, us a call):")
    for name, (us, calls) in sorted(prof.items(), key=lambda kv: -kv[1][0]):
        if name.startswith(FAMILY):
            print(f"  {us:8.1f} {calls:4.0f} {us / calls:7.2f}  {name}")
    print(f"\nthe last profiled step's {len(sequence)} kernels in order (us):")
    for i, (name, us) in enumerate(sequence):
        print(f"  {i:3d} {us:8.1f}  {name[:110]}")
    print("\nkernel steps launched with a pointer not 16-byte aligned (scalar paths):",
          {k[1]: sorted(v) for k, v in misaligned.items()} or "none")

    drv = Driver()
    wanted = args.kernel or ["3", "32"]
    print("\nalone (us a call, median of 50): kernel, NVRTC --fmad, blocks, case")
    for cg in graphs:
        seen = set()
        resources = cg.kernel_resources
        for i, k in enumerate(cg.kernels):
            suffix = k["function"].rsplit("_", 1)[-1]
            if not k["function"].startswith(FAMILY) or suffix not in wanted or k["function"] in seen:
                continue
            seen.add(k["function"])
            r = resources[i]
            print(f"  {k['function']}: {r['registers']} registers, {r['blocks_per_sm']} blocks an SM, "
                  f"launched on {r['launch_grid']} blocks (planned {k['grid']}) of {k['block']}")
            for fmad in (False, True):
                for grid in sorted({r["launch_grid"], k["grid"]}):
                    for case, us in time_alone(drv, cg, k, grid, fmad).items():
                        print(f"  {k['function'][len(FAMILY) - 1:]:>5} fmad={str(fmad).lower():5} {grid:5d} {us:7.2f}  {case}")


if __name__ == "__main__":
    main()
