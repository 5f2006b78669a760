"""pytest wiring for every test in the repository: ``--impl``, hypothesis profiles, GPU skips."""

from __future__ import annotations

import os
import sys

# One CPU thread for torch, here and in every process the tests start: the tensors are tiny, and
# several test processes each spinning OpenMP threads on a few cores run twice as slowly.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest
from hypothesis import settings

from coursekit import strategies
from coursekit.course import EXERCISES
from coursekit.impl import Implementation

settings.load_profile(strategies.default_profile())
if "torch" in sys.modules:  # imported before this file (by a plugin): set it directly
    sys.modules["torch"].set_num_threads(1)


def pytest_addoption(parser):
    parser.addoption(
        "--impl",
        default="exercises",
        help="implementation under test: 'exercises' (default), 'solutions', or a folder of "
        "module files (a submission)",
    )


def pytest_configure(config):
    for exercise in EXERCISES:  # one marker per exercise, from its declaration
        config.addinivalue_line(
            "markers", f"{exercise.marker}: exercise {exercise.number}, {exercise.module}: {exercise.title}"
        )
    try:
        config._launch_tax_impl = Implementation(config.getoption("--impl"))
    except ValueError as exc:
        raise pytest.UsageError(f"--{exc}") from None


def pytest_report_header(config):
    impl = config._launch_tax_impl
    return f"launch-tax: testing --impl {impl.label} ({impl.folder})"


def pytest_collection_modifyitems(config, items):
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(
        reason="needs a CUDA GPU (a GPU test: real CUDA graphs, streams or events); "
        "run `python -m pytest -m gpu` on a machine with one"
    )
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def impl(pytestconfig) -> Implementation:
    """The implementation chosen with ``--impl``."""
    return pytestconfig._launch_tax_impl
