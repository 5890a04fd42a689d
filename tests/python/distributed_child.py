"""One rank of tests/python/test_distributed.py: trains a small model wrapped in DDP or
FSDP2 (gloo, CPU) for a few SGD steps, compiled with ember and eagerly side by side from
the same weights and inputs, and prints one JSON line: losses, the largest parameter
difference, per step the buckets whose all-reduce DDP launched, in order, and ember.stats().

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
    torch.manual_seed(0)
    model = Net(width, 4 * width, blocks=4)
    ref = copy.deepcopy(model)
    # Buckets of ~1 MB: one per block, so Dynamo's DDPOptimizer splits the graph at each
    # bucket and the backward of each piece ends with its bucket's all-reduce.
    wrap = lambda m: nn.parallel.DistributedDataParallel(m, bucket_cap_mb=1)  # noqa: E731
    return model, ref, wrap(model), wrap(ref)


def fsdp_models(width):
    from torch.distributed.fsdp import fully_shard

    torch.manual_seed(0)
    model = Net(width, 4 * width, blocks=3)
    ref = copy.deepcopy(model)
    for m in (model, ref):
        for b in m.blocks:
            fully_shard(b)
        fully_shard(m)
    return model, ref, model, ref


def full(p):
    return p.full_tensor() if hasattr(p, "full_tensor") else p


def main(kind):
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", rank=rank, world_size=world)
    width = 256 if kind == "ddp" else 64
    model, ref, wrapped, wrapped_ref = (ddp_models if kind == "ddp" else fsdp_models)(width)
    orders = {"ember": [], "eager": []}
    if kind == "ddp":
        record_bucket_order(wrapped, orders["ember"])
        record_bucket_order(wrapped_ref, orders["eager"])
    compiled = torch.compile(wrapped, backend="ember")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    opt_ref = torch.optim.SGD(ref.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(100 + rank)  # each rank its own data: the all-reduce matters
    losses = {"ember": [], "eager": []}
    for _ in range(STEPS):
        x = torch.randn(16, width, generator=g)
        for name, fn, o in (("ember", compiled, opt), ("eager", wrapped_ref, opt_ref)):
            orders[name].append([])
            o.zero_grad()
            loss = fn(x).square().mean()
            loss.backward()
            o.step()
            losses[name].append(loss.item())
    diff = max(((full(a) - full(b)).abs().max() / full(b).abs().max()).item()
               for a, b in zip(model.parameters(), ref.parameters()))
    stats = ember.stats()
    print(RESULT_TAG + json.dumps({"rank": rank, "losses": losses, "max_rel_param_diff": diff,
                                   "bucket_order": orders, "graphs_by_kind": stats["graphs_by_kind"],
                                   "eager_fallbacks": stats["eager_fallbacks"]}), flush=True)
    # FSDP's modules and their states reference each other, so that only the garbage
    # collector frees them; left to the collector at interpreter exit, the process group
    # is destroyed then, and a gloo thread finishing a collective calls into an
    # interpreter that is shutting down (std::terminate in ~AsyncAllgatherCoalescedWork).
    # Freed here, while the interpreter runs, as a training script would.
    del compiled, wrapped, wrapped_ref, model, ref, opt, opt_ref
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
