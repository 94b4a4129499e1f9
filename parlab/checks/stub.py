"""A check run on an exercise's stub: one line in the notebook, not a traceback.

``StillAStub`` is a NotImplementedError (a stub still fails its check, and CI sees it fail)
whose ``_render_traceback_`` IPython shows in place of the traceback: the 25-30 lines through
``parlab/checks`` and the stub that used to end in "zero2_step is still a stub" become that line.
"""

from __future__ import annotations

import inspect

from parlab.course.nbtools import STUB


def is_stub(obj: object) -> bool:
    """Whether ``obj`` is a function whose body still holds the exercise's generated stub (its
    source is found for functions defined in a notebook cell too: IPython keeps cells' code)."""
    if not callable(obj):
        return False
    try:
        return STUB in inspect.getsource(obj)
    except (OSError, TypeError):
        return False


class StillAStub(NotImplementedError):
    """The learner's function is still the generated stub."""

    def _render_traceback_(self) -> list[str]:  # IPython: these lines instead of the traceback
        return [f"NotImplementedError: {self}: write it above, then run this check again."]


def refuse_stubs(*fns: object, **named: object) -> None:
    """Raise ``StillAStub`` naming the first of ``fns`` (by ``__name__``) or ``named``
    (name=function) that is still a stub."""
    for name, fn in [(getattr(f, "__name__", "your function"), f) for f in fns] + list(named.items()):
        if is_stub(fn):
            raise StillAStub(f"{name} is still a stub")
