"""DeepSpeed ZeRO configs generated from a Plan (parlab.deepspeed_config): DeepSpeed's field names,
consistent batch sizes, stage-specific fields, every field explained."""

import json

import pytest

from parlab.costmodel import Plan, get_model
from parlab.deepspeed_config import FIELDS, compare, deepspeed_config, explain, flatten, to_json

# Field names of DeepSpeed's configuration reference (deepspeed.ai/docs/config-json): the spec
DEEPSPEED_TOP = {"train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
                 "gradient_clipping", "bf16", "fp16", "zero_optimization"}
DEEPSPEED_ZERO = {"stage", "overlap_comm", "contiguous_gradients", "reduce_bucket_size", "reduce_scatter",
                  "allgather_partitions", "allgather_bucket_size", "stage3_prefetch_bucket_size",
                  "stage3_param_persistence_threshold", "stage3_max_live_parameters", "stage3_max_reuse_distance",
                  "stage3_gather_16bit_weights_on_model_save", "offload_optimizer", "offload_param"}
H = get_model("llama-7b").hidden


@pytest.mark.parametrize("zero", [1, 2, 3])
def test_fields_are_deepspeeds_and_batches_agree(zero):
    plan = Plan(dp=16, zero=zero, micro_batch=2, micro_batches=4)
    cfg = json.loads(to_json(deepspeed_config("llama-7b", plan)))
    assert set(cfg) <= DEEPSPEED_TOP and set(cfg["zero_optimization"]) <= DEEPSPEED_ZERO
    assert cfg["train_batch_size"] == 2 * 4 * 16 == plan.batch
    assert cfg["train_micro_batch_size_per_gpu"] == 2 and cfg["gradient_accumulation_steps"] == 4
    z = cfg["zero_optimization"]
    assert z["stage"] == zero and z["overlap_comm"] and z["contiguous_gradients"]
    assert z["reduce_bucket_size"] == H * H
    stage3 = {k for k in z if k.startswith("stage3_")}
    assert bool(stage3) == (zero == 3)
    assert ("allgather_bucket_size" in z) == (zero < 3)
    if zero == 3:
        assert z["stage3_prefetch_bucket_size"] == int(0.9 * H * H)
        assert z["stage3_param_persistence_threshold"] == 10 * H


def test_precision_and_offload():
    fp16 = deepspeed_config("llama-7b", Plan(dp=8, zero=3, dtype="fp16", offload="optimizer+params"))
    assert fp16["fp16"]["enabled"] and "bf16" not in fp16
    assert fp16["zero_optimization"]["offload_optimizer"]["device"] == "cpu"
    assert fp16["zero_optimization"]["offload_param"]["device"] == "cpu"
    plain = deepspeed_config("llama-7b", Plan(dp=8, zero=2))
    assert plain["bf16"] == {"enabled": True} and "offload_optimizer" not in plain["zero_optimization"]


def test_every_field_is_explained_and_the_diff_shows_only_differences():
    for zero in (2, 3):
        cfg = deepspeed_config("llama-7b", Plan(dp=8, zero=zero, offload="optimizer"))
        rows = explain(cfg)
        assert [r[0] for r in rows] == list(flatten(cfg)) and all(r[2] == FIELDS[r[0]] for r in rows)
    diff = compare("llama-7b", {"2": Plan(dp=8, zero=2), "3": Plan(dp=8, zero=3)})
    assert ["zero_optimization.stage", "2", "3"] in diff
    assert all(r[1] != r[2] for r in diff) and not any(r[0] == "train_batch_size" for r in diff)
    with pytest.raises(ValueError, match="no explanation"):
        explain({"zero_optimization": {"stage": 2, "made_up": 1}})


@pytest.mark.parametrize("plan, match", [
    (Plan(dp=4, tp=2, zero=2), "tp and pp must be 1"),
    (Plan(dp=8, zero=2, dtype="fp32"), "bf16 or fp16"),
])
def test_plans_deepspeed_cannot_express_are_refused(plan, match):
    with pytest.raises(ValueError, match=match):
        deepspeed_config("llama-7b", plan)
    with pytest.raises(TypeError, match="plan must be a Plan"):
        deepspeed_config("llama-7b", {"zero": 2})


def test_hostfile_with_ips_passes_and_an_unresolved_name_is_named():
    from parlab.deepspeed_config import check_hostfile, hostfile

    text = hostfile({"10.0.0.1": 8, "gpu-node-2": 8})
    assert text == "10.0.0.1 slots=8\ngpu-node-2 slots=8\n"
    known = {"gpu-node-2": "10.0.0.2"}  # this machine's /etc/hosts

    def resolve(host):
        if host not in known:
            raise OSError(f"unknown host {host}")
        return known[host]

    here = check_hostfile(text, resolve)
    assert [(h.host, h.is_ip, h.resolved) for h in here] == [("10.0.0.1", True, "10.0.0.1"),
                                                              ("gpu-node-2", False, "10.0.0.2")]
    known.clear()  # the other node's /etc/hosts lacks the name: the guide's "host not found"
    there = check_hostfile(text + "# a comment\n", resolve)
    assert there[0].ok and not there[1].ok and "unknown host gpu-node-2" in there[1].error
    with pytest.raises(ValueError, match="slots="):
        check_hostfile("10.0.0.1 8", resolve)
    with pytest.raises(ValueError, match="positive integer"):
        hostfile({"10.0.0.1": 0})


def test_deepspeed_env_writes_the_nccl_variables_of_guide_4_5():
    from parlab.deepspeed_config import NCCL_VARS, deepspeed_env

    env = {"NCCL_IB_DISABLE": 1, "NCCL_DEBUG": "INFO", "NCCL_SOCKET_IFNAME": "eth0", "NCCL_P2P_DISABLE": 1}
    assert deepspeed_env(env).splitlines() == ["NCCL_IB_DISABLE=1", "NCCL_DEBUG=INFO", "NCCL_SOCKET_IFNAME=eth0",
                                               "NCCL_P2P_DISABLE=1"]
    assert set(env) == set(NCCL_VARS)
    with pytest.raises(ValueError, match="upper-case identifier"):
        deepspeed_env({"nccl debug": "INFO"})
