"""The benchmarks' code paths, on the CPU (their figures mean nothing here; they are not tested)."""

import json
import subprocess
import sys

from coursekit.impl import REPO_ROOT


def test_decode_engine_benchmark_runs_end_to_end_on_the_cpu(tmp_path):
    done = subprocess.run([sys.executable, "benchmarks/decode_engine.py", "--device", "cpu", "--quick",
                           "--configs", "toy", "--out", str(tmp_path)], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((tmp_path / "decode-engine.json").read_text())
    toy = report["configs"]["toy"]
    for rows in ("1", "8"):
        assert {"eager_ms", "piecewise_ms", "full_ms", "full_fused_ms", "bare_replay_ms"} <= set(toy["batches"][rows])
    assert {"tau_us", "gpu_node_us"} <= set(toy["sweep"])
    assert "<svg" in (tmp_path / "decode-engine.svg").read_text()
