"""The analytic cost model: memory and time of training plans, in plain Python + numpy.

It never imports torch, ipywidgets, matplotlib or the runtime (``parlab.comm``), so widgets and
searches stay instant. Every formula names its source in its docstring.
"""

from .flops import (
    SECONDS_PER_DAY,
    SECONDS_PER_YEAR,
    implied_utilisation,
    megatron_flops_per_iteration,
    train_flops_6nd,
    training_seconds,
)
from .hardware import GB, GPUS, GiB, GPUSpec, get_gpu
from .memory import (
    OPTIMIZERS,
    PRECISIONS,
    RECOMPUTE,
    ModelStateMemory,
    Precision,
    activation_bytes,
    activation_bytes_per_layer,
    bytes_per_param,
    get_precision,
    largest_model,
    model_state_memory,
)
from .models import MODELS, ModelSpec, get_model, gpt_like, megatron_eq2_params, parse_size

__all__ = [
    "GB", "GPUS", "GiB", "MODELS", "OPTIMIZERS", "PRECISIONS", "RECOMPUTE", "SECONDS_PER_DAY",
    "SECONDS_PER_YEAR", "GPUSpec", "ModelSpec", "ModelStateMemory", "Precision",
    "activation_bytes", "activation_bytes_per_layer", "bytes_per_param", "get_gpu", "get_model", "get_precision",
    "gpt_like", "implied_utilisation", "largest_model", "megatron_eq2_params",
    "megatron_flops_per_iteration", "model_state_memory", "parse_size", "train_flops_6nd",
    "training_seconds",
]
