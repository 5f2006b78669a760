"""What the judge reads of ``/proc`` about a worker's processes: who they are, how much memory
they hold, and killing what outlived a worker. Standard library only. Where there is no ``/proc``
every scan finds nothing (the sweeps then have nothing to do)."""

from __future__ import annotations

import os
import signal
import time


def processes():
    """The entries of /proc (none where there is no /proc)."""
    return os.scandir("/proc") if os.path.isdir("/proc") else iter(())


def _pid_entries():
    return (entry for entry in processes() if entry.name.isdigit())


def tasks_of(uid: int) -> int:
    """Tasks (processes and threads) of ``uid`` right now."""
    count = 0
    for entry in _pid_entries():
        try:
            if os.stat(f"/proc/{entry.name}").st_uid == uid:
                count += len(os.listdir(f"/proc/{entry.name}/task"))
        except OSError:
            continue
    return count


def resident_bytes(uid: int | None, marker: str) -> int:
    """Memory of the worker's processes (those of its own uid as root, else those carrying its
    box marker), each counted by its proportional share (Pss) so that forked children sharing
    their parent's pages are not counted many times over."""
    total, needle = 0, f"LAUNCH_TAX_BOX={marker}".encode()
    for entry in _pid_entries():
        try:
            with open(f"/proc/{entry.name}/status", "rb") as f:
                status = f.read()
            if uid is not None:
                line = status.split(b"\nUid:", 1)[1].split(b"\n", 1)[0].split()
                if int(line[0]) != uid:
                    continue
            else:
                with open(f"/proc/{entry.name}/environ", "rb") as f:
                    if needle not in f.read().split(b"\0"):
                        continue
            with open(f"/proc/{entry.name}/smaps_rollup", "rb") as f:
                rollup = f.read()
            pss = rollup.split(b"\nPss:", 1)[1].split()[0] if b"\nPss:" in rollup else b"0"
            total += int(pss) * 1024
        except (OSError, IndexError, ValueError):
            continue
    return total


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid``."""
    found = []
    for entry in _pid_entries():
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 1 and fields[1] == str(pid).encode():
            found.append(int(entry.name))
    return found


def process_start(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks since boot, ``/proc/PID/stat``), None when there
    is none: with its pid, what tells a process from a later one that got the same pid."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return int(fields[19])  # field 22 of the whole line: starttime
    except (OSError, IndexError, ValueError):
        return None


def worker_pids(root_pid: int, uid: int | None) -> set[int]:
    """The worker's processes as the host sees them: ``root_pid``'s descendants, and where the
    worker has a uid of its own, every process of that uid."""
    parents: dict[int, int] = {}
    owned: set[int] = set()
    for entry in _pid_entries():
        try:
            with open(f"/proc/{entry.name}/status", "rb") as f:
                status = f.read()
            ppid = int(status.split(b"\nPPid:", 1)[1].split()[0])
            parents[int(entry.name)] = ppid
            if uid is not None and int(status.split(b"\nUid:", 1)[1].split()[0]) == uid:
                owned.add(int(entry.name))
        except (OSError, IndexError, ValueError):
            continue
    found, changed = {root_pid}, True
    while changed:
        changed = False
        for pid, ppid in parents.items():
            if ppid in found and pid not in found:
                found.add(pid)
                changed = True
    return found | owned


def pids_of(uid: int) -> list[int]:
    """Processes any of whose uids (real, effective, saved, file system) is ``uid``."""
    pids = []
    for entry in _pid_entries():
        try:
            with open(f"/proc/{entry.name}/status", "rb") as f:
                line = f.read().split(b"\nUid:", 1)[1].split(b"\n", 1)[0]
            if uid in {int(x) for x in line.split()}:
                pids.append(int(entry.name))
        except (OSError, IndexError, ValueError):
            continue
    return pids


def sweep(marker: str) -> None:
    """Kill any process still carrying this box's marker in its environment (a daemon that left
    the process group; in a PID namespace the kernel has already done this)."""
    needle = f"LAUNCH_TAX_BOX={marker}".encode()
    for _ in range(3):
        found = False
        for entry in _pid_entries():
            if int(entry.name) == os.getpid():
                continue
            try:
                with open(f"/proc/{entry.name}/environ", "rb") as f:
                    if needle in f.read().split(b"\0"):
                        os.kill(int(entry.name), signal.SIGKILL)
                        found = True
            except (OSError, ValueError):
                continue
        if not found:
            return
        time.sleep(0.05)
