"""Tensor parallelism per transformer layer: which collectives run, how many bytes each GPU moves,
and what each GPU stores, for Megatron 1D and Colossal-AI's 2D, 2.5D and 3D (guide 1.7, 1.15).

A layer has four linear layers ``Y = X A`` (QKV h -> 3h, attention output h -> h, MLP in h -> f,
MLP out f -> h); ``n = b s`` tokens. Every collective is a ``Collective`` in the convention of
``alphabeta.shape`` (``elements`` is the full buffer: the input of an all-reduce, reduce-scatter,
broadcast or reduce, the output of an all-gather), priced by the same alpha-beta model as the rest
of the cost model. Modes (p GPUs):

1d    Megatron-LM (Shoeybi et al. 2019, Section 3, Figure 3): a ring of p; per layer 2 all-reduces
      of n h forward (``g`` after attention and after the MLP) and 2 backward (``f``); with
      sequence parallelism (Korthikanti et al. 2022, Section 4.2.2) an all-gather + a
      reduce-scatter in place of each; full recomputation repeats the 2 forward ones.
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

``colossal_table`` gives the efficiency table of Colossal-AI's documentation
(docs/source/en/features/{1D,2D,2p5D,3D}_tensor_parallel.md, "Efficiency"), per linear layer,
forward and backward, in units of one N x N matrix; ``linear_volume`` reproduces its bandwidth
column from the collectives above when a broadcast or reduce costs (q-1) times the block (the
root sending to each peer in turn), as the table assumes. The model prices NCCL's pipelined
chain instead (the block once per rank), which makes 2D and 2.5D q-1 times cheaper than the table.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import alphabeta
from ._check import boolean, canonical, positive
from .collectives import OPS as PRICED_OPS
from .collectives import collective_time
from .memory import RECOMPUTE, activation_bytes_per_layer
from .models import ModelSpec, get_model
from .plan_memory import layer_params_per_gpu
from .step_time import layer_forward_flops

MODES = ("1d", "1d-sp", "2d", "2.5d", "3d")
LABELS = {"1d": "Megatron 1D", "1d-sp": "Megatron 1D + SP", "2d": "2D (Optimus, SUMMA)",
          "2.5d": "2.5D (Tesseract)", "3d": "3D"}
PHASES = ("forward", "backward", "recompute", "step")


@dataclass(frozen=True)
class Collective:
    """``count`` calls of collective ``op`` on ``elements`` (the full buffer, as in
    ``alphabeta.shape``) among ``ranks`` GPUs, in ``phase`` (forward, backward, recompute; or
    step: once per training step, not per micro-batch), for ``what``."""

    phase: str
    op: str
    count: int
    elements: float
    ranks: int
    what: str = ""


def _layer_linears(model: ModelSpec) -> list[tuple[str, int, int]]:
    """(name, in, out) of a layer's weight matrices (Shoeybi et al. 2019, Section 3; a gated MLP
    has two h -> f matrices, counted as one h -> 2f)."""
    h, f = model.hidden, model.ffn
    n_in = 2 if model.gated_mlp else 1
    return [("QKV", h, 3 * h), ("attention out", h, h), ("MLP in", h, n_in * f), ("MLP out", f, h)]


def layer_matrix_params(model: ModelSpec) -> int:
    """Elements of a layer's weight matrices: 4h^2 + (n+1) h f (QKV 3h^2, output h^2, MLP), 12h^2
    for GPT (Narayanan et al. 2021, Section 5.1); biases and LayerNorms are the rest."""
    return sum(k * m for _, k, m in _layer_linears(model))


def tp_layer_collectives(micro_batch: int, seq_len: int, hidden: int, tp: int,
                         sequence_parallel: bool = False, recompute: str = "none") -> tuple[Collective, ...]:
    """Megatron 1D's collectives of one transformer layer on one micro-batch (Shoeybi et al.
    2019, Section 3: ``g`` all-reduces b s h after attention and after the MLP in the forward,
    ``f`` before each in the backward). With ``sequence_parallel`` each all-reduce becomes an
    all-gather (output b s h) and a reduce-scatter (input b s h), the same ring bytes (Korthikanti
    et al. 2022, Section 4.2.2). Full recomputation runs the forward's 2 again; selective
    recomputation only redoes attention scores, no communication. Empty for tp = 1."""
    for name, v in (("micro_batch", micro_batch), ("seq_len", seq_len), ("hidden", hidden), ("tp", tp)):
        positive(name, v, integer=True)
    boolean("sequence_parallel", sequence_parallel)
    recompute = canonical("recompute", recompute, RECOMPUTE)
    if tp == 1:
        return ()
    n = micro_batch * seq_len * hidden
    phases = ["forward", "backward"] + (["recompute"] if recompute == "full" else [])
    if sequence_parallel:
        return tuple(Collective(ph, op, 2, n, tp, what) for ph in phases for op, what in
                     (("all_gather", "SP: into attention and MLP"),
                      ("reduce_scatter", "SP: out of attention and MLP")))
    what = {"backward": "f before attention and MLP"}
    return tuple(Collective(ph, "all_reduce", 2, n, tp, what.get(ph, "g after attention and MLP"))
                 for ph in phases)


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


def _summa(n: int, k: int, m: int, q: int, name: str) -> list[Collective]:
    """One linear layer by SUMMA on a q x q grid, n rows of X per grid layer (Xu et al. 2021;
    Colossal-AI's Matmul_AB_2D forward, Matmul_ABT_2D and Matmul_ATB_2D backward)."""
    x, a = n * k / q**2, k * m / q**2  # an X block (n/q, k/q), an A block (k/q, m/q)
    return [Collective("forward", "broadcast", q, x, q, f"{name}: X blocks along grid rows"),
            Collective("forward", "broadcast", q, a, q, f"{name}: A blocks along grid columns"),
            Collective("backward", "broadcast", q, a, q, f"{name}: A blocks for dX = dY A^T"),
            Collective("backward", "reduce", q, x, q, f"{name}: dX blocks along grid rows"),
            Collective("backward", "broadcast", q, x, q, f"{name}: X blocks for dA = X^T dY"),
            Collective("backward", "reduce", q, a, q, f"{name}: dA blocks along grid columns")]


def _cube(n: int, k: int, m: int, q: int, name: str) -> list[Collective]:
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
    for name, k, m in _layer_linears(model):
        if grid.mode == "3d":
            out += _cube(n, k, m, grid.q, name)
        else:
            out += _summa(n // grid.d, k, m, grid.q, name)
            if grid.d > 1:
                out.append(Collective("step", "all_reduce", 1, k * m / grid.q**2, grid.d,
                                      f"{name}: dA summed over the {grid.d} depth layers"))
    return tuple(out)


def _volume(c: Collective, broadcast: str = "ring") -> float:
    """Elements the busiest rank sends in sequence for ``c``'s calls (alphabeta.shape)."""
    algo = broadcast if c.op in ("broadcast", "reduce") else "ring"
    return c.count * alphabeta.shape(c.op, algo, c.ranks, c.elements)[1]


def linear_volume(mode: str, n: int, k: int, m: int, p: int, depth: int = 1,
                  broadcast: str = "ring") -> float:
    """Elements each GPU sends (on the critical path) for one linear layer (n, k) @ (k, m), forward
    and backward, per micro-batch (2.5D's once-per-step dA all-reduce not included).
    ``broadcast='naive'`` prices a broadcast or reduce as the root sending the block to each of the
    q-1 others, as Colossal-AI's efficiency table does (``colossal_table``)."""
    grid = tp_grid(mode, p, depth)
    if grid.mode in ("1d", "1d-sp"):
        # one all-reduce per linear: of Y (n, m) forward if row-parallel, of dX (n, k) backward
        # if column-parallel; the table's N x N matrix makes them equal
        cs = [Collective("forward", "all_reduce", 1, n * m, p)]
    elif grid.mode == "3d":
        cs = _cube(n, k, m, grid.q, "")
    else:
        cs = _summa(n // grid.d, k, m, grid.q, "")
    return sum(_volume(c, broadcast) for c in cs)


def colossal_table(mode: str, p: int, depth: int = 1) -> dict[str, float]:
    """Colossal-AI documentation's efficiency table (docs/source/en/features/1D_, 2D_, 2p5D_,
    3D_tensor_parallel.md) for one linear layer on p GPUs, forward + backward, in units of one
    matrix: computation, parameter and activation memory per GPU (fractions of the whole), and
    communication: bandwidth (matrices moved) and latency (message steps), ring algorithm.

        1D      1/P       1/P     1         2(P-1)/P            2(P-1)
        2D      1/q^2     1/q^2   1/q^2     6(q-1)/q            6(q-1)
        2.5D    1/(dq^2)  1/q^2   1/(dq^2)  3(q-1)(d+1)/(dq)    6(q-1)
        3D      1/q^3     1/q^3   1/q^3     6(q-1)/q^3          6(q-1)

    The 2D and 2.5D latency, 6(q-1), is that of one of SUMMA's q steps.
    """
    g = tp_grid(mode, p, depth)
    q, d = g.q, g.d
    if g.mode in ("1d", "1d-sp"):
        return {"computation": 1 / p, "parameters": 1 / p, "activations": 1.0,
                "bandwidth": 2 * (p - 1) / p, "latency": 2 * (p - 1)}
    if g.mode == "3d":
        return {"computation": 1 / q**3, "parameters": 1 / q**3, "activations": 1 / q**3,
                "bandwidth": 6 * (q - 1) / q**3, "latency": 6 * (q - 1)}
    return {"computation": 1 / (d * q**2), "parameters": 1 / q**2, "activations": 1 / (d * q**2),
            "bandwidth": 3 * (q - 1) * (d + 1) / (d * q), "latency": 6 * (q - 1)}


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
        return self.bytes_per_element * sum(_volume(c) for c in self._per_mb())

    @property
    def step_volume(self) -> float:
        """Bytes per GPU of the once-per-step collectives (2.5D's depth all-reduce of dA)."""
        return self.bytes_per_element * sum(_volume(c) for c in self.collectives if c.phase == "step")

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
    """Everything about one transformer layer under ``mode`` on ``p`` GPUs (module docstring):
    its collectives, parameters and activations per GPU, and its forward + backward matmul
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
    from .assumptions import DEFAULT
    from .hardware import get_gpu
    from .links import get_link
    from .memory import bytes_per_param

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
