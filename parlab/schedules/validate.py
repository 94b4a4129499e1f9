"""Is a schedule runnable? Every op exactly once, and every dependency met without a deadlock.

The dependencies of pipeline training (Huang et al. 2019, GPipe, Sec. 2.2; for chunks, the
virtual stages of Megatron's interleaved schedule, Narayanan et al. 2021, Sec. 2.2; for the split
backward, Qi et al. 2023, Sec. 2), with ``u = schedule.virtual_stage(stage, chunk)`` the piece's
position on the micro-batch's path (``chunk * p + stage`` for Megatron's placement; the V and
DualPipe placements in ``ops``) and ``schedule.place(u, chunk)`` the (stage, chunk) holding it:

- F of (mb, u) after F of (mb, u - 1): the activation comes from the previous virtual stage;
- B of (mb, u) after B of (mb, u + 1) (the output gradient), and after its own F;
- W of (mb, u) after B of (mb, u) on the same stage.

Sends are buffered (a stage never waits for its receiver), so a schedule is runnable exactly when
these edges and each stage's own order have no cycle. ``execution_order`` finds an order in which
every op's inputs exist; the simulator times the ops in that order.
"""

from __future__ import annotations

from collections.abc import Iterator

from .ops import Op, Schedule

RULES = {
    "F": "F of stage s after F of stage s-1 for the same micro-batch and chunk",
    "B": "B after the next stage's B for the same micro-batch and chunk (the last stage: after its F)",
    "W": "W after its own B",
}


def dependencies(schedule: Schedule, stage: int, op: Op) -> list[tuple[int, Op]]:
    """The (stage, op) pairs ``op`` on ``stage`` needs finished before it starts."""
    u, last = schedule.virtual_stage(stage, op.chunk), schedule.depth - 1
    mb = op.microbatch
    if op.kind == "F":
        if u == 0:
            return []
        s, c = schedule.place(u - 1, op.chunk)
        return [(s, Op("F", mb, c))]
    if op.kind == "W":
        return [(stage, Op("B", mb, op.chunk))]
    own = (stage, Op("F", mb, op.chunk))
    if u == last:
        return [own]
    s, c = schedule.place(u + 1, op.chunk)
    return [(s, Op("B", mb, c)), own]


def check_ops(schedule: Schedule) -> None:
    """Each stage holds exactly the ops it must: F, B (and W if split) of every (mb, chunk)."""
    kinds = ("F", "B", "W") if schedule.split_backward else ("F", "B")
    expected = {Op(k, mb, c) for k in kinds for mb in range(schedule.m) for c in schedule.chunks_of(mb)}
    for s, ops in enumerate(schedule.stages):
        seen: dict[Op, int] = {}
        for i, op in enumerate(ops):
            if op not in expected:
                raise ValueError(f"schedule {schedule.name!r}: stage {s} position {i} has {op}, "
                                 f"outside m={schedule.m} micro-batches, v={schedule.v} chunks "
                                 f"and kinds {'/'.join(kinds)}")
            if op in seen:
                raise ValueError(f"schedule {schedule.name!r}: stage {s} runs {op} twice (positions "
                                 f"{seen[op]} and {i}); each op must appear exactly once")
            seen[op] = i
        missing = sorted(expected - seen.keys(), key=lambda o: (o.microbatch, o.chunk, o.kind))
        if missing:
            raise ValueError(f"schedule {schedule.name!r}: stage {s} never runs {missing[0]}; "
                             f"each op must appear exactly once")
        for i, op in enumerate(ops):  # same-stage order: F before B before W
            for dep_stage, dep in dependencies(schedule, s, op):
                if dep_stage == s and seen[dep] > i:
                    rule = "B after its own F" if op.kind == "B" else RULES["W"]
                    raise ValueError(f"schedule {schedule.name!r}: stage {s} runs {op} at position "
                                     f"{i} before {dep} at position {seen[dep]} (rule: {rule})")


def unit_order(schedule: Schedule) -> Iterator[tuple[int, list[tuple[int, Op, list[tuple[int, Op]]]]]]:
    """(stage, [(position, op, its dependencies), ...]) for each unit of ``Schedule.units`` (one
    op, or an overlapped F&B pair), in an order where every unit comes after what its ops need.

    Raises ValueError naming the first stage that waits forever, the op it waits at and the
    dependency (with its rule) that can never be met.
    """
    units = [schedule.units(s) for s in range(schedule.p)]
    deps = [[dependencies(schedule, s, op) for op in ops] for s, ops in enumerate(schedule.stages)]
    done: set[tuple[int, Op]] = set()
    heads = [0] * schedule.p
    remaining = sum(len(u) for u in units)
    while remaining:
        progressed = False
        for s, ops in enumerate(schedule.stages):
            while heads[s] < len(units[s]):
                unit = units[s][heads[s]]
                inside = {(s, ops[i]) for i in unit}
                if any(d not in done and d not in inside for i in unit for d in deps[s][i]):
                    break
                yield s, [(i, ops[i], deps[s][i]) for i in unit]
                done.update(inside)
                heads[s] += 1
                remaining -= 1
                progressed = True
        if not progressed:
            waits = []
            for s, ops in enumerate(schedule.stages):
                if heads[s] < len(units[s]):
                    unit = units[s][heads[s]]
                    inside = {(s, ops[j]) for j in unit}
                    i, ds, dep = next((i, *d) for i in unit for d in deps[s][i]
                                      if d not in done and d not in inside)
                    waits.append(f"stage {s} waits at position {i}, {ops[i]}, for {dep} on "
                                 f"stage {ds} (rule: {RULES[ops[i].kind]})")
            raise ValueError(f"schedule {schedule.name!r} deadlocks: " + "; ".join(waits))


def execution_order(schedule: Schedule) -> Iterator[tuple[int, int, Op, list[tuple[int, Op]]]]:
    """(stage, position, op, its dependencies) in an order where every op comes after them
    (``unit_order`` op by op; the same ValueError on a deadlock)."""
    for s, unit in unit_order(schedule):
        for i, op, deps in unit:
            yield s, i, op, deps


def validate(schedule: Schedule) -> Schedule:
    """``schedule`` unchanged if it is runnable; else a ValueError naming the first violation:
    an op missing, repeated or out of range, or a dependency (``RULES``) that can never be met."""
    if not isinstance(schedule, Schedule):
        raise TypeError(f"validate expects a Schedule, got {type(schedule).__name__}")
    check_ops(schedule)
    for _ in execution_order(schedule):
        pass
    return schedule
