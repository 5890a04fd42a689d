"""ember on a CUDA device against eager, for the graphs of cuda_cases.py (pointwise,
softmax, LayerNorm, f16/bf16, tiny GPT-2 and a 2-layer GPT-2 from transformers). Needs a GPU (skipped otherwise: CI has none); run through the device
tool (docs/gpu.md)."""
import pytest
import torch

import ember
from ember import _core

from cuda_cases import CASES, REFUSED, TOLERANCE
from helpers import check_compiled

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


def _run(name):
    """(graphs compiled for CUDA, eager fallbacks) while checking `name` against eager."""
    fn, args = CASES[name]("cuda")
    fallbacks = ember.stats()["eager_fallbacks"]
    cuda_graphs = _core.cuda_compile_counts()["graphs"]
    with torch.no_grad():
        rtol, atol = TOLERANCE.get(name, (None, None))
        check_compiled(fn, *args, fullgraph=False, rtol=rtol, atol=atol)
    torch.cuda.synchronize()
    return _core.cuda_compile_counts()["graphs"] - cuda_graphs, ember.stats()["eager_fallbacks"] - fallbacks


@pytest.mark.parametrize("name", sorted(n for n in CASES if n not in REFUSED))
def test_matches_eager_on_cuda(name):
    compiled, fallbacks = _run(name)
    assert compiled >= 1 and fallbacks == 0, (compiled, fallbacks)


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_graphs_run_eagerly(name):
    _, fallbacks = _run(name)  # correct results through the eager fallback
    assert fallbacks >= 1


def test_runs_on_current_stream():
    """Kernels follow torch's current stream: work queued on a side stream is ordered."""
    fn, args = CASES["softmax_3000"]("cuda")
    compiled = torch.compile(fn, backend="ember")
    expected = fn(*args)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        out = compiled(*args)
    torch.cuda.current_stream().wait_stream(side)
    torch.testing.assert_close(out, expected)
