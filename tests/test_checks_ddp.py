"""Exercise 03's checker passes the reference solution and names the first mistake of wrong ones."""

from __future__ import annotations

import sys

import cloudpickle
import pytest
import torch

from parlab.checks.ddp import check_bucketed_ddp, check_plan
from parlab.parallel.data_parallel import bucket_plan

pytestmark = pytest.mark.usefixtures("warm_launches")  # launch runs on warm ranks (conftest)

cloudpickle.register_pickle_by_value(sys.modules[__name__])


def make_buckets(sizes, cap_bytes):
    return bucket_plan(sizes, cap_bytes) if sizes else []


def hooks(divide_by=None, per_parameter=False):
    """The reference hooks, or one with a mistake: averaging by ``divide_by`` instead of the
    world size, or one all-reduce per parameter instead of per bucket."""

    def attach_hooks(params, comm, plan):
        if per_parameter:
            plan = [[i] for bucket in plan for i in bucket]
        bucket_of = {i: b for b, bucket in enumerate(plan) for i in bucket}
        pending, works = [len(b) for b in plan], []

        def hook_for(i):
            def on_grad(p):
                pending[bucket_of[i]] -= 1
                while len(works) < len(plan) and pending[len(works)] == 0:
                    b = len(works)
                    flat = torch.cat([params[j].grad.reshape(-1) for j in plan[b]])
                    works.append((b, comm.all_reduce(flat, async_op=True)))
            return on_grad

        for i, p in enumerate(params):
            p.register_post_accumulate_grad_hook(hook_for(i))

        def finish():
            n = divide_by or comm.world_size
            with torch.no_grad():
                for b, work in works:
                    summed, offset = work.wait(), 0
                    for i in plan[b]:
                        p = params[i]
                        p.grad.copy_(summed[offset:offset + p.numel()].view_as(p) / n)
                        offset += p.numel()
            works.clear()
            pending[:] = [len(b) for b in plan]

        return finish

    return attach_hooks


def test_the_reference_passes(capsys):
    check_bucketed_ddp(make_buckets, hooks())
    assert "bucketed DDP correct on 3 ranks" in capsys.readouterr().out


def test_a_plan_in_forward_order_is_named():
    def forward_order(sizes, cap):
        return [sorted(b) for b in reversed(bucket_plan(sizes, cap))] if sizes else []

    with pytest.raises(AssertionError, match=r"make_buckets\(\[4096, 256, 4096\], cap_bytes=4300\).*last to first"):
        check_plan(forward_order)


def test_averaging_by_the_wrong_count_is_named():
    with pytest.raises(AssertionError, match="differs from serial training.*divide by comm.world_size"):
        check_bucketed_ddp(make_buckets, hooks(divide_by=2))


def test_one_all_reduce_per_parameter_is_named():
    with pytest.raises(AssertionError, match="expected one all-reduce per bucket"):
        check_bucketed_ddp(make_buckets, hooks(per_parameter=True))


def test_a_stub_raises_not_implemented():
    def stub(*args):
        raise NotImplementedError("exercise")

    with pytest.raises(NotImplementedError):
        check_bucketed_ddp(stub, stub)
    with pytest.raises(NotImplementedError, match="attach_hooks is still a stub"):
        check_bucketed_ddp(make_buckets, stub)
