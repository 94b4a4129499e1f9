"""DualPipe and DualPipeV (DeepSeek-AI 2024, "DeepSeek-V3 Technical Report", Sec. 3.2.1 and
Table 2; the order of deepseek-ai/DualPipe, ``dualpipe.py`` and ``dualpipev.py``), as data.

DualPipe feeds micro-batches from both ends of the pipeline: the first m/2 run rank 0 -> p-1
(chunk 0: rank s holds stage s), the other m/2 run rank p-1 -> 0 (chunk 1: rank s holds stage
p - 1 - s), so every rank keeps two stages' parameters (``placement='dual'``). Each rank runs
eight steps (p/2 ranks from either end of the pipeline see the same steps, mirrored); in the
steady state (step 4) a forward chunk of one direction and a backward chunk of the other run
together, which on a GPU overlaps one's computation with the other's all-to-all and pipeline
communication (the paper's Fig. 4-5); here they are two consecutive ops, F then B. Some
backwards are split into B (input gradient) and a deferred W (weight gradient, the zero-bubble
trick of Qi et al. 2023) that fills a later gap; the others run B and W back to back.

DualPipeV cuts DualPipe in half (the "V" version of the DualPipe repository, also
``torch.distributed.pipelining.ScheduleDualPipeV``): p ranks, the model in 2p chunks placed in a
V (``placement='v'``: rank s holds chunks s and 2p - 1 - s), one copy of the parameters, the
same eight steps with every rank in the role of one half of DualPipe.

Table 2 of the report, per rank, with F, B, W the times of a forward, a full backward (input
and weight gradients: ``Costs.b + Costs.w`` here) and a weight-gradient backward chunk, and F&B
two mutually overlapped chunks (``Costs.fb``); PP stages (DualPipeV: PP = 2p chunks):

    schedule    bubble                     parameters   activations
    1F1B        (PP - 1)(F + B)            1x           PP
    ZB1P        (PP - 1)(F + B - 2W)       1x           PP
    DualPipe    (PP/2 - 1)(F&B + B - 3W)   2x           PP + 1
    DualPipeV   the same, on PP/2 devices  2x           PP + 1

The simulator reproduces the table: the memory columns exactly (``params_per_rank``;
``peak_activations``: p + 1 stages on every rank, p + 1 half-stage chunks for DualPipeV), the
1F1B and ZB1P bubbles (where W <= F), and DualPipe's and DualPipeV's bubble, on the busiest rank,
in the balanced case the formula describes: F = B (input gradient) and the F&B pair taking as
long as its full backward, ``Costs(f, b, w, fb=b + w)`` (the forward hidden under it). Without
the overlap (``fb=None``: a pair takes F + B + W) and F = B = W every rank idles (p/2 - 1) F.
"""

from __future__ import annotations

from .ops import Op, Schedule, check_count


def _steps(n: int, chunks: int, r: int) -> tuple[list[tuple[str, int, int]], list[int]]:
    """The eight steps of DualPipeV's rank r of n, each of its two local phases running
    ``chunks`` micro-batches: [(kind, phase, index), ...] and the positions where an overlapped
    F&B pair starts. A full backward is B then W at once; a zero-bubble one queues its W, which
    a later weight step pops (oldest first)."""
    counts = {(k, ph): 0 for k in "FB" for ph in (0, 1)}
    queue: list[tuple[int, int]] = []
    order: list[tuple[str, int, int]] = []
    pairs: list[int] = []

    def forward(ph: int) -> None:
        order.append(("F", ph, counts["F", ph]))
        counts["F", ph] += 1

    def backward(ph: int, zero_bubble: bool = False) -> None:
        i = counts["B", ph]
        counts["B", ph] += 1
        order.append(("B", ph, i))
        if zero_bubble:
            queue.append((ph, i))
        else:
            order.append(("W", ph, i))

    def weight() -> None:
        if queue:
            ph, i = queue.pop(0)
            order.append(("W", ph, i))

    def overlapped(f_phase: int) -> None:  # F of one phase with the full B of the other
        pairs.append(len(order))
        forward(f_phase)
        backward(1 - f_phase)

    for _ in range(2 * (n - r - 1)):  # 1: forwards of phase 0
        forward(0)
    for _ in range(r + 1):  # 2: one of each phase
        forward(0)
        forward(1)
    for _ in range(n - r - 1):  # 3: B1 W F1, zero bubble
        backward(1, True)
        weight()
        forward(1)
    for i in range(chunks - 2 * n + r + 1):  # 4, the main step: F0 with B1, F1 with B0
        if i == 0 and r == n - 1:  # the middle rank's first two are not overlapped (fewer bubbles)
            forward(0)
            backward(1)
        else:
            overlapped(0)
        overlapped(1)
    for _ in range(n - r - 1):  # 5: B1, then F1 with B0
        backward(1)
        overlapped(1)
    zero_bubble, half = False, (r + 1) // 2
    for i in range(r + 1):  # 6: B1 B0, the second half zero bubble
        zero_bubble |= i == half and r % 2 == 1
        backward(1, zero_bubble)
        zero_bubble |= i == half and r % 2 == 0
        backward(0, zero_bubble)
    for _ in range(n - r - 1):  # 7: W then B0, zero bubble
        weight()
        backward(0, True)
    for _ in range(r + 1):  # 8: the remaining weights
        weight()
    return order, pairs


def dualpipe(p: int, m: int) -> Schedule:
    """DualPipe on p (even) ranks with m micro-batches, m/2 per direction (m/2 >= p, as the
    DualPipe repository requires). Rank s runs the steps of rank min(s, p - 1 - s) of a
    DualPipeV of p/2 ranks; its local phase 0 is the direction in which it is that far from
    the start (chunk 0 for the first half of the ranks, chunk 1 for the second)."""
    p, m = check_count("p (pipeline stages)", p), check_count("m (micro-batches)", m)
    if p % 2 or m % 2 or m < 2 * p:
        raise ValueError(f"DualPipe needs an even p, an even m and m >= 2p (m/2 micro-batches "
                         f"from each end, at least p each): p={p}, m={m}")
    stages, pairs = [], []
    for s in range(p):
        second = s >= p // 2
        order, starts = _steps(p // 2, m // 2, min(s, p - 1 - s))
        stages.append([Op(kind, i + (phase ^ second) * (m // 2), phase ^ second)
                       for kind, phase, i in order])
        pairs.append(starts)
    return Schedule("DualPipe", p, m, 2, stages, placement="dual", overlapped=pairs)


def dualpipe_v(p: int, m: int) -> Schedule:
    """DualPipeV on p ranks with m >= 2p micro-batches (``ScheduleDualPipeV``'s rule): the V
    placement of 2p chunks, rank s running DualPipe's steps as rank s of p."""
    p, m = check_count("p (pipeline stages)", p), check_count("m (micro-batches)", m)
    if m < 2 * p:
        raise ValueError(f"DualPipeV needs m >= 2p micro-batches: p={p}, m={m}")
    steps = [_steps(p, m, s) for s in range(p)]
    stages = [[Op(kind, i, phase) for kind, phase, i in order] for order, _ in steps]
    return Schedule("DualPipeV", p, m, 2, stages, placement="v",
                    overlapped=[starts for _, starts in steps])
