"""``python -m grader release OUTDIR``: the student repository.

What goes out: the stubs and public tests (``exercises/``), the support package (``coursekit/``),
the public grader (``grader/`` without ``hidden.py``, its rubric without the hidden checks, and
``expected.json``: the reference's answers to the public probes, recorded here because the
release has no reference to ask), ``conftest.py``, ``pyproject.toml``, ``.gitignore`` and the
README without its staff-only sections. What never goes out: ``solutions/``, ``tests/`` (the
repository's own suite, with its mutants), ``.ci/``, hidden checks, ``course/`` and the notebook
builder (the source notebook holds the solutions).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from coursekit.impl import REPO_ROOT

COPIED = ("exercises", "coursekit", "grader", "conftest.py", "pyproject.toml", ".gitignore",
          "README.md")
NEVER = {"hidden.py", "release.py", "notebook.py", "nbgrader_bridge.py", "__pycache__",
         "expected.json"}
STAFF = re.compile(r"<!-- staff-only -->.*?<!-- /staff-only -->\n?", re.DOTALL)
#: README lines that name what a release does not have, and what they say there instead (None:
#: the line goes).
STUDENT_LINES = {
    'python -m pip install torch==2.13.0 -e ".[dev,nbgrader]"   # any torch >= 2.4; this one is CPU-only':
        'python -m pip install torch==2.13.0 -e ".[dev]"   # any torch >= 2.4; this one is CPU-only',
    "python -m pytest tests -n auto  # the repository's own suite (reference, stubs, mutants, grader)":
        "python -m pytest exercises     # the public tests (GPU tests skip without CUDA)",
    "python -m coursekit.lab launch-tax --impl solutions   # with the reference": None,
    "python -m pytest exercises --impl solutions     # the reference": None,
    "python -m pytest exercises -m gpu --impl solutions # the reference": None,
    "python -m pytest exercises --impl solutions       # 用参考实现跑同一套测试": None,
}


def public_rubric(text: str) -> str:
    """The rubric without its ``[exN.hidden]`` tables."""
    kept, skipping = [], False
    for line in text.splitlines(keepends=True):
        header = re.match(r"\s*\[([^\]]+)\]", line)
        if header:
            skipping = header.group(1).endswith(".hidden")
        if not skipping:
            kept.append(line)
    return "".join(kept)


def recorded_answers() -> dict:
    """The reference's answers to every public probe this machine can run."""
    import torch

    from grader.checks import public_checks
    from grader.judge import Reference

    reference, answers = Reference(), {}
    for check in public_checks():
        if check.gpu and not torch.cuda.is_available():
            continue
        for probe in check.probes:
            answer = reference.answer(check.exercise, probe)
            if answer is None:
                continue
            key = f"{check.exercise} {probe.key()}"
            if answer.ok:
                from grader import wire

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
    out.mkdir(parents=True, exist_ok=True)
    ignore = shutil.ignore_patterns(*NEVER, "*.pyc", ".hypothesis")
    for name in COPIED:
        source = REPO_ROOT / name
        if source.is_dir():
            shutil.copytree(source, out / name, ignore=ignore)
        else:
            shutil.copy2(source, out / name)
    (out / "grader" / "rubric.toml").write_text(
        public_rubric((REPO_ROOT / "grader" / "rubric.toml").read_text(encoding="utf-8")), encoding="utf-8")
    readme = STAFF.sub("", (REPO_ROOT / "README.md").read_text(encoding="utf-8"))
    for staff, student in STUDENT_LINES.items():
        if staff not in readme:
            raise RuntimeError(f"README.md no longer has the line {staff!r}; update STUDENT_LINES")
        readme = readme.replace(staff + "\n", "" if student is None else student + "\n")
    (out / "README.md").write_text(readme, encoding="utf-8")
    (out / "grader" / "expected.json").write_text(json.dumps(recorded_answers(), sort_keys=True),
                                                  encoding="utf-8")
    return sum(1 for p in out.rglob("*") if p.is_file())
