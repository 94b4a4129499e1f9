"""How far to trust the model: published measurements and the guide's numbers, recomputed.

One set of A100 defaults serves every row (``parlab.costmodel.specs.assumptions.DEFAULT``)."""

import pytest

from parlab.costmodel import (
    GiB,
    Plan,
    estimate,
    get_model,
    largest_model,
    make_cluster,
    model_state_memory,
)
from parlab.costmodel.answers.scenarios import advice, guide_1_19, zero3_traffic_per_step
from parlab.costmodel.answers.validation import (
    bigscience_tflops,
    bloom_summary,
    bloom_table,
    megatron_rows,
    megatron_summary,
    megatron_table1,
    zero_paper_example,
)
from parlab.costmodel.specs.bands import BLOOM_MEMORY_BAND, MEGATRON_BAND
from parlab.data import read_csv


@pytest.fixture(scope="module")
def megatron():
    return megatron_table1()


def test_megatron_table1_every_row_within_10_percent(megatron):
    assert len(megatron) == len(read_csv("megatron2021_weak_scaling")) == 10
    for row in megatron:
        assert abs(row.error) < 0.10, f"{row.params_b}B: predicted {row.predicted:.1f} vs {row.measured}"


def test_megatron_table1_within_10_percent_with_the_advisors_micro_batch_too(megatron):
    for row in megatron:
        assert abs(row.advised_error) < 0.10
        assert (row.advised.plan.tp, row.advised.plan.pp) == (row.tp, row.pp)


def test_megatron_runs_fit_in_80gb(megatron):
    assert all(row.estimate.fits for row in megatron)


def test_the_bands_the_chapter_quotes_are_the_bands_tested_here():
    assert (MEGATRON_BAND, BLOOM_MEMORY_BAND) == (0.10, 0.15)


def test_megatron_summary_counts_the_high_predictions_and_the_bias(megatron):
    summary = megatron_summary(megatron)
    errors = [r.error for r in megatron]
    assert summary.high == sum(e > 0 for e in errors) == 9  # the model leans high
    assert summary.mean == pytest.approx(sum(errors) / 10) and summary.mean > 0
    assert summary.worst == max(errors, key=abs) and summary.within_band
    assert "9 of 10 predictions high" in summary.describe("Table 1")


def test_validation_table_has_a_row_per_measurement(megatron):
    rows, headers = megatron_rows(megatron)
    assert len(rows) == 10 and "error" in headers and rows[-1][0] == "1008B"


@pytest.fixture(scope="module")
def bloom():
    return bloom_table()


def test_bloom_memory_within_15_percent_on_all_three_rows(bloom):
    assert [r.gpus for r in bloom] == [8, 80, 160]
    for row in bloom:
        assert abs(row.memory_error) < 0.15, f"{row.gpus} GPUs: {row.predicted_gb:.1f} vs {row.measured_gb}"


def test_bloom_summary_is_low_on_every_row(bloom):
    summary = bloom_summary(bloom)
    assert summary.high == 0 and summary.mean < 0 and summary.within_band and summary.band == 0.15


def test_bloom_tflops_are_recomputed_the_way_the_table_computed_them(bloom):
    for row in bloom:
        assert row.recomputed_tflops == pytest.approx(row.reported_tflops, rel=5e-4)
    assert bigscience_tflops(1e9, 1.0, 1, batch=1, seq=1) == pytest.approx(8e9 / 1e12)


def test_bloom_data_parallelism_halves_the_optimizer_states(bloom):
    one, two = bloom[1].estimate.stage, bloom[2].estimate.stage
    assert two.optimizer == pytest.approx(one.optimizer / 2) and two.weights == one.weights


def test_zero_paper_example_from_the_validation_module():
    gb = zero_paper_example()
    assert [round(gb[z], 1) for z in range(4)] == [120.0, 31.4, 16.6, 1.9]


# -- the guide's numbers, by computation --------------------------------------------------------
def test_guide_1_1_gpt3_needs_2_8_tb_in_fp32_with_adam():
    m = model_state_memory(175e9, "fp32", "adam")
    assert (m.weights, m.grads, m.optimizer_states, m.total) == (700e9, 700e9, 1400e9, 2.8e12)


def test_guide_1_14_one_80gb_card_holds_40b_fp16_weights_or_trains_5b():
    assert largest_model(80e9, "fp16", "none") == 40e9
    assert largest_model(80e9, "mixed", "adam") == 5e9
    assert largest_model(80 * GiB, "mixed", "adam") > 5e9  # the card really holds 80 GiB


def test_guide_1_19_counts_elements_not_bytes():
    g = guide_1_19(get_model("llama-65b").with_(name="65b"))
    assert g.guide_elements == pytest.approx(3 * g.n_params)
    nominal = zero3_traffic_per_step(65e9, 10**9)  # the guide's round 65B, many GPUs
    assert nominal / 2 == pytest.approx(195e9, rel=1e-6)  # 195 G elements = 390 GB in bf16
    assert 3 * 65e9 * 8 / 10e9 == pytest.approx(156)  # the guide's 156 s: elements read as bytes
    assert g.seconds_line_rate == pytest.approx(2 * g.guide_seconds * (g.dp - 1) / g.dp)
    assert g.estimate.step_time > 2 * g.guide_seconds  # recompute gathers again; links are not ideal


def test_guide_3_4_and_3_5_without_nvlink_and_fast_network_pipeline_wins():
    plans = advice("llama-65b", 64, 512, kinds=("dgx-a100", "pcie-10gbe"), top=1)
    poor = plans["pcie-10gbe"][0].plan
    assert poor.pp > 1 and poor.zero <= 1
    rich = plans["dgx-a100"][0]
    assert rich.step_time < plans["pcie-10gbe"][0].step_time / 2


def test_guide_1_18_tensor_parallelism_needs_nvlink():
    m = get_model("llama-65b")
    plan = Plan(dp=1, tp=8, pp=8, micro_batches=64, recompute="selective", sequence_parallel=True)
    nvlink = estimate(m, make_cluster("dgx-a100", 64), plan).time.tp_comm
    pcie = estimate(m, make_cluster("pcie-10gbe", 64), plan).time.tp_comm
    assert pcie > 5 * nvlink


def test_the_readme_lists_every_validated_run_with_its_error():
    """The README's validation table is ``readme_table()``: every published run, its error and band."""
    from pathlib import Path

    from parlab.costmodel.answers.validation import readme_table, validation_rows

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    assert readme_table() in readme
    rows = validation_rows()
    assert sum("Table 2" in r[0] for r in rows) == 6 and sum("Table 1" in r[0] for r in rows) == 10
    assert sum("BLOOM" in r[0] for r in rows) == 3
