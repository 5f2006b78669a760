"""``python -m grader release OUTDIR``: the student repository.

What goes out: the stubs and public tests (``exercises/``), the course notes (``notes/``, English
and Chinese, a chapter per exercise), the support package (``coursekit/``,
with the bundled H200 measurement in ``coursekit/data/``), the public grader (``grader/`` without
``hidden/``, its rubric without the hidden checks, and ``expected.json``: the reference's
answers to the public probes, recorded here because the release has no reference to ask), the
decode engine benchmark (``benchmarks/decode_engine.py``: it runs on a student's own exercises),
``conftest.py``, ``pyproject.toml``, ``.gitignore``, ``AGENTS.md`` (the policy for AI coding
assistants), ``answers.md`` (the self-test questions, written from ``grader/notebook.py``'s
``SELF_TEST`` without the model answers) and the README without its staff-only sections. What
never goes out: ``solutions/``, ``tests/`` (the repository's own suite, with its mutants),
``.ci/``, hidden checks, ``course/``, the other benchmarks and the notebook builder (the source
notebook holds the solutions). ``grader/`` and ``coursekit/``, which hold staff code beside what
students get, ship by an allow-list (``SHIPPED``, and ``WITHHELD`` with a reason for each
entry kept home): an entry in neither stops the release.

The points are counted from ``grader/rubric.toml`` (``grader.rubric.parse``) and written into the
released README (its ``<!-- points -->`` paragraph) and the released rubric's header, so the
README, the rubric and ``python -m grader grade`` agree.
"""

from __future__ import annotations

import json
import re
import shutil
import textwrap
from pathlib import Path

from coursekit.impl import REPO_ROOT
from grader.rubric import Rubric, each, readme_with_points
from grader.rubric import parse as parse_rubric

COPIED = (
    "exercises",
    "coursekit",
    "grader",
    "notes",
    "benchmarks/decode_engine.py",
    "conftest.py",
    "pyproject.toml",
    ".gitignore",
    "AGENTS.md",
)
#: The two folders that hold staff code beside what students get ship by an allow-list: each entry
#: of the folder (a file, or a subfolder copied whole) is either shipped or withheld, with the
#: reason. An entry in neither stops the release (``unclassified``): a new staff module never
#: ships because nobody thought of it.
SHIPPED = {
    "grader": (
        "__init__.py",
        "__main__.py",
        "checks.py",
        "classbook.py",
        "devices.py",
        "doctor.py",
        "exercises",
        "flags.py",
        "gradebook.py",
        "isolation.py",
        "judge.py",
        "lms.py",
        "notebook_checks.py",
        "nvidia_smi.py",
        "plan.py",
        "probes.py",
        "procfs.py",
        "public.py",
        "reference.py",
        "results.py",
        "rubric.py",
        "rubric.toml",
        "runtime",
        "sandbox.py",
        "secret.py",
        "submission.py",
        "text.py",
        "verdict.py",
        "version.py",
        "workers.py",
    ),
    "coursekit": (
        "__init__.py",
        "allocator.py",
        "argcheck.py",
        "args.py",  # the old name of argcheck.py, so that old submissions still grade
        "checks.py",
        "cli.py",
        "compiled.py",
        "course.py",
        "cudasim.py",
        "data",
        "fusion.py",
        "impl.py",
        "lab",
        "lesson.py",
        "measurements.py",
        "platform.py",
        "record_vllm_formats.py",
        "standin.py",
        "strategies.py",
        "svgplot.py",
        "toymodel.py",
        "vllm_recorded.py",
        "vllm_runners.py",
    ),
}
WITHHELD = {
    "grader": {
        "hidden": "the hidden checks",
        "build.py": "rewrites the staff repository's derived files",
        "gradescope.py": "builds the staff's Gradescope bundle",
        "nbgrader_bridge.py": "the staff's nbgrader course",
        "notebook.py": "builds the source notebook, which holds the solutions",
        "release.py": "this file: makes the release",
        "scaffold.py": "writes stubs from the reference",
        "staff.py": "the staff's commands",
    },
    "coursekit": {},
}
#: Never copied, wherever they are: caches, and files the release writes itself.
NEVER = {"__pycache__", "expected.json", "BUILD.json"}


def unclassified(root: Path = REPO_ROOT) -> list[str]:
    """Entries of ``SHIPPED``'s folders under ``root`` that are neither shipped nor withheld (and
    named entries that are not there): what a release would have to guess about."""
    out = []
    for folder, shipped in SHIPPED.items():
        present = {p.name for p in (root / folder).iterdir() if p.name not in NEVER and p.suffix != ".pyc"}
        known = set(shipped) | set(WITHHELD[folder])
        out += [
            f"{folder}/{name}: neither shipped nor withheld (grader/release.py: SHIPPED or WITHHELD)"
            for name in sorted(present - known)
        ]
        out += [f"{folder}/{name}: named in grader/release.py but not there" for name in sorted(known - present)]
    return out


STAFF = re.compile(r"<!-- staff-only -->.*?<!-- /staff-only -->\n?", re.DOTALL)
#: README lines that name what a release does not have, and what they say there instead (None:
#: the line goes).
# fmt: off
# (A README line and what replaces it, one above the other: a line too long to join.)
STUDENT_LINES = {
    'python -m pip install torch==2.13.0 -e ".[dev,nbgrader]"   # any torch >= 2.4; this one is CPU-only':
        'python -m pip install torch==2.13.0 -e ".[dev]"   # any torch >= 2.4; this one is CPU-only',
    "python -m pytest tests -n auto  # the repository's own suite (reference, stubs, mutants, grader)":
        "python -m pytest exercises      # the public tests (GPU tests skip without CUDA)",
    "python -m coursekit.lab launch-tax --impl solutions   # with the reference": None,
    "python -m pytest exercises --impl solutions     # the reference": None,
    "python -m pytest exercises --impl solutions       # 用参考实现跑同一套测试": None,
}
# fmt: on


def public_rubric(text: str) -> str:
    """The released rubric: ``[course]`` (the total, and the points ``withheld`` in hidden checks)
    and ``[self_test]`` under a header that counts the points; none of the repository's comments
    (they may name what a release does not have)."""
    points = parse_rubric(text)
    header = (
        "# The course's points, in the student repository. The rubric holds "
        f"{points.total:g} points in all:\n"
        f"# - {points.public:g} in the public checks, which `python -m grader grade` runs: "
        f"{points.public - points.public_gpu:g} on any\n"
        f"#   machine, and {points.public_gpu:g} in the checks named gpu_*, which need CUDA "
        "(without it they are not run\n"
        "#   and the report says how many points it left out);\n"
        f"# - {points.hidden:g} in hidden checks, which the instructor grades; they are not in "
        "the student repository.\n"
        f"# [self_test]: the {len(points.questions)} questions in answers.md, {points.manual:g} "
        f"points graded by hand, not part of the {points.total:g}.\n"
        "# The public checks and their points (`points=` on each): grader/exercises/.\n\n"
        "# The course's automatic points, and how many of them are in checks this repository does "
        "not have.\n"
        f"[course]\ntotal = {points.total:g}\nwithheld = {points.hidden:g}\n\n"
    )
    kept, skipping = [], False
    for line in text.splitlines(keepends=True):
        header_line = re.match(r"\s*\[([^\]]+)\]", line)
        if header_line:
            skipping = header_line.group(1).endswith(".hidden") or header_line.group(1) == "course"
            if header_line.group(1) == "self_test":
                kept.append(
                    f"# The self-test questions (answers.md), graded by hand; not part of the {points.total:g}.\n"
                )
        if not skipping and not line.lstrip().startswith("#"):
            kept.append(line)
    body = re.sub(r"\n{3,}", "\n\n", "".join(kept)).strip("\n")
    return header + body + "\n"


def answers_markdown(rubric_text: str | None = None) -> str:
    """``answers.md``: the self-test questions of ``grader/notebook.py``'s ``SELF_TEST`` (never
    their model answers), room to answer, and how they are graded."""
    from grader.notebook import INTERVIEW_PRACTICE, SELF_TEST

    points = parse_rubric(
        rubric_text if rubric_text is not None else (REPO_ROOT / "grader" / "rubric.toml").read_text(encoding="utf-8")
    )
    if list(points.questions) != [q.id for q in SELF_TEST]:
        raise RuntimeError(
            f"grader/rubric.toml [self_test] lists {list(points.questions)}, "
            f"grader/notebook.py's SELF_TEST asks {[q.id for q in SELF_TEST]}"
        )
    parts = [
        "# Self-test questions\n\n"
        f"The lesson's {len(SELF_TEST)} self-test questions. Answer each one below it, in a few "
        "sentences, with\nnumbers from the lesson's launch-overhead model where they help:\n"
        "T_eager = T_compute + N·tau, T_graph = T_compute + tau.\n\n"
        f"**How they are graded**: by hand, by the course staff{each(points.questions)} "
        f"({points.manual:g} in all).\n"
        f"They are not part of the {points.total:g} points of the checks: "
        "`python -m grader grade` only counts how many you answered.\n"
        "Hand in this file as your course asks. In the nbgrader version of the course the same\n"
        "questions are the notebook's answer cells: answer them there.\n"
    ]
    for i, question in enumerate(SELF_TEST, 1):
        value = points.questions[question.id]
        parts.append(
            f"\n## Question {i}: `{question.id}` ({value:g} point"
            f"{'' if value == 1 else 's'})\n\n{textwrap.fill(question.question, 99)}\n\n"
            "**Your answer:**\n\n_Write your answer here._\n"
        )
    parts.append(
        "\n## Optional practice: interview questions (not graded; the first three are the lesson's)\n\n"
        + "".join(f"- {textwrap.fill(q, 97, subsequent_indent='  ')}\n" for q in INTERVIEW_PRACTICE)
    )
    return "".join(parts)


def student_readme(text: str, points: Rubric) -> str:
    """The README without its staff-only sections, with its student lines and its points."""
    readme = STAFF.sub("", text)
    for staff, student in STUDENT_LINES.items():
        if staff not in readme:
            raise RuntimeError(f"README.md no longer has the line {staff!r}; update STUDENT_LINES")
        readme = readme.replace(staff + "\n", "" if student is None else student + "\n")
    readme = readme_with_points(readme, points)
    return re.sub(r"\n{3,}", "\n\n", readme)  # where a staff-only section was


def recorded_answers() -> dict:
    """The reference's answers to the public probes this machine can run and the judge asks the
    reference about (as ``Judge._reference_answers`` does), on the practice inputs
    (``public_checks()`` without a grading secret)."""
    import torch

    from grader.runtime import wire
    from grader.checks import same
    from grader.exercises import public_checks
    from coursekit.course import MODULE_OF
    from grader.judge import Reference

    reference, answers = Reference(), {}
    for check in public_checks():
        if check.gpu and not torch.cuda.is_available():
            continue
        if not getattr(check.compare or same(), "needs_reference", False):
            continue
        wanted = [probe for probe in check.probes if probe.needs_reference]
        found, _ = reference.answers(check.exercise, MODULE_OF[check.exercise], wanted, cache=True, gpu=check.gpu)
        for probe in wanted:
            answer = found.get(probe.key())
            if answer is None:
                continue
            key = f"{check.exercise} {probe.key()}"
            if answer.ok:
                answers[key] = {"ok": True, "value": wire.encode(answer.value)}
            else:
                answers[key] = {"ok": False, "error": answer.error}
    return answers


def release(out: Path) -> int:
    """Write the student repository into ``out`` (new or empty); return how many files."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ValueError(f"OUTDIR: {out} exists and is not an empty folder")
    if out.resolve().is_relative_to(REPO_ROOT):
        raise ValueError(f"OUTDIR: {out} is inside the repository; choose a folder outside it")
    problems = unclassified()
    if problems:
        raise ValueError("release: decide what ships first:\n  " + "\n  ".join(problems))
    out.mkdir(parents=True, exist_ok=True)
    ignore = shutil.ignore_patterns(*NEVER, "*.pyc", ".hypothesis")
    for name in COPIED:
        source = REPO_ROOT / name
        if name in SHIPPED:  # the allow-list, entry by entry
            (out / name).mkdir(parents=True)
            for entry in SHIPPED[name]:
                if (source / entry).is_dir():
                    shutil.copytree(source / entry, out / name / entry, ignore=ignore)
                else:
                    shutil.copy2(source / entry, out / name / entry)
        elif source.is_dir():
            shutil.copytree(source, out / name, ignore=ignore)
        else:
            (out / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, out / name)
    rubric = (REPO_ROOT / "grader" / "rubric.toml").read_text(encoding="utf-8")
    (out / "grader" / "rubric.toml").write_text(public_rubric(rubric), encoding="utf-8")
    (out / "README.md").write_text(
        student_readme((REPO_ROOT / "README.md").read_text(encoding="utf-8"), parse_rubric(rubric)), encoding="utf-8"
    )
    (out / "answers.md").write_text(answers_markdown(rubric), encoding="utf-8")
    (out / "grader" / "expected.json").write_text(json.dumps(recorded_answers(), sort_keys=True), encoding="utf-8")
    from grader.version import build_info

    (out / "grader" / "BUILD.json").write_text(json.dumps(build_info(), indent=1) + "\n", encoding="utf-8")
    return sum(1 for p in out.rglob("*") if p.is_file())
