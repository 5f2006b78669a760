"""Which grader graded: its version, its commit (``+changes`` when built from uncommitted work)
and, for a Gradescope bundle, the bundle's digest. Every result names it."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from coursekit.impl import REPO_ROOT

BUILD = Path(__file__).resolve().parent / "BUILD.json"  # written into a bundle or a release: what it was built from
#: Only the staff repository has it (a release and a Gradescope bundle leave the staff tools
#: out): without it the files are a built copy, whose commit is its BUILD.json's, never that of a
#: repository it was put in.
STAFF_ONLY = Path(__file__).resolve().parent / "release.py"
_VERSION: list[str] = []


def build_info() -> dict:
    """``{"grader": version, "commit": ..., "changes": bool}`` of this checkout (git), or what a
    bundle's or a release's ``grader/BUILD.json`` recorded when it was built (read first: a
    student's own repository around a release, or the release's folder made a repository, is
    not what built the grader).

    Only the repository whose top level is the project's root is this checkout's: a copy of the
    project inside another repository (a class repository, a monorepo) would report that one's
    commit. There, with no git or no commit, ``commit`` is ``"unknown"`` and ``changes`` False:
    nothing is known to have changed, and ``grader_version`` would print any true value as
    ``+changes``."""
    if BUILD.is_file():
        try:
            data = json.loads(BUILD.read_text(encoding="utf-8"))
            if isinstance(data, dict):
                return data
        except ValueError:
            pass
    try:
        from importlib.metadata import version

        text = version("launch-tax")
    except Exception:  # noqa: BLE001 - not installed: used in place
        text = "0.1.0"
    info: dict = {"grader": text, "commit": "unknown", "changes": False}
    commit = _own_commit()
    if commit is not None:
        info.update(commit=commit[0], changes=commit[1])
    return info


#: What tells git which repository to read instead of the one around its working folder (a hook,
#: or a caller's shell, may set them): left out, so that git finds the repository by the folder.
_GIT_LOCATION = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
)


def _git(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in _GIT_LOCATION}
    return subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=10, env=env)


def _own_commit() -> tuple[str, bool] | None:
    """``(commit, changes)`` of the git repository whose top level is this project's root, or
    None: no git, not a repository, a repository around the project (a class repository or a
    monorepo that holds a copy of it, a student repository that vendors the grader), whose
    commit and changes say nothing about this grader's files, or a built copy (a release)."""
    if not STAFF_ONLY.is_file():
        return None  # a release or a bundle that lost its BUILD.json: the student's git is not the grader's
    try:
        top = _git("rev-parse", "--show-toplevel")
        if top.returncode != 0 or not top.stdout.strip() or not _same_folder(top.stdout.strip(), REPO_ROOT):
            return None
        commit = _git("rev-parse", "--short=12", "HEAD")
        if commit.returncode != 0 or not commit.stdout.strip():
            return None  # a repository with no commit yet
        dirty = _git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.TimeoutExpired):
        return None
    return commit.stdout.strip(), bool(dirty.stdout.strip())


def _same_folder(a: str, b: Path) -> bool:
    try:
        return Path(a).resolve() == b.resolve() or os.path.samefile(a, b)
    except OSError:
        return False


def grader_version() -> str:
    """The grader's version, its commit (``+changes`` when built from uncommitted work) and, for
    a Gradescope bundle, the bundle's digest: what every result names."""
    if not _VERSION:
        info = build_info()
        text = f"{info.get('grader', '?')} ({info.get('commit', 'unknown')}"
        text += "+changes" if info.get("changes") else ""
        text += f", bundle {info['bundle']}" if info.get("bundle") else ""
        _VERSION.append(text + ")")
    return _VERSION[0]


def fingerprint(gpu: bool, gpu_only: bool, secret, rubric: str, protections_off: list[str]) -> dict:
    """What graded, for every result: the grader and its rubric, torch, CUDA and the GPU, the
    mode (official with a grading secret's id, or practice), the isolation and the protections
    that were off, and which pass."""
    import torch

    from grader import isolation

    info = build_info()
    return {
        "grader": grader_version(),
        "commit": info.get("commit", "unknown"),
        "bundle": info.get("bundle", "none"),
        "rubric": rubric,
        "torch": torch.__version__,
        "cuda": torch.version.cuda or "none",
        "gpu": torch.cuda.get_device_name() if gpu else "none",
        "mode": "official" if secret else "practice",
        "seed_id": secret.id if secret else "practice",
        "isolation": isolation.current().name,
        "protections_off": protections_off,
        "pass": "gpu" if gpu_only else ("cpu+gpu" if gpu else "cpu"),
    }
