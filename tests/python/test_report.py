"""`ember report`: one self-contained HTML page per target, checked as a parser reads it
and, where a headless Chromium is installed, as a browser renders it (screenshot, DOM)."""
import html.parser
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from ember.tools.highlight import highlight_c, highlight_plan
from ember.tools.svg_plot import roofline_svg


class Page(html.parser.HTMLParser):
    """Tags, ids, classes and every URL-bearing attribute of a page."""

    def __init__(self):
        super().__init__()
        self.tags, self.ids, self.classes, self.urls, self.stack_errors = [], set(), [], [], []
        self.open = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append(tag)
        if "id" in a:
            self.ids.add(a["id"])
        self.classes += (a.get("class") or "").split()
        self.urls += [v for k, v in attrs if k in ("src", "href", "xlink:href") and v]
        if tag not in ("meta", "br", "line", "circle", "rect", "path"):
            self.open.append(tag)

    def handle_endtag(self, tag):
        if tag in ("line", "circle", "rect", "path"):
            return
        if not self.open or self.open[-1] != tag:
            self.stack_errors.append(tag)
        else:
            self.open.pop()


def _ember(*args, tmp_path):
    env = dict(os.environ, EMBER_CACHE_DIR=str(tmp_path / "cache"), TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "torch"))
    env.pop("EMBER_FALLBACK_ON_ERROR", None)
    return subprocess.run([sys.executable, "-m", "ember", *args], env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("report")
    out, data = tmp / "report.html", tmp / "report.json"
    r = _ember("report", "ln_gelu", "-o", str(out), "--json", str(data), tmp_path=tmp)
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"wrote {out}" in r.stdout
    return out, json.loads(data.read_text())


def test_the_page_is_self_contained_and_well_formed(report):
    out, _ = report
    text = out.read_text()
    page = Page()
    page.feed(text)
    assert not page.stack_errors and not page.open, (page.stack_errors, page.open)
    assert "script" not in page.tags and "link" not in page.tags  # nothing to fetch, nothing to run
    assert all(u.startswith("#") for u in page.urls), page.urls  # only links within the page
    assert {u[1:] for u in page.urls} <= page.ids  # and each leads somewhere
    assert not re.search(r"https?://(?!www\.w3\.org/2000/svg)", text)


def test_the_page_shows_graphs_breaks_plot_code_and_speedup(report):
    out, data = report
    text = out.read_text()
    page = Page()
    page.feed(text)
    (g,) = data["graphs"]
    assert {"summary", "speedup", "graph-breaks", "bandwidth", f"graph-{g['name']}"} <= page.ids
    assert "LayerNormGeluBlock.forward (" in text  # named after the user's code
    # The plot: one point per kernel step with a time, under the copy-bandwidth roof.
    steps = [s for s in g["kernel_steps"] if s["us"] and s["bytes"]]
    assert steps and page.classes.count("point") == len(steps)
    assert "roof" in page.classes and "measured copy bandwidth" in text
    assert data["device"]["copy_gbs"] > 0
    # Kernels with their ops, ATen calls with reasons, the plan and highlighted code.
    for k in g["kernels"]:
        assert k["name"] in text
    assert "matmul: ATen" in text
    assert "plan" in page.classes and "code" in page.classes
    assert '<span class="kw">void</span>' in text or '<span class="ty">void</span>' in text
    # Estimated against measured speedup.
    est = data["estimate"]
    assert f"{est['estimated_speedup']:.2f}x" in text and f"{est['measured_speedup']:.2f}x" in text


def _chromium():
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        if shutil.which(name):
            return shutil.which(name)
    return None


@pytest.mark.skipif(_chromium() is None, reason="no headless Chromium here (apt-get install chromium)")
def test_the_page_renders_in_headless_chromium(report, tmp_path):
    out, data = report
    base = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            "--window-size=1280,2000"]
    shot = tmp_path / "shot.png"
    r = subprocess.run(base + [f"--screenshot={shot}", out.as_uri()], capture_output=True, text=True, timeout=120)
    assert shot.exists() and shot.stat().st_size > 20_000, r.stderr[-2000:]
    with open(shot, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    assert int.from_bytes(head[16:20], "big") == 1280
    # The DOM as the browser built it: the plot's points and the highlighted code are there.
    dom = subprocess.run(base + ["--dump-dom", out.as_uri()], capture_output=True, text=True, timeout=120).stdout
    assert dom.count('class="point"') == sum(1 for s in data["graphs"][0]["kernel_steps"] if s["us"] and s["bytes"])
    assert 'id="bandwidth"' in dom and 'class="code"' in dom and "measured copy bandwidth" in dom


def test_highlighter_marks_tokens_and_keeps_the_text():
    src = '#include <math.h>\n/* why */ static inline float f(float x) { return x * 2.5f; } // "s"\n'
    out = highlight_c(src)
    assert '<span class="pp">#include &lt;math.h&gt;</span>' in out
    assert '<span class="cm">/* why */</span>' in out and '<span class="nu">2.5f</span>' in out
    assert '<span class="kw">static</span>' in out and '<span class="ty">float</span>' in out
    assert '<span class="fn">f</span>' in out
    assert re.sub(r"<[^>]+>", "", out).replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"') == src
    assert '<span class="em">ember_k0</span>' in highlight_plan("kernel ember_k0 outer=[4]")


def test_plot_without_measured_steps_says_so():
    assert "No kernel step" in roofline_svg([], 10.0)
    svg = roofline_svg([{"graph": "g", "label": "ember_k0", "bytes": 1e6, "gbs": 2.0, "us": 500}], 10.0)
    assert svg.count('class="point"') == 1 and "ember_k0" in svg
