"""Colossal-AI's efficiency table of 1D, 2D, 2.5D and 3D tensor parallelism
(docs/source/en/features/{1D,2D,2p5D,3D}_tensor_parallel.md, "Efficiency"), per linear layer,
forward and backward, in units of one N x N matrix, and its bandwidth column reproduced from the
collectives of ``grids``.

``linear_volume`` reproduces the table's bandwidth when a broadcast or reduce costs (q-1) times
the block (the root sending to each peer in turn), as the table assumes. The model prices NCCL's
pipelined chain instead (the block once per rank), which makes 2D and 2.5D q-1 times cheaper than
the table.
"""

from __future__ import annotations

from parlab.costmodel.pricing.layer_collective import Collective, sent_elements
from parlab.costmodel.pricing.tensor_parallel.grids import cube, summa, tp_grid


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
        cs = cube(n, k, m, grid.q, "")
    else:
        cs = summa(n // grid.d, k, m, grid.q, "")
    return sum(sent_elements(c, broadcast) for c in cs)


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
