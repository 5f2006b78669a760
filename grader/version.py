"""Which grader graded: its version, its commit (``+changes`` when built from uncommitted work)
and, for a Gradescope bundle, the bundle's digest. Every result names it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from coursekit.impl import REPO_ROOT

BUILD = Path(__file__).resolve().parent / "BUILD.json"  # written into a bundle or a release: what it was built from
_VERSION: list[str] = []


def build_info() -> dict:
    """``{"grader": version, "commit": ..., "changes": bool}`` of this checkout (git), or what a
    bundle's or a release's ``grader/BUILD.json`` recorded when it was built (no git there)."""
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
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=10
        )
        if commit.returncode == 0 and commit.stdout.strip():
            dirty = subprocess.run(
                ["git", "status", "--porcelain", "--untracked-files=no"],
                cwd=REPO_ROOT,
                capture_output=True,
                text=True,
                timeout=10,
            )
            info.update(commit=commit.stdout.strip(), changes=bool(dirty.stdout.strip()))
    except (OSError, subprocess.TimeoutExpired):
        pass
    return info


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
