"""The search's speed-ups (memoised per-layout pieces, plans that cannot fit pruned before they are
priced; attack review F17) change no answer: the counts and the fastest plans of MoE and dense
searches, with their numbers, are those the search gives without them, and the ranking equals
pricing every candidate one by one with ``estimate``.

The pins were printed by the search of commit 3512b98 and re-derived, when the speed-ups were
ported onto main, from main at 0425eff without them (a scratch checkout): main's uneven pipeline
stages changed two of them legitimately. DeepSeek-V3's 61 layers on pp = 32 are now priced on
their real stages of 1 or 2 layers, not ceil(61 / 32) = 2 each (1,230 plans fit, was 1,168; the
fastest are now pp = 32), and Llama-13B's 40 layers get interleaved plans on pp = 8 (v = 2, 4:
uneven splits; 2,388 tried, was 2,160; 1,551 fit, was 1,381; the same 3 fastest). Then GQA was
priced (main's commit before the speed-ups merged, without them): Mixtral's 8 K/V heads shrink its
K/V activations (2,137 plans fit, was 2,120; the same 3 fastest plans, a little lighter and faster).
Every ranked plan's numbers of the three searches were compared with main's there, all equal."""

from __future__ import annotations

import pytest

from parlab.costmodel import candidate_plans, estimate, get_model, make_cluster, search

#: (model, GPU, GPUs, global batch): (tried, valid, fitting, the 3 fastest plans as
#: (describe(), memory_total, step_time, mfu)), printed by main's search without the speed-ups
BEFORE = {
    ("mixtral-8x7b", "dgx-h100", 32, 256): (5415, 5415, 2137, [
        ("dp=32 tp=1 pp=1 ep=8 ZeRO-2 mb=1 m=8 bf16", 78137216921.6, 4.939461102508125, 0.5562967779755289),
        ("dp=16 tp=1 pp=2 ep=8 ZeRO-1 mb=1 m=16 interleaved(v=4) bf16", 83390383820.8, 5.028510750205477,
         0.5464453459005615),
        ("dp=32 tp=1 pp=1 ep=8 ZeRO-2 mb=1 m=8 recompute=selective bf16", 78118761984.0, 5.041206135969122,
         0.5450692199739786),
    ]),
    ("deepseek-v3", "dgx-h100", 256, 256): (8433, 8433, 1230, [
        ("dp=1 tp=8 pp=32 ZeRO-0 mb=1 m=256 1f1b SP bf16", 40541975756.8, 2.676053421837573, 0.3733516702671481),
        ("dp=2 tp=4 pp=32 ZeRO-1 mb=1 m=128 1f1b SP bf16", 60088055910.4, 2.6821958998953024,
         0.37249666022014816),
        ("dp=2 tp=4 pp=32 ZeRO-0 mb=1 m=128 1f1b SP bf16", 80047050649.6, 2.7007623801341083, 0.3699359196189498),
    ]),
    ("llama-13b", "dgx-a100", 32, 256): (2388, 2388, 1551, [
        ("dp=32 tp=1 pp=1 ZeRO-2 mb=1 m=8 bf16", 51998783334.4, 6.771187456757607, 0.6370450259507722),
        ("dp=32 tp=1 pp=1 ZeRO-2 mb=2 m=4 bf16", 67203939788.8, 6.771187456757607, 0.6370450259507722),
        ("dp=16 tp=2 pp=1 ZeRO-1 mb=4 m=4 SP bf16", 79733284889.6, 6.857187606999883, 0.6290554577658599),
    ]),
}


@pytest.mark.parametrize("case", list(BEFORE), ids=lambda c: f"{c[0]}-{c[2]}gpus")
def test_the_search_answers_as_before_its_speed_ups(case):
    model, gpu, n, batch = case
    tried, valid, fitting, top = BEFORE[case]
    result = search(model, make_cluster(gpu, n), batch)
    assert (result.tried, result.valid, result.fitting) == (tried, valid, fitting)
    got = [(e.plan.describe(), e.memory_total, e.step_time, e.mfu) for e in result.ranked[:len(top)]]
    assert [g[0] for g in got] == [t[0] for t in top]
    assert [g[1:] for g in got] == [pytest.approx(t[1:], rel=1e-12) for t in top]


def test_the_search_ranks_what_estimate_prices_plan_by_plan():
    """No plan that fits is pruned, none that does not is kept, and each keeps its own numbers."""
    model, cluster = get_model("mixtral-8x7b"), make_cluster("dgx-h100", 16)
    fits = []
    for plan in candidate_plans(model, 16, 64, zero_stages=[1, 2], micro_batches=[1, 2]):
        est = estimate(model, cluster, plan)
        if est.fits:
            fits.append(est)
    fits.sort(key=lambda e: (e.step_time, e.memory_total))
    ranked = search(model, cluster, 64, zero_stages=[1, 2], micro_batches=[1, 2]).ranked
    assert fits, "the case must have plans that fit"
    assert [(e.plan, e.memory_total, e.step_time) for e in ranked] == [(e.plan, e.memory_total, e.step_time)
                                                                      for e in fits]
