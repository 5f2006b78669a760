"""The old name of ``coursekit.argcheck``, kept so that old submissions still grade: new code
writes ``from coursekit import argcheck``.

A submission written against the previous release says ``from coursekit import args`` and calls
``args.count(...)``; the grader copies ``coursekit/`` beside each submission, so this alias lets
it run unchanged. The module was renamed because a student's ``def f(*args)``, or a local named
``args``, hid it from the given lines of that function (see ``coursekit/argcheck.py``). Every name
here is the very object ``coursekit.argcheck`` exports.
"""

from __future__ import annotations

from coursekit import argcheck as _argcheck
from coursekit.argcheck import *  # noqa: F403 - the old name exports what the new one does

__all__ = list(_argcheck.__all__)
