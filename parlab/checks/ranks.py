"""Running a learner's code on several ranks for a checker: one clear line for every way it fails."""

from __future__ import annotations

from parlab.comm import CommError, RankError, launch

from .stub import StillAStub, is_stub


def launch_learner_code(fn, world_size: int, *args, stub: str, hint: str, timeout: float) -> list:
    """``launch(fn, world_size, *args)``, with the failures a learner meets turned into one line:
    a stub's NotImplementedError passes through as NotImplementedError naming ``stub``; any other
    exception on a rank is an AssertionError with the rank and the last line of its traceback; a
    communication failure (a deadlock, mismatched calls) is an AssertionError ending in ``hint``.
    A learner's function that is still the stub fails at once, before any rank starts."""
    if any(is_stub(a) for a in args):
        raise StillAStub(stub)
    try:
        return launch(fn, world_size, *args, timeout=timeout)
    except RankError as err:
        if err.exc_type == "NotImplementedError":
            raise StillAStub(f"{stub} (rank {err.rank} raised NotImplementedError)") from None
        last = (err.remote_traceback or "").strip().splitlines()
        raise AssertionError(f"rank {err.rank} raised {err.exc_type}: {last[-1] if last else err}") from None
    except CommError as err:
        raise AssertionError(f"{type(err).__name__}: {str(err).splitlines()[0]} ({hint})") from None
