"""The cost model, the schedules and the rank layout stay pure Python (issue 19, item 14): a later
step runs them where numpy and torch are not installed, so importing them must not import either."""

import json
import subprocess
import sys

HEAVY = ("numpy", "torch", "matplotlib", "pandas")


def test_costmodel_schedules_and_layout_import_no_numpy_or_torch():
    code = ("import json, sys; import parlab.costmodel, parlab.schedules, parlab.layout; "
            f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_the_decode_fit_without_numpy_is_the_least_squares_solution():
    """The 2 x 2 normal equations give the exact solution of a consistent system and the
    minimiser of an inconsistent one (its residual is orthogonal to both columns)."""
    from parlab.costmodel.pricing.inference import _least_squares_2

    design = [[1.0, 2.0], [2.0, 1.0], [3.0, 5.0]]
    assert [round(v, 12) for v in _least_squares_2(design, [1 * 3 + 2 * 4, 2 * 3 + 1 * 4, 3 * 3 + 5 * 4])] == [3, 4]
    target = [1.0, 0.0, 2.0]
    x, y = _least_squares_2(design, target)
    resid = [t - (a * x + b * y) for (a, b), t in zip(design, target, strict=True)]
    assert abs(sum(r * a for r, (a, _) in zip(resid, design, strict=True))) < 1e-12
    assert abs(sum(r * b for r, (_, b) in zip(resid, design, strict=True))) < 1e-12
