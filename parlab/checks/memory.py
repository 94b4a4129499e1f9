"""Checker for exercise 01 (memory estimator): the learner's bytes against parlab.costmodel."""

from __future__ import annotations

import random

from parlab.costmodel import OPTIMIZERS, PRECISIONS, model_state_memory

from .stub import refuse_stubs

KEYS = ("weights", "grads", "master", "optimizer_states")


def check_memory_estimator(fn, cases: int = 200, seed: int = 0) -> None:
    """Call ``fn(n_params, dtype, optimizer)`` on random cases; it must return a dict with the
    bytes of ``weights``, ``grads``, ``master`` and ``optimizer_states`` equal (to 1e-9
    relative) to ``parlab.costmodel.model_state_memory``. Raises AssertionError naming the
    first case that differs; the stub fails at once (``StillAStub``)."""
    refuse_stubs(fn)
    rng = random.Random(seed)
    dtypes, optimizers = list(PRECISIONS), list(OPTIMIZERS)
    for i in range(cases):
        n = int(10 ** rng.uniform(6, 12))
        dtype, opt = dtypes[i % len(dtypes)], rng.choice(optimizers)
        got = fn(n, dtype, opt)
        assert isinstance(got, dict), f"expected a dict of bytes, got {type(got).__name__}"
        missing = [k for k in KEYS if k not in got]
        assert not missing, f"the dict is missing {missing}; expected keys {list(KEYS)}"
        want = model_state_memory(n, dtype, opt)
        expected = dict(zip(KEYS, (want.weights, want.grads, want.master, want.optimizer_states), strict=True))
        for k in KEYS:
            ok = abs(got[k] - expected[k]) <= 1e-9 * max(1.0, expected[k])
            assert ok, (f"n_params={n:,}, dtype={dtype!r}, optimizer={opt!r}: {k} should be "
                        f"{expected[k]:,.0f} bytes ({expected[k] / n:g} per parameter), got {got[k]:,.0f}")
    print(f"All {cases} cases agree with parlab.costmodel.model_state_memory.")
