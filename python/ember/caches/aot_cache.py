"""Warm starts without AOTAutograd: ember's graphs in torch's AOTAutogradCache.

A warm first call (a new process whose caches an earlier one filled) still runs Dynamo,
but neither AOTAutograd (joint tracing, functionalization, decomposition, partitioning)
nor ember's FX import. torch's AOTAutogradCache keys the Dynamo graph and, on a hit,
rebuilds AOTAutograd's runtime wrappers (input mutations, aliased outputs, the
autograd.Function of training) around the compiled graphs its entry holds. A compiler
takes part by returning an OutputCode (torch/_inductor/output_code.py) from a
SerializableAOTDispatchCompiler; with `torch._functorch.config.bundled_autograd_cache`
the OutputCode is pickled into the entry, and `post_compile` is called on it after a load.

ember's OutputCode, EmberOutputCode, holds a graph state in ember's own format
(graph_format.py, no pickle): the graph text, the imported graph (fx_import.ImportedGraph:
ATen calls and outputs, no FX objects) and the graph's constant tensors -- no library, no
pointer. Loading rebuilds the runner through the same C++ pipeline and ember's own disk
cache, which verifies its artifacts before loading them (csrc/runtime/disk_cache.h): a
missing or bad library entry only makes the C compiler run.

Keys. torch's key covers the Dynamo graph, the inputs' metadata, torch's version and its
configs; ember adds, through torch.compiler.config.cache_key_tag, its build (a hash of
its Python sources and its C++ core) and the options that change compiled code, so an
entry of another ember build, option set or backend is never found. The graph state
repeats that tag and carries the SHA-256 of its content; format, tag and digest are checked
before anything is decoded, and decoding runs no code the entry names. Anything that fails
while loading (a mismatched format, tag or digest, a failed rebuild) makes torch bypass the
entry and compile as usual. torch's entry around ember's state is torch's own pickle, in
torch's cache directory, which torch unpickles on a lookup: ember looks up and writes
entries only when that directory passes the checks of its own disk cache (owner, mode,
symlinks, parents; unsafe_torch_cache_dir), and otherwise warns once and compiles.

Training: the entry is written when forward and backward are both compiled, inside the
backend call, so the backward is compiled with the forward
(`force_non_lazy_backward_lowering`, as torch's own precompile does) instead of at the
first backward.

Where torch lacks any of this (`unavailable_reason`), ember compiles as before and says
why once in the "cache" log; `ember.config.aot_cache = False` turns it off.
"""
from __future__ import annotations

import contextlib
import functools

import torch

from .. import counters as stats, logs
from ..compiler import load_graph
from ..config import config as global_config
from ..runtime.runner import GraphRunner
from . import cache_dirs, graph_format
from .tags import cache_tag

try:
    from torch._inductor.output_code import OutputCode as _OutputCodeBase
except ImportError:  # a torch without it: the cache is unavailable, the class unused
    _OutputCodeBase = object


@functools.lru_cache(maxsize=1)
def unavailable_reason() -> str | None:
    """None where this torch supports a compiler's OutputCode in its AOTAutogradCache,
    else why not."""
    try:
        from torch._functorch._aot_autograd.autograd_cache import BypassAOTAutogradCache  # noqa: F401
        from torch._functorch.aot_autograd import SerializableAOTDispatchCompiler  # noqa: F401
        from torch._inductor.output_code import OutputCode  # noqa: F401
    except ImportError as e:
        return f"torch {torch.__version__} lacks the AOTAutogradCache API ember uses ({e})"
    functorch_config = torch._functorch.config
    for name in ("bundled_autograd_cache", "force_non_lazy_backward_lowering", "enable_autograd_cache"):
        if not hasattr(functorch_config, name):
            return f"torch {torch.__version__} has no torch._functorch.config.{name}"
    if not hasattr(torch.compiler.config, "cache_key_tag"):
        return f"torch {torch.__version__} has no torch.compiler.config.cache_key_tag"
    return None


def off_reason(cfg) -> str | None:
    """Why the backend with config `cfg` does not use the cache, or None."""
    if not cfg.aot_cache:
        return "ember.config.aot_cache is off"
    if not cfg.disk_cache:
        return "ember's disk cache is off"
    if cfg.debug_dir:
        return "a debug dir is set (every graph is compiled, to write its dumps)"
    return unavailable_reason()


_told: set[str] = set()


def _tell_once(message: str) -> None:
    if message not in _told:
        _told.add(message)
        logs.logger("cache").info("AOTAutograd cache not used: %s", message)


def note_unused(cfg) -> str | None:
    """off_reason(cfg) or an unsafe torch cache directory, told once in the cache log."""
    reason = off_reason(cfg) or unsafe_torch_cache_dir()
    if reason:
        _tell_once(reason)
    return reason


def unsafe_torch_cache_dir() -> str | None:
    """torch unpickles the entries it finds in its cache directory, so ember neither
    looks up nor writes entries there unless the directory passes the checks of ember's
    own disk cache (cache_dirs.py; warned once per process, with the fix). Why not, or None."""
    refused = cache_dirs.warn_torch_cache_refused()
    return f"torch's cache directory {refused['dir']} is refused: {refused['problem']}" if refused else None


# The backend calls and artifact loads running now, innermost last (pushed by loading()
# only): a loaded entry checks its tag against the config and is rebuilt with it.
_loading: list = []
# The lists of the collecting_runners() blocks open now.
_collecting: list[list] = []


@contextlib.contextmanager
def loading(cfg):
    """Entries loaded while the block runs are checked against `cfg`'s tag (its build and
    the options that change code) and rebuilt with `cfg` (its cache directory). Outside
    every such block (torch's precompile loads entries itself) ember.config is used."""
    _loading.append(cfg)
    try:
        yield
    finally:
        _loading.pop()


@contextlib.contextmanager
def collecting_runners():
    """A list of the runners compiled or loaded through this cache while the block runs
    (torch's aot_compile: an artifact carries their kernels, precompile.py)."""
    runners: list = []
    _collecting.append(runners)
    try:
        yield runners
    finally:
        _collecting.pop()


def _collect(runner) -> None:
    if _collecting:
        _collecting[-1].append(runner)


@contextlib.contextmanager
def enabled(cfg):
    """torch's configs for ember's graphs to be looked up in, and written to, the
    AOTAutogradCache, for the duration of one backend call."""
    user_tag = torch.compiler.config.cache_key_tag
    tag = (user_tag + "|" if user_tag else "") + cache_tag(cfg)
    with torch._functorch.config.patch(bundled_autograd_cache=True, force_non_lazy_backward_lowering=True), \
            torch.compiler.config.patch(cache_key_tag=tag), _without_inductor_backends(), loading(cfg):
        yield


@contextlib.contextmanager
def _without_inductor_backends():
    """The key (FxGraphHashDetails) registers Inductor's code generators for every device,
    only to list their custom passes, which ember's graphs never meet; the imports that
    takes cost a second or more per process, as much as AOTAutograd on a GPT-2. Skipped
    here: the key then lists the passes registered so far (none in a process that has not
    run Inductor; a process that has computes other keys and misses, never a wrong hit)."""
    from torch._inductor import codecache

    original = getattr(codecache, "init_backend_registration", None)
    if original is None:
        yield
        return
    codecache.init_backend_registration = _no_registration
    try:
        yield
    finally:
        codecache.init_backend_registration = original


def _no_registration() -> None:
    pass


def serializable(compile_fn, cfg, kind: str):
    """An AOTAutograd compiler whose results (EmberOutputCode) AOTAutogradCache stores."""
    from torch._functorch.aot_autograd import SerializableAOTDispatchCompiler

    def compile(gm, example_inputs):
        runner = compile_fn(gm, example_inputs)
        _collect(runner)
        return EmberOutputCode.of(runner, kind, cache_tag(cfg))

    return SerializableAOTDispatchCompiler(EmberOutputCode, compile)


def graph_state(runner, kind: str, tag: str) -> bytes:
    """What a cache entry holds of one compiled graph, in ember's own format
    (graph_format.encode_state): kind, device, imported graph, constants; no library."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    # AOTAutograd calls the compiler under its FakeTensorMode; the constants are real, and
    # every op on them (here and in encode_state) must run outside it.
    with unset_fake_temporarily():
        attrs = [t.detach().cpu() for t in runner.attr_tensors]
        return graph_format.encode_state(tag, kind, str(runner.device), runner.imported, attrs)


class EmberOutputCode(_OutputCodeBase):
    """A compiled graph as AOTAutograd's compilers return it. Called with the boxed
    convention (one list of arguments). Pickled, it is its graph state only (bytes in
    ember's format); `post_compile` on a loaded one rebuilds the runner (compiler.load_graph)."""

    # Identity, not OutputCode's dataclass equality (which would make all of them equal).
    __eq__ = object.__eq__
    __hash__ = object.__hash__

    def __init__(self, runner, state: bytes | None, bypass_reason: str = ""):
        # An instance attribute: torch._dynamo.disable's functools.wraps copies __dict__.
        self._boxed_call = True
        self._runner = runner
        self._state = state
        self._bypass_reason = bypass_reason

    @classmethod
    def of(cls, runner, kind: str, tag: str) -> "EmberOutputCode":
        if not isinstance(runner, GraphRunner):
            return cls(runner, None, "the graph runs eagerly")
        try:
            return cls(runner, graph_state(runner, kind, tag))
        except Exception as e:  # e.g. an argument ember's format has no encoding for: compile it every time
            return cls(runner, None, f"its state does not encode ({type(e).__name__}: {e})")

    def __call__(self, inputs):
        return self._runner(inputs)

    def __getstate__(self):
        return {"state": self._state, "bypass_reason": self._bypass_reason}

    def __setstate__(self, d):
        self.__init__(None, d.get("state"), d.get("bypass_reason", ""))

    def __copy__(self):
        # torch copies the object before prepare_for_serialization: the copy keeps the
        # runner, whose kernels that method waits for.
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        return new

    def prepare_for_serialization(self) -> None:
        """Before the entry is written, which AOTAutograd does once the backward is compiled
        too. A graph that runs eagerly is never written. One whose C compiler is still
        running in the background is written without waiting for it (the wait would hold
        up Dynamo and the first run of the forward): the entry holds the graph, not its
        kernels, and if that compile fails, a process that loads the entry compiles again
        (load_graph), fails the same way, and torch compiles the graph afresh, which runs
        it eagerly as this process does. A failure already known bypasses the cache."""
        from torch._functorch._aot_autograd.autograd_cache import BypassAOTAutogradCache

        if self._state is None:
            raise BypassAOTAutogradCache(f"ember: {self._bypass_reason}")
        if self._runner is not None and self._runner.kernels_failed():
            raise BypassAOTAutogradCache("ember: the graph's kernels failed to compile")
        stats.count_aot_save()

    def post_compile(self, *args, **kwargs) -> None:
        if self._runner is not None:
            return
        cfg = _loading[-1] if _loading else global_config
        try:
            if not isinstance(self._state, bytes):
                raise graph_format.FormatError("entry without a graph state")
            payload = graph_format.decode_state(self._state, cache_tag(cfg))
            self._runner = load_graph(payload, cfg)
            _collect(self._runner)
        except Exception as e:
            logs.logger("cache").info("AOTAutograd cache entry not used, compiling instead: %s: %s",
                                      type(e).__name__, e)
            raise

    def set_triton_bundle(self, triton_bundle) -> None:
        pass
