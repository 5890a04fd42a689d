"""A small syntax highlighter for the code ember generates (C, CUDA C) and its fusion plans,
to HTML spans styled by the report's CSS (no external script or stylesheet).

One regular expression tokenizes the text; each token becomes a span whose class names its
kind (comment, preprocessor line, string, number, keyword, type, ember's own names, a
call). Everything else is escaped and copied as is, so the text reads the same with
highlighting off.
"""
from __future__ import annotations

import html
import re

KEYWORDS = frozenset("""
if else for while do return break continue switch case default goto sizeof static const
volatile inline restrict extern struct union enum typedef __restrict__ __global__ __device__
__host__ __shared__ __launch_bounds__ __forceinline__ __syncthreads __syncwarp register
""".split())

TYPES = frozenset("""
void char short int long float double signed unsigned bool _Bool size_t int8_t int16_t int32_t
int64_t uint8_t uint16_t uint32_t uint64_t half __half __nv_bfloat16 float2 float4 uint2 uint4
""".split())

_TOKEN = re.compile(r"""
    (?P<comment>//[^\n]*|/\*.*?\*/)
  | (?P<pre>^[ \t]*\#[^\n]*)
  | (?P<string>"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')
  | (?P<number>\b(?:0[xX][0-9a-fA-F]+|\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)[fFuUlL]*\b)
  | (?P<word>[A-Za-z_]\w*)
""", re.VERBOSE | re.MULTILINE | re.DOTALL)

# Names ember gives its kernels and buffers: ember_k3, ember_poi_gelu_7, buf12.
_EMBER_NAME = re.compile(r"ember_\w+|buf\d+$")


def _classify_word(text: str, source: str, end: int) -> str | None:
    if text in KEYWORDS:
        return "kw"
    if text in TYPES:
        return "ty"
    if _EMBER_NAME.match(text):
        return "em"
    rest = source[end:end + 2].lstrip()
    if rest.startswith("("):
        return "fn"
    return None


def highlight_c(source: str) -> str:
    """C or CUDA C as HTML (escaped, with spans); wrap it in <pre class="code">."""
    out, pos = [], 0
    for m in _TOKEN.finditer(source):
        out.append(html.escape(source[pos:m.start()]))
        kind, text = m.lastgroup, m.group()
        cls = {"comment": "cm", "pre": "pp", "string": "st", "number": "nu"}.get(kind)
        if kind == "word":
            cls = _classify_word(text, source, m.end())
        out.append(f'<span class="{cls}">{html.escape(text)}</span>' if cls else html.escape(text))
        pos = m.end()
    out.append(html.escape(source[pos:]))
    return "".join(out)


_PLAN_LINE = re.compile(r"^(\s*)(kernel|stage)\b(.*)$")


def highlight_plan(plan: str) -> str:
    """A fusion plan ('kernel ember_k0 outer=[4]' / '  stage 0 inner=[9]: buf1(max)')."""
    lines = []
    for line in plan.splitlines():
        m = _PLAN_LINE.match(line)
        if not m:
            lines.append(html.escape(line))
            continue
        indent, word, rest = m.groups()
        rest = re.sub(r"(ember_\w+|buf\d+)", r'<span class="em">\1</span>', html.escape(rest))
        lines.append(f'{indent}<span class="kw">{word}</span>{rest}')
    return "\n".join(lines)
