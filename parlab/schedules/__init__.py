"""Pipeline schedules as data, a timeline simulator, and the PipeDream trade-offs (pure Python).

    from parlab.schedules import one_f_one_b, simulate, Costs
    tl = simulate(one_f_one_b(p=4, m=8), Costs(f=1, b=1, w=1))
    tl.bubble_fraction        # Fraction(3, 11) = (p-1)/(m+p-1)
    tl.peak_in_flight         # 4, 3, 2, 1 micro-batches of activations (Fractions) per stage

No torch, no matplotlib: the cost model, the Gantt charts (``parlab.viz.gantt``) and the executor
(``parlab.parallel.pipeline_parallel``, synchronous schedules only) import it unchanged.
"""

from .asynchronous import (
    TradeoffRow,
    WeightVersions,
    pipedream,
    pipedream_2bw,
    tradeoff,
    tradeoff_text,
    weight_versions,
)
from .compare import SCHEDULE_LABELS, SCHEDULES, bubble_curves, make_schedule
from .ops import KINDS, WEIGHT_POLICIES, Op, Schedule
from .simulate import Costs, Timeline, peak_activations, peak_chunks_in_flight, simulate
from .synchronous import gpipe, interleaved_1f1b, naive, one_f_one_b, zero_bubble_h1
from .validate import RULES, dependencies, execution_order, validate

__all__ = [
    "KINDS", "RULES", "SCHEDULES", "SCHEDULE_LABELS", "WEIGHT_POLICIES", "Costs", "Op", "Schedule",
    "Timeline", "TradeoffRow", "WeightVersions", "bubble_curves", "dependencies",
    "execution_order", "gpipe", "interleaved_1f1b", "make_schedule", "naive", "one_f_one_b",
    "peak_activations", "peak_chunks_in_flight", "pipedream", "pipedream_2bw", "simulate",
    "tradeoff", "tradeoff_text", "validate", "weight_versions", "zero_bubble_h1",
]
