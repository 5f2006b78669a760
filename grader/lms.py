"""A class folder as an LMS exports it (``lms_entries``): one entry per student, with what each
handed in, and that student's submission (``load_entry``).

What an LMS adds is read as it adds it: hidden files and ``__MACOSX/`` are not students; Canvas's
and Blackboard's loose files are grouped per student; Moodle's folder names give the student's
name. An entry that is no submission (a symbolic link, a FIFO, a file that is no submission) is
refused with a reason. Each student gets a safe id (the folder name under ``students/``; accents
folded, so ``Lena Müller`` is ``Lena_Muller``) and the gradebook keeps the name as the LMS wrote
it, and the LMS's number for the student where it gives one.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

SUBMISSION_SUFFIXES = (".zip", ".ipynb")
#: What operating systems and LMS exports add beside the submissions: never a student.
JUNK = ("__MACOSX", "Thumbs.db", "desktop.ini", "__pycache__")
#: Canvas's bulk download names each file ``<login>[_LATE]_<user id>_<submission id>_<file>``
#: (e.g. ``smithbob_340934_208490284_BobsWork.zip``), and renames a file handed in again under
#: the same name ``<file>-1``.
CANVAS = re.compile(r"^(?P<name>[^_]+?)(?:_LATE)?_(?P<uid>\d+)_(?P<sid>\d+)_(?P<file>.+)$")
CANVAS_RENAMED = re.compile(r"^(?P<stem>.+)-\d+(?P<ext>\.[A-Za-z0-9]+)$")
#: Moodle's "download all submissions" gives a folder per student:
#: ``<Full Name>_<participant id>_assignsubmission_file_``.
MOODLE = re.compile(r"^(?P<name>.+?)_(?P<uid>\d+)_assignsubmission_(?:file|onlinetext)_?$")
#: Blackboard's: ``<assignment>_<user>_attempt_<yyyy-mm-dd-hh-mm-ss>[_<file>]`` (the file-less
#: one is its receipt).
BLACKBOARD = re.compile(
    r"^(?P<assignment>.+)_(?P<name>[^_]+)_attempt_"
    r"(?P<date>\d{4}-\d{2}-\d{2}-\d{2}-\d{2}-\d{2})(?:_(?P<file>.+))?$"
)
MAX_LOOSE_FILES = 64


@dataclass
class Entry:
    """One student's submission as the class folder holds it."""

    name: str  # as the LMS (or the folder) writes it
    paths: list[Path] = field(default_factory=list)  # one folder/zip/notebook, or loose files
    lms_id: str = ""
    refused: str | None = None
    id: str = ""  # safe and unique: students/ID/, the gradebook's ``student``

    @property
    def entry(self) -> str:
        return "; ".join(p.name for p in self.paths)


def _display(entry: Path) -> str:
    name = entry.name
    for suffix in SUBMISSION_SUFFIXES:
        name = name.removesuffix(suffix)
    return name


def lms_entries(root: Path) -> list[Entry]:
    """The class folder's students, with what each handed in (see the module docstring)."""
    entries: list[Entry] = []
    loose: dict[tuple[str, str], Entry] = {}
    for path in sorted(root.iterdir()):
        if path.name.startswith(".") or path.name in JUNK:
            continue
        if path.is_symlink():
            entries.append(
                Entry(
                    _display(path),
                    [path],
                    refused=("a symbolic link: refused, not followed (submit the folder or file itself)"),
                )
            )
            continue
        if path.is_dir():
            moodle = MOODLE.match(path.name)
            entries.append(Entry(moodle["name"], [path], moodle["uid"]) if moodle else Entry(_display(path), [path]))
            continue
        canvas, board = CANVAS.match(path.name), BLACKBOARD.match(path.name)
        if path.is_file() and (canvas or board):
            if board and not board["file"]:
                continue  # Blackboard's receipt, not a submission
            key = (canvas["name"], canvas["uid"]) if canvas else (board["name"], "")
            loose.setdefault(key, Entry(key[0], [], key[1])).paths.append(path)
        elif path.is_file():
            entries.append(
                Entry(
                    _display(path),
                    [path],
                    refused=None
                    if path.suffix in SUBMISSION_SUFFIXES
                    else "not a submission: expected a folder, a .zip or a .ipynb",
                )
            )
        else:
            entries.append(
                Entry(
                    _display(path), [path], refused=("not a regular file or folder (a FIFO, socket or device): refused")
                )
            )
    entries += loose.values()
    ids(entries)
    return sorted(entries, key=lambda e: e.id.lower())


def lms_file_name(path: Path) -> str:
    """The name a student gave a file an LMS renamed (``kimhana_1_2_buckets-1.py`` -> buckets.py)."""
    match = CANVAS.match(path.name) or BLACKBOARD.match(path.name)
    name = match["file"] if match and match["file"] else path.name
    renamed = CANVAS_RENAMED.match(name)
    return f"{renamed['stem']}{renamed['ext']}" if renamed else name


def safe_id(name: str) -> str:
    """A name fit for a folder and a gradebook cell: accents dropped (``Müller`` -> ``Muller``),
    letters and digits of any script kept (``김하나``), anything else one ``_``."""
    bare = "".join(ch for ch in unicodedata.normalize("NFKD", name) if unicodedata.category(ch) != "Mn")
    text = "".join(
        ch if (ch.isalnum() and ch.isprintable()) or ch in ".-" else "_" for ch in unicodedata.normalize("NFC", bare)
    )
    return re.sub(r"_+", "_", text).strip("._")[:100] or "submission"


def ids(entries: list[Entry]) -> None:
    """A safe, unique id per entry (``alice/`` and ``alice.zip`` become alice, alice-2)."""
    taken: set[str] = set()
    for entry in entries:
        base = safe_id(entry.name)
        name, k = base, 2
        while name.lower() in taken:
            name, k = f"{base}-{k}", k + 1
        taken.add(name.lower())
        entry.id = name


def load_entry(entry: Entry, scratch: Path):
    """``entry``'s submission: its one folder, zip or notebook, or its loose files gathered
    under their own names into a folder of ``scratch``."""
    from grader.submission import MAX_FILE_BYTES, load, read_regular

    if len(entry.paths) == 1 and not (CANVAS.match(entry.paths[0].name) or BLACKBOARD.match(entry.paths[0].name)):
        return load(entry.paths[0])
    if len(entry.paths) == 1 and entry.paths[0].suffix in SUBMISSION_SUFFIXES:
        submission = load(entry.paths[0])
    else:
        folder = scratch / entry.id
        folder.mkdir(parents=True)
        for path in entry.paths[:MAX_LOOSE_FILES]:
            target = folder / lms_file_name(path)
            if not target.exists():  # Canvas lists the latest attempt's files only; keep the first
                target.write_bytes(read_regular(path, MAX_FILE_BYTES + 1))
        submission = load(folder)
    submission.label = entry.id
    return submission
