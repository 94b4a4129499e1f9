"""Argument checks shared by the cost model: every error names the bad value and what is allowed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

T = TypeVar("T")


def lookup(kind: str, key: str, table: Mapping[str, T], aliases: Mapping[str, str] | None = None) -> T:
    """Return ``table[key]`` (case-insensitive, aliases allowed) or raise a ValueError listing the choices."""
    if not isinstance(key, str):
        raise ValueError(f"{kind} must be a name, got {key!r}; allowed: {', '.join(table)}")
    k = key.strip().lower()
    if aliases and k in aliases:
        k = aliases[k]
    if k not in table:
        names = list(table) + sorted(aliases or {})
        raise ValueError(f"unknown {kind} {key!r}; allowed: {', '.join(names)}")
    return table[k]


def positive(name: str, value, *, integer: bool = False):
    """Return ``value`` if it is a positive number (an int if ``integer``), else raise ValueError."""
    ok_type = isinstance(value, int) if integer else isinstance(value, (int, float))
    if isinstance(value, bool) or not ok_type or not value > 0:
        kind = "a positive integer" if integer else "a positive number"
        raise ValueError(f"{name} must be {kind}, got {value!r}")
    return value


def fraction(name: str, value: float) -> float:
    """Return ``value`` if 0 < value <= 1, else raise ValueError."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise ValueError(f"{name} must be in (0, 1], got {value!r}")
    return float(value)
