"""How fast the grader is: one submission's CPU checks, and a class graded with grade-all.

    python benchmarks/grading_speed.py [--class-size 20] [--jobs N]   (default: all cores)

Prints wall-clock figures (the targets: one submission in at most 15 s, grade-all at least 10
submissions a minute, both on 2 cores). A benchmark, not a test: nothing here passes or fails.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--class-size", type=int, default=20)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    print(f"{os.cpu_count()} cores, root={os.geteuid() == 0}, python {sys.version.split()[0]}")
    for label, folder in (("reference", "solutions"), ("untouched stubs", "exercises")):
        times = [timed([sys.executable, "-m", "grader", "grade", folder, "--gpu", "off"])
                 for _ in range(3)]
        print(f"grade {label:16} {min(times):5.1f} s best of 3 (median {sorted(times)[1]:.1f} s), "
              "including the judge's start-up")
    with tempfile.TemporaryDirectory() as tmp:
        submissions = Path(tmp) / "class"
        for i in range(args.class_size):
            source = ROOT / ("solutions" if i % 2 == 0 else "exercises")
            shutil.copytree(source, submissions / f"student{i:03d}",
                            ignore=shutil.ignore_patterns("tests", "__pycache__"))
        elapsed = timed([sys.executable, "-m", "grader", "grade-all", str(submissions), "--out",
                         str(Path(tmp) / "out"), "--jobs", str(args.jobs), "--gpu", "off"])
    print(f"grade-all {args.class_size} submissions, --jobs {args.jobs}: {elapsed:.1f} s = "
          f"{60 * args.class_size / elapsed:.1f} submissions per minute")


if __name__ == "__main__":
    main()
