"""ember's graphs in torch's precompile API: warm starts with no tracing at all.

    compiled = torch.compile(fn, fullgraph=True, backend="ember").aot_compile(((args), {kwargs}))
    compiled.save_compiled_function(path)                     # one process
    fn = torch.compiler.load_compiled_function(open(path, "rb"))  # another: no Dynamo, no tracing

torch saves Dynamo's guards and bytecode itself and asks the backend's compiled graph to
serialize itself: it must be a torch._dynamo.aot_compile_types.SerializableCallable. During
aot_compile (backend.make_backend sees `active()`), ember's backend returns one:

  EmberCompiledGraph  a graph ember's front end traced (inference): its artifact is ember's
                      own format (graph_format.py), the graph state plus its kernels
  EmberAOTGraph       a graph AOTAutograd traced (training, input mutation, aliased outputs):
                      AOTAutograd's bundled entry (torch's own serialization, whose ember
                      parts are graph states again), plus the kernels of its graphs
  EmberEagerGraph     a graph ember could not compile: saving it raises, saying why

An artifact is an ember container (graph_format.encode) tagged with ember's version and
build, holding torch's version, the device (and CUDA architecture, or the C compiler's
identity, which every CPU kernel key covers, with the compiler's probe under its
fingerprint: a loader with the same compiler files and CPU takes it instead of running the
compiler), the options that change compiled code, and the graphs. Kernels are named by their kernel cache key (content-addressed: the key covers
the generated source, ember's version and the compiler) and, with
`ember.config.precompile_kernels = "embed"` (the default, what deployment wants), carried
in the artifact; a loader installs them into its kernel cache (csrc/runtime/disk_cache.h,
which verifies them on every load), so no compiler runs: a CPU graph's library before the
graph is built (it is opened from there), a CUDA graph's cubins after (its build takes
them from the process's memory). Both run on a thread while torch rebuilds Dynamo's
guards (_RunnerBuild; config.compile_in_background), and the graph's first call waits for
the build. With
"reference" the artifact holds the keys only and the loader's kernel cache must have them
(a missing one is compiled, and logged).

Loading checks, before anything is decoded: magic, format, ember's build (the tag), the
SHA-256; then torch's version, the device and its architecture or the C compiler. A
mismatch raises PrecompileRefused saying which, and what to do (precompile again on this
machine, or compile at run time: ember.load does that for you with a warning).

An artifact holds machine code (its kernels) and, for AOTAutograd's graphs, torch's own
pickle: load only artifacts you trust, as you would a shared library or torch.load of a
full model. Its integrity is checked; its author is not.
"""
from __future__ import annotations

import functools
import re

import torch

from .. import _core, counters as stats, logs
from ..compiler import load_graph, run_pipeline
from . import aot_cache, graph_format
from .tags import artifact_tag, cache_tag

try:
    from torch._dynamo.aot_compile_types import SerializableCallable as _SerializableBase
except ImportError:  # a torch without the precompile API: unavailable_reason() says so
    _SerializableBase = object


class PrecompileRefused(RuntimeError):
    """A precompiled artifact that this process must not load, and why."""


@functools.lru_cache(maxsize=1)
def unavailable_reason() -> str | None:
    """None where this torch has the precompile API ember implements, else why not."""
    if _SerializableBase is object:
        return f"torch {torch.__version__} has no torch._dynamo.aot_compile_types.SerializableCallable"
    if not hasattr(torch.compiler, "load_compiled_function"):
        return f"torch {torch.__version__} has no torch.compiler.load_compiled_function"
    if not hasattr(torch._dynamo.config, "enable_aot_compile"):
        return f"torch {torch.__version__} has no torch._dynamo.config.enable_aot_compile"
    if not hasattr(torch._functorch.config, "bypass_autograd_cache_key"):
        return f"torch {torch.__version__} has no torch._functorch.config.bypass_autograd_cache_key"
    return aot_cache.unavailable_reason()


def active() -> bool:
    """Whether the backend is being called by torch's aot_compile (aot_compile_fullgraph
    patches this config for the backend call; nothing else in torch sets it around a
    Dynamo backend)."""
    return unavailable_reason() is None and bool(torch._functorch.config.bypass_autograd_cache_key)


# Config fields that change what a graph compiles to: recorded in an artifact, applied when
# it is loaded (the loader's own cache_dir, disk_cache and fallback settings still apply).
_CODE_OPTIONS = ("fuse", "pad_matmuls", "emulate_precision_casts", "max_autotune", "descriptive_names")


def compile_for_precompile(compile_fn, gm, example_inputs, cfg):
    """Runs the backend's compile (compile_fn(gm, example_inputs) -> (what Dynamo calls,
    front end)) and wraps its result as a SerializableCallable."""
    from torch._functorch._aot_autograd.autograd_cache import BypassAOTAutogradCache

    try:
        with aot_cache.collecting_runners() as runners:  # AOTAutograd's graphs
            compiled, front = compile_fn(gm, example_inputs)
    except BypassAOTAutogradCache as e:  # under aot_compile torch raises it: a graph ember runs eagerly
        raise PrecompileRefused(f"this graph cannot be precompiled: {e}. Fix what the reason names, or compile "
                                "at run time (torch.compile(..., backend='ember'))") from None
    if front == "ember":
        runner = compiled.runner
        if not _is_compiled(runner):
            return EmberEagerGraph(compiled, "ember could not compile it (see ember.explain or the fallback log)")
        return EmberCompiledGraph(runner, cfg, compiled.static_inputs)
    if not getattr(compiled, "serialize", None):
        return EmberEagerGraph(compiled, "AOTAutograd's result is not serializable in this torch")
    failed = [r for r in runners if not _is_compiled(r)]
    if failed or not runners:
        return EmberEagerGraph(compiled, "ember could not compile one of its AOTAutograd graphs")
    return EmberAOTGraph(compiled, runners, cfg)


def _is_compiled(runner) -> bool:
    from ..runtime.runner import GraphRunner

    return isinstance(runner, GraphRunner)


class _EmberSerializable(_SerializableBase):
    """What the three kinds share: the options and the artifact's envelope."""

    @classmethod
    def serialize_compile_artifacts(cls, fn) -> bytes:
        return fn._artifact()

    @classmethod
    def deserialize_compile_artifacts(cls, data: bytes):
        return load_artifact(data)


class EmberCompiledGraph(_EmberSerializable):
    """A graph ember's front end traced and compiled, as torch's precompile API holds it.
    A loaded one may still be building its runner (_RunnerBuild): the first call, or
    `runner`, waits for it."""

    def __init__(self, runner, cfg, static_inputs=None, build=None):
        self._runner = runner
        self._build = build
        self._cfg = cfg
        self._static_inputs = static_inputs

    @property
    def runner(self):
        if self._build is not None:
            self._finish_build()
        return self._runner

    def _finish_build(self):
        self._runner = self._build.result()  # a failed build raises again at every call
        self._build = None

    def __call__(self, *args):
        if self._build is not None:
            self._finish_build()
        return self._runner(args)

    def _artifact(self) -> bytes:
        _wait(self.runner)
        state = aot_cache.graph_state(self.runner, "inference", cache_tag(self._cfg))
        return _envelope(self._cfg, [self.runner], {"front": "ember", "static_inputs": self._static_inputs},
                         [state])


class EmberAOTGraph(_EmberSerializable):
    """A graph AOTAutograd traced (its runtime wrappers: training's autograd.Function,
    input mutations, aliased outputs) with ember's compiled graphs inside."""

    def __init__(self, compiled, runners, cfg):
        self.compiled = compiled
        self._runners = runners
        self._cfg = cfg

    def __call__(self, *args):
        return self.compiled(*args)

    def _artifact(self) -> bytes:
        from torch._dynamo.aot_compile_types import BundledAOTAutogradSerializableCallable as Bundled

        for r in self._runners:
            _wait(r)
        entry = Bundled.serialize_compile_artifacts(Bundled(self.compiled))
        return _envelope(self._cfg, self._runners, {"front": "AOTAutograd"}, [entry])


class EmberEagerGraph(_EmberSerializable):
    """A graph that runs eagerly: it runs, but an artifact cannot hold it."""

    def __init__(self, fn, reason: str):
        self.fn = fn
        self.reason = reason

    def __call__(self, *args):
        return self.fn(*args)

    def _artifact(self) -> bytes:
        raise PrecompileRefused(f"ember: this graph cannot be precompiled: {self.reason}. Fix what the reason names, "
                                "or compile at run time (torch.compile(..., backend='ember'))")


def _wait(runner) -> None:
    """A graph's kernels, built: a background C compile is waited for; a failed one raises."""
    runner.finish_kernels()
    if runner.kernels_failed():
        raise PrecompileRefused("ember: a graph's kernels failed to compile; it runs eagerly and cannot be "
                                "precompiled (see the warning printed when it ran)")


def _device_info(runners) -> dict:
    device = str(runners[0].device)
    if device == "cpu":
        from ..config import config

        fingerprint, probe = _core.c_compiler_probe(config.cache_dir or "", config.disk_cache)
        return {"device": "cpu", "compiler": _compiler_identity(), "compiler_probe": [fingerprint, probe]}
    from ..runtime.cuda import device_arch, nvrtc_info

    return {"device": device, "arch": device_arch(torch.device(device)), "compiler": nvrtc_info()["identity"]}


def _envelope(cfg, runners, graph: dict, parts: list[bytes]) -> bytes:
    """The artifact: ember's container with the graph's parts and its kernels."""
    from ..config import config

    if config.precompile_kernels not in ("embed", "reference"):
        raise ValueError(f"ember.config.precompile_kernels must be 'embed' or 'reference', "
                         f"not {config.precompile_kernels!r}")
    embed = config.precompile_kernels == "embed"
    blobs = list(parts)
    kernels = []
    cache_dir = cfg.cache_dir or _core.default_cache_dir()
    for runner in runners:
        cg = runner.cg
        cubins = list(getattr(cg, "cubins", []))
        for i, (key, suffix) in enumerate(cg.cache_entries):
            if not key:  # a graph with no kernel of its own (all ATen calls) has no library
                continue
            entry = [key, suffix, -1]
            if embed:
                data = cubins[i] if suffix == "cubin" else _core.cache_read(cache_dir, key, suffix)
                if data is None:
                    raise PrecompileRefused(
                        f"ember: kernel {key[:16]}.{suffix} is not in the kernel cache ({cache_dir}), so it cannot be "
                        "embedded: make the cache usable (ember cache info says why not), or set "
                        "ember.config.precompile_kernels = 'reference'")
                blobs.append(data)
                entry[2] = len(blobs) - 1
            kernels.append(entry)
    doc = {"what": "precompiled", "torch": torch.__version__, **_device_info(runners),
           "options": {name: getattr(cfg, name) for name in _CODE_OPTIONS}, "mode": cfg.mode,
           "graph": graph, "parts": list(range(len(parts))), "kernels": kernels}
    stats.count_precompile("saved")
    return graph_format.encode(artifact_tag(), doc, blobs)


def load_artifact(data: bytes):
    """The SerializableCallable an artifact holds, after every check (PrecompileRefused)."""
    try:
        doc, blobs = graph_format.decode(data, artifact_tag())
    except graph_format.FormatError as e:
        raise PrecompileRefused(f"ember: refusing a precompiled artifact: {e}. Precompile it again with this "
                                "ember (ember precompile / ember.save), or compile at run time") from None
    if doc.get("what") != "precompiled":
        raise PrecompileRefused(f"ember: not a precompiled artifact ({doc.get('what')!r})")
    _check_machine(doc)
    from ..config import config

    cfg = config.update(doc.get("options") or {}).with_mode(doc.get("mode"))
    kernels = _kernel_entries(doc.get("kernels") or [], len(blobs))
    install = functools.partial(_install_kernels, cfg, kernels, blobs)
    seed = functools.partial(_seed_cubins, kernels, blobs)
    graph = doc.get("graph") or {}
    parts = [bytes(blobs[i]) for i in doc.get("parts", [])]
    try:
        if graph.get("front") == "ember":
            return _load_ember_graph(parts[0], cfg, graph.get("static_inputs"), install, seed)
        if graph.get("front") == "AOTAutograd":
            install()
            return _load_aot_graph(parts[0], cfg)
    except graph_format.FormatError as e:
        raise PrecompileRefused(f"ember: refusing a precompiled artifact's graph: {e}") from None
    raise PrecompileRefused(f"ember: a precompiled artifact of an unknown kind ({graph.get('front')!r})")


def _check_machine(doc: dict) -> None:
    """The artifact was made for this torch and this device (CUDA architecture, or C
    compiler and target, which every CPU kernel key covers)."""
    again = "precompile it again on this machine, or compile at run time"
    if doc.get("torch") != torch.__version__:
        raise PrecompileRefused(f"ember: refusing a precompiled artifact made with torch {doc.get('torch')} "
                                f"(this is torch {torch.__version__}): {again}")
    device = doc.get("device")
    if device == "cpu":
        probe = doc.get("compiler_probe")
        if isinstance(probe, list) and len(probe) == 2 and all(isinstance(x, str) for x in probe):
            # Made where the compiler and the CPU are what they are here: its probe of the
            # compiler stands for running it (csrc/runtime/compiler_memo.h); else ignored.
            _core.seed_c_compiler(*probe)
        here = _compiler_identity()
        if doc.get("compiler") != here:
            theirs = dict(_identity_lines(doc.get("compiler") or ""))
            diff = next((f"{k}: {theirs.get(k, '?')!r} there, {v!r} here" for k, v in _identity_lines(here)
                         if theirs.get(k) != v), "")
            raise PrecompileRefused(f"ember: refusing a precompiled artifact whose CPU kernels were built by another "
                                    f"C compiler or for another CPU ({diff[:300]}): {again}")
        return
    if not isinstance(device, str) or not device.startswith("cuda"):
        raise PrecompileRefused(f"ember: a precompiled artifact for an unknown device ({device!r})")
    if not torch.cuda.is_available():
        raise PrecompileRefused(f"ember: refusing a precompiled artifact for {device} ({doc.get('arch')}): "
                                "this process has no CUDA device")
    from ..runtime.cuda import device_arch

    index = torch.device(device).index or 0
    if index >= torch.cuda.device_count():
        raise PrecompileRefused(f"ember: a precompiled artifact for {device}, which this machine does not have")
    arch = device_arch(torch.device("cuda", index))
    if doc.get("arch") != arch:
        raise PrecompileRefused(f"ember: refusing a precompiled artifact built for {doc.get('arch')} on a {arch} "
                                f"device: {again}")


def _compiler_identity() -> str:
    """The C compiler's identity, its probe read from the kernel cache when kept there."""
    from ..config import config

    return _core.c_compiler_identity(config.cache_dir or "", config.disk_cache)


def _identity_lines(identity: str):
    for line in identity.splitlines():
        key, _, value = line.partition(":")
        yield key.strip(), value.strip()


_KERNEL_KEY = re.compile(r"[0-9a-f]{16,128}")


def _kernel_entries(kernels, num_blobs: int) -> list:
    """The artifact's kernel list, [key, suffix, blob index or -1] each, checked before
    anything is written (the names the disk cache takes, blobs that exist)."""
    ok = isinstance(kernels, list) and all(
        isinstance(e, list) and len(e) == 3 and isinstance(e[0], str) and _KERNEL_KEY.fullmatch(e[0])
        and e[1] in ("so", "cubin") and isinstance(e[2], int) and -1 <= e[2] < num_blobs for e in kernels)
    if not ok:
        raise PrecompileRefused("ember: a precompiled artifact with a malformed kernel list")
    return kernels


def _seed_cubins(kernels: list, blobs) -> None:
    """Embedded cubins into the process's memory cache (runtime/cubin_parts.h), where the
    graph's build finds them with no disk read."""
    seeded = 0
    for key, suffix, blob in kernels:
        if suffix == "cubin" and blob >= 0:
            _core.seed_cubin(key, bytes(blobs[blob]))
            seeded += 1
    if seeded:
        stats.count_precompile("cubins_seeded", seeded)


def _install_kernels(cfg, kernels: list, blobs) -> None:
    """Embedded kernels into this machine's kernel cache, which verifies them when loading.
    A kernel the artifact only names must be there already; if not, it is compiled."""
    cache_dir = cfg.cache_dir or _core.default_cache_dir()
    for key, suffix, blob in kernels:
        if blob < 0:
            continue
        ok = cfg.disk_cache and _core.cache_write(cache_dir, key, suffix, bytes(blobs[blob]))
        if not ok:
            logs.logger("cache").warning("precompiled kernels not installed (the kernel cache %s is off or not usable:"
                                         " `ember cache info` says why); they are compiled again", cache_dir)
            return
    installed = sum(1 for e in kernels if e[2] >= 0)
    if installed:
        stats.count_precompile("kernels_installed", installed)


def _load_ember_graph(state_bytes: bytes, cfg, static_inputs, install_kernels, seed_cubins):
    state = graph_format.decode_state(state_bytes, cache_tag(cfg))
    stats.count_precompile("loaded")

    def finish(compiled=None):
        runner = load_graph(state, cfg, static_inputs, "precompiled artifact", compiled)
        _note_missing_kernels(runner)
        return runner

    if not cfg.compile_in_background:  # inside the load: the kernels written to the cache, then read back
        install_kernels()
        return EmberCompiledGraph(finish(), cfg, static_inputs)
    imported, kind = state["imported"], state["kind"]
    if state["device"] == "cpu":
        # A CPU graph's library is opened from the kernel cache: written there first (an
        # fsync per file, I/O the thread waits for).
        def prepare():
            install_kernels()
            return run_pipeline(imported, None, cfg, kind)

        return EmberCompiledGraph(None, cfg, static_inputs, _RunnerBuild(prepare, finish))

    # A CUDA graph's cubins are taken from memory; the kernel cache gets them once the
    # compiled graph is ready, for later processes.
    device = torch.device(state["device"])

    def prepare_cuda():
        seed_cubins()
        return run_pipeline(imported, device, cfg, kind)

    return EmberCompiledGraph(None, cfg, static_inputs, _RunnerBuild(prepare_cuda, finish, then=install_kernels))


class _RunnerBuild:
    """A loaded graph's runner, its C++ part built on a thread of its own: torch rebuilds
    Dynamo's guards after the backend's part of a load returns (torch._dynamo.aot_compile),
    and `prepare` runs with the GIL released, so it overlaps with that: writing a CPU
    graph's library into the kernel cache (fsynced), the C++ pipeline, loading NVRTC and
    the kernels (dlopen, or the CUDA modules). The Python part, `finish` (the runner and
    its plan), runs at the first call, on the caller's thread: on the build's thread it
    would take the GIL from the guards' rebuild (on a loaded 2-core machine the guards then
    took 0.03-0.09 s longer). `then` (writing a CUDA graph's cubins to the kernel cache)
    runs on the thread once `prepare` is done. Every check of the artifact has run before:
    what can still fail is what would fail compiling the graph (its C compiler, the CUDA
    driver); result() raises it, at the first call and every call after."""

    def __init__(self, prepare, finish, then=None):
        import _thread
        import threading

        self._compiled = self._runner = self._error = None
        self._finish = finish
        self._done = threading.Event()
        self._lock = threading.Lock()
        # Not threading.Thread: its start() waits until the new thread runs, and that thread
        # then holds the GIL for a switch interval (5 ms; up to 0.027 s on a 2-core VM at
        # load 15); start_new_thread returns at once (0.00001 s).
        _thread.start_new_thread(self._run, (prepare, then))

    def _run(self, prepare, then):
        try:
            self._compiled = prepare()
        except BaseException as e:  # noqa: BLE001 (raised again by result(), in the caller's thread)
            self._error = e
        finally:
            self._done.set()
        if then is not None and self._error is None:
            try:  # for later processes: nothing in this one waits for it
                then()
            except Exception as e:  # noqa: BLE001 (no caller to raise to: the cache only misses later)
                logs.logger("cache").warning("precompiled kernels not written to the kernel cache: %s", e)

    def result(self):
        self._done.wait()
        with self._lock:  # concurrent first calls: one finishes the runner, the others take it
            if self._error is None and self._runner is None:
                try:
                    self._runner = self._finish(self._compiled)
                except BaseException as e:  # noqa: BLE001
                    self._error = e
            if self._error is not None:
                raise self._error
            return self._runner


def _load_aot_graph(entry: bytes, cfg):
    from torch._dynamo.aot_compile_types import BundledAOTAutogradSerializableCallable as Bundled

    with aot_cache.loading(cfg), aot_cache.collecting_runners() as runners:
        loaded = Bundled.deserialize_compile_artifacts(entry)
    for r in runners:
        _note_missing_kernels(r)
    stats.count_precompile("loaded")
    return EmberAOTGraph(loaded, runners, cfg)


def _note_missing_kernels(runner) -> None:
    if runner.cg.cache_status == "miss":
        logs.logger("cache").warning("a precompiled graph's kernels were not in the kernel cache: compiling them "
                                     "(save with ember.config.precompile_kernels = 'embed' to carry them)")
