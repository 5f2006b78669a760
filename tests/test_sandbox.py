"""grader/sandbox.py on its own: limits the adversarial corpus cannot reach safely."""

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


def run_module(source: bytes, limits: sandbox.Limits, gpu: bool = False) -> sandbox.Run:
    files = {"submission/__init__.py": b"", "submission/launch_model.py": source}
    box = sandbox.make_box(runtime_files(), files)
    request = {"package": "submission", "module": "launch_model",
               "submission_dir": str(box / "submission"), "probes": []}
    (box / "request.json").write_text(wire.dumps(request))
    try:
        return sandbox.run(box, limits, gpu=gpu)
    finally:
        sandbox.remove_box(box)


def test_total_memory_is_watched_even_without_an_address_space_limit():
    # gpu=True: no RLIMIT_AS (CUDA needs the address space), so only the watchdog can stop it.
    run = run_module(HOG, sandbox.Limits(timeout_s=30, total_rss_bytes=512 << 20), gpu=True)
    assert run.out_of_memory and run.failure() == "used more memory than allowed", run
    assert run.wall_s < 20, run.wall_s


def test_a_quiet_worker_sends_its_result():
    run = run_module(b"X = 1\n", sandbox.Limits(timeout_s=30))
    assert run.failure() is None and wire.loads(run.result) == {"probes": []}, run


def test_every_thread_sees_the_same_answer_about_namespaces(monkeypatch):
    # Workers start from several threads; a half-finished trial once made some run unprotected.
    from concurrent.futures import ThreadPoolExecutor

    monkeypatch.setattr(sandbox, "_NAMESPACES_WORK", None)
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: sandbox.is_root(), range(16)))
    assert len(set(answers)) == 1 and answers[0] == sandbox.is_root(), answers
