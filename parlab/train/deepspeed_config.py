"""DeepSpeed's files, generated and explained: the ZeRO configuration (the JSON given to
``deepspeed --deepspeed_config``) from a parlab ``Plan`` and model, the multi-node hostfile and
the ``.deepspeed_env`` of NCCL settings (guide 4.2, 4.3, 4.5; the last two in
``parlab.train.deepspeed_launcher``, named here too).

Field names and defaults are those of DeepSpeed's configuration reference
(https://www.deepspeed.ai/docs/config-json/, "ZeRO Optimizations for FP16 Training" and "Batch
Size Related Parameters"). Sizes that DeepSpeed leaves to the user follow the rule of Hugging
Face's integration (transformers ``integrations/deepspeed.py``, the values it puts in for
``"auto"``): ``reduce_bucket_size = h^2``, ``stage3_prefetch_bucket_size = 0.9 h^2``,
``stage3_param_persistence_threshold = 10 h`` for hidden size h. The file configures data
parallelism with ZeRO only (DeepSpeed's pipeline engine and Megatron's tensor parallelism are set
up in code, not here), so a plan with tp or pp > 1 is refused.
"""

from __future__ import annotations

import json
import math
import numbers
from typing import Any

from parlab.costmodel import ModelSpec, Plan, get_model
from parlab.costmodel.plan.memory import DEEPSPEED_STAGE3, DeepSpeedStage3
from parlab.costmodel.specs._check import instance

#: DeepSpeed's documented defaults for the bucket and stage-3 sizes (elements, not bytes); the
#: stage-3 ones are the cost model's (``costmodel.plan_memory.DeepSpeedStage3``).
ALLGATHER_BUCKET_SIZE = 5e8
STAGE3_MAX_LIVE_PARAMETERS = DEEPSPEED_STAGE3.max_live_parameters
STAGE3_MAX_REUSE_DISTANCE = DEEPSPEED_STAGE3.max_reuse_distance

#: dotted field -> what it does, in our words (DeepSpeed config reference, ZeRO section)
FIELDS: dict[str, str] = {
    "train_batch_size": "global batch per optimizer step = micro-batch x accumulation steps x data-parallel "
                        "GPUs; DeepSpeed checks the three agree",
    "train_micro_batch_size_per_gpu": "sequences one GPU runs forward and backward at a time (sets the "
                                      "activation memory)",
    "gradient_accumulation_steps": "micro-batches whose gradients are summed before one optimizer step "
                                   "(communication is paid per step, not per micro-batch, for stage 1)",
    "gradient_clipping": "clip the global gradient norm to this value before the step",
    "bf16.enabled": "bf16 mixed precision: 16-bit weights and gradients, fp32 master weights and Adam "
                    "states; no loss scaling needed",
    "fp16.enabled": "fp16 mixed precision with dynamic loss scaling (for GPUs without bf16, e.g. V100)",
    "fp16.loss_scale": "0 means dynamic loss scaling",
    "fp16.initial_scale_power": "the dynamic loss scale starts at 2^this",
    "zero_optimization.stage": "0 off; 1 shards optimizer states; 2 also gradients; 3 also the weights "
                               "(gathered layer by layer when needed)",
    "zero_optimization.overlap_comm": "run the gradient reduce(-scatter) of a bucket while backward "
                                      "continues (and, in stage 3, prefetch weights during compute); costs "
                                      "extra bucket buffers",
    "zero_optimization.contiguous_gradients": "copy each gradient into one contiguous buffer as it is "
                                              "produced: no fragmentation, faster reduction",
    "zero_optimization.reduce_scatter": "reduce the gradients with reduce-scatter (each rank receives only "
                                        "its shard) instead of all-reduce",
    "zero_optimization.reduce_bucket_size": "elements reduced at a time: larger buckets use the link better, "
                                            "smaller ones start sooner and need less buffer memory",
    "zero_optimization.allgather_partitions": "stage 1/2: after the step, all-gather the updated weight "
                                              "shards (rather than a series of broadcasts)",
    "zero_optimization.allgather_bucket_size": "stage 1/2: elements all-gathered at a time when the updated "
                                               "shards are put back together",
    "zero_optimization.stage3_prefetch_bucket_size": "stage 3: elements of the next layers' weights gathered "
                                                     "ahead of use, so the gather hides behind compute",
    "zero_optimization.stage3_param_persistence_threshold": "stage 3: parameters smaller than this (biases, "
                                                            "norms) stay whole on every GPU instead of being "
                                                            "gathered each time",
    "zero_optimization.stage3_max_live_parameters": "stage 3: at most this many gathered parameters kept on a "
                                                    "GPU at once (caps the memory of prefetching)",
    "zero_optimization.stage3_max_reuse_distance": "stage 3: a gathered parameter reused within this many "
                                                   "parameters is kept rather than released and gathered again",
    "zero_optimization.stage3_gather_16bit_weights_on_model_save": "stage 3: gather the full 16-bit weights "
                                                                    "when saving, so the checkpoint loads "
                                                                    "without DeepSpeed",
    "zero_optimization.offload_optimizer.device": "keep the fp32 master weights and Adam states in CPU memory "
                                                  "and step them there (ZeRO-Offload); 'none' keeps them on GPU",
    "zero_optimization.offload_optimizer.pin_memory": "page-locked host memory: faster GPU<->CPU copies",
    "zero_optimization.offload_param.device": "stage 3 only: keep the weights themselves in CPU memory "
                                              "(ZeRO-Infinity)",
    "zero_optimization.offload_param.pin_memory": "page-locked host memory for the offloaded weights",
}


def deepspeed_config(model: str | ModelSpec, plan: Plan, *, gradient_clipping: float = 1.0) -> dict[str, Any]:
    """The DeepSpeed JSON config (as a dict) for ``plan`` (data parallel, ZeRO stage ``plan.zero``,
    ``plan.micro_batch`` x ``plan.m`` micro-batches, dtype, offload) of ``model``."""
    instance("plan", plan, Plan, "Plan(dp=8, zero=2, micro_batch=4)")
    _clipping(gradient_clipping)
    m = get_model(model)
    if plan.tp > 1 or plan.pp > 1:
        raise ValueError(f"a DeepSpeed ZeRO config describes data parallelism only: tp and pp must be 1, "
                         f"got tp={plan.tp}, pp={plan.pp}")
    if plan.dtype not in ("bf16", "fp16"):
        raise ValueError(f"DeepSpeed ZeRO trains in mixed precision here: dtype must be bf16 or fp16, "
                         f"got {plan.dtype!r}")
    h = m.hidden
    zero: dict[str, Any] = {"stage": plan.zero, "overlap_comm": True, "contiguous_gradients": True,
                            "reduce_bucket_size": h * h}
    if plan.zero in (1, 2):
        zero.update({"reduce_scatter": True, "allgather_partitions": True,
                     "allgather_bucket_size": int(ALLGATHER_BUCKET_SIZE)})
    if plan.zero == 3:
        stage3 = DeepSpeedStage3.for_model(m).config()  # the values the cost model prices (Plan.zero3_impl)
        zero.update({k: stage3[k] for k in ("stage3_prefetch_bucket_size", "stage3_param_persistence_threshold",
                                            "stage3_max_live_parameters", "stage3_max_reuse_distance")})
        zero["stage3_gather_16bit_weights_on_model_save"] = True
    if plan.offload != "none" and plan.zero > 0:
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
    if plan.offload == "optimizer+params":
        zero["offload_param"] = {"device": "cpu", "pin_memory": True}
    config: dict[str, Any] = {
        "train_batch_size": plan.micro_batch * plan.m * plan.dp,
        "train_micro_batch_size_per_gpu": plan.micro_batch,
        "gradient_accumulation_steps": plan.m,
        "gradient_clipping": float(gradient_clipping),
    }
    if plan.dtype == "bf16":
        config["bf16"] = {"enabled": True}
    else:
        config["fp16"] = {"enabled": True, "loss_scale": 0, "initial_scale_power": 16}
    config["zero_optimization"] = zero
    return config


def _clipping(value) -> None:
    """DeepSpeed's ``gradient_clipping``: a finite number >= 0 (0 turns clipping off)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"gradient_clipping must be a number >= 0 (0 turns clipping off), got {value!r} "
                        f"({type(value).__name__})")
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"gradient_clipping must be a finite number >= 0 (0 turns clipping off), got {value!r}")


def _config(config) -> dict[str, Any]:
    if not isinstance(config, dict):
        raise TypeError(f"config must be a dict (what deepspeed_config returns), got {type(config).__name__}")
    return config


def _json(name: str, value) -> str:
    """``value`` as standard JSON: NaN and Infinity, which Python's json writes and strict readers
    refuse, are an error naming the field."""
    try:
        return json.dumps(value, allow_nan=False)
    except ValueError:
        raise ValueError(f"DeepSpeed config field {name!r} must be a finite number, got {value!r} "
                         "(JSON has no NaN or Infinity)") from None


def to_json(config: dict[str, Any]) -> str:
    """The config as the JSON file DeepSpeed reads (two-space indent); standard JSON only."""
    for name, value in flatten(config).items():
        _json(name, value)
    return json.dumps(config, indent=2, allow_nan=False)


def flatten(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Dotted field names -> values (``{"bf16": {"enabled": True}}`` -> ``{"bf16.enabled": True}``)."""
    out: dict[str, Any] = {}
    for key, value in _config(config).items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, name + "."))
        else:
            out[name] = value
    return out


def explain(config: dict[str, Any]) -> list[list[Any]]:
    """Rows (field, value, what it does) for every field of ``config``; a field this module does not
    document is an error (so a generated config never carries an unexplained field)."""
    rows = []
    for name, value in flatten(config).items():
        if name not in FIELDS:
            raise ValueError(f"no explanation for DeepSpeed config field {name!r}")
        rows.append([name, _json(name, value), FIELDS[name]])
    return rows


def compare(model: str | ModelSpec, plans: dict[str, Plan]) -> list[list[Any]]:
    """Rows (field, value under each plan): the fields where the configs differ, for a side-by-side table."""
    if not isinstance(plans, dict):
        raise TypeError(f"plans must be a dict {{label: Plan}}, got {type(plans).__name__}")
    flat = {label: flatten(deepspeed_config(model, p)) for label, p in plans.items()}
    names = list(dict.fromkeys(n for f in flat.values() for n in f))
    rows = []
    for n in names:
        values = [json.dumps(f[n]) if n in f else "-" for f in flat.values()]
        if len(set(values)) > 1:
            rows.append([n, *values])
    return rows


# the launcher's files (hostfile, .deepspeed_env) live in deepspeed_launcher; named here too
from parlab.train.deepspeed_launcher import (  # noqa: E402
    NCCL_VARS,
    HostCheck,
    check_hostfile,
    deepspeed_env,
    hostfile,
)

__all__ = ["ALLGATHER_BUCKET_SIZE", "FIELDS", "NCCL_VARS", "STAGE3_MAX_LIVE_PARAMETERS",
           "STAGE3_MAX_REUSE_DISTANCE", "HostCheck", "check_hostfile", "compare", "deepspeed_config",
           "deepspeed_env", "explain", "flatten", "hostfile", "to_json"]
