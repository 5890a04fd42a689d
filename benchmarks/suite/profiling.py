"""What ran in a step, from torch.profiler: kernels per step by kind, ATen calls per step, and
the top kernels by device time (GPU) or CPU time (CPU), so that a slower model says why.

GPU: every device event (kernel, memcpy, memset) is a kernel; its kind comes from its name:
ember's kernels are named ember_*, Inductor's triton_*, cuBLAS / cuDNN / flash-attention
kernels by their libraries' names, ATen's own elementwise / reduction / copy kernels by
their at::native namespace.

CPU: ember's kernel groups run inside its shared objects, where the profiler sees nothing;
under a profiler ember's runner calls each group inside a range named after its kernels,
which named_cpu_kernels (below) names after the graph too. Inductor's C++ kernels are seen
through its own cpp.enable_kernel_profile option (set by the measuring process). ATen calls are the
top-level aten:: ops (not nested in another aten:: op; mkldnn:: and mkl:: ops count as
ATen's), their time including their children.

An "ATen call" counts when it does work: on the GPU, when it launched a kernel; on the
CPU, when it is not a metadata op (views, empty tensors, shape queries).
"""
from __future__ import annotations

import contextlib
import re

STEP_NAME = "suite_step"

# ATen ops that only make views or empty tensors, or read metadata: not work.
METADATA_OPS = frozenset(f"aten::{n}" for n in (
    "empty", "empty_strided", "empty_like", "as_strided", "view", "_reshape_alias", "alias", "detach", "detach_",
    "lift_fresh", "t", "transpose", "permute", "expand", "expand_as", "select", "slice", "unsqueeze", "squeeze",
    "reshape", "_unsafe_view", "resize_", "set_", "record_stream", "result_type", "unbind", "split", "chunk",
    "narrow", "size", "stride", "numel", "dim", "is_same_size", "view_as", "flatten", "unflatten", "movedim",
    "_has_compatible_shallow_copy_type", "is_nonzero", "contiguous", "to", "_to_copy_meta", "broadcast_tensors",
    "split_with_sizes", "new_empty", "new_empty_strided", "zeros_like_meta", "_nested_tensor_size",
))
# Op namespaces whose calls are library calls: ATen's, and the oneDNN / MKL ops that ember's
# prepared weights (python/ember/runtime/prepared.py) and Inductor's weight prepacking call.
OP_PREFIXES = ("aten::", "mkldnn::", "mkl::")
_LAUNCHES = ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernelEx", "cudaGraphLaunch",
             "cudaMemcpyAsync", "cudaMemsetAsync")


def kernel_kind(name: str) -> str:
    """ember, triton (Inductor), gemm, conv, attention, aten (ATen's own kernels), copy, other."""
    if name.startswith("ember_") or name.startswith("ember["):
        return "ember"
    if name.startswith("triton_") or name.startswith("cpp_fused") or "cpp_fused" in name:
        return "triton" if name.startswith("triton_") else "inductor_cpp"
    if name.startswith("Memcpy") or name.startswith("Memset"):
        return "copy"
    low = name.lower()
    if any(s in low for s in ("flash", "fmha", "attention", "_attn")):
        return "attention"
    if any(s in low for s in ("gemm", "gemv", "xmma", "nvjet", "cutlass", "cublas", "splitkreduce", "matmul")):
        return "gemm"
    if any(s in low for s in ("conv", "cudnn", "winograd", "dgrad", "wgrad", "fprop")):
        return "conv"
    if "at::native" in name or "at_cuda_detail" in name or "(anonymous namespace)::" in name or "c10::" in name:
        return "aten"
    return "other"


@contextlib.contextmanager
def named_cpu_kernels(records=()):
    """While active, ember's CPU kernel groups show in the profiler as ranges named
    ember[<graph>]_<kernel>[+<kernel>...] (a group's kernels run in one call; the graph is
    named as ember's records name it, given `records`). A profiling aid only: ember's own
    code is unchanged, and the patch is removed on exit.

    The names are the runner's own ranges' (GraphRunner._step_names, one _RecordFunctionFast
    per kernel step), renamed: a range added around the runner's call would be charged to
    ember's kernels alone. A torch.profiler.record_function range, as this used to add,
    reported 13 us for an empty body under the profiler on the CPU suite's VM (its exit is
    a dispatcher call from Python, timed inside the range), where Inductor's kernels time
    themselves from C++ (RECORD_FUNCTION): BART-small's 16 ember kernel groups read 754
    us a step against 431 us for the calls they wrapped, and its embeddings + LayerNorm
    kernel 2-3x Inductor's when it was not slower (issue 24)."""
    try:
        from ember.runtime.runner import GraphRunner
    except ImportError:
        yield
        return
    original = GraphRunner._step_names
    graph_names = {id(r.cg): r.name for r in records if getattr(r, "cg", None) is not None}
    names_by_graph: dict[int, dict[int, str]] = {}

    def names_of(cg) -> dict[int, str]:
        names = names_by_graph.get(id(cg))
        if names is None:
            g = graph_names.setdefault(id(cg), f"g{len(graph_names)}")
            names = names_by_graph[id(cg)] = {
                si: f"ember[{g}]_" + "+".join(cg.kernels[k]["name"].removeprefix("ember_") for k in payload)
                for si, (kind, payload, _) in enumerate(cg.steps) if kind == "kernels" and payload}
        return names

    def named(self):
        if str(getattr(self, "device", "cpu")) != "cpu":
            return original(self)
        return names_of(self.cg)

    GraphRunner._step_names = named
    try:
        yield
    finally:
        GraphRunner._step_names = original


def _is_device(e) -> bool:
    from torch.autograd import DeviceType

    return e.device_type != DeviceType.CPU


def _kernel_events(events, cpu_events) -> list:
    """The device events that ran on the device (kernels, copies): not the device-side
    copies of record_function ranges (gpu_user_annotation), which carry the CPU range's name."""
    # A CPU range's name on a device event is its annotation copy, unless the name is a
    # kernel's: Inductor launches each Triton kernel inside a CPU range named after it, and
    # those kernels must count.
    ranges = {e.name for e in cpu_events if not e.name.startswith(OP_PREFIXES) and kernel_kind(e.name) == "other"}
    return [e for e in events if _is_device(e) and not getattr(e, "is_user_annotation", False)
            and e.name not in ranges and "annotation" not in str(getattr(e, "activity_type", "")).lower()]


def _aten_ancestor(e) -> bool:
    p = e.cpu_parent
    while p is not None:
        if p.name.startswith(OP_PREFIXES):
            return True
        p = p.cpu_parent
    return False


def _launched(e) -> bool:
    stack = [e]
    while stack:
        x = stack.pop()
        if x.name in _LAUNCHES or getattr(x, "kernels", None):
            return True
        stack.extend(x.cpu_children)
    return False


_CPU_GROUP = re.compile(r"ember\[(.+?)\]_(.*)")


def kernels_in(name: str) -> int:
    """Kernels behind one profiler name: a CPU group's name lists each of its kernels (the
    suite's names join them with '+', the runner's own with ', ')."""
    m = _CPU_GROUP.match(name)
    if m:
        return len(m.group(2).split("+"))
    return len(name.split(", ")) if name.startswith("ember_") else 1


def _ops_of(name: str, ops: dict) -> str | None:
    cpu_group = _CPU_GROUP.match(name)
    keys = ([f"{cpu_group.group(1)}:ember_{k}" for k in cpu_group.group(2).split("+")] if cpu_group
            else [re.sub(r"_partial$", "", name.split("(")[0].split("<")[0].strip().split(" ")[-1])])
    found = sorted({op for k in keys for op in ops.get(k, "").split(",") if op})
    return ",".join(found)[:200] if found else None


def _top(totals: dict, counts: dict, steps: int, total_us: float, n: int, ops: dict) -> list[dict]:
    out = []
    for name, us in sorted(totals.items(), key=lambda kv: -kv[1])[:n]:
        entry = {"name": name[:160], "kind": kernel_kind(name) if not name.startswith(OP_PREFIXES) else "aten_call",
                 "us_per_step": round(us / steps, 2), "calls_per_step": round(counts[name] / steps, 2),
                 "share": round(us / total_us, 4) if total_us else 0.0}
        if name.startswith("ember") and _ops_of(name, ops):
            entry["ops"] = _ops_of(name, ops)
        out.append(entry)
    return out


def summarize(events, steps: int, device: str, top: int = 12, kernel_ops: dict | None = None) -> dict:
    """The per-step figures of `steps` profiled steps (events: prof.events())."""
    kernel_ops = kernel_ops or {}
    step_us = [e.time_range.elapsed_us() for e in events if e.name == STEP_NAME and not _is_device(e)]
    aten_calls, aten_meta = {}, 0
    cpu_events = [e for e in events if not _is_device(e)]
    for e in cpu_events:
        if not e.name.startswith(OP_PREFIXES) or _aten_ancestor(e):
            continue
        work = _launched(e) if device == "cuda" else e.name not in METADATA_OPS
        if work:
            aten_calls[e.name] = aten_calls.get(e.name, 0) + 1
        else:
            aten_meta += 1
    d = {"steps": steps, "step_us": round(sum(step_us) / len(step_us), 2) if step_us else None,
         "aten_calls_per_step": round(sum(aten_calls.values()) / steps, 2),
         "aten_metadata_calls_per_step": round(aten_meta / steps, 2),
         "aten_calls": {k: round(v / steps, 2) for k, v in sorted(aten_calls.items(), key=lambda kv: -kv[1])[:20]}}
    totals, counts = {}, {}
    if device == "cuda":
        for e in _kernel_events(events, cpu_events):
            totals[e.name] = totals.get(e.name, 0.0) + e.time_range.elapsed_us()
            counts[e.name] = counts.get(e.name, 0) + 1
    else:
        for e in cpu_events:
            kind = kernel_kind(e.name)
            is_kernel = kind in ("ember", "inductor_cpp")
            if is_kernel or (e.name.startswith(OP_PREFIXES) and not _aten_ancestor(e) and e.name not in METADATA_OPS):
                totals[e.name] = totals.get(e.name, 0.0) + e.time_range.elapsed_us()
                counts[e.name] = counts.get(e.name, 0) + 1
    by_kind: dict[str, dict] = {}
    for name, us in totals.items():
        kind = "aten_call" if name.startswith(OP_PREFIXES) else kernel_kind(name)
        k = by_kind.setdefault(kind, {"kernels_per_step": 0.0, "us_per_step": 0.0})
        k["kernels_per_step"] += counts[name] * kernels_in(name) / steps
        k["us_per_step"] += us / steps
    for k in by_kind.values():
        k["kernels_per_step"] = round(k["kernels_per_step"], 2)
        k["us_per_step"] = round(k["us_per_step"], 2)
    total_us = sum(totals.values())
    d["device_us_per_step" if device == "cuda" else "attributed_cpu_us_per_step"] = round(total_us / steps, 2)
    d["by_kind"] = by_kind
    d["kernels_per_step"] = round(sum(c * kernels_in(n) for n, c in counts.items() if not n.startswith(OP_PREFIXES))
                                  / steps, 2)
    d["top"] = _top(totals, counts, steps, total_us, top, kernel_ops)
    if device == "cuda":  # every ember kernel, for bandwidth.py (measure.py moves it out of the profile)
        d["ember_kernels"] = {n: {"us": us / steps, "calls": counts[n] / steps} for n, us in totals.items()
                              if kernel_kind(n) == "ember"}
    return d


def kernel_ops(records) -> dict:
    """ember kernel function name -> the ATen ops it fuses ("add,mul,var_mean"), from the
    backend's graph records: by "<graph>:<name>", and by name alone (the union over the
    graphs that have a kernel of that name, as the GPU profile names them)."""
    ops: dict[str, set] = {}
    for r in records:
        cg, imported = getattr(r, "cg", None), getattr(r, "imported", None)
        if cg is None or imported is None:
            continue
        for k in cg.kernels:
            names = set()
            for o in k.get("origins", []):
                op = imported.node_ops.get(o, "") if isinstance(imported.node_ops, dict) else imported.node_ops[o]
                names.add(op.removeprefix("aten.").split(".")[0])
            ops.setdefault(k.get("function", k["name"]), set()).update(names)
            ops.setdefault(f"{r.name}:{k['name']}", set()).update(names)
    return {k: ",".join(sorted(v))[:200] for k, v in ops.items()}
