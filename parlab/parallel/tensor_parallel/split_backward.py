"""A split backward that communicates once: ZB-H1's B and W (Qi et al. 2023, "Zero Bubble
Pipeline Parallelism", Section 2.1) on tensor-parallel stages.

The executor (``pipeline_parallel.executor.run_schedule``) runs B as ``autograd.grad(out, inp, retain_graph=True)``
and W as ``autograd.backward(out, inputs=parameters)`` over the same graph, so W walks again
through every node between the output and the weights, including the TP operators whose backward
communicates (f's all-reduce, sequence parallelism's reduce-scatter and all-gather). In the
paper W only multiplies stored input gradients by stored activations and sends nothing. Here each
communicating backward keeps what it computed during B (``input_pass``) and, during W
(``weight_pass``), returns that result instead of communicating again: the values are the same
(W recomputes the same gradient into the operator), the bytes are counted once, as modelled.

    with input_pass():
        gin = torch.autograd.grad(out, inp, g, retain_graph=True)[0]
    with weight_pass():
        torch.autograd.backward(out, g, inputs=params)   # no TP traffic
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager

import torch

_MODE = {"pass": None}  # None (a plain backward), "input" or "weight"; autograd runs on CPU in the
# calling thread, and one rank runs one backward at a time


@contextmanager
def _mode(name: str):
    before, _MODE["pass"] = _MODE["pass"], name
    try:
        yield
    finally:
        _MODE["pass"] = before


def input_pass():
    """B of a split backward: communicating backwards keep their result for W."""
    return _mode("input")


def weight_pass():
    """W of a split backward: communicating backwards return what B computed."""
    return _mode("weight")


def communicated(ctx, compute: Callable[[], torch.Tensor]) -> torch.Tensor:
    """The gradient a communicating backward returns: ``compute()`` (which communicates), kept
    on ``ctx`` during B; during W the kept one (``compute()`` if B never reached this node)."""
    if _MODE["pass"] == "weight" and hasattr(ctx, "split_backward_result"):
        return ctx.split_backward_result
    out = compute()
    if _MODE["pass"] == "input":
        ctx.split_backward_result = out
    return out
