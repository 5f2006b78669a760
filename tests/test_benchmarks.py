"""The benchmarks' code paths, on the CPU (their figures mean nothing here; they are not tested)."""

import importlib.util
import json
import subprocess
import sys

import torch

from coursekit.impl import REPO_ROOT
from coursekit.toymodel import ModelConfig, ToyModel


def test_decode_engine_benchmark_runs_end_to_end_on_the_cpu(tmp_path):
    done = subprocess.run([sys.executable, "benchmarks/decode_engine.py", "--device", "cpu:0", "--quick",
                           "--configs", "toy", "--out", str(tmp_path)], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((tmp_path / "decode-engine.json").read_text())
    toy = report["configs"]["toy"]
    for rows in ("1", "8"):
        assert {"eager_ms", "piecewise_ms", "full_ms", "full_fused_ms", "bare_replay_ms"} <= set(toy["batches"][rows])
    assert {"tau_us", "gpu_node_us"} <= set(toy["sweep"])
    # exercise 9's trade on the engine: on the CPU stand-in nothing is reserved, the KV shape is the toy's
    assert toy["graph_memory"]["one_pool_bytes"] == 0 and toy["graph_memory"]["kv_bytes_per_token"] == 512
    assert "<svg" in (tmp_path / "decode-engine.svg").read_text()


def test_decode_engine_benchmark_on_unfinished_exercises_says_which(tmp_path):
    """A student who runs the benchmark before finishing gets one line naming the exercise, not a
    traceback (the stubs raise NotImplementedError("exercise N: ...")); without the guard, Python
    prints the traceback and this fails."""
    done = subprocess.run([sys.executable, "benchmarks/decode_engine.py", "--impl", "exercises", "--device",
                           "cpu", "--quick", "--configs", "toy", "--out", str(tmp_path)], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stderr[-2000:]
    assert "Traceback" not in done.stderr and "exercise " in done.stderr and "is not written yet" in done.stderr, \
        done.stderr[-2000:]


def load_benchmark():
    spec = importlib.util.spec_from_file_location("decode_engine_benchmark",
                                                  REPO_ROOT / "benchmarks" / "decode_engine.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_big_configuration_is_skipped_in_one_line_without_the_memory(tmp_path):
    done = subprocess.run([sys.executable, "benchmarks/decode_engine.py", "--device", "cpu:0", "--quick",
                           "--configs", "qwen7b", "--out", str(tmp_path)], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    skipped = [line for line in done.stdout.splitlines() if line.startswith("qwen7b: skipped")]
    assert len(skipped) == 1 and "GB" in skipped[0], done.stdout
    report = json.loads((tmp_path / "decode-engine.json").read_text())
    assert report["configs"]["qwen7b"] == {"skipped": skipped[0]}


def test_memory_needed_is_what_the_model_allocates():
    bench = load_benchmark()
    for config in (ModelConfig(), ModelConfig(tie_embeddings=False, n_layers=3, max_seqs=3)):
        for dtype in (torch.float32, torch.bfloat16):
            model = ToyModel(config, dtype=dtype)
            tensors = [model.embedding, model.final_norm, model.k_cache, model.v_cache,
                       *(w for layer in model.layers for w in layer.values())]
            tensors += [] if config.tie_embeddings else [model.lm_head]
            assert bench.model_bytes(config, dtype) == sum(t.numel() * t.element_size() for t in tensors)
    # Qwen2.5-7B's shapes in bf16 with a 1024-token cache: 15.8 GB, so a 24 GB card has room.
    assert 15.7e9 < bench.model_bytes(ModelConfig.qwen2_5_7b(max_seq_len=1024), torch.bfloat16) < 15.8e9


def test_a_row_that_fails_is_skipped_in_one_line(capsys):
    bench = load_benchmark()

    def compile_fails():
        raise RuntimeError("Failed to find C compiler. Please specify via CC environment variable.\nmore")

    bench.optional("compile peer (batch 1)", compile_fails)
    assert capsys.readouterr().out == ("compile peer (batch 1): skipped (RuntimeError: Failed to find C "
                                       "compiler. Please specify via CC environment variable.)\n")


def test_the_prediction_charges_nu_to_eager_and_graph_alike():
    """The sweep's eager slope is what one eager kernel costs in all (its launch and its GPU
    time nu); the prediction must give back that slope for eager and nu for the graph, not
    count nu twice in eager (exercise 1: eager_ms = compute + N*tau + N*nu)."""
    from coursekit.impl import Implementation

    bench = load_benchmark()
    fitted = {"tau_us": 8.0, "gpu_node_us": 1.1, "graph_intercept_ms": 0.5}
    got = bench.predict(Implementation("solutions"), fitted, kernels=430)
    assert abs(got["eager_ms"] - (0.5 + 430 * 8.0 / 1e3)) < 1e-9, got
    assert abs(got["graph_ms"] - (0.5 + (8.0 - 1.1) / 1e3 + 430 * 1.1 / 1e3)) < 1e-9, got
