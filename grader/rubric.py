"""The rubric: points per check, the course's stated total, the questions graded by hand.

``grader/rubric.toml`` is the one place points are written::

    [course]
    total = 100              # the automatic points (public + hidden checks): a decision
    [ex5.public]             # checks in grader/exercises/buckets.py; names starting gpu_ need CUDA
    padded_size = 2
    [ex5.hidden]             # the hidden checks (never released)
    other_rows = 1
    [self_test]              # answers.md's questions, graded by hand, on top of the total
    quantized_model = 2

The rule: **the checks' points add up to ``[course] total``**. A weight changed without the
total (or the other way round) is refused by ``grade``, ``grade-all``, ``gradescope``,
``release`` and ``build`` with ``RubricError``, which gives both numbers: a new total is a
decision, and the README, the notebook, answers.md and the Gradescope settings follow it once
the staff repository's ``grader build`` command has rewritten them. A released rubric has no
hidden tables; its ``[course] withheld`` says how many points they hold, so its total still
adds up.

Everything that states points (the README's points paragraph, the notebook's introduction, the
released rubric's header, answers.md, the Gradescope settings ``gradescope`` prints) is written
from ``Rubric`` (``totals``, ``points_paragraph``), so they agree by construction;
``refuse_stale_readme`` is what ``grade`` checks before grading.
"""

from __future__ import annotations

import re
import textwrap
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from coursekit.course import EXERCISES

RUBRIC = Path(__file__).resolve().parent / "rubric.toml"
SPECIAL = ("course", "self_test")
#: The README's paragraph on points, written by ``points_paragraph`` (the ``grader build`` command).
POINTS = re.compile(r"(<!-- points -->\n)(.*?)(<!-- /points -->\n)", re.DOTALL)


class RubricError(ValueError):
    """grader/rubric.toml does not hold together (its points, its total)."""


@dataclass(frozen=True)
class Rubric:
    checks: dict[str, float]  # check id ("ex5.padded_size") -> points, public and hidden
    hidden_ids: frozenset[str]
    stated_total: float | None  # [course] total
    declared_hidden: float | None  # [course] withheld, in a released rubric
    questions: dict[str, float] = field(default_factory=dict)  # [self_test]

    @property
    def public(self) -> float:
        return sum(p for c, p in self.checks.items() if c not in self.hidden_ids)

    @property
    def public_gpu(self) -> float:
        return sum(p for c, p in self.checks.items()
                   if c not in self.hidden_ids and c.split(".", 1)[1].startswith("gpu_"))

    @property
    def hidden(self) -> float:
        listed = sum(p for c, p in self.checks.items() if c in self.hidden_ids)
        return listed if self.hidden_ids or self.declared_hidden is None else self.declared_hidden

    @property
    def total(self) -> float:
        """The automatic points: what the checks add up to."""
        return self.public + self.hidden

    @property
    def manual(self) -> float:
        return sum(self.questions.values())

    def validate(self) -> "Rubric":
        """``self``, or ``RubricError`` when the checks do not add up to the stated total."""
        if self.stated_total is None:
            raise RubricError("grader/rubric.toml has no [course] total: state the course's "
                              f"automatic points there (the checks add up to {self.total:g})")
        if self.total != self.stated_total:
            raise RubricError(
                f"grader/rubric.toml: the checks add up to {self.total:g} points, but [course] "
                f"total says {self.stated_total:g}. Either put the weights back, or make "
                f"{self.total:g} the course's total (a decision: set [course] total = "
                f"{self.total:g}, then the staff repository's `grader build` command rewrites the "
                "README, the notebook and answers.md, and says what else to redo)")
        return self


def parse(text: str) -> Rubric:
    data = tomllib.loads(text)
    checks, hidden = {}, set()
    for exercise, table in data.items():
        if exercise in SPECIAL:
            continue
        if not isinstance(table, dict):
            raise RubricError(f"grader/rubric.toml: [{exercise}] must be a table")
        markers = [e.marker for e in EXERCISES]
        if exercise not in markers:
            raise RubricError(f"grader/rubric.toml: [{exercise}] is no exercise of the course "
                              f"(they are declared in coursekit/course.py: {', '.join(markers)})")
        for visibility in ("public", "hidden"):
            for name, value in table.get(visibility, {}).items():
                if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                    raise RubricError(f"grader/rubric.toml: {exercise}.{name} must be a number of "
                                      f"points > 0, got {value!r}")
                checks[f"{exercise}.{name}"] = float(value)
                if visibility == "hidden":
                    hidden.add(f"{exercise}.{name}")
    course = data.get("course", {})
    total = course.get("total")
    declared = course.get("withheld")
    questions = {name: float(value) for name, value in data.get("self_test", {}).items()}
    return Rubric(checks, frozenset(hidden),
                  None if total is None else float(total),
                  None if declared is None else float(declared), questions)


def load(path: Path = RUBRIC) -> Rubric:
    return parse(Path(path).read_text(encoding="utf-8"))


def each(questions: dict[str, float]) -> str:
    values = set(questions.values())
    return f", {values.pop():g} points each" if len(values) == 1 else ""


def totals(rubric: Rubric) -> dict[str, float]:
    """The numbers every statement of points uses: ``automatic`` (the checks), ``cpu`` and
    ``gpu`` of them, ``manual`` (self-test, by hand) and ``course`` (all of it)."""
    gpu = sum(p for c, p in rubric.checks.items() if c.split(".", 1)[1].startswith("gpu_"))
    if not rubric.hidden_ids and rubric.declared_hidden:
        gpu = rubric.public_gpu  # a release cannot see which hidden checks need a GPU
    return {"automatic": rubric.total, "cpu": rubric.total - gpu, "gpu": gpu,
            "manual": rubric.manual, "course": rubric.total + rubric.manual}


def gradescope_settings(rubric: Rubric) -> str:
    """What to set on Gradescope so that its total is the course's (printed by ``gradescope``
    and written into the README)."""
    t = totals(rubric)
    return (f"Gradescope: autograder points {t['cpu']:g} (the CPU checks the bundle grades); add "
            f"a manually graded question \"GPU checks\" worth {t['gpu']:g} (filled from the GPU "
            f"pass's gradebook after `merge`) and one \"Self-test (answers.md)\" worth "
            f"{t['manual']:g}: {t['course']:g} points in all, the course's total.")


def points_paragraph(points: Rubric) -> str:
    """The README's paragraph on points (the same in the repository and in a release)."""
    return textwrap.fill(
        f"**Points.** The rubric, [`grader/rubric.toml`](grader/rubric.toml), holds {points.total:g} "
        f"points: {points.public:g} in public checks, which `python -m grader grade` runs for you "
        f"({points.public - points.public_gpu:g} on any machine, {points.public_gpu:g} only on a "
        f"CUDA GPU), and {points.hidden:g} in hidden checks, which the instructor runs when "
        "grading and which are not in the student repository. The "
        f"{len(points.questions)} self-test questions in [`answers.md`](answers.md) are graded "
        f"by hand{each(points.questions)}: {points.manual:g} points on top of the "
        f"{points.total:g}, {points.total + points.manual:g} in all.", width=99,
        break_on_hyphens=False) + "\n"


def readme_with_points(text: str, points: Rubric) -> str:
    """``text`` (a README) with its ``<!-- points -->`` paragraph written from ``points``."""
    if len(POINTS.findall(text)) != 1:
        raise RubricError("README.md needs one <!-- points --> ... <!-- /points --> paragraph")
    return POINTS.sub(lambda m: m.group(1) + points_paragraph(points) + m.group(3), text)


def refuse_stale_readme(readme: Path) -> None:
    """``RubricError`` when the rubric does not add up to its total, or when ``readme`` (if there
    is one) states other points than the rubric."""
    points = load().validate()
    if readme.is_file():
        text = readme.read_text(encoding="utf-8")
        if readme_with_points(text, points) != text:
            raise RubricError(f"{readme.name} states other points than grader/rubric.toml: rebuild "
                              "what states points (the staff repository's `grader build` command, "
                              "which also says what else to redo)")
