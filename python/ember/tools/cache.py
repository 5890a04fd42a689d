"""`ember cache info|clear|export|import`: the on-disk kernel cache as the C++ core sees it.

The safety checks are the core's own (csrc/runtime/disk_cache.h): a directory that is
a symlink, not ours, or writable by others is reported unusable and never cleared.

export writes every verified entry (kernels, cubins, max-autotune decisions, ember's graph
cache) into one file in ember's own format (python/ember/caches/graph_format.py: magic, format,
ember's build, SHA-256, checked before anything is read); import checks it and installs
each entry through the same DiskCache, so a fleet ships one file to fresh machines. The
file holds machine code: import only exports you trust, as you would a shared library.
"""
from __future__ import annotations

import os
import pwd
import re
import stat

# An index file: <dir>/<key[0:2]>/<key>.<suffix>.idx (csrc/runtime/disk_cache.h).
_INDEX = re.compile(r"^([0-9a-f]{16,128})\.([A-Za-z0-9_]{1,16})\.idx$")


def cache_dir(override: str | None = None) -> str:
    from ember import _core
    from ember.config import config

    return os.path.abspath(override or config.cache_dir or _core.default_cache_dir())


def info(directory: str | None = None) -> dict:
    """Location, entries, size and safety of the cache; does not create the directory."""
    from ember import _core

    path = cache_dir(directory)
    d = {"dir": path, "exists": os.path.lexists(path), "entries": 0, "bytes": 0, "usable": None, "reason": "",
         "problem": "", "fix": "", "mode": None, "owner": None}
    if not d["exists"]:
        d["reason"] = "does not exist yet (created, mode 0700, by the first compile)"
        return d
    st = os.lstat(path)
    d["mode"] = f"{stat.S_IMODE(st.st_mode):04o}"
    d["owner"] = _user(st.st_uid)
    core = _core.disk_cache_info(path)
    d.update(usable=core["usable"], reason=core["reason"], problem=core["problem"], fix=core["fix"],
             entries=core["entries"], bytes=core["bytes"])
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


def entries(directory: str | None = None) -> list[tuple[str, str]]:
    """(key, suffix) of every committed entry, by its index file."""
    path = cache_dir(directory)
    found = []
    for shard in sorted(os.listdir(path)) if os.path.isdir(path) else []:
        if len(shard) != 2 or not os.path.isdir(os.path.join(path, shard)):
            continue
        for name in sorted(os.listdir(os.path.join(path, shard))):
            m = _INDEX.match(name)
            if m and m.group(1).startswith(shard):
                found.append((m.group(1), m.group(2)))
    return found


def export(out_path: str, directory: str | None = None) -> dict:
    """Writes the cache's verified entries to out_path; {"dir", "entries", "bytes", "skipped"}."""
    from ember import _core
    from ember.caches import graph_format
    from ember.caches.tags import artifact_tag

    d = info(directory)
    if not d["exists"] or not d["usable"]:
        raise PermissionError(f"ember: not exporting {d['dir']}: {d['reason'] or 'it does not exist'}")
    listed, blobs, skipped = [], [], 0
    for key, suffix in entries(d["dir"]):
        data = _core.cache_read(d["dir"], key, suffix)  # verified; a bad entry is a miss
        if data is None:
            skipped += 1
            continue
        listed.append([key, suffix])
        blobs.append(data)
    doc = {"what": "cache export", "entries": listed}
    with open(out_path, "wb") as f:
        f.write(graph_format.encode(artifact_tag(), doc, blobs))
    return {"dir": d["dir"], "entries": len(listed), "bytes": sum(len(b) for b in blobs), "skipped": skipped}


def import_file(in_path: str, directory: str | None = None) -> dict:
    """Installs an export's entries; {"dir", "entries", "bytes"}. Raises ValueError for a file
    that is not an intact export of this ember build, PermissionError for an unusable cache."""
    from ember import _core
    from ember.caches import graph_format
    from ember.caches.tags import artifact_tag

    with open(in_path, "rb") as f:
        data = f.read()
    try:
        doc, blobs = graph_format.decode(data, artifact_tag())
    except graph_format.FormatError as e:
        raise ValueError(f"ember: not importing {in_path}: {e}") from None
    listed = doc.get("entries")
    if doc.get("what") != "cache export" or not isinstance(listed, list) or len(listed) != len(blobs):
        raise ValueError(f"ember: not importing {in_path}: not an ember cache export")
    path = cache_dir(directory)
    installed = 0
    for entry, blob in zip(listed, blobs):
        if not (isinstance(entry, list) and len(entry) == 2 and all(isinstance(x, str) for x in entry)):
            raise ValueError(f"ember: not importing {in_path}: a malformed entry")
        key, suffix = entry
        if not _INDEX.match(f"{key}.{suffix}.idx"):
            raise ValueError(f"ember: not importing {in_path}: a malformed entry name {key[:20]}.{suffix[:20]}")
        if not _core.cache_write(path, key, suffix, bytes(blob)):
            raise PermissionError(f"ember: cannot write the cache at {path}: {info(directory)['reason']}")
        installed += 1
    return {"dir": path, "entries": installed, "bytes": sum(len(b) for b in blobs)}


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
