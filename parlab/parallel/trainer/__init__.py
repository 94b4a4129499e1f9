"""The 3D trainer (guide 1.9, 2.1, 2.2; chapter 08): DP x TP x PP (optionally ZeRO-1) with any
pipeline schedule, the engine of ``python -m parlab.train``, and its sharded checkpoints.

    plan.py         TrainPlan, the checkpointing / fault settings, StepLog, RankReport
    engine.py       train_3d: one rank's groups, pieces and steps
    five_d.py       train_5d: DP x TP x PP x CP x EP of the MoE TinyGPT (chapter 13)
    stage_tp.py     pipeline stages made of tensor-parallel blocks
    zero1.py        ZeRO-1 over the DP group at the step level
    predict.py      the cost model's prediction of each rank's bytes held and sent
    report.py       the measured-vs-predicted table and the measured timeline of a run
    checkpoint/     sharded checkpoints (raw tensors + JSON, no pickle): save / resume / re-shard
"""

from .engine import serial_losses, train_3d
from .five_d import train_5d
from .plan import (
    PHASES,
    Checkpointing,
    Fault,
    RankReport,
    StepLog,
    TrainingStopped,
    TrainPlan,
    with_layout,
)
from .predict import predict
from .report import gather_summary, pipeline_timeline, summary_table

__all__ = [
    "serial_losses", "train_3d", "PHASES", "Checkpointing", "Fault", "RankReport", "StepLog",
    "TrainingStopped", "TrainPlan", "with_layout", "predict", "gather_summary", "pipeline_timeline", "summary_table",
    "train_5d",
]
