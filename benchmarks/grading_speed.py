"""How fast the grader is, and how much memory it needs: one submission's CPU checks, a class
graded with grade-all, and the Gradescope bundle grading one submission.

    python benchmarks/grading_speed.py [--class-size 20] [--jobs N]   (default: all cores)

Official grading (with a grading secret made for the run) is what counts: its inputs depend on
the submission, so the reference answers them anew for each one; practice mode is timed too.
Prints wall-clock figures (the targets: one submission in at most 15 s, grade-all at least 10
submissions a minute, both on 2 cores) and the Gradescope bundle's time and peak memory (the
memory of the whole process tree, judge and workers, summed by proportional share and sampled
every 50 ms): what Gradescope's timeout and memory settings must allow. A benchmark, not a
test: nothing here passes or fails.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grader import gradescope


def timed(cmd: list[str], **kwargs) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True, **kwargs)
    return time.perf_counter() - start


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants, however deep (workers run under the judge's children)."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            parents.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo += parents.get(current, [])
    return found


def _pss_bytes(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
        except OSError:
            continue
        for line in rollup.splitlines():
            if line.startswith("Pss:"):
                total += int(line.split()[1]) * 1024
    return total


def peak_memory_run(cmd: list[str], env: dict[str, str]) -> tuple[float, int]:
    """Wall seconds and the peak memory of ``cmd``'s whole process tree."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, _pss_bytes(_tree(proc.pid)))
        time.sleep(0.05)
    return time.perf_counter() - start, peak


def gradescope_run(tmp: Path, secret: Path) -> None:
    """The bundle unpacked as Gradescope lays it out, grading the reference's module files."""
    archive = tmp / "autograder.zip"
    subprocess.run(
        [sys.executable, "-m", "grader", "gradescope", str(archive), "--secret-file", str(secret)],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    root = tmp / "autograder"
    gradescope.unpack(archive, root)
    shutil.copytree(ROOT / "solutions", root / "submission", ignore=shutil.ignore_patterns("__pycache__"))
    env = {**os.environ, "AUTOGRADER_ROOT": str(root), "LAUNCH_TAX_PYTHON": sys.executable}
    env.pop("LAUNCH_TAX_SECRET_FILE", None)
    seconds, peak = peak_memory_run(["bash", str(root / "run_autograder")], env)
    result = json.loads((root / "results" / "results.json").read_text())
    extra = result.get("extra_data", {})
    print(
        f"gradescope bundle, one submission (reference): {seconds:.1f} s, peak memory "
        f"{peak / 2**30:.2f} GiB (judge and workers), score {result.get('score')}, "
        f"isolation: {extra.get('isolation', '?')}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--class-size", type=int, default=20)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    print(f"{os.cpu_count()} cores, root={os.geteuid() == 0}, python {sys.version.split()[0]}")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        tmp.chmod(0o755)  # the bundle's workers run as other users and pass through it
        secret = tmp / "secret"
        subprocess.run(
            [sys.executable, "-m", "grader", "secret", "new", str(secret)], cwd=ROOT, check=True, capture_output=True
        )
        modes = {"practice": [], "official": ["--secret-file", str(secret)]}
        for mode, extra in modes.items():
            for label, folder in (("reference", "solutions"), ("untouched stubs", "exercises")):
                times = [
                    timed([sys.executable, "-m", "grader", "grade", folder, "--gpu", "off", *extra]) for _ in range(3)
                ]
                print(
                    f"grade {label:16} {mode:8} {min(times):5.1f} s best of 3 (median "
                    f"{sorted(times)[1]:.1f} s), including the judge's start-up"
                )
        submissions = tmp / "class"
        for i in range(args.class_size):
            source = ROOT / ("solutions" if i % 2 == 0 else "exercises")
            shutil.copytree(
                source, submissions / f"student{i:03d}", ignore=shutil.ignore_patterns("tests", "__pycache__")
            )
        for mode, extra in modes.items():
            elapsed = timed(
                [
                    sys.executable,
                    "-m",
                    "grader",
                    "grade-all",
                    str(submissions),
                    "--out",
                    str(tmp / f"out-{mode}"),
                    "--jobs",
                    str(args.jobs),
                    "--gpu",
                    "off",
                    *(extra or ["--practice"]),
                ]
            )
            print(
                f"grade-all {args.class_size} submissions, {mode}, --jobs {args.jobs}: {elapsed:.1f} s = "
                f"{60 * args.class_size / elapsed:.1f} submissions per minute"
            )
        gradescope_run(tmp, secret)


if __name__ == "__main__":
    main()
