"""grader/sandbox.py on its own: limits the adversarial corpus cannot reach safely."""

import pytest

from grader import sandbox, wire
from grader.judge import runtime_files

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
    request = {"package": "submission", "module": "launch_model",
               "submission_dir": str(box / "submission"), "probes": []}
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


@pytest.mark.skipif(not sandbox.is_root(), reason="the set-up environment exists only as root")
def test_the_worker_environment_holds_only_what_it_needs():
    run = run_module(ENVIRONMENT, sandbox.Limits(timeout_s=30))
    message = wire.loads(run.answers[0])["import_error"]["message"]
    names = {name for name, _ in eval(message.removeprefix("ENV "))}  # noqa: S307 - our own output
    assert names <= {"PATH", "LANG", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "PYTHONHASHSEED",
                     "LAUNCH_TAX_BOX", "HOME", "TMPDIR", "USER", "LOGNAME", "CUDA_VISIBLE_DEVICES",
                     "TORCHINDUCTOR_COMPILE_THREADS", "PWD", "SHLVL", "_"}, names
    from coursekit.impl import REPO_ROOT

    assert str(REPO_ROOT) not in message, message


def test_every_thread_sees_the_same_answer_about_namespaces(monkeypatch):
    # Workers start from several threads; a half-finished trial once made some run unprotected.
    from concurrent.futures import ThreadPoolExecutor

    monkeypatch.setattr(sandbox, "_NAMESPACES_WORK", None)
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: sandbox.is_root(), range(16)))
    assert len(set(answers)) == 1 and answers[0] == sandbox.is_root(), answers
