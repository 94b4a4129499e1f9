"""Each chapter's cover: the picture on its first screen, under the guide questions it answers.

    from parlab.course.cover import show_cover
    show_cover("why_distributed")        # in the chapter's second cell (its source hidden)

A cover is a figure the chapter draws later in full (its dashboard at its defaults, or its first
diagram), computed by parlab like every other picture: a learner opening the chapter sees what
it is about before reading a line of code. ``COVERS`` maps a chapter's name (its file name
without the number and ``.ipynb``, so a renumbered chapter keeps its cover) to what draws it;
``python -m parlab.course.nbtidy`` inserts the cover cell where a chapter lacks it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path


def _dashboard(name: str, **initial) -> Callable:
    def draw():
        import parlab.widgets as widgets

        dash = getattr(widgets, name)(**initial)
        return dash.figure(dash.result)
    return draw


def _stacks():
    from parlab.viz.advisor import stack_figure

    return stack_figure()


def _one_f_one_b():
    from parlab.schedules import make_schedule, simulate
    from parlab.viz.gantt import gantt_figure

    return gantt_figure(simulate(make_schedule("1f1b", 4, 8)))


def _zero_bubble():
    from parlab.schedules import make_schedule, simulate
    from parlab.viz.gantt import gantt_figure

    return gantt_figure(simulate(make_schedule("zb-h1", 4, 8)))


def _validation():
    from parlab.costmodel.answers.validation import megatron_table1
    from parlab.viz.costmodel import plot_validation
    from parlab.viz.figures import new_figure

    fig = new_figure(6.5, 2.8, left=0.1, bottom=0.2)
    plot_validation(fig.add_subplot(), megatron_table1())
    return fig


def _tp_split():
    from parlab.viz.tensor import split_figure

    return split_figure(2)


def _shards():
    from parlab.viz.zero import shard_figure

    return shard_figure(4)


def _grid():
    from parlab.viz.grid import grid_figure

    return grid_figure(gpus_per_node=8)


#: chapter name -> (what the picture shows, a function returning its matplotlib Figure)
COVERS: dict[str, tuple[str, Callable]] = {
    "start_here": ("the software stacks of distributed training, parlab's beside Google's and NVIDIA's", _stacks),
    "why_distributed": ("the memory wall: one GPU's memory against a model's, term by term",
                        _dashboard("MemoryWallDashboard")),
    "communication": ("a collective's time against message size, algorithm by algorithm: latency, then bandwidth",
                      _dashboard("CommTimeDashboard")),
    "data_parallel": ("DDP's step with and without overlap, and the bucket size's U",
                      _dashboard("DataParallelDashboard")),
    "pipeline_parallel": ("1F1B on 4 stages with 8 micro-batches: the bubble", _one_f_one_b),
    "tensor_parallel": ("a linear layer split by columns and by rows over 2 GPUs", _tp_split),
    "comparing": ("a plan's memory per GPU and step time, term by term", _dashboard("PlanDashboard")),
    "zero_fsdp": ("who holds which shard, ZeRO-0 to ZeRO-3, on 4 ranks", _shards),
    "3d_parallelism": ("a DP x TP x PP grid of GPUs, its groups coloured, nodes outlined", _grid),
    "memory_optimizations": ("memory per phase with and without recomputation",
                             _dashboard("MemoryOptDashboard")),
    "choosing_a_strategy": ("the advisor's plans for one setting, layout by layout",
                            _dashboard("AdvisorDashboard")),
    "practice": ("inference time against answer length, the guide's points beside the model",
                 _dashboard("InferenceDashboard")),
    "interview_drill": ("the drill's questions by guide section", _dashboard("DrillDashboard")),
    "beyond_3d": ("a zero-bubble pipeline schedule (ZB-H1) on 4 stages: backward split in two", _zero_bubble),
    "how_true_the_numbers_are": ("the cost model's TFLOP/s per GPU beside Megatron-LM's measured runs",
                                 _validation),
    "derivations": ("memory per GPU and step time of every ZeRO stage, the terms derived here",
                    _dashboard("ZeroDashboard")),
}


def chapter_name(path: str | Path) -> str:
    """'course/01_why_distributed.ipynb' -> 'why_distributed' (the number and suffix dropped)."""
    stem = Path(path).stem
    head, _, rest = stem.partition("_")
    return rest if head.isdigit() and rest else stem


def cover_figure(name: str):
    """The cover's matplotlib Figure (ValueError naming the chapters that have one)."""
    if name not in COVERS:
        raise ValueError(f"no cover for chapter {name!r}; covers: {', '.join(COVERS)}")
    return COVERS[name][1]()


def cover_text(name: str) -> str:
    return f"<cover: {COVERS[name][0]}>"


def show_cover(name: str) -> None:
    """Display chapter ``name``'s cover (crisp, at its natural width)."""
    from parlab.viz.figures import show_figure

    show_figure(cover_figure(name), text=cover_text(name))


def cover_source(name: str) -> str:
    """The source of a chapter's cover cell."""
    return f'from parlab.course.cover import show_cover\nshow_cover("{name}")'
