"""Is a schedule runnable? Every op exactly once, and every dependency met without a deadlock.

The dependencies of pipeline training (Huang et al. 2019, GPipe, Sec. 2.2; for chunks, the
virtual stages of Megatron's interleaved schedule, Narayanan et al. 2021, Sec. 2.2; for the split
backward, Qi et al. 2023, Sec. 2), with virtual stage ``u = chunk * p + stage`` of ``p * v``:

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
    u, last = schedule.virtual_stage(stage, op.chunk), schedule.p * schedule.v - 1
    mb = op.microbatch
    if op.kind == "F":
        if u == 0:
            return []
        s, c = schedule.place(u - 1)
        return [(s, Op("F", mb, c))]
    if op.kind == "W":
        return [(stage, Op("B", mb, op.chunk))]
    own = (stage, Op("F", mb, op.chunk))
    if u == last:
        return [own]
    s, c = schedule.place(u + 1)
    return [(s, Op("B", mb, c)), own]


def check_ops(schedule: Schedule) -> None:
    """Each stage holds exactly the ops it must: F, B (and W if split) of every (mb, chunk)."""
    kinds = ("F", "B", "W") if schedule.split_backward else ("F", "B")
    expected = {Op(k, mb, c) for k in kinds for mb in range(schedule.m) for c in range(schedule.v)}
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


def execution_order(schedule: Schedule) -> Iterator[tuple[int, int, Op, list[tuple[int, Op]]]]:
    """(stage, position, op, its dependencies) in an order where every op comes after them.

    Raises ValueError naming the first stage that waits forever, the op it waits at and the
    dependency (with its rule) that can never be met.
    """
    deps = [[dependencies(schedule, s, op) for op in ops] for s, ops in enumerate(schedule.stages)]
    done: set[tuple[int, Op]] = set()
    heads = [0] * schedule.p
    remaining = sum(len(ops) for ops in schedule.stages)
    while remaining:
        progressed = False
        for s, ops in enumerate(schedule.stages):
            while heads[s] < len(ops):
                i = heads[s]
                if any(d not in done for d in deps[s][i]):
                    break
                yield s, i, ops[i], deps[s][i]
                done.add((s, ops[i]))
                heads[s] += 1
                remaining -= 1
                progressed = True
        if not progressed:
            waits = []
            for s, ops in enumerate(schedule.stages):
                if heads[s] < len(ops):
                    op = ops[heads[s]]
                    ds, dep = next(d for d in dependencies(schedule, s, op) if d not in done)
                    waits.append(f"stage {s} waits at position {heads[s]}, {op}, for {dep} on "
                                 f"stage {ds} (rule: {RULES[op.kind]})")
            raise ValueError(f"schedule {schedule.name!r} deadlocks: " + "; ".join(waits))


def validate(schedule: Schedule) -> Schedule:
    """``schedule`` unchanged if it is runnable; else a ValueError naming the first violation:
    an op missing, repeated or out of range, or a dependency (``RULES``) that can never be met."""
    if not isinstance(schedule, Schedule):
        raise TypeError(f"validate expects a Schedule, got {type(schedule).__name__}")
    check_ops(schedule)
    for _ in execution_order(schedule):
        pass
    return schedule
