"""ZB-V, DualPipe and DualPipeV (parlab.schedules.vshape, .dualpipe): the orders of torch's own
ScheduleZBVZeroBubble and ScheduleDualPipeV, DualPipe as two mirrored DualPipeV halves, every
one valid, and the columns of the DeepSeek-V3 report's Table 2 from the simulator."""

from __future__ import annotations

from fractions import Fraction as Fr
from types import SimpleNamespace

import pytest

from parlab.schedules import (
    Costs,
    Op,
    Schedule,
    dualpipe,
    dualpipe_v,
    make_schedule,
    one_f_one_b,
    peak_activations,
    simulate,
    validate,
    zero_bubble_h1,
    zero_bubble_v,
)

GRID = [(p, m) for p in range(1, 7) for m in range(1, 15)]


def _torch_order(cls, p: int, m: int, rank: int) -> tuple[list[tuple[str, int, int]], list[int]]:
    """torch's per-rank actions as (kind, mb, chunk), a full backward as B then W, and where
    each OVERLAP_F_B pair starts."""
    from torch.distributed.pipelining import schedules as ts

    kinds = {ts.FORWARD: ("F",), ts.BACKWARD_INPUT: ("B",), ts.BACKWARD_WEIGHT: ("W",),
             ts.FULL_BACKWARD: ("B", "W")}
    fake = SimpleNamespace(pp_group_size=p, _n_microbatches=m, num_stages=2 * p)
    order, pairs = [], []
    for action in cls._calculate_single_rank_operations(fake, rank):
        if action is None:
            continue
        if action.sub_actions:
            pairs.append(len(order))
        for a in action.sub_actions or (action,):
            order += [(k, a.microbatch_index, int(a.stage_index >= p)) for k in kinds[a.computation_type]]
    return order, pairs


@pytest.mark.parametrize(("p", "m"), [(1, 3), (2, 4), (3, 7), (4, 8), (4, 11)])
def test_zb_v_and_dualpipe_v_are_torchs_orders(p, m):
    from torch.distributed.pipelining import ScheduleDualPipeV, ScheduleZBVZeroBubble

    for cls, mine in ((ScheduleZBVZeroBubble, zero_bubble_v(p, m)), (ScheduleDualPipeV, dualpipe_v(p, m))):
        for r in range(p):
            order, pairs = _torch_order(cls, p, m, r)
            assert [(o.kind, o.microbatch, o.chunk) for o in mine.stages[r]] == order, (cls, r)
            if mine.overlapped:
                assert list(mine.overlapped[r]) == pairs


@pytest.mark.parametrize("p", [2, 4, 6])
def test_dualpipe_is_two_mirrored_dualpipe_v_halves(p):
    """Rank s runs rank min(s, p-1-s) of DualPipeV(p/2, m/2), its local chunk 0 being the
    direction it is nearer the start of (deepseek-ai/DualPipe: phase ^= is_in_second_half)."""
    m = 2 * p + 2
    d, half = dualpipe(p, m), dualpipe_v(p // 2, m // 2)
    for s in range(p):
        h, flip = min(s, p - 1 - s), int(s >= p // 2)
        assert d.stages[s] == tuple(Op(o.kind, o.microbatch + (o.chunk ^ flip) * (m // 2), o.chunk ^ flip)
                                    for o in half.stages[h])
        assert d.overlapped[s] == half.overlapped[h]
    assert {op.chunk for op in d.stages[0] if op.microbatch < m // 2} == {0}  # one direction each


def test_every_v_schedule_validates_where_its_rules_allow():
    for p, m in GRID:
        validate(zero_bubble_v(p, m))
        if m >= 2 * p:
            validate(dualpipe_v(p, m))
            if p % 2 == 0 and m % 2 == 0:
                validate(dualpipe(p, m))


def test_v_placement_puts_the_first_and_last_piece_on_rank_0():
    s = zero_bubble_v(4, 8)
    assert [s.virtual_stage(0, c) for c in (0, 1)] == [0, 7]
    assert s.place(7) == (0, 1) and s.place(4) == (3, 1) and s.depth == 8
    d = dualpipe(4, 8)
    assert [d.virtual_stage(3, c) for c in (0, 1)] == [3, 0]  # the reverse direction starts at rank 3
    assert d.place(1, 1) == (2, 1) and d.chunks_of(5) == (1,) and d.depth == 4


def test_table_2_bubbles_of_1f1b_and_zb1p():
    """DeepSeek-V3 report, Table 2 (B = a full backward = b + w here): 1F1B idles (p-1)(F+B)
    per rank, ZB1P (ZB-H1) (p-1)(F+B-2W) where W <= F (a W longer than the forward it
    stands in for overflows its gap)."""
    for p, m in ((4, 8), (6, 12)):
        for f, b, w in ((1, 1, 1), (1, 2, 1), (3, 2, 1), (2, 3, 1)):
            full = b + w
            assert set(simulate(one_f_one_b(p, m), Costs(f, b, w)).idle) == {(p - 1) * (f + full)}
            assert set(simulate(zero_bubble_h1(p, m), Costs(f, b, w)).idle) == {(p - 1) * (f + full - 2 * w)}


def test_table_2_memory_of_dualpipe_and_dualpipe_v():
    """Parameters per device 2x and activations PP + 1 (in chunks of the PP-stage model; a
    DualPipeV chunk is half a rank's share): DeepSeek-V3 report, Table 2."""
    for p in (2, 4, 6):
        for m in (2 * p, 2 * p + 4):
            d = dualpipe(p, m)
            assert d.params_per_rank == 2 * one_f_one_b(p, m).params_per_rank
            assert set(peak_activations(d)) == {p + 1}
            dv = dualpipe_v(p // 2, m // 2)  # PP = p stages on p/2 devices
            assert dv.params_per_rank == 2 * one_f_one_b(p, m).params_per_rank
            assert {x * 2 for x in peak_activations(dv)} == {p + 1}


def test_table_2_bubble_of_dualpipe_and_dualpipe_v():
    """(PP/2 - 1)(F&B + B - 3W) per busiest rank, B the full backward, in the balanced case
    F = B (input gradient) with the pair as long as its full backward (F hidden under it):
    PP = p stages for DualPipe, PP = 2p chunks of half a rank's share for DualPipeV."""
    for f, b, w in ((1, 1, 1), (2, 2, 1), (2, 2, 2), (3, 3, 1)):
        fb, full = b + w, b + w
        for p, m in ((4, 8), (4, 12), (6, 14), (8, 16)):
            tl = simulate(dualpipe(p, m), Costs(f, b, w, fb=fb))
            assert max(tl.idle) == (p // 2 - 1) * (fb + full - 3 * w), (p, m, f, b, w)
        for p, m in ((2, 6), (3, 8), (4, 10)):
            tl = simulate(dualpipe_v(p, m), Costs(f, b, w, fb=fb))
            assert max(tl.idle) == (p - 1) * Fr(fb + full - 3 * w, 2), (p, m, f, b, w)  # PP/2 - 1 = p - 1


def test_equal_cost_bubbles_of_the_v_schedules():
    """With F = B = W (a stage's share; a V chunk costs half) every rank idles (p-1)/2 under ZB-V
    and DualPipeV, p/2 - 1 under DualPipe (no overlap), against ZB-H1's p - 1; ZB-V holds at
    most p micro-batches of activations, 1F1B's peak."""
    for p, m in GRID:
        if m >= 2 * p - 1:
            assert set(simulate(zero_bubble_v(p, m)).idle) == {Fr(p - 1, 2)}
        peak = max(peak_activations(zero_bubble_v(p, m)))
        assert peak <= p and (peak == p or m < 2 * p - 1)
        if m >= 2 * p:
            assert set(simulate(dualpipe_v(p, m)).idle) == {Fr(p - 1, 2)}
            if p % 2 == 0 and m % 2 == 0:
                assert set(simulate(dualpipe(p, m)).idle) == {Fr(p // 2 - 1)}


def test_overlapped_pairs_start_together_and_take_fb():
    d = dualpipe(4, 8)
    tl = simulate(d, Costs(1, 1, 1, fb=2))
    s, (i, *_) = 1, d.units(1)[[len(u) for u in d.units(1)].index(3)]
    f, b, w = (tl.spans[s][j] for j in (i, i + 1, i + 2))
    assert f[0].kind == "F" and b[0].kind == "B" and w[0].kind == "W"
    assert w[2] - f[1] == 2 and f[2] == b[1]  # the pair takes fb, its ops in proportion
    assert simulate(d, Costs(1, 1, 1, fb=2)).makespan < simulate(d).makespan


def test_make_schedule_knows_the_v_schedules():
    assert make_schedule("ZB_V", 4, 8).name == "ZB-V"
    assert make_schedule("dualpipe", 4, 8).placement == "dual"
    assert make_schedule("dualpipe-v", 2, 4).placement == "v"


@pytest.mark.parametrize(("make", "match"), [
    (lambda: dualpipe(3, 6), "even p"), (lambda: dualpipe(4, 6), "m >= 2p"),
    (lambda: dualpipe(4, 9), "even m"), (lambda: dualpipe_v(4, 7), "m >= 2p"),
    (lambda: Schedule("x", 1, 1, 3, [[]], placement="v"), "needs v=2"),
    (lambda: Schedule("x", 1, 1, 1, [[]], placement="ring"), "placement must be one of"),
    (lambda: Schedule("x", 1, 1, 1, [[Op("F", 0), Op("B", 0)]], overlapped=[[1]]), "F then a B"),
])
def test_bad_input_names_the_rule(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_the_gantt_draws_them_beside_1f1b_and_names_the_directions():
    from parlab.viz.gantt import gantt_figure

    for sched in (one_f_one_b(4, 8), zero_bubble_v(4, 8), dualpipe(4, 8)):
        fig = gantt_figure(simulate(sched))
        boxes = [b for b in fig.axes[0].patches if b.get_gid()]
        assert len(boxes) == sum(len(ops) for ops in sched.stages)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "chunk 0 (rank 0\u21923)" in labels and "chunk 1 (rank 3\u21920)" in labels
