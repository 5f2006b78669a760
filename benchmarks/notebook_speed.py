"""nbgrader autograde and our grader, side by side, on the same filled notebook.

    python benchmarks/notebook_speed.py [--repeat 3]

Builds a throwaway nbgrader course (tests/nbcourse.py), releases the notebook, fills it with the
reference, then times ``nbgrader autograde`` (one student: kernel start, every cell, the checks)
and ``python -m grader grade filled.ipynb --gpu off`` (the same checks, two exercises at a time)
and prints both with the scores they gave. Both grade officially, with a grading secret made
for the run (as a course would: the reference's answers are drawn and computed per submission).
A benchmark, not a test: nothing passes or fails.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from coursekit.course import MODULES
from grader import notebook as nb
from tests.nbcourse import cell_scores, make_course, nbgrader, release_notebook, submit


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"{os.cpu_count()} cores, root={os.geteuid() == 0}, python {sys.version.split()[0]}")
    modules = {
        m: (ROOT / "solutions" / f"{m}.py").read_text() for m in MODULES if (ROOT / "solutions" / f"{m}.py").exists()
    }
    with tempfile.TemporaryDirectory() as tmp:
        secret = Path(tmp) / "secret"
        subprocess.run(
            [sys.executable, "-m", "grader", "secret", "new", str(secret)], cwd=ROOT, check=True, capture_output=True
        )
        official = {"LAUNCH_TAX_SECRET_FILE": str(secret), "LAUNCH_TAX_PRACTICE": "0"}
        root = make_course(Path(tmp) / "course")
        nbgrader(root, "generate_assignment", nb.ASSIGNMENT)
        filled = nb.fill(release_notebook(root), modules)
        notebook = Path(tmp) / "filled.ipynb"
        notebook.write_text(json.dumps(filled))
        ours, theirs = [], []
        for i in range(args.repeat):
            student = f"student{i}"
            submit(root, student, filled)
            start = time.perf_counter()
            nbgrader(root, "autograde", nb.ASSIGNMENT, "--student", student, env=official)
            theirs.append(time.perf_counter() - start)
            auto = sum(a or 0 for name, (a, _) in cell_scores(root, student).items() if name.startswith("test_"))
            start = time.perf_counter()
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "grader",
                    "grade",
                    str(notebook),
                    "--gpu",
                    "off",
                    "--json",
                    str(Path(tmp) / "r.json"),
                    "--secret-file",
                    str(secret),
                ],
                cwd=ROOT,
                check=True,
                capture_output=True,
                text=True,
            )
            ours.append(time.perf_counter() - start)
            score = json.loads((Path(tmp) / "r.json").read_text())["score"]
    for label, times, points in (("nbgrader autograde", theirs, auto), ("python -m grader grade", ours, score)):
        print(
            f"{label:24} {min(times):5.1f} s best of {len(times)} (median "
            f"{sorted(times)[len(times) // 2]:.1f} s), {points:g} automatic points"
        )
    print(f"autograde / grade: {min(theirs) / min(ours):.2f} (best of each)")


if __name__ == "__main__":
    main()
