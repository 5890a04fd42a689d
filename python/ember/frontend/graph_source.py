"""Where a compiled graph comes from in the user's code: its module class and file:line.

Dynamo often starts its frame in a torch wrapper (compiling an nn.Module traces
torch/_dynamo/external_utils.py's `inner`, which calls the module), so the frame's code
object alone names torch, not the user. The graph knows better: each FX node carries the
user's stack (`stack_trace`, outermost frame first) and the modules it ran in
(`nn_module_stack`). A graph is named after, in order of preference:

  module   the root nn.Module of the frame (a local `self` or `fn` that is a module),
           else the outermost module in the nodes' nn_module_stack
  where    the outermost frame outside torch in the first node's stack_trace (the line of
           the user's forward that starts the graph), else the frame's code object, else
           the root module's class definition, whichever is not torch's own file

explain, logs, stats, the profiler ranges and TORCH_TRACE artifacts all use `label()`.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import os
import re
import sysconfig
import threading

import torch

_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')
_INTERNAL_DIRS = tuple(os.path.realpath(d) + os.sep for d in (
    os.path.dirname(torch.__file__), sysconfig.get_paths()["stdlib"]))


@dataclasses.dataclass(frozen=True)
class GraphSource:
    module: str | None = None     # the root module's class name
    function: str | None = None   # the user's function the graph starts in
    file: str | None = None
    line: int | None = None

    def where(self) -> str:
        return f"{short_path(self.file)}:{self.line}" if self.file else ""

    def label(self) -> str:
        """'LayerNormGeluBlock.forward (ember/examples.py:33)'; what is unknown is left out."""
        head = ".".join(p for p in (self.module, self.function) if p) or "graph"
        return f"{head} ({self.where()})" if self.file else head

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@functools.lru_cache(maxsize=4096)
def is_internal(path: str | None) -> bool:
    """A file of torch or of Python's standard library: never the user's code."""
    if not path:
        return True
    if path.startswith("<"):  # code with no file: the user's at a prompt or in `python -c`, else torch's
        return path not in ("<string>", "<stdin>")
    return os.path.realpath(path).startswith(_INTERNAL_DIRS)


def short_path(path: str) -> str:
    """A path relative to the working directory when under it, else its last two parts."""
    try:
        rel = os.path.relpath(path)
    except ValueError:
        rel = path
    if not rel.startswith(".."):
        return rel
    parts = os.path.normpath(path).split(os.sep)
    return os.path.join(*parts[-2:]) if len(parts) >= 2 else path


def _resumed_name(code_name: str) -> str:
    m = re.match(r"torch_dynamo_resume_in_(\w+)_at_(\d+)$", code_name)
    return m.group(1) if m else code_name


def _root_module(gm, frame_locals: dict):
    for name in ("self", "fn", "mod", "module", "model"):
        value = frame_locals.get(name)
        if isinstance(value, torch.nn.Module):
            return type(value).__name__, value
    outermost = None
    for node in gm.graph.nodes:
        stack = node.meta.get("nn_module_stack")
        if stack:
            path, cls = next(iter(stack.values()))
            if outermost is None or len(path) < len(outermost[0]):
                outermost = (path, cls)
    if outermost is not None:
        cls = outermost[1]
        return (cls.__name__ if isinstance(cls, type) else str(cls).rsplit(".", 1)[-1]), None
    return None, None


def _user_frame(gm):
    """(file, line, function) of the outermost frame outside torch in the first node's
    stack_trace that has one."""
    for node in gm.graph.nodes:
        trace = node.meta.get("stack_trace")
        if not trace:
            continue
        for file, line, function in _FRAME.findall(trace):
            if not is_internal(file):
                return file, int(line), _resumed_name(function)
    return None


def _class_definition(module):
    try:
        cls = type(module)
        file = inspect.getsourcefile(cls)
        line = inspect.getsourcelines(cls)[1]
    except (TypeError, OSError):
        return None
    return (file, line) if not is_internal(file) else None


def describe(gm, frame=None) -> GraphSource:
    """The source of a Dynamo graph. `frame`: Dynamo's InstructionTranslator (its f_code
    and f_locals); by default the one compiling now, if any."""
    if frame is None:
        try:
            from torch._dynamo.symbolic_convert import InstructionTranslator

            frame = InstructionTranslator.current_tx()
        except (ImportError, AttributeError):
            frame = None
    code = getattr(frame, "f_code", None)
    module, instance = _root_module(gm, getattr(frame, "f_locals", None) or {})
    found = _user_frame(gm)
    if found is not None:
        file, line, function = found
        return GraphSource(module, function, file, line)
    if code is not None and not is_internal(code.co_filename):
        return GraphSource(module, _resumed_name(code.co_name), code.co_filename, code.co_firstlineno)
    defined = _class_definition(instance) if instance is not None else None
    if defined is not None:
        return GraphSource(module, None, *defined)
    return GraphSource(module)


def describe_aten(gm) -> GraphSource:
    """The source of an ATen graph from its nodes alone (a backward compiled outside any
    Dynamo frame): AOTAutograd keeps the forward's stack_trace and nn_module_stack."""
    return describe(gm, frame=object())


_current = threading.local()


@contextlib.contextmanager
def compiling(source: GraphSource):
    """The source of the Dynamo graph being compiled on this thread, for every ATen graph
    made from it while the backend runs (forward, backward, cache hits)."""
    prior = getattr(_current, "source", None)
    _current.source = source
    try:
        yield
    finally:
        _current.source = prior


def current() -> GraphSource | None:
    return getattr(_current, "source", None)
