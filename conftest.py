"""pytest wiring for every test in the repository: ``--impl``, hypothesis profiles, GPU skips."""

from __future__ import annotations

import pytest
from hypothesis import settings

from coursekit import strategies
from coursekit.impl import Implementation

settings.load_profile(strategies.default_profile())


def pytest_addoption(parser):
    parser.addoption(
        "--impl",
        default="exercises",
        help="implementation under test: 'exercises' (default), 'solutions', or a folder of "
        "module files (a submission)",
    )


def pytest_configure(config):
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

