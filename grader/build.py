"""``python -m grader build``: rewrite what is derived from the rubric and the checks.

Derived, and rewritten here (``--check`` writes nothing and exits 1 when one is out of date):

* the README's points paragraph (``<!-- points -->``) and Gradescope's points
  (``<!-- gradescope-points -->``), from ``grader/rubric.toml`` (``grader/rubric.py``), its
  table of exercises (``<!-- exercises -->``), from ``coursekit/course.py``, and its points by
  idea (``<!-- ideas -->``), from the checks' ideas;
* ``answers.md``: the self-test questions and their points;
* the nbgrader source notebook (``course/source/launch_tax/launch_tax.ipynb``): the modules, the
  checks and their points.

What it cannot redo, it lists: the nbgrader release (``nbgrader generate_assignment``), the
student repository (``python -m grader release``, which records the practice answers), the
Gradescope bundle (rebuild, ``--self-test``, upload), submissions already graded (``grade-all
--replace``) and the kill matrix's figures (``python -m tests.kill_matrix --write``).

``refuse_stale`` is what ``gradescope`` and ``release`` call (``grade`` calls the README's part,
``grader.rubric.refuse_stale_readme``): a rubric whose checks do not add up to its stated
total, or a README or notebook that states other points than the rubric, stops them with the
reason (``RubricError``, a ``ValueError``). Staff only: a release and a bundle leave it out.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from coursekit.course import readme_table
from coursekit.impl import REPO_ROOT
from grader import rubric

README = REPO_ROOT / "README.md"
ANSWERS = REPO_ROOT / "answers.md"
EXERCISE_TABLE = re.compile(r"(<!-- exercises -->\n)(.*?)(<!-- /exercises -->\n)", re.DOTALL)
IDEAS = re.compile(r"(<!-- ideas -->\n)(.*?)(<!-- /ideas -->\n)", re.DOTALL)
GRADESCOPE_POINTS = re.compile(r"(<!-- gradescope-points -->\n)(.*?)(<!-- /gradescope-points -->\n)", re.DOTALL)

AFTER = """\
What else to redo after a change of the rubric or the checks:
  - the nbgrader release: cd course && nbgrader generate_assignment launch_tax --force
  - the student repository: python -m grader release OUT (it records the practice answers)
  - the Gradescope bundle: python -m grader gradescope autograder.zip, then
    python -m grader gradescope autograder.zip --self-test, then upload it (the settings it prints)
  - submissions already graded: python -m grader grade-all DIR --out OUT --replace
  - the kill matrix's figures: python -m tests.kill_matrix --write (staff repository)"""


@dataclass(frozen=True)
class Derived:
    name: str
    path: Path
    make: Callable[[str], str]  # current text -> what it should be


def _readme(text: str) -> str:
    course = rubric.load()
    text = rubric.readme_with_points(text, course)
    settings = textwrap.fill(rubric.gradescope_settings(course), 99) + "\n"
    text = EXERCISE_TABLE.sub(lambda m: m.group(1) + readme_table() + m.group(3), text)
    ideas = rubric.ideas_table(rubric.course_checks())
    text = IDEAS.sub(lambda m: m.group(1) + ideas + m.group(3), text)
    return GRADESCOPE_POINTS.sub(lambda m: m.group(1) + settings + m.group(3), text)


def _answers(_: str) -> str:
    from grader.release import answers_markdown

    return answers_markdown()


def _notebook(_: str) -> str:
    from grader import notebook

    return notebook.dumps(notebook.build_notebook())


def derived() -> list[Derived]:
    items = [Derived("README.md points and exercises", README, _readme)] if README.is_file() else []
    items.append(Derived("answers.md", ANSWERS, _answers))
    from grader.notebook import SOURCE_NOTEBOOK

    items.append(Derived("the nbgrader source notebook", SOURCE_NOTEBOOK, _notebook))
    return items


def stale(items: list[Derived] | None = None) -> list[tuple[Derived, str]]:
    """``[(item, what it should hold)]`` for every derived file that is out of date."""
    rubric.load().validate()
    out = []
    for item in items if items is not None else derived():
        current = item.path.read_text(encoding="utf-8") if item.path.exists() else ""
        wanted = item.make(current)
        if wanted != current:
            out.append((item, wanted))
    return out


def refuse_stale(quick: bool = False) -> None:
    """``RubricError`` when the rubric does not add up, or (unless ``quick``: the README only) a
    derived file states other points than it."""
    items = derived()
    found = stale([i for i in items if i.path == README] if quick else items)
    if found:
        names = ", ".join(f"{item.name} ({item.path.relative_to(REPO_ROOT)})" for item, _ in found)
        raise rubric.RubricError(
            f"out of date with grader/rubric.toml and the checks: {names}; "
            "run `python -m grader build` (and see what it says to redo)"
        )


def main(check: bool = False, say=print) -> int:
    course = rubric.load().validate()
    found = stale()
    if check:
        for item, _ in found:
            say(f"out of date: {item.name} ({item.path.relative_to(REPO_ROOT)})")
        if not found:
            say("everything derived from the rubric and the checks is up to date")
        return 1 if found else 0
    for item, wanted in found:
        item.path.parent.mkdir(parents=True, exist_ok=True)
        item.path.write_text(wanted, encoding="utf-8")
        say(f"rewrote {item.path.relative_to(REPO_ROOT)} ({item.name})")
    if not found:
        say("nothing to rewrite: everything derived is up to date")
    t = rubric.totals(course)
    say(
        f"points: {t['automatic']:g} automatic ({t['cpu']:g} CPU, {t['gpu']:g} GPU) + "
        f"{t['manual']:g} by hand = {t['course']:g}"
    )
    say(AFTER)
    return 0
