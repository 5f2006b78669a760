"""The grading secret: what makes a check's inputs unknowable until grading time.

Official grading draws every check's inputs from the instructor's secret, mixed with the check's
name and with the submission's own content (``Draw``): the same submission graded twice with the
same secret gets the same inputs and so the same score, while answers recorded from one run (the
release's ``grader/expected.json``, or expected values read in an earlier submission's feedback)
are worthless for any other submission. Without a secret, grading is in *practice mode*: the
release's fixed public inputs, whose recorded answers are shipped for self-checking.

The secret lives in a file (``python -m grader secret new PATH`` writes one, readable only by its
owner) named by ``--secret-file`` or ``LAUNCH_TAX_SECRET_FILE``. It is never released, never
written inside the repository, and never passed to a worker: workers get only drawn inputs, and
under isolation (root) cannot read the judge's files, environment or memory.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import random
import secrets
from dataclasses import dataclass
from pathlib import Path

ENV = "LAUNCH_TAX_SECRET_FILE"
MIN_LENGTH = 16


@dataclass(frozen=True)
class GradingSecret:
    value: bytes
    path: str

    @property
    def id(self) -> str:
        """A short fingerprint for reports: says which secret graded, reveals nothing of it."""
        return hashlib.sha256(b"launch-tax seed id\0" + self.value).hexdigest()[:12]


def load(path: str | None = None) -> GradingSecret | None:
    """The secret named by ``path`` or else by ``$LAUNCH_TAX_SECRET_FILE``; None when neither
    names one (practice mode). ``ValueError`` naming the option for a file that cannot be used."""
    where = "--secret-file"
    if path is None:
        path = os.environ.get(ENV) or None
        where = ENV
    if path is None:
        return None
    try:
        value = Path(path).expanduser().read_bytes().strip()
    except OSError as exc:
        raise ValueError(f"{where}: cannot read the grading secret {path!r} ({exc.strerror})") from None
    if len(value) < MIN_LENGTH:
        raise ValueError(
            f"{where}: the grading secret {path!r} holds {len(value)} bytes; expected "
            f"at least {MIN_LENGTH} (make one with `python -m grader secret new PATH`)"
        )
    return GradingSecret(value, str(path))


def create(path: str | Path, repository: Path) -> GradingSecret:
    """Write a new random secret to ``path`` (mode 0600); never over an existing file, never
    inside ``repository`` (a release or a commit would carry it)."""
    target = Path(path).expanduser().absolute()
    if target.exists() or target.is_symlink():
        raise ValueError(
            f"PATH: {target} exists; a grading secret is made once (delete it first only if no grading used it)"
        )
    if target.resolve().is_relative_to(repository.resolve()):
        raise ValueError(
            f"PATH: {target} is inside the repository; keep the secret outside it "
            "(e.g. ~/.config/launch-tax/grading-secret)"
        )
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(secrets.token_hex(32) + "\n")
    return load(str(target))


class Draw:
    """Where a check's inputs come from: ``rng(name)`` is a ``random.Random`` seeded from the
    secret, the submission's digest (``salt``) and ``name`` (a check's name), or, in practice
    mode, from ``name`` alone."""

    def __init__(self, secret: GradingSecret | None = None, salt: str = ""):
        self.secret, self.salt = secret, salt

    @property
    def official(self) -> bool:
        return self.secret is not None

    def rng(self, name: str) -> random.Random:
        if self.secret is None:
            return random.Random(f"launch-tax practice {name}")
        digest = hmac.new(self.secret.value, f"{self.salt}\0{name}".encode(), hashlib.sha256)
        return random.Random(digest.hexdigest())


PRACTICE = Draw()


def refusal(what: str, practice: str | None = None) -> str:
    """Why ``what`` refuses to run without the grading secret, and how to give it one."""
    text = (
        f"{what} grades officially and needs the grading secret: make it once with `python -m "
        "grader secret new ~/.config/launch-tax/grading-secret`, then pass --secret-file PATH "
        "(or set LAUNCH_TAX_SECRET_FILE)"
    )
    return text + (
        f"; {practice} grades with the public practice inputs instead (not an official grade)" if practice else ""
    )


def digest(submission) -> str:
    """A submission's content (``Submission.files``), as the salt of its drawn inputs."""
    h = hashlib.sha256()
    for name, data in sorted(submission.files.items()):
        h.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    return h.hexdigest()
