"""The ex04 checker (``parlab.checks.pipeline``): passes the library's 1F1B, and rejects, with one
line naming the case and the rule, a GPipe order, a deadlocking order, a wrong return value, an
order with too much warm-up, and the stub."""

from __future__ import annotations

import pytest

from parlab.checks.pipeline import CASES, check_case, check_one_f_one_b
from parlab.schedules import Op, Schedule, gpipe, one_f_one_b, zero_bubble_h1


def test_the_library_1f1b_passes(capsys):
    check_one_f_one_b(one_f_one_b)
    assert "1F1B correct for 42" in capsys.readouterr().out
    assert len(CASES) == 42 and (1, 1) in CASES and (8, 12) in CASES


def test_op_lists_are_accepted_as_well_as_a_schedule():
    check_one_f_one_b(lambda p, m: [list(ops) for ops in one_f_one_b(p, m).stages])


def one_line(fn) -> str:
    with pytest.raises(AssertionError) as err:
        check_one_f_one_b(fn)
    text = str(err.value)
    assert "\n" not in text
    return text


def test_gpipe_passed_off_as_1f1b_is_named():
    assert "GPipe's order" in one_line(gpipe)
    assert "GPipe's order" in one_line(lambda p, m: Schedule("1F1B", p, m, 1, gpipe(p, m).stages))


def test_a_deadlock_names_the_waiting_op():
    def backward_first(p, m):  # every stage starts with a backward: nothing can start
        stages = one_f_one_b(p, m).stages
        return [[*ops[1:2], ops[0], *ops[2:]] if len(ops) > 1 else list(ops) for ops in stages]
    msg = one_line(backward_first)
    assert "not runnable" in msg and "rule" in msg


def test_too_much_warm_up_is_caught_by_the_activation_count():
    def eager(p, m):  # one extra warm-up forward on every stage but the last
        stages = []
        for r in range(p):
            w = min(p - r, m) if r < p - 1 else 0
            ops = [Op("F", i) for i in range(w)]
            for i in range(m - w):
                ops += [Op("F", w + i), Op("B", i)]
            stages.append(ops + [Op("B", i) for i in range(m - w, m)])
        return Schedule("1F1B", p, m, 1, stages)
    msg = one_line(eager)
    assert "holds up to" in msg and "min(p - r, m)" in msg


def test_wrong_returns_and_split_backward_are_named():
    assert "must return a Schedule" in one_line(lambda p, m: 42)
    assert "op lists" in one_line(lambda p, m: [[]] * (p + 1))
    assert "W is zero bubble" in one_line(zero_bubble_h1)
    with pytest.raises(AssertionError, match="expected p=2, m=3"):
        check_case(lambda p, m: one_f_one_b(p + 1, m), 2, 3)


def test_the_stub_error_passes_through():
    def stub(p, m):
        raise NotImplementedError("exercise")
    with pytest.raises(NotImplementedError):
        check_one_f_one_b(stub)
