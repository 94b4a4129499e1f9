"""When ZeRO-3 holds more weight memory than ZeRO-2: every 16-bit weight under ZeRO-2 against
ZeRO-3's 1/dp shard plus the units it holds gathered (Rajbhandari et al. 2020; Zhao et al.
2023, Section 3.3), and the dp from which ZeRO-3 pays, P / (P - G)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from parlab.costmodel.plan.memory.zero import zero3_gathered_params
from parlab.costmodel.plan.spec import training_dtype
from parlab.costmodel.pricing.memory import get_precision
from parlab.costmodel.pricing.params import stage_params
from parlab.costmodel.specs._check import positive
from parlab.costmodel.specs.models import ModelSpec


@dataclass(frozen=True)
class Zero3VsZero2:
    """Weight bytes per GPU under ZeRO-2 (every weight, 16-bit) and ZeRO-3 (a 1/dp shard plus the
    gathered units); gradients and optimizer states are sharded alike by both, so the weights
    decide which peak is higher."""

    model: ModelSpec
    dp: int
    tp: int
    params: float  # parameters on one TP rank
    gathered: float  # parameters ZeRO-3 holds gathered (zero3_gathered_params)
    weight_bytes: int  # bytes per 16-bit (or fp32) weight

    @property
    def zero2_weights(self) -> float:
        return self.params * self.weight_bytes

    @property
    def zero3_weights(self) -> float:
        return (self.params / self.dp + self.gathered) * self.weight_bytes

    @property
    def excess(self) -> float:
        """ZeRO-3's weight bytes minus ZeRO-2's (> 0: ZeRO-3's peak is the higher one)."""
        return self.zero3_weights - self.zero2_weights

    @property
    def break_even_dp(self) -> int | None:
        """The smallest dp at which ZeRO-3 holds no more than ZeRO-2: P/dp + G <= P, so
        dp >= P / (P - G); None when the gathered units are the whole model (never)."""
        if self.gathered >= self.params:
            return None
        return max(2, math.ceil(self.params / (self.params - self.gathered) - 1e-12))

    def note(self, width: int | None = None) -> str:
        """Two sentences a chapter can print: which is higher, by how much, and why (wrapped at
        ``width`` characters if given)."""
        if width is not None:
            import textwrap

            return textwrap.fill(self.note(), width, break_on_hyphens=False)
        from parlab.tables import human_bytes, human_count

        share = self.gathered / self.params
        why = (f"ZeRO-3 keeps 1/{self.dp} of the {human_count(self.params)} weights but gathers the unit in "
               f"use and the prefetched next one in full ({human_count(self.gathered)} parameters, "
               f"{share:.0%} of the model)")
        if self.excess <= 0:
            return (f"{self.model.name} at dp={self.dp}: ZeRO-3 holds {human_bytes(-self.excess, 'auto')} less "
                    f"weight memory than ZeRO-2. {why}.")
        fix = (f"it pays from dp={self.break_even_dp}" if self.break_even_dp else
               "with this few layers it never pays")
        return (f"{self.model.name} at dp={self.dp}: ZeRO-3's peak is {human_bytes(self.excess, 'auto')} above "
                f"ZeRO-2's. {why}, more than the {1 - 1 / self.dp:.0%} that sharding saves; {fix}.")


def zero3_vs_zero2(model: ModelSpec, dp: int, tp: int = 1, dtype: str = "bf16", impl: str = "fsdp") -> Zero3VsZero2:
    """ZeRO-3 against ZeRO-2 for ``model`` over ``dp`` ranks (``Zero3VsZero2``): for a deep model
    ZeRO-3 holds far less; for a model of a few layers over few ranks it can hold more."""
    positive("dp", dp, integer=True)
    positive("tp", tp, integer=True)
    precision = get_precision(training_dtype(dtype)[0])
    return Zero3VsZero2(model, dp, tp, stage_params(model, tp, 1, "first"), zero3_gathered_params(model, tp, impl),
                        precision.weight)
