"""The rubric: points per check, the course's stated total, the questions graded by hand.

A check's points are written on the check itself (``Check(..., points=2)``: the public checks
in ``grader/exercises/<module>.py``, the hidden ones beside them in the staff repository);
``grader/rubric.toml`` holds what belongs to the course as a whole::

    [course]
    total = 100              # the automatic points (public + hidden checks): a decision
    [self_test]              # answers.md's questions, graded by hand, on top of the total
    quantized_model = 2

The rule: **the checks' points add up to ``[course] total``**. A weight changed without the
total (or the other way round) is refused by ``grade``, ``grade-all``, ``gradescope``,
``release`` and ``build`` with ``RubricError``, which gives both numbers: a new total is a
decision, and the README, the notebook, answers.md and the Gradescope settings follow it once
the staff repository's ``grader build`` command has rewritten them. A release has no hidden
checks; its rubric's ``[course] withheld`` says how many points they hold, so its total still
adds up.

Everything that states points (the README's points paragraph and exercise table, the
notebook's introduction, the released rubric's header, answers.md, the Gradescope settings
``gradescope`` prints) is written from ``Rubric`` (``totals``, ``points_paragraph``), so they
agree by construction; ``refuse_stale_readme`` is what ``grade`` checks before grading.
"""

from __future__ import annotations

import hashlib
import json
import re
import textwrap
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from grader.checks import Check

RUBRIC = Path(__file__).resolve().parent / "rubric.toml"
SPECIAL = ("course", "self_test")
#: The README's paragraph on points, written by ``points_paragraph`` (the ``grader build`` command).
POINTS = re.compile(r"(<!-- points -->\n)(.*?)(<!-- /points -->\n)", re.DOTALL)


class RubricError(ValueError):
    """The rubric does not hold together (the checks' points, grader/rubric.toml's total)."""


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
        return sum(
            p for c, p in self.checks.items() if c not in self.hidden_ids and c.split(".", 1)[1].startswith("gpu_")
        )

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
            raise RubricError(
                "grader/rubric.toml has no [course] total: state the course's "
                f"automatic points there (the checks add up to {self.total:g})"
            )
        if self.total != self.stated_total:
            raise RubricError(
                f"grader/rubric.toml: the checks add up to {self.total:g} points, but [course] "
                f"total says {self.stated_total:g}. Either put the weights back, or make "
                f"{self.total:g} the course's total (a decision: set [course] total = "
                f"{self.total:g}, then the staff repository's `grader build` command rewrites the "
                "README, the notebook and answers.md, and says what else to redo)"
            )
        return self


def parse(text: str, checks: "list[Check] | None" = None) -> Rubric:
    """The rubric of ``text`` (a ``grader/rubric.toml``) over ``checks`` (default: the course's
    checks here, the hidden ones where this grader has them)."""
    data = tomllib.loads(text)
    for table in data:
        if table not in SPECIAL:
            raise RubricError(
                f"grader/rubric.toml: [{table}] is not a table of the rubric (it has [course] and "
                "[self_test]): a check's points are written on the check, `points=` in "
                "grader/exercises/<module>.py (or beside it, for a hidden check)"
            )
    if checks is None:
        checks = course_checks()
    points, hidden = {}, set()
    for check in checks:
        value = check.points
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise RubricError(f"{check.id} must be worth a number of points > 0 (points= on the check), got {value!r}")
        points[check.id] = float(value)
        if check.hidden:
            hidden.add(check.id)
    course = data.get("course", {})
    total = course.get("total")
    declared = course.get("withheld")
    questions = {name: float(value) for name, value in data.get("self_test", {}).items()}
    return Rubric(
        points,
        frozenset(hidden),
        None if total is None else float(total),
        None if declared is None else float(declared),
        questions,
    )


def course_checks() -> "list[Check]":
    """Every check of the course this grader holds: the public ones, and the hidden ones where
    they are (the staff repository, the Gradescope bundle; never a release)."""
    from grader.exercises import has_hidden_checks, hidden_checks, public_checks

    return public_checks() + (hidden_checks() if has_hidden_checks() else [])


def idea_of(check: "Check") -> str:
    """The lesson's idea ``check``'s points reward: its own ``idea``, else its exercise's."""
    from coursekit.course import EXERCISES

    return check.idea or next(e.idea for e in EXERCISES if e.marker == check.exercise)


def points_by_idea(checks: "list[Check]") -> dict[str, tuple[list[str], float]]:
    """``{idea: (exercises, points)}`` in course order, the argument checks last; ``ValueError``
    when those are worth more than ``course.ARGUMENTS_AT_MOST``."""
    from coursekit.course import ARGUMENTS, ARGUMENTS_AT_MOST

    ideas: dict[str, tuple[list[str], float]] = {}
    for check in sorted(checks, key=lambda c: (idea_of(c) == ARGUMENTS, int(c.exercise[2:]))):
        exercises, points = ideas.get(idea_of(check), ([], 0.0))
        ideas[idea_of(check)] = (
            exercises + [check.exercise] * (check.exercise not in exercises),
            points + check.points,
        )
    arguments = ideas.get(ARGUMENTS, ([], 0.0))[1]
    if arguments > ARGUMENTS_AT_MOST:
        names = [c.id for c in checks if idea_of(c) == ARGUMENTS]
        raise RubricError(
            f"the argument checks ({', '.join(names)}) are worth {arguments:g} points, "
            f"more than the {ARGUMENTS_AT_MOST} the course allows them "
            "(coursekit/course.py ARGUMENTS_AT_MOST): the points go to the lesson's ideas"
        )
    return ideas


def ideas_table(checks: "list[Check]") -> str:
    """The README's table of points by idea (``<!-- ideas -->``)."""
    from coursekit.course import ARGUMENTS, ARGUMENTS_AT_MOST

    ideas = points_by_idea(checks)
    lines = ["| idea | exercises | points |", "|---|---|---|"]
    for idea, (exercises, points) in ideas.items():
        lines.append(f"| {idea} | {', '.join(exercises)} | {points:g} |")
    lines.append(f"| all | | {sum(p for _, p in ideas.values()):g} |")
    held = ideas.get(ARGUMENTS, ([], 0.0))[1]
    return "\n".join(lines) + (
        f"\n\nArgument checks: {held:g} points, at most {ARGUMENTS_AT_MOST} allowed "
        "(they are given: coursekit/argcheck.py).\n"
    )


def load(path: Path = RUBRIC) -> Rubric:
    return parse(Path(path).read_text(encoding="utf-8"))


def digest(points: Rubric) -> str:
    """Which rubric graded (every check's points, the total, the questions): two passes with
    different ones cannot be merged."""
    canonical = json.dumps(
        [sorted(points.checks.items()), points.stated_total, points.declared_hidden, sorted(points.questions.items())]
    )
    return hashlib.sha256(canonical.encode()).hexdigest()[:12]


def each(questions: dict[str, float]) -> str:
    values = set(questions.values())
    return f", {values.pop():g} points each" if len(values) == 1 else ""


def totals(rubric: Rubric) -> dict[str, float]:
    """The numbers every statement of points uses: ``automatic`` (the checks), ``cpu`` and
    ``gpu`` of them, ``manual`` (self-test, by hand) and ``course`` (all of it)."""
    gpu = sum(p for c, p in rubric.checks.items() if c.split(".", 1)[1].startswith("gpu_"))
    if not rubric.hidden_ids and rubric.declared_hidden:
        gpu = rubric.public_gpu  # a release cannot see which hidden checks need a GPU
    return {
        "automatic": rubric.total,
        "cpu": rubric.total - gpu,
        "gpu": gpu,
        "manual": rubric.manual,
        "course": rubric.total + rubric.manual,
    }


def gradescope_settings(rubric: Rubric) -> str:
    """What to set on Gradescope so that its total is the course's (printed by ``gradescope``
    and written into the README)."""
    t = totals(rubric)
    return (
        f"Gradescope: autograder points {t['cpu']:g} (the CPU checks the bundle grades); add "
        f"a manually graded question \"GPU checks\" worth {t['gpu']:g} (filled from the GPU "
        f"pass's gradebook after `merge`) and one \"Self-test (answers.md)\" worth "
        f"{t['manual']:g}: {t['course']:g} points in all, the course's total."
    )


def points_paragraph(points: Rubric) -> str:
    """The README's paragraph on points (the same in the repository and in a release)."""
    return (
        textwrap.fill(
            f"**Points.** The checks hold {points.total:g} points (the course's total, stated in "
            "[`grader/rubric.toml`](grader/rubric.toml); each check carries its own): "
            f"{points.public:g} in public checks, which `python -m grader grade` runs for you "
            f"({points.public - points.public_gpu:g} on any machine, {points.public_gpu:g} only on a "
            f"CUDA GPU), and {points.hidden:g} in hidden checks, which the instructor runs when "
            "grading and which are not in the student repository. The "
            f"{len(points.questions)} self-test questions in [`answers.md`](answers.md) are graded "
            f"by hand{each(points.questions)}: {points.manual:g} points on top of the "
            f"{points.total:g}, {points.total + points.manual:g} in all.",
            width=99,
            break_on_hyphens=False,
        )
        + "\n"
    )


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
            raise RubricError(
                f"{readme.name} states other points than grader/rubric.toml: rebuild "
                "what states points (the staff repository's `grader build` command, "
                "which also says what else to redo)"
            )
