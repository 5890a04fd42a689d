"""CUDA targets for `ember report` and `ember bench --html` on the GPU machine (bf16,
small batches, random weights; the builders of gpu_models.py):

    ember report benchmarks/gpu_report_targets.py:gpt2 -o gpt2.html
    ember report benchmarks/gpu_report_targets.py:resnet50 -o resnet50.html
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_models import build  # noqa: E402


def gpt2():
    model, inputs, _ = build("gpt2", quick=True)
    return model.eval(), inputs


def resnet50():
    model, inputs, _ = build("resnet50", quick=True)
    return model.eval(), inputs
