"""Time a schedule: start and end of every op, makespan, bubble, activations held.

Each stage runs its ops in order, one at a time; an op starts when the stage is free and every
dependency (``validate.dependencies``) has ended, plus ``p2p`` seconds when the dependency ran
on another stage (an activation or gradient crossing a link; sends are asynchronous, the sender
does not wait). Costs are per stage, for the stage's whole share of the model: a chunk of an
interleaved or V schedule costs 1/v of it (``Schedule.chunk_share``; a DualPipe chunk is a
whole stage). A schedule without W runs the whole backward in B, which costs ``b + w``. So
the default ``Costs()`` (f = b = w = 1) is the textbook convention "backward = 2 x forward"
(Narayanan et al. 2021, Sec. 2.2: t_b = 2 t_f), and the zero-bubble convention T_F = T_B = T_W
(Qi et al. 2023, Sec. 2).

With equal costs and p2p = 0 this gives the textbook bubble (p-1)/(m+p-1) of the makespan for
GPipe and 1F1B (Huang et al. 2019; Narayanan et al. 2021, Sec. 2.2.1), 1/v of that bubble time
for interleaved (Sec. 2.2.2), and (p-1)(T_F + T_B - T_W) for ZB-H1 (Qi et al. 2023, Sec. 3.1).
Integers or Fractions in, exact Fractions out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from numbers import Real

from .ops import Op, Schedule
from .validate import check_ops, unit_order

Number = int | float | Fraction


def _per_stage(name: str, value: Number | Sequence[Number], p: int | None) -> tuple[Number, ...]:
    """``value`` as one number per stage (p of them; any count when p is None), checked."""
    many = isinstance(value, Sequence) and not isinstance(value, str)
    values = tuple(value) if many else (value,)
    for s, x in enumerate(values):
        if isinstance(x, bool) or not isinstance(x, Real):
            raise ValueError(f"costs: {name} must be a number or one number per stage, got {x!r}")
        if x < 0:
            where = f" on stage {s}" if many else ""
            raise ValueError(f"costs: {name}={x}{where} is negative (costs must be >= 0)")
    if p is not None and many and len(values) != p:
        raise ValueError(f"costs: {name} has {len(values)} per-stage values for p={p} stages")
    return values if many or p is None else values * p


def _exact(x: Number) -> Number:
    return Fraction(x) if isinstance(x, int | Fraction) else x


@dataclass(frozen=True)
class Costs:
    """Seconds (or any unit) of one micro-batch through one stage's share of the model:
    ``f`` forward, ``b`` input-gradient backward, ``w`` weight-gradient backward, ``p2p`` one
    activation or gradient send between stages; ``fb`` an overlapped forward-and-backward pair
    (DualPipe's F&B: a forward chunk and a full backward chunk computed together, their
    communication hidden; None = f + b + w, no overlap). Each is a number or one value per
    stage."""

    f: Number | Sequence[Number] = 1
    b: Number | Sequence[Number] = 1
    w: Number | Sequence[Number] = 1
    p2p: Number = 0
    fb: Number | Sequence[Number] | None = None

    def __post_init__(self) -> None:
        for name in ("f", "b", "w") + (("fb",) if self.fb is not None else ()):
            _per_stage(name, getattr(self, name), None)
        if isinstance(self.p2p, Sequence):
            raise ValueError(f"costs: p2p must be one number (every link alike), got {self.p2p!r}")
        _per_stage("p2p", self.p2p, None)

    def durations(self, schedule: Schedule) -> tuple[dict[str, Number], ...]:
        """Per stage, the duration of an F, B and W op of ``schedule``: a chunk's share (1/v) of
        the stage's cost; B includes W when the schedule does not split the backward."""
        f, b, w = (_per_stage(n, getattr(self, n), schedule.p) for n in ("f", "b", "w"))
        split, v = schedule.split_backward, schedule.chunk_share
        return tuple({"F": _exact(f[s]) / v, "B": _exact(b[s] if split else b[s] + w[s]) / v,
                      "W": _exact(w[s]) / v} for s in range(schedule.p))

    def pair_durations(self, schedule: Schedule) -> tuple[Number | None, ...]:
        """Per stage, the time of one overlapped F&B pair (``fb``, a chunk's share of it like
        the others), or None: the pair takes F + B + W, its ops run back to back."""
        if self.fb is None:
            return (None,) * schedule.p
        return tuple(_exact(x) / schedule.chunk_share for x in _per_stage("fb", self.fb, schedule.p))


@dataclass(frozen=True)
class Timeline:
    """A run of ``schedule``: ``spans[s]`` is stage s's ((op, start, end), ...) in its order,
    times from 0. ``simulate`` makes one (``costs`` set); a measured run (the executor's
    per-rank timeline) is a Timeline too (``costs`` None), drawn by the same Gantt chart."""

    schedule: Schedule
    spans: tuple[tuple[tuple[Op, Number, Number], ...], ...]
    costs: Costs | None = None

    @cached_property
    def makespan(self) -> Number:
        """Time from the first op's start to the last op's end (all stages start at 0)."""
        return max(end for ops in self.spans for _, _, end in ops)

    @cached_property
    def busy(self) -> tuple[Number, ...]:
        """Per stage: time spent computing."""
        return tuple(sum(end - start for _, start, end in ops) for ops in self.spans)

    @cached_property
    def idle(self) -> tuple[Number, ...]:
        """Per stage: makespan minus busy time (its bubble, waiting included)."""
        return tuple(self.makespan - b for b in self.busy)

    @cached_property
    def bubble_fraction(self) -> Number:
        """Idle share of the p x makespan stage-time rectangle: (p-1)/(m+p-1) for GPipe/1F1B."""
        if not self.makespan:
            return Fraction(0)  # every op free: nothing to wait for
        return sum(self.idle) / (self.schedule.p * self.makespan)

    @cached_property
    def peak_in_flight(self) -> tuple[Number, ...]:
        """``peak_activations``, in micro-batches of a whole stage (chunks / v)."""
        return peak_activations(self.schedule)

    def start(self, stage: int, op: Op) -> Number:
        """When ``op`` starts on ``stage``."""
        return next(t0 for o, t0, _ in self.spans[stage] if o == op)

    def end(self, stage: int, op: Op) -> Number:
        """When ``op`` ends on ``stage``."""
        return next(t1 for o, _, t1 in self.spans[stage] if o == op)


def simulate(schedule: Schedule, costs: Costs | None = None) -> Timeline:
    """Start and end of every op of a (validated) schedule under ``costs`` (default: equal)."""
    costs = Costs() if costs is None else costs
    if not isinstance(costs, Costs):
        raise TypeError(f"costs must be a parlab.schedules.Costs, got {type(costs).__name__}")
    if not isinstance(schedule, Schedule):
        raise TypeError(f"simulate expects a Schedule, got {type(schedule).__name__}")
    check_ops(schedule)  # execution_order below raises on a deadlock
    durations, p2p, ends = costs.durations(schedule), _exact(costs.p2p), {}
    fb = costs.pair_durations(schedule)
    free = [_exact(0)] * schedule.p
    spans: list[list[tuple[Op, Number, Number]]] = [[] for _ in range(schedule.p)]
    for s, unit in unit_order(schedule):
        inside = {(s, op) for _, op, _ in unit}
        ready = [ends[d] + (p2p if d[0] != s else 0) for _, _, deps in unit for d in deps
                 if d not in inside]
        start = max([free[s], *ready])
        alone = sum(durations[s][op.kind] for _, op, _ in unit)
        scale = fb[s] / alone if len(unit) > 1 and fb[s] is not None and alone else 1
        for _, op, _ in unit:  # an F&B pair: its ops share the pair's time in proportion
            end = start + durations[s][op.kind] * scale
            ends[(s, op)] = free[s] = end
            spans[s].append((op, start, end))
            start = end
    return Timeline(schedule, tuple(tuple(ops) for ops in spans), costs)


def peak_chunks_in_flight(schedule: Schedule) -> tuple[int, ...]:
    """Per stage: the most (micro-batch, chunk) pairs whose activations are held at once.

    A pair is held from the start of its F to the end of its last backward op (W when the
    backward is split: the weight gradient still needs the layer inputs; Qi et al. 2023, Sec. 3).
    The count depends only on each stage's order, not on the costs.
    """
    last = "W" if schedule.split_backward else "B"
    peaks = []
    for ops in schedule.stages:
        held = peak = 0
        for op in ops:
            held += (op.kind == "F") - (op.kind == last)
            peak = max(peak, held)
        peaks.append(peak)
    return tuple(peaks)


def peak_activations(schedule: Schedule) -> tuple[Fraction, ...]:
    """Per stage: peak activations held, in micro-batches of the whole stage (chunks / v; a
    DualPipe chunk is a whole stage of one of its two copies, so chunks / 1).

    m on every stage for GPipe; min(p - r, m) on rank r for 1F1B (Narayanan et al. 2021,
    Sec. 3); p + (p - 1)/v on rank 0 for interleaved with m > p (Korthikanti et al. 2022,
    Sec. 4.2.3).
    """
    return tuple(Fraction(n, schedule.chunk_share) for n in peak_chunks_in_flight(schedule))
