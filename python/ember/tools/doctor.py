"""`ember doctor`: is this machine ready for ember? Each check says OK, INFO, WARN or FAIL,
and, when it is not OK, what to do about it.

FAIL means ember cannot compile here; WARN means it works but slower or with less
than it could (no disk cache, too many threads); INFO is for what is merely absent
(no GPU on a CPU machine).
"""
from __future__ import annotations

import ctypes
import dataclasses
import os
import platform
import shutil
import sys

TESTED_TORCH = "2.13"
LEVELS = ("OK", "INFO", "WARN", "FAIL")


@dataclasses.dataclass
class Check:
    name: str
    level: str
    summary: str
    fix: str = ""
    details: dict = dataclasses.field(default_factory=dict)


def run_checks() -> list[Check]:
    checks = [_python_and_torch(), _dynamo(), _ember_core(), _libstdcxx(), _backends(), _c_compiler(), _cpu(), _threads(),
              _cuda(), _cache(), _torch_cache(), _smoke_compile(), _openmp()]
    return [c for c in checks if c is not None]


def _guard(name):
    """A check that raises reports FAIL with the exception instead of stopping the doctor."""
    def wrap(fn):
        def run():
            try:
                return fn()
            except Exception as e:  # the doctor must always finish
                return Check(name, "FAIL", f"check crashed: {type(e).__name__}: {e}",
                             "report this with the output of `ember doctor --json`")
        return run
    return wrap


@_guard("torch")
def _python_and_torch():
    import torch

    v = torch.__version__
    details = {"torch": v, "python": platform.python_version()}
    if not v.startswith(TESTED_TORCH):
        return Check("torch", "WARN", f"torch {v}, Python {platform.python_version()}; ember is tested with "
                     f"torch {TESTED_TORCH}", f"pip install torch=={TESTED_TORCH}.0", details)
    return Check("torch", "OK", f"torch {v}, Python {platform.python_version()}", details=details)


@_guard("dynamo")
def _dynamo():
    import torch._dynamo

    try:
        torch._dynamo.eval_frame.check_if_dynamo_supported()
    except Exception as e:
        return Check("dynamo", "FAIL", f"torch.compile is not supported here: {e}",
                     "use a Python version this torch build supports for torch.compile")
    if os.environ.get("TORCHDYNAMO_DISABLE") == "1":
        return Check("dynamo", "WARN", "TORCHDYNAMO_DISABLE=1: torch.compile does nothing",
                     "unset TORCHDYNAMO_DISABLE")
    return Check("dynamo", "OK", "TorchDynamo available")


@_guard("ember core")
def _ember_core():
    try:
        from ember import _core
    except ImportError as e:
        return Check("ember core", "FAIL", f"the C++ extension does not import: {e}",
                     "rebuild it: pip install --no-build-isolation -e . (or scripts/dev-rebuild)")
    return Check("ember core", "OK", f"ember {_core.__version__} ({os.path.dirname(_core.__file__)})")


def elf_needed(path: str) -> list[str] | None:
    """The DT_NEEDED libraries of a 64-bit little-endian ELF file; None if it is not one."""
    import struct

    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return None
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    loads, dynamic = [], None
    for i in range(phnum):
        p_type, _, p_offset, p_vaddr, _, p_filesz = struct.unpack_from("<IIQQQQ", data, phoff + i * phentsize)
        if p_type == 1:
            loads.append((p_vaddr, p_offset, p_filesz))
        elif p_type == 2:
            dynamic = (p_offset, p_filesz)
    if dynamic is None:
        return []
    entries = [struct.unpack_from("<qQ", data, dynamic[0] + k) for k in range(0, dynamic[1], 16)]
    strtab = next((v for t, v in entries if t == 5), None)
    strtab_off = next((off + strtab - va for va, off, size in loads if va <= strtab < va + size), None)
    if strtab_off is None:
        return None
    names = []
    for tag, val in entries:
        if tag == 0:
            break
        if tag == 1:
            end = data.index(b"\0", strtab_off + val)
            names.append(data[strtab_off + val:end].decode())
    return names


@_guard("libstdc++")
def _libstdcxx():
    """ember's module must use the process's shared libstdc++. A toolchain whose g++
    links it statically gives the module a second copy next to the one torch loads,
    and ember crashed on its first compile that way (a device host's /opt/gcc)."""
    from ember import _core

    return libstdcxx_check(_core.__file__)


def libstdcxx_check(module_path: str) -> Check:
    needed = elf_needed(module_path)
    if needed is None:
        return Check("libstdc++", "INFO", "could not read the C++ module's ELF header")
    if any(n.startswith("libstdc++") for n in needed):
        return Check("libstdc++", "OK", "the C++ module links the shared libstdc++, as torch does")
    return Check("libstdc++", "FAIL",
                 "the C++ module carries its own static libstdc++: a second copy beside torch's, which crashes",
                 "rebuild with the system compiler: CC=/usr/bin/gcc CXX=/usr/bin/g++ "
                 "pip install --no-build-isolation -e .")


@_guard("backends")
def _backends():
    import torch._dynamo
    from importlib.metadata import entry_points

    names = torch._dynamo.list_backends()
    registered = [ep.value for ep in entry_points(group="torch_dynamo_backends") if ep.name == "ember"]
    details = {"backends": names, "entry_point": registered}
    if "ember" not in names or not registered:
        return Check("backends", "FAIL", f"'ember' is not a registered torch.compile backend ({', '.join(names)})",
                     "install the package so its torch_dynamo_backends entry point exists: "
                     "pip install --no-build-isolation -e .", details)
    return Check("backends", "OK", f"{', '.join(names)} (ember via entry point {registered[0]})", details=details)


@_guard("c compiler")
def _c_compiler():
    from ember import _core

    r = _core.check_c_compiler()
    ident = dict(line.split(": ", 1) for line in r["identity"].splitlines() if ": " in line)
    target = ident.get("target", "")
    march = target.split()[0] if target.startswith("-march=") else "unknown"
    details = {"path": r["path"], "version": ident.get("version", ""), "flags": r["flags"], "target": march,
               "seconds": r["seconds"], "log": r["log"]}
    summary = f"{r['path'] or '(none)'}: {ident.get('version', '?')}; flags {' '.join(r['flags'])} ({march})"
    if not r["ok"]:
        log = (r["log"].strip().splitlines() or ["no output"])[0]
        return Check("c compiler", "FAIL", f"test compile failed: {log}",
                     "install a C compiler with OpenMP (apt-get install gcc, or the distribution's equivalent), "
                     "or point EMBER_CC at one", details)
    return Check("c compiler", "OK", f"{summary}; test kernel compiled and ran in {r['seconds']:.2f} s",
                 details=details)


def _cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


@_guard("cpu")
def _cpu():
    flags = _cpu_flags()
    wanted = ["sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_bf16", "avx512_fp16",
              "amx_tile", "neon", "asimd", "sve"]
    have = [f for f in wanted if f in flags]
    details = {"model": cpu_name(), "features": have}
    summary = f"{cpu_name()}; {' '.join(have) or 'no SIMD features found'}"
    if platform.machine() in ("x86_64", "AMD64") and "avx2" not in flags:
        return Check("cpu", "WARN", summary + " (no AVX2)",
                     "kernels vectorize only to SSE here; expect smaller speedups", details)
    return Check("cpu", "OK", summary, details=details)


@_guard("threads")
def _threads():
    import torch

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    threads = torch.get_num_threads()
    details = {"torch_threads": threads, "cores_available": cores, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS")}
    summary = f"{threads} torch/OpenMP thread(s) on {cores} available core(s) (ember's kernels share them: see openmp)"
    if threads > cores:
        return Check("threads", "WARN", summary + ": oversubscribed",
                     f"torch.set_num_threads({cores}) or OMP_NUM_THREADS={cores}", details)
    if threads < cores:
        return Check("threads", "INFO", summary,
                     f"torch.set_num_threads({cores}) uses every core, if nothing else runs here", details)
    return Check("threads", "OK", summary, details=details)


def _dlopen(names: list[str]):
    for name in names:
        try:
            return name, ctypes.CDLL(name)
        except OSError:
            continue
    return None, None


@_guard("cuda")
def _cuda():
    """Probes the CUDA driver and NVRTC the way the GPU backend will load them (dlopen)."""
    details = {}
    driver_name, driver = _dlopen(["libcuda.so.1", "libcuda.so"])
    cuda_home = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    nvrtc_names = ["libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2"]
    nvrtc_names += [os.path.join(cuda_home, d, n) for d in ("lib64", "lib") for n in nvrtc_names[:3]]
    nvrtc_name, nvrtc = _dlopen(nvrtc_names)
    parts = []
    gpus = 0
    if driver is not None:
        count = ctypes.c_int(0)
        init = driver.cuInit(0)
        if init == 0 and driver.cuDeviceGetCount(ctypes.byref(count)) == 0:
            gpus = count.value
        version = ctypes.c_int(0)
        driver.cuDriverGetVersion(ctypes.byref(version))
        parts.append(f"driver {version.value // 1000}.{version.value % 1000 // 10} ({driver_name}), "
                     f"{gpus} GPU(s)" + ("" if init == 0 else f" (cuInit error {init})"))
    else:
        parts.append("no CUDA driver (libcuda.so.1)")
    if nvrtc is not None:
        major, minor = ctypes.c_int(0), ctypes.c_int(0)
        nvrtc.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
        parts.append(f"NVRTC {major.value}.{minor.value} ({nvrtc_name})")
    else:
        parts.append("no NVRTC")
    details.update(driver=driver_name, nvrtc=nvrtc_name, gpus=gpus)
    summary = "; ".join(parts)
    if gpus == 0:
        return Check("cuda", "INFO", summary + ": ember runs on the CPU",
                     "nothing to do for CPU use; for GPUs install the NVIDIA driver", details)
    return Check("cuda", "OK", summary, details=details)


@_guard("cache")
def _cache():
    from ember.caches import cache_dirs
    from ember.config import config
    from ember.tools import cache

    d = cache.info()
    details = dict(d)
    where = f"{d['dir']}"
    if not config.disk_cache:
        return Check("cache", "INFO", f"disk cache off (ember.config.disk_cache=False); {where}", details=details)
    if not d["exists"]:
        parent = os.path.dirname(d["dir"])
        while parent and not os.path.exists(parent):
            parent = os.path.dirname(parent)
        if not os.access(parent, os.W_OK):
            return Check("cache", "WARN", f"{where} does not exist and {parent} is not writable",
                         "set EMBER_CACHE_DIR to a directory of your own", details)
        return Check("cache", "OK", f"{where} (not created yet; the first compile creates it, mode 0700)",
                     details=details)
    if not d["usable"]:
        return Check("cache", "WARN", f"{where} is refused, so every process compiles again: {d['problem']}",
                     cache_dirs.fix_text(d, cache_dirs.ember_cache_setting(config)), details)
    free = shutil.disk_usage(d["dir"]).free
    details["free_bytes"] = free
    summary = (f"{where}: {d['entries']} entries, {cache.format_bytes(d['bytes'])}, mode {d['mode']}, "
               f"owner {d['owner']}, safe; {cache.format_bytes(free)} free")
    if free < 100 * 2**20:
        return Check("cache", "WARN", summary, "free disk space, or move the cache with EMBER_CACHE_DIR", details)
    return Check("cache", "OK", summary, details=details)


@_guard("torch cache")
def _torch_cache():
    """torch's cache directory, where ember keeps its graphs for warm starts
    (AOTAutogradCache, python/ember/caches/aot_cache.py) only if it passes the same checks."""
    from ember.caches import aot_cache, cache_dirs
    from ember.config import config

    if aot_cache.off_reason(config):
        return Check("torch cache", "INFO", f"ember's graphs are not kept in torch's AOTAutogradCache: "
                     f"{aot_cache.off_reason(config)}")
    directory = cache_dirs.torch_cache_dir()
    if not os.path.lexists(directory):  # the doctor creates nothing
        return Check("torch cache", "OK", f"{directory} (not created yet; ember's first compile creates it, mode 0700)",
                     details={"dir": directory})
    refused = cache_dirs.torch_cache_refusal()
    if refused is not None:
        return Check("torch cache", "WARN", f"{directory} is refused, so ember's graphs are not kept in torch's "
                     f"AOTAutogradCache (warm starts compile them again): {refused['problem']}",
                     cache_dirs.fix_text(refused, "TORCHINDUCTOR_CACHE_DIR"), {"dir": directory, **refused})
    return Check("torch cache", "OK", f"{directory}: private, ember's graphs are kept in its AOTAutogradCache",
                 details={"dir": directory})


@_guard("compile")
def _smoke_compile():
    """One graph through the whole pipeline (no disk cache), checked against eager."""
    import warnings

    import torch

    import ember

    x = torch.randn(16, 33)
    fn = lambda t: torch.softmax(t.sin() * 2, -1).sum(-1)  # noqa: E731
    torch._dynamo.reset()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = ember.compile(fn, options={"disk_cache": False})(x)
    torch._dynamo.reset()
    # A second OpenMP runtime is the openmp check's to report (the graph itself compiled).
    ours = [str(w.message) for w in caught if "ember" in str(w.message) and "OpenMP" not in str(w.message)]
    if ours:
        return Check("compile", "FAIL", f"a test graph fell back to eager: {ours[0]}",
                     "run `ember doctor` checks above; report the warning if they pass")
    if not torch.allclose(out, fn(x), rtol=1e-5, atol=1e-5):
        return Check("compile", "FAIL", "a test graph compiled but gave a wrong result", "report this as a bug")
    kernels = ember.last_compile_stats()["kernels"]
    return Check("compile", "OK", f"softmax test graph compiled to {kernels} kernel(s) and matches eager")


@_guard("openmp")
def _openmp():
    """After the test compile loaded kernels: do they share PyTorch's OpenMP runtime?"""
    from ember.runtime import openmp

    if not os.path.exists("/proc/self/maps"):
        return None  # nothing to read it from (not Linux)
    runtimes = openmp.loaded_runtimes()
    details = {"runtimes": runtimes}
    if len(runtimes) > 1:
        return Check("openmp", "WARN", f"{len(runtimes)} OpenMP runtimes loaded: two thread pools compete for "
                     "the cores", openmp.advice(runtimes), details)
    if not runtimes:
        return Check("openmp", "INFO", "no OpenMP runtime found loaded (kernels run on one thread)",
                     details=details)
    return Check("openmp", "OK", f"one OpenMP runtime ({runtimes[0]}): ember's kernels run on torch's threads",
                 details=details)


def format_checks(checks: list[Check]) -> str:
    width = max(len(c.name) for c in checks)
    lines = []
    for c in checks:
        lines.append(f"{c.level:<4}  {c.name:<{width}}  {c.summary}")
        if c.fix and c.level != "OK":
            lines.append(f"{'':<4}  {'':<{width}}  fix: {c.fix}")
    worst = max((LEVELS.index(c.level) for c in checks), default=0)
    counts = {lvl: sum(c.level == lvl for c in checks) for lvl in LEVELS}
    verdict = "ember cannot compile here" if LEVELS[worst] == "FAIL" else "ember is ready"
    lines.append("")
    lines.append(f"{verdict}: " + ", ".join(f"{n} {lvl}" for lvl, n in counts.items() if n))
    return "\n".join(lines)


def main(as_json: bool = False) -> int:
    checks = run_checks()
    if as_json:
        import json

        print(json.dumps([dataclasses.asdict(c) for c in checks], indent=2, default=str))
    else:
        print(format_checks(checks))
    return 1 if any(c.level == "FAIL" for c in checks) else 0


if __name__ == "__main__":
    sys.exit(main())
