"""The timeline simulator reproduces the textbook pipeline numbers exactly (Fractions), the
PipeDream family's weight versions and staleness, and agrees with the cost model."""

from __future__ import annotations

from fractions import Fraction as Fr

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parlab.schedules import (
    Costs,
    Op,
    bubble_curves,
    dependencies,
    gpipe,
    interleaved_1f1b,
    make_schedule,
    naive,
    one_f_one_b,
    peak_activations,
    pipedream,
    pipedream_2bw,
    simulate,
    tradeoff,
    tradeoff_text,
    weight_versions,
    zero_bubble_h1,
)

P, M, V = st.integers(1, 8), st.integers(1, 24), st.integers(2, 4)
COST = st.integers(0, 5)
FAST = settings(max_examples=60, deadline=None)


@FAST
@given(P, M, st.sampled_from([(1, 1, 1), (1, 2, 0), (2, 3, 1)]))
def test_gpipe_and_1f1b_bubble_is_p_minus_1_over_m_plus_p_minus_1(p, m, fbw):
    # convention: default Costs() f = b = w = 1, i.e. a whole backward (b + w) = 2 forwards
    for sched in (gpipe(p, m), one_f_one_b(p, m)):
        tl = simulate(sched, Costs(*fbw))
        assert tl.bubble_fraction == Fr(p - 1, m + p - 1)
        assert tl.makespan == (m + p - 1) * sum(fbw)
        assert set(tl.idle) == {(p - 1) * sum(fbw)}


@FAST
@given(P)
def test_naive_split_keeps_all_but_one_stage_idle(p):
    assert simulate(naive(p)).bubble_fraction == Fr(p - 1, p)


@FAST
@given(st.integers(2, 8), st.integers(1, 4), V)
def test_interleaved_bubble_is_1_over_v_of_1f1b(p, k, v):
    m = k * p
    tl, flat = simulate(interleaved_1f1b(p, m, v)), simulate(one_f_one_b(p, m))
    assert set(tl.idle) == {Fr((p - 1) * 3, v)}  # (p-1)(t_f + t_b)/v: Narayanan 2021, Sec. 2.2.2
    assert set(flat.idle) == {v * i for i in tl.idle}
    assert tl.bubble_fraction == Fr(p - 1, v * m + p - 1)


@FAST
@given(st.integers(2, 8), M)
def test_zero_bubble_h1_cuts_the_bubble_to_a_third_of_1f1b(p, m):
    zb, flat = simulate(zero_bubble_h1(p, m)), simulate(one_f_one_b(p, m))
    assert zb.bubble_fraction < flat.bubble_fraction
    if m >= p:  # Qi et al. 2023, Sec. 3.1: bubble (p-1)(T_F + T_B - T_W), here (p-1) * 1
        assert zb.makespan == 3 * m + (p - 1)
        assert set(zb.idle) == {p - 1} and set(flat.idle) == {3 * (p - 1)}
    assert max(peak_activations(zero_bubble_h1(p, m))) == min(p, m)  # 1F1B's peak memory


@FAST
@given(P, M)
def test_peak_activations_gpipe_m_vs_1f1b_min_p_minus_rank_m(p, m):
    assert simulate(gpipe(p, m)).peak_in_flight == (m,) * p
    assert simulate(one_f_one_b(p, m)).peak_in_flight == tuple(min(p - r, m) for r in range(p))


@FAST
@given(st.integers(2, 8), st.integers(2, 4), V)
def test_interleaved_peak_activations(p, k, v):
    # m > p: rank 0 holds p + (p-1)/v micro-batches (Korthikanti et al. 2022, Sec. 4.2.3)
    peaks = peak_activations(interleaved_1f1b(p, k * p, v))
    assert peaks[0] == p + Fr(p - 1, v) and peaks[-1] == p - Fr(p - 1, v)


@FAST
@given(st.integers(2, 6), V)
def test_interleaved_with_m_equal_p_runs_every_forward_first_on_rank_0(p, v):
    # Megatron caps the warm-up at m * v: rank 0 holds all m = p micro-batches
    assert peak_activations(interleaved_1f1b(p, p, v))[0] == p


@FAST
@given(P, M, COST, COST, COST, COST)
def test_timeline_respects_every_dependency_and_never_overlaps(p, m, f, b, w, c):
    for sched in (one_f_one_b(p, m), zero_bubble_h1(p, m), interleaved_1f1b(p, p, 2)):
        tl = simulate(sched, Costs(f, b, w, c))
        for s, spans in enumerate(tl.spans):
            assert [op for op, _, _ in spans] == list(sched.stages[s])
            assert all(e0 <= s1 for (_, _, e0), (_, s1, _) in zip(spans, spans[1:], strict=False))
            for op, start, _ in spans:
                for ds, dep in dependencies(sched, s, op):
                    assert start >= tl.end(ds, dep) + (c if ds != s else 0)


@FAST
@given(st.integers(1, 6), M, st.integers(0, 3))
def test_gpipe_pays_p2p_twice_per_boundary(p, m, c):
    # forward and backward each cross p - 1 links once on the critical path
    assert simulate(gpipe(p, m), Costs(1, 1, 1, c)).makespan == (m + p - 1) * 3 + 2 * (p - 1) * c


def test_1f1b_exposes_more_p2p_than_gpipe():
    costs = Costs(1, 1, 1, 1)
    assert simulate(one_f_one_b(4, 8), costs).makespan > simulate(gpipe(4, 8), costs).makespan


def test_per_stage_costs_make_the_slowest_stage_the_bottleneck():
    tl = simulate(gpipe(2, 3), Costs(f=(1, 2), b=(1, 2), w=0))
    # stage 1 forwards at 1-3, 3-5, 5-7, backwards 7-9, 9-11, 11-13; stage 0 trails its B's by 2
    assert [(op.label(), t0, t1) for op, t0, t1 in tl.spans[1]] == [
        ("F0", 1, 3), ("F1", 3, 5), ("F2", 5, 7), ("B0", 7, 9), ("B1", 9, 11), ("B2", 11, 13)]
    assert tl.makespan == 14 and tl.busy == (6, 12)
    assert tl.bubble_fraction == Fr(2 * 14 - 18, 2 * 14)


def test_split_backward_costs_b_and_w_separately():
    tl = simulate(zero_bubble_h1(1, 1), Costs(f=1, b=2, w=3))
    assert [(op.label(), t0, t1) for op, t0, t1 in tl.spans[0]] == [
        ("F0", 0, 1), ("B0", 1, 3), ("W0", 3, 6)]
    assert simulate(gpipe(1, 1), Costs(f=1, b=2, w=3)).makespan == 6  # B = b + w
    assert tl.start(0, Op("W", 0)) == 3


def test_float_costs_work_too():
    assert simulate(one_f_one_b(2, 2), Costs(0.5, 1.0, 0.5)).makespan == pytest.approx(6.0)


def test_bubble_curves_come_from_the_simulator():
    curves = bubble_curves(4, [2, 4, 8], v=2)
    assert curves["gpipe"] == curves["1f1b"] == [(m, Fr(3, m + 3)) for m in (2, 4, 8)]
    assert [m for m, _ in curves["interleaved"]] == [4, 8]  # multiples of p only
    assert curves["zb-h1"][-1] == (8, simulate(make_schedule("zb-h1", 4, 8)).bubble_fraction)


# -- the asynchronous PipeDream family --------------------------------------------------------
@FAST
@given(st.integers(1, 6), st.integers(0, 12))
def test_pipedream_stashes_p_minus_rank_versions_and_is_p_minus_rank_minus_1_stale(p, extra):
    m = 2 * p + extra  # every in-flight micro-batch on its own version from m >= 2p - 1 on
    wv = weight_versions(pipedream(p, m))
    assert wv.held == tuple(p - r for r in range(p))
    for r in range(p):
        steady = wv.staleness[r][p - r - 1:]  # after the first p - r - 1 updates
        assert set(steady) == {p - r - 1} and len(wv.staleness[r]) == m  # one update per mb


@FAST
@given(st.integers(1, 6), st.integers(0, 6), st.integers(1, 4))
def test_pipedream_2bw_keeps_two_versions_one_step_stale(p, extra, steps):
    m = p + extra
    wv = weight_versions(pipedream_2bw(p, m, steps))
    assert set(wv.held) == ({2} if steps > 1 else {1})
    assert all(st_ == (0,) + (1,) * (steps - 1) for st_ in wv.staleness)  # w(t+1)=w(t)-g(w(t-1))
    assert all(u == tuple(max(mb // m - 1, 0) for mb in range(m * steps)) for u in wv.used)


def test_synchronous_schedules_have_one_version_and_no_staleness():
    wv = weight_versions(one_f_one_b(4, 8))
    assert wv.held == (1,) * 4 and wv.max_staleness == 0 and set(wv.used[0]) == {0}


def test_tradeoff_table_is_computed():
    rows = {r.name: r for r in tradeoff(4, 8, steps=4)}
    assert list(rows) == ["GPipe", "PipeDream-Flush (1F1B)", "PipeDream", "PipeDream-2BW"]
    assert [r.activations for r in rows.values()] == [8, 4, 4, 4]
    assert [r.weight_versions for r in rows.values()] == [1, 1, 4, 2]
    assert [r.staleness for r in rows.values()] == [0, 0, 3, 1]
    assert [r.updates_per_m for r in rows.values()] == [1, 1, 8, 1]
    sync, run = Fr(3, 11), Fr(3, 32 + 3)  # one flush per step vs one fill/drain per run
    assert [r.bubble_fraction for r in rows.values()] == [sync, sync, run, run]
    text = tradeoff_text(list(rows.values()))
    assert "PipeDream-2BW" in text and "27.3%" in text and "8.6%" in text
    assert max(len(line) for line in text.splitlines()) <= 110


# -- agreement with the cost model ------------------------------------------------------------
GRID = [(p, m, sched, v) for p in (1, 2, 3, 4, 8) for m in (1, 2, 3, 4, 8, 12, 16, 24)
        for sched, vs in (("gpipe", (1,)), ("1f1b", (1,)), ("interleaved", (2, 3, 4)))
        for v in vs if sched != "interleaved" or (p >= 2 and m % p == 0)]


def _cost_model(p: int, m: int, sched: str, v: int):
    from parlab.costmodel import DEFAULT, Plan, get_model, make_cluster
    from parlab.costmodel.plan.step_time import step_time

    plan = Plan(pp=p, micro_batches=m, schedule=sched, chunks=v)
    return plan, step_time(get_model("gpt3-175b"), make_cluster("dgx-a100", 8 * p), plan, DEFAULT)


def test_cost_model_bubble_term_equals_the_simulated_bubble():
    # the simulator runs equal stages (f = b = w = 1 on every rank): the layouts whose 96 layers split
    # evenly over p x v pieces; an uneven split's bubble is checked against the simulator with its
    # own stage times in tests/test_costmodel_uneven.py
    for p, m, sched, v in GRID:
        if 96 % (p * v):
            continue
        _, tm = _cost_model(p, m, sched, v)
        tl = simulate(make_schedule(sched, p, m, v))  # f = b = w = 1: 3 per micro-batch
        # step_time: bubble = (p-1)/v x per-micro-batch time; bubble_frac = (p-1)/(v m)
        assert tm.facts["bubble_frac"] == pytest.approx(float(tl.idle[-1] / tl.busy[-1]), rel=1e-12)
        assert tm.bubble / tm.facts["per_mb"] == pytest.approx(float(tl.idle[-1] / 3), rel=1e-12)


def test_cost_model_in_flight_microbatches_equal_the_simulated_peaks():
    # p = 1 is no pipeline: the cost model prices its m micro-batches as gradient accumulation
    # (Megatron's forward_backward_no_pipelining: one held at a time), where the simulated
    # gpipe(1, m) order holds all m.
    from parlab.costmodel import in_flight_microbatches

    for p, m, sched, v in GRID:
        if p == 1 and sched == "gpipe":
            assert in_flight_microbatches(_cost_model(p, m, sched, v)[0], "first") == 1.0
            continue
        plan, _ = _cost_model(p, m, sched, v)
        peaks = peak_activations(make_schedule(sched, p, m, v))
        assert in_flight_microbatches(plan, "first") == pytest.approx(float(peaks[0]), rel=1e-12)
        assert in_flight_microbatches(plan, "last") == pytest.approx(float(peaks[-1]), rel=1e-12)
