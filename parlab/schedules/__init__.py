"""Pipeline schedules as data, a timeline simulator, and the PipeDream trade-offs (pure Python).

    from parlab.schedules import one_f_one_b, simulate, Costs
    tl = simulate(one_f_one_b(p=4, m=8), Costs(f=1, b=1, w=1))
    tl.bubble_fraction        # Fraction(3, 11) = (p-1)/(m+p-1)
    tl.peak_in_flight         # 4, 3, 2, 1 micro-batches of activations (Fractions) per stage

Beyond 1F1B: ZB-V (``zero_bubble_v``, Qi et al. 2024, Sec. 6), DualPipe and DualPipeV
(``dualpipe``, ``dualpipe_v``, DeepSeek-V3 report Sec. 3.2.1): two chunks per rank in a V or in two
directions (``Schedule.placement``), DualPipe's overlapped F&B pairs timed by ``Costs(fb=...)``.

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
from .compare import SCHEDULE_LABELS, SCHEDULES, V_SCHEDULES, allows, bubble_curves, make_schedule
from .dualpipe import dualpipe, dualpipe_v
from .ops import KINDS, PLACEMENTS, WEIGHT_POLICIES, Op, Schedule
from .simulate import Costs, Timeline, peak_activations, peak_chunks_in_flight, simulate
from .synchronous import gpipe, interleaved_1f1b, naive, one_f_one_b, zero_bubble_h1
from .validate import RULES, dependencies, execution_order, unit_order, validate
from .vshape import zero_bubble_v

__all__ = [
    "KINDS", "RULES", "SCHEDULES", "SCHEDULE_LABELS", "WEIGHT_POLICIES", "Costs", "Op", "Schedule",
    "Timeline", "TradeoffRow", "WeightVersions", "bubble_curves", "dependencies",
    "execution_order", "gpipe", "interleaved_1f1b", "make_schedule", "naive", "one_f_one_b",
    "peak_activations", "peak_chunks_in_flight", "pipedream", "pipedream_2bw", "simulate",
    "tradeoff", "tradeoff_text", "validate", "weight_versions", "zero_bubble_h1",
    "PLACEMENTS", "V_SCHEDULES", "allows", "dualpipe", "dualpipe_v", "unit_order", "zero_bubble_v",
]
