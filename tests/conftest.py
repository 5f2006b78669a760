"""Hooks of the repository's own suite (tests/ is not in the student release)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from coursekit.impl import REPO_ROOT

NBGRADER_TESTS = "tests/test_nbgrader.py"
#: The suite's slow stage: what ``pytest tests`` skips, and CI runs after it (.ci/run).
SLOW_STAGE = "python -m pytest tests -n auto -m slow"


def pytest_collection_modifyitems(config, items):
    """``pytest tests`` is the loop a maintainer runs often: the tests marked ``slow`` (a whole
    platform, class or release, the hostile corpus or the engine benchmark, end to end: minutes
    on 2 cores) are skipped with the command that runs them. With ``-m`` the expression decides
    alone: ``-m slow`` runs only them, ``-m "not gpu"`` (.ci/gpu's suite) runs them with the
    rest. CI runs both stages (.ci/run)."""
    if config.option.markexpr:
        return
    skip = pytest.mark.skip(reason=f"the suite's slow stage, which CI runs too: {SLOW_STAGE}")
    for item in items:
        if item.get_closest_marker("slow"):
            item.add_marker(skip)


@pytest.hookimpl(optionalhook=True)  # runs without xdist (-p no:xdist) must still load this file
def pytest_xdist_auto_num_workers(config):
    """``-n auto``: half again as many workers as cores. Many of these tests spend seconds waiting
    (a hanging submission until its time limit, a worker that is retried with twice the time), and
    with one worker per core the cores would sit idle meanwhile."""
    return max(2, (os.cpu_count() or 1) * 3 // 2)


def pytest_collection_finish(session):
    """The nbgrader course takes minutes to build: start it in a process of its own as soon as a
    worker has collected a test that needs it (tests/nbcourse.py), rather than when that test
    comes up, with the other worker waiting."""
    wanted = [item for item in session.items if item.nodeid.startswith(NBGRADER_TESTS)]
    if shutil.which("nbgrader") is None or all(item.get_closest_marker("skip") for item in wanted):
        return
    from tests import nbcourse

    nbcourse.start_building(nbcourse.shared_folder(session.config))


class _CheckedMonkeyPatch(pytest.MonkeyPatch):
    """pytest's ``monkeypatch``, refusing a double of a project function that does not take the
    function's parameters (``tests/doubles.py``)."""

    def setattr(self, target, *name_and_value, raising=True):
        from tests.doubles import differs, is_project_function

        if isinstance(target, str) and len(name_and_value) == 1:  # ("package.module.attr", value)
            import importlib

            module, _, attr = target.rpartition(".")
            old, new = getattr(importlib.import_module(module), attr, None), name_and_value[0]
        else:
            old, new = getattr(target, name_and_value[0], None), name_and_value[-1]
        if is_project_function(old) and callable(new) and not isinstance(new, type):
            problem = differs(new, old)
            if problem:
                raise TypeError(f"a test double must take the parameters of what it stands in for: {problem}")
        return super().setattr(target, *name_and_value, raising=raising)


@pytest.fixture
def monkeypatch():
    """``monkeypatch``, with every double of a project function checked against it."""
    patch = _CheckedMonkeyPatch()
    yield patch
    patch.undo()


@pytest.fixture(autouse=True)
def _a_cpu_test_starts_processes_that_see_no_gpu(request, monkeypatch):
    """A test not marked ``gpu`` is about the course without a GPU: the processes it starts (a
    ``python -m grader``, a public test run, a release) see none (``CUDA_VISIBLE_DEVICES=""``),
    on a TA's GPU box as on a laptop, so that they grade and print what the test expects. What a
    GPU in sight does to the grader is tested on purpose (tests/test_judge_sees_cuda.py builds
    its own environment)."""
    if "gpu" not in request.keywords:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")


@pytest.fixture(scope="session")
def secret_file(tmp_path_factory) -> Path:
    """A grading secret made for this test run (official grading, as a course grades)."""
    path = tmp_path_factory.mktemp("grading-secret") / "secret"
    subprocess.run(
        [sys.executable, "-m", "grader", "secret", "new", str(path)], cwd=REPO_ROOT, check=True, capture_output=True
    )
    return path
