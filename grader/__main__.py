"""``python -m grader``: grade a submission, grade a class, release the student repository.

    python -m grader grade [SUBMISSION] [--json PATH] [--secret-file F] [--gpu auto|on|off] [--brief]
    python -m grader grade-all DIR --out OUTDIR [--secret-file F] [--jobs N] [--only-gpu]
    python -m grader merge CPU_OUT GPU_OUT --out FINAL
    python -m grader secret new PATH
    python -m grader gradescope OUT.zip [--secret-file F] [--timeout-minutes 10]
    python -m grader release OUTDIR
    python -m grader doctor
    python -m grader notebook build [--check]
    python -m grader notebook fill NOTEBOOK FOLDER --out FILLED.ipynb

SUBMISSION is a folder of module files, a notebook or a zip of either (default: exercises/).
Exit status: 0 whenever grading completed, whatever the scores; 2 for bad arguments or a refused
run (no isolation for a class); 3 when nobody could be graded (the reference failed, or no worker
can run on this machine), and then nothing is written.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from coursekit.impl import REPO_ROOT

NOT_GRADED = 3


def _say(text: str) -> None:
    """Print, whatever the terminal's encoding (reasons are already escaped: grader/text.py);
    a reader that went away (``| head``) ends the printing, not the run."""
    try:
        try:
            print(text, flush=True)
        except UnicodeEncodeError:
            print(text.encode("ascii", "backslashreplace").decode("ascii"), flush=True)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _judge(args, hide=(), jobs=None):
    from grader import secret
    from grader.judge import MODULES, Judge

    only = None
    if getattr(args, "only", None):
        only = tuple(dict.fromkeys(e.strip() for e in args.only.split(",") if e.strip()))
        unknown = [e for e in only if e not in MODULES]
        if unknown or not only:
            raise ValueError(f"--only: expected exercise markers among {', '.join(MODULES)}, "
                             f"got {args.only!r}")
    return Judge(gpu=args.gpu, timeout_s=args.timeout, jobs=jobs or args.jobs, hide=hide,
                 exercises=only, secret=secret.load(args.secret_file), gpu_only=args.only_gpu,
                 deadline_s=args.deadline)


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
        judge = _judge(args)
    except (ValueError, RuntimeError) as exc:
        print(f"grader: {exc}", file=sys.stderr)
        return 2
    try:
        report = judge.grade(submission)
    except (ReferenceFailure, EnvironmentProblem) as exc:
        print(f"grader: nothing was graded: {exc}", file=sys.stderr)
        return NOT_GRADED
    if args.json:  # written first: a report the terminal chokes on must not cost the results
        write_json(Path(args.json), gradescope(report, args.hidden_visibility))
    _say(table(report, brief=args.brief))
    if args.json:
        _say(f"wrote {args.json}")
    return 0


def cmd_grade_all(args) -> int:
    from grader import classbook, sandbox

    root, out = Path(args.dir), Path(args.out)
    if not root.is_dir():
        print(f"grader: DIR must be a folder of submissions, got {args.dir!r}", file=sys.stderr)
        return 2
    if out.resolve().is_relative_to(root.resolve()):
        print(f"grader: --out {args.out!r} is inside DIR; write the results elsewhere (a "
              "submission could collide with them)", file=sys.stderr)
        return 2
    if not sandbox.is_root() and not args.allow_unisolated:
        print("grader: refusing to grade a class without isolation: the judge is not root or "
              "cannot make namespaces, so a submission could read the reference, the other "
              "submissions and the grading secret, and rewrite the gradebook. Grade as root (a "
              "grading server, a container with CAP_SYS_ADMIN), or pass --allow-unisolated to "
              "accept that risk.", file=sys.stderr)
        return 2
    try:
        judge = _judge(args, hide=(root.resolve(), out.resolve()), jobs=1)
    except (ValueError, RuntimeError) as exc:
        print(f"grader: {exc}", file=sys.stderr)
        return 2
    return classbook.grade_class(judge, root, out, jobs=max(1, args.jobs),
                                 hidden_visibility=args.hidden_visibility)


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
    print(f"wrote a new grading secret to {made.path} (seed id {made.id}; readable only by you).\n"
          f"Official grading: python -m grader grade-all DIR --out OUT --secret-file {made.path}\n"
          f"  or export {secret.ENV}={made.path}\n"
          "Keep it out of the repository and of every release; keep a copy: regrading with "
          "another secret draws other inputs.")
    return 0


def cmd_gradescope(args) -> int:
    from grader import gradescope, secret

    try:
        if not 2 <= args.timeout_minutes <= 40:
            raise ValueError(f"--timeout-minutes: Gradescope allows 2 to 40 minutes here, got "
                             f"{args.timeout_minutes:g}")
        made = secret.load(args.secret_file)
        if made is None:
            raise ValueError("--secret-file: the bundle grades officially and needs the grading "
                             "secret (make one with `python -m grader secret new PATH`)")
        if not (REPO_ROOT / "solutions").is_dir():
            raise ValueError("the bundle needs the reference: build it from the staff repository")
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        count = gradescope.bundle(out, Path(made.path), args.torch, args.timeout_minutes)
    except (ValueError, OSError) as exc:
        print(f"grader: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {out} ({count} files, grading secret {made.id}): upload it as the autograder "
          f"and set Gradescope's autograder timeout to {args.timeout_minutes:g} minutes (grading "
          f"stops after {gradescope.deadline_s(args.timeout_minutes)} s; see the README for the other "
          "settings); it holds the secret and the reference, so never give it to students")
    return 0


def cmd_release(args) -> int:
    from grader.release import release

    try:
        written = release(Path(args.out))
    except ValueError as exc:
        print(f"grader: {exc}", file=sys.stderr)
        return 2
    print(f"wrote the student repository to {args.out} ({written} files)")
    return 0


def cmd_doctor(args) -> int:
    from grader import doctor

    return doctor.main(args.rest)


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
    from grader.gradescope import TIMEOUT_MINUTES
    from grader.results import VISIBILITIES

    parser = argparse.ArgumentParser(prog="python -m grader", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)

    def grading(p):
        p.add_argument("--secret-file", metavar="F",
                       help="the grading secret (official grading); default: $LAUNCH_TAX_SECRET_FILE, "
                            "else practice mode")
        p.add_argument("--gpu", choices=("auto", "on", "off"), default="auto",
                       help="run the GPU checks: auto (when CUDA is there), on (error without it), off")
        p.add_argument("--only-gpu", action="store_true",
                       help="the GPU pass: grade only the GPU checks (merge it with the CPU pass)")
        p.add_argument("--timeout", type=float, default=60.0,
                       help="seconds each exercise's worker may run at least (default: 60; more "
                            "on a slow machine, and a timed-out worker gets a second try)")
        p.add_argument("--deadline", type=float, metavar="SECONDS",
                       help="wall time one submission's grading may take in all (default: no "
                            "limit); workers' time limits are cut to fit, and an exercise left "
                            "without time loses its points with that reason. For platforms that "
                            "kill a run at a limit of their own (Gradescope's bundle sets it)")
        p.add_argument("--hidden-visibility", choices=VISIBILITIES, default="after_published",
                       help="Gradescope visibility of hidden checks (default: after_published)")

    grade = commands.add_parser("grade", help="grade one submission")
    grade.add_argument("submission", nargs="?", default=str(REPO_ROOT / "exercises"),
                       help="folder of module files, notebook, or zip (default: exercises/)")
    grade.add_argument("--json", metavar="PATH", help="write Gradescope's results.json here")
    grade.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                       help="exercises graded side by side (default: 2)")
    grade.add_argument("--only", metavar="EXERCISES",
                       help="grade only these exercises, e.g. ex5 or ex5,ex6 (default: all)")
    grade.add_argument("--brief", action="store_true", help="one line per exercise")
    grading(grade)
    everyone = commands.add_parser("grade-all", help="grade a folder of submissions")
    everyone.add_argument("dir", help="one submission per entry: folder, notebook or zip")
    everyone.add_argument("--out", required=True,
                          help="gradebook.csv, summary.md and students/STUDENT/results.json")
    everyone.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                          help="submissions graded side by side (default: all cores)")
    everyone.add_argument("--only", metavar="EXERCISES",
                          help="grade only these exercises, e.g. ex5 or ex5,ex6 (default: all)")
    everyone.add_argument("--allow-unisolated", action="store_true",
                          help="grade even though workers cannot be isolated here (not root): "
                               "a submission could then read and write what you can")
    grading(everyone)
    merge = commands.add_parser("merge", help="join a CPU pass and a GPU pass into one gradebook")
    merge.add_argument("cpu", help="the CPU pass's grade-all --out folder")
    merge.add_argument("gpu", help="the GPU pass's grade-all --out folder (--only-gpu)")
    merge.add_argument("--out", required=True, help="where the joined gradebook goes")
    sec = commands.add_parser("secret", help="make the grading secret (once per course)")
    sec_actions = sec.add_subparsers(dest="action", required=True)
    new = sec_actions.add_parser("new", help="write a new random secret, readable only by you")
    new.add_argument("path", help="where (outside the repository), e.g. ~/.config/launch-tax/grading-secret")
    gs = commands.add_parser("gradescope", help="write the autograder bundle for Gradescope")
    gs.add_argument("out", help="the zip to write, e.g. autograder.zip")
    gs.add_argument("--secret-file", metavar="F", help="the grading secret (default: $LAUNCH_TAX_SECRET_FILE)")
    gs.add_argument("--torch", default="==2.13.0", help="the torch version setup.sh installs (default: ==2.13.0)")
    gs.add_argument("--timeout-minutes", type=float, default=TIMEOUT_MINUTES,
                    help="the autograder timeout you set in Gradescope (default: 10, Gradescope's "
                         "default; at most 40): grading stops early enough to write its results")
    rel = commands.add_parser("release", help="write the student repository")
    rel.add_argument("out", help="an empty or new folder")
    doc = commands.add_parser("doctor", help="what this machine can do (paste it into a help request)")
    doc.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
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
    return {"grade": cmd_grade, "grade-all": cmd_grade_all, "merge": cmd_merge, "secret": cmd_secret,
            "gradescope": cmd_gradescope, "release": cmd_release, "doctor": cmd_doctor, "notebook": cmd_notebook}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
