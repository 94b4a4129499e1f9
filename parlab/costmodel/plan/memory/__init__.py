"""Memory of one GPU under a plan: model states sharded by TP, PP and ZeRO, and the activations a
pipeline stage holds (Korthikanti et al. 2022), for the first and the last stage.

    params.py        parameters one GPU holds under TP and PP (Megatron-LM's split), before ZeRO
    zero.py          ZeRO's sharding of model states, and what ZeRO-3 holds gathered at its peak
    activations.py   the activations a stage keeps: micro-batches in flight x bytes per layer
    stage.py         StageMemory: one GPU of the first or last stage, every term, offload
    zero_compare.py  when ZeRO-3 holds more weight memory than ZeRO-2
"""

from parlab.costmodel.plan.memory.activations import (
    StageActivations,
    in_flight_microbatches,
    stage_activations,
)
from parlab.costmodel.plan.memory.stage import StageMemory, fp32_gradient_copy, stage_memory
from parlab.costmodel.plan.memory.zero import (
    DEEPSPEED_STAGE3,
    DeepSpeedStage3,
    zero3_gathered_params,
    zero3_units,
    zero_model_states,
)
from parlab.costmodel.plan.memory.zero_compare import Zero3VsZero2, zero3_vs_zero2
from parlab.costmodel.pricing.params import layer_params_per_gpu, stage_layers, stage_params

__all__ = [
    "StageActivations", "in_flight_microbatches", "stage_activations", "layer_params_per_gpu",
    "stage_layers", "stage_params", "StageMemory", "fp32_gradient_copy", "stage_memory",
    "DEEPSPEED_STAGE3", "DeepSpeedStage3", "zero3_gathered_params", "zero3_units",
    "zero_model_states", "Zero3VsZero2", "zero3_vs_zero2",
]
