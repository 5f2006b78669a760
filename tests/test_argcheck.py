"""The given argument checks (coursekit/argcheck.py), on their own.

The exercises' stubs call them, and their public tests marked ``given`` check that each exercise
refuses what its docstring says; this file checks the validators themselves, with hypothesis, and
proves each defence can fail: ``WRONG`` holds plausible wrong versions (NaN let through, a bool
taken for an int, an iterable read twice...), and each must break a rule ``problems`` checks.
It also holds the old name, ``coursekit/args.py`` (issue 43), to its promise: the same checks, and a
submission of the previous release, written with it, still grades.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from coursekit import argcheck
from coursekit.impl import REPO_ROOT
from tests.harness import submission

SOURCE = Path(argcheck.__file__).read_text(encoding="utf-8")
NOT_NUMBERS = [True, False, "3", None, [1.0], float("nan"), float("inf"), -float("inf")]


def refused(fn, name: str, error: type = ValueError) -> str | None:
    """None when ``fn()`` raises ``error`` whose message starts with ``name``; else what happened."""
    try:
        got = fn()
    except error as exc:
        return None if str(exc).startswith(name) else f"{error.__name__} not naming {name}: {exc}"
    except Exception as exc:  # noqa: BLE001 - the wrong error is the finding
        return f"{type(exc).__name__} instead of {error.__name__}: {exc}"
    return f"accepted, returned {got!r}"


def problems(a: types.ModuleType) -> list[str]:
    """Every rule of coursekit/argcheck.py that module ``a`` breaks (empty for the real one)."""
    found = []

    def expect(what, problem):
        if problem:
            found.append(f"{what}: {problem}")

    for bad in NOT_NUMBERS + [-0.5]:
        expect(f"number({bad!r})", refused(lambda: a.number("t", bad), "t"))
    expect("number(0, above=0)", refused(lambda: a.number("t", 0, above=0.0), "t"))
    if a.number("t", 3) != 3.0 or type(a.number("t", 3)) is not float:
        found.append("number('t', 3) is not the float 3.0")
    for bad in (True, 2.0, "2", None, 0):
        expect(f"count({bad!r}, at_least=1)", refused(lambda: a.count("n", bad, at_least=1), "n"))
    expect("count(5, at_most=4)", refused(lambda: a.count("n", 5, at_most=4), "n"))
    once = iter([3, 1])
    if a.counts("s", once) != [3, 1]:
        found.append("counts of a generator is not its items, in order (read once)")
    expect("counts([])", refused(lambda: a.counts("s", [], nonempty=True), "s"))
    expect("counts([1, True])", refused(lambda: a.counts("s", [1, True]), "s"))
    expect("numbers([1, nan])", refused(lambda: a.numbers("k", [1.0, float("nan")]), "k"))
    if a.numbers("k", iter([1, 2.5])) != [1.0, 2.5]:
        found.append("numbers of a generator is not its items as floats")
    for bad in (1, 0, "yes", None):
        expect(f"flag({bad!r})", refused(lambda: a.flag("f", bad), "f"))
    for bad in ("V1", "v3", None, True, 1):
        expect(f"one_of({bad!r}, ('v1', 'v2'))", refused(lambda: a.one_of("runner", bad, ("v1", "v2")), "runner"))
    expect("one_of(1, (1, 2))", refused(lambda: a.one_of("k", True, (1, 2)), "k"))
    if a.one_of("runner", "v2", ("v1", "v2")) != "v2":
        found.append("one_of('v2', ('v1', 'v2')) is not 'v2'")
    x = torch.zeros(3, 2)
    expect("tensor([1])", refused(lambda: a.tensor("x", [1.0]), "x"))
    expect(
        "tensor(rows (2, 3), row_shape=(3, 2))",
        refused(lambda: a.tensor("x", torch.zeros(4, 2, 3), row_shape=(3, 2)), "x"),
    )
    expect("tensor(shape (3, 2), shape=(2, 3))", refused(lambda: a.tensor("x", x, shape=(2, 3)), "x"))
    expect("tensor(float32, dtype=float64)", refused(lambda: a.tensor("x", x, dtype=torch.float64), "x"))
    expect("tensor(cpu, device=meta)", refused(lambda: a.tensor("x", x, device="meta"), "x"))
    expect("inputs_like(1 of 2)", refused(lambda: a.inputs_like("inputs", (x,), (x, x)), "inputs", TypeError))
    expect("inputs_like(reshaped)", refused(lambda: a.inputs_like("inputs", (x, x.reshape(6)), (x, x)), "inputs[1]"))
    rows = torch.tensor([0, 4])
    expect("index_rows(value 4 > 3)", refused(lambda: a.index_rows("slots", rows, device="cpu", high=3), "slots"))
    expect("index_rows(2 rows of 3)", refused(lambda: a.index_rows("slots", rows, device="cpu", rows=3), "slots"))
    expect("index_rows(int32)", refused(lambda: a.index_rows("slots", rows.int(), device="cpu"), "slots"))
    expect("index_rows(0 rows)", refused(lambda: a.index_rows("slots", rows[:0], device="cpu"), "slots"))
    expect(
        "decode_requests(one past the cache)",
        refused(lambda: a.decode_requests([[1, 2]], 4, max_seqs=2, max_seq_len=4), "max_new_tokens"),
    )
    expect("same_length([1, 2], [1])", refused(lambda: a.same_length("n", [1, 2], "s", [1]), "n"))
    return found


def test_the_given_checks_keep_their_rules():
    assert problems(argcheck) == []


#: Plausible wrong versions of coursekit/argcheck.py: (why, old text, new text).
WRONG = [
    ("NaN slips through a plain value < 0 check", "    if not math.isfinite(value):\n", "    if False:\n"),
    (
        "a bool is taken for a number",
        "    if isinstance(value, bool) or not isinstance(value, (int, float)):",
        "    if not isinstance(value, (int, float)):",
    ),
    (
        "a bool is taken for a count",
        "    if isinstance(value, bool) or not isinstance(value, int):\n        floor =",
        "    if not isinstance(value, int):\n        floor =",
    ),
    ("an empty iterable accepted where one value is needed", "    if nonempty and not checked:", "    if False:"),
    (
        "a generator read twice (empty the second time)",
        "        return list(values)\n",
        "        list(values)\n        return list(values)\n",
    ),
    ("1 taken for a bool", "    if not isinstance(value, bool):", "    if value not in (True, False):"),
    (
        "rows compared by element count, not shape",
        "    if row_shape is not None and (value.dim() < 1 or tuple(value.shape[1:]) != tuple(row_shape)):",
        "    if row_shape is not None and (value.dim() < 1 or value[0].numel() != math.prod(row_shape)):",
    ),
    ("a dtype not checked", "    if dtype is not None and value.dtype != dtype:", "    if False:"),
    ("an index's range not checked", "    if high is not None and x.device.type == \"cpu\"", "    if False"),
    (
        "a request one past the cache accepted",
        "        if len(p) + m - 1 > max_seq_len:",
        "        if len(p) + m - 2 > max_seq_len:",
    ),
    (
        "a choice compared by == alone (True taken for 1)",
        "    if not any(type(value) is type(c) and value == c for c in choices):",
        "    if value not in choices:",
    ),
    ("lengths compared by identity", "    if len(a) != len(b):", "    if a is not b and False:"),
]


@pytest.mark.parametrize("why, old, new", WRONG, ids=[w[0] for w in WRONG])
def test_a_wrong_check_breaks_a_rule(why, old, new):
    assert SOURCE.count(old) == 1, f"the wrong version '{why}' no longer applies to coursekit/argcheck.py"
    wrong = types.ModuleType("wrong_argcheck")
    exec(compile(SOURCE.replace(old, new), "wrong_argcheck", "exec"), wrong.__dict__)  # noqa: S102 - the module's own source, one check made wrong
    assert problems(wrong), f"coursekit/argcheck.py with '{why}' breaks no rule test_argcheck checks"


@given(st.floats(allow_nan=False, allow_infinity=False, min_value=0.0))
def test_number_keeps_every_finite_value_at_or_above_its_floor(value):
    assert argcheck.number("t", value) == value


@given(st.integers(max_value=-1) | st.floats(max_value=-1e-300))
def test_number_refuses_below_its_floor_naming_the_argument(value):
    assert refused(lambda: argcheck.number("launch_us", value), "launch_us") is None


@given(st.lists(st.integers(1, 10**6), max_size=20))
def test_counts_read_any_iterable_once(values):
    assert argcheck.counts("capture_sizes", (v for v in values), at_least=1) == values


@given(st.integers(-5, 5), st.integers(-5, 5))
def test_count_holds_its_bounds(value, at_least):
    if value >= at_least:
        assert argcheck.count("n", value, at_least=at_least) == value
    else:
        assert refused(lambda: argcheck.count("n", value, at_least=at_least), "n") is None


def test_one_device_under_two_names():
    assert argcheck.same_device("cuda", "cuda:0") and argcheck.same_device("cpu:0", "cpu")
    assert not argcheck.same_device("cuda:1", "cuda") and not argcheck.same_device("cpu", "cuda:0")


def test_an_index_off_the_cpu_is_never_read():
    """On CUDA, reading values makes the CPU wait for the GPU; a meta tensor has no values to read,
    so a check that read them would raise here."""
    x = torch.empty(4, dtype=torch.long, device="meta")
    assert argcheck.index_rows("tokens", x, device="meta", rows=4, high=1) == 4


def test_need_cuda_is_a_runtime_error(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(RuntimeError, match="CUDA device"):
        argcheck.need_cuda("capture")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert argcheck.need_cuda("capture") is None


def test_messages_say_what_was_expected_and_what_came():
    with pytest.raises(ValueError) as info:
        argcheck.count("n_layers", True, at_least=1)
    assert str(info.value) == "n_layers: expected an int >= 1 (not a bool, not a float), got True"
    with pytest.raises(ValueError, match=r"kernel_us\[1\]: expected a finite number, got nan"):
        argcheck.numbers("kernel_us", [1.0, math.nan])


def test_decode_requests_read_once_and_hold_the_cache():
    prompts, counts = argcheck.decode_requests(iter([(1, 2), [3]]), 3, max_seqs=2, max_seq_len=4)
    assert prompts == [[1, 2], [3]] and counts == [3, 3]
    assert refused(lambda: argcheck.decode_requests([[1], [2], [3]], 1, max_seqs=2, max_seq_len=4), "prompts") is None
    assert refused(lambda: argcheck.decode_requests([[1], []], 1, max_seqs=2, max_seq_len=4), "prompts") is None
    assert refused(lambda: argcheck.decode_requests([[1]], [1, 1], max_seqs=2, max_seq_len=4), "max_new_tokens") is None
    assert refused(lambda: argcheck.decode_requests([[1, 2]], 4, max_seqs=2, max_seq_len=4), "max_new_tokens") is None
    assert argcheck.decode_requests([[1, 2]], 3, max_seqs=2, max_seq_len=4)[1] == [3]  # exactly full: fine


def test_instance_and_same_length_name_what_is_wrong():
    assert refused(lambda: argcheck.instance("mode", 2, bool), "mode") is None
    assert refused(lambda: argcheck.same_length("n_kernels", [1, 2], "step_ms", [1]), "n_kernels") is None
    assert argcheck.same_length("a", [1], "b", (2,)) is None


def test_the_old_name_is_the_same_module_s_checks():
    """``from coursekit import args``, the previous release's line: every name is argcheck's own
    object (its ``__all__``, and the rest, e.g. ``same_device``), so the rules hold there too."""
    from coursekit import args

    assert args.__all__ == argcheck.__all__
    for name in [*argcheck.__all__, "same_device"]:
        assert getattr(args, name) is getattr(argcheck, name), name
    assert problems(args) == []
    with pytest.raises(AttributeError, match="coursekit.args"):
        getattr(args, "no_such_check")


def old_release(source: str) -> str:
    """A module of the reference as the previous release wrote it: ``from coursekit import args``
    and ``args.count(...)``."""
    old = source.replace("from coursekit import argcheck\n", "from coursekit import args\n")
    return re.sub(r"(?<![\w.])argcheck\.", "args.", old)


def test_a_submission_written_with_the_old_name_still_grades(tmp_path):
    """The grader copies coursekit/ beside each submission; with args.py there, a hand-in whose
    modules all say ``from coursekit import args`` keeps every point of the CPU exercises graded
    here (1, 6 and 9: a function, a constructor and a module-level given line each)."""
    old = {p.stem: old_release(p.read_text(encoding="utf-8")) for p in (REPO_ROOT / "solutions").glob("[a-z]*.py")}
    assert all("from coursekit import args\n" in text and "argcheck" not in text for text in old.values())
    folder = submission(tmp_path / "old", **old)
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "grader",
            "grade",
            str(folder),
            "--only",
            "ex1,ex6,ex9",
            "--json",
            str(tmp_path / "r.json"),
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    tests = json.loads((tmp_path / "r.json").read_text())["tests"]
    graded = [t for t in tests if t["extra_data"].get("state") != "manual"]
    assert {t["tags"][0] for t in graded} == {"ex1", "ex6", "ex9"}, run.stdout
    lost = [t["name"] for t in graded if t["score"] != t["max_score"]]
    assert lost == [], f"the old-style submission lost points on {lost}:\n{run.stdout}"
