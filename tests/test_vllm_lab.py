"""The Part B lab (``coursekit.vllm_lab``) without vLLM and without a GPU.

CI has no vLLM, so everything vLLM-specific is read from the record of vLLM 0.26.0's source
(``coursekit/data/vllm-0.26.0-formats.json``, written by ``python -m
coursekit.record_vllm_formats``): the lab's command lines may use only flags recorded there, and
its log parser is tested on lines built from the recorded format strings (the %-fields and
f-string fields filled with sample values, behind vLLM's recorded log prefix). No timing is
asserted; the synthetic latencies are exact numbers the analysis must give back.
"""

from __future__ import annotations

import json
import re
import shlex
import xml.etree.ElementTree as ET

import pytest

from coursekit import lesson
from coursekit import vllm_lab as lab
from coursekit.impl import Implementation

RECORDED = json.loads(lab.FORMATS.read_text(encoding="ascii"))
FMT = RECORDED["formats"]
PREFIX_FIELDS = {"levelname": "INFO", "asctime": "12-04 08:00:00",
                 "fileinfo": "gpu_model_runner.py", "lineno": 1234}
ENGINE = "(EngineCore pid=4242) "  # what vLLM 0.26.0 puts before its engine process's lines

# Qwen2.5-0.5B's config.json, the fields the lab reads: 24 layers, 2 KV heads of 896/14 = 64.
QWEN05 = {"num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2,
          "hidden_size": 896, "torch_dtype": "bfloat16"}
PER_TOKEN = 2 * 24 * 2 * 64 * 2  # 12288 bytes
K_ESTIMATE = 12 * 24 + 40


@pytest.fixture(scope="module")
def solutions():
    return Implementation("solutions")


def prefix(message: str) -> str:
    """A log line as vLLM 0.26.0 writes it (its recorded format, empty VLLM_LOGGING_PREFIX)."""
    fmt = RECORDED["log_prefix"]["format"].replace("{envs.VLLM_LOGGING_PREFIX}", "")
    return fmt % {**PREFIX_FIELDS, "message": message}


def fill_fstring(text: str, values: dict) -> str:
    """An f-string recorded with its fields in braces, each field replaced by ``values``
    (keyed by the field's expression), or ``x``."""
    return re.sub(r"\{([^{}]*)\}", lambda m: str(values.get(m.group(1).split("!")[0], "x")), text)


def engine_config(dtype="torch.bfloat16", kv="auto") -> str:
    fields = fill_fstring(FMT["engine_config_fields"]["text"],
                          {"self.model_config.dtype": dtype, "self.cache_config.cache_dtype": kv,
                           "self.model_config.enforce_eager": "False"})
    return FMT["engine_config"]["text"] % ("0.26.0", fields)


def graph_line(secs, gib, key="graph_capture") -> str:
    return FMT[key]["text"] % (secs, gib)


# --- the record and the commands ---------------------------------------------------------------


def test_the_record_is_vllm_0_26_0_with_file_and_line_for_each_flag_and_format():
    assert RECORDED["vllm_version"] == lab.VLLM_VERSION == "0.26.0"
    for flag, where in RECORDED["flags"].items():
        assert flag in where["options"] and where["line"] > 0 and where["file"].startswith("vllm/")
    for key, where in FMT.items():
        assert where["text"] and where["line"] > 0, key
    assert RECORDED["cli"]["command"] == ["vllm", "bench", "latency"]


@pytest.mark.parametrize("variant", list(lab.VARIANTS))
def test_commands_use_only_recorded_flags(variant, tmp_path):
    words = lab.bench_command(variant, "m", 8, 32, 32, str(tmp_path / "r.json"))
    assert words[:3] == RECORDED["cli"]["command"]
    flags = [w for w in words if w.startswith("-")]
    unknown = [f for f in flags if f not in RECORDED["flags"]]
    assert not unknown, (f"{variant}: flags not recorded from vLLM 0.26.0's source: {unknown}; "
                         "re-record with python -m coursekit.record_vllm_formats")
    if "--compilation-config" in words:
        config = json.loads(words[words.index("--compilation-config") + 1])
        assert set(config) == {RECORDED["cudagraph_modes"]["json_key"]}
        # vLLM reads a string mode as CUDAGraphMode[value.upper()] (recorded validator)
        assert "value.upper()" in RECORDED["cudagraph_modes"]["from_string"]["text"]
        assert config["cudagraph_mode"].upper() in RECORDED["cudagraph_modes"]["members"]
    else:
        assert variant == "eager" and "--enforce-eager" in words


def test_dry_run_prints_every_command_with_recorded_flags_only(capsys, tmp_path):
    assert lab.main(["run", "--dry-run", "--out", str(tmp_path), "--batch-sizes", "1", "4"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(lab.VARIANTS) * 2 * len(lab.DEFAULT_OUTPUT_LENS)
    for line in lines:
        words = shlex.split(line.split(" > ")[0])
        assert {w for w in words if w.startswith("--")} <= set(RECORDED["flags"])
        assert words[0] == "VLLM_USE_V2_MODEL_RUNNER=0", (
            f"every command pins vLLM's V1 model runner; got {line!r}")


def test_the_v1_model_runner_is_pinned():
    # vLLM 0.26.0's envs.py reads VLLM_USE_V2_MODEL_RUNNER with bool(int(value)): "0" -> False,
    # which VllmConfig.use_v2_model_runner returns as is (None would let vLLM pick V2).
    assert bool(int(lab.RUN_ENV["VLLM_USE_V2_MODEL_RUNNER"])) is False


# --- the parser on format-derived text ---------------------------------------------------------


def test_the_recorded_prefix_is_the_one_vllm_prints():
    assert prefix("hello") == "INFO 12-04 08:00:00 [gpu_model_runner.py:1234] hello"


# (recorded key, the values for its %-fields, parse_log's key, what it must give)
CASES = [
    ("model_loading", ("0.93", 3.25), "model_loading", {"gib": 0.93, "secs": 3.25}),
    ("model_loading_v2", ("0.93", 3.25), "model_loading", {"gib": 0.93, "secs": 3.25}),
    ("kv_cache_memory", ("17.25",), "kv_cache_memory", {"gib": 17.25}),
    ("kv_cache_tokens", (f"{1507328:,}",), "kv_cache_tokens", 1507328),
    ("max_concurrency", (f"{2048:,}", 736.0), "max_concurrency",
     {"tokens_per_request": 2048, "times": 736.0}),
    ("graph_memory_estimate", (0.31,), "graph_memory_estimate", {"gib": 0.31}),
    ("graph_capture", (12.4, 0.3), "graph_capture", {"secs": 12.0, "gib": 0.3}),
    ("graph_capture_v2", (7, 0.25), "graph_capture", {"secs": 7.0, "gib": 0.25}),
    ("graph_pool_memory", (0.3, 0.31, 0.01, 3.3), "graph_pool_memory",
     {"actual": 0.3, "estimated": 0.31}),
    ("graph_capture_skipped", (), "graph_capture_skipped", True),
    ("enforce_eager", (), "enforce_eager", True),
]


@pytest.mark.parametrize("key, values, parsed, expected", CASES, ids=[c[0] for c in CASES])
def test_parser_reads_each_recorded_format(key, values, parsed, expected):
    message = FMT[key]["text"] % values if values else FMT[key]["text"]
    for line in (prefix(message), ENGINE + prefix(message)):
        facts = lab.parse_log(f"{prefix('something else')}\n{line}\n")
        assert facts.get(parsed) == expected, (f"{key}: from {line!r} expected {expected!r}, "
                                               f"got {facts.get(parsed)!r}")


@pytest.mark.parametrize("key", [k for k in FMT if k.startswith("mode_changed_")])
def test_parser_sees_vllm_change_the_graph_mode(key):
    mode = key.removeprefix("mode_changed_").upper()
    message = "CUDAGraphMode.FULL is not supported with X backend (support: Y)" + FMT[key]["text"]
    assert lab.parse_log(prefix(message))["mode_changed"] == {"mode": mode}


def test_parser_reads_the_engine_config_line():
    facts = lab.parse_log(prefix(engine_config()))
    assert facts["engine_config"] == {"version": "0.26.0", "dtype": "bfloat16", "kv_dtype": "auto"}


def test_parser_reads_the_benchmark_printout():
    avg = fill_fstring(FMT["bench_avg_latency"]["text"], {"np.mean(latencies)": 0.7})
    lines = [fill_fstring(FMT["bench_percentile"]["text"],
                          {"percentage": p, "percentile": p / 100})
             for p in RECORDED["latency_json"]["percentiles"]]
    facts = lab.parse_log("\n".join(["Warming up...", avg, *lines]))
    assert facts["bench_avg_latency"] == {"secs": 0.7}
    assert facts["bench_percentiles"][50] == 0.5
    assert lab.latency_seconds(None, facts) == 0.5  # the median before the average
    del facts["bench_percentiles"]
    assert lab.latency_seconds(None, facts) == 0.7  # the average when no median was logged


def test_latency_json_keys_are_the_recorded_ones():
    keys = RECORDED["latency_json"]["keys"]
    data = {keys[0]: 0.7, keys[1]: [0.6, 0.8], keys[2]: {"50": 0.65}}
    assert lab.latency_seconds(json.dumps(data), {}) == 0.65
    assert lab.latency_seconds(json.dumps({keys[0]: 0.7}), {}) == 0.7


def test_ansi_colour_and_progress_bars_do_not_hide_a_line():
    line = "\x1b[32mINFO\x1b[0m \x1b[90m12-04 08:00:00\x1b[0m " + FMT["kv_cache_tokens"]["text"] % (
        "1,000",)
    assert lab.parse_log("Capturing CUDA graphs: 50%|#####\r" + line)["kv_cache_tokens"] == 1000


# --- a whole synthetic run ---------------------------------------------------------------------

#: ms per decode step by variant and batch size; prefill 20 ms; KV tokens and graph GiB.
STEP_MS = {"eager": {1: 12.0, 8: 14.0}, "none": {1: 8.0, 8: 9.5},
           "piecewise": {1: 5.0, 8: 6.0}, "full_decode_only": {1: 3.0, 8: 4.0},
           "full_and_piecewise": {1: 3.2, 8: 4.1}}
KV_TOKENS = {"eager": 1_540_000, "none": 1_539_000, "piecewise": 1_515_000,
             "full_decode_only": 1_510_000, "full_and_piecewise": 1_500_000}
GRAPH_GIB = {"piecewise": 0.25, "full_decode_only": 0.30, "full_and_piecewise": 0.45}


def synthetic_log(variant: str, latency_s: float) -> str:
    lines = [prefix(engine_config())]
    if variant == "eager":
        lines.append(prefix(FMT["enforce_eager"]["text"]))
    lines += [ENGINE + prefix(FMT["model_loading"]["text"] % ("0.93", 3.2)),
              ENGINE + prefix(FMT["kv_cache_memory"]["text"] % ("17.6",)),
              prefix(FMT["kv_cache_tokens"]["text"] % (f"{KV_TOKENS[variant]:,}",)),
              prefix(FMT["max_concurrency"]["text"] % ("2,048", KV_TOKENS[variant] / 2048))]
    if variant in GRAPH_GIB:
        lines += [ENGINE + prefix(FMT["graph_memory_estimate"]["text"] % (GRAPH_GIB[variant],)),
                  "Capturing CUDA graphs (decode, FULL): 100%|##########| 67/67\r",
                  ENGINE + prefix(graph_line(9, GRAPH_GIB[variant]))]
    elif variant == "none":
        lines.append(ENGINE + prefix(FMT["graph_capture_skipped"]["text"]))
    lines += ["Warming up...", fill_fstring(FMT["bench_avg_latency"]["text"],
                                            {"np.mean(latencies)": latency_s})]
    return "\n".join(lines) + "\n"


def write_folder(folder, variants=tuple(STEP_MS), with_config=True, with_json=True):
    runs = lab.plan(list(variants), [1, 8], [32, 160])
    (folder / "runs").mkdir(parents=True)
    keys = RECORDED["latency_json"]["keys"]
    for run in runs:
        step_ms = STEP_MS[run["variant"]][run["batch_size"]]
        latency = (20.0 + (run["output_len"] - 1) * step_ms) / 1e3
        (folder / run["log"]).write_text(synthetic_log(run["variant"], latency), encoding="utf-8")
        if with_json:
            (folder / run["json"]).write_text(json.dumps(
                {keys[0]: latency, keys[1]: [latency], keys[2]: {"50": latency}}))
        run["returncode"] = 0
    manifest = {"lab": "vllm_lab", "vllm": "0.26.0", "gpu": "NVIDIA GeForce RTX 4090 (synthetic)",
                "model": "Qwen/Qwen2.5-0.5B-Instruct", "input_len": 32,
                "variants": list(variants), "runs": runs}
    (folder / lab.MANIFEST).write_text(json.dumps(manifest))
    if with_config:
        (folder / lab.MODEL_CONFIG).write_text(json.dumps(QWEN05))
    return folder


def test_analyze_recovers_the_decode_times_tau_eff_and_kv_tokens(tmp_path, solutions):
    record = lab.analyze(write_folder(tmp_path / "run"), solutions)
    for variant, steps in STEP_MS.items():
        got = record["variants"][variant]["decode_ms"]
        assert got == pytest.approx({str(b): ms for b, ms in steps.items()}), variant
    assert record["kernels_per_step"] == K_ESTIMATE
    assert "ESTIMATE" in record["kernels_per_step_source"]
    assert record["baseline"] == "none"  # same compiled kernels: only the graphs differ
    for variant in lab.GRAPH_VARIANTS:
        for b in (1, 8):
            expected = (STEP_MS["none"][b] - STEP_MS[variant][b]) * 1e3 / (K_ESTIMATE - 1)
            assert record["tau_eff_us"][variant][str(b)] == pytest.approx(expected)
    assert record["tau_us"] == lesson.H200_TAU_EAGER_US
    assert record["kv_bytes_per_token"] == PER_TOKEN
    for variant, gib in GRAPH_GIB.items():
        row = record["kv_tokens_forgone"][variant]
        assert row["from_graph_memory"] == round(gib * 1024 ** 3) // PER_TOKEN
        assert row["measured"] == KV_TOKENS["none"] - KV_TOKENS[variant]  # tau_eff's baseline
    assert record["variants"]["piecewise"]["graph_capture_s"] == 9
    assert record["variants"]["none"]["graph_skipped"] is True


def test_analyze_writes_json_and_svg(tmp_path, capsys):
    folder = write_folder(tmp_path / "run")
    assert lab.main(["analyze", str(folder), "--impl", "solutions",
                     "--kernels-per-step", "300"]) == 0
    out = capsys.readouterr().out
    assert "given (--kernels-per-step)" in out and "wrote" in out
    record = json.loads((folder / lab.RESULT_JSON).read_text())
    assert record["kernels_per_step"] == 300
    svg = ET.parse(folder / lab.RESULT_SVG).getroot()
    names = {g.get("data-name") for g in svg.iter("{http://www.w3.org/2000/svg}g")}
    assert {"(a) decode step time", "(b) speedup over --enforce-eager",
            "(c) tau_eff: µs per launch the graphs removed"} <= names


def test_without_the_json_the_log_s_printout_is_used(tmp_path, solutions):
    record = lab.analyze(write_folder(tmp_path / "run", with_json=False), solutions)
    assert record["variants"]["eager"]["decode_ms"]["1"] == pytest.approx(12.0)


def test_eager_is_the_baseline_when_none_was_not_run(tmp_path, solutions):
    variants = ("eager", "full_decode_only")
    record = lab.analyze(write_folder(tmp_path / "run", variants), solutions, kernels=301)
    assert record["baseline"] == "eager"
    assert record["tau_eff_us"]["full_decode_only"]["1"] == pytest.approx(9.0e3 / 300)
    measured = record["kv_tokens_forgone"]["full_decode_only"]["measured"]
    assert measured == KV_TOKENS["eager"] - KV_TOKENS["full_decode_only"]


def test_tau_from_a_launch_tax_json_is_fitted_by_exercise_1(tmp_path, solutions):
    own = tmp_path / "launch-tax.json"
    own.write_text(lesson.H200_ANCHOR.read_text())
    record = lab.analyze(write_folder(tmp_path / "run"), solutions, tau_from=own)
    assert record["tau_us"] == pytest.approx(lesson.H200_TAU_EAGER_US, rel=1e-6)
    assert str(own) in record["tau_source"]


def test_a_bad_tau_from_file_is_named_as_tau_from(tmp_path, solutions):
    bad = tmp_path / "launch-tax.json"
    bad.write_text("{}")
    with pytest.raises(ValueError, match=r"^--tau-from: .*not a launch-tax measurement"):
        lab.analyze(write_folder(tmp_path / "run"), solutions, tau_from=bad)
    with pytest.raises(ValueError, match=r"^--tau-from: cannot read "):
        lab.analyze(tmp_path / "run", solutions, tau_from=tmp_path / "missing.json")


def test_unfinished_exercises_leave_their_figures_out_and_say_so(tmp_path, capsys):
    folder = write_folder(tmp_path / "run")
    assert lab.main(["analyze", str(folder)]) == 0  # exercises/: the stubs
    out = capsys.readouterr().out
    assert "exercise 1 is not finished" in out and "exercise 9 is not finished" in out
    record = json.loads((folder / lab.RESULT_JSON).read_text())
    assert "tau_eff_us" not in record and "kv_tokens_forgone" not in record
    assert (folder / lab.RESULT_SVG).is_file()


# --- refusals and bad input --------------------------------------------------------------------


def test_run_refuses_without_cuda_or_vllm_in_one_line(tmp_path, capsys):
    if lab.refusal() is None:
        pytest.skip("this machine has CUDA and vLLM 0.26.0")
    assert lab.main(["run", "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("vllm_lab run: needs a CUDA GPU and vLLM 0.26.0; here: ")
    assert not (tmp_path / "out").exists()


def test_refusal_names_what_is_missing(monkeypatch):
    import importlib.metadata

    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "0.26.0")
    assert lab.refusal() is None
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "0.11.0")
    assert "vLLM 0.11.0 is installed" in lab.refusal()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert "no CUDA device" in lab.refusal()


@pytest.mark.parametrize("argv, named", [
    (["run", "--batch-sizes", "0"], "--batch-sizes"),
    (["run", "--output-lens", "32"], "--output-lens"),
    (["run", "--output-lens", "32", "64", "--max-model-len", "64"], "--max-model-len"),
    (["run", "--gpu-memory-utilization", "1.5"], "--gpu-memory-utilization"),
    (["run", "--gpu-memory-utilization", "0"], "--gpu-memory-utilization"),
    (["run", "--gpu-memory-utilization", "nan"], "--gpu-memory-utilization"),
    (["run", "--variants", "full"], "--variants"),
    (["analyze", "FOLDER", "--kv-shape", "24,2,64"], "--kv-shape"),
    (["analyze", "FOLDER", "--kernels-per-step", "-3"], "--kernels-per-step"),
])
def test_bad_input_names_the_argument(argv, named, capsys):
    assert lab.main(argv + ["--dry-run"] if argv[0] == "run" else argv) == 2
    assert named in capsys.readouterr().err


def test_a_folder_that_is_not_a_run_is_named(tmp_path, capsys):
    assert lab.main(["analyze", str(tmp_path), "--impl", "solutions"]) == 2
    err = capsys.readouterr().err
    assert "FOLDER" in err and "runs.json" in err and "Traceback" not in err


def test_without_a_model_config_kv_shape_is_asked_for(tmp_path, capsys, solutions):
    folder = write_folder(tmp_path / "run", with_config=False)
    assert lab.main(["analyze", str(folder), "--impl", "solutions"]) == 2
    assert "--kv-shape" in capsys.readouterr().err
    record = lab.analyze(folder, solutions, kernels=300,
                         shape={"n_layers": 24, "n_kv_heads": 2, "head_dim": 64, "dtype_bytes": 2})
    assert record["kv_bytes_per_token"] == PER_TOKEN


def test_help_says_nothing_has_run_on_a_gpu(capsys):
    assert lab.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "nothing of this lab has run on a GPU" in out and "ESTIMATE" in out


def test_run_wiring_with_a_stand_in_for_vllm(tmp_path, monkeypatch, capsys):
    """``run`` end to end with vLLM replaced: each command's log and JSON land where the manifest
    says, and the analysis reads them back (the subprocess is faked, nothing is timed)."""
    import torch

    def fake_run(command, stdout, stderr, env, timeout):
        variant = next(v for v, (_, flags) in lab.VARIANTS.items() if flags[-1] == command[-1])
        batch = int(command[command.index("--batch-size") + 1])
        out_len = int(command[command.index("--output-len") + 1])
        latency = (20.0 + (out_len - 1) * STEP_MS[variant][batch]) / 1e3
        stdout.write(synthetic_log(variant, latency))
        with open(command[command.index("--output-json") + 1], "w") as f:
            json.dump({"avg_latency": latency, "percentiles": {"50": latency}}, f)
        assert env["NO_COLOR"] == "1"
        assert env["VLLM_USE_V2_MODEL_RUNNER"] == "0"
        return type("Done", (), {"returncode": 0})()

    monkeypatch.setattr(lab, "refusal", lambda: None)
    monkeypatch.setattr(lab.subprocess, "run", fake_run)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda: "stand-in GPU")
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / lab.MODEL_CONFIG).write_text(json.dumps(QWEN05))  # as if saved by transformers
    monkeypatch.setitem(__import__("sys").modules, "transformers", None)  # config not refetched
    assert lab.main(["run", "--out", str(folder), "--batch-sizes", "1", "8", "--impl",
                     "solutions"]) == 0
    record = json.loads((folder / lab.RESULT_JSON).read_text())
    assert record["gpu"] == "stand-in GPU"
    manifest = json.loads((folder / lab.MANIFEST).read_text())
    assert manifest["env"]["VLLM_USE_V2_MODEL_RUNNER"] == "0"
    assert record["variants"]["full_decode_only"]["decode_ms"] == pytest.approx({"1": 3.0,
                                                                                 "8": 4.0})
