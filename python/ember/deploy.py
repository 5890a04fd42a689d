"""ember.save / ember.load: a model precompiled to one file, loaded with no tracing.

    with torch.no_grad():
        ember.save(model, (x,), "model.ember")      # traces and compiles once, writes the file
    fn = ember.load("model.ember", model)           # a new process: no Dynamo trace, no compile
    y = fn(x)

Thin wrappers over torch's precompile API (precompile.py): save runs
`torch.compile(call, fullgraph=True, backend=ember).aot_compile(...)` on a function that
calls the model, so the model's weights stay outside the file (the graph reads them from
the model you pass to load), and writes torch's serialized function inside ember's
container (graph_format.py): magic, format, ember's build, torch's version and a SHA-256
are checked before torch's own loader sees a byte. The guards Dynamo saved decide which
calls the artifact serves (the example inputs' shapes, dtypes and grad mode; every size
with dynamic=True); another call raises torch's guard error.

load refuses an artifact made by another ember build or torch, for another device or CPU
compiler, or damaged; by default it then warns and returns the model compiled at run time
(torch.compile(model, backend="ember")), with strict=True it raises PrecompileRefused.
"""
from __future__ import annotations

import inspect
import io
import warnings

import torch

from .backend import make_backend
from .caches import graph_format, precompile
from .caches.tags import artifact_tag
from .config import config


def _call(model, *args, **kwargs):
    return model(*args, **kwargs)


def portable_guards(entries) -> list[bool]:
    """The guards an artifact keeps: those torch can serialize. Dropped, as torch's own
    default drops guards on globals: guards on objects' identity (a library function's code
    object, which Hugging Face's decorators make Dynamo check), modules and globals. The
    artifact assumes the same library code and model class, as its kernels do.

    The kept guards lose their user stacks (the source line each came from): torch pickles
    them into the artifact, and a load unpickles them and reads each frame's source file to
    rebuild the guards' failure messages: a third of the guards' share of a load (tiny
    GPT-2's 577 guards held 4,998 frames). A call the artifact does not serve still names
    the failed check (`check_tensor(L['x'], ...)`), without its source line.

    Also dropped, while torch's skip_nnmodule_hook_guards is on (its default): the guards
    that a module's hook dicts are empty. torch checks nothing for them then (they exist so
    that the option can turn them on), but an artifact carried them all the same, and a
    load unpickled and rebuilt them: 1,098 of ResNet-50's 3,253 guards."""
    from torch._dynamo.guards import CheckFunctionManager

    unsupported = set(CheckFunctionManager.UNSUPPORTED_SERIALIZATION_GUARD_TYPES)
    if torch._dynamo.config.skip_nnmodule_hook_guards:
        unsupported.add("EMPTY_NN_MODULE_HOOKS_DICT")
    for e in entries:
        e.orig_guard.user_stack = e.orig_guard.stack = None
    return [not (e.is_global or e.guard_type in unsupported
                 or unsupported.intersection(getattr(e, "derived_guard_types", None) or ()))
            for e in entries]


def save(model, example_inputs, path: str, *, kwargs: dict | None = None, mode: str | None = None,
         options: dict | None = None, dynamic: bool | None = None, kernels: str = "embed"):
    """Precompiles `model` for calls like model(*example_inputs, **kwargs), in the current
    grad mode (torch.no_grad() for inference), writes the artifact to `path`, and returns
    the compiled function (called as the model is) that it holds.
    kernels="embed" carries the compiled kernels (deploy anywhere with the same ember,
    torch, device and C compiler); "reference" names them in this machine's kernel cache."""
    reason = precompile.unavailable_reason()
    if reason:
        raise RuntimeError(f"ember.save needs torch's precompile API: {reason}")
    if kernels not in ("embed", "reference"):
        raise ValueError(f"ember.save: kernels must be 'embed' or 'reference', not {kernels!r}")
    args = (example_inputs,) if torch.is_tensor(example_inputs) else tuple(example_inputs)
    # torch.compile attaches .aot_compile only while this is on (off by default before torch 2.13).
    with torch._dynamo.config.patch(enable_aot_compile=True):
        compiled = torch.compile(_call, fullgraph=True, backend=make_backend(mode, options), dynamic=dynamic,
                                 options={"guard_filter_fn": portable_guards})
    fn = compiled.aot_compile(((model, *args), dict(kwargs or {})))
    previous = config.precompile_kernels
    config.precompile_kernels = kernels
    try:
        data = type(fn).serialize(fn)
        data = getattr(data, "serialized_data", data)  # torch 2.13 returns an AOTCompileSaveResult
    finally:
        config.precompile_kernels = previous
    doc = {"what": "saved function", "torch": torch.__version__}
    with open(path, "wb") as f:
        f.write(graph_format.encode(artifact_tag(), doc, [data]))
    return _bound(fn, model)


def load(path: str, model, *, strict: bool = False):
    """fn(*args, **kwargs) == model(*args, **kwargs), from the artifact ember.save wrote.
    A refused artifact warns and gives the model compiled at run time (strict: raises)."""
    try:
        loaded = _load(path)
    except precompile.PrecompileRefused as e:
        if strict:
            raise
        warnings.warn(f"{e}; compiling at run time instead (ember.load(..., strict=True) raises)", RuntimeWarning,
                      stacklevel=2)
        return torch.compile(model, backend=make_backend())  # ember.compile(model)

    return _bound(loaded, model)


def _bound(compiled, model):
    """compiled(model, ...) called as the model is."""
    def call(*args, **kwargs):
        return compiled(model, *args, **kwargs)

    call.compiled_function = compiled
    return call


def _load(path: str):
    with open(path, "rb") as f:
        data = f.read()
    try:
        doc, blobs = graph_format.decode(data, artifact_tag())
    except graph_format.FormatError as e:
        raise precompile.PrecompileRefused(f"ember: refusing {path}: {e}. Save it again with this ember "
                                           "(ember.save or ember precompile)") from None
    if doc.get("what") != "saved function" or len(blobs) != 1:
        raise precompile.PrecompileRefused(f"ember: {path} is not a file ember.save wrote")
    if doc.get("torch") != torch.__version__:
        raise precompile.PrecompileRefused(f"ember: refusing {path}: saved with torch {doc.get('torch')}, this is "
                                           f"torch {torch.__version__}")
    loader = torch.compiler.load_compiled_function
    kwargs = {"f_globals": _call.__globals__} if "f_globals" in inspect.signature(loader).parameters else {}
    return loader(io.BytesIO(bytes(blobs[0])), **kwargs)
