"""Schedules by name, side by side: what a dashboard's "schedule" knob and the bubble-vs-m
figure call (one place that maps names to generators and their rules)."""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction

from .dualpipe import dualpipe, dualpipe_v
from .ops import Schedule, check_count
from .simulate import Costs, simulate
from .synchronous import gpipe, interleaved_1f1b, naive, one_f_one_b, zero_bubble_h1
from .vshape import zero_bubble_v

#: Synchronous schedule families, in the order the course shows them.
SCHEDULES = ("naive", "gpipe", "1f1b", "interleaved", "zb-h1")
#: Beyond the guide (chapter 13): the V-shaped and bidirectional schedules, two chunks per rank.
V_SCHEDULES = ("zb-v", "dualpipe", "dualpipe-v")
SCHEDULE_LABELS = {"naive": "naive split", "gpipe": "GPipe", "1f1b": "1F1B", "interleaved": "interleaved 1F1B",
          "zb-h1": "ZB-H1", "zb-v": "ZB-V", "dualpipe": "DualPipe", "dualpipe-v": "DualPipeV"}


def make_schedule(name: str, p: int, m: int = 1, v: int = 2) -> Schedule:
    """The schedule ``name`` (one of ``SCHEDULES`` or ``V_SCHEDULES``) for p stages, m
    micro-batches, v chunks (v is used only by ``interleaved``; the V schedules always have 2;
    ``naive`` ignores m)."""
    makers = {"naive": lambda: naive(p), "gpipe": lambda: gpipe(p, m),
              "1f1b": lambda: one_f_one_b(p, m), "interleaved": lambda: interleaved_1f1b(p, m, v),
              "zb-h1": lambda: zero_bubble_h1(p, m), "zb-v": lambda: zero_bubble_v(p, m),
              "dualpipe": lambda: dualpipe(p, m), "dualpipe-v": lambda: dualpipe_v(p, m)}
    key = str(name).lower().replace("_", "-")
    if key not in makers:
        raise ValueError(f"schedule {name!r} is not one of {', '.join(SCHEDULES + V_SCHEDULES)}")
    return makers[key]()


def allows(name: str, p: int, m: int) -> bool:
    """Whether schedule ``name`` runs p stages with m micro-batches (the generators' rules)."""
    key = str(name).lower().replace("_", "-")
    if key == "interleaved":
        return m % p == 0
    if key == "dualpipe":
        return p % 2 == 0 and m % 2 == 0 and m >= 2 * p
    return m >= 2 * p if key == "dualpipe-v" else True


def bubble_curves(p: int, ms: Iterable[int], v: int = 2, costs: Costs | None = None,
                  names: Iterable[str] = ("gpipe", "1f1b", "interleaved", "zb-h1"),
                  ) -> dict[str, list[tuple[int, Fraction]]]:
    """Per schedule name, [(m, simulated bubble fraction), ...] for each m in ``ms``.

    Each keeps only the m its rules allow (``allows``): multiples of p for ``interleaved``
    (Megatron's rule), m >= 2p for DualPipeV and DualPipe (even m and p for DualPipe).
    """
    p, v = check_count("p (pipeline stages)", p), check_count("v (model chunks per stage)", v)
    ms = [check_count("m (micro-batches)", m) for m in ms]
    curves = {}
    for name in names:
        keep = [m for m in ms if allows(name, p, m)]
        curves[name] = [(m, simulate(make_schedule(name, p, m, v), costs).bubble_fraction)
                        for m in keep]
    return curves
