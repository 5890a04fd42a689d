"""Stored reference rows: eager and Inductor do not change when ember does, so their rows are
measured once per (device name, torch version) and kept in a JSON file under
benchmarks/suite/refs/; a run measures ember, reuses the stored rows, and re-measures a few
named models (--refs) on every backend to show that the machine still matches them.

A row is stored under model | variant | backend | mode | size | threads | entry version;
its fingerprint (parameter and input shapes) is kept with it, and a reused row whose
fingerprint differs from the ember row's is flagged by the summary.

Files are written by `run.py summary --update-refs FILES` on the JSONL a run brought
back (the device machine's copy of the tree is not the one that is committed).
"""
from __future__ import annotations

import json
import os
import re

REF_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "refs")
REF_BACKENDS = ("eager", "dynamo", "inductor")


def path_for(device_name: str, torch_version: str, ref_dir: str = REF_DIR) -> str:
    slug = re.sub(r"[^A-Za-z0-9.]+", "-", device_name).strip("-").lower()
    return os.path.join(ref_dir, f"{slug}__torch-{torch_version.split('+')[0]}.json")


def key(model: str, variant: str, backend: str, mode: str, size: str, threads, version: int) -> str:
    return f"{model}|{variant}|{backend}|{mode}|{size}|{threads or '-'}|v{version}"


def row_key(row: dict, version: int | None = None) -> str:
    return key(row["model"], row["variant"], row["backend"], row["mode"], row["size"], row.get("threads"),
               row.get("version", version or 1))


def load(path: str) -> dict:
    """key -> stored row ({} when there is no file)."""
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return json.load(f).get("rows", {})


def storable(row: dict) -> bool:
    """A measured eager or Inductor row with a steady-state time, or a Dynamo floor row
    (a first call only), not a reused one."""
    timed = row.get("first_call_s") if row.get("backend") == "dynamo" else row.get("median_ms")
    return (row.get("backend") in REF_BACKENDS and row.get("source") == "measured" and row.get("status") == "ok"
            and timed is not None)


def update(rows: list[dict], ref_dir: str = REF_DIR, replace: bool = False) -> dict[str, int]:
    """Stores the storable rows in the file of their (device name, torch version); a key
    already stored is kept unless `replace`. Returns path -> rows added."""
    by_file: dict[str, list[dict]] = {}
    for row in rows:
        if storable(row):
            by_file.setdefault(path_for(row["device_name"], row["torch"], ref_dir), []).append(row)
    added = {}
    for path, new in by_file.items():
        stored = load(path)
        n = 0
        for row in new:
            k = row_key(row)
            if replace or k not in stored:
                stored[k] = {f: v for f, v in row.items() if f not in ("source", "ref_stored")}
                n += 1
        os.makedirs(os.path.dirname(path), exist_ok=True)
        first = new[0]
        with open(path, "w") as f:
            json.dump({"device_name": first["device_name"], "torch": first["torch"],
                       "rows": dict(sorted(stored.items()))}, f, indent=1, sort_keys=False)
            f.write("\n")
        added[path] = n
    return added
