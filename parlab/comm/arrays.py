"""What a message can carry: numpy arrays and CPU torch tensors, seen as raw bytes and reduced in place.

The communicator moves bytes; this module turns a user's array into a flat byte view (no copy),
makes an empty array of the same kind back on the receiving side, and applies a reduction op
from a received byte view into a typed destination (``np.add(acc, incoming, out=acc)``).
torch is only touched when the value *is* a torch tensor, so workers that never use torch never
import it.
"""

from __future__ import annotations

import sys
import warnings
from typing import Any

import numpy as np

Array = Any  # np.ndarray | torch.Tensor (torch is optional, so no import here)

KINDS = ("numpy", "torch")
DTYPES = ("bool", "uint8", "int8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
          "float16", "bfloat16", "float32", "float64", "complex64", "complex128")
REDUCE_OPS = ("sum", "prod", "max", "min", "avg")
MAX_NDIM = 8

_UFUNC = {"sum": np.add, "avg": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}


def _torch():
    return sys.modules.get("torch")


def is_torch(x: object) -> bool:
    if isinstance(x, np.ndarray):
        return False
    torch = _torch()
    return torch is not None and isinstance(x, torch.Tensor)


def as_array(x: object, name: str = "x") -> Array:
    """What a communicator call may move: a numpy array or a torch tensor as it is, a numpy
    scalar (``np.float32(1.5)``, what ``arr.sum()`` returns) as a 0-d array; anything else is a
    TypeError naming the argument and its type. (A Python number is refused: its dtype would be
    a guess.)"""
    if isinstance(x, np.ndarray) or is_torch(x):
        return x
    if isinstance(x, np.generic):
        return np.asarray(x)
    raise TypeError(f"communicators move numpy arrays or torch tensors, got {type(x).__name__} "
                    f"for {name} (wrap numbers and lists in np.asarray, with a dtype)")


def kind_of(x: object) -> str:
    """'numpy' or 'torch'; anything else is refused with its type named."""
    if isinstance(x, np.ndarray):
        return "numpy"
    if is_torch(x):
        return "torch"
    raise TypeError(f"communicators move numpy arrays or torch tensors, got {type(x).__name__}")


_NAMES: dict[object, str] = {}  # dtype object -> name (numpy's dtype.name is slow)


def dtype_name(x: Array) -> str:
    """'float32', 'bfloat16', ... for a numpy array or a torch tensor."""
    name = _NAMES.get(x.dtype)
    if name is None:
        name = str(x.dtype).removeprefix("torch.") if is_torch(x) else x.dtype.name
        if name not in DTYPES:
            raise TypeError(f"dtype {name} cannot be sent; allowed: {', '.join(DTYPES)}")
        _NAMES[x.dtype] = name
    return name


_ITEMSIZE = {name: 2 if name == "bfloat16" else np.dtype(name).itemsize for name in DTYPES}


def itemsize(dtype: str) -> int:
    return _ITEMSIZE[dtype]


def nbytes(x: Array) -> int:
    """Bytes of the array's elements (any device)."""
    return x.nbytes if isinstance(x, np.ndarray) else x.numel() * x.element_size()


def on_cpu(x: Array) -> Array:
    """``x`` if its memory is the host's, else TypeError: the local backend shares host memory."""
    if is_torch(x) and x.device.type != "cpu":
        raise TypeError(f"the local backend moves CPU tensors only, got a tensor on {x.device} "
                        f"(use backend='torch' with NCCL for GPU tensors)")
    return x

def check_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
    if len(shape) > MAX_NDIM:
        raise ValueError(f"arrays of at most {MAX_NDIM} dimensions can be sent, got shape {shape}")
    return tuple(int(d) for d in shape)


def describe(x: Array) -> tuple[Array, str, str, tuple[int, ...], int]:
    """(x as a C-contiguous array, kind, dtype, shape, nbytes): all a message needs, checked."""
    if type(x) is np.ndarray and x.flags.c_contiguous and x.ndim <= MAX_NDIM:
        return x, "numpy", _NAMES.get(x.dtype) or dtype_name(x), x.shape, x.nbytes
    x = as_array(x)
    kind = kind_of(x)
    x = contiguous(x)
    return x, kind, dtype_name(x), check_shape(tuple(x.shape)), nbytes(x)


def contiguous(x: Array) -> Array:
    """``x`` itself if it is C-contiguous (and, for torch, detached), else a contiguous copy."""
    if is_torch(x):
        x = x.detach()
        return x if x.is_contiguous() else x.contiguous()
    return x if x.flags.c_contiguous else np.ascontiguousarray(x)


def flat(x: Array) -> Array:
    """A 1-D view of a contiguous array (``x.reshape(-1)`` never copies here)."""
    return x.reshape(-1)


def byte_view(x: Array) -> np.ndarray:
    """The bytes of a contiguous array as a flat uint8 numpy view that shares its memory."""
    if isinstance(x, np.ndarray):
        return x.reshape(-1).view(np.uint8)
    if is_torch(x):
        torch = _torch()
        t = x.detach().reshape(-1)
        return t.view(torch.uint8).numpy() if t.numel() else np.empty(0, np.uint8)
    return x.reshape(-1).view(np.uint8)


def empty(kind: str, dtype: str, shape: tuple[int, ...]) -> Array:
    """A new uninitialised array of that kind, dtype and shape."""
    if kind == "torch":
        import torch

        return torch.empty(shape, dtype=getattr(torch, dtype))
    if dtype == "bfloat16":
        raise TypeError("bfloat16 arrives as a torch tensor only (numpy has no bfloat16)")
    return np.empty(shape, dtype=dtype)


def copy_bytes(dst: Array, offset: int, raw: np.ndarray) -> None:
    """dst's bytes [offset, offset + len(raw)) = raw."""
    byte_view(dst)[offset:offset + raw.size] = raw


def reduce_arrays(acc: Array, other: Array, op: str, out: Array | None = None) -> None:
    """out = op(acc, other) elementwise, by default in place into acc (same kind and dtype)."""
    out = acc if out is None else out
    if isinstance(acc, np.ndarray):
        _UFUNC[op](acc, other, out=out)
        return
    torch = _torch()
    if op in ("sum", "avg"):
        torch.add(acc, other, out=out)
    elif op == "prod":
        torch.mul(acc, other, out=out)
    elif op == "max":
        torch.maximum(acc, other, out=out)
    else:
        torch.minimum(acc, other, out=out)


def typed(raw: np.ndarray, like: Array) -> Array:
    """Bytes seen as elements of ``like``'s kind and dtype (a view, no copy)."""
    if isinstance(like, np.ndarray):
        return raw.view(like.dtype)
    if not raw.flags.writeable:  # a received message, only read: torch warns on any read-only
        with warnings.catch_warnings():  # buffer it wraps, though nothing writes through it
            warnings.simplefilter("ignore", UserWarning)
            return _torch().from_numpy(raw).view(like.dtype)
    return _torch().from_numpy(raw).view(like.dtype)


def element_range(acc: Array, offset: int, nbytes: int) -> Array:
    """The flat view of acc's elements that occupy bytes [offset, offset + nbytes)."""
    size = _ITEMSIZE[dtype_name(acc)]
    flat_ = acc.reshape(-1) if isinstance(acc, np.ndarray) else acc.detach().reshape(-1)
    return flat_[offset // size:(offset + nbytes) // size]


def reduce_bytes(acc: Array, offset: int, raw: np.ndarray, op: str) -> None:
    """acc[elements at bytes offset..] = op(acc[..], raw viewed as acc's dtype), in place.

    This is NCCL's ``recvReduceCopy`` primitive (src/device/prims_simple.h): the received piece
    is combined straight into the destination, with no temporary copy of the message."""
    dst = element_range(acc, offset, raw.size)
    reduce_arrays(dst, typed(raw, dst), op)


def reduce_op_name(op: object) -> str:
    """op itself if it is a string (checked against the dtype later), else TypeError."""
    if not isinstance(op, str):
        raise TypeError(f"op must be the name of a reduce op ({', '.join(REDUCE_OPS)}), got {op!r}")
    return op


def check_reduce_op(op: str, dtype: str) -> str:
    """The op if it may reduce this dtype, else ValueError (TypeError: not a name) naming the rule."""
    if reduce_op_name(op) not in REDUCE_OPS:
        raise ValueError(f"unknown reduce op {op!r}; allowed: {', '.join(REDUCE_OPS)}")
    if op == "avg" and not (dtype.startswith(("float", "complex")) or dtype == "bfloat16"):
        raise ValueError(f"op 'avg' needs a floating dtype (the mean of integers is not an "
                         f"integer), got {dtype}")
    if op in ("max", "min") and dtype.startswith("complex"):
        raise ValueError(f"op {op!r} is undefined for complex numbers, got {dtype}")
    return op


def divide_(x: Array, n: int) -> Array:
    """x /= n in place (finishes an 'avg' reduction)."""
    if is_torch(x):
        x.div_(n)
    else:
        np.divide(x, n, out=x)
    return x


def copy_of(x: Array) -> Array:
    """A contiguous copy of x, same kind."""
    return x.detach().clone(memory_format=_torch().contiguous_format) if is_torch(x) else np.array(x, order="C")


def concat_shape(shape: tuple[int, ...], n: int) -> tuple[int, ...]:
    """Shape of n equal blocks stacked along dim 0 (a 0-d input gives shape (n,))."""
    return (n * shape[0], *shape[1:]) if shape else (n,)
