"""Hooks of the repository's own suite (tests/ is not in the student release)."""

from __future__ import annotations

import shutil

NBGRADER_TESTS = "tests/test_nbgrader.py"


def pytest_collection_finish(session):
    """The nbgrader course takes minutes to build: start it in a process of its own as soon as a
    worker has collected a test that needs it (tests/nbcourse.py), rather than when that test
    comes up, with the other worker waiting."""
    if shutil.which("nbgrader") is None or not any(
            item.nodeid.startswith(NBGRADER_TESTS) for item in session.items):
        return
    from tests import nbcourse

    nbcourse.start_building(nbcourse.shared_folder(session.config))
