"""Public tests and grader agree (issue 23): every public test's rule is enforced by a named grader
check (or a stated reason says why none can: tests/parity.py), every public check is named by a
public test, and the kill matrix's record of what each mutant fails (tests/kill_matrix.json)
bears the map out, both ways. A student who passes the public tests keeps the points; one who
fails a public test loses them, on the check that says why."""

from __future__ import annotations

import ast
import json

import pytest

from coursekit.course import EXERCISES, MARKERS
from coursekit.impl import REPO_ROOT
from grader.judge import all_checks
from tests import mutants
from tests.parity import ENFORCED_BY, GIVEN, Reason

NOT_MAPPED = {"test_examples.py"}  # see tests/parity.py (test_checks.py names its check in its id)
RECORD = REPO_ROOT / "tests" / "kill_matrix.json"


def public_tests() -> dict[str, dict]:
    """``{"test_<module>.py::test_name": {"exercise": "exN", "gpu": bool}}`` from the files."""
    found = {}
    for e in EXERCISES:
        path = REPO_ROOT / "exercises" / "tests" / f"test_{e.module}.py"
        if not path.is_file():
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                marks = {ast.unparse(d) for d in node.decorator_list}
                found[f"{path.name}::{node.name}"] = {
                    "exercise": e.marker,
                    "gpu": any(m == "gpu" or "mark.gpu" in m for m in marks),
                    "given": "pytest.mark.given" in marks,
                }
    return found


CHECKS = {c.id: c for c in all_checks()}


def course_marker(module: str) -> str:
    return MARKERS.get(module, "")


def named(test: str) -> tuple[str, ...]:
    """The checks ``test``'s entry names (none for a Reason or an unlisted test);
    ``test_checks.py::test_check[<module>.<name>]`` runs that very check."""
    if test.startswith("test_checks.py::test_check["):
        module, name = test.split("[", 1)[1].rstrip("]").split(".", 1)
        return tuple(c for c in CHECKS if c == f"{course_marker(module)}.{name}")
    enforced = ENFORCED_BY.get(test)
    return () if enforced is None or isinstance(enforced, Reason) else tuple(enforced)


def test_every_public_test_names_what_enforces_its_rule():
    tests = public_tests()
    missing = sorted(set(tests) - set(ENFORCED_BY))
    stale = sorted(set(ENFORCED_BY) - set(tests))
    assert not missing, "public tests whose rule no grader check is named for (tests/parity.py): " + ", ".join(missing)
    assert not stale, "tests/parity.py names public tests that do not exist: " + ", ".join(stale)


def test_given_tests_and_only_they_are_ungraded_as_given():
    """A test marked ``given`` checks given code (coursekit/argcheck.py), which carries no points:
    it is mapped to GIVEN, and GIVEN is for nothing else (a graded rule cannot hide there)."""
    tests = public_tests()
    wrong = sorted(t for t, about in tests.items() if about["given"] != (ENFORCED_BY.get(t) is GIVEN))
    assert not wrong, "tests marked given must map to GIVEN in tests/parity.py, and only they: " + ", ".join(wrong)


@pytest.mark.parametrize("test", sorted(ENFORCED_BY))
def test_each_named_check_is_real_and_fits_its_test(test):
    enforced = ENFORCED_BY[test]
    if isinstance(enforced, Reason):
        assert len(enforced) > 20, f"{test}: say why no check can enforce its rule"
        return
    about = public_tests()[test]
    assert enforced, f"{test}: name a check, or give a Reason"
    for check_id in enforced:
        assert check_id in CHECKS, f"{test} names {check_id}, which is not a check"
        assert CHECKS[check_id].exercise == about["exercise"], f"{test} is {about['exercise']}'s, but names {check_id}"
    kinds = {CHECKS[c].gpu for c in enforced}
    assert about["gpu"] in kinds, (
        f"{test} runs on {'a GPU' if about['gpu'] else 'any machine'}, but the checks it names "
        f"({', '.join(enforced)}) {'all run without' if about['gpu'] else 'all need'} CUDA"
    )


def test_every_public_check_is_named_by_a_public_test():
    some = {c for test in ENFORCED_BY for c in named(test)}
    alone = sorted(c.id for c in CHECKS.values() if not c.hidden and c.id not in some)
    assert not alone, (
        "public checks no public test is named for (a rule graded by the grader "
        "alone, which a student's own test run never shows): " + ", ".join(alone)
    )


def disagreements(record: list[dict]) -> list[str]:
    """Where the record contradicts the map: a public test failed whose named checks kept every
    point, or a public check lost points that no failed public test names."""
    problems = []
    for row in record:
        lost = set(row["lost_checks"])
        failed = [t for t in row["failed_tests"] if t.split("::")[0] not in NOT_MAPPED]
        for test in failed:
            enforced = named(test)
            if enforced and not lost & set(enforced):
                problems.append(f"{row['id']} fails {test}, but keeps every point of {', '.join(enforced)}")
        for check_id in sorted(lost):
            if CHECKS.get(check_id) is None or CHECKS[check_id].hidden:
                continue
            if not any(check_id in named(t) for t in failed):
                problems.append(
                    f"{row['id']} loses {check_id}, but fails no public test named for it "
                    f"(it fails {', '.join(failed) or 'none'})"
                )
    return problems


def test_the_kill_matrix_bears_the_map_out():
    """For every CPU mutant: each public test it fails names a check it loses points on, and each
    public check it loses is named by a public test it fails."""
    record = json.loads(RECORD.read_text(encoding="utf-8"))
    corpus = {m.id for m in mutants.ALL if not m.gpu}
    assert {r["id"] for r in record} == corpus, (
        "tests/kill_matrix.json is not the corpus's record: re-run "
        "`python -m tests.kill_matrix --write` (about 15 minutes)"
    )
    problems = disagreements(record)
    assert not problems, "public tests and grader disagree:\n  " + "\n  ".join(problems)


def test_a_disagreement_is_found_both_ways():
    """The two rules can fail: a mistake only the public tests see, and one only the grader sees."""
    public_only = {
        "id": "x:public-only",
        "lost_checks": [],
        "failed_tests": ["test_launch_model.py::test_simulate_worked_example"],
    }
    grader_only = {
        "id": "x:grader-only",
        "lost_checks": ["ex1.seed_report"],
        "failed_tests": ["test_launch_model.py::test_simulate_worked_example"],
    }
    via_check = {
        "id": "x:via-test-check",
        "lost_checks": ["ex6.dispatch"],
        "failed_tests": ["test_checks.py::test_check[dispatch.dispatch]"],
    }
    found = disagreements([public_only, grader_only, via_check])
    assert found == [
        "x:public-only fails test_launch_model.py::test_simulate_worked_example, but keeps every "
        "point of ex1.simulate_eager_ms",
        "x:grader-only fails test_launch_model.py::test_simulate_worked_example, but keeps every "
        "point of ex1.simulate_eager_ms",
        "x:grader-only loses ex1.seed_report, but fails no public test named for it (it fails "
        "test_launch_model.py::test_simulate_worked_example)",
    ], found


def test_every_gpu_mutant_has_a_measured_record_and_a_gap_says_why():
    """tests/kill_matrix_gpu.json: for every GPU-only mutant, what a CUDA machine measured (the
    public tests reject it; it loses grader points). A mutant the public tests reject but the
    grader does not must carry a note: why it cannot lose points on that torch, or what changed
    since and that it awaits a measurement (`bash .ci/gpu mutants`, then --gpu-record)."""
    import json

    from tests import mutants
    from tests.kill_matrix import GPU_RECORD

    record = json.loads(GPU_RECORD.read_text(encoding="utf-8"))
    gpu = {m.id for m in mutants.ALL if m.gpu}
    assert record["machine"] and set(record["mutants"]) == gpu, sorted(gpu ^ set(record["mutants"]))
    for mutant, entry in record["mutants"].items():
        assert entry["public_tests"] == "rejected", f"{mutant}: no public GPU test rejects it"
        if entry["grader"] != "loses points":
            assert entry.get("note"), (
                f"{mutant}: rejected by the public tests, keeps its grader points, and no note says why"
            )


def test_the_gpu_record_is_read_from_pytests_junit_as_the_h200_wrote_it():
    """--gpu-record reads the junit XML of `pytest tests -m gpu` (here the H200's of 2026-12-04,
    paths shortened): 18 GPU-only mutants, all rejected by the public tests, one keeping its
    grader points."""
    from coursekit.impl import REPO_ROOT
    from tests.kill_matrix import gpu_outcomes

    found = gpu_outcomes(REPO_ROOT / "tests" / "platforms" / "h200-2026-12-04-gpu-corpus.xml")
    assert len(found) == 18 and all(o["public_tests"] == "rejected" for o in found.values())
    assert [m for m, o in found.items() if o["grader"] != "loses points"] == ["capture:failed-capture-pool-not-ended"]
