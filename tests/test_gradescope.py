"""Gradescope: results.json against Gradescope's specification, the autograder bundle run end to
end in a folder laid out like Gradescope's, and the two-pass (CPU, GPU) merge."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import re
import tempfile
import zipfile
from pathlib import Path

import pytest

from coursekit.impl import REPO_ROOT
from grader import gradescope, isolation
from grader.judge import all_checks, load_rubric, rubric_digest
from tests.harness import gradescope_shell, submission

VISIBILITY = {"enum": ["hidden", "after_due_date", "after_published", "visible"]}
FORMAT = {"enum": ["text", "html", "simple_format", "md", "ansi"]}
#: Gradescope's results.json (https://gradescope-autograders.readthedocs.io/en/latest/specs/),
#: strict: a field Gradescope does not know fails.
SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "score": {"type": "number"},
        "execution_time": {"type": "number", "minimum": 0},
        "output": {"type": "string"},
        "output_format": FORMAT,
        "test_output_format": FORMAT,
        "test_name_format": FORMAT,
        "visibility": VISIBILITY,
        "stdout_visibility": VISIBILITY,
        "extra_data": {"type": "object"},
        "leaderboard": {"type": "array"},
        "tests": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["name"],
                "properties": {
                    "score": {"type": "number"},
                    "max_score": {"type": "number", "minimum": 0},
                    "status": {"enum": ["passed", "failed"]},
                    "name": {"type": "string"},
                    "name_format": FORMAT,
                    "number": {"type": "string", "pattern": r"^\d+(\.\d+)*$"},
                    "output": {"type": "string"},
                    "output_format": FORMAT,
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "visibility": VISIBILITY,
                    "extra_data": {"type": "object"},
                },
            },
        },
    },
    "anyOf": [{"required": ["score"]}, {"required": ["tests"]}],
}
CPU_POINTS = sum(p for c, p in load_rubric().items() if not next(x for x in all_checks() if x.id == c).gpu)


def validate(data: dict) -> None:
    """Gradescope's format, and ours on top: a graded check has its score, maximum and status; a
    check not graded in this run (pending: GPU pass; manual: by hand) has none of the three, so
    Gradescope cannot show it as passed."""
    jsonschema = pytest.importorskip("jsonschema", reason="the dev extra validates results.json")
    jsonschema.validate(data, SCHEMA)
    for test in data.get("tests", []):
        state = test.get("extra_data", {}).get("state")
        graded = {"score", "max_score", "status"} & set(test)
        if state in ("pending", "manual"):
            assert not graded, f"{test['name']}: a {state} check must carry no score or status: {test}"
        elif state is not None:
            assert graded == {"score", "max_score", "status"}, f"{test['name']}: {test}"
            assert test["status"] == ("passed" if state == "passed" else "failed"), test


def test_the_schema_can_fail():
    jsonschema = pytest.importorskip("jsonschema", reason="the dev extra validates results.json")
    good = {"score": 1, "tests": [{"name": "ex1 · x", "score": 1, "max_score": 1, "number": "1.1"}]}
    validate(good)
    for bad in (
        {**good, "grade": 3},
        {"tests": [{"name": "x", "score": 1, "max_score": 1, "status": "ok"}]},
        {"tests": [{"score": 1}]},
        {"score": 1, "visibility": "everyone"},
    ):
        with pytest.raises(jsonschema.ValidationError):
            validate(bad)
    pending = {"name": "x", "extra_data": {"state": "pending"}}
    for bad in ({**pending, "score": 0.0, "max_score": 0.0, "status": "passed"}, {**pending, "status": "passed"}):
        with pytest.raises(AssertionError):
            validate({"score": 0, "tests": [bad]})


# ----------------------------------------------------------------------------- the bundle


@pytest.fixture(scope="module")
def autograder():
    """The bundle, unpacked as Gradescope lays it out under a root of our own. Gradescope's
    specification (https://gradescope-autograders.readthedocs.io/en/latest/specs/): "The file
    must contain at least two files in the root of the archive: setup.sh [...] and
    run_autograder"; "/autograder/source contains the extracted contents of your autograder zip
    file"; "/autograder/run_autograder is where your autograder script gets copied to during the
    Docker image build process"; "When the autograder executes, the working directory is
    /autograder". ``gradescope.unpack`` does exactly that (``test_unpack_follows_gradescopes_spec``
    checks it by hand). The root lies in a folder every user can pass through, as /autograder is
    on Gradescope: under pytest's own temporary folders (mode 700) a worker could read nothing
    there whatever the bundle does, and the attack below would fail for the wrong reason."""
    base = Path(tempfile.mkdtemp(prefix="launch-tax-gradescope-"))
    base.chmod(0o755)
    secret = base / "secret"
    run = subprocess.run(
        [sys.executable, "-m", "grader", "secret", "new", str(secret)], cwd=REPO_ROOT, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    archive = base / "autograder.zip"
    run = subprocess.run(
        [sys.executable, "-m", "grader", "gradescope", str(archive), "--secret-file", str(secret)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    root = base / "autograder"
    gradescope.unpack(archive, root)
    yield root
    shutil.rmtree(base, ignore_errors=True)


def test_the_bundle_holds_what_grading_needs_and_nothing_else(autograder):
    names = {p.relative_to(autograder).as_posix() for p in autograder.rglob("*") if p.is_file()}
    assert {
        "run_autograder",
        "source/setup.sh",
        "source/run_autograder",
        "source/grading-secret",
        "source/solutions/engine.py",
        "source/grader/hidden/buckets.py",
        "source/grader/rubric.toml",
        "source/grader/BUILD.json",
    } <= names
    assert not any(
        n.startswith(("source/tests/", "source/course/", "source/exercises/", "source/source/")) for n in names
    )
    assert not any("expected.json" in n or "__pycache__" in n for n in names)
    setup = (autograder / "source" / "setup.sh").read_text()
    assert "torch==2.13.0" in setup and "download.pytorch.org/whl/cpu" in setup
    for package in gradescope.PINNED:  # every package pinned, not only torch
        assert re.search(rf'"{package}==[0-9][^"]*"', setup), f"{package} is not pinned in setup.sh"
    assert os.access(autograder / "run_autograder", os.X_OK)
    # Grading stops a minute before Gradescope's default timeout of 10 minutes would kill it.
    run = (autograder / "run_autograder").read_text()
    assert "deadline=${LAUNCH_TAX_DEADLINE:-540}" in run and '--deadline "$deadline"' in run
    build = json.loads((autograder / "source" / "grader" / "BUILD.json").read_text())
    assert build["commit"] != "unknown" and len(build["bundle"]) == 16


def test_unpack_follows_gradescopes_spec(tmp_path):
    """The zip's top level lands in ROOT/source/ and its run_autograder is copied to ROOT/ (the
    specification's sentences are quoted in the ``autograder`` fixture); a zip whose setup.sh
    and run_autograder are not at its root is refused, as Gradescope "won't be able to find
    them" ("make sure to zip the files, and not the folder containing the files")."""
    good = tmp_path / "good.zip"
    with zipfile.ZipFile(good, "w") as z:
        z.writestr("setup.sh", "#!/bin/bash\n")
        z.writestr("run_autograder", "#!/bin/bash\necho run\n")
        z.writestr("grader/x.py", "x = 1\n")
    gradescope.unpack(good, tmp_path / "root")
    assert (tmp_path / "root" / "run_autograder").read_text() == "#!/bin/bash\necho run\n"
    assert (tmp_path / "root" / "source" / "grader" / "x.py").is_file()
    assert (tmp_path / "root" / "source" / "setup.sh").is_file()
    nested = tmp_path / "nested.zip"
    with zipfile.ZipFile(nested, "w") as z:  # the layout of the bundle before this was fixed
        z.writestr("setup.sh", "#!/bin/bash\n")
        z.writestr("run_autograder", "#!/bin/bash\n")
        z.writestr("source/grader/x.py", "x = 1\n")
    gradescope.unpack(nested, tmp_path / "nested")
    assert not (tmp_path / "nested" / "source" / "grader").exists()  # it lands in source/source/
    folder = tmp_path / "folder.zip"
    with zipfile.ZipFile(folder, "w") as z:
        z.writestr("autograder/setup.sh", "#!/bin/bash\n")
        z.writestr("autograder/run_autograder", "#!/bin/bash\n")
    with pytest.raises(ValueError, match="root of the archive"):
        gradescope.unpack(folder, tmp_path / "folder")


def test_the_deadline_leaves_room_before_gradescopes_timeout():
    assert [gradescope.deadline_s(m) for m in (2, 10, 20, 40)] == [60, 540, 1080, 2160]
    assert "@DEADLINE@" not in gradescope.run_script(20) and "LAUNCH_TAX_DEADLINE:-1080}" in gradescope.run_script(20)


SHIM = """#!/usr/bin/env bash
echo "$0 $*" >> "$LOG"
case "$(basename "$0") $*" in
  "python3 -c"*) exit $PYTHON3_TOO_OLD ;;
  *"-m venv "*) mkdir -p "${@: -1}/bin"; ln -sf "$0" "${@: -1}/bin/python" ;;
esac
exit 0
"""


@pytest.mark.parametrize("too_old", [True, False], ids=["ubuntu-22.04-python-3.10", "python3-recent"])
def test_setup_installs_into_a_python_the_grader_can_run(tmp_path, too_old):
    """Gradescope's Ubuntu 22.04 image has Python 3.10, on which the grader cannot start (it reads
    the rubric with tomllib): setup.sh must then bring Python 3.11 and build the environment with
    it, and run_autograder must use that environment. Run with stand-ins for apt-get and Python
    that log what they are asked."""
    shims = tmp_path / "bin"
    shims.mkdir()
    for name in ("apt-get", "python3", "python3.11", "chmod"):
        (shims / name).write_text(SHIM)
        (shims / name).chmod(0o755)
    log, venv = tmp_path / "log", tmp_path / "venv"
    env = {
        "PATH": f"{shims}:/usr/bin:/bin",
        "LOG": str(log),
        "LAUNCH_TAX_VENV": str(venv),
        "PYTHON3_TOO_OLD": "1" if too_old else "0",
    }
    done = subprocess.run(
        ["bash", "-c", gradescope.setup_script("==2.13.0")], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    calls = [c.replace(f"{shims}/", "") for c in log.read_text().splitlines()]
    made_by = [c.split()[0] for c in calls if " -m venv " in c]
    assert made_by == (["python3.11"] if too_old else ["python3"]), calls
    if too_old:
        assert any(c.startswith("apt-get install") and "python3.11-venv" in c for c in calls), calls
    installs = [c for c in calls if "pip install" in c]
    assert installs and all(c.startswith(f"{venv}/bin/python -m pip ") for c in installs), (
        f"everything must go into the environment setup.sh made, not the system's Python: {calls}"
    )
    assert any("torch==2.13.0" in c and "download.pytorch.org/whl/cpu" in c for c in installs)
    assert any("hypothesis==" in c and "numpy==" in c for c in installs), installs
    # run_autograder runs the grader with the environment setup.sh made.
    assert '${LAUNCH_TAX_VENV:-/opt/launch-tax}/bin/python' in gradescope.RUN
    assert '"$python" -m grader grade' in gradescope.RUN


def run_autograder(root: Path, files: dict[str, bytes], mode: str = "user") -> dict:
    sub = root / "submission"
    shutil.rmtree(sub, ignore_errors=True)
    sub.mkdir()
    for name, data in files.items():
        (sub / name).write_bytes(data)
    shutil.rmtree(root / "results", ignore_errors=True)
    # setup.sh's environment stands in for this test run's Python; "the working directory is
    # /autograder".
    env = {**os.environ, "AUTOGRADER_ROOT": str(root), "LAUNCH_TAX_SANDBOX": mode, "LAUNCH_TAX_PYTHON": sys.executable}
    env.pop("LAUNCH_TAX_SECRET_FILE", None)
    done = subprocess.run(
        gradescope_shell(["bash", str(root / "run_autograder")]),
        env=env,
        cwd=root,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    data = json.loads((root / "results" / "results.json").read_text())
    validate(data)
    return data


def reference_files() -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in (REPO_ROOT / "solutions").glob("[a-z]*.py")}


def notebook_of(files: dict[str, bytes]) -> bytes:
    cells = [
        {
            "cell_type": "code",
            "metadata": {},
            "outputs": [],
            "execution_count": None,
            "source": f"%%writefile student/{name}\n" + data.decode(),
        }
        for name, data in files.items()
    ]
    return json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}).encode()


READ_THE_SOURCE = '''
import os as _os
_source = "ROOT/source"
_secret = open(_source + "/grading-secret").read()  # read it, and fail if we cannot
exec(compile(open(_source + "/solutions/launch_model.py").read(), "reference", "exec"), globals())
'''


@pytest.mark.skipif(not isolation.SeparateUser.available(), reason="Gradescope runs the autograder as root")
@pytest.mark.slow
def test_the_bundle_grades_like_gradescope(autograder):
    ref = run_autograder(autograder, reference_files())
    assert ref["score"] == CPU_POINTS == ref["extra_data"]["max_score"], ref["output"]
    pending = [t for t in ref["tests"] if t["extra_data"]["state"] == "pending"]
    assert pending and all("gpu" in t["tags"] and "score" not in t and "status" not in t for t in pending)
    assert ref["extra_data"]["mode"] == "official" and ref["extra_data"]["isolation"] == "separate user only"
    assert "separate unprivileged user" not in ref["extra_data"]["protections_off"]
    # What a student sees names no path of the grading machine and none of its protections.
    shown = ref["output"] + "".join(t.get("output", "") for t in ref["tests"])
    assert str(autograder) not in shown and "protections off" not in shown
    assert ref["extra_data"]["submission"] == "submission" and ref["extra_data"]["bundle"] != "none"
    stubs = run_autograder(autograder, {p.name: p.read_bytes() for p in (REPO_ROOT / "exercises").glob("[a-z]*.py")})
    assert stubs["score"] == 0
    notebook = run_autograder(autograder, {"launch_tax.ipynb": notebook_of(reference_files())})
    assert notebook["score"] == CPU_POINTS
    empty = run_autograder(autograder, {})
    assert empty["score"] == 0 and "not in submission" in json.dumps(empty["tests"])
    attack = READ_THE_SOURCE.replace("ROOT", str(autograder))
    files = {
        **reference_files(),
        "launch_model.py": (REPO_ROOT / "exercises" / "launch_model.py").read_bytes() + attack.encode(),
    }
    attacked = run_autograder(autograder, files)
    ex1 = [t for t in attacked["tests"] if t["name"].startswith("ex1 ")]
    assert sum(t["score"] for t in ex1) == 0 and "Permission denied" in json.dumps(ex1)
    assert attacked["score"] == CPU_POINTS - sum(t["max_score"] for t in ex1)
    # The defence: run_autograder keeps the source root's. Without it the attack wins.
    script = autograder / "run_autograder"
    text = script.read_text()
    script.write_text(
        text.replace('chmod 700 "$source" "$results"', ":").replace(
            'chmod 600 "$source/grading-secret"', "chmod 644 \"$source/grading-secret\""
        )
    )
    os.chmod(autograder / "source", 0o755)
    try:
        undefended = run_autograder(autograder, files)
    finally:
        script.write_text(text)
    assert undefended["score"] == CPU_POINTS, "the attack should win without the defence"


def test_a_failing_autograder_still_writes_results(tmp_path):
    root = tmp_path / "autograder"
    (root / "source").mkdir(parents=True)
    (root / "source" / "grading-secret").write_text("x" * 64)
    (root / "run_autograder").write_text(gradescope.run_script())
    (root / "source" / "run_autograder").write_text(gradescope.run_script())
    # A grader that crashes before writing anything (run from source/, it comes before any
    # installed copy on the import path).
    (root / "source" / "grader").mkdir()
    (root / "source" / "grader" / "__init__.py").write_text("")
    (root / "source" / "grader" / "__main__.py").write_text("raise RuntimeError('the grader broke')\n")
    data = run_autograder(root, {})
    assert data["score"] == 0 and data["extra_data"]["status"] == "not gradable"
    assert "not a wrong answer" in data["output"]


# ----------------------------------------------------------------------------- two passes


def _write_pass(folder: Path, students: dict[str, dict]) -> None:
    for name, data in students.items():
        (folder / "students" / name).mkdir(parents=True)
        (folder / "students" / name / "results.json").write_text(json.dumps(data))


def gpu_pass(seed_id: str, passed: bool, extra_cpu_check: bool = False) -> dict:
    """A GPU pass's results.json as grade-all --only-gpu writes it, with every GPU check passed
    (the reference's points) or failed."""
    points = load_rubric()
    tests, numbers = [], {}
    for check in all_checks():
        numbers[check.exercise] = numbers.get(check.exercise, 0) + 1
        if not check.gpu and not (extra_cpu_check and check.id == "ex1.decode_step_formulas"):
            continue
        state = "passed" if passed and check.gpu else "failed"
        tests.append(
            {
                "name": f"{check.exercise} · {check.name}",
                "number": f"{check.exercise[2:]}.{numbers[check.exercise]}",
                "tags": [check.exercise, "gpu"],
                "score": points[check.id] if state == "passed" else 0.0,
                "max_score": points[check.id],
                "status": state,
                "output": "",
                "visibility": "visible",
                "extra_data": {
                    "check": check.id,
                    "state": state,
                    "points": points[check.id],
                    "gpu": check.gpu,
                    "hidden": check.hidden,
                },
            }
        )
    return {
        "score": sum(t["score"] for t in tests),
        "output": "gpu pass",
        "execution_time": 1.0,
        "tests": tests,
        "extra_data": {
            "seed_id": seed_id,
            "status": "graded",
            "gpu": "NVIDIA H200",
            "pass": "gpu",
            "rubric": rubric_digest(),
        },
    }


@pytest.mark.slow
def test_merge_joins_the_passes_per_student_and_per_check(tmp_path):
    submissions = tmp_path / "class"
    submission(submissions / "alice")
    shutil.copytree(REPO_ROOT / "exercises", submissions / "bob", ignore=shutil.ignore_patterns("tests"))
    submission(submissions / "carol")
    secret = tmp_path / "secret"
    subprocess.run(
        [sys.executable, "-m", "grader", "secret", "new", str(secret)], cwd=REPO_ROOT, check=True, capture_output=True
    )
    cpu = tmp_path / "cpu"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "grader",
            "grade-all",
            str(submissions),
            "--out",
            str(cpu),
            "--gpu",
            "off",
            "--secret-file",
            str(secret),
            "--jobs",
            "2",
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert run.returncode == 0, run.stderr
    seed = json.loads((cpu / "students" / "alice" / "results.json").read_text())["extra_data"]["seed_id"]
    gpu = tmp_path / "gpu"
    _write_pass(
        gpu,
        {
            "alice": gpu_pass(seed, True, extra_cpu_check=True),
            "bob": gpu_pass(seed, False),
            "dave": gpu_pass(seed, True),
        },
    )
    final = tmp_path / "final"
    merged = subprocess.run(
        [sys.executable, "-m", "grader", "merge", str(cpu), str(gpu), "--out", str(final)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert merged.returncode == 0, merged.stderr
    with open(final / "gradebook.csv") as f:
        book = {row["student"]: row for row in csv.DictReader(f)}
    assert sorted(book) == ["alice", "bob", "carol", "dave"]  # nobody dropped
    assert float(book["alice"]["score"]) == 100 == float(book["alice"]["max_score"])
    assert float(book["alice"]["pending"]) == 0
    assert float(book["bob"]["score"]) == 0 and float(book["bob"]["max_score"]) == 100
    assert float(book["carol"]["pending"]) == 100 - CPU_POINTS and "missing from the GPU pass" in book["carol"]["notes"]
    assert "missing from the CPU pass" in book["dave"]["notes"]
    for student in book:
        data = json.loads((final / "students" / student / "results.json").read_text())
        validate(data)
    alice = json.loads((final / "students" / "alice" / "results.json").read_text())
    checks = [t["extra_data"]["check"] for t in alice["tests"] if t["extra_data"]["state"] != "manual"]
    assert len(checks) == len(set(checks)) == len(all_checks())  # each check once, from its pass
    assert (final / "summary.md").is_file()
    other = tmp_path / "gpu-other"
    _write_pass(other, {"alice": gpu_pass("another-secret", True)})
    refused = subprocess.run(
        [sys.executable, "-m", "grader", "merge", str(cpu), str(other), "--out", str(tmp_path / "x")],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert refused.returncode == 2 and "different secrets" in refused.stderr
    # Two passes of one kind (the CPU pass twice) or the same folder twice: refused, not joined.
    shutil.copytree(cpu, tmp_path / "cpu-again")
    for args, needle in (
        ([str(cpu), str(cpu)], "same folder"),
        ([str(cpu), str(tmp_path / "cpu-again")], "not a gpu pass"),
        ([str(cpu), str(gpu)], "already holds"),
    ):
        out = final if needle == "already holds" else tmp_path / "y"
        refused = subprocess.run(
            [sys.executable, "-m", "grader", "merge", *args, "--out", str(out)],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert refused.returncode == 2 and needle in refused.stderr, (needle, refused.stderr)


@pytest.mark.slow
def test_the_self_test_grades_a_bundle_before_it_is_uploaded(autograder, tmp_path):
    """``gradescope OUT.zip --self-test`` lays the zip out as Gradescope does and grades the
    reference (every CPU point) and the stubs (none) through its run_autograder; a bundle laid
    out otherwise (its scripts in a folder of the zip) fails it."""
    archive = autograder.parent / "autograder.zip"
    done = subprocess.run(
        [sys.executable, "-m", "grader", "gradescope", str(archive), "--self-test"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"ok   the reference: {CPU_POINTS:g} of {CPU_POINTS:g}" in done.stdout, done.stdout
    assert "ok   the stubs: 0 of" in done.stdout and "official grading" in done.stdout
    broken = tmp_path / "folder.zip"
    with zipfile.ZipFile(archive) as z, zipfile.ZipFile(broken, "w") as out:
        for info in z.infolist():
            out.writestr(f"autograder/{info.filename}", z.read(info))
    done = subprocess.run(
        [sys.executable, "-m", "grader", "gradescope", str(broken), "--self-test"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1 and "root of the archive" in done.stderr, done.stdout + done.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="setup.sh runs as root on Gradescope")
@pytest.mark.slow
def test_setup_sh_installs_the_pinned_packages_from_pypi(tmp_path):
    """setup.sh itself, not a stand-in for pip: with LAUNCH_TAX_PIP_SOURCE=pypi every package
    comes from pip's configured index (what a machine that reaches only PyPI has), at the
    versions the bundle pins, into the environment it makes. apt-get is a logging stand-in:
    packages of the image are not what is tested here (a Debian root made with debootstrap ran
    the whole script, apt included: see the closing note of issue 18)."""
    shims = tmp_path / "bin"
    shims.mkdir()
    (shims / "apt-get").write_text('#!/bin/sh\necho "apt-get $*" >> "$LOG"\n')
    (shims / "apt-get").chmod(0o755)
    python_dir = Path(sys.base_prefix) / "bin"
    env = {
        "PATH": f"{shims}:{python_dir}:/usr/bin:/bin",
        "LOG": str(tmp_path / "log"),
        "LAUNCH_TAX_VENV": str(tmp_path / "venv"),
        "LAUNCH_TAX_PIP_SOURCE": "pypi",
        "HOME": os.environ.get("HOME", "/root"),
        "PIP_NO_INPUT": "1",
    }
    script = tmp_path / "setup.sh"
    script.write_text(gradescope.setup_script("==2.13.0"))
    done = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    assert "launch-tax: torch 2.13.0" in done.stdout
    venv_python = tmp_path / "venv" / "bin" / "python"
    for name, spec in gradescope.pins().items():
        version = subprocess.run(
            [str(venv_python), "-c", f"import importlib.metadata as m; print(m.version({name!r}))"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        assert spec.endswith(f"=={version}") or version.startswith(spec.split("==")[-1]), (name, spec, version)
