"""A learner's function that is still the generated stub fails at once, before ranks start."""

from __future__ import annotations

import importlib.util

import pytest

from parlab.checks import ranks
from parlab.course.nbtools import stub_source


def _module_with(tmp_path, source: str):
    path = tmp_path / "learner.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("learner", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_stub_fails_without_starting_a_rank(tmp_path, monkeypatch):
    learner = _module_with(tmp_path, stub_source(
        "def step(comm):\n    ### BEGIN SOLUTION\n    return comm.rank\n    ### END SOLUTION\n"))
    assert ranks.is_stub(learner.step)
    monkeypatch.setattr(ranks, "launch", lambda *a, **k: pytest.fail("a rank was started for a stub"))
    with pytest.raises(NotImplementedError, match="step is still a stub"):
        ranks.launch_learner_code(print, 2, learner.step, stub="step is still a stub", hint="", timeout=5)


def test_written_code_is_not_a_stub(tmp_path):
    learner = _module_with(tmp_path, "def step(comm):\n    return comm.rank\n")
    assert not ranks.is_stub(learner.step) and not ranks.is_stub(3) and not ranks.is_stub(print)


def test_the_checkers_import_no_notebook_machinery():
    """A checker's functions run on every rank it launches, which imports their module: nbformat
    (1.5 s of jsonschema) or nbclient there would cost each rank seconds."""
    import subprocess
    import sys

    code = ("import sys, parlab.checks.comm, parlab.checks.ddp, parlab.checks.tensor, parlab.checks.zero, "
            "parlab.checks.pipeline, parlab.checks.grid, parlab.checks.memory, parlab.checks.drill; "
            "print(sorted(m for m in ('nbformat', 'nbclient', 'jupyter_client') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
