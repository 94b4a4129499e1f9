"""One source for exercises and solutions: the exercises are generated from the solutions, stay in
sync, and every check cell fails on the stub (while the solutions pass under nbval)."""

import nbformat
import pytest
from nbclient import NotebookClient

from parlab.course.nbtools import (
    BEGIN,
    END,
    ROOT,
    STUB,
    make_exercise,
    out_of_date,
    solutions,
    stub_source,
)

EXERCISES = sorted((ROOT / "exercises").glob("*.ipynb"))


def test_stub_replaces_the_block_at_its_indentation():
    src = f"def f(x):\n    y = 1\n    {BEGIN}\n    return x + y\n    {END}\n\nprint(f)"
    assert stub_source(src) == f"def f(x):\n    y = 1\n    {STUB}\n\nprint(f)"


@pytest.mark.parametrize("src", [f"{BEGIN}\nx", f"x\n{END}", f"{BEGIN}\n{BEGIN}\n{END}\n{END}"])
def test_unbalanced_markers_are_errors(src):
    with pytest.raises(ValueError):
        stub_source(src)


def test_every_solution_has_an_exercise_and_they_are_in_sync():
    assert solutions(), "no solution notebooks found"
    assert [p.name for p in EXERCISES] == [p.name for p in solutions()]
    assert out_of_date() == [], "run `make exercises`"


@pytest.mark.parametrize("path", solutions(), ids=lambda p: p.stem)
def test_solution_marks_a_learner_part_and_a_check(path):
    nb = nbformat.read(path, as_version=4)
    assert any(BEGIN in c.source for c in nb.cells if c.cell_type == "code")
    assert any("check" in c.metadata.get("tags", []) for c in nb.cells)


@pytest.mark.parametrize("path", solutions(), ids=lambda p: p.stem)
def test_exercise_carries_no_solution_and_no_outputs(path):
    ex = make_exercise(nbformat.read(path, as_version=4))
    for cell in ex.cells:
        assert BEGIN not in cell.source and END not in cell.source
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None


@pytest.mark.timeout(240)
@pytest.mark.parametrize("path", EXERCISES, ids=lambda p: p.stem)
def test_check_cells_fail_on_the_stub(path):
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=180, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    first_stub = next(i for i, c in enumerate(nb.cells) if STUB in c.source)
    for i, cell in enumerate(nb.cells[:first_stub]):
        if cell.cell_type == "code":
            assert not [o for o in cell.outputs if o.output_type == "error"], f"cell {i} fails before the stub"
    checks = [c for c in nb.cells if "check" in c.metadata.get("tags", [])]
    assert checks
    for cell in checks:
        errors = [o for o in cell.outputs if o.output_type == "error"]
        assert errors, f"a check cell passed on the stub:\n{cell.source}"
        text = errors[0].ename + errors[0].evalue + "\n".join(errors[0].traceback)
        assert "NotImplementedError" in text, f"the check failed for another reason: {errors[0].ename}"
