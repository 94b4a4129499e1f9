"""Mixed precision from scratch on TinyGPT: what fp16 and bf16 can hold (``torch.finfo``), fp16's
overflow past 65504 and its underflow of small gradients, a dynamic loss scaler that repairs a run
which underflows (Micikevicius et al. 2018, "Mixed Precision Training", Sec. 3.2), held against
``torch.amp.GradScaler``, and the memory 16-bit weights and activations save, measured.

    float_format(torch.float16).max                    # 65504.0
    run = train_mixed(GPTConfig(), steps=8, dtype=torch.float16, scaler=DynamicLossScaler())
    run.losses, run.scales, run.skipped

    formats.py       what a dtype holds: range, precision, round trips, values flushed to zero;
                     a model's float inputs cast to its 16-bit working dtype (cast_floating)
    loss_scaling.py  DynamicLossScaler, and its scale history against GradScaler's
    training.py      train_mixed (fp32 master + 16-bit working copy), train_autocast (torch's)
    memory.py        the weight and activation bytes of TinyGPT in one dtype, measured
"""

from .formats import (
    DTYPES,
    GUIDE_FP16_MAX,
    FloatFormat,
    cast_floating,
    float_format,
    largest_from_bits,
    round_trip,
    underflow_fraction,
    zero_fraction,
)
from .loss_scaling import DynamicLossScaler, scale_history, torch_scale_history
from .memory import PrecisionMemory, precision_memory
from .training import MixedRun, train_autocast, train_mixed

__all__ = [
    "DTYPES", "GUIDE_FP16_MAX", "FloatFormat", "cast_floating", "float_format", "largest_from_bits", "round_trip",
    "underflow_fraction", "zero_fraction", "DynamicLossScaler", "scale_history",
    "torch_scale_history", "PrecisionMemory", "precision_memory", "MixedRun", "train_autocast",
    "train_mixed",
]
