"""The algebra of tensor parallelism on plain arrays: ``Y = X A`` split by columns or by rows,
forward and backward, as one rank runs it, every communication an explicit collective
(Megatron-LM, Shoeybi et al. 2019, Section 3, Eq. 2-3; guide 1.7).

Column-parallel: A = [A_1, ..., A_t] split along its columns, X replicated on every rank.
    forward   Y_i = X A_i                      local: rank i holds a column block of Y
              Y   = [Y_1, ..., Y_t]            all-gather, only where the full Y is needed
    backward  dA_i = X^T dY_i                  local
              dX   = dY_1 A_1^T + ... + dY_t A_t^T   all-reduce: each rank holds one term
Row-parallel: A = [A_1; ...; A_t] split along its rows, X = [X_1, ..., X_t] along its columns.
    forward   Y    = X_1 A_1 + ... + X_t A_t   all-reduce
    backward  dX_i = dY A_i^T, dA_i = X_i^T dY local: dY is the same on every rank

Column then row (Megatron's MLP: Y_i = GeLU(X A_i), Z = sum_i Y_i B_i) needs no all-gather in
between, because GeLU acts elementwise on each column block: one all-reduce forward, one backward.

The collective helpers ``all_gather_along`` / ``reduce_scatter_along`` work on numpy arrays and
torch tensors alike (the communicator stacks along dim 0; these move the axis there and back);
``mappings`` builds its autograd operators on them.
"""

from __future__ import annotations

import numpy as np


def _moveaxis(x, src: int, dst: int):
    return np.moveaxis(x, src, dst) if isinstance(x, np.ndarray) else x.movedim(src, dst)


def _contiguous(x):
    return np.ascontiguousarray(x) if isinstance(x, np.ndarray) else x.contiguous()


def shard(a, rank: int, world: int, axis: int = -1):
    """Block ``rank`` of ``world`` equal blocks of ``a`` along ``axis`` (a view)."""
    axis = axis % a.ndim
    n = a.shape[axis]
    if n % world:
        raise ValueError(f"cannot split axis {axis} of size {n} into tp={world} equal blocks: "
                         f"the tensor-parallel degree must divide it")
    k = n // world
    index = [slice(None)] * a.ndim
    index[axis] = slice(rank * k, (rank + 1) * k)
    return a[tuple(index)]


def all_gather_along(comm, x, axis: int = -1):
    """Every rank's ``x`` concatenated along ``axis`` in rank order (shape[axis] grows t-fold)."""
    t = comm.world_size
    if t == 1:
        return x
    axis = axis % x.ndim
    front = _contiguous(_moveaxis(x, axis, 0))  # (k, ...) with the gathered axis first
    stacked = comm.all_gather(front)  # (t * k, ...): rank blocks in order
    return _moveaxis(stacked, 0, axis)


def reduce_scatter_along(comm, x, axis: int = -1):
    """The sum over ranks of ``x``, block ``rank`` of it along ``axis`` (shape[axis] / t)."""
    t = comm.world_size
    if t == 1:
        return x
    axis = axis % x.ndim
    if x.shape[axis] % t:
        raise ValueError(f"reduce-scatter along axis {axis} of size {x.shape[axis]} needs "
                         f"tp={t} to divide it")
    front = _contiguous(_moveaxis(x, axis, 0))  # (t * k, ...)
    return _moveaxis(comm.reduce_scatter(front), 0, axis)  # (k, ...) moved back


def all_reduce(comm, x, op: str = "sum"):
    """The reduction (``op``: the communicator's, default the sum) over ranks of ``x``, which
    every rank gets."""
    return x if comm.world_size == 1 else comm.all_reduce(x, op)


def _flat(x: np.ndarray) -> np.ndarray:
    """(..., k) -> (n, k): a batch of rows for the weight gradient."""
    return x.reshape(-1, x.shape[-1])


def column_parallel_forward(x: np.ndarray, a_i: np.ndarray, comm,
                            gather_output: bool = True) -> np.ndarray:
    """Y = X A with A split by columns: Y_i = X A_i, then (if ``gather_output``) all-gather."""
    y_i = x @ a_i  # (n, k) @ (k, m/t) -> (n, m/t)
    return all_gather_along(comm, y_i, -1) if gather_output else y_i  # (n, m) or (n, m/t)


def column_parallel_backward(x: np.ndarray, a_i: np.ndarray, dy_i: np.ndarray,
                             comm) -> tuple[np.ndarray, np.ndarray]:
    """(dX, dA_i) of the column-parallel Y = X A from this rank's block dY_i of dY."""
    da_i = _flat(x).T @ _flat(dy_i)  # (k, n) @ (n, m/t) -> (k, m/t)
    dx_part = dy_i @ a_i.T  # (n, m/t) @ (m/t, k) -> (n, k): rank i's term of dX
    return all_reduce(comm, dx_part), da_i  # dX = sum over ranks


def row_parallel_forward(x_i: np.ndarray, a_i: np.ndarray, comm) -> np.ndarray:
    """Y = X A with A split by rows and X by columns: Y = all-reduce of X_i A_i."""
    y_part = x_i @ a_i  # (n, k/t) @ (k/t, m) -> (n, m): rank i's term of Y
    return all_reduce(comm, y_part)


def row_parallel_backward(x_i: np.ndarray, a_i: np.ndarray,
                          dy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(dX_i, dA_i) of the row-parallel Y = X A; dY is replicated, so no communication."""
    dx_i = dy @ a_i.T  # (n, m) @ (m, k/t) -> (n, k/t)
    da_i = _flat(x_i).T @ _flat(dy)  # (k/t, n) @ (n, m) -> (k/t, m)
    return dx_i, da_i
