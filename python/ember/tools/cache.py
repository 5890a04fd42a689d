"""`ember cache info|clear`: the on-disk kernel cache as the C++ core sees it.

The safety checks are the core's own (csrc/runtime/disk_cache.h): a directory that is
a symlink, not ours, or writable by others is reported unusable and never cleared.
"""
from __future__ import annotations

import os
import pwd
import stat


def cache_dir(override: str | None = None) -> str:
    from ember import _core
    from ember.config import config

    return os.path.abspath(override or config.cache_dir or _core.default_cache_dir())


def info(directory: str | None = None) -> dict:
    """Location, entries, size and safety of the cache; does not create the directory."""
    from ember import _core

    path = cache_dir(directory)
    d = {"dir": path, "exists": os.path.lexists(path), "entries": 0, "bytes": 0, "usable": None, "reason": "",
         "mode": None, "owner": None}
    if not d["exists"]:
        d["reason"] = "does not exist yet (created, mode 0700, by the first compile)"
        return d
    st = os.lstat(path)
    d["mode"] = f"{stat.S_IMODE(st.st_mode):04o}"
    d["owner"] = _user(st.st_uid)
    core = _core.disk_cache_info(path)
    d.update(usable=core["usable"], reason=core["reason"], entries=core["entries"], bytes=core["bytes"])
    return d


def clear(directory: str | None = None) -> dict:
    """Removes ember's entries; returns what was there. Refuses an unusable directory."""
    from ember import _core

    before = info(directory)
    if not before["exists"]:
        return before
    if not before["usable"]:
        raise PermissionError(f"ember: not clearing {before['dir']}: {before['reason']}")
    _core.disk_cache_clear(before["dir"])
    return before


def format_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def format_info(d: dict) -> str:
    lines = [f"location: {d['dir']}"]
    if not d["exists"]:
        lines.append(f"status:   {d['reason']}")
        return "\n".join(lines)
    lines.append(f"entries:  {d['entries']}")
    lines.append(f"size:     {format_bytes(d['bytes'])} ({d['bytes']} bytes)")
    lines.append(f"owner:    {d['owner']}, mode {d['mode']}")
    lines.append("status:   " + ("safe (private to this user)" if d["usable"] else f"UNSAFE, bypassed: {d['reason']}"))
    return "\n".join(lines)


def _user(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"
