"""docs/dynamic_shapes.md, the import: graphs with symbolic sizes are imported as size
expressions over the graph's symbols and parse in C++ (test_dynamic_shapes.py runs them)."""
import re

import torch

from ember import _core
from ember.frontend.decompositions import decomposition_table
from ember.frontend.fx_import import import_graph
from torch._dynamo.backends.common import aot_autograd


def _imported(fn, *args, dynamic=True):
    texts = []

    def grab(gm, example_inputs):
        texts.append(import_graph(gm))
        return gm

    be = aot_autograd(fw_compiler=grab, inference_compiler=grab, decompositions=decomposition_table())
    torch._dynamo.reset()
    torch.compile(fn, backend=be, dynamic=dynamic)(*args)
    return texts


def _fn(x, w):
    y = torch.nn.functional.layer_norm(x, [x.shape[-1]]) @ w
    return y.view(-1, 4).softmax(-1), y.sum(0), y[:, 1:].expand(2, -1, -1, -1)


def test_symbolic_graph_is_imported_with_size_expressions():
    (g,) = _imported(_fn, torch.randn(6, 5, 8), torch.randn(8, 16))
    assert g.num_symbols == 4
    text = _core.normalize_graph(g.text)  # parses in C++ and prints back
    assert text.startswith("graph(s0=6, s1=5, s2=8, s3=16) {")
    assert "sym_input(0, s0)" in text
    assert "input(3) : f32[s0,s1,s2]{s1*s2,s2,1}" in text
    # Sizes that Dynamo computes go through its ShapeEnv: view(-1, 4) is 4, not a quotient.
    assert re.search(r"aten\.view\.default\(%\d+, \[-1, 4\]\) : f32\[s3\*s1\*s0//4,4\]\{4,1\}", text), text
    assert "f32[2,s0,-1+s1,s3]{0,s3*s1,s3,1}" in text  # slice and expand
    assert _core.normalize_graph(text) == text


def test_static_graph_text_is_unchanged():
    texts = _imported(_fn, torch.randn(6, 5, 8), torch.randn(8, 16), dynamic=False)
    assert texts[0].num_symbols == 0 and texts[0].text.startswith("graph {\n")
    assert " s0" not in texts[0].text
