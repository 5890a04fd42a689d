"""Differential fuzzing: random graphs compiled by ember, compared with eager PyTorch.

    python -m ember.fuzz --seeds 0:20000 --jobs 16 --out fuzz-summary.json
    python -m ember.fuzz --seeds 1234 --show          # one seed: its program and result
    python -m ember.fuzz --seeds 0:500 --dynamic      # through Dynamo, every size symbolic
    python -m ember.fuzz --device cuda --seeds 0:20000 --jobs 16 --out-dir out  # on the GPU
    python -m ember.fuzz --nvrtc --seeds 0:100        # no GPU: compile their CUDA with NVRTC

A seed determines a program: a few inputs (random shapes, dtypes, strides, with NaN,
+-inf and -0.0 mixed in) and a straight-line function of 1 to 8 ops drawn from the op
families ember lowers (pointwise with broadcasting, views, reductions, softmax and
layer norm, scans, masks, casts, cat/pad/gather). Every op is run eagerly while the
program is generated, so each program is valid eager code; its result shapes and
dtypes steer the next op. With --device cuda (or --dtypes) each program has one float
dtype of f32, bf16 and f16 (generator.py), and runs on CUDA tensors.

Each program goes through the path Dynamo would take, without Dynamo's bytecode
tracing (which would cost more than the rest): torch.fx.symbolic_trace gives the
torch-level graph, and ember's backend (`make_backend`) traces it to ATen, imports it
and compiles it, with the eager fallback off so that any ember error is reported. The
outputs are compared with eager on the same device (judge.py):

- values the generator tracks as *exact* (integers, bools, views and selections of
  inputs, max/min, casts) must be equal, NaN where eager has NaN;
- other floats must be close (per-dtype tolerances), or else pass Inductor's low-precision rule:
  RMSE(ember, fp64 reference) <= 3 RMSE(eager, fp64 reference) + atol/10, with NaN
  and infinities in the same places. The fp64 reference runs the same program with
  every float dtype replaced by float64.

Ops whose result is discontinuous in their float input (floor, comparisons, casts to
int, argmax, remainder, ...) are applied only to exact values: eager and a correct
compiler may differ in the last bit of a sum, and floor() would turn that into 1.

A failure is minimized (outputs, then ops bypassed one at a time) and written as a
self-contained Python repro. The campaign (campaign.py) runs seeds in worker processes
that may crash without ending it, prints progress and writes a JSON summary.
"""
from .campaign import FAILING, GPU_DTYPES, Settings, campaign, parse_seeds, run_seed, seed_ranges
from .generator import Generator, generate
from .judge import Result, _compare, check
from .minimize import minimize, read_repro, repro_text
from .ops import Value, _Reject
from .programs import DTYPES, TOLERANCES, InputSpec, Program, compile_source, make_input, make_inputs

__all__ = ["FAILING", "GPU_DTYPES", "Settings", "campaign", "parse_seeds", "run_seed", "seed_ranges", "Generator", "generate",
           "Result", "check", "minimize", "read_repro", "repro_text", "Value", "DTYPES", "TOLERANCES", "InputSpec",
           "Program", "compile_source", "make_input", "make_inputs"]
