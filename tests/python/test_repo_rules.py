"""Rules about the repository itself (issue 22): small files in the compiler and the
package, and benchmarks/results/ holding only the runs the documents cite. The checks read
files; they import and run nothing of ember."""
from __future__ import annotations

import fnmatch
import glob
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MAX_LINES = 600


def long_files(root: str) -> list[str]:
    """Source files of csrc/ and python/ember/ over MAX_LINES lines, with their length."""
    found = []
    for top in ("csrc", os.path.join("python", "ember")):
        for folder, _, names in os.walk(os.path.join(root, top)):
            for name in sorted(names):
                if name.endswith((".h", ".cpp", ".py")):
                    path = os.path.join(folder, name)
                    with open(path, errors="replace") as f:
                        n = sum(1 for _ in f)
                    if n > MAX_LINES:
                        found.append(f"{os.path.relpath(path, root)}: {n} lines")
    return found


def test_no_source_file_over_600_lines():
    assert long_files(ROOT) == []


def _expand(pattern: str) -> list[str]:
    """'a_{x,y}.json' -> ['a_x.json', 'a_y.json'] (nested braces too)."""
    m = re.search(r"\{([^{}]*)\}", pattern)
    if not m:
        return [pattern]
    return [p for alt in m.group(1).split(",") for p in _expand(pattern[:m.start()] + alt + pattern[m.end():])]


# A cited name: a file name (braces and * allowed), as the documents write them in
# backquotes or in prose.
_NAME = re.compile(r"[A-Za-z0-9_.*{},-]*[A-Za-z0-9_*}]\.(?:jsonl|json|csv|txt|log|png)\b|`[^`\s/]*\*[^`\s]*`")


def uncited_results(root: str) -> list[str]:
    """Files of benchmarks/results/ that neither docs/*.md nor README.md cite."""
    names = sorted(os.listdir(os.path.join(root, "benchmarks", "results")))
    patterns = set()
    for doc in sorted(glob.glob(os.path.join(root, "docs", "*.md"))) + [os.path.join(root, "README.md")]:
        with open(doc) as f:
            for token in _NAME.findall(f.read()):
                for pattern in _expand(token.strip("`")):
                    name = os.path.basename(pattern)
                    if "*" not in name or len(name.partition("*")[0]) >= 4:  # no bare `*.json`
                        patterns.add(name)
    return [n for n in names if not any(fnmatch.fnmatchcase(n, p) for p in patterns)]


def test_every_result_file_is_cited():
    assert uncited_results(ROOT) == []


def test_the_checks_can_fail(tmp_path):
    (tmp_path / "csrc").mkdir()
    (tmp_path / "python" / "ember").mkdir(parents=True)
    (tmp_path / "csrc" / "big.cpp").write_text("x\n" * 601)
    (tmp_path / "python" / "ember" / "ok.py").write_text("x\n" * 600)
    assert long_files(str(tmp_path)) == ["csrc/big.cpp: 601 lines"]

    results = tmp_path / "benchmarks" / "results"
    results.mkdir(parents=True)
    for name in ("a_1.json", "a_2.json", "bench_x.json", "bench_y.json", "c.jsonl", "d.json", "e_old.json"):
        (results / name).write_text("{}")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "benchmarks.md").write_text(
        "JSON in `benchmarks/results/a_{1,2}.json`, (`bench_*`), c.jsonl; `*.json` cites none.\n")
    (tmp_path / "README.md").write_text("see benchmarks/results/d.json\n")
    assert uncited_results(str(tmp_path)) == ["e_old.json"]


def pipeline_passes(root: str) -> list[str]:
    """The passes of run_pipeline (csrc/pipeline.cpp), in order."""
    with open(os.path.join(root, "csrc", "pipeline.cpp")) as f:
        return re.findall(r'\bpass\("(\w+)"', f.read())


def documented_passes(root: str) -> list[str]:
    """The passes of the list docs/architecture.md opens with (its first code block after
    "## The pipeline"; a pass line starts at the margin, after its [target] guard if any)."""
    with open(os.path.join(root, "docs", "architecture.md")) as f:
        text = f.read()
    block = text.split("## The pipeline", 1)[1].split("```", 2)[1]
    names = []
    for line in block.splitlines()[1:]:
        m = re.match(r"(?:\[[^\]]*\]\s*)?(\w+)", line)
        if m and not line[:1].isspace() and m.group(1) != "pass":
            names.append(m.group(1))
    return names


def test_architecture_opens_with_the_pipeline_list():
    assert "## The pipeline" in open(os.path.join(ROOT, "docs", "architecture.md")).read()[:1500]
    assert len(pipeline_passes(ROOT)) >= 10
    assert documented_passes(ROOT) == pipeline_passes(ROOT)
