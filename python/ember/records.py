"""What happened to each graph ember compiled or loaded.

Every graph gets a GraphRecord (its compiled graph, import, times, fallback reason) while
it is being compiled, and a small summary that stays for the process (no references to
graphs or libraries, so that a long-running process that compiles many graphs does not
retain them): `summaries()` for ember.last_compile_stats. Full records are kept only
while a Recording is open (`with recording() as records:`), as ember.explain, the fuzzer
and the tests do around the calls they look at.
"""
from __future__ import annotations

from . import compile_events
from .frontend import graph_source


class GraphRecord:
    """What happened to one graph, for explain() and stats."""

    def __init__(self, name, source: graph_source.GraphSource | None = None):
        self.name = name
        self.source = source or graph_source.GraphSource()  # the user's module and file:line
        self.cg = None
        self.imported = None
        self.times = {}
        self.fallback_reason = None
        self.loaded = False  # rebuilt from a cache entry, not compiled
        # Who traced it to ATen: "ember" (aten_trace.py) or "AOTAutograd (why)"; for a loaded
        # graph, the cache it came from ("AOTAutograd cache", "graph cache").
        self.front_end = ""
        self.ops: list[str] = []  # the graph's ATen ops, in order
        self.trace_id = compile_events.trace_id()  # Dynamo's compile id and attempt, for logs and artifacts
        # The C compiler ran on a thread of its own: times["compile"] and ["load"] are not
        # part of times["total"], the time spent in the backend.
        self.background = False
        self.prepared: list = []  # the runner's prepared weights (prepared.PreparedWeight)
        self.input_names: list[str] = []  # the graph's inputs (placeholders, then attributes), for explain
        self.cuda_graphs = None  # mode="reduce-overhead": its CudaGraphReplay (cudagraphs.py), for explain

    def title(self) -> str:
        """How logs and dumps name the graph: 'inference_0 LayerNormGeluBlock.forward (examples.py:33)'."""
        return f"{self.name} {self.source.label()}"


# The lists of the recording() blocks open now; each collects the full records.
_open: list[list] = []
# One summary per graph, for the process's lifetime.
_summaries: list[dict] = []


def new_record(kind: str, source: graph_source.GraphSource | None) -> tuple[GraphRecord, dict]:
    """A graph's record (named after its kind and its number in this process) and its summary."""
    record = GraphRecord(f"{kind}_{len(_summaries)}", source or graph_source.current())
    summary = {"name": record.name, "source": record.source.label(), "cache": "fallback", "times": {}, "kernels": 0,
               "cache_note": ""}
    _summaries.append(summary)
    for records in _open:
        records.append(record)
    return record, summary


class Recording:
    """Collects the record of every graph compiled or loaded from its making until stop()
    (or the end of its `with` block, which gives the list) in `records`: a list of its
    own, or the one given."""

    def __init__(self, records: list | None = None):
        self.records = records if records is not None else []
        _open.append(self.records)

    def stop(self) -> None:
        for i, r in enumerate(_open):
            if r is self.records:
                del _open[i]
                return

    def __enter__(self) -> list:
        return self.records

    def __exit__(self, *exc) -> None:
        self.stop()


def recording() -> Recording:
    """`with recording() as records:` the records of the graphs compiled or loaded in the block."""
    return Recording()


def recording_active() -> bool:
    """Whether a recording() block is open (a record then keeps the graph's ops and inputs too)."""
    return bool(_open)


def summaries() -> list[dict]:
    """Every graph's summary so far, oldest first: name, source, cache, times, kernels, cache_note."""
    return list(_summaries)
