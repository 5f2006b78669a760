"""``python -m grader``: grade a submission, grade a class, release the student repository.

    python -m grader grade [SUBMISSION] [--json PATH] [--gpu auto|on|off] [--timeout S] [--only ex5]
    python -m grader grade-all DIR --out OUTDIR [--jobs N] [--gpu ...] [--timeout S]
    python -m grader release OUTDIR
    python -m grader notebook build [--check]
    python -m grader notebook fill NOTEBOOK FOLDER --out FILLED.ipynb

SUBMISSION is a folder of module files, a notebook or a zip of either (default: exercises/).
Exit status 0 whenever grading completed, whatever the score; 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from coursekit.impl import REPO_ROOT


def gradescope(report) -> dict:
    """Gradescope's results.json: one test per exercise, named by its marker."""
    tests = []
    for ex in report.exercises:
        lost = [c for c in ex.checks if c.status == "failed"]
        skipped = [c for c in ex.checks if c.status == "not run"]
        lines = [f"{c.check.name} (-{c.points:g}): {c.reason}" for c in lost]
        lines += [f"{c.check.name}: not run ({c.reason})" for c in skipped]
        tests.append({"name": ex.exercise, "score": ex.score, "max_score": ex.max_score,
                      "status": "passed" if ex.score >= ex.max_score else "failed",
                      "output": "\n".join(lines) or "all checks passed", "visibility": "visible"})
    return {"score": report.score, "output": "\n".join(report.notes), "visibility": "visible",
            "stdout_visibility": "hidden", "tests": tests}


def table(report) -> str:
    lines = [f"launch-tax grade: {report.submission}", "",
             f"{'exercise':<9} {'module':<14} {'score':>9}   first lost point"]
    for ex in report.exercises:
        lost = [c for c in ex.checks if c.status == "failed"]
        first = f"{lost[0].check.name}: {lost[0].reason.splitlines()[0]}" if lost else "-"
        lines.append(f"{ex.exercise:<9} {ex.module:<14} {ex.score:>4g}/{ex.max_score:<4g}   {first[:160]}")
    lines += [f"{'total':<24} {report.score:>4g}/{report.max_score:<4g}", ""]
    lines += [f"note: {n}" for n in report.notes]
    lines.append(f"({report.wall_s:.1f} s)")
    return "\n".join(lines)


def _judge(args, hide=(), jobs=None):
    from grader.judge import MODULES, Judge

    only = None
    if getattr(args, "only", None):
        only = tuple(dict.fromkeys(e.strip() for e in args.only.split(",") if e.strip()))
        unknown = [e for e in only if e not in MODULES]
        if unknown or not only:
            raise ValueError(f"--only: expected exercise markers among {', '.join(MODULES)}, "
                             f"got {args.only!r}")
    return Judge(gpu=args.gpu, timeout_s=args.timeout, jobs=jobs or args.jobs, hide=hide,
                 exercises=only)


def cmd_grade(args) -> int:
    from grader.submission import load

    try:
        submission = load(args.submission)
        judge = _judge(args)
    except (ValueError, RuntimeError) as exc:
        print(f"grader: {exc}", file=sys.stderr)
        return 2
    report = judge.grade(submission)
    print(table(report))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(gradescope(report), indent=1) + "\n", encoding="utf-8")
        print(f"wrote {args.json}")
    return 0


def cmd_grade_all(args) -> int:
    from grader.submission import load

    root, out = Path(args.dir), Path(args.out)
    if not root.is_dir():
        print(f"grader: DIR must be a folder of submissions, got {args.dir!r}", file=sys.stderr)
        return 2
    entries = sorted(p for p in root.iterdir() if not p.name.startswith(".")
                     and (p.is_dir() or p.suffix in (".zip", ".ipynb")) and not p.is_symlink())
    try:
        # Each submission grades its exercises one at a time; submissions run side by side.
        judge = _judge(args, hide=(root.resolve(), out.resolve()), jobs=1)
    except (ValueError, RuntimeError) as exc:
        print(f"grader: {exc}", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    start, done, lock, rows = time.monotonic(), [0], threading.Lock(), {}

    names = _student_names(entries)

    def one(entry: Path):
        from grader.submission import Submission

        student = names[entry]
        try:
            report = judge.grade(load(entry))
        except Exception as exc:  # noqa: BLE001 - one bad submission never stops the batch
            report = judge.grade(Submission(str(entry), problems=[f"not graded: {exc}"]))
        folder = out / student
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "results.json").write_text(json.dumps(gradescope(report), indent=1) + "\n",
                                            encoding="utf-8")
        with lock:
            rows[student] = report
            done[0] += 1
            _progress(done[0], len(entries), time.monotonic() - start)

    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        list(pool.map(one, entries))
    print(file=sys.stderr)
    exercises = list(next(iter(rows.values())).exercises) if rows else []
    with open(out / "gradebook.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["student", "score", "max_score", *[e.exercise for e in exercises], "notes"])
        for student in sorted(rows):
            report = rows[student]
            writer.writerow([student, f"{report.score:g}", f"{report.max_score:g}",
                             *[f"{e.score:g}" for e in report.exercises], " | ".join(report.notes)])
    elapsed = time.monotonic() - start
    print(f"graded {len(entries)} submissions in {elapsed:.1f} s "
          f"({60 * len(entries) / max(elapsed, 1e-9):.1f} per minute); wrote {out / 'gradebook.csv'}")
    return 0


def _student_names(entries: list[Path]) -> dict[Path, str]:
    """A safe, unique name per submission (``alice/`` and ``alice.zip`` become alice, alice-2)."""
    names, taken = {}, set()
    for entry in entries:
        base = re.sub(r"[^A-Za-z0-9._-]", "_", entry.name.removesuffix(".zip").removesuffix(".ipynb"))
        base = base.strip(".") or "submission"
        name, k = base, 2
        while name in taken:
            name, k = f"{base}-{k}", k + 1
        taken.add(name)
        names[entry] = name
    return names


def _progress(done: int, total: int, elapsed: float) -> None:
    width = 30
    filled = width * done // max(total, 1)
    print(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} graded, {elapsed:.0f} s",
          end="", file=sys.stderr, flush=True)


def cmd_release(args) -> int:
    from grader.release import release

    try:
        written = release(Path(args.out))
    except ValueError as exc:
        print(f"grader: {exc}", file=sys.stderr)
        return 2
    print(f"wrote the student repository to {args.out} ({written} files)")
    return 0


def cmd_notebook(args) -> int:
    try:
        from grader import notebook
    except ImportError:
        print("grader: the notebook builder is not part of the student repository", file=sys.stderr)
        return 2
    if args.action == "build":
        try:
            text = notebook.dumps(notebook.build_notebook())
        except notebook.DriftError as exc:
            print(f"grader: the notebook cannot be built: {exc}", file=sys.stderr)
            return 2
        path = notebook.SOURCE_NOTEBOOK
        if args.check:
            current = path.read_text(encoding="utf-8") if path.exists() else ""
            if current != text:
                print(f"grader: {path.relative_to(REPO_ROOT)} is out of date with the modules, "
                      "checks or rubric: run `python -m grader notebook build`", file=sys.stderr)
                return 1
            print(f"{path.relative_to(REPO_ROOT)} is up to date")
            return 0
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path}")
        return 0
    source, folder = Path(args.notebook), Path(args.folder)
    if not source.is_file():
        print(f"grader: NOTEBOOK: no such notebook: {args.notebook!r}", file=sys.stderr)
        return 2
    if not folder.is_dir():
        print(f"grader: FOLDER: expected a folder of module files, got {args.folder!r}", file=sys.stderr)
        return 2
    files = {m: (folder / f"{m}.py").read_text(encoding="utf-8")
             for m in notebook.MODULE_NAMES if (folder / f"{m}.py").is_file()}
    try:
        filled = notebook.fill(json.loads(source.read_text(encoding="utf-8")), files)
    except ValueError as exc:
        print(f"grader: {exc}", file=sys.stderr)
        return 2
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(notebook.dumps(filled), encoding="utf-8")
    print(f"wrote {args.out} ({len(files)} modules from {folder})")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)

    def limits(p):
        p.add_argument("--gpu", choices=("auto", "on", "off"), default="auto",
                       help="run the GPU checks: auto (when CUDA is there), on (error without it), off")
        p.add_argument("--timeout", type=float, default=60.0,
                       help="seconds each exercise's worker may run (default: 60)")

    grade = commands.add_parser("grade", help="grade one submission")
    grade.add_argument("submission", nargs="?", default=str(REPO_ROOT / "exercises"),
                       help="folder of module files, notebook, or zip (default: exercises/)")
    grade.add_argument("--json", metavar="PATH", help="write Gradescope's results.json here")
    grade.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                       help="exercises graded side by side (default: 2)")
    grade.add_argument("--only", metavar="EXERCISES",
                       help="grade only these exercises, e.g. ex5 or ex5,ex6 (default: all)")
    limits(grade)
    everyone = commands.add_parser("grade-all", help="grade a folder of submissions")
    everyone.add_argument("dir", help="one submission per entry: folder, notebook or zip")
    everyone.add_argument("--out", required=True, help="gradebook.csv and STUDENT/results.json")
    everyone.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                          help="submissions graded side by side (default: all cores)")
    limits(everyone)
    rel = commands.add_parser("release", help="write the student repository")
    rel.add_argument("out", help="an empty or new folder")
    nb = commands.add_parser("notebook", help="the course as an nbgrader notebook (course/)")
    nb_actions = nb.add_subparsers(dest="action", required=True)
    build = nb_actions.add_parser("build", help="write course/source/launch_tax/launch_tax.ipynb "
                                                "from the modules, checks and rubric")
    build.add_argument("--check", action="store_true",
                       help="write nothing; exit 1 if the committed notebook is out of date")
    fill = nb_actions.add_parser("fill", help="put a folder's module files into a notebook's answer cells")
    fill.add_argument("notebook", help="a course notebook (source or release)")
    fill.add_argument("folder", help="a folder of module files (launch_model.py, buckets.py, ...)")
    fill.add_argument("--out", required=True, help="where to write the filled notebook")
    args = parser.parse_args(argv)
    return {"grade": cmd_grade, "grade-all": cmd_grade_all, "release": cmd_release,
            "notebook": cmd_notebook}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
