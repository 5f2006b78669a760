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
"""

from __future__ import annotations

import json
import stat
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from coursekit.impl import EXERCISES

MODULE_NAMES = tuple(name for _, name in EXERCISES)
MAX_FILE_BYTES = 1 << 20
MAX_NOTEBOOK_BYTES = 16 * MAX_FILE_BYTES
MAX_ZIP_MEMBERS = 1000


@dataclass
class Submission:
    label: str
    files: dict[str, bytes] = field(default_factory=dict)  # module name -> source
    problems: list[str] = field(default_factory=list)  # what was refused, for the report
    refused: dict[str, str] = field(default_factory=dict)  # module name -> why
    notebook: str | None = None  # the notebook the modules come from, if they do
    unreadable: str | None = None  # why that notebook could not be read

    def missing_reason(self, module: str) -> str:
        if module in self.refused:
            return self.refused[module]
        if self.unreadable:
            return f"module '{module}' not in submission: {self.unreadable}"
        if self.notebook:
            return (f"module '{module}' not in submission: {self.notebook} has no answer cell for "
                    f"it (a code cell whose first line is `%%writefile student/{module}.py`)")
        return f"module '{module}' not in submission: no {module}.py"


def load(path: str | Path) -> Submission:
    path = Path(path)
    if path.is_symlink():
        raise ValueError(f"SUBMISSION: {path} is a symlink; give the folder, notebook or zip itself")
    if path.is_dir():
        return _from_folder(path)
    if path.suffix in (".zip", ".ipynb") and path.exists():
        submission = Submission(str(path))
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
    raise ValueError(f"SUBMISSION: expected a folder of module files, a .ipynb notebook or a .zip, "
                     f"got {str(path)!r}")


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
    submission = Submission(str(folder))
    for name in MODULE_NAMES:
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
    return submission


def _entries(folder: Path, suffix: str, submission: Submission) -> list[Path]:
    """The regular files named ``*suffix`` in ``folder``; symlinks and other kinds refused."""
    found = []
    for path in sorted(folder.iterdir()):
        if not path.name.endswith(suffix):
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
        notebooks = []
        for member in members:
            name = PurePosixPath(member.filename).name
            if stat.S_ISLNK(member.external_attr >> 16) or member.is_dir():
                continue
            if name.endswith(".ipynb"):
                notebooks.append(member)
                continue
            module = name.removesuffix(".py")
            if not name.endswith(".py") or module not in MODULE_NAMES:
                continue
            if "__pycache__" in PurePosixPath(member.filename).parts:
                continue
            by_module.setdefault(module, []).append(member)
        doubled = {m: ms for m, ms in by_module.items() if len(ms) > 1}
        if doubled:
            listed = "; ".join(f"{m}.py: {', '.join(x.filename for x in ms)}" for m, ms in sorted(doubled.items()))
            submission.problems.append(
                f"the zip holds two or more members for one module ({listed}): refused, since "
                "what is graded must be what any extraction shows; submit one copy of each module")
            submission.unreadable = "the zip is ambiguous (see the notes)"
            return
        for module, (member,) in sorted(by_module.items()):
            _take(submission, module, _read_member(archive, member), member.filename)
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
        if module in MODULE_NAMES:
            return module
    return None
