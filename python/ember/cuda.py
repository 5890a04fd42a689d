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

import torch

from . import _core
from .runtime import GraphRunner


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

    def __init__(self, cg, imported, attr_tensors: list, device: torch.device):
        self.device = device
        self._replay = None  # mode="reduce-overhead": a CudaGraphReplay (cudagraphs.py)
        super().__init__(cg, imported, attr_tensors)

    def use_cuda_graphs(self, name: str, static_inputs: list[int] | None = None):
        """Calls from now on replay CUDA graph recordings (python/ember/cudagraphs.py);
        `static_inputs`: the indices of parameters, read in place."""
        from .cudagraphs import CudaGraphReplay

        self._replay = CudaGraphReplay(self, name, static_inputs)

    def __call__(self, args):
        return self._replay(args) if self._replay is not None else GraphRunner.__call__(self, args)

    def run(self, args):
        """One call of the graph's kernels and ATen calls, never a recording's replay."""
        return GraphRunner.__call__(self, args)

    def workspaces_of_stream(self, stream: int):
        """A function that takes away, and returns, the free workspaces of every plan on
        `stream` (a recording's memory, which no other call may use)."""
        def take():
            plans = [self._plan] if self._plan is not None else list(self._plans.values())
            return [w for plan in plans for w in plan.stream_workspaces.pop(stream, [])]
        return take

    def _call_context(self, plan):
        stream = torch.cuda.current_stream(self.device).cuda_stream
        run_step = self.cg.run_step
        # Workspaces are per plan (a graph with symbols sizes its arena per call's sizes)
        # and per stream (a workspace in use on one stream is not free on another).
        free = plan.stream_workspaces.setdefault(stream, [])
        if plan.symbols is None:
            return free, lambda si, ptrs: run_step(si, ptrs, stream)
        symbols = plan.symbols
        return free, lambda si, ptrs: run_step(si, ptrs, stream, symbols)


def compile_cuda_graph(imported, attr_tensors: list, device: torch.device, cfg, debug_dir: str = ""):
    """(CudaCompiledGraph, CudaGraphRunner) for an imported graph on `device`. What the
    CUDA path cannot do yet raises UnsupportedGraph (the graph runs eagerly, with the
    reason in the fallback log and in explain); an NVRTC or driver failure raises."""
    from .fx_import import UnsupportedGraph

    info = nvrtc_info()
    if not info["available"]:
        raise UnsupportedGraph(info["reason"].splitlines()[0] if info["reason"] else "NVRTC is not available")
    try:
        cg = compile_cuda(imported.text, device, cfg, debug_dir)
    except _core.CudaUnsupported as e:
        raise UnsupportedGraph(str(e)) from None
    return cg, CudaGraphRunner(cg, imported, attr_tensors, device)
