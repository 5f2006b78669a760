"""``python -m grader``: grade a submission, grade a class, join and total the gradebooks.

    python -m grader grade [SUBMISSION] [--json PATH] [--secret-file F] [--gpu auto|on|off] [--brief]
    python -m grader grade-all DIR --out OUTDIR [--secret-file F | --practice] [--jobs N]
                               [--only-gpu] [--replace | --students ID,...]
    python -m grader merge CPU_OUT GPU_OUT --out FINAL
    python -m grader totals OUTDIR
    python -m grader secret new PATH
    python -m grader doctor [--json PATH]

SUBMISSION is a folder of module files, a notebook or a zip of either (default: exercises/).
The staff repository has four more commands (the Gradescope bundle, the student release, the
rebuild of what the rubric derives, the nbgrader notebook): see its README.
Exit status: 0 whenever grading completed, whatever the scores; 2 for bad arguments or a refused
run (no isolation or no grading secret for a class, a used output folder, a rubric that does not
add up); 3 when nobody could be graded (the reference failed, or no worker can run on this
machine), and then nothing is written.
"""

from __future__ import annotations

import sys

#: The grader reads its rubric with tomllib (Python 3.11). Said in one line, before an import
#: fails; the doctor still runs (it says what else this machine can do).
if sys.version_info < (3, 11) and sys.argv[1:2] != ["doctor"]:
    sys.stderr.write(
        f"python -m grader needs Python 3.11 or newer; this is Python "
        f"{'.'.join(map(str, sys.version_info[:3]))} ({sys.executable}). The exercises' tests "
        "and the lab run on it (python -m pytest exercises); for the grader, run it with a "
        "Python 3.11 (e.g. `uv venv -p 3.11` or `conda create -n lt python=3.11`)\n"
    )
    raise SystemExit(2)

import argparse
import json
import os
from pathlib import Path

from coursekit.impl import REPO_ROOT
from grader.text import say

NOT_GRADED = 3


def _judge(args, hide=(), jobs=None):
    from grader import secret
    from coursekit.course import MODULE_OF
    from grader.judge import Judge

    only = None
    if getattr(args, "only", None):
        only = tuple(dict.fromkeys(e.strip() for e in args.only.split(",") if e.strip()))
        unknown = [e for e in only if e not in MODULE_OF]
        if unknown or not only:
            raise ValueError(f"--only: expected exercise markers among {', '.join(MODULE_OF)}, got {args.only!r}")
    return Judge(
        gpu=args.gpu,
        timeout_s=args.timeout,
        jobs=jobs or args.jobs,
        hide=hide,
        exercises=only,
        secret=secret.load(args.secret_file),
        gpu_only=args.only_gpu,
        deadline_s=args.deadline,
        gpu_jobs=args.gpu_jobs,
    )


def write_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, ensure_ascii=True) + "\n", encoding="utf-8")
    tmp.replace(path)


def cmd_grade(args) -> int:
    from grader.judge import EnvironmentProblem, ReferenceFailure
    from grader.results import gradescope, table
    from grader.submission import load

    try:
        submission = load(args.submission)
        if (
            Path(args.submission).resolve() == REPO_ROOT / "exercises"
            and submission.answers is None
            and (REPO_ROOT / "answers.md").is_file()
        ):  # the repository's own: answers.md at its top
            submission.answers = (REPO_ROOT / "answers.md").read_text(encoding="utf-8", errors="replace")
        from grader import rubric

        rubric.refuse_stale_readme(REPO_ROOT / "README.md")
        judge = _judge(args)
    except (ValueError, RuntimeError) as exc:
        print(f"grader: {exc}", file=sys.stderr)
        return 2
    try:
        report = judge.grade(submission)
    except (ReferenceFailure, EnvironmentProblem) as exc:
        print(f"grader: nothing was graded: {exc}", file=sys.stderr)
        return NOT_GRADED
    finally:
        judge.close()
    if args.json:  # written first: a report the terminal chokes on must not cost the results
        write_json(Path(args.json), gradescope(report, args.hidden_visibility))
    say(table(report, brief=args.brief))
    if args.json:
        say(f"wrote {args.json}")
    return 0


def cmd_grade_all(args) -> int:
    from grader import classbook, isolation, secret

    root, out = Path(args.dir), Path(args.out)
    if not root.is_dir():
        print(f"grader: DIR must be a folder of submissions, got {args.dir!r}", file=sys.stderr)
        return 2
    if out.resolve().is_relative_to(root.resolve()):
        print(
            f"grader: --out {args.out!r} is inside DIR; write the results elsewhere (a "
            "submission could collide with them)",
            file=sys.stderr,
        )
        return 2
    if args.replace and args.students:
        print(
            "grader: --replace and --students: choose one (replace the run whole, or regrade some students into it)",
            file=sys.stderr,
        )
        return 2
    try:
        made = secret.load(args.secret_file)
    except (ValueError, RuntimeError) as exc:
        print(f"grader: {exc}", file=sys.stderr)
        return 2
    if made is None and not args.practice:
        print("grader: " + secret.refusal("grade-all", "--practice"), file=sys.stderr)
        return 2
    if made is not None and args.practice:
        print("grader: --practice and a grading secret: choose one (practice inputs, or the secret's)", file=sys.stderr)
        return 2
    if not isolation.current().complete and not args.allow_unisolated:
        print(
            "grader: refusing to grade a class without isolation: the judge is not root or "
            "cannot make namespaces, so a submission could read the reference, the other "
            "submissions and the grading secret, and rewrite the gradebook. Grade as root (a "
            "grading server, a container with CAP_SYS_ADMIN), or pass --allow-unisolated to "
            "accept that risk.",
            file=sys.stderr,
        )
        return 2
    try:
        judge = _judge(args, hide=(root.resolve(), out.resolve()), jobs=1)
    except (ValueError, RuntimeError) as exc:
        print(f"grader: {exc}", file=sys.stderr)
        return 2
    students = tuple(dict.fromkeys(x.strip() for x in (args.students or "").split(",") if x.strip()))
    if args.students is not None and not students:
        print(f"grader: --students: expected ID,... got {args.students!r}", file=sys.stderr)
        return 2
    if not args.student_deadline > 0:
        print(f"grader: --student-deadline: expected seconds above 0, got {args.student_deadline:g}", file=sys.stderr)
        return 2
    try:
        code = classbook.grade_class(
            judge,
            root,
            out,
            jobs=max(1, args.jobs),
            hidden_visibility=args.hidden_visibility,
            students=students,
            replace=args.replace,
            student_deadline_s=args.student_deadline,
        )
    finally:
        judge.close()
    import threading

    if any(t.name == "launch-tax-student" and t.is_alive() for t in threading.enumerate()):
        # A student's grading still hangs (its row says so): end here, results written, rather
        # than wait for it at exit.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def cmd_totals(args) -> int:
    from grader import gradebook

    try:
        return gradebook.totals(Path(args.out))
    except ValueError as exc:
        print(f"grader: {exc}", file=sys.stderr)
        return 2


def cmd_merge(args) -> int:
    from grader import classbook

    try:
        return classbook.merge(Path(args.cpu), Path(args.gpu), Path(args.out))
    except ValueError as exc:
        print(f"grader: {exc}", file=sys.stderr)
        return 2


def cmd_secret(args) -> int:
    from grader import secret

    try:
        made = secret.create(args.path, REPO_ROOT)
    except (ValueError, OSError) as exc:
        print(f"grader: {exc}", file=sys.stderr)
        return 2
    print(
        f"wrote a new grading secret to {made.path} (seed id {made.id}; readable only by you).\n"
        f"Official grading: python -m grader grade-all DIR --out OUT --secret-file {made.path}\n"
        f"  or export {secret.ENV}={made.path}\n"
        "Keep it out of the repository and of every release; keep a copy: regrading with "
        "another secret draws other inputs."
    )
    return 0


def cmd_doctor(args) -> int:
    from grader import doctor

    return doctor.main(["--json", args.json] if args.json else [])


def main(argv: list[str] | None = None) -> int:
    from grader import classbook

    from grader.results import VISIBILITIES

    parser = argparse.ArgumentParser(prog="python -m grader", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)

    def grading(p):
        p.add_argument(
            "--secret-file",
            metavar="F",
            help="the grading secret (official grading); default: $LAUNCH_TAX_SECRET_FILE, else practice mode",
        )
        p.add_argument(
            "--gpu",
            choices=("auto", "on", "off"),
            default="auto",
            help="run the GPU checks: auto (when CUDA is there), on (error without it), off",
        )
        p.add_argument(
            "--only-gpu",
            action="store_true",
            help="the GPU pass: grade only the GPU checks (merge it with the CPU pass)",
        )
        p.add_argument(
            "--gpu-jobs",
            type=int,
            default=1,
            metavar="N",
            help="GPU workers at a time on each device (default: 1); each may hold "
            "0.9/N of its memory, watched by the judge, and on a machine with "
            "several GPUs the workers are spread over them",
        )
        p.add_argument(
            "--timeout",
            type=float,
            default=60.0,
            help="seconds each exercise's worker may run at least (default: 60; more "
            "on a slow machine, and a timed-out worker gets a second try)",
        )
        p.add_argument(
            "--deadline",
            type=float,
            metavar="SECONDS",
            help="wall time one submission's grading may take in all (default: no "
            "limit); workers' time limits are cut to fit, and an exercise left "
            "without time loses its points with that reason. For platforms that "
            "kill a run at a limit of their own (Gradescope's bundle sets it)",
        )
        p.add_argument(
            "--hidden-visibility",
            choices=VISIBILITIES,
            default="after_published",
            help="Gradescope visibility of hidden checks (default: after_published)",
        )

    grade = commands.add_parser("grade", help="grade one submission")
    grade.add_argument(
        "submission",
        nargs="?",
        default=str(REPO_ROOT / "exercises"),
        help="folder of module files, notebook, or zip (default: exercises/)",
    )
    grade.add_argument("--json", metavar="PATH", help="write Gradescope's results.json here")
    grade.add_argument(
        "--jobs", type=int, default=min(2, os.cpu_count() or 1), help="exercises graded side by side (default: 2)"
    )
    grade.add_argument(
        "--only", metavar="EXERCISES", help="grade only these exercises, e.g. ex5 or ex5,ex6 (default: all)"
    )
    grade.add_argument("--brief", action="store_true", help="one line per exercise")
    grading(grade)
    everyone = commands.add_parser("grade-all", help="grade a folder of submissions")
    everyone.add_argument("dir", help="one submission per entry: folder, notebook or zip")
    everyone.add_argument("--out", required=True, help="gradebook.csv, summary.md and students/STUDENT/results.json")
    everyone.add_argument(
        "--jobs", type=int, default=os.cpu_count() or 1, help="submissions graded side by side (default: all cores)"
    )
    everyone.add_argument(
        "--only", metavar="EXERCISES", help="grade only these exercises, e.g. ex5 or ex5,ex6 (default: all)"
    )
    everyone.add_argument(
        "--allow-unisolated",
        action="store_true",
        help="grade even though workers cannot be isolated here (not root): "
        "a submission could then read and write what you can",
    )
    everyone.add_argument(
        "--practice",
        action="store_true",
        help="grade with the public practice inputs, without the grading secret "
        "(not an official grade; without it, grade-all needs the secret)",
    )
    everyone.add_argument(
        "--replace",
        action="store_true",
        help="OUTDIR holds an earlier run: replace it whole (hand-filled self_test points are kept)",
    )
    everyone.add_argument(
        "--student-deadline",
        type=float,
        default=classbook.STUDENT_DEADLINE_S,
        metavar="SECONDS",
        help="wall time one student's grading may take before the class goes on "
        "without it, that student's row saying 'not graded: timed out' "
        f"(default: {classbook.STUDENT_DEADLINE_S:g}; only a hang of the "
        "grader itself gets there)",
    )
    everyone.add_argument(
        "--students",
        metavar="ID,...",
        help="regrade only these students (ids, LMS names or numbers) into the "
        "run OUTDIR holds, under the same secret and rubric",
    )
    grading(everyone)
    merge = commands.add_parser("merge", help="join a CPU pass and a GPU pass into one gradebook")
    merge.add_argument("cpu", help="the CPU pass's grade-all --out folder")
    merge.add_argument("gpu", help="the GPU pass's grade-all --out folder (--only-gpu)")
    merge.add_argument("--out", required=True, help="where the joined gradebook goes")
    tot = commands.add_parser(
        "totals", help="add the hand-graded self_test points of a gradebook into its total column"
    )
    tot.add_argument(
        "out", help="a grade-all or merge --out folder whose gradebook.csv has the self_test column filled in"
    )
    sec = commands.add_parser("secret", help="make the grading secret (once per course)")
    sec_actions = sec.add_subparsers(dest="action", required=True)
    new = sec_actions.add_parser("new", help="write a new random secret, readable only by you")
    new.add_argument("path", help="where (outside the repository), e.g. ~/.config/launch-tax/grading-secret")
    doc = commands.add_parser("doctor", help="what this machine can do (paste it into a help request)")
    doc.add_argument("--json", metavar="PATH", help="also write the items to PATH as JSON")
    try:
        from grader import staff  # the staff repository's commands; a release has none
    except ImportError:
        staff_commands = {}
    else:
        staff_commands = staff.add_commands(commands)
    args = parser.parse_args(argv)
    return {
        "grade": cmd_grade,
        "grade-all": cmd_grade_all,
        "merge": cmd_merge,
        "totals": cmd_totals,
        "secret": cmd_secret,
        "doctor": cmd_doctor,
        **staff_commands,
    }[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
