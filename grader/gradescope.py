"""``python -m grader gradescope OUT.zip``: the autograder bundle to upload to Gradescope.

Gradescope builds one image from the bundle (``setup.sh``), then for every submission copies the
student's files to ``/autograder/submission/``, runs ``/autograder/run_autograder`` as root and
shows ``/autograder/results/results.json``. The bundle holds:

* ``setup.sh``: installs exactly what grading needs into a virtual environment of its own,
  ``/opt/launch-tax`` (Python 3.11 or newer, from apt where the image's ``python3`` is older; a
  CPU build of torch, numpy, hypothesis), and util-linux's ``setpriv``/``prlimit``/``unshare``;
* ``run_autograder``: grades ``submission/`` (module files, a notebook, or one zip of either)
  with the grading secret and writes ``results/results.json``; if grading itself fails, it
  still writes a results.json that says so (a fault of the grader is not a wrong answer);
* ``source/``: the grader, the course's support package, the reference and the grading secret.

Gradescope's containers may not allow namespaces. The judge then runs each worker as an
unprivileged user of its own (``grader/sandbox.py``), and ``run_autograder`` makes the source
(reference, secret) and the results folder readable by root only, so a worker cannot read or
forge them; the report's ``extra_data`` says which protections were on. ``AUTOGRADER_ROOT``
moves the whole layout (the tests run the bundle in a temporary folder laid out like
Gradescope's).

GPU checks are pending on Gradescope (no GPU); grade them in a GPU pass and ``merge``.
"""

from __future__ import annotations

import stat
import zipfile
from pathlib import Path

from coursekit.impl import REPO_ROOT

SOURCES = ("grader", "coursekit", "solutions")
NEVER = ("__pycache__", "expected.json", "notebook.py", "nbgrader_bridge.py", "release.py")

SETUP = """#!/usr/bin/env bash
# Gradescope runs this once, as root, to build the autograder image. The grader needs Python 3.11
# or newer (tomllib); Ubuntu 22.04, a Gradescope base image, has 3.10 as python3, so an older
# python3 brings python3.11 from apt. Everything is installed into a virtual environment of its
# own (world-readable: the workers run as other users), never into the system's Python.
set -euo pipefail
venv=${{LAUNCH_TAX_VENV:-/opt/launch-tax}}
apt-get update -qq
apt-get install -y -qq python3 python3-venv util-linux >/dev/null
python=python3
if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  apt-get install -y -qq python3.11 python3.11-venv >/dev/null
  python=python3.11
fi
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --index-url https://download.pytorch.org/whl/cpu "torch{torch}"
"$venv/bin/python" -m pip install --quiet numpy "hypothesis>=6.100"
chmod -R a+rX "$venv"
"$venv/bin/python" -c 'import torch, numpy, hypothesis, tomllib'
"""

RUN = """#!/usr/bin/env bash
# Gradescope runs this for every submission, as root. AUTOGRADER_ROOT moves the layout (tests).
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
"""


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


def bundle(out: Path, secret_path: Path, torch_spec: str = "==2.13.0",
           timeout_minutes: float = TIMEOUT_MINUTES) -> int:
    """Write the autograder zip to ``out``; return how many files it holds. ``timeout_minutes``:
    the autograder timeout set in Gradescope's settings (Gradescope's default is 10)."""
    secret = Path(secret_path).read_bytes()
    written = 0
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        def add(name: str, data: bytes, mode: int = 0o644) -> None:
            nonlocal written
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFREG | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
            written += 1

        add("setup.sh", SETUP.format(torch=torch_spec).encode(), 0o755)
        add("run_autograder", run_script(timeout_minutes).encode(), 0o755)
        add("source/grading-secret", secret, 0o600)
        for top in SOURCES:
            for path in sorted((REPO_ROOT / top).rglob("*")):
                rel = path.relative_to(REPO_ROOT)
                if path.is_file() and not any(part in NEVER for part in rel.parts):
                    add(f"source/{rel.as_posix()}", path.read_bytes())
    return written


def unpack(archive: Path, root: Path) -> None:
    """Lay ``archive`` out as Gradescope does (``root/source``, ``root/run_autograder``...)."""
    with zipfile.ZipFile(archive) as z:
        for info in z.infolist():
            target = root / info.filename
            if not target.resolve().is_relative_to(root.resolve()):
                raise ValueError(f"unsafe member {info.filename!r}")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(z.read(info))
            target.chmod((info.external_attr >> 16) & 0o777 or 0o644)
