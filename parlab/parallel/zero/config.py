"""The rules of a ZeRO configuration (``ZeroDataParallel``'s stage, working precision and offload),
checked before any rank builds anything; the stages are Rajbhandari et al. 2020's (Section 5), the
offload modes ZeRO-Offload's (Ren et al. 2021) and ZeRO-Infinity's (Rajbhandari et al. 2021).
"""

from __future__ import annotations

import torch

STAGES = (0, 1, 2, 3)
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
OFFLOADS = (None, "optimizer", "optimizer+params")
FP16_INIT_SCALE = 2.0**15  # not GradScaler's 2^16: the loss is fp16 here, and 2^16 > 65504 is inf


def check_zero_args(stage: object, dtype: object, offload: object) -> None:
    """The rules of a ZeRO configuration, each a ValueError naming the rule and the value."""
    if isinstance(stage, bool) or stage not in STAGES:
        raise ValueError(f"ZeRO stage must be one of 0, 1, 2, 3, got {stage!r}")
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)} (the working weights' precision), "
                         f"got {dtype!r}")
    if offload not in OFFLOADS:
        raise ValueError(f"offload must be None, 'optimizer' or 'optimizer+params', got {offload!r}")
    if offload == "optimizer" and stage < 1:
        raise ValueError(f"offload='optimizer' needs ZeRO stage >= 1 (only a sharded optimizer state "
                         f"is offloaded, as in ZeRO-Offload), got stage={stage}")
    if offload == "optimizer+params" and stage != 3:
        raise ValueError(f"offload='optimizer+params' needs ZeRO stage 3 (only sharded parameters can "
                         f"live on the host), got stage={stage}")
