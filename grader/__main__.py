"""``python -m grader grade [SUBMISSION]``: how far a submission is, exercise by exercise."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from coursekit.impl import EXERCISES, REPO_ROOT
from grader.public import run_public_tests


def grade(submission: str) -> int:
    folder = Path(submission)
    if not folder.is_dir():
        print(f"grader: SUBMISSION must be a folder of exercise modules, got {submission!r}",
              file=sys.stderr)
        return 2
    impl = "exercises" if folder.resolve() == (REPO_ROOT / "exercises").resolve() else str(folder)
    outcome = run_public_tests(impl, "", profile="grading")
    print(f"launch-tax: public tests of {folder}/ (a progress report, not a grade)\n")
    print(f"{'exercise':<9} {'module':<14} {'passed':>8}   first problem")
    for number, module in EXERCISES:
        if not (REPO_ROOT / "exercises" / "tests" / f"test_{module}.py").exists():
            continue
        prefix = f"exercises.tests.test_{module}::"
        passed = [t for t in outcome.passed if t.startswith(prefix)]
        failed = [t for t in outcome.failed if t.startswith(prefix)]
        skipped = [t for t in outcome.skipped if t.startswith(prefix)]
        total = len(passed) + len(failed)
        first = failed[0].split("::", 1)[1] if failed else "all pass"
        if skipped and not failed:
            first += f" ({len(skipped)} GPU tests skipped: no CUDA here)"
        print(f"ex{number:<7} {module:<14} {len(passed):>3}/{total:<4}   {first}")
        if failed:
            print(f"{'':<36}{outcome.reasons.get(failed[0], '')[:200]}")
    if not outcome.passed and not outcome.failed:
        print("\nno test ran:\n" + outcome.output[-2000:])
    print(f"\nDetails: python -m pytest exercises --impl {impl} -m exN")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader")
    commands = parser.add_subparsers(dest="command", required=True)
    grade_cmd = commands.add_parser("grade", help="report a submission's progress per exercise")
    grade_cmd.add_argument("submission", nargs="?", default=str(REPO_ROOT / "exercises"),
                           help="folder of exercise modules (default: exercises/)")
    args = parser.parse_args(argv)
    return grade(args.submission)


if __name__ == "__main__":
    sys.exit(main())
