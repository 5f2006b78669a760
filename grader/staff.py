"""The staff repository's commands: ``gradescope``, ``release``, ``build``, ``notebook`` and
``new-exercise``.

A student release leaves this module out (with the modules these commands use), so its
``python -m grader`` has only the commands that work there; ``grader/__main__.py`` adds these
when this module is present.

    python -m grader gradescope OUT.zip [--secret-file F] [--timeout-minutes 10] [--self-test]
    python -m grader release OUTDIR
    python -m grader build [--check]
    python -m grader notebook build [--check]
    python -m grader notebook fill NOTEBOOK FOLDER --out FILLED.ipynb
    python -m grader new-exercise MODULE --title TITLE
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from coursekit.course import MODULES
from coursekit.impl import REPO_ROOT
from grader import secret
from grader.text import say


def cmd_gradescope(args) -> int:
    from grader import gradescope, rubric

    if args.self_test:
        archive = Path(args.out)
        if not archive.is_file():
            print(
                f"grader: --self-test: {args.out!r} is not a bundle (write it first: python -m "
                "grader gradescope autograder.zip)",
                file=sys.stderr,
            )
            return 2
        print(f"self-test of {archive}: laid out as Gradescope does, graded through its run_autograder")
        try:
            ok = gradescope.self_test(archive, say=say)
        except (ValueError, RuntimeError, OSError) as exc:
            print(f"grader: --self-test: {exc}", file=sys.stderr)
            return 1
        say(
            "the bundle grades as it should: upload it"
            if ok
            else "the bundle does NOT grade as it should: do not upload it"
        )
        return 0 if ok else 1
    try:
        if not 2 <= args.timeout_minutes <= 40:
            raise ValueError(f"--timeout-minutes: Gradescope allows 2 to 40 minutes here, got {args.timeout_minutes:g}")
        made = secret.load(args.secret_file)
        if made is None:
            raise ValueError("--secret-file: " + secret.refusal("the bundle"))
        if not (REPO_ROOT / "solutions").is_dir():
            raise ValueError("the bundle needs the reference: build it from the staff repository")
        from grader import build

        course = rubric.load().validate()
        build.refuse_stale()
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        count = gradescope.bundle(out, Path(made.path), args.torch, args.timeout_minutes)
    except (ValueError, OSError) as exc:
        print(f"grader: {exc}", file=sys.stderr)
        return 2
    print(
        f"wrote {out} ({count} files, grading secret {made.id}); it holds the secret and the "
        f"reference: never give it to students.\n"
        f"Before uploading: python -m grader gradescope {out} --self-test\n"
        f"{rubric.gradescope_settings(course)} Set the autograder timeout to "
        f"{args.timeout_minutes:g} minutes (grading stops after "
        f"{gradescope.deadline_s(args.timeout_minutes)} s); the README lists the other settings."
    )
    return 0


def cmd_new_exercise(args) -> int:
    from grader import scaffold

    try:
        return scaffold.main(args.module, args.title, REPO_ROOT, say=say)
    except scaffold.ScaffoldError as exc:
        print(f"grader: new-exercise: {exc}", file=sys.stderr)
        return 2


def cmd_build(args) -> int:
    try:
        from grader import build
    except ImportError:
        print("grader: build is not part of the student repository", file=sys.stderr)
        return 2
    try:
        return build.main(check=args.check, say=say)
    except ValueError as exc:
        print(f"grader: {exc}", file=sys.stderr)
        return 2


def cmd_release(args) -> int:
    try:
        from grader import build
        from grader.release import release
    except ImportError:
        print("grader: release is not part of the student repository", file=sys.stderr)
        return 2

    try:
        build.refuse_stale()
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
                print(
                    f"grader: {path.relative_to(REPO_ROOT)} is out of date with the modules, "
                    "checks or rubric: run `python -m grader notebook build`",
                    file=sys.stderr,
                )
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
    files = {m: (folder / f"{m}.py").read_text(encoding="utf-8") for m in MODULES if (folder / f"{m}.py").is_file()}
    try:
        filled = notebook.fill(json.loads(source.read_text(encoding="utf-8")), files)
    except ValueError as exc:
        print(f"grader: {exc}", file=sys.stderr)
        return 2
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(notebook.dumps(filled), encoding="utf-8")
    print(f"wrote {args.out} ({len(files)} modules from {folder})")
    return 0


def add_commands(commands) -> dict:
    """Register the staff commands' parsers; return ``{name: handler}``."""
    from grader.gradescope import TIMEOUT_MINUTES

    gs = commands.add_parser("gradescope", help="write the autograder bundle for Gradescope")
    gs.add_argument("out", help="the zip to write, e.g. autograder.zip")
    gs.add_argument("--secret-file", metavar="F", help="the grading secret (default: $LAUNCH_TAX_SECRET_FILE)")
    gs.add_argument("--torch", default="==2.13.0", help="the torch version setup.sh installs (default: ==2.13.0)")
    gs.add_argument(
        "--timeout-minutes",
        type=float,
        default=TIMEOUT_MINUTES,
        help="the autograder timeout you set in Gradescope (default: 10, Gradescope's "
        "default; at most 40): grading stops early enough to write its results",
    )
    gs.add_argument(
        "--self-test",
        action="store_true",
        help="write nothing: lay OUT.zip out as Gradescope does and grade the "
        "reference (every CPU point) and the stubs (0) through it",
    )
    rel = commands.add_parser("release", help="write the student repository")
    rel.add_argument("out", help="an empty or new folder")
    bld = commands.add_parser(
        "build", help="rewrite what is derived from the rubric and the checks (README points, notebook, answers.md)"
    )
    bld.add_argument("--check", action="store_true", help="write nothing; exit 1 if something derived is out of date")
    nb = commands.add_parser("notebook", help="the course as an nbgrader notebook (course/)")
    nb_actions = nb.add_subparsers(dest="action", required=True)
    build = nb_actions.add_parser(
        "build", help="write course/source/launch_tax/launch_tax.ipynb from the modules, checks and rubric"
    )
    build.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if the committed notebook is out of date"
    )
    fill = nb_actions.add_parser("fill", help="put a folder's module files into a notebook's answer cells")
    fill.add_argument("notebook", help="a course notebook (source or release)")
    fill.add_argument("folder", help="a folder of module files (launch_model.py, buckets.py, ...)")
    fill.add_argument("--out", required=True, help="where to write the filled notebook")
    new = commands.add_parser(
        "new-exercise", help="write the files of a new exercise, to fill (declaration, stub, reference, tests, checks)"
    )
    new.add_argument("module", help="the exercise's module name, e.g. kv_cache")
    new.add_argument("--title", required=True, help="its title, e.g. 'a KV cache with paged blocks'")
    return {
        "gradescope": cmd_gradescope,
        "release": cmd_release,
        "build": cmd_build,
        "notebook": cmd_notebook,
        "new-exercise": cmd_new_exercise,
    }
