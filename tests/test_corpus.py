"""The public tests against the reference, the untouched stubs, wrong implementations (mutants)
and alternative right ones. Proves that every public test can fail and no right answer is
rejected."""

import pytest
import torch

from coursekit.allocator import torch_release
from coursekit.course import EXERCISES
from coursekit.impl import REPO_ROOT
from tests import mutants
from grader.public import run_public_tests
from tests.harness import submission
from tests.warm_pytest import WarmPytest

CPU = "not gpu"


def test_reference_passes_every_public_test():
    outcome = run_public_tests("solutions", CPU)
    assert outcome.returncode == 0 and outcome.passed and not outcome.failed, outcome.summary()


def test_untouched_stubs_pass_no_public_test():
    outcome = run_public_tests("exercises", f"{CPU} and not given")
    assert outcome.failed, outcome.summary()
    assert outcome.passed == [], (
        "these public tests pass on the untouched stubs, so they cannot tell a finished exercise "
        f"from an empty one: {outcome.passed}"
    )


def test_the_stubs_call_the_given_argument_checks():
    """The argument checks are given (coursekit/argcheck.py): the stubs make them before the part
    the student writes, so every test of them (marker ``given``) that needs nothing the student
    builds passes on the untouched stubs. Those that call a method of an object the student's
    constructor builds fail there with "exercise N: ..." and nothing else."""
    outcome = run_public_tests("exercises", f"{CPU} and given")
    assert outcome.passed, outcome.summary()
    unexpected = [t for t in outcome.failed if "NotImplementedError" not in outcome.reasons.get(t, "")]
    assert not unexpected, (
        "given tests that fail on the untouched stubs for another reason than "
        f"an unwritten constructor: {unexpected}\n{outcome.summary()}"
    )


def test_every_public_test_has_an_exercise_marker():
    unmarked = "not (" + " or ".join(e.marker for e in EXERCISES) + ")"
    outcome = run_public_tests("solutions", unmarked, "--collect-only")
    collected = [line for line in outcome.output.splitlines() if "::" in line]
    assert collected == [], f"public tests without an exercise marker: {collected}"
    everything = run_public_tests("solutions", "", "--collect-only")
    assert sum("::" in line for line in everything.output.splitlines()) > 0, everything.summary()


def test_alternative_implementations_keep_every_point():
    markers = " or ".join(sorted(set(mutants.MARKERS.values())))
    outcome = run_public_tests(REPO_ROOT / "tests" / "alternatives", f"({markers}) and not gpu")
    assert outcome.returncode == 0 and outcome.passed and not outcome.failed, outcome.summary()


@pytest.fixture(scope="module")
def warm():
    """Warm pytest servers (one with the GPU hidden, one without), made when first asked for."""
    servers: dict[bool, WarmPytest] = {}

    def get(hide_gpu: bool) -> WarmPytest:
        if hide_gpu not in servers:
            servers[hide_gpu] = WarmPytest(hide_gpu=hide_gpu)
        return servers[hide_gpu]

    yield get
    for server in servers.values():
        server.close()


def test_the_warm_server_finds_what_a_fresh_interpreter_finds(warm):
    """The fast path must not change a verdict: same tests passed and failed, both ways."""
    for impl, marker in (("solutions", "ex6 and not gpu"), ("exercises", "ex6 and not gpu")):
        fresh = run_public_tests(impl, marker)
        served = warm(hide_gpu=True).run(impl, marker)
        assert (sorted(fresh.passed), sorted(fresh.failed)) == (sorted(served.passed), sorted(served.failed)), (
            f"{impl}: fresh {fresh.summary()}\nwarm {served.summary()}"
        )


@pytest.mark.parametrize(
    "mutant", [pytest.param(m, marks=[pytest.mark.gpu] if m.gpu else [], id=m.id) for m in mutants.ALL]
)
def test_mutant_loses_points(mutant, tmp_path, warm):
    if mutant.torch_below and torch_release(torch.__version__) >= mutant.torch_below:
        pytest.skip(
            f"{mutant.id} costs points only before torch "
            f"{'.'.join(map(str, mutant.torch_below))}; this is {torch.__version__}"
        )
    reference = (REPO_ROOT / "solutions" / f"{mutant.module}.py").read_text()
    folder = submission(tmp_path / "submission", **{mutant.module: mutants.apply(mutant, reference)})
    # A CPU mutant must be caught by the CPU tests (the timer's CPU clock, the no-CUDA errors), so
    # on a GPU machine it runs with the GPU hidden.
    outcome = warm(hide_gpu=not mutant.gpu).run(folder, mutants.MARKERS[mutant.module], "-x")
    assert outcome.failed, (
        f"mutant {mutant.id} ({mutant.why}) passed every public test of "
        f"{mutants.MARKERS[mutant.module]}:\n{outcome.summary()}"
    )


@pytest.mark.gpu
def test_reference_passes_every_gpu_test():
    outcome = run_public_tests("solutions", "gpu")
    assert outcome.returncode == 0 and outcome.passed and not outcome.failed, outcome.summary()
    assert not outcome.skipped, f"GPU tests skipped on a GPU machine: {outcome.skipped}"


@pytest.mark.gpu
def test_untouched_stubs_pass_no_gpu_test():
    outcome = run_public_tests("exercises", "gpu")
    assert outcome.failed and outcome.passed == [], (
        f"GPU tests that pass on the untouched stubs: {outcome.passed}\n{outcome.summary()}"
    )


@pytest.mark.gpu
def test_alternative_implementations_keep_every_gpu_point():
    markers = " or ".join(sorted(set(mutants.MARKERS.values())))
    outcome = run_public_tests(REPO_ROOT / "tests" / "alternatives", f"({markers}) and gpu")
    assert outcome.returncode == 0 and outcome.passed and not outcome.failed, outcome.summary()


def test_corpus_is_large_enough():
    import importlib

    for module in mutants.MARKERS:
        own = importlib.import_module(f"tests.mutants.{module}").MUTANTS
        strays = [m.id for m in own if m.module != module]
        assert not strays, f"tests/mutants/{module}.py holds mutants of other modules: {strays}"
        assert len(own) >= 10, f"only {len(own)} mutants of {module}; the corpus needs at least 10"


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks how GPU tests behave without CUDA")
def test_gpu_tests_are_collected_and_skipped_with_a_reason_on_a_cpu():
    outcome = run_public_tests("solutions", "gpu")
    assert len(outcome.skipped) >= 12 and not outcome.passed and not outcome.failed, (
        f"expected at least 12 GPU tests, all skipped without CUDA; got {outcome.summary()}"
    )
    silent = [t for t in outcome.skipped if "needs a CUDA GPU" not in outcome.reasons.get(t, "")]
    assert not silent, f"GPU tests skipped without saying they need a CUDA GPU: {silent}"


def test_the_readme_kill_matrix_counts_the_corpus():
    """The README's kill matrix is measured by hand (python -m tests.kill_matrix --write); its
    mutant counts must still be those of tests/mutants/."""
    from tests import kill_matrix

    stated = kill_matrix.readme_counts((REPO_ROOT / "README.md").read_text(encoding="utf-8"))
    assert stated == kill_matrix.counts(), (
        f"README.md's kill matrix counts {stated}, tests/mutants/ holds {kill_matrix.counts()}: "
        "run python -m tests.kill_matrix --write"
    )
