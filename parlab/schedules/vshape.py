"""ZB-V: the zero-bubble V schedule (Qi et al. 2024, "Zero Bubble Pipeline Parallelism", ICLR,
Sec. 6; the order of ``torch.distributed.pipelining.ScheduleZBVZeroBubble``), as data.

The model is cut into 2p chunks placed in a V (``placement='v'``): rank s holds chunk s and
chunk 2p - 1 - s, so a micro-batch goes down the ranks on chunk 0 and back up on chunk 1, and
the first and the last chunk (the embedding and the loss) sit on rank 0. Rank s runs
2(p - s) - 1 forwards of chunk 0, then s pairs (chunk 1, chunk 0), then p - s rounds of chunk 1's
F, B, W; in the steady state F, B, W of chunk 0 then of chunk 1; in the cool-down the input
gradients first and the deferred weight gradients last. With T_F = T_B = T_W (each chunk half a
stage) the bubble vanishes except for the fill, and every rank holds at most p micro-batches'
worth of activations (2p half-stage chunks): 1F1B's peak at a third of ZB-H1's bubble or less.
"""

from __future__ import annotations

from .ops import Op, Schedule, check_count


def zero_bubble_v(p: int, m: int) -> Schedule:
    """ZB-V on p ranks and m micro-batches: each rank's order for max(m, 2p - 1) micro-batches
    (the most the V's warm-up needs), less the ops of micro-batches >= m."""
    p, m = check_count("p (pipeline stages)", p), check_count("m (micro-batches)", m)
    n = max(2 * p - 1, m)
    stages = []
    for r in range(p):
        ops: list[Op] = []
        f = [0, 0]  # forwards, input-gradient backwards and weight backwards run, per chunk
        b = [0, 0]
        w = [0, 0]

        def run(kind: str, c: int, count: list[int], ops: list[Op] = ops) -> None:
            ops.append(Op(kind, count[c], c))
            count[c] += 1

        for _ in range(2 * (p - r) - 1):  # warm-up: chunk 0 fills the way down
            run("F", 0, f)
        for _ in range(r):
            run("F", 1, f)
            run("F", 0, f)
        for _ in range(p - r):  # chunk 1 turns round at once
            run("F", 1, f)
            run("B", 1, b)
            run("W", 1, w)
        while f[1] < f[0] or f[0] < n:  # steady state
            if f[0] < n:
                run("F", 0, f)
            run("B", 0, b)
            run("W", 0, w)
            run("F", 1, f)
            run("B", 1, b)
            run("W", 1, w)
        for _ in range(r):  # cool-down: input gradients first ...
            run("B", 0, b)
            run("B", 1, b)
        for _ in range(p - r):
            run("B", 0, b)
            run("W", 0, w)
        while w[1] < b[1]:  # ... the deferred weight gradients last
            run("W", 1, w)
        while w[0] < b[0]:
            run("W", 0, w)
        stages.append([op for op in ops if op.microbatch < m])
    return Schedule("ZB-V", p, m, 2, stages, placement="v")
