"""The fuzzer's CUDA side without a GPU: the CUDA that ember generates for fuzz programs,
compiled by NVRTC (which needs no GPU), so that CI catches CUDA codegen errors on random
graphs (tests/python/test_fuzz_cuda.py); and the checks a GPU campaign makes before it
starts."""
from __future__ import annotations

import dataclasses

import torch

from .generator import generate
from .programs import Program, compile_source, make_inputs


@dataclasses.dataclass
class NvrtcResult:
    graphs: int = 0     # ATen graphs the program traced to
    compiled: int = 0   # compiled to cubins
    kernels: int = 0
    refused: list = dataclasses.field(default_factory=list)  # what the CUDA path refuses (runs eagerly)
    errors: list = dataclasses.field(default_factory=list)   # NVRTC or internal errors: bugs
    invalid: str = ""   # eager itself fails (a minimizer's candidate may be invalid)


def nvrtc_compile(prog: Program, cache_dir: str, arch: str = "sm_90") -> NvrtcResult:
    """Traces `prog` to ATen graphs as the backend's AOTAutograd path does (on CPU tensors:
    the graph text carries no device) and compiles each graph's CUDA for `arch`."""
    import torch.fx
    from torch._functorch.aot_autograd import aot_module_simplified

    from .. import _core
    from ..runtime import cuda
    from ..frontend.decompositions import decomposition_table
    from ..config import config
    from ..frontend.fx_import import UnsupportedGraph, import_graph

    cfg = config.update({"cache_dir": cache_dir, "emulate_precision_casts": True})
    out = NvrtcResult()

    def compiler(gm, example_inputs):
        out.graphs += 1
        try:
            imported = import_graph(gm)
            cg = cuda.compile_cuda(imported.text, None, cfg, arch=arch)
        except (UnsupportedGraph, _core.CudaUnsupported) as e:
            out.refused.append(str(e).splitlines()[0][:200])
        except Exception as e:
            out.errors.append(f"{type(e).__name__}: {e}"[:4000])
        else:
            out.compiled += 1
            out.kernels += len(cg.kernels)
        return gm

    fn = compile_source(prog)
    inputs = make_inputs(prog)
    try:
        fn(*inputs)
    except Exception as e:
        out.invalid = f"{type(e).__name__}: {e}"
        return out
    with torch.no_grad():
        aot_module_simplified(torch.fx.symbolic_trace(fn), inputs, fw_compiler=compiler,
                              decompositions=decomposition_table())
    return out


def nvrtc_slice(seeds, cache_dir: str, dtypes: tuple, arch: str = "sm_90") -> dict:
    """nvrtc_compile over the programs of `seeds` (generated with `dtypes`): counts, and
    the errors by seed."""
    totals = {"programs": 0, "graphs": 0, "compiled": 0, "kernels": 0, "refused": 0, "errors": {}}
    for seed in seeds:
        r = nvrtc_compile(generate(seed, dtypes), cache_dir, arch)
        totals["programs"] += 1
        for k in ("graphs", "compiled", "kernels"):
            totals[k] += getattr(r, k)
        totals["refused"] += len(r.refused)
        if r.errors:
            totals["errors"][seed] = r.errors
    return totals


def device_problem(device: str) -> str | None:
    """Why a campaign cannot run on `device`, or None: without NVRTC every graph would
    run eagerly and the campaign would compare eager with eager."""
    if not device.startswith("cuda"):
        return f"unknown device {device!r} (cpu or cuda)"
    if not torch.cuda.is_available():
        return "torch sees no CUDA device (torch.cuda.is_available() is False)"
    from ..runtime import cuda

    info = cuda.nvrtc_info()
    if not info["available"]:
        return f"NVRTC is not available: {info['reason']}"
    return None
