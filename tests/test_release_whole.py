"""``python -m grader release``: the student repository adds up and has no dangling reference.

* Points: the released README, the released rubric and ``python -m grader grade`` run in the
  release give the same numbers, all counted from ``grader/rubric.toml``.
* References: every path, command, module and option named in the released README.md,
  AGENTS.md, answers.md (and every other Markdown file), the comments of the rubric and of
  pyproject.toml, and the docstrings and comments of the released Python files exists in the
  release (``dangling``). A test plants dangling references in a copy and sees each one caught.
  Findings in files whose owners have yet to fix them are listed in ``PENDING`` with the fix.
* The self-test questions (``answers.md``) come from ``grader/notebook.py``'s ``SELF_TEST``,
  without the model answers; ``AGENTS.md`` is short.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
import tokenize
import tomllib
from pathlib import Path

import pytest

from coursekit.impl import REPO_ROOT
from grader import release as rel
from grader import rubric
from grader.exercises import public_checks
from grader.judge import load_rubric
from grader.notebook import SELF_TEST
from tests import harness

# A whole student release, built once and tried: CI's slow stage (tests/conftest.py).
pytestmark = pytest.mark.slow


#: Staff-repository names that are not in a release because they are local or generated.
LOCAL = {
    ".git",
    ".venv",
    ".hypothesis",
    ".pytest_cache",
    "__pycache__",
    "build",
    "dist",
    "out",
    "lab-output",
    ".benchmarks",
    "launch_tax.egg-info",
}

#: Known dangling references in files this test's author may not edit, each with the fix that
#: removes it (``(released file, finding)``). Fixing one makes test_pending_findings_are_pending
#: fail: then delete its line here.
PENDING = {
    (
        "coursekit/__init__.py",
        "path solutions/ is not in the release",
    ): "coursekit/__init__.py's docstring: say 'Imported by the exercises, the graders and the "
    "tests' instead of naming solutions/",
    (
        "coursekit/impl.py",
        "--impl solutions: no solutions in the release",
    ): "coursekit/impl.py's docstring: '--impl exercises|PATH' (and 'solutions' only as the "
    "staff repository's reference)",
    (
        "grader/notebook_checks.py",
        "path course/ is not in the release",
    ): "grader/notebook_checks.py's docstring: 'nbgrader's cell timeout' without the path",
    (
        "grader/submission.py",
        "path grader/nbgrader_bridge.py is not in the release",
    ): "grader/submission.py's writefile_module docstring: drop the nbgrader_bridge.py path",
}


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    return harness.released(tmp_path_factory.mktemp("release") / "student")


# --- what the release says ---------------------------------------------------------------------


def _python_text(source: str) -> list[str]:
    """The docstrings and comments of a Python file."""
    texts = []
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return [source]
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=True)
            if doc:
                texts.append(doc)
    try:
        texts += [
            tok.string for tok in tokenize.generate_tokens(io.StringIO(source).readline) if tok.type == tokenize.COMMENT
        ]
    except (tokenize.TokenError, SyntaxError):
        pass
    return texts


def released_texts(root: Path) -> dict[str, list[str]]:
    """``{released file: [text it shows a reader]}``: the Markdown files whole, the comments of
    the rubric and of pyproject.toml, and the docstrings and comments of every Python file."""
    texts = {}
    for path in sorted(root.rglob("*")):
        name = path.relative_to(root).as_posix()
        if not path.is_file() or "__pycache__" in name:
            continue
        if path.suffix == ".md":
            texts[name] = [path.read_text(encoding="utf-8")]
        elif path.suffix == ".py":
            texts[name] = _python_text(path.read_text(encoding="utf-8"))
        elif name in ("grader/rubric.toml", "pyproject.toml"):
            texts[name] = [
                line for line in path.read_text(encoding="utf-8").splitlines() if line.lstrip().startswith("#")
            ]
    return texts


# --- what would dangle -------------------------------------------------------------------------


@functools.cache
def staff_top_level() -> frozenset[str]:
    """The staff repository's top-level names: a path starting with one names the repository."""
    return frozenset(p.name for p in REPO_ROOT.iterdir() if p.name not in LOCAL and not p.name.endswith(".egg-info"))


@functools.cache
def staff_file_names() -> frozenset[str]:
    """Base names of the staff repository's files (a bare ``hidden.py`` names one of them)."""
    names = set()
    for path in REPO_ROOT.rglob("*"):
        parts = path.relative_to(REPO_ROOT).parts
        if path.is_file() and not any(p in LOCAL or p.endswith(".egg-info") for p in parts):
            names.add(path.name)
    return frozenset(names)


PATH = re.compile(r"(?<![\w/.:-])(?:\.{1,2}/)*[\w.-]*[\w](?:/[\w.<>*{}\[\]-]*)+")
FILE = re.compile(r"(?<![\w/.-])[\w-]+\.(?:py|md|toml|json|ipynb|sh|txt|cfg)\b(?![\w/])")
LINK = re.compile(r"\]\(([^)\s]+)\)")
COMMAND = re.compile(r"(?:^|(?<=[\s`(]))((?:python3?|pytest|bash) [^\n`#)]*)")
PLACEHOLDER = re.compile(r"[<>*{}\[\]]|^[A-Z][A-Z_]*$|^\.\.\.$")


def _exists(root: Path, relative: str) -> bool:
    return (root / relative.rstrip("/")).exists()


def _path_finding(root: Path, token: str, name: str = "") -> str | None:
    """Why a path-like token dangles in the release at ``root`` (None: it does not); a ``../``
    token is read from the folder of ``name``, the released file it is in (the course notes
    link their other language's chapter so)."""
    token = token.rstrip(".,;:'\"]")
    if re.match(r"\.\./[A-Za-z]", token):
        target = ((root / name).parent / token).resolve() if name else None
        if target is not None and target.is_relative_to(root.resolve()) and target.exists():
            return None  # a file beside the one that names it (the notes' other language)
        return f"path {token} leads out of the repository"
    token = token.removeprefix("./")
    parts = token.split("/")
    if parts[0] not in staff_top_level():
        return None  # not a path of the repository (an output, a box folder, prose)
    for i, part in enumerate(parts):  # the first missing folder or file, up to a placeholder
        if PLACEHOLDER.search(part) or not part:
            return None
        if not _exists(root, "/".join(parts[: i + 1])):
            last = i == len(parts) - 1
            return f"path {'/'.join(parts[: i + 1])}{'' if last else '/'} is not in the release"
    return None


@functools.cache
def _help(root: Path, argv: tuple[str, ...]) -> str | None:
    """``argv --help``'s output in the release (None if it does not run)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_ADDOPTS")}
    run = subprocess.run(
        [sys.executable, *argv, "--help"], cwd=root, capture_output=True, text=True, timeout=300, env=env
    )
    return run.stdout + run.stderr if run.returncode == 0 else None


def _subcommand_needs(root: Path, sub: str) -> list[str] | None:
    """The ``grader/*.py`` files that ``python -m grader SUB`` imports, from the released
    ``grader/__main__.py`` (None: there is no such command)."""
    main = root / "grader" / "__main__.py"
    if not main.is_file():
        return None
    for node in ast.walk(ast.parse(main.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FunctionDef) and node.name == "cmd_" + sub.replace("-", "_"):
            needs = []
            for inner in ast.walk(node):
                if isinstance(inner, ast.ImportFrom) and inner.module == "grader":
                    needs += [f"grader/{a.name}.py" for a in inner.names]
                elif isinstance(inner, ast.ImportFrom) and (inner.module or "").startswith("grader."):
                    needs.append(inner.module.replace(".", "/") + ".py")
            return needs
    return None


def _impl_default(script: Path) -> str | None:
    """The ``--impl`` default a script's argparse declares, if any."""
    if not script.is_file():
        return None
    for node in ast.walk(ast.parse(script.read_text(encoding="utf-8"))):
        if (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", "") == "add_argument"
            and node.args
            and getattr(node.args[0], "value", None) == "--impl"
        ):
            for keyword in node.keywords:
                if keyword.arg == "default" and isinstance(keyword.value, ast.Constant):
                    return keyword.value.value
    return None


def _command_findings(root: Path, command: str) -> list[str]:
    """Why a command named in the release would not run there."""
    command = re.split(r"\.(?:\s|$)", command.strip())[0].rstrip(",;:")  # prose may follow
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    if len(words) < 2:
        return []
    findings, args, help_argv = [], words[1:], None
    if words[0] == "bash":
        return [] if _exists(root, args[0]) else [f"bash {args[0]}: no such file in the release"]
    if words[0] == "pytest":
        args = ["-m", "pytest", *args]
    if args[0] == "-m" and len(args) > 1:
        module, rest = args[1], args[2:]
        if PLACEHOLDER.search(module):
            return findings
        top = module.split(".")[0]
        if top in staff_top_level():
            base = module.replace(".", "/")
            if not (_exists(root, base + ".py") or _exists(root, base + "/__main__.py")):
                return [f"python -m {module}: no such module in the release"]
        elif importlib.util.find_spec(top) is None:
            return [f"python -m {module}: not installed with the release"]
        subs = []  # the subcommand chain: grader notebook fill
        for word in rest if module in ("grader", "coursekit.lab") else ():
            if not re.fullmatch(r"[a-z][a-z-]*", word):
                break
            subs.append(word)
        sub = subs[0] if subs else None
        if module == "grader" and sub:
            needs = _subcommand_needs(root, sub)
            if needs is None:
                findings.append(f"python -m grader {sub}: no such command in the release")
            findings += [
                f"python -m grader {sub}: needs {need}, not in the release"
                for need in needs or []
                if not _exists(root, need)
            ]
        help_argv = ("-m", module, *subs)
        if module == "pip":
            for extras in re.findall(r"\.\[([\w,-]+)\]", command):
                declared = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
                known = declared.get("project", {}).get("optional-dependencies", {})
                findings += [
                    f"pip extra [{e}] is not in the release's pyproject.toml"
                    for e in extras.split(",")
                    if e not in known
                ]
            return findings
        args = rest
    elif args[0].endswith(".py"):
        if not _exists(root, args[0]):
            return [f"python {args[0]}: no such file in the release"]
        help_argv, args = (args[0],), args[1:]
    else:
        return findings
    for i, word in enumerate(args):  # positional paths: python -m pytest tests, --impl solutions
        if word.startswith("-"):
            continue
        previous = args[i - 1] if i else ""
        for piece in word.split("|") if previous == "--impl" else [word]:
            head = piece.split("/")[0]
            if head in staff_top_level() and not _exists(root, piece):
                findings.append(
                    f"{previous} {piece}: no {piece} in the release".strip()
                    if previous.startswith("--")
                    else f"{' '.join(words[:2])} ... {piece}: no {piece} in the release"
                )
    default = None
    if help_argv and "--impl" not in args:  # a script, a module, or a package (its __init__.py)
        base = root / (help_argv[0] if len(help_argv) == 1 else help_argv[1].replace(".", "/"))
        script = base if len(help_argv) == 1 else base.with_suffix(".py")
        default = _impl_default(script if script.is_file() else base / "__init__.py")
    if default in staff_top_level() and not _exists(root, default):
        findings.append(
            f"{' '.join(words[:2] if words[1] != '-m' else words[:3])}: "
            f"its --impl default {default} is not in the release"
        )
    options = [w.split("=")[0] for w in args if w.startswith("--") and len(w) > 2]
    if options and help_argv:
        text = _help(root, help_argv)
        if text is None:
            findings.append(f"{' '.join(['python', *help_argv])} --help does not run in the release")
        else:
            findings += [
                f"{' '.join(['python', *help_argv])} has no option {o}"
                for o in options
                if not re.search(re.escape(o) + r"(?![\w-])", text)
            ]
    return findings


def dangling(root: Path) -> set[tuple[str, str]]:
    """``{(released file, why)}`` for every reference in the release's text that dangles."""
    root = Path(root)
    names = {p.name for p in root.rglob("*") if p.is_file()}
    found = set()
    for name, texts in released_texts(root).items():
        for text in texts:
            for match in PATH.finditer(text):
                why = _path_finding(root, match.group(0), name)
                if why:
                    found.add((name, why))
            for match in FILE.finditer(text):
                base = match.group(0)
                if base in staff_file_names() and base not in names:
                    found.add((name, f"file {base} is not in the release"))
            for target in LINK.findall(text):
                target = target.split("#")[0]
                if target and not re.match(r"[a-z]+:", target):
                    where = (root / name).parent / target
                    if not where.exists():
                        found.add((name, f"link {target} is not in the release"))
            for match in COMMAND.finditer(text):
                found.update((name, why) for why in _command_findings(root, match.group(1)))
            for match in re.finditer(r"--impl[ =]+(?:[\w/]+\|)*solutions\b", text):
                found.add((name, "--impl solutions: no solutions in the release"))
    return found


# --- the tests ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def found(released):
    return dangling(released)


def test_nothing_in_the_release_dangles(found):
    new = found - set(PENDING)
    assert not new, "dangling references in the release:\n" + "\n".join(f"  {name}: {why}" for name, why in sorted(new))


@pytest.mark.parametrize("entry", sorted(PENDING), ids=lambda e: f"{e[0]}: {e[1][:40]}")
def test_pending_findings_are_pending(found, entry):
    """A known dangling reference in another engineer's file: when its fix lands, this fails;
    then delete the entry from PENDING."""
    assert entry in found, f"fixed ({PENDING[entry]}): remove it from PENDING"


OUT = "../" + "shared"  # a folder beside the staff repository (spelled so git grep skips it)
PLANTS = [
    ("README.md", "\nSee `solutions/buckets.py` for the reference.\n", "path solutions/ is not in the release"),
    (
        "README.md",
        "\n```bash\npython -m pytest exercises --impl solutions\n```\n",
        "--impl solutions: no solutions in the release",
    ),
    (
        "README.md",
        "\nRun `python benchmarks/grading_speed.py --class-size 20`.\n",
        "python benchmarks/grading_speed.py: no such file in the release",
    ),
    ("README.md", "\nRun `python -m grader.hidden`.\n", "python -m grader.hidden: no such module in the release"),
    ("README.md", "\n```bash\npython -m pytest tests -n auto\n```\n", "python -m ... tests: no tests in the release"),
    ("README.md", "\nThe suite is in `tests/`.\n", "path tests/ is not in the release"),
    ("AGENTS.md", "\nRead [the notes](notes/hints.md).\n", "link notes/hints.md is not in the release"),
    ("answers.md", f"\nSee {OUT}/seed/ for the lesson.\n", f"path {OUT}/seed/ leads out of the repository"),
    (
        "answers.md",
        "\n`python -m coursekit.lab launch-tax --no-such-option`\n",
        "python -m coursekit.lab launch-tax has no option --no-such-option",
    ),
    ("answers.md", "\n`python -m grader release OUT`\n", "python -m grader release: no such command in the release"),
    (
        "README.md",
        '\n`python -m pip install -e ".[dev,cuda]"`\n',
        "pip extra [cuda] is not in the release's pyproject.toml",
    ),
    (
        "coursekit/lesson.py",
        f"\n# The measurement: see {OUT}/reference/.\n",
        f"path {OUT}/reference/ leads out of the repository",
    ),
    (
        "exercises/buckets.py",
        "\n# the wrong answers are in kill_matrix.py\n",
        "file kill_matrix.py is not in the release",
    ),
    ("grader/rubric.toml", "\n# hidden checks: grader/hidden.py\n", "path grader/hidden.py is not in the release"),
    (
        "benchmarks/planted.py",
        'import argparse\n\n# Run: python benchmarks/planted.py\n'
        'argparse.ArgumentParser().add_argument("--impl", default="solutions")\n',
        "python benchmarks/planted.py: its --impl default solutions is not in the release",
    ),
]


def test_planted_dangling_references_are_caught(released, found, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(released, copy, ignore=shutil.ignore_patterns("__pycache__"))
    for where, planted, _ in PLANTS:  # each plants a different finding, so one copy serves all
        with open(copy / where, "a", encoding="utf-8") as f:
            f.write(planted)
    new = dangling(copy) - found
    missed = [(where, why) for where, _, why in PLANTS if (where, why) not in new]
    assert not missed, f"not caught: {missed}; caught: {sorted(new)}"


def _readme_points(readme: str) -> dict[str, float]:
    paragraph = re.search(r"\*\*Points\.\*\*(.*?)\n\n", readme + "\n\n", re.DOTALL).group(1)
    paragraph = " ".join(paragraph.split())
    m = re.search(
        r"hold (\d+) points.*?: (\d+) in public checks.*?\((\d+) on any machine, (\d+) "
        r"only on a CUDA GPU\), and (\d+) in hidden checks.*?The (\d+) self-test "
        r"questions.*?: (\d+) points on top of the (\d+)",
        paragraph,
    )
    assert m, paragraph
    keys = ("total", "public", "cpu", "gpu", "hidden", "questions", "manual", "total_again")
    return dict(zip(keys, map(float, m.groups())))


def test_readme_rubric_and_grade_agree_on_the_points(released):
    staff = rubric.parse((REPO_ROOT / "grader/rubric.toml").read_text(encoding="utf-8"))
    assert staff.total == 100, "the spec's rubric totals 100"
    readme = _readme_points((released / "README.md").read_text(encoding="utf-8"))
    assert readme == {
        "total": staff.total,
        "public": staff.public,
        "cpu": staff.public - staff.public_gpu,
        "gpu": staff.public_gpu,
        "hidden": staff.hidden,
        "questions": len(staff.questions),
        "manual": staff.manual,
        "total_again": staff.total,
    }
    rubric_text = (released / "grader/rubric.toml").read_text(encoding="utf-8")
    shipped = rubric.parse(rubric_text, checks=public_checks())  # a release has no hidden check
    assert (shipped.public, shipped.public_gpu, shipped.hidden, shipped.total, shipped.questions) == (
        staff.public,
        staff.public_gpu,
        staff.hidden,
        staff.total,
        staff.questions,
    )
    assert not shipped.hidden_ids and shipped.validate(), "no hidden check, and it still adds up"
    header = "\n".join(line for line in rubric_text.splitlines() if line.startswith("#"))
    for number in (
        f"{staff.total:g} points in all",
        f"{staff.public:g} in the public checks",
        f"{staff.hidden:g} in hidden checks",
        f"{staff.manual:g} points graded by hand",
    ):
        assert number in header, header
    # What `python -m grader grade` accounts for in the release: the public points, those of
    # the GPU checks shown as pending when there is no CUDA.
    run = subprocess.run(
        [sys.executable, "-m", "grader", "grade"], cwd=released, capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stdout + run.stderr
    total = re.search(r"^total\s+[\d.]+/([\d.]+)(?:\s+\(\+([\d.]+) pending)?", run.stdout, re.MULTILINE)
    assert total, run.stdout
    graded = float(total.group(1)) + float(total.group(2) or 0)
    assert graded == staff.public, run.stdout


def test_readme_points_paragraph_is_up_to_date():
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    staff = rubric.parse((REPO_ROOT / "grader/rubric.toml").read_text(encoding="utf-8"))
    paragraphs = [m.group(2) for m in rubric.POINTS.finditer(readme)]
    assert paragraphs == [rubric.points_paragraph(staff)], (
        "README.md's <!-- points --> paragraph differs from grader/rubric.toml; run "
        "`python -m grader build`, which writes:\n" + rubric.points_paragraph(staff)
    )


def test_threat_model_counts_the_points_that_rest_on_facts():
    """The README's threat model says how many points a submission could forge from inside its
    worker (checks judged on yes/no facts alone) and names those checks: the figure must be
    their sum in the rubric."""
    readme = " ".join((REPO_ROOT / "README.md").read_text(encoding="utf-8").split())
    found = re.search(
        r"facts alone are worth (\d+) of the (\d+) CPU points \((.*?)\) and (\d+) of "
        r"the (\d+) GPU points",
        readme,
    )
    assert found, "the README's threat model no longer states the points that rest on facts"
    points = load_rubric()
    cpu = sum(p for c, p in points.items() if not c.split(".")[1].startswith("gpu_"))
    gpu = sum(p for c, p in points.items() if c.split(".")[1].startswith("gpu_"))
    assert (int(found.group(2)), int(found.group(5))) == (cpu, gpu), (found.group(2), found.group(5))
    spans = re.findall(r"((?:`\w+`(?:,| and)?\s*)+)of exercise (\d)", found.group(3))
    listed = [f"ex{n}.{name}" for names, n in spans for name in re.findall(r"`(\w+)`", names)]
    assert listed and all(c in points for c in listed), [c for c in listed if c not in points]
    fact_points = sum(points[c] for c in listed)
    assert fact_points == int(found.group(1)), (
        f"the README says {found.group(1)} CPU points rest on facts alone; the checks it names "
        f"({', '.join(listed)}) are worth {fact_points:g} in grader/rubric.toml"
    )


def test_answers_md_asks_the_self_test_questions_without_answers(released):
    expected = rel.answers_markdown()
    committed = (REPO_ROOT / "answers.md").read_text(encoding="utf-8")
    assert committed == expected, (
        "answers.md is out of date with grader/notebook.py's SELF_TEST or the rubric: run `python -m grader build`"
    )
    shipped = (released / "answers.md").read_text(encoding="utf-8")
    assert shipped == expected
    flat = " ".join(shipped.split())
    for question in SELF_TEST:
        assert " ".join(question.question.split()) in flat and question.id in flat
    everything = " ".join(" ".join(p.read_text(errors="replace").split()) for p in released.rglob("*") if p.is_file())
    for question in SELF_TEST:
        answer = " ".join(question.model_answer.split())
        assert answer[:60] not in everything, f"the model answer to {question.id} is in the release"
    assert "by hand" in shipped and "not part of the 100" in shipped


def test_agents_md_is_short_and_shipped(released):
    text = (released / "AGENTS.md").read_text(encoding="utf-8")
    assert text == (REPO_ROOT / "AGENTS.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) < 40
    for rule in ("exercises/", "docstring", "failing test", "hint", "Do not write"):
        assert rule in text, rule


def test_the_lab_reference_and_its_data_ship(released):
    assert (released / "coursekit/data/h200-anchor-2026-11-30.json").read_bytes() == (
        REPO_ROOT / "coursekit/data/h200-anchor-2026-11-30.json"
    ).read_bytes()
    assert (released / "benchmarks/decode_engine.py").is_file()
    assert not (released / "benchmarks/grading_speed.py").exists()


def test_no_file_of_the_staff_repository_leads_out_of_it():
    """The staff repository stands alone as well (CI scripts, the GPU stages, the notebook): no
    tracked file names the folder beside it, which nobody who clones the repository has."""
    files = (
        subprocess.run(["git", "ls-files", "-z"], cwd=REPO_ROOT, capture_output=True, check=True)
        .stdout.decode()
        .split("\0")
    )
    named = [
        rel
        for rel in filter(None, files)
        if (REPO_ROOT / rel).is_file() and OUT.encode() in (REPO_ROOT / rel).read_bytes()
    ]
    assert not named, f"these files name {OUT}, outside the repository: {named}"
