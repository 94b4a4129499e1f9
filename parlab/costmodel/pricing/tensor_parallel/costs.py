"""Everything about one transformer layer on one micro-batch under a tensor-parallel mode: its
collectives (``grids.layer_collectives``), the parameters and activations each GPU keeps
(Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models",
Table 2 and Section 4.1; Colossal-AI's layer splits), its matmul FLOPs per GPU (Narayanan et al.
2021), and the seconds its collectives take on a link (the alpha-beta model of ``alphabeta`` and
``collectives``)."""

from __future__ import annotations

from dataclasses import dataclass

from parlab.costmodel.pricing import alphabeta
from parlab.costmodel.pricing.collectives import OPS as PRICED_OPS
from parlab.costmodel.pricing.collectives import collective_time
from parlab.costmodel.pricing.layer_collective import Collective, sent_elements
from parlab.costmodel.pricing.layer_flops import layer_forward_flops
from parlab.costmodel.pricing.memory import RECOMPUTE, activation_bytes_per_layer
from parlab.costmodel.pricing.params import layer_params_per_gpu
from parlab.costmodel.pricing.tensor_parallel.grids import MODES, Grid, layer_collectives, tp_grid
from parlab.costmodel.pricing.tensor_parallel.megatron import layer_matrix_params
from parlab.costmodel.specs._check import canonical, positive
from parlab.costmodel.specs.catalogue import get_model
from parlab.costmodel.specs.models import ModelSpec


def _activations(grid: Grid, model: ModelSpec, micro_batch: int, recompute: str) -> float:
    """Activation bytes one GPU keeps per layer and micro-batch (16-bit, Korthikanti et al. 2022).

    1D: Table 2 (``activation_bytes_per_layer``). 2D and 2.5D: every tensor is split over all p
    GPUs (X blocks are (n/q, h/q); attention splits batch and heads), so the unsplit s b h (34 +
    5 a s / h) over p, as the Colossal-AI table's 1/q^2 and 1/(d q^2). 3D: a linear layer keeps its
    all-gathered input X_il, q times its shard (_Linear3D saves it), so the four linear inputs
    (2 + 2 + 2 + 8 of the 34 s b h, Korthikanti et al. Section 4.1) count 1/q^2, the rest 1/q^3.
    """
    if grid.mode in ("1d", "1d-sp"):
        return activation_bytes_per_layer(model, micro_batch, grid.p, grid.mode == "1d-sp", recompute)
    full = activation_bytes_per_layer(model, micro_batch, 1, False, recompute)
    if recompute == "full" or grid.mode != "3d":
        return full / grid.p
    sbh = model.seq_len * micro_batch * model.hidden
    inputs = 14 * sbh  # the inputs of QKV, attention out, MLP in, MLP out (bytes)
    return inputs / grid.q**2 + (full - inputs) / grid.q**3


def _params(grid: Grid, model: ModelSpec) -> float:
    """Parameters of one layer one GPU stores. 1D: ``layer_params_per_gpu`` (Megatron's split).
    2D, 2.5D: matrices / q^2 (2.5D keeps a copy per depth layer), 3D: matrices / q^3; biases and
    LayerNorm vectors split q ways along the hidden dimension (Colossal-AI's layers)."""
    if grid.mode in ("1d", "1d-sp"):
        return layer_params_per_gpu(model, grid.p)
    mats = layer_matrix_params(model)
    vectors = model.params_per_layer() - mats
    split = grid.q**3 if grid.mode == "3d" else grid.q**2
    return mats / split + vectors / grid.q


@dataclass(frozen=True)
class LayerCost:
    """One transformer layer on one micro-batch under a mode: collectives, what each GPU sends,
    stores and computes (``layer_cost``)."""

    mode: str
    grid: Grid
    model: ModelSpec
    micro_batch: int
    bytes_per_element: int
    collectives: tuple[Collective, ...]
    params: float  # parameters stored per GPU
    activations: float  # bytes kept for the backward per GPU
    flops: float  # forward + backward matmul FLOPs per GPU

    def _per_mb(self):
        return [c for c in self.collectives if c.phase != "step"]

    @property
    def calls(self) -> int:
        """Collective calls per micro-batch (once-per-step ones excluded)."""
        return sum(c.count for c in self._per_mb())

    @property
    def steps(self) -> float:
        """Message steps in sequence (ring; the latency term's count) per micro-batch."""
        return sum(c.count * alphabeta.shape(c.op, "ring", c.ranks, 1.0)[0] for c in self._per_mb())

    @property
    def volume(self) -> float:
        """Bytes each GPU sends on the critical path per micro-batch (ring / pipelined chain)."""
        return self.bytes_per_element * sum(sent_elements(c) for c in self._per_mb())

    @property
    def step_volume(self) -> float:
        """Bytes per GPU of the once-per-step collectives (2.5D's depth all-reduce of dA)."""
        return self.bytes_per_element * sum(sent_elements(c) for c in self.collectives if c.phase == "step")

    def comm_seconds(self, bandwidth: float, latency: float) -> float:
        """Seconds of the micro-batch's collectives on a link (bytes/s one way, seconds per
        message): all-reduce, all-gather, reduce-scatter and broadcast as ``collective_time``
        prices them (the faster of ring and tree for all-reduce, as step_time does), reduce as a
        pipelined chain (``alphabeta``)."""
        total = 0.0
        for c in self._per_mb():
            nbytes = c.elements * self.bytes_per_element
            if c.op in PRICED_OPS:
                t = collective_time(c.op, nbytes, c.ranks, bandwidth, latency)
            else:
                t = alphabeta.time(c.op, "ring", c.ranks, nbytes, latency, bandwidth).seconds
            total += c.count * t
        return total

    def compute_seconds(self, peak_flops: float, efficiency: float) -> float:
        return self.flops / (peak_flops * efficiency)


def layer_cost(mode: str, model: ModelSpec | str, micro_batch: int = 1, p: int = 8, depth: int = 1,
               recompute: str = "none", bytes_per_element: int = 2) -> LayerCost:
    """Everything about one transformer layer under ``mode`` on ``p`` GPUs (``grids``): its
    collectives, parameters and activations per GPU, and its forward + backward matmul
    FLOPs per GPU (3 x ``layer_forward_flops`` / p: every mode splits the work p ways)."""
    model, grid = get_model(model), tp_grid(mode, p, depth)
    recompute = canonical("recompute", recompute, RECOMPUTE)
    positive("bytes_per_element", bytes_per_element, integer=True)
    cs = layer_collectives(mode, model, micro_batch, p, depth, recompute)
    flops = (4 if recompute == "full" else 3) * layer_forward_flops(model, micro_batch, p)
    return LayerCost(grid.mode, grid, model, micro_batch, bytes_per_element, cs, _params(grid, model),
                     _activations(grid, model, micro_batch, recompute), flops)


def compare_modes(model: ModelSpec | str, micro_batch: int, p: int, depth: int = 1,
                  recompute: str = "none") -> dict[str, LayerCost | str]:
    """``layer_cost`` of every mode on p GPUs, or the reason it does not fit (the ValueError's
    message), keyed by mode."""
    model = get_model(model)
    for name, v in (("micro_batch", micro_batch), ("p (GPUs in the tensor-parallel group)", p),
                    ("depth", depth)):
        positive(name, v, integer=True)
    recompute = canonical("recompute", recompute, RECOMPUTE)
    out: dict[str, LayerCost | str] = {}
    for mode in MODES:  # the arguments are valid: a ValueError now says the grid does not fit
        try:
            out[mode] = layer_cost(mode, model, micro_batch, p, depth, recompute)
        except ValueError as err:
            out[mode] = str(err)
    return out
