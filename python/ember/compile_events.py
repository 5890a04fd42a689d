"""What is told about each graph ember compiles: log lines (EMBER_LOGS / TORCH_LOGS,
python/ember/logs.py) and TORCH_TRACE artifacts, which tlparse shows under the graph's
Dynamo compile id next to Dynamo's and AOTAutograd's own.

Artifacts, per graph (NAME: inference_0, forward_1, ...), through
torch._logging.trace_structured("artifact", ...):

  ember_NAME_graph        string  the ATen graph as ember imported it (its graph IR text)
  ember_NAME_fusion_plan  string  the kernels and the ops fused into each (the Schedule)
  ember_NAME_output_code  string  the generated C or CUDA C
  ember_NAME_compile      json    source (module, file:line), front end, compile phases in
                                  seconds (those run in the background marked), cache
                                  status, kernels with their ATen ops, ATen calls with reasons
  ember_NAME_fallback     json    why the graph runs eagerly, when it does

Nothing is built unless torch's trace log has a handler (TORCH_TRACE is set):
trace_structured calls the payload functions only then.
"""
from __future__ import annotations

import contextlib

import torch

from . import logs

# Phases that may run on a thread of their own (config.compile_in_background): the C
# compiler and the library load; the others ran inside the backend call.
BACKGROUND_PHASES = ("compile", "load")


def trace_id():
    """Dynamo's compile id and attempt being compiled now, kept with the graph: a graph
    compiled in the background reports at its first call, outside any compile context."""
    try:
        return torch._guards.CompileContext.current_trace_id()
    except Exception:  # noqa: BLE001  (diagnostics only)
        return None


@contextlib.contextmanager
def _in_compile_context(record):
    """Logs and artifacts of the graph under its own compile id (and attempt), which torch's
    log format and tlparse group them by, even when told after the compile returned."""
    from torch._guards import CompileContext, compile_context

    if record.trace_id is None or CompileContext.current_trace_id() is not None:
        yield
        return
    context = CompileContext(record.trace_id.compile_id)
    context.attempt = record.trace_id.attempt
    with compile_context(context):
        yield


def _artifact(record, what: str, encoding: str, payload_fn) -> None:
    from torch._logging import trace_structured

    trace_structured("artifact", metadata_fn=lambda: {"name": f"ember_{record.name}_{what}", "encoding": encoding},
                     payload_fn=payload_fn, expect_trace_id=False)


def _tracing() -> bool:
    from torch._logging._internal import trace_log

    return bool(trace_log.handlers)


def _op_names(record, origins) -> list[str]:
    imported = record.imported
    return [imported.node_ops[o] for o in origins] if imported is not None else []


def compile_summary(record) -> dict:
    """The graph's compile as data: where it comes from, how it was compiled, what it holds."""
    cg = record.cg
    d = {"graph": record.name, "source": record.source.to_dict(), "label": record.source.label(),
         "front_end": record.front_end, "loaded": record.loaded,
         "times_s": {k: round(v, 6) for k, v in record.times.items()},
         "background_phases": [p for p in BACKGROUND_PHASES if p in record.times and record.background],
         "fallback_reason": record.fallback_reason}
    if cg is not None:
        d.update(cache=cg.cache_status, cache_key=cg.cache_key, cache_note=cg.cache_note,
                 kernels=[{"name": k["name"], "function": k.get("function", k["name"]),
                           "ops": _op_names(record, k["origins"])} for k in cg.kernels],
                 externs=[{"op": e["op"], "reason": e["reason"]} for e in cg.externs])
    return d


def graph_ready(record, cache_line: bool = True) -> None:
    """A graph whose kernels are loaded (compiled now, or rebuilt from a cache, whose
    caller logs the cache line itself: cache_line=False)."""
    with _in_compile_context(record):
        _graph_ready(record, cache_line)


def _graph_ready(record, cache_line: bool) -> None:
    cg = record.cg
    language = "CUDA C" if "__global__" in cg.source else "C"
    if logs.enabled("output_code"):
        logs.output_code("graph %s\n--- fusion plan ---\n%s--- generated %s ---\n%s", record.title(),
                         cg.schedule_text, language, cg.source)
    if logs.enabled("fusion"):
        logs.logger("fusion").info("graph %s\n%s", record.title(), cg.schedule_text)
    if cache_line and logs.enabled("cache"):
        logs.logger("cache").info("graph %s: cache %s %s %s", record.title(), cg.cache_status, cg.cache_key[:16],
                                  cg.cache_note)
    if not _tracing():
        return
    if record.imported is not None:
        _artifact(record, "graph", "string", lambda: record.imported.text)
    _artifact(record, "fusion_plan", "string", lambda: cg.schedule_text)
    _artifact(record, "output_code", "string", lambda: cg.source)
    _artifact(record, "compile", "json", lambda: compile_summary(record))


def graph_fallback(record) -> None:
    """A graph that runs eagerly (record.fallback_reason says why)."""
    with _in_compile_context(record):
        logs.logger("fallback").info("graph %s runs eagerly: %s", record.title(), record.fallback_reason)
        if _tracing():
            _artifact(record, "fallback", "json", lambda: compile_summary(record))
