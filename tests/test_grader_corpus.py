"""The grader against the corpus: the reference and every alternative keep every point, the
stubs get none, every wrong implementation in tests/mutants/ loses points in its exercise
(on the CPU checks; the GPU-only mutants on a CUDA machine), and the rubric adds up to 100 —
in practice mode (the release's fixed inputs) and in official grading (inputs drawn from a
grading secret and the submission: here a fixed secret, so that a failure can be replayed;
``python -m tests.kill_matrix --secrets N`` draws N fresh ones).

The workers here are forked from a warm process, without the sandbox (tests/warm_worker.py):
these tests are about what the checks conclude. Grading through the sandbox is tested by
tests/test_grader_cli.py, tests/test_adversarial*.py and the other command-line tests."""

import pytest

from coursekit.impl import REPO_ROOT
from grader.judge import Judge, all_checks, load_rubric, runtime_files
from grader.secret import GradingSecret
from grader.submission import load
from tests import mutants, warm_worker
from tests.harness import submission


#: Official grading in these tests: a fixed secret, so that a failure can be replayed.
CORPUS_SECRET = GradingSecret(b"launch-tax corpus secret: not for grading a course", "corpus")
MODES = ["practice", "official"]


@pytest.fixture(scope="module")
def served():
    """The workers of these judges are forked from a warm one (tests/warm_worker.py): the same
    checks, probes and frames, without the sandbox's cost of a new interpreter per run."""
    with warm_worker.serve(runtime_files()):
        yield


@pytest.fixture(scope="module")
def cpu_judges(served):
    """Judges (practice, official) of the CPU checks, on any machine (a GPU box's too)."""
    return {"practice": Judge(gpu="off", jobs=2), "official": Judge(gpu="off", jobs=2, secret=CORPUS_SECRET)}


@pytest.fixture(scope="module")
def gpu_judges(served):
    """Judges of every check, the GPU's included: for the GPU-only mutants, on a CUDA machine."""
    return {"practice": Judge(gpu="on", jobs=2), "official": Judge(gpu="on", jobs=2, secret=CORPUS_SECRET)}


@pytest.fixture(params=MODES)
def judge(request, cpu_judges):
    return cpu_judges[request.param]


def scores(report):
    return {e.exercise: (e.score, e.max_score) for e in report.exercises}


def test_rubric_totals_100_and_matches_the_checks():
    points = load_rubric()
    assert sum(points.values()) == 100, sum(points.values())
    assert set(points) == {c.id for c in all_checks()}, set(points) ^ {c.id for c in all_checks()}


@pytest.mark.parametrize("folder", ["solutions", "tests/alternatives"])
def test_right_answers_keep_every_point(judge, folder):
    report = judge.grade(load(REPO_ROOT / folder))
    lost = [(e.exercise, c.check.name, c.reason) for e in report.exercises for c in e.checks if c.status == "failed"]
    assert not lost and report.score == report.max_score > 0, lost


def test_untouched_stubs_get_nothing(judge):
    report = judge.grade(load(REPO_ROOT / "exercises"))
    assert report.score == 0, [
        (c.check.id, c.reason) for e in report.exercises for c in e.checks if c.status == "passed"
    ]
    # Exercise 3 has only GPU checks (its argument checks are given): on a CPU its points wait.
    assert all(e.max_score > 0 or e.pending > 0 for e in report.exercises), [
        (e.exercise, e.max_score, e.pending) for e in report.exercises
    ]


@pytest.mark.parametrize(
    "mutant", [pytest.param(m, marks=[pytest.mark.gpu] if m.gpu else [], id=m.id) for m in mutants.ALL]
)
def test_mutant_loses_points(request, mutant, tmp_path):
    judges = request.getfixturevalue("gpu_judges" if mutant.gpu else "cpu_judges")
    exercise = mutants.MARKERS[mutant.module]
    source = mutants.apply(mutant, (REPO_ROOT / "solutions" / f"{mutant.module}.py").read_text())
    folder = submission(tmp_path / "s", **{mutant.module: source})
    for mode, judge in judges.items():
        result = judge.grade_exercise(load(folder), exercise)
        assert result.score < result.max_score, (
            f"mutant {mutant.id} ({mutant.why}) kept all {result.max_score:g} points of {exercise} in {mode} grading"
        )


def test_a_long_text_that_differs_is_shown_where_it_differs(cpu_judges, tmp_path):
    """The report that ends with a newline: the two texts share their first 160 characters, so a
    message that cuts both short there shows no difference; the grader's shows where they part
    (found by an independent student read: 'expected ..., got ...' with the same prefix twice)."""
    mutant = next(m for m in mutants.ALL if m.id == "launch_model:report-trailing-newline")
    source = mutants.apply(mutant, (REPO_ROOT / "solutions/launch_model.py").read_text())
    folder = submission(tmp_path / "s", launch_model=source)
    result = cpu_judges["practice"].grade_exercise(load(folder), "ex1")
    reasons = [c.reason for c in result.checks if c.check.name == "seed_report"]
    assert reasons and "the text differs from character 274 (line 4)" in reasons[0], reasons
    assert "1.14x\\n'" in reasons[0] and "(274 and 275 characters)" in reasons[0], reasons
