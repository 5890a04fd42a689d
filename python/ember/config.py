"""ember's configuration: one object, settable in code, by `options=`, or by environment.

    import ember
    ember.config.fallback_on_error = False            # raise instead of running eagerly
    torch.compile(m, backend="ember", options={"fuse": False})

Inductor option names that mean something for ember are accepted as aliases
(see INDUCTOR_ALIASES); the rest are rejected with a clear error.
"""
from __future__ import annotations

import dataclasses
import os


@dataclasses.dataclass
class Config:
    # Group element-wise and reduction work into fused kernels (False: one kernel per buffer).
    fuse: bool = True
    # CUDA graphs: pad large matmuls' operands so that cuBLAS sees 16-byte aligned leading
    # dims (csrc/lower/pad_matmuls.h). Inductor's shape_padding.
    pad_matmuls: bool = True
    # Round every op's float16/bfloat16 result, as eager does. Off (Inductor's default): a
    # fused chain computes in float32 and rounds what it stores; .to(dtype) always rounds.
    emulate_precision_casts: bool = False
    # Name kernels after what they do (ember_red_var_mean_rsqrt_add_sub_plus1_3: kind, main
    # ATen ops, index in the graph) in the generated code, logs, explain and profiler traces;
    # False: ember_k3 (csrc/schedule/name_kernels.h). Inductor's triton.descriptive_names.
    descriptive_names: bool = True
    # Use the on-disk kernel cache (EMBER_CACHE_DIR or ~/.cache/ember).
    disk_cache: bool = True
    # Override the cache directory; None uses EMBER_CACHE_DIR or ~/.cache/ember.
    cache_dir: str | None = None
    # Keep compiled graphs in torch's AOTAutogradCache too, so that a warm start skips
    # AOTAutograd and ember's import (python/ember/caches/aot_cache.py). Needs disk_cache.
    aot_cache: bool = True
    # Trace inference graphs (no autograd, no mutation, no symbolic sizes) to ATen with
    # ember's own front end (python/ember/frontend/aten_trace.py) instead of AOTAutograd, and keep
    # them in ember's graph cache (graph_cache.py). False: AOTAutograd traces every graph.
    trace_inference: bool = True
    # torch's precompile (aot_compile + save_compiled_function, ember.save): "embed" carries
    # the graphs' kernels in the artifact (self-contained, for deployment); "reference" names
    # them by their kernel cache key only (smaller, for this machine's cache). precompile.py.
    precompile_kernels: str = "embed"
    # Run the C compiler on a thread while AOTAutograd and Dynamo go on (the backward is
    # traced and lowered, the next frame traced); a graph waits for its kernels at its
    # first call, where a failed compile falls back (or raises) as it would have here.
    # A precompiled artifact's graphs (caches/precompile.py) are built on a thread too,
    # while torch rebuilds Dynamo's guards; their first call waits for them.
    compile_in_background: bool = True
    # CUDA graphs: at each graph's first call, time a few launch configurations of every
    # kernel that has some (block sizes, rows per block, threads per row) on the call's
    # buffers and keep the fastest; the choices are cached on disk with the kernels.
    # mode="max-autotune" and "max-autotune-no-cudagraphs" turn it on; Inductor's
    # max_autotune. No effect on CPU graphs or on graphs with symbolic sizes.
    max_autotune: bool = False
    # CPU graphs: a convolution's weight (a parameter) is prepared once, in the layout oneDNN
    # computes with, and reused while the parameter is unchanged (its version counter and
    # data pointer; python/ember/runtime/prepared.py). CUDA graphs: a matmul operand that
    # pad_matmuls pads and that is a graph input (an LM head's weight) is padded once, the
    # same way. An update through `p.data` is not seen: False prepares or pads it on every
    # call instead (EMBER_PREPARE_WEIGHTS=0).
    prepare_weights: bool = True
    # On an internal error or a C compiler failure: warn once and run the graph
    # eagerly (True), or raise (False). Like torch._dynamo.config.suppress_errors.
    fallback_on_error: bool = True
    # Write here, per graph (a subdirectory each): the IR after every pass, the generated
    # C, timings.json, and error.txt with the traceback when compiling it failed.
    debug_dir: str | None = None
    # torch.compile's mode= (one of MODES; None: "default"): "reduce-overhead" replays CUDA
    # graph recordings (cuda_graphs), the max-autotune modes turn max_autotune on
    # ("max-autotune" records CUDA graphs too). Set through with_mode. docs/config.md#modes.
    mode: str | None = None

    @property
    def cuda_graphs(self) -> bool:
        """CUDA inference graphs replay CUDA graph recordings (runtime/cudagraphs.py)."""
        return self.mode in ("reduce-overhead", "max-autotune")

    def with_mode(self, mode: str | None) -> "Config":
        """A copy in torch.compile's `mode`, with what the mode turns on."""
        if mode not in MODES:
            raise ValueError(f"ember: unknown mode {mode!r}")
        new = dataclasses.replace(self, mode=mode)
        if mode in ("max-autotune", "max-autotune-no-cudagraphs"):
            new.max_autotune = True
        return new

    def update(self, options: dict | None) -> "Config":
        """A copy with `options` applied (ember names or Inductor aliases)."""
        new = dataclasses.replace(self)
        for key, value in (options or {}).items():
            name = INDUCTOR_ALIASES.get(key, key)
            if name is None:
                continue  # an Inductor option with no meaning for ember's CPU backend
            if callable(name):
                name, value = name(value, new)
            if not hasattr(new, name):
                known = ", ".join(sorted(f.name for f in dataclasses.fields(self)))
                raise ValueError(f"ember: unknown option {key!r} (ember options: {known})")
            setattr(new, name, value)
        return new


MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")

# Where Inductor's trace.enabled puts ember's dumps when no debug_dir is set.
TRACE_DIR = "ember_debug"

# Inductor option -> ember option (None: accepted and ignored, documented in docs/config.md).
INDUCTOR_ALIASES = {
    "force_disable_caches": lambda v, cfg: ("disk_cache", not v),
    "trace.enabled": lambda v, cfg: ("debug_dir", (cfg.debug_dir or TRACE_DIR) if v else None),
    "trace.debug_dir": "debug_dir",
    "trace.graph_diagram": None,
    "max_autotune": "max_autotune",
    "epilogue_fusion": None,
    "shape_padding": "pad_matmuls",
    "triton.cudagraphs": None,
    "coordinate_descent_tuning": None,
    "fallback_random": None,
    "triton.descriptive_names": lambda v, cfg: ("descriptive_names", bool(v)),
    "cpp.descriptive_names": lambda v, cfg: ("descriptive_names", bool(v)),
    "triton.unique_kernel_names": None,
    "unique_kernel_names": None,
}


def _from_env() -> Config:
    c = Config()
    if os.environ.get("EMBER_DEBUG_DIR"):
        c.debug_dir = os.environ["EMBER_DEBUG_DIR"]
    if os.environ.get("EMBER_DISABLE_CACHE") == "1":
        c.disk_cache = False
    if os.environ.get("EMBER_FALLBACK_ON_ERROR") == "0":
        c.fallback_on_error = False
    if os.environ.get("EMBER_PREPARE_WEIGHTS") == "0":
        c.prepare_weights = False
    return c


config = _from_env()
