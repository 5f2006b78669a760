"""The grader's public checks, as tests: one test per check, run here on your code.

Run: python -m pytest exercises -k test_checks (or with the exercise's marker, e.g. -m ex5).
Each check is what ``python -m grader grade`` asks your code (its probes, on the practice
inputs) and the rule it judges the answers by; here the probes run in this process, on the
module ``--impl`` chooses, and the answers are compared with the reference's (its recorded
answers, ``grader/expected.json``, where the reference itself is not there) exactly as the
grader compares them. A failure shows the check's rule and its first wrong answer, expected
vs got. Checks that need a CUDA GPU carry the ``gpu`` marker too.
"""

from contextlib import nullcontext

import pytest

from coursekit.checks import without_cuda
from coursekit.course import MODULE_OF

try:
    from grader.judge import Reference
except ModuleNotFoundError as exc:  # Python 3.10: no tomllib for the grader's rubric
    if exc.name != "tomllib":
        raise
    pytest.skip("the grader's checks need Python 3.11 or newer (as `python -m grader` says); the "
                "other public tests run on this Python", allow_module_level=True)
from grader.runtime import wire
from grader.checks import Answer, same
from grader.exercises import public_checks
from grader.probes import PROBES


CHECKS = public_checks()
_reference = Reference()


def _marks(check):
    marks = [getattr(pytest.mark, check.exercise)]
    return marks + [pytest.mark.gpu] if check.gpu else marks


def _ask(module, probe) -> Answer:
    """The probe on ``module``, its answer as the grader's worker would send it."""
    try:
        value = PROBES[probe.probe](module, **wire.decode(wire.encode(probe.args)))
    except NotImplementedError:
        raise
    except Exception as exc:  # noqa: BLE001 - every error is an answer to judge
        return Answer(False, error={"types": [c.__name__ for c in type(exc).__mro__],
                                    "message": str(exc)[:2000]})
    return Answer(True, value=wire.decode(wire.encode(value)))


@pytest.mark.parametrize("check", [pytest.param(c, marks=_marks(c), id=f"{MODULE_OF[c.exercise]}.{c.name}")
                                   for c in CHECKS])
def test_check(impl, check):
    if check.triton:
        from coursekit.platform import triton_problem

        problem = triton_problem()
        if problem:
            pytest.skip(f"torch.compile cannot build GPU kernels here: {problem}")
    try:
        module = impl.module(MODULE_OF[check.exercise])
    except ImportError as exc:
        pytest.fail(str(exc), pytrace=False)
    probes = sorted(check.probes, key=lambda p: p.last)
    compare = check.compare or same()
    needed = [p for p in probes if p.needs_reference]
    expected = _reference.answers(check.exercise, MODULE_OF[check.exercise], needed, cache=True,
                                  gpu=check.gpu)[0] if needed else {}
    for probe in probes:
        # A CPU check's probes run with CUDA hidden, on any machine, as in the grader's CPU worker
        # (and as the reference answered them).
        with nullcontext() if check.gpu else without_cuda():
            answer = _ask(module, probe)
        problem = compare(probe, answer, expected.get(probe.key()))
        if problem:
            pytest.fail(f"{check.id}: {problem}\n  rule: {check.rule}", pytrace=False)
