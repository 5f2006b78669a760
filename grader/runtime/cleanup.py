"""What a worker's uid may leave behind, removed. Both sides of the sandbox use it: the judge's
``isolation.release_uid`` after a worker ends (as root, without namespaces), and the shared
worker's ``_fresh_state`` before each exercise's child (``worker.py``). Standard library only, and
nothing else of the grader: it runs inside the worker too.

Worker uids are ``WORKER_UID_BASE + slot`` (no account needed); a uid at or above it is a leased
worker uid, alone with what it owns.
"""

from __future__ import annotations

import os
import shutil

WORKER_UID_BASE = 61000


def clear(folder: str) -> None:
    """Empty ``folder`` (a worker's writable folder between exercises: what one left is not the
    next's)."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        _remove(entry)


def _remove(entry: os.DirEntry) -> None:
    """A folder, whole, or anything else; what cannot be removed is left."""
    if entry.is_dir(follow_symlinks=False):
        shutil.rmtree(entry.path, ignore_errors=True)
    else:
        try:
            os.unlink(entry.path)
        except OSError:
            pass


def remove_owned(folder: str, uid: int, depth: int, keep: str = "") -> int:
    """Remove what ``uid`` owns under ``folder`` (``depth`` levels; a folder it owns, whole),
    except ``keep`` (the worker's own box) and what lies in it. Returns how many entries went."""
    count = 0
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return 0
    for entry in entries:
        if keep and (entry.path == keep or keep.startswith(entry.path.rstrip("/") + "/")):
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if info.st_uid == uid:
            count += 1
            _remove(entry)
        elif depth > 1 and entry.is_dir(follow_symlinks=False):
            count += remove_owned(entry.path, uid, depth - 1, keep)
    return count


def remove_ipc(uid: int) -> int:
    """Remove the System V shared memory segments, semaphore sets and message queues ``uid`` owns
    (they outlive the process that made them; root may remove any). Returns how many went."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return 0
    count = 0
    for kind, remove in (
        ("shm", lambda i: libc.shmctl(i, 0, None)),
        ("sem", lambda i: libc.semctl(i, 0, 0)),
        ("msg", lambda i: libc.msgctl(i, 0, None)),
    ):  # 0: IPC_RMID
        try:
            with open(f"/proc/sysvipc/{kind}", encoding="ascii") as f:
                header = f.readline().split()
                rows = [line.split() for line in f if line.strip()]
            ident = header.index({"shm": "shmid", "sem": "semid", "msg": "msqid"}[kind])
            owner = header.index("uid")
        except (OSError, ValueError):
            continue
        for row in rows:
            if int(row[owner]) == uid and remove(int(row[ident])) == 0:
                count += 1
    return count


def remove_left(uid: int, places: list[str], keep: str = "") -> list[str]:
    """What ``uid`` left in ``places`` (three folders deep, ``keep`` and what lies in it aside) and
    in System V IPC, removed; says what was found, for the report."""
    found = []
    for place in places:
        removed = remove_owned(place, uid, 3, keep)
        if removed:
            found.append(f"{removed} file(s) left in {place}")
    removed = remove_ipc(uid)
    if removed:
        found.append(f"{removed} System V IPC object(s) left")
    return found
