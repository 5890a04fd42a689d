"""Shrinking a failing program, and writing it as a self-contained repro."""
from __future__ import annotations

import json
import re

from .judge import Result
from .programs import Program


def _uses(line: str, name: str) -> bool:
    return re.search(rf"\b{name}\b", line.split("=", 1)[1]) is not None


def _defined(line: str) -> list:
    return [n.strip() for n in line.split("=", 1)[0].split(",")]


def _dead_code(prog: Program) -> Program:
    live = set(prog.outputs)
    kept = []
    for ln in reversed(prog.lines):
        if any(n in live for n in _defined(ln)):
            kept.append(ln)
            live.update(re.findall(r"\b[av]\d+\b", ln.split("=", 1)[1]))
    return Program(prog.seed, prog.inputs, list(reversed(kept)), list(prog.outputs))


def minimize(prog: Program, cache_dir: str, still_fails, seconds: float | None = None) -> Program:
    """A smaller program for which still_fails(program) holds; the smallest found within
    `seconds` (None: no limit), so that a campaign with many failures still ends."""
    import time

    deadline = None if seconds is None else time.monotonic() + seconds
    inner = still_fails

    def still_fails(p):  # noqa: F811  out of time: stop shrinking
        return (deadline is None or time.monotonic() < deadline) and inner(p)

    best = _dead_code(prog)
    # One output is enough.
    for out in best.outputs:
        cand = _dead_code(Program(best.seed, best.inputs, best.lines, [out]))
        if still_fails(cand):
            best = cand
            break
    # Bypass ops: replace a value by one of its operands everywhere after it.
    changed = True
    while changed:
        changed = False
        for i, ln in enumerate(best.lines):
            names = _defined(ln)
            operands = re.findall(r"\b[av]\d+\b", ln.split("=", 1)[1])
            for op in dict.fromkeys(operands):
                new_lines = best.lines[:i] + [
                    re.sub(rf"\b{names[0]}\b", op, later) for later in best.lines[i + 1:]]
                outs = [op if o == names[0] else o for o in best.outputs]
                if any(o in names[1:] for o in outs):
                    continue
                cand = _dead_code(Program(best.seed, best.inputs, new_lines, outs))
                if cand.lines and len(cand.lines) < len(best.lines) and still_fails(cand):
                    best = cand
                    changed = True
                    break
            if changed:
                break
    return best


def repro_text(prog: Program, result: Result, flags: dict | None = None, device: str | None = None) -> str:
    """A failure as a Python file: its program as JSON (read by `--repro`), then its
    source, readable as it is."""
    return (
        f"# ember fuzz failure, seed {prog.seed}: {result.status}\n"
        f"# {result.detail.splitlines()[0] if result.detail else ''}\n"
        f"# rerun: python -m ember.fuzz --repro <this file>\n"
        f"PROGRAM = {json.dumps(prog.to_json(), indent=1)}\n"
        f"FLAGS = {json.dumps(flags or {})}\n"
        f"DEVICE = {json.dumps(device)}\n\n"
        f"{prog.source()}"
    )


def read_repro(path: str) -> tuple:
    """(program, flags, device) of a file repro_text wrote."""
    import ast

    values = {}
    for node in ast.parse(open(path).read()).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name in ("PROGRAM", "FLAGS", "DEVICE"):
                # JSON's null is None here, its true/false are True/False.
                text = ast.get_source_segment(open(path).read(), node.value)
                values[name] = json.loads(text)
    return Program.from_json(values["PROGRAM"]), values.get("FLAGS") or None, values.get("DEVICE")
