"""The interview guide's numeric claims, held as data so chapters can set them beside parlab's
computation instead of typing them into prose.

Each claim cites its guide section; ``check(key, computed)`` says whether the computation agrees.
"""

from __future__ import annotations

from dataclasses import dataclass

from parlab.tables import table


@dataclass(frozen=True)
class Claim:
    section: str
    what: str
    value: float
    unit: str


CLAIMS: dict[str, Claim] = {
    "gpt3-weights-fp32": Claim("1.1", "GPT-3 175B weights in fp32", 700e9, "bytes"),
    "gpt3-grads-fp32": Claim("1.1", "GPT-3 175B gradients in fp32", 700e9, "bytes"),
    "gpt3-adam-fp32": Claim("1.1", "GPT-3 175B Adam states in fp32", 1400e9, "bytes"),
    "gpt3-states-fp32": Claim("1.1", "GPT-3 175B model states in fp32", 2.8e12, "bytes"),
    "gpt3-years-a100": Claim("1.1", "years to train GPT-3 175B on one A100", 288, "years"),
    "finetune-bytes-per-param": Claim("1.10", "GPU memory to fine-tune an nB model (20n GB)", 20, "bytes/param"),
    "80gb-fp16-params": Claim("1.14", "largest model whose fp16 weights fit 80 GB", 40e9, "params"),
    "80gb-train-params": Claim("1.14", "largest model trainable on 80 GB", 5e9, "params"),
    "65b-zero3-bytes": Claim("1.19", "ZeRO-3 traffic per GPU per step, 65B model", 195e9, "bytes"),
    "65b-zero3-seconds": Claim("1.19", "ZeRO-3 communication per step on 10 GbE, 65B", 156, "s"),
    "fp16-max": Claim("1.21", "largest fp16 value before it overflows to inf", 65506, ""),
}


@dataclass(frozen=True)
class ClaimCheck:
    """A claim beside parlab's value. ``model`` says the value is a cost-model prediction: then it
    agrees within the model's validated error band (``costmodel.validation.STEP_TIME_BAND``),
    and the verdict shows that band beside the margin."""

    claim: Claim
    computed: float
    rtol: float
    model: bool = False

    @property
    def ratio(self) -> float:
        return self.computed / self.claim.value

    @property
    def agrees(self) -> bool:
        return abs(self.ratio - 1) <= self.rtol

    def verdict(self) -> str:
        if not self.model:
            return "agrees" if self.agrees else f"off by x{self.ratio:.2f}"
        where = f"model's ±{self.rtol:.0%}"
        return (f"tie: x{self.ratio:.2f}, in {where}" if self.agrees
                else f"x{self.ratio:.2f}, beyond {where}")


def check(key: str, computed: float, rtol: float = 0.05, *, model: bool = False) -> ClaimCheck:
    """Set a computed value beside the guide's claim ``key`` (agrees within ``rtol``). With
    ``model=True`` the value is a cost-model prediction and the tolerance is the model's
    validated band (``rtol`` is then ignored)."""
    if key not in CLAIMS:
        raise ValueError(f"unknown guide claim {key!r}; known: {', '.join(CLAIMS)}")
    if model:
        from parlab.costmodel.specs.bands import STEP_TIME_BAND

        rtol = STEP_TIME_BAND
    return ClaimCheck(CLAIMS[key], float(computed), rtol, model)


def _fmt(v: float, unit: str) -> str:
    if unit == "bytes":
        return f"{v / 1e9:,.0f} GB"
    if unit == "params":
        return f"{v / 1e9:,.1f}B"
    return f"{v:,.3g} {unit}"


def claims_table(checks: list[ClaimCheck]) -> str:
    """A text table: section, claim, the guide's value, parlab's value, and a verdict."""
    rows = [[c.claim.section, c.claim.what, _fmt(c.claim.value, c.claim.unit),
             _fmt(c.computed, c.claim.unit), c.verdict()]
            for c in checks]
    return table(rows, ["guide", "claim", "guide says", "parlab computes", "verdict"], "lllll")
