"""Tensor parallelism per transformer layer: which collectives run, how many bytes each GPU moves,
and what each GPU stores, for Megatron 1D and Colossal-AI's 2D, 2.5D and 3D (guide 1.7, 1.15).

A layer has four linear layers ``Y = X A`` (QKV h -> 3h, attention output h -> h, MLP in h -> f,
MLP out f -> h); ``n = b s`` tokens. Every collective is a ``Collective`` priced by the same
alpha-beta model as the rest of the cost model. Modes (p GPUs): 1d and 1d-sp, Megatron-LM
(Shoeybi et al. 2019; sequence parallelism, Korthikanti et al. 2022); 2d, Optimus (Xu et al.
2021); 2.5d, Tesseract (Wang et al. 2021); 3d (Bian et al. 2021).

    (``pricing.layer_collective``: Collective, one collective call of a layer, and what it sends)
    megatron.py     Megatron 1D (+ SP): the layer's weight matrices and their collectives
    grids.py        the 2D / 2.5D / 3D process grids and the collectives each runs
    colossal.py     Colossal-AI's efficiency table, and its bandwidth column reproduced
    costs.py        LayerCost: one layer's collectives, parameters, activations and FLOPs per GPU
    on_link.py      every mode priced on a link and a GPU (chapter 5's comparison)
"""

from parlab.costmodel.pricing.layer_collective import PHASES, Collective
from parlab.costmodel.pricing.tensor_parallel.colossal import colossal_table, linear_volume
from parlab.costmodel.pricing.tensor_parallel.costs import LayerCost, compare_modes, layer_cost
from parlab.costmodel.pricing.tensor_parallel.grids import (
    LABELS,
    MODES,
    Grid,
    layer_collectives,
    tp_grid,
)
from parlab.costmodel.pricing.tensor_parallel.megatron import (
    layer_matrix_params,
    tp_layer_collectives,
)
from parlab.costmodel.pricing.tensor_parallel.on_link import ModeOnLink, compare_on_link

__all__ = [
    "PHASES", "Collective", "colossal_table", "linear_volume", "LayerCost", "compare_modes",
    "layer_cost", "LABELS", "MODES", "Grid", "layer_collectives", "tp_grid", "layer_matrix_params",
    "tp_layer_collectives", "ModeOnLink", "compare_on_link",
]
