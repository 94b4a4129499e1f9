"""A check cell run on an exercise's stub shows one line in a notebook, not a 25-30 line
traceback through parlab/checks (issue 20, ex04 and ex07): the checkers raise ``StillAStub``, a
NotImplementedError that IPython renders as its own line."""

from __future__ import annotations

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

from parlab.checks.stub import StillAStub
from parlab.course.nbtools import STUB

CASES = [  # (the exercise's import and stub, the check cell, the line it shows)
    ("from parlab.checks.pipeline import check_one_f_one_b\n"
     f"def one_f_one_b(p, m):\n    {STUB}\n", "check_one_f_one_b(one_f_one_b)",
     "one_f_one_b is still a stub"),
    ("from parlab.checks.zero import check_zero2_step\n"
     f"def zero2_step(model, comm, state, lr):\n    {STUB}\n", "check_zero2_step(zero2_step)",
     "zero2_step is still a stub"),
    ("from parlab.checks.memory import check_memory_estimator\n"
     f"def model_state_bytes(n, dtype, optimizer):\n    {STUB}\n",
     "check_memory_estimator(model_state_bytes)", "model_state_bytes is still a stub"),
]


@pytest.fixture(scope="module")
def shell():
    shell = InteractiveShell.instance()
    yield shell
    InteractiveShell.clear_instance()


@pytest.mark.parametrize("setup, check, line", CASES, ids=["ex04", "ex07", "ex01"])
def test_a_check_cell_on_the_stub_shows_one_line(shell, setup, check, line):
    assert shell.run_cell(setup).success
    with capture_output() as out:
        result = shell.run_cell(check)
    assert isinstance(result.error_in_exec, StillAStub)  # the check still fails (CI sees it)
    assert isinstance(result.error_in_exec, NotImplementedError)
    shown = [t for t in (out.stdout + out.stderr).splitlines() if t.strip()]
    assert shown == [f"NotImplementedError: {line}: write it above, then run this check again."], shown
