"""A corpus of plausible wrong implementations (mutants) of the exercise modules.

Each mutant is the reference module with one mistake that students really make, written as text
replacements on ``solutions/<module>.py``, in ``tests/mutants/<module>.py`` (its ``MUTANTS``:
at least 10 per exercise, ``tests/test_corpus.py`` says so); ``ALL`` gathers them for every
exercise of ``coursekit/course.py``. ``tests/test_corpus.py`` builds each one into a
submission folder and runs the public tests of its exercise against it: every mutant must lose
points. A replacement that no longer matches the reference exactly once fails loudly, so the
corpus cannot rot silently when the reference changes.

Mutants made with ``G`` can only be caught on a real GPU (a wrong stream, a lost pool, a failed
capture): their corpus tests carry the ``gpu`` marker and are skipped, with a reason, on a CPU.
The others are caught by the CPU tests, the runners' through the stand-in for a captured graph.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from coursekit import course


@dataclass(frozen=True)
class Mutant:
    module: str
    name: str
    why: str
    edits: tuple[tuple[str, str], ...]
    gpu: bool = False  # caught only by the GPU tests
    kind: str = ""  # for the gap corpus (issue 14): which kind of test gap it probes
    #: The mistake costs points only on torch releases older than this (None: on every release).
    torch_below: tuple[int, int] | None = None

    @property
    def id(self) -> str:
        return f"{self.module}:{self.name}"


def M(module, name, why, *edits):
    return Mutant(module, name, why, tuple(edits))


def G(module, name, why, *edits):
    return Mutant(module, name, why, tuple(edits), gpu=True)

def K(kind, module, name, why, *edits):
    return Mutant(module, name, why, tuple(edits), kind=kind)


#: Every mutant, exercise by exercise in course order: ``tests/mutants/<module>.py``'s ``MUTANTS``.
ALL = [m for e in course.EXERCISES
       for m in importlib.import_module(f"tests.mutants.{e.module}").MUTANTS]

#: The pytest marker of each module's exercise.
MARKERS = course.MARKERS


def apply(mutant: Mutant, source: str) -> str:
    """The reference source with the mutant's edits; each edit must match exactly once."""
    for old, new in mutant.edits:
        count = source.count(old)
        if count != 1:
            raise AssertionError(
                f"mutant {mutant.id}: expected the text {old!r} exactly once in "
                f"solutions/{mutant.module}.py, found it {count} times; update the mutant"
            )
        source = source.replace(old, new)
    return source
