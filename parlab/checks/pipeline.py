"""Checker for exercise 04 (the 1F1B schedule generator): the learner's ``one_f_one_b(p, m)`` must
give a runnable schedule (``parlab.schedules.validate``) whose simulated bubble and peak in-flight
activations are 1F1B's for many (p, m): bubble (p-1)/(m+p-1) with equal costs, stage r holding at
most min(p - r, m) micro-batches (Narayanan et al. 2021, Sec. 3). A GPipe order passes the bubble
test (same bubble) but holds m micro-batches on every stage; the checker names it.

The numbers come from the same simulator the chapter draws with, so the check and the picture agree.
"""

from __future__ import annotations

from fractions import Fraction

from parlab.schedules import Op, Schedule, peak_activations, simulate, validate

from .stub import refuse_stubs

#: (p, m) pairs checked: one stage, fewer micro-batches than stages, equal, many more
CASES = [(p, m) for p in (1, 2, 3, 4, 5, 8) for m in (1, 2, 3, 4, 5, 8, 12)]


def as_schedule(result: object, p: int, m: int) -> Schedule:
    """The learner's return value as a Schedule: a Schedule, or p lists of Op."""
    if isinstance(result, Schedule):
        if (result.p, result.m, result.v) != (p, m, 1):
            raise AssertionError(f"one_f_one_b({p}, {m}) returned a Schedule with p={result.p}, "
                                 f"m={result.m}, v={result.v}; expected p={p}, m={m}, v=1")
        return result
    if not isinstance(result, (list, tuple)) or not all(isinstance(s, (list, tuple)) for s in result):
        raise AssertionError(f"one_f_one_b({p}, {m}) must return a Schedule (or p lists of Op), "
                             f"got {type(result).__name__}")
    if len(result) != p:
        raise AssertionError(f"one_f_one_b({p}, {m}) returned {len(result)} op lists; one per stage "
                             f"is p={p}")
    for s, ops in enumerate(result):
        for i, op in enumerate(ops):
            if not isinstance(op, Op):
                raise AssertionError(f"one_f_one_b({p}, {m}): stage {s} position {i} is {op!r}, "
                                     f"not an Op(kind, microbatch)")
    return Schedule("1F1B", p, m, 1, result)


def check_case(fn, p: int, m: int) -> None:
    """AssertionError (one line) unless ``fn(p, m)`` is a valid 1F1B schedule for (p, m)."""
    sched = as_schedule(fn(p, m), p, m)
    try:
        validate(sched)
    except ValueError as err:
        raise AssertionError(f"p={p}, m={m}: not runnable: {err}") from None
    if sched.split_backward:
        raise AssertionError(f"p={p}, m={m}: 1F1B has F and B ops only (W is zero bubble's)")
    peaks = peak_activations(sched)
    want = tuple(Fraction(min(p - r, m)) for r in range(p))
    if m > 1 and all(k == m for k in peaks):
        raise AssertionError(f"p={p}, m={m}: every stage holds all m={m} micro-batches' activations: "
                             f"that is GPipe's order (all forwards, then all backwards); 1F1B starts "
                             f"backwards after p - r - 1 warm-up forwards")
    if peaks != want:
        r = next(i for i, (a, b) in enumerate(zip(peaks, want, strict=True)) if a != b)
        raise AssertionError(f"p={p}, m={m}: stage {r} holds up to {peaks[r]} micro-batches' "
                             f"activations; 1F1B holds min(p - r, m) = {want[r]} (warm-up of "
                             f"min(p - r - 1, m) forwards, then one forward, one backward)")
    bubble = simulate(sched).bubble_fraction
    textbook = Fraction(p - 1, m + p - 1)
    if bubble != textbook:
        raise AssertionError(f"p={p}, m={m}: simulated bubble {float(bubble):.4f} with equal costs; "
                             f"1F1B's is (p-1)/(m+p-1) = {float(textbook):.4f}: a stage waits "
                             f"where it could run a ready op")


def check_one_f_one_b(fn) -> None:
    """Run ``fn(p, m)`` for every (p, m) of ``CASES``; AssertionError naming the first failing
    case; the stub fails at once (``StillAStub``: one line in a notebook)."""
    refuse_stubs(one_f_one_b=fn)
    for p, m in CASES:
        check_case(fn, p, m)
    p, m = 4, 8
    peaks = ", ".join(str(k) for k in peak_activations(as_schedule(fn(p, m), p, m)))
    print(f"1F1B correct for {len(CASES)} (p, m) pairs: every dependency met, bubble (p-1)/(m+p-1),\n"
          f"stage r holds min(p - r, m) micro-batches (p={p}, m={m}: {peaks}; GPipe holds {m} on each).")
