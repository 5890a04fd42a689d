"""ember's cache entries in torch's Mega-Cache (torch.compiler.save_cache_artifacts()).

torch's Mega-Cache keeps, per process, every cache artifact its compilers wrote or read, so
that `save_cache_artifacts()` returns one blob a fresh machine hot-loads with
`load_cache_artifacts(blob)`. It takes third-party artifact types
(torch.compiler._cache.CacheArtifactFactory.register): ember registers "ember" when
imported, and records each graph's kernel cache entries (a CPU graph's library, a CUDA
graph's cubins) and its graph cache entry once per process, as it compiles or loads them.

An artifact's content is an ember container (graph_format.py: magic, format, ember's build,
SHA-256) holding the entry's key, suffix and bytes. Loading one checks the container and
installs the entry through ember's DiskCache (csrc/runtime/disk_cache.h), as `ember cache
import` does; an artifact of another ember build, or damaged, is skipped with a warning in
the cache log, never installed. The process that calls load_cache_artifacts must have
imported ember first (torch resolves artifact types when it reads the blob). Where torch
has no Mega-Cache (`unavailable_reason`), nothing is recorded; `ember cache export` does
the same job from the command line.
"""
from __future__ import annotations

import functools
import threading

from .. import _core, logs
from ..config import config as global_config
from . import graph_format
from .tags import artifact_tag

TYPE = "ember"

_lock = threading.Lock()
_recorded: set[tuple[str, str]] = set()


@functools.lru_cache(maxsize=1)
def unavailable_reason() -> str | None:
    try:
        from torch.compiler._cache import CacheArtifact, CacheArtifactFactory, CacheArtifactManager  # noqa: F401
    except ImportError as e:
        return f"this torch has no Mega-Cache API ({e})"
    return None


@functools.lru_cache(maxsize=1)
def register() -> bool:
    """Registers ember's artifact type with torch's Mega-Cache, once; False where unavailable."""
    if unavailable_reason():
        return False
    from torch.compiler._cache import CacheArtifact, CacheArtifactFactory

    class EmberCacheArtifact(CacheArtifact):
        def populate_cache(self) -> None:
            install(self.content)

        @staticmethod
        def type() -> str:
            return TYPE

    try:
        CacheArtifactFactory.register(EmberCacheArtifact)
    except AssertionError:  # registered by another copy of ember in this process
        return True
    return True


def _content(key: str, suffix: str, data: bytes) -> bytes:
    return graph_format.encode(artifact_tag(), {"what": "cache entry", "key": key, "suffix": suffix}, [data])


def record(cache_dir: str, key: str, suffix: str, data: bytes | None = None) -> None:
    """Records one kernel or graph cache entry for save_cache_artifacts(), once per process;
    `data` None reads (and verifies) it from the cache."""
    if not register():
        return
    with _lock:
        if (key, suffix) in _recorded:
            return
        _recorded.add((key, suffix))
    if data is None:
        data = _core.cache_read(cache_dir, key, suffix)
        if data is None:
            return
    from torch.compiler._cache import CacheArtifactManager

    CacheArtifactManager.record_artifact(TYPE, f"{key}.{suffix}", _content(key, suffix, data))


def record_graph(cfg, cg) -> None:
    """The kernel cache entries of a compiled or loaded graph."""
    if not cfg.disk_cache or unavailable_reason():
        return
    cache_dir = cfg.cache_dir or _core.default_cache_dir()
    cubins = list(getattr(cg, "cubins", []))
    for i, (key, suffix) in enumerate(cg.cache_entries):
        if key:  # a graph with no kernel of its own (all ATen calls) has no library
            record(cache_dir, key, suffix, cubins[i] if suffix == "cubin" else None)


def install(content: bytes) -> bool:
    """Installs one recorded entry into this process's kernel cache (ember.config's
    directory); False, with the reason in the cache log, when it is refused."""
    try:
        doc, blobs = graph_format.decode(content, artifact_tag())
        key, suffix = doc.get("key"), doc.get("suffix")
        if doc.get("what") != "cache entry" or not isinstance(key, str) or not isinstance(suffix, str) \
                or len(blobs) != 1:
            raise graph_format.FormatError("not an ember cache entry")
        cache_dir = global_config.cache_dir or _core.default_cache_dir()
        if _core.cache_write(cache_dir, key, suffix, bytes(blobs[0])):
            return True
        reason = "the kernel cache is not usable (`ember cache info` says why)"
    except (graph_format.FormatError, ValueError) as e:
        reason = str(e)
    logs.logger("cache").warning("Mega-Cache entry not installed: %s", reason)
    return False
