"""ZeRO (guide 1.16, 1.17, 1.19; chapter 07): the data-parallel replicas of optimizer states,
gradients and parameters removed one stage at a time (Rajbhandari et al. 2020), with offload.

    shard.py     the partition of a flat vector over the DP ranks (pure), padded
    unit.py      the units: parameter groups flattened into one padded buffer
    config.py    the rules of a ZeRO configuration (stage, precision, offload)
    offload.py   one shard's fp32 master + AdamW, on the device or offloaded to the host
    hooks.py     where stage 3 gathers and frees its units; the loss-scaling identity
    buckets.py   stages 0-2's reductions and all-gathers, a bucket of units per collective
    update.py    the step: AdamW on the owned shard, fp16's skipped steps, the weights gathered
    stages.py    ZeroDataParallel: ZeRO stages 0-3, mixed precision, offload
    measure.py   a ZeRO step's bytes held and sent beside the cost model's
"""

from .config import check_zero_args
from .measure import zero_memory_rows, zero_traffic_rows
from .offload import ParamAdamW, ShardOptimizer
from .shard import ShardPlan, shard_plan
from .stages import ZeroDataParallel

__all__ = [
    "check_zero_args", "zero_memory_rows", "zero_traffic_rows", "ParamAdamW", "ShardOptimizer",
    "ShardPlan", "shard_plan", "ZeroDataParallel",
]
