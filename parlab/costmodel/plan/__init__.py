"""One plan: ``Plan`` (the knobs and their rules), memory per GPU (``memory``), the step time
term by term (``step_time``, ``comm_5d``), ``estimate`` (both, explained) and DDP's buckets
(``data_parallel``). Imports ``specs`` and ``pricing``.

    spec.py          Plan, check_plan, the schedules and offloads a plan may name
    dtypes.py        the training precisions (--dtype) and an FP8 plan's recipe
    memory/          one GPU's memory: model states under TP/PP/ZeRO, a stage's activations
    comm_5d.py       the CP and EP traffic of one micro-batch
    step_time.py     seconds of one step, by term
    layout_comm.py   a layout's group links and one layer's TP time (memoised, for step_time)
    memo.py          plan_memo: bounded memos keyed on the whole model and plan
    fp8.py           an FP8 plan's matmul time and FP8 all-gather
    estimate.py      Estimate: memory and time together, explain()
    validated_range.py  whether an estimate lies inside the range the published runs cover
    data_parallel.py DDP with buckets and overlap (guide 1.4-1.5)
"""

from parlab.costmodel.plan.spec import (
    CP_IMPLS,
    DTYPES,
    OFFLOADS,
    SCHEDULES,
    TRAINING_DTYPES,
    Plan,
    check_plan,
    training_dtype,
)

__all__ = ["CP_IMPLS", "DTYPES", "OFFLOADS", "SCHEDULES", "TRAINING_DTYPES", "Plan", "check_plan",
           "training_dtype"]
