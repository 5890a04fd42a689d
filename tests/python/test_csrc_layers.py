"""csrc/'s folders are the pipeline's layers and no #include points back up
(docs/architecture.md, "Where each piece lives"): a file includes only its own folder and
the folders below it. Sibling subfolders (codegen/c, codegen/cuda) are two targets of one
layer and include nothing of each other. The check reads the sources; it builds nothing."""
from __future__ import annotations

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CSRC = os.path.join(ROOT, "csrc")

# Bottom to top. "." is csrc/'s own files: the pipeline list (pipeline, run_passes) and
# generic_paths, which runs it on a graph's static twins.
LAYERS = ["ir", "lower", "schedule", "codegen", ".", "jit", "runtime", "bindings", "tools"]

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def includes(csrc: str) -> list[tuple[str, str]]:
    """(file, included file) for every quoted #include under csrc, both relative to it."""
    found = []
    for folder, subdirs, names in os.walk(csrc):
        subdirs.sort()
        for name in sorted(names):
            if name.endswith((".h", ".cpp")):
                path = os.path.join(folder, name)
                rel = os.path.relpath(path, csrc)
                for target in INCLUDE.findall(open(path).read()):
                    found.append((rel, target))
    return found


def folder(rel: str) -> str:
    """'schedule/cuda/launch.h' -> 'schedule/cuda'; 'pipeline.h' -> '.'."""
    return os.path.dirname(rel) or "."


def layer(rel: str) -> str:
    return folder(rel).split("/")[0]


def violations(csrc: str) -> list[str]:
    """Each include that points up a layer, or across sibling subfolders of one layer."""
    bad = []
    for source, target in includes(csrc):
        if not os.path.exists(os.path.join(csrc, target)):
            continue  # a generated or third-party header: not ours to order
        a, b = layer(source), layer(target)
        if a not in LAYERS or b not in LAYERS:
            bad.append(f"{source} -> {target}: a folder the layer list does not name")
        elif LAYERS.index(b) > LAYERS.index(a):
            bad.append(f"{source} -> {target}: {a} includes {b}, a layer above it")
        elif a == b:
            fa, fb = folder(source), folder(target)
            if fa != fb and fa != a and fb != b:
                bad.append(f"{source} -> {target}: {fa} and {fb} are siblings")
    return bad


def test_no_include_points_up():
    assert os.path.isdir(CSRC)
    assert len(includes(CSRC)) > 300  # the walk found the sources
    assert violations(CSRC) == []


def test_every_folder_has_a_layer():
    folders = {entry for entry in os.listdir(CSRC) if os.path.isdir(os.path.join(CSRC, entry))}
    assert folders == set(LAYERS) - {"."}


def test_the_check_finds_an_upward_include(tmp_path):
    def write(rel, text):
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    write("ir/expr.h", "#pragma once\n")
    write("schedule/fuse.h", '#include "ir/expr.h"\n')
    write("codegen/c/kernel.h", '#include "schedule/fuse.h"\n')
    write("codegen/cuda/kernel.h", '#include "codegen/c/kernel.h"\n')
    write("lower/lowering.cpp", '#include "ir/expr.h"\n  #  include "schedule/fuse.h"\n#include <vector>\n')
    assert violations(str(tmp_path)) == [
        "codegen/cuda/kernel.h -> codegen/c/kernel.h: codegen/cuda and codegen/c are siblings",
        "lower/lowering.cpp -> schedule/fuse.h: lower includes schedule, a layer above it",
    ]
