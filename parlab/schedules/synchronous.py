"""The synchronous pipeline schedules (one optimizer step after a flush), as per-stage op lists.

- ``naive(p)``: one micro-batch through p stages, the plain layer split (guide 1.12-1.13;
  accelerate's ``device_map``): all but one stage idle at any time.
- ``gpipe(p, m)``: all m forwards, then all m backwards (Huang et al. 2019, "GPipe", Sec. 2.2).
- ``one_f_one_b(p, m)``: PipeDream-Flush (Narayanan et al. 2021, "Memory-Efficient Pipeline-
  Parallel DNN Training", Sec. 3; = Megatron-LM's ``forward_backward_pipelining_without_
  interleaving``): min(p - rank - 1, m) warm-up forwards, steady one-forward-one-backward, cool-down.
- ``interleaved_1f1b(p, m, v)``: v model chunks per stage in Megatron-LM's order (Narayanan et al.
  2021, "Efficient Large-Scale Language Model Training on GPU Clusters", Sec. 2.2;
  ``forward_backward_pipelining_with_interleaving``, micro-batch groups of p).
- ``zero_bubble_h1(p, m)``: ZB-H1 (Qi et al. 2023, "Zero Bubble Pipeline Parallelism", Sec. 3.1):
  1F1B with the backward split into B and W and the W of rank r deferred by r micro-batches.

All return a ``Schedule``; the executor (``parlab.parallel.pipeline_parallel``) runs any of them.
"""

from __future__ import annotations

from .ops import Op, Schedule, check_count


def _counts(p: int, m: int, v: int = 1) -> tuple[int, int, int]:
    return (check_count("p (pipeline stages)", p), check_count("m (micro-batches)", m),
            check_count("v (model chunks per stage)", v))


def gpipe(p: int, m: int) -> Schedule:
    """GPipe: every stage runs F0..F(m-1), then B0..B(m-1) (Huang et al. 2019, Fig. 2c).

    Each stage holds the activations of all m micro-batches before its first backward.
    """
    p, m, _ = _counts(p, m)
    stages = [[Op("F", i) for i in range(m)] + [Op("B", i) for i in range(m)] for _ in range(p)]
    return Schedule("GPipe", p, m, 1, stages)


def naive(p: int) -> Schedule:
    """The serial layer split: one micro-batch (``gpipe(p, 1)``); bubble (p - 1) / p."""
    return Schedule("naive", *_counts(p, 1)[:2], 1, gpipe(p, 1).stages)


def _one_f_one_b_order(p: int, m: int, rank: int) -> tuple[int, list[tuple[str, int]]]:
    """Megatron's non-interleaved order on ``rank``: (warm-up count, [(kind, mb), ...])."""
    warmup = min(p - rank - 1, m)
    order = [("F", i) for i in range(warmup)]
    for i in range(m - warmup):  # steady state: one forward, one backward
        order += [("F", warmup + i), ("B", i)]
    order += [("B", i) for i in range(m - warmup, m)]  # cool-down
    return warmup, order


def one_f_one_b(p: int, m: int) -> Schedule:
    """1F1B (PipeDream-Flush): rank r runs min(p - r - 1, m) forwards, then alternates one
    forward and one backward, then drains the backwards; it holds at most min(p - r, m)
    micro-batches' activations (Narayanan et al. 2021, Sec. 3, Fig. 4)."""
    p, m, _ = _counts(p, m)
    stages = [[Op(k, i) for k, i in _one_f_one_b_order(p, m, r)[1]] for r in range(p)]
    return Schedule("1F1B", p, m, 1, stages)


def _megatron_table(m: int, v: int, group: int) -> list[tuple[int, int]]:
    """(micro-batch, chunk) of each virtual micro-batch k = 0..m*v-1: groups of ``group``
    micro-batches go through chunk 0, then chunk 1, ... (Megatron's ``get_schedule_table``)."""
    return [(mb, c) for start in range(0, m, group) for c in range(v)
            for mb in range(start, min(start + group, m))]


def interleaved_1f1b(p: int, m: int, v: int) -> Schedule:
    """Interleaved 1F1B: v chunks per stage, chunk c of rank r is virtual stage c*p + r.

    Rank r runs 2 (p - r - 1) + (v - 1) p chunk forwards of warm-up (all m v if that is more),
    then one chunk forward and one chunk backward at a time. The k-th forward is micro-batch
    ``table[k]`` (groups of p micro-batches per chunk), the k-th backward the same micro-batch on
    chunk v - 1 - c. The bubble shrinks by v (Narayanan et al. 2021, Sec. 2.2.2: (p-1)/(v m) of
    the ideal time). Needs m a multiple of p. v = 1 is ``one_f_one_b``.
    """
    p, m, v = _counts(p, m, v)
    if v == 1:
        return one_f_one_b(p, m)
    if m % p:
        raise ValueError(f"the interleaved 1F1B schedule needs m (micro-batches) a multiple of p (stages): "
                         f"m={m}, p={p}")
    table, total = _megatron_table(m, v, p), m * v
    stages = []
    for r in range(p):
        warmup = min(2 * (p - r - 1) + (v - 1) * p, total)
        fwd = [Op("F", mb, c) for mb, c in table]
        bwd = [Op("B", mb, v - 1 - c) for mb, c in table]
        ops = fwd[:warmup]
        for k in range(total - warmup):
            ops += [fwd[warmup + k], bwd[k]]
        stages.append(ops + bwd[total - warmup:])
    return Schedule(f"interleaved 1F1B (v={v})", p, m, v, stages)


def zero_bubble_h1(p: int, m: int) -> Schedule:
    """ZB-H1 (Qi et al. 2023, Sec. 3.1, Fig. 3): 1F1B's order with each backward split into B
    (input gradient, on the critical path) and W (weight gradient, off it).

    Rank r keeps 1F1B's min(p - r - 1, m) warm-up forwards and runs the W of a micro-batch r
    backwards after its B; the deferred Ws fill the cool-down. A micro-batch's activations live
    until its W, so every rank holds at most min(p, m) (1F1B's peak, on rank 0). With
    T_F = T_B = T_W the bubble is (p - 1)(T_F + T_B - T_W): a third of 1F1B's.
    """
    p, m, _ = _counts(p, m)
    stages = []
    for r in range(p):
        _, order = _one_f_one_b_order(p, m, r)
        ops: list[Op] = []
        pending: list[int] = []  # micro-batches whose B ran and W did not
        for kind, mb in order:
            ops.append(Op(kind, mb))
            if kind == "B":
                pending.append(mb)
                if len(pending) > r:
                    ops.append(Op("W", pending.pop(0)))
        ops += [Op("W", mb) for mb in pending]
        stages.append(ops)
    return Schedule("ZB-H1", p, m, 1, stages)
