"""All-gather context parallelism in the planner (Llama 3, Dubey et al. 2024, Sec. 3.3.2; Megatron-
Core's cp_comm_type "all_gather"): ``Plan(cp_impl="all-gather")`` is checked, priced (bytes, the
exposed gather, the dK/dV reduce-scatter) and explained; ``search`` tries it; the CLI's ``--cp``,
``--cp-impl`` and ``--ep`` reach the plan, with one-line errors. Numbers by hand from the formulas."""

import pytest

from parlab.cli import main
from parlab.costmodel import Plan, estimate, get_model, make_cluster, search
from parlab.costmodel.plan.comm_5d import cp_layer_bytes
from parlab.costmodel.pricing.collectives import ring_time

LLAMA_32K = get_model("llama-7b").with_(seq_len=32768)
MIXTRAL = get_model("mixtral-8x7b")  # 8 K/V heads of 32
H100 = make_cluster("dgx-h100", 64)


def test_all_gather_sends_the_other_ranks_kv_and_reduce_scatters_their_gradients():
    plan = Plan(dp=8, cp=8, cp_impl="all-gather")
    sent = cp_layer_bytes(LLAMA_32K, plan)  # K and V of all 32768 tokens x h = 4096, 2 B; 7/8 leave the rank
    whole = 2 * 32768 * 4096 * 2
    assert sent.forward == 7 / 8 * whole == cp_layer_bytes(LLAMA_32K, Plan(dp=8, cp=8)).forward  # = the ring's
    assert sent.backward == 2 * sent.forward  # the gather again (TransformerEngine) + the dK, dV reduce-scatter
    gqa = cp_layer_bytes(MIXTRAL, plan)  # gathered a_kv / a = 1/4 as wide
    assert gqa.forward == 7 / 8 * 2 * MIXTRAL.seq_len * 8 * 128 * 2
    assert cp_layer_bytes(LLAMA_32K, plan.with_(dp=4, tp=2)).forward == sent.forward / 2  # its TP shard


def test_the_gather_is_priced_exposed_beside_the_ring_numbers_that_stay():
    ring = estimate(LLAMA_32K, H100, Plan(dp=8, cp=8, global_batch=8))
    ag = estimate(LLAMA_32K, H100, Plan(dp=8, cp=8, global_batch=8, cp_impl="all-gather"))
    f = ag.time.facts
    whole, link = 2 * 32768 * 4096 * 2, f["where"]["cp"]
    assert "intra-node" in link
    t = ring_time("all_gather", whole, 8, H100.intra.achievable, H100.intra.latency)
    assert f["t_cp_send"] == pytest.approx(t)  # (cp-1) alpha + 7/8 of the whole K, V / B
    per_layer = 2 * t + ring_time("reduce_scatter", whole, 8, H100.intra.achievable, H100.intra.latency)
    assert ag.time.cp_comm == pytest.approx(ag.plan.m * f["L"] * per_layer)  # fwd, bwd gather, dK/dV
    assert ag.time.cp_comm > ring.time.cp_comm  # nothing hidden, where the ring hides its sends
    assert ag.memory_total == ring.memory_total  # only the rank's own K, V kept between the passes
    assert ag.plan.describe().startswith("dp=8 tp=1 pp=1 cp=8(all-gather) ")
    text = ag.explain()
    assert "all-gather of K, V" in text and "Dubey et al. 2024 (Llama 3), Sec. 3.3.2" in text


def test_all_gather_needs_the_balanced_split_and_not_ulysses_head_rule():
    odd = LLAMA_32K.with_(seq_len=32760)  # not a multiple of 2 cp = 16
    with pytest.raises(ValueError, match=r"all-gather attention needs seq_len % 2\*cp == 0 .*seq_len=32760, cp=8"):
        estimate(odd, H100, Plan(dp=8, cp=8, cp_impl="all-gather"))
    # 32 heads on tp=2 x cp=32: Ulysses cannot, all-gather (any head count) can
    plan = Plan(dp=1, tp=2, cp=32, cp_impl="all-gather", sequence_parallel=True)
    assert estimate(LLAMA_32K, H100, plan).time.cp_comm > 0
    with pytest.raises(ValueError, match="unknown cp_impl 'tree'; allowed: ring, ulysses, all-gather"):
        Plan(cp=2, cp_impl="tree")


def test_search_ranks_all_gather_plans_when_asked():
    result = search(LLAMA_32K, H100, 64, cp=[8], cp_impls=["all-gather"], micro_batches=[1], zero_stages=[1],
                    recompute=["selective"])
    assert result.best().plan.cp_impl == "all-gather" and result.best().plan.cp == 8
    # cp = 64 > 32 heads: Ulysses' head rule must not drop all-gather (nor the ring) plans
    wide = search(LLAMA_32K, H100, 8, cp=[64], cp_impls=["all-gather"], micro_batches=[1], zero_stages=[1],
                  recompute=["selective"])
    assert wide.best().plan.describe().startswith("dp=1 tp=1 pp=1 cp=64(all-gather)")


def test_cli_estimate_takes_cp_cp_impl_and_ep(capsys):
    assert main(["estimate", "--model", "llama-7b", "--seq", "32768", "--gpus", "64", "--cp", "8",
                 "--cp-impl", "all-gather", "--zero", "1"]) == 0
    out = capsys.readouterr().out
    assert "plan: dp=8 tp=1 pp=1 cp=8(all-gather) ZeRO-1" in out and "all-gather of K, V" in out
    assert main(["estimate", "--model", "mixtral-8x7b", "--gpus", "16", "--ep", "8", "--zero", "1"]) == 0
    assert "ep=8" in capsys.readouterr().out


@pytest.mark.parametrize(("argv", "message"), [
    (["estimate", "--cp-impl", "tree"], "argument --cp-impl: unknown cp method 'tree'; allowed: ring, ulysses, all-gather"),
    (["estimate", "--gpus", "64", "--cp", "3"], "--gpus 64 is not divisible by --tp x --pp x --cp = 1 x 1 x 3"),
    (["estimate", "--cp", "0"], "argument --cp: must be a positive integer, got '0'"),
    (["search", "--cp-impl", "ring,foo"], "unknown cp method 'foo'; allowed: ring, ulysses, all-gather (a list of "
                                          "cp methods separated by commas, e.g. ring,all-gather)"),
    (["search", "--ep", "two"], "argument --ep: must be a positive integer, got 'two'"),
])
def test_cli_cp_and_ep_errors_are_one_line(capsys, argv, message):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
