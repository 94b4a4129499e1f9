"""The asynchronous PipeDream family (guide 1.20): no flush, so no bubble between steps, paid
for with stale weights and extra weight copies.

- ``pipedream(p, m)``: PipeDream (Narayanan et al. 2019, "PipeDream: Generalized Pipeline
  Parallelism for DNN Training", Sec. 3.3): 1F1B that never flushes; each stage updates its
  weights after every backward and stashes the version each in-flight micro-batch saw in its
  forward, so its backward uses the same weights. Rank r holds p - r versions; its update is
  p - r - 1 steps stale: w(t+1) = w(t) - lr grad f(w_0(t-p+1), ..., w_{p-1}(t)).
- ``pipedream_2bw(p, m, steps)``: PipeDream-2BW (Narayanan et al. 2021, "Memory-Efficient
  Pipeline-Parallel DNN Training", Sec. 3.1): the same order, gradients accumulated over m
  micro-batches, one update every m; micro-batches of step t use version t - 1, so two versions
  suffice (m >= p) and every update is one step stale: w(t+1) = w(t) - lr grad f(w(t-1)).

These are schedules the simulator runs (``simulate``) and ``weight_versions`` audits; the
executor (``parlab.parallel.pipeline_parallel``) runs only the synchronous (flush) schedules.
``tradeoff`` computes the memory / throughput / staleness table beside GPipe and PipeDream-Flush.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from .ops import Op, Schedule, check_count
from .simulate import Costs, peak_activations, simulate
from .synchronous import _one_f_one_b_order, gpipe, one_f_one_b


def _no_flush(name: str, p: int, n: int, weights: str, update_every: int) -> Schedule:
    stages = [[Op(k, i) for k, i in _one_f_one_b_order(p, n, r)[1]] for r in range(p)]
    return Schedule(name, p, n, 1, stages, weights, update_every)


def pipedream(p: int, m: int) -> Schedule:
    """PipeDream: m micro-batches in 1F1B order with no flush, one weight update per backward
    (each micro-batch is its own optimizer step), weight stashing."""
    p, m = check_count("p (pipeline stages)", p), check_count("m (micro-batches)", m)
    return _no_flush("PipeDream", p, m, "stash", 1)


def pipedream_2bw(p: int, m: int, steps: int = 2) -> Schedule:
    """PipeDream-2BW: ``steps`` optimizer steps of m micro-batches each, run back to back in
    1F1B order with no flush; an update every m micro-batches, two weight versions."""
    p, m = check_count("p (pipeline stages)", p), check_count("m (micro-batches)", m)
    steps = check_count("steps", steps)
    if m < p:
        raise ValueError(f"PipeDream-2BW needs m >= p micro-batches per update so that two weight "
                         f"versions suffice (Narayanan et al. 2021, Sec. 3.1): m={m}, p={p}")
    return _no_flush("PipeDream-2BW", p, m * steps, "2bw", m)


@dataclass(frozen=True)
class WeightVersions:
    """What a schedule's weight updates look like on each stage.

    ``used[s][mb]``: the version (number of updates applied before it) micro-batch mb's forward
    and backward use on stage s; ``staleness[s]``: for each update of stage s, how many updates
    behind the weights it is applied to were the weights its gradient was computed with;
    ``held[s]``: the most versions stage s keeps at once (the current one plus those stashed).
    """

    used: tuple[tuple[int, ...], ...]
    staleness: tuple[tuple[int, ...], ...]
    held: tuple[int, ...]

    @property
    def max_staleness(self) -> int:
        return max((x for st in self.staleness for x in st), default=0)


def weight_versions(schedule: Schedule) -> WeightVersions:
    """Walk each stage's order and apply its ``weights`` policy (``flush``, ``stash``, ``2bw``).

    ``flush``: every micro-batch uses version 0 and one update, 0 steps stale, follows the
    flush. ``stash``: an update after each backward; a forward uses the newest version.
    ``2bw``: an update after the last backward of each step t; step t's forwards use version
    max(t - 1, 0), which must already exist (else ValueError).
    """
    if schedule.weights == "flush":
        zeros = tuple(0 for _ in range(schedule.m))
        return WeightVersions((zeros,) * schedule.p, ((0,),) * schedule.p, (1,) * schedule.p)
    last = "W" if schedule.split_backward else "B"
    every = schedule.update_every
    used_all, stale_all, held_all = [], [], []
    for s, ops in enumerate(schedule.stages):
        version, used, stale, held, in_flight, done = 0, {}, [], 1, set(), 0
        for op in ops:
            if op.kind == "F":
                if schedule.weights == "stash":
                    used[op.microbatch] = version
                else:
                    used[op.microbatch] = want = max(op.microbatch // every - 1, 0)
                    if want > version:
                        raise ValueError(f"schedule {schedule.name!r}: stage {s} reaches {op} "
                                         f"before weight version {want} exists (2BW rule: step "
                                         f"t uses version t - 1)")
                in_flight.add(op.microbatch)
            elif op.kind == last:
                in_flight.discard(op.microbatch)
                done += 1
                if schedule.weights == "stash" or done % every == 0:
                    stale.append(version - used[op.microbatch])
                    version += 1
            held = max(held, len({used[mb] for mb in in_flight} | {version}))
        used_all.append(tuple(used[mb] for mb in range(schedule.m)))
        stale_all.append(tuple(stale))
        held_all.append(held)
    return WeightVersions(tuple(used_all), tuple(stale_all), tuple(held_all))


@dataclass(frozen=True)
class TradeoffRow:
    """One schedule's costs for ``steps`` optimizer steps of m micro-batches on p stages."""

    name: str
    activations: Fraction  # peak micro-batches of activations, on the busiest stage
    weight_versions: int  # most weight copies a stage keeps
    staleness: int  # most steps an update's gradient lags the weights it updates
    bubble_fraction: Fraction  # idle share over the whole run (simulated, equal costs)
    updates_per_m: int  # optimizer steps per m micro-batches


def tradeoff(p: int, m: int, steps: int = 4, costs: Costs | None = None) -> list[TradeoffRow]:
    """GPipe, PipeDream-Flush (1F1B), PipeDream and PipeDream-2BW on ``steps`` x m micro-batches,
    each number computed by ``simulate``, ``peak_activations`` and ``weight_versions``.

    The synchronous schedules flush after every step, so each step is the same and one step's
    bubble is the whole run's; the asynchronous ones run all ``steps * m`` micro-batches as one
    pipeline, filling and draining once (their bubble tends to 0 as ``steps`` grows).
    """
    p, m, steps = (check_count(n, x) for n, x in (("p (pipeline stages)", p),
                                                  ("m (micro-batches)", m), ("steps", steps)))
    rows = []
    for sched, per_m in ((gpipe(p, m), 1), (one_f_one_b(p, m), 1),
                         (pipedream(p, m * steps), m), (pipedream_2bw(p, m, steps), 1)):
        wv = weight_versions(sched)
        name = "PipeDream-Flush (1F1B)" if sched.name == "1F1B" else sched.name
        rows.append(TradeoffRow(name, max(peak_activations(sched)), max(wv.held), wv.max_staleness,
                                simulate(sched, costs).bubble_fraction, per_m))
    return rows


def tradeoff_text(rows: list[TradeoffRow]) -> str:
    """The trade-off table as plain text (CLI, nbval-checked cells)."""
    from parlab.tables import table

    return table([(r.name, f"{float(r.activations):g}", r.weight_versions, r.staleness,
                   f"{float(r.bubble_fraction):.1%}", r.updates_per_m) for r in rows],
                 ["schedule", "activations (micro-batches)", "weight versions",
                  "staleness (steps)", "bubble", "updates per m"], align="lrrrrr")
