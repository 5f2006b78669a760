"""A throwaway nbgrader course around the repository's course/ folder, for tests and benchmarks.

The course folder's ``nbgrader_config.py`` loads ``course/nbgrader_config.py`` (as an instructor
whose course lives elsewhere would) and points nbgrader at the new folder.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
import traceback
from contextlib import contextmanager
from pathlib import Path

from coursekit.impl import REPO_ROOT
from grader.notebook import ASSIGNMENT, COURSE_DIR, SOURCE_NOTEBOOK


def make_course(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    shutil.copytree(SOURCE_NOTEBOOK.parent, root / "source" / ASSIGNMENT)
    (root / "nbgrader_config.py").write_text(
        "c = get_config()  # noqa: F821\n"
        f"load_subconfig({str(COURSE_DIR / 'nbgrader_config.py')!r})  # noqa: F821\n"
        f"c.CourseDirectory.root = {str(root)!r}\n",
        encoding="utf-8",
    )
    return root


def nbgrader(
    root: Path, *args: str, check_timeout_s: float = 60, timeout: float = 900, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """Run the real ``nbgrader`` command line in the course folder (practice grading unless
    ``env`` says otherwise: ``LAUNCH_TAX_SECRET_FILE`` for official grading)."""
    # The course is built and graded as on a machine without a GPU (its checks' GPU part is
    # pending), wherever the suite runs.
    env = {
        **os.environ,
        "CUDA_VISIBLE_DEVICES": "",
        "LAUNCH_TAX_CHECK_TIMEOUT": str(check_timeout_s),
        "LAUNCH_TAX_PRACTICE": "1",
        **(env or {}),
    }
    done = subprocess.run(["nbgrader", *args], cwd=root, env=env, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise AssertionError(
            f"nbgrader {' '.join(args)} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
        )
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


# ----------------------------------------------------------------------------- built once per run
# tests/test_nbgrader.py's course takes minutes to build. It is built once per test run, in a
# folder every pytest-xdist worker of the run shares, and started as soon as a worker has
# collected a test that needs it (tests/conftest.py), in a process of its own: no worker sits
# waiting while another builds it. States, as files in that folder: building (the builder's pid),
# done, failed (with build.log).

BUILD_TIMEOUT_S = 1500


def shared_folder(config) -> Path:
    """The run's folder for the course: beside the xdist workers' own temporary folders, or in
    the temporary folder of a run without xdist (never one shared by several runs)."""
    base = config._tmp_path_factory.getbasetemp()
    return (base.parent if hasattr(config, "workerinput") else base) / "nbcourse"


@contextmanager
def _locked(shared: Path):
    shared.mkdir(parents=True, exist_ok=True)
    with open(shared / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _claim(shared: Path, pid: int) -> bool:
    """Become the builder, unless somebody already is (or was)."""
    with _locked(shared):
        if any((shared / state).exists() for state in ("building", "done", "failed")):
            return False
        (shared / "building").write_text(str(pid))
        return True


def start_building(shared: Path) -> None:
    """Build the course in a background process, unless it is built or being built."""
    with _locked(shared):
        if any((shared / state).exists() for state in ("building", "done", "failed")):
            return
        with open(shared / "build.log", "w") as log:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    "import sys; from pathlib import Path; from tests.nbcourse "
                    "import build_here; build_here(Path(sys.argv[1]))",
                    str(shared),
                ],
                cwd=REPO_ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        (shared / "building").write_text(str(proc.pid))


def build_here(shared: Path) -> None:
    """Build the course in this process (the builder named in ``building``)."""
    from tests.test_nbgrader import build

    try:
        build(shared / "course")
        (shared / "done").write_text("")
    except BaseException:  # noqa: BLE001 - every waiting worker must learn why
        with open(shared / "build.log", "a") as log:
            log.write(traceback.format_exc())
        (shared / "failed").write_text("")
    finally:
        (shared / "building").unlink(missing_ok=True)


def built(shared: Path) -> Path:
    """The course's folder, once built (by this process if nobody has started it)."""
    if _claim(shared, os.getpid()):
        build_here(shared)
    deadline = time.monotonic() + BUILD_TIMEOUT_S
    while not (shared / "done").exists():
        if (shared / "failed").exists():
            raise AssertionError(
                "building the nbgrader course failed:\n" + (shared / "build.log").read_text(errors="replace")[-6000:]
            )
        pid = (shared / "building").read_text().strip() if (shared / "building").exists() else ""
        if pid and not _alive(int(pid)) and not (shared / "done").exists():
            raise AssertionError(
                f"the process building the nbgrader course ({pid}) died:\n"
                + (shared / "build.log").read_text(errors="replace")[-6000:]
            )
        if time.monotonic() > deadline:
            raise AssertionError(f"the nbgrader course was not built within {BUILD_TIMEOUT_S} s")
        time.sleep(0.5)
    return shared / "course"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
