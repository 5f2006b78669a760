"""grader/sandbox.py on its own: limits the adversarial corpus cannot reach safely."""

import os

import pytest

from grader import devices, isolation, nvidia_smi, procfs, sandbox
from grader.runtime import wire
from grader.workers import runtime_files
from tests.harness import fake_nvidia_smi

HOG = b"""
import time
hoard = []
for _ in range(40):
    hoard.append(bytearray(50 << 20))   # 2 GiB in all, touched
    time.sleep(0.02)
time.sleep(30)
"""

ENVIRONMENT = b"""
import os
raise ImportError("ENV " + repr(sorted(os.environ.items())))
"""


def run_module(source: bytes, limits: sandbox.Limits, gpu: bool = False, repeat: int = 1) -> sandbox.Run:
    files = {"submission/__init__.py": b"", "submission/launch_model.py": source}
    box = sandbox.make_box(runtime_files(), files)
    request = {
        "package": "submission",
        "module": "launch_model",
        "submission_dir": str(box / "submission"),
        "probes": [],
    }
    try:
        return sandbox.run(box, limits, [wire.dumps(request).encode()] * repeat, gpu=gpu)
    finally:
        sandbox.remove_box(box)


def test_total_memory_is_watched_even_without_an_address_space_limit():
    # gpu=True: no RLIMIT_AS (CUDA needs the address space), so only the watchdog can stop it.
    run = run_module(HOG, sandbox.Limits(timeout_s=30, total_rss_bytes=512 << 20), gpu=True)
    assert run.out_of_memory and run.failure() == "used more memory than allowed", run
    assert run.wall_s < 20, run.wall_s


def test_a_quiet_worker_answers_each_request_in_turn():
    run = run_module(b"X = 1\n", sandbox.Limits(timeout_s=30), repeat=3)
    assert run.failure() is None and [wire.loads(a) for a in run.answers] == [{"probes": []}] * 3, run


@pytest.mark.skipif(not isolation.Namespaces.available(), reason="the set-up environment exists only as root")
def test_the_worker_environment_holds_only_what_it_needs():
    run = run_module(ENVIRONMENT, sandbox.Limits(timeout_s=30))
    message = wire.loads(run.answers[0])["import_error"]["message"]
    names = {name for name, _ in eval(message.removeprefix("ENV "))}  # noqa: S307 - our own output
    assert names <= {
        "PATH",
        "LANG",
        "OMP_NUM_THREADS",
        "MKL_NUM_THREADS",
        "PYTHONHASHSEED",
        "LAUNCH_TAX_BOX",
        "HOME",
        "TMPDIR",
        "USER",
        "LOGNAME",
        "CUDA_VISIBLE_DEVICES",
        "TORCHINDUCTOR_COMPILE_THREADS",
        "PWD",
        "SHLVL",
        "_",
    }, names
    from coursekit.impl import REPO_ROOT

    assert str(REPO_ROOT) not in message, message


def test_gpu_workers_keep_what_cuda_needs_and_cpu_workers_nothing(monkeypatch, tmp_path):
    """An image whose libcuda.so.1 is found only through LD_LIBRARY_PATH: a GPU worker without it
    has no CUDA and would lose every GPU point; a CPU worker needs none of it."""
    monkeypatch.setenv("LD_LIBRARY_PATH", "/usr/local/nvidia/lib64")
    monkeypatch.setenv("NVIDIA_VISIBLE_DEVICES", "all")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    monkeypatch.setenv("LAUNCH_TAX_SECRET_FILE", "/secret")  # never passed on
    gpu = sandbox.worker_environment(tmp_path, gpu=True)
    assert gpu["LD_LIBRARY_PATH"] == "/usr/local/nvidia/lib64" and gpu["NVIDIA_VISIBLE_DEVICES"] == "all"
    assert gpu["CUDA_VISIBLE_DEVICES"] == "0,1" and "LAUNCH_TAX_SECRET_FILE" not in gpu
    assert sandbox.worker_environment(tmp_path, gpu=True, device="1")["CUDA_VISIBLE_DEVICES"] == "1"
    cpu = sandbox.worker_environment(tmp_path, gpu=False)
    assert "LD_LIBRARY_PATH" not in cpu and "NVIDIA_VISIBLE_DEVICES" not in cpu
    assert cpu["CUDA_VISIBLE_DEVICES"] == ""


def test_a_gpu_worker_without_cuda_grades_nobody():
    """The judge sees CUDA, its bare GPU worker does not: EnvironmentProblem (exit 3, nothing
    written), not a class zeroed with "a CUDA device is needed"."""
    from grader.workers import EnvironmentProblem, gpu_canary_problem

    gpu_canary_problem(True, {"cuda": True})
    gpu_canary_problem(False, {"cuda": False})  # a CPU worker is meant not to see it
    with pytest.raises(EnvironmentProblem, match="LD_LIBRARY_PATH"):
        gpu_canary_problem(True, {"cuda": False})


def test_the_judge_asks_its_gpu_canary_whether_it_sees_cuda(monkeypatch):
    """The judge's GPU canary, answered by a worker that sees no CUDA: the judge stops."""
    from grader.workers import EnvironmentProblem, Workers

    def worker_without_cuda(box, limits, requests, *, gpu=False, hide=(), slot=0, device=None):
        return sandbox.Run(answers=[wire.dumps({"cuda": False, "vm_peak_bytes": 0}).encode()], returncode=0, wall_s=1.0)

    monkeypatch.setattr(sandbox, "run", worker_without_cuda)
    workers = Workers(60.0, (), devices.DevicePool([]))
    workers.canary(False)  # a CPU worker: fine
    with pytest.raises(EnvironmentProblem, match="does not"):
        workers.canary(True)


def test_a_whole_grading_on_a_cuda_machine_proves_its_gpu_worker_sees_cuda(monkeypatch):
    """``grade`` on a machine whose judge sees CUDA runs the GPU canary even when the exercises
    it grades have no GPU check (``--only ex1``): a GPU worker that cannot see the device stops
    the grading (EnvironmentProblem, exit 3) before a class is half graded. The machine is
    faked: ``torch.cuda`` says one device; each canary is answered by ``sandbox.run``'s
    stand-in, the GPU one without CUDA."""
    import torch

    from grader.judge import Judge
    from grader.submission import Submission
    from grader.workers import EnvironmentProblem

    asked = []

    def canaries(box, limits, requests, *, gpu=False, hide=(), slot=0, device=None):
        asked.append(gpu)
        return sandbox.Run(answers=[wire.dumps({"cuda": not gpu, "vm_peak_bytes": 0}).encode()], returncode=0)

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(sandbox, "run", canaries)
    judge = Judge(gpu="on", exercises=("ex1",))
    monkeypatch.setattr(judge, "_reference_answers", lambda checks: {})  # the judge's reference is not asked here
    try:
        with pytest.raises(EnvironmentProblem, match="does not"):
            judge.grade(Submission("x"))
    finally:
        judge.close()
    assert asked == [False, True], asked


def test_every_thread_sees_the_same_answer_about_namespaces(monkeypatch):
    # Workers start from several threads; a half-finished trial once made some run unprotected.
    from concurrent.futures import ThreadPoolExecutor

    monkeypatch.setattr(isolation.Namespaces, "_works", None)
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: isolation.Namespaces.available(), range(16)))
    assert len(set(answers)) == 1 and answers[0] == isolation.Namespaces.available(), answers


def canary(request: dict) -> dict:
    box = sandbox.make_box(runtime_files(), {})
    try:
        run = sandbox.run(box, sandbox.Limits(timeout_s=120, memory_bytes=None), [wire.dumps(request).encode()])
    finally:
        sandbox.remove_box(box)
    assert run.answers, run
    return wire.loads(run.answers[0])


def test_a_worker_without_a_passwd_entry_can_import_dynamo():
    # torch's inductor asks getpass.getuser() on import; the worker's uid has no passwd entry.
    facts = canary({"canary": True, "dynamo": True})
    assert facts["user"] == "launch-tax-worker" and facts["dynamo"] == "ok", facts
    if isolation.OWN_USER in isolation.current().gives:
        assert facts["uid"] != 0
    assert facts["keyrings_denied"], facts["keyring_problem"]


SHM = b"""
import os
names = os.listdir("/dev/shm")
with open("/dev/shm/mine", "w") as f:  # inductor and multiprocessing want a writable /dev/shm
    f.write("x")
raise ImportError("SHM " + repr(names))
"""


@pytest.mark.skipif(not isolation.Namespaces.available(), reason="a private /dev/shm needs the mount namespace")
def test_dev_shm_is_writable_and_private(tmp_path):
    marker = "/dev/shm/launch-tax-host-file"
    with open(marker, "w") as f:
        f.write("the host's")
    try:
        run = run_module(SHM, sandbox.Limits(timeout_s=30))
    finally:
        os.remove(marker)
    message = wire.loads(run.answers[0])["import_error"]["message"]
    assert message == "SHM []", message  # nothing of the host's, and the write succeeded


def test_the_address_space_limit_follows_what_import_torch_maps(monkeypatch):
    from grader.workers import Canary, Workers

    workers = Workers(60.0, (), devices.DevicePool([]))
    for peak, limit in ((500 << 20, 4 << 30), (5 << 30, 8 << 30)):
        workers.canaries[False] = Canary(1.0, {"vm_peak_bytes": peak})
        assert workers.limits("ex1", False).memory_bytes == limit


def test_without_root_the_process_cap_leaves_room_for_the_users_own_tasks():
    tasks = procfs.tasks_of(os.getuid())
    assert tasks >= 1 + len(os.listdir(f"/proc/{os.getpid()}/task")) - 1


SLEEPER = b"import time\ntime.sleep(30)\n"


def test_gpu_memory_is_watched_from_the_judge(tmp_path, monkeypatch):
    """A GPU worker whose processes hold more device memory than its share is killed by the
    judge, which asks nvidia-smi (here a stand-in reporting 8000 MiB for every worker process)."""
    fake_nvidia_smi(tmp_path, "0, 24564, 300\n1, 24564, 300\n", "worker, 8000\n")
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    assert nvidia_smi.gpu_memory() == {
        "0": {"total": 24564 << 20, "used": 300 << 20},
        "1": {"total": 24564 << 20, "used": 300 << 20},
    }
    run = run_module(SLEEPER, sandbox.Limits(timeout_s=30, gpu_bytes=4 << 30), gpu=True)
    assert run.out_of_gpu_memory and "GPU memory" in run.failure(), run
    assert run.wall_s < 15, run.wall_s
    fine = run_module(b"X = 1\n", sandbox.Limits(timeout_s=30, gpu_bytes=16 << 30), gpu=True)
    assert fine.failure() is None, fine


def test_gpu_workers_are_spread_over_the_devices_one_at_a_time(monkeypatch):
    """Each GPU worker leases a device (CUDA_VISIBLE_DEVICES) and holds it alone (--gpu-jobs 1):
    two devices, four workers at once, never two on one device."""
    import threading
    import time

    pool = devices.DevicePool(["0", "1"], jobs=1)
    busy, seen, lock = {}, [], threading.Lock()

    def fake_run(box, limits, requests, *, gpu=False, hide=(), slot=0, device=None):
        with lock:
            busy[device] = busy.get(device, 0) + 1
            seen.append((device, busy[device]))
        time.sleep(0.2)
        with lock:
            busy[device] -= 1
        return sandbox.Run(answers=[], returncode=0)

    monkeypatch.setattr(sandbox, "run", fake_run)
    threads = [
        threading.Thread(target=pool.run, args=(None, sandbox.Limits(), []), kwargs={"hide": (), "slot": i})
        for i in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert {d for d, _ in seen} == {"0", "1"} and max(n for _, n in seen) == 1, seen
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    assert devices.visible_ids() == ["2", "3"]


def test_fresh_state_never_kills_or_removes_as_root_or_unleased(tmp_path, monkeypatch):
    """kill(-1) and removing a uid's files are for a worker alone with them: as root (a harness
    running the worker's code in-process) or as an ordinary user they would hit the machine or
    the user: only the work folder is emptied."""
    import importlib.util
    import signal

    spec = importlib.util.spec_from_file_location(
        "worker_under_test", sandbox.Path(__file__).parents[1] / "grader" / "runtime" / "worker.py"
    )
    worker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(worker)
    killed, removed = [], []
    monkeypatch.setattr(worker.os, "kill", lambda pid, sig: killed.append((pid, sig)))

    def remove_owned(folder, uid, depth, keep=""):
        removed.append((folder, uid, depth))
        return 0

    monkeypatch.setattr(worker.cleanup, "remove_owned", remove_owned)
    work = tmp_path / "work"
    work.mkdir()
    (work / "left").write_text("x")
    for uid, pid in ((0, 1), (0, 4242), (1000, 4242)):
        monkeypatch.setattr(worker.os, "getuid", lambda uid=uid: uid)
        monkeypatch.setattr(worker.os, "getpid", lambda pid=pid: pid)
        assert worker._fresh_state(str(work), ["/tmp"], isolated=True) == []
    assert not killed and not removed and not list(work.iterdir())
    monkeypatch.setattr(worker.os, "getuid", lambda: 61003)
    worker._fresh_state(str(work), ["/nonexistent"], isolated=True)
    assert killed == [(-1, signal.SIGKILL)] and removed


def test_memory_a_workers_own_process_still_holds_is_reported(tmp_path):
    """A process of the worker's still alive and holding device memory after the run is named,
    with what it holds; a pid now used by another process (not the one the worker had: another
    start time) is not the worker's. (That another process's memory is never the worker's:
    tests/test_adversarial_class.py, defence gpu-memory-per-process.)"""
    import subprocess

    stayed = subprocess.Popen(["sleep", "60"])
    try:
        smi = fake_nvidia_smi(tmp_path / "bin", "0, 143771, 900\n", f"{stayed.pid}, 512\n")
        started = procfs.process_start(stayed.pid)
        run = sandbox.Run(answers=[], returncode=0, pids={stayed.pid: started})
        left = devices.settle_gpu(run, "0", smi=str(smi), wait_s=0.3)
        assert left and "512 MiB" in left and str(stayed.pid) in left, left
        reused = sandbox.Run(answers=[], returncode=0, pids={stayed.pid: started - 1})
        assert devices.settle_gpu(reused, "0", smi=str(smi), wait_s=0.3) is None
    finally:
        stayed.kill()
        stayed.wait()


# ------------------------------------------------- whether a process's GPU memory can be seen here
# On a rented 4090 (a Docker container) nvidia-smi --query-compute-apps listed no process, or the
# host's pids: every worker seemed to hold 0, its memory cap was never enforced, no leftover was
# reported, and nothing said so. MIG and vGPU print [N/A] or [Not Supported] for the figure.

#: Holds nothing real: stands for ``nvidia_smi.HOLDER`` (which holds GPU memory through torch) on
#: a machine without a GPU; the fake nvidia-smi's apps.csv says what it "holds", by the marker
#: word in its command line ("launch-tax-gpu-memory-probe, 512").
HOLDS = "import sys\nprint('holding', flush=True)\nsys.stdin.read()\n"
PROBE = "launch-tax-gpu-memory-probe"


def holder() -> list[str]:
    import sys

    return [sys.executable, "-c", HOLDS, PROBE]


def test_gpu_bytes_of_tells_holding_nothing_from_cannot_be_seen(tmp_path):
    """0: nvidia-smi lists none of these processes; None: nvidia-smi prints no figure for one of
    them ([N/A], [Not Supported]) or cannot be asked. (Before: 0 for all of these.)"""
    import subprocess

    mine = subprocess.Popen(["sleep", "60"])
    try:
        for apps, want in (
            (f"{mine.pid}, 512\n", 512 << 20),
            ("4242424, 512\n", 0),
            (f"{mine.pid}, [N/A]\n", None),
            (f"{mine.pid}, [Not Supported]\n", None),
        ):
            smi = fake_nvidia_smi(tmp_path / "bin", "0, 24564, 900\n", apps)
            assert nvidia_smi.gpu_bytes_of({mine.pid}, str(smi)) == want, apps
        assert nvidia_smi.gpu_bytes_of({mine.pid}, str(tmp_path / "no-nvidia-smi")) is None
    finally:
        mine.kill()
        mine.wait()


@pytest.mark.parametrize(
    "apps, why",
    [
        ("", "nvidia-smi lists no process while the probe process"),
        (f"{PROBE}, [N/A]\n", "but its memory as [N/A]"),
        (f"{PROBE}, [Not Supported]\n", "but its memory as [Not Supported]"),
        ("4242424, 4250\n4242425, 300\n", "lists pids 4242424, 4242425 (none of them a process here: the host's"),
    ],
    ids=["no-process-listed", "n/a", "not-supported", "host-pids"],
)
def test_a_process_holding_gpu_memory_that_nvidia_smi_does_not_show_is_seen_as_not_visible(tmp_path, apps, why):
    smi = fake_nvidia_smi(tmp_path / "bin", "0, 24564, 900\n", apps)
    seen = nvidia_smi.memory_visibility(str(smi), holder(), settle_s=0.3)
    assert not seen.visible and why in seen.why, seen


def test_a_process_holding_gpu_memory_that_nvidia_smi_shows_is_visible(tmp_path):
    smi = fake_nvidia_smi(tmp_path / "bin", "0, 24564, 900\n", f"{PROBE}, 512\n4242424, 4250\n")
    seen = nvidia_smi.memory_visibility(str(smi), holder())
    assert seen.visible and "512 MiB" in seen.why, seen
    failed = nvidia_smi.memory_visibility(str(smi), [*holder()[:2], "raise SystemExit('no CUDA device here')"])
    assert not failed.visible and failed.why == (
        "not checked: the probe process could not hold GPU memory (no CUDA device here)"
    ), failed


def test_where_gpu_memory_is_not_visible_the_pool_watches_none(monkeypatch):
    """A pool found not to see its workers' memory runs them without a cap and without the look
    after them (a host pid could be charged); a pool that sees it keeps both, as before."""
    caps = []

    def gpu_worker(box, limits, requests, *, gpu=False, hide=(), slot=0, device=None):
        caps.append(limits.gpu_bytes)
        return sandbox.Run(answers=[], returncode=0)

    monkeypatch.setattr(sandbox, "run", gpu_worker)
    monkeypatch.setattr(devices, "settle_gpu", lambda run, device, smi=None, wait_s=5.0: "LEFT")
    memory = {"0": {"total": 24564 << 20, "used": 900 << 20}}
    seen = devices.DevicePool(["0"], memory=memory)
    seen.visibility = nvidia_smi.Visibility(True, "seen")
    assert seen.run(None, sandbox.Limits(), [], hide=(), slot=0).leftovers == ["LEFT"]
    unseen = devices.DevicePool(["0"], memory=memory)
    unseen.visibility = nvidia_smi.Visibility(False, "nvidia-smi lists no process")
    assert unseen.run(None, sandbox.Limits(), [], hide=(), slot=0).leftovers == []
    assert caps == [seen.share_bytes, None] and seen.share_bytes, caps


def test_a_grading_where_gpu_memory_is_not_visible_says_the_cap_is_off(tmp_path, monkeypatch):
    """A whole grading on a CUDA machine whose nvidia-smi lists no process while one of the
    judge's holds GPU memory (a container): the report's staff notes say the per-worker GPU
    memory cap and the leftover check were off, and why; its fingerprint lists it with the
    protections that were off. The machine is faked: ``torch.cuda`` says one device, the
    canaries are answered by ``sandbox.run``'s stand-in, the probe process holds nothing real
    (``HOLDS``) and nvidia-smi is the stand-in, listing no process."""
    import torch

    from grader.judge import Judge
    from grader.submission import Submission
    from grader.verdict import GPU_MEMORY_OFF

    def canaries(box, limits, requests, *, gpu=False, hide=(), slot=0, device=None):
        return sandbox.Run(answers=[wire.dumps({"cuda": True, "vm_peak_bytes": 0}).encode()], returncode=0)

    fake_nvidia_smi(tmp_path / "bin", "0, 24564, 900\n", "")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    monkeypatch.setattr(nvidia_smi, "HOLDER", HOLDS)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "a faked GPU")
    monkeypatch.setattr(sandbox, "run", canaries)
    judge = Judge(gpu="on", exercises=("ex1",))
    monkeypatch.setattr(judge, "_reference_answers", lambda checks: {})  # the judge's reference is not asked here
    try:
        report = judge.grade(Submission("x"))
    finally:
        judge.close()
    said = [n for n in report.staff_notes if n.startswith("GPU memory per process: not visible here (container?)")]
    assert len(said) == 1, report.staff_notes
    assert "nvidia-smi lists no process" in said[0], said
    assert "per-worker GPU memory cap and the leftover check after each GPU worker were off" in said[0], said
    assert GPU_MEMORY_OFF in report.fingerprint["protections_off"], report.fingerprint
