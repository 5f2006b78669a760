"""The old name of ``coursekit.argcheck``, kept so that old submissions still grade: new code
writes ``from coursekit import argcheck``.

A submission written against the previous release says ``from coursekit import args`` and calls
``args.count(...)``; the grader copies ``coursekit/`` beside each submission, so this alias lets
it run unchanged. The module was renamed because a student's ``def f(*args)``, or a local named
``args``, hid it from the given lines of that function (see ``coursekit/argcheck.py``). Every name
read here is the very object of ``coursekit.argcheck`` (its ``__all__``, and any other name too).
"""

from __future__ import annotations

from coursekit import argcheck as _argcheck
from coursekit.argcheck import *  # noqa: F403 - the old name exports what the new one does

__all__ = list(_argcheck.__all__)


def __getattr__(name: str) -> object:
    """Any other name of ``coursekit.argcheck`` (e.g. ``same_device``), read from it."""
    try:
        return getattr(_argcheck, name)
    except AttributeError:
        raise AttributeError(f"module 'coursekit.args' (coursekit.argcheck) has no attribute {name!r}") from None
