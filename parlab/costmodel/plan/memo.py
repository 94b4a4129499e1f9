"""Bounded memos of a plan's pure functions, keyed on the whole frozen model and plan.

A search prices 10,000s of plans over a few layouts, so what depends on the layout alone (a
stage's model states) is worth computing once per layout (attack review F17). The danger of a
memo is a key that leaves out an input the function reads: it then returns another plan's
numbers, silently. So ``plan_memo``'s key is the whole ``ModelSpec`` and *every* ``Plan`` field
but those the decorator names as ``ignore`` (a deny-list, never a hand-picked allow-list: a field
added to ``Plan`` later joins every key by itself), and the function runs on a ``PlanView`` that
refuses the ignored fields, and any property or method of ``Plan`` that reads one, with an
AttributeError: the proof that an ignored field cannot matter is checked on every computation.
The memo is ``functools.lru_cache`` (bounded).
"""

from __future__ import annotations

import types
from collections.abc import Callable
from dataclasses import fields
from functools import lru_cache, wraps
from operator import attrgetter
from typing import Any, TypeVar

from parlab.costmodel.plan.spec import Plan
from parlab.costmodel.specs.models import ModelSpec

R = TypeVar("R")
_FIELDS = tuple(f.name for f in fields(Plan))


class PlanView:
    """A plan as a memoised function sees it: its fields, properties and methods, except the
    ``ignored`` fields (read directly or through a property or method: an AttributeError naming
    the field and the memo). Equal, and hashed alike, when the plans agree on every other field."""

    __slots__ = ("_plan", "_ignored", "_memo", "_key", "_hash")

    def __init__(self, plan: Plan, key: Callable[[Plan], tuple], ignored: frozenset[str], memo: str) -> None:
        self._plan, self._ignored, self._memo = plan, ignored, memo
        self._key = key(plan)  # every kept field, in Plan's order
        self._hash = hash(self._key)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PlanView) and self._memo == other._memo and self._key == other._key

    def __getattr__(self, name: str) -> Any:
        if name in self._ignored:
            raise AttributeError(f"{self._memo} read Plan.{name}, which its memo key leaves out "
                                 f"(plan_memo ignore=...): key it or stop reading it")
        attr = getattr(Plan, name, None)
        if isinstance(attr, property):  # its body reads the fields through this view
            return attr.fget(self)
        if isinstance(attr, types.FunctionType):
            return types.MethodType(attr, self)
        return getattr(self._plan, name)


def plan_memo(maxsize: int, ignore: tuple[str, ...]) -> Callable[[Callable[..., R]], Callable[..., R]]:
    """Memoise ``f(model, plan, *args)`` (hashable ``args``) in an ``lru_cache(maxsize)`` keyed on
    the model, every ``Plan`` field not in ``ignore`` and ``args``; ``f`` gets a ``PlanView`` that
    refuses the ignored fields. Each name in ``ignore`` must be a ``Plan`` field, and the
    decorated function's docstring should say why none of them can change its result."""
    unknown = sorted(set(ignore) - set(_FIELDS))
    if unknown:
        raise ValueError(f"plan_memo ignore names no Plan field: {', '.join(unknown)}; "
                         f"Plan's fields: {', '.join(_FIELDS)}")
    ignored = frozenset(ignore)
    key = attrgetter(*(name for name in _FIELDS if name not in ignored))  # a tuple of them (C speed)

    def decorate(f: Callable[..., R]) -> Callable[..., R]:
        cached = lru_cache(maxsize=maxsize)(f)

        @wraps(f)
        def memoised(model: ModelSpec, plan: Plan, *args: Any) -> R:
            return cached(model, PlanView(plan, key, ignored, f.__qualname__), *args)

        memoised.cache_info = cached.cache_info  # type: ignore[attr-defined]
        memoised.cache_clear = cached.cache_clear  # type: ignore[attr-defined]
        return memoised

    return decorate
