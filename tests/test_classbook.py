"""A class folder as LMSs deliver it, regrades into an existing run, and the hand-graded column.

The LMS layouts follow what each platform writes:
- Canvas's "Download Submissions" gives loose files named ``<login>[_LATE]_<user id>_<submission
  id>_<file name>`` (a recorded example, from the canvas-unzipper project's README:
  ``smithbob_340934_208490284_BobsWork.zip``), and a file handed in again under the same name
  comes back as ``<name>-1.<ext>``;
- Moodle's "Download all submissions" gives a folder per student,
  ``<Full Name>_<participant id>_assignsubmission_file_``;
- macOS's "Compress" adds ``__MACOSX/`` with ``._*`` resource forks, and Finder leaves ``.DS_Store``.
"""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from coursekit.impl import REPO_ROOT
from tests.harness import submission

# Whole class folders, graded through the CLI: CI's slow stage (tests/conftest.py).
pytestmark = pytest.mark.slow


REFERENCE = (REPO_ROOT / "solutions" / "launch_model.py").read_bytes()
STUB = (REPO_ROOT / "exercises" / "launch_model.py").read_bytes()
EX1 = 13  # exercise 1's CPU points (public and hidden)


def grader(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "grader", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout
    )


def gradebook(out: Path) -> dict[str, dict]:
    with open(out / "gradebook.csv", newline="", encoding="utf-8") as f:
        return {row["student"]: row for row in csv.DictReader(f)}


def lms_class(root: Path) -> Path:
    """A class folder with what real exports and real students put in one."""
    repo = root / "Lena Müller" / "launch-tax-main"  # the whole repository, downloaded from GitHub
    shutil.copytree(REPO_ROOT / "exercises", repo / "exercises", ignore=shutil.ignore_patterns("tests", "__pycache__"))
    (repo / "exercises" / "launch_model.py").write_bytes(REFERENCE)
    shutil.copytree(REPO_ROOT / "coursekit", repo / "coursekit", ignore=shutil.ignore_patterns("__pycache__"))
    (repo / "answers.md").write_text("## Question 1\n\n**Your answer:**\n\nLaunches.\n")
    (root / "Lena Möller").mkdir()
    (root / "Lena Möller" / "launch_model.py").write_bytes(STUB)
    (root / "__MACOSX" / "Lena Müller").mkdir(parents=True)
    (root / "__MACOSX" / "Lena Müller" / "._launch_model.py").write_bytes(b"\x00\x05\x16\x07")
    (root / ".DS_Store").write_bytes(b"\x00\x00\x00\x01Bud1")
    with zipfile.ZipFile(root / "kimhana_123456_7890123_launch_tax.zip", "w") as z:
        z.writestr("launch_tax/launch_model.py", REFERENCE)
        z.writestr("__MACOSX/launch_tax/._launch_model.py", b"\x00\x05\x16\x07")
    (root / "parkjin_LATE_222_333_launch_model-1.py").write_bytes(REFERENCE)
    (root / "parkjin_LATE_222_333_answers.md").write_text("**Your answer:**\n\nA graph.\n")
    moodle = root / "Zoë Adams_4242_assignsubmission_file_"
    moodle.mkdir()
    (moodle / "launch_model.py").write_bytes(REFERENCE)
    staff = root / "omar" / "launch-tax"  # two copies of the modules: which one is his?
    submission(staff / "exercises")
    submission(staff / "solutions")
    return root


def test_a_class_folder_as_lms_deliver_it(tmp_path):
    out = tmp_path / "out"
    run = grader(
        "grade-all", str(lms_class(tmp_path / "class")), "--out", str(out), "--practice", "--only", "ex1", "--jobs", "2"
    )
    assert run.returncode == 0, run.stderr
    book = gradebook(out)
    assert sorted(book, key=str.lower) == ["kimhana", "Lena_Moller", "Lena_Muller", "omar", "parkjin", "Zoe_Adams"], (
        "one row per student, nothing for __MACOSX/ or .DS_Store, accents folded, not mangled"
    )
    names = {s: (row["name"], row["lms_id"]) for s, row in book.items()}
    assert names == {
        "kimhana": ("kimhana", "123456"),
        "Lena_Moller": ("Lena Möller", ""),
        "Lena_Muller": ("Lena Müller", ""),
        "omar": ("omar", ""),
        "parkjin": ("parkjin", "222"),
        "Zoe_Adams": ("Zoë Adams", "4242"),
    }
    scores = {s: float(row["ex1"]) for s, row in book.items()}
    assert scores == {"kimhana": EX1, "Lena_Moller": 0, "Lena_Muller": EX1, "omar": 0, "parkjin": EX1, "Zoe_Adams": EX1}
    assert "launch-tax-main/exercises/" in book["Lena_Muller"]["notes"], "say where the files were found"
    assert "several folders" in book["omar"]["notes"] and "submit the files themselves" in book["omar"]["notes"]
    assert book["kimhana"]["entry"] == "kimhana_123456_7890123_launch_tax.zip"
    lena = json.loads((out / "students" / "Lena_Muller" / "results.json").read_text())
    manual = [t for t in lena["tests"] if t["extra_data"]["state"] == "manual"]
    assert manual and "answers.md handed in: 1 of 1" in manual[0]["output"], "found at the repository's top"
    park = json.loads((out / "students" / "parkjin" / "results.json").read_text())
    assert "answers.md handed in" in json.dumps(park["tests"]), "Canvas's renamed answers.md is read"
    summary = (out / "summary.md").read_text(encoding="utf-8")
    assert "\\x0a" not in summary and "Lena Müller" in summary and "Zoë Adams" in summary
    assert "kimhana_123456_7890123_launch_tax" not in book, "an LMS file name is not a student id"


def test_a_used_out_folder_is_never_mixed(tmp_path):
    klass = tmp_path / "class"
    (klass / "alice").mkdir(parents=True)
    (klass / "alice" / "launch_model.py").write_bytes(STUB)
    (klass / "bob").mkdir()
    (klass / "bob" / "launch_model.py").write_bytes(REFERENCE)
    out = tmp_path / "out"
    common = ("--only", "ex1", "--jobs", "2")
    assert grader("grade-all", str(klass), "--out", str(out), "--practice", *common).returncode == 0
    # The TA fills in the self-test by hand.
    rows = list(csv.DictReader(open(out / "gradebook.csv", newline="", encoding="utf-8")))
    for row in rows:
        row["self_test"] = {"alice": "4", "bob": "6"}[row["student"]]
    with open(out / "gradebook.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    (klass / "alice" / "launch_model.py").write_bytes(REFERENCE)  # alice's regrade request
    again = grader("grade-all", str(klass), "--out", str(out), "--practice", *common)
    assert again.returncode == 2 and "already holds" in again.stderr and "--replace" in again.stderr
    assert float(gradebook(out)["alice"]["ex1"]) == 0, "a refused run changes nothing"
    # Another secret's inputs cannot be mixed into a practice run.
    secret = tmp_path / "secret"
    assert grader("secret", "new", str(secret)).returncode == 0
    other = grader(
        "grade-all", str(klass), "--out", str(out), "--secret-file", str(secret), "--students", "alice", *common
    )
    assert other.returncode == 2 and "seed_id" in other.stderr, other.stderr
    regrade = grader("grade-all", str(klass), "--out", str(out), "--practice", "--students", "alice", *common)
    assert regrade.returncode == 0, regrade.stderr
    assert "regraded 1 of 2" in regrade.stdout and "kept 2 hand-graded" in regrade.stdout
    book = gradebook(out)
    assert float(book["alice"]["ex1"]) == EX1 and float(book["bob"]["ex1"]) == EX1
    assert (book["alice"]["self_test"], book["bob"]["self_test"]) == ("4", "6")
    assert grader("totals", str(out)).returncode == 0
    book = gradebook(out)
    assert float(book["alice"]["total"]) == EX1 + 4 and float(book["bob"]["total"]) == EX1 + 6
    unknown = grader("grade-all", str(klass), "--out", str(out), "--practice", "--students", "zed", *common)
    assert unknown.returncode == 2 and "zed" in unknown.stderr
    shutil.rmtree(klass / "bob")
    replaced = grader("grade-all", str(klass), "--out", str(out), "--practice", "--replace", *common)
    assert replaced.returncode == 0, replaced.stderr
    assert sorted(gradebook(out)) == ["alice"] and not (out / "students" / "bob").exists(), (
        "--replace replaces the run whole"
    )
    assert gradebook(out)["alice"]["self_test"] == "4", "hand-graded points survive a replace"


def test_totals_refuses_what_is_not_points(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    header = "student,name,score,self_test,self_test_max,total\n"
    (out / "gradebook.csv").write_text(header + "a,a,10,7,6,\nb,b,10,x,6,\n", encoding="utf-8")
    run = grader("totals", str(out))
    assert run.returncode == 2 and "a: '7'" in run.stderr and "b: 'x'" in run.stderr
    assert (out / "gradebook.csv").read_text(encoding="utf-8").endswith("b,b,10,x,6,\n"), "nothing written"


def test_grade_all_without_the_secret_refuses_in_one_line(tmp_path):
    klass = tmp_path / "class"
    (klass / "alice").mkdir(parents=True)
    (klass / "alice" / "launch_model.py").write_bytes(REFERENCE)
    run = grader("grade-all", str(klass), "--out", str(tmp_path / "out"))
    assert run.returncode == 2 and not (tmp_path / "out").exists()
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "secret new" in lines[0] and "--secret-file" in lines[0] and "--practice" in lines[0]
    practice = grader("grade-all", str(klass), "--out", str(tmp_path / "out"), "--practice", "--only", "ex1")
    assert practice.returncode == 0, practice.stderr
    data = json.loads((tmp_path / "out" / "students" / "alice" / "results.json").read_text())
    assert data["extra_data"]["mode"] == "practice" and "PRACTICE MODE" in data["output"]


@pytest.mark.parametrize("layout", ["whole repository", "zip of the repository"])
def test_a_whole_repository_is_graded_where_its_modules_are(tmp_path, layout):
    repo = tmp_path / "upload" / "launch-tax-main"
    shutil.copytree(REPO_ROOT / "exercises", repo / "exercises", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO_ROOT / "coursekit", repo / "coursekit", ignore=shutil.ignore_patterns("__pycache__"))
    (repo / "exercises" / "launch_model.py").write_bytes(REFERENCE)
    target = tmp_path / "upload"
    if layout == "zip of the repository":
        target = Path(shutil.make_archive(str(tmp_path / "repo"), "zip", tmp_path / "upload"))
    run = grader("grade", str(target), "--only", "ex1,ex7", "--brief")
    assert run.returncode == 0, run.stderr
    assert f"{EX1}/{EX1}" in run.stdout, run.stdout  # exercise 1's reference, found one folder down
    assert "not in submission" not in run.stdout, "coursekit/fusion.py is the course's, not exercise 7"
