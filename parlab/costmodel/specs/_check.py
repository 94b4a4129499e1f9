"""Argument checks shared by the cost model: every error names the field, the bad value and the rule.

One implementation of each check, used by every public constructor (``Plan``, ``ModelSpec``,
``GPUSpec``, ``LinkSpec``, ``Cluster``, ``Assumptions``, ...) and by the CLI. A wrong input is a
``ValueError`` (right type, wrong value) or a ``TypeError`` (wrong type) raised where it enters,
never a NaN, an inf, an ``OverflowError`` or a ``ZeroDivisionError`` later on. Booleans are not
numbers here (``True`` is not a GPU count) and strings are not booleans (``"False"`` is truthy).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping
from typing import TypeVar

T = TypeVar("T")


def normalize(name: str) -> str:
    """The canonical spelling of a preset or option name: stripped, lower case."""
    return name.strip().lower()


def lookup(kind: str, key: str, table: Mapping[str, T], aliases: Mapping[str, str] | None = None) -> T:
    """Return ``table[key]`` (case-insensitive, aliases allowed) or raise a ValueError listing the choices."""
    return table[canonical(kind, key, table, aliases)]


def canonical(kind: str, key: str, table: Mapping[str, object] | Iterable[str],
              aliases: Mapping[str, str] | None = None) -> str:
    """The canonical name of ``key`` among ``table``'s names (case-insensitive, aliases allowed)."""
    names = list(table)
    if not isinstance(key, str):
        raise TypeError(f"{kind} must be a name (a string), got {key!r}; allowed: {', '.join(names)}")
    k = normalize(key)
    if aliases and k in aliases:
        k = aliases[k]
    if k not in names:
        allowed = names + sorted(a for a in (aliases or {}) if a not in names)
        raise ValueError(f"unknown {kind} {key!r}; allowed: {', '.join(allowed)}")
    return k


def _is_number(value) -> bool:
    if type(value) in (int, float):  # the common case first: the ABC check is slow (search)
        return True
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _real(name: str, kind: str, value, integer: bool):
    """``value`` if it is a real number (an int if ``integer``): a TypeError for a non-number
    (a string, a bool, None), a ValueError for a number of the wrong kind (1.5 GPUs)."""
    if not _is_number(value):
        raise TypeError(f"{name} must be {kind}, got {value!r}")
    if integer:
        if type(value) is not int and not isinstance(value, numbers.Integral):
            raise ValueError(f"{name} must be {kind}, got {value!r}")
        return int(value)
    return value


def number(name: str, value) -> float:
    """``value`` as a float if it is a finite real number (not a bool, not a string), else raise."""
    if not _is_number(value):
        raise TypeError(f"{name} must be a number, got {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return value


def positive(name: str, value, *, integer: bool = False):
    """Return ``value`` if it is a finite positive number (an int if ``integer``), else raise.

    Zero is rejected like any other non-positive value."""
    kind = "a positive integer" if integer else "a positive number"
    value = _real(name, kind, value, integer)
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(f"{name} must be {kind}, got {value!r}")
    return value


def non_negative(name: str, value, *, integer: bool = False):
    """Return ``value`` if it is a finite number >= 0 (an int if ``integer``), else raise."""
    kind = "an integer >= 0" if integer else "a number >= 0"
    value = _real(name, kind, value, integer)
    if not (value >= 0 and math.isfinite(value)):
        raise ValueError(f"{name} must be {kind}, got {value!r}")
    return value


def fraction(name: str, value) -> float:
    """Return ``value`` if 0 < value <= 1, else raise."""
    if not _is_number(value):
        raise TypeError(f"{name} must be a number in (0, 1], got {value!r}")
    if not 0 < value <= 1:
        raise ValueError(f"{name} must be in (0, 1], got {value!r}")
    return float(value)


def unit_interval(name: str, value) -> float:
    """Return ``value`` if 0 <= value <= 1, else raise."""
    if not _is_number(value):
        raise TypeError(f"{name} must be a number in [0, 1], got {value!r}")
    if not 0 <= value <= 1:
        raise ValueError(f"{name} must be in [0, 1], got {value!r}")
    return float(value)


def boolean(name: str, value) -> bool:
    """Return ``value`` if it is a bool (numpy's too); the string ``"False"`` is not one."""
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return bool(value)
    raise TypeError(f"{name} must be True or False, got {value!r}")


def text(name: str, value) -> str:
    """Return ``value`` if it is a string."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string, got {value!r}")
    return value


def instance(name: str, value, cls: type, hint: str = ""):
    """Return ``value`` if it is a ``cls``; else a TypeError naming the field (and how to make one)."""
    if not isinstance(value, cls):
        extra = f" ({hint})" if hint else ""
        raise TypeError(f"{name} must be a {cls.__name__}{extra}, got {value!r}")
    return value


def choices(name: str, values, check) -> list:
    """``values`` as a non-empty list, each passed through ``check(name, v)``."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise TypeError(f"{name} must be a list of choices, got {values!r}")
    out = [check(name, v) for v in values]
    if not out:
        raise ValueError(f"{name} must name at least one choice, got {values!r}")
    return out
