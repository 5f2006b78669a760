"""Reading a submission: a folder of module files, a notebook, or a zip of either.

Only the exercise module files are taken (``launch_model.py``, ``buckets.py``, ...), as bytes, in
memory: never ``conftest.py``, ini or toml files, ``.pth``, ``__pycache__`` or any other name,
nothing larger than ``MAX_FILE_BYTES``. Only regular files are read, opened without following a
symbolic link anywhere below the submission (a link to a classmate's folder or to the source
notebook is refused with a reason), and never a FIFO, socket or device, which could block the
judge. Zip members are read, never extracted, so a member named ``../../x`` (zip-slip) writes
nothing anywhere; a zip with two members for one module is refused, since what is graded must be
what any extraction shows. A notebook contributes the code cells that start with
``%%writefile <module>.py`` (see ``writefile_module``), the way a notebook writes module files.

Where the module files are: at the top of the folder (or anywhere in a zip). A folder with none
at its top is searched one and two folders down, as a whole repository arrives
(``launch-tax-main/exercises/*.py``): if exactly one folder there holds module files they are
graded, with a note saying where they were found; if several do, the submission is refused
with the reason, never graded as empty without a word. Hidden folders, ``__MACOSX/`` (what
macOS's zip adds), tests and the course's own packages (``coursekit/``, ``grader/``, ...) are
never searched, in a folder or a zip. ``answers.md`` (the
self-test, graded by hand) is read, capped, from where the modules are, to tell the student and
the TA whether it was handed in.
"""

from __future__ import annotations

import json
import stat
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from coursekit.course import MODULES

MAX_FILE_BYTES = 1 << 20
MAX_NOTEBOOK_BYTES = 16 * MAX_FILE_BYTES
MAX_ZIP_MEMBERS = 1000
MAX_ANSWERS_BYTES = 64 << 10
#: Folders never searched for module files: the course's own given packages (``coursekit/``
#: has a ``fusion.py`` of its own), tests, and what tools and macOS's zip add.
SKIPPED_FOLDERS = (
    "coursekit",
    "grader",
    "benchmarks",
    "tests",
    "__MACOSX",
    "__pycache__",
    "node_modules",
    "site-packages",
)
SEARCH_DEPTH = 2


@dataclass
class Submission:
    label: str
    files: dict[str, bytes] = field(default_factory=dict)  # module name -> source
    problems: list[str] = field(default_factory=list)  # what was refused, for the report
    refused: dict[str, str] = field(default_factory=dict)  # module name -> why
    notebook: str | None = None  # the notebook the modules come from, if they do
    unreadable: str | None = None  # why that notebook could not be read
    answers: str | None = None  # answers.md's text, if handed in (the self-test, by hand)
    found_in: str | None = None  # the folder below the submission the modules came from

    def missing_reason(self, module: str) -> str:
        if module in self.refused:
            return self.refused[module]
        if self.unreadable:
            return f"module '{module}' not in submission: {self.unreadable}"
        if self.notebook:
            return (
                f"module '{module}' not in submission: {self.notebook} has no answer cell for "
                f"it (a code cell whose first line is `%%writefile student/{module}.py`)"
            )
        return f"module '{module}' not in submission: no {module}.py"

    def answered(self) -> str:
        """What the self-test's hand grader will find: answers.md and how many questions it
        answers, the notebook's answer cells, or nothing."""
        if self.notebook:
            return f"answered in the notebook's self-test cells ({self.notebook})"
        if self.answers is None:
            return "no answers.md in the submission: hand it in beside your module files"
        parts = self.answers.split("**Your answer:**")[1:]
        done = sum(1 for part in parts if part.split("\n## ", 1)[0].strip() not in ("", "_Write your answer here._"))
        return f"answers.md handed in: {done} of {len(parts)} questions answered"


def load(path: str | Path) -> Submission:
    path = Path(path)
    if path.is_symlink():
        raise ValueError(f"SUBMISSION: {path} is a symlink; give the folder, notebook or zip itself")
    if path.is_dir():
        return _from_folder(path)
    if path.suffix in (".zip", ".ipynb") and path.exists():
        submission = Submission(path.name)
        try:
            data = read_regular(path, MAX_NOTEBOOK_BYTES + 1)
            if len(data) > MAX_NOTEBOOK_BYTES:
                raise ValueError(f"{path.name} is larger than {MAX_NOTEBOOK_BYTES} bytes: refused")
        except ValueError as exc:
            submission.unreadable = str(exc)
            submission.problems.append(str(exc))
            return submission
        if path.suffix == ".zip":
            _take_zip(submission, data)
        else:
            _take_notebook(submission, data, path.name)
        return submission
    raise ValueError(f"SUBMISSION: expected a folder of module files, a .ipynb notebook or a .zip, got {str(path)!r}")


def read_regular(path: Path, cap: int) -> bytes:
    """At most ``cap`` bytes of a regular file, opened without following a symbolic link and
    without blocking (a FIFO is refused, not waited on): a huge or sparse file is never read
    whole. ``ValueError`` says why a path is not readable."""
    import os

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        kind = "a symbolic link" if path.is_symlink() else exc.strerror
        raise ValueError(f"{path.name} cannot be read ({kind}): refused") from None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError(f"{path.name} is not a regular file: refused")
        return f.read(cap)


def _take(submission: Submission, name: str, data: bytes, where: str) -> None:
    if len(data) > MAX_FILE_BYTES:
        submission.refused[name] = f"{where} is larger than {MAX_FILE_BYTES} bytes: ignored"
        submission.problems.append(submission.refused[name])
        return
    submission.files[name] = data


def _refuse(submission: Submission, name: str | None, why: str) -> None:
    if name is not None:
        submission.refused[name] = why
    submission.problems.append(why)


def _from_folder(folder: Path) -> Submission:
    submission = Submission(folder.name or str(folder))
    _take_folder(submission, folder)
    if not submission.files and not submission.refused and not submission.notebook and not submission.unreadable:
        _search_below(submission, folder)
    return submission


def _search_below(submission: Submission, folder: Path) -> None:
    """The module files one or two folders below ``folder`` (a whole repository handed in)."""
    holders = [
        sub
        for sub in _folders_below(folder, SEARCH_DEPTH)
        if any(_is_module_file(sub / f"{name}.py") for name in MODULES)
    ]
    if not holders:
        return
    where = [h.relative_to(folder).as_posix() + "/" for h in holders]
    if len(holders) > 1:
        why = (
            f"module files found in several folders ({', '.join(where)}): refused, since it "
            "cannot be told which one is your work; submit the files themselves (or one zip of "
            "them), not the repository"
        )
        _refuse(submission, None, why)
        submission.unreadable = why
        return
    _take_folder(submission, holders[0])
    submission.found_in = where[0]
    for parent in holders[0].relative_to(folder).parents:  # a repository keeps it at its top
        answers = folder / parent / "answers.md"
        if submission.answers is None and _is_module_file(answers):
            try:
                submission.answers = read_regular(answers, MAX_ANSWERS_BYTES).decode("utf-8", "replace")
            except ValueError:
                pass
    submission.problems.append(
        f"found {len(submission.files)} module file(s) in {where[0]} of the submission, not at its "
        f"top: graded them; next time submit the files themselves (the module files, answers.md)"
    )


def _is_module_file(path: Path) -> bool:
    return path.is_file() and not path.is_symlink()


def _folders_below(folder: Path, depth: int) -> list[Path]:
    """Folders under ``folder``, ``depth`` levels at most, breadth first; symbolic links, hidden
    folders and ``SKIPPED_FOLDERS`` are not entered."""
    found, level = [], [folder]
    for _ in range(depth):
        nxt = []
        for parent in level:
            try:
                children = sorted(parent.iterdir())
            except OSError:
                continue
            for child in children[:MAX_ZIP_MEMBERS]:
                if child.name.startswith(".") or child.name in SKIPPED_FOLDERS:
                    continue
                if child.is_dir() and not child.is_symlink():
                    nxt.append(child)
        found += nxt
        level = nxt
    return found


def _take_folder(submission: Submission, folder: Path) -> None:
    for name in MODULES:
        path = folder / f"{name}.py"
        if path.is_symlink():
            _refuse(submission, name, f"{name}.py is a symlink: refused, not followed (submit the file itself)")
        elif path.exists():
            try:
                _take(submission, name, read_regular(path, MAX_FILE_BYTES + 1), f"{name}.py")
            except ValueError as exc:
                _refuse(submission, name, str(exc))
    # nbgrader's submitted/<student>/ holds the notebook one level down: <assignment>/<name>.ipynb
    notebooks = _entries(folder, ".ipynb", submission)
    if not notebooks:
        for sub in sorted(folder.iterdir()):
            if sub.name.startswith(".") or sub.name in SKIPPED_FOLDERS:
                continue
            if sub.is_symlink():
                _refuse(submission, None, f"{sub.name}/ is a symlink: refused, not followed")
            elif sub.is_dir():
                notebooks += _entries(sub, ".ipynb", submission)
    if not submission.files and len(notebooks) == 1:
        try:
            data = read_regular(notebooks[0], MAX_NOTEBOOK_BYTES + 1)
        except ValueError as exc:
            submission.unreadable = str(exc)
            submission.problems.append(str(exc))
        else:
            _take_notebook(submission, data, notebooks[0].name)
    zips = _entries(folder, ".zip", submission) if not submission.files and not notebooks else []
    if len(zips) == 1:  # an upload of one zip (Gradescope's submission folder)
        try:
            _take_zip(submission, read_regular(zips[0], MAX_NOTEBOOK_BYTES + 1))
        except ValueError as exc:
            submission.unreadable = str(exc)
            submission.problems.append(str(exc))
    answers = folder / "answers.md"
    if submission.answers is None and _is_module_file(answers):
        try:
            submission.answers = read_regular(answers, MAX_ANSWERS_BYTES).decode("utf-8", "replace")
        except ValueError:
            pass


def _entries(folder: Path, suffix: str, submission: Submission) -> list[Path]:
    """The regular files named ``*suffix`` in ``folder``; symlinks and other kinds refused."""
    found = []
    for path in sorted(folder.iterdir()):
        if not path.name.endswith(suffix) or path.name.startswith("."):
            continue
        if path.is_symlink():
            _refuse(submission, None, f"{path.name} is a symlink: refused, not followed")
        elif path.is_file():
            found.append(path)
        elif not path.is_dir():
            _refuse(submission, None, f"{path.name} is not a regular file: refused")
    return found


def _take_zip(submission: Submission, data: bytes) -> None:
    import io

    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except Exception as exc:  # noqa: BLE001 - BadZipFile, NotImplementedError (version), EOFError...
        submission.problems.append(f"not a readable zip: {type(exc).__name__}: {exc}")
        return
    with archive:
        members = archive.infolist()[:MAX_ZIP_MEMBERS]
        by_module: dict[str, list[zipfile.ZipInfo]] = {}
        notebooks, answers = [], []
        for member in members:
            name = PurePosixPath(member.filename).name
            if stat.S_ISLNK(member.external_attr >> 16) or member.is_dir():
                continue
            parts = PurePosixPath(member.filename).parts
            if any(part.startswith(".") or part in SKIPPED_FOLDERS for part in parts[:-1]) or name.startswith("."):
                continue  # what macOS's zip and editors add, the course's own packages
            if name.endswith(".ipynb"):
                notebooks.append(member)
                continue
            if name == "answers.md":
                answers.append(member)
                continue
            module = name.removesuffix(".py")
            if not name.endswith(".py") or module not in MODULES:
                continue
            by_module.setdefault(module, []).append(member)
        doubled = {m: ms for m, ms in by_module.items() if len(ms) > 1}
        if doubled:
            listed = "; ".join(f"{m}.py: {', '.join(x.filename for x in ms)}" for m, ms in sorted(doubled.items()))
            submission.problems.append(
                f"the zip holds two or more members for one module ({listed}): refused, since "
                "what is graded must be what any extraction shows; submit one copy of each module"
            )
            submission.unreadable = "the zip is ambiguous (see the notes)"
            return
        for module, (member,) in sorted(by_module.items()):
            _take(submission, module, _read_member(archive, member), member.filename)
        if len(answers) == 1:
            submission.answers = _read_member(archive, answers[0])[:MAX_ANSWERS_BYTES].decode("utf-8", "replace")
        if not submission.files and len(notebooks) == 1:
            _take_notebook(submission, _read_member(archive, notebooks[0]), notebooks[0].filename)


def _read_member(archive: zipfile.ZipFile, member: zipfile.ZipInfo) -> bytes:
    """At most MAX_FILE_BYTES + 1 bytes, whatever the header claims (zip bombs)."""
    try:
        with archive.open(member) as f:
            return f.read(MAX_FILE_BYTES + 1)
    except Exception as exc:  # noqa: BLE001 - BadZipFile, zlib.error, EOFError, NotImplementedError...
        return f"raise ImportError({f'unreadable zip member: {type(exc).__name__}: {exc}'!r})\n".encode()


def _take_notebook(submission: Submission, data: bytes, where: str) -> None:
    try:
        if len(data) > MAX_NOTEBOOK_BYTES:
            raise ValueError(f"larger than {MAX_NOTEBOOK_BYTES} bytes")
        notebook = json.loads(data)
        cells = notebook["cells"]
        if not isinstance(cells, list):
            raise TypeError("cells is not a list")
    except (ValueError, KeyError, TypeError, RecursionError) as exc:  # RecursionError: [[[[...
        submission.unreadable = f"{where} is not a readable notebook ({type(exc).__name__}: {exc})"
        submission.problems.append(submission.unreadable)
        return
    submission.notebook = where
    for cell in cells:
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        if isinstance(source, list) and all(isinstance(line, str) for line in source):
            source = "".join(source)
        if not isinstance(source, str):
            continue
        module = writefile_module(source)
        if module:
            first, _, body = source.partition("\n")
            _take(submission, module, body.encode(), f"{where}: {first.split()[1]}")


def writefile_module(source: str) -> str | None:
    """The module a notebook code cell writes, or None. The rule, for this grader and for
    nbgrader's autograde alike (``grader/nbgrader_bridge.py``): the cell's first line is
    ``%%writefile <folder>/<module>.py`` (any folder) and the rest of the cell is the module;
    when several cells write the same module, the last one counts."""
    words = source.partition("\n")[0].split()
    if len(words) == 2 and words[0] == "%%writefile" and words[1].endswith(".py"):
        module = PurePosixPath(words[1]).name.removesuffix(".py")
        if module in MODULES:
            return module
    return None
