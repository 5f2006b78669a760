"""Each exercise's probes and public checks: ``grader/exercises/<module>.py``, one file per
exercise declared in ``coursekit/course.py``, found by its module name (no list of them is kept
here). Each holds its probes (``@probe`` functions, run by a worker on the submission) and
``checks(draw) -> list[Check]``, the public checks the judge grades their answers with. Hidden
checks have the same form, one file per exercise in the package ``grader.hidden`` (the staff
repository's, never released).

A sandboxed worker gets this folder with ``grader/probes.py``, ``grader/runtime/wire.py`` and
``grader/checks.py`` (what the exercise files import), never the hidden checks.
"""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from coursekit.course import EXERCISES

if TYPE_CHECKING:
    from grader.checks import Check
    from grader.secret import Draw


def _module(package: str, module: str) -> ModuleType:
    where = package.replace(".", "/")
    try:
        found = importlib.import_module(f"{package}.{module}")
    except ModuleNotFoundError as exc:
        if exc.name != f"{package}.{module}":
            raise
        raise LookupError(
            f"{where}/{module}.py is missing: every exercise declared in "
            f"coursekit/course.py needs one, with checks(draw) -> list[Check]"
        ) from None
    if not callable(getattr(found, "checks", None)):
        raise LookupError(f"{where}/{module}.py has no checks(draw) -> list[Check]")
    return found


def load_probes() -> list[ModuleType]:
    """Import every exercise's file, so that its probes are in ``grader.probes.PROBES``."""
    return [_module("grader.exercises", e.module) for e in EXERCISES]


def _checks(package: str, module: str, marker: str, draw: Draw) -> list[Check]:
    found = _module(package, module).checks(draw)
    stray = [c.id for c in found if c.exercise != marker]
    if stray:
        raise LookupError(
            f"{package.replace('.', '/')}/{module}.py holds {', '.join(stray)}: its "
            f"checks are {marker}'s (coursekit/course.py)"
        )
    return found


def public_checks(draw: Draw | None = None) -> list[Check]:
    from grader.secret import PRACTICE

    draw = draw or PRACTICE
    return [c for e in EXERCISES for c in _checks("grader.exercises", e.module, e.marker, draw)]


def has_hidden_checks() -> bool:
    """False in a released grader (it leaves the hidden checks out). Only a ``hidden`` folder
    beside this one counts: where the staff repository is installed in editable mode, its import
    finder would hand a release the staff's hidden checks."""
    spec = importlib.util.find_spec("grader.hidden")
    beside = Path(__file__).resolve().parent.parent / "hidden"
    return spec is not None and any(Path(p).resolve() == beside for p in spec.submodule_search_locations or ())


def hidden_checks(draw: Draw | None = None) -> list[Check]:
    from grader.secret import PRACTICE

    draw = draw or PRACTICE
    return [c for e in EXERCISES for c in _checks("grader.hidden", e.module, e.marker, draw)]
