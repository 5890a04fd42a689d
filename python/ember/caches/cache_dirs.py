"""Cache directories ember refuses, said once per process with the fix.

ember loads code from its kernel cache and, for warm starts, rebuilds graphs from entries
in torch's cache directory (aot_cache.py). Whoever can write either directory could make
ember run what they choose, so both must pass the disk cache's checks
(csrc/runtime/disk_cache.h: a real directory, owned by us, not writable by group or
others, under parents nobody else can rename it out of). A directory that fails them is
not used, and that costs the user every compile again in every process; so the first
time a process meets a refused directory it warns (RuntimeWarning), naming the directory,
the reason and the fix, and `ember doctor` reports the same as WARN (tools/doctor.py).
"""
from __future__ import annotations

import os
import stat
import warnings

from .. import _core, logs

# Directories already warned about in this process.
_warned: set[str] = set()
# torch's cache directory -> why ember does not use it (None: it does), once per process.
_torch_verdicts: dict[str, dict | None] = {}


def ember_cache_dir(cfg) -> str:
    return os.path.abspath(cfg.cache_dir or _core.default_cache_dir())


def refusal(directory: str) -> dict | None:
    """None if the disk cache's checks accept `directory` (created 0700 if missing), else
    {"dir", "problem", "fix"}: what is wrong and a shell command that fixes it ("" where
    only another directory does)."""
    info = _core.disk_cache_info(directory)
    if info["usable"]:
        return None
    return {"dir": directory, "problem": info["problem"], "fix": info["fix"]}


def fix_text(refused: dict, setting: str) -> str:
    """The fix for a refused directory, `setting` being how the user chooses another one."""
    other = f"set {setting} to a private directory (one only you can write, e.g. under your home)"
    return f"{refused['fix']}, or {other}" if refused["fix"] else other


def ember_cache_setting(cfg) -> str:
    return "ember.config.cache_dir" if cfg.cache_dir else "EMBER_CACHE_DIR"


def ember_cache_refusal(cfg) -> dict | None:
    """Why ember's own cache directory is refused, or None."""
    return refusal(ember_cache_dir(cfg))


def warn_ember_cache_refused(cfg) -> None:
    """Called when a compile found the disk cache unusable (cache_note): warns once."""
    directory = ember_cache_dir(cfg)
    if directory in _warned:
        return
    refused = refusal(directory)
    if refused is None:  # fixed since the compile looked, or a transient failure
        return
    _warn(refused, "ember's kernel cache", "ember compiles every graph again in every process (no disk cache)",
          ember_cache_setting(cfg))


# ---- torch's cache directory ---------------------------------------------------------

def torch_cache_dir() -> str:
    """Where torch keeps its caches (the AOTAutogradCache under aotautograd/), as
    torch._inductor.runtime.cache_dir_utils.cache_dir() resolves it, without creating it."""
    directory = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if not directory:
        try:
            from torch._inductor.runtime.cache_dir_utils import default_cache_dir
        except ImportError:  # a torch without it has no AOTAutogradCache ember uses either
            return ""
        directory = default_cache_dir()
    return os.path.abspath(directory)


def torch_cache_refusal() -> dict | None:
    """Why ember keeps its graphs out of torch's AOTAutogradCache (None: it may use it).
    torch unpickles the entries it finds there, and an entry holds ember's graph state,
    so the directory gets the disk cache's checks, and so does its aotautograd/
    subdirectory (created 0700 here if missing); every entry in that one must be ours and
    no symlink: entries planted while the directory was open stay there after a chmod.
    Decided once per process and directory."""
    directory = torch_cache_dir()
    if not directory:
        return None
    if directory not in _torch_verdicts:
        _torch_verdicts[directory] = _check_torch_cache(directory)
    return _torch_verdicts[directory]


def warn_torch_cache_refused() -> dict | None:
    """torch_cache_refusal(), warned about once."""
    refused = torch_cache_refusal()
    if refused is not None:
        _warn(refused, "torch's cache directory",
              "ember's graphs are not kept in torch's AOTAutogradCache (warm starts compile them again; "
              "ember's own kernel and graph caches still work)",
              "TORCHINDUCTOR_CACHE_DIR")
    return refused


def _check_torch_cache(directory: str) -> dict | None:
    refused = refusal(directory) or refusal(os.path.join(directory, "aotautograd"))
    if refused is not None:
        refused["dir"] = directory
        return refused
    entries = os.path.join(directory, "aotautograd")
    foreign = _foreign_entry(entries)
    if foreign is None:
        return None
    return {"dir": directory, "problem": foreign, "fix": f"rm -r {entries} (torch writes its entries again)"}


def _foreign_entry(entries: str) -> str | None:
    """The first entry of torch's aotautograd/ (<key>/<entry>) that is a symlink or not
    ours, as a problem; None if there is none."""
    uid = os.geteuid()

    def problem(path: str) -> str | None:
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode):
            return f"{path} is a symlink"
        if st.st_uid != uid:
            return f"{path} is owned by uid {st.st_uid}, not by us (uid {uid})"
        return None

    try:
        with os.scandir(entries) as keys:
            for key in keys:
                found = problem(key.path)
                if found or not key.is_dir(follow_symlinks=False):
                    if found:
                        return found
                    continue
                with os.scandir(key.path) as files:
                    for f in files:
                        found = problem(f.path)
                        if found:
                            return found
    except OSError as e:
        return f"{entries} cannot be listed: {e.strerror}"
    return None


def _warn(refused: dict, what: str, consequence: str, setting: str) -> None:
    if refused["dir"] in _warned:
        return
    _warned.add(refused["dir"])
    message = (f"ember: refusing {what} {refused['dir']}: {refused['problem']} (ember keeps code it will run "
               f"only where no one else can write). Until that changes, {consequence}. "
               f"Fix: {fix_text(refused, setting)}.")
    logs.logger("cache").info("%s", message)
    # Attributed to "ember", not to a line of this file, which would print after it.
    warnings.warn_explicit(message, RuntimeWarning, "ember", 0, module="ember")
