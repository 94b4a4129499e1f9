"""DistributedDataParallel with parameters that get no gradient in a backward: a parameter unused
on one rank contributes zeros to its bucket's average, one unused on every rank ends with a zero
gradient, and the buckets still go out in plan order (one all-reduce each)."""

from __future__ import annotations

import copy
import sys

import cloudpickle
import torch
from torch import nn

from parlab.comm import launch

cloudpickle.register_pickle_by_value(sys.modules[__name__])


class _Branchy(nn.Module):
    """a -> (b if use_b) ; c is never used: the last parameters fill the first buckets."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.a, self.b, self.c = nn.Linear(4, 4), nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, x, use_b: bool):
        h = self.a(x)  # (n, 4)
        return (self.b(h) if use_b else h).sum()


def _worker(comm) -> dict:
    from parlab.parallel.data_parallel import DistributedDataParallel

    model = _Branchy()
    ddp = DistributedDataParallel(model, comm, bucket_cap_mb=1e-6)  # one parameter per bucket
    plain = copy.deepcopy(model)  # the same replica, trained alone: this rank's own gradients
    x = torch.arange(8.0).reshape(2, 4) + comm.rank
    use_b = comm.rank == 0
    plain(x, use_b).backward()
    with comm.recording() as events:
        ddp(x, use_b).backward()
    return {"ddp": {n: p.grad.clone() for n, p in model.named_parameters()},
            "local": {n: (None if p.grad is None else p.grad.clone())
                      for n, p in plain.named_parameters()},
            "calls": len([e for e in events if e.kind == "op" and e.op == "all_reduce"]),
            "buckets": len(ddp.plan)}


def test_unused_parameters_average_as_zeros():
    runs = launch(_worker, 2, timeout=60)
    for r in runs:
        assert r["calls"] == r["buckets"] == 6
        for name, got in r["ddp"].items():
            terms = [run["local"][name] for run in runs]
            want = sum(torch.zeros_like(got) if t is None else t for t in terms) / 2
            assert torch.allclose(got, want, atol=1e-6), name
    assert runs[0]["local"]["b.weight"] is not None and runs[1]["local"]["b.weight"] is None
    assert all(not r["ddp"]["c.weight"].any() for r in runs)
