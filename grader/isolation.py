"""How a worker is kept apart from the machine: three strategies with one interface, the first
this machine allows is used (``current()``).

* ``Namespaces`` (the judge runs as root with ``unshare`` and ``setpriv``, util-linux, and the
  kernel lets it make namespaces: a grading server, CI):

  - a PID namespace: when the worker dies, the kernel kills everything it started, double-forked
    daemons included;
  - a network namespace with no interfaces up: no network;
  - an IPC namespace: System V shared memory, semaphores and message queues made by one worker are
    invisible to every other and vanish with it (they would otherwise outlive the worker, and the
    address-space limit and the memory watchdog, on the host);
  - a mount namespace in which the repository (solutions, hidden checks, rubric) and every other
    path the judge names are covered by empty, unreadable tmpfs; so is every top-level folder but
    the system's (``/root``, ``/home``, ``/tmp``, ``/var``, ``/opt``, a ``/work`` holding another
    checkout...: copies of the repository, other boxes), except the worker's own box and the
    Python installation it needs (also when that Python is a virtual environment inside the
    repository); the root filesystem is read-only; only the worker's ``work/`` folder (a tmpfs of
    ``Limits.work_bytes``) and its own empty ``/dev/shm`` are writable;
  - its own unprivileged user id, leased for the run so that no other worker on the machine (of
    this judge or another one) shares it and its process cap; no capabilities, ``no_new_privs``.

  A worker that leaves the process group (``setsid``) and forgets its environment is still ended:
  the judge kills the PID namespace's first process by its id, which ends the whole namespace.

* ``SeparateUser`` (root where namespaces cannot be made: a container without CAP_SYS_ADMIN, as
  on Gradescope; or ``LAUNCH_TAX_SANDBOX=user``): the worker still runs as its own unprivileged
  uid without capabilities (``setpriv``), so it cannot read what only root may read (the grading
  secret, the reference, the results file, when their owner keeps them mode 700); the uid is
  handed to the next worker only once it owns no process and no file in the machine's
  world-writable folders (``release_uid``).

* ``Unisolated`` (not root): the worker is the user; those protections are off, and the report
  and the doctor say so.

``PROTECTIONS`` names what a worker can be given; each strategy lists what it gives, and the
doctor, the report and the README's table (``protection_table``) all read those lists.
"""

from __future__ import annotations

import os
import shutil
import signal
import site
import stat
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from grader import procfs
from grader.runtime import cleanup

WORKER_UID_BASE = cleanup.WORKER_UID_BASE  # worker uids: WORKER_UID_BASE + slot; no account needed

#: Everything a worker can be protected by, in the order the report lists them.
TIMEOUT, RLIMITS, CAPS = "timeout and process-group kill", "resource limits", "output and result caps"
PID_NAMESPACE, NO_NETWORK = "daemon sweep (PID namespace)", "no network"
HIDDEN, READ_ONLY = "repository hidden", "read-only filesystem"
OWN_USER, PRIVATE_IPC = "separate unprivileged user", "private IPC (System V, POSIX queues)"
PROTECTIONS = (TIMEOUT, RLIMITS, CAPS, PID_NAMESPACE, NO_NETWORK, HIDDEN, READ_ONLY, OWN_USER, PRIVATE_IPC)
#: What every strategy gives (resource limits: wherever ``prlimit`` is installed).
ALWAYS = (TIMEOUT, RLIMITS, CAPS)


@dataclass
class Launch:
    """How one worker is started: the command before ``prlimit``, its environment, its uid (None:
    the judge's own) and the descriptor that holds the uid's lease (None: no lease)."""

    command: list[str]
    env: dict[str, str]
    nproc: int
    uid: int | None = None
    lease: int | None = None


class Isolation:
    """One way of keeping a worker apart. ``name`` is what the report's fingerprint says,
    ``when`` when this strategy is the one used, ``gives`` which ``PROTECTIONS`` it adds to
    ``ALWAYS``."""

    name = ""
    when = ""
    gives: tuple[str, ...] = ()
    complete = False  # every protection on: others' code may be graded under it (grade-all, notebooks)

    @classmethod
    def available(cls) -> bool:
        raise NotImplementedError

    def launch(
        self, box: Path, env: dict[str, str], processes: int, work_bytes: int, hide: tuple[Path, ...], slot: int
    ) -> Launch:
        raise NotImplementedError

    def release(self, uid: int | None, box: Path) -> list[str]:
        """After the worker: what its uid left behind (for the report), the uid made clean."""
        return []

    def shared_places(self) -> list[str]:
        """Where a worker could leave something for a later worker to find."""
        return []

    def finish(self, launch: Launch, box: Path) -> list[str]:
        """The worker is gone: release its uid, then hand the lease on, unless a process of the
        uid would not die (nobody gets the uid then)."""
        leftovers = self.release(launch.uid, box)
        if launch.lease is not None and not any("would not die" in x for x in leftovers):
            os.close(launch.lease)  # the uid owns no process and no file: another worker may have it
        return leftovers

    def protections(self) -> dict[str, bool]:
        return {p: (p in self.gives or p in ALWAYS) and (p != RLIMITS or has_prlimit()) for p in PROTECTIONS}


class Namespaces(Isolation):
    name = "namespaces"
    when = "root, with unshare and setpriv, where the kernel lets namespaces be made"
    gives = (PID_NAMESPACE, NO_NETWORK, HIDDEN, READ_ONLY, OWN_USER, PRIVATE_IPC)
    complete = True

    _works: bool | None = None
    _lock = threading.Lock()

    @classmethod
    def available(cls) -> bool:
        """Tried once, then remembered. Workers start from several threads: none may see an
        answer before the trial is over."""
        with cls._lock:
            if cls._works is None:
                works = False
                if _root() and shutil.which("unshare") and shutil.which("setpriv"):
                    try:
                        trial = subprocess.run(
                            ["unshare", "--mount", "--net", "--pid", "--ipc", "--fork", "true"],
                            capture_output=True,
                            timeout=30,
                        )
                        works = trial.returncode == 0
                    except (OSError, subprocess.TimeoutExpired):
                        pass
                cls._works = works and os.environ.get("LAUNCH_TAX_SANDBOX") != "user"
            return cls._works

    def launch(self, box, env, processes, work_bytes, hide, slot):
        covered = _covered(box)
        hidden = [str(Path(p).resolve()) for p in hide]
        park = _python_dirs(covered + hidden)
        traverse = [h for h in hidden if any(_under(d, h) for d in park)]
        env = {
            **env,
            "PARK": " ".join(park),
            "COVER": " ".join(covered),
            "HIDE": " ".join(hidden),
            "TRAVERSE": " ".join(traverse),
            "WORK_BYTES": str(work_bytes),
        }
        uid, lease = _lease_uid(slot)
        unshare = "unshare --mount --net --pid --ipc --fork --kill-child --mount-proc".split()
        command = [*unshare, "sh", "-c", _ENTER, "enter", str(box), str(uid)]
        return Launch(command, env, processes, uid, lease)  # nproc: the worker's own uid, its tasks only

    def shared_places(self) -> list[str]:
        return ["/dev/shm"]  # its own; the rest of its file system is read-only or private


class SeparateUser(Isolation):
    name = "separate user only"
    when = "root without namespaces (a container without CAP_SYS_ADMIN, as on Gradescope), or LAUNCH_TAX_SANDBOX=user"
    gives = (OWN_USER,)

    @classmethod
    def available(cls) -> bool:
        return _root() and shutil.which("setpriv") is not None

    def launch(self, box, env, processes, work_bytes, hide, slot):
        uid, lease = _lease_uid(slot)
        os.chown(box / "work", uid, uid)
        os.chmod(box / "work", 0o700)
        drop = "--clear-groups --no-new-privs --bounding-set=-all --inh-caps=-all".split()
        command = ["setpriv", f"--reuid={uid}", f"--regid={uid}", *drop]
        return Launch(command, env, processes, uid, lease)

    def release(self, uid, box):
        return release_uid(uid, box) if uid is not None else []

    def shared_places(self) -> list[str]:
        return _world_writable()


class Unisolated(Isolation):
    name = "none"
    when = "not root (or root without setpriv)"

    @classmethod
    def available(cls) -> bool:
        return True

    def launch(self, box, env, processes, work_bytes, hide, slot):
        os.chmod(box / "work", 0o777)  # the report lists the protections that are off
        # RLIMIT_NPROC counts every task of the uid, the judge's and the desktop's included.
        return Launch([], env, procfs.tasks_of(os.getuid()) + 4 * processes)


STRATEGIES: tuple[type[Isolation], ...] = (Namespaces, SeparateUser, Unisolated)


def current() -> Isolation:
    """The strongest strategy this machine allows."""
    return next(s for s in STRATEGIES if s.available())()


def protections() -> dict[str, bool]:
    """Which protections a worker gets on this machine (for the report). The keyring filter is
    the worker's own: the judge's canary worker says whether it could be installed."""
    return current().protections()


def protection_table() -> str:
    """The README's table: what each strategy gives, and when it is the one used."""
    rows = ["| protection | " + " | ".join(s.name for s in STRATEGIES) + " |", "|---|" + "---|" * len(STRATEGIES)]
    for p in PROTECTIONS:
        marks = ["yes" if p in ALWAYS or p in s.gives else "no" for s in STRATEGIES]
        rows.append(f"| {p}{' (where `prlimit` is installed)' if p == RLIMITS else ''} | " + " | ".join(marks) + " |")
    rows.append("| used when | " + " | ".join(s.when for s in STRATEGIES) + " |")
    return "\n".join(rows)


def has_prlimit() -> bool:
    return shutil.which("prlimit") is not None


def _root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


_ENTER = r"""
set -eu
box=$1; uid=$2; shift 2
mount --make-rprivate /
# Park the box and the Python folders that live under a folder about to be covered or hidden on a
# private tmpfs; cover the top-level folders (/root, /tmp, ...) with empty tmpfs and hide the
# judge's folders (the repository...) under unreadable ones; bring the parked folders back.
mount -t tmpfs -o mode=700,size=1m tmpfs /dev/shm
i=0
for dir in "$box" $PARK; do
  mkdir -p "/dev/shm/$i" && mount --bind "$dir" "/dev/shm/$i"; i=$((i + 1))
done
for dir in $COVER; do
  if [ -d "$dir" ]; then mount -t tmpfs -o mode=755,size=1m tmpfs "$dir"; fi
done
for dir in $HIDE; do
  if [ -e "$dir" ]; then mount -t tmpfs -o mode=000,size=64k tmpfs "$dir"; fi
done
for dir in $TRAVERSE; do  # a hidden folder the worker's Python lies in: passable, not listable
  if [ -d "$dir" ]; then chmod 711 "$dir"; fi
done
i=0
for dir in "$box" $PARK; do
  mkdir -p "$dir" && mount --move "/dev/shm/$i" "$dir"; i=$((i + 1))
done
mount -t tmpfs -o "mode=700,size=$WORK_BYTES" tmpfs "$box/work"
chown "$uid:$uid" "$box/work"
umount /dev/shm
mount -t tmpfs -o mode=1777,size=64m tmpfs /dev/shm
if [ -d /dev/mqueue ]; then mount -t tmpfs -o ro,size=4k tmpfs /dev/mqueue; fi
mount -o remount,bind,ro "$box"
mount -o remount,bind,ro /
cd "$box/work"
unset PARK COVER HIDE TRAVERSE WORK_BYTES OLDPWD
exec setpriv --reuid="$uid" --regid="$uid" --clear-groups --no-new-privs \
  --bounding-set=-all --inh-caps=-all "$@"
"""

#: Top-level folders a worker keeps (the system: programs, libraries, configuration, devices).
#: Every other one (/root, /home, /tmp, /var, /run, /opt, /srv, /mnt, a /work holding another
#: checkout...) is covered with an empty tmpfs, except the worker's box and its Python.
SYSTEM = {"usr", "etc", "dev", "proc", "sys", "bin", "sbin", "lib", "lib32", "lib64", "libx32"}


def _top_level_folders() -> list[str]:
    folders = []
    for entry in os.scandir("/"):
        if entry.name not in SYSTEM and entry.is_dir(follow_symlinks=False):
            folders.append(entry.path)
    return folders


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _covered(box: Path) -> list[str]:
    parent = os.path.realpath(box.parent)
    dirs = _top_level_folders() + ([parent] if parent != "/" else [])
    return sorted({d for d in dirs if not any(d != c and _under(d, c) for c in dirs)}, key=len)


def _python_dirs(hidden: list[str]) -> list[str]:
    """The folders of the worker's Python (interpreter, stdlib, packages) that lie under a covered
    or hidden folder: the top folder under /root (as ``/root/.pyenv``), else the folder itself
    (a virtual environment inside the repository: ``<repo>/.venv``)."""
    needed = {
        sys.base_prefix,
        sys.prefix,
        *site.getsitepackages(),
        os.path.dirname(sys.executable),
        os.path.dirname(os.path.realpath(sys.executable)),
    }
    dirs = set()
    for path in needed:
        real = os.path.realpath(path)
        if real.startswith("/root/"):
            dirs.add("/root/" + real.split("/")[2])
        elif any(_under(real, c) for c in hidden):
            dirs.add(real)
    return sorted(d for d in dirs if not any(d != o and _under(d, o) for o in dirs))


#: Where the judges on this machine lease worker uids (root only: workers change uid only then).
UID_LEASES = Path("/run/launch-tax-worker-uids")
UID_RANGE = 1024


def _lease_uid(slot: int) -> tuple[int, int | None]:
    """A worker uid held by no other worker on this machine, of this judge or another (their
    slots overlap): ``WORKER_UID_BASE + slot`` or the next free one, locked (``flock``) until the
    returned descriptor is closed. Where no lease can be taken (no usable ``/run``), the slot's
    uid, unlocked, as before leases existed."""
    import fcntl  # POSIX only; leases are taken only as root on Linux

    try:
        UID_LEASES.mkdir(mode=0o700, exist_ok=True)
        info = os.lstat(UID_LEASES)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != 0 or info.st_mode & 0o077:
            raise PermissionError(f"{UID_LEASES} must be a folder only root can use")
        for k in range(UID_RANGE):
            uid = WORKER_UID_BASE + (slot + k) % UID_RANGE
            fd = os.open(UID_LEASES / str(uid), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return uid, fd
            except OSError:
                os.close(fd)
    except OSError:
        pass
    return WORKER_UID_BASE + slot, None


_PLACES: list[str] | None = None
_PLACES_LOCK = threading.Lock()
#: Pseudo file systems: nothing a worker writes lives there.
_NOT_PLACES = ("/proc", "/sys")


def _world_writable() -> list[str]:
    """Every world-writable folder of the machine (``/tmp``, ``/var/tmp``, ``/dev/shm``,
    ``/run/lock``...): where a worker's uid without namespaces (Gradescope) could leave something
    for a later worker to find; found once per run by walking the file system."""
    global _PLACES
    with _PLACES_LOCK:
        if _PLACES is None:
            found = []
            for top, dirs, _ in os.walk("/", topdown=True, onerror=lambda e: None):
                if top == "/":
                    dirs[:] = [d for d in dirs if "/" + d not in _NOT_PLACES]
                kept = []
                for d in dirs:
                    path = os.path.join(top, d)
                    try:
                        info = os.lstat(path)
                    except OSError:
                        continue
                    if stat.S_ISDIR(info.st_mode) and info.st_mode & 0o002:
                        found.append(path)  # removed from inside; no need to walk it
                    elif stat.S_ISDIR(info.st_mode):
                        kept.append(d)
                dirs[:] = kept
            _PLACES = sorted(found)
        return list(_PLACES)


def release_uid(uid: int, box: Path | None = None) -> list[str]:
    """Make ``uid`` free for the next worker, as root, without namespaces (with them the PID,
    mount and IPC namespaces end with the worker): kill every process of the uid, whatever it did
    to its process group and environment (``kill(-1)`` as that uid, until none is left), then
    remove what it owns in the shared places and its System V IPC objects. Returns what was found
    (for the report); processes that would not die are named, and the caller keeps the uid's
    lease (nobody gets it) instead of handing it on."""
    found: list[str] = []
    for attempt in range(50):
        alive = procfs.pids_of(uid)
        if not alive:
            break
        if attempt == 0:
            found.append(f"{len(alive)} process(es) outlived the worker")
        pid = os.fork()
        if pid == 0:  # as the uid itself: kill(-1) reaches exactly its processes
            try:
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)
                os.kill(-1, signal.SIGKILL)
            except BaseException:  # noqa: BLE001 - a forked child: whatever happened, it only exits
                pass
            os._exit(0)
        os.waitpid(pid, 0)
        time.sleep(0.02)
    else:
        found.append(f"processes of uid {uid} would not die: {procfs.pids_of(uid)[:10]}")
    return found + cleanup.remove_left(uid, _world_writable(), str(box) if box else "")
