"""The CUDA path: graphs whose inputs are CUDA tensors compile with ember's CUDA printer
and NVRTC (csrc/runtime/cuda_compiled_graph.h) and run on torch's current stream.

Python's part is small: find NVRTC (the nvidia-cuda-nvrtc pip package, which C++ cannot
locate by itself), name the device's architecture, and run the steps -- buffers are torch
CUDA tensors from the caching allocator, kernels are launched by C++ on the stream torch
says is current, extern ops are ATen calls as on CPU. Nothing synchronizes the host.
"""
from __future__ import annotations

import functools
import glob
import os
import threading
import time

import torch
import torch.autograd.profiler as _profiler

from .. import _core, counters as stats, logs
from .runner import GraphRunner


@functools.lru_cache(maxsize=1)
def nvrtc_dirs() -> tuple[str, ...]:
    """Directories that may hold libnvrtc.so.*: the nvidia pip packages' lib/ folders
    (nvidia-cuda-nvrtc; torch's CUDA wheels depend on it), then a CUDA toolkit's."""
    dirs = []
    try:
        import nvidia

        for base in nvidia.__path__:
            dirs += sorted({os.path.dirname(p) for p in glob.glob(os.path.join(base, "*", "lib", "libnvrtc.so*"))},
                           reverse=True)  # cu13 before cu12
    except ImportError:
        pass
    for root in (os.environ.get("CUDA_HOME", ""), "/usr/local/cuda"):
        if root and os.path.isdir(os.path.join(root, "lib64")):
            dirs.append(os.path.join(root, "lib64"))
    return tuple(dirs)


def nvrtc_info() -> dict:
    """{'available', 'identity', 'path', 'reason'}: which NVRTC ember uses, or why none."""
    return _core.nvrtc_info(list(nvrtc_dirs()))


def device_arch(device: torch.device) -> str:
    major, minor = torch.cuda.get_device_capability(device)
    return f"sm_{major}{minor}"


def graph_device(example_inputs) -> torch.device | None:
    """The CUDA device of a graph's tensor inputs, or None for a CPU graph."""
    for x in example_inputs:
        if isinstance(x, torch.Tensor) and x.device.type == "cuda":
            return torch.device("cuda", x.device.index if x.device.index is not None else torch.cuda.current_device())
    return None


def compile_cuda(text: str, device: torch.device | None, cfg, debug_dir: str = "", arch: str | None = None):
    """A CudaCompiledGraph for graph text; device None compiles the cubin only (no GPU)."""
    return _core.compile_cuda(
        text,
        arch=arch or device_arch(device),
        device=-1 if device is None else device.index,
        fuse=cfg.fuse,
        pad_matmuls=cfg.pad_matmuls,
        emulate_precision_casts=cfg.emulate_precision_casts,
        descriptive_names=cfg.descriptive_names,
        # Atomic scatter-adds add in no fixed order: under torch.use_deterministic_algorithms
        # index_add and scatter_add stay ATen's (its deterministic path sorts the indices).
        deterministic=torch.are_deterministic_algorithms_enabled(),
        disk_cache=cfg.disk_cache,
        cache_dir=cfg.cache_dir or "",
        debug_dir=debug_dir,
        nvrtc_dirs=list(nvrtc_dirs()),
    )


class CudaGraphRunner(GraphRunner):
    """GraphRunner with buffers on a CUDA device and kernel groups launched on the current
    stream. A graph with symbols has a plan per set of symbol values, as on the CPU, and
    passes the values to every launch. Workspaces (the arena of intermediates) are kept
    per plan and stream: a workspace is reused only by calls on the stream whose earlier
    kernels used it, so stream order keeps them apart."""

    def __init__(self, cg, imported, attr_tensors: list, device: torch.device, prepare_weights: bool = True):
        self.device = device
        self._replay = None  # mode="reduce-overhead": a CudaGraphReplay (cudagraphs.py)
        self._tuning = None  # max-autotune: the scratch bytes the first call times variants in
        self._tuning_scratch = None  # and that scratch, while the first call runs
        # Inputs that are 0-d CPU tensors (fx_import types them as device values), found at
        # the first call (Dynamo guards every input's device, so the set never changes).
        self._host_inputs = None
        # (CUDA stream, dtype) -> (the CPU scalars' values, their device copies) of the last call.
        self._device_scalars = {}
        # Constants on the CPU (a torch.tensor(...) in the model) move to the device once,
        # unless fx_import left them opaque (ATen's, on the CPU).
        opaque = {b["input_index"] for b in cg.buffers if b["kind"] == "input" and b["opaque"]}
        first = imported.num_placeholders
        attr_tensors = [t.to(device) if isinstance(t, torch.Tensor) and t.device.type == "cpu" and first + j not in opaque
                        else t for j, t in enumerate(attr_tensors)]
        super().__init__(cg, imported, attr_tensors, prepare_weights=prepare_weights)

    def prepare_autotune(self):
        """max-autotune: the kernels' cached launch choices applied now, the variants of the
        rest compiled, to be timed by the first call (csrc/runtime/cuda_autotune.cpp). A
        graph with symbols keeps its kernels' default launches."""
        if self.cg.num_symbols:
            logs.logger("perf_hints").info("max-autotune times static graphs only: a graph with symbolic "
                                           "sizes keeps its kernels' default launches")
            return
        scratch = self.cg.prepare_autotune(f"{torch.cuda.get_device_name(self.device)}|{device_arch(self.device)}")
        stats.count_autotune(0, sum(d["cached"] for d in self.cg.autotune_decisions))
        if self.cg.autotune_pending:
            self._tuning = scratch
            self._tuning_lock = threading.Lock()

    def use_cuda_graphs(self, name: str, static_inputs: list[int] | None = None):
        """Calls from now on replay CUDA graph recordings (python/ember/runtime/cudagraphs.py);
        `static_inputs`: the indices of parameters, read in place."""
        from .cudagraphs import CudaGraphReplay

        self._replay = CudaGraphReplay(self, name, static_inputs)
        return self._replay

    def __call__(self, args):
        if _profiler._is_profiler_enabled:
            return self._profiled_call(args)
        return self._replay(args) if self._replay is not None else self.run(args)

    def _run_profiled(self, args):
        # A replay launches no kernel from the host: the trace shows the graph's range, and
        # the device's kernels under it.
        return self._replay(args) if self._replay is not None else self.run(args, self._step_names())

    def run(self, args, step_names=None):
        """One call of the graph's kernels and ATen calls, never a recording's replay."""
        if self._host_inputs is None:
            # The 0-d CPU inputs fx_import typed as device values (not opaque ones) that the
            # graph reads (Dynamo's per-call tensors of float attributes mostly are not).
            opaque = {b["input_index"] for b in self.cg.buffers if b["kind"] == "input" and b["opaque"]}
            read = self.inputs_read()
            self._host_inputs = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and
                                 a.device.type == "cpu" and a.dim() == 0 and i not in opaque and i in read]
        if self._host_inputs:
            args = self._inputs_to_device(args)
        if self._tuning is not None:
            return self._tuned_call(args)
        return GraphRunner.run(self, args, step_names)

    def _inputs_to_device(self, args):
        """`args` with its CPU scalars on the device: one host-to-device copy per dtype (a
        decoder under dynamic=True has one per norm layer), stream-ordered, no device sync.
        The values are mostly the same on every call (Dynamo passes a module's float
        attributes, such as eps, as 0-d tensors made per call): while they are, the device
        copies of the last call on this stream serve again, and the call makes no copy and
        no tensor per value."""
        args = list(args)
        by_dtype = {}
        for i in self._host_inputs:
            by_dtype.setdefault(args[i].dtype, []).append(i)
        stream = None
        for dtype, indices in by_dtype.items():
            host = torch.stack([args[i] for i in indices])
            if host.device.type != "cpu":  # a recording's static copies, already on the device
                on_device = host.unbind()
            else:
                stream = stream or torch.cuda.current_stream(self.device).cuda_stream
                last = self._device_scalars.get((stream, dtype))
                if last is not None and torch.equal(last[0], host):
                    on_device = last[1]
                else:
                    on_device = host.to(self.device, non_blocking=True).unbind()
                    self._device_scalars[(stream, dtype)] = (host, on_device)
            for i, value in zip(indices, on_device):
                args[i] = value
        return args

    def _tuned_call(self, args):
        """The first call under max-autotune: its kernel steps time their kernels' launch
        variants on the call's buffers before running (concurrent first calls wait for it)."""
        with self._tuning_lock:
            if self._tuning is None:  # another thread's first call timed them
                return GraphRunner.run(self, args)
            t0 = time.perf_counter()
            out = GraphRunner.run(self, args)
            if not self.cg.autotune_pending:
                self._tuning = None
                self._tuning_scratch = None
                stats.count_autotune(sum(not d["cached"] for d in self.cg.autotune_decisions), 0,
                                     time.perf_counter() - t0)
            return out

    def plan_of(self, args):
        """The plan of a call with `args` (made now for sizes not called yet)."""
        return self._plan or self._plan_for(args)

    def drop_workspaces(self, plan):
        """Frees `plan`'s idle workspaces on every stream: its sizes replay a CUDA graph
        recording from now on (cudagraphs.py), which has its own memory."""
        plan.stream_workspaces.clear()

    def _call_context(self, plan):
        stream = torch.cuda.current_stream(self.device).cuda_stream
        # Workspaces are per plan (a graph with symbols sizes its arena per call's sizes)
        # and per stream (a workspace in use on one stream is not free on another).
        free = plan.stream_workspaces.setdefault(stream, [])
        if self._tuning is not None:  # max-autotune's first call: stores of timed variants go to scratch
            if self._tuning_scratch is None:
                self._tuning_scratch = torch.empty(max(self._tuning, 1), dtype=torch.uint8, device=self.device)
            return free, self.cg.run_step_tuning, (stream, self._tuning_scratch.data_ptr())
        if plan.symbols is None:
            return free, self.cg.run_step, (stream,)
        return free, self.cg.run_step, (stream, plan.symbols)


def compile_cuda_code(imported, device: torch.device, cfg, debug_dir: str = ""):
    """The CudaCompiledGraph of an imported graph on `device`, loaded there. What the CUDA
    path cannot do yet raises UnsupportedGraph (the graph runs eagerly, with the reason in
    the fallback log and in explain); an NVRTC or driver failure raises."""
    from ..frontend.fx_import import UnsupportedGraph

    info = nvrtc_info()
    if not info["available"]:
        raise UnsupportedGraph(info["reason"].splitlines()[0] if info["reason"] else "NVRTC is not available")
    try:
        return compile_cuda(imported.text, device, cfg, debug_dir)
    except _core.CudaUnsupported as e:
        raise UnsupportedGraph(str(e)) from None


def compile_cuda_graph(imported, attr_tensors: list, device: torch.device, cfg, debug_dir: str = "", compiled=None):
    """(CudaCompiledGraph, CudaGraphRunner) for an imported graph on `device`; `compiled`:
    compile_cuda_code's result, made already."""
    cg = compiled or compile_cuda_code(imported, device, cfg, debug_dir)
    runner = CudaGraphRunner(cg, imported, attr_tensors, device, prepare_weights=cfg.prepare_weights)
    if cfg.max_autotune:
        runner.prepare_autotune()
    return cg, runner
