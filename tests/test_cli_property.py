"""Property (issue 7 item 5): any combination of values, letter cases and zeros given to the CLI or
to ``Plan`` gives either the same numbers as the canonical spelling, or exit status 2 with exactly
one line on stderr (a ValueError / TypeError in the library) - never a traceback, never status 0
with a value silently replaced."""

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parlab.cli import main
from parlab.costmodel import Plan, estimate, get_model, make_cluster

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])



def mostly(good: list[str], bad: list[str], odds: int = 5):
    """A value that is valid ``odds`` times in ``odds + 1`` (so both outcomes are exercised)."""
    return st.integers(0, odds).flatmap(lambda i: st.sampled_from(bad if i == odds else good))


COUNTS = mostly(["1", "2", "4", "8", "16"], ["-1", "0", "1.5", "abc", ""])
NAMES = {
    "--schedule": ["gpipe", "1f1b", "gpipe", "1f1b", "interleaved", "zigzag"],
    "--recompute": ["none", "selective", "full", "Full", "some"],
    "--offload": ["none", "none", "optimizer", "optimizer+params", "disk"],
    "--dtype": ["bf16", "fp16", "fp32", "mixed", "amp", "mixed-fp32-grad", "fp8", "pure-bf16"],
    "--cluster": ["dgx-a100", "pcie-10gbe", "dgx-h100", "selene", "cray"],
    "--model": ["llama-7b", "gpt3-13b", "7b", "13b", "gpt5"],
}
KNOWN = {"gpipe", "1f1b", "interleaved", "none", "selective", "full", "optimizer", "optimizer+params", "bf16",
         "fp16", "fp32", "mixed", "amp", "mixed-fp32-grad", "pure-bf16", "dgx-a100", "pcie-10gbe", "dgx-h100",
         "selene", "llama-7b", "gpt3-13b", "7b"}


@st.composite
def cased(draw, word: str) -> str:
    """``word`` with each letter's case flipped at random, sometimes padded with spaces."""
    letters = [c.upper() if draw(st.booleans()) else c for c in word]
    return ("  " if draw(st.booleans()) else "") + "".join(letters)


@st.composite
def estimate_argv(draw):
    """(argv as typed, argv in canonical spelling, the counts given)."""
    typed, canon, counts = ["estimate"], ["estimate"], {}
    flags = ["--gpus", "--dp", "--tp", "--pp", "--micro-batch", "--global-batch", "--seq", "--gpus-per-node",
             "--nics", "--gpus", "--tp", "--pp", "--chunks"]
    for flag in draw(st.lists(st.sampled_from(flags), unique=True, max_size=4)):
        value = draw(COUNTS)
        typed += [flag, value]
        canon += [flag, value]
        counts[flag] = value
    for flag in draw(st.lists(st.sampled_from(list(NAMES)), unique=True, max_size=4)):
        word = draw(st.sampled_from(NAMES[flag]))
        typed += [flag, draw(cased(word))]
        canon += [flag, word]
    if draw(st.booleans()):
        zero = draw(mostly(["0", "1", "2", "3"], ["4", "-1", "a"]))
        typed += ["--zero", zero]
        canon += ["--zero", zero]
        counts["--zero"] = zero
    if draw(st.booleans()):
        tokens = draw(mostly(["300B", "300b", "1.5T", "2e12"], ["abc", "0", "-5B", "inf", "nan"]))
        typed += ["--tokens", tokens]
        canon += ["--tokens", tokens.upper() if tokens.endswith("b") else tokens]
        counts["--tokens"] = tokens
    return typed, canon, counts


def run(capsys, argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _bad_count(flag: str, value: str) -> bool:
    if flag == "--zero":
        return value not in ("0", "1", "2", "3")
    if flag == "--tokens":
        return value in ("abc", "0", "-5B", "inf", "nan")
    return not value.isdigit() or int(value) < 1


def _assert_one_line_error(code, out, err):
    assert code == 2, (code, out, err)
    assert out == "" and "Traceback" not in err
    assert len(err.splitlines()) == 1 and err.endswith("\n") and err.startswith("parlab ")


@SETTINGS
@given(estimate_argv())
def test_estimate_gives_the_canonical_numbers_or_one_line_and_status_2(capsys, case):
    typed, canon, counts = case
    code, out, err = run(capsys, typed)
    if code != 0:
        _assert_one_line_error(code, out, err)
        assert run(capsys, canon)[0] == 2  # the canonical spelling fails too: only the case differs
        return
    assert err == ""
    # never status 0 with a substituted value: every count given was a valid one ...
    assert not [f for f, v in counts.items() if _bad_count(f, v)], (typed, out)
    # ... and is the one used
    for flag, key in (("--tp", "tp"), ("--pp", "pp"), ("--dp", "dp")):
        if flag in counts:
            assert re.search(rf"\b{key}={int(counts[flag])}\b", out), (typed, out)
    if "--gpus" in counts:
        assert f"cluster: {int(counts['--gpus']):,} x" in out
    assert run(capsys, canon) == (0, out, "")  # the same numbers as the canonical spelling


@st.composite
def search_argv(draw):
    typed, canon = ["search", "--model", "llama-7b"], ["search", "--model", "llama-7b"]
    for flag, good, bad in (("--gpus", ["4", "8", "16"], ["0", "-8", "x"]), ("--global-batch", ["8", "16"], ["0", "1.0"]),
                            ("--top", ["1", "3"], ["-1", "0"]), ("--zero", ["0,1", "3", "0,1,2,3"], ["a", "0,,1", "5", ""]),
                            ("--micro-batches", ["1", "1,2"], ["0", "2,x"])):
        value = draw(mostly(good, bad, 12))
        typed += [flag, value]
        canon += [flag, value]
    for flag, good, bad in (("--recompute", ["full", "selective,full"], ["none,some"]),
                            ("--dtype", ["bf16", "mixed", "fp32"], ["fp8"]), ("--cluster", ["dgx-a100", "pcie-10gbe"], ["x"])):
        word = draw(mostly(good, bad, 12))
        typed += [flag, ",".join(draw(cased(w)) for w in word.split(","))]
        canon += [flag, word]
    return typed, canon


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(search_argv())
def test_search_gives_the_canonical_ranking_or_one_line_and_status_2(capsys, case):
    typed, canon = case
    code, out, err = run(capsys, typed)
    if code != 0:
        _assert_one_line_error(code, out, err)
        return
    values = dict(zip(typed[1::2], typed[2::2], strict=True))
    assert int(values["--gpus"]) > 0 and int(values["--global-batch"]) > 0 and int(values["--top"]) > 0
    assert f"{int(values['--gpus']):,} x" in out
    assert run(capsys, canon) == (0, out, "")


@SETTINGS
@given(dtype=st.sampled_from(NAMES["--dtype"]), optimizer=st.sampled_from(["adam", "sgd", "none", "lion"]),
       model=st.sampled_from(["7b", "llama-7b", "0B", "gpt5"]), data=st.data())
def test_memory_gives_the_canonical_numbers_or_one_line(capsys, dtype, optimizer, model, data):
    typed = ["memory", "--dtype", data.draw(cased(dtype)), "--optimizer", data.draw(cased(optimizer)),
             "--model", data.draw(cased(model))]
    code, out, err = run(capsys, typed)
    if code != 0:
        _assert_one_line_error(code, out, err)
        return
    assert run(capsys, ["memory", "--dtype", dtype, "--optimizer", optimizer, "--model", model]) == (0, out, "")


# -- the same property for Plan itself -----------------------------------------------------------
@st.composite
def plan_kwargs(draw):
    kwargs, canon = {}, {}
    for field in draw(st.lists(st.sampled_from(["dp", "tp", "pp", "micro_batch", "chunks", "global_batch",
                                                "micro_batches", "zero"]), unique=True, max_size=4)):
        value = draw(mostly([1, 2, 4, 8], [-1, 0, 2.0, True, "2", None], 3))
        kwargs[field] = canon[field] = value
    for field, words in (("schedule", ["gpipe", "1f1b", "interleaved"]), ("recompute", ["none", "selective", "full"]),
                         ("dtype", ["bf16", "fp16", "fp32", "mixed"]), ("offload", ["none", "optimizer"])):
        if draw(st.booleans()):
            word = draw(st.sampled_from(words))
            kwargs[field], canon[field] = draw(cased(word)), word
    if draw(st.booleans()):
        kwargs["sequence_parallel"] = canon["sequence_parallel"] = draw(st.sampled_from([True, False, "False", 0]))
    return kwargs, canon


MODEL, CLUSTERS = get_model("gpt3-13b"), {}


@settings(max_examples=150, deadline=None)
@given(plan_kwargs())
def test_plan_is_the_canonical_plan_or_a_value_or_type_error(case):
    kwargs, canon = case
    try:
        plan = Plan(**kwargs)
    except (ValueError, TypeError) as err:
        assert "\n" not in str(err)
        with pytest.raises((ValueError, TypeError)):
            Plan(**canon)
        return
    assert plan == Plan(**canon)
    for field in ("dp", "tp", "pp", "micro_batch", "chunks", "global_batch", "micro_batches", "zero"):
        if field in kwargs and kwargs[field] is not None:  # no value was swallowed or replaced
            assert type(kwargs[field]) is int and getattr(plan, field) == kwargs[field]
    if plan.n_gpus <= 64:
        cluster = CLUSTERS.setdefault(plan.n_gpus, make_cluster("dgx-a100", plan.n_gpus))
        try:
            a = estimate(MODEL, cluster, plan)
        except ValueError:
            return
        b = estimate(MODEL, cluster, Plan(**canon))
        assert (a.memory_total, a.step_time) == (b.memory_total, b.step_time)
