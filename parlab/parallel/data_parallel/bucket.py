"""Gradient buckets for data parallelism: which parameters' gradients travel together in one
all-reduce (pure Python, no torch).

Li et al. 2020 ("PyTorch Distributed: Experiences on Accelerating Data Parallel Training",
VLDB, Section 3.2.3 and Algorithm 1) group gradients into buckets of about ``bucket_cap_mb``
and assign parameters to buckets in the *reverse* order of ``model.parameters()``: backward
produces the last layer's gradients first, so the first bucket fills (and its all-reduce
starts) while the earlier layers are still being differentiated. Each bucket holds one dtype.
A bucket is closed as soon as it reaches the cap (so it may exceed the cap by its last
tensor), exactly as ``torch.distributed``'s ``compute_bucket_assignment_by_size`` does.

    plan = bucket_plan([4096, 256, 4096], cap_bytes=4300)     # -> [[2, 1], [0]]
    bucket_bytes([4096, 256, 4096], plan)                     # -> [4352, 4096]
"""

from __future__ import annotations

import math
from collections.abc import Sequence

MB = 1024 * 1024  # torch's bucket_cap_mb counts MiB


def cap_bytes(bucket_cap_mb: float) -> int:
    """``bucket_cap_mb`` (MiB, > 0) in bytes; the argument is named in the error."""
    if isinstance(bucket_cap_mb, bool) or not isinstance(bucket_cap_mb, (int, float)):
        raise TypeError(f"bucket_cap_mb must be a number of MiB, got {type(bucket_cap_mb).__name__}")
    if not bucket_cap_mb > 0:
        raise ValueError(f"bucket_cap_mb must be > 0 (the size in MiB at which a bucket's "
                         f"all-reduce starts), got {bucket_cap_mb!r}")
    if math.isinf(bucket_cap_mb):
        raise ValueError(f"bucket_cap_mb must be finite (MiB), got {bucket_cap_mb!r}; for one "
                         f"bucket holding every gradient give a cap above the model's size")
    return max(1, int(bucket_cap_mb * MB))


def bucket_plan(nbytes: Sequence[int], cap_bytes: int,
                dtypes: Sequence[str] | None = None) -> list[list[int]]:
    """Buckets as lists of parameter indices (indices into ``nbytes``, the gradients' sizes in
    bytes in ``model.parameters()`` order). Parameters are taken last to first; a bucket
    closes once it holds ``cap_bytes`` or more, or when the next parameter has another dtype
    (``dtypes``, one name per parameter; default: all the same). Bucket 0 is the one backward
    fills first (Li et al. 2020, Section 3.2.3)."""
    if isinstance(cap_bytes, bool) or not isinstance(cap_bytes, int) or cap_bytes <= 0:
        raise ValueError(f"cap_bytes must be a positive integer, got {cap_bytes!r}")
    sizes = [int(b) for b in nbytes]
    if any(b < 0 for b in sizes):
        raise ValueError(f"nbytes must be sizes >= 0, got {sizes}")
    kinds = [""] * len(sizes) if dtypes is None else list(dtypes)
    if len(kinds) != len(sizes):
        raise ValueError(f"dtypes has {len(kinds)} entries for {len(sizes)} parameters")
    plan: list[list[int]] = []
    current: list[int] = []
    size = 0
    for i in reversed(range(len(sizes))):
        if current and kinds[i] != kinds[current[-1]]:
            plan.append(current)
            current, size = [], 0
        current.append(i)
        size += sizes[i]
        if size >= cap_bytes:
            plan.append(current)
            current, size = [], 0
    if current:
        plan.append(current)
    return plan


def bucket_bytes(nbytes: Sequence[int], plan: Sequence[Sequence[int]]) -> list[int]:
    """The bytes each bucket's all-reduce carries (the sum of its gradients' sizes)."""
    return [sum(int(nbytes[i]) for i in bucket) for bucket in plan]
