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
    assert sum("BLOOM prelude" in r[0] for r in rows) == 6  # memory and speed of three runs
    assert {r[-1] for r in rows} == {"calibration", "validation"}


# -- calibration and validation apart (issue 30, item 3) ----------------------------------------
@pytest.fixture(scope="module")
def published():
    from parlab.costmodel.answers.validation import samples

    return samples()


def test_every_assumption_names_the_rows_it_was_set_on_in_one_table():
    """Each field of Assumptions has one entry in the calibration table; an entry set on rows names
    rows that exist; Table 1 set matmul_efficiency, the ZeRO-3 rows of Table 2 zero3_overlap and the
    one-port cap."""
    from dataclasses import fields

    from parlab.costmodel.specs.assumptions import DEFAULT, Assumptions
    from parlab.costmodel.specs.calibration import CALIBRATION, calibration

    names = [c.field for c in CALIBRATION]
    assert len(names) == len(set(names)) and {f.name for f in fields(Assumptions)} <= set(names)
    for f in fields(Assumptions):
        assert f"{f.name} = {calibration(f.name).value}" in DEFAULT.describe()
    for c in CALIBRATION:
        for rs in c.rows:
            assert any(rs.matches(rs.file, r) for r in read_csv(rs.file)), rs.describe()
    assert calibration("matmul_efficiency").rows[0].file == "megatron2021_weak_scaling"
    assert calibration("zero3_overlap").rows == calibration(
        "plan.step_time.zero3_bandwidth (one port per GPU across nodes)").rows
    assert "specs.calibration" in (Assumptions.__doc__ or "") + __import__(
        "parlab.costmodel.specs.assumptions", fromlist=["x"]).__doc__


def test_calibration_rows_are_the_ones_an_assumption_was_set_on_and_every_other_row_validates(published):
    by = {}
    for s in published:
        by.setdefault((s.source.split(",")[0], s.sample), 0)
        by[(s.source.split(",")[0], s.sample)] += 1
    calibration = {k: n for k, n in by.items() if k[1] == "calibration"}
    assert calibration == {("Narayanan et al. 2021", "calibration"): 16}  # Table 1 (10) and ZeRO-3 (6)
    assert all(s.sample == "validation" for s in published if "MT-NLG" in s.source or "BLOOM" in s.source)
    assert all(not s.in_band_rule for s in published if s.sample == "calibration")


def test_in_sample_and_out_of_sample_errors_are_reported_apart(published):
    from parlab.costmodel.answers.validation import in_sample_summary, out_of_sample_summary

    inside, outside = in_sample_summary(published), out_of_sample_summary(published)
    assert inside.n == 16 and abs(inside.worst) < 0.10  # what it was set on, it reproduces
    assert outside.n == 10 and outside.mean < 0 and abs(outside.worst) > 0.20  # MT-NLG, MPT on H100: optimistic
    every = out_of_sample_summary(published, band_rule_only=False)
    assert every.n == 13 and abs(every.worst) > abs(outside.worst)  # BLOOM's prelude speed, reported beside


def test_the_verdict_band_is_derived_from_out_of_sample_rows_only(published):
    """The rule: the largest absolute step-time error of the validation rows of production runs,
    rounded up to the next 5%; bands.STEP_TIME_BAND must be what those rows give."""
    import math

    from parlab.costmodel.answers.validation import derived_step_time_band
    from parlab.costmodel.specs.bands import STEP_TIME_BAND

    rule = [s for s in published if s.in_band_rule]
    assert rule and all(s.sample == "validation" and s.step_error is not None for s in rule)
    worst = max(abs(s.step_error) for s in rule)
    assert derived_step_time_band(published) == pytest.approx(math.ceil(worst / 0.05) * 0.05)
    assert STEP_TIME_BAND == pytest.approx(derived_step_time_band(published))


def test_the_validated_range_is_the_range_the_published_step_time_rows_cover(published):
    """specs.calibration's constants, recomputed: GPUs with a step-time row, the highest MFU measured
    on each (rounded down to 1%), the links inside and between nodes of those rows."""
    from parlab.costmodel.specs.calibration import VALIDATED_INTER, VALIDATED_INTRA, VALIDATED_MFU

    timed = [s for s in published if s.measured_mfu is not None]
    gpus = {s.estimate.cluster.gpu.name for s in timed}
    assert set(VALIDATED_MFU) == gpus
    for gpu in gpus:
        top = max(s.measured_mfu for s in timed if s.estimate.cluster.gpu.name == gpu)
        assert VALIDATED_MFU[gpu] == pytest.approx(int(top * 100) / 100)
    assert VALIDATED_INTRA == {s.estimate.cluster.intra.name for s in timed}
    assert VALIDATED_INTER == {s.estimate.cluster.inter.name for s in timed if s.estimate.cluster.nodes > 1}


def test_every_published_run_is_cited_and_says_whether_it_is_priced():
    """published_runs.csv: a header naming its sources, each row a source, a layout whose degrees
    multiply to its GPUs, and 'yes' or why not in `priced`; every priced row is estimated."""
    from parlab.costmodel.answers.published_runs import published_runs
    from parlab.data import source

    header = source("published_runs")
    assert "Dubey et al. 2024" in header and "performance_summary.md" in header and "BLOOM" in header
    runs = published_runs()
    assert len(runs) == len(read_csv("published_runs")) >= 15
    for p in runs:
        r = p.row
        assert r["source"] and r["unit"] and float(r["measured"]) > 0
        assert int(r["tp"]) * int(r["pp"]) * int(r["cp"]) * int(r["dp"]) == int(r["gpus"]), p.run
        assert r["priced"] == "yes" if p.priced else p.refused and r["priced"].startswith("no: ")
    assert sum(p.priced for p in runs) >= 1
    assert {p.run for p in runs if "Dubey" in p.row["source"]} == {
        "Llama 3 405B 8K on 8192 GPUs", "Llama 3 405B 8K on 16384 GPUs", "Llama 3 405B 128K on 16384 GPUs"}


def test_every_csv_of_published_data_cites_its_source():
    from importlib import resources

    from parlab.data import source

    for f in resources.files("parlab.data").iterdir():
        if f.name.endswith(".csv"):
            assert len(source(f.name[:-4])) > 40, f.name
