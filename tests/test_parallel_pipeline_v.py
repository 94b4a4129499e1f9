"""The pipeline executor runs ZB-V, DualPipeV and DualPipe (parlab.schedules V and dual
placements) on CPU ranks, both backends: the loss and every gradient equal the unsplit model's,
and the activations held are the simulator's.

What runs: each rank's op order exactly as scheduled, the V's same-rank hand-off between chunk
p-1 and chunk p, DualPipe's two directions at once on two copies of the stages (gradients summed
between mirror ranks after the step). What does not: the overlap of an F&B pair's computation
with the other's communication (a GPU's streams), so a pair runs as its F then its B here.
Tolerance as tests/test_parallel_pipeline.py: |grad - serial| <= 1e-6 + 1e-4 |serial|, loss 1e-5.
"""

from __future__ import annotations

import pytest
import torch

from parlab.comm import launch
from parlab.parallel import GPTConfig, TinyGPT, batches
from parlab.parallel.pipeline_parallel.executor import pipeline_step
from parlab.schedules import make_schedule, peak_chunks_in_flight

pytestmark = pytest.mark.usefixtures("warm_launches")

CFG = GPTConfig(n_layer=8, hidden=16, n_head=2, seq_len=8)
BATCH = 8
RTOL, ATOL, LOSS_TOL = 1e-4, 1e-6, 1e-5
CASES = {4: [("zb-v", 4), ("dualpipe", 8)]}  # DualPipeV runs the V's code path (ZB-V's)


def _every(comm, cases, x, y):
    return [pipeline_step(comm, make_schedule(name, comm.world_size, m), CFG, x, y) for name, m in cases]


@pytest.fixture(scope="module")
def serial():
    x, y = next(batches(BATCH, CFG.seq_len, seed=5))
    model = TinyGPT(CFG)
    loss = model(x, y)
    loss.backward()
    return (x, y), loss.item(), {n: p.grad.clone() for n, p in model.named_parameters()}


@pytest.mark.parametrize("backend", ["local", "torch"])
@pytest.mark.parametrize("p", sorted(CASES))
def test_v_and_dual_schedules_give_the_serial_loss_and_gradients(serial, backend, p):
    (x, y), loss, grads = serial
    runs = launch(_every, p, CASES[p], x, y, backend=backend, timeout=120)
    for i, (name, m) in enumerate(CASES[p]):
        sched = make_schedule(name, p, m)
        step = [r[i] for r in runs]
        # the last piece's rank(s) hold the loss: rank 0 for the V, ranks 0 and p-1 for DualPipe
        holders = [r.rank for r in step if r.loss is not None]
        assert holders == {"loop": [p - 1], "v": [0], "dual": [0, p - 1]}[sched.placement]
        assert abs(sum(r.loss for r in step if r.loss is not None) - loss) < LOSS_TOL, name
        seen = set()
        for r in step:
            for k, g in r.grads.items():
                torch.testing.assert_close(g, grads[k], rtol=RTOL, atol=ATOL, msg=f"{name} {k}")
                seen.add(k)
        assert seen == set(grads), name  # every parameter on some rank
        assert [r.peak_held for r in step] == list(peak_chunks_in_flight(sched)), name
