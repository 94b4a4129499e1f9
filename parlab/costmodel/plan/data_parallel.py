"""One data-parallel (DDP) training step, term by term: compute, bucketed gradient all-reduce,
how much of it hides behind backward, gradient accumulation and the scaling crossover.

The schedule is PyTorch DDP's (Li et al. 2020, "PyTorch Distributed: Experiences on
Accelerating Data Parallel Training", VLDB, Section 3.2.3, Fig. 6 and 8): backward produces
the gradients at a steady rate, last layer first; bucket i (of ``k`` equal buckets) is ready
after (i+1)/k of backward; its ring all-reduce (Patarasuk & Yuan 2009: 2(p-1) steps moving
2(p-1)/p of the bucket, ``alphabeta.time``) starts when it is ready and the previous bucket
is done. What is still running when backward ends is *exposed*. Without overlap every bucket
is sent after backward. With ``accumulation`` = m micro-batches per step (``no_sync``,
Section 3.2.4), the all-reduce runs once, behind the last backward only.

Compute: model FLOPs of forward + backward = 3 forwards (``step_flops``), forward one third,
backward two thirds (Narayanan et al. 2021, Section 3.5), at the GPU's half-precision peak
times ``Assumptions.matmul_efficiency``. Memory: every GPU keeps the whole replica (model
states, ``model_state_memory``: 16 bytes/parameter for mixed-precision Adam, Rajbhandari et
al. 2020, Section 3.1) plus one micro-batch of activations (``activation_bytes``, Korthikanti
et al. 2022) plus DDP's bucket copy of the gradients (Li et al. 2020, Section 3.2.3).
Pure Python, no torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from parlab.costmodel.pricing import alphabeta
from parlab.costmodel.pricing.layer_flops import step_flops
from parlab.costmodel.pricing.memory import activation_bytes, model_state_memory
from parlab.costmodel.specs._check import positive
from parlab.costmodel.specs.assumptions import DEFAULT, Assumptions
from parlab.costmodel.specs.catalogue import get_model
from parlab.costmodel.specs.hardware import GPUSpec, get_gpu
from parlab.costmodel.specs.links import LinkSpec, get_link
from parlab.costmodel.specs.models import ModelSpec

MB = 1024 * 1024  # bucket sizes in MiB, as torch's bucket_cap_mb
GRAD_BYTES = 2    # bf16 / fp16 gradients on the wire (mixed precision)


@dataclass(frozen=True)
class DDPStep:
    """Seconds of one DDP step on one GPU, and its memory per GPU in bytes."""

    gpus: int
    forward_s: float
    backward_s: float
    comm_s: float          # every bucket's all-reduce, end to end if run alone
    exposed_s: float       # communication not hidden behind backward
    buckets: int
    accumulation: int
    memory_bytes: float

    @property
    def compute_s(self) -> float:
        return self.accumulation * (self.forward_s + self.backward_s)

    @property
    def step_s(self) -> float:
        return self.compute_s + self.exposed_s

    @property
    def hidden_s(self) -> float:
        """Communication hidden behind the backward pass."""
        return self.comm_s - self.exposed_s

    @property
    def hidden_fraction(self) -> float:
        """The part of the communication that ran during backward (1: all hidden)."""
        return 1.0 if self.comm_s == 0 else 1.0 - self.exposed_s / self.comm_s


def exposed_communication(backward_s: float, bucket_s: list[float]) -> float:
    """Seconds of all-reduce still running after backward ends when bucket i becomes ready
    after (i+1)/k of ``backward_s`` and the buckets are sent one after another (Li et al. 2020,
    Section 3.2.3)."""
    k, end = len(bucket_s), 0.0
    for i, t in enumerate(bucket_s):
        end = max(end, backward_s * (i + 1) / k) + t
    return max(0.0, end - backward_s) if k else 0.0


def ddp_step(model: str | ModelSpec, gpus: int, link: str | LinkSpec, gpu: str | GPUSpec = "a100-80gb",
             micro_batch: int = 1, bucket_mb: float = 25.0, overlap: bool = True,
             accumulation: int = 1, a: Assumptions = DEFAULT) -> DDPStep:
    """One DDP step of ``model`` on ``gpus`` GPUs joined by ``link`` (``micro_batch`` sequences
    per GPU per micro-batch, ``accumulation`` micro-batches per step)."""
    m, g, ln = get_model(model), get_gpu(gpu), get_link(link)
    positive("gpus", gpus, integer=True)
    positive("micro_batch", micro_batch, integer=True)
    positive("bucket_mb", bucket_mb)
    positive("accumulation", accumulation, integer=True)
    flops, _ = step_flops(m, micro_batch)
    speed = g.peak_flops("half") * a.matmul_efficiency
    fwd, bwd = flops / 3 / speed, 2 * flops / 3 / speed
    n = m.num_params()
    grad_bytes = n * GRAD_BYTES
    k = max(1, math.ceil(grad_bytes / (bucket_mb * MB)))
    one = (alphabeta.time("all_reduce", "ring", gpus, grad_bytes / k, ln.latency, ln.achievable).seconds
           if gpus > 1 else 0.0)  # k equal buckets: one time, computed once (k can be 10^4)
    bucket_s = [one] * k
    comm = sum(bucket_s)
    exposed = exposed_communication(bwd, bucket_s) if overlap else comm
    memory = (model_state_memory(n, "mixed", "adam").total + activation_bytes(m, micro_batch)
              + grad_bytes)
    return DDPStep(gpus, fwd, bwd, comm, exposed, k, accumulation, memory)


def bucket_sweep(model, gpus: int, link, bucket_mbs, **kw) -> list[DDPStep]:
    """``ddp_step`` for each bucket size: small buckets pay the latency alpha once per bucket,
    one huge bucket cannot start before backward ends."""
    return [ddp_step(model, gpus, link, bucket_mb=b, **kw) for b in bucket_mbs]


def speedup(model, gpus: int, link, global_batch: int, **kw) -> float:
    """Strong scaling (guide 1.11): how many times faster ``global_batch`` sequences train on
    ``gpus`` GPUs than on one (global_batch / gpus sequences per GPU)."""
    one = ddp_step(model, 1, link, micro_batch=global_batch, **kw).step_s
    return one / ddp_step(model, gpus, link, micro_batch=max(1, global_batch // gpus), **kw).step_s


def scaling_crossover(model, link, global_batch: int, max_gpus: int = 4096, **kw) -> int | None:
    """The smallest power-of-two GPU count at which a step's all-reduce no longer fits behind
    its backward (strong scaling, ``global_batch`` split over the GPUs): from there on, N GPUs
    are clearly less than N times faster (guide 1.11). None if it stays hidden up to max_gpus."""
    n = 2
    while n <= max_gpus and global_batch // n >= 1:
        step = ddp_step(model, n, link, micro_batch=global_batch // n, **kw)
        if step.comm_s > step.backward_s:
            return n
        n *= 2
    return None
