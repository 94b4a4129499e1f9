"""Pipeline parallelism (guide 1.6, 1.12, 1.13; chapter 04): the model's layers cut into stages on
p ranks, micro-batches passed between them by point-to-point sends in the order of a
``parlab.schedules`` schedule.

    stage.py              the layer split of TinyGPT into p stages / p*v chunks
    executor.py           the executor of any synchronous parlab.schedules schedule
    torch_pipelining.py   the same step through torch.distributed.pipelining (tests, bench)
"""

from .executor import (
    StageRun,
    activation_ratio,
    boundary_bytes,
    measured_timeline,
    pipeline_step,
    run_schedule,
    train_pipeline,
)
from .stage import build_chunks, split_layers
from .torch_pipelining import TORCH_SCHEDULES, torch_pipeline_step

__all__ = [
    "StageRun", "activation_ratio", "boundary_bytes", "measured_timeline", "pipeline_step",
    "run_schedule", "train_pipeline", "build_chunks", "split_layers", "TORCH_SCHEDULES",
    "torch_pipeline_step",
]
