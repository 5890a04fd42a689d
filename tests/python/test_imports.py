"""ember's Python modules import one another without a circle, and each layer imports only
the layers below it (docs/architecture.md, "Around it, in Python"). Imports inside
functions count: a lazy import hides a circle from the interpreter, not from a reader.
The checks read the sources (ast); they import nothing."""
from __future__ import annotations

import ast
import os
import textwrap

import ember

PACKAGE_DIR = os.path.dirname(os.path.abspath(ember.__file__))

# Bottom to top; a module may import its own layer (without a circle) and those below.
LAYERS = [
    ("base", ["ember._core", "ember.config", "ember.logs", "ember.counters", "ember.compile_events",
              "ember.examples"]),
    ("front end", ["ember.frontend"]),
    ("runtime", ["ember.runtime"]),
    ("compiler and storage", ["ember.compiler", "ember.records", "ember.caches.cache_dirs",
                              "ember.caches.graph_format", "ember.caches.tags", "ember.caches.mega_cache"]),
    ("warm starts", ["ember.caches"]),
    ("backend", ["ember.backend"]),
    ("user API and tools", ["ember", "ember.explain", "ember.deploy", "ember.tools"]),
    ("entry points", ["ember.cli", "ember.__main__", "ember.fuzz"]),
]


def module_imports(package_dir: str) -> dict[str, set[str]]:
    """Module -> the package's modules it imports anywhere in its source (a name imported
    from a package counts as that package's module when there is one)."""
    root = os.path.dirname(package_dir)
    files = {}
    for folder, subdirs, names in os.walk(package_dir):
        subdirs[:] = [d for d in subdirs if not d.startswith(("_", "."))]
        for name in names:
            if name.endswith(".py"):
                module = os.path.relpath(os.path.join(folder, name), root)[:-3].replace(os.sep, ".")
                files[module.removesuffix(".__init__")] = os.path.join(folder, name)
    top = os.path.basename(package_dir)
    known = set(files) | {f"{top}._core"}  # the C++ extension

    def owner(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for module, path in files.items():
        here = module.split(".") if path.endswith("__init__.py") else module.split(".")[:-1]
        found = set()
        for node in ast.walk(ast.parse(open(path).read(), path)):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = ".".join(here[:len(here) - node.level + 1] + [node.module or ""]).strip(".") \
                    if node.level else node.module
                names = [f"{base}.{a.name}" for a in node.names]
            else:
                continue
            found.update(m for m in map(owner, names) if m is not None and m != module)
        graph[module] = found
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A circle of imports, as [a, b, ..., a], or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(m):
        state[m] = 1
        path.append(m)
        for n in sorted(graph.get(m, ())):
            if state.get(n) == 1:
                return path[path.index(n):] + [n]
            if n not in state and (cycle := visit(n)):
                return cycle
        state[m] = 2
        path.pop()
        return None

    for m in sorted(graph):
        if m not in state and (cycle := visit(m)):
            return cycle
    return None


def layer_of(module: str) -> int:
    """The index in LAYERS of the longest prefix naming `module` or a package above it."""
    best, rank = -1, None
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > best:
                best, rank = len(p), i
    assert rank is not None, f"{module} is in no layer of LAYERS"
    return rank


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{m} ({LAYERS[layer_of(m)][0]}) imports {n} ({LAYERS[layer_of(n)][0]})"
                  for m, deps in graph.items() for n in deps if layer_of(n) > layer_of(m))


def test_no_import_circle_among_embers_modules():
    graph = module_imports(PACKAGE_DIR)
    assert "ember.backend" in graph and "ember.caches.aot_cache" in graph["ember.caches.graph_cache"]
    cycle = find_cycle(graph)
    assert cycle is None, "import circle: " + " -> ".join(cycle)


def test_each_layer_imports_only_the_layers_below():
    assert upward_imports(module_imports(PACKAGE_DIR)) == []


def _write_package(tmp_path, files: dict[str, str]) -> str:
    package = tmp_path / "ember"
    for name, source in files.items():
        path = package / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source))
    return str(package)


def test_the_checks_find_a_lazy_circle_and_an_upward_import(tmp_path):
    # backend <-> graph_cache through an import inside a function, as it was before the
    # compiler moved out of backend.py; and the runtime reaching up into the caches.
    package = _write_package(tmp_path, {
        "__init__.py": "",
        "backend.py": "from .caches import graph_cache\n",
        "caches/__init__.py": "",
        "caches/graph_cache.py": "def load():\n    from ..backend import load_graph\n",
        "runtime/__init__.py": "",
        "runtime/runner.py": "from ..caches.graph_cache import load\n",
    })
    graph = module_imports(package)
    assert find_cycle(graph) == ["ember.backend", "ember.caches.graph_cache", "ember.backend"]
    assert upward_imports(graph) == [
        "ember.caches.graph_cache (warm starts) imports ember.backend (backend)",
        "ember.runtime.runner (runtime) imports ember.caches.graph_cache (warm starts)"]
