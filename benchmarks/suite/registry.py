"""The suite's models: what each one is, how to build it, and which shard runs it.

An entry builds a model with random weights (no downloads) and its inputs:

    entry = registry.get("llama")
    model, inputs = entry.build("cuda", torch.bfloat16, "full")   # inputs: a dict of kwargs or a tuple
    out = registry.call(model, inputs)

size "full" is a realistic size and batch for an 80 GB GPU; "small" is the CPU suite's
configuration (issue 24): the same architecture, a few layers, narrow, a small batch.
`train` says whether the model has a training variant (forward + backward). Decoder LMs
(and two encoders) have `dynamic_inputs(batch, seq, device, size)`: inputs for any batch
and sequence length, for the dynamic-shape work (issue 21).

`version` changes whenever an entry's definition changes what is measured (config, batch,
inputs): stored reference rows (refcache.py) of another version are not reused.
"""
from __future__ import annotations

import dataclasses
import importlib.util
from typing import Any, Callable

SIZES = ("full", "small")


@dataclasses.dataclass(frozen=True)
class Model:
    name: str
    family: str        # decoder, encoder, encoder-decoder, vision, audio, multimodal, convnet, segmentation, block
    source: str        # transformers, torchvision, timm, hand-written
    build: Callable[..., tuple[Any, Any]]  # (device, dtype, size) -> (model, inputs)
    train: bool = False
    dynamic_inputs: Callable[..., Any] | None = None  # (batch, seq, device, size) -> inputs
    version: int = 1
    weight: float = 1.0  # relative run time on the GPU (compile dominates), for balancing shards
    note: str = ""       # what the model stresses, one line

    @property
    def requires(self) -> tuple[str, ...]:
        """Packages the builder imports (timm also needs torchvision)."""
        return {"transformers": ("transformers",), "torchvision": ("torchvision",),
                "timm": ("timm", "torchvision")}.get(self.source, ())

    def missing(self) -> str | None:
        """Why this machine cannot build the model (a package is not installed), or None."""
        absent = [p for p in self.requires if importlib.util.find_spec(p) is None]
        if absent:
            return f"{' and '.join(absent)} not installed"
        return None


REGISTRY: dict[str, Model] = {}


def register(model: Model) -> Model:
    if model.name in REGISTRY:
        raise ValueError(f"suite model {model.name!r} registered twice")
    REGISTRY[model.name] = model
    return model


def _load():
    # Importing the definition modules registers their models (none imports a model
    # library at import time: builders import transformers, timm or torchvision when called).
    from . import models_hf, models_vision, models_blocks  # noqa: F401  (registry order)


def all_models() -> list[Model]:
    _load()
    return list(REGISTRY.values())


def get(name: str) -> Model:
    _load()
    if name not in REGISTRY:
        raise KeyError(f"no suite model {name!r}; known: {', '.join(REGISTRY)}")
    return REGISTRY[name]


def select(names: str | None = None, families: str | None = None) -> list[Model]:
    """Models by comma-separated names and/or families (all when both are empty), in
    registry order."""
    models = all_models()
    if names:
        wanted = [n.strip() for n in names.split(",") if n.strip()]
        for n in wanted:
            get(n)  # unknown names fail with the list of known ones
        models = [m for m in models if m.name in wanted]
    if families:
        fams = {f.strip() for f in families.split(",")}
        models = [m for m in models if m.family in fams]
    return models


def shard(models: list[Model], k: int, n: int, weight=None) -> list[Model]:
    """Shard k of n (1-based): models spread over n shards by weight (`weight(model)`, the
    model's own weight by default), heaviest first, each to the lightest shard so far
    (deterministic for a given model list and weights); each shard keeps registry order."""
    if not 1 <= k <= n:
        raise ValueError(f"shard {k}/{n}: need 1 <= K <= N")
    weight = weight or (lambda m: m.weight)
    loads = [0.0] * n
    owner = {}
    for m in sorted(models, key=lambda m: (-weight(m), m.name)):
        i = min(range(n), key=lambda j: (loads[j], j))
        loads[i] += weight(m)
        owner[m.name] = i
    return [m for m in models if owner[m.name] == k - 1]


def call(model, inputs):
    """model(**inputs) for a dict, model(*inputs) for a tuple."""
    return model(**inputs) if isinstance(inputs, dict) else model(*inputs)


def tensors(out) -> list:
    """The tensors of a model output in a stable order (transformers' ModelOutputs are
    dicts; None entries skipped)."""
    import torch

    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict):
        return [t for v in out.values() for t in tensors(v)]
    if isinstance(out, (list, tuple)):
        return [t for v in out for t in tensors(v)]
    return []
