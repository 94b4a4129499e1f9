"""The advisor against the guide's rules of thumb (guide 1.18, 3.4): when TP without NVLink wins,
and why the advisor's first choice is not ZeRO-3 (chapter 10 prints both)."""

import pytest

from parlab.costmodel.answers.scenarios import tp_without_nvlink, zero3_ranking


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


# -- parlab.costmodel.search.advisor: the advice in plain words, beside the guide's rules (guide 3.3-3.5) ----
from parlab.costmodel import estimate, make_cluster, search  # noqa: E402
from parlab.costmodel.plan.spec import Plan  # noqa: E402
from parlab.costmodel.search.advisor import (  # noqa: E402
    SCENARIO_CHOICES,
    SCENARIOS,
    advise,
    decision_branches,
    guide_rule,
    guide_scenarios,
    layout,
    scenario_rows,
    scenario_verdict,
    validated_mark,
)
from parlab.costmodel.specs.bands import (  # noqa: E402
    MEGATRON_BAND,
    STEP_TIME_BAND,
    comparison_band,
    is_tie,
    margin_verdict,
)


def _verdict(model, n_gpus, kind="dgx-a100", inter=None):
    return next(v for s, v in guide_scenarios() if (s.model, s.n_gpus, s.kind, s.inter) == (model, n_gpus, kind, inter))


def test_the_advice_is_the_search_s_first_plan_and_says_why_with_its_numbers():
    cluster = make_cluster("pcie-10gbe", 8)
    a = advise("llama-7b", cluster, 64, **SCENARIO_CHOICES)
    assert a.best.plan == search("llama-7b", cluster, 64, **SCENARIO_CHOICES).best().plan
    why = a.reasons()
    assert why[0].startswith(a.result.counts())
    assert f"{a.best.step_time:.2f} s per step" in why[2] and layout(a.best.plan) in why[2]
    other = a.runner_up()
    assert layout(other.plan) != layout(a.best.plan) and f"{other.step_time:.2f} s" in why[-1]


def test_guide_3_3_one_gpu_offloads_only_when_nothing_else_fits():
    small, big = _verdict("1.3B", 1), _verdict("llama-7b", 1)
    assert small.rule.section == big.rule.section == "3.3"
    assert not small.advice.offload_needed and small.advice.best.plan.offload == "none" and small.agrees
    assert big.advice.offload_needed and big.advice.best.plan.offload != "none" and big.agrees
    assert not search("llama-7b", make_cluster("dgx-a100", 1), 8).ranked  # nothing fits without it


def test_guide_3_4_one_node_agrees_where_memory_decides():
    fits, nvlink, pcie = _verdict("1.3B", 8), _verdict("llama-13b", 8), _verdict("llama-13b", 8, "pcie-10gbe")
    assert fits.rule.says == "DDP or ZeRO" and fits.advice.plain_fits and fits.agrees
    assert nvlink.rule.says == "TP, ZeRO or PP" and nvlink.agrees
    assert pcie.rule.says.startswith("PP") and pcie.agrees and pcie.advice.best.plan.pp > 1


def test_guide_3_4_pp_without_nvlink_ties_with_zero_for_a_7b_model():
    """ZeRO ranks first, but the guide's PP plan is slower by less than the model can resolve
    (two predictions, each within the validated band): a tie, and the text says so."""
    v = _verdict("llama-7b", 8, "pcie-10gbe")
    assert not v.agrees and v.advice.best.plan.pp == 1 and v.advice.best.plan.zero >= 1
    assert v.guides_best.plan.pp > 1 and 0 < v.slowdown < comparison_band()
    assert v.tie and v.outcome == "tie"
    assert "pipeline bubble" in v.why() and margin_verdict(v.slowdown) in v.why() and "a tie" in v.why()


def test_a_verdict_is_a_tie_exactly_when_its_margin_is_inside_the_validated_band():
    """The band is the out-of-sample one (``bands.STEP_TIME_BAND``, +-25%, wider than Table 1's
    in-sample +-10%); two predictions each within it can swap order when they are less than
    (1.25 / 0.75 - 1) = 66.7% apart."""
    assert STEP_TIME_BAND == 0.25 and MEGATRON_BAND == 0.10
    assert comparison_band() == pytest.approx(1.25 / 0.75 - 1)
    worst_swap = (1 + STEP_TIME_BAND) / (1 - STEP_TIME_BAND)  # slower one predicted high, faster low
    assert is_tie(worst_swap - 1 - 1e-9) and not is_tie(worst_swap - 1 + 1e-9)
    assert is_tie(0.107) and is_tie(0.30) and not is_tie(0.70)
    assert "±25%" in margin_verdict(0.7) and "beyond" in margin_verdict(0.7)


def test_guide_3_5_several_nodes_agrees_on_fast_and_slow_networks():
    fast, slow = _verdict("llama-13b", 16), _verdict("llama-13b", 16, inter="25gbe")
    assert fast.rule.says == "ZeRO or 3D" and fast.agrees
    assert slow.rule.says == "DP + PP + TP + ZeRO-1" and slow.agrees
    p = slow.advice.best.plan
    assert p.dp > 1 and p.tp > 1 and p.pp > 1 and p.zero == 1


def test_guide_summary_no_tp_on_10gbe_holds_for_13b_and_fails_for_65b():
    small, big = _verdict("llama-13b", 16, "pcie-10gbe"), _verdict("llama-65b", 32, "pcie-10gbe")
    assert small.rule.section == big.rule.section == "summary"
    assert small.agrees and small.advice.best.plan.tp == 1
    assert not big.agrees and big.advice.best.plan.tp > 1 and big.tie == is_tie(big.slowdown)
    # without TP the 65B model fits only with full recomputation: a third more matmul time
    assert big.guides_best.plan.recompute == "full" and "compute: matmuls" in big.why()


def test_the_scenarios_cover_every_branch_of_the_guide_s_tree_and_the_table_matches():
    branches = {rule.situation for _, rule in decision_branches()}
    assert {v.rule.situation for _, v in guide_scenarios()} == branches and len(branches) == 8
    rows = scenario_rows()
    outcomes = [v.outcome for _, v in guide_scenarios()]
    assert len(rows) == len(SCENARIOS) and outcomes.count("agrees") == len(SCENARIOS) - 2
    assert outcomes.count("tie") == 2  # chapter 10: where another plan ranks first, it is by a tie
    assert [r[5] for r in rows] == [{"agrees": "yes", "tie": "tie", "differs": "no"}[o] for o in outcomes]
    for r, (_, v) in zip(rows, guide_scenarios(), strict=True):
        assert r[6] == round(v.advice.best.step_time, 2) and r[8] == v.why()
        assert r[9] == validated_mark(v.advice.best)
    assert scenario_verdict(SCENARIOS[0]) is guide_scenarios()[0][1]  # cached, shared with the faces


def test_guide_rule_reads_the_links_of_the_cluster():
    assert guide_rule(make_cluster("dgx-a100", 64, inter="10gbe", nics_per_node=1), False).says == \
        "DP + PP + TP + ZeRO-1"
    assert guide_rule(make_cluster("pcie-10gbe", 64, inter="ib-hdr"), False).says == "ZeRO or 3D"
    assert layout(Plan(dp=2, tp=2, pp=2, zero=1, micro_batch=1, micro_batches=4)) == "DP (ZeRO-1) + TP + PP"


def test_advise_names_its_own_offload_switch():
    with pytest.raises(TypeError, match="offload must be True, False or None"):
        advise("llama-7b", make_cluster("dgx-a100", 1), 8, offload=("none",))
    with pytest.raises(ValueError, match="fits in memory"):
        advise("llama-65b", make_cluster("dgx-a100", 1), 8, offload=False)


# -- parlab.costmodel.answers.frameworks: the landscape of guide 1.20, 1.22, 3.1, 3.2 ---------------------------
from pathlib import Path  # noqa: E402

from parlab.costmodel.answers.frameworks import (  # noqa: E402
    FRAMEWORKS,
    KINDS,
    LAYERS,
    STACKS,
    TAUGHT_BY,
    framework_rows,
    search_spaces,
)

ROOT = Path(__file__).resolve().parent.parent


def test_every_parlab_module_the_framework_table_names_exists():
    for kind, modules in TAUGHT_BY.items():
        for m in modules:
            path = ROOT.joinpath(*m.split("."))
            assert path.with_suffix(".py").exists() or (path / "__init__.py").exists(), f"{kind}: {m}"
    assert set(TAUGHT_BY) == set(KINDS)


def test_the_table_has_every_framework_the_guide_names_and_today_s():
    names = " ".join(f.name for f in FRAMEWORKS)
    for n in ("TensorFlow", "PyTorch DDP / FSDP", "MindSpore", "OneFlow", "PaddlePaddle", "Megatron-LM",
              "DeepSpeed", "Colossal-AI", "Alpa", "JAX / XLA on TPU", "torchtitan", "Megatron-Core", "nanotron"):
        assert n in names
    assert all(any(k in f.provides for f in FRAMEWORKS) for k in KINDS)
    rows, headers = framework_rows()
    assert len(rows) == len(FRAMEWORKS) and len(headers) == len(KINDS) + 4
    assert all(len(stack) == len(LAYERS) for stack in STACKS.values())


def test_alpa_slices_stages_anywhere_where_search_splits_them_evenly():
    s = search_spaces(4, 4)  # cuts of 4 layers into 1-4 contiguous stages: 1 + 3 + 3 + 1
    assert (s.layouts, s.equal_slicings, s.contiguous_slicings) == (6, 3, 8)
    assert search_spaces(80, 64).ratio > 1e20


def test_the_frameworks_for_a_plan_provide_every_kind_it_uses():
    from parlab.costmodel.answers.frameworks import frameworks_for, kinds_of

    plan = Plan(dp=2, tp=2, pp=8, zero=1, micro_batch=1, micro_batches=128, sequence_parallel=True)
    assert kinds_of(plan) == {"DP", "ZeRO/FSDP", "TP", "SP", "PP"}
    names = [f.name for f in frameworks_for(plan)]
    assert "Megatron-LM" in names and "DeepSpeed" not in names and "torchtitan" in names
    assert "DeepSpeed" in [f.name for f in frameworks_for(Plan(dp=1, zero=1, offload="optimizer", micro_batch=1,
                                                                micro_batches=8))]


def test_megatron_sp_ulysses_and_ring_attention_are_three_things_in_the_table():
    """Issue 19 item 7: Megatron-style SP (inside the TP group) is not context parallelism; DeepSpeed's
    'sequence parallelism' is Ulysses (CP by all-to-all), and AutoTP gives DeepSpeed its own TP."""
    by = {f.name: f for f in FRAMEWORKS}
    assert "SP" in KINDS and "CP" in KINDS and KINDS.index("SP") != KINDS.index("CP")
    ds = by["DeepSpeed"]
    assert {"TP", "CP"} <= ds.provides and "SP" not in ds.provides
    assert "Ulysses" in ds.note and "AutoTP" in ds.note
    assert {"SP", "CP"} <= by["Megatron-Core"].provides and {"SP", "CP"} <= by["torchtitan"].provides
    rows, headers = framework_rows()
    row = rows[list(by).index("DeepSpeed")]
    assert row[headers.index("TP")] == row[headers.index("CP")] == "yes" and row[headers.index("SP")] == ""


# -- the validated range (issue 30, item 3.4) ---------------------------------------------------
def test_a_plan_outside_the_validated_range_says_why_and_is_ranked_all_the_same():
    """PCIe + 10 GbE was never validated, nor a GPU without a published row (the A800), nor an MFU
    above the highest measured on that GPU: the estimate says so, explain() and the advisor print it,
    and the ranking is the search's, unchanged."""
    from parlab.costmodel.plan.validated_range import outside_validated_range
    from parlab.costmodel.specs.calibration import VALIDATED_MFU

    poor = advise("llama-7b", make_cluster("pcie-10gbe", 16), 64, **SCENARIO_CHOICES)
    reasons = poor.best.outside_validated
    assert any("pcie" in r and "inside a node" in r for r in reasons)
    assert any("10gbe" in r and "between nodes" in r for r in reasons)
    assert poor.best.plan == search("llama-7b", make_cluster("pcie-10gbe", 16), 64, **SCENARIO_CHOICES).best().plan
    assert any(line.startswith("Outside the validated range") for line in poor.reasons())
    assert "outside the validated range: " + "; ".join(reasons) in poor.best.explain()
    assert validated_mark(poor.best).startswith("outside: ")

    a800 = estimate("llama-7b", make_cluster("a800-hdr", 8), Plan(dp=8, micro_batch=1, global_batch=64,
                                                                    recompute="full", zero=1))
    assert a800.outside_validated == (
        "no published run on a800-80gb was validated (validated: a100-80gb, h100-sxm)",
        "the link inside a node, nvlink3-a800, was never validated (validated: nvlink3-a100, nvlink4-h100)")

    selene = make_cluster("dgx-a100", 8)
    assert outside_validated_range(selene, VALIDATED_MFU["a100-80gb"]) == ()
    assert outside_validated_range(selene, 0.70) == ("MFU 70.0% is above the highest validated on a100-80gb (64.0%)",)
    fast = advise("llama-7b", selene, 64, **SCENARIO_CHOICES).best  # chapter 10's LLaMA-7B on one DGX
    assert ("MFU" in validated_mark(fast)) == (fast.mfu > VALIDATED_MFU["a100-80gb"])


def test_the_published_runs_lie_inside_the_validated_range_but_for_an_mfu_above_the_measured():
    """Every priced published run (Table 1 on Selene, MT-NLG, BLOOM-176B, MPT on one node) is inside on
    GPU and links; an MFU reason appears only where the model predicts more than was ever measured on
    that GPU: the range is the measured one, not the model's."""
    from parlab.costmodel.answers.validation import samples
    from parlab.costmodel.specs.calibration import VALIDATED_MFU

    timed = [s.estimate for s in samples() if s.measured_mfu is not None]
    assert len(timed) >= 20
    for est in timed:
        high = est.mfu > VALIDATED_MFU[est.cluster.gpu.name]
        assert est.outside_validated == ((f"MFU {est.mfu:.1%} is above the highest validated on "
                                          f"{est.cluster.gpu.name} ({VALIDATED_MFU[est.cluster.gpu.name]:.1%})",)
                                         if high else ())
    assert any(validated_mark(est) == "yes" for est in timed)
