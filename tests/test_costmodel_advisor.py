"""The advisor against the guide's rules of thumb (guide 1.18, 3.4): when TP without NVLink wins,
and why the advisor's first choice is not ZeRO-3 (chapter 10 prints both)."""

import pytest

from parlab.costmodel.scenarios import tp_without_nvlink, zero3_ranking


@pytest.fixture(scope="module")
def pcie():
    return tp_without_nvlink("gpt3-175b", 1024, 1536, "pcie-10gbe", slowdowns=(1, 8))


def test_a_gpus_pcie_share_is_168_times_its_share_of_one_10gbe_port(pcie):
    # 31.5 GB/s x 0.75 vs 1.25 GB/s x 0.9 / 8 GPUs
    assert pcie.intra_per_gpu == pytest.approx(23.625e9) and pcie.network_per_gpu == pytest.approx(0.140625e9)
    assert pcie.speed_ratio == pytest.approx(168)


def test_on_pcie_and_10gbe_the_advisor_uses_tp_for_gpt3_at_1024_gpus(pcie):
    _, best, no_tp = pcie.rows[0]
    assert best.plan.tp > 1 and best.step_time < no_tp.step_time
    # what TP buys: without it the model needs full recompute, more DP ranks, fewer micro-batches
    assert no_tp.plan.recompute == "full" and best.plan.recompute != "full"
    assert no_tp.time.bubble > 2 * best.time.bubble


def test_the_table_says_when_no_plan_without_tp_fits(pcie):
    from dataclasses import replace

    _, best, _ = pcie.rows[0]
    rows, headers = replace(pcie, rows=[(1.0, best, None)]).table()  # no tp = 1 plan fits
    assert rows[0][-1] == "none fits" and headers[-1] == "best tp=1 (s)"


def test_with_a_much_slower_pcie_the_advisor_drops_tp(pcie):
    k, best, no_tp = pcie.rows[-1]
    assert k == 8 and best.plan.tp == 1 and best.plan == no_tp.plan
    assert pcie.tp_wins_up_to == 1
    rows, headers = pcie.table()
    assert len(rows) == 2 and headers[0] == "PCIe slower by" and rows[0][0] == "1x"


def test_the_zero3_plan_perfect_overlap_put_first_now_needs_more_hiding_than_it_gets():
    z = zero3_ranking("gpt3-175b", 1024, 1536, "dgx-a100")
    assert z.zero3.plan.zero == 3 and z.other.plan.zero < 3 and z.first is z.other
    assert z.optimistic.step_time < 1.15 * z.other.step_time  # near a tie with perfect overlap
    assert z.exposed_step > 1.5 * z.other.step_time  # far behind with none of it hidden
    assert z.hidden / z.traffic < z.hidden_share_to_tie
    assert 0 < z.latency < z.traffic
