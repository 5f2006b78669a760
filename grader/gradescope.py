"""``python -m grader gradescope OUT.zip``: the autograder bundle to upload to Gradescope.

Gradescope's autograder specification (https://gradescope-autograders.readthedocs.io/en/latest/specs/)
says: "The file must contain at least two files in the root of the archive: setup.sh [...] and
run_autograder"; "/autograder/source contains the extracted contents of your autograder zip
file"; "/autograder/run_autograder is where your autograder script gets copied to during the
Docker image build process"; "When the autograder executes, the working directory is
/autograder". Gradescope then puts each student's files in ``/autograder/submission/``, runs
``/autograder/run_autograder`` as root and shows ``/autograder/results/results.json``. So the
bundle's top level is what lands in ``/autograder/source/``:

* ``setup.sh``: installs exactly what grading needs, at pinned versions, into a virtual
  environment of its own, ``/opt/launch-tax`` (Python 3.11 or newer, from apt where the image's
  ``python3`` is older; torch's CPU build, numpy, hypothesis), and util-linux's
  ``setpriv``/``prlimit``/``unshare``. ``LAUNCH_TAX_PIP_SOURCE`` points pip elsewhere (see
  ``SETUP``);
* ``run_autograder``: grades ``/autograder/submission/`` (module files, a notebook, or one zip of
  either) with the grading secret and writes ``/autograder/results/results.json``; if grading
  itself fails, it still writes a results.json that says so (a fault of the grader is not a
  wrong answer);
* the grader, the course's support package, the reference solutions and ``grading-secret``;
  the grader's ``BUILD.json`` names the commit the bundle was built from and the bundle's
  digest, and every result carries both.

``unpack`` lays a bundle out exactly so under a root of our own, and ``self_test`` grades the
reference (every CPU point) and the stubs (0) through that layout's ``run_autograder``: run it
before uploading (``python -m grader gradescope autograder.zip --self-test``).

Gradescope's containers may not allow namespaces. The judge then runs each worker as an
unprivileged user of its own (``grader/sandbox.py``), and ``run_autograder`` makes the source
(reference, secret) and the results folder readable by root only, so a worker can read or
forge neither; ``extra_data`` says which protections were on. ``AUTOGRADER_ROOT`` moves the
whole layout (the self-test and the tests run the bundle under a temporary root).

GPU checks are pending on Gradescope (no GPU); grade them in a GPU pass and ``merge``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from coursekit.impl import REPO_ROOT

SOURCES = ("grader", "coursekit", "solutions")
NEVER = (
    "__pycache__",
    "expected.json",
    "notebook.py",
    "nbgrader_bridge.py",
    "release.py",
    "build.py",
    "scaffold.py",
    "BUILD.json",
)
#: What setup.sh installs besides torch, each pinned (``pins``).
PINNED = ("numpy", "hypothesis")
#: Where setup.sh takes torch from unless ``LAUNCH_TAX_PIP_SOURCE`` says otherwise.
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"

SETUP = """#!/usr/bin/env bash
# Gradescope runs this once, as root, from /autograder/source, to build the autograder image.
# The grader needs Python 3.11 or newer (tomllib); Ubuntu 22.04, a Gradescope base image, has
# 3.10 as python3, so an older python3 brings python3.11 from apt. Everything is installed, at
# the versions the bundle was tested with, into a virtual environment of its own
# (world-readable: the workers run as other users), never into the system's Python.
#   LAUNCH_TAX_PIP_SOURCE unset: torch from its CPU index (@TORCH_INDEX@), the rest from
#   pip's index; "pypi": everything from pip's configured index; a folder: only the wheels in
#   it (no index); any other URL: torch from that index.
set -euo pipefail
venv=${LAUNCH_TAX_VENV:-/opt/launch-tax}
apt-get update -qq
apt-get install -y -qq python3 python3-venv util-linux >/dev/null
python=python3
if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  apt-get install -y -qq python3.11 python3.11-venv >/dev/null
  python=python3.11
fi
"$python" -m venv "$venv"
pip=("$venv/bin/python" -m pip install --quiet --disable-pip-version-check)
from=${LAUNCH_TAX_PIP_SOURCE:-@TORCH_INDEX@}
case "$from" in
  pypi) torch_from=(); rest_from=() ;;
  /*) torch_from=(--no-index --find-links "$from"); rest_from=("${torch_from[@]}") ;;
  *) torch_from=(--index-url "$from"); rest_from=() ;;
esac
"${pip[@]}" ${torch_from[@]+"${torch_from[@]}"} "@TORCH@"
"${pip[@]}" ${rest_from[@]+"${rest_from[@]}"} @REST@
chmod -R a+rX "$venv"
"$venv/bin/python" -c 'import torch, numpy, hypothesis, tomllib; print("launch-tax: torch", torch.__version__)'
"""

RUN = """#!/usr/bin/env bash
# Gradescope copies this to /autograder/run_autograder and runs it, as root, for every
# submission; the bundle itself is in /autograder/source. AUTOGRADER_ROOT moves the layout.
set -u
root=${AUTOGRADER_ROOT:-/autograder}
python=${LAUNCH_TAX_PYTHON:-${LAUNCH_TAX_VENV:-/opt/launch-tax}/bin/python}  # what setup.sh made
# Grading ends before Gradescope's own timeout would kill it: results.json is always written.
deadline=${LAUNCH_TAX_DEADLINE:-@DEADLINE@}
source="$root/source"
results="$root/results"
mkdir -p "$results"
# Workers run as other users: the reference, the secret and the results are root's alone.
chmod 700 "$source" "$results"
chmod 600 "$source/grading-secret"
cd "$source"
"$python" -m grader grade "$root/submission" --json "$results/results.json" --gpu off \\
  --secret-file "$source/grading-secret" --deadline "$deadline" --brief
status=$?
if [ "$status" -ne 0 ] || [ ! -s "$results/results.json" ]; then
  cat > "$results/results.json" <<EOF
{"score": 0, "output": "This submission could not be graded: the autograder itself failed (exit status $status). This is not a wrong answer; your instructor will regrade it.", "visibility": "visible", "stdout_visibility": "visible", "extra_data": {"status": "not gradable", "exit_status": $status}, "tests": []}
EOF
fi
exit 0
"""  # noqa: E501 - the fallback results.json is one line of JSON, written as it is


#: Gradescope's default autograder timeout, in minutes (the bundle's default too).
TIMEOUT_MINUTES = 10


def deadline_s(timeout_minutes: float) -> int:
    """How long grading may take in a Gradescope run whose timeout is ``timeout_minutes``:
    that timeout, less what starting Python and writing the results take on Gradescope's
    slowest containers (a minute, or a tenth of a long timeout)."""
    total = 60 * timeout_minutes
    return int(total - max(60.0, total / 10))


def run_script(timeout_minutes: float = TIMEOUT_MINUTES) -> str:
    """``run_autograder`` for a Gradescope timeout of ``timeout_minutes``."""
    return RUN.replace("@DEADLINE@", str(deadline_s(timeout_minutes)))


def pins(torch_spec: str = "==2.13.0") -> dict[str, str]:
    """``{package: requirement}`` setup.sh installs: torch as asked, the others at the version
    installed here (the one this grader was tested with), else the lowest one supported."""
    from importlib.metadata import PackageNotFoundError, version

    floors = {"numpy": ">=1.26", "hypothesis": ">=6.100"}
    out = {"torch": "torch" + torch_spec}
    for name in PINNED:
        try:
            out[name] = f"{name}=={version(name)}"
        except PackageNotFoundError:
            out[name] = name + floors[name]
    return out


def setup_script(torch_spec: str = "==2.13.0") -> str:
    wanted = pins(torch_spec)
    return (
        SETUP.replace("@TORCH_INDEX@", TORCH_CPU_INDEX)
        .replace("@TORCH@", wanted.pop("torch"))
        .replace("@REST@", " ".join(f'"{r}"' for r in wanted.values()))
    )


def bundle(out: Path, secret_path: Path, torch_spec: str = "==2.13.0", timeout_minutes: float = TIMEOUT_MINUTES) -> int:
    """Write the autograder zip to ``out``; return how many files it holds. ``timeout_minutes``:
    the autograder timeout set in Gradescope's settings (Gradescope's default is 10)."""
    from grader.version import build_info

    files: dict[str, tuple[bytes, int]] = {
        "setup.sh": (setup_script(torch_spec).encode(), 0o755),
        "run_autograder": (run_script(timeout_minutes).encode(), 0o755),
        "grading-secret": (Path(secret_path).read_bytes(), 0o600),
    }
    for top in SOURCES:
        for path in sorted((REPO_ROOT / top).rglob("*")):
            rel = path.relative_to(REPO_ROOT)
            if path.is_file() and not any(part in NEVER for part in rel.parts):
                files[rel.as_posix()] = (path.read_bytes(), 0o644)
    contents = hashlib.sha256()
    for name, (data, _) in sorted(files.items()):
        if name != "grading-secret":
            contents.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    info = {
        **build_info(),
        "bundle": contents.hexdigest()[:16],
        "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    files["grader/BUILD.json"] = (json.dumps(info, indent=1).encode() + b"\n", 0o644)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, (data, mode) in files.items():
            member = zipfile.ZipInfo(name)
            member.external_attr = (stat.S_IFREG | mode) << 16
            member.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(member, data)
    return len(files)


def unpack(archive: Path, root: Path) -> None:
    """Lay ``archive`` out under ``root`` as Gradescope's specification says (quoted in this
    module's docstring): its contents extracted into ``root/source/``, and its top-level
    ``run_autograder`` copied to ``root/run_autograder``. A bundle without ``setup.sh`` and
    ``run_autograder`` at the top of the archive is refused, as Gradescope would find neither."""
    source = root / "source"
    with zipfile.ZipFile(archive) as z:
        names = set(z.namelist())
        missing = [n for n in ("setup.sh", "run_autograder") if n not in names]
        if missing:
            raise ValueError(
                f"{archive}: {' and '.join(missing)} must be at the root of the archive "
                "(Gradescope finds them nowhere else)"
            )
        for info in z.infolist():
            target = source / info.filename
            if not target.resolve().is_relative_to(source.resolve()):
                raise ValueError(f"unsafe member {info.filename!r}")
            if info.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(z.read(info))
            target.chmod((info.external_attr >> 16) & 0o777 or 0o644)
    shutil.copy2(source / "run_autograder", root / "run_autograder")


def run(
    root: Path,
    files: dict[str, bytes],
    env: dict[str, str] | None = None,
    python: str | None = None,
    timeout: float = 900,
) -> dict:
    """One Gradescope run of an unpacked bundle: ``files`` as ``root/submission/``, then
    ``root/run_autograder`` (with ``python`` standing in for the environment setup.sh makes);
    returns results.json."""
    submission = root / "submission"
    shutil.rmtree(submission, ignore_errors=True)
    submission.mkdir(parents=True)
    for name, data in files.items():
        (submission / name).parent.mkdir(parents=True, exist_ok=True)
        (submission / name).write_bytes(data)
    shutil.rmtree(root / "results", ignore_errors=True)
    env = {**os.environ, **(env or {}), "AUTOGRADER_ROOT": str(root), "LAUNCH_TAX_PYTHON": python or sys.executable}
    env.pop("LAUNCH_TAX_SECRET_FILE", None)
    done = subprocess.run(
        ["bash", str(root / "run_autograder")], env=env, cwd=root, capture_output=True, text=True, timeout=timeout
    )
    if done.returncode != 0:
        raise RuntimeError(f"run_autograder exited {done.returncode}: {done.stderr[-2000:]}")
    return json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))


def self_test(archive: Path, say=print) -> bool:
    """Grade the reference and the stubs through ``archive`` laid out as on Gradescope: the
    reference must get every CPU point, the stubs none. Returns whether both held."""
    from grader.judge import cpu_points

    base = Path(tempfile.mkdtemp(prefix="launch-tax-gradescope-self-test-"))
    base.chmod(0o755)  # as /autograder: the workers (other users) pass through it
    try:
        root = base / "autograder"
        unpack(archive, root)
        reference = {p.name: p.read_bytes() for p in sorted((root / "source" / "solutions").glob("[a-z]*.py"))}
        stubs = {p.name: p.read_bytes() for p in sorted((REPO_ROOT / "exercises").glob("[a-z]*.py"))}
        want = cpu_points()
        ok = True
        for label, files, expected in (("the reference", reference, want), ("the stubs", stubs, 0.0)):
            start = time.monotonic()
            data = run(root, files)
            got = float(data.get("score", -1))
            held = got == expected and data.get("extra_data", {}).get("mode") == "official"
            ok &= held
            say(
                f"{'ok  ' if held else 'FAIL'} {label}: {got:g} of {want:g} CPU points "
                f"(expected {expected:g}), {data.get('extra_data', {}).get('mode', '?')} grading, "
                f"{time.monotonic() - start:.1f} s"
            )
            if not held:
                say("     " + str(data.get("output", ""))[:1500].replace("\n", "\n     "))
        return ok
    finally:
        shutil.rmtree(base, ignore_errors=True)
