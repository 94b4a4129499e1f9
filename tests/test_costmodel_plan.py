"""Plans: the derived batch sizes, and every impossible plan rejected with the rule it breaks."""

import pytest

from parlab.costmodel import Plan, check_plan, get_model, make_cluster


def test_global_batch_is_dp_times_micro_batch_times_micro_batches():
    p = Plan(dp=16, tp=8, pp=8, micro_batch=2, global_batch=1536)
    assert (p.m, p.batch, p.n_gpus) == (48, 1536, 1024)
    assert Plan(dp=4, micro_batch=2, micro_batches=3).batch == 24
    assert Plan(dp=4).m == 1


def test_describe_names_every_choice():
    p = Plan(dp=2, tp=8, pp=4, zero=1, micro_batch=1, global_batch=64, schedule="interleaved", chunks=2,
             recompute="selective", sequence_parallel=True, dtype="fp16", fp32_grads=True)
    assert p.describe() == ("dp=2 tp=8 pp=4 ZeRO-1 mb=1 m=32 interleaved(v=2) recompute=selective SP "
                            "fp16+fp32 grads")


@pytest.mark.parametrize("kwargs, rule", [
    (dict(dp=0), "dp must be a positive integer, got 0"),
    (dict(zero=4), "ZeRO stage must be one of 0, 1, 2, 3, got 4"),
    (dict(schedule="zigzag"), "unknown schedule 'zigzag'"),
    (dict(recompute="some"), "unknown recompute 'some'"),
    (dict(dtype="int8"), "unknown dtype 'int8'"),
    (dict(offload="nvme"), "unknown offload 'nvme'"),
    (dict(dp=3, micro_batch=2, global_batch=16), "global batch 16 is not divisible by dp x micro_batch = 3 x 2 = 6"),
    (dict(dp=2, global_batch=8, micro_batches=3), "global batch 8 != dp x micro_batch x micro_batches"),
    (dict(pp=1, schedule="interleaved", chunks=2), "interleaved schedule needs pipeline parallelism"),
    (dict(pp=4, schedule="interleaved", chunks=1, micro_batches=8), "needs chunks \\(v\\) >= 2"),
    (dict(pp=4, schedule="interleaved", chunks=2, micro_batches=6),
     "micro-batches per step \\(m=6\\) to be a multiple of pp=4"),
    (dict(pp=2, chunks=2), "chunks \\(v\\) = 2 is only meaningful with the interleaved schedule"),
    (dict(sequence_parallel=True), "sequence parallelism .* needs tp >= 2, got tp=1"),
    (dict(dp=2, pp=2, zero=3), "ZeRO-3 shards gradients on every micro-batch.*pp=2"),
    (dict(dp=2, offload="optimizer"), "needs ZeRO stage >= 1, got ZeRO-0"),
    (dict(dp=2, zero=2, offload="optimizer+params"), "offloading parameters .* needs ZeRO-3, got ZeRO-2"),
    (dict(dtype="fp32", fp32_grads=True), "fp32_grads is for mixed precision"),
])
def test_impossible_plans_name_the_rule(kwargs, rule):
    with pytest.raises(ValueError, match=rule):
        Plan(**kwargs)


GPT3 = get_model("gpt3-175b")


@pytest.mark.parametrize("plan, n_gpus, rule", [
    (Plan(dp=8, tp=8, pp=2), 64, "dp x tp x pp must equal the number of GPUs: 8 x 8 x 2 = 128 != 64"),
    (Plan(dp=1, tp=5, pp=1), 5, "tp must divide the attention heads: attention heads 96 is not divisible by tp=5"),
    (Plan(dp=1, tp=1, pp=128), 128, "pp=128 > 96 layers"),
    (Plan(dp=1, pp=8, schedule="interleaved", chunks=5, micro_batches=8), 8,
     "layers \\(96\\) divisible by pp x chunks = 8 x 5 = 40"),
])
def test_plans_that_do_not_fit_the_model_or_cluster_name_the_rule(plan, n_gpus, rule):
    with pytest.raises(ValueError, match=rule):
        check_plan(GPT3, make_cluster("dgx-a100", n_gpus), plan)


def test_bf16_needs_bf16_tensor_cores():
    with pytest.raises(ValueError, match="v100-32gb has no bf16"):
        check_plan(GPT3, make_cluster("dgx-a100", 8, gpu="v100"), Plan(dp=8, dtype="bf16"))
    check_plan(GPT3, make_cluster("dgx-a100", 8, gpu="v100"), Plan(dp=8, dtype="fp16"))


def test_a_plan_with_a_different_width_must_divide_every_split_dimension():
    odd = get_model("gpt3-175b").with_(heads=96, hidden=12288, ffn_hidden=12290)
    with pytest.raises(ValueError, match="MLP width 12290 is not divisible by tp=4"):
        check_plan(odd, make_cluster("dgx-a100", 4), Plan(tp=4))
