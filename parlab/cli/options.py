"""Option types of the ``parlab`` command: each reads one value, normalises it once, and rejects
a bad one with the rule it breaks (argparse adds the flag: "argument --tp: must be a positive
integer, got '0'"). Zero is rejected like any other non-positive count; names are matched
case-insensitively and kept in their canonical spelling, so ``--schedule GPipe`` is ``gpipe``."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Iterable


def _fail(err: Exception) -> argparse.ArgumentTypeError:
    return argparse.ArgumentTypeError(str(err))


def positive_int(text: str) -> int:
    """A whole number >= 1 ('8'; not '0', '-1', '1.5', 'abc')."""
    try:
        value = int(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def zero_stage(text: str) -> int:
    """A ZeRO stage: 0, 1, 2 or 3."""
    if text.strip() not in ("0", "1", "2", "3"):
        raise argparse.ArgumentTypeError(f"must be a ZeRO stage 0, 1, 2 or 3, got {text!r}")
    return int(text)


def listed(item: Callable[[str], object], what: str) -> Callable[[str], list]:
    """A comma-separated list of ``item`` values ('0,1'), none empty, duplicates dropped."""

    def parse(text: str) -> list:
        parts = [p.strip() for p in text.split(",")]
        if not text.strip() or any(not p for p in parts):
            raise argparse.ArgumentTypeError(f"must be {what} separated by commas, e.g. {_example(what)}; "
                                             f"got {text!r}")
        try:
            return list(dict.fromkeys(item(p) for p in parts))
        except argparse.ArgumentTypeError as err:
            raise argparse.ArgumentTypeError(f"{err} (a list of {what} separated by commas, "
                                             f"e.g. {_example(what)})") from None

    parse.__name__ = f"list of {what}"
    return parse


def _example(what: str) -> str:
    return {"ZeRO stages": "0,1", "positive integers": "1,2,4", "cp methods": "ring,all-gather",
            "recompute modules": "mlp,core_attn"}.get(what, "none,full")


def name_of(kind: str, names: Iterable[str], aliases: dict[str, str] | None = None) -> Callable[[str], str]:
    """A preset or mode name, matched case-insensitively, returned in its canonical spelling."""
    from parlab.costmodel.specs._check import canonical

    names = tuple(names)

    def parse(text: str) -> str:
        try:
            return canonical(kind, text, names, aliases)
        except (TypeError, ValueError) as err:
            raise _fail(err) from None

    parse.__name__ = kind
    return parse


def not_a_count(parse: Callable[[str], str], count_flag: str) -> Callable[[str], str]:
    """A name option that says where a number belongs: --gpu 8 is a GPU count meant for --gpus."""

    def parse_name(text: str) -> str:
        n = text.strip()
        if n.isdigit():
            raise argparse.ArgumentTypeError(f"got {text!r}, a number: for {n} GPUs use {count_flag} {n} "
                                             f"(this flag takes a GPU preset; `parlab gpus` lists them)")
        return parse(text)

    parse_name.__name__ = parse.__name__
    return parse_name


def dtype(text: str) -> str:
    """A training precision of ``parlab.costmodel.plan.TRAINING_DTYPES`` (aliases such as mixed,
    amp, bf16-mixed), returned canonical."""
    from parlab.costmodel.plan.spec import DTYPE_ALIASES, TRAINING_DTYPES

    return name_of("dtype", TRAINING_DTYPES, DTYPE_ALIASES)(text)


def model(text: str):
    """A model preset or a size such as 7B (``parlab.costmodel.get_model``)."""
    from parlab.costmodel import get_model

    try:
        return get_model(text)
    except (TypeError, ValueError) as err:
        raise _fail(err) from None


def token_count(text: str) -> float:
    """A number of tokens: '300B', '1.5T', '2e12' (positive and finite)."""
    from parlab.costmodel import parse_size

    try:
        return parse_size(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a positive number of tokens such as 300B, 1.5T or 2e12, "
                                         f"got {text!r}")
    return value


def positive_ints(text: str) -> list[int]:
    return listed(positive_int, "positive integers")(text)


def zero_stages(text: str) -> list[int]:
    return listed(zero_stage, "ZeRO stages")(text)
