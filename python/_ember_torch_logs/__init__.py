"""ember's names in torch's logging (TORCH_LOGS), registered before torch parses TORCH_LOGS.

torch parses TORCH_LOGS at the end of `import torch`, right after it loads the
`torch.backends` entry points, so that out-of-tree backends can register their log names
first (torch/__init__.py). ember's entry point is this package, not `ember` itself: it
imports nothing but torch's logging registry, so `import torch` stays as fast as it was,
and ember's compiler loads only when a program uses it. ember's own logs (python/ember/logs.py)
register the same names again when ember is imported (idempotent), for a process where
entry points are off (TORCH_DEVICE_BACKEND_AUTOLOAD=0).

  TORCH_LOGS=ember / +ember    ember's channels (fusion, cache, fallback, perf_hints,
                               front_end, cudagraphs) at INFO / DEBUG, in torch's log format
  TORCH_LOGS=ember_output_code each graph's fusion plan and generated C or CUDA C
  TORCH_LOGS=output_code       the same, next to Inductor's output code
"""

# The logger every ember channel is a child of (ember.fusion, ember.cache, ...).
LOG = "ember"
OUTPUT_CODE = "ember_output_code"


def register() -> None:
    """Called by torch while it imports; must never raise (torch would fail to import)."""
    try:
        from torch._logging._internal import log_registry, register_artifact, register_log

        if not log_registry.is_log(LOG):
            register_log(LOG, [LOG])
        if not log_registry.is_artifact(OUTPUT_CODE):
            register_artifact(OUTPUT_CODE, "Prints the fusion plan and generated C / CUDA C of each graph ember "
                              "compiles", off_by_default=True, visible=True)
    except Exception:  # a torch whose logging internals differ: TORCH_LOGS simply lacks ember's names
        pass
