"""A throwaway nbgrader course around the repository's course/ folder, for tests and benchmarks.

The course folder's ``nbgrader_config.py`` loads ``course/nbgrader_config.py`` (as an instructor
whose course lives elsewhere would) and points nbgrader at the new folder.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from grader.notebook import ASSIGNMENT, COURSE_DIR, SOURCE_NOTEBOOK


def make_course(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    shutil.copytree(SOURCE_NOTEBOOK.parent, root / "source" / ASSIGNMENT)
    (root / "nbgrader_config.py").write_text(
        "c = get_config()  # noqa: F821\n"
        f"load_subconfig({str(COURSE_DIR / 'nbgrader_config.py')!r})  # noqa: F821\n"
        f"c.CourseDirectory.root = {str(root)!r}\n", encoding="utf-8")
    return root


def nbgrader(root: Path, *args: str, check_timeout_s: float = 60, timeout: float = 900) -> subprocess.CompletedProcess:
    """Run the real ``nbgrader`` command line in the course folder."""
    env = {**os.environ, "LAUNCH_TAX_CHECK_TIMEOUT": str(check_timeout_s)}
    done = subprocess.run(["nbgrader", *args], cwd=root, env=env, capture_output=True, text=True,
                          timeout=timeout)
    if done.returncode != 0:
        raise AssertionError(f"nbgrader {' '.join(args)} failed ({done.returncode}):\n"
                             f"{done.stdout[-3000:]}\n{done.stderr[-6000:]}")
    return done


def release_notebook(root: Path) -> dict:
    return json.loads((root / "release" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_text())


def submit(root: Path, student: str, notebook: dict, extra_files: dict[str, str] | None = None) -> Path:
    folder = root / "submitted" / student / ASSIGNMENT
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{ASSIGNMENT}.ipynb"
    path.write_text(json.dumps(notebook, indent=1), encoding="utf-8")
    for name, text in (extra_files or {}).items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text, encoding="utf-8")
    return path


def cell_scores(root: Path, student: str) -> dict[str, tuple[float | None, float]]:
    """``{cell id: (auto score, max score)}`` from nbgrader's gradebook."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        notebook = gb.find_submission_notebook(ASSIGNMENT, ASSIGNMENT, student)
        return {g.name: (g.auto_score, g.max_score) for g in notebook.grades}


def per_exercise(scores: dict[str, tuple[float | None, float]]) -> dict[str, tuple[float, float]]:
    """Test-cell scores summed per exercise (cells are named ``test_exN_...``)."""
    out: dict[str, tuple[float, float]] = {}
    for name, (auto, most) in scores.items():
        if name.startswith("test_ex"):
            exercise = name.split("_")[1]
            got, total = out.get(exercise, (0.0, 0.0))
            out[exercise] = (got + (auto or 0.0), total + most)
    return out
