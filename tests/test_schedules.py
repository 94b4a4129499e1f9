"""Pipeline schedules as data: the generators' orders, validate(), and bad input."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parlab.schedules import (
    SCHEDULES,
    Costs,
    Op,
    Schedule,
    gpipe,
    interleaved_1f1b,
    make_schedule,
    naive,
    one_f_one_b,
    pipedream,
    pipedream_2bw,
    simulate,
    validate,
    zero_bubble_h1,
)

P, M, V = st.integers(1, 8), st.integers(1, 20), st.integers(2, 4)
FAST = settings(max_examples=60, deadline=None)


def labels(ops) -> str:
    return " ".join(op.label() for op in ops)


def test_gpipe_runs_all_forwards_then_all_backwards():
    s = gpipe(2, 3)
    assert (s.p, s.m, s.v, s.name) == (2, 3, 1, "GPipe")
    assert [labels(ops) for ops in s.stages] == ["F0 F1 F2 B0 B1 B2"] * 2


def test_naive_is_one_microbatch():
    s = naive(3)
    assert s.m == 1 and s.name == "naive" and [labels(ops) for ops in s.stages] == ["F0 B0"] * 3


def test_one_f_one_b_is_megatrons_order():
    # forward_backward_pipelining_without_interleaving: p - rank - 1 warm-up forwards
    assert [labels(ops) for ops in one_f_one_b(4, 6).stages] == [
        "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5",
        "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 B4 B5",
        "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 B5",
        "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5",
    ]


@FAST
@given(P, M)
def test_one_f_one_b_warmup_is_min_p_minus_rank_minus_1_and_m(p, m):
    for r, ops in enumerate(one_f_one_b(p, m).stages):
        leading = next((i for i, op in enumerate(ops) if op.kind == "B"), len(ops))
        warmup = min(p - r - 1, m)
        assert leading == warmup + (1 if m > warmup else 0)  # then one F of the steady state


def test_interleaved_follows_megatrons_schedule_table_and_warmup():
    s = interleaved_1f1b(2, 4, 2)
    # micro-batch groups of p=2 go through chunk 0, then chunk 1 (get_schedule_table)
    fwd = [(op.microbatch, op.chunk) for op in s.stages[0] if op.kind == "F"]
    assert fwd == [(0, 0), (1, 0), (0, 1), (1, 1), (2, 0), (3, 0), (2, 1), (3, 1)]
    bwd = [(op.microbatch, op.chunk) for op in s.stages[0] if op.kind == "B"]
    assert bwd == [(0, 1), (1, 1), (0, 0), (1, 0), (2, 1), (3, 1), (2, 0), (3, 0)]
    assert [o.label(2) for o in s.stages[1][:4]] == ["F0.0", "F1.0", "F0.1", "B0.1"]


@FAST
@given(st.integers(2, 6), st.integers(1, 4), V)
def test_interleaved_warmup_is_2_p_minus_rank_minus_1_plus_v_minus_1_p(p, k, v):
    m = k * p
    for r, ops in enumerate(interleaved_1f1b(p, m, v).stages):
        leading = next(i for i, op in enumerate(ops) if op.kind == "B")
        warmup = min(2 * (p - r - 1) + (v - 1) * p, m * v)
        assert leading == warmup + (1 if m * v > warmup else 0)


def test_interleaved_with_one_chunk_is_1f1b():
    assert interleaved_1f1b(3, 6, 1) == one_f_one_b(3, 6)


def test_zero_bubble_h1_defers_w_by_rank():
    s = zero_bubble_h1(3, 4)
    assert s.split_backward and not one_f_one_b(3, 4).split_backward
    assert labels(s.stages[0]) == "F0 F1 F2 B0 W0 F3 B1 W1 B2 W2 B3 W3"
    assert labels(s.stages[2]) == "F0 B0 F1 B1 F2 B2 W0 F3 B3 W1 W2 W3"


@FAST
@given(P, M, V)
def test_every_generator_validates(p, m, v):
    for s in (naive(p), gpipe(p, m), one_f_one_b(p, m), zero_bubble_h1(p, m), pipedream(p, m),
              interleaved_1f1b(p, p * (1 + m % 3), v)):
        assert validate(s) is s
        for ops in s.stages:
            assert len(ops) == len(set(ops)) == (3 if s.split_backward else 2) * s.m * s.v


def test_make_schedule_by_name():
    assert [make_schedule(n, 2, 4).name for n in SCHEDULES] == [
        "naive", "GPipe", "1F1B", "interleaved 1F1B (v=2)", "ZB-H1"]
    with pytest.raises(ValueError, match="schedule 'pipedream' is not one of naive, gpipe"):
        make_schedule("pipedream", 2, 4)


def test_table_is_the_text_form():
    assert interleaved_1f1b(2, 2, 2).table().splitlines()[1] == (
        "stage 1: F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 B0.0 B1.0")


# -- validate: each op exactly once, every dependency ------------------------------------------
def sched(*stages: str, name: str = "hand", m: int = 2, v: int = 1) -> Schedule:
    def op(text: str) -> Op:
        mb, _, chunk = text[1:].partition(".")
        return Op(text[0], int(mb), int(chunk or 0))

    return Schedule(name, len(stages), m, v, [[op(t) for t in s.split()] for s in stages])


def test_validate_accepts_a_hand_written_schedule():
    validate(sched("F0 F1 B0 B1", "F0 B0 F1 B1"))


def test_validate_names_a_missing_op():
    with pytest.raises(ValueError, match=r"stage 1 never runs B\(mb=1, chunk=0\); each op must "
                                         r"appear exactly once"):
        validate(sched("F0 F1 B0 B1", "F0 B0 F1"))


def test_validate_names_a_repeated_op():
    with pytest.raises(ValueError, match=r"stage 0 runs F\(mb=1, chunk=0\) twice \(positions 1 "
                                         r"and 2\)"):
        validate(sched("F0 F1 F1 B0 B1", "F0 B0 F1 B1"))


def test_validate_names_an_op_out_of_range():
    with pytest.raises(ValueError, match=r"stage 0 position 1 has F\(mb=2, chunk=0\), outside m=2"):
        validate(sched("F0 F2 B0 B1", "F0 B0 F1 B1"))


def test_validate_names_b_before_its_own_f():
    with pytest.raises(ValueError, match=r"stage 1 runs B\(mb=1, chunk=0\) at position 2 before "
                                         r"F\(mb=1, chunk=0\) at position 3 \(rule: B after its "
                                         r"own F\)"):
        validate(sched("F0 F1 B0 B1", "F0 B0 B1 F1"))


def test_validate_names_w_before_its_b():
    with pytest.raises(ValueError, match=r"rule: W after its own B"):
        validate(sched("F0 W0 B0 F1 B1 W1", m=2))


def test_validate_names_the_deadlock_and_the_rules_it_breaks():
    # stage 0 wants B0 back before it sends F1; stage 1 wants F1 before it runs F0 and B0
    bad = sched("F0 B0 F1 B1", "F1 F0 B0 B1")
    with pytest.raises(ValueError) as err:
        validate(bad)
    msg = str(err.value)
    assert msg.startswith("schedule 'hand' deadlocks: stage 0 waits at position 1, B(mb=0, chunk=0),"
                          " for B(mb=0, chunk=0) on stage 1 (rule: B after the next stage's B")
    assert ("stage 1 waits at position 0, F(mb=1, chunk=0), for F(mb=1, chunk=0) on stage 0 "
            "(rule: F of stage s after F of stage s-1") in msg
    with pytest.raises(ValueError, match="deadlocks"):
        simulate(bad)


def test_validate_checks_chunk_order_across_virtual_stages():
    # interleaved p=2, v=2: chunk 1 of stage 0 (virtual stage 2) needs chunk 0 of stage 1 first
    good = interleaved_1f1b(2, 2, 2)
    validate(good)
    ops = list(good.stages[1])
    ops.remove(Op("F", 0, 0))
    ops.insert(ops.index(Op("B", 0, 0)), Op("F", 0, 0))  # stage 1 forwards chunk 0 too late
    with pytest.raises(ValueError, match=r"stage 0 waits at position 2, F\(mb=0, chunk=1\), for "
                                         r"F\(mb=0, chunk=0\) on stage 1"):
        validate(Schedule("bad", 2, 2, 2, [good.stages[0], ops]))


# -- bad input: ValueError naming the rule -----------------------------------------------------
@pytest.mark.parametrize(("make", "match"), [
    (lambda: gpipe(0, 4), r"p \(pipeline stages\) must be >= 1, got p \(pipeline stages\)=0"),
    (lambda: one_f_one_b(2, 0), r"m \(micro-batches\) must be >= 1"),
    (lambda: naive(-1), r"p \(pipeline stages\) must be >= 1"),
    (lambda: zero_bubble_h1(2.5, 4), r"p \(pipeline stages\) must be an integer, got 2.5"),
    (lambda: gpipe(True, 4), r"must be an integer, got True"),
    (lambda: interleaved_1f1b(2, 4, 0), r"v \(model chunks per stage\) must be >= 1"),
    (lambda: interleaved_1f1b(4, 6, 2), r"m \(micro-batches\) a multiple of p \(stages\): m=6, p=4"),
    (lambda: pipedream_2bw(4, 3), r"PipeDream-2BW needs m >= p .*: m=3, p=4"),
    (lambda: Op("X", 0), r"Op kind must be one of F, B, W, got 'X'"),
    (lambda: Op("F", -1), r"Op microbatch must be >= 0"),
    (lambda: Schedule("s", 2, 1, 1, [[]]), r"has 1 op lists for p=2 stages"),
    (lambda: Costs(p2p=-1), r"costs: p2p=-1 is negative \(costs must be >= 0\)"),
    (lambda: Costs(f=-1), r"costs: f=-1 is negative"),
    (lambda: Costs(b=(1, -2)), r"costs: b=-2 on stage 1 is negative"),
    (lambda: simulate(gpipe(2, 2), Costs(w=(1, 2, 3))), r"costs: w has 3 per-stage values for p=2"),
    (lambda: Costs(f="1"), r"costs: f must be a number or one number per stage, got '1'"),
    (lambda: Costs(b=(1, None)), r"costs: b must be a number or one number per stage, got None"),
    (lambda: Costs(p2p=(1, 2)), r"costs: p2p must be one number \(every link alike\)"),
])
def test_bad_input_names_the_rule(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_validate_and_simulate_reject_wrong_types():
    with pytest.raises(TypeError, match="validate expects a Schedule, got list"):
        validate([[Op("F", 0)]])
    with pytest.raises(TypeError, match="costs must be a parlab.schedules.Costs, got dict"):
        simulate(gpipe(2, 2), {"f": 1})
    with pytest.raises(TypeError, match="simulate expects a Schedule, got str"):
        simulate("1f1b")
    with pytest.raises(TypeError, match=r"stage 0 position 1 is \('B', 0\), not an Op"):
        Schedule("s", 1, 1, 1, [[Op("F", 0), ("B", 0)]])
