"""ember's own format for what a cache or a precompiled artifact holds of a compiled graph.

A pickle runs whatever its bytes name, so whoever can write a cache directory could make
ember run their code by planting one. This format names nothing that runs: it is a JSON
document (numbers, strings, lists, and tagged values ember decodes itself) followed by raw
byte blobs (a constant tensor's memory, a precompiled artifact's kernels). Reading it
never imports a module, calls a constructor named by the data, or unpickles anything.

Layout (integers little-endian):

    magic    8 bytes   MAGIC
    format   u32       FORMAT: bumped whenever the meaning of the document changes
    tag      u16 n, then n ASCII bytes: the writer's tag (ember's build and the options
                       that change compiled code; tags.cache_tag)
    digest   32 bytes  SHA-256 of everything after it
    doc      u64 n, then n bytes of UTF-8 JSON
    blobs    the bytes the document's "blobs" sizes list, back to back, nothing after

decode() checks magic, format, tag and digest, in that order, before it parses anything;
a mismatch raises FormatError saying which, and the caller compiles instead.

Tagged values in the document: {"f": float.hex} a float (exact, -0.0 and NaN kept),
{"t": [...]} a tuple (lists are JSON lists), {"d": [[k, v], ...]} a dict,
{"ref": [nid, idx]} / {"sym": expr, "float": b} / {"call": [op, args, kwargs]} fx_import's
Ref, SymValue and Call, {"dtype"|"device"|"layout"|"memory_format": name}, {"c": [re, im]}
a complex, {"expr": tree} a sympy expression (symbols by name and assumptions, integers,
rationals, floats, and the functions in _SYMPY_FUNCTIONS only), {"tensor": [blob, dtype,
sizes, strides]} a tensor's memory with its exact layout.
"""
from __future__ import annotations

import functools
import hashlib
import json
import struct

import torch

from ..frontend.fx_import import Call, ImportedGraph, Ref, SymValue

MAGIC = b"\x7fEMBER\r\n"
FORMAT = 3  # 1 was a pickled payload (aot_cache.GraphState before this module); 3 added own_layout

_PREFIX = struct.Struct("<8sIH")
_U64 = struct.Struct("<Q")


class FormatError(ValueError):
    """Bytes that are not an intact entry of this format, made by the expected writer."""


def encode(tag: str, doc: dict, blobs: list[bytes]) -> bytes:
    """The container bytes of a JSON-able document and its blobs."""
    tag_bytes = tag.encode("ascii")
    doc = dict(doc, blobs=[len(b) for b in blobs])
    text = json.dumps(doc, separators=(",", ":"), allow_nan=False).encode()
    body = b"".join([_U64.pack(len(text)), text, *blobs])
    return _PREFIX.pack(MAGIC, FORMAT, len(tag_bytes)) + tag_bytes + hashlib.sha256(body).digest() + body


def read_tag(data: bytes) -> str:
    """The writer's tag, after checking magic and format (nothing else is read)."""
    if not isinstance(data, (bytes, bytearray, memoryview)) or len(data) < _PREFIX.size:
        raise FormatError("not an ember entry (too short)")
    magic, fmt, tag_len = _PREFIX.unpack_from(data)
    if magic != MAGIC:
        raise FormatError("not an ember entry (wrong magic bytes)")
    if fmt != FORMAT:
        raise FormatError(f"entry format {fmt} (this ember reads format {FORMAT})")
    end = _PREFIX.size + tag_len
    if len(data) < end + 32 + _U64.size:
        raise FormatError("truncated entry")
    try:
        return bytes(data[_PREFIX.size:end]).decode("ascii")
    except UnicodeDecodeError:
        raise FormatError("entry tag is not ASCII") from None


def decode(data: bytes, tag: str | None) -> tuple[dict, list[memoryview]]:
    """(document, blobs) of an entry written by a backend with `tag` (None: any tag, for
    containers that check their writer from the document)."""
    found = read_tag(data)
    if tag is not None and found != tag:
        raise FormatError(f"entry of another ember build or option set ({found} != {tag})")
    view = memoryview(data)
    start = _PREFIX.size + len(found)
    digest, body = bytes(view[start:start + 32]), view[start + 32:]
    if hashlib.sha256(body).digest() != digest:
        raise FormatError("entry does not match its SHA-256 (truncated or changed)")
    (text_len,) = _U64.unpack_from(body)
    if _U64.size + text_len > len(body):
        raise FormatError("truncated entry document")
    try:
        doc = json.loads(bytes(body[_U64.size:_U64.size + text_len]))
    except (UnicodeDecodeError, ValueError) as e:
        raise FormatError(f"entry document is not JSON ({e})") from None
    sizes = doc.get("blobs") if isinstance(doc, dict) else None
    if not isinstance(sizes, list) or not all(isinstance(n, int) and n >= 0 for n in sizes):
        raise FormatError("entry document lists no blob sizes")
    at = _U64.size + text_len
    if at + sum(sizes) != len(body):
        raise FormatError("entry blobs do not add up to its length")
    blobs = []
    for n in sizes:
        blobs.append(body[at:at + n])
        at += n
    return doc, blobs


# ---- values ---------------------------------------------------------------------------------

_DTYPES = {str(d).removeprefix("torch."): d for d in (
    torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16, torch.bfloat16,
    torch.float32, torch.float64, torch.complex64, torch.complex128)}
_LAYOUTS = {str(v).removeprefix("torch."): v for v in (torch.strided, torch.sparse_coo)}
_MEMORY_FORMATS = {str(v).removeprefix("torch."): v for v in (
    torch.contiguous_format, torch.channels_last, torch.channels_last_3d, torch.preserve_format)}


@functools.lru_cache(maxsize=1)
def _sympy_functions() -> dict:
    """The sympy node classes a size expression may hold, by name: sympy's arithmetic and
    torch's integer functions (torch.utils._sympy.functions), nothing else."""
    import sympy
    from torch.utils._sympy import functions

    classes = {c.__name__: c for c in (sympy.Add, sympy.Mul, sympy.Pow, sympy.Max, sympy.Min, sympy.Mod,
                                       sympy.floor, sympy.ceiling, sympy.Abs)}
    for name in dir(functions):
        c = getattr(functions, name)
        if isinstance(c, type) and issubclass(c, sympy.Basic) and c.__module__ == functions.__name__:
            classes[name] = c
    return classes


class _Encoder:
    def __init__(self):
        self.blobs: list[bytes] = []

    def value(self, v):
        if v is None or isinstance(v, (bool, str)):
            return v
        if isinstance(v, int):
            return int(v)
        if isinstance(v, float):
            return {"f": v.hex()}
        if isinstance(v, list):
            return [self.value(x) for x in v]
        if isinstance(v, tuple) and not hasattr(v, "_fields"):
            return {"t": [self.value(x) for x in v]}
        if isinstance(v, dict):
            return {"d": [[self.value(k), self.value(x)] for k, x in v.items()]}
        if isinstance(v, Ref):
            return {"ref": [v.nid, v.idx]}
        if isinstance(v, SymValue):
            return {"sym": self.expr(v.expr), "float": bool(v.is_float)}
        if isinstance(v, Call):
            return {"call": [v.op, self.value(v.args), self.value(v.kwargs)]}
        if isinstance(v, torch.dtype):
            return {"dtype": _name_in(v, _DTYPES)}
        if isinstance(v, torch.device):
            return {"device": str(v)}
        if isinstance(v, torch.layout):
            return {"layout": _name_in(v, _LAYOUTS)}
        if isinstance(v, torch.memory_format):
            return {"memory_format": _name_in(v, _MEMORY_FORMATS)}
        if isinstance(v, complex):
            return {"c": [v.real.hex(), v.imag.hex()]}
        if isinstance(v, torch.Tensor):
            return {"tensor": self.tensor(v)}
        raise FormatError(f"a value of type {type(v).__name__} has no encoding")

    def tensor(self, t: torch.Tensor) -> list:
        """[blob, dtype, sizes, strides]: the bytes of the memory span the tensor covers, so
        that its exact strides (an expanded constant's zeros) come back."""
        t = t.detach().cpu()
        if t.layout != torch.strided or t.is_quantized or t.is_conj() or t.is_neg():
            raise FormatError(f"a {t.layout} tensor has no encoding")
        sizes, strides = list(t.shape), list(t.stride())
        extent = 1 + sum((n - 1) * s for n, s in zip(sizes, strides)) if all(sizes) else 0
        span = t.as_strided((extent,), (1,), t.storage_offset()).contiguous()
        self.blobs.append(span.view(torch.uint8).numpy().tobytes() if extent else b"")
        return [len(self.blobs) - 1, _name_in(t.dtype, _DTYPES), sizes, strides]

    def expr(self, e) -> list:
        import sympy

        if isinstance(e, sympy.Symbol):
            return ["S", e.name, {k: bool(v) for k, v in e.assumptions0.items() if v is not None}]
        if isinstance(e, sympy.Integer):
            return ["I", int(e)]
        if isinstance(e, sympy.Rational):
            return ["Q", int(e.p), int(e.q)]
        if isinstance(e, sympy.Float):
            return ["F", float(e).hex()]
        if e is sympy.true or e is sympy.false:
            return ["B", bool(e)]
        name = type(e).__name__
        if _sympy_functions().get(name) is not type(e):
            raise FormatError(f"a size expression with {name} has no encoding")
        return [name] + [self.expr(a) for a in e.args]


def _name_in(v, table: dict) -> str:
    for name, x in table.items():
        if x == v:
            return name
    raise FormatError(f"{v} has no encoding")


class _Decoder:
    def __init__(self, blobs: list[memoryview]):
        self.blobs = blobs

    def value(self, v):
        if v is None or isinstance(v, (bool, int, str)):
            return v
        if isinstance(v, list):
            return [self.value(x) for x in v]
        if not isinstance(v, dict) or not v:
            raise FormatError(f"unexpected {type(v).__name__} in an entry")
        kind = next(iter(v))
        x = v[kind]
        if kind == "f":
            return float.fromhex(x)
        if kind == "t":
            return tuple(self.value(a) for a in _list(x))
        if kind == "d":
            return {self.value(k): self.value(a) for k, a in _list(x)}
        if kind == "ref":
            nid, idx = _list(x, 2)
            return Ref(_int(nid), _int(idx))
        if kind == "sym":
            return SymValue(self.expr(x), is_float=bool(v.get("float")))
        if kind == "call":
            op, args, kwargs = _list(x, 3)
            return Call(_str(op), self.value(args), self.value(kwargs))
        if kind == "dtype":
            return _lookup(_DTYPES, x)
        if kind == "device":
            return torch.device(_str(x))
        if kind == "layout":
            return _lookup(_LAYOUTS, x)
        if kind == "memory_format":
            return _lookup(_MEMORY_FORMATS, x)
        if kind == "c":
            re_, im = _list(x, 2)
            return complex(float.fromhex(re_), float.fromhex(im))
        if kind == "tensor":
            return self.tensor(x)
        raise FormatError(f"unknown value kind {kind!r} in an entry")

    def tensor(self, x) -> torch.Tensor:
        blob, dtype, sizes, strides = _list(x, 4)
        dtype = _lookup(_DTYPES, dtype)
        sizes, strides = [_int(n) for n in _list(sizes)], [_int(s) for s in _list(strides)]
        if len(sizes) != len(strides) or any(n < 0 for n in sizes) or any(s < 0 for s in strides):
            raise FormatError("a tensor with an invalid layout in an entry")
        data = self.blobs[_int(blob)] if 0 <= _int(blob) < len(self.blobs) else None
        if data is None:
            raise FormatError("a tensor refers to a missing blob")
        extent = 1 + sum((n - 1) * s for n, s in zip(sizes, strides)) if all(sizes) else 0
        itemsize = torch.empty((), dtype=dtype).element_size()
        if len(data) != extent * itemsize:
            raise FormatError("a tensor's blob does not match its layout")
        flat = torch.frombuffer(bytearray(data), dtype=dtype) if extent else torch.empty(0, dtype=dtype)
        return flat.as_strided(sizes, strides, 0)

    def expr(self, x):
        import sympy

        node = _list(x)
        if not node or not isinstance(node[0], str):
            raise FormatError("a malformed size expression in an entry")
        kind, args = node[0], node[1:]
        if kind == "S":
            name, assumptions = args
            if not isinstance(assumptions, dict) or not all(isinstance(b, bool) for b in assumptions.values()):
                raise FormatError("a malformed symbol in an entry")
            return sympy.Symbol(_str(name), **assumptions)
        if kind == "I":
            return sympy.Integer(_int(args[0]))
        if kind == "Q":
            return sympy.Rational(_int(args[0]), _int(args[1]))
        if kind == "F":
            return sympy.Float(float.fromhex(_str(args[0])))
        if kind == "B":
            return sympy.true if args[0] else sympy.false
        cls = _sympy_functions().get(kind)
        if cls is None:
            raise FormatError(f"unknown size function {kind!r} in an entry")
        return cls(*[self.expr(a) for a in args])


def _list(x, n: int | None = None) -> list:
    if not isinstance(x, list) or (n is not None and len(x) != n):
        raise FormatError("a malformed list in an entry")
    return x


def _int(x) -> int:
    if not isinstance(x, int) or isinstance(x, bool):
        raise FormatError("a malformed integer in an entry")
    return x


def _str(x) -> str:
    if not isinstance(x, str):
        raise FormatError("a malformed string in an entry")
    return x


def _lookup(table: dict, name):
    if name not in table:
        raise FormatError(f"unknown name {name!r} in an entry")
    return table[name]


# ---- a compiled graph's state ---------------------------------------------------------------

# ImportedGraph's fields, all of them: a field added there must be added here (a test checks).
IMPORTED_FIELDS = ("text", "node_ops", "calls", "inputs", "num_placeholders", "num_symbols", "symbol_args",
                   "symbol_info", "attr_inputs", "scalar_inputs", "output_args", "output_views",
                   "own_layout", "op_counts")


def encode_state(tag: str, kind: str, device: str, imported: ImportedGraph, attrs: list[torch.Tensor]) -> bytes:
    """A compiled graph's state: its kind ("inference", "forward", "backward"), device, the
    imported graph (graph text, ATen calls, outputs) and its constant tensors; with torch's
    version, which the reader checks too."""
    enc = _Encoder()
    imported_doc = {name: enc.value(getattr(imported, name)) for name in IMPORTED_FIELDS}
    imported_doc["symbol_index"] = [[enc.expr(s), int(k)] for s, k in imported.symbol_index.items()]
    doc = {"what": "graph", "kind": kind, "device": device, "torch": torch.__version__,
           "imported": imported_doc, "attrs": [enc.tensor(t) for t in attrs]}
    return encode(tag, doc, enc.blobs)


def decode_state(data: bytes, tag: str) -> dict:
    """{"kind", "device", "imported", "attrs"} of encode_state's bytes, after every check;
    FormatError says what did not match."""
    doc, blobs = decode(data, tag)
    if doc.get("what") != "graph":
        raise FormatError(f"not a graph state ({doc.get('what')!r})")
    if doc.get("torch") != torch.__version__:
        raise FormatError(f"entry of torch {doc.get('torch')} (this is torch {torch.__version__})")
    dec = _Decoder(blobs)
    fields = doc.get("imported")
    if not isinstance(fields, dict) or set(fields) != set(IMPORTED_FIELDS) | {"symbol_index"}:
        raise FormatError("a graph state without the imported graph's fields")
    imported = ImportedGraph()
    for name in IMPORTED_FIELDS:
        setattr(imported, name, dec.value(fields[name]))
    imported.symbol_index = {dec.expr(s): _int(k) for s, k in (_list(p, 2) for p in _list(fields["symbol_index"]))}
    _check_imported(imported)
    kind, device = doc.get("kind"), doc.get("device")
    if kind not in ("inference", "forward", "backward") or not isinstance(device, str):
        raise FormatError("a graph state without its kind or device")
    return {"kind": kind, "device": device, "imported": imported,
            "attrs": [dec.tensor(t) for t in _list(doc.get("attrs"))]}


def _check_imported(g: ImportedGraph) -> None:
    """The types the runtime relies on (it indexes and iterates these)."""
    ok = (isinstance(g.text, str) and isinstance(g.node_ops, list) and isinstance(g.calls, dict)
          and all(isinstance(k, int) and isinstance(c, Call) for k, c in g.calls.items())
          and isinstance(g.inputs, dict) and all(isinstance(k, int) and isinstance(v, int) for k, v in g.inputs.items())
          and isinstance(g.num_placeholders, int) and isinstance(g.num_symbols, int)
          and isinstance(g.symbol_args, list) and isinstance(g.symbol_info, list) and isinstance(g.attr_inputs, list)
          and isinstance(g.scalar_inputs, list) and all(isinstance(s, SymValue) for s in g.scalar_inputs)
          and isinstance(g.output_args, list) and isinstance(g.output_views, list) and isinstance(g.op_counts, dict)
          and isinstance(g.own_layout, list) and all(isinstance(k, int) for k in g.own_layout))
    if not ok:
        raise FormatError("a graph state whose imported graph has fields of the wrong type")
