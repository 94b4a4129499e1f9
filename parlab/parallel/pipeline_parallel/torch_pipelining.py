"""The same pipelined step through ``torch.distributed.pipelining`` (PyTorch's own executor), for
the tests and ``parlab bench pipeline``: the same TinyGPT pieces (``stage.StageChunk``),
the same micro-batches, torch's ``ScheduleGPipe``, ``Schedule1F1B`` or ``ScheduleInterleaved1F1B``
over the launch's gloo process group (``launch(..., backend="torch")``).

torch's schedules average the m micro-batch losses by dividing the gradients by m
(``scale_grads=True``), as parlab's executor divides each loss by m: both give the serial batch
gradient. Tied embeddings are summed after the step the same way (``sync_tied_grads``).
"""

from __future__ import annotations

import time

import torch

from ..model import GPTConfig, lm_loss
from .stage import build_chunks, owned_params, sync_tied_grads

#: parlab schedule name -> torch.distributed.pipelining class name
TORCH_SCHEDULES = {"gpipe": "ScheduleGPipe", "1f1b": "Schedule1F1B",
                   "interleaved": "ScheduleInterleaved1F1B"}


def torch_schedule(name: str, stages: list, m: int):
    """torch's schedule object for parlab's schedule ``name`` over this rank's ``stages``."""
    from torch.distributed import pipelining

    if name not in TORCH_SCHEDULES:
        raise ValueError(f"torch.distributed.pipelining has no counterpart here for schedule "
                         f"{name!r}; allowed: {', '.join(TORCH_SCHEDULES)}")
    cls = getattr(pipelining, TORCH_SCHEDULES[name])
    if name == "interleaved":
        return cls(stages, m, loss_fn=lm_loss)
    if len(stages) != 1:
        raise ValueError(f"{TORCH_SCHEDULES[name]} runs one stage per rank (v=1), got v={len(stages)}")
    return cls(stages[0], m, loss_fn=lm_loss)


def torch_pipeline_step(comm, name: str, config: GPTConfig, x: torch.Tensor, y: torch.Tensor,
                        m: int, v: int = 1, repeats: int = 1) -> dict:
    """Worker function (torch backend): ``repeats`` steps of torch's schedule ``name`` with m
    micro-batches (v chunks per rank for ``interleaved``) on the batch (x, y), each after a
    barrier; returns {'loss' (last rank), 'grads' (of the last step), 'seconds' (each step),
    'cpu_seconds' (this process's CPU time in each step, ``time.process_time``)}."""
    import torch.distributed as dist
    from torch.distributed.pipelining import PipelineStage

    if comm.backend != "torch":
        raise ValueError(f"torch.distributed.pipelining needs backend='torch' (gloo), got "
                         f"backend={comm.backend!r}")
    p, rank = comm.world_size, comm.rank
    model, chunks = build_chunks(config, p, v, rank)
    cpu = torch.device("cpu")
    stages = [PipelineStage(chunk, chunk.u, p * v, cpu) for chunk in chunks]
    sched = torch_schedule(name, stages, m)
    first, last = chunks[0].first, chunks[-1].last
    seconds, cpu, losses = [], [], []
    for _ in range(repeats):
        for prm in model.parameters():
            prm.grad = None
        losses = []
        dist.barrier()
        t0, c0 = time.perf_counter(), time.process_time()
        kwargs = {"target": y, "losses": losses} if last else {}
        if first:
            sched.step(x, **kwargs)
        else:
            sched.step(**kwargs)
        seconds.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    dist.barrier()
    sync_tied_grads(comm, model, p)
    grads = {n: prm.grad.clone() for n, prm in owned_params(model, chunks).items()
             if prm.grad is not None}
    loss = float(sum(loss.detach() for loss in losses) / len(losses)) if losses else None
    return {"loss": loss, "grads": grads, "seconds": seconds, "cpu_seconds": cpu}
