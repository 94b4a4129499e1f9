"""Data parallelism (guide 1.4, 1.5; chapter 03): every rank holds the whole model and averages
its gradients with the others after backward.

    bucket.py   the gradient-bucket plan (pure): parameters last to first, closed at the cap
    ddp.py      DistributedDataParallel from scratch: broadcast, hooks, buckets, no_sync
"""

from .bucket import bucket_bytes, bucket_plan, cap_bytes
from .ddp import DistributedDataParallel, allreduce_gradients, broadcast_state, measure_step

__all__ = [
    "bucket_bytes", "bucket_plan", "cap_bytes",
    "DistributedDataParallel", "allreduce_gradients", "broadcast_state", "measure_step",
]
