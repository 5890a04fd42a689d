"""One rank of tests/python/test_distributed.py: trains a small model wrapped in DDP or
FSDP2 (gloo, CPU) for a few SGD steps, compiled with ember, eagerly, and eagerly in fp64
(the reference) side by side from the same weights and inputs, and prints one JSON line:
the three runs' losses, each parameter's relative RMSE against fp64 for ember and eager,
per step the buckets whose all-reduce DDP launched, in order, and ember.stats().

    RANK=r WORLD_SIZE=n MASTER_ADDR=... MASTER_PORT=... python distributed_child.py ddp|fsdp
"""
import copy
import gc
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

import ember

RESULT_TAG = "DISTRIBUTED_RESULT "
STEPS = 3


class Block(nn.Module):
    def __init__(self, width, hidden):
        super().__init__()
        self.up = nn.Linear(width, hidden)
        self.down = nn.Linear(hidden, width)
        self.norm = nn.LayerNorm(width)

    def forward(self, x):
        return x + self.norm(self.down(F.gelu(self.up(x))))


class Net(nn.Module):
    # A user-defined module: Dynamo traces user code, and steps into torch's own modules
    # (a bare nn.Sequential's forward is never a frame Dynamo starts tracing at).
    def __init__(self, width, hidden, blocks):
        super().__init__()
        self.blocks = nn.ModuleList(Block(width, hidden) for _ in range(blocks))
        self.head = nn.Linear(width, 8)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.head(x)


def record_bucket_order(ddp, order):
    """A DDP comm hook that all-reduces as DDP does and records which bucket went when."""
    def hook(state, bucket):
        order[-1].append(bucket.index())
        fut = dist.all_reduce(bucket.buffer().div_(dist.get_world_size()), async_op=True).get_future()
        return fut.then(lambda f: f.value()[0])

    ddp.register_comm_hook(None, hook)


def ddp_models(width):
    """(modules, wrapped): ember's, eager's and the fp64 reference's."""
    torch.manual_seed(0)
    model = Net(width, 4 * width, blocks=4)
    models = (model, copy.deepcopy(model), copy.deepcopy(model).double())
    # Buckets of ~1 MB: one per block, so Dynamo's DDPOptimizer splits the graph at each
    # bucket and the backward of each piece ends with its bucket's all-reduce.
    wrap = lambda m: nn.parallel.DistributedDataParallel(m, bucket_cap_mb=1)  # noqa: E731
    return models, tuple(wrap(m) for m in models)


def fsdp_models(width):
    from torch.distributed.fsdp import fully_shard

    torch.manual_seed(0)
    model = Net(width, 4 * width, blocks=3)
    models = (model, copy.deepcopy(model), copy.deepcopy(model).double())
    for m in models:
        for b in m.blocks:
            fully_shard(b)
        fully_shard(m)
    return models, models


def full(p):
    return p.full_tensor() if hasattr(p, "full_tensor") else p


def main(kind):
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", rank=rank, world_size=world)
    width = 256 if kind == "ddp" else 64
    models, wrapped = (ddp_models if kind == "ddp" else fsdp_models)(width)
    names = ("ember", "eager", "ref")
    orders = {name: [] for name in names}
    if kind == "ddp":
        for name, w in zip(names, wrapped):
            record_bucket_order(w, orders[name])
    fns = dict(zip(names, (torch.compile(wrapped[0], backend="ember"),) + wrapped[1:]))
    opts = {name: torch.optim.SGD(m.parameters(), lr=0.1) for name, m in zip(names, models)}
    g = torch.Generator().manual_seed(100 + rank)  # each rank its own data: the all-reduce matters
    losses = {name: [] for name in names}
    for _ in range(STEPS):
        x = torch.randn(16, width, generator=g)
        for name in names:
            orders[name].append([])
            opts[name].zero_grad()
            loss = fns[name](x.double() if name == "ref" else x).square().mean()
            loss.backward()
            opts[name].step()
            losses[name].append(loss.item())

    def rel_rmse(a, r):
        a, r = full(a).detach().double(), full(r).detach().double()
        return ((a - r).square().mean().sqrt() / r.square().mean().sqrt()).item()

    param_errors = [[rel_rmse(a, r), rel_rmse(e, r)]
                    for a, e, r in zip(*(m.parameters() for m in models))]
    stats = ember.stats()
    print(RESULT_TAG + json.dumps({"rank": rank, "losses": losses, "param_errors": param_errors,
                                   "bucket_order": orders, "graphs_by_kind": stats["graphs_by_kind"],
                                   "eager_fallbacks": stats["eager_fallbacks"]}), flush=True)
    # FSDP's modules and their states reference each other, so that only the garbage
    # collector frees them; left to the collector at interpreter exit, the process group
    # is destroyed then, and a gloo thread finishing a collective calls into an
    # interpreter that is shutting down (std::terminate in ~AsyncAllgatherCoalescedWork).
    # Freed here, while the interpreter runs, as a training script would.
    del fns, wrapped, models, opts
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
