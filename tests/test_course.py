"""``coursekit/course.py`` declares each exercise once; its files must say the same.

Every exercise module of the repository is declared (no stub without a declaration, none
declared without its stub, reference and checks with points; its own public test file, if any, carries
its marker), numbered 1..N, and the
stub's first line is its heading (``Exercise N · title``): the declaration is the course's only
list of exercises, so a file it does not name would be ignored by every tool.
"""

from __future__ import annotations

import ast
import re

import pytest

from coursekit.course import EXERCISES, MARKERS, by_module, readme_table
from coursekit.impl import REPO_ROOT
from grader import rubric
from grader.checks import Check
from grader.exercises import public_checks
from grader.judge import all_checks


def test_exercises_are_numbered_one_to_n_with_distinct_modules():
    assert [e.number for e in EXERCISES] == list(range(1, len(EXERCISES) + 1)), (
        "exercises must be numbered 1, 2, ... in course order (coursekit/course.py)"
    )
    assert len(MARKERS) == len(EXERCISES), "two exercises declare the same module"


def test_every_module_file_is_declared():
    for folder in ("exercises", "solutions"):
        found = {p.stem for p in (REPO_ROOT / folder).glob("[a-z]*.py")}
        assert found == set(MARKERS), (
            f"{folder}/ holds modules {sorted(found - set(MARKERS))} that coursekit/course.py does "
            f"not declare, and lacks {sorted(set(MARKERS) - found)} that it does"
        )


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: e.marker)
def test_each_declaration_matches_its_files(exercise):
    stub = (REPO_ROOT / "exercises" / f"{exercise.module}.py").read_text(encoding="utf-8")
    assert stub.startswith(f'"""{exercise.stub_heading}'), (
        f"exercises/{exercise.module}.py must start with the heading \"{exercise.stub_heading}\" "
        f"(coursekit/course.py), it starts {stub.splitlines()[0]!r}"
    )
    reference = (REPO_ROOT / "solutions" / f"{exercise.module}.py").read_text(encoding="utf-8")
    assert reference.startswith(f'"""Exercise {exercise.number} reference:'), (
        f"solutions/{exercise.module}.py must start with \"Exercise {exercise.number} reference:\""
    )
    test = REPO_ROOT / "exercises" / "tests" / f"test_{exercise.module}.py"
    # Its own public tests are optional (test_checks.py runs its checks); if there, marked.
    text = test.read_text(encoding="utf-8") if test.is_file() else f"pytestmark = pytest.mark.{exercise.marker}"
    marks = re.findall(r"pytestmark = pytest\.mark\.(ex\d+)", text)
    assert marks == [exercise.marker], (
        f"{test.relative_to(REPO_ROOT)} must carry `pytestmark = pytest.mark.{exercise.marker}`, found {marks}"
    )
    points = rubric.load()
    assert any(c.startswith(f"{exercise.marker}.") for c in points.checks), (
        f"grader/exercises/{exercise.module}.py has no check of {exercise.marker} with points"
    )


def test_the_readme_table_is_the_declarations():
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    assert f"<!-- exercises -->\n{readme_table()}<!-- /exercises -->\n" in readme, (
        "README.md's table of exercises is not coursekit/course.py's: run `python -m grader build`"
    )


def test_points_are_written_on_the_checks_not_in_a_rubric_table():
    with pytest.raises(rubric.RubricError, match=r"\[ex5\].*`points=` in grader/exercises"):
        rubric.parse("[course]\ntotal = 1\n[ex5.public]\npadded_size = 1\n", checks=[])


@pytest.mark.parametrize("points", [0, -1, True, "2", None])
def test_a_check_without_points_is_refused(points):
    check = Check("ex5", "padded_size", "rule", [], points=points)
    with pytest.raises(rubric.RubricError, match=r"ex5.padded_size must be worth .* got"):
        rubric.parse("[course]\ntotal = 1\n", checks=[check])


def test_the_rubric_is_every_check_with_its_points():
    points = rubric.load()
    checks = all_checks()
    assert points.checks == {c.id: float(c.points) for c in checks}
    assert points.hidden_ids == {c.id for c in checks if c.hidden}


def test_a_check_filed_under_another_exercise_is_refused(monkeypatch):
    import grader.exercises.buckets as buckets

    real = buckets.checks
    monkeypatch.setattr(buckets, "checks", lambda draw: real(draw) + [Check("ex6", "stray", "rule", [], points=1)])
    with pytest.raises(LookupError, match=r"grader/exercises/buckets.py.*ex6.stray.*ex5"):
        public_checks()


def test_by_module_names_what_it_did_not_find():
    assert by_module("buckets").marker == "ex5"
    with pytest.raises(KeyError, match="nope"):
        by_module("nope")


def test_no_exercise_list_is_kept_anywhere_else():
    """The lists this declaration replaced (a tuple of (number, module), a module -> marker map,
    exercise markers in pyproject.toml, f"ex{i}" for i in range(1, 9)) must not come back."""
    pyproject = (REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert not re.search(r'"ex\d+:', pyproject), "exercise markers are registered by conftest.py"
    listed = re.compile(r'\(1, "launch_model"\)|"launch_model": "ex1"|f"ex\{\w+\}" for \w+ in range\(')
    for path in [*REPO_ROOT.glob("*/*.py"), *REPO_ROOT.glob("*/*/*.py")]:
        if ".venv" in path.parts or path.name == "test_course.py":
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        assert not listed.search(text), f"{path.relative_to(REPO_ROOT)} keeps its own exercise list"
        ast.parse(text)  # (a file that does not parse would hide a list from this search)


def test_the_bucket_checks_boundaries_come_from_vllms_lists():
    """The ex5 check's boundary inputs are read from vLLM 0.26.0's recorded lists (where the stride
    changes, and either side), not hand-picked: a new rule moves them. The reference follows the
    recorded lists (the public tests, run on it by tests/test_corpus.py)."""
    from coursekit.vllm_recorded import explicit_max_cases
    from grader.exercises.buckets import bucket_boundaries

    cases = dict(explicit_max_cases())
    sizes = cases[max(cases)]
    turns = [b for a, b, c in zip(sizes, sizes[1:], sizes[2:]) if c - b != b - a]
    assert len(turns) >= 3, f"vLLM's pattern changes its stride only at {turns}: is the data read?"
    boundaries = set(bucket_boundaries())
    for first in turns + [512]:
        assert {first - 1, first, first + 1} <= boundaries, f"the check does not ask max_size {first} or beside it"


def test_a_declared_exercise_without_checks_is_named(monkeypatch):
    from coursekit import course
    from grader import exercises

    extra = course.Exercise(len(course.EXERCISES) + 1, "new_one", "a new exercise", "x", "CPU", "an idea")
    monkeypatch.setattr(exercises, "EXERCISES", course.EXERCISES + (extra,))
    with pytest.raises(LookupError, match="grader/exercises/new_one.py is missing"):
        exercises.public_checks()


NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?:e-?\d+)?(?!\w|\.\d)")


def test_every_number_a_check_states_is_in_the_stub():
    """A check's rule (shown with every lost point) and the stub (the student's contract) state a
    rule twice; the numbers are where they drift apart. Every number a check's rule states (a
    default, a tolerance, a boundary) must also be a number of its exercise's stub, so a rule
    changed in one place only fails here."""
    stale = []
    for exercise in EXERCISES:
        stub = (REPO_ROOT / "exercises" / f"{exercise.module}.py").read_text(encoding="utf-8")
        stated = {float(n) for n in NUMBER.findall(stub)}
        for check in all_checks():
            if check.exercise == exercise.marker:
                stale += [
                    f"{check.id}: {n} (rule: {check.rule})"
                    for n in NUMBER.findall(check.rule)
                    if float(n) not in stated
                ]
    assert not stale, (
        "numbers in a check's rule that its stub (exercises/<module>.py) does not "
        "state; change both, or say it in the stub:\n  " + "\n  ".join(stale)
    )


# ------------------------------------------------------------------------------- points by idea


def _error_probes(check: Check) -> int:
    """Probes that only ask for a refusal: a ValueError/TypeError naming an argument (not a failed
    capture's own error)."""
    return sum(1 for p in check.probes if p.raises and p.error in ("ValueError", "TypeError"))


def test_the_readme_states_the_points_by_idea():
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    table = rubric.ideas_table(all_checks())
    assert f"<!-- ideas -->\n{table}<!-- /ideas -->\n" in readme, (
        "README.md's points by idea (<!-- ideas -->) differ from the checks' ideas and points; "
        "run `python -m grader build`. They should read:\n" + table
    )


def test_argument_checks_carry_the_arguments_idea():
    """A check that mostly asks for refusals rewards validation, not an idea of the lesson: it
    must say so (``idea=ARGUMENTS``, worth at most ``ARGUMENTS_AT_MOST`` points, none since the
    argument checks are given), so that the README's split is true; and a check that says so
    must ask for at least one refusal."""
    from coursekit.course import ARGUMENTS

    for check in all_checks():
        refusals = _error_probes(check)
        if check.idea == ARGUMENTS:
            assert refusals, f"{check.id} carries idea=ARGUMENTS but asks for no refusal"
        else:
            assert refusals * 2 <= len(check.probes), (
                f"{check.id}: {refusals} of its {len(check.probes)} probes ask for a refusal: "
                "argument checks are given code (coursekit/argcheck.py, called from the stubs) and "
                "earn nothing; ask the exercise's idea instead"
            )


def test_argument_checks_are_capped():
    from coursekit.course import ARGUMENTS, ARGUMENTS_AT_MOST

    held = sum(c.points for c in all_checks() if rubric.idea_of(c) == ARGUMENTS)
    assert held <= ARGUMENTS_AT_MOST, f"argument checks hold {held:g} points, at most {ARGUMENTS_AT_MOST}"
    extra = Check("ex1", "more_refusals", "refuses", [], idea=ARGUMENTS, points=ARGUMENTS_AT_MOST + 1)
    with pytest.raises(rubric.RubricError, match="ARGUMENTS_AT_MOST"):
        rubric.points_by_idea(all_checks() + [extra])
