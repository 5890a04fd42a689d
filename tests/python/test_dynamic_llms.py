"""Issue 21: the suite's decoders (small configs, random weights, fp32) with dynamic=True,
end to end. Each model compiles once at its first shape and then serves three more
(batch >= 2: Dynamo specializes batch 1 for every compiler) with outputs equal to eager's,
no new graph, code or compile (ember.stats()), no graph run eagerly, and no op left to
ATen that the same graph at static sizes lowers (the compiler's generic paths,
csrc/generic_paths.h). Llama-style (RoPE, GQA), GPT-2, BLOOM (ALiBi) and Mixtral (a mixture
of experts, which goes through AOTAutograd) cover the ways decoders differ."""
import os
import sys

import pytest
import torch

import ember
from ember.records import Recording

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "benchmarks"))

from suite import registry  # noqa: E402

pytest.importorskip("transformers")

SHAPES = [(4, 32), (2, 7), (3, 100), (8, 17)]
KEYS = ("graphs_compiled", "codegen_runs", "c_compiler_runs", "recompiles", "eager_fallbacks", "dynamo_compiles")


def inputs_at(entry, batch, seq):
    torch.manual_seed(batch * 1000 + seq)
    return entry.dynamic_inputs(batch, seq, "cpu", "small")


@pytest.mark.parametrize("name", ["llama", "gpt2", "bloom", "mixtral"])
def test_decoder_compiles_once_and_serves_every_shape(name):
    entry = registry.get(name)
    model, _ = entry.build("cpu", torch.float32, "small")
    model.eval()
    torch._dynamo.reset()
    ember.reset_stats()
    compiled = torch.compile(model, backend="ember", dynamic=True)
    records = []
    recording = Recording(records)
    first = None
    try:
        for batch, seq in SHAPES:
            inputs = inputs_at(entry, batch, seq)
            with torch.no_grad():
                want = registry.tensors(registry.call(model, inputs))
                got = registry.tensors(registry.call(compiled, inputs))
            assert len(got) == len(want)
            for g, w in zip(got, want):
                torch.testing.assert_close(g, w, atol=2e-4, rtol=2e-4)
            if first is None:
                first = ember.stats()
    finally:
        recording.stop()
    last = ember.stats()
    assert first["graphs_compiled"] >= 1 and first["eager_fallbacks"] == 0, first
    for key in KEYS:
        assert last[key] == first[key], (key, first, last)
    assert records and all(r.fallback_reason is None and r.cg is not None for r in records), \
        [r.fallback_reason for r in records]
    assert all(r.cg.num_symbols >= 2 for r in records)  # batch and sequence both symbolic
    assert last["symbolic_graphs"] == len(records)
    left_to_aten = [p for r in records for p in r.cg.generic_paths if "left to ATen" in p["what"]]
    assert not left_to_aten, left_to_aten
