"""The exercise 05 checker accepts Megatron's column- and row-parallel layers and rejects each
typical mistake with a one-line message naming it."""

from __future__ import annotations

import sys

import cloudpickle
import pytest
import torch
import torch.nn.functional as F

from parlab.checks.tensor import check_tensor_parallel_linear

pytestmark = pytest.mark.usefixtures("warm_launches")  # launch runs on warm ranks (conftest)

cloudpickle.register_pickle_by_value(sys.modules[__name__])


class Copy(torch.autograd.Function):  # f
    @staticmethod
    def forward(ctx, x, comm):
        ctx.comm = comm
        return x

    @staticmethod
    def backward(ctx, grad):
        return ctx.comm.all_reduce(grad), None


class Reduce(torch.autograd.Function):  # g
    @staticmethod
    def forward(ctx, x, comm):
        return comm.all_reduce(x)

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class CopyNoReduce(torch.autograd.Function):  # the mistake: f without its backward all-reduce
    @staticmethod
    def forward(ctx, x, comm):
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad, None


def column(x, weight, bias, comm):
    return F.linear(Copy.apply(x, comm), weight, bias)


def row(x, weight, bias, comm):
    return Reduce.apply(F.linear(x, weight), comm) + bias


def column_no_backward_reduce(x, weight, bias, comm):
    return F.linear(CopyNoReduce.apply(x, comm), weight, bias)


def row_bias_before_reduce(x, weight, bias, comm):
    return Reduce.apply(F.linear(x, weight, bias), comm)


def column_gathering(x, weight, bias, comm):
    """Right numbers, needless traffic: all-gathers the whole weight first."""
    comm.all_gather(weight.detach())
    return column(x, weight, bias, comm)


def stub(x, weight, bias, comm):
    raise NotImplementedError("exercise")


def test_the_solution_passes(capsys):
    check_tensor_parallel_linear(column, row)
    assert "correct on tp = 2, 3, 4" in capsys.readouterr().out


@pytest.mark.parametrize("col, rw, message", [
    (column_no_backward_reduce, row, r"column_parallel_linear, tp=2, rank \d.*dX differs .*f's backward must "
                                     r"all-reduce"),
    (column, row_bias_before_reduce, r"row_parallel_linear, tp=2, rank \d.*the output Y differs"),
    (column_gathering, row, r"column_parallel_linear, tp=2, rank \d, .*: the forward moved all_gather of "
                            r"\d[\d,]* B; it should move nothing"),
])
def test_mistakes_fail_with_one_line_naming_them(col, rw, message):
    with pytest.raises(AssertionError, match=message) as err:
        check_tensor_parallel_linear(col, rw)
    assert "\n" not in str(err.value)


def test_a_stub_fails_as_not_implemented():
    with pytest.raises(NotImplementedError, match="still a stub"):
        check_tensor_parallel_linear(stub, row)
