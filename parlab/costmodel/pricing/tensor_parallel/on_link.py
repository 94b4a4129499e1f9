"""Every tensor-parallel mode's layer priced on a link and a GPU: seconds of communication (the
alpha-beta model) and of matmuls (peak FLOP/s x the assumed matmul efficiency) per layer and
micro-batch, and memory per GPU for all layers (model states at ZeRO's bytes per parameter,
Rajbhandari et al. 2020, Sec. 3.1, plus the activations of Korthikanti et al. 2022)."""

from __future__ import annotations

from dataclasses import dataclass

from parlab.costmodel.pricing.tensor_parallel.costs import LayerCost, compare_modes
from parlab.costmodel.pricing.tensor_parallel.grids import LABELS
from parlab.costmodel.specs.catalogue import get_model
from parlab.costmodel.specs.models import ModelSpec


@dataclass(frozen=True)
class ModeOnLink:
    """One mode's layer on a link and a GPU: seconds of communication and of matmuls per layer
    and micro-batch, and memory per GPU for all ``layers`` (model states at ``bytes_per_param``,
    activations of one micro-batch); ``reason`` instead when the grid does not fit."""

    mode: str
    label: str
    cost: LayerCost | None
    reason: str
    comm_s: float = 0.0
    compute_s: float = 0.0
    states_bytes: float = 0.0
    activation_bytes: float = 0.0

    @property
    def busy(self) -> float:
        """The fraction of the layer's time spent computing (communication not overlapped)."""
        total = self.comm_s + self.compute_s
        return self.compute_s / total if total else 0.0


def compare_on_link(model: ModelSpec | str, micro_batch: int, p: int, link, gpu="a100-80gb",
                    depth: int = 1, assumptions=None, dtype: str = "mixed",
                    optimizer: str = "adam") -> list[ModeOnLink]:
    """Every mode of ``compare_modes`` priced on ``link`` (a LinkSpec or preset name: achievable
    bandwidth and latency) with matmuls at ``gpu``'s half-precision peak x the assumed matmul
    efficiency, and memory per GPU: l x (parameters x bytes per parameter of ``dtype`` and
    ``optimizer``, 16 for mixed precision with Adam) + l x activations."""
    from parlab.costmodel.pricing.memory import bytes_per_param
    from parlab.costmodel.specs.assumptions import DEFAULT
    from parlab.costmodel.specs.hardware import get_gpu
    from parlab.costmodel.specs.links import get_link

    link, gpu, a = get_link(link), get_gpu(gpu), assumptions or DEFAULT
    model = get_model(model)
    per_param = bytes_per_param(dtype, optimizer)
    out = []
    for mode, c in compare_modes(model, micro_batch, p, depth).items():
        if isinstance(c, str):
            out.append(ModeOnLink(mode, LABELS[mode], None, c))
            continue
        out.append(ModeOnLink(mode, LABELS[mode], c, "", c.comm_seconds(link.achievable, link.latency),
                              c.compute_seconds(gpu.peak_flops("half"), a.matmul_efficiency),
                              model.layers * c.params * per_param, model.layers * c.activations))
    return out
