"""What fp32, fp16 and bf16 can hold, read from ``torch.finfo`` (IEEE 754-2008 binary32 and
binary16; bfloat16: fp32's 8 exponent bits with 7 mantissa bits): the largest value (fp16's
65504, and where it overflows to inf), the smallest normal and subnormal, the relative precision,
and how many small values a 16-bit copy flushes to zero (Micikevicius et al. 2018, "Mixed
Precision Training", Sec. 3.2: gradients below 2^-24 vanish in fp16)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import torch

from parlab.course.guide import CLAIMS

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
GUIDE_FP16_MAX = float(CLAIMS["fp16-max"].value)  # guide 1.21: "overflows to inf past 65506" (it is 65504)


@dataclass(frozen=True)
class FloatFormat:
    """What a floating-point type holds (IEEE 754-2008 binary32/binary16, and bfloat16: fp32's 8
    exponent bits with 7 mantissa bits), read from ``torch.finfo``."""

    name: str
    bits: int
    exponent_bits: int
    mantissa_bits: int  # stored fraction bits (the leading 1 is implicit)
    max: float  # largest finite value: (2 - 2^-m) * 2^emax
    smallest_normal: float  # 2^(1 - bias)
    smallest_subnormal: float  # smallest_normal * 2^-m: below half of it, a value rounds to 0
    eps: float  # 2^-m, the gap between 1 and the next value: relative precision

    @property
    def overflow_at(self) -> float:
        """The smallest value that rounds to inf: max plus half the gap at the top of the range,
        (2 - 2^-(m+1)) * 2^emax (round to nearest even; 65520 for fp16)."""
        return self.max + self.max * self.eps / (2 - self.eps) / 2

    @property
    def decimal_digits(self) -> float:
        """Significant decimal digits, log10(2^(m+1))."""
        return (self.mantissa_bits + 1) * math.log10(2)


def float_format(dtype: torch.dtype | str) -> FloatFormat:
    """The ``FloatFormat`` of a torch floating dtype (or its name: 'float16', 'bfloat16', 'float32')."""
    dt = as_dtype(dtype)
    fi = torch.finfo(dt)
    mantissa = round(-math.log2(fi.eps))
    return FloatFormat(str(dt).removeprefix("torch."), fi.bits, fi.bits - 1 - mantissa, mantissa,
                       fi.max, fi.smallest_normal, fi.smallest_normal * fi.eps, fi.eps)


def as_dtype(dtype: torch.dtype | str) -> torch.dtype:
    """A torch floating dtype as is, or the one a name in ``DTYPES`` stands for."""
    if isinstance(dtype, torch.dtype) and dtype.is_floating_point:
        return dtype
    if dtype in DTYPES:
        return DTYPES[dtype]
    raise ValueError(f"dtype must be a torch floating dtype or one of {', '.join(DTYPES)}, got {dtype!r}")


def largest_from_bits(dtype: torch.dtype | str = torch.float16) -> float:
    """The largest finite value from the bit layout alone: the top exponent below the all-ones
    (inf/nan) pattern, 2^(2^(e-1) - 1), times the significand with every fraction bit set,
    2 - 2^-m. For fp16 (e = 5, m = 10): (2 - 2^-10) * 2^15 = 65504."""
    f = float_format(dtype)
    return (2 - 2.0 ** -f.mantissa_bits) * 2.0 ** (2 ** (f.exponent_bits - 1) - 1)


def round_trip(values: Iterable[float], dtype: torch.dtype | str) -> list[float]:
    """``values`` stored in ``dtype`` and read back (round to nearest even; inf past the range)."""
    return torch.tensor(list(values), dtype=torch.float64).to(as_dtype(dtype)).double().tolist()


def zero_fraction(tensors: Iterable[torch.Tensor]) -> float:
    """Fraction of the elements of ``tensors`` that are exactly zero."""
    ts = [t.detach() for t in tensors if t is not None]
    total = sum(t.numel() for t in ts)
    return sum(int((t == 0).sum()) for t in ts) / total if total else 0.0


def underflow_fraction(values: torch.Tensor, dtype: torch.dtype | str = torch.float16) -> float:
    """Fraction of the non-zero ``values`` that become zero when stored in ``dtype``."""
    nonzero = values[values != 0]
    if not nonzero.numel():
        return 0.0
    return float((nonzero.to(as_dtype(dtype)) == 0).double().mean())


def cast_floating(x: object, dtype: torch.dtype) -> object:
    """``x`` with every floating-point tensor in it (also inside lists, tuples and dicts) cast to
    ``dtype``, and anything else (token ids, flags) as it is: the inputs of a model whose working
    weights are 16-bit, as DeepSpeed's engine casts them in fp16 mode
    (``deepspeed/runtime/engine.py``, ``DeepSpeedEngine._cast_inputs_half``) and as
    ``torch.autocast`` casts a matmul's inputs."""
    if isinstance(x, torch.Tensor):
        return x.to(dtype) if x.is_floating_point() and x.dtype != dtype else x
    if isinstance(x, (list, tuple)):
        return type(x)(cast_floating(v, dtype) for v in x)
    if isinstance(x, dict):
        return {k: cast_floating(v, dtype) for k, v in x.items()}
    return x
