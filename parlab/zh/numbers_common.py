"""Helpers of the spoken answers' numbers: formats (no unit words, no locale) and two shared
computations."""

from __future__ import annotations

from parlab.costmodel import GiB, get_link

#: BLOOM 176B's layout (BigScience 2022, the bloom-book; chapter 08 section 6 prices the same Plan)
BLOOM_LAYOUT = {"dp": 8, "tp": 4, "pp": 12}


def _idle(p: int, m: int, schedule: str = "gpipe", v: int = 2) -> float:
    """The share of the makespan a stage idles, from the schedule simulator ((p-1)/(m+p-1) for GPipe)."""
    from parlab.schedules import make_schedule, simulate

    return float(simulate(make_schedule(schedule, p, m, v)).bubble_fraction)


def _mtnlg() -> dict[str, str]:
    from parlab.costmodel.answers.mtnlg import mtnlg_plan

    plan = mtnlg_plan()
    return {"tp": str(plan.tp), "pp": str(plan.pp), "dp": str(plan.dp), "replica": _f(plan.tp * plan.pp),
            "gpus": _f(plan.n_gpus)}

GB = 1e9


def _f(x: float, digits: int = 0) -> str:
    """A number with thousands separators and ``digits`` decimals: '2,800', '27.7'."""
    return f"{x:,.{digits}f}"


def _pct(x: float, digits: int = 0) -> str:
    return f"{100 * x:.{digits}f}%"


def _s(x: float) -> str:
    """Three significant digits, no thousands separator for small values: '0.452', '15.6'."""
    return f"{x:,.3g}" if abs(x) >= 1000 else f"{x:.3g}"


def _gb(nbytes: float, digits: int = 0) -> str:
    return _f(nbytes / GB, digits)


def _gib(nbytes: float) -> str:
    """'80 GiB': a card's memory as its datasheet's binary size."""
    return f"{nbytes / GiB:,.0f} GiB"


def _link_gbps(name: str) -> str:
    """A link's one-way bandwidth in GB/s."""
    return _s(get_link(name).bandwidth / GB)


