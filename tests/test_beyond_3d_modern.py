"""Chapter 13 on today's models: the long-context example on a GQA model (Llama 3.1 8B at 128K)
with all-gather CP beside ring and Ulysses, and DeepSeek-V3 priced on its own H800 cluster."""

import pytest

from parlab.costmodel import get_model
from parlab.costmodel.answers.scenarios_5d import V3_PLAN, deepseek_v3_h800, moe_pricing
from parlab.costmodel.pricing.context_parallel import comparison_rows


def _sent(model) -> dict[str, float]:
    rows, headers = comparison_rows(model, 1, 8)
    col = headers.index("MB sent / rank / layer")
    return {r[0]: float(str(r[col]).replace(",", "")) for r in rows}


def test_gqa_shrinks_the_kv_traffic_of_ring_and_all_gather_by_the_group_size():
    gqa = get_model("llama-3.1-8b").with_(seq_len=131072)
    mha = gqa.with_(kv_heads=gqa.heads)
    g, m = _sent(gqa), _sent(mha)
    assert {"ring attention", "all-gather attention (Llama 3)", "DeepSpeed-Ulysses"} <= set(g)
    for method in ("ring attention", "all-gather attention (Llama 3)"):
        assert g[method] == pytest.approx(m[method] * gqa.kv_heads / gqa.heads, rel=1e-3), method
    assert g["DeepSpeed-Ulysses"] < m["DeepSpeed-Ulysses"]  # K and V shrink, Q and the output do not


def test_deepseek_v3_on_h800s_in_its_report_layout_bf16_and_fp8():
    bf16, fp8 = deepseek_v3_h800()
    h100 = moe_pricing()[1].estimate
    for r in (bf16, fp8):
        e = r.estimate
        assert e.cluster.gpu.name == "h800" and e.cluster.n_gpus == 2048 and e.fits
        assert (e.plan.pp, e.plan.ep, e.plan.dp, e.plan.zero) == (V3_PLAN.pp, V3_PLAN.ep, V3_PLAN.dp, V3_PLAN.zero) == (
            16, 64, 128, 1)
    assert fp8.estimate.plan.fp8_recipe == "deepseek-blockwise"
    assert fp8.estimate.step_time < bf16.estimate.step_time
    assert fp8.ep_share > bf16.ep_share  # FP8 leaves the all-to-alls, so their share grows
    # the same GPUs' compute on a slower NVLink: the all-to-alls take longer than on DGX H100s
    assert bf16.estimate.time_terms()["EP all-to-all"] > h100.time_terms()["EP all-to-all"]
    assert bf16.estimate.cluster.intra.achievable < h100.cluster.intra.achievable
    assert bf16.estimate.cluster.inter.achievable == h100.cluster.inter.achievable
