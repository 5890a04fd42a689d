"""ember: a torch.compile backend whose compiler is written in C++.

    model = torch.compile(model, backend="ember")
    model = ember.compile(model)              # the same, with ember's defaults
    print(ember.explain(model, x))            # what ember did with each graph
    ember.stats()                             # counters: graphs, codegen, C compiler, cache, recompiles
    ember.save(model, (x,), "model.ember")    # precompile to a file (torch's aot_compile) ...
    fn = ember.load("model.ember", model)     # ... and load it in another process: no tracing
"""
from __future__ import annotations

from . import logs  # noqa: F401  (reads EMBER_LOGS)
from ._core import __version__
from .backend import ember_backend, make_backend
from .config import config
from .explain import explain, last_compile_stats
from .counters import reset_stats, stats
from .deploy import load, save
from .caches.mega_cache import register as _register_mega_cache

_register_mega_cache()  # torch.compiler.load_cache_artifacts() can then install ember's entries


def compile(model=None, *, mode=None, options=None, dynamic=None, fullgraph=False, disable=False):
    """torch.compile with backend="ember"; the arguments mean what they mean there."""
    import torch

    backend = make_backend(mode, options)
    if model is None:
        return lambda m: torch.compile(m, backend=backend, dynamic=dynamic, fullgraph=fullgraph, disable=disable)
    return torch.compile(model, backend=backend, dynamic=dynamic, fullgraph=fullgraph, disable=disable)


__all__ = ["compile", "explain", "config", "ember_backend", "make_backend", "last_compile_stats", "stats", "reset_stats",
           "save", "load", "__version__"]
