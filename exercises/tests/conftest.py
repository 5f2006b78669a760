"""Fixtures giving each test the module under test from the ``--impl`` implementation:
a test that asks for ``buckets`` gets ``<impl>/buckets.py``, imported as part of its package."""

import pytest

from coursekit.course import EXERCISES


def _module_fixture(name: str):
    def fixture(impl):
        try:
            return impl.module(name)
        except ImportError as exc:  # missing or broken: fail this module's tests only
            pytest.fail(str(exc), pytrace=False)

    fixture.__doc__ = f"The ``{name}`` module of the implementation under test."
    return pytest.fixture(scope="module", name=name)(fixture)


for _exercise in EXERCISES:
    globals()[f"_{_exercise.module}_fixture"] = _module_fixture(_exercise.module)
