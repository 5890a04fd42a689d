"""The built-in example models, compiled whole and compared with eager."""
import pytest
import torch

from helpers import compile_fresh, load_examples, max_rel_err

examples = load_examples()


@pytest.mark.parametrize("name", list(examples.MODELS))
def test_model(name):
    model, inputs = examples.get(name)
    with torch.no_grad():
        expected = model(*inputs)
        compiled = compile_fresh(model, fullgraph=True)
        first = compiled(*inputs)
        second = compiled(*inputs)  # the cached path, not the compile-and-run path
    for out in (first, second):
        assert out.dtype == expected.dtype and out.shape == expected.shape
        err = max_rel_err(out, expected)
        assert err <= 1e-4, f"{name}: max relative error {err:.3g}"
