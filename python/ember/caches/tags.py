"""The tags that tie a cache entry or an artifact to the ember that wrote it.

`build_id` hashes what decides compiled graphs: ember's Python sources (all but the
tools' and the fuzzer's) and its C++ core. `cache_tag` adds the options that change
generated code (ember's part of torch's AOTAutogradCache key, and of its own graph
cache's); `artifact_tag` adds ember's version (precompiled artifacts, Mega-Cache entries,
`ember cache export`). A container (graph_format.py) whose tag differs is refused
before anything in it is decoded.
"""
from __future__ import annotations

import functools
import hashlib
import os

from .. import _core
from . import graph_format

# Subpackages whose code never changes a compiled graph (the command line's tools, the fuzzer).
_NOT_COMPILER = ("tools", "fuzz")


@functools.lru_cache(maxsize=1)
def build_id() -> str:
    """A hash of what decides compiled graphs: ember's Python sources (decompositions,
    import, runtime ...) and its C++ core."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    h = hashlib.sha256(_core.__version__.encode())
    # Named by their place in the package, not on this machine: another install of the same
    # build has the same id.
    named = [(os.path.relpath(p, package), p) for p in _compiler_sources(package)]
    for name, path in named + [(os.path.basename(_core.__file__), _core.__file__)]:
        with open(path, "rb") as f:
            h.update(name.encode() + b"\0" + hashlib.sha256(f.read()).digest())
    return h.hexdigest()[:32]


def _compiler_sources(package: str) -> list[str]:
    """ember's Python sources that decide compiled graphs: every module but the tools'."""
    paths = []
    for folder, subdirs, files in os.walk(package):
        subdirs[:] = sorted(d for d in subdirs if d not in _NOT_COMPILER and not d.startswith(("_", ".")))
        paths += [os.path.join(folder, f) for f in files if f.endswith(".py")]
    return sorted(paths)


def cache_tag(cfg) -> str:
    """ember's part of a graph's cache key: its build, and the options that change the
    code it generates."""
    return f"ember-{build_id()}-f{graph_format.FORMAT}-fuse{int(cfg.fuse)}-{cfg.mode or 'default'}"


def artifact_tag() -> str:
    """The tag of ember's containers that leave the process: its version and build."""
    return f"ember-{_core.__version__}-{build_id()}"
