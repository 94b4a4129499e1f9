"""The process grids of 2D, 2.5D and 3D tensor parallelism (Colossal-AI's) and the collectives
one transformer layer runs on each; ``layer_collectives`` answers for every mode (1d and 1d-sp
are Megatron's, ``megatron.tp_layer_collectives``). p GPUs:

2d    Optimus (Xu et al. 2021, "An Efficient 2D Method for Training Super-Large Deep Learning
      Models", arXiv 2104.05343): a q x q grid, p = q^2; X and A both split in q x q blocks; SUMMA
      (van de Geijn & Watts 1997) in q steps, each broadcasting an X block along its grid row and
      an A block along its grid column; the backward runs SUMMA for dX = dY A^T (broadcast A,
      reduce dX along the row) and dA = X^T dY (broadcast X, reduce dA along the column).
2.5d  Tesseract (Wang et al. 2021, "2.5-dimensional distributed model training", arXiv
      2105.14500): p = d q^2, d layers of the 2D grid; X split in d q x q blocks, A in q x q blocks
      copied on each layer; each layer runs 2D's SUMMA on its n/d tokens; the d copies of dA
      must be summed once per step (an all-reduce over the depth, like a data-parallel gradient).
3d    Bian et al. 2021, "Maximizing Parallelism in Distributed Training for Huge Neural
      Networks" (arXiv 2105.14450): a q x q x q cube, p = q^3; rank (i, j, l) holds X_ijl and
      A_lji; forward all-gathers X over (i, *, l) and A over (*, j, l), multiplies, and
      reduce-scatters Y over (i, j, *); backward all-gathers dY and reduce-scatters dX and dA.

The collectives are those Colossal-AI's implementation runs (colossalai/legacy/nn/layer/
parallel_{2d,2p5d,3d}/_operation.py: Matmul_AB/ABT/ATB_2D and _2p5D, _Linear3D). The small
collectives of the distributed LayerNorm and bias gradients (O(n h / q) elements) are not counted.
Attention needs whole heads and whole sequences: 2D and 2.5D split the batch over the grid rows
(q, resp. d q, must divide b) and the heads over the columns; 3D splits the batch q^2 ways.
"""

from __future__ import annotations

from dataclasses import dataclass

from parlab.costmodel.pricing.layer_collective import Collective
from parlab.costmodel.pricing.tensor_parallel.megatron import layer_linears, tp_layer_collectives
from parlab.costmodel.specs._check import canonical, positive
from parlab.costmodel.specs.catalogue import get_model
from parlab.costmodel.specs.models import ModelSpec

MODES = ("1d", "1d-sp", "2d", "2.5d", "3d")
LABELS = {"1d": "Megatron 1D", "1d-sp": "Megatron 1D + SP", "2d": "2D (Optimus, SUMMA)",
          "2.5d": "2.5D (Tesseract)", "3d": "3D"}


@dataclass(frozen=True)
class Grid:
    """The process grid of a mode: p GPUs as ``dims`` (q, q for 2D; d, q, q for 2.5D; q, q, q)."""

    mode: str
    p: int
    q: int
    d: int
    dims: tuple[int, ...]

    @property
    def shape(self) -> str:
        return " x ".join(map(str, self.dims))


def _root(p: int, k: int) -> int | None:
    r = round(p ** (1 / k))
    return next((c for c in (r - 1, r, r + 1) if c > 0 and c**k == p), None)


def tp_grid(mode: str, p: int, depth: int = 1) -> Grid:
    """The grid of ``mode`` on ``p`` GPUs (``depth`` = d for 2.5D); ValueError if p does not fit."""
    mode = canonical("mode", mode, MODES)
    positive("p (GPUs in the tensor-parallel group)", p, integer=True)
    positive("depth", depth, integer=True)
    if mode in ("1d", "1d-sp"):
        return Grid(mode, p, p, 1, (p,))
    if mode == "2d":
        q = _root(p, 2)
        if q is None:
            raise ValueError(f"2D tensor parallelism needs a q x q grid: p={p} is not a square")
        return Grid(mode, p, q, 1, (q, q))
    if mode == "2.5d":
        q = _root(p // depth, 2) if p % depth == 0 else None
        if q is None:
            raise ValueError(f"2.5D tensor parallelism needs p = d q^2: p={p}, depth d={depth} "
                             f"leaves p/d={p / depth:g}, not a square")
        return Grid(mode, p, q, depth, (depth, q, q))
    q = _root(p, 3)
    if q is None:
        raise ValueError(f"3D tensor parallelism needs a q x q x q cube: p={p} is not a cube")
    return Grid(mode, p, q, 1, (q, q, q))


def summa(n: int, k: int, m: int, q: int, name: str) -> list[Collective]:
    """One linear layer by SUMMA on a q x q grid, n rows of X per grid layer (Xu et al. 2021;
    Colossal-AI's Matmul_AB_2D forward, Matmul_ABT_2D and Matmul_ATB_2D backward)."""
    x, a = n * k / q**2, k * m / q**2  # an X block (n/q, k/q), an A block (k/q, m/q)
    return [Collective("forward", "broadcast", q, x, q, f"{name}: X blocks along grid rows"),
            Collective("forward", "broadcast", q, a, q, f"{name}: A blocks along grid columns"),
            Collective("backward", "broadcast", q, a, q, f"{name}: A blocks for dX = dY A^T"),
            Collective("backward", "reduce", q, x, q, f"{name}: dX blocks along grid rows"),
            Collective("backward", "broadcast", q, x, q, f"{name}: X blocks for dA = X^T dY"),
            Collective("backward", "reduce", q, a, q, f"{name}: dA blocks along grid columns")]


def cube(n: int, k: int, m: int, q: int, name: str) -> list[Collective]:
    """One linear layer on a q x q x q cube (Bian et al. 2021; Colossal-AI's _Linear3D)."""
    x, a, y = n * k / q**2, k * m / q**2, n * m / q**2  # X_il, A_lj, Y_ij: gathered / reduced
    return [Collective("forward", "all_gather", 1, x, q, f"{name}: X over (i, *, l)"),
            Collective("forward", "all_gather", 1, a, q, f"{name}: A over (*, j, l)"),
            Collective("forward", "reduce_scatter", 1, y, q, f"{name}: Y over (i, j, *)"),
            Collective("backward", "all_gather", 1, y, q, f"{name}: dY over (i, j, *)"),
            Collective("backward", "reduce_scatter", 1, x, q, f"{name}: dX over (i, *, l)"),
            Collective("backward", "reduce_scatter", 1, a, q, f"{name}: dA over (*, j, l)")]


def _check_batch(grid: Grid, model: ModelSpec, micro_batch: int) -> None:
    rows = {"2d": grid.q, "2.5d": grid.d * grid.q, "3d": grid.q**2}.get(grid.mode)
    if rows and micro_batch % rows:
        raise ValueError(f"{LABELS[grid.mode]} on a {grid.shape} grid splits the micro-batch "
                         f"{rows} ways: micro_batch={micro_batch} must be divisible by {rows}")
    if model.heads % grid.q or model.hidden % grid.q:
        raise ValueError(f"{LABELS[grid.mode]} splits heads and hidden size {grid.q} ways: "
                         f"heads={model.heads}, hidden={model.hidden} must be divisible by {grid.q}")


def layer_collectives(mode: str, model: ModelSpec | str, micro_batch: int, p: int, depth: int = 1,
                      recompute: str = "none") -> tuple[Collective, ...]:
    """The collectives of one transformer layer on one micro-batch under ``mode`` (module
    docstring); 1d and 1d-sp are ``tp_layer_collectives``."""
    model, grid = get_model(model), tp_grid(mode, p, depth)
    positive("micro_batch", micro_batch, integer=True)
    if grid.mode in ("1d", "1d-sp"):
        return tp_layer_collectives(micro_batch, model.seq_len, model.hidden, p,
                                    grid.mode == "1d-sp", recompute)
    _check_batch(grid, model, micro_batch)
    n = micro_batch * model.seq_len
    out: list[Collective] = []
    for name, k, m in layer_linears(model):
        if grid.mode == "3d":
            out += cube(n, k, m, grid.q, name)
        else:
            out += summa(n // grid.d, k, m, grid.q, name)
            if grid.d > 1:
                out.append(Collective("step", "all_reduce", 1, k * m / grid.q**2, grid.d,
                                      f"{name}: dA summed over the {grid.d} depth layers"))
    return tuple(out)
